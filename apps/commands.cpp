#include "apps/commands.hpp"

#include "core/core.hpp"
#include "tasks/batch_translate.hpp"
#include "tasks/bleu.hpp"
#include "tasks/corpus.hpp"
#include "tasks/distributed.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/run_plan.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
using json = nlohmann::json;

namespace {

constexpr int64_t kCopyVocab = 11;

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

// A bucket's name as summary.txt and figures.json give it: "1-5 words", "21+ words".
std::string bucket_name(const tasks::LengthBucket& b) {
    return b.max_words > 0 ? fmt::format("{}-{} words", b.min_words, b.max_words)
                           : fmt::format("{}+ words", b.min_words);
}

// The corpus BLEU line, then chrF and BLEU by source length on indented lines.
std::string bleu_line(const std::string& what, const tasks::BleuReport& r) {
    std::string out =
        fmt::format("{}: {:.2f} on {} sentences (precisions {:.3f}, brevity penalty {:.3f}){}\n", what,
                    100 * r.bleu.score, r.sentences, fmt::join(r.bleu.precisions, "/"), r.bleu.brevity_penalty,
                    r.truncated ? fmt::format(", {} sources cut at the model's limit", r.truncated) : "");
    out += fmt::format("  chrF2 {:.2f}; BLEU-4 by source length:", r.chrf);
    for (const tasks::LengthBucket& b : r.by_length) {
        out += b.sentences > 0 ? fmt::format(" {} {:.2f} ({})", bucket_name(b), 100 * b.bleu.score, b.sentences)
                               : fmt::format(" {} - (0)", bucket_name(b));
        out += &b == &r.by_length.back() ? "\n" : ",";
    }
    return out;
}

// A figure as summary.txt prints it: rounded to `decimals` places.
double rounded(double value, int decimals) {
    const double scale = std::pow(10.0, decimals);
    return std::round(value * scale) / scale;
}

// The held-out loss line: validation pairs against as many training pairs.
std::string held_out_line(const tasks::HeldOutLoss& h) {
    return fmt::format(
        "cross-entropy per token without label smoothing (teacher-forced): validation {:.4f} ({} pairs), "
        "a sample of the training pairs {:.4f} ({})\n",
        h.validation.loss, h.validation.pairs, h.train.loss, h.train.pairs);
}

void add_held_out_figures(json& figures, const tasks::HeldOutLoss& h) {
    figures["validation_loss"] = rounded(h.validation.loss, 4);
    figures["training_sample_loss"] = rounded(h.train.loss, 4);
}

// One decoding's evaluation in figures.json, under `decoding` ("beam 4", "greedy"): its BLEU, chrF2 and
// BLEU by source length (the buckets with a sentence in them, shortest first), as summary.txt rounds them.
void add_bleu_figures(json& figures, const std::string& decoding, const tasks::BleuReport& r) {
    figures["validation_bleu"][decoding] = rounded(100 * r.bleu.score, 2);
    figures["validation_chrf2"][decoding] = rounded(r.chrf, 2);
    json buckets = json::array();
    for (const tasks::LengthBucket& b : r.by_length)
        if (b.sentences > 0)
            buckets.push_back({{"source_words", bucket_name(b)},
                               {"bleu", rounded(100 * b.bleu.score, 2)},
                               {"sentences", b.sentences}});
    figures["validation_bleu_by_length"][decoding] = std::move(buckets);
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

// What the end of a training run reports: the text printed and kept in
// summary.txt, and its figures as JSON in figures.json, for programs (the
// studio's Model tab) to read without parsing the text.
struct Report {
    std::string text;
    json figures = json::object();
};

void write_report(const std::string& out, const Report& report) {
    core::write_file_atomic((fs::path(out) / "summary.txt").string(), report.text, "train");
    json figures = {{"format", "tformer-figures"}, {"version", 1}};
    figures.update(report.figures);
    core::write_file_atomic((fs::path(out) / "figures.json").string(), figures.dump(2) + "\n", "train");
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
void check_memory(const tasks::ModelConfig& config, const tasks::RunPlan& p, double rows, double length) {
    const tasks::MemoryEstimate m = tasks::estimate_training_memory(config, rows, length, length);
    const double limit = p.max_memory ? *p.max_memory * 1e9 : available_memory();
    if (limit <= 0 || m.total() <= limit) return;
    fail<ValueError>(
        "train {}: this model needs about {:.3g} GB to train ({:.3g} GB of weights, {:.3g} GB of gradients "
        "and Adam's state, {:.3g} GB for one batch of {:.0f} sequences of up to {:.0f} tokens), more than "
        "the {:.3g} GB {}. Use a smaller --num-hiddens, --ffn-num-hiddens, --num-layers or batch, or "
        "--max-memory GB to set the limit yourself",
        p.task, m.total() / 1e9, m.parameters / 1e9, m.optimizer / 1e9, m.activations / 1e9, rows, length, limit / 1e9,
        p.max_memory ? "that --max-memory allows" : "available on this machine");
}

// ---- the run plan: the preset's, with the flags given ----------------------------------------

// Flags that belong to one kind of preset only, refused on the other with a pointer to the right one.
void check_flags_fit(const TrainArgs& a, const tasks::RunPlan& p) {
    if (a.task != "translate") return;
    auto refuse = [&](bool given, const char* flag, const char* hint) {
        if (given)
            fail<ValueError>("train translate: {} does not apply to the {} preset; {}", flag,
                             a.preset.empty() ? "default" : a.preset, hint);
    };
    if (p.pipeline == tasks::Pipeline::corpus) {
        const char* hint = "it belongs to --preset d2l (d2l's fixed batches of a prefix of the file)";
        refuse(a.num_examples.has_value(), "--num-examples", hint);
        refuse(a.val_fraction.has_value(), "--val-fraction", "use --val-sentences");
        refuse(a.batch_size.has_value(), "--batch-size",
               "batches hold --batch-tokens tokens (source + target, padding included)");
        if (!a.tokenizer.empty() && a.tokenizer != "sentencepiece" && a.tokenizer != "word")
            fail<ValueError>("train translate: unknown tokenizer '{}' (expected sentencepiece or word)", a.tokenizer);
        if (!a.batching.empty() && a.batching != "buckets" && a.batching != "random")
            fail<ValueError>("train translate: --batching must be buckets or random, got '{}'", a.batching);
        if (a.subword_dropout.value_or(0) > 0 && a.tokenizer == "word")
            fail<ValueError>(
                "train translate: --subword-dropout {} needs --tokenizer sentencepiece (words have no "
                "pieces to split)",
                *a.subword_dropout);
    } else {
        const char* hint = "it belongs to the whole-corpus presets (default, long)";
        refuse(!a.tokenizer.empty(), "--tokenizer", hint);
        refuse(a.vocab_size.has_value(), "--vocab-size", hint);
        refuse(a.batch_tokens.has_value(), "--batch-tokens", hint);
        refuse(a.val_sentences.has_value(), "--val-sentences", hint);
        refuse(a.tie_embeddings != 0, "--tie-embeddings", hint);
        refuse(!a.batching.empty(), "--batching", hint);
        refuse(a.subword_dropout.has_value(), "--subword-dropout", hint);
    }
}

// How the data is read: the preset's way, with the flags given.
void apply_data_flags(const TrainArgs& a, tasks::RunPlan& p) {
    if (p.task == "translate") p.data = a.data.empty() ? default_data_path() : a.data;
    p.sample_size = pick(a.sample_size, p.sample_size);
    if (p.pipeline == tasks::Pipeline::d2l) {
        if (a.num_examples && a.sample_size)
            fail<ValueError>(
                "train translate: give --num-examples (d2l's prefix of the file) or --sample-size (a random "
                "sample of it), not both");
        // a sample of the whole file instead of the preset's prefix
        p.num_examples = a.sample_size ? 0 : pick(a.num_examples, p.num_examples);
        p.val_fraction = pick(a.val_fraction, p.val_fraction);
    }
    if (p.pipeline == tasks::Pipeline::corpus) {
        p.val_sentences = pick(a.val_sentences, p.val_sentences);
        if (!a.tokenizer.empty()) p.tokenizer = a.tokenizer;
        p.vocab_size = pick(a.vocab_size, p.vocab_size);
        p.batch_tokens = pick(a.batch_tokens, p.batch_tokens);
        p.buckets = a.batching.empty() || a.batching == "buckets";
        p.subword_dropout = pick(a.subword_dropout, p.subword_dropout);
    }
}

// The model: the preset's sizes, with the flags given.
void apply_model_flags(const TrainArgs& a, tasks::RunPlan& p) {
    tasks::ModelConfig& m = p.model;
    nn::TransformerOptions& t = m.transformer;
    m.num_steps = pick(a.num_steps, m.num_steps);
    t = t.with_width(pick(a.num_hiddens, t.num_hiddens));
    t.ffn_num_hiddens = pick(a.ffn_num_hiddens, t.ffn_num_hiddens);
    t.num_heads = pick(a.num_heads, t.num_heads);
    t.num_layers = pick(a.num_layers, t.num_layers);
    t.dropout = pick(a.dropout, t.dropout);
    // tying needs one vocabulary for both languages: on by default with SentencePiece's joint one only
    m.tie_embeddings =
        a.tie_embeddings == 0 ? m.tie_embeddings && p.tokenizer == "sentencepiece" : a.tie_embeddings > 0;
    tasks::ModelConfig sizes_known = m;  // the vocabulary sizes come later, from the data
    sizes_known.src_vocab_size = sizes_known.tgt_vocab_size = 1;
    tasks::check_config(sizes_known, "train");
}

// The training loop: the preset's schedule, with the flags given.
void apply_train_flags(const TrainArgs& a, tasks::RunPlan& p) {
    tasks::TrainOptions& o = p.train;
    o.epochs = pick(a.epochs, o.epochs);
    o.batch_size = pick(a.batch_size, o.batch_size);
    o.batches_per_epoch = pick(a.batches_per_epoch, o.batches_per_epoch);
    o.lr = pick(a.lr, o.lr);
    o.adam_beta2 = pick(a.adam_beta2, o.adam_beta2);
    if (!a.schedule.empty()) o.schedule = a.schedule;
    o.warmup = pick(a.warmup, o.warmup);
    o.clip = pick(a.clip, o.clip);
    o.label_smoothing = pick(a.label_smoothing, o.label_smoothing);
    o.average = pick(a.average, o.average);
    o.seed = p.seed;
    o.checkpoint_every = a.checkpoint_every;
    o.resume = a.resume;
    o.stop_after_steps = a.stop_after_steps;
    o.quiet = a.quiet;
    o.profile = a.profile;
    o.detect_anomaly = a.detect_anomaly;
    o.plot_format = tasks::parse_picture_format(a.plot_format, "train");
    if (o.schedule != "constant" && o.schedule != "noam" && o.schedule != "cosine")
        fail<ValueError>("train: unknown --schedule '{}' (expected constant, noam or cosine)", o.schedule);
    if (a.warmup && o.schedule == "constant")
        fail<ValueError>("train: --warmup applies to --schedule noam or cosine, not constant");
    if (a.epochs && a.steps) fail<ValueError>("train: give --epochs or --steps, not both");
    if (a.epochs) o.total_steps = 0;  // --epochs replaces a preset's step count
    if (a.steps) o.total_steps = *a.steps;
    o.extra = tasks::plan_metadata(p);  // what the checkpoint keeps of the plan
}

// Step 1 of `tformer train`: the preset's plan with every flag given applied
// and checked, and the threads set. Nothing is read or made yet; what
// follows only reads the plan.
tasks::RunPlan resolve_plan(const TrainArgs& a) {
    tasks::RunPlan p = tasks::preset_plan(a.task, a.preset);
    check_flags_fit(a, p);
    if (a.threads != 0) p.threads = a.threads;
    set_threads(p.threads);  // the only effect of this step: a --threads beyond the machine is said first
    if (a.seed) p.seed = static_cast<uint64_t>(*a.seed);
    p.max_memory = a.max_memory;
    p.train.out_dir = a.out.empty() ? "runs/" + a.task : a.out;
    if (a.resume && a.overwrite)
        fail<ValueError>("train: --resume continues {}, --overwrite replaces it: give one",
                         tasks::checkpoint_path(p.train.out_dir));
    apply_data_flags(a, p);
    apply_model_flags(a, p);
    apply_train_flags(a, p);
    return p;
}

// Step 2: --out made and locked for this run (rank 0 alone
// writes into it; empty directories it made go when the run fails); a
// checkpoint already there kept unless --resume or --overwrite says what to do with it.
std::shared_ptr<core::OutputDirectory> prepare_run(const tasks::RunPlan& p, bool overwrite) {
    if (!dist::is_root()) return nullptr;
    const std::string& out = p.train.out_dir;
    auto out_dir = std::make_shared<core::OutputDirectory>(out, "train", "--out");
    if (out_dir->stale_owner() > 0)
        fmt::print(stderr,
                   "train: the run that locked --out '{}' (PID {}) ended without unlocking it; taking it over\n", out,
                   out_dir->stale_owner());
    if (!p.train.resume && !overwrite && fs::exists(tasks::checkpoint_path(out)))
        fail<ValueError>(
            "train: {} already holds a checkpoint; continue it with --resume, replace it with --overwrite, "
            "or choose another --out",
            out);
    return out_dir;
}

// The model of a run, built from its config (after the memory check) and announced.
std::shared_ptr<nn::EncoderDecoder> build_and_announce(const tasks::ModelConfig& config, core::Generator& gen) {
    auto model = tasks::build_model(config, gen);
    const int64_t layers = config.transformer.num_layers;
    fmt::print("model: {} parameters (d {}, ffn {}, {} heads, {} layer{}{})\n", model->num_parameters(),
               config.transformer.num_hiddens, config.transformer.ffn_num_hiddens, config.transformer.num_heads, layers,
               layers == 1 ? "" : "s", config.tie_embeddings ? ", tied embeddings" : "");
    return model;
}

// The end of a training run: the report printed and saved as summary.txt and figures.json.
int finish(const std::string& out, const Report& report) {
    fmt::print("{}", report.text);
    write_report(out, report);
    return 0;
}

// ---- train copy: seed 004's copy task --------------------------------------------------------

// The report of a copy run: exact-sequence accuracy on fresh sequences, one
// example copied, and its attention heatmaps.
Report copy_report(nn::EncoderDecoder& model, const tasks::RunPlan& p, const tasks::TrainResult& r) {
    const int64_t n = p.model.num_steps;
    const double acc = copy_accuracy(model, 1000, n, p.seed + 12345);
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
    const tasks::PictureFormat format = p.train.plot_format;
    const auto pictures = tasks::plot_attention(p.train.out_dir, "attention", model, t, format);
    Report report;
    report.figures["exact_sequence_accuracy_percent"] = rounded(100 * acc, 1);
    report.text = fmt::format(
        "trained {} steps in {:.1f} s ({:.0f} tokens/s), final loss {:.4f}\n"
        "exact-sequence accuracy on 1000 fresh sequences: {:.1f}%\n"
        "example: {} -> {}\n"
        "checkpoint: {}\nloss curve: {}/loss.{}\nattention: {}\n",
        r.steps, r.seconds, r.tokens_per_second, r.final_loss, 100 * acc, join(example), join(copied), r.checkpoint,
        p.train.out_dir, tasks::picture_extension(format), fmt::join(pictures, ", "));
    return report;
}

int train_copy(const tasks::RunPlan& p) {
    tasks::ModelConfig config = p.model;
    config.src_vocab_size = config.tgt_vocab_size = kCopyVocab;
    const int64_t n = config.num_steps;
    check_memory(config, p, static_cast<double>(p.train.batch_size), static_cast<double>(n));
    core::Generator gen(p.seed);
    auto model = tasks::build_model(config, gen);
    fmt::print("copy task (seed 004): vocabulary {}, sequences of {}, {} parameters\n", kCopyVocab, n,
               model->num_parameters());
    const auto source = tasks::copy_source(p.train.batch_size, n, kCopyVocab, p.train.batches_per_epoch, p.seed);
    const tasks::TrainResult r = tasks::train(*model, gen, source, p.train, {.config = config});
    if (r.interrupted) return interrupted_exit(r);
    if (!dist::is_root()) return 0;  // rank 0 evaluates and reports
    return finish(p.train.out_dir, copy_report(*model, p, r));
}

// ---- train translate: both pipelines ----------------------------------------------------------

// The end of a translation run's report: the heatmaps of one sentence decoded
// greedily and where everything is.
std::string pictures_report(nn::EncoderDecoder& model, const tasks::TokenizerPair& tok, const std::string& sentence,
                            tasks::TranslateOptions options, const tasks::TrainResult& r, const tasks::RunPlan& p) {
    options.decode.keep_attention = true;
    const tasks::Translation t = tasks::translate(model, tok, sentence, options);
    const tasks::PictureFormat format = p.train.plot_format;
    const std::string& out = p.train.out_dir;
    const auto pictures = tasks::plot_attention(out, "attention", model, t, format);
    return fmt::format("checkpoint: {}\nloss curve: {}/loss.{} (values in {}/loss.csv)\nattention for \"{}\": {}\n",
                       r.checkpoint, out, tasks::picture_extension(format), out, sentence, fmt::join(pictures, ", "));
}

// ---- train translate --preset d2l: seed 000's pipeline ------------------------------------------
// A prefix (or sample) of the file, d2l's word vocabularies, fixed num_steps, fixed batches.

// Reads the data as d2l does.
tasks::FraEngData load_d2l_data(const tasks::RunPlan& p) {
    tasks::FraEngData data = tasks::load_fra_eng({.path = p.data,
                                                  .num_examples = p.num_examples,
                                                  .sample_size = p.sample_size,
                                                  .seed = p.seed,
                                                  .val_fraction = p.val_fraction,
                                                  .num_steps = p.model.num_steps,
                                                  .min_freq = 2});
    const auto& rep = data.report;
    fmt::print(
        "fra-eng: {} pairs read, {} skipped (no single tab {}, empty side {}, invalid UTF-8 {}); "
        "train {} pairs, validation {} pairs ({} sentences); vocabularies {} / {}\n",
        rep.lines_read, rep.skipped_columns + rep.skipped_empty + rep.skipped_utf8, rep.skipped_columns,
        rep.skipped_empty, rep.skipped_utf8, rep.train_pairs, rep.val_pairs, rep.val_sentences, data.src_vocab.size(),
        data.tgt_vocab.size());
    return data;
}

// seed 000's four sentences and, with a validation split, its BLEU (greedy).
Report d2l_report(nn::EncoderDecoder& model, const tasks::FraEngData& data, const tasks::TokenizerPair& tok,
                  const tasks::TranslateOptions& greedy, const tasks::TrainResult& r) {
    int perfect = 0;
    Report report;
    report.text = fmt::format("trained {} steps in {:.1f} s ({:.0f} tokens/s), final loss {:.4f} (d2l's measure)\n",
                              r.steps, r.seconds, r.tokens_per_second, r.final_loss);
    report.text += "seed 000's sentences (greedy):\n" + seed_sentences_report(model, tok, greedy, &perfect);
    report.text += fmt::format("  {} of 4 at BLEU 1.000\n", perfect);
    if (data.val.src.size(0) > 0) {
        int64_t n = 0;
        const tasks::CorpusBleu b = validation_bleu(model, data.val, data.tgt_vocab, 0, &n);
        report.text += fmt::format(
            "validation corpus BLEU-4: {:.2f} on {} sentences (precisions {:.3f}, brevity penalty {:.3f})\n",
            100 * b.score, n, fmt::join(b.precisions, "/"), b.brevity_penalty);
        report.figures["validation_bleu"]["greedy"] = rounded(100 * b.score, 2);
    }
    return report;
}

int train_translate_d2l(const tasks::RunPlan& p) {
    const tasks::FraEngData data = on_every_rank([&] { return load_d2l_data(p); });
    tasks::ModelConfig config = p.model;
    config.src_vocab_size = data.src_vocab.size();
    config.tgt_vocab_size = data.tgt_vocab.size();
    check_memory(config, p, static_cast<double>(p.train.batch_size), static_cast<double>(config.num_steps));
    core::Generator gen(p.seed);
    auto model = build_and_announce(config, gen);
    const auto source = tasks::translation_source(data.train, p.train.batch_size, tasks::Tokenizer::kBos, p.seed);
    const tasks::TrainResult r = tasks::train(
        *model, gen, source, p.train, {.config = config, .src_vocab = data.src_vocab, .tgt_vocab = data.tgt_vocab});
    if (r.interrupted) return interrupted_exit(r);
    if (!dist::is_root()) return 0;  // rank 0 evaluates and reports

    const tasks::TokenizerPair tok{std::make_shared<tasks::WordTokenizer>(data.src_vocab),
                                   std::make_shared<tasks::WordTokenizer>(data.tgt_vocab)};
    const tasks::TranslateOptions greedy{
        .max_len = config.num_steps, .pad_to = config.num_steps, .decode = {.max_steps = config.num_steps}};
    Report report = d2l_report(*model, data, tok, greedy, r);
    report.text += pictures_report(*model, tok, "i'm home .", greedy, r, p);
    return finish(p.train.out_dir, report);
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
};

// Reads the corpus, learns the tokenizers from its training split (so
// validation stays unseen), cuts the batches.
CorpusData load_corpus_data(const tasks::RunPlan& p) {
    const tasks::CorpusOptions corpus_opts{
        .path = p.data, .val_sentences = p.val_sentences, .seed = p.seed, .sample_size = p.sample_size};
    CorpusData d;
    d.corpus = on_every_rank([&] { return tasks::load_corpus(corpus_opts); });
    const auto& rep = d.corpus.report;
    fmt::print(
        "fra-eng: {} lines, {} skipped; validation: {} English sentences drawn from the whole file with {} "
        "references; training: {} pairs ({} more left out for sharing a sentence with validation)\n",
        rep.lines.lines_read, rep.lines.lines_read - rep.lines.valid_pairs, rep.val_sentences, rep.val_pairs,
        rep.train_pairs, rep.dropped_overlap);

    d.tok = shared_tokenizers(p.tokenizer, d.corpus.train, p.vocab_size, p.seed);
    const int64_t n = p.model.num_steps;
    auto encoded = std::make_shared<tasks::EncodedPairs>(tasks::encode_pairs(d.corpus.train, d.tok, n));
    tasks::SubwordDropout subword;
    subword.p = p.subword_dropout;
    if (subword.p > 0) {
        subword.tokenizer = std::dynamic_pointer_cast<const tasks::SentencePieceTokenizer>(d.tok.src);
        subword.text = std::make_shared<const std::vector<tasks::TextPair>>(d.corpus.train);
    }
    d.batcher = std::make_shared<const tasks::BucketBatcher>(encoded, p.batch_tokens, p.seed, p.buckets, subword);
    fmt::print(
        "tokenizer: {}, vocabularies {} / {}; {} training pairs, {} longer than {} tokens left out; "
        "{} batches{} ({}-{} pairs, {:.1f}% padding){}\n",
        p.tokenizer, d.tok.src->size(), d.tok.tgt->size(), encoded->size(), encoded->dropped, n - 1,
        d.batcher->batches_per_epoch(),
        p.buckets ? fmt::format(" of up to {} tokens", p.batch_tokens) : std::string(" in random order"),
        d.batcher->min_batch(), d.batcher->max_batch(), 100 * d.batcher->padding_fraction(),
        subword.p > 0 ? fmt::format("; BPE-dropout {}: each epoch spelled anew", subword.p) : std::string());
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
Report corpus_report(nn::EncoderDecoder& model, const CorpusData& d, const tasks::RunPlan& p,
                     const tasks::TrainResult& r, double train_wall) {
    const int64_t n = p.model.num_steps;
    Report report;
    std::string& summary = report.text;
    summary = fmt::format(
        "trained {} steps in {:.1f} s ({:.0f} target tokens/s; {:.0f} s with data and tokenizer), final loss {:.4f} "
        "(cross-entropy per token{}){}\n",
        r.steps, r.seconds, r.tokens_per_second, train_wall, r.final_loss,
        p.train.label_smoothing > 0 ? ", label smoothing included" : "",
        r.averaged > 0 ? fmt::format("; final weights: the mean of the last {} snapshots", r.averaged) : "");
    const tasks::HeldOutLoss held_out = tasks::held_out_loss(model, d.corpus, d.tok, n, p.batch_tokens, p.seed);
    summary += held_out_line(held_out);
    add_held_out_figures(report.figures, held_out);
    const tasks::BleuOptions beam{.max_len = n, .decode = {.beam = 4, .length_penalty = 1.0}};
    const tasks::BleuOptions greedy{.max_len = n, .decode = {.beam = 1}};
    const tasks::BleuReport b_beam = tasks::evaluate_bleu(model, d.tok, d.corpus.val, beam);
    const tasks::BleuReport b_greedy = tasks::evaluate_bleu(model, d.tok, d.corpus.val, greedy);
    summary += bleu_line("validation corpus BLEU-4, beam 4", b_beam);
    summary += bleu_line("validation corpus BLEU-4, greedy", b_greedy);
    add_bleu_figures(report.figures, "beam 4", b_beam);
    add_bleu_figures(report.figures, "greedy", b_greedy);
    summary += "validation examples (beam 4):\n";
    const auto& val = d.corpus.val;
    for (size_t i = 0; i < std::min<size_t>(5, val.size()); ++i)
        summary += fmt::format("  {} => {}   (reference: {})\n", val[i].src, b_beam.hypotheses[i], val[i].refs.front());
    int perfect = 0;
    summary += "seed 000's sentences (greedy, d2l's BLEU with k = 2):\n" +
               seed_sentences_report(model, d.tok, {.max_len = n, .decode = {}}, &perfect);
    summary += fmt::format("  {} of 4 at BLEU 1.000\n", perfect);
    return report;
}

int train_translate_corpus(const tasks::RunPlan& p) {
    const auto start = std::chrono::steady_clock::now();
    const CorpusData d = load_corpus_data(p);
    tasks::ModelConfig config = p.model;
    config.src_vocab_size = d.tok.src->size();
    config.tgt_vocab_size = d.tok.tgt->size();
    if (config.tie_embeddings && !d.tok.joint())
        fail<ValueError>(
            "train translate: --tie-embeddings needs one vocabulary for both languages "
            "(--tokenizer sentencepiece); use --no-tie-embeddings with --tokenizer word");
    // buckets: rows × length stays within the token budget, the longest rows being the worst case
    const double longest = static_cast<double>(config.num_steps);
    check_memory(config, p,
                 p.buckets ? std::max(1.0, static_cast<double>(p.batch_tokens) / (2 * longest))
                           : static_cast<double>(d.batcher->max_batch()),
                 longest);
    core::Generator gen(p.seed);
    auto model = build_and_announce(config, gen);
    const tasks::TrainResult r = tasks::train(*model, gen, tasks::BucketBatcher::source(d.batcher), p.train,
                                              corpus_checkpoint_info(config, d.tok));
    if (r.interrupted) return interrupted_exit(r);
    if (!dist::is_root()) return 0;  // rank 0 evaluates and reports
    const double train_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Report report = corpus_report(*model, d, p, r, train_wall);
    report.text += pictures_report(*model, d.tok, "I'm home.", {.max_len = config.num_steps, .decode = {}}, r, p);
    return finish(p.train.out_dir, report);
}
}  // namespace

// ---- train -------------------------------------------------------------------------------------

namespace {
// What the ranks of a data-parallel job compare before they exchange
// anything of the run: the plan's settings (tasks::plan_settings: those that
// change the data, the vocabulary, the model or the run's length, which would
// otherwise make the ranks call different exchanges and wait for each other
// forever), and the data file's size and checksum. Not compared: what only
// one process uses (--out and the checkpoint in it, which rank 0 alone reads
// and writes; the data file's path, which may differ between machines) or how
// it runs (threads, output, limits).
std::vector<std::pair<std::string, std::string>> rank_settings(const tasks::RunPlan& p) {
    std::vector<std::pair<std::string, std::string>> settings = tasks::plan_settings(p);
    if (p.task == "translate") {
        std::string described;
        try {
            const std::string bytes = core::read_regular_file(p.data, "train", "a text file");
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

// The flags resolve once into the run's plan (the same on every rank, or
// the job stops); the rest reads the plan: --out prepared, the data read,
// the model built and trained (tasks::train, which also resumes), the report.
int run_train(const TrainArgs& a) {
    dist::set_timeout(a.mpi_timeout);
    const tasks::RunPlan plan = on_every_rank([&] { return resolve_plan(a); });  // a refusal ends every rank together
    if (dist::size() > 1) dist::check_same_settings(rank_settings(plan));
    const auto out_dir = on_every_rank([&] { return prepare_run(plan, a.overwrite); });  // held until the run ends
    if (plan.train.resume)  // a resume that differs is refused before the data is read and the vocabulary trained
        dist::together([&] {
            if (dist::is_root()) tasks::check_resume_settings(plan.train, plan.model, plan.train.total_steps);
        });
    switch (plan.pipeline) {
        case tasks::Pipeline::copy: return train_copy(plan);
        case tasks::Pipeline::d2l: return train_translate_d2l(plan);
        case tasks::Pipeline::corpus: break;
    }
    return train_translate_corpus(plan);
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
        const tasks::CorpusOptions split = corpus_options_from(info.extra, data);
        const tasks::Corpus val = tasks::load_corpus(split);
        if (a.max_sentences == 0) {  // the whole validation split: its loss beside a training sample's
            const int64_t batch_tokens = info.extra.count("batch_tokens") ? meta_int(info.extra, "batch_tokens") : 1500;
            fmt::print("{}", held_out_line(tasks::held_out_loss(*t->model, val, t->tok, info.config.num_steps,
                                                                batch_tokens, split.seed)));
        }
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
