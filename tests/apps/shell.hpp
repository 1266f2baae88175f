// Running a shell command from a test and collecting what it prints: the
// command-line tests (test_cli.cpp) and the PyTorch comparison (test_torch.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <sys/wait.h>
#include <cstdio>
#include <string>
#include <vector>

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

}  // namespace tformer::testing
