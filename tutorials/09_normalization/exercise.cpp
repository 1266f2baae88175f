// Tutorial 09 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_09_normalization --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

namespace exercise {

namespace ag = tformer::autograd;

ag::Variable seed004_layer_norm(const ag::Variable& x, const ag::Variable& a_2, const ag::Variable& b_2, double eps) {
    // TODO: seed 004's formula. ag::mean(x, {-1}, true) keeps the last dimension as 1;
    // ag::var(x, {-1}, /*unbiased=*/true, true) then ag::sqrt gives torch's x.std(-1, keepdim=True).
    // This placeholder is the standard LayerNorm (biased variance, eps inside the square root):
    // close, but not seed 004's function.
    return ag::layer_norm(x, a_2, b_2, eps);
}

}  // namespace exercise
