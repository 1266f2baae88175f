/// \file
/// Indexing and joining: lookups by integer indices, scatter-add (the
/// gradient of a lookup), and concatenation / stacking / splitting.
/// Index tensors are int64 (anything else is a ValueError); every index is
/// checked against its dimension before any data moves (IndexError), and
/// negative indices are out of range. Inputs may have any layout; outputs are
/// fresh row-major tensors, except split, which returns views.
#pragma once

#include "core/tensor.hpp"

#include <vector>

namespace tformer::core {

/// Rows (or slices) of x picked along `dim` by a 1-D int64 index, any dtype:
/// out.shape = x.shape with shape[dim] = index.numel(); entries may repeat.
/// "index_select: index 57 out of range for dimension 0 of size 40".
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// Embedding lookup: weight (V, D), ids int64 of any shape -> (*ids.shape, D).
/// Each row is one memcpy when weight's rows are contiguous.
/// "embedding: token id 57 out of range for vocabulary of 40".
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// Seed 000's input layer in one pass, dropout(embedding(ids) · scale + pos):
///   out[b, t, :] = (weight[ids[b, t], :] · scale + pos[t, :]) ⊙ keep[b, t, :]
/// weight (V, D) float, ids (B, T) int64, pos (T, D) of weight's dtype (the
/// positional encoding's rows for these steps), keep (B, T, D) the dropout
/// mask with its 1/(1-p) scale, or undefined for none. Rounds exactly as
/// embedding, mul, add and mul one after the other. Throws IndexError for an
/// id outside [0, V), ShapeError naming the shapes that do not fit.
Tensor embedding_positional(const Tensor& weight, const Tensor& ids, double scale, const Tensor& pos,
                            const Tensor& keep);
/// Gradient of embedding: a (V, D) tensor whose row v is the sum of
/// grad rows at positions where ids == v; rows at padding_idx stay zero
/// (pass -1 for no padding index). grad is float32/float64 of shape
/// (*ids.shape, D); the sum runs serially in position order (deterministic).
Tensor embedding_backward(const Tensor& grad, const Tensor& ids, int64_t num_embeddings, int64_t padding_idx);
/// out[i][j] = x[index[i][j]][j] for dim 0 (likewise for other dims);
/// index has x's number of dimensions, is no larger than x except along dim,
/// and out has index's shape (any dtype).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of x with src added at the positions index names along dim
/// (the adjoint of gather): out[index[i][j]][j] += src[i][j] for dim 0.
/// float32, float64 or int64; src has x's dtype and is no smaller than index.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

/// Joins tensors along an existing dimension; other sizes and the dtype must match.
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);
/// Joins equally shaped tensors of one dtype along a new dimension `dim` in [-ndim-1, ndim].
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
/// Views of consecutive pieces of size split_size along dim (the last may be
/// smaller; a dimension of size 0 gives one empty piece).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
/// Views of pieces with the given sizes along dim; sizes must add up to x.size(dim).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);

/// Plain-loop oracles (element by element through at/set; no input checks).
namespace reference {
/// index_select, one element at a time.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// gather, one element at a time.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// scatter_add, one element at a time.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
}  // namespace reference

}  // namespace tformer::core
