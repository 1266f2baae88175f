// Elementwise kernels with NumPy broadcasting.
//
// Every binary op broadcasts its inputs (aligning shapes from the right,
// size-1 dimensions stretch), accepts any strides, and returns a new
// contiguous tensor. Inputs must share a floating dtype (float32 or float64);
// mixing them is a ValueError. Comparisons return bool masks.
// Each fast kernel has a plain-loop twin in namespace `reference`, the oracle
// the tests compare against.
#pragma once

#include "core/tensor.hpp"

namespace tformer::core {

// ---- unary ----------------------------------------------------------------------
Tensor neg(const Tensor& x);      // -x
Tensor exp(const Tensor& x);      // e^x
Tensor log(const Tensor& x);      // ln x
Tensor sqrt(const Tensor& x);     // √x
Tensor rsqrt(const Tensor& x);    // 1/√x
Tensor tanh(const Tensor& x);     // tanh x
Tensor relu(const Tensor& x);     // max(x, 0)
Tensor sigmoid(const Tensor& x);  // 1/(1+e^-x), computed without overflow
Tensor abs(const Tensor& x);      // |x|
Tensor sign(const Tensor& x);     // -1, 0 or 1
Tensor pow(const Tensor& x, double exponent);  // x^p

// ---- binary (broadcasting) ----------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// ---- scalar variants ------------------------------------------------------------------
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, double s);
Tensor rsub(double s, const Tensor& a);  // s - a
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);
Tensor rdiv(double s, const Tensor& a);  // s / a
Tensor maximum(const Tensor& a, double s);

// ---- comparisons -> bool masks ----------------------------------------------------------
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);
/// Elementwise NOT / AND / OR of bool masks (broadcasting).
Tensor logical_not(const Tensor& mask);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);

// ---- selection ------------------------------------------------------------------------------
/// cond ? a : b, all three broadcast together; cond is a bool mask.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever the bool mask (broadcast to x's shape) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- in place (optimizers, gradient accumulation) -------------------------------------------
/// dst += alpha * src, with src broadcast to dst's shape; dst may be a view.
void add_(const Tensor& dst, const Tensor& src, double alpha = 1.0);
/// dst *= s.
void mul_(const Tensor& dst, double s);

// ---- operators -------------------------------------------------------------------------------
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }

/// Plain-loop versions (element by element through Tensor::at), the oracles for the tests.
namespace reference {
Tensor unary(const Tensor& x, double (*f)(double));
Tensor binary(const Tensor& a, const Tensor& b, double (*f)(double, double));
}  // namespace reference

}  // namespace tformer::core
