/// \file
/// Walking strided tensors. Kernels that accept any layout (transposed,
/// sliced, broadcast) loop over "runs": stretches along the innermost
/// dimension where every operand advances by a fixed stride. Dimensions that
/// are contiguous in every operand are merged first (coalesced), so a
/// contiguous tensor is a single run and the loop body is a plain for-loop.
#pragma once

#include "core/parallel.hpp"
#include "core/shape.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace tformer::core {

/// N operands of one shape, with their strides and starting offsets.
template <size_t N>
struct StridedLoop {
    /// The common shape after merging (only dimensions larger than 1 are left).
    Shape shape;
    /// Each operand's strides over `shape`, in elements.
    std::array<Strides, N> strides;

    /// Merges dimension pairs (d, d+1) where every operand has
    /// stride[d] == stride[d+1] * shape[d+1], and drops size-1 dimensions.
    StridedLoop(const Shape& s, const std::array<Strides, N>& st) {
        // drop size-1 dims (their stride never matters)
        for (int d = 0; d < s.size(); ++d) {
            if (s[d] == 1) continue;
            shape.push_back(s[d]);
            for (size_t k = 0; k < N; ++k) strides[k].push_back(st[k][d]);
        }
        // merge from the innermost outwards
        int out = shape.size() - 1;
        for (int d = shape.size() - 2; d >= 0 && out >= 0; --d) {
            bool mergeable = true;
            for (size_t k = 0; k < N; ++k)
                if (strides[k][d] != strides[k][out] * shape[out]) mergeable = false;
            if (mergeable) {
                shape[out] *= shape[d];
                shape[d] = 1;  // mark merged
            } else {
                out = d;
            }
        }
        Shape merged_shape;
        std::array<Strides, N> merged_strides;
        for (int d = 0; d < shape.size(); ++d) {
            if (shape[d] == 1) continue;
            merged_shape.push_back(shape[d]);
            for (size_t k = 0; k < N; ++k) merged_strides[k].push_back(strides[k][d]);
        }
        shape = merged_shape;
        strides = merged_strides;
    }

    /// Length of one run (the innermost dimension; 1 for a scalar).
    int64_t run_length() const { return shape.empty() ? 1 : shape.back(); }
    /// How many runs there are.
    int64_t num_runs() const {
        int64_t n = 1;
        for (int d = 0; d + 1 < shape.size(); ++d) n *= shape[d];
        return n;
    }
    /// Innermost stride of operand k.
    int64_t inner_stride(size_t k) const { return shape.empty() ? 0 : strides[k].back(); }

    /// Calls body(len, offsets) for runs [first, last): offsets[k] is where
    /// operand k's run starts (base[k] plus the outer indices times strides).
    template <class Body>
    void for_runs(int64_t first, int64_t last, const std::array<int64_t, N>& base, Body&& body) const {
        if (first >= last) return;
        const int outer = shape.size() - 1;  // number of outer dims
        std::array<int64_t, kMaxDims> index{};
        // unravel `first` into outer indices
        int64_t rest = first;
        for (int d = outer - 1; d >= 0; --d) {
            index[d] = rest % shape[d];
            rest /= shape[d];
        }
        std::array<int64_t, N> offsets{};
        for (size_t k = 0; k < N; ++k) {
            offsets[k] = base[k];
            for (int d = 0; d < outer; ++d) offsets[k] += index[d] * strides[k][d];
        }
        const int64_t len = run_length();
        for (int64_t r = first; r < last; ++r) {
            body(len, offsets);
            // odometer increment of the outer indices
            for (int d = outer - 1; d >= 0; --d) {
                ++index[d];
                for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
                if (index[d] < shape[d]) break;
                for (size_t k = 0; k < N; ++k) offsets[k] -= index[d] * strides[k][d];
                index[d] = 0;
            }
        }
    }

    /// All runs, split across threads when the tensor is large.
    template <class Body>
    void for_all_runs(const std::array<int64_t, N>& base, Body&& body) const {
        parallel_for(0, num_runs(), run_length(),
                     [&](int64_t first, int64_t last) { for_runs(first, last, base, body); });
    }
};

}  // namespace tformer::core
