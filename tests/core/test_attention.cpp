// The fused attention's weights (core/attention.hpp) in float32 against a
// plain double-precision oracle: the float kernels hold their rows in vector
// registers (the max of 16 rows at once, the exps of several rows side by
// side), so these shapes cover full and partial blocks of rows, one and
// several chunks of 16 keys, rows with no key, and the decoding path (one
// query per head, keys read from a (B·H, S, d) cache).
#include "core/attention.hpp"
#include "core/elementwise.hpp"
#include "core/tensor.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace tformer;
using namespace tformer::core;

namespace {

// P[b, h, t, s] = softmax_{s < L}(scale · q_bht · k_bhs), 0 for s ≥ L, in double.
// head(b, h, j) gives row j of head h of batch element b of a tensor.
template <class QAt, class KAt>
std::vector<double> oracle(int64_t B, int64_t H, int64_t T, int64_t S, int64_t d, const std::vector<int64_t>& lens,
                           double scale, QAt q, KAt k) {
    std::vector<double> P(static_cast<size_t>(B * H * T * S), 0.0);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t t = 0; t < T; ++t) {
                const int64_t L = lens[static_cast<size_t>(b * T + t)];
                std::vector<double> z(static_cast<size_t>(L));
                double mx = -INFINITY;
                for (int64_t s = 0; s < L; ++s) {
                    double dot = 0;
                    for (int64_t i = 0; i < d; ++i) dot += q(b, h, t, i) * k(b, h, s, i);
                    z[static_cast<size_t>(s)] = scale * dot;
                    mx = std::max(mx, scale * dot);
                }
                double sum = 0;
                for (double& v : z) sum += (v = std::exp(v - mx));
                for (int64_t s = 0; s < L; ++s)
                    P[static_cast<size_t>(((b * H + h) * T + t) * S + s)] = z[static_cast<size_t>(s)] / sum;
            }
    return P;
}

// One attention's sizes: batch, queries, keys, model width, heads.
struct Case {
    int64_t B, T, S, D, H;
};

}  // namespace

TEST_CASE(
    "attention_probs, float32: within 2e-6 of a double oracle for 1 to 40 keys, blocks of rows full and partial, "
    "rows with no key",
    "[core][attention]") {
    // H·T rows per batch element: 28 (a block of 16 and 12), 16, 6; head sizes 8 (compile-time) and 3 (run-time)
    for (const Case c : {Case{3, 7, 10, 32, 4}, Case{2, 4, 16, 32, 4}, Case{2, 3, 17, 16, 2}, Case{2, 5, 40, 12, 4},
                         Case{1, 9, 1, 8, 1}}) {
        Generator gen(11);
        const Tensor Q = randn({c.B, c.T, c.D}, gen), K = randn({c.B, c.S, c.D}, gen);
        const Tensor lens = randint({c.B, c.T}, 0, c.S + 1, gen);  // 0 (no key) to all keys
        const int64_t d = c.D / c.H;
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const Tensor P = attention_probs(Q, K, lens, c.H, scale);
        REQUIRE(P.shape() == Shape{c.B, c.H, c.T, c.S});
        const auto q = [&](int64_t b, int64_t h, int64_t t, int64_t i) { return Q.at({b, t, h * d + i}); };
        const auto k = [&](int64_t b, int64_t h, int64_t s, int64_t i) { return K.at({b, s, h * d + i}); };
        const std::vector<double> want = oracle(c.B, c.H, c.T, c.S, d, lens.to_vector<int64_t>(), scale, q, k);
        const std::vector<double> got = P.to_vector();
        INFO("B " << c.B << ", T " << c.T << ", S " << c.S << ", D " << c.D << ", H " << c.H);
        for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(2e-6));
    }
}

TEST_CASE(
    "cached_attention, float32 (decoding: one query per head, keys from the cache): weights within 2e-6 of "
    "a double oracle",
    "[core][attention]") {
    for (const int64_t S : {1, 5, 16, 23}) {
        const int64_t B = 3, T = 1, H = 4, d = 8, D = H * d;
        Generator gen(12);
        const Tensor Q = randn({B, T, D}, gen), K = randn({B * H, S, d}, gen), V = randn({B * H, S, d}, gen);
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const CachedAttention a = cached_attention(Q, K, V, Tensor(), H, scale);
        const auto q = [&](int64_t b, int64_t h, int64_t t, int64_t i) { return Q.at({b, t, h * d + i}); };
        const auto k = [&](int64_t b, int64_t h, int64_t s, int64_t i) { return K.at({b * H + h, s, i}); };
        const std::vector<double> want = oracle(B, H, T, S, d, std::vector<int64_t>(B * T, S), scale, q, k);
        const std::vector<double> got = a.weights.to_vector();
        INFO(S << " keys");
        for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(2e-6));
    }
}

TEST_CASE(
    "attention_backward, float32: dQ, dK and dV within 1e-5 of the same op in float64, with and without a "
    "dropout mask, for 1 to 17 keys and rows with no key",
    "[core][attention]") {
    // the float kernels hold a row of up to 16 weights in one register and stop at its last
    // attended key (10 keys: d2l's); 17 keys take the general loops; lengths 0 to S
    for (const Case c : {Case{3, 7, 10, 32, 4}, Case{2, 4, 16, 32, 4}, Case{2, 3, 17, 16, 2}, Case{2, 5, 1, 12, 4},
                         Case{2, 6, 5, 8, 1}})
        for (const bool dropout : {false, true}) {
            Generator gen(13);
            const Tensor Q = randn({c.B, c.T, c.D}, gen), K = randn({c.B, c.S, c.D}, gen),
                         V = randn({c.B, c.S, c.D}, gen), dO = randn({c.B, c.T, c.D}, gen);
            const Tensor lens = randint({c.B, c.T}, 0, c.S + 1, gen);
            // inverted dropout's mask: 0 or 1 / (1 - p)
            const Tensor keep = dropout ? mul(bernoulli({c.B, c.H, c.T, c.S}, 0.7, gen), 1.0 / 0.7) : Tensor();
            const double scale = 1.0 / std::sqrt(static_cast<double>(c.D / c.H));
            const auto run = [&](DType dt) {
                const Tensor q = Q.to(dt), k = K.to(dt), v = V.to(dt);
                const Tensor P = attention_probs(q, k, lens, c.H, scale);
                return attention_backward(dO.to(dt), q, k, v, P, keep.defined() ? keep.to(dt) : Tensor(), scale);
            };
            const AttentionGrads f = run(DType::float32), want = run(DType::float64);
            INFO("B " << c.B << ", T " << c.T << ", S " << c.S << ", D " << c.D << ", H " << c.H << ", dropout "
                      << dropout);
            for (const auto& [got, ref] : {std::pair{f.dQ, want.dQ}, {f.dK, want.dK}, {f.dV, want.dV}}) {
                REQUIRE(got.dtype() == DType::float32);
                const std::vector<double> g = got.to_vector(), r = ref.to_vector();
                REQUIRE(g.size() == r.size());
                for (size_t i = 0; i < r.size(); ++i) REQUIRE(g[i] == Approx(r[i]).margin(1e-5));
            }
        }
}
