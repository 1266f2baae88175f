// core::matmul and core::linear against the triple loop of core::reference,
// over every memory layout an operand can arrive in; core::blas::gemm on
// hand-worked numbers.
#include "core/blas.hpp"
#include "core/elementwise.hpp"
#include "core/matmul.hpp"
#include "core/parallel.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::core;

namespace {

// How a test operand (..., rows, cols) sits in memory.
enum class Layout {
    contiguous,               // strides (cols, 1)
    transposed,               // strides (1, rows): goes to BLAS as a transpose flag
    row_gaps,                 // strides (cols + 3, 1): leading dimension larger than the row
    every_second,             // strides (2 cols, 2): must be copied
    transposed_every_second,  // strides (2, 2 rows): must be copied
};

const char* layout_name(Layout layout) {
    switch (layout) {
        case Layout::contiguous: return "contiguous";
        case Layout::transposed: return "transposed";
        case Layout::row_gaps: return "row_gaps";
        case Layout::every_second: return "every_second";
        case Layout::transposed_every_second: return "transposed_every_second";
    }
    return "?";
}

const std::vector<Layout> kLayouts = {Layout::contiguous, Layout::transposed, Layout::row_gaps, Layout::every_second,
                                      Layout::transposed_every_second};

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
    batch.push_back(rows);
    batch.push_back(cols);
    return batch;
}

// A (batch..., rows, cols) view of values uniform in [-1, 1), laid out as asked.
Tensor make_operand(const Shape& batch, int64_t rows, int64_t cols, Layout layout, DType dtype, Generator& gen) {
    switch (layout) {
        case Layout::contiguous: return uniform(with_matrix(batch, rows, cols), -1, 1, gen, dtype);
        case Layout::transposed: return uniform(with_matrix(batch, cols, rows), -1, 1, gen, dtype).transpose(-1, -2);
        case Layout::row_gaps:
            return uniform(with_matrix(batch, rows, cols + 3), -1, 1, gen, dtype).slice(-1, 1, 1 + cols);
        case Layout::every_second:
            return uniform(with_matrix(batch, rows, 2 * cols), -1, 1, gen, dtype).slice(-1, 0, 2 * cols, 2);
        case Layout::transposed_every_second:
            return uniform(with_matrix(batch, cols, 2 * rows), -1, 1, gen, dtype)
                .slice(-1, 0, 2 * rows, 2)
                .transpose(-1, -2);
    }
    return {};
}

// Rounding of a k-term dot product of values in [-1, 1) grows with k: the
// tolerance is rtol * k (float32 1e-5, float64 1e-12) per unit of |a|·|b|.
double tolerance(DType dtype, int64_t k) {
    return (dtype == DType::float32 ? 1e-5 : 1e-12) * static_cast<double>(std::max<int64_t>(k, 1));
}

// Largest |got - want| over all elements; shapes must match.
double max_abs_error(const Tensor& got, const Tensor& want) {
    REQUIRE(got.shape() == want.shape());
    REQUIRE(got.dtype() == want.dtype());
    const std::vector<double> g = got.to_vector(), w = want.to_vector();
    double worst = 0.0;
    for (size_t i = 0; i < g.size(); ++i) {
        const double err = std::abs(g[i] - w[i]);
        worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
    }
    return worst;
}

const std::vector<DType> kFloatTypes = {DType::float32, DType::float64};

}  // namespace

// ---- matmul -----------------------------------------------------------------------------------

TEST_CASE("matmul(a, b): 2-D against the triple loop for odd sizes and every layout of both operands",
          "[core][matmul]") {
    const std::vector<int64_t> sizes = {1, 7, 33, 65};
    Generator gen(1);
    for (DType dtype : kFloatTypes)
        for (int64_t n : sizes)
            for (int64_t k : sizes)
                for (int64_t m : sizes)
                    for (Layout la : kLayouts)
                        for (Layout lb : kLayouts) {
                            const Tensor a = make_operand({}, n, k, la, dtype, gen);  // (n, k)
                            const Tensor b = make_operand({}, k, m, lb, dtype, gen);  // (k, m)
                            INFO(dtype_name(dtype) << " (" << n << "x" << k << ") " << layout_name(la) << " @ (" << k
                                                   << "x" << m << ") " << layout_name(lb));
                            REQUIRE(max_abs_error(matmul(a, b), reference::matmul(a, b)) <= tolerance(dtype, k));
                        }
}

TEST_CASE("matmul(a, b): batched, with broadcast, expanded and sliced batch dimensions", "[core][matmul]") {
    struct Case {
        const char* name;
        Tensor (*a)(Generator&, DType);
        Tensor (*b)(Generator&, DType);
        Shape expected;
    };
    const std::vector<Case> cases = {
        {"same batch",
         [](Generator& g, DType t) {
             return uniform({3, 7, 5}, -1, 1, g, t);
         },
         [](Generator& g, DType t) {
             return uniform({3, 5, 4}, -1, 1, g, t);
         },
         {3, 7, 4}},
        {"(B,1,n,k) @ (H,k,m) broadcasts to (B,H,n,m)",
         [](Generator& g, DType t) {
             return uniform({2, 1, 7, 5}, -1, 1, g, t);
         },
         [](Generator& g, DType t) {
             return uniform({3, 5, 4}, -1, 1, g, t);
         },
         {2, 3, 7, 4}},
        {"both sides broadcast",
         [](Generator& g, DType t) {
             return uniform({2, 1, 3, 4}, -1, 1, g, t);
         },
         [](Generator& g, DType t) {
             return uniform({1, 5, 4, 2}, -1, 1, g, t);
         },
         {2, 5, 3, 2}},
        {"2-D left, batched right",
         [](Generator& g, DType t) {
             return uniform({7, 8}, -1, 1, g, t);
         },
         [](Generator& g, DType t) {
             return uniform({4, 8, 3}, -1, 1, g, t);
         },
         {4, 7, 3}},
        {"batched left, 2-D right: one stacked GEMM",
         [](Generator& g, DType t) {
             return uniform({4, 7, 8}, -1, 1, g, t);
         },
         [](Generator& g, DType t) {
             return uniform({8, 3}, -1, 1, g, t);
         },
         {4, 7, 3}},
        {"decode step (B,1,k) @ (k,m)",
         [](Generator& g, DType t) {
             return uniform({5, 1, 8}, -1, 1, g, t);
         },
         [](Generator& g, DType t) {
             return uniform({8, 6}, -1, 1, g, t);
         },
         {5, 1, 6}},
        {"transposed batches @ 2-D",
         [](Generator& g, DType t) {
             return uniform({4, 8, 7}, -1, 1, g, t).transpose(1, 2);
         },
         [](Generator& g, DType t) {
             return uniform({8, 3}, -1, 1, g, t);
         },
         {4, 7, 3}},
        {"expanded left (stride-0 batch) @ 2-D",
         [](Generator& g, DType t) {
             return uniform({1, 7, 8}, -1, 1, g, t).expand({4, 7, 8});
         },
         [](Generator& g, DType t) {
             return uniform({8, 3}, -1, 1, g, t);
         },
         {4, 7, 3}},
        {"expanded right",
         [](Generator& g, DType t) {
             return uniform({4, 7, 8}, -1, 1, g, t);
         },
         [](Generator& g, DType t) {
             return uniform({8, 3}, -1, 1, g, t).expand({4, 8, 3});
         },
         {4, 7, 3}},
        {"every second batch (batch stride 2nk)",
         [](Generator& g, DType t) {
             return uniform({6, 7, 8}, -1, 1, g, t).slice(0, 0, 6, 2);
         },
         [](Generator& g, DType t) {
             return uniform({8, 3}, -1, 1, g, t);
         },
         {3, 7, 3}},
        {"batched every-second columns (copied)",
         [](Generator& g, DType t) {
             return uniform({2, 3, 7, 10}, -1, 1, g, t).slice(-1, 0, 10, 2);
         },
         [](Generator& g, DType t) {
             return uniform({3, 4, 5}, -1, 1, g, t).transpose(-1, -2);
         },
         {2, 3, 7, 4}},
        {"attention scores Q @ Kᵀ: 256 heads of (10x8) @ (8x10)",
         [](Generator& g, DType t) {
             return uniform({32, 8, 10, 8}, -1, 1, g, t);
         },
         [](Generator& g, DType t) {
             return uniform({32, 8, 10, 8}, -1, 1, g, t).transpose(-1, -2);
         },
         {32, 8, 10, 10}},
        {"permuted heads (B,T,H,d) -> (B,H,T,d)",
         [](Generator& g, DType t) {
             return uniform({4, 10, 3, 8}, -1, 1, g, t).permute({0, 2, 1, 3});
         },
         [](Generator& g, DType t) {
             return uniform({4, 10, 3, 8}, -1, 1, g, t).permute({0, 2, 3, 1});
         },
         {4, 3, 10, 10}},
    };
    Generator gen(2);
    for (DType dtype : kFloatTypes)
        for (const Case& c : cases) {
            const Tensor a = c.a(gen, dtype), b = c.b(gen, dtype);
            INFO(c.name << ", " << dtype_name(dtype) << ": " << shape_str(a.shape()) << " @ " << shape_str(b.shape()));
            const Tensor got = matmul(a, b);
            CHECK(got.shape() == c.expected);
            CHECK(max_abs_error(got, reference::matmul(a, b)) <= tolerance(dtype, a.size(-1)));
        }
}

TEST_CASE("matmul(a, b): batches spread over threads agree with one thread and the oracle", "[core][matmul]") {
    // on 2 threads: 24 mid-sized products run as a parallel batch loop; 256
    // tiny ones stay serial; 3 large ones leave the threading to BLAS (3 does
    // not split evenly over 2)
    struct Case {
        Shape a, b;
    };
    const std::vector<Case> cases = {
        {{4, 6, 50, 64}, {4, 6, 64, 50}}, {{32, 8, 10, 8}, {32, 8, 8, 10}}, {{3, 80, 70}, {3, 70, 90}}};
    const int saved = get_num_threads();
    Generator gen(5);
    for (const Case& c : cases) {
        const Tensor a = uniform(c.a, -1, 1, gen), b = uniform(c.b, -1, 1, gen);
        set_num_threads(1);
        const Tensor one = matmul(a, b);
        set_num_threads(2);
        const Tensor two = matmul(a, b);
        set_num_threads(saved);
        INFO(shape_str(c.a) << " @ " << shape_str(c.b));
        CHECK(max_abs_error(two, reference::matmul(a, b)) <= tolerance(DType::float32, a.size(-1)));
        CHECK(max_abs_error(two, one) <= tolerance(DType::float32, a.size(-1)));
    }
}

TEST_CASE("matmul(a, b): 1-D operands are a row on the left, a column on the right, and dropped", "[core][matmul]") {
    struct Case {
        Shape a, b, expected;
    };
    const std::vector<Case> cases = {
        {{5}, {5}, {}},            // dot product
        {{5}, {5, 3}, {3}},        // row vector @ matrix
        {{4, 5}, {5}, {4}},        // matrix @ column vector
        {{5}, {2, 5, 3}, {2, 3}},  // vector @ batch
        {{2, 4, 5}, {5}, {2, 4}},  // batch @ vector
        {{1}, {1, 33}, {33}},      // k = 1
    };
    Generator gen(3);
    for (DType dtype : kFloatTypes)
        for (const Case& c : cases) {
            const Tensor a = uniform(c.a, -1, 1, gen, dtype), b = uniform(c.b, -1, 1, gen, dtype);
            INFO(shape_str(c.a) << " @ " << shape_str(c.b) << " " << dtype_name(dtype));
            const Tensor got = matmul(a, b);
            CHECK(got.shape() == c.expected);
            CHECK(max_abs_error(got, reference::matmul(a, b)) <= tolerance(dtype, a.size(-1)));
        }
    // hand-worked: [1 2 3]·[4 5 6] = 32, and a sliced (stride 2) vector
    CHECK(matmul(tensor({1, 2, 3}, {3}), tensor({4, 5, 6}, {3})).item() == 32.0);
    const Tensor strided = tensor({1, 0, 2, 0, 3, 0}, {6}).slice(0, 0, 6, 2);  // [1 2 3]
    CHECK(matmul(strided, tensor({1, 0, 0, 1, 1, 1}, {3, 2})).to_vector() == std::vector<double>{4, 5});
}

TEST_CASE("matmul(a, b): hand-worked 2x2 products and a transposed view", "[core][matmul]") {
    const Tensor a = tensor({1, 2, 3, 4}, {2, 2}, DType::float64);
    const Tensor b = tensor({5, 6, 7, 8}, {2, 2}, DType::float64);
    CHECK(matmul(a, b).to_vector() == std::vector<double>{19, 22, 43, 50});
    CHECK(matmul(a.transpose(0, 1), b).to_vector() == std::vector<double>{26, 30, 38, 44});
    CHECK(matmul(a, b.transpose(0, 1)).to_vector() == std::vector<double>{17, 23, 39, 53});
    // results are fresh tensors, never views of an input
    CHECK_FALSE(matmul(a, eye(2, DType::float64)).shares_storage(a));
}

TEST_CASE("matmul(a, b): empty dimensions give zeros or empty results", "[core][matmul]") {
    struct Case {
        Shape a, b, expected;
    };
    const std::vector<Case> cases = {
        {{3, 0}, {0, 4}, {3, 4}},        // k = 0: every entry is an empty sum
        {{2, 3, 0}, {0, 4}, {2, 3, 4}},  // batched k = 0
        {{0}, {0}, {}},                  // empty dot product
        {{0, 5}, {5, 4}, {0, 4}},        // no rows
        {{3, 5}, {5, 0}, {3, 0}},        // no columns
        {{0, 3, 5}, {5, 4}, {0, 3, 4}},  // no batches
    };
    for (DType dtype : kFloatTypes)
        for (const Case& c : cases) {
            INFO(shape_str(c.a) << " @ " << shape_str(c.b));
            const Tensor got = matmul(ones(c.a, dtype), ones(c.b, dtype));
            CHECK(got.shape() == c.expected);
            CHECK(got.dtype() == dtype);
            for (double v : got.to_vector()) CHECK(v == 0.0);
        }
}

TEST_CASE("matmul(a, b): bad shapes and dtypes throw errors naming the shapes", "[core][matmul]") {
    const Tensor f32 = zeros({2, 3});
    CHECK_THROWS_AS(matmul(zeros({2, 3}), zeros({4, 5})), ShapeError);
    CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({4, 5})), "matmul: shapes (2x3) and (4x5) cannot be multiplied");
    CHECK_THROWS_WITH(matmul(zeros({3}), zeros({4})), "matmul: shapes (3) and (4) cannot be multiplied");
    CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({2})), "matmul: shapes (2x3) and (2) cannot be multiplied");
    CHECK_THROWS_AS(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), ShapeError);
    CHECK_THROWS_WITH(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})),
                      "matmul: shapes (2x3x4) and (3x4x5) cannot be multiplied: batch dimensions (2) and (3) do not "
                      "broadcast");
    CHECK_THROWS_AS(matmul(scalar(2.0), zeros({3})), ShapeError);
    CHECK_THROWS_WITH(matmul(scalar(2.0), zeros({3})),
                      "matmul: shapes () and (3) cannot be multiplied: a 0-d operand has no matrix dimension");
    CHECK_THROWS_AS(matmul(f32, zeros({3, 2}, DType::float64)), ValueError);
    CHECK_THROWS_WITH(matmul(f32, zeros({3, 2}, DType::float64)),
                      "matmul: dtype mismatch, a is float32 and b is float64");
    CHECK_THROWS_AS(matmul(zeros({2, 3}, DType::int64), zeros({3, 2}, DType::int64)), ValueError);
    CHECK_THROWS_WITH(matmul(zeros({2, 3}, DType::int64), zeros({3, 2}, DType::int64)),
                      "matmul: expected a floating dtype (float32 or float64), got int64");
    CHECK_THROWS_WITH(matmul(Tensor(), f32), "matmul: a is undefined");
}

// ---- linear -----------------------------------------------------------------------------------------

TEST_CASE("linear(x, weight, bias): equals x @ weightᵀ plus bias added by hand, with and without bias",
          "[core][matmul][linear]") {
    struct Case {
        const char* name;
        Shape x;            // (..., in)
        bool x_transposed;  // x made as (in, rows) and transposed (2-D only)
        int64_t out;
        Layout weight;
        bool has_bias;
        bool strided_bias;
    };
    const std::vector<Case> cases = {
        {"2-D, bias", {5, 7}, false, 4, Layout::contiguous, true, false},
        {"2-D, no bias", {5, 7}, false, 4, Layout::contiguous, false, false},
        {"3-D activations (B, T, D)", {2, 3, 7}, false, 33, Layout::contiguous, true, false},
        {"1-D input", {7}, false, 4, Layout::contiguous, true, false},
        {"transposed input", {5, 7}, true, 4, Layout::contiguous, true, false},
        {"transposed weight (stored in x out)", {6, 7}, false, 4, Layout::transposed, true, false},
        {"weight with row gaps", {6, 7}, false, 4, Layout::row_gaps, false, false},
        {"every second weight column (copied)", {6, 7}, false, 4, Layout::every_second, true, false},
        {"strided bias", {3, 65}, false, 33, Layout::contiguous, true, true},
        {"no input features: y = bias", {3, 0}, false, 4, Layout::contiguous, true, false},
        {"no input features, no bias: y = 0", {3, 0}, false, 4, Layout::contiguous, false, false},
        {"no rows", {0, 7}, false, 4, Layout::contiguous, true, false},
    };
    Generator gen(4);
    for (DType dtype : kFloatTypes)
        for (const Case& c : cases) {
            INFO(c.name << " " << dtype_name(dtype));
            const int64_t in = c.x.back();
            Tensor x = uniform(c.x, -1, 1, gen, dtype);
            if (c.x_transposed) x = uniform({c.x[1], c.x[0]}, -1, 1, gen, dtype).transpose(0, 1);
            const Tensor weight = make_operand({}, c.out, in, c.weight, dtype, gen);  // (out, in)
            Tensor bias;
            if (c.has_bias)
                bias = c.strided_bias ? uniform({2 * c.out}, -1, 1, gen, dtype).slice(0, 0, 2 * c.out, 2)
                                      : uniform({c.out}, -1, 1, gen, dtype);

            const Tensor got = linear(x, weight, bias);
            // the oracle: the triple loop for x @ Wᵀ, then the bias added row by row
            std::vector<double> want = reference::matmul(x, weight.transpose(0, 1)).to_vector();
            if (c.has_bias) {
                const std::vector<double> b = bias.to_vector();
                for (size_t i = 0; i < want.size(); ++i) want[i] += b[i % b.size()];
            }
            Shape expected = c.x;
            expected[expected.size() - 1] = c.out;
            REQUIRE(got.shape() == expected);
            const std::vector<double> g = got.to_vector();
            double worst = 0.0;
            for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - want[i]));
            CHECK(worst <= tolerance(dtype, in + 1));
        }
    // hand-worked: [1 2] @ [[1 0], [1 1], [0 2]]ᵀ + [10 20 30] = [11 23 34]
    CHECK(linear(tensor({1, 2}, {1, 2}), tensor({1, 0, 1, 1, 0, 2}, {3, 2}), tensor({10, 20, 30}, {3})).to_vector() ==
          std::vector<double>{11, 23, 34});
}

TEST_CASE("linear(x, weight, bias): bad shapes and dtypes throw errors naming the shapes", "[core][matmul][linear]") {
    const Tensor x = zeros({2, 3}), w = zeros({4, 3}), b = zeros({4});
    CHECK_THROWS_AS(linear(zeros({2, 5}), w, b), ShapeError);
    CHECK_THROWS_WITH(linear(zeros({2, 5}), w, b),
                      "linear: input of shape (2x5) does not fit weight of shape (4x3): expected last dimension 3");
    CHECK_THROWS_WITH(linear(scalar(1.0), w, b),
                      "linear: input of shape () does not fit weight of shape (4x3): expected last dimension 3");
    CHECK_THROWS_WITH(linear(x, w, zeros({3})),
                      "linear: bias of shape (3) does not fit weight of shape (4x3): expected (4)");
    CHECK_THROWS_WITH(linear(x, zeros({4, 3, 1}), b),
                      "linear: weight must be 2-D (out_features x in_features), got shape (4x3x1)");
    CHECK_THROWS_AS(linear(x, w, zeros({4}, DType::float64)), ValueError);
    CHECK_THROWS_WITH(linear(x, w, zeros({4}, DType::float64)),
                      "linear: dtype mismatch, bias is float64 and weight is float32");
    CHECK_THROWS_WITH(linear(x.to(DType::float64), w, b),
                      "linear: dtype mismatch, input is float64 and weight is float32");
    CHECK_THROWS_WITH(linear(x, Tensor(), b), "linear: weight is undefined");
}

// ---- blas ---------------------------------------------------------------------------------------------

TEST_CASE("blas::gemm(...): beta = 0 overwrites C, beta = 1 accumulates, bad leading dimensions throw",
          "[core][matmul][blas]") {
    const std::vector<double> a = {1, 2, 3, 4};  // (2x2) row-major
    const std::vector<double> b = {5, 6, 7, 8};
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> c = {nan, nan, nan, nan};
    blas::gemm(false, false, 2, 2, 2, 1.0, a.data(), 2, b.data(), 2, 0.0, c.data(), 2);
    CHECK(c == std::vector<double>{19, 22, 43, 50});
    blas::gemm(true, false, 2, 2, 2, 1.0, a.data(), 2, b.data(), 2, 1.0, c.data(), 2);  // += aᵀ b
    CHECK(c == std::vector<double>{19 + 26, 22 + 30, 43 + 38, 50 + 44});

    std::vector<float> cf = {0, 0, 0, 0};
    const std::vector<float> af = {1, 2, 3, 4}, bf = {5, 6, 7, 8};
    blas::gemm(false, true, 2, 2, 2, 2.0f, af.data(), 2, bf.data(), 2, 0.0f, cf.data(), 2);  // 2 a bᵀ
    CHECK(cf == std::vector<float>{34, 46, 78, 106});

    CHECK_THROWS_AS(blas::gemm(false, false, 2, 2, 2, 1.0, a.data(), 1, b.data(), 2, 0.0, c.data(), 2), ValueError);
    CHECK_THROWS_WITH(blas::gemm(false, false, 2, 2, 2, 1.0, a.data(), 1, b.data(), 2, 0.0, c.data(), 2),
                      "blas::gemm: leading dimension 1 of A is smaller than its row length 2");
    CHECK_THROWS_WITH(blas::gemm(false, false, int64_t{1} << 33, 2, 2, 1.0, a.data(), 2, b.data(), 2, 0.0, c.data(), 2),
                      "blas::gemm: m = 8589934592 is outside the range of 32-bit BLAS integers");
    CHECK_FALSE(blas::core_name().empty());
    CHECK_FALSE(blas::config().empty());
}

TEST_CASE("blas::gemm(...): products split over 2 threads equal one thread's and the oracle", "[core][matmul][blas]") {
    // large enough to be split (at least 64³ multiply-adds): C cut by rows
    // when m >= n, by columns otherwise, with every transpose, leading
    // dimensions wider than the rows, and beta 0 and 1
    struct Case {
        int64_t m, n, k;
    };
    const std::vector<Case> cases = {{333, 200, 77}, {70, 1000, 90}, {1140, 128, 128}, {40, 40, 2000}, {640, 64, 32}};
    const int saved = get_num_threads();
    Generator gen(9);
    for (const Case& c : cases)
        for (int trans = 0; trans < 4; ++trans)
            for (double beta : {0.0, 1.0}) {
                const bool ta = (trans & 1) != 0, tb = (trans & 2) != 0;
                // stored A is (m, k) or, transposed, (k, m); 3 columns of padding on every row
                const int64_t a_rows = ta ? c.k : c.m, a_cols = ta ? c.m : c.k;
                const int64_t b_rows = tb ? c.n : c.k, b_cols = tb ? c.k : c.n;
                const Tensor a = uniform({a_rows, a_cols + 3}, -1, 1, gen),
                             b = uniform({b_rows, b_cols + 3}, -1, 1, gen);
                const Tensor c0 = uniform({c.m, c.n + 3}, -1, 1, gen);
                const auto run = [&](int threads) {
                    set_num_threads(threads);
                    Tensor out = c0.clone();
                    blas::gemm(ta, tb, c.m, c.n, c.k, 1.0f, a.data<float>(), a_cols + 3, b.data<float>(), b_cols + 3,
                               static_cast<float>(beta), out.data<float>(), c.n + 3);
                    set_num_threads(saved);
                    return out;
                };
                const Tensor one = run(1), two = run(2);
                // the oracle: op(A) @ op(B) + beta C on the unpadded views
                const Tensor opa = ta ? a.slice(1, 0, a_cols).transpose(0, 1) : a.slice(1, 0, a_cols);
                const Tensor opb = tb ? b.slice(1, 0, b_cols).transpose(0, 1) : b.slice(1, 0, b_cols);
                Tensor want = reference::matmul(opa, opb);
                if (beta == 1.0) want = add(want, c0.slice(1, 0, c.n));
                INFO(c.m << "x" << c.n << "x" << c.k << " trans_a " << ta << " trans_b " << tb << " beta " << beta);
                CHECK(max_abs_error(two.slice(1, 0, c.n), want) <= tolerance(DType::float32, c.k) + 1e-6);
                CHECK(max_abs_error(two.slice(1, 0, c.n), one.slice(1, 0, c.n)) <= tolerance(DType::float32, c.k));
                // the padding columns of C are never written
                CHECK(max_abs_error(two.slice(1, c.n, c.n + 3), c0.slice(1, c.n, c.n + 3)) == 0.0);
            }
}

TEST_CASE(
    "blas::gemm(...): the float products libxsmm runs are close to the oracle, and a row's bits do not depend on "
    "how many rows the product has or how many threads run it",
    "[core][matmul][blas]") {
    // n of 32 or more and a small right operand: libxsmm's shapes (core/blas.cpp), unless
    // libxsmm is off (TFORMER_LIBXSMM=0, or OpenBLAS's kernels as wide as its own): then OpenBLAS
    // runs them, still against the oracle, but its rows' bits do depend on the row count and the
    // thread count, so the bit-for-bit checks are libxsmm's only
    CHECK_FALSE(blas::xsmm_target().empty());
    const bool xsmm = blas::xsmm_target() != "off";
    if (!xsmm) WARN("libxsmm is off here: the bit-for-bit row and thread checks are skipped");
    const int saved = get_num_threads();
    Generator gen(11);
    const int64_t m = 200;
    for (int64_t n : {32, 41, 64, 96, 201, 256})
        for (int64_t k : {8, 32, 100})
            for (int trans = 0; trans < 3; ++trans)  // A B, A Bᵀ, Aᵀ B
                for (double beta : {0.0, 1.0}) {
                    const bool ta = trans == 2, tb = trans == 1;
                    const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
                    const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
                    const Tensor a = uniform({a_rows, a_cols + 3}, -1, 1, gen),
                                 b = uniform({b_rows, b_cols + 3}, -1, 1, gen);
                    const Tensor c0 = uniform({m, n + 5}, -1, 1, gen);
                    // rows [r0, r0 + rows) of C = op(A) op(B) + beta C, alone, on `threads` threads
                    const auto run = [&](int64_t r0, int64_t rows, int threads) {
                        set_num_threads(threads);
                        Tensor out = c0.slice(0, r0, r0 + rows).clone();
                        const float* a_rows_at = ta ? a.data<float>() + r0 : a.data<float>() + r0 * (a_cols + 3);
                        blas::gemm(ta, tb, rows, n, k, 1.0f, a_rows_at, a_cols + 3, b.data<float>(), b_cols + 3,
                                   static_cast<float>(beta), out.data<float>(), n + 5);
                        set_num_threads(saved);
                        return out;
                    };
                    const Tensor all = run(0, m, 1);
                    const Tensor opa = ta ? a.slice(1, 0, a_cols).transpose(0, 1) : a.slice(1, 0, a_cols);
                    const Tensor opb = tb ? b.slice(1, 0, b_cols).transpose(0, 1) : b.slice(1, 0, b_cols);
                    Tensor want = reference::matmul(opa, opb);
                    if (beta == 1.0) want = add(want, c0.slice(1, 0, n));
                    INFO(m << "x" << n << "x" << k << " trans_a " << ta << " trans_b " << tb << " beta " << beta);
                    CHECK(max_abs_error(all.slice(1, 0, n), want) <= tolerance(DType::float32, k) + 1e-6);
                    CHECK(max_abs_error(all.slice(1, n, n + 5), c0.slice(1, n, n + 5)) == 0.0);  // padding untouched
                    if (!xsmm) continue;
                    CHECK(max_abs_error(run(0, m, 2), all) == 0.0);
                    for (auto [r0, rows] : {std::pair<int64_t, int64_t>{0, 1}, {7, 3}, {64, 64}, {100, 65}, {199, 1}}) {
                        INFO("rows " << r0 << " to " << r0 + rows);
                        CHECK(max_abs_error(run(r0, rows, 1), all.slice(0, r0, r0 + rows)) == 0.0);
                    }
                }
}

TEST_CASE(
    "blas::gemm_bias_rows(...): the bias given to each tile before its kernel gives the bits of filling C with the "
    "bias and a beta-1 gemm, on 1 and 2 threads, linear(x, W, b) uses it",
    "[core][matmul][blas]") {
    const bool xsmm = blas::xsmm_target() != "off";
    const int saved = get_num_threads();
    Generator gen(23);
    for (int64_t m : {1, 63, 200})
        for (int64_t n : {32, 41, 201, 300})  // one tile column, a last part of fewer than 32, several blocks
            for (bool tb : {false, true})
                for (int threads : {1, 2}) {
                    set_num_threads(threads);
                    const int64_t k = 24;
                    const Tensor a = uniform({m, k}, -1, 1, gen);
                    const Tensor b = tb ? uniform({n, k}, -1, 1, gen) : uniform({k, n}, -1, 1, gen);
                    const Tensor bias = uniform({n}, -1, 1, gen);
                    Tensor fused = full({m, n + 3}, 7.0);  // 3 padding columns stay 7
                    const bool ran = blas::gemm_bias_rows(false, tb, m, n, k, a.data<float>(), k, b.data<float>(),
                                                          tb ? k : n, bias.data<float>(), fused.data<float>(), n + 3);
                    INFO(m << "x" << n << "x" << k << " trans_b " << tb << " threads " << threads);
                    CHECK(ran == xsmm);  // these shapes are libxsmm's; with it off nothing runs
                    if (!ran) {
                        CHECK(max_abs_error(fused, full({m, n + 3}, 7.0)) == 0.0);  // nothing written
                        continue;
                    }
                    Tensor filled = full({m, n + 3}, 7.0);
                    for (int64_t r = 0; r < m; ++r)
                        std::copy_n(bias.data<float>(), n, filled.data<float>() + r * (n + 3));
                    blas::gemm(false, tb, m, n, k, 1.0f, a.data<float>(), k, b.data<float>(), tb ? k : n, 1.0f,
                               filled.data<float>(), n + 3);
                    CHECK(max_abs_error(fused, filled) == 0.0);
                    // and linear(x, W, b) with W (n, k): the same bits
                    if (tb) CHECK(max_abs_error(linear(a, b, bias), filled.slice(1, 0, n)) == 0.0);
                }
    set_num_threads(saved);
}
