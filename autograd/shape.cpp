// Differentiable shape ops. None of them computes anything: each one only
// rearranges which element sits where, so each backward is the same
// rearrangement run the other way — it puts every entry of dy back at the
// position its element came from in x. Notation as in elementwise.cpp: y is
// the output, dy the gradient arriving at y, dx the gradient sent to x.
//
// Forward keeps views as views (the core::Tensor view methods share x's
// storage; only concat and stack build a new tensor). Backward returns views
// of dy too wherever it can: only slice, select, split and expand build a new
// tensor, because their dx has elements that y never saw (zeros) or that y
// saw several times (sums). Bad arguments are reported by the core view
// methods and join kernels, which name the op.
#include "autograd/shape.hpp"

#include "core/index.hpp"
#include "core/reduce.hpp"

namespace tformer::autograd {

namespace c = tformer::core;

// ============================ views ============================

// y = x viewed as `shape` (same elements in the same row-major order)
Variable reshape(const Variable& x, const core::Shape& shape) {
    return record("reshape", x.value().reshape(shape), {x}, [shape = x.shape()](const Tensor& dy, Grads& g) {
        g[0] = dy.reshape(shape);  // same order, so dx is dy read back in x's shape
    });
}

// y = x with dimensions reordered: y's dim i is x's dim dims[i]
Variable permute(const Variable& x, const core::Dims& dims) {
    Tensor y = x.value().permute(dims);  // validates dims first
    // the inverse permutation: x's dim dims[i] is y's dim i
    core::Dims inverse = core::Dims::filled(dims.size(), 0);
    for (int i = 0; i < dims.size(); ++i) inverse[core::normalize_dim(dims[i], dims.size(), "permute")] = i;
    return record("permute", std::move(y), {x}, [inverse](const Tensor& dy, Grads& g) {
        g[0] = dy.permute(inverse);  // undo y = x.permute(dims)
    });
}

// y = x with dimensions dim0 and dim1 swapped
Variable transpose(const Variable& x, int64_t dim0, int64_t dim1) {
    return record("transpose", x.value().transpose(dim0, dim1), {x}, [dim0, dim1](const Tensor& dy, Grads& g) {
        g[0] = dy.transpose(dim0, dim1);  // a swap is its own inverse
    });
}

namespace {
// The backward of any y = x.slice(dim, start, end, step): y saw only some of
// x's elements, so dx is zero everywhere except in that same slice, which
// receives dy. `x_shape` and the raw slice arguments are all it needs:
// slicing a zero tensor of x's shape with them picks the same elements.
auto slice_backward(const core::Shape& x_shape, int64_t dim, int64_t start, int64_t end, int64_t step) {
    return [x_shape, dim, start, end, step](const Tensor& dy, Grads& g) {
        Tensor dx = c::zeros(x_shape, dy.dtype());
        c::copy_(dx.slice(dim, start, end, step), dy);
        g[0] = std::move(dx);
    };
}
}  // namespace

// y = x[start:end:step] along dim
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
    return record("slice", x.value().slice(dim, start, end, step), {x},
                  slice_backward(x.shape(), dim, start, end, step));
}

// y = x[index] along dim (dim removed)
Variable select(const Variable& x, int64_t dim, int64_t index) {
    return record("select", x.value().select(dim, index), {x},
                  [shape = x.shape(), dim, index](const Tensor& dy, Grads& g) {
                      // dx is zero but for the one selected slab, which receives dy
                      Tensor dx = c::zeros(shape, dy.dtype());
                      c::copy_(dx.select(dim, index), dy);
                      g[0] = std::move(dx);
                  });
}

// y = x broadcast to `shape` (size-1 and new leading dims repeated, stride 0)
Variable expand(const Variable& x, const core::Shape& shape) {
    return record("expand", x.value().expand(shape), {x}, [shape = x.shape()](const Tensor& dy, Grads& g) {
        // each x element was copied to every position along the stretched
        // dims, so its gradient is the sum over those copies
        g[0] = c::sum_to_shape(dy, shape);
    });
}

// y = x without its size-1 dimension dim
Variable squeeze(const Variable& x, int64_t dim) {
    Tensor y = x.value().squeeze(dim);  // validates dim and its size first
    const int d = core::normalize_dim(dim, x.dim(), "squeeze");
    return record("squeeze", std::move(y), {x}, [d](const Tensor& dy, Grads& g) {
        g[0] = dy.unsqueeze(d);  // put the size-1 dimension back
    });
}

// y = x with a new size-1 dimension at dim
Variable unsqueeze(const Variable& x, int64_t dim) {
    Tensor y = x.value().unsqueeze(dim);
    const int d = core::normalize_dim(dim, y.dim(), "unsqueeze");
    return record("unsqueeze", std::move(y), {x}, [d](const Tensor& dy, Grads& g) {
        g[0] = dy.squeeze(d);  // take the size-1 dimension out again
    });
}

// y = x laid out row-major (a copy only when x is not)
Variable contiguous(const Variable& x) {
    return record("contiguous", x.value().contiguous(), {x}, [](const Tensor& dy, Grads& g) {
        g[0] = dy;  // same values, so the gradient passes through
    });
}

// ============================ joins ============================

namespace {
std::vector<Tensor> values_of(const std::vector<Variable>& xs) {
    std::vector<Tensor> values;
    values.reserve(xs.size());
    for (const Variable& x : xs) values.push_back(x.value());
    return values;
}
}  // namespace

// y = [x0 | x1 | ...] along dim
Variable concat(const std::vector<Variable>& xs, int64_t dim) {
    Tensor y = c::concat(values_of(xs), dim);  // validates shapes and dtypes
    const int d = core::normalize_dim(dim, y.dim(), "concat");
    std::vector<int64_t> sizes;  // each input's extent along dim: all backward needs
    for (const Variable& x : xs) sizes.push_back(x.size(d));
    return record("concat", std::move(y), std::span<const Variable>(xs), [sizes, d](const Tensor& dy, Grads& g) {
        // input i occupies its own slab of y along dim: dx_i is that slab of dy
        const std::vector<Tensor> pieces = c::split(dy, sizes, d);
        for (size_t i = 0; i < pieces.size(); ++i)
            if (g.wanted(i)) g[i] = pieces[i];
    });
}

// y[..., i, ...] = x_i along a new dimension dim
Variable stack(const std::vector<Variable>& xs, int64_t dim) {
    Tensor y = c::stack(values_of(xs), dim);  // validates shapes and dtypes
    const int d = core::normalize_dim(dim, y.dim(), "stack");
    return record("stack", std::move(y), std::span<const Variable>(xs), [d](const Tensor& dy, Grads& g) {
        // input i is index i of y's new dimension: dx_i = dy selected there
        for (size_t i = 0; i < g.size(); ++i)
            if (g.wanted(i)) g[i] = dy.select(d, static_cast<int64_t>(i));
    });
}

// y_k = x[k·s : (k+1)·s] along dim, for k = 0, 1, ... (the last piece may be shorter)
std::vector<Variable> split(const Variable& x, int64_t split_size, int64_t dim) {
    // A multi-output op written as one slice node per piece: each piece's
    // backward puts its own gradient into a zero tensor of x's shape, and the
    // engine adds those up in x's gradient (pieces that get no gradient
    // simply contribute nothing).
    const std::vector<Tensor> pieces = c::split(x.value(), split_size, dim);  // validates
    const int d = core::normalize_dim(dim, x.dim(), "split");
    std::vector<Variable> out;
    out.reserve(pieces.size());
    int64_t start = 0;
    for (const Tensor& piece : pieces) {
        const int64_t end = start + piece.size(d);
        out.push_back(record("split", piece, {x}, slice_backward(x.shape(), d, start, end, 1)));
        start = end;
    }
    return out;
}

}  // namespace tformer::autograd
