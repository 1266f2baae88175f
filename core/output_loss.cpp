// Fused output layer + cross-entropy (see output_loss.hpp).
//
// The steps: the rows that count (counted_rows), how many threads share them
// (count_parts), each thread's buffers (make_parts), each part a chunk of
// rows at a time (Pass::run_part: gather, logits, per-row loss and gradient
// in place, then dx, dW, db), and the parts' dW and db added up
// (add_part_gradients).
#include "core/output_loss.hpp"

#include "core/blas.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/fast_exp.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tformer::core {

namespace {
constexpr const char* kOp = "linear_cross_entropy";
constexpr int64_t kChunk = 256;  // rows per chunk: C·V logits stay in the cache hierarchy
// rows a thread's part must have at least (below, fewer threads): a part's
// own dW costs V·D numbers to add up at the end
constexpr int64_t kMinRowsPerPart = 64;
// and multiply-adds (rows · V · D, per product): below 2^21 (about 30 µs of
// the three products) starting a parallel region and waking a thread costs
// more than the part saves; the copy task's output layer (300 rows of 11
// logits) runs 2-3% slower at 2 threads than at 1 when it splits
constexpr int64_t kMinWorkPerPart = int64_t{1} << 21;

void check_inputs(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& targets, const Tensor& weights) {
    if (!x.defined() || !W.defined() || x.dim() != 2 || W.dim() != 2 || x.size(1) != W.size(1))
        fail<ShapeError>("{}: x {} and W {} must be (N, D) and (V, D)", kOp,
                         x.defined() ? shape_str(x.shape()) : "undefined",
                         W.defined() ? shape_str(W.shape()) : "undefined");
    const int64_t N = x.size(0), V = W.size(0);
    if (b.defined() && !(b.shape() == Shape{V}))
        fail<ShapeError>("{}: bias {} must be (V) = ({})", kOp, shape_str(b.shape()), V);
    if (!targets.defined() || targets.dtype() != DType::int64 || !(targets.shape() == Shape{N}))
        fail<ShapeError>("{}: targets must be int64 of shape ({}), got {}", kOp, N,
                         targets.defined() ? shape_str(targets.shape()) : "undefined");
    if (!weights.defined() || !(weights.shape() == Shape{N}))
        fail<ShapeError>("{}: weights must have shape ({}), got {}", kOp, N,
                         weights.defined() ? shape_str(weights.shape()) : "undefined");
    if (!is_floating(x.dtype()) || W.dtype() != x.dtype() || (b.defined() && b.dtype() != x.dtype()) ||
        weights.dtype() != x.dtype())
        fail<ValueError>("{}: x, W, b and weights must share one floating dtype", kOp);
    if (V == 0) fail<ShapeError>("{}: the vocabulary is empty", kOp);
}

// The rows that count: padding (weight 0) costs nothing. w (N), t (N).
std::vector<int64_t> counted_rows(const Tensor& w, const int64_t* t, int64_t V) {
    std::vector<int64_t> rows;
    visit_floating(w.dtype(), kOp, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* wp = w.data<T>();
        for (int64_t n = 0; n < w.size(0); ++n) {
            if (wp[n] == T(0)) continue;
            if (t[n] < 0 || t[n] >= V) fail<IndexError>("{}: target {} of row {} outside [0, {})", kOp, t[n], n, V);
            rows.push_back(n);
        }
    });
    return rows;
}

// The gradients the call returns, before any part writes into them: dx
// zero (padding rows keep 0); dW and db are overwritten by the first chunk
// (beta = 0), so they start empty, or zero when no row counts.
void make_gradients(LinearCrossEntropy& out, int64_t N, int64_t D, int64_t V, bool bias, bool any_rows, DType dt) {
    out.dx = zeros({N, D}, dt);
    out.dW = any_rows ? Tensor::empty({V, D}, dt) : zeros({V, D}, dt);
    if (bias) out.db = any_rows ? Tensor::empty({V}, dt) : zeros({V}, dt);
}

// The rows are cut into one contiguous part per thread (at most one per
// kMinRowsPerPart rows); each thread runs its part a chunk at a time on
// single-threaded BLAS, into its own dW and db, added up in part order at
// the end. One parallel region per call: no barrier per chunk, no serial
// gather or scatter between the products. The same parts for the same
// thread count, so the same bits run to run.
int64_t count_parts(int64_t R, int64_t V, int64_t D) {
    const bool can_split = get_num_threads() > 1 && !omp_in_parallel() && blas::is_openmp_build();
    if (!can_split) return 1;
    return std::clamp<int64_t>(std::min(R / kMinRowsPerPart, R * V * D / kMinWorkPerPart), 1, get_num_threads());
}

// A thread's part of the rows and its buffers. Every buffer is made before
// the threads start: nothing in the region allocates. Tensors, not vectors:
// the region's recycled pages, neither zeroed nor faulted in again per call.
struct Part {
    Tensor xc, z, dxc;             // (C, D) rows of x, (C, V) logits then their gradient, (C, D)
    Tensor dW, db;                 // (V, D), (V): the part's own sums; part 0 writes into the result's
    std::vector<double> row_loss;  // (C)
    double loss = 0;               // Σ w_n ℓ_n over the part's rows
};

std::vector<Part> make_parts(int64_t parts, int64_t C, int64_t D, int64_t V, bool own_grads, bool bias, DType dt) {
    std::vector<Part> part(static_cast<size_t>(parts));
    for (int64_t j = 0; j < parts; ++j) {
        Part& pj = part[static_cast<size_t>(j)];
        pj.xc = Tensor::empty({C, D}, dt);
        pj.z = Tensor::empty({C, V}, dt);
        pj.dxc = Tensor::empty({C, D}, dt);
        pj.row_loss.resize(static_cast<size_t>(C));
        if (own_grads && j > 0) {  // part 0 writes into out.dW and out.db
            pj.dW = Tensor::empty({V, D}, dt);
            if (bias) pj.db = Tensor::empty({V}, dt);
        }
    }
    return part;
}

template <class T>
T* data_or_null(const Tensor& t) {
    return t.defined() ? t.template data<T>() : nullptr;
}

// One call's inputs as pointers of their dtype, and the steps every part runs.
template <class T>
struct Pass {
    const T *x, *W, *b, *w;            // x (N, D), W (V, D), b (V) or nullptr, weights (N)
    const int64_t* t;                  // targets (N)
    const std::vector<int64_t>& rows;  // the rows that count
    T* dx;                             // (N, D), or nullptr without grads
    int64_t D, V, C;                   // C rows per chunk
    double eps;                        // label smoothing
    bool grads;

    // Row n's logits zi (V) in, its loss ℓ out; with grads, zi becomes its
    // gradient w_n (softmax(z) - q) in place.
    double row_loss(T* zi, int64_t n) const {
        if (b)
#pragma omp simd
            for (int64_t v = 0; v < V; ++v) zi[v] += b[v];
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t v = 0; v < V; ++v) m = std::max(m, zi[v]);
        const double zt = static_cast<double>(zi[t[n]]) - m;
        // Σ e^(z - m) and Σ (z - m), in float lanes over blocks; z becomes e^(z - m)
        double sum = 0, shifted = 0;
        for (int64_t v0 = 0; v0 < V; v0 += 256) {
            const int64_t v1 = std::min(V, v0 + 256);
            T block = 0, block_shifted = 0;
#pragma omp simd reduction(+ : block, block_shifted)
            for (int64_t v = v0; v < v1; ++v) {
                const T s = zi[v] - m;
                block_shifted += s;
                zi[v] = exp_of(s);
                block += zi[v];
            }
            sum += block;
            shifted += block_shifted;
        }
        // ℓ = log Σ e^(z - m) - (1 - ε)(z_t - m) - ε/V Σ (z - m)
        const double loss = std::log(sum) - (1 - eps) * zt - eps * shifted / static_cast<double>(V);
        if (!grads) return loss;
        // dℓ/dz = softmax(z) - q, times the row's weight
        const T scale = static_cast<T>(static_cast<double>(w[n]) / sum);
        const T smooth = static_cast<T>(static_cast<double>(w[n]) * eps / static_cast<double>(V));
#pragma omp simd
        for (int64_t v = 0; v < V; ++v) zi[v] = zi[v] * scale - smooth;
        zi[t[n]] -= static_cast<T>(static_cast<double>(w[n]) * (1 - eps));
        return loss;
    }

    // The c rows from `begin` on: their loss into pj.loss, and with grads,
    // z (c, V) left holding their logits' gradient G.
    void chunk_forward(Part& pj, int64_t begin, int64_t c) const {
        T *xc = pj.xc.template data<T>(), *z = pj.z.template data<T>();
        for (int64_t i = 0; i < c; ++i) std::copy_n(x + rows[begin + i] * D, D, xc + i * D);
        // z = x_c Wᵀ (+ b): (c, V)
        blas::gemm(false, true, c, V, D, T(1), xc, D, W, D, T(0), z, V);
        // per row: the loss, then, in place, its gradient
        // (split over the threads when there is one part, serial inside a part)
        parallel_for(0, c, V, [&](int64_t r0, int64_t r1) {
            for (int64_t i = r0; i < r1; ++i) pj.row_loss[i] = row_loss(z + i * V, rows[begin + i]);
        });
        for (int64_t i = 0; i < c; ++i) pj.loss += static_cast<double>(w[rows[begin + i]]) * pj.row_loss[i];
    }

    // dx_c = G W (c, D); dW (+)= Gᵀ x_c (V, D); db (+)= Gᵀ 1 (V): the part's
    // first chunk writes dW and db, the others add.
    void chunk_backward(Part& pj, int64_t begin, int64_t c, bool first, T* dW, T* db) const {
        const T *xc = pj.xc.template data<T>(), *z = pj.z.template data<T>();
        T* dxc = pj.dxc.template data<T>();
        blas::gemm(false, false, c, D, V, T(1), z, V, W, D, T(0), dxc, D);
        for (int64_t i = 0; i < c; ++i) std::copy_n(dxc + i * D, D, dx + rows[begin + i] * D);
        blas::gemm(true, false, V, D, c, T(1), z, V, xc, D, first ? T(0) : T(1), dW, D);
        if (!b) return;
        if (first) std::fill_n(db, V, T(0));
        for (int64_t i = 0; i < c; ++i) {  // row by row
            const T* gi = z + i * V;
#pragma omp simd
            for (int64_t v = 0; v < V; ++v) db[v] += gi[v];
        }
    }

    // Rows [first, last) of `rows`, a chunk at a time, into dW and db.
    void run_part(Part& pj, int64_t first, int64_t last, T* dW, T* db) const {
        for (int64_t begin = first; begin < last; begin += C) {
            const int64_t c = std::min<int64_t>(C, last - begin);
            chunk_forward(pj, begin, c);
            if (grads) chunk_backward(pj, begin, c, begin == first, dW, db);
        }
    }
};

// Every part, on a thread of its own when there are several.
template <class T>
void run_parts(const Pass<T>& pass, std::vector<Part>& part, const LinearCrossEntropy& out) {
    const int64_t parts = static_cast<int64_t>(part.size()), R = static_cast<int64_t>(pass.rows.size());
    const auto run = [&](int64_t j) {
        Part& pj = part[static_cast<size_t>(j)];
        // part 0 writes into out's gradients, the others into their own
        T* dW = data_or_null<T>(j == 0 ? out.dW : pj.dW);
        T* db = data_or_null<T>(j == 0 ? out.db : pj.db);
        pass.run_part(pj, R * j / parts, R * (j + 1) / parts, dW, db);
    };
    if (parts == 1) {
        run(0);
    } else {
#pragma omp parallel for num_threads(static_cast <int>(parts)) schedule(static, 1)
        for (int64_t j = 0; j < parts; ++j) run(j);
    }
}

// dW (and db) = part 0's + part 1's + ..., in that order for every element.
template <class T>
void add_part_gradients(const std::vector<Part>& part, LinearCrossEntropy& out, int64_t V, int64_t D) {
    const int64_t parts = static_cast<int64_t>(part.size());
    T* dW = out.dW.template data<T>();
    parallel_for(0, V, D * parts, [&](int64_t v0, int64_t v1) {
        for (int64_t j = 1; j < parts; ++j) {
            const T* src = part[static_cast<size_t>(j)].dW.template data<T>();
#pragma omp simd
            for (int64_t e = v0 * D; e < v1 * D; ++e) dW[e] += src[e];
        }
    });
    if (!out.db.defined()) return;
    T* db = out.db.template data<T>();
    for (int64_t j = 1; j < parts; ++j) {
        const T* src = part[static_cast<size_t>(j)].db.template data<T>();
        for (int64_t v = 0; v < V; ++v) db[v] += src[v];
    }
}

}  // namespace

LinearCrossEntropy linear_cross_entropy(const Tensor& x_, const Tensor& W_, const Tensor& b_, const Tensor& targets_,
                                        const Tensor& weights_, double eps, bool grads) {
    check_inputs(x_, W_, b_, targets_, weights_);
    if (!(eps >= 0 && eps <= 1)) fail<ValueError>("{}: label smoothing {} not in [0, 1]", kOp, eps);
    const Tensor x = x_.contiguous(), W = W_.contiguous(), targets = targets_.contiguous(), w = weights_.contiguous();
    const Tensor b = b_.defined() ? b_.contiguous() : Tensor();
    const int64_t N = x.size(0), D = x.size(1), V = W.size(0);
    const int64_t* t = targets.data<int64_t>();
    const std::vector<int64_t> rows = counted_rows(w, t, V);
    const int64_t R = static_cast<int64_t>(rows.size());

    LinearCrossEntropy out;
    if (grads) make_gradients(out, N, D, V, b.defined(), R > 0, x.dtype());
    const int64_t parts = count_parts(R, V, D);
    visit_floating(x.dtype(), kOp, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const int64_t C = std::min<int64_t>(kChunk, std::max<int64_t>(1, (R + parts - 1) / parts));
        const Pass<T> pass{.x = x.data<T>(),
                           .W = W.data<T>(),
                           .b = data_or_null<T>(b),
                           .w = w.data<T>(),
                           .t = t,
                           .rows = rows,
                           .dx = data_or_null<T>(out.dx),
                           .D = D,
                           .V = V,
                           .C = C,
                           .eps = eps,
                           .grads = grads};
        std::vector<Part> part = make_parts(parts, C, D, V, grads && R > 0, b.defined(), x.dtype());
        run_parts(pass, part, out);
        for (const Part& pj : part) out.loss += pj.loss;
        if (grads && parts > 1 && R > 0) add_part_gradients<T>(part, out, V, D);
    });
    return out;
}

}  // namespace tformer::core
