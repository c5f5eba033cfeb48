#!/usr/bin/env bash
# Checkpoint costs of `axle train` (docs/checkpoint.md): how long save_async blocks the training
# loop against a synchronous save of the same state, save and restore throughput against the
# disk's own write speed (dd with fsync), and peak host memory while restoring.
#
#   bench/checkpoint.sh                      # CONFIG=124m STEPS=7 EVERY=3 AXLE=build/axle DIR=/tmp/axle_ckpt_bench
#   CONFIG=small DEVICES=8 MESH=fsdp=8 bench/checkpoint.sh
#   RESTORE_PROCS=8 bench/checkpoint.sh     # and a restore in 8 processes of one device each
set -euo pipefail
AXLE=${AXLE:-build/axle}
CONFIG=${CONFIG:-124m}
STEPS=${STEPS:-7}
EVERY=${EVERY:-3}
DEVICES=${DEVICES:-1}
MESH=${MESH:-}
DIR=${DIR:-/tmp/axle_ckpt_bench}
rm -rf "$DIR" && mkdir -p "$DIR"
mesh_flags="--devices $DEVICES"
[ -n "$MESH" ] && mesh_flags="$mesh_flags --mesh $MESH"
common="train --config $CONFIG --batch 2 --seq 64 --samples 0 --no-progress --backend cpu $mesh_flags"

echo "== save: $STEPS steps of gpt2 $CONFIG, a background save every $EVERY, the last one synchronous"
$AXLE $common --steps "$STEPS" --checkpoint-dir "$DIR/ckpt" --checkpoint-every "$EVERY" | tee "$DIR/save.txt" |
  grep -E "^axle train|^checkpoint"
step_dir=$(ls -d "$DIR"/ckpt/step_* | tail -1)
bytes=$(du -sb "$step_dir" | cut -f1)
largest=$(ls -l "$step_dir"/*.safetensors | awk '{print $5}' | sort -n | tail -1)
line=$(grep "^checkpoint" "$DIR/save.txt")
# The least blocking save: the others may also have waited for an earlier save (max_pending 1).
block=$(sed -E 's/.*\(min ([0-9.]+),.*/\1/' <<<"$line")
sync_s=$(sed -E 's/.*final save took ([0-9.]+) s.*/\1/' <<<"$line")
echo "checkpoint: $(awk -v b="$bytes" 'BEGIN{printf "%.3f GB", b/1e9}') in $step_dir (largest file $(awk -v b="$largest" 'BEGIN{printf "%.3f GB", b/1e9}'))"
awk -v a="$block" -v s="$sync_s" -v b="$bytes" 'BEGIN{
  printf "save_async blocked %.3f s = %.1f%% of a synchronous save (%.3f s); synchronous save %.3f GB/s\n", a, 100*a/s, s, b/1e9/s}'

echo "== the disk: dd of the same size with fsync"
mb=$(( bytes / 1000000 + 1 ))
dd if=/dev/zero of="$DIR/dd.bin" bs=1M count="$mb" conv=fsync 2>&1 | tail -1
dd if="$DIR/dd.bin" of=/dev/null bs=1M 2>&1 | tail -1
rm -f "$DIR/dd.bin"

echo "== restore (--resume of the last step: nothing left to train)"
/usr/bin/time -v $AXLE $common --steps "$STEPS" --checkpoint-dir "$DIR/ckpt" --resume 2> "$DIR/time.txt" |
  grep -E "^resumed" | tee "$DIR/restore.txt"
restore_s=$(sed -E 's/.* in ([0-9.]+) s:.*/\1/' "$DIR/restore.txt")
rss=$(grep "Maximum resident" "$DIR/time.txt" | awk '{print $NF}')
awk -v r="$restore_s" -v b="$bytes" -v rss="$rss" -v l="$largest" 'BEGIN{
  printf "restore %.3f s = %.3f GB/s; peak RSS of the whole process %.3f GB (largest file %.3f GB)\n", r, b/1e9/r, rss*1024/1e9, l/1e9}'

# Restoring onto another layout in several processes (RESTORE_PROCS x 1 device, fsdp over all):
# each process reads the chunks its shard needs; the resume line gives its memory before and
# during the restore.
if [ "${RESTORE_PROCS:-0}" -gt 1 ]; then
  echo "== restore in $RESTORE_PROCS processes of 1 device, --mesh fsdp=$RESTORE_PROCS (process 0's line)"
  $AXLE launch --nproc "$RESTORE_PROCS" -- $AXLE train --config $CONFIG --batch "$RESTORE_PROCS" --seq 64 --samples 0 --no-progress \
    --backend cpu --devices 1 --mesh "fsdp=$RESTORE_PROCS" --steps "$STEPS" --checkpoint-dir "$DIR/ckpt" --resume |
    grep -E "^resumed"
fi
rm -rf "$DIR"
