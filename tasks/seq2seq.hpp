/// \file
/// A sequence-to-sequence Transformer as a task sees it: its configuration,
/// how to build and initialise it, how to save and load it with everything
/// needed to resume training, and how to translate a sentence with it
/// (tasks/decode does the searching).
///
/// Letters: B batch, S source steps, T target steps, V target vocabulary, K beam size.
#pragma once

#include "nn/safetensors.hpp"
#include "nn/transformer.hpp"
#include "optim/optimizer.hpp"
#include "tasks/decode.hpp"
#include "tasks/text.hpp"
#include "tasks/tokenizer.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tformer::tasks {

/// Everything that defines a model, saved in every checkpoint.
struct ModelConfig {
    std::string task = "translate";  ///< "translate" or "copy"
    int64_t src_vocab_size = 0;      ///< source vocabulary size
    int64_t tgt_vocab_size = 0;      ///< target vocabulary size
    int64_t num_steps = 10;          ///< d2l: the padded length of every sequence; otherwise the longest
                                     ///< sequence (ids + `<eos>`) the model was trained on
    /// The encoder–decoder's hyperparameters.
    nn::TransformerOptions transformer;
    /// One matrix for the encoder's and decoder's embeddings and the
    /// decoder's output layer (Press & Wolf 2017; Vaswani et al. §3.4);
    /// needs one joint vocabulary (src_vocab_size == tgt_vocab_size).
    bool tie_embeddings = false;
    /// Embeddings start as N(0, 1/d) draws (std 1/√d), so that after the
    /// √d scaling they are of the positional encoding's size, as in tied
    /// models, instead of d2l's N(0, 1), which the √d scaling makes ±11 at
    /// d = 128 and the positional encoding's ±1 drowns in. Tied embeddings
    /// always start so; the whole-corpus presets use it untied too.
    bool scaled_embedding_init = false;
};

/// Throws ValueError naming `op` and the field when a config cannot make a
/// working model: a size below 1, dropout outside [0, 1), num_hiddens not
/// divisible by num_heads, tied embeddings over two vocabularies, or a model
/// of more than 10¹¹ parameters.
void check_config(const ModelConfig& config, const char* op);

/// The number of values in the model's state dict (what a checkpoint holds
/// under "model."; tied weights count under each name), computed from the
/// config without building the model; as a double, so that no config overflows it.
double state_dict_size(const ModelConfig& config);

/// A rough estimate of the memory one training step takes, in bytes, to
/// refuse a model that cannot fit before it is built. Activations count what
/// the forward pass keeps for backward per token and layer (projections,
/// attention weights over the longest sequence, LayerNorm and FFN values),
/// the logits over the target vocabulary, and as much again for backward's
/// transient gradients.
struct MemoryEstimate {
    double parameters = 0;   ///< weights (float32; tied weights once)
    double optimizer = 0;    ///< gradients and Adam's two moments
    double activations = 0;  ///< one batch's forward and backward
    /// The three together.
    double total() const { return parameters + optimizer + activations; }
};
/// `rows` sequences of at most `src_len` and `tgt_len` tokens per batch.
MemoryEstimate estimate_training_memory(const ModelConfig& config, double rows, double src_len, double tgt_len);

/// ModelConfig as JSON text (checkpoint metadata) and back; from_json
/// validates every field and throws IOError naming the bad one
/// ("checkpoint field 'config.num_hiddens' should be ...").
std::string config_to_json(const ModelConfig& config);
/// Parses config_to_json's text.
ModelConfig config_from_json(const std::string& json);

/// Builds the encoder–decoder of seed 000 and initialises every Linear
/// weight with Xavier-uniform, as d2l's train_seq2seq does. With
/// tie_embeddings, decoder.embedding.weight and decoder.dense.weight are
/// encoder.embedding.weight, initialised N(0, 1/D) so that × √D gives unit
/// variance and the first logits are of order one.
std::shared_ptr<nn::EncoderDecoder> build_model(const ModelConfig& config, core::Generator& gen);

/// What a checkpoint holds besides the weights.
struct CheckpointInfo {
    ModelConfig config;  ///< the model's configuration
    /// The word vocabularies, source and target (translation with word tokenizers).
    std::optional<Vocab> src_vocab = {}, tgt_vocab = {};  ///< The target side's word vocabulary.
    /// translation with one joint SentencePiece model (instead of the vocabularies)
    std::shared_ptr<const SentencePieceTokenizer> sentencepiece = {};
    int64_t step = 0;              ///< optimizer steps done
    int64_t epoch = 0;             ///< epochs completed
    core::Generator::State rng{};  ///< the training generator, for an exact resume
    /// The loss history, so a resumed run reports and plots the whole run.
    struct LossHistory {
        std::vector<double> epochs = {};  ///< the mean token loss of each completed epoch
        double epoch_loss_sum = 0;        ///< the epoch in progress: Σ token losses so far
        double epoch_tokens = 0;          ///< ... over this many target tokens
        /// the loss of every step from the first (loss-steps.csv); empty in
        /// checkpoints of earlier writers
        std::vector<double> steps = {};
    };
    LossHistory losses = {};                        ///< the loss so far
    std::map<std::string, std::string> extra = {};  ///< free-form metadata (seed, preset, ...)
};

/// The tokenizers of a translation checkpoint: its word vocabularies or its
/// SentencePiece model. ValueError for a copy-task checkpoint.
TokenizerPair tokenizers_of(const CheckpointInfo& info);

/// Writes model weights ("model.<name>"), optimizer state ("optim.<key>", if
/// given) and the info (metadata) to one safetensors file, atomically.
void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* optimizer,
                     const CheckpointInfo& info);

/// Reads a checkpoint's info without building the model.
CheckpointInfo read_checkpoint_info(const std::string& path);

/// Loads weights into `model` (and optimizer state when given and present);
/// returns the info. Throws IOError for a missing or corrupt file, ValueError
/// when the weights do not fit the model.
CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer);

/// The same two for a checkpoint already read (nn::load_safetensors), so
/// that one read of the file serves both; `path` names it in errors.
CheckpointInfo read_checkpoint_info(const nn::SafeTensors& checkpoint, const std::string& path);
/// load_checkpoint on a checkpoint already read.
CheckpointInfo load_checkpoint(const nn::SafeTensors& checkpoint, const std::string& path, nn::Module& model,
                               optim::Optimizer* optimizer);

/// A translation checkpoint ready to translate: its info, its model (with
/// the layers it was trained with: a whole-corpus run's fused ones, a d2l
/// run's composed ones, as d2l's PyTorch model) and its tokenizers.
struct LoadedTranslator {
    CheckpointInfo info;     ///< what the checkpoint says about itself (config, vocabularies, run)
    core::Generator gen{0};  ///< the model's dropout layers point at it: it lives as long as the model
    std::shared_ptr<nn::EncoderDecoder> model;  ///< the model, in eval mode, with the checkpoint's weights
    TokenizerPair tok;                          ///< source and target tokenizers
};
/// Loads `checkpoint`, the file at `path` already read; ValueError naming
/// `op` for a checkpoint that is not a translation model.
std::unique_ptr<LoadedTranslator> load_translator(const nn::SafeTensors& checkpoint, const std::string& path,
                                                  const char* op);

/// A translated sentence, what translate returns.
///
/// d2l's predict_seq2seq for translation: preprocess and tokenise `sentence`,
/// add `<eos>`, pad to num_steps, decode, and turn ids back into a
/// space-joined French sentence.
struct Translation {
    std::string text;                     ///< the translation, detokenised
    std::vector<std::string> src_tokens;  ///< what the encoder saw (with `<eos>`)
    std::vector<std::string> tokens;      ///< generated tokens
    Decoded decoded;                      ///< the ids and scores behind it
    bool truncated = false;               ///< the source was longer than the model allows and was cut
    std::string error{};                  ///< tasks::translate_batches: why the sentence could not be translated
};
/// Translates `sentence` with word vocabularies, as d2l's predict_seq2seq (see Translation).
Translation translate(nn::EncoderDecoder& model, const Vocab& src_vocab, const Vocab& tgt_vocab,
                      const std::string& sentence, int64_t num_steps, const DecodeOptions& options);

/// How translate encodes the source and decodes.
///
/// Translation with any tokenizers: encode `sentence`, add `<eos>`, decode
/// (greedy or beam), detokenise. A source longer than max_len (ids +
/// `<eos>`) is cut to max_len and `truncated` is set; the source is padded to
/// pad_to steps when shorter (d2l pads to num_steps), else not padded.
/// options.max_steps of 0 allows max_len generated tokens.
struct TranslateOptions {
    int64_t max_len = 10;    ///< the model's limit on source ids (and, by default, generated tokens)
    int64_t pad_to = 0;      ///< pad the source to this many steps (0: no padding)
    DecodeOptions decode{};  ///< greedy or beam, and the special ids
};
/// Translates `sentence` with any tokenizers (see TranslateOptions).
Translation translate(nn::EncoderDecoder& model, const TokenizerPair& tokenizers, const std::string& sentence,
                      const TranslateOptions& options);

/// A sentence ready for the encoder: ids + `<eos>`, cut to max_len.
struct PreparedSource {
    std::vector<int64_t> ids;  ///< the source ids, ending in `<eos>` unless cut
    bool truncated = false;    ///< it was longer than max_len and was cut
};
/// Encodes `sentence` as translate() does; ValueError when it has no words, or max_len < 2.
PreparedSource prepare_source(const Tokenizer& src, const std::string& sentence, int64_t max_len);

/// The Translation of `source` decoded as `decoded`: its pieces, the generated ones and their text.
Translation translation_of(const TokenizerPair& tokenizers, const PreparedSource& source, Decoded decoded);

/// The search translate() runs for `options`: the tokenizers' `<bos>` and
/// `<eos>`, and max_len generated tokens when options.decode.max_steps is 0.
DecodeOptions search_options(const TranslateOptions& options);

}  // namespace tformer::tasks
