"""softmax_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dx = y * (dy - sum(y * dy, -1))        (f32 inside; y the forward's output)

Entries (dy, y), each returning dx (m, n): ours, ``triton_softmax_backward`` and
``cutile_softmax_backward`` (the port's algorithm: one program per tile of ROWS rows, whole rows up to
8192 columns, wider rows in BLOCK-wide column tiles read twice, the sum first), and
``torch_softmax_backward`` (aten._softmax_backward_data, what autograd of torch.softmax runs); Liger's
Triton and cuTile softmax backwards (its Triton one serves rows of one 64K block at most). TileGym
1.5.1's cuTile softmax has no backward.
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "softmax_backward"
VARIANTS = ("auto",)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
WHOLE_MAX = 8192  # widest row held whole; wider rows loop over LOOPED_BLOCK-wide column tiles
LOOPED_BLOCK = 4096
TILE_ELEMS = 4096  # rows per program: about this many elements
LIGER_TRITON_MAX_N = 65536  # liger_kernel.ops.utils.calculate_settings: one power-of-two block per row
TILEGYM_REASON = "TileGym 1.5.1's cuTile softmax has no backward"


def config(m: int, n: int, variant: str = "auto") -> dict:
    """One program per tile of ROWS rows: BLOCK the power of two >= n up to WHOLE_MAX (rows whole),
    else LOOPED_BLOCK (column tiles, `looped`); ROWS for ~TILE_ELEMS elements (at most m's power of two).

    >>> config(32768, 4096), config(4096, 128256)
    ({'block': 4096, 'rows': 1, 'looped': False, 'grid': 32768}, {'block': 4096, 'rows': 1, 'looped': True, 'grid': 4096})
    """
    bs.check_variant(KERNEL, variant, VARIANTS)
    whole = bs.next_pow2(max(n, bs.MIN_BLOCK))
    block = whole if whole <= WHOLE_MAX else LOOPED_BLOCK
    rows = max(1, min(TILE_ELEMS // block, bs.next_pow2(max(m, 1))))
    return {"block": block, "rows": rows, "looped": block < n, "grid": -(-m // rows)}


def _check_inputs(dy, y) -> None:
    bs.check_matrix(KERNEL, "y", y, DTYPES)
    bs.check_matrix(KERNEL, "dy", dy, DTYPES)
    if dy.shape != y.shape or dy.dtype != y.dtype:
        raise ValueError(
            f"{KERNEL} baseline: dy must match y {tuple(y.shape)} {y.dtype}, got dy {tuple(dy.shape)} {dy.dtype}"
        )


def _launch(kernel_of, dy, y):
    _check_inputs(dy, y)
    dx = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    if dx.numel():
        kernel_of(config(*y.shape), dy, y, dx)
    return dx


def torch_softmax_backward(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch's softmax backward (aten._softmax_backward_data over the last dim), from y."""
    _check_inputs(dy, y)
    return torch.ops.aten._softmax_backward_data(dy, y, -1, y.dtype)


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _triton_backward_kernel(
        dy_ptr, y_ptr, dx_ptr, m, n, stride_dy, stride_y,
        ROWS: tl.constexpr, BLOCK: tl.constexpr, LOOPED: tl.constexpr,
    ):  # fmt: skip
        """Row tile program 0: the sum of y * dy over each row, then dx (dx's rows n apart)."""
        rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]
        cols = tl.arange(0, BLOCK)[None, :]
        row_ok = rows < m
        if LOOPED:
            acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
            for c0 in range(0, n, BLOCK):
                mask = row_ok & (c0 + cols < n)
                y = tl.load(y_ptr + rows * stride_y + c0 + cols, mask=mask, other=0.0).to(tl.float32)
                dy = tl.load(dy_ptr + rows * stride_dy + c0 + cols, mask=mask, other=0.0).to(tl.float32)
                acc += y * dy
            dot = tl.sum(acc, axis=1)[:, None]
            for c0 in range(0, n, BLOCK):
                mask = row_ok & (c0 + cols < n)
                y = tl.load(y_ptr + rows * stride_y + c0 + cols, mask=mask, other=0.0).to(tl.float32)
                dy = tl.load(dy_ptr + rows * stride_dy + c0 + cols, mask=mask, other=0.0).to(tl.float32)
                dx = y * (dy - dot)
                tl.store(dx_ptr + rows * n + c0 + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        else:
            mask = row_ok & (cols < n)
            y = tl.load(y_ptr + rows * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + rows * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
            dx = y * (dy - tl.sum(y * dy, axis=1)[:, None])
            tl.store(dx_ptr + rows * n + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)

    def _triton_kernel(cfg, dy, y, dx):
        _triton_backward_kernel[(cfg["grid"],)](
            dy, y, dx, y.shape[0], y.shape[1], dy.stride(0), y.stride(0),
            ROWS=cfg["rows"], BLOCK=cfg["block"], LOOPED=cfg["looped"], num_warps=8 if cfg["block"] >= 2048 else 4,
        )  # fmt: skip


def triton_softmax_backward(dy: torch.Tensor, y: torch.Tensor, *, variant="auto") -> torch.Tensor:
    """softmax's gradient with our Triton kernel: dx (m, n)."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    return _launch(_triton_kernel, dy, y)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    _ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def _cutile_backward_kernel(DY, Y, DX, ROWS: ct.Constant[int], BLOCK: ct.Constant[int], LOOPED: ct.Constant[bool]):
        """Row tile bid: the sum of y * dy over each row, then dx."""
        rt = ct.bid(0)
        if LOOPED:
            acc = ct.full((ROWS, BLOCK), 0.0, dtype=ct.float32)
            for j in range(ct.cdiv(Y.shape[1], BLOCK)):
                y = ct.astype(ct.load(Y, index=(rt, j), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
                dy = ct.astype(ct.load(DY, index=(rt, j), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
                acc = acc + y * dy
            dot = ct.sum(acc, axis=1, keepdims=True)
            for j in range(ct.cdiv(Y.shape[1], BLOCK)):
                y = ct.astype(ct.load(Y, index=(rt, j), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
                dy = ct.astype(ct.load(DY, index=(rt, j), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
                ct.store(DX, index=(rt, j), tile=ct.astype(y * (dy - dot), DX.dtype))
        else:
            y = ct.astype(ct.load(Y, index=(rt, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
            dy = ct.astype(ct.load(DY, index=(rt, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
            ct.store(DX, index=(rt, 0), tile=ct.astype(y * (dy - ct.sum(y * dy, axis=1, keepdims=True)), DX.dtype))

    def _cutile_kernel(cfg, dy, y, dx):
        stream = torch.cuda.current_stream(y.device)
        ct.launch(
            stream, (cfg["grid"],), _cutile_backward_kernel, (dy, y, dx, cfg["rows"], cfg["block"], cfg["looped"])
        )


def cutile_softmax_backward(dy: torch.Tensor, y: torch.Tensor, *, variant="auto") -> torch.Tensor:
    """softmax's gradient with our cuTile Python kernel: dx (m, n)."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "y", y)
    return _launch(_cutile_kernel, dy, y)


# -- the libraries --------------------------------------------------------------------------------


def _liger(ops, dy, y):
    """Liger's Triton softmax backward, with the block and warps its forward picks (0.8.5's
    liger_kernel.ops.utils.calculate_settings on CUDA: the power of two >= n; 4 warps, 8 from 2048
    lanes, 16 from 8192, 32 from 32768), which refuses rows past one 64K block."""
    if y.shape[-1] > LIGER_TRITON_MAX_N:
        raise bs.NotServed(
            f"Liger's Triton softmax serves rows of at most {LIGER_TRITON_MAX_N} (one block per row); n = {y.shape[-1]}"
        )
    block = bs.next_pow2(y.shape[-1])
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return providers.submodule(ops, "softmax")._softmax_backward(dy, y, block, warps, False)


def _liger_cutile(ops, dy, y):
    """Liger's cuTile softmax backward (its autograd function's)."""
    return providers.submodule(ops, "softmax")._softmax_backward_ct(dy, y)


BACKENDS = {
    "cutile": cutile_softmax_backward,
    "triton": triton_softmax_backward,
    "torch": torch_softmax_backward,
    **providers.backends(tilegym=TILEGYM_REASON, liger=_liger, liger_cutile=_liger_cutile),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
