// Printing tensors the way PyTorch users know them. The exact format:
//
//   tensor([[ 0.1000, -1.2000],
//           [ 3.0000,  4.0000]], shape=(2, 2), dtype=float32)
//
// * Nested brackets, one level per dimension; row i of a 2-D tensor starts
//   under the first element of row 0. Blocks of a 3-D tensor are separated
//   by one blank line, of a 4-D tensor by two, and so on.
// * Every element is right-aligned to one common width: the widest shown value.
// * float32/float64 use `precision` digits after the point, in fixed
//   notation ("-1.2000") unless PyTorch would switch to scientific ("1.0000e+08").
//   The rule, over the finite non-zero values shown: scientific when
//   max|v| / min|v| > 1000, or max|v| > 1e8, or min|v| < 1e-4 (so 1e-5 and
//   2e9 print as 1.0000e-05 and 2.0000e+09). NaN and infinities print as
//   nan, inf, -inf and do not affect the choice. Unlike PyTorch, whole-number
//   floats keep their digits ("3.0000", not "3."), so a float tensor never
//   looks like an int64 one.
// * int64 prints as integers, bool as True / False.
// * The suffix always shows the shape and the dtype: ", shape=(2, 2), dtype=float32"
//   (sizes separated by ", ", a 1-D shape as "(5)"). It moves to a line of its
//   own when it would make the last line longer than line_width.
// * A 0-d tensor prints its value alone, "tensor(3.5000)", like a PyTorch
//   loss; a dtype other than float32 is named: "tensor(3, dtype=int64)".
// * A tensor with no elements prints "tensor([], shape=(0, 3), dtype=float32)".
// * Summaries: when numel > threshold, every dimension longer than
//   2 * edge_items shows its first and last edge_items entries around "...".
// * Rows of the innermost dimension wrap so that lines stay within line_width.
// * Views (transposed, sliced, expanded) print their logical values.
// * An undefined tensor prints "tensor(undefined)"; printing never throws for it.
#include "core/print.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace tformer::core {

namespace {

// Marks the "..." position in a dimension's list of shown indices.
constexpr int64_t kEllipsis = -1;

// "(2, 2)": the shape as printed (error messages use "(2x2)").
std::string printed_shape(const Shape& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

// Formats the elements of one tensor whose C++ element type is T.
template <class T>
class Printer {
public:
    Printer(const Tensor& t, const PrintOptions& options) : t_(t), data_(t.data<T>()) {
        precision_ = std::max(options.precision, 0);
        line_width_ = options.line_width;
        const int64_t edge = std::max<int64_t>(options.edge_items, 0);
        const bool summarise = t.numel() > options.threshold;
        // the indices shown along each dimension, with kEllipsis where entries are skipped
        for (int d = 0; d < t.dim(); ++d) {
            const int64_t n = t.shape()[d];
            std::vector<int64_t> picks;
            if (summarise && n > 2 * edge) {
                for (int64_t i = 0; i < edge; ++i) picks.push_back(i);
                picks.push_back(kEllipsis);
                for (int64_t i = n - edge; i < n; ++i) picks.push_back(i);
            } else {
                for (int64_t i = 0; i < n; ++i) picks.push_back(i);
            }
            picks_.push_back(std::move(picks));
        }
        // notation and column width are decided once, over the values actually shown
        std::vector<T> shown;
        collect(0, 0, shown);
        if constexpr (std::is_floating_point_v<T>) scientific_ = wants_scientific(shown);
        for (T v : shown) width_ = std::max(width_, format(v).size());
    }

    /// The nested brackets, starting at column `indent` (the position of the first "[").
    std::string body(int indent) const { return render(0, 0, indent); }

private:
    // PyTorch's rule (see the top of the file), over finite non-zero values.
    static bool wants_scientific(const std::vector<T>& values) {
        double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
        for (T v : values) {
            const double a = std::fabs(static_cast<double>(v));
            if (!std::isfinite(a) || a == 0.0) continue;
            lo = std::min(lo, a);
            hi = std::max(hi, a);
        }
        if (hi == 0.0) return false;  // nothing but zeros, NaN and infinities
        return hi / lo > 1000.0 || hi > 1e8 || lo < 1e-4;
    }

    // One value, not yet padded.
    std::string format(T v) const {
        if constexpr (std::is_same_v<T, bool>) {
            return v ? "True" : "False";
        } else if constexpr (std::is_integral_v<T>) {
            return fmt::format("{}", v);
        } else {
            const double x = static_cast<double>(v);
            if (std::isnan(x)) return "nan";  // never "-nan"
            if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
            return scientific_ ? fmt::format("{:.{}e}", x, precision_) : fmt::format("{:.{}f}", x, precision_);
        }
    }

    // One value right-aligned to the common width.
    std::string padded(T v) const {
        const std::string s = format(v);
        return std::string(width_ - std::min(width_, s.size()), ' ') + s;
    }

    // Appends the shown elements from dimension d on, in printing order;
    // `offset` is relative to the tensor's first element.
    void collect(int d, int64_t offset, std::vector<T>& out) const {
        if (d == t_.dim()) {
            out.push_back(data_[offset]);
            return;
        }
        for (int64_t i : picks_[d])
            if (i != kEllipsis) collect(d + 1, offset + i * t_.strides()[d], out);
    }

    // The text for dimension d on, whose "[" sits at column `indent`.
    std::string render(int d, int64_t offset, int indent) const {
        if (d == t_.dim()) return format(data_[offset]);  // a 0-d tensor
        const int64_t stride = t_.strides()[d];
        std::vector<std::string> items;
        for (int64_t i : picks_[d]) {
            if (i == kEllipsis) {
                items.emplace_back("...");
            } else if (d + 1 == t_.dim()) {
                items.push_back(padded(data_[offset + i * stride]));
            } else {
                items.push_back(render(d + 1, offset + i * stride, indent + 1));
            }
        }
        const std::string margin(static_cast<size_t>(indent) + 1, ' ');
        std::string out = "[";
        if (d + 1 == t_.dim()) {
            // innermost: as many elements per line as fit after the margin
            const int64_t per_line = std::max<int64_t>(1, (line_width_ - indent) / static_cast<int64_t>(width_ + 2));
            for (size_t k = 0; k < items.size(); ++k) {
                if (k > 0) out += static_cast<int64_t>(k) % per_line == 0 ? ",\n" + margin : ", ";
                out += items[k];
            }
        } else {
            // outer: one sub-block per line, with (dims below - 1) blank lines between blocks
            const size_t blank_lines = static_cast<size_t>(t_.dim() - d - 1);  // d < dim here
            const std::string separator = std::string(",").append(blank_lines, '\n').append(margin);
            for (size_t k = 0; k < items.size(); ++k) {
                if (k > 0) out += separator;
                out += items[k];
            }
        }
        return out + "]";
    }

    const Tensor& t_;
    const T* data_;
    int precision_ = 4;
    int line_width_ = 80;
    std::vector<std::vector<int64_t>> picks_;  // shown indices per dimension
    bool scientific_ = false;
    size_t width_ = 0;  // the widest shown value
};

}  // namespace

std::string to_string(const Tensor& t, const PrintOptions& options) {
    if (!t.defined()) return "tensor(undefined)";
    const std::string prefix = "tensor(";
    const std::string dtype = fmt::format("dtype={}", dtype_name(t.dtype()));
    if (t.dim() == 0) {
        const std::string value =
            visit_dtype(t.dtype(), [&](auto tag) { return Printer<typename decltype(tag)::type>(t, options).body(0); });
        return prefix + value + (t.dtype() == DType::float32 ? "" : ", " + dtype) + ")";
    }
    const std::string suffix = fmt::format("shape={}, {}", printed_shape(t.shape()), dtype);
    if (t.numel() == 0) return prefix + "[], " + suffix + ")";

    const int indent = static_cast<int>(prefix.size());
    std::string out = prefix + visit_dtype(t.dtype(), [&](auto tag) {
                          return Printer<typename decltype(tag)::type>(t, options).body(indent);
                      });
    // the suffix goes on its own line when it would overflow the last one
    const size_t last_line = out.size() - (out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
    if (static_cast<int64_t>(last_line + 2 + suffix.size() + 1) > options.line_width) {
        out += ",\n" + std::string(prefix.size(), ' ') + suffix + ")";
    } else {
        out += ", " + suffix + ")";
    }
    return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace tformer::core
