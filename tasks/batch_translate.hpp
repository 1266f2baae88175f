// Translating many sentences at once, as `tformer translate` and `tformer
// eval` do: the sentences are sorted by length, cut into batches of similar
// length of up to batch_tokens source tokens (padding included), and each
// batch is decoded by tasks/decode's batched search; the results come back in
// the order of the sentences.
//
// Threads: the batches are shared among the threads, each batch decoded by
// one thread on a model of its own (its kernels then run single-threaded, as
// inside any OpenMP parallel region). A small model's products are too small
// to split well over threads, while whole batches keep every core busy with
// no synchronisation inside a step; and a sentence's translation cannot
// depend on the thread count, since each batch is computed the same way
// whichever thread takes it. docs/bench.md has the measurements.
#pragma once

#include "tasks/seq2seq.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tformer::tasks {

/// How to translate a list of sentences.
struct BatchTranslateOptions {
    TranslateOptions translate{};  ///< max_len, pad_to and the search (beam, length penalty, n_best)
    /// Source tokens per batch, padding included (rows × the longest row);
    /// a longer sentence makes a batch of its own. 500: about 40 sentences of
    /// the corpus, 160 rows of the output layer with beam 4. Memory grows
    /// with it (a beam's KV caches: rows × steps × D × 6 floats), and with
    /// 2,000 a 2-thread translation of 1,000 sentences took 300 MB or more
    /// against the 107 MB of one sentence at a time.
    int64_t batch_tokens = 500;
    int threads = 1;  ///< batches decoded at the same time, one thread each
};

/// A model and its copies, one per thread (the modules keep per-forward
/// state, such as the last attention weights, so two threads must not run
/// one model at once).
class ModelReplicas {
public:
    /// `model` (which must outlive this) serves thread 0; threads - 1 copies
    /// of it (the same weights) are made for the others.
    ModelReplicas(nn::EncoderDecoder& model, int threads);
    /// How many models there are: one per thread.
    int size() const { return static_cast<int>(models_.size()); }
    /// The model thread `thread` decodes with.
    nn::EncoderDecoder& operator[](int thread) { return *models_[static_cast<size_t>(thread)]; }

private:
    std::vector<std::unique_ptr<core::Generator>> generators_;  // the copies' dropout layers point at these
    std::vector<std::shared_ptr<nn::EncoderDecoder>> copies_;
    std::vector<nn::EncoderDecoder*> models_;
};

/// Translates `sentences` in batches on `models.size()` threads (at most
/// options.threads of them); the result i is sentence i's. A sentence that
/// cannot be translated gets an empty text and the reason in `error`.
std::vector<Translation> translate_batches(ModelReplicas& models, const TokenizerPair& tokenizers,
                                           const std::vector<std::string>& sentences,
                                           const BatchTranslateOptions& options);

}  // namespace tformer::tasks
