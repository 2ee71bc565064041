"""The gated family's gradient baselines (kernels/silu_and_mul_backward, kernels/swiglu_backward): for
out = silu(g) * u over (m, H) gate and up and an output gradient dy, with s = sigmoid(g),

    dg = dy * u * s * (1 + g * (1 - s)),  du = dy * g * s        (f32 inside)

Each member passes (m, H) views: g and u (x's halves, or a and b), dg and du (dx's halves, or the
two row blocks of a (2m, H) output), so one Triton kernel, one cuTile Python kernel and PyTorch's
kernels serve both, each writing dg and du into the member's one output as its port does. Entries:
`launch(backend, dy, g, u, dg, du)`; `torch_kernels(dy, g, u, dg, du, x)`.
"""

import torch

from tilekit.runtime import baseline_support as bs

triton, tl, _ = bs.import_triton()
ct, _ = bs.import_cutile()

TILE_ELEMS = 4096  # elements of (m, H) per program


def config(m: int, h: int, variant: str = "auto", kernel: str = "gated backward") -> dict:
    """One program per ROWS x BLOCK tile of (m, H): BLOCK the power of two >= H up to 2048, ROWS for
    ~TILE_ELEMS elements (at most the rows, rounded up to a power of two).

    >>> config(16384, 14336), config(3, 100)
    ({'block': 2048, 'rows': 2, 'grid': (8192, 7)}, {'block': 128, 'rows': 4, 'grid': (1, 1)})
    """
    bs.check_variant(kernel, variant, ("auto",))
    block = min(2048, bs.next_pow2(max(h, bs.MIN_BLOCK)))
    rows = max(1, min(TILE_ELEMS // block, bs.next_pow2(max(m, 1))))
    return {"block": block, "rows": rows, "grid": (-(-m // rows), -(-h // block))}


if triton is not None:

    @triton.jit
    def triton_kernel(
        dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, m, h, s_dy, s_g, s_u, s_dg, s_du,
        ROWS: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        """dg and du of tile (program 0, program 1) of (m, H), each tensor at its own row stride."""
        rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]
        cols = (tl.program_id(1) * BLOCK + tl.arange(0, BLOCK))[None, :]
        mask = (rows < m) & (cols < h)
        dy = tl.load(dy_ptr + rows * s_dy + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + rows * s_g + cols, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptr + rows * s_u + cols, mask=mask, other=0.0).to(tl.float32)
        s = tl.sigmoid(g)
        silu = g * s
        out = dg_ptr.dtype.element_ty
        tl.store(dg_ptr + rows * s_dg + cols, (dy * u * (s + silu * (1.0 - s))).to(out), mask=mask)
        tl.store(du_ptr + rows * s_du + cols, (dy * silu).to(out), mask=mask)


if ct is not None:

    @ct.kernel
    def cutile_kernel(DY, G, U, DG, DU, ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """dg and du of tile (bid 0, bid 1) of (m, H)."""
        at, zero = (ct.bid(0), ct.bid(1)), ct.PaddingMode.ZERO
        dy = ct.astype(ct.load(DY, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        g = ct.astype(ct.load(G, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        u = ct.astype(ct.load(U, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        s = 1.0 / (1.0 + ct.exp(-g))
        silu = g * s
        ct.store(DG, index=at, tile=ct.astype(dy * u * (s + silu * (1.0 - s)), DG.dtype), allow_tma=False)
        ct.store(DU, index=at, tile=ct.astype(dy * silu, DU.dtype), allow_tma=False)


def launch(backend: str, dy, g, u, dg, du) -> None:
    """Our `backend` ("triton" or "cutile") kernel over the (m, H) views; nothing for an empty one."""
    if not dy.numel():
        return
    cfg = config(*dy.shape)
    tensors = (dy, g, u, dg, du)
    if backend == "triton":
        strides = [t.stride(0) for t in tensors]
        triton_kernel[cfg["grid"]](*tensors, *dy.shape, *strides, ROWS=cfg["rows"], BLOCK=cfg["block"])
    else:
        ct.launch(
            torch.cuda.current_stream(dy.device), cfg["grid"], cutile_kernel, (*tensors, cfg["rows"], cfg["block"])
        )


SAVED = bs.ForwardSaved()  # silu(g) as torch's forward saves it (its mul does), per member input


def saved_silu(source: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """F.silu(g), made once per `source`, the member's input that holds g (x or a; bs.ForwardSaved)."""
    return SAVED.get(source, lambda: torch.nn.functional.silu(g))


def torch_kernels(dy, g, u, dg, du, source) -> None:
    """The kernels autograd of F.silu(g) * u runs, each into its view: mul's backward (dy * u, and
    dy * silu(g) from the saved silu, into du), then aten.silu_backward into dg."""
    torch.ops.aten.silu_backward.grad_input(dy * u, g, grad_input=dg)
    torch.mul(dy, saved_silu(source, g), out=du)


LIGER_REASON = (
    "Liger's swiglu_backward(a, b, dc) takes gate and up as two tensors and writes their gradients into "
    "them in place: a repeated timed call would run on its own previous gradients (and x's strided halves "
    "would be copied first)"
)


def entries(ours: dict) -> dict:
    """A member's own three entries, checked: {"cutile": ..., "triton": ..., "torch": ...} in that
    order (its BACKENDS unpacks them first: scripts/declared_baselines.py reads a call named *entries
    as those three)."""
    if list(ours) != ["cutile", "triton", "torch"]:
        raise ValueError(f"a gated backward member's own entries are cutile, triton, torch; got {list(ours)}")
    return ours


reason_for = bs.reason_for  # a member's unavailable_reason (tilekit.runtime.baseline_support)
