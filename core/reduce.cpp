// Reduction kernels: sum, mean, max, min, argmax, var and sum_to_shape.
//
// How a reduction is laid out. x's dimensions split into the kept ones
// (they index the output) and the reduced ones (they are folded away). Each
// group is walked as one index space with x's strides, and neighbouring
// dimensions that are contiguous with each other merge, so a contiguous
// (B, T, D) summed over B and T becomes
//     kept    = (D)       stride 1
//     reduced = (B·T)     stride D
// Then one of two kernels runs, chosen so that memory is read in order:
//
//   rows     the elements of one output are close together (the reduced
//            innermost stride is the smaller one, e.g. a sum over the last
//            dimension): each output folds its own runs; outputs are split
//            across threads.
//   columns  neighbouring outputs are close together (the kept innermost
//            stride is the smaller one, e.g. the bias gradient
//            (B, T, D) -> (D)): a tile of outputs is accumulated row by row,
//            so each row is read front to back.
//
// Any other layout (a slice with a step, a permutation) is the rows kernel
// with strided runs, which is correct for every stride; the reduced
// dimensions are taken in order of decreasing stride (the "permute the
// reduced dimensions to the end" of the textbook loop), so the innermost
// run has the smallest step.
//
// Precision and threads: every accumulator is a double, also for float32
// input (a float32 accumulator over 10^6 elements would lose about three
// digits). Each output is always folded in the same order — fixed lanes,
// fixed blocks, fixed row order — and threads only ever split *which*
// outputs or blocks they compute, so 1 and 2 threads give identical bits.
#include "core/reduce.hpp"

#include "core/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace tformer::core {

// ---- which dimensions are reduced ------------------------------------------------------

DimMask reduction_mask(int ndim, const Dims& dims, const char* op) {
    DimMask mask{};
    if (dims.empty()) {
        for (int d = 0; d < ndim; ++d) mask[d] = true;
        return mask;
    }
    // a 0-d tensor accepts dimension 0 or -1, as PyTorch does
    DimMask seen{};
    for (int64_t dim : dims) {
        if (ndim == 0 && dim != 0 && dim != -1)
            fail<IndexError>("{}: dimension {} out of range for a 0-d tensor (expected -1 or 0)", op, dim);
        const int d = normalize_dim(dim, std::max(ndim, 1), op);
        if (seen[d]) fail<ValueError>("{}: dimension {} appears more than once in {}", op, d, dims_list_str(dims));
        seen[d] = true;
        if (d < ndim) mask[d] = true;
    }
    return mask;
}

Shape reduced_shape(const Shape& shape, const DimMask& mask, bool keepdim) {
    Shape out;
    for (int d = 0; d < shape.size(); ++d) {
        if (!mask[d]) {
            out.push_back(shape[d]);
        } else if (keepdim) {
            out.push_back(1);
        }
    }
    return out;
}

namespace {

// ---- walking a group of dimensions -----------------------------------------------------

// A group of x's dimensions seen as one index space, outermost first, with
// x's strides. Size-1 dimensions are dropped, and a dimension merges into
// the one outside it when the two are contiguous with each other
// (outer stride == inner stride · inner size).
struct Walk {
    Shape sizes;
    Strides strides;

    void push(int64_t size, int64_t stride) {
        if (size == 1) return;
        const int last = sizes.size() - 1;
        if (last >= 0 && strides[last] == stride * size) {
            sizes[last] *= size;
            strides[last] = stride;
            return;
        }
        sizes.push_back(size);
        strides.push_back(stride);
    }
    int dims() const { return sizes.size(); }
    int64_t inner_size() const { return sizes.empty() ? 1 : sizes.back(); }
    /// 0 when the group is empty (one element, no step).
    int64_t inner_stride() const { return sizes.empty() ? 0 : strides.back(); }
    int outer_dims() const { return std::max(dims() - 1, 0); }
    /// Offset of row-major flat index `i` over the first `ndims` dimensions.
    int64_t offset_of(int64_t i, int ndims) const {
        int64_t off = 0;
        for (int d = ndims - 1; d >= 0; --d) {
            off += (i % sizes[d]) * strides[d];
            i /= sizes[d];
        }
        return off;
    }
};

// Visits the offsets of the first `ndims` dimensions of a Walk in row-major
// order, starting at flat index `first`: an odometer whose wheels carry
// their stride, so each step costs one add (two on a carry).
class Odometer {
public:
    Odometer(const Walk& walk, int ndims, int64_t first) : walk_(walk), ndims_(ndims) {
        for (int d = ndims - 1; d >= 0; --d) {
            index_[d] = first % walk.sizes[d];
            first /= walk.sizes[d];
            offset_ += index_[d] * walk.strides[d];
        }
    }
    int64_t offset() const { return offset_; }
    void next() {
        for (int d = ndims_ - 1; d >= 0; --d) {
            offset_ += walk_.strides[d];
            if (++index_[d] < walk_.sizes[d]) return;
            offset_ -= index_[d] * walk_.strides[d];
            index_[d] = 0;
        }
    }

private:
    const Walk& walk_;
    int ndims_;
    std::array<int64_t, kMaxDims> index_{};
    int64_t offset_ = 0;
};

// Everything about one reduction that does not depend on the dtype.
struct Plan {
    Shape out_shape;      // the result's shape (keepdim or not)
    int64_t outputs = 1;  // M: elements of the result
    int64_t count = 1;    // n: elements folded into each output
    int empty_dim = -1;   // a reduced dimension of size 0, if any
    Walk kept, reduced;
};

Plan make_plan(const Tensor& x, const Dims& dims, bool keepdim, const char* op) {
    if (!x.defined()) fail<ValueError>("{}: tensor is undefined", op);
    const DimMask mask = reduction_mask(x.dim(), dims, op);
    visit_floating(x.dtype(), op, [](auto) {});  // throws for int64 and bool
    Plan plan;
    plan.out_shape = reduced_shape(x.shape(), mask, keepdim);
    plan.outputs = shape_numel(plan.out_shape);
    // The output is row-major over the kept dimensions in x's order, so they
    // are walked in that order. The reduced ones may go in any order (the
    // sum is the same); decreasing stride puts the smallest step innermost
    // and lets contiguous blocks merge, with broadcast (stride 0) dimensions
    // outermost.
    std::array<int, kMaxDims> reduced{};
    int nreduced = 0;
    for (int d = 0; d < x.dim(); ++d) {
        if (!mask[d]) {
            plan.kept.push(x.shape()[d], x.strides()[d]);
            continue;
        }
        plan.count *= x.shape()[d];
        if (x.shape()[d] == 0 && plan.empty_dim < 0) plan.empty_dim = d;
        reduced[nreduced++] = d;
    }
    auto step = [&](int d) { return x.strides()[d] == 0 ? std::numeric_limits<int64_t>::max() : x.strides()[d]; };
    std::stable_sort(reduced.begin(), reduced.begin() + nreduced, [&](int a, int b) { return step(a) > step(b); });
    for (int i = 0; i < nreduced; ++i) plan.reduced.push(x.shape()[reduced[i]], x.strides()[reduced[i]]);
    return plan;
}

// max, min and argmax of no elements are undefined.
void require_nonempty(const Tensor& x, int empty_dim, const char* op) {
    if (empty_dim >= 0)
        fail<ValueError>("{}: dimension {} of shape {} has size 0; the {} of no elements is undefined", op, empty_dim,
                         shape_str(x.shape()), op);
}

// ---- what is folded ----------------------------------------------------------------------
// An op says where a fold starts (identity), what each element contributes
// (load, given the element and its output's centre c, which only var's
// second pass uses), how two partial results combine (associative and
// commutative, so lanes and blocks may combine in any fixed order), and
// how the final fold becomes an output.

// Σ x, divided by `divisor` at the end (1 for sum, n for mean).
struct SumOp {
    double divisor = 1.0;
    static double identity() { return 0.0; }
    static double load(double v, double) { return v; }
    static double combine(double a, double b) { return a + b; }
    double finish(double a) const { return a / divisor; }
};

// Σ (x - c)², c = the slice's mean, divided by n - 1 or n: var's second pass.
struct SquaredDeviationOp {
    double divisor = 1.0;
    static double identity() { return 0.0; }
    static double load(double v, double c) { return (v - c) * (v - c); }
    static double combine(double a, double b) { return a + b; }
    double finish(double a) const { return a / divisor; }
};

// max(a, b), except that a NaN on either side wins, so one NaN makes the result NaN.
struct MaxOp {
    static double identity() { return -std::numeric_limits<double>::infinity(); }
    static double load(double v, double) { return v; }
    static double combine(double a, double b) {
        const double larger = a > b ? a : b;  // b when b is NaN
        return a != a ? a : larger;           // a when a is NaN
    }
    static double finish(double a) { return a; }
};

// min(a, b), NaN winning as for max.
struct MinOp {
    static double identity() { return std::numeric_limits<double>::infinity(); }
    static double load(double v, double) { return v; }
    static double combine(double a, double b) {
        const double smaller = a < b ? a : b;
        return a != a ? a : smaller;
    }
    static double finish(double a) { return a; }
};

// ---- folding one run ---------------------------------------------------------------------

// Folds p[0], p[s], ..., p[(n-1)s] (centre c) with kLanes independent accumulators:
// lane k takes elements k, k + kLanes, k + 2·kLanes, ... The lanes do not
// depend on each other, so the compiler keeps them in vector registers and
// the adds overlap instead of waiting on one another; at the end they are
// folded pairwise in a fixed order, so the result depends only on the data.
constexpr int kLanes = 8;

template <class T, class Op>
double fold_run(const T* p, int64_t n, int64_t s, double c = 0.0) {
    std::array<double, kLanes> lane;
    lane.fill(Op::identity());
    int64_t i = 0;
    if (s == 1) {
        for (; i + kLanes <= n; i += kLanes)
            for (int k = 0; k < kLanes; ++k) lane[k] = Op::combine(lane[k], Op::load(static_cast<double>(p[i + k]), c));
    } else {
        for (; i + kLanes <= n; i += kLanes)
            for (int k = 0; k < kLanes; ++k)
                lane[k] = Op::combine(lane[k], Op::load(static_cast<double>(p[(i + k) * s]), c));
    }
    for (; i < n; ++i) lane[0] = Op::combine(lane[0], Op::load(static_cast<double>(p[i * s]), c));
    for (int width = kLanes / 2; width > 0; width /= 2)
        for (int k = 0; k < width; ++k) lane[k] = Op::combine(lane[k], lane[k + width]);
    return lane[0];
}

// A run longer than kBlock is cut into blocks of kBlock elements whose
// results are folded in order. The blocks may run on different threads
// (when the caller is not parallel already, e.g. the sum of one big
// tensor), but where a block starts never depends on the thread count, so
// neither does the result.
constexpr int64_t kBlock = 16384;

template <class T, class Op>
double fold_long_run(const T* p, int64_t n, int64_t s, double c) {
    if (n <= kBlock) return fold_run<T, Op>(p, n, s, c);
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<double> partial(blocks);
    parallel_for(0, blocks, kBlock, [&](int64_t first, int64_t last) {
        for (int64_t b = first; b < last; ++b)
            partial[b] = fold_run<T, Op>(p + b * kBlock * s, std::min(kBlock, n - b * kBlock), s, c);
    });
    double acc = Op::identity();
    for (double v : partial) acc = Op::combine(acc, v);
    return acc;
}

// ---- the two kernels -----------------------------------------------------------------------

// rows: output m folds its own elements, a set of runs along the reduced
// innermost dimension. Outputs are split across threads.
template <class T, class Out, class Op>
void reduce_rows(const Op& op, const T* x, const Plan& plan, Out* out, const double* centre) {
    const Walk& kept = plan.kept;
    const Walk& red = plan.reduced;
    const int64_t run = red.inner_size(), stride = red.inner_stride(), runs = plan.count / run;
    parallel_for(0, plan.outputs, plan.count, [&](int64_t first, int64_t last) {
        Odometer k(kept, kept.dims(), first);
        for (int64_t m = first; m < last; ++m, k.next()) {
            const T* base = x + k.offset();
            const double c = centre != nullptr ? centre[m] : 0.0;
            double acc = Op::identity();
            Odometer r(red, red.outer_dims(), 0);
            for (int64_t i = 0; i < runs; ++i, r.next())
                acc = Op::combine(acc, fold_long_run<T, Op>(base + r.offset(), run, stride, c));
            out[m] = static_cast<Out>(op.finish(acc));
        }
    });
}

// columns: neighbouring outputs are neighbours in memory (kept innermost
// stride cs, smaller than the reduced one). A tile of up to kTile outputs is
// accumulated row by row, acc[j] ⊕= x[row, j] for each reduced row in turn,
// so each row's tile is read in order and the accumulators stay in L1.
// Tiles are split across threads; every output still folds its rows in the
// same order.
constexpr int64_t kTile = 1024;
// What a column reduction tells parallel_for each output costs: its rows ÷
// 4, since an element is one add streamed from memory, a quarter or less of
// a row kernel's work (the grain's unit). At full cost d2l's bias gradient
// (640 x 201 -> 201) would split across 2 threads and make its training step
// 3-4% slower than on 1 (waking the other thread and moving the rows to its
// core cost more than half of 20 µs); at a quarter it stays on one thread and
// the step takes the same time on 1 and 2, while the translation preset's
// 1140 x 512 bias gradients still split (docs/bench.md).
constexpr int64_t kColumnCostDivisor = 4;

template <class T, class Out, class Op>
void reduce_columns(const Op& op, const T* x, const Plan& plan, Out* out, const double* centre) {
    const Walk& kept = plan.kept;
    const Walk& red = plan.reduced;
    const int64_t cols = kept.inner_size(), cs = kept.inner_stride();
    const int64_t run = red.inner_size(), rs = red.inner_stride(), runs = plan.count / run;
    parallel_for(0, plan.outputs, plan.count / kColumnCostDivisor, [&](int64_t first, int64_t last) {
        std::array<double, kTile> acc, c;
        for (int64_t m = first; m < last;) {
            // this tile: outputs m .. m+len-1 = columns j0 .. j0+len-1 of kept outer index m / cols
            const int64_t j0 = m % cols;
            const int64_t len = std::min({kTile, cols - j0, last - m});
            const T* base = x + kept.offset_of(m / cols, kept.outer_dims()) + j0 * cs;
            std::fill_n(acc.begin(), len, Op::identity());
            for (int64_t j = 0; j < len; ++j) c[j] = centre != nullptr ? centre[m + j] : 0.0;
            Odometer r(red, red.outer_dims(), 0);
            for (int64_t i = 0; i < runs; ++i, r.next()) {
                for (int64_t k = 0; k < run; ++k) {
                    const T* row = base + r.offset() + k * rs;  // (len) with stride cs
                    if (cs == 1) {
                        for (int64_t j = 0; j < len; ++j)
                            acc[j] = Op::combine(acc[j], Op::load(static_cast<double>(row[j]), c[j]));
                    } else {
                        for (int64_t j = 0; j < len; ++j)
                            acc[j] = Op::combine(acc[j], Op::load(static_cast<double>(row[j * cs]), c[j]));
                    }
                }
            }
            for (int64_t j = 0; j < len; ++j) out[m + j] = static_cast<Out>(op.finish(acc[j]));
            m += len;
        }
    });
}

// Walk memory along whichever innermost dimension has the smaller step.
bool use_columns(const Plan& plan) {
    const int64_t cs = plan.kept.inner_stride(), rs = plan.reduced.inner_stride();
    return cs > 0 && (rs == 0 || cs < rs);
}

// Folds x (element type T) into out (M elements of type Out) as laid out
// by `plan`; `centre` is one value per output for ops that use it, else null.
template <class T, class Out, class Op>
void reduce_into(const Op& op, const T* x, const Plan& plan, Out* out, const double* centre = nullptr) {
    if (plan.outputs == 0) return;
    if (plan.count == 0) {  // folding nothing: sum 0, mean and var 0/0 = NaN
        std::fill_n(out, plan.outputs, static_cast<Out>(op.finish(Op::identity())));
        return;
    }
    if (use_columns(plan)) {
        reduce_columns<T, Out>(op, x, plan, out, centre);
    } else {
        reduce_rows<T, Out>(op, x, plan, out, centre);
    }
}

// Runs `op` as laid out by `plan`; the result is a new contiguous tensor of x's dtype.
template <class Op>
Tensor run_reduction(const Tensor& x, const Plan& plan, const Op& op, const char* name) {
    Tensor out = Tensor::empty(plan.out_shape, x.dtype());
    visit_floating(x.dtype(), name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        reduce_into<T, T>(op, x.data<T>(), plan, out.data<T>());
    });
    return out;
}

// Index of the first largest of p[0], p[s], ..., p[(n-1)s] (n ≥ 1). A NaN
// counts as larger than any number, so the first NaN is the answer.
// Floating input takes two passes: the largest value with max's lanes
// (no branch per element to mispredict), then the first position holding
// it. Integers are compared exactly in one scan (a double could not hold
// every int64).
template <class T>
int64_t argmax_run(const T* p, int64_t n, int64_t s) {
    if constexpr (std::is_floating_point_v<T>) {
        const double best = fold_run<T, MaxOp>(p, n, s);
        for (int64_t i = 0; i < n; ++i) {
            const double v = static_cast<double>(p[i * s]);
            if (v == best || (best != best && v != v)) return i;
        }
        return 0;  // not reached: best is one of the values
    } else {
        int64_t best = 0;
        for (int64_t i = 1; i < n; ++i)
            if (p[i * s] > p[best * s]) best = i;
        return best;
    }
}

}  // namespace

// ---- sum, mean ------------------------------------------------------------------------------

// y = Σ_dims x
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim) {
    return run_reduction(x, make_plan(x, dims, keepdim, "sum"), SumOp{}, "sum");
}

Tensor sum(const Tensor& x) { return sum(x, Dims{}, false); }

// y = Σ_dims x / n, n = number of elements folded into each output
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
    const Plan plan = make_plan(x, dims, keepdim, "mean");
    return run_reduction(x, plan, SumOp{.divisor = static_cast<double>(plan.count)}, "mean");
}

Tensor mean(const Tensor& x) { return mean(x, Dims{}, false); }

// ---- max, min, argmax -----------------------------------------------------------------------

// y = max_dims x
Tensor max(const Tensor& x, const Dims& dims, bool keepdim) {
    const Plan plan = make_plan(x, dims, keepdim, "max");
    require_nonempty(x, plan.empty_dim, "max");
    return run_reduction(x, plan, MaxOp{}, "max");
}

Tensor max(const Tensor& x) { return max(x, Dims{}, false); }

// y = min_dims x
Tensor min(const Tensor& x, const Dims& dims, bool keepdim) {
    const Plan plan = make_plan(x, dims, keepdim, "min");
    require_nonempty(x, plan.empty_dim, "min");
    return run_reduction(x, plan, MinOp{}, "min");
}

Tensor min(const Tensor& x) { return min(x, Dims{}, false); }

// y = argmax_i x[..., i, ...] along `dim`, as int64. Each output scans its
// own line with the line's stride (fast for the usual case, the last
// dimension of logits); outputs are split across threads.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
    if (!x.defined()) fail<ValueError>("argmax: tensor is undefined");
    const DimMask mask = reduction_mask(x.dim(), Dims{dim}, "argmax");
    if (x.dtype() == DType::boolean)
        fail<ValueError>("argmax: expected float32, float64 or int64, got {}", dtype_name(x.dtype()));
    Tensor out = Tensor::empty(reduced_shape(x.shape(), mask, keepdim), DType::int64);
    int64_t* o = out.data<int64_t>();
    if (x.dim() == 0) {  // one element: its index is 0
        o[0] = 0;
        return out;
    }
    const int d = normalize_dim(dim, x.dim(), "argmax");
    if (x.shape()[d] == 0) require_nonempty(x, d, "argmax");
    const int64_t n = x.shape()[d], s = x.strides()[d];
    Walk kept;
    for (int e = 0; e < x.dim(); ++e)
        if (e != d) kept.push(x.shape()[e], x.strides()[e]);
    visit_dtype(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, bool>) {
            const T* in = x.data<T>();
            parallel_for(0, out.numel(), n, [&](int64_t first, int64_t last) {
                Odometer k(kept, kept.dims(), first);
                for (int64_t m = first; m < last; ++m, k.next()) o[m] = argmax_run(in + k.offset(), n, s);
            });
        }
    });
    return out;
}

// ---- var ------------------------------------------------------------------------------------

// y = Σ_dims (x - mean_dims x)² / (n - 1)   (unbiased)   or   / n   (biased)
Tensor var(const Tensor& x, const Dims& dims, bool unbiased, bool keepdim) {
    const Plan plan = make_plan(x, dims, keepdim, "var");
    const double n = static_cast<double>(plan.count);
    // max(…, 0): an empty reduction is 0/0 = NaN, and so is n = 1 when unbiased
    const double divisor = std::max(n - (unbiased ? 1.0 : 0.0), 0.0);
    Tensor out = Tensor::empty(plan.out_shape, x.dtype());
    visit_floating(x.dtype(), "var", [&](auto tag) {
        using T = typename decltype(tag)::type;
        // pass 1: each slice's mean, kept in double (no float32 rounding of the centre)
        std::vector<double> mu(plan.outputs);
        reduce_into<T, double>(SumOp{.divisor = n}, x.data<T>(), plan, mu.data());
        // pass 2: the squared deviations from it, folded like a sum
        reduce_into<T, T>(SquaredDeviationOp{.divisor = divisor}, x.data<T>(), plan, out.data<T>(), mu.data());
    });
    return out;
}

// ---- sum_to_shape ---------------------------------------------------------------------------

// y = Σ over the dimensions that broadcasting x's source up to x.shape() created or stretched
Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
    if (!x.defined()) fail<ValueError>("sum_to_shape: tensor is undefined");
    // `shape` must broadcast to x's shape: no more dimensions, and each one
    // (aligned from the right) equal to x's or 1
    const int lead = x.dim() - shape.size();
    bool fits = lead >= 0;
    for (int i = 0; fits && i < shape.size(); ++i) fits = shape[i] == x.shape()[lead + i] || shape[i] == 1;
    if (!fits)
        fail<ShapeError>("sum_to_shape: cannot sum {} down to {}: {} does not broadcast to {}", shape_str(x.shape()),
                         shape_str(shape), shape_str(shape), shape_str(x.shape()));
    visit_floating(x.dtype(), "sum_to_shape", [](auto) {});
    if (shape == x.shape()) return x;  // nothing was broadcast: x itself, no copy
    // the leading dimensions broadcasting added, and those it stretched from 1;
    // never empty here (an empty list would mean "every dimension" to sum)
    Dims dims;
    for (int d = 0; d < lead; ++d) dims.push_back(d);
    for (int i = 0; i < shape.size(); ++i)
        if (shape[i] == 1 && x.shape()[lead + i] != 1) dims.push_back(lead + i);
    const Plan plan = make_plan(x, dims, true, "sum_to_shape");
    // keepdim leaves x.dim() dimensions, the first `lead` of size 1: view them away
    return run_reduction(x, plan, SumOp{}, "sum_to_shape").view(shape);
}

}  // namespace tformer::core
