// What the fuzz targets share: a file to hand the loaders (they take paths,
// as the tformer program does), one thread, and the rule for exceptions.
//
// The rule: a loader may refuse an input only with a tformer::Error (a
// message naming the operation and the value). Every other exception
// (std::length_error, nlohmann's, std::bad_alloc, ...) leaves the target,
// and libFuzzer reports it as a crash: it would reach the user as an
// unclear message like "stoll" or "vector::_M_default_append".
#pragma once

#include "core/parallel.hpp"

#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace tformer::fuzz {

/// A file of this process (in /dev/shm when there is one, so no disk is
/// touched) that holds `size` bytes of `data` once this returns.
inline const std::string& write_input(const uint8_t* data, size_t size, const char* name) {
    static const std::string path = [name] {
        const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
        return std::string(dir) + "/tformer-fuzz-" + name + "-" + std::to_string(getpid());
    }();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::abort();  // not a finding of the target: the machine cannot hold the input
    }
    static const bool removed_at_exit = [] { return std::atexit([] { std::remove(path.c_str()); }) == 0; }();
    (void)removed_at_exit;
    return path;
}

/// One thread for our kernels and OpenBLAS: runs are then reproducible and
/// cheap, and libFuzzer's timing is per input.
inline void one_thread() { core::set_num_threads(1); }

}  // namespace tformer::fuzz
