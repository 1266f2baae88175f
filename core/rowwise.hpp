// Row-wise kernels: each works along the last dimension, one row at a time,
// numerically stable, OpenMP across rows for large inputs. These are the
// fused, fast versions; autograd also builds softmax and layer norm out of
// primitives (the readable versions) and the tests show both agree.
#pragma once

#include "core/tensor.hpp"

namespace tformer::core {

/// softmax(x)_i = exp(x_i - max x) / Σ_j exp(x_j - max x), along the last dim.
Tensor softmax(const Tensor& x);
/// log_softmax(x)_i = x_i - max x - log Σ_j exp(x_j - max x).
Tensor log_softmax(const Tensor& x);
/// Backward of y = softmax(x): dx = y ⊙ (dy - Σ_j dy_j y_j).
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y);
/// Backward of y = log_softmax(x): dx = dy - exp(y) Σ_j dy_j.
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y);

/// Softmax over the last dim of x (..., T, S) where only the first
/// valid_lens entries of each row count (seed 003, section on masked
/// softmax). valid_lens (int64, or float holding integers) is either
/// 1-D with one length per batch element (shape (B), x's leading dimension)
/// or 2-D / N-D with one length per row (shape x.shape[:-1]).
/// Masked entries are exactly 0; a row with valid length 0 is all zeros.
/// Throws ValueError for a negative length or one above S.
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens);
/// Softmax where the bool mask (broadcast to x) is true; other entries are
/// exactly 0 (seed 002's pad mask and no-peek mask). A fully masked row is zeros.
Tensor masked_softmax_by_mask(const Tensor& x, const Tensor& keep);

/// y = (x - mean) * rstd * weight + bias along the last dim, with
/// rstd = 1/√(var + eps) and the biased variance (PyTorch's LayerNorm).
/// weight and bias (D) may be undefined. mean and rstd have shape x.shape[:-1].
struct LayerNormOut {
    Tensor y, mean, rstd;
};
LayerNormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
/// Gradients of layer_norm given dy and the saved x, mean, rstd.
/// dweight/dbias are undefined when weight/bias were.
struct LayerNormGrads {
    Tensor dx, dweight, dbias;
};
LayerNormGrads layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, bool has_bias);

/// Per-row cross-entropy of logits (N, V) against int64 targets (N):
/// loss_n = -Σ_v q_v log p_v with p = softmax(logits_n) and q the one-hot
/// target smoothed by label_smoothing (q = (1-ε) onehot + ε/V, PyTorch's
/// definition). Rows whose target equals ignore_index get loss 0. Computed
/// through log_softmax, so log(0) never appears. Targets outside [0, V)
/// (other than ignore_index) throw IndexError.
Tensor cross_entropy_rows(const Tensor& logits, const Tensor& targets, double label_smoothing, int64_t ignore_index);
/// d loss_n / d logits given the per-row upstream gradient (N).
Tensor cross_entropy_rows_backward(const Tensor& grad_rows, const Tensor& logits, const Tensor& targets,
                                   double label_smoothing, int64_t ignore_index);

/// Plain-loop oracles.
namespace reference {
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens);
LayerNormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
}  // namespace reference

}  // namespace tformer::core
