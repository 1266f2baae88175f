/// \file
/// Decoding: greedy and beam search on the decoder's KV cache, for a batch of
/// sentences at once. translate, eval, the end of training and the
/// benchmarks all decode through here; one sentence is a batch of one.
///
/// A batch is decoded step by step. Every step feeds the last token of each
/// live hypothesis (one row each) through the decoder, so each layer is one
/// product for all of them; a hypothesis that ends leaves the batch, and the
/// self-attention caches follow the survivors (their rows gathered). The
/// encoder runs once per batch, and its projected keys and values stay once
/// per sentence, shared by that sentence's hypotheses.
///
/// Letters: B batch (sentences), S source steps, n live rows, D hidden, V target
/// vocabulary, K beam size.
#pragma once

#include "nn/transformer.hpp"

#include <cstdint>
#include <vector>

namespace tformer::tasks {

/// One finished hypothesis of a beam.
struct Hypothesis {
    std::vector<int64_t> tokens;  ///< generated ids, without `<bos>`, without the final `<eos>`
    double score = 0;             ///< log p / length^α
};

/// A decoded sequence and, per generated token, the attention weights that
/// produced it (for heatmaps).
struct Decoded {
    std::vector<int64_t> tokens;  ///< generated ids, without `<bos>`, without the final `<eos>`
    double score = 0;             ///< sum of log-probabilities (beam: length-normalised)
    /// [step] -> decoder cross-attention of the last block, (H, S) per step;
    /// filled for greedy decoding of one sentence.
    std::vector<core::Tensor> cross_attention;
    std::vector<core::Tensor> self_attention;  ///< [step] -> (H, step+1), last block
    /// Beam search with n_best > 1: the n best finished hypotheses, best first
    /// (the first is tokens and score); fewer when fewer finished.
    std::vector<Hypothesis> n_best;
};

/// How to decode: the special ids, the length limit, greedy or beam, n-best.
struct DecodeOptions {
    int64_t bos = 2;              ///< id fed first
    int64_t eos = 3;              ///< generation stops after this id
    int64_t max_steps = 0;        ///< at most this many generated tokens (>= 1); translate() and
                                  ///< evaluate_bleu() put the model's limit for 0
    int64_t beam = 1;             ///< beam size; 1 = greedy
    double length_penalty = 1.0;  ///< beam scores are log p / length^alpha
    bool keep_attention = false;  ///< fill Decoded's attention weights (greedy, one sentence: heatmaps)
    /// Beam search: keep searching a sentence until its K best continuations
    /// all end (or the step limit), instead of stopping once it has K finished
    /// hypotheses and no live one scores better, as it stands, than the K-th
    /// (the default; see decode.cpp's retire_decided).
    bool exhaustive = false;
    int64_t n_best = 1;  ///< beam search: keep this many finished hypotheses per sentence (<= beam)
};

/// Greedy decoding of a batch: src (B, S) ids, src_valid_len (B) -> B sequences.
/// Runs in eval mode without a graph; every step feeds one token per live row
/// through the decoder's KV cache, and a row leaves the batch at its `<eos>`.
std::vector<Decoded> greedy_decode(nn::EncoderDecoder& model, const core::Tensor& src,
                                   const core::Tensor& src_valid_len, const DecodeOptions& options);

/// Beam search for one sentence src (1, S): keeps the K best partial
/// sequences by total log-probability, finished ones by log p / length^α.
/// With K = 1 it returns exactly the greedy result.
Decoded beam_decode(nn::EncoderDecoder& model, const core::Tensor& src, const core::Tensor& src_valid_len,
                    const DecodeOptions& options);

/// Beam search for a batch src (B, S), valid lengths (B): every sentence
/// gets what beam_decode gives it alone (the same tokens, up to the last
/// bits of the products, which may change with their number of rows), but
/// the decoder runs once per step for the live hypotheses of all sentences
/// together.
std::vector<Decoded> beam_decode_batch(nn::EncoderDecoder& model, const core::Tensor& src,
                                       const core::Tensor& src_valid_len, const DecodeOptions& options);

/// greedy_decode or beam_decode_batch, as options.beam says.
std::vector<Decoded> decode_batch(nn::EncoderDecoder& model, const core::Tensor& src, const core::Tensor& src_valid_len,
                                  const DecodeOptions& options);

/// The plain search the fast one is tested against: the whole batch stays in
/// the decoder until every row has ended (greedy), the output layer and a
/// full log_softmax run over all rows at once, and every row's V candidates
/// are compared one by one (beam). Slow; for the tests.
namespace reference {
/// greedy_decode the plain way (see the namespace).
std::vector<Decoded> greedy_decode(nn::EncoderDecoder& model, const core::Tensor& src,
                                   const core::Tensor& src_valid_len, const DecodeOptions& options);
/// beam_decode_batch the plain way (see the namespace).
std::vector<Decoded> beam_decode_batch(nn::EncoderDecoder& model, const core::Tensor& src,
                                       const core::Tensor& src_valid_len, const DecodeOptions& options);
}  // namespace reference

}  // namespace tformer::tasks
