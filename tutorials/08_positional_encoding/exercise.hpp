// Tutorial 08's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_08_positional_encoding --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_08_positional_encoding
#pragma once

#include "core/tensor.hpp"

namespace exercise {

/// Seed 002's formula as a (max_len, d) float64 table:
///   PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
tformer::core::Tensor positional_encoding(int64_t max_len, int64_t d);

/// The (d, d) matrix R with P[pos + k] = P[pos] R for every pos (step 5): one
/// 2×2 rotation block per (sin, cos) pair, for any k (also negative).
tformer::core::Tensor shift_matrix(int64_t d, int64_t k);

}  // namespace exercise
