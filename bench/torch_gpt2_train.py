#!/usr/bin/python3
"""Times GPT-2 training in PyTorch eager on the CPU: the baseline for `axle train`'s tokens/s.

    /usr/bin/python3 bench/torch_gpt2_train.py [--steps 20 --batch 4 --seq 64 --threads N]

The model is one of Axle's presets (--config small: vocab 512, n_positions 256, n_embd 128,
n_layer 2, n_head 4; tiny; 124m) as scripts/gpt2_reference.py defines it (the same code), GPT-2-initialized, trained with the
same AdamW settings as bench/train_tokens_per_s.sh gives `axle train` (lr 3e-4, betas (0.9,
0.999), eps 1e-8, weight decay 0.1 on dim >= 2 params, grad clip 1.0) on random byte tokens.
Prints one JSON line per step ({"step", "loss", "step_s", "tokens_per_s"}) and a last line
{"summary": ...} with the tokens/s over the steps after the first `--skip` (default 2), which
include one-time warmup (allocator, thread pool, first-touch of the weights). --autocast-bf16
runs the forward under torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch's CPU mixed
precision: f32 weights and optimizer, products in bf16), the peer of `axle train --precision
bf16-mixed`. --bf16-weights converts the model to bf16 first (`model.to(torch.bfloat16)`, Lightning's
"bf16-true": bf16 weights, gradients and AdamW state), the peer of `axle train --precision bf16`;
with --autocast-bf16 too, the forward also runs under autocast, as Axle's `bf16` does.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import gpt2_reference as ref  # noqa: E402

# Axle's GPT2Config::Preset (src/nn/gpt2.cc).
PRESETS = {
    "tiny": {"vocab_size": 256, "n_positions": 128, "n_embd": 64, "n_layer": 2, "n_head": 4},
    "small": {"vocab_size": 512, "n_positions": 256, "n_embd": 128, "n_layer": 2, "n_head": 4},
    "124m": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
             "n_head": 12},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--config", choices=sorted(PRESETS), default="small")
    ap.add_argument("--autocast-bf16", action="store_true", help="the forward under torch.autocast(cpu, bf16)")
    ap.add_argument("--bf16-weights", action="store_true", help="model.to(torch.bfloat16) before the optimizer")
    a = ap.parse_args()
    if a.steps <= a.skip:
        ap.error(f"--steps must be more than --skip ({a.skip})")

    import torch
    torch.set_num_threads(a.threads)
    config = dict(PRESETS[a.config], layer_norm_epsilon=1e-5)
    model = ref.build_model(torch, config, ref.random_init(config, seed=0))
    if a.bf16_weights:
        model = model.to(torch.bfloat16)
    opt = ref.make_optimizer(torch, model, a.lr, 0.1)
    tokens = np.random.default_rng(1).integers(0, 256, size=1 << 20)  # bytes: below every vocab
    n_tok = a.batch * a.seq
    timed = []
    for step in range(a.steps):
        x, y = ref.get_batch(tokens, step, a.batch, a.seq)
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16):
            loss = ref.train_step(torch, model, opt, x, y, a.lr, 1.0)  # .item() waits for the step
        dt = time.perf_counter() - t0
        if step >= a.skip:
            timed.append(dt)
        print(json.dumps({"step": step, "loss": loss, "step_s": dt, "tokens_per_s": n_tok / dt}),
              flush=True)
    total = sum(timed)
    print(json.dumps({"summary": {"steps_timed": len(timed), "tokens": n_tok * len(timed),
                                  "seconds": total, "tokens_per_s": n_tok * len(timed) / total,
                                  "threads": a.threads, "torch": torch.__version__,
                                  "autocast_bf16": a.autocast_bf16, "bf16_weights": a.bf16_weights}}),
          flush=True)


if __name__ == "__main__":
    main()
