/// \file
/// Printing tensors the way PyTorch users know:
///   tensor([[ 0.1000, -1.2000],
///           [ 3.0000,  4.0000]], shape=(2, 2), dtype=float32)
/// Large tensors show the first and last `edge_items` of each dimension with "...".
/// The exact rules (fixed or scientific notation, the shape/dtype suffix, 0-d,
/// empty and undefined tensors) are written at the top of print.cpp.
#pragma once

#include "core/tensor.hpp"

#include <fmt/format.h>

#include <ostream>
#include <string>

namespace tformer::core {

/// How to_string lays a tensor out; the defaults are PyTorch's.
struct PrintOptions {
    int precision = 4;         ///< digits after the decimal point
    int64_t threshold = 1000;  ///< summarise tensors with more elements than this
    int64_t edge_items = 3;    ///< elements kept at each end of a summarised dimension
    int line_width = 80;       ///< wrap rows wider than this
};

/// The tensor as text, e.g. "tensor([1.0000, 2.0000], shape=(2), dtype=float32)".
std::string to_string(const Tensor& t, const PrintOptions& options = {});
/// Writes to_string(t) with the default options. fmt::format("{}", t) gives the same text.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace tformer::core

/// \cond
template <>
struct fmt::formatter<tformer::core::Tensor> : fmt::formatter<std::string> {
    auto format(const tformer::core::Tensor& t, fmt::format_context& ctx) const {
        return fmt::formatter<std::string>::format(tformer::core::to_string(t), ctx);
    }
};
/// \endcond
