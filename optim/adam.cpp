#include "optim/adam.hpp"

#include "core/parallel.hpp"

#include <cmath>

// Explicit SIMD batches for the update loop (libstdc++ has had them since GCC 11).
#if __has_include(<experimental/simd>)
// With AVX-512, GCC 12 warns 12 times that '__Y' "may be used uninitialized"
// in avx512fintrin.h: the intrinsics that <experimental/simd> calls (the
// square root) pass _mm512_undefined_ps(), whose `__m512 __Y = __Y;` is
// uninitialised on purpose, as the pass-through operand of a masked
// instruction whose mask selects every lane, so none of it is ever read.
// The warning is about the header's own code, so it is silenced for the
// header alone; our code below is still checked. (clang has no such
// warning, and would warn about the unknown name.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <experimental/simd>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#define TFORMER_OPTIM_SIMD 1
namespace stdx = std::experimental;
#else
#define TFORMER_OPTIM_SIMD 0
#endif

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
    T l2;          // λ of Adam's L2 term
    T decay;       // 1 - lr·λ of AdamW's decoupled decay
    T step_size;   // lr / (1 - β1^t)
    T bias2_sqrt;  // √(1 - β2^t)
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
//
// `x` and `g` are one element or one SIMD batch of them (see adam_update);
// m and v are updated through the references, the new p is returned.
template <bool kL2, bool kDecoupled, class V, class T>
V adam_element(V x, V g, V& m, V& v, const AdamConstants<T>& c) {
    using std::sqrt;  // std::sqrt for one element, the SIMD sqrt (found by ADL) for a batch
    if constexpr (kDecoupled) x = x * c.decay;
    if constexpr (kL2) g = g + c.l2 * x;
    m = c.beta1 * m + c.one_minus_beta1 * g;
    v = c.beta2 * v + c.one_minus_beta2 * g * g;
    const V denom = sqrt(v) / c.bias2_sqrt + c.eps;
    return x - c.step_size * m / denom;
}

// The update over a whole parameter. GCC does not vectorise a loop that
// calls std::sqrt (which may set errno) unless built with -fno-math-errno,
// so the loop loads SIMD batches explicitly; the elements left over at the
// end go through the very same formula one at a time. SIMD and scalar
// sqrt, ·, / and + are all correctly rounded, so both give identical bits.
// The gradient is only read: it may share storage with other gradients.
template <bool kL2, bool kDecoupled, class T>
void adam_update(T* p, const T* grad, T* m, T* v, int64_t n, const AdamConstants<T>& c) {
    // each element is independent, so the split across threads cannot change a result
    core::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
        int64_t i = begin;
#if TFORMER_OPTIM_SIMD
        using Batch = stdx::native_simd<T>;
        constexpr int64_t width = static_cast<int64_t>(Batch::size());
        constexpr auto unaligned = stdx::element_aligned;
        for (; i + width <= end; i += width) {
            Batch mi(m + i, unaligned), vi(v + i, unaligned);
            const Batch x =
                adam_element<kL2, kDecoupled>(Batch(p + i, unaligned), Batch(grad + i, unaligned), mi, vi, c);
            x.copy_to(p + i, unaligned);
            mi.copy_to(m + i, unaligned);
            vi.copy_to(v + i, unaligned);
        }
#endif
        for (; i < end; ++i) p[i] = adam_element<kL2, kDecoupled>(p[i], grad[i], m[i], v[i], c);
    });
}

}  // namespace

void Adam::update(const Tensor& param, const Tensor& grad, ParamState& state) {
    const double t = static_cast<double>(state.step);
    const double bias1 = 1 - std::pow(options_.betas[0], t);
    const double bias2 = 1 - std::pow(options_.betas[1], t);
    const double wd = options_.weight_decay;
    core::visit_floating(param.dtype(), "Adam.step", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const AdamConstants<T> c{.beta1 = static_cast<T>(options_.betas[0]),
                                 .beta2 = static_cast<T>(options_.betas[1]),
                                 .one_minus_beta1 = static_cast<T>(1 - options_.betas[0]),
                                 .one_minus_beta2 = static_cast<T>(1 - options_.betas[1]),
                                 .l2 = static_cast<T>(wd),
                                 .decay = static_cast<T>(1 - lr() * wd),
                                 .step_size = static_cast<T>(lr() / bias1),
                                 .bias2_sqrt = static_cast<T>(std::sqrt(bias2)),
                                 .eps = static_cast<T>(options_.eps)};
        T* p = param.data<T>();
        const T* g = grad.data<T>();
        T* m = state.slots[0].data<T>();
        T* v = state.slots[1].data<T>();
        const int64_t n = param.numel();
        // one loop per kind of decay, so the loop carries no branches
        if (wd == 0)
            adam_update<false, false>(p, g, m, v, n, c);
        else if (decoupled_)
            adam_update<false, true>(p, g, m, v, n, c);
        else
            adam_update<true, false>(p, g, m, v, n, c);
    });
}

}  // namespace tformer::optim
