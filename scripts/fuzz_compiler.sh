#!/usr/bin/env bash
# The long, opt-in differential fuzzing run of the compiler (docs/compiler.md, "Differential
# fuzzing"): CompilerFuzzTest in codegen_tests over N random programs, compiled backend against
# the reference interpreter, exact and fast math. CI runs the same test over programs 0..999.
#
#   scripts/fuzz_compiler.sh [N] [FIRST]     N programs (default 20000) from index FIRST
#                                            (default 1000, just past CI's programs)
#
# Builds codegen_tests in build/ (or $AXLE_BUILD_DIR) if needed. AXLE_FUZZ_JOBS=J splits the range
# over J processes (default 1); AXLE_FUZZ_BATCH=B sets the programs per compile (default 50).
# A mismatch prints the program's index, seed and text; rerun one program with
#   AXLE_FUZZ_PROGRAMS=1 AXLE_FUZZ_SEED=<index> build/codegen_tests --gtest_filter='CompilerFuzzTest.*'
# Exits non-zero on any mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20000}"
first="${2:-1000}"
jobs="${AXLE_FUZZ_JOBS:-1}"
build_dir="${AXLE_BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build_dir" --target codegen_tests

start=$(date +%s)
per=$(( (n + jobs - 1) / jobs ))
pids=()
for (( j = 0; j < jobs; ++j )); do
  lo=$(( first + j * per ))
  count=$(( n - j * per < per ? n - j * per : per ))
  [ "$count" -gt 0 ] || break
  AXLE_FUZZ_PROGRAMS="$count" AXLE_FUZZ_SEED="$lo" \
    "$build_dir/codegen_tests" --gtest_filter='CompilerFuzzTest.*' --gtest_brief=1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
echo "fuzz_compiler: $n programs from $first in $(( $(date +%s) - start )) s: $([ $status = 0 ] && echo 'no mismatch' || echo 'MISMATCH (see above)')"
exit $status
