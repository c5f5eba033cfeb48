#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test.
#   scripts/test.sh             RelWithDebInfo build in build/
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ "${1:-}" = "--sanitize" ]; then
  export AXLE_BUILD_DIR=build-asan
  scripts/build.sh -DAXLE_SANITIZE=ON
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
else
  export AXLE_BUILD_DIR=build
  scripts/build.sh
fi
ctest --test-dir "$AXLE_BUILD_DIR" --output-on-failure -j 2
