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
    visit_floating(x.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *xp = x.data<T>(), *Wp = W.data<T>(), *bp = b.defined() ? b.data<T>() : nullptr, *wp = w.data<T>();
        const int64_t C = std::min<int64_t>(kChunk, std::max<int64_t>(1, static_cast<int64_t>(rows.size())));
        std::vector<T> xc(static_cast<size_t>(C * D)), z(static_cast<size_t>(C * V)), dxc(static_cast<size_t>(C * D));
        std::vector<double> row_loss(static_cast<size_t>(C));
        const std::vector<T> ones(static_cast<size_t>(C), T(1));
        for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(C)) {
            const int64_t c = std::min<int64_t>(C, static_cast<int64_t>(rows.size() - begin));
            for (int64_t i = 0; i < c; ++i) std::copy_n(xp + rows[begin + i] * D, D, xc.data() + i * D);
            // z = x_c Wᵀ (+ b): (c, V)
            blas::gemm(false, true, c, V, D, T(1), xc.data(), D, Wp, D, T(0), z.data(), V);
            // per row: the loss, then, in place, its gradient w_n (softmax(z) - q)
            parallel_for(0, c, V, [&](int64_t r0, int64_t r1) {
                for (int64_t i = r0; i < r1; ++i) {
                    T* zi = z.data() + i * V;
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
                    row_loss[i] = std::log(sum) - (1 - eps) * zt - eps * shifted / static_cast<double>(V);
                    if (!grads) continue;
                    // dℓ/dz = softmax(z) - q, times the row's weight
                    const T scale = static_cast<T>(static_cast<double>(wp[n]) / sum);
                    const T smooth = static_cast<T>(static_cast<double>(wp[n]) * eps / static_cast<double>(V));
#pragma omp simd
                    for (int64_t v = 0; v < V; ++v) zi[v] = zi[v] * scale - smooth;
                    zi[t[n]] -= static_cast<T>(static_cast<double>(wp[n]) * (1 - eps));
                }
            });
            for (int64_t i = 0; i < c; ++i) out.loss += static_cast<double>(wp[rows[begin + i]]) * row_loss[i];
            if (!grads) continue;
            // dx_c = G W (c, D); dW += Gᵀ x_c (V, D); db += Gᵀ 1 (V)
            blas::gemm(false, false, c, D, V, T(1), z.data(), V, Wp, D, T(0), dxc.data(), D);
            for (int64_t i = 0; i < c; ++i)
                std::copy_n(dxc.data() + i * D, D, out.dx.template data<T>() + rows[begin + i] * D);
            const T beta = begin == 0 ? T(0) : T(1);  // the first chunk writes, the others add
            blas::gemm(true, false, V, D, c, T(1), z.data(), V, xc.data(), D, beta, out.dW.template data<T>(), D);
            if (bp)
                blas::gemm(true, false, V, 1, c, T(1), z.data(), V, ones.data(), 1, beta, out.db.template data<T>(), 1);
        }
    });
    return out;
}

}  // namespace tformer::core
