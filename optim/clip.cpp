#include "optim/clip.hpp"

#include "core/elementwise.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tformer::optim {

namespace {

// Σ|g|^p over one gradient (p = ∞: max|g|), in double. For p = 2 the sum
// runs in kLanes interleaved partial sums, added up at the end: independent
// additions keep the CPU busy (and let the compiler use SIMD) where one
// running sum would wait on every add, and the order is still fixed, so
// the norm never depends on the thread count or the run.
constexpr int64_t kLanes = 8;

template <class T>
double power_sum(const T* g, int64_t n, double p) {
    if (p == 2) {
        double lanes[kLanes] = {};
        int64_t i = 0;
        for (; i + kLanes <= n; i += kLanes)
            for (int64_t k = 0; k < kLanes; ++k)
                lanes[k] += static_cast<double>(g[i + k]) * static_cast<double>(g[i + k]);
        for (; i < n; ++i) lanes[0] += static_cast<double>(g[i]) * static_cast<double>(g[i]);
        double acc = 0;
        for (double lane : lanes) acc += lane;
        return acc;
    }
    double acc = 0;
    if (p == 1) {
        for (int64_t i = 0; i < n; ++i) acc += std::abs(static_cast<double>(g[i]));
    } else if (std::isinf(p)) {
        for (int64_t i = 0; i < n; ++i) {
            const double a = std::abs(static_cast<double>(g[i]));
            if (std::isnan(a)) return a;  // a NaN must win over every number
            acc = std::max(acc, a);
        }
    } else {
        for (int64_t i = 0; i < n; ++i) acc += std::pow(std::abs(static_cast<double>(g[i])), p);
    }
    return acc;
}

double power_sum(const Tensor& grad, double p) {
    const Tensor g = grad.contiguous();
    return core::visit_floating(g.dtype(), "clip_grad_norm", [&](auto tag) {
        using T = typename decltype(tag)::type;
        return power_sum<T>(g.data<T>(), g.numel(), p);
    });
}

bool all_finite(const Tensor& grad) {
    const Tensor g = grad.contiguous();
    return core::visit_floating(g.dtype(), "clip_grad_norm", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* data = g.data<T>();
        for (int64_t i = 0; i < g.numel(); ++i)
            if (!std::isfinite(data[i])) return false;
        return true;
    });
}

double clip(const std::vector<Variable>& params, const std::vector<std::string>* names, double max_norm,
            const ClipOptions& options) {
    const double p = options.norm_type;
    if (!(p > 0)) fail<ValueError>("clip_grad_norm: norm_type must be > 0 (or infinity), got {}", p);
    if (!(max_norm >= 0)) fail<ValueError>("clip_grad_norm: max_norm must be >= 0, got {}", max_norm);

    // ‖g‖_p = (Σ_params Σ_elements |g|^p)^(1/p);  ‖g‖_∞ = max |g|
    double acc = 0;
    for (const Variable& v : params) {
        if (!v.defined() || !v.grad().defined()) continue;
        const double s = power_sum(v.grad(), p);
        if (!std::isinf(p))
            acc += s;
        else if (std::isnan(s) || s > acc)  // a NaN must win over every number
            acc = s;
    }
    const double norm = std::isinf(p) ? acc : (p == 2 ? std::sqrt(acc) : std::pow(acc, 1 / p));

    if (!std::isfinite(norm)) {
        if (!options.error_if_nonfinite) return norm;
        std::string culprit = "no single gradient holds one, the sum overflowed";
        for (size_t i = 0; i < params.size(); ++i) {
            if (!params[i].defined() || !params[i].grad().defined() || all_finite(params[i].grad())) continue;
            const std::string name = names && !(*names)[i].empty() ? fmt::format(" ({})", (*names)[i]) : "";
            culprit = fmt::format("the first non-finite gradient is that of parameter {}{}, shape {}", i, name,
                                  core::shape_str(params[i].shape()));
            break;
        }
        fail<ValueError>("clip_grad_norm: the total norm of order {} of the gradients is {}; {}", p, norm, culprit);
    }

    // g ← g · max_norm/(‖g‖ + 1e-6), only when that factor is below 1
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1)
        for (const Variable& v : params)
            if (v.defined() && v.grad().defined()) v.set_grad(core::mul(v.grad(), coef));
    return norm;
}

}  // namespace

double clip_grad_norm(const std::vector<Variable>& params, double max_norm, ClipOptions options) {
    return clip(params, nullptr, max_norm, options);
}

double clip_grad_norm(const NamedParameters& params, double max_norm, ClipOptions options) {
    std::vector<Variable> vars;
    std::vector<std::string> names;
    vars.reserve(params.size());
    names.reserve(params.size());
    for (const auto& [name, v] : params) {
        names.push_back(name);
        vars.push_back(v);
    }
    return clip(vars, &names, max_norm, options);
}

}  // namespace tformer::optim
