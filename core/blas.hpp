// The one doorway to BLAS: every call into OpenBLAS is in core/blas.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace tformer::core::blas {

/// C = alpha * op(A) @ op(B) + beta * C for row-major matrices with leading
/// dimensions lda, ldb, ldc (op = transpose when trans_* is true).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

/// The OpenBLAS kernel set in use (openblas_get_corename), e.g. "Haswell".
std::string core_name();
/// The OpenBLAS build configuration (openblas_get_config).
std::string config();
/// True when the linked OpenBLAS is its OpenMP build (openblas_get_parallel),
/// which runs single-threaded when called inside an OpenMP parallel region,
/// so batches of small products may be spread over our threads. The pthread
/// build must not be called from a parallel region (it warns and can hang).
bool is_openmp_build();

}  // namespace tformer::core::blas
