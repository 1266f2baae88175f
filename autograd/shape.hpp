// Differentiable shape ops. Views stay views (no copy in forward); the
// backward of each puts the gradient back into the input's layout.
#pragma once

#include "autograd/variable.hpp"

#include <vector>

namespace tformer::autograd {

Variable reshape(const Variable& x, const core::Shape& shape);
Variable permute(const Variable& x, const core::Dims& dims);
Variable transpose(const Variable& x, int64_t dim0, int64_t dim1);
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Variable select(const Variable& x, int64_t dim, int64_t index);
Variable expand(const Variable& x, const core::Shape& shape);
Variable squeeze(const Variable& x, int64_t dim);
Variable unsqueeze(const Variable& x, int64_t dim);
/// A contiguous copy when needed (identity for the gradient).
Variable contiguous(const Variable& x);
Variable concat(const std::vector<Variable>& xs, int64_t dim);
Variable stack(const std::vector<Variable>& xs, int64_t dim);
std::vector<Variable> split(const Variable& x, int64_t split_size, int64_t dim);

}  // namespace tformer::autograd
