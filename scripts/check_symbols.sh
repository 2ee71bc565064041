#!/usr/bin/env bash
# scripts/check_symbols.sh LIB KERNEL: every function declared in kernels/KERNEL/op.py's CDEF must
# be exported by LIB as a text symbol (`nm -D` type T). Fails naming each missing symbol.
set -euo pipefail
lib=${1:?usage: scripts/check_symbols.sh LIB KERNEL}
kernel=${2:?usage: scripts/check_symbols.sh LIB KERNEL}
[ -f "$lib" ] || { echo "symbols: $lib not found; run make build" >&2; exit 1; }
declared=$("${TILEKIT_PYTHON:-python3}" -m tilekit abi --declared --kernel "$kernel")
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }')
missing=0
for sym in $declared tilekit_abi_json tilekit_last_error; do
    if grep -qx "$sym" <<<"$exported"; then
        echo "symbols: T $sym"
    else
        echo "symbols: MISSING $sym: declared in kernels/$kernel/op.py (or ffi_util.rs) but not exported by $lib;" \
             "check #[no_mangle] pub unsafe extern \"C\" fn $sym in kernels/$kernel/ffi.rs" >&2
        missing=1
    fi
done
exit $missing
