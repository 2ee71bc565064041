"""Python's side of the C ABI: load libcutile_kernels.so with cffi (ABI mode), pack tensor
descriptors, and turn every non-zero return code into a ``KernelError``.

The Rust side of the same facts is ``cutile_kernels/src/ffi_util.rs``; ``check_abi`` compares the
two through the JSON the library exports (``tilekit_abi_json``).

Each kernel declares its exports in ``kernels/<name>/op.py`` as a module-level string ``CDEF``.
That string is the single source of truth for the signature: it is read here with ``ast`` (no
import, no torch), declared to cffi, and listed for the ``nm -D`` symbol check
(``python -m tilekit abi --declared``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(os.environ.get("TILEKIT_ROOT") or Path(__file__).resolve().parents[3])
KERNELS_DIR = ROOT / "kernels"

ABI_VERSION = 1
MAX_DIMS = 8

# dtype codes (extend, never renumber), keyed by torch's short dtype name.
DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "int64": 4}
# The same codes under the names Rust uses.
RUST_DTYPE_NAMES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "int64": "i64"}

# code -> (name, meaning)
RETURN_CODES = {
    0: ("OK", "ok"),
    -1: ("COMPILER_DEFAULT", "compiler default (sentinel for optional compile options)"),
    -2: ("UNSUPPORTED_DTYPE", "unsupported dtype"),
    -3: ("JIT_OR_LAUNCH", "JIT compile or kernel launch failed"),
    -4: ("DEVICE_OR_STREAM", "CUDA device or stream set-up failed"),
    -5: ("NULL_DESCRIPTOR", "null tensor descriptor"),
    -6: ("INVALID_ARGUMENT", "invalid argument (shape, stride, grid or variant)"),
    -7: ("PANIC", "Rust panic caught at the C boundary"),
}

COMMON_CDEF = f"""
typedef struct {{
    uint64_t data;
    int32_t ndim;
    int32_t dtype;
    int64_t shape[{MAX_DIMS}];
    int64_t strides[{MAX_DIMS}];
}} TensorDesc;
const char* tilekit_last_error(void);
const char* tilekit_abi_json(void);
const char* tilekit_jit_stats(void);
"""

_FUNC_NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


class KernelError(RuntimeError):
    """A kernel export returned a non-zero code."""

    def __init__(self, kernel: str, func: str, code: int, detail: str = ""):
        name, meaning = RETURN_CODES.get(code, ("UNKNOWN", "unknown return code"))
        self.kernel, self.func, self.code, self.code_name, self.detail = kernel, func, code, name, detail
        text = f"kernel {kernel}: {func} returned {code} ({name}: {meaning})"
        super().__init__(f"{text}: {detail}" if detail else text)


def kernel_cdefs(kernels_dir: Path = KERNELS_DIR) -> dict[str, str]:
    """{kernel name: its CDEF string}, read from kernels/*/op.py without importing them."""
    found = {}
    for op in sorted(kernels_dir.glob("*/op.py")):
        tree = ast.parse(op.read_text(), filename=str(op))
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "CDEF" for t in node.targets)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                found[op.parent.name] = node.value.value
                break
        else:
            raise ValueError(f"{op}: no module-level CDEF string; declare the exported C functions there")
    return found


def declared_functions(cdef: str) -> list[str]:
    """Names of the functions a C declaration string declares."""
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", cdef, flags=re.S)
    return [m.group(1) for stmt in body.split(";") if "(" in stmt and (m := _FUNC_NAME.search(stmt))]


def library_path() -> Path:
    """$TILEKIT_LIB, else build/libcutile_kernels.so (what `make build` writes)."""
    return Path(os.environ.get("TILEKIT_LIB") or ROOT / "build" / "libcutile_kernels.so")


class Library:
    """The loaded cdylib with every kernel's declarations."""

    def __init__(self, path: Path | None = None):
        import cffi

        self.path = Path(path) if path else library_path()
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: kernel library not built; run `make build` (or set TILEKIT_LIB)")
        self.ffi = cffi.FFI()
        self.ffi.cdef(COMMON_CDEF)
        self.cdefs = kernel_cdefs()
        for kernel, cdef in self.cdefs.items():
            try:
                self.ffi.cdef(cdef)
            except Exception as e:  # cffi raises CDefError/ParseError subclasses
                raise ValueError(f"kernels/{kernel}/op.py: CDEF does not parse: {e}") from e
        self.lib = self.ffi.dlopen(str(self.path))

    def abi(self) -> dict:
        return json.loads(self.ffi.string(self.lib.tilekit_abi_json()).decode())

    def jit_stats(self) -> dict | None:
        """cutile's JIT counters in this process (compiles, disk cache hits, misses, puts); None for
        a library built before the export existed."""
        try:
            return json.loads(self.ffi.string(self.lib.tilekit_jit_stats()).decode())
        except AttributeError:
            return None

    def last_error(self) -> str:
        return self.ffi.string(self.lib.tilekit_last_error()).decode(errors="replace")

    def call(self, kernel: str, func: str, *args) -> None:
        """Call an export; raise KernelError (with Rust's message) on a non-zero code. None is sent
        as a null pointer: an optional tensor left out (layer_norm's weight and bias)."""
        code = getattr(self.lib, func)(*(self.ffi.NULL if a is None else a for a in args))
        if code != 0:
            raise KernelError(kernel, func, int(code), self.last_error())

    # -- descriptors ------------------------------------------------------------------------
    def desc(self, data: int, shape, strides, dtype_code: int):
        """A TensorDesc from raw parts (tests use it to send what torch would never produce)."""
        if len(shape) != len(strides) or len(shape) > MAX_DIMS:
            raise ValueError(f"descriptor needs len(shape) == len(strides) <= {MAX_DIMS}, got {shape} / {strides}")
        d = self.ffi.new("TensorDesc*")
        d.data, d.ndim, d.dtype = data, len(shape), dtype_code
        for i, (n, s) in enumerate(zip(shape, strides)):
            d.shape[i], d.strides[i] = n, s
        return d

    def pack(self, t):
        """A TensorDesc for a torch tensor: pointer, shape, strides in elements, dtype code.
        The caller keeps the returned object alive until the call returns."""
        name = str(t.dtype).removeprefix("torch.")
        if name not in DTYPE_CODES:
            raise TypeError(f"dtype {t.dtype} has no tilekit dtype code (known: {', '.join(DTYPE_CODES)})")
        return self.desc(t.data_ptr(), tuple(t.shape), tuple(t.stride()), DTYPE_CODES[name])


_LIB: Library | None = None


def library() -> Library:
    """The process-wide Library, loaded on first use (with the disk JIT cache set up: jit_cache_dir)."""
    global _LIB
    if _LIB is None:
        set_jit_cache_env(os.environ)
        _LIB = Library()
    return _LIB


JIT_CACHE_VAR = "TILEKIT_JIT_CACHE"  # read once by ffi_util.rs before the first JIT


def jit_cache_key(tileiras: str, gpu: str, capability: str, crate: str) -> str:
    """The folder name of one toolchain + GPU's cubins: a stale cubin (another tileiras, GPU or
    cutile crate) is never served, even where cutile's own content key would not tell them apart.

    >>> jit_cache_key("V13.2.1", "NVIDIA H200", "9.0", "0.5.0")
    'sm90-tileiras13.2.1-cutile0.5.0-7fcdb257cfe9'

    The name keeps the release's first word (tileiras 13.4 reports "V13.4.92\\nBuild local..." as one
    token, as the H200 records show: a folder name with a newline otherwise); the digest keeps all of it.

    >>> jit_cache_key("V13.4.92\\nBuild local.local.38855100_", "NVIDIA H200", "9.0", "0.5.0").split("-")[:3]
    ['sm90', 'tileiras13.4.92', 'cutile0.5.0']
    """
    import hashlib

    digest = hashlib.sha256("|".join((tileiras, gpu, capability, crate)).encode()).hexdigest()[:12]
    release = (tileiras.split() or ["unknown"])[0].removeprefix("V")
    return f"sm{capability.replace('.', '')}-tileiras{release}-cutile{crate}-{digest}"


def set_jit_cache_env(env) -> str | None:
    """Point TILEKIT_JIT_CACHE at $TILEKIT_CACHE/jit/<jit_cache_key> (default cache
    ~/.cache/tilekit) unless the caller set it (empty: no disk cache); the folder, or None without
    a GPU (or before torch is imported: the CLI's ABI check). Every process of a host with the same
    toolchain and GPU model shares it."""
    if JIT_CACHE_VAR in env:
        return env[JIT_CACHE_VAR] or None
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    from tilekit.runtime import bench

    major, minor = torch.cuda.get_device_capability()
    key = jit_cache_key(
        bench.tileiras_release(), torch.cuda.get_device_name(), f"{major}.{minor}", bench.cutile_crate_version()
    )
    root = env.get("TILEKIT_CACHE") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tilekit"
    )
    env[JIT_CACHE_VAR] = os.path.join(root, "jit", key)
    return env[JIT_CACHE_VAR]


def stream_args(t) -> tuple[int, int]:
    """(device_id, stream) for a CUDA tensor: its device and that device's current torch stream."""
    import torch

    if t.device.type != "cuda":
        raise ValueError(f"tensor is on {t.device}; cuTile kernels need CUDA tensors (move it with .cuda())")
    return t.device.index, torch.cuda.current_stream(t.device).cuda_stream


def check_abi(abi: dict, ffi) -> list[str]:
    """Disagreements between the library's exported ABI and this module's definitions."""
    problems = []
    want = {
        "abi_version": ABI_VERSION,
        "max_dims": MAX_DIMS,
        "tensor_desc_size": ffi.sizeof("TensorDesc"),
        "tensor_desc_offsets": {
            f: ffi.offsetof("TensorDesc", f) for f in ("data", "ndim", "dtype", "shape", "strides")
        },
        "dtypes": {RUST_DTYPE_NAMES[n]: c for n, c in DTYPE_CODES.items()},
        "return_codes": {name: code for code, (name, _) in RETURN_CODES.items()},
    }
    for key, value in want.items():
        if abi.get(key) != value:
            problems.append(f"{key}: library says {abi.get(key)!r}, tools/tilekit/runtime/ffi.py says {value!r}")
    return problems


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tilekit abi", description=__doc__.split("\n\n")[0])
    p.add_argument("--declared", action="store_true", help="print every declared export, one per line")
    p.add_argument("--kernel", help="with --declared: only this kernel's exports")
    p.add_argument("--check", action="store_true", help="load the library and compare its ABI with Python's")
    args = p.parse_args(argv)
    if args.declared:
        cdefs = kernel_cdefs()
        if args.kernel and args.kernel not in cdefs:
            print(
                f"tilekit abi: no kernels/{args.kernel}/op.py with a CDEF (known: {', '.join(cdefs) or 'none'})",
                file=sys.stderr,
            )
            return 2
        for kernel, cdef in cdefs.items():
            if args.kernel in (None, kernel):
                for name in declared_functions(cdef):
                    print(name)
        return 0
    if args.check:
        lib = Library()
        problems = check_abi(lib.abi(), lib.ffi)
        for line in problems:
            print(f"ABI mismatch: {line}", file=sys.stderr)
        print(f"{lib.path}: ABI {'matches' if not problems else 'DOES NOT match'} tools/tilekit/runtime/ffi.py")
        return 1 if problems else 0
    p.print_help()
    return 2
