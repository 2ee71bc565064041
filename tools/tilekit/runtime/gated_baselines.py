"""The gated family's Triton and cuTile Python kernels and entries (silu_and_mul, gelu_and_mul: x =
[gate | up], "fused"; swiglu: gate and up apart, "split"): out (m, H) = act(G) * U, f32 inside,
the activation a compile-time constant (tilekit.runtime.gated.ACTS, the port's `Act`). A member's
baselines.py takes its two entries of our kernels from `fused_entries` (or `split_entries`) with
its kernel name, variants and activation. Plans are tilekit.runtime.gated's: "tiled" / "wide" (one ROWS x BLOCK
output tile per program) and, fused only, "row" (one row per program, BLOCK-wide column tiles).
Imports without triton or cuda.tile; the kernels of a missing package are then not defined and
its entries raise the member's unavailable reason.
"""

import functools

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated

triton, tl, _ = bs.import_triton()
ct, _ = bs.import_cutile()

DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # every member's
FUSED_VARIANTS = ("auto", "tiled", "wide", "row")
SPLIT_VARIANTS = ("auto", "tiled", "wide")

# -- Triton ---------------------------------------------------------------------------------------

if triton is not None:
    from tilekit.runtime.triton_tiles import output_tile

    @triton.jit
    def act_mul(g, u, ACT: tl.constexpr):
        """act(g) * u in f32: act(g) = g * sigmoid(s), s = g (SiLU, ACT 0) or 2 sqrt(2/pi) (g +
        0.044715 g^3) (tanh GELU, ACT 1: 0.5 (1 + tanh(z)) = sigmoid(2z)). sigmoid as 1 / (1 +
        exp(-s)): exp(-s) = inf for very negative s gives 0, not NaN."""
        if ACT == 1:
            s = g * (1.5957691216057308 + 0.07135481627260025 * g * g)
        else:
            s = g
        return g / (1.0 + tl.exp(-s)) * u

    @triton.jit
    def fused_tiled_kernel(
        x_ptr, y_ptr, m, h, stride_x, stride_y, ACT: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr
    ):
        """One ROWS x BLOCK output tile per program; the 1-D program id walks column tiles fastest."""
        rows, cols, mask = output_tile(m, h, ROWS, BLOCK)
        gate = x_ptr + rows * stride_x + cols[None, :]
        out = y_ptr + rows * stride_y + cols[None, :]
        # x and out are touched once: evict_first keeps them from displacing anything useful.
        g = tl.load(gate, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        u = tl.load(gate + h, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        y = act_mul(g, u, ACT).to(y_ptr.dtype.element_ty)
        tl.store(out, y, mask=mask, eviction_policy="evict_first")

    @triton.jit
    def fused_row_kernel(x_ptr, y_ptr, h, stride_x, stride_y, ACT: tl.constexpr, BLOCK: tl.constexpr):
        """One row per program, BLOCK-wide chunks."""
        row = tl.program_id(0).to(tl.int64)
        x_row, y_row = x_ptr + row * stride_x, y_ptr + row * stride_y
        cols = tl.arange(0, BLOCK)
        for start in range(0, h, BLOCK):
            ok = start + cols < h
            g = tl.load(x_row + start + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            u = tl.load(x_row + h + start + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            y = act_mul(g, u, ACT).to(y_ptr.dtype.element_ty)
            tl.store(y_row + start + cols, y, mask=ok, eviction_policy="evict_first")

    @triton.jit
    def split_tiled_kernel(
        a_ptr,
        b_ptr,
        y_ptr,
        m,
        h,
        stride_a,
        stride_y,
        stride_b,
        ACT: tl.constexpr,
        ROWS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """One ROWS x BLOCK output tile per program of act(a) * b, a and b in rows of their own."""
        rows, cols, mask = output_tile(m, h, ROWS, BLOCK)
        g = tl.load(a_ptr + rows * stride_a + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        u = tl.load(b_ptr + rows * stride_b + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        y = act_mul(g.to(tl.float32), u.to(tl.float32), ACT).to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + rows * stride_y + cols, y, mask=mask, eviction_policy="evict_first")

    _FUSED = {"tiled": fused_tiled_kernel, "wide": fused_tiled_kernel, "row": fused_row_kernel}


# -- cuTile Python --------------------------------------------------------------------------------

if ct is not None:
    _ZERO = ct.PaddingMode.ZERO
    _APPROX = ct.RoundingMode.APPROX

    def _act_mul_tile(g, u, ACT):
        # Triton's act_mul: 1 / (1 + exp(-s)) saturates to 0 for very negative s, never NaN.
        s = g
        if ACT == 1:
            s = g * (1.5957691216057308 + 0.07135481627260025 * g * g)
        sig = ct.truediv(1.0, 1.0 + ct.exp(-s), flush_to_zero=True, rounding_mode=_APPROX)
        return g * sig * u

    @ct.kernel
    def _cutile_tiled_kernel(G, U, Y, ACT: ct.Constant[int], ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """One ROWS x BLOCK output tile per program of the (m, H) gate and up arrays (fused: x's
        halves). Out-of-range lanes read zero and their stores are dropped."""
        col_tiles = ct.cdiv(G.shape[1], BLOCK)
        pid = ct.bid(0)
        rt = pid // col_tiles
        c = pid - rt * col_tiles
        g = ct.astype(ct.load(G, index=(rt, c), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
        u = ct.astype(ct.load(U, index=(rt, c), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
        # Plain stores beat TMA stores for streaming writes (TileGym's H100 finding, kept for rms_norm).
        ct.store(Y, index=(rt, c), tile=ct.astype(_act_mul_tile(g, u, ACT), Y.dtype), allow_tma=False)

    @ct.kernel
    def _cutile_row_kernel(G, U, Y, ACT: ct.Constant[int], BLOCK: ct.Constant[int]):
        """One row per program, (1, BLOCK) column tiles."""
        row = ct.bid(0)
        for j in range(ct.cdiv(G.shape[1], BLOCK)):
            g = ct.astype(ct.load(G, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            u = ct.astype(ct.load(U, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            ct.store(Y, index=(row, j), tile=ct.astype(_act_mul_tile(g, u, ACT), Y.dtype), allow_tma=False)

    @functools.lru_cache(maxsize=None)
    def cutile_kernel(variant: str, occupancy: int):
        """The "row" kernel, or the tiled one ("tiled", "wide"), with an occupancy hint (-1: the
        compiler's default)."""
        kernel = _cutile_row_kernel if variant == "row" else _cutile_tiled_kernel
        return kernel if occupancy == -1 else kernel.replace_hints(occupancy=occupancy)


# -- the entries a member's baselines.py wraps ---------------------------------------------------


def check_fused(kernel: str, x, dtypes: tuple = DTYPES) -> int:
    """Validate x (m, 2H); return H."""
    bs.check_matrix(kernel, "x", x, dtypes, "(m, 2H)")
    if x.shape[1] % 2:
        raise ValueError(f"{kernel} baseline: x's last dim must be even (2H), got {x.shape[1]}")
    return x.shape[1] // 2


def check_split(kernel: str, a, b, dtypes: tuple = DTYPES) -> None:
    """Validate a and b, both (m, H) of one dtype."""
    for name, t in (("a", a), ("b", b)):
        bs.check_matrix(kernel, name, t, dtypes, "(m, H)")
    if a.shape != b.shape or a.dtype != b.dtype:
        got = f"a {tuple(a.shape)} {a.dtype}, b {tuple(b.shape)} {b.dtype}"
        raise ValueError(f"{kernel} baseline: a and b must have one shape and dtype, got {got}")


def triton_fused(kernel: str, variants: tuple, act: str, x, h: int, *, variant: str, knobs: dict):
    """act(x[:, :h]) * x[:, h:] with our Triton kernels, the plan gated.triton_config's."""
    config = functools.partial(gated.triton_config, kernel, variants)
    scalars = (gated.ACTS[act],)
    return bs.launch_rows(_FUSED, config, (x,), scalars, cols=h, variant=variant, knobs=knobs, one_row="row")


def cutile_fused(kernel: str, variants: tuple, act: str, x, h: int, *, variant: str, occupancy: int, knobs: dict):
    """act(x[:, :h]) * x[:, h:] with our cuTile Python kernels on x's two halves."""
    bs.require_cuda(kernel, "x", x)
    kernels = {v: cutile_kernel(v, occupancy) for v in variants[1:]}
    config = functools.partial(gated.cutile_config, kernel, variants)
    operands, scalars = (x[:, :h], x[:, h:]), (gated.ACTS[act],)
    return bs.launch_rows(kernels, config, operands, scalars, ct=ct, variant=variant, knobs=knobs, one_row="row")


def triton_split(kernel: str, variants: tuple, act: str, a, b, *, variant: str, knobs: dict):
    """act(a) * b with our Triton kernel; b's row stride and the activation are the launch's
    scalars (bs.launch_rows passes a's and y's strides)."""
    config = functools.partial(gated.triton_config, kernel, variants)
    kernels = dict.fromkeys(variants[1:], split_tiled_kernel)
    scalars = (b.stride(0), gated.ACTS[act])
    return bs.launch_rows(kernels, config, (a, b), scalars, variant=variant, knobs=knobs)


def cutile_split(kernel: str, variants: tuple, act: str, a, b, *, variant: str, occupancy: int, knobs: dict):
    """act(a) * b with the fused layout's cuTile Python kernels on the arrays a and b."""
    bs.require_cuda(kernel, "a", a)
    kernels = {v: cutile_kernel(v, occupancy) for v in variants[1:]}
    config = functools.partial(gated.cutile_config, kernel, variants)
    return bs.launch_rows(kernels, config, (a, b), (gated.ACTS[act],), ct=ct, variant=variant, knobs=knobs)


def torch_act(act: str):
    """PyTorch's activation: F.silu, or F.gelu with approximate="tanh"."""
    if act == "gelu_tanh":
        return functools.partial(torch.nn.functional.gelu, approximate="tanh")
    return {"silu": torch.nn.functional.silu}[act]


def fused_entries(kernel: str, act: str, variants: tuple, reason) -> dict:
    """{"cutile", "triton", "torch"} -> cutile_<kernel>, triton_<kernel>, torch_<kernel>, the first
    three BACKENDS of a fused member, x (m, 2H) ->
    act(x[:, :H]) * x[:, H:]: our cuTile Python and Triton kernels with `act`, `variant` and the
    knobs (block, rows; Triton's num_warps; cuTile's occupancy 1..32 or -1, the compiler's) as in
    tilekit.runtime.gated's plans; and PyTorch eager (the activation, rounded to x's dtype, times
    the up half: two kernels). `reason(backend)` is the member's unavailable_reason."""

    def cutile_entry(x, *, variant: str = "auto", occupancy: int = gated.CUTILE_OCCUPANCY, **knobs):
        bs.require_reason(reason, "cutile")
        h = check_fused(kernel, x, DTYPES)
        return cutile_fused(kernel, variants, act, x, h, variant=variant, occupancy=occupancy, knobs=knobs)

    def triton_entry(x, *, variant: str = "auto", **knobs):
        bs.require_reason(reason, "triton")
        h = check_fused(kernel, x, DTYPES)
        return triton_fused(kernel, variants, act, x, h, variant=variant, knobs=knobs)

    def torch_entry(x):
        h = check_fused(kernel, x, DTYPES)
        return torch_act(act)(x[:, :h]) * x[:, h:]

    return _own(kernel, act, cutile_entry, triton_entry, torch_entry)


def split_entries(kernel: str, act: str, variants: tuple, reason) -> dict:
    """The first three BACKENDS of a split member, (a, b) -> act(a) * b:
    as `fused_entries`, on two (m, H) tensors in rows of their own."""

    def cutile_entry(a, b, *, variant: str = "auto", occupancy: int = gated.CUTILE_OCCUPANCY, **knobs):
        bs.require_reason(reason, "cutile")
        check_split(kernel, a, b, DTYPES)
        return cutile_split(kernel, variants, act, a, b, variant=variant, occupancy=occupancy, knobs=knobs)

    def triton_entry(a, b, *, variant: str = "auto", **knobs):
        bs.require_reason(reason, "triton")
        check_split(kernel, a, b, DTYPES)
        return triton_split(kernel, variants, act, a, b, variant=variant, knobs=knobs)

    def torch_entry(a, b):
        check_split(kernel, a, b, DTYPES)
        return torch_act(act)(a) * b

    return _own(kernel, act, cutile_entry, triton_entry, torch_entry)


def _own(kernel: str, act: str, *entries) -> dict:
    how = {**bs.OURS, "torch": "PyTorch eager"}
    docs = {b: f"{kernel} ({act}) with {how[b]}." for b in how}
    return bs.named_entries(kernel, dict(zip(("cutile", "triton", "torch"), entries)), docs)
