# Source me on a GPU host that has no Rust toolchain and no internet:
#   . scripts/gpu_host_env.sh DIR
# DIR holds what `make bundle` packs beside the sources: tileir-toolchain*.tar.xz (tileiras + its
# ptxas + libnvvm), libcutile_kernels.so[.xz] (prebuilt), whl/*.whl (Python packages the host
# lacks). Unpacks them once under $TILEKIT_GPU_HOME (default /tmp/tilekit-gpu) and exports:
#   CUDA_HOME = CUDA_TOOLKIT_PATH = the toolchain tree  (so tileiras uses ITS ptxas and libnvvm,
#               not an older /usr/local/cuda: that mix fails with "failed to compile Tile IR program")
#   TILEKIT_LIB, TILEKIT_PREBUILT=1 (make build checks the library instead of running cargo),
#   PYTHONPATH += the installed wheels.
_tk_dir=$(cd "${1:?usage: . scripts/gpu_host_env.sh DIR}" && pwd)
export TILEKIT_GPU_HOME="${TILEKIT_GPU_HOME:-/tmp/tilekit-gpu}"
mkdir -p "$TILEKIT_GPU_HOME"
# One runner at a time unpacks and installs (several `run.sh` at once on one host share this folder:
# without the lock, two pip installs into one --target clobber each other and both fail).
if command -v flock >/dev/null 2>&1; then
    exec 8>"$TILEKIT_GPU_HOME/.lock" && flock -w 900 8 ||
        echo "gpu_host_env: no lock on $TILEKIT_GPU_HOME/.lock after 900 s; going on without it" >&2
else
    echo "gpu_host_env: flock not found: runners started together may clobber $TILEKIT_GPU_HOME" >&2
fi
for _tk_tar in "$_tk_dir"/tileir-toolchain*.tar.xz; do
    [ -f "$_tk_tar" ] || { echo "gpu_host_env: no tileir-toolchain*.tar.xz in $_tk_dir" >&2; break; }
    _tk_tree="$TILEKIT_GPU_HOME/$(basename "$_tk_tar" .tar.xz)"
    if [ ! -x "$_tk_tree/bin/tileiras" ]; then
        mkdir -p "$_tk_tree" && tar -xJf "$_tk_tar" -C "$_tk_tree" --strip-components=1
    fi
    export CUDA_HOME="$_tk_tree" CUDA_TOOLKIT_PATH="$_tk_tree"
    export PATH="$_tk_tree/bin:$PATH"
done
if [ -f "$_tk_dir/libcutile_kernels.so.xz" ]; then
    # replaced only when it differs: make re-times the port when the library is newer than its logs
    _tk_tmp="$TILEKIT_GPU_HOME/libcutile_kernels.so.tmp$$"
    xz -dc "$_tk_dir/libcutile_kernels.so.xz" > "$_tk_tmp"
    if cmp -s "$_tk_tmp" "$TILEKIT_GPU_HOME/libcutile_kernels.so"; then
        rm -f "$_tk_tmp"
    else
        mv "$_tk_tmp" "$TILEKIT_GPU_HOME/libcutile_kernels.so"
    fi
    export TILEKIT_LIB="$TILEKIT_GPU_HOME/libcutile_kernels.so"
elif [ -f "$_tk_dir/libcutile_kernels.so" ]; then
    export TILEKIT_LIB="$_tk_dir/libcutile_kernels.so"
fi
export TILEKIT_PREBUILT=1
if ls "$_tk_dir"/whl/*.whl >/dev/null 2>&1; then
    # installed once per set of wheels (the stamp is a checksum of their bytes), not at every run;
    # only the set installed last is stamped (another bundle's install replaces the packages)
    _tk_stamp="$TILEKIT_GPU_HOME/site/.tilekit-wheels-$(cd "$_tk_dir/whl" && cksum -- *.whl | cksum | cut -d' ' -f1)"
    if [ ! -f "$_tk_stamp" ]; then
        rm -f "$TILEKIT_GPU_HOME"/site/.tilekit-wheels-*
        if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$TILEKIT_GPU_HOME/site" "$_tk_dir"/whl/*.whl; then
            echo "gpu_host_env: pip could not install $_tk_dir/whl/*.whl into $TILEKIT_GPU_HOME/site" >&2
            return 1 2>/dev/null || exit 1
        fi
        touch "$_tk_stamp"
    fi
    export PYTHONPATH="$TILEKIT_GPU_HOME/site${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "gpu_host_env: CUDA_HOME=${CUDA_HOME:-unset} TILEKIT_LIB=${TILEKIT_LIB:-unset}"
if command -v flock >/dev/null 2>&1; then
    flock -u 8 && exec 8>&-
fi
unset _tk_dir _tk_tar _tk_tree _tk_tmp _tk_stamp
