// Tutorial 06 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include "core/core.hpp"

#include <cmath>

namespace exercise {

namespace c = tformer::core;

SelfAttention self_attention(const c::Tensor& X, const c::Tensor& W_Q, const c::Tensor& W_K, const c::Tensor& W_V) {
    const c::Tensor Q = c::matmul(X, W_Q), K = c::matmul(X, W_K), V = c::matmul(X, W_V);  // (n, d_k)
    const double scale = std::sqrt(static_cast<double>(W_K.size(1)));
    const c::Tensor weights = c::softmax(c::div(c::matmul(Q, K.transpose(0, 1)), scale));  // (n, n)
    return {c::matmul(weights, V), weights};
}

}  // namespace exercise
