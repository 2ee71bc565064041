# Source me: `. env/env.sh`. Exports the paths every tilekit stage uses; installs nothing.
#
# Everything heavy lives in a cache OUTSIDE the repository, keyed by the files that define it,
# so a fresh clone (CI) reuses what an earlier run installed or built:
#   $TILEKIT_CACHE/venv-<hash of env/requirements.txt + python version>   Python deps (torch, cffi, ...)
#   $TILEKIT_CACHE/cuda-headers-<hash of env/cuda-headers.txt>            CUDA >= 13.2 include/ for bindgen
#   $TILEKIT_CACHE/cargo-target-<hash of cutile_kernels/Cargo.lock>       cargo's target dir
#   $TILEKIT_CACHE/tileir-toolchain-<hash of env/tileir-toolchain.txt>    tileiras, ptxas, libnvvm
# Override any of them by exporting the variable before sourcing.

_tk_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
_tk_hash() { cat "$@" 2>/dev/null | sha256sum | cut -c1-12; }

export TILEKIT_ROOT="$_tk_root"
export TILEKIT_CACHE="${TILEKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tilekit}"

# Python: the cached venv when set-up made one, else the python3 on PATH (a GPU host or a bundle,
# where torch comes with the image).
_tk_pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
export TILEKIT_VENV="${TILEKIT_VENV:-$TILEKIT_CACHE/venv-$( (cat "$_tk_root/env/requirements.txt"; echo "$_tk_pyver") | sha256sum | cut -c1-12)}"
if [ -x "$TILEKIT_VENV/bin/python" ]; then
    export TILEKIT_PYTHON="$TILEKIT_VENV/bin/python"
    case ":$PATH:" in *":$TILEKIT_VENV/bin:"*) ;; *) export PATH="$TILEKIT_VENV/bin:$PATH" ;; esac
else
    export TILEKIT_PYTHON="${TILEKIT_PYTHON:-python3}"
fi

# Build: CUDA headers for the cutile crates' bindgen, libclang, cargo's target dir.
export TILEKIT_CUDA_HEADERS="${TILEKIT_CUDA_HEADERS:-$TILEKIT_CACHE/cuda-headers-$(_tk_hash "$_tk_root/env/cuda-headers.txt")}"
if [ -z "${CUDA_TOOLKIT_PATH:-}" ] && [ -f "$TILEKIT_CUDA_HEADERS/nvidia/cu13/include/cuda.h" ]; then
    export CUDA_TOOLKIT_PATH="$TILEKIT_CUDA_HEADERS/nvidia/cu13"
fi
if [ -z "${LIBCLANG_PATH:-}" ]; then
    for _d in /usr/lib/llvm-*/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib "$TILEKIT_VENV"/lib/python3*/site-packages/clang/native; do
        if ls "$_d"/libclang.so* "$_d"/libclang-[0-9]*.so* >/dev/null 2>&1; then export LIBCLANG_PATH="$_d"; break; fi
    done
fi
# The Tile IR toolchain (tileiras + its ptxas + libnvvm): make check assembles every kernel for
# sm_90 with it on the CPU; make bundle packs it for the GPU host.
export TILEKIT_TILEIR="${TILEKIT_TILEIR:-$TILEKIT_CACHE/tileir-toolchain-$(_tk_hash "$_tk_root/env/tileir-toolchain.txt")}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$TILEKIT_CACHE/cargo-target-$(_tk_hash "$_tk_root/cutile_kernels/Cargo.lock")}"

# The stamp make setup leaves when all of the above is in place for these requirement files: make
# runs setup first when it is missing (the Makefile's ENV_READY).
export TILEKIT_SETUP_STAMP="${TILEKIT_SETUP_STAMP:-$TILEKIT_CACHE/setup-$( (cat "$_tk_root/env/requirements.txt" "$_tk_root/env/cuda-headers.txt" "$_tk_root/env/tileir-toolchain.txt"; echo "$_tk_pyver") | sha256sum | cut -c1-12).done}"

# The built library: make build copies it here; tilekit.runtime.ffi loads $TILEKIT_LIB.
export TILEKIT_LIB="${TILEKIT_LIB:-$_tk_root/build/libcutile_kernels.so}"
export PYTHONPATH="$_tk_root/tools:$_tk_root${PYTHONPATH:+:$PYTHONPATH}"
unset _tk_root _tk_pyver _d
