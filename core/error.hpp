/// \file
/// tformer errors: every bad input throws one of these, with a message that
/// names the operation and the shapes or values involved, e.g.
///   matmul: shapes (2x3) and (4x5) cannot be multiplied
/// Nothing in tformer aborts on bad input.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tformer {

/// Base of every tformer error; catch this to catch them all.
class Error : public std::runtime_error {
public:
    /// An error whose what() is `message`, which names the operation and the values involved.
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Shapes that do not fit together (broadcast, matmul, reshape, ...).
class ShapeError : public Error {
public:
    /// The same constructor as Error: the whole message.
    using Error::Error;
};

/// An index or dimension out of range.
class IndexError : public Error {
public:
    /// The same constructor as Error: the whole message.
    using Error::Error;
};

/// A value that is not allowed (wrong dtype, negative size, NaN where it must not be, ...).
class ValueError : public Error {
public:
    /// The same constructor as Error: the whole message.
    using Error::Error;
};

/// Reading or writing a file failed, or a file's contents are invalid.
class IOError : public Error {
public:
    /// The same constructor as Error: the whole message.
    using Error::Error;
};

/// Throws `E` with a fmt-formatted message: fail<ShapeError>("add: ...", ...).
template <class E, class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw E(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tformer
