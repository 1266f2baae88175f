#include "apps/serve.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <omp.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

namespace tformer::apps {

namespace fs = std::filesystem;

namespace {

// Every response: scripts, styles, pictures and connections from this origin
// only (no inline script, nothing fetched from elsewhere), never framed; no
// content-type guessing; no referrer sent anywhere.
const httplib::Headers kSecurityHeaders = {
    {"Content-Security-Policy",
     "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
     "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"Cross-Origin-Opener-Policy", "same-origin"},
    {"Cross-Origin-Resource-Policy", "same-origin"}};

// The kinds of file the page is made of; any other file is not served.
const std::map<std::string, std::string> kContentTypes = {{".html", "text/html; charset=utf-8"},
                                                          {".css", "text/css; charset=utf-8"},
                                                          {".js", "text/javascript; charset=utf-8"},
                                                          {".svg", "image/svg+xml"},
                                                          {".png", "image/png"},
                                                          {".ico", "image/x-icon"}};

constexpr int kMaxStreams = 8;  // event streams open at once (each holds a connection)

// The file under `root` (canonical) that URL path `path` names, or nothing:
// no "..", no backslash, no empty segment, nothing that resolves (through a
// symbolic link) outside root, only regular files of the kinds above.
std::optional<fs::path> static_file(const fs::path& root, const std::string& path) {
    if (path.empty() || path.front() != '/') return std::nullopt;
    const std::string relative = path == "/" ? "index.html" : path.substr(1);
    if (relative.find("..") != std::string::npos || relative.find('\\') != std::string::npos ||
        relative.find('\0') != std::string::npos || relative.find("//") != std::string::npos || relative.front() == '/')
        return std::nullopt;
    std::error_code ec;
    const fs::path real = fs::canonical(root / relative, ec);
    if (ec) return std::nullopt;
    const auto [r, _] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
    if (r != root.end() || !fs::is_regular_file(real, ec) || !kContentTypes.count(real.extension().string()))
        return std::nullopt;
    return real;
}

std::string error_json(int status, const std::string& message) {
    return fmt::format(R"({{"error":{{"status":{},"message":{}}}}})", status,
                       nlohmann::json(message).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

bool is_loopback(const std::string& host) { return host == "localhost" || host == "::1" || host.starts_with("127."); }

}  // namespace

// ---- the server -----------------------------------------------------------------------------------

struct HttpServer::Impl {
    Studio& studio;
    fs::path web;
    httplib::Server http;
    std::mutex mutex;
    std::condition_variable stopped;  // wakes the event streams
    bool stopping = false;
    std::atomic<int> streams{0};

    Impl(Studio& s, const std::string& web_dir, int threads) : studio(s), web(fs::canonical(web_dir)) {
        http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
        http.set_payload_max_length(kMaxRequestBytes);
        // SO_REUSEADDR (a restarted server binds at once), not httplib's default SO_REUSEPORT as well,
        // with which a second server would share a port already taken instead of being refused
        http.set_socket_options([](auto sock) {
            int yes = 1;
            setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        });
        http.set_default_headers(kSecurityHeaders);
        // answers are written as headers, then body: with Nagle's algorithm the body would wait for
        // the client's delayed ACK of the headers (tens of milliseconds on a kept-alive connection)
        http.set_tcp_nodelay(true);
        http.set_keep_alive_timeout(2);  // an idle connection holds a thread; stop() waits for it this long at most
        http.set_read_timeout(10);
        http.Get(R"(/api/v1/runs/([^/]+)/events)", [this](const auto& req, auto& res) { events(req, res); });
        auto api = [this](const httplib::Request& req, httplib::Response& res) { call_api(req, res); };
        http.Get("/api/.*", api);
        http.Post("/api/.*", api);
        http.Put("/api/.*", api);
        http.Delete("/api/.*", api);
        http.Patch("/api/.*", api);
        http.Get(".*", [this](const auto& req, auto& res) { serve_file(req, res); });
        http.set_error_handler(
            httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
                if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // an answer of ours
                const std::string message =
                    res.status == 413   ? fmt::format("the request body is larger than {} bytes", kMaxRequestBytes)
                    : res.status == 404 ? fmt::format("not found: {}", req.path)
                                        : fmt::format("the request could not be read ({})", res.status);
                if (req.path.starts_with("/api/"))
                    res.set_content(error_json(res.status, message), "application/json");
                else
                    res.set_content(message + "\n", "text/plain; charset=utf-8");
                return httplib::Server::HandlerResponse::Handled;
            }));
    }

    void call_api(const httplib::Request& req, httplib::Response& res) {
        ApiRequest r{.method = req.method, .path = req.path, .params = {}, .body = req.body};
        for (const auto& [key, value] : req.params) r.params.emplace(key, value);
        const ApiResponse out = studio.handle(r);
        res.status = out.status;
        res.set_content(out.body, "application/json");
        res.set_header("Cache-Control", "no-store");
        if (out.retry_after > 0) res.set_header("Retry-After", std::to_string(out.retry_after));
        if (!out.allow.empty()) res.set_header("Allow", out.allow);
    }

    void serve_file(const httplib::Request& req, httplib::Response& res) {
        const auto file = static_file(web, req.path);
        if (!file) {
            res.status = 404;
            return;
        }
        std::ifstream in(*file, std::ios::binary);
        std::string content((std::istreambuf_iterator<char>(in)), {});
        res.set_content(std::move(content), kContentTypes.at(file->extension().string()));
        res.set_header("Cache-Control", "no-cache");
    }

    // GET /api/v1/runs/N/events: the run's new steps as server-sent events,
    // from byte ?from= (or Last-Event-ID, when the browser reconnects) of its
    // progress.csv, until the client goes or the server stops.
    void events(const httplib::Request& req, httplib::Response& res) {
        auto number = [](const std::string& s) -> std::optional<uint64_t> {
            uint64_t v = 0;
            const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
            return v;
        };
        const auto run = number(req.matches[1].str());
        std::string from = req.has_param("from") ? req.get_param_value("from") : "0";
        if (req.has_header("Last-Event-ID")) from = req.get_header_value("Last-Event-ID");
        const auto offset = number(from);
        if (!run || !offset || !studio.run_events(*run, *offset)) {
            res.status = 404;
            res.set_content(error_json(404, fmt::format("no run '{}' with events from byte '{}' (GET /api/v1/runs)",
                                                        req.matches[1].str(), from)),
                            "application/json");
            return;
        }
        if (++streams > kMaxStreams) {
            --streams;
            res.status = 503;
            res.set_header("Retry-After", "5");
            res.set_content(error_json(503, fmt::format("{} event streams are open already", kMaxStreams)),
                            "application/json");
            return;
        }
        res.set_header("Cache-Control", "no-store");
        auto position = std::make_shared<uint64_t>(*offset);
        auto quiet = std::make_shared<int>(0);
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, run = *run, position, quiet](size_t, httplib::DataSink& sink) {
                const auto e = studio.run_events(run, *position);
                std::string text = e ? e->text : std::string();
                if (e) *position = e->offset;
                if (text.empty() && ++*quiet % 30 == 0) text = ": still here\n\n";  // every 15 s: finds a gone client
                if (!text.empty() && !sink.write(text.data(), text.size())) return false;
                if (!text.empty()) *quiet = 0;
                std::unique_lock lock(mutex);
                if (stopped.wait_for(lock, std::chrono::milliseconds(500), [this] { return stopping; })) sink.done();
                return true;
            },
            [this](bool) { --streams; });
    }
};

HttpServer::HttpServer(Studio& studio, const std::string& web_dir, int threads)
    : impl_(std::make_unique<Impl>(studio, web_dir, threads)) {}

HttpServer::~HttpServer() = default;

int HttpServer::bind(const std::string& host, int port) {
    const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : impl_->http.bind_to_port(host, port) ? port : -1;
    if (bound < 0)
        fail<IOError>("serve: cannot listen on {}:{}: is another server using the port? (--port chooses another)", host,
                      port);
    return bound;
}

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::stop() {
    {
        std::lock_guard lock(impl_->mutex);
        impl_->stopping = true;
    }
    impl_->stopped.notify_all();
    impl_->http.stop();
}

// ---- tformer serve --------------------------------------------------------------------------------

std::string find_web_dir(const std::string& given) {
    std::vector<fs::path> candidates;
    if (!given.empty()) {
        candidates.push_back(given);
    } else {
        std::error_code ec;
        const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
        if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share" / "tformer" / "web");
        candidates.push_back(fs::path(TFORMER_SOURCE_DIR) / "web");
    }
    for (const fs::path& dir : candidates)
        if (fs::is_regular_file(dir / "index.html")) return dir.string();
    fail<IOError>("serve: no page found ({} has no index.html){}", candidates.front().string(),
                  given.empty() ? "; give its folder with --web DIR" : "");
}

namespace {
// SIGINT and SIGTERM: the handler only writes the signal's number into a pipe
// (async-signal-safe); a thread reading it stops the server, which answers
// the requests in flight before run() returns. A second signal ends the
// process at once.
int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};

extern "C" void on_serve_stop_signal(int sig) {
    if (g_signals++ > 0) _exit(128 + sig);
    const char c = static_cast<char>(sig);
    [[maybe_unused]] const auto n = write(g_signal_pipe[1], &c, 1);
}
}  // namespace

int run_serve(const ServeArgs& a) {
    if (a.threads > 0) core::set_num_threads(std::min(a.threads, omp_get_num_procs()));
    const std::string web = find_web_dir(a.web);
    if (!is_loopback(a.host))
        fmt::print(stderr,
                   "tformer serve: warning: listening on {}, not on this machine's loopback address: anyone who can "
                   "reach this port can use the page and the API; they have no authentication\n",
                   a.host);
    Studio studio({.checkpoints = a.checkpoints,
                   .runs = a.runs,
                   .max_concurrent = a.max_concurrent,
                   .queue_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.queue_timeout * 1000)),
                   .batch_window = std::chrono::microseconds(static_cast<int64_t>(a.batch_window * 1000)),
                   .max_batch = 64});
    // connections served at once: every request the model may hold, and room for the page's files and streams
    HttpServer server(studio, web, static_cast<int>(a.max_concurrent) + 16);
    const int port = server.bind(a.host, a.port);

    if (pipe(g_signal_pipe) != 0) fail<IOError>("serve: cannot make a pipe: {}", std::strerror(errno));
    std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-answer is an error on that connection, not the end of us
    std::signal(SIGINT, on_serve_stop_signal);
    std::signal(SIGTERM, on_serve_stop_signal);
    int stop_signal = 0;
    std::atomic<bool> done{false};
    std::thread watcher([&] {
        char c = 0;
        while (read(g_signal_pipe[0], &c, 1) < 0 && errno == EINTR) {
        }
        stop_signal = c;  // 0: the pipe was closed, the server is done
        // again until run() has returned: a signal that came before it started listening stops it too
        while (c != 0 && !done) {
            server.stop();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });

    const std::string host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
    fmt::print("tformer serve: {} checkpoint(s) ({}){}; the page: http://{}:{}/ (Ctrl-C stops)\n", a.checkpoints.size(),
               fmt::join(a.checkpoints, ", "), a.runs.empty() ? "" : fmt::format(", {} run(s)", a.runs.size()), host,
               port);
    std::fflush(stdout);
    server.run();
    done = true;
    close(g_signal_pipe[1]);  // wakes the watcher if no signal did
    watcher.join();
    const ModelWorker::Stats s = studio.batching();
    fmt::print("tformer serve: stopped{}; {} sentences decoded in {} batches\n",
               stop_signal == SIGINT    ? " by SIGINT"
               : stop_signal == SIGTERM ? " by SIGTERM"
                                        : "",
               s.sentences, s.batches);
    return 0;
}

}  // namespace tformer::apps
