// Hugging Face safetensors files <-> Axle literals.
//
// The format (https://huggingface.co/docs/safetensors, reference: huggingface/safetensors'
// safetensors/src/tensor.rs):
//
//   u64 little-endian N | N bytes of UTF-8 JSON header | byte buffer
//
// The header is an object {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
// ..., "__metadata__": {"key": "value", ...}}; offsets are relative to the buffer start, the
// tensors tile the buffer exactly (no holes, no overlap, nothing after the last one), data is
// little-endian and row-major.
//
// Supported dtypes (file name <-> Axle dtype):
//   F32 f32   F64 f64   BF16 bf16   F16 f16   I8 i8   I32 i32   I64 i64   U8 u8   U32 u32
//   BOOL bool
// Files holding other dtypes (F8_E4M3, F8_E5M2, I16, U16, U64, C64, F4, ...) are rejected with an
// error naming the tensor, its dtype and the file.
//
// See Note [Safetensors layout] in safetensors.cc for the exact bytes the writer produces (the
// Python `safetensors` package's layout, so files round-trip byte for byte).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/literal.h"

namespace axle::checkpoint {

// An ordered name -> tensor map. On load the order is the file's data order (by data_offsets);
// on save the order given is not kept: tensors are written as the reference writer orders them
// (largest dtype alignment first, then by name), so a loaded map is in that order.
using TensorMap = std::vector<std::pair<std::string, ir::Literal>>;

// Free-form string metadata, the header's "__metadata__" (e.g. {"format": "pt"}).
using SafetensorsMetadata = std::map<std::string, std::string>;

// Reads the whole safetensors file at `path`, reading each tensor straight into its literal (the
// file's bytes are not held twice). When `metadata` is not null it receives "__metadata__" (empty
// when the file has none). Throws axle::Error naming the file for an unreadable file and for
// every malformed input listed at ParseSafetensors.
TensorMap LoadSafetensors(const std::string& path, SafetensorsMetadata* metadata = nullptr);

// Writes `tensors` and `metadata` to `path` as SerializeSafetensors does. Atomic: the bytes go
// to PATH.tmp.<pid>, are fsynced and renamed over PATH, so readers see the old file or the whole
// new one. Throws axle::Error (naming the path and the OS error) when the file cannot be written,
// and for the inputs SerializeSafetensors rejects.
void SaveSafetensors(const std::string& path, const TensorMap& tensors,
                     const SafetensorsMetadata& metadata = {});

// The bytes of a safetensors file holding `tensors` and `metadata`, identical to what the Python
// `safetensors` package writes for the same tensors (when `metadata` has at most one key: the
// reference writes metadata keys in hash-map order, Axle sorts them). An empty `metadata` writes
// no "__metadata__" entry. Throws axle::Error for duplicate names, the reserved name
// "__metadata__", names or metadata that are not valid UTF-8, and a header over 100 MB.
std::vector<uint8_t> SerializeSafetensors(const TensorMap& tensors,
                                          const SafetensorsMetadata& metadata = {});

// The head of a safetensors file (the size prefix and the padded JSON header) holding tensors of
// these names and types, exactly as SerializeSafetensors writes it, for writers that stream the
// data themselves: `order` lists the indices into `tensors` in the order their bytes follow the
// head, and data_offsets[i] is tensor i's [begin, end) relative to the end of the head. Throws
// as SerializeSafetensors does.
struct SafetensorsHead {
  std::vector<uint8_t> bytes;
  std::vector<size_t> order;
  std::vector<std::pair<uint64_t, uint64_t>> data_offsets;
};
SafetensorsHead PrepareSafetensorsHead(const std::vector<std::pair<std::string, ir::TensorType>>& tensors,
                                       const SafetensorsMetadata& metadata = {});

// Parses the bytes of a safetensors file. `name_for_errors` (a path, or "<memory>") is named in
// every error message. Safe on any input; every problem is an axle::Error naming the file and,
// where there is one, the tensor: a file shorter than 8 bytes, a header size over 100 MB or past
// the end of the file, a header that is not valid UTF-8 JSON (or nests deeper than any header
// does), a header that is not an object, a duplicate tensor name or entry field, an entry that is
// not an object or lacks or mistypes "dtype", "shape" or "data_offsets", an unknown or
// unsupported dtype, non-string metadata, a shape whose byte size overflows, offsets that run
// past the buffer, are reversed, overlap, leave holes or do not match shape * dtype size, and
// bytes after the last tensor. BOOL bytes other than 0 read as true (1), as NumPy does.
TensorMap ParseSafetensors(std::span<const uint8_t> bytes, std::string_view name_for_errors,
                           SafetensorsMetadata* metadata = nullptr);

// "F32" for kF32, ... (the safetensors dtype names above).
std::string_view SafetensorsDTypeName(DType dtype);
// The Axle dtype of a safetensors dtype name; nullopt for names Axle does not support.
std::optional<DType> ParseSafetensorsDType(std::string_view name);

}  // namespace axle::checkpoint
