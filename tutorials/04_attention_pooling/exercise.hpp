// Tutorial 04's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_04_attention_pooling --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_04_attention_pooling
#pragma once

#include "autograd/autograd.hpp"

namespace exercise {

/// Attention pooling with a Laplace kernel instead of seed 003's Gaussian:
///   α(x, x_i) = softmax_i(-|x - x_i| · w),   f(x) = Σ_i α(x, x_i) y_i
/// queries (n), keys (n, m) and values (n, m): row q holds the m keys and
/// values of query q, as nn::NWKernelRegression takes them; w is a 0-d
/// Variable. Written with autograd ops, so that w can be trained.
struct Pooled {
    tformer::autograd::Variable output;  ///< (n)
    tformer::core::Tensor weights;       ///< (n, m), each row sums to 1
};
Pooled laplace_pooling(const tformer::autograd::Variable& queries, const tformer::autograd::Variable& keys,
                       const tformer::autograd::Variable& values, const tformer::autograd::Variable& w);

}  // namespace exercise
