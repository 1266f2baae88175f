// Tutorial 09's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_09_normalization --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_09_normalization
#pragma once

#include "autograd/autograd.hpp"

namespace exercise {

/// Seed 004's LayerNorm.forward with autograd ops, so that backward() works:
///   mean = x.mean(-1, keepdim=True); std = x.std(-1, keepdim=True)   (unbiased: ÷(D-1))
///   return a_2 * (x - mean) / (std + eps) + b_2
/// x (..., D), a_2 and b_2 (D).
tformer::autograd::Variable seed004_layer_norm(const tformer::autograd::Variable& x,
                                               const tformer::autograd::Variable& a_2,
                                               const tformer::autograd::Variable& b_2, double eps);

}  // namespace exercise
