#!/usr/bin/env bash
# scripts/lint_rust.sh [--fix]: the Rust lint of cutile_kernels and the kernel files.
#   1. rustfmt: `cargo fmt --check` for the crate (build.rs, src/), and rustfmt --check with
#      rustfmt.toml (repository root) for kernels/*/*.rs, which cargo fmt does not see (build.rs
#      includes them through generated #[path] modules).
#   2. clippy: every target (the library and its tests), warnings are errors.
# --fix applies rustfmt first, then checks as above; clippy findings are fixed by hand.
# Exits non-zero when a check fails, naming the command that fixes it. Needs env/env.sh sourced
# (clippy compiles the cutile crates: CUDA_TOOLKIT_PATH, LIBCLANG_PATH, CARGO_TARGET_DIR).
set -uo pipefail
unset CUDA_HOME  # cuda-bindings' build watches it: one value for every cargo call keeps builds incremental
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
    --fix) fix=1 ;;
    "") ;;
    *) echo "usage: scripts/lint_rust.sh [--fix]" >&2; exit 2 ;;
esac

manifest=cutile_kernels/Cargo.toml
config=rustfmt.toml  # at the root, so editors formatting kernels/*/*.rs find it too
shopt -s nullglob
kernel_files=(kernels/*/*.rs)
shopt -u nullglob
# rustfmt colours its diffs even into a pipe or a CI log: only on a terminal here.
color=never; [ -t 1 ] && color=auto

for tool in rustfmt cargo-fmt cargo-clippy; do
    if ! command -v "$tool" >/dev/null; then
        echo "lint-rust: $tool not found; install it with: rustup component add rustfmt clippy" >&2
        exit 1
    fi
done
if [ -z "${CUDA_TOOLKIT_PATH:-}" ] || [ ! -f "$CUDA_TOOLKIT_PATH/include/cuda.h" ]; then
    echo "lint-rust: no CUDA >= 13.2 headers (CUDA_TOOLKIT_PATH='${CUDA_TOOLKIT_PATH:-}'); source env/env.sh (make setup installs them)" >&2
    exit 1
fi

if [ $fix = 1 ]; then
    echo "lint-rust: rustfmt (applying): cargo fmt for $manifest; rustfmt --config-path $config for ${#kernel_files[@]} kernel files"
    cargo fmt --manifest-path "$manifest" || exit 1
    [ ${#kernel_files[@]} -eq 0 ] || rustfmt --config-path "$config" "${kernel_files[@]}" || exit 1
fi

failed=()
echo "lint-rust: cargo fmt --check ($manifest: build.rs, src/)"
cargo fmt --manifest-path "$manifest" --check -- --color "$color" || failed+=("formatting: run scripts/lint_rust.sh --fix")
echo "lint-rust: rustfmt --check --config-path $config kernels/*/*.rs (${#kernel_files[@]} files)"
if [ ${#kernel_files[@]} -gt 0 ]; then
    rustfmt --check --color "$color" --config-path "$config" "${kernel_files[@]}" \
        || failed+=("formatting of kernels/*/*.rs: run scripts/lint_rust.sh --fix")
fi
echo "lint-rust: cargo clippy --release --all-targets -- -D warnings ($manifest and kernels/*/*.rs)"
cargo clippy --release --all-targets --manifest-path "$manifest" -- -D warnings \
    || failed+=("clippy: fix the findings above (file:line), then re-run scripts/lint_rust.sh")

if [ ${#failed[@]} -gt 0 ]; then
    printf 'lint-rust: FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "lint-rust: ok (rustfmt and clippy clean)"
