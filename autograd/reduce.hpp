/// \file
/// Differentiable reductions.
#pragma once

#include "autograd/variable.hpp"

namespace tformer::autograd {

/// Σ over dims (all when dims is empty); the gradient broadcasts back.
Variable sum(const Variable& x, const core::Dims& dims, bool keepdim = false);
/// Σ over every element, a 0-d Variable (a loss).
Variable sum(const Variable& x);
/// Σ/n over dims (all when dims is empty); dx = dy / n broadcast back.
Variable mean(const Variable& x, const core::Dims& dims, bool keepdim = false);
/// Σ/n over every element, a 0-d Variable.
Variable mean(const Variable& x);
/// Max over dims; the gradient goes to the maximal elements, split evenly
/// between ties (PyTorch's amax rule).
Variable max(const Variable& x, const core::Dims& dims, bool keepdim = false);
/// The largest element, a 0-d Variable; the gradient goes to it (split evenly between ties).
Variable max(const Variable& x);
/// Variance over dims (unbiased: ÷(n-1)).
Variable var(const Variable& x, const core::Dims& dims, bool unbiased, bool keepdim = false);

}  // namespace tformer::autograd
