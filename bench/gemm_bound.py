#!/usr/bin/env python3
"""The GEMM floor of a GPT-2 training step on this machine: every matrix product of one step
(forward, the two backward products of each, the tied LM head's three), timed alone with warm
caches through numpy's BLAS (Debian's numpy calls the same OpenBLAS Axle links), best of REPS.

No trainer that runs its products through this BLAS can step faster than their sum, so
tokens/s <= tokens per step / floor, even if every other op (attention softmax, layer norm,
gelu, the loss, AdamW) cost nothing. bench/train_tokens_per_s.sh prints it next to the
trainers; bench/README.md explains how to read it.

  /usr/bin/python3 bench/gemm_bound.py [--config 124m|small] [--batch B] [--seq T] [--reps N]
"""
import argparse
import time

import numpy as np

CONFIGS = {  # vocab, n_embd, n_layer, n_head, n_positions
    "124m": (50257, 768, 12, 12, 1024),
    "small": (512, 128, 2, 4, 256),
}


def step_products(vocab, d, layers, heads, rows, batch, seq):
    """(M, N, K, transpose_a, transpose_b, count) for each product of one step."""
    ff = 4 * d
    p = []
    for (n_in, n_out) in [(d, 3 * d), (d, d), (d, ff), (ff, d)]:  # c_attn, attn c_proj, c_fc, mlp c_proj
        p.append((rows, n_out, n_in, False, False, layers))       # y = x W
        p.append((rows, n_in, n_out, False, True, layers))        # dx = dy W^T
        p.append((n_in, n_out, rows, True, False, layers))        # dW = x^T dy
    hd = d // heads
    bh = batch * heads * layers
    p.append((seq, seq, hd, False, True, bh))   # scores s = q k^T
    p.append((seq, hd, seq, False, False, bh))  # out o = p v
    p.append((seq, seq, hd, False, True, bh))   # dp = do v^T
    p.append((seq, hd, seq, True, False, bh))   # dv = p^T do
    p.append((seq, hd, seq, False, False, bh))  # dq = ds k
    p.append((seq, hd, seq, True, False, bh))   # dk = ds^T q
    p.append((rows, vocab, d, False, True, 1))   # logits = x wte^T
    p.append((rows, d, vocab, False, False, 1))  # dx = dlogits wte
    p.append((vocab, d, rows, True, False, 1))   # dwte = dlogits^T x
    return p


def best_time(m, n, k, ta, tb, reps, rng):
    a = rng.standard_normal((k, m) if ta else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n), dtype=np.float32)
    a = a.T if ta else a
    b = b.T if tb else b
    out = np.empty((m, n), dtype=np.float32)
    np.matmul(a, b, out=out)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        np.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="124m", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    vocab, d, layers, heads, _ = CONFIGS[args.config]
    batch = args.batch or (4 if args.config == "124m" else 8)
    rows = batch * args.seq
    rng = np.random.default_rng(0)
    total = flops = 0.0
    for (m, n, k, ta, tb, count) in step_products(vocab, d, layers, heads, rows, batch, args.seq):
        total += count * best_time(m, n, k, ta, tb, args.reps, rng)
        flops += count * 2.0 * m * n * k
    tokens = rows
    print(f"gemm floor: {total:.3f} s per step ({flops / 1e9:.1f} GFLOP at {flops / total / 1e9:.1f} GFLOP/s) "
          f"-> at most {tokens / total:.1f} tokens/s")


if __name__ == "__main__":
    main()
