/// \file
/// Shape and strides: a small vector of dimension sizes kept inline (no heap
/// allocation), because tiny tensors are the common case in small
/// Transformers and every op creates a few of them.
#pragma once

#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace tformer::core {

/// The most dimensions a tensor may have.
inline constexpr int kMaxDims = 8;

/// A list of at most kMaxDims int64 values (sizes or strides), stored inline.
class Dims {
public:
    /// An empty list (the shape of a 0-d tensor).
    Dims() = default;
    /// The given values, e.g. Dims{2, 3, 4}; ShapeError beyond kMaxDims.
    Dims(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
    /// A copy of `values`; ShapeError beyond kMaxDims.
    explicit Dims(std::span<const int64_t> values) { assign(values.begin(), values.end()); }
    /// A copy of `values`; ShapeError beyond kMaxDims.
    explicit Dims(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }

    /// n copies of value.
    static Dims filled(int n, int64_t value) {
        Dims d;
        d.resize(n, value);
        return d;
    }

    /// Number of values (a tensor's number of dimensions).
    int size() const { return size_; }
    /// True when there are no values (a 0-d shape).
    bool empty() const { return size_ == 0; }
    /// Value i, writable (no range check).
    int64_t& operator[](int i) { return values_[i]; }
    /// Value i (no range check).
    int64_t operator[](int i) const { return values_[i]; }
    /// Iterator to the first value.
    int64_t* begin() { return values_.data(); }
    /// Iterator past the last value.
    int64_t* end() { return values_.data() + size_; }
    /// Iterator to the first value.
    const int64_t* begin() const { return values_.data(); }
    /// Iterator past the last value.
    const int64_t* end() const { return values_.data() + size_; }
    /// The last value (the innermost size or stride).
    int64_t back() const { return values_[size_ - 1]; }
    /// Pointer to the values.
    int64_t* data() { return values_.data(); }
    /// Pointer to the values.
    const int64_t* data() const { return values_.data(); }

    /// Appends v; ShapeError when the list already has kMaxDims values.
    void push_back(int64_t v) {
        if (size_ == kMaxDims) fail<ShapeError>("Dims: more than {} dimensions", kMaxDims);
        values_[size_++] = v;
    }
    /// Inserts v at position pos, shifting the later values right.
    void insert(int pos, int64_t v) {
        push_back(0);
        for (int i = size_ - 1; i > pos; --i) values_[i] = values_[i - 1];
        values_[pos] = v;
    }
    /// Removes the value at position pos.
    void erase(int pos) {
        for (int i = pos; i + 1 < size_; ++i) values_[i] = values_[i + 1];
        --size_;
    }
    /// Keeps the first n values, or appends copies of value up to n; ShapeError beyond kMaxDims.
    void resize(int n, int64_t value = 0) {
        if (n < 0 || n > kMaxDims) fail<ShapeError>("Dims: {} dimensions (at most {})", n, kMaxDims);
        for (int i = size_; i < n; ++i) values_[i] = value;
        size_ = n;
    }
    /// The values as a std::vector.
    std::vector<int64_t> to_vector() const { return {begin(), end()}; }

    /// Same number of values, equal one by one.
    friend bool operator==(const Dims& a, const Dims& b) {
        return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
    }

private:
    template <class It>
    void assign(It first, It last) {
        size_ = 0;
        for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
    }

    std::array<int64_t, kMaxDims> values_{};
    int size_ = 0;
};

/// A tensor's sizes, outermost dimension first.
using Shape = Dims;
/// A tensor's strides in elements (not bytes), one per dimension.
using Strides = Dims;

/// Product of the sizes (1 for a 0-d shape). Throws ValueError on overflow.
int64_t shape_numel(const Shape& shape);

/// Row-major (C order) strides for a shape, in elements.
Strides contiguous_strides(const Shape& shape);

/// "(2x3x4)" as in error messages; "()" for a scalar. fmt::format("{}", shape) gives the same text.
std::string shape_str(const Shape& shape);

/// "[2, 3, 4]" as in printing.
std::string dims_list_str(const Dims& dims);

/// Turns a possibly negative dimension into [0, ndim); throws IndexError
/// naming `op` when it is out of range.
int normalize_dim(int64_t dim, int ndim, const char* op);

/// NumPy broadcasting of two shapes; throws ShapeError naming `op`:
/// "add: cannot broadcast (3) with (4) at dimension 1".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// True when `from` broadcasts to exactly `to` (NumPy rules, aligned at the
/// right): the shape check of ops whose result keeps the shape of one input
/// (add_'s dst, masked_fill's x, masked softmax's keep mask).
bool broadcasts_to(const Shape& from, const Shape& to);

}  // namespace tformer::core

/// \cond
/// fmt prints a shape as shape_str does, "(2x3x4)", so that a check passes
/// the shape itself and the text is made only when the check fails.
template <>
struct fmt::formatter<tformer::core::Dims> : fmt::formatter<std::string> {
    auto format(const tformer::core::Dims& dims, format_context& ctx) const {
        return fmt::formatter<std::string>::format(tformer::core::shape_str(dims), ctx);
    }
};
/// \endcond
