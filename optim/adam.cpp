#include "optim/adam.hpp"

#include "core/parallel.hpp"

#include <cmath>

namespace tformer::optim {

Adam::Adam(std::vector<Variable> params, AdamOptions options) : Adam("Adam", std::move(params), options, false) {}
Adam::Adam(const NamedParameters& params, AdamOptions options) : Adam("Adam", params, options, false) {}

Adam::Adam(std::string type_name, std::vector<Variable> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(type_name), std::move(params), options.lr), options_(options), decoupled_(decoupled) {
    init();
}

Adam::Adam(std::string type_name, const NamedParameters& params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(type_name), params, options.lr), options_(options), decoupled_(decoupled) {
    init();
}

namespace {
AdamOptions as_adam(const AdamWOptions& o) {
    return {.lr = o.lr, .betas = o.betas, .eps = o.eps, .weight_decay = o.weight_decay};
}
}  // namespace

AdamW::AdamW(std::vector<Variable> params, AdamWOptions options)
    : Adam("AdamW", std::move(params), as_adam(options), true) {}
AdamW::AdamW(const NamedParameters& params, AdamWOptions options) : Adam("AdamW", params, as_adam(options), true) {}

void Adam::init() {
    const AdamOptions& o = options_;
    for (int k = 0; k < 2; ++k)
        if (!(o.betas[k] >= 0 && o.betas[k] < 1))
            fail<ValueError>("{}: betas[{}] must be in [0, 1), got {}", type_name(), k, o.betas[k]);
    if (!std::isfinite(o.eps) || o.eps < 0) fail<ValueError>("{}: eps must be >= 0, got {}", type_name(), o.eps);
    if (!std::isfinite(o.weight_decay) || o.weight_decay < 0)
        fail<ValueError>("{}: weight_decay must be >= 0, got {}", type_name(), o.weight_decay);
    // m: running mean of the gradient; v: running mean of its square (PyTorch's names)
    set_slot_names({"exp_avg", "exp_avg_sq"});
}

namespace {

/// The step's constants, converted once to the parameter's element type.
/// The bias corrections are computed in double from the step count t.
template <class T>
struct AdamConstants {
    T beta1, beta2;
    T one_minus_beta1, one_minus_beta2;
    T l2;             // λ for Adam's L2 term, 0 for AdamW
    T decay;          // 1 - lr·λ for AdamW, 1 for Adam
    T step_size;      // lr / (1 - β1^t)
    T bias2_sqrt;     // √(1 - β2^t)
    T eps;
};

// torch.optim.Adam / AdamW, for each element, at step t (from 1):
//   p ← p·(1 - lr·λ)                       (AdamW only: decoupled decay)
//   g ← g + λ·p                            (Adam only: L2 decay)
//   m ← β1·m + (1-β1)·g
//   v ← β2·v + (1-β2)·g²
//   p ← p - lr/(1-β1^t) · m / (√v/√(1-β2^t) + eps)
// The last line is p - lr·m̂/(√v̂ + eps) with m̂ = m/(1-β1^t), v̂ = v/(1-β2^t),
// grouped as PyTorch groups it so float32 results round the same way.
// The gradient is only read: it may share storage with other gradients.
template <class T>
void adam_update(T* p, const T* grad, T* m, T* v, int64_t n, const AdamConstants<T>& c) {
    // each element is independent, so the split across threads cannot change a result
    core::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            T x = p[i];
            if (c.decay != T(1)) x = x * c.decay;
            T g = grad[i];
            if (c.l2 != T(0)) g = g + c.l2 * x;
            const T mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
            const T vi = c.beta2 * v[i] + c.one_minus_beta2 * g * g;
            m[i] = mi;
            v[i] = vi;
            const T denom = std::sqrt(vi) / c.bias2_sqrt + c.eps;
            p[i] = x - c.step_size * mi / denom;
        }
    });
}

}  // namespace

void Adam::update(const Tensor& param, const Tensor& grad, ParamState& state) {
    const double t = static_cast<double>(state.step);
    const double bias1 = 1 - std::pow(options_.betas[0], t);
    const double bias2 = 1 - std::pow(options_.betas[1], t);
    core::visit_floating(param.dtype(), "Adam.step", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const AdamConstants<T> c{.beta1 = static_cast<T>(options_.betas[0]),
                                 .beta2 = static_cast<T>(options_.betas[1]),
                                 .one_minus_beta1 = static_cast<T>(1 - options_.betas[0]),
                                 .one_minus_beta2 = static_cast<T>(1 - options_.betas[1]),
                                 .l2 = static_cast<T>(decoupled_ ? 0.0 : options_.weight_decay),
                                 .decay = static_cast<T>(decoupled_ ? 1 - lr() * options_.weight_decay : 1.0),
                                 .step_size = static_cast<T>(lr() / bias1),
                                 .bias2_sqrt = static_cast<T>(std::sqrt(bias2)),
                                 .eps = static_cast<T>(options_.eps)};
        adam_update<T>(param.data<T>(), grad.data<T>(), state.slots[0].data<T>(), state.slots[1].data<T>(),
                       param.numel(), c);
    });
}

}  // namespace tformer::optim
