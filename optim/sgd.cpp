#include "optim/sgd.hpp"

#include "core/parallel.hpp"

#include <cmath>
#include <type_traits>

namespace tformer::optim {

SGD::SGD(std::vector<Variable> params, SGDOptions options)
    : Optimizer("SGD", std::move(params), options.lr), options_(options) {
    init();
}

SGD::SGD(const NamedParameters& params, SGDOptions options) : Optimizer("SGD", params, options.lr), options_(options) {
    init();
}

void SGD::init() {
    const SGDOptions& o = options_;
    if (!std::isfinite(o.momentum) || o.momentum < 0)
        fail<ValueError>("SGD: momentum must be >= 0, got {}", o.momentum);
    if (!std::isfinite(o.dampening)) fail<ValueError>("SGD: dampening must be finite, got {}", o.dampening);
    if (!std::isfinite(o.weight_decay) || o.weight_decay < 0)
        fail<ValueError>("SGD: weight_decay must be >= 0, got {}", o.weight_decay);
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
        fail<ValueError>("SGD: nesterov momentum needs momentum > 0 and dampening 0, got momentum {} and dampening {}",
                         o.momentum, o.dampening);
    // Plain SGD keeps no per-element state; with momentum, one buffer per parameter.
    if (o.momentum != 0) set_slot_names({"momentum_buffer"});
}

namespace {

/// The step's constants, converted once to the parameter's element type.
template <class T>
struct SGDConstants {
    T lr, momentum, one_minus_dampening, weight_decay;
    bool first;  // the parameter's first update: the buffer starts as the gradient
};

// torch.optim.SGD, for each element (g the gradient, b the momentum buffer):
//   g ← g + λ·p                                   (weight decay, when λ ≠ 0)
//   b ← g on the first step, else μ·b + (1-τ)·g   (momentum, when μ ≠ 0)
//   g ← g + μ·b if nesterov, else b
//   p ← p - lr·g
// Each configuration gets its own loop (the template flags), so the loop
// body has no branches and the compiler vectorises it. `buffer` is null
// without momentum. The gradient is only read: it may share storage with
// other gradients.
template <bool kDecay, bool kMomentum, bool kNesterov, class T>
void sgd_update(T* p, const T* grad, T* buffer, int64_t n, const SGDConstants<T>& c) {
    // each element is independent, so the split across threads cannot change a result
    core::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            T g = grad[i];
            if constexpr (kDecay) g = g + c.weight_decay * p[i];
            if constexpr (kMomentum) {
                const T b = c.first ? g : c.momentum * buffer[i] + c.one_minus_dampening * g;
                buffer[i] = b;
                g = kNesterov ? g + c.momentum * b : b;
            }
            p[i] = p[i] - c.lr * g;
        }
    });
}

// Calls f(std::true_type{}) or f(std::false_type{}): turns a runtime flag into a template flag.
template <class F>
void with_flag(bool flag, F&& f) {
    if (flag)
        f(std::true_type{});
    else
        f(std::false_type{});
}

}  // namespace

void SGD::update(const Tensor& param, const Tensor& grad, ParamState& state) {
    core::visit_floating(param.dtype(), "SGD.step", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const SGDConstants<T> c{.lr = static_cast<T>(lr()),
                                .momentum = static_cast<T>(options_.momentum),
                                .one_minus_dampening = static_cast<T>(1 - options_.dampening),
                                .weight_decay = static_cast<T>(options_.weight_decay),
                                .first = state.step == 1};
        const bool momentum = options_.momentum != 0;
        T* buffer = momentum ? state.slots[0].data<T>() : nullptr;
        with_flag(options_.weight_decay != 0, [&](auto decay) {
            with_flag(momentum, [&](auto use_momentum) {
                with_flag(options_.nesterov, [&](auto nesterov) {
                    sgd_update<decay(), use_momentum(), nesterov()>(param.data<T>(), grad.data<T>(), buffer,
                                                                    param.numel(), c);
                });
            });
        });
    });
}

}  // namespace tformer::optim
