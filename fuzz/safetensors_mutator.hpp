// A structure-aware mutator for safetensors files (LLVMFuzzerCustomMutator).
//
// A safetensors file starts with the length of its JSON header: libFuzzer's
// byte mutations of the header (insert, erase, a dictionary word) change that
// length, so nearly every mutant would be refused at the first check and the
// fuzzer would never get past it. This mutator keeps the framing: it cuts the
// file into length, header and data section, mutates one part and writes the
// length of the new header. For checkpoints it can also mutate one
// "__metadata__" value as the loader sees it (the config JSON, a vocabulary,
// the SentencePiece model inside its base64, the generator state): the JSON
// string escaping and the base64 are undone before the mutation and redone
// after it, so the mutation lands in the text the loader parses; one in
// eight mutations of format 2's one JSON document nests a member thousands
// of levels deep (nest_deeply). Plain
// mutations of the whole file still happen (one in eight), so the framing
// itself stays fuzzed.
#pragma once

#include "tasks/tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace tformer::fuzz {

inline uint64_t read_le64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
    return v;
}

inline void write_le64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

/// libFuzzer's mutation of a byte string, which may grow it up to `room` more bytes.
inline void mutate_bytes(std::string& s, size_t room) {
    const size_t size = s.size();
    s.resize(size + room + 1);  // +1: LLVMFuzzerMutate needs a non-empty buffer
    const size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(s.data()), size, size + room);
    s.resize(n);
}

/// A field of the checkpoint's config JSON set to a value at a boundary:
/// sizes of 0, 1, -1, huge, of the wrong type, or a field removed.
inline std::string tweak_config(const std::string& text, std::minstd_rand& rng) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || j.empty()) return text;
    auto it = j.begin();
    std::advance(it, static_cast<long>(rng() % j.size()));
    static const nlohmann::json values[] = {0,
                                            1,
                                            2,
                                            3,
                                            4,
                                            7,
                                            8,
                                            16,
                                            63,
                                            64,
                                            999,
                                            1000,
                                            1001,
                                            65536,
                                            -1,
                                            -2,
                                            2147483647,
                                            2147483648LL,
                                            9223372036854775807LL,
                                            18446744073709551615ULL,
                                            0.5,
                                            1e300,
                                            -0.0,
                                            true,
                                            false,
                                            nullptr,
                                            "copy",
                                            "translate",
                                            "",
                                            nlohmann::json::array({1, 2})};
    if (rng() % 16 == 0)
        j.erase(it);
    else
        *it = values[rng() % std::size(values)];
    return j.dump();
}

/// A checkpoint's metadata JSON (format 2's "tformer" document) with a
/// member nested 9 to 18,432 levels deep put into one of its objects, as
/// text (building such a document with nlohmann and printing it again would
/// recurse once per level, in the fuzzer itself). The reader must refuse
/// anything deeper than nn::kMaxJsonDepth before it walks the document.
/// Inputs are at most 64 KB (-max_len), so 100,000 and 1,000,000 levels are
/// left to the apps tests; here the refusal is reached from every object of
/// the document, at many depths.
inline std::string nest_deeply(const std::string& text, std::minstd_rand& rng) {
    std::vector<size_t> objects;
    for (size_t i = 0; i < text.size(); ++i)
        if (text[i] == '{') objects.push_back(i);
    if (objects.empty()) return text;
    const size_t at = objects[rng() % objects.size()] + 1;
    const size_t levels = size_t{9} << (rng() % 12);
    const char open = rng() % 2 ? '[' : '{';
    std::string deep;
    if (open == '[') {
        deep = std::string(levels, '[') + std::string(levels, ']');
    } else {
        for (size_t i = 0; i < levels; ++i) deep += "{\"a\":";
        deep += '0';
        deep.append(levels, '}');
    }
    const bool empty_object = at < text.size() && text[at] == '}';
    return text.substr(0, at) + "\"nested\":" + deep + (empty_object ? "" : ",") + text.substr(at);
}

/// Mutates one "__metadata__" value of a safetensors header in place; false
/// when the header has none (or is not JSON), so that the caller mutates
/// something else.
inline bool mutate_metadata(std::string& header, std::minstd_rand& rng) {
    nlohmann::json j = nlohmann::json::parse(header, nullptr, false);
    if (!j.is_object() || !j.contains("__metadata__") || !j["__metadata__"].is_object() || j["__metadata__"].empty())
        return false;
    nlohmann::json& meta = j["__metadata__"];
    auto it = meta.begin();
    // the config decides what gets built: a third of the time it is the value mutated
    if (rng() % 3 == 0 && meta.contains("config"))
        it = meta.find("config");
    else
        std::advance(it, static_cast<long>(rng() % meta.size()));
    if (!it->is_string()) return false;
    const std::string key = it.key();
    std::string value = it->get<std::string>();
    if (key == "tokenizer") {  // {"type": "sentencepiece", "model": "<base64 of the model>"}
        nlohmann::json tok = nlohmann::json::parse(value, nullptr, false);
        if (tok.is_object() && tok.contains("model") && tok["model"].is_string()) {
            try {
                std::string model = tasks::base64_decode(tok["model"].get<std::string>());
                mutate_bytes(model, 64);
                tok["model"] = tasks::base64_encode(model);
                value = tok.dump();
            } catch (const std::exception&) {
                mutate_bytes(value, 64);
            }
        } else {
            mutate_bytes(value, 64);
        }
        meta[key] = value;
    } else if (key == "config" && rng() % 2 == 0) {
        meta[key] = tweak_config(value, rng);
    } else if (key == "tformer" && rng() % 8 == 0) {
        meta[key] = nest_deeply(value, rng);
    } else if (rng() % 32 == 0) {
        meta.erase(key);  // a missing field
    } else {
        mutate_bytes(value, 64);
        meta[key] = value;
    }
    // bytes that are not UTF-8 cannot be dumped as they are: they become U+FFFD
    header = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return true;
}

/// The mutator: `metadata_aware` adds the metadata mutations (checkpoints).
inline size_t mutate_safetensors(uint8_t* data, size_t size, size_t max_size, unsigned seed, bool metadata_aware) {
    std::minstd_rand rng(seed);
    const unsigned mode = rng() % 8;
    const uint64_t n = size >= 8 ? read_le64(data) : 0;
    if (mode == 0 || size < 8 || n == 0 || n > size - 8) return LLVMFuzzerMutate(data, size, max_size);
    std::string header(reinterpret_cast<const char*>(data) + 8, n);
    std::string body(reinterpret_cast<const char*>(data) + 8 + n, size - 8 - n);
    const size_t room = max_size > size ? max_size - size : 0;
    if (mode == 1) {
        mutate_bytes(body, room);  // the data section (values, its length)
    } else if (!(metadata_aware && mode >= 5 && mutate_metadata(header, rng))) {
        mutate_bytes(header, room);  // the header, whatever its JSON becomes
    }
    if (8 + header.size() + body.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
    write_le64(data, header.size());
    std::memcpy(data + 8, header.data(), header.size());
    std::memcpy(data + 8 + header.size(), body.data(), body.size());
    return 8 + header.size() + body.size();
}

}  // namespace tformer::fuzz
