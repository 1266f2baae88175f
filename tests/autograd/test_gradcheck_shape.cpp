// gradcheck of the differentiable shape ops (autograd/shape.hpp) in float64,
// on contiguous and non-contiguous inputs. One table lists every op with the
// input shapes it runs on, the core computation it must equal exactly, and
// whether its forward is a view of its (first) input; the table feeds the
// gradchecks, the value checks and the view checks.
#include "gradcheck_inputs.hpp"

using namespace tformer;
using namespace tformer::testing;
using autograd::Variable;
using core::DType;
using core::Shape;
using core::Tensor;

namespace {

/// Does the op's output share storage with its first input?
enum class Sharing {
    view,                ///< always (a view of any layout)
    view_if_contiguous,  ///< for a contiguous input; a copy of the transposed one
    copy,                ///< never (a fresh tensor)
};

struct ShapeOp {
    const char* signature;
    std::vector<Shape> shapes;  ///< one per input
    Function f;
    std::function<Tensor(const std::vector<Tensor>&)> reference;
    Sharing sharing;
};

// split(x, 2, 1) of a (2,5,2) x gives pieces (2,2,2) (2,2,2) (2,1,2); every
// piece feeds the output through a different function
Variable split_then_join(const Variable& x) {
    const std::vector<Variable> p = autograd::split(x, 2, 1);
    return autograd::concat({autograd::exp(p[0]), p[1] * p[1], p[2] * 3.0}, 1);
}

Tensor split_then_join_reference(const Tensor& x) {
    const std::vector<Tensor> p = core::split(x, 2, 1);
    return core::concat({core::exp(p[0]), core::mul(p[1], p[1]), core::mul(p[2], 3.0)}, 1);
}

const std::vector<ShapeOp>& shape_ops() {
    using In = std::vector<Variable>;
    using Ref = std::vector<Tensor>;
    static const std::vector<ShapeOp> ops = {
        {"reshape(x, (4, -1)) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) {
             return autograd::reshape(in[0], {4, -1});
         },
         [](const Ref& in) {
             return in[0].reshape({4, -1});
         },
         Sharing::view_if_contiguous},
        // every other row of a row-major or a transposed x cannot be flattened by a view: reshape copies
        {"reshape(slice(x, 0, 0, 4, 2), (6)) of (4,3)",
         {{4, 3}},
         [](const In& in) { return autograd::reshape(autograd::slice(in[0], 0, 0, 4, 2), {6}); },
         [](const Ref& in) { return in[0].slice(0, 0, 4, 2).reshape({6}); },
         Sharing::copy},
        {"permute(x, (2, 0, 1)) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) {
             return autograd::permute(in[0], {2, 0, 1});
         },
         [](const Ref& in) {
             return in[0].permute({2, 0, 1});
         },
         Sharing::view},
        {"permute(x, (1, -1, 0)) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) {
             return autograd::permute(in[0], {1, -1, 0});
         },
         [](const Ref& in) {
             return in[0].permute({1, -1, 0});
         },
         Sharing::view},
        {"transpose(x, 0, 2) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) { return autograd::transpose(in[0], 0, 2); },
         [](const Ref& in) { return in[0].transpose(0, 2); },
         Sharing::view},
        {"transpose(x, -1, -2) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) { return autograd::transpose(in[0], -1, -2); },
         [](const Ref& in) { return in[0].transpose(-1, -2); },
         Sharing::view},
        {"slice(x, 1, 0, 3, 2) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) { return autograd::slice(in[0], 1, 0, 3, 2); },
         [](const Ref& in) { return in[0].slice(1, 0, 3, 2); },
         Sharing::view},
        {"slice(x, -1, -3, 100) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) { return autograd::slice(in[0], -1, -3, 100); },
         [](const Ref& in) { return in[0].slice(-1, -3, 100); },
         Sharing::view},
        {"select(x, 1, -1) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) { return autograd::select(in[0], 1, -1); },
         [](const Ref& in) { return in[0].select(1, -1); },
         Sharing::view},
        {"select(x, 0, 1) of (2,3,4)",
         {{2, 3, 4}},
         [](const In& in) { return autograd::select(in[0], 0, 1); },
         [](const Ref& in) { return in[0].select(0, 1); },
         Sharing::view},
        {"expand(x, (2, 3, 4)) of (3,1)",
         {{3, 1}},
         [](const In& in) {
             return autograd::expand(in[0], {2, 3, 4});
         },
         [](const Ref& in) {
             return in[0].expand({2, 3, 4});
         },
         Sharing::view},
        {"expand(x, (2, 4, -1)) of (2,1,3)",
         {{2, 1, 3}},
         [](const In& in) {
             return autograd::expand(in[0], {2, 4, -1});
         },
         [](const Ref& in) {
             return in[0].expand({2, 4, -1});
         },
         Sharing::view},
        {"squeeze(x, 1) of (3,1,4)",
         {{3, 1, 4}},
         [](const In& in) { return autograd::squeeze(in[0], 1); },
         [](const Ref& in) { return in[0].squeeze(1); },
         Sharing::view},
        {"squeeze(x, -1) of (3,4,1)",
         {{3, 4, 1}},
         [](const In& in) { return autograd::squeeze(in[0], -1); },
         [](const Ref& in) { return in[0].squeeze(-1); },
         Sharing::view},
        {"unsqueeze(x, 0) of (3,4)",
         {{3, 4}},
         [](const In& in) { return autograd::unsqueeze(in[0], 0); },
         [](const Ref& in) { return in[0].unsqueeze(0); },
         Sharing::view},
        {"unsqueeze(x, -1) of (3,4)",
         {{3, 4}},
         [](const In& in) { return autograd::unsqueeze(in[0], -1); },
         [](const Ref& in) { return in[0].unsqueeze(-1); },
         Sharing::view},
        {"contiguous(x) of (3,4)",
         {{3, 4}},
         [](const In& in) { return autograd::contiguous(in[0]); },
         [](const Ref& in) { return in[0].contiguous(); },
         Sharing::view_if_contiguous},
        {"concat({a, b, c}, 1) of (2,1,3) (2,2,3) (2,3,3)",
         {{2, 1, 3}, {2, 2, 3}, {2, 3, 3}},
         [](const In& in) {
             return autograd::concat({in[0], in[1], in[2]}, 1);
         },
         [](const Ref& in) {
             return core::concat({in[0], in[1], in[2]}, 1);
         },
         Sharing::copy},
        {"concat({a, b, c}, -1) of (3,2) (3,4) (3,3)",
         {{3, 2}, {3, 4}, {3, 3}},
         [](const In& in) {
             return autograd::concat({in[0], in[1], in[2]}, -1);
         },
         [](const Ref& in) {
             return core::concat({in[0], in[1], in[2]}, -1);
         },
         Sharing::copy},
        {"stack({a, b, c}, 0) of (2,3)",
         {{2, 3}, {2, 3}, {2, 3}},
         [](const In& in) {
             return autograd::stack({in[0], in[1], in[2]}, 0);
         },
         [](const Ref& in) {
             return core::stack({in[0], in[1], in[2]}, 0);
         },
         Sharing::copy},
        {"stack({a, b, c}, -1) of (2,3)",
         {{2, 3}, {2, 3}, {2, 3}},
         [](const In& in) {
             return autograd::stack({in[0], in[1], in[2]}, -1);
         },
         [](const Ref& in) {
             return core::stack({in[0], in[1], in[2]}, -1);
         },
         Sharing::copy},
        {"split(x, 2, 1) of (2,5,2), then concat(exp(p0), p1·p1, 3·p2)",
         {{2, 5, 2}},
         [](const In& in) { return split_then_join(in[0]); },
         [](const Ref& in) { return split_then_join_reference(in[0]); },
         Sharing::copy},
        {"split(x, 2, 0) of (3,4), then p0·p1 (broadcast (2,4)·(1,4))",
         {{3, 4}},
         [](const In& in) {
             const std::vector<Variable> p = autograd::split(in[0], 2, 0);
             return p[0] * p[1];
         },
         [](const Ref& in) {
             const std::vector<Tensor> p = core::split(in[0], 2, 0);
             return core::mul(p[0], p[1]);
         },
         Sharing::copy},
    };
    return ops;
}

std::vector<Variable> inputs_for(const ShapeOp& op, Layout layout, core::Generator& gen) {
    std::vector<Variable> inputs;
    for (const Shape& shape : op.shapes) inputs.push_back(make_input(shape, layout, Domain::away_from_zero, gen));
    return inputs;
}

void gradcheck_shape_ops(Layout layout) {
    core::Generator gen(17);
    for (const ShapeOp& op : shape_ops()) {
        DYNAMIC_SECTION(op.signature << " on " << layout_name(layout) << " inputs") {
            require_gradcheck(op.f, inputs_for(op, layout, gen));
        }
    }
}

}  // namespace

TEST_CASE(
    "gradcheck reshape permute transpose slice select expand squeeze unsqueeze contiguous concat stack split: "
    "contiguous inputs",
    "[autograd][shape][gradcheck]") {
    gradcheck_shape_ops(Layout::contiguous);
}

TEST_CASE(
    "gradcheck reshape permute transpose slice select expand squeeze unsqueeze contiguous concat stack split: "
    "transposed-view inputs",
    "[autograd][shape][gradcheck]") {
    gradcheck_shape_ops(Layout::transposed);
}

TEST_CASE(
    "gradcheck reshape permute transpose slice select expand squeeze unsqueeze contiguous concat stack split: "
    "step-2-slice inputs",
    "[autograd][shape][gradcheck]") {
    gradcheck_shape_ops(Layout::strided);
}

TEST_CASE("gradcheck concat({a, c, b}, 0) and stack({a, c, b}, 1) with a constant c that needs no gradient",
          "[autograd][shape][gradcheck]") {
    core::Generator gen(19);
    const Variable a = make_input({2, 3}, Layout::contiguous, Domain::away_from_zero, gen);
    const Variable b = make_input({2, 3}, Layout::transposed, Domain::away_from_zero, gen);
    const Variable c = make_input({2, 3}, Layout::contiguous, Domain::away_from_zero, gen).detach();
    SECTION("concat") {
        require_gradcheck(
            [&c](const std::vector<Variable>& in) {
                return autograd::concat({in[0], c, in[1]}, 0);
            },
            {a, b});
    }
    SECTION("stack") {
        require_gradcheck(
            [&c](const std::vector<Variable>& in) {
                return autograd::stack({in[0], c, in[1]}, 1);
            },
            {a, b});
    }
}

TEST_CASE("shape ops: autograd values are exactly core's, and views share storage where core's do",
          "[autograd][shape]") {
    core::Generator gen(23);
    for (const ShapeOp& op : shape_ops()) {
        for (Layout layout : {Layout::contiguous, Layout::transposed}) {
            INFO(op.signature << " on " << layout_name(layout) << " inputs");
            const std::vector<Variable> in = inputs_for(op, layout, gen);
            std::vector<Tensor> values;
            for (const Variable& v : in) values.push_back(v.value());
            const Variable y = op.f(in);
            const Tensor expected = op.reference(values);
            CHECK(y.shape() == expected.shape());
            CHECK(y.value().to_vector() == expected.to_vector());
            CHECK(y.requires_grad());
            const bool shares = y.value().shares_storage(in[0].value());
            switch (op.sharing) {
                case Sharing::view: CHECK(shares); break;
                case Sharing::view_if_contiguous: CHECK(shares == (layout == Layout::contiguous)); break;
                case Sharing::copy: CHECK_FALSE(shares); break;
            }
        }
    }
}

TEST_CASE("slice(x, 0, 1, 5, 2) and select(x, 1, 0): the gradient is dy inside the slice and zero elsewhere",
          "[autograd][shape]") {
    const Variable x = f64_leaf({1, 2, 3, 4, 5}, {5});
    autograd::slice(x, 0, 1, 5, 2).backward(core::tensor({10, 20}, {2}, DType::float64));
    CHECK(x.grad().to_vector() == std::vector<double>{0, 10, 0, 20, 0});

    const Variable m = f64_leaf({1, 2, 3, 4, 5, 6}, {2, 3});
    autograd::select(m, 1, 0).backward(core::tensor({7, 8}, {2}, DType::float64));
    CHECK(m.grad().to_vector() == std::vector<double>{7, 0, 0, 8, 0, 0});
}

TEST_CASE("split(x, 2, 0): pieces are views recorded as 'split', an unused piece contributes no gradient",
          "[autograd][shape]") {
    const Variable x = f64_leaf({1, 2, 3, 4, 5}, {5});
    const std::vector<Variable> pieces = autograd::split(x, 2, 0);
    const std::vector<Tensor> expected = core::split(x.value(), 2, 0);
    REQUIRE(pieces.size() == 3);
    for (size_t i = 0; i < pieces.size(); ++i) {
        CHECK(pieces[i].op_name() == "split");
        CHECK(pieces[i].value().shares_storage(x.value()));
        CHECK(pieces[i].value().to_vector() == expected[i].to_vector());
    }
    autograd::sum(pieces[1] * 2.0).backward();  // only the middle piece [3, 4] is used
    CHECK(x.grad().to_vector() == std::vector<double>{0, 0, 2, 2, 0});
}

TEST_CASE("expand(x, (2, 3)) of (3): each element's gradient sums its copies", "[autograd][shape]") {
    const Variable x = f64_leaf({1, 2, 3}, {3});
    autograd::expand(x, {2, 3}).backward(core::tensor({1, 2, 3, 10, 20, 30}, {2, 3}, DType::float64));
    CHECK(x.grad().to_vector() == std::vector<double>{11, 22, 33});
}

TEST_CASE("shape ops: bad arguments throw the core view methods' errors, naming the op", "[autograd][shape][errors]") {
    const Variable x = f64_leaf({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK_THROWS_AS(autograd::reshape(x, {4}), ShapeError);
    CHECK_THROWS_WITH(autograd::permute(x, {0, 0}), Catch::Contains("permute: dimension 0 repeated"));
    CHECK_THROWS_AS(autograd::transpose(x, 0, 2), IndexError);
    CHECK_THROWS_WITH(autograd::slice(x, 1, 0, 3, 0), "slice: step must be positive, got 0");
    CHECK_THROWS_WITH(autograd::select(x, 1, 3), "select: index 3 out of range for dimension 1 of size 3");
    CHECK_THROWS_WITH(autograd::expand(x, {2, 4}), Catch::Contains("expand: cannot expand (2x3)"));
    CHECK_THROWS_WITH(autograd::squeeze(x, 0), "squeeze: dimension 0 of (2x3) has size 2, not 1");
    CHECK_THROWS_AS(autograd::unsqueeze(x, 3), IndexError);
    CHECK_THROWS_WITH(autograd::concat({x, f64_leaf({1, 2}, {2})}, 0),
                      Catch::Contains("concat: tensor 1 has shape (2)"));
    CHECK_THROWS_WITH(autograd::stack({x, f64_leaf({1, 2}, {2, 1})}, 0),
                      Catch::Contains("stack: tensor 1 has shape (2x1)"));
    CHECK_THROWS_WITH(autograd::split(x, 0, 1), "split: split_size must be positive, got 0");
    CHECK_THROWS_WITH(autograd::concat({}, 0), Catch::Contains("concat: expected a non-empty list"));
}
