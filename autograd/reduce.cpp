// Differentiable reductions. The gradient of a reduction has the reduced
// shape; backward puts the reduced dimensions back (as size 1, keepdim) and
// broadcasts to the input's shape.
#include "autograd/reduce.hpp"

#include "core/elementwise.hpp"
#include "core/reduce.hpp"

namespace tformer::autograd {

namespace c = tformer::core;

namespace {
// The reduced dims as non-negative, sorted; all dims when `dims` is empty.
std::vector<int> reduced_dims(const core::Dims& dims, int ndim, const char* op) {
    std::vector<int> out;
    if (dims.empty()) {
        for (int d = 0; d < ndim; ++d) out.push_back(d);
        return out;
    }
    for (int64_t d : dims) out.push_back(core::normalize_dim(d, ndim, op));
    std::sort(out.begin(), out.end());
    return out;
}

// dy reshaped so it broadcasts against the input: size 1 at every reduced dim.
Tensor unreduce(const Tensor& dy, const core::Shape& input_shape, const core::Dims& dims, bool keepdim,
                const char* op) {
    if (keepdim) return dy;
    core::Shape kept = input_shape;
    for (int d : reduced_dims(dims, input_shape.size(), op)) kept[d] = 1;
    return dy.reshape(kept);
}

int64_t reduced_count(const core::Shape& shape, const core::Dims& dims, const char* op) {
    int64_t n = 1;
    for (int d : reduced_dims(dims, shape.size(), op)) n *= shape[d];
    return n;
}
}  // namespace

// y = Σ_dims x
Variable sum(const Variable& x, const core::Dims& dims, bool keepdim) {
    return record("sum", c::sum(x.value(), dims, keepdim), {x},
                  [shape = x.shape(), dims, keepdim](const Tensor& dy, Grads& g) {
                      // every summed element has derivative 1: broadcast dy back
                      g[0] = unreduce(dy, shape, dims, keepdim, "sum").expand(shape).contiguous();
                  });
}

Variable sum(const Variable& x) { return sum(x, {}, false); }

// y = Σ_dims x / n
Variable mean(const Variable& x, const core::Dims& dims, bool keepdim) {
    const int64_t n = reduced_count(x.shape(), dims, "mean");
    return record("mean", c::mean(x.value(), dims, keepdim), {x},
                  [shape = x.shape(), dims, keepdim, n](const Tensor& dy, Grads& g) {
                      // each element contributes 1/n
                      g[0] = c::mul(unreduce(dy, shape, dims, keepdim, "mean").expand(shape), 1.0 / n);
                  });
}

Variable mean(const Variable& x) { return mean(x, {}, false); }

// y = max_dims x
Variable max(const Variable& x, const core::Dims& dims, bool keepdim) {
    Tensor y = c::max(x.value(), dims, keepdim);
    return record("max", y, {x}, [xv = x.value(), y, dims, keepdim](const Tensor& dy, Grads& g) {
        // the gradient goes to the elements equal to the max, split evenly among ties
        const Tensor y_b = unreduce(y, xv.shape(), dims, keepdim, "max");
        const Tensor is_max = c::eq(xv, y_b).to(xv.dtype());
        const Tensor count = c::sum(is_max, dims, true);
        g[0] = c::div(c::mul(is_max, unreduce(dy, xv.shape(), dims, keepdim, "max")), count);
    });
}

Variable max(const Variable& x) { return max(x, {}, false); }

// y = Σ (x - mean)² / (n - 1 if unbiased else n)
Variable var(const Variable& x, const core::Dims& dims, bool unbiased, bool keepdim) {
    const int64_t n = reduced_count(x.shape(), dims, "var");
    return record("var", c::var(x.value(), dims, unbiased, keepdim), {x},
                  [xv = x.value(), dims, unbiased, keepdim, n](const Tensor& dy, Grads& g) {
                      // ∂var/∂x_i = 2 (x_i - mean) / (n - 1 or n)
                      const double denom = unbiased ? static_cast<double>(n - 1) : static_cast<double>(n);
                      const Tensor centred = c::sub(xv, c::mean(xv, dims, true));
                      g[0] = c::mul(c::mul(centred, unreduce(dy, xv.shape(), dims, keepdim, "var")), 2.0 / denom);
                  });
}

}  // namespace tformer::autograd
