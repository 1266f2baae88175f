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

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
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
bool check_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                int64_t ldc) {
    to_blas_int(m, "m");
    to_blas_int(n, "n");
    to_blas_int(k, "k");
    if (m == 0 || n == 0) return false;
    check_ld("A", trans_a, m, k, to_blas_int(lda, "lda"));
    check_ld("B", trans_b, k, n, to_blas_int(ldb, "ldb"));
    check_ld("C", false, m, n, to_blas_int(ldc, "ldc"));
    return true;
}

}  // namespace

// C = alpha * op(A) @ op(B) + beta * C in single precision.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    if (!check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc)) return;
    log_call(trans_a, trans_b, m, n, k, false);
    cblas_sgemm(CblasRowMajor, flag(trans_a), flag(trans_b), static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
}

// C = alpha * op(A) @ op(B) + beta * C in double precision.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
    if (!check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc)) return;
    log_call(trans_a, trans_b, m, n, k, true);
    cblas_dgemm(CblasRowMajor, flag(trans_a), flag(trans_b), static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
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
