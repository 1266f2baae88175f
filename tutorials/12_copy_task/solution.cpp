// Tutorial 12 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include "core/core.hpp"
#include "nn/attention.hpp"

namespace exercise {

namespace c = tformer::core;

Batch make_batch(const c::Tensor& src, const c::Tensor& tgt, int64_t pad) {
    const int64_t L = tgt.size(1);
    Batch b;
    b.src = src;
    b.tgt = tgt.slice(1, 0, L - 1);  // (B, T): <start> and all but the last symbol
    b.tgt_y = tgt.slice(1, 1, L);    // (B, T): every symbol after <start>
    const c::Tensor real_keys = c::ne(b.tgt, static_cast<double>(pad)).unsqueeze(1);  // (B, 1, T)
    b.tgt_mask = c::logical_and(real_keys, tformer::nn::subsequent_mask(L - 1));      // (B, T, T)
    b.ntokens = static_cast<int64_t>(c::sum(c::ne(b.tgt_y, static_cast<double>(pad)).to(c::DType::float64)).item());
    return b;
}

}  // namespace exercise
