// Row-wise kernels, fast fused versions: softmax and log-softmax with their
// backwards, the two masked softmaxes of attention, layer norm forward and
// backward, and per-row cross-entropy. The formulas are in rowwise.hpp; the
// plain-loop oracles the tests compare against are in rowwise_reference.cpp.
//
// Every kernel sees its input as R rows of L contiguous elements, (R, L),
// where R is the product of all dims but the last. A non-contiguous x (a
// transposed or sliced view) is copied once to make that true, so the inner
// loops are plain for-loops over a row that the compiler can vectorise.
//
// Threads: rows go to parallel_for with cost L per row. Every row is
// computed start to end by one thread, in one fixed order, so the result
// does not depend on how rows are split: 1 and 2 threads give identical
// bits. All input checks happen before any parallel loop, because an
// exception must never leave an OpenMP region.
#include "core/rowwise.hpp"

#include "core/fast_exp.hpp"

#include "core/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace tformer::core {

namespace {

// Row sums are accumulated in double even for float32 rows: a float sum of
// thousands of terms loses digits that softmax's normalisation and layer
// norm's variance would then carry into every output.
using Acc = double;

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();
template <class T>
constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();

// ---- vectorised row pieces ------------------------------------------------------------
//
// The output layer of a translation model has thousands of logits per token,
// so cross-entropy and log-softmax rows are long: these loops must run in
// SIMD lanes. row_max is the max of the non-NaN entries (-inf for a row of
// only NaN or -inf); sum_exp_shifted adds exp(x_i - m) in T-typed lanes over
// blocks of kSumBlock entries and the blocks in Acc, so a float row keeps
// about the precision of a double sum while each block runs at float width.

constexpr int64_t kSumBlock = 256;

template <class T>
T row_max(const T* x, int64_t n) {
    T m = kNegInf<T>;
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
}

// Σ exp(x_i - m); with Store, also writes each exp(x_i - m) to e.
template <bool Store, class T>
Acc sum_exp_shifted(const T* x, int64_t n, T m, T* e = nullptr) {
    Acc total = 0;
    for (int64_t begin = 0; begin < n; begin += kSumBlock) {
        const int64_t end = std::min(n, begin + kSumBlock);
        T block = 0;
#pragma omp simd reduction(+ : block)
        for (int64_t i = begin; i < end; ++i) {
            const T v = exp_of(x[i] - m);
            if constexpr (Store) e[i] = v;
            block += v;
        }
        total += block;
    }
    return total;
}

// (..., L) -> (...): the shape of per-row results such as mean and rstd.
Shape leading_shape(const Shape& shape) {
    Shape out = shape;
    out.erase(out.size() - 1);
    return out;
}

// x seen as `count` contiguous rows of `length` elements: (R, L).
struct Rows {
    Tensor data;     // (..., L), contiguous
    int64_t count;   // R
    int64_t length;  // L
};

// Checks that x is a defined float32/float64 tensor with at least one dim and
// returns its rows, copying x only when it is not contiguous.
Rows as_rows(const Tensor& x, const char* op, const char* name) {
    if (!x.defined()) fail<ValueError>("{}: {} is undefined", op, name);
    if (!is_floating(x.dtype()))
        fail<ValueError>("{}: {} must be float32 or float64, got {}", op, name, dtype_name(x.dtype()));
    if (x.dim() == 0) fail<ShapeError>("{}: {} must have at least 1 dimension, got a 0-d tensor", op, name);
    return {x.contiguous(), shape_numel(leading_shape(x.shape())), x.shape().back()};
}

// Checks that t has exactly `shape` and `dtype` (e.g. grad_y against y, or
// the saved mean against x.shape[:-1]) and returns it contiguous.
Tensor expect(const Tensor& t, const char* name, const Shape& shape, DType dtype, const char* op) {
    if (!t.defined()) fail<ValueError>("{}: {} is undefined", op, name);
    if (!(t.shape() == shape))
        fail<ShapeError>("{}: {} has shape {}, expected {}", op, name, shape_str(t.shape()), shape_str(shape));
    if (t.dtype() != dtype)
        fail<ValueError>("{}: {} has dtype {}, expected {}", op, name, dtype_name(t.dtype()), dtype_name(dtype));
    return t.contiguous();
}

// Calls row(r) for every r in [0, rows), split across threads (cost = L).
template <class Row>
void for_each_row(int64_t rows, int64_t length, Row&& row) {
    parallel_for(0, rows, length, [&](int64_t first, int64_t last) {
        for (int64_t r = first; r < last; ++r) row(r);
    });
}

constexpr auto keep_all = [](int64_t) { return true; };

// Whether a kept entry of the row is NaN; only asked in the rare case where
// the row max came out as -inf, to tell "all -inf" from "NaN present".
template <class T, class Keep>
bool any_nan(const T* x, int64_t n, Keep keep) {
    for (int64_t i = 0; i < n; ++i)
        if (keep(i) && std::isnan(x[i])) return true;
    return false;
}

}  // namespace

// =====================================================================================
// softmax
// =====================================================================================

namespace {

// y_i = exp(x_i - m) / Σ_{kept j} exp(x_j - m) for kept i, 0 for the others,
// with m the max over kept entries. exp(x_i - m) ≤ 1, so nothing overflows,
// and the sum is ≥ 1 (the max term is exp(0)). When no entry is kept, or
// every kept entry is -inf, there is no mass to share and the row is zeros.
template <class T, class Keep>
void softmax_row(const T* x, T* y, int64_t n, Keep keep) {  // x, y: (L)
    T m = kNegInf<T>;
    for (int64_t i = 0; i < n; ++i)
        if (keep(i) && x[i] > m) m = x[i];  // NaN compares false: caught below
    if (m == kNegInf<T>) {
        const T fill = any_nan(x, n, keep) ? kNaN<T> : T(0);
        for (int64_t i = 0; i < n; ++i) y[i] = keep(i) ? fill : T(0);
        return;
    }
    Acc sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        const T e = keep(i) ? exp_of(x[i] - m) : T(0);  // a NaN here makes sum and the row NaN
        y[i] = e;
        sum += e;
    }
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

// y_i = (x_i - m) - log Σ_j exp(x_j - m). Writing it with the shift keeps
// large inputs exact (x_i - m is small) and the log's argument ≥ 1.
template <class T>
void log_softmax_row(const T* x, T* y, int64_t n) {  // x, y: (L)
    const T m = row_max(x, n);
    if (m == kNegInf<T>) {
        // all -inf: log of softmax's all-zero row
        const T fill = any_nan(x, n, keep_all) ? kNaN<T> : kNegInf<T>;
        std::fill(y, y + n, fill);
        return;
    }
    const Acc log_sum = std::log(sum_exp_shifted<false>(x, n, m));
    const T ls = static_cast<T>(log_sum);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
}

// Runs row_fn(in_row, out_row, r) over every row r of `rows` (x's, (R, L))
// into a new tensor of x's shape.
template <class RowFn>
Tensor for_rows(const Tensor& x, const Rows& rows, const char* op, RowFn&& row_fn) {
    Tensor out = Tensor::empty(x.shape(), x.dtype());  // (..., L)
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* in = rows.data.data<T>();
        T* o = out.data<T>();
        const int64_t L = rows.length;
        for_each_row(rows.count, L, [&](int64_t r) { row_fn(in + r * L, o + r * L, r); });
    });
    return out;
}

// Runs row_fn(in_row, out_row, L) over every row of x into a new tensor.
template <class RowFn>
Tensor map_rows(const Tensor& x, const char* op, RowFn&& row_fn) {
    const Rows rows = as_rows(x, op, "x");
    return for_rows(x, rows, op, [&](const auto* in, auto* o, int64_t) { row_fn(in, o, rows.length); });
}

}  // namespace

// softmax(x)_i = exp(x_i - max x) / Σ_j exp(x_j - max x)
Tensor softmax(const Tensor& x) {
    return map_rows(x, "softmax", [](const auto* in, auto* out, int64_t n) { softmax_row(in, out, n, keep_all); });
}

// log_softmax(x)_i = x_i - max x - log Σ_j exp(x_j - max x)
Tensor log_softmax(const Tensor& x) {
    return map_rows(x, "log_softmax", [](const auto* in, auto* out, int64_t n) { log_softmax_row(in, out, n); });
}

// per row: argmax, and log_softmax_row's value there (the same max, log-sum and formula)
ArgmaxLogSoftmax argmax_log_softmax(const Tensor& x) {
    const char* op = "argmax_log_softmax";
    const Rows rows = as_rows(x, op, "x");
    if (rows.length == 0) fail<ValueError>("{}: x of shape {} has empty rows", op, shape_str(x.shape()));
    const Shape lead = leading_shape(x.shape());
    ArgmaxLogSoftmax out{.ids = Tensor::empty(lead, DType::int64), .log_probs = Tensor::empty(lead, x.dtype())};
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* in = rows.data.data<T>();
        int64_t* ids = out.ids.data<int64_t>();
        T* lp = out.log_probs.data<T>();
        const int64_t n = rows.length;
        for_each_row(rows.count, n, [&](int64_t r) {
            const T* xr = in + r * n;
            const T m = row_max(xr, n);  // the largest non-NaN entry
            const auto first_nan = [&] {
                for (int64_t i = 0; i < n; ++i)
                    if (std::isnan(xr[i])) return i;
                return int64_t{-1};
            };
            const auto first_equal = [&](T v) {
                int64_t i = 0;
                while (xr[i] != v) ++i;  // v is one of the entries
                return i;
            };
            if (m == kNegInf<T>) {  // every entry -inf or NaN: log_softmax_row's fill
                const int64_t nan_at = first_nan();
                ids[r] = nan_at >= 0 ? nan_at : 0;
                lp[r] = nan_at >= 0 ? kNaN<T> : kNegInf<T>;
                return;
            }
            const Acc sum = sum_exp_shifted<false>(xr, n, m);
            // a NaN entry makes the sum NaN; then argmax's answer is the first NaN
            const int64_t nan_at = std::isnan(sum) ? first_nan() : -1;
            const int64_t id = nan_at >= 0 ? nan_at : first_equal(m);
            ids[r] = id;
            lp[r] = (xr[id] - m) - static_cast<T>(std::log(sum));
        });
    });
    return out;
}

namespace {

// The k largest of y_i = (x_i - m) - ls over one row, largest first, equal
// values by index: a list kept sorted, which an entry joins only when it beats
// the list's last. Blocks of entries whose largest cannot join are skipped
// after one vectorised pass, so after the first few blocks the row costs about
// one read. (A NaN y never beats anything; its row is handled by the caller.)
template <class T>
void top_k_row(const T* x, int64_t n, T m, T ls, int64_t k, int64_t* ids, T* vals) {
    constexpr int64_t kBlock = 64;
    int64_t held = 0;
    T y[kBlock];
    for (int64_t begin = 0; begin < n; begin += kBlock) {
        const int64_t len = std::min(kBlock, n - begin);
        T block_max = kNegInf<T>;
#pragma omp simd reduction(max : block_max)
        for (int64_t i = 0; i < len; ++i) {
            y[i] = (x[begin + i] - m) - ls;
            block_max = y[i] > block_max ? y[i] : block_max;
        }
        if (held == k && !(block_max > vals[k - 1])) continue;
        for (int64_t i = 0; i < len; ++i) {
            if (held == k && !(y[i] > vals[k - 1])) continue;
            int64_t at = held < k ? held++ : k - 1;  // the slot it takes, then moved up past smaller values
            while (at > 0 && y[i] > vals[at - 1]) {
                vals[at] = vals[at - 1], ids[at] = ids[at - 1];
                --at;
            }
            vals[at] = y[i], ids[at] = begin + i;
        }
    }
}

}  // namespace

// per row: log_softmax_row's max and log-sum, then its k largest values
ArgmaxLogSoftmax top_k_log_softmax(const Tensor& x, int64_t k) {
    const char* op = "top_k_log_softmax";
    const Rows rows = as_rows(x, op, "x");
    if (k < 1 || k > rows.length)
        fail<ValueError>("{}: k = {} must be in [1, {}] for x of shape {}", op, k, rows.length, shape_str(x.shape()));
    Shape lead = leading_shape(x.shape());
    lead.push_back(k);
    ArgmaxLogSoftmax out{.ids = Tensor::empty(lead, DType::int64), .log_probs = Tensor::empty(lead, x.dtype())};
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* in = rows.data.data<T>();
        const int64_t n = rows.length;
        for_each_row(rows.count, n, [&](int64_t r) {
            const T* xr = in + r * n;
            int64_t* ids = out.ids.data<int64_t>() + r * k;
            T* vals = out.log_probs.data<T>() + r * k;
            const T m = row_max(xr, n);
            const T ls = m == kNegInf<T> ? T(0) : static_cast<T>(std::log(sum_exp_shifted<false>(xr, n, m)));
            if (m == kNegInf<T> || std::isnan(ls)) {  // all -inf, or a NaN or +inf: log_softmax_row's fill
                const T fill = m == kNegInf<T> && !any_nan(xr, n, keep_all) ? kNegInf<T> : kNaN<T>;
                for (int64_t i = 0; i < k; ++i) ids[i] = i, vals[i] = fill;
                return;
            }
            top_k_row(xr, n, m, ls, k, ids, vals);
        });
    });
    return out;
}

namespace {

// Runs row_fn(dy_row, y_row, dx_row, L) over every row: the shared frame of
// the two softmax backwards, which both need one row sum and then one pass.
template <class RowFn>
Tensor backward_rows(const Tensor& grad_y, const Tensor& y, const char* op, RowFn&& row_fn) {
    const Rows rows = as_rows(y, op, "y");
    const Tensor dy = expect(grad_y, "grad_y", y.shape(), y.dtype(), op);  // (..., L)
    Tensor dx = Tensor::empty(y.shape(), y.dtype());                       // (..., L)
    visit_floating(y.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* yp = rows.data.data<T>();
        const T* dyp = dy.data<T>();
        T* dxp = dx.data<T>();
        const int64_t L = rows.length;
        for_each_row(rows.count, L, [&](int64_t r) { row_fn(dyp + r * L, yp + r * L, dxp + r * L, L); });
    });
    return dx;
}

}  // namespace

// Backward of y = softmax(x). The Jacobian is ∂y_i/∂x_j = y_i (δ_ij - y_j), so
//   dx_j = Σ_i dy_i y_i (δ_ij - y_j) = y_j (dy_j - Σ_i dy_i y_i),
// one dot product per row instead of an L×L matrix.
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y) {
    return backward_rows(grad_y, y, "softmax_backward", [](const auto* dy, const auto* yr, auto* dx, int64_t n) {
        using T = std::remove_cvref_t<decltype(*yr)>;
        Acc dot = 0;
        for (int64_t i = 0; i < n; ++i) dot += static_cast<Acc>(dy[i]) * yr[i];
        for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<T>(yr[i] * (dy[i] - dot));
    });
}

// Backward of y = log_softmax(x). With y_i = x_i - lse(x) and ∂lse/∂x_j =
// softmax_j = exp(y_j):  ∂y_i/∂x_j = δ_ij - exp(y_j), so
//   dx_j = dy_j - exp(y_j) Σ_i dy_i.
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y) {
    return backward_rows(grad_y, y, "log_softmax_backward", [](const auto* dy, const auto* yr, auto* dx, int64_t n) {
        using T = std::remove_cvref_t<decltype(*yr)>;
        Acc sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += dy[i];
        for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<T>(dy[i] - std::exp(static_cast<Acc>(yr[i])) * sum);
    });
}

// =====================================================================================
// masked softmax (seed 003)
// =====================================================================================
//
// Backward: both masked softmaxes are differentiated by softmax_backward(dy, y).
// Inside the kept entries y is an ordinary softmax; a masked entry has y = 0,
// so its dx = 0 · (dy - Σ dy y) = 0 and it takes no part in Σ dy y. A row of
// all zeros likewise gets dx = 0, which is right: it is constant in x.

namespace {

// The valid length of every row of x, read from either form of valid_lens.
struct ValidLengths {
    std::vector<int64_t> lens;  // one per batch element, or one per row
    int64_t rows_per_len = 1;   // consecutive rows of x that share one entry
    int64_t of_row(int64_t r) const { return lens[r / rows_per_len]; }
};

ValidLengths valid_lengths(const Tensor& valid_lens, const Shape& x_shape, int64_t rows) {
    const char* op = "masked_softmax";
    const Shape per_row = leading_shape(x_shape);  // (..., T)
    const int64_t S = x_shape.back();
    ValidLengths out;
    if (valid_lens.shape() == per_row) {
        out.rows_per_len = 1;
    } else if (x_shape.size() >= 2 && valid_lens.dim() == 1 && valid_lens.shape()[0] == x_shape[0]) {
        // (B): every row of batch element b uses lens[b], like d2l's
        // torch.repeat_interleave(valid_lens, T)
        out.rows_per_len = x_shape[0] == 0 ? 1 : rows / x_shape[0];
    } else if (x_shape.size() >= 2) {
        fail<ShapeError>(
            "{}: valid_lens of shape {} fits neither one length per batch element ({}) nor one per row {} "
            "for x of shape {}",
            op, shape_str(valid_lens.shape()), x_shape[0], shape_str(per_row), shape_str(x_shape));
    } else {
        fail<ShapeError>("{}: valid_lens of shape {} must have shape {} for x of shape {}", op,
                         shape_str(valid_lens.shape()), shape_str(per_row), shape_str(x_shape));
    }

    auto check_range = [&](auto v) {
        if (v < 0 || v > S)
            fail<ValueError>("{}: valid length {} out of range [0, {}] for rows of S = {}", op, v, S, S);
    };
    out.lens.reserve(static_cast<size_t>(valid_lens.numel()));
    if (valid_lens.dtype() == DType::int64) {
        for (int64_t v : valid_lens.to_vector<int64_t>()) {
            check_range(v);
            out.lens.push_back(v);
        }
    } else if (is_floating(valid_lens.dtype())) {
        // d2l keeps lengths in float tensors at times; accept them when whole
        for (double v : valid_lens.to_vector<double>()) {
            if (v != std::floor(v)) fail<ValueError>("{}: valid length {} is not a whole number", op, v);  // also NaN
            check_range(v);
            out.lens.push_back(static_cast<int64_t>(v));
        }
    } else {
        fail<ValueError>("{}: valid_lens must be int64, float32 or float64, got {}", op,
                         dtype_name(valid_lens.dtype()));
    }
    return out;
}

}  // namespace

// masked_softmax(x, n)_i = softmax(x[:n])_i for i < n, 0 for i ≥ n
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens) {
    const char* op = "masked_softmax";
    if (!valid_lens.defined()) return softmax(x);  // d2l: valid_lens None means no mask
    const Rows rows = as_rows(x, op, "x");         // (..., T, S) as (R, S)
    const ValidLengths lens = valid_lengths(valid_lens, x.shape(), rows.count);
    return for_rows(x, rows, op, [&](const auto* in, auto* o, int64_t r) {
        using T = std::remove_pointer_t<decltype(o)>;
        const int64_t n = lens.of_row(r);
        softmax_row(in, o, n, keep_all);          // the first n entries: an ordinary softmax
        std::fill(o + n, o + rows.length, T(0));  // padding gets no attention
    });
}

// masked_softmax_by_mask(x, keep)_i = exp(x_i) / Σ_{keep_j} exp(x_j) where keep_i, else 0
Tensor masked_softmax_by_mask(const Tensor& x, const Tensor& keep) {
    const char* op = "masked_softmax_by_mask";
    const Rows rows = as_rows(x, op, "x");  // (..., T, S) as (R, S)
    if (!keep.defined()) fail<ValueError>("{}: keep is undefined", op);
    if (keep.dtype() != DType::boolean)
        fail<ValueError>("{}: keep must be a bool mask, got {}", op, dtype_name(keep.dtype()));
    if (!broadcasts_to(keep.shape(), x.shape()))
        fail<ShapeError>("{}: mask of shape {} does not broadcast to x of shape {}", op, shape_str(keep.shape()),
                         shape_str(x.shape()));
    // The mask is read in place through broadcast strides (a (B, 1, 1, S) pad
    // mask has stride 0 along heads and queries), never expanded in memory.
    const Tensor k = keep.expand(x.shape());  // (..., T, S)
    const Shape lead = leading_shape(x.shape());
    const int64_t k_inner = k.strides().back();
    const bool* k_base = k.data<bool>();
    return for_rows(x, rows, op, [&](const auto* in, auto* o, int64_t r) {
        // where row r's mask starts: unravel r over the leading dims
        int64_t offset = 0, rest = r;
        for (int d = lead.size() - 1; d >= 0; --d) {
            offset += rest % lead[d] * k.strides()[d];
            rest /= lead[d];
        }
        const bool* kr = k_base + offset;
        softmax_row(in, o, rows.length, [&](int64_t i) { return kr[i * k_inner]; });
    });
}

// =====================================================================================
// layer norm (seed 000)
// =====================================================================================

namespace {

// weight or bias of a layer norm: undefined, or (D) with x's dtype.
Tensor affine_param(const Tensor& p, const char* name, const Tensor& x, const char* op) {
    if (!p.defined()) return p;
    if (!(p.shape() == Shape{x.shape().back()}))
        fail<ShapeError>("{}: {} of shape {} does not match the last dimension of x {}", op, name, shape_str(p.shape()),
                         shape_str(x.shape()));
    if (p.dtype() != x.dtype())
        fail<ValueError>("{}: {} has dtype {} but x has {}", op, name, dtype_name(p.dtype()), dtype_name(x.dtype()));
    return p.contiguous();
}

// Σ_{i < n} f(i) in Acc, as kLanes running sums (lane l takes every i with
// i mod kLanes = l) added together at the end, then the last n mod kLanes
// terms. The compiler keeps the lanes in vector registers; the order of the
// additions is fixed here, not by the vector width, so results do not
// depend on the machine. (A plain running sum is one long chain of
// dependent additions: on layer norm's rows of 32 that chain is most of the time.)
template <class F>
Acc lane_sum(int64_t n, F&& f) {
    constexpr int64_t kLanes = 8;
    Acc lane[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) lane[l] += f(i + l);
    Acc total = 0;
    for (int64_t l = 0; l < kLanes; ++l) total += lane[l];
    for (; i < n; ++i) total += f(i);
    return total;
}

// Layer norm's rows go kRowBlock at a time, each step for all rows of a
// block before the next: a row alone is a chain of dependent steps (sums,
// their horizontal adds, divisions, a square root) that leaves the processor
// waiting; the rows of a block overlap. f(r0, n) gets rows [r0, r0 + n).
constexpr int64_t kRowBlock = 16;
template <class F>
void for_row_blocks(int64_t first, int64_t last, F&& f) {
    for (int64_t r0 = first; r0 < last; r0 += kRowBlock) f(r0, std::min(kRowBlock, last - r0));
}

// Rows [first, last) of layer norm, (R, D) row-major: y = (x - mean) * rstd
// * w + b, with each row's mean and rstd written out. layer_norm and
// add_layer_norm both call it, so the fused AddNorm rounds exactly as the
// composed one. A block of rows at a time (for_row_blocks): means, then
// variances, then outputs.
template <class T>
void layer_norm_rows(const T* x, T* y, int64_t first, int64_t last, int64_t D, const T* wp, const T* bp, double eps,
                     T* mean_out, T* rstd_out) {
    Acc mean[kRowBlock], rstd[kRowBlock];
    // the weight and the bias in Acc once, not per row (the same values)
    std::vector<Acc> affine(wp && bp ? static_cast<size_t>(2 * D) : 0);
    for (int64_t i = 0; i < static_cast<int64_t>(affine.size()) / 2; ++i) {
        affine[static_cast<size_t>(i)] = wp[i];
        affine[static_cast<size_t>(D + i)] = bp[i];
    }
    const Acc* wd = affine.empty() ? nullptr : affine.data();
    const Acc* bd = affine.empty() ? nullptr : affine.data() + D;
    for_row_blocks(first, last, [&](int64_t r0, int64_t n) {
        // Two passes: the mean first, then the squared deviations from it.
        // The one-pass E[x²] - E[x]² cancels catastrophically when |mean|
        // is large against the spread (x = 1e4 + small noise in float32).
        // The divisions and square roots run for the whole block after its
        // sums, one vector instruction for 8 rows instead of one per row.
        for (int64_t r = 0; r < n; ++r) {
            const T* xr = x + (r0 + r) * D;
            mean[r] = lane_sum(D, [&](int64_t i) { return static_cast<Acc>(xr[i]); });
        }
        for (int64_t r = 0; r < n; ++r) mean[r] /= static_cast<Acc>(D);
        for (int64_t r = 0; r < n; ++r) {
            const T* xr = x + (r0 + r) * D;
            rstd[r] = lane_sum(D, [&](int64_t i) {  // Σ (x - mean)²
                const Acc c = xr[i] - mean[r];
                return c * c;
            });
        }
        for (int64_t r = 0; r < n; ++r)
            rstd[r] = 1.0 / std::sqrt(rstd[r] / static_cast<Acc>(D) + eps);  // biased variance, like PyTorch
        for (int64_t r = 0; r < n; ++r) {
            const T* xr = x + (r0 + r) * D;
            T* yr = y + (r0 + r) * D;
            const auto out_row = [&](const Acc* w, const Acc* b) {
                for (int64_t i = 0; i < D; ++i) yr[i] = static_cast<T>((xr[i] - mean[r]) * rstd[r] * w[i] + b[i]);
            };
            if (wd && bd) {
                out_row(wd, bd);
            } else {
                for (int64_t i = 0; i < D; ++i) {
                    Acc v = (xr[i] - mean[r]) * rstd[r];  // x̂_i
                    if (wp) v *= wp[i];
                    if (bp) v += bp[i];
                    yr[i] = static_cast<T>(v);
                }
            }
            mean_out[r0 + r] = static_cast<T>(mean[r]);
            rstd_out[r0 + r] = static_cast<T>(rstd[r]);
        }
    });
}

// What layer_norm and add_layer_norm check and make alike once x's rows
// are read: eps, the affine parameters, and the outputs.
struct LayerNormCall {
    Rows rows;         // x (..., D) as (R, D)
    Tensor w, b;       // (D) or undefined
    double eps;        // added to the variance
    LayerNormOut out;  // y (..., D), mean and rstd (...)
};

LayerNormCall prepare_layer_norm(const Rows& rows, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 double eps, const char* op) {
    if (rows.length == 0) fail<ValueError>("{}: x of shape {} has empty rows", op, shape_str(x.shape()));
    if (!(eps >= 0)) fail<ValueError>("{}: eps must be >= 0, got {}", op, eps);
    const Tensor w = affine_param(weight, "weight", x, op);
    const Tensor b = affine_param(bias, "bias", x, op);
    const Shape lead = leading_shape(x.shape());
    return {.rows = rows,
            .w = w,
            .b = b,
            .eps = eps,
            .out = {.y = Tensor::empty(x.shape(), x.dtype()),
                    .mean = Tensor::empty(lead, x.dtype()),
                    .rstd = Tensor::empty(lead, x.dtype())}};
}

// Layer norm of the rows of src (R, D) into call.out, the rows split over
// the threads; each thread first runs fill(first, last), which may write its
// rows of src (add_layer_norm's sum).
template <class T, class Fill>
void normalize_rows(const LayerNormCall& call, const T* src, Fill&& fill) {
    const T* wp = call.w.defined() ? call.w.data<T>() : nullptr;
    const T* bp = call.b.defined() ? call.b.data<T>() : nullptr;
    T *yp = call.out.y.data<T>(), *mp = call.out.mean.data<T>(), *rp = call.out.rstd.data<T>();
    const int64_t D = call.rows.length;
    parallel_for(0, call.rows.count, D, [&](int64_t first, int64_t last) {
        fill(first, last);
        layer_norm_rows(src, yp, first, last, D, wp, bp, call.eps, mp, rp);
    });
}

}  // namespace

// y = (x - mean) / √(var + eps) * weight + bias, mean and biased var over the last dim

LayerNormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
    const char* op = "layer_norm";
    const LayerNormCall call = prepare_layer_norm(as_rows(x, op, "x"), x, weight, bias, eps, op);
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        normalize_rows(call, call.rows.data.data<T>(), [](int64_t, int64_t) {});
    });
    return call.out;
}

// s = x + y ⊙ keep, then layer_norm(s): seed 000's AddNorm ln(dropout(Y) + X) in one pass per row
AddLayerNormOut add_layer_norm(const Tensor& x, const Tensor& y, const Tensor& keep, const Tensor& weight,
                               const Tensor& bias, double eps) {
    const char* op = "add_layer_norm";
    const Rows xs = as_rows(x, op, "x");                                                           // (..., D) as (R, D)
    const Tensor yc = expect(y, "y", x.shape(), x.dtype(), op);                                    // (..., D)
    const Tensor kc = keep.defined() ? expect(keep, "keep", x.shape(), x.dtype(), op) : Tensor();  // (..., D)
    const LayerNormCall call = prepare_layer_norm(xs, x, weight, bias, eps, op);
    const Tensor sum = Tensor::empty(x.shape(), x.dtype());  // (..., D)
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* xp = xs.data.data<T>();
        const T* yp = yc.data<T>();
        const T* kp = kc.defined() ? kc.data<T>() : nullptr;
        T* sp = sum.data<T>();
        const int64_t D = xs.length;
        normalize_rows(call, sp, [&](int64_t first, int64_t last) {
            // dropout(Y) + X, rounded as the composed mul then add
            const int64_t o = first * D, n = (last - first) * D;
            if (kp) {
                for (int64_t i = o; i < o + n; ++i) sp[i] = yp[i] * kp[i] + xp[i];
            } else {
                for (int64_t i = o; i < o + n; ++i) sp[i] = yp[i] + xp[i];
            }
        });
    });
    return {.y = call.out.y, .sum = sum, .mean = call.out.mean, .rstd = call.out.rstd};
}

namespace {

// What layer_norm_backward reads, as pointers of its dtype: x and dy (R, D),
// the saved mean and rstd (R).
template <class T>
struct SavedRows {
    const T *xp, *dyp, *mp, *rp;
    int64_t R, D;
};

// dx of every row (see layer_norm_backward); wp (D) or nullptr, dxp (R, D).
template <class T>
void layer_norm_dx(const SavedRows<T>& s, const T* wp, T* dxp) {
    const T *xp = s.xp, *dyp = s.dyp, *mp = s.mp, *rp = s.rp;
    const int64_t R = s.R, D = s.D;
    // dx, a block of rows at a time (for_row_blocks): both row sums of
    // every row of the block first, then the block's dx. g and x̂ are
    // recomputed where they are used, the same operations, so the same bits.
    // the weight in Acc once, not per row (the same values); no weight: g = dy · 1, exactly dy
    std::vector<Acc> w_acc(static_cast<size_t>(D), Acc(1));
    if (wp) std::copy(wp, wp + D, w_acc.begin());
    const Acc* wr = w_acc.data();
    parallel_for(0, R, D, [&](int64_t first, int64_t last) {
        Acc mean_g[kRowBlock], mean_gx[kRowBlock];
        for_row_blocks(first, last, [&](int64_t r0, int64_t n) {
            for (int64_t j = 0; j < n; ++j) {
                const T* xr = xp + (r0 + j) * D;
                const T* dyr = dyp + (r0 + j) * D;
                const Acc m = mp[r0 + j], rstd_r = rp[r0 + j];
                const auto g = [&](int64_t i) { return static_cast<Acc>(dyr[i]) * wr[i]; };  // g_i
                const auto xhat = [&](int64_t i) { return (xr[i] - m) * rstd_r; };           // x̂_i
                mean_g[j] = lane_sum(D, [&](int64_t i) { return g(i); });
                mean_gx[j] = lane_sum(D, [&](int64_t i) { return g(i) * xhat(i); });
            }
            for (int64_t j = 0; j < n; ++j) {  // the divisions of the block together, in vectors
                mean_g[j] /= static_cast<Acc>(D);
                mean_gx[j] /= static_cast<Acc>(D);
            }
            for (int64_t j = 0; j < n; ++j) {
                const T* xr = xp + (r0 + j) * D;
                const T* dyr = dyp + (r0 + j) * D;
                T* dxr = dxp + (r0 + j) * D;
                const Acc m = mp[r0 + j], rstd_r = rp[r0 + j];
                for (int64_t i = 0; i < D; ++i) {
                    const Acc g = static_cast<Acc>(dyr[i]) * wr[i], xhat = (xr[i] - m) * rstd_r;
                    dxr[i] = static_cast<T>(rstd_r * (g - mean_g[j] - xhat * mean_gx[j]));
                }
            }
        });
    });
}

// dweight (D) and dbias (D), either may be nullptr.
template <class T>
void layer_norm_affine_grads(const SavedRows<T>& s, T* dwp, T* dbp) {
    const T *xp = s.xp, *dyp = s.dyp, *mp = s.mp, *rp = s.rp;
    const int64_t R = s.R, D = s.D;
    // dweight and dbias sum over rows. Splitting rows across threads would
    // need per-thread partial sums added in a thread-count-dependent
    // order; splitting columns instead keeps each column's sum in one
    // thread, in row order, so the bits never depend on the thread count.
    // kCols columns at a time, their sums in arrays of fixed size that the
    // compiler keeps in registers across the rows.
    parallel_for(0, D, R, [&](int64_t c0, int64_t c1) {
        constexpr int64_t kCols = 16;
        for (int64_t cb = c0; cb < c1; cb += kCols) {
            const int64_t nc = std::min(kCols, c1 - cb);
            Acc dw[kCols] = {}, db[kCols] = {};
            const auto sum_rows = [&](auto cols) {
                for (int64_t r = 0; r < R; ++r) {
                    const T* xr = xp + r * D + cb;
                    const T* dyr = dyp + r * D + cb;
                    const Acc m = mp[r], rstd_r = rp[r];
                    for (int64_t i = 0; i < cols; ++i) {
                        db[i] += dyr[i];
                        dw[i] += dyr[i] * ((xr[i] - m) * rstd_r);
                    }
                }
            };
            if (nc == kCols)
                sum_rows(std::integral_constant<int64_t, kCols>{});  // a trip count known at compile time
            else
                sum_rows(nc);
            for (int64_t i = 0; i < nc; ++i) {
                if (dwp) dwp[cb + i] = static_cast<T>(dw[i]);
                if (dbp) dbp[cb + i] = static_cast<T>(db[i]);
            }
        }
    });
}

}  // namespace

// Backward of  y = x̂ ⊙ w + b,  x̂ = (x - μ) r,  μ = mean(x),  r = (var(x) + eps)^(-1/2),
// one row of D entries at a time (after llm.c's doc/layernorm).
//
//   dbias_i   = Σ_rows dy_i                 (y depends on b_i with slope 1)
//   dweight_i = Σ_rows dy_i x̂_i             (and on w_i with slope x̂_i)
//   g_i       = dy_i w_i                    (the gradient arriving at x̂_i)
//
// For dx we need ∂x̂_i/∂x_j. Two facts:
//   ∂μ/∂x_j   = 1/D
//   ∂var/∂x_j = (2/D) Σ_k (x_k - μ)(δ_kj - 1/D) = (2/D)(x_j - μ)   (since Σ_k (x_k - μ) = 0)
//   ∂r/∂x_j   = -½ r³ ∂var/∂x_j = -r³ (x_j - μ)/D = -r² x̂_j / D
// so
//   ∂x̂_i/∂x_j = r (δ_ij - 1/D) + (x_i - μ) ∂r/∂x_j = r (δ_ij - 1/D - x̂_i x̂_j / D)
// and the chain rule sums over i:
//   dx_j = Σ_i g_i ∂x̂_i/∂x_j = r (g_j - mean(g) - x̂_j mean(g ⊙ x̂)).
// Two row sums (Σ g and Σ g x̂) and one pass, instead of a D×D Jacobian.
LayerNormGrads layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, bool has_bias) {
    const char* op = "layer_norm_backward";
    const Rows rows = as_rows(x, op, "x");  // (..., D) as (R, D)
    const Shape lead = leading_shape(x.shape());
    const Tensor dy = expect(grad_y, "grad_y", x.shape(), x.dtype(), op);  // (..., D)
    const Tensor mu = expect(mean, "mean", lead, x.dtype(), op);           // (...)
    const Tensor rs = expect(rstd, "rstd", lead, x.dtype(), op);           // (...)
    const Tensor w = affine_param(weight, "weight", x, op);                // (D) or undefined
    const int64_t R = rows.count, D = rows.length;
    LayerNormGrads grads{.dx = Tensor::empty(x.shape(), x.dtype()),
                         .dweight = w.defined() ? Tensor::empty({D}, x.dtype()) : Tensor(),
                         .dbias = has_bias ? Tensor::empty({D}, x.dtype()) : Tensor()};
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const SavedRows<T> saved{
            .xp = rows.data.data<T>(), .dyp = dy.data<T>(), .mp = mu.data<T>(), .rp = rs.data<T>(), .R = R, .D = D};
        layer_norm_dx(saved, w.defined() ? w.data<T>() : nullptr, grads.dx.data<T>());
        if (!grads.dweight.defined() && !grads.dbias.defined()) return;
        layer_norm_affine_grads(saved, grads.dweight.defined() ? grads.dweight.template data<T>() : nullptr,
                                grads.dbias.defined() ? grads.dbias.template data<T>() : nullptr);
    });
    return grads;
}

// =====================================================================================
// cross-entropy
// =====================================================================================
//
// With lse = log Σ_v exp(x_v), log p_v = x_v - lse and Σ_v q_v = 1:
//   loss = -Σ_v q_v (x_v - lse) = lse - (1-ε) x_t - ε mean_v(x_v).
// Shifting by the row max m (lse = m + log Σ exp(x_v - m)) gives
//   loss = log Σ exp(x_v - m) - (1-ε)(x_t - m) - ε (mean(x) - m),
// where every term is a small number and the log's argument is ≥ 1.
// Its gradient: ∂loss/∂x_v = p_v - q_v.

namespace {

struct CrossEntropyInputs {
    Rows logits;                  // (N, V)
    std::vector<int64_t> target;  // (N), each in [0, V) or ignore_index
};

CrossEntropyInputs cross_entropy_inputs(const Tensor& logits, const Tensor& targets, double label_smoothing,
                                        int64_t ignore_index, const char* op) {
    CrossEntropyInputs in{.logits = as_rows(logits, op, "logits"), .target = {}};
    if (logits.dim() != 2) fail<ShapeError>("{}: logits must be 2-D (N, V), got {}", op, shape_str(logits.shape()));
    const int64_t N = logits.shape()[0], V = logits.shape()[1];
    if (V == 0) fail<ValueError>("{}: logits of shape {} have no classes", op, shape_str(logits.shape()));
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        fail<ValueError>("{}: label_smoothing must be in [0, 1], got {}", op, label_smoothing);
    if (!targets.defined()) fail<ValueError>("{}: targets is undefined", op);
    if (targets.dtype() != DType::int64)
        fail<ValueError>("{}: targets must be int64, got {}", op, dtype_name(targets.dtype()));
    if (!(targets.shape() == Shape{N}))
        fail<ShapeError>("{}: targets of shape {} do not match logits of shape {} (expected ({}))", op,
                         shape_str(targets.shape()), shape_str(logits.shape()), N);
    in.target = targets.to_vector<int64_t>();
    for (int64_t t : in.target)
        if (t != ignore_index && (t < 0 || t >= V))
            fail<IndexError>("{}: target {} out of range for {} classes", op, t, V);
    return in;
}

// max and Σ exp(x - max) of one row, the two numbers both directions need.
template <class T>
std::pair<T, Acc> max_and_sum(const T* x, int64_t n) {
    const T m = row_max(x, n);
    return {m, sum_exp_shifted<false>(x, n, m)};
}

}  // namespace

// loss_n = -Σ_v q_v log softmax(logits_n)_v,  q = (1-ε) onehot(t_n) + ε/V
Tensor cross_entropy_rows(const Tensor& logits, const Tensor& targets, double label_smoothing, int64_t ignore_index,
                          Tensor* row_stats) {
    const char* op = "cross_entropy";
    const CrossEntropyInputs in = cross_entropy_inputs(logits, targets, label_smoothing, ignore_index, op);
    const int64_t N = in.logits.count, V = in.logits.length;
    const double eps = label_smoothing;
    Tensor loss = Tensor::empty({N}, logits.dtype());  // (N)
    if (row_stats) *row_stats = zeros({N, 2}, DType::float64);
    Acc* stats = row_stats ? row_stats->data<Acc>() : nullptr;  // (N, 2): m, Σ exp(x - m)
    visit_floating(logits.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* xp = in.logits.data.data<T>();
        T* lp = loss.data<T>();
        for_each_row(N, V, [&](int64_t n) {
            const int64_t t = in.target[n];
            if (t == ignore_index) {
                lp[n] = T(0);
                return;
            }
            const T* x = xp + n * V;
            // not a structured binding: clang 14 (the fuzz build) cannot capture one in the lambda below
            const std::pair<T, Acc> max_sum = max_and_sum(x, V);
            const Acc m = max_sum.first;
            if (stats) {
                stats[2 * n] = m;
                stats[2 * n + 1] = max_sum.second;
            }
            Acc l = std::log(max_sum.second);
            // each term only when its weight is non-zero, so a -inf logit with
            // weight 0 never makes 0 · inf = NaN
            if (eps < 1) l -= (1 - eps) * (x[t] - m);
            if (eps > 0) {
                // Σ_v (x_v - m), in float lanes over blocks (as sum_exp_shifted): a plain
                // double sum would keep this pass scalar, as long as the rest together
                Acc shifted = 0;
                for (int64_t begin = 0; begin < V; begin += kSumBlock) {
                    const int64_t end = std::min(V, begin + kSumBlock);
                    T block = 0;
#pragma omp simd reduction(+ : block)
                    for (int64_t v = begin; v < end; ++v) block += x[v] - static_cast<T>(m);
                    shifted += block;
                }
                l -= eps * shifted / static_cast<Acc>(V);
            }
            lp[n] = static_cast<T>(l);
        });
    });
    return loss;
}

namespace {
// dlogits_n = grad_n (softmax(logits_n) - q_n), 0 for ignored rows, into
// `dlogits`, which may be the logits themselves: each row reads x_v before
// it writes d_v and never reads x again after that (x_t included).
void cross_entropy_rows_backward_into(const Tensor& grad_rows, const CrossEntropyInputs& in, double label_smoothing,
                                      int64_t ignore_index, const Tensor& row_stats, Tensor& dlogits, const char* op) {
    const int64_t N = in.logits.count, V = in.logits.length;
    const Tensor g = expect(grad_rows, "grad_rows", Shape{N}, dlogits.dtype(), op);  // (N)
    const Tensor stats_t =
        row_stats.defined() ? expect(row_stats, "row_stats", Shape{N, 2}, DType::float64, op) : Tensor();
    const Acc* stats = stats_t.defined() ? stats_t.data<Acc>() : nullptr;  // (N, 2): m, Σ exp(x - m)
    const double eps = label_smoothing;
    visit_floating(dlogits.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* xp = in.logits.data.data<T>();
        const T* gp = g.data<T>();
        T* dp = dlogits.data<T>();
        for_each_row(N, V, [&](int64_t n) {
            T* d = dp + n * V;
            const int64_t t = in.target[n];
            if (t == ignore_index) {
                std::fill(d, d + V, T(0));
                return;
            }
            const T* x = xp + n * V;
            // d_v = g p_v - g q_v, with p_v = exp(x_v - m) / Σ and q = ε/V everywhere plus (1-ε) at the target
            const Acc gn = gp[n];
            const T smooth = static_cast<T>(gn * eps / static_cast<Acc>(V));
            if (stats) {  // m and Σ from the forward: one pass
                const T m = static_cast<T>(stats[2 * n]);
                const T scale = static_cast<T>(gn / stats[2 * n + 1]);
#pragma omp simd
                for (int64_t v = 0; v < V; ++v) d[v] = exp_of(x[v] - m) * scale - smooth;
            } else {  // d holds exp(x - m) until the sum is known: one exp per entry
                const T m = row_max(x, V);
                const T scale = static_cast<T>(gn / sum_exp_shifted<true>(x, V, m, d));
#pragma omp simd
                for (int64_t v = 0; v < V; ++v) d[v] = d[v] * scale - smooth;
            }
            if (eps < 1) d[t] -= static_cast<T>(gn * (1 - eps));
        });
    });
}
}  // namespace

Tensor cross_entropy_rows_backward(const Tensor& grad_rows, const Tensor& logits, const Tensor& targets,
                                   double label_smoothing, int64_t ignore_index, const Tensor& row_stats) {
    const char* op = "cross_entropy_backward";
    const CrossEntropyInputs in = cross_entropy_inputs(logits, targets, label_smoothing, ignore_index, op);
    Tensor dlogits = Tensor::empty(logits.shape(), logits.dtype());  // (N, V)
    cross_entropy_rows_backward_into(grad_rows, in, label_smoothing, ignore_index, row_stats, dlogits, op);
    return dlogits;
}

void cross_entropy_rows_backward_(const Tensor& grad_rows, Tensor& logits, const Tensor& targets,
                                  double label_smoothing, int64_t ignore_index, const Tensor& row_stats) {
    const char* op = "cross_entropy_backward_";
    if (!logits.defined() || !logits.is_contiguous())
        fail<ValueError>("{}: the logits must be a contiguous tensor to be overwritten", op);
    const CrossEntropyInputs in = cross_entropy_inputs(logits, targets, label_smoothing, ignore_index, op);
    cross_entropy_rows_backward_into(grad_rows, in, label_smoothing, ignore_index, row_stats, logits, op);
}
}  // namespace tformer::core
