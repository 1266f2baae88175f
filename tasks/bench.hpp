// The model benchmark behind `tformer bench`: how long one training step,
// one evaluation forward pass and one greedy decoding of a batch take for a
// few model sizes, on random tokens. bench/torch_bench.py measures the same
// figures for the same models in PyTorch, and bench/compare.sh puts the two
// side by side (see docs/bench.md).
//
// Every figure is one JSON line on stdout, e.g.
//   {"engine":"tformer","preset":"d2l","threads":2,"figure":"train_step_ms","value":3.21}
// preceded by one "info" line (OpenBLAS kernel set, sizes, parameter count).
//
// Letters: B batch, S source steps, T target steps, V vocabulary.
#pragma once

#include "tasks/seq2seq.hpp"
#include "tasks/train.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tformer::tasks {

/// A model size and a batch shape to measure.
struct BenchPreset {
    std::string name;
    ModelConfig config;       ///< vocabularies and Transformer sizes
    int64_t batch_size = 64;  ///< B
    int64_t num_steps = 10;   ///< S = T
    int64_t repeats = 10;     ///< timed repetitions of each figure when the caller says 0
    int64_t warmup = 2;       ///< untimed repetitions first (allocations, Adam's state, caches)
    uint64_t seed = 0;        ///< weights, tokens and valid lengths
};

/// The preset names, in the order `tformer bench --help` lists them:
/// d2l, copy, small, base.
const std::vector<std::string>& bench_preset_names();

/// The preset called `name`; ValueError listing the presets for any other name.
///   d2l    seed 000's model: D 32, FFN 64, 4 heads, 2 layers, dropout 0.1,
///          vocabularies 184/201 (d2l's 600 fra-eng pairs), B 64, T 10
///   copy   seed 004's copy task: V 11, D 32, FFN 64, 8 heads, 2 layers, dropout 0, B 30, T 10
///   small  V 8000, D 256, FFN 1024, 8 heads, 3 layers, dropout 0.1, B 64, T 32
///   base   V 8000, D 512, FFN 2048, 8 heads, 6 layers, dropout 0.1, B 32, T 32
BenchPreset bench_preset(const std::string& name);

/// One batch of random token ids in [4, V) (so none is <unk>, <pad>, <bos>
/// or <eos>) with the decoder input [<bos>, label[:, :-1]] as d2l builds it.
/// The valid lengths, uniform in [1, T], come from splitmix64 seeded with
/// `seed`, written out so bench/torch_bench.py draws exactly the same ones
/// (and so both engines count the same target tokens per step).
Batch bench_batch(const BenchPreset& preset, core::Generator& gen);

/// The valid lengths of bench_batch: n draws of 1 + (splitmix64 output mod T).
std::vector<int64_t> bench_valid_lengths(uint64_t seed, int64_t n, int64_t T);

/// One measured figure.
struct BenchFigure {
    std::string figure;  ///< train_step_ms, train_step_cpu_ms, forward_eval_ms, greedy_decode_ms, train_tokens_per_s, peak_rss_mb
    double value = 0;
};

/// Measures a preset on the current thread count; `repeats` timed runs per
/// figure (0: the preset's default), each time figure the median.
///   train_step_ms      forward, masked_softmax_ce_loss, backward of its sum,
///                      clip_grad_norm(1), Adam step, zero_grad
///   train_step_cpu_ms  the same step's process CPU time (all threads; on a
///                      loaded machine the steadier figure at 1 thread)
///   forward_eval_ms    eval mode, no graph, the teacher-forced forward pass
///   greedy_decode_ms   greedy_decode of the batch for T tokens on the KV
///                      cache (<eos> never stops it, so every run does T steps)
///   train_tokens_per_s Σ label valid lengths / median train step
///   peak_rss_mb        the process's peak resident memory so far (ru_maxrss)
std::vector<BenchFigure> measure_model(const BenchPreset& preset, int64_t repeats = 0);

/// `tformer bench`: sets the thread count (0: leave the default), prints the
/// info line and then one JSON line per figure as each is measured. Throws
/// ValueError for an unknown preset, a negative thread count or repeats.
/// With `profile`, also prints a per-op table of a training step to stderr
/// (autograd/profiler.hpp), measured on separate steps after the timed ones.
int run_model_bench(const std::string& preset, int threads, int64_t repeats, bool profile = false);

}  // namespace tformer::tasks
