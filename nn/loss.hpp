/// \file
/// Losses for sequence models.
#pragma once

#include "autograd/functional.hpp"
#include "autograd/variable.hpp"

namespace tformer::nn {

using autograd::Variable;

/// d2l's sequence_mask as a float mask: mask[b][t] = 1 if t < valid_len[b] else 0.
/// valid_len int64 (B) -> (B, T) in `dtype`.
core::Tensor sequence_mask(const core::Tensor& valid_len, int64_t T, core::DType dtype);

/// d2l's MaskedSoftmaxCELoss (seed 000's training, d2l.train_seq2seq):
///   pred (B, T, V) logits, label int64 (B, T), valid_len int64 (B) -> (B)
///   loss[b] = (1/T) Σ_{t < valid_len[b]} CE(pred[b, t], label[b, t])
/// Note how the averaging is defined: the masked per-token losses are
/// averaged over all T steps, padding included (padding contributes 0), not
/// over the valid ones. d2l then calls loss.sum().backward() and reports
/// Σ_b loss[b] / Σ_b valid_len[b] as "loss", so its printed figure (0.033 in
/// seed 000) is the mean per-token cross-entropy divided by about T / 1. To
/// compare with d2l, report the same quantity (see tasks::train).
Variable masked_softmax_ce_loss(const Variable& pred, const core::Tensor& label, const core::Tensor& valid_len,
                                double label_smoothing = 0.0);

}  // namespace tformer::nn
