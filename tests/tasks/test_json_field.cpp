// tasks/json_field: a JSON document from a file, read with its nesting
// limited and every field through one accessor that names the file, the
// field's path and the type it should have.
#include "core/error.hpp"
#include "tasks/json_field.hpp"

#include <catch2/catch.hpp>

#include <string>

using tformer::tasks::JsonField;
using tformer::tasks::parse_json;

namespace {
const char* kDoc = R"({"name": "copy", "size": 8, "ratio": 0.5, "on": true,
                       "config": {"heads": 2, "words": ["a", "b"]}, "rng": [1, 2, 3, 4]})";
const std::string kSource = "checkpoint 'x.safetensors': metadata";

// the message of the IOError that reading `read` throws
template <class Read>
std::string error_of(Read&& read) {
    try {
        read();
    } catch (const tformer::IOError& e) {
        return e.what();
    }
    return "(no error)";
}
}  // namespace

TEST_CASE("JsonField::get<T>(): each kind of field, read or refused naming the file, the path and the type",
          "[tasks][json]") {
    const nlohmann::json j = parse_json(kDoc, "metadata");
    const JsonField doc(j, kSource);
    // what is there, read
    CHECK(doc["name"].get<std::string>() == "copy");
    CHECK(doc["size"].get<int64_t>() == 8);
    CHECK(doc["ratio"].get<double>() == 0.5);
    CHECK(doc["size"].get<double>() == 8.0);  // an integer is a number too
    CHECK(doc["on"].get<bool>());
    CHECK(doc["config"]["heads"].get<int64_t>() == 2);
    CHECK(doc["config"]["words"].get<std::vector<std::string>>() == std::vector<std::string>{"a", "b"});
    CHECK(doc["rng"].get<std::vector<uint64_t>>() == std::vector<uint64_t>{1, 2, 3, 4});
    const nlohmann::json extra = parse_json(R"({"preset": "d2l", "seed": "1"})", "metadata");
    CHECK(JsonField(extra, kSource).get<std::map<std::string, std::string>>() ==
          std::map<std::string, std::string>{{"preset", "d2l"}, {"seed", "1"}});
    CHECK(doc.has("config"));
    CHECK_FALSE(doc.has("missing"));
    CHECK_FALSE(doc["name"].has("x"));  // a string has no members

    // a string
    CHECK(error_of([&] { doc["size"].get<std::string>(); }) ==
          "checkpoint 'x.safetensors': metadata field 'size' should be a string, got number 8");
    // a number (integers refuse fractions and numbers beyond their range; unsigned ones refuse negatives)
    CHECK(error_of([&] { doc["name"].get<double>(); }) ==
          "checkpoint 'x.safetensors': metadata field 'name' should be a number, got string \"copy\"");
    CHECK(error_of([&] { doc["ratio"].get<int64_t>(); }) ==
          "checkpoint 'x.safetensors': metadata field 'ratio' should be a whole number from -2^63 to 2^63-1, got "
          "number 0.5");
    const nlohmann::json big = parse_json(R"({"n": 18446744073709551615, "m": -1})", "metadata");
    CHECK(error_of([&] { JsonField(big, kSource)["n"].get<int64_t>(); }).find("field 'n' should be a whole number") !=
          std::string::npos);
    CHECK(JsonField(big, kSource)["n"].get<uint64_t>() == 18446744073709551615ULL);
    CHECK(error_of([&] { JsonField(big, kSource)["m"].get<uint64_t>(); }) ==
          "checkpoint 'x.safetensors': metadata field 'm' should be a whole number from 0 to 2^64-1, got number -1");
    CHECK(error_of([&] { doc["size"].get<bool>(); }) ==
          "checkpoint 'x.safetensors': metadata field 'size' should be true or false, got number 8");
    // an object, and a member of something that is not one
    CHECK(error_of([&] { doc["rng"].get<std::map<std::string, std::string>>(); }) ==
          "checkpoint 'x.safetensors': metadata field 'rng' should be an object, got array [1,2,3,4]");
    CHECK(error_of([&] { doc["name"]["type"]; }) ==
          "checkpoint 'x.safetensors': metadata field 'name' should be an object, got string \"copy\"");
    CHECK(error_of([&] { doc["config"]["layers"]; }) ==
          "checkpoint 'x.safetensors': metadata field 'config.layers' is missing");
    // an array, and an element of the wrong type named by its index
    CHECK(error_of([&] { doc["config"].get<std::vector<int64_t>>(); }) ==
          "checkpoint 'x.safetensors': metadata field 'config' should be an array, got object "
          "{\"heads\":2,\"words\":[\"a\",\"b\"]}");
    CHECK(error_of([&] { doc["config"]["words"].get<std::vector<int64_t>>(); }) ==
          "checkpoint 'x.safetensors': metadata field 'config.words[0]' should be a whole number from -2^63 to "
          "2^63-1, got string \"a\"");
    // a long value is cut in the message
    const nlohmann::json long_value = parse_json("{\"s\": \"" + std::string(500, 'x') + "\"}", "metadata");
    const std::string message = error_of([&] { JsonField(long_value, kSource)["s"].get<int64_t>(); });
    CHECK(message.size() < 200);
    CHECK(message.ends_with("..."));
}

TEST_CASE("parse_json: nesting deeper than nn::kMaxJsonDepth is refused before the document is built, at any depth",
          "[tasks][json]") {
    // 8 levels are read; 9 are not, nor 100,000 or 1,000,000, which code that walks JSON recursively
    // (comparing, printing, converting) cannot survive
    const auto nested = [](size_t levels, char open, char close) {
        return std::string(levels, open) + std::string(levels, close);
    };
    CHECK_NOTHROW(parse_json(nested(8, '[', ']'), "metadata 'tformer'"));
    for (size_t levels : {9, 100'000, 1'000'000}) {
        INFO(levels << " levels");
        CHECK_THROWS_WITH(parse_json(nested(levels, '[', ']'), "metadata 'tformer'"),
                          "metadata 'tformer' is nested more than 8 levels deep, more than any valid one");
        std::string objects;
        for (size_t i = 0; i < levels; ++i) objects += "{\"a\":";
        objects += '0';
        objects.append(levels, '}');
        CHECK_THROWS_WITH(parse_json(objects, "metadata"), Catch::Contains("is nested more than 8 levels deep"));
    }
    // deep inside a document that is otherwise a checkpoint's, and unterminated
    CHECK_THROWS_WITH(parse_json(R"({"format": 2, "extra": )" + std::string(200'000, '['), "metadata"),
                      Catch::Contains("nested more than 8 levels deep"));
    CHECK_THROWS_WITH(parse_json("{", "metadata"), Catch::StartsWith("metadata is not valid JSON ("));
}
