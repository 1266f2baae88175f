#include "tasks/train.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/loss.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"
#include "tasks/distributed.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <string_view>

namespace tformer::tasks {

using autograd::Variable;
using core::Tensor;

// ---- the fused objective ----------------------------------------------------------------------

Variable fused_output_loss(nn::EncoderDecoder& model, const Batch& batch, double row_weight, double label_smoothing) {
    Variable H = model.forward_hidden(batch.enc_X, batch.dec_in, batch.enc_valid);  // (B, T, D)
    const int64_t B = H.size(0), T = H.size(1), D = H.size(2);
    const Tensor w = core::mul(nn::sequence_mask(batch.label_valid, T, H.dtype()), row_weight);  // (B, T)
    const nn::Linear& dense = *model.decoder->dense;
    return autograd::linear_cross_entropy(autograd::reshape(H, {B * T, D}), dense.weight, dense.bias,
                                          batch.label.reshape({B * T}), w.reshape({B * T}), label_smoothing);
}

// ---- batches ------------------------------------------------------------------------------

Batch copy_batch(int64_t batch, int64_t length, int64_t vocab, core::Generator& gen) {
    if (batch <= 0 || length < 2 || vocab < 3)
        fail<ValueError>("copy_batch: need batch > 0, length >= 2 and vocab >= 3, got {}, {}, {}", batch, length,
                         vocab);
    // seed 004: data = randint(1, V, size=(batch, length)); data[:, 0] = 1
    Tensor src = core::randint({batch, length}, 1, vocab, gen);
    for (int64_t b = 0; b < batch; ++b) src.set({b, 0}, 1.0);
    Batch out;
    out.enc_X = src;
    out.enc_valid = core::full({batch}, static_cast<double>(length), core::DType::int64);
    out.dec_in = src.slice(1, 0, length - 1).contiguous();  // tgt[:, :-1]
    out.label = src.slice(1, 1, length).contiguous();       // tgt[:, 1:]
    out.label_valid = core::full({batch}, static_cast<double>(length - 1), core::DType::int64);
    return out;
}

Batch translation_batch(const NmtSplit& split, const std::vector<int64_t>& rows, int64_t bos) {
    const Tensor index = core::from_vector(rows, {static_cast<int64_t>(rows.size())});
    Batch out;
    out.enc_X = core::index_select(split.src, 0, index);
    out.enc_valid = core::index_select(split.src_valid_len, 0, index);
    out.label = core::index_select(split.tgt, 0, index);
    out.label_valid = core::index_select(split.tgt_valid_len, 0, index);
    // d2l: dec_input = cat([<bos>, Y[:, :-1]], 1) (teacher forcing)
    const int64_t B = out.label.size(0), T = out.label.size(1);
    const Tensor bos_col = core::full({B, 1}, static_cast<double>(bos), core::DType::int64);
    out.dec_in = core::concat({bos_col, out.label.slice(1, 0, T - 1)}, 1);
    return out;
}

BatchSource translation_source(const NmtSplit& split, int64_t batch_size, int64_t bos, uint64_t seed) {
    const int64_t n = split.src.size(0);
    if (n == 0) fail<ValueError>("translation_source: the training split is empty");
    if (batch_size <= 0) fail<ValueError>("translation_source: batch size must be positive, got {}", batch_size);
    BatchSource source;
    source.batches_per_epoch = (n + batch_size - 1) / batch_size;  // the last batch may be smaller, as d2l's DataLoader
    source.get = [&split, n, batch_size, bos, seed](int64_t epoch, int64_t index) {
        // the same shuffle for the same (seed, epoch), whatever happened before
        core::Generator g(core::mix_seed(seed, static_cast<uint64_t>(epoch), 0x5eed));
        std::vector<int64_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        core::shuffle(order.begin(), order.end(), g);
        const int64_t begin = index * batch_size, end = std::min(n, begin + batch_size);
        return translation_batch(split, std::vector<int64_t>(order.begin() + begin, order.begin() + end), bos);
    };
    return source;
}

BatchSource copy_source(int64_t batch_size, int64_t length, int64_t vocab, int64_t batches_per_epoch, uint64_t seed) {
    BatchSource source;
    source.batches_per_epoch = batches_per_epoch;
    source.get = [=](int64_t epoch, int64_t index) {
        core::Generator g(core::mix_seed(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index) + 1));
        return copy_batch(batch_size, length, vocab, g);
    };
    return source;
}

Batch shard_batch(const Batch& global, int rank, int size) {
    const dist::RowRange rows = dist::shard_rows(global.label.size(0), rank, size);
    auto cut = [&](const Tensor& t) { return t.slice(0, rows.begin, rows.end).contiguous(); };
    return {.enc_X = cut(global.enc_X),
            .enc_valid = cut(global.enc_valid),
            .dec_in = cut(global.dec_in),
            .label = cut(global.label),
            .label_valid = cut(global.label_valid)};
}

// ---- progress ---------------------------------------------------------------------------------

namespace {
std::string clock_str(double seconds) {
    const int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
    return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                     : fmt::format("{}:{:02}", s / 60, s % 60);
}

std::unique_ptr<optim::LRSchedule> make_schedule(const TrainOptions& o, int64_t total_steps, int64_t d_model) {
    if (o.schedule == "constant") return std::make_unique<optim::ConstantLR>(o.lr);
    if (o.schedule == "noam") {
        // Noam's factor is chosen so the peak (at the end of warm-up) equals --lr
        const double warmup = static_cast<double>(std::max<int64_t>(o.warmup, 1));
        const double factor = o.lr / (std::pow(static_cast<double>(d_model), -0.5) * std::pow(warmup, -0.5));
        return std::make_unique<optim::NoamLR>(
            optim::NoamOptions{.d_model = d_model, .warmup = std::max<int64_t>(o.warmup, 1), .factor = factor});
    }
    if (o.schedule == "cosine") {
        if (o.warmup > total_steps)
            fail<ValueError>(
                "train: the warm-up (--warmup {}) is longer than the whole run ({} steps); give a smaller "
                "--warmup, or more --steps or --epochs",
                o.warmup, total_steps);
        return std::make_unique<optim::CosineLR>(optim::CosineOptions{
            .base_lr = o.lr, .warmup_steps = o.warmup, .total_steps = total_steps, .min_lr = o.lr * 0.05});
    }
    fail<ValueError>("train: unknown learning-rate schedule '{}' (expected constant, noam or cosine)", o.schedule);
}

// What the checkpoint's metadata keeps of the run, and a resume compares:
// the caller's o.extra (the data settings) and the settings that decide each
// update, the peak rate and its schedule, Adam's β2, the clip and the
// objective. The run's length only where the schedule depends on it
// (cosine): under a constant or Noam rate more epochs continue the same run.
std::map<std::string, std::string> saved_settings(const TrainOptions& o, int64_t total_steps) {
    // fmt's "{}" is the shortest text that reads back as the same double
    std::map<std::string, std::string> s = o.extra;
    s.merge(std::map<std::string, std::string>{{"lr", fmt::format("{}", o.lr)},
                                               {"adam_beta2", fmt::format("{}", o.adam_beta2)},
                                               {"schedule", o.schedule},
                                               {"warmup", std::to_string(o.warmup)},
                                               {"clip", fmt::format("{}", o.clip)},
                                               {"label_smoothing", fmt::format("{}", o.label_smoothing)},
                                               {"token_mean", o.token_mean ? "true" : "false"}});
    if (o.schedule == "cosine" && total_steps > 0) s.try_emplace("total_steps", std::to_string(total_steps));
    return s;
}

void fail_resume(const std::string& path, const std::vector<std::string>& differences) {
    fail<ValueError>(
        "train: --resume continues the run saved in '{}' where it stopped, but this run differs: {}; "
        "give the flags of that run, or --overwrite to start a new one",
        path, fmt::join(differences, ", "));
}

// A resumed run must be the run that stopped: the same model, the same data
// in the same order (the step count says where in the data it was) and the
// same updates, so a config, a data setting (batch size, sample, seed, ...)
// or an update setting (rate, schedule, β2, ...) that differs is refused
// instead of silently training another run. A checkpoint written before a
// setting was kept is not checked for it.
// The differences as "key value (the checkpoint's: saved)"; with_vocab
// false: the config's but the vocabularies' sizes (which the data decides).
std::vector<std::string> differences(const CheckpointInfo& saved, const ModelConfig& now, const TrainOptions& o,
                                     int64_t total_steps, bool with_vocab) {
    std::vector<std::string> found;
    const nlohmann::json before = nlohmann::json::parse(config_to_json(saved.config));
    const nlohmann::json after = nlohmann::json::parse(config_to_json(now));
    for (const auto& [key, value] : after.items()) {
        if (!with_vocab && (key == "src_vocab_size" || key == "tgt_vocab_size")) continue;
        if (!before.contains(key) || before[key] != value)
            found.push_back(fmt::format("{} {} (the checkpoint's: {})", key, value.dump(),
                                        before.contains(key) ? before[key].dump() : "none"));
    }
    for (const auto& [key, value] : saved_settings(o, total_steps))
        if (auto it = saved.extra.find(key); it != saved.extra.end() && it->second != value)
            found.push_back(fmt::format("{} {} (the checkpoint's: {})", key, value, it->second));
    return found;
}

void check_resume(const CheckpointInfo& saved, const CheckpointInfo& now, const TrainOptions& o, int64_t total_steps,
                  const std::string& path) {
    const std::vector<std::string> found = differences(saved, now.config, o, total_steps, true);
    if (!found.empty()) fail_resume(path, found);
}
}  // namespace

std::string checkpoint_path(const std::string& out_dir) {
    return (std::filesystem::path(out_dir) / "checkpoint.safetensors").string();
}

void check_resume_settings(const TrainOptions& o, const ModelConfig& planned, int64_t total_steps) {
    if (o.out_dir.empty()) return;
    const std::string path = checkpoint_path(o.out_dir);
    if (!std::filesystem::exists(path)) return;
    const std::vector<std::string> found = differences(read_checkpoint_info(path), planned, o, total_steps, false);
    if (!found.empty()) fail_resume(path, found);
}

// ---- the loop: its pieces -----------------------------------------------------------------------

namespace {
namespace fs = std::filesystem;

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// Installs the SIGINT/SIGTERM handlers for its lifetime and restores the previous ones.
class SignalScope {
public:
    SignalScope() {
        g_stop_signal = 0;
        struct sigaction sa {};
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int_);
        sigaction(SIGTERM, &sa, &old_term_);
    }
    ~SignalScope() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
    }
    SignalScope(const SignalScope&) = delete;
    SignalScope& operator=(const SignalScope&) = delete;

private:
    struct sigaction old_int_ {
    }, old_term_{};
};

// How long a run is and where it saves, from the options and the data;
// refuses options that cannot run.
struct Plan {
    int64_t batches_per_epoch = 0;
    int64_t total_steps = 0;   ///< the updates of the whole run (the schedule's length)
    int64_t epochs_shown = 0;  ///< the epochs the progress line counts (the last one may be partial)
    std::string checkpoint;    ///< <out_dir>/checkpoint.safetensors, or "" without an out_dir
};

Plan plan_run(const TrainOptions& o, const BatchSource& source) {
    if (o.epochs <= 0) fail<ValueError>("train: epochs must be positive, got {}", o.epochs);
    if (source.batches_per_epoch <= 0) fail<ValueError>("train: an epoch has no batches");
    if (!o.out_dir.empty() && dist::is_root()) fs::create_directories(o.out_dir);  // rank 0 alone writes
    Plan plan;
    plan.checkpoint = o.out_dir.empty() ? "" : checkpoint_path(o.out_dir);
    if (o.fused_loss && !o.token_mean)
        fail<ValueError>("train: fused_loss computes the token mean; set token_mean too");
    if (o.total_steps < 0 || o.average < 0)
        fail<ValueError>("train: total_steps and average must be >= 0, got {} and {}", o.total_steps, o.average);
    const int64_t bpe = source.batches_per_epoch;
    if (o.epochs > std::numeric_limits<int64_t>::max() / bpe)
        fail<ValueError>("train: {} epochs of {} batches is more steps than can be counted", o.epochs, bpe);
    plan.batches_per_epoch = bpe;
    plan.total_steps = o.total_steps > 0 ? o.total_steps : o.epochs * bpe;
    plan.epochs_shown = (plan.total_steps + bpe - 1) / bpe;
    return plan;
}

// The losses of a run: d2l's Accumulator (Σ loss and Σ tokens of the epoch
// in progress), the mean of every finished epoch and every step.
struct LossTally {
    std::vector<double> epoch_loss, step_loss;
    int64_t first_step = 0;  ///< step_loss[0] is step first_step + 1: 0, unless resumed from a checkpoint without them
    double epoch_loss_sum = 0, epoch_tokens = 0;  ///< the epoch in progress
    double tokens_done = 0;                       ///< by this process (a resumed run counts from its start)

    // the mean of the last epoch, or of the part of it trained when the run ended inside one
    double final_loss() const {
        return epoch_tokens > 0      ? epoch_loss_sum / epoch_tokens
               : !epoch_loss.empty() ? epoch_loss.back()
               : step_loss.empty()   ? 0
                                     : step_loss.back();
    }
};

// A loss far above where training started means it is diverging even while
// it stays finite: a warning when a step's loss passes twice the mean of the
// first ten steps (or twice ln V, a uniform guess's loss, if the start was
// already worse), again only after a tenfold rise.
class DivergenceWatch {
public:
    explicit DivergenceWatch(int64_t vocab_size)
        : uniform_loss_(std::log(static_cast<double>(std::max<int64_t>(2, vocab_size)))) {}

    void check(double loss, int64_t step) {
        if (first_count_ < 10) {
            first_losses_ += loss;
            ++first_count_;
        }
        if (const double limit = 2 * std::min(first_losses_ / first_count_, uniform_loss_);
            loss > limit && loss > 10 * warned_at_) {
            fmt::print(stderr,
                       "\ntrain: warning: the loss is {:.4g} at step {}, more than {:.3g}: training is "
                       "diverging; try a lower --lr\n",
                       loss, step, limit);
            warned_at_ = loss;
        }
    }

private:
    double uniform_loss_, first_losses_ = 0, warned_at_ = 0;
    int64_t first_count_ = 0;
};

// Checkpoint averaging (TrainOptions::average): snapshots of the weights at
// total_steps - k·every, k = count-1 .. 0 (every: 5% of the steps), whose
// mean becomes the final weights.
class Averaging {
public:
    Averaging(int64_t count, int64_t total_steps)
        : count_(count), total_steps_(total_steps), every_(std::max<int64_t>(1, total_steps / 20)) {}

    // after update `step`: a snapshot when one is due
    void after_step(int64_t step, const std::vector<Variable>& params) {
        const int64_t left = total_steps_ - step;
        if (count_ <= 1 || left % every_ != 0 || left / every_ >= count_) return;
        std::vector<Tensor> values;
        for (const Variable& p : params) values.push_back(p.value().clone());
        snapshots_.push_back(std::move(values));
    }

    // the mean of the snapshots written into the parameters in place; how many it averaged (0: none)
    int64_t apply(const std::vector<Variable>& params) const {
        if (snapshots_.size() <= 1) return 0;
        for (size_t i = 0; i < params.size(); ++i) {
            Tensor mean = snapshots_[0][i];
            for (size_t k = 1; k < snapshots_.size(); ++k) mean = core::add(mean, snapshots_[k][i]);
            core::copy_(params[i].value(), core::div(mean, static_cast<double>(snapshots_.size())));
        }
        return static_cast<int64_t>(snapshots_.size());
    }

private:
    int64_t count_, total_steps_, every_;
    std::vector<std::vector<Tensor>> snapshots_;
};

// --profile (or TFORMER_PROFILE=1): autograd's per-op table of where the
// time went, with the phases that record no op timed here.
class Profiling {
public:
    explicit Profiling(bool asked) {
        const char* env = std::getenv("TFORMER_PROFILE");
        on_ = asked || (env != nullptr && std::string_view(env) == "1");
        if (!on_) return;
        autograd::profile_reset();
        guard_.emplace();
    }

    template <class Work>
    void phase(const char* name, Work&& work) {
        if (!on_) return work();
        const auto t0 = std::chrono::steady_clock::now();
        work();
        autograd::profile_phase(name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }

    // prints the table (per step over `steps`) and writes it to <out_dir>/profile.txt
    void report(int64_t steps, const std::string& out_dir) const {
        if (!on_) return;
        const std::string table = autograd::profile_table(steps);
        fmt::print(stderr, "where the time went (per-op profile):\n{}", table);
        if (!out_dir.empty()) core::write_file_atomic((fs::path(out_dir) / "profile.txt").string(), table, "train");
    }

private:
    bool on_ = false;
    std::optional<autograd::ProfileGuard> guard_;
};

// The progress line: in place on a terminal (at most ten times a second), a
// plain line at an epoch's end at most every 2 s otherwise; always the last step's.
class ProgressLine {
public:
    ProgressLine(bool quiet, const Plan& plan, int64_t first_step)
        : quiet_(quiet),
          tty_(isatty(fileno(stderr)) != 0),
          plan_(plan),
          first_step_(first_step),
          start_(std::chrono::steady_clock::now()) {}

    double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

    void show(int64_t step, bool epoch_end, bool last, const LossTally& tally, double lr) {
        const double t = elapsed();
        if (quiet_ || !(tty_ ? (t - last_print_ > 0.1 || last) : ((epoch_end && t - last_print_ > 2.0) || last)))
            return;
        last_print_ = t;
        const double rate = (step - first_step_) / std::max(t, 1e-9);
        const double shown =
            epoch_end || tally.epoch_tokens == 0 ? tally.epoch_loss.back() : tally.epoch_loss_sum / tally.epoch_tokens;
        const std::string line =
            fmt::format("epoch {}/{} step {}/{} loss {:.4f} lr {:.2g} {:.0f} tok/s elapsed {} ETA {}",
                        (step - 1) / plan_.batches_per_epoch + 1, plan_.epochs_shown, step, plan_.total_steps, shown,
                        lr, tally.tokens_done / std::max(t, 1e-9), clock_str(t),
                        clock_str((plan_.total_steps - step) / std::max(rate, 1e-9)));
        if (tty_)
            fmt::print(stderr, "\r\033[K{}", line);
        else
            fmt::print(stderr, "{}\n", line);
        if (tty_ && last) fmt::print(stderr, "\n");
    }

private:
    bool quiet_, tty_;
    Plan plan_;
    int64_t first_step_;
    std::chrono::steady_clock::time_point start_;
    double last_print_ = -1e9;
};

// progress.csv in the output folder: one line per step as soon as it is
// trained (step, loss, learning rate, seconds since the start), so that
// `tformer serve --run` can draw the loss while the run goes on. A new run
// starts the file afresh, a resumed one appends to it (a step trained again
// after a crash gets a second line; readers keep the last).
class ProgressLog {
public:
    ProgressLog(const std::string& out_dir, bool resume, bool writer) {
        if (!writer || out_dir.empty()) return;
        const fs::path path = fs::path(out_dir) / "progress.csv";
        const bool fresh = !resume || !fs::exists(path);
        file_ = std::fopen(path.c_str(), fresh ? "w" : "a");
        if (!file_) fmt::print(stderr, "train: warning: cannot write {}; training goes on without it\n", path.string());
        if (file_ && fresh) std::fputs("step,loss,lr,seconds\n", file_);
    }
    ~ProgressLog() {
        if (file_) std::fclose(file_);
    }
    ProgressLog(const ProgressLog&) = delete;
    ProgressLog& operator=(const ProgressLog&) = delete;
    void write(int64_t step, double loss, double lr, double seconds) {
        if (!file_) return;
        fmt::print(file_, "{},{:.6f},{:.6g},{:.3f}\n", step, loss, lr, seconds);
        std::fflush(file_);
    }

private:
    std::FILE* file_ = nullptr;
};

// What one update computed: the objective backward differentiates and the
// figures the reported losses are made of.
struct StepLoss {
    Variable objective;   ///< a scalar: d2l's Σ_b l_b, or the mean over the batch's real tokens
    double loss_sum = 0;  ///< Σ of the token losses (d2l's l.sum() · ... as the Accumulator adds it)
    double tokens = 0;    ///< the batch's real (unpadded) target tokens
    bool stop = false;  ///< data-parallel: a rank was told to stop (Ctrl-C, SIGTERM); every rank stops after this step
};

// One training run: the model with its optimizer and schedule, where the run
// stands (the step, the losses) and how it is saved and resumed. train()
// below calls its steps in order.
class Run {
public:
    Run(nn::EncoderDecoder& model, core::Generator& gen, const TrainOptions& o, CheckpointInfo info, const Plan& plan)
        : model_(model),
          gen_(gen),
          o_(o),
          info_(std::move(info)),
          plan_(plan),
          optimizer_(model.named_parameters(), {.lr = o.lr, .betas = {0.9, o.adam_beta2}}),
          schedule_(make_schedule(o, plan.total_steps, info_.config.transformer.num_hiddens)),
          watch_(info_.config.tgt_vocab_size),
          anomaly_hint_(o.detect_anomaly ? "" : " (--detect-anomaly names the op that produced it)") {
        optimizer_.allocate_state();  // next to the parameters (optim/optimizer.hpp)
    }

    // Data-parallel training (tasks/distributed.hpp): this process is rank
    // `rank` of `ranks`; it trains its rows of each global batch, and rank
    // 0 alone prints and writes.
    bool root() const { return rank_ == 0; }

    int64_t step() const { return step_; }
    bool done() const { return step_ >= plan_.total_steps; }
    double lr() const { return optimizer_.lr(); }
    const LossTally& losses() const { return losses_; }
    const ModelConfig& config() const { return info_.config; }
    const std::vector<Variable>& parameters() const { return optimizer_.parameters(); }

    // where the checkpoint stopped: weights, Adam's state, the generator, the
    // losses (with ranks, rank 0 reads it, join_ranks() hands it on)
    void resume() {
        dist::together([&] {  // a checkpoint rank 0 cannot read stops every rank
            if (!root()) return;
            const std::string& ckpt = plan_.checkpoint;
            if (ckpt.empty() || !fs::exists(ckpt)) fail<IOError>("train: --resume needs a checkpoint at '{}'", ckpt);
            const nn::SafeTensors file = nn::load_safetensors(ckpt);  // read once
            check_resume(read_checkpoint_info(file, ckpt), info_, o_, plan_.total_steps, ckpt);
            const CheckpointInfo saved = load_checkpoint(file, ckpt, model_, &optimizer_);
            step_ = saved.step;
            gen_.set_state(saved.rng);
            losses_.epoch_loss = saved.losses.epochs;
            losses_.epoch_loss_sum = saved.losses.epoch_loss_sum;
            losses_.epoch_tokens = saved.losses.epoch_tokens;
            // every step's loss so far, so that loss-steps.csv and the picture show the whole run (a
            // checkpoint written before they were kept has none: the files then start at this step)
            if (static_cast<int64_t>(saved.losses.steps.size()) == step_)
                losses_.step_loss = saved.losses.steps;
            else
                losses_.first_step = step_;
            if (!o_.quiet)
                fmt::print(stderr, "resuming from {} at step {} (epoch {})\n", plan_.checkpoint, step_,
                           step_ / plan_.batches_per_epoch + 1);
        });
    }

    // With several ranks: every rank takes rank 0's step, weights and (on a
    // resume) Adam's state, checks that it has the same data and settings,
    // and gets the gradient all-reduce.
    void join_ranks(const BatchSource& source) {
        if (ranks_ == 1) return;
        uint64_t where[1] = {static_cast<uint64_t>(step_)};
        dist::broadcast(where);
        step_ = static_cast<int64_t>(where[0]);
        dist::broadcast_parameters(optimizer_.parameters());
        if (o_.resume) dist::broadcast_optimizer(optimizer_);
        const Batch first = source.get(step_ / plan_.batches_per_epoch, step_ % plan_.batches_per_epoch);
        const int64_t settings[3] = {plan_.batches_per_epoch, plan_.total_steps, o_.token_mean};
        const uint64_t h = dist::fingerprint(first.enc_X, dist::fingerprint(first.label));
        dist::check_same(dist::fingerprint(settings, sizeof settings, h), "the training data and settings");
        reducer_.emplace(optimizer_.parameters(), dist::ReducerOptions::from_environment());
        if (root())  // not progress: said even with --quiet, as the model's size is
            fmt::print(stderr, "data-parallel: {} ranks ({} on this machine), {} gradient buckets; {}\n", ranks_,
                       dist::local_size(), reducer_->num_buckets(), dist::library_version());
    }

    // the batch of the next update, and the update's learning rate
    Batch next_batch(const BatchSource& source, Profiling& profiling) {
        Batch batch;
        profiling.phase("[batch]",
                        [&] { batch = source.get(step_ / plan_.batches_per_epoch, step_ % plan_.batches_per_epoch); });
        optimizer_.set_lr(schedule_->lr_at(step_ + 1));  // update step + 1 (1-based), see optim/schedule.hpp
        return batch;
    }

    // forward and the loss; a loss that is not a number ends the run
    StepLoss forward(const Batch& global) {
        StepLoss s;
        s.tokens =
            core::sum(global.label_valid.to(core::DType::float64)).item();  // every rank divides by the global count
        const Batch batch = ranks_ == 1 ? global : rows_of_this_rank(global);
        if (batch.label.size(0) > 0) {  // a batch of fewer rows than ranks leaves some ranks none
            s.objective = anomaly_context([&] { return objective(batch, s.tokens); });
            s.loss_sum = o_.token_mean ? s.objective.item() * s.tokens : s.objective.item();
        }
        if (ranks_ > 1) agree_on_loss(s);
        if (!std::isfinite(s.loss_sum)) diverged(fmt::format("the loss is {}", s.loss_sum), ranks_ > 1);
        return s;
    }

    // Data-parallel: this rank's rows of the global batch. Its loss is still
    // divided by the global batch's tokens, so the ranks' losses (and
    // gradients) add up to the global batch's. Each rank draws its own
    // dropout masks, the same whatever ran before (an exact resume with any
    // number of ranks).
    Batch rows_of_this_rank(const Batch& global) {
        gen_.manual_seed(
            core::mix_seed(o_.seed, 0xd1570000ULL + static_cast<uint64_t>(rank_), static_cast<uint64_t>(step_)));
        return shard_batch(global, rank_, ranks_);
    }

    // Data-parallel: the global batch's loss, and whether any rank was told
    // to stop (Ctrl-C, SIGTERM), so that every rank decides the same.
    void agree_on_loss(StepLoss& s) const {
        double shared[2] = {s.loss_sum, g_stop_signal != 0 ? 1.0 : 0.0};
        dist::all_reduce_sum(shared);
        s.loss_sum = shared[0];
        s.stop = shared[1] > 0;
    }

    // d2l's l.sum().backward(): the gradients of every parameter
    void backward(const StepLoss& s) {
        if (s.objective.defined()) anomaly_context([&] { s.objective.backward(); });
    }

    // data-parallel: every rank's gradients become their sum over the ranks, the global batch's gradient
    void reduce_gradients(Profiling& profiling) {
        if (reducer_) profiling.phase("[all-reduce]", [&] { reducer_->finish(); });
    }

    // what the all-reduce cost, said by rank 0 at the end of a data-parallel run
    void report_reduce() const {
        if (!reducer_ || !root() || reducer_->stats().steps == 0) return;
        const dist::ReducerStats& r = reducer_->stats();
        const auto per_step = [&](double x) { return x / static_cast<double>(r.steps); };
        fmt::print(stderr,
                   "data-parallel: the gradient all-reduce ({:.1f} MB in {} buckets, {:.1f} started during "
                   "backward) cost {:.1f} ms per step after backward and {:.1f} ms in backward's hooks\n",
                   static_cast<double>(r.bytes) / 1e6, r.buckets, per_step(static_cast<double>(r.early_buckets)),
                   1e3 * per_step(r.finish_seconds), 1e3 * per_step(r.hook_seconds));
    }

    // the gradient norm checked every step (clipped only with clip > 0), Adam's update, the gradients zeroed
    void clip_and_update(Profiling& profiling) {
        profiling.phase("[clip + Adam]", [&] {
            try {
                optim::clip_grad_norm(named_, o_.clip > 0 ? o_.clip : std::numeric_limits<double>::infinity(),
                                      {.error_if_nonfinite = true});
            } catch (const ValueError& e) {  // with ranks: the same reduced gradient, the same verdict everywhere
                diverged(fmt::format("the gradient is not finite ({})", e.what()), ranks_ > 1);
            }
            optimizer_.step();
            optimizer_.zero_grad();
        });
    }

    // the update's loss into the step and epoch means; the step is done. True at an epoch's end.
    bool record(const StepLoss& s) {
        const double loss = s.loss_sum / s.tokens;
        losses_.step_loss.push_back(loss);
        if (root()) watch_.check(loss, step_ + 1);
        losses_.epoch_loss_sum += s.loss_sum;
        losses_.epoch_tokens += s.tokens;
        losses_.tokens_done += s.tokens;
        ++step_;
        const bool epoch_end = step_ % plan_.batches_per_epoch == 0;
        if (epoch_end) {
            losses_.epoch_loss.push_back(losses_.epoch_loss_sum / losses_.epoch_tokens);
            losses_.epoch_loss_sum = losses_.epoch_tokens = 0;
        }
        return epoch_end;
    }

    // the weights, Adam's state, the generator and the losses, to plan.checkpoint (nothing without one)
    void save() {
        const std::string& path = plan_.checkpoint;
        if (path.empty()) return;
        if (ranks_ > 1) {  // every rank's weights must be rank 0's, bit for bit
            uint64_t h = 0;
            for (const Variable& p : optimizer_.parameters()) h = dist::fingerprint(p.value(), h);
            dist::check_same(h, fmt::format("the model's weights at step {}", step_));
        }
        // never write (or write over a good checkpoint with) weights that are not numbers
        for (const auto& [name, p] : model_.named_parameters()) {
            const Tensor v = p.value().contiguous();
            const float* x = v.dtype() == core::DType::float32 ? v.data<float>() : nullptr;
            bool finite = true;
            if (x) {
                for (int64_t i = 0; i < v.numel(); ++i) finite &= std::isfinite(x[i]);
            } else {
                for (double d : v.to_vector()) finite &= std::isfinite(d);
            }
            if (!finite)
                fail<ValueError>("train: parameter {} holds NaN or Inf at step {}; not saving it over {}", name, step_,
                                 path);
        }
        if (!root()) return;  // the same check on every rank, one writer
        info_.step = step_;
        info_.epoch = step_ / plan_.batches_per_epoch;
        info_.rng = gen_.state();
        for (const auto& [k, v] : saved_settings(o_, plan_.total_steps)) info_.extra[k] = v;
        info_.losses = {.epochs = losses_.epoch_loss,
                        .epoch_loss_sum = losses_.epoch_loss_sum,
                        .epoch_tokens = losses_.epoch_tokens,
                        // only a history from step 1 on (one that starts later cannot be resumed as the whole run's)
                        .steps = losses_.first_step == 0 ? losses_.step_loss : std::vector<double>{}};
        save_checkpoint(path, model_, &optimizer_, info_);
    }

private:
    // d2l's objective Σ_b l_b, or with token_mean the mean loss over the batch's real tokens
    Variable objective(const Batch& batch, double tokens) {
        // the same token mean, with dense and the loss in one op: weight 1/tokens per real position
        if (o_.fused_loss) return fused_output_loss(model_, batch, 1.0 / tokens, o_.label_smoothing);
        Variable logits = model_.forward(batch.enc_X, batch.dec_in, batch.enc_valid);  // (B, T, V)
        Variable l = nn::masked_softmax_ce_loss(logits, batch.label, batch.label_valid, o_.label_smoothing);  // (B)
        // l_b = Σ_t loss_bt / T, so Σ_b l_b · T / tokens is the mean over real tokens
        const auto T = static_cast<double>(batch.label.size(1));
        return o_.token_mean ? autograd::mul(autograd::sum(l), T / tokens) : autograd::sum(l);
    }

    // with --detect-anomaly, an op that makes a NaN stops the run with the step's context
    template <class Work>
    auto anomaly_context(Work&& work) -> decltype(work()) {
        if (!o_.detect_anomaly) return work();
        try {
            return work();
        } catch (const ValueError& e) {
            diverged(e.what());
        }
    }

    // `agreed`: every rank saw the same figure (a reduced loss or gradient) and stops here too
    [[noreturn]] void diverged(const std::string& what, bool agreed = false) const {
        if (agreed) dist::note_shared_failure();
        fail<ValueError>(
            "train: {} at step {} (epoch {}, learning rate {:.3g}): training diverged{}. "
            "Nothing was saved at this step{}; try a lower --lr",
            what, step_ + 1, step_ / plan_.batches_per_epoch + 1, optimizer_.lr(), anomaly_hint_,
            o_.checkpoint_every > 0 ? ", the last checkpoint is from before it" : "");
    }

    nn::EncoderDecoder& model_;
    core::Generator& gen_;
    const TrainOptions& o_;
    CheckpointInfo info_;  ///< the config and vocabularies, with the run's state added at each save
    Plan plan_;
    optim::Adam optimizer_;
    std::unique_ptr<optim::LRSchedule> schedule_;
    optim::NamedParameters named_ = model_.named_parameters();
    DivergenceWatch watch_;
    std::string anomaly_hint_;
    int64_t step_ = 0;  ///< updates done
    LossTally losses_;
    int rank_ = dist::rank(), ranks_ = dist::size();
    std::optional<dist::GradientReducer> reducer_;  ///< with several ranks
};

// What train() reports back.
TrainResult train_result(const LossTally& losses, double seconds, int64_t steps, int64_t averaged, int interrupted,
                         const Plan& plan) {
    TrainResult r;
    r.epoch_loss = losses.epoch_loss;
    r.step_loss = losses.step_loss;
    r.final_loss = losses.final_loss();
    r.seconds = seconds;
    r.tokens_per_second = losses.tokens_done / std::max(seconds, 1e-9);
    r.steps = steps;
    r.averaged = averaged;
    r.interrupted = interrupted;
    r.checkpoint = plan.checkpoint;
    return r;
}

// loss.csv (the epoch means), loss-steps.csv (every step of the run, a
// resumed run's earlier ones from its checkpoint) and loss.png (or .svg) in out_dir.
void write_loss_files(const std::string& out_dir, const LossTally& losses, int64_t steps_per_epoch,
                      const std::string& title, const std::string& ylabel, PictureFormat format) {
    const int64_t first_step = losses.first_step;
    auto write_csv = [&](const char* name, const std::string& text) {
        core::write_file_atomic((fs::path(out_dir) / name).string(), text, "train");
    };
    std::string epochs = "epoch,loss\n", steps = "step,loss\n";
    for (size_t e = 0; e < losses.epoch_loss.size(); ++e)
        epochs += fmt::format("{},{:.6f}\n", e + 1, losses.epoch_loss[e]);
    for (size_t i = 0; i < losses.step_loss.size(); ++i)
        steps += fmt::format("{},{:.6f}\n", first_step + static_cast<int64_t>(i) + 1, losses.step_loss[i]);
    write_csv("loss.csv", epochs);
    write_csv("loss-steps.csv", steps);
    if (!losses.epoch_loss.empty() || !losses.step_loss.empty())
        plot_loss((fs::path(out_dir) / (std::string("loss.") + picture_extension(format))).string(), losses.epoch_loss,
                  title, losses.step_loss, first_step, steps_per_epoch, ylabel);
}
}  // namespace

// ---- the loop ---------------------------------------------------------------------------------------

TrainResult train(nn::EncoderDecoder& model, core::Generator& gen, const BatchSource& source, const TrainOptions& o,
                  CheckpointInfo info) {
    Plan plan;
    std::optional<Run> setup;  // on every rank: a refusal (an option out of range) stops every rank together
    dist::together([&] {
        plan = plan_run(o, source);
        setup.emplace(model, gen, o, std::move(info), plan);
    });
    Run& run = *setup;
    if (o.resume) run.resume();
    run.join_ranks(source);  // data-parallel: rank 0's weights and step everywhere
    // Ctrl-C (SIGINT) and SIGTERM end the run after the current step, with a
    // checkpoint to --resume from, instead of losing it (the handlers are
    // ours only while this loop runs)
    SignalScope signals;
    const int64_t first_step = run.step();
    ProgressLine progress(o.quiet || !run.root(), plan, first_step);
    ProgressLog progress_log(o.out_dir, o.resume, run.root());
    model.train();
    Averaging averaging(o.average, plan.total_steps);
    std::optional<autograd::AnomalyGuard> anomaly;
    if (o.detect_anomaly) anomaly.emplace();
    Profiling profiling(o.profile);

    int interrupted = 0;
    while (!run.done()) {
        const Batch batch = run.next_batch(source, profiling);  // and the step's learning rate
        const StepLoss loss = run.forward(batch);               // the model and d2l's masked loss
        run.backward(loss);
        run.reduce_gradients(profiling);  // data-parallel: the sum over the ranks
        run.clip_and_update(profiling);   // clip the gradient norm, Adam, zero the gradients
        const bool epoch_end = run.record(loss);
        progress_log.write(run.step(), run.losses().step_loss.back(), run.lr(), progress.elapsed());
        averaging.after_step(run.step(), run.parameters());
        if (o.checkpoint_every > 0 && run.step() % o.checkpoint_every == 0) run.save();
        const bool stop = o.stop_after_steps > 0 && run.step() >= o.stop_after_steps;
        progress.show(run.step(), epoch_end, run.done() || stop, run.losses(), run.lr());
        if (stop) break;
        // Ctrl-C or a kill: this step is done, keep it (ranks stop after the step at which they learnt of it)
        const int stop_signal = dist::size() == 1    ? g_stop_signal
                                : !loss.stop         ? 0
                                : g_stop_signal != 0 ? g_stop_signal
                                                     : SIGTERM;
        if (stop_signal != 0) {
            interrupted = stop_signal;
            break;
        }
    }
    const double seconds = progress.elapsed();
    run.report_reduce();
    if (interrupted != 0 && !o.quiet && run.root())
        fmt::print(stderr,
                   "\n{} at step {} of {}: saving a checkpoint to continue from (add --resume to the same command)\n",
                   interrupted == SIGINT ? "interrupted" : "terminated", run.step(), plan.total_steps);
    if (run.root()) profiling.report(run.step() - first_step, o.out_dir);
    const int64_t averaged = run.done() ? averaging.apply(run.parameters()) : 0;
    const TrainResult result = train_result(run.losses(), seconds, run.step(), averaged, interrupted, plan);
    run.save();
    if (!o.out_dir.empty() && run.root())
        write_loss_files(o.out_dir, run.losses(), plan.batches_per_epoch, run.config().task + ": training loss",
                         o.token_mean ? "cross-entropy per token" : "loss (d2l: sum of losses / tokens)",
                         o.plot_format);
    return result;
}

// ---- pictures ----------------------------------------------------------------------------------------

LinePlot loss_plot(const std::vector<double>& epoch_loss, const std::string& title,
                   const std::vector<double>& step_loss, int64_t first_step, int64_t steps_per_epoch,
                   const std::string& ylabel) {
    if (steps_per_epoch < 1) fail<ValueError>("loss_plot: steps_per_epoch must be positive, got {}", steps_per_epoch);
    LinePlot plot;
    double lo = 1e300, hi = 0;  // the finite range of everything drawn, to choose the y scale
    auto track = [&](double y) {
        if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);
    };
    if (!step_loss.empty()) {
        Series steps;
        steps.name = "per step";
        steps.color = Rgb{190, 205, 225};
        steps.line_width = 1.0;
        for (size_t i = 0; i < step_loss.size(); ++i) {
            steps.x.push_back(static_cast<double>(first_step + static_cast<int64_t>(i) + 1) /
                              static_cast<double>(steps_per_epoch));
            steps.y.push_back(step_loss[i]);
            track(step_loss[i]);
        }
        plot.series.push_back(steps);
        // a few epochs give a few points: a running mean shows the trend between them
        const auto n = static_cast<int64_t>(step_loss.size());
        const int64_t window = std::max<int64_t>(10, n / 40);
        if (epoch_loss.size() < 5 && n >= 2 * window) {
            Series running;
            running.name = fmt::format("mean of {} steps", window);
            running.color = Rgb{31, 119, 180};
            running.line_width = 2.0;
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) {
                sum += step_loss[i];
                if (i >= window) sum -= step_loss[i - window];
                if (i + 1 < window) continue;
                running.x.push_back(steps.x[i] -
                                    static_cast<double>(window - 1) / 2 / static_cast<double>(steps_per_epoch));
                running.y.push_back(sum / static_cast<double>(window));
            }
            plot.series.push_back(running);
        }
    }
    Series epochs;
    epochs.name = "epoch mean";
    epochs.style = epoch_loss.size() < 40 ? SeriesStyle::line_and_points : SeriesStyle::line;
    for (size_t e = 0; e < epoch_loss.size(); ++e) {
        epochs.x.push_back(static_cast<double>(e + 1));
        epochs.y.push_back(epoch_loss[e]);
        track(epoch_loss[e]);
    }
    if (!epochs.y.empty()) plot.series.push_back(epochs);
    plot.title = title;
    plot.xlabel = "epoch";
    plot.ylabel = ylabel;
    plot.log_y = hi > 20 * std::max(1e-12, lo);  // the copy task falls over decades
    return plot;
}

void plot_loss(const std::string& path, const std::vector<double>& epoch_loss, const std::string& title,
               const std::vector<double>& step_loss, int64_t first_step, int64_t steps_per_epoch,
               const std::string& ylabel) {
    plot_lines(path, loss_plot(epoch_loss, title, step_loss, first_step, steps_per_epoch, ylabel));
}

std::vector<AttentionPicture> attention_heatmaps(nn::EncoderDecoder& model, const Translation& t) {
    std::vector<AttentionPicture> pictures;
    const int64_t H = model.decoder->options.num_heads;
    const int64_t n_src = static_cast<int64_t>(t.src_tokens.size());
    std::vector<std::string> head_titles;
    for (int64_t h = 0; h < H; ++h) head_titles.push_back(fmt::format("head {}", h + 1));

    // encoder self-attention: one row of panels per block, one column per head
    Heatmaps enc;
    for (const Tensor& w : model.encoder->attention_weights()) {  // (H, S, S) for one sentence
        std::vector<Tensor> row;
        for (int64_t h = 0; h < H; ++h) row.push_back(w.select(0, h).slice(0, 0, n_src).slice(1, 0, n_src));
        enc.matrices.push_back(row);
    }
    enc.titles = head_titles;
    enc.title = "encoder self-attention (rows: blocks)";
    enc.x_ticks = enc.y_ticks = t.src_tokens;
    pictures.push_back({"encoder", enc});

    // decoder attention of the last block, gathered one generated step at a time: one row of H panels each
    const auto& cross = t.decoded.cross_attention;
    const auto& self = t.decoded.self_attention;
    const int64_t steps = static_cast<int64_t>(cross.size());
    if (steps == 0) return pictures;
    std::vector<std::string> out_tokens = t.tokens;
    while (static_cast<int64_t>(out_tokens.size()) < steps) out_tokens.push_back("<eos>");
    Heatmaps dec_self, dec_cross;
    dec_self.matrices.resize(1);
    dec_cross.matrices.resize(1);
    for (int64_t h = 0; h < H; ++h) {
        Tensor s = core::zeros({steps, steps}, core::DType::float32);
        Tensor c = core::zeros({steps, n_src}, core::DType::float32);
        for (int64_t q = 0; q < steps; ++q) {
            for (int64_t k = 0; k <= q && k < self[q].size(1); ++k) s.set({q, k}, self[q].at({h, k}));
            for (int64_t k = 0; k < n_src; ++k) c.set({q, k}, cross[q].at({h, k}));
        }
        dec_self.matrices[0].push_back(s);
        dec_cross.matrices[0].push_back(c);
    }
    dec_self.titles = dec_cross.titles = head_titles;
    dec_self.title = "decoder self-attention (last block)";
    // Row q is the step that produced out_tokens[q]; its query, and key
    // column q, is that step's input: <bos>, then the tokens produced so far.
    std::vector<std::string> in_tokens = {"<bos>"};
    in_tokens.insert(in_tokens.end(), out_tokens.begin(), out_tokens.end() - 1);
    dec_self.x_ticks = in_tokens;
    dec_self.y_ticks = out_tokens;
    dec_cross.title = "encoder-decoder attention (last block)";
    dec_cross.x_ticks = t.src_tokens;
    dec_cross.y_ticks = out_tokens;
    pictures.push_back({"decoder-self", dec_self});
    pictures.push_back({"decoder-cross", dec_cross});
    return pictures;
}

std::vector<std::string> plot_attention(const std::string& dir, const std::string& prefix, nn::EncoderDecoder& model,
                                        const Translation& t, PictureFormat format) {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    std::vector<std::string> written;
    for (const AttentionPicture& p : attention_heatmaps(model, t)) {
        written.push_back((fs::path(dir) / (prefix + "-" + p.name + "." + picture_extension(format))).string());
        plot_heatmaps(written.back(), p.maps);
    }
    return written;
}

}  // namespace tformer::tasks
