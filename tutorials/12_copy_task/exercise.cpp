// Tutorial 12 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_12_copy_task --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include "core/core.hpp"
#include "nn/attention.hpp"

namespace exercise {

namespace c = tformer::core;

Batch make_batch(const c::Tensor& src, const c::Tensor& tgt, int64_t pad) {
    (void)pad;
    Batch b;
    b.src = src;
    // TODO: shift: the decoder reads tgt[:, :-1] and must predict tgt[:, 1:]
    // (Tensor::slice(1, start, end)). These two lines do not shift at all:
    b.tgt = tgt;
    b.tgt_y = tgt;
    // TODO: the mask must also hide padded keys: (tgt != pad).unsqueeze(1) & subsequent_mask(T).
    b.tgt_mask = tformer::nn::subsequent_mask(b.tgt.size(1)).expand({tgt.size(0), b.tgt.size(1), b.tgt.size(1)});
    // TODO: count only the labels that are not padding (c::ne, c::sum).
    b.ntokens = b.tgt_y.numel();
    return b;
}

}  // namespace exercise
