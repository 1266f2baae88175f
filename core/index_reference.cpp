// Plain-loop oracles for the indexing kernels in index.cpp: one element at a
// time through Tensor::at / Tensor::set, following the formulas literally.
// They are slow and obviously right; tests compare the fast kernels to them.
// Inputs are assumed valid (the fast kernels own the error checking), and
// values pass through double, which is exact for float32, float64, bool and
// int64 values below 2^53.
#include "core/index.hpp"

namespace tformer::core::reference {

namespace {

// Calls f(i) for every full index i of `shape`, in row-major order.
template <class F>
void for_each_position(const Shape& shape, F&& f) {
    if (shape_numel(shape) == 0) return;
    Dims i = Dims::filled(shape.size(), 0);
    while (true) {
        f(i);
        int d = shape.size() - 1;
        for (; d >= 0; --d) {
            if (++i[d] < shape[d]) break;
            i[d] = 0;
        }
        if (d < 0) return;
    }
}

}  // namespace

// out[..., k, ...] = x[..., index[k], ...]
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
    const int d = normalize_dim(dim, x.dim(), "reference::index_select");
    Shape shape = x.shape();
    shape[d] = index.numel();
    Tensor out = zeros(shape, x.dtype());
    for_each_position(shape, [&](const Dims& i) {
        Dims from = i;
        from[d] = static_cast<int64_t>(index.at({i[d]}));
        out.set(i, x.at(from));
    });
    return out;
}

// out[i][j] = x[index[i][j]][j]   (dim 0)
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
    const int d = normalize_dim(dim, x.dim(), "reference::gather");
    Tensor out = zeros(index.shape(), x.dtype());
    for_each_position(index.shape(), [&](const Dims& i) {
        Dims from = i;
        from[d] = static_cast<int64_t>(index.at(i));
        out.set(i, x.at(from));
    });
    return out;
}

// out = x;  out[index[i][j]][j] += src[i][j]   (dim 0)
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    const int d = normalize_dim(dim, x.dim(), "reference::scatter_add");
    Tensor out = x.clone();
    for_each_position(index.shape(), [&](const Dims& i) {
        Dims to = i;
        to[d] = static_cast<int64_t>(index.at(i));
        out.set(to, out.at(to) + src.at(i));
    });
    return out;
}

}  // namespace tformer::core::reference
