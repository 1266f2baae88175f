/// \file
/// Attention scoring functions and multi-head attention.
///
/// ```
///   masked_softmax       seed 003, 注意力评分函数 / 掩蔽softmax操作 (valid lengths),
///                        and seed 002, 2.2 ScaleDotProductAttention (boolean masks)
///   AdditiveAttention    seed 003, 加性注意力:  a(q, k) = w_vᵀ tanh(W_q q + W_k k)
///   DotProductAttention  seed 003, 缩放点积注意力: softmax(Q Kᵀ / √d) V
///   MultiHeadAttention   seed 000, 代码实现 / 多头注意力 (d2l's class, with
///                        transpose_qkv and transpose_output); seed 004's
///                        MultiHeadedAttention is the same layer with biases
///   subsequent_mask      seed 004 (subsequent_mask), seed 002 (make_no_peak_mask)
///   causal_valid_lens    seed 000, DecoderBlock.forward (dec_valid_lens)
/// ```
///
/// Masks. Every attention here takes one `mask` tensor, in whichever form the
/// document uses:
///   - int64 (or float holding whole numbers): valid lengths, d2l style. 1-D
///     (B): the first valid_lens[b] keys count for every query of batch
///     element b; 2-D (B, T): one length per query row.
///   - bool: a keep-mask broadcast to the scores (B, T, S), true = attend,
///     as seed 002's pad mask and no-peek mask and seed 004's subsequent_mask.
///   - undefined: attend to every key.
/// Masked weights are exactly 0. A query with nothing to attend to gets all
/// zero weights (d2l's -1e6 fill would spread it uniformly over the padding;
/// see core::masked_softmax).
///
/// Dimension letters: B batch, T query steps, S key steps, D hidden
/// (num_hiddens), H heads, d = D / H the per-head size, v the value size.
#pragma once

#include "nn/layers.hpp"
#include "nn/module.hpp"

#include "core/check.hpp"
#include "core/random.hpp"

#include <memory>
#include <span>
#include <vector>

namespace tformer::nn {

/// Softmax over the last dim of X (..., T, S) keeping only the entries the
/// mask allows (see the header comment for the three forms of `mask`).
/// Calls autograd::masked_softmax (valid lengths), masked_softmax_by_mask
/// (bool) or softmax (undefined mask). Write nn::masked_softmax: unqualified,
/// argument-dependent lookup also finds autograd::masked_softmax.
Variable masked_softmax(const Variable& X, const core::Tensor& mask);

/// The no-peek mask of seed 004's subsequent_mask(size): bool (1, size, size),
/// true where key j ≤ query i, so position i sees positions 0..i only.
core::Tensor subsequent_mask(int64_t size);

/// d2l's dec_valid_lens: int64 (batch_size, num_steps) whose every row is
/// [1, 2, ..., num_steps]; the valid-length form of subsequent_mask.
core::Tensor causal_valid_lens(int64_t batch_size, int64_t num_steps);

// ---- scaled dot-product attention ------------------------------------------------------

/// softmax(Q Kᵀ / √d) V with a mask and dropout on the weights (seed 003,
/// 缩放点积注意力; d2l's DotProductAttention; seed 002's ScaleDotProductAttention).
class DotProductAttention : public Module {
public:
    /// The arguments of d2l's DotProductAttention(dropout).
    struct Options {
        double dropout = 0.0;  ///< dropout probability on the attention weights
    };
    /// A layer whose dropout draws from `gen`, which must outlive it.
    explicit DotProductAttention(Options options, core::Generator& gen = core::default_generator());

    /// queries (B, T, d), keys (B, S, d), values (B, S, v) -> (B, T, v).
    /// Also 4-D, (B, H, T, d) ... -> (B, H, T, v), as seed 002 calls it.
    Variable forward(const Variable& queries, const Variable& keys, const Variable& values,
                     const core::Tensor& mask = {});
    /// Calls forward(queries, keys, values, mask).
    Variable operator()(const Variable& queries, const Variable& keys, const Variable& values,
                        const core::Tensor& mask = {}) {
        return forward(queries, keys, values, mask);
    }

    /// All heads at once, fused (core/attention.hpp): the projections q (B, T,
    /// D), k and v (B, S, D) are split into num_heads heads, attend, and come
    /// back concatenated (B, T, D); valid_lens (B) or (B, T) int64, or
    /// undefined. Equals transpose_output(forward(transpose_qkv(q), ...)),
    /// dropout included; attention_weights becomes (B·H, T, S) as there.
    Variable forward_heads(const Variable& q, const Variable& k, const Variable& v, int64_t num_heads,
                           const core::Tensor& valid_lens);

    Options options;  ///< the arguments it was built with
    /// (B, T, S) or (B, H, T, S): the weights of the last forward, before
    /// dropout, without a graph (for heatmaps). It shares storage with the
    /// softmax output the graph saved, as torch's detach() does: read it,
    /// or clone() it before writing.
    core::Tensor attention_weights;

private:
    std::shared_ptr<Dropout> dropout_;
};

// ---- additive attention ----------------------------------------------------------------------

/// a(q, k) = w_vᵀ tanh(W_q q + W_k k) (seed 003, 加性注意力; d2l's
/// AdditiveAttention), for queries and keys of different sizes.
/// Children, in d2l's order: W_k, W_q, w_v (Linear without bias), dropout.
class AdditiveAttention : public Module {
public:
    /// The arguments of d2l's AdditiveAttention(key_size, query_size, num_hiddens, dropout).
    struct Options {
        int64_t key_size = 0;     ///< k, the size of a key
        int64_t query_size = 0;   ///< q, the size of a query
        int64_t num_hiddens = 0;  ///< h, the hidden units of the one-layer MLP
        double dropout = 0.0;     ///< dropout probability on the attention weights
    };
    /// A layer with W_k, W_q, w_v drawn from `gen`, which must outlive it (dropout draws from it too).
    explicit AdditiveAttention(Options options, core::Generator& gen = core::default_generator());

    /// queries (B, T, query_size), keys (B, S, key_size), values (B, S, v) -> (B, T, v).
    Variable forward(const Variable& queries, const Variable& keys, const Variable& values,
                     const core::Tensor& mask = {});
    /// Calls forward(queries, keys, values, mask).
    Variable operator()(const Variable& queries, const Variable& keys, const Variable& values,
                        const core::Tensor& mask = {}) {
        return forward(queries, keys, values, mask);
    }

    Options options;              ///< the arguments it was built with
    std::shared_ptr<Linear> W_k;  ///< key_size -> num_hiddens
    std::shared_ptr<Linear> W_q;  ///< query_size -> num_hiddens
    std::shared_ptr<Linear> w_v;  ///< num_hiddens -> 1
    /// (B, T, S): the weights of the last forward, before dropout, without a graph.
    core::Tensor attention_weights;

private:
    std::shared_ptr<Dropout> dropout_;
};

// ---- multi-head attention -----------------------------------------------------------------------

/// seed 000's transpose_qkv: X (B, T, D) -> (B·H, T, D/H), head h of batch
/// element b at row b·H + h. Reshape to (B, T, H, d), permute to (B, H, T, d),
/// reshape to (B·H, T, d). Throws ValueError when D is not divisible by H.
Variable transpose_qkv(const Variable& X, int64_t num_heads);

/// seed 000's transpose_output, the inverse: X (B·H, T, d) -> (B, T, H·d).
Variable transpose_output(const Variable& X, int64_t num_heads);

/// The rows of (B·H, ., d) head tensors that hold batch elements `rows`, in
/// order: r·H, r·H + 1, ..., r·H + H - 1 for each r (what transpose_qkv put
/// there); for index_select and KVCache::select_rows.
std::vector<int64_t> head_rows(std::span<const int64_t> rows, int64_t num_heads);

/// Projected keys and values of one MultiHeadAttention, kept between the
/// steps of step-by-step decoding (the projected form of d2l's state[2][i]).
/// Plain tensors without a graph: decoding runs under NoGradGuard.
///
/// d2l grows its cache with torch.cat, which copies every cached step at
/// every step. Here keys and values are views of the first S steps of a
/// longer buffer (B·H, capacity, d), and append() writes a step's new keys
/// into the room after them; when the room runs out the buffer doubles. So
/// a step copies only its own keys and values. The keys are also kept
/// transposed, (B·H, d, capacity), which the scores of a decoding step read
/// as they are (core::cached_attention's keys_t) instead of transposing the
/// whole cache again at every step. A copy of a KVCache shares
/// the steps cached so far but not the room: its first append() moves it to
/// a buffer of its own, so two copies never write over each other.
struct KVCache {
    core::Tensor keys;    ///< (B·H, S so far, d) = transpose_qkv(W_k(keys seen so far))
    core::Tensor values;  ///< (B·H, S so far, d) = transpose_qkv(W_v(values seen so far))

    /// An empty cache.
    KVCache() = default;
    /// Shares the cached steps, not the room after them (see the struct comment).
    KVCache(const KVCache& other) : keys(other.keys), values(other.values) {}
    /// Shares the cached steps of `other`, not its room.
    KVCache& operator=(const KVCache& other) {
        keys = other.keys, values = other.values;
        key_buffer_ = value_buffer_ = keys_t_buffer_ = core::Tensor();
        return *this;
    }
    /// Takes the cache, room included.
    KVCache(KVCache&&) = default;
    /// Takes the cache, room included.
    KVCache& operator=(KVCache&&) = default;
    /// Frees what only this cache holds.
    ~KVCache() = default;

    /// No step has run yet.
    bool empty() const { return !keys.defined(); }
    /// Key steps cached so far.
    int64_t steps() const { return keys.defined() ? keys.size(1) : 0; }
    /// Steps held before append() has to move to a larger buffer: steps()
    /// when keys or values were set from outside (beam search reordering them).
    int64_t capacity() const;
    /// Forgets everything (before decoding a new sentence).
    void clear();
    /// Adds the steps of projected keys k and values v, both (B, S_new, H·d)
    /// as W_k and W_v give them, split into heads as transpose_qkv splits them.
    /// The cache must be empty or hold B·H rows of d; ShapeError otherwise.
    void append(const core::Tensor& k, const core::Tensor& v, int64_t num_heads);
    /// Row i becomes the old row rows[i], each in [0, B·H) (beam search
    /// following its hypotheses), keeping the room and the transposed keys,
    /// so the next append() need not move. IndexError for a row out of range.
    void select_rows(const std::vector<int64_t>& rows);
    /// The keys transposed, (B·H, d, capacity), zeros past steps(); undefined
    /// when keys or values were set from outside since the last append().
    core::Tensor keys_transposed() const;

private:
    bool in_buffer() const;
    core::Tensor key_buffer_, value_buffer_;  // (B·H, capacity, d); keys/values view their first S steps
    core::Tensor keys_t_buffer_;              // (B·H, d, capacity): keys_buffer_ transposed, zeros past S
};

/// Multi-head attention (seed 000's d2l class): H heads of scaled dot-product
/// attention on learned projections, concatenated and projected again,
///   head_i = attention(Q W_q,iᵀ, K W_k,iᵀ, V W_v,iᵀ),  out = [head_1 ... head_H] W_oᵀ.
/// All heads run as one batched attention over (B·H, ., d) tensors.
/// Children, named as in d2l so parameters are "W_q.weight" etc.:
/// attention (DotProductAttention), W_q, W_k, W_v, W_o.
class MultiHeadAttention : public Module {
public:
    /// The arguments of d2l's MultiHeadAttention, plus seed 004's bias and the fused kernel.
    struct Options {
        int64_t key_size = 0;     ///< the size of a key (the last dim of `keys`)
        int64_t query_size = 0;   ///< the size of a query (the last dim of `queries`)
        int64_t value_size = 0;   ///< the size of a value (the last dim of `values`)
        int64_t num_hiddens = 0;  ///< D, split into num_heads heads of D/H
        int64_t num_heads = 1;    ///< H
        double dropout = 0.0;     ///< on the attention weights
        bool bias = false;        ///< d2l: no bias; seed 004: with bias
        /// Attend with the fused kernel (DotProductAttention::forward_heads)
        /// when the mask is valid lengths or none; the composed ops otherwise.
        bool fused = false;
    };
    /// A layer with W_q, W_k, W_v, W_o drawn from `gen`, which must outlive it (dropout draws from it too).
    /// Throws ValueError when num_hiddens is not divisible by num_heads.
    explicit MultiHeadAttention(Options options, core::Generator& gen = core::default_generator());

    /// queries (B, T, query_size), keys (B, S, key_size), values (B, S,
    /// value_size) -> (B, T, num_hiddens). Valid lengths (B) or (B, T) are
    /// repeated for every head (d2l's repeat_interleave); a bool mask of
    /// shape (S), (T, S), (B|1, T|1, S) or (B|1, H|1, T|1, S) is applied to
    /// every head (a 3-D mask gets a head dim at 1, as seed 004 does).
    Variable forward(const Variable& queries, const Variable& keys, const Variable& values,
                     const core::Tensor& mask = {});
    /// Calls forward(queries, keys, values, mask).
    Variable operator()(const Variable& queries, const Variable& keys, const Variable& values,
                        const core::Tensor& mask = {}) {
        return forward(queries, keys, values, mask);
    }

    /// One step of incremental decoding. Projects only new_keys / new_values
    /// (B, T_new, key_size / value_size) with W_k / W_v, appends them to the
    /// cache along the step dim (an empty cache starts with them), and
    /// attends from queries (B, T, query_size) to every cached step.
    ///   self-attention: append = true; feeding tokens one at a time with
    ///     queries = new_keys = new_values = the current step (B, 1, D) and no
    ///     mask gives the outputs of forward() with the no-peek mask.
    ///   cross-attention to the encoder outputs: append = false; the first
    ///     call (empty cache) projects and caches them, later calls reuse
    ///     the cache as is and ignore new_keys / new_values (may be undefined).
    /// `mask` refers to all cached steps (S = cache.steps() after appending):
    /// e.g. enc_valid_lens for cross-attention, none for one query at a time.
    /// The cache holds values without a graph, so gradients do not reach
    /// W_k / W_v through it: train with forward(). With `fused`, in eval mode
    /// and under NoGradGuard, the heads are read from the cache in place
    /// (core::cached_attention) instead of by one product per head.
    /// kv_rows (B entries, with append = false): query batch element b reads
    /// the cached batch element kv_rows[b], the cache holding any number of
    /// them (beam search: a sentence's cross-attention cache, shared by its
    /// hypotheses).
    Variable forward_step(const Variable& queries, const Variable& new_keys, const Variable& new_values,
                          const core::Tensor& mask, KVCache& cache, bool append = true,
                          std::span<const int64_t> kv_rows = {});

    /// (B·H, T, S): the last weights of the inner attention, as d2l's
    /// blk.attention.attention.attention_weights.
    const core::Tensor& attention_weights() const { return attention->attention_weights; }

    Options options;  ///< the arguments it was built with
    /// The scaled dot-product attention every head runs (child "attention").
    std::shared_ptr<DotProductAttention> attention;
    std::shared_ptr<Linear> W_q;  ///< query_size -> num_hiddens
    std::shared_ptr<Linear> W_k;  ///< key_size -> num_hiddens
    std::shared_ptr<Linear> W_v;  ///< value_size -> num_hiddens
    std::shared_ptr<Linear> W_o;  ///< num_hiddens -> num_hiddens

private:
    /// A ShapeCheck that knows query_size, key_size and value_size, for the forwards' first lines.
    ShapeCheck input_sizes() const;
    /// The mask in the (B·H, ...) layout of the heads.
    core::Tensor mask_for_heads(const core::Tensor& mask, int64_t batch) const;
};

}  // namespace tformer::nn
