// Tutorial 11's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_11_decoder_masks_prediction --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_11_decoder_masks_prediction
#pragma once

#include "core/tensor.hpp"

namespace exercise {

/// Seed 004's Batch.make_std_mask(tgt, pad): bool (B, T, T), true where query t may
/// attend to key s: s ≤ t (subsequent_mask) and tgt[b, s] is not padding.
tformer::core::Tensor make_std_mask(const tformer::core::Tensor& tgt, int64_t pad);

/// The same information as d2l's valid lengths, one per query row: int64 (B, T)
/// with row t of sequence b keeping min(t + 1, valid_lens[b]) keys.
tformer::core::Tensor causal_padded_lens(const tformer::core::Tensor& valid_lens, int64_t T);

}  // namespace exercise
