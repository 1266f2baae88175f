// Shape and strides: a small vector of dimension sizes kept inline (no heap
// allocation), because tiny tensors are the common case in small
// Transformers and every op creates a few of them.
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
    Dims() = default;
    Dims(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
    explicit Dims(std::span<const int64_t> values) { assign(values.begin(), values.end()); }
    explicit Dims(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }

    /// n copies of value.
    static Dims filled(int n, int64_t value) {
        Dims d;
        d.resize(n, value);
        return d;
    }

    int size() const { return size_; }
    bool empty() const { return size_ == 0; }
    int64_t& operator[](int i) { return values_[i]; }
    int64_t operator[](int i) const { return values_[i]; }
    int64_t* begin() { return values_.data(); }
    int64_t* end() { return values_.data() + size_; }
    const int64_t* begin() const { return values_.data(); }
    const int64_t* end() const { return values_.data() + size_; }
    int64_t back() const { return values_[size_ - 1]; }
    int64_t* data() { return values_.data(); }
    const int64_t* data() const { return values_.data(); }

    void push_back(int64_t v) {
        if (size_ == kMaxDims) fail<ShapeError>("Dims: more than {} dimensions", kMaxDims);
        values_[size_++] = v;
    }
    void insert(int pos, int64_t v) {
        push_back(0);
        for (int i = size_ - 1; i > pos; --i) values_[i] = values_[i - 1];
        values_[pos] = v;
    }
    void erase(int pos) {
        for (int i = pos; i + 1 < size_; ++i) values_[i] = values_[i + 1];
        --size_;
    }
    void resize(int n, int64_t value = 0) {
        if (n < 0 || n > kMaxDims) fail<ShapeError>("Dims: {} dimensions (at most {})", n, kMaxDims);
        for (int i = size_; i < n; ++i) values_[i] = value;
        size_ = n;
    }
    std::vector<int64_t> to_vector() const { return {begin(), end()}; }

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

using Shape = Dims;
using Strides = Dims;

/// Product of the sizes (1 for a 0-d shape). Throws ValueError on overflow.
int64_t shape_numel(const Shape& shape);

/// Row-major (C order) strides for a shape, in elements.
Strides contiguous_strides(const Shape& shape);

/// "(2x3x4)" as in error messages; "()" for a scalar.
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

/// fmt prints a shape as shape_str does, "(2x3x4)", so that a check passes
/// the shape itself and the text is made only when the check fails.
template <>
struct fmt::formatter<tformer::core::Dims> : fmt::formatter<std::string> {
    auto format(const tformer::core::Dims& dims, format_context& ctx) const {
        return fmt::formatter<std::string>::format(tformer::core::shape_str(dims), ctx);
    }
};
