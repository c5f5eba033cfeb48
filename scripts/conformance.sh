#!/usr/bin/env bash
# Checks `axle train` against PyTorch: the same GPT-2, initial weights, batches and AdamW settings
# must give the same loss at every step (relative difference <= 1e-4).
#
#   scripts/conformance.sh            # uses build/axle
#   AXLE=build-x/axle scripts/conformance.sh
#
# Environment: AXLE (the axle binary, default build/axle), PYTHON (default /usr/bin/python3, the
# interpreter that has torch), STEPS (default 5), TOL (default 1e-4), KEEP=1 keeps the temp dir.
# Exits 0 when every step agrees, or (with a message) when torch is not installed; 1 on a
# mismatch; 2 when a run fails.
#
# Agreement over several steps checks the forward pass (step 0's loss), the backward pass and
# the optimizer (later steps depend on the updates), and the data order (each step reads
# different tokens). A mismatch at step 0 points at the model or the data; only from step 1 on,
# at the gradients, clipping, weight decay or the schedule.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AXLE="${AXLE:-build/axle}"
PYTHON="${PYTHON:-/usr/bin/python3}"
STEPS="${STEPS:-5}"
TOL="${TOL:-1e-4}"

if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  echo "conformance: skipped: '$PYTHON -c \"import torch\"' fails (install PyTorch for it, or set PYTHON)"
  exit 0
fi
if [[ ! -x "$AXLE" ]]; then
  echo "conformance: $AXLE is not an executable; build it (scripts/build.sh) or set AXLE=path/to/axle" >&2
  exit 2
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/axle_conformance.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then
  echo "conformance: keeping $TMP"
else
  trap 'rm -rf "$TMP"' EXIT
fi

# The settings both sides run with. Batch 4 x seq 32 of a 2-layer, 32-wide byte-level GPT-2:
# small enough for seconds on a CPU, big enough that every op (attention over 4 heads, the MLP,
# layer norms, tied head) shapes the loss.
ARGS=(--steps "$STEPS" --batch 4 --seq 32 --lr 1e-3 --warmup 0 --schedule constant
      --weight-decay 0.1 --grad-clip 1.0)

"$PYTHON" "$ROOT/scripts/make_gpt2_fixture.py" "$TMP/model" --seed 0
"$PYTHON" "$ROOT/scripts/gpt2_reference.py" --init "$TMP/model" --data "$TMP/model/tokens.bin" \
  "${ARGS[@]}" > "$TMP/torch.jsonl" || { echo "conformance: the PyTorch reference failed" >&2; exit 2; }
"$AXLE" train --init "$TMP/model" --data "$TMP/model/tokens.bin" "${ARGS[@]}" --dropout 0 \
  --log-json "$TMP/axle.jsonl" > "$TMP/axle.out" 2>&1 || {
  echo "conformance: '$AXLE train' failed; its output:" >&2
  cat "$TMP/axle.out" >&2
  exit 2
}

"$PYTHON" - "$TMP/torch.jsonl" "$TMP/axle.jsonl" "$TOL" "$STEPS" <<'EOF'
import json, sys

torch_path, axle_path, tol, steps = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])


def read(path, required):
    rows = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"conformance: {path}:{n}: not JSON ({e}): {line[:80]}")
            missing = [k for k in required if k not in row]
            if missing:
                sys.exit(f"conformance: {path}:{n}: missing {', '.join(missing)}: {line[:80]}")
            rows[int(row["step"])] = row
    return rows


ref = read(torch_path, ["step", "loss", "lr"])
axl = read(axle_path, ["step", "loss", "lr", "tokens_per_s", "step_s", "compile_s"])
print(f"{'step':>4}  {'torch loss':>12}  {'axle loss':>12}  {'rel diff':>9}  {'lr':>9}")
bad = []
for s in range(steps):
    if s not in ref or s not in axl:
        side = "torch" if s not in ref else "axle"
        print(f"{s:>4}  missing from the {side} log")
        bad.append(s)
        continue
    t, a = float(ref[s]["loss"]), float(axl[s]["loss"])
    rel = abs(a - t) / max(abs(t), 1e-12)
    lr_ok = abs(float(axl[s]["lr"]) - float(ref[s]["lr"])) <= 1e-9 + 1e-6 * abs(float(ref[s]["lr"]))
    ok = rel <= tol and lr_ok  # NaN fails both comparisons
    mark = "" if ok else ("  <-- MISMATCH" if lr_ok else f"  <-- lr {axl[s]['lr']} != {ref[s]['lr']}")
    print(f"{s:>4}  {t:>12.7f}  {a:>12.7f}  {rel:>9.2e}  {float(ref[s]['lr']):>9.3g}{mark}")
    if not ok:
        bad.append(s)
if bad:
    print(f"conformance: FAILED at step(s) {', '.join(map(str, bad))} (tolerance {tol:g} relative)")
    sys.exit(1)
print(f"conformance: OK, {steps} steps agree within {tol:g} relative")
EOF
