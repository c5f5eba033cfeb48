#!/usr/bin/env python3
"""Times GPT-2 training in JAX (jax.jit of the whole train step) on the CPU, next to `axle train`.

    python3 bench/jax_gpt2_train.py [--config small --steps 20 --batch 4 --seq 64 --threads N]

The same workload as bench/torch_gpt2_train.py: one of Axle's presets (--config small: vocab 512,
n_positions 256, n_embd 128, n_layer 2, n_head 4; tiny; 124m), the same GPT-2 as
scripts/gpt2_reference.py (HF GPT2LMHeadModel without dropout: pre-LN blocks, Conv1D weights
[in, out], tanh GELU, tied head, mean cross-entropy), the same GPT-2 init (random_init, seed 0),
the same data (random byte tokens from default_rng(1), llm.c batch order via get_batch) and the
same optimizer as torch.optim.AdamW there (lr 3e-4, betas (0.9, 0.999), eps 1e-8, weight decay
0.1 on dim >= 2 params, 0 on biases and layer norms), global-norm clipping at 1.0 as
clip_grad_norm_ does it. Plain jax.numpy, float32; forward, backward, clipping and the AdamW
update are one jax.jit function (parameters and optimizer state donated, so XLA updates them in
place).

Prints one JSON line per step ({"step", "loss", "step_s", "tokens_per_s"}) and a last line
{"summary": ...} with the tokens/s over the steps after the first `--skip` (default 2). Step 0
includes the jit trace and XLA compile, so it is never timed (--skip must be >= 1). A step is
timed from before the call to after the loss is back on the host (float(loss) waits for it).

--threads N below the core count sets XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=N before jax is imported (appended to any XLA_FLAGS already set);
at the core count (the default) XLA's CPU defaults are used, which size the pool to the cores.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import gpt2_reference as ref  # noqa: E402  (NumPy-only parts: random_init, get_batch)

# Axle's GPT2Config::Preset (src/nn/gpt2.cc); the same table as bench/torch_gpt2_train.py.
PRESETS = {
    "tiny": {"vocab_size": 256, "n_positions": 128, "n_embd": 64, "n_layer": 2, "n_head": 4},
    "small": {"vocab_size": 512, "n_positions": 256, "n_embd": 128, "n_layer": 2, "n_head": 4},
    "124m": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
             "n_head": 12},
}


def make_train_step(jax, jnp, config, lr, weight_decay, grad_clip, betas=(0.9, 0.999), eps=1e-8):
    C, H, L = config["n_embd"], config["n_head"], config["n_layer"]
    ln_eps = config.get("layer_norm_epsilon", 1e-5)
    b1, b2 = betas

    def layer_norm(x, w, b):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + ln_eps) * w + b

    def loss_fn(p, idx, targets):
        B, T = idx.shape
        x = jnp.take(p["wte.weight"], idx, axis=0) + p["wpe.weight"][:T]
        mask = jnp.tril(jnp.ones((T, T), dtype=bool))
        for i in range(L):
            h = f"h.{i}."
            a = layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
            qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
            q, k, v = jnp.split(qkv, 3, axis=-1)
            q, k, v = (t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for t in (q, k, v))
            att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(C // H))
            att = jax.nn.softmax(jnp.where(mask, att, -jnp.inf), axis=-1)
            y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
            x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
            m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
            m = jax.nn.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"],
                            approximate=True)
            x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
        logits = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"]) @ p["wte.weight"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)
        return jnp.mean(nll)

    def step(params, m, v, t, idx, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, idx, targets)
        if grad_clip > 0:  # torch.nn.utils.clip_grad_norm_: coef = clip / (norm + 1e-6), <= 1
            norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in grads.values()))
            coef = jnp.minimum(grad_clip / (norm + 1e-6), 1.0)
            grads = {k: g * coef for k, g in grads.items()}
        t = t + 1
        bc1 = 1.0 - b1 ** t
        bc2 = 1.0 - b2 ** t
        new_p, new_m, new_v = {}, {}, {}
        for k, p in params.items():  # torch.optim.AdamW (decoupled decay first, then Adam)
            g = grads[k]
            if p.ndim >= 2 and weight_decay:
                p = p * (1.0 - lr * weight_decay)
            mk = b1 * m[k] + (1.0 - b1) * g
            vk = b2 * v[k] + (1.0 - b2) * jnp.square(g)
            denom = jnp.sqrt(vk) / jnp.sqrt(bc2) + eps
            new_p[k] = p - (lr / bc1) * mk / denom
            new_m[k], new_v[k] = mk, vk
        return new_p, new_m, new_v, t, loss

    return jax.jit(step, donate_argnums=(0, 1, 2, 3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--config", choices=sorted(PRESETS), default="small")
    a = ap.parse_args()
    if a.skip < 1:
        ap.error("--skip must be at least 1 (step 0 compiles)")
    if a.steps <= a.skip:
        ap.error(f"--steps must be more than --skip ({a.skip})")

    if a.threads < (os.cpu_count() or 1):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false"
                                   f" intra_op_parallelism_threads={a.threads}").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_default_matmul_precision", "float32")

    config = dict(PRESETS[a.config], layer_norm_epsilon=1e-5)
    params = {k: jnp.asarray(w, dtype=jnp.float32)
              for k, w in ref.random_init(config, seed=0).items()}
    m = {k: jnp.zeros_like(p) for k, p in params.items()}
    v = {k: jnp.zeros_like(p) for k, p in params.items()}
    t = jnp.zeros((), jnp.float32)
    train_step = make_train_step(jax, jnp, config, a.lr, 0.1, 1.0)

    tokens = np.random.default_rng(1).integers(0, 256, size=1 << 20)  # as torch_gpt2_train.py
    n_tok = a.batch * a.seq
    timed = []
    for step in range(a.steps):
        x, y = ref.get_batch(tokens, step, a.batch, a.seq)
        x = jax.block_until_ready(jnp.asarray(x, dtype=jnp.int32))
        y = jax.block_until_ready(jnp.asarray(y, dtype=jnp.int32))
        t0 = time.perf_counter()
        params, m, v, t, loss = train_step(params, m, v, t, x, y)
        loss = float(loss)  # waits for the step
        dt = time.perf_counter() - t0
        if step >= a.skip:
            timed.append(dt)
        print(json.dumps({"step": step, "loss": loss, "step_s": dt, "tokens_per_s": n_tok / dt}),
              flush=True)
    total = sum(timed)
    print(json.dumps({"summary": {"steps_timed": len(timed), "tokens": n_tok * len(timed),
                                  "seconds": total, "tokens_per_s": n_tok * len(timed) / total,
                                  "threads": a.threads, "jax": jax.__version__,
                                  "xla_flags": os.environ.get("XLA_FLAGS", "")}}), flush=True)


if __name__ == "__main__":
    main()
