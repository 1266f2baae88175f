/// \file
/// Tokenizers: how a sentence becomes token ids and ids become text again.
///
/// Two kinds, behind one interface (DESIGN.md, "second wave"):
///  - WordTokenizer: d2l's word vocabulary (seed 000; tasks/text.hpp):
///    lowercase, a space before , . ! ?, split at spaces, a Vocab per
///    language. A word it never saw becomes `<unk>`.
///  - SentencePieceTokenizer: a subword model (BPE or unigram) trained by
///    SentencePiece on the training sentences of both languages at once, so
///    one joint vocabulary serves the encoder and the decoder (and lets them
///    share their embeddings). Every word is spelled with pieces, so nothing
///    is unknown, and the output keeps case and punctuation: decode() gives
///    readable text. Seed 002 describes the same idea with BERT's WordPiece
///    (its tokenizer section); tutorial 15 builds BPE merges by hand.
///
/// Both use d2l's ids for the special tokens: `<unk>` 0, `<pad>` 1, `<bos>` 2,
/// `<eos>` 3. This file is the only one that sees SentencePiece's headers
/// (tokenizer.cpp).
#pragma once

#include "tasks/text.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tformer::tasks {

/// The interface of both tokenizers: sentence -> ids (encode) and ids -> text (decode).
class Tokenizer {
public:
    /// Virtual: tokenizers are shared as pointers to Tokenizer.
    virtual ~Tokenizer() = default;

    /// "word" or "sentencepiece".
    virtual std::string_view kind() const = 0;
    /// Number of ids, specials included.
    virtual int64_t size() const = 0;
    /// The ids of `sentence`, without `<bos>` or `<eos>`. Throws ValueError for
    /// invalid UTF-8.
    virtual std::vector<int64_t> encode(std::string_view sentence) const = 0;
    /// Readable text for ids (special ids are left out).
    virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
    /// The token or piece an id stands for (heatmap labels); IndexError outside [0, size()).
    virtual std::string piece(int64_t id) const = 0;

    /// The special ids, d2l's: `<unk>` 0, `<pad>` 1, `<bos>` 2, `<eos>` 3.
    /// @{
    static constexpr int64_t kUnk = 0, kPad = 1, kBos = 2, kEos = 3;
    /// @}
};

/// d2l's word vocabulary of one language (seed 000, tasks/text.hpp).
class WordTokenizer : public Tokenizer {
public:
    /// A tokenizer over `vocab` (built by Vocab from the training sentences).
    explicit WordTokenizer(Vocab vocab);
    std::string_view kind() const override { return "word"; }
    int64_t size() const override { return vocab_.size(); }
    /// preprocess_nmt, split at spaces (empty tokens dropped), Vocab ids.
    std::vector<int64_t> encode(std::string_view sentence) const override;
    /// The tokens joined by spaces, as d2l prints them.
    std::string decode(const std::vector<int64_t>& ids) const override;
    std::string piece(int64_t id) const override { return vocab_.to_token(id); }
    /// The vocabulary.
    const Vocab& vocab() const { return vocab_; }

private:
    Vocab vocab_;
};

/// How to train a SentencePiece model.
struct SentencePieceOptions {
    int64_t vocab_size = 8000;       ///< pieces in the model, the four specials included
    std::string model_type = "bpe";  ///< bpe or unigram
    uint32_t seed = 0;               ///< SentencePiece's sampling of input sentences
    int64_t max_sentences = 0;       ///< train on a sample of at most this many sentences (0: all)
    int threads = 2;                 ///< threads SentencePiece trains on
    /// SentencePiece's normalisation: nmt_nfkc (its default) or identity, which leaves the text as it is and keeps
    /// the NFKC table (about 240 KB) out of the model, as the fuzzers' small seed checkpoints want
    std::string normalization = "nmt_nfkc";
};

/// A SentencePiece model; the serialized model (a protobuf of a few hundred
/// KB) is what checkpoints store.
class SentencePieceTokenizer : public Tokenizer {
public:
    /// Trains a model on `sentences` (raw text, one sentence each). Throws
    /// ValueError for bad options or when SentencePiece refuses (for
    /// example a vocabulary larger than the text allows).
    static std::shared_ptr<SentencePieceTokenizer> train(const std::vector<std::string>& sentences,
                                                         const SentencePieceOptions& options);
    /// Loads a serialized model; throws IOError when it is not one, or when
    /// its special ids are not d2l's.
    static std::shared_ptr<SentencePieceTokenizer> from_serialized(std::string_view model);

    /// Frees SentencePiece's model.
    ~SentencePieceTokenizer() override;
    std::string_view kind() const override { return "sentencepiece"; }
    int64_t size() const override;
    std::vector<int64_t> encode(std::string_view sentence) const override;
    std::string decode(const std::vector<int64_t>& ids) const override;
    std::string piece(int64_t id) const override;
    /// The pieces of a sentence, e.g. "▁I", "'", "m", "▁home", "." (tutorial 15).
    std::vector<std::string> encode_pieces(std::string_view sentence) const;
    /// Subword regularisation: the ids of each sentence with SentencePiece's
    /// sampling instead of its one best segmentation. For a BPE model this is
    /// BPE-dropout (Provilkov et al., 2020): every merge is skipped with
    /// probability `dropout`, so "▁home" now and then comes out as "▁ho" "me";
    /// for a unigram model it is Kudo's (2018) sampling with `dropout` as
    /// SentencePiece's alpha. The same sentences, dropout and seed give the
    /// same ids, whichever thread asks. Throws ValueError for a dropout
    /// outside [0, 1) or invalid UTF-8; dropout 0 is encode().
    std::vector<std::vector<int64_t>> sample_encode(const std::vector<std::string_view>& sentences, double dropout,
                                                    uint64_t seed) const;
    /// The model as bytes, for a checkpoint.
    const std::string& serialized() const { return serialized_; }

private:
    struct Impl;
    explicit SentencePieceTokenizer(std::unique_ptr<Impl> impl, std::string serialized);
    std::unique_ptr<Impl> impl_;
    std::string serialized_;
};

/// The tokenizers of a translation model: the source's and the target's (one
/// object twice when the vocabulary is joint).
struct TokenizerPair {
    /// The source side's tokenizer.
    std::shared_ptr<const Tokenizer> src, tgt;  ///< The target side's tokenizer.
    /// True when both sides share one tokenizer (a joint vocabulary).
    bool joint() const { return src == tgt; }
};

/// Base64 (RFC 4648, with padding), for binary data in checkpoint metadata.
std::string base64_encode(std::string_view bytes);
/// Inverse of base64_encode; throws IOError for a character outside the
/// alphabet or a length that is not a multiple of 4.
std::string base64_decode(std::string_view text);

}  // namespace tformer::tasks
