// Tutorial 08 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_08_positional_encoding --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include "core/core.hpp"

#include <cmath>

namespace exercise {

namespace c = tformer::core;

c::Tensor positional_encoding(int64_t max_len, int64_t d) {
    c::Tensor P = c::zeros({max_len, d}, c::DType::float64);
    // TODO: fill P with P.set({pos, j}, value): sin for even j = 2i, cos for odd j = 2i + 1,
    // both of the angle pos / 10000^(2i/d).
    return P;
}

c::Tensor shift_matrix(int64_t d, int64_t k) {
    (void)k;
    // TODO: for each pair (j, j + 1) with frequency w = 1 / 10000^(j/d), the 2×2 block
    //   R[j][j] = cos(w k)   R[j][j+1] = -sin(w k)
    //   R[j+1][j] = sin(w k) R[j+1][j+1] = cos(w k)
    // (step 5 shows why: the rows of P are multiplied from the left, P[pos] R).
    return c::eye(d, c::DType::float64);  // the identity: right only for k = 0
}

}  // namespace exercise
