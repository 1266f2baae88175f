#include "core/random.hpp"

#include "core/error.hpp"

#include <cmath>
#include <numbers>

namespace tformer::core {

namespace {
// splitmix64: spreads one 64-bit seed over the four words of xoshiro's state.
uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
}  // namespace

void Generator::manual_seed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& word : s_) word = splitmix64(x);
}

double Generator::normal() {
    // Box-Muller: sqrt(-2 ln u1) cos(2 pi u2), with u1 in (0, 1] so the log is finite.
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

int64_t Generator::randint(int64_t n) {
    if (n <= 0) fail<ValueError>("Generator::randint: upper bound must be positive, got {}", n);
    // rejection sampling keeps every value equally likely
    const uint64_t un = static_cast<uint64_t>(n);
    const uint64_t limit = UINT64_MAX - UINT64_MAX % un;
    uint64_t r;
    do {
        r = next_u64();
    } while (r >= limit);
    return static_cast<int64_t>(r % un);
}

Generator& default_generator() {
    static Generator gen(0);
    return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace tformer::core
