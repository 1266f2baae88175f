/// \file
/// core::PackedMask: a dropout mask kept for backward in one bit per element.
///
/// Inverted dropout multiplies by a mask m with m_i ∈ {0, 1/(1-p)}. Backward
/// needs m again (dx = dy ⊙ m), but a float32 copy costs 4 bytes per element
/// for one bit of information. PackedMask keeps that bit and the one nonzero
/// value, and unpack() rebuilds the mask bit for bit. A mask with any other
/// values (a caller's own), a strided view, or a small mask (under
/// kMinPackedElements: packing would cost more time than its bytes are
/// worth) is kept as it is.
#pragma once

#include "core/tensor.hpp"

namespace tformer::core {

/// A dropout mask for backward: one bit per element and the one nonzero value,
/// or the mask itself when it cannot be packed (see the file comment).
class PackedMask {
public:
    /// Masks with fewer elements are kept unpacked.
    static constexpr int64_t kMinPackedElements = 1 << 14;

    /// No mask (dropout was off).
    PackedMask() = default;
    /// Packs `keep` when it holds only +0 and one other value; keeps it otherwise.
    explicit PackedMask(const Tensor& keep);

    /// True unless this is the empty mask of PackedMask().
    bool defined() const { return whole_.defined() || bits_.defined(); }
    /// True when the mask is held as bits (tests).
    bool packed() const { return bits_.defined(); }
    /// The mask as it was given: same shape, dtype and bits.
    Tensor unpack() const;

private:
    Tensor whole_;  // the mask itself, when it was not packed
    Tensor bits_;   // int64 words, bit i of word w for element 64·w + i
    Shape shape_;
    DType dtype_ = DType::float32;
    double value_ = 0;  // the nonzero value (exact in the mask's dtype)
};

}  // namespace tformer::core
