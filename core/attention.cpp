// Fused multi-head attention (see attention.hpp): one task per (batch, head),
// the heads read in place from the (B, T, D) projections.
#include "core/attention.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tformer::core {

namespace {

// The shapes every kernel here shares, checked once.
struct HeadDims {
    int64_t B, T, S, D, H, d;
};

void expect_3d(const Tensor& x, const char* what, const char* op) {
    if (!x.defined() || x.dim() != 3)
        fail<ShapeError>("{}: {} must be (batch, steps, num_hiddens), got {}", op, what,
                         x.defined() ? shape_str(x.shape()) : "undefined");
}

HeadDims dims_of(const Tensor& Q, const Tensor& K, int64_t H, const char* op) {
    expect_3d(Q, "queries", op);
    expect_3d(K, "keys", op);
    const int64_t B = Q.size(0), T = Q.size(1), D = Q.size(2), S = K.size(1);
    if (K.size(0) != B || K.size(2) != D)
        fail<ShapeError>("{}: queries {} and keys {} must share batch and num_hiddens", op, shape_str(Q.shape()),
                         shape_str(K.shape()));
    if (H < 1 || D % H != 0) fail<ValueError>("{}: num_hiddens {} is not divisible by num_heads {}", op, D, H);
    if (K.dtype() != Q.dtype() || !is_floating(Q.dtype()))
        fail<ValueError>("{}: queries and keys must be float32 or float64 of one dtype, got {} and {}", op,
                         dtype_name(Q.dtype()), dtype_name(K.dtype()));
    return {B, T, S, D, H, D / H};
}

// Valid lengths as a function (b, t) -> number of keys seen, checked once.
struct Lengths {
    Tensor lens;  // contiguous int64, (B) or (B, T), or undefined
    int64_t T = 0, S = 0;
    int64_t at(int64_t b, int64_t t) const {
        if (!lens.defined()) return S;
        const int64_t* p = lens.data<int64_t>();
        return lens.dim() == 1 ? p[b] : p[b * T + t];
    }
};

Lengths lengths_of(const Tensor& valid_lens, const HeadDims& s, const char* op) {
    Lengths l{.lens = {}, .T = s.T, .S = s.S};
    if (!valid_lens.defined()) return l;
    if (valid_lens.dtype() != DType::int64)
        fail<ValueError>("{}: valid lengths must be int64, got {}", op, dtype_name(valid_lens.dtype()));
    const bool per_batch = valid_lens.dim() == 1 && valid_lens.size(0) == s.B;
    const bool per_row = valid_lens.dim() == 2 && valid_lens.size(0) == s.B && valid_lens.size(1) == s.T;
    if (!per_batch && !per_row)
        fail<ShapeError>("{}: valid lengths of shape {} must be (batch={}) or (batch={}, query steps={})", op,
                         shape_str(valid_lens.shape()), s.B, s.B, s.T);
    l.lens = valid_lens.contiguous();
    const int64_t* p = l.lens.data<int64_t>();
    for (int64_t i = 0; i < l.lens.numel(); ++i)
        if (p[i] < 0 || p[i] > s.S) fail<ValueError>("{}: valid length {} outside [0, {}]", op, p[i], s.S);
    return l;
}

template <class T>
T dot(const T* a, const T* b, int64_t n) {
    T acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
    return acc;
}

// y += a · x
template <class T>
void axpy(T a, const T* x, T* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

// ---- forward ------------------------------------------------------------------------------

// P_bh[t, s] = softmax_{s < L(b,t)}(scale · q_t · k_s), 0 for s ≥ L
Tensor attention_probs(const Tensor& Q_, const Tensor& K_, const Tensor& valid_lens, int64_t num_heads, double scale) {
    const char* op = "attention_probs";
    const HeadDims s = dims_of(Q_, K_, num_heads, op);
    const Lengths lens = lengths_of(valid_lens, s, op);
    const Tensor Q = Q_.contiguous(), K = K_.contiguous();
    Tensor P = Tensor::empty({s.B, s.H, s.T, s.S}, Q.dtype());  // (B, H, T, S)
    visit_floating(Q.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* q = Q.data<T>();
        const T* k = K.data<T>();
        T* p = P.data<T>();
        parallel_for(0, s.B * s.H, s.T * s.S * s.d, [&](int64_t begin, int64_t end) {
            for (int64_t bh = begin; bh < end; ++bh) {
                const int64_t b = bh / s.H, h = bh % s.H;
                for (int64_t t = 0; t < s.T; ++t) {
                    T* row = p + (bh * s.T + t) * s.S;
                    const int64_t L = lens.at(b, t);
                    const T* qt = q + (b * s.T + t) * s.D + h * s.d;
                    T m = -std::numeric_limits<T>::infinity();
                    for (int64_t j = 0; j < L; ++j) {
                        row[j] = static_cast<T>(scale) * dot(qt, k + (b * s.S + j) * s.D + h * s.d, s.d);
                        m = std::max(m, row[j]);
                    }
                    double sum = 0;
                    for (int64_t j = 0; j < L; ++j) {
                        row[j] = std::exp(row[j] - m);
                        sum += row[j];
                    }
                    const T inv = static_cast<T>(1.0 / sum);
                    for (int64_t j = 0; j < L; ++j) row[j] *= inv;
                    std::fill(row + L, row + s.S, T(0));
                }
            }
        });
    });
    return P;
}

// O[b, t, h·d:(h+1)·d] = Σ_s P_bh[t, s] v_s
Tensor attention_values(const Tensor& P_, const Tensor& V_) {
    const char* op = "attention_values";
    if (!P_.defined() || P_.dim() != 4) fail<ShapeError>("{}: weights must be (batch, heads, T, S)", op);
    expect_3d(V_, "values", op);
    const int64_t B = P_.size(0), H = P_.size(1), T = P_.size(2), S = P_.size(3), D = V_.size(2);
    if (V_.size(0) != B || V_.size(1) != S || D % H != 0 || V_.dtype() != P_.dtype())
        fail<ShapeError>(
            "{}: weights {} and values {} do not fit (values must be (B, S, D) with D divisible by H, of "
            "the weights' dtype)",
            op, shape_str(P_.shape()), shape_str(V_.shape()));
    const int64_t d = D / H;
    const Tensor P = P_.contiguous(), V = V_.contiguous();
    Tensor O = zeros({B, T, D}, V.dtype());  // (B, T, D)
    visit_floating(V.dtype(), op, [&](auto tag) {
        using Ty = typename decltype(tag)::type;
        const Ty* p = P.data<Ty>();
        const Ty* v = V.data<Ty>();
        Ty* o = O.data<Ty>();
        parallel_for(0, B * H, T * S * d, [&](int64_t begin, int64_t end) {
            for (int64_t bh = begin; bh < end; ++bh) {
                const int64_t b = bh / H, h = bh % H;
                for (int64_t t = 0; t < T; ++t) {
                    Ty* ot = o + (b * T + t) * D + h * d;
                    const Ty* row = p + (bh * T + t) * S;
                    for (int64_t j = 0; j < S; ++j)
                        if (row[j] != Ty(0)) axpy(row[j], v + (b * S + j) * D + h * d, ot, d);
                }
            }
        });
    });
    return O;
}

// ---- backward -----------------------------------------------------------------------------

AttentionGrads attention_backward(const Tensor& dO_, const Tensor& Q_, const Tensor& K_, const Tensor& V_,
                                  const Tensor& P_, const Tensor& keep_, double scale) {
    const char* op = "attention_backward";
    if (!P_.defined() || P_.dim() != 4) fail<ShapeError>("{}: weights must be (batch, heads, T, S)", op);
    const HeadDims s = dims_of(Q_, K_, P_.size(1), op);
    const Shape p_shape{s.B, s.H, s.T, s.S};
    if (!(P_.shape() == p_shape) || !(V_.shape() == K_.shape()) || !(dO_.shape() == Q_.shape()) ||
        (keep_.defined() && !(keep_.shape() == p_shape)))
        fail<ShapeError>("{}: dO {}, Q {}, K {}, V {}, P {} and keep {} do not fit one attention", op,
                         shape_str(dO_.shape()), shape_str(Q_.shape()), shape_str(K_.shape()), shape_str(V_.shape()),
                         shape_str(P_.shape()), keep_.defined() ? shape_str(keep_.shape()) : "none");
    const Tensor dO = dO_.contiguous(), Q = Q_.contiguous(), K = K_.contiguous(), V = V_.contiguous();
    const Tensor P = P_.contiguous(), keep = keep_.defined() ? keep_.contiguous() : Tensor();
    AttentionGrads g{
        .dQ = zeros(Q.shape(), Q.dtype()), .dK = zeros(K.shape(), K.dtype()), .dV = zeros(V.shape(), V.dtype())};
    visit_floating(Q.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *q = Q.data<T>(), *k = K.data<T>(), *v = V.data<T>(), *p = P.data<T>(), *dout = dO.data<T>();
        const T* kp = keep.defined() ? keep.data<T>() : nullptr;
        T *dq = g.dQ.data<T>(), *dk = g.dK.data<T>(), *dv = g.dV.data<T>();
        const T sc = static_cast<T>(scale);
        parallel_for(0, s.B * s.H, 3 * s.T * s.S * s.d, [&](int64_t begin, int64_t end) {
            std::vector<T> dP(static_cast<size_t>(s.S));
            for (int64_t bh = begin; bh < end; ++bh) {
                const int64_t b = bh / s.H, h = bh % s.H;
                for (int64_t t = 0; t < s.T; ++t) {
                    const T* Pt = p + (bh * s.T + t) * s.S;
                    const T* keep_t = kp ? kp + (bh * s.T + t) * s.S : nullptr;
                    const T* dOt = dout + (b * s.T + t) * s.D + h * s.d;
                    const T* qt = q + (b * s.T + t) * s.D + h * s.d;
                    // keys past the last weight above zero got no attention: nothing flows back to them
                    int64_t L = s.S;
                    while (L > 0 && Pt[L - 1] == T(0)) --L;
                    double c = 0;  // Σ_s P dP
                    for (int64_t j = 0; j < L; ++j) {
                        const int64_t row = (b * s.S + j) * s.D + h * s.d;
                        const T used = keep_t ? Pt[j] * keep_t[j] : Pt[j];  // the weight the sum used
                        axpy(used, dOt, dv + row, s.d);                     // dV_s += Pu[t, s] dO_t
                        const T dPu = dot(dOt, v + row, s.d);               // d(Pu)[t, s] = dO_t · v_s
                        dP[j] = keep_t ? dPu * keep_t[j] : dPu;
                        c += static_cast<double>(Pt[j]) * static_cast<double>(dP[j]);
                    }
                    T* dqt = dq + (b * s.T + t) * s.D + h * s.d;
                    for (int64_t j = 0; j < L; ++j) {
                        const T dS = Pt[j] * (dP[j] - static_cast<T>(c));  // softmax backward
                        if (dS == T(0)) continue;
                        const int64_t row = (b * s.S + j) * s.D + h * s.d;
                        axpy(sc * dS, k + row, dqt, s.d);  // dQ_t += scale dS k_s
                        axpy(sc * dS, qt, dk + row, s.d);  // dK_s += scale dS q_t
                    }
                }
            }
        });
    });
    return g;
}

}  // namespace tformer::core
