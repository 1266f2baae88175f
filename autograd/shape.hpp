/// \file
/// Differentiable shape ops. Views stay views (no copy in forward); the
/// backward of each puts the gradient back into the input's layout.
#pragma once

#include "autograd/variable.hpp"

#include <vector>

namespace tformer::autograd {

/// x viewed as `shape` (one size may be -1; a copy when the strides do not allow a view); dx = dy reshaped back.
Variable reshape(const Variable& x, const core::Shape& shape);
/// Dimensions reordered: y's dim i is x's dim dims[i]; dx = dy permuted back.
Variable permute(const Variable& x, const core::Dims& dims);
/// Dimensions dim0 and dim1 swapped (a view); dx = dy swapped back.
Variable transpose(const Variable& x, int64_t dim0, int64_t dim1);
/// x[start:end:step] along dim (a view); dx is dy in that slice, zero elsewhere.
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// x[index] along dim, which is removed (a view); dx is dy at that index, zero elsewhere.
Variable select(const Variable& x, int64_t dim, int64_t index);
/// x broadcast to `shape` (stride 0, no copy); dx sums dy over the repeated dims.
Variable expand(const Variable& x, const core::Shape& shape);
/// x without its size-1 dimension dim; dx = dy with it put back.
Variable squeeze(const Variable& x, int64_t dim);
/// x with a new size-1 dimension at dim; dx = dy without it.
Variable unsqueeze(const Variable& x, int64_t dim);
/// A contiguous copy when needed (identity for the gradient).
Variable contiguous(const Variable& x);
/// [x0 | x1 | ...] along dim; each input gets its piece of dy.
Variable concat(const std::vector<Variable>& xs, int64_t dim);
/// The inputs (all one shape) along a new dimension dim; each gets its slice of dy.
Variable stack(const std::vector<Variable>& xs, int64_t dim);
/// Pieces of split_size along dim (the last may be shorter); each piece's gradient goes back to its place.
std::vector<Variable> split(const Variable& x, int64_t split_size, int64_t dim);

}  // namespace tformer::autograd
