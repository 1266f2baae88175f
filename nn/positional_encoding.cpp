// PositionalEncoding: the sinusoid table (seed 002 §1.2.2 gives the formula,
// seed 000 uses d2l's class, seed 004 builds the same table as `pe`).
#include "nn/layers.hpp"

#include "autograd/elementwise.hpp"
#include "autograd/functional.hpp"
#include "core/check.hpp"

#include <cmath>

namespace tformer::nn {

// P[0, pos, 2i] = sin(pos / 10000^(2i/d)),  P[0, pos, 2i+1] = cos(pos / 10000^(2i/d))
// Column pair (2i, 2i+1) turns at frequency 1/10000^(2i/d): from one turn per
// 2π steps at i = 0 down to one per 2π·10000 steps, so every position gets a
// distinct code and P[pos + k] is a fixed rotation of P[pos] (d2l 10.6.3).
PositionalEncoding::PositionalEncoding(Options opts, core::Generator& gen)
    : Module("PositionalEncoding"), options(opts) {
    const int64_t L = options.max_len, D = options.num_hiddens;
    if (D < 1) fail<ValueError>("PositionalEncoding: num_hiddens must be positive, got {}", D);
    if (L < 0) fail<ValueError>("PositionalEncoding: max_len must be non-negative, got {}", L);
    dropout_ = register_module("dropout", std::make_shared<Dropout>(Dropout::Options{.p = options.dropout}, gen));

    // computed in double, stored float32, straight into the table (no
    // double copy of it: 4 MB for base's 1000 x 512 that would stay in the heap)
    P = core::Tensor::empty({1, L, D});
    float* table = P.data<float>();  // (max_len, D), row-major
    for (int64_t pos = 0; pos < L; ++pos)
        for (int64_t j = 0; j < D; j += 2) {  // j = 2i
            const double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(j) / D);
            table[pos * D + j] = static_cast<float>(std::sin(angle));
            if (j + 1 < D) table[pos * D + j + 1] = static_cast<float>(std::cos(angle));
        }
}

namespace {
// P[:, start : start + T, :] in `dtype`, (1, T, D); IndexError past max_len.
core::Tensor table_rows(const core::Tensor& P, int64_t start, int64_t T, int64_t max_len, core::DType dtype) {
    if (start < 0) fail<IndexError>("PositionalEncoding: start {} must be non-negative", start);
    if (start + T > max_len)
        fail<IndexError>("PositionalEncoding: positions {} to {} (start {} + {} steps) exceed max_len {}", start,
                         start + T - 1, start, T, max_len);
    core::Tensor p = P.slice(1, start, start + T);  // (1, T, D), a view of the table
    return p.dtype() == dtype ? p : p.to(dtype);
}
}  // namespace

// Y = dropout(X + P[:, start : start + T, :])     X (B, T, D), P slice (1, T, D)
Variable PositionalEncoding::forward(const Variable& X, int64_t start) {
    const int64_t D = options.num_hiddens;
    check<ShapeError>(X.dim() == 3 && X.size(2) == D, "PositionalEncoding: expected X of shape (B, T, {}), got {}", D,
                      X.shape());
    const core::Tensor p = table_rows(P, start, X.size(1), options.max_len, X.dtype());  // (1, T, D)
    return (*dropout_)(X + Variable(p));  // P is a constant: Variable(p) requires no gradient
}

// Y = dropout(E[ids] · scale + P[:, start : start + T, :])     ids (B, T), Y (B, T, D)
Variable PositionalEncoding::forward_embedded(const Embedding& embedding, const core::Tensor& ids, double scale,
                                              int64_t start) {
    const int64_t D = options.num_hiddens;
    check<ShapeError>(embedding.options.embedding_dim == D,
                      "PositionalEncoding: expected an embedding of dimension {}, got {}", D,
                      embedding.options.embedding_dim);
    const ShapeCheck dims = ShapeCheck("PositionalEncoding").arg("ids", ids, "B T");
    const int64_t B = dims["B"], T = dims["T"];
    const core::DType dtype = embedding.weight.dtype();
    const core::Tensor p = table_rows(P, start, T, options.max_len, dtype);  // (1, T, D)
    const core::Tensor keep = dropout_->keep_mask({B, T, D}, dtype);         // as forward's dropout draws it
    return autograd::embedding_positional(embedding.weight, ids, scale, p.reshape({T, D}), keep,
                                          embedding.options.padding_idx);
}

}  // namespace tformer::nn
