#!/usr/bin/env bash
# Training throughput of `axle train` next to PyTorch eager (and JAX, jax.jit on the CPU, when a
# python with jax is found) on the same machine: tokens/s of a
# GPT-2 preset (CONFIG=small: vocab 512, n_embd 128, 2 layers, batch 8 x seq 64; CONFIG=124m:
# batch 4 x seq 64), AdamW (lr 3e-4, weight decay 0.1, grad clip 1.0), no dropout. PyTorch runs at
# its best setting on this kind of machine, not its default: OMP_WAIT_POLICY=PASSIVE and glibc
# keeping freed memory (GLIBC_TUNABLES, see bench/README.md). See bench/README.md.
#
#   bench/train_tokens_per_s.sh
#   CONFIG=124m STEPS=8 bench/train_tokens_per_s.sh
#   STEPS=30 AXLE=build-x/axle TORCH_THREADS=1 bench/train_tokens_per_s.sh
#   CONFIG=124m STEPS=8 ROUNDS=3 bench/train_tokens_per_s.sh   # alternate the sides, print medians
#   PRECISION=bf16-mixed CONFIG=124m STEPS=8 ROUNDS=3 bench/train_tokens_per_s.sh   # bf16 autocast
#   PRECISION=bf16 CONFIG=124m STEPS=8 ROUNDS=3 bench/train_tokens_per_s.sh         # bf16 weights too
#
# Environment: PRECISION (fp32; bf16-mixed: `axle train --precision bf16-mixed` against PyTorch's
# torch.autocast("cpu", dtype=torch.bfloat16); or bf16: `axle train --precision bf16` against
# PyTorch's model.to(torch.bfloat16) (TORCH_BF16_AUTOCAST_ON=1: under autocast too); with either,
# each round also runs Axle in fp32 for the bf16 / f32 speedup, and JAX is left out), CONFIG (small), BATCH / SEQ (per config), STEPS (default 20), SKIP (default 2: the
# first steps are compile / warmup and are not timed), ROUNDS (default 1: runs of each side,
# alternated; the table shows medians), AXLE (default build/axle), PYTHON (default
# /usr/bin/python3, must have torch), TORCH_THREADS (default: the core count), TORCH_MKL (default:
# the libmkl_rt that `axle train` reports, else none; PyTorch then also runs with MKL preloaded as
# its BLAS, and its best setting per round is the one compared; none: OpenBLAS only),
# TORCH_ONE_THREAD (default auto: when TORCH_THREADS > 1, PyTorch also runs on one thread each
# round and the faster setting is compared; none: leave it out), JAX_PYTHON (default:
# the first of python3 on PATH, $PYTHON, /usr/bin/python3 that imports jax; JAX_PYTHON=none skips
# JAX), JAX_THREADS (default: TORCH_THREADS), OPENBLAS_KERNELS (default auto: every side, the
# sgemm probe and the GEMM floor run on the kernels OpenBLAS picks for this CPU, with any
# OPENBLAS_CORETYPE in the environment set aside; inherit: keep the environment's; a core name:
# that core for all of them). Each side is skipped with a note when it cannot run.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AXLE="${AXLE:-build/axle}"
PYTHON="${PYTHON:-/usr/bin/python3}"
STEPS="${STEPS:-20}"
ROUNDS="${ROUNDS:-1}"
SKIP="${SKIP:-2}"
CORES="$(nproc)"
TORCH_THREADS="${TORCH_THREADS:-$CORES}"
CONFIG="${CONFIG:-small}"
case "$CONFIG" in
  small) BATCH="${BATCH:-8}" ;;
  *) BATCH="${BATCH:-4}" ;;
esac
SEQ="${SEQ:-64}"
PRECISION="${PRECISION:-fp32}"
# PRECISION=bf16: PyTorch's peer is model.to(torch.bfloat16), without autocast (Lightning's
# bf16-true); TORCH_BF16_AUTOCAST=1 also runs its forward under autocast, as Axle's bf16 does.
TORCH_BF16_AUTOCAST=()
[[ "${TORCH_BF16_AUTOCAST_ON:-0}" == 1 ]] && TORCH_BF16_AUTOCAST=(--autocast-bf16)
case "$PRECISION" in
  fp32) TORCH_PRECISION=() ;;
  bf16-mixed) TORCH_PRECISION=(--autocast-bf16); JAX_PYTHON=skip ;;
  bf16) TORCH_PRECISION=(--bf16-weights "${TORCH_BF16_AUTOCAST[@]}"); JAX_PYTHON=skip ;;
  *) echo "PRECISION=$PRECISION: expected fp32, bf16-mixed or bf16" >&2; exit 2 ;;
esac
# One OpenBLAS core for every side (Note [OpenBLAS's kernels], src/backends/cpu/blas.cc): an
# environment that sets OPENBLAS_CORETYPE (this VM's set Haswell, AVX2, on a Zen 5 whose AVX-512
# kernels run sgemm twice as fast) would otherwise hold back Axle, PyTorch and the roofline alike.
OPENBLAS_KERNELS="${OPENBLAS_KERNELS:-auto}"
case "$OPENBLAS_KERNELS" in
  auto) [[ -n "${OPENBLAS_CORETYPE:-}" ]] && echo "openblas: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE set aside: every side runs the kernels OpenBLAS picks for this CPU (OPENBLAS_KERNELS=inherit keeps it)"
        unset OPENBLAS_CORETYPE ;;
  inherit) ;;
  *) export OPENBLAS_CORETYPE="$OPENBLAS_KERNELS" ;;
esac
TORCH_ENV=(env OMP_WAIT_POLICY=PASSIVE
           GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736)

if [[ -z "${JAX_PYTHON:-}" ]]; then
  for py in python3 "$PYTHON" /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c "import jax" >/dev/null 2>&1; then
      JAX_PYTHON="$py"; break
    fi
  done
fi
JAX_PYTHON="${JAX_PYTHON:-none}"
JAX_THREADS="${JAX_THREADS:-$TORCH_THREADS}"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/axle_bench.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

echo "machine: $CORES cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "workload: $CONFIG GPT-2, batch $BATCH x seq $SEQ, $STEPS steps, first $SKIP not timed, precision $PRECISION"

# One run of each side; both print "" when they cannot run (the reason goes to stderr once).
axle_ok=1
if [[ ! -x "$AXLE" ]]; then
  echo "axle: $AXLE is not an executable (build it, or set AXLE=path/to/axle); skipped"; axle_ok=0
elif ! grep -qE "^ +train( |$)" <<<"$("$AXLE" --help 2>/dev/null)"; then
  echo "axle: $AXLE has no 'train' subcommand (an old or partial build; rebuild it, or set AXLE=path/to/axle); skipped"; axle_ok=0
fi
run_axle() {  # [PRECISION] -> "tokens/s compile_s"
  [[ "$axle_ok" == 1 ]] || return 0
  if "$AXLE" train --config "$CONFIG" --samples 0 --no-progress --steps "$STEPS" --batch "$BATCH" --seq "$SEQ" --lr 3e-4 \
       --precision "${1:-$PRECISION}" \
       --weight-decay 0.1 --grad-clip 1.0 --dropout 0 --log-json "$TMP/axle.jsonl" \
       > "$TMP/axle.out" 2>&1; then
    # Tokens over time of the timed steps (not the mean of per-step rates, which overweights
    # fast steps). step_s is the wall time of a step; compile_s, when a step compiled, is in it.
    local out
    out="$("$PYTHON" - "$TMP/axle.jsonl" "$SKIP" "$BATCH" "$SEQ" <<'PY'
import json, sys
path, skip, b, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(l) for l in open(path) if l.strip()]
timed = [r for r in rows if "step" in r and int(r["step"]) >= skip]
secs = sum(float(r["step_s"]) for r in timed)
compile_s = sum(float(r.get("compile_s", 0)) for r in rows if "step" in r and int(r["step"]) < skip)
print(f"{b * t * len(timed) / secs:.1f} {compile_s:.2f}" if timed and secs > 0 else "")
PY
)"
    [[ -n "$out" ]] || echo "axle: no timed steps in its log ($TMP/axle.jsonl)" >&2
    echo "$out"
  else
    { echo "axle: '$AXLE train' failed:"; tail -5 "$TMP/axle.out"; } >&2
  fi
}

torch_ok=1
if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  echo "torch: '$PYTHON -c \"import torch\"' fails; skipped"; torch_ok=0
fi
run_torch() {  # [ENV=VALUE...] -> "tokens/s"
  [[ "$torch_ok" == 1 ]] || return 0
  if "${TORCH_ENV[@]}" "$@" "$PYTHON" "$ROOT/bench/torch_gpt2_train.py" --config "$CONFIG" \
       --steps "$STEPS" --skip "$SKIP" --batch "$BATCH" --seq "$SEQ" --threads "$TORCH_THREADS" "${TORCH_PRECISION[@]}" \
       > "$TMP/torch.jsonl" 2> "$TMP/torch.err"; then
    "$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print("%.1f" % s["summary"]["tokens_per_s"])' "$TMP/torch.jsonl"
  else
    { echo "torch: the benchmark failed:"; tail -5 "$TMP/torch.err"; } >&2
  fi
}

# Note [Two vCPUs, near or apart] (bench/README.md, "Session 26"): a cache line's round trip
# between the two cores, measured before and after each round (bench/core_round_trip.c). A VM's
# vCPUs may sit on one core complex (50-75 ns on the Zen 4 host of session 26) or on two (350-400
# ns), for minutes at a time; Axle's two threads share every kernel's data and pay for the second,
# PyTorch's best setting (often one thread) hardly does.
round_trip=""
if [[ "$CORES" -ge 2 ]] && cc -O2 -pthread "$ROOT/bench/core_round_trip.c" -o "$TMP/round_trip" 2>/dev/null; then
  round_trip="$TMP/round_trip"
fi
probe_cores() { [[ -n "$round_trip" ]] && timeout 10 "$round_trip" 2>/dev/null; }
NEAR_NS="${NEAR_NS:-200}"  # both probes of a round under this: the vCPUs were near

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'; }

# ROUNDS > 1 alternates the two sides (axle, pytorch, axle, ...): this VM's speed drifts by
# 10-40% over minutes, and one run of each, minutes apart, can read a ratio that far off. The
# table then shows each side's median and the median of the per-round ratios.
# PyTorch with MKL as its BLAS (Debian's torch calls sgemm_ through libblas.so.3; a preloaded
# libmkl_rt takes those calls, with MKL's OpenMP layer on torch's libgomp) is a second setting
# of it: Axle uses MKL when it is installed on an Intel CPU, so PyTorch gets it too, and each
# round compares Axle with the faster of the two (on AMD neither uses MKL: it ran PyTorch at a
# third of its OpenBLAS speed there). TORCH_MKL=none leaves it out.
TORCH_MKL="${TORCH_MKL:-auto}"
# One thread is a third setting: on an AMD EPYC (Zen 4) PyTorch trained GPT-2 small faster on one
# thread than on two (23.7K / 26.3K against 17.9K / 24.0K tokens/s, alternated), so each round
# also runs it on one thread and compares the fastest of its settings.
TORCH_ONE_THREAD="${TORCH_ONE_THREAD:-auto}"
faster() { [[ -z "$2" ]] || awk -v m="$1" -v o="$2" 'BEGIN{exit !(m > o)}'; }  # tokens/s $1 beats $2 (or no $2)
axle_all="" torch_all="" torch_ob_all="" torch_mkl_all="" torch_1t_all="" ratio_all="" axle_compile=""
axle_f32_all="" speedup_all=""
near_ratios="" apart_ratios=""
for ((round = 1; round <= ROUNDS; ++round)); do
  rt0="$(probe_cores)"
  a="$(run_axle)"
  a32=""
  if [[ "$PRECISION" != fp32 ]]; then  # Axle's own f32 in the same round: the bf16 speedup
    cp "$TMP/axle.out" "$TMP/axle.mixed.out"
    a32="$(run_axle fp32)"
    cp "$TMP/axle.mixed.out" "$TMP/axle.out"
    [[ -n "$a32" && -n "$a" ]] && axle_f32_all+=" ${a32%% *}" && speedup_all+=" $(awk -v a="${a%% *}" -v f="${a32%% *}" 'BEGIN{printf "%.2f", a/f}')"
  fi
  if [[ "$TORCH_MKL" == auto ]]; then  # the MKL Axle loaded (its header: "blas: mkl, MKL V (sequential), PATH")
    TORCH_MKL="$(sed -n 's/^blas: mkl, .*, \(\/.*\)$/\1/p' "$TMP/axle.out" 2>/dev/null | head -1)"
    TORCH_MKL="${TORCH_MKL:-none}"
  fi
  t="$(run_torch)"
  [[ -n "$t" ]] && torch_ob_all+=" $t"
  tm=""
  if [[ "$TORCH_MKL" != none ]]; then
    tm="$(run_torch LD_PRELOAD="$TORCH_MKL" MKL_THREADING_LAYER=GNU)"
    [[ -n "$tm" ]] && torch_mkl_all+=" $tm"
    [[ -n "$tm" ]] && faster "$tm" "$t" && t="$tm"
  fi
  t1=""
  if [[ "$TORCH_ONE_THREAD" != none ]] && ((TORCH_THREADS > 1)); then
    t1="$(TORCH_THREADS=1 run_torch)"
    [[ -n "$t1" ]] && torch_1t_all+=" $t1"
    [[ -n "$t1" ]] && faster "$t1" "$t" && t="$t1"
  fi
  [[ -n "$a" ]] && axle_all+=" ${a%% *}" && axle_compile="${axle_compile:-${a##* }}"
  [[ -n "$t" ]] && torch_all+=" $t"
  r=""
  [[ -n "$a" && -n "$t" ]] && r="$(awk -v a="${a%% *}" -v t="$t" 'BEGIN{printf "%.2f", a/t}')" && ratio_all+=" $r"
  settings="${tm:+, mkl $tm}${t1:+, 1 thr $t1}"
  rt1="$(probe_cores)" cores=""
  if [[ -n "$rt0" && -n "$rt1" ]]; then
    if ((rt0 < NEAR_NS && rt1 < NEAR_NS)); then cores="near"; [[ -n "$r" ]] && near_ratios+=" $r"
    elif ((rt0 >= NEAR_NS && rt1 >= NEAR_NS)); then cores="apart"; [[ -n "$r" ]] && apart_ratios+=" $r"
    else cores="moved"; fi
    cores="; cores $cores, $rt0 / $rt1 ns"
  fi
  ((ROUNDS > 1)) && echo "round $round: axle ${a%% *} tokens/s${a32:+ (fp32 ${a32%% *})}, pytorch $t tokens/s${settings:+ (openblas ${torch_ob_all##* }$settings)}${r:+, ${r}x}$cores"
done
axle_tps=""
[[ -n "$axle_all" ]] && axle_tps="$(median <<<"$axle_all") $axle_compile"
torch_tps="$(median <<<"$torch_all")"
ratio="$(median <<<"$ratio_all")"
axle_blas="$(sed -n 's/^blas: //p' "$TMP/axle.out" 2>/dev/null | head -1)"
axle_malloc="$(sed -n 's/^malloc: //p' "$TMP/axle.out" 2>/dev/null | head -1)"

jax_tps=""
if [[ "$JAX_PYTHON" == skip ]]; then
  echo "jax: left out with PRECISION=$PRECISION (bench/jax_gpt2_train.py trains in f32)"
elif [[ "$JAX_PYTHON" == none ]]; then
  echo "jax: no python with jax found (pip install jax, or set JAX_PYTHON); skipped"
elif ! "$JAX_PYTHON" -c "import jax" >/dev/null 2>&1; then
  echo "jax: '$JAX_PYTHON -c \"import jax\"' fails; skipped"
else
  # --threads below the core count sets XLA_FLAGS inside the script (see bench/README.md).
  if JAX_PLATFORMS=cpu "$JAX_PYTHON" "$ROOT/bench/jax_gpt2_train.py" --config "$CONFIG" \
       --steps "$STEPS" --skip "$SKIP" --batch "$BATCH" --seq "$SEQ" --threads "$JAX_THREADS" > "$TMP/jax.jsonl" 2> "$TMP/jax.err"; then
    jax_tps="$("$JAX_PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print("%.1f" % s["summary"]["tokens_per_s"])' "$TMP/jax.jsonl")"
  else
    echo "jax: the benchmark failed:"; tail -5 "$TMP/jax.err"
  fi
fi

# The roofline: sgemm GFLOP/s of this machine's BLAS in this run (numpy's f32 matmul, 2048^3,
# best of 10: this VM's neighbours make single runs read up to 40% low), and each trainer's
# model FLOP/s = 6 x parameters x tokens/s as a share of it.
probe_sgemm() {  # [ENV=VALUE...] -> GFLOP/s
  env "$@" "$PYTHON" - <<'PY' 2>/dev/null
import time
import numpy as np
a = np.random.rand(2048, 2048).astype(np.float32)
b = np.random.rand(2048, 2048).astype(np.float32)
a @ b
best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(10))
print(f"{2 * 2048 ** 3 / best / 1e9:.1f}")
PY
}
sgemm="$(probe_sgemm)"
# With MKL in use, the same probe and the GEMM floor through MKL too (for reference: the
# roofline stays OpenBLAS's, as the issue defines it).
MKL_ENV=()
[[ "$TORCH_MKL" != none ]] && MKL_ENV=(LD_PRELOAD="$TORCH_MKL" MKL_THREADING_LAYER=GNU OMP_WAIT_POLICY=PASSIVE)
sgemm_mkl=""
((${#MKL_ENV[@]})) && sgemm_mkl="$(probe_sgemm "${MKL_ENV[@]}")"
params="$(sed -n 's/.*(\([0-9.]*\)M parameters).*/\1/p' "$TMP/axle.out" 2>/dev/null | head -1)"
# The GEMM floor (bench/gemm_bound.py): this step's matrix products alone, warm, through
# OpenBLAS (and MKL); no trainer using that BLAS beats it even if everything else were free.
floor_tps="" floor_mkl_tps=""
floor() {  # [ENV=VALUE...] -> tokens/s
  env "$@" "$PYTHON" "$ROOT/bench/gemm_bound.py" --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" 2>/dev/null |
    sed -n 's/.*at most \([0-9.]*\) tokens\/s.*/\1/p'
}
case "$CONFIG" in
  124m|small)
    floor_tps="$(floor)"
    ((${#MKL_ENV[@]})) && floor_mkl_tps="$(floor "${MKL_ENV[@]}")" ;;
esac
roof() {  # tokens/s -> "NN%" of the sgemm roofline
  [[ -n "$1" && -n "$sgemm" && -n "$params" ]] || return 0
  awk -v tps="$1" -v p="$params" -v g="$sgemm" 'BEGIN{printf "%.0f%% of sgemm", 100 * 6 * p * 1e6 * tps / (g * 1e9)}'
}

echo
kernels="$(sed -n 's/.*, \([A-Za-z0-9]*\) kernels.*/\1/p' <<<"$axle_blas")"  # the core every side ran
through="OpenBLAS"
[[ -n "$kernels" ]] && through="OpenBLAS's $kernels kernels"
[[ -n "$sgemm" ]] && echo "sgemm roofline: $sgemm GFLOP/s (numpy f32 2048^3 through $through, this run); model: ${params:-?}M parameters"
[[ -n "$sgemm_mkl" ]] && echo "  the same probe through MKL: $sgemm_mkl GFLOP/s"
printf '%-26s %14s\n' "" "tokens/s"
printf '%-26s %14s   %s\n' "axle train" "${axle_tps%% *}" "$(roof "${axle_tps%% *}")"
[[ -n "$axle_tps" ]] && printf '%-26s %14s\n' "  (compile, s)" "${axle_tps##* }"
if [[ -n "$speedup_all" ]]; then
  printf '%-26s %14s\n' "  (axle fp32)" "$(median <<<"$axle_f32_all")"
  printf '%-26s %14s%s\n' "  ($PRECISION / fp32)" "$(awk -v r="$(median <<<"$speedup_all")" 'BEGIN{printf "%.2fx", r}')" \
    "$( ((ROUNDS > 1)) && echo "   median of $ROUNDS rounds:$speedup_all")"
fi
[[ -n "$axle_blas" ]] && printf '%-26s %s\n' "  (blas)" "$axle_blas"
[[ -n "$axle_malloc" ]] && printf '%-26s %s\n' "  (malloc)" "$axle_malloc"
case "$PRECISION" in
  bf16-mixed) torch_label="pytorch eager (autocast bf16)" ;;
  bf16) torch_label="pytorch eager (bf16 weights${TORCH_BF16_AUTOCAST[*]:+, autocast})" ;;
  *) torch_label="pytorch eager" ;;
esac
printf '%-26s %14s   %s\n' "$torch_label" "$torch_tps" "$(roof "$torch_tps")"
if [[ -n "$torch_mkl_all" || -n "$torch_1t_all" ]]; then
  printf '%-26s %14s\n' "  (openblas, $TORCH_THREADS thr)" "$(median <<<"$torch_ob_all")"
  [[ -n "$torch_mkl_all" ]] && printf '%-26s %14s\n' "  (mkl preloaded)" "$(median <<<"$torch_mkl_all")"
  [[ -n "$torch_1t_all" ]] && printf '%-26s %14s\n' "  (openblas, 1 thr)" "$(median <<<"$torch_1t_all")"
  printf '%-26s %14s   %s\n' "" "" "the fastest setting in each round is compared"
fi
if [[ -n "$ratio" ]]; then
  printf '%-26s %14s%s\n' "axle / pytorch" "$(awk -v r="$ratio" 'BEGIN{printf "%.2fx", r}')" \
    "$( ((ROUNDS > 1)) && echo "   median of $ROUNDS rounds:$ratio_all")"
  # The same, split by where the two vCPUs were (Note [Two vCPUs, near or apart] above).
  for side in near apart; do
    rs="$([[ $side == near ]] && echo "$near_ratios" || echo "$apart_ratios")"
    [[ -n "$rs" ]] && printf '%-26s %14s   %s\n' "  (cores $side)" "$(awk -v r="$(median <<<"$rs")" 'BEGIN{printf "%.2fx", r}')" \
      "median of the $(wc -w <<<"$rs") rounds whose probes both read $([[ $side == near ]] && echo "<" || echo ">=") $NEAR_NS ns:$rs"
  done
fi
[[ "$JAX_PYTHON" != none && "$JAX_PYTHON" != skip ]] && printf '%-26s %14s   %s\n' "jax jit ($JAX_THREADS thr)" "$jax_tps" "$(roof "$jax_tps")"
if [[ -n "$axle_tps" && -n "$jax_tps" ]]; then
  printf '%-26s %14s\n' "axle / jax" "$(awk -v a="${axle_tps%% *}" -v j="$jax_tps" 'BEGIN{printf "%.2fx", a/j}')"
fi
if [[ -n "$floor_tps" ]]; then
  printf '%-26s %14s   %s\n' "gemm floor" "$floor_tps" "the step's products alone, warm (bench/gemm_bound.py)"
  [[ -n "$axle_tps" ]] && printf '%-26s %14s\n' "axle / gemm floor" "$(awk -v a="${axle_tps%% *}" -v f="$floor_tps" 'BEGIN{printf "%.2f", a/f}')"
  [[ -n "$torch_tps" ]] && printf '%-26s %14s\n' "pytorch / gemm floor" "$(awk -v t="$torch_tps" -v f="$floor_tps" 'BEGIN{printf "%.2f", t/f}')"
fi
if [[ -n "$floor_mkl_tps" ]]; then
  printf '%-26s %14s   %s\n' "gemm floor (mkl)" "$floor_mkl_tps" "the same products through MKL"
  [[ -n "$axle_tps" ]] && printf '%-26s %14s\n' "axle / gemm floor (mkl)" "$(awk -v a="${axle_tps%% *}" -v f="$floor_mkl_tps" 'BEGIN{printf "%.2f", a/f}')"
fi
[[ -n "$axle_tps" || -n "$torch_tps" || -n "$jax_tps" ]]
