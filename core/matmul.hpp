/// \file
/// Matrix products. Every product, batched or not, is one or more GEMM calls
/// into OpenBLAS (core/blas.cpp holds every BLAS call). A transposed view
/// (last two strides swapped) is passed as a transpose flag, not copied.
#pragma once

#include "core/tensor.hpp"

namespace tformer::core {

/// a @ b. 2-D: (n, k) @ (k, m) -> (n, m). N-D: the last two dimensions
/// multiply and the leading (batch) dimensions broadcast, as in NumPy:
/// (B, 1, n, k) @ (H, k, m) -> (B, H, n, m). A 1-D operand is treated as a
/// row (left) or column (right) vector and that dimension is dropped.
/// Throws ShapeError: "matmul: shapes (2x3) and (4x5) cannot be multiplied".
Tensor matmul(const Tensor& a, const Tensor& b);

/// y = x @ weightᵀ + bias, the affine map of nn::Linear with PyTorch's
/// (out_features, in_features) weight layout. x is (..., in), weight
/// (out, in), bias (out) or undefined; the bias is written into the output
/// first and GEMM accumulates onto it (beta = 1), so no extra pass.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

/// Plain triple loop, the oracle for the tests.
namespace reference {
/// matmul by the textbook triple loop.
Tensor matmul(const Tensor& a, const Tensor& b);
}  // namespace reference

}  // namespace tformer::core
