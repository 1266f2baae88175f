// exp_fast (core/fast_exp.hpp) and its vector form exp_fast_lanes, which the
// fused attention's softmax uses: the same bits lane by lane, for every
// vector width the kernels use, on a sweep of the float range and on the
// values where the function changes branch.
// The test runs exp_fast_lanes on vectors of 16 floats (64 bytes) also on
// machines without AVX-512, where GCC notes (-Wpsabi) that returning such a
// vector uses another calling convention than with AVX-512. Every function
// that takes or returns one is inline in this file, so no call crosses
// between the two conventions: the note is silenced here alone.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#include "core/fast_exp.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

using namespace tformer::core;

namespace {

template <int N>
struct FloatsOf {
    typedef float type __attribute__((vector_size(N * sizeof(float))));
};
template <int N>
using Floats = typename FloatsOf<N>::type;

// the inputs: NaN, ±inf, ±0, the clamp bounds and their neighbours, the
// subnormal results, and a sweep of [-100, 100] in steps of 1/64 plus a
// thousand points between 87.3 and 88.8 (where the results overflow)
std::vector<float> inputs() {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    std::vector<float> x{std::numeric_limits<float>::quiet_NaN(),
                         -kInf,
                         kInf,
                         0.0f,
                         -0.0f,
                         -87.33654f,
                         88.72283f,
                         std::nextafter(-87.33654f, -kInf),
                         std::nextafter(-87.33654f, 0.0f),
                         std::nextafter(88.72283f, kInf),
                         std::nextafter(88.72283f, 0.0f),
                         -103.0f,
                         -1e30f,
                         1e30f,
                         std::numeric_limits<float>::denorm_min(),
                         std::numeric_limits<float>::max(),
                         -std::numeric_limits<float>::max()};
    for (int i = -6400; i <= 6400; ++i) x.push_back(static_cast<float>(i) / 64.0f);
    for (int i = 0; i < 1000; ++i) x.push_back(87.3f + 1.5f * static_cast<float>(i) / 1000.0f);
    return x;
}

template <int N>
void check_lanes(const std::vector<float>& x) {
    for (size_t i = 0; i < x.size(); i += N) {
        float in[N] = {};
        for (int l = 0; l < N && i + l < x.size(); ++l) in[l] = x[i + l];
        Floats<N> v;
        std::memcpy(&v, in, sizeof v);
        const Floats<N> y = exp_fast_lanes(v);
        float out[N];
        std::memcpy(out, &y, sizeof out);
        for (int l = 0; l < N; ++l) {
            INFO("width " << N << ", x = " << in[l]);
            REQUIRE(std::bit_cast<uint32_t>(out[l]) == std::bit_cast<uint32_t>(exp_fast(in[l])));
        }
    }
}

}  // namespace

TEST_CASE("exp_fast_lanes: the same bits as exp_fast on every lane, for vectors of 4, 8 and 16 floats", "[core][exp]") {
    const std::vector<float> x = inputs();
    check_lanes<4>(x);
    check_lanes<8>(x);
    check_lanes<16>(x);
}

TEST_CASE("exp_fast: within 3e-7 relative of std::exp up to 88.3, 0, +inf and NaN where it clamps", "[core][exp]") {
    for (const float x : inputs()) {
        if (std::isnan(x)) {
            CHECK(std::isnan(exp_fast(x)));
        } else if (x < -87.33654f) {
            CHECK(exp_fast(x) == 0.0f);
        } else if (x > 88.3f) {  // 2^n overflows from about 88.38 (the kernels' arguments are ≤ 0)
            const float y = exp_fast(x);
            if (x > 88.72283f || std::isinf(y))
                CHECK(y == std::numeric_limits<float>::infinity());
            else
                CHECK(std::abs(static_cast<double>(y) - std::exp(static_cast<double>(x))) <=
                      3e-7 * std::exp(static_cast<double>(x)));
        } else {
            const double want = std::exp(static_cast<double>(x));
            INFO("x = " << x);
            CHECK(std::abs(static_cast<double>(exp_fast(x)) - want) <= 3e-7 * want);
        }
    }
}
