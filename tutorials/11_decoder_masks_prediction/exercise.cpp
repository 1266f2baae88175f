// Tutorial 11 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_11_decoder_masks_prediction --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include "core/core.hpp"
#include "nn/attention.hpp"

namespace exercise {

namespace c = tformer::core;

c::Tensor make_std_mask(const c::Tensor& tgt, int64_t pad) {
    (void)pad;
    // TODO: seed 004 writes (tgt != pad).unsqueeze(-2) & subsequent_mask(T).
    // c::ne(tgt, double(pad)) is (B, T); unsqueeze(1) makes it (B, 1, T), one row of keys
    // for every query; c::logical_and broadcasts it against nn::subsequent_mask(T) (1, T, T).
    // This placeholder forgets the padding: the no-peek mask alone, one copy per sequence.
    const int64_t B = tgt.size(0), T = tgt.size(1);
    return tformer::nn::subsequent_mask(T).expand({B, T, T}).contiguous();
}

c::Tensor causal_padded_lens(const c::Tensor& valid_lens, int64_t T) {
    // TODO: row t of sequence b keeps min(t + 1, valid_lens[b]) keys
    // (c::minimum of a (1, T) row 1..T and a (B, 1) column of the lengths broadcasts to (B, T);
    // c::minimum works on float tensors: .to(c::DType::float64) first, .to(c::DType::int64) after).
    // This placeholder is d2l's dec_valid_lens, which forgets the padding.
    return tformer::nn::causal_valid_lens(valid_lens.size(0), T);
}

}  // namespace exercise
