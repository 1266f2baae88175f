// Tutorial 14 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_14_text_classifier --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include "core/core.hpp"

namespace exercise {

namespace c = tformer::core;

c::Tensor mask_queries(const c::Tensor& weights, const c::Tensor& ids) {
    // TODO: a (B, T) keep mask from the ids (c::ne(ids, 0.0)), repeated for the H heads in
    // seed 001's order — tf.tile(inputs, [num_heads, 1]) stacks H copies of the whole batch,
    // so row h·B + b is sequence b: c::concat of H copies along dimension 0 gives (H·B, T) —
    // then unsqueeze(2) to (H·B, T, 1) and multiply.
    // This placeholder repeats each sequence H times in a row (d2l's b·H + h order) instead.
    const int64_t H = weights.size(0) / ids.size(0);
    const c::Tensor keep = c::ne(ids, 0.0).to(weights.dtype());  // (B, T)
    const c::Tensor tiled = keep.unsqueeze(1).expand({ids.size(0), H, ids.size(1)}).reshape({-1, ids.size(1)});
    return c::mul(weights, tiled.unsqueeze(2));
}

}  // namespace exercise
