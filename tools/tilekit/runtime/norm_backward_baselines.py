"""The norms' gradient baselines (kernels/rms_norm_backward, kernels/layer_norm_backward): ours, in
Triton and cuTile Python, the ports' algorithm, one kernel for both norms (the constexpr CENTERED):
per row, with x̄ = mean(x) for LayerNorm (0 for RMSNorm), r = rsqrt(mean((x - x̄)^2) + eps),
x̂ = (x - x̄) * r and g = w * dy,

    dx = r * (g - x̂ * mean(g * x̂) - mean(g))  [RMSNorm: without mean(g)]
    dw = sum over rows of dy * x̂,  db = sum over rows of dy  [LayerNorm]     (f32 inside)

A persistent grid whose programs each hold whole rows store dx and one row of f32 partial sums per
gradient of the weights; torch sums those into the rows after dx of the port's one output
((m + 1, n) dx, dw; LayerNorm (m + 2, n) dx, dw, db). Entries: `launch(backend, dy, x, w, eps,
centered)`; `saved_stats(x, eps, centered)`, the per-row statistics the libraries' forwards save,
made once per input outside the timed calls. With `dr` (fused_add_rms_norm_backward: the residual
stream's gradient of the normalized sum), dx adds it in the same pass (the constexpr ADD).
"""

import sys

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime.norm_baselines import DTYPES

triton, tl, _ = bs.import_triton()
ct, _ = bs.import_cutile()

MAX_N = 16384  # whole rows in registers, as the ports
TILE_ELEMS = 4096  # rows per tile: about this many elements (rows of 1024 and less: several rows a tile)
PROGRAMS_PER_SM = 2


def config(m: int, n: int, sms: int, variant: str = "auto", kernel: str = "norm backward") -> dict:
    """The persistent launch of our kernels: block the power of two >= n (whole rows), rows per tile
    for ~TILE_ELEMS elements, PROGRAMS_PER_SM programs an SM (at most the row tiles), Triton's warps.

    >>> config(16384, 4096, 132), config(100, 1000, 132)["rows"]
    ({'block': 4096, 'rows': 1, 'grid': 264, 'num_warps': 8}, 4)
    """
    bs.check_variant(kernel, variant, ("auto",))
    if n > MAX_N:
        raise ValueError(f"{kernel} baseline: rows of at most {MAX_N} elements (whole rows), got n = {n}")
    block = bs.next_pow2(max(n, bs.MIN_BLOCK))
    rows = max(1, TILE_ELEMS // block)
    grid = max(1, min(-(-m // rows), PROGRAMS_PER_SM * sms))
    return {"block": block, "rows": rows, "grid": grid, "num_warps": 4 if block <= 2048 else 8 if block <= 8192 else 16}


def check_inputs(kernel: str, dy, x, w, dr=None) -> None:
    """ValueError unless x and dy (and dr, where given) are (m, n) of one dtype and w (n,) of that dtype."""
    bs.check_matrix(kernel, "x", x, DTYPES)
    for name, g in (("dy", dy), ("dr", dr)):
        if g is None:
            continue
        bs.check_matrix(kernel, name, g, DTYPES)
        if g.shape != x.shape or g.dtype != x.dtype or tuple(w.shape) != (x.shape[1],) or w.dtype != x.dtype:
            raise ValueError(
                f"{kernel} baseline: {name} must match x {tuple(x.shape)} {x.dtype} and w be ({x.shape[1]},) of that "
                f"dtype, got {name} {tuple(g.shape)} {g.dtype}, w {tuple(w.shape)} {w.dtype}"
            )


def launch(backend: str, kernel: str, dy, x, w, eps: float, centered: bool, dr=None) -> torch.Tensor:
    """The port's one output from our `backend` ("triton" or "cutile") kernel: dx in rows [0, m) (plus
    dr where given), then the per-program f32 partial sums of dw (and db, centered), which torch sums
    into the rows after."""
    check_inputs(kernel, dy, x, w, dr)
    sums = 2 if centered else 1
    (m, n), out = x.shape, torch.empty((x.shape[0] + sums, x.shape[1]), dtype=x.dtype, device=x.device)
    if out.numel():
        cfg = config(m, n, bs.num_sms(x), kernel=kernel)
        part = torch.empty((sums * cfg["grid"], n), dtype=torch.float32, device=x.device)
        add = dr is not None
        run = _triton_launch if backend == "triton" else _cutile_launch
        run(cfg, dy, dr if add else dy, x, w, out[:m], part, eps, centered, add)
        out[m:].copy_(part.view(sums, cfg["grid"], n).sum(1))
    return out


if triton is not None:

    @triton.jit
    def triton_kernel(
        dy_ptr, dr_ptr, x_ptr, w_ptr, dx_ptr, part_ptr, m, n, stride_dy, stride_dr, stride_x, eps,
        ROWS: tl.constexpr, BLOCK: tl.constexpr, CENTERED: tl.constexpr, ADD: tl.constexpr,
    ):  # fmt: skip
        """Row tiles pid, pid + grid, ...: their dx (ADD: plus dr's rows), and the sums of dy * x̂
        (and dy) over them as row pid (and grid + pid) of part."""
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        dw = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        db = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        for tile in range(tl.program_id(0), tl.cdiv(m, ROWS), tl.num_programs(0)):
            rows = (tile * ROWS + tl.arange(0, ROWS)).to(tl.int64)
            mask = (rows < m)[:, None] & col_ok[None, :]
            x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            if CENTERED:
                x = tl.where(mask, x - (tl.sum(x, axis=1) / n)[:, None], 0.0)
            r = tl.rsqrt(tl.sum(x * x, axis=1) / n + eps)[:, None]
            x_hat = x * r
            g = w * dy
            c = (tl.sum(g * x_hat, axis=1) / n)[:, None]
            if CENTERED:
                dx = (g - (tl.sum(g, axis=1) / n)[:, None] - x_hat * c) * r
                db += dy
            else:
                dx = (g - x_hat * c) * r
            if ADD:
                dx += tl.load(dr_ptr + rows[:, None] * stride_dr + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            tl.store(dx_ptr + rows[:, None] * n + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw += dy * x_hat
        tl.store(part_ptr + tl.program_id(0) * n + cols, tl.sum(dw, axis=0), mask=col_ok)
        if CENTERED:
            tl.store(part_ptr + (tl.num_programs(0) + tl.program_id(0)) * n + cols, tl.sum(db, axis=0), mask=col_ok)

    def _triton_launch(cfg, dy, dr, x, w, dx, part, eps, centered, add):
        grid = (cfg["grid"],)
        triton_kernel[grid](
            dy, dr, x, w, dx, part, x.shape[0], x.shape[1], dy.stride(0), dr.stride(0), x.stride(0), eps,
            ROWS=cfg["rows"], BLOCK=cfg["block"], CENTERED=centered, ADD=add, num_warps=cfg["num_warps"],
        )  # fmt: skip


if ct is not None:
    _ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def cutile_kernel(
        DY, DR, X, W, DX, PART, EPS: ct.Constant[float], ROWS: ct.Constant[int], BLOCK: ct.Constant[int],
        CENTERED: ct.Constant[bool], ADD: ct.Constant[bool],
    ):  # fmt: skip
        """Row tiles bid, bid + grid, ...: their dx (ADD: plus DR's rows), and the sums of dy * x̂ (and
        dy) over them as row bid (and grid + bid) of PART."""
        inv_n = ct.full((ROWS, 1), 1.0 / X.shape[1], dtype=ct.float32)
        w = ct.reshape(ct.astype(ct.load(W, index=(0,), shape=(BLOCK,), padding_mode=_ZERO), ct.float32), (1, BLOCK))
        inside = ct.reshape(ct.arange(BLOCK, dtype=ct.int32), (1, BLOCK)) < X.shape[1]
        dw = ct.full((ROWS, BLOCK), 0.0, dtype=ct.float32)
        db = ct.full((ROWS, BLOCK), 0.0, dtype=ct.float32)
        for tile in range(ct.bid(0), ct.cdiv(X.shape[0], ROWS), ct.num_blocks(0)):
            x = ct.astype(ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO, latency=10), ct.float32)
            dy = ct.astype(
                ct.load(DY, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO, latency=10), ct.float32
            )
            if CENTERED:
                x = ct.where(inside, x - ct.sum(x, axis=1, keepdims=True) * inv_n, 0.0)
            r = ct.rsqrt(ct.sum(x * x, axis=1, keepdims=True) * inv_n + EPS)
            x_hat = x * r
            g = w * dy
            c = ct.sum(g * x_hat, axis=1, keepdims=True) * inv_n
            if CENTERED:
                dx = (g - ct.sum(g, axis=1, keepdims=True) * inv_n - x_hat * c) * r
                db = db + dy
            else:
                dx = (g - x_hat * c) * r
            if ADD:
                dx = dx + ct.astype(ct.load(DR, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
            ct.store(DX, index=(tile, 0), tile=ct.astype(dx, DX.dtype), allow_tma=False)
            dw = dw + dy * x_hat
        ct.store(PART, index=(ct.bid(0), 0), tile=ct.sum(dw, axis=0, keepdims=True), allow_tma=False)
        if CENTERED:
            db_row = ct.sum(db, axis=0, keepdims=True)
            ct.store(PART, index=(ct.num_blocks(0) + ct.bid(0), 0), tile=db_row, allow_tma=False)

    def _cutile_launch(cfg, dy, dr, x, w, dx, part, eps, centered, add):
        stream = torch.cuda.current_stream(x.device)
        args = (dy, dr, x, w, dx, part, float(eps), cfg["rows"], cfg["block"], bool(centered), bool(add))
        ct.launch(stream, (cfg["grid"],), cutile_kernel, args)


# -- the libraries' saved statistics ---------------------------------------------------------------

SAVED = bs.ForwardSaved()  # the statistics the libraries' forwards saved, per input x


def saved_stats(x: torch.Tensor, eps: float, centered: bool) -> tuple:
    """(mean, rstd) per row of x, f32 of shape (m,), as PyTorch's, TileGym's and Liger's forwards save
    them (mean None for RMSNorm: rstd = rsqrt(mean(x^2) + eps)); made once per x, eps and norm
    (bs.ForwardSaved), so no baseline is timed with a forward in it."""

    def make():
        xf = x.float()
        if not centered:
            return None, torch.rsqrt(xf.pow(2).mean(-1) + eps)
        var, mean = torch.var_mean(xf, -1, correction=0)
        return mean, torch.rsqrt(var + eps)

    return SAVED.get(x, make, (float(eps), bool(centered)))


# -- a member's own entries and its CPU cases ---------------------------------------------------------


def entries(module: str, centered: bool, torch_entry, added: bool = False) -> dict:
    """A member's own three entries {"cutile", "triton", "torch"} (its BACKENDS unpacks them first:
    scripts/declared_baselines.py reads a call named *entries as those three): our kernels on
    (dy, x, w, eps, *, variant="auto") (`added`: (dy, dr, x, w, eps, ...), dr added to dx), each
    reading the member module's KERNEL, import state and unavailable_reason at the call, and its
    `torch_entry`."""

    def member():
        return sys.modules[module]

    def run(backend, *args, variant):
        m = member()
        bs.require(m.triton if backend == "triton" else m.ct, m.unavailable_reason, backend)
        bs.check_variant(m.KERNEL, variant, ("auto",))
        dy, *dr, x, w, eps = args
        if backend == "cutile":
            bs.require_cuda(m.KERNEL, "x", x)
        return launch(backend, m.KERNEL, dy, x, w, eps, centered, *dr)

    if added:

        def triton_entry(dy, dr, x, w, eps, *, variant="auto"):
            return run("triton", dy, dr, x, w, eps, variant=variant)

        def cutile_entry(dy, dr, x, w, eps, *, variant="auto"):
            return run("cutile", dy, dr, x, w, eps, variant=variant)
    else:

        def triton_entry(dy, x, w, eps, *, variant="auto"):
            return run("triton", dy, x, w, eps, variant=variant)

        def cutile_entry(dy, x, w, eps, *, variant="auto"):
            return run("cutile", dy, x, w, eps, variant=variant)

    kernel = module.rsplit(".", 2)[-2]  # kernels.<kernel>.baselines
    for lang, fn in (("triton", triton_entry), ("cutile", cutile_entry)):
        fn.__name__ = fn.__qualname__ = f"{lang}_{kernel}"
        fn.__doc__ = f"{kernel} with our {lang} kernel, into the port's one output (eps: a compile-time constant of the cuTile one)."
    return {"cutile": cutile_entry, "triton": triton_entry, "torch": torch_entry}


def baseline_cases(spec, eps: float, centered: bool, added: bool = False):
    """A member's BASELINE_CASES (tilekit.runtime.baseline_cases), what tests/kit/test_baselines.py checks
    of its baselines.py on the CPU: our Triton kernel interpreted on irregular rows, padded rows and every
    dtype; torch's entry; bad inputs; the launch plans; our kernels compiled for sm_90."""
    from tilekit.runtime.baseline_cases import H200_SMS as SMS
    from tilekit.runtime.baseline_cases import BaselineCases, Has

    def arrays(
        block: int, rows: int
    ) -> list:  # our cuTile kernel's: DY, DR, X, W, DX, PART, EPS, ROWS, BLOCK, CENTERED, ADD
        return ["A2", "A2", "A2", "A1", "A2", "A2:float32", eps, rows, block, centered, added]

    def args(*tensors):  # the entries' tensor arguments: (dy, x, w), or (dy, dr, x, w) where added
        dy, x, w = tensors
        return (dy, dy.clone(), x, w) if added else (dy, x, w)

    return BaselineCases(
        spec,
        interpreted=[
            ({"m": 5, "n": 100, "dtype": "float32"}, "auto", {}),
            ({"m": 9, "n": 1000, "row_stride": 1040, "dtype": "float16"}, "auto", {}),
            ({"m": 3, "n": 16, "dtype": "bfloat16"}, "auto", {}),
        ],
        torch_case=({"m": 5, "n": 1000, "dtype": "float32"}, 1e-5),
        bad_inputs=[
            (args(torch.randn(2, 4), torch.randn(2, 3, 4), torch.randn(4)), ValueError, "must be 2-D"),
            (args(torch.randn(2, 5), torch.randn(2, 4), torch.randn(4)), ValueError, "dy must match x"),
            (args(torch.randn(2, 4), torch.randn(2, 4), torch.randn(5)), ValueError, r"w be \(4,\)"),
            (args(torch.randn(4, 2).t(), torch.randn(2, 4), torch.randn(4)), ValueError, "last dim must be contiguous"),
        ]
        + (
            [((torch.randn(2, 4), torch.randn(2, 5), torch.randn(2, 4), torch.randn(4)), ValueError, "dr must match x")]
            if added
            else []
        ),
        plans=[
            ("config", (16384, 4096, SMS), {"block": 4096, "rows": 1, "grid": 2 * SMS, "num_warps": 8}),
            ("config", (100, 1000, SMS), Has(block=1024, rows=4, grid=25, num_warps=4)),
            ("config", (8, 16384, SMS), Has(block=16384, rows=1, grid=8, num_warps=16)),
        ],
        plan_errors=[
            ("config", (10, 16385, SMS), {}, "at most 16384"),
            ("config", (10, 100, SMS, "row"), {}, "variant must be one of"),
        ],
        triton_compile=[
            (
                "nb.triton_kernel",
                "bf16",
                {"ROWS": 1, "BLOCK": 4096, "CENTERED": centered, "ADD": added},
                {"num_warps": 8},
            ),
            ("nb.triton_kernel", "fp32", {"ROWS": 4, "BLOCK": 1024, "CENTERED": centered, "ADD": added}),
        ],
        triton_types={"eps": "fp32"},
        cutile_kernels=[
            ("nb.cutile_kernel", "bfloat16", arrays(4096, 1), True),
            ("nb.cutile_kernel", "float32", arrays(1024, 4), False),
        ],
    )
