// Plain-loop oracles for the row-wise kernels (see rowwise.hpp). Each one is
// the textbook formula written out element by element in double, on values
// read with to_vector() (which follows any strides), so it shares no code
// path with the fast kernels in rowwise.cpp. The backward oracles multiply by
// the full L×L Jacobian of each row instead of using the simplified closed
// forms, so they also check the algebra behind those forms.
//
// They assume well-formed inputs (the tests call the fast kernel first, which
// checks them) and are slow: O(L²) per row for the backwards.
#include "core/rowwise.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace tformer::core::reference {

namespace {

using Values = std::vector<double>;

// Number of rows and row length of a (..., L) tensor.
struct RowGrid {
    int64_t rows;
    int64_t length;
};

RowGrid grid_of(const Tensor& x) {
    const int64_t L = x.shape().back();
    return {L == 0 ? 0 : x.numel() / L, L};
}

// Row r of a row-major value list.
Values row_of(const Values& v, int64_t r, int64_t L) { return Values(v.begin() + r * L, v.begin() + (r + 1) * L); }

// softmax of the kept entries of one row; 0 for the rest, and all zeros when
// nothing is kept or every kept entry is -inf.
Values softmax_kept(const Values& x, const std::vector<bool>& keep) {
    const double inf = std::numeric_limits<double>::infinity();
    double m = -inf;
    for (size_t i = 0; i < x.size(); ++i)
        if (keep[i]) m = std::max(m, x[i]);
    Values p(x.size(), 0.0);
    if (m == -inf) return p;
    double total = 0;
    for (size_t i = 0; i < x.size(); ++i)
        if (keep[i]) total += std::exp(x[i] - m);
    for (size_t i = 0; i < x.size(); ++i)
        if (keep[i]) p[i] = std::exp(x[i] - m) / total;
    return p;
}

// log p_v = x_v - log Σ_j exp(x_j), written with the row max m.
Values log_softmax_of(const Values& x) {
    double m = x[0];
    for (double v : x) m = std::max(m, v);
    double total = 0;
    for (double v : x) total += std::exp(v - m);
    Values out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - m - std::log(total);
    return out;
}

// Applies row_fn(row) -> row to every row and packs the rows into x's shape.
template <class RowFn>
Tensor per_row(const Tensor& x, RowFn&& row_fn) {
    const Values v = x.to_vector();
    const RowGrid g = grid_of(x);
    Values out;
    out.reserve(v.size());
    for (int64_t r = 0; r < g.rows; ++r) {
        const Values y = row_fn(r, row_of(v, r, g.length));
        out.insert(out.end(), y.begin(), y.end());
    }
    return tensor(out, x.shape(), x.dtype());
}

}  // namespace

Tensor softmax(const Tensor& x) {
    return per_row(x,
                   [](int64_t, const Values& row) { return softmax_kept(row, std::vector<bool>(row.size(), true)); });
}

Tensor log_softmax(const Tensor& x) {
    const double inf = std::numeric_limits<double>::infinity();
    return per_row(x, [&](int64_t, const Values& row) {
        bool all_neg_inf = true;
        for (double v : row) all_neg_inf = all_neg_inf && v == -inf;
        return all_neg_inf ? Values(row.size(), -inf) : log_softmax_of(row);
    });
}

namespace {

// dx_j = Σ_i dy_i ∂y_i/∂x_j row by row, the full Jacobian written out:
// term(dy_i, y, i, j) = dy_i ∂y_i/∂x_j of the row y.
template <class Term>
Tensor jacobian_backward(const Tensor& grad_y, const Tensor& y, Term&& term) {
    const Values dy = grad_y.to_vector();
    const RowGrid g = grid_of(y);
    return per_row(y, [&](int64_t r, const Values& yr) {
        const Values dyr = row_of(dy, r, g.length);
        Values dx(yr.size(), 0.0);
        for (size_t j = 0; j < yr.size(); ++j)
            for (size_t i = 0; i < yr.size(); ++i) dx[j] += term(dyr[i], yr, i, j);
        return dx;
    });
}

double kronecker(size_t i, size_t j) { return i == j ? 1.0 : 0.0; }

}  // namespace

// ∂y_i/∂x_j = y_i (δ_ij - y_j)
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y) {
    return jacobian_backward(grad_y, y, [](double dy, const Values& yr, size_t i, size_t j) {
        return dy * yr[i] * (kronecker(i, j) - yr[j]);
    });
}

// ∂y_i/∂x_j = δ_ij - softmax_j = δ_ij - exp(y_j)
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y) {
    return jacobian_backward(grad_y, y, [](double dy, const Values& yr, size_t i, size_t j) {
        return dy * (kronecker(i, j) - std::exp(yr[j]));
    });
}

Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens) {
    if (!valid_lens.defined()) return reference::softmax(x);
    const Values lens = valid_lens.to_vector();
    const RowGrid g = grid_of(x);
    Shape per_row_shape = x.shape();
    per_row_shape.erase(per_row_shape.size() - 1);
    // one length per row, or one per batch element shared by its rows
    const bool one_per_row = valid_lens.shape() == per_row_shape;
    const int64_t rows_per_batch = one_per_row || x.shape()[0] == 0 ? 1 : g.rows / x.shape()[0];
    return per_row(x, [&](int64_t r, const Values& row) {
        const double len = one_per_row ? lens[r] : lens[r / rows_per_batch];
        std::vector<bool> keep(row.size());
        for (size_t i = 0; i < row.size(); ++i) keep[i] = static_cast<double>(i) < len;
        return softmax_kept(row, keep);
    });
}

Tensor masked_softmax_by_mask(const Tensor& x, const Tensor& keep) {
    const std::vector<bool> k = keep.expand(x.shape()).to_vector<bool>();
    const RowGrid g = grid_of(x);
    return per_row(x, [&](int64_t r, const Values& row) {
        return softmax_kept(row, std::vector<bool>(k.begin() + r * g.length, k.begin() + (r + 1) * g.length));
    });
}

LayerNormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
    const RowGrid g = grid_of(x);
    const Values w = weight.defined() ? weight.to_vector() : Values(g.length, 1.0);
    const Values b = bias.defined() ? bias.to_vector() : Values(g.length, 0.0);
    Values means, rstds;
    const Tensor y = per_row(x, [&](int64_t, const Values& row) {
        const double D = static_cast<double>(row.size());
        double mean = 0;
        for (double v : row) mean += v / D;
        double var = 0;
        for (double v : row) var += (v - mean) * (v - mean) / D;
        const double rstd = 1.0 / std::sqrt(var + eps);
        Values out(row.size());
        for (size_t i = 0; i < row.size(); ++i) out[i] = (row[i] - mean) * rstd * w[i] + b[i];
        means.push_back(mean);
        rstds.push_back(rstd);
        return out;
    });
    Shape lead = x.shape();
    lead.erase(lead.size() - 1);
    return {.y = y, .mean = tensor(means, lead, x.dtype()), .rstd = tensor(rstds, lead, x.dtype())};
}

// dx_j = Σ_i g_i ∂x̂_i/∂x_j with g = dy ⊙ w and ∂x̂_i/∂x_j = r (δ_ij - 1/D - x̂_i x̂_j / D)
LayerNormGrads layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, bool has_bias) {
    const RowGrid g = grid_of(x);
    const Values dy = grad_y.to_vector(), mu = mean.to_vector(), rs = rstd.to_vector();
    const Values w = weight.defined() ? weight.to_vector() : Values(g.length, 1.0);
    Values dw(g.length, 0.0), db(g.length, 0.0);
    const Tensor dx = per_row(x, [&](int64_t r, const Values& row) {
        const Values dyr = row_of(dy, r, g.length);
        const double D = static_cast<double>(row.size());
        Values xhat(row.size());
        for (size_t i = 0; i < row.size(); ++i) xhat[i] = (row[i] - mu[r]) * rs[r];
        Values out(row.size(), 0.0);
        for (size_t j = 0; j < row.size(); ++j)
            for (size_t i = 0; i < row.size(); ++i)
                out[j] += dyr[i] * w[i] * rs[r] * ((i == j ? 1.0 : 0.0) - 1.0 / D - xhat[i] * xhat[j] / D);
        for (size_t i = 0; i < row.size(); ++i) {
            dw[i] += dyr[i] * xhat[i];
            db[i] += dyr[i];
        }
        return out;
    });
    const int64_t D = g.length;
    return {.dx = dx,
            .dweight = weight.defined() ? tensor(dw, {D}, x.dtype()) : Tensor(),
            .dbias = has_bias ? tensor(db, {D}, x.dtype()) : Tensor()};
}

namespace {
// q_v = (1-ε) [v == t] + ε/V
Values smoothed_target(int64_t t, int64_t V, double eps) {
    Values q(static_cast<size_t>(V), eps / static_cast<double>(V));
    q[static_cast<size_t>(t)] += 1 - eps;
    return q;
}
}  // namespace

// loss_n = -Σ_v q_v log p_v
Tensor cross_entropy_rows(const Tensor& logits, const Tensor& targets, double label_smoothing, int64_t ignore_index) {
    const std::vector<int64_t> t = targets.to_vector<int64_t>();
    const Values x = logits.to_vector();
    const int64_t N = logits.shape()[0], V = logits.shape()[1];
    Values loss(static_cast<size_t>(N), 0.0);
    for (int64_t n = 0; n < N; ++n) {
        if (t[n] == ignore_index) continue;
        const Values logp = log_softmax_of(row_of(x, n, V));
        const Values q = smoothed_target(t[n], V, label_smoothing);
        for (int64_t v = 0; v < V; ++v)
            if (q[v] != 0) loss[n] -= q[v] * logp[v];  // 0 · log 0 counts as 0
    }
    return tensor(loss, {N}, logits.dtype());
}

// dlogits_n = grad_n (p_n - q_n)
Tensor cross_entropy_rows_backward(const Tensor& grad_rows, const Tensor& logits, const Tensor& targets,
                                   double label_smoothing, int64_t ignore_index) {
    const std::vector<int64_t> t = targets.to_vector<int64_t>();
    const Values gr = grad_rows.to_vector();
    return per_row(logits, [&](int64_t n, const Values& row) {
        Values d(row.size(), 0.0);
        if (t[n] == ignore_index) return d;
        const Values p = softmax_kept(row, std::vector<bool>(row.size(), true));
        const Values q = smoothed_target(t[n], static_cast<int64_t>(row.size()), label_smoothing);
        for (size_t v = 0; v < row.size(); ++v) d[v] = gr[n] * (p[v] - q[v]);
        return d;
    });
}

}  // namespace tformer::core::reference
