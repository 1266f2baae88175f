/// \file
/// The output layer and the loss of a translation step in one pass:
/// logits = x Wᵀ + b over a vocabulary of thousands, then cross-entropy, then
/// (when training) every gradient, a chunk of rows at a time. The logits of
/// the whole batch, tens of MB, are never stored, nor their gradient: each
/// chunk's logits become its gradient in place while they are still in
/// cache. This is what production frameworks call a fused linear
/// cross-entropy; seed 000's dense layer followed by MaskedSoftmaxCELoss is
/// the composed version the tests compare it with.
///
/// Letters: N rows (target positions), D hidden, V vocabulary, C rows per chunk.
#pragma once

#include "core/tensor.hpp"

namespace tformer::core {

/// The result of linear_cross_entropy: the weighted loss and, when asked for, its gradients.
struct LinearCrossEntropy {
    double loss = 0;  ///< Σ_n w_n ℓ_n
    /// The gradients of `loss` with respect to x (N, D), W (V, D) and b (V); undefined unless asked for.
    /// @{
    Tensor dx, dW, db;
    /// @}
};

/// ℓ_n = -Σ_v q_nv log softmax(x_n Wᵀ + b)_v with q_n = (1 - ε) one_hot(t_n) + ε/V
/// (label smoothing ε, as core::cross_entropy_rows), weighted by w_n; rows
/// with w_n = 0 (padding) cost nothing. x (N, D), W (V, D), b (V) or
/// undefined, targets (N) int64 in [0, V), weights (N) of x's dtype.
/// With `grads`, also the gradients of the weighted sum. Throws ShapeError,
/// IndexError (a target outside [0, V)) or ValueError naming the values.
LinearCrossEntropy linear_cross_entropy(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& targets,
                                        const Tensor& weights, double label_smoothing, bool grads);

}  // namespace tformer::core
