// Tutorial 06's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_06_self_attention --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_06_self_attention
#pragma once

#include "core/tensor.hpp"

namespace exercise {

struct SelfAttention {
    tformer::core::Tensor Z;        ///< (n, d_k): one output row per word
    tformer::core::Tensor weights;  ///< (n, n): row i = how much word i attends to each word
};

/// Seed 001's "one formula": Q = X W_Q, K = X W_K, V = X W_V,
/// weights = softmax(Q Kᵀ / √d_k) row by row, Z = weights V.
/// X (n, d_model), W_Q / W_K / W_V (d_model, d_k), all float64; core ops only.
SelfAttention self_attention(const tformer::core::Tensor& X, const tformer::core::Tensor& W_Q,
                             const tformer::core::Tensor& W_K, const tformer::core::Tensor& W_V);

}  // namespace exercise
