#include "apps/commands.hpp"

#include "core/core.hpp"
#include "tasks/batch_translate.hpp"
#include "tasks/bleu.hpp"
#include "tasks/corpus.hpp"
#include "tasks/distributed.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <fmt/format.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>

extern char** environ;

namespace tformer::apps {

namespace fs = std::filesystem;
namespace dist = tasks::dist;
using core::Tensor;

namespace {

// ---- presets ------------------------------------------------------------------------------
// A preset is a complete set of hyperparameters; flags override single values.
struct Preset {
    int64_t epochs, batch_size, num_steps, num_hiddens, ffn_num_hiddens, num_heads, num_layers;
    int64_t num_examples, sample_size, warmup, batches_per_epoch;
    double lr, dropout, val_fraction, label_smoothing, clip;
    std::string schedule;
    uint64_t seed = 0;  ///< used when --seed is not given
    /// used when --threads is not given; 0: all cores. The two small presets
    /// run on one: a second thread gains nothing on them (docs/bench.md: d2l
    /// 8.2 vs 8.4 ms per step on 2 idle cores), and on a busy machine OpenMP's
    /// fork-join made the d2l preset 36 times slower (1,080 s instead of 30 s).
    int threads = 0;
    // The whole-corpus presets (corpus = true; tasks/corpus.hpp): num_steps is
    // the longest sequence kept, batches come from length buckets of
    // batch_tokens positions, validation is val_sentences drawn from the whole file.
    bool corpus = false;
    std::string tokenizer = "";  ///< sentencepiece | word
    int64_t vocab_size = 0, batch_tokens = 0, val_sentences = 0, total_steps = 0, average = 0;
    bool tie_embeddings = false;
};

// seed 000's training cell, exactly: num_hiddens 32, 2 layers, dropout 0.1,
// batch 64, num_steps 10, lr 0.005, 200 epochs, ffn 64, 4 heads, the first
// 600 examples, Adam, gradient clipping at norm 1 (d2l.train_seq2seq).
const Preset kD2l{.epochs = 200,
                  .batch_size = 64,
                  .num_steps = 10,
                  .num_hiddens = 32,
                  .ffn_num_hiddens = 64,
                  .num_heads = 4,
                  .num_layers = 2,
                  .num_examples = 600,
                  .sample_size = 0,
                  .warmup = 0,
                  .batches_per_epoch = 0,
                  .lr = 0.005,
                  .dropout = 0.1,
                  .val_fraction = 0.0,
                  .label_smoothing = 0.0,
                  .clip = 1.0,
                  .schedule = "constant",
                  // Seed 0 lands on "j’ai perdu ." (the corpus also has the typographic
                  // apostrophe) and scores 2 of 4; seeds 1-3 score 4, 3 and 3 of 4 (README).
                  .seed = 1,
                  .threads = 1};

// The default translation run: the whole corpus, a joint SentencePiece
// vocabulary of 8,000 pieces, length buckets of 2,000 tokens, tied
// embeddings, label smoothing 0.1, Adam at 0.003 with 200 warm-up steps and
// cosine decay, no dropout (dropout cost 6 BLEU at this budget: one pass
// over the data does not overfit). No checkpoint averaging: under cosine
// decay the last snapshots barely differ, and averaging 5 of them moved BLEU
// by less than a change of seed does (--average N turns it on).
// 1,800 steps (1.06 epochs): about 4.5 minutes on 2 idle cores. Chosen by
// validation BLEU on the whole-corpus sample (README: what each choice bought).
const Preset kTranslate{.epochs = 1,
                        .batch_size = 0,
                        .num_steps = 64,
                        .num_hiddens = 128,
                        .ffn_num_hiddens = 512,
                        .num_heads = 4,
                        .num_layers = 2,
                        .num_examples = 0,
                        .sample_size = 0,
                        .warmup = 200,
                        .batches_per_epoch = 0,
                        .lr = 0.003,
                        .dropout = 0.0,
                        .val_fraction = 0,
                        .label_smoothing = 0.1,
                        .clip = 1.0,
                        .schedule = "cosine",
                        .corpus = true,
                        .tokenizer = "sentencepiece",
                        .vocab_size = 8000,
                        .batch_tokens = 2000,
                        .val_sentences = 1500,
                        .total_steps = 1800,
                        .average = 0,
                        .tie_embeddings = true};

// --preset long: the same model and recipe for 5,400 steps (3.2 epochs, about
// 12.5 minutes on 2 idle cores).
const Preset kLong = [] {
    Preset p = kTranslate;
    p.total_steps = 5400;
    return p;
}();

// Seed 004's copy task: vocabulary 11, sequences of 10 starting with 1.
const Preset kCopy{.epochs = 80,
                   .batch_size = 30,
                   .num_steps = 10,
                   .num_hiddens = 32,
                   .ffn_num_hiddens = 64,
                   .num_heads = 4,
                   .num_layers = 2,
                   .num_examples = 0,
                   .sample_size = 0,
                   .warmup = 100,
                   .batches_per_epoch = 20,
                   .lr = 0.005,
                   .dropout = 0.0,
                   .val_fraction = 0.0,
                   .label_smoothing = 0.0,
                   .clip = 1.0,
                   .schedule = "noam",
                   .threads = 1};

constexpr int64_t kCopyVocab = 11;

const Preset& find_preset(const std::string& task, const std::string& name) {
    if (task == "copy") {
        if (name.empty() || name == "copy") return kCopy;
        fail<ValueError>("train copy: unknown preset '{}' (available: copy)", name);
    }
    if (name.empty() || name == "default") return kTranslate;
    if (name == "long") return kLong;
    if (name == "d2l") return kD2l;
    fail<ValueError>("train translate: unknown preset '{}' (available: default, long, d2l)", name);
}

template <class T>
T pick(const std::optional<T>& flag, T preset_value) {
    return flag.value_or(preset_value);
}

void set_threads(int threads) {
    if (threads < 0) fail<ValueError>("--threads must be positive, got {}", threads);
    // More threads than processors only makes OpenMP's threads wait for each other.
    const int procs = omp_get_num_procs();
    if (threads > procs) {
        fmt::print(stderr, "tformer: --threads {} is more than the {} processors here; using {}\n", threads, procs,
                   procs);
        threads = procs;
    }
    // Several ranks of an mpirun job on this machine, not bound to their own
    // cores: "all cores" is this rank's share of them.
    const int ranks_here = dist::local_size();
    if (threads == 0 && ranks_here > 1 && procs == static_cast<int>(std::thread::hardware_concurrency()))
        threads = std::max(1, procs / ranks_here);
    if (threads > 0) core::set_num_threads(threads);
}

std::string default_data_path() {
    const std::string env = tasks::default_fra_eng_path();
    if (fs::exists(env)) return env;
    return std::string(TFORMER_SOURCE_DIR) + "/data/fra-eng/fra.txt";
}

// load() on every rank of a data-parallel job (one process: just load());
// when it fails on some rank (no data file there, a bad flag), it fails on
// every rank and rank 0 says which and why (tasks/distributed.hpp).
template <class Load>
auto on_every_rank(Load&& load) {
    std::optional<decltype(load())> value;
    dist::together([&] { value.emplace(load()); });
    return std::move(*value);
}

// seed 000's four test sentences and d2l's references; a model with a cased
// subword vocabulary reads them as a person types them ("Go."), and BLEU
// compares them lowercased either way (bleu_tokens)
const std::vector<std::pair<std::string, std::string>> kSeedSentences = {{"go .", "va !"},
                                                                         {"i lost .", "j'ai perdu ."},
                                                                         {"he's calm .", "il est calme ."},
                                                                         {"i'm home .", "je suis chez moi ."}};
const std::vector<std::string> kSeedSentencesCased = {"Go.", "I lost.", "He's calm.", "I'm home."};

// Corpus BLEU-4 of greedy translations of the validation split: every
// distinct English sentence once, with all its French translations as references.
tasks::CorpusBleu validation_bleu(nn::EncoderDecoder& model, const tasks::NmtSplit& val, const tasks::Vocab& tgt_vocab,
                                  int64_t max_sentences, int64_t* sentences_out) {
    std::vector<std::string> order;
    std::map<std::string, std::vector<tasks::TokenLine>> refs;
    std::map<std::string, int64_t> row_of;
    for (size_t i = 0; i < val.pairs.size(); ++i) {
        const auto& p = val.pairs[i];
        if (!refs.count(p.src)) {
            order.push_back(p.src);
            row_of[p.src] = static_cast<int64_t>(i);
        }
        refs[p.src].push_back(tasks::tokenize(p.tgt));
    }
    if (max_sentences > 0 && static_cast<int64_t>(order.size()) > max_sentences) order.resize(max_sentences);
    std::vector<tasks::TokenLine> preds;
    std::vector<std::vector<tasks::TokenLine>> all_refs;
    const int64_t T = val.src.size(1);
    const tasks::DecodeOptions o{
        .bos = tgt_vocab.to_index("<bos>"), .eos = tgt_vocab.to_index("<eos>"), .max_steps = T};
    for (size_t begin = 0; begin < order.size(); begin += 256) {
        const size_t end = std::min(order.size(), begin + 256);
        std::vector<int64_t> rows;
        for (size_t i = begin; i < end; ++i) rows.push_back(row_of[order[i]]);
        const Tensor index = core::from_vector(rows, {static_cast<int64_t>(rows.size())});
        const auto decoded = tasks::greedy_decode(model, core::index_select(val.src, 0, index),
                                                  core::index_select(val.src_valid_len, 0, index), o);
        for (size_t i = begin; i < end; ++i) {
            preds.push_back(tgt_vocab.to_tokens(decoded[i - begin].tokens));
            all_refs.push_back(refs[order[i]]);
        }
    }
    if (sentences_out) *sentences_out = static_cast<int64_t>(preds.size());
    if (preds.empty()) return {};
    return tasks::corpus_bleu(preds, all_refs, 4);
}

// The seed sentences translated greedily, each with d2l's BLEU (k = 2)
// against d2l's reference. `options` says how to translate (d2l pads the
// source to num_steps).
std::string seed_sentences_report(nn::EncoderDecoder& model, const tasks::TokenizerPair& tok,
                                  const tasks::TranslateOptions& options, int* perfect) {
    std::string out;
    int count = 0;
    for (size_t i = 0; i < kSeedSentences.size(); ++i) {
        const auto& [lower, fra] = kSeedSentences[i];
        const std::string& eng = tok.src->kind() == "sentencepiece" ? kSeedSentencesCased[i] : lower;
        const tasks::Translation t = tasks::translate(model, tok, eng, options);
        const double b = tasks::bleu(tasks::bleu_tokens(t.text), tasks::bleu_tokens(fra), 2);
        if (b == 1.0) ++count;
        out += fmt::format("  {} => {}, bleu {:.3f}\n", eng, t.text, b);
    }
    if (perfect) *perfect = count;
    return out;
}

// How a checkpoint's model reads a sentence: d2l's pipeline pads the source
// to num_steps (as predict_seq2seq), the whole-corpus one does not.
tasks::TranslateOptions translate_options(const tasks::CheckpointInfo& info, const tasks::DecodeOptions& decode) {
    const bool d2l = !info.extra.count("pipeline") || info.extra.at("pipeline") == "d2l";
    return {.max_len = info.config.num_steps, .pad_to = d2l ? info.config.num_steps : 0, .decode = decode};
}

std::string meta(const std::map<std::string, std::string>& extra, const char* key) {
    auto it = extra.find(key);
    if (it == extra.end())
        fail<IOError>("checkpoint: metadata 'extra.{}' is missing (was it made by tformer train translate?)", key);
    return it->second;
}

int64_t meta_int(const std::map<std::string, std::string>& extra, const char* key) {
    const std::string v = meta(extra, key);
    try {
        size_t used = 0;
        const int64_t x = std::stoll(v, &used);
        if (used == v.size()) return x;
    } catch (const std::exception&) {
    }
    fail<IOError>("checkpoint: metadata 'extra.{}' is not an integer: '{}'", key, v);
}

// The data split a d2l-preset checkpoint was trained on, rebuilt from its metadata. The
// training run wrote 'extra.num_steps' from the model's own num_steps (the length every
// sequence is padded to): any other value is an edited or damaged file, refused here before
// it sizes the padded arrays (fuzz_checkpoint found one asking for 13 PB).
tasks::FraEngOptions data_options_from(const std::map<std::string, std::string>& extra, const std::string& path,
                                       int64_t model_num_steps) {
    const int64_t num_steps = meta_int(extra, "num_steps");
    if (num_steps != model_num_steps)
        fail<IOError>("checkpoint: metadata 'extra.num_steps' ({}) differs from the model's num_steps ({})", num_steps,
                      model_num_steps);
    double val_fraction = 0;
    try {
        val_fraction = std::stod(meta(extra, "val_fraction"));
    } catch (const std::logic_error&) {
        fail<IOError>("checkpoint: metadata 'extra.val_fraction' is not a number: '{}'", meta(extra, "val_fraction"));
    }
    return {.path = path,
            .num_examples = meta_int(extra, "num_examples"),
            .sample_size = meta_int(extra, "sample_size"),
            .seed = static_cast<uint64_t>(meta_int(extra, "data_seed")),
            .val_fraction = val_fraction,
            .num_steps = num_steps,
            .min_freq = 2};
}

tasks::CorpusOptions corpus_options_from(const std::map<std::string, std::string>& extra, const std::string& path) {
    return {.path = path,
            .val_sentences = meta_int(extra, "val_sentences"),
            .seed = static_cast<uint64_t>(meta_int(extra, "data_seed")),
            .sample_size = meta_int(extra, "sample_size")};
}

// Exact-sequence accuracy of greedy copying on `n` fresh sequences.
double copy_accuracy(nn::EncoderDecoder& model, int64_t n, int64_t length, uint64_t seed) {
    core::Generator gen(seed);
    const tasks::Batch batch = tasks::copy_batch(n, length, kCopyVocab, gen);
    const auto decoded =
        tasks::greedy_decode(model, batch.enc_X, batch.enc_valid, {.bos = 1, .eos = -1, .max_steps = length - 1});
    int64_t correct = 0;
    for (int64_t b = 0; b < n; ++b) {
        bool same = static_cast<int64_t>(decoded[b].tokens.size()) == length - 1;
        for (int64_t t = 0; same && t < length - 1; ++t) same = decoded[b].tokens[t] == batch.enc_X.at({b, t + 1});
        correct += same;
    }
    return static_cast<double>(correct) / static_cast<double>(n);
}

std::string join(const std::vector<int64_t>& ids) { return fmt::format("{}", fmt::join(ids, " ")); }

std::string bleu_line(const std::string& what, const tasks::BleuReport& r) {
    return fmt::format("{}: {:.2f} on {} sentences (precisions {:.3f}, brevity penalty {:.3f}){}\n", what,
                       100 * r.bleu.score, r.sentences, fmt::join(r.bleu.precisions, "/"), r.bleu.brevity_penalty,
                       r.truncated ? fmt::format(", {} sources cut at the model's limit", r.truncated) : "");
}

// After Ctrl-C or SIGTERM: the checkpoint is saved, the evaluation is skipped; 128 + signal, as shells report it.
int interrupted_exit(const tasks::TrainResult& r) {
    fmt::print(
        "stopped by signal {} ({}) after {} steps; checkpoint: {}; to continue, run the same command with "
        "--resume\n",
        r.interrupted,
        r.interrupted == SIGINT    ? "SIGINT"
        : r.interrupted == SIGTERM ? "SIGTERM"
                                   : "?",
        r.steps, r.checkpoint);
    return 128 + r.interrupted;
}

void write_summary(const std::string& out, const std::string& summary) {
    core::write_file_atomic((fs::path(out) / "summary.txt").string(), summary, "train");
}

// ---- train: the pieces ----------------------------------------------------------------------

// Bytes this process can still take: MemAvailable, or less under a cgroup
// (container) limit; 0 when neither can be read.
double available_memory() {
    double available = 0;
    std::ifstream meminfo("/proc/meminfo");
    for (std::string key; meminfo >> key;) {
        double kb = 0;
        meminfo >> kb;
        if (key == "MemAvailable:") available = kb * 1024;
        meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    double limit = 0, used = 0;
    if (std::ifstream max("/sys/fs/cgroup/memory.max"); max >> limit && limit > 0) {  // "max" fails the read: no limit
        std::ifstream("/sys/fs/cgroup/memory.current") >> used;
        const double room = std::max(0.0, limit - used);
        available = available > 0 ? std::min(available, room) : room;
    }
    return available;
}

// Refuses, before the model is built, a run whose estimate exceeds the memory there is (or --max-memory).
void check_memory(const tasks::ModelConfig& config, const TrainArgs& a, double rows, double length) {
    const tasks::MemoryEstimate m = tasks::estimate_training_memory(config, rows, length, length);
    const double limit = a.max_memory ? *a.max_memory * 1e9 : available_memory();
    if (limit <= 0 || m.total() <= limit) return;
    fail<ValueError>(
        "train {}: this model needs about {:.3g} GB to train ({:.3g} GB of weights, {:.3g} GB of gradients "
        "and Adam's state, {:.3g} GB for one batch of {:.0f} sequences of up to {:.0f} tokens), more than "
        "the {:.3g} GB {}. Use a smaller --num-hiddens, --ffn-num-hiddens, --num-layers or batch, or "
        "--max-memory GB to set the limit yourself",
        a.task, m.total() / 1e9, m.parameters / 1e9, m.optimizer / 1e9, m.activations / 1e9, rows, length, limit / 1e9,
        a.max_memory ? "that --max-memory allows" : "available on this machine");
}

// Flags that belong to one kind of preset only, refused on the other with a pointer to the right one.
void check_flags_fit(const TrainArgs& a, const Preset& p) {
    if (a.task != "translate") return;
    auto refuse = [&](bool given, const char* flag, const char* hint) {
        if (given)
            fail<ValueError>("train translate: {} does not apply to the {} preset; {}", flag,
                             a.preset.empty() ? "default" : a.preset, hint);
    };
    if (p.corpus) {
        const char* hint = "it belongs to --preset d2l (d2l's fixed batches of a prefix of the file)";
        refuse(a.num_examples.has_value(), "--num-examples", hint);
        refuse(a.val_fraction.has_value(), "--val-fraction", "use --val-sentences");
        refuse(a.batch_size.has_value(), "--batch-size",
               "batches hold --batch-tokens tokens (source + target, padding included)");
        if (!a.tokenizer.empty() && a.tokenizer != "sentencepiece" && a.tokenizer != "word")
            fail<ValueError>("train translate: unknown tokenizer '{}' (expected sentencepiece or word)", a.tokenizer);
        if (!a.batching.empty() && a.batching != "buckets" && a.batching != "random")
            fail<ValueError>("train translate: --batching must be buckets or random, got '{}'", a.batching);
    } else {
        const char* hint = "it belongs to the whole-corpus presets (default, long)";
        refuse(!a.tokenizer.empty(), "--tokenizer", hint);
        refuse(a.vocab_size.has_value(), "--vocab-size", hint);
        refuse(a.batch_tokens.has_value(), "--batch-tokens", hint);
        refuse(a.val_sentences.has_value(), "--val-sentences", hint);
        refuse(a.tie_embeddings != 0, "--tie-embeddings", hint);
        refuse(!a.batching.empty(), "--batching", hint);
    }
}

tasks::ModelConfig model_config(const TrainArgs& a, const Preset& p) {
    tasks::ModelConfig config;
    config.task = a.task;
    config.num_steps = pick(a.num_steps, p.num_steps);
    const int64_t d = pick(a.num_hiddens, p.num_hiddens);
    config.transformer = {.key_size = d,
                          .query_size = d,
                          .value_size = d,
                          .num_hiddens = d,
                          .norm_shape = d,
                          .ffn_num_input = d,
                          .ffn_num_hiddens = pick(a.ffn_num_hiddens, p.ffn_num_hiddens),
                          .num_heads = pick(a.num_heads, p.num_heads),
                          .num_layers = pick(a.num_layers, p.num_layers),
                          .dropout = pick(a.dropout, p.dropout)};
    // tying needs one vocabulary for both languages: on by default with SentencePiece's joint one only
    const bool joint = (a.tokenizer.empty() ? p.tokenizer : a.tokenizer) == "sentencepiece";
    config.tie_embeddings = a.tie_embeddings == 0 ? p.tie_embeddings && joint : a.tie_embeddings > 0;
    config.scaled_embedding_init = p.corpus;  // d2l and copy keep their documents' initialisation
    config.transformer.fused = p.corpus;      // d2l and copy keep the composed ops they teach
    tasks::ModelConfig sizes_known = config;  // the vocabulary sizes come later, from the data
    sizes_known.src_vocab_size = sizes_known.tgt_vocab_size = 1;
    tasks::check_config(sizes_known, "train");
    return config;
}

tasks::TrainOptions train_options(const TrainArgs& a, const Preset& p, uint64_t seed, const std::string& out) {
    tasks::TrainOptions o{.epochs = pick(a.epochs, p.epochs),
                          .total_steps = p.total_steps,
                          .batch_size = pick(a.batch_size, p.batch_size),
                          .batches_per_epoch = pick(a.batches_per_epoch, p.batches_per_epoch),
                          .lr = pick(a.lr, p.lr),
                          .schedule = a.schedule.empty() ? p.schedule : a.schedule,
                          .warmup = pick(a.warmup, p.warmup),
                          .clip = pick(a.clip, p.clip),
                          .label_smoothing = pick(a.label_smoothing, p.label_smoothing),
                          .token_mean = p.corpus,
                          .fused_loss = p.corpus,
                          .seed = seed,
                          .out_dir = out,
                          .checkpoint_every = a.checkpoint_every,
                          .resume = a.resume,
                          .stop_after_steps = a.stop_after_steps,
                          .average = pick(a.average, p.average),
                          .quiet = a.quiet,
                          .profile = a.profile,
                          .detect_anomaly = a.detect_anomaly,
                          .plot_format = tasks::parse_picture_format(a.plot_format, "train"),
                          .extra = {}};
    if (o.schedule != "constant" && o.schedule != "noam" && o.schedule != "cosine")
        fail<ValueError>("train: unknown --schedule '{}' (expected constant, noam or cosine)", o.schedule);
    if (a.warmup && o.schedule == "constant")
        fail<ValueError>("train: --warmup applies to --schedule noam or cosine, not constant");
    if (!p.corpus) o.extra["batch_size"] = std::to_string(o.batch_size);  // a --resume must batch as the run did
    if (a.task == "copy") o.extra["batches_per_epoch"] = std::to_string(o.batches_per_epoch);
    if (a.epochs) o.total_steps = 0;  // --epochs replaces a preset's step count
    if (a.steps) o.total_steps = *a.steps;
    if (a.epochs && a.steps) fail<ValueError>("train: give --epochs or --steps, not both");
    o.extra["preset"] = a.preset.empty() ? (a.task == "copy" ? "copy" : "default") : a.preset;
    o.extra["seed"] = std::to_string(seed);
    return o;
}

// A run as its preset and flags define it, before any data is read.
struct TrainSetup {
    const Preset& preset;
    uint64_t seed;
    std::string out;              ///< the output directory
    tasks::ModelConfig config;    ///< the vocabulary sizes come later, from the data
    tasks::TrainOptions options;  ///< extra: the metadata the checkpoint keeps, filled as the data is read
    /// --out, locked for the run (rank 0's; other ranks write nothing); empty
    /// directories it made go when the run fails
    std::shared_ptr<core::OutputDirectory> out_dir;
};

// Step 1 of `tformer train`: the preset and the flags, every one checked
// before anything is made on disk; the threads set; --out made and locked
// for this run (rank 0 alone writes into it); a checkpoint already there
// kept unless --resume or --overwrite says what to do with it.
TrainSetup parse_train_args(const TrainArgs& a) {
    const Preset& p = find_preset(a.task, a.preset);
    check_flags_fit(a, p);
    set_threads(a.threads != 0 ? a.threads : p.threads);
    const uint64_t seed = a.seed ? static_cast<uint64_t>(*a.seed) : p.seed;
    const std::string out = a.out.empty() ? "runs/" + a.task : a.out;
    const fs::path existing = fs::path(out) / "checkpoint.safetensors";
    if (a.resume && a.overwrite)
        fail<ValueError>("train: --resume continues {}, --overwrite replaces it: give one", existing.string());
    tasks::ModelConfig config = model_config(a, p);
    tasks::TrainOptions options = train_options(a, p, seed, out);
    std::shared_ptr<core::OutputDirectory> out_dir;
    if (dist::is_root()) {
        out_dir = std::make_shared<core::OutputDirectory>(out, "train", "--out");
        if (out_dir->stale_owner() > 0)
            fmt::print(stderr,
                       "train: the run that locked --out '{}' (PID {}) ended without unlocking it; taking it over\n",
                       out, out_dir->stale_owner());
        if (!a.resume && !a.overwrite && fs::exists(existing))
            fail<ValueError>(
                "train: {} already holds a checkpoint; continue it with --resume, replace it with --overwrite, "
                "or choose another --out",
                out);
    }
    return {.preset = p, .seed = seed, .out = out, .config = config, .options = options, .out_dir = out_dir};
}

// The model of a run, built from its config (after the memory check) and announced.
std::shared_ptr<nn::EncoderDecoder> build_and_announce(const tasks::ModelConfig& config, core::Generator& gen) {
    auto model = tasks::build_model(config, gen);
    fmt::print("model: {} parameters (d {}, ffn {}, {} heads, {} layers{})\n", model->num_parameters(),
               config.transformer.num_hiddens, config.transformer.ffn_num_hiddens, config.transformer.num_heads,
               config.transformer.num_layers, config.tie_embeddings ? ", tied embeddings" : "");
    return model;
}

// The end of a training run: the summary printed and saved as summary.txt.
int finish(const std::string& out, const std::string& summary) {
    fmt::print("{}", summary);
    write_summary(out, summary);
    return 0;
}

// ---- train copy: seed 004's copy task --------------------------------------------------------

// The report of a copy run: exact-sequence accuracy on fresh sequences, one
// example copied, and its attention heatmaps.
std::string copy_report(nn::EncoderDecoder& model, const TrainSetup& s, const tasks::TrainResult& r) {
    const int64_t n = s.config.num_steps;
    const double acc = copy_accuracy(model, 1000, n, s.seed + 12345);
    std::vector<int64_t> example = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    example.resize(n, 1);
    const Tensor src = core::from_vector(example, {1, n});
    const auto d = tasks::greedy_decode(model, src, core::full({1}, double(n), core::DType::int64),
                                        {.bos = 1, .eos = -1, .max_steps = n - 1, .keep_attention = true});
    std::vector<int64_t> copied = {1};
    copied.insert(copied.end(), d[0].tokens.begin(), d[0].tokens.end());
    tasks::Translation t;
    for (int64_t id : example) t.src_tokens.push_back(std::to_string(id));
    for (int64_t id : d[0].tokens) t.tokens.push_back(std::to_string(id));
    t.decoded = d[0];
    const tasks::PictureFormat format = s.options.plot_format;
    const auto pictures = tasks::plot_attention(s.out, "attention", model, t, format);
    return fmt::format(
        "trained {} steps in {:.1f} s ({:.0f} tokens/s), final loss {:.4f}\n"
        "exact-sequence accuracy on 1000 fresh sequences: {:.1f}%\n"
        "example: {} -> {}\n"
        "checkpoint: {}\nloss curve: {}/loss.{}\nattention: {}\n",
        r.steps, r.seconds, r.tokens_per_second, r.final_loss, 100 * acc, join(example), join(copied), r.checkpoint,
        s.out, tasks::picture_extension(format), fmt::join(pictures, ", "));
}

int train_copy(const TrainArgs& a, TrainSetup& s) {
    s.config.src_vocab_size = s.config.tgt_vocab_size = kCopyVocab;
    check_memory(s.config, a, static_cast<double>(s.options.batch_size), static_cast<double>(s.config.num_steps));
    core::Generator gen(s.seed);
    auto model = tasks::build_model(s.config, gen);
    fmt::print("copy task (seed 004): vocabulary {}, sequences of {}, {} parameters\n", kCopyVocab, s.config.num_steps,
               model->num_parameters());
    const auto source =
        tasks::copy_source(s.options.batch_size, s.config.num_steps, kCopyVocab, s.options.batches_per_epoch, s.seed);
    const tasks::TrainResult r = tasks::train(*model, gen, source, s.options, {.config = s.config});
    if (r.interrupted) return interrupted_exit(r);
    if (!dist::is_root()) return 0;  // rank 0 evaluates and reports
    return finish(s.out, copy_report(*model, s, r));
}

// ---- train translate: both pipelines ----------------------------------------------------------

// The end of a translation run's report: the heatmaps of one sentence decoded
// greedily and where everything is.
std::string pictures_report(nn::EncoderDecoder& model, const tasks::TokenizerPair& tok, const std::string& sentence,
                            tasks::TranslateOptions options, const tasks::TrainResult& r, const TrainSetup& s) {
    options.decode.keep_attention = true;
    const tasks::Translation t = tasks::translate(model, tok, sentence, options);
    const tasks::PictureFormat format = s.options.plot_format;
    const auto pictures = tasks::plot_attention(s.out, "attention", model, t, format);
    return fmt::format("checkpoint: {}\nloss curve: {}/loss.{} (values in {}/loss.csv)\nattention for \"{}\": {}\n",
                       r.checkpoint, s.out, tasks::picture_extension(format), s.out, sentence,
                       fmt::join(pictures, ", "));
}

// ---- train translate --preset d2l: seed 000's pipeline ------------------------------------------
// A prefix (or sample) of the file, d2l's word vocabularies, fixed num_steps, fixed batches.

// Reads the data as d2l does and records how in the checkpoint's metadata.
tasks::FraEngData load_d2l_data(const TrainArgs& a, TrainSetup& s) {
    const Preset& p = s.preset;
    tasks::FraEngOptions data_opts{.path = a.data.empty() ? default_data_path() : a.data,
                                   .num_examples = pick(a.num_examples, p.num_examples),
                                   .sample_size = pick(a.sample_size, p.sample_size),
                                   .seed = s.seed,
                                   .val_fraction = pick(a.val_fraction, p.val_fraction),
                                   .num_steps = s.config.num_steps,
                                   .min_freq = 2};
    if (a.num_examples && a.sample_size)
        fail<ValueError>(
            "train translate: give --num-examples (d2l's prefix of the file) or --sample-size (a random "
            "sample of it), not both");
    if (a.sample_size) data_opts.num_examples = 0;  // a sample of the whole file instead of the preset's prefix
    tasks::FraEngData data = tasks::load_fra_eng(data_opts);
    const auto& rep = data.report;
    fmt::print(
        "fra-eng: {} pairs read, {} skipped (no single tab {}, empty side {}, invalid UTF-8 {}); "
        "train {} pairs, validation {} pairs ({} sentences); vocabularies {} / {}\n",
        rep.lines_read, rep.skipped_columns + rep.skipped_empty + rep.skipped_utf8, rep.skipped_columns,
        rep.skipped_empty, rep.skipped_utf8, rep.train_pairs, rep.val_pairs, rep.val_sentences, data.src_vocab.size(),
        data.tgt_vocab.size());
    auto& extra = s.options.extra;
    extra["pipeline"] = "d2l";
    extra["num_examples"] = std::to_string(data_opts.num_examples);
    extra["sample_size"] = std::to_string(data_opts.sample_size);
    extra["data_seed"] = std::to_string(data_opts.seed);
    extra["val_fraction"] = fmt::format("{:.17g}", data_opts.val_fraction);
    extra["num_steps"] = std::to_string(s.config.num_steps);
    return data;
}

// seed 000's four sentences and, with a validation split, its BLEU (greedy).
std::string d2l_report(nn::EncoderDecoder& model, const tasks::FraEngData& data, const tasks::TokenizerPair& tok,
                       const tasks::TranslateOptions& greedy, const tasks::TrainResult& r) {
    int perfect = 0;
    std::string summary =
        fmt::format("trained {} steps in {:.1f} s ({:.0f} tokens/s), final loss {:.4f} (d2l's measure)\n", r.steps,
                    r.seconds, r.tokens_per_second, r.final_loss);
    summary += "seed 000's sentences (greedy):\n" + seed_sentences_report(model, tok, greedy, &perfect);
    summary += fmt::format("  {} of 4 at BLEU 1.000\n", perfect);
    if (data.val.src.size(0) > 0) {
        int64_t n = 0;
        const tasks::CorpusBleu b = validation_bleu(model, data.val, data.tgt_vocab, 0, &n);
        summary += fmt::format(
            "validation corpus BLEU-4: {:.2f} on {} sentences (precisions {:.3f}, brevity penalty {:.3f})\n",
            100 * b.score, n, fmt::join(b.precisions, "/"), b.brevity_penalty);
    }
    return summary;
}

int train_translate_d2l(const TrainArgs& a, TrainSetup& s) {
    const tasks::FraEngData data = on_every_rank([&] { return load_d2l_data(a, s); });
    tasks::ModelConfig& config = s.config;
    config.src_vocab_size = data.src_vocab.size();
    config.tgt_vocab_size = data.tgt_vocab.size();
    check_memory(config, a, static_cast<double>(s.options.batch_size), static_cast<double>(config.num_steps));
    core::Generator gen(s.seed);
    auto model = build_and_announce(config, gen);
    const auto source = tasks::translation_source(data.train, s.options.batch_size, tasks::Tokenizer::kBos, s.seed);
    const tasks::TrainResult r = tasks::train(
        *model, gen, source, s.options, {.config = config, .src_vocab = data.src_vocab, .tgt_vocab = data.tgt_vocab});
    if (r.interrupted) return interrupted_exit(r);
    if (!dist::is_root()) return 0;  // rank 0 evaluates and reports

    const tasks::TokenizerPair tok{std::make_shared<tasks::WordTokenizer>(data.src_vocab),
                                   std::make_shared<tasks::WordTokenizer>(data.tgt_vocab)};
    const tasks::TranslateOptions greedy{
        .max_len = config.num_steps, .pad_to = config.num_steps, .decode = {.max_steps = config.num_steps}};
    std::string summary = d2l_report(*model, data, tok, greedy, r);
    summary += pictures_report(*model, tok, "i'm home .", greedy, r, s);
    return finish(s.out, summary);
}

// ---- train translate (default, long): the whole corpus -------------------------------------------
// tasks/corpus.hpp: validation drawn from the whole file, tokenizers learnt
// from the training split, batches from length buckets.

// The tokenizers of a whole-corpus run, learnt from the training pairs only.
tasks::TokenizerPair make_tokenizers(const std::string& kind, const std::vector<tasks::TextPair>& train,
                                     int64_t vocab_size, uint64_t seed) {
    if (kind == "sentencepiece") {
        std::vector<std::string> sentences;
        sentences.reserve(2 * train.size());
        for (const auto& p : train) sentences.push_back(p.src);
        for (const auto& p : train) sentences.push_back(p.tgt);
        auto sp = tasks::SentencePieceTokenizer::train(sentences, {.vocab_size = vocab_size,
                                                                   .model_type = "bpe",
                                                                   .seed = static_cast<uint32_t>(seed),
                                                                   .threads = std::max(1, core::get_num_threads())});
        return {sp, sp};
    }
    if (kind == "word") {  // d2l's vocabularies: lowercased words, min_freq 2, one per language
        tasks::TokenLines src, tgt;
        for (const auto& p : train) {
            src.push_back(tasks::tokenize(tasks::preprocess_nmt(p.src)));
            tgt.push_back(tasks::tokenize(tasks::preprocess_nmt(p.tgt)));
        }
        return {std::make_shared<tasks::WordTokenizer>(tasks::Vocab(src, 2, tasks::kNmtReserved)),
                std::make_shared<tasks::WordTokenizer>(tasks::Vocab(tgt, 2, tasks::kNmtReserved))};
    }
    fail<ValueError>("train translate: unknown tokenizer '{}' (expected sentencepiece or word)", kind);
}

// The tokenizers on every rank of a data-parallel job: rank 0 trains the
// SentencePiece model and sends it to the others (one model for all, and
// their cores stay free meanwhile); word vocabularies each rank counts itself.
tasks::TokenizerPair shared_tokenizers(const std::string& kind, const std::vector<tasks::TextPair>& train,
                                       int64_t vocab_size, uint64_t seed) {
    if (dist::size() == 1 || kind != "sentencepiece")
        return on_every_rank([&] { return make_tokenizers(kind, train, vocab_size, seed); });
    tasks::TokenizerPair tok;
    std::string model;
    dist::together([&] {
        if (!dist::is_root()) return;
        tok = make_tokenizers(kind, train, vocab_size, seed);
        model = static_cast<const tasks::SentencePieceTokenizer&>(*tok.src).serialized();
    });
    dist::broadcast(model);
    if (dist::is_root()) return tok;
    const auto sp = tasks::SentencePieceTokenizer::from_serialized(model);
    return {sp, sp};
}

// The data of a whole-corpus run, ready to train on.
struct CorpusData {
    tasks::Corpus corpus;  ///< the training pairs and the validation sentences with their references
    tasks::TokenizerPair tok;
    std::shared_ptr<const tasks::BucketBatcher> batcher;
    bool buckets = true;  ///< batches from length buckets (else random batches)
    int64_t batch_tokens = 0;
};

// Reads the corpus, learns the tokenizers from its training split (so
// validation stays unseen), cuts the batches; records how in the metadata.
CorpusData load_corpus_data(const TrainArgs& a, TrainSetup& s) {
    const Preset& p = s.preset;
    const tasks::CorpusOptions corpus_opts{.path = a.data.empty() ? default_data_path() : a.data,
                                           .val_sentences = pick(a.val_sentences, p.val_sentences),
                                           .seed = s.seed,
                                           .sample_size = pick(a.sample_size, p.sample_size)};
    CorpusData d;
    d.corpus = on_every_rank([&] { return tasks::load_corpus(corpus_opts); });
    const auto& rep = d.corpus.report;
    fmt::print(
        "fra-eng: {} lines, {} skipped; validation: {} English sentences drawn from the whole file with {} "
        "references; training: {} pairs ({} more left out for sharing a sentence with validation)\n",
        rep.lines.lines_read, rep.lines.lines_read - rep.lines.valid_pairs, rep.val_sentences, rep.val_pairs,
        rep.train_pairs, rep.dropped_overlap);

    const std::string kind = a.tokenizer.empty() ? p.tokenizer : a.tokenizer;
    d.tok = shared_tokenizers(kind, d.corpus.train, pick(a.vocab_size, p.vocab_size), s.seed);
    auto encoded =
        std::make_shared<tasks::EncodedPairs>(tasks::encode_pairs(d.corpus.train, d.tok, s.config.num_steps));
    d.batch_tokens = pick(a.batch_tokens, p.batch_tokens);
    const std::string batching = a.batching.empty() ? "buckets" : a.batching;
    if (batching != "buckets" && batching != "random")
        fail<ValueError>("train translate: --batching must be buckets or random, got '{}'", batching);
    d.buckets = batching == "buckets";
    d.batcher = std::make_shared<const tasks::BucketBatcher>(encoded, d.batch_tokens, s.seed, d.buckets);
    fmt::print(
        "tokenizer: {}, vocabularies {} / {}; {} training pairs, {} longer than {} tokens left out; "
        "{} batches{} ({}-{} pairs, {:.1f}% padding)\n",
        kind, d.tok.src->size(), d.tok.tgt->size(), encoded->size(), encoded->dropped, s.config.num_steps - 1,
        d.batcher->batches_per_epoch(),
        d.buckets ? fmt::format(" of up to {} tokens", d.batch_tokens) : std::string(" in random order"),
        d.batcher->min_batch(), d.batcher->max_batch(), 100 * d.batcher->padding_fraction());
    auto& extra = s.options.extra;
    extra["pipeline"] = "corpus";
    extra["data_seed"] = std::to_string(s.seed);
    extra["val_sentences"] = std::to_string(corpus_opts.val_sentences);
    extra["sample_size"] = std::to_string(corpus_opts.sample_size);
    extra["batch_tokens"] = std::to_string(d.batch_tokens);
    return d;
}

// What a checkpoint of a whole-corpus run keeps to translate: the
// SentencePiece model, or the two word vocabularies.
tasks::CheckpointInfo corpus_checkpoint_info(const tasks::ModelConfig& config, const tasks::TokenizerPair& tok) {
    tasks::CheckpointInfo info{.config = config};
    if (tok.src->kind() == "sentencepiece") {
        info.sentencepiece = std::dynamic_pointer_cast<const tasks::SentencePieceTokenizer>(tok.src);
    } else {
        info.src_vocab = static_cast<const tasks::WordTokenizer&>(*tok.src).vocab();
        info.tgt_vocab = static_cast<const tasks::WordTokenizer&>(*tok.tgt).vocab();
    }
    return info;
}

// What the user gets: validation BLEU (beam and greedy), examples, seed 000's sentences.
std::string corpus_report(nn::EncoderDecoder& model, const CorpusData& d, const TrainSetup& s,
                          const tasks::TrainResult& r, double train_wall) {
    const int64_t n = s.config.num_steps;
    std::string summary = fmt::format(
        "trained {} steps in {:.1f} s ({:.0f} target tokens/s; {:.0f} s with data and tokenizer), final loss {:.4f} "
        "(cross-entropy per token{}){}\n",
        r.steps, r.seconds, r.tokens_per_second, train_wall, r.final_loss,
        s.options.label_smoothing > 0 ? ", label smoothing included" : "",
        r.averaged > 0 ? fmt::format("; final weights: the mean of the last {} snapshots", r.averaged) : "");
    const tasks::BleuOptions beam{.max_len = n, .decode = {.beam = 4, .length_penalty = 1.0}};
    const tasks::BleuOptions greedy{.max_len = n, .decode = {.beam = 1}};
    const tasks::BleuReport b_beam = tasks::evaluate_bleu(model, d.tok, d.corpus.val, beam);
    const tasks::BleuReport b_greedy = tasks::evaluate_bleu(model, d.tok, d.corpus.val, greedy);
    summary += bleu_line("validation corpus BLEU-4, beam 4", b_beam);
    summary += bleu_line("validation corpus BLEU-4, greedy", b_greedy);
    summary += "validation examples (beam 4):\n";
    const auto& val = d.corpus.val;
    for (size_t i = 0; i < std::min<size_t>(5, val.size()); ++i)
        summary += fmt::format("  {} => {}   (reference: {})\n", val[i].src, b_beam.hypotheses[i], val[i].refs.front());
    int perfect = 0;
    summary += "seed 000's sentences (greedy, d2l's BLEU with k = 2):\n" +
               seed_sentences_report(model, d.tok, {.max_len = n, .decode = {}}, &perfect);
    summary += fmt::format("  {} of 4 at BLEU 1.000\n", perfect);
    return summary;
}

int train_translate_corpus(const TrainArgs& a, TrainSetup& s) {
    const auto start = std::chrono::steady_clock::now();
    const CorpusData d = load_corpus_data(a, s);
    tasks::ModelConfig& config = s.config;
    config.src_vocab_size = d.tok.src->size();
    config.tgt_vocab_size = d.tok.tgt->size();
    if (config.tie_embeddings && !d.tok.joint())
        fail<ValueError>(
            "train translate: --tie-embeddings needs one vocabulary for both languages "
            "(--tokenizer sentencepiece); use --no-tie-embeddings with --tokenizer word");
    // buckets: rows × length stays within the token budget, the longest rows being the worst case
    const double longest = static_cast<double>(config.num_steps);
    check_memory(config, a,
                 d.buckets ? std::max(1.0, static_cast<double>(d.batch_tokens) / (2 * longest))
                           : static_cast<double>(d.batcher->max_batch()),
                 longest);
    core::Generator gen(s.seed);
    auto model = build_and_announce(config, gen);
    const tasks::TrainResult r = tasks::train(*model, gen, tasks::BucketBatcher::source(d.batcher), s.options,
                                              corpus_checkpoint_info(config, d.tok));
    if (r.interrupted) return interrupted_exit(r);
    if (!dist::is_root()) return 0;  // rank 0 evaluates and reports
    const double train_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string summary = corpus_report(*model, d, s, r, train_wall);
    summary += pictures_report(*model, d.tok, "I'm home.", {.max_len = config.num_steps, .decode = {}}, r, s);
    return finish(s.out, summary);
}
}  // namespace

// ---- train -------------------------------------------------------------------------------------

namespace {
// What the ranks of a data-parallel job compare before they exchange
// anything: the command, every flag given (those that change the data, the
// vocabulary, the model or the run's length, which would otherwise make the
// ranks call different exchanges and wait for each other forever), and the
// data file's size and checksum. Not compared: what only one process uses
// (--out and the checkpoint in it, which rank 0 alone reads and writes; the
// data file's path, which may differ between machines) or how it runs
// (threads, output, limits).
std::vector<std::pair<std::string, std::string>> rank_settings(const TrainArgs& a) {
    static const std::set<std::string> own = {"--out",     "--data",        "--threads",    "--quiet",
                                              "--profile", "--plot-format", "--max-memory", "--mpi-timeout"};
    std::vector<std::pair<std::string, std::string>> settings = {{"the command", "train " + a.task}};
    for (const auto& flag : a.flags)
        if (!own.count(flag.first)) settings.push_back(flag);
    if (a.task == "translate") {
        const std::string path = a.data.empty() ? default_data_path() : a.data;
        std::string described;
        try {
            const std::string bytes = core::read_regular_file(path, "train", "a text file");
            described = fmt::format("{} bytes with checksum {:016x}", bytes.size(),
                                    dist::fingerprint(bytes.data(), bytes.size()));
        } catch (const IOError& e) {
            described = fmt::format("unreadable ({})", e.what());
        }
        settings.emplace_back("the data file (--data)", described);
    }
    return settings;
}
}  // namespace
// parse the flags, read the data, build the model, train (tasks::train, which
// also resumes), report

int run_train(const TrainArgs& a) {
    dist::set_timeout(a.mpi_timeout);
    if (dist::size() > 1) dist::check_same_settings(rank_settings(a));  // before any other exchange
    TrainSetup s = on_every_rank([&] { return parse_train_args(a); });  // a refusal ends every rank together
    if (a.task == "copy") return train_copy(a, s);
    return s.preset.corpus ? train_translate_corpus(a, s) : train_translate_d2l(a, s);
}

// ---- translate ------------------------------------------------------------------------------------

namespace {
// One line of `in` without its end, which is "\n", "\r\n" or a lone "\r"
// (old Mac files, which std::getline would read as one line). False at the
// end of the input.
bool read_line(std::istream& in, std::string& line) {
    line.clear();
    std::streambuf& buffer = *in.rdbuf();
    for (int c = buffer.sbumpc(); c != std::char_traits<char>::eof(); c = buffer.sbumpc()) {
        if (c == '\n') return true;
        if (c == '\r') {
            if (buffer.sgetc() == '\n') buffer.sbumpc();
            return true;
        }
        line.push_back(static_cast<char>(c));
    }
    return !line.empty();
}

void check_decode_flags(int64_t beam, double length_penalty, const char* op) {
    if (beam < 1) fail<ValueError>("{}: --beam must be at least 1 (1 is greedy), got {}", op, beam);
    if (!std::isfinite(length_penalty) || length_penalty < 0)
        fail<ValueError>("{}: --length-penalty must be a finite number >= 0, got {}", op, length_penalty);
}
}  // namespace

namespace {
// The lines of one chunk of input, and the number of the first.
struct Chunk {
    std::vector<std::string> lines;
    int64_t first = 1;
};

// Reads up to `size` lines into chunk (empty at the end of the input).
bool read_chunk(std::istream& in, int64_t size, Chunk& chunk) {
    chunk.first += static_cast<int64_t>(chunk.lines.size());
    chunk.lines.clear();
    std::string line;
    while (static_cast<int64_t>(chunk.lines.size()) < size && read_line(in, line)) chunk.lines.push_back(line);
    return !chunk.lines.empty();
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// Writes a chunk's translations in input order: one line per input line (a
// blank one for a blank line or one that cannot be translated), or with
// n_best > 1 the n best of each as "LINE ||| translation ||| score". Notes on
// stderr; returns false when a line could not be translated.
bool write_chunk(const Chunk& chunk, const std::vector<tasks::Translation>& out, const tasks::TokenizerPair& tok,
                 int64_t max_len, int64_t n_best) {
    bool all = true;
    for (size_t i = 0; i < chunk.lines.size(); ++i) {
        const int64_t number = chunk.first + static_cast<int64_t>(i);
        const tasks::Translation& t = out[i];
        if (!t.error.empty() && !blank(chunk.lines[i])) {
            fmt::print(stderr, "translate: line {}: {}\n", number, t.error);
            all = false;
        }
        if (t.truncated)
            fmt::print(stderr,
                       "translate: line {} is longer than the model's limit of {} tokens; only its first {} were "
                       "translated\n",
                       number, max_len, max_len);
        if (n_best <= 1) {
            fmt::print("{}\n", t.text);
            continue;
        }
        for (const tasks::Hypothesis& h : t.decoded.n_best)
            fmt::print("{} ||| {} ||| {:.6f}\n", number, tok.tgt->decode(h.tokens), h.score);
    }
    std::fflush(stdout);
    return all;
}

// `tformer translate --show-attention`: one sentence at a time, greedily, with its heatmaps.
int translate_with_attention(const TranslateArgs& a, nn::EncoderDecoder& model, const tasks::TokenizerPair& tok,
                             const tasks::TranslateOptions& o, const Chunk& chunk) {
    int status = 0;
    for (size_t i = 0; i < chunk.lines.size(); ++i) {
        const int64_t number = chunk.first + static_cast<int64_t>(i);
        tasks::Translation tr;
        if (!blank(chunk.lines[i])) try {
                tr = tasks::translate(model, tok, chunk.lines[i], o);
                const auto pictures =
                    tasks::plot_attention(a.show_attention, fmt::format("sentence-{}", number), model, tr,
                                          tasks::parse_picture_format(a.plot_format, "translate"));
                fmt::print(stderr, "attention: {}\n", fmt::join(pictures, ", "));
            } catch (const ValueError& e) {
                tr.error = e.what();
            }
        status |= write_chunk({.lines = {chunk.lines[i]}, .first = number}, {tr}, tok, o.max_len, 1) ? 0 : 1;
    }
    return status;
}
}  // namespace

int run_translate(const TranslateArgs& a) {
    set_threads(a.threads);
    check_decode_flags(a.beam, a.length_penalty, "translate");
    if (!a.show_attention.empty() && a.beam > 1)
        fail<ValueError>("translate: --show-attention draws the attention of greedy decoding; add --beam 1");
    if (a.n_best > a.beam) fail<ValueError>("translate: --n-best {} is more than the beam size {}", a.n_best, a.beam);
    if (a.batch_tokens < 1) fail<ValueError>("translate: --batch-tokens must be at least 1, got {}", a.batch_tokens);
    const auto t = tasks::load_translator(nn::load_safetensors(a.checkpoint), a.checkpoint, "translate");
    const tasks::TranslateOptions o = translate_options(t->info, {.beam = a.beam,
                                                                  .length_penalty = a.length_penalty,
                                                                  .keep_attention = !a.show_attention.empty(),
                                                                  .exhaustive = a.exhaustive,
                                                                  .n_best = a.n_best});
    // Lines from the arguments, or stdin in chunks: sorted by length within a
    // chunk and decoded in batches, written in input order as each chunk ends
    // (a line at a time from a terminal, so that each answer comes at once)
    const int64_t chunk_lines = a.sentences.empty() && isatty(STDIN_FILENO) ? 1 : a.chunk_lines;
    const bool progress = isatty(STDERR_FILENO) && a.sentences.empty() && chunk_lines > 1;
    const int threads = core::get_num_threads();
    tasks::ModelReplicas models(*t->model, a.show_attention.empty() ? threads : 1);
    const auto start = std::chrono::steady_clock::now();
    int status = 0;
    Chunk chunk;
    bool arguments_left = !a.sentences.empty();  // the sentences given as arguments: one chunk
    const auto next_chunk = [&] {
        if (!a.sentences.empty()) {
            chunk.lines = arguments_left ? a.sentences : std::vector<std::string>{};
            arguments_left = false;
            return !chunk.lines.empty();
        }
        return read_chunk(std::cin, chunk_lines, chunk);
    };
    while (next_chunk()) {
        if (!a.show_attention.empty()) {
            status |= translate_with_attention(a, *t->model, t->tok, o, chunk);
            continue;
        }
        const std::vector<tasks::Translation> out = tasks::translate_batches(
            models, t->tok, chunk.lines, {.translate = o, .batch_tokens = a.batch_tokens, .threads = threads});
        status |= write_chunk(chunk, out, t->tok, o.max_len, a.n_best) ? 0 : 1;
        if (progress) {
            const int64_t done = chunk.first - 1 + static_cast<int64_t>(chunk.lines.size());
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            fmt::print(stderr, "\rtranslate: {} lines, {:.0f} lines/s", done, static_cast<double>(done) / s);
        }
    }
    if (progress && chunk.first > 1) fmt::print(stderr, "\n");
    return status;
}

// ---- eval ---------------------------------------------------------------------------------------------

int run_eval(const EvalArgs& a) {
    set_threads(a.threads);
    const int64_t beam = a.beam.value_or(4);
    const double length_penalty = a.length_penalty.value_or(1.0);
    check_decode_flags(beam, length_penalty, "eval");
    if (a.max_sentences < 0) fail<ValueError>("eval: --max-sentences must be >= 0 (0: all), got {}", a.max_sentences);
    const nn::SafeTensors checkpoint = nn::load_safetensors(a.checkpoint);
    const tasks::CheckpointInfo info = tasks::read_checkpoint_info(checkpoint, a.checkpoint);
    const bool corpus = info.extra.count("pipeline") && info.extra.at("pipeline") == "corpus";
    // a flag that does not apply to this checkpoint is refused, not silently ignored
    if (info.config.task == "copy" &&
        (!a.data.empty() || a.max_sentences != 0 || a.beam || a.length_penalty || a.exhaustive))
        fail<ValueError>(
            "eval: '{}' is a copy checkpoint, evaluated on fresh sequences; --data, --max-sentences, "
            "--beam, --length-penalty and --exhaustive-beam apply to translation checkpoints",
            a.checkpoint);
    if (info.config.task != "copy" && !corpus && (a.beam || a.length_penalty || a.exhaustive))
        fail<ValueError>(
            "eval: '{}' is a d2l-preset checkpoint, evaluated greedily as d2l does; --beam, "
            "--length-penalty and --exhaustive-beam apply to whole-corpus checkpoints",
            a.checkpoint);
    if (info.config.task == "copy") {
        core::Generator gen(0);
        auto model = tasks::build_model(info.config, gen);
        tasks::load_checkpoint(checkpoint, a.checkpoint, *model, nullptr);
        const double acc = copy_accuracy(*model, 1000, info.config.num_steps, 20240601);
        fmt::print("copy task: exact-sequence accuracy {:.1f}% on 1000 fresh sequences\n", 100 * acc);
        return 0;
    }
    const auto t = tasks::load_translator(checkpoint, a.checkpoint, "eval");
    const std::string data = a.data.empty() ? default_data_path() : a.data;
    const tasks::TranslateOptions greedy = translate_options(info, {.max_steps = info.config.num_steps});
    if (corpus) {
        const tasks::Corpus val = tasks::load_corpus(corpus_options_from(info.extra, data));
        const tasks::BleuReport r = tasks::evaluate_bleu(
            *t->model, t->tok, val.val,
            {.max_len = info.config.num_steps,
             .decode = {.beam = beam, .length_penalty = length_penalty, .exhaustive = a.exhaustive},
             .max_sentences = a.max_sentences});
        fmt::print("{}", bleu_line(fmt::format("validation corpus BLEU-4, {}",
                                               beam > 1 ? fmt::format("beam {}", beam) : std::string("greedy")),
                                   r));
    } else {
        const tasks::FraEngData d2l = tasks::load_fra_eng(data_options_from(info.extra, data, info.config.num_steps));
        if (!(d2l.src_vocab == *info.src_vocab) || !(d2l.tgt_vocab == *info.tgt_vocab))
            fail<IOError>(
                "eval: the data at hand gives other vocabularies than the checkpoint's (a different fra.txt?)");
        if (d2l.val.src.size(0) > 0) {
            int64_t n = 0;
            const tasks::CorpusBleu b = validation_bleu(*t->model, d2l.val, *info.tgt_vocab, a.max_sentences, &n);
            fmt::print(
                "validation corpus BLEU-4 (greedy): {:.2f} on {} sentences (precisions {:.3f}, brevity penalty "
                "{:.3f})\n",
                100 * b.score, n, fmt::join(b.precisions, "/"), b.brevity_penalty);
        } else {
            fmt::print("no validation split in this run (trained with --val-fraction 0)\n");
        }
    }
    int perfect = 0;
    fmt::print("seed 000's sentences (greedy, d2l's BLEU with k = 2):\n{}",
               seed_sentences_report(*t->model, t->tok, greedy, &perfect));
    fmt::print("  {} of 4 at BLEU 1.000\n", perfect);
    return 0;
}

// ---- tutorial ---------------------------------------------------------------------------------------

int run_tutorial(const TutorialArgs& a) {
    const std::string& which = a.which;
    const fs::path dir = TFORMER_TUTORIAL_DIR;
    std::vector<std::string> names;
    if (fs::exists(dir))
        for (const auto& e : fs::directory_iterator(dir)) {
            const std::string n = e.path().filename().string();
            if (n.starts_with("tutorial_") && e.is_regular_file() &&
                (fs::status(e).permissions() & fs::perms::owner_exec) != fs::perms::none)
                names.push_back(n.substr(9));
        }
    std::sort(names.begin(), names.end());
    if (which.empty()) {
        fmt::print(
            "tutorials (run one with: tformer tutorial N [--step] [--lang en|zh] [--exercise], or N --literal for 12 "
            "and "
            "13); see "
            "tutorials/README.md\n");
        for (const auto& n : names) fmt::print("  {}\n", n);
        if (names.empty()) fmt::print("  (none built yet: build the tutorials target)\n");
        return 0;
    }
    for (const auto& n : names) {
        const bool match =
            n == which || n.substr(0, 2) == which || (which.size() == 1 && n.substr(0, 2) == "0" + which);
        if (!match) continue;
        // Started directly, with its arguments as they are: no shell reads them,
        // so a directory called "x'; rm -rf ~; '" is just a directory name.
        std::vector<std::string> args = {(dir / ("tutorial_" + n)).string()};
        if (a.step) args.push_back("--step");
        if (a.exercise) args.push_back("--exercise");
        if (a.literal) args.push_back("--literal");
        if (!a.out.empty()) args.insert(args.end(), {"--out", a.out});
        if (a.plot_format != "png") args.insert(args.end(), {"--plot-format", a.plot_format});
        if (!a.lang.empty()) args.insert(args.end(), {"--lang", a.lang});
        if (!a.from.empty()) args.insert(args.end(), {"--from", a.from});
        if (!a.only.empty()) args.insert(args.end(), {"--only", a.only});
        if (a.quiet_tensors) args.push_back("--quiet-tensors");
        std::vector<char*> argv;
        for (auto& arg : args) argv.push_back(arg.data());
        argv.push_back(nullptr);
        pid_t pid = 0;
        if (const int err = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ); err != 0)
            fail<IOError>("tutorial: cannot start {}: {}", args[0], std::strerror(err));
        int status = 0;
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR) fail<IOError>("tutorial: waiting for {} failed: {}", args[0], std::strerror(errno));
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    fail<ValueError>("tutorial: no tutorial '{}' (run 'tformer tutorial' for the list)", which);
}

}  // namespace tformer::apps
