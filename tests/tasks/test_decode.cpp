// tasks/decode and tasks/batch_translate: the batched searches against the
// plain reference search, batch by batch and thread by thread; and, on the
// default translation model, batched against one sentence at a time.
#include "core/core.hpp"
#include "tasks/batch_translate.hpp"
#include "tasks/corpus.hpp"
#include "tasks/decode.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::tasks;
using core::Tensor;

namespace {
// A translation model of 30 words a side (d 16, 2 heads, 2 blocks), untrained:
// its choices are arbitrary but fixed, and <eos> comes at any step, so
// hypotheses end at every step and the batches shrink.
struct SmallTranslator {
    core::Generator gen{11};
    std::shared_ptr<nn::EncoderDecoder> model;
    TokenizerPair tok;
    SmallTranslator() {
        ModelConfig c;
        c.task = "translate";
        c.src_vocab_size = c.tgt_vocab_size = 30;
        c.num_steps = 12;
        c.transformer = {.key_size = 16,
                         .query_size = 16,
                         .value_size = 16,
                         .num_hiddens = 16,
                         .norm_shape = 16,
                         .ffn_num_input = 16,
                         .ffn_num_hiddens = 32,
                         .num_heads = 2,
                         .num_layers = 2,
                         .dropout = 0.0,
                         .fused = true};
        c.tie_embeddings = true;
        model = build_model(c, gen);
        // <eos> likely enough that hypotheses end at every step
        model->decoder->dense->bias.value().data<float>()[Tokenizer::kEos] += 1.0f;
        TokenLines words(1);
        for (int i = 0; i < 26; ++i) words[0].push_back(std::string(1, static_cast<char>('a' + i)));
        const Vocab vocab(words, 0, {"<pad>", "<bos>", "<eos>"});  // <unk> 0, <pad> 1, <bos> 2, <eos> 3, a..z
        tok = {std::make_shared<WordTokenizer>(vocab), std::make_shared<WordTokenizer>(vocab)};
    }
};

// n sentences of 1 to 11 random letters (some blank, some of unknown characters, as input files have)
std::vector<std::string> letter_sentences(int n, uint64_t seed) {
    core::Generator gen(seed);
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
        const auto len = static_cast<int>(core::randint({1}, 1, 12, gen).item());
        std::string s;
        for (int j = 0; j < len; ++j)
            s += fmt::format("{} ", static_cast<char>('a' + core::randint({1}, 0, 26, gen).item()));
        out.push_back(i % 17 == 5 ? "  " : i % 23 == 7 ? "%%" : s);
    }
    return out;
}

// The source (1, S) and length (1) of one prepared sentence
std::pair<Tensor, Tensor> one_source(const PreparedSource& p) {
    const auto S = static_cast<int64_t>(p.ids.size());
    return {core::from_vector(p.ids, {1, S}), core::from_vector(std::vector<int64_t>{S}, {1})};
}
}  // namespace

TEST_CASE("decode_batch: one sentence gives the reference search's tokens and score, bit for bit", "[tasks][decode]") {
    SmallTranslator t;
    for (const std::string& sentence : letter_sentences(40, 1)) {
        if (sentence.find_first_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos) continue;
        const auto [src, lens] = one_source(prepare_source(*t.tok.src, sentence, 12));
        for (int64_t K : {1, 2, 4})
            for (double alpha : {0.0, 1.0})
                for (bool exhaustive : {false, true}) {
                    const DecodeOptions o{.bos = 2,
                                          .eos = 3,
                                          .max_steps = 12,
                                          .beam = K,
                                          .length_penalty = alpha,
                                          .exhaustive = exhaustive};
                    const Decoded fast = decode_batch(*t.model, src, lens, o).front();
                    const Decoded ref = K == 1 ? reference::greedy_decode(*t.model, src, lens, o).front()
                                               : reference::beam_decode_batch(*t.model, src, lens, o).front();
                    INFO(sentence << " K " << K << " alpha " << alpha << " exhaustive " << exhaustive);
                    CHECK(fast.tokens == ref.tokens);
                    CHECK(fast.score == ref.score);  // the same floats, summed in the same order
                }
    }
}

TEST_CASE("decode_batch: a batch gives each sentence what the reference gives it alone, and finished rows leave",
          "[tasks][decode]") {
    SmallTranslator t;
    std::vector<PreparedSource> sources;
    for (const std::string& s : letter_sentences(60, 2))
        if (s.find_first_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos)
            sources.push_back(prepare_source(*t.tok.src, s, 12));
    const auto B = static_cast<int64_t>(sources.size());
    std::vector<int64_t> ids(static_cast<size_t>(B * 12), Tokenizer::kPad), lens;
    for (int64_t b = 0; b < B; ++b) {
        std::copy(sources[b].ids.begin(), sources[b].ids.end(), ids.begin() + b * 12);
        lens.push_back(static_cast<int64_t>(sources[b].ids.size()));
    }
    const Tensor src = core::from_vector(ids, {B, 12}), len = core::from_vector(lens, {B});
    int ended_early = 0;
    for (int64_t K : {1, 3}) {
        const DecodeOptions o{.bos = 2, .eos = 3, .max_steps = 12, .beam = K, .length_penalty = 0.6};
        const std::vector<Decoded> batch = decode_batch(*t.model, src, len, o);
        for (int64_t b = 0; b < B; ++b) {
            const auto [one, one_len] = one_source(sources[b]);
            const Decoded ref = K == 1 ? reference::greedy_decode(*t.model, one, one_len, o).front()
                                       : reference::beam_decode_batch(*t.model, one, one_len, o).front();
            INFO("K " << K << " sentence " << b);
            CHECK(batch[b].tokens == ref.tokens);
            CHECK(batch[b].score == Approx(ref.score).margin(1e-5));
            ended_early += batch[b].tokens.size() < 11;
        }
    }
    INFO(ended_early << " translations ended before the last step");
    CHECK(ended_early > 20);  // rows did leave the batch before the last step
    CHECK(ended_early < 2 * B - 10);
}

TEST_CASE("beam search stops a sentence once it is decided, and the exhaustive search never scores lower",
          "[tasks][decode]") {
    // The exhaustive search runs the same beam further, so its finished
    // hypotheses include the early search's: its answer scores at least as
    // well, and is the same one unless a longer hypothesis overtook.
    SmallTranslator t;
    int same = 0, total = 0;
    for (const std::string& sentence : letter_sentences(60, 3)) {
        if (sentence.find_first_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos) continue;
        const auto [src, lens] = one_source(prepare_source(*t.tok.src, sentence, 12));
        for (double alpha : {0.0, 1.0}) {
            DecodeOptions o{.bos = 2, .eos = 3, .max_steps = 12, .beam = 4, .length_penalty = alpha};
            const Decoded early = decode_batch(*t.model, src, lens, o).front();
            o.exhaustive = true;
            const Decoded full = decode_batch(*t.model, src, lens, o).front();
            INFO(sentence << " alpha " << alpha);
            CHECK(full.score >= early.score - 1e-6);
            same += full.tokens == early.tokens;
            ++total;
        }
    }
    INFO(same << " of " << total << " answers the same");
    CHECK(same >= total * 3 / 4);
}

TEST_CASE("beam search n_best: the n best finished hypotheses, best first, the first the answer", "[tasks][decode]") {
    SmallTranslator t;
    const auto [src, lens] = one_source(prepare_source(*t.tok.src, "a b c d e", 12));
    const DecodeOptions o{.bos = 2, .eos = 3, .max_steps = 12, .beam = 4, .n_best = 3};
    const Decoded d = decode_batch(*t.model, src, lens, o).front();
    REQUIRE(!d.n_best.empty());
    CHECK(d.n_best.size() <= 3);
    CHECK(d.n_best.front().tokens == d.tokens);
    CHECK(d.n_best.front().score == d.score);
    for (size_t i = 1; i < d.n_best.size(); ++i) CHECK(d.n_best[i - 1].score >= d.n_best[i].score);
    CHECK(reference::beam_decode_batch(*t.model, src, lens, o).front().n_best.size() == d.n_best.size());
    CHECK_THROWS_WITH(decode_batch(*t.model, src, lens, {.max_steps = 5, .beam = 2, .n_best = 3}),
                      Catch::Contains("n_best") && Catch::Contains("3"));
}

TEST_CASE(
    "translate_batches: batches of one equal one sentence at a time, and the output is the same on 1, 2 and 3 threads",
    "[tasks][decode]") {
    SmallTranslator t;
    const std::vector<std::string> sentences = letter_sentences(80, 3);
    for (int64_t K : {1, 4}) {
        const BatchTranslateOptions one_by_one{
            .translate = {.max_len = 12, .decode = {.beam = K}}, .batch_tokens = 1, .threads = 1};
        ModelReplicas single(*t.model, 1);
        const std::vector<Translation> alone = translate_batches(single, t.tok, sentences, one_by_one);
        REQUIRE(alone.size() == sentences.size());
        int errors = 0;
        for (size_t i = 0; i < sentences.size(); ++i) {
            INFO("K " << K << " line " << i << ": '" << sentences[i] << "'");
            if (!alone[i].error.empty()) {
                ++errors;
                CHECK(alone[i].text.empty());
                continue;
            }
            // the reference search on the sentence alone: the same text, tokens and score bits
            const PreparedSource p = prepare_source(*t.tok.src, sentences[i], 12);
            const auto [src, lens] = one_source(p);
            const DecodeOptions o{.bos = 2, .eos = 3, .max_steps = 12, .beam = K};
            const Decoded ref = K == 1 ? reference::greedy_decode(*t.model, src, lens, o).front()
                                       : reference::beam_decode_batch(*t.model, src, lens, o).front();
            CHECK(alone[i].decoded.tokens == ref.tokens);
            CHECK(alone[i].decoded.score == ref.score);
            CHECK(alone[i].text == t.tok.tgt->decode(ref.tokens));
        }
        CHECK(errors == 5);  // the blank lines (a line of unknown characters is <unk> tokens)
        std::vector<std::string> by_threads[3];
        for (int threads : {1, 2, 3}) {
            ModelReplicas models(*t.model, threads);
            const BatchTranslateOptions o{
                .translate = {.max_len = 12, .decode = {.beam = K}}, .batch_tokens = 60, .threads = threads};
            for (const Translation& tr : translate_batches(models, t.tok, sentences, o))
                by_threads[threads - 1].push_back(tr.text + fmt::format(" {}", tr.decoded.score));
        }
        CHECK(by_threads[0] == by_threads[1]);
        CHECK(by_threads[0] == by_threads[2]);
    }
}

TEST_CASE("top_k_log_softmax in a search: bad options are refused with the operation named", "[tasks][decode]") {
    SmallTranslator t;
    ModelReplicas models(*t.model, 1);
    CHECK_THROWS_WITH(translate_batches(models, t.tok, {"a"}, {.translate = {.max_len = 12}, .batch_tokens = 0}),
                      Catch::Contains("batch_tokens"));
    CHECK_THROWS_WITH(ModelReplicas(*t.model, 0), Catch::Contains("threads"));
    const auto [src, lens] = one_source(prepare_source(*t.tok.src, "a", 12));
    CHECK_THROWS_WITH(decode_batch(*t.model, src, lens, {.max_steps = 0}), Catch::Contains("max_steps"));
    CHECK_THROWS_WITH(decode_batch(*t.model, src, lens, {.max_steps = 3, .beam = 0}), Catch::Contains("beam"));
}
