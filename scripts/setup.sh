#!/usr/bin/env bash
# Installs the Debian packages Axle's build and tests need, and nothing when they are present.
# Idempotent: safe to run on every build.
#   scripts/setup.sh               the build and test dependencies
#   scripts/setup.sh --with-torch  also Debian's python3-torch (the PyTorch conformance check and
#                                  bench/; /usr/bin/python3 sees it)
# It also installs Intel MKL from PyPI when pip can (`pip install --no-deps mkl`: a ~230 MB
# download, 685 MB installed): the BLAS dot_general prefers (Note [Which BLAS],
# src/backends/cpu/blas.cc; CMake finds it in the Python prefix).
# Without it everything works on OpenBLAS. AXLE_NO_MKL=1 skips it.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev  # toolchain (clang: the libFuzzer target)
  libgtest-dev                                   # tests
  libfmt-dev nlohmann-json3-dev libxxhash-dev libcli11-dev
  libopenblas-dev                                # BLAS for dot_general on the CPU
  libdnnl2                                       # oneDNN's sgemm for its small products (optional, dlopen'ed)
  libtcmalloc-minimal4                           # the axle tool's allocator (optional)
  python3-numpy                                  # golden-value scripts and the example check
)
[ "${1:-}" = "--with-torch" ] && packages+=(python3-torch)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

# MKL: only its sequential layer is used, so none of its pip dependencies (OpenMP, TBB) are needed.
if [ "${AXLE_NO_MKL:-0}" != 1 ] && command -v python3 >/dev/null; then
  prefix="$(python3 -c 'import sys; print(sys.prefix)')"
  if ! ls "$prefix"/lib/libmkl_rt.so.* >/dev/null 2>&1; then
    echo "setup: installing Intel MKL into $prefix/lib (python3 -m pip install --no-deps mkl)"
    python3 -m pip install --quiet --no-deps mkl ||
      echo "setup: MKL could not be installed; dot_general will use OpenBLAS"
  fi
fi
