// Tutorial 10 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include "core/core.hpp"

namespace exercise {

namespace ag = tformer::autograd;
namespace c = tformer::core;

ag::Variable conv1d(const ag::Variable& x, const ag::Variable& weight, const ag::Variable& bias, int64_t padding) {
    const auto s = x.shape();  // (B, C_in, T)
    const int64_t k = weight.shape()[2];
    ag::Variable padded = x;
    if (padding > 0) {
        const ag::Variable zeros(c::zeros({s[0], s[1], padding}, x.dtype()));
        padded = ag::concat({zeros, x, zeros}, 2);  // (B, C_in, T + 2p)
    }
    const int64_t T_out = s[2] + 2 * padding - k + 1;
    const ag::Variable channels_last = ag::transpose(padded, 1, 2);  // (B, T + 2p, C_in)
    ag::Variable y;
    for (int64_t j = 0; j < k; ++j) {
        const ag::Variable window = ag::slice(channels_last, 1, j, j + T_out);  // (B, T_out, C_in)
        const ag::Variable tap =
            ag::matmul(window, ag::transpose(ag::select(weight, 2, j), 0, 1));  // (B, T_out, C_out)
        y = j == 0 ? tap : ag::add(y, tap);
    }
    return ag::transpose(ag::add(y, bias), 1, 2);  // (B, C_out, T_out)
}

}  // namespace exercise
