/// \file
/// Elementwise kernels with NumPy broadcasting.
///
/// Every binary op broadcasts its inputs (shapes are aligned from the right,
/// size-1 dimensions stretch: (B, T, D) + (D) and (B, 1, S) + (B, T, 1) both
/// work), accepts any strides (transposed, sliced, expanded views), and
/// returns a new contiguous tensor. The dtype rules:
/// ```
///   math ops (unary, binary, scalar variants, add_, mul_)  float32 or float64,
///       both inputs the same dtype; mixing them is a ValueError
///   comparisons      float32, float64 or int64 (the same for both), -> bool
///   logical_*        bool masks
///   where            bool condition; a and b of one dtype (any)
///   masked_fill      any x, bool mask
/// ```
/// Shapes that do not broadcast are a ShapeError naming the op:
/// ```
///   add: cannot broadcast (2x3) with (4) at dimension 1
/// ```
/// Each fast kernel has a plain-loop twin in namespace `reference`, the oracle
/// the tests compare against.
#pragma once

#include "core/tensor.hpp"

namespace tformer::core {

// ---- unary ----------------------------------------------------------------------

/// y = -x
Tensor neg(const Tensor& x);
/// y = e^x
Tensor exp(const Tensor& x);
/// y = ln x
Tensor log(const Tensor& x);
/// y = √x
Tensor sqrt(const Tensor& x);
/// y = 1/√x
Tensor rsqrt(const Tensor& x);
/// y = tanh x
Tensor tanh(const Tensor& x);
/// y = max(x, 0)
Tensor relu(const Tensor& x);
/// y = 1/(1+e^-x), computed without overflow (exactly 0 or 1 far out, never NaN).
Tensor sigmoid(const Tensor& x);
/// y = |x|
Tensor abs(const Tensor& x);
/// y = -1, 0 or 1 with the sign of x.
Tensor sign(const Tensor& x);
/// y = x^p; p = 2 is exactly x·x, and negative x with an integer p works.
Tensor pow(const Tensor& x, double exponent);

// ---- binary (broadcasting) ----------------------------------------------------------

/// y = a + b
Tensor add(const Tensor& a, const Tensor& b);
/// y = a - b
Tensor sub(const Tensor& a, const Tensor& b);
/// y = a · b
Tensor mul(const Tensor& a, const Tensor& b);
/// y = a / b
Tensor div(const Tensor& a, const Tensor& b);
/// y = max(a, b); NaN if either is NaN.
Tensor maximum(const Tensor& a, const Tensor& b);
/// y = min(a, b); NaN if either is NaN.
Tensor minimum(const Tensor& a, const Tensor& b);
/// ReLU's backward in one pass: dx = dy where y > 0, else 0 (y = relu(x)).
Tensor relu_backward(const Tensor& dy, const Tensor& y);

// ---- scalar variants (s is converted to a's dtype) --------------------------------------

/// y = a + s
Tensor add(const Tensor& a, double s);
/// y = a - s
Tensor sub(const Tensor& a, double s);
/// y = s - a
Tensor rsub(double s, const Tensor& a);
/// y = a · s
Tensor mul(const Tensor& a, double s);
/// y = a / s
Tensor div(const Tensor& a, double s);
/// y = s / a
Tensor rdiv(double s, const Tensor& a);
/// y = max(a, s)
Tensor maximum(const Tensor& a, double s);

// ---- comparisons -> bool masks ----------------------------------------------------------
// With a scalar, s is converted to a's dtype when a is floating (so eq(x, 0.1)
// on float32 compares with 0.1f, as PyTorch does) and an int64 a is compared
// with s as a double (so lt(ids, 2.5) means ids <= 2).

/// a == b
Tensor eq(const Tensor& a, const Tensor& b);
/// a != b
Tensor ne(const Tensor& a, const Tensor& b);
/// a < b
Tensor lt(const Tensor& a, const Tensor& b);
/// a <= b
Tensor le(const Tensor& a, const Tensor& b);
/// a > b
Tensor gt(const Tensor& a, const Tensor& b);
/// a >= b
Tensor ge(const Tensor& a, const Tensor& b);
/// a == s
Tensor eq(const Tensor& a, double s);
/// a != s
Tensor ne(const Tensor& a, double s);
/// a < s
Tensor lt(const Tensor& a, double s);
/// a <= s
Tensor le(const Tensor& a, double s);
/// a > s
Tensor gt(const Tensor& a, double s);
/// a >= s
Tensor ge(const Tensor& a, double s);
/// Elementwise NOT of a bool mask.
Tensor logical_not(const Tensor& mask);
/// Elementwise AND of bool masks (broadcasting).
Tensor logical_and(const Tensor& a, const Tensor& b);
/// Elementwise OR of bool masks (broadcasting).
Tensor logical_or(const Tensor& a, const Tensor& b);

// ---- selection ------------------------------------------------------------------------------

/// cond ? a : b, all three broadcast together; cond is a bool mask, a and b share a dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever the bool mask (broadcast to x's shape) is true; the
/// result has x's shape and dtype. E.g. scores (B, T, S) with a mask (B, 1, S).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- in place (optimizers, gradient accumulation) -------------------------------------------

/// dst += alpha * src, with src broadcast to dst's shape; dst may be any view
/// except one that repeats an element (an expanded dimension with stride 0).
void add_(const Tensor& dst, const Tensor& src, double alpha = 1.0);
/// dst *= s; dst may be any view (with the same exception as add_).
void mul_(const Tensor& dst, double s);
/// dst = max(dst, 0) (the ReLU of a fused linear + ReLU, written over the
/// linear's output); dst may be any view (with the same exception as add_).
void relu_(const Tensor& dst);

// ---- operators -------------------------------------------------------------------------------
/// y = -x (neg)
inline Tensor operator-(const Tensor& x) { return neg(x); }
/// y = a + b (add, broadcasting)
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
/// y = a - b (sub, broadcasting)
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
/// y = a · b (mul, broadcasting)
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
/// y = a / b (div, broadcasting)
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
/// y = a + s
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
/// y = a - s
inline Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
/// y = a · s
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
/// y = a / s
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
/// y = s + a
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
/// y = s - a (rsub)
inline Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
/// y = s · a
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
/// y = s / a (rdiv)
inline Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }

/// Plain-loop versions, the oracles for the tests: element by element through
/// Tensor::at and Tensor::set, with f evaluated in double. The result has the
/// broadcast shape and the dtype of x (unary) or a (binary).
namespace reference {
/// y = f(x) element by element: the oracle for the unary ops.
Tensor unary(const Tensor& x, double (*f)(double));
/// y = f(a, b) element by element, broadcasting: the oracle for the binary ops.
Tensor binary(const Tensor& a, const Tensor& b, double (*f)(double, double));
}  // namespace reference

}  // namespace tformer::core
