// Differentiable building blocks of a Transformer: softmax, masked softmax,
// layer norm, embedding lookup and cross-entropy.
//
// Softmax, log_softmax, layer norm and cross-entropy exist twice. The
// versions in this namespace call fused core kernels (one pass, one node):
// the fast ones the layers use. The versions in namespace `composed` are
// written with primitive ops (exp, sum, div, ...): the readable ones the
// tutorials show. Tests check that both give the same values and gradients.
#pragma once

#include "autograd/variable.hpp"

namespace tformer::autograd {

/// softmax along the last dim.
Variable softmax(const Variable& x);
/// log_softmax along the last dim.
Variable log_softmax(const Variable& x);
/// Softmax over the first valid_lens entries of each row (seed 003); see core::masked_softmax.
Variable masked_softmax(const Variable& x, const core::Tensor& valid_lens);
/// Softmax where the bool mask is true (seed 002's masks); see core::masked_softmax_by_mask.
Variable masked_softmax_by_mask(const Variable& x, const core::Tensor& keep);

/// PyTorch LayerNorm over the last dim: (x - mean) / √(var + eps) * weight + bias.
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps);

/// Rows of weight (V, D) picked by int64 ids; no gradient reaches row
/// padding_idx (-1: none).
Variable embedding(const Variable& weight, const core::Tensor& ids, int64_t padding_idx = -1);

enum class Reduction { none, mean, sum };

struct CrossEntropyOptions {
    int64_t ignore_index = -100;  ///< targets equal to this contribute nothing
    double label_smoothing = 0.0; ///< ε: target distribution (1-ε)·onehot + ε/V
    Reduction reduction = Reduction::mean;  ///< mean over non-ignored targets, as PyTorch
};

/// Cross-entropy of logits (..., V) against int64 targets (...).
Variable cross_entropy(const Variable& logits, const core::Tensor& targets, const CrossEntropyOptions& options = {});

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
