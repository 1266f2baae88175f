/// \file
/// Checkpoints in the safetensors format (Hugging Face), read and written by
/// tformer itself so a state dict saved here loads in PyTorch and back.
///
/// A file is three parts, nothing else:
///
/// ```
///   [ N: u64, little-endian ][ N bytes: UTF-8 JSON header ][ data section ]
/// ```
///
/// The header is one JSON object. Each key except "__metadata__" names a
/// tensor and maps to
/// ```
///   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
/// ```
/// where [begin, end) is a byte range of the data section (offsets count from
/// the first byte after the header, not from the start of the file). The data
/// is little-endian and row-major (C order). The optional "__metadata__" maps
/// strings to strings (free-form notes: step, config, ...).
///
/// Reading trusts nothing in the file: every length, offset, shape and dtype is
/// checked before a byte is copied, so a truncated or hostile file gives a
/// tformer::IOError naming the file and the problem, never a crash or an
/// out-of-bounds read. The tensors' byte ranges must tile the data section
/// exactly: sorted by begin, the first starts at 0, each starts where the
/// previous one ended, and the last ends at the end of the file.
///
/// Writing is atomic: the bytes go to a temporary file in the same directory,
/// which is flushed to disk and then renamed over the target, so a crash or a
/// full disk leaves either the old checkpoint or the new one, never half of one.
#pragma once

#include "core/tensor.hpp"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tformer::nn {

/// The largest header a reader accepts, in bytes (the limit the reference
/// implementation uses, so both reject the same "header bombs").
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// The deepest JSON nesting a reader accepts, in the header and in the JSON
/// documents a checkpoint keeps in its metadata (tasks/json_field.hpp): a
/// header's deepest part, a tensor's shape, is 2 levels deep (root, entry,
/// shape), a tformer checkpoint's metadata 2 as well (root, "loss",
/// "epochs"). Deeper input is refused before it is walked, as code that
/// walks JSON recurses once per level and 100,000 levels overflow the stack.
inline constexpr int kMaxJsonDepth = 8;

/// The contents of one safetensors file: named tensors and string metadata.
struct SafeTensors {
    /// Tensor name -> tensor (float32, float64, int64 or bool; any shape,
    /// including 0-d and empty; any strides when saving).
    std::map<std::string, core::Tensor> tensors;
    /// The "__metadata__" object; empty means the file has none.
    std::map<std::string, std::string> metadata;
};

/// The safetensors dtype name of a tformer dtype: "F32", "F64", "I64", "BOOL".
std::string_view safetensors_dtype_name(core::DType dtype);

/// The complete file contents for `st`, exactly as save_safetensors writes
/// them. Layout, which matches the reference writer byte for byte:
///  - header: compact JSON (no spaces); "__metadata__" first when non-empty
///    (its keys sorted), then one entry per tensor with the fields in the
///    order dtype, shape, data_offsets; padded with spaces (0x20) to a
///    multiple of 8 bytes, so the data section starts 8-byte aligned;
///  - tensors ordered by element size, largest first (I64, F64, F32, BOOL),
///    then by name (byte-wise); offsets contiguous from 0. Largest-first means
///    every tensor starts at a multiple of its element size, so a reader that
///    maps the file can use the data in place.
/// Non-contiguous tensors are written in row-major order.
/// Throws ValueError for an undefined tensor, the reserved name
/// "__metadata__", names or metadata that are not valid UTF-8, or a header
/// longer than kMaxSafetensorsHeaderBytes.
std::vector<uint8_t> serialize_safetensors(const SafeTensors& st);

/// Writes `st` to `path` atomically (see serialize_safetensors for the
/// layout): a temporary file ".<name>.tmp-<pid>-<n>" in the same directory is
/// written, flushed, fsync'ed and closed, then renamed over `path`, and the
/// directory is fsync'ed so the rename itself is durable. On any failure the
/// temporary file is removed, the file previously at `path` is untouched, and
/// IOError is thrown naming `path` and the OS reason, e.g.
/// ```
///   save_safetensors: cannot write 'ckpt/model.safetensors': cannot rename ...: Is a directory
/// ```
/// Invalid contents throw ValueError before anything is written. A symbolic
/// link at `path` is replaced by the new file, not followed.
void save_safetensors(const std::string& path, const SafeTensors& st);

/// Reads and validates a safetensors file; tensors come back contiguous.
/// Throws IOError "load_safetensors: '<path>': <problem>" when the file cannot
/// be read or is not a valid safetensors file of supported dtypes (see
/// parse_safetensors for the list of checks). Tensor data is read straight
/// into each tensor's storage, so memory use is the size of the tensors.
SafeTensors load_safetensors(const std::string& path);

/// Validates and decodes the bytes of a whole safetensors file held in
/// memory; `source_name` names it in errors ("parse_safetensors:
/// '<source_name>': <problem>"). Rejects, with a message for each:
/// fewer than 8 bytes; a header length past the end of the bytes or above
/// kMaxSafetensorsHeaderBytes; a header that is not UTF-8, holds a raw NUL
/// byte, is not JSON, not a JSON object or does not start with '{'; JSON
/// nested deeper than any header needs; duplicate keys at any level;
/// entries that are not objects with exactly dtype, shape and data_offsets;
/// unknown dtypes and known ones tformer does not hold (F16, BF16, I32, ...);
/// shapes that are not arrays of at most kMaxDims non-negative integers;
/// data_offsets that are not [begin, end] with 0 <= begin <= end; sizes that
/// overflow; byte ranges whose length is not numel * element size; ranges
/// that overlap, leave gaps, reach past the end of the file or leave trailing
/// bytes; "__metadata__" that is not an object of strings; BOOL bytes other
/// than 0 and 1.
SafeTensors parse_safetensors(std::span<const uint8_t> bytes, const std::string& source_name);

}  // namespace tformer::nn
