#include "apps/batching.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <exception>

namespace tformer::apps {

ModelWorker::ModelWorker(BatchDecoder decode, Options options)
    : decode_(std::move(decode)), options_(options), thread_([this] { loop(); }) {}

ModelWorker::~ModelWorker() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

std::future<std::vector<tasks::Decoded>> ModelWorker::decode(const SearchKey& key,
                                                             std::vector<std::vector<int64_t>> sources) {
    Job job{.key = key, .sources = std::move(sources), .work = {}, .decoded = {}, .done = {}};
    auto result = job.decoded.get_future();
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(job));
    }
    wake_.notify_all();
    return result;
}

std::future<void> ModelWorker::run(std::function<void()> work) {
    Job job{.key = {}, .sources = {}, .work = std::move(work), .decoded = {}, .done = {}};
    auto result = job.done.get_future();
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(job));
    }
    wake_.notify_all();
    return result;
}

ModelWorker::Stats ModelWorker::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

void ModelWorker::loop() {
    // OpenMP keeps its thread count per thread: this one takes the program's (tformer serve --threads)
    core::set_num_threads(core::get_num_threads());
    std::unique_lock lock(mutex_);
    while (true) {
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued is done
        std::vector<Job> batch = take_batch(lock);
        lock.unlock();
        if (batch.front().work) {
            try {
                batch.front().work();
                batch.front().done.set_value();
            } catch (...) {
                batch.front().done.set_exception(std::current_exception());
            }
        } else {
            decode_batch(batch);
        }
        lock.lock();
    }
}

// The job at the front, and when it is a decoding, every queued job with
// its key that fits, after waiting up to the window for more to arrive.
std::vector<ModelWorker::Job> ModelWorker::take_batch(std::unique_lock<std::mutex>& lock) {
    std::vector<Job> batch;
    if (queue_.front().work) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
        return batch;
    }
    const SearchKey key = queue_.front().key;
    auto waiting = [&] {
        int64_t n = 0;
        for (const Job& j : queue_)
            if (!j.work && j.key == key) n += static_cast<int64_t>(j.sources.size());
        return n;
    };
    const auto deadline = std::chrono::steady_clock::now() + options_.window;
    while (!stopping_ && waiting() < options_.max_batch)
        if (wake_.wait_until(lock, deadline) == std::cv_status::timeout) break;
    int64_t taken = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
        const auto n = static_cast<int64_t>(it->sources.size());
        if (!it->work && it->key == key && (taken == 0 || taken + n <= options_.max_batch)) {
            taken += n;
            batch.push_back(std::move(*it));
            it = queue_.erase(it);
        } else {
            ++it;
        }
    }
    return batch;
}

void ModelWorker::decode_batch(std::vector<Job>& batch) {
    std::vector<std::vector<int64_t>> sources;
    for (Job& job : batch)
        for (auto& s : job.sources) sources.push_back(s);
    {  // counted before anyone is answered, so that an answer implies its batch is counted
        std::lock_guard lock(mutex_);
        ++stats_.batches;
        stats_.sentences += static_cast<int64_t>(sources.size());
        stats_.largest = std::max(stats_.largest, static_cast<int64_t>(sources.size()));
    }
    try {
        std::vector<tasks::Decoded> decoded = decode_(batch.front().key, sources);
        if (decoded.size() != sources.size())
            fail<ValueError>("ModelWorker: the decoder gave {} results for {} sentences", decoded.size(),
                             sources.size());
        size_t next = 0;
        for (Job& job : batch) {
            const size_t n = job.sources.size();
            job.decoded.set_value(std::vector<tasks::Decoded>(std::make_move_iterator(decoded.begin() + next),
                                                              std::make_move_iterator(decoded.begin() + next + n)));
            next += n;
        }
    } catch (...) {
        for (Job& job : batch) job.decoded.set_exception(std::current_exception());
    }
}

// ---- Admission ---------------------------------------------------------------------------------

Admission::Admission(int64_t slots) : slots_(slots) {}

Admission::Pass::~Pass() {
    if (!owner_) return;
    {
        std::lock_guard lock(owner_->mutex_);
        --owner_->used_;
    }
    owner_->freed_.notify_one();
}

std::optional<Admission::Pass> Admission::enter(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!freed_.wait_for(lock, timeout, [&] { return used_ < slots_; })) return std::nullopt;
    ++used_;
    return Pass(this);
}

}  // namespace tformer::apps
