/// \file
/// The encoder-only sentence classifier of seed 001 (核心代码): token
/// embeddings plus the sinusoidal position embedding, a stack of encoder
/// blocks, a pooling of the steps into one vector per sentence, dropout, and a
/// dense "output" layer to class logits, trained with cross-entropy plus an L2
/// term on the output layer:
///
/// ```
///   loss = cross_entropy(logits, labels) + l2_reg_lambda · l2_loss
///   l2_loss = ½‖output_w‖² + ½‖output_b‖²      (tf.nn.l2_loss of both)
/// ```
///
/// ```
///   nn::TransformerClassifier model({.vocab_size = V, .num_classes = 2, .max_len = 12});
///   Variable logits = model(X, valid_lens);                      // (B, C)
///   Variable loss = model.loss(logits, labels, /*l2_reg_lambda=*/1e-3);
/// ```
///
/// What is the same as seed 001 and what is not:
/// - Same: positions enter as the sin/cos table added to the raw embeddings
///   (no √D scale, unlike seed 000); blocks are multi-head self-attention with
///   a key mask, residual and layer norm, then a kernel-1 convolution FFN
///   (= PositionWiseFFN), residual and layer norm; seed 001 pools by
///   flattening (B, T, D) -> (B, T·D) (Pooling::flatten), applies dropout, and
///   its output layer is Xavier-initialised with the bias set to 0.1.
/// - Different: the blocks are seed 000's EncoderBlock, whose attention has a
///   final projection W_o and no ReLU on the Q/K/V projections (seed 001's
///   `_multihead_attention` applies tf.layers.dense(..., activation=relu) to
///   each and has no W_o). Seed 001 "masks" padded queries by overwriting their
///   attention weights with -2³²+1; here the padded positions are instead
///   zeroed before pooling, which is what that mask is for: padding must not
///   reach the logits.
/// - Added: Pooling::mean, the average over the valid steps, which accepts
///   any length up to max_len (flattening needs exactly max_len steps).
#pragma once

#include "nn/transformer.hpp"

namespace tformer::nn {

/// Seed 001's encoder-only sentence classifier (see the file comment):
/// token ids (B, T) -> class logits (B, C).
class TransformerClassifier : public Module {
public:
    /// How the encoder outputs (B, T, D) become one vector per sentence.
    enum class Pooling {
        flatten,  ///< seed 001: (B, T, D) -> (B, T·D); inputs must have T = max_len
        mean,     ///< the mean over each row's valid steps: (B, T, D) -> (B, D)
    };
    /// The hyperparameters, with seed 001's names noted.
    struct Options {
        int64_t vocab_size = 0;              ///< V, the token vocabulary
        int64_t num_classes = 2;             ///< C, the classes
        int64_t max_len = 0;                 ///< seed 001's sequence_length: the longest input
        int64_t num_hiddens = 32;            ///< seed 001's embedding_size (= key/query/value size)
        int64_t ffn_num_hiddens = 64;        ///< seed 001's filters
        int64_t num_heads = 4;               ///< H, the attention heads
        int64_t num_layers = 1;              ///< seed 001's num_blocks
        double dropout = 0.1;                ///< 1 - seed 001's keep_prob
        Pooling pooling = Pooling::flatten;  ///< how the steps are pooled into one vector (see Pooling)
        bool use_bias = false;               ///< bias in the attention projections
    };
    /// `gen` initialises the weights and drives dropout: it must outlive the model.
    explicit TransformerClassifier(Options options, core::Generator& gen = core::default_generator());

    /// X int64 token ids (B, T), valid_lens int64 (B) -> logits (B, num_classes).
    /// An undefined valid_lens means every step is valid. T must equal
    /// max_len with Pooling::flatten and be at most max_len with Pooling::mean.
    Variable forward(const core::Tensor& X, const core::Tensor& valid_lens);
    /// Calls forward(X, valid_lens).
    Variable operator()(const core::Tensor& X, const core::Tensor& valid_lens) { return forward(X, valid_lens); }

    /// Seed 001's l2_loss: ½Σ output_w² + ½Σ output_b² (a scalar Variable).
    Variable l2_loss() const;
    /// Seed 001's training loss: mean cross-entropy of logits (B, C) against
    /// int64 labels (B), plus l2_reg_lambda · l2_loss().
    Variable loss(const Variable& logits, const core::Tensor& labels, double l2_reg_lambda) const;

    /// Self-attention weights of the last forward, one (B·H, T, T) tensor per block.
    std::vector<core::Tensor> attention_weights() const { return encoder->attention_weights(); }

    Options options;                              ///< the hyperparameters it was built with
    std::shared_ptr<TransformerEncoder> encoder;  ///< embedding, positions, blocks
    std::shared_ptr<Dropout> dropout;             ///< applied to the pooled vector before the output layer
    std::shared_ptr<Linear> output;               ///< seed 001's output_w / output_b, stored (C, pooled size)
};

}  // namespace tformer::nn
