// exp for the row-wise kernels, written so the compiler can vectorise it.
//
// std::exp is a library call, which keeps a loop scalar; softmax and
// cross-entropy spend most of their time in it (the output layer of a
// translation model has thousands of logits per token). For float we use
// the classic range reduction
//   exp(x) = 2^n · e^r,  n = round(x / ln 2),  r = x - n·ln 2 ∈ [-ln2/2, ln2/2]
// with e^r from a degree-6 polynomial (Cephes' expf coefficients) and 2^n
// built directly in the exponent bits: relative error about 2e-7, i.e. one
// or two units in the last place of a float. Double keeps std::exp, so
// gradient checks in float64 see the library's full precision.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace tformer::core {

/// e^x for float, vectorisable; 0 below -87.34 (where e^x leaves the normal
/// floats), +inf above 88.72, NaN for NaN.
inline float exp_fast(float x) {
    constexpr float lo = -87.33654f, hi = 88.72283f;
    const float xc = x < lo ? lo : (x > hi ? hi : x);  // NaN passes through both compares
    const float t = xc * 1.44269504088896341f;         // x / ln 2
    // round to nearest by adding 1.5·2^23: the sum's low mantissa bits are n
    const float shifted = t + 12582912.0f;
    const float rounded = shifted - 12582912.0f;
    const int32_t n = std::bit_cast<int32_t>(shifted) - 0x4B400000;
    // r = x - n ln 2, with ln 2 split in two so the product is exact
    const float r = (xc - rounded * 0.693359375f) + rounded * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const float scale =
        std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23);  // 2^n (unsigned: no shift UB for NaN input)
    const float y = p * scale;
    return x < lo ? 0.0f : (x > hi ? INFINITY : y);
}

/// exp_fast for float, std::exp for double.
inline float exp_of(float x) { return exp_fast(x); }
inline double exp_of(double x) { return std::exp(x); }

}  // namespace tformer::core
