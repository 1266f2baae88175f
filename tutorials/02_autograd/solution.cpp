// Tutorial 02 · one solution of the exercise (see exercise.cpp).
#include "exercise.hpp"

#include "core/core.hpp"

namespace exercise {

namespace ag = tformer::autograd;
namespace c = tformer::core;

// y = x³, dy/dx = 3x²: backward keeps x (not y) because the derivative needs x.
ag::Variable cube(const ag::Variable& x) {
    c::Tensor y = c::pow(x.value(), 3);
    c::Tensor saved = x.value();
    return ag::record("cube", y, {x},
                      [saved](const c::Tensor& dy, ag::Grads& g) { g[0] = c::mul(dy, c::mul(c::pow(saved, 2), 3.0)); });
}

// d/da (a·b + tanh a) = b + 1 - tanh²(a)
c::Tensor tanh_version_grad_a(const c::Tensor& a, const c::Tensor& b) {
    const c::Tensor t = c::tanh(a);
    return c::add(b, c::rsub(1.0, c::mul(t, t)));
}

}  // namespace exercise
