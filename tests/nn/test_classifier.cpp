// Seed 001's encoder-only classifier: shapes, names, masking, the L2 term,
// gradients of every parameter (float64). Its training run is in
// tests/optim/test_classifier_training.cpp (it needs an optimizer).
#include "nn/classifier.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace tformer;
using namespace tformer::nn;
using autograd::Variable;
using core::DType;
using core::Tensor;
using Pooling = TransformerClassifier::Pooling;

namespace {
TransformerClassifier::Options tiny(Pooling pooling) {
    return {.vocab_size = 7,
            .num_classes = 3,
            .max_len = 3,
            .num_hiddens = 4,
            .ffn_num_hiddens = 6,
            .num_heads = 2,
            .num_layers = 1,
            .dropout = 0.0,
            .pooling = pooling};
}

Tensor ids(std::vector<int64_t> v, int64_t B, int64_t T) { return core::from_vector(v, {B, T}); }
Tensor lens(std::vector<int64_t> v) { return core::from_vector(v, {static_cast<int64_t>(v.size())}); }

// max |a - b| over all elements
double max_diff(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    return core::max(core::abs(core::sub(a.to(DType::float64), b.to(DType::float64)))).item();
}
}  // namespace

TEST_CASE("TransformerClassifier: parameter names, shapes and seed 001's output init", "[nn][classifier]") {
    core::Generator gen(1);
    TransformerClassifier flat(tiny(Pooling::flatten), gen);
    auto params = flat.named_parameters();
    std::map<std::string, core::Shape> shapes;
    for (auto& [name, p] : params) shapes[name] = p.shape();
    CHECK(shapes.at("encoder.embedding.weight") == core::Shape{7, 4});
    CHECK(shapes.at("encoder.blks.block0.attention.W_q.weight") == core::Shape{4, 4});
    CHECK(shapes.at("encoder.blks.block0.ffn.dense1.weight") == core::Shape{6, 4});
    CHECK(shapes.at("output.weight") == core::Shape{3, 12});  // (C, max_len·D): seed 001's flatten
    CHECK(shapes.at("output.bias") == core::Shape{3});
    CHECK(flat.output->bias.value().to_vector<float>() == std::vector<float>{0.1f, 0.1f, 0.1f});
    // Xavier-uniform bound √(6 / (12 + 3))
    const double bound = std::sqrt(6.0 / 15.0);
    for (float w : flat.output->weight.value().to_vector<float>()) CHECK(std::abs(w) <= bound);

    TransformerClassifier mean(tiny(Pooling::mean), gen);
    CHECK(mean.output->weight.shape() == core::Shape{3, 4});

    Variable logits = flat(ids({1, 2, 3, 4, 0, 0}, 2, 3), lens({3, 1}));
    CHECK(logits.shape() == core::Shape{2, 3});
    CHECK(flat.attention_weights().size() == 1);
    CHECK(flat.attention_weights()[0].shape() == core::Shape{4, 3, 3});  // (B·H, T, T)
}

TEST_CASE("TransformerClassifier: no block = mean of raw embeddings + positions, no √D", "[nn][classifier]") {
    core::Generator gen(2);
    auto o = tiny(Pooling::mean);
    o.num_layers = 0;
    TransformerClassifier m(o, gen);
    const Tensor X = ids({1, 5, 2}, 1, 3);
    Variable logits = m(X, lens({2}));
    // by hand: h_t = E[x_t] + P[t], pooled = (h_0 + h_1) / 2, logits = W pooled + b
    const Tensor E = m.encoder->embedding->weight.value(), P = m.encoder->pos_encoding->P;
    const Tensor W = m.output->weight.value(), b = m.output->bias.value();
    for (int64_t c = 0; c < 3; ++c) {
        double expected = b.at({c});
        for (int64_t d = 0; d < 4; ++d) {
            const double pooled = (E.at({1, d}) + P.at({0, 0, d}) + E.at({5, d}) + P.at({0, 1, d})) / 2;
            expected += W.at({c, d}) * pooled;
        }
        CHECK(logits.value().at({0, c}) == Approx(expected).margin(1e-5));
    }
}

TEST_CASE("TransformerClassifier: padding never reaches the logits", "[nn][classifier]") {
    for (Pooling pooling : {Pooling::flatten, Pooling::mean}) {
        core::Generator gen(3);
        TransformerClassifier m(tiny(pooling), gen);
        Variable a = m(ids({1, 2, 3, 4, 0, 0}, 2, 3), lens({3, 1}));
        Variable b = m(ids({1, 2, 3, 4, 6, 5}, 2, 3), lens({3, 1}));  // other tokens in the padding
        CHECK(max_diff(a.value(), b.value()) == 0.0);
    }
    // Mean pooling takes any length up to max_len: the same sentence padded to
    // 2 or to 3 steps gives the same logits.
    core::Generator gen(4);
    TransformerClassifier m(tiny(Pooling::mean), gen);
    Variable short_pad = m(ids({4, 2}, 1, 2), lens({2}));
    Variable long_pad = m(ids({4, 2, 0}, 1, 3), lens({2}));
    CHECK(max_diff(short_pad.value(), long_pad.value()) < 1e-6);
    // Undefined valid_lens: every step is valid.
    CHECK(max_diff(m(ids({4, 2, 1}, 1, 3), Tensor()).value(), m(ids({4, 2, 1}, 1, 3), lens({3})).value()) == 0.0);
}

TEST_CASE("TransformerClassifier: bad input is a clear error", "[nn][classifier]") {
    core::Generator gen(5);
    TransformerClassifier flat(tiny(Pooling::flatten), gen);
    TransformerClassifier mean(tiny(Pooling::mean), gen);
    CHECK_THROWS_WITH(flat(ids({1, 2}, 1, 2), lens({2})), Catch::Contains("flatten pooling needs exactly max_len = 3"));
    CHECK_THROWS_WITH(mean(ids({1, 2, 3, 4}, 1, 4), lens({2})), Catch::Contains("1 to max_len = 3 steps"));
    CHECK_THROWS_WITH(mean(ids({1, 2, 3}, 1, 3), lens({0})), Catch::Contains("valid length 0 not in [1, 3]"));
    CHECK_THROWS_WITH(mean(ids({1, 2, 3}, 1, 3), lens({2, 2})), Catch::Contains("valid_lens of shape (2)"));
    CHECK_THROWS_WITH(mean(core::from_vector(std::vector<int64_t>{1, 2, 3}, {3}), lens({2})),
                      Catch::Contains("token ids of shape (3) must be (B, T)"));
    CHECK_THROWS_AS(mean(ids({1, 2, 9}, 1, 3), lens({3})), IndexError);  // token outside the vocabulary
    auto o = tiny(Pooling::mean);
    o.num_heads = 3;
    CHECK_THROWS_WITH(TransformerClassifier(o), Catch::Contains("divisible by num_heads 3"));
    o = tiny(Pooling::mean);
    o.max_len = 0;
    CHECK_THROWS_WITH(TransformerClassifier(o), Catch::Contains("max_len 0"));
    Variable logits = mean(ids({1, 2, 3}, 1, 3), lens({3}));
    CHECK_THROWS_WITH(mean.loss(logits, lens({0}), -1.0), Catch::Contains("l2_reg_lambda -1"));
}

TEST_CASE("TransformerClassifier: seed 001's L2 term", "[nn][classifier]") {
    core::Generator gen(6);
    TransformerClassifier m(tiny(Pooling::mean), gen);
    double expected = 0;
    for (float w : m.output->weight.value().to_vector<float>()) expected += 0.5 * w * w;
    expected += 0.5 * 3 * 0.1 * 0.1;  // the bias, 0.1 each
    CHECK(m.l2_loss().value().item() == Approx(expected).epsilon(1e-6));

    const Tensor X = ids({1, 2, 3, 4, 5, 0}, 2, 3), L = lens({3, 2}), y = lens({2, 0});
    Variable plain = m.loss(m(X, L), y, 0.0);
    Variable with_l2 = m.loss(m(X, L), y, 0.25);
    CHECK(with_l2.value().item() == Approx(plain.value().item() + 0.25 * expected).epsilon(1e-6));

    // d(λ·l2)/dW = λ·W: the difference of the two gradients
    m.zero_grad();
    plain.backward();
    const Tensor g0 = m.output->weight.grad().clone();
    m.zero_grad();
    with_l2.backward();
    const Tensor g1 = m.output->weight.grad();
    CHECK(max_diff(core::sub(g1, g0), core::mul(m.output->weight.value(), 0.25)) < 1e-6);
}

TEST_CASE("gradcheck TransformerClassifier w.r.t. every parameter (float64)", "[nn][classifier][gradcheck]") {
    // The inputs are token ids, so the derivatives to check are those of the
    // parameters: central differences on each parameter element in place,
    // against the gradient backward() accumulates, with gradcheck's
    // tolerances (eps 1e-6, atol 1e-5, rtol 1e-3).
    for (Pooling pooling : {Pooling::flatten, Pooling::mean}) {
        core::Generator gen(7);
        TransformerClassifier m(tiny(pooling), gen);
        m.to(DType::float64);
        const Tensor X = ids({1, 2, 3, 4, 6, 0}, 2, 3), L = lens({3, 2}), y = lens({2, 0});
        const double lambda = 0.1;
        auto loss = [&] { return m.loss(m(X, L), y, lambda); };
        m.zero_grad();
        loss().backward();
        int64_t checked = 0, bad = 0;
        for (auto& [name, p] : m.named_parameters()) {
            Tensor value = p.value();
            REQUIRE(value.is_contiguous());
            double* data = value.data<double>();
            const std::vector<double> analytical = p.grad().to_vector<double>();
            for (int64_t i = 0; i < value.numel(); ++i) {
                const double saved = data[i];
                data[i] = saved + 1e-6;
                const double up = loss().value().item();
                data[i] = saved - 1e-6;
                const double down = loss().value().item();
                data[i] = saved;
                const double numerical = (up - down) / 2e-6;
                ++checked;
                if (std::abs(analytical[i] - numerical) > 1e-5 + 1e-3 * std::abs(numerical)) {
                    ++bad;
                    UNSCOPED_INFO(name << "[" << i << "]: analytical " << analytical[i] << ", numerical " << numerical);
                }
            }
        }
        CHECK(checked > 150);
        CHECK(bad == 0);
    }
}
