// Tutorial 03 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_03_gradcheck --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include "core/core.hpp"

namespace exercise {

namespace c = tformer::core;

c::Tensor numerical_jacobian(const std::function<c::Tensor(const c::Tensor&)>& f, const c::Tensor& x, double eps) {
    const int64_t n = x.numel(), m = f(x).numel();
    c::Tensor J = c::zeros({m, n}, c::DType::float64);
    // TODO: for every input j, move x[j] by +eps and -eps (on clones of x),
    // evaluate f both times, and write column j of J:
    //   J[i][j] = (f(x + eps e_j)[i] - f(x - eps e_j)[i]) / (2 eps)
    // Tensor::clone, Tensor::at({j}), Tensor::set({j}, v) and J.set({i, j}, v) are all you need.
    (void)eps;
    return J;
}

}  // namespace exercise
