// Fused output layer + cross-entropy (see output_loss.hpp).
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
    const char* op = "linear_cross_entropy";
    if (!x.defined() || !W.defined() || x.dim() != 2 || W.dim() != 2 || x.size(1) != W.size(1))
        fail<ShapeError>("{}: x {} and W {} must be (N, D) and (V, D)", op,
                         x.defined() ? shape_str(x.shape()) : "undefined",
                         W.defined() ? shape_str(W.shape()) : "undefined");
    const int64_t N = x.size(0), V = W.size(0);
    if (b.defined() && !(b.shape() == Shape{V}))
        fail<ShapeError>("{}: bias {} must be (V) = ({})", op, shape_str(b.shape()), V);
    if (!targets.defined() || targets.dtype() != DType::int64 || !(targets.shape() == Shape{N}))
        fail<ShapeError>("{}: targets must be int64 of shape ({}), got {}", op, N,
                         targets.defined() ? shape_str(targets.shape()) : "undefined");
    if (!weights.defined() || !(weights.shape() == Shape{N}))
        fail<ShapeError>("{}: weights must have shape ({}), got {}", op, N,
                         weights.defined() ? shape_str(weights.shape()) : "undefined");
    if (!is_floating(x.dtype()) || W.dtype() != x.dtype() || (b.defined() && b.dtype() != x.dtype()) ||
        weights.dtype() != x.dtype())
        fail<ValueError>("{}: x, W, b and weights must share one floating dtype", op);
    if (V == 0) fail<ShapeError>("{}: the vocabulary is empty", op);
}
}  // namespace

LinearCrossEntropy linear_cross_entropy(const Tensor& x_, const Tensor& W_, const Tensor& b_, const Tensor& targets_,
                                        const Tensor& weights_, double eps, bool grads) {
    const char* op = "linear_cross_entropy";
    check_inputs(x_, W_, b_, targets_, weights_);
    if (!(eps >= 0 && eps <= 1)) fail<ValueError>("{}: label smoothing {} not in [0, 1]", op, eps);
    const Tensor x = x_.contiguous(), W = W_.contiguous(), targets = targets_.contiguous(), w = weights_.contiguous();
    const Tensor b = b_.defined() ? b_.contiguous() : Tensor();
    const int64_t N = x.size(0), D = x.size(1), V = W.size(0);
    const int64_t* t = targets.data<int64_t>();

    // the rows that count: padding (weight 0) costs nothing
    std::vector<int64_t> rows;
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* wp = w.data<T>();
        for (int64_t n = 0; n < N; ++n) {
            if (wp[n] == T(0)) continue;
            if (t[n] < 0 || t[n] >= V) fail<IndexError>("{}: target {} of row {} outside [0, {})", op, t[n], n, V);
            rows.push_back(n);
        }
    });

    LinearCrossEntropy out;
    if (grads) {
        out.dx = zeros({N, D}, x.dtype());  // padding rows keep 0
        // dW and db are overwritten by the first chunk (beta = 0), so they start empty,
        // or zero when no row counts
        out.dW = rows.empty() ? zeros({V, D}, x.dtype()) : Tensor::empty({V, D}, x.dtype());
        if (b.defined()) out.db = rows.empty() ? zeros({V}, x.dtype()) : Tensor::empty({V}, x.dtype());
    }
    // The rows are cut into one contiguous part per thread (at most one per
    // kMinRowsPerPart rows); each thread runs its part a chunk at a time on
    // single-threaded BLAS, into its own dW and db, added up in part order at
    // the end. One parallel region per call: no barrier per chunk, no serial
    // gather or scatter between the products. The same parts for the same
    // thread count, so the same bits run to run.
    const int64_t R = static_cast<int64_t>(rows.size());
    const bool can_split = get_num_threads() > 1 && !omp_in_parallel() && blas::is_openmp_build();
    const int64_t parts = can_split ? std::clamp<int64_t>(std::min(R / kMinRowsPerPart, R * V * D / kMinWorkPerPart), 1,
                                                          get_num_threads())
                                    : 1;
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *xp = x.data<T>(), *Wp = W.data<T>(), *bp = b.defined() ? b.data<T>() : nullptr, *wp = w.data<T>();
        const int64_t C = std::min<int64_t>(kChunk, std::max<int64_t>(1, (R + parts - 1) / parts));
        // every buffer is made here, before the threads start: nothing in the region allocates
        // Tensors, not vectors: the region's recycled pages, neither zeroed nor faulted in again per call
        struct Part {
            Tensor xc, z, dxc, dW, db;
            std::vector<double> row_loss;
            double loss = 0;
        };
        std::vector<Part> part(static_cast<size_t>(parts));
        const DType dt = x.dtype();
        for (int64_t j = 0; j < parts; ++j) {
            Part& pj = part[static_cast<size_t>(j)];
            pj.xc = Tensor::empty({C, D}, dt);
            pj.z = Tensor::empty({C, V}, dt);
            pj.dxc = Tensor::empty({C, D}, dt);
            pj.row_loss.resize(static_cast<size_t>(C));
            if (grads && j > 0 && R > 0) {  // part 0 writes into out.dW and out.db
                pj.dW = Tensor::empty({V, D}, dt);
                if (bp) pj.db = Tensor::empty({V}, dt);
            }
        }
        const auto run_part = [&](int64_t j) {
            Part& pj = part[static_cast<size_t>(j)];
            // part 0 writes into out's gradients, the others into their own
            const Tensor& dW_t = j == 0 ? out.dW : pj.dW;
            const Tensor& db_t = j == 0 ? out.db : pj.db;
            T* dW = dW_t.defined() ? dW_t.template data<T>() : nullptr;
            T* db = db_t.defined() ? db_t.template data<T>() : nullptr;
            T *xc = pj.xc.template data<T>(), *z = pj.z.template data<T>(), *dxc = pj.dxc.template data<T>();
            const int64_t first = R * j / parts, last = R * (j + 1) / parts;
            for (int64_t begin = first; begin < last; begin += C) {
                const int64_t c = std::min<int64_t>(C, last - begin);
                for (int64_t i = 0; i < c; ++i) std::copy_n(xp + rows[begin + i] * D, D, xc + i * D);
                // z = x_c Wᵀ (+ b): (c, V)
                blas::gemm(false, true, c, V, D, T(1), xc, D, Wp, D, T(0), z, V);
                // per row: the loss, then, in place, its gradient w_n (softmax(z) - q)
                // (split over the threads when there is one part, serial inside a part)
                parallel_for(0, c, V, [&](int64_t r0, int64_t r1) {
                    for (int64_t i = r0; i < r1; ++i) {
                        T* zi = z + i * V;
                        const int64_t n = rows[begin + i];
                        if (bp)
#pragma omp simd
                            for (int64_t v = 0; v < V; ++v) zi[v] += bp[v];
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
                        pj.row_loss[i] = std::log(sum) - (1 - eps) * zt - eps * shifted / static_cast<double>(V);
                        if (!grads) continue;
                        // dℓ/dz = softmax(z) - q, times the row's weight
                        const T scale = static_cast<T>(static_cast<double>(wp[n]) / sum);
                        const T smooth = static_cast<T>(static_cast<double>(wp[n]) * eps / static_cast<double>(V));
#pragma omp simd
                        for (int64_t v = 0; v < V; ++v) zi[v] = zi[v] * scale - smooth;
                        zi[t[n]] -= static_cast<T>(static_cast<double>(wp[n]) * (1 - eps));
                    }
                });
                for (int64_t i = 0; i < c; ++i) pj.loss += static_cast<double>(wp[rows[begin + i]]) * pj.row_loss[i];
                if (!grads) continue;
                // dx_c = G W (c, D); dW += Gᵀ x_c (V, D); db += Gᵀ 1 (V)
                blas::gemm(false, false, c, D, V, T(1), z, V, Wp, D, T(0), dxc, D);
                for (int64_t i = 0; i < c; ++i)
                    std::copy_n(dxc + i * D, D, out.dx.template data<T>() + rows[begin + i] * D);
                const T beta = begin == first ? T(0) : T(1);  // the part's first chunk writes, the others add
                blas::gemm(true, false, V, D, c, T(1), z, V, xc, D, beta, dW, D);
                if (bp) {  // db (+)= Σ_i G_i, row by row
                    if (begin == first) std::fill_n(db, V, T(0));
                    for (int64_t i = 0; i < c; ++i) {
                        const T* gi = z + i * V;
#pragma omp simd
                        for (int64_t v = 0; v < V; ++v) db[v] += gi[v];
                    }
                }
            }
        };
        if (parts == 1) {
            run_part(0);
        } else {
#pragma omp parallel for num_threads(static_cast <int>(parts)) schedule(static, 1)
            for (int64_t j = 0; j < parts; ++j) run_part(j);
        }
        for (const Part& pj : part) out.loss += pj.loss;
        if (!grads || parts == 1 || R == 0) return;
        // dW (and db) = part 0's + part 1's + ..., in that order for every element
        T* dW = out.dW.template data<T>();
        parallel_for(0, V, D * static_cast<int64_t>(parts), [&](int64_t v0, int64_t v1) {
            for (int64_t j = 1; j < parts; ++j) {
                const T* src = part[static_cast<size_t>(j)].dW.template data<T>();
#pragma omp simd
                for (int64_t e = v0 * D; e < v1 * D; ++e) dW[e] += src[e];
            }
        });
        if (bp) {
            T* db = out.db.template data<T>();
            for (int64_t j = 1; j < parts; ++j) {
                const T* src = part[static_cast<size_t>(j)].db.template data<T>();
                for (int64_t v = 0; v < V; ++v) db[v] += src[v];
            }
        }
    });
    return out;
}

}  // namespace tformer::core
