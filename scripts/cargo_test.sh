#!/usr/bin/env bash
# scripts/cargo_test.sh [KERNEL]: the Rust tests of cutile_kernels (validation, and every kernel
# lowered to Tile IR for sm_90), or only KERNEL's (`make KERNEL=<k> rust-test`: the tests under
# kernels/<k>/, whose names start with `<k>::`, and the shared modules' its ffi.rs uses, e.g. `gated::`; or
# a shared module's alone: KERNEL=gated). When the Tile IR toolchain is in the cache (make
# setup), the same tests also assemble each kernel to an sm_90 cubin with tileiras, on the CPU.
# Needs env/env.sh sourced.
set -euo pipefail
kernel=${1:-}
if [ -n "$kernel" ] && [ ! -f "kernels/$kernel/ffi.rs" ] && [ ! -f "cutile_kernels/src/$kernel.rs" ]; then
    echo "cargo test: no kernels/$kernel/ffi.rs: KERNEL must be one of: $(cd kernels && ls -d */ | tr -d / | tr '\n' ' ')(or a shared module of cutile_kernels/src: gated, gated_backward, norm_backward, device_util, ffi_util)" >&2
    exit 2
fi
unset CUDA_HOME  # cuda-bindings' build watches it: one value for every cargo call keeps builds incremental
if [ -x "$TILEKIT_TILEIR/bin/tileiras" ]; then
    # No CUDA_HOME: tileiras finds its libnvvm relative to itself in this tree, and cargo would
    # rebuild cuda-bindings whenever CUDA_HOME differs from the build's (it watches that variable).
    export CUTILE_TILEIRAS_PATH="$TILEKIT_TILEIR/bin/tileiras"
    echo "cargo test: kernels are lowered and assembled for sm_90 with $CUTILE_TILEIRAS_PATH"
else
    echo "cargo test: no Tile IR toolchain at $TILEKIT_TILEIR (make setup installs it): kernels are lowered, not assembled"
fi
filter=()
[ -n "$kernel" ] && filter=(-- "$kernel::")
# A family member (its ffi.rs uses a shared module of cutile_kernels/src: crate::gated,
# crate::norm_backward, ...) also runs that module's tests: they test its plan and entries.
if [ -n "$kernel" ] && [ -f "kernels/$kernel/ffi.rs" ]; then
    for module in $(grep -oE "crate::[a-z_]+" "kernels/$kernel/ffi.rs" | sort -u | cut -d: -f3); do
        [ -f "cutile_kernels/src/$module.rs" ] && [[ ! $module =~ _util$ ]] && filter+=("$module::")
    done
fi
cargo test --release --manifest-path cutile_kernels/Cargo.toml "${filter[@]}" 2>&1 | grep -vE '^\s+(Compiling|Running|Doc-tests)|^running 0 tests|^$|0 passed; 0 failed'
