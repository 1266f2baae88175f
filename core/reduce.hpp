/// \file
/// Reductions over one or more dimensions (or all of them).
///
/// `dims` may hold negative dimensions; an empty `dims` means all dimensions;
/// naming a dimension twice is a ValueError, one out of range an IndexError.
/// With keepdim the reduced dimensions stay as size 1 (handy for
/// broadcasting the result back). The result is always a new contiguous
/// tensor (sum_to_shape's identity case aside). Floating dtypes only
/// (argmax also takes int64); anything else is a ValueError naming the op.
///
/// Precision: every accumulator is a double, also for float32 input, so a
/// float32 sum of a million elements is as exact as float32 can store it
/// (the only rounding is the final one to float). Results do not depend on
/// the thread count: each output is always folded in the same order.
///
/// Empty reductions: sum gives 0, mean and var give NaN (0/0, as PyTorch),
/// max, min and argmax throw ValueError naming the op and the shape.
#pragma once

#include "core/tensor.hpp"

#include <array>

namespace tformer::core {

/// Σ over dims.
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim = false);
/// Σ over every element, as a 0-d tensor.
Tensor sum(const Tensor& x);
/// Σ/n over dims (over all elements when dims is empty).
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim = false);
/// Σ/n over every element, as a 0-d tensor.
Tensor mean(const Tensor& x);
/// Largest value over dims; a NaN anywhere in a slice makes that result NaN.
Tensor max(const Tensor& x, const Dims& dims, bool keepdim = false);
/// Largest element, as a 0-d tensor.
Tensor max(const Tensor& x);
/// Smallest value over dims; a NaN anywhere in a slice makes that result NaN.
Tensor min(const Tensor& x, const Dims& dims, bool keepdim = false);
/// Smallest element, as a 0-d tensor.
Tensor min(const Tensor& x);
/// Index (int64) of the largest value along one dimension; the first one on
/// ties, and the first NaN if there is one (NaN counts as largest, as in
/// PyTorch). Accepts float32, float64 and int64.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Variance over dims: Σ(x - mean)² / (n - 1) when unbiased (Bessel's
/// correction), Σ(x - mean)² / n otherwise. Two passes (mean, then squared
/// deviations), which stays accurate where E[x²] - E[x]² would cancel.
/// n - 1 == 0 (or n == 0) gives NaN, as in PyTorch.
Tensor var(const Tensor& x, const Dims& dims, bool unbiased, bool keepdim = false);

/// Sums a broadcast result back down to `shape` (the shape one input had
/// before broadcasting): leading extra dimensions are summed away and
/// dimensions where `shape` has size 1 are summed with keepdim. This is how
/// a broadcasting op sends its gradient back to each input.
/// When `shape` already equals x's shape, x itself is returned (no copy,
/// same storage); otherwise the result is a new contiguous tensor.
/// Throws ShapeError when `shape` does not broadcast to x's shape.
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

// ---- helpers shared with autograd (e.g. sum's backward) -------------------------

/// mask[d] is true for each dimension d that a reduction over `dims` folds.
using DimMask = std::array<bool, kMaxDims>;

/// The dimensions `dims` names in a tensor with `ndim` dimensions (all of
/// them when `dims` is empty). Throws IndexError for a dimension out of
/// range and ValueError for a repeated one, naming `op`. A 0-d tensor
/// accepts dimension 0 or -1, as in PyTorch, and folds nothing.
DimMask reduction_mask(int ndim, const Dims& dims, const char* op);

/// `shape` with the masked dimensions set to 1 (keepdim) or removed.
Shape reduced_shape(const Shape& shape, const DimMask& mask, bool keepdim);

/// Plain-loop oracles for the tests: one element at a time, in row-major
/// order, accumulated in double.
namespace reference {
/// sum, one element at a time.
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim);
/// mean, one element at a time.
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim);
/// max, one element at a time.
Tensor max(const Tensor& x, const Dims& dims, bool keepdim);
/// min, one element at a time.
Tensor min(const Tensor& x, const Dims& dims, bool keepdim);
/// argmax, one element at a time.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim);
/// var, one element at a time (two passes, as var).
Tensor var(const Tensor& x, const Dims& dims, bool unbiased, bool keepdim);
}  // namespace reference

}  // namespace tformer::core
