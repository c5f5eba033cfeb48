#!/usr/bin/env python3
"""Writes the safetensors golden files that tests/checkpoint/safetensors_test.cc reads.

Needs NumPy and the Python `safetensors` package (`pip install numpy safetensors`). Run
`python3 scripts/make_safetensors_goldens.py` and commit tests/checkpoint/goldens/. The test checks
that LoadSafetensors gives these values and that SerializeSafetensors reproduces the library's
bytes exactly, so keep the values here and in the test in sync. Every file has at most one
metadata key: the library writes metadata in (random) hash-map order.

bf16 goes through the library's low-level `serialize` with dtype "bfloat16" (NumPy has no
bfloat16): the values are given as uint16 bit patterns.
"""
import json
import os

import numpy as np
import safetensors
from safetensors import TensorSpec, serialize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "checkpoint", "goldens")


def save(path, tensors, metadata=None):
    """Writes name -> (dtype string, array) with the library's serializer."""
    keep = []
    specs = {}
    for name, (dtype, array) in tensors.items():
        array = array if array.flags.c_contiguous else array.copy()  # keeps 0-d arrays 0-d
        keep.append(array)
        specs[name] = TensorSpec(dtype=dtype, shape=list(array.shape), data_ptr=array.ctypes.data,
                                 data_len=array.nbytes)
    data = bytes(serialize(specs, metadata=metadata))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def np_tensor(array):
    return (array.dtype.name, array)


# One tensor of every dtype Axle supports; names chosen so that name order and layout order differ.
ALL_DTYPES = {
    "f32": np_tensor(np.array([[1.0, -2.5, 3.25], [0.0, -0.0, np.inf]], np.float32)),
    "f64": np_tensor(np.array([0.1, -1e300], np.float64)),
    # bf16 bit patterns of 1.0, -2.0, 0.5
    "bf16": ("bfloat16", np.array([0x3F80, 0xC000, 0x3F00], np.uint16)),
    "f16": np_tensor(np.array([1.0, -0.5, 65504.0], np.float16)),
    "i8": np_tensor(np.array([-128, -1, 0, 127], np.int8)),
    "i32": np_tensor(np.array([[1, -2], [2147483647, -2147483648]], np.int32)),
    "i64": np_tensor(np.array([0, -1, 2**62, -2**63], np.int64)),
    "u8": np_tensor((np.arange(8) * 30).astype(np.uint8).reshape(2, 2, 2)),
    "u32": np_tensor(np.array([0, 1, 4294967295], np.uint32)),
    "bool": np_tensor(np.array([True, False, True], np.bool_)),
}

ODD_SHAPES = {
    "scalar": np_tensor(np.array(3.5, np.float32)),
    "empty": np_tensor(np.zeros((0,), np.float32)),
    "empty_2x0x3": np_tensor(np.zeros((2, 0, 3), np.int64)),
    "one": np_tensor(np.array([True])),
    "a.b": np_tensor(np.array([7], np.uint8)),
}

# Names that need JSON escaping or are not ASCII.
NAMES = {
    'quote"name': np_tensor(np.array([1], np.int32)),
    "back\\slash": np_tensor(np.array([2], np.int32)),
    "tab\tnew\nline\x01": np_tensor(np.array([3], np.int32)),
    "caf\u00e9.\u6743\u91cd": np_tensor(np.array([4], np.int32)),
    "slash/ok": np_tensor(np.array([5], np.int32)),
}


def model_tensors(offset):
    return {
        "model.embed.weight": np_tensor((np.arange(6, dtype=np.float32) + offset).reshape(2, 3)),
        "model.layers.0.weight": np_tensor(np.full((3,), offset, np.float32)),
        "model.layers.1.bias": ("bfloat16", np.array([0x3F80 + offset], np.uint16)),
        "lm_head.weight": np_tensor(np.arange(4, dtype=np.int64) * (offset + 1)),
    }


def write_model_dirs():
    config = {"model_type": "tiny", "hidden_size": 3, "num_layers": 2}
    single = os.path.join(OUT, "model_single")
    save(os.path.join(single, "model.safetensors"), model_tensors(0), {"format": "pt"})
    with open(os.path.join(single, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    sharded = os.path.join(OUT, "model_sharded")
    all_tensors = model_tensors(0)
    names = sorted(all_tensors)
    shards = {"model-00001-of-00002.safetensors": names[:2], "model-00002-of-00002.safetensors": names[2:]}
    weight_map = {}
    total = 0
    for shard, shard_names in shards.items():
        save(os.path.join(sharded, shard), {n: all_tensors[n] for n in shard_names}, {"format": "pt"})
        for n in shard_names:
            weight_map[n] = shard
            total += all_tensors[n][1].nbytes
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
    with open(os.path.join(sharded, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def main():
    save(os.path.join(OUT, "all_dtypes.safetensors"), ALL_DTYPES, {"format": "pt"})
    save(os.path.join(OUT, "odd_shapes.safetensors"), ODD_SHAPES)
    save(os.path.join(OUT, "names.safetensors"), NAMES, {"note": 'says "hi"\n'})
    save(os.path.join(OUT, "no_tensors.safetensors"), {})
    save(os.path.join(OUT, "no_tensors_metadata.safetensors"), {}, {"framework": "pt"})
    write_model_dirs()
    print("wrote goldens to", os.path.normpath(OUT), "with safetensors", safetensors.__version__,
          "and NumPy", np.__version__)


if __name__ == "__main__":
    main()
