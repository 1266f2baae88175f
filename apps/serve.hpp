// `tformer serve`: the studio's API (apps/studio.hpp) and its page (web/)
// over HTTP, on Debian's cpp-httplib. Only apps/serve.cpp includes
// httplib.h. docs/serve.md documents the endpoints and the limits.
#pragma once

#include "apps/studio.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tformer::apps {

/// Everything `tformer serve` can set.
struct ServeArgs {
    std::vector<std::string> checkpoints;  ///< --checkpoint, repeatable
    std::vector<std::string> runs;         ///< --run, repeatable
    std::string host = "127.0.0.1";
    int port = 8080;              ///< 0: any free port (printed)
    int64_t max_concurrent = 16;  ///< requests using the model at once
    double queue_timeout = 10;    ///< seconds the others wait before a 503
    double batch_window = 2;      ///< milliseconds a batch waits for more requests
    std::string web;              ///< the page's folder (default: the installed one, else the source tree's)
    int threads = 0;              ///< kernel threads (0: all cores)
};

int run_serve(const ServeArgs& args);

/// The page's folder: `given` when not empty, else share/tformer/web beside
/// the installed program, else the source tree's web/. IOError when it has no index.html.
std::string find_web_dir(const std::string& given);

/// A Studio served over HTTP. Static files come from `web_dir` only; every
/// response carries a Content-Security-Policy allowing this origin alone.
class HttpServer {
public:
    /// `threads`: connections served at once (requests waiting for the model hold one each).
    HttpServer(Studio& studio, const std::string& web_dir, int threads);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    /// Binds host:port (port 0: a free one) and returns the port; IOError when it cannot.
    int bind(const std::string& host, int port);
    /// Serves until stop(); then returns once the requests in flight are answered.
    void run();
    /// Stops taking connections and ends the event streams; run() returns
    /// after the requests in flight. Safe from any thread.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tformer::apps
