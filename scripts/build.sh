#!/usr/bin/env bash
# Configures and builds Axle into build/ (or $AXLE_BUILD_DIR). Extra arguments go to CMake,
# e.g. scripts/build.sh -DAXLE_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${AXLE_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build_dir"
