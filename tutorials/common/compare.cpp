#include "common/compare.hpp"

#include "core/core.hpp"

namespace tformer::tutorial {

double max_abs(const core::Tensor& x) { return core::max(core::abs(x)).item(); }

double max_abs_diff(const core::Tensor& a, const core::Tensor& b) { return max_abs(core::sub(a, b)); }

bool allclose_to(const core::Tensor& actual, const core::Tensor& expected, double tol) {
    const core::Tensor a = actual.to(core::DType::float64), b = expected.to(core::DType::float64);
    const core::Tensor excess = core::sub(core::abs(core::sub(a, b)), core::mul(core::add(core::abs(b), 1.0), tol));
    return core::max(excess).item() <= 0;
}

int matching_gradients(Tutorial& t, const nn::Module& module, const Reference& ref, double tol) {
    int matched = 0;
    for (const auto& [name, p] : module.named_parameters()) {
        const core::Tensor& theirs = ref["grad.param." + name];
        const bool ok = allclose_to(p.grad(), theirs, tol);
        matched += ok;
        const std::string what = "d/d " + name;  // a parameter's name reads the same in both languages
        if (!ok) t.check_allclose(p.grad(), theirs, tol, both(what));
    }
    return matched;
}

}  // namespace tformer::tutorial
