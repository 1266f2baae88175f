#include "core/mask.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cstring>

namespace tformer::core {

namespace {

// Packs `n` elements of `m` (only +0 and `one` occur) into 64-bit words;
// false if some element is neither (the mask is then kept whole). Whole
// words go 16 floats (8 doubles) per AVX-512 comparison when the build has
// it: the loop below it, one element at a time, cost the d2l preset's
// training step about 10% at 2 threads (a mask per add+norm, attention and
// embedding, packed in the forward pass); the last partial word, and
// builds without AVX-512, take that loop.
template <class T>
bool pack_bits(const T* m, int64_t n, T one, uint64_t* words) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const Bits one_bits = std::bit_cast<Bits>(one);
    int64_t w = 0;
#if defined(__AVX512F__)
    uint64_t bad = 0;  // elements neither +0 nor `one`, as mask bits
    constexpr int64_t kLanes = 64 / sizeof(T);
    for (; (w + 1) * 64 <= n; ++w) {
        uint64_t word = 0;
        for (int64_t j = 0; j < 64 / kLanes; ++j) {
            const __m512i v = _mm512_loadu_si512(m + w * 64 + j * kLanes);
            uint64_t nonzero, is_one;
            if constexpr (sizeof(T) == 4) {
                nonzero = _mm512_test_epi32_mask(v, v);
                is_one = _mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(static_cast<int>(one_bits)));
            } else {
                nonzero = _mm512_test_epi64_mask(v, v);
                is_one = _mm512_cmpeq_epi64_mask(v, _mm512_set1_epi64(static_cast<long long>(one_bits)));
            }
            word |= nonzero << (j * kLanes);
            bad |= nonzero & ~is_one;
        }
        words[w] = word;
    }
    bool ok = bad == 0;
#else
    bool ok = true;
#endif
    for (; w * 64 < n; ++w) {
        const int64_t end = std::min<int64_t>(64, n - w * 64);
        uint64_t word = 0;
        for (int64_t i = 0; i < end; ++i) {
            const Bits b = std::bit_cast<Bits>(m[w * 64 + i]);
            ok = ok && (b == 0 || b == one_bits);
            word |= static_cast<uint64_t>(b != 0) << i;
        }
        words[w] = word;
    }
    return ok;
}

// The inverse: element i is `one` where its bit is set, +0 elsewhere.
template <class T>
void unpack_bits(const uint64_t* words, int64_t n, T one, T* m) {
    int64_t w = 0;
#if defined(__AVX512F__)
    for (; (w + 1) * 64 <= n; ++w) {
        const uint64_t word = words[w];
        if constexpr (sizeof(T) == 4) {
            for (int64_t j = 0; j < 4; ++j)
                _mm512_storeu_ps(m + w * 64 + j * 16,
                                 _mm512_maskz_mov_ps(static_cast<__mmask16>(word >> (16 * j)), _mm512_set1_ps(one)));
        } else {
            for (int64_t j = 0; j < 8; ++j)
                _mm512_storeu_pd(m + w * 64 + j * 8,
                                 _mm512_maskz_mov_pd(static_cast<__mmask8>(word >> (8 * j)), _mm512_set1_pd(one)));
        }
    }
#endif
    for (; w * 64 < n; ++w) {
        const int64_t end = std::min<int64_t>(64, n - w * 64);
        const uint64_t word = words[w];
        for (int64_t i = 0; i < end; ++i) m[w * 64 + i] = (word >> i) & 1 ? one : T(0);
    }
}

}  // namespace

PackedMask::PackedMask(const Tensor& keep) : shape_(keep.defined() ? keep.shape() : Shape{}) {
    if (!keep.defined()) return;
    dtype_ = keep.dtype();
    const int64_t n = keep.numel();
    if (n < kMinPackedElements || !keep.is_contiguous() || !is_floating(dtype_)) {
        whole_ = keep;
        return;
    }
    bool packed = false;
    Tensor bits = Tensor::empty({(n + 63) / 64}, DType::int64);
    visit_floating(dtype_, "PackedMask", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* m = keep.data<T>();
        T one = 0;  // the first nonzero element's value; every other nonzero must have its bits
        for (int64_t i = 0; i < n && one == T(0); ++i) one = m[i];
        packed = pack_bits<T>(m, n, one, reinterpret_cast<uint64_t*>(bits.data<int64_t>()));
        value_ = static_cast<double>(one);
    });
    if (packed)
        bits_ = std::move(bits);
    else
        whole_ = keep;
}

Tensor PackedMask::unpack() const {
    if (!bits_.defined()) return whole_;
    Tensor m = Tensor::empty(shape_, dtype_);
    visit_floating(dtype_, "PackedMask", [&](auto tag) {
        using T = typename decltype(tag)::type;
        unpack_bits<T>(reinterpret_cast<const uint64_t*>(bits_.data<int64_t>()), m.numel(), static_cast<T>(value_),
                       m.data<T>());
    });
    return m;
}

}  // namespace tformer::core
