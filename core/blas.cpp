// The one doorway to BLAS. Every call into OpenBLAS from tformer's kernels
// goes through this file, so the row-major conventions, the checks on
// leading dimensions and the 32-bit size limit are written once.
//
// Row-major GEMM: C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C.
// A row-major matrix with leading dimension ld keeps element (i, j) at
// p[i * ld + j]; op(X) = Xᵀ reads the stored matrix the other way round, so a
// transposed view costs nothing.
//
// Single precision goes to libxsmm first where it is faster (see xsmm_gemm
// below); OpenBLAS does the rest, and every double-precision product.
#include "core/blas.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"

#include <cblas.h>
#include <libxsmm.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <strings.h>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>

namespace tformer::core::blas {

namespace {

// The Debian OpenBLAS uses 32-bit BLAS integers (blasint = int): larger sizes
// would wrap around silently, so they are refused here.
blasint to_blas_int(int64_t value, const char* what) {
    if (value < 0 || value > std::numeric_limits<blasint>::max())
        fail<ValueError>("blas::gemm: {} = {} is outside the range of 32-bit BLAS integers", what, value);
    return static_cast<blasint>(value);
}

// The stored matrix behind op(X) for op(X) of shape (rows, cols): Xᵀ is
// stored as (cols, rows). Its leading dimension must cover one stored row,
// and at least 1 (the BLAS rule); otherwise OpenBLAS would print an
// "illegal value" message and return without computing anything.
void check_ld(const char* name, bool trans, int64_t rows, int64_t cols, int64_t ld) {
    const int64_t stored_cols = trans ? rows : cols;
    if (ld < std::max<int64_t>(1, stored_cols))
        fail<ValueError>("blas::gemm: leading dimension {} of {} is smaller than its row length {}", ld, name,
                         std::max<int64_t>(1, stored_cols));
}

CBLAS_TRANSPOSE flag(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// the gemm log of start_gemm_log(): products may come from several threads
// (batched_gemm), so appending takes a lock, but only while recording
std::atomic<bool> g_logging{false};
std::mutex g_log_mutex;
std::vector<GemmCall> g_log;

void log_call(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, bool f64) {
    if (!g_logging.load(std::memory_order_relaxed)) return;
    const std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log.push_back({.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .f64 = f64});
}

// The checks shared by the float and double entry points. Returns false when
// C is empty, in which case BLAS has nothing to do.
bool check_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
    to_blas_int(m, "m");
    to_blas_int(n, "n");
    to_blas_int(k, "k");
    if (m == 0 || n == 0) return false;
    check_ld("A", trans_a, m, k, to_blas_int(lda, "lda"));
    check_ld("B", trans_b, k, n, to_blas_int(ldb, "ldb"));
    check_ld("C", false, m, n, to_blas_int(ldc, "ldc"));
    return true;
}

void call_blas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, flag(trans_a), flag(trans_b), static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
}

void call_blas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
    cblas_dgemm(CblasRowMajor, flag(trans_a), flag(trans_b), static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
}

// Products of at least this many multiply-adds are split over our threads.
// Below it OpenBLAS keeps a product on one thread anyway; from 64³ up it
// splits it itself, which for the d2l model's products (640x32x32 to
// 640x64x32) cost more than it saved: its 2-thread train step took 6-10 ms
// against 7.3 ms on 1 thread, and 5.6 ms with our split from 64³ on.
constexpr int64_t kSplitWork = int64_t{1} << 18;  // 64³
// Blocks are cut at multiples of this many rows or columns (a multiple of
// every OpenBLAS kernel's unrolling), and no block is narrower.
constexpr int64_t kSplitAlign = 32;

// How many blocks to cut a product into: one per thread, when the product
// is big enough, the longer side of C has room for them, and the OpenMP
// build of OpenBLAS (single-threaded inside our parallel region) is linked.
int split_parts(int64_t m, int64_t n, int64_t k) {
    const int threads = get_num_threads();
    if (threads <= 1 || omp_in_parallel() || !is_openmp_build()) return 1;
    if (m * n * k < kSplitWork) return 1;
    return static_cast<int>(std::min<int64_t>(threads, std::max(m, n) / kSplitAlign));
}

// C = alpha op(A) op(B) + beta C with C cut into `parts` blocks of whole rows
// (m >= n) or whole columns, each computed by one thread with a
// single-threaded BLAS call. On these machines this beats OpenBLAS's own
// splitting of one call (measured with 2 threads on the shapes of the
// translation model: 1140x128x128 in 184 µs against 219 µs, 8000x128x256
// (TN) in 2.87 ms against 3.21 ms), which synchronises its threads several
// times per call. Every element of C is one thread's sum over k, in the
// same order for the same thread count, so results are reproducible.
template <class T>
void split_gemm(int parts, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
    const bool by_rows = m >= n;
    const int64_t len = by_rows ? m : n;
    const int64_t units = (len + kSplitAlign - 1) / kSplitAlign;  // blocks of kSplitAlign, the last maybe shorter
    const auto bound = [&](int64_t p) { return std::min(len, units * p / parts * kSplitAlign); };
#pragma omp parallel num_threads(parts)
    {
        const int team = omp_get_num_threads();
        for (int p = omp_get_thread_num(); p < parts; p += team) {
            const int64_t first = bound(p), last = bound(p + 1);
            if (first >= last) continue;
            if (by_rows) {  // rows [first, last) of op(A) and C
                const T* a_part = trans_a ? a + first : a + first * lda;
                call_blas(trans_a, trans_b, last - first, n, k, alpha, a_part, lda, b, ldb, beta, c + first * ldc, ldc);
            } else {  // columns [first, last) of op(B) and C
                const T* b_part = trans_b ? b + first * ldb : b + first;
                call_blas(trans_a, trans_b, m, last - first, k, alpha, a, lda, b_part, ldb, beta, c + first, ldc);
            }
        }
    }
}

// ---- libxsmm: products whose right operand fits in the L2 cache ------------
//
// libxsmm (Debian's libxsmm-dev) writes a kernel for each shape at run time,
// for the vector width the CPU has: AVX-512 where there is one. It picks that
// for itself; OpenBLAS picks its kernels per CPU too, and OPENBLAS_CORETYPE
// may hold it to narrower ones (the Haswell kernels, AVX2, on the AVX-512
// machine of docs/bench.md). Its kernels do not pack the operands, so they
// win most on the products of small models: 2-2.5x OpenBLAS's Haswell
// kernels at d2l's 640 x 32 x 32, 1.5-2x at 2048 x 256 x 1024, and nothing
// or less once the right operand (k x n) outgrows the L2 cache. So:
//   - float only, alpha = 1, beta 0 or 1 (what tformer's kernels ask);
//   - n at least 32, and every kernel a multiple of 32 wide (two AVX-512
//     registers; the tiles below): a row of C then gets the same bits
//     however many rows the product has, and however the tiles are shared by
//     threads (a sentence's translation must not depend on its batch).
//     libxsmm's kernels for other widths change their loops with the row
//     count, and their rows' bits with them: every n that is 16 more than
//     a multiple of 64, and every width that is not a multiple of 16, on
//     this machine. A test checks this wherever the suite runs.
//   - k * n at most 2^20 floats (2^18 when A is transposed, the weight
//     gradient's dW = dYᵀ X, whose k is the batch's rows).
// libxsmm is column-major: our row-major C (m, n) is its C (n, m) = B A, so
// the operands swap. op(A) = Aᵀ is its "transpose B"; op(B) = Bᵀ (x Wᵀ, the
// linear layer's product) it has no kernel for, so Bᵀ is copied, a column
// block of C at a time: 0.13-0.16 ns a number (transpose_into), which even
// a decoding step of 4 rows against base's 512 x 2048 weight earns back
// (1.2x OpenBLAS with the copy; a plain loop took 0.5-0.8 ns a number and
// lost to OpenBLAS below about 100 rows).
// Only where libxsmm's kernels are wider than OpenBLAS's (xsmm_on below);
// TFORMER_LIBXSMM=0 in the environment turns it off (OpenBLAS only), and
// TFORMER_LIBXSMM=1 turns it on whatever the CPU (libxsmm's AVX2 kernels on
// an AVX2 machine): the tests run the libxsmm path that way where it is off.

// Tiles of C: 64 rows by 128 columns (the last ones narrower). The same
// tiles whatever the thread count, so the same bits; 128 columns ran as fast
// as whole rows or faster (a wide right operand then stays in the L2 cache).
constexpr int64_t kXsmmRows = 64, kXsmmCols = 128;
// The last n mod 32 columns (d2l's 201 words: 9) go through a tile 32 wide,
// padded with zero columns of B, so that every kernel is a multiple of 32 wide.
constexpr int64_t kXsmmPad = 32;
// Threads share the tiles from this many multiply-adds up (about 20 µs of
// one core): below it a parallel region costs more than it saves here.
constexpr int64_t kXsmmSplitWork = int64_t{1} << 22;

// OpenBLAS's kernel sets for AVX-512 (openblas_get_corename)
bool openblas_is_avx512() {
    const std::string name = core_name();
    for (const char* wide : {"SkylakeX", "Cooperlake", "SapphireRapids"})
        if (strcasecmp(name.c_str(), wide) == 0) return true;
    return false;
}

// libxsmm runs where its kernels are wider than OpenBLAS's: AVX-512 against
// OpenBLAS's AVX2 kernels or narrower. Against OpenBLAS's own AVX-512 kernels
// it loses on some of our shapes (a decoding step's output layer 0.82x,
// 2048 x 256 x 256 0.91x; docs/bench.md), so there OpenBLAS runs every
// product.
bool xsmm_on() {
    static const bool on = [] {
        const char* v = std::getenv("TFORMER_LIBXSMM");
        if (v != nullptr && std::strcmp(v, "0") == 0) return false;
        const bool forced = v != nullptr && std::strcmp(v, "1") == 0;  // any target: tests and measurements
        if (openblas_is_avx512() && !forced) return false;
        libxsmm_init();
        if (libxsmm_get_target_archid() < LIBXSMM_X86_AVX512 && !forced) return false;
        return true;
    }();
    return on;
}

// out (k, n), row stride ldo = B (n, k) transposed, B's row stride ldb: in
// 16 x 16 tiles (four 8 x 8 blocks of AVX shuffles where there is AVX), each
// tile reading 16 whole cache lines and writing 16, so the copy runs at cache
// speed whatever the strides (0.13-0.16 ns a number at 512 x 512 here)
void transpose_into(float* out, int64_t ldo, const float* b, int64_t ldb, int64_t n, int64_t k) {
    constexpr int64_t kTile = 16;
    for (int64_t j = 0; j < n; j += kTile)
        for (int64_t c = 0; c < k; c += kTile) {
            const int64_t jn = std::min(kTile, n - j), cn = std::min(kTile, k - c);
            for (int64_t j0 = 0; j0 < jn; j0 += 8)
                for (int64_t c0 = 0; c0 < cn; c0 += 8) {
                    const float* p = b + (j + j0) * ldb + c + c0;
                    float* q = out + (c + c0) * ldo + j + j0;
#if defined(__AVX__)
                    if (j0 + 8 <= jn && c0 + 8 <= cn) {
                        __m256 r[8], t[8], s[8];
                        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(p + i * ldb);
                        for (int i = 0; i < 4; ++i) {
                            t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                            t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
                        }
                        for (int i = 0; i < 2; ++i) {
                            s[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
                            s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
                            s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
                            s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
                        }
                        for (int i = 0; i < 4; ++i) {
                            _mm256_storeu_ps(q + i * ldo, _mm256_permute2f128_ps(s[i], s[i + 4], 0x20));
                            _mm256_storeu_ps(q + (i + 4) * ldo, _mm256_permute2f128_ps(s[i], s[i + 4], 0x31));
                        }
                        continue;
                    }
#endif
                    for (int64_t jj = 0; jj < std::min<int64_t>(8, jn - j0); ++jj)
                        for (int64_t cc = 0; cc < std::min<int64_t>(8, cn - c0); ++cc)
                            q[cc * ldo + jj] = p[jj * ldb + cc];
                }
        }
}

bool xsmm_fits(bool trans_a, bool trans_b, int64_t n, int64_t k, float alpha, float beta) {
    if (trans_a && trans_b) return false;
    if (alpha != 1.0f || (beta != 0.0f && beta != 1.0f)) return false;
    if (n < kXsmmPad || k < 1) return false;
    return k * n <= (trans_a ? int64_t{1} << 18 : int64_t{1} << 20);
}

// One product through libxsmm: C (m, n) = op(A) op(B) + beta C, row-major,
// cut into tiles of C (kXsmmRows x kXsmmCols; the last ones smaller).
// Columns [0, n_full) are tiles of their own; the last rest = n - n_full
// (fewer than 32) go as one tile 32 wide, whose missing columns of B are
// zeros, into a buffer of its own.
//
// With `bias` (n numbers, beta 0), C = op(A) op(B) + 1 biasᵀ: each tile of C
// gets the bias in its rows just before its kernel adds the product (beta
// 1), while the tile is in this thread's cache, instead of a pass over all
// of C first (for the base preset's FFN, 32 MB filled by one thread, then
// read back from memory by the kernels). The same sums as that fill and a
// beta-1 product, so the same bits.
struct XsmmGemm {
    bool trans_a, trans_b;
    int64_t m, n, k;
    const float* a;  // op(A) (m, k)
    int64_t lda;
    const float* b;  // op(B) (k, n)
    int64_t ldb;
    float beta;  // 0 or 1; 1 with a bias
    float* c;    // (m, n)
    int64_t ldc;
    const float* bias;  // (n) or nullptr

    // the tiles: row_blocks x col_blocks full ones, then a padded one per row block when rest > 0
    int64_t n_full = 0, rest = 0, row_blocks = 0, col_blocks = 0, last_rows = 0, last_cols = 0;
    // x Wᵀ: B is stored (n, k), and each thread copies the transpose of the
    // column block it is at, (k, 128), into a buffer of its own. Its rows are 16
    // numbers longer than the block so that a power-of-two width does not put
    // every row on the same cache sets (3-6x slower).
    int64_t panel_ld = 0;
    std::vector<float> b_rest{};  // (k, 32): op(B)'s last rest columns, then zeros
    // the kernels by tile shape: [last row block][last column block], and the padded tile's [last row block]
    libxsmm_smmfunction kernels[2][2] = {}, padded[2] = {};

    int64_t block_rows(int64_t rb) const { return rb + 1 == row_blocks ? last_rows : kXsmmRows; }
    int64_t block_cols(int64_t cb) const { return cb + 1 == col_blocks ? last_cols : kXsmmCols; }
    // rows r0.. of op(A): rows of A, or columns of the stored Aᵀ
    const float* a_rows(int64_t r0) const { return trans_a ? a + r0 : a + r0 * lda; }

    // The tile grid, a kernel for each tile shape, and B's last columns
    // padded; false when libxsmm has no kernel for a tile.
    bool plan() {
        if (bias != nullptr) beta = 1.0f;  // the kernels add onto the bias the tile was given
        n_full = n / kXsmmPad * kXsmmPad, rest = n - n_full;
        row_blocks = (m + kXsmmRows - 1) / kXsmmRows, col_blocks = (n_full + kXsmmCols - 1) / kXsmmCols;
        last_rows = m - (row_blocks - 1) * kXsmmRows, last_cols = n_full - (col_blocks - 1) * kXsmmCols;
        panel_ld = std::min(kXsmmCols, n_full) + 16;
        if (!find_kernels()) return false;
        if (rest > 0) pad_last_columns();
        return true;
    }

    // libxsmm's C (cols, rows) = its A (our B's columns) times its B (our op(A)'s rows)
    libxsmm_smmfunction kernel(int64_t rows, int64_t cols, int64_t a_ld, int64_t c_ld) const {
        const auto i = [](int64_t v) { return static_cast<libxsmm_blasint>(v); };
        const libxsmm_blasint xm = i(cols), xn = i(rows), xk = i(k), xlda = i(a_ld), xldb = i(lda), xldc = i(c_ld);
        const int flags = (beta == 0.0f ? LIBXSMM_GEMM_FLAG_BETA_0 : 0) | (trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
        const float one = 1.0f;
        return libxsmm_smmdispatch(xm, xn, xk, &xlda, &xldb, &xldc, &one, &beta, &flags, nullptr);
    }

    bool find_kernels() {
        const int64_t b_ld = trans_b ? panel_ld : ldb;
        for (int lr = 0; lr < 2; ++lr) {
            if (lr == 0 && row_blocks == 1) continue;  // no such row block
            const int64_t rows = lr ? last_rows : kXsmmRows;
            for (int lc = 0; lc < 2; ++lc) {  // n >= 32: at least one column block
                if (lc == 0 && col_blocks == 1) continue;
                kernels[lr][lc] = kernel(rows, lc ? last_cols : kXsmmCols, b_ld, ldc);
                if (kernels[lr][lc] == nullptr) return false;
            }
            if (rest > 0 && (padded[lr] = kernel(rows, kXsmmPad, kXsmmPad, kXsmmPad)) == nullptr) return false;
        }
        return true;
    }

    void pad_last_columns() {
        b_rest.assign(static_cast<size_t>(k * kXsmmPad), 0.0f);
        for (int64_t kk = 0; kk < k; ++kk) {
            float* row = b_rest.data() + kk * kXsmmPad;
            if (trans_b)  // B stored (n, k): column kk of its last rows
                for (int64_t j = 0; j < rest; ++j) row[j] = b[(n_full + j) * ldb + kk];
            else
                std::copy_n(b + kk * ldb + n_full, rest, row);
        }
    }

    // Every tile, shared by the threads from kXsmmSplitWork multiply-adds up.
    void run() const {
        const int64_t tiles = row_blocks * (col_blocks + (rest > 0 ? 1 : 0));
        const int team = static_cast<int>(std::min<int64_t>(get_num_threads(), tiles));
        if (team > 1 && !omp_in_parallel() && m * n * k >= kXsmmSplitWork) {
#pragma omp parallel num_threads(team)
            {
                const int64_t i = omp_get_thread_num(), used = omp_get_num_threads();
                run_tiles(tiles * i / used, tiles * (i + 1) / used);
            }
        } else {
            run_tiles(0, tiles);
        }
    }

    // Tiles [first, last), column block by column block (a block's transposed
    // panel serves all its row blocks). The panel buffer is kept: a fresh one
    // of megabytes would be new pages from the kernel at every call, faulted
    // in and zeroed (7% of base's decoding in `perf`); one block, not all of
    // Bᵀ, is 1.2 MB at most for base's 2048-wide layers instead of 4 MB.
    void run_tiles(int64_t first, int64_t last) const {
        thread_local std::vector<float> panel;
        int64_t held = -1;  // the column block whose transpose `panel` holds in this call
        for (int64_t t = first; t < last; ++t) {
            const int64_t cb = t / row_blocks, rb = t % row_blocks;
            if (cb == col_blocks) {
                padded_tile(rb);
                continue;
            }
            const float* b_cols = b + cb * kXsmmCols;
            if (trans_b) {
                if (held != cb) transpose_block(cb, panel), held = cb;
                b_cols = panel.data();
            }
            full_tile(rb, cb, b_cols);
        }
    }

    // Column block cb of op(B) = Bᵀ, (k, cols), into `panel` (row stride panel_ld).
    void transpose_block(int64_t cb, std::vector<float>& panel) const {
        if (panel.size() < static_cast<size_t>(k * panel_ld)) panel.resize(static_cast<size_t>(k * panel_ld));
        transpose_into(panel.data(), panel_ld, b + cb * kXsmmCols * ldb, ldb, block_cols(cb), k);
    }

    // Tile (rb, cb) of C, from b_cols: its columns of op(B).
    void full_tile(int64_t rb, int64_t cb, const float* b_cols) const {
        const int64_t r0 = rb * kXsmmRows, c0 = cb * kXsmmCols;
        float* c_tile = c + r0 * ldc + c0;
        if (bias != nullptr)
            for (int64_t r = 0; r < block_rows(rb); ++r) std::copy_n(bias + c0, block_cols(cb), c_tile + r * ldc);
        kernels[rb + 1 == row_blocks][cb + 1 == col_blocks](b_cols, a_rows(r0), c_tile);
    }

    // The padded tile of row block rb: C's last rest columns, through a buffer 32 wide.
    void padded_tile(int64_t rb) const {
        const int64_t r0 = rb * kXsmmRows, rows = block_rows(rb);
        float out[kXsmmRows * kXsmmPad] = {};  // (rows, 32): C's last columns, then zeros
        float* c_rest = c + r0 * ldc + n_full;
        if (bias != nullptr)
            for (int64_t r = 0; r < rows; ++r) std::copy_n(bias + n_full, rest, out + r * kXsmmPad);
        else if (beta != 0.0f)
            for (int64_t r = 0; r < rows; ++r) std::copy_n(c_rest + r * ldc, rest, out + r * kXsmmPad);
        padded[rb + 1 == row_blocks](b_rest.data(), a_rows(r0), out);
        for (int64_t r = 0; r < rows; ++r) std::copy_n(out + r * kXsmmPad, rest, c_rest + r * ldc);
    }
};

// C (m, n) = op(A) op(B) + beta C (+ 1 biasᵀ) through libxsmm, tile by tile;
// false (nothing written) when libxsmm has no kernel for a tile.
bool xsmm_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr) {
    XsmmGemm product{.trans_a = trans_a,
                     .trans_b = trans_b,
                     .m = m,
                     .n = n,
                     .k = k,
                     .a = a,
                     .lda = lda,
                     .b = b,
                     .ldb = ldb,
                     .beta = beta,
                     .c = c,
                     .ldc = ldc,
                     .bias = bias};
    if (!product.plan()) return false;
    product.run();
    return true;
}

template <class T>
void gemm_any(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
              int64_t ldb, T beta, T* c, int64_t ldc) {
    if (!check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc)) return;
    log_call(trans_a, trans_b, m, n, k, std::is_same_v<T, double>);
    if constexpr (std::is_same_v<T, float>) {
        if (xsmm_fits(trans_a, trans_b, n, k, alpha, beta) && xsmm_on() &&
            xsmm_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc))
            return;
    }
    const int parts = split_parts(m, n, k);
    if (parts > 1)
        split_gemm(parts, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        call_blas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

// C = alpha * op(A) @ op(B) + beta * C in single precision.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    gemm_any(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool gemm_bias_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, const float* bias, float* c, int64_t ldc) {
    if (!xsmm_fits(trans_a, trans_b, n, k, 1.0f, 0.0f) || !xsmm_on() || m < 1 || n < 1 ||
        !check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc))
        return false;
    if (!xsmm_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, 0.0f, c, ldc, bias)) return false;
    log_call(trans_a, trans_b, m, n, k, false);
    return true;
}

// C = alpha * op(A) @ op(B) + beta * C in double precision.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
    gemm_any(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void start_gemm_log() {
    const std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log.clear();
    g_logging.store(true);
}

std::vector<GemmCall> stop_gemm_log() {
    g_logging.store(false);
    const std::lock_guard<std::mutex> lock(g_log_mutex);
    return std::move(g_log);
}

std::string core_name() {
    const char* name = openblas_get_corename();
    return name != nullptr ? name : "unknown";
}

std::string xsmm_target() {
    if (!xsmm_on()) return "off";
    const char* name = libxsmm_get_target_arch();
    return name != nullptr ? name : "unknown";
}

std::string config() {
    const char* text = openblas_get_config();
    return text != nullptr ? text : "unknown";
}

bool is_openmp_build() { return openblas_get_parallel() == OPENBLAS_OPENMP; }

}  // namespace tformer::core::blas
