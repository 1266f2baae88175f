/// \file
/// Fused multi-head attention: seed 000's transpose_qkv, scores, masked
/// softmax, weighted sum and transpose_output in one pass per (batch, head),
/// reading the heads straight out of the projections and writing them
/// straight into the concatenated output, with no copies in between.
///
/// The composed version (nn::MultiHeadAttention without `fused`: reshape,
/// permute, batched matmul, masked_softmax, matmul, permute, reshape) is the
/// one the tutorials teach and the oracle the tests compare this with.
///
/// Letters: B batch, T query steps, S key steps, H heads, d = D / H per head.
#pragma once

#include "core/tensor.hpp"

#include <span>

namespace tformer::core {

/// P[b, h, t, :] = masked_softmax(scale · Q_bh[t] · K_bhᵀ) where head h of a
/// projection (B, T, D) is its columns h·d .. h·d + d - 1 (transpose_qkv),
/// and a row sees only the first valid_lens keys: valid_lens undefined (all
/// keys), (B) per batch element or (B, T) per query, int64; a length of 0
/// gives a row of zeros, as core::masked_softmax.
/// Q (B, T, D), K (B, S, D) -> P (B, H, T, S). ShapeError / ValueError name
/// the shapes or the bad length.
Tensor attention_probs(const Tensor& Q, const Tensor& K, const Tensor& valid_lens, int64_t num_heads, double scale);

/// O[b, t, h·d + i] = Σ_s P[b, h, t, s] keep[b, h, t, s] V[b, s, h·d + i]:
/// the weighted sum of every head, already concatenated (transpose_output),
/// with the dropout mask keep (its 1/(1-p) scale included; undefined: none)
/// applied to the weights as it goes. P, keep (B, H, T, S), V (B, S, D) ->
/// O (B, T, D).
Tensor attention_values(const Tensor& P, const Tensor& V, const Tensor& keep = Tensor());

/// Both steps for decoding with a KV cache (no backward): queries Q (B, T, D)
/// as above, keys and values cached per head, (B·H, S, d) as nn::KVCache
/// keeps them (row b·H + h is head h of batch element b; read in place
/// whatever the strides of the first two dims, as long as each row of d
/// numbers is contiguous, else copied first), valid_lens as for
/// attention_probs. Gives O (B, T, D) and the weights P (B, H, T, S), the
/// numbers attention_probs and attention_values give on the same heads.
struct CachedAttention {
    /// The output O (B, T, D), every head's weighted sum, concatenated.
    Tensor out, weights;  ///< The attention weights P (B, H, T, S).
};
/// Attention of queries Q (B, T, D) over cached keys and values, for one decoding step (see CachedAttention).
///
/// keys_t, when given, holds the same keys transposed, (B·H, d, C) contiguous
/// with C at least S rounded up to a multiple of kKeyChunk (its columns past S
/// initialised, any value: they get no weight), and the scores read it
/// instead of transposing the keys (nn::KVCache keeps it up to date). The
/// numbers are the same either way. kv_rows, when given (B entries), sends
/// batch element b of the queries to batch element kv_rows[b] of the cache,
/// which then holds (B_kv·H, S, d) rows for any B_kv: beam search, whose
/// hypotheses of one sentence share that sentence's encoder keys and values,
/// keeps them once per sentence instead of copying them per hypothesis.
CachedAttention cached_attention(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& valid_lens,
                                 int64_t num_heads, double scale, const Tensor& keys_t = Tensor(),
                                 std::span<const int64_t> kv_rows = {});

/// The keys per vector operation of the attention kernels (see the keys_t argument of cached_attention).
inline constexpr int64_t kKeyChunk = 16;

/// Gradients of both steps at once. P is the softmax output, keep the
/// dropout mask with its 1/(1-p) scale applied to P before the weighted sum
/// (undefined: none), dO (B, T, D) the gradient of O:
///   dV = (P⊙keep)ᵀ dO,  dP = (dO Vᵀ)⊙keep,  dS = P ⊙ (dP - Σ_s P dP),
///   dQ = scale · dS K,  dK = scale · dSᵀ Q      (per batch element and head)
struct AttentionGrads {
    /// dQ (B, T, D), dK (B, S, D), dV (B, S, D): the gradients of the queries, keys and values.
    /// @{
    Tensor dQ, dK, dV;
    /// @}
};
/// The gradients of attention_probs and attention_values together (see AttentionGrads for the formulas).
AttentionGrads attention_backward(const Tensor& dO, const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& P,
                                  const Tensor& keep, double scale);

}  // namespace tformer::core
