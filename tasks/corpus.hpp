/// \file
/// The whole fra-eng corpus for a translator that should work on the
/// sentences people type, not only on the short ones at the top of the file:
///  1. an honest validation sample: English sentences drawn at random from the
///     whole file (every length), each with all its French translations as
///     references, and no English or French sentence of it left in training;
///  2. the training pairs tokenised (words or SentencePiece, tasks/tokenizer.hpp),
///     with pairs longer than the model's limit counted and left out;
///  3. batches built from length buckets under a token budget, so that a batch
///     of short sentences is not padded to the longest sentence of the corpus.
///
/// Seed 000's d2l recipe (a prefix of the file, num_steps 10, truncation,
/// fixed batches) stays in fra_eng.hpp and is what `--preset d2l` uses.
///
/// Letters: B batch, S source steps, T target steps.
#pragma once

#include "tasks/bleu.hpp"
#include "tasks/fra_eng.hpp"
#include "tasks/seq2seq.hpp"
#include "tasks/tokenizer.hpp"
#include "tasks/train.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tformer::tasks {

/// One sentence pair as the file has it (not preprocessed).
struct TextPair {
    /// The English sentence.
    std::string src, tgt;  ///< Its French translation.
    /// Both sides equal.
    friend bool operator==(const TextPair&, const TextPair&) = default;
};

/// A validation sentence with every translation the corpus gives it.
struct ValSentence {
    std::string src;                ///< the English sentence
    std::vector<std::string> refs;  ///< every French translation of it in the file
};

/// Where the corpus is and how to split it.
struct CorpusOptions {
    std::string path;              ///< fra.txt
    int64_t val_sentences = 1500;  ///< English sentences held out, each with all its translations
    uint64_t seed = 0;             ///< chooses the validation sentences (and the sample)
    int64_t sample_size = 0;       ///< > 0: train on a seeded random sample of this many pairs (quick runs, tests)
};

/// What load_corpus found and kept.
struct CorpusReport {
    FraEngReport lines;           ///< what reading the file found (lines, skipped ones)
    int64_t val_sentences = 0;    ///< distinct English sentences in validation
    int64_t val_pairs = 0;        ///< their translations (references) in all
    int64_t train_pairs = 0;      ///< pairs left for training
    int64_t dropped_overlap = 0;  ///< pairs left out of training because they share a sentence with validation
};

/// The corpus split into training pairs and validation sentences.
struct Corpus {
    std::vector<TextPair> train;   ///< in file order
    std::vector<ValSentence> val;  ///< in the order drawn
    CorpusReport report;           ///< what was read, kept and left out
};

/// Reads the file (checked as load_fra_eng does) and splits it: validation
/// English sentences are drawn uniformly among the distinct ones (after
/// d2l's normalisation: lowercase, a space before punctuation), and every
/// training pair whose English or French side equals, so normalised, a
/// validation sentence or reference is left out. Throws IOError when the file
/// cannot be read, ValueError for bad options or when nothing is left.
Corpus load_corpus(const CorpusOptions& options);

/// Training pairs as token ids, without `<bos>`/`<eos>` (int32 to halve the memory).
struct EncodedPairs {
    /// The source sides' ids, one vector per pair.
    std::vector<std::vector<int32_t>> src, tgt;  ///< The target sides' ids.
    int64_t max_len = 0;          ///< every kept side has at most max_len - 1 ids (room for `<eos>` or `<bos>`)
    int64_t dropped = 0;          ///< pairs left out because a side was longer
    std::vector<int64_t> origin;  ///< each kept pair's index in the pairs it was encoded from
    /// Number of pairs.
    int64_t size() const { return static_cast<int64_t>(src.size()); }
};

/// Encodes every pair with the source and target tokenizers (both cores
/// share the work); pairs with a side of max_len or more ids are dropped and
/// counted. Throws ValueError when max_len < 2.
EncodedPairs encode_pairs(const std::vector<TextPair>& pairs, const TokenizerPair& tokenizers, int64_t max_len);

/// Subword regularisation of the training data (BPE-dropout, Provilkov et
/// al., 2020): every epoch spells the pairs anew with
/// SentencePieceTokenizer::sample_encode, so a pair met again in a later
/// epoch comes in other pieces and the model cannot learn its ids by heart.
/// The epoch's batches are cut from the sampled lengths, with as many pairs
/// in each as the one-best lengths give (a sampled pair has more pieces, so
/// a batch holds more tokens than the budget: about a quarter more at p
/// 0.1); a side whose sample does not fit max_len keeps its one-best ids.
/// Validation, the held-out loss and translation keep the one-best
/// segmentation.
struct SubwordDropout {
    double p = 0;  ///< the probability of skipping a merge; 0: off
    /// The joint vocabulary the pairs were encoded with.
    std::shared_ptr<const SentencePieceTokenizer> tokenizer;
    /// The text the pairs were encoded from, as EncodedPairs::origin indexes it.
    std::shared_ptr<const std::vector<TextPair>> text;
};

/// Batches by length (Marian's and fairseq's way): the pairs are sorted by
/// (target length, source length), cut into batches of at most
/// `batch_tokens` positions each, B · (S + T) counting padding, and the
/// batches are trained in a seeded random order. Pairs of equal lengths are
/// shuffled anew every epoch, so batches change from epoch to epoch while
/// their number and shapes stay the same (a step number always means the
/// same place in the data, which an exact --resume needs).
class BucketBatcher {
public:
    /// by_length false: the comparison the README's table measures, batches
    /// of pairs in random order, as many pairs per batch as buckets give on
    /// average, each padded to its longest pair.
    /// `subword`: BPE-dropout for the batches of source() (ValueError for a p
    /// outside [0, 1), or p > 0 without the tokenizer and the text).
    BucketBatcher(std::shared_ptr<const EncodedPairs> data, int64_t batch_tokens, uint64_t seed, bool by_length = true,
                  SubwordDropout subword = {});

    /// Batches in one epoch (the same every epoch).
    int64_t batches_per_epoch() const { return static_cast<int64_t>(sizes_.size()); }
    /// The pairs as `epoch` spells them: the one-best ids, or with subword
    /// dropout the epoch's own draw (the same for the same seed and epoch).
    std::shared_ptr<const EncodedPairs> spelled(int64_t epoch) const;
    /// The pair indices of each batch of `epoch`, in training order, sorted by
    /// the lengths of `spelling` (spelled(epoch)). Every pair appears exactly once.
    std::vector<std::vector<int64_t>> epoch_plan(int64_t epoch, const EncodedPairs& spelling) const;
    /// epoch_plan(epoch, *spelled(epoch)).
    std::vector<std::vector<int64_t>> epoch_plan(int64_t epoch) const;
    /// Padding positions / all positions (source and target) over an epoch.
    double padding_fraction() const { return padding_fraction_; }
    /// Pairs per batch: the smallest, the mean and the largest.
    /// @{
    int64_t min_batch() const, max_batch() const;
    double mean_batch() const;
    /// @}
    /// The batch of pairs `rows`: enc_X (B, S) ids + `<eos>` padded with
    /// `<pad>`, dec_in (B, T) `<bos>` + ids, label (B, T) ids + `<eos>`.
    Batch batch(const std::vector<int64_t>& rows) const;
    /// The same batch in the ids of `spelling` (spelled(epoch)).
    Batch batch(const std::vector<int64_t>& rows, const EncodedPairs& spelling) const;
    /// A BatchSource over epoch_plan (it keeps this batcher alive).
    static BatchSource source(std::shared_ptr<const BucketBatcher> batcher);

private:
    std::vector<int64_t> sorted_order(int64_t epoch, const EncodedPairs& spelling) const;
    std::shared_ptr<const EncodedPairs> data_;
    uint64_t seed_;
    bool by_length_;
    SubwordDropout subword_;
    std::vector<int64_t> sizes_;  ///< pairs per batch, in sorted order (the same every epoch)
    double padding_fraction_ = 0;
};

// ---- held-out loss ----------------------------------------------------------------------------------

/// The model's cross-entropy per target token on whole pairs (teacher
/// forcing, as in training, but in eval mode, without label smoothing and
/// without a graph), `<eos>` included.
struct PairLoss {
    double loss = 0;     ///< Σ −log p(token) / tokens
    int64_t pairs = 0;   ///< pairs scored (those that fit the model's length)
    int64_t tokens = 0;  ///< target tokens scored
};

/// PairLoss over `pairs`, in length-bucketed batches of `batch_tokens`
/// (pairs and tokens 0, loss 0, when no pair fits max_len).
PairLoss pair_loss(nn::EncoderDecoder& model, const std::vector<TextPair>& pairs, const TokenizerPair& tokenizers,
                   int64_t max_len, int64_t batch_tokens);

/// PairLoss on training pairs and on held-out ones, side by side.
struct HeldOutLoss {
    /// A sample of the training pairs.
    PairLoss train;
    PairLoss validation;  ///< The validation pairs.
};

/// The same loss on the validation pairs (each sentence with every
/// reference) and on as many training pairs drawn with `seed`: the gap
/// between the two shows how much the model learned its training pairs by
/// heart rather than the language (a gap that grows as training goes on
/// calls for dropout or more data).
HeldOutLoss held_out_loss(nn::EncoderDecoder& model, const Corpus& corpus, const TokenizerPair& tokenizers,
                          int64_t max_len, int64_t batch_tokens, uint64_t seed);

// ---- validation BLEU ------------------------------------------------------------------------------

/// How to translate the validation sentences.
struct BleuOptions {
    int64_t max_len = 64;        ///< the model's limit: longer sources are cut (and counted)
    DecodeOptions decode;        ///< beam size, length penalty; max_steps 0: max_len
    int64_t max_sentences = 0;   ///< > 0: only the first this many sentences
    int64_t batch_tokens = 500;  ///< source tokens per batch (tasks::translate_batches)
    int threads = 0;             ///< batches decoded at once; 0: core::get_num_threads()
};

/// Corpus BLEU-4 of the validation sentences whose source has a given number of words.
struct LengthBucket {
    int64_t min_words = 0;  ///< the fewest source words (whitespace-separated) in this bucket
    int64_t max_words = 0;  ///< the most; 0: no upper limit
    int64_t sentences = 0;  ///< how many validation sentences fall in it
    CorpusBleu bleu;        ///< their corpus BLEU-4 (score 0 when there are none)
};

/// The result of evaluate_bleu.
struct BleuReport {
    CorpusBleu bleu;                      ///< corpus BLEU-4 and its parts
    double chrf = 0.0;                    ///< corpus chrF2 (tasks/chrf.hpp) in [0, 100], on lowercased text as BLEU
    std::vector<LengthBucket> by_length;  ///< BLEU-4 of sources of 1-5, 6-10, 11-20 and 21+ words
    int64_t sentences = 0;                ///< sentences translated
    int64_t truncated = 0;                ///< sources cut at max_len
    std::vector<std::string> hypotheses;  ///< the translations, in the order of the sentences
};

/// The words BLEU compares: d2l's preprocess_nmt (lowercase, a space before
/// , . ! ?) and a split at spaces, so figures stay comparable with seed 000's.
TokenLine bleu_tokens(std::string_view text);

/// Words of `text`: runs of code points that are not whitespace
/// (core::is_unicode_space). Throws ValueError on invalid UTF-8.
int64_t count_words(std::string_view text);

/// Corpus BLEU-4 of the sentences whose source has 1-5, 6-10, 11-20 and 21+
/// words (count_words; an empty source counts in the first), so that the
/// quality on long sentences shows beside the corpus figure. sources[i],
/// preds[i] and refs[i] belong together; sizes that differ throw ValueError.
std::vector<LengthBucket> bleu_by_length(const std::vector<std::string>& sources, const std::vector<TokenLine>& preds,
                                         const std::vector<std::vector<TokenLine>>& refs);

/// Corpus BLEU-4 of the model's translations of `val` against all their
/// references, with corpus chrF2 and BLEU-4 by source length. Sentences are decoded in batches of similar length
/// (tasks::translate_batches), on copies of the model when threads > 1.
BleuReport evaluate_bleu(nn::EncoderDecoder& model, const TokenizerPair& tokenizers,
                         const std::vector<ValSentence>& val, const BleuOptions& options);

}  // namespace tformer::tasks
