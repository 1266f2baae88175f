// Differentiable Transformer building blocks: softmax, log_softmax, the two
// masked softmaxes of attention, layer norm, embedding lookup and
// cross-entropy. Each fused op is one core kernel forward and one core
// kernel backward (core/rowwise.hpp, core/index.hpp), recorded as one node.
// The `composed` versions at the end build the same functions from
// primitive autograd ops; the tests check both agree in values and gradients.
//
// Notation as in elementwise.cpp: y is the output, dy the gradient arriving
// at y. Dimension letters: D the last (row) dimension, N rows, V classes.
#include "autograd/functional.hpp"

#include "autograd/elementwise.hpp"
#include "autograd/reduce.hpp"
#include "core/attention.hpp"
#include "core/elementwise.hpp"
#include "core/index.hpp"
#include "core/mask.hpp"
#include "core/output_loss.hpp"
#include "core/reduce.hpp"
#include "core/rowwise.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tformer::autograd {

namespace c = tformer::core;

// ============================ softmax family ============================

// y = exp(x - max x) / Σ exp(x - max x)                    x, y (..., D)
Variable softmax(const Variable& x) {
    Tensor y = c::softmax(x.value());
    return record("softmax", y, {x}, [y](const Tensor& dy, Grads& g) {
        // ∂y_i/∂x_j = y_i (δ_ij - y_j), so dx = y ⊙ (dy - Σ_j dy_j y_j): it needs
        // only y (saved: the output, not x)
        g[0] = c::softmax_backward(dy, y);
    });
}

// y = x - max x - log Σ exp(x - max x)                     x, y (..., D)
Variable log_softmax(const Variable& x) {
    Tensor y = c::log_softmax(x.value());
    return record("log_softmax", y, {x}, [y](const Tensor& dy, Grads& g) {
        // ∂y_i/∂x_j = δ_ij - softmax_j = δ_ij - exp(y_j), so dx = dy - exp(y) Σ_j dy_j
        // (saved: the output y, from which softmax is one exp away)
        g[0] = c::log_softmax_backward(dy, y);
    });
}

// y = softmax over the first valid_len entries of each row, 0 after them   x, y (..., T, S)
Variable masked_softmax(const Variable& x, const Tensor& valid_lens) {
    Tensor y = c::masked_softmax(x.value(), valid_lens);
    return record("masked_softmax", y, {x}, [y](const Tensor& dy, Grads& g) {
        // On the valid entries y is a plain softmax of those entries; masked
        // entries are the constant 0 and their y_j = 0 drops them from
        // Σ_j dy_j y_j. So softmax's backward is exactly right, and it gives
        // dx = 0 at every masked position.
        g[0] = c::softmax_backward(dy, y);
    });
}

// y = softmax over the entries where keep is true, 0 elsewhere     x, y (..., T, S)
Variable masked_softmax_by_mask(const Variable& x, const Tensor& keep) {
    Tensor y = c::masked_softmax_by_mask(x.value(), keep);
    return record("masked_softmax_by_mask", y, {x}, [y](const Tensor& dy, Grads& g) {
        g[0] = c::softmax_backward(dy, y);  // as for masked_softmax: masked y are 0
    });
}

// ============================ layer norm ============================

// y = (x - mean) * rstd * weight + bias,  rstd = 1/√(var + eps)   x, y (..., D); weight, bias (D)
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps) {
    const Tensor w = weight.defined() ? weight.value() : Tensor();
    const Tensor b = bias.defined() ? bias.value() : Tensor();
    c::LayerNormOut out = c::layer_norm(x.value(), w, b, eps);
    // Saved: x with the per-row mean and rstd (..., ), so backward rebuilds
    // x̂ = (x - mean) * rstd without a second pass of statistics, and weight,
    // which scales dy before it reaches x̂. (Recovering x̂ from y instead would
    // divide by weight, which fails where a weight is 0.) The ops that use y
    // need not keep it: it is this kernel once more on x, which we keep.
    Variable out_y = record(
        "layer_norm", out.y, {x, weight, bias},
        [xv = x.value(), mean = out.mean, rstd = out.rstd, w, has_bias = bias.defined()](const Tensor& dy, Grads& g) {
            // y = x̂ ⊙ weight + bias with x̂ depending on x through mean and rstd too:
            //   dx = rstd (g - mean(g) - x̂ mean(g ⊙ x̂)),  g = dy ⊙ weight
            //   dweight = Σ_rows dy ⊙ x̂,  dbias = Σ_rows dy
            c::LayerNormGrads grads = c::layer_norm_backward(dy, xv, mean, rstd, w, has_bias);
            if (g.wanted(0)) g[0] = std::move(grads.dx);
            if (g.wanted(1)) g[1] = std::move(grads.dweight);
            if (g.wanted(2)) g[2] = std::move(grads.dbias);
        });
    set_remake(out_y, [xv = x.value(), w, b, eps] { return c::layer_norm(xv, w, b, eps).y; });
    return out_y;
}

// y = layer_norm(x + y_in ⊙ keep)                  x, y_in, keep, y (..., D); weight, bias (D)
Variable add_layer_norm(const Variable& x, const Variable& y, const Tensor& keep, const Variable& weight,
                        const Variable& bias, double eps) {
    if (!x.defined() || !y.defined()) fail<ValueError>("add_layer_norm: x and y must be defined");
    const Tensor w = weight.defined() ? weight.value() : Tensor();
    const Tensor b = bias.defined() ? bias.value() : Tensor();
    c::AddLayerNormOut out = c::add_layer_norm(x.value(), y.value(), keep, w, b, eps);
    // Saved: the sum s with its row mean and rstd (layer_norm's saved input),
    // weight, and the mask, which is all dropout's backward needs (as bits:
    // a float mask would be as large as s). The output is layer_norm(s), which
    // the ops that use it make again from s (set_remake) instead of keeping it.
    Variable out_y = record("add_layer_norm", out.y, {x, y, weight, bias},
                            [s = out.sum, mean = out.mean, rstd = out.rstd, w, mask = c::PackedMask(keep),
                             has_bias = bias.defined()](const Tensor& dy, Grads& g) {
                                // ds from layer norm's backward; s = x + y ⊙ keep, so dx = ds and dy_in = ds ⊙ keep
                                c::LayerNormGrads grads = c::layer_norm_backward(dy, s, mean, rstd, w, has_bias);
                                if (g.wanted(1)) g[1] = mask.defined() ? c::mul(grads.dx, mask.unpack()) : grads.dx;
                                if (g.wanted(0)) g[0] = std::move(grads.dx);
                                if (g.wanted(2)) g[2] = std::move(grads.dweight);
                                if (g.wanted(3)) g[3] = std::move(grads.dbias);
                            });
    // the forward's layer norm of s, the same kernel on the same rows: the same bits
    set_remake(out_y, [s = out.sum, w, b, eps] { return c::layer_norm(s, w, b, eps).y; });
    return out_y;
}

// ============================ embedding ============================

// y[*i, :] = weight[ids[*i], :]                      weight (V, D), ids (*), y (*, D)
Variable embedding(const Variable& weight, const Tensor& ids, int64_t padding_idx) {
    Tensor y = c::embedding(weight.value(), ids);  // checks the ids against V
    const int64_t V = weight.size(0);
    // checked here, at the call that made the mistake, not later in backward
    if (padding_idx != -1 && (padding_idx < 0 || padding_idx >= V))
        fail<IndexError>("embedding: padding_idx {} out of range for vocabulary of {} (use -1 for none)", padding_idx,
                         V);
    // Saved: the ids (a constant: no gradient flows to them), which say which
    // weight row each dy row came from.
    return record("embedding", std::move(y), {weight}, [ids, V, padding_idx](const Tensor& dy, Grads& g) {
        // ∂y[i, :]/∂weight[v, :] = I when ids[i] == v: dweight[v] = Σ_{i: ids[i] = v} dy[i],
        // and the padding row gets nothing, so the <pad> vector stays as it was
        g[0] = c::embedding_backward(dy, ids, V, padding_idx);
    });
}

// y = (weight[ids] · scale + pos) ⊙ keep          weight (V, D), ids (B, T), pos (T, D), y (B, T, D)
Variable embedding_positional(const Variable& weight, const Tensor& ids, double scale, const Tensor& pos,
                              const Tensor& keep, int64_t padding_idx) {
    if (!weight.defined()) fail<ValueError>("embedding_positional: weight must be defined");
    Tensor y = c::embedding_positional(weight.value(), ids, scale, pos, keep);  // checks ids, shapes, dtypes
    const int64_t V = weight.size(0);
    if (padding_idx != -1 && (padding_idx < 0 || padding_idx >= V))
        fail<IndexError>("embedding_positional: padding_idx {} out of range for vocabulary of {} (use -1 for none)",
                         padding_idx, V);
    // Saved: the ids (which row each gradient row goes to) and the mask (as
    // bits); pos is an added constant.
    return record("embedding_positional", std::move(y), {weight},
                  [ids, mask = c::PackedMask(keep), scale, V, padding_idx](const Tensor& dy, Grads& g) {
                      // back through dropout (⊙ keep), the add (unchanged) and the scale (· scale),
                      // then the lookup's scatter-add, in the composed ops' order
                      Tensor d = mask.defined() ? c::mul(dy, mask.unpack()) : dy;
                      if (scale != 1.0) d = c::mul(d, scale);
                      g[0] = c::embedding_backward(d, ids, V, padding_idx);
                  });
}

// ============================ cross-entropy ============================

namespace {

// Checks logits (..., V) against targets (...) and returns N, the number of rows.
int64_t check_cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options) {
    if (!targets.defined()) fail<ValueError>("cross_entropy: targets is undefined");
    if (targets.dtype() != core::DType::int64)
        fail<ValueError>("cross_entropy: targets must be int64, got {}", core::dtype_name(targets.dtype()));
    if (logits.dim() == 0)
        fail<ShapeError>("cross_entropy: logits must have a class dimension (..., V), got a 0-d tensor");
    core::Shape expected = logits.shape();
    expected.erase(expected.size() - 1);
    if (!(targets.shape() == expected))
        fail<ShapeError>("cross_entropy: targets of shape {} do not match logits of shape {} (expected {})",
                         core::shape_str(targets.shape()), core::shape_str(logits.shape()), core::shape_str(expected));
    if (!(options.label_smoothing >= 0 && options.label_smoothing <= 1))
        fail<ValueError>("cross_entropy: label_smoothing must be in [0, 1], got {}", options.label_smoothing);
    return targets.numel();
}

// The denominator of Reduction::mean: the targets that are not ignored (as
// PyTorch), at least 1 so that a batch with every target ignored has mean 0
// (its summed loss is 0) rather than 0/0.
double mean_divisor(const Tensor& targets, int64_t ignore_index) {
    const std::vector<int64_t> t = targets.to_vector<int64_t>();
    const auto counted = std::count_if(t.begin(), t.end(), [&](int64_t v) { return v != ignore_index; });
    return static_cast<double>(std::max<int64_t>(counted, 1));
}

}  // namespace

// loss_n = -Σ_v q_v log softmax(logits_n)_v,  q = (1-ε) onehot(t_n) + ε/V;  then none / Σ / Σ÷count
Variable cross_entropy(const Variable& logits, const Tensor& targets, const CrossEntropyOptions& options) {
    const int64_t N = check_cross_entropy(logits.value(), targets, options);
    const int64_t V = logits.size(-1);
    const Tensor logits2 = logits.value().reshape({N, V});  // (N, V): every leading dim is a row
    const Tensor targets1 = targets.reshape({N});           // (N)
    const double eps = options.label_smoothing;
    const int64_t ignore = options.ignore_index;
    Tensor stats;  // (N, 2): each row's max and Σ exp(x - max), for a one-pass backward
    const Tensor rows = c::cross_entropy_rows(logits2, targets1, eps, ignore, &stats);  // (N), 0 where ignored

    const Reduction reduction = options.reduction;
    const double divisor = reduction == Reduction::mean ? mean_divisor(targets1, ignore) : 1.0;
    Tensor loss = reduction == Reduction::none  ? rows.view(targets.shape())  // (...)
                  : reduction == Reduction::sum ? c::sum(rows)                // ()
                                                : c::div(c::sum(rows), divisor);
    // Saved: the logits as rows, the targets and the rows' stats, from which the
    // kernel remakes softmax in one pass (cheaper to redo than to keep (N, V)).
    return record(
        "cross_entropy", std::move(loss), {logits},
        [logits2, targets1, stats, eps, ignore, reduction, divisor, N, shape = logits.shape()](const Tensor& dy,
                                                                                               Grads& g) mutable {
            // the upstream gradient of each row's loss: dy itself for none,
            // the scalar dy for every row after a sum, dy / count after a mean
            const Tensor grad_rows =
                reduction == Reduction::none ? dy.reshape({N}) : c::full({N}, dy.item() / divisor, dy.dtype());
            // ∂loss_n/∂logits_n = softmax(logits_n) - q_n, and 0 for ignored rows.
            // The last time through, with nothing but this node holding the
            // logits (the caller's Variable gone), the gradient is written over
            // them: the same floats without a second (N, V) tensor at
            // backward's peak (32 MB on the base preset).
            if (g.last_run() && logits2.is_contiguous() && logits2.storage().use_count() == 1) {
                Tensor d = std::move(logits2);
                c::cross_entropy_rows_backward_(grad_rows, d, targets1, eps, ignore, stats);
                g[0] = d.view(shape);
                return;
            }
            g[0] = c::cross_entropy_rows_backward(grad_rows, logits2, targets1, eps, ignore, stats).view(shape);
        });
}

// ============================ composed versions ============================
//
// The same functions out of primitive ops, one node per step, for reading
// next to the textbook. They are slower (several passes, every intermediate
// kept for backward) and, unlike the fused kernels, give NaN for a row that
// is entirely -inf.

namespace composed {

namespace {
// The row max as a constant, (..., 1) to broadcast against x (..., D).
// softmax(x - c) = softmax(x) for any c that is constant along the row, so
// the gradient through c is exactly zero: Σ_j ∂softmax_i/∂x_j = 0 for every
// i. Subtracting the max only keeps exp() ≤ 1; taking it from x.detach()
// says so, and keeps max's backward (and its tie rule) out of the graph.
Variable row_max(const Variable& x) { return max(x.detach(), {-1}, /*keepdim=*/true); }
}  // namespace

// y = exp(x - max) / Σ exp(x - max)
Variable softmax(const Variable& x) {
    const Variable e = exp(x - row_max(x));     // (..., D), every entry in (0, 1]
    return e / sum(e, {-1}, /*keepdim=*/true);  // (..., D) / (..., 1)
}

// y = (x - max) - log Σ exp(x - max)
Variable log_softmax(const Variable& x) {
    const Variable z = x - row_max(x);                    // (..., D)
    return z - log(sum(exp(z), {-1}, /*keepdim=*/true));  // the log of a sum ≥ 1: never log 0
}

// y = (x - mean) / √(var + eps) * weight + bias, var biased (÷D, as PyTorch's LayerNorm)
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps) {
    if (!(eps >= 0)) fail<ValueError>("layer_norm: eps must be >= 0, got {}", eps);
    const Variable mu = mean(x, {-1}, /*keepdim=*/true);                        // (..., 1)
    const Variable var_b = var(x, {-1}, /*unbiased=*/false, /*keepdim=*/true);  // (..., 1)
    Variable y = (x - mu) / sqrt(var_b + eps);                                  // x̂ (..., D)
    if (weight.defined()) y = y * weight;                                       // (..., D) ⊙ (D)
    if (bias.defined()) y = y + bias;
    return y;
}

// loss = -Σ_v q_v log_softmax(logits)_v with q a constant tensor built from the targets
Variable cross_entropy(const Variable& logits, const Tensor& targets, const CrossEntropyOptions& options) {
    const int64_t N = check_cross_entropy(logits.value(), targets, options);
    const int64_t V = logits.size(-1);
    const double eps = options.label_smoothing;

    // q (..., V): the smoothed one-hot target of each row, (1-ε)·onehot + ε/V,
    // and a row of zeros where the target is ignore_index, so that row adds 0.
    const std::vector<int64_t> t = targets.to_vector<int64_t>();
    std::vector<double> q(static_cast<size_t>(N * V), 0.0);
    for (int64_t n = 0; n < N; ++n) {
        if (t[n] == options.ignore_index) continue;
        if (t[n] < 0 || t[n] >= V) fail<IndexError>("cross_entropy: target {} out of range for {} classes", t[n], V);
        for (int64_t v = 0; v < V; ++v) q[n * V + v] = eps / static_cast<double>(V);
        q[n * V + t[n]] += 1.0 - eps;
    }
    const Variable qv(core::tensor(q, logits.shape(), logits.dtype()));  // a constant: no gradient

    const Variable rows = -sum(qv * composed::log_softmax(logits), {-1});  // (...)
    switch (options.reduction) {
        case Reduction::none: return rows;
        case Reduction::sum: return sum(rows);
        case Reduction::mean: return sum(rows) / mean_divisor(targets, options.ignore_index);
    }
    fail<ValueError>("cross_entropy: unknown reduction");
}

}  // namespace composed

// ---- fused multi-head attention --------------------------------------------------------------

// out = concat_h( dropout(masked_softmax(q_h k_hᵀ / √d)) v_h )
Variable multi_head_attention(const Variable& q, const Variable& k, const Variable& v, int64_t num_heads,
                              const Tensor& valid_lens, const Tensor& keep, Tensor* weights) {
    if (!q.defined() || !k.defined() || !v.defined())
        fail<ValueError>("multi_head_attention: q, k and v must be defined");
    if (!(k.shape() == v.shape()))
        fail<ShapeError>("multi_head_attention: keys {} and values {} must have one shape", core::shape_str(k.shape()),
                         core::shape_str(v.shape()));
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1) / std::max<int64_t>(num_heads, 1)));
    const Tensor P = core::attention_probs(q.value(), k.value(), valid_lens, num_heads, scale);  // (B, H, T, S)
    if (keep.defined() && !(keep.shape() == P.shape()))
        fail<ShapeError>("multi_head_attention: dropout mask {} for weights {}", core::shape_str(keep.shape()),
                         core::shape_str(P.shape()));
    if (weights) *weights = P;
    // saved: the three inputs, P and the dropout mask as bits (backward
    // recomputes nothing but the products). The output, P v per head, is
    // made again from them for the output projection's backward (set_remake).
    const c::PackedMask mask(keep);
    Variable out = record("multi_head_attention", core::attention_values(P, v.value(), keep), {q, k, v},
                          [Q = q.value(), K = k.value(), V = v.value(), P, mask, scale](const Tensor& dO, Grads& g) {
                              core::AttentionGrads d = core::attention_backward(dO, Q, K, V, P, mask.unpack(), scale);
                              if (g.wanted(0)) g[0] = std::move(d.dQ);
                              if (g.wanted(1)) g[1] = std::move(d.dK);
                              if (g.wanted(2)) g[2] = std::move(d.dV);
                          });
    set_remake(out, [P, V = v.value(), mask] { return core::attention_values(P, V, mask.unpack()); });
    return out;
}

// ---- the output layer and its loss, fused -------------------------------------------------------

// L = Σ_n w_n CE(x_n Wᵀ + b, t_n)
Variable linear_cross_entropy(const Variable& x, const Variable& W, const Variable& b, const Tensor& targets,
                              const Tensor& weights, double label_smoothing) {
    if (!x.defined() || !W.defined()) fail<ValueError>("linear_cross_entropy: x and W must be defined");
    const bool grads = needs_grad({&x, &W, &b});
    core::LinearCrossEntropy r = core::linear_cross_entropy(x.value(), W.value(), b.defined() ? b.value() : Tensor(),
                                                            targets, weights, label_smoothing, grads);
    // saved: the gradients themselves, already computed; backward only scales them by dL
    return record("linear_cross_entropy", core::scalar(r.loss, x.dtype()), {x, W, b},
                  [dx = r.dx, dW = r.dW, db = r.db](const Tensor& dL, Grads& g) {
                      const double s = dL.item();
                      if (g.wanted(0)) g[0] = s == 1.0 ? dx : c::mul(dx, s);
                      if (g.wanted(1)) g[1] = s == 1.0 ? dW : c::mul(dW, s);
                      if (g.wanted(2) && db.defined()) g[2] = s == 1.0 ? db : c::mul(db, s);
                  });
}

}  // namespace tformer::autograd
