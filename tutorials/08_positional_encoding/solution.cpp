// Tutorial 08 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include "core/core.hpp"

#include <cmath>

namespace exercise {

namespace c = tformer::core;

c::Tensor positional_encoding(int64_t max_len, int64_t d) {
    c::Tensor P = c::zeros({max_len, d}, c::DType::float64);
    for (int64_t pos = 0; pos < max_len; ++pos)
        for (int64_t j = 0; j < d; ++j) {
            const double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(j - j % 2) / d);
            P.set({pos, j}, j % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
    return P;
}

c::Tensor shift_matrix(int64_t d, int64_t k) {
    c::Tensor R = c::zeros({d, d}, c::DType::float64);
    for (int64_t j = 0; j + 1 < d; j += 2) {
        const double wk = static_cast<double>(k) / std::pow(10000.0, static_cast<double>(j) / d);
        R.set({j, j}, std::cos(wk));
        R.set({j, j + 1}, -std::sin(wk));
        R.set({j + 1, j}, std::sin(wk));
        R.set({j + 1, j + 1}, std::cos(wk));
    }
    return R;
}

}  // namespace exercise
