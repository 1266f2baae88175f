// Running a shell command or the tformer program from a test and collecting
// what it prints: the command-line tests (test_cli.cpp, test_reliability.cpp)
// and the PyTorch comparison (test_torch.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <sys/wait.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tformer::testing {

struct ShellResult {
    int status;          ///< the exit status; -1 when the command did not exit (killed by a signal)
    std::string output;  ///< its stdout (add 2>&1 to the command for stderr too)
};

/// Runs `command` with /bin/sh and waits for it.
inline ShellResult run_shell(const std::string& command) {
    FILE* pipe = popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    const int status = pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// Starts `args` (argv[0] is the program, looked up in PATH) without a shell, with stdout and stderr into the file
/// `log` ("/dev/null" to drop them); returns its pid, for the tests that signal or kill it.
inline pid_t spawn_logged(std::vector<std::string> args, const std::string& log) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    pid_t pid = 0;
    const int error = posix_spawnp(&pid, args[0].c_str(), &files, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    REQUIRE(error == 0);
    return pid;
}

/// The bytes of the file at `path` ("" when it cannot be read).
inline std::string file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// What tformer printed, stdout and stderr apart (so that output lines can be counted).
struct SplitRun {
    int status = -1;  ///< exit status; -1 when killed by a signal or stopped after `seconds`
    std::string out, err;
};

/// Runs tformer with its arguments as they are (no shell) and stdin from a
/// string; a run still going after `seconds` is killed (status -1), so a
/// hang fails the test instead of stalling it.
inline SplitRun run_args(const std::vector<std::string>& args, const std::string& stdin_text = "", int seconds = 600) {
    // files of this process and this call: ctest runs test cases as parallel
    // processes, and with fixed names one test could read another's stderr
    static int calls = 0;
    const std::string prefix = std::filesystem::temp_directory_path().string() + "/tformer-cli-" +
                               std::to_string(::getpid()) + "-" + std::to_string(++calls);
    const std::string in = prefix + "-stdin", out = prefix + "-stdout", err = prefix + "-stderr";
    std::ofstream(in, std::ios::binary) << stdin_text;
    std::vector<std::string> argv_s = {std::string(TFORMER_BINARY_DIR) + "/apps/tformer"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 0, in.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&files, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&files);
    int status = 0;
    bool ended = false;
    for (int i = 0; i < seconds * 100 && !ended; ++i) {
        ended = waitpid(pid, &status, WNOHANG) == pid;
        if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!ended) {
        kill(pid, SIGKILL);
        REQUIRE(waitpid(pid, &status, 0) == pid);
    }
    SplitRun run{ended && WIFEXITED(status) ? WEXITSTATUS(status) : -1, file_bytes(out), file_bytes(err)};
    for (const std::string& f : {in, out, err}) std::filesystem::remove(f);
    return run;
}

/// The first `n` lines of the bundled corpus, as the file <dir>/head.txt.
inline std::string corpus_head(const std::string& dir, int n) {
    std::ifstream in(std::string(TFORMER_SOURCE_DIR) + "/data/fra-eng/fra.txt");
    std::ofstream out(dir + "/head.txt");
    std::string line;
    for (int i = 0; i < n && std::getline(in, line); ++i) out << line << '\n';
    return dir + "/head.txt";
}

}  // namespace tformer::testing
