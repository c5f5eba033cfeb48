#!/usr/bin/env bash
# Checks `axle export` against Hugging Face transformers: a GPT-2 (or, MODEL=llama, a Llama)
# trained by `axle train` and exported must load with AutoModelForCausalLM.from_pretrained and
# give Axle's loss on a batch (|difference| <= 1e-5).
#
#   scripts/export_check.sh            # uses build/axle
#   AXLE=build-x/axle scripts/export_check.sh
#
# Environment: AXLE (the axle binary, default build/axle), PYTHON (default /usr/bin/python3, the
# interpreter that has torch and transformers), STEPS (training steps before the export, default
# 5), TOL (default 1e-5, absolute), CONFIG (the `axle train --config` preset, default tiny; 124m
# checks GPT-2's own size), MODEL (the `axle train --model`, default gpt2; llama trains the Llama
# tiny preset: GQA, untied head), BATCH x SEQ (default 4 x 32), KEEP=1 keeps the temp dir.
# Exits 0 when the losses agree, or (with a message) when torch or transformers cannot be
# imported; 1 on a mismatch or when transformers cannot load the export; 2 when a run fails.
#
# How Axle's loss on a batch is obtained, without any option added for it: a step's --log-json
# row holds the forward loss on that step's batch *before* its update. So
#   1. `axle train --steps STEPS --checkpoint-dir CK` trains and commits step STEPS;
#   2. `axle export --checkpoint CK --step STEPS --out HF` exports it;
#   3. `axle train --steps STEPS+1 --checkpoint-dir CK --resume` restores step STEPS and logs the
#      loss of the trained model (as the checkpoint holds it, not through the export) on batch
#      STEPS;
#   4. `axle train --init HF --steps 1` logs the loss of the export as Axle reads it, on batch 0;
#   5. transformers loads HF (whole, and sharded with an index) and computes the mean
#      cross-entropy of its float32 logits, in float64, on the same two batches (llm.c's order, as
#      scripts/gpt2_reference.py takes them from the same data file). Printed beside it, for
#      reference: torch's float32 cross_entropy of the same logits (transformers' own `loss`) and
#      the loss of the model in float64. On GPT-2 124M the float32 cross_entropy is off by
#      ~1.6e-5 while Axle's loss is within 5e-7 of the float64 model's (CONFIG=124m STEPS=2).
# Dropout is 0 everywhere; the schedule is constant, so the resumed run's step is the same math.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AXLE="${AXLE:-build/axle}"
PYTHON="${PYTHON:-/usr/bin/python3}"
STEPS="${STEPS:-5}"
TOL="${TOL:-1e-5}"
CONFIG="${CONFIG:-tiny}"
MODEL="${MODEL:-gpt2}"
BATCH="${BATCH:-4}"
SEQ="${SEQ:-32}"

if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  echo "export_check: skipped: '$PYTHON -c \"import torch\"' fails (install PyTorch for it: scripts/setup.sh --with-torch, or set PYTHON)"
  exit 0
fi
# transformers imports without torch, or with a torch older than it supports (5.x wants >= 2.6;
# Debian 12 has 1.13, which 4.46 takes), and then only warns: ask it whether it found torch.
if ! "$PYTHON" -c "import transformers, sys; sys.exit(not transformers.is_torch_available())" >/dev/null 2>&1; then
  echo "export_check: skipped: transformers cannot be imported by $PYTHON, or cannot use its torch (install it: scripts/setup.sh --with-torch, or set PYTHON)"
  exit 0
fi
if [[ ! -x "$AXLE" ]]; then
  echo "export_check: $AXLE is not an executable; build it (scripts/build.sh) or set AXLE=path/to/axle" >&2
  exit 2
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/axle_export_check.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then
  echo "export_check: keeping $TMP"
else
  trap 'rm -rf "$TMP"' EXIT
fi

run() {  # run NAME ARGS...: runs ARGS, its output in $TMP/NAME.out, shown on a failure
  local name="$1"
  shift
  "$@" > "$TMP/$name.out" 2>&1 || {
    echo "export_check: '$*' failed; its output:" >&2
    cat "$TMP/$name.out" >&2
    exit 2
  }
}

# Byte tokens (the tiny preset's vocabulary is 256) of a text at hand: the repository's README,
# copied, so that both sides read the same bytes.
DATA="$TMP/data.txt"
cp "$ROOT/README.md" "$DATA"
# By default a tiny GPT-2 (2 layers, 64 wide, 4 heads), batch 4 x 32; a learning rate high enough
# that the weights move far from their init in a few steps.
ARGS=(--model "$MODEL" --data "$DATA" --batch "$BATCH" --seq "$SEQ" --lr 1e-2 --warmup 0 --schedule constant
      --dropout 0 --samples 0 --no-progress)

run train "$AXLE" train --config "$CONFIG" "${ARGS[@]}" --steps "$STEPS" --checkpoint-dir "$TMP/ck"
run export "$AXLE" export --checkpoint "$TMP/ck" --step "$STEPS" --out "$TMP/hf"
# The same step sharded (model-0000k-of-0000n.safetensors + model.safetensors.index.json), as
# save_pretrained shards above its max_shard_size: 2/5 of the model's bytes gives 3 files.
run export_sharded "$AXLE" export --checkpoint "$TMP/ck" --step "$STEPS" --out "$TMP/hf_sharded" \
  --max-shard-size "$(( $(stat -c %s "$TMP/hf/model.safetensors") * 2 / 5 ))"
run resume "$AXLE" train --config "$CONFIG" "${ARGS[@]}" --steps "$((STEPS + 1))" --checkpoint-dir "$TMP/ck" \
  --resume --log-json "$TMP/resume.jsonl"
run init "$AXLE" train "${ARGS[@]}" --init "$TMP/hf" --steps 1 --log-json "$TMP/init.jsonl"

"$PYTHON" - "$ROOT/scripts" "$TMP/hf" "$TMP/hf_sharded" "$DATA" "$TMP/resume.jsonl" "$TMP/init.jsonl" \
  "$STEPS" "$TOL" "$BATCH" "$SEQ" <<'EOF'
import json, sys

scripts, hf_dir, hf_sharded_dir, data, resume_log, init_log, steps, tol, B, T = sys.argv[1:]
steps, tol, B, T = int(steps), float(tol), int(B), int(T)
sys.path.insert(0, scripts)
from gpt2_reference import get_batch, load_tokens  # llm.c's batch order, as Axle reads the data

import torch
import transformers
from transformers import AutoModelForCausalLM

F = torch.nn.functional
transformers.utils.logging.disable_progress_bar()


def axle_loss(path, step):
    for line in open(path):
        if line.strip():
            row = json.loads(line)
            if int(row["step"]) == step:
                return float(row["loss"])
    sys.exit(f"export_check: {path} has no row for step {step}")


def load(path):
    try:
        model, info = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, output_loading_info=True)
    except Exception as e:  # the point of the check: say why it does not load
        print(f"export_check: FAILED: AutoModelForCausalLM.from_pretrained({path!r}) raised {type(e).__name__}: {e}")
        sys.exit(1)
    # A missing weight would be initialized at random, silently but for this warning.
    problems = {k: v for k, v in info.items() if v}
    if problems:
        print(f"export_check: FAILED: AutoModelForCausalLM.from_pretrained({path!r}) reports {problems}")
        sys.exit(1)
    return model.eval()  # eval: no dropout


tokens = load_tokens(data)
bad = False
print(f"{'batch':>5}  {'axle: the loss of':<30}  {'export':>7}  {'axle loss':>10}  {'transformers':>12}  "
      f"{'|diff|':>8}  {'(f32 CE':>10}  {'f64 model)':>10}")
for export, path in (("whole", hf_dir), ("sharded", hf_sharded_dir)):
    model = load(path)
    model64 = load(path).double()
    print(f"{'':>5}  ({export}: {path} loads as {type(model).__name__})")
    for step, log, what in ((steps, resume_log, f"the checkpoint of step {steps}"),
                            (0, init_log, "the export read by --init")):
        x, y = get_batch(tokens, step, B, T)
        x, y = torch.from_numpy(x), torch.from_numpy(y).reshape(-1)
        with torch.no_grad():
            logits = model(x).logits
            logits = logits.reshape(-1, logits.shape[-1])
            # The model's float32 logits; their cross-entropy in float64. torch's float32
            # cross_entropy (transformers' own `loss`) is itself off by up to ~2e-5 over GPT-2's
            # 50257 classes (measured against the float64 model), more than the tolerance.
            hf = float(F.cross_entropy(logits.double(), y))
            hf32 = float(F.cross_entropy(logits, y))
            hf64 = float(F.cross_entropy(model64(x).logits.reshape(-1, logits.shape[-1]), y))
        ax = axle_loss(log, step)
        diff = abs(ax - hf)
        ok = diff <= tol  # NaN fails
        bad = bad or not ok
        print(f"{step:>5}  {what:<30}  {export:>7}  {ax:>10.7f}  {hf:>12.7f}  {diff:>8.2e}  {hf32:>10.7f}  "
              f"{hf64:>10.7f}{'' if ok else '  <-- MISMATCH'}")
if bad:
    print(f"export_check: FAILED: the losses differ by more than {tol:g}")
    sys.exit(1)
print(f"export_check: OK, transformers loads the export and its losses agree with Axle's within {tol:g}")
EOF
