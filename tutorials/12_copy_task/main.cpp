// Tutorial 12 · The copy task: seed 004's data, model, training with Adam and
// the Noam schedule, greedy decoding with the KV cache, and what the trained
// attention looks at.
//
// Follows seed 004 (004_a3b87e182ede5d90.txt): data_gen, Batch (tgt[:, :-1],
// tgt_y = tgt[:, 1:], ntokens), subsequent_mask, train_test (Adam, the
// cross-entropy criterion, zero_grad / backward / step) and inference_test
// (greedy decoding of [[1, 2, ..., 10]]); seed 000 (000_7dfff3ea5ac0d0a3.txt),
// 训练 (d2l's sizes and train_seq2seq: Adam, clipping, the masked loss) and
// 预测 (decoding from <bos>, one token at a time).
// Read it with tutorials/12_copy_task/README.md.
#include "autograd/autograd.hpp"
#include "common/tutorial.hpp"
#include "core/core.hpp"
#include "nn/loss.hpp"
#include "nn/transformer.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"
#include "tasks/plot.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

using namespace tformer;
namespace ag = tformer::autograd;
namespace c = tformer::core;
using ag::Variable;
using c::DType;
using tutorial::note;
using tutorial::show;

namespace {

// Seed 004's copy task: vocabulary 11, sequences of 10 that start with symbol 1.
constexpr int64_t kVocab = 11;
constexpr int64_t kLength = 10;
// `tformer train copy`'s preset (apps/commands.cpp, kCopy) and its default seed.
constexpr uint64_t kSeed = 0;
constexpr int64_t kBatch = 30, kBatchesPerEpoch = 20, kEpochs = 80, kWarmup = 100;
constexpr double kPeakLr = 0.005, kClip = 1.0;

// Two id tensors with the same shape and the same ids.
bool same_ids(const c::Tensor& a, const c::Tensor& b) {
    return a.shape() == b.shape() && a.contiguous().to_vector<int64_t>() == b.contiguous().to_vector<int64_t>();
}

std::string join(const std::vector<int64_t>& ids) { return fmt::format("{}", fmt::join(ids, " ")); }

std::vector<int64_t> row(const c::Tensor& ids, int64_t b) { return ids.select(0, b).contiguous().to_vector<int64_t>(); }

// The model of `tformer train copy`: seed 000's sizes with dropout 0.
tasks::ModelConfig copy_config(bool use_bias = false) {
    tasks::ModelConfig config;
    config.task = "copy";
    config.src_vocab_size = config.tgt_vocab_size = kVocab;
    config.num_steps = kLength;
    config.transformer = {.key_size = 32, .query_size = 32, .value_size = 32, .num_hiddens = 32, .norm_shape = 32,
                          .ffn_num_input = 32, .ffn_num_hiddens = 64, .num_heads = 4, .num_layers = 2,
                          .dropout = 0.0, .use_bias = use_bias};
    return config;
}

// The Annotated Transformer's rate(), written out (seed 004 imports LambdaLR but never uses it):
//   rate(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5),  step 0 counted as 1
double rate(int64_t step, int64_t d_model, double factor, int64_t warmup) {
    const double s = step == 0 ? 1.0 : static_cast<double>(step);
    return factor * (std::pow(static_cast<double>(d_model), -0.5) *
                     std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup), -1.5)));
}

}  // namespace

int main(int argc, char** argv) {
    tutorial::Tutorial t(argc, argv,
                         {.title = "tformer tutorial 12 · The copy task: train, decode greedily, look at the attention",
                          .follows = "seed 004 data_gen, Batch, subsequent_mask, train_test, inference_test; "
                                     "seed 000 训练, 预测"});
    // The matrices here are tiny (30 × 10 × 32): one thread is fastest, and it
    // keeps the run reproducible (the README has the timings).
    c::set_num_threads(1);

    const tasks::ModelConfig config = copy_config();
    c::Generator gen(kSeed);  // the model's initialisation (and its dropout, here 0)
    std::shared_ptr<nn::EncoderDecoder> model;
    const tasks::BatchSource source = tasks::copy_source(kBatch, kLength, kVocab, kBatchesPerEpoch, kSeed);

    t.step("1. The data: seed 004's data_gen and Batch", [&] {
        note("Seed 004 makes its data like this:\n"
             "    data = torch.randint(1, V, size=(batch_size, 10))\n"
             "    data[:, 0] = 1\n"
             "    src = tgt = data\n"
             "and Batch(src, tgt) shifts the target by one:\n"
             "    self.tgt   = tgt[:, :-1]     decoder input (\"右移一位,第一位用 1 填充\")\n"
             "    self.tgt_y = tgt[:, 1:]      labels: what the decoder must predict\n"
             "    self.ntokens = (tgt_y != pad).sum()\n"
             "Symbol 1 is the start symbol (d2l's <bos>); 0 is the padding symbol and never appears. "
             "tasks::copy_batch does the same and hands back d2l's names (enc_X, dec_in, label and the valid "
             "lengths). A batch of 3 from a generator seeded with 4:");
        c::Generator g(4);
        const tasks::Batch batch = tasks::copy_batch(3, kLength, kVocab, g);
        show("enc_X (src)", batch.enc_X);
        show("dec_in (tgt[:, :-1])", batch.dec_in);
        show("label (tgt_y = tgt[:, 1:])", batch.label);
        show("enc_valid", batch.enc_valid);
        show("label_valid", batch.label_valid);
        t.check(batch.enc_X.shape() == c::Shape{3, 10} && batch.dec_in.shape() == c::Shape{3, 9} &&
                    batch.label.shape() == c::Shape{3, 9},
                "src (3, 10); decoder input and labels (3, 9)");
        t.check(c::sum(c::ne(batch.enc_X.slice(1, 0, 1), 1.0).to(DType::float32)).item() == 0,
                "every sequence starts with the start symbol 1");
        const std::vector<int64_t> ids = batch.enc_X.to_vector<int64_t>();
        t.check(*std::min_element(ids.begin(), ids.end()) >= 1 && *std::max_element(ids.begin(), ids.end()) <= 10,
                "symbols are 1..10: randint(1, V) never draws the padding symbol 0");
        t.check(same_ids(batch.dec_in, batch.enc_X.slice(1, 0, 9)) &&
                    same_ids(batch.label, batch.enc_X.slice(1, 1, 10)),
                "dec_in = src[:, :-1] and label = src[:, 1:] (src = tgt: the task is to copy)");
        const c::Tensor bos_shifted =
            c::concat({c::full({3, 1}, 1.0, DType::int64), batch.label.slice(1, 0, 8)}, 1);
        t.check(same_ids(bos_shifted, batch.dec_in),
                "dec_in is also d2l's [<bos>, Y[:, :-1]] with <bos> = 1 and Y = label (teacher forcing)");
        t.check(c::sum(batch.label_valid.to(DType::float64)).item() == 27, "seed 004's ntokens: 3 × 9 = 27 labels, none padded");

        note("\nThe decoder is masked with seed 004's subsequent_mask(9) (tutorial 11): label t is predicted "
             "from dec_in[0..t] = src[0..t], so the model must bring src[t + 1] over from the encoder. It "
             "cannot copy its own input; it has to look one position ahead in the source.\n\n"
             "How even is randint? Counting the symbols at positions 1..9 of 1000 sequences (9000 draws, "
             "900 expected per symbol):");
        c::Generator g_big(5);
        const tasks::Batch big = tasks::copy_batch(1000, kLength, kVocab, g_big);
        std::vector<int64_t> counts(kVocab, 0);
        for (int64_t id : big.label.contiguous().to_vector<int64_t>()) ++counts[id];
        std::string symbols, numbers;
        for (int64_t v = 0; v < kVocab; ++v) {
            symbols += fmt::format("{:>5}", v);
            numbers += fmt::format("{:>5}", counts[v]);
        }
        note("    symbol {}\n    count  {}", symbols, numbers);
        t.check(counts[0] == 0 && std::all_of(counts.begin() + 1, counts.end(), [](int64_t n) { return n > 800 && n < 1000; }),
                "no 0s; each of 1..10 between 800 and 1000 times (900 ± 100, 3.5 standard deviations of 28)");

        note("\nTraining draws fresh batches from tasks::copy_source: batch (epoch, i) comes from a "
             "generator seeded by (seed, epoch, i), so a run can stop and resume and still see the same "
             "data. 30 sequences a batch, 20 batches an epoch, 80 epochs: 48,000 sequences out of the "
             "10^9 possible ones.");
        const tasks::Batch a = source.get(0, 0), again = source.get(0, 0), other = source.get(0, 1);
        show("batch (0, 0), rows 0-1", a.enc_X.slice(0, 0, 2));
        t.check(a.enc_X.shape() == c::Shape{30, 10} && same_ids(a.enc_X, again.enc_X) &&
                    !same_ids(a.enc_X, other.enc_X),
                "batch (0, 0) is (30, 10), the same every time it is asked for, and differs from batch (0, 1)");
    });

    t.step("2. The model", [&] {
        note("Seed 004's train_test builds Transform(d_model=32, d_ff=64, h=8, vocab 11, N=2). tformer "
             "builds seed 000's EncoderDecoder with the same widths (tasks::build_model, as `tformer train "
             "copy` does): D = 32, FFN 64, 2 blocks each side, 4 heads as in seed 000 (seed 004 has 8 heads "
             "of 4 features; the parameter count does not depend on the number of heads), dropout 0 (seed "
             "004 has none either). build_model initialises every Linear with Xavier-uniform as d2l does.");
        model = tasks::build_model(config, gen);
        const auto named = model->named_parameters();
        int64_t total = 0, listed = 0;
        fmt::print("\n      {:<46} {:<10} {:>6}\n", "parameter", "shape", "count");
        for (const auto& [name, p] : named) {
            total += p.value().numel();
            if (name.find("block1") != std::string::npos) continue;  // the same as block0
            ++listed;
            fmt::print("      {:<46} {:<10} {:>6}\n", name, c::shape_str(p.shape()), p.value().numel());
        }
        fmt::print("      ... and encoder.blks.block1.*, decoder.blks.block1.*: the same as block0\n\n");
        note("{} parameter tensors, {} numbers.", named.size(), model->num_parameters());

        // counted by hand: D = 32, F = 64, V = 11; the attention projections have no bias (use_bias = false)
        const int64_t D = 32, F = 64, V = 11;
        const int64_t attention = 4 * D * D, addnorm = 2 * D, ffn = D * F + F + F * D + D;
        const int64_t enc_block = attention + addnorm + ffn + addnorm;
        const int64_t dec_block = 2 * attention + 3 * addnorm + ffn;
        const int64_t by_hand = V * D + 2 * enc_block + V * D + 2 * dec_block + D * V + V;
        note("By hand: embeddings 2 × V·D = {}, encoder block 4D² + FFN(2DF + F + D) + 2 LayerNorms(2D) = {}, "
             "decoder block 8D² + FFN + 3 LayerNorms = {}, output layer D·V + V = {}; in all {}.",
             2 * V * D, enc_block, dec_block, D * V + V, by_hand);
        t.check(total == model->num_parameters() && total == by_hand,
                fmt::format("the {} parameters add up to num_parameters() and to the count by hand", total));
        t.check(named.size() == 64, "64 tensors: 1 + 2 × 12 in the encoder, 1 + 2 × 18 + 2 in the decoder");

        c::Generator g_bias(kSeed);
        const int64_t with_bias = tasks::build_model(copy_config(true), g_bias)->num_parameters();
        note("Seed 004's MultiHeadedAttention uses nn.Linear with its default bias on all four projections; "
             "with use_bias = true the same model has {} parameters, 6 attentions × 4 × 32 = 768 more.",
             with_bias);
        t.check(with_bias == by_hand + 6 * 4 * D, "seed 004's count: 43,819 with the attention biases");

        note("\nOne forward pass with teacher forcing, untrained: enc_X (30, 10) and dec_in (30, 9) give "
             "logits (30, 9, 11). Seed 004's criterion, nn.CrossEntropyLoss(), is the mean over the 270 "
             "labels of -log softmax(logits)[label].");
        ag::NoGradGuard no_grad;
        const tasks::Batch b = source.get(0, 0);
        const Variable logits = model->forward(b.enc_X, b.dec_in, b.enc_valid);
        const double ce = ag::cross_entropy(logits, b.label).item();
        const double spread = std::sqrt(c::var(logits.value(), {0, 1, 2}, false).item());
        note("    logits {}   standard deviation of the logits {:.3f}   cross-entropy {:.4f}",
             c::shape_str(logits.shape()), spread, ce);
        t.check(logits.shape() == c::Shape{30, 9, 11}, "logits (B, T, V) = (30, 9, 11)");
        note("A model that gave every symbol the same logit would score exactly ln 11 = {:.4f}. Ours scores "
             "more. Its logits vary at random around a common mean and know nothing about the labels; the "
             "loss is log Σ exp(z) - z[label], and log Σ exp is convex, so by Jensen's inequality such "
             "logits lose more than ln 11 on average, the more the larger their spread: the model is "
             "confidently wrong on many labels.",
             std::log(11.0));
        t.check(ce > std::log(11.0) && ce < 2 * std::log(11.0),
                "the untrained loss lies between ln 11 (all logits equal) and 2 ln 11");
    });

    std::vector<double> step_ce, step_lr;

    t.step("3. Training: Adam with the Noam schedule", [&] {
        note("Seed 004's train_test trains with Adam(lr=1e-3) on data_gen(11, 3, 10): ten batches of three "
             "sequences, one loss printed per batch. That shows the loop but is far too little data to "
             "learn the copy. `tformer train copy` runs the same loop longer: batches of 30, 20 per epoch, "
             "80 epochs = 1600 steps, Adam with the learning-rate schedule of \"Attention Is All You Need\" "
             "§5.3. Seed 004 imports LambdaLR but never uses it; the Annotated Transformer, which it follows, "
             "passes LambdaLR this rate():\n"
             "    rate(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)\n"
             "It rises linearly for `warmup` steps and then falls as 1/√step. With d_model = 32 and warmup "
             "= 100, the factor is chosen so that the peak, at step 100, is 0.005 (seed 000's lr):\n"
             "    factor = 0.005 / (32^-0.5 · 100^-0.5)");
        const double factor = kPeakLr / (std::pow(32.0, -0.5) * std::pow(static_cast<double>(kWarmup), -0.5));
        const optim::NoamLR noam({.d_model = 32, .warmup = kWarmup, .factor = factor});
        fmt::print("\n      step   rate() written out   optim::NoamLR\n");
        double worst = 0;
        for (int64_t s : {0, 1, 2, 50, 99, 100, 101, 400, 1600}) {
            const double mine = rate(s, 32, factor, kWarmup), lib = noam.lr_at(s);
            worst = std::max(worst, std::abs(mine - lib) / lib);
            fmt::print("      {:>4}   {:>18.6e}   {:>13.6e}\n", s, mine, lib);
        }
        fmt::print("\n");
        t.check(worst < 1e-15, fmt::format("NoamLR.lr_at(step) == rate(step) at every step shown (largest "
                                           "relative difference {:.1e})", worst));
        t.check_close(noam.lr_at(100), 0.005, 1e-15, "the peak, at step = warmup = 100, is 0.005");
        t.check(noam.lr_at(0) == noam.lr_at(1) && noam.lr_at(50) == 0.5 * noam.lr_at(100) &&
                    std::abs(noam.lr_at(400) - 0.5 * noam.lr_at(100)) < 1e-15,
                "step 0 counts as 1; half the peak at step 50 (linear) and at step 400 (1/√step)");

        note("The loop is tasks::train's, written out (seed 004's train_test, with d2l's train_seq2seq "
             "details from seed 000):\n"
             "    lr = rate(step + 1)                 update k uses rate(k): the paper's step_num counts from 1\n"
             "    logits = model(enc_X, dec_in)       teacher forcing, causal mask inside the decoder\n"
             "    l = masked_softmax_ce_loss(logits, label, label_valid)   d2l's loss, one per sequence\n"
             "    sum(l).backward()                   d2l: l.sum().backward()\n"
             "    clip_grad_norm(parameters, 1)       d2l's grad_clipping(net, 1)\n"
             "    adam.step(); adam.zero_grad()\n"
             "d2l's loss per sequence is (1/T) Σ_t CE(t) and its printed figure Σ l / Σ tokens, which is the "
             "per-token cross-entropy divided by T = 9. Below we print seed 004's figure, the mean "
             "cross-entropy per token. (The Annotated Transformer's LambdaLR gives update k the rate "
             "rate(k - 1), with rate(0) = rate(1): the same curve, one step later.)");
        optim::Adam adam(model->named_parameters(), {.lr = kPeakLr});
        model->train();
        const int64_t total_steps = kEpochs * kBatchesPerEpoch;
        std::vector<double> d2l_losses;
        const auto start = std::chrono::steady_clock::now();
        auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
        fmt::print("\n      step  epoch   lr        loss (mean of the last 100 steps)   seconds\n");
        for (int64_t step = 0; step < total_steps; ++step) {
            const tasks::Batch batch = source.get(step / kBatchesPerEpoch, step % kBatchesPerEpoch);
            adam.set_lr(noam.lr_at(step + 1));
            const Variable logits = model->forward(batch.enc_X, batch.dec_in, batch.enc_valid);  // (B, T, V)
            const Variable l = nn::masked_softmax_ce_loss(logits, batch.label, batch.label_valid);  // (B)
            const Variable sum = ag::sum(l);
            sum.backward();
            optim::clip_grad_norm(adam.parameters(), kClip);
            adam.step();
            adam.zero_grad();
            // every label is valid, so each l[b] is the mean over T of the per-token losses
            const double tokens = static_cast<double>(kBatch * (kLength - 1));
            d2l_losses.push_back(sum.item() / tokens);
            step_ce.push_back(sum.item() / kBatch);
            step_lr.push_back(adam.lr());
            if ((step + 1) % 100 == 0 || step == 0) {
                const size_t n = std::min<size_t>(100, step_ce.size());
                const double recent = std::accumulate(step_ce.end() - n, step_ce.end(), 0.0) / n;
                fmt::print("      {:>4}  {:>5}   {:.2e}  {:<35.3g} {:.1f}\n", step + 1,
                           step / kBatchesPerEpoch + 1, adam.lr(), recent, seconds());
            }
        }
        fmt::print("\n");
        const double train_seconds = seconds();

        auto mean = [](const std::vector<double>& v, size_t from, size_t to) {
            return std::accumulate(v.begin() + from, v.begin() + to, 0.0) / static_cast<double>(to - from);
        };
        const double first = mean(step_ce, 0, 20), last = mean(step_ce, step_ce.size() - 100, step_ce.size());
        note("Epoch 1 averaged {:.3f} nats per token, the last 100 steps {:.1e}: the model went from "
             "guessing among 10 symbols to being sure. 1600 steps took {:.1f} s.", first, last, train_seconds);
        t.check(first > 1.5, "epoch 1: still close to guessing (> 1.5 nats per token)");
        t.check(last < 0.001, "the last 100 steps: below 0.001 nats per token");
        const double q1 = mean(step_ce, 0, 400), q2 = mean(step_ce, 400, 800), q3 = mean(step_ce, 800, 1200),
                     q4 = mean(step_ce, 1200, 1600);
        note("Mean loss of steps 1-400, 401-800, 801-1200, 1201-1600: {:.3g}, {:.3g}, {:.3g}, {:.3g}.", q1, q2, q3, q4);
        t.check(q2 < q1 && q3 < q2 && q4 < q3, "the loss falls from each quarter of the training to the next");

        note("\nThe same loop is what tasks::train (and so `tformer train copy`) runs. Training a second "
             "copy of the untrained model for 20 steps with tasks::train:");
        c::Generator g2(kSeed);
        auto twin = tasks::build_model(config, g2);
        tasks::TrainOptions o;  // out_dir left empty: no checkpoint, no loss.csv
        o.epochs = kEpochs;
        o.batch_size = kBatch;
        o.batches_per_epoch = kBatchesPerEpoch;
        o.lr = kPeakLr;
        o.schedule = "noam";
        o.warmup = kWarmup;
        o.clip = kClip;
        o.stop_after_steps = 20;
        o.quiet = true;
        tasks::CheckpointInfo info;
        info.config = config;
        const tasks::TrainResult r = tasks::train(*twin, g2, source, o, info);
        double diff = 0;
        for (size_t i = 0; i < 20; ++i) diff = std::max(diff, std::abs(r.step_loss[i] - d2l_losses[i]));
        note("    step 1..20 losses (d2l's figure): ours {:.5f} ... {:.5f}, tasks::train {:.5f} ... {:.5f}",
             d2l_losses[0], d2l_losses[19], r.step_loss[0], r.step_loss[19]);
        t.check(r.step_loss.size() == 20 && diff == 0, "the same 20 losses, to the last bit");

        // the pictures
        tasks::Series per_step{.name = "per step", .y = step_ce, .color = tasks::Rgb{160, 190, 230}, .line_width = 1.0};
        tasks::Series per_epoch{.name = "epoch mean"};
        for (int64_t e = 0; e < kEpochs; ++e) {
            per_epoch.x.push_back(static_cast<double>((e + 1) * kBatchesPerEpoch));
            per_epoch.y.push_back(mean(step_ce, e * kBatchesPerEpoch, (e + 1) * kBatchesPerEpoch));
        }
        for (size_t i = 0; i < step_ce.size(); ++i) per_step.x.push_back(static_cast<double>(i + 1));
        const auto loss_png = t.out_path("copy_loss.png");
        tasks::plot_lines(loss_png, {.series = {per_step, per_epoch},
                                     .title = "copy task: cross-entropy per token",
                                     .xlabel = "step",
                                     .ylabel = "loss (nats)",
                                     .log_y = true});
        tasks::Series lr_series{.name = "Noam, warmup 100", .y = step_lr};
        for (size_t i = 0; i < step_lr.size(); ++i) lr_series.x.push_back(static_cast<double>(i + 1));
        const auto lr_png = t.out_path("noam_schedule.png");
        tasks::plot_lines(lr_png, {.series = {lr_series}, .title = "learning rate", .xlabel = "step", .ylabel = "lr"});
        note("Wrote\n    {}\n    {}", loss_png.string(), lr_png.string());
        t.check(std::filesystem::file_size(loss_png) > 0 && std::filesystem::file_size(lr_png) > 0,
                "the loss curve and the schedule were written");
    });

    t.step("4. Greedy decoding with the KV cache", [&] {
        note("Seed 004's inference_test encodes [[1, 2, ..., 10]] once, then 9 times runs the decoder over "
             "the whole prefix and appends the argmax of the last position. tasks::greedy_decode does the "
             "same with the decoder's KV cache (tutorial 11): each step feeds only the newest token. We start "
             "from the start symbol 1, as in training (seed 004 starts from 0; see below).");
        const c::Tensor src = c::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10,   //
                                                                 1, 10, 9, 8, 7, 6, 5, 4, 3, 2,   //
                                                                 1, 7, 7, 7, 7, 7, 7, 7, 7, 7,   //
                                                                 1, 3, 1, 4, 1, 5, 9, 2, 6, 5},
                                             {4, kLength});
        const c::Tensor lens = c::full({4}, static_cast<double>(kLength), DType::int64);
        const auto decoded = tasks::greedy_decode(*model, src, lens, {.bos = 1, .eos = -1, .max_steps = kLength - 1});
        bool all_exact = true;
        for (int64_t b = 0; b < 4; ++b) {
            std::vector<int64_t> out = {1};
            out.insert(out.end(), decoded[b].tokens.begin(), decoded[b].tokens.end());
            const bool exact = out == row(src, b);
            all_exact = all_exact && exact;
            note("    {:<24} ->  {:<24} {}", join(row(src, b)), join(out), exact ? "copied" : "WRONG");
        }
        t.check(all_exact, "all four are copied exactly, including [1, 2, ..., 10] of seed 004's inference_test");

        note("\nThe cache gives the same answer as seed 004's way. Feeding the decoded sequence back with "
             "teacher forcing (one masked pass over all 9 positions) picks the same token at every position:");
        {
            ag::NoGradGuard no_grad;
            model->eval();
            std::vector<int64_t> dec = {1};
            dec.insert(dec.end(), decoded[0].tokens.begin(), decoded[0].tokens.end() - 1);
            const c::Tensor dec_in = c::from_vector(dec, {1, kLength - 1});
            const c::Tensor logits = model->forward(src.slice(0, 0, 1).contiguous(), dec_in, lens.slice(0, 0, 1)).value();
            const c::Tensor picks = c::argmax(logits, -1);  // (1, 9)
            show("argmax of the teacher-forced logits", picks);
            t.check(picks.to_vector<int64_t>() == decoded[0].tokens, "the same 9 tokens as the cached greedy steps");
        }

        note("\nSeed 004's inference_test starts from tgt = zeros(1, 1): symbol 0, which its own data_gen "
             "never produces (every training sequence starts with 1), so the embedding row of 0 never "
             "received a gradient. Decoding [1, 2, ..., 10] from 0 instead of 1, one step at a time through "
             "the cache, with the two most likely next symbols:");
        {
            ag::NoGradGuard no_grad;
            model->eval();
            const c::Tensor src1 = src.slice(0, 0, 1).contiguous(), len1 = lens.slice(0, 0, 1);
            nn::DecoderState state = model->decoder->init_state(model->encoder->forward(src1, len1), len1);
            std::vector<int64_t> out = {0};
            fmt::print("\n      step  fed   first choice   second choice\n");
            for (int64_t step = 0; step < kLength - 1; ++step) {
                const c::Tensor fed = c::from_vector(std::vector<int64_t>{out.back()}, {1, 1});
                const std::vector<double> p =
                    c::softmax(model->decoder->forward_step(fed, state).value()).to(DType::float64).to_vector<double>();
                std::vector<int64_t> order(p.size());
                std::iota(order.begin(), order.end(), 0);
                std::sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return p[i] > p[j]; });
                fmt::print("      {:>4} {:>4}   {:>3} ({:.3f})    {:>3} ({:.3f})\n", step, out.back(), order[0], p[order[0]],
                           order[1], p[order[1]]);
                out.push_back(order[0]);
            }
            fmt::print("\n");
            const std::vector<int64_t> want = row(src, 0);
            note("    start 0:  {}", join(out));
            t.check(!std::equal(out.begin() + 1, out.end(), want.begin() + 1),
                    "started from seed 004's 0, the same model does not copy [1, ..., 10]");
            t.check(std::equal(out.end() - 5, out.end(), want.end() - 5),
                    "but it finds its place again: the last five symbols, 6 7 8 9 10, are right");
            note("A wrong start costs more than one step. The decoder does not go by its position alone: its "
                 "self-attention also reads the symbols fed back so far, so after one wrong symbol the next "
                 "steps can be unsure or wrong too (look at the probabilities above) until the symbols fed "
                 "back and the positions agree again. Seed 004's decoding does not match its own data_gen: "
                 "decode from the start symbol the model was trained with.");
        }

        note("\nNow 200 fresh sequences from a generator the training never used (seed 12345), decoded as one "
             "batch of 200:");
        c::Generator g_test(12345);
        const tasks::Batch test = tasks::copy_batch(200, kLength, kVocab, g_test);
        const auto results = tasks::greedy_decode(*model, test.enc_X, test.enc_valid,
                                                  {.bos = 1, .eos = -1, .max_steps = kLength - 1});
        int64_t exact = 0, tokens_right = 0;
        for (int64_t b = 0; b < 200; ++b) {
            const std::vector<int64_t> want = row(test.label, b);
            exact += results[b].tokens == want;
            for (size_t i = 0; i < want.size() && i < results[b].tokens.size(); ++i) tokens_right += results[b].tokens[i] == want[i];
        }
        note("    exact sequences {} / 200, tokens {} / 1800", exact, tokens_right);
        t.check(exact == 200, "exact-sequence accuracy on 200 fresh sequences: 100%");
    });

    t.step("5. What the attention looks at", [&] {
        note("Run the trained model once more on [1, 2, ..., 10], teacher-forced with its own output, and "
             "keep the attention weights (seed 000's _attention_weights): the encoder's self-attention, "
             "(H, S, S) = (4, 10, 10) per block, and the decoder's encoder–decoder (cross) attention, "
             "(H, T, S) = (4, 9, 10) per block: row t is decoder position t, which was fed src[t] and must "
             "output src[t + 1].");
        ag::NoGradGuard no_grad;
        model->eval();
        const int64_t H = config.transformer.num_heads;
        const c::Tensor src = c::arange(1, 11, 1, DType::int64).view({1, kLength});
        const c::Tensor lens = c::full({1}, static_cast<double>(kLength), DType::int64);
        const c::Tensor dec_in = c::arange(1, 10, 1, DType::int64).view({1, kLength - 1});
        nn::DecoderState state = model->decoder->init_state(model->encoder->forward(src, lens), lens);
        model->decoder->forward(dec_in, state);
        const std::vector<c::Tensor> enc_w = model->encoder->attention_weights();  // [block] (H, S, S)
        const std::vector<c::Tensor> cross_w = model->decoder->attention_weights()[1];  // [block] (H, T, S)

        // weights in whole percent read better than 1e-13s
        auto percent = [](const c::Tensor& w) { return c::add(c::mul(w, 100.0), 0.5).to(DType::int64); };
        note("The cross-attention of block 2, averaged over its 4 heads, in percent (rows: steps t = 0..8, "
             "fed 1..9; columns: source positions 0..9, holding 1..10):");
        show("cross (%)", percent(c::mean(cross_w[1], {0})));
        bool shifted = true;
        for (int64_t h = 0; h < H; ++h)
            for (int64_t q = 0; q < kLength - 1; ++q)
                shifted = shifted && c::argmax(cross_w[1].select(0, h).select(0, q), 0).item() == static_cast<double>(q + 1);
        t.check(shifted, "in the last block every head puts its largest weight of step t on source position t + 1");
        note("A diagonal, one place to the right of the main one. Step t has src[t] in hand and needs "
             "src[t + 1], so it reads the source one position further on: the query of decoder position t "
             "matches the key of encoder position t + 1. The positions come from the positional encoding "
             "(tutorial 08): PE(t + 1) is a fixed rotation of PE(t), the same for every t, so one pair of "
             "W_q, W_k can turn 'my position' into 'the next position' all along the sequence. The value "
             "read there carries the symbol, and the output layer names it.");

        note("\nOver the 200 test sequences of step 4 (1800 decoder steps), per block: how often the "
             "largest weight of each head (and of their mean) falls on t + 1, and the mean weight there.");
        c::Generator g_test(12345);
        const tasks::Batch test = tasks::copy_batch(200, kLength, kVocab, g_test);
        nn::DecoderState test_state =
            model->decoder->init_state(model->encoder->forward(test.enc_X, test.enc_valid), test.enc_valid);
        model->decoder->forward(test.dec_in, test_state);
        const std::vector<c::Tensor> test_enc = model->encoder->attention_weights();          // [block] (B·H, S, S)
        const std::vector<c::Tensor> test_cross = model->decoder->attention_weights()[1];      // [block] (B·H, T, S)
        std::vector<int64_t> mean_hits(2);
        std::vector<double> weight_at_next(2);
        fmt::print("\n      block   argmax at t + 1:  head 1  head 2  head 3  head 4   mean of heads   weight at t + 1\n");
        for (int64_t blk = 0; blk < 2; ++blk) {
            const c::Tensor w = test_cross[blk].view({200, H, kLength - 1, kLength});
            std::vector<int64_t> hits(H + 1, 0);
            for (int64_t h = 0; h <= H; ++h) {
                const c::Tensor am = c::argmax(h < H ? w.select(1, h) : c::mean(w, {1}), -1);  // (200, T)
                for (int64_t b = 0; b < 200; ++b)
                    for (int64_t q = 0; q < kLength - 1; ++q) hits[h] += am.at({b, q}) == static_cast<double>(q + 1);
            }
            double at_next = 0;
            for (int64_t q = 0; q < kLength - 1; ++q) at_next += c::mean(w.select(2, q).select(2, q + 1)).item();
            mean_hits[blk] = hits[H];
            weight_at_next[blk] = at_next / static_cast<double>(kLength - 1);
            fmt::print("      {:>5}                    {:>6}  {:>6}  {:>6}  {:>6}   {:>13}   {:>15.3f}\n", blk + 1, hits[0],
                       hits[1], hits[2], hits[3], hits[4], weight_at_next[blk]);
        }
        fmt::print("\n");
        t.check(mean_hits[1] >= 1782, fmt::format("block 2: the heads' mean points at t + 1 in {} of 1800 steps (at "
                                                  "least 99%)", mean_hits[1]));
        t.check(mean_hits[0] < mean_hits[1] && weight_at_next[0] < weight_at_next[1],
                "block 1 is blurrier: fewer hits and less weight on t + 1 than block 2");
        note("The first block's heads are broader, some split between t (the symbol just fed) and t + 1; "
             "the second block, which feeds the output layer, is sharp.");

        note("\nThe encoder's self-attention, block 1, averaged over the heads, in percent (rows: queries, "
             "columns: keys, both source positions 0..9):");
        show("self (%)", percent(c::mean(enc_w[0], {0})));
        std::vector<double> on_self(2, 0), on_first(2, 0);
        for (int64_t blk = 0; blk < 2; ++blk) {
            const c::Tensor w = test_enc[blk].view({200, H, kLength, kLength});
            for (int64_t q = 0; q < kLength; ++q) on_self[blk] += c::mean(w.select(2, q).select(2, q)).item() / kLength;
            on_first[blk] = c::mean(w.select(3, 0)).item();
        }
        note("The encoder shows no diagonal. Over the 200 test sequences a position gives itself {:.2f} (block "
             "1) and {:.2f} (block 2) of its attention, near the uniform 1/10, and position 0, which holds "
             "the start symbol in every sequence, gets {:.2f} and {:.2f}. The copy does not need the encoder "
             "to move anything: the residual connections (AddNorm) keep each position's own symbol in its "
             "output, and the decoder's cross-attention fetches it from there.",
             on_self[0], on_self[1], on_first[0], on_first[1]);
        t.check(on_self[0] < 0.3 && on_self[1] < 0.3, "encoder: less than 0.3 of a position's attention on itself, in both blocks");
        t.check(on_first[0] > 0.1 && on_first[1] > 0.1, "encoder: more than the uniform 1/10 on position 0 (the start symbol)");

        // the pictures: blocks in rows, heads in columns
        std::vector<std::string> source, fed, head_titles;
        for (int64_t i = 1; i <= kLength; ++i) source.push_back(std::to_string(i));
        for (int64_t i = 1; i < kLength; ++i) fed.push_back(std::to_string(i));
        for (int64_t h = 1; h <= H; ++h) head_titles.push_back(fmt::format("head {}", h));
        const auto enc_png = t.out_path("copy_encoder_attention.png");
        const auto cross_png = t.out_path("copy_cross_attention.png");
        const tasks::HeatmapLayout enc_layout = tasks::plot_heatmaps(
            enc_png, {.matrices = tasks::heatmap_grid(c::stack(enc_w, 0)),  // (2, H, S, S)
                      .xlabel = "keys: source symbols",
                      .ylabel = "queries: source symbols",
                      .titles = head_titles,
                      .title = "encoder self-attention, blocks 1 (top) and 2",
                      .x_ticks = source,
                      .y_ticks = source});
        const tasks::HeatmapLayout cross_layout = tasks::plot_heatmaps(
            cross_png, {.matrices = tasks::heatmap_grid(c::stack(cross_w, 0)),  // (2, H, T, S)
                        .xlabel = "keys: source symbols",
                        .ylabel = "queries: symbol fed",
                        .titles = head_titles,
                        .title = "encoder-decoder attention, blocks 1 (top) and 2",
                        .x_ticks = source,
                        .y_ticks = fed});
        note("Wrote\n    {}\n    {}", enc_png.string(), cross_png.string());
        t.check(enc_layout.rows == 2 && enc_layout.cols == H && cross_layout.rows == 2 && cross_layout.cols == H &&
                    std::filesystem::file_size(enc_png) > 0 && std::filesystem::file_size(cross_png) > 0,
                "both heatmaps were written, 2 blocks × 4 heads each");
    });

    return t.finish();
}
