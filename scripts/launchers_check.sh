#!/usr/bin/env bash
# The acceptance run of several processes, through every launcher at hand: 4 processes x 2
# devices under fsdp=4,tp=2, started by `axle launch`, torchrun and mpirun, each against one
# process with 8 devices (docs/spmd.md, "Launchers"). The reduction order is the same, so the
# losses must be equal bit for bit.
#
#   scripts/launchers_check.sh             # uses build/axle
#   AXLE=build-x/axle STEPS=10 scripts/launchers_check.sh
#
# torchrun comes with python3-torch and mpirun with openmpi-bin (scripts/setup.sh --with-torch
# installs both); a launcher that is missing is reported and skipped. Exits 1 on a difference, 2
# when a run fails.
set -euo pipefail

AXLE="$(realpath "${AXLE:-build/axle}")"
PYTHON="${PYTHON:-python3}"
STEPS="${STEPS:-5}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
TRAIN=(train --config small --steps "$STEPS" --no-progress --samples 0 --mesh fsdp=4,tp=2)

run() {  # name, command...
  local name=$1
  shift
  local t0=$(date +%s%N)
  if ! "$@" >"$TMP/$name.log" 2>&1; then
    echo "launchers_check: $name failed:"
    tail -30 "$TMP/$name.log"
    exit 2
  fi
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf "launchers_check: %-12s %d.%03d s\n" "$name" $((ms / 1000)) $((ms % 1000))
}

run one "$AXLE" "${TRAIN[@]}" --devices 8 --log-json "$TMP/one.jsonl"
run launch "$AXLE" launch --nproc 4 -- "$AXLE" "${TRAIN[@]}" --devices 2 --log-json "$TMP/launch.jsonl"
runs=(launch)
if command -v torchrun >/dev/null; then
  # -r 1 -t 1: Debian 12's torch 1.13 under Python 3.11 fails on the default --redirects 0
  # (Std.from_str returns None); redirecting stdout to its log and teeing it works everywhere.
  run torchrun torchrun --no_python --nproc_per_node 4 -r 1 -t 1 "$AXLE" "${TRAIN[@]}" --devices 2 \
    --log-json "$TMP/torchrun.jsonl"
  runs+=(torchrun)
else
  echo "launchers_check: torchrun not installed (scripts/setup.sh --with-torch): skipped"
fi
if command -v mpirun >/dev/null; then
  root=()
  [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
  run mpirun mpirun "${root[@]}" --oversubscribe -n 4 "$AXLE" "${TRAIN[@]}" --devices 2 --log-json "$TMP/mpirun.jsonl"
  runs+=(mpirun)
else
  echo "launchers_check: mpirun not installed (scripts/setup.sh --with-torch): skipped"
fi
"$PYTHON" - "$TMP" "${runs[@]}" <<'EOF'
import json, sys
tmp, names = sys.argv[1], sys.argv[2:]
def losses(name): return [json.loads(l)["loss"] for l in open(f"{tmp}/{name}.jsonl")]
want = losses("one")
print(f"launchers_check: one process, 8 devices: {want}")
bad = 0
for n in names:
    got = losses(n)
    print(f"launchers_check: {n:9s} 4 x 2:     {got} {'same bits' if got == want else 'DIFFERENT'}")
    bad += got != want
sys.exit(1 if bad else 0)
EOF
