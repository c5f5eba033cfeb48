#!/usr/bin/env python3
"""Writes the Llama-family golden model directories that tests/nn/llama_test.cc reads.

    /usr/bin/python3 scripts/make_llama_goldens.py [OUT_DIR]   # default tests/nn/goldens

Needs PyTorch and Hugging Face transformers (scripts/setup.sh --with-torch installs both for
Debian's /usr/bin/python3). The reference is transformers itself: LlamaForCausalLM,
MistralForCausalLM and Qwen2ForCausalLM, eager attention, float32. Commit the output.

Each OUT_DIR/<name>/ is a Hugging Face model directory as save_pretrained writes it (config.json,
model.safetensors or shards with model.safetensors.index.json) plus expected.json:
  idx, targets      [B, T] token ids of one batch
  logits            the model's logits on idx, flattened [B * T * vocab]
  losses            mean cross-entropy before each of 5 AdamW steps (lr 1e-3, betas (0.9, 0.999),
                    eps 1e-8, weight decay 0.1 on parameters of rank >= 2 and none on the others,
                    gradients clipped to total norm 1.0), on the same batch every step
  masked_loss       the loss with the targets of the first 5 positions of every row set to -100
  greedy            50 greedy tokens after idx[0][:5], decoded with transformers' KV cache

The weights are drawn larger than HF's init (std 0.02 makes every logit nearly 0, which would let
a wrong rotary or a wrong head mapping pass): N(0, 0.15^2) matrices, RMSNorm weights 1 + N(0, 0.1^2),
biases N(0, 0.1^2). The variants cover what differs between the families:
  llama    GQA 4/2, untied lm_head, llama3 rope scaling (short original context, so it matters),
           two shards with an index
  mistral  GQA 4/2, untied, a sliding window of 6 over 12 positions
  qwen2    4 query heads on 1 kv head, q/k/v biases, tied embeddings, linear rope scaling x2
"""
import json
import os
import sys

import torch
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                          "tests", "nn", "goldens")
B, T = 2, 12
COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=64, rms_norm_eps=1e-5, attn_implementation="eager")

VARIANTS = {
    "llama": (LlamaForCausalLM, LlamaConfig(
        **COMMON, num_key_value_heads=2, tie_word_embeddings=False, rope_theta=10000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8}), "150KB"),
    "mistral": (MistralForCausalLM, MistralConfig(
        **COMMON, num_key_value_heads=2, tie_word_embeddings=False, rope_theta=1000.0, sliding_window=6), None),
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(
        **COMMON, num_key_value_heads=1, tie_word_embeddings=True, rope_theta=10000.0,
        rope_scaling={"type": "linear", "factor": 2.0}, use_sliding_window=False), None),
}


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen))


def loss_of(model, idx, targets):
    logits = model(idx).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                             ignore_index=-100)


def greedy_decode(model, prompt, n):
    """n greedy tokens after `prompt` [1, P], with transformers' KV cache: what model.generate(...,
    do_sample=False) does without an end-of-sequence stop. (generate itself imports
    torch.distributed.fsdp, which Debian's torch 1.13 cannot import under Python 3.11.)"""
    out = model(prompt, use_cache=True)
    past, tokens = out.past_key_values, []
    for _ in range(n):
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(int(nxt))
        out = model(nxt, past_key_values=past, use_cache=True)
        past = out.past_key_values
    return torch.tensor(tokens)


def main():
    torch.use_deterministic_algorithms(True)
    for name, (cls, config, shard) in VARIANTS.items():
        gen = torch.Generator().manual_seed(1234)
        torch.manual_seed(0)
        model = cls(config).float()
        randomize(model, gen)
        out = os.path.join(OUT, f"llama_{name}")
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
        model.save_pretrained(out, safe_serialization=True, **({"max_shard_size": shard} if shard else {}))
        idx = torch.randint(0, config.vocab_size, (B, T), generator=gen)
        targets = torch.randint(0, config.vocab_size, (B, T), generator=gen)
        with torch.no_grad():
            logits = model(idx).logits
            masked = targets.clone()
            masked[:, :5] = -100
            masked_loss = loss_of(model, idx, masked).item()
            greedy = greedy_decode(model, idx[:1, :5], 50)
        params = list(model.named_parameters())
        decay = [p for n, p in params if p.dim() >= 2]
        no_decay = [p for n, p in params if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
        losses = []
        for _ in range(5):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model, idx, targets)
            losses.append(loss.item())
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for _, p in params], 1.0)
            opt.step()
        expected = {"idx": idx.tolist(), "targets": targets.tolist(),
                    "logits": [round(float(v), 7) for v in logits.reshape(-1)], "losses": losses,
                    "masked_loss": masked_loss, "greedy": greedy.tolist()}
        with open(os.path.join(out, "expected.json"), "w") as f:
            json.dump(expected, f)
            f.write("\n")
        files = sorted(os.listdir(out))
        print(f"{out}: {', '.join(files)}; loss {losses[0]:.6f} -> {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
