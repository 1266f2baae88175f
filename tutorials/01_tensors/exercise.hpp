// Tutorial 01's exercise: what the reader writes in exercise.cpp (and
// solution.cpp answers). Run it with
//   ./build/release/tutorials/tutorial_01_tensors --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_01_tensors
#pragma once

#include "core/tensor.hpp"

namespace exercise {

/// Seed 000's transpose_output with core tensors: X (B·H, T, d) -> (B, T, H·d).
/// transpose_qkv put head h of batch element b at row b·H + h; give it back
/// columns h·d .. (h+1)·d - 1 of row b. Use view / permute / reshape only.
tformer::core::Tensor transpose_output(const tformer::core::Tensor& X, int64_t num_heads);

/// Your prediction of x.transpose(0, 1).slice(0, 1, 3).strides() for
/// x = arange(12).view({3, 4}) (work it out on paper first: step 3).
tformer::core::Strides predicted_strides();

/// Your answer: with one head (h = 1), does the last reshape of
/// transpose_qkv, (b, 1, n, d) -> (b·1, n, d), still have to copy?
bool last_reshape_copies_with_one_head();

}  // namespace exercise
