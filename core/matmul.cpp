// Matrix products: matmul (2-D, 1-D and batched with broadcasting) and the
// affine map of nn::Linear. Both end in GEMM calls (core/blas.cpp); this file
// decides how each operand is handed over, without copying when it can:
//   - a row-major view, strides (ld, 1), goes as it is with leading dimension ld;
//   - a transposed view, strides (1, ld), goes with the transpose flag set;
//   - anything else, e.g. every second column with strides (ld, 2), is copied
//     contiguous first, because BLAS needs one of the two strides to be 1.
// Batch dimensions are never materialised: each batch's operand offsets come
// from the batch strides, which are 0 along broadcast dimensions.
#include "core/matmul.hpp"

#include "core/blas.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>

namespace tformer::core {

namespace {

// ---- operands as BLAS reads them ------------------------------------------------------

// How BLAS reads a matrix (rows, cols) from a pointer p: element (i, j) is
// p[i * ld + j] (row-major) or, with trans set, p[j * ld + i].
struct BlasLayout {
    bool trans = false;
    int64_t ld = 1;
};

// The layout that reads a matrix with these strides, if one exists. A
// dimension of size 1 is never stepped along, so its stride does not matter.
// BLAS also wants ld at least the stored row length (and at least 1), which
// rules out overlapping rows such as an expanded (stride 0) dimension.
std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
    // row-major: unit steps along a row, rows at least a row length apart
    if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<int64_t>(1, cols)))
        return BlasLayout{.trans = false, .ld = rows == 1 ? std::max<int64_t>(1, cols) : row_stride};
    // column-major: the transpose of a row-major (cols, rows) matrix
    if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<int64_t>(1, rows)))
        return BlasLayout{.trans = true, .ld = cols == 1 ? std::max<int64_t>(1, rows) : col_stride};
    return std::nullopt;
}

// A tensor whose last two dimensions BLAS can read, and how.
struct Operand {
    Tensor tensor;
    BlasLayout layout;
};

// `t` as it is when its last two strides suit BLAS, else a contiguous copy.
// Only the operand as given is ever copied, before any batch broadcasting,
// so an expanded batch is never materialised.
Operand blas_operand(const Tensor& t) {
    const auto layout_of = [](const Tensor& u) {
        const int d = u.dim();
        return blas_layout(u.shape()[d - 2], u.shape()[d - 1], u.strides()[d - 2], u.strides()[d - 1]);
    };
    if (auto layout = layout_of(t)) return {t, *layout};
    Tensor copy = t.contiguous();
    return {copy, layout_of(copy).value()};  // row-major, so a layout always fits
}

// ---- argument checks ------------------------------------------------------------------------

void check_defined(const Tensor& t, const char* op, const char* name) {
    if (!t.defined()) fail<ValueError>("{}: {} is undefined", op, name);
}

// Both tensors share one floating dtype; BLAS has no mixed-precision GEMM and
// a silent conversion would hide a float64 gradient check running in float32.
void check_same_floating(const Tensor& a, const char* name_a, const Tensor& b, const char* name_b, const char* op) {
    if (a.dtype() != b.dtype())
        fail<ValueError>("{}: dtype mismatch, {} is {} and {} is {}", op, name_a, dtype_name(a.dtype()), name_b,
                         dtype_name(b.dtype()));
    if (!is_floating(a.dtype()))
        fail<ValueError>("{}: expected a floating dtype (float32 or float64), got {}", op, dtype_name(a.dtype()));
}

// ---- batched products -----------------------------------------------------------------------------

// Shape made of the first `count` dimensions of `s`.
Dims leading(const Dims& s, int count) {
    Dims out;
    for (int d = 0; d < count; ++d) out.push_back(s[d]);
    return out;
}

// Offset of batch number `index` (row-major over `batch`) in an operand
// whose batch dimensions have `strides` (0 along broadcast dimensions).
int64_t batch_offset(int64_t index, const Shape& batch, const Strides& strides) {
    int64_t offset = 0;
    for (int d = batch.size() - 1; d >= 0; --d) {
        offset += (index % batch[d]) * strides[d];
        index /= batch[d];
    }
    return offset;
}

// The batch strides of t (..., rows, cols) over the broadcast batch shape:
// its own stride where it has the dimension at full size, 0 where the
// dimension is missing or of size 1 and so broadcast (as expand() would set).
Strides batch_strides(const Tensor& t, const Shape& batch) {
    const int nb = batch.size(), own = t.dim() - 2;
    Strides strides = Dims::filled(nb, 0);
    for (int d = 0; d < own; ++d)
        if (t.shape()[d] == batch[nb - own + d]) strides[nb - own + d] = t.strides()[d];
    return strides;
}

// When a's batches are blocks of rows at one common stride, e.g. a
// contiguous (B, n, k), they stack into a single (B*n, k) matrix: returns
// that stride, the leading dimension of the stacked matrix.
std::optional<int64_t> stacked_rows_ld(const Operand& a, const Shape& batch, const Strides& sa, int64_t n, int64_t k) {
    if (a.layout.trans) return std::nullopt;
    // from the rows outwards, each dimension of size > 1 must step exactly
    // over the rows that the dimensions inside it cover
    int64_t ld = n > 1 ? a.layout.ld : -1;
    int64_t span = n > 1 ? a.layout.ld * n : 0;
    for (int d = batch.size() - 1; d >= 0; --d) {
        if (batch[d] == 1) continue;
        if (ld < 0) {
            ld = sa[d];
        } else if (sa[d] != span) {
            return std::nullopt;
        }
        span = sa[d] * batch[d];
    }
    if (ld < 0) ld = a.layout.ld;  // a single row
    if (ld < std::max<int64_t>(1, k)) return std::nullopt;
    return ld;
}

// OpenBLAS runs a product of at most 64³ multiply-adds on one thread
// whatever the thread setting (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD
// in its interface/gemm.c): only running several such products at once can
// use more cores.
constexpr int64_t kBlasSingleThreadWork = 64 * 64 * 64;

// Below this many multiply-adds per product the batch stays on one thread:
// every OpenBLAS call takes its work buffers from a shared pool
// (blas_memory_alloc), and for products this small two threads mostly wait
// on each other there. Measured with 2 threads: 256 x (10x8)@(8x10) took
// 31 µs spread over the threads against 23 µs in one; from about 32³ on,
// spreading wins (24 x (50x64)@(64x50): 45 µs against 79 µs).
constexpr int64_t kMinBatchParallelWork = 32 * 32 * 32;

// Whether to spread the batch over our threads, each thread calling BLAS on
// whole products (the OpenMP build of OpenBLAS then runs single-threaded
// inside), instead of calling BLAS once per batch and letting it split each
// product. Mid-sized products (attention over tens of steps) gain most:
// BLAS does not split them at all, or splits them poorly. Large products
// BLAS splits well by itself; spreading them over threads only pays when
// the batches divide evenly or are many, else one thread ends up computing
// the last product alone. `work` is multiply-adds per product.
bool parallel_over_batches(int64_t batches, int64_t work) {
    const int threads = get_num_threads();
    if (threads <= 1 || batches < 2 || omp_in_parallel() || !blas::is_openmp_build()) return false;
    if (work < kMinBatchParallelWork) return false;
    return work <= kBlasSingleThreadWork || batches % threads == 0 || batches >= 4 * threads;
}

// out (batch..., n, m) = a (..., n, k) @ b (..., k, m) with the batch
// dimensions of a and b broadcast to `batch`; out is contiguous.
template <class T>
void batched_gemm(const Operand& a, const Operand& b, const Shape& batch, int64_t n, int64_t k, int64_t m, T* out) {
    const int nb = batch.size();
    const int64_t batches = shape_numel(batch);
    const T* pa = a.tensor.data<T>();
    const T* pb = b.tensor.data<T>();
    const Strides sa = batch_strides(a.tensor, batch), sb = batch_strides(b.tensor, batch);

    // b shared by every batch and a's batches stacked rows: one GEMM
    // (B*n, k) @ (k, m), as in x @ W for a (B, T, D) activation.
    bool b_shared = true;
    for (int d = 0; d < nb; ++d)
        if (batch[d] != 1 && sb[d] != 0) b_shared = false;
    if (b_shared) {
        if (const auto ld = stacked_rows_ld(a, batch, sa, n, k)) {
            blas::gemm(false, b.layout.trans, batches * n, m, k, T(1), pa, *ld, pb, b.layout.ld, T(0), out, m);
            return;
        }
    }

    // one GEMM per batch, reading the operands in place
    const auto run = [&](int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i)
            blas::gemm(a.layout.trans, b.layout.trans, n, m, k, T(1), pa + batch_offset(i, batch, sa), a.layout.ld,
                       pb + batch_offset(i, batch, sb), b.layout.ld, T(0), out + i * n * m, m);
    };
    if (!parallel_over_batches(batches, n * m * k)) {
        run(0, batches);
        return;
    }
    // An exception cannot leave an OpenMP region, so a failure in a worker
    // is kept and rethrown here.
    std::exception_ptr error;
    parallel_for(0, batches, n * m * k, [&](int64_t first, int64_t last) {
        try {
            run(first, last);
        } catch (...) {
#pragma omp critical(tformer_matmul_error)
            if (!error) error = std::current_exception();
        }
    });
    if (error) std::rethrow_exception(error);
}

}  // namespace

// ---- matmul ---------------------------------------------------------------------------------------

// out[..., i, j] = Σ_p a[..., i, p] · b[..., p, j]
Tensor matmul(const Tensor& a, const Tensor& b) {
    check_defined(a, "matmul", "a");
    check_defined(b, "matmul", "b");
    check_same_floating(a, "a", b, "b", "matmul");
    if (a.dim() == 0 || b.dim() == 0)
        fail<ShapeError>("matmul: shapes {} and {} cannot be multiplied: a 0-d operand has no matrix dimension",
                         shape_str(a.shape()), shape_str(b.shape()));

    // a vector is a row on the left and a column on the right
    const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;  // (..., n, k)
    const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;  // (..., k, m)
    const int64_t n = a2.size(-2), k = a2.size(-1), m = b2.size(-1);
    if (b2.size(-2) != k)
        fail<ShapeError>("matmul: shapes {} and {} cannot be multiplied", shape_str(a.shape()), shape_str(b.shape()));

    // leading dimensions broadcast as in NumPy: (B, 1) with (H) gives (B, H)
    const Shape batch_a = leading(a2.shape(), a2.dim() - 2), batch_b = leading(b2.shape(), b2.dim() - 2);
    Shape batch;
    try {
        batch = broadcast_shapes(batch_a, batch_b, "matmul");
    } catch (const ShapeError&) {
        fail<ShapeError>("matmul: shapes {} and {} cannot be multiplied: batch dimensions {} and {} do not broadcast",
                         shape_str(a.shape()), shape_str(b.shape()), shape_str(batch_a), shape_str(batch_b));
    }

    // the dimension a vector operand contributed is dropped from the result
    Shape out_shape = batch;
    if (a.dim() > 1) out_shape.push_back(n);
    if (b.dim() > 1) out_shape.push_back(m);
    Tensor out = Tensor::empty(out_shape, a.dtype());  // (batch..., n, m) in memory
    if (out.numel() == 0) return out;
    if (k == 0) {  // every entry is an empty sum
        fill_(out, 0.0);
        return out;
    }

    const Operand pa = blas_operand(a2), pb = blas_operand(b2);
    visit_floating(a.dtype(), "matmul", [&](auto tag) {
        using T = typename decltype(tag)::type;
        batched_gemm<T>(pa, pb, batch, n, k, m, out.data<T>());
    });
    return out;
}

// ---- linear ---------------------------------------------------------------------------------------

namespace {
// dst (rows, kVecs · 64 bytes) = src broadcast: the row is held in kVecs
// vector values (GCC's vector extension) and stored whole into every row.
// For short rows std::copy is a memmove call per row (a d2l layer's 32
// features are 128 bytes), 2% of its eval forward.
template <class T, int64_t kVecs>
void fill_short_rows(const T* src, T* dst, int64_t rows) {
    constexpr int64_t W = 64 / static_cast<int64_t>(sizeof(T));
    typedef T V __attribute__((vector_size(64)));
    V v[kVecs];
    std::memcpy(v, src, sizeof v);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < kVecs; ++k)  // one vector at a time: a whole-register store each
            std::memcpy(dst + (r * kVecs + k) * W, &v[k], sizeof(V));
}

// out (rows, n), contiguous, gets the row b (n) in each of its rows: the
// broadcast copy_(out, b) with one plain copy per row (whole vectors for
// rows of 1 to 4 of them), since a linear layer of a small model (rows of 32
// numbers) would otherwise pay copy_'s general strided loop per row on
// every call.
void fill_rows(const Tensor& out, const Tensor& b_, int64_t rows) {
    const Tensor b = b_.contiguous();
    const int64_t n = b.numel();
    visit_floating(out.dtype(), "linear", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* src = b.data<T>();
        T* dst = out.data<T>();
        constexpr int64_t W = 64 / static_cast<int64_t>(sizeof(T));
        // rows split over the threads as an elementwise op's elements are (the
        // base preset's FFN output is 32 MB: one thread's pass over it would be
        // a serial stretch of every forward linear)
        parallel_for(0, rows, n, [&](int64_t r0, int64_t r1) {
            T* d = dst + r0 * n;
            switch (n % W == 0 ? n / W : 0) {
                case 1: return fill_short_rows<T, 1>(src, d, r1 - r0);
                case 2: return fill_short_rows<T, 2>(src, d, r1 - r0);
                case 3: return fill_short_rows<T, 3>(src, d, r1 - r0);
                case 4: return fill_short_rows<T, 4>(src, d, r1 - r0);
                default:
                    for (int64_t r = 0; r < r1 - r0; ++r) std::copy(src, src + n, d + r * n);
            }
        });
    });
}
}  // namespace

// y = x @ Wᵀ + b
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    check_defined(x, "linear", "input");
    check_defined(weight, "linear", "weight");
    check_same_floating(x, "input", weight, "weight", "linear");
    if (bias.defined()) check_same_floating(bias, "bias", weight, "weight", "linear");
    if (weight.dim() != 2)
        fail<ShapeError>("linear: weight must be 2-D (out_features x in_features), got shape {}",
                         shape_str(weight.shape()));
    const int64_t out_features = weight.size(0), in_features = weight.size(1);
    if (x.dim() == 0 || x.size(-1) != in_features)
        fail<ShapeError>("linear: input of shape {} does not fit weight of shape {}: expected last dimension {}",
                         shape_str(x.shape()), shape_str(weight.shape()), in_features);
    if (bias.defined() && (bias.dim() != 1 || bias.size(0) != out_features))
        fail<ShapeError>("linear: bias of shape {} does not fit weight of shape {}: expected ({})",
                         shape_str(bias.shape()), shape_str(weight.shape()), out_features);

    Shape out_shape = x.shape();  // (..., out)
    out_shape[out_shape.size() - 1] = out_features;
    Tensor out = Tensor::empty(out_shape, x.dtype());
    if (out.numel() == 0) return out;
    const int64_t rows = out.numel() / out_features;

    if (in_features == 0) {  // x @ Wᵀ is an empty sum
        if (bias.defined())
            fill_rows(out, bias, rows);
        else
            fill_(out, 0.0);
        return out;
    }

    // x (..., in) as rows (rows, in): a view whenever the leading dimensions stack
    const Operand px = blas_operand(x.dim() == 2 ? x : x.reshape({rows, in_features}));
    // W (out, in) used as Wᵀ (in, out): a row-major W is read transposed, and a
    // W that is itself a transposed view is read as it is
    const Operand pw = blas_operand(weight);
    // On libxsmm each tile of the output gets the bias just before its kernel
    // adds x @ Wᵀ; otherwise the bias is written into every row first and GEMM
    // with beta = 1 adds onto it. Either way no read-add-write pass follows.
    if (bias.defined()) {
        const Tensor b = bias.contiguous();
        if (x.dtype() == DType::float32 &&
            blas::gemm_bias_rows(px.layout.trans, !pw.layout.trans, rows, out_features, in_features,
                                 px.tensor.data<float>(), px.layout.ld, pw.tensor.data<float>(), pw.layout.ld,
                                 b.data<float>(), out.data<float>(), out_features))
            return out;
        fill_rows(out, b, rows);  // (out) broadcast to (..., out)
    }
    visit_floating(x.dtype(), "linear", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T beta = bias.defined() ? T(1) : T(0);
        blas::gemm(px.layout.trans, !pw.layout.trans, rows, out_features, in_features, T(1), px.tensor.data<T>(),
                   px.layout.ld, pw.tensor.data<T>(), pw.layout.ld, beta, out.data<T>(), out_features);
    });
    return out;
}

}  // namespace tformer::core
