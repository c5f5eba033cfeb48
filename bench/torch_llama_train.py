#!/usr/bin/python3
"""Times Llama fine-tuning in PyTorch eager on the CPU: the baseline for `axle train --model llama`.

    /usr/bin/python3 bench/torch_llama_train.py [--config bench --steps 6 --batch 1 --seq 128 --threads N]

The model is transformers' LlamaForCausalLM with one of Axle's presets (LlamaConfig::Preset in
src/nn/llama.cc: bench = vocab 32000, d 2048, 16 layers, GQA 32/8, FFN 5632; small; tiny), float32,
eager attention, HF's random init, trained with the AdamW settings bench/llama_tokens_per_s.sh
gives `axle train` (lr 3e-4, weight decay 0.1 on dim >= 2 params, grad clip 1.0) on random tokens.
Prints one JSON line per step ({"step", "loss", "step_s", "tokens_per_s"}) and a last line
{"summary": ...} with the tokens/s over the steps after the first `--skip` (default 2) and the
process's peak resident memory.
"""
import argparse
import json
import os
import resource
import time

PRESETS = {  # Axle's LlamaConfig::Preset
    "tiny": dict(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=256),
    "small": dict(vocab_size=512, hidden_size=128, intermediate_size=352, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512),
    "bench": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=2048),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=sorted(PRESETS), default="bench")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--lr", type=float, default=3e-4)
    a = ap.parse_args()
    if a.steps <= a.skip:
        ap.error(f"--steps must be more than --skip ({a.skip})")

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    config = LlamaConfig(**PRESETS[a.config], rms_norm_eps=1e-6, tie_word_embeddings=False,
                         attn_implementation="eager")
    model = LlamaForCausalLM(config).float().train()
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    gen = torch.Generator().manual_seed(1)
    n_tok = a.batch * a.seq
    timed = []
    for step in range(a.steps):
        x = torch.randint(0, config.vocab_size, (a.batch, a.seq + 1), generator=gen)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        value = loss.item()
        dt = time.perf_counter() - t0
        if step >= a.skip:
            timed.append(dt)
        print(json.dumps({"step": step, "loss": value, "step_s": dt, "tokens_per_s": n_tok / dt}), flush=True)
    total = sum(timed)
    print(json.dumps({"summary": {"steps_timed": len(timed), "tokens_per_s": n_tok * len(timed) / total,
                                  "threads": a.threads, "torch": torch.__version__,
                                  "parameters": sum(p.numel() for p in params),
                                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}),
          flush=True)


if __name__ == "__main__":
    main()
