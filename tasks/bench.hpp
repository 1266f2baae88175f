/// \file
/// The model benchmark behind `tformer bench`: how long one training step,
/// one evaluation forward pass and one greedy decoding of a batch take for a
/// few model sizes, on random tokens. bench/torch_bench.py measures the same
/// figures for the same models in PyTorch, and bench/compare.sh puts the two
/// side by side (see docs/bench.md).
///
/// Every figure is one JSON line on stdout, e.g.
/// ```
///   {"engine":"tformer","preset":"d2l","threads":2,"figure":"train_step_ms","value":3.21}
/// ```
/// preceded by one "info" line (OpenBLAS kernel set, sizes, parameter count).
///
/// Letters: B batch, S source steps, T target steps, V vocabulary.
#pragma once

#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tformer::tasks {

/// A model size and a batch shape to measure.
struct BenchPreset {
    std::string name;         ///< what `tformer bench --preset` calls it
    ModelConfig config;       ///< vocabularies and Transformer sizes (every preset runs the fused layers)
    int64_t batch_size = 64;  ///< B
    int64_t num_steps = 10;   ///< S = T
    int64_t repeats = 10;     ///< timed repetitions of each figure when the caller says 0
    int64_t warmup = 2;       ///< untimed repetitions first (allocations, Adam's state, caches)
    uint64_t seed = 0;        ///< weights, tokens and valid lengths
    /// Real batches of the default translation run instead of random ones:
    /// the whole corpus, its joint SentencePiece vocabulary (which sets the
    /// vocabulary sizes), length buckets of batch_tokens, and the fused
    /// output layer + label-smoothed token-mean loss over the whole
    /// vocabulary. Each timed repetition is the next batch in training order.
    bool corpus = false;
    int64_t vocab_size = 8000;     ///< SentencePiece pieces (corpus)
    int64_t batch_tokens = 2000;   ///< B · (S + T) per batch, padding included (corpus)
    int64_t val_sentences = 1500;  ///< validation sentences kept out of the training split (corpus)
    double label_smoothing = 0.1;  ///< (corpus)
    int64_t sample_size = 0;       ///< > 0: a seeded sample of the corpus (tests; corpus)
};

/// The preset names, in the order `tformer bench --help` lists them:
/// d2l, copy, small, base, translate.
const std::vector<std::string>& bench_preset_names();

/// The preset called `name`; ValueError listing the presets for any other name.
/// ```
///   d2l    seed 000's model: D 32, FFN 64, 4 heads, 2 layers, dropout 0.1,
///          vocabularies 184/201 (d2l's 600 fra-eng pairs), B 64, T 10
///   copy   seed 004's copy task: V 11, D 32, FFN 64, 8 heads, 2 layers, dropout 0, B 30, T 10
///   small  V 8000, D 256, FFN 1024, 8 heads, 3 layers, dropout 0.1, B 64, T 32
///   base   V 8000, D 512, FFN 2048, 8 heads, 6 layers, dropout 0.1, B 32, T 32
///   translate  the default `tformer train translate` model on its real batches:
///          D 128, FFN 512, 4 heads, 2 layers, no dropout, tied embeddings over
///          the joint SentencePiece vocabulary of 4,000 pieces, batches of up
///          to 1,500 tokens from the length buckets (up to 64 steps)
/// ```
BenchPreset bench_preset(const std::string& name);

/// The batches a preset is measured on: `count` random batches (all the same
/// batch) for the random presets; for a corpus preset the first `count`
/// batches of epoch 0 in training order, after the corpus at `data` is split
/// and SentencePiece is trained on it (which sets config's vocabulary sizes).
std::vector<Batch> bench_batches(BenchPreset& preset, int64_t count, const std::string& data);

/// Batches as JSON (the token ids and valid lengths, with the vocabulary
/// sizes), so bench/torch_bench.py can run PyTorch on the very same batches,
/// and so a later `tformer bench --load-batches` can skip the tokenizer.
void save_bench_batches(const std::string& path, const BenchPreset& preset, const std::vector<Batch>& batches);
/// The batches save_bench_batches wrote; sets the preset's vocabulary sizes.
/// IOError naming the file when it cannot be read or parsed.
std::vector<Batch> load_bench_batches(const std::string& path, BenchPreset& preset);

/// One batch of random token ids in [4, V) (so none is `<unk>`, `<pad>`, `<bos>`
/// or `<eos>`) with the decoder input [`<bos>`, label[:, :-1]] as d2l builds it.
/// The valid lengths, uniform in [1, T], come from splitmix64 seeded with
/// `seed`, written out so bench/torch_bench.py draws exactly the same ones
/// (and so both engines count the same target tokens per step).
Batch bench_batch(const BenchPreset& preset, core::Generator& gen);

/// The valid lengths of bench_batch: n draws of 1 + (splitmix64 output mod T).
std::vector<int64_t> bench_valid_lengths(uint64_t seed, int64_t n, int64_t T);

/// The loss a timed training step minimises, through the fused output layer
/// (autograd::linear_cross_entropy: the (B T, V) logits are never kept).
/// Random presets: d2l's masked loss summed over the batch, the same number
/// as Σ_b masked_softmax_ce_loss(model.forward(...)); corpus preset: the
/// default translation run's label-smoothed token mean.
autograd::Variable bench_step_loss(nn::EncoderDecoder& model, const Batch& batch, const BenchPreset& preset);

/// One measured figure.
struct BenchFigure {
    std::string figure;  ///< train_step_ms, ..., peak_rss_mb (see measure_model)
    double value = 0;    ///< the figure's value, in the unit its name ends with
};

/// Measures a preset on the current thread count; `repeats` timed runs per
/// figure (0: the preset's default), each time figure the median (for a
/// corpus preset, whose repetitions are different batches, the mean).
/// ```
///   train_step_ms      forward, the loss (masked_softmax_ce_loss summed;
///                      corpus: the fused output loss), backward,
///                      clip_grad_norm(1), Adam step, zero_grad
///   train_step_cpu_ms  the same step's process CPU time (all threads; on a
///                      loaded machine the steadier figure at 1 thread)
///   forward_eval_ms    eval mode, no graph, the teacher-forced forward pass
///   forward_eval_cpu_ms  its process CPU time
///   greedy_decode_ms   greedy_decode of the batch for T tokens on the KV
///                      cache (`<eos>` never stops it, so every run does T steps)
///   greedy_decode_cpu_ms its process CPU time
///   train_tokens_per_s Σ label valid lengths / train time
///   X_gflop            for X in train_step, forward_eval, greedy_decode: the
///                      GEMM work of one run in GFLOP (2mnk per product,
///                      counted as the products are called)
///   X_gflops           that work / the run's time: what the run achieves
///   X_sgemm_gflops     that work / the time bare BLAS gemm takes on the
///                      same shapes, called one after the other: the limit
///   peak_rss_mb        the process's peak resident memory so far (ru_maxrss)
/// ```
/// `batches` come from bench_batches (one batch for the random presets).
std::vector<BenchFigure> measure_model(const BenchPreset& preset, int64_t repeats = 0,
                                       const std::vector<Batch>& batches = {});

/// What `tformer bench` was asked.
struct BenchOptions {
    std::string preset = "d2l";  ///< the preset to measure (see bench_preset)
    int threads = 0;             ///< 0: leave the default
    int64_t repeats = 0;         ///< 0: the preset's
    bool profile = false;        ///< also print a per-op table of training steps to stderr
    bool train_only = false;     ///< only the train step's times and peak RSS (for profiling runs)
    std::string data{};          ///< fra.txt for the corpus preset (empty: default_fra_eng_path())
    std::string save_batches{};  ///< write the batches measured here as JSON (save_bench_batches)
    std::string load_batches{};  ///< measure the batches of a file save_batches wrote
    /// --preset decode: the checkpoint to translate with
    std::string checkpoint = "runs/translate/checkpoint.safetensors";
    int64_t sentences = 1000;      ///< --preset decode: how many validation sentences
    std::string save_sentences{};  ///< --preset decode: write them here, one per line (bench/torch_decode.py)
    int64_t batch_tokens = 500;    ///< --preset decode: source tokens per batch, padding included
};

/// `tformer bench --preset decode`: translates the first `sentences`
/// validation sentences of the default run's split (the corpus at `data`,
/// 1,500 held out with seed 0) with the checkpoint, as `tformer translate`
/// does, with beam 4 and greedily, and prints one JSON line per figure (X is
/// beam4 or greedy):
///   X_ms                 wall time of the whole list (median of `repeats` runs after one warm-up)
///   X_sentences_per_s, X_target_tokens_per_s  (generated tokens, `<eos>` included)
///   X_gflop, X_gflops    the products' work and what the run achieved
///   X_sgemm_gflops       that work over the time bare gemm takes on the same shapes
///   X_product_ratio      X_gflops / X_sgemm_gflops: the share of the products' own speed reached
///   X_one_batch_ms       (threads > 1) the same with one batch at a time over all
///                        threads (OpenMP inside the kernels) instead of a batch per thread
///   peak_rss_mb
int run_decode_bench(const BenchOptions& options);

/// `tformer bench`: sets the thread count, prints the info line and then
/// one JSON line per figure as each is measured. Throws ValueError for an
/// unknown preset, a negative thread count or repeats. With `profile`, also
/// prints a per-op table of a training step to stderr (autograd/profiler.hpp),
/// measured on separate steps after the timed ones.
int run_model_bench(const BenchOptions& options);

}  // namespace tformer::tasks
