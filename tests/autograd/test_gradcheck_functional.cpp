// Gradient checks (float64 Jacobians, central differences against backward)
// for autograd/linalg.hpp and autograd/functional.hpp, fused and composed.
// Each TEST_CASE runs one table of small cases: the inputs, some of them
// non-contiguous views (a transposed or strided leaf), and the function of
// them. Constants that take no gradient (ids, targets, lengths, masks) are
// captured by the function.
#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "gradcheck_inputs.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <string>

using namespace tformer;
using namespace tformer::autograd;
using core::DType;
using core::Tensor;

namespace {

using testing::GradCase;
using Fn = testing::Function;

// A float64 leaf of standard-normal values that requires a gradient.
Variable randn(const core::Shape& shape, uint64_t seed) {
    core::Generator gen(seed);
    return testing::randn_leaf(shape, gen);
}

// A leaf that is a view: `base` (already a view of a fresh tensor) made to require a gradient.
Variable leaf_view(const Tensor& base) { return Variable(base, true); }

Tensor randn_t(const core::Shape& shape, uint64_t seed) {
    core::Generator gen(seed);
    return core::randn(shape, gen, DType::float64);
}

Tensor ids(std::vector<int64_t> values, core::Shape shape) { return core::from_vector(values, shape); }

void run_table(const std::vector<GradCase>& cases) { testing::check_gradcheck_table(cases); }

}  // namespace

// ============================ linalg ============================

TEST_CASE("matmul(a, b): gradcheck for 2-D, batched, broadcast batch, 1-D, transposed and sliced operands",
          "[autograd][gradcheck][linalg]") {
    const Fn mm = [](const std::vector<Variable>& in) { return matmul(in[0], in[1]); };
    run_table({
        {"(2x3) @ (3x4)", {randn({2, 3}, 1), randn({3, 4}, 2)}, mm},
        {"batched (2x2x3) @ (2x3x2)", {randn({2, 2, 3}, 3), randn({2, 3, 2}, 4)}, mm},
        {"broadcast batch (2x1x3x4) @ (3x4x5)", {randn({2, 1, 3, 4}, 5), randn({3, 4, 5}, 6)}, mm},
        {"shared right matrix (2x3x4) @ (4x2)", {randn({2, 3, 4}, 7), randn({4, 2}, 8)}, mm},
        {"shared left matrix (3x4) @ (2x4x2)", {randn({3, 4}, 9), randn({2, 4, 2}, 10)}, mm},
        {"1-D left (3) @ (3x4)", {randn({3}, 11), randn({3, 4}, 12)}, mm},
        {"1-D right (2x3) @ (3)", {randn({2, 3}, 13), randn({3}, 14)}, mm},
        {"1-D both (3) @ (3)", {randn({3}, 15), randn({3}, 16)}, mm},
        {"1-D left, batched right (3) @ (2x3x2)", {randn({3}, 17), randn({2, 3, 2}, 18)}, mm},
        {"1-D right, batched left (2x2x3) @ (3)", {randn({2, 2, 3}, 19), randn({3}, 20)}, mm},
        {"transposed a: (3x2)ᵀ @ (3x4)", {leaf_view(randn_t({3, 2}, 21).transpose(0, 1)), randn({3, 4}, 22)}, mm},
        {"transposed batched b: (2x3) @ (2x4x3)ᵀ",
         {randn({2, 3}, 23), leaf_view(randn_t({2, 4, 3}, 24).transpose(-2, -1))},
         mm},
        {"sliced b: every second column of (3x8)",
         {randn({2, 3}, 25), leaf_view(randn_t({3, 8}, 26).slice(1, 0, 8, 2))},
         mm},
        {"the same operand twice: a @ a",
         {randn({3, 3}, 27)},
         [](const std::vector<Variable>& in) { return matmul(in[0], in[0]); }},
    });
}

TEST_CASE("linear(x, weight, bias): gradcheck with and without bias, 1-D, 2-D and 3-D input",
          "[autograd][gradcheck][linalg]") {
    const Fn with_bias = [](const std::vector<Variable>& in) { return linear(in[0], in[1], in[2]); };
    const Fn no_bias = [](const std::vector<Variable>& in) { return linear(in[0], in[1], Variable()); };
    run_table({
        {"x (2x3), W (4x3), b (4)", {randn({2, 3}, 31), randn({4, 3}, 32), randn({4}, 33)}, with_bias},
        {"x (2x3), W (4x3), no bias", {randn({2, 3}, 34), randn({4, 3}, 35)}, no_bias},
        {"x (2x2x3), W (2x3), b (2)", {randn({2, 2, 3}, 36), randn({2, 3}, 37), randn({2}, 38)}, with_bias},
        {"x (3), W (2x3), b (2)", {randn({3}, 39), randn({2, 3}, 40), randn({2}, 41)}, with_bias},
        {"transposed x (3x2)ᵀ, transposed W (3x4)ᵀ",
         {leaf_view(randn_t({3, 2}, 42).transpose(0, 1)), leaf_view(randn_t({3, 4}, 43).transpose(0, 1)),
          randn({4}, 44)},
         with_bias},
    });
}

TEST_CASE("linear_relu(x, weight, bias): gradcheck with and without bias, 3-D and transposed input",
          "[autograd][gradcheck][linalg]") {
    const Fn with_bias = [](const std::vector<Variable>& in) { return linear_relu(in[0], in[1], in[2]); };
    const Fn no_bias = [](const std::vector<Variable>& in) { return linear_relu(in[0], in[1], Variable()); };
    // standard-normal inputs put about half the pre-activations below 0, so both sides of the kink are checked
    run_table({
        {"x (2x3), W (4x3), b (4)", {randn({2, 3}, 301), randn({4, 3}, 302), randn({4}, 303)}, with_bias},
        {"x (2x3), W (4x3), no bias", {randn({2, 3}, 304), randn({4, 3}, 305)}, no_bias},
        {"x (2x2x3), W (5x3), b (5)", {randn({2, 2, 3}, 306), randn({5, 3}, 307), randn({5}, 308)}, with_bias},
        {"transposed x (3x2)ᵀ, sliced W (every second column of 4x6)",
         {leaf_view(randn_t({3, 2}, 309).transpose(0, 1)), leaf_view(randn_t({4, 6}, 310).slice(1, 0, 6, 2)),
          randn({4}, 311)},
         with_bias},
    });
}

// ============================ softmax family ============================

TEST_CASE("softmax(x), log_softmax(x), composed versions: gradcheck on contiguous and transposed input",
          "[autograd][gradcheck][functional]") {
    const Fn sm = [](const std::vector<Variable>& in) { return softmax(in[0]); };
    const Fn lsm = [](const std::vector<Variable>& in) { return log_softmax(in[0]); };
    const Fn csm = [](const std::vector<Variable>& in) { return composed::softmax(in[0]); };
    const Fn clsm = [](const std::vector<Variable>& in) { return composed::log_softmax(in[0]); };
    const Variable x = randn({2, 2, 4}, 51);
    const Variable xt = leaf_view(randn_t({4, 3}, 52).transpose(0, 1));  // (3x4), strides (1, 3)
    run_table({
        {"softmax (2x2x4)", {x}, sm},
        {"softmax transposed (3x4)", {xt}, sm},
        {"log_softmax (2x2x4)", {x}, lsm},
        {"log_softmax transposed (3x4)", {xt}, lsm},
        {"composed::softmax (2x2x4)", {x}, csm},
        {"composed::softmax transposed (3x4)", {xt}, csm},
        {"composed::log_softmax (2x2x4)", {x}, clsm},
        {"composed::log_softmax transposed (3x4)", {xt}, clsm},
    });
}

TEST_CASE(
    "masked_softmax(x, valid_lens), masked_softmax_by_mask(x, keep): gradcheck with seed 003's lengths "
    "and a no-peek mask",
    "[autograd][gradcheck][functional]") {
    const Tensor per_batch = ids({2, 3}, {2});
    const Tensor per_row = ids({1, 3, 2, 4}, {2, 2});
    const Tensor float_lens = core::tensor({2, 3}, {2}, DType::float64);
    std::vector<bool> lower;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) lower.push_back(j <= i);
    const Tensor no_peek = core::from_vector(lower, {3, 3});
    const Tensor pad = core::from_vector(std::vector<bool>{true, true, false, true, true, true}, {2, 1, 1, 3});
    run_table({
        {"valid_lens [2, 3] on (2x2x4)",
         {randn({2, 2, 4}, 61)},
         [=](const std::vector<Variable>& in) { return masked_softmax(in[0], per_batch); }},
        {"valid_lens [[1, 3], [2, 4]] on (2x2x4)",
         {randn({2, 2, 4}, 62)},
         [=](const std::vector<Variable>& in) { return masked_softmax(in[0], per_row); }},
        {"float valid_lens [2., 3.] on (2x2x4)",
         {randn({2, 2, 4}, 63)},
         [=](const std::vector<Variable>& in) { return masked_softmax(in[0], float_lens); }},
        {"no valid_lens (plain softmax) on (2x2x4)",
         {randn({2, 2, 4}, 64)},
         [=](const std::vector<Variable>& in) { return masked_softmax(in[0], Tensor()); }},
        {"no-peek mask (3x3) on (2x3x3)",
         {randn({2, 3, 3}, 65)},
         [=](const std::vector<Variable>& in) { return masked_softmax_by_mask(in[0], no_peek); }},
        {"pad mask (2x1x1x3) on (2x2x3x3)",
         {randn({2, 2, 3, 3}, 66)},
         [=](const std::vector<Variable>& in) { return masked_softmax_by_mask(in[0], pad); }},
    });
}

// ============================ layer norm ============================

TEST_CASE("layer_norm(x, weight, bias, eps), composed::layer_norm: gradcheck on (2x3x5) with and without affine",
          "[autograd][gradcheck][functional]") {
    const Fn ln = [](const std::vector<Variable>& in) { return layer_norm(in[0], in[1], in[2], 1e-5); };
    const Fn ln_plain = [](const std::vector<Variable>& in) { return layer_norm(in[0], Variable(), Variable(), 1e-5); };
    const Fn ln_weight_only = [](const std::vector<Variable>& in) {
        return layer_norm(in[0], in[1], Variable(), 1e-5);
    };
    const Fn cln = [](const std::vector<Variable>& in) { return composed::layer_norm(in[0], in[1], in[2], 1e-5); };
    const Fn cln_plain = [](const std::vector<Variable>& in) {
        return composed::layer_norm(in[0], Variable(), Variable(), 1e-5);
    };
    run_table({
        {"weight and bias", {randn({2, 3, 5}, 71), randn({5}, 72), randn({5}, 73)}, ln},
        {"no weight, no bias", {randn({2, 3, 5}, 74)}, ln_plain},
        {"weight only", {randn({2, 3, 5}, 75), randn({5}, 76)}, ln_weight_only},
        {"transposed x (5x3)ᵀ", {leaf_view(randn_t({5, 3}, 77).transpose(0, 1)), randn({5}, 78), randn({5}, 79)}, ln},
        {"composed, weight and bias", {randn({2, 3, 5}, 80), randn({5}, 81), randn({5}, 82)}, cln},
        {"composed, no weight, no bias", {randn({2, 3, 5}, 83)}, cln_plain},
    });
}

// ============================ embedding ============================

TEST_CASE(
    "add_layer_norm(x, y, keep, weight, bias, eps): gradcheck with and without a dropout mask and affine, "
    "transposed inputs",
    "[autograd][gradcheck][functional]") {
    core::Generator gen(5);
    const Tensor keep = core::dropout_mask({2, 3, 5}, 0.3, gen, DType::float64);  // (2, 3, 5), 0 or 1/0.7
    const Fn with_mask = [keep](const std::vector<Variable>& in) {
        return add_layer_norm(in[0], in[1], keep, in[2], in[3], 1e-5);
    };
    const Fn plain = [](const std::vector<Variable>& in) {
        return add_layer_norm(in[0], in[1], Tensor(), Variable(), Variable(), 1e-5);
    };
    run_table({
        {"x, y (2x3x5), mask, weight, bias (5)",
         {randn({2, 3, 5}, 321), randn({2, 3, 5}, 322), randn({5}, 323), randn({5}, 324)},
         with_mask},
        {"x, y (2x3x5), no mask, no affine", {randn({2, 3, 5}, 325), randn({2, 3, 5}, 326)}, plain},
        {"x, y transposed views (4x3)ᵀ, no mask, no affine",
         {leaf_view(randn_t({4, 3}, 327).transpose(0, 1)), leaf_view(randn_t({4, 3}, 328).transpose(0, 1))},
         plain},
    });
}

TEST_CASE(
    "linear and linear_relu on outputs made again in backward (layer_norm, add_layer_norm, multi_head_attention): "
    "gradcheck with every recipe used",
    "[autograd][gradcheck][functional]") {
    const RemakeThresholdGuard guard(0);  // remake every output that has a recipe
    core::Generator gen(7);
    const Tensor keep = core::dropout_mask({2, 3, 4}, 0.3, gen, DType::float64);
    const Tensor keep_p = core::dropout_mask({2, 2, 3, 3}, 0.3, gen, DType::float64);  // (B, H, T, S)
    const Tensor lens = ids({3, 2}, {2});
    // y feeds two linears and a linear_relu, as attention's projections and the FFN share their input
    const auto consumers = [](const Variable& y, const std::vector<Variable>& in) {
        return linear(y, in[4], Variable()) + linear_relu(y, in[5], in[6]) * linear(y, in[4], Variable());
    };
    const auto inputs = [](uint64_t seed) {
        return std::vector<Variable>{randn({2, 3, 4}, seed), randn({2, 3, 4}, seed + 1), randn({4}, seed + 2),
                                     randn({4}, seed + 3),   randn({5, 4}, seed + 4),    randn({5, 4}, seed + 5),
                                     randn({5}, seed + 6)};
    };
    run_table({
        {"layer_norm (2x3x4) into linears", inputs(341),
         [=](const std::vector<Variable>& in) { return consumers(layer_norm(in[0], in[2], in[3], 1e-5), in); }},
        {"add_layer_norm (2x3x4) with a mask into linears", inputs(351),
         [=](const std::vector<Variable>& in) {
             return consumers(add_layer_norm(in[0], in[1], keep, in[2], in[3], 1e-5), in);
         }},
        {"multi_head_attention (2x3x4, 2 heads, lengths, a mask) into linears", inputs(361),
         [=](const std::vector<Variable>& in) {
             return consumers(multi_head_attention(in[0], in[1], in[1] * 0.5, 2, lens, keep_p), in);
         }},
    });
}

TEST_CASE(
    "embedding_positional(weight, ids, scale, pos, keep): gradcheck with respect to the weight, a transposed weight",
    "[autograd][gradcheck][functional]") {
    // ids (2, 3) with a repeated id (its row gathers two gradients). The padding
    // row's Jacobian is 0 by design, not by calculus (the embedding test above
    // checks it); the bit-for-bit test in test_functional.cpp covers padding_idx.
    const Tensor id = ids({0, 3, 3, 1, 2, 0}, {2, 3});
    const Tensor pos = randn_t({3, 4}, 331);  // (T, D)
    core::Generator gen(6);
    const Tensor keep = core::dropout_mask({2, 3, 4}, 0.25, gen, DType::float64);
    run_table({
        {"weight (5x4), scale 2, mask",
         {randn({5, 4}, 332)},
         [=](const std::vector<Variable>& in) { return embedding_positional(in[0], id, 2.0, pos, keep); }},
        {"weight (5x4), scale 1, no mask, no padding",
         {randn({5, 4}, 333)},
         [=](const std::vector<Variable>& in) { return embedding_positional(in[0], id, 1.0, pos, Tensor()); }},
        {"transposed weight (4x5)ᵀ, sliced pos",
         {leaf_view(randn_t({4, 5}, 334).transpose(0, 1))},
         [=](const std::vector<Variable>& in) {
             return embedding_positional(in[0], id, 0.5, randn_t({3, 8}, 335).slice(1, 0, 8, 2), keep);
         }},
    });
}

TEST_CASE("embedding(weight, ids, padding_idx): gradcheck with respect to the weight",
          "[autograd][gradcheck][functional]") {
    const Tensor tokens = ids({1, 0, 3, 1, 4, 0}, {2, 3});  // repeats, and id 0 twice
    run_table({
        {"ids (2x3), no padding",
         {randn({5, 3}, 91)},
         [=](const std::vector<Variable>& in) { return embedding(in[0], tokens); }},
        {"ids (2x3), padding_idx 2 (not among the ids)",
         {randn({5, 3}, 92)},
         [=](const std::vector<Variable>& in) { return embedding(in[0], tokens, 2); }},
        {"transposed weight (3x5)ᵀ",
         {leaf_view(randn_t({3, 5}, 93).transpose(0, 1))},
         [=](const std::vector<Variable>& in) { return embedding(in[0], tokens); }},
    });
}

TEST_CASE("embedding(weight, ids, padding_idx): the Jacobian is exact except at the padding row, which gets 0",
          "[autograd][gradcheck][functional]") {
    // padding_idx departs from the true derivative on purpose (the <pad>
    // vector is frozen), so gradcheck must disagree there and only there:
    // one entry per occurrence of the padding id and per embedding column.
    const Tensor tokens = ids({1, 0, 3, 1, 4, 0}, {2, 3});
    struct Case {
        const char* name;
        Variable weight;
        int64_t padding_idx;
        int64_t occurrences;
    };
    const std::vector<Case> cases = {
        {"padding_idx 0, twice among the ids", randn({5, 3}, 94), 0, 2},
        {"transposed weight, padding_idx 4, once", leaf_view(randn_t({3, 5}, 95).transpose(0, 1)), 4, 1},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        const int64_t pad = c.padding_idx;
        const GradcheckResult r =
            gradcheck([&](const std::vector<Variable>& in) { return embedding(in[0], tokens, pad); }, {c.weight});
        INFO(r.report);
        CHECK_FALSE(r);
        CHECK(r.mismatches == c.occurrences * 3);
        CHECK(r.input_element / 3 == pad);  // the first disagreement is in the padding row
        CHECK(r.analytical == 0.0);
        CHECK(r.numerical == Approx(1.0));
    }
}

// ============================ cross-entropy ============================

TEST_CASE(
    "cross_entropy(logits, targets, options), composed::cross_entropy: gradcheck for each reduction, "
    "ignore_index and label smoothing",
    "[autograd][gradcheck][functional]") {
    const Tensor targets = ids({0, 2, -100, 1}, {4});
    const Tensor pad_targets = ids({0, 2, 1, 1, 0, 3}, {2, 3});  // 1 is the pad id below
    struct Variant {
        const char* name;
        Tensor targets;
        core::Shape shape;
        CrossEntropyOptions options;
    };
    const std::vector<Variant> variants = {
        {"mean", targets, {4, 3}, {}},
        {"sum", targets, {4, 3}, {.reduction = Reduction::sum}},
        {"none", targets, {4, 3}, {.reduction = Reduction::none}},
        {"label smoothing 0.1, mean", targets, {4, 3}, {.label_smoothing = 0.1}},
        {"label smoothing 0.2, none", targets, {4, 3}, {.label_smoothing = 0.2, .reduction = Reduction::none}},
        {"(2x3x4) logits, ignore_index 1, mean", pad_targets, {2, 3, 4}, {.ignore_index = 1}},
        {"(2x3x4) logits, ignore_index 1, smoothing 0.1, sum",
         pad_targets,
         {2, 3, 4},
         {.ignore_index = 1, .label_smoothing = 0.1, .reduction = Reduction::sum}},
    };
    std::vector<GradCase> cases;
    uint64_t seed = 100;
    for (const Variant& v : variants) {
        const Tensor t = v.targets;
        const CrossEntropyOptions o = v.options;
        cases.push_back({std::string("fused, ") + v.name,
                         {randn(v.shape, seed++)},
                         [=](const std::vector<Variable>& in) { return cross_entropy(in[0], t, o); }});
        cases.push_back({std::string("composed, ") + v.name,
                         {randn(v.shape, seed++)},
                         [=](const std::vector<Variable>& in) { return composed::cross_entropy(in[0], t, o); }});
    }
    cases.push_back({"fused, transposed logits (3x4)ᵀ",
                     {leaf_view(randn_t({3, 4}, 120).transpose(0, 1))},
                     [=](const std::vector<Variable>& in) { return cross_entropy(in[0], targets); }});
    run_table(cases);
}

// ============================ the fused output layer + loss ============================

TEST_CASE(
    "linear_cross_entropy(x, W, b, targets, weights, ε): gradcheck, with padding rows, bias or none, a transposed x",
    "[autograd][gradcheck][functional]") {
    const Tensor t = ids({2, 0, 4, 4, 1}, {5});
    const Tensor w =
        core::from_vector(std::vector<double>{0.2, 0.0, 0.5, 0.3, 1.0}, {5}).to(DType::float64);  // row 1 is padding
    std::vector<GradCase> cases;
    for (double eps : {0.0, 0.1}) {
        cases.push_back(
            {"x (5, 3), W (6, 3), b (6), eps " + std::to_string(eps),
             {randn({5, 3}, 1), randn({6, 3}, 2), randn({6}, 3)},
             [=](const std::vector<Variable>& x) { return linear_cross_entropy(x[0], x[1], x[2], t, w, eps); }});
        cases.push_back(
            {"x transposed (5, 3), W (6, 3), no bias, eps " + std::to_string(eps),
             {leaf_view(randn_t({3, 5}, 4).transpose(0, 1)), randn({6, 3}, 5)},
             [=](const std::vector<Variable>& x) { return linear_cross_entropy(x[0], x[1], Variable(), t, w, eps); }});
    }
    run_table(cases);
}

TEST_CASE("linear_cross_entropy equals the composed Σ w · cross_entropy(linear(x, W, b)), value and gradients",
          "[autograd][functional]") {
    for (DType dtype : {DType::float32, DType::float64})
        for (double eps : {0.0, 0.1}) {
            // more rows than one chunk (256) and a vocabulary wider than a block, to cross every boundary
            core::Generator gen(9);
            const int64_t N = 600, D = 16, V = 700;
            const Tensor x0 = core::randn({N, D}, gen, dtype), W0 = core::mul(core::randn({V, D}, gen, dtype), 0.3);
            const Tensor b0 = core::randn({V}, gen, dtype), targets = core::randint({N}, 0, V, gen);
            const Tensor weights = core::mul(core::bernoulli({N}, 0.8, gen, dtype), 1.0 / N);  // about 20% padding
            auto run = [&](bool fused, int threads) {
                core::set_num_threads(threads);
                Variable x(x0, true), W(W0, true), b(b0, true);
                Variable loss = fused ? linear_cross_entropy(x, W, b, targets, weights, eps)
                                      : sum(mul(Variable(weights),
                                                cross_entropy(linear(x, W, b), targets,
                                                              {.label_smoothing = eps, .reduction = Reduction::none})));
                loss.backward();
                return std::vector<Tensor>{loss.value(), x.grad(), W.grad(), b.grad()};
            };
            // 1 thread: one part; 2 threads: two parts of about 240 rows, each its own chunks and dW
            // (480 rows x 700 x 16 = 5.4 million multiply-adds, past the 2 x 2^21 a split needs).
            // In float64 to 1e-12 of the composed loss, whose ops are gradchecked one by one:
            // a gradcheck of the split itself would need millions of multiply-adds per evaluation
            const int saved = core::get_num_threads();
            const auto composed = run(false, 1);
            for (int threads : {1, 2}) {
                const auto fused = run(true, threads);
                const double tol = dtype == DType::float32 ? 2e-5 : 1e-12;
                INFO("dtype " << core::dtype_name(dtype) << " eps " << eps << " threads " << threads);
                for (size_t i = 0; i < fused.size(); ++i) {
                    const std::vector<double> a = fused[i].to_vector(), c = composed[i].to_vector();
                    REQUIRE(a.size() == c.size());
                    double worst = 0;
                    for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, std::abs(a[j] - c[j]));
                    CHECK(worst <= tol * (i == 0 ? 10 : 1));
                }
            }
            // the same thread count gives the same bits, run to run
            const auto again = run(true, 2), once_more = run(true, 2);
            for (size_t i = 0; i < again.size(); ++i) CHECK(again[i].to_vector() == once_more[i].to_vector());
            core::set_num_threads(saved);
        }
    // errors name the operation and the values
    const Variable x(core::zeros({2, 3}, DType::float32), true), W(core::zeros({4, 3}, DType::float32), true);
    const Tensor w = core::ones({2}, DType::float32);
    CHECK_THROWS_WITH(linear_cross_entropy(x, W, Variable(), ids({1, 4}, {2}), w),
                      Catch::Contains("target 4 of row 1 outside [0, 4)"));
    CHECK_THROWS_WITH(
        linear_cross_entropy(x, Variable(core::zeros({4, 2}, DType::float32), true), Variable(), ids({1, 2}, {2}), w),
        Catch::Contains("must be (N, D) and (V, D)"));
    CHECK_THROWS_WITH(linear_cross_entropy(x, W, Variable(), ids({1, 2}, {2}), w, 1.5),
                      Catch::Contains("label smoothing 1.5"));
}

TEST_CASE("linear_cross_entropy: a batch of padding only gives loss 0 and zero gradients", "[autograd][functional]") {
    // no row counts: no chunk runs, so dW and db are never written by a product and must start at 0
    core::Generator gen(4);
    Variable x(core::randn({3, 2}, gen), true), W(core::randn({5, 2}, gen), true), b(core::randn({5}, gen), true);
    Variable loss = linear_cross_entropy(x, W, b, ids({0, 1, 2}, {3}), core::zeros({3}, DType::float32));
    loss.backward();
    CHECK(loss.value().item() == 0.0);
    for (const Variable* v : {&x, &W, &b})
        for (double g : v->grad().to_vector()) CHECK(g == 0.0);
}
