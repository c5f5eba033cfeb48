#!/usr/bin/env bash
# Installs the Debian packages Axle's build and tests need, and nothing when they are present.
# Idempotent: safe to run on every build.
#   scripts/setup.sh               the build and test dependencies
#   scripts/setup.sh --with-torch  also Debian's python3-torch (the PyTorch conformance check and
#                                  bench/; /usr/bin/python3 sees it; its torchrun) and Open MPI's
#                                  mpirun (scripts/launchers_check.sh) and, from PyPI, transformers
#                                  for /usr/bin/python3 (scripts/export_check.sh) and sentencepiece
#                                  (scripts/tokenizer_check.sh); a failure to install them is only
#                                  reported
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
  libgloo-dev                                    # collectives between processes (src/dist)
  libpcre2-dev libutf8proc-dev libsentencepiece-dev  # tokenizers (src/text): regexes, NFC, tokenizer.model
  libdnnl2                                       # oneDNN's sgemm for its small products (optional, dlopen'ed)
  coinor-libcbc3                                 # CBC, auto-sharding's ILP solver (optional, dlopen'ed)
  libtcmalloc-minimal4                           # the axle tool's allocator (optional)
  python3-numpy                                  # golden-value scripts and the example check
)
with_torch=0
[ "${1:-}" = "--with-torch" ] && with_torch=1 && packages+=(python3-torch python3-pip openmpi-bin python3-jinja2)

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

# transformers for Debian's /usr/bin/python3 (the one that sees python3-torch), from PyPI: its
# dependencies go to /usr/local (hence --break-system-packages); NumPy and torch stay Debian's.
# transformers 5 wants torch >= 2.6 and otherwise imports with torch disabled; for Debian 12's
# torch 1.13, 4.46 is the line that still takes it (checked: 4.46.3).
if [ "$with_torch" = 1 ] &&
   ! /usr/bin/python3 -c "import transformers, sys; sys.exit(not transformers.is_torch_available())" 2>/dev/null; then
  spec="transformers"
  /usr/bin/python3 -c "import sys, torch; sys.exit(int(torch.__version__.split('.')[0]) >= 2)" 2>/dev/null &&
    spec="transformers<4.47"
  echo "setup: installing $spec for /usr/bin/python3 (python3 -m pip install)"
  /usr/bin/python3 -m pip install --quiet --break-system-packages "$spec" ||
    echo "setup: transformers could not be installed; scripts/export_check.sh will be skipped"
fi
# sentencepiece for /usr/bin/python3: the reference of scripts/tokenizer_check.sh (with the
# `tokenizers` that transformers brings).
if [ "$with_torch" = 1 ] && ! /usr/bin/python3 -c "import sentencepiece" 2>/dev/null; then
  echo "setup: installing sentencepiece for /usr/bin/python3 (python3 -m pip install)"
  /usr/bin/python3 -m pip install --quiet --break-system-packages sentencepiece ||
    echo "setup: sentencepiece could not be installed; scripts/tokenizer_check.sh will be skipped"
fi
