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
// tutorial-languages: en zh
// tutorial-fault: float32-computed-in-float64 | float32 with h = 1e-6 is useless
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
constexpr auto F32 = c::DType::float32;

// ---- finite differences, by the library's own ops ---------------------------------------

// f(x) = x³ with the library's elementwise ops, in x's dtype: the function
// step 1 differentiates numerically.
Tensor cube(const Tensor& x) { return c::mul(c::mul(x, x), x); }

// (f(x + h) - f(x)) / h, every operation done by the library in `dtype`.
double forward_difference(double x0, double h, DType dtype) {
    const Tensor x = c::scalar(x0, dtype);
    return c::div(c::sub(cube(c::add(x, h)), cube(x)), h).item();
}

// (f(x + h) - f(x - h)) / 2h, every operation done by the library in `dtype`.
double central_difference(double x0, double h, DType dtype) {
    const Tensor x = c::scalar(x0, dtype);
    return c::div(c::sub(cube(c::add(x, h)), cube(c::sub(x, h))), 2 * h).item();
}

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
bool check_gradcheck(tutorial::Tutorial& t, const Phrase& what,
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
    note({.en = "For f(x) = x³ at x = 1.5 the derivative is f'(x) = 3x² = 6.75. Two ways to estimate it from "
                "values of f alone:\n"
                "    forward difference  (f(x + h) - f(x)) / h          error ≈ h·|f''|/2     = 4.5·h\n"
                "    central difference  (f(x + h) - f(x - h)) / 2h     error ≈ h²·|f'''|/6   = h²\n"
                "Both also suffer rounding: f is only known to about 1e-16·|f| in float64 (1e-7 in float32), "
                "and dividing by h magnifies that to about 1e-16/h. The library computes f, the differences "
                "and the divisions in the tensor's dtype; the table shows both effects:",
          .zh = "对 f(x) = x³，在 x = 1.5 处的导数是 f'(x) = 3x² = 6.75。只用 f 的函数值估计它，有两种办法：\n"
                "    前向差分  (f(x + h) - f(x)) / h          误差 ≈ h·|f''|/2     = 4.5·h\n"
                "    中心差分  (f(x + h) - f(x - h)) / 2h     误差 ≈ h²·|f'''|/6   = h²\n"
                "两者还都受舍入误差影响：float64 下 f 的值只精确到约 1e-16·|f|（float32 下约 1e-7），除以 h 又把它放大"
                "到约 1e-16/h。下面 f、差和除法都由库在张量的 dtype 下计算；表中可以看到这两种效应："});
    const double x0 = 1.5;
    // f'(1.5) from the library's backward: the reference the errors are measured against
    const Variable xv(c::scalar(x0, F64), true);
    ag::sum(ag::mul(ag::mul(xv, xv), xv)).backward();
    const double exact = xv.grad().item();
    // float32 unless --inject-fault float32-computed-in-float64 (the test that the float32 check can fail)
    const DType single = t.injected("float32-computed-in-float64") ? F64 : F32;
    auto forward_error = [&](double h) { return std::abs(forward_difference(x0, h, F64) - exact); };
    auto central_error = [&](double h) { return std::abs(central_difference(x0, h, F64) - exact); };
    auto central_error_32 = [&](double h) { return std::abs(central_difference(x0, h, single) - exact); };
    line({.en = "\n          h  forward, float64  central, float64    central, float32",
          .zh = "\n          h  前向差分 float64  中心差分 float64    中心差分 float32"});
    for (double h : {1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-10})
        line("    {:>7.0e}  {:>16.2e}  {:>16.2e}  {:>18.2e}", h, forward_error(h), central_error(h),
             central_error_32(h));
    line();
    t.check_close(exact, 3 * x0 * x0, 0,
                  {.en = "backward() of x·x·x at 1.5 gives 3x² = 6.75 exactly: the reference for the errors",
                   .zh = "x·x·x 在 1.5 处的 backward() 正好给出 3x² = 6.75：误差以它为准"});
    t.check_close(central_error(1e-2), 1e-4, 1e-9,
                  {.en = "central difference at h = 1e-2: error h² = 1e-4 (exact for x³)",
                   .zh = "h = 1e-2 的中心差分：误差为 h² = 1e-4（对 x³ 这是精确的）"});
    t.check_close(forward_error(1e-2), 4.5e-2 + 1e-4, 1e-9,
                  {.en = "forward difference at h = 1e-2: error 4.5h + h² ≈ 0.045",
                   .zh = "h = 1e-2 的前向差分：误差为 4.5h + h² ≈ 0.045"});
    t.check(central_error(1e-6) < 1e-8, {.en = "float64, central, h = 1e-6 (gradcheck's default eps): error below 1e-8",
                                         .zh = "float64、中心差分、h = 1e-6（gradcheck 默认的 eps）：误差低于 1e-8"});
    t.check(central_error(1e-10) > central_error(1e-6), {.en = "a smaller h is not better: at 1e-10 rounding dominates",
                                                         .zh = "h 更小并不更好：在 1e-10 时舍入误差占了上风"});
    t.check(central_error_32(1e-6) > 1e-2, {.en = "float32 with h = 1e-6 is useless: the error is above 0.01",
                                            .zh = "float32 取 h = 1e-6 毫无用处：误差超过 0.01"});
    note({.en = "So gradcheck uses central differences with eps = 1e-6 in float64 and refuses float32 inputs:",
          .zh = "所以 gradcheck 在 float64 下用 eps = 1e-6 的中心差分，并拒绝 float32 的输入："});
    t.check_throws<ValueError>(
        {.en = "gradcheck on a float32 input throws ValueError", .zh = "对 float32 输入做 gradcheck 抛出 ValueError"},
        [] {
            (void)ag::gradcheck([](const std::vector<Variable>& in) { return ag::exp(in[0]); },
                                {Variable(c::ones({2}), true)});
        },
        "use float64");
}

// autograd/gradcheck.hpp: the Jacobian by columns (central differences) and by rows (backward)
void jacobian_both_ways(Tutorial& t) {
    note(
        {.en = "For a function with several inputs and outputs, 'the derivative' is the Jacobian matrix "
               "J[i][j] = ∂out_i / ∂in_j. gradcheck builds it twice:\n"
               "- numerically, one COLUMN j at a time: move in_j by ±eps, rerun f, and divide the change of "
               "every output by 2·eps;\n"
               "- analytically, one ROW i at a time: run backward() with the gradient seed e_i (1 at output i, 0 "
               "elsewhere); the input's gradient is then row i, ∂out_i/∂in.\n"
               "Here it is by hand for out = x / Σx (a normalisation, as in softmax), whose exact Jacobian is "
               "J[i][j] = δ_ij/S - x_i/S² with S = Σx:",
         .zh =
             "对有多个输入和输出的函数，“导数”就是雅可比矩阵 J[i][j] = ∂out_i / ∂in_j。gradcheck 用两种办法各建一次：\n"
             "- 数值法，一次一列 j：把 in_j 移动 ±eps，重新计算 f，把每个输出的变化除以 2·eps；\n"
             "- 解析法，一次一行 i：以梯度种子 e_i（输出 i 处为 1，其余为 0）运行 backward()，输入的梯度就是第 i 行 "
             "∂out_i/∂in。\n"
             "下面对 out = x / Σx（一种归一化，softmax 里也有）手工做一遍，它的精确雅可比矩阵是 "
             "J[i][j] = δ_ij/S - x_i/S²，其中 S = Σx："});
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
    show({.en = "numerical ", .zh = "数值法"}, numerical);
    show({.en = "analytical", .zh = "解析法"}, analytical);
    show({.en = "exact     ", .zh = "精确值"}, exact);
    t.check_close(
        analytical, exact, 1e-15,
        {.en = "backward() gives the exact Jacobian, row by row", .zh = "backward() 逐行给出精确的雅可比矩阵"});
    t.check_close(numerical, exact, 1e-9,
                  {.en = "central differences give it to within 1e-9, column by column",
                   .zh = "中心差分逐列给出它，误差在 1e-9 以内"});
    note({.en = "Each column of J sums to 0: moving one x_j changes the outputs, but they still sum to 1.",
          .zh = "J 的每一列之和为 0：移动某个 x_j 会改变各个输出，但它们的和仍是 1。"});
    t.check_close(c::sum(exact, {0}), c::zeros({n}, F64), 1e-15,
                  {.en = "columns of J sum to 0", .zh = "J 的各列之和为 0"});
    const ag::GradcheckResult r = ag::gradcheck([&](const std::vector<Variable>& in) { return f(in[0]); }, {x});
    t.check(r.passed, {.en = "autograd::gradcheck does exactly this, and agrees",
                       .zh = "autograd::gradcheck 做的正是这件事，结果一致"});
}

// autograd/gradcheck.hpp (GradcheckOptions: eps, atol, rtol, PyTorch's defaults)
void tolerance_and_eps(Tutorial& t) {
    note({.en = "The two Jacobians never agree exactly, so gradcheck accepts an entry when\n"
                "    |analytical - numerical| <= atol + rtol · |numerical|\n"
                "with atol = 1e-5 and rtol = 1e-3 (PyTorch's values), and eps = 1e-6. These are fields of "
                "GradcheckOptions; a test that needs other values says so:\n"
                "    ag::gradcheck(f, {x}, {.eps = 1e-4, .atol = 1e-6});\n"
                "A step that is too large makes a correct backward fail. For exp, the central difference with "
                "eps = 0.1 is e^x · sinh(0.1)/0.1 = e^x · 1.00167, 1.7e-3 relative: more than rtol allows.",
          .zh =
              "两个雅可比矩阵永远不会完全相等，所以 gradcheck 在满足\n"
              "    |analytical - numerical| <= atol + rtol · |numerical|\n"
              "时接受一个元素，其中 atol = 1e-5、rtol = 1e-3（PyTorch 的取值），eps = 1e-6。它们都是 GradcheckOptions "
              "的字段；需要别的值的测试会写明：\n"
              "    ag::gradcheck(f, {x}, {.eps = 1e-4, .atol = 1e-6});\n"
              "步长太大会让正确的反向函数也通不过。对 exp，eps = 0.1 的中心差分是 e^x · sinh(0.1)/0.1 = "
              "e^x · 1.00167，相对误差 1.7e-3，超过了 rtol 的允许范围。"});
    const Variable x(c::tensor({-0.5, 0.3, 1.2}, {3}, F64), true);
    auto exp_f = [](const std::vector<Variable>& in) { return ag::exp(in[0]); };
    const ag::GradcheckResult coarse = ag::gradcheck(exp_f, {x}, {.eps = 0.1});
    const ag::GradcheckResult fine = ag::gradcheck(exp_f, {x});
    line();
    quote(coarse.report);
    line();
    t.check(!coarse.passed && coarse.mismatches == 3, {.en = "exp with eps = 0.1: all 3 diagonal entries fail",
                                                       .zh = "eps = 0.1 时的 exp：对角线上的 3 个元素都不通过"});
    t.check_close(coarse.numerical / coarse.analytical, std::sinh(0.1) / 0.1, 1e-9,
                  {.en = "numerical / analytical is exactly sinh(0.1)/0.1 = 1.00167",
                   .zh = "numerical / analytical 正好是 sinh(0.1)/0.1 = 1.00167"});
    t.check(fine.passed, {.en = "exp with the default eps = 1e-6 passes: the backward was right all along",
                          .zh = "默认 eps = 1e-6 时 exp 通过：反向函数一直都是对的"});
}

// One row of step 4's table: an op, and the inputs gradcheck moves.
struct OpCase {
    Text name;
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
        {{.en = "mul, broadcast (2x3) · (3)", .zh = "mul，广播 (2x3) · (3)"},
         [](const auto& in) { return ag::mul(in[0], in[1]); },
         {randn({2, 3}), randn({3})}},
        {{.en = "div, broadcast (2x3) / (2x1)", .zh = "div，广播 (2x3) / (2x1)"},
         [](const auto& in) { return ag::div(in[0], in[1]); },
         {randn({2, 3}), positive({2, 1})}},
        {{.en = "sub, 0-d scalar minus (4)", .zh = "sub，0 维标量减 (4)"},
         [](const auto& in) { return ag::sub(in[0], in[1]); },
         {Variable(c::scalar(0.7, F64), true), randn({4})}},
        {both("tanh (2x3)"), [](const auto& in) { return ag::tanh(in[0]); }, {randn({2, 3})}},
        {both("sigmoid (2x3)"), [](const auto& in) { return ag::sigmoid(in[0]); }, {randn({2, 3})}},
        {{.en = "log of positives (4)", .zh = "对正数取 log (4)"},
         [](const auto& in) { return ag::log(in[0]); },
         {positive({4})}},
        {{.en = "sqrt of positives (4)", .zh = "对正数取 sqrt (4)"},
         [](const auto& in) { return ag::sqrt(in[0]); },
         {positive({4})}},
        {both("pow(x, 3) (4)"), [](const auto& in) { return ag::pow(in[0], 3); }, {randn({4})}},
        {{.en = "sum over dim 1, keepdim (2x3)", .zh = "沿第 1 维 sum，keepdim (2x3)"},
         [](const auto& in) { return ag::sum(in[0], {1}, true); },
         {randn({2, 3})}},
        {{.en = "mean over dim 0 (2x3)", .zh = "沿第 0 维 mean (2x3)"},
         [](const auto& in) { return ag::mean(in[0], {0}); },
         {randn({2, 3})}},
        {{.en = "max over dim 1 (2x3)", .zh = "沿第 1 维 max (2x3)"},
         [](const auto& in) { return ag::max(in[0], {1}); },
         {randn({2, 3})}},
        {{.en = "var, unbiased, dim 1 (2x4)", .zh = "var，无偏，第 1 维 (2x4)"},
         [](const auto& in) { return ag::var(in[0], {1}, true); },
         {randn({2, 4})}},
        {{.en = "exp of a transposed view (2x3)", .zh = "对转置视图取 exp (2x3)"},
         [](const auto& in) { return ag::exp(in[0]); },
         {transposed}},
        {both("matmul (2x3) @ (3x4)"),
         [](const auto& in) { return ag::matmul(in[0], in[1]); },
         {randn({2, 3}), randn({3, 4})}},
        {{.en = "softmax over rows (2x4)", .zh = "逐行 softmax (2x4)"},
         [](const auto& in) { return ag::softmax(in[0]); },
         {randn({2, 4})}},
        {{.en = "masked_softmax, valid_lens [2, 3] (2x2x4)", .zh = "masked_softmax，valid_lens [2, 3] (2x2x4)"},
         [](const auto& in) {
             return ag::masked_softmax(in[0], c::tensor({2, 3}, {2}, DType::int64));
         },
         {randn({2, 2, 4})}},
        {{.en = "layer_norm over the last dim (2x4)", .zh = "沿最后一维 layer_norm (2x4)"},
         [](const auto& in) { return ag::layer_norm(in[0], in[1], in[2], 1e-5); },
         {randn({2, 4}), randn({4}), randn({4})}},
        {{.en = "transpose_qkv: reshape, permute (2x3x4)", .zh = "transpose_qkv：reshape、permute (2x3x4)"},
         [](const auto& in) {
             return ag::reshape(ag::permute(ag::reshape(in[0], {2, 3, 2, 2}), {0, 2, 1, 3}), {4, 3, 2});
         },
         {randn({2, 3, 4})}},
        {{.en = "tutorial 02's y = Σ(a·b + e^a)", .zh = "教程 02 的 y = Σ(a·b + e^a)"},
         [](const auto& in) { return ag::sum(ag::add(ag::mul(in[0], in[1]), ag::exp(in[0]))); },
         {randn({3}), randn({3})}},
    };
}

// tests/autograd: every differentiable op has a float64 gradcheck
void gradcheck_table_of_ops(Tutorial& t) {
    note({.en = "The library's tests run gradcheck on every differentiable op, with broadcast and non-contiguous "
                "inputs because that is where backward functions go wrong. A few of them, with random float64 "
                "inputs (seeded, so the run is repeatable):\n",
          .zh = "库的测试对每个可微运算都运行 gradcheck，并特意用需要广播的输入和不连续的输入，因为反向函数正是在这些"
                "地方出错。下面是其中几个，用随机的 float64 输入（固定随机种子，每次运行结果相同）：\n"});
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
        passed += check_gradcheck(t,
                                  phrase({.en = "{:<42} Jacobian {} x {}", .zh = "{:<42} 雅可比矩阵 {} x {}"},
                                         phrase(k.name), out.numel(), columns),
                                  k.f, k.inputs);
    }
    t.check(passed == static_cast<int>(cases.size()), {.en = "all {} ops pass", .zh = "全部 {} 个运算都通过"},
            cases.size());
    note({.en = "\n(max is differentiable only where the maximum is unique; random inputs have no ties.)",
          .zh = "\n（max 只在最大值唯一处可微；随机输入不会出现并列。）"});
}

// autograd::record, and what a gradcheck report says about a backward that forgets a factor
void sigmoid_missing_factor(Tutorial& t) {
    note({.en = "autograd::record is how every op is written: a name, the forward value, the inputs, and a "
                "backward lambda. Here is a sigmoid whose backward forgets the factor (1 - σ):\n"
                "    Tensor y = c::sigmoid(x.value());\n"
                "    return ag::record(\"buggy_sigmoid\", y, {x}, [y](const Tensor& dy, ag::Grads& g) {\n"
                "        g[0] = c::mul(dy, y);  // BUG: should be dy · y · (1 - y)\n"
                "    });\n"
                "Its forward values are perfect, so no test of values alone can catch it:",
          .zh =
              "每个运算都是用 autograd::record 写成的：一个名字、前向的值、输入，以及一个反向 lambda。下面这个 sigmoid "
              "的反向函数漏掉了因子 (1 - σ)：\n"
              "    Tensor y = c::sigmoid(x.value());\n"
              "    return ag::record(\"buggy_sigmoid\", y, {x}, [y](const Tensor& dy, ag::Grads& g) {\n"
              "        g[0] = c::mul(dy, y);  // BUG: should be dy · y · (1 - y)\n"
              "    });\n"
              "它的前向值完全正确，所以只检验值的测试抓不住它："});
    const Variable x(c::tensor({-1.0, 0.0, 2.0}, {3}, F64), true);
    show("buggy_sigmoid(x)", buggy_sigmoid(x).value());
    t.check_close(buggy_sigmoid(x).value(), c::sigmoid(x.value()), 0,
                  {.en = "the forward is exactly sigmoid", .zh = "前向计算与 sigmoid 完全相同"});

    note({.en = "\ngradcheck compares the Jacobians and explains the first disagreement it finds:\n",
          .zh = "\ngradcheck 比较两个雅可比矩阵，并解释它找到的第一处不一致：\n"});
    const ag::GradcheckResult r =
        ag::gradcheck([](const std::vector<Variable>& in) { return buggy_sigmoid(in[0]); }, {x});
    quote(r.report);
    line();
    t.check(!r.passed, {.en = "gradcheck FAILS for buggy_sigmoid, as it must",
                        .zh = "gradcheck 对 buggy_sigmoid 不通过，理应如此"});
    const double s0 = 1 / (1 + std::exp(1.0));  // σ(-1)
    t.check(r.input == 0 && r.input_element == 0 && r.output_element == 0,
            {.en = "the report points at input 0, element [0], output element [0]",
             .zh = "报告指向输入 0 的元素 [0]、输出元素 [0]"});
    t.check_close(r.analytical, s0, 1e-12,
                  {.en = "its 'analytical' value is σ(-1) = {:.6f}: the bug's dy·σ",
                   .zh = "它的 “analytical” 值是 σ(-1) = {:.6f}：即出错的 dy·σ"},
                  s0);
    t.check_close(r.numerical, s0 * (1 - s0), 1e-8,
                  {.en = "its 'numerical' value is σ(1 - σ) = {:.6f}: the true slope",
                   .zh = "它的 “numerical” 值是 σ(1 - σ) = {:.6f}：即真正的斜率"},
                  s0 * (1 - s0));
    t.check(r.mismatches == 3,
            {.en = "3 Jacobian entries disagree: the diagonal (σ(x_i) never equals σ(x_i)(1 - σ(x_i)) for finite x)",
             .zh = "有 3 个雅可比矩阵元素不一致：对角线（对有限的 x，σ(x_i) 永远不等于 σ(x_i)(1 - σ(x_i))）"});
    note({.en = "\nReading the report: the analytical value is what YOUR backward said, the numerical one is what "
                "the function actually does. A ratio of 1/(1 - σ) between them points at the missing factor.",
          .zh = "\n怎样读这份报告：analytical 是“你的”反向函数给出的值，numerical 是函数实际的表现。两者之比为 "
                "1/(1 - σ)，指向了漏掉的那个因子。"});
    check_gradcheck(t,
                    phrase({.en = "with the backward fixed, gradcheck passes", .zh = "修好反向函数后，gradcheck 通过"}),
                    [](const std::vector<Variable>& in) { return fixed_sigmoid(in[0]); }, {x});
}

// core::sum_to_shape: a broadcast input's gradient is summed back to its shape
void broadcast_missing_sum(Tutorial& t) {
    note({.en = "The other classic bug: an op that broadcasts, x (B, D) + bias (D), must send the bias the SUM "
                "over the B rows of dy, because the bias was used once per row (core::sum_to_shape does this for "
                "the library's ops). Two ways to get it wrong:",
          .zh = "另一个经典错误：一个会广播的运算 x (B, D) + bias (D)，必须把 dy 在 B 行上的“和”传给 bias，因为 bias "
                "每一行都用了一次（库里的运算由 core::sum_to_shape 完成这件事）。有两种错法："});
    c::Generator gen(6);
    const Variable x(c::randn({2, 3}, gen, F64), true);
    const Variable bias(c::tensor({0.1, -0.2, 0.3}, {3}, F64), true);
    auto with = [](BiasGrad rule) {
        return [rule](const std::vector<Variable>& in) { return add_bias(in[0], in[1], rule); };
    };

    note({.en = "\n1. Handing back dy unreduced gives the bias a gradient of the wrong SHAPE. backward() checks "
                "every gradient's shape against its input and stops with an error naming the op:",
          .zh = "\n1. 不做归约、直接把 dy 传回，bias 得到的梯度“形状”就错了。backward() 会对照输入检查每个梯度的形状，"
                "并报出写明运算名的错误："});
    t.check_throws<ValueError>(
        {.en = "add_bias with g[1] = dy: backward() throws ValueError",
         .zh = "add_bias 写成 g[1] = dy：backward() 抛出 ValueError"},
        [&] {
            (void)ag::gradcheck(with(BiasGrad::forget_to_reduce), {x, bias});
        },
        "gradient for input 1 has shape (2x3)");

    note({.en = "\n2. Averaging instead of summing has the right shape, so only the values are wrong (by a "
                "factor B = 2). The engine cannot see that; gradcheck can:\n",
          .zh = "\n2. 用平均代替求和，形状是对的，只是数值错了（差一个因子 B = 2）。引擎看不出来，gradcheck "
                "看得出来：\n"});
    const ag::GradcheckResult r = ag::gradcheck(with(BiasGrad::mean_rows), {x, bias});
    quote(r.report);
    line();
    t.check(!r.passed && r.input == 1, {.en = "add_bias with a mean: gradcheck fails, and blames input 1 (the bias)",
                                        .zh = "用平均的 add_bias：gradcheck 不通过，并指出是输入 1（bias）的问题"});
    t.check_close(r.numerical / r.analytical, 2.0, 1e-6,
                  {.en = "numerical / analytical = 2 = B, the missing sum",
                   .zh = "numerical / analytical = 2 = B，即少掉的求和"});
    t.check(r.mismatches == 6, {.en = "6 entries of the bias's (2·3) x 3 Jacobian block disagree: every nonzero one",
                                .zh = "bias 的 (2·3) x 3 雅可比块中有 6 个元素不一致：所有非零元素"});
    check_gradcheck(t,
                    phrase({.en = "with the sum over rows, gradcheck passes for both inputs",
                            .zh = "改为按行求和后，两个输入都通过 gradcheck"}),
                    with(BiasGrad::sum_rows), {x, bias});
    note({.en = "\nThe engine checks shapes; gradcheck checks values. A new op is finished when both are happy.",
          .zh = "\n引擎检查形状，gradcheck 检查数值。两者都满意，一个新运算才算完成。"});
}

// ---- the exercise (--exercise): tutorials/03_gradcheck/exercise.cpp -------------------------

// autograd/gradcheck.hpp: the numerical half, column by column (step 2)
void exercise_numerical_jacobian(Tutorial& t) {
    note({.en = "Write exercise::numerical_jacobian(f, x, eps), the column-by-column half of step 2. The checks use "
                "it on out = x / Σx, whose exact Jacobian is δ_ij/S - x_i/S², and on softmax, against the "
                "Jacobian that backward() builds row by row.",
          .zh =
              "写出 exercise::numerical_jacobian(f, x, eps)，即第 2 步中逐列计算的那一半。检查把它用在 out = x / Σx "
              "上（其精确雅可比矩阵是 δ_ij/S - x_i/S²），再用在 softmax 上，与 backward() 逐行建出的雅可比矩阵比较。"});
    const Tensor x = c::tensor({1, 2, 4}, {3}, F64);
    const Tensor J = exercise::numerical_jacobian([](const Tensor& v) { return c::div(v, c::sum(v)); }, x, 1e-6);
    show({.en = "your Jacobian of x / Σx", .zh = "你算出的 x / Σx 的雅可比矩阵"}, J);
    t.check_close(J, normalisation_jacobian(x), 1e-9,
                  {.en = "x / Σx: equals δ_ij/S - x_i/S² to 1e-9", .zh = "x / Σx：与 δ_ij/S - x_i/S² 相差不到 1e-9"});

    c::Generator gen(303);
    const Variable z(c::randn({4}, gen, F64), true);
    const Tensor analytical = jacobian_by_rows(ag::softmax(z), z);
    const Tensor numerical =
        exercise::numerical_jacobian([](const Tensor& v) { return c::softmax(v); }, z.value(), 1e-6);
    t.check_close(numerical, analytical, 1e-8,
                  {.en = "softmax: your Jacobian equals backward()'s, row by row, to 1e-8",
                   .zh = "softmax：你的雅可比矩阵与 backward() 逐行建出的相差不到 1e-8"});
    const Tensor coarse =
        exercise::numerical_jacobian([](const Tensor& v) { return c::exp(v); }, c::tensor({0.3}, {1}, F64), 0.1);
    t.check_close(coarse.at({0, 0}), std::exp(0.3) * std::sinh(0.1) / 0.1, 1e-12,
                  {.en = "with eps = 0.1 on exp it gives e^x · sinh(0.1)/0.1, as step 3 says",
                   .zh = "对 exp 取 eps = 0.1 时得到 e^x · sinh(0.1)/0.1，正如第 3 步所说"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 03 · gradcheck: testing backward functions",
                   .zh = "tformer 教程 03 · gradcheck：检验反向函数"},
         .follows = {.en = "autograd/gradcheck.hpp (PyTorch's torch.autograd.gradcheck); the README's "
                           "'Reading a gradcheck'",
                     .zh = "autograd/gradcheck.hpp（即 PyTorch 的 torch.autograd.gradcheck）；README 的"
                           "“Reading a gradcheck”"},
         .exercise = {
             .en = "write the numerical half of gradcheck, a central-difference Jacobian "
                   "(tutorials/03_gradcheck/exercise.cpp)",
             .zh = "写出 gradcheck 的数值那一半：用中心差分求雅可比矩阵（tutorials/03_gradcheck/exercise.cpp）"}});
    t.step({.en = "1. Finite differences, and why gradcheck wants float64",
            .zh = "1. 有限差分，以及 gradcheck 为何要 float64"},
           [&] { finite_differences_need_float64(t); });
    t.step({.en = "2. The Jacobian, built both ways, by hand", .zh = "2. 手工用两种办法建出雅可比矩阵"},
           [&] { jacobian_both_ways(t); });
    t.step({.en = "3. The tolerance rule, and what eps does", .zh = "3. 容差规则，以及 eps 的作用"},
           [&] { tolerance_and_eps(t); });
    t.step({.en = "4. gradcheck on a table of ops", .zh = "4. 对一张运算表做 gradcheck"},
           [&] { gradcheck_table_of_ops(t); });
    t.step({.en = "5. A deliberately wrong op: a sigmoid that forgets a factor",
            .zh = "5. 故意写错的运算：漏掉一个因子的 sigmoid"},
           [&] { sigmoid_missing_factor(t); });
    t.step({.en = "6. A broadcast whose backward forgets to reduce", .zh = "6. 忘了归约的广播反向函数"},
           [&] { broadcast_missing_sum(t); });
    t.exercise({.en = "Exercise. The numerical Jacobian", .zh = "练习. 数值雅可比矩阵"},
               [&] { exercise_numerical_jacobian(t); });
    return t.finish();
}
