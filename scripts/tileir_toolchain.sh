#!/usr/bin/env bash
# Lay out the Tile IR toolchain of one CUDA release as a single real directory tree, and pack it.
#
#   scripts/tileir_toolchain.sh DEST_DIR [--pack]
#       -> DEST_DIR/{bin/tileiras,bin/ptxas,nvvm/lib64/libnvvm.so,nvvm/libdevice/,include/cuda.h}
#          and, with --pack, DEST_DIR.tar.xz (xz -9: ~57 MiB, what `make bundle` carries)
#
# Why a real tree: tileiras finds ptxas beside itself and libnvvm through $CUDA_HOME/nvvm/lib64
# (or relative to its own resolved path), and fails with "failed to compile Tile IR program"
# (exit status 5) when either comes from another release. The GPU host's runner sets
# CUDA_HOME=CUDA_TOOLKIT_PATH=DEST_DIR. Versions come from env/tileir-toolchain.txt.
set -euo pipefail
dest=${1:?usage: scripts/tileir_toolchain.sh DEST_DIR [--pack]}
pack=${2:-}
here=$(cd "$(dirname "$0")/.." && pwd)
pins="$here/env/tileir-toolchain.txt"
pack_it() {
    [ "$pack" = --pack ] || return 0
    [ -f "$dest.tar.xz" ] && return 0
    echo "tileir toolchain: packing $dest.tar.xz (xz -9, a few minutes)"
    (cd "$(dirname "$dest")" && XZ_OPT=-9T2 tar -cJf "$(basename "$dest").tar.xz.tmp" "$(basename "$dest")" \
        && mv "$(basename "$dest").tar.xz.tmp" "$(basename "$dest").tar.xz")
}
if [ -x "$dest/bin/tileiras" ] && [ -f "$dest/.complete" ]; then
    echo "tileir toolchain ok: $dest"; pack_it; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
    -d "$tmp/whl" -r "$pins"
mkdir -p "$tmp/x"
for w in "$tmp"/whl/*.whl; do python3 -m zipfile -e "$w" "$tmp/x"; done
src="$tmp/x/nvidia/cu13"
rm -rf "$dest"; mkdir -p "$dest/bin" "$dest/nvvm/lib64" "$dest/nvvm/libdevice" "$dest/include"
install -m 755 "$src/bin/tileiras" "$src/bin/ptxas" "$dest/bin/"
install -m 755 "$src/lib/libnvvm.so.4" "$dest/nvvm/lib64/libnvvm.so.4"
ln -sf libnvvm.so.4 "$dest/nvvm/lib64/libnvvm.so"
install -m 644 "$src/nvvm/libdevice/libdevice.10.bc" "$dest/nvvm/libdevice/"
# cuda.h tells cutile which Tile IR bytecode version to emit (its CUDA_VERSION): take the one of the
# build headers (env/cuda-headers.txt, the same 13.4 release as this toolchain).
cuda_h="${CUDA_TOOLKIT_PATH:?source env/env.sh first}/include/cuda.h"
install -m 644 "$cuda_h" "$dest/include/cuda.h"
touch "$dest/.complete"
echo "tileir toolchain ready: $dest ($("$dest/bin/tileiras" --version | grep -o 'release [0-9.]*'))"
pack_it
