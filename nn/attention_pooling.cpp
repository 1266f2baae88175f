#include "nn/attention_pooling.hpp"

#include "autograd/autograd.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tformer::nn {

using core::shape_str;

namespace {

// queries (n); keys (m) or (n, m); values of keys' shape.
void check_pooling_shapes(const char* op, const Variable& queries, const Variable& keys, const Variable& values) {
    const bool ok = queries.dim() == 1 && (keys.dim() == 1 || (keys.dim() == 2 && keys.size(0) == queries.size(0))) &&
                    values.shape() == keys.shape();
    if (!ok)
        fail<ShapeError>(
            "{}: queries {}, keys {} and values {} must be (n), and (m) or (n, m) for both keys and "
            "values",
            op, shape_str(queries.shape()), shape_str(keys.shape()), shape_str(values.shape()));
}

// f(x) = Σ_i softmax_i(-((x - x_i) w)² / 2) y_i, with w = 1 when `w` is undefined.
PoolingOutput gaussian_kernel_pooling(const Variable& queries, const Variable& keys, const Variable& values,
                                      const Variable& w) {
    Variable distance = autograd::unsqueeze(queries, 1) - keys;  // (n, m): x - x_i, each query against each key
    if (w.defined()) distance = distance * w;                    // (n, m): (x - x_i) w
    Variable weights = autograd::softmax(-autograd::pow(distance, 2.0) / 2.0);  // (n, m): α(x, x_i)
    // Σ_i α(x, x_i) y_i: d2l writes it as bmm(α.unsqueeze(1), y.unsqueeze(-1))
    Variable output = autograd::sum(weights * values, {1});  // (n)
    return {.output = output, .attention_weights = weights.value()};
}

}  // namespace

Variable average_pooling(const Variable& queries, const Variable& values) {
    if (queries.dim() != 1 || values.dim() != 1)
        fail<ShapeError>("average_pooling: queries {} and values {} must both be 1-D", shape_str(queries.shape()),
                         shape_str(values.shape()));
    if (values.numel() == 0) fail<ValueError>("average_pooling: there are no values to average");
    // the same mean of the training outputs for every query
    return autograd::expand(autograd::mean(values), {queries.size(0)});  // (n)
}

PoolingOutput nadaraya_watson(const Variable& queries, const Variable& keys, const Variable& values) {
    check_pooling_shapes("nadaraya_watson", queries, keys, values);
    return gaussian_kernel_pooling(queries, keys, values, Variable());
}

NWKernelRegression::NWKernelRegression(core::Generator& gen) : Module("NWKernelRegression") {
    w = register_parameter("w", core::rand({1}, gen));
}

Variable NWKernelRegression::forward(const Variable& queries, const Variable& keys, const Variable& values) {
    check_pooling_shapes("NWKernelRegression", queries, keys, values);
    PoolingOutput pooled = gaussian_kernel_pooling(queries, keys, values, w);
    attention_weights = pooled.attention_weights;
    return pooled.output;
}

double pooling_target(double x) { return 2 * std::sin(x) + std::pow(x, 0.8); }

PoolingData make_pooling_data(int64_t n_train, core::Generator& gen) {
    if (n_train < 1) fail<ValueError>("make_pooling_data: n_train={} must be positive", n_train);
    // x_train = sort(rand(n_train) * 5)
    std::vector<float> x(n_train);
    for (float& xi : x) xi = static_cast<float>(5 * gen.uniform());
    std::sort(x.begin(), x.end());
    // y_train = f(x_train) + N(0, 0.5²)
    std::vector<float> y(n_train);
    for (int64_t i = 0; i < n_train; ++i) y[i] = static_cast<float>(pooling_target(x[i]) + 0.5 * gen.normal());
    // x_test = arange(0, 5, 0.1), written as i / 10 so there are exactly 50
    constexpr int64_t n_test = 50;
    std::vector<float> x_test(n_test), y_truth(n_test);
    for (int64_t i = 0; i < n_test; ++i) {
        x_test[i] = static_cast<float>(i / 10.0);
        y_truth[i] = static_cast<float>(pooling_target(x_test[i]));
    }
    return {.x_train = core::from_vector(x, {n_train}),
            .y_train = core::from_vector(y, {n_train}),
            .x_test = core::from_vector(x_test, {n_test}),
            .y_truth = core::from_vector(y_truth, {n_test})};
}

core::Tensor leave_one_out(const core::Tensor& x) {
    if (x.dim() != 1 || x.numel() < 1)
        fail<ShapeError>("leave_one_out: x of shape {} must be 1-D and non-empty", shape_str(x.shape()));
    const int64_t n = x.numel();
    const std::vector<double> v = x.to_vector();
    std::vector<double> out;
    out.reserve(n * (n - 1));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
            if (j != i) out.push_back(v[j]);
    return core::tensor(out, {n, n - 1}, x.dtype());  // (n, n-1)
}

}  // namespace tformer::nn
