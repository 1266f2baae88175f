/// \file
/// Threads: one OpenMP pool shared by our loops and by OpenBLAS (we link its
/// OpenMP build). Loops run in parallel only above a size threshold, because
/// for the small tensors of small Transformers a parallel region costs more
/// (a few microseconds) than the work it would split.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace tformer::core {

/// Elements of work below which a kernel stays on one thread. 2^16 float
/// elements take a row kernel (layer norm, softmax) 20-60 µs on one core,
/// against about 2 µs to start and join a parallel region whose threads are
/// still spinning from the last one. (2^18 kept the translation model's
/// layer norms, 1140 x 128, on one thread.)
inline constexpr int64_t kParallelGrain = 1 << 16;

/// Sets the threads used by our kernels and by OpenBLAS.
void set_num_threads(int n);

/// Threads our kernels will use.
int get_num_threads();

/// Calls body(begin_i, end_i) on disjoint chunks covering [begin, end).
/// `cost` is the work per index in elements; the loop is split across
/// threads only when (end - begin) * cost exceeds kParallelGrain and we are
/// not already inside a parallel region. Chunks are static, so the split is
/// the same for the same thread count (results are reproducible).
template <class Body>
void parallel_for(int64_t begin, int64_t end, int64_t cost, Body&& body) {
    const int64_t n = end - begin;
    if (n <= 0) return;
    const int threads = get_num_threads();
    if (threads <= 1 || n * std::max<int64_t>(cost, 1) < kParallelGrain || n < 2 || omp_in_parallel()) {
        body(begin, end);
        return;
    }
    const int64_t chunks = std::min<int64_t>(threads, n);
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t b = begin + n * c / chunks;
        const int64_t e = begin + n * (c + 1) / chunks;
        body(b, e);
    }
}

}  // namespace tformer::core
