// core/elementwise: every op against the plain-loop oracle (reference::unary,
// reference::binary) on contiguous, transposed, sliced and expanded inputs
// in float32 and float64; NumPy broadcasting; scalar variants and
// operators; comparisons, where and masked_fill by hand; in-place add_ and
// mul_ on views; the same results on 1 and 2 threads; error messages.
#include "core/elementwise.hpp"
#include "core/parallel.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace tformer;
using namespace tformer::core;

namespace {

// ---- inputs ---------------------------------------------------------------------------------

/// How an input is stored; every op must give the same values whatever the layout.
enum class Layout { contiguous, transposed, sliced, expanded };
constexpr Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::sliced, Layout::expanded};
constexpr DType kFloating[] = {DType::float32, DType::float64};

const char* layout_name(Layout layout) {
    constexpr const char* names[] = {"contiguous", "transposed", "sliced", "expanded"};
    return names[static_cast<int>(layout)];
}

// n values in [lo, hi) on a grid of 1/16 (lo a multiple of 1/16): exact in
// float32, and with repeats, so == and <= meet ties.
std::vector<double> grid_values(int64_t n, double lo, double hi, Generator& gen) {
    const auto steps = static_cast<int64_t>((hi - lo) * 16);
    std::vector<double> values(static_cast<size_t>(n));
    for (double& v : values) v = lo + static_cast<double>(gen.randint(steps)) / 16.0;
    return values;
}

// A tensor of `shape` with values from [lo, hi), stored as `layout`:
//   transposed  a contiguous (..., m, n) tensor viewed as (..., n, m)
//   sliced      elements 1, 3, 5, ... of the last dimension of a (..., 2n) tensor (offset 1, stride 2)
//   expanded    a (1, ...) tensor repeated along dimension 0 (stride 0)
// Layouts that need more dimensions than `shape` has fall back to contiguous.
Tensor make_input(const Shape& shape, Layout layout, double lo, double hi, DType dtype, Generator& gen) {
    const auto fresh = [&](const Shape& s) { return tensor(grid_values(shape_numel(s), lo, hi, gen), s, dtype); };
    const int nd = shape.size();
    Shape stored = shape;
    if (layout == Layout::transposed && nd >= 2) {
        std::swap(stored[nd - 2], stored[nd - 1]);
        return fresh(stored).transpose(-2, -1);
    }
    if (layout == Layout::sliced && nd >= 1) {
        stored[nd - 1] *= 2;
        return fresh(stored).slice(-1, 1, stored[nd - 1], 2);
    }
    if (layout == Layout::expanded && nd >= 1) {
        stored[0] = 1;
        return fresh(stored).expand(shape);
    }
    return fresh(shape);
}

// ---- checks ---------------------------------------------------------------------------------

// got == want element by element (NaN matches NaN, inf matches inf). The float32 kernels work
// in float and the oracle in double, so float32 allows a few units in the
// last place; float64 kernels use the same formulas as the oracles.
void check_matches(const Tensor& got, const Tensor& want) {
    REQUIRE(got.shape() == want.shape());
    const std::vector<double> g = got.to_vector(), w = want.to_vector();
    const double tol = got.dtype() == DType::float32 ? 2e-6 : 1e-13;
    for (size_t i = 0; i < g.size(); ++i) {
        const bool same = g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]));
        if (!same && !(std::abs(g[i] - w[i]) <= tol * std::max(1.0, std::abs(w[i])))) {
            FAIL_CHECK("element " << i << ": got " << g[i] << ", expected " << w[i]);
            return;
        }
    }
    SUCCEED();
}

std::vector<double> values(const Tensor& t) { return t.to_vector(); }
Tensor mask(const std::vector<bool>& v, const Shape& shape) { return from_vector(v, shape); }

// ---- op tables --------------------------------------------------------------------------------

using In = const Tensor&;  // keeps the table rows short

/// A unary op, its oracle (in double), and an input range inside its domain.
struct UnaryCase {
    const char* name;
    Tensor (*fast)(const Tensor&);
    double (*oracle)(double);
    double lo, hi;
};

const UnaryCase kUnaryOps[] = {
    {"neg", neg, [](double x) { return -x; }, -4, 4},
    {"exp", tformer::core::exp, [](double x) { return std::exp(x); }, -8, 8},
    {"log", tformer::core::log, [](double x) { return std::log(x); }, 0.0625, 16},
    {"sqrt", tformer::core::sqrt, [](double x) { return std::sqrt(x); }, 0, 16},
    {"rsqrt", rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.0625, 16},
    {"tanh", tformer::core::tanh, [](double x) { return std::tanh(x); }, -4, 4},
    {"relu", relu, [](double x) { return x < 0 ? 0.0 : x; }, -4, 4},
    {"sigmoid", sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -20, 20},
    {"abs", tformer::core::abs, [](double x) { return std::abs(x); }, -4, 4},
    {"sign", sign, [](double x) { return x > 0   ? 1.0
                                         : x < 0 ? -1.0
                                                 : 0.0; }, -2, 2},
    {"pow(x, 2)", [](In x) { return pow(x, 2.0); }, [](double x) { return x * x; }, -4, 4},
    {"pow(x, 3)", [](In x) { return pow(x, 3.0); }, [](double x) { return x * x * x; }, -4, 4},
    {"pow(x, 0.5)", [](In x) { return pow(x, 0.5); }, [](double x) { return std::sqrt(x); }, 0, 16},
    {"pow(x, -1)", [](In x) { return pow(x, -1.0); }, [](double x) { return 1 / x; }, 0.25, 4},
    {"pow(x, 1.5)", [](In x) { return pow(x, 1.5); }, [](double x) { return std::pow(x, 1.5); }, 0, 16},
    {"-x", [](In x) { return -x; }, [](double x) { return -x; }, -4, 4},
};

/// A broadcasting binary op and its oracle; b is drawn from [b_lo, b_hi)
/// (a always from [-2, 2)); comparisons give bool masks.
struct BinaryCase {
    const char* name;
    Tensor (*fast)(const Tensor&, const Tensor&);
    double (*oracle)(double, double);
    double b_lo, b_hi;
    bool mask;  // the result is a bool mask (comparisons), not the inputs' dtype
};

const BinaryCase kBinaryOps[] = {
    {"add", add, [](double a, double b) { return a + b; }, -2, 2, false},
    {"sub", sub, [](double a, double b) { return a - b; }, -2, 2, false},
    {"mul", mul, [](double a, double b) { return a * b; }, -2, 2, false},
    {"div", div, [](double a, double b) { return a / b; }, 0.5, 3, false},
    {"maximum", maximum, [](double a, double b) { return std::max(a, b); }, -2, 2, false},
    {"minimum", minimum, [](double a, double b) { return std::min(a, b); }, -2, 2, false},
    {"relu_backward", relu_backward, [](double dy, double y) { return y > 0 ? dy : 0.0; }, -2, 2, false},
    {"a + b", [](In a, In b) { return a + b; }, [](double a, double b) { return a + b; }, -2, 2, false},
    {"a - b", [](In a, In b) { return a - b; }, [](double a, double b) { return a - b; }, -2, 2, false},
    {"a * b", [](In a, In b) { return a * b; }, [](double a, double b) { return a * b; }, -2, 2, false},
    {"a / b", [](In a, In b) { return a / b; }, [](double a, double b) { return a / b; }, 0.5, 3, false},
    {"eq", eq, [](double a, double b) { return a == b ? 1.0 : 0.0; }, -2, 2, true},
    {"ne", ne, [](double a, double b) { return a != b ? 1.0 : 0.0; }, -2, 2, true},
    {"lt", lt, [](double a, double b) { return a < b ? 1.0 : 0.0; }, -2, 2, true},
    {"le", le, [](double a, double b) { return a <= b ? 1.0 : 0.0; }, -2, 2, true},
    {"gt", gt, [](double a, double b) { return a > b ? 1.0 : 0.0; }, -2, 2, true},
    {"ge", ge, [](double a, double b) { return a >= b ? 1.0 : 0.0; }, -2, 2, true},
};

/// An op of a tensor and a number, and its oracle f(x, s); checked against
/// reference::binary with s as a 0-d tensor.
struct ScalarCase {
    const char* name;
    Tensor (*fast)(const Tensor&, double);
    double (*oracle)(double, double);
    double s;
    bool mask;  // as in BinaryCase
};

const ScalarCase kScalarOps[] = {
    {"add(a, s)", add, [](double x, double s) { return x + s; }, 1.5, false},
    {"sub(a, s)", sub, [](double x, double s) { return x - s; }, 1.5, false},
    {"rsub(s, a)", [](In a, double s) { return rsub(s, a); }, [](double x, double s) { return s - x; }, 1.5, false},
    {"mul(a, s)", mul, [](double x, double s) { return x * s; }, -0.75, false},
    {"div(a, s)", div, [](double x, double s) { return x / s; }, 3, false},
    {"rdiv(s, a)", [](In a, double s) { return rdiv(s, a); }, [](double x, double s) { return s / x; }, 3, false},
    {"maximum(a, s)", maximum, [](double x, double s) { return std::max(x, s); }, 0.5, false},
    {"a + s", [](In a, double s) { return a + s; }, [](double x, double s) { return x + s; }, 1.5, false},
    {"s + a", [](In a, double s) { return s + a; }, [](double x, double s) { return s + x; }, 1.5, false},
    {"a - s", [](In a, double s) { return a - s; }, [](double x, double s) { return x - s; }, 1.5, false},
    {"s - a", [](In a, double s) { return s - a; }, [](double x, double s) { return s - x; }, 1.5, false},
    {"a * s", [](In a, double s) { return a * s; }, [](double x, double s) { return x * s; }, 2.5, false},
    {"s * a", [](In a, double s) { return s * a; }, [](double x, double s) { return s * x; }, 2.5, false},
    {"a / s", [](In a, double s) { return a / s; }, [](double x, double s) { return x / s; }, 3, false},
    {"s / a", [](In a, double s) { return s / a; }, [](double x, double s) { return s / x; }, 3, false},
    {"eq(a, s)", eq, [](double x, double s) { return x == s ? 1.0 : 0.0; }, 0.5, true},
    {"ne(a, s)", ne, [](double x, double s) { return x != s ? 1.0 : 0.0; }, 0.5, true},
    {"lt(a, s)", lt, [](double x, double s) { return x < s ? 1.0 : 0.0; }, 0.5, true},
    {"le(a, s)", le, [](double x, double s) { return x <= s ? 1.0 : 0.0; }, 0.5, true},
    {"gt(a, s)", gt, [](double x, double s) { return x > s ? 1.0 : 0.0; }, 0.5, true},
    {"ge(a, s)", ge, [](double x, double s) { return x >= s ? 1.0 : 0.0; }, 0.5, true},
};

// Scalar ops divide by a, so their inputs stay away from 0.
constexpr double kScalarLo = 0.25, kScalarHi = 4;

/// Broadcast shape pairs and the shape NumPy gives them.
struct BroadcastCase {
    Shape a, b, expected;
};

const BroadcastCase kBroadcasts[] = {
    {{2, 3, 4}, {4}, {2, 3, 4}},        // (B, T, D) + (D): a bias
    {{2, 1, 5}, {2, 3, 1}, {2, 3, 5}},  // (B, 1, S) + (B, T, 1): a key mask meets a query mask
    {{2, 3, 4}, {2, 3, 1}, {2, 3, 4}},  // (B, T, D) · (B, T, 1): a per-row scale
    {{3, 1}, {1, 4}, {3, 4}},           // an outer sum
    {{4}, {3, 1}, {3, 4}},              // rank grows on the left
    {{5}, {1, 1, 5}, {1, 1, 5}},        // leading size-1 dimensions
    {{1}, {5}, {5}},                    // a one-element vector
    {{}, {2, 3}, {2, 3}},               // 0-d scalar on the left
    {{2, 3}, {}, {2, 3}},               // 0-d scalar on the right
    {{}, {}, {}},                       // both 0-d
    {{0, 3}, {3}, {0, 3}},              // empty
    {{2, 0, 4}, {1, 4}, {2, 0, 4}},     // empty in the middle
    {{3, 1}, {1, 0}, {3, 0}},           // size 1 stretches to size 0
    {{0}, {}, {0}},                     // empty with a scalar
};

// Runs `body` with 1 and then 2 threads and restores the previous setting.
template <class Body>
auto with_threads(int n, Body&& body) {
    const int saved = get_num_threads();
    set_num_threads(n);
    auto result = body();
    set_num_threads(saved);
    return result;
}

}  // namespace

// ---- against the oracles ----------------------------------------------------------------------

TEST_CASE("f(x) for every unary op: matches reference::unary on every layout, float32 and float64",
          "[core][elementwise]") {
    Generator gen(1);
    const Shape shapes[] = {{3, 4, 5}, {7}, {}, {2, 0, 3}};
    for (const UnaryCase& op : kUnaryOps)
        for (DType dtype : kFloating)
            for (const Shape& shape : shapes)
                for (Layout layout : kLayouts) {
                    INFO(op.name << " " << dtype_name(dtype) << " " << shape_str(shape) << " " << layout_name(layout));
                    const Tensor x = make_input(shape, layout, op.lo, op.hi, dtype, gen);
                    const Tensor y = op.fast(x);
                    CHECK(y.dtype() == dtype);
                    CHECK(y.strides() == contiguous_strides(shape));
                    check_matches(y, reference::unary(x, op.oracle));
                }
}

TEST_CASE("f(a, b) for every binary op and comparison: matches reference::binary on every pair of layouts",
          "[core][elementwise]") {
    Generator gen(2);
    for (const BinaryCase& op : kBinaryOps)
        for (DType dtype : kFloating)
            for (Layout la : kLayouts)
                for (Layout lb : kLayouts) {
                    INFO(op.name << " " << dtype_name(dtype) << " " << layout_name(la) << " with " << layout_name(lb));
                    const Tensor a = make_input({3, 4, 5}, la, -2, 2, dtype, gen);
                    const Tensor b = make_input({3, 4, 5}, lb, op.b_lo, op.b_hi, dtype, gen);
                    const Tensor y = op.fast(a, b);
                    CHECK(y.dtype() == (op.mask ? DType::boolean : dtype));
                    CHECK(y.is_contiguous());
                    check_matches(y, reference::binary(a, b, op.oracle));
                }
}

TEST_CASE("f(a, b) for every binary op: broadcasts shapes as NumPy does, 0-d and empty included",
          "[core][elementwise]") {
    Generator gen(3);
    for (const BroadcastCase& shapes : kBroadcasts)
        for (const BinaryCase& op : kBinaryOps)
            for (DType dtype : kFloating)
                for (Layout layout : kLayouts) {
                    INFO(op.name << " " << shape_str(shapes.a) << " with " << shape_str(shapes.b) << " "
                                 << dtype_name(dtype) << " " << layout_name(layout));
                    const Tensor a = make_input(shapes.a, layout, -2, 2, dtype, gen);
                    const Tensor b = make_input(shapes.b, layout, op.b_lo, op.b_hi, dtype, gen);
                    const Tensor ab = op.fast(a, b), ba = op.fast(b, a);
                    CHECK(ab.shape() == shapes.expected);
                    CHECK(ba.shape() == shapes.expected);
                    check_matches(ab, reference::binary(a, b, op.oracle));
                    check_matches(ba, reference::binary(b, a, op.oracle));
                }
}

TEST_CASE("f(a, s) for every scalar variant, operator and scalar comparison: matches reference::binary",
          "[core][elementwise]") {
    Generator gen(4);
    for (const ScalarCase& op : kScalarOps)
        for (DType dtype : kFloating)
            for (Layout layout : kLayouts) {
                INFO(op.name << " " << dtype_name(dtype) << " " << layout_name(layout));
                const Tensor a = make_input({3, 4, 5}, layout, kScalarLo, kScalarHi, dtype, gen);
                const Tensor y = op.fast(a, op.s);
                CHECK(y.dtype() == (op.mask ? DType::boolean : dtype));
                CHECK(y.is_contiguous());
                check_matches(y, reference::binary(a, scalar(op.s, dtype), op.oracle));
            }
}

// ---- values by hand ----------------------------------------------------------------------------

TEST_CASE("add(a, s), rsub, rdiv and the operators: hand-computed values", "[core][elementwise]") {
    const Tensor a = tensor({1, -2, 3, 0.5}, {2, 2}, DType::float64);
    const Tensor b = tensor({2, 4, -1, 0.25}, {2, 2}, DType::float64);
    CHECK(values(add(a, 1.5)) == std::vector<double>{2.5, -0.5, 4.5, 2});
    CHECK(values(rsub(1, a)) == std::vector<double>{0, 3, -2, 0.5});
    CHECK(values(rdiv(1, a)) == std::vector<double>{1, -0.5, 1.0 / 3.0, 2});
    CHECK(values(maximum(a, 0.75)) == std::vector<double>{1, 0.75, 3, 0.75});
    CHECK(values(-a) == std::vector<double>{-1, 2, -3, -0.5});
    CHECK(values(a + b) == std::vector<double>{3, 2, 2, 0.75});
    CHECK(values(a - b) == std::vector<double>{-1, -6, 4, 0.25});
    CHECK(values(a * b) == std::vector<double>{2, -8, -3, 0.125});
    CHECK(values(a / b) == std::vector<double>{0.5, -0.5, -3, 2});
    CHECK(values(2.0 - a * 2.0 + 1.0) == std::vector<double>{1, 7, -3, 2});
    CHECK(values(1.0 / (a / 4.0)) == std::vector<double>{4, -2, 4.0 / 3.0, 8});
    // a bias over the last dimension: (2, 2) + (2)
    CHECK(values(a + tensor({10, 20}, {2}, DType::float64)) == std::vector<double>{11, 18, 13, 20.5});
    // s is converted to a's dtype: float32 0.1f + 0.1 is computed in float
    CHECK(add(full({1}, 0.1), 0.1).item() == static_cast<double>(0.1f + 0.1f));
}

TEST_CASE("sigmoid(x), pow(x, p), maximum, relu, sign: special values", "[core][elementwise]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (DType dtype : kFloating) {
        INFO(dtype_name(dtype));
        // sigmoid never overflows: far out it is exactly 0 or 1
        CHECK(values(sigmoid(tensor({-1e4, -1e3, 0, 1e3, 1e4}, {5}, dtype))) == std::vector<double>{0, 0, 0.5, 1, 1});
        // e^-100 is tiny but representable (a float32 subnormal): the formula keeps it
        const double tiny = sigmoid(tensor({-100}, {1}, dtype)).item();
        CHECK(tiny > 0.0);
        CHECK(tiny < 1e-43);
        CHECK(std::isnan(sigmoid(tensor({nan}, {1}, dtype)).item()));
        // integer powers of negative numbers, and x² exactly x·x
        const Tensor x = tensor({-2, -1.5, 0, 3}, {4}, dtype);
        CHECK(values(pow(x, 3.0)) == std::vector<double>{-8, -3.375, 0, 27});
        const Tensor y = tensor({-1.1, 0.3, -7.7}, {3}, dtype);
        CHECK(values(pow(y, 2.0)) == values(mul(y, y)));
        CHECK(values(pow(tensor({-2, 4}, {2}, dtype), -1.0)) == std::vector<double>{-0.5, 0.25});
        CHECK(values(pow(tensor({-2, 4}, {2}, dtype), -2.0)) == std::vector<double>{0.25, 0.0625});
        CHECK(values(pow(tensor({4, 9}, {2}, dtype), 0.5)) == std::vector<double>{2, 3});
        CHECK(values(pow(tensor({-2, 5}, {2}, dtype), 0.0)) == std::vector<double>{1, 1});
        // NaN propagates through maximum / minimum / relu / sign, as in PyTorch
        const Tensor with_nan = tensor({nan, 1, 2}, {3}, dtype);
        const Tensor ones3 = tensor({0, nan, 3}, {3}, dtype);
        const std::vector<double> mx = values(maximum(with_nan, ones3)), mn = values(minimum(with_nan, ones3));
        CHECK(std::isnan(mx[0]));
        CHECK(std::isnan(mx[1]));
        CHECK(mx[2] == 3);
        CHECK(std::isnan(mn[0]));
        CHECK(std::isnan(mn[1]));
        CHECK(mn[2] == 2);
        CHECK(std::isnan(relu(with_nan).to_vector()[0]));
        CHECK(std::isnan(sign(with_nan).to_vector()[0]));
        CHECK(values(sign(tensor({-3, 0, 0.5}, {3}, dtype))) == std::vector<double>{-1, 0, 1});
    }
}

TEST_CASE("eq/lt/...(a, b) and (a, s): bool masks for float and int64 inputs", "[core][elementwise]") {
    const Tensor ids = from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4});
    const Tensor other = from_vector(std::vector<int64_t>{0, 2, 2, 1}, {4});
    CHECK(eq(ids, other).dtype() == DType::boolean);
    CHECK(values(eq(ids, other)) == std::vector<double>{1, 0, 1, 0});
    CHECK(values(lt(ids, other)) == std::vector<double>{0, 1, 0, 0});
    CHECK(values(ge(ids, other)) == std::vector<double>{1, 0, 1, 1});
    // an int64 tensor is compared with the number itself, not a truncated copy
    CHECK(values(lt(ids, 2.5)) == std::vector<double>{1, 1, 1, 0});
    CHECK(values(eq(ids, 2.0)) == std::vector<double>{0, 0, 1, 0});
    CHECK(values(ne(ids, 2.5)) == std::vector<double>{1, 1, 1, 1});
    // padding mask of seed 004: token ids (B, T) against the pad id, broadcast against (B, 1)
    const Tensor tokens = from_vector(std::vector<int64_t>{5, 7, 1, 1, 4, 1}, {2, 3});
    const Tensor pad = from_vector(std::vector<int64_t>{1, 4}, {2, 1});
    CHECK(values(ne(tokens, pad)) == std::vector<double>{1, 1, 0, 1, 0, 1});
    // a float32 tensor is compared with s converted to float32
    CHECK(eq(full({1}, 0.1), 0.1).item() == 1.0);
    CHECK(eq(full({1}, 0.1, DType::float64), 0.1).item() == 1.0);
}

TEST_CASE("logical_not/and/or(mask): elementwise logic with broadcasting", "[core][elementwise]") {
    const Tensor a = mask({true, false, true, false}, {2, 2});
    const Tensor col = mask({true, false}, {2, 1});
    CHECK(values(logical_not(a)) == std::vector<double>{0, 1, 0, 1});
    CHECK(values(logical_and(a, col)) == std::vector<double>{1, 0, 0, 0});
    CHECK(values(logical_or(a, col)) == std::vector<double>{1, 1, 1, 0});
    CHECK(values(logical_not(a.transpose(0, 1))) == std::vector<double>{0, 0, 1, 1});
    CHECK(logical_and(a, mask({true}, {})).shape() == Shape{2, 2});
}

TEST_CASE("where(cond, a, b): three-way broadcast, any dtype", "[core][elementwise]") {
    const Tensor cond = mask({true, false}, {2, 1});             // (2, 1)
    const Tensor a = tensor({1, 2, 3}, {1, 3}, DType::float64);  // (1, 3)
    const Tensor b = scalar(-1, DType::float64);                 // ()
    const Tensor y = where(cond, a, b);
    CHECK(y.shape() == Shape{2, 3});
    CHECK(values(y) == std::vector<double>{1, 2, 3, -1, -1, -1});
    // transposed inputs and a full condition
    const Tensor m = mask({true, false, false, true, true, false}, {2, 3});
    const Tensor p = tensor({1, 2, 3, 4, 5, 6}, {3, 2}).transpose(0, 1);  // [[1, 3, 5], [2, 4, 6]]
    const Tensor q = tensor({10, 20, 30, 40, 50, 60}, {2, 3});
    CHECK(values(where(m, p, q)) == std::vector<double>{1, 20, 30, 2, 4, 60});
    CHECK(values(where(m.transpose(0, 1), p.transpose(0, 1), 0.0 * p.transpose(0, 1))) ==
          std::vector<double>{1, 2, 0, 4, 0, 0});
    // int64 and bool values
    const Tensor i = from_vector(std::vector<int64_t>{7, 8}, {2});
    const Tensor j = from_vector(std::vector<int64_t>{-7, -8}, {2});
    const Tensor ij = where(mask({false, true}, {2}), i, j);
    CHECK(ij.dtype() == DType::int64);
    CHECK(values(ij) == std::vector<double>{-7, 8});
    CHECK(values(where(mask({true, false}, {2}), mask({false, false}, {2}), mask({true, true}, {2}))) ==
          std::vector<double>{0, 1});
    CHECK(where(mask({}, {0}), tensor({}, {0}), scalar(1)).shape() == Shape{0});
}

TEST_CASE("masked_fill(x, mask, value): mask broadcast to x's shape", "[core][elementwise]") {
    // scores (B, T, S) = (2, 2, 3) with a key mask (B, 1, S), as in masked softmax
    const Tensor scores = arange(12, DType::float64).view({2, 2, 3});
    const Tensor keys = mask({false, false, true, false, true, true}, {2, 1, 3});
    const Tensor y = masked_fill(scores, keys, -1e6);
    CHECK(y.shape() == Shape{2, 2, 3});
    CHECK(y.dtype() == DType::float64);
    CHECK(values(y) == std::vector<double>{0, 1, -1e6, 3, 4, -1e6, 6, -1e6, -1e6, 9, -1e6, -1e6});
    // a causal mask (T, S) for every batch, on a transposed x
    const Tensor causal = mask({false, true, false, false}, {2, 2});
    const Tensor xt = arange(8).view({2, 2, 2}).transpose(1, 2);  // [[0, 2], [1, 3]], [[4, 6], [5, 7]]
    CHECK(values(masked_fill(xt, causal, -INFINITY)) == std::vector<double>{0, -INFINITY, 1, 3, 4, -INFINITY, 5, 7});
    // a 0-d mask, an int64 x
    CHECK(values(masked_fill(tensor({1, 2}, {2}), mask({true}, {}), 5)) == std::vector<double>{5, 5});
    const Tensor ids = from_vector(std::vector<int64_t>{3, 4, 5}, {3});
    const Tensor filled = masked_fill(ids, mask({false, true, false}, {3}), 0);
    CHECK(filled.dtype() == DType::int64);
    CHECK(values(filled) == std::vector<double>{3, 0, 5});
}

// ---- in place -----------------------------------------------------------------------------------

TEST_CASE("add_(dst, src, alpha): into transposed, sliced and contiguous views", "[core][elementwise]") {
    for (DType dtype : kFloating) {
        INFO(dtype_name(dtype));
        // dst is a transposed view: the base tensor sees the update
        const Tensor base = zeros({3, 4}, dtype);
        const Tensor dst = base.transpose(0, 1);  // (4, 3)
        const Tensor src = arange(12, dtype).view({4, 3});
        add_(dst, src, 2.0);
        for (int64_t i = 0; i < 4; ++i)
            for (int64_t j = 0; j < 3; ++j) CHECK(base.at({j, i}) == 2.0 * src.at({i, j}));
        // a bias row broadcast into the transposed view, accumulated twice
        add_(dst, tensor({1, 2, 3}, {3}, dtype));
        add_(dst, tensor({1, 2, 3}, {3}, dtype));
        CHECK(base.at({2, 1}) == 2.0 * src.at({1, 2}) + 6.0);
        // only the sliced elements change
        const Tensor row = zeros({6}, dtype);
        add_(row.slice(0, 1, 6, 2), ones({3}, dtype), -0.5);
        CHECK(values(row) == std::vector<double>{0, -0.5, 0, -0.5, 0, -0.5});
        // a 0-d src into a contiguous dst; add_(x, x) doubles x
        const Tensor g = tensor({1, 2}, {2}, dtype);
        add_(g, scalar(0.5, dtype));
        CHECK(values(g) == std::vector<double>{1.5, 2.5});
        add_(g, g);
        CHECK(values(g) == std::vector<double>{3, 5});
        // against the oracle on a larger transposed dst with a (B, 1, D) src
        Generator gen(5);
        const Tensor big = make_input({4, 5, 6}, Layout::transposed, -2, 2, dtype, gen);
        const Tensor before = big.clone();
        const Tensor s = make_input({4, 1, 6}, Layout::sliced, -2, 2, dtype, gen);
        add_(big, s, 0.25);
        check_matches(big, reference::binary(before, s, [](double d, double x) { return d + 0.25 * x; }));
    }
}

TEST_CASE("mul_(dst, s): scales a view in place", "[core][elementwise]") {
    const Tensor base = arange(6, DType::float64).view({2, 3});
    mul_(base.transpose(0, 1), 2.0);
    CHECK(values(base) == std::vector<double>{0, 2, 4, 6, 8, 10});
    mul_(base.slice(1, 0, 3, 2), -1.0);
    CHECK(values(base) == std::vector<double>{0, 2, -4, -6, 8, -10});
    const Tensor f = full({3}, 1.5);
    mul_(f, 4.0);
    CHECK(values(f) == std::vector<double>{6, 6, 6});
}

// ---- threads -----------------------------------------------------------------------------------

TEST_CASE("f(x) on >= 1M elements: identical results with 1 and 2 threads", "[core][elementwise]") {
    Generator gen(6);
    const Tensor x = randn({1024, 1030}, gen);  // 1,054,720 elements
    const Tensor bias = randn({1030}, gen);
    const Tensor rows = randn({1024, 1}, gen);
    const Tensor xt = randn({1030, 1024}, gen).transpose(0, 1);                // the same shape, strided
    const Tensor every_other = randn({2 << 20}, gen).slice(0, 0, 2 << 20, 2);  // one long strided run
    const auto compute = [&] {
        std::vector<std::vector<double>> out;
        out.push_back(values(add(x, bias)));
        out.push_back(values(mul(x, rows)));
        out.push_back(values(sub(x, xt)));
        out.push_back(values(exp(x)));
        out.push_back(values(sigmoid(xt)));
        out.push_back(values(tanh(x * 0.5)));
        out.push_back(values(where(gt(x, 0.0), x, bias)));
        out.push_back(values(masked_fill(xt, lt(rows, 0.0), -1)));
        Tensor acc = zeros({1030, 1024}).transpose(0, 1);
        add_(acc, x, 0.5);
        add_(acc, xt);
        out.push_back(values(acc));
        out.push_back(values(sigmoid(every_other)));
        Tensor flat = zeros({1 << 20});
        add_(flat, every_other, -2);
        out.push_back(values(flat));
        return out;
    };
    const auto one = with_threads(1, compute);
    const auto two = with_threads(2, compute);
    REQUIRE(one.size() == two.size());
    for (size_t k = 0; k < one.size(); ++k) {
        INFO("result " << k);
        CHECK(one[k] == two[k]);
    }
    // and the threaded result is right
    check_matches(add(x, bias), reference::binary(x, bias, [](double a, double b) { return a + b; }));
    check_matches(mul(every_other, every_other),
                  reference::binary(every_other, every_other, [](double a, double b) { return a * b; }));
}

// ---- errors -------------------------------------------------------------------------------------

TEST_CASE("add/exp/where/masked_fill/add_: bad input throws errors naming the op", "[core][elementwise][errors]") {
    const Tensor f32 = zeros({2, 3});
    const Tensor f64 = zeros({2, 3}, DType::float64);
    const Tensor i64 = zeros({2, 3}, DType::int64);
    const Tensor b = zeros({2, 3}, DType::boolean);

    // shapes
    REQUIRE_THROWS_AS(add(f32, zeros({4})), ShapeError);
    REQUIRE_THROWS_WITH(add(f32, zeros({4})), "add: cannot broadcast (2x3) with (4) at dimension 1");
    REQUIRE_THROWS_WITH(f32 * zeros({3, 3}), "mul: cannot broadcast (2x3) with (3x3) at dimension 0");
    REQUIRE_THROWS_WITH(lt(f32, zeros({2})), "lt: cannot broadcast (2x3) with (2) at dimension 1");
    REQUIRE_THROWS_WITH(where(b, f32, zeros({5})), "where: cannot broadcast (2x3) with (5) at dimension 1");
    REQUIRE_THROWS_WITH(masked_fill(zeros({3}), zeros({2, 3}, DType::boolean), 0),
                        "masked_fill: mask of shape (2x3) does not broadcast to x's shape (3)");
    REQUIRE_THROWS_WITH(masked_fill(zeros({3}), zeros({4}, DType::boolean), 0),
                        "masked_fill: cannot broadcast (3) with (4) at dimension 0");
    REQUIRE_THROWS_WITH(add_(zeros({3}), f32), "add_: src of shape (2x3) does not broadcast to dst's shape (3)");

    // dtypes
    REQUIRE_THROWS_AS(add(f32, f64), ValueError);
    REQUIRE_THROWS_WITH(add(f32, f64), "add: inputs have different dtypes (float32 and float64)");
    REQUIRE_THROWS_WITH(f64 / f32, "div: inputs have different dtypes (float64 and float32)");
    REQUIRE_THROWS_WITH(exp(i64), "exp: expected a floating dtype (float32 or float64), got int64");
    REQUIRE_THROWS_WITH(i64 + i64, "add: expected a floating dtype (float32 or float64), got int64");
    REQUIRE_THROWS_WITH(mul(i64, 2.0), "mul: expected a floating dtype (float32 or float64), got int64");
    REQUIRE_THROWS_WITH(sigmoid(b), "sigmoid: expected a floating dtype (float32 or float64), got bool");
    REQUIRE_THROWS_WITH(eq(i64, f32), "eq: inputs have different dtypes (int64 and float32)");
    REQUIRE_THROWS_WITH(lt(b, b), "lt: expected a float32, float64 or int64 tensor, got bool");
    REQUIRE_THROWS_WITH(logical_and(b, f32), "logical_and: expected dtype bool, got float32");
    REQUIRE_THROWS_WITH(logical_not(i64), "logical_not: expected dtype bool, got int64");
    REQUIRE_THROWS_WITH(where(f32, f32, f32), "where: condition must be a bool mask, got float32");
    REQUIRE_THROWS_WITH(where(b, f32, f64), "where: inputs have different dtypes (float32 and float64)");
    REQUIRE_THROWS_WITH(masked_fill(f32, f32, 0), "masked_fill: mask must be bool, got float32");
    REQUIRE_THROWS_WITH(add_(f32, f64), "add_: inputs have different dtypes (float32 and float64)");
    REQUIRE_THROWS_WITH(mul_(i64, 2), "mul_: expected a floating dtype (float32 or float64), got int64");

    // views that repeat an element cannot be written, and undefined tensors are refused
    REQUIRE_THROWS_WITH(add_(zeros({1, 3}).expand({4, 3}), zeros({3})),
                        "add_: dst of shape (4x3) repeats elements (stride 0 in dimension 0); write into a copy");
    REQUIRE_THROWS_WITH(mul_(zeros({3, 1}).expand({3, 2}), 2),
                        "mul_: dst of shape (3x2) repeats elements (stride 0 in dimension 1); write into a copy");
    REQUIRE_THROWS_WITH(add(Tensor(), f32), "add: tensor is undefined");
    REQUIRE_THROWS_WITH(neg(Tensor()), "neg: tensor is undefined");
}
