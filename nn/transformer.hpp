/// \file
/// The encoder–decoder Transformer of seed 000 (d2l, chapter "Transformer"):
/// PositionWiseFFN, AddNorm, EncoderBlock, TransformerEncoder, DecoderBlock,
/// TransformerDecoder and EncoderDecoder, with d2l's names for every child
/// module, so parameter names read like seed 000's PyTorch model:
/// ```
///   encoder.blks.block0.attention.W_q.weight
///   decoder.blks.block1.addnorm3.ln.bias
///   decoder.dense.weight
/// ```
///
/// Every constructor takes the generator that initialises the weights and
/// drives dropout; the dropout layers keep a pointer to it, so it must
/// outlive the module.
///
/// Letters in shape comments: B batch, T target (query) steps, S source (key)
/// steps, D num_hiddens, V vocabulary.
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
    /// The arguments of d2l's PositionWiseFFN(ffn_num_input, ffn_num_hiddens, ffn_num_outputs).
    struct Options {
        int64_t ffn_num_input = 0;    ///< the size of X's last dimension (D)
        int64_t ffn_num_hiddens = 0;  ///< the hidden layer's width (d2l: 64, the Transformer paper: 4·D)
        int64_t ffn_num_outputs = 0;  ///< the size of the output's last dimension (D)
        /// dense1 and the ReLU as one op, autograd::linear_relu (the same
        /// numbers, bit for bit)
        bool fused = false;
    };
    /// A layer with dense1 and dense2 drawn from `gen`.
    explicit PositionWiseFFN(Options options, core::Generator& gen = core::default_generator());
    /// X (B, T, ffn_num_input) -> (B, T, ffn_num_outputs)
    Variable forward(const Variable& X) override;

    Options options;  ///< the arguments it was built with
    /// The first layer, ffn_num_input -> ffn_num_hiddens (the ReLU follows it).
    std::shared_ptr<Linear> dense1, dense2;  ///< The second layer, ffn_num_hiddens -> ffn_num_outputs.
    std::shared_ptr<ReLU> relu;              ///< the ReLU between them
};

/// Seed 000 "残差规范化": ln(dropout(Y) + X), the residual connection
/// followed by layer normalisation.
class AddNorm : public Module {
public:
    /// The arguments of d2l's AddNorm(normalized_shape, dropout).
    struct Options {
        int64_t normalized_shape = 0;  ///< D, the size of the last dimension
        double dropout = 0.0;          ///< dropout probability on Y before the residual addition
        double eps = 1e-5;             ///< the layer norm's eps
        /// One op, autograd::add_layer_norm, instead of dropout, add and
        /// layer norm (the same numbers, bit for bit)
        bool fused = false;
    };
    /// A layer whose dropout draws from `gen`, which must outlive it.
    explicit AddNorm(Options options, core::Generator& gen = core::default_generator());
    /// X, Y (B, T, D) -> (B, T, D)
    Variable forward(const Variable& X, const Variable& Y);
    /// Calls forward(X, Y).
    Variable operator()(const Variable& X, const Variable& Y) { return forward(X, Y); }

    Options options;                   ///< the arguments it was built with
    std::shared_ptr<Dropout> dropout;  ///< applied to Y (child "dropout")
    std::shared_ptr<LayerNorm> ln;     ///< the layer norm (child "ln")
};

/// The hyperparameters every block and stack of seed 000 shares.
struct TransformerOptions {
    int64_t key_size = 32;         ///< the size of a key (D in the Transformer)
    int64_t query_size = 32;       ///< the size of a query (D)
    int64_t value_size = 32;       ///< the size of a value (D)
    int64_t num_hiddens = 32;      ///< D
    int64_t norm_shape = 32;       ///< D again (d2l passes [32])
    int64_t ffn_num_input = 32;    ///< the FFN's input size (D)
    int64_t ffn_num_hiddens = 64;  ///< the FFN's hidden width
    int64_t num_heads = 4;         ///< H, the attention heads
    int64_t num_layers = 2;        ///< the blocks in each of the encoder and the decoder
    double dropout = 0.1;          ///< dropout probability in every AddNorm, attention and positional encoding
    bool use_bias = false;         ///< bias in the attention projections
    /// Multiply token embeddings by √D before adding the positional encoding
    /// (seed 000). Seed 001's classifier adds the raw embeddings (false).
    bool scale_embedding = true;
    /// Every layer through its fused kernel: attention
    /// (MultiHeadAttention::Options::fused, the same numbers up to rounding),
    /// AddNorm, the FFN's bias + ReLU, and embedding × √D + positional
    /// encoding (these three bit for bit). Fewer graph nodes and passes over
    /// memory; the composed ops stay the default, as the tutorials teach them.
    bool fused = false;

    /// A copy with the width D set to `d` and every size that follows it
    /// (the key, query and value sizes, the norm shape and the FFN's input),
    /// as seed 000 sets them all from num_hiddens.
    TransformerOptions with_width(int64_t d) const;
};

/// Seed 000 "编码器块": self-attention + AddNorm, then FFN + AddNorm.
class EncoderBlock : public Module {
public:
    /// A block with its weights drawn from `gen`, which must outlive it.
    explicit EncoderBlock(const TransformerOptions& options, core::Generator& gen = core::default_generator());
    /// X (B, S, D), valid_lens (B) or mask -> (B, S, D)
    Variable forward(const Variable& X, const core::Tensor& valid_lens);

    std::shared_ptr<MultiHeadAttention> attention;  ///< self-attention over X
    std::shared_ptr<AddNorm> addnorm1;              ///< after the attention
    std::shared_ptr<PositionWiseFFN> ffn;           ///< the position-wise FFN
    std::shared_ptr<AddNorm> addnorm2;              ///< after the FFN
};

/// Seed 000 "编码器": embedding × √D + positional encoding, then the blocks
/// (without the √D when options.scale_embedding is false, as seed 001).
class TransformerEncoder : public Module {
public:
    /// An encoder for a source vocabulary of `vocab_size`, weights drawn from `gen`.
    TransformerEncoder(int64_t vocab_size, const TransformerOptions& options,
                       core::Generator& gen = core::default_generator());
    /// X int64 token ids (B, S), valid_lens (B) -> (B, S, D)
    Variable forward(const core::Tensor& X, const core::Tensor& valid_lens);
    /// Self-attention weights of the last forward, one (B·H, S, S) tensor per block.
    std::vector<core::Tensor> attention_weights() const;

    TransformerOptions options;                        ///< the hyperparameters it was built with
    std::shared_ptr<Embedding> embedding;              ///< token ids -> (B, S, D) (child "embedding")
    std::shared_ptr<PositionalEncoding> pos_encoding;  ///< adds P and applies dropout (child "pos_encoding")
    std::shared_ptr<ModuleList<EncoderBlock>>
        blks;  ///< the num_layers EncoderBlocks, named "block0", "block1", ... as in d2l
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
    /// The two caches of one DecoderBlock.
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
    /// Block number i of the stack (it finds its cache as state.caches[i]), weights drawn from `gen`.
    DecoderBlock(const TransformerOptions& options, int64_t i, core::Generator& gen = core::default_generator());
    /// Teacher forcing over a whole target sequence X (B, T, D): position t
    /// attends to positions ≤ t (d2l's dec_valid_lens = [1, 2, ..., T] per row).
    Variable forward(const Variable& X, const DecoderState& state);
    /// One step (or a chunk of new steps) X (B, t, D) during prediction, using
    /// and extending state.caches[i].
    Variable forward_step(const Variable& X, DecoderState& state);

    int64_t i;                                       ///< this block's index in the stack
    std::shared_ptr<MultiHeadAttention> attention1;  ///< masked self-attention over the target
    std::shared_ptr<AddNorm> addnorm1;               ///< after the self-attention
    std::shared_ptr<MultiHeadAttention>
        attention2;  ///< encoder–decoder attention: queries from the target, keys and values from enc_outputs
    std::shared_ptr<AddNorm> addnorm2;     ///< after the encoder–decoder attention
    std::shared_ptr<PositionWiseFFN> ffn;  ///< the position-wise FFN
    std::shared_ptr<AddNorm> addnorm3;     ///< after the FFN
};

/// Seed 000 "解码器": embedding × √D + positional encoding, the blocks, and a
/// final dense layer to vocabulary logits.
class TransformerDecoder : public Module {
public:
    /// A decoder for a target vocabulary of `vocab_size`, weights drawn from `gen`.
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

    TransformerOptions options;                        ///< the hyperparameters it was built with
    std::shared_ptr<Embedding> embedding;              ///< token ids -> (B, T, D) (child "embedding")
    std::shared_ptr<PositionalEncoding> pos_encoding;  ///< adds P and applies dropout (child "pos_encoding")
    std::shared_ptr<ModuleList<DecoderBlock>> blks;    ///< the num_layers DecoderBlocks, named "block0", "block1", ...
    std::shared_ptr<Linear> dense;                     ///< D -> V, the logits (child "dense")
};

/// Seed 000's d2l.EncoderDecoder: encode the source, decode with teacher forcing.
class EncoderDecoder : public Module {
public:
    /// The model made of `encoder` and `decoder` (children "encoder" and "decoder").
    EncoderDecoder(std::shared_ptr<TransformerEncoder> encoder, std::shared_ptr<TransformerDecoder> decoder);
    /// enc_X (B, S), dec_X (B, T), enc_valid_lens (B) -> logits (B, T, V)
    Variable forward(const core::Tensor& enc_X, const core::Tensor& dec_X, const core::Tensor& enc_valid_lens);
    /// The decoder's last hidden states (B, T, D), before decoder.dense.
    Variable forward_hidden(const core::Tensor& enc_X, const core::Tensor& dec_X, const core::Tensor& enc_valid_lens);

    std::shared_ptr<TransformerEncoder> encoder;  ///< the TransformerEncoder
    std::shared_ptr<TransformerDecoder> decoder;  ///< the TransformerDecoder
};

}  // namespace tformer::nn
