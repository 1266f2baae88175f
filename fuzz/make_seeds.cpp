// Writes the seed inputs of the fuzz targets (the files committed in
// fuzz/corpus/<target>/seed-*): real checkpoints of tiny models trained for
// two steps by tasks::train (so their metadata is what `tformer train` writes:
// config, vocabularies or SentencePiece model, generator state, losses, the
// "x." keys that recreate the data split), small safetensors files of every
// dtype, excerpts of fra.txt with the lines the reader must skip, and lines
// a user might type. Usage: fuzz_make_seeds OUT_DIR (scripts/fuzz.sh seeds).
#include "core/core.hpp"
#include "nn/safetensors.hpp"
#include "tasks/corpus.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace tformer;

namespace {
const std::string kTinyCorpus = std::string(TFORMER_SOURCE_DIR) + "/fuzz/data/fra-40.txt";

void write(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    fmt::print("{} ({} bytes)\n", path.string(), bytes.size());
}

std::string read(const fs::path& path) { return tasks::read_text_file(path.string(), "fuzz_make_seeds"); }

// A model small enough that a checkpoint is a few KB and loading it costs microseconds.
tasks::ModelConfig tiny_config(const std::string& task, int64_t src_vocab, int64_t tgt_vocab, int64_t num_steps) {
    tasks::ModelConfig c;
    c.task = task;
    c.src_vocab_size = src_vocab;
    c.tgt_vocab_size = tgt_vocab;
    c.num_steps = num_steps;
    c.transformer = {.key_size = 4,
                     .query_size = 4,
                     .value_size = 4,
                     .num_hiddens = 4,
                     .norm_shape = 4,
                     .ffn_num_input = 4,
                     .ffn_num_hiddens = 8,
                     .num_heads = 2,
                     .num_layers = 1,
                     .dropout = 0.1};
    return c;
}

// Two steps of tasks::train, the checkpoint it saves copied to `seed`; without
// Adam's state unless `keep_optimizer` (its tensors triple the header, and
// every load of it is a JSON parse: one seed with it covers what --resume reads).
void train_seed(const fs::path& seed, const tasks::ModelConfig& config, const tasks::BatchSource& source,
                tasks::CheckpointInfo info, std::map<std::string, std::string> extra, const fs::path& work,
                bool keep_optimizer = false) {
    fs::remove_all(work);
    core::Generator gen(1);
    auto model = tasks::build_model(config, gen);
    info.config = config;
    tasks::TrainOptions o{
        .epochs = 1, .total_steps = 2, .lr = 0.01, .seed = 1, .out_dir = work.string(), .quiet = true};
    o.token_mean = extra.count("pipeline") && extra["pipeline"] == "corpus";
    o.extra = std::move(extra);
    tasks::train(*model, gen, source, o, info);
    const std::string path = (work / "checkpoint.safetensors").string();
    if (!keep_optimizer) {  // the same checkpoint, weights and metadata only
        tasks::save_checkpoint(path, *model, nullptr, tasks::read_checkpoint_info(path));
    }
    write(seed, read(path));
}

// A SentencePiece model as tformer trains one, but without the NFKC
// normalisation table (about 240 KB), which would make the seed 200 times larger.
std::shared_ptr<tasks::SentencePieceTokenizer> small_sentencepiece(const std::vector<tasks::TextPair>& pairs) {
    std::vector<std::string> sentences;
    for (const auto& p : pairs) sentences.push_back(p.src), sentences.push_back(p.tgt);
    return tasks::SentencePieceTokenizer::train(
        sentences, {.vocab_size = 80, .seed = 0, .threads = 1, .normalization = "identity"});
}

void checkpoint_seeds(const fs::path& out, const fs::path& work) {
    // the copy task (seed 004)
    const tasks::ModelConfig copy = tiny_config("copy", 11, 11, 5);
    const std::map<std::string, std::string> copy_extra = {
        {"preset", "copy"}, {"seed", "1"}, {"batch_size", "2"}, {"batches_per_epoch", "2"}};
    train_seed(out / "seed-copy-resume", copy, tasks::copy_source(2, 5, 11, 2, 1), {}, copy_extra, work, true);
    train_seed(out / "seed-copy", copy, tasks::copy_source(2, 5, 11, 2, 1), {}, copy_extra, work);

    // --preset d2l: word vocabularies of the whole tiny corpus, a validation split
    const tasks::FraEngOptions d2l_data{.path = kTinyCorpus, .seed = 1, .val_fraction = 0.2, .num_steps = 6};
    const tasks::FraEngData d = tasks::load_fra_eng(d2l_data);
    train_seed(out / "seed-d2l", tiny_config("translate", d.src_vocab.size(), d.tgt_vocab.size(), 6),
               tasks::translation_source(d.train, 4, tasks::Tokenizer::kBos, 1),
               {.src_vocab = d.src_vocab, .tgt_vocab = d.tgt_vocab},
               {{"pipeline", "d2l"},
                {"num_examples", "0"},
                {"sample_size", "0"},
                {"data_seed", "1"},
                {"val_fraction", "0.20000000000000001"},
                {"num_steps", "6"},
                {"preset", "d2l"},
                {"seed", "1"},
                {"batch_size", "4"}},
               work);

    // the whole-corpus pipeline: word tokenizers, then a joint SentencePiece model with tied embeddings
    const tasks::Corpus c = tasks::load_corpus({.path = kTinyCorpus, .val_sentences = 2, .seed = 1});
    const std::map<std::string, std::string> corpus_extra = {
        {"pipeline", "corpus"}, {"data_seed", "1"},    {"val_sentences", "2"}, {"sample_size", "0"},
        {"batch_tokens", "40"}, {"preset", "default"}, {"seed", "1"}};
    tasks::TokenLines src, tgt;
    for (const auto& p : c.train) {
        src.push_back(tasks::tokenize(tasks::preprocess_nmt(p.src)));
        tgt.push_back(tasks::tokenize(tasks::preprocess_nmt(p.tgt)));
    }
    const tasks::Vocab src_vocab(src, 2, tasks::kNmtReserved), tgt_vocab(tgt, 2, tasks::kNmtReserved);
    const tasks::TokenizerPair words{std::make_shared<tasks::WordTokenizer>(src_vocab),
                                     std::make_shared<tasks::WordTokenizer>(tgt_vocab)};
    auto word_pairs = std::make_shared<tasks::EncodedPairs>(tasks::encode_pairs(c.train, words, 12));
    auto word_batches = std::make_shared<const tasks::BucketBatcher>(word_pairs, 40, 1);
    tasks::ModelConfig word_config = tiny_config("translate", src_vocab.size(), tgt_vocab.size(), 12);
    word_config.scaled_embedding_init = true;
    train_seed(out / "seed-corpus-words", word_config, tasks::BucketBatcher::source(word_batches),
               {.src_vocab = src_vocab, .tgt_vocab = tgt_vocab}, corpus_extra, work);

    const auto sp = small_sentencepiece(c.train);
    const tasks::TokenizerPair pieces{sp, sp};
    auto sp_pairs = std::make_shared<tasks::EncodedPairs>(tasks::encode_pairs(c.train, pieces, 12));
    auto sp_batches = std::make_shared<const tasks::BucketBatcher>(sp_pairs, 40, 1);
    tasks::ModelConfig sp_config = tiny_config("translate", sp->size(), sp->size(), 12);
    sp_config.tie_embeddings = sp_config.scaled_embedding_init = true;
    sp_config.transformer.dropout = 0;
    train_seed(out / "seed-corpus-sentencepiece", sp_config, tasks::BucketBatcher::source(sp_batches),
               {.sentencepiece = sp}, corpus_extra, work);
}

void safetensors_seeds(const fs::path& out, const fs::path& checkpoints) {
    auto save = [&](const std::string& name, const nn::SafeTensors& st) {
        const std::vector<uint8_t> bytes = nn::serialize_safetensors(st);
        write(out / name, std::string(bytes.begin(), bytes.end()));
    };
    save("seed-empty", {});
    nn::SafeTensors all;
    all.tensors["f32"] = core::from_vector(std::vector<float>{1.5f, -2.0f, 0.0f, 3e38f}, {2, 2});
    all.tensors["f64"] = core::from_vector(std::vector<double>{0.1, 1e-300}, {2}).to(core::DType::float64);
    all.tensors["i64"] = core::from_vector(std::vector<int64_t>{-1, 9223372036854775807}, {1, 2});
    all.tensors["bool"] = core::from_vector(std::vector<bool>{true, false, true}, {3});
    all.tensors["scalar"] = core::full({}, 7.0);
    all.tensors["empty"] = core::Tensor::empty({0, 3}, core::DType::float32);
    all.metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9"}};
    save("seed-dtypes", all);
    nn::SafeTensors meta_only;
    meta_only.metadata = {{"a", ""}, {"b", "{\"x\": [1, 2]}"}};
    save("seed-metadata-only", meta_only);
    write(out / "seed-checkpoint-copy", read(checkpoints / "seed-copy"));
}

void corpus_seeds(const fs::path& out) {
    write(out / "seed-fra-40", read(kTinyCorpus));
    write(out / "seed-crlf", "Go.\tVa !\r\nHi.\tSalut !\r\nRun!\tCours\u202f!\r\nWho?\tQui ?\r\n");
    // lines the reader must skip and count: no tab, two tabs, a blank side, invalid UTF-8, blank lines
    write(out / "seed-bad-lines",
          "Go.\tVa !\nno tab here\nA\tB\tC\n \tvide\nbad \xff byte\tmauvais\n\n"
          "I lost.\tJ'ai perdu.\nHe's calm.\tIl est calme.\nGo.\tMarche.\n");
    write(out / "seed-spaces", "Go .  \tVa\u00a0!\nWait!\tAttendez\u202f!\n\u00c9t\u00e9.\t\u00c9T\u00c9 !\n");
}

void translate_seeds(const fs::path& out) {
    write(out / "seed-greeting", "Hello!");
    write(out / "seed-lines", "I see.\n\nI want to play.\n");
    write(out / "seed-unicode", "Caf\u00e9\u202f? \u00c0 l'\u00e9t\u00e9, na\u00efve \u00c9cole.");
    write(out / "seed-long", "What do you want to do today? I think maybe Tom needs me, she said he would be sixteen.");
    write(out / "seed-punctuation", "?!.,, ... !\t\r");
}
// fuzz_serve: the first byte picks the endpoint (fuzz/serve.cpp's table), the rest is the body
void serve_seeds(const fs::path& out) {
    auto request = [&](const std::string& name, char route, const std::string& body) {
        write(out / name, std::string(1, route) + body);
    };
    request("seed-translate", 0, R"({"text": "I'm home.\nHe's calm.", "beam": 4, "n_best": 2, "attention": true})");
    request("seed-translate-greedy", 0, R"({"model": 1, "sentences": ["go .", "i lost ."], "search": "greedy"})");
    request("seed-copy", 0, R"({"model": 2, "text": "1 2 3 4, 5", "attention": true})");
    request("seed-tokenize", 1, R"({"model": 0, "text": "Caf\u00e9 ?"})");
    request("seed-inside", 2, R"({"model": 1, "text": "i'm home .", "layer": 0})");
    request("seed-model", 3, "2");
    request("seed-path", static_cast<char>(0xc0), "/api/v1/runs/0\n{}");
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fmt::print(stderr, "usage: fuzz_make_seeds OUT_DIR (writes OUT_DIR/<target>/seed-*)\n");
        return 2;
    }
    try {
        core::set_num_threads(1);
        const fs::path out = argv[1];
        const fs::path work = fs::temp_directory_path() / fmt::format("tformer-fuzz-seeds-{}", getpid());
        checkpoint_seeds(out / "checkpoint", work);
        safetensors_seeds(out / "safetensors", out / "checkpoint");
        corpus_seeds(out / "corpus");
        translate_seeds(out / "translate");
        serve_seeds(out / "serve");
        fs::remove_all(work);
    } catch (const std::exception& e) {
        fmt::print(stderr, "fuzz_make_seeds: {}\n", e.what());
        return 1;
    }
    return 0;
}
