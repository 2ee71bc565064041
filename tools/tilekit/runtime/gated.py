"""The gated-activation family (kernels/silu_and_mul and kernels/gelu_and_mul: x = [gate | up];
kernels/swiglu: gate and up apart), out (m, H) = act(gate) * up elementwise, f32 inside: what the
ports and the baselines share (the kernels themselves: cutile_kernels/src/gated.rs,
tilekit.runtime.gated_baselines). Pure: no GPU, no triton, no cuda.tile.

Port (op.py): the knobs (block = column tile, rows per tile block, occupancy, worker warps), ffi.rs's
default tile, the tune key and the candidates autotune times (kernels/silu_and_mul/NOTES.md, "The
variant space"). Baselines (baselines.py): the launch plans of the Triton and cuTile kernels, whose
column tile is the port's default one (`default_block`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilekit.runtime import autotune, checks, port
from tilekit.runtime import baseline_support as bs
from tilekit.runtime.kernel import BadInput, FfiCase, KernelSpec, call, generator, row_kernel, shapes, torch_dtype

if TYPE_CHECKING:
    from torch import Tensor

# -- the activations -------------------------------------------------------------------------------

# name -> the kernels' ACT constant (gated.rs `Act`: Silu = 0, GeluTanh = 1)
ACTS = {"silu": 0, "gelu_tanh": 1}

# -- the port -----------------------------------------------------------------------------------

DTYPES = ("float16", "bfloat16", "float32")
# ffi.rs's tile (~4K output elements) at occupancy 4: the compiler's was 1.5-3x slower (rms_norm, H200)
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": 4}
DEFAULT_TILE = 4096  # output elements per tile block of the default (ffi.rs DEFAULT_TILE_ELEMS)
# ffi.rs MERGED_TAIL: at most this many columns past the whole tiles go to the last whole one
MERGED_TAIL = 64


def fused_entry(op: str, kernel: str, act: str):
    """A fused member's entry `<kernel>(x, *, variant="auto", out=None)`: act(gate) * up for x =
    [gate | up] (..., 2H) -> (..., H), x and out checked, then tilekit.runtime.port.rows on x's rows
    (`op`: the member's op.py module name, whose export and variants port calls)."""

    def entry(x: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
        if x.shape[-1] % 2 != 0:
            raise ValueError(f"{kernel}: x must be (..., 2H) with an even last dim, got shape {tuple(x.shape)}")
        checks.dtypes(kernel, DTYPES, x=x)
        checks.contiguous_last_dim(kernel, size_one_ok=True, x=x)
        checks.out_matches(kernel, out, (*x.shape[:-1], x.shape[-1] // 2), x)
        checks.cuda(kernel, x=x)
        return port.rows(op, x, out, x.shape[-1] // 2, variant=variant)

    return port.entry(layouts={"x": "(..., 2H)"})(_named(entry, op, kernel, f"{act}(gate) * up, x = [gate | up]"))


def split_entry(op: str, kernel: str, act: str):
    """A split member's entry `<kernel>(a, b, *, variant="auto", out=None)`: act(a) * b for a (the
    gate) and b (the up projection), both (..., H); out may be a or b itself (in place)."""

    def entry(a: Tensor, b: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
        if a.shape != b.shape:
            raise ValueError(
                f"{kernel}: a and b must have one shape (..., H), got {tuple(a.shape)} and {tuple(b.shape)}"
            )
        _check_pair(kernel, out, a.shape, a, a=a, b=b)
        b2 = b if b.dim() == 2 else b.reshape(-1, b.shape[-1])  # port.rows flattens a (and out) alike
        return port.rows(op, a, out, a.shape[-1], b2, variant=variant)

    layouts = {"a": "(..., H)", "b": "(..., H)"}
    return port.entry(layouts=layouts, in_place=("a", "b"))(_named(entry, op, kernel, f"{act}(a) * b"))


def _check_pair(kernel: str, out, out_shape, like, **tensors) -> None:
    """An entry's tensors: the family's dtypes, contiguous last dims, `out` None or `out_shape` of
    like's dtype and device (the aliasing rule: port.entry), all on CUDA."""
    checks.dtypes(kernel, DTYPES, **tensors)
    checks.contiguous_last_dim(kernel, **tensors)
    checks.out_matches(kernel, out, out_shape, like)
    checks.cuda(kernel, **tensors)


def _named(entry, op: str, kernel: str, what: str):
    """The entry as the member's own: its name (the op's), module and doc."""
    entry.__name__ = entry.__qualname__ = kernel
    entry.__module__ = op
    entry.__doc__ = f"{what}; ValueError/TypeError on bad input, ffi.KernelError on a failed call."
    return entry


def export_args(block: int, rows: int, occupancy: int, warps: int = -1) -> tuple[int, ...]:
    """A variant's arguments of the export. Pure: the CPU tests check `variants` through it."""
    return int(block), int(rows), int(occupancy), int(warps)


def default_block(h: int) -> int:
    """ffi.rs's default_block, and the baselines' tiled forms' BLOCK: the whole row (next power of
    two, >= 16) up to 4096, else the widest power-of-two column tile in [256, 4096] whose padding
    wastes at most 1/8 of the lanes.

    >>> [default_block(h) for h in (1, 1000, 4096, 4097, 6144, 14336, 11008)]
    [16, 1024, 4096, 512, 2048, 2048, 4096]
    """
    if h <= 4096:
        return max(16, autotune.pow2(h))
    return next((b for b in (4096, 2048, 1024, 512) if -(-h // b) * b * 8 <= h * 9), 256)


def tune_key(dtype: str, m: int, h: int) -> dict:
    """Problem class: exact h (it decides tiling), m rounded up to a power of two."""
    return {"dtype": dtype, "h": h, "m_class": autotune.pow2(m)}


def variants(m: int, h: int) -> list[dict]:
    """Candidates, few (each one JIT when tuning); TILEKIT_AUTOTUNE=0 runs the first. Why these:
    kernels/silu_and_mul/NOTES.md, "The variant space" (ffi.rs's default was 1.7x slower).

    >>> [tuple(v.values()) for v in variants(65536, 4096)]
    [(1024, 1, 8), (1024, 1, 16), (2048, 1, 8), (4096, 1, 4), (4096, 2, 4), (2048, 1, 8, 8)]

    Rows a few columns past a multiple of 4096 (H = 4097: ffi.rs gives those columns to the last
    whole tile, `merged_tail_fits`) add the 2048-wide tile at occupancy 2 (NOTES.md, "The last
    whole tile takes the rest"):

    >>> [tuple(v.values()) for v in variants(16384, 4097)][-1:]
    [(2048, 1, 2)]
    """
    pow2, bw, max_rows = 1 << max(4, (h - 1).bit_length()), default_block(h), min(64, autotune.pow2(m))
    narrow, mid = min(1024, pow2), min(2048, pow2)
    narrow_rows, mid_rows = max(1, 1024 // narrow), max(1, 2048 // mid)
    shapes = [(narrow, narrow_rows, 8, None), (narrow, narrow_rows, 16, None), (mid, mid_rows, 8, None)]
    shapes += [(bw, max(1, DEFAULT_TILE // bw), 4, None), (bw, max(1, 2 * DEFAULT_TILE // bw), 4, None)]
    shapes += [(mid, mid_rows, 8, 8)]  # (block, rows, occupancy, warps)
    if h > 4096 and 0 < h % 4096 <= MERGED_TAIL:
        shapes += [(2048, 1, 2, None)]
    return autotune.unique({"block": b, "rows": min(r, max_rows), "occupancy": o, "warps": w} for b, r, o, w in shapes)


# -- the baselines' launch plans ------------------------------------------------------------------
# "tiled": one ROWS x BLOCK output tile of ~4K elements per program, column tile fastest; "wide":
# ~8K-element tiles; "row" (silu_and_mul's only): one program per row, BLOCK-wide chunks.

TILE_ELEMS = {"tiled": 4096, "wide": 8192}  # output elements per program
MAX_BLOCK = 4096  # widest column tile / row chunk
MAX_ROWS = 64
TRITON_ELEMS_PER_THREAD = 8  # per tensor (gate, up): 8 f32 values each -> 16 B bf16 vectors
CUTILE_OCCUPANCY = 4  # CTAs per SM tileiras plans registers for: the compiler's default was
# 1.5-3x slower for rms_norm's streaming tiles on the H200; -1 = its default


def config(kernel: str, variants: tuple, m: int, h: int, variant: str = "auto", *, block=None, rows=None) -> dict:
    """The launch plan of the Triton and cuTile kernels for (m, h) outputs: {"variant", "block",
    "rows", "grid"} (grid = number of programs, 1-D); "auto" = "tiled". Pure; keywords force a knob."""
    bs.check_variant(kernel, variant, variants)
    if variant == "auto":
        variant = "tiled"
    if variant == "row":
        block = block or min(bs.row_block(h), MAX_BLOCK)
        return {"variant": variant, "block": block, "rows": 1, "grid": m}
    block = block or default_block(h)
    rows = rows or bs.clamp(TILE_ELEMS[variant] // block, 1, min(MAX_ROWS, bs.next_pow2(m)))
    grid = bs.cdiv(m, rows) * bs.cdiv(h, block)
    if grid > 2**31 - 1:
        raise ValueError(f"{kernel}: {grid} programs exceed the 1-D grid limit; force a larger block or rows")
    return {"variant": variant, "block": block, "rows": rows, "grid": grid}


def triton_config(kernel, variants, m, h, sms, variant="auto", *, block=None, rows=None, num_warps=None) -> dict:
    """`config` with Triton's num_warps (sms is not needed: one program per output tile)."""
    cfg = config(kernel, variants, m, h, variant, block=block, rows=rows)
    return dict(cfg, num_warps=num_warps or bs.triton_warps(cfg["rows"] * cfg["block"], TRITON_ELEMS_PER_THREAD))


def cutile_config(kernel, variants, m, h, sms, variant="auto", *, block=None, rows=None) -> dict:
    """`config` (sms is not needed: one program per output tile)."""
    return config(kernel, variants, m, h, variant, block=block, rows=rows)


# -- the declarations (spec.py) --------------------------------------------------------------------

# Written into the first gate entries of row 0 (plant_saturating_gates): silu and gelu saturate to 0
# and to the identity there, and a sigmoid written exp(a) / (1 + exp(a)) turns 100 into NaN.
SATURATING_GATES = (-100.0, -30.0, 30.0, 100.0)

# (m, h, dtype) of variant_shapes with partial tiles for every variant: 37 rows (partial row tiles
# for rows > 1), H = 1000 (one padded tile), 11008 (masked, 16-byte predicated), 14336 (whole tiles
# for one-row variants), 4097 (a 1-element last tile).
VARIANT_EDGES = ((37, 1000, "float16"), (64, 11008, "bfloat16"), (19, 14336, "bfloat16"), (37, 4097, "float32"))


def fused_baseline_cases(spec: KernelSpec, **fields):
    """A fused member's BaselineCases (tests.py) with what the members share: the Triton entry under
    the interpreter on irregular H (1, 1000, 4097), padded rows, row tiles that run past m, several
    column tiles (4097 and forced 256-wide blocks) and saturating gates (make_inputs plants them), in
    every variant and dtype; the torch case; the inputs baselines.py refuses; the pinned cuTile
    occupancy. `fields` give the rest (plans, triton_compile, cutile_kernels, ...)."""
    import torch

    from tilekit.runtime.baseline_cases import DTYPES as CASE_DTYPES
    from tilekit.runtime.baseline_cases import BaselineCases

    shapes_ = ({"m": 3, "h": 1000}, {"m": 2, "h": 4097}, {"m": 5, "h": 1000, "row_stride": 2080}, {"m": 1, "h": 1})
    knobs = [(v, {}) for v in ("tiled", "wide", "row", "auto")]
    knobs += [("row", {"block": 256}), ("tiled", {"block": 256, "rows": 2})]
    shared = dict(
        interpreted=[(dict(s, dtype=dt), v, k) for dt in CASE_DTYPES for s in shapes_ for v, k in knobs],
        torch_case=({"m": 5, "h": 1000, "row_stride": 2080, "dtype": "float32"}, 1e-5),
        bad_inputs=[
            ((torch.randn(2, 3, 4),), ValueError, "must be 2-D"),
            ((torch.randn(2, 5),), ValueError, "must be even"),
            ((torch.randn(2, 4, dtype=torch.float64),), TypeError, "must be one of"),
            ((torch.randn(4, 2).t(),), ValueError, "last dim must be contiguous"),
        ],
        # the committed H200 results were timed at occupancy 4
        pinned=[("CUTILE_OCCUPANCY", lambda B: B.CUTILE_OCCUPANCY, 4, False)],
    )
    return BaselineCases(spec, **{**shared, **fields})


def plant_saturating_gates(gate) -> None:
    """Write SATURATING_GATES into the first entries of row 0 of the (m, h) gate, in place."""
    import torch

    k = min(gate.shape[1], len(SATURATING_GATES))
    gate[0, :k] = torch.tensor(SATURATING_GATES[:k], dtype=gate.dtype, device=gate.device)


def reference(gate, up, act: str = "silu"):
    """float64 act(gate) * up: silu(g) = g * sigmoid(g); gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g
    + 0.044715 g^3))), torch's gelu(approximate="tanh")."""
    import torch

    gate = gate.double()
    if act == "gelu_tanh":
        return torch.nn.functional.gelu(gate, approximate="tanh") * up.double()
    if act != "silu":
        raise ValueError(f"unknown activation {act!r}; known: {sorted(ACTS)}")
    return gate * torch.sigmoid(gate) * up.double()


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read the gate and up once (m * 2h), write out once (m * h)."""
    import torch

    return 3 * cfg["m"] * cfg["h"] * torch.finfo(getattr(torch, cfg["dtype"])).bits // 8


def fused_spec(op, act: str, **fields) -> KernelSpec:
    """The declaration of a fused member (x = [gate | up] (m, 2H) -> out (m, H) = act(gate) * up;
    configs name the output width `h`) with what the members share: correctness and variant
    shapes, inputs, the float64 reference of `act`, the bytes model, bad inputs and the export's
    validation cases. `fields` give the rest (perf_configs) and may replace any of those."""
    import torch

    kernel = port.name(op)

    def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
        """Fresh random inputs (never zeros): x ~ N(0, 2^2), so gates reach the activation's curved
        and flat parts, plus SATURATING_GATES at the start of row 0's gate."""
        g, dt, m, h = generator(device, seed), torch_dtype(cfg["dtype"]), cfg["m"], cfg["h"]
        x = 2 * torch.randn(m, cfg.get("row_stride", 2 * h), generator=g, device=device, dtype=torch.float32)
        x = x.to(dt)[:, : 2 * h]
        plant_saturating_gates(x[:, :h])
        return {"x": x}

    def fused_reference(inputs: dict):
        x = inputs["x"]
        h = x.shape[-1] // 2
        return reference(x[:, :h], x[:, h:], act)

    def x_out(x=(4, 16), out=(4, 8)):
        """An FfiCase's x and out."""
        return {"x": torch.randn(*x), "out": torch.empty(*out)}

    shared = dict(
        # Tiny to large and irregular H; row_stride > 2H exercises padded rows; 4097 leaves a
        # 1-element last tile.
        correctness_shapes=shapes(
            "m h row_stride", *((1, 1), (3, 1000), (257, 4097), (4096, 4096, 8320), (1000, 14336), (65536, 4096))
        ),
        make_inputs=make_inputs,
        reference=fused_reference,
        bytes_moved=bytes_moved,
        # VARIANT_EDGES: partial row and column tiles for every variant (the masked pointer-tile
        # entry); 64 x 4096 with padded rows: every variant unmasked. "default" is checked there too.
        variant_shapes=shapes("m h dtype row_stride", *VARIANT_EDGES, (64, 4096, "float16", 8200)),
        every_variant_default=True,
        bad_inputs={
            "odd_last_dim": BadInput(lambda: call(torch.randn(4, 7)), ValueError, "even last dim"),
            "int32": BadInput(lambda: call(torch.ones(4, 8, dtype=torch.int32)), TypeError, "must be one of"),
            "out_shape": BadInput(
                lambda: call(torch.randn(4, 8), out=torch.empty(4, 8)), ValueError, "out must be (4, 4)"
            ),
        },
        ffi_cases={
            "odd_last_dim": FfiCase(lambda: x_out((4, 15), (4, 7)), message="`x` last dim 15 must be even"),
            "out_shape": FfiCase(lambda: x_out(out=(4, 16)), message="`out` shape [4, 16] must be [m, H] = [4, 8]"),
            "out_is_gate_half_of_x": FfiCase(
                lambda: (lambda x: {"x": x, "out": x[:, :8]})(torch.randn(4, 16)),
                message=f"`out` overlaps `x`: {kernel}",
            ),
            "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
            "tile_too_big": FfiCase(variant={"block": 16384, "rows": 2}, message="block*rows <= 16384"),
            # x (4, 16) in rows of 20, out (4, 8) in rows of 12: valid, so the call reaches device set-up
            "padded_rows": FfiCase(
                lambda: {"x": torch.randn(4, 20)[:, :16], "out": torch.empty(4, 12)[:, :8]}, code=-4
            ),
        },
    )
    return row_kernel(op, "h", **{**shared, **fields})


# -- the gradient (kernels/silu_and_mul_backward, kernels/swiglu_backward: cutile_kernels/src/gated_backward.rs)

BACKWARD_DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1}  # gated_backward.rs's row_plan picks


def backward_export_args(block: int, rows: int, occupancy: int) -> tuple[int, int, int]:
    """A gradient variant's arguments of its export: (block, rows, occupancy)."""
    return int(block), int(rows), int(occupancy)


def backward_variants(m: int, h: int) -> list[dict]:
    """The gradient's candidates: tiles of 2 K-8 K elements of (m, H) (at most 2048 wide, the rows
    filling the rest) at occupancy 2 and 4 (a streaming pass, five tensors' tiles in registers at once).

    >>> [(v["block"], v["rows"], v["occupancy"]) for v in backward_variants(16384, 14336)][:3]
    [(2048, 1, 2), (2048, 1, 4), (2048, 2, 2)]
    >>> sorted({v["block"] for v in backward_variants(8, 100)}), max(v["rows"] for v in backward_variants(8, 100))
    ([128], 8)
    """
    block = min(2048, autotune.pow2(max(h, 16)))
    max_rows = min(64, autotune.pow2(m))
    rows = sorted({autotune.tile_rows(block, elems, max_rows) for elems in (2048, 4096, 8192)})
    return [{"block": block, "rows": r, "occupancy": o} for r in rows for o in (2, 4)]


def fused_backward_entry(op: str, kernel: str, act: str):
    """A fused member's gradient entry `<kernel>(dy, x, *, variant="auto", out=None)`: dx = [dgate |
    dup] (..., 2H) of act(gate) * up for x = [gate | up] (..., 2H) and the output gradient dy
    (..., H), checked, then the export through tilekit.runtime.port (`op`: the member's op.py)."""
    import torch

    def entry(dy: Tensor, x: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
        if x.shape[-1] % 2 or tuple(dy.shape) != (*x.shape[:-1], x.shape[-1] // 2):
            raise ValueError(
                f"{kernel}: x must be (..., 2H) and dy (..., H), got x {tuple(x.shape)} and dy {tuple(dy.shape)}"
            )
        _check_pair(kernel, out, x.shape, x, dy=dy, x=x)
        h = dy.shape[-1]
        x2, dy2 = x.reshape(-1, 2 * h), dy.reshape(-1, h)
        dx = out if out is not None else torch.empty(x.shape, dtype=x.dtype, device=x.device)
        dx2 = dx if dx.dim() == 2 else dx.view(-1, 2 * h)
        port.run(op, variant, (x2.shape[0], h), dx2, dy2, x2)
        return dx

    what = f"dx = (dgate | dup) of {act}(gate) * up, x = [gate | up], for the output gradient dy"
    return port.entry(layouts={"dy": "(..., H)", "x": "(..., 2H)"})(_named(entry, op, kernel, what))


def fused_backward_gradients(entry):
    """A fused member's forward's autograd formula (its op.py's `forward_gradients`): dx from the
    gradient port `entry`. tilekit.runtime.ops registers it as the gradient of the forward's op."""

    def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple) -> tuple:
        (x,) = inputs
        if not needs[0]:
            return (None,)
        dy = grad.contiguous()  # autograd's is; an expanded one (row stride 0) the port would refuse
        return (entry.op(dy, x),)

    return forward_gradients


def backward_reference(dy, gate, up, act: str = "silu") -> tuple:
    """float64 (dgate, dup) of act(gate) * up for the output gradient dy (closed form)."""
    import torch

    if act not in ACTS:
        raise ValueError(f"unknown activation {act!r}; known: {sorted(ACTS)}")
    dy, gate, up = dy.double(), gate.double(), up.double()
    if act == "silu":
        s = torch.sigmoid(gate)
        slope = s * (1 + gate * (1 - s))
    else:  # the tanh GELU: gelu(g) = g * sigmoid(z), z = k (g + 0.044715 g^3)
        k = 2 * (2 / torch.pi) ** 0.5
        s = torch.sigmoid(k * (gate + 0.044715 * gate**3))
        slope = s + gate * s * (1 - s) * k * (1 + 3 * 0.044715 * gate**2)
    return dy * up * slope, dy * gate * s


def fused_backward_spec(op, act: str, **fields) -> KernelSpec:
    """A fused member's gradient declaration (tilekit.runtime.kernel.row_kernel over (m, H), configs
    naming H `h`): inputs dy ~ N(0, 1) (m, H) and x ~ N(0, 2^2) (m, 2H, in rows of row_stride where the
    shape has one) with the saturating gates at the start of row 0, the float64 closed form
    (`backward_reference`), the fewest bytes (dy and x read once, dx written once), odd and padded
    shapes and bad inputs; `fields` add or replace (perf_configs: the member's models)."""
    import torch

    def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
        g, dt, m, h = generator(device, seed), torch_dtype(cfg["dtype"]), cfg["m"], cfg["h"]
        dy = torch.randn(m, h, generator=g, device=device).to(dt)
        x = (2 * torch.randn(m, cfg.get("row_stride", 2 * h), generator=g, device=device)).to(dt)[:, : 2 * h]
        plant_saturating_gates(x[:, :h])
        return {"dy": dy, "x": x}

    def reference(inputs: dict):
        h = inputs["dy"].shape[-1]
        return torch.cat(backward_reference(inputs["dy"], inputs["x"][:, :h], inputs["x"][:, h:], act), -1)

    def bytes_moved(cfg: dict) -> int:
        return 5 * cfg["m"] * cfg["h"] * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8

    declared = dict(
        out_shape=lambda cfg: (cfg["m"], 2 * cfg["h"]),
        correctness_shapes=shapes("m h row_stride", (1, 1), (3, 1000), (257, 4097), (4096, 4096, 8320), (1000, 14336)),
        make_inputs=make_inputs,
        reference=reference,
        bytes_moved=bytes_moved,
        variant_shapes=shapes("m h dtype", (37, 1000, "float16"), (64, 11008, "bfloat16"), (37, 4097, "float32")),
        bad_inputs={
            "odd_x": BadInput(lambda: call(torch.randn(4, 4), torch.randn(4, 7)), ValueError, "x must be (..., 2H)"),
            "dy_width": BadInput(lambda: call(torch.randn(4, 5), torch.randn(4, 8)), ValueError, "dy (..., H)"),
        },
        ffi_cases={
            "odd_x": FfiCase(
                lambda: {"x": torch.randn(4, 15), "out": torch.empty(4, 15)}, message="it must be (m, 2H)"
            ),
            "out_shape": FfiCase(lambda: {"out": torch.empty(4, 8)}, message="shape"),
            "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        },
    )
    return row_kernel(op, "h", **{**declared, **fields})


def assert_backward_reference_is_autograd(spec, act: str) -> None:
    """A fused member's reference against autograd of the forward's float64 reference (its tests.py
    calls it on the CPU)."""
    import torch

    inputs = spec.make_inputs({"dtype": "float32", "m": 5, "h": 6, "row_stride": 16}, device="cpu", seed=2)
    x = inputs["x"].double().requires_grad_()
    reference(x[:, :6], x[:, 6:], act).backward(inputs["dy"].double())
    torch.testing.assert_close(spec.reference(inputs), x.grad, rtol=1e-10, atol=1e-12)
    assert tuple(spec.out_shape({"m": 5, "h": 6})) == (5, 12)


def fused_backward_cases(spec, act: str):
    """A fused member's BASELINE_CASES (tilekit.runtime.baseline_cases): our Triton kernel interpreted
    on irregular H, padded rows, several column tiles and every dtype; torch's entry; bad inputs; the
    plans; our kernels compiled for sm_90 with the member's ACT."""
    import torch

    from tilekit.runtime.baseline_cases import BaselineCases

    code = ACTS[act]
    kernels = "gated_backward_baselines.triton_kernel", "gated_backward_baselines.cutile_kernel"
    return BaselineCases(
        spec,
        interpreted=[
            (c, "auto", {}) for c in shapes("dtype m h row_stride", ("float32", 5, 100), ("float16", 9, 1000, 2040))
        ]
        + [({"m": 3, "h": 4097, "dtype": "bfloat16"}, "auto", {})],
        torch_case=({"m": 5, "h": 1000, "row_stride": 2040, "dtype": "float32"}, 1e-5),
        bad_inputs=[
            ((torch.randn(2, 4), torch.randn(2, 7)), ValueError, "x must be"),
            ((torch.randn(2, 3), torch.randn(2, 8)), ValueError, "dy"),
            ((torch.randn(2, 4), torch.randn(2, 3, 8)), ValueError, "must be 2-D"),
        ],
        plans=[
            ("config", (16384, 14336), {"block": 2048, "rows": 2, "grid": (8192, 7)}),
            ("config", (3, 100), {"block": 128, "rows": 4, "grid": (1, 1)}),
        ],
        plan_errors=[("config", (10, 100, "row"), {}, "variant must be one of")],
        triton_compile=[
            (kernels[0], "bf16", {"ROWS": 2, "BLOCK": 2048, "ACT": code}),
            (kernels[0], "fp32", {"ROWS": 4, "BLOCK": 128, "ACT": code}),
        ],
        cutile_kernels=[
            (kernels[1], "bfloat16", ["A2"] * 5 + [2, 2048, code], True),
            (kernels[1], "float32", ["A2"] * 5 + [4, 128, code], False),
        ],
    )
