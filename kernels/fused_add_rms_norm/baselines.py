"""fused_add_rms_norm baselines: the implementations the cuTile Rust port (op.py) is timed against.

    s = x + residual;  y = s * rsqrt(mean(s^2) + eps) * w      (f32 inside; y and s in x's dtype)

Entries (x, residual, w, eps): ours, ``triton_fused_add_rms_norm`` and ``cutile_fused_add_rms_norm``
(the port's algorithm: one program per tile of ROWS whole rows, s stored then normalized), each
returning the port's one (2, m, n) output (y, then s); ``torch_fused_add_rms_norm`` (the two ops a
model runs: the add, then PyTorch's fused RMSNorm) and ``torch_compile_fused_add_rms_norm`` (that
formula under torch.compile, which fuses it into one Triton kernel), each returning (y, s); Liger's
Triton and cuTile `LigerFusedAddRMSNormFunction` (Llama's casting mode, not in place) and TileGym's
cuTile one (1.5.1's Liger suite, `tilegym.suites.liger.fused_add_rms_norm`), each returning (y, s).
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "fused_add_rms_norm"
VARIANTS = ("auto",)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_BLOCK = 16384  # rows held whole, as the port's
TILE_ELEMS = 8192  # rows per program: about this many elements


def config(m: int, n: int, variant: str = "auto") -> dict:
    """One program per tile of ROWS whole rows: BLOCK the power of two >= n (at most MAX_BLOCK), ROWS
    for ~TILE_ELEMS elements (at most m's power of two).

    >>> config(16384, 4096), config(3, 100)
    ({'block': 4096, 'rows': 2, 'grid': 8192}, {'block': 128, 'rows': 4, 'grid': 1})
    """
    bs.check_variant(KERNEL, variant, VARIANTS)
    block = bs.next_pow2(max(n, bs.MIN_BLOCK))
    if block > MAX_BLOCK:
        raise ValueError(f"{KERNEL} baseline: rows of at most {MAX_BLOCK} elements (held whole), got n = {n}")
    rows = max(1, min(TILE_ELEMS // block, bs.next_pow2(max(m, 1))))
    return {"block": block, "rows": rows, "grid": -(-m // rows)}


def _check_inputs(x, r, w) -> torch.Tensor:
    """Validate (x, residual, w); return w as a contiguous vector (n elements: copying is free)."""
    bs.check_matrix(KERNEL, "x", x, DTYPES)
    bs.check_matrix(KERNEL, "residual", r, DTYPES)
    if r.shape != x.shape or r.dtype != x.dtype:
        raise ValueError(
            f"{KERNEL} baseline: residual must match x {tuple(x.shape)} {x.dtype}, got {tuple(r.shape)} {r.dtype}"
        )
    if tuple(w.shape) != (x.shape[1],) or w.dtype != x.dtype or w.device != x.device:
        raise (TypeError if w.dtype != x.dtype else ValueError)(
            f"{KERNEL} baseline: w must have shape ({x.shape[1]},) and x's dtype and device ({x.dtype} on "
            f"{x.device}), got {tuple(w.shape)} {w.dtype} on {w.device}"
        )
    return w.contiguous()


def _launch(kernel_of, x, r, w, eps):
    w = _check_inputs(x, r, w)
    out = torch.empty((2, *x.shape), dtype=x.dtype, device=x.device)
    if x.numel():
        kernel_of(config(*x.shape), x, r, w, float(eps), out[0], out[1])
    return out


def torch_fused_add_rms_norm(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, eps: float):
    """The pair as a model runs it in eager PyTorch: s = x + residual, then the fused RMSNorm of s."""
    s = x + r
    return torch.nn.functional.rms_norm(s, (s.shape[-1],), w, eps), s


_compiled = None


def torch_compile_fused_add_rms_norm(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, eps: float):
    """torch_fused_add_rms_norm's formula under torch.compile (default mode, static shapes: one
    Triton kernel per shape, compiled at the first call of each; a recompile limit of 64 so no shape
    falls back to eager)."""
    global _compiled
    if _compiled is None:
        bs.raise_recompile_limit(64)
        _compiled = torch.compile(torch_fused_add_rms_norm, dynamic=False)
    return _compiled(x, r, w, eps)


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _triton_kernel(
        x_ptr, r_ptr, w_ptr, y_ptr, s_ptr, m, n, stride_x, stride_r, stride_y, stride_s, eps,
        ROWS: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        """Row tile program 0: s = x + residual (stored, rounded), then y = s * rstd * w."""
        rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]
        cols = tl.arange(0, BLOCK)[None, :]
        mask = (rows < m) & (cols < n)
        x = tl.load(x_ptr + rows * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + rows * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        s = (x + r).to(s_ptr.dtype.element_ty)
        tl.store(s_ptr + rows * stride_s + cols, s, mask=mask)
        s = s.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(s * s, axis=1) / n + eps)[:, None]
        w = tl.load(w_ptr + cols, mask=cols < n, other=0.0).to(tl.float32)
        tl.store(y_ptr + rows * stride_y + cols, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)

    def _triton(cfg, x, r, w, eps, y, s):
        _triton_kernel[(cfg["grid"],)](
            x, r, w, y, s, *x.shape, x.stride(0), r.stride(0), y.stride(0), s.stride(0), eps,
            ROWS=cfg["rows"], BLOCK=cfg["block"], num_warps=8 if cfg["rows"] * cfg["block"] >= 4096 else 4,
        )  # fmt: skip


def triton_fused_add_rms_norm(x, r, w, eps, *, variant="auto") -> torch.Tensor:
    """The pair with our Triton kernel: (2, m, n), y then s."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    return _launch(_triton, x, r, w, eps)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    _ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def _cutile_kernel(X, R, W, Y, S, eps: ct.Constant[float], ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """Row tile bid: s = x + residual (stored, rounded), then y = s * rstd * w. W: (1, n)."""
        at, n = (ct.bid(0), 0), X.shape[1]
        x = ct.astype(ct.load(X, index=at, shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
        r = ct.astype(ct.load(R, index=at, shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
        s_t = ct.astype(x + r, S.dtype)
        ct.store(S, index=at, tile=s_t, allow_tma=False)
        s = ct.astype(s_t, ct.float32)
        w = ct.astype(ct.load(W, index=(0, 0), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
        y = s * ct.rsqrt(ct.sum(s * s, axis=1, keepdims=True) / n + eps) * w
        ct.store(Y, index=at, tile=ct.astype(y, Y.dtype), allow_tma=False)

    def _cutile(cfg, x, r, w, eps, y, s):
        args = (x, r, w.view(1, -1), y, s, eps, cfg["rows"], cfg["block"])
        ct.launch(torch.cuda.current_stream(x.device), (cfg["grid"],), _cutile_kernel, args)


def cutile_fused_add_rms_norm(x, r, w, eps, *, variant="auto") -> torch.Tensor:
    """The pair with our cuTile Python kernel: (2, m, n), y then s."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "x", x)
    return _launch(_cutile, x, r, w, eps)


# -- the libraries --------------------------------------------------------------------------------


def _liger(ops, x, r, w, eps):
    """Liger's LigerFusedAddRMSNormFunction (Triton or cuTile: `ops`) as Llama's: offset 0, casting
    mode "llama" (the inverse RMS in f32), not in place; returns (y, s)."""
    function = providers.submodule(ops, "fused_add_rms_norm").LigerFusedAddRMSNormFunction
    return function.apply(x, r, w, eps, 0.0, "llama", False)


def _tilegym(ops, x, r, w, eps):
    """TileGym 1.5.1's cuTile fused add + RMSNorm, from its Liger suite (the `cutile` backend that
    the provider selected); returns (y, s)."""
    return providers.package_module(ops, "suites.liger").fused_add_rms_norm(x, r, w, eps)


BACKENDS = {
    "cutile": cutile_fused_add_rms_norm,
    "triton": triton_fused_add_rms_norm,
    "torch": torch_fused_add_rms_norm,
    "torch_compile": torch_compile_fused_add_rms_norm,
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger),
}
unavailable_reason = bs.reason_for(__name__)
