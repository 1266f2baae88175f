// The load test of `tformer serve` (a benchmark, not a test): starts the
// server on a free loopback port, then for each client count K runs K
// clients, each sending one translation after another, for a bounded time
// and number of requests, and prints requests per second, the median and
// 99th-percentile latency, the errors, and at the end the server's peak
// resident memory. It stops the server (SIGTERM) and itself.
//
//   build/release/bench/bench_serve --checkpoint runs/translate/checkpoint.safetensors
//   build/release/bench/bench_serve --checkpoint CK --clients 1,4,16 --seconds 20 --beam 4
//
// Every request goes to 127.0.0.1 only.
#include <fmt/format.h>
#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {
using Clock = std::chrono::steady_clock;

struct Options {
    std::string tformer = std::string(TFORMER_BINARY_DIR) + "/apps/tformer";
    std::string checkpoint;
    std::vector<int> clients = {1, 16};
    double seconds = 10;           ///< per client count
    int64_t max_requests = 20000;  ///< per client count
    int64_t beam = 4;
    std::string sentence = "I think we should go to the beach this weekend.";  // 10 words
    std::string batch_window = "2";                                            // ms, passed to tformer serve
};

// tformer serve on a free port, its output into a pipe: the pid, the port
// (read from the address it prints) and the pipe's end to read the rest from
struct Server {
    pid_t pid = 0;
    int port = 0;
    FILE* output = nullptr;
};
Server start_server(const Options& o) {
    const int most = *std::max_element(o.clients.begin(), o.clients.end());
    std::vector<std::string> args = {
        o.tformer,        "serve",       "--checkpoint",     o.checkpoint,
        "--port",         "0",           "--max-concurrent", std::to_string(std::max(16, most)),
        "--batch-window", o.batch_window};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("cannot make a pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, out[1], 2);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    Server server;
    const int error = posix_spawn(&server.pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (error != 0) throw std::runtime_error("cannot start " + o.tformer);
    server.output = fdopen(out[0], "r");
    const std::regex address(R"(the page: http://[^:]+:([0-9]+)/)");
    std::string said;
    char line[4096];
    while (std::fgets(line, sizeof line, server.output)) {  // ends when it exits
        said += line;
        std::cmatch m;
        if (std::regex_search(line, m, address)) {
            server.port = std::stoi(m[1].str());
            return server;
        }
    }
    waitpid(server.pid, nullptr, 0);
    throw std::runtime_error("tformer serve stopped:\n" + said);
}

// VmHWM of a process: its peak resident memory, in MB
double peak_rss_mb(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.starts_with("VmHWM:")) return std::stod(line.substr(6)) / 1024.0;
    return 0;
}

struct Figures {
    int64_t requests = 0, errors = 0;
    double seconds = 0;
    std::vector<double> latencies_ms;
    std::map<std::string, int64_t> error_kinds;  ///< what failed: the HTTP status or httplib's error, and how often
};

Figures run_clients(int port, int clients, const Options& o) {
    const std::string body = nlohmann::json({{"text", o.sentence}, {"beam", o.beam}}).dump();
    std::atomic<int64_t> sent{0};
    std::vector<Figures> per(static_cast<size_t>(clients));
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration<double>(o.seconds);
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c)
        threads.emplace_back([&, c] {
            httplib::Client client("127.0.0.1", port);
            client.set_keep_alive(true);
            client.set_tcp_nodelay(true);  // as a browser does: a request's headers and body go out at once
            client.set_read_timeout(60);
            Figures& f = per[static_cast<size_t>(c)];
            while (Clock::now() < deadline && sent++ < o.max_requests) {
                const auto t0 = Clock::now();
                auto r = client.Post("/api/v1/translate", body, "application/json");
                f.latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
                ++f.requests;
                if (r && r->status == 200) continue;
                ++f.errors;
                ++f.error_kinds[r ? fmt::format("HTTP {}: {}", r->status, r->body.substr(0, 200))
                                  : fmt::format("no answer: {}", httplib::to_string(r.error()))];
            }
        });
    for (auto& t : threads) t.join();
    Figures all;
    all.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    for (const Figures& f : per) {
        all.requests += f.requests;
        all.errors += f.errors;
        all.latencies_ms.insert(all.latencies_ms.end(), f.latencies_ms.begin(), f.latencies_ms.end());
        for (const auto& [kind, n] : f.error_kinds) all.error_kinds[kind] += n;
    }
    std::sort(all.latencies_ms.begin(), all.latencies_ms.end());
    return all;
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())))];
}
}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"bench_serve: the load test of tformer serve, on loopback"};
    app.add_option("--checkpoint", o.checkpoint, "the checkpoint to serve")->required();
    app.add_option("--tformer", o.tformer, "the tformer program")->capture_default_str();
    app.add_option("--clients", o.clients, "client counts to run, one after another")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--seconds", o.seconds, "time per client count")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 600.0));
    app.add_option("--max-requests", o.max_requests, "requests per client count at most")
        ->capture_default_str()
        ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
    app.add_option("--beam", o.beam, "beam size (1: greedy)")->capture_default_str()->check(CLI::Range(1, 16));
    app.add_option("--sentence", o.sentence, "the sentence every request translates")->capture_default_str();
    app.add_option("--batch-window", o.batch_window, "tformer serve --batch-window (ms)")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    for (int k : o.clients)
        if (k < 1 || k > 256) {
            fmt::print(stderr, "bench_serve: --clients must be from 1 to 256, got {}\n", k);
            return 2;
        }
    try {
        const Server server = start_server(o);
        const int port = server.port;
        {  // warm-up: the first requests pay for page faults and allocations
            httplib::Client c("127.0.0.1", port);
            for (int i = 0; i < 10; ++i)
                c.Post("/api/v1/translate", nlohmann::json({{"text", o.sentence}, {"beam", o.beam}}).dump(),
                       "application/json");
        }
        fmt::print("tformer serve, {}: \"{}\", beam {}, batch window {} ms; at most {:.0f} s and {} requests per row\n",
                   o.checkpoint, o.sentence, o.beam, o.batch_window, o.seconds, o.max_requests);
        fmt::print("{:>8} {:>9} {:>10} {:>9} {:>9} {:>7}\n", "clients", "requests", "req/s", "p50 ms", "p99 ms",
                   "errors");
        double single = 0;
        for (int k : o.clients) {
            const Figures f = run_clients(port, k, o);
            const double rate = static_cast<double>(f.requests) / f.seconds;
            if (k == 1) single = rate;
            fmt::print("{:>8} {:>9} {:>10.1f} {:>9.1f} {:>9.1f} {:>7}{}\n", k, f.requests, rate,
                       percentile(f.latencies_ms, 0.5), percentile(f.latencies_ms, 0.99), f.errors,
                       single > 0 && k > 1 ? fmt::format("   ({:.1f}x one client)", rate / single) : "");
            for (const auto& [kind, n] : f.error_kinds) fmt::print("{:>8} failed: {}\n", n, kind);
        }
        fmt::print("server peak RSS: {:.0f} MB\n", peak_rss_mb(server.pid));
        kill(server.pid, SIGTERM);
        char line[4096];
        while (std::fgets(line, sizeof line, server.output)) fmt::print("{}", line);  // how it stopped
        int status = 0;
        waitpid(server.pid, &status, 0);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "bench_serve: {}\n", e.what());
        return 1;
    }
}
