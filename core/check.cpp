#include "core/check.hpp"

#include <charconv>

namespace tformer {

namespace {
// The next name of a pattern from position i on ("B T query_size" -> "B", "T", "query_size"); "" at the end.
std::string_view next_name(std::string_view pattern, size_t& i) {
    while (i < pattern.size() && pattern[i] == ' ') ++i;
    const size_t begin = i;
    while (i < pattern.size() && pattern[i] != ' ') ++i;
    return pattern.substr(begin, i - begin);
}

int count_names(std::string_view pattern) {
    int n = 0;
    size_t i = 0;
    while (!next_name(pattern, i).empty()) ++n;
    return n;
}

// A name that is a number ("1") stands for that size.
bool as_number(std::string_view name, int64_t& value) {
    const auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), value);
    return err == std::errc() && end == name.data() + name.size();
}
}  // namespace

const int64_t* ShapeCheck::find(std::string_view name) const {
    for (int i = 0; i < count_; ++i)
        if (sizes_[i].first == name) return &sizes_[i].second;
    return nullptr;
}

ShapeCheck& ShapeCheck::known(std::string_view name, int64_t size) {
    if (find(name)) fail<ValueError>("{}: ShapeCheck: the size of '{}' is given twice", op_, name);
    if (count_ == kMaxNames) fail<ValueError>("{}: ShapeCheck: more than {} names", op_, kMaxNames);
    sizes_[count_++] = {name, size};
    return *this;
}

ShapeCheck& ShapeCheck::arg(std::string_view name, const core::Shape& shape, std::string_view pattern) {
    size_t pos = 0;
    const int total = count_names(pattern);
    const bool has_leading = next_name(pattern, pos) == "...";
    if (!has_leading) pos = 0;
    const int fixed = total - (has_leading ? 1 : 0);
    const int nd = shape.size();
    if (has_leading ? nd < fixed : nd != fixed) mismatch(name, core::shape_str(shape), pattern);
    const int lead = nd - fixed;  // the dimensions "..." stands for
    const core::Shape leading(std::span<const int64_t>(shape.begin(), lead));
    if (has_leading && leading_bound_ && !(leading == leading_)) mismatch(name, core::shape_str(shape), pattern);
    // Every name is checked against the sizes known before this argument, and
    // a new name bound only once the whole argument fits, so that a message
    // shows the sizes as they were before it.
    const int before = count_;
    for (int i = 0; i < fixed; ++i) {
        const std::string_view n = next_name(pattern, pos);
        const int64_t size = shape[lead + i];
        int64_t expected = 0;
        const int64_t* known_size = find(n);
        if (as_number(n, expected) || known_size) {
            if (known_size) expected = *known_size;
            if (size != expected) {
                count_ = before;
                mismatch(name, core::shape_str(shape), pattern);
            }
        } else {
            if (count_ == kMaxNames) fail<ValueError>("{}: ShapeCheck: more than {} names", op_, kMaxNames);
            sizes_[count_++] = {n, size};  // a name twice in one pattern: the second must match the first
        }
    }
    if (has_leading && !leading_bound_) {
        leading_ = leading;
        leading_bound_ = true;
    }
    return *this;
}

int64_t ShapeCheck::operator[](std::string_view name) const {
    if (const int64_t* size = find(name)) return *size;
    fail<ValueError>("{}: ShapeCheck: no argument gave the size of '{}'", op_, name);
}

std::string ShapeCheck::expected(std::string_view pattern) const {
    std::string out = "(";
    size_t pos = 0;
    for (std::string_view n = next_name(pattern, pos); !n.empty(); n = next_name(pattern, pos)) {
        if (out.size() > 1) out += ", ";
        out += n;
        if (n == "..." && leading_bound_) {
            out += fmt::format("={}", leading_);
        } else if (const int64_t* size = find(n)) {
            out += fmt::format("={}", *size);
        }
    }
    return out + ")";
}

void ShapeCheck::mismatch(std::string_view name, const std::string& shape, std::string_view pattern) const {
    fail<ShapeError>("{}: {} of shape {} must be {}", op_, name, shape, expected(pattern));
}

void ShapeCheck::undefined(std::string_view name, std::string_view pattern) const {
    fail<ValueError>("{}: {} (undefined) must be {}", op_, name, expected(pattern));
}

}  // namespace tformer
