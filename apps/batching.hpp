// What sits between the server's request handlers and the model: one worker
// thread that runs all model work, gathering the translation requests that
// arrive within a few milliseconds of each other into one batch, and a limit
// on how many requests may wait for it.
//
// Why one thread: the modules keep per-forward state (the last attention
// weights), so a model runs one forward at a time anyway, and every kernel
// already spreads over the cores with OpenMP. Why batches: decoding one
// sentence leaves most of each product's rows empty; sixteen sentences
// decoded together cost little more than one (docs/serve.md has figures).
#pragma once

#include "tasks/seq2seq.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace tformer::apps {

/// What sentences must share to be decoded in one batch: the model and the search.
struct SearchKey {
    const void* model = nullptr;  ///< which model (the studio's entry for it)
    int64_t beam = 1;             ///< 1: greedy
    double length_penalty = 1.0;
    int64_t n_best = 1;
    int64_t max_steps = 1;  ///< generated tokens at most
    bool operator==(const SearchKey&) const = default;
};

/// Decodes the sentences (ids each, <eos> included, unpadded) of one batch
/// with one search: one result per sentence, in order.
using BatchDecoder =
    std::function<std::vector<tasks::Decoded>(const SearchKey&, const std::vector<std::vector<int64_t>>& sources)>;

/// The worker thread and its queue.
class ModelWorker {
public:
    struct Options {
        /// How long the worker waits, after the first sentence of a batch
        /// arrives, for others to join it.
        std::chrono::microseconds window{2000};
        int64_t max_batch = 64;  ///< sentences per batch at most
    };
    /// How batching went, for tests and the load benchmark.
    struct Stats {
        int64_t batches = 0;    ///< calls of the decoder
        int64_t sentences = 0;  ///< sentences decoded
        int64_t largest = 0;    ///< the largest batch
    };

    ModelWorker(BatchDecoder decode, Options options);
    /// Finishes the work queued, then stops the thread.
    ~ModelWorker();
    ModelWorker(const ModelWorker&) = delete;
    ModelWorker& operator=(const ModelWorker&) = delete;

    /// Queues sentences for decoding; they join the batch of other requests
    /// with the same key that wait at the same time. The future holds one
    /// result per sentence, or the decoder's exception.
    std::future<std::vector<tasks::Decoded>> decode(const SearchKey& key, std::vector<std::vector<int64_t>> sources);
    /// Queues other work on the model (attention maps, the inside walk); it runs alone, in turn.
    std::future<void> run(std::function<void()> work);

    Stats stats() const;

private:
    struct Job {
        SearchKey key;
        std::vector<std::vector<int64_t>> sources;  // empty for work
        std::function<void()> work;
        std::promise<std::vector<tasks::Decoded>> decoded;
        std::promise<void> done;
    };
    void loop();
    std::vector<Job> take_batch(std::unique_lock<std::mutex>& lock);
    void decode_batch(std::vector<Job>& batch);

    BatchDecoder decode_;
    Options options_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> queue_;
    bool stopping_ = false;
    Stats stats_;
    std::thread thread_;
};

/// At most `slots` requests at a time; the others wait for a slot up to a
/// timeout (`tformer serve --max-concurrent`).
class Admission {
public:
    explicit Admission(int64_t slots);
    /// A slot, released when the Pass is destroyed.
    class Pass {
    public:
        explicit Pass(Admission* owner) : owner_(owner) {}
        Pass(Pass&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
        Pass& operator=(Pass&&) = delete;
        Pass(const Pass&) = delete;
        ~Pass();

    private:
        Admission* owner_;
    };
    /// A slot, or none when none came free within `timeout`.
    std::optional<Pass> enter(std::chrono::milliseconds timeout);
    int64_t slots() const { return slots_; }

private:
    const int64_t slots_;
    std::mutex mutex_;
    std::condition_variable freed_;
    int64_t used_ = 0;
};

}  // namespace tformer::apps
