#!/usr/bin/env bash
# Llama fine-tuning throughput of `axle train --model llama` next to PyTorch eager running
# transformers' LlamaForCausalLM of the same shape, on the same machine: tokens/s and peak memory
# (bench/README.md). Random weights (a preset: CONFIG=bench is vocab 32000, d 2048, 16 layers, GQA
# 32/8, FFN 5632, about 0.85B parameters: 13.6 GB of f32 weights, gradients and AdamW moments per
# side, run one after the other), AdamW (lr 3e-4, weight decay 0.1, clip 1.0), batch x seq tokens.
#
#   bench/llama_tokens_per_s.sh
#   CONFIG=small BATCH=8 SEQ=128 STEPS=20 bench/llama_tokens_per_s.sh
#
# Environment: CONFIG (bench), BATCH (1), SEQ (128), STEPS (6), SKIP (2: compile and warmup, not
# timed), AXLE (build/axle), PYTHON (/usr/bin/python3 with torch and transformers), TORCH_THREADS
# (the core count). PyTorch runs at its best setting here (OMP_WAIT_POLICY=PASSIVE, glibc keeping
# freed memory; bench/train_tokens_per_s.sh).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AXLE="${AXLE:-build/axle}"
PYTHON="${PYTHON:-/usr/bin/python3}"
CONFIG="${CONFIG:-bench}"
BATCH="${BATCH:-1}"
SEQ="${SEQ:-128}"
STEPS="${STEPS:-6}"
SKIP="${SKIP:-2}"
TORCH_THREADS="${TORCH_THREADS:-$(nproc)}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/axle_llama_bench.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

echo "llama $CONFIG, batch $BATCH x seq $SEQ, $STEPS steps ($SKIP untimed), $(nproc) cores"
/usr/bin/time -f "%M" -o "$TMP/axle.rss" "$AXLE" train --model llama --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" \
  --steps "$STEPS" --lr 3e-4 --warmup 0 --schedule constant --weight-decay 0.1 --grad-clip 1.0 --samples 0 \
  --no-progress --log-json "$TMP/axle.jsonl" > "$TMP/axle.out" 2>&1 || { echo "axle failed:"; tail -5 "$TMP/axle.out"; exit 1; }
axle_tps="$("$PYTHON" - "$TMP/axle.jsonl" "$SKIP" "$BATCH" "$SEQ" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
skip, n = int(sys.argv[2]), int(sys.argv[3]) * int(sys.argv[4])
timed = [r["step_s"] for r in rows if r["step"] >= skip]
print("%.1f" % (n * len(timed) / sum(timed)))
PY
)"
axle_compile="$(grep -o 'startup: [0-9.]* s' "$TMP/axle.out" | head -1)"
if "$PYTHON" -c "import torch, transformers" 2>/dev/null; then
  env OMP_WAIT_POLICY=PASSIVE GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    "$PYTHON" "$ROOT/bench/torch_llama_train.py" --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" \
    --skip "$SKIP" --threads "$TORCH_THREADS" > "$TMP/torch.jsonl" 2> "$TMP/torch.err" || { echo "torch failed:"; tail -5 "$TMP/torch.err"; }
  torch_tps="$("$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1])["summary"]; print("%.1f %.0f" % (s["tokens_per_s"], s["peak_rss_mb"]))' "$TMP/torch.jsonl" 2>/dev/null)"
fi
printf '%-30s %12s %14s\n' "" "tokens/s" "peak RSS (MB)"
printf '%-30s %12s %14s   (%s)\n' "axle train" "$axle_tps" "$(( $(cat "$TMP/axle.rss") / 1024 ))" "$axle_compile"
if [[ -n "${torch_tps:-}" ]]; then
  read -r t_tps t_rss <<<"$torch_tps"
  printf '%-30s %12s %14s\n' "pytorch eager ($TORCH_THREADS threads)" "$t_tps" "$t_rss"
  awk -v a="$axle_tps" -v t="$t_tps" 'BEGIN { printf "%-30s %12.2fx\n", "axle / pytorch", a / t }'
else
  echo "pytorch: skipped (no torch + transformers for $PYTHON)"
fi
