// core::AtomicFile: a save either replaces the file whole or leaves the old
// one; leftovers of killed saves are cleaned up by the next save. Reading:
// only regular files are opened, a FIFO or a device is refused at once.
#include "core/error.hpp"
#include "core/file.hpp"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace fs = std::filesystem;
using namespace tformer;

namespace {
fs::path fresh_dir(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("tformer-file-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void touch(const fs::path& p) { std::ofstream(p) << "partial"; }

// A PID that no process has: a child that has exited and been reaped.
pid_t dead_pid() {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return pid;
}
}  // namespace

TEST_CASE("write_file_atomic: replaces the file whole and leaves no temporary behind", "[core][file]") {
    const fs::path dir = fresh_dir("write");
    const fs::path path = dir / "summary.txt";
    core::write_file_atomic(path.string(), "first", "test");
    core::write_file_atomic(path.string(), "second, longer", "test");
    CHECK(read(path) == "second, longer");
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
    fs::remove_all(dir);
}

TEST_CASE("write_file_atomic: a failure names the operation and the path, and keeps the old file", "[core][file]") {
    const fs::path dir = fresh_dir("fail");
    SECTION("missing directory") {
        const std::string path = (dir / "nope" / "x.csv").string();
        CHECK_THROWS_AS(core::write_file_atomic(path, "x", "train"), IOError);
        CHECK_THROWS_WITH(core::write_file_atomic(path, "x", "train"),
                          Catch::StartsWith("train: cannot write '" + path + "': cannot create a temporary file in"));
    }
    SECTION("a directory is not a file") {
        CHECK_THROWS_WITH(core::write_file_atomic(dir.string() + "/", "x", "train"),
                          Catch::Contains("the path names a directory, not a file"));
    }
    SECTION("file-size limit (ulimit -f): EFBIG, not death by SIGXFSZ; the old file survives") {
        const fs::path path = dir / "big.bin";
        core::write_file_atomic(path.string(), "old contents", "test");
        const pid_t child = ::fork();
        if (child == 0) {  // the limit and the signal disposition stay in the child
            std::signal(SIGXFSZ, SIG_IGN);
            const rlimit limit{4096, 4096};
            ::setrlimit(RLIMIT_FSIZE, &limit);
            try {
                core::write_file_atomic(path.string(), std::string(100000, 'x'), "test");
            } catch (const IOError& e) {
                const std::string what = e.what();
                ::_exit(what.find("File too large") != std::string::npos ? 0 : 2);
            }
            ::_exit(3);
        }
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
        CHECK(read(path) == "old contents");
        CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
    }
    fs::remove_all(dir);
}

TEST_CASE("remove_stale_temporaries: only leftovers of processes that no longer run", "[core][file]") {
    const fs::path dir = fresh_dir("stale");
    const fs::path path = dir / "checkpoint.safetensors";
    const std::string dead = std::to_string(dead_pid()), alive = std::to_string(::getppid());
    touch(dir / (".checkpoint.safetensors.tmp-" + dead + "-0"));
    touch(dir / (".checkpoint.safetensors.tmp-" + dead + "-17"));
    touch(dir / (".checkpoint.safetensors.tmp-" + alive + "-0"));                       // a save in progress elsewhere
    touch(dir / (".checkpoint.safetensors.tmp-" + std::to_string(::getpid()) + "-0"));  // ours
    touch(dir / (".other.safetensors.tmp-" + dead + "-0"));                             // another file's
    touch(dir / (".checkpoint.safetensors.tmp-x-0"));                                   // not our pattern
    touch(dir / "notes.txt");
    CHECK(core::remove_stale_temporaries(path) == 2);
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 5);
    CHECK_FALSE(fs::exists(dir / (".checkpoint.safetensors.tmp-" + dead + "-0")));

    // a save does it by itself
    touch(dir / (".checkpoint.safetensors.tmp-" + dead + "-3"));
    core::write_file_atomic(path.string(), "weights", "test");
    CHECK_FALSE(fs::exists(dir / (".checkpoint.safetensors.tmp-" + dead + "-3")));
    CHECK(read(path) == "weights");
    fs::remove_all(dir);
}

TEST_CASE("open_regular_file / read_regular_file: a FIFO, a socket, a device or a directory is refused at once",
          "[core][file]") {
    const fs::path dir = fresh_dir("regular");
    const std::string text = (dir / "text.txt").string();
    std::ofstream(text) << "Go.\tVa !\n";
    CHECK(core::read_regular_file(text, "read", "a text file") == "Go.\tVa !\n");

    // a FIFO with no writer: opening it the usual way would wait forever
    const std::string fifo = (dir / "fifo").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_AS(core::read_regular_file(fifo, "load_corpus", "a text file"), IOError);
    CHECK_THROWS_WITH(
        core::read_regular_file(fifo, "load_corpus", "a text file"),
        "load_corpus: '" + fifo + "' is a FIFO (named pipe), not a regular file; give the path of a text file");
    // a socket that is listening
    const std::string socket_path = (dir / "socket").string();
    const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(sock >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    REQUIRE(socket_path.size() < sizeof address.sun_path);
    std::copy(socket_path.begin(), socket_path.end(), address.sun_path);
    REQUIRE(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(sock, 1) == 0);
    CHECK_THROWS_WITH(
        core::open_regular_file(socket_path, "load_safetensors", "a checkpoint"),
        "load_safetensors: '" + socket_path + "' is a socket, not a regular file; give the path of a checkpoint");
    ::close(sock);
    // devices: /dev/zero never ends, /dev/null is empty
    for (const char* device : {"/dev/zero", "/dev/null"})
        CHECK_THROWS_WITH(core::read_regular_file(device, "read", "a checkpoint"),
                          std::string("read: '") + device +
                              "' is a character device, not a regular file; give the path of a checkpoint");
    CHECK_THROWS_WITH(core::read_regular_file(dir.string(), "read", "a checkpoint"),
                      "read: '" + dir.string() + "' is a directory; give the path of a checkpoint");
    CHECK_THROWS_WITH(core::read_regular_file((dir / "missing").string(), "read", "a checkpoint"),
                      "read: cannot open '" + (dir / "missing").string() + "': No such file or directory");
    fs::remove_all(dir);
}
