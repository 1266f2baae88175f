// Tutorial 16's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_16_rnn_cnn_attention --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_16_rnn_cnn_attention
#pragma once

#include <cstdint>

namespace exercise {

/// How many positions one output of a stack of `layers` 1-D convolutions
/// with kernel size `kernel` (odd, padding kernel / 2) can see: its receptive field.
int64_t receptive_field(int64_t layers, int64_t kernel);

/// The fewest such layers after which the last of n positions sees the first:
/// the CNN's maximum path length between two positions (d2l: O(n / k)).
int64_t layers_to_connect(int64_t n, int64_t kernel);

}  // namespace exercise
