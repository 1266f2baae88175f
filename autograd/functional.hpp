/// \file
/// Differentiable building blocks of a Transformer: softmax, masked softmax,
/// layer norm, embedding lookup and cross-entropy.
///
/// Softmax, log_softmax, layer norm and cross-entropy exist twice. The
/// versions in this namespace call fused core kernels (one pass, one node):
/// the fast ones the layers use. The versions in namespace `composed` are
/// written with primitive ops (exp, sum, div, ...): the readable ones the
/// tutorials show. Tests check that both give the same values and gradients.
#pragma once

#include "autograd/variable.hpp"

namespace tformer::autograd {

/// softmax along the last dim: exp(x - max) / Σ exp(x - max). x (..., D).
/// A row that is entirely -inf gives zeros (see core::softmax).
Variable softmax(const Variable& x);
/// log_softmax along the last dim: x - max - log Σ exp(x - max). x (..., D).
Variable log_softmax(const Variable& x);
/// Softmax of x (..., T, S) over the first valid_lens entries of each row,
/// exactly 0 after them (seed 003); valid_lens is (B) or x.shape[:-1], a
/// constant (no gradient). See core::masked_softmax.
Variable masked_softmax(const Variable& x, const core::Tensor& valid_lens);
/// Softmax where the bool mask keep (broadcast to x) is true, exactly 0
/// elsewhere (seed 002's pad and no-peek masks). See core::masked_softmax_by_mask.
Variable masked_softmax_by_mask(const Variable& x, const core::Tensor& keep);

/// PyTorch LayerNorm over the last dim: (x - mean) / √(var + eps) * weight + bias,
/// with the biased variance (÷D). x (..., D); weight and bias (D) may be
/// undefined Variables (then 1 and 0).
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps);

/// Seed 000's AddNorm, ln(dropout(y) + x), as one op (core::add_layer_norm):
/// layer_norm(x + y ⊙ keep, weight, bias, eps) with keep the dropout mask
/// with its 1/(1-p) scale (undefined: no dropout). x and y (..., D) of one
/// shape, weight and bias (D) or undefined. Equals add(dropout(y), x)
/// followed by layer_norm, bit for bit, with one node instead of three.
Variable add_layer_norm(const Variable& x, const Variable& y, const core::Tensor& keep, const Variable& weight,
                        const Variable& bias, double eps);

/// Seed 000's multi-head attention between the projections, fused (see
/// core/attention.hpp): q (B, T, D), k and v (B, S, D) are split into
/// num_heads heads of D/H columns, each head attends with scaled dot
/// products, masked to valid_lens ((B) or (B, T), int64, or undefined), and
/// the heads' outputs come back side by side: out (B, T, D). It equals
/// transpose_output(attention(transpose_qkv(q), transpose_qkv(k),
/// transpose_qkv(v), valid_lens repeated per head)). `keep` (B, H, T, S) is
/// the attention dropout's mask with its 1/(1-p) scale, or undefined for none.
/// `weights` receives the attention weights P (B, H, T, S), before dropout,
/// for heatmaps.
Variable multi_head_attention(const Variable& q, const Variable& k, const Variable& v, int64_t num_heads,
                              const core::Tensor& valid_lens, const core::Tensor& keep,
                              core::Tensor* weights = nullptr);

/// The output layer and its loss in one (core/output_loss.hpp): Σ_n w_n ℓ_n
/// where ℓ_n is the label-smoothed cross-entropy of logits x_n Wᵀ + b
/// against targets[n], for x (N, D), W (V, D), b (V) or undefined, targets
/// (N) int64 and row weights (N) (0 for padding; 1/tokens gives the token
/// mean). Equals sum(weights · cross_entropy(linear(x, W, b), targets,
/// none)) without storing the (N, V) logits. The gradients are computed in
/// the forward pass, chunk by chunk while the logits are in cache, and scaled
/// by the incoming gradient in backward.
Variable linear_cross_entropy(const Variable& x, const Variable& W, const Variable& b, const core::Tensor& targets,
                              const core::Tensor& weights, double label_smoothing = 0.0);

/// Rows of weight (V, D) picked by int64 ids of any shape (*) -> (*, D). The
/// ids are a constant. No gradient reaches row padding_idx (-1: none), so the
/// padding vector stays fixed in training, as in PyTorch; the forward value
/// of that row is still looked up as stored. Throws IndexError for an id or a
/// padding_idx outside [0, V).
Variable embedding(const Variable& weight, const core::Tensor& ids, int64_t padding_idx = -1);

/// Seed 000's input layer as one op (core::embedding_positional):
/// dropout(embedding(weight, ids) · scale + pos) with pos (T, D) the
/// positional encoding's rows for these steps (a constant) and keep
/// (B, T, D) dropout's mask with its 1/(1-p) scale, or undefined. ids (B, T).
/// Equals embedding, mul, add and dropout one after the other, bit for bit,
/// with one node instead of four; the padding_idx row gets no gradient.
Variable embedding_positional(const Variable& weight, const core::Tensor& ids, double scale, const core::Tensor& pos,
                              const core::Tensor& keep, int64_t padding_idx = -1);

/// How cross_entropy combines the per-target losses.
enum class Reduction {
    none,  ///< one loss per target, shape of the targets
    mean,  ///< Σ loss / (number of targets that are not ignore_index), as PyTorch
    sum,   ///< Σ loss
};

/// The options of cross_entropy, with PyTorch's defaults.
struct CrossEntropyOptions {
    int64_t ignore_index = -100;            ///< targets equal to this contribute nothing (loss 0, gradient 0)
    double label_smoothing = 0.0;           ///< ε in [0, 1]: target distribution (1-ε)·onehot + ε/V
    Reduction reduction = Reduction::mean;  ///< see Reduction
};

/// Cross-entropy of logits (..., V) against int64 targets (...) of the same
/// leading shape: loss = -Σ_v q_v log softmax(logits)_v per target, then
/// reduced. With Reduction::mean and every target ignored, the loss is 0
/// (PyTorch gives NaN, 0/0): a batch made only of padding adds nothing.
/// Throws ShapeError when the shapes do not match, IndexError for a target
/// outside [0, V) other than ignore_index, ValueError for ε outside [0, 1].
Variable cross_entropy(const Variable& logits, const core::Tensor& targets, const CrossEntropyOptions& options = {});

/// The same functions written with primitive ops (exp, log, sum, max, mean,
/// var, +, -, *, /), as the tutorials show them: one graph node per step.
/// Same arguments, values and gradients as the fused versions (up to
/// rounding), except that a row that is entirely -inf gives NaN here.
namespace composed {
/// exp(x - max) / Σ exp(x - max), out of primitive ops.
Variable softmax(const Variable& x);
/// x - max - log Σ exp(x - max), out of primitive ops.
Variable log_softmax(const Variable& x);
/// (x - mean) / sqrt(var + eps) * weight + bias, out of primitive ops.
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps);
/// -Σ q log_softmax(logits), out of primitive ops.
Variable cross_entropy(const Variable& logits, const core::Tensor& targets, const CrossEntropyOptions& options = {});
}  // namespace composed

}  // namespace tformer::autograd
