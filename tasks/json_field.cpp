#include "tasks/json_field.hpp"

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "nn/safetensors.hpp"

#include <fmt/format.h>

#include <limits>

namespace tformer::tasks {

using nlohmann::json;

json parse_json(std::string_view text, const std::string& what) {
    // nlohmann's parser keeps its own stack (it does not recurse); the
    // callback sees every array and object open, with its depth, before it is built
    const json::parser_callback_t limit = [&](int depth, json::parse_event_t event, json&) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
            depth >= nn::kMaxJsonDepth)
            fail<IOError>("{} is nested more than {} levels deep, more than any valid one", what, nn::kMaxJsonDepth);
        return true;
    };
    try {
        return json::parse(text.begin(), text.end(), limit);
    } catch (const json::exception& e) {
        // parse_error, or out_of_range for a number beyond a double; without nlohmann's "[json.exception...] "
        std::string_view why = e.what();
        if (const size_t cut = why.find("] "); cut != std::string_view::npos) why.remove_prefix(cut + 2);
        fail<IOError>("{} is not valid JSON ({})", what, why);
    }
}

JsonField::JsonField(const json& value, std::string source, std::string path)
    : value_(&value), source_(std::move(source)), path_(std::move(path)) {}

std::string JsonField::member_path(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

bool JsonField::has(std::string_view key) const { return value_->is_object() && value_->contains(key); }

JsonField JsonField::operator[](std::string_view key) const {
    if (!value_->is_object()) wrong("an object");
    const std::string path = member_path(key);
    const auto it = value_->find(key);
    if (it == value_->end()) JsonField(*value_, source_, path).fail("is missing");
    return JsonField(*it, source_, path);
}

void JsonField::fail(std::string_view problem) const {
    tformer::fail<IOError>("{} field '{}' {}", source_, path_, problem);
}

void JsonField::wrong(std::string_view expected) const {
    // the value as the file has it, cut to 80 characters (on a character boundary)
    const std::string text = value_->dump(-1, ' ', false, json::error_handler_t::replace);
    const size_t n = core::utf8_prefix_length(text, 80);
    fail(fmt::format("should be {}, got {} {}{}", expected, value_->type_name(), text.substr(0, n),
                     n < text.size() ? "..." : ""));
}

std::string JsonField::as_string() const {
    if (!value_->is_string()) wrong("a string");
    return value_->get<std::string>();
}

bool JsonField::as_bool() const {
    if (!value_->is_boolean()) wrong("true or false");
    return value_->get<bool>();
}

double JsonField::as_number() const {
    if (!value_->is_number()) wrong("a number");
    return value_->get<double>();
}

// nlohmann converts a float to an integer with a plain cast (undefined for
// 1e99) and wraps a negative number into an unsigned one: only JSON integers
// that fit are taken
int64_t JsonField::as_int64() const {
    const bool fits = value_->is_number_integer() &&
                      !(value_->is_number_unsigned() &&
                        value_->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    if (!fits) wrong("a whole number from -2^63 to 2^63-1");
    return value_->get<int64_t>();
}

uint64_t JsonField::as_uint64() const {
    if (!value_->is_number_unsigned()) wrong("a whole number from 0 to 2^64-1");
    return value_->get<uint64_t>();
}

std::vector<JsonField> JsonField::elements() const {
    if (!value_->is_array()) wrong("an array");
    std::vector<JsonField> out;
    for (size_t i = 0; i < value_->size(); ++i)
        out.emplace_back((*value_)[i], source_, fmt::format("{}[{}]", path_, i));
    return out;
}

std::vector<std::pair<std::string, JsonField>> JsonField::members() const {
    if (!value_->is_object()) wrong("an object");
    std::vector<std::pair<std::string, JsonField>> out;
    for (const auto& [key, v] : value_->items()) out.emplace_back(key, JsonField(v, source_, member_path(key)));
    return out;
}

}  // namespace tformer::tasks
