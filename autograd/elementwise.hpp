// Differentiable elementwise ops (broadcasting like core/elementwise.hpp).
// Each op's backward reduces the incoming gradient back to each input's
// shape with core::sum_to_shape.
#pragma once

#include "autograd/variable.hpp"
#include "core/random.hpp"

namespace tformer::autograd {

Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable sqrt(const Variable& x);
Variable tanh(const Variable& x);
Variable relu(const Variable& x);
Variable sigmoid(const Variable& x);
Variable abs(const Variable& x);
Variable pow(const Variable& x, double exponent);

Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable maximum(const Variable& a, const Variable& b);

Variable add(const Variable& a, double s);
Variable sub(const Variable& a, double s);
Variable rsub(double s, const Variable& a);
Variable mul(const Variable& a, double s);
Variable div(const Variable& a, double s);
Variable rdiv(double s, const Variable& a);

/// cond ? a : b with a bool mask cond (a constant: no gradient).
Variable where(const core::Tensor& cond, const Variable& a, const Variable& b);
/// x with `value` where the bool mask is true; no gradient flows there.
Variable masked_fill(const Variable& x, const core::Tensor& mask, double value);

/// Inverted dropout: in training, zero each element with probability p and
/// scale the survivors by 1/(1-p) so the expected value is unchanged; the
/// mask is saved for backward. Identity when !training or p == 0.
Variable dropout(const Variable& x, double p, bool training, core::Generator& gen = core::default_generator());

inline Variable operator-(const Variable& x) { return neg(x); }
inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
inline Variable operator+(const Variable& a, double s) { return add(a, s); }
inline Variable operator-(const Variable& a, double s) { return sub(a, s); }
inline Variable operator*(const Variable& a, double s) { return mul(a, s); }
inline Variable operator/(const Variable& a, double s) { return div(a, s); }
inline Variable operator+(double s, const Variable& a) { return add(a, s); }
inline Variable operator-(double s, const Variable& a) { return rsub(s, a); }
inline Variable operator*(double s, const Variable& a) { return mul(a, s); }
inline Variable operator/(double s, const Variable& a) { return rdiv(s, a); }

}  // namespace tformer::autograd
