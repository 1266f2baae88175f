// Indexing and joining: lookups by integer indices, scatter-add (the
// gradient of a lookup), and concatenation / stacking / splitting.
// Index tensors are int64; every index is checked against its dimension.
#pragma once

#include "core/tensor.hpp"

#include <vector>

namespace tformer::core {

/// Rows (or slices) of x picked along `dim` by a 1-D int64 index:
/// out.shape = x.shape with shape[dim] = index.numel().
/// "index_select: index 57 out of range for dimension 0 of size 40".
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// Embedding lookup: weight (V, D), ids int64 of any shape -> (*ids.shape, D).
/// "embedding: token id 57 out of range for vocabulary of 40".
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// Gradient of embedding: a (V, D) tensor whose row v is the sum of
/// grad rows at positions where ids == v; rows at padding_idx stay zero
/// (pass -1 for no padding index).
Tensor embedding_backward(const Tensor& grad, const Tensor& ids, int64_t num_embeddings, int64_t padding_idx);
/// out[i][j] = x[index[i][j]][j] for dim 0 (likewise for other dims);
/// index has x's number of dimensions and out has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of x with src added at the positions index names along dim
/// (the adjoint of gather): out[index[i][j]][j] += src[i][j] for dim 0.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

/// Joins tensors along an existing dimension; other sizes must match.
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);
/// Joins equally shaped tensors along a new dimension.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
/// Views of consecutive pieces of size split_size along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
/// Views of pieces with the given sizes along dim; sizes must add up to x.size(dim).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);

/// Plain-loop oracles.
namespace reference {
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
}  // namespace reference

}  // namespace tformer::core
