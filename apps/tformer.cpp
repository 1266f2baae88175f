// tformer: train and use the Transformers of the course documents.
//
//   tformer train translate [--preset default|d2l] [--out DIR] ...
//   tformer train copy [--out DIR] ...
//   tformer translate --checkpoint runs/translate/checkpoint.safetensors "i'm home ."
//   tformer eval --checkpoint runs/translate/checkpoint.safetensors
//   tformer bench [--preset d2l|copy|small|base|translate] [--threads N] [--repeats N]
//   tformer tutorial [N] [--step] [--lang en|zh] [--from STEP | --only STEP] [--quiet-tensors] [--exercise] [--literal]
//   tformer serve --checkpoint runs/translate/checkpoint.safetensors [--run runs/translate]
#include "apps/commands.hpp"
#include "apps/serve.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "tasks/bench.hpp"
#include "tasks/distributed.hpp"
#include "tasks/fra_eng.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <malloc.h>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <vector>

using namespace tformer::apps;

namespace {
// Range checks CLI11 lacks: NaN fails every comparison, so CLI::Range lets it through.
CLI::Validator number_check(bool (*ok)(double), const char* what, const char* name) {
    return CLI::Validator(
        [ok, what](std::string& v) -> std::string {
            double x = 0;
            try {
                size_t used = 0;
                x = std::stod(v, &used);
                if (used != v.size()) return "not a number: " + v;
            } catch (const std::exception&) {
                return "not a number: " + v;
            }
            return ok(x) ? std::string() : std::string("must be ") + what + ", got " + v;
        },
        name);
}
const CLI::Validator positive_finite =
    number_check([](double x) { return std::isfinite(x) && x > 0; }, "a finite number > 0", "POSITIVE");
const CLI::Validator non_negative_finite =
    number_check([](double x) { return std::isfinite(x) && x >= 0; }, "a finite number >= 0", "NON-NEGATIVE");
const CLI::Validator probability = number_check([](double x) { return x >= 0 && x < 1; }, "in [0, 1)", "[0, 1)");

// An integer in [lo, hi], read as a whole (so "99999999999999999999" is out of range, not wrapped).
CLI::Validator int_range(int64_t lo, int64_t hi) {
    return CLI::Validator(
        [lo, hi](std::string& v) -> std::string {
            try {
                size_t used = 0;
                const long long x = std::stoll(v, &used);
                if (used == v.size() && x >= lo && x <= hi) return {};
            } catch (const std::exception&) {
            }
            return fmt::format("must be a whole number from {} to {}, got {}", lo, hi, v);
        },
        fmt::format("INT in [{}, {}]", lo, hi));
}
constexpr int64_t kHuge = 1'000'000'000'000;  // more steps, pairs or seeds than anyone means
const CLI::Validator positive = int_range(1, kHuge);
const CLI::Validator non_negative = int_range(0, kHuge);

// train's model sizes
void add_model_options(CLI::App& cmd, TrainArgs& a, bool translation) {
    cmd.add_option("--num-steps", a.num_steps,
                   translation ? "d2l: sequence length (padded/truncated); default and long: the longest sequence kept "
                                 "(tokens, <eos> included; longer pairs are left out and counted)"
                               : "sequence length")
        ->check(int_range(2, 1000));
    cmd.add_option("--num-hiddens", a.num_hiddens, "model width d (key/query/value sizes follow)")->check(positive);
    cmd.add_option("--ffn-num-hiddens", a.ffn_num_hiddens, "hidden width of the position-wise FFN")->check(positive);
    cmd.add_option("--num-heads", a.num_heads, "attention heads")->check(positive);
    cmd.add_option("--num-layers", a.num_layers, "encoder and decoder blocks")->check(positive);
    cmd.add_option("--dropout", a.dropout, "dropout probability")->check(probability);
}

// train's loop: its length, batches, optimiser, seed and checkpoints
void add_loop_options(CLI::App& cmd, TrainArgs& a, bool translation) {
    cmd.add_option("--epochs", a.epochs, "number of epochs")->check(int_range(1, 1'000'000));
    cmd.add_option("--steps", a.steps, "train this many steps in all instead of whole epochs (the schedule spans them)")
        ->check(positive);
    cmd.add_option("--batch-size", a.batch_size,
                   translation ? "sequences per batch (d2l preset)" : "sequences per batch")
        ->check(positive);
    cmd.add_option("--lr", a.lr, "(peak) learning rate of Adam")->check(positive_finite);
    cmd.add_option("--adam-beta2", a.adam_beta2,
                   "Adam's beta2, the decay rate of its average of squared gradients (default 0.999)")
        ->check(probability);
    cmd.add_option("--schedule", a.schedule, "learning-rate schedule: constant, noam or cosine");
    cmd.add_option("--warmup", a.warmup, "warm-up steps for noam / cosine")->check(non_negative);
    cmd.add_option("--clip", a.clip, "gradient-norm clipping threshold (0: off)")->check(non_negative_finite);
    cmd.add_option("--label-smoothing", a.label_smoothing, "label smoothing epsilon")->check(probability);
    cmd.add_option("--seed", a.seed, "seed of every random choice (weights, dropout, data)")->check(non_negative);
    cmd.add_option("--checkpoint-every", a.checkpoint_every, "also save a checkpoint every N steps")
        ->check(non_negative);
    cmd.add_flag("--resume", a.resume, "continue from <out>/checkpoint.safetensors exactly where it stopped");
    cmd.add_flag("--overwrite", a.overwrite,
                 "replace the checkpoint already in <out> (without it, a new run refuses to)");
    cmd.add_option("--stop-after-steps", a.stop_after_steps, "stop after this many steps in total (to test --resume)")
        ->check(non_negative);
}

// how train runs and what it shows: output, threads, limits, diagnostics
void add_run_options(CLI::App& cmd, TrainArgs& a) {
    cmd.add_option("--out", a.out, "output directory (default runs/<task>)");
    cmd.add_option("--threads", a.threads,
                   "threads for kernels and BLAS (default: all cores, shared among the ranks on a machine under "
                   "mpirun; 1 for the small d2l and copy presets)")
        ->check(int_range(1, 1'000'000));
    cmd.add_flag("--quiet", a.quiet, "no progress line");
    cmd.add_option("--plot-format", a.plot_format, "pictures as png or svg")
        ->capture_default_str()
        ->check(CLI::IsMember({"png", "svg"}));
    cmd.add_option("--max-memory", a.max_memory,
                   "GB the run may take (default: the memory available now); a model estimated above it is refused")
        ->check(positive_finite);
    cmd.add_flag("--detect-anomaly", a.detect_anomaly,
                 "check every op's output and gradient for NaN and name the first op that makes one (slow)");
    cmd.add_option("--mpi-timeout", a.mpi_timeout,
                   "under mpirun: seconds a rank waits for the others in one exchange before it stops the job "
                   "(0: no limit)")
        ->capture_default_str()
        ->check(non_negative_finite);
    cmd.add_flag("--profile", a.profile,
                 "print where the time went, op by op (also TFORMER_PROFILE=1); written to <out>/profile.txt");
}

// the data: the translation presets' corpus, or the copy task's batches
void add_data_options(CLI::App& cmd, TrainArgs& a, bool translation) {
    if (translation) {
        cmd.add_option("--data", a.data, "path of fra.txt (default: data/fra-eng/fra.txt of this repository)");
        cmd.add_option("--num-examples", a.num_examples,
                       "d2l preset: use d2l's prefix of the file (600 reproduces seed 000; 0: all)")
            ->check(non_negative);
        cmd.add_option("--sample-size", a.sample_size, "train on a seeded random sample of this many pairs")
            ->check(positive);
        cmd.add_option("--val-fraction", a.val_fraction,
                       "d2l preset: share of distinct English sentences held out for validation")
            ->check(number_check([](double x) { return x >= 0 && x <= 0.99; }, "in [0, 0.99]", "[0, 0.99]"));
        cmd.add_option(
               "--val-sentences", a.val_sentences,
               "default/long: English sentences drawn from the whole file for validation (with all their translations)")
            ->check(non_negative);
        cmd.add_option("--tokenizer", a.tokenizer,
                       "default/long: sentencepiece (joint subword vocabulary) or word (d2l's)");
        cmd.add_option("--vocab-size", a.vocab_size, "default/long: size of the SentencePiece vocabulary")
            ->check(int_range(8, 1000000));
        cmd.add_option(
               "--batch-tokens", a.batch_tokens,
               "default/long: tokens per batch (source + target, padding included); batches come from length buckets")
            ->check(int_range(16, 10000000));
        cmd.add_option(
            "--batching", a.batching,
            "default/long: buckets (pairs of similar length together, the default) or random (for comparison)");
        cmd.add_option("--subword-dropout", a.subword_dropout,
                       "default/long: BPE-dropout, the chance that a SentencePiece merge is skipped when an epoch's "
                       "training pairs are spelled (a pair comes in other pieces each epoch; 0: off)")
            ->check(probability);
        cmd.add_flag(
            "--tie-embeddings,!--no-tie-embeddings", a.tie_embeddings,
            "default/long: one matrix for both embeddings and the output layer (needs --tokenizer sentencepiece)");
        cmd.add_option("--average", a.average, "average the final weights over this many snapshots (0 or 1: off)")
            ->check(int_range(0, 20));
    } else {
        cmd.add_option("--batches-per-epoch", a.batches_per_epoch, "fresh random batches per epoch")->check(positive);
    }
}

void add_train_options(CLI::App& cmd, TrainArgs& a, bool translation) {
    cmd.add_option("--preset", a.preset,
                   translation
                       ? "default (the whole corpus, subwords, about 3 minutes on 2 cores), long (about 15 minutes) "
                         "or d2l (seed 000 exactly)"
                       : "copy");
    add_model_options(cmd, a, translation);
    add_loop_options(cmd, a, translation);
    add_data_options(cmd, a, translation);
    add_run_options(cmd, a);
}
// `tformer translate` and its options, into tr
CLI::App* add_translate_command(CLI::App& app, TranslateArgs& tr) {
    CLI::App* translate = app.add_subcommand("translate", "translate English sentences (arguments, or lines on stdin)");
    translate->add_option("--checkpoint", tr.checkpoint, "a checkpoint written by 'tformer train translate'")
        ->required();
    translate->add_option("sentences", tr.sentences, "sentences to translate; none: read lines from stdin");
    translate->add_option("--beam", tr.beam, "beam size (1: greedy)")->capture_default_str()->check(int_range(1, 64));
    translate->add_option("--length-penalty", tr.length_penalty, "beam scores are log p / length^alpha")
        ->capture_default_str()
        ->check(non_negative_finite);
    translate->add_option("--show-attention", tr.show_attention, "write attention heatmaps into this directory");
    translate->add_option("--plot-format", tr.plot_format, "heatmaps as png or svg")
        ->capture_default_str()
        ->check(CLI::IsMember({"png", "svg"}));
    translate->add_option("--threads", tr.threads, "threads (default: all cores)")->check(int_range(1, 1'000'000));
    translate->add_flag("--exhaustive-beam", tr.exhaustive,
                        "search each sentence until its K best continuations all end (default: stop once K "
                        "hypotheses have ended and no live one scores better)");
    translate->add_option("--n-best", tr.n_best, "print the n best translations of each line: LINE ||| text ||| score")
        ->capture_default_str()
        ->check(int_range(1, 64));
    translate->add_option("--batch-tokens", tr.batch_tokens, "source tokens per batch of sentences decoded together")
        ->capture_default_str()
        ->check(int_range(1, 1'000'000'000));
    translate
        ->add_option("--chunk-lines", tr.chunk_lines,
                     "lines of stdin read, sorted by length and translated together (output follows each chunk)")
        ->capture_default_str()
        ->check(int_range(1, 1'000'000'000));
    return translate;
}

// `tformer eval` and its options, into ev
CLI::App* add_eval_command(CLI::App& app, EvalArgs& ev) {
    CLI::App* eval = app.add_subcommand("eval", "evaluate a checkpoint (copy: accuracy; translate: BLEU)");
    eval->add_option("--checkpoint", ev.checkpoint, "the checkpoint")->required();
    eval->add_option("--data", ev.data, "path of fra.txt for translation checkpoints");
    eval->add_option("--max-sentences", ev.max_sentences, "evaluate on at most this many validation sentences (0: all)")
        ->check(non_negative);
    eval->add_option("--beam", ev.beam,
                     "beam size for the validation BLEU of whole-corpus models (1: greedy; default 4)")
        ->check(int_range(1, 64));
    eval->add_option("--length-penalty", ev.length_penalty, "beam scores are log p / length^alpha (default 1)")
        ->check(non_negative_finite);
    eval->add_flag("--exhaustive-beam", ev.exhaustive,
                   "search each sentence until its K best continuations all end (default: stop once K "
                   "hypotheses have ended and no live one scores better)");
    eval->add_option("--threads", ev.threads, "threads")->check(int_range(1, 1'000'000));
    return eval;
}

// `tformer bench` and its options, into bo
CLI::App* add_bench_command(CLI::App& app, tformer::tasks::BenchOptions& bo) {
    CLI::App* bench =
        app.add_subcommand("bench", "time a training step, a forward pass and greedy decoding (JSON lines)");
    bench
        ->add_option("--preset", bo.preset,
                     "model and batch: d2l, copy, small, base or translate (the default "
                     "translation model on real batches of the corpus); decode: translating validation sentences "
                     "with a checkpoint")
        ->capture_default_str();
    bench->add_option("--threads", bo.threads, "threads for kernels and BLAS (default: all cores)")
        ->check(int_range(1, 1'000'000));
    bench->add_option("--repeats", bo.repeats, "timed runs per figure, reported as the median (default: the preset's)")
        ->check(int_range(1, 100000));
    bench->add_option("--checkpoint", bo.checkpoint, "--preset decode: the checkpoint")->capture_default_str();
    bench->add_option("--sentences", bo.sentences, "--preset decode: how many validation sentences")
        ->capture_default_str()
        ->check(int_range(1, 1'000'000));
    bench->add_option("--save-sentences", bo.save_sentences, "--preset decode: write the sentences to this file");
    bench->add_option("--batch-tokens", bo.batch_tokens, "--preset decode: source tokens per batch")
        ->capture_default_str()
        ->check(int_range(1, 1'000'000'000));
    bench->add_flag("--profile", bo.profile, "also print where a training step's time goes, op by op (stderr)");
    bench->add_flag("--train-only", bo.train_only,
                    "time training steps only (no forward pass, decoding or GFLOP/s figures)");
    bench->add_option("--data", bo.data, "fra.txt for --preset translate (default: the bundled corpus)");
    bench->add_option("--save-batches", bo.save_batches,
                      "write the measured batches as JSON (bench/torch_bench.py --batches reads them)");
    bench->add_option("--load-batches", bo.load_batches,
                      "measure the batches of a --save-batches file (skips the tokenizer)");
    return bench;
}

// `tformer tutorial` and its options, into tut
CLI::App* add_tutorial_command(CLI::App& app, TutorialArgs& tut) {
    CLI::App* tutorial = app.add_subcommand("tutorial", "list the tutorials, or run one");
    tutorial->add_option("number", tut.which, "tutorial number or name, e.g. 5 or 05_attention_scoring");
    tutorial->add_flag("--step", tut.step, "pause after each step until Enter");
    tutorial->add_option("--out", tut.out, "directory for the tutorial's pictures");
    tutorial->add_flag("--exercise", tut.exercise, "run the tutorial's exercise (edit its exercise.cpp to solve it)");
    tutorial->add_flag("--literal", tut.literal, "run the document's recipe exactly as written (tutorials 12 and 13)");
    tutorial->add_option("--plot-format", tut.plot_format, "pictures as png or svg")
        ->capture_default_str()
        ->check(CLI::IsMember({"png", "svg"}));
    tutorial->add_option("--lang", tut.lang, "the language of the explanations, en or zh (default: from the locale)")
        ->check(CLI::IsMember({"en", "zh"}));
    tutorial->add_option("--from", tut.from, "start at that step (e.g. 3 or 2b); the steps before it run quietly");
    tutorial->add_option("--only", tut.only, "that step alone, after the steps before it have run quietly");
    tutorial->add_flag("--quiet-tensors", tut.quiet_tensors, "print a large tensor's shape and a few of its values");
    return tutorial;
}

// `tformer serve` and its options, into sv
CLI::App* add_serve_command(CLI::App& app, ServeArgs& sv) {
    CLI::App* serve = app.add_subcommand(
        "serve", "the studio: a web page (and a JSON API) to translate and look inside a model (docs/serve.md)");
    serve->add_option("--checkpoint", sv.checkpoints, "a checkpoint to serve (repeatable; the page picks one)")
        ->required();
    serve->add_option("--run", sv.runs,
                      "a training output folder whose loss the page draws, live while it trains "
                      "(repeatable)");
    serve
        ->add_option("--host", sv.host,
                     "address to listen on; other than loopback only when you mean it (the page "
                     "has no authentication)")
        ->capture_default_str();
    serve->add_option("--port", sv.port, "port (0: any free one, printed)")
        ->capture_default_str()
        ->check(int_range(0, 65535));
    serve
        ->add_option("--max-concurrent", sv.max_concurrent,
                     "requests using the model at once; the others wait up to --queue-timeout, then get 503")
        ->capture_default_str()
        ->check(int_range(1, 1024));
    serve->add_option("--queue-timeout", sv.queue_timeout, "seconds a request waits for the model before a 503")
        ->capture_default_str()
        ->check(non_negative_finite);
    serve
        ->add_option("--batch-window", sv.batch_window,
                     "milliseconds a batch waits for more requests to decode together")
        ->capture_default_str()
        ->check(number_check([](double x) { return x >= 0 && x <= 1000; }, "in [0, 1000]", "[0, 1000]"));
    serve->add_option("--web", sv.web, "the page's folder (default: the installed one, else web/ of the sources)");
    serve->add_option("--threads", sv.threads, "threads for kernels and BLAS (default: all cores)")
        ->check(int_range(1, 1'000'000));
    return serve;
}

// CLI11 answers a mistyped command with "A subcommand is required"; this
// names it instead, and says so (true) when argv holds one.
bool mistyped_command(int argc, char** argv) {
    auto unknown = [&](int i, const std::vector<std::string_view>& known, const char* what) {
        if (argc <= i || argv[i][0] == '-') return false;
        for (std::string_view k : known)
            if (argv[i] == k) return false;
        const std::vector<std::string_view> all_but_last(known.begin(), known.end() - 1);
        fmt::print(stderr, "tformer: error: {} '{}' (expected {} or {}); see tformer --help\n", what, argv[i],
                   fmt::join(all_but_last, ", "), known.back());
        return true;
    };
    if (unknown(1, {"train", "translate", "eval", "bench", "tutorial", "serve"}, "unknown command")) return true;
    return argc > 1 && std::string_view(argv[1]) == "train" && unknown(2, {"copy", "translate"}, "train: unknown task");
}

}  // namespace

int main(int argc, char** argv) {
    // Started by mpirun: one rank of a data-parallel job (docs/distributed.md),
    // and only rank 0 prints. Started alone: nothing changes.
    tformer::tasks::dist::Session mpi(argc, argv);
    tformer::tasks::dist::quiet_other_ranks();
    // Training allocates and frees the same large buffers every step (the
    // logits of a batch over a vocabulary of thousands are tens of MB).
    // glibc serves such blocks with mmap and unmaps them on free, so every
    // step pays page faults to map them again: 12% of a translation step went
    // to the kernel. Keeping large blocks in the heap, and the heap from
    // shrinking, lets the next step reuse the same pages.
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    // Past a file-size limit (ulimit -f) the kernel would kill us with
    // SIGXFSZ and no message; ignored, the write fails with EFBIG instead and
    // the save reports it, keeping the previous file.
    std::signal(SIGXFSZ, SIG_IGN);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // results appear line by line, also in a pipe or a log file
    CLI::App app{"tformer: a from-scratch Transformer framework (train, translate, eval, bench, tutorial, serve)"};
    app.set_version_flag("--version", std::string("tformer ") + tformer::kVersion);
    app.require_subcommand(1);

    TrainArgs copy_args, translate_train_args;
    copy_args.task = "copy";
    translate_train_args.task = "translate";
    CLI::App* train = app.add_subcommand("train", "train a model");
    train->require_subcommand(1);
    CLI::App* train_copy = train->add_subcommand("copy", "the copy task of seed 004");
    add_train_options(*train_copy, copy_args, false);
    CLI::App* train_translate =
        train->add_subcommand("translate", "English -> French on the bundled corpus (seed 000)");
    add_train_options(*train_translate, translate_train_args, true);

    TranslateArgs tr;
    CLI::App* translate = add_translate_command(app, tr);
    EvalArgs ev;
    CLI::App* eval = add_eval_command(app, ev);
    tformer::tasks::BenchOptions bo;
    CLI::App* bench = add_bench_command(app, bo);
    TutorialArgs tut;
    CLI::App* tutorial = add_tutorial_command(app, tut);
    ServeArgs sv;
    CLI::App* serve = add_serve_command(app, sv);
    if (mistyped_command(argc, argv)) return 1;
    CLI11_PARSE(app, argc, argv);
    try {
        if (*train_copy) return run_train(copy_args);
        if (*train_translate) return run_train(translate_train_args);
        if (*translate) return run_translate(tr);
        if (*eval) return run_eval(ev);
        if (*bench) {
            if (bo.data.empty()) {  // as train's default: $TFORMER_DATA_DIR, else the bundled corpus
                const std::string env = tformer::tasks::default_fra_eng_path();
                bo.data =
                    std::filesystem::exists(env) ? env : std::string(TFORMER_SOURCE_DIR) + "/data/fra-eng/fra.txt";
            }
            return tformer::tasks::run_model_bench(bo);
        }
        if (*tutorial) return run_tutorial(tut);
        if (*serve) return run_serve(sv);
    } catch (
        const std::exception& e) {  // tformer::Error and the rest: "tformer: error: ..." (with ranks: see report_error)
        return tformer::tasks::dist::report_error(e.what());
    }
    return 0;
}
