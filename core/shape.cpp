#include "core/shape.hpp"

#include <fmt/format.h>

#include <limits>

namespace tformer::core {

int64_t shape_numel(const Shape& shape) {
    int64_t n = 1;
    for (int64_t s : shape) {
        if (s < 0) fail<ValueError>("shape {}: negative size {}", shape_str(shape), s);
        if (s != 0 && n > std::numeric_limits<int64_t>::max() / s)
            fail<ValueError>("shape {}: number of elements overflows int64", shape_str(shape));
        n *= s;
    }
    return n;
}

Strides contiguous_strides(const Shape& shape) {
    Strides strides = Dims::filled(shape.size(), 1);
    for (int d = shape.size() - 2; d >= 0; --d) strides[d] = strides[d + 1] * std::max<int64_t>(shape[d + 1], 1);
    return strides;
}

std::string shape_str(const Shape& shape) { return fmt::format("({})", fmt::join(shape, "x")); }

std::string dims_list_str(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

int normalize_dim(int64_t dim, int ndim, const char* op) {
    const int64_t lo = -static_cast<int64_t>(ndim), hi = ndim - 1;
    if (dim < lo || dim > hi) {
        if (ndim == 0) fail<IndexError>("{}: dimension {} out of range for a 0-d tensor", op, dim);
        fail<IndexError>("{}: dimension {} out of range for a {}-d tensor (expected {} to {})", op, dim, ndim, lo, hi);
    }
    return static_cast<int>(dim < 0 ? dim + ndim : dim);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    const int n = std::max(a.size(), b.size());
    Shape out = Dims::filled(n, 1);
    for (int i = 0; i < n; ++i) {
        // align from the right
        const int ia = a.size() - n + i, ib = b.size() - n + i;
        const int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            fail<ShapeError>("{}: cannot broadcast {} with {} at dimension {}", op, shape_str(a), shape_str(b), i);
        out[i] = sa == 1 ? sb : sa;
    }
    return out;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
    if (from.size() > to.size()) return false;
    const int lead = to.size() - from.size();
    for (int d = 0; d < from.size(); ++d)
        if (from[d] != 1 && from[d] != to[lead + d]) return false;
    return true;
}

}  // namespace tformer::core
