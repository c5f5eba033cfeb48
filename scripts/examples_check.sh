#!/usr/bin/env bash
# Installs Axle (cmake --install) into a temporary prefix, builds examples/cpp against it with
# find_package(Axle) as a user's project would, and runs both programs for a few steps: the
# README's training loop and a Llama fine-tuning loop (on tests/nn/goldens/llama_llama).
#
#   scripts/examples_check.sh            # uses build/ (built by scripts/build.sh)
#   BUILD=build-x STEPS=5 scripts/examples_check.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD:-$ROOT/build}"
STEPS="${STEPS:-10}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/axle_examples.XXXXXX")"
[[ "${KEEP:-0}" == 1 ]] && echo "examples_check: keeping $TMP" || trap 'rm -rf "$TMP"' EXIT

cmake --install "$BUILD" --prefix "$TMP/prefix" > "$TMP/install.log"
cmake -S "$ROOT/examples/cpp" -B "$TMP/build" -G Ninja -DCMAKE_PREFIX_PATH="$TMP/prefix" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$TMP/configure.log" || { cat "$TMP/configure.log"; exit 1; }
cmake --build "$TMP/build" > "$TMP/build.log" || { cat "$TMP/build.log"; exit 1; }
"$TMP/build/train_loop" "$STEPS" | grep -E "^step" | tail -2
"$TMP/build/llama_finetune" "$ROOT/tests/nn/goldens/llama_llama" "$STEPS" | grep -vE "^step [1-9]"
echo "examples_check: OK, examples/cpp built against the installed package ($TMP/prefix) and ran $STEPS steps each"
