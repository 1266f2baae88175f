// Tutorial 11 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include "core/core.hpp"
#include "nn/attention.hpp"

namespace exercise {

namespace c = tformer::core;

c::Tensor make_std_mask(const c::Tensor& tgt, int64_t pad) {
    const c::Tensor keys = c::ne(tgt, static_cast<double>(pad)).unsqueeze(1);  // (B, 1, T): real keys
    return c::logical_and(keys, tformer::nn::subsequent_mask(tgt.size(1)));    // (B, T, T)
}

c::Tensor causal_padded_lens(const c::Tensor& valid_lens, int64_t T) {
    const c::Tensor steps = c::arange(1, T + 1, 1, c::DType::float64).unsqueeze(0);               // (1, T): 1 .. T
    return c::minimum(steps, valid_lens.to(c::DType::float64).unsqueeze(1)).to(c::DType::int64);  // (B, T)
}

}  // namespace exercise
