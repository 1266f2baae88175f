// nn::save_safetensors / load_safetensors / parse_safetensors: the byte layout
// pinned against hand-assembled files, round trips of every dtype and layout,
// one case per kind of invalid file (each built by hand below), and atomic
// saving under failures.
#include "nn/safetensors.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

using namespace tformer;
using namespace tformer::core;
using namespace tformer::nn;
using Catch::Contains;

namespace {

using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

// ---- building files by hand -------------------------------------------------------------------

Bytes le64(uint64_t n) {
    Bytes out;
    for (int i = 0; i < 8; ++i, n >>= 8) out.push_back(static_cast<uint8_t>(n & 0xFF));
    return out;
}

// A file declaring `declared` header bytes, followed by `header` and `data`
// exactly as given (no padding added, so tests control every byte).
Bytes assemble_with_length(uint64_t declared, std::string_view header, const Bytes& data = {}) {
    Bytes out = le64(declared);
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

// A file whose length field is the true header length.
Bytes assemble(std::string_view header, const Bytes& data = {}) {
    return assemble_with_length(header.size(), header, data);
}

Bytes concat(std::initializer_list<Bytes> parts) {
    Bytes out;
    for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

template <class T>
Bytes le_bytes(std::initializer_list<T> values) {
    // the test host is little-endian, as the library asserts, so memory order is file order
    Bytes out(values.size() * sizeof(T));
    std::memcpy(out.data(), values.begin(), out.size());
    return out;
}

Bytes as_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

// The row-major bytes of a tensor (what the file must hold for it).
Bytes tensor_bytes(const Tensor& t) {
    const Tensor c = t.contiguous();
    const auto* p = static_cast<const uint8_t*>(c.raw_data());
    return Bytes(p, p + c.numel() * dtype_size(c.dtype()));
}

// ---- files on disk -------------------------------------------------------------------------------

// A fresh directory, removed with everything in it at the end of the test.
struct TempDir {
    fs::path path;
    TempDir() {
        static int counter = 0;
        path = fs::temp_directory_path() / fmt::format("tformer-safetensors-{}-{}", ::getpid(), counter++);
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
    // The names in the directory (to see that no temporary file is left).
    std::set<std::string> listing() const {
        std::set<std::string> names;
        for (const auto& entry : fs::directory_iterator(path)) names.insert(entry.path().filename().string());
        return names;
    }
};

Bytes read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const Bytes& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

// ---- comparing ---------------------------------------------------------------------------------

// Same names, dtypes, shapes and bit-identical data (so NaN and -0.0 count),
// and the loaded tensors are contiguous.
void check_same(const SafeTensors& loaded, const SafeTensors& expected) {
    CHECK(loaded.metadata == expected.metadata);
    REQUIRE(loaded.tensors.size() == expected.tensors.size());
    for (const auto& [name, want] : expected.tensors) {
        INFO("tensor " << name);
        REQUIRE(loaded.tensors.count(name) == 1);
        const Tensor& got = loaded.tensors.at(name);
        CHECK(got.dtype() == want.dtype());
        CHECK(got.shape() == want.shape());
        // (core's is_contiguous() says false for some empty shapes such as (2x0))
        if (got.numel() > 0) CHECK(got.is_contiguous());
        CHECK(got.strides() == contiguous_strides(got.shape()));
        CHECK(tensor_bytes(got) == tensor_bytes(want));
    }
}

// A checkpoint using every dtype and awkward layouts.
SafeTensors sample_checkpoint() {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    SafeTensors st;
    st.tensors["encoder.blks.0.attention.W_q.weight"] =
        from_vector(std::vector<float>{1.5f, -0.0f, nan, inf, -inf, 1e-42f /* subnormal */}, {2, 3});
    st.tensors["transposed.f64"] = arange(12, DType::float64).view({3, 4}).transpose(0, 1);  // (4, 3), not contiguous
    st.tensors["sliced.f32"] = arange(10).slice(0, 1, 9, 3);                                 // elements 1, 4, 7
    st.tensors["expanded.f32"] = arange(3).view({3, 1}).expand({3, 4});                      // stride 0
    st.tensors["ids.i64"] = from_vector(
        std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -1, 0, std::numeric_limits<int64_t>::max()}, {4});
    st.tensors["mask.bool"] = from_vector(std::vector<bool>{true, false, false, true, true, false}, {3, 2});
    st.tensors["mask.transposed"] =
        from_vector(std::vector<bool>{true, false, false, true, true, false}, {3, 2}).transpose(0, 1);
    st.tensors["scalar.f64"] = scalar(-2.25, DType::float64);  // 0-d
    st.tensors["scalar.i64"] = scalar(42, DType::int64);
    st.tensors["empty.f32"] = zeros({0, 3});  // no elements, no bytes
    st.tensors["empty.i64"] = zeros({2, 0}, DType::int64);
    st.tensors["empty.bool"] = zeros({0}, DType::boolean);
    st.tensors["ünïcödé ✓"] = ones({1}, DType::float64);
    st.tensors[""] = full({2}, 7.0);
    st.metadata["note"] = "two\nlines, \"quotes\", a \\ backslash and a\ttab";
    st.metadata["unicode"] = "héllo wörld ✓ 日本語 🚀";
    st.metadata["empty"] = "";
    st.metadata[""] = "empty key";
    st.metadata["control"] = std::string("nul \0 and \x01", 11);
    return st;
}

}  // namespace

// ---- the byte layout -------------------------------------------------------------------------------

TEST_CASE("serialize_safetensors(st): bytes match hand-assembled files", "[nn][safetensors]") {
    SECTION("the reference implementation's own example: F32 (1x2x3), header exactly 64 bytes, no padding") {
        SafeTensors st;
        st.tensors["attn.0"] = arange(6).view({1, 2, 3});
        const Bytes expected =
            concat({le64(64), as_bytes(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})"),
                    le_bytes<float>({0, 1, 2, 3, 4, 5})});
        CHECK(serialize_safetensors(st) == expected);
        check_same(parse_safetensors(expected, "attn.safetensors"), st);
    }
    SECTION("every dtype: metadata first, I64 F64 F32 BOOL order, padding to 8 with spaces") {
        SafeTensors st;
        st.tensors["b"] = from_vector(std::vector<bool>{true, false, true}, {3});
        st.tensors["a"] = from_vector(std::vector<float>{1.0f, 0.5f}, {2});
        st.tensors["i"] = scalar(7, DType::int64);
        st.tensors["e"] = zeros({0}, DType::float64);
        st.metadata["k"] = "v";
        // 241 bytes of JSON + 7 spaces = 248, a multiple of 8
        const std::string header = R"({"__metadata__":{"k":"v"},)"
                                   R"("i":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                                   R"("e":{"dtype":"F64","shape":[0],"data_offsets":[8,8]},)"
                                   R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                                   R"("b":{"dtype":"BOOL","shape":[3],"data_offsets":[16,19]}})"
                                   "       ";
        REQUIRE(header.size() == 248);
        const Bytes expected = concat({le64(248),
                                       as_bytes(header),
                                       {7, 0, 0, 0, 0, 0, 0, 0},  // i = 7
                                       {0, 0, 0x80, 0x3F},        // a[0] = 1.0f
                                       {0, 0, 0, 0x3F},           // a[1] = 0.5f
                                       {1, 0, 1}});               // b
        CHECK(serialize_safetensors(st) == expected);
        check_same(parse_safetensors(expected, "pinned.safetensors"), st);
    }
    SECTION("no tensors: '{}' padded to 8; with metadata only") {
        CHECK(serialize_safetensors({}) == concat({le64(8), as_bytes("{}      ")}));
        SafeTensors st;
        st.metadata["framework"] = "pt";
        CHECK(serialize_safetensors(st) == concat({le64(40), as_bytes(R"({"__metadata__":{"framework":"pt"}}     )")}));
    }
    SECTION("every tensor starts at a multiple of its element size") {
        const Bytes bytes = serialize_safetensors(sample_checkpoint());
        uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
        CHECK(n % 8 == 0);  // so the data section starts 8-byte aligned in the file
        const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
        const std::map<std::string, uint64_t> element_size{{"I64", 8}, {"F64", 8}, {"F32", 4}, {"BOOL", 1}};
        int checked = 0;
        for (const auto& [name, entry] : header.items()) {
            if (name == "__metadata__") continue;
            INFO("tensor " << name);
            CHECK(entry["data_offsets"][0].get<uint64_t>() % element_size.at(entry["dtype"].get<std::string>()) == 0);
            ++checked;
        }
        CHECK(checked == static_cast<int>(sample_checkpoint().tensors.size()));
    }
}

TEST_CASE("parse_safetensors(bytes, name): accepts any valid layout, not only its own", "[nn][safetensors]") {
    // entries out of offset order, metadata last, zero-size tensors at the
    // first and last offsets, pretty-printed JSON, no padding
    const std::string header =
        "{\n"
        "  \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]},\n"
        "  \"z0\": {\"shape\": [0, 5], \"data_offsets\": [0, 0], \"dtype\": \"I64\"},\n"
        "  \"a\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]},\n"
        "  \"z1\": {\"dtype\": \"BOOL\", \"shape\": [0], \"data_offsets\": [12, 12]},\n"
        "  \"__metadata__\": {\"step\": \"100\"}\n"
        "}";
    const SafeTensors st = parse_safetensors(
        assemble(header, concat({le_bytes<int64_t>({-5}), le_bytes<float>({2.5f})})), "pretty.safetensors");
    CHECK(st.metadata == std::map<std::string, std::string>{{"step", "100"}});
    REQUIRE(st.tensors.size() == 4);
    CHECK(st.tensors.at("a").to_vector<int64_t>() == std::vector<int64_t>{-5});
    CHECK(st.tensors.at("b").to_vector<float>() == std::vector<float>{2.5f});
    CHECK(st.tensors.at("z0").shape() == Shape{0, 5});
    CHECK(st.tensors.at("z0").dtype() == DType::int64);
    CHECK(st.tensors.at("z1").numel() == 0);
    // "-0" is an integer 0; a huge shape with a zero in front has 0 elements
    const SafeTensors odd = parse_safetensors(
        assemble(R"({"x":{"dtype":"F64","shape":[0,9223372036854775807],"data_offsets":[-0,0]}})"), "odd");
    CHECK(odd.tensors.at("x").numel() == 0);
}

// ---- round trips -------------------------------------------------------------------------------------

TEST_CASE("save_safetensors(path, st) / load_safetensors(path): round trip of every dtype and layout",
          "[nn][safetensors]") {
    const SafeTensors st = sample_checkpoint();
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    save_safetensors(path, st);
    check_same(load_safetensors(path), st);
    // the file holds exactly what serialize_safetensors produces
    CHECK(read_file(path) == serialize_safetensors(st));
    // the in-memory path agrees
    check_same(parse_safetensors(serialize_safetensors(st), "memory"), st);
    // saving what was loaded gives the same bytes again
    const std::string again = dir.file("again.safetensors");
    save_safetensors(again, load_safetensors(path));
    CHECK(read_file(again) == read_file(path));
    CHECK(dir.listing() == std::set<std::string>{"model.safetensors", "again.safetensors"});
}

TEST_CASE("save_safetensors(path, st): bad contents throw ValueError before touching the disk", "[nn][safetensors]") {
    TempDir dir;
    const std::string path = dir.file("keep.safetensors");
    SafeTensors good;
    good.tensors["w"] = ones({2});
    save_safetensors(path, good);
    const Bytes before = read_file(path);

    struct BadContents {
        const char* problem;
        SafeTensors st;
        const char* message;
    };
    std::vector<BadContents> cases;
    cases.push_back({"reserved name", {}, "the tensor name '__metadata__' is reserved"});
    cases.back().st.tensors["__metadata__"] = ones({1});
    cases.push_back({"undefined tensor", {}, "tensor 'w' is undefined"});
    cases.back().st.tensors["w"] = Tensor();
    cases.push_back({"name not UTF-8", {}, "tensor name 'bad\xff' is not valid UTF-8"});
    cases.back().st.tensors["bad\xff"] = ones({1});
    cases.push_back({"metadata value not UTF-8", {}, "metadata value for key 'k' is not valid UTF-8"});
    cases.back().st.metadata["k"] = "\xc0\xaf";
    for (const BadContents& c : cases) {
        DYNAMIC_SECTION(c.problem) {
            REQUIRE_THROWS_AS(save_safetensors(path, c.st), ValueError);
            REQUIRE_THROWS_WITH(save_safetensors(path, c.st), Contains("save_safetensors: ") && Contains(c.message));
            REQUIRE_THROWS_AS(serialize_safetensors(c.st), ValueError);
            CHECK(read_file(path) == before);
            CHECK(dir.listing() == std::set<std::string>{"keep.safetensors"});
        }
    }
}

// ---- invalid files: one case per check ----------------------------------------------------------------

namespace {

struct BadFile {
    std::string problem;  // what is wrong, as the section name
    Bytes bytes;
    std::string message;  // a fragment the IOError message must contain
};

// A one-tensor header around an entry body, e.g. entry(R"("dtype":"F32")").
std::string one_entry(std::string_view body) { return fmt::format(R"({{"x":{{{}}}}})", body); }

std::vector<BadFile> bad_files() {
    const Bytes f32x2 = le_bytes<float>({1, 2});  // 8 bytes
    const std::string ok_x = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
    return {
        // -- the length field
        {"empty file", {}, "file is 0 bytes, shorter than the 8-byte header length"},
        {"7 bytes", Bytes(7, 0), "file is 7 bytes, shorter than the 8-byte header length"},
        {"header length past the end of the file", assemble_with_length(1000, "{}"),
         "header length 1000 reaches past the end of the file (2 bytes follow the length field)"},
        {"header length over 100 MB", le64(100'000'001),
         "header length 100000001 exceeds the limit of 100000000 bytes"},
        {"header length 2^64 - 1", le64(std::numeric_limits<uint64_t>::max()),
         "header length 18446744073709551615 exceeds the limit"},
        {"header length 0", le64(0), "header length is 0"},
        // -- the header text
        {"header not UTF-8", assemble("{\"a\xff\":1}"), "header is not valid UTF-8 (byte 0xff at header offset 3)"},
        {"header with an overlong UTF-8 form", assemble("{\"\xc0\xaf\":1}"), "header is not valid UTF-8 (byte 0xc0"},
        {"header with a UTF-8 surrogate", assemble("{\"\xed\xa0\x80\":1}"), "header is not valid UTF-8 (byte 0xed"},
        {"header ending inside a UTF-8 sequence", assemble("{}\xe2\x82"),
         "header is not valid UTF-8 (byte 0xe2 at header offset 2)"},
        {"header not JSON", assemble(R"({"x": {"dtype": "F32",)"), "header is not valid JSON: "},
        {"header padded with NUL bytes", assemble(std::string("{}\0\0\0\0\0\0", 8)),
         "header holds a NUL byte at header offset 2"},
        {"header hiding bytes after a NUL", assemble(std::string("{}\0{\"x\":1}", 10)),
         "header holds a NUL byte at header offset 2"},
        {"header a JSON array", assemble("[1, 2]"), "header is not a JSON object (got array)"},
        {"header a JSON string", assemble(R"("hello")"), "header is not a JSON object (got string)"},
        {"header with leading whitespace", assemble(" {}"), "header must start with '{', got byte 0x20"},
        // nlohmann throws out_of_range, not parse_error, for a number beyond a double: it gets the same
        // message as any invalid JSON, not nlohmann's "[json.exception.out_of_range.406] ..."
        {"header with a number beyond a double", assemble(R"({"__metadata__":{},"x":351e336})"),
         "header is not valid JSON: number overflow parsing '351e336'"},
        {"header nested too deeply", assemble(R"({"x":[[[[[[[[[[]]]]]]]]]]})"),
         "header JSON is nested more than 8 levels deep"},
        // -- duplicate keys (nlohmann alone would keep the last one silently)
        {"duplicate tensor names",
         assemble(
             R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             f32x2),
         "duplicate key 'x' in the header"},
        {"duplicate field in an entry", assemble(one_entry(ok_x + R"(,"dtype":"F64")"), f32x2),
         "duplicate key 'dtype' inside 'x'"},
        {"duplicate metadata key", assemble(R"({"__metadata__":{"k":"a","k":"b"}})"),
         "duplicate key 'k' inside '__metadata__'"},
        // -- entry structure
        {"entry not an object", assemble(R"({"x":5})"),
         "entry for tensor 'x' must be an object with dtype, shape and data_offsets, got number"},
        {"entry missing shape", assemble(one_entry(R"("dtype":"F32","data_offsets":[0,8])"), f32x2),
         "tensor 'x' is missing the field 'shape'"},
        {"entry missing data_offsets", assemble(one_entry(R"("dtype":"F32","shape":[2])"), f32x2),
         "tensor 'x' is missing the field 'data_offsets'"},
        {"entry missing dtype", assemble(one_entry(R"("shape":[2],"data_offsets":[0,8])"), f32x2),
         "tensor 'x' is missing the field 'dtype'"},
        {"entry with an extra field", assemble(one_entry(ok_x + R"(,"offsets":[0,8])"), f32x2),
         "tensor 'x' has unknown field 'offsets'"},
        // -- dtype
        {"dtype not a string", assemble(one_entry(R"("dtype":4,"shape":[2],"data_offsets":[0,8])"), f32x2),
         "dtype of tensor 'x' must be a string, got 4"},
        {"unknown dtype", assemble(one_entry(R"("dtype":"F33","shape":[2],"data_offsets":[0,8])"), f32x2),
         "unknown dtype 'F33' for tensor 'x'"},
        {"lower-case dtype", assemble(one_entry(R"("dtype":"f32","shape":[2],"data_offsets":[0,8])"), f32x2),
         "unknown dtype 'f32' for tensor 'x'"},
        {"unsupported dtype F16", assemble(one_entry(R"("dtype":"F16","shape":[2],"data_offsets":[0,4])"), Bytes(4, 0)),
         "unsupported dtype F16 for tensor 'x'"},
        {"unsupported dtype BF16",
         assemble(one_entry(R"("dtype":"BF16","shape":[2],"data_offsets":[0,4])"), Bytes(4, 0)),
         "unsupported dtype BF16 for tensor 'x'"},
        {"unsupported dtype I32", assemble(one_entry(R"("dtype":"I32","shape":[2],"data_offsets":[0,8])"), f32x2),
         "unsupported dtype I32 for tensor 'x'"},
        // -- shape
        {"shape not an array", assemble(one_entry(R"("dtype":"F32","shape":2,"data_offsets":[0,8])"), f32x2),
         "shape of tensor 'x' must be an array of non-negative integers, got 2"},
        {"shape with a negative size", assemble(one_entry(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), f32x2),
         "shape of tensor 'x' must be an array of non-negative integers, got [-2]"},
        {"shape with a fraction", assemble(one_entry(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,8])"), f32x2),
         "got [1.5]"},
        {"shape with an integral float",
         assemble(one_entry(R"("dtype":"F32","shape":[2.0],"data_offsets":[0,8])"), f32x2), "got [2.0]"},
        {"shape with a string", assemble(one_entry(R"("dtype":"F32","shape":["2"],"data_offsets":[0,8])"), f32x2),
         R"(got ["2"])"},
        {"shape with a size beyond 2^64",
         assemble(one_entry(R"("dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8])"), f32x2),
         "shape of tensor 'x' must be an array of non-negative integers"},
        {"shape with 9 dimensions",
         assemble(one_entry(R"("dtype":"F32","shape":[1,1,1,1,1,1,1,1,2],"data_offsets":[0,8])"), f32x2),
         "shape of tensor 'x' has 9 dimensions; tformer supports at most 8"},
        // -- overflow
        {"element count overflows",
         assemble(one_entry(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8])"), f32x2),
         "shape [4294967296,4294967296] of tensor 'x' overflows"},
        {"size above int64",
         assemble(one_entry(R"("dtype":"BOOL","shape":[9223372036854775808],"data_offsets":[0,8])"), f32x2),
         "of tensor 'x' overflows: its element count does not fit in int64"},
        {"byte size overflows",
         assemble(one_entry(R"("dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8])"), f32x2),
         "tensor 'x' of shape (2305843009213693952) and dtype F64 has a byte size that overflows 64 bits"},
        // -- data_offsets on their own
        {"data_offsets not an array", assemble(one_entry(R"("dtype":"F32","shape":[2],"data_offsets":8)"), f32x2),
         "data_offsets of tensor 'x' must be [begin, end] with two non-negative integers, got 8"},
        {"data_offsets with one number", assemble(one_entry(R"("dtype":"F32","shape":[2],"data_offsets":[8])"), f32x2),
         "got [8]"},
        {"data_offsets with three numbers",
         assemble(one_entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,4,8])"), f32x2), "got [0,4,8]"},
        {"data_offsets negative", assemble(one_entry(R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])"), f32x2),
         "got [-8,0]"},
        {"data_offsets fractional", assemble(one_entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8.0])"), f32x2),
         "got [0,8.0]"},
        {"data_offsets begin after end",
         assemble(one_entry(R"("dtype":"F32","shape":[2],"data_offsets":[8,0])"), f32x2),
         "data_offsets of tensor 'x' are [8, 0]: begin is after end"},
        {"size not numel times element size",
         assemble(one_entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])"), Bytes(4, 0)),
         "tensor 'x' of shape (2) and dtype F32 needs 8 bytes, but data_offsets [0, 4] span 4 bytes"},
        {"0-d tensor with no bytes", assemble(one_entry(R"("dtype":"I64","shape":[],"data_offsets":[0,0])")),
         "tensor 'x' of shape () and dtype I64 needs 8 bytes, but data_offsets [0, 0] span 0 bytes"},
        // -- data_offsets together: the ranges must tile the data section
        {"first tensor not at offset 0",
         assemble(one_entry(R"("dtype":"F32","shape":[1],"data_offsets":[4,8])"), f32x2),
         "4 unused bytes before the first tensor 'x' (data_offsets must start at 0)"},
        {"gap between tensors",
         assemble(
             R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
             Bytes(12, 0)),
         "gap of 4 unused bytes between tensor 'a' (ends at 4) and tensor 'b' (begins at 8)"},
        {"overlapping tensors",
         assemble(
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
             Bytes(12, 0)),
         "tensor 'b' (bytes [4, 12]) overlaps tensor 'a' (bytes [0, 8])"},
        {"two tensors sharing one range",
         assemble(
             R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
             Bytes(4, 0)),
         "tensor 'b' (bytes [0, 4]) overlaps tensor 'a' (bytes [0, 4])"},
        {"empty tensor inside another",
         assemble(
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
             f32x2),
         "tensor 'e' (bytes [4, 4]) overlaps tensor 'a' (bytes [0, 8])"},
        {"tensor past the end of the file", assemble(one_entry(ok_x), Bytes(4, 0)),
         "tensor 'x' has data_offsets [0, 8], past the end of the data section (4 bytes; file truncated?)"},
        {"trailing bytes after the last tensor",
         assemble(one_entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])"), f32x2),
         "4 trailing bytes after the last tensor (the data section is 8 bytes, the tensors cover 4)"},
        {"trailing bytes and no tensors", assemble("{}", Bytes(3, 0)), "3 trailing bytes after the last tensor"},
        // -- metadata
        {"__metadata__ a string", assemble(R"({"__metadata__":"v1"})"),
         "__metadata__ must be an object of strings, got string"},
        {"__metadata__ null", assemble(R"({"__metadata__":null})"),
         "__metadata__ must be an object of strings, got null"},
        {"__metadata__ with a number", assemble(R"({"__metadata__":{"step":100}})"),
         "__metadata__ value for key 'step' must be a string, got number 100"},
        {"__metadata__ with an object", assemble(R"({"__metadata__":{"cfg":{"d":2}}})"),
         "__metadata__ value for key 'cfg' must be a string, got object"},
        // -- data
        {"BOOL byte other than 0 and 1",
         assemble(one_entry(R"("dtype":"BOOL","shape":[3],"data_offsets":[0,3])"), {1, 0, 2}),
         "tensor 'x' has dtype BOOL but holds the byte 2 at element 2 (must be 0 or 1)"},
    };
}

}  // namespace

TEST_CASE("parse_safetensors(bytes, name) / load_safetensors(path): each invalid file throws IOError naming it",
          "[nn][safetensors]") {
    TempDir dir;
    for (const BadFile& bad : bad_files()) {
        DYNAMIC_SECTION(bad.problem) {
            // in memory
            REQUIRE_THROWS_AS(parse_safetensors(bad.bytes, "bad.safetensors"), IOError);
            REQUIRE_THROWS_WITH(parse_safetensors(bad.bytes, "bad.safetensors"),
                                Contains("parse_safetensors: 'bad.safetensors': ") && Contains(bad.message));
            // from a file (another read path: pread of the header and of each tensor)
            const std::string path = dir.file("bad.safetensors");
            write_file(path, bad.bytes);
            REQUIRE_THROWS_AS(load_safetensors(path), IOError);
            REQUIRE_THROWS_WITH(load_safetensors(path),
                                Contains(fmt::format("load_safetensors: '{}': ", path)) && Contains(bad.message));
        }
    }
}

TEST_CASE("load_safetensors(path): a missing file or a directory throws IOError with the OS reason",
          "[nn][safetensors]") {
    TempDir dir;
    const std::string missing = dir.file("missing.safetensors");
    REQUIRE_THROWS_AS(load_safetensors(missing), IOError);
    REQUIRE_THROWS_WITH(
        load_safetensors(missing),
        Contains(fmt::format("load_safetensors: cannot open '{}': No such file or directory", missing)));
    REQUIRE_THROWS_WITH(load_safetensors(dir.path.string()),
                        Contains("is a directory; give the path of a safetensors file"));
    // a device is refused before a byte is read (core:open_regular_file tests FIFOs and sockets)
    REQUIRE_THROWS_WITH(load_safetensors("/dev/zero"),
                        "load_safetensors: '/dev/zero' is a character device, not a regular file; give the path of a "
                        "safetensors file");
}

// ---- atomic saving ---------------------------------------------------------------------------------

namespace {

SafeTensors checkpoint_v(double version) {
    SafeTensors st;
    st.tensors["w"] = full({4, 4}, version);
    st.metadata["version"] = fmt::format("{}", version);
    return st;
}

// Limits the size of files this process may write (RLIMIT_FSIZE) and ignores
// SIGXFSZ, so a write past the limit fails with EFBIG as a full disk would;
// both are restored at the end of the scope.
class FileSizeLimit {
public:
    explicit FileSizeLimit(rlim_t bytes) {
        REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
        old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
        rlimit limited = saved_;
        limited.rlim_cur = bytes;
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
    }
    ~FileSizeLimit() {
        ::setrlimit(RLIMIT_FSIZE, &saved_);
        ::signal(SIGXFSZ, old_handler_);
    }

private:
    rlimit saved_{};
    void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("save_safetensors(path, st): replaces the file atomically and leaves no temporary file",
          "[nn][safetensors]") {
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    save_safetensors(path, checkpoint_v(1));
    save_safetensors(path, checkpoint_v(2));
    check_same(load_safetensors(path), checkpoint_v(2));
    CHECK(dir.listing() == std::set<std::string>{"ckpt.safetensors"});
    // a path without a directory part writes into the current directory
    const fs::path cwd = fs::current_path();
    fs::current_path(dir.path);
    save_safetensors("here.safetensors", checkpoint_v(3));
    fs::current_path(cwd);
    check_same(load_safetensors(dir.file("here.safetensors")), checkpoint_v(3));
}

TEST_CASE("save_safetensors(path, st): failures throw IOError and leave the old file and directory as they were",
          "[nn][safetensors]") {
    TempDir dir;
    const std::string old_path = dir.file("old.safetensors");
    save_safetensors(old_path, checkpoint_v(1));
    const Bytes old_bytes = read_file(old_path);

    SECTION("the target is a directory: the final rename fails") {
        const std::string target = dir.file("ckpt.safetensors");
        fs::create_directory(target);
        write_file(target + "/inside.txt", as_bytes("keep me"));
        REQUIRE_THROWS_AS(save_safetensors(target, checkpoint_v(2)), IOError);
        REQUIRE_THROWS_WITH(
            save_safetensors(target, checkpoint_v(2)),
            Contains(fmt::format("save_safetensors: cannot write '{}': ", target)) && Contains("Is a directory"));
        CHECK(fs::is_directory(target));
        CHECK(read_file(target + "/inside.txt") == as_bytes("keep me"));
        CHECK(dir.listing() == std::set<std::string>{"old.safetensors", "ckpt.safetensors"});
    }
    SECTION("the directory does not exist: no temporary file can be created") {
        const std::string target = dir.file("missing/ckpt.safetensors");
        REQUIRE_THROWS_AS(save_safetensors(target, checkpoint_v(2)), IOError);
        REQUIRE_THROWS_WITH(save_safetensors(target, checkpoint_v(2)),
                            Contains(fmt::format("save_safetensors: cannot write '{}': ", target)) &&
                                Contains("No such file or directory"));
        CHECK(dir.listing() == std::set<std::string>{"old.safetensors"});
    }
    SECTION("the path names a directory (ends in '/')") {
        REQUIRE_THROWS_WITH(save_safetensors(dir.path.string() + "/", checkpoint_v(2)),
                            Contains("the path names a directory, not a file"));
    }
    SECTION("a write fails half way (file size limit, as a full disk): the old file survives") {
        SafeTensors big;
        big.tensors["w"] = full({1 << 16}, 3.0);  // 256 KiB, far past the limit
        {
            const FileSizeLimit limit(4096);
            REQUIRE_THROWS_AS(save_safetensors(old_path, big), IOError);
            REQUIRE_THROWS_WITH(
                save_safetensors(old_path, big),
                Contains(fmt::format("save_safetensors: cannot write '{}': writing the temporary file", old_path)) &&
                    Contains("File too large"));
        }
        CHECK(read_file(old_path) == old_bytes);
        CHECK(dir.listing() == std::set<std::string>{"old.safetensors"});
        // and the same save succeeds once the limit is gone
        const std::string later = dir.file("later.safetensors");
        save_safetensors(later, big);
        check_same(load_safetensors(later), big);
    }
    CHECK(read_file(old_path) == old_bytes);
    check_same(load_safetensors(old_path), checkpoint_v(1));
}
