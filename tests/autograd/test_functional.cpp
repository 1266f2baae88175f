// autograd/functional.hpp and autograd/linalg.hpp: forward values against
// the core kernels and hand-computed numbers, the fused ops against their
// compositions (values and gradients), and the gradient facts that matter
// in a Transformer (masked entries and the padding row get no gradient,
// ignored targets add nothing). Jacobians are checked in
// test_gradcheck_functional.cpp.
#include "autograd/autograd.hpp"
#include "core/core.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>

using namespace tformer;
using namespace tformer::autograd;
using core::DType;
using core::Tensor;

namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

Tensor t64(std::vector<double> values, core::Shape shape) { return core::tensor(values, shape, DType::float64); }

Tensor randn64(const core::Shape& shape, uint64_t seed) {
    core::Generator gen(seed);
    return core::randn(shape, gen, DType::float64);
}

// Same shape and every element within `tol` (absolute).
void check_close(const Tensor& got, const Tensor& want, double tol = 1e-12) {
    REQUIRE(core::shape_str(got.shape()) == core::shape_str(want.shape()));
    const std::vector<double> g = got.to_vector(), w = want.to_vector();
    for (size_t i = 0; i < g.size(); ++i) {
        INFO("element " << i);
        CHECK(g[i] == Approx(w[i]).margin(tol).epsilon(tol));
    }
}

void check_values(const Tensor& got, std::vector<double> want, double tol = 1e-12) {
    const std::vector<double> g = got.to_vector();
    REQUIRE(g.size() == want.size());
    for (size_t i = 0; i < g.size(); ++i) {
        INFO("element " << i);
        CHECK(g[i] == Approx(want[i]).margin(tol));
    }
}

// f's value and the gradients of its inputs after backward with `upstream`
// (undefined: f is a scalar loss).
struct Evaluated {
    Tensor value;
    std::vector<Tensor> grads;
};
Evaluated evaluate(const Fn& f, const std::vector<Tensor>& inputs, const Tensor& upstream = {}) {
    std::vector<Variable> leaves;
    for (const Tensor& t : inputs) leaves.emplace_back(t, true);
    const Variable out = f(leaves);
    out.backward(upstream);
    Evaluated e{out.value(), {}};
    for (const Variable& v : leaves) e.grads.push_back(v.grad());
    return e;
}

Variable undefined() { return Variable(); }

}  // namespace

// ============================ softmax family ============================

TEST_CASE("softmax(x), log_softmax(x): hand numbers and the core kernels", "[autograd][functional]") {
    // row [0, 0, 0] is uniform; row [0, ln 2, ln 5] has weights 1 : 2 : 5
    const Tensor x = t64({0, 0, 0, 0, std::log(2.0), std::log(5.0)}, {2, 3});
    const Variable v(x, true);
    check_values(softmax(v).value(), {1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 8, 2.0 / 8, 5.0 / 8});
    check_values(log_softmax(v).value(), {std::log(1.0 / 3), std::log(1.0 / 3), std::log(1.0 / 3), std::log(1.0 / 8),
                                          std::log(2.0 / 8), std::log(5.0 / 8)});
    CHECK(softmax(v).op_name() == "softmax");
    CHECK(log_softmax(v).op_name() == "log_softmax");

    // softmax's outputs sum to 1 in each row, so Σ_i y_i has zero gradient
    sum(softmax(v)).backward();
    check_values(v.grad(), {0, 0, 0, 0, 0, 0});

    const Tensor big = randn64({2, 3, 4}, 1);
    check_close(softmax(Variable(big)).value(), core::softmax(big), 0);
    check_close(log_softmax(Variable(big)).value(), core::log_softmax(big), 0);
}

TEST_CASE("fused == composed: softmax, log_softmax, layer_norm, cross_entropy agree in values and gradients",
          "[autograd][functional]") {
    const Tensor targets = core::from_vector(std::vector<int64_t>{0, 2, -100, 1, 4, 2}, {2, 3});
    const Tensor pad_targets = core::from_vector(std::vector<int64_t>{0, 2, 3, 1, 4, 3}, {2, 3});
    auto ce = [&](const Tensor& tg, CrossEntropyOptions o) {
        return std::pair<Fn, Fn>{
            [=](const std::vector<Variable>& in) { return cross_entropy(in[0], tg, o); },
            [=](const std::vector<Variable>& in) { return composed::cross_entropy(in[0], tg, o); }};
    };
    struct Case {
        std::string name;
        std::vector<Tensor> inputs;
        std::pair<Fn, Fn> fused_and_composed;
    };
    const Tensor x = randn64({2, 3, 5}, 7);
    const Tensor xt = randn64({5, 3}, 8).transpose(0, 1);  // (3, 5), non-contiguous
    const Tensor w = randn64({5}, 9), b = randn64({5}, 10);
    const std::vector<Case> cases = {
        {"softmax(x)",
         {x},
         {[](auto& in) { return softmax(in[0]); }, [](auto& in) { return composed::softmax(in[0]); }}},
        {"softmax(x) on a transposed view",
         {xt},
         {[](auto& in) { return softmax(in[0]); }, [](auto& in) { return composed::softmax(in[0]); }}},
        {"log_softmax(x)",
         {x},
         {[](auto& in) { return log_softmax(in[0]); }, [](auto& in) { return composed::log_softmax(in[0]); }}},
        {"log_softmax(x) on a transposed view",
         {xt},
         {[](auto& in) { return log_softmax(in[0]); }, [](auto& in) { return composed::log_softmax(in[0]); }}},
        {"layer_norm(x, w, b, 1e-5)",
         {x, w, b},
         {[](auto& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
          [](auto& in) { return composed::layer_norm(in[0], in[1], in[2], 1e-5); }}},
        {"layer_norm(x, {}, {}, 1e-5)",
         {x},
         {[](auto& in) { return layer_norm(in[0], undefined(), undefined(), 1e-5); },
          [](auto& in) { return composed::layer_norm(in[0], undefined(), undefined(), 1e-5); }}},
        {"cross_entropy mean, with an ignored target", {x}, ce(targets, {})},
        {"cross_entropy sum", {x}, ce(targets, {.reduction = Reduction::sum})},
        {"cross_entropy none", {x}, ce(targets, {.reduction = Reduction::none})},
        {"cross_entropy ignore_index 3 (a pad id), label smoothing 0.1",
         {x},
         ce(pad_targets, {.ignore_index = 3, .label_smoothing = 0.1})},
        {"cross_entropy none, label smoothing 0.3",
         {x},
         ce(targets, {.label_smoothing = 0.3, .reduction = Reduction::none})},
        {"cross_entropy on transposed logits, label smoothing 1",
         {xt},
         ce(core::from_vector(std::vector<int64_t>{4, 0, 2}, {3}), {.label_smoothing = 1.0})},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        const auto& [fused, comp] = c.fused_and_composed;
        // a random upstream gradient exercises every output element, not just their sum
        Tensor up;
        {
            NoGradGuard no_grad;
            std::vector<Variable> in;
            for (const Tensor& t : c.inputs) in.emplace_back(t);
            const Variable probe = fused(in);
            if (probe.numel() > 1) up = randn64(probe.shape(), 11);
        }
        const Evaluated a = evaluate(fused, c.inputs, up);
        const Evaluated b_ = evaluate(comp, c.inputs, up);
        check_close(a.value, b_.value, 1e-12);
        REQUIRE(a.grads.size() == b_.grads.size());
        for (size_t i = 0; i < a.grads.size(); ++i) {
            INFO("gradient of input " << i);
            check_close(a.grads[i], b_.grads[i], 1e-10);
        }
    }
}

TEST_CASE(
    "fused layers == their composed ops, bit for bit in float32: add_layer_norm (AddNorm), linear_relu (FFN), "
    "embedding_positional (input layer), dropout masks included",
    "[autograd][functional]") {
    core::Generator gen(21);
    auto randn32 = [&](const core::Shape& shape) { return core::randn(shape, gen, DType::float32); };
    const Tensor x = randn32({3, 4, 8}), y = randn32({3, 4, 8}), w = randn32({8}), b = randn32({8});
    const Tensor keep = core::dropout_mask({3, 4, 8}, 0.1, gen, DType::float32);
    const Tensor W1 = randn32({16, 8}), b1 = randn32({16});
    const Tensor E = randn32({10, 8}), pos = randn32({4, 8});
    const Tensor id = core::randint({3, 4}, 0, 10, gen);
    struct Case {
        std::string name;
        std::vector<Tensor> inputs;
        Fn fused, composed;
    };
    const std::vector<Case> cases = {
        {"add_layer_norm with a mask",
         {x, y, w, b},
         [&](const std::vector<Variable>& in) { return add_layer_norm(in[0], in[1], keep, in[2], in[3], 1e-5); },
         [&](const std::vector<Variable>& in) {
             return layer_norm(add(mul(in[1], Variable(keep)), in[0]), in[2], in[3], 1e-5);
         }},
        {"add_layer_norm without a mask",
         {x, y, w, b},
         [&](const std::vector<Variable>& in) { return add_layer_norm(in[0], in[1], Tensor(), in[2], in[3], 1e-5); },
         [&](const std::vector<Variable>& in) { return layer_norm(add(in[1], in[0]), in[2], in[3], 1e-5); }},
        {"linear_relu",
         {x, W1, b1},
         [&](const std::vector<Variable>& in) { return linear_relu(in[0], in[1], in[2]); },
         [&](const std::vector<Variable>& in) { return relu(linear(in[0], in[1], in[2])); }},
        {"embedding_positional, scale √8, mask, padding_idx 3",
         {E},
         [&](const std::vector<Variable>& in) { return embedding_positional(in[0], id, std::sqrt(8.0), pos, keep, 3); },
         [&](const std::vector<Variable>& in) {
             return mul(add(mul(embedding(in[0], id, 3), std::sqrt(8.0)), Variable(pos)), Variable(keep));
         }},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        const Tensor up = randn32(c.name.starts_with("linear") ? core::Shape{3, 4, 16} : core::Shape{3, 4, 8});
        const Evaluated a = evaluate(c.fused, c.inputs, up);
        const Evaluated e = evaluate(c.composed, c.inputs, up);
        CHECK(a.value.to_vector() == e.value.to_vector());
        for (size_t i = 0; i < a.grads.size(); ++i) {
            INFO("gradient of input " << i);
            CHECK(a.grads[i].to_vector() == e.grads[i].to_vector());
        }
    }
    // errors name the op and the shapes
    CHECK_THROWS_WITH(add_layer_norm(Variable(x), Variable(W1), Tensor(), Variable(), Variable(), 1e-5),
                      Catch::Contains("add_layer_norm: y has shape (16x8), expected (3x4x8)"));
    CHECK_THROWS_WITH(embedding_positional(Variable(E), core::full({3, 4}, 10, DType::int64), 1.0, pos, Tensor()),
                      Catch::Contains("embedding_positional") && Catch::Contains("10"));
    CHECK_THROWS_WITH(embedding_positional(Variable(E), id, 1.0, randn32({5, 8}), Tensor()),
                      Catch::Contains("embedding_positional: pos (5x8) must be (T, D) = (4, 8)"));
}

TEST_CASE("composed::softmax(x): subtracting the detached row max changes nothing but the range of exp",
          "[autograd][functional]") {
    // rows of ±1e4 overflow exp() without the shift, and the graph holds no max node
    const Variable x(t64({1e4, 1e4 - std::log(3.0), -1e4, -1e4}, {2, 2}), true);
    const Variable y = composed::softmax(x);
    check_values(y.value(), {0.75, 0.25, 0.5, 0.5});
    const Tensor up = t64({1, 0, 0, 1}, {2, 2});
    y.backward(up);
    // dx = y ⊙ (dy - Σ dy y): row 0: [.75(1-.75), .25(0-.75)], row 1: [.5(0-.5), .5(1-.5)]
    check_values(x.grad(), {0.1875, -0.1875, -0.25, 0.25});
}

// ============================ masked softmax ============================

TEST_CASE("masked_softmax(x, valid_lens): seed 003's lengths [2, 3] and [[1, 3], [2, 4]] on (2, 2, 4)",
          "[autograd][functional]") {
    const Tensor x = randn64({2, 2, 4}, 3);
    const Tensor per_batch = core::from_vector(std::vector<int64_t>{2, 3}, {2});
    const Tensor per_row = core::from_vector(std::vector<int64_t>{1, 3, 2, 4}, {2, 2});
    for (const Tensor& lens : {per_batch, per_row}) {
        INFO("valid_lens " << core::shape_str(lens.shape()));
        const Variable v(x, true);
        const Variable y = masked_softmax(v, lens);
        check_close(y.value(), core::masked_softmax(x, lens), 0);
        CHECK(y.op_name() == "masked_softmax");
        y.backward(randn64({2, 2, 4}, 4));
        // every entry at or after its row's valid length: zero probability and zero gradient
        const std::vector<int64_t> len = per_row.to_vector<int64_t>();
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t t = 0; t < 2; ++t) {
                const int64_t n = lens.dim() == 1 ? lens.to_vector<int64_t>()[b] : len[b * 2 + t];
                for (int64_t s = n; s < 4; ++s) {
                    CHECK(y.value().at({b, t, s}) == 0.0);
                    CHECK(v.grad().at({b, t, s}) == 0.0);
                }
            }
    }
}

TEST_CASE("masked_softmax_by_mask(x, keep): a no-peek mask gives the future zero weight and zero gradient",
          "[autograd][functional]") {
    const Tensor x = randn64({2, 3, 3}, 5);
    std::vector<bool> lower;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) lower.push_back(j <= i);
    const Tensor keep = core::from_vector(lower, {3, 3});  // (T, T) broadcast over the batch
    const Variable v(x, true);
    const Variable y = masked_softmax_by_mask(v, keep);
    check_close(y.value(), core::masked_softmax_by_mask(x, keep), 0);
    y.backward(randn64({2, 3, 3}, 6));
    for (int64_t b = 0; b < 2; ++b) {
        CHECK(y.value().at({b, 0, 0}) == Approx(1.0));  // the first step sees only itself
        for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = i + 1; j < 3; ++j) {
                CHECK(y.value().at({b, i, j}) == 0.0);
                CHECK(v.grad().at({b, i, j}) == 0.0);
            }
        // the first row's softmax is constant 1: no gradient reaches its only entry either
        CHECK(v.grad().at({b, 0, 0}) == Approx(0.0).margin(1e-15));
    }
}

// ============================ layer norm ============================

TEST_CASE("layer_norm(x, weight, bias, eps): hand numbers and the core kernel", "[autograd][functional]") {
    // x = [1, 2, 3, 4]: mean 2.5, biased variance 1.25
    const double eps = 1e-5, s = 1.0 / std::sqrt(1.25 + eps);
    const Variable x(t64({1, 2, 3, 4}, {1, 4}), true);
    const Variable w(t64({1, 2, 1, 2}, {4}), true);
    const Variable b(t64({0, 0, 1, 1}, {4}), true);
    const Variable y = layer_norm(x, w, b, eps);
    check_values(y.value(), {-1.5 * s, -0.5 * s * 2, 0.5 * s + 1, 1.5 * s * 2 + 1});
    check_values(layer_norm(x, undefined(), undefined(), eps).value(), {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s});
    sum(y).backward();
    check_values(b.grad(), {1, 1, 1, 1});                            // dbias = Σ_rows dy
    check_values(w.grad(), {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s});  // dweight = Σ_rows dy ⊙ x̂

    const Tensor xr = randn64({2, 3, 5}, 12), wr = randn64({5}, 13), br = randn64({5}, 14);
    check_close(layer_norm(Variable(xr), Variable(wr), Variable(br), eps).value(), core::layer_norm(xr, wr, br, eps).y,
                0);
}

// ============================ embedding ============================

TEST_CASE("embedding(weight, ids, padding_idx): rows looked up, repeats accumulate, the padding row gets no gradient",
          "[autograd][functional]") {
    const Variable weight(t64({0, 0, 1, 1, 2, 2, 3, 3}, {4, 2}), true);  // row v = [v, v]
    const Tensor ids = core::from_vector(std::vector<int64_t>{2, 0, 2, 3, 1, 0}, {2, 3});
    const Variable y = embedding(weight, ids, /*padding_idx=*/0);
    CHECK(core::shape_str(y.shape()) == "(2x3x2)");
    check_values(y.value(), {2, 2, 0, 0, 2, 2, 3, 3, 1, 1, 0, 0});  // the padding row is still read
    // upstream gradient: position p gets [p, 10p]
    std::vector<double> up;
    for (int p = 0; p < 6; ++p) up.insert(up.end(), {double(p), 10.0 * p});
    y.backward(t64(up, {2, 3, 2}));
    // row 0 (padding, at positions 1 and 5): zero; row 1: position 4; row 2: positions 0 + 2; row 3: position 3
    check_values(weight.grad(), {0, 0, 4, 40, 2, 20, 3, 30});

    weight.zero_grad();
    embedding(weight, ids).backward(t64(up, {2, 3, 2}));  // no padding index: row 0 collects 1 + 5
    check_values(weight.grad(), {6, 60, 4, 40, 2, 20, 3, 30});
}

// ============================ cross-entropy ============================

TEST_CASE("cross_entropy(logits, targets, options): hand numbers for each reduction, ignore_index, label smoothing",
          "[autograd][functional]") {
    // row 0: [0, 0], target 0: p = [1/2, 1/2], loss ln 2
    // row 1: [ln 3, 0], target 0: p = [3/4, 1/4], loss ln 4/3
    // row 2: target -100 (ignored): loss 0
    const Tensor logits = t64({0, 0, std::log(3.0), 0, 5, -5}, {3, 2});
    const Tensor targets = core::from_vector(std::vector<int64_t>{0, 0, -100}, {3});
    const double l0 = std::log(2.0), l1 = std::log(4.0 / 3);

    struct Case {
        const char* name;
        CrossEntropyOptions options;
        std::vector<double> loss;
        std::vector<double> grad;  // of Σ loss, (3, 2)
    };
    // ε = 0.2 and V = 2: q = [0.9, 0.1] on target 0
    const double s1 = -(0.9 * std::log(0.75) + 0.1 * std::log(0.25));
    const std::vector<Case> cases = {
        {"none", {.reduction = Reduction::none}, {l0, l1, 0}, {-0.5, 0.5, -0.25, 0.25, 0, 0}},
        {"sum", {.reduction = Reduction::sum}, {l0 + l1}, {-0.5, 0.5, -0.25, 0.25, 0, 0}},
        // mean divides by the 2 targets that count, not by 3 rows
        {"mean", {}, {(l0 + l1) / 2}, {-0.25, 0.25, -0.125, 0.125, 0, 0}},
        // dloss/dlogits = p - q
        {"none, label smoothing 0.2",
         {.label_smoothing = 0.2, .reduction = Reduction::none},
         {l0, s1, 0},
         {-0.4, 0.4, -0.15, 0.15, 0, 0}},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        const Variable v(logits, true);
        const Variable loss = cross_entropy(v, targets, c.options);
        check_values(loss.value(), c.loss);
        CHECK(loss.op_name() == "cross_entropy");
        sum(loss).backward();
        check_values(v.grad(), c.grad);
    }
}

TEST_CASE("cross_entropy(logits, targets): logits (B, T, V) against targets (B, T)", "[autograd][functional]") {
    const Tensor logits = randn64({2, 3, 4}, 15);
    const Tensor targets = core::from_vector(std::vector<int64_t>{0, 3, 1, 2, 2, 0}, {2, 3});
    const Variable v(logits, true);
    const Variable rows = cross_entropy(v, targets, {.reduction = Reduction::none});
    CHECK(core::shape_str(rows.shape()) == "(2x3)");
    check_close(rows.value(),
                core::cross_entropy_rows(logits.reshape({6, 4}), targets.reshape({6}), 0, -100).reshape({2, 3}));
    const Variable loss = cross_entropy(v, targets);
    CHECK(loss.dim() == 0);
    CHECK(loss.item() == Approx(core::mean(rows.value()).item()));
}

TEST_CASE("cross_entropy(logits, targets, mean): every target ignored gives loss 0 and zero gradient",
          "[autograd][functional]") {
    const Tensor targets = core::from_vector(std::vector<int64_t>{-100, -100}, {2});
    for (bool use_composed : {false, true}) {
        INFO((use_composed ? "composed" : "fused"));
        const Variable v(randn64({2, 3}, 16), true);
        const Variable loss = use_composed ? composed::cross_entropy(v, targets) : cross_entropy(v, targets);
        CHECK(loss.item() == 0.0);  // PyTorch would give NaN (0/0)
        loss.backward();
        check_values(v.grad(), {0, 0, 0, 0, 0, 0});
    }
}

TEST_CASE("cross_entropy(logits, targets): errors name the shapes and the bad target",
          "[autograd][functional][errors]") {
    const Variable v(randn64({2, 3}, 17), true);
    const Tensor good = core::from_vector(std::vector<int64_t>{0, 1}, {2});
    for (bool use_composed : {false, true}) {
        INFO((use_composed ? "composed" : "fused"));
        auto ce = [&](const Tensor& t, CrossEntropyOptions o = {}) {
            return use_composed ? composed::cross_entropy(v, t, o) : cross_entropy(v, t, o);
        };
        CHECK_THROWS_WITH(ce(core::from_vector(std::vector<int64_t>{0, 1, 2}, {3})),
                          "cross_entropy: targets of shape (3) do not match logits of shape (2x3) (expected (2))");
        CHECK_THROWS_WITH(ce(core::from_vector(std::vector<int64_t>{0, 3}, {2})),
                          "cross_entropy: target 3 out of range for 3 classes");
        CHECK_THROWS_AS(ce(core::from_vector(std::vector<int64_t>{0, 3}, {2})), IndexError);
        CHECK_THROWS_WITH(ce(t64({0, 1}, {2})), "cross_entropy: targets must be int64, got float64");
        CHECK_THROWS_AS(ce(good, {.label_smoothing = 1.5}), ValueError);
    }
}

// ============================ matmul and linear ============================

TEST_CASE("matmul(a, b), linear(x, weight, bias): values match the core kernels, gradients by hand",
          "[autograd][functional][linalg]") {
    const Variable a(t64({1, 2, 3, 4}, {2, 2}), true);
    const Variable b(t64({5, 6}, {2, 1}), true);
    const Variable y = matmul(a, b);
    check_values(y.value(), {17, 39});
    CHECK(y.op_name() == "matmul");
    sum(y).backward();
    check_values(a.grad(), {5, 6, 5, 6});  // da = 1 @ bᵀ
    check_values(b.grad(), {4, 6});        // db = aᵀ @ 1

    const Tensor x = randn64({2, 3, 4}, 18), w = randn64({5, 4}, 19), bias = randn64({5}, 20);
    check_close(linear(Variable(x), Variable(w), Variable(bias)).value(), core::linear(x, w, bias), 0);
    check_close(linear(Variable(x), Variable(w), undefined()).value(), core::linear(x, w, Tensor()), 0);
    check_close(matmul(Variable(x), Variable(w.transpose(0, 1))).value(), core::matmul(x, w.transpose(0, 1)), 0);

    // linear == matmul with Wᵀ plus the bias, gradients included
    const Tensor up = randn64({2, 3, 5}, 21);
    const Evaluated lin = evaluate([](auto& in) { return linear(in[0], in[1], in[2]); }, {x, w, bias}, up);
    const Evaluated mm = evaluate(
        [](auto& in) { return matmul(in[0], Variable(in[1].value().transpose(0, 1))) + in[2]; }, {x, w, bias}, up);
    check_close(lin.value, mm.value, 1e-12);
    check_close(lin.grads[0], mm.grads[0], 1e-12);
    check_close(lin.grads[2], mm.grads[2], 1e-12);
}

TEST_CASE("matmul(a, b), linear(x, W, b): shape errors come from the core kernels", "[autograd][functional][errors]") {
    const Variable a(randn64({2, 3}, 22), true), b(randn64({4, 5}, 23), true);
    CHECK_THROWS_WITH(matmul(a, b), "matmul: shapes (2x3) and (4x5) cannot be multiplied");
    CHECK_THROWS_AS(linear(a, b, undefined()), ShapeError);
}

TEST_CASE("embedding(weight, ids, padding_idx): errors name the id and the vocabulary",
          "[autograd][functional][errors]") {
    const Variable weight(randn64({4, 2}, 24), true);
    CHECK_THROWS_WITH(embedding(weight, core::from_vector(std::vector<int64_t>{1, 4}, {2})),
                      "embedding: token id 4 out of range for vocabulary of 4");
    CHECK_THROWS_WITH(embedding(weight, core::from_vector(std::vector<int64_t>{1}, {1}), 7),
                      "embedding: padding_idx 7 out of range for vocabulary of 4 (use -1 for none)");
}

TEST_CASE("matmul, linear, softmax, layer_norm, embedding, cross_entropy: no graph under NoGradGuard",
          "[autograd][functional]") {
    const Variable x(randn64({2, 3}, 25), true);
    const Variable w(randn64({3, 3}, 26), true);
    const Variable g(randn64({3}, 27), true);
    const Tensor ids = core::from_vector(std::vector<int64_t>{0, 1}, {2});
    const int64_t before = live_node_count();
    NoGradGuard no_grad;
    const Variable h = layer_norm(softmax(linear(matmul(x, w), w, g)), g, g, 1e-5) + embedding(w, ids, 0);
    const Variable loss = cross_entropy(h, ids);
    CHECK_FALSE(loss.requires_grad());
    CHECK(live_node_count() == before);
}

namespace {
bool same_floats(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && a.to_vector() == b.to_vector(); }
}  // namespace

TEST_CASE("cross_entropy: the last backward writes the gradient over logits it alone holds, the same floats",
          "[autograd][functional]") {
    const int64_t N = 64, V = 4096;  // 1 MB of float logits
    core::Generator gen(11);
    const Tensor x = core::randn({N, 32}, gen);
    const Tensor W = core::randn({V, 32}, gen);
    std::vector<double> t(N);
    for (int64_t n = 0; n < N; ++n) t[static_cast<size_t>(n)] = static_cast<double>((n * 37) % V);
    const Tensor targets = core::tensor(t, {N}, DType::int64);
    const auto grad_of_x = [&](bool keep_logits, bool retain) {
        Variable xv(x, true);
        Variable loss;
        Variable kept;
        {
            Variable logits = matmul(xv, Variable(W.transpose(0, 1)));  // (N, V)
            loss = cross_entropy(logits, targets, {.label_smoothing = 0.1});
            if (keep_logits) kept = logits;
        }
        const int64_t before = core::storage_bytes();
        core::reset_storage_peak();
        loss.backward(Tensor(), {.retain_graph = retain});
        // with the logits in no one else's hands, backward's peak holds no second (N, V)
        if (!keep_logits && !retain) CHECK(core::storage_peak_bytes() - before < N * V * 4);
        if (keep_logits) CHECK(kept.value().numel() == N * V);
        if (retain) {  // the logits were left as they were: a second backward gives the same again
            const Tensor first = xv.grad().clone();
            xv.zero_grad();
            loss.backward();
            CHECK(same_floats(xv.grad(), first));
        }
        return xv.grad();
    };
    const Tensor in_place = grad_of_x(false, false);
    CHECK(same_floats(in_place, grad_of_x(true, false)));
    CHECK(same_floats(in_place, grad_of_x(false, true)));
}

// ============================ values made again in backward ============================

TEST_CASE(
    "set_remake: the outputs of layer_norm, add_layer_norm and multi_head_attention that linears use are freed "
    "after the forward pass and made again, to the bit, in backward",
    "[autograd][functional]") {
    const int64_t B = 4, T = 6, D = 16;  // y is (B, T, D): 384 floats
    core::Generator gen(21);
    const Tensor a = core::randn({B, T, D}, gen), r = core::randn({B, T, D}, gen);
    const Tensor k = core::randn({B, T, D}, gen), v = core::randn({B, T, D}, gen);
    const Tensor keep_y = core::mul(core::bernoulli({B, T, D}, 0.8, gen), 1.0 / 0.8);
    const Tensor keep_p = core::mul(core::bernoulli({B, 2, T, T}, 0.8, gen), 1.0 / 0.8);
    const Tensor lens = core::from_vector(std::vector<int64_t>{6, 3, 1, 5}, {B});
    const Tensor w0 = core::randn({D}, gen), b0 = core::randn({D}, gen);
    const Tensor W1 = core::randn({8, D}, gen), W2 = core::randn({8, D}, gen), W3 = core::randn({8, D}, gen);

    using Producer = std::function<Variable(const std::vector<Variable>&)>;
    const std::vector<std::pair<std::string, Producer>> producers = {
        {"layer_norm", [&](const std::vector<Variable>& x) { return layer_norm(x[0], x[2], x[3], 1e-5); }},
        {"add_layer_norm",
         [&](const std::vector<Variable>& x) { return add_layer_norm(x[0], x[1], keep_y, x[2], x[3], 1e-5); }},
        {"multi_head_attention",
         [&](const std::vector<Variable>& x) { return multi_head_attention(x[0], x[1], x[4], 2, lens, keep_p); }},
    };
    for (const auto& [name, produce] : producers) {
        DYNAMIC_SECTION(name) {
            // y feeds three linears (as attention's projections share their input) and a linear_relu
            const auto run = [&](int64_t threshold) {
                RemakeThresholdGuard guard(threshold);
                const int64_t start = core::storage_bytes();
                std::vector<Variable> leaves{Variable(a, true), Variable(r, true), Variable(w0, true),
                                             Variable(b0, true), Variable(v, true)};
                const std::vector<Variable> weights{Variable(W1, true), Variable(W2, true), Variable(W3, true)};
                Variable loss;
                bool remade = false;
                {
                    const Variable y = produce(leaves);
                    remade = SavedValue(y).remade();
                    const Variable h =
                        linear(y, weights[0], {}) + linear(y, weights[1], {}) * 0.5 + linear_relu(y, weights[2], {});
                    loss = sum(mul(h, h));
                }
                const int64_t held = core::storage_bytes() - start;  // the leaves and what the graph keeps
                loss.backward();
                std::vector<Tensor> grads;
                for (const Variable& x : leaves) grads.push_back(x.grad());
                for (const Variable& x : weights) grads.push_back(x.grad());
                return std::tuple{held, remade, grads};
            };
            const auto [held_kept, remade_kept, kept] = run(std::numeric_limits<int64_t>::max());
            const auto [held_remade, remade_remade, remade] = run(0);
            CHECK_FALSE(remade_kept);
            CHECK(remade_remade);
            CHECK(held_kept - held_remade == B * T * D * 4);  // y itself, and nothing else, is not held
            REQUIRE(kept.size() == remade.size());
            for (size_t i = 0; i < kept.size(); ++i) {
                INFO("gradient " << i);
                CHECK(kept[i].defined() == remade[i].defined());
                if (kept[i].defined()) CHECK(same_floats(kept[i], remade[i]));
            }
        }
    }
}

TEST_CASE("SavedValue: the value made once is shared by every op that saved it and freed after the last",
          "[autograd][functional]") {
    RemakeThresholdGuard guard(0);
    core::Generator gen(22);
    const int64_t N = 32, D = 64;
    Variable x(core::randn({N, D}, gen), true), W(core::randn({D, D}, gen), true);
    const int64_t start = core::storage_bytes();
    int calls = 0;
    Variable loss;
    {
        const Variable y = x * 2.0;
        set_remake(y, [&calls, xv = x.value()] {
            ++calls;
            return core::mul(xv, 2.0);
        });
        loss = sum(linear(y, W, {}) + linear(y, W, {}) + linear(y, W, {}));
    }
    CHECK(calls == 0);  // nothing made during the forward pass
    loss.backward();
    CHECK(calls == 1);  // made once for the three linears
    // nothing of y is left: only the leaves' gradients and the loss
    CHECK(core::storage_bytes() - start == (N * D + D * D + 1) * 4);
}
