#include "nn/attention.hpp"

#include "autograd/autograd.hpp"
#include "core/attention.hpp"
#include "core/check.hpp"
#include "core/elementwise.hpp"
#include "core/index.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace tformer::nn {

using core::DType;
using core::Shape;
using core::shape_str;

Variable masked_softmax(const Variable& X, const core::Tensor& mask) {
    if (!mask.defined()) return autograd::softmax(X);
    if (mask.dtype() == DType::boolean) return autograd::masked_softmax_by_mask(X, mask);
    return autograd::masked_softmax(X, mask);
}

core::Tensor subsequent_mask(int64_t size) {
    if (size < 0) fail<ValueError>("subsequent_mask: size {} must be >= 0", size);
    // keep[i, j] = (j <= i): query i sees keys 0..i
    const Tensor steps = core::arange(size, DType::int64);
    return core::ge(steps.unsqueeze(1), steps.unsqueeze(0)).unsqueeze(0);  // (1, T, T)
}

core::Tensor causal_valid_lens(int64_t batch_size, int64_t num_steps) {
    if (batch_size < 0 || num_steps < 0)
        fail<ValueError>("causal_valid_lens: batch_size {} and num_steps {} must be >= 0", batch_size, num_steps);
    // row b = [1, 2, ..., num_steps]: query t sees keys 0..t
    const Tensor row = core::arange(1, static_cast<double>(num_steps) + 1, 1, DType::int64);  // (T)
    return row.unsqueeze(0).expand({batch_size, num_steps}).contiguous();                     // (B, T)
}

// ---- scaled dot-product attention ------------------------------------------------------

DotProductAttention::DotProductAttention(Options options_, core::Generator& gen)
    : Module("DotProductAttention"), options(options_) {
    dropout_ = register_module("dropout", std::make_shared<Dropout>(Dropout::Options{.p = options.dropout}, gen));
}

Variable DotProductAttention::forward(const Variable& queries, const Variable& keys, const Variable& values,
                                      const core::Tensor& mask) {
    const int nd = queries.dim();
    check<ShapeError>(nd == 3 || nd == 4, "DotProductAttention: queries of shape {} must be (B, T, d) or (B, H, T, d)",
                      queries.shape());
    ShapeCheck("DotProductAttention")
        .arg("queries", queries, "... T d")
        .arg("keys", keys, "... S d")
        .arg("values", values, "... S v");

    // scores = Q Kᵀ / √d: Kᵀ is a transposed view, which matmul hands to
    // GEMM as a transpose flag. Dividing by √d keeps the scores' variance
    // near 1 whatever d is (seed 003: a dot product of d unit-variance
    // terms has variance d), so the softmax does not saturate.
    const double d = static_cast<double>(queries.size(-1));
    Variable keys_t = autograd::transpose(keys, nd - 2, nd - 1);         // (B, d, S)
    Variable scores = autograd::matmul(queries, keys_t) / std::sqrt(d);  // (B, T, S)
    Variable weights = nn::masked_softmax(scores, mask);                 // (B, T, S)
    // Values are never modified in place, so keeping the handle is a copy
    // that costs nothing; without the Variable, no graph is kept alive.
    attention_weights = weights.value();
    return autograd::matmul((*dropout_)(weights), values);  // (B, T, v)
}

Variable DotProductAttention::forward_heads(const Variable& q, const Variable& k, const Variable& v, int64_t num_heads,
                                            const core::Tensor& valid_lens) {
    const int64_t B = q.size(0), T = q.size(1), S = k.size(1);
    const core::Tensor keep = dropout_->keep_mask({B * num_heads, T, S}, q.dtype());  // as forward() draws it
    core::Tensor weights;
    Variable out = autograd::multi_head_attention(q, k, v, num_heads, valid_lens,
                                                  keep.defined() ? keep.reshape({B, num_heads, T, S}) : keep, &weights);
    attention_weights = weights.reshape({B * num_heads, T, S});
    return out;  // (B, T, D)
}

// ---- additive attention ----------------------------------------------------------------------

AdditiveAttention::AdditiveAttention(Options options_, core::Generator& gen)
    : Module("AdditiveAttention"), options(options_) {
    if (options.key_size <= 0 || options.query_size <= 0 || options.num_hiddens <= 0)
        fail<ValueError>("AdditiveAttention: key_size={}, query_size={} and num_hiddens={} must be positive",
                         options.key_size, options.query_size, options.num_hiddens);
    W_k = register_module(
        "W_k",
        std::make_shared<Linear>(
            Linear::Options{.in_features = options.key_size, .out_features = options.num_hiddens, .bias = false}, gen));
    W_q = register_module("W_q", std::make_shared<Linear>(Linear::Options{.in_features = options.query_size,
                                                                          .out_features = options.num_hiddens,
                                                                          .bias = false},
                                                          gen));
    w_v = register_module(
        "w_v", std::make_shared<Linear>(
                   Linear::Options{.in_features = options.num_hiddens, .out_features = 1, .bias = false}, gen));
    dropout_ = register_module("dropout", std::make_shared<Dropout>(Dropout::Options{.p = options.dropout}, gen));
}

Variable AdditiveAttention::forward(const Variable& queries, const Variable& keys, const Variable& values,
                                    const core::Tensor& mask) {
    ShapeCheck("AdditiveAttention")
        .known("query_size", options.query_size)
        .known("key_size", options.key_size)
        .arg("queries", queries, "B T query_size")
        .arg("keys", keys, "B S key_size")
        .arg("values", values, "B S v");

    Variable q = (*W_q)(queries);  // (B, T, h)
    Variable k = (*W_k)(keys);     // (B, S, h)
    // features[b, t, s] = tanh(W_q q_t + W_k k_s): every query meets every key
    // by broadcasting (B, T, 1, h) + (B, 1, S, h), the MLP's hidden layer.
    Variable features = autograd::tanh(autograd::unsqueeze(q, 2) + autograd::unsqueeze(k, 1));  // (B, T, S, h)
    // a(q, k) = w_vᵀ features: w_v has one output, which squeeze removes
    Variable scores = autograd::squeeze((*w_v)(features), 3);  // (B, T, S)
    Variable weights = nn::masked_softmax(scores, mask);       // (B, T, S)
    attention_weights = weights.value();
    return autograd::matmul((*dropout_)(weights), values);  // (B, T, v)
}

// ---- multi-head attention -----------------------------------------------------------------------

Variable transpose_qkv(const Variable& X, int64_t num_heads) {
    ShapeCheck("transpose_qkv").arg("X", X, "B T num_hiddens");
    check(num_heads > 0 && X.size(2) % num_heads == 0,
          "transpose_qkv: num_hiddens={} (X of shape {}) is not divisible by num_heads={}", X.size(2), X.shape(),
          num_heads);
    const int64_t B = X.size(0), T = X.size(1), d = X.size(2) / num_heads;
    Variable x = autograd::reshape(X, {B, T, num_heads, d});  // (B, T, H, d): head h owns columns h·d ..
    x = autograd::permute(x, {0, 2, 1, 3});                   // (B, H, T, d)
    return autograd::reshape(x, {B * num_heads, T, d});       // (B·H, T, d)
}

Variable transpose_output(const Variable& X, int64_t num_heads) {
    ShapeCheck("transpose_output").arg("X", X, "B·H T d");
    check(num_heads > 0 && X.size(0) % num_heads == 0,
          "transpose_output: the first dimension of X {} is not divisible by num_heads={}", X.shape(), num_heads);
    const int64_t B = X.size(0) / num_heads, T = X.size(1), d = X.size(2);
    Variable x = autograd::reshape(X, {B, num_heads, T, d});  // (B, H, T, d)
    x = autograd::permute(x, {0, 2, 1, 3});                   // (B, T, H, d)
    return autograd::reshape(x, {B, T, num_heads * d});       // (B, T, D): the heads side by side
}

MultiHeadAttention::MultiHeadAttention(Options options_, core::Generator& gen)
    : Module("MultiHeadAttention"), options(options_) {
    if (options.num_heads <= 0 || options.num_hiddens <= 0 || options.num_hiddens % options.num_heads != 0)
        fail<ValueError>("MultiHeadAttention: num_hiddens={} is not divisible by num_heads={}", options.num_hiddens,
                         options.num_heads);
    if (options.key_size <= 0 || options.query_size <= 0 || options.value_size <= 0)
        fail<ValueError>("MultiHeadAttention: key_size={}, query_size={} and value_size={} must be positive",
                         options.key_size, options.query_size, options.value_size);
    auto projection = [&](int64_t in, int64_t out) {
        return std::make_shared<Linear>(Linear::Options{.in_features = in, .out_features = out, .bias = options.bias},
                                        gen);
    };
    const DotProductAttention::Options attention_options{.dropout = options.dropout};
    attention = register_module("attention", std::make_shared<DotProductAttention>(attention_options, gen));
    W_q = register_module("W_q", projection(options.query_size, options.num_hiddens));
    W_k = register_module("W_k", projection(options.key_size, options.num_hiddens));
    W_v = register_module("W_v", projection(options.value_size, options.num_hiddens));
    W_o = register_module("W_o", projection(options.num_hiddens, options.num_hiddens));
}

ShapeCheck MultiHeadAttention::input_sizes() const {
    ShapeCheck sizes("MultiHeadAttention");
    sizes.known("query_size", options.query_size)
        .known("key_size", options.key_size)
        .known("value_size", options.value_size);
    return sizes;
}

core::Tensor MultiHeadAttention::mask_for_heads(const core::Tensor& mask, int64_t batch) const {
    if (!mask.defined()) return mask;
    const int64_t H = options.num_heads;
    if (mask.dtype() != DType::boolean) {
        // Valid lengths (B) or (B, T): row b·H + h of the heads belongs to batch
        // element b, so each length is repeated H times in a row, which is
        // torch.repeat_interleave(valid_lens, num_heads, dim=0) in seed 000.
        if (mask.dim() < 1 || mask.dim() > 2 || mask.size(0) != batch)
            fail<ShapeError>("MultiHeadAttention: valid_lens of shape {} must be (batch={}) or (batch={}, query steps)",
                             shape_str(mask.shape()), batch, batch);
        Shape repeated = mask.shape();  // (B, H[, T])
        repeated.insert(1, H);
        Shape flat = mask.shape();  // (B·H[, T])
        flat[0] *= H;
        return mask.unsqueeze(1).expand(repeated).reshape(flat);
    }
    // A bool mask of 1 or 2 dims, (S) or (T, S), already broadcasts to every
    // (B·H, T, S) score. A 3-D mask (B, T, S) gets a head dim, (B, 1, T, S),
    // as seed 004's mask.unsqueeze(1); a 4-D one (B, H, T, S) is seed 002's.
    if (mask.dim() <= 2) return mask;
    if (mask.dim() > 4)
        fail<ShapeError>("MultiHeadAttention: a bool mask of shape {} has more than 4 dimensions",
                         shape_str(mask.shape()));
    const Tensor m = mask.dim() == 3 ? mask.unsqueeze(1) : mask;  // (B|1, H|1, T|1, S|1)
    if ((m.size(0) != 1 && m.size(0) != batch) || (m.size(1) != 1 && m.size(1) != H))
        fail<ShapeError>("MultiHeadAttention: bool mask of shape {} does not fit batch={} and num_heads={}",
                         shape_str(mask.shape()), batch, H);
    return m.expand({batch, H, m.size(2), m.size(3)}).reshape({batch * H, m.size(2), m.size(3)});  // (B·H, T|1, S|1)
}

Variable MultiHeadAttention::forward(const Variable& queries, const Variable& keys, const Variable& values,
                                     const core::Tensor& mask) {
    const ShapeCheck dims = input_sizes()
                                .arg("queries", queries, "B T query_size")
                                .arg("keys", keys, "B S key_size")
                                .arg("values", values, "B S value_size");
    const int64_t B = dims["B"], H = options.num_heads;

    if (options.fused && (!mask.defined() || mask.dtype() == DType::int64))  // the same, in one kernel
        return (*W_o)(attention->forward_heads((*W_q)(queries), (*W_k)(keys), (*W_v)(values), H, mask));
    Variable q = transpose_qkv((*W_q)(queries), H);                   // (B·H, T, d)
    Variable k = transpose_qkv((*W_k)(keys), H);                      // (B·H, S, d)
    Variable v = transpose_qkv((*W_v)(values), H);                    // (B·H, S, d)
    Variable heads = (*attention)(q, k, v, mask_for_heads(mask, B));  // (B·H, T, d)
    return (*W_o)(transpose_output(heads, H));                        // (B, T, D)
}

std::vector<int64_t> head_rows(std::span<const int64_t> rows, int64_t num_heads) {
    std::vector<int64_t> out;
    out.reserve(rows.size() * static_cast<size_t>(num_heads));
    for (int64_t r : rows)
        for (int64_t h = 0; h < num_heads; ++h) out.push_back(r * num_heads + h);
    return out;
}

// ---- KVCache -------------------------------------------------------------------------------

namespace {
// t views the first steps of buffer (B·H, capacity, d): keys and values as append() leaves them
bool views_start_of(const core::Tensor& t, const core::Tensor& buffer) {
    return t.defined() && buffer.defined() && t.shares_storage(buffer) && t.offset() == buffer.offset() &&
           t.strides() == buffer.strides() && t.size(0) == buffer.size(0) && t.size(1) <= buffer.size(1);
}
}  // namespace

bool KVCache::in_buffer() const {
    return views_start_of(keys, key_buffer_) && views_start_of(values, value_buffer_) && keys_t_buffer_.defined();
}

int64_t KVCache::capacity() const { return in_buffer() ? key_buffer_.size(1) : steps(); }

core::Tensor KVCache::keys_transposed() const { return in_buffer() ? keys_t_buffer_ : core::Tensor(); }

void KVCache::clear() { keys = values = key_buffer_ = value_buffer_ = keys_t_buffer_ = core::Tensor(); }

void KVCache::append(const core::Tensor& k, const core::Tensor& v, int64_t num_heads) {
    const int64_t H = num_heads;
    if (!k.defined() || !v.defined() || k.dim() != 3 || !(v.shape() == k.shape()) || v.dtype() != k.dtype() || H < 1 ||
        k.size(2) % H != 0)
        fail<ShapeError>(
            "KVCache::append: keys {} and values {} must be one shape (B, S_new, D) with D divisible "
            "by num_heads={}",
            k.defined() ? shape_str(k.shape()) : "undefined", v.defined() ? shape_str(v.shape()) : "undefined", H);
    const int64_t B = k.size(0), S_new = k.size(1), d = k.size(2) / H;
    if (!empty() && (keys.size(0) != B * H || keys.size(2) != d || !(values.shape() == keys.shape()) ||
                     keys.dtype() != k.dtype() || values.dtype() != k.dtype()))
        fail<ShapeError>(
            "KVCache::append: the cache holds keys {} and values {}, which do not fit new steps {} "
            "with num_heads={}",
            shape_str(keys.shape()), shape_str(values.shape()), shape_str(k.shape()), H);
    const int64_t S = steps(), total = S + S_new;
    if (!in_buffer() || total > key_buffer_.size(1)) {
        // a buffer of its own with room: twice the steps so far, at least 16, so
        // short sentences allocate once and long ones a logarithmic number of
        // times; whole chunks of keys, as cached_attention reads the transposed ones
        const int64_t chunk = core::kKeyChunk;
        const int64_t room = (std::max({total, 2 * S, chunk}) + chunk - 1) / chunk * chunk;
        core::Tensor kb = core::Tensor::empty({B * H, room, d}, k.dtype());
        core::Tensor vb = core::Tensor::empty({B * H, room, d}, k.dtype());
        core::Tensor ktb = core::zeros({B * H, d, room}, k.dtype());
        if (S > 0) {
            core::copy_(kb.slice(1, 0, S), keys);
            core::copy_(vb.slice(1, 0, S), values);
            core::copy_(ktb.slice(2, 0, S), keys.transpose(1, 2));
        }
        key_buffer_ = std::move(kb), value_buffer_ = std::move(vb), keys_t_buffer_ = std::move(ktb);
    }
    // (B, S_new, H·d) read as (B, H, S_new, d) into steps [S, total) of each head's rows, a
    // row of d numbers at a time (core::copy_ on the permuted view walks them one index at a
    // time), and the keys into columns [S, total) of the transposed buffer, one number at a time.
    // One loop for the three: a head's row is a handful of numbers (d = 8 in d2l's model), for
    // which a call to memcpy per row cost more than the copying (a tenth of a decoding step).
    const int64_t room = key_buffer_.size(1);
    core::visit_floating(k.dtype(), "KVCache::append", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const core::Tensor kc = k.contiguous(), vc = v.contiguous();
        const T *kp = kc.data<T>(), *vp = vc.data<T>();                // (B, S_new, H, d)
        T *kb = key_buffer_.data<T>(), *vb = value_buffer_.data<T>();  // (B·H, room, d)
        T* kt = keys_t_buffer_.data<T>();                              // (B·H, d, room)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 0; t < S_new; ++t)
                for (int64_t h = 0; h < H; ++h) {
                    const int64_t row = b * H + h;
                    const T* __restrict ks = kp + ((b * S_new + t) * H + h) * d;
                    const T* __restrict vs = vp + ((b * S_new + t) * H + h) * d;
                    T* __restrict kd = kb + (row * room + S + t) * d;
                    T* __restrict vd = vb + (row * room + S + t) * d;
                    T* __restrict ktd = kt + row * d * room + S + t;
                    for (int64_t i = 0; i < d; ++i) {
                        kd[i] = ks[i];
                        vd[i] = vs[i];
                        ktd[i * room] = ks[i];
                    }
                }
    });
    keys = key_buffer_.slice(1, 0, total);
    values = value_buffer_.slice(1, 0, total);
}

void KVCache::select_rows(const std::vector<int64_t>& rows) {
    if (empty()) return;
    const int64_t old_rows = keys.size(0), n = static_cast<int64_t>(rows.size());
    for (int64_t r : rows)
        if (r < 0 || r >= old_rows)
            fail<IndexError>("KVCache::select_rows: row {} out of range for a cache of {} rows", r, old_rows);
    if (!in_buffer()) {  // keys and values set from outside: gather them; the next append() moves
        const core::Tensor index = core::from_vector(rows, {n});
        keys = core::index_select(keys, 0, index);
        values = core::index_select(values, 0, index);
        return;
    }
    // one copy per row of each buffer: the first S steps of keys and values, and of the
    // transposed keys (d, room) what holds steps, zeros past it (initialised throughout). One buffer
    // at a time, each freed as soon as its rows are gathered: at most one buffer more than
    // the cache holds is alive (a beam search of hundreds of rows holds tens of megabytes).
    const int64_t S = steps(), d = keys.size(2), room = key_buffer_.size(1);
    keys = values = core::Tensor();  // views of the buffers, which are replaced
    // Each row of a buffer is `pieces` runs of `len` numbers, `stride` apart, and
    // zeros after each run up to the next (the transposed keys' room)
    const auto gather = [&](core::Tensor& buffer, core::Shape shape, int64_t pieces, int64_t len, int64_t stride) {
        core::Tensor to = core::Tensor::empty(shape, buffer.dtype());
        const int64_t bytes = core::dtype_size(buffer.dtype()), row = room * d * bytes;
        const auto* src = static_cast<const std::byte*>(buffer.raw_data());
        auto* dst = static_cast<std::byte*>(to.raw_data());
        for (int64_t i = 0; i < n; ++i)
            for (int64_t p = 0; p < pieces; ++p) {
                std::byte* at = dst + i * row + p * stride * bytes;
                std::memcpy(at, src + rows[static_cast<size_t>(i)] * row + p * stride * bytes,
                            static_cast<size_t>(len * bytes));
                if (stride > len) std::memset(at + len * bytes, 0, static_cast<size_t>((stride - len) * bytes));
            }
        buffer = std::move(to);
    };
    gather(key_buffer_, {n, room, d}, 1, S * d, 0);
    gather(value_buffer_, {n, room, d}, 1, S * d, 0);
    // the transposed keys: each of the d rows up to the end of the chunk that holds step S
    // (cached_attention reads whole chunks of kKeyChunk keys), zeros after it
    const int64_t held = std::min(room, (S + core::kKeyChunk - 1) / core::kKeyChunk * core::kKeyChunk);
    gather(keys_t_buffer_, {n, d, room}, d, held, room);
    keys = key_buffer_.slice(1, 0, S);
    values = value_buffer_.slice(1, 0, S);
}

Variable MultiHeadAttention::forward_step(const Variable& queries, const Variable& new_keys, const Variable& new_values,
                                          const core::Tensor& mask, KVCache& cache, bool append,
                                          std::span<const int64_t> kv_rows) {
    ShapeCheck dims = input_sizes().arg("queries", queries, "B T query_size");
    const int64_t B = dims["B"], H = options.num_heads;
    if (!kv_rows.empty() && (append || cache.empty()))
        fail<ValueError>(
            "MultiHeadAttention: kv_rows reads a cache that is there: append must be false and the "
            "cache filled");
    check<ShapeError>(
        cache.empty() || !kv_rows.empty() || cache.keys.size(0) == B * H,
        "MultiHeadAttention: the cache holds keys of shape {}, which do not fit batch={} with num_heads={}",
        cache.keys.shape(), B, H);
    if (append || cache.empty()) {
        dims.arg("keys", new_keys, "B S key_size").arg("values", new_values, "B S value_size");
        // Only the new steps are projected; the old ones are in the cache.
        // d2l's torch.cat((state[2][i], X), axis=1), on projected keys, in place
        cache.append((*W_k)(new_keys).value(), (*W_v)(new_values).value(), H);  // (B·H, S_old + S_new, d)
    }

    // Decoding (eval mode, no graph): the fused kernel reads the heads straight from the cache
    if (options.fused && !is_training() && !autograd::grad_enabled() &&
        (!mask.defined() || mask.dtype() == DType::int64)) {
        const Tensor q = (*W_q)(queries).value();  // (B, T, D)
        const double scale = 1.0 / std::sqrt(static_cast<double>(cache.keys.size(2)));
        core::CachedAttention a =
            core::cached_attention(q, cache.keys, cache.values, mask, H, scale, cache.keys_transposed(), kv_rows);
        attention->attention_weights = a.weights.reshape({B * H, q.size(1), cache.keys.size(1)});
        return (*W_o)(Variable(a.out));  // (B, T, D)
    }
    Variable q = transpose_qkv((*W_q)(queries), H);  // (B·H, T, d)
    Tensor cached_keys = cache.keys, cached_values = cache.values;
    if (!kv_rows.empty()) {  // the heads of batch element kv_rows[b] for b
        for (int64_t r : kv_rows)
            if (r < 0 || r * H >= cache.keys.size(0))
                fail<IndexError>("MultiHeadAttention: kv_row {} out of range for a cache of {} batch elements", r,
                                 cache.keys.size(0) / H);
        const Tensor index = core::from_vector(head_rows(kv_rows, H), {B * H});
        cached_keys = core::index_select(cached_keys, 0, index);
        cached_values = core::index_select(cached_values, 0, index);
    }
    const Variable keys(cached_keys), values(cached_values);                  // (B·H, S, d)
    Variable heads = (*attention)(q, keys, values, mask_for_heads(mask, B));  // (B·H, T, d)
    return (*W_o)(transpose_output(heads, H));                                // (B, T, D)
}

}  // namespace tformer::nn
