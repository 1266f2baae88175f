// Tutorial 02 · exercise. Replace the lines marked TODO, rebuild, and run
//   ./build/release/tutorials/tutorial_02_autograd --exercise
// until every check passes (solution.cpp has one answer; try first).
#include "exercise.hpp"

#include "core/core.hpp"

namespace exercise {

namespace ag = tformer::autograd;
namespace c = tformer::core;

ag::Variable cube(const ag::Variable& x) {
    c::Tensor y = c::pow(x.value(), 3);  // the forward is done: y = x³
    c::Tensor saved = x.value();         // what the backward may need
    return ag::record("cube", y, {x}, [saved](const c::Tensor& dy, ag::Grads& g) {
        (void)saved;
        g[0] = dy;  // TODO: the chain rule: dy times the derivative of x³
    });
}

c::Tensor tanh_version_grad_a(const c::Tensor& a, const c::Tensor& b) {
    return c::add(b, c::exp(a));  // TODO: this is step 4's answer for exp; what is it for tanh?
}

}  // namespace exercise
