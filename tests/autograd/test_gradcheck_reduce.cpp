// gradcheck of the differentiable reductions (autograd/reduce.hpp) in
// float64: sum, mean, max and var over the dimension sets {} (all), {0},
// {-1} and {0, 2}, with and without keepdim, on contiguous and
// non-contiguous (2,3,4) inputs. One table of ops feeds the gradchecks and
// the check that autograd returns exactly the core kernel's values.
//
// max is differentiable only where the maximum is unique, so its inputs are
// all distinct (a shuffled ramp); the gradient at ties — split evenly among
// the tied elements — is checked by hand below.
#include "gradcheck_inputs.hpp"

using namespace tformer;
using namespace tformer::testing;
using autograd::Variable;
using core::Dims;
using core::DType;
using core::Shape;
using core::Tensor;

namespace {

struct ReduceOp {
    const char* name;
    std::function<Variable(const Variable&, const Dims&, bool)> f;
    std::function<Tensor(const Tensor&, const Dims&, bool)> reference;
    Domain domain = Domain::away_from_zero;
};

const std::vector<ReduceOp>& reduce_ops() {
    static const std::vector<ReduceOp> ops = {
        {"sum", [](const Variable& x, const Dims& d, bool k) { return autograd::sum(x, d, k); },
         [](const Tensor& x, const Dims& d, bool k) { return core::sum(x, d, k); }},
        {"mean", [](const Variable& x, const Dims& d, bool k) { return autograd::mean(x, d, k); },
         [](const Tensor& x, const Dims& d, bool k) { return core::mean(x, d, k); }},
        {"max", [](const Variable& x, const Dims& d, bool k) { return autograd::max(x, d, k); },
         [](const Tensor& x, const Dims& d, bool k) { return core::max(x, d, k); }, Domain::distinct},
        {"var unbiased", [](const Variable& x, const Dims& d, bool k) { return autograd::var(x, d, true, k); },
         [](const Tensor& x, const Dims& d, bool k) { return core::var(x, d, true, k); }},
        {"var biased", [](const Variable& x, const Dims& d, bool k) { return autograd::var(x, d, false, k); },
         [](const Tensor& x, const Dims& d, bool k) { return core::var(x, d, false, k); }},
    };
    return ops;
}

// {} means every dimension
const std::vector<Dims> kDimSets = {{}, {0}, {-1}, {0, 2}};

void gradcheck_reductions(Layout layout) {
    core::Generator gen(5);
    const Shape shape{2, 3, 4};
    for (const ReduceOp& op : reduce_ops()) {
        for (const Dims& dims : kDimSets) {
            for (bool keepdim : {false, true}) {
                DYNAMIC_SECTION(op.name << "(x, dims=" << core::dims_list_str(dims) << ", keepdim=" << keepdim
                                        << ") on " << layout_name(layout) << " (2,3,4)") {
                    const Variable x = make_input(shape, layout, op.domain, gen);
                    require_gradcheck([&](const std::vector<Variable>& in) { return op.f(in[0], dims, keepdim); }, {x});
                }
            }
        }
    }
}

}  // namespace

TEST_CASE("gradcheck sum mean max var(x, dims, keepdim) over {} {0} {-1} {0,2}: x contiguous (2,3,4)",
          "[autograd][reduce][gradcheck]") {
    gradcheck_reductions(Layout::contiguous);
}

TEST_CASE("gradcheck sum mean max var(x, dims, keepdim) over {} {0} {-1} {0,2}: x a transposed view (2,3,4)",
          "[autograd][reduce][gradcheck]") {
    gradcheck_reductions(Layout::transposed);
}

TEST_CASE("gradcheck sum mean max var(x, dims, keepdim) over {} {0} {-1} {0,2}: x a step-2 slice (2,3,4)",
          "[autograd][reduce][gradcheck]") {
    gradcheck_reductions(Layout::strided);
}

TEST_CASE("gradcheck sum(x), mean(x), max(x) over everything, and a reduction of a broadcast product",
          "[autograd][reduce][gradcheck]") {
    core::Generator gen(9);
    const Variable x = make_input({3, 4}, Layout::transposed, Domain::distinct, gen);
    SECTION("sum(x)") {
        require_gradcheck([](const auto& in) { return autograd::sum(in[0]); }, {x});
    }
    SECTION("mean(x)") {
        require_gradcheck([](const auto& in) { return autograd::mean(in[0]); }, {x});
    }
    SECTION("max(x)") {
        require_gradcheck([](const auto& in) { return autograd::max(in[0]); }, {x});
    }
    SECTION("mean(var(a · b, {-1}) + max(a · b, {-1}), {0})") {
        // reductions inside a small graph: each one's gradient must reach a and b through the broadcast mul
        const Variable a = make_input({2, 1, 4}, Layout::contiguous, Domain::away_from_zero, gen);
        const Variable b = make_input({3, 4}, Layout::contiguous, Domain::distinct, gen);
        require_gradcheck(
            [](const std::vector<Variable>& in) {
                const Variable p = in[0] * in[1];                                                   // (2, 3, 4)
                return autograd::mean(autograd::var(p, {-1}, true) + autograd::max(p, {-1}), {0});  // (3)
            },
            {a, b});
    }
}

TEST_CASE("max(x, dims) at ties: the gradient is split evenly among the tied maxima", "[autograd][reduce]") {
    // row 0 has a tie for its max (3 at columns 1 and 2), column 0 has a tie (1 in both rows)
    const std::vector<double> values{1, 3, 3, 1, 2, 0};
    SECTION("max(x, {1}) with dy = [2, 4]") {
        const Variable x = f64_leaf(values, {2, 3});
        autograd::max(x, {1}).backward(core::tensor({2, 4}, {2}, DType::float64));
        CHECK(x.grad().to_vector() == std::vector<double>{0, 1, 1, 0, 4, 0});
    }
    SECTION("max(x, {0}, keepdim) with dy = [[6, 5, 4]]") {
        const Variable x = f64_leaf(values, {2, 3});
        autograd::max(x, {0}, true).backward(core::tensor({6, 5, 4}, {1, 3}, DType::float64));
        CHECK(x.grad().to_vector() == std::vector<double>{3, 5, 4, 3, 0, 0});
    }
    SECTION("max(x) over everything") {
        const Variable x = f64_leaf(values, {2, 3});
        autograd::max(x).backward();
        CHECK(x.grad().to_vector() == std::vector<double>{0, 0.5, 0.5, 0, 0, 0});
    }
}

TEST_CASE("sum mean max var(x, dims, keepdim): autograd values are exactly the core kernels'", "[autograd][reduce]") {
    core::Generator gen(13);
    for (const ReduceOp& op : reduce_ops()) {
        for (const Dims& dims : kDimSets) {
            for (bool keepdim : {false, true}) {
                INFO(op.name << " dims " << core::dims_list_str(dims) << " keepdim " << keepdim);
                const Variable x = make_input({2, 3, 4}, Layout::transposed, op.domain, gen);
                const Variable y = op.f(x, dims, keepdim);
                const Tensor expected = op.reference(x.value(), dims, keepdim);
                CHECK(y.shape() == expected.shape());
                CHECK(y.value().to_vector() == expected.to_vector());
            }
        }
    }
}
