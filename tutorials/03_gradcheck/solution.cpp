// Tutorial 03 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include "core/core.hpp"

namespace exercise {

namespace c = tformer::core;

c::Tensor numerical_jacobian(const std::function<c::Tensor(const c::Tensor&)>& f, const c::Tensor& x, double eps) {
    const int64_t n = x.numel(), m = f(x).numel();
    c::Tensor J = c::zeros({m, n}, c::DType::float64);
    for (int64_t j = 0; j < n; ++j) {
        c::Tensor plus = x.clone(), minus = x.clone();
        plus.set({j}, plus.at({j}) + eps);
        minus.set({j}, minus.at({j}) - eps);
        const c::Tensor up = f(plus), down = f(minus);  // (m) each: one column of J
        for (int64_t i = 0; i < m; ++i) J.set({i, j}, (up.at({i}) - down.at({i})) / (2 * eps));
    }
    return J;
}

}  // namespace exercise
