// Benchmarks of the core kernels (Google Benchmark).
//
//   ./build/release/bench/bench_core --benchmark_min_time=0.2 [--threads=N]
//
// Each matmul shape runs twice: through core::matmul (shape checks, output
// allocation, layout decisions) and as a bare core::blas::gemm call on
// buffers allocated once. The bare call is the baseline: it goes through
// core::blas like everything else (so every BLAS call still lives in
// core/blas.cpp), and that wrapper only checks a few integers before
// cblas_sgemm. The gap between the two is tformer's overhead.
//
// Then the bandwidth-bound kernels (core::add, core::softmax on 1M floats,
// GB/s at 1 and 2 threads) and the fixed cost of the smallest ops: a 4-element
// core::add, and a 4-element autograd::mul with its sum and backward.
#include "autograd/elementwise.hpp"
#include "autograd/reduce.hpp"
#include "autograd/variable.hpp"
#include "core/attention.hpp"
#include "core/blas.hpp"
#include "core/elementwise.hpp"
#include "core/matmul.hpp"
#include "core/parallel.hpp"
#include "core/rowwise.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace tformer;

namespace {

// 2·n·k·m floating-point operations per product, shown as GFLOP/s.
void set_gflops(benchmark::State& state, double n, double k, double m, double products = 1.0) {
    state.counters["GFLOP/s"] =
        benchmark::Counter(2.0 * n * k * m * products * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- matmul against a bare GEMM ---------------------------------------------------------

// out = a @ b through core::matmul, a (n, k), b (k, m).
void BM_matmul(benchmark::State& state) {
    const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
    core::Generator gen(0);
    const core::Tensor a = core::rand({n, k}, gen), b = core::rand({k, m}, gen);
    for (auto _ : state) {
        core::Tensor out = core::matmul(a, b);
        benchmark::DoNotOptimize(out.raw_data());
    }
    set_gflops(state, n, k, m);
}

// The same product as one blas::gemm call into a preallocated buffer.
void BM_gemm_direct(benchmark::State& state) {
    const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
    std::vector<float> a(n * k, 0.5f), b(k * m, 0.25f), out(n * m);
    for (auto _ : state) {
        core::blas::gemm(false, false, n, m, k, 1.0f, a.data(), k, b.data(), m, 0.0f, out.data(), m);
        benchmark::DoNotOptimize(out.data());
    }
    set_gflops(state, n, k, m);
}

// {n, k, m}: a small square, a large square, a narrow projection (640 rows
// of d=32 as in the copy task), and the FFN expansion of a 2048-token batch.
void gemm_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"n", "k", "m"});
    b->Args({64, 64, 64});
    b->Args({512, 512, 512});
    b->Args({640, 32, 32});
    b->Args({2048, 256, 1024});
    b->Args({2, 2, 2});  // the fixed cost of one call (read the time, not GFLOP/s)
}

// Wall-clock time throughout: with several threads the CPU time of the
// calling thread alone says little about how long the product took.
BENCHMARK(BM_matmul)->Apply(gemm_shapes)->UseRealTime();
BENCHMARK(BM_gemm_direct)->Apply(gemm_shapes)->UseRealTime();

// ---- batched products: attention scores ------------------------------------------------

// Q @ Kᵀ for `heads` (sequences x heads) products of (T x d) @ (d x T):
// 256 x (10x8)@(8x10) is the copy task, where per-call cost dominates;
// 24 x (50x64)@(64x50) is mid-sized, where matmul spreads the batch loop
// over the threads.
void BM_matmul_heads(benchmark::State& state) {
    const int64_t heads = state.range(0), t = state.range(1), d = state.range(2);
    core::Generator gen(0);
    const core::Tensor q = core::rand({heads, t, d}, gen);                    // (B*H, T, d)
    const core::Tensor k = core::rand({heads, t, d}, gen).transpose(-1, -2);  // (B*H, d, T)
    for (auto _ : state) {
        core::Tensor scores = core::matmul(q, k);  // (B*H, T, T)
        benchmark::DoNotOptimize(scores.raw_data());
    }
    set_gflops(state, t, d, t, heads);
}

// The same products as a plain serial loop of blas::gemm calls.
void BM_gemm_heads_loop(benchmark::State& state) {
    const int64_t heads = state.range(0), t = state.range(1), d = state.range(2);
    std::vector<float> q(heads * t * d, 0.5f), k(heads * t * d, 0.25f), out(heads * t * t);
    for (auto _ : state) {
        for (int64_t h = 0; h < heads; ++h)
            core::blas::gemm(false, true, t, t, d, 1.0f, q.data() + h * t * d, d, k.data() + h * t * d, d, 0.0f,
                             out.data() + h * t * t, t);
        benchmark::DoNotOptimize(out.data());
    }
    set_gflops(state, t, d, t, heads);
}

void heads_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"heads", "T", "d"});
    b->Args({256, 10, 8});
    b->Args({24, 50, 64});
}

BENCHMARK(BM_matmul_heads)->Apply(heads_shapes)->UseRealTime();
BENCHMARK(BM_gemm_heads_loop)->Apply(heads_shapes)->UseRealTime();

// ---- linear -------------------------------------------------------------------------------

// y = x @ Wᵀ + b for the FFN expansion: x (2048, 256), W (1024, 256).
// y = x Wᵀ + b, with y allocated afresh each time as in a forward pass: the
// shape of the large presets' projections and of d2l's (640 rows, 32 → 32).
void BM_linear(benchmark::State& state) {
    const int64_t rows = state.range(0), in = state.range(1), out = state.range(2);
    core::Generator gen(0);
    const core::Tensor x = core::rand({rows, in}, gen), w = core::rand({out, in}, gen), b = core::rand({out}, gen);
    for (auto _ : state) {
        core::Tensor y = core::linear(x, w, b);
        benchmark::DoNotOptimize(y.raw_data());
    }
    set_gflops(state, rows, in, out);
}

BENCHMARK(BM_linear)
    ->ArgNames({"rows", "in", "out"})
    ->Args({2048, 256, 1024})
    ->Args({640, 32, 32})
    ->Args({64, 32, 32})
    ->Args({640, 32, 201})
    ->UseRealTime();

// ---- elementwise and rowwise kernels -------------------------------------------------------
// Bandwidth-bound kernels: the figure that matters is bytes moved per second
// (each element read and written once), shown as GB/s (1e9 bytes). The
// second argument is the thread count, set for the run and restored after,
// so 1 and 2 threads appear side by side whatever --threads says.

// Sets the kernel and BLAS thread count for one benchmark, restores it after.
class ThreadScope {
public:
    explicit ThreadScope(int threads) : previous_(core::get_num_threads()) { core::set_num_threads(threads); }
    ~ThreadScope() { core::set_num_threads(previous_); }
    ThreadScope(const ThreadScope&) = delete;
    ThreadScope& operator=(const ThreadScope&) = delete;

private:
    int previous_;
};

void set_bandwidth(benchmark::State& state, double bytes) {
    state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// AddNorm at d2l's shape (640 rows of 32), 1 thread: the dropout mask, the
// fused forward with it, and the backward, each alone.
void BM_dropout_mask(benchmark::State& state) {
    ThreadScope threads(1);
    core::Generator gen(0);
    for (auto _ : state) {
        core::Tensor m = core::dropout_mask({640, 32}, 0.1, gen);
        benchmark::DoNotOptimize(m.raw_data());
    }
    set_bandwidth(state, 640.0 * 32 * 4);
}
BENCHMARK(BM_dropout_mask)->UseRealTime();

void BM_add_layer_norm(benchmark::State& state) {
    ThreadScope threads(1);
    core::Generator gen(0);
    const core::Tensor x = core::randn({640, 32}, gen), y = core::randn({640, 32}, gen);
    const core::Tensor keep = core::dropout_mask({640, 32}, 0.1, gen);
    const core::Tensor w = core::rand({32}, gen), b = core::rand({32}, gen);
    for (auto _ : state) {
        core::AddLayerNormOut o = core::add_layer_norm(x, y, keep, w, b, 1e-5);
        benchmark::DoNotOptimize(o.y.raw_data());
    }
    set_bandwidth(state, 640.0 * 32 * 4 * 5);
}
BENCHMARK(BM_add_layer_norm)->UseRealTime();

void BM_layer_norm_backward(benchmark::State& state) {
    ThreadScope threads(1);
    core::Generator gen(0);
    const core::Tensor x = core::randn({640, 32}, gen), dy = core::randn({640, 32}, gen);
    const core::Tensor w = core::rand({32}, gen), b = core::rand({32}, gen);
    const core::LayerNormOut f = core::layer_norm(x, w, b, 1e-5);
    for (auto _ : state) {
        core::LayerNormGrads g = core::layer_norm_backward(dy, x, f.mean, f.rstd, w, true);
        benchmark::DoNotOptimize(g.dx.raw_data());
    }
    set_bandwidth(state, 640.0 * 32 * 4 * 3);
}
BENCHMARK(BM_layer_norm_backward)->UseRealTime();

// out = a + b on n float32 elements: reads 2n, writes n floats (12 bytes each).
void BM_add(benchmark::State& state) {
    const int64_t n = state.range(0);
    ThreadScope threads(static_cast<int>(state.range(1)));
    core::Generator gen(0);
    const core::Tensor a = core::rand({n}, gen), b = core::rand({n}, gen);
    for (auto _ : state) {
        core::Tensor out = core::add(a, b);
        benchmark::DoNotOptimize(out.raw_data());
    }
    set_bandwidth(state, 12.0 * static_cast<double>(n));
}

// softmax over rows of (B·H·T, S) = (n / 64, 64), attention-score shaped:
// reads n and writes n floats (8 bytes each; the kernel's two passes over a
// 64-float row stay in cache).
void BM_softmax(benchmark::State& state) {
    const int64_t n = state.range(0), S = 64;
    ThreadScope threads(static_cast<int>(state.range(1)));
    core::Generator gen(0);
    const core::Tensor x = core::randn({n / S, S}, gen);  // (B·H·T, S)
    for (auto _ : state) {
        core::Tensor y = core::softmax(x);
        benchmark::DoNotOptimize(y.raw_data());
    }
    set_bandwidth(state, 8.0 * static_cast<double>(n));
}

// {elements, threads}: 1M floats (4 MB per operand, beyond most L2 caches).
void bandwidth_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"n", "threads"});
    b->Args({1 << 20, 1});
    b->Args({1 << 20, 2});
    b->UseRealTime();  // CPU time of the calling thread alone would flatter 2 threads
}

BENCHMARK(BM_add)->Apply(bandwidth_args);
BENCHMARK(BM_softmax)->Apply(bandwidth_args);

// ---- fused attention (core/attention.hpp) ----------------------------------------------------
// One layer's attention core at the presets' shapes, 1 thread: scores,
// masked softmax and weighted sum of every head (forward), and the gradients
// of Q, K and V (backward). GFLOP/s counts the products per head (forward
// two of T·S·d, backward four), so it compares with the batched GEMMs above.
struct AttentionInputs {
    int64_t B, T, D, H;
    core::Tensor Q, K, V, lens;
    AttentionInputs(int64_t b, int64_t t, int64_t d, int64_t h) : B(b), T(t), D(d), H(h) {
        core::Generator gen(0);
        Q = core::randn({B, T, D}, gen);
        K = core::randn({B, T, D}, gen);
        V = core::randn({B, T, D}, gen);
        lens = core::full({B}, static_cast<double>(T - 1), core::DType::int64);  // one masked key per row
    }
    double scale() const { return 1.0 / std::sqrt(static_cast<double>(D / H)); }
};

void BM_attention_forward(benchmark::State& state) {
    ThreadScope threads(1);
    const AttentionInputs in(state.range(0), state.range(1), state.range(2), state.range(3));
    for (auto _ : state) {
        core::Tensor P = core::attention_probs(in.Q, in.K, in.lens, in.H, in.scale());
        core::Tensor O = core::attention_values(P, in.V);
        benchmark::DoNotOptimize(O.raw_data());
    }
    set_gflops(state, static_cast<double>(in.T), static_cast<double>(in.D / in.H), static_cast<double>(in.T),
               2.0 * static_cast<double>(in.B * in.H));
}

void BM_attention_backward(benchmark::State& state) {
    ThreadScope threads(1);
    const AttentionInputs in(state.range(0), state.range(1), state.range(2), state.range(3));
    const core::Tensor P = core::attention_probs(in.Q, in.K, in.lens, in.H, in.scale());
    core::Generator gen(1);
    const core::Tensor dO = core::randn({in.B, in.T, in.D}, gen);
    for (auto _ : state) {
        core::AttentionGrads g = core::attention_backward(dO, in.Q, in.K, in.V, P, core::Tensor(), in.scale());
        benchmark::DoNotOptimize(g.dQ.raw_data());
    }
    set_gflops(state, static_cast<double>(in.T), static_cast<double>(in.D / in.H), static_cast<double>(in.T),
               4.0 * static_cast<double>(in.B * in.H));
}

// {B, T, D, H}: the d2l preset (head size 8), small (32) and base (64)
void attention_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"B", "T", "D", "H"});
    b->Args({64, 10, 32, 4});
    b->Args({64, 32, 256, 8});
    b->Args({32, 32, 512, 8});
    b->UseRealTime();
}

BENCHMARK(BM_attention_forward)->Apply(attention_shapes);
BENCHMARK(BM_attention_backward)->Apply(attention_shapes);

// ---- the fixed cost of one op ----------------------------------------------------------------
// Small Transformers run thousands of ops on tiny tensors per step, so the
// cost of an op that does no work (argument checks, shape and stride
// bookkeeping, one allocation) bounds their speed. Read the time in ns.

// out = a + b on two 4-element tensors.
void BM_add_tiny(benchmark::State& state) {
    const core::Tensor a = core::tensor({1, 2, 3, 4}, {4}), b = core::tensor({5, 6, 7, 8}, {4});
    for (auto _ : state) {
        core::Tensor out = core::add(a, b);
        benchmark::DoNotOptimize(out.raw_data());
    }
}

// One tiny differentiable op with its backward: y = Σ a ⊙ b on 4 elements,
// then y.backward(). Two graph nodes (mul, sum), their two backward
// functions, and the gradient buffers of both leaves; nothing subtracted.
void BM_autograd_mul_tiny(benchmark::State& state) {
    const autograd::Variable a(core::tensor({1, 2, 3, 4}, {4}), true), b(core::tensor({5, 6, 7, 8}, {4}), true);
    for (auto _ : state) {
        a.zero_grad();
        b.zero_grad();
        autograd::Variable y = autograd::sum(autograd::mul(a, b));
        y.backward();
        benchmark::DoNotOptimize(a.grad().raw_data());
    }
}

BENCHMARK(BM_add_tiny);
BENCHMARK(BM_autograd_mul_tiny);

}  // namespace

// Reads --threads=N (removed from argv before Google Benchmark sees it), then
// records what decides the GEMM speed: the OpenBLAS kernel set, whether the
// user forced one with OPENBLAS_CORETYPE, and the thread count. They go into
// Google Benchmark's context, so they head the console output and appear in
// the "context" block of --benchmark_format=json.
int main(int argc, char** argv) {
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--threads=", 10) == 0) {
            try {
                core::set_num_threads(std::atoi(argv[i] + 10));
            } catch (const Error& e) {
                fmt::print(stderr, "bench_core: {}\n", e.what());
                return 1;
            }
        } else {
            args.push_back(argv[i]);
        }
    }
    int count = static_cast<int>(args.size());

    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    benchmark::AddCustomContext("openblas_core", core::blas::core_name());
    benchmark::AddCustomContext("OPENBLAS_CORETYPE", coretype != nullptr ? coretype : "(not set)");
    benchmark::AddCustomContext("openblas_config", core::blas::config());
    benchmark::AddCustomContext("threads", std::to_string(core::get_num_threads()));

    benchmark::Initialize(&count, args.data());
    if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
