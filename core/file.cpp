#include "core/file.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <system_error>

namespace tformer::core {

namespace {
std::string os_reason(int err) { return std::generic_category().message(err); }

// "PID-N" after the prefix, both decimal: the PID, or -1 if the name is not ours.
long temporary_owner(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix)) return -1;
    name.remove_prefix(prefix.size());
    const size_t dash = name.find('-');
    if (dash == 0 || dash == std::string_view::npos || dash + 1 == name.size()) return -1;
    long pid = -1;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + dash, pid);
    if (ec != std::errc{} || end != name.data() + dash || pid <= 0) return -1;
    const std::string_view counter = name.substr(dash + 1);
    if (!std::all_of(counter.begin(), counter.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
    return pid;
}

bool process_runs(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }
}  // namespace

int remove_stale_temporaries(const std::filesystem::path& path) {
    if (!path.has_filename()) return 0;
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    // (fmt::format, not "." + name + ".tmp-": GCC 12's -Wrestrict takes that
    // operator+ for an overlapping copy of 2^63 bytes, a known false positive)
    const std::string prefix = fmt::format(".{}.tmp-", path.filename().string());
    int removed = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const long pid = temporary_owner(it->path().filename().string(), prefix);
        if (pid < 0 || pid == static_cast<long>(::getpid()) || process_runs(pid)) continue;
        std::error_code ignored;  // another process may be cleaning up the same file
        if (std::filesystem::remove(it->path(), ignored)) ++removed;
    }
    return removed;
}

// ---- reading ------------------------------------------------------------------------------

namespace {
// What a file that is not a regular one is, for messages.
const char* kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}
}  // namespace

int open_regular_file(const std::string& path, std::string_view op, std::string_view what) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait until some
    // process opens it for writing; for a regular file the flag changes nothing
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat info {};
    if (fd < 0) {
        // a socket cannot be opened at all (ENXIO, "No such device or address"): say what it is
        const int err = errno;
        if (::stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode) || S_ISDIR(info.st_mode))
            fail<IOError>("{}: cannot open '{}': {}", op, path, os_reason(err));
    } else if (::fstat(fd, &info) != 0) {
        const int err = errno;
        ::close(fd);
        fail<IOError>("{}: cannot stat '{}': {}", op, path, os_reason(err));
    }
    if (S_ISREG(info.st_mode)) return fd;
    if (fd >= 0) ::close(fd);
    if (S_ISDIR(info.st_mode)) fail<IOError>("{}: '{}' is a directory; give the path of {}", op, path, what);
    fail<IOError>("{}: '{}' is {}, not a regular file; give the path of {}", op, path, kind_of(info.st_mode), what);
}

std::string read_regular_file(const std::string& path, std::string_view op, std::string_view what) {
    const int fd = open_regular_file(path, op, what);
    std::string text;
    char buffer[1 << 16];
    for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got == 0) break;
        if (got < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            fail<IOError>("{}: error while reading '{}': {}", op, path, os_reason(err));
        }
        text.append(buffer, static_cast<size_t>(got));
    }
    ::close(fd);
    return text;
}

// ---- writing ------------------------------------------------------------------------------

AtomicFile::AtomicFile(std::string path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
    const std::filesystem::path p(path_);
    if (path_.empty() || !p.has_filename()) fail_with("the path names a directory, not a file");
    dir_ = p.has_parent_path() ? p.parent_path().string() : std::string(".");
    remove_stale_temporaries(p);
    // pid + counter make the name unique among writers; O_EXCL refuses to
    // reuse a leftover file, in which case the next number is tried
    static std::atomic<uint64_t> counter{0};
    for (int attempt = 0; attempt < 100; ++attempt) {
        const std::string name =
            fmt::format(".{}.tmp-{}-{}", p.filename().string(), static_cast<long>(::getpid()), counter++);
        tmp_ = (std::filesystem::path(dir_) / name).string();
        // mode 0666 lets the umask decide, as for any new file
        fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd_ >= 0 || errno != EEXIST) break;
    }
    if (fd_ < 0) {
        const int err = errno;
        tmp_.clear();  // nothing to remove
        fail_with(fmt::format("cannot create a temporary file in '{}': {}", dir_, os_reason(err)));
    }
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(std::span<const uint8_t> bytes) {
    const uint8_t* p = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
        // write may take fewer bytes than given; loop until all are out
        const ssize_t put = ::write(fd_, p, std::min<size_t>(left, size_t{1} << 30));
        if (put < 0) {
            if (errno == EINTR) continue;
            fail_os(fmt::format("writing the temporary file '{}' failed", tmp_));
        }
        p += put;
        left -= static_cast<size_t>(put);
    }
}

// fsync before rename matters: without it a crash could leave the new name
// pointing at a file whose data never reached the disk, i.e. a truncated file.
void AtomicFile::commit() {
    if (::fsync(fd_) != 0) fail_os(fmt::format("fsync of the temporary file '{}' failed", tmp_));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail_os(fmt::format("closing the temporary file '{}' failed", tmp_));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail_os(fmt::format("cannot rename '{}' to it", tmp_));
    committed_ = true;
    // the rename lives in the directory; sync it too. Some file systems
    // cannot fsync a directory (EINVAL); then there is nothing more to do.
    const int dir = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) fail_os(fmt::format("the file was saved, but opening its directory '{}' to sync it failed", dir_));
    const bool synced = ::fsync(dir) == 0 || errno == EINVAL;
    const int err = errno;
    ::close(dir);
    errno = err;
    if (!synced) fail_os(fmt::format("the file was saved, but syncing its directory '{}' failed", dir_));
}

void AtomicFile::fail_with(const std::string& what) const {
    throw IOError(fmt::format("{}: cannot write '{}': {}", op_, path_, what));
}

void AtomicFile::fail_os(const std::string& what) const {
    const int err = errno;  // before anything else can change it
    fail_with(fmt::format("{}: {}", what, os_reason(err)));
}

// ---- the output directory of a run --------------------------------------------------------

OutputDirectory::OutputDirectory(std::string path, std::string op, std::string flag)
    : path_(std::move(path)), op_(std::move(op)), flag_(std::move(flag)) {
    namespace fs = std::filesystem;
    std::error_code ec;
    // create_directories says only "File exists" for a link to nowhere
    if (fs::is_symlink(fs::symlink_status(path_, ec)) && !fs::exists(path_, ec))
        refuse(
            fmt::format("it is a symbolic link to '{}', which does not exist; create that directory or remove "
                        "the link",
                        fs::read_symlink(path_, ec).string()));
    // the directories about to be made, innermost first, to remove again if the run leaves them empty
    std::error_code unknown;  // a path whose status cannot be read is not one we make
    for (fs::path p = fs::absolute(path_, ec); !ec && !p.empty(); p = p.parent_path()) {
        const fs::file_status status = fs::symlink_status(p, unknown);
        if (status.type() != fs::file_type::not_found || p == p.parent_path()) break;
        made_.push_back(p);
    }
    try {
        fs::create_directories(path_, ec);
        if (ec || !fs::is_directory(path_)) refuse(ec ? ec.message() : std::string("it is not a directory"));
        if (::access(path_.c_str(), W_OK | X_OK) != 0) {
            const int err = errno;
            fail<IOError>("{}: cannot write into {} '{}': {}", op_, flag_, path_, os_reason(err));
        }
        lock_path_ = (fs::path(path_) / ".tformer.lock").string();
        lock();
    } catch (...) {
        remove_made();
        throw;
    }
}

void OutputDirectory::remove_made() const {
    for (const auto& dir : made_) {
        std::error_code ec;
        if (!std::filesystem::is_empty(dir, ec) || ec || !std::filesystem::remove(dir, ec)) break;
    }
}

void OutputDirectory::refuse(const std::string& why) const {
    fail<IOError>("{}: cannot use {} '{}' as the output directory: {}", op_, flag_, path_, why);
}

void OutputDirectory::lock() {
    // A run that ends removes its lock file while it still holds the lock. A
    // run that opened the file just before might then lock a file nobody
    // else will find, so the lock counts only if the path still names the
    // file locked; else it starts again.
    for (int attempt = 0; attempt < 100; ++attempt) {
        const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            const int err = errno;
            fail<IOError>("{}: cannot create the lock file '{}': {}", op_, lock_path_, os_reason(err));
        }
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            char text[32] = {};
            const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
            ::close(fd);
            if (err != EWOULDBLOCK) fail<IOError>("{}: cannot lock '{}': {}", op_, lock_path_, os_reason(err));
            const long owner = n > 0 ? std::strtol(text, nullptr, 10) : 0;
            fail<IOError>(
                "{}: {} '{}' is in use by another run ({}, which holds '{}'); wait until it ends, or choose "
                "another {}",
                op_, flag_, path_, owner > 0 ? fmt::format("PID {}", owner) : std::string("PID not yet written"),
                lock_path_, flag_);
        }
        struct stat held {
        }, named{};
        if (::fstat(fd, &held) != 0 || ::stat(lock_path_.c_str(), &named) != 0 || held.st_ino != named.st_ino ||
            held.st_dev != named.st_dev) {
            ::close(fd);
            continue;
        }
        // a PID already there is a run that was killed: the kernel released its lock
        char text[32] = {};
        if (::pread(fd, text, sizeof text - 1, 0) > 0) stale_owner_ = std::strtol(text, nullptr, 10);
        const std::string pid = std::to_string(static_cast<long>(::getpid())) + "\n";
        if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
            const int err = errno;
            ::close(fd);
            fail<IOError>("{}: cannot write the lock file '{}': {}", op_, lock_path_, os_reason(err));
        }
        fd_ = fd;
        return;
    }
    fail<IOError>("{}: cannot lock '{}': it keeps being replaced", op_, lock_path_);
}

OutputDirectory::~OutputDirectory() {
    if (fd_ >= 0) {
        ::unlink(lock_path_.c_str());  // while still locked (see lock())
        ::close(fd_);
    }
    remove_made();
}

void write_file_atomic(const std::string& path, std::string_view bytes, std::string_view op) {
    AtomicFile file(path, std::string(op));
    file.write(bytes);
    file.commit();
}

}  // namespace tformer::core
