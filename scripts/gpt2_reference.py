#!/usr/bin/python3
"""PyTorch reference trainer for `axle train`: the same GPT-2, data order and optimizer.

    /usr/bin/python3 scripts/gpt2_reference.py --init DIR --data FILE.bin --steps N --batch B
        --seq T --lr X [--warmup W --schedule constant|cosine --weight-decay X --grad-clip X
        --threads 2]

Prints one JSON object per step: {"step": i, "loss": L, "lr": X}, where L is the forward loss on
batch i before its update and X the learning rate that update used. Needs torch (Debian's
/usr/bin/python3 has it) and NumPy.

What it matches (scripts/conformance.sh compares the losses with `axle train`'s):
  model     Hugging Face GPT-2 (GPT2LMHeadModel without dropout), float32, eager, CPU: learned
            positions, pre-LN blocks (ln_1 -> causal attention -> residual, ln_2 -> MLP ->
            residual), ln_f, logits = x @ wte.T (tied head). Conv1D weights are [in, out]:
            y = x @ W + b. q, k, v are c_attn's output split in that order along the last dim;
            heads split C into n_head chunks; scores scaled by 1/sqrt(C / n_head). GELU is the
            tanh approximation ("gelu_new").
  loss      mean cross-entropy over all B*T targets.
  data      llm.c's order: step i reads B*T+1 tokens from i*B*T, cyclically (token j of step i
            is tokens[(i*B*T + j) % n]); inputs the first B*T, targets the next-token shift.
  optimizer torch.optim.AdamW(betas=(0.9, 0.999), eps=1e-8), two groups: weight_decay on
            parameters with dim >= 2 (embeddings and weight matrices), 0 on biases and layer
            norms. clip_grad_norm_(all parameters, grad_clip) before each update when
            grad_clip > 0.
  schedule  step s of `steps` (0-based): s < warmup: lr*(s+1)/warmup; else constant: lr;
            cosine: min_lr + 0.5*(lr - min_lr)*(1 + cos(pi*p)), p = (s-warmup)/max(1, steps-warmup),
            min_lr = 0.1*lr.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

SHARD_MAGIC = 20240520


def load_safetensors(path):
    """name -> float32 NumPy array. Only F32 tensors (what make_gpt2_fixture.py and Axle write)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        sys.exit(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            sys.exit(f"{path}: tensor {name} has dtype {entry['dtype']}; only F32 is supported here")
        b, e = entry["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + e], dtype="<f4").reshape(entry["shape"]).copy()
    return out


def load_tokens(path):
    """An llm.c shard (.bin) or, for any other file, its bytes (as src/train/data.cc reads them)."""
    with open(path, "rb") as f:
        data = f.read()
    if not path.endswith(".bin"):
        return np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    header = np.frombuffer(data[:1024], dtype="<i4")
    if len(header) < 256 or header[0] != SHARD_MAGIC or header[1] != 1:
        sys.exit(f"{path}: not an llm.c version-1 token shard")
    count = int(header[2])
    if len(data) != 1024 + 2 * count:
        sys.exit(f"{path}: header says {count} tokens but the file has {len(data)} bytes")
    return np.frombuffer(data[1024:], dtype="<u2").astype(np.int64)


def get_batch(tokens, step, B, T):
    """llm.c's batch order, cyclic: (inputs, targets), both int64 [B, T]."""
    n = len(tokens)
    idx = (step * B * T + np.arange(B * T + 1)) % n
    window = tokens[idx]
    return window[:-1].reshape(B, T), window[1:].reshape(B, T)


def lr_at(step, steps, lr, warmup, schedule):
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
    min_lr = 0.1 * lr
    p = (step - warmup) / max(1, steps - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * p))


def build_model(torch, config, weights):
    """GPT-2 as a torch.nn.Module whose parameters carry the Hugging Face names."""
    nn = torch.nn
    F = torch.nn.functional

    C, H = config["n_embd"], config["n_head"]
    eps = config.get("layer_norm_epsilon", 1e-5)

    class Conv1D(nn.Module):  # HF's Conv1D: weight [in, out], y = x @ W + b
        def __init__(self, n_in, n_out):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(n_in, n_out))
            self.bias = nn.Parameter(torch.empty(n_out))

        def forward(self, x):
            return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).reshape(
                *x.shape[:-1], self.weight.shape[1])

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = Conv1D(C, 3 * C)
            self.c_proj = Conv1D(C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = Conv1D(C, 4 * C)
            self.c_proj = Conv1D(4 * C, C)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=eps)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(C, eps=eps)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(config["vocab_size"], C)
            self.wpe = nn.Embedding(config["n_positions"], C)
            self.h = nn.ModuleList(Block() for _ in range(config["n_layer"]))
            self.ln_f = nn.LayerNorm(C, eps=eps)

        def forward(self, idx, targets):
            T = idx.shape[1]
            if T > self.wpe.weight.shape[0]:
                raise ValueError(f"sequence length {T} exceeds n_positions {self.wpe.weight.shape[0]}")
            x = self.wte(idx) + self.wpe(torch.arange(T))
            for block in self.h:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    model = GPT2()
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(weights))
    extra = sorted(set(weights) - set(params) - {"lm_head.weight"})
    if missing or extra:
        raise ValueError(f"weights do not match GPT-2: missing {missing[:10]}, unexpected {extra[:10]}")
    with torch.no_grad():
        for name, p in params.items():
            w = torch.from_numpy(weights[name])
            if tuple(w.shape) != tuple(p.shape):
                raise ValueError(f"{name}: shape {tuple(w.shape)}, expected {tuple(p.shape)}")
            p.copy_(w)
    return model


def random_init(config, seed=0):
    """GPT-2-initialized weights for `config` (as make_gpt2_fixture.py writes them)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_gpt2_fixture import gpt2_weights
    return gpt2_weights(np.random.default_rng(seed), config["vocab_size"], config["n_positions"],
                        config["n_embd"], config["n_layer"])


def make_optimizer(torch, model, lr, weight_decay):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-8)


def train_step(torch, model, opt, x, y, lr, grad_clip):
    """One update; returns the loss before it (a Python float)."""
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss = model(x, y)
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--init", required=True, help="model directory: config.json + model.safetensors")
    ap.add_argument("--data", required=True, help="llm.c token shard (.bin) or a text file")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--schedule", choices=["constant", "cosine"], default="constant")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--grad-clip", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)  # nothing here is random; pinned anyway

    with open(os.path.join(a.init, "config.json")) as f:
        config = json.load(f)
    weights = load_safetensors(os.path.join(a.init, "model.safetensors"))
    model = build_model(torch, config, weights)
    tokens = load_tokens(a.data)
    if len(tokens) < 2:
        sys.exit(f"{a.data}: needs at least 2 tokens")
    if tokens.max() >= config["vocab_size"]:
        sys.exit(f"{a.data}: token {tokens.max()} is not below vocab_size {config['vocab_size']}")
    tokens = torch.from_numpy(tokens)
    opt = make_optimizer(torch, model, a.lr, a.weight_decay)
    for step in range(a.steps):
        x, y = get_batch(tokens.numpy(), step, a.batch, a.seq)
        lr = lr_at(step, a.steps, a.lr, a.warmup, a.schedule)
        loss = train_step(torch, model, opt, torch.from_numpy(x), torch.from_numpy(y), lr,
                          a.grad_clip)
        print(json.dumps({"step": step, "loss": loss, "lr": lr}), flush=True)


if __name__ == "__main__":
    main()
