// Plain-loop oracles for the reductions in reduce.cpp.
//
// Each one visits every element of x once, in row-major order, through
// Tensor::at (so any strides work without thinking about them), finds the
// output element it belongs to, and folds it in with double arithmetic.
// No merged dimensions, no lanes, no threads: slow and plainly right, which
// is what the tests compare the fast kernels against.
#include "core/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tformer::core::reference {

namespace {

// Checks x like the fast kernels do and returns the reduced dimensions.
DimMask checked_mask(const Tensor& x, const Dims& dims, const char* op) {
    if (!x.defined()) fail<ValueError>("{}: tensor is undefined", op);
    const DimMask mask = reduction_mask(x.dim(), dims, op);
    if (!is_floating(x.dtype()))
        fail<ValueError>("{}: expected a floating dtype (float32 or float64), got {}", op, dtype_name(x.dtype()));
    return mask;
}

// Elements folded into each output.
int64_t fold_count(const Tensor& x, const DimMask& mask) {
    int64_t n = 1;
    for (int d = 0; d < x.dim(); ++d)
        if (mask[d]) n *= x.shape()[d];
    return n;
}

// Calls visit(value, out, index) for each element of x in row-major order:
// `index` is the element's full index and `out` the flat row-major index of
// the output it folds into (its index with the reduced dimensions dropped).
template <class Visit>
void for_each_element(const Tensor& x, const DimMask& mask, Visit&& visit) {
    const Strides out_strides = contiguous_strides(reduced_shape(x.shape(), mask, true));
    Dims index = Dims::filled(x.dim(), 0);
    for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t out = 0;
        for (int d = 0; d < x.dim(); ++d)
            if (!mask[d]) out += index[d] * out_strides[d];
        visit(x.at(index), out, index);
        for (int d = x.dim() - 1; d >= 0; --d) {  // next index, last dimension fastest
            if (++index[d] < x.shape()[d]) break;
            index[d] = 0;
        }
    }
}

// The per-output values as a tensor of x's dtype and the requested shape.
Tensor make_output(const std::vector<double>& values, const Tensor& x, const DimMask& mask, bool keepdim, DType dtype) {
    return tensor(values, reduced_shape(x.shape(), mask, keepdim), dtype);
}

int64_t output_count(const Tensor& x, const DimMask& mask) { return shape_numel(reduced_shape(x.shape(), mask, true)); }

// max and min: `better(v, best)` says when v replaces the current best.
// A NaN replaces anything and is never replaced, so it propagates.
template <class Better>
Tensor extreme(const Tensor& x, const Dims& dims, bool keepdim, const char* op, Better better) {
    const DimMask mask = checked_mask(x, dims, op);
    for (int d = 0; d < x.dim(); ++d)
        if (mask[d] && x.shape()[d] == 0)
            fail<ValueError>("{}: dimension {} of shape {} has size 0; the {} of no elements is undefined", op, d,
                             shape_str(x.shape()), op);
    std::vector<double> best(output_count(x, mask));
    std::vector<bool> seen(best.size(), false);
    for_each_element(x, mask, [&](double v, int64_t out, const Dims&) {
        if (!seen[out] || (!std::isnan(best[out]) && (std::isnan(v) || better(v, best[out])))) best[out] = v;
        seen[out] = true;
    });
    return make_output(best, x, mask, keepdim, x.dtype());
}

}  // namespace

// y = Σ_dims x
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim) {
    const DimMask mask = checked_mask(x, dims, "sum");
    std::vector<double> acc(output_count(x, mask), 0.0);
    for_each_element(x, mask, [&](double v, int64_t out, const Dims&) { acc[out] += v; });
    return make_output(acc, x, mask, keepdim, x.dtype());
}

// y = Σ_dims x / n
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
    const DimMask mask = checked_mask(x, dims, "mean");
    const double n = static_cast<double>(fold_count(x, mask));
    std::vector<double> acc(output_count(x, mask), 0.0);
    for_each_element(x, mask, [&](double v, int64_t out, const Dims&) { acc[out] += v; });
    for (double& a : acc) a /= n;
    return make_output(acc, x, mask, keepdim, x.dtype());
}

// y = max_dims x
Tensor max(const Tensor& x, const Dims& dims, bool keepdim) {
    return extreme(x, dims, keepdim, "max", [](double v, double best) { return v > best; });
}

// y = min_dims x
Tensor min(const Tensor& x, const Dims& dims, bool keepdim) {
    return extreme(x, dims, keepdim, "min", [](double v, double best) { return v < best; });
}

// y = first i with x[..., i, ...] largest along dim (the first NaN if any)
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
    if (!x.defined()) fail<ValueError>("argmax: tensor is undefined");
    const DimMask mask = reduction_mask(x.dim(), Dims{dim}, "argmax");
    if (x.dtype() == DType::boolean) fail<ValueError>("argmax: expected float32, float64 or int64, got bool");
    if (x.dim() == 0) return make_output({0.0}, x, mask, keepdim, DType::int64);
    const int d = normalize_dim(dim, x.dim(), "argmax");
    if (x.shape()[d] == 0)
        fail<ValueError>("argmax: dimension {} of shape {} has size 0; the argmax of no elements is undefined", d,
                         shape_str(x.shape()));
    std::vector<double> best(output_count(x, mask)), where(best.size(), 0.0);
    // row-major order visits each output's line from index 0 upwards, so a
    // strict > keeps the first of equal values
    for_each_element(x, mask, [&](double v, int64_t out, const Dims& index) {
        if (index[d] == 0 || (!std::isnan(best[out]) && (std::isnan(v) || v > best[out]))) {
            best[out] = v;
            where[out] = static_cast<double>(index[d]);
        }
    });
    return make_output(where, x, mask, keepdim, DType::int64);
}

// y = Σ_dims (x - mean)² / (n - 1) or / n, two passes in double
Tensor var(const Tensor& x, const Dims& dims, bool unbiased, bool keepdim) {
    const DimMask mask = checked_mask(x, dims, "var");
    const double n = static_cast<double>(fold_count(x, mask));
    std::vector<double> mu(output_count(x, mask), 0.0), acc(mu.size(), 0.0);
    for_each_element(x, mask, [&](double v, int64_t out, const Dims&) { mu[out] += v; });
    for (double& m : mu) m /= n;
    for_each_element(x, mask, [&](double v, int64_t out, const Dims&) { acc[out] += (v - mu[out]) * (v - mu[out]); });
    const double divisor = std::max(n - (unbiased ? 1.0 : 0.0), 0.0);
    for (double& a : acc) a /= divisor;
    return make_output(acc, x, mask, keepdim, x.dtype());
}

}  // namespace tformer::core::reference
