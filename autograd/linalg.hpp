/// \file
/// Differentiable matrix products.
#pragma once

#include "autograd/variable.hpp"

namespace tformer::autograd {

/// a @ b with broadcast batch dims (see core::matmul): (..., n, k) @ (..., k, m)
/// -> (batch..., n, m); a 1-D a is a row vector, a 1-D b a column vector.
/// Backward: da = dy @ bᵀ, db = aᵀ @ dy, each summed over the batch dims its
/// operand was broadcast along; the transposes are views (BLAS flags, no copies).
Variable matmul(const Variable& a, const Variable& b);

/// y = x @ weightᵀ + bias (nn::Linear): x (..., in), weight (out, in) as in
/// PyTorch, bias (out) or an undefined Variable; y (..., out).
/// Backward: dx = dy @ weight, dweight = dyᵀ @ x over all rows, dbias = Σ_rows dy.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);

/// y = max(x @ weightᵀ + bias, 0): the first layer of seed 000's
/// PositionWiseFFN, dense1 then ReLU, as one op (one node, no separate
/// pre-activation tensor). Equals relu(linear(x, weight, bias)) bit for bit.
/// Backward: dz = dy ⊙ [y > 0], then linear's backward with dz.
Variable linear_relu(const Variable& x, const Variable& weight, const Variable& bias);

}  // namespace tformer::autograd
