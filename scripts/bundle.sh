#!/usr/bin/env bash
# make bundle: one tarball to run test/baseline/perf/report on a GPU host with no Rust toolchain
# and no internet (docs/bundle.md). Needs env/env.sh sourced and a built library (make build).
#
#   dist/tilekit-bundle-<git short sha>[-dirty].tar   (plain tar: its big members are already xz)
#     tilekit-bundle/run.sh        the runner: ./run.sh [make args...]
#     tilekit-bundle/MANIFEST.txt  sha256 + size of every file, git sha, date, versions
#     tilekit-bundle/{Makefile,env,scripts,tools,tests,kernels,cutile_kernels,docs,...}
#     tilekit-bundle/bundle/{tileir-toolchain-*.tar.xz, libcutile_kernels.so.xz, whl/*.whl}
#
# Overrides (the kit's tests use them to bundle tiny fake pieces):
#   BUNDLE_OUT=dir               where the tar goes (default dist/)
#   BUNDLE_LIB=file              the library (default $TILEKIT_LIB, i.e. build/libcutile_kernels.so)
#   BUNDLE_TOOLCHAIN_TARXZ=file  the packed toolchain (default $TILEKIT_TILEIR.tar.xz, packed if absent)
#   BUNDLE_PY=3.12               the GPU host's Python, for the wheels of env/bundle-wheels.txt
#   BUNDLE_NO_DOWNLOAD=1 BUNDLE_WHEELS_DIR=dir   take the wheels from dir instead of pip download
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
: "${TILEKIT_CACHE:?source env/env.sh first}"
say() { printf 'bundle: %s\n' "$*"; }
die() { printf 'bundle: ERROR: %s\n' "$*" >&2; exit 1; }
size() { numfmt --to=iec-i --suffix=B --format=%.1f "$1"; }
bytes() { find "$@" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }

out=${BUNDLE_OUT:-$root/dist}
lib=${BUNDLE_LIB:-${TILEKIT_LIB:-$root/build/libcutile_kernels.so}}
py=${BUNDLE_PY:-3.12}
pins="$root/env/bundle-wheels.txt"
# The repository paths the GPU host needs (cutile_kernels/ is small: its Cargo.lock names the crate
# versions in reports, and the kit's ABI tests read ffi_util.rs).
paths=(Makefile pyproject.toml README.md env scripts tools tests kernels cutile_kernels docs)

# 1. Check the big pieces first, naming the target that makes each.
[ -f "$lib" ] || die "no library at $lib; run 'make build' first (or set BUNDLE_LIB=<file>)"
if [ -n "${BUNDLE_TOOLCHAIN_TARXZ:-}" ]; then
    toolchain=$BUNDLE_TOOLCHAIN_TARXZ
    [ -f "$toolchain" ] || die "BUNDLE_TOOLCHAIN_TARXZ=$toolchain is not a file"
else
    : "${TILEKIT_TILEIR:?source env/env.sh first}"
    toolchain="$TILEKIT_TILEIR.tar.xz"
    if [ ! -f "$toolchain" ]; then
        [ -x "$TILEKIT_TILEIR/bin/tileiras" ] && [ -f "$TILEKIT_TILEIR/.complete" ] \
            || die "no Tile IR toolchain at $TILEKIT_TILEIR; run 'make setup' first (it lays out tileiras, ptxas, libnvvm)"
        scripts/tileir_toolchain.sh "$TILEKIT_TILEIR" --pack
    fi
fi
case $(basename "$toolchain") in
    tileir-toolchain*.tar.xz) ;;
    *) die "$toolchain: the toolchain archive must be named tileir-toolchain*.tar.xz (scripts/gpu_host_env.sh looks for that)" ;;
esac
[ -f "$pins" ] || die "$pins is missing (the wheels the GPU host lacks, one pin a line)"

# 2. Name: git short sha, -dirty when tracked files changed or bundled files are untracked.
sha=$(git rev-parse --short HEAD)
full_sha=$(git rev-parse HEAD)
mapfile -d '' files < <(git ls-files -z --cached --others --exclude-standard -- "${paths[@]}")
dirty=
if ! git diff --quiet HEAD -- || [ -n "$(git ls-files --others --exclude-standard -- "${paths[@]}")" ]; then
    dirty=-dirty
fi
name="tilekit-bundle-$sha$dirty"
mkdir -p "$out"
stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
top="$stage/tilekit-bundle"
mkdir -p "$top/bundle/whl"
say "staging $name in $stage"

# 3. The sources: tracked files plus untracked, non-ignored ones (the library was built from the
#    working tree, so the Python side must come from it too). Deleted tracked files are skipped.
for f in "${files[@]}"; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done \
    | tar --null -T - -cf - | tar -xf - -C "$top"

# 4. The library, stripped (debug info is most of its size) and xz -9.
strip -o "$stage/lib.so" "$lib" || die "strip failed on $lib (is it an ELF shared library?)"
xz -9 -c "$stage/lib.so" > "$top/bundle/libcutile_kernels.so.xz"
rm -f "$stage/lib.so"

# 5. The toolchain archive, as packed (hard link when on the same file system).
ln -f "$toolchain" "$top/bundle/$(basename "$toolchain")" 2>/dev/null \
    || cp "$toolchain" "$top/bundle/$(basename "$toolchain")"

# 6. The wheels of env/bundle-wheels.txt for CPython $py on manylinux x86_64, cached per pin file.
if [ "${BUNDLE_NO_DOWNLOAD:-0}" = 1 ]; then
    whl_src=${BUNDLE_WHEELS_DIR:?BUNDLE_NO_DOWNLOAD=1 needs BUNDLE_WHEELS_DIR=<dir holding the .whl files>}
else
    whl_src="$TILEKIT_CACHE/bundle-wheels-$( (cat "$pins"; echo "$py") | sha256sum | cut -c1-12)"
    if [ ! -f "$whl_src/.complete" ]; then
        say "downloading the wheels of env/bundle-wheels.txt for cp${py/./} into $whl_src"
        rm -rf "$whl_src"
        "${TILEKIT_PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: \
            --python-version "$py" --implementation cp --platform manylinux_2_28_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$whl_src" -r "$pins" \
            || die "pip download failed (no internet?); or set BUNDLE_NO_DOWNLOAD=1 BUNDLE_WHEELS_DIR=<dir with the wheels>"
        touch "$whl_src/.complete"
    fi
fi
# Every pin must have its wheel (a stale or hand-made wheel folder fails here, not on the GPU host).
while read -r pin; do
    pin=${pin%%#*}; pin=${pin//[[:space:]]/}
    [ -n "$pin" ] || continue
    pkg=${pin%%[=<>!~;\[]*}; ver=
    [[ $pin == *==* ]] && ver=${pin#*==} && ver=${ver%%[;,]*}
    want=$(tr 'A-Z' 'a-z' <<<"$pkg" | sed -E 's/[-_.]+/_/g')-${ver:+$ver-}
    find "$whl_src" -maxdepth 1 -name '*.whl' -printf '%f\n' | tr 'A-Z' 'a-z' \
        | awk -v w="$want" 'index($0, w) == 1 { f = 1 } END { exit !f }' || die "no wheel for '$pin' (env/bundle-wheels.txt) in $whl_src"
done < "$pins"
cp "$whl_src"/*.whl "$top/bundle/whl/"

# 7. The runner: sources gpu_host_env.sh (toolchain, prebuilt library, wheels), then make.
cat > "$top/run.sh" <<EOF
#!/usr/bin/env bash
# tilekit bundle runner ($name): run the kit's make targets on a GPU host with no Rust toolchain
# and no internet. Everything is written under this folder (out/ holds the results).
#   ./run.sh                                      make doctor, then this usage
#   ./run.sh KERNEL=rms_norm test baseline perf   any make arguments
#   ./run.sh KERNEL=rms_norm report validate
set -euo pipefail
here=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
cd "\$here"
bundle_py=$py
usage() {
    echo "usage: ./run.sh [KERNEL=name] [BASELINES='cutile triton torch'] <make targets...>"
    echo "  BASELINES unset: every baseline the kernel's baselines.py declares (the providers too)"
    echo "  e.g. ./run.sh KERNEL=rms_norm test baseline perf; ./run.sh KERNEL=rms_norm report validate"
    echo "  results: \$here/out/<kernel>/ (copy that folder back); make help lists the targets"
}
for a in "\$@"; do
    case \$a in
        setup|bundle) echo "run.sh: 'make \$a' needs the internet and the build toolchain; the bundle already carries what it installs" >&2; exit 2 ;;
        check) command -v cargo >/dev/null || { echo "run.sh: 'make check' needs cargo; run ./run.sh test (or python3 -m pytest tests/kit) instead" >&2; exit 2; } ;;
    esac
done
host_py=\$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
[ "\$host_py" = "\$bundle_py" ] || echo "run.sh: WARNING: the bundled wheels are for Python \$bundle_py, python3 here is \$host_py (make the bundle with BUNDLE_PY=\$host_py)" >&2
# The toolchain, library and wheels unpack here (once), so nothing is written outside the bundle.
export TILEKIT_GPU_HOME="\${TILEKIT_GPU_HOME:-\$here/.gpu-home}"
. scripts/gpu_host_env.sh bundle
if [ \$# -eq 0 ]; then
    make doctor || true
    echo
    usage
    exit 0
fi
exec make "\$@"
EOF
chmod 755 "$top/run.sh"

# 8. The manifest: versions, then sha256 and size of every other file.
{
    echo "# tilekit bundle manifest"
    echo "bundle: $name"
    echo "git_sha: $full_sha${dirty:+ (dirty working tree)}"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "python: $py (the wheels in bundle/whl/)"
    echo "cutile_crates: $(awk '/^name = /{n=$3} /^version = /{gsub(/"/,"",n); v=$3; gsub(/"/,"",v); if (n ~ /^(cutile|cuda-)/ && n != "cutile_kernels") printf "%s%s %s", (c++ ? ", " : ""), n, v}' cutile_kernels/Cargo.lock)"
    tileiras="$TILEKIT_TILEIR/bin/tileiras"
    if [ -z "${BUNDLE_TOOLCHAIN_TARXZ:-}" ] && [ -x "$tileiras" ]; then
        echo "tileiras: $("$tileiras" --version 2>/dev/null | grep -o 'release .*' || echo unknown)"
    else
        echo "tileiras: not run (toolchain given as BUNDLE_TOOLCHAIN_TARXZ)"
    fi
    echo "tileir_toolchain_pins: $(grep -v '^#' env/tileir-toolchain.txt | xargs)"
    echo "# files: sha256  size_bytes  path (under tilekit-bundle/); check them with"
    echo "#   awk 'length(\$1) == 64 { print \$1 \"  \" \$3 }' MANIFEST.txt | sha256sum -c --quiet"
    (cd "$top" && find . -type f ! -name MANIFEST.txt -printf '%P\n' | LC_ALL=C sort | while read -r f; do
        printf '%s  %s  %s\n' "$(sha256sum < "$f" | cut -c1-64)" "$(stat -c %s "$f")" "$f"
    done)
} > "$top/MANIFEST.txt"

# 9. The tar (plain: the big members are xz already), written beside and moved into place.
tarball="$out/$name.tar"
tar -cf "$tarball.tmp" -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner tilekit-bundle
mv -f "$tarball.tmp" "$tarball"
say "wrote $tarball ($(size "$(stat -c %s "$tarball")"))"
say "  toolchain  $(size "$(bytes "$top"/bundle/tileir-toolchain*.tar.xz)")  bundle/$(basename "$toolchain")"
say "  library    $(size "$(bytes "$top/bundle/libcutile_kernels.so.xz")")  bundle/libcutile_kernels.so.xz (stripped, xz -9)"
say "  wheels     $(size "$(bytes "$top/bundle/whl")")  bundle/whl/ ($(ls "$top/bundle/whl" | wc -l) for Python $py)"
say "  sources    $(size "$(bytes "$top" -path "$top/bundle" -prune -o)")  ${#files[@]} files"
say "on the GPU host: tar -xf $(basename "$tarball") && cd tilekit-bundle && ./run.sh KERNEL=rms_norm test baseline perf"
