#include "tasks/train.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "nn/loss.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>
#include <numeric>
#include <sstream>

namespace tformer::tasks {

using autograd::Variable;
using core::Tensor;

// ---- batches ------------------------------------------------------------------------------

Batch copy_batch(int64_t batch, int64_t length, int64_t vocab, core::Generator& gen) {
    if (batch <= 0 || length < 2 || vocab < 3)
        fail<ValueError>("copy_batch: need batch > 0, length >= 2 and vocab >= 3, got {}, {}, {}", batch, length, vocab);
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

// ---- progress ---------------------------------------------------------------------------------

namespace {
std::string clock_str(double seconds) {
    const int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
    return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string doubles_str(const std::vector<double>& v) {
    std::string out;
    for (double x : v) out += fmt::format("{}{:.17g}", out.empty() ? "" : " ", x);
    return out;
}

std::vector<double> doubles_from(const std::string& text) {
    std::vector<double> out;
    std::istringstream in(text);
    double x;
    while (in >> x) out.push_back(x);
    return out;
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
            fail<ValueError>("train: the warm-up (--warmup {}) is longer than the whole run ({} steps); give a smaller "
                             "--warmup, or more --steps or --epochs", o.warmup, total_steps);
        return std::make_unique<optim::CosineLR>(optim::CosineOptions{
            .base_lr = o.lr, .warmup_steps = o.warmup, .total_steps = total_steps, .min_lr = o.lr * 0.05});
    }
    fail<ValueError>("train: unknown learning-rate schedule '{}' (expected constant, noam or cosine)", o.schedule);
}

// A resumed run must be the run that stopped: the same model, and the same
// data in the same order (the step count says where in the data it was), so
// a config or a data setting (batch size, sample, seed, ...) that differs is
// refused instead of silently training on other batches.
void check_resume(const CheckpointInfo& saved, const CheckpointInfo& now, const TrainOptions& o, const std::string& path) {
    std::vector<std::string> differences;
    const nlohmann::json before = nlohmann::json::parse(config_to_json(saved.config));
    const nlohmann::json after = nlohmann::json::parse(config_to_json(now.config));
    for (const auto& [key, value] : after.items())
        if (!before.contains(key) || before[key] != value)
            differences.push_back(fmt::format("{} {} (the checkpoint's: {})", key, value.dump(),
                                              before.contains(key) ? before[key].dump() : "none"));
    for (const auto& [key, value] : o.extra)
        if (auto it = saved.extra.find(key); it != saved.extra.end() && it->second != value)
            differences.push_back(fmt::format("{} {} (the checkpoint's: {})", key, value, it->second));
    if (!differences.empty())
        fail<ValueError>("train: --resume continues the run saved in '{}' where it stopped, but this run differs: {}; "
                         "give the flags of that run, or --overwrite to start a new one", path,
                         fmt::join(differences, ", "));
}
}  // namespace

// ---- the loop -------------------------------------------------------------------------------------

namespace {
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
    struct sigaction old_int_ {}, old_term_ {};
};
}  // namespace

TrainResult train(nn::EncoderDecoder& model, core::Generator& gen, const BatchSource& source,
                  const TrainOptions& o, CheckpointInfo info) {
    if (o.epochs <= 0) fail<ValueError>("train: epochs must be positive, got {}", o.epochs);
    if (source.batches_per_epoch <= 0) fail<ValueError>("train: an epoch has no batches");
    namespace fs = std::filesystem;
    if (!o.out_dir.empty()) fs::create_directories(o.out_dir);
    const std::string ckpt = o.out_dir.empty() ? "" : (fs::path(o.out_dir) / "checkpoint.safetensors").string();
    if (o.fused_loss && !o.token_mean) fail<ValueError>("train: fused_loss computes the token mean; set token_mean too");
    if (o.total_steps < 0 || o.average < 0)
        fail<ValueError>("train: total_steps and average must be >= 0, got {} and {}", o.total_steps, o.average);
    const int64_t bpe = source.batches_per_epoch;
    if (o.epochs > std::numeric_limits<int64_t>::max() / bpe)
        fail<ValueError>("train: {} epochs of {} batches is more steps than can be counted", o.epochs, bpe);
    const int64_t total_steps = o.total_steps > 0 ? o.total_steps : o.epochs * bpe;
    const int64_t epochs_shown = (total_steps + bpe - 1) / bpe;  // the last one may be partial

    optim::Adam optimizer(model.named_parameters(), {.lr = o.lr});
    const auto schedule = make_schedule(o, total_steps, info.config.transformer.num_hiddens);
    TrainResult result;
    result.checkpoint = ckpt;

    // where to start: from scratch, or where the checkpoint stopped
    int64_t step = 0;
    double epoch_loss_sum = 0, epoch_tokens = 0;
    if (o.resume) {
        if (ckpt.empty() || !fs::exists(ckpt)) fail<IOError>("train: --resume needs a checkpoint at '{}'", ckpt);
        const nn::SafeTensors file = nn::load_safetensors(ckpt);
        check_resume(read_checkpoint_info(file, ckpt), info, o, ckpt);
        const CheckpointInfo saved = load_checkpoint(file, ckpt, model, &optimizer);
        step = saved.step;
        gen.set_state(saved.rng);
        auto get = [&](const char* k) { auto it = saved.extra.find(k); return it == saved.extra.end() ? std::string() : it->second; };
        result.epoch_loss = doubles_from(get("epoch_losses"));
        const std::vector<double> partial = doubles_from(get("epoch_partial"));
        if (partial.size() == 2) epoch_loss_sum = partial[0], epoch_tokens = partial[1];
        if (!o.quiet) fmt::print(stderr, "resuming from {} at step {} (epoch {})\n", ckpt, step, step / bpe + 1);
    }

    auto save = [&](const std::string& path) {
        if (path.empty()) return;
        // never write (or write over a good checkpoint with) weights that are not numbers
        for (const auto& [name, p] : model.named_parameters()) {
            const Tensor v = p.value().contiguous();
            const float* x = v.dtype() == core::DType::float32 ? v.data<float>() : nullptr;
            bool finite = true;
            if (x) {
                for (int64_t i = 0; i < v.numel(); ++i) finite &= std::isfinite(x[i]);
            } else {
                for (double d : v.to_vector()) finite &= std::isfinite(d);
            }
            if (!finite)
                fail<ValueError>("train: parameter {} holds NaN or Inf at step {}; not saving it over {}", name, step, path);
        }
        info.step = step;
        info.epoch = step / bpe;
        info.rng = gen.state();
        for (const auto& [k, v] : o.extra) info.extra[k] = v;
        info.extra["epoch_losses"] = doubles_str(result.epoch_loss);
        info.extra["epoch_partial"] = doubles_str({epoch_loss_sum, epoch_tokens});
        save_checkpoint(path, model, &optimizer, info);
    };

    // Ctrl-C (SIGINT) and SIGTERM end the run after the current step, with a
    // checkpoint to --resume from, instead of losing it (the handlers are
    // ours only while this loop runs)
    SignalScope signals;
    const bool tty = isatty(fileno(stderr)) != 0;
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    double tokens_done = 0, last_print = -1e9;
    const int64_t first_step = step;
    model.train();
    // checkpoint averaging: snapshots at total_steps - k·every, k = average-1 .. 0
    const int64_t average_every = std::max<int64_t>(1, total_steps / 20);
    std::vector<std::vector<Tensor>> snapshots;
    auto take_snapshot = [&] {
        std::vector<Tensor> values;
        for (const Variable& p : optimizer.parameters()) values.push_back(p.value().clone());
        snapshots.push_back(std::move(values));
    };

    std::optional<autograd::AnomalyGuard> anomaly;
    if (o.detect_anomaly) anomaly.emplace();
    const optim::NamedParameters named = model.named_parameters();
    const std::string anomaly_hint = o.detect_anomaly ? "" : " (--detect-anomaly names the op that produced it)";
    auto diverged = [&](const std::string& what, int64_t at, int64_t epoch) {
        fail<ValueError>("train: {} at step {} (epoch {}, learning rate {:.3g}): training diverged{}. "
                         "Nothing was saved at this step{}; try a lower --lr",
                         what, at, epoch, optimizer.lr(), anomaly_hint,
                         o.checkpoint_every > 0 ? ", the last checkpoint is from before it" : "");
    };
    // a loss far above where training started means it is diverging even while it stays finite
    double first_losses = 0, warned_at = 0;
    const double uniform_loss = std::log(static_cast<double>(std::max<int64_t>(2, info.config.tgt_vocab_size)));
    int64_t first_count = 0;

    const char* profile_env = std::getenv("TFORMER_PROFILE");
    const bool profile = o.profile || (profile_env != nullptr && std::string_view(profile_env) == "1");
    std::optional<autograd::ProfileGuard> profiler;
    if (profile) {
        autograd::profile_reset();
        profiler.emplace();
    }
    auto phase = [&](const char* name, auto&& work) {  // time work that records no op
        if (!profile) return work();
        const auto t0 = std::chrono::steady_clock::now();
        work();
        autograd::profile_phase(name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };

    for (; step < total_steps; ) {
        const int64_t epoch = step / bpe, index = step % bpe;
        Batch batch;
        phase("[batch]", [&] { batch = source.get(epoch, index); });
        optimizer.set_lr(schedule->lr_at(step + 1));  // update step + 1 (1-based), see optim/schedule.hpp

        // forward, d2l's masked loss, backward (l.sum().backward()), clip, update
        const double tokens = core::sum(batch.label_valid.to(core::DType::float64)).item();
        const auto T = static_cast<double>(batch.label.size(1));
        // with --detect-anomaly, an op that makes a NaN stops the run with the step's context
        auto anomaly_context = [&](auto&& work) {
            if (!o.detect_anomaly) return work();
            try {
                return work();
            } catch (const ValueError& e) {
                diverged(e.what(), step + 1, epoch + 1);
                throw;  // not reached: diverged throws
            }
        };
        const Variable total = anomaly_context([&] {
            if (o.fused_loss) {
                // the same token mean, with dense and the loss in one op: weight 1/tokens per real position
                Variable H = model.forward_hidden(batch.enc_X, batch.dec_in, batch.enc_valid);  // (B, T, D)
                const int64_t B = H.size(0), Tn = H.size(1), D = H.size(2);
                const Tensor w = core::mul(nn::sequence_mask(batch.label_valid, Tn, H.dtype()), 1.0 / tokens);  // (B, T)
                const nn::Linear& dense = *model.decoder->dense;
                return autograd::linear_cross_entropy(autograd::reshape(H, {B * Tn, D}), dense.weight, dense.bias,
                                                      batch.label.reshape({B * Tn}), w.reshape({B * Tn}),
                                                      o.label_smoothing);
            }
            Variable logits = model.forward(batch.enc_X, batch.dec_in, batch.enc_valid);  // (B, T, V)
            Variable l = nn::masked_softmax_ce_loss(logits, batch.label, batch.label_valid, o.label_smoothing);  // (B)
            // l_b = Σ_t loss_bt / T, so Σ_b l_b · T / tokens is the mean over real tokens
            return o.token_mean ? autograd::mul(autograd::sum(l), T / tokens) : autograd::sum(l);
        });
        const double loss_sum = o.token_mean ? total.item() * tokens : total.item();
        if (!std::isfinite(loss_sum)) diverged(fmt::format("the loss is {}", loss_sum), step + 1, epoch + 1);
        anomaly_context([&] { total.backward(); });
        phase("[clip + Adam]", [&] {
            // the gradient norm, checked every step (clipped only with --clip > 0)
            try {
                optim::clip_grad_norm(named, o.clip > 0 ? o.clip : std::numeric_limits<double>::infinity(),
                                      {.error_if_nonfinite = true});
            } catch (const ValueError& e) {
                diverged(fmt::format("the gradient is not finite ({})", e.what()), step + 1, epoch + 1);
            }
            optimizer.step();
            optimizer.zero_grad();
        });

        result.step_loss.push_back(loss_sum / tokens);
        if (first_count < 10) {
            first_losses += loss_sum / tokens;
            ++first_count;
        }
        // above twice the start (or twice ln V, a uniform guess's loss, if the start was already bad)
        if (const double limit = 2 * std::min(first_losses / first_count, uniform_loss);
            loss_sum / tokens > limit && loss_sum / tokens > 10 * warned_at) {
            fmt::print(stderr, "\ntrain: warning: the loss is {:.4g} at step {}, more than {:.3g}: training is "
                       "diverging; try a lower --lr\n", loss_sum / tokens, step + 1, limit);
            warned_at = loss_sum / tokens;
        }
        epoch_loss_sum += loss_sum;
        epoch_tokens += tokens;
        tokens_done += tokens;
        ++step;

        const bool epoch_end = step % bpe == 0;
        if (epoch_end) {
            result.epoch_loss.push_back(epoch_loss_sum / epoch_tokens);
            epoch_loss_sum = epoch_tokens = 0;
        }
        if (o.average > 1 && (total_steps - step) % average_every == 0 && (total_steps - step) / average_every < o.average)
            take_snapshot();
        if (o.checkpoint_every > 0 && step % o.checkpoint_every == 0) save(ckpt);

        // the progress line: in place on a terminal, a plain line now and then otherwise
        const double t = elapsed();
        const bool last = step == total_steps || (o.stop_after_steps > 0 && step >= o.stop_after_steps);
        if (!o.quiet && (tty ? (t - last_print > 0.1 || last) : ((epoch_end && t - last_print > 2.0) || last))) {
            last_print = t;
            const double rate = (step - first_step) / std::max(t, 1e-9);
            const double shown = epoch_end || epoch_tokens == 0 ? result.epoch_loss.back() : epoch_loss_sum / epoch_tokens;
            const std::string line = fmt::format(
                "epoch {}/{} step {}/{} loss {:.4f} lr {:.2g} {:.0f} tok/s elapsed {} ETA {}", (step - 1) / bpe + 1, epochs_shown,
                step, total_steps, shown, optimizer.lr(), tokens_done / std::max(t, 1e-9), clock_str(t),
                clock_str((total_steps - step) / std::max(rate, 1e-9)));
            if (tty) fmt::print(stderr, "\r\033[K{}", line);
            else fmt::print(stderr, "{}\n", line);
            if (tty && last) fmt::print(stderr, "\n");
        }
        if (o.stop_after_steps > 0 && step >= o.stop_after_steps) break;
        if (g_stop_signal != 0) {  // Ctrl-C or a kill: this step is done, keep it
            result.interrupted = g_stop_signal;
            break;
        }
    }

    result.seconds = elapsed();
    result.steps = step;
    if (result.interrupted != 0 && !o.quiet)
        fmt::print(stderr, "\n{} at step {} of {}: saving a checkpoint to continue from (add --resume to the same command)\n",
                   result.interrupted == SIGINT ? "interrupted" : "terminated", step, total_steps);
    if (profile) {
        const std::string table = autograd::profile_table(step - first_step);
        fmt::print(stderr, "where the time went (per-op profile):\n{}", table);
        if (!o.out_dir.empty()) core::write_file_atomic((fs::path(o.out_dir) / "profile.txt").string(), table, "train");
    }
    result.averaged = step == total_steps && snapshots.size() > 1 ? static_cast<int64_t>(snapshots.size()) : 0;
    if (result.averaged > 0) {
        // the mean of the snapshots, written into the parameters in place
        const std::vector<Variable> params = optimizer.parameters();
        for (size_t i = 0; i < params.size(); ++i) {
            Tensor mean = snapshots[0][i];
            for (size_t k = 1; k < snapshots.size(); ++k) mean = core::add(mean, snapshots[k][i]);
            core::copy_(params[i].value(), core::div(mean, static_cast<double>(snapshots.size())));
        }
    }
    result.tokens_per_second = tokens_done / std::max(result.seconds, 1e-9);
    // the mean of the last epoch, or of the part of it trained when the run ended inside one
    result.final_loss = epoch_tokens > 0        ? epoch_loss_sum / epoch_tokens
                        : !result.epoch_loss.empty() ? result.epoch_loss.back()
                        : result.step_loss.empty()   ? 0
                                                     : result.step_loss.back();
    save(ckpt);
    if (!o.out_dir.empty()) {
        auto write_csv = [&](const char* name, const std::string& text) {
            core::write_file_atomic((fs::path(o.out_dir) / name).string(), text, "train");
        };
        std::string epochs = "epoch,loss\n", steps = "step,loss\n";
        for (size_t e = 0; e < result.epoch_loss.size(); ++e) epochs += fmt::format("{},{:.6f}\n", e + 1, result.epoch_loss[e]);
        for (size_t i = 0; i < result.step_loss.size(); ++i)
            steps += fmt::format("{},{:.6f}\n", first_step + static_cast<int64_t>(i) + 1, result.step_loss[i]);
        write_csv("loss.csv", epochs);
        write_csv("loss-steps.csv", steps);
        if (!result.epoch_loss.empty() || !result.step_loss.empty())
            plot_loss((fs::path(o.out_dir) / "loss.png").string(), result.epoch_loss, info.config.task + ": training loss",
                      result.step_loss, first_step, bpe,
                      o.token_mean ? "cross-entropy per token" : "loss (d2l: sum of losses / tokens)");
    }
    return result;
}

// ---- pictures ----------------------------------------------------------------------------------------

void plot_loss(const std::string& path, const std::vector<double>& epoch_loss, const std::string& title,
               const std::vector<double>& step_loss, int64_t first_step, int64_t steps_per_epoch,
               const std::string& ylabel) {
    if (steps_per_epoch < 1) fail<ValueError>("plot_loss: steps_per_epoch must be positive, got {}", steps_per_epoch);
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
                running.x.push_back(steps.x[i] - static_cast<double>(window - 1) / 2 / static_cast<double>(steps_per_epoch));
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
    plot_lines(path, plot);
}

std::vector<std::string> plot_attention(const std::string& dir, const std::string& prefix, nn::EncoderDecoder& model,
                                        const Translation& t) {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    std::vector<std::string> written;
    const int64_t H = model.decoder->options.num_heads;
    const int64_t n_src = static_cast<int64_t>(t.src_tokens.size());

    // encoder self-attention: one row of panels per block, one column per head
    Heatmaps enc;
    for (const Tensor& w : model.encoder->attention_weights()) {  // (H, S, S) for one sentence
        std::vector<Tensor> row;
        for (int64_t h = 0; h < H; ++h) row.push_back(w.select(0, h).slice(0, 0, n_src).slice(1, 0, n_src));
        enc.matrices.push_back(row);
    }
    for (int64_t h = 0; h < H; ++h) enc.titles.push_back(fmt::format("head {}", h + 1));
    enc.title = "encoder self-attention (rows: blocks)";
    enc.x_ticks = enc.y_ticks = t.src_tokens;
    const std::string enc_path = (fs::path(dir) / (prefix + "-encoder.png")).string();
    plot_heatmaps(enc_path, enc);
    written.push_back(enc_path);

    // decoder attention of the last block, gathered one generated step at a time
    const auto& cross = t.decoded.cross_attention;
    const auto& self = t.decoded.self_attention;
    const int64_t steps = static_cast<int64_t>(cross.size());
    if (steps == 0) return written;
    std::vector<std::string> out_tokens = t.tokens;
    while (static_cast<int64_t>(out_tokens.size()) < steps) out_tokens.push_back("<eos>");
    Heatmaps dec_self, dec_cross;
    for (int64_t h = 0; h < H; ++h) {
        Tensor s = core::zeros({steps, steps}, core::DType::float32);
        Tensor c = core::zeros({steps, n_src}, core::DType::float32);
        for (int64_t q = 0; q < steps; ++q) {
            for (int64_t k = 0; k <= q && k < self[q].size(1); ++k) s.set({q, k}, self[q].at({h, k}));
            for (int64_t k = 0; k < n_src; ++k) c.set({q, k}, cross[q].at({h, k}));
        }
        dec_self.matrices.push_back({s});
        dec_cross.matrices.push_back({c});
    }
    // one row of H panels each
    auto to_row = [](Heatmaps& m) {
        std::vector<Tensor> row;
        for (auto& r : m.matrices) row.push_back(r[0]);
        m.matrices = {row};
    };
    to_row(dec_self);
    to_row(dec_cross);
    for (int64_t h = 0; h < H; ++h) {
        dec_self.titles.push_back(fmt::format("head {}", h + 1));
        dec_cross.titles.push_back(fmt::format("head {}", h + 1));
    }
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
    const std::string self_path = (fs::path(dir) / (prefix + "-decoder-self.png")).string();
    const std::string cross_path = (fs::path(dir) / (prefix + "-decoder-cross.png")).string();
    plot_heatmaps(self_path, dec_self);
    plot_heatmaps(cross_path, dec_cross);
    written.push_back(self_path);
    written.push_back(cross_path);
    return written;
}

}  // namespace tformer::tasks
