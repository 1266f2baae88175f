// Row-wise kernels (core/rowwise.hpp): softmax and log-softmax, the masked
// softmaxes of attention (seed 003), layer norm (seed 000) and per-row
// cross-entropy.
//
// One table of kernels feeds three checks: every fast kernel against its
// plain-loop oracle over a table of shapes in float32 and float64, 1 thread
// against 2 threads on a large input, and (for the backwards) central finite
// differences in float64. Hand-computed numbers and error messages follow.
#include "core/elementwise.hpp"
#include "core/parallel.hpp"
#include "core/reduce.hpp"
#include "core/rowwise.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::core;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kIgnore = -100;  // PyTorch's default ignore_index

// ---- inputs ------------------------------------------------------------------------------

// A shape to test, and whether x should be a non-contiguous view of it.
struct ShapeCase {
    Shape shape;
    bool transposed = false;  // x is the (..., L, K) transpose of a (..., K, L) tensor
};

const std::vector<ShapeCase> kShapes = {
    {.shape = {1, 1}},       {.shape = {3, 1}},     {.shape = {5}},
    {.shape = {4, 9}},       {.shape = {2, 7, 33}}, {.shape = {2, 7, 33}, .transposed = true},
    {.shape = {3, 2, 4, 5}}, {.shape = {0, 4}},
};

std::string describe(const ShapeCase& c, DType dtype) {
    return shape_str(c.shape) + (c.transposed ? " transposed " : " ") + std::string(dtype_name(dtype));
}

Shape leading(const Shape& shape) {
    Shape lead = shape;
    lead.erase(lead.size() - 1);
    return lead;
}

// x of the case's shape, uniform in [-3, 3).
Tensor make_x(const ShapeCase& c, DType dtype, Generator& gen) {
    if (!c.transposed) return uniform(c.shape, -3, 3, gen, dtype);
    Shape stored = c.shape;
    std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
    Tensor x = uniform(stored, -3, 3, gen, dtype).transpose(-1, -2);
    REQUIRE_FALSE(x.is_contiguous());
    return x;
}

// Everything a kernel needs besides x, drawn once per input so that the fast
// kernel and its oracle see the same numbers.
struct Extras {
    Tensor dy;          // (..., L) upstream gradient of a row-shaped output
    Tensor lens_row;    // (...)   valid length per row, 0 to L
    Tensor lens_batch;  // (B)     valid length per batch element (x.dim() >= 2)
    Tensor keep;        // x.shape with dim -2 set to 1: a pad-style mask
    Tensor weight;      // (L)
    Tensor bias;        // (L)
    Tensor targets;     // (R) int64, every third row ignored
    Tensor grad_rows;   // (R) upstream gradient of per-row losses
    int64_t rows = 0;   // R
};

Extras make_extras(const Tensor& x, Generator& gen) {
    const Shape lead = leading(x.shape());
    const int64_t L = x.shape().back();
    Extras e;
    e.rows = shape_numel(lead);
    e.dy = uniform(x.shape(), -1, 1, gen, x.dtype());
    e.lens_row = randint(lead, 0, L + 1, gen);
    if (x.dim() >= 2) e.lens_batch = randint({x.shape()[0]}, 0, L + 1, gen);
    Shape keep_shape = x.shape();
    if (x.dim() >= 2) keep_shape[keep_shape.size() - 2] = 1;
    e.keep = bernoulli(keep_shape, 0.7, gen, DType::boolean);
    e.weight = uniform({L}, 0.5, 1.5, gen, x.dtype());
    e.bias = uniform({L}, -1, 1, gen, x.dtype());
    e.targets = randint({e.rows}, 0, L, gen);
    for (int64_t n = 0; n < e.rows; n += 3) e.targets.set({n}, static_cast<double>(kIgnore));
    e.grad_rows = uniform({e.rows}, -1, 1, gen, x.dtype());
    return e;
}

// x as the (R, L) logits of cross-entropy.
Tensor as_logits(const Tensor& x, const Extras& e) { return x.reshape({e.rows, x.shape().back()}); }

// ---- comparisons ---------------------------------------------------------------------------

// got ≈ want elementwise, |got - want| ≤ tol (1 + |want|); equal infinities match.
void check_close(const Tensor& got, const Tensor& want, double tol) {
    REQUIRE(got.defined() == want.defined());
    if (!want.defined()) return;
    REQUIRE(shape_str(got.shape()) == shape_str(want.shape()));
    REQUIRE(got.dtype() == want.dtype());
    CHECK(got.is_contiguous());
    const std::vector<double> g = got.to_vector(), w = want.to_vector();
    double worst = 0;
    size_t worst_at = 0;
    for (size_t i = 0; i < g.size(); ++i) {
        const double err = g[i] == w[i] ? 0.0 : std::abs(g[i] - w[i]) / (1 + std::abs(w[i]));
        if (!(err <= worst)) {  // also catches NaN
            worst = err;
            worst_at = i;
        }
    }
    INFO("worst element " << worst_at << ": got " << (g.empty() ? 0 : g[worst_at]) << ", want "
                          << (w.empty() ? 0 : w[worst_at]));
    CHECK(worst <= tol);
}

double tolerance(DType dtype) { return dtype == DType::float32 ? 2e-6 : 1e-12; }

// Σ a ⊙ b over all elements.
double dot(const Tensor& a, const Tensor& b) {
    const std::vector<double> av = a.to_vector(), bv = b.to_vector();
    REQUIRE(av.size() == bv.size());
    double s = 0;
    for (size_t i = 0; i < av.size(); ++i) s += av[i] * bv[i];
    return s;
}

// ---- the kernel table -----------------------------------------------------------------------

using Outputs = std::vector<Tensor>;
using KernelFn = std::function<Outputs(const Tensor& x, const Extras& e)>;

struct KernelCase {
    const char* name;
    KernelFn fast;
    KernelFn oracle;
    int min_dim = 1;  // per-batch valid lengths need a batch dim
};

LayerNormOut fast_ln(const Tensor& x, const Extras& e) { return layer_norm(x, e.weight, e.bias, 1e-5); }

const std::vector<KernelCase>& kernel_table() {
    static const std::vector<KernelCase> table = {
        {"softmax", [](auto& x, auto&) { return Outputs{softmax(x)}; },
         [](auto& x, auto&) { return Outputs{reference::softmax(x)}; }},
        {"log_softmax", [](auto& x, auto&) { return Outputs{log_softmax(x)}; },
         [](auto& x, auto&) { return Outputs{reference::log_softmax(x)}; }},
        {"softmax_backward", [](auto& x, auto& e) { return Outputs{softmax_backward(e.dy, softmax(x))}; },
         [](auto& x, auto& e) { return Outputs{reference::softmax_backward(e.dy, softmax(x))}; }},
        {"log_softmax_backward", [](auto& x, auto& e) { return Outputs{log_softmax_backward(e.dy, log_softmax(x))}; },
         [](auto& x, auto& e) { return Outputs{reference::log_softmax_backward(e.dy, log_softmax(x))}; }},
        {"masked_softmax per row", [](auto& x, auto& e) { return Outputs{masked_softmax(x, e.lens_row)}; },
         [](auto& x, auto& e) { return Outputs{reference::masked_softmax(x, e.lens_row)}; }},
        {"masked_softmax per batch", [](auto& x, auto& e) { return Outputs{masked_softmax(x, e.lens_batch)}; },
         [](auto& x, auto& e) { return Outputs{reference::masked_softmax(x, e.lens_batch)}; }, 2},
        {"masked_softmax_by_mask", [](auto& x, auto& e) { return Outputs{masked_softmax_by_mask(x, e.keep)}; },
         [](auto& x, auto& e) { return Outputs{reference::masked_softmax_by_mask(x, e.keep)}; }},
        {"layer_norm affine",
         [](auto& x, auto& e) {
             auto o = fast_ln(x, e);
             return Outputs{o.y, o.mean, o.rstd};
         },
         [](auto& x, auto& e) {
             auto o = reference::layer_norm(x, e.weight, e.bias, 1e-5);
             return Outputs{o.y, o.mean, o.rstd};
         }},
        {"layer_norm plain",
         [](auto& x, auto&) {
             auto o = layer_norm(x, Tensor(), Tensor(), 1e-5);
             return Outputs{o.y, o.mean, o.rstd};
         },
         [](auto& x, auto&) {
             auto o = reference::layer_norm(x, Tensor(), Tensor(), 1e-5);
             return Outputs{o.y, o.mean, o.rstd};
         }},
        {"layer_norm_backward affine",
         [](auto& x, auto& e) {
             auto f = fast_ln(x, e);
             auto g = layer_norm_backward(e.dy, x, f.mean, f.rstd, e.weight, true);
             return Outputs{g.dx, g.dweight, g.dbias};
         },
         [](auto& x, auto& e) {
             auto f = fast_ln(x, e);
             auto g = reference::layer_norm_backward(e.dy, x, f.mean, f.rstd, e.weight, true);
             return Outputs{g.dx, g.dweight, g.dbias};
         }},
        {"layer_norm_backward plain",
         [](auto& x, auto& e) {
             auto f = layer_norm(x, Tensor(), Tensor(), 1e-5);
             auto g = layer_norm_backward(e.dy, x, f.mean, f.rstd, Tensor(), false);
             return Outputs{g.dx, g.dweight, g.dbias};
         },
         [](auto& x, auto& e) {
             auto f = layer_norm(x, Tensor(), Tensor(), 1e-5);
             auto g = reference::layer_norm_backward(e.dy, x, f.mean, f.rstd, Tensor(), false);
             return Outputs{g.dx, g.dweight, g.dbias};
         }},
        {"cross_entropy_rows",
         [](auto& x, auto& e) { return Outputs{cross_entropy_rows(as_logits(x, e), e.targets, 0.0, kIgnore)}; },
         [](auto& x, auto& e) {
             return Outputs{reference::cross_entropy_rows(as_logits(x, e), e.targets, 0.0, kIgnore)};
         }},
        {"cross_entropy_rows smoothed",
         [](auto& x, auto& e) { return Outputs{cross_entropy_rows(as_logits(x, e), e.targets, 0.1, kIgnore)}; },
         [](auto& x, auto& e) {
             return Outputs{reference::cross_entropy_rows(as_logits(x, e), e.targets, 0.1, kIgnore)};
         }},
        {"cross_entropy_rows_backward smoothed",
         [](auto& x, auto& e) {
             return Outputs{cross_entropy_rows_backward(e.grad_rows, as_logits(x, e), e.targets, 0.1, kIgnore)};
         },
         [](auto& x, auto& e) {
             return Outputs{
                 reference::cross_entropy_rows_backward(e.grad_rows, as_logits(x, e), e.targets, 0.1, kIgnore)};
         }},
    };
    return table;
}

// ---- finite differences -----------------------------------------------------------------------

// ∂loss/∂inputs[which], by central differences: perturb one element at a time
// by ±h and difference the two losses. With loss = Σ dy ⊙ f(x) this is the
// vector-Jacobian product dyᵀ J that a backward kernel must return.
Tensor numeric_gradient(const std::function<double(const std::vector<Tensor>&)>& loss, std::vector<Tensor> inputs,
                        size_t which, double h = 1e-6) {
    Tensor x = inputs[which].clone();  // float64, contiguous, ours to perturb
    inputs[which] = x;
    Tensor grad = zeros(x.shape(), DType::float64);
    double* xp = x.data<double>();
    double* gp = grad.data<double>();
    for (int64_t k = 0; k < x.numel(); ++k) {
        const double original = xp[k];
        xp[k] = original + h;
        const double up = loss(inputs);
        xp[k] = original - h;
        const double down = loss(inputs);
        xp[k] = original;
        gp[k] = (up - down) / (2 * h);
    }
    return grad;
}

using Inputs = std::vector<Tensor>;

struct GradCase {
    const char* name;
    std::function<Inputs(const Tensor& x, const Extras& e)> inputs;   // what is differentiated
    std::function<double(const Inputs& in, const Extras& e)> loss;    // Σ dy ⊙ f(inputs)
    std::function<Outputs(const Inputs& in, const Extras& e)> grads;  // the backward kernel, one per input
    int min_dim = 1;
};

const std::vector<GradCase>& grad_table() {
    static const auto just_x = [](const Tensor& x, const Extras&) { return Inputs{x}; };
    static const auto logits = [](const Tensor& x, const Extras& e) { return Inputs{as_logits(x, e)}; };
    static const std::vector<GradCase> table = {
        {"softmax", just_x, [](auto& in, auto& e) { return dot(e.dy, softmax(in[0])); },
         [](auto& in, auto& e) { return Outputs{softmax_backward(e.dy, softmax(in[0]))}; }},
        {"log_softmax", just_x, [](auto& in, auto& e) { return dot(e.dy, log_softmax(in[0])); },
         [](auto& in, auto& e) { return Outputs{log_softmax_backward(e.dy, log_softmax(in[0]))}; }},
        // the masked softmaxes are differentiated by softmax_backward of their output
        {"masked_softmax per row", just_x,
         [](auto& in, auto& e) { return dot(e.dy, masked_softmax(in[0], e.lens_row)); },
         [](auto& in, auto& e) { return Outputs{softmax_backward(e.dy, masked_softmax(in[0], e.lens_row))}; }},
        {"masked_softmax per batch", just_x,
         [](auto& in, auto& e) { return dot(e.dy, masked_softmax(in[0], e.lens_batch)); },
         [](auto& in, auto& e) { return Outputs{softmax_backward(e.dy, masked_softmax(in[0], e.lens_batch))}; }, 2},
        {"masked_softmax_by_mask", just_x,
         [](auto& in, auto& e) { return dot(e.dy, masked_softmax_by_mask(in[0], e.keep)); },
         [](auto& in, auto& e) { return Outputs{softmax_backward(e.dy, masked_softmax_by_mask(in[0], e.keep))}; }},
        {"layer_norm affine",
         [](auto& x, auto& e) {
             return Inputs{x, e.weight, e.bias};
         },
         [](auto& in, auto& e) { return dot(e.dy, layer_norm(in[0], in[1], in[2], 1e-5).y); },
         [](auto& in, auto& e) {
             auto f = layer_norm(in[0], in[1], in[2], 1e-5);
             auto g = layer_norm_backward(e.dy, in[0], f.mean, f.rstd, in[1], true);
             return Outputs{g.dx, g.dweight, g.dbias};
         }},
        {"layer_norm plain", just_x,
         [](auto& in, auto& e) { return dot(e.dy, layer_norm(in[0], Tensor(), Tensor(), 1e-5).y); },
         [](auto& in, auto& e) {
             auto f = layer_norm(in[0], Tensor(), Tensor(), 1e-5);
             return Outputs{layer_norm_backward(e.dy, in[0], f.mean, f.rstd, Tensor(), false).dx};
         }},
        {"cross_entropy_rows", logits,
         [](auto& in, auto& e) { return dot(e.grad_rows, cross_entropy_rows(in[0], e.targets, 0.0, kIgnore)); },
         [](auto& in, auto& e) {
             return Outputs{cross_entropy_rows_backward(e.grad_rows, in[0], e.targets, 0.0, kIgnore)};
         }},
        {"cross_entropy_rows smoothed", logits,
         [](auto& in, auto& e) { return dot(e.grad_rows, cross_entropy_rows(in[0], e.targets, 0.1, kIgnore)); },
         [](auto& in, auto& e) {
             return Outputs{cross_entropy_rows_backward(e.grad_rows, in[0], e.targets, 0.1, kIgnore)};
         }},
    };
    return table;
}

// A vector of doubles, for comparing with to_vector().
using Values = std::vector<double>;

}  // namespace

// =====================================================================================
// fast kernels against oracles, threads, finite differences
// =====================================================================================

TEST_CASE(
    "softmax, log_softmax, masked_softmax, layer_norm, cross_entropy_rows and their backwards: fast kernels "
    "match the plain-loop oracles",
    "[core][rowwise]") {
    for (const KernelCase& k : kernel_table()) {
        for (const ShapeCase& s : kShapes) {
            if (static_cast<int>(s.shape.size()) < k.min_dim) continue;
            for (DType dtype : {DType::float32, DType::float64}) {
                INFO(k.name << " on " << describe(s, dtype));
                Generator gen(42);
                const Tensor x = make_x(s, dtype, gen);
                const Extras e = make_extras(x, gen);
                const Outputs got = k.fast(x, e), want = k.oracle(x, e);
                REQUIRE(got.size() == want.size());
                for (size_t i = 0; i < got.size(); ++i) {
                    INFO("output " << i);
                    check_close(got[i], want[i], tolerance(dtype));
                }
            }
        }
    }
}

TEST_CASE(
    "softmax, log_softmax, masked_softmax, layer_norm, cross_entropy_rows and their backwards: 1 and 2 "
    "threads give identical bits",
    "[core][rowwise]") {
    const int saved = get_num_threads();
    for (DType dtype : {DType::float32, DType::float64}) {
        Generator gen(7);
        const Tensor x = uniform({8, 80, 512}, -3, 3, gen, dtype);  // 327680 elements: above kParallelGrain
        const Extras e = make_extras(x, gen);
        for (const KernelCase& k : kernel_table()) {
            INFO(k.name << " " << dtype_name(dtype));
            set_num_threads(1);
            const Outputs one = k.fast(x, e);
            set_num_threads(2);
            const Outputs two = k.fast(x, e);
            for (size_t i = 0; i < one.size(); ++i) {
                if (!one[i].defined()) continue;
                CHECK(one[i].to_vector() == two[i].to_vector());
            }
        }
    }
    set_num_threads(saved);
}

TEST_CASE(
    "softmax_backward, log_softmax_backward, layer_norm_backward, cross_entropy_rows_backward: match central "
    "finite differences in float64",
    "[core][rowwise][gradcheck]") {
    const std::vector<ShapeCase> shapes = {
        {.shape = {1, 1}}, {.shape = {3, 5}}, {.shape = {2, 3, 4}, .transposed = true}, {.shape = {2, 1, 6}}};
    for (const GradCase& c : grad_table()) {
        for (const ShapeCase& s : shapes) {
            if (static_cast<int>(s.shape.size()) < c.min_dim) continue;
            INFO(c.name << " on " << describe(s, DType::float64));
            Generator gen(3);
            const Tensor x = make_x(s, DType::float64, gen);
            const Extras e = make_extras(x, gen);
            const Inputs in = c.inputs(x, e);
            const Outputs analytic = c.grads(in, e);
            REQUIRE(analytic.size() == in.size());
            for (size_t i = 0; i < in.size(); ++i) {
                INFO("gradient of input " << i);
                const Tensor numeric = numeric_gradient([&](const Inputs& v) { return c.loss(v, e); }, in, i);
                check_close(analytic[i], numeric, 1e-6);
            }
        }
    }
}

// =====================================================================================
// softmax and log_softmax
// =====================================================================================

TEST_CASE("softmax(x): rows are probability distributions", "[core][rowwise]") {
    for (const ShapeCase& s : kShapes) {
        for (DType dtype : {DType::float32, DType::float64}) {
            INFO(describe(s, dtype));
            Generator gen(1);
            const Tensor x = make_x(s, dtype, gen);
            const Tensor y = softmax(x);
            CHECK(y.shape() == x.shape());
            const int64_t L = x.shape().back();
            const Values v = y.to_vector();
            for (size_t r = 0; L > 0 && r < v.size() / L; ++r) {
                double sum = 0;
                for (int64_t i = 0; i < L; ++i) {
                    CHECK(v[r * L + i] >= 0);
                    sum += v[r * L + i];
                }
                CHECK(sum == Approx(1.0).epsilon(dtype == DType::float32 ? 1e-6 : 1e-14));
            }
        }
    }
}

namespace {
// Rows of the special cases, (5, 4): a tie, all -inf, a NaN after the max, +inf twice, -inf beside a number.
Tensor special_rows(DType dtype) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return tensor({1,     3,     3,     0,      //
                   -kInf, -kInf, -kInf, -kInf,  //
                   5,     1,     nan,   2,      //
                   0,     kInf,  1,     kInf,   //
                   -kInf, 2,     -kInf, -kInf},
                  {5, 4}, dtype);
}
}  // namespace

TEST_CASE(
    "argmax_log_softmax(x): argmax(x, -1) and log_softmax(x) at it, bit for bit, over the shape table, ties, "
    "-inf, +inf and NaN rows",
    "[core][rowwise]") {
    Generator gen(31);
    for (DType dtype : {DType::float32, DType::float64})
        for (const ShapeCase& c : kShapes) {
            if (c.shape.back() == 0 || shape_numel(c.shape) == 0) continue;
            INFO(describe(c, dtype));
            const Tensor x = make_x(c, dtype, gen);
            const ArgmaxLogSoftmax got = argmax_log_softmax(x);
            const Tensor ids = argmax(x, -1);
            CHECK(got.ids.to_vector<int64_t>() == ids.to_vector<int64_t>());
            // log_softmax(x) gathered at the argmax, row by row
            const Tensor all = log_softmax(x).reshape({-1, x.shape().back()});
            const std::vector<int64_t> id = ids.reshape({-1}).to_vector<int64_t>();
            Values want;
            for (size_t r = 0; r < id.size(); ++r) want.push_back(all.at({static_cast<int64_t>(r), id[r]}));
            CHECK(got.log_probs.dtype() == dtype);
            CHECK(shape_str(got.log_probs.shape()) == shape_str(leading(x.shape())));
            CHECK(got.log_probs.reshape({-1}).to_vector() == want);
        }
    for (DType dtype : {DType::float32, DType::float64}) {
        INFO(dtype_name(dtype));
        // rows: a tie (the first wins), all -inf, a NaN after the max (the NaN wins, as in argmax),
        // +inf (it wins; its log-probability is NaN, as log_softmax's), -inf beside a number
        const Tensor x = special_rows(dtype);
        const ArgmaxLogSoftmax got = argmax_log_softmax(x);
        CHECK(got.ids.to_vector<int64_t>() == argmax(x, -1).to_vector<int64_t>());
        CHECK(got.ids.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 2, 1, 1});
        const Values lp = got.log_probs.to_vector();
        CHECK(lp[0] == log_softmax(x).at({0, 1}));
        CHECK(lp[1] == -kInf);
        CHECK(std::isnan(lp[2]));
        CHECK(std::isnan(lp[3]));
        CHECK(lp[4] == 0.0);
    }
    CHECK_THROWS_WITH(argmax_log_softmax(zeros({2, 0})),
                      Catch::Contains("argmax_log_softmax") && Catch::Contains("(2x0)"));
    CHECK_THROWS_WITH(argmax_log_softmax(zeros({2}, DType::int64)), Catch::Contains("argmax_log_softmax"));
}

TEST_CASE(
    "top_k_log_softmax(x, k): the k largest of log_softmax(x), bit for bit, largest first and ties by index, over the "
    "shape table, ties, -inf, +inf and NaN rows",
    "[core][rowwise]") {
    Generator gen(37);
    for (DType dtype : {DType::float32, DType::float64})
        for (const ShapeCase& c : kShapes) {
            const int64_t L = c.shape.empty() ? 0 : c.shape.back();
            if (L == 0 || shape_numel(c.shape) == 0) continue;
            for (int64_t k : {int64_t{1}, std::min<int64_t>(3, L), L}) {
                INFO(describe(c, dtype) << " k " << k);
                const Tensor x = make_x(c, dtype, gen);
                const ArgmaxLogSoftmax got = top_k_log_softmax(x, k);
                Shape want_shape = leading(x.shape());
                want_shape.push_back(k);
                CHECK(shape_str(got.ids.shape()) == shape_str(want_shape));
                // the oracle: log_softmax's whole row, sorted by value (descending), stable in the index
                const Tensor all = log_softmax(x).reshape({-1, L});
                const std::vector<int64_t> ids = got.ids.reshape({-1}).to_vector<int64_t>();
                const Values lp = got.log_probs.reshape({-1}).to_vector();
                for (int64_t r = 0; r < all.size(0); ++r) {
                    std::vector<int64_t> order(static_cast<size_t>(L));
                    std::iota(order.begin(), order.end(), 0);
                    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
                        return all.at({r, a}) > all.at({r, b});
                    });
                    for (int64_t j = 0; j < k; ++j) {
                        CHECK(ids[r * k + j] == order[j]);
                        CHECK(lp[r * k + j] == all.at({r, order[j]}));
                    }
                }
            }
        }
    for (DType dtype : {DType::float32, DType::float64}) {
        INFO(dtype_name(dtype));
        // special_rows: ties (the lower index first), all -inf, a NaN, +inf, -inf beside a number
        const Tensor x = special_rows(dtype);
        const ArgmaxLogSoftmax got = top_k_log_softmax(x, 3);
        CHECK(got.ids.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0, 0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 0, 2});
        const Values lp = got.log_probs.to_vector();
        CHECK(lp[0] == log_softmax(x).at({0, 1}));
        CHECK(lp[1] == lp[0]);
        CHECK(lp[3] == -kInf);
        for (int i = 6; i < 12; ++i) CHECK(std::isnan(lp[i]));
        CHECK(lp[14] == -kInf);
    }
    // k = 1 is argmax_log_softmax's pick
    const Tensor x = rand({7, 300}, gen);
    CHECK(top_k_log_softmax(x, 1).ids.reshape({-1}).to_vector<int64_t>() ==
          argmax_log_softmax(x).ids.to_vector<int64_t>());
    CHECK(top_k_log_softmax(x, 1).log_probs.reshape({-1}).to_vector() == argmax_log_softmax(x).log_probs.to_vector());
    CHECK_THROWS_WITH(top_k_log_softmax(zeros({2, 3}), 4),
                      Catch::Contains("top_k_log_softmax") && Catch::Contains("k = 4"));
    CHECK_THROWS_WITH(top_k_log_softmax(zeros({2, 3}), 0), Catch::Contains("top_k_log_softmax"));
}

TEST_CASE("softmax(x), log_softmax(x): ±1e4 stays finite, -inf rows and NaN", "[core][rowwise]") {
    for (DType dtype : {DType::float32, DType::float64}) {
        INFO(dtype_name(dtype));
        // the row max is subtracted first, so exp never sees 1e4
        const Tensor big = tensor({1e4, -1e4, 0, 1e4}, {1, 4}, dtype);
        CHECK(softmax(big).to_vector() == Values{0.5, 0, 0, 0.5});
        const Values ls = log_softmax(big).to_vector();
        for (double v : ls) CHECK(std::isfinite(v));
        CHECK(ls[0] == Approx(-std::log(2.0)));
        CHECK(ls[1] == Approx(-2e4 - std::log(2.0)));
        CHECK(ls[2] == Approx(-1e4 - std::log(2.0)));
        CHECK(ls[3] == Approx(-std::log(2.0)));

        // a row of -inf has no mass: zeros (log: -inf); a -inf entry has probability 0
        const Tensor inf_rows = tensor({-kInf, -kInf, -kInf, 0.0}, {2, 2}, dtype);
        CHECK(softmax(inf_rows).to_vector() == Values{0, 0, 0, 1});
        CHECK(log_softmax(inf_rows).to_vector() == Values{-kInf, -kInf, -kInf, 0});
        // their gradients stay finite: y = 0 (softmax) or exp(y) = 0 (log_softmax)
        const Tensor dy = tensor({1, 2, 3, 4}, {2, 2}, dtype);
        CHECK(softmax_backward(dy, softmax(inf_rows)).to_vector() == Values{0, 0, 0, 0});
        CHECK(log_softmax_backward(dy, log_softmax(inf_rows)).to_vector() ==
              Values{1, 2, 3, 4 - 7});  // exp(y) = (0, 1), Σ dy = 7

        // NaN is never hidden: it makes its row NaN, other rows are untouched
        const double nan = std::numeric_limits<double>::quiet_NaN();
        for (const Tensor& t : {softmax(tensor({nan, 1.0, 0.0, 0.0}, {2, 2}, dtype)),
                                softmax(tensor({nan, -kInf, 0.0, 0.0}, {2, 2}, dtype)),
                                log_softmax(tensor({nan, -kInf, 0.0, 0.0}, {2, 2}, dtype))}) {
            const Values v = t.to_vector();
            CHECK(std::isnan(v[0]));
            CHECK(std::isnan(v[1]));
            CHECK(std::isfinite(v[2]));
        }

        // equal scores: uniform weights
        for (double v : softmax(full({3}, 2.0, dtype)).to_vector()) CHECK(v == Approx(1.0 / 3).epsilon(1e-7));
    }
}

// =====================================================================================
// masked softmax (seed 003)
// =====================================================================================

TEST_CASE("masked_softmax(x, valid_lens): seed 003's examples with lengths per batch and per row", "[core][rowwise]") {
    Generator gen(2);
    const Tensor x = rand({2, 2, 4}, gen);  // d2l: torch.rand(2, 2, 4)

    // valid_lens [2, 3]: batch 0 keeps 2 entries per row, batch 1 keeps 3
    for (DType lens_dtype : {DType::int64, DType::float32, DType::float64}) {
        INFO("valid_lens " << dtype_name(lens_dtype));
        const Tensor y = masked_softmax(x, tensor({2, 3}, {2}, lens_dtype));
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t t = 0; t < 2; ++t) {
                const int64_t len = b == 0 ? 2 : 3;
                double sum = 0;
                for (int64_t s = 0; s < 4; ++s) {
                    if (s < len) {
                        CHECK(y.at({b, t, s}) > 0);
                    } else {
                        CHECK(y.at({b, t, s}) == 0.0);  // exactly 0, not just small
                    }
                    sum += y.at({b, t, s});
                }
                CHECK(sum == Approx(1.0).epsilon(1e-6));
            }
        // the kept entries are an ordinary softmax of the kept scores
        const double e0 = std::exp(x.at({0, 1, 0})), e1 = std::exp(x.at({0, 1, 1}));
        CHECK(y.at({0, 1, 0}) == Approx(e0 / (e0 + e1)).epsilon(1e-6));
    }

    // valid_lens [[1, 3], [2, 4]]: one length per row
    const Tensor y = masked_softmax(x, tensor({1, 3, 2, 4}, {2, 2}, DType::int64));
    CHECK(y.select(0, 0).select(0, 0).to_vector() == Values{1, 0, 0, 0});
    const int64_t lens[2][2] = {{1, 3}, {2, 4}};
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < 2; ++t) {
            double sum = 0;
            for (int64_t s = 0; s < 4; ++s) {
                if (s >= lens[b][t]) CHECK(y.at({b, t, s}) == 0.0);
                sum += y.at({b, t, s});
            }
            CHECK(sum == Approx(1.0).epsilon(1e-6));
        }
    // the full-length row equals plain softmax
    check_close(y.select(0, 1).select(0, 1).contiguous(), softmax(x.select(0, 1).select(0, 1)), 1e-7);

    // no valid_lens: plain softmax, as d2l's masked_softmax(X, None)
    check_close(masked_softmax(x, Tensor()), softmax(x), 0);
}

TEST_CASE("masked_softmax(x, valid_lens): a row of valid length 0 is all zeros, not uniform", "[core][rowwise]") {
    const Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 1, 3}, DType::float64);
    const Tensor y = masked_softmax(x, tensor({0, 3}, {2}, DType::int64));
    const Values v = y.to_vector();
    CHECK(Values(v.begin(), v.begin() + 3) == Values{0, 0, 0});  // d2l's -1e6 fill would give 1/3 each
    CHECK(v[3] + v[4] + v[5] == Approx(1.0));
    // and its gradient is 0: the row does not depend on x
    CHECK(softmax_backward(ones({2, 1, 3}, DType::float64), y).to_vector()[0] == 0.0);
}

TEST_CASE("masked_softmax_by_mask(x, keep): no-peek and pad masks agree with the valid-length form",
          "[core][rowwise]") {
    for (DType dtype : {DType::float32, DType::float64}) {
        INFO(dtype_name(dtype));
        Generator gen(5);
        // no-peek mask (T, T): query t sees keys 0..t, i.e. valid length t + 1
        const int64_t B = 2, T = 4;
        const Tensor x = uniform({B, T, T}, -2, 2, gen, dtype);
        std::vector<bool> tril;
        std::vector<double> lens;
        for (int64_t t = 0; t < T; ++t)
            for (int64_t s = 0; s < T; ++s) tril.push_back(s <= t);
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 0; t < T; ++t) lens.push_back(static_cast<double>(t + 1));
        const Tensor no_peek = from_vector(tril, {T, T});
        const Tensor y = masked_softmax_by_mask(x, no_peek);
        check_close(y, masked_softmax(x, tensor(lens, {B, T}, DType::int64)), tolerance(dtype));
        CHECK(y.at({1, 0, 0}) == 1.0);  // the first query sees only itself
        CHECK(y.at({1, 0, 1}) == 0.0);

        // pad mask (B, 1, 1, S) over (B, H, T, S) scores: per-batch valid lengths
        const int64_t H = 2, S = 5;
        const Tensor scores = uniform({B, H, T, S}, -2, 2, gen, dtype);
        const Tensor pad = from_vector(
            std::vector<bool>{true, true, false, false, false, true, true, true, true, false}, {B, 1, 1, S});
        check_close(masked_softmax_by_mask(scores, pad), masked_softmax(scores, tensor({2, 4}, {B}, DType::int64)),
                    tolerance(dtype));

        // a fully masked row is zeros
        const Tensor none = from_vector(std::vector<bool>(S, false), {S});
        CHECK(masked_softmax_by_mask(scores, none).to_vector() == Values(static_cast<size_t>(B * H * T * S), 0.0));
    }
}

// =====================================================================================
// layer norm (seed 000)
// =====================================================================================

TEST_CASE("layer_norm(x, weight, bias, eps): seed 000's [[1, 2], [2, 3]] normalises each row to [-1, 1]",
          "[core][rowwise]") {
    // each row has mean m ± 0.5 and biased variance 0.25, so y = ±0.5 / √(0.25 + eps)
    const double a = 0.5 / std::sqrt(0.25 + 1e-5);
    const Tensor x = tensor({1, 2, 2, 3}, {2, 2});  // float32, as in the seed
    const LayerNormOut out = layer_norm(x, Tensor(), Tensor(), 1e-5);
    CHECK(out.y.shape() == Shape{2, 2});
    CHECK(out.mean.shape() == Shape{2});
    CHECK(out.rstd.shape() == Shape{2});
    const Values y = out.y.to_vector();
    for (size_t i = 0; i < 4; ++i) CHECK(y[i] == Approx(i % 2 == 0 ? -a : a).epsilon(1e-6));
    CHECK(y[0] == Approx(-0.99998).epsilon(1e-5));  // the numbers PyTorch prints
    CHECK(out.mean.to_vector() == Values{1.5, 2.5});
    CHECK(out.rstd.at({0}) == Approx(1 / std::sqrt(0.25 + 1e-5)).epsilon(1e-6));

    // with weight and bias: y = x̂ w + b
    const LayerNormOut affine = layer_norm(x, tensor({2, 0.5}, {2}), tensor({1, -1}, {2}), 1e-5);
    CHECK(affine.y.at({1, 0}) == Approx(1 - 2 * a).epsilon(1e-6));
    CHECK(affine.y.at({1, 1}) == Approx(-1 + 0.5 * a).epsilon(1e-6));
}

TEST_CASE("layer_norm(x, weight, bias, eps): numerically safe for a large mean and a constant row", "[core][rowwise]") {
    // float32 rows 10000 + (0, 1, 2, 3): mean 10001.5, variance 1.25. The one-pass
    // E[x²] - E[x]² in float32 would lose the variance entirely (1e8 ± 1).
    const Tensor x = tensor({10000, 10001, 10002, 10003}, {1, 4});
    const Values y = layer_norm(x, Tensor(), Tensor(), 0.0).y.to_vector();
    for (size_t i = 0; i < 4; ++i)
        CHECK(y[i] == Approx((static_cast<double>(i) - 1.5) / std::sqrt(1.25)).epsilon(1e-6));
    // a constant row: x̂ = 0 and rstd = 1/√eps
    const LayerNormOut c = layer_norm(full({1, 3}, 5.0, DType::float64), Tensor(), Tensor(), 1e-5);
    CHECK(c.y.to_vector() == Values{0, 0, 0});
    CHECK(c.rstd.item() == Approx(1 / std::sqrt(1e-5)));
}

TEST_CASE("layer_norm_backward(grad_y, x, mean, rstd, weight, has_bias): dweight and dbias only when asked",
          "[core][rowwise]") {
    const Tensor x = tensor({1, 2, 2, 3}, {2, 2}, DType::float64);
    const Tensor w = tensor({2, 0.5}, {2}, DType::float64);
    const Tensor dy = tensor({1, 0, 0, 1}, {2, 2}, DType::float64);
    const LayerNormOut f = layer_norm(x, w, Tensor(), 1e-5);
    const LayerNormGrads g = layer_norm_backward(dy, x, f.mean, f.rstd, w, false);
    CHECK_FALSE(g.dbias.defined());
    REQUIRE(g.dweight.defined());
    // dweight_i = Σ_rows dy_i x̂_i = x̂(0,0) + x̂(1,1) = -a + a
    CHECK(g.dweight.to_vector()[0] == Approx(-0.5 / std::sqrt(0.25 + 1e-5)));
    CHECK(g.dweight.to_vector()[1] == Approx(0.5 / std::sqrt(0.25 + 1e-5)));
    const LayerNormGrads plain = layer_norm_backward(dy, x, f.mean, f.rstd, Tensor(), true);
    CHECK_FALSE(plain.dweight.defined());
    CHECK(plain.dbias.to_vector() == Values{1, 1});
    // dx of a normalised row sums to 0: shifting x does not change y
    const Values dx = g.dx.to_vector();
    CHECK(dx[0] + dx[1] == Approx(0).margin(1e-12));
}

// =====================================================================================
// cross-entropy
// =====================================================================================

TEST_CASE("cross_entropy_rows(logits, targets, label_smoothing, ignore_index): hand-computed losses and gradients",
          "[core][rowwise]") {
    for (DType dtype : {DType::float32, DType::float64}) {
        INFO(dtype_name(dtype));
        const Tensor logits = tensor({0, 0, 0, 1, 2, 3, 5, -5, 7}, {3, 3}, dtype);
        const Tensor targets = from_vector(std::vector<int64_t>{1, 2, kIgnore}, {3});
        const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));

        // no smoothing: loss = lse - x_t
        const Values plain = cross_entropy_rows(logits, targets, 0.0, kIgnore).to_vector();
        CHECK(plain[0] == Approx(std::log(3.0)));
        CHECK(plain[1] == Approx(lse - 3));
        CHECK(plain[2] == 0.0);  // ignored

        // smoothing ε = 0.1 over V = 3: q = 0.9 onehot + 0.1/3, loss = lse - 0.9 x_t - 0.1 mean(x)
        const Values smooth = cross_entropy_rows(logits, targets, 0.1, kIgnore).to_vector();
        CHECK(smooth[0] == Approx(std::log(3.0)));  // uniform p: every q gives log 3
        CHECK(smooth[1] == Approx(lse - 0.9 * 3 - 0.1 * 2));
        CHECK(smooth[2] == 0.0);

        // gradient: grad_n (p - q); ignored rows get 0
        const Tensor grad_rows = tensor({1, 2, 5}, {3}, dtype);
        const Values d = cross_entropy_rows_backward(grad_rows, logits, targets, 0.1, kIgnore).to_vector();
        const double q_off = 0.1 / 3, q_on = 0.9 + 0.1 / 3;
        CHECK(d[0] == Approx(1.0 / 3 - q_off));
        CHECK(d[1] == Approx(1.0 / 3 - q_on));
        for (int v = 0; v < 3; ++v) {
            const double p = std::exp(v + 1.0 - lse);
            CHECK(d[3 + v] == Approx(2 * (p - (v == 2 ? q_on : q_off))));
            CHECK(d[6 + v] == 0.0);
        }
    }
}

TEST_CASE(
    "cross_entropy_rows(logits, targets, label_smoothing, ignore_index): large and -inf logits, ignore_index "
    "inside the vocabulary",
    "[core][rowwise]") {
    const Tensor big = tensor({1e4, 0}, {1, 2});
    CHECK(cross_entropy_rows(big, from_vector(std::vector<int64_t>{1}, {1}), 0.0, kIgnore).item() == Approx(1e4));
    CHECK(cross_entropy_rows(big, from_vector(std::vector<int64_t>{0}, {1}), 0.0, kIgnore).item() == 0.0);

    // a -inf logit: probability 0, so its loss is 0 when it is not the target ...
    const Tensor with_inf = tensor({-kInf, 0}, {1, 2}, DType::float64);
    const Tensor t1 = from_vector(std::vector<int64_t>{1}, {1});
    CHECK(cross_entropy_rows(with_inf, t1, 0.0, kIgnore).item() == 0.0);
    CHECK(cross_entropy_rows_backward(ones({1}, DType::float64), with_inf, t1, 0.0, kIgnore).to_vector() ==
          Values{0, 0});
    // ... and +inf when smoothing puts target mass on it (-ε/V log 0), never NaN
    CHECK(cross_entropy_rows(with_inf, t1, 0.1, kIgnore).item() == kInf);

    // padding index 1 as ignore_index (tokens of class 1 are not scored)
    const Tensor logits = tensor({0, 1, 2, 3}, {2, 2}, DType::float64);
    const Values l = cross_entropy_rows(logits, from_vector(std::vector<int64_t>{1, 0}, {2}), 0.0, 1).to_vector();
    CHECK(l[0] == 0.0);
    CHECK(l[1] == Approx(std::log(std::exp(2.0) + std::exp(3.0)) - 2));
}

TEST_CASE(
    "cross_entropy_rows_backward(..., row_stats): the forward's row max and sum give the same floats in one pass, "
    "in place too",
    "[core][rowwise]") {
    // rows long enough to cross the 256-entry blocks of the sums; a -inf logit, an ignored row, smoothing
    const int64_t N = 5, V = 300;
    Generator gen(21);
    for (const DType dt : {DType::float32, DType::float64})
        for (const double eps : {0.0, 0.1}) {
            Tensor logits = mul(randn({N, V}, gen, dt), 4.0);
            logits.set({2, 7}, -kInf);
            const Tensor targets = from_vector(std::vector<int64_t>{3, kIgnore, 299, 0, 150}, {N});
            const Tensor grad_rows = rand({N}, gen, dt);
            Tensor stats;
            const Tensor loss = cross_entropy_rows(logits, targets, eps, kIgnore, &stats);
            REQUIRE(stats.shape() == Shape{N, 2});
            REQUIRE(stats.dtype() == DType::float64);
            CHECK(loss.to_vector() == cross_entropy_rows(logits, targets, eps, kIgnore).to_vector());
            const Values want = cross_entropy_rows_backward(grad_rows, logits, targets, eps, kIgnore).to_vector();
            INFO(dtype_name(dt) << ", label smoothing " << eps);
            CHECK(cross_entropy_rows_backward(grad_rows, logits, targets, eps, kIgnore, stats).to_vector() == want);
            Tensor overwritten = logits.clone();
            cross_entropy_rows_backward_(grad_rows, overwritten, targets, eps, kIgnore, stats);
            CHECK(overwritten.to_vector() == want);
        }
    // stats of another shape or dtype are refused
    const Tensor logits = zeros({2, 4}), targets = from_vector(std::vector<int64_t>{1, 2}, {2});
    REQUIRE_THROWS_WITH(cross_entropy_rows_backward(ones({2}), logits, targets, 0.0, kIgnore, zeros({3, 2})),
                        "cross_entropy_backward: row_stats has shape (3x2), expected (2x2)");
    REQUIRE_THROWS_AS(cross_entropy_rows_backward(ones({2}), logits, targets, 0.0, kIgnore, zeros({2, 2})), ValueError);
}

// =====================================================================================
// errors
// =====================================================================================

TEST_CASE("cross_entropy_rows(...), cross_entropy_rows_backward(...): bad targets, shapes and smoothing throw",
          "[core][rowwise]") {
    const Tensor logits = zeros({2, 40});
    const Tensor bad = from_vector(std::vector<int64_t>{3, 57}, {2});
    REQUIRE_THROWS_AS(cross_entropy_rows(logits, bad, 0.0, kIgnore), IndexError);
    REQUIRE_THROWS_WITH(cross_entropy_rows(logits, bad, 0.0, kIgnore),
                        "cross_entropy: target 57 out of range for 40 classes");
    REQUIRE_THROWS_WITH(cross_entropy_rows_backward(zeros({2}), logits, bad, 0.0, kIgnore),
                        "cross_entropy_backward: target 57 out of range for 40 classes");
    REQUIRE_THROWS_WITH(cross_entropy_rows(logits, from_vector(std::vector<int64_t>{-1, 0}, {2}), 0.0, kIgnore),
                        "cross_entropy: target -1 out of range for 40 classes");
    // the ignore_index itself is fine even though it is out of range
    CHECK_NOTHROW(cross_entropy_rows(logits, from_vector(std::vector<int64_t>{kIgnore, 0}, {2}), 0.0, kIgnore));

    REQUIRE_THROWS_AS(cross_entropy_rows(zeros({2, 3, 4}), bad, 0.0, kIgnore), ShapeError);
    REQUIRE_THROWS_WITH(cross_entropy_rows(logits, from_vector(std::vector<int64_t>{1, 2, 3}, {3}), 0.0, kIgnore),
                        "cross_entropy: targets of shape (3) do not match logits of shape (2x40) (expected (2))");
    REQUIRE_THROWS_WITH(cross_entropy_rows(logits, zeros({2}), 0.0, kIgnore),
                        "cross_entropy: targets must be int64, got float32");
    REQUIRE_THROWS_WITH(cross_entropy_rows(logits, bad, 1.5, kIgnore),
                        "cross_entropy: label_smoothing must be in [0, 1], got 1.5");
    REQUIRE_THROWS_WITH(
        cross_entropy_rows_backward(zeros({3}), logits, from_vector(std::vector<int64_t>{1, 2}, {2}), 0.0, kIgnore),
        "cross_entropy_backward: grad_rows has shape (3), expected (2)");
}

TEST_CASE("masked_softmax(x, valid_lens), masked_softmax_by_mask(x, keep): bad lengths and masks throw",
          "[core][rowwise]") {
    const Tensor x = zeros({2, 2, 4});
    REQUIRE_THROWS_AS(masked_softmax(x, tensor({2, 5}, {2}, DType::int64)), ValueError);
    REQUIRE_THROWS_WITH(masked_softmax(x, tensor({2, 5}, {2}, DType::int64)),
                        "masked_softmax: valid length 5 out of range [0, 4] for rows of S = 4");
    REQUIRE_THROWS_WITH(masked_softmax(x, tensor({-1, 2, 2, 2}, {2, 2}, DType::int64)),
                        "masked_softmax: valid length -1 out of range [0, 4] for rows of S = 4");
    REQUIRE_THROWS_WITH(masked_softmax(x, tensor({2.5, 2}, {2}, DType::float32)),
                        "masked_softmax: valid length 2.5 is not a whole number");
    REQUIRE_THROWS_AS(masked_softmax(x, tensor({2, 2, 2}, {3}, DType::int64)), ShapeError);
    REQUIRE_THROWS_WITH(masked_softmax(x, tensor({2, 2, 2}, {3}, DType::int64)),
                        "masked_softmax: valid_lens of shape (3) fits neither one length per batch element (2) nor "
                        "one per row (2x2) for x of shape (2x2x4)");
    REQUIRE_THROWS_WITH(masked_softmax(x, from_vector(std::vector<bool>{true, false}, {2})),
                        "masked_softmax: valid_lens must be int64, float32 or float64, got bool");

    REQUIRE_THROWS_AS(masked_softmax_by_mask(x, zeros({4})), ValueError);
    REQUIRE_THROWS_WITH(masked_softmax_by_mask(x, zeros({4})),
                        "masked_softmax_by_mask: keep must be a bool mask, got float32");
    REQUIRE_THROWS_AS(masked_softmax_by_mask(x, ones({3, 3}, DType::boolean)), ShapeError);
    REQUIRE_THROWS_WITH(masked_softmax_by_mask(x, ones({3, 3}, DType::boolean)),
                        "masked_softmax_by_mask: mask of shape (3x3) does not broadcast to x of shape (2x2x4)");
}

TEST_CASE(
    "softmax(x), softmax_backward(grad_y, y), layer_norm(...), layer_norm_backward(...): bad dtypes and shapes "
    "throw",
    "[core][rowwise]") {
    REQUIRE_THROWS_AS(softmax(zeros({2}, DType::int64)), ValueError);
    REQUIRE_THROWS_WITH(softmax(zeros({2}, DType::int64)), "softmax: x must be float32 or float64, got int64");
    REQUIRE_THROWS_WITH(log_softmax(scalar(1.0)), "log_softmax: x must have at least 1 dimension, got a 0-d tensor");
    REQUIRE_THROWS_AS(softmax_backward(zeros({2, 3}), zeros({2, 4})), ShapeError);
    REQUIRE_THROWS_WITH(softmax_backward(zeros({2, 3}), zeros({2, 4})),
                        "softmax_backward: grad_y has shape (2x3), expected (2x4)");
    REQUIRE_THROWS_WITH(log_softmax_backward(zeros({2}, DType::float64), zeros({2})),
                        "log_softmax_backward: grad_y has dtype float64, expected float32");

    const Tensor x = zeros({2, 4});
    REQUIRE_THROWS_AS(layer_norm(x, ones({3}), Tensor(), 1e-5), ShapeError);
    REQUIRE_THROWS_WITH(layer_norm(x, ones({3}), Tensor(), 1e-5),
                        "layer_norm: weight of shape (3) does not match the last dimension of x (2x4)");
    REQUIRE_THROWS_WITH(layer_norm(x, Tensor(), ones({4}, DType::float64), 1e-5),
                        "layer_norm: bias has dtype float64 but x has float32");
    REQUIRE_THROWS_WITH(layer_norm(x, Tensor(), Tensor(), -1.0), "layer_norm: eps must be >= 0, got -1");
    REQUIRE_THROWS_WITH(layer_norm(zeros({2, 0}), Tensor(), Tensor(), 1e-5),
                        "layer_norm: x of shape (2x0) has empty rows");
    const LayerNormOut f = layer_norm(x, Tensor(), Tensor(), 1e-5);
    REQUIRE_THROWS_WITH(layer_norm_backward(x, x, zeros({4}), f.rstd, Tensor(), false),
                        "layer_norm_backward: mean has shape (4), expected (2)");
}
