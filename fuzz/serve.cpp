// Fuzz target (e): what `tformer serve` does with a request (apps/studio.hpp,
// the handler behind the HTTP layer): the JSON body parsed field by field,
// the dispatch on method and path, the sentences tokenized, checked against
// the model's limit, gathered into a batch and decoded, the attention maps
// and the encoder-block walk.
//
// An input is one request. Its first byte picks a method and an endpoint
// from the table below and the rest is the body (for GET /api/v1/model, the
// value of ?model=); with the first byte's top bit set, the path is instead
// the input's first line, the method the bit below it, and the body the rest.
// The models are the committed checkpoint seeds (fuzz/corpus/checkpoint/): a
// SentencePiece translator, a word-vocabulary one and the copy task, tiny and
// barely trained, which is all decoding needs to run its course.
//
// A finding: a 500 (a handler let an exception through: the client would
// read "internal error" instead of what it did wrong), a status outside the
// API's list, a body that is not JSON, or a 200 without its answer.
#include "fuzz/fuzz_util.hpp"

#include "apps/studio.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>

namespace {
using namespace tformer;

std::unique_ptr<apps::Studio> studio;

struct Route {
    const char* method;
    const char* path;
    const char* answer;  ///< a field every 200 answer holds
};
const Route kRoutes[] = {{"POST", "/api/v1/translate", "sentences"}, {"POST", "/api/v1/tokenize", "pieces"},
                         {"POST", "/api/v1/inside", "steps"},        {"GET", "/api/v1/model", "config"},
                         {"GET", "/api/v1/models", "models"},        {"GET", "/api/v1/runs", "runs"},
                         {"GET", "/api/v1/runs/0", "steps"},         {"POST", "/api/v1/models", "models"}};

[[noreturn]] void finding(const std::string& what) { tformer::fuzz::finding("fuzz_serve", what); }
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    fuzz::one_thread();
    const std::filesystem::path seeds = std::filesystem::path(TFORMER_SOURCE_DIR) / "fuzz" / "corpus" / "checkpoint";
    // a run folder with a short step log, as `tformer train` writes it
    const std::filesystem::path run =
        std::filesystem::temp_directory_path() / ("tformer-fuzz-serve-" + std::to_string(getpid()));
    std::filesystem::create_directories(run);
    std::ofstream(run / "progress.csv") << "step,loss,lr,seconds\n1,2.5,0.001,0.1\n2,2.25,0.001,0.2\n";
    studio = std::make_unique<apps::Studio>(
        apps::StudioOptions{.checkpoints = {(seeds / "seed-corpus-sentencepiece").string(),
                                            (seeds / "seed-d2l").string(), (seeds / "seed-copy").string()},
                            .runs = {run.string()},
                            .max_concurrent = 4,
                            .queue_timeout = std::chrono::milliseconds(1000),
                            .batch_window = std::chrono::microseconds(0),  // one request at a time: no one to wait for
                            .max_batch = 64});
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    apps::ApiRequest request;
    const char* answer = nullptr;
    if (data[0] & 0x80) {  // the path from the input
        const size_t line = std::min(input.find('\n'), input.size());
        request.method = data[0] & 0x40 ? "POST" : "GET";
        request.path = std::string(input.substr(0, line));
        request.body = std::string(input.substr(std::min(line + 1, input.size())));
    } else {
        const Route& r = kRoutes[data[0] % std::size(kRoutes)];
        request.method = r.method;
        request.path = r.path;
        answer = r.answer;
        if (request.path == std::string_view("/api/v1/model"))
            request.params["model"] = std::string(input);
        else
            request.body = std::string(input);
    }
    const apps::ApiResponse response = studio->handle(request);
    static const std::set<int> statuses = {200, 400, 404, 405, 413, 422, 503};
    if (!statuses.count(response.status))
        finding("status " + std::to_string(response.status) + " for " + request.method + " " + request.path + ": " +
                response.body);
    nlohmann::json body;
    try {
        body = nlohmann::json::parse(response.body);
    } catch (const nlohmann::json::exception& e) {
        finding(std::string("the answer is not JSON: ") + e.what());
    }
    if (response.status != 200 && !(body.contains("error") && body["error"].contains("message")))
        finding("an error answer without a message: " + response.body);
    if (response.status == 200 && answer && !body.contains(answer))
        finding(std::string("a 200 answer without '") + answer + "': " + response.body);
    return 0;
}
