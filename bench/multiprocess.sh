#!/usr/bin/env bash
# GPT-2 small's step time with 8 devices as 1 process x 8, 4 x 2 and 8 x 1 (`axle launch`), the
# same mesh and losses, and where the difference goes (bench/README.md, "Several processes").
#
#   bench/multiprocess.sh                       # STEPS=20 SKIP=3 MESH=fsdp=4,tp=2 AXLE=build/axle
set -euo pipefail

AXLE="$(realpath "${AXLE:-build/axle}")"
PYTHON="${PYTHON:-python3}"
STEPS="${STEPS:-20}"
SKIP="${SKIP:-3}"
MESH="${MESH:-fsdp=4,tp=2}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TRAIN=(train --config small --steps "$STEPS" --no-progress --samples 0 --mesh "$MESH")

"$AXLE" "${TRAIN[@]}" --devices 8 --log-json "$TMP/1x8.jsonl" >/dev/null
"$AXLE" launch --nproc 4 -- "$AXLE" "${TRAIN[@]}" --devices 2 --log-json "$TMP/4x2.jsonl" >/dev/null
"$AXLE" launch --nproc 8 -- "$AXLE" "${TRAIN[@]}" --devices 1 --log-json "$TMP/8x1.jsonl" >/dev/null
"$PYTHON" - "$TMP" "$SKIP" "$MESH" <<'EOF'
import json, statistics, sys
tmp, skip, mesh = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print(f"GPT-2 small, mesh {mesh}, 8 devices; median over steps {skip}.. (seconds)")
print(f"{'layout':8s} {'step':>8s} {'in collectives':>15s} {'collectives':>12s} {'bytes/step':>12s}  losses")
base = None
for layout in ["1x8", "4x2", "8x1"]:
    rows = [json.loads(l) for l in open(f"{tmp}/{layout}.jsonl")][skip:]
    step = statistics.median(r["step_s"] for r in rows)
    coll = statistics.median(r["collective_s_per_device"] for r in rows)
    nbytes = rows[-1]["all_gather_bytes"] + rows[-1]["reduce_scatter_bytes"] + rows[-1]["all_reduce_bytes"]
    losses = [r["loss"] for r in rows]
    base = base or losses
    print(f"{layout:8s} {step:8.4f} {coll:15.4f} {rows[-1]['collectives']:12d} {nbytes:12d}  "
          f"{'same bits as 1x8' if losses == base else 'DIFFERENT'}")
EOF
