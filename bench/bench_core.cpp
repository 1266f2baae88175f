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
#include "core/blas.hpp"
#include "core/matmul.hpp"
#include "core/parallel.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

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

BENCHMARK(BM_matmul)->Apply(gemm_shapes);
BENCHMARK(BM_gemm_direct)->Apply(gemm_shapes);

// ---- batched products: attention scores ------------------------------------------------

// Q @ Kᵀ for 32 sequences x 8 heads of (10x8) @ (8x10): 256 tiny products,
// where per-call cost dominates and the batch loop itself runs in parallel.
void BM_matmul_heads(benchmark::State& state) {
    core::Generator gen(0);
    const core::Tensor q = core::rand({32, 8, 10, 8}, gen);                    // (B, H, T, d)
    const core::Tensor k = core::rand({32, 8, 10, 8}, gen).transpose(-1, -2);  // (B, H, d, S)
    for (auto _ : state) {
        core::Tensor scores = core::matmul(q, k);  // (B, H, T, S)
        benchmark::DoNotOptimize(scores.raw_data());
    }
    set_gflops(state, 10, 8, 10, 256);
}

// The same 256 products as a plain serial loop of blas::gemm calls.
void BM_gemm_heads_loop(benchmark::State& state) {
    std::vector<float> q(256 * 80, 0.5f), k(256 * 80, 0.25f), out(256 * 100);
    for (auto _ : state) {
        for (int h = 0; h < 256; ++h)
            core::blas::gemm(false, true, 10, 10, 8, 1.0f, q.data() + h * 80, 8, k.data() + h * 80, 8, 0.0f,
                             out.data() + h * 100, 10);
        benchmark::DoNotOptimize(out.data());
    }
    set_gflops(state, 10, 8, 10, 256);
}

BENCHMARK(BM_matmul_heads);
BENCHMARK(BM_gemm_heads_loop);

// ---- linear -------------------------------------------------------------------------------

// y = x @ Wᵀ + b for the FFN expansion: x (2048, 256), W (1024, 256).
void BM_linear(benchmark::State& state) {
    core::Generator gen(0);
    const core::Tensor x = core::rand({2048, 256}, gen), w = core::rand({1024, 256}, gen), b = core::rand({1024}, gen);
    for (auto _ : state) {
        core::Tensor y = core::linear(x, w, b);
        benchmark::DoNotOptimize(y.raw_data());
    }
    set_gflops(state, 2048, 256, 1024);
}

BENCHMARK(BM_linear);

// ---- elementwise and rowwise kernels -------------------------------------------------------
// LEAD: once the elementwise and rowwise families are merged, add here
//   - BM_add: core::add on large float32 tensors, bytes moved as a GB/s counter
//     (benchmark::Counter(bytes, kIsIterationInvariantRate, kIs1024) or 1e-9 scaling);
//   - BM_softmax: core::softmax over rows of (B*H*T, S), GB/s;
//   - BM_add_tiny: core::add on (2x2) tensors, the fixed cost of one op in ns.
// They are left out on this branch because those functions are not implemented here.

}  // namespace

// Reads --threads=N (removed from argv before Google Benchmark sees it), then
// prints what decides the GEMM speed: the OpenBLAS kernel set, whether the
// user forced one with OPENBLAS_CORETYPE, and the thread count.
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
    fmt::print("OpenBLAS core: {}\n", core::blas::core_name());
    fmt::print("OPENBLAS_CORETYPE: {}\n", coretype != nullptr ? coretype : "(not set)");
    fmt::print("OpenBLAS build: {}\n", core::blas::config());
    fmt::print("threads: {}\n", core::get_num_threads());
    std::fflush(stdout);

    benchmark::Initialize(&count, args.data());
    if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
