// Tutorial 07 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

namespace exercise {

namespace ag = tformer::autograd;

ag::Variable split_heads(const ag::Variable& x, int64_t n_head) {
    const auto s = x.shape();                                                         // (B, T, D)
    return ag::transpose(ag::reshape(x, {s[0], s[1], n_head, s[2] / n_head}), 1, 2);  // (B, H, T, d)
}

ag::Variable concat_heads(const ag::Variable& x) {
    const auto s = x.shape();                                                               // (B, H, T, d)
    return ag::reshape(ag::contiguous(ag::transpose(x, 1, 2)), {s[0], s[2], s[1] * s[3]});  // (B, T, H·d)
}

}  // namespace exercise
