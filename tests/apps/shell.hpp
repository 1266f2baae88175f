// Running a shell command from a test and collecting what it prints: the
// command-line tests (test_cli.cpp) and the PyTorch comparison (test_torch.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <cstdio>
#include <string>

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

}  // namespace tformer::testing
