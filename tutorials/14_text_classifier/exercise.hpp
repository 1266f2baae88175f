// Tutorial 14's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_14_text_classifier --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_14_text_classifier
#pragma once

#include "core/tensor.hpp"

namespace exercise {

/// Seed 001's query mask done right. `weights` (H·B, T, S) are the attention
/// weights in seed 001's layout, tf.concat(tf.split(Q, H, axis=-1), axis=0):
/// row h·B + b is head h of sequence b (head-major). `ids` (B, T) are the
/// token ids, 0 = padding. Return the weights with every row whose query is
/// padding multiplied by 0 (all other rows unchanged), which is what seed
/// 001's tf.where(tf.equal(query_masks, 0), paddings, weights) meant to do.
tformer::core::Tensor mask_queries(const tformer::core::Tensor& weights, const tformer::core::Tensor& ids);

}  // namespace exercise
