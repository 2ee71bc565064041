"""The norms' gradients (kernels/rms_norm_backward, kernels/layer_norm_backward; their device code
and launcher: cutile_kernels/src/norm_backward.rs): what both ports share. A member's op.py takes the
contract names from here (DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants) and makes its
entry with `entry`; its spec.py is `spec(...)` with its own inputs and reference. No GPU at import.
"""

from __future__ import annotations

from tilekit.runtime import autotune
from tilekit.runtime.autotune import row_tune_key as tune_key
from tilekit.runtime.norm import DTYPES

__all__ = ["DEFAULT_VARIANT", "DTYPES", "MAX_BLOCK", "entry", "export_args", "inputs", "spec", "tune_key", "variants"]

DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1, "programs_per_sm": 0, "warps": -1}  # the launcher picks
MAX_BLOCK = 16384  # norm_backward.rs: the rows are held whole


def export_args(block: int, rows: int, occupancy: int, programs_per_sm: int, warps: int, *, sms: int) -> tuple:
    """A variant's arguments of the export, (block, rows, occupancy, programs, warps): programs_per_sm
    > 0 is a grid of that many tile blocks an SM, 0 the launcher's default (2 an SM).

    >>> export_args(4096, 1, 2, 2, 8, sms=132), export_args(-1, -1, -1, 0, -1, sms=132)
    ((4096, 1, 2, 264, 8), (-1, -1, -1, -1, -1))
    """
    programs = programs_per_sm * sms if programs_per_sm > 0 else -1
    return int(block), int(rows), int(occupancy), int(programs), int(warps)


def check_size(kernel: str, n: int) -> None:
    """ValueError for rows the kernels cannot hold whole (the launcher refuses them alike)."""
    if n > MAX_BLOCK:
        raise ValueError(
            f"{kernel}: rows of at most {MAX_BLOCK} elements (the backward holds a row whole), got n = {n}"
        )


def variants(m: int, n: int) -> list[dict]:
    """Whole rows (block the power of two >= n) of 1 K-4 K elements per tile, over 4 and 8 warps, at
    1 and 2 tile blocks an SM (each tile block adds a row of partial sums per weight gradient to the
    second pass):

    >>> [(v["rows"], v["warps"], v["programs_per_sm"]) for v in variants(16384, 4096)]
    [(1, 4, 1), (1, 4, 2), (1, 8, 1), (1, 8, 2)]
    >>> sorted({v["rows"] for v in variants(16384, 1024)}), len(variants(8, 1024))
    ([1, 2, 4], 8)
    """
    block = 1 << max(4, (n - 1).bit_length())
    if block > MAX_BLOCK:
        return [dict(DEFAULT_VARIANT)]  # the entry refuses it first (check_size)
    rows_each = sorted({autotune.tile_rows(block, elems, min(64, autotune.pow2(m))) for elems in (1024, 2048, 4096)})
    return [
        {"block": block, "rows": r, "occupancy": -1, "programs_per_sm": p, "warps": w}
        for r in rows_each
        for w in (4, 8)
        for p in (1, 2)
        if r * block <= MAX_BLOCK and (r == 1 or w == 4)  # several rows: the 4-warp tile only
    ]


def entry(op: str, kernel: str, sums: int, eps: float, added: bool = False):
    """A member's entry `<kernel>(dy, x, weight, eps=<eps>, *, variant="auto", out=None)` returning
    one (m + sums, n) tensor, dx's rows then the weight gradients' (its op.py docstring says which), checked (dy of
    x's shape, weight (n,), rows of at most MAX_BLOCK, the dtypes, contiguous last dims, `out` None or
    (m + sums, n) of x's dtype, all on CUDA; ValueError/TypeError), then the export through
    tilekit.runtime.port (`op`: the member's op.py module name). `added`: the entry is
    `<kernel>(dy, dresidual, s, weight, eps, ...)` instead, dresidual (of dy's shape) added to dx
    (fused_add_rms_norm_backward: x is the sum s its forward normalized)."""
    import torch
    from torch import Tensor

    from tilekit.runtime import checks, port

    def body(dy: Tensor, dr: Tensor | None, x: Tensor, weight: Tensor, eps: float, variant, out) -> Tensor:
        n, xname = x.shape[-1], "s" if added else "x"
        if dy.shape != x.shape:
            raise ValueError(f"{kernel}: dy must have {xname}'s shape {tuple(x.shape)}, got {tuple(dy.shape)}")
        if dr is not None and dr.shape != x.shape:
            raise ValueError(f"{kernel}: dresidual must have {xname}'s shape {tuple(x.shape)}, got {tuple(dr.shape)}")
        if weight.shape[0] != n:
            raise ValueError(
                f"{kernel}: weight must be ({n},) for {xname} of shape {tuple(x.shape)}, got {tuple(weight.shape)}"
            )
        check_size(kernel, n)
        grads = {"dy": dy} | ({"dresidual": dr} if dr is not None else {})
        checks.dtypes(kernel, DTYPES, **grads, **{xname: x}, weight=weight)
        checks.contiguous_last_dim(kernel, **grads, **{xname: x})
        rows = [t.reshape(-1, n) for t in (dy, *([dr] if dr is not None else []), x)]
        m = rows[-1].shape[0]
        checks.out_matches(kernel, out, (m + sums, n), x)
        checks.cuda(kernel, **grads, **{xname: x}, weight=weight)
        g = out if out is not None else torch.empty((m + sums, n), dtype=x.dtype, device=x.device)
        if m == 0:  # no rows: the weight gradients are sums over none (the launcher refuses empty tensors)
            return g.zero_()
        port.run(op, variant, (m, n), g, *rows, weight, float(eps))
        return g

    if added:

        def run(
            dy: Tensor,
            dresidual: Tensor,
            s: Tensor,
            weight: Tensor,
            eps: float = eps,
            *,
            variant: str | dict = "auto",
            out: Tensor | None = None,
        ) -> Tensor:
            return body(dy, dresidual, s, weight, eps, variant, out)

        layouts = {"dy": "(..., n)", "dresidual": "(..., n)", "s": "(..., n)", "weight": "(n,)"}
    else:

        def run(
            dy: Tensor,
            x: Tensor,
            weight: Tensor,
            eps: float = eps,
            *,
            variant: str | dict = "auto",
            out: Tensor | None = None,
        ) -> Tensor:
            return body(dy, None, x, weight, eps, variant, out)

        layouts = {"dy": "(..., n)", "x": "(..., n)", "weight": "(n,)"}

    run.__name__ = run.__qualname__ = kernel
    run.__module__ = op
    run.__doc__ = (
        f"dx and the weight gradients for the output gradient dy as one (m + {sums}, n) tensor (the module "
        "docstring); ValueError/TypeError on bad input, ffi.KernelError on a failed call."
    )
    return port.entry(layouts=layouts)(run)


def inputs(cfg: dict, device, seed, eps: float, x_mean: float = 0.0) -> dict:
    """A member's fresh random inputs: dy ~ N(0, 1), x ~ N(x_mean, 1) (each in rows of row_stride
    where the shape has one), w ~ 1 + N(0, 0.1); eps."""
    import torch

    from tilekit.runtime.kernel import generator, torch_dtype

    g = generator(device, seed)
    dt = torch_dtype(cfg["dtype"])
    m, n = cfg["m"], cfg["n"]
    dy, x = (shift + torch.randn(m, cfg.get("row_stride", n), generator=g, device=device) for shift in (0, x_mean))
    w = (1 + 0.1 * torch.randn(n, generator=g, device=device, dtype=torch.float32)).to(dt)
    return {"dy": dy.to(dt)[:, :n], "x": x.to(dt)[:, :n], "weight": w, "eps": eps}


def spec(op, sums: int, **fields):
    """A norm gradient's declaration (tilekit.runtime.kernel.row_kernel) from its op.py and the rows
    after dx (`sums`: dw; dw and db); `fields` add the kernel's own (make_inputs, reference) or
    replace these: the (m + sums, n) output, f32 tolerances for sums over m rows, the shapes (tiny,
    a row tile past m, rows off 16 bytes, padded rows, the widest row; not n = 1, where RMSNorm's dx is
    an f32 cancellation: kernels/rms_norm/spec.py's backward_skip), training steps at hidden 4096 and
    8192 over 4K-32K tokens, the fewest bytes (dy, x read once, dx written once, the n-element rows
    counted; the f32 partial sums are the port's own traffic), and bad inputs."""
    import torch

    from tilekit.runtime.kernel import BadInput, FfiCase, call, grid, row_kernel, shapes, torch_dtype

    kernel = op.__name__.rsplit(".", 2)[-2]  # kernels.<kernel>.op

    def bytes_moved(cfg: dict) -> int:
        m, n = cfg["m"], cfg["n"]
        return (3 * m * n + (1 + sums) * n) * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8

    def rows(n):
        return lambda: call(torch.randn(2, n), torch.randn(2, n), torch.randn(n))

    declared = dict(
        out_shape=lambda cfg: (cfg["m"] + sums, cfg["n"]),
        # row_kernel's, but f32's max error: the weight gradients sum m rows in f32, whose absolute
        # error grows like sqrt(m) ulps of the partial sums; at 4096 rows a column summing to ~0 was
        # 1.9e-5 off on the H100 (2026-12-05)
        tolerance={"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-4)},
        correctness_shapes=shapes(
            "m n row_stride", (1, 3), (3, 1000), (257, 4097), (4096, 4096, 4160), (33, 4000, 4004), (600, 16384)
        ),
        perf_configs=grid({"dtype": ("bfloat16",), "n": (4096, 8192), "m": (4096, 16384, 32768)})
        + shapes("dtype m n", ("float16", 16384, 4096)),
        bytes_moved=bytes_moved,
        size_check=lambda m, n: check_size(kernel, n),
        variant_shapes=shapes(
            "m n dtype", (37, 1000, "float16"), (600, 4096, "bfloat16"), (19, 8195, "bfloat16"), (64, 2048, "float32")
        ),
        bad_inputs={
            "dy_shape": BadInput(
                lambda: call(torch.randn(4, 7), torch.randn(4, 8), torch.randn(8)), ValueError, "dy must have x's shape"
            ),
            "weight_shape": BadInput(
                lambda: call(torch.randn(4, 8), torch.randn(4, 8), torch.randn(7)), ValueError, "weight must be (8,)"
            ),
            "too_wide": BadInput(rows(MAX_BLOCK + 1), ValueError, f"at most {MAX_BLOCK}"),
        },
        ffi_cases={
            "out_shape": FfiCase(
                lambda: {"out": torch.empty(4 + sums - 1, 8)}, message=f"it must be (m + {sums}, n) = [{4 + sums}, 8]"
            ),
            "weight_len": FfiCase(lambda: {"weight": torch.randn(7)}, message="`weight` has 7 elements but x has n=8"),
            "bad_block": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        },
    )
    return row_kernel(op, **{**declared, **fields})
