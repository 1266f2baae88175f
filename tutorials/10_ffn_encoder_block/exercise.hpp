// Tutorial 10's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_10_ffn_encoder_block --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_10_ffn_encoder_block
#pragma once

#include "autograd/autograd.hpp"

namespace exercise {

/// PyTorch's nn.Conv1d forward with autograd ops (so gradients flow), channels first:
///   x (B, C_in, T), weight (C_out, C_in, k), bias (C_out), zero padding p on both ends
///   -> y (B, C_out, T + 2p - k + 1),  y[b, o, t] = bias[o] + Σ_c Σ_j weight[o, c, j] · x_pad[b, c, t + j]
tformer::autograd::Variable conv1d(const tformer::autograd::Variable& x, const tformer::autograd::Variable& weight,
                                   const tformer::autograd::Variable& bias, int64_t padding);

}  // namespace exercise
