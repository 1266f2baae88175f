/// \file
/// Element types. float32 trains, float64 checks gradients, int64 carries
/// token ids, bool carries masks (comparisons, where, masked_fill).
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tformer::core {

/// The element type of a tensor: float32 (training), float64 (gradient checks),
/// int64 (token ids, lengths), boolean (masks, one byte per element).
enum class DType : uint8_t { float32, float64, int64, boolean };

/// Bytes per element.
constexpr int64_t dtype_size(DType t) {
    switch (t) {
        case DType::float32: return 4;
        case DType::float64: return 8;
        case DType::int64: return 8;
        case DType::boolean: return 1;
    }
    return 0;
}

/// "float32", "float64", "int64", "bool".
constexpr std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::float32: return "float32";
        case DType::float64: return "float64";
        case DType::int64: return "int64";
        case DType::boolean: return "bool";
    }
    return "?";
}

/// True for float32 and float64, the dtypes that carry gradients.
constexpr bool is_floating(DType t) { return t == DType::float32 || t == DType::float64; }

/// The C++ type stored for each dtype (bool masks are one byte each).
template <class T>
struct dtype_of;
/// float is stored as DType::float32.
template <>
struct dtype_of<float> {
    static constexpr DType value = DType::float32;  ///< DType::float32
};
/// double is stored as DType::float64.
template <>
struct dtype_of<double> {
    static constexpr DType value = DType::float64;  ///< DType::float64
};
/// int64_t is stored as DType::int64.
template <>
struct dtype_of<int64_t> {
    static constexpr DType value = DType::int64;  ///< DType::int64
};
/// bool is stored as DType::boolean.
template <>
struct dtype_of<bool> {
    static constexpr DType value = DType::boolean;  ///< DType::boolean
};
/// The dtype of C++ type T: dtype_v<float> is DType::float32.
template <class T>
inline constexpr DType dtype_v = dtype_of<T>::value;

/// Calls f(std::type_identity<T>{}) with the C++ type T of dtype `t`, so a
/// kernel template is written once and instantiated per dtype:
/// ```
///   visit_dtype(x.dtype(), [&](auto tag) { using T = typename decltype(tag)::type; ... });
/// ```
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
    switch (t) {
        case DType::float32: return f(std::type_identity<float>{});
        case DType::float64: return f(std::type_identity<double>{});
        case DType::int64: return f(std::type_identity<int64_t>{});
        case DType::boolean: break;
    }
    return f(std::type_identity<bool>{});
}

/// visit_dtype for the floating types only; other dtypes throw ValueError
/// "op: expected a floating dtype (float32 or float64), got int64".
template <class F>
decltype(auto) visit_floating(DType t, const char* op, F&& f);

}  // namespace tformer::core

#include "core/error.hpp"

namespace tformer::core {

template <class F>
decltype(auto) visit_floating(DType t, const char* op, F&& f) {
    if (t == DType::float64) return f(std::type_identity<double>{});
    if (t != DType::float32)
        fail<ValueError>("{}: expected a floating dtype (float32 or float64), got {}", op, dtype_name(t));
    return f(std::type_identity<float>{});
}

}  // namespace tformer::core
