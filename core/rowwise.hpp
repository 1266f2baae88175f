/// \file
/// Row-wise kernels: each works along the last dimension, one row at a time,
/// numerically stable, OpenMP across rows for large inputs. These are the
/// fused, fast versions; autograd also builds softmax and layer norm out of
/// primitives (the readable versions) and the tests show both agree.
///
/// Common rules for every function here:
///  - x may have any strides (a transposed or sliced view is copied to a
///    contiguous buffer first); x's dtype is float32 or float64, and every
///    floating operand must have the same dtype (ValueError otherwise).
///  - The result is a new contiguous tensor with x's shape (or x.shape[:-1]
///    for per-row statistics and losses). x must have at least 1 dimension.
///  - Rows are split across threads, but each row is computed by one thread
///    in a fixed order, so 1 and N threads give bit-identical results.
///  - Sums are accumulated in double, also for float32 rows.
///
/// Dimension letters: R rows (all leading dims together), L row length,
/// B batch, T query steps, S key steps, D hidden, N rows of logits, V classes.
#pragma once

#include "core/tensor.hpp"

namespace tformer::core {

// ---- softmax ---------------------------------------------------------------------

/// softmax(x)_i = exp(x_i - max x) / Σ_j exp(x_j - max x), along the last dim.
/// Subtracting the row max keeps exp() ≤ 1, so ±1e4 inputs stay finite.
/// A row that is entirely -inf has no probability mass anywhere: its result
/// is all zeros (PyTorch gives NaN there). A NaN anywhere in a row, or a +inf,
/// makes that row NaN.
Tensor softmax(const Tensor& x);
/// log_softmax(x)_i = x_i - max x - log Σ_j exp(x_j - max x). The log is of a
/// sum ≥ 1, so log(0) never happens. An all -inf row gives all -inf (the log
/// of softmax's zeros); a -inf entry gives -inf.
Tensor log_softmax(const Tensor& x);
/// Greedy decoding's pick: per row of x (..., V), the index of its largest
/// entry (as argmax(x, -1): the first of equals; a NaN counts as largest) and
/// log_softmax(x) at that index, the same value bit for bit, without writing
/// the other V - 1 log-probabilities. ids: int64 (...), log_probs: x's dtype (...).
struct ArgmaxLogSoftmax {
    /// The index of each row's largest logit, int64 (...).
    Tensor ids, log_probs;  ///< log_softmax at that index, x's dtype (...).
};
/// The argmax and its log-probability for each row of x (..., V); see ArgmaxLogSoftmax.
ArgmaxLogSoftmax argmax_log_softmax(const Tensor& x);
/// Beam search's pick: per row of x (..., V), the k largest entries of
/// log_softmax(x), the same values bit for bit, largest first and of equal
/// values the lower index first, without writing the other V - k. A row
/// holding a NaN or +inf has NaN log-probabilities throughout (as
/// log_softmax's) and gives its first k indices. ids: int64 (..., k),
/// log_probs: x's dtype (..., k). ValueError unless 1 <= k <= V.
ArgmaxLogSoftmax top_k_log_softmax(const Tensor& x, int64_t k);
/// Backward of y = softmax(x): dx = y ⊙ (dy - Σ_j dy_j y_j). Also the backward
/// of both masked softmaxes: masked entries have y = 0, so their dx is 0.
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y);
/// Backward of y = log_softmax(x): dx = dy - exp(y) Σ_j dy_j.
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y);

// ---- masked softmax (seed 003, 掩蔽softmax操作) -----------------------------------

/// Softmax over the last dim of x (..., T, S) where only the first
/// valid_lens entries of each row count (seed 003, section on masked
/// softmax). valid_lens (int64, or float holding whole numbers) is either
///  - shape x.shape[:-1], one length per row (e.g. (B, T) for x (B, T, S)), or
///  - 1-D of length x.shape[0], one length per batch element, used for every
///    row of that element (d2l's torch.repeat_interleave).
/// An undefined valid_lens means no masking (plain softmax), as in d2l.
/// Entries at positions ≥ the valid length are exactly 0. A row with valid
/// length 0 is all zeros: d2l fills masked scores with -1e6 and so gives such
/// a row a uniform distribution over the padding; we give it no attention at
/// all, so padding never leaks into the attention output.
/// Throws ValueError for a length < 0, > S or not a whole number, and
/// ShapeError (naming both shapes) when valid_lens fits neither form.
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens);
/// Softmax where the bool mask keep (broadcast to x) is true; other entries
/// are exactly 0 (seed 002's pad mask (B, 1, 1, S) and no-peek mask (T, T)).
/// A fully masked row is all zeros, as in masked_softmax. Throws ValueError
/// when keep is not bool and ShapeError when it does not broadcast to x.
Tensor masked_softmax_by_mask(const Tensor& x, const Tensor& keep);

// ---- layer norm (seed 000, 层归一化) ---------------------------------------------------

/// y = (x - mean) * rstd * weight + bias along the last dim, with
/// rstd = 1/√(var + eps) and the biased variance (PyTorch's LayerNorm),
/// computed in two passes in double. weight and bias (D) may be undefined
/// (then 1 and 0). mean and rstd have shape x.shape[:-1] and x's dtype; they
/// are what layer_norm_backward needs. Throws ValueError for eps < 0 or an
/// empty last dim, ShapeError when weight or bias is not (D).
struct LayerNormOut {
    Tensor y;     ///< (..., D)
    Tensor mean;  ///< (...)
    Tensor rstd;  ///< (...)
};
/// Layer norm of x (..., D) along the last dim; see LayerNormOut for the formula and what it returns.
LayerNormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
/// Seed 000's AddNorm, ln(dropout(Y) + X), in one pass per row: s = x + y ⊙ keep,
/// then layer_norm(s). keep (..., D) is the dropout mask with its 1/(1-p)
/// scale, or undefined for none; x, y and keep share one shape and dtype.
/// Rounds exactly as mul, add and layer_norm one after the other. sum is s,
/// which layer_norm_backward needs (as its x); then dx = ds and dy = ds ⊙ keep.
struct AddLayerNormOut {
    Tensor y;     ///< (..., D)
    Tensor sum;   ///< s (..., D)
    Tensor mean;  ///< (...)
    Tensor rstd;  ///< (...)
};
/// AddNorm's ln(x + y ⊙ keep) in one pass; see AddLayerNormOut.
AddLayerNormOut add_layer_norm(const Tensor& x, const Tensor& y, const Tensor& keep, const Tensor& weight,
                               const Tensor& bias, double eps);
/// Gradients of layer_norm given dy and the saved x, mean, rstd:
///   dx = rstd ⊙ (g - mean(g) - x̂ ⊙ mean(g ⊙ x̂)),  g = dy ⊙ weight,
///   dweight = Σ_rows dy ⊙ x̂,  dbias = Σ_rows dy.
/// dweight is undefined when weight is, dbias when has_bias is false.
struct LayerNormGrads {
    Tensor dx;       ///< (..., D)
    Tensor dweight;  ///< (D)
    Tensor dbias;    ///< (D)
};
/// The gradients of layer_norm; see LayerNormGrads for the formulas.
LayerNormGrads layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, bool has_bias);

// ---- cross-entropy ----------------------------------------------------------------------------

/// Per-row cross-entropy of logits (N, V) against int64 targets (N):
/// loss_n = -Σ_v q_v log p_v with p = softmax(logits_n) and q the one-hot
/// target smoothed by label_smoothing ε (q = (1-ε) onehot + ε/V, PyTorch's
/// definition). Rows whose target equals ignore_index get loss 0. Computed
/// through log_softmax, so log(0) never appears. Targets outside [0, V)
/// (other than ignore_index) throw IndexError
/// "cross_entropy: target 57 out of range for 40 classes"; ε outside [0, 1]
/// throws ValueError.
///
/// With row_stats, also writes the two numbers per row the backward needs
/// to turn the logits into softmax(logits) in one pass: (N, 2) float64, the
/// row's max m and Σ_v exp(x_v - m) (both 0 for an ignored row).
Tensor cross_entropy_rows(const Tensor& logits, const Tensor& targets, double label_smoothing, int64_t ignore_index,
                          Tensor* row_stats = nullptr);
/// d loss_n / d logits = grad_rows_n (softmax(logits_n) - q_n), and 0 for
/// ignored rows; grad_rows (N) is the upstream gradient of each row's loss.
/// Given the forward's row_stats (of these logits), one pass over each row
/// instead of three (its max, the exps and their sum, the scaling), with the
/// same floats.
Tensor cross_entropy_rows_backward(const Tensor& grad_rows, const Tensor& logits, const Tensor& targets,
                                   double label_smoothing, int64_t ignore_index, const Tensor& row_stats = Tensor());
/// The same, written over the logits (contiguous, (N, V)): the same floats
/// without a second (N, V) tensor. For a caller that owns the logits and no
/// longer needs them (cross_entropy's backward, the last time it runs).
void cross_entropy_rows_backward_(const Tensor& grad_rows, Tensor& logits, const Tensor& targets,
                                  double label_smoothing, int64_t ignore_index, const Tensor& row_stats = Tensor());

/// Plain-loop oracles for the tests: the textbook formula written out
/// element by element in double (the backward ones multiply by the full
/// per-row Jacobian), with little input checking. Slow; never use them in
/// a model.
namespace reference {
/// softmax by the textbook formula.
Tensor softmax(const Tensor& x);
/// log_softmax by the textbook formula.
Tensor log_softmax(const Tensor& x);
/// softmax_backward through the full per-row Jacobian.
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y);
/// log_softmax_backward through the full per-row Jacobian.
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y);
/// masked_softmax, one row at a time.
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens);
/// masked_softmax_by_mask, one row at a time.
Tensor masked_softmax_by_mask(const Tensor& x, const Tensor& keep);
/// layer_norm, one row at a time.
LayerNormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
/// layer_norm_backward through the full per-row Jacobian.
LayerNormGrads layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, bool has_bias);
/// cross_entropy_rows, one row at a time.
Tensor cross_entropy_rows(const Tensor& logits, const Tensor& targets, double label_smoothing, int64_t ignore_index);
/// cross_entropy_rows_backward, one row at a time.
Tensor cross_entropy_rows_backward(const Tensor& grad_rows, const Tensor& logits, const Tensor& targets,
                                   double label_smoothing, int64_t ignore_index);
}  // namespace reference

}  // namespace tformer::core
