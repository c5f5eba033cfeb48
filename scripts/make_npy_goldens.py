#!/usr/bin/python3
"""Writes the NumPy golden files that tests/ir/npy_test.cc reads.

Run once with the system NumPy (`/usr/bin/python3 scripts/make_npy_goldens.py`) and commit the
output in tests/ir/npy_goldens/. The test checks that ReadNpy gives these values and that
SerializeNpy reproduces NumPy's bytes exactly, so keep the values here and in the test in sync.
"""
import os

import numpy as np
import numpy.lib.format as npy_format

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ir", "npy_goldens")

# name -> array, written with np.save (format 1.0, NumPy's own header layout).
GOLDENS = {
    "f32_2x3": np.array([[1.0, -2.5, 3.25], [0.0, -0.0, np.inf]], dtype=np.float32),
    "f64_3": np.array([0.1, -1e300, 2.0], dtype=np.float64),
    "f16_3": np.array([1.0, -0.5, 65504.0], dtype=np.float16),
    "i8_4": np.array([-128, -1, 0, 127], dtype=np.int8),
    "i32_2x2": np.array([[1, -2], [2147483647, -2147483648]], dtype=np.int32),
    "i64_4": np.array([0, -1, 2**62, -2**63], dtype=np.int64),
    "u8_2x2x2": (np.arange(8) * 30).astype(np.uint8).reshape(2, 2, 2),
    "u32_3": np.array([0, 1, 4294967295], dtype=np.uint32),
    "bool_5": np.array([True, False, True, True, False]),
    "f32_scalar": np.array(3.5, dtype=np.float32),
    "f32_0x3": np.zeros((0, 3), dtype=np.float32),
    # A header whose text ends exactly on a 64-byte boundary: NumPy then pads with 64 spaces.
    "u8_aligned_header": np.zeros((0,) + (1,) * 12 + (100,), dtype=np.uint8),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, array in GOLDENS.items():
        np.save(os.path.join(OUT, name + ".npy"), array)
    # Versions 2.0 and 3.0 (4-byte header length), which np.save only picks for huge headers.
    for version, name in [((2, 0), "f32_v2"), ((3, 0), "i32_v3")]:
        array = np.array([1.5, -2.0], np.float32) if version == (2, 0) else np.array([7, -8], np.int32)
        with open(os.path.join(OUT, name + ".npy"), "wb") as f:
            npy_format.write_array(f, array, version=version)
    print("wrote", len(GOLDENS) + 2, "files to", os.path.normpath(OUT), "with NumPy", np.__version__)


if __name__ == "__main__":
    main()
