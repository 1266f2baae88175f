/// \file
/// The one doorway to BLAS: every call into OpenBLAS and libxsmm is in core/blas.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
/// The calls into BLAS (OpenBLAS, libxsmm), and the log of products the benchmark reads.

namespace tformer::core::blas {

/// C = alpha * op(A) @ op(B) + beta * C for row-major matrices with leading
/// dimensions lda, ldb, ldc (op = transpose when trans_* is true). Float
/// products with a right operand of at most 2^20 numbers (2^18 with op(A) =
/// Aᵀ) and n at least 32 run on libxsmm's kernels, which give a row of C
/// the same bits whatever the number of rows or threads; the rest run on
/// OpenBLAS, whose rows' bits may change with the number of rows.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// The same in double precision (cblas_dgemm), for gradient checks.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

/// C (m, n) = op(A) op(B) + the row `bias` (n) in every row, when the
/// product runs on libxsmm (see gemm): each tile of C gets the bias just
/// before its kernel adds the product, so C is written once, by the thread
/// that owns the tile; the same bits as filling C with the bias and calling
/// gemm with beta 1. Returns false, with nothing written, when the product
/// would not run on libxsmm (the caller then fills C and calls gemm).
bool gemm_bias_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, const float* bias, float* c, int64_t ldc);

/// One product as gemm was called: C (m, n) = op(A) (m, k) @ op(B) (k, n).
struct GemmCall {
    /// True when A was used transposed (op(A) = Aᵀ).
    bool trans_a = false, trans_b = false;  ///< True when B was used transposed (op(B) = Bᵀ).
    /// The sizes: C is (m, n), op(A) is (m, k), op(B) is (k, n).
    /// @{
    int64_t m = 0, n = 0, k = 0;
    /// @}
    bool f64 = false;  ///< dgemm rather than sgemm
    /// The product's floating-point operations, 2·m·n·k (one multiply and one add per term).
    double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};
/// Starts recording every gemm call (from any thread) into a fresh log, for
/// the benchmark's GFLOP/s; when off, a call pays one relaxed atomic load.
void start_gemm_log();
/// Stops recording and returns the calls made since start_gemm_log().
std::vector<GemmCall> stop_gemm_log();

/// The OpenBLAS kernel set in use (openblas_get_corename), e.g. "Haswell".
std::string core_name();
/// The instruction set libxsmm generates its kernels for (libxsmm_get_target_arch:
/// "cpx", "clx", "skx" are AVX-512), or "off" when every product goes to
/// OpenBLAS: TFORMER_LIBXSMM=0, or libxsmm's kernels would not be wider than
/// OpenBLAS's (OpenBLAS on its AVX-512 kernels, or a CPU without AVX-512).
/// gemm hands libxsmm the float products it runs faster (small right
/// operands, see core/blas.cpp).
std::string xsmm_target();
/// The OpenBLAS build configuration (openblas_get_config).
std::string config();
/// True when the linked OpenBLAS is its OpenMP build (openblas_get_parallel),
/// which runs single-threaded when called inside an OpenMP parallel region,
/// so batches of small products may be spread over our threads. The pthread
/// build must not be called from a parallel region (it warns and can hang).
bool is_openmp_build();

}  // namespace tformer::core::blas
