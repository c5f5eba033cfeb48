#!/usr/bin/env bash
# Installs the Debian packages Axle's build and tests need, and nothing when they are present.
# Idempotent: safe to run on every build.
#   scripts/setup.sh               the build and test dependencies
#   scripts/setup.sh --with-torch  also Debian's python3-torch (the PyTorch conformance check and
#                                  bench/; /usr/bin/python3 sees it)
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev  # toolchain (clang: the libFuzzer target)
  libgtest-dev                                   # tests
  libfmt-dev nlohmann-json3-dev libxxhash-dev libcli11-dev
  libopenblas-dev                                # BLAS for dot_general on the CPU
  python3-numpy                                  # golden-value scripts and the example check
)
[ "${1:-}" = "--with-torch" ] && packages+=(python3-torch)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
