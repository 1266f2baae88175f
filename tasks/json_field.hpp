/// \file
/// Reading a JSON document that came from a file (a checkpoint's metadata)
/// without trusting it. Its nesting is limited before anything walks it, and
/// every field is read through one accessor, JsonField::get<T>(), which names
/// the file, the field's path and the type the field should have:
///
///   checkpoint 'run/checkpoint.safetensors': metadata field 'tokenizer.type'
///   should be a string, got number 2
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tformer::tasks {

/// Parses `text`, refusing JSON nested more than nn::kMaxJsonDepth levels
/// deep before the document is built: comparing, printing or converting a
/// value recurses once per level, so 100,000 levels would overflow the
/// stack. Throws IOError "<what> is not valid JSON (...)" or "<what> is
/// nested more than 8 levels deep, more than any valid one".
nlohmann::json parse_json(std::string_view text, const std::string& what);

/// A value inside a parsed document, and where it came from.
class JsonField {
public:
    /// `source` begins every message ("checkpoint 'x.safetensors': metadata");
    /// `path` is this value's ("config.num_hiddens"; "" for the document).
    /// `value` must outlive the field.
    JsonField(const nlohmann::json& value, std::string source, std::string path = "");

    const nlohmann::json& value() const { return *value_; }  ///< the JSON value this field wraps
    const std::string& path() const { return path_; }        ///< where it sits in the document

    /// True when this is an object with the member `key`.
    bool has(std::string_view key) const;
    /// The member `key` of this object; "should be an object" or "is
    /// missing" (naming the member's path) otherwise.
    JsonField operator[](std::string_view key) const;

    /// The one accessor: this value as T, where T is std::string, bool,
    /// double (any JSON number), int64_t or uint64_t (a JSON integer in
    /// range: never 3.5, 1e99 or a negative number for uint64_t, which a
    /// plain conversion would truncate or wrap), or a std::vector or
    /// std::map<std::string, ...> of those (elements named 'a[3]', members
    /// 'a.b'). Anything else: IOError "<source> field '<path>' should be
    /// <what T is>, got <type> <value>".
    template <class T>
    T get() const;

    /// Throws IOError "<source> field '<path>' <problem>".
    [[noreturn]] void fail(std::string_view problem) const;

private:
    template <class T>
    struct Vector : std::false_type {};
    template <class U>
    struct Vector<std::vector<U>> : std::true_type {};
    template <class T>
    struct Map : std::false_type {};
    template <class U>
    struct Map<std::map<std::string, U>> : std::true_type {};

    std::string member_path(std::string_view key) const;       // "a.b"
    [[noreturn]] void wrong(std::string_view expected) const;  // "should be <expected>, got <type> <value>"
    std::string as_string() const;
    bool as_bool() const;
    double as_number() const;
    int64_t as_int64() const;
    uint64_t as_uint64() const;
    std::vector<JsonField> elements() const;                         // of an array
    std::vector<std::pair<std::string, JsonField>> members() const;  // of an object

    const nlohmann::json* value_;
    std::string source_, path_;
};

template <class T>
T JsonField::get() const {
    if constexpr (std::is_same_v<T, std::string>) {
        return as_string();
    } else if constexpr (std::is_same_v<T, bool>) {
        return as_bool();
    } else if constexpr (std::is_same_v<T, double>) {
        return as_number();
    } else if constexpr (std::is_same_v<T, int64_t>) {
        return as_int64();
    } else if constexpr (std::is_same_v<T, uint64_t>) {
        return as_uint64();
    } else if constexpr (Vector<T>::value) {
        T out;
        for (const JsonField& e : elements()) out.push_back(e.template get<typename T::value_type>());
        return out;
    } else {
        static_assert(Map<T>::value, "JsonField::get: a type the accessor does not read");
        T out;
        for (const auto& [key, m] : members()) out.emplace(key, m.template get<typename T::mapped_type>());
        return out;
    }
}

}  // namespace tformer::tasks
