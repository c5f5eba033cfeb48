// NumPy .npy files <-> Literals.
//
// The .npy format (numpy/lib/format.py): the magic "\x93NUMPY", a version byte pair, the header
// length (2 bytes little-endian in version 1.0, 4 bytes in 2.0 and 3.0), then an ASCII Python
// dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a final '\n' so that the data starts at a multiple of 64 bytes, then the
// elements in C (row-major) order.
//
// Supported dtypes (descr <-> Axle dtype):
//   '<f4' f32   '<f8' f64   '<f2' f16   '|i1' i8   '<i4' i32   '<i8' i64   '|u1' u8
//   '<u4' u32   '|b1' bool
// NumPy has no bfloat16: a bf16 literal is written widened to '<f4' (exactly; every bf16 value is
// an f32 value), so it reads back as an f32 literal.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/literal.h"

namespace axle::ir {

// Reads the .npy file at `path`. Accepts format versions 1.0, 2.0 and 3.0 and the byte orders
// '<', '|' and '=' (this host is little-endian). Throws axle::Error naming the file for anything
// else: a missing or unreadable file, bad magic, a truncated file or trailing bytes, a malformed
// header dict, big-endian data, fortran_order True, or an unsupported dtype.
Literal ReadNpy(const std::string& path);

// Writes `lit` to `path` as NumPy would (format 1.0; bf16 as '<f4'). Atomic: the bytes go to
// PATH.tmp.<pid> first and are renamed over PATH, so readers see the old file or the whole new
// one, never a part. Concurrent writers of one path in one process must serialize. Throws
// axle::Error (naming the path and the OS error) when the file cannot be written.
void WriteNpy(const std::string& path, const Literal& lit);

// Parses the bytes of a .npy file, with the checks of ReadNpy. `name_for_errors` (a path, or a
// description like "<memory>") is named in error messages. Safe on any input: every length is
// checked before use and nothing larger than `bytes` is allocated.
Literal ParseNpy(std::span<const uint8_t> bytes, std::string_view name_for_errors);

// The bytes of `lit` as a .npy file, identical to what np.save writes for the same array
// (bf16 is widened to '<f4').
std::vector<uint8_t> SerializeNpy(const Literal& lit);

}  // namespace axle::ir
