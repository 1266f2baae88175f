// Plain-loop elementwise ops, the oracles the fast kernels are tested against.
//
// No strides tricks, no fast paths: visit every index of the output in
// row-major order, work out where that element comes from in each input
// (NumPy broadcasting by hand), read it with Tensor::at, apply f in double,
// write it with Tensor::set. Slow and obviously right.
#include "core/elementwise.hpp"

namespace tformer::core::reference {

namespace {

// Steps a row-major index to the next one: the last dimension counts fastest,
// and a dimension that reaches its size wraps to 0 and carries one upward.
void next_index(Dims& index, const Shape& shape) {
    for (int d = shape.size() - 1; d >= 0; --d) {
        if (++index[d] < shape[d]) return;
        index[d] = 0;
    }
}

// The index into input `t` for output index `out_index` under broadcasting:
// the output's extra leading dimensions are dropped, and a size-1 dimension
// of t always reads its only element.
Dims source_index(const Tensor& t, const Dims& out_index) {
    const int lead = out_index.size() - t.dim();
    Dims index = Dims::filled(t.dim(), 0);
    for (int d = 0; d < t.dim(); ++d) index[d] = t.shape()[d] == 1 ? 0 : out_index[lead + d];
    return index;
}

}  // namespace

Tensor unary(const Tensor& x, double (*f)(double)) {
    Tensor out = Tensor::empty(x.shape(), x.dtype());
    Dims index = Dims::filled(x.dim(), 0);
    for (int64_t i = 0; i < x.numel(); ++i, next_index(index, x.shape())) out.set(index, f(x.at(index)));
    return out;
}

Tensor binary(const Tensor& a, const Tensor& b, double (*f)(double, double)) {
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), "reference::binary");
    Tensor out = Tensor::empty(shape, a.dtype());
    Dims index = Dims::filled(shape.size(), 0);
    for (int64_t i = 0; i < out.numel(); ++i, next_index(index, shape))
        out.set(index, f(a.at(source_index(a, index)), b.at(source_index(b, index))));
    return out;
}

}  // namespace tformer::core::reference
