"""matmul, the cuTile Rust port: C = A @ B in f16 or bf16 with f32 accumulation.

    from kernels.matmul.op import matmul
    c = matmul(a, b)                 # a: (m, k), b: (k, n) CUDA f16/bf16, last dims contiguous

Calls `cutile_matmul` in libcutile_kernels.so (kernels/matmul/ffi.rs) on a's device and that
device's current torch stream. The output is allocated here with torch.empty (or passed as
`out`, which may be a column slice of a wider buffer); Rust only borrows.
`variant="auto"` (the default) uses the autotuned variant for this GPU, dtype and shape class
(tilekit.autotune over `variants`); "default" takes ffi.rs's defaults; a dict
{"bm", "bn", "bk", "group", "persistent", "occupancy", "cga"} picks one explicitly.
"""

from __future__ import annotations

import functools

import torch

from tilekit import autotune, checks, ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_matmul(const TensorDesc* c, const TensorDesc* a, const TensorDesc* b,
                      int32_t bm, int32_t bn, int32_t bk, int32_t group, int32_t programs,
                      int32_t occupancy, int32_t num_cta_in_cga,
                      int32_t device_id, uint64_t stream);
"""

DTYPES = ("bfloat16", "float16")
DEFAULT_VARIANT = {"bm": -1, "bn": -1, "bk": -1, "group": -1, "persistent": False, "occupancy": -1, "cga": -1}


INDEX_LIMIT = 2**31 - 1  # ffi.rs row_stride(): the kernel's views index each operand with i32


def check_index_range(
    m: int, n: int, k: int, lda: int | None = None, ldb: int | None = None, ldc: int | None = None
) -> None:
    """ValueError unless every operand (a (m, k), b (k, n), c (m, n); row strides default to the
    column counts) spans at most INDEX_LIMIT elements, the limit ffi.rs enforces (-6 there). Pure,
    so it runs before any autotune or launch and the CPU tests can check it for any size. A column
    slice of a wider buffer spans (rows - 1) * stride + cols elements; one row just cols:

    >>> check_index_range(1, 1 << 30, 1, ldc=1 << 31)
    >>> check_index_range(2, 8, 8, lda=(1 << 31) - 8)
    Traceback (most recent call last):
    ValueError: matmul: a (2 x 8, row stride 2147483640) spans 2147483648 elements for m=2, n=8, k=8; the kernel indexes each operand with i32 (at most 2147483647 elements): split the product into smaller blocks

    The entry refuses such a product from the shapes alone (meta tensors: nothing is allocated),
    before autotune could try (and fail) every candidate:

    >>> a, b = (torch.empty(s, dtype=torch.bfloat16, device="meta") for s in ((16384, 4096), (4096, 151936)))
    >>> matmul(a, b)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: matmul: c (16384 x 151936, row stride 151936) spans 2489319424 elements for m=16384, ...
    """
    for name, rows, cols, ld in (("a", m, k, lda), ("b", k, n, ldb), ("c", m, n, ldc)):
        if rows <= 0 or cols <= 0:
            continue  # nothing is indexed
        ld = cols if rows == 1 or ld is None else ld
        extent = (rows - 1) * ld + cols
        if extent > INDEX_LIMIT:
            raise ValueError(
                f"matmul: {name} ({rows} x {cols}, row stride {ld}) spans {extent} elements for m={m}, n={n}, k={k}; "
                f"the kernel indexes each operand with i32 (at most {INDEX_LIMIT} elements): split the product into "
                "smaller blocks"
            )


@functools.lru_cache(maxsize=None)
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


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
    on a GPU with `sms` SMs. Pure, so the CPU tests check `variants` through exactly what launch
    passes."""
    programs = persistent_programs(sms, occupancy, cga) if persistent else 0
    return int(bm), int(bn), int(bk), int(group), int(programs), int(occupancy), int(cga)


def launch(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    bm: int,
    bn: int,
    bk: int,
    group: int,
    persistent: bool,
    occupancy: int,
    cga: int,
) -> None:
    """One call of the export with one variant; raises ffi.KernelError on a non-zero code."""
    device_id, stream = ffi.stream_args(a)
    sms = _sm_count(device_id) if persistent else 0
    lib = ffi.library()
    d_c, d_a, d_b = lib.pack(c), lib.pack(a), lib.pack(b)
    lib.call(
        "matmul",
        "cutile_matmul",
        d_c,
        d_a,
        d_b,
        *export_args(bm, bn, bk, group, persistent, occupancy, cga, sms=sms),
        device_id,
        stream,
    )


def matmul(
    a: torch.Tensor, b: torch.Tensor, *, variant: str | dict = "auto", out: torch.Tensor | None = None
) -> torch.Tensor:
    """C = A @ B. Raises ValueError/TypeError on bad input and ffi.KernelError on a non-zero
    return code."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a must be (m, k) and b (k, n), got {tuple(a.shape)} and {tuple(b.shape)}")
    checks.dtypes("matmul", DTYPES, a=a, b=b)
    checks.contiguous_last_dim("matmul", size_one_ok=True, a=a, b=b)
    (m, k), n = a.shape, b.shape[1]
    checks.out_matches("matmul", out, (m, n), a)
    check_index_range(m, n, k, a.stride(0), b.stride(0), out.stride(0) if out is not None else n)
    checks.cuda("matmul", a=a, b=b)
    c = out if out is not None else torch.empty((m, n), dtype=a.dtype, device=a.device)
    if c.numel() == 0:
        return c
    if k == 0:
        return c.zero_()
    variant = autotune.pick(
        "matmul",
        variant,
        default=DEFAULT_VARIANT,
        key=tune_key(str(a.dtype).removeprefix("torch."), m, n, k),
        candidates=variants(m, n, k),
        make_call=lambda v: lambda: launch(a, b, c, **v),
    )
    launch(a, b, c, **variant)
    return c


# -- autotune: the port's variants (ffi.rs: tile shape, band rows, persistent grid, hints) --------

H200_SMS = 132  # decides the variant list only; op.py sizes persistent grids from the real GPU


def _pow2_class(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def tune_key(dtype: str, m: int, n: int, k: int) -> dict:
    """Problem class: every dim rounded up to a power of two.

    >>> tune_key("bfloat16", 1000, 1025, 4096)
    {'dtype': 'bfloat16', 'm_class': 1024, 'n_class': 2048, 'k_class': 4096}
    """
    return {"dtype": dtype, "m_class": _pow2_class(m), "n_class": _pow2_class(n), "k_class": _pow2_class(k)}


def _v(bm, bn, bk, *, persistent=False, occupancy=1, cga=1, group=8) -> dict:
    return {"bm": bm, "bn": bn, "bk": bk, "group": group, "persistent": persistent, "occupancy": occupancy, "cga": cga}


def variants(m: int, n: int, k: int) -> list[dict]:
    """Candidate variants, few because tileiras takes ~3-4 s per GEMM tile shape (vs ~0.5 s for
    an rms_norm variant), so a class costs ~15-20 s of JIT the first time in a process. From the
    H200 sweep (kernels/matmul/NOTES.md): 128x128x64 at occupancy 2 was the fastest tile on all
    four perf shapes, the same at occupancy 1 next; 128x256 and 256x128 tiles spill in one CTA and
    only work as 2-CTA clusters; 128x128x128 and 64x256 were slower. So: the 128x128 tile first
    (ffi.rs's default shape), the clustered wide tiles as the alternatives, and a persistent
    128x128 grid; for problems with fewer 128x128 tiles than two per SM, smaller tiles that spread
    the work over more SMs:

    >>> [(v["bm"], v["bn"], v["cga"], v["persistent"]) for v in variants(1000, 1000, 1000)]  # 64 tiles for 132 SMs
    [(128, 128, 1, False), (64, 128, 1, False), (128, 64, 1, False), (64, 64, 1, False)]
    >>> [(v["bm"], v["bn"], v["cga"], v["persistent"]) for v in variants(4096, 4096, 4096)]  # 1024
    [(128, 128, 1, False), (128, 128, 1, False), (128, 256, 2, False), (256, 128, 2, False), (128, 128, 1, True)]
    >>> variants(16384, 1024, 4096)[0] == _v(128, 128, 64, occupancy=2)
    True
    """
    del k  # K decides the loop length, not the tiling
    if -(-m // 128) * -(-n // 128) >= 2 * H200_SMS:
        return [
            _v(128, 128, 64, occupancy=2),
            _v(128, 128, 64),
            _v(128, 256, 64, cga=2),
            _v(256, 128, 64, cga=2),
            _v(128, 128, 64, persistent=True, occupancy=2),
        ]
    return [
        _v(128, 128, 64, occupancy=2),
        _v(64, 128, 64, occupancy=2),
        _v(128, 64, 64, occupancy=2),
        _v(64, 64, 64, occupancy=4),
    ]
