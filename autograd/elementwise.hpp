/// \file
/// Differentiable elementwise ops (broadcasting like core/elementwise.hpp).
/// Each op's backward reduces the incoming gradient back to each input's
/// shape with core::sum_to_shape.
#pragma once

#include "autograd/variable.hpp"
#include "core/random.hpp"

namespace tformer::autograd {

/// y = -x; dx = -dy.
Variable neg(const Variable& x);
/// y = e^x; dx = dy ⊙ y.
Variable exp(const Variable& x);
/// y = ln x; dx = dy / x.
Variable log(const Variable& x);
/// y = √x; dx = dy / (2y).
Variable sqrt(const Variable& x);
/// y = tanh x; dx = dy ⊙ (1 - y²).
Variable tanh(const Variable& x);
/// y = max(x, 0); dx = dy where x > 0, else 0 (also at 0, as PyTorch).
Variable relu(const Variable& x);
/// y = 1/(1 + e^-x); dx = dy ⊙ y(1 - y).
Variable sigmoid(const Variable& x);
/// y = |x|; dx = dy ⊙ sign(x) (0 at 0, as PyTorch).
Variable abs(const Variable& x);
/// y = x^p; dx = dy ⊙ p x^(p-1) (0 for p = 0).
Variable pow(const Variable& x, double exponent);

/// y = a + b, broadcasting; da = dy, db = dy, each summed back to its input's shape.
Variable add(const Variable& a, const Variable& b);
/// y = a - b, broadcasting; da = dy, db = -dy.
Variable sub(const Variable& a, const Variable& b);
/// y = a ⊙ b, broadcasting; da = dy ⊙ b, db = dy ⊙ a.
Variable mul(const Variable& a, const Variable& b);
/// y = a / b, broadcasting; da = dy / b, db = -dy ⊙ a / b².
Variable div(const Variable& a, const Variable& b);
/// y = max(a, b), broadcasting; the larger input gets dy, each gets half on a tie (PyTorch).
Variable maximum(const Variable& a, const Variable& b);

/// y = a + s; da = dy.
Variable add(const Variable& a, double s);
/// y = a - s; da = dy.
Variable sub(const Variable& a, double s);
/// y = s - a; da = -dy.
Variable rsub(double s, const Variable& a);
/// y = a · s; da = dy · s.
Variable mul(const Variable& a, double s);
/// y = a / s; da = dy / s.
Variable div(const Variable& a, double s);
/// y = s / a; da = -dy ⊙ s / a².
Variable rdiv(double s, const Variable& a);

/// cond ? a : b with a bool mask cond (a constant: no gradient).
Variable where(const core::Tensor& cond, const Variable& a, const Variable& b);
/// x with `value` where the bool mask is true; no gradient flows there.
Variable masked_fill(const Variable& x, const core::Tensor& mask, double value);

/// Inverted dropout: in training, zero each element with probability p and
/// scale the survivors by 1/(1-p) so the expected value is unchanged; the
/// mask is saved for backward. Identity when !training or p == 0.
Variable dropout(const Variable& x, double p, bool training, core::Generator& gen = core::default_generator());

/// y = -x (neg).
inline Variable operator-(const Variable& x) { return neg(x); }
/// y = a + b (add).
inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
/// y = a - b (sub).
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
/// y = a ⊙ b (mul).
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
/// y = a / b (div).
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
/// y = a + s.
inline Variable operator+(const Variable& a, double s) { return add(a, s); }
/// y = a - s.
inline Variable operator-(const Variable& a, double s) { return sub(a, s); }
/// y = a · s.
inline Variable operator*(const Variable& a, double s) { return mul(a, s); }
/// y = a / s.
inline Variable operator/(const Variable& a, double s) { return div(a, s); }
/// y = s + a.
inline Variable operator+(double s, const Variable& a) { return add(a, s); }
/// y = s - a (rsub).
inline Variable operator-(double s, const Variable& a) { return rsub(s, a); }
/// y = s · a.
inline Variable operator*(double s, const Variable& a) { return mul(a, s); }
/// y = s / a (rdiv).
inline Variable operator/(double s, const Variable& a) { return rdiv(s, a); }

}  // namespace tformer::autograd
