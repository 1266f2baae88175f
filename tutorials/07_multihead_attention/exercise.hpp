// Tutorial 07's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_07_multihead_attention --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_07_multihead_attention
#pragma once

#include "autograd/autograd.hpp"

namespace exercise {

/// Seed 002's MultiHeadAttention.split: x (B, T, D) -> (B, H, T, D/H),
/// head h holding features h·D/H .. (h+1)·D/H - 1 of every position.
tformer::autograd::Variable split_heads(const tformer::autograd::Variable& x, int64_t n_head);

/// Seed 002's MultiHeadAttention.concat, the inverse: (B, H, T, d) -> (B, T, H·d).
tformer::autograd::Variable concat_heads(const tformer::autograd::Variable& x);

}  // namespace exercise
