// The encoder–decoder Transformer of seed 000 (d2l, chapter "Transformer"):
// PositionWiseFFN, AddNorm, EncoderBlock, TransformerEncoder, DecoderBlock,
// TransformerDecoder and EncoderDecoder, with d2l's names for every child
// module, so parameter names read like seed 000's PyTorch model:
//   encoder.blks.block0.attention.W_q.weight
//   decoder.blks.block1.addnorm3.ln.bias
//   decoder.dense.weight
//
// Every constructor takes the generator that initialises the weights and
// drives dropout; the dropout layers keep a pointer to it, so it must
// outlive the module.
//
// Letters in shape comments: B batch, T target (query) steps, S source (key)
// steps, D num_hiddens, V vocabulary.
#pragma once

#include "nn/attention.hpp"
#include "nn/layers.hpp"

#include <vector>

namespace tformer::nn {

/// Seed 000 "基于位置的前馈网络": the same two-layer MLP applied at every
/// position, dense2(relu(dense1(X))); equivalent to two 1-D convolutions with
/// kernel size 1 (seed 000, 001).
class PositionWiseFFN : public UnaryModule {
public:
    struct Options {
        int64_t ffn_num_input = 0;
        int64_t ffn_num_hiddens = 0;
        int64_t ffn_num_outputs = 0;
        /// dense1 and the ReLU as one op, autograd::linear_relu (the same
        /// numbers, bit for bit)
        bool fused = false;
    };
    explicit PositionWiseFFN(Options options, core::Generator& gen = core::default_generator());
    /// X (B, T, ffn_num_input) -> (B, T, ffn_num_outputs)
    Variable forward(const Variable& X) override;

    Options options;
    std::shared_ptr<Linear> dense1, dense2;
    std::shared_ptr<ReLU> relu;
};

/// Seed 000 "残差规范化": ln(dropout(Y) + X), the residual connection
/// followed by layer normalisation.
class AddNorm : public Module {
public:
    struct Options {
        int64_t normalized_shape = 0;
        double dropout = 0.0;
        double eps = 1e-5;
        /// One op, autograd::add_layer_norm, instead of dropout, add and
        /// layer norm (the same numbers, bit for bit)
        bool fused = false;
    };
    explicit AddNorm(Options options, core::Generator& gen = core::default_generator());
    /// X, Y (B, T, D) -> (B, T, D)
    Variable forward(const Variable& X, const Variable& Y);
    Variable operator()(const Variable& X, const Variable& Y) { return forward(X, Y); }

    Options options;
    std::shared_ptr<Dropout> dropout;
    std::shared_ptr<LayerNorm> ln;
};

/// The hyperparameters every block and stack of seed 000 shares.
struct TransformerOptions {
    int64_t key_size = 32;
    int64_t query_size = 32;
    int64_t value_size = 32;
    int64_t num_hiddens = 32;  ///< D
    int64_t norm_shape = 32;   ///< D again (d2l passes [32])
    int64_t ffn_num_input = 32;
    int64_t ffn_num_hiddens = 64;
    int64_t num_heads = 4;
    int64_t num_layers = 2;
    double dropout = 0.1;
    bool use_bias = false;  ///< bias in the attention projections
    /// Multiply token embeddings by √D before adding the positional encoding
    /// (seed 000). Seed 001's classifier adds the raw embeddings (false).
    bool scale_embedding = true;
    /// Every layer through its fused kernel: attention
    /// (MultiHeadAttention::Options::fused, the same numbers up to rounding),
    /// AddNorm, the FFN's bias + ReLU, and embedding × √D + positional
    /// encoding (these three bit for bit). Fewer graph nodes and passes over
    /// memory; the composed ops stay the default, as the tutorials teach them.
    bool fused = false;
};

/// Seed 000 "编码器块": self-attention + AddNorm, then FFN + AddNorm.
class EncoderBlock : public Module {
public:
    explicit EncoderBlock(const TransformerOptions& options, core::Generator& gen = core::default_generator());
    /// X (B, S, D), valid_lens (B) or mask -> (B, S, D)
    Variable forward(const Variable& X, const core::Tensor& valid_lens);

    std::shared_ptr<MultiHeadAttention> attention;
    std::shared_ptr<AddNorm> addnorm1;
    std::shared_ptr<PositionWiseFFN> ffn;
    std::shared_ptr<AddNorm> addnorm2;
};

/// Seed 000 "编码器": embedding × √D + positional encoding, then the blocks
/// (without the √D when options.scale_embedding is false, as seed 001).
class TransformerEncoder : public Module {
public:
    TransformerEncoder(int64_t vocab_size, const TransformerOptions& options,
                       core::Generator& gen = core::default_generator());
    /// X int64 token ids (B, S), valid_lens (B) -> (B, S, D)
    Variable forward(const core::Tensor& X, const core::Tensor& valid_lens);
    /// Self-attention weights of the last forward, one (B·H, S, S) tensor per block.
    std::vector<core::Tensor> attention_weights() const;

    TransformerOptions options;
    std::shared_ptr<Embedding> embedding;
    std::shared_ptr<PositionalEncoding> pos_encoding;
    std::shared_ptr<ModuleList<EncoderBlock>> blks;
};

/// What the decoder carries from step to step (seed 000's `state`): the
/// encoder outputs and valid lengths, and for every block a cache of the
/// projected keys and values already computed, so that predicting one more
/// token costs one token's work (seed 000 re-runs the prefix through W_k and
/// W_v instead; the result is the same).
struct DecoderState {
    Variable enc_outputs;         ///< (B, S, D)
    core::Tensor enc_valid_lens;  ///< (B) or undefined, one per row decoded
    /// Empty, or one entry per row decoded: row b reads the cross-attention
    /// caches of batch element cross_rows[b] (beam search, once those caches
    /// are filled: a sentence's hypotheses share its encoder's keys, kept
    /// once per sentence instead of copied to every hypothesis).
    std::vector<int64_t> cross_rows;
    struct BlockCache {
        KVCache self;   ///< keys/values of the tokens decoded so far
        KVCache cross;  ///< keys/values of the encoder outputs, projected once
    };
    std::vector<BlockCache> caches;  ///< one per block
    int64_t steps_done = 0;          ///< tokens already fed (the next token's position)
};

/// Seed 000 "解码器块": masked self-attention + AddNorm, encoder–decoder
/// attention + AddNorm, FFN + AddNorm.
class DecoderBlock : public Module {
public:
    DecoderBlock(const TransformerOptions& options, int64_t i, core::Generator& gen = core::default_generator());
    /// Teacher forcing over a whole target sequence X (B, T, D): position t
    /// attends to positions ≤ t (d2l's dec_valid_lens = [1, 2, ..., T] per row).
    Variable forward(const Variable& X, const DecoderState& state);
    /// One step (or a chunk of new steps) X (B, t, D) during prediction, using
    /// and extending state.caches[i].
    Variable forward_step(const Variable& X, DecoderState& state);

    int64_t i;  ///< this block's index in the stack
    std::shared_ptr<MultiHeadAttention> attention1;
    std::shared_ptr<AddNorm> addnorm1;
    std::shared_ptr<MultiHeadAttention> attention2;
    std::shared_ptr<AddNorm> addnorm2;
    std::shared_ptr<PositionWiseFFN> ffn;
    std::shared_ptr<AddNorm> addnorm3;
};

/// Seed 000 "解码器": embedding × √D + positional encoding, the blocks, and a
/// final dense layer to vocabulary logits.
class TransformerDecoder : public Module {
public:
    TransformerDecoder(int64_t vocab_size, const TransformerOptions& options,
                       core::Generator& gen = core::default_generator());
    /// The initial state: encoder outputs (B, S, D) and valid lengths (B), empty caches.
    DecoderState init_state(const Variable& enc_outputs, const core::Tensor& enc_valid_lens) const;
    /// Teacher forcing: X int64 (B, T) -> logits (B, T, V).
    Variable forward(const core::Tensor& X, const DecoderState& state);
    /// The same without the final dense layer: (B, T, D), for a loss that
    /// applies dense itself (autograd::linear_cross_entropy).
    Variable forward_hidden(const core::Tensor& X, const DecoderState& state);
    /// Prediction: the next token ids X int64 (B, t) -> logits (B, t, V); advances state.
    Variable forward_step(const core::Tensor& X, DecoderState& state);
    /// The same without the final dense layer: (B, t, D), for a search that
    /// applies dense to a few rows at a time and reads each block of logits
    /// while it is in the cache (tasks/decode).
    Variable forward_step_hidden(const core::Tensor& X, DecoderState& state);
    /// [0][block]: self-attention weights, [1][block]: encoder–decoder attention
    /// weights, of the last forward or step (seed 000's _attention_weights).
    std::vector<std::vector<core::Tensor>> attention_weights() const;

    TransformerOptions options;
    std::shared_ptr<Embedding> embedding;
    std::shared_ptr<PositionalEncoding> pos_encoding;
    std::shared_ptr<ModuleList<DecoderBlock>> blks;
    std::shared_ptr<Linear> dense;
};

/// Seed 000's d2l.EncoderDecoder: encode the source, decode with teacher forcing.
class EncoderDecoder : public Module {
public:
    EncoderDecoder(std::shared_ptr<TransformerEncoder> encoder, std::shared_ptr<TransformerDecoder> decoder);
    /// enc_X (B, S), dec_X (B, T), enc_valid_lens (B) -> logits (B, T, V)
    Variable forward(const core::Tensor& enc_X, const core::Tensor& dec_X, const core::Tensor& enc_valid_lens);
    /// The decoder's last hidden states (B, T, D), before decoder.dense.
    Variable forward_hidden(const core::Tensor& enc_X, const core::Tensor& dec_X, const core::Tensor& enc_valid_lens);

    std::shared_ptr<TransformerEncoder> encoder;
    std::shared_ptr<TransformerDecoder> decoder;
};

}  // namespace tformer::nn
