// Reductions over one or more dimensions (or all of them).
//
// `dims` may hold negative dimensions; an empty `dims` means all dimensions.
// With keepdim the reduced dimensions stay as size 1 (handy for
// broadcasting the result back). Floating dtypes only, accumulated in the
// input's precision with pairwise-friendly blocking.
#pragma once

#include "core/tensor.hpp"

namespace tformer::core {

/// Σ over dims.
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim = false);
/// Σ over every element, as a 0-d tensor.
Tensor sum(const Tensor& x);
/// Mean over dims (over all elements when dims is empty).
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
/// Largest value over dims (NaN propagates).
Tensor max(const Tensor& x, const Dims& dims, bool keepdim = false);
Tensor max(const Tensor& x);
/// Smallest value over dims.
Tensor min(const Tensor& x, const Dims& dims, bool keepdim = false);
/// Index (int64) of the largest value along one dimension; the first one on ties.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Variance over dims; unbiased divides by n - 1 (Bessel), otherwise by n.
Tensor var(const Tensor& x, const Dims& dims, bool unbiased, bool keepdim = false);

/// Sums a broadcast result back down to `shape` (the shape one input had
/// before broadcasting): leading extra dimensions are summed away and
/// dimensions where `shape` has size 1 are summed with keepdim. This is how
/// a broadcasting op sends its gradient back to each input.
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

/// Plain-loop oracles for the tests.
namespace reference {
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim);
Tensor max(const Tensor& x, const Dims& dims, bool keepdim);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim);
Tensor var(const Tensor& x, const Dims& dims, bool unbiased, bool keepdim);
}  // namespace reference

}  // namespace tformer::core
