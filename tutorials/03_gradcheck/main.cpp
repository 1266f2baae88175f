// Tutorial 03 · gradcheck: is a backward function right?
//
// How autograd::gradcheck builds the Jacobian twice (central differences and
// backward()), the tolerance rule, gradcheck on a table of ops, and two
// deliberately wrong ops made with autograd::record: one whose backward
// forgets a factor (gradcheck must fail, and this program checks that it
// does) and one that forgets to undo a broadcast.
// Every layer of the documents (seed 000's MultiHeadAttention, seed 002's
// hand-written LayerNorm, ...) is tested this way in tests/.
// Read it with tutorials/03_gradcheck/README.md.
#include "common/prelude.hpp"
#include "exercise.hpp"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using c::Tensor;

namespace {

constexpr auto F64 = c::DType::float64;

// ---- two ops with a bug in their backward ------------------------------------------

// y = σ(x) = 1 / (1 + e^-x). The right backward is dx = dy · σ(x)(1 - σ(x));
// this one forgets the factor (1 - σ(x)). Its forward is perfect, so only a
// gradient check can notice.
Variable buggy_sigmoid(const Variable& x) {
    Tensor y = c::sigmoid(x.value());
    return ag::record("buggy_sigmoid", y, {x}, [y](const Tensor& dy, ag::Grads& g) {
        g[0] = c::mul(dy, y);  // BUG: should be dy · y · (1 - y)
    });
}

// The same op with the backward fixed.
Variable fixed_sigmoid(const Variable& x) {
    Tensor y = c::sigmoid(x.value());
    return ag::record("fixed_sigmoid", y, {x}, [y](const Tensor& dy, ag::Grads& g) {
        g[0] = c::mul(dy, c::mul(y, c::rsub(1.0, y)));  // dσ/dx = σ(1 - σ)
    });
}

// y = x + bias with x (B, D) and bias (D), broadcast over the B rows. The
// bias was used once per row, so its gradient is the SUM over the rows of dy.
// `bias_grad` chooses the backward for the bias: the right one, or two
// classic mistakes.
enum class BiasGrad { sum_rows, forget_to_reduce, mean_rows };
Variable add_bias(const Variable& x, const Variable& bias, BiasGrad rule) {
    return ag::record("add_bias", c::add(x.value(), bias.value()), {x, bias}, [rule](const Tensor& dy, ag::Grads& g) {
        g[0] = dy;  // (B, D)
        switch (rule) {
            case BiasGrad::sum_rows: g[1] = c::sum(dy, {0}); break;    // (D)   right
            case BiasGrad::forget_to_reduce: g[1] = dy; break;         // (B, D) BUG: wrong shape
            case BiasGrad::mean_rows: g[1] = c::mean(dy, {0}); break;  // (D)   BUG: 1/B too small
        }
    });
}

// Runs gradcheck and records a check named `what`; on failure prints the report.
bool check_gradcheck(tutorial::Tutorial& t, const std::string& what,
                     const std::function<Variable(const std::vector<Variable>&)>& f,
                     const std::vector<Variable>& inputs, const ag::GradcheckOptions& options = {}) {
    const ag::GradcheckResult r = ag::gradcheck(f, inputs, options);
    t.check(r.passed, what);
    if (!r.passed) tutorial::quote(r.report);
    return r.passed;
}

// The Jacobian of out (n) with respect to x (m), one ROW at a time: backward()
// with the seed e_i (1 at output i) leaves row i, ∂out_i/∂x, in x.grad().
Tensor jacobian_by_rows(const Variable& out, const Variable& x) {
    const int64_t n = out.numel(), m = x.numel();
    Tensor J = c::zeros({n, m}, F64);
    for (int64_t i = 0; i < n; ++i) {
        x.zero_grad();
        Tensor seed = c::zeros({n}, F64);
        seed.set({i}, 1.0);
        out.backward(seed, {.retain_graph = true});  // keep the graph: we go through it n times
        for (int64_t j = 0; j < m; ++j) J.set({i, j}, x.grad().at({j}));
    }
    return J;
}

// The exact Jacobian of out = x / Σx: J[i][j] = δ_ij/S - x_i/S² with S = Σx.
Tensor normalisation_jacobian(const Tensor& x) {
    const int64_t n = x.numel();
    const double S = c::sum(x).item();
    Tensor exact = c::zeros({n, n}, F64);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) exact.set({i, j}, (i == j ? 1 / S : 0) - x.at({i}) / (S * S));
    return exact;
}

// ---- the steps --------------------------------------------------------------------------

// PyTorch's torch.autograd.gradcheck (central differences, eps = 1e-6, float64 only)
void finite_differences_need_float64(Tutorial& t) {
    note(
        "For f(x) = x³ at x = 1.5 the derivative is f'(x) = 3x² = 6.75. Two ways to estimate it from "
        "values of f alone:\n"
        "    forward difference  (f(x + h) - f(x)) / h          error ≈ h·|f''|/2     = 4.5·h\n"
        "    central difference  (f(x + h) - f(x - h)) / 2h     error ≈ h²·|f'''|/6   = h²\n"
        "Both also suffer rounding: f is only known to about 1e-16·|f| in float64 (1e-7 in float32), "
        "and dividing by h magnifies that to about 1e-16/h. The table shows both effects:");
    const double x0 = 1.5, exact = 6.75;
    auto f64 = [](double x) { return x * x * x; };
    auto f32 = [](float x) { return x * x * x; };
    auto forward_error = [&](double h) { return std::abs((f64(x0 + h) - f64(x0)) / h - exact); };
    auto central_error = [&](double h) { return std::abs((f64(x0 + h) - f64(x0 - h)) / (2 * h) - exact); };
    auto central_error_32 = [&](double h) {
        const float hf = static_cast<float>(h), xf = static_cast<float>(x0);
        return std::abs(static_cast<double>((f32(xf + hf) - f32(xf - hf)) / (2 * hf)) - exact);
    };
    line("\n    {:>7}  {:>16}  {:>16}  {:>18}", "h", "forward, float64", "central, float64", "central, float32");
    for (double h : {1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-10})
        line("    {:>7.0e}  {:>16.2e}  {:>16.2e}  {:>18.2e}", h, forward_error(h), central_error(h),
             central_error_32(h));
    line();
    t.check_close(central_error(1e-2), 1e-4, 1e-9, "central difference at h = 1e-2: error h² = 1e-4 (exact for x³)");
    t.check_close(forward_error(1e-2), 4.5e-2 + 1e-4, 1e-9, "forward difference at h = 1e-2: error 4.5h + h² ≈ 0.045");
    t.check(central_error(1e-6) < 1e-8, "float64, central, h = 1e-6 (gradcheck's default eps): error below 1e-8");
    t.check(central_error(1e-10) > central_error(1e-6), "a smaller h is not better: at 1e-10 rounding dominates");
    t.check(central_error_32(1e-6) > 1e-2, "float32 with h = 1e-6 is useless: the error is above 0.01");
    note("So gradcheck uses central differences with eps = 1e-6 in float64 and refuses float32 inputs:");
    t.check_throws<ValueError>(
        "gradcheck on a float32 input throws ValueError",
        [] {
            (void)ag::gradcheck([](const std::vector<Variable>& in) { return ag::exp(in[0]); },
                                {Variable(c::ones({2}), true)});
        },
        "use float64");
}

// autograd/gradcheck.hpp: the Jacobian by columns (central differences) and by rows (backward)
void jacobian_both_ways(Tutorial& t) {
    note(
        "For a function with several inputs and outputs, 'the derivative' is the Jacobian matrix "
        "J[i][j] = ∂out_i / ∂in_j. gradcheck builds it twice:\n"
        "- numerically, one COLUMN j at a time: move in_j by ±eps, rerun f, and divide the change of "
        "every output by 2·eps;\n"
        "- analytically, one ROW i at a time: run backward() with the gradient seed e_i (1 at output i, 0 "
        "elsewhere); the input's gradient is then row i, ∂out_i/∂in.\n"
        "Here it is by hand for out = x / Σx (a normalisation, as in softmax), whose exact Jacobian is "
        "J[i][j] = δ_ij/S - x_i/S² with S = Σx:");
    const Variable x(c::tensor({1, 2, 4}, {3}, F64), true);
    auto f = [](const Variable& v) { return ag::div(v, ag::sum(v)); };  // (3) / () broadcasts
    const int64_t n = 3;
    const double eps = 1e-6;

    Tensor numerical = c::zeros({n, n}, F64);
    {
        ag::NoGradGuard no_grad;
        for (int64_t j = 0; j < n; ++j) {
            Tensor plus = x.value().clone(), minus = x.value().clone();
            plus.set({j}, plus.at({j}) + eps);
            minus.set({j}, minus.at({j}) - eps);
            const Tensor column = c::div(c::sub(f(Variable(plus)).value(), f(Variable(minus)).value()), 2 * eps);
            for (int64_t i = 0; i < n; ++i) numerical.set({i, j}, column.at({i}));
        }
    }
    const Variable out = f(x);
    const Tensor analytical = jacobian_by_rows(out, x);
    const Tensor exact = normalisation_jacobian(x.value());

    show("x", x.value());
    show("out", out.value());
    show("numerical ", numerical);
    show("analytical", analytical);
    show("exact     ", exact);
    t.check_close(analytical, exact, 1e-15, "backward() gives the exact Jacobian, row by row");
    t.check_close(numerical, exact, 1e-9, "central differences give it to within 1e-9, column by column");
    note("Each column of J sums to 0: moving one x_j changes the outputs, but they still sum to 1.");
    t.check_close(c::sum(exact, {0}), c::zeros({n}, F64), 1e-15, "columns of J sum to 0");
    const ag::GradcheckResult r = ag::gradcheck([&](const std::vector<Variable>& in) { return f(in[0]); }, {x});
    t.check(r.passed, "autograd::gradcheck does exactly this, and agrees");
}

// autograd/gradcheck.hpp (GradcheckOptions: eps, atol, rtol, PyTorch's defaults)
void tolerance_and_eps(Tutorial& t) {
    note(
        "The two Jacobians never agree exactly, so gradcheck accepts an entry when\n"
        "    |analytical - numerical| <= atol + rtol · |numerical|\n"
        "with atol = 1e-5 and rtol = 1e-3 (PyTorch's values), and eps = 1e-6. These are fields of "
        "GradcheckOptions; a test that needs other values says so:\n"
        "    ag::gradcheck(f, {x}, {.eps = 1e-4, .atol = 1e-6});\n"
        "A step that is too large makes a correct backward fail. For exp, the central difference with "
        "eps = 0.1 is e^x · sinh(0.1)/0.1 = e^x · 1.00167, 1.7e-3 relative: more than rtol allows.");
    const Variable x(c::tensor({-0.5, 0.3, 1.2}, {3}, F64), true);
    auto exp_f = [](const std::vector<Variable>& in) { return ag::exp(in[0]); };
    const ag::GradcheckResult coarse = ag::gradcheck(exp_f, {x}, {.eps = 0.1});
    const ag::GradcheckResult fine = ag::gradcheck(exp_f, {x});
    line();
    quote(coarse.report);
    line();
    t.check(!coarse.passed && coarse.mismatches == 3, "exp with eps = 0.1: all 3 diagonal entries fail");
    t.check_close(coarse.numerical / coarse.analytical, std::sinh(0.1) / 0.1, 1e-9,
                  "numerical / analytical is exactly sinh(0.1)/0.1 = 1.00167");
    t.check(fine.passed, "exp with the default eps = 1e-6 passes: the backward was right all along");
}

// One row of step 4's table: an op, and the inputs gradcheck moves.
struct OpCase {
    std::string name;
    std::function<Variable(const std::vector<Variable>&)> f;
    std::vector<Variable> inputs;
};

// Step 4's table: ops with broadcast, 0-d and non-contiguous inputs, random float64 (seeded).
std::vector<OpCase> op_cases(c::Generator& gen) {
    auto randn = [&](const c::Shape& s) { return Variable(c::randn(s, gen, F64), true); };
    auto positive = [&](const c::Shape& s) { return Variable(c::uniform(s, 0.5, 2.0, gen, F64), true); };
    // a transposed (non-contiguous) input: strides (1, 2) instead of (3, 1)
    const Variable transposed(c::randn({3, 2}, gen, F64).transpose(0, 1), true);
    return {
        {"mul, broadcast (2x3) · (3)",
         [](const auto& in) { return ag::mul(in[0], in[1]); },
         {randn({2, 3}), randn({3})}},
        {"div, broadcast (2x3) / (2x1)",
         [](const auto& in) { return ag::div(in[0], in[1]); },
         {randn({2, 3}), positive({2, 1})}},
        {"sub, 0-d scalar minus (4)",
         [](const auto& in) { return ag::sub(in[0], in[1]); },
         {Variable(c::scalar(0.7, F64), true), randn({4})}},
        {"tanh (2x3)", [](const auto& in) { return ag::tanh(in[0]); }, {randn({2, 3})}},
        {"sigmoid (2x3)", [](const auto& in) { return ag::sigmoid(in[0]); }, {randn({2, 3})}},
        {"log of positives (4)", [](const auto& in) { return ag::log(in[0]); }, {positive({4})}},
        {"sqrt of positives (4)", [](const auto& in) { return ag::sqrt(in[0]); }, {positive({4})}},
        {"pow(x, 3) (4)", [](const auto& in) { return ag::pow(in[0], 3); }, {randn({4})}},
        {"sum over dim 1, keepdim (2x3)", [](const auto& in) { return ag::sum(in[0], {1}, true); }, {randn({2, 3})}},
        {"mean over dim 0 (2x3)", [](const auto& in) { return ag::mean(in[0], {0}); }, {randn({2, 3})}},
        {"max over dim 1 (2x3)", [](const auto& in) { return ag::max(in[0], {1}); }, {randn({2, 3})}},
        {"var, unbiased, dim 1 (2x4)", [](const auto& in) { return ag::var(in[0], {1}, true); }, {randn({2, 4})}},
        {"exp of a transposed view (2x3)", [](const auto& in) { return ag::exp(in[0]); }, {transposed}},
        {"matmul (2x3) @ (3x4)",
         [](const auto& in) { return ag::matmul(in[0], in[1]); },
         {randn({2, 3}), randn({3, 4})}},
        {"softmax over rows (2x4)", [](const auto& in) { return ag::softmax(in[0]); }, {randn({2, 4})}},
        {"masked_softmax, valid_lens [2, 3] (2x2x4)",
         [](const auto& in) {
             return ag::masked_softmax(in[0], c::tensor({2, 3}, {2}, DType::int64));
         },
         {randn({2, 2, 4})}},
        {"layer_norm over the last dim (2x4)",
         [](const auto& in) { return ag::layer_norm(in[0], in[1], in[2], 1e-5); },
         {randn({2, 4}), randn({4}), randn({4})}},
        {"transpose_qkv: reshape, permute (2x3x4)",
         [](const auto& in) {
             return ag::reshape(ag::permute(ag::reshape(in[0], {2, 3, 2, 2}), {0, 2, 1, 3}), {4, 3, 2});
         },
         {randn({2, 3, 4})}},
        {"tutorial 02's y = Σ(a·b + e^a)",
         [](const auto& in) { return ag::sum(ag::add(ag::mul(in[0], in[1]), ag::exp(in[0]))); },
         {randn({3}), randn({3})}},
    };
}

// tests/autograd: every differentiable op has a float64 gradcheck
void gradcheck_table_of_ops(Tutorial& t) {
    note(
        "The library's tests run gradcheck on every differentiable op, with broadcast and non-contiguous "
        "inputs because that is where backward functions go wrong. A few of them, with random float64 "
        "inputs (seeded, so the run is repeatable):\n");
    c::Generator gen(3);
    const std::vector<OpCase> cases = op_cases(gen);
    int passed = 0;
    for (const OpCase& k : cases) {
        int64_t columns = 0;
        for (const Variable& v : k.inputs) columns += v.numel();
        Variable out;
        {
            ag::NoGradGuard no_grad;
            out = k.f(k.inputs);
        }
        passed +=
            check_gradcheck(t, fmt::format("{:<42} Jacobian {} x {}", k.name, out.numel(), columns), k.f, k.inputs);
    }
    t.check(passed == static_cast<int>(cases.size()), fmt::format("all {} ops pass", cases.size()));
    note("\n(max is differentiable only where the maximum is unique; random inputs have no ties.)");
}

// autograd::record, and what a gradcheck report says about a backward that forgets a factor
void sigmoid_missing_factor(Tutorial& t) {
    note(
        "autograd::record is how every op is written: a name, the forward value, the inputs, and a "
        "backward lambda. Here is a sigmoid whose backward forgets the factor (1 - σ):\n"
        "    Tensor y = c::sigmoid(x.value());\n"
        "    return ag::record(\"buggy_sigmoid\", y, {x}, [y](const Tensor& dy, ag::Grads& g) {\n"
        "        g[0] = c::mul(dy, y);  // BUG: should be dy · y · (1 - y)\n"
        "    });\n"
        "Its forward values are perfect, so no test of values alone can catch it:");
    const Variable x(c::tensor({-1.0, 0.0, 2.0}, {3}, F64), true);
    show("buggy_sigmoid(x)", buggy_sigmoid(x).value());
    t.check_close(buggy_sigmoid(x).value(), c::sigmoid(x.value()), 0, "the forward is exactly sigmoid");

    note("\ngradcheck compares the Jacobians and explains the first disagreement it finds:\n");
    const ag::GradcheckResult r =
        ag::gradcheck([](const std::vector<Variable>& in) { return buggy_sigmoid(in[0]); }, {x});
    quote(r.report);
    line();
    t.check(!r.passed, "gradcheck FAILS for buggy_sigmoid, as it must");
    const double s0 = 1 / (1 + std::exp(1.0));  // σ(-1)
    t.check(r.input == 0 && r.input_element == 0 && r.output_element == 0,
            "the report points at input 0, element [0], output element [0]");
    t.check_close(r.analytical, s0, 1e-12, fmt::format("its 'analytical' value is σ(-1) = {:.6f}: the bug's dy·σ", s0));
    t.check_close(r.numerical, s0 * (1 - s0), 1e-8,
                  fmt::format("its 'numerical' value is σ(1 - σ) = {:.6f}: the true slope", s0 * (1 - s0)));
    t.check(r.mismatches == 3,
            "3 Jacobian entries disagree: the diagonal (σ(x_i) never equals σ(x_i)(1 - σ(x_i)) for finite x)");
    note(
        "\nReading the report: the analytical value is what YOUR backward said, the numerical one is what "
        "the function actually does. A ratio of 1/(1 - σ) between them points at the missing factor.");
    check_gradcheck(t, "with the backward fixed, gradcheck passes",
                    [](const std::vector<Variable>& in) { return fixed_sigmoid(in[0]); }, {x});
}

// core::sum_to_shape: a broadcast input's gradient is summed back to its shape
void broadcast_missing_sum(Tutorial& t) {
    note(
        "The other classic bug: an op that broadcasts, x (B, D) + bias (D), must send the bias the SUM "
        "over the B rows of dy, because the bias was used once per row (core::sum_to_shape does this for "
        "the library's ops). Two ways to get it wrong:");
    c::Generator gen(6);
    const Variable x(c::randn({2, 3}, gen, F64), true);
    const Variable bias(c::tensor({0.1, -0.2, 0.3}, {3}, F64), true);
    auto with = [](BiasGrad rule) {
        return [rule](const std::vector<Variable>& in) { return add_bias(in[0], in[1], rule); };
    };

    note(
        "\n1. Handing back dy unreduced gives the bias a gradient of the wrong SHAPE. backward() checks "
        "every gradient's shape against its input and stops with an error naming the op:");
    t.check_throws<ValueError>(
        "add_bias with g[1] = dy: backward() throws ValueError",
        [&] {
            (void)ag::gradcheck(with(BiasGrad::forget_to_reduce), {x, bias});
        },
        "gradient for input 1 has shape (2x3)");

    note(
        "\n2. Averaging instead of summing has the right shape, so only the values are wrong (by a "
        "factor B = 2). The engine cannot see that; gradcheck can:\n");
    const ag::GradcheckResult r = ag::gradcheck(with(BiasGrad::mean_rows), {x, bias});
    quote(r.report);
    line();
    t.check(!r.passed && r.input == 1, "add_bias with a mean: gradcheck fails, and blames input 1 (the bias)");
    t.check_close(r.numerical / r.analytical, 2.0, 1e-6, "numerical / analytical = 2 = B, the missing sum");
    t.check(r.mismatches == 6, "6 entries of the bias's (2·3) x 3 Jacobian block disagree: every nonzero one");
    check_gradcheck(t, "with the sum over rows, gradcheck passes for both inputs", with(BiasGrad::sum_rows), {x, bias});
    note("\nThe engine checks shapes; gradcheck checks values. A new op is finished when both are happy.");
}

// ---- the exercise (--exercise): tutorials/03_gradcheck/exercise.cpp -------------------------

// autograd/gradcheck.hpp: the numerical half, column by column (step 2)
void exercise_numerical_jacobian(Tutorial& t) {
    note(
        "Write exercise::numerical_jacobian(f, x, eps), the column-by-column half of step 2. The checks use "
        "it on out = x / Σx, whose exact Jacobian is δ_ij/S - x_i/S², and on softmax, against the "
        "Jacobian that backward() builds row by row.");
    const Tensor x = c::tensor({1, 2, 4}, {3}, F64);
    const Tensor J = exercise::numerical_jacobian([](const Tensor& v) { return c::div(v, c::sum(v)); }, x, 1e-6);
    show("your Jacobian of x / Σx", J);
    t.check_close(J, normalisation_jacobian(x), 1e-9, "x / Σx: equals δ_ij/S - x_i/S² to 1e-9");

    c::Generator gen(303);
    const Variable z(c::randn({4}, gen, F64), true);
    const Tensor analytical = jacobian_by_rows(ag::softmax(z), z);
    const Tensor numerical =
        exercise::numerical_jacobian([](const Tensor& v) { return c::softmax(v); }, z.value(), 1e-6);
    t.check_close(numerical, analytical, 1e-8, "softmax: your Jacobian equals backward()'s, row by row, to 1e-8");
    const Tensor coarse =
        exercise::numerical_jacobian([](const Tensor& v) { return c::exp(v); }, c::tensor({0.3}, {1}, F64), 0.1);
    t.check_close(coarse.at({0, 0}), std::exp(0.3) * std::sinh(0.1) / 0.1, 1e-12,
                  "with eps = 0.1 on exp it gives e^x · sinh(0.1)/0.1, as step 3 says");
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(argc, argv,
               {.title = "tformer tutorial 03 · gradcheck: testing backward functions",
                .follows = "autograd/gradcheck.hpp (PyTorch's torch.autograd.gradcheck); the README's "
                           "'Reading a gradcheck'",
                .exercise = "write the numerical half of gradcheck, a central-difference Jacobian "
                            "(tutorials/03_gradcheck/exercise.cpp)"});
    t.step("1. Finite differences, and why gradcheck wants float64", [&] { finite_differences_need_float64(t); });
    t.step("2. The Jacobian, built both ways, by hand", [&] { jacobian_both_ways(t); });
    t.step("3. The tolerance rule, and what eps does", [&] { tolerance_and_eps(t); });
    t.step("4. gradcheck on a table of ops", [&] { gradcheck_table_of_ops(t); });
    t.step("5. A deliberately wrong op: a sigmoid that forgets a factor", [&] { sigmoid_missing_factor(t); });
    t.step("6. A broadcast whose backward forgets to reduce", [&] { broadcast_missing_sum(t); });
    t.exercise("Exercise. The numerical Jacobian", [&] { exercise_numerical_jacobian(t); });
    return t.finish();
}
