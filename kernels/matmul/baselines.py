"""matmul baselines: the implementations the cuTile Rust port (op.py) is timed against.

    C = A @ B      A (m, k), B (k, n), C (m, n); f16 or bf16 in and out, f32 accumulation

A and B are 2-D, each row-major (last dim contiguous, row strides may be larger) or column-major
(the .t() of a row-major matrix: an nn.Linear weight as a model passes it). Entries (a, b) -> c:
``torch_matmul`` (cuBLAS), ``triton_matmul`` (``tl.dot``) and ``cutile_matmul`` (``ct.mma``), whose
variants are "128x256x64", "256x128x64", "128x128x64" (one BM x BN tile per program, BK-deep K steps,
programs in bands of GROUP_M tile rows that share A and B tiles in L2), "persistent" (128x256x64
tiles, one program per SM walking the tiles) and "auto": each backend's own autotune over its
candidates (TRITON_AUTOTUNE, CUTILE_AUTOTUNE) keyed by (M, N, K), or 128x256x64 off the GPU.
Opt-in entries from other libraries (tilekit.providers): tilegym (its cuTile matmul; Liger has none).
"""

import torch

from tilekit import baseline_support as bs
from tilekit import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "matmul"
DTYPES = (torch.float16, torch.bfloat16)
VARIANTS = ("auto", "128x256x64", "256x128x64", "128x128x64", "persistent")
GROUP_M = 8  # tile rows per band of the grouped order


def _check_inputs(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul baseline: a must be (m, k) and b (k, n), got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype not in DTYPES or b.dtype != a.dtype:
        raise TypeError(f"matmul baseline: a and b must share one dtype of {DTYPES}, got {a.dtype} and {b.dtype}")
    for name, t in (("a", a), ("b", b)):
        if t.shape[1] > 1 and t.stride(1) != 1 and t.shape[0] > 1 and t.stride(0) != 1:
            raise ValueError(
                f"matmul baseline: {name} must be contiguous in its last dim or its first (the .t() of a "
                f"row-major matrix); pass {name}.contiguous()"
            )
        if t.numel() and (t.shape[0] - 1) * t.stride(0) + (t.shape[1] - 1) * t.stride(1) + 1 >= 2**31:
            raise ValueError(f"matmul baseline: {name} spans >= 2^31 elements; the kernels index with int32")
    if a.device != b.device:
        raise ValueError(f"matmul baseline: a is on {a.device} but b on {b.device}")


def _tile_plan(m: int, n: int, sms: int, variant: str) -> dict:
    """{"variant", "bm", "bn", "bk", "grid"} of a named variant: one program per output tile, or
    per SM (at most one per tile) for the persistent one."""
    bm, bn, bk = (128, 256, 64) if variant == "persistent" else (int(v) for v in variant.split("x"))
    tiles = bs.cdiv(m, bm) * bs.cdiv(n, bn)
    grid = min(tiles, sms) if variant == "persistent" else tiles
    return {"variant": variant, "bm": bm, "bn": bn, "bk": bk, "grid": max(1, grid)}


def _output(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(C, whether a kernel must fill it): not when C is empty, nor when K = 0 (C = 0 then)."""
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    if a.shape[1] == 0:
        c.zero_()
    return c, c.numel() > 0 and a.shape[1] > 0


def torch_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """cuBLAS through torch.matmul."""
    return torch.matmul(a, b)


# -- Triton -------------------------------------------------------------------------------------

# (BM, BN, BK, num_warps, num_stages) candidates of "auto": Hopper-sized tiles, 2 warpgroups for
# the 32K-element accumulators, 3-4 pipeline stages within 227 KiB of shared memory.
TRITON_AUTOTUNE = (
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 4),
    (64, 256, 64, 4, 4),
)
TRITON_NAMED = {(128, 256, 64): (8, 3), (256, 128, 64): (8, 3), (128, 128, 64): (8, 4)}


def triton_config(m: int, n: int, k: int, sms: int, variant: str = "auto", *, on_gpu: bool = True) -> dict | None:
    """The launch plan of `triton_matmul`: {"variant", "bm", "bn", "bk", "num_warps",
    "num_stages", "even_k", "grid"}; None for "auto" on a GPU (triton.autotune decides). Pure."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    if variant == "auto":
        if on_gpu:
            return None
        variant = "128x256x64"
    plan = _tile_plan(m, n, sms, variant)
    warps, stages = TRITON_NAMED[(plan["bm"], plan["bn"], plan["bk"])]
    return dict(plan, num_warps=warps, num_stages=stages, even_k=k % plan["bk"] == 0)


if triton is not None:
    C = tl.constexpr

    @triton.jit
    def _triton_tile(a_ptr, b_ptr, c_ptr, M, N, K, strides, tile_id, BM: C, BN: C, BK: C, GROUP: C, EVEN_K: C):
        """Compute and store output tile `tile_id` (grouped order); strides (am, ak, bk, bn, cm)."""
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm = strides
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        band = GROUP * tiles_n
        first_m = (tile_id // band) * GROUP
        rows = tl.minimum(tiles_m - first_m, GROUP)
        pid_m = first_m + (tile_id % band) % rows
        pid_n = (tile_id % band) // rows
        # Rows/cols past the edge wrap onto valid ones (loads stay in bounds without masks); their
        # results are masked off at the store. With N a multiple of 16 (Triton specializes on it)
        # the wrapped columns keep their contiguity, so B's loads stay vectorized.
        rm = (pid_m * BM + tl.arange(0, BM)) % M
        rn = (pid_n * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        # Any strides: Triton specializes a stride of 1, so row-major operands load as before and a
        # column-major one (x @ W.t()) is read in place along its contiguous dim.
        a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(0, tl.cdiv(K, BK)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:  # the last K step reads zeros past K on both sides
                left = K - kt * BK
                a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
                b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK * stride_ak
            b_ptrs += BK * stride_bk
        cm = pid_m * BM + tl.arange(0, BM)
        cn = pid_n * BN + tl.arange(0, BN)
        tl.store(
            c_ptr + cm[:, None] * stride_cm + cn[None, :],
            acc.to(c_ptr.dtype.element_ty),
            mask=(cm[:, None] < M) & (cn[None, :] < N),
        )

    @triton.jit
    def _triton_matmul_kernel(
        a_ptr,
        b_ptr,
        c_ptr,
        M,
        N,
        K,
        stride_am,
        stride_ak,
        stride_bk,
        stride_bn,
        stride_cm,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        GROUP: tl.constexpr,
        EVEN_K: tl.constexpr,
        PERSISTENT: tl.constexpr = False,
    ):
        """One output tile per program, or (PERSISTENT) a fixed grid walking the tiles with a grid
        stride."""
        strides = (stride_am, stride_ak, stride_bk, stride_bn, stride_cm)
        if PERSISTENT:
            for tile_id in range(tl.program_id(0), tl.cdiv(M, BM) * tl.cdiv(N, BN), tl.num_programs(0)):
                _triton_tile(a_ptr, b_ptr, c_ptr, M, N, K, strides, tile_id, BM, BN, BK, GROUP, EVEN_K)
        else:
            _triton_tile(a_ptr, b_ptr, c_ptr, M, N, K, strides, tl.program_id(0), BM, BN, BK, GROUP, EVEN_K)

    _triton_autotuned = triton.autotune(
        configs=[
            triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=s)
            for bm, bn, bk, w, s in TRITON_AUTOTUNE
        ],
        key=["M", "N", "K"],
    )(triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BK"] == 0})(_triton_matmul_kernel))


def triton_matmul(a: torch.Tensor, b: torch.Tensor, *, variant: str = "auto") -> torch.Tensor:
    """C = A @ B with our Triton kernels; `variant` as in `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    _check_inputs(a, b)
    c, launch = _output(a, b)
    if not launch:
        return c
    (m, k), n = a.shape, b.shape[1]
    args = (a, b, c, m, n, k, *a.stride(), *b.stride(), c.stride(0))
    cfg = triton_config(m, n, k, bs.num_sms(a), variant, on_gpu=a.is_cuda)
    if cfg is None:
        _triton_autotuned[lambda meta: (bs.cdiv(m, meta["BM"]) * bs.cdiv(n, meta["BN"]),)](*args, GROUP=GROUP_M)
        return c
    meta = {"BM": cfg["bm"], "BN": cfg["bn"], "BK": cfg["bk"], "EVEN_K": cfg["even_k"]}
    meta |= {
        "PERSISTENT": cfg["variant"] == "persistent",
        "num_warps": cfg["num_warps"],
        "num_stages": cfg["num_stages"],
    }
    _triton_matmul_kernel[(cfg["grid"],)](*args, GROUP=GROUP_M, **meta)
    return c


# -- cuTile Python ------------------------------------------------------------------------------

# (BM, BN, BK, CTAs per cluster) candidates of "auto": the Hopper tile and its transpose, the same
# tile in 2-CTA clusters, and TileGym's 256x256x64 2-CTA tile; 128x128x64 for small problems.
CUTILE_AUTOTUNE = ((128, 256, 64, 1), (256, 128, 64, 1), (128, 256, 64, 2), (256, 256, 64, 2), (128, 128, 64, 1))


def cutile_config(m: int, n: int, sms: int, variant: str) -> dict:
    """The launch plan of a named `cutile_matmul` variant: {"variant", "bm", "bn", "bk", "grid"}
    (the compiler picks occupancy and cluster size). Pure; "auto" is tuned on the GPU instead."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    if variant == "auto":
        raise ValueError("matmul cutile: 'auto' is tuned on the GPU (exhaustive_search), not planned")
    return _tile_plan(m, n, sms, variant)


if ct is not None:
    # Tiles past the array edge read as zero, so a ragged last K step adds nothing; stores past
    # the edge are dropped by cuTile.
    _ZERO = ct.PaddingMode.ZERO
    K = ct.Constant[int]

    def _cutile_band_coords(tile_id, tiles_m, tiles_n, GROUP):
        band = GROUP * tiles_n
        first_m = (tile_id // band) * GROUP
        rows = ct.minimum(tiles_m - first_m, GROUP)
        return first_m + (tile_id % band) % rows, (tile_id % band) // rows

    def _cutile_load(X, index, shape, TRANS):
        """A tile of an operand as stored: a column-major one (TRANS) is the row-major matrix it is the
        .t() of, read with its axes swapped (order=(1, 0)); zeros past the edge."""
        if TRANS:
            return ct.load(X, index=index, shape=shape, order=(1, 0), padding_mode=_ZERO)
        return ct.load(X, index=index, shape=shape, padding_mode=_ZERO)

    def _cutile_tile(A, B, C, bid_m, bid_n, BM, BN, BK, TRANS_A, TRANS_B):
        acc = ct.full((BM, BN), 0.0, dtype=ct.float32)
        for kt in range(ct.cdiv(A.shape[0] if TRANS_A else A.shape[1], BK)):
            a = _cutile_load(A, (bid_m, kt), (BM, BK), TRANS_A)
            b = _cutile_load(B, (kt, bid_n), (BK, BN), TRANS_B)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(bid_m, bid_n), tile=ct.astype(acc, C.dtype))

    @ct.kernel
    def _cutile_tiles_kernel(A, B, C, BM: K, BN: K, BK: K, GROUP: K, TRANS_A: K, TRANS_B: K):
        """One output tile per block, grouped order."""
        tiles_m, tiles_n = ct.cdiv(C.shape[0], BM), ct.cdiv(C.shape[1], BN)
        bid_m, bid_n = _cutile_band_coords(ct.bid(0), tiles_m, tiles_n, GROUP)
        _cutile_tile(A, B, C, bid_m, bid_n, BM, BN, BK, TRANS_A, TRANS_B)

    @ct.kernel
    def _cutile_persistent_kernel(A, B, C, BM: K, BN: K, BK: K, GROUP: K, TRANS_A: K, TRANS_B: K):
        """Static persistent: the blocks walk the output tiles with a grid stride."""
        tiles_m, tiles_n = ct.cdiv(C.shape[0], BM), ct.cdiv(C.shape[1], BN)
        for tile_id in range(ct.bid(0), tiles_m * tiles_n, ct.num_blocks(0)):
            bid_m, bid_n = _cutile_band_coords(tile_id, tiles_m, tiles_n, GROUP)
            _cutile_tile(A, B, C, bid_m, bid_n, BM, BN, BK, TRANS_A, TRANS_B)


_CUTILE_TUNED: dict = {}  # (m, n, k, dtype, device) -> ((bm, bn, bk, ctas), kernel with its hints)


def _stored(a: torch.Tensor, b: torch.Tensor) -> tuple[tuple, tuple]:
    """((A, B) as stored, (TRANS_A, TRANS_B)): a column-major operand as the row-major .t() it is."""
    trans = tuple(int(t.shape[1] > 1 and t.stride(1) != 1) for t in (a, b))
    return tuple(t.t() if tr else t for t, tr in zip((a, b), trans)), trans


def _cutile_autotuned(stream, a, b, c):
    from cuda.tile.tune import exhaustive_search

    (m, k), n = a.shape, b.shape[1]
    stored, trans = _stored(a, b)
    key = (m, n, k, a.dtype, str(a.device), trans)
    if key not in _CUTILE_TUNED:
        result = exhaustive_search(
            list(CUTILE_AUTOTUNE),
            stream,
            lambda cfg: (bs.cdiv(m, cfg[0]) * bs.cdiv(n, cfg[1]), 1, 1),
            _cutile_tiles_kernel,
            lambda cfg: (*stored, c, cfg[0], cfg[1], cfg[2], GROUP_M, *trans),
            lambda cfg: {"num_ctas": cfg[3]},
            quiet=True,
        )
        best = result.best.config
        _CUTILE_TUNED[key] = (best, _cutile_tiles_kernel.replace_hints(num_ctas=best[3]))
    (bm, bn, bk, _), kernel = _CUTILE_TUNED[key]
    return kernel, (bs.cdiv(m, bm) * bs.cdiv(n, bn), 1, 1), (*stored, c, bm, bn, bk, GROUP_M, *trans)


def cutile_matmul(a: torch.Tensor, b: torch.Tensor, *, variant: str = "auto") -> torch.Tensor:
    """C = A @ B with our cuTile Python kernels; `variant` as in the module docstring."""
    bs.require(ct, unavailable_reason, "cutile")
    _check_inputs(a, b)
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "a", a)
    c, launch = _output(a, b)
    if not launch:
        return c
    stream = torch.cuda.current_stream(a.device)
    with torch.cuda.device(a.device):
        if variant == "auto":
            kernel, grid, args = _cutile_autotuned(stream, a, b, c)
        else:
            cfg = cutile_config(a.shape[0], b.shape[1], bs.num_sms(a), variant)
            kernel = _cutile_persistent_kernel if variant == "persistent" else _cutile_tiles_kernel
            stored, trans = _stored(a, b)
            grid, args = (cfg["grid"], 1, 1), (*stored, c, cfg["bm"], cfg["bn"], cfg["bk"], GROUP_M, *trans)
        ct.launch(stream, grid, kernel, args)
    return c


def tilegym_matmul(ops, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """TileGym's cuTile matmul. A column-major operand goes in as its row-major .t() with
    trans_*=True (no copy); static_persistent=True is the documented default of tilegym.ops.matmul
    (its cuTile path without it refuses transposed operands).

    >>> class Ops:  # what TileGym's matmul receives
    ...     def matmul(self, a, b, **kw):
    ...         return tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), kw
    >>> tilegym_matmul(Ops(), torch.empty(4, 3).t(), torch.empty(4, 8)[:, :5])  # a: (3, 4) column-major
    ((4, 3), (3, 1), (4, 5), (8, 1), {'trans_a': True, 'trans_b': False, 'static_persistent': True})
    """
    ta, tb = (t.shape[1] > 1 and t.stride(1) != 1 for t in (a, b))
    return ops.matmul(a.t() if ta else a, b.t() if tb else b, trans_a=ta, trans_b=tb, static_persistent=True)


BACKENDS = {
    "cutile": cutile_matmul,
    "triton": triton_matmul,
    "torch": torch_matmul,
    **providers.backends(tilegym=tilegym_matmul),  # Liger-Kernel has no matmul
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
