#include "core/file.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
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

void write_file_atomic(const std::string& path, std::string_view bytes, std::string_view op) {
    AtomicFile file(path, std::string(op));
    file.write(bytes);
    file.commit();
}

}  // namespace tformer::core
