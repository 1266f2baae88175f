// Tutorial 05 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_05_attention_scoring --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include "core/core.hpp"

namespace exercise {

namespace ag = tformer::autograd;

ag::Variable additive_scores(const ag::Variable& queries, const ag::Variable& keys, const ag::Variable& W_q,
                             const ag::Variable& W_k, const ag::Variable& w_v) {
    (void)W_q, (void)W_k, (void)w_v;
    // TODO: project the queries (B, T, h) and the keys (B, S, h) with ag::matmul and
    // ag::transpose, add them so that every query meets every key (ag::unsqueeze to
    // (B, T, 1, h) and (B, 1, S, h): broadcasting makes (B, T, S, h)), ag::tanh, then
    // w_v turns the last dimension h into one number per (query, key).
    // This placeholder gives every pair the score 0, i.e. uniform attention:
    //   (B, T, 1) + (B, 1, S) -> (B, T, S), times 0.
    return ag::mul(ag::unsqueeze(ag::sum(queries, {2}), 2) + ag::unsqueeze(ag::sum(keys, {2}), 1), 0.0);
}

}  // namespace exercise
