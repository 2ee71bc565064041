"""What every kernels/<name>/baselines.py does the same way, so each holds only its kernel's math.

A baselines.py defines the kernel's Triton and cuTile Python kernels, the pure functions that plan
their launches (`triton_config`, `cutile_config`, ...), one entry per backend (`BACKENDS`: cutile,
triton, torch, and the providers that have its op: tilekit.runtime.providers), `VARIANTS` and
`unavailable_reason(backend)`. From here it takes:

* the guarded imports: neither triton nor cuda.tile is needed to import a baselines.py. Each is
  imported by `import_triton` / `import_cutile`, which keep the import error, and
  `unavailable_reason` turns it into the message the suites skip with (None when it can run);
  `require` raises that message when a missing backend is called anyway;
* the input checks every entry makes (`check_matrix`, `check_variant`, `require_cuda`);
* `NotServed`: what an entry raises for an input its library does not serve by design (Liger's
  Triton softmax and rows longer than 65536); the suites skip that case with the reason, and the
  report lists the baseline's missing configs (it is then never the reference: tilekit.reports.compare);
* the row-wise launch: a kernel that works on (m, n) rows takes its operands, then y, then
  [m,] n, x's and y's row strides, its scalars, [ROWS,] BLOCK (Triton) or its operands, then y,
  its scalars, [ROWS,] BLOCK (cuTile); `launch_triton_rows` / `launch_cutile_rows` call it from a
  plan {"variant", "grid", "rows", "block"[, "num_warps"]}, without m and ROWS for the variant that
  runs one row per program; `launch_rows` is an entry's whole body after its checks (allocate y,
  plan, pick the variant's kernel, launch);
* rms_norm's and softmax's config functions for their shared variants (row, multirow, looped),
  made by `row_configs` from each backend's `auto` rule: see "Row reductions" below.

cuTile Python at run time compiles each kernel with ``tileiras`` (Tile IR -> cubin, sm_90 needs
tileiras >= 13.3 with the ptxas and libnvvm of its own release). cuda.tile looks for it in the
``nvidia-cuda-tileiras`` pip package, then on PATH, then in ``$CUDA_HOME/bin``, then in
/usr/local/cuda*; it loads libcuda.so.1 from the driver and nothing else from a CUDA toolkit.
Compiled cubins are cached under ``$CUDA_TILE_CACHE_DIR`` (default ~/.cache/cutile-python).
"""

from __future__ import annotations

import functools
import sys

from tilekit.runtime import providers
from tilekit.runtime.packages import cutile_reason, import_cutile, import_triton, tileiras_missing  # noqa: F401 (re-exported for baselines.py)


class NotServed(Exception):
    """A baseline's library does not serve this input by design; the message says why. Raised
    before any work, so the case is a skip with that reason, not a failure."""


# -- optional packages, and why a backend cannot run ----------------------------------------------


def unavailable_reason(kernel: str, backend: str, backends: dict, triton_error, cutile_error) -> str | None:
    """Why `backend` of `kernel` cannot run here, or None when its package imports (and, for
    cutile, its compiler is found; a provider's entry says for itself). Says nothing about the GPU."""
    if backend not in backends:
        raise ValueError(f"unknown {kernel} baseline {backend!r}; known: {sorted(backends)}")
    if isinstance(backends[backend], providers.Entry):
        return backends[backend].reason()
    if backend in ("torch", "torch_flash", "torch_compile"):
        return None
    if backend == "triton":
        if triton_error is None:
            return None
        if isinstance(triton_error, ModuleNotFoundError):
            return "triton is not installed: pip install triton (it comes with CUDA builds of torch)"
        return f"triton failed to import: {type(triton_error).__name__}: {triton_error}"
    return tileiras_missing() if cutile_error is None else cutile_reason(cutile_error)


class ForwardSaved:
    """What a library's forward saved for its backward, per input tensor (a backward baseline's rstd,
    silu(gate)), as a training step holds it when its backward runs: made once per input by `get`,
    and again when the input was written to since or is asked for with another `key`. Keyed by the
    tensor itself and held weakly (torch.utils.weak.WeakIdKeyDictionary): an entry goes with its
    input, and a new tensor at a freed one's address, of another config or dtype, never takes it (keyed
    by address, on the H100 it did). `values()` are the tensors kept: tests/kit/test_providers.py
    allows them as a library backward's arguments besides the caller's."""

    def __init__(self) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self._kept, self._stamp = WeakIdKeyDictionary(), WeakIdKeyDictionary()

    def get(self, source, make, key=()):
        stamp = (source._version, key)
        if self._stamp.get(source) != stamp:
            self._kept[source], self._stamp[source] = make(), stamp
        return self._kept[source]

    def __getitem__(self, source):
        return self._kept[source]

    def __len__(self) -> int:
        return len(self._kept)

    def values(self) -> list:
        """The tensors kept (a tuple kept, e.g. LayerNorm's (mean, rstd), gives its tensors)."""
        kept = (v if isinstance(v, tuple) else (v,) for v in self._kept.values())
        return [t for group in kept for t in group if t is not None]


def reason_for(module: str):
    """A family member's `unavailable_reason(backend)`: unavailable_reason of the member module's
    KERNEL, BACKENDS and import errors (_TRITON_ERROR, _CUTILE_ERROR), read at each call (tests
    replace them)."""

    def member_reason(backend: str) -> str | None:
        """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
        m = sys.modules[module]
        return unavailable_reason(m.KERNEL, backend, m.BACKENDS, m._TRITON_ERROR, m._CUTILE_ERROR)

    member_reason.__name__ = member_reason.__qualname__ = "unavailable_reason"
    return member_reason


def require(package, reason, backend: str) -> None:
    """Raise RuntimeError(reason(backend)) when the backend's package (the module's `triton` or
    `ct`, None when it did not import) is missing."""
    if package is None:
        raise RuntimeError(reason(backend))


def require_reason(reason, backend: str) -> None:
    """Raise RuntimeError with a member's reason when `backend` cannot run here: a family's entries
    read their member's own import state through its unavailable_reason (which tests may replace)."""
    why = reason(backend)
    if why is not None:
        raise RuntimeError(why)


OURS = {"cutile": "our cuTile Python kernels", "triton": "our Triton kernels"}


def named_entries(kernel: str, entries: dict, docs: dict) -> dict:
    """A family's entries named as a member's own functions (`<backend>_<kernel>`), each with its
    docstring `docs[backend]`: what tracebacks, the scaffold and the docs show."""
    for backend, entry in entries.items():
        entry.__name__ = entry.__qualname__ = f"{backend}_{kernel}"
        entry.__doc__ = docs[backend]
    return entries


# -- checks -------------------------------------------------------------------------------------


def raise_recompile_limit(limit: int) -> None:
    """Let torch.compile keep `limit` compiled versions of a function (one per shape, dtype and stride
    class) before it falls back to eager: the default (8) is fewer than a kernel's configs, and past it
    a `torch_compile` baseline would time eager PyTorch under that name."""
    import torch._dynamo

    for name in ("recompile_limit", "cache_size_limit"):  # the name changed across torch versions
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(limit, getattr(torch._dynamo.config, name)))


def check_variant(kernel: str, variant: str, variants: tuple) -> None:
    if variant not in variants:
        raise ValueError(f"{kernel} baseline: variant must be one of {variants}, got {variant!r}")


def check_matrix(kernel: str, name: str, t, dtypes: tuple, dims: str = "(m, n)") -> None:
    """`t` is 2-D, of one of `dtypes`, and its last dim is contiguous (its row stride is free)."""
    if t.dim() != 2:
        raise ValueError(f"{kernel} baseline: {name} must be 2-D {dims}, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        raise TypeError(f"{kernel} baseline: {name} must be one of {dtypes}, got {t.dtype}")
    if t.shape[1] > 1 and t.stride(1) != 1:
        raise ValueError(f"{kernel} baseline: {name}'s last dim must be contiguous; pass {name}.contiguous()")


def require_cuda(kernel: str, name: str, t) -> None:
    """cuTile kernels run on a GPU only (Triton's also run under TRITON_INTERPRET=1 on the CPU)."""
    if not t.is_cuda:
        raise ValueError(f"{kernel} cutile: {name} must be a CUDA tensor, got {t.device}")


# -- launch arithmetic --------------------------------------------------------------------------

MIN_BLOCK = 16  # tiles narrower than this waste lanes; masks/padding cover shorter rows


def next_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def row_block(n: int) -> int:
    """BLOCK of a tile that holds a whole row of n (a power of two, at least MIN_BLOCK)."""
    return max(MIN_BLOCK, next_pow2(n))


def triton_warps(tile_elems: int, per_thread: int) -> int:
    """Enough warps that each thread holds ~`per_thread` f32 values of a tile: fewer spills than
    Triton's default 4 warps for wide tiles, and no idle warps for narrow ones (4 to 16)."""
    return clamp(tile_elems // (32 * per_thread), 4, 16)


@functools.lru_cache(maxsize=None)
def _sm_count(device_index: int) -> int:
    import torch

    return torch.cuda.get_device_properties(device_index).multi_processor_count


def num_sms(t) -> int:
    """SMs of the GPU holding tensor `t`. A CPU tensor only reaches a kernel under
    TRITON_INTERPRET=1; one "SM" there makes persistent loops take several steps on small shapes."""
    if not t.is_cuda:
        return 1
    import torch

    return _sm_count(t.device.index if t.device.index is not None else torch.cuda.current_device())


# -- row-wise launches (the convention in the module docstring) ----------------------------------


def launch_triton_rows(kernel, cfg: dict, operands: tuple, y, scalars: tuple = (), one_row: str = "looped") -> None:
    """kernel[grid](*operands, y, [m,] n, operands[0] row stride, y row stride, *scalars,
    [ROWS,] BLOCK, num_warps), (m, n) = y.shape; no m and ROWS when cfg's variant is `one_row`."""
    m, n = y.shape
    grid = (cfg["grid"],)
    strides = (operands[0].stride(0), y.stride(0))
    if cfg["variant"] == one_row:
        kernel[grid](*operands, y, n, *strides, *scalars, BLOCK=cfg["block"], num_warps=cfg["num_warps"])
    else:
        kernel[grid](
            *operands, y, m, n, *strides, *scalars, ROWS=cfg["rows"], BLOCK=cfg["block"], num_warps=cfg["num_warps"]
        )


def launch_cutile_rows(ct, kernel, cfg: dict, args: tuple, device, one_row: str = "looped") -> None:
    """ct.launch(kernel) over cfg["grid"] programs with args + (ROWS, BLOCK), or + (BLOCK,) when
    cfg's variant is `one_row`, on torch's current stream of `device` with `device` current."""
    import torch

    tile = (cfg["block"],) if cfg["variant"] == one_row else (cfg["rows"], cfg["block"])
    with torch.cuda.device(device):
        ct.launch(torch.cuda.current_stream(device), (cfg["grid"],), kernel, tuple(args) + tile)


def launch_rows(
    kernels: dict, config, operands: tuple, scalars: tuple = (), *, variant, knobs, cols=None, ct=None, one_row="looped"
):
    """y = torch.empty((m, cols)) in the dtype of x = operands[0] (cols: x's width unless given);
    unless y is empty, the plan config(m, cols, x's SMs, variant, **knobs) and its variant's kernel
    (`kernels` by variant) fill it: Triton's, or cuTile's when `ct` is cuda.tile. Returns y."""
    import torch

    x = operands[0]
    y = torch.empty((x.shape[0], x.shape[1] if cols is None else cols), dtype=x.dtype, device=x.device)
    if y.numel():
        cfg = config(*y.shape, num_sms(x), variant, **knobs)
        if ct is None:
            launch_triton_rows(kernels[cfg["variant"]], cfg, operands, y, scalars, one_row)
        else:
            launch_cutile_rows(ct, kernels[cfg["variant"]], cfg, (*operands, y, *scalars), x.device, one_row)
    return y


# -- row reductions (rms_norm, softmax) ----------------------------------------------------------
# One row of x reduced (sum of squares, max and sum) and rewritten per row. Three forms, the same
# for Triton and cuTile; each kernel's `auto` rule picks one (row_configs):
#   row      -- one row per program, the whole row one BLOCK = next_pow2(n) tile in registers;
#   multirow -- static persistent: min(#row tiles, SMs x ctas_per_sm) programs walk ROWS x BLOCK
#               row tiles with a grid stride (short rows give one program too little work);
#   looped   -- one row per program, two passes over BLOCK-wide column tiles (rows too long to hold).

ROW_VARIANTS = ("auto", "row", "multirow", "looped")
MAX_ROW_BLOCK = 16384  # auto: the widest row kept whole in registers (f32 16K = 64 KiB per row)
TRITON_ROW_ELEMS_PER_THREAD = 16  # f32 registers per thread the row/multirow tiles aim for
TRITON_MULTIROW_TILE = 8192  # elements per ROWS x BLOCK tile in the multirow form
TRITON_LOOPED_BLOCK = 4096  # column tile of the looped form
TRITON_CTAS_PER_SM = 2  # persistent programs per SM: >1 to hide latency, few enough
# (2 x 16 warps) that all stay resident and none forms a tail
CUTILE_LOOPED_BLOCK = 4096  # column tile of the looped form
CUTILE_CTAS_PER_SM = 1  # static persistent: one program per SM; tileiras sizes the CTA


def _whole_row(kernel: str, backend: str, variant: str, block: int, n: int) -> int:
    if block < n:
        raise ValueError(f"{kernel} {backend}: variant {variant!r} holds a whole row, block={block} < n={n}")
    return block


def triton_row_plan(
    kernel: str, m: int, n: int, sms: int, variant: str, *, block=None, rows=None, num_warps=None, ctas_per_sm=None
) -> dict:
    """The Triton launch plan of a named form (row, multirow, looped) for an (m, n) problem on
    `sms` SMs: {"variant", "block", "rows", "num_warps", "grid"}. Pure; keywords force a knob."""
    whole = row_block(n)

    def warps(tile_elems):
        return num_warps or triton_warps(tile_elems, TRITON_ROW_ELEMS_PER_THREAD)

    if variant == "looped":
        block = block or min(whole, TRITON_LOOPED_BLOCK)
        return {"variant": variant, "block": block, "rows": 1, "num_warps": warps(block), "grid": m}
    block = _whole_row(kernel, "triton", variant, block or whole, n)
    if variant == "row":
        return {"variant": variant, "block": block, "rows": 1, "num_warps": warps(block), "grid": m}
    rows = rows or max(1, TRITON_MULTIROW_TILE // block)
    grid = min(cdiv(m, rows), sms * (ctas_per_sm or TRITON_CTAS_PER_SM))
    return {"variant": variant, "block": block, "rows": rows, "num_warps": warps(rows * block), "grid": max(1, grid)}


def cutile_rows_per_tile(block: int) -> int:
    """Rows per multirow tile: short rows many, so a program moves enough bytes per step; very
    long rows 2, which keeps a (rows, block) f32 tile within the register file. Starting points
    to time."""
    if block <= 1024:
        return 16
    return 2 if block >= 16384 else 4


def cutile_row_plan(
    kernel: str, m: int, n: int, sms: int, variant: str, *, block=None, rows=None, ctas_per_sm=None
) -> dict:
    """The cuTile launch plan of a named form (row, multirow, looped) for an (m, n) problem on
    `sms` SMs: {"variant", "block", "rows", "grid"}. Pure; keywords force a knob."""
    whole = row_block(n)
    if variant == "looped":
        return {"variant": variant, "block": block or min(whole, CUTILE_LOOPED_BLOCK), "rows": 1, "grid": m}
    block = _whole_row(kernel, "cutile", variant, block or whole, n)
    if variant == "row":
        return {"variant": variant, "block": block, "rows": 1, "grid": m}
    rows = rows or cutile_rows_per_tile(block)
    grid = min(cdiv(m, rows), sms * (ctas_per_sm or CUTILE_CTAS_PER_SM))
    return {"variant": variant, "block": block, "rows": rows, "grid": max(1, grid)}


def _auto(rule: dict, m: int, n: int, sms: int, programs: int, rows_per_tile) -> str:
    block = row_block(n)
    if block > MAX_ROW_BLOCK or block >= rule.get("looped_from", 2 * MAX_ROW_BLOCK):
        return "looped"
    multirow = rule.get("multirow")
    if multirow == "tiles":  # more row tiles than persistent programs
        return "multirow" if cdiv(m, rows_per_tile(block)) > programs else "row"
    if multirow == "waves":  # the rows make more than a couple of waves of one-row programs
        return "multirow" if m > 2 * sms else "row"
    return "row"


def row_configs(kernel: str, auto: dict | None = None):
    """(triton_config, cutile_config) of a row reduction: the plans of its named forms
    (triton_row_plan, cutile_row_plan), "auto" resolved first by the backend's rule, auto[backend]:
    looped when next_pow2(n) >= its "looped_from" (or a row is too wide to hold, > MAX_ROW_BLOCK),
    else multirow when its "multirow" says so ("tiles": more row tiles than persistent programs;
    "waves": m > 2 x SMs), else row.

    >>> triton_config, cutile_config = row_configs("k", {"cutile": {"multirow": "waves"}})
    >>> [cfg(64, n, 8)["variant"] for cfg in (triton_config, cutile_config) for n in (1000, 32768)]
    ['row', 'looped', 'multirow', 'looped']
    """
    triton_auto, cutile_auto = (auto or {}).get("triton", {}), (auto or {}).get("cutile", {})

    def triton_config(
        m: int, n: int, sms: int, variant: str = "auto", *, block=None, rows=None, num_warps=None, ctas_per_sm=None
    ) -> dict:
        """The Triton launch plan for an (m, n) problem on a GPU with `sms` SMs:
        {"variant", "block", "rows", "num_warps", "grid"}. Pure; keywords force a knob."""
        check_variant(kernel, variant, ROW_VARIANTS)
        if variant == "auto":
            programs = sms * (ctas_per_sm or TRITON_CTAS_PER_SM)
            variant = _auto(triton_auto, m, n, sms, programs, lambda block: max(1, TRITON_MULTIROW_TILE // block))
        return triton_row_plan(
            kernel, m, n, sms, variant, block=block, rows=rows, num_warps=num_warps, ctas_per_sm=ctas_per_sm
        )

    def cutile_config(
        m: int, n: int, sms: int, variant: str = "auto", *, block=None, rows=None, ctas_per_sm=None
    ) -> dict:
        """The cuTile launch plan for an (m, n) problem on a GPU with `sms` SMs:
        {"variant", "block", "rows", "grid"}. Pure; keywords force a knob."""
        check_variant(kernel, variant, ROW_VARIANTS)
        if variant == "auto":
            programs = sms * (ctas_per_sm or CUTILE_CTAS_PER_SM)
            variant = _auto(cutile_auto, m, n, sms, programs, cutile_rows_per_tile)
        return cutile_row_plan(kernel, m, n, sms, variant, block=block, rows=rows, ctas_per_sm=ctas_per_sm)

    return triton_config, cutile_config
