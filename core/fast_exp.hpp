/// \file
/// exp for the row-wise kernels, written so the compiler can vectorise it.
///
/// std::exp is a library call, which keeps a loop scalar; softmax and
/// cross-entropy spend most of their time in it (the output layer of a
/// translation model has thousands of logits per token). For float we use
/// the classic range reduction
///   exp(x) = 2^n · e^r,  n = round(x / ln 2),  r = x - n·ln 2 ∈ [-ln2/2, ln2/2]
/// with e^r from a degree-6 polynomial (Cephes' expf coefficients) and 2^n
/// built directly in the exponent bits: relative error about 2e-7, i.e. one
/// or two units in the last place of a float. Double keeps std::exp, so
/// gradient checks in float64 see the library's full precision.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace tformer::core {

namespace fast_exp_detail {
// The unsigned 32-bit integers with the layout of F: uint32_t for a float,
// a vector of as many uint32_t for a vector of floats.
template <class F>
struct Bits {
    typedef uint32_t type __attribute__((vector_size(sizeof(F))));
};
template <>
struct Bits<float> {
    using type = uint32_t;
};

// exp_fast's body, for a float or, lane by lane, for a vector of floats
// (GCC's and Clang's vector extension): one text, so both give the same bits.
template <class F>
inline F exp_fast(F x) {
    using U = typename Bits<F>::type;
    constexpr float lo = -87.33654f, hi = 88.72283f;
    const F xc = x < lo ? F{} + lo : (x > hi ? F{} + hi : x);  // NaN passes through both compares
    const F t = xc * 1.44269504088896341f;                     // x / ln 2
    // round to nearest by adding 1.5·2^23: the sum's low mantissa bits are n
    const F shifted = t + 12582912.0f;
    const F rounded = shifted - 12582912.0f;
    // r = x - n ln 2, with ln 2 split in two so the product is exact
    const F r = (xc - rounded * 0.693359375f) + rounded * 2.12194440e-4f;
    F p = F{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // 2^n built in the exponent bits, n + 127 = bits(shifted) - 0x4B400000 + 127
    // (unsigned: no overflow or shift UB for a NaN input)
    const F scale = std::bit_cast<F>((std::bit_cast<U>(shifted) - 0x4B400000u + 127u) << 23u);
    const F y = p * scale;
    return x < lo ? F{} : (x > hi ? F{} + INFINITY : y);
}
}  // namespace fast_exp_detail

/// e^x for float, vectorisable; 0 below -87.34 (where e^x leaves the normal
/// floats), +inf above 88.72 and already from about 88.38 on, where 2^n
/// passes 2^127 (the callers take exps of x - max ≤ 0), NaN for NaN.
inline float exp_fast(float x) { return fast_exp_detail::exp_fast(x); }

/// exp_fast on every lane of V, a vector of floats of GCC's and Clang's
/// vector extension: the same code, so the same bits as exp_fast on each
/// number. For kernels that hold their numbers in such vectors: a loop
/// calling exp_fast is vectorised too, but set up afresh (its constants
/// loaded, its remainder handled) every time it starts, which for a row of
/// 16 keys is most of the work.
template <class V>
inline V exp_fast_lanes(V x) {
    return fast_exp_detail::exp_fast(x);
}

/// exp_fast for float, std::exp for double.
inline float exp_of(float x) { return exp_fast(x); }
/// std::exp: double keeps the library's full precision for gradient checks.
inline double exp_of(double x) { return std::exp(x); }

}  // namespace tformer::core
