// The JSON API of `tformer serve` (docs/serve.md), without HTTP: a request
// is a method, a path, its query parameters and a body; a response a status
// and a JSON body. apps/serve.cpp carries them over HTTP; the tests and the
// fuzz target call handle() directly too.
//
//   GET  /api/v1/models            the checkpoints served
//   GET  /api/v1/model?model=N     one checkpoint: config, parameters, tokenizer, training summary
//   POST /api/v1/tokenize          text -> pieces and ids
//   POST /api/v1/translate         sentences -> translations, scores, pieces, attention (every layer and head)
//   POST /api/v1/inside            one sentence through one encoder block, step by step
//   GET  /api/v1/runs              the training runs given with --run
//   GET  /api/v1/runs/N            one run's loss history
//   GET  /api/v1/runs/N/events     (apps/serve.cpp) server-sent events of new steps, from run_events()
#pragma once

#include "apps/batching.hpp"
#include "tasks/seq2seq.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tformer::apps {

struct StudioOptions {
    std::vector<std::string> checkpoints = {};  ///< served in this order; a request names one by its index
    std::vector<std::string> runs = {};         ///< training output folders (--run)
    int64_t max_concurrent = 16;                ///< requests using the model at once (decoding or waiting in its batch)
    std::chrono::milliseconds queue_timeout{10000};  ///< how long the others wait for a slot before a 503
    std::chrono::microseconds batch_window{2000};    ///< ModelWorker::Options::window
    int64_t max_batch = 64;                          ///< sentences decoded together at most
};

struct ApiRequest {
    std::string method;                         ///< GET, POST, ...
    std::string path;                           ///< e.g. /api/v1/translate
    std::map<std::string, std::string> params;  ///< the query string's parameters
    std::string body;
};

struct ApiResponse {
    int status = 200;
    std::string body;        ///< JSON
    int retry_after = 0;     ///< seconds (a 503's Retry-After), 0: none
    std::string allow = "";  ///< a 405's Allow header
};

/// Requests larger than this get 413 (the HTTP layer refuses them before reading them all).
constexpr size_t kMaxRequestBytes = 16 * 1024;

/// The checkpoints, the runs and the API over them.
class Studio {
public:
    /// Loads every checkpoint (IOError, ValueError for a bad one, naming it)
    /// and starts the model worker.
    explicit Studio(const StudioOptions& options);
    ~Studio();
    Studio(const Studio&) = delete;
    Studio& operator=(const Studio&) = delete;

    /// Any request; never throws (a bug in a handler is a 500 with its message).
    ApiResponse handle(const ApiRequest& request);

    /// The server-sent events of run `run` after byte `offset` of its step
    /// log: one "data: {...}" event per step written since, and the offset to
    /// read from next time; nullopt for a run that does not exist.
    struct Events {
        std::string text;
        uint64_t offset = 0;
    };
    std::optional<Events> run_events(size_t run, uint64_t offset) const;
    size_t num_runs() const;

    /// How many requests the model may serve at once (for tests that fill it).
    Admission& admission();
    ModelWorker::Stats batching() const;

    struct Model;  ///< a loaded checkpoint (apps/studio.cpp)
    struct Run;    ///< a run folder

private:
    const StudioOptions options_;
    std::vector<std::unique_ptr<Model>> models_;
    std::vector<std::unique_ptr<Run>> runs_;
    Admission admission_;
    std::unique_ptr<ModelWorker> worker_;  // last: it stops (finishing its queue) before the models go

    ApiResponse dispatch(const ApiRequest& request);
    // the endpoints, one each
    ApiResponse models(const ApiRequest& request);
    ApiResponse model_info(const ApiRequest& request);
    ApiResponse tokenize(const ApiRequest& request);
    ApiResponse translate(const ApiRequest& request);
    ApiResponse inside(const ApiRequest& request);
    ApiResponse runs(const ApiRequest& request);
    ApiResponse run_history(const ApiRequest& request);
};

}  // namespace tformer::apps
