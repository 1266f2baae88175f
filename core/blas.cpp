// The one doorway to BLAS. Every call into OpenBLAS from tformer's kernels
// goes through this file, so the row-major conventions, the checks on
// leading dimensions and the 32-bit size limit are written once.
//
// Row-major GEMM: C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C.
// A row-major matrix with leading dimension ld keeps element (i, j) at
// p[i * ld + j]; op(X) = Xᵀ reads the stored matrix the other way round, so a
// transposed view costs nothing.
#include "core/blas.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>

namespace tformer::core::blas {

namespace {

// The Debian OpenBLAS uses 32-bit BLAS integers (blasint = int): larger sizes
// would wrap around silently, so they are refused here.
blasint to_blas_int(int64_t value, const char* what) {
    if (value < 0 || value > std::numeric_limits<blasint>::max())
        fail<ValueError>("blas::gemm: {} = {} is outside the range of 32-bit BLAS integers", what, value);
    return static_cast<blasint>(value);
}

// The stored matrix behind op(X) for op(X) of shape (rows, cols): Xᵀ is
// stored as (cols, rows). Its leading dimension must cover one stored row,
// and at least 1 (the BLAS rule); otherwise OpenBLAS would print an
// "illegal value" message and return without computing anything.
void check_ld(const char* name, bool trans, int64_t rows, int64_t cols, int64_t ld) {
    const int64_t stored_cols = trans ? rows : cols;
    if (ld < std::max<int64_t>(1, stored_cols))
        fail<ValueError>("blas::gemm: leading dimension {} of {} is smaller than its row length {}", ld, name,
                         std::max<int64_t>(1, stored_cols));
}

CBLAS_TRANSPOSE flag(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// the gemm log of start_gemm_log(): products may come from several threads
// (batched_gemm), so appending takes a lock, but only while recording
std::atomic<bool> g_logging{false};
std::mutex g_log_mutex;
std::vector<GemmCall> g_log;

void log_call(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, bool f64) {
    if (!g_logging.load(std::memory_order_relaxed)) return;
    const std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log.push_back({.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .f64 = f64});
}

// The checks shared by the float and double entry points. Returns false when
// C is empty, in which case BLAS has nothing to do.
bool check_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
    to_blas_int(m, "m");
    to_blas_int(n, "n");
    to_blas_int(k, "k");
    if (m == 0 || n == 0) return false;
    check_ld("A", trans_a, m, k, to_blas_int(lda, "lda"));
    check_ld("B", trans_b, k, n, to_blas_int(ldb, "ldb"));
    check_ld("C", false, m, n, to_blas_int(ldc, "ldc"));
    return true;
}

void call_blas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, flag(trans_a), flag(trans_b), static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
}

void call_blas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
    cblas_dgemm(CblasRowMajor, flag(trans_a), flag(trans_b), static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
}

// Products of at least this many multiply-adds are split over our threads.
// Below it OpenBLAS keeps a product on one thread anyway; from 64³ up it
// splits it itself, which for the d2l model's products (640x32x32 to
// 640x64x32) cost more than it saved: its 2-thread train step took 6-10 ms
// against 7.3 ms on 1 thread, and 5.6 ms with our split from 64³ on.
constexpr int64_t kSplitWork = int64_t{1} << 18;  // 64³
// Blocks are cut at multiples of this many rows or columns (a multiple of
// every OpenBLAS kernel's unrolling), and no block is narrower.
constexpr int64_t kSplitAlign = 32;

// How many blocks to cut a product into: one per thread, when the product
// is big enough, the longer side of C has room for them, and the OpenMP
// build of OpenBLAS (single-threaded inside our parallel region) is linked.
int split_parts(int64_t m, int64_t n, int64_t k) {
    const int threads = get_num_threads();
    if (threads <= 1 || omp_in_parallel() || !is_openmp_build()) return 1;
    if (m * n * k < kSplitWork) return 1;
    return static_cast<int>(std::min<int64_t>(threads, std::max(m, n) / kSplitAlign));
}

// C = alpha op(A) op(B) + beta C with C cut into `parts` blocks of whole rows
// (m >= n) or whole columns, each computed by one thread with a
// single-threaded BLAS call. On these machines this beats OpenBLAS's own
// splitting of one call (measured with 2 threads on the shapes of the
// translation model: 1140x128x128 in 184 µs against 219 µs, 8000x128x256
// (TN) in 2.87 ms against 3.21 ms), which synchronises its threads several
// times per call. Every element of C is one thread's sum over k, in the
// same order for the same thread count, so results are reproducible.
template <class T>
void split_gemm(int parts, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
    const bool by_rows = m >= n;
    const int64_t len = by_rows ? m : n;
    const int64_t units = (len + kSplitAlign - 1) / kSplitAlign;  // blocks of kSplitAlign, the last maybe shorter
    const auto bound = [&](int64_t p) { return std::min(len, units * p / parts * kSplitAlign); };
#pragma omp parallel num_threads(parts)
    {
        const int team = omp_get_num_threads();
        for (int p = omp_get_thread_num(); p < parts; p += team) {
            const int64_t first = bound(p), last = bound(p + 1);
            if (first >= last) continue;
            if (by_rows) {  // rows [first, last) of op(A) and C
                const T* a_part = trans_a ? a + first : a + first * lda;
                call_blas(trans_a, trans_b, last - first, n, k, alpha, a_part, lda, b, ldb, beta, c + first * ldc, ldc);
            } else {  // columns [first, last) of op(B) and C
                const T* b_part = trans_b ? b + first * ldb : b + first;
                call_blas(trans_a, trans_b, m, last - first, k, alpha, a, lda, b_part, ldb, beta, c + first, ldc);
            }
        }
    }
}

template <class T>
void gemm_any(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
              int64_t ldb, T beta, T* c, int64_t ldc) {
    if (!check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc)) return;
    log_call(trans_a, trans_b, m, n, k, std::is_same_v<T, double>);
    const int parts = split_parts(m, n, k);
    if (parts > 1)
        split_gemm(parts, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        call_blas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

// C = alpha * op(A) @ op(B) + beta * C in single precision.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    gemm_any(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C = alpha * op(A) @ op(B) + beta * C in double precision.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
    gemm_any(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void start_gemm_log() {
    const std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log.clear();
    g_logging.store(true);
}

std::vector<GemmCall> stop_gemm_log() {
    g_logging.store(false);
    const std::lock_guard<std::mutex> lock(g_log_mutex);
    return std::move(g_log);
}

std::string core_name() {
    const char* name = openblas_get_corename();
    return name != nullptr ? name : "unknown";
}

std::string config() {
    const char* text = openblas_get_config();
    return text != nullptr ? text : "unknown";
}

bool is_openmp_build() { return openblas_get_parallel() == OPENBLAS_OPENMP; }

}  // namespace tformer::core::blas
