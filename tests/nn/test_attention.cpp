// Attention layers (nn/attention.hpp) and attention pooling
// (nn/attention_pooling.hpp), checked against the documents' own examples
// (seed 003's AdditiveAttention / DotProductAttention demos, seed 000's
// MultiHeadAttention shapes) and against a plain-loop attention oracle:
// one table of masks (none, valid lengths per batch and per row, bool
// pad / no-peek masks) feeds the DotProductAttention and MultiHeadAttention
// checks. The KV-cache tests show that step-by-step decoding reproduces the
// full masked forward pass.
#include "nn/attention.hpp"
#include "nn/attention_pooling.hpp"

#include "autograd/autograd.hpp"
#include "core/attention.hpp"
#include "core/core.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::nn;
using autograd::NoGradGuard;
using Catch::Contains;
using core::DType;
using core::Generator;
using core::Shape;

namespace {

// ---- helpers -------------------------------------------------------------------------------

double max_abs_diff(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    const std::vector<double> x = a.to_vector(), y = b.to_vector();
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
    return worst;
}

double tolerance(DType dtype) { return dtype == DType::float64 ? 1e-12 : 1e-5; }

// Which keys a query may attend to: allowed(b, h, t, s).
using Allowed = std::function<bool(int64_t b, int64_t h, int64_t t, int64_t s)>;

struct OracleOut {
    Tensor out;      // (B, T, v)
    Tensor weights;  // (B, T, S)
};

// Scaled dot-product attention written out with loops, in double:
//   w[b,t,s] = exp(q·k/√d) / Σ_{allowed s'} exp(q·k'/√d) over allowed s, 0 elsewhere
//   out[b,t] = Σ_s w[b,t,s] v[b,s]
// q (B, T, d), k (B, S, d), v (B, S, dv); `head` is passed through to allowed.
OracleOut attention_oracle(const Tensor& q, const Tensor& k, const Tensor& v, const Allowed& allowed,
                           int64_t head = 0) {
    const int64_t B = q.size(0), T = q.size(1), d = q.size(2), S = k.size(1), dv = v.size(2);
    Tensor out = core::zeros({B, T, dv}, DType::float64), weights = core::zeros({B, T, S}, DType::float64);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t) {
            std::vector<double> score(S, 0.0);
            double top = -INFINITY;
            for (int64_t s = 0; s < S; ++s) {
                if (!allowed(b, head, t, s)) continue;
                for (int64_t j = 0; j < d; ++j) score[s] += q.at({b, t, j}) * k.at({b, s, j});
                score[s] /= std::sqrt(static_cast<double>(d));
                top = std::max(top, score[s]);
            }
            double total = 0;
            for (int64_t s = 0; s < S; ++s)
                if (allowed(b, head, t, s)) total += std::exp(score[s] - top);
            for (int64_t s = 0; s < S; ++s) {
                if (!allowed(b, head, t, s)) continue;
                const double w = std::exp(score[s] - top) / total;
                weights.set({b, t, s}, w);
                for (int64_t j = 0; j < dv; ++j) out.set({b, t, j}, out.at({b, t, j}) + w * v.at({b, s, j}));
            }
        }
    return {out, weights};
}

// ---- the table of masks ----------------------------------------------------------------------
// B = 2 batch elements, T = 3 queries, S = 4 keys; each form of mask with the
// rule it stands for.
constexpr int64_t kB = 2, kT = 3, kS = 4;

struct MaskCase {
    std::string name;
    Tensor mask;
    Allowed allowed;
};

std::vector<MaskCase> mask_cases() {
    const std::vector<int64_t> lens = {3, 2};
    const std::vector<int64_t> row_lens = {1, 3, 4, 2, 2, 1};  // (B, T)
    std::vector<bool> pad_keep, no_peek_keep, per_query_keep;
    for (int64_t b = 0; b < kB; ++b)
        for (int64_t s = 0; s < kS; ++s) pad_keep.push_back(s < lens[b]);
    for (int64_t t = 0; t < kT; ++t)
        for (int64_t s = 0; s < kS; ++s) no_peek_keep.push_back(s <= t + 1);
    for (int64_t b = 0; b < kB; ++b)
        for (int64_t t = 0; t < kT; ++t)
            for (int64_t s = 0; s < kS; ++s) per_query_keep.push_back((s + t + b) % 3 != 0);
    return {
        {"no mask", Tensor(), [](int64_t, int64_t, int64_t, int64_t) { return true; }},
        {"valid_lens (B) = [3, 2]", core::from_vector(lens, {kB}),
         [=](int64_t b, int64_t, int64_t, int64_t s) { return s < lens[b]; }},
        {"valid_lens (B, T)", core::from_vector(row_lens, {kB, kT}),
         [=](int64_t b, int64_t, int64_t t, int64_t s) { return s < row_lens[b * kT + t]; }},
        {"float valid_lens (B) = [3, 2]", core::tensor({3, 2}, {kB}, DType::float32),
         [=](int64_t b, int64_t, int64_t, int64_t s) { return s < lens[b]; }},
        {"bool pad mask (B, 1, S)", core::from_vector(pad_keep, {kB, 1, kS}),
         [=](int64_t b, int64_t, int64_t, int64_t s) { return s < lens[b]; }},
        {"bool no-peek mask (T, S)", core::from_vector(no_peek_keep, {kT, kS}),
         [](int64_t, int64_t, int64_t t, int64_t s) { return s <= t + 1; }},
        {"bool mask (B, T, S)", core::from_vector(per_query_keep, {kB, kT, kS}),
         [](int64_t b, int64_t, int64_t t, int64_t s) { return (s + t + b) % 3 != 0; }},
    };
}

// seed 003's demo inputs: keys all ones (so no query can tell them apart),
// values arange(40).reshape(1, 10, 4).repeat(2, 1, 1), valid_lens [2, 6].
Tensor demo_values() { return core::arange(40, DType::float32).reshape({1, 10, 4}).expand({2, 10, 4}).contiguous(); }

}  // namespace

// ---- masked_softmax ------------------------------------------------------------------------------

TEST_CASE("masked_softmax(X, mask): seed 003's valid lengths [2, 3] and [[1, 3], [2, 4]]", "[nn][attention]") {
    Generator gen(3);
    const Variable X(core::rand({2, 2, 4}, gen));
    struct Case {
        const char* name;
        Tensor mask;
        std::vector<int64_t> lens;  // per row (b, t)
    };
    const std::vector<Case> cases = {
        {"per batch [2, 3]", core::from_vector(std::vector<int64_t>{2, 3}, {2}), {2, 2, 3, 3}},
        {"per row [[1, 3], [2, 4]]", core::from_vector(std::vector<int64_t>{1, 3, 2, 4}, {2, 2}), {1, 3, 2, 4}},
        {"no mask", Tensor(), {4, 4, 4, 4}},
    };
    for (const Case& c : cases) {
        SECTION(c.name) {
            const Tensor w = nn::masked_softmax(X, c.mask).value();
            for (int64_t r = 0; r < 4; ++r) {
                const int64_t b = r / 2, t = r % 2, len = c.lens[r];
                double total = 0;
                for (int64_t s = 0; s < len; ++s) total += std::exp(X.value().at({b, t, s}));
                for (int64_t s = 0; s < 4; ++s) {
                    const double expected = s < len ? std::exp(X.value().at({b, t, s})) / total : 0.0;
                    if (s < len)
                        CHECK(w.at({b, t, s}) == Approx(expected).epsilon(1e-6));
                    else
                        CHECK(w.at({b, t, s}) == 0.0);  // exactly zero beyond the valid length
                }
            }
        }
    }
    // a row of valid length 1 puts all its weight on the first key, as in the document
    const Tensor w = nn::masked_softmax(X, cases[1].mask).value();
    CHECK(w.at({0, 0, 0}) == 1.0);
}

TEST_CASE("masked_softmax(X, mask): a bool keep-mask gives the same weights as the equivalent valid lengths",
          "[nn][attention]") {
    Generator gen(4);
    const Variable X(core::randn({2, 3, 5}, gen, DType::float64));
    const Tensor lens = core::from_vector(std::vector<int64_t>{1, 4, 2, 5, 3, 3}, {2, 3});
    std::vector<bool> keep;
    for (int64_t r = 0; r < 6; ++r)
        for (int64_t s = 0; s < 5; ++s) keep.push_back(s < lens.to_vector<int64_t>()[r]);
    const Tensor by_lens = nn::masked_softmax(X, lens).value();
    const Tensor by_mask = nn::masked_softmax(X, core::from_vector(keep, {2, 3, 5})).value();
    CHECK(max_abs_diff(by_lens, by_mask) == 0.0);
}

TEST_CASE("subsequent_mask(size), causal_valid_lens(B, T): seed 004's no-peek mask and d2l's dec_valid_lens",
          "[nn][attention]") {
    const Tensor keep = subsequent_mask(3);
    CHECK(keep.dtype() == DType::boolean);
    CHECK(keep.shape() == Shape{1, 3, 3});
    CHECK(keep.to_vector() == std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1});
    const Tensor lens = causal_valid_lens(2, 3);
    CHECK(lens.dtype() == DType::int64);
    CHECK(lens.shape() == Shape{2, 3});
    CHECK(lens.to_vector() == std::vector<double>{1, 2, 3, 1, 2, 3});
    CHECK_THROWS_AS(subsequent_mask(-1), ValueError);
}

// ---- DotProductAttention ----------------------------------------------------------------------------

TEST_CASE(
    "DotProductAttention.forward(queries, keys, values, valid_lens): seed 003's demo averages the first 2 / "
    "6 values",
    "[nn][attention]") {
    Generator gen(0);
    DotProductAttention attention({.dropout = 0.5}, gen);
    attention.eval();
    const Variable queries(core::randn({2, 1, 2}, gen));
    const Variable keys(core::ones({2, 10, 2}));
    const Variable values(demo_values());
    const Tensor valid_lens = core::from_vector(std::vector<int64_t>{2, 6}, {2});
    const Tensor out = attention(queries, keys, values, valid_lens).value();
    // identical keys get identical scores, so the weights are uniform over
    // the valid keys: the mean of value rows 0..1 (= [2, 3, 4, 5]) and 0..5
    CHECK(out.shape() == Shape{2, 1, 4});
    const std::vector<double> expected = {2, 3, 4, 5, 10, 11, 12, 13};
    const std::vector<double> got = out.to_vector();
    for (size_t i = 0; i < expected.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-6));
    const Tensor& w = attention.attention_weights;
    CHECK(w.shape() == Shape{2, 1, 10});
    for (int64_t s = 0; s < 10; ++s) {
        if (s < 2)
            CHECK(w.at({0, 0, s}) == Approx(0.5));
        else
            CHECK(w.at({0, 0, s}) == 0.0);  // exactly zero beyond the valid length
        if (s < 6)
            CHECK(w.at({1, 0, s}) == Approx(1.0 / 6));
        else
            CHECK(w.at({1, 0, s}) == 0.0);
    }
}

TEST_CASE(
    "DotProductAttention.forward(queries, keys, values, mask): matches the plain-loop oracle for every form "
    "of mask",
    "[nn][attention]") {
    const DType dtype = GENERATE(DType::float32, DType::float64);
    Generator gen(1);
    DotProductAttention attention({.dropout = 0.0}, gen);
    const Tensor q = core::randn({kB, kT, 5}, gen, dtype);
    const Tensor k = core::randn({kB, kS, 5}, gen, dtype);
    const Tensor v = core::randn({kB, kS, 3}, gen, dtype);
    for (const MaskCase& c : mask_cases()) {
        SECTION(c.name + " " + std::string(core::dtype_name(dtype))) {
            const Tensor out = attention(Variable(q), Variable(k), Variable(v), c.mask).value();
            const OracleOut want = attention_oracle(q, k, v, c.allowed);
            CHECK(out.dtype() == dtype);
            CHECK(max_abs_diff(out, want.out) < tolerance(dtype));
            CHECK(max_abs_diff(attention.attention_weights, want.weights) < tolerance(dtype));
            // masked keys get exactly zero weight
            for (int64_t b = 0; b < kB; ++b)
                for (int64_t t = 0; t < kT; ++t)
                    for (int64_t s = 0; s < kS; ++s)
                        if (!c.allowed(b, 0, t, s)) CHECK(attention.attention_weights.at({b, t, s}) == 0.0);
        }
    }
}

TEST_CASE(
    "DotProductAttention.forward(queries, keys, values, mask): 4-D (B, H, T, d) inputs with seed 002's pad "
    "mask (B, 1, 1, S)",
    "[nn][attention]") {
    Generator gen(2);
    DotProductAttention attention({.dropout = 0.0}, gen);
    const int64_t H = 3;
    const Tensor q = core::randn({kB, H, kT, 4}, gen, DType::float64);
    const Tensor k = core::randn({kB, H, kS, 4}, gen, DType::float64);
    const Tensor v = core::randn({kB, H, kS, 2}, gen, DType::float64);
    const std::vector<int64_t> lens = {4, 1};
    std::vector<bool> keep;
    for (int64_t b = 0; b < kB; ++b)
        for (int64_t s = 0; s < kS; ++s) keep.push_back(s < lens[b]);
    const Tensor pad_mask = core::from_vector(keep, {kB, 1, 1, kS});
    const Tensor out = attention(Variable(q), Variable(k), Variable(v), pad_mask).value();
    CHECK(out.shape() == Shape{kB, H, kT, 2});
    CHECK(attention.attention_weights.shape() == Shape{kB, H, kT, kS});
    // each (b, h) is its own 3-D attention
    for (int64_t h = 0; h < H; ++h) {
        const OracleOut want = attention_oracle(q.select(1, h), k.select(1, h), v.select(1, h),
                                                [&](int64_t b, int64_t, int64_t, int64_t s) { return s < lens[b]; });
        CHECK(max_abs_diff(out.select(1, h), want.out) < 1e-12);
    }
}

TEST_CASE("DotProductAttention.forward: shape errors name the layer and the shapes", "[nn][attention]") {
    DotProductAttention attention({.dropout = 0.0});
    const Variable q(core::zeros({2, 3, 4})), k(core::zeros({2, 5, 4})), v(core::zeros({2, 5, 6}));
    REQUIRE_THROWS_WITH(attention(Variable(core::zeros({3, 4})), k, v),
                        "DotProductAttention: queries of shape (3x4) must be (B, T, d) or (B, H, T, d)");
    REQUIRE_THROWS_WITH(attention(q, Variable(core::zeros({2, 5, 3})), v),
                        "DotProductAttention: keys of shape (2x5x3) must be (...=(2), S, d=4)");
    REQUIRE_THROWS_WITH(attention(q, k, Variable(core::zeros({2, 4, 6}))),
                        "DotProductAttention: values of shape (2x4x6) must be (...=(2), S=5, v)");
    REQUIRE_THROWS_WITH(attention(q, Variable(core::zeros({3, 5, 4})), v),
                        "DotProductAttention: keys of shape (3x5x4) must be (...=(2), S, d=4)");
    REQUIRE_THROWS_WITH(attention(q, Variable(core::zeros({2, 1, 5, 4})), v),
                        "DotProductAttention: keys of shape (2x1x5x4) must be (...=(2), S, d=4)");
    // a mask that fits neither form is rejected by the masked softmax
    REQUIRE_THROWS_AS(attention(q, k, v, core::from_vector(std::vector<int64_t>{1, 2, 3}, {3})), ShapeError);
}

// ---- AdditiveAttention ---------------------------------------------------------------------------------

TEST_CASE(
    "AdditiveAttention.forward(queries, keys, values, valid_lens): seed 003's demo averages the first 2 / 6 "
    "values",
    "[nn][attention]") {
    Generator gen(0);
    AdditiveAttention attention({.key_size = 2, .query_size = 20, .num_hiddens = 8, .dropout = 0.1}, gen);
    attention.eval();
    std::vector<std::string> names;
    for (const auto& [name, p] : attention.named_parameters()) names.push_back(name + " " + shape_str(p.shape()));
    CHECK(names == std::vector<std::string>{"W_k.weight (8x2)", "W_q.weight (8x20)", "w_v.weight (1x8)"});

    const Variable queries(core::randn({2, 1, 20}, gen));
    const Variable keys(core::ones({2, 10, 2}));
    const Variable values(demo_values());
    const Tensor out = attention(queries, keys, values, core::from_vector(std::vector<int64_t>{2, 6}, {2})).value();
    CHECK(out.shape() == Shape{2, 1, 4});
    const std::vector<double> expected = {2, 3, 4, 5, 10, 11, 12, 13};
    const std::vector<double> got = out.to_vector();
    for (size_t i = 0; i < expected.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-5));
    const Tensor& w = attention.attention_weights;
    CHECK(w.shape() == Shape{2, 1, 10});
    for (int64_t s = 2; s < 10; ++s) CHECK(w.at({0, 0, s}) == 0.0);
    for (int64_t s = 6; s < 10; ++s) CHECK(w.at({1, 0, s}) == 0.0);
}

TEST_CASE("AdditiveAttention.forward: scores are w_vᵀ tanh(W_q q + W_k k), checked by hand for one pair",
          "[nn][attention]") {
    Generator gen(5);
    AdditiveAttention attention({.key_size = 3, .query_size = 2, .num_hiddens = 4, .dropout = 0.0}, gen);
    attention.to(DType::float64);
    const Tensor q = core::randn({1, 1, 2}, gen, DType::float64);
    const Tensor k = core::randn({1, 2, 3}, gen, DType::float64);
    const Tensor v = core::tensor({1, 0, 0, 1}, {1, 2, 2}, DType::float64);
    const Tensor out = attention(Variable(q), Variable(k), Variable(v)).value();
    // score_s = Σ_h w_v[h] tanh(Σ_i W_q[h, i] q_i + Σ_j W_k[h, j] k_s,j)
    auto score = [&](int64_t s) {
        double a = 0;
        for (int64_t h = 0; h < 4; ++h) {
            double pre = 0;
            for (int64_t i = 0; i < 2; ++i) pre += attention.W_q->weight.value().at({h, i}) * q.at({0, 0, i});
            for (int64_t j = 0; j < 3; ++j) pre += attention.W_k->weight.value().at({h, j}) * k.at({0, s, j});
            a += attention.w_v->weight.value().at({0, h}) * std::tanh(pre);
        }
        return a;
    };
    const double w0 = 1 / (1 + std::exp(score(1) - score(0)));
    CHECK(out.at({0, 0, 0}) == Approx(w0).epsilon(1e-12));
    CHECK(out.at({0, 0, 1}) == Approx(1 - w0).epsilon(1e-12));
}

TEST_CASE("AdditiveAttention.forward: shape errors name the layer and the shapes", "[nn][attention]") {
    AdditiveAttention attention({.key_size = 2, .query_size = 20, .num_hiddens = 8});
    const Variable keys(core::ones({2, 10, 2})), values(core::ones({2, 10, 4}));
    REQUIRE_THROWS_WITH(attention(Variable(core::zeros({2, 1, 19})), keys, values),
                        "AdditiveAttention: queries of shape (2x1x19) must be (B, T, query_size=20)");
    REQUIRE_THROWS_WITH(attention(Variable(core::zeros({2, 1, 20})), Variable(core::ones({2, 10, 3})), values),
                        "AdditiveAttention: keys of shape (2x10x3) must be (B=2, S, key_size=2)");
    REQUIRE_THROWS_WITH(attention(Variable(core::zeros({2, 1, 20})), keys, Variable(core::ones({2, 9, 4}))),
                        "AdditiveAttention: values of shape (2x9x4) must be (B=2, S=10, v)");
    REQUIRE_THROWS_AS(attention(Variable(core::zeros({2, 1, 20})), keys, Variable(core::ones({2, 9, 4}))), ShapeError);
    REQUIRE_THROWS_AS(AdditiveAttention({.key_size = 0, .query_size = 20, .num_hiddens = 8}), ValueError);
}

// ---- transpose_qkv / transpose_output ----------------------------------------------------------------

TEST_CASE(
    "transpose_qkv(X, num_heads), transpose_output(X, num_heads): head h of batch b is row b·H + h, and the "
    "round trip is exact",
    "[nn][attention]") {
    Generator gen(6);
    const int64_t B = 2, T = 3, H = 4, d = 2;
    const Tensor X = core::randn({B, T, H * d}, gen);
    const Tensor heads = transpose_qkv(Variable(X), H).value();
    CHECK(heads.shape() == Shape{B * H, T, d});
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t t = 0; t < T; ++t)
                for (int64_t j = 0; j < d; ++j) CHECK(heads.at({b * H + h, t, j}) == X.at({b, t, h * d + j}));
    CHECK(max_abs_diff(transpose_output(Variable(heads), H).value(), X) == 0.0);
    REQUIRE_THROWS_WITH(transpose_qkv(Variable(X), 3),
                        "transpose_qkv: num_hiddens=8 (X of shape (2x3x8)) is not divisible by num_heads=3");
    REQUIRE_THROWS_AS(transpose_output(Variable(heads), 3), ValueError);
    REQUIRE_THROWS_AS(transpose_qkv(Variable(core::zeros({2, 8})), 2), ShapeError);
}

// ---- MultiHeadAttention ------------------------------------------------------------------------------------

TEST_CASE(
    "MultiHeadAttention(100, 100, 100, 100, 5, 0.5): seed 000's shapes, parameter names and per-head masked "
    "weights",
    "[nn][attention]") {
    Generator gen(7);
    MultiHeadAttention attention(
        {.key_size = 100, .query_size = 100, .value_size = 100, .num_hiddens = 100, .num_heads = 5, .dropout = 0.5},
        gen);
    attention.eval();
    std::vector<std::string> names;
    for (const auto& [name, p] : attention.named_parameters()) names.push_back(name + " " + shape_str(p.shape()));
    CHECK(names == std::vector<std::string>{"W_q.weight (100x100)", "W_k.weight (100x100)", "W_v.weight (100x100)",
                                            "W_o.weight (100x100)"});
    const Variable X(core::ones({2, 4, 100}));
    const Variable Y(core::randn({2, 6, 100}, gen));
    const Tensor valid_lens = core::from_vector(std::vector<int64_t>{3, 2}, {2});
    const Tensor out = attention(X, Y, Y, valid_lens).value();
    CHECK(out.shape() == Shape{2, 4, 100});
    // d2l keeps the weights of all heads: (batch·heads, queries, keys)
    const Tensor& w = attention.attention_weights();
    REQUIRE(w.shape() == Shape{10, 4, 6});
    for (int64_t row = 0; row < 10; ++row) {
        const int64_t len = row < 5 ? 3 : 2;  // rows 0..4 are batch 0's heads
        for (int64_t t = 0; t < 4; ++t) {
            double total = 0;
            for (int64_t s = 0; s < 6; ++s) {
                total += w.at({row, t, s});
                if (s >= len) CHECK(w.at({row, t, s}) == 0.0);
            }
            CHECK(total == Approx(1.0));
        }
    }
    // with bias (seed 004's linears), each projection has a bias too
    MultiHeadAttention biased(
        {.key_size = 8, .query_size = 8, .value_size = 8, .num_hiddens = 8, .num_heads = 2, .bias = true});
    CHECK(biased.named_parameters().size() == 8);
    CHECK(biased.named_parameters()[1].first == "W_q.bias");
}

namespace {

// Seed 003's formula run literally, one head at a time:
//   head_h = attention(Q W_q,hᵀ + b_q,h, K W_k,hᵀ + b_k,h, V W_v,hᵀ + b_v,h)
//   out = [head_1 ... head_H] W_oᵀ + b_o
// where W_·,h are rows h·d .. (h+1)·d of each projection (the columns transpose_qkv gives head h).
Tensor heads_one_by_one(MultiHeadAttention& mha, const Tensor& Q, const Tensor& K, const Tensor& V,
                        const Allowed& allowed) {
    const int64_t H = mha.options.num_heads, d = mha.options.num_hiddens / H;
    auto project = [&](const Linear& lin, const Tensor& x, int64_t h) {
        const Tensor w = lin.weight.value().slice(0, h * d, (h + 1) * d);
        const Tensor b = lin.bias.defined() ? lin.bias.value().slice(0, h * d, (h + 1) * d) : Tensor();
        return core::linear(x, w, b);
    };
    std::vector<Tensor> heads;
    for (int64_t h = 0; h < H; ++h)
        heads.push_back(
            attention_oracle(project(*mha.W_q, Q, h), project(*mha.W_k, K, h), project(*mha.W_v, V, h), allowed, h)
                .out.to(Q.dtype()));
    const Tensor concat = core::concat(heads, 2);  // (B, T, H·d)
    return core::linear(concat, mha.W_o->weight.value(), mha.W_o->bias.defined() ? mha.W_o->bias.value() : Tensor());
}

}  // namespace

TEST_CASE(
    "MultiHeadAttention.forward(queries, keys, values, mask): equals running the heads one by one, for every "
    "form of mask",
    "[nn][attention]") {
    const DType dtype = GENERATE(DType::float32, DType::float64);
    const bool bias = GENERATE(false, true);
    Generator gen(8);
    MultiHeadAttention mha(
        {.key_size = 5, .query_size = 6, .value_size = 3, .num_hiddens = 8, .num_heads = 4, .bias = bias}, gen);
    mha.to(dtype);
    const Tensor Q = core::randn({kB, kT, 6}, gen, dtype);
    const Tensor K = core::randn({kB, kS, 5}, gen, dtype);
    const Tensor V = core::randn({kB, kS, 3}, gen, dtype);
    for (const MaskCase& c : mask_cases()) {
        SECTION(c.name + (bias ? " with bias " : " ") + std::string(core::dtype_name(dtype))) {
            const Tensor out = mha(Variable(Q), Variable(K), Variable(V), c.mask).value();
            CHECK(out.shape() == Shape{kB, kT, 8});
            const double tol = dtype == DType::float64 ? 1e-12 : 1e-6;
            CHECK(max_abs_diff(out, heads_one_by_one(mha, Q, K, V, c.allowed)) < tol);
        }
    }
}

TEST_CASE("MultiHeadAttention.forward: a 4-D bool mask (B, H, T, S) gives each head its own mask", "[nn][attention]") {
    Generator gen(9);
    const int64_t H = 2;
    MultiHeadAttention mha({.key_size = 4, .query_size = 4, .value_size = 4, .num_hiddens = 4, .num_heads = H}, gen);
    mha.to(DType::float64);
    const Tensor Q = core::randn({kB, kT, 4}, gen, DType::float64);
    const Tensor K = core::randn({kB, kS, 4}, gen, DType::float64);
    auto rule = [](int64_t b, int64_t h, int64_t t, int64_t s) { return (b + 2 * h + t + s) % 3 != 1; };
    std::vector<bool> keep;
    for (int64_t b = 0; b < kB; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t t = 0; t < kT; ++t)
                for (int64_t s = 0; s < kS; ++s) keep.push_back(rule(b, h, t, s));
    const Tensor out = mha(Variable(Q), Variable(K), Variable(K), core::from_vector(keep, {kB, H, kT, kS})).value();
    CHECK(max_abs_diff(out, heads_one_by_one(mha, Q, K, K, rule)) < 1e-12);
}

TEST_CASE("MultiHeadAttention.forward: bool masks and the equivalent valid lengths give identical outputs",
          "[nn][attention]") {
    Generator gen(10);
    MultiHeadAttention mha({.key_size = 6, .query_size = 6, .value_size = 6, .num_hiddens = 6, .num_heads = 3}, gen);
    mha.eval();
    const int64_t T = 5;
    const Variable X(core::randn({2, T, 6}, gen));
    // d2l's dec_valid_lens against seed 004's subsequent_mask
    const Tensor causal_lens = mha(X, X, X, causal_valid_lens(2, T)).value();
    const Tensor causal_mask = mha(X, X, X, subsequent_mask(T)).value();
    CHECK(max_abs_diff(causal_lens, causal_mask) == 0.0);
    // valid_lens (B) against seed 002's pad mask (B, 1, 1, S) and seed 004's (B, 1, S)
    const std::vector<int64_t> lens = {4, 2};
    std::vector<bool> keep;
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t s = 0; s < T; ++s) keep.push_back(s < lens[b]);
    const Tensor by_lens = mha(X, X, X, core::from_vector(lens, {2})).value();
    CHECK(max_abs_diff(by_lens, mha(X, X, X, core::from_vector(keep, {2, 1, 1, T})).value()) == 0.0);
    CHECK(max_abs_diff(by_lens, mha(X, X, X, core::from_vector(keep, {2, 1, T})).value()) == 0.0);
}

TEST_CASE("MultiHeadAttention: errors name the layer and the shapes", "[nn][attention]") {
    MultiHeadAttention mha({.key_size = 4, .query_size = 4, .value_size = 4, .num_hiddens = 4, .num_heads = 2});
    const Variable X(core::zeros({2, 3, 4}));
    REQUIRE_THROWS_WITH(mha(Variable(core::zeros({2, 3})), X, X),
                        "MultiHeadAttention: queries of shape (2x3) must be (B, T, query_size=4)");
    REQUIRE_THROWS_WITH(mha(X, Variable(core::zeros({2, 3, 5})), X),
                        "MultiHeadAttention: keys of shape (2x3x5) must be (B=2, S, key_size=4)");
    REQUIRE_THROWS_WITH(mha(X, X, Variable(core::zeros({2, 3, 3}))),
                        "MultiHeadAttention: values of shape (2x3x3) must be (B=2, S=3, value_size=4)");
    REQUIRE_THROWS_WITH(mha(X, Variable(core::zeros({3, 3, 4})), Variable(core::zeros({3, 3, 4}))),
                        "MultiHeadAttention: keys of shape (3x3x4) must be (B=2, S, key_size=4)");
    REQUIRE_THROWS_WITH(mha(X, X, X, core::from_vector(std::vector<int64_t>{1, 2, 3}, {3})),
                        "MultiHeadAttention: valid_lens of shape (3) must be (batch=2) or (batch=2, query steps)");
    REQUIRE_THROWS_WITH(mha(X, X, X, core::from_vector(std::vector<bool>(3 * 9, true), {3, 3, 3})),
                        "MultiHeadAttention: bool mask of shape (3x3x3) does not fit batch=2 and num_heads=2");
    REQUIRE_THROWS_WITH(
        MultiHeadAttention({.key_size = 4, .query_size = 4, .value_size = 4, .num_hiddens = 10, .num_heads = 3}),
        "MultiHeadAttention: num_hiddens=10 is not divisible by num_heads=3");
    REQUIRE_THROWS_AS(
        MultiHeadAttention({.key_size = 4, .query_size = 4, .value_size = 4, .num_hiddens = 4, .num_heads = 0}),
        ValueError);
}

// ---- step-by-step decoding with a KV cache --------------------------------------------------------------

TEST_CASE(
    "MultiHeadAttention.forward_step(..., cache): one token at a time equals the full forward with the "
    "no-peek mask",
    "[nn][attention]") {
    const DType dtype = GENERATE(DType::float32, DType::float64);
    Generator gen(11);
    const int64_t B = 2, T = 6, D = 8, H = 2;
    MultiHeadAttention mha({.key_size = D,
                            .query_size = D,
                            .value_size = D,
                            .num_hiddens = D,
                            .num_heads = H,
                            .dropout = 0.3,
                            .bias = true},
                           gen);
    mha.to(dtype);
    mha.eval();
    NoGradGuard no_grad;
    const Variable X(core::randn({B, T, D}, gen, dtype));
    const Tensor full_lens = mha(X, X, X, causal_valid_lens(B, T)).value();  // (B, T, D)
    const Tensor full_mask = mha(X, X, X, subsequent_mask(T)).value();
    CHECK(max_abs_diff(full_lens, full_mask) == 0.0);

    KVCache cache;
    CHECK(cache.empty());
    std::vector<Tensor> steps;
    for (int64_t t = 0; t < T; ++t) {
        const Variable x_t(X.value().slice(1, t, t + 1));  // (B, 1, D): the newest token
        // step t attends to keys 0..t: all of the cache, so no mask is needed
        steps.push_back(mha.forward_step(x_t, x_t, x_t, Tensor(), cache).value());
        CHECK(cache.steps() == t + 1);
        CHECK(cache.keys.shape() == Shape{B * H, t + 1, D / H});
        CHECK(mha.attention_weights().shape() == Shape{B * H, 1, t + 1});
    }
    CHECK(max_abs_diff(core::concat(steps, 1), full_lens) < tolerance(dtype));

    SECTION("a prefix of 3 tokens at once (with the no-peek mask), then one at a time") {
        KVCache chunked;
        std::vector<Tensor> parts;
        const Variable prefix(X.value().slice(1, 0, 3));
        parts.push_back(mha.forward_step(prefix, prefix, prefix, subsequent_mask(3), chunked).value());
        for (int64_t t = 3; t < T; ++t) {
            const Variable x_t(X.value().slice(1, t, t + 1));
            parts.push_back(mha.forward_step(x_t, x_t, x_t, Tensor(), chunked).value());
        }
        CHECK(max_abs_diff(core::concat(parts, 1), full_lens) < tolerance(dtype));
    }
    SECTION("clear() starts a new sequence") {
        cache.clear();
        CHECK(cache.empty());
        CHECK(cache.steps() == 0);
        const Variable x0(X.value().slice(1, 0, 1));
        CHECK(max_abs_diff(mha.forward_step(x0, x0, x0, Tensor(), cache).value(), steps[0]) == 0.0);
    }
}

TEST_CASE(
    "KVCache::append: steps written in place into room that doubles, equal to transpose_qkv of all steps, "
    "copies and replaced keys never write over each other",
    "[nn][attention]") {
    const DType dtype = GENERATE(DType::float32, DType::float64);
    Generator gen(13);
    const int64_t B = 3, T = 40, D = 8, H = 2, d = D / H;
    const Tensor K = core::randn({B, T, D}, gen, dtype), V = core::randn({B, T, D}, gen, dtype);
    const auto heads = [&](const Tensor& x, int64_t t) {  // transpose_qkv of steps [0, t)
        return transpose_qkv(Variable(x.slice(1, 0, t)), H).value();
    };

    KVCache cache;
    CHECK(cache.capacity() == 0);
    cache.append(K.slice(1, 0, 3), V.slice(1, 0, 3), H);  // a prefix of 3 at once
    CHECK(cache.capacity() == 16);
    const void* first_buffer = cache.keys.raw_data();
    std::vector<int64_t> capacities;
    for (int64_t t = 3; t < T; ++t) {
        cache.append(K.slice(1, t, t + 1), V.slice(1, t, t + 1), H);
        CHECK(cache.keys.shape() == Shape{B * H, t + 1, d});
        CHECK(max_abs_diff(cache.keys, heads(K, t + 1)) == 0.0);
        CHECK(max_abs_diff(cache.values, heads(V, t + 1)) == 0.0);
        // the transposed copy: the keys in columns [0, t + 1), zeros after them
        const Tensor kt = cache.keys_transposed();
        REQUIRE(kt.shape() == Shape{B * H, d, cache.capacity()});
        CHECK(max_abs_diff(kt.slice(2, 0, t + 1), heads(K, t + 1).transpose(1, 2)) == 0.0);
        CHECK(max_abs_diff(kt.slice(2, t + 1, cache.capacity()),
                           core::zeros({B * H, d, cache.capacity() - t - 1}, dtype)) == 0.0);
        capacities.push_back(cache.capacity());
        if (t + 1 <= 16) CHECK(cache.keys.raw_data() == first_buffer);  // no move while there is room
    }
    CHECK(capacities.front() == 16);
    CHECK(capacities.back() == 64);  // 16, then 2·16 at step 17, then 2·32 at step 33

    SECTION("the fused cached attention reads the views in place and gives what it gives on copies") {
        const Tensor q = core::randn({B, 1, D}, gen, dtype);
        CHECK_FALSE(cache.keys.is_contiguous());
        const core::CachedAttention in_place = core::cached_attention(q, cache.keys, cache.values, Tensor(), H, 0.5);
        const core::CachedAttention copied =
            core::cached_attention(q, cache.keys.contiguous(), cache.values.contiguous(), Tensor(), H, 0.5);
        CHECK(max_abs_diff(in_place.out, copied.out) == 0.0);
        CHECK(max_abs_diff(in_place.weights, copied.weights) == 0.0);
        // and with the scores read from the transposed keys: the same bits
        const Tensor lens = core::from_vector(std::vector<int64_t>{T, 7, 1}, {B});
        const core::CachedAttention plain = core::cached_attention(q, cache.keys, cache.values, lens, H, 0.5);
        const core::CachedAttention transposed =
            core::cached_attention(q, cache.keys, cache.values, lens, H, 0.5, cache.keys_transposed());
        CHECK(max_abs_diff(plain.out, transposed.out) == 0.0);
        CHECK(max_abs_diff(plain.weights, transposed.weights) == 0.0);
        CHECK_THROWS_WITH(
            core::cached_attention(q, cache.keys, cache.values, lens, H, 0.5, cache.keys_transposed().slice(2, 0, 16)),
            Contains("cached_attention: transposed keys"));
    }
    SECTION("two copies appending different steps each keep their own") {
        KVCache other = cache;
        CHECK(other.capacity() == other.steps());  // a copy has no room of its own
        const Tensor k1 = core::randn({B, 1, D}, gen, dtype), k2 = core::randn({B, 1, D}, gen, dtype);
        cache.append(k1, k1, H);
        other.append(k2, k2, H);
        CHECK(max_abs_diff(cache.keys.slice(1, T, T + 1), heads(k1, 1)) == 0.0);
        CHECK(max_abs_diff(other.keys.slice(1, T, T + 1), heads(k2, 1)) == 0.0);
        CHECK(max_abs_diff(other.keys.slice(1, 0, T), heads(K, T)) == 0.0);
        KVCache assigned;
        assigned = other;
        CHECK(assigned.capacity() == assigned.steps());
    }
    SECTION("keys set from outside (beam search reordering rows) move to a buffer of their own") {
        const Tensor rows = core::from_vector(std::vector<int64_t>{4, 5, 0, 1, 0, 1}, {B * H});
        cache.keys = core::index_select(cache.keys, 0, rows);
        cache.values = core::index_select(cache.values, 0, rows);
        CHECK(cache.capacity() == T);
        CHECK_FALSE(cache.keys_transposed().defined());  // stale: not offered
        const Tensor k = core::randn({B, 1, D}, gen, dtype);
        cache.append(k, k, H);
        CHECK(cache.capacity() == 2 * T);
        CHECK(max_abs_diff(cache.keys.slice(1, 0, T), core::index_select(heads(K, T), 0, rows)) == 0.0);
        CHECK(max_abs_diff(cache.values.slice(1, T, T + 1), heads(k, 1)) == 0.0);
    }
    SECTION("select_rows reorders the rows in place of beam search's index_select, keeping the room") {
        const std::vector<int64_t> rows{4, 5, 0, 1, 0, 1};
        const Tensor index = core::from_vector(rows, {B * H});
        const Tensor keys_before = cache.keys.contiguous(), values_before = cache.values.contiguous();
        cache.select_rows(rows);
        CHECK(cache.capacity() == 64);
        CHECK(max_abs_diff(cache.keys, core::index_select(keys_before, 0, index)) == 0.0);
        CHECK(max_abs_diff(cache.values, core::index_select(values_before, 0, index)) == 0.0);
        CHECK(max_abs_diff(cache.keys_transposed().slice(2, 0, T), cache.keys.transpose(1, 2)) == 0.0);
        const Tensor k = core::randn({B, 1, D}, gen, dtype);
        const void* buffer = cache.keys.raw_data();
        cache.append(k, k, H);
        CHECK(cache.keys.raw_data() == buffer);  // no move: the room came along
        CHECK(max_abs_diff(cache.keys.slice(1, T, T + 1), heads(k, 1)) == 0.0);
        CHECK_THROWS_WITH(cache.select_rows({0, 6}), Contains("row 6 out of range for a cache of 6 rows"));
        KVCache outside;  // keys set from outside are gathered as they are
        outside.keys = keys_before, outside.values = values_before;
        outside.select_rows({1});
        CHECK(max_abs_diff(outside.keys, keys_before.slice(0, 1, 2)) == 0.0);
    }
    SECTION("steps that do not fit are refused, naming both shapes") {
        const Tensor wrong = core::randn({B + 1, 1, D}, gen, dtype);
        CHECK_THROWS_WITH(cache.append(wrong, wrong, H),
                          Contains("KVCache::append") && Contains("(4x1x8)") && Contains("(6x40x4)"));
        CHECK_THROWS_AS(cache.append(K, V.slice(1, 0, 2), H), ShapeError);
        CHECK_THROWS_AS(KVCache().append(K, V, 3), ShapeError);  // 8 is not divisible by 3
    }
    SECTION("clear() drops the buffer") {
        cache.clear();
        CHECK(cache.empty());
        CHECK(cache.capacity() == 0);
    }
}

TEST_CASE(
    "MultiHeadAttention.forward_step(..., cache, append = false): cross-attention to cached encoder outputs "
    "equals the full forward",
    "[nn][attention]") {
    const DType dtype = GENERATE(DType::float32, DType::float64);
    Generator gen(12);
    const int64_t B = 2, T = 4, S = 5, D = 6, H = 3;
    MultiHeadAttention mha({.key_size = D, .query_size = D, .value_size = D, .num_hiddens = D, .num_heads = H}, gen);
    mha.to(dtype);
    mha.eval();
    NoGradGuard no_grad;
    const Variable dec(core::randn({B, T, D}, gen, dtype));
    const Variable enc_outputs(core::randn({B, S, D}, gen, dtype));
    const Tensor enc_valid_lens = core::from_vector(std::vector<int64_t>{5, 3}, {B});
    const Tensor full = mha(dec, enc_outputs, enc_outputs, enc_valid_lens).value();

    KVCache cache;
    std::vector<Tensor> steps;
    for (int64_t t = 0; t < T; ++t) {
        const Variable q_t(dec.value().slice(1, t, t + 1));
        // the encoder outputs are projected on the first step only; later
        // steps pass nothing and reuse the cache
        const Variable kv = t == 0 ? enc_outputs : Variable();
        steps.push_back(mha.forward_step(q_t, kv, kv, enc_valid_lens, cache, /*append=*/false).value());
        CHECK(cache.steps() == S);
    }
    CHECK(max_abs_diff(core::concat(steps, 1), full) < tolerance(dtype));
}

TEST_CASE(
    "MultiHeadAttention.forward_step(..., kv_rows): rows reading a shared cross-attention cache give what rows "
    "with their own copies give, fused and composed",
    "[nn][attention]") {
    const DType dtype = GENERATE(DType::float32, DType::float64);
    for (bool fused : {false, true}) {
        INFO("dtype " << core::dtype_name(dtype) << ", fused " << fused);
        Generator gen(14);
        const int64_t sentences = 2, S = 7, D = 8, H = 2;
        MultiHeadAttention mha(
            {.key_size = D, .query_size = D, .value_size = D, .num_hiddens = D, .num_heads = H, .fused = fused}, gen);
        mha.to(dtype);
        mha.eval();
        NoGradGuard no_grad;
        const Tensor enc = core::randn({sentences, S, D}, gen, dtype);
        const Tensor enc_lens = core::from_vector(std::vector<int64_t>{7, 4}, {sentences});
        // beam search's rows: hypotheses of sentence 1, 0, 1, 1
        const std::vector<int64_t> rows{1, 0, 1, 1};
        const auto n = static_cast<int64_t>(rows.size());
        const Tensor index = core::from_vector(rows, {n});
        const Tensor row_lens = core::index_select(enc_lens, 0, index);
        KVCache shared;
        (void)mha.forward_step(Variable(core::randn({sentences, 1, D}, gen, dtype)), Variable(enc), Variable(enc),
                               enc_lens, shared, /*append=*/false);  // filled once per sentence
        // each row's own copy of its sentence's cached keys and values (the
        // cache's rows are sentence-major, H heads each). Copied, not projected
        // again from the rows' encoder outputs: sgemm need not give a row the
        // same bits in a product of 4 sentences as in one of 2 (OpenBLAS's
        // Haswell kernels do not), and the kv_rows path reads the same cache.
        KVCache own;
        std::vector<int64_t> head_rows;
        for (const int64_t r : rows)
            for (int64_t h = 0; h < H; ++h) head_rows.push_back(r * H + h);
        const Tensor head_index = core::from_vector(head_rows, {n * H});
        own.keys = core::index_select(shared.keys, 0, head_index);
        own.values = core::index_select(shared.values, 0, head_index);
        const Variable enc_rows(core::index_select(enc, 0, index));
        const Variable q(core::randn({n, 1, D}, gen, dtype));
        const Tensor expected = mha.forward_step(q, Variable(), Variable(), row_lens, own, false).value();
        const Tensor expected_weights = mha.attention_weights();
        // and, up to rounding, what projecting the rows' encoder outputs again gives
        KVCache projected;
        const Tensor reprojected = mha.forward_step(q, enc_rows, enc_rows, row_lens, projected, false).value();
        CHECK(max_abs_diff(reprojected, expected) < tolerance(dtype));
        const Tensor got = mha.forward_step(q, Variable(), Variable(), row_lens, shared, false, rows).value();
        CHECK(max_abs_diff(got, expected) == 0.0);
        CHECK(max_abs_diff(mha.attention_weights(), expected_weights) == 0.0);
        CHECK(shared.keys.size(0) == sentences * H);  // still once per sentence
        CHECK_THROWS_WITH(
            mha.forward_step(q, Variable(), Variable(), row_lens, shared, false, std::vector<int64_t>{0, 2, 0, 0}),
            Contains("kv_row 2 out of range for a cache of 2 batch elements"));
        CHECK_THROWS_WITH(mha.forward_step(q, enc_rows, enc_rows, row_lens, shared, true, rows),
                          Contains("append must be false"));
    }
}

TEST_CASE(
    "MultiHeadAttention.forward_step, fused (core::cached_attention on the cache in place): the same outputs "
    "and weights as the composed step",
    "[nn][attention]") {
    const DType dtype = GENERATE(DType::float32, DType::float64);
    // heads of 4 (a compile-time head size in core/attention.cpp) and of 2 (the run-time one)
    for (int64_t H : {2, 4}) {
        INFO("dtype " << core::dtype_name(dtype) << ", heads " << H);
        const int64_t B = 3, T = 5, S = 6, D = 8;
        Generator init_a(31), init_b(31), data(32);
        auto make = [&](Generator& g, bool fused) {
            auto m = std::make_shared<MultiHeadAttention>(MultiHeadAttention::Options{.key_size = D,
                                                                                      .query_size = D,
                                                                                      .value_size = D,
                                                                                      .num_hiddens = D,
                                                                                      .num_heads = H,
                                                                                      .dropout = 0.2,
                                                                                      .fused = fused},
                                                          g);
            m->to(dtype);
            m->eval();
            return m;
        };
        const auto composed_ptr = make(init_a, false), fused_ptr = make(init_b, true);
        MultiHeadAttention &composed = *composed_ptr, &fused = *fused_ptr;
        NoGradGuard no_grad;
        const Variable X(core::randn({B, T, D}, data, dtype)), enc(core::randn({B, S, D}, data, dtype));
        const Tensor enc_lens = core::from_vector(std::vector<int64_t>{6, 2, 4}, {B});
        // self-attention: a prefix of 2 with per-query lengths (B, 2), then one step at a time without a mask
        KVCache self_a, self_b;
        const Variable prefix(X.value().slice(1, 0, 2));
        const Tensor prefix_lens = core::from_vector(std::vector<int64_t>{1, 2, 1, 2, 1, 2}, {B, 2});
        CHECK(max_abs_diff(fused.forward_step(prefix, prefix, prefix, prefix_lens, self_b).value(),
                           composed.forward_step(prefix, prefix, prefix, prefix_lens, self_a).value()) <
              tolerance(dtype));
        CHECK(max_abs_diff(fused.attention_weights(), composed.attention_weights()) < tolerance(dtype));
        for (int64_t t = 2; t < T; ++t) {
            const Variable x_t(X.value().slice(1, t, t + 1));
            CHECK(max_abs_diff(fused.forward_step(x_t, x_t, x_t, Tensor(), self_b).value(),
                               composed.forward_step(x_t, x_t, x_t, Tensor(), self_a).value()) < tolerance(dtype));
            CHECK(fused.attention_weights().shape() == Shape{B * H, 1, t + 1});
            CHECK(max_abs_diff(fused.attention_weights(), composed.attention_weights()) < tolerance(dtype));
        }
        CHECK(max_abs_diff(self_b.keys, self_a.keys) == 0.0);  // the cache itself is the same
        // cross-attention to cached encoder outputs with per-batch lengths
        KVCache cross_a, cross_b;
        for (int64_t t = 0; t < T; ++t) {
            const Variable q_t(X.value().slice(1, t, t + 1));
            const Variable kv = t == 0 ? enc : Variable();
            CHECK(max_abs_diff(fused.forward_step(q_t, kv, kv, enc_lens, cross_b, false).value(),
                               composed.forward_step(q_t, kv, kv, enc_lens, cross_a, false).value()) <
                  tolerance(dtype));
            CHECK(max_abs_diff(fused.attention_weights(), composed.attention_weights()) < tolerance(dtype));
        }
    }
    // the kernel's own checks name it and the shapes
    const Tensor q = core::zeros({2, 1, 4}), kv = core::zeros({4, 3, 2});
    CHECK_THROWS_WITH(core::cached_attention(q, kv, core::zeros({4, 2, 2}), Tensor(), 2, 1.0),
                      Catch::Contains("cached_attention") && Catch::Contains("(4x2x2)"));
    CHECK_THROWS_AS(core::cached_attention(q, kv, kv, Tensor(), 3, 1.0), ValueError);  // 4 is not divisible by 3
}

TEST_CASE("MultiHeadAttention.forward_step: a cache from another batch size is rejected", "[nn][attention]") {
    MultiHeadAttention mha({.key_size = 4, .query_size = 4, .value_size = 4, .num_hiddens = 4, .num_heads = 2});
    NoGradGuard no_grad;
    KVCache cache;
    const Variable x2(core::zeros({2, 1, 4})), x3(core::zeros({3, 1, 4}));
    mha.forward_step(x2, x2, x2, Tensor(), cache);
    REQUIRE_THROWS_WITH(mha.forward_step(x3, x3, x3, Tensor(), cache),
                        "MultiHeadAttention: the cache holds keys of shape (4x1x2), which do not fit batch=3 with "
                        "num_heads=2");
    REQUIRE_THROWS_AS(mha.forward_step(x3, Variable(), Variable(), Tensor(), cache, false), ShapeError);
    KVCache empty;
    REQUIRE_THROWS_WITH(mha.forward_step(x2, Variable(), Variable(), Tensor(), empty, false),
                        "MultiHeadAttention: keys (undefined) must be (B=2, S, key_size=4)");
}

// ---- attention pooling (seed 003) -------------------------------------------------------------------------

TEST_CASE("average_pooling(queries, values), nadaraya_watson(queries, keys, values): hand-computed values",
          "[nn][attention]") {
    const Variable queries(core::tensor({0, 1, 2}, {3}, DType::float64));
    const Variable values(core::tensor({1, 3}, {2}, DType::float64));
    CHECK(average_pooling(queries, values).value().to_vector() == std::vector<double>{2, 2, 2});

    // query 0 against keys [0, 1]: α = softmax([0, -1/2])
    const Variable keys(core::tensor({0, 1}, {2}, DType::float64));
    const PoolingOutput pooled = nadaraya_watson(queries, keys, values);
    const double a0 = 1 / (1 + std::exp(-0.5));
    CHECK(pooled.attention_weights.shape() == Shape{3, 2});
    CHECK(pooled.attention_weights.at({0, 0}) == Approx(a0).epsilon(1e-14));
    CHECK(pooled.output.value().at({0}) == Approx(a0 * 1 + (1 - a0) * 3).epsilon(1e-14));
    // query 2 against keys [0, 1]: α = softmax([-2, -1/2])
    const double a2 = 1 / (1 + std::exp(1.5));
    CHECK(pooled.output.value().at({2}) == Approx(a2 * 1 + (1 - a2) * 3).epsilon(1e-14));

    // keys (m) shared by every query == keys (n, m) repeated per query
    const Variable tiled_keys(keys.value().unsqueeze(0).expand({3, 2}).contiguous());
    const Variable tiled_values(values.value().unsqueeze(0).expand({3, 2}).contiguous());
    const Tensor tiled = nadaraya_watson(queries, tiled_keys, tiled_values).output.value();
    CHECK(max_abs_diff(tiled, pooled.output.value()) == 0.0);
    REQUIRE_THROWS_AS(nadaraya_watson(queries, keys, Variable(core::zeros({3}, DType::float64))), ShapeError);
    REQUIRE_THROWS_AS(average_pooling(queries, Variable(core::zeros({2, 2}))), ShapeError);
}

TEST_CASE("NWKernelRegression(): parameter w ~ U(0, 1), with w = 1 it is the non-parametric pooling",
          "[nn][attention]") {
    Generator gen(13);
    NWKernelRegression net(gen);
    REQUIRE(net.named_parameters().size() == 1);
    CHECK(net.named_parameters()[0].first == "w");
    CHECK(net.w.shape() == Shape{1});
    CHECK(net.w.item() >= 0.0);
    CHECK(net.w.item() < 1.0);

    net.to(DType::float64);
    core::fill_(net.w.value(), 1.0);
    const Variable queries(core::randn({4}, gen, DType::float64));
    const Variable keys(core::randn({4, 6}, gen, DType::float64));
    const Variable values(core::randn({4, 6}, gen, DType::float64));
    const PoolingOutput plain = nadaraya_watson(queries, keys, values);
    CHECK(max_abs_diff(net(queries, keys, values).value(), plain.output.value()) < 1e-15);
    CHECK(max_abs_diff(net.attention_weights, plain.attention_weights) < 1e-15);
}

TEST_CASE("make_pooling_data(n_train, gen), leave_one_out(x): d2l's regression data", "[nn][attention]") {
    Generator gen(14);
    const PoolingData data = make_pooling_data(50, gen);
    CHECK(data.x_train.shape() == Shape{50});
    CHECK(data.x_test.shape() == Shape{50});
    const std::vector<double> x = data.x_train.to_vector(), y = data.y_train.to_vector();
    CHECK(std::is_sorted(x.begin(), x.end()));
    double noise_var = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        CHECK(x[i] >= 0.0);
        CHECK(x[i] < 5.0);
        noise_var += std::pow(y[i] - pooling_target(x[i]), 2) / x.size();
    }
    CHECK(std::sqrt(noise_var) == Approx(0.5).margin(0.15));  // ε ~ N(0, 0.5²)
    CHECK(data.x_test.at({49}) == Approx(4.9));
    CHECK(data.y_truth.at({10}) == Approx(2 * std::sin(1.0) + 1.0));
    Generator again(14);
    CHECK(max_abs_diff(make_pooling_data(50, again).y_train, data.y_train) == 0.0);

    const Tensor loo = leave_one_out(core::tensor({1, 2, 3}, {3}));
    CHECK(loo.shape() == Shape{3, 2});
    CHECK(loo.to_vector() == std::vector<double>{2, 3, 1, 3, 1, 2});
}

TEST_CASE(
    "NWKernelRegression: 5 epochs of gradient descent (lr 0.5, summed squared error) lower the loss and fit "
    "better than average pooling",
    "[nn][attention]") {
    Generator gen(15);
    const PoolingData data = make_pooling_data(50, gen);
    const int64_t n = 50;
    // each training input attends to the other 49 (d2l's leave-one-out keys and values)
    const Variable x_train(data.x_train), y_train(data.y_train);
    const Variable keys(leave_one_out(data.x_train)), values(leave_one_out(data.y_train));

    NWKernelRegression net(gen);
    std::vector<double> losses;
    for (int epoch = 0; epoch < 5; ++epoch) {
        net.zero_grad();
        Variable err = net(x_train, keys, values) - y_train;  // (n)
        Variable loss = autograd::sum(err * err);             // MSELoss(reduction='none').sum()
        loss.backward();
        losses.push_back(loss.item());
        // w <- w - lr · dloss/dw
        NoGradGuard no_grad;
        core::add_(net.w.value(), net.w.grad(), -0.5);
    }
    INFO("losses " << losses[0] << " " << losses[1] << " " << losses[2] << " " << losses[3] << " " << losses[4]
                   << ", w = " << net.w.item());
    CHECK(losses.back() < losses.front());

    // on the test grid, every query sees all 50 training pairs
    NoGradGuard no_grad;
    const Variable x_test(data.x_test);
    const Variable test_keys(data.x_train.unsqueeze(0).expand({n, n}).contiguous());
    const Variable test_values(data.y_train.unsqueeze(0).expand({n, n}).contiguous());
    auto test_mse = [&](const Tensor& y_hat) {
        double total = 0;
        for (int64_t i = 0; i < n; ++i) total += std::pow(y_hat.at({i}) - data.y_truth.at({i}), 2) / n;
        return total;
    };
    const double average = test_mse(average_pooling(x_test, y_train).value());
    const double non_parametric = test_mse(nadaraya_watson(x_test, x_train, y_train).output.value());
    const double parametric = test_mse(net(x_test, test_keys, test_values).value());
    INFO("test MSE: average pooling " << average << ", non-parametric " << non_parametric << ", parametric "
                                      << parametric);
    CHECK(non_parametric < average);
    CHECK(parametric < average);
    // the learned weights of each test query form a distribution over the 50 training inputs
    CHECK(net.attention_weights.shape() == Shape{n, n});
}

TEST_CASE("MultiHeadAttention fused: the same outputs, weights and gradients as the composed ops, dropout included",
          "[nn][attention]") {
    // the same weights (same seed) twice, one through the fused kernel. Head sizes 2 (run-time
    // size), 8, 32 and 64 (the kernel's compile-time sizes: one vector register, several);
    // 6 keys (one chunk of the score kernel) and 21 (two, the second partly padding), and
    // 5 queries (a block of 4 rows and one left over)
    struct Sizes {
        int64_t num_hiddens, num_heads, keys;
    };
    for (const Sizes sizes : {Sizes{8, 4, 6}, Sizes{16, 2, 21}, Sizes{64, 2, 6}, Sizes{128, 2, 21}})
        for (double p : {0.0, 0.3})
            for (int mask_kind = 0; mask_kind < 3; ++mask_kind) {
                const int64_t D = sizes.num_hiddens, S = sizes.keys;
                core::Generator init_a(7), init_b(7), data(8);
                auto make = [&](core::Generator& g, bool fused) {
                    auto m =
                        std::make_shared<MultiHeadAttention>(MultiHeadAttention::Options{.key_size = D,
                                                                                         .query_size = D,
                                                                                         .value_size = D,
                                                                                         .num_hiddens = D,
                                                                                         .num_heads = sizes.num_heads,
                                                                                         .dropout = p,
                                                                                         .fused = fused},
                                                             g);
                    m->to(core::DType::float64);
                    return m;
                };
                auto composed = make(init_a, false), fused = make(init_b, true);
                const core::Tensor q = core::randn({3, 5, D}, data, core::DType::float64);
                const core::Tensor kv = core::randn({3, S, D}, data, core::DType::float64);
                const core::Tensor mask = mask_kind == 0   ? core::Tensor()
                                          : mask_kind == 1 ? core::from_vector(std::vector<int64_t>{S, 2, S - 2}, {3})
                                                           : core::randint({3, 5}, 0, S + 1, data);
                INFO("head size " << D / sizes.num_heads << ", " << S << " keys, dropout " << p << ", mask kind "
                                  << mask_kind);
                auto run = [&](MultiHeadAttention& m) {  // output, and the gradients of the queries and of W_q
                    Variable x(q, true), y(kv, true);
                    Variable out = m(x, y, y, mask);
                    autograd::sum(autograd::mul(out, out)).backward();
                    return std::vector<core::Tensor>{out.value(), x.grad(), y.grad(), m.W_q->weight.grad(),
                                                     m.attention->attention_weights};
                };
                const auto a = run(*composed), b = run(*fused);  // each model's generator draws the same masks
                for (size_t i = 0; i < a.size(); ++i) {
                    const std::vector<double> va = a[i].to_vector(), vb = b[i].to_vector();
                    REQUIRE(va.size() == vb.size());
                    for (size_t j = 0; j < va.size(); ++j) REQUIRE(va[j] == Approx(vb[j]).margin(1e-12));
                }
            }
}
