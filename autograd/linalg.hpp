// Differentiable matrix products.
#pragma once

#include "autograd/variable.hpp"

namespace tformer::autograd {

/// a @ b with broadcast batch dims (see core::matmul).
/// Backward: da = dy @ bᵀ, db = aᵀ @ dy, each summed over broadcast batch dims.
Variable matmul(const Variable& a, const Variable& b);

/// y = x @ weightᵀ + bias (nn::Linear); bias may be undefined.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);

}  // namespace tformer::autograd
