// Tutorial 05 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include "core/core.hpp"

namespace exercise {

namespace ag = tformer::autograd;

ag::Variable additive_scores(const ag::Variable& queries, const ag::Variable& keys, const ag::Variable& W_q,
                             const ag::Variable& W_k, const ag::Variable& w_v) {
    const ag::Variable q = ag::matmul(queries, ag::transpose(W_q, 0, 1));               // (B, T, h)
    const ag::Variable k = ag::matmul(keys, ag::transpose(W_k, 0, 1));                  // (B, S, h)
    const ag::Variable features = ag::tanh(ag::unsqueeze(q, 2) + ag::unsqueeze(k, 1));  // (B, T, S, h)
    return ag::squeeze(ag::matmul(features, ag::transpose(w_v, 0, 1)), 3);              // (B, T, S)
}

}  // namespace exercise
