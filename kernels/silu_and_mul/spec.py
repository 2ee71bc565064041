"""silu_and_mul: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel
describes; its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU
at import.

x is (m, 2H) = [gate | up] (last dim contiguous, row stride may exceed 2H); out is (m, H) =
silu(gate) * up with silu(a) = a * sigmoid(a); f32 arithmetic, output in x's dtype. Configs name
the output width `h`.
"""

from __future__ import annotations

import torch

from kernels.silu_and_mul import op
from tilekit.runtime import gated
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs (never zeros): x ~ N(0, 2^2), so gates reach silu's curved and flat
    parts, plus tilekit.runtime.gated's SATURATING_GATES at the start of row 0's gate."""
    g = generator(device, seed)
    dt = torch_dtype(cfg["dtype"])
    m, h = cfg["m"], cfg["h"]
    x = (2 * torch.randn(m, cfg.get("row_stride", 2 * h), generator=g, device=device, dtype=torch.float32)).to(dt)[
        :, : 2 * h
    ]
    gated.plant_saturating_gates(x[:, :h])
    return {"x": x}


def reference(inputs: dict) -> torch.Tensor:
    h = inputs["x"].shape[-1] // 2
    return gated.reference(inputs["x"][:, :h], inputs["x"][:, h:])


def x_out(x=(4, 16), out=(4, 8)):
    """An FfiCase's x and out."""
    return {"x": torch.randn(*x), "out": torch.empty(*out)}


SPEC = row_kernel(  # its tolerance: a few output ulps (the torch baseline rounds twice: silu, then the product)
    op,
    "h",
    # Tiny to large and irregular H; row_stride > 2H exercises padded rows; H = 14336 is the perf
    # width (seven 2048-wide column tiles per row), 4097 leaves a 1-element last tile.
    correctness_shapes=shapes(
        "m h row_stride", *((1, 1), (3, 1000), (257, 4097), (4096, 4096, 8320), (1000, 14336), (65536, 4096))
    ),
    # the first issue's two; then MLP widths the tile does not divide (Llama-2-7B 11008, Llama-2-13B
    # 13824, Qwen2-7B 18944), a decode batch (256 tokens of Llama-3-8B's 14336) and H = 4097
    # (rows not 16-byte aligned)
    perf_configs=shapes(
        "dtype m h",
        *(("bfloat16", 65536, 4096), ("bfloat16", 16384, 14336)),
        *(("bfloat16", 16384, 11008), ("bfloat16", 16384, 13824), ("bfloat16", 16384, 18944), ("bfloat16", 256, 14336)),
        ("bfloat16", 16384, 4097),
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=gated.bytes_moved,
    # 37 rows: partial row tiles for every rows > 1; H = 1000 one padded tile, H = 14336 seven tiles
    # of 2048 (or fourteen of 1024: whole tiles, so the one-row variants take the unmasked entry),
    # H = 4097 a 1-element last tile; 64 x 4096 with padded rows: every variant unmasked.
    # "default" (ffi.rs's tile) is checked there too. The partial tiles run the masked pointer-tile
    # entry; H = 11008 (8-element multiple) its predicated 16-byte form.
    variant_shapes=shapes("m h dtype row_stride", *gated.VARIANT_EDGES, (64, 4096, "float16", 8200)),
    every_variant_default=True,
    bad_inputs={
        "odd_last_dim": BadInput(lambda: call(torch.randn(4, 7)), ValueError, "even last dim"),
        "int32": BadInput(lambda: call(torch.ones(4, 8, dtype=torch.int32)), TypeError, "must be one of"),
        "out_shape": BadInput(lambda: call(torch.randn(4, 8), out=torch.empty(4, 8)), ValueError, "out must be (4, 4)"),
    },
    ffi_cases={
        "odd_last_dim": FfiCase(lambda: x_out((4, 15), (4, 7)), message="`x` last dim 15 must be even"),
        "out_shape": FfiCase(lambda: x_out(out=(4, 16)), message="`out` shape [4, 16] must be [m, H] = [4, 8]"),
        "out_is_gate_half_of_x": FfiCase(
            lambda: (lambda x: {"x": x, "out": x[:, :8]})(torch.randn(4, 16)), message="`out` overlaps `x`"
        ),
        "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        "tile_too_big": FfiCase(variant={"block": 16384, "rows": 2}, message="block*rows <= 16384"),
        # x (4, 16) in rows of 20, out (4, 8) in rows of 12: valid, so the call reaches device set-up
        "padded_rows": FfiCase(lambda: {"x": torch.randn(4, 20)[:, :16], "out": torch.empty(4, 12)[:, :8]}, code=-4),
    },
)
