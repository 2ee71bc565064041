"""cross_entropy baselines: the implementations the cuTile Rust port (op.py) is timed against.

    loss = lse - (1 - ε) x[t] - (ε / n) sum(x)      per row; 0 where t == ignore_index

Entries (logits, target, ignore_index, label_smoothing), the port's arguments, each returning the
rows' losses (m,): ours, ``triton_cross_entropy`` and ``cutile_cross_entropy`` (the port's
algorithm: one program per tile of ROWS rows, BLOCK-wide column tiles read once for the online max
and sum of exp, the row's sum and its target's logit; float32 losses), ``torch_cross_entropy``
(F.cross_entropy(reduction="none"), eager: one fused aten kernel chain) and its torch.compile;
Liger's Triton and cuTile LigerCrossEntropyFunction and TileGym's cuTile one (1.5.1's Liger suite),
reduction "none" on logits that do not require grad (their loss-only pass; losses in the logits'
dtype). The kernels take GRAD: with it they also write the gradient in a second pass over the row
(kernels/cross_entropy_backward's baselines use them so).
"""

import torch
import torch.nn.functional as F

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "cross_entropy"
VARIANTS = ("auto",)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
BLOCK_MAX = 4096  # column tile of vocabulary rows
TILE_ELEMS = 4096  # rows per program: about this many elements


def config(m: int, n: int, variant: str = "auto") -> dict:
    """One program per tile of ROWS rows: BLOCK the power of two >= n up to BLOCK_MAX (wider rows
    loop over BLOCK_MAX-wide column tiles), ROWS for ~TILE_ELEMS elements (at most m's power of two).

    >>> config(4096, 128256), config(3, 100)
    ({'block': 4096, 'rows': 1, 'grid': 4096}, {'block': 128, 'rows': 4, 'grid': 1})
    """
    bs.check_variant(KERNEL, variant, VARIANTS)
    block = min(BLOCK_MAX, bs.next_pow2(max(n, bs.MIN_BLOCK)))
    rows = max(1, min(TILE_ELEMS // block, bs.next_pow2(max(m, 1))))
    return {"block": block, "rows": rows, "grid": -(-m // rows)}


def check_inputs(kernel: str, logits, target) -> None:
    """logits (m, n) f16/bf16/f32 with a contiguous last dim, target (m,) int32/int64; ValueError else."""
    bs.check_matrix(kernel, "logits", logits, DTYPES)
    if not isinstance(target, torch.Tensor) or target.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{kernel} baseline: target must be an int32 or int64 tensor, got {target!r:.60}")
    if tuple(target.shape) != (logits.shape[0],):
        raise ValueError(f"{kernel} baseline: target must be ({logits.shape[0]},), a class id per row of logits")


def _check_inputs(logits, target) -> None:
    check_inputs(KERNEL, logits, target)


def rows(kernel_of, logits, target, ignore_index, smoothing, grad=None, scale=None):
    """Our kernel `kernel_of` (Triton's or cuTile's) over the rows: the f32 losses (m,); with `grad`
    (m, n, contiguous) the gradient too, each row scaled by `scale` ((1,) or (m,) f32)."""
    losses = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
    if losses.numel():
        kernel_of(config(*logits.shape), logits, target, int(ignore_index), float(smoothing), losses, grad, scale)
    return losses


def torch_cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):
    """PyTorch's loss per row (F.cross_entropy, reduction "none"), in the logits' dtype."""
    _check_inputs(logits, target)
    return F.cross_entropy(logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none")


_compiled = None


def torch_compile_cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):
    """torch_cross_entropy under torch.compile (default mode, static shapes; a recompile limit of 64
    so no shape falls back to eager)."""
    global _compiled
    _check_inputs(logits, target)
    if _compiled is None:
        bs.raise_recompile_limit(64)
        _compiled = torch.compile(F.cross_entropy, dynamic=False)
    return _compiled(logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none")


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _triton_kernel(
        x_ptr, t_ptr, loss_ptr, g_ptr, s_ptr, m, n, stride_x, stride_t, stride_s, ignore_index, keep, spread,
        ROWS: tl.constexpr, BLOCK: tl.constexpr, GRAD: tl.constexpr,
    ):  # fmt: skip
        """Row tile program 0: the online max/sum of exp, sum(x) and x[t] per row, the loss; with
        GRAD the gradient (rows n apart), scaled by the row's scale."""
        rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
        row_ok = rows < m
        t = tl.load(t_ptr + rows * stride_t, mask=row_ok, other=ignore_index).to(tl.int32)
        ignored = t == ignore_index
        cols = tl.arange(0, BLOCK)[None, :]
        run_max = tl.full([ROWS, BLOCK], -3.4028235e38, tl.float32)
        run_sum = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        sum_x = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        x_t = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        for c0 in range(0, n, BLOCK):
            mask = row_ok[:, None] & (c0 + cols < n)
            x = tl.load(x_ptr + rows[:, None] * stride_x + c0 + cols, mask=mask, other=float("-inf")).to(tl.float32)
            new_max = tl.maximum(run_max, x)
            run_sum = run_sum * tl.exp(run_max - new_max) + tl.exp(x - new_max)
            run_max = new_max
            sum_x += tl.where(mask, x, 0.0)
            x_t += tl.where(c0 + cols == t[:, None], x, 0.0)
        row_max = tl.max(run_max, axis=1)
        total = tl.sum(run_sum * tl.exp(run_max - row_max[:, None]), axis=1)
        loss = row_max + tl.log(total) - keep * tl.sum(x_t, axis=1) - spread * tl.sum(sum_x, axis=1)
        tl.store(loss_ptr + rows, tl.where(ignored, 0.0, loss), mask=row_ok)
        if GRAD:
            g = tl.where(ignored, 0.0, tl.load(s_ptr + rows * stride_s, mask=row_ok, other=0.0))[:, None]
            coef = g / total[:, None]
            for c0 in range(0, n, BLOCK):
                mask = row_ok[:, None] & (c0 + cols < n)
                x = tl.load(x_ptr + rows[:, None] * stride_x + c0 + cols, mask=mask, other=0.0).to(tl.float32)
                dx = tl.exp(x - row_max[:, None]) * coef - g * spread - tl.where(c0 + cols == t[:, None], g * keep, 0.0)
                tl.store(g_ptr + rows[:, None] * n + c0 + cols, dx.to(g_ptr.dtype.element_ty), mask=mask)

    def triton_rows(cfg, logits, target, ignore_index, smoothing, losses, grad, scale):
        n = logits.shape[1]
        _triton_kernel[(cfg["grid"],)](
            logits, target, losses, grad if grad is not None else logits, scale if scale is not None else losses,
            logits.shape[0], n, logits.stride(0), target.stride(0),
            0 if scale is None or scale.numel() == 1 else scale.stride(0), ignore_index, 1.0 - smoothing,
            smoothing / n, ROWS=cfg["rows"], BLOCK=cfg["block"], GRAD=grad is not None,
            num_warps=8 if cfg["block"] >= 2048 else 4,
        )  # fmt: skip


def triton_cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, *, variant="auto"):
    """The rows' losses (m,) f32 with our Triton kernel."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    _check_inputs(logits, target)
    return rows(triton_rows, logits, target, ignore_index, label_smoothing)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    _NEG_INF = ct.PaddingMode.NEG_INF

    @ct.kernel
    def _cutile_kernel(
        X, T, LOSS, G, S, ignore_index: int, smoothing: float, ROWS: ct.Constant[int], BLOCK: ct.Constant[int],
        GRAD: ct.Constant[bool],
    ):  # fmt: skip
        """Row tile bid: the online max/sum of exp, sum(x) and x[t] per row, the loss; with GRAD the
        gradient, scaled by the row's scale (S: one a row)."""
        rt = ct.bid(0)
        n = X.shape[1]
        keep = 1.0 - smoothing
        spread = smoothing / n
        rows = rt * ROWS + ct.arange(ROWS, dtype=ct.int32)
        t = ct.astype(ct.gather(T, rows), ct.int32).reshape((ROWS, 1))
        ignored = (t == ignore_index) | (rows.reshape((ROWS, 1)) >= X.shape[0])  # a row past m counts as ignored
        cols = ct.arange(BLOCK, dtype=ct.int32).reshape((1, BLOCK))
        run_max = ct.full((ROWS, BLOCK), -3.4028235e38, dtype=ct.float32)
        run_sum = ct.full((ROWS, BLOCK), 0.0, dtype=ct.float32)
        sum_x = ct.full((ROWS, BLOCK), 0.0, dtype=ct.float32)
        x_t = ct.full((ROWS, BLOCK), 0.0, dtype=ct.float32)
        for j in range(ct.cdiv(n, BLOCK)):
            x = ct.astype(ct.load(X, index=(rt, j), shape=(ROWS, BLOCK), padding_mode=_NEG_INF), ct.float32)
            new_max = ct.maximum(run_max, x)
            run_sum = run_sum * ct.exp(run_max - new_max) + ct.exp(x - new_max)
            run_max = new_max
            c = cols + j * BLOCK
            sum_x = sum_x + ct.where(c < n, x, 0.0)
            x_t = x_t + ct.where(c == t, x, 0.0)
        row_max = ct.max(run_max, axis=1, keepdims=True)
        total = ct.sum(run_sum * ct.exp(run_max - row_max), axis=1, keepdims=True)
        loss = row_max + ct.log(total) - keep * ct.sum(x_t, axis=1, keepdims=True)
        loss = loss - spread * ct.sum(sum_x, axis=1, keepdims=True)
        ct.scatter(LOSS, rows, ct.where(ignored, 0.0, loss).reshape((ROWS,)))
        if GRAD:
            scale = ct.gather(S, rows).reshape((ROWS, 1))
            g = ct.where(ignored, 0.0, scale)
            coef = g / total
            for j in range(ct.cdiv(n, BLOCK)):
                x = ct.astype(ct.load(X, index=(rt, j), shape=(ROWS, BLOCK), padding_mode=_NEG_INF), ct.float32)
                hit = ct.where(cols + j * BLOCK == t, g * keep, 0.0)
                dx = ct.exp(x - row_max) * coef - g * spread - hit
                ct.store(G, index=(rt, j), tile=ct.astype(dx, G.dtype))

    def cutile_rows(cfg, logits, target, ignore_index, smoothing, losses, grad, scale):
        scale = losses if scale is None else scale.expand(logits.shape[0])  # one scale: every row reads it
        args = (
            logits, target, losses, grad if grad is not None else logits, scale,
            ignore_index, smoothing, cfg["rows"], cfg["block"], grad is not None,
        )  # fmt: skip
        ct.launch(torch.cuda.current_stream(logits.device), (cfg["grid"],), _cutile_kernel, args)


def cutile_cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, *, variant="auto"):
    """The rows' losses (m,) f32 with our cuTile Python kernel."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    _check_inputs(logits, target)
    bs.require_cuda(KERNEL, "logits", logits)
    return rows(cutile_rows, logits, target, ignore_index, label_smoothing)


# -- the libraries: their loss-only pass (logits that do not require grad) ----------------------------


def _liger(ops, logits, target, ignore_index=-100, label_smoothing=0.0):
    """Liger's LigerCrossEntropyFunction (Triton or cuTile: `ops`), reduction "none"."""
    function = providers.submodule(ops, "cross_entropy").LigerCrossEntropyFunction
    return function.apply(logits, target, None, ignore_index, 0.0, label_smoothing, "none")[0]


def _tilegym(ops, logits, target, ignore_index=-100, label_smoothing=0.0):
    """TileGym 1.5.1's cuTile cross entropy from its Liger suite, reduction "none"."""
    suite = providers.package_module(ops, "suites.liger")
    return suite.cross_entropy(logits, target, ignore_index, label_smoothing, "none")


BACKENDS = {
    "cutile": cutile_cross_entropy,
    "triton": triton_cross_entropy,
    "torch": torch_cross_entropy,
    "torch_compile": torch_compile_cross_entropy,
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger),
}
unavailable_reason = bs.reason_for(__name__)
