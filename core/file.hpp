/// \file
/// Reading files only when they are files, and writing them so that nothing
/// the user saved is lost.
///
/// Every file tformer reads (a checkpoint, a corpus, a batch file) is opened
/// through open_regular_file, which refuses at once what is not a regular
/// file: a FIFO would make the reader wait forever for a writer, a device
/// such as /dev/zero never ends, a directory reads as nothing.
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
#include <vector>

namespace tformer::core {

/// Opens `path` for reading, refusing what is not a regular file before a
/// byte is read: a directory, a FIFO (named pipe; opened without waiting for
/// a writer, then refused), a socket, a character or block device. `what`
/// names what the file should be ("a checkpoint"). Returns the descriptor
/// (close-on-exec), which the caller closes. Errors: IOError
///   OP: cannot open 'PATH': REASON
///   OP: 'PATH' is a directory; give the path of WHAT
///   OP: 'PATH' is a FIFO (named pipe), not a regular file; give the path of WHAT
int open_regular_file(const std::string& path, std::string_view op, std::string_view what);

/// The whole contents of the regular file at `path` (open_regular_file's
/// checks and messages; "OP: error while reading 'PATH': REASON").
std::string read_regular_file(const std::string& path, std::string_view op, std::string_view what);

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

/// The directory a run writes into (`tformer train --out`), claimed for the
/// run's lifetime:
///  - made if missing, with its parents; a dangling symbolic link, a file or
///    a place that cannot be written is explained;
///  - locked: the file DIR/.tformer.lock is held with flock(LOCK_EX) and
///    holds this process's PID, so that a second run into the same
///    directory is refused at once, naming the PID of the one running. The
///    kernel releases the lock when its process ends, however it ends, so a
///    lock file left by a killed run is not locked: it is taken over and
///    its PID reported by stale_owner();
///  - released by the destructor, which removes the lock file and then the
///    directories it made, if the run left them empty (a run refused for a
///    bad argument leaves nothing on disk).
/// Errors: IOError "OP: cannot use FLAG 'PATH' as the output directory: ..."
/// or "OP: FLAG 'PATH' is in use by another run (PID N); ...".
class OutputDirectory {
public:
    /// Makes `path` (and its parents) if missing and locks it; `op` and
    /// `flag` name the command and its flag in errors ("train", "--out").
    OutputDirectory(std::string path, std::string op, std::string flag);
    OutputDirectory(const OutputDirectory&) = delete;
    OutputDirectory& operator=(const OutputDirectory&) = delete;
    ~OutputDirectory();

    const std::string& path() const { return path_; }  ///< the folder, as given
    /// The PID a lock file left by an ended process named (it was taken over), or 0.
    long stale_owner() const { return stale_owner_; }

private:
    [[noreturn]] void refuse(const std::string& why) const;
    void lock();
    void remove_made() const;  // the directories made here that are empty, innermost first

    std::string path_, op_, flag_, lock_path_;
    std::vector<std::filesystem::path> made_;  ///< directories made here, innermost first
    int fd_ = -1;
    long stale_owner_ = 0;
};

/// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomic(const std::string& path, std::string_view bytes, std::string_view op);

/// Removes the temporary files ".NAME.tmp-PID-N" next to `path` whose process
/// PID no longer runs (left by a killed save). Returns how many were removed.
/// Files of running processes, including this one, are never touched.
int remove_stale_temporaries(const std::filesystem::path& path);

}  // namespace tformer::core
