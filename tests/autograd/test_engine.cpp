// The autograd engine: graph recording, backward, accumulation, grad mode,
// hooks, anomaly mode, graph freeing, and gradcheck itself.
#include "autograd/autograd.hpp"
#include "core/core.hpp"
#include "gradcheck_inputs.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace tformer;
using namespace tformer::autograd;
using core::DType;
using core::Tensor;

namespace {
Variable leaf(const std::vector<double>& values, const core::Shape& shape) { return testing::f64_leaf(values, shape); }
}  // namespace

TEST_CASE("backward(): y = Σ(a·b + a) gives da = b + 1, db = a", "[autograd][engine]") {
    Variable a = leaf({1, 2, 3}, {3});
    Variable b = leaf({4, 5, 6}, {3});
    Variable y = sum(a * b + a);
    CHECK(y.item() == Approx(1 * 4 + 2 * 5 + 3 * 6 + 6));
    CHECK(y.op_name() == "sum");
    CHECK_FALSE(y.is_leaf());
    CHECK(a.is_leaf());
    y.backward();
    CHECK(a.grad().to_vector() == std::vector<double>{5, 6, 7});
    CHECK(b.grad().to_vector() == std::vector<double>{1, 2, 3});
}

TEST_CASE("backward(): an input used twice gets both contributions", "[autograd][engine]") {
    Variable x = leaf({3}, {1});
    // y = x·x + exp(x)·x: dy/dx = 2x + exp(x)(1 + x)
    Variable y = sum(x * x + exp(x) * x);
    y.backward();
    CHECK(x.grad().item() == Approx(2 * 3 + std::exp(3.0) * 4));
}

TEST_CASE("backward(): gradients accumulate across calls until zero_grad()", "[autograd][engine]") {
    Variable x = leaf({1, 2}, {2});
    sum(x * 3.0).backward();
    sum(x * 3.0).backward();
    CHECK(x.grad().to_vector() == std::vector<double>{6, 6});
    x.zero_grad();
    CHECK_FALSE(x.grad().defined());
    sum(x).backward();
    CHECK(x.grad().to_vector() == std::vector<double>{1, 1});
}

TEST_CASE("backward(): a chain of 100,000 ops neither overflows the stack nor leaks nodes", "[autograd][engine]") {
    const int64_t before = live_node_count();
    {
        Variable x = leaf({1}, {1});
        Variable y = x;
        for (int i = 0; i < 100000; ++i) y = y * 1.0001;
        CHECK(live_node_count() - before == 100000);
        sum(y).backward();
        // d/dx x·1.0001^n = 1.0001^n ≈ e^10
        CHECK(x.grad().item() == Approx(std::pow(1.0001, 100000)).epsilon(1e-9));
    }
    CHECK(live_node_count() == before);  // dropping y freed every node, iteratively
}

TEST_CASE("NoGradGuard: no graph is recorded inside it", "[autograd][engine]") {
    Variable x = leaf({1, 2}, {2});
    const int64_t before = live_node_count();
    {
        NoGradGuard no_grad;
        CHECK_FALSE(grad_enabled());
        Variable y = exp(x) * 2.0;
        CHECK_FALSE(y.requires_grad());
        CHECK(y.is_leaf());
        CHECK(live_node_count() == before);
        {
            EnableGradGuard again;
            CHECK(exp(x).requires_grad());
        }
        CHECK_FALSE(grad_enabled());
    }
    CHECK(grad_enabled());
    CHECK(exp(x).requires_grad());
}

TEST_CASE("backward(): saved tensors are freed, and a second backward says so", "[autograd][engine]") {
    Variable x = leaf({1, 2}, {2});
    Variable y = sum(exp(x));
    y.backward();
    REQUIRE(y.impl()->grad_fn != nullptr);
    CHECK(y.impl()->grad_fn->released());
    CHECK_THROWS_WITH(y.backward(), Catch::Contains("backward: the graph through 'sum' was already freed"));

    Variable z = sum(exp(x));
    z.backward({}, {.retain_graph = true});
    z.backward();  // allowed once more
    // exp(x) once from y and twice from z
    CHECK(x.grad().to_vector()[0] == Approx(3 * std::exp(1.0)));
}

TEST_CASE("register_hook(): fires once per backward with the complete gradient", "[autograd][engine]") {
    Variable x = leaf({1, 2}, {2});
    Variable h = x * 2.0;  // used twice below, so its gradient has two contributions
    int calls = 0;
    std::vector<double> seen;
    h.register_hook([&](const Tensor& g) {
        ++calls;
        seen = g.to_vector();
    });
    sum(h * h + h).backward();  // d/dh = 2h + 1
    CHECK(calls == 1);
    CHECK(seen == std::vector<double>{5, 9});
}

TEST_CASE("retain_grad() and detach()", "[autograd][engine]") {
    Variable x = leaf({1, 2}, {2});
    Variable h = x * 3.0;
    h.retain_grad();
    Variable y = sum(h * h.detach());  // the detached factor is a constant
    y.backward();
    CHECK(h.grad().to_vector() == std::vector<double>{3, 6});   // dy/dh = h.detach()
    CHECK(x.grad().to_vector() == std::vector<double>{9, 18});  // 3 · h
    CHECK_FALSE(h.detach().requires_grad());
}

TEST_CASE("anomaly mode: names the op whose backward made NaN or Inf", "[autograd][engine]") {
    Variable x = leaf({0, 1}, {2});
    {
        AnomalyGuard anomaly;
        Variable y = sum(sqrt(x));  // d sqrt(x)/dx = 1/(2√x) is Inf at 0
        CHECK_THROWS_WITH(y.backward(), Catch::Contains("anomaly: backward of 'sqrt' produced NaN or Inf"));
    }
    CHECK_FALSE(anomaly_mode());
    x.zero_grad();
    sum(sqrt(x)).backward();  // off: the Inf just flows through
    CHECK(std::isinf(x.grad().to_vector()[0]));
}

TEST_CASE("anomaly mode: names the first op whose forward made NaN, not the ones that pass it on",
          "[autograd][engine]") {
    Variable x = leaf({-1, 4}, {2});
    {
        AnomalyGuard anomaly;
        CHECK_THROWS_WITH(sum(sqrt(x) * 2.0),
                          Catch::Contains("anomaly: forward of 'sqrt' produced NaN from inputs without NaN"));
        // a NaN that comes in is not this op's doing: only the op that made it is named
        Variable nan_in = leaf({std::nan(""), 1}, {2});
        CHECK_NOTHROW(sum(nan_in * 2.0));
        // infinities pass (masks use them)
        CHECK_NOTHROW(sum(leaf({1, 2}, {2}) * std::numeric_limits<double>::infinity()));
    }
    Variable y = sum(sqrt(x));  // off: NaN flows through
    CHECK(std::isnan(y.item()));
}

TEST_CASE("backward(): errors name what is wrong", "[autograd][engine][errors]") {
    Variable x = leaf({1, 2}, {2});
    CHECK_THROWS_WITH((x * 2.0).backward(),
                      "backward: output of shape (2) is not a scalar; pass a gradient of that shape");
    CHECK_THROWS_WITH((x * 2.0).backward(core::ones({3}, DType::float64)),
                      "backward: gradient of shape (3) for an output of shape (2)");
    Variable c(core::ones({2}));
    CHECK_THROWS_WITH(sum(c).backward(), Catch::Contains("backward: this Variable does not require a gradient"));
    CHECK_THROWS_WITH((x * 2.0).requires_grad_(false), Catch::Contains("requires_grad_: only leaves"));
    CHECK_THROWS_AS(Variable(core::ones({2}, DType::int64), true), ValueError);
}

TEST_CASE("gradcheck(): passes a right backward and explains a wrong one", "[autograd][engine][gradcheck]") {
    Variable a(core::randn({2, 3}, core::default_generator(), DType::float64), true);
    Variable b(core::randn({3}, core::default_generator(), DType::float64), true);
    const GradcheckResult ok =
        gradcheck([](const std::vector<Variable>& in) { return in[0] * in[1] + exp(in[0]); }, {a, b});
    INFO(ok.report);
    CHECK(ok);

    // a deliberately wrong op: y = x² whose backward claims dy/dx = x
    auto wrong_square = [](const Variable& x) {
        return record("wrong_square", core::mul(x.value(), x.value()), {x},
                      [xv = x.value()](const Tensor& dy, Grads& grads) { grads[0] = core::mul(dy, xv); });
    };
    Variable x(core::tensor({1, 2}, {2}, DType::float64), true);
    const GradcheckResult bad = gradcheck([&](const std::vector<Variable>& in) { return wrong_square(in[0]); }, {x});
    CHECK_FALSE(bad);
    CHECK(bad.input == 0);
    CHECK(bad.input_element == 0);
    CHECK(bad.output_element == 0);
    CHECK(bad.analytical == Approx(1.0));
    CHECK(bad.numerical == Approx(2.0));
    CHECK(bad.mismatches == 2);
    CHECK_THAT(bad.report, Catch::Contains("gradcheck failed for input 0 (shape (2)) at element [0]"));

    CHECK_THROWS_WITH(
        gradcheck([](const std::vector<Variable>& in) { return in[0]; }, {Variable(core::ones({2}), true)}),
        Catch::Contains("gradcheck: input 0 is float32"));
}

TEST_CASE("the graph keeps an op's value only while a handle or a saved tensor holds it", "[autograd][engine]") {
    const int64_t n = 1 << 16;
    Variable x(core::ones({n}), /*requires_grad=*/true);
    const int64_t before = core::storage_bytes();
    Variable loss;
    {
        Variable h = mul(x, 3.0);  // saves nothing: its backward is dy · 3
        CHECK(core::storage_bytes() - before == n * 4);
        loss = sum(h);  // sum's backward needs h's shape, not its value
    }
    // h's last handle is gone; only sum's node points to it, so its n floats are freed
    CHECK(core::storage_bytes() - before == 4);  // the loss
    CHECK(loss.impl()->grad_fn->inputs()[0]->shape == core::Shape{n});
    loss.backward();
    CHECK(x.grad().to_vector()[n - 1] == 3.0);

    Variable kept = mul(x, 3.0);  // a handle keeps the value
    Variable loss2 = sum(kept);
    CHECK(kept.value().numel() == n);
    loss2.backward();
    CHECK(kept.value().at({0}) == 3.0);
}
