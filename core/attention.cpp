// Fused multi-head attention (see attention.hpp): one task per (batch, head),
// the heads read in place from the (B, T, D) projections or the (B·H, S, d)
// cache of decoding.
#include "core/attention.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/fast_exp.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace tformer::core {

namespace {

// What a (batch, head) loop tells parallel_for its work costs: 16
// multiply-adds count as one element of a row kernel, so the loop is split
// across threads only above 2^20 multiply-adds (kParallelGrain x 16). A head's
// work is cheap per multiply-add, and its inputs are still in the cache of
// the core whose projection just wrote them: counted as elements, d2l's
// training step (heads of 10 x 10 scores over 8 numbers) would be 8-25%
// slower at 2 threads than at 1 on the 2-core machine of docs/bench.md, and
// the translation preset's step and small's decoding gain nothing from the
// splits this leaves out.
constexpr int64_t split_cost(int64_t multiply_adds) { return multiply_adds / 16; }

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

// The per-head loops below run with d, the head size, known at compile time
// for the usual sizes (with_head_size), so a row of one head (4 to 64
// numbers) is a few whole vector operations instead of a loop.
template <class F>
void with_head_size(int64_t d, F&& f) {
    switch (d) {
        case 4: return f(std::integral_constant<int64_t, 4>{});
        case 8: return f(std::integral_constant<int64_t, 8>{});
        case 16: return f(std::integral_constant<int64_t, 16>{});
        case 32: return f(std::integral_constant<int64_t, 32>{});
        case 64: return f(std::integral_constant<int64_t, 64>{});
        default: return f(std::integral_constant<int64_t, 0>{});  // 0: d only known at run time
    }
}

// Keys are handled kChunk at a time: one AVX-512 register of floats (two
// AVX2 ones); the d2l model's 10 keys fit in one chunk.
constexpr int64_t kChunk = kKeyChunk;

// Keys per head rounded up to whole chunks, so the loops over keys run
// without a remainder.
int64_t padded(int64_t S) { return (S + kChunk - 1) / kChunk * kChunk; }

// xt (d, Sp) = one head of X (S rows of d, `row` apart) transposed:
// xt[i, j] = x[j·row + i] for j < S. Columns S to Sp are left as they are:
// the callers' buffers are zeroed once when allocated, and S is the same for
// every head of a call, so they stay zero. Dot products of one query with
// every key then run along a row of xt, kChunk keys per vector operation.
// Row j of x is read once, in order; with d known at compile time (kD > 0)
// its d numbers are one load each and d stores.
template <int64_t kD, class T>
void transpose_head(const T* x, int64_t S, int64_t row, int64_t d, int64_t Sp, T* xt) {
    if constexpr (kD > 0) d = kD;
    for (int64_t j = 0; j < S; ++j) {
        const T* xj = x + j * row;
#pragma GCC unroll 16
        for (int64_t i = 0; i < d; ++i) xt[i * Sp + j] = xj[i];
    }
}

// Below this many queries per head, probs_kernel takes one dot product per
// key instead of transposing the keys first.
constexpr int64_t kTransposeRows = 4;

// probs_kernel puts the rows of several batch elements through one softmax
// pass when one element has fewer than this many (H·T): decoding steps.
constexpr int64_t kGroupRows = 16;

// A vector of N numbers of type T, as one value: GCC's and Clang's vector
// extension. Arithmetic on it is element by element (a scalar operand is
// broadcast) and it lives in a register. The kernels below keep their running
// sums in such values: written as plain arrays of sums, GCC stored them back
// to memory after every addition, or ran them one number at a time. N is at
// most one register's worth (kRegisterBytes): a wider vector is no machine
// type, and GCC moves it through memory in pieces (16 bytes at a time under
// the -mmove-max=128 of CMakeLists.txt).
#if defined(__AVX512F__)
constexpr int64_t kRegisterBytes = 64;
#elif defined(__AVX__)
constexpr int64_t kRegisterBytes = 32;
#else
constexpr int64_t kRegisterBytes = 16;
#endif
template <class T, int64_t N>
struct VecOf;
template <int64_t N>
struct VecOf<float, N> {
    typedef float type __attribute__((vector_size(N * sizeof(float))));
};
template <int64_t N>
struct VecOf<double, N> {
    typedef double type __attribute__((vector_size(N * sizeof(double))));
};
template <class T, int64_t N>
using Vec = typename VecOf<T, N>::type;

// How a run of n numbers (n a power of two, known at compile time) is cut
// into vectors: kCount vectors of kWidth numbers, each at most a register.
template <class T, int64_t n>
struct Lanes {
    static constexpr int64_t kWidth = std::min<int64_t>(n, kRegisterBytes / static_cast<int64_t>(sizeof(T)));
    static constexpr int64_t kCount = n / kWidth;
    using V = Vec<T, kWidth>;
};

template <class V, class T>
V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);  // an unaligned vector load
    return v;
}
template <class V, class T>
void store(T* p, const V& v) {
    std::memcpy(p, &v, sizeof v);
}

// out_r[j] = a_r · x_j for R = rows() rows a_r = a + r·a_row and the first Sp
// columns of xt (row i at xt + i·xt_row), out_r = out + r·out_row. Each sum runs over i in the order of a plain
// dot product, Σ_i a_r[i] xt[i, j] (the same bits as one row at a time); the
// R rows share every load of xt, and their R·kChunk sums are as many
// independent chains of additions the processor overlaps (one chain alone
// waits on each addition before the next).
template <class T, class Rows>
void dot_rows(Rows rows, const T* a, int64_t a_row, const T* xt, int64_t xt_row, int64_t d, int64_t Sp, T* out,
              int64_t out_row) {
    constexpr int64_t R = decltype(rows)::value;
    using L = Lanes<T, kChunk>;
    using V = typename L::V;
    for (int64_t j0 = 0; j0 < Sp; j0 += kChunk) {
        V acc[R][L::kCount] = {};
        for (int64_t i = 0; i < d; ++i) {
            V x[L::kCount];
#pragma GCC unroll 8
            for (int64_t c = 0; c < L::kCount; ++c) x[c] = load<V>(xt + i * xt_row + j0 + c * L::kWidth);
#pragma GCC unroll 8
            for (int64_t r = 0; r < R; ++r) {
                const T ar = a[r * a_row + i];
#pragma GCC unroll 8
                for (int64_t c = 0; c < L::kCount; ++c) acc[r][c] += ar * x[c];
            }
        }
#pragma GCC unroll 8
        for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int64_t c = 0; c < L::kCount; ++c) store(out + r * out_row + j0 + c * L::kWidth, acc[r][c]);
    }
}

// Calls f(rows, first) over [0, n) in blocks of kRows rows, then one block
// of the last n mod kRows; rows is the block's size as a compile-time
// constant (std::integral_constant).
constexpr int64_t kBlock = 4;
// Rows whose sums take a register each (a chunk of 16 keys, a head of 8 or
// 16 numbers) go 8 at a time where registers hold 16 floats: 8 chains of
// additions keep both adders busy where 4 leave them waiting. The sums are
// the same: each row's runs in its own order whatever the block.
constexpr int64_t kWideBlock = kRegisterBytes >= 64 ? 8 : kBlock;
// weighted_rows' blocks: a head of kD numbers per row takes kD / 16 registers
// there; 8 rows of up to 32 fit the 32 registers (a head size known only at
// run time goes through a scratch buffer of kBlock rows)
template <int64_t kD>
constexpr int64_t kHeadRows = kD > 0 && kD <= 32 ? kWideBlock : kBlock;
template <int64_t kRows, class F>
void row_block_tail(int64_t left, int64_t r, F& f) {
    if constexpr (kRows > 0) {
        if (left == kRows) return f(std::integral_constant<int64_t, kRows>{}, r);
        row_block_tail<kRows - 1>(left, r, f);
    }
}
template <int64_t kRows = kBlock, class F>
void for_row_blocks(int64_t n, F&& f) {
    int64_t r = 0;
    for (; r + kRows <= n; r += kRows) f(std::integral_constant<int64_t, kRows>{}, r);
    row_block_tail<kRows - 1>(n - r, r, f);
}

// out[r] = a · x_r for R = rows() rows x_r = x + r·x_row, each summed in order
// like a plain dot product; the R sums are independent chains of additions
// the processor overlaps.
template <class T, class Rows>
void dots(Rows rows, const T* a, const T* x, int64_t x_row, int64_t n, T* out) {
    constexpr int64_t R = decltype(rows)::value;
    T acc[R] = {};
    for (int64_t i = 0; i < n; ++i)
#pragma GCC unroll 8
        for (int64_t r = 0; r < R; ++r) acc[r] += a[i] * x[r * x_row + i];
    for (int64_t r = 0; r < R; ++r) out[r] = acc[r];
}

// The lane of __builtin_shufflevector(a, b, ...) that lane l of one half of
// a lane_maxima step takes, for vectors of W lanes holding W / B rows in
// blocks of B lanes each: output block 2k (B / 2 lanes) is row k of a, block
// 2k + 1 row k of b; `high` picks the upper half of each input block, the
// lower one otherwise. (Lanes W to 2W - 1 are b's.)
constexpr int half_lane(int64_t W, int64_t B, bool high, int64_t l) {
    const int64_t k = l / B, off = l % B, h = B / 2, upper = high ? h : 0;
    return static_cast<int>(off < h ? k * B + off + upper : W + k * B + (off - h) + upper);
}
template <int64_t W, int64_t B, bool kHigh, class V, size_t... kLane>
V half_blocks(const V& a, const V& b, std::index_sequence<kLane...>) {
    return __builtin_shufflevector(a, b, half_lane(W, B, kHigh, static_cast<int64_t>(kLane))...);
}

// Lane r of the result = the largest lane of v[r], for W vectors of W lanes
// (v is overwritten). Lane by lane maxima of shuffled pairs, W - 1 steps in
// all, instead of W - 1 scalar maxima per vector, one after the other:
// step B (B = W, W/2, ..., 2) pairs v[i] with v[i + B/2], whose rows sit in
// blocks of B lanes, into one vector holding both pairs' rows in blocks of
// B/2. Pairing i with i + B/2 leaves row r in lane r at the end. A max is
// exact, so the order of the comparisons changes no result (NaN aside,
// which the callers never pass: their lane maxima skip it).
template <int64_t W, class V>
V lane_maxima(V* v) {
    auto step = [&]<int64_t B>(auto& self, std::integral_constant<int64_t, B>) {
        if constexpr (B > 1) {
            for (int64_t i = 0; i < B / 2; ++i) {
                const V lo = half_blocks<W, B, false>(v[i], v[i + B / 2], std::make_index_sequence<W>{});
                const V hi = half_blocks<W, B, true>(v[i], v[i + B / 2], std::make_index_sequence<W>{});
                v[i] = lo < hi ? hi : lo;
            }
            self(self, std::integral_constant<int64_t, B / 2>{});
        }
    };
    step(step, std::integral_constant<int64_t, W>{});
    return v[0];
}

// Masked softmax of the rows of one head's scores, z (rows, Sp) scaled by
// `scale`: row t becomes softmax_{j < L_t}(scale · z_t) over its first
// L_t = row_len[t] entries and 0 from there on (all zeros when L_t = 0). z is
// left holding exp(scale · z - max), 0 past L_t; the row's factor 1 / Σ goes
// to inv[t], and the caller writes z_t · inv[t] where the weights belong (one
// pass over them instead of two). Each pass runs over every row before the
// next starts, so the rows' exps (a long chain of dependent operations each)
// overlap instead of waiting for one another; the loops run over whole
// vectors of keys, the masked entries being -inf, whose exp is 0, with one
// running max per lane.
// Masks and scales row t of z (rows, Sp) to scale · z_t over its first
// row_len[t] entries, -inf past them, and writes its max to row_max[t].
template <class T>
void mask_scale_max(T* z, int64_t rows, int64_t Sp, T scale, const int64_t* row_len, T* row_max) {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    using L = Lanes<T, kChunk>;
    using V = typename L::V;
    // the lane numbers 0, 1, ..., kWidth - 1 of a vector, as T (exact: kWidth ≤ 16)
    V lane{};
    for (int64_t l = 0; l < L::kWidth; ++l) lane[l] = static_cast<T>(l);
    // each row's max: kWidth rows at a time, whose per-lane
    // maxima lane_maxima turns into their kWidth row maxima at once
    for (int64_t t0 = 0; t0 < rows; t0 += L::kWidth) {
        const int64_t block = std::min<int64_t>(L::kWidth, rows - t0);
        V row_lanes[L::kWidth];  // of row t0 + r: the max of each lane over the row's chunks
        for (int64_t r = 0; r < L::kWidth; ++r) {
            V m = V{} + kNegInf;  // rows past the last: -inf, their result unused
            if (r < block) {
                const int64_t t = t0 + r;
                T* zt = z + t * Sp;
                const int64_t n = row_len[t];
                const T length = static_cast<T>(n);  // exact: a length is at most the keys of a model, far below 2^24
                for (int64_t j0 = 0; j0 < Sp; j0 += kChunk)
#pragma GCC unroll 8
                    for (int64_t c = 0; c < L::kCount; ++c) {
                        T* at = zt + j0 + c * L::kWidth;
                        const V key = lane + static_cast<T>(j0 + c * L::kWidth);  // each lane's key number
                        V v = load<V>(at);
                        v = key < length ? scale * v : V{} + kNegInf;
                        m = m < v ? v : m;  // std::max, lane by lane
                        store(at, v);
                    }
            }
            row_lanes[r] = m;
        }
        const V maxima = lane_maxima<L::kWidth>(row_lanes);
        for (int64_t r = 0; r < block; ++r) row_max[t0 + r] = maxima[r];
    }
}

// z = exp(z - max) row by row (the max of a row of only -inf taken as 0).
template <class T>
void exp_shifted(T* z, int64_t rows, int64_t Sp, const int64_t* row_len, T* row_max) {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    using L = Lanes<T, kChunk>;
    using V = typename L::V;
    // exp(z - max): exp(-inf - max) is 0; a row of only -inf shifts by 0
    for (int64_t t = 0; t < rows; ++t) row_max[t] = row_max[t] == kNegInf ? T(0) : row_max[t];
    if constexpr (std::is_same_v<T, float>) {
        // every chunk of every row, kUnroll vectors at a time: an exp is a long chain of
        // dependent operations, and these are independent chains the processor overlaps.
        // The chunks past a row's length hold only -inf, whose exps are the 0 they must
        // hold; exp_fast_lanes gives exp_of's bits (as core::masked_softmax)
        constexpr int64_t W = L::kWidth, kUnroll = 4;
        const int64_t total = rows * Sp;  // a multiple of W: Sp is of kChunk
        int64_t i = 0;
        for (; i + kUnroll * W <= total; i += kUnroll * W) {
            V x[kUnroll];
#pragma GCC unroll 8
            for (int64_t u = 0; u < kUnroll; ++u) x[u] = load<V>(z + i + u * W) - row_max[(i + u * W) / Sp];
#pragma GCC unroll 8
            for (int64_t u = 0; u < kUnroll; ++u) store(z + i + u * W, exp_fast_lanes(x[u]));
        }
        for (; i < total; i += W) store(z + i, exp_fast_lanes(load<V>(z + i) - row_max[i / Sp]));
    } else {
        for (int64_t t = 0; t < rows; ++t) {
            T* zt = z + t * Sp;
            const T m = row_max[t];
            // the chunks past the row's length hold only -inf: their exps are 0
            const int64_t used = padded(row_len[t]);
            for (int64_t j = 0; j < used; ++j) zt[j] = exp_of(zt[j] - m);  // as core::masked_softmax
            std::fill(zt + used, zt + Sp, T(0));
        }
    }
}

// inv[t] = 1 / Σ z_t over row t's first row_len[t] entries (0 for a sum of 0).
template <class T>
void inverse_row_sums(const T* z, int64_t rows, int64_t Sp, const int64_t* row_len, T* inv) {
    // each row's sum, in double and in key order, as core::masked_softmax.
    // (With float sums over lanes, the 2-rank translate run of tests/apps/test_mpi.cpp
    // drifted past 1e-4 from the 1-process one on 2 seeds of 12; with this, on none
    // of 5.) A row's sum is one chain of additions, each waiting on the one before:
    // kBlock rows are summed side by side, so their chains overlap. The sums
    // stop after the block's longest row: past a row's length its entries are
    // +0, which leave a sum as it is, so the padding to whole chunks (16 keys
    // for d2l's 10) need not be added.
    for_row_blocks(rows, [&](auto block, int64_t t0) {
        constexpr int64_t R = decltype(block)::value;
        const T* zt = z + t0 * Sp;
        double sum[R] = {};
        const int64_t n = *std::max_element(row_len + t0, row_len + t0 + R);
        for (int64_t j = 0; j < n; ++j)
#pragma GCC unroll 8
            for (int64_t r = 0; r < R; ++r) sum[r] += zt[r * Sp + j];
        // a sum of 0 (L = 0, or every kept score -inf): no mass to share, a row of zeros; NaN stays NaN
        for (int64_t r = 0; r < R; ++r) inv[t0 + r] = sum[r] == 0.0 ? T(0) : static_cast<T>(1.0 / sum[r]);
    });
}

template <class T>
void softmax_rows(T* z, int64_t rows, int64_t Sp, T scale, const int64_t* row_len, T* row_max,
                  T* inv) {  // row_len, row_max, inv: (rows)
    mask_scale_max(z, rows, Sp, scale, row_len, row_max);
    exp_shifted(z, rows, Sp, row_len, row_max);
    inverse_row_sums(z, rows, Sp, row_len, inv);
}

// out_r = Σ_{j < n} w[r, j] x_j for R = rows() rows r at once, where x_j, one
// row of a head (d numbers), is at x + j·x_row, the weight w[r, j] at
// w + r·w_r + j·w_j (times keep at the same place when keep is given: the
// dropout mask), and out_r at out + r·out_row. Every attention product with
// a head row as output is this: O_t = Σ_s (P ⊙ keep)[t, s] v_s,
// dV_s = Σ_t Pu[t, s] dO_t, dQ_t = Σ_s scale dS[t, s] k_s, dK_s = Σ_t scale dS[t, s] q_t.
// Each row is summed in j order, as a plain loop would; the R rows share each
// load of x_j and are R independent chains of additions the processor
// overlaps. With d known at compile time (kD > 0) a row's sum is one vector
// value (Vec) the compiler keeps in registers; otherwise `scratch`, R·d numbers.
template <class T, int64_t kD, class Rows>
void weighted_rows(Rows rows, int64_t d, int64_t n, const T* x, int64_t x_row, const T* w, const T* keep, int64_t w_r,
                   int64_t w_j, T* out, int64_t out_row, T* scratch) {
    constexpr int64_t R = decltype(rows)::value;
    const auto weight = [&](int64_t r, int64_t j) {
        const int64_t at = r * w_r + j * w_j;
        return keep ? w[at] * keep[at] : w[at];
    };
    if constexpr (kD > 0) {
        using L = Lanes<T, kD>;
        using V = typename L::V;
        V acc[R][L::kCount] = {};
        for (int64_t j = 0; j < n; ++j) {
            V xj[L::kCount];
#pragma GCC unroll 8
            for (int64_t c = 0; c < L::kCount; ++c) xj[c] = load<V>(x + j * x_row + c * L::kWidth);
#pragma GCC unroll 8
            for (int64_t r = 0; r < R; ++r) {
                const T wr = weight(r, j);
#pragma GCC unroll 8
                for (int64_t c = 0; c < L::kCount; ++c) acc[r][c] += wr * xj[c];
            }
        }
#pragma GCC unroll 8
        for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int64_t c = 0; c < L::kCount; ++c) store(out + r * out_row + c * L::kWidth, acc[r][c]);
    } else {
        std::fill(scratch, scratch + R * d, T(0));
        for (int64_t j = 0; j < n; ++j)
            for (int64_t r = 0; r < R; ++r) {
                const T a = weight(r, j);
                const T* xj = x + j * x_row;
                T* y = scratch + r * d;
#pragma omp simd
                for (int64_t i = 0; i < d; ++i) y[i] += a * xj[i];
            }
        for (int64_t r = 0; r < R; ++r) std::copy(scratch + r * d, scratch + (r + 1) * d, out + r * out_row);
    }
}

}  // namespace

// ---- forward ------------------------------------------------------------------------------

namespace {

// Where the rows of one head of keys or values live: row j of head h of
// batch element b starts at b·batch + h·head + j·row. The projections
// (B, S, D) hold the heads side by side in each row (transpose_qkv read in
// place): batch = S·D, head = d, row = D. nn::KVCache holds them one after
// the other, (B·H, S, d) with a row stride of d and a head stride of
// capacity·d (S ≤ capacity): batch = H·head.
// `rows`, when given, sends batch element b to the keys and values of batch
// element rows[b] (beam search: a sentence's hypotheses share its encoder's).
struct HeadLayout {
    int64_t batch, head, row;
    const int64_t* rows = nullptr;
    int64_t batch_of(int64_t b) const { return rows ? rows[b] : b; }
    int64_t at(int64_t b, int64_t h) const { return batch_of(b) * batch + h * head; }
};

HeadLayout projection_layout(const HeadDims& s) { return {.batch = s.S * s.D, .head = s.d, .row = s.D}; }

// Keys kept transposed, per head (d, ld) with ld ≥ padded(S), at head·d·ld for head b·H + h
// (nn::KVCache keeps them so for decoding: no transpose per step)
template <class T>
struct TransposedKeys {
    const T* data = nullptr;  // none: probs_kernel works from the keys' rows
    int64_t ld = 0;
};

// Rows of at most 16 keys (the d2l model's 10) in float, on AVX-512: a
// row's weights in one pass, in one register from its scores to its
// weights, instead of softmax_rows' passes over memory and the copy out. The
// same operations, so the same floats: the scaled scores masked to -inf past
// the row's length, their max over the lanes that are numbers (as
// softmax_rows), exp_fast_lanes of the shifted scores, their sum in double,
// 1 / sum in float. The sum adds the 16 lanes as a tree where softmax_rows
// adds them in key order; a float is exact in a double, so the two can
// differ only in the last bits of a double sum of 16 terms, and 1 / sum
// rounded to float only when that lands on a rounding tie.
template <class T>
constexpr bool weights_in_one_pass(int64_t Sp) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    return std::is_same_v<T, float> && Sp == 16;
#else
    (void)Sp;
    return false;
#endif
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// (GCC 12's AVX-512 headers make the reductions warn of an uninitialised
// value: their own placeholder for the lanes a mask leaves out.)
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC warning; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// z (rows, 16): raw scores, row t of length row_len[t] ≤ S ≤ 16 -> p (rows, S): the weights
inline void softmax_rows16(const float* z, int64_t rows, int64_t S, float scale, const int64_t* row_len, float* p) {
    using V = Vec<float, 16>;
    const __mmask16 in_row = static_cast<__mmask16>((1u << S) - 1);
    const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    // kRows rows side by side: a row is one long chain of dependent steps
    // (max, exp, sum, division), which the rows of a block overlap
    constexpr int64_t kRows = 8;
    const auto block = [&](int64_t t0, auto count) {
        constexpr int64_t R = decltype(count)::value;
        __m512 v[R], e[R];
        float m[R];
        double total[R];
#pragma GCC unroll 16
        for (int64_t r = 0; r < R; ++r) {
            const __mmask16 kept = static_cast<__mmask16>((1u << row_len[t0 + r]) - 1);
            // scale · z where kept, -inf elsewhere (as softmax_rows' select: scale times the score)
            v[r] = _mm512_mask_mul_ps(neg_inf, kept, _mm512_set1_ps(scale), _mm512_loadu_ps(z + (t0 + r) * 16));
            m[r] = _mm512_mask_reduce_max_ps(_mm512_cmp_ps_mask(v[r], v[r], _CMP_ORD_Q), v[r]);  // of the numbers
            if (m[r] == -std::numeric_limits<float>::infinity()) m[r] = 0;  // no number, or all -inf
        }
#pragma GCC unroll 16
        for (int64_t r = 0; r < R; ++r) {
            V shifted;
            const __m512 d = _mm512_sub_ps(v[r], _mm512_set1_ps(m[r]));
            std::memcpy(&shifted, &d, sizeof d);
            const V ev = exp_fast_lanes(shifted);
            std::memcpy(&e[r], &ev, sizeof ev);
        }
#pragma GCC unroll 16
        for (int64_t r = 0; r < R; ++r)
            total[r] = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(e[r])),
                                                          _mm512_cvtps_pd(_mm512_extractf32x8_ps(e[r], 1))));
#pragma GCC unroll 16
        for (int64_t r = 0; r < R; ++r) {
            // a sum of 0 (no key, or every kept score -inf): a row of zeros; NaN stays NaN
            const float inv = total[r] == 0.0 ? 0.0f : static_cast<float>(1.0 / total[r]);
            _mm512_mask_storeu_ps(p + (t0 + r) * S, in_row, _mm512_mul_ps(e[r], _mm512_set1_ps(inv)));
        }
    };
    int64_t t = 0;
    for (; t + kRows <= rows; t += kRows) block(t, std::integral_constant<int64_t, kRows>{});
    for (; t < rows; ++t) block(t, std::integral_constant<int64_t, 1>{});
}
#pragma GCC diagnostic pop
#else
inline void softmax_rows16(const float*, int64_t, int64_t, float, const int64_t*, float*) {}
#endif

// P_bh[t, s] = softmax_{s < L(b,t)}(scale · q_t · k_s), 0 for s ≥ L; Q (B, T, D), keys as `kl` says
// (or, when given, as `kt` holds them transposed)
template <class T>
void probs_kernel(const T* q, const T* k, HeadLayout kl, const HeadDims& s, const Lengths& lens, double scale, T* p,
                  TransposedKeys<T> kt_given = {}) {
    const int64_t Sp = padded(s.S);
    with_head_size(s.d, [&](auto head_size) {
        constexpr int64_t kD = decltype(head_size)::value;
        const int64_t d = kD > 0 ? kD : s.d;
        // per batch element the scores of all its heads, (H·T, Sp), then the
        // softmax over all those rows at once. A decoding step has one row per
        // head, too few to overlap on their own: then `group` batch elements
        // share one softmax pass, about kGroupRows rows (one block of lane_maxima)
        const int64_t rows = s.H * s.T;
        const int64_t group = std::max<int64_t>(1, kGroupRows / rows);
        parallel_for(0, s.B, split_cost(rows * s.S * d), [&](int64_t begin, int64_t end) {
            std::vector<T> kt(static_cast<size_t>(d * Sp));  // (d, Sp), zeros past S (transpose_head)
            const auto n = static_cast<size_t>(group * rows);
            std::vector<T> scores(n * static_cast<size_t>(Sp)), row_max(n), inv(n);  // (group·H·T, Sp), ...
            std::vector<int64_t> row_len(n);                                         // (group·H·T)
            for (int64_t b0 = begin; b0 < end; b0 += group) {
                const int64_t g = std::min(group, end - b0);  // batch elements b0 .. b0 + g - 1
                for (int64_t b = b0; b < b0 + g; ++b) {
                    T* b_scores = scores.data() + (b - b0) * rows * Sp;  // (H·T, Sp)
                    for (int64_t h = 0; h < s.H; ++h) {
                        const T* kh = k + kl.at(b, h);
                        T* head_scores = b_scores + h * s.T * Sp;  // (T, Sp)
                        if (kt_given.data) {                       // already transposed: a chunk of keys per vector op
                            const T* kth = kt_given.data + (kl.batch_of(b) * s.H + h) * d * kt_given.ld;
                            for_row_blocks<kWideBlock>(s.T, [&](auto block, int64_t t0) {
                                dot_rows(block, q + (b * s.T + t0) * s.D + h * d, s.D, kth, kt_given.ld, d, Sp,
                                         head_scores + t0 * Sp, Sp);
                            });
                        } else if (s.T >=
                                   kTransposeRows) {  // transpose the keys once, then a chunk of keys per vector op
                            transpose_head<kD>(kh, s.S, kl.row, d, Sp, kt.data());
                            for_row_blocks<kWideBlock>(s.T, [&](auto block, int64_t t0) {
                                dot_rows(block, q + (b * s.T + t0) * s.D + h * d, s.D, kt.data(), Sp, d, Sp,
                                         head_scores + t0 * Sp, Sp);
                            });
                        } else {  // a query or two (decoding): one dot product per key costs less than the transpose
                            for (int64_t t = 0; t < s.T; ++t) {
                                T* row = head_scores + t * Sp;
                                for_row_blocks(s.S, [&](auto keys, int64_t j0) {
                                    dots(keys, q + (b * s.T + t) * s.D + h * d, kh + j0 * kl.row, kl.row, d, row + j0);
                                });
                                std::fill(row + s.S, row + Sp, T(0));
                            }
                        }
                    }
                    // row h·T + t sees the keys of query t: the lengths of one head, repeated per head
                    int64_t* b_len = row_len.data() + (b - b0) * rows;
                    for (int64_t t = 0; t < s.T; ++t) b_len[t] = lens.at(b, t);
                    for (int64_t row = s.T; row < rows; ++row) b_len[row] = b_len[row - s.T];
                }
                // (H, T, S) of batch elements b0 .. b0 + g - 1: their rows in the same order
                T* pb = p + b0 * rows * s.S;
                if constexpr (std::is_same_v<T, float>) {
                    if (weights_in_one_pass<T>(Sp)) {
                        softmax_rows16(scores.data(), g * rows, s.S, static_cast<float>(scale), row_len.data(), pb);
                        continue;
                    }
                }
                softmax_rows(scores.data(), g * rows, Sp, static_cast<T>(scale), row_len.data(), row_max.data(),
                             inv.data());
                for (int64_t row = 0; row < g * rows; ++row) {
                    const T* zr = scores.data() + row * Sp;
                    T* pr = pb + row * s.S;
                    const T f = inv[static_cast<size_t>(row)];
                    for (int64_t j = 0; j < s.S; ++j) pr[j] = zr[j] * f;
                }
            }
        });
    });
}

// O[b, t, h·d:(h+1)·d] = Σ_s P_bh[t, s] keep_bh[t, s] v_s; values as `vl` says, O (B, T, D)
template <class T>
void values_kernel(const T* p, const T* kp, const T* v, HeadLayout vl, const HeadDims& s, T* o) {
    with_head_size(s.d, [&](auto head_size) {
        constexpr int64_t kD = decltype(head_size)::value;
        const int64_t d = kD > 0 ? kD : s.d;
        parallel_for(0, s.B * s.H, split_cost(s.T * s.S * d), [&](int64_t begin, int64_t end) {
            std::vector<T> scratch(kD > 0 ? 0 : static_cast<size_t>(kBlock * d));  // O_t of up to kBlock queries
            for (int64_t bh = begin; bh < end; ++bh) {
                const int64_t b = bh / s.H, h = bh % s.H;
                for_row_blocks<kHeadRows<kD>>(s.T, [&](auto rows, int64_t t0) {
                    // weights as mul(P, keep), then the product; zero weights (masked keys,
                    // dropped ones) are added too: a branch on them would be mispredicted
                    // more often than it saves work
                    const int64_t at = (bh * s.T + t0) * s.S;  // row t0 of the head's weights
                    weighted_rows<T, kD>(rows, d, s.S, v + vl.at(b, h), vl.row, p + at, kp ? kp + at : nullptr, s.S, 1,
                                         o + (b * s.T + t0) * s.D + h * d, s.D, scratch.data());
                });
            }
        });
    });
}

}  // namespace

// P_bh[t, s] = softmax_{s < L(b,t)}(scale · q_t · k_s), heads read from the (B, S, D) projections
Tensor attention_probs(const Tensor& Q_, const Tensor& K_, const Tensor& valid_lens, int64_t num_heads, double scale) {
    const char* op = "attention_probs";
    const HeadDims s = dims_of(Q_, K_, num_heads, op);
    const Lengths lens = lengths_of(valid_lens, s, op);
    const Tensor Q = Q_.contiguous(), K = K_.contiguous();
    Tensor P = Tensor::empty({s.B, s.H, s.T, s.S}, Q.dtype());  // (B, H, T, S)
    visit_floating(Q.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        probs_kernel(Q.data<T>(), K.data<T>(), projection_layout(s), s, lens, scale, P.data<T>());
    });
    return P;
}

// O[b, t, h·d:(h+1)·d] = Σ_s P_bh[t, s] keep_bh[t, s] v_s, v_s from the (B, S, D) projection
Tensor attention_values(const Tensor& P_, const Tensor& V_, const Tensor& keep_) {
    const char* op = "attention_values";
    if (!P_.defined() || P_.dim() != 4) fail<ShapeError>("{}: weights must be (batch, heads, T, S)", op);
    expect_3d(V_, "values", op);
    const int64_t B = P_.size(0), H = P_.size(1), T = P_.size(2), S = P_.size(3), D = V_.size(2);
    if (V_.size(0) != B || V_.size(1) != S || D % H != 0 || V_.dtype() != P_.dtype())
        fail<ShapeError>(
            "{}: weights {} and values {} do not fit (values must be (B, S, D) with D divisible by H, of "
            "the weights' dtype)",
            op, shape_str(P_.shape()), shape_str(V_.shape()));
    if (keep_.defined() && (!(keep_.shape() == P_.shape()) || keep_.dtype() != P_.dtype()))
        fail<ShapeError>("{}: dropout mask {} for weights {}", op, shape_str(keep_.shape()), shape_str(P_.shape()));
    const Tensor P = P_.contiguous(), V = V_.contiguous(), keep = keep_.defined() ? keep_.contiguous() : Tensor();
    const HeadDims s{.B = B, .T = T, .S = S, .D = D, .H = H, .d = D / H};
    Tensor O = Tensor::empty({B, T, D}, V.dtype());  // (B, T, D), every row of every head written once
    visit_floating(V.dtype(), op, [&](auto tag) {
        using Ty = typename decltype(tag)::type;
        values_kernel(P.data<Ty>(), keep.defined() ? keep.data<Ty>() : nullptr, V.data<Ty>(), projection_layout(s), s,
                      O.data<Ty>());
    });
    return O;
}

// both of the above, keys and values read from the (B·H, S, d) cache
CachedAttention cached_attention(const Tensor& Q_, const Tensor& K_, const Tensor& V_, const Tensor& valid_lens,
                                 int64_t num_heads, double scale, const Tensor& keys_t,
                                 std::span<const int64_t> kv_rows) {
    const char* op = "cached_attention";
    expect_3d(Q_, "queries", op);
    const int64_t B = Q_.size(0), T = Q_.size(1), D = Q_.size(2), H = num_heads;
    if (H < 1 || D % H != 0) fail<ValueError>("{}: num_hiddens {} is not divisible by num_heads {}", op, D, H);
    // the batch elements the cache holds: the queries' own, or as many as kv_rows points into
    const int64_t cached = kv_rows.empty() ? B : (K_.defined() && K_.dim() == 3 ? K_.size(0) / H : 0);
    if (!K_.defined() || K_.dim() != 3 || K_.size(0) != cached * H || K_.size(2) != D / H || !V_.defined() ||
        !(V_.shape() == K_.shape()) || K_.dtype() != Q_.dtype() || V_.dtype() != Q_.dtype() || !is_floating(Q_.dtype()))
        fail<ShapeError>("{}: cached keys {} and values {} must be (B·H = {}, S, d = {}), of the queries' float dtype",
                         op, K_.defined() ? shape_str(K_.shape()) : "undefined",
                         V_.defined() ? shape_str(V_.shape()) : "undefined", cached * H, D / H);
    if (!kv_rows.empty()) {
        if (static_cast<int64_t>(kv_rows.size()) != B)
            fail<ShapeError>("{}: {} kv_rows for a batch of {} queries", op, kv_rows.size(), B);
        for (int64_t r : kv_rows)
            if (r < 0 || r >= cached)
                fail<IndexError>("{}: kv_row {} out of range for a cache of {} batch elements", op, r, cached);
    }
    const HeadDims s{.B = B, .T = T, .S = K_.size(1), .D = D, .H = H, .d = D / H};
    const Lengths lens = lengths_of(valid_lens, s, op);
    const Tensor Q = Q_.contiguous();
    // nn::KVCache's keys and values are views of the first S steps of a longer
    // buffer (B·H, capacity, d): read in place when each row of d is contiguous
    const auto in_place = [&](const Tensor& t) { return t.strides()[2] == 1 || s.d == 1 ? t : t.contiguous(); };
    const Tensor K = in_place(K_), V = in_place(V_);
    const auto layout = [&](const Tensor& t) {
        return HeadLayout{.batch = s.H * t.strides()[0],
                          .head = t.strides()[0],
                          .row = t.strides()[1],
                          .rows = kv_rows.empty() ? nullptr : kv_rows.data()};
    };
    if (keys_t.defined() && (keys_t.dim() != 3 || keys_t.size(0) != cached * H || keys_t.size(1) != s.d ||
                             keys_t.size(2) < padded(s.S) || !keys_t.is_contiguous() || keys_t.dtype() != Q.dtype()))
        fail<ShapeError>(
            "{}: transposed keys {} must be contiguous (B·H = {}, d = {}, at least {}) of the queries' dtype", op,
            shape_str(keys_t.shape()), cached * H, s.d, padded(s.S));
    CachedAttention a{.out = Tensor::empty({B, T, D}, Q.dtype()), .weights = Tensor::empty({B, H, T, s.S}, Q.dtype())};
    visit_floating(Q.dtype(), op, [&](auto tag) {
        using Ty = typename decltype(tag)::type;
        const TransposedKeys<Ty> kt{.data = keys_t.defined() ? keys_t.data<Ty>() : nullptr,
                                    .ld = keys_t.defined() ? keys_t.size(2) : 0};
        probs_kernel(Q.data<Ty>(), K.data<Ty>(), layout(K), s, lens, scale, a.weights.data<Ty>(), kt);
        values_kernel(a.weights.data<Ty>(), static_cast<const Ty*>(nullptr), V.data<Ty>(), layout(V), s,
                      a.out.data<Ty>());
    });
    return a;
}

// ---- backward -----------------------------------------------------------------------------

namespace {

// The keys a row of weights P_t (S of them) attended to: up to the last weight
// above zero. Keys past it got no attention, and nothing flows back to them.
template <class T>
int64_t attended(const T* Pt, int64_t S) {
    int64_t L = S;
    while (L > 0 && Pt[L - 1] == T(0)) --L;
    return L;
}

// The softmax backward of one head, T rows of S weights. In: P (T, S), keep
// (T, S) or null, dP (T, Sp) = d(P ⊙ keep). Out, each (T, Sp) with zeros past
// a row's attended keys: dP ⊙ keep in dP, Pu = P ⊙ keep, and
// dS = scale · P ⊙ (dP - c) with c = Σ_s P dP, summed in double: the products
// of two floats are exact there, so the order of the sum changes nothing but
// the last bits of a double.
template <class T, bool kGeneric = false>
void softmax_backward_rows(const T* P, const T* keep, int64_t T_, int64_t S, int64_t Sp, T scale, T* dP, T* Pu, T* dS) {
    for (int64_t t = 0; t < T_; ++t) {
        const T* Pt = P + t * S;
        const T* kt = keep ? keep + t * S : nullptr;
        T *dPt = dP + t * Sp, *Put = Pu + t * Sp, *dSt = dS + t * Sp;
        const int64_t L = attended(Pt, S);
        if (kt)
            for (int64_t j = 0; j < L; ++j) dPt[j] *= kt[j];
        double c = 0;
        for (int64_t j = 0; j < L; ++j) c += static_cast<double>(Pt[j]) * static_cast<double>(dPt[j]);
        const T cr = static_cast<T>(c);
        for (int64_t j = 0; j < L; ++j) {
            dSt[j] = scale * (Pt[j] * (dPt[j] - cr));
            Put[j] = kt ? Pt[j] * kt[j] : Pt[j];
        }
        std::fill(dSt + L, dSt + Sp, T(0));
        std::fill(Put + L, Put + Sp, T(0));
    }
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// The same for float rows of at most 16 keys (the d2l model's 10), a row per
// register: masked loads stop at the row's end. Other rows take the loops
// above (kGeneric).
// (GCC 12's AVX-512 headers make the conversions and the reduction below warn
// of an uninitialised value: their own placeholder for the lanes a mask
// leaves, which these unmasked calls never use.)
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC warning; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <>
void softmax_backward_rows<float, false>(const float* P, const float* keep, int64_t T_, int64_t S, int64_t Sp,
                                         float scale, float* dP, float* Pu, float* dS) {
    if (Sp != 16) return softmax_backward_rows<float, true>(P, keep, T_, S, Sp, scale, dP, Pu, dS);
    const __mmask16 in_row = static_cast<__mmask16>((1u << S) - 1);
    const __m512 sc = _mm512_set1_ps(scale);
    for (int64_t t = 0; t < T_; ++t) {
        const __m512 p = _mm512_maskz_loadu_ps(in_row, P + t * S);
        // the attended keys: up to the highest lane above zero
        const unsigned nonzero = _mm512_cmp_ps_mask(p, _mm512_setzero_ps(), _CMP_NEQ_UQ);
        const int64_t L = nonzero ? 32 - __builtin_clz(nonzero) : 0;
        const __mmask16 used = static_cast<__mmask16>((1u << L) - 1);
        __m512 dp = _mm512_maskz_loadu_ps(used, dP + t * Sp);
        __m512 pu = _mm512_maskz_mov_ps(used, p);
        if (keep) {
            const __m512 k = _mm512_maskz_loadu_ps(used, keep + t * S);
            dp = _mm512_mul_ps(dp, k);
            pu = _mm512_mul_ps(pu, k);
        }
        // c = Σ P dP: exact products in double, the halves added, then the lanes as a tree
        const auto low = [](__m512 x) { return _mm512_cvtps_pd(_mm512_castps512_ps256(x)); };
        const auto high = [](__m512 x) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)); };
        const __m512d sum = _mm512_add_pd(_mm512_mul_pd(low(p), low(dp)), _mm512_mul_pd(high(p), high(dp)));
        const float cr = static_cast<float>(_mm512_reduce_add_pd(sum));
        const __m512 ds = _mm512_mul_ps(sc, _mm512_mul_ps(p, _mm512_sub_ps(dp, _mm512_set1_ps(cr))));
        _mm512_storeu_ps(dP + t * Sp, dp);
        _mm512_storeu_ps(Pu + t * Sp, pu);
        _mm512_storeu_ps(dS + t * Sp, _mm512_maskz_mov_ps(used, ds));
    }
}
#pragma GCC diagnostic pop
#endif

}  // namespace

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
    // every head row of dQ, dK and dV is summed in registers and written once
    AttentionGrads g{.dQ = Tensor::empty(Q.shape(), Q.dtype()),
                     .dK = Tensor::empty(K.shape(), K.dtype()),
                     .dV = Tensor::empty(V.shape(), V.dtype())};
    const int64_t Sp = padded(s.S);
    visit_floating(Q.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *q = Q.data<T>(), *k = K.data<T>(), *v = V.data<T>(), *p = P.data<T>(), *dout = dO.data<T>();
        const T* kp = keep.defined() ? keep.data<T>() : nullptr;
        T *dq = g.dQ.data<T>(), *dk = g.dK.data<T>(), *dv = g.dV.data<T>();
        const T sc = static_cast<T>(scale);
        with_head_size(s.d, [&](auto head_size) {
            constexpr int64_t kD = decltype(head_size)::value;
            const int64_t d = kD > 0 ? kD : s.d;
            parallel_for(0, s.B * s.H, split_cost(3 * s.T * s.S * d), [&](int64_t begin, int64_t end) {
                std::vector<T> vt(static_cast<size_t>(d * Sp));    // (d, Sp): V_bh transposed, zeros past S
                std::vector<T> dP(static_cast<size_t>(s.T * Sp));  // (T, Sp)
                std::vector<T> dS(static_cast<size_t>(s.T * Sp));  // (T, Sp), times scale
                std::vector<T> Pu(static_cast<size_t>(s.T * Sp));  // (T, Sp): P ⊙ keep, the weights the forward used
                std::vector<T> scratch(kD > 0 ? 0 : static_cast<size_t>(kBlock * d));
                for (int64_t bh = begin; bh < end; ++bh) {
                    const int64_t b = bh / s.H, h = bh % s.H;
                    const T* Pbh = p + bh * s.T * s.S;                                             // (T, S)
                    const T* keep_bh = kp ? kp + bh * s.T * s.S : nullptr;                         // (T, S)
                    const int64_t q_head = b * s.T * s.D + h * d, k_head = b * s.S * s.D + h * d;  // row 0 of the head
                    // d(Pu)[t, s] = dO_t · v_s, every s at once
                    transpose_head<kD>(v + k_head, s.S, s.D, d, Sp, vt.data());
                    for_row_blocks<kWideBlock>(s.T, [&](auto block, int64_t t0) {
                        dot_rows(block, dout + q_head + t0 * s.D, s.D, vt.data(), Sp, d, Sp, dP.data() + t0 * Sp, Sp);
                    });
                    // dP = d(Pu) ⊙ keep, then the softmax backward dS = scale · P ⊙ (dP - Σ_s P dP);
                    // Pu = P ⊙ keep. All three (T, Sp), zeros past each row's keys
                    softmax_backward_rows(Pbh, keep_bh, s.T, s.S, Sp, sc, dP.data(), Pu.data(), dS.data());
                    // dV_s = Σ_t Pu[t, s] dO_t,  dK_s = Σ_t scale dS[t, s] q_t   (rows s of the head)
                    for_row_blocks<kHeadRows<kD>>(s.S, [&](auto rows, int64_t j0) {
                        // weights Pu[t, j0 + r] and dS[t, j0 + r]: column r of the block, row t
                        weighted_rows<T, kD>(rows, d, s.T, dout + q_head, s.D, Pu.data() + j0, nullptr, 1, Sp,
                                             dv + k_head + j0 * s.D, s.D, scratch.data());
                        weighted_rows<T, kD>(rows, d, s.T, q + q_head, s.D, dS.data() + j0, nullptr, 1, Sp,
                                             dk + k_head + j0 * s.D, s.D, scratch.data());
                    });
                    // dQ_t = Σ_s scale dS[t, s] k_s   (rows t of the head)
                    for_row_blocks<kHeadRows<kD>>(s.T, [&](auto rows, int64_t t0) {
                        weighted_rows<T, kD>(rows, d, s.S, k + k_head, s.D, dS.data() + t0 * Sp, nullptr, Sp, 1,
                                             dq + q_head + t0 * s.D, s.D, scratch.data());
                    });
                }
            });
        });
    });
    return g;
}

}  // namespace tformer::core
