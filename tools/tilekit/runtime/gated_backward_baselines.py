"""The gated family's gradient baselines (kernels/silu_and_mul_backward, kernels/gelu_and_mul_backward,
kernels/swiglu_backward): for out = act(g) * u over (m, H) gate and up and an output gradient dy,
with act(g) = g * s, s = sigmoid(z(g)) (silu: z = g; the tanh GELU: z = k (g + 0.044715 g^3),
k = 2 sqrt(2/pi)),

    dg = dy * u * (s + g * s * (1 - s) * z'(g)),  du = dy * g * s        (f32 inside)

Each member passes (m, H) views: g and u (x's halves, or a and b), dg and du (dx's halves, or the
two row blocks of a (2m, H) output), so one Triton kernel, one cuTile Python kernel and PyTorch's
kernels serve all, each writing dg and du into the member's one output as its port does. Entries:
`launch(backend, dy, g, u, dg, du, act)`; `torch_kernels(dy, g, u, dg, du, x, act)`; a fused
member's own three entries, `fused_entries`.
"""

import sys

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime.norm_baselines import DTYPES

triton, tl, _ = bs.import_triton()
ct, _ = bs.import_cutile()

TILE_ELEMS = 4096  # elements of (m, H) per program
ACTS = {"silu": 0, "gelu_tanh": 1}  # the kernels' ACT (cutile_kernels/src/gated.rs Act)


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
        ROWS: tl.constexpr, BLOCK: tl.constexpr, ACT: tl.constexpr,
    ):  # fmt: skip
        """dg and du of tile (program 0, program 1) of (m, H), each tensor at its own row stride."""
        rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]
        cols = (tl.program_id(1) * BLOCK + tl.arange(0, BLOCK))[None, :]
        mask = (rows < m) & (cols < h)
        dy = tl.load(dy_ptr + rows * s_dy + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + rows * s_g + cols, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptr + rows * s_u + cols, mask=mask, other=0.0).to(tl.float32)
        if ACT == 1:  # the tanh GELU: z = g (k + kc g^2), z' = k + 3 kc g^2
            s = tl.sigmoid(g * (1.5957691216057308 + 0.07135481627260025 * g * g))
            act = g * s
            slope = s + act * (1.0 - s) * (1.5957691216057308 + 0.21406444881780075 * g * g)
        else:
            s = tl.sigmoid(g)
            act = g * s
            slope = s + act * (1.0 - s)
        out = dg_ptr.dtype.element_ty
        tl.store(dg_ptr + rows * s_dg + cols, (dy * u * slope).to(out), mask=mask)
        tl.store(du_ptr + rows * s_du + cols, (dy * act).to(out), mask=mask)


if ct is not None:

    @ct.kernel
    def cutile_kernel(DY, G, U, DG, DU, ROWS: ct.Constant[int], BLOCK: ct.Constant[int], ACT: ct.Constant[int]):
        """dg and du of tile (bid 0, bid 1) of (m, H)."""
        at, zero = (ct.bid(0), ct.bid(1)), ct.PaddingMode.ZERO
        dy = ct.astype(ct.load(DY, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        g = ct.astype(ct.load(G, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        u = ct.astype(ct.load(U, index=at, shape=(ROWS, BLOCK), padding_mode=zero), ct.float32)
        if ACT == 1:  # the tanh GELU
            s = 1.0 / (1.0 + ct.exp(-(g * (1.5957691216057308 + 0.07135481627260025 * g * g))))
            act = g * s
            slope = s + act * (1.0 - s) * (1.5957691216057308 + 0.21406444881780075 * g * g)
        else:
            s = 1.0 / (1.0 + ct.exp(-g))
            act = g * s
            slope = s + act * (1.0 - s)
        ct.store(DG, index=at, tile=ct.astype(dy * u * slope, DG.dtype), allow_tma=False)
        ct.store(DU, index=at, tile=ct.astype(dy * act, DU.dtype), allow_tma=False)


def launch(backend: str, dy, g, u, dg, du, act: str = "silu") -> None:
    """Our `backend` ("triton" or "cutile") kernel over the (m, H) views; nothing for an empty one."""
    if not dy.numel():
        return
    cfg = config(*dy.shape)
    tensors = (dy, g, u, dg, du)
    if backend == "triton":
        strides = [t.stride(0) for t in tensors]
        triton_kernel[cfg["grid"]](*tensors, *dy.shape, *strides, ROWS=cfg["rows"], BLOCK=cfg["block"], ACT=ACTS[act])
    else:
        args = (*tensors, cfg["rows"], cfg["block"], ACTS[act])
        ct.launch(torch.cuda.current_stream(dy.device), cfg["grid"], cutile_kernel, args)


SAVED = bs.ForwardSaved()  # act(g) as torch's forward saves it (its mul does), per member input


def saved_act(source: torch.Tensor, g: torch.Tensor, act: str = "silu") -> torch.Tensor:
    """act(g) (F.silu, or F.gelu's tanh form), made once per `source`, the member's input that holds
    g (x or a; bs.ForwardSaved)."""
    if act not in ACTS:
        raise ValueError(f"unknown activation {act!r}; known: {sorted(ACTS)}")
    f = torch.nn.functional
    return SAVED.get(source, lambda: f.silu(g) if act == "silu" else f.gelu(g, approximate="tanh"), act)


def torch_kernels(dy, g, u, dg, du, source, act: str = "silu") -> None:
    """The kernels autograd of act(g) * u runs, each into its view: mul's backward (dy * u, and
    dy * act(g) from the saved act(g), into du), then aten.silu_backward or aten.gelu_backward (tanh)
    into dg."""
    if act not in ACTS:
        raise ValueError(f"unknown activation {act!r}; known: {sorted(ACTS)}")
    if act == "silu":
        torch.ops.aten.silu_backward.grad_input(dy * u, g, grad_input=dg)
    else:
        torch.ops.aten.gelu_backward.grad_input(dy * u, g, approximate="tanh", grad_input=dg)
    torch.mul(dy, saved_act(source, g, act), out=du)


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


def check_fused(kernel: str, dy, x) -> None:
    """ValueError unless x is (m, 2H) and dy (m, H) of its dtype (a fused member's inputs)."""
    bs.check_matrix(kernel, "x", x, DTYPES, "(m, 2H)")
    bs.check_matrix(kernel, "dy", dy, DTYPES, "(m, H)")
    if x.shape[1] % 2 or tuple(dy.shape) != (x.shape[0], x.shape[1] // 2) or dy.dtype != x.dtype:
        raise ValueError(
            f"{kernel} baseline: x must be (m, 2H) and dy (m, H) of its dtype, got x {tuple(x.shape)} {x.dtype}, "
            f"dy {tuple(dy.shape)} {dy.dtype}"
        )


def fused_entries(module: str, act: str) -> dict:
    """A fused member's own three entries (dy, x) -> dx (m, 2H) = [dgate | dup], {"cutile", "triton",
    "torch"} (its BACKENDS unpacks them first: scripts/declared_baselines.py reads a call named
    *entries as those three): our kernels and PyTorch's for `act`, each reading the member module's
    KERNEL, import state and unavailable_reason at the call."""

    def member():
        return sys.modules[module]

    def into_halves(run, dy, x):
        check_fused(member().KERNEL, dy, x)
        h = dy.shape[1]
        dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        run(dy, x[:, :h], x[:, h:], dx[:, :h], dx[:, h:])
        return dx

    def ours(backend: str, package_name: str):
        def entry(dy, x, *, variant="auto"):
            m = member()
            bs.require(getattr(m, package_name), m.unavailable_reason, backend)
            bs.check_variant(m.KERNEL, variant, ("auto",))
            if backend == "cutile":
                bs.require_cuda(m.KERNEL, "x", x)
            return into_halves(lambda *views: launch(backend, *views, act=act), dy, x)

        return entry

    def torch_entry(dy, x):
        return into_halves(lambda *views: torch_kernels(*views, x, act=act), dy, x)

    kernel = module.rsplit(".", 2)[-2]  # kernels.<kernel>.baselines
    made = {"cutile": ours("cutile", "ct"), "triton": ours("triton", "triton"), "torch": torch_entry}
    for backend, fn in made.items():
        fn.__name__ = fn.__qualname__ = f"{backend}_{kernel}"
        fn.__doc__ = f"{kernel} with {'PyTorch' if backend == 'torch' else 'our ' + backend}'s kernels: dx (m, 2H)."
    return made
