// gradcheck of every differentiable elementwise op (autograd/elementwise.hpp),
// in float64, on contiguous, broadcast and non-contiguous inputs.
//
// Three tables list the ops — unary, "unary with a constant" (scalar
// variants, operators, masked_fill, dropout) and binary — and each table
// feeds both the gradchecks and the forward check that the autograd op
// returns exactly the core kernel's values. Each TEST_CASE is one input
// configuration; each op runs in its own section, named by its signature.
#include "gradcheck_inputs.hpp"

using namespace tformer;
using namespace tformer::testing;
using autograd::Variable;
using core::Shape;
using core::Tensor;

namespace {

// ---- the op tables -----------------------------------------------------------------------

struct UnaryOp {
    const char* signature;
    std::function<Variable(const Variable&)> f;
    std::function<Tensor(const Tensor&)> reference;  ///< the core computation f must equal
    Domain domain = Domain::away_from_zero;
};

// A fixed bool mask that broadcasts against `shape`: true at the even
// positions of the last dimension (a 0-d shape gets a 0-d true).
Tensor alternating_mask(const Shape& shape) {
    if (shape.empty()) return core::from_vector(std::vector<bool>{true}, {});
    std::vector<bool> keep(shape.back());
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = i % 2 == 0;
    return core::from_vector(keep, {shape.back()});
}

// Dropout's mask comes from a generator seeded inside f, so every call of f
// (gradcheck makes many) draws the same mask and f is a fixed function of x.
constexpr uint64_t kDropoutSeed = 1234;

const std::vector<UnaryOp>& unary_ops() {
    static const std::vector<UnaryOp> ops = {
        {"neg(x)", autograd::neg, core::neg},
        {"exp(x)", autograd::exp, core::exp},
        {"log(x)", autograd::log, core::log, Domain::positive},
        {"sqrt(x)", autograd::sqrt, core::sqrt, Domain::positive},
        {"tanh(x)", autograd::tanh, core::tanh},
        {"relu(x)", autograd::relu, core::relu},
        {"sigmoid(x)", autograd::sigmoid, core::sigmoid},
        {"abs(x)", autograd::abs, core::abs},
        {"pow(x, 2)", [](const Variable& x) { return autograd::pow(x, 2.0); },
         [](const Tensor& x) { return core::pow(x, 2.0); }},
        {"pow(x, 3)", [](const Variable& x) { return autograd::pow(x, 3.0); },
         [](const Tensor& x) { return core::pow(x, 3.0); }},
        {"pow(x, 0)", [](const Variable& x) { return autograd::pow(x, 0.0); },
         [](const Tensor& x) { return core::pow(x, 0.0); }},
        {"pow(x, 0.5)", [](const Variable& x) { return autograd::pow(x, 0.5); },
         [](const Tensor& x) { return core::pow(x, 0.5); }, Domain::positive},
        {"pow(x, -1.5)", [](const Variable& x) { return autograd::pow(x, -1.5); },
         [](const Tensor& x) { return core::pow(x, -1.5); }, Domain::positive},
    };
    return ops;
}

// Ops of one Variable and a constant: a scalar, a mask, a dropout seed.
const std::vector<UnaryOp>& constant_ops() {
    static const std::vector<UnaryOp> ops = {
        {"add(x, 0.7)", [](const Variable& x) { return autograd::add(x, 0.7); },
         [](const Tensor& x) { return core::add(x, 0.7); }},
        {"sub(x, 0.7)", [](const Variable& x) { return autograd::sub(x, 0.7); },
         [](const Tensor& x) { return core::sub(x, 0.7); }},
        {"rsub(0.7, x)", [](const Variable& x) { return autograd::rsub(0.7, x); },
         [](const Tensor& x) { return core::rsub(0.7, x); }},
        {"mul(x, -1.3)", [](const Variable& x) { return autograd::mul(x, -1.3); },
         [](const Tensor& x) { return core::mul(x, -1.3); }},
        {"div(x, -1.3)", [](const Variable& x) { return autograd::div(x, -1.3); },
         [](const Tensor& x) { return core::div(x, -1.3); }},
        {"rdiv(1.3, x)", [](const Variable& x) { return autograd::rdiv(1.3, x); },
         [](const Tensor& x) { return core::rdiv(1.3, x); }},
        {"-x", [](const Variable& x) { return -x; }, core::neg},
        {"x + 0.7", [](const Variable& x) { return x + 0.7; }, [](const Tensor& x) { return core::add(x, 0.7); }},
        {"0.7 + x", [](const Variable& x) { return 0.7 + x; }, [](const Tensor& x) { return core::add(x, 0.7); }},
        {"x - 0.7", [](const Variable& x) { return x - 0.7; }, [](const Tensor& x) { return core::sub(x, 0.7); }},
        {"0.7 - x", [](const Variable& x) { return 0.7 - x; }, [](const Tensor& x) { return core::rsub(0.7, x); }},
        {"x * -1.3", [](const Variable& x) { return x * -1.3; }, [](const Tensor& x) { return core::mul(x, -1.3); }},
        {"-1.3 * x", [](const Variable& x) { return -1.3 * x; }, [](const Tensor& x) { return core::mul(x, -1.3); }},
        {"x / -1.3", [](const Variable& x) { return x / -1.3; }, [](const Tensor& x) { return core::div(x, -1.3); }},
        {"1.3 / x", [](const Variable& x) { return 1.3 / x; }, [](const Tensor& x) { return core::rdiv(1.3, x); }},
        {"masked_fill(x, mask, -1.5)",
         [](const Variable& x) { return autograd::masked_fill(x, alternating_mask(x.shape()), -1.5); },
         [](const Tensor& x) { return core::masked_fill(x, alternating_mask(x.shape()), -1.5); }},
        {"dropout(x, 0.3, training)",
         [](const Variable& x) {
             core::Generator gen(kDropoutSeed);
             return autograd::dropout(x, 0.3, true, gen);
         },
         [](const Tensor& x) {
             // x ⊙ m / 0.7 with the mask core::dropout_mask draws from the same seed
             core::Generator gen(kDropoutSeed);
             return core::mul(x, core::dropout_mask(x.shape(), 0.3, gen, x.dtype()));
         }},
        {"dropout(x, 0.3, eval)",
         [](const Variable& x) {
             core::Generator gen(kDropoutSeed);
             return autograd::dropout(x, 0.3, false, gen);
         },
         [](const Tensor& x) { return x; }},
    };
    return ops;
}

struct BinaryOp {
    const char* signature;
    std::function<Variable(const Variable&, const Variable&)> f;
    std::function<Tensor(const Tensor&, const Tensor&)> reference;
    Domain domain_a = Domain::away_from_zero;
    Domain domain_b = Domain::away_from_zero;
};

// where's condition: the alternating mask over the broadcast shape's last dim
Tensor where_mask(const Shape& a, const Shape& b) { return alternating_mask(core::broadcast_shapes(a, b, "where")); }

const std::vector<BinaryOp>& binary_ops() {
    static const std::vector<BinaryOp> ops = {
        {"add(a, b)", [](const Variable& a, const Variable& b) { return autograd::add(a, b); },
         [](const Tensor& a, const Tensor& b) { return core::add(a, b); }},
        {"sub(a, b)", [](const Variable& a, const Variable& b) { return autograd::sub(a, b); },
         [](const Tensor& a, const Tensor& b) { return core::sub(a, b); }},
        {"mul(a, b)", [](const Variable& a, const Variable& b) { return autograd::mul(a, b); },
         [](const Tensor& a, const Tensor& b) { return core::mul(a, b); }},
        {"div(a, b)", [](const Variable& a, const Variable& b) { return autograd::div(a, b); },
         [](const Tensor& a, const Tensor& b) { return core::div(a, b); }},
        // a on the grid k + 0.25 and b on k - 0.25 never tie, so max is differentiable everywhere here
        {"maximum(a, b)", [](const Variable& a, const Variable& b) { return autograd::maximum(a, b); },
         [](const Tensor& a, const Tensor& b) { return core::maximum(a, b); }, Domain::grid_above, Domain::grid_below},
        {"where(cond, a, b)",
         [](const Variable& a, const Variable& b) { return autograd::where(where_mask(a.shape(), b.shape()), a, b); },
         [](const Tensor& a, const Tensor& b) { return core::where(where_mask(a.shape(), b.shape()), a, b); }},
        {"a + b", [](const Variable& a, const Variable& b) { return a + b; },
         [](const Tensor& a, const Tensor& b) { return core::add(a, b); }},
        {"a - b", [](const Variable& a, const Variable& b) { return a - b; },
         [](const Tensor& a, const Tensor& b) { return core::sub(a, b); }},
        {"a * b", [](const Variable& a, const Variable& b) { return a * b; },
         [](const Tensor& a, const Tensor& b) { return core::mul(a, b); }},
        {"a / b", [](const Variable& a, const Variable& b) { return a / b; },
         [](const Tensor& a, const Tensor& b) { return core::div(a, b); }},
    };
    return ops;
}

// ---- runners: one section per op -----------------------------------------------------------

void gradcheck_unary(const std::vector<UnaryOp>& ops, const Shape& shape, Layout layout) {
    core::Generator gen(7);
    for (const UnaryOp& op : ops) {
        DYNAMIC_SECTION(op.signature << " on " << layout_name(layout) << " " << core::shape_str(shape)) {
            const Variable x = make_input(shape, layout, op.domain, gen);
            require_gradcheck([&](const std::vector<Variable>& in) { return op.f(in[0]); }, {x});
        }
    }
}

struct Operand {
    Shape shape;
    Layout layout = Layout::contiguous;
};

void gradcheck_binary(const Operand& a, const Operand& b) {
    core::Generator gen(11);
    for (const BinaryOp& op : binary_ops()) {
        DYNAMIC_SECTION(op.signature << ": " << layout_name(a.layout) << " " << core::shape_str(a.shape) << " · "
                                     << layout_name(b.layout) << " " << core::shape_str(b.shape)) {
            const Variable va = make_input(a.shape, a.layout, op.domain_a, gen);
            const Variable vb = make_input(b.shape, b.layout, op.domain_b, gen);
            require_gradcheck([&](const std::vector<Variable>& in) { return op.f(in[0], in[1]); }, {va, vb});
        }
    }
}

}  // namespace

// ---- unary ---------------------------------------------------------------------------------------

TEST_CASE("gradcheck neg exp log sqrt tanh relu sigmoid abs pow(x, p): x contiguous (2,3,4)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_unary(unary_ops(), {2, 3, 4}, Layout::contiguous);
}

TEST_CASE("gradcheck neg exp log sqrt tanh relu sigmoid abs pow(x, p): x a transposed view (3,4)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_unary(unary_ops(), {3, 4}, Layout::transposed);
}

TEST_CASE("gradcheck neg exp log sqrt tanh relu sigmoid abs pow(x, p): x a step-2 slice (2,3)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_unary(unary_ops(), {2, 3}, Layout::strided);
}

// ---- with a constant ---------------------------------------------------------------------------

TEST_CASE("gradcheck add sub rsub mul div rdiv(x, s), operators, masked_fill, dropout: x contiguous (2,3,4)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_unary(constant_ops(), {2, 3, 4}, Layout::contiguous);
}

TEST_CASE("gradcheck add sub rsub mul div rdiv(x, s), operators, masked_fill, dropout: x a transposed view (3,4)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_unary(constant_ops(), {3, 4}, Layout::transposed);
}

TEST_CASE("gradcheck add sub rsub mul div rdiv(x, s), operators, masked_fill, dropout: x a step-2 slice (2,3)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_unary(constant_ops(), {2, 3}, Layout::strided);
}

// ---- binary --------------------------------------------------------------------------------------

TEST_CASE("gradcheck add sub mul div maximum where(a, b), operators: contiguous (2,3)·(2,3)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_binary({{2, 3}}, {{2, 3}});
}

TEST_CASE("gradcheck add sub mul div maximum where(a, b), operators: broadcast (2,3,4)·(4)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_binary({{2, 3, 4}}, {{4}});
}

TEST_CASE("gradcheck add sub mul div maximum where(a, b), operators: broadcast (3,1)·(1,4)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_binary({{3, 1}}, {{1, 4}});
}

TEST_CASE("gradcheck add sub mul div maximum where(a, b), operators: broadcast (2,1,4)·(3,1)",
          "[autograd][elementwise][gradcheck]") {
    gradcheck_binary({{2, 1, 4}}, {{3, 1}});
}

TEST_CASE("gradcheck add sub mul div maximum where(a, b), operators: broadcast 0-d·(2,3) and (2,3)·0-d",
          "[autograd][elementwise][gradcheck]") {
    SECTION("a 0-d") { gradcheck_binary({{}}, {{2, 3}}); }
    SECTION("b 0-d") { gradcheck_binary({{2, 3}}, {{}}); }
}

TEST_CASE(
    "gradcheck add sub mul div maximum where(a, b), operators: non-contiguous transposed (3,4)·step-2 slice "
    "(3,4), step-2 slice (2,1,4)·transposed (3,4)",
    "[autograd][elementwise][gradcheck]") {
    SECTION("same shape") { gradcheck_binary({{3, 4}, Layout::transposed}, {{3, 4}, Layout::strided}); }
    SECTION("broadcast") { gradcheck_binary({{2, 1, 4}, Layout::strided}, {{3, 4}, Layout::transposed}); }
}

// ---- forward values ------------------------------------------------------------------------------

TEST_CASE("elementwise ops f(x), f(a, b): autograd values are exactly the core kernels' and record a node",
          "[autograd][elementwise]") {
    core::Generator gen(3);
    for (const auto* table : {&unary_ops(), &constant_ops()}) {
        for (const UnaryOp& op : *table) {
            INFO(op.signature);
            const Variable x = make_input({2, 3, 4}, Layout::contiguous, op.domain, gen);
            const Variable y = op.f(x);
            CHECK(y.value().to_vector() == op.reference(x.value()).to_vector());
            CHECK(y.shape() == x.shape());
            CHECK(y.requires_grad());
        }
    }
    for (const BinaryOp& op : binary_ops()) {
        INFO(op.signature);
        const Variable a = make_input({2, 1, 4}, Layout::contiguous, op.domain_a, gen);
        const Variable b = make_input({3, 1}, Layout::transposed, op.domain_b, gen);
        const Variable y = op.f(a, b);
        CHECK(y.value().to_vector() == op.reference(a.value(), b.value()).to_vector());
        CHECK(y.shape() == Shape{2, 3, 4});
        CHECK(y.op_name() != "leaf");
    }
}

TEST_CASE(
    "dropout(x, 0.3, training): zeros some elements, scales the rest by 1/0.7, and the gradient uses the "
    "same mask",
    "[autograd][elementwise]") {
    const Variable x(core::ones({4, 6}, core::DType::float64), true);
    core::Generator gen(kDropoutSeed);
    const Variable y = autograd::dropout(x, 0.3, true, gen);
    const std::vector<double> v = y.value().to_vector();
    int zeros = 0;
    for (double e : v) {
        if (e == 0.0)
            ++zeros;
        else
            CHECK(e == Approx(1.0 / 0.7));
    }
    CHECK(zeros > 0);
    CHECK(zeros < 24);
    autograd::sum(y).backward();
    CHECK(x.grad().to_vector() == v);  // dy/dx = m / 0.7, which on x = 1 is y itself
}

TEST_CASE("maximum(a, b) at ties: each input gets half the gradient (gradcheck does not apply there)",
          "[autograd][elementwise]") {
    const Variable a(core::tensor({1, 2, 3}, {3}, core::DType::float64), true);
    const Variable b(core::tensor({1, 5, 3}, {3}, core::DType::float64), true);
    autograd::maximum(a, b).backward(core::tensor({2, 4, 6}, {3}, core::DType::float64));
    CHECK(a.grad().to_vector() == std::vector<double>{1, 0, 3});
    CHECK(b.grad().to_vector() == std::vector<double>{1, 4, 3});
}
