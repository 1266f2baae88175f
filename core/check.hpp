/// \file
/// Argument checks at the top of an op, one line per argument, in the spirit
/// of PyTorch's TORCH_CHECK: the message names the op, the argument and the
/// values, so a forward opens with a few checks and then the document's math.
///
/// ```
///   check(p >= 0 && p < 1, "Dropout: probability {} not in [0, 1)", p);
/// ```
///
/// ```
///   const ShapeCheck dims = ShapeCheck("MultiHeadAttention")
///                               .known("query_size", options.query_size)
///                               .known("key_size", options.key_size)
///                               .arg("queries", queries, "B T query_size")
///                               .arg("keys", keys, "B S key_size");
///   const int64_t B = dims["B"];
/// ```
///
/// A failed shape check reads
/// ```
///   MultiHeadAttention: keys of shape (3x5x4) must be (B=2, S, key_size=4)
/// ```
/// with the sizes already fixed (by known() or an earlier argument) filled in.
#pragma once

#include "core/error.hpp"
#include "core/shape.hpp"

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tformer {

/// Throws E (ValueError unless given) with the fmt-formatted message when `ok` is false.
template <class E = ValueError, class... Args>
void check(bool ok, fmt::format_string<Args...> format, Args&&... args) {
    if (!ok) [[unlikely]]
        fail<E>(format, std::forward<Args>(args)...);
}

/// The shapes of an op's arguments against patterns of named dimensions.
/// A pattern names each dimension, separated by spaces: a name seen before
/// (given to known(), or bound by an earlier argument) must have the size it
/// had; a new name takes the argument's size; a number must be that size;
/// a leading "..." stands for any number of leading dimensions, the same for
/// every argument that has one. A mismatch throws ShapeError.
/// It allocates nothing (it runs in every forward): the op, the names and the
/// patterns are kept as views, so pass string literals.
class ShapeCheck {
public:
    /// Starts the checks of `op`, the name the messages begin with (a string literal: it is kept as a view).
    explicit ShapeCheck(const char* op) : op_(op) {}

    /// Fixes the size of `name` before the arguments are checked (a size an option gives).
    ShapeCheck& known(std::string_view name, int64_t size);

    /// Checks `shape` of argument `name` against `pattern`, binding its new names.
    ShapeCheck& arg(std::string_view name, const core::Shape& shape, std::string_view pattern);

    /// The same for a Tensor or Variable; an undefined one fails too.
    template <class T>
    ShapeCheck& arg(std::string_view name, const T& x, std::string_view pattern) {
        if (!x.defined()) undefined(name, pattern);
        return arg(name, x.shape(), pattern);
    }

    /// The size bound to `name`; ValueError if no argument or known() gave it.
    int64_t operator[](std::string_view name) const;

private:
    [[noreturn]] void mismatch(std::string_view name, const std::string& shape, std::string_view pattern) const;
    [[noreturn]] void undefined(std::string_view name, std::string_view pattern) const;
    std::string expected(std::string_view pattern) const;  // "(B=2, S, key_size=4)"
    const int64_t* find(std::string_view name) const;

    static constexpr int kMaxNames = 16;
    const char* op_;
    std::array<std::pair<std::string_view, int64_t>, kMaxNames> sizes_{};  // names bound so far, in order
    int count_ = 0;
    core::Shape leading_;  // what "..." stands for, once bound
    bool leading_bound_ = false;
};

}  // namespace tformer
