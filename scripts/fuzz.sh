#!/usr/bin/env bash
# Builds the .axir parser fuzzer (clang, libFuzzer, ASan + UBSan) and runs it.
#
#   scripts/fuzz.sh [SECONDS]     (default 60)
#
# Fuzzes a scratch copy of fuzz/corpus, so the checked-in seeds stay small. Crashing inputs are
# written to build-fuzz/artifacts/. Exits non-zero on any crash, leak, timeout or OOM.
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${AXLE_FUZZ_BUILD_DIR:-$root/build-fuzz}"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DAXLE_FUZZ=ON -DAXLE_SANITIZE=ON -DAXLE_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" axir_parser_fuzzer

corpus="$(mktemp -d "${TMPDIR:-/tmp}/axir-corpus.XXXXXX")"
trap 'rm -rf "$corpus"' EXIT
cp "$root"/fuzz/corpus/*.axir "$corpus"/
mkdir -p "$build/artifacts"

# AXLE_FUZZ_JOBS=N runs N fuzzing processes (libFuzzer's -fork); the default is one process.
jobs="${AXLE_FUZZ_JOBS:-1}"
parallel=()
if [ "$jobs" -gt 1 ]; then parallel=(-fork="$jobs" -ignore_crashes=0 -ignore_timeouts=0 -ignore_ooms=0); fi

echo "fuzzing for ${seconds}s with ${jobs} job(s); crashes go to $build/artifacts/"
"$build/axir_parser_fuzzer" "$corpus" ${parallel[@]+"${parallel[@]}"} \
  -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1
