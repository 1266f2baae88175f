// Fuzz target (a): the safetensors reader.
//
// Each input is a whole file. It is read both ways tformer reads one: from
// memory (parse_safetensors) and from a file (load_safetensors, which reads
// the data straight into the tensors). Both must refuse it with an IOError
// or accept it; when they accept it they must agree, and what they read must
// survive a round trip: serialize_safetensors writes it, and reading that
// back gives the same names, dtypes, shapes, bytes and metadata.
#include "fuzz/fuzz_util.hpp"
#include "fuzz/safetensors_mutator.hpp"

#include "core/error.hpp"
#include "nn/safetensors.hpp"

#include <cstdlib>
#include <cstring>
#include <span>

namespace {
using tformer::nn::SafeTensors;

bool same(const SafeTensors& a, const SafeTensors& b) {
    if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
    for (auto ia = a.tensors.begin(), ib = b.tensors.begin(); ia != a.tensors.end(); ++ia, ++ib) {
        const auto& [name_a, ta] = *ia;
        const auto& [name_b, tb] = *ib;
        if (name_a != name_b || ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) return false;
        const size_t bytes = static_cast<size_t>(ta.numel()) * tformer::core::dtype_size(ta.dtype());
        if (bytes > 0 && std::memcmp(ta.contiguous().raw_data(), tb.contiguous().raw_data(), bytes) != 0) return false;
    }
    return true;
}

[[noreturn]] void finding(const std::string& what) { tformer::fuzz::finding("fuzz_safetensors", what); }
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    tformer::fuzz::one_thread();
    return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
    return tformer::fuzz::mutate_safetensors(data, size, max_size, seed, false);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> bytes(data, size);
    SafeTensors from_memory, from_file;
    bool memory_ok = true, file_ok = true;
    try {
        from_memory = tformer::nn::parse_safetensors(bytes, "fuzz");
    } catch (const tformer::IOError&) {
        memory_ok = false;
    }
    try {
        from_file = tformer::nn::load_safetensors(tformer::fuzz::write_input(data, size, "safetensors"));
    } catch (const tformer::IOError&) {
        file_ok = false;
    }
    if (memory_ok != file_ok) finding("parse_safetensors and load_safetensors disagree on whether the file is valid");
    if (!memory_ok) return 0;
    if (!same(from_memory, from_file)) finding("parse_safetensors and load_safetensors read different contents");
    // what was read can be written, and reads back the same
    const std::vector<uint8_t> written = tformer::nn::serialize_safetensors(from_memory);
    if (!same(tformer::nn::parse_safetensors(written, "round trip"), from_memory))
        finding("serialize_safetensors then parse_safetensors changed the contents");
    return 0;
}
