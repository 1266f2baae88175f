// Differentiable reductions.
#pragma once

#include "autograd/variable.hpp"

namespace tformer::autograd {

/// Σ over dims (all when dims is empty); the gradient broadcasts back.
Variable sum(const Variable& x, const core::Dims& dims, bool keepdim = false);
Variable sum(const Variable& x);
Variable mean(const Variable& x, const core::Dims& dims, bool keepdim = false);
Variable mean(const Variable& x);
/// Max over dims; the gradient goes to the maximal elements, split evenly
/// between ties (PyTorch's amax rule).
Variable max(const Variable& x, const core::Dims& dims, bool keepdim = false);
Variable max(const Variable& x);
/// Variance over dims (unbiased: ÷(n-1)).
Variable var(const Variable& x, const core::Dims& dims, bool unbiased, bool keepdim = false);

}  // namespace tformer::autograd
