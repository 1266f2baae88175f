// Fuzz target (d): what `tformer translate` does with a line a user typed.
// Each input is text as it would come on stdin; it is cut into lines as
// std::getline cuts it, and each line goes where run_translate sends it:
// blank lines are echoed, the others go through a tokenizer (d2l's words and
// a SentencePiece model) to ids and through a small model, greedy or beam 2,
// and back to text. The SentencePiece model runs the fused layers, as
// `tformer translate` runs a whole-corpus checkpoint; the word model the
// composed ones, as a d2l-preset checkpoint. The models and tokenizers are
// made once, in-process, from the first 40 lines of the bundled corpus
// (fuzz/data/fra-40.txt); their weights are untrained, which is all decoding
// needs to run its course.
//
// run_translate turns a ValueError into an empty output line and goes on
// with the next line; any other exception would end the whole run, losing
// the lines after it. So here a ValueError is fine and everything else is a
// finding. Checked too: ids in range, the output is valid UTF-8, the source
// is cut at the model's limit, decoding stops at max_steps.
#include "fuzz/fuzz_util.hpp"

#include "core/core.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/seq2seq.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace {
using namespace tformer;

struct Translator {
    tasks::TokenizerPair tok;
    core::Generator gen{7};
    std::shared_ptr<nn::EncoderDecoder> model;
    tasks::TranslateOptions options;
};

std::unique_ptr<Translator> words, pieces;

[[noreturn]] void finding(const std::string& what) { tformer::fuzz::finding("fuzz_translate", what); }

std::unique_ptr<Translator> make_translator(tasks::TokenizerPair tok, int64_t max_len, bool d2l) {
    auto t = std::make_unique<Translator>();
    t->tok = std::move(tok);
    tasks::ModelConfig config;
    config.src_vocab_size = t->tok.src->size();
    config.tgt_vocab_size = t->tok.tgt->size();
    config.num_steps = max_len;
    config.transformer = {.key_size = 8,
                          .query_size = 8,
                          .value_size = 8,
                          .num_hiddens = 8,
                          .norm_shape = 8,
                          .ffn_num_input = 8,
                          .ffn_num_hiddens = 16,
                          .num_heads = 2,
                          .num_layers = 1,
                          .dropout = 0,
                          // as `tformer translate` loads them: a whole-corpus model (SentencePiece) runs the
                          // fused layers, decoding through core::cached_attention; a d2l one the composed layers
                          .fused = !d2l};
    config.tie_embeddings = t->tok.joint();
    config.scaled_embedding_init = !d2l;
    t->model = tasks::build_model(config, t->gen);
    t->options = {.max_len = max_len, .pad_to = d2l ? max_len : 0, .decode = {}};
    return t;
}

void translate_line(Translator& t, const std::string& line, int64_t beam) {
    try {
        const std::vector<int64_t> ids = t.tok.src->encode(line);
        for (int64_t id : ids)
            if (id < 0 || id >= t.tok.src->size()) finding("encode gave an id outside the vocabulary");
        (void)t.tok.src->decode(ids);
        tasks::TranslateOptions o = t.options;
        o.decode.beam = beam;
        // three generated tokens: what the input decides (its ids, their cut, the source padding, the
        // encoder, the cache of the first steps) is all run; more steps of an untrained model add time only
        o.decode.max_steps = 3;
        const tasks::Translation tr = tasks::translate(*t.model, t.tok, line, o);
        if (!tasks::is_valid_utf8(tr.text)) finding("the translation is not valid UTF-8");
        if (static_cast<int64_t>(tr.decoded.tokens.size()) > o.decode.max_steps)
            finding("decoding went past max_steps");
        if (static_cast<int64_t>(tr.src_tokens.size()) > o.max_len)
            finding("the source was not cut at the model's limit");
    } catch (const ValueError&) {
        // run_translate: an empty line out, a message with the line number, the next line
    }
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    fuzz::one_thread();
    const std::string path = std::string(TFORMER_SOURCE_DIR) + "/fuzz/data/fra-40.txt";
    const tasks::FraEngData d = tasks::load_fra_eng({.path = path, .num_steps = 10});
    words = make_translator(
        {std::make_shared<tasks::WordTokenizer>(d.src_vocab), std::make_shared<tasks::WordTokenizer>(d.tgt_vocab)}, 10,
        true);
    const std::string text = tasks::read_text_file(path, "fuzz_translate");
    tasks::FraEngReport report;
    std::vector<std::string> sentences;
    for (const auto& p : tasks::read_valid_lines(text, 0, report)) {
        sentences.emplace_back(p.src);
        sentences.emplace_back(p.tgt);
    }
    auto sp = tasks::SentencePieceTokenizer::train(sentences, {.vocab_size = 100, .threads = 1});
    pieces = make_translator({sp, sp}, 16, false);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const int64_t beam = size % 2 ? 2 : 1;
    // lines as std::getline gives them: cut at '\n', no empty line after a final '\n'
    int lines = 0;
    for (size_t start = 0; start < input.size() && lines < 4; ++lines) {
        size_t end = input.find('\n', start);
        if (end == std::string_view::npos) end = input.size();
        const std::string line(input.substr(start, end - start));
        start = end + 1;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // echoed as a blank line
        translate_line(*words, line, beam);
        translate_line(*pieces, line, beam);
    }
    return 0;
}
