// safetensors reading and writing; the format is described in safetensors.hpp.
//
// Reading is a chain of checks, each with its own message, in the order the
// bytes are met: the 8-byte length, the header bytes (UTF-8, JSON, an object),
// each entry (fields, dtype, shape, offsets, sizes), then the byte ranges of
// all entries together (they must tile the data section), and only then the
// data itself. Nothing is allocated or copied before the header has proved
// that every range lies inside the file, so a hostile file cannot make us
// allocate more than its own size or read outside it.
#include "nn/safetensors.hpp"

#include "core/file.hpp"
#include "core/utf8.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <system_error>

namespace tformer::nn {

// The data section is little-endian; on such a host the bytes of a tensor's
// storage are already the bytes of the file and are copied as they are.
static_assert(std::endian::native == std::endian::little,
              "safetensors.cpp copies tensor bytes unchanged, which assumes a little-endian host");

namespace {

using core::DType;
using Json = nlohmann::json;

// ---- dtypes ---------------------------------------------------------------------------------

// The dtypes tformer holds, with their names in the file.
struct FileDType {
    std::string_view name;
    DType dtype;
};
constexpr FileDType kSupportedDTypes[] = {
    {"F32", DType::float32}, {"F64", DType::float64}, {"I64", DType::int64}, {"BOOL", DType::boolean}};

// Dtypes the format defines but tformer has no storage type for; a file using
// them is valid safetensors, so the error says "unsupported", not "unknown".
constexpr std::string_view kOtherFormatDTypes[] = {"F16",     "BF16",    "I32",     "U32", "I16",     "U16",
                                                   "I8",      "U8",      "U64",     "C64", "F8_E5M2", "F8_E4M3",
                                                   "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"};

std::optional<DType> supported_dtype(std::string_view name) {
    for (const FileDType& d : kSupportedDTypes)
        if (d.name == name) return d.dtype;
    return std::nullopt;
}

bool is_other_format_dtype(std::string_view name) {
    return std::find(std::begin(kOtherFormatDTypes), std::end(kOtherFormatDTypes), name) !=
           std::end(kOtherFormatDTypes);
}

// Position of a dtype in the writer's order: largest elements first, and
// among equal sizes the order of the reference writer (I64 before F64).
int write_rank(DType dtype) {
    switch (dtype) {
        case DType::int64: return 0;
        case DType::float64: return 1;
        case DType::float32: return 2;
        case DType::boolean: return 3;
    }
    return 4;
}

// ---- small helpers --------------------------------------------------------------------------

// The OS's text for an errno value ("No such file or directory").
std::string os_reason(int err) { return std::generic_category().message(err); }

// A name as it appears in messages: quoted, control bytes escaped, and cut
// when very long, since names come from the file.
std::string quote_name(std::string_view s) {
    const size_t shown = core::utf8_prefix_length(s, 120);
    std::string out = "'";
    for (size_t i = 0; i < shown; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7F)
            out += fmt::format("\\x{:02x}", c);
        else
            out += static_cast<char>(c);
    }
    out += shown < s.size() ? "'..." : "'";
    return out;
}

// Index of the first byte that is not well-formed UTF-8, or npos (core/utf8.hpp).
size_t find_invalid_utf8(std::span<const uint8_t> s) {
    return core::find_invalid_utf8(std::string_view(reinterpret_cast<const char*>(s.data()), s.size()));
}
using core::find_invalid_utf8;

// A JSON number that is an integer >= 0 ("-0" included), else nothing.
// Fractions, exponents ("1e3") and integers beyond 2^64 - 1 are doubles in
// nlohmann and so are rejected here.
std::optional<uint64_t> json_uint(const Json& v) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    return std::nullopt;
}

// A JSON value as it appears in messages, cut when long.
std::string shown(const Json& v) {
    const std::string text = v.dump(-1, ' ', false, Json::error_handler_t::replace);
    const size_t n = core::utf8_prefix_length(text, 80);
    return n < text.size() ? text.substr(0, n) + "..." : text;
}

// a * b, or nothing when it exceeds `limit`.
std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b, uint64_t limit) {
    if (a != 0 && b > limit / a) return std::nullopt;
    return a * b;
}

// ---- reading: errors --------------------------------------------------------------------------

// Which function is reading which file, so every message names both:
//   load_safetensors: 'ckpt.safetensors': header length 4096 reaches past ...
struct Source {
    const char* op;
    const std::string& name;

    template <class... Args>
    [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
        throw IOError(fmt::format("{}: '{}': {}", op, name, fmt::format(format, std::forward<Args>(args)...)));
    }
};

// ---- reading: the header -------------------------------------------------------------------

// One tensor as the header describes it, checked on its own.
struct Entry {
    std::string name;
    DType dtype = DType::float32;
    core::Shape shape;
    uint64_t begin = 0, end = 0;  // byte range in the data section
};

// Parses the header text into a JSON value. nlohmann keeps the last of
// duplicate keys without a word, which would let two readers of one file see
// different tensors; the parser callback below tracks the keys of every open
// object and rejects the second occurrence instead.
Json parse_header_json(std::string_view text, const Source& src) {
    struct OpenObject {
        std::set<std::string> keys;
        std::string last_key;
    };
    std::vector<OpenObject> open;  // innermost object last
    const Json::parser_callback_t on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
        using E = Json::parse_event_t;
        if ((event == E::object_start || event == E::array_start) && depth >= kMaxJsonDepth)
            src.fail("header JSON is nested more than {} levels deep", kMaxJsonDepth);
        if (event == E::object_start) open.emplace_back();
        if (event == E::object_end) open.pop_back();
        if (event == E::key) {
            const auto& key = parsed.get_ref<const std::string&>();
            if (!open.back().keys.insert(key).second) {
                if (open.size() == 1) src.fail("duplicate key {} in the header", quote_name(key));
                src.fail("duplicate key {} inside {}", quote_name(key), quote_name(open[open.size() - 2].last_key));
            }
            open.back().last_key = key;
        }
        return true;
    };
    try {
        return Json::parse(text.begin(), text.end(), on_event);
    } catch (const Json::exception& e) {
        // parse_error, or out_of_range for a number beyond a double;
        // drop nlohmann's "[json.exception.parse_error.101] " prefix
        std::string_view what = e.what();
        if (const size_t cut = what.find("] "); cut != std::string_view::npos) what.remove_prefix(cut + 2);
        src.fail("header is not valid JSON: {}", what);
    }
}

// The "__metadata__" object: string keys to string values.
std::map<std::string, std::string> decode_metadata(const Json& value, const Source& src) {
    if (!value.is_object()) src.fail("__metadata__ must be an object of strings, got {}", value.type_name());
    std::map<std::string, std::string> out;
    for (const auto& [key, v] : value.items()) {
        if (!v.is_string())
            src.fail("__metadata__ value for key {} must be a string, got {} {}", quote_name(key), v.type_name(),
                     shown(v));
        out.emplace(key, v.get<std::string>());
    }
    return out;
}

// One entry {"dtype": .., "shape": [..], "data_offsets": [begin, end]}: its
// fields, and its byte count against shape and dtype. Where the range lies
// relative to the other entries is checked later, once all are known.
Entry decode_entry(const std::string& name, const Json& value, const Source& src) {
    const std::string who = quote_name(name);
    if (!value.is_object())
        src.fail("entry for tensor {} must be an object with dtype, shape and data_offsets, got {}", who,
                 value.type_name());
    for (const auto& [field, v] : value.items())
        if (field != "dtype" && field != "shape" && field != "data_offsets")
            src.fail("tensor {} has unknown field {} (expected only dtype, shape and data_offsets)", who,
                     quote_name(field));
    for (const char* field : {"dtype", "shape", "data_offsets"})
        if (!value.contains(field)) src.fail("tensor {} is missing the field '{}'", who, field);

    Entry e;
    e.name = name;

    // dtype
    const Json& dtype = value["dtype"];
    if (!dtype.is_string()) src.fail("dtype of tensor {} must be a string, got {}", who, shown(dtype));
    const auto& dtype_name = dtype.get_ref<const std::string&>();
    if (const auto d = supported_dtype(dtype_name)) {
        e.dtype = *d;
    } else if (is_other_format_dtype(dtype_name)) {
        src.fail("unsupported dtype {} for tensor {} (tformer reads F32, F64, I64 and BOOL)", dtype_name, who);
    } else {
        src.fail("unknown dtype {} for tensor {}", quote_name(dtype_name), who);
    }

    // shape: at most kMaxDims sizes, each an integer >= 0; the element count
    // must fit in int64 (tformer's numel type)
    const Json& shape = value["shape"];
    if (!shape.is_array())
        src.fail("shape of tensor {} must be an array of non-negative integers, got {}", who, shown(shape));
    if (shape.size() > static_cast<size_t>(core::kMaxDims))
        src.fail("shape of tensor {} has {} dimensions; tformer supports at most {}", who, shape.size(),
                 core::kMaxDims);
    constexpr auto kMaxNumel = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    uint64_t numel = 1;
    bool overflow = false;  // a size or a partial product above int64's maximum
    for (const Json& size : shape) {
        const auto s = json_uint(size);
        if (!s) src.fail("shape of tensor {} must be an array of non-negative integers, got {}", who, shown(shape));
        const auto product = checked_mul(numel, *s, kMaxNumel);
        if (*s > kMaxNumel || !product)
            overflow = true;
        else
            numel = *product;
        e.shape.push_back(static_cast<int64_t>(std::min(*s, kMaxNumel)));
    }
    // as in the reference reader, a product that overflows part way is
    // rejected even when a later size is 0
    if (overflow)
        src.fail("shape {} of tensor {} overflows: its element count does not fit in int64", shown(shape), who);

    // data_offsets: [begin, end], integers, begin <= end
    const Json& offsets = value["data_offsets"];
    std::optional<uint64_t> begin, end;
    if (offsets.is_array() && offsets.size() == 2) {
        begin = json_uint(offsets[0]);
        end = json_uint(offsets[1]);
    }
    if (!begin || !end)
        src.fail("data_offsets of tensor {} must be [begin, end] with two non-negative integers, got {}", who,
                 shown(offsets));
    if (*begin > *end) src.fail("data_offsets of tensor {} are [{}, {}]: begin is after end", who, *begin, *end);
    e.begin = *begin;
    e.end = *end;

    // the range holds exactly numel elements of the dtype
    const auto elem = static_cast<uint64_t>(core::dtype_size(e.dtype));
    const auto nbytes = checked_mul(numel, elem, std::numeric_limits<uint64_t>::max());
    if (!nbytes)
        src.fail("tensor {} of shape {} and dtype {} has a byte size that overflows 64 bits", who,
                 core::shape_str(e.shape), dtype_name);
    if (e.end - e.begin != *nbytes)
        src.fail("tensor {} of shape {} and dtype {} needs {} bytes, but data_offsets [{}, {}] span {} bytes", who,
                 core::shape_str(e.shape), dtype_name, *nbytes, e.begin, e.end, e.end - e.begin);
    return e;
}

// The byte ranges, sorted by begin, must tile [0, data_size): each starts
// where the previous one ended, and the last ends at the end of the file. So
// no byte is shared by two tensors, none is unused, and none is outside.
void check_tiling(const std::vector<Entry>& sorted, uint64_t data_size, const Source& src) {
    uint64_t covered = 0;  // end of the previous range
    const Entry* prev = nullptr;
    for (const Entry& e : sorted) {
        if (e.end > data_size)
            src.fail(
                "tensor {} has data_offsets [{}, {}], past the end of the data section ({} bytes; file truncated?)",
                quote_name(e.name), e.begin, e.end, data_size);
        if (e.begin < covered)
            src.fail("tensor {} (bytes [{}, {}]) overlaps tensor {} (bytes [{}, {}])", quote_name(e.name), e.begin,
                     e.end, quote_name(prev->name), prev->begin, prev->end);
        if (e.begin > covered) {
            if (!prev)
                src.fail("{} unused bytes before the first tensor {} (data_offsets must start at 0)", e.begin,
                         quote_name(e.name));
            src.fail("gap of {} unused bytes between tensor {} (ends at {}) and tensor {} (begins at {})",
                     e.begin - covered, quote_name(prev->name), covered, quote_name(e.name), e.begin);
        }
        covered = e.end;
        prev = &e;
    }
    if (covered < data_size)
        src.fail("{} trailing bytes after the last tensor (the data section is {} bytes, the tensors cover {})",
                 data_size - covered, data_size, covered);
}

struct Header {
    std::vector<Entry> entries;  // sorted by byte range
    std::map<std::string, std::string> metadata;
};

Header decode_header(std::span<const uint8_t> bytes, uint64_t data_size, const Source& src) {
    if (const size_t bad = find_invalid_utf8(bytes); bad != std::string_view::npos)
        src.fail("header is not valid UTF-8 (byte 0x{:02x} at header offset {})", bytes[bad], bad);
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    // nlohmann stops at a raw NUL as if the input ended there, so "{}\0junk"
    // would parse; valid JSON never holds one (strings must escape it)
    if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
        src.fail("header holds a NUL byte at header offset {} (not allowed in JSON; padding must be spaces)", nul);
    const Json root = parse_header_json(text, src);
    if (!root.is_object()) src.fail("header is not a JSON object (got {})", root.type_name());
    // the format requires the very first byte to be '{' (no leading whitespace)
    if (text.front() != '{') src.fail("header must start with '{{', got byte 0x{:02x}", bytes[0]);

    Header h;
    for (const auto& [key, value] : root.items()) {
        if (key == "__metadata__")
            h.metadata = decode_metadata(value, src);
        else
            h.entries.push_back(decode_entry(key, value, src));
    }
    std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
        return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    check_tiling(h.entries, data_size, src);
    return h;
}

// ---- reading: the whole file ---------------------------------------------------------------

// Copies n bytes at `offset` of the file into dst; throws IOError on failure.
using ReadAt = std::function<void(uint64_t offset, uint8_t* dst, uint64_t n)>;

SafeTensors decode_file(uint64_t file_size, const ReadAt& read_at, const Source& src) {
    // [ N: u64 little-endian ]
    if (file_size < 8)
        src.fail("file is {} bytes, shorter than the 8-byte header length that starts every safetensors file",
                 file_size);
    uint8_t len_bytes[8];
    read_at(0, len_bytes, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
    if (n > kMaxSafetensorsHeaderBytes)
        src.fail("header length {} exceeds the limit of {} bytes", n, kMaxSafetensorsHeaderBytes);
    if (n > file_size - 8)
        src.fail("header length {} reaches past the end of the file ({} bytes follow the length field)", n,
                 file_size - 8);
    if (n == 0) src.fail("header length is 0; the header must be a JSON object");

    // [ N bytes of JSON ]
    std::vector<uint8_t> header_bytes(n);
    read_at(8, header_bytes.data(), n);
    const uint64_t data_start = 8 + n;
    const Header header = decode_header(header_bytes, file_size - data_start, src);

    // [ data section ]: every range is now known to lie inside the file
    SafeTensors out;
    out.metadata = header.metadata;
    for (const Entry& e : header.entries) {
        core::Tensor t = core::Tensor::empty(e.shape, e.dtype);
        const uint64_t nbytes = e.end - e.begin;
        if (nbytes > 0) read_at(data_start + e.begin, static_cast<uint8_t*>(t.raw_data()), nbytes);
        if (e.dtype == DType::boolean) {
            // a C++ bool must hold 0 or 1; any other byte would be undefined behaviour
            const auto* b = static_cast<const uint8_t*>(t.raw_data());
            for (uint64_t i = 0; i < nbytes; ++i)
                if (b[i] > 1)
                    src.fail("tensor {} has dtype BOOL but holds the byte {} at element {} (must be 0 or 1)",
                             quote_name(e.name), b[i], i);
        }
        out.tensors.emplace(e.name, std::move(t));
    }
    return out;
}

// Closes a file descriptor when it goes out of scope.
struct FdGuard {
    int fd = -1;
    ~FdGuard() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

SafeTensors parse_safetensors(std::span<const uint8_t> bytes, const std::string& source_name) {
    const Source src{"parse_safetensors", source_name};
    return decode_file(
        bytes.size(),
        [&](uint64_t offset, uint8_t* dst, uint64_t n) {
            // decode_file has checked the range; this guards the guard
            if (offset > bytes.size() || n > bytes.size() - offset)
                src.fail("internal error: read of {} bytes at {} outside {} bytes", n, offset, bytes.size());
            std::memcpy(dst, bytes.data() + offset, n);
        },
        src);
}

SafeTensors load_safetensors(const std::string& path) {
    const Source src{"load_safetensors", path};
    // a directory, a FIFO (which would wait for a writer forever) or a device is refused before a read
    FdGuard file{core::open_regular_file(path, "load_safetensors", "a safetensors file")};
    struct stat info {};
    if (::fstat(file.fd, &info) != 0) src.fail("cannot stat: {}", os_reason(errno));
    const auto file_size = static_cast<uint64_t>(info.st_size);

    return decode_file(
        file_size,
        [&](uint64_t offset, uint8_t* dst, uint64_t n) {
            // pread may return fewer bytes than asked (signals, huge requests): loop
            while (n > 0) {
                const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
                const ssize_t got = ::pread(file.fd, dst, chunk, static_cast<off_t>(offset));
                if (got < 0) {
                    if (errno == EINTR) continue;
                    src.fail("read failed at byte {}: {}", offset, os_reason(errno));
                }
                if (got == 0)
                    src.fail("file ended at byte {} while reading (it was {} bytes when opened; modified meanwhile?)",
                             offset, file_size);
                dst += got;
                offset += static_cast<uint64_t>(got);
                n -= static_cast<uint64_t>(got);
            }
        },
        src);
}

// ---- writing --------------------------------------------------------------------------------

namespace {

// What goes into the file, in order: the length field and padded header,
// then the tensors' bytes. A non-contiguous tensor is copied to row-major
// order only when its turn to be written comes, so at most one copy exists.
struct FilePlan {
    std::vector<uint8_t> head;  // 8-byte length + header
    std::vector<core::Tensor> data;
};

FilePlan plan_file(const SafeTensors& st, const char* op) {
    for (const auto& [key, value] : st.metadata) {
        if (find_invalid_utf8(key) != std::string_view::npos)
            fail<ValueError>("{}: metadata key {} is not valid UTF-8", op, quote_name(key));
        if (find_invalid_utf8(value) != std::string_view::npos)
            fail<ValueError>("{}: metadata value for key {} is not valid UTF-8", op, quote_name(key));
    }
    std::vector<std::pair<std::string, core::Tensor>> order;
    for (const auto& [name, t] : st.tensors) {
        if (name == "__metadata__") fail<ValueError>("{}: the tensor name '__metadata__' is reserved", op);
        if (find_invalid_utf8(name) != std::string_view::npos)
            fail<ValueError>("{}: tensor name {} is not valid UTF-8", op, quote_name(name));
        if (!t.defined()) fail<ValueError>("{}: tensor {} is undefined", op, quote_name(name));
        order.emplace_back(name, t);
    }
    // largest elements first, then by name: each tensor then starts at a
    // multiple of its element size (the header is padded to a multiple of 8)
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return write_rank(a.second.dtype()) < write_rank(b.second.dtype());
    });

    // ordered_json keeps insertion order, so the header reads in file order
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!st.metadata.empty()) {
        nlohmann::ordered_json meta = nlohmann::ordered_json::object();
        for (const auto& [key, value] : st.metadata) meta[key] = value;
        header["__metadata__"] = std::move(meta);
    }
    FilePlan plan;
    uint64_t offset = 0;
    for (auto& [name, t] : order) {
        const auto nbytes = static_cast<uint64_t>(t.numel() * core::dtype_size(t.dtype()));
        nlohmann::ordered_json entry = nlohmann::ordered_json::object();
        entry["dtype"] = safetensors_dtype_name(t.dtype());
        entry["shape"] = t.shape().to_vector();
        entry["data_offsets"] = {offset, offset + nbytes};
        header[name] = std::move(entry);
        offset += nbytes;
        plan.data.push_back(std::move(t));
    }
    std::string text = header.dump();  // compact: no spaces, UTF-8 kept as is
    text.resize((text.size() + 7) / 8 * 8, ' ');
    if (text.size() > kMaxSafetensorsHeaderBytes)
        fail<ValueError>("{}: header of {} bytes exceeds the limit of {} bytes ({} tensors)", op, text.size(),
                         kMaxSafetensorsHeaderBytes, st.tensors.size());

    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i, n >>= 8) plan.head.push_back(static_cast<uint8_t>(n & 0xFF));
    plan.head.insert(plan.head.end(), text.begin(), text.end());
    return plan;
}

// The bytes of a contiguous tensor.
std::span<const uint8_t> tensor_bytes(const core::Tensor& t) {
    return {static_cast<const uint8_t*>(t.raw_data()), static_cast<size_t>(t.numel() * core::dtype_size(t.dtype()))};
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
    for (const FileDType& d : kSupportedDTypes)
        if (d.dtype == dtype) return d.name;
    fail<ValueError>("safetensors_dtype_name: no safetensors name for dtype {}", core::dtype_name(dtype));
}

std::vector<uint8_t> serialize_safetensors(const SafeTensors& st) {
    const FilePlan plan = plan_file(st, "serialize_safetensors");
    std::vector<uint8_t> out = plan.head;
    for (const core::Tensor& t : plan.data) {
        const core::Tensor c = t.contiguous();
        const auto bytes = tensor_bytes(c);
        out.insert(out.end(), bytes.begin(), bytes.end());
    }
    return out;
}

void save_safetensors(const std::string& path, const SafeTensors& st) {
    // every check on the contents happens here, before the disk is touched
    const FilePlan plan = plan_file(st, "save_safetensors");
    core::AtomicFile file(path, "save_safetensors");
    file.write(plan.head);
    for (const core::Tensor& t : plan.data) file.write(tensor_bytes(t.contiguous()));
    file.commit();
}

}  // namespace tformer::nn
