"""The GEMM family's Triton and cuTile Python baselines (kernels/matmul and kernels/bmm): one batched
kernel per backend, matmul being the batch of one.

    C[i] = A[i] @ B[i]    A (batch, m, k), B (batch, k, n), C (batch, m, n); f16 or bf16, f32 accumulation

Each matrix of A and B is row-major or column-major (the transpose(1, 2) of a row-major batch), at
any batch stride (0: one matrix shared by every product). Variants: "128x256x64", "256x128x64",
"128x128x64" (one BM x BN output tile per program, BK-deep K steps; each product's tiles in bands
of GROUP_M tile rows that share A and B tiles in L2, products batch-major), "persistent" (128x256x64
tiles, one program per SM walking the tiles of every product) and "auto": each backend's own
autotune over its candidates (TRITON_AUTOTUNE, CUTILE_AUTOTUNE), or 128x256x64 off the GPU.

A member's baselines.py takes its entries from `entries` (they check the member's own `triton` /
`ct` imports through its unavailable_reason, and its shapes), which call `triton_bmm` /
`cutile_bmm` here on 3-D views (matmul: a[None], b[None]).
"""

import torch

from tilekit.runtime import baseline_support as bs

triton, tl, _ = bs.import_triton()
ct, _ = bs.import_cutile()

DTYPES = (torch.float16, torch.bfloat16)
VARIANTS = ("auto", "128x256x64", "256x128x64", "128x128x64", "persistent")
GROUP_M = 8  # tile rows per band of the grouped order
# What a kernel of `dims` dims calls its operands' shapes and their column-major layout.
_SHAPES = {2: "a must be (m, k) and b (k, n)", 3: "a must be (batch, m, k) and b (batch, k, n)"}
_COLUMN_MAJOR = {
    2: "its first (the .t() of a row-major matrix)",
    3: "its middle dim (the transpose(1, 2) of a row-major batch)",
}


def column_major(t: torch.Tensor) -> bool:
    """Whether a matrix (or batch) is stored column-major: its last dim is not contiguous."""
    return t.shape[-1] > 1 and t.stride(-1) != 1


def check_inputs(kernel: str, dims: int, a: torch.Tensor, b: torch.Tensor) -> None:
    """a and b are `dims`-D (2: matrices, 3: batches) of one of DTYPES, each row- or column-major,
    indexable with int32, on one device."""
    batch_ok = dims == 2 or a.shape[0] == b.shape[0]
    if a.dim() != dims or b.dim() != dims or not batch_ok or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"{kernel} baseline: {_SHAPES[dims]}, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype not in DTYPES or b.dtype != a.dtype:
        raise TypeError(f"{kernel} baseline: a and b must share one dtype of {DTYPES}, got {a.dtype} and {b.dtype}")
    for name, t in (("a", a), ("b", b)):
        if column_major(t) and t.shape[-2] > 1 and t.stride(-2) != 1:
            raise ValueError(
                f"{kernel} baseline: {name} must be contiguous in its last dim or {_COLUMN_MAJOR[dims]}; "
                f"pass {name}.contiguous()"
            )
        if t.numel() and sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1 >= 2**31:
            raise ValueError(f"{kernel} baseline: {name} spans >= 2^31 elements; the kernels index with int32")
    if a.device != b.device:
        raise ValueError(f"{kernel} baseline: a is on {a.device} but b on {b.device}")


def _tile_plan(batch: int, m: int, n: int, sms: int, variant: str) -> dict:
    """{"variant", "bm", "bn", "bk", "grid"} of a named variant: one program per output tile of every
    product, or per SM (at most one per tile) for the persistent one."""
    bm, bn, bk = (128, 256, 64) if variant == "persistent" else (int(v) for v in variant.split("x"))
    tiles = batch * bs.cdiv(m, bm) * bs.cdiv(n, bn)
    grid = min(tiles, sms) if variant == "persistent" else tiles
    return {"variant": variant, "bm": bm, "bn": bn, "bk": bk, "grid": max(1, grid)}


def _output(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(C, whether a kernel must fill it): not when C is empty, nor when K = 0 (C = 0 then)."""
    c = torch.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype, device=a.device)
    if a.shape[2] == 0:
        c.zero_()
    return c, c.numel() > 0 and a.shape[2] > 0


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


def triton_config(
    kernel: str, batch: int, m: int, n: int, k: int, sms: int, variant: str = "auto", *, on_gpu: bool = True
) -> dict | None:
    """The launch plan of `triton_bmm`: {"variant", "bm", "bn", "bk", "num_warps", "num_stages",
    "even_k", "grid"}; None for "auto" on a GPU (triton.autotune decides). Pure."""
    bs.check_variant(kernel, variant, VARIANTS)
    if variant == "auto":
        if on_gpu:
            return None
        variant = "128x256x64"
    plan = _tile_plan(batch, m, n, sms, variant)
    warps, stages = TRITON_NAMED[(plan["bm"], plan["bn"], plan["bk"])]
    return dict(plan, num_warps=warps, num_stages=stages, even_k=k % plan["bk"] == 0)


if triton is not None:
    C = tl.constexpr

    @triton.jit
    def _triton_tile(a_ptr, b_ptr, c_ptr, M, N, K, strides, tile_id, BM: C, BN: C, BK: C, GROUP: C, EVEN_K: C):
        """Compute and store output tile `tile_id` (batch-major, grouped order within a product);
        strides (a: batch, m, k; b: batch, k, n; c: batch, m)."""
        s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm = strides
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        q = tile_id // (tiles_m * tiles_n)
        tid = tile_id % (tiles_m * tiles_n)
        band = GROUP * tiles_n
        first_m = (tid // band) * GROUP
        rows = tl.minimum(tiles_m - first_m, GROUP)
        pid_m = first_m + (tid % band) % rows
        pid_n = (tid % band) // rows
        # Rows/cols past the edge wrap onto valid ones (loads stay in bounds without masks); their
        # results are masked off at the store. With N a multiple of 16 (Triton specializes on it)
        # the wrapped columns keep their contiguity, so B's loads stay vectorized.
        rm = (pid_m * BM + tl.arange(0, BM)) % M
        rn = (pid_n * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        # Any strides: Triton specializes a stride of 1, so row-major operands load as such and a
        # column-major one (x @ W.t()) is read in place along its contiguous dim. A batch stride of
        # 0 (a shared B) reads the same matrix for every q.
        a_ptrs = a_ptr + q * s_ab + rm[:, None] * s_am + rk[None, :] * s_ak
        b_ptrs = b_ptr + q * s_bb + rk[:, None] * s_bk + rn[None, :] * s_bn
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
            a_ptrs += BK * s_ak
            b_ptrs += BK * s_bk
        cm = pid_m * BM + tl.arange(0, BM)
        cn = pid_n * BN + tl.arange(0, BN)
        tl.store(
            c_ptr + q * s_cb + cm[:, None] * s_cm + cn[None, :],
            acc.to(c_ptr.dtype.element_ty),
            mask=(cm[:, None] < M) & (cn[None, :] < N),
        )

    @triton.jit
    def _triton_bmm_kernel(
        a_ptr,
        b_ptr,
        c_ptr,
        Q,
        M,
        N,
        K,
        s_ab,
        s_am,
        s_ak,
        s_bb,
        s_bk,
        s_bn,
        s_cb,
        s_cm,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        GROUP: tl.constexpr,
        EVEN_K: tl.constexpr,
        PERSISTENT: tl.constexpr = False,
    ):
        """One output tile per program over the Q products, or (PERSISTENT) a fixed grid walking them."""
        strides = (s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm)
        if PERSISTENT:
            for tile_id in range(tl.program_id(0), Q * tl.cdiv(M, BM) * tl.cdiv(N, BN), tl.num_programs(0)):
                _triton_tile(a_ptr, b_ptr, c_ptr, M, N, K, strides, tile_id, BM, BN, BK, GROUP, EVEN_K)
        else:
            _triton_tile(a_ptr, b_ptr, c_ptr, M, N, K, strides, tl.program_id(0), BM, BN, BK, GROUP, EVEN_K)

    _triton_autotuned = triton.autotune(
        configs=[
            triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=s)
            for bm, bn, bk, w, s in TRITON_AUTOTUNE
        ],
        key=["Q", "M", "N", "K"],
    )(triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BK"] == 0})(_triton_bmm_kernel))


def triton_bmm(kernel: str, a: torch.Tensor, b: torch.Tensor, variant: str) -> torch.Tensor:
    """C[i] = A[i] @ B[i] with the Triton kernels, for checked 3-D operands; `variant` as in
    `triton_config`."""
    c, launch = _output(a, b)
    if not launch:
        return c
    (q, m, k), n = a.shape, b.shape[2]
    args = (a, b, c, q, m, n, k, *a.stride(), *b.stride(), c.stride(0), c.stride(1))
    cfg = triton_config(kernel, q, m, n, k, bs.num_sms(a), variant, on_gpu=a.is_cuda)
    if cfg is None:
        grid = lambda meta: (q * bs.cdiv(m, meta["BM"]) * bs.cdiv(n, meta["BN"]),)  # noqa: E731
        _triton_autotuned[grid](*args, GROUP=GROUP_M)
        return c
    meta = {"BM": cfg["bm"], "BN": cfg["bn"], "BK": cfg["bk"], "EVEN_K": cfg["even_k"]}
    meta |= {
        "PERSISTENT": cfg["variant"] == "persistent",
        "num_warps": cfg["num_warps"],
        "num_stages": cfg["num_stages"],
    }
    _triton_bmm_kernel[(cfg["grid"],)](*args, GROUP=GROUP_M, **meta)
    return c


# -- cuTile Python ------------------------------------------------------------------------------

# (BM, BN, BK, CTAs per cluster) candidates of "auto": the Hopper tile and its transpose, the same
# tile in 2-CTA clusters, and TileGym's 256x256x64 2-CTA tile; 128x128x64 for small problems.
CUTILE_AUTOTUNE = ((128, 256, 64, 1), (256, 128, 64, 1), (128, 256, 64, 2), (256, 256, 64, 2), (128, 128, 64, 1))


def cutile_config(kernel: str, batch: int, m: int, n: int, sms: int, variant: str) -> dict:
    """The launch plan of a named `cutile_bmm` variant: {"variant", "bm", "bn", "bk", "grid"} (the
    compiler picks occupancy and cluster size). Pure; "auto" is tuned on the GPU instead."""
    bs.check_variant(kernel, variant, VARIANTS)
    if variant == "auto":
        raise ValueError(f"{kernel} cutile: 'auto' is tuned on the GPU (exhaustive_search), not planned")
    return _tile_plan(batch, m, n, sms, variant)


if ct is not None:
    # Tiles past the array edge read as zero, so a ragged last K step adds nothing; stores past
    # the edge are dropped by cuTile.
    _ZERO = ct.PaddingMode.ZERO
    K = ct.Constant[int]

    def _cutile_load(X, index, shape, TRANS):
        """A (1, rows, cols) tile of a batch as stored, as a (rows, cols) tile: a column-major one
        (TRANS) is the row-major batch it is the transpose(1, 2) of, read with its axes swapped."""
        if TRANS:
            t = ct.load(X, index=index, shape=shape, order=(0, 2, 1), padding_mode=_ZERO)
        else:
            t = ct.load(X, index=index, shape=shape, padding_mode=_ZERO)
        return ct.reshape(t, (shape[1], shape[2]))

    def _cutile_tile(A, B, C, tile_id, BM, BN, BK, GROUP, TRANS_A, TRANS_B, SHARED_B):
        """Output tile `tile_id`: batch-major, bands of GROUP tile rows within a product."""
        tiles_m, tiles_n = ct.cdiv(C.shape[1], BM), ct.cdiv(C.shape[2], BN)
        q, tid = tile_id // (tiles_m * tiles_n), tile_id % (tiles_m * tiles_n)
        band = GROUP * tiles_n
        first_m = (tid // band) * GROUP
        rows = ct.minimum(tiles_m - first_m, GROUP)
        bid_m, bid_n = first_m + (tid % band) % rows, (tid % band) // rows
        qb = q * (1 - SHARED_B)
        acc = ct.full((BM, BN), 0.0, dtype=ct.float32)
        for kt in range(ct.cdiv(A.shape[1] if TRANS_A else A.shape[2], BK)):
            a = _cutile_load(A, (q, bid_m, kt), (1, BM, BK), TRANS_A)
            b = _cutile_load(B, (qb, kt, bid_n), (1, BK, BN), TRANS_B)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(q, bid_m, bid_n), tile=ct.reshape(ct.astype(acc, C.dtype), (1, BM, BN)))

    @ct.kernel
    def _cutile_tiles_kernel(A, B, C, BM: K, BN: K, BK: K, GROUP: K, TRANS_A: K, TRANS_B: K, SHARED_B: K):
        """One output tile per block."""
        _cutile_tile(A, B, C, ct.bid(0), BM, BN, BK, GROUP, TRANS_A, TRANS_B, SHARED_B)

    @ct.kernel
    def _cutile_persistent_kernel(A, B, C, BM: K, BN: K, BK: K, GROUP: K, TRANS_A: K, TRANS_B: K, SHARED_B: K):
        """Static persistent: the blocks walk the output tiles of every product with a grid stride."""
        tiles = C.shape[0] * ct.cdiv(C.shape[1], BM) * ct.cdiv(C.shape[2], BN)
        for tile_id in range(ct.bid(0), tiles, ct.num_blocks(0)):
            _cutile_tile(A, B, C, tile_id, BM, BN, BK, GROUP, TRANS_A, TRANS_B, SHARED_B)


_CUTILE_TUNED: dict = {}  # (problem, layout, device) -> ((bm, bn, bk, ctas), kernel with its hints)


def _stored(a: torch.Tensor, b: torch.Tensor) -> tuple[tuple, tuple]:
    """((A, B) as stored, (TRANS_A, TRANS_B, SHARED_B)): a column-major batch as the row-major
    transpose(1, 2) it is; a B shared by the batch (stride 0) as a batch of one."""
    trans = tuple(int(column_major(t)) for t in (a, b))
    stored = [t.transpose(1, 2) if tr else t for t, tr in zip((a, b), trans)]
    shared = int(b.shape[0] > 1 and b.stride(0) == 0)
    if shared:
        stored[1] = stored[1][0].unsqueeze(0)
    return tuple(stored), (*trans, shared)


def _cutile_autotuned(stream, a, b, c):
    from cuda.tile.tune import exhaustive_search

    (q, m, k), n = a.shape, b.shape[2]
    stored, flags = _stored(a, b)
    key = (q, m, n, k, a.dtype, str(a.device), flags)
    if key not in _CUTILE_TUNED:
        result = exhaustive_search(
            list(CUTILE_AUTOTUNE),
            stream,
            lambda cfg: (q * bs.cdiv(m, cfg[0]) * bs.cdiv(n, cfg[1]), 1, 1),
            _cutile_tiles_kernel,
            lambda cfg: (*stored, c, cfg[0], cfg[1], cfg[2], GROUP_M, *flags),
            lambda cfg: {"num_ctas": cfg[3]},
            quiet=True,
        )
        best = result.best.config
        _CUTILE_TUNED[key] = (best, _cutile_tiles_kernel.replace_hints(num_ctas=best[3]))
    (bm, bn, bk, _), kernel = _CUTILE_TUNED[key]
    return kernel, (q * bs.cdiv(m, bm) * bs.cdiv(n, bn), 1, 1), (*stored, c, bm, bn, bk, GROUP_M, *flags)


def cutile_bmm(kernel: str, a: torch.Tensor, b: torch.Tensor, variant: str) -> torch.Tensor:
    """C[i] = A[i] @ B[i] with the cuTile Python kernels, for checked 3-D operands on a GPU."""
    bs.check_variant(kernel, variant, VARIANTS)
    bs.require_cuda(kernel, "a", a)
    c, launch = _output(a, b)
    if not launch:
        return c
    stream = torch.cuda.current_stream(a.device)
    with torch.cuda.device(a.device):
        if variant == "auto":
            fn, grid, args = _cutile_autotuned(stream, a, b, c)
        else:
            cfg = cutile_config(kernel, a.shape[0], a.shape[1], b.shape[2], bs.num_sms(a), variant)
            fn = _cutile_persistent_kernel if variant == "persistent" else _cutile_tiles_kernel
            stored, flags = _stored(a, b)
            grid, args = (cfg["grid"], 1, 1), (*stored, c, cfg["bm"], cfg["bn"], cfg["bk"], GROUP_M, *flags)
        ct.launch(stream, grid, fn, args)
    return c


def entries(kernel: str, dims: int, reason) -> dict:
    """{"cutile", "triton", "torch"} -> cutile_<kernel>, triton_<kernel>, torch_<kernel>, the first
    three BACKENDS of a member of `dims` dims (matmul 2, bmm 3), (a, b) -> a @ b: our cuTile Python
    and Triton kernels (`variant` as in VARIANTS) and cuBLAS through torch.matmul, on the operands
    as given (torch.bmm for bmm: a shared B as its stride-0 view, which ATen hands to cuBLAS's
    strided-batched GEMM). `reason(backend)` is the member's unavailable_reason."""
    batch = (lambda t: t) if dims == 3 else (lambda t: t[None])
    unbatch = (lambda c: c) if dims == 3 else (lambda c: c[0])

    def cutile_entry(a: torch.Tensor, b: torch.Tensor, *, variant: str = "auto") -> torch.Tensor:
        bs.require_reason(reason, "cutile")
        check_inputs(kernel, dims, a, b)
        return unbatch(cutile_bmm(kernel, batch(a), batch(b), variant))

    def triton_entry(a: torch.Tensor, b: torch.Tensor, *, variant: str = "auto") -> torch.Tensor:
        bs.require_reason(reason, "triton")
        check_inputs(kernel, dims, a, b)
        return unbatch(triton_bmm(kernel, batch(a), batch(b), variant))

    product = torch.bmm if dims == 3 else torch.matmul  # bmm: torch.matmul would copy a shared B

    def torch_entry(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return product(a, b)

    what = "C = A @ B" if dims == 2 else "C[i] = A[i] @ B[i]"
    docs = {b: f"{what} with {how}; `variant` as in VARIANTS." for b, how in bs.OURS.items()}
    docs["torch"] = f"{what} with cuBLAS through torch.{product.__name__}, on the operands as given."
    return bs.named_entries(kernel, {"cutile": cutile_entry, "triton": triton_entry, "torch": torch_entry}, docs)
