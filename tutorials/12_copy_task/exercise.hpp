// Tutorial 12's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_12_copy_task --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_12_copy_task
#pragma once

#include "core/tensor.hpp"

namespace exercise {

/// Seed 004's Batch(src, tgt, pad), for targets that may be padded:
///   tgt      = tgt[:, :-1]                 the decoder's input (B, T-1)
///   tgt_y    = tgt[:, 1:]                  the labels (B, T-1)
///   tgt_mask = make_std_mask(tgt, pad)     bool (B, T-1, T-1): no peeking, no padded keys
///   ntokens  = (tgt_y != pad).sum()        labels that count in the loss
struct Batch {
    tformer::core::Tensor src, tgt, tgt_y, tgt_mask;
    int64_t ntokens = 0;
};
Batch make_batch(const tformer::core::Tensor& src, const tformer::core::Tensor& tgt, int64_t pad);

}  // namespace exercise
