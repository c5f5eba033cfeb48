#!/usr/bin/env python3
"""Writes a tiny GPT-2 model directory and token shard for checking Axle against PyTorch.

    python3 scripts/make_gpt2_fixture.py OUT_DIR [--vocab 256 --n-positions 64 --n-embd 32
        --n-layer 2 --n-head 4 --tokens 4096 --seed 0]

OUT_DIR gets:
  config.json        Hugging Face GPT-2 config (vocab_size, n_positions, n_embd, n_layer, n_head,
                     layer_norm_epsilon, ...), dropout 0
  model.safetensors  GPT2Model's weights as save_pretrained names them (wte.weight, wpe.weight,
                     h.{i}.ln_1.weight, h.{i}.attn.c_attn.weight [C, 3C] Conv1D layout, ...,
                     ln_f.bias), all F32, initialized as GPT-2 does
  tokens.bin         an llm.c token shard (see src/train/data.h)

Only NumPy is needed (the safetensors file is written here, in the layout of the `safetensors`
package: tensors sorted by name, header padded with spaces to 8 bytes), so any python3 works.
Everything is drawn from one seeded NumPy generator: the same arguments give the same bytes.
"""
import argparse
import json
import os
import struct

import numpy as np

SHARD_MAGIC = 20240520
SHARD_VERSION = 1


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> float32 array. Writes the safetensors format (see the module doc)."""
    names = sorted(tensors)
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    blobs = []
    for name in names:
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # The reference writer pads the header with spaces so the data starts 8-byte aligned.
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_shard(path, tokens):
    """An llm.c token shard: 256 int32 header (magic, version, count), then uint16 tokens."""
    tokens = np.asarray(tokens)
    assert tokens.min() >= 0 and tokens.max() < 65536
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = SHARD_MAGIC, SHARD_VERSION, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())


def gpt2_weights(rng, V, P, C, L):
    """GPT-2's init (HF GPT2PreTrainedModel._init_weights): N(0, 0.02) for embeddings and
    weights, N(0, 0.02/sqrt(2L)) for the residual projections (c_proj), zero biases, unit layer
    norms."""
    std = 0.02
    proj_std = 0.02 / np.sqrt(2 * L)

    def normal(shape, s):
        return rng.normal(0.0, s, size=shape).astype(np.float32)

    w = {"wte.weight": normal((V, C), std), "wpe.weight": normal((P, C), std)}
    for i in range(L):
        p = f"h.{i}."
        w[p + "ln_1.weight"] = np.ones(C, np.float32)
        w[p + "ln_1.bias"] = np.zeros(C, np.float32)
        w[p + "attn.c_attn.weight"] = normal((C, 3 * C), std)
        w[p + "attn.c_attn.bias"] = np.zeros(3 * C, np.float32)
        w[p + "attn.c_proj.weight"] = normal((C, C), proj_std)
        w[p + "attn.c_proj.bias"] = np.zeros(C, np.float32)
        w[p + "ln_2.weight"] = np.ones(C, np.float32)
        w[p + "ln_2.bias"] = np.zeros(C, np.float32)
        w[p + "mlp.c_fc.weight"] = normal((C, 4 * C), std)
        w[p + "mlp.c_fc.bias"] = np.zeros(4 * C, np.float32)
        w[p + "mlp.c_proj.weight"] = normal((4 * C, C), proj_std)
        w[p + "mlp.c_proj.bias"] = np.zeros(C, np.float32)
    w["ln_f.weight"] = np.ones(C, np.float32)
    w["ln_f.bias"] = np.zeros(C, np.float32)
    return w


def structured_tokens(rng, vocab, n, pattern_len=61, noise=0.1):
    """A random pattern repeated, with a fraction `noise` of positions replaced by random tokens:
    learnable (the loss falls within a few steps, so a wrong gradient shows) but not trivial."""
    pattern = rng.integers(0, vocab, size=pattern_len)
    tokens = np.resize(pattern, n)
    mask = rng.random(n) < noise
    tokens[mask] = rng.integers(0, vocab, size=int(mask.sum()))
    return tokens


def gpt2_config(V, P, C, L, H):
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": V,
        "n_positions": P,
        "n_ctx": P,
        "n_embd": C,
        "n_layer": L,
        "n_head": H,
        "n_inner": None,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
        "initializer_range": 0.02,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "tie_word_embeddings": True,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--n-positions", type=int, default=64)
    ap.add_argument("--n-embd", type=int, default=32)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.n_embd % a.n_head:
        ap.error(f"--n-embd {a.n_embd} is not a multiple of --n-head {a.n_head}")
    if not 2 <= a.vocab <= 65536:
        ap.error("--vocab must be in [2, 65536] (shard tokens are uint16)")
    if a.tokens < 2:
        ap.error("--tokens must be at least 2")

    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out_dir, exist_ok=True)
    V, P, C, L, H = a.vocab, a.n_positions, a.n_embd, a.n_layer, a.n_head
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(gpt2_config(V, P, C, L, H), f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(a.out_dir, "model.safetensors"), gpt2_weights(rng, V, P, C, L),
                      metadata={"format": "pt"})
    write_shard(os.path.join(a.out_dir, "tokens.bin"), structured_tokens(rng, V, a.tokens))


if __name__ == "__main__":
    main()
