/// \file
/// Writing files so that nothing the user saved is lost.
///
/// Every file tformer writes (checkpoints, pictures, CSVs, summaries) goes
/// through AtomicFile: the bytes go to a temporary file in the same directory
/// (".NAME.tmp-PID-N", same file system, so the final rename is atomic), which
/// is flushed to the disk and then renamed over NAME. A process killed at any
/// moment, a full disk or a file-size limit leaves the previous NAME intact;
/// the error is an IOError naming the operation, the path and the reason.
/// A temporary file left by a killed process is removed by the next save to
/// the same name.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace tformer::core {

/// A file that replaces `path` only when commit() succeeds. Until then the
/// bytes go to a temporary sibling; the destructor removes it if commit() was
/// not reached or failed. Errors: IOError "OP: cannot write 'PATH': REASON".
class AtomicFile {
public:
    /// Opens the temporary sibling of `path`; `op` names the operation in error messages ("save", ...).
    AtomicFile(std::string path, std::string op);
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;
    /// Removes the temporary file unless commit() succeeded.
    ~AtomicFile();

    /// Appends `bytes` to the temporary file.
    void write(std::span<const uint8_t> bytes);
    /// Appends `text` (its UTF-8 bytes) to the temporary file.
    void write(std::string_view text) { write({reinterpret_cast<const uint8_t*>(text.data()), text.size()}); }

    /// flush -> fsync -> rename -> fsync the directory.
    void commit();

private:
    [[noreturn]] void fail_with(const std::string& what) const;
    [[noreturn]] void fail_os(const std::string& what) const;  // appends strerror(errno)

    std::string path_, op_, dir_, tmp_;
    int fd_ = -1;
    bool committed_ = false;
};

/// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomic(const std::string& path, std::string_view bytes, std::string_view op);

/// Removes the temporary files ".NAME.tmp-PID-N" next to `path` whose process
/// PID no longer runs (left by a killed save). Returns how many were removed.
/// Files of running processes, including this one, are never touched.
int remove_stale_temporaries(const std::filesystem::path& path);

}  // namespace tformer::core
