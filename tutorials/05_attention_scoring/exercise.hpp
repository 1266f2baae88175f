// Tutorial 05's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_05_attention_scoring --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_05_attention_scoring
#pragma once

#include "autograd/autograd.hpp"

namespace exercise {

/// Seed 003's additive attention scores, a(q, k) = w_vᵀ tanh(W_q q + W_k k),
/// for every query against every key:
///   queries (B, T, q), keys (B, S, k), W_q (h, q), W_k (h, k), w_v (1, h)
///   -> scores (B, T, S)
/// (weights stored (out, in) as nn::Linear stores them: W_q q is q W_qᵀ).
tformer::autograd::Variable additive_scores(const tformer::autograd::Variable& queries,
                                            const tformer::autograd::Variable& keys,
                                            const tformer::autograd::Variable& W_q,
                                            const tformer::autograd::Variable& W_k,
                                            const tformer::autograd::Variable& w_v);

}  // namespace exercise
