#!/usr/bin/env bash
# scripts/build.sh LOG: cargo build --release of cutile_kernels (cargo rebuilds only what changed),
# output tee'd to LOG, then the .so copied to build/libcutile_kernels.so when it differs.
# Needs env/env.sh sourced (CUDA_TOOLKIT_PATH, LIBCLANG_PATH, CARGO_TARGET_DIR).
set -euo pipefail
unset CUDA_HOME  # cuda-bindings' build watches it: one value for every cargo call keeps builds incremental
log=${1:?usage: scripts/build.sh LOG}
mkdir -p "$(dirname "$log")" build
if [ "${TILEKIT_PREBUILT:-0}" = 1 ]; then
    # A GPU host running from `make bundle`: no cargo there; the library was built elsewhere.
    if [ -f "${TILEKIT_LIB:-}" ]; then
        echo "build: using the prebuilt $TILEKIT_LIB (TILEKIT_PREBUILT=1: cargo is not run)" | tee "$log"
        exit 0
    fi
    echo "build: TILEKIT_PREBUILT=1 but TILEKIT_LIB='${TILEKIT_LIB:-}' is not a file; source scripts/gpu_host_env.sh DIR" | tee "$log" >&2
    exit 1
fi
if ! command -v cargo >/dev/null; then
    echo "build: cargo not found; install Rust >= 1.89 (https://rustup.rs) — or, on a GPU host, use the bundle (make bundle)" | tee "$log" >&2
    exit 1
fi
if [ -z "${CUDA_TOOLKIT_PATH:-}" ] || [ ! -f "$CUDA_TOOLKIT_PATH/include/cuda.h" ]; then
    echo "build: no CUDA >= 13.2 headers (CUDA_TOOLKIT_PATH='${CUDA_TOOLKIT_PATH:-}'); run make setup" | tee "$log" >&2
    exit 1
fi
echo "build: cargo build --release (CUDA_TOOLKIT_PATH=$CUDA_TOOLKIT_PATH, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" | tee "$log"
cargo build --release --manifest-path cutile_kernels/Cargo.toml 2>&1 | tee -a "$log"
so="$CARGO_TARGET_DIR/release/libcutile_kernels.so"
if ! cmp -s "$so" build/libcutile_kernels.so; then
    cp "$so" build/libcutile_kernels.so.tmp && mv build/libcutile_kernels.so.tmp build/libcutile_kernels.so
    echo "build: wrote build/libcutile_kernels.so" | tee -a "$log"
else
    echo "build: build/libcutile_kernels.so up to date" | tee -a "$log"
fi
echo "build: log in $log"
