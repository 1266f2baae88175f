#include "autograd/gradcheck.hpp"

#include <fmt/format.h>

#include <cmath>

namespace tformer::autograd {

namespace {

// Flat row-major index -> full index for Tensor::at / set.
core::Dims unravel(int64_t flat, const core::Shape& shape) {
    core::Dims index = core::Dims::filled(shape.size(), 0);
    for (int d = shape.size() - 1; d >= 0; --d) {
        index[d] = flat % shape[d];
        flat /= shape[d];
    }
    return index;
}

std::string index_str(int64_t flat, const core::Shape& shape) { return core::dims_list_str(unravel(flat, shape)); }

void check_inputs(const std::vector<Variable>& inputs) {
    for (size_t k = 0; k < inputs.size(); ++k) {
        const Variable& v = inputs[k];
        if (!v.defined()) fail<ValueError>("gradcheck: input {} is undefined", k);
        if (v.dtype() != core::DType::float64)
            fail<ValueError>("gradcheck: input {} is {}; use float64 so finite differences are accurate", k,
                             core::dtype_name(v.dtype()));
        const Tensor& t = v.value();
        for (int d = 0; d < t.dim(); ++d)
            if (t.shape()[d] > 1 && t.strides()[d] == 0)
                fail<ValueError>(
                    "gradcheck: input {} (shape {}) has overlapping memory (an expanded view); "
                    "pass a contiguous copy",
                    k, core::shape_str(t.shape()));
    }
}

// f's output as a flat float64 vector, with no graph recorded.
std::vector<double> evaluate(const std::function<Variable(const std::vector<Variable>&)>& f,
                             const std::vector<Variable>& inputs) {
    NoGradGuard no_grad;
    return f(inputs).value().to_vector();
}

}  // namespace

GradcheckResult gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                          const std::vector<Variable>& inputs, const GradcheckOptions& options) {
    check_inputs(inputs);
    GradcheckResult result;

    // fresh leaves over the same values, so the caller's grads are untouched
    std::vector<Variable> leaves;
    for (const Variable& v : inputs) leaves.emplace_back(v.value(), v.requires_grad());

    // ---- analytical Jacobian: one backward per output element -------------------
    Variable out;
    {
        EnableGradGuard grad_on;
        out = f(leaves);
    }
    if (!out.defined()) fail<ValueError>("gradcheck: f returned an undefined Variable");
    const int64_t m = out.numel();
    const core::Shape out_shape = out.shape();
    // analytical[k][i * n_k + j] = d out_i / d input_k[j]
    std::vector<std::vector<double>> analytical(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) analytical[k].assign(m * inputs[k].numel(), 0.0);
    if (out.requires_grad()) {
        for (int64_t i = 0; i < m; ++i) {
            for (Variable& leaf : leaves) leaf.zero_grad();
            Tensor seed = core::zeros(out_shape, out.dtype());
            seed.set(unravel(i, out_shape), 1.0);
            out.backward(seed, {.retain_graph = true});
            for (size_t k = 0; k < leaves.size(); ++k) {
                if (!leaves[k].requires_grad() || !leaves[k].grad().defined()) continue;
                const std::vector<double> g = leaves[k].grad().to_vector();
                std::copy(g.begin(), g.end(), analytical[k].begin() + i * inputs[k].numel());
            }
        }
    }

    // ---- numerical Jacobian: central differences, one input element at a time ----
    for (size_t k = 0; k < inputs.size(); ++k) {
        if (!inputs[k].requires_grad()) continue;
        Tensor x = inputs[k].value().clone();  // perturb a private copy
        std::vector<Variable> probe = leaves;
        probe[k] = Variable(x);
        const int64_t n = x.numel();
        for (int64_t j = 0; j < n; ++j) {
            const core::Dims at = unravel(j, x.shape());
            const double original = x.at(at);
            x.set(at, original + options.eps);
            const std::vector<double> plus = evaluate(f, probe);
            x.set(at, original - options.eps);
            const std::vector<double> minus = evaluate(f, probe);
            x.set(at, original);
            for (int64_t i = 0; i < m; ++i) {
                const double numerical = (plus[i] - minus[i]) / (2 * options.eps);
                const double a = analytical[k][i * n + j];
                const bool ok = std::abs(a - numerical) <= options.atol + options.rtol * std::abs(numerical);
                if (ok) continue;
                ++result.mismatches;
                if (result.passed) {
                    result.passed = false;
                    result.input = static_cast<int>(k);
                    result.input_element = j;
                    result.output_element = i;
                    result.analytical = a;
                    result.numerical = numerical;
                    result.report = fmt::format(
                        "gradcheck failed for input {} (shape {}) at element {}, output element {} (output shape "
                        "{}):\n  analytical (backward) d out / d in = {:.8g}\n  numerical (central differences) = "
                        "{:.8g}\n  |difference| {:.3g} > atol + rtol * |numerical| = {:.3g}",
                        k, core::shape_str(x.shape()), index_str(j, x.shape()), index_str(i, out_shape),
                        out_shape.empty() ? "()" : core::shape_str(out_shape), a, numerical, std::abs(a - numerical),
                        options.atol + options.rtol * std::abs(numerical));
                }
            }
        }
    }
    if (!result.passed)
        result.report += fmt::format("\n  {} Jacobian entr{} disagree in all", result.mismatches,
                                     result.mismatches == 1 ? "y" : "ies");
    return result;
}

}  // namespace tformer::autograd
