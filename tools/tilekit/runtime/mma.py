"""The GEMM family's port side (kernels/matmul and kernels/bmm: both exports take the variant knobs
of cutile_kernels' ffi_util::MmaVariant): the dtypes, the knobs and their defaults, a variant's
export arguments, the i32 index limit, and the candidate list autotune times (matmul's measurements,
kernels/matmul/NOTES.md "The variant space"; bmm picks from it by the batch's tile count); the
entries' checks (an operand's layout, the index range) and their tune key.
"""

from __future__ import annotations

from tilekit.runtime import autotune
from tilekit.runtime.checks import span

DTYPES = ("bfloat16", "float16")
# every knob -1 (persistent off): ffi_util::MmaVariant's defaults
DEFAULT_VARIANT = {"bm": -1, "bn": -1, "bk": -1, "group": -1, "persistent": False, "occupancy": -1, "cga": -1}
INDEX_LIMIT = 2**31 - 1  # ffi.rs row_stride(): the kernel's views index each operand with i32


def persistent_programs(sms: int, occupancy: int, cga: int) -> int:
    """Tile blocks of a persistent grid: one per cluster of `cga` SMs, `occupancy` deep (-1 = 1).

    >>> persistent_programs(132, 1, 1), persistent_programs(132, 2, 1), persistent_programs(132, 1, 2), persistent_programs(132, -1, -1)
    (132, 264, 66, 132)
    """
    return max(1, sms // max(1, cga)) * max(1, occupancy)


def export_args(
    bm: int, bn: int, bk: int, group: int, persistent: bool, occupancy: int, cga: int, *, sms: int
) -> tuple[int, ...]:
    """A variant's arguments of the export, (bm, bn, bk, group, programs, occupancy, num_cta_in_cga),
    on a GPU with `sms` SMs. Pure: the CPU tests check `variants` through it."""
    programs = persistent_programs(sms, occupancy, cga) if persistent else 0
    return int(bm), int(bn), int(bk), int(group), int(programs), int(occupancy), int(cga)


# -- the entries (op.py): `kernel` names the entry in messages; a matmul is a batch of one -------------

# how a `dims`-D operand is column-major, in layout()'s message
_COLUMN_MAJOR = {
    2: "(row-major) or its first (the .t() of a row-major matrix)",
    3: "(row-major matrices) or its middle dim (the transpose(1, 2) of a row-major batch)",
}


def layout(kernel: str, name: str, t) -> bool:
    """Whether an operand's matrices (its last two dims) are column-major, as ffi.rs reads it:
    row-major when its last dim is contiguous (or has one element), else column-major when the one
    before is.

    >>> import torch
    >>> w, k = torch.empty(4096, 1024), torch.empty(8, 2048, 128)
    >>> layout("matmul", "b", w), layout("matmul", "b", w.t()), layout("matmul", "b", w[:, :512].t())
    (False, True, True)
    >>> layout("bmm", "b", k.transpose(1, 2)), layout("bmm", "b", k[0].t().expand(8, 128, 2048))
    (True, True)
    >>> layout("matmul", "a", w[::2, ::2])
    Traceback (most recent call last):
    ValueError: matmul: a must be contiguous in its last dim (row-major) or its first (the .t() of a row-major matrix), got strides (2048, 2); pass a.contiguous()
    >>> layout("bmm", "a", k[:, ::2, ::2])
    Traceback (most recent call last):
    ValueError: bmm: a must be contiguous in its last dim (row-major matrices) or its middle dim (the transpose(1, 2) of a row-major batch), got strides (262144, 256, 2); pass a.contiguous()
    """
    rows, cols = t.shape[-2:]
    if t.stride(-1) == 1 or cols == 1:
        return False
    if t.stride(-2) == 1 or rows == 1:
        return True
    raise ValueError(
        f"{kernel}: {name} must be contiguous in its last dim {_COLUMN_MAJOR[t.dim()]}, got strides "
        f"{t.stride()}; pass {name}.contiguous()"
    )


def check_index_range(kernel: str, dims: dict, **operands) -> None:
    """ValueError unless every operand a (batch, m, k), b (batch, k, n), c (batch, m, n) spans at most
    INDEX_LIMIT elements, as ffi.rs enforces (-6): the `operands` given (tensors, not None) their
    spans, the others a contiguous one's. `dims` {["batch",] "m", "n", "k"}. Pure: the entries run it
    before autotune, and on the CPU for any size (meta tensors: nothing is allocated).

    >>> check_index_range("bmm", {"batch": 1024, "m": 2048, "n": 2048, "k": 1024})
    Traceback (most recent call last):
    ValueError: bmm: a spans 2147483648 elements for batch=1024, m=2048, n=2048, k=1024; the kernel indexes each operand with i32 (at most 2147483647 elements): split the batch
    >>> import torch
    >>> check_index_range("matmul", {"m": 1, "n": 1 << 30, "k": 1}, c=torch.empty(1, 1 << 31, device="meta")[:, : 1 << 30])
    >>> check_index_range("matmul", {"m": 2, "n": 8, "k": 8}, a=torch.empty(2, (1 << 31) - 8, device="meta")[:, :8])
    Traceback (most recent call last):
    ValueError: matmul: a spans 2147483648 elements for m=2, n=8, k=8; the kernel indexes each operand with i32 (at most 2147483647 elements): split the product into smaller blocks
    """
    batch, m, n, k = dims.get("batch", 1), dims["m"], dims["n"], dims["k"]
    spans = {"a": batch * m * k, "b": batch * k * n, "c": batch * m * n}
    for name, elems in (spans | {name: span(t) for name, t in operands.items() if t is not None}).items():
        if elems > INDEX_LIMIT:
            size = ", ".join(f"{d}={v}" for d, v in dims.items())
            raise ValueError(
                f"{kernel}: {name} spans {elems} elements for {size}; the kernel indexes each operand with i32 "
                f"(at most {INDEX_LIMIT} elements): "
                + ("split the batch" if "batch" in dims else "split the product into smaller blocks")
            )


def tune_key(
    dtype: str, m: int, n: int, k: int, *, batch: int | None = None, a_t=False, b_t=False, shared_b=False
) -> dict:
    """Problem class: every dim rounded up to a power of two; the layout when an operand is
    column-major, and a B shared by every product of a batch (it stays in L2), named only then (so
    row-major classes keep their cached choices).

    >>> tune_key("bfloat16", 1000, 1025, 4096), tune_key("bfloat16", 16, 4096, 4096, b_t=True)["layout"]
    ({'dtype': 'bfloat16', 'm_class': 1024, 'n_class': 2048, 'k_class': 4096}, 'nt')
    >>> tune_key("bfloat16", 2048, 2048, 128, batch=128, b_t=True)
    {'dtype': 'bfloat16', 'batch_class': 128, 'm_class': 2048, 'n_class': 2048, 'k_class': 128, 'layout': 'nt'}
    >>> tune_key("float16", 17, 33, 65, batch=3, shared_b=True)["shared_b"]
    True
    """
    key = {"dtype": dtype} | ({"batch_class": autotune.pow2(batch)} if batch is not None else {})
    key |= {f"{d}_class": autotune.pow2(v) for d, v in (("m", m), ("n", n), ("k", k))}
    return key | ({"layout": "nt"[a_t] + "nt"[b_t]} if a_t or b_t else {}) | ({"shared_b": True} if shared_b else {})


# -- the candidates ----------------------------------------------------------------------------------

H200_SMS = 132  # decides the variant list only; tilekit.runtime.port sizes persistent grids from the real GPU


def variant(bm, bn, bk, *, persistent=False, occupancy=1, cga=1, group=8) -> dict:
    """One candidate's knobs (tilekit.runtime.mma.export_args' names)."""
    return {"bm": bm, "bn": bn, "bk": bk, "group": group, "persistent": persistent, "occupancy": occupancy, "cga": cga}


def variants(m: int, n: int, k: int) -> list[dict]:
    """Candidates, few: each GEMM tile shape is a ~3-4 s JIT. Why these: kernels/matmul/NOTES.md, "The
    variant space"; problems with fewer 128x128 tiles than two per SM get smaller tiles:

    >>> [(v["bm"], v["bn"], v["cga"], v["persistent"]) for v in variants(1000, 1000, 1000)]  # 64 tiles for 132 SMs
    [(128, 128, 1, False), (64, 128, 1, False), (128, 64, 1, False), (64, 64, 1, False)]
    >>> [(v["bm"], v["bn"], v["cga"], v["persistent"], v["group"]) for v in variants(4096, 4096, 4096)][2:]  # 1024
    [(128, 256, 2, False, 8), (256, 128, 2, False, 8), (128, 128, 1, True, 8), (128, 128, 1, True, 4), (128, 256, 2, True, 8), (128, 256, 1, False, 8), (256, 128, 1, False, 8), (128, 256, 1, True, 8)]
    >>> variants(16384, 1024, 4096)[0] == variant(128, 128, 64, occupancy=2)
    True

    Decode-sized products (m <= 64: a token batch times a weight) stream B once and are bound by its
    bytes: 16- to 64-row tiles, 64-128 wide, 128-deep K steps (NOTES.md, "Decode and x @ W.t()"):

    >>> [(v["bm"], v["bn"], v["bk"], v["occupancy"]) for v in variants(16, 4096, 4096)]
    [(16, 64, 128, 2), (16, 128, 128, 1), (32, 64, 128, 2), (64, 64, 128, 2), (64, 128, 64, 2), (32, 128, 128, 2)]
    """
    del k  # K decides the loop length, not the tiling
    if m <= 64:
        shapes = ((16, 64, 128, 2), (16, 128, 128, 1), (32, 64, 128, 2), (64, 64, 128, 2), (64, 128, 64, 2))
        return [variant(bm, bn, bk, occupancy=o) for bm, bn, bk, o in (*shapes, (32, 128, 128, 2))]
    if -(-m // 128) * -(-n // 128) >= 2 * H200_SMS:
        wide = [variant(128, 256, 64, cga=2), variant(256, 128, 64, cga=2)]  # 2-CTA clusters
        # persistent grids at occupancy 1: at 2 the 128x128 one spilled (150 spill stores in its SASS,
        # kernels/bmm/NOTES.md); the clustered one is TileGym's sm_90 form. Bands of 4 tile rows as
        # well as 8: 5-7 % faster at 8192 x 4096 x 14336 on an H100, 2-4 % slower at 4096^3
        # (kernels/matmul/NOTES.md, "Llama-3-8B's products")
        grid = [variant(128, 128, 64, persistent=True, group=g) for g in (8, 4)]
        persistent = [*grid, variant(128, 256, 64, persistent=True, cga=2)]
        # the wide tiles in one CTA, which ffi_util::MmaVariant::warps runs on 8 worker warps (two
        # consumer warpgroups; kernels/matmul/NOTES.md, "Eight worker warps"): not yet timed
        eight = [variant(128, 256, 64), variant(256, 128, 64), variant(128, 256, 64, persistent=True)]
        return [variant(128, 128, 64, occupancy=2), variant(128, 128, 64), *wide, *persistent, *eight]
    small = [variant(bm, bn, 64, occupancy=2) for bm, bn in ((128, 128), (64, 128), (128, 64))]
    return small + [variant(64, 64, 64, occupancy=4)]


# -- the declarations (spec.py): a config's dims are [batch,] m, n, k; a batch's `shared` B is read once


def backward(product):
    """The gradient of the GEMM family's op `product` (matmul's or bmm's, torch.ops.tilekit.*), for
    tilekit.runtime.ops.register_backward: dA = dC @ Bᵀ and dB = Aᵀ @ dC through the same port on
    transposed views of the saved operands, each gradient made in its operand's layout so autograd
    keeps it as it is: a column-major operand's gradient is the transpose of the product of the
    transposes (dAᵀ = B @ dCᵀ, dBᵀ = dCᵀ @ A), written row-major and returned as its transpose. For
    `x @ W.t()` that is dX = dY @ W and dW = dYᵀ @ X, row-major like W. dC is copied only when it is neither row- nor column-major. A bmm's B shared by the batch
    (a stride-0 view) gets each product's dB[i], which autograd sums through the expand."""

    def grads(inputs, grad, needs):
        a, b = inputs[:2]
        g = grad if 1 in (grad.stride(-1), grad.stride(-2)) else grad.contiguous()
        t = lambda x: x.transpose(-2, -1)  # noqa: E731
        da = db = None
        if needs[0]:
            da = t(product(b, t(g))) if _column_major(a) else product(g, t(b))
        if needs[1]:
            db = t(product(t(g), a)) if _column_major(b) else product(t(a), g)
        return da, db

    return grads


def _column_major(t) -> bool:
    """layout's reading of an operand the port accepted (its last dim not contiguous, the one before it is)."""
    return t.shape[-1] > 1 and t.stride(-1) != 1


def reference(inputs: dict):
    """float64 products of the inputs as given (on their device: the GPU for big shapes)."""
    return inputs["a"].double() @ inputs["b"].double()


def flops(cfg: dict) -> int:
    """Two per multiply-add.

    >>> flops({"m": 16384, "n": 1024, "k": 4096}) == 2 * 16384 * 1024 * 4096, flops({"batch": 2, "m": 1, "n": 1, "k": 1})
    (True, 4)
    """
    return 2 * cfg.get("batch", 1) * cfg["m"] * cfg["n"] * cfg["k"]


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read A and B once (a shared B once for the batch), write C once.

    >>> bytes_moved({"dtype": "bfloat16", "m": 16384, "n": 1024, "k": 4096}) == (16384 * 4096 + 4096 * 1024 + 16384 * 1024) * 2
    True
    >>> bytes_moved({"dtype": "bfloat16", "batch": 4, "m": 8, "n": 16, "k": 32, "shared": 1})
    4096
    """
    import torch

    batch, m, n, k = cfg.get("batch", 1), cfg["m"], cfg["n"], cfg["k"]
    b_batches = 1 if cfg.get("shared") else batch
    return (batch * m * k + b_batches * k * n + batch * m * n) * torch.finfo(getattr(torch, cfg["dtype"])).bits // 8


# Against the float64 product of the same (rounded) inputs. With f32 accumulation the error is the
# final rounding to the output dtype: about u / sqrt(3) in L2 (u = 2^-8 bf16, 2^-11 f16) and at most
# u per element; ~4x margin.
TOLERANCE = {"bfloat16": (8e-3, 1.6e-2), "float16": (1e-3, 2e-3)}
