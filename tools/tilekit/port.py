"""The runtime every kernels/<name>/op.py shares: after its own argument checks (tilekit.checks), an
entry hands its output and arguments here, which picks the variant (tilekit.autotune) and calls the
export `cutile_<name>` (tilekit.ffi) on the output's device and that device's current torch stream.

    return port.rows(__name__, x, out, x.shape[-1], weight, float(eps), variant=variant)  # a row kernel
    port.run(__name__, variant, (m, n, k), c, a, b)                                       # any kernel

`op` is the kernel's op module, or its __name__ ("kernels.<name>.op"). The export takes the output's
descriptor, the arguments (tensors as descriptors, scalars as they are), op.export_args(**variant)
(with `sms=` the GPU's SM count where it takes one), device_id and stream (tilekit/kernel.py).
"""

from __future__ import annotations

import functools
import inspect
import sys
from types import ModuleType

from tilekit import autotune, ffi


def module(op: ModuleType | str) -> ModuleType:
    return sys.modules[op] if isinstance(op, str) else op


def name(op: ModuleType | str) -> str:
    """The kernel's name: its folder, kernels/<name>/op.py."""
    return module(op).__name__.split(".")[-2]


def export_args(op: ModuleType | str, variant: dict, sms: int) -> tuple:
    """The variant's arguments of the export, op.export_args(**variant) (pure), on a GPU with `sms` SMs."""
    op = module(op)
    signature = inspect.signature(op.export_args).parameters
    params = {p: v for p, v in signature.items() if p != "sms"}
    missing = sorted(p for p, v in params.items() if v.default is inspect.Parameter.empty and p not in variant)
    unknown = sorted(set(variant) - set(params))
    if missing or unknown:
        raise TypeError(
            f"{name(op)} variant {variant}: "
            + "; ".join(
                f"{what} knob(s) {', '.join(ks)}" for what, ks in (("missing", missing), ("unknown", unknown)) if ks
            )
            + f" (the export's knobs: {', '.join(params)}; -1 keeps ffi.rs's default)"
        )
    return op.export_args(**variant, **({"sms": sms} if "sms" in signature else {}))


@functools.lru_cache(maxsize=None)
def sm_count(device_id: int) -> int:
    import torch

    return torch.cuda.get_device_properties(device_id).multi_processor_count


def launch(op: ModuleType | str, out, *args, **variant) -> None:
    """One call of the export with one variant; raises ffi.KernelError on a non-zero code."""
    import torch

    op = module(op)
    device_id, stream = ffi.stream_args(out)
    sms = sm_count(device_id) if "sms" in inspect.signature(op.export_args).parameters else 0
    lib = ffi.library()
    descs = [lib.pack(a) if isinstance(a, torch.Tensor) else a for a in (out, *args)]  # alive until the call returns
    lib.call(name(op), f"cutile_{name(op)}", *descs, *export_args(op, variant, sms), device_id, stream)


def with_bases(key: dict, tensors) -> dict:
    """The tune key, with `bases: "off16"` where some tensor's base is not 16-byte aligned (a slice
    at an odd offset): the launcher then cannot hint 16-byte accesses, the entries and the fastest
    tile differ (a 4096 tile at n = 4097 needs the aligned entry), so such calls tune apart from the
    aligned ones. Keys of aligned calls are unchanged. Non-tensors (scalars, None) are skipped.

    >>> from types import SimpleNamespace as T
    >>> with_bases({"n": 8}, [T(data_ptr=lambda: 256), 1e-6, None]), with_bases({"n": 8}, [T(data_ptr=lambda: 258)])
    ({'n': 8}, {'n': 8, 'bases': 'off16'})
    """
    off = any(hasattr(t, "data_ptr") and t.data_ptr() % 16 for t in tensors)
    return dict(key, bases="off16") if off else key


def run(op: ModuleType | str, variant, sizes: tuple, out, *args, key: dict | None = None) -> None:
    """Launch the export on (out, *args) for the problem `sizes` (op.variants(*sizes) and
    op.tune_key(dtype, *sizes), or the entry's own `key`, told apart by `with_bases`) with what
    `variant` names (autotune.pick); nothing for an empty out."""
    op = module(op)
    if out.numel() == 0:
        return
    variant = autotune.pick(
        name(op),
        variant,
        default=op.DEFAULT_VARIANT,
        key=with_bases(key or op.tune_key(str(out.dtype).removeprefix("torch."), *sizes), (out, *args)),
        candidates=op.variants(*sizes),
        make_call=lambda v: lambda: launch(op, out, *args, **v),
    )
    launch(op, out, *args, **variant)


def rows(op: ModuleType | str, x, out, cols: int, *args, variant):
    """A row kernel's entry after its checks: x (..., n) as (m, n) rows, the output (..., cols) (the
    caller's `out` or a fresh torch.empty) as (m, cols); run on (x2, *args) for sizes (m, cols).
    Returns the output in x's leading shape."""
    import torch

    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    y = out if out is not None else torch.empty((*x.shape[:-1], cols), dtype=x.dtype, device=x.device)
    y2 = y if y.dim() == 2 else y.view(-1, cols)
    run(op, variant, (x2.shape[0], cols), y2, x2, *args)
    return y
