#!/usr/bin/env bash
# A run of two processes, each in its own network namespace joined only by a veth pair, trains
# exactly as one process with all four devices: nothing in a multi-process run relies on the
# processes sharing a host's loopback or memory (docs/spmd.md, "Several processes").
#
#   scripts/netns_check.sh                 # uses build/axle
#   AXLE=build-x/axle scripts/netns_check.sh
#
# Needs root (ip netns). Without it the check is skipped (exit 0, with a message), unless
# AXLE_REQUIRE_NETNS=1. Exits 1 when the losses differ, 2 when a run fails.
set -euo pipefail

AXLE="$(realpath "${AXLE:-build/axle}")"
PYTHON="${PYTHON:-python3}"
NS_A="axle-ns-a-$$"
NS_B="axle-ns-b-$$"
ADDR_A=10.231.$(( $$ % 200 )).1
ADDR_B=10.231.$(( $$ % 200 )).2
TMP="$(mktemp -d)"

skip() {
  echo "netns_check: skipped: $1"
  [ "${AXLE_REQUIRE_NETNS:-0}" = 1 ] && exit 2
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip "needs root for ip netns"
command -v ip >/dev/null || skip "no ip (iproute2)"

cleanup() {
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
ip netns add "$NS_A" 2>/dev/null || skip "ip netns add is not permitted here"
ip netns add "$NS_B"
ip link add "veth-a-$$" netns "$NS_A" type veth peer name "veth-b-$$" netns "$NS_B"
ip -n "$NS_A" addr add "$ADDR_A/24" dev "veth-a-$$"
ip -n "$NS_B" addr add "$ADDR_B/24" dev "veth-b-$$"
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up
done
ip -n "$NS_A" link set "veth-a-$$" up
ip -n "$NS_B" link set "veth-b-$$" up

TRAIN=(train --config tiny --steps 3 --batch 8 --seq 16 --no-progress --samples 0 --backend cpu --mesh fsdp=2,tp=2)
echo "netns_check: one process, 4 devices"
"$AXLE" "${TRAIN[@]}" --devices 4 --log-json "$TMP/one.jsonl" >"$TMP/one.log" 2>&1 || { cat "$TMP/one.log"; exit 2; }
echo "netns_check: 2 processes x 2 devices, in $NS_A ($ADDR_A) and $NS_B ($ADDR_B)"
common=(env WORLD_SIZE=2 MASTER_ADDR="$ADDR_A" MASTER_PORT=29517 AXLE_COLLECTIVE_TIMEOUT=60)
ip netns exec "$NS_A" "${common[@]}" RANK=0 "$AXLE" "${TRAIN[@]}" --devices 2 --log-json "$TMP/two.jsonl" \
  >"$TMP/rank0.log" 2>&1 &
pid_a=$!
ip netns exec "$NS_B" "${common[@]}" RANK=1 "$AXLE" "${TRAIN[@]}" --devices 2 --log-json "$TMP/two.jsonl" \
  >"$TMP/rank1.log" 2>&1 &
pid_b=$!
rc=0
wait "$pid_a" || rc=$?
wait "$pid_b" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "netns_check: a rank failed ($rc)"
  cat "$TMP/rank0.log" "$TMP/rank1.log"
  exit 2
fi
grep -h "^processes:" "$TMP/rank0.log"
"$PYTHON" - "$TMP/one.jsonl" "$TMP/two.jsonl" "$TMP/two.rank1.jsonl" <<'EOF'
import json, sys
runs = [[json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:]]
print("netns_check: losses", *runs, sep="\n  ")
sys.exit(0 if runs[0] == runs[1] == runs[2] and len(runs[0]) == 3 else 1)
EOF
echo "netns_check: ok (bitwise the one-process losses)"
