#include "core/mask.hpp"

#include <bit>
#include <cstring>

namespace tformer::core {

namespace {

// Packs `n` elements of `m` (only +0 and `one` occur) into 64-bit words;
// false if some element is neither (the mask is then kept whole).
template <class T>
bool pack_bits(const T* m, int64_t n, T one, uint64_t* words) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const Bits one_bits = std::bit_cast<Bits>(one);
    bool ok = true;
    for (int64_t w = 0; w * 64 < n; ++w) {
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

template <class T>
void unpack_bits(const uint64_t* words, int64_t n, T one, T* m) {
    for (int64_t w = 0; w * 64 < n; ++w) {
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
