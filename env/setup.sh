#!/usr/bin/env bash
# make setup: install what building and testing tilekit needs, into the cache of env/env.sh.
# Idempotent: each part is skipped when its cache entry is complete, so re-running costs seconds.
#
#   1. Python venv with env/requirements.txt (torch, cffi, pytest, ...)
#   2. CUDA >= 13.2 headers (cuda.h, curand.h) from PyPI wheels, for the cutile crates' bindgen
#   3. libclang for bindgen (Debian's libclang-dev as root, else the PyPI `libclang` wheel)
#   4. the Tile IR toolchain of env/tileir-toolchain.txt (tileiras, ptxas, libnvvm)
#   5. a check that cargo is there (the Rust toolchain itself is not installed here)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
. "$here/env/env.sh"
say() { printf 'setup: %s\n' "$*"; }

# 1. Python venv. A stamp marks a finished install: an interrupted one is redone, never reused.
if [ -f "$TILEKIT_VENV/.tilekit-complete" ]; then
    say "python venv ok: $TILEKIT_VENV"
else
    say "creating python venv $TILEKIT_VENV (torch is large: minutes on a fresh machine)"
    rm -rf "$TILEKIT_VENV"
    python3 -m venv "$TILEKIT_VENV"
    "$TILEKIT_VENV/bin/python" -m pip install -q --upgrade pip
    "$TILEKIT_VENV/bin/python" -m pip install -q -r "$here/env/requirements.txt"
    touch "$TILEKIT_VENV/.tilekit-complete"
    say "python venv ready"
fi

# 2. CUDA headers: one pip call with --no-deps into a scratch folder, then moved into place.
if [ -f "$TILEKIT_CUDA_HEADERS/nvidia/cu13/include/cuda.h" ]; then
    say "cuda headers ok: $TILEKIT_CUDA_HEADERS/nvidia/cu13/include"
else
    say "installing CUDA headers into $TILEKIT_CUDA_HEADERS"
    rm -rf "$TILEKIT_CUDA_HEADERS.tmp"
    "$TILEKIT_VENV/bin/python" -m pip install -q --no-deps --target "$TILEKIT_CUDA_HEADERS.tmp" \
        -r "$here/env/cuda-headers.txt"
    rm -rf "$TILEKIT_CUDA_HEADERS"
    mv "$TILEKIT_CUDA_HEADERS.tmp" "$TILEKIT_CUDA_HEADERS"
fi

# 3. libclang (bindgen loads it at build time) with clang's builtin headers (stddef.h).
. "$here/env/env.sh"
if [ -n "${LIBCLANG_PATH:-}" ]; then
    say "libclang ok: $LIBCLANG_PATH"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing libclang-dev with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
else
    say "installing the libclang wheel into the venv (not root, or no apt-get)"
    "$TILEKIT_VENV/bin/python" -m pip install -q libclang
fi

# 4. the Tile IR toolchain (tileiras + ptxas + libnvvm of one release, ~220 MB): make check uses
#    it to assemble every kernel for sm_90 on the CPU; make bundle packs it for GPU hosts.
PATH="$TILEKIT_VENV/bin:$PATH" scripts/tileir_toolchain.sh "$TILEKIT_TILEIR"

# 5. cargo: needed by make build; rustup is the fix when it is missing.
if command -v cargo >/dev/null; then
    say "cargo ok: $(cargo --version)"
else
    say "cargo NOT found: install Rust >= 1.89 (https://rustup.rs), then re-run make setup" >&2
    exit 1
fi
mkdir -p "$(dirname "$TILEKIT_SETUP_STAMP")" && touch "$TILEKIT_SETUP_STAMP"  # make's sign that set-up is complete
say "done; 'make doctor' shows what was found, 'make check' runs the tests"
