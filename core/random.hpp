/// \file
/// One seeded random generator for everything random in tformer (weights,
/// dropout masks, data). The same seed gives the same numbers on every
/// machine and thread count: the numbers are drawn sequentially from
/// xoshiro256** (seeded through splitmix64), and normals come from the
/// Box-Muller transform, both written out here rather than taken from
/// `<random>`, whose distributions differ between standard libraries.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <utility>

namespace tformer::core {

/// A seeded random number generator: xoshiro256** for the bits, Box-Muller for
/// normals. Copying a Generator copies its state, so the copy repeats the stream.
class Generator {
public:
    /// Full state, for checkpoints that must resume exactly.
    using State = std::array<uint64_t, 4>;

    /// A generator seeded with `seed` (the same seed, the same stream).
    explicit Generator(uint64_t seed = 0) { manual_seed(seed); }

    /// Restarts the stream from `seed`.
    void manual_seed(uint64_t seed);

    /// Next raw 64-bit number: xoshiro256** (Blackman and Vigna), four words
    /// of state, period 2^256 - 1. Inline, since dropout draws one per element.
    uint64_t next_u64() {
        const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = std::rotl(s_[3], 45);
        return result;
    }

    /// Uniform in [0, 1) with 53 random bits (the top 53 of next_u64()).
    double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

    /// Standard normal (Box-Muller; uses two uniforms per call).
    double normal();

    /// Uniform integer in [0, n); throws ValueError when n <= 0.
    int64_t randint(int64_t n);

    /// The full state, to save in a checkpoint.
    State state() const { return s_; }
    /// Restores a state saved by state(); the stream continues from where it was saved.
    void set_state(const State& s) { s_ = s; }

private:
    State s_{};
};

/// The process-wide generator used when none is passed.
Generator& default_generator();

/// Seeds the process-wide generator.
void manual_seed(uint64_t seed);

/// A seed for the stream numbered (a, b) of a run seeded with `seed`, so
/// that, say, epoch 7's shuffle is the same whatever ran before it (an exact
/// resume needs that). Distinct (a, b) give unrelated streams.
inline uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
    uint64_t x = seed ^ (a * 0x9e3779b97f4a7c15ULL) ^ (b * 0xc2b2ae3d27d4eb4fULL);
    x ^= x >> 31;
    return x * 0xbf58476d1ce4e5b9ULL;
}

/// Fisher-Yates shuffle of [first, last) with `gen`.
template <class It>
void shuffle(It first, It last, Generator& gen) {
    for (auto n = last - first; n > 1; --n) std::swap(first[n - 1], first[gen.randint(n)]);
}

}  // namespace tformer::core
