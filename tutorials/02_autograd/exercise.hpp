// Tutorial 02's exercise: what the reader writes in exercise.cpp (solution.cpp answers).
//   ./build/release/tutorials/tutorial_02_autograd --exercise
// Rebuild after editing: cmake --build --preset release --target tutorial_02_autograd
#pragma once

#include "autograd/autograd.hpp"

namespace exercise {

/// y = x³ elementwise, as a new differentiable op made with autograd::record:
/// its forward value and a backward that sends dy · 3x² to x.
tformer::autograd::Variable cube(const tformer::autograd::Variable& x);

/// Step 4 with tanh in place of exp: for y = Σ_i (a_i · b_i + tanh(a_i)), the
/// gradient dy/da written as a formula of the values of a and b (plain core
/// ops, no autograd), which the check compares with what backward() finds.
tformer::core::Tensor tanh_version_grad_a(const tformer::core::Tensor& a, const tformer::core::Tensor& b);

}  // namespace exercise
