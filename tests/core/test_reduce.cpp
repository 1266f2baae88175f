// core reductions (sum, mean, max, min, argmax, var, sum_to_shape): the fast
// kernels against the plain-loop oracles on every memory layout, hand-worked
// numbers, precision, thread-count independence and error messages.
#include "core/parallel.hpp"
#include "core/reduce.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

using namespace tformer;
using namespace tformer::core;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- inputs in every layout -----------------------------------------------------------

enum class Layout { contiguous, transposed, sliced, expanded };
const std::vector<Layout> kLayouts = {Layout::contiguous, Layout::transposed, Layout::sliced, Layout::expanded};

const char* layout_name(Layout layout) {
    switch (layout) {
        case Layout::contiguous: return "contiguous";
        case Layout::transposed: return "transposed";
        case Layout::sliced: return "sliced";
        case Layout::expanded: return "expanded";
    }
    return "?";
}

// Random values of logical shape `shape`, laid out in memory as `layout`:
//   transposed  all dimensions reversed in memory (strides ascending)
//   sliced      every other element of a tensor twice as big in each
//               dimension, starting at 1 (strides doubled, non-zero offset)
//   expanded    dimensions 0, 2, 4, ... broadcast from size 1 (stride 0)
Tensor make_input(const Shape& shape, Layout layout, DType dtype, Generator& gen) {
    const int n = shape.size();
    switch (layout) {
        case Layout::contiguous: return randn(shape, gen, dtype);
        case Layout::transposed: {
            Shape reversed;
            Dims order;
            for (int d = n - 1; d >= 0; --d) {
                reversed.push_back(shape[d]);
                order.push_back(d);
            }
            return randn(reversed, gen, dtype).permute(order);
        }
        case Layout::sliced: {
            Shape twice = shape;
            for (int64_t& s : twice) s *= 2;
            Tensor t = randn(twice, gen, dtype);
            for (int d = 0; d < n; ++d) t = t.slice(d, 1, 2 * shape[d], 2);
            return t;
        }
        case Layout::expanded: {
            Shape base = shape;
            for (int d = 0; d < n; d += 2) base[d] = 1;
            return randn(base, gen, dtype).expand(shape);
        }
    }
    return {};
}

// Same shape and dtype, and every value within rtol/atol (NaN only matches NaN).
void check_close(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
    REQUIRE(shape_str(actual.shape()) == shape_str(expected.shape()));
    REQUIRE(dtype_name(actual.dtype()) == dtype_name(expected.dtype()));
    const std::vector<double> a = actual.to_vector(), e = expected.to_vector();
    // one assertion per tensor, reporting the first element that differs
    size_t bad = e.size();
    for (size_t i = 0; i < e.size() && bad == e.size(); ++i) {
        const bool same = std::isnan(e[i]) ? std::isnan(a[i]) : std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]);
        if (!same) bad = i;
    }
    INFO("first difference at element " << bad << ": " << (bad < e.size() ? a[bad] : 0.0) << " vs "
                                        << (bad < e.size() ? e[bad] : 0.0));
    CHECK(bad == e.size());
}

// ---- the tables -------------------------------------------------------------------------

using ReduceFn = std::function<Tensor(const Tensor&, const Dims&, bool)>;

struct ReduceOp {
    const char* name;
    ReduceFn fast, oracle;
    bool needs_elements;  // max and min of nothing are errors, tested separately
};

const std::vector<ReduceOp> kOps = {
    {"sum", [](const Tensor& x, const Dims& d, bool k) { return sum(x, d, k); },
     [](const Tensor& x, const Dims& d, bool k) { return reference::sum(x, d, k); }, false},
    {"mean", [](const Tensor& x, const Dims& d, bool k) { return mean(x, d, k); },
     [](const Tensor& x, const Dims& d, bool k) { return reference::mean(x, d, k); }, false},
    {"max", [](const Tensor& x, const Dims& d, bool k) { return max(x, d, k); },
     [](const Tensor& x, const Dims& d, bool k) { return reference::max(x, d, k); }, true},
    {"min", [](const Tensor& x, const Dims& d, bool k) { return min(x, d, k); },
     [](const Tensor& x, const Dims& d, bool k) { return reference::min(x, d, k); }, true},
    {"var unbiased", [](const Tensor& x, const Dims& d, bool k) { return var(x, d, true, k); },
     [](const Tensor& x, const Dims& d, bool k) { return reference::var(x, d, true, k); }, false},
    {"var biased", [](const Tensor& x, const Dims& d, bool k) { return var(x, d, false, k); },
     [](const Tensor& x, const Dims& d, bool k) { return reference::var(x, d, false, k); }, false},
};

struct ReduceCase {
    Shape shape;
    Dims dims;  // empty = all
    bool keepdim;
};

const std::vector<ReduceCase> kCases = {
    {{2, 3, 4}, {}, false},        // everything
    {{2, 3, 4}, {}, true},         // everything, (1x1x1)
    {{2, 3, 4}, {0}, false},       // leading dim
    {{2, 3, 4}, {1}, true},        // middle dim
    {{2, 3, 4}, {2}, false},       // last dim (row sums)
    {{2, 3, 4}, {-1}, true},       // negative dim
    {{2, 3, 4}, {0, 2}, false},    // two apart
    {{2, 3, 4}, {-1, 0}, true},    // negative and out of order
    {{2, 3, 4}, {0, 1}, false},    // leading dims (bias gradient)
    {{2, 3, 4}, {1, 2}, false},    // trailing dims
    {{5, 1, 7}, {1}, false},       // a size-1 dim
    {{3, 1, 2, 5}, {0, 3}, true},  // 4-d
    {{7}, {0}, false},             // 1-d
    {{9}, {}, true},               // 1-d, keepdim
    {{}, {}, false},               // 0-d
    {{}, {0}, true},               // 0-d with dim 0, as PyTorch allows
    {{2, 0, 3}, {1}, false},       // an empty reduction: sum 0, mean and var NaN
    {{0, 3}, {1}, true},           // no outputs at all
    {{4, 70, 33}, {1}, false},     // lanes with tails, several runs
    {{3, 2500}, {0}, false},       // columns wider than one tile
    {{2, 3, 1100}, {0, 1}, true},  // leading dims, more than one tile
    {{37, 41}, {1}, false},        // odd row lengths
    {{2, 20000}, {1}, false},      // runs longer than one block (16384)
    {{40000}, {}, false},          // one long run, three blocks
};

// True when the case folds a dimension of size 0.
bool reduces_nothing(const ReduceCase& c) {
    const DimMask mask = reduction_mask(c.shape.size(), c.dims, "test");
    for (int d = 0; d < c.shape.size(); ++d)
        if (mask[d] && c.shape[d] == 0) return true;
    return false;
}

std::string case_name(const ReduceCase& c) {
    return shape_str(c.shape) + " over " + dims_list_str(c.dims) + (c.keepdim ? " keepdim" : "");
}

}  // namespace

// ---- fast against oracle ----------------------------------------------------------------

TEST_CASE("sum/mean/max/min/var(x, dims, keepdim): match the plain-loop oracles on every layout", "[core][reduce]") {
    Generator gen(7);
    for (DType dtype : {DType::float32, DType::float64}) {
        // float32 results round once from a double accumulator; var's
        // float32 mean and deviations add a few float32 roundings
        const double rtol = dtype == DType::float32 ? 2e-5 : 1e-12;
        const double atol = dtype == DType::float32 ? 2e-5 : 1e-12;
        for (Layout layout : kLayouts) {
            for (const ReduceCase& c : kCases) {
                const Tensor x = make_input(c.shape, layout, dtype, gen);
                for (const ReduceOp& op : kOps) {
                    if (op.needs_elements && reduces_nothing(c)) continue;
                    INFO(op.name << " of " << case_name(c) << ", " << layout_name(layout) << ", " << dtype_name(dtype));
                    check_close(op.fast(x, c.dims, c.keepdim), op.oracle(x, c.dims, c.keepdim), rtol, atol);
                }
            }
        }
    }
}

TEST_CASE("argmax(x, dim, keepdim): matches the plain-loop oracle on every layout and dim", "[core][reduce]") {
    Generator gen(11);
    const std::vector<Shape> shapes = {{7}, {2, 3, 4}, {5, 1, 6}, {37, 41}, {3, 2, 2, 5}};
    for (DType dtype : {DType::float32, DType::float64}) {
        for (Layout layout : kLayouts) {
            for (const Shape& shape : shapes) {
                const Tensor x = make_input(shape, layout, dtype, gen);
                for (int64_t dim = -shape.size(); dim < shape.size(); ++dim) {
                    for (bool keepdim : {false, true}) {
                        INFO("argmax of " << shape_str(shape) << " along " << dim << (keepdim ? " keepdim" : "") << ", "
                                          << layout_name(layout) << ", " << dtype_name(dtype));
                        const Tensor got = argmax(x, dim, keepdim);
                        REQUIRE(got.dtype() == DType::int64);
                        check_close(got, reference::argmax(x, dim, keepdim), 0, 0);
                    }
                }
            }
        }
    }
}

// ---- hand-worked numbers ---------------------------------------------------------------

TEST_CASE("sum/mean/max/min(x, dims, keepdim): hand-computed values and shapes", "[core][reduce]") {
    // x = [[0, 1, 2],
    //      [3, 4, 5]]
    const Tensor x = arange(6, DType::float64).view({2, 3});
    CHECK(sum(x, {0}).to_vector() == std::vector<double>{3, 5, 7});
    CHECK(sum(x, {1}).to_vector() == std::vector<double>{3, 12});
    CHECK(sum(x, {1}, true).shape() == Shape{2, 1});
    CHECK(sum(x, {0, 1}, true).shape() == Shape{1, 1});
    CHECK(sum(x).dim() == 0);
    CHECK(sum(x).item() == 15);
    CHECK(mean(x, {0}).to_vector() == std::vector<double>{1.5, 2.5, 3.5});
    CHECK(mean(x).item() == 2.5);
    CHECK(max(x, {1}).to_vector() == std::vector<double>{2, 5});
    CHECK(max(x).item() == 5);
    CHECK(min(x, {0}).to_vector() == std::vector<double>{0, 1, 2});
    CHECK(min(x).item() == 0);
    // the transpose gives the same numbers through the other kernel
    CHECK(sum(x.transpose(0, 1), {1}).to_vector() == std::vector<double>{3, 5, 7});
    // 0-d input: the element itself
    CHECK(sum(scalar(3.0)).item() == 3.0);
    CHECK(max(scalar(-2.0), {0}).item() == -2.0);
    // results are fresh contiguous tensors in the input's dtype
    CHECK(sum(x, {0}).dtype() == DType::float64);
    CHECK(sum(x.to(DType::float32), {0}).dtype() == DType::float32);
    CHECK(sum(x, {0}).is_contiguous());
}

TEST_CASE("sum/mean/var(x, dims): empty reductions give 0 and NaN", "[core][reduce]") {
    const Tensor x = zeros({2, 0});
    CHECK(sum(x, {1}).to_vector() == std::vector<double>{0, 0});
    CHECK(sum(x).item() == 0);
    CHECK(std::isnan(mean(x).item()));
    CHECK(std::isnan(var(x, {1}, false).to_vector()[0]));
    CHECK(sum(x, {0}).shape() == Shape{0});
}

TEST_CASE("max/min(x, dims): NaN propagates", "[core][reduce]") {
    // rows: [1, NaN, 3], [4, 5, 6]
    const Tensor x = tensor({1, kNaN, 3, 4, 5, 6}, {2, 3});
    CHECK(std::isnan(max(x).item()));
    CHECK(std::isnan(min(x).item()));
    const std::vector<double> row_max = max(x, {1}).to_vector();
    CHECK(std::isnan(row_max[0]));
    CHECK(row_max[1] == 6);
    const std::vector<double> col_min = min(x, {0}).to_vector();
    CHECK(col_min[0] == 1);
    CHECK(std::isnan(col_min[1]));
    CHECK(col_min[2] == 3);
    // also when the NaN sits in a long run's lanes and blocks
    Tensor big = zeros({100000});
    big.set({77777}, kNaN);
    CHECK(std::isnan(max(big).item()));
    CHECK(std::isnan(min(big, {0}).item()));
}

TEST_CASE("argmax(x, dim, keepdim): first index on ties, NaN counts as largest, int64 input", "[core][reduce]") {
    // [[1, 3, 3, 2],
    //  [5, 5, 0, 5]]
    const Tensor x = tensor({1, 3, 3, 2, 5, 5, 0, 5}, {2, 4});
    CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
    CHECK(argmax(x, -1, true).shape() == Shape{2, 1});
    CHECK(argmax(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0, 1});
    CHECK(argmax(tensor({2, 2, 2}, {3}), 0).item() == 0);
    CHECK(argmax(tensor({1, kNaN, 7, kNaN}, {4}), 0).item() == 1);
    CHECK(argmax(from_vector(std::vector<int64_t>{4, 9, 9, -1}, {4}), 0).item() == 1);
    CHECK(argmax(scalar(5.0), 0).item() == 0);
    CHECK(argmax(x, 1).dtype() == DType::int64);
}

TEST_CASE("var(x, dims, unbiased, keepdim): Bessel's correction on hand-computed numbers", "[core][reduce]") {
    // [1, 2, 3, 4]: mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5
    for (DType dtype : {DType::float32, DType::float64}) {
        const Tensor x = tensor({1, 2, 3, 4}, {4}, dtype);
        CHECK(var(x, {}, true).item() == Approx(5.0 / 3.0));  // 1.6667
        CHECK(var(x, {}, false).item() == Approx(1.25));
        CHECK(var(x, {}, true).dtype() == dtype);
    }
    // per row, keepdim: [[1, 2, 3, 4], [2, 2, 2, 2]]
    const Tensor rows = tensor({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4}, DType::float64);
    const Tensor v = var(rows, {1}, true, true);
    CHECK(v.shape() == Shape{2, 1});
    CHECK(v.at({0, 0}) == Approx(5.0 / 3.0));
    CHECK(v.at({1, 0}) == 0.0);
    // one element: the unbiased divisor n - 1 is 0, giving NaN as in PyTorch; biased gives 0
    CHECK(std::isnan(var(tensor({3}, {1}), {0}, true).item()));
    CHECK(var(tensor({3}, {1}), {0}, false).item() == 0.0);
    // a large offset does not cancel away the variance (two passes, not E[x²] - E[x]²)
    const Tensor shifted = tensor({1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4}, {4}, DType::float64);
    CHECK(var(shifted, {}, false).item() == Approx(1.25));
}

// ---- sum_to_shape ------------------------------------------------------------------------

TEST_CASE("sum_to_shape(x, shape): sums broadcast dimensions away, on every layout", "[core][reduce]") {
    struct ToShapeCase {
        Shape from, to;
        Dims dims;  // what the oracle sums with keepdim
    };
    const std::vector<ToShapeCase> cases = {
        {{2, 3, 4}, {4}, {0, 1}},     // bias gradient
        {{2, 3, 4}, {3, 1}, {0, 2}},  // leading dim away, last stretched from 1
        {{2, 3, 4}, {1, 3, 4}, {0}},  // keepdim leading
        {{2, 3, 4}, {2, 1, 4}, {1}},  // middle stretched from 1
        {{2, 3, 4}, {}, {0, 1, 2}},   // 0-d target: everything
        {{1, 3, 4}, {3, 4}, {0}},     // a size-1 leading dim
        {{8, 16, 64}, {64}, {0, 1}},  // bias gradient, several tiles of rows
        {{6, 1500}, {1500}, {0}},     // wider than one tile
        {{2, 0, 3}, {1, 3}, {0, 1}},  // summing an empty dimension gives zeros
    };
    Generator gen(3);
    for (DType dtype : {DType::float32, DType::float64}) {
        for (Layout layout : kLayouts) {
            for (const ToShapeCase& c : cases) {
                INFO(shape_str(c.from) << " -> " << shape_str(c.to) << ", " << layout_name(layout) << ", "
                                       << dtype_name(dtype));
                const Tensor x = make_input(c.from, layout, dtype, gen);
                const Tensor expected = reference::sum(x, c.dims, true).reshape(c.to);
                check_close(sum_to_shape(x, c.to), expected, 1e-5, 1e-5);
            }
        }
    }
}

TEST_CASE("sum_to_shape(x, shape): the identity returns x itself", "[core][reduce]") {
    const Tensor x = randn({2, 3, 4}).transpose(0, 2);
    const Tensor y = sum_to_shape(x, x.shape());
    CHECK(y.shares_storage(x));
    CHECK(y.strides() == x.strides());
    CHECK(y.offset() == x.offset());
    const Tensor s = scalar(4.0);
    CHECK(sum_to_shape(s, Shape{}).shares_storage(s));
}

// ---- precision and threads ---------------------------------------------------------------

TEST_CASE("sum(x): a million float32 elements stay accurate to 1e-6 relative", "[core][reduce]") {
    // 0.1f a million times: a float32 running sum drifts by about 1%; the
    // exact answer is 10^6 · (double)0.1f
    const Tensor tenths = full({1000000}, 0.1, DType::float32);
    const double exact_tenths = 1e6 * static_cast<double>(0.1f);
    CHECK(std::abs(sum(tenths).item() - exact_tenths) <= 1e-6 * exact_tenths);
    CHECK(std::abs(mean(tenths).item() - static_cast<double>(0.1f)) <= 1e-6 * 0.1);
    // uniform values, also as column sums of a (1000000 x 1) view and in rows
    Generator gen(5);
    const Tensor u = rand({1000000}, gen, DType::float32);
    double exact = 0;
    for (double v : u.to_vector()) exact += v;
    CHECK(std::abs(sum(u).item() - exact) <= 1e-6 * exact);
    CHECK(std::abs(sum(u.view({1000000, 1}), {0}).item() - exact) <= 1e-6 * exact);
    CHECK(std::abs(sum(sum(u.view({1000, 1000}), {1})).item() - exact) <= 1e-6 * exact);
}

TEST_CASE("sum/max/var/argmax: 1 and 2 threads give identical bits", "[core][reduce]") {
    Generator gen(9);
    const Tensor big = randn({512, 2048}, gen);  // (1M) float32
    const Tensor big64 = randn({300, 700}, gen, DType::float64);
    const Tensor wide = randn({2000000}, gen);
    auto compute = [&] {
        return std::vector<Tensor>{
            sum(wide),                      // one run in blocks
            sum(big, {0}),                  // columns
            sum(big, {1}),                  // rows
            sum(big.transpose(0, 1), {0}),  // rows through the transpose
            sum_to_shape(big.view({16, 32, 2048}), {2048}),
            mean(big64, {0}),
            max(big, {0}),
            min(big.slice(1, 0, 2048, 2), {1}),
            var(big, {1}, true),
            var(big64, {}, false),
            argmax(big, 1),
        };
    };
    const int saved = get_num_threads();
    set_num_threads(1);
    const std::vector<Tensor> one = compute();
    set_num_threads(2);
    const std::vector<Tensor> two = compute();
    set_num_threads(saved);
    for (size_t i = 0; i < one.size(); ++i) {
        INFO("result " << i);
        CHECK(one[i].to_vector() == two[i].to_vector());
    }
}

// ---- errors ----------------------------------------------------------------------------

TEST_CASE("sum/max/argmax/var/sum_to_shape: bad input throws naming the op and shapes", "[core][reduce]") {
    const Tensor x = zeros({2, 3});
    REQUIRE_THROWS_AS(sum(x, {2}), IndexError);
    REQUIRE_THROWS_WITH(sum(x, {2}), "sum: dimension 2 out of range for a 2-d tensor (expected -2 to 1)");
    REQUIRE_THROWS_WITH(mean(x, {-3}), Catch::Contains("mean: dimension -3 out of range"));
    REQUIRE_THROWS_WITH(sum(scalar(1.0), {1}), "sum: dimension 1 out of range for a 0-d tensor (expected -1 or 0)");
    REQUIRE_THROWS_AS(sum(x, {1, -1}), ValueError);
    REQUIRE_THROWS_WITH(sum(x, {1, -1}), "sum: dimension 1 appears more than once in [1, -1]");
    REQUIRE_THROWS_WITH(var(x, {0, 0}, true), "var: dimension 0 appears more than once in [0, 0]");

    REQUIRE_THROWS_AS(max(zeros({2, 0}), {1}), ValueError);
    REQUIRE_THROWS_WITH(max(zeros({2, 0}), {1}),
                        "max: dimension 1 of shape (2x0) has size 0; the max of no elements is undefined");
    REQUIRE_THROWS_WITH(min(zeros({0, 3})), Catch::Contains("min: dimension 0 of shape (0x3) has size 0"));
    REQUIRE_THROWS_WITH(argmax(zeros({3, 0}), 1), Catch::Contains("argmax: dimension 1 of shape (3x0) has size 0"));
    REQUIRE_THROWS_WITH(argmax(x, 2), Catch::Contains("argmax: dimension 2 out of range"));

    const Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3}, {3});
    REQUIRE_THROWS_AS(sum(ids), ValueError);
    REQUIRE_THROWS_WITH(sum(ids), "sum: expected a floating dtype (float32 or float64), got int64");
    REQUIRE_THROWS_WITH(var(ids, {}, true), Catch::Contains("var: expected a floating dtype"));
    REQUIRE_THROWS_WITH(max(ids), Catch::Contains("max: expected a floating dtype"));
    REQUIRE_THROWS_WITH(argmax(from_vector(std::vector<bool>{true}, {1}), 0), Catch::Contains("argmax:"));
    REQUIRE_THROWS_WITH(sum(Tensor{}), "sum: tensor is undefined");

    const Tensor y = zeros({2, 3, 4});
    REQUIRE_THROWS_AS(sum_to_shape(y, {5}), ShapeError);
    REQUIRE_THROWS_WITH(sum_to_shape(y, {5}),
                        "sum_to_shape: cannot sum (2x3x4) down to (5): (5) does not broadcast to (2x3x4)");
    REQUIRE_THROWS_WITH(sum_to_shape(y, {1, 2, 3, 4}), Catch::Contains("cannot sum (2x3x4) down to (1x2x3x4)"));
    REQUIRE_THROWS_WITH(sum_to_shape(y, {2, 3}), Catch::Contains("cannot sum (2x3x4) down to (2x3)"));
    REQUIRE_THROWS_WITH(sum_to_shape(ids, {1}), Catch::Contains("sum_to_shape: expected a floating dtype"));
}
