// Tutorial 03's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_03_gradcheck --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_03_gradcheck
#pragma once

#include "autograd/autograd.hpp"

#include <functional>

namespace exercise {

/// The numerical Jacobian of f at x by central differences, the first half of
/// gradcheck (step 2): J[i][j] = (f(x + eps·e_j)[i] - f(x - eps·e_j)[i]) / 2eps.
/// x is a float64 vector (n); f maps it to a float64 vector (m); returns (m, n).
tformer::core::Tensor numerical_jacobian(const std::function<tformer::core::Tensor(const tformer::core::Tensor&)>& f,
                                         const tformer::core::Tensor& x, double eps);

}  // namespace exercise
