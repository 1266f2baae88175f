// Many sentences in batches of similar length, on several threads (see batch_translate.hpp).
#include "tasks/batch_translate.hpp"

#include "core/blas.hpp"
#include "core/core.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <numeric>

namespace tformer::tasks {

using core::Tensor;

namespace {
// What build_model needs to make a copy of `m`, read back from its modules.
ModelConfig config_of(const nn::EncoderDecoder& m) {
    ModelConfig c;
    c.task = "translate";
    c.transformer = m.encoder->options;
    c.src_vocab_size = m.encoder->embedding->weight.size(0);
    c.tgt_vocab_size = m.decoder->dense->weight.size(0);
    c.tie_embeddings = m.decoder->dense->weight.impl() == m.encoder->embedding->weight.impl();
    return c;
}
}  // namespace

ModelReplicas::ModelReplicas(nn::EncoderDecoder& model, int threads) {
    if (threads < 1) fail<ValueError>("ModelReplicas: threads must be at least 1, got {}", threads);
    models_.push_back(&model);
    if (threads == 1) return;
    const ModelConfig config = config_of(model);
    const nn::StateDict weights = model.state_dict();
    for (int i = 1; i < threads; ++i) {
        generators_.push_back(std::make_unique<core::Generator>(0));
        copies_.push_back(build_model(config, *generators_.back()));
        copies_.back()->load_state_dict(weights);
        models_.push_back(copies_.back().get());
    }
}

namespace {
// One batch: the sentences it decodes together (indices into the list) and its padded length.
struct SourceBatch {
    std::vector<int64_t> sentences;
    int64_t steps = 0;  // S: the longest source, at least pad_to
};

// The sentences `order` (shortest first) cut into runs whose rows × longest
// stay within batch_tokens; a sentence longer than that makes a batch alone.
std::vector<SourceBatch> make_batches(const std::vector<PreparedSource>& sources, const std::vector<int64_t>& order,
                                      int64_t batch_tokens, int64_t pad_to) {
    std::vector<SourceBatch> batches;
    for (int64_t i : order) {
        const int64_t len = std::max(static_cast<int64_t>(sources[i].ids.size()), pad_to);
        if (batches.empty() ||
            static_cast<int64_t>(batches.back().sentences.size() + 1) * std::max(len, batches.back().steps) >
                batch_tokens)
            batches.emplace_back();
        batches.back().sentences.push_back(i);
        batches.back().steps = std::max(batches.back().steps, len);
    }
    return batches;
}

// Decodes one batch: src (B, S) ids padded with <pad>, lens (B).
std::vector<Decoded> decode_sources(nn::EncoderDecoder& model, const std::vector<PreparedSource>& sources,
                                    const SourceBatch& batch, const DecodeOptions& search) {
    const auto B = static_cast<int64_t>(batch.sentences.size()), S = batch.steps;
    std::vector<int64_t> src(static_cast<size_t>(B * S), Tokenizer::kPad), lens(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
        const std::vector<int64_t>& ids = sources[batch.sentences[b]].ids;
        std::copy(ids.begin(), ids.end(), src.begin() + b * S);
        lens[b] = static_cast<int64_t>(ids.size());
    }
    return decode_batch(model, core::from_vector(src, {B, S}), core::from_vector(lens, {B}), search);
}

// Calls work(batch index, thread) once for every batch index in [0, count),
// on `threads` threads that take the next index as they become free; the
// first exception is rethrown once all have stopped.
template <class Work>
void share_batches(int64_t count, int threads, Work&& work) {
    if (threads <= 1 || count <= 1) {  // the kernels may use every thread themselves
        for (int64_t i = 0; i < count; ++i) work(i, 0);
        return;
    }
    std::atomic<int64_t> next{0};
    std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
#pragma omp parallel num_threads(threads)
    {
        const int thread = omp_get_thread_num();
        try {
            for (int64_t i = next++; i < count; i = next++) work(i, thread);
        } catch (...) {
            errors[static_cast<size_t>(thread)] = std::current_exception();
            next = count;  // the others stop after their current batch
        }
    }
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}
}  // namespace

std::vector<Translation> translate_batches(ModelReplicas& models, const TokenizerPair& tok,
                                           const std::vector<std::string>& sentences,
                                           const BatchTranslateOptions& options) {
    if (options.batch_tokens < 1)
        fail<ValueError>("translate: batch_tokens must be at least 1, got {}", options.batch_tokens);
    if (options.translate.max_len < 2)
        fail<ValueError>("translate: max_len must be at least 2, got {}", options.translate.max_len);
    const DecodeOptions search = search_options(options.translate);
    std::vector<Translation> out(sentences.size());
    std::vector<PreparedSource> sources(sentences.size());
    std::vector<int64_t> order;  // the sentences that can be translated, shortest first
    for (size_t i = 0; i < sentences.size(); ++i) {
        try {
            sources[i] = prepare_source(*tok.src, sentences[i], options.translate.max_len);
            order.push_back(static_cast<int64_t>(i));
        } catch (const ValueError& e) {
            out[i].error = e.what();
        }
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return sources[a].ids.size() < sources[b].ids.size(); });
    const std::vector<SourceBatch> batches =
        make_batches(sources, order, options.batch_tokens, options.translate.pad_to);
    // the longest batches first, so that no thread starts a long one when the others are nearly done
    const auto count = static_cast<int64_t>(batches.size());
    const int threads = core::blas::is_openmp_build() ? std::min(options.threads, models.size()) : 1;
    share_batches(count, threads, [&](int64_t i, int thread) {
        const SourceBatch& batch = batches[static_cast<size_t>(count - 1 - i)];
        const std::vector<Decoded> decoded = decode_sources(models[thread], sources, batch, search);
        for (size_t b = 0; b < decoded.size(); ++b) {
            const int64_t s = batch.sentences[b];
            out[s] = translation_of(tok, sources[s], decoded[b]);
        }
    });
    return out;
}

}  // namespace tformer::tasks
