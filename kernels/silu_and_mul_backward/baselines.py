"""silu_and_mul_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dgate = dy * up * s * (1 + gate * (1 - s)),  dup = dy * gate * s,  s = sigmoid(gate)   (f32 inside)

Entries (dy, x) with x = [gate | up] (m, 2H): ``triton_silu_and_mul_backward`` and
``cutile_silu_and_mul_backward`` (ours: one elementwise pass, ROWS x BLOCK tiles of (m, H)) and
``torch_silu_and_mul_backward`` (the kernels autograd of ``F.silu(gate) * up`` runs: dy * up, then
aten.silu_backward into dgate, and dy * silu(gate) into dup, from the silu(gate) its forward saved)
write one (m, 2H) dx as the port does; TileGym's cuTile backward returns (dgate, dup) apart (checked
side by side: tilekit.runtime.kernel.stacked).
"""

from torch.utils.weak import WeakIdKeyDictionary

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers
from tilekit.runtime.norm_baselines import DTYPES

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "silu_and_mul_backward"
VARIANTS = ("auto",)
TILE_ELEMS = 4096  # elements of (m, H) per program


def config(m: int, h: int, variant: str = "auto") -> dict:
    """One program per ROWS x BLOCK tile of (m, H): BLOCK the power of two >= H up to 2048, ROWS for
    ~TILE_ELEMS elements (at most the rows, rounded up to a power of two).

    >>> config(16384, 14336), config(3, 100)
    ({'block': 2048, 'rows': 2, 'grid': (8192, 7)}, {'block': 128, 'rows': 4, 'grid': (1, 1)})
    """
    bs.check_variant(KERNEL, variant, VARIANTS)
    block = min(2048, bs.next_pow2(max(h, bs.MIN_BLOCK)))
    rows = max(1, min(TILE_ELEMS // block, bs.next_pow2(max(m, 1))))
    return {"block": block, "rows": rows, "grid": (-(-m // rows), -(-h // block))}


def _check_inputs(dy, x) -> None:
    bs.check_matrix(KERNEL, "x", x, DTYPES, "(m, 2H)")
    bs.check_matrix(KERNEL, "dy", dy, DTYPES, "(m, H)")
    if x.shape[1] % 2 or tuple(dy.shape) != (x.shape[0], x.shape[1] // 2) or dy.dtype != x.dtype:
        raise ValueError(
            f"{KERNEL} baseline: x must be (m, 2H) and dy (m, H) of its dtype, got x {tuple(x.shape)} {x.dtype}, "
            f"dy {tuple(dy.shape)} {dy.dtype}"
        )


def _launch(kernel, dy, x):
    """dx (m, 2H) from our kernel, one program per tile of (m, H)."""
    _check_inputs(dy, x)
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if dx.numel():
        kernel(config(*dy.shape), dy, x, dx)
    return dx


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _triton_backward_kernel(
        dy_ptr, x_ptr, dx_ptr, m, h, stride_dy, stride_x, ROWS: tl.constexpr, BLOCK: tl.constexpr
    ):  # fmt: skip
        """dgate and dup of tile (program 0, program 1) of (m, H)."""
        rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]
        cols = (tl.program_id(1) * BLOCK + tl.arange(0, BLOCK))[None, :]
        mask = (rows < m) & (cols < h)
        dy = tl.load(dy_ptr + rows * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(x_ptr + rows * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + rows * stride_x + h + cols, mask=mask, other=0.0).to(tl.float32)
        s = tl.sigmoid(g)
        silu = g * s
        out = dx_ptr.dtype.element_ty
        tl.store(dx_ptr + rows * (2 * h) + cols, (dy * u * (s + silu * (1.0 - s))).to(out), mask=mask)
        tl.store(dx_ptr + rows * (2 * h) + h + cols, (dy * silu).to(out), mask=mask)

    def _triton_kernel(cfg, dy, x, dx):
        _triton_backward_kernel[cfg["grid"]](
            dy, x, dx, dy.shape[0], dy.shape[1], dy.stride(0), x.stride(0), ROWS=cfg["rows"], BLOCK=cfg["block"]
        )


def triton_silu_and_mul_backward(dy: torch.Tensor, x: torch.Tensor, *, variant="auto") -> torch.Tensor:
    """silu_and_mul's gradient with our Triton kernel: dx (m, 2H)."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    return _launch(_triton_kernel, dy, x)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:

    @ct.kernel
    def _cutile_backward_kernel(DY, G, U, DG, DU, ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """dgate and dup of tile (bid 0, bid 1) of (m, H); G, U and DG, DU the halves of x and dx."""
        at, zero = (ct.bid(0), ct.bid(1)), ct.PaddingMode.ZERO
        dy = ct.astype(ct.load(DY, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        g = ct.astype(ct.load(G, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        u = ct.astype(ct.load(U, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        s = 1.0 / (1.0 + ct.exp(-g))
        silu = g * s
        ct.store(DG, index=at, tile=ct.astype(dy * u * (s + silu * (1.0 - s)), DG.dtype), allow_tma=False)
        ct.store(DU, index=at, tile=ct.astype(dy * silu, DU.dtype), allow_tma=False)

    def _cutile_kernel(cfg, dy, x, dx):
        h = dy.shape[1]
        args = (dy, x[:, :h], x[:, h:], dx[:, :h], dx[:, h:], cfg["rows"], cfg["block"])
        ct.launch(torch.cuda.current_stream(x.device), cfg["grid"], _cutile_backward_kernel, args)


def cutile_silu_and_mul_backward(dy: torch.Tensor, x: torch.Tensor, *, variant="auto") -> torch.Tensor:
    """silu_and_mul's gradient with our cuTile Python kernel: dx (m, 2H)."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "x", x)
    return _launch(_cutile_kernel, dy, x)


# -- PyTorch and the libraries ----------------------------------------------------------------------

# What the forward saved for the backward of each input x: silu(gate) for torch's (its mul saves it),
# keyed by the tensor itself, held weakly (rms_norm_backward's baselines.py says why), made once per x
# and reused, as a training step holds it when its backward runs.
SAVED: WeakIdKeyDictionary = WeakIdKeyDictionary()
_SAVED_AT: WeakIdKeyDictionary = WeakIdKeyDictionary()  # x -> its version when saved


def saved_silu(x: torch.Tensor) -> torch.Tensor:
    """F.silu(gate) of x = [gate | up], as autograd of F.silu(gate) * up saves it for the product's
    backward; made once per x (and again if x was written to since)."""
    if _SAVED_AT.get(x) != x._version:
        SAVED[x] = torch.nn.functional.silu(x[:, : x.shape[1] // 2])
        _SAVED_AT[x] = x._version
    return SAVED[x]


def torch_silu_and_mul_backward(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The kernels autograd of F.silu(gate) * up runs (mul's backward: dy * up, and dy * silu(gate)
    from the saved silu; then aten.silu_backward), each writing into its half of one dx (m, 2H)."""
    _check_inputs(dy, x)
    h = dy.shape[1]
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    torch.ops.aten.silu_backward.grad_input(dy * x[:, h:], x[:, :h], grad_input=dx[:, :h])
    torch.mul(dy, saved_silu(x), out=dx[:, h:])
    return dx


def _tilegym(ops, dy, x):
    """TileGym 1.5.1's cuTile silu_and_mul backward (what its autograd function runs, recomputing the
    activation from x): (dgate, dup)."""
    return providers.submodule(ops, "cutile.silu_and_mul")._silu_and_mul_backward(dy, x)


LIGER_REASON = (
    "Liger's swiglu_backward(a, b, dc) takes gate and up as two tensors and writes their gradients into "
    "them in place: x's strided halves would be copied first, and a repeated timed call would run on its "
    "own previous gradients"
)

BACKENDS = {
    "cutile": cutile_silu_and_mul_backward,
    "triton": triton_silu_and_mul_backward,
    "torch": torch_silu_and_mul_backward,
    **providers.backends(tilegym=_tilegym, liger=LIGER_REASON, liger_cutile=LIGER_REASON),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
