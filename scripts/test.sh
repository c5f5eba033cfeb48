#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test.
#   scripts/test.sh             RelWithDebInfo build in build/
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# CI builds without debug info (a third less compile time on 2 cores); local builds keep it.
ci_flags=()
if [ "${CI:-}" = "true" ]; then ci_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG"); fi
if [ "${1:-}" = "--sanitize" ]; then
  export AXLE_BUILD_DIR=build-asan
  [ "${CI:-}" = "true" ] && ci_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -DNDEBUG")
  scripts/build.sh -DAXLE_SANITIZE=ON "${ci_flags[@]}"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
else
  export AXLE_BUILD_DIR=build
  scripts/build.sh ${ci_flags[@]+"${ci_flags[@]}"}
fi
ctest --test-dir "$AXLE_BUILD_DIR" --output-on-failure -j 2
