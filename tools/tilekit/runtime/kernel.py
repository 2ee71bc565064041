"""The kernel contract: what a kernel declares once, in kernels/<name>/spec.py as
``SPEC = KernelSpec(op=op, ...)``, and what its GPU suites (tilekit.testing.suite), the CPU contract tests
(tests/kit/test_kernel_contract.py) and the scripts read from it. docs/kernels.md is the guide.

kernels/<name>/op.py, the runtime, imports nothing from spec.py (spec.py imports op) and holds:
  CDEF              the C declaration of the export `cutile_<name>` (read by `make symbols` via ast)
  DTYPES            the dtypes the port supports, as torch's short names: the one statement of them
  <name>(*args, variant="auto", out=None)   the entry, decorated with tilekit.runtime.port.entry (its tensor
                    arguments' layouts, the inputs out may be in place of: the aliasing rule); checks
                    (tilekit.runtime.checks; bad input raises TypeError/ValueError), then tilekit.runtime.port.rows or
                    .run picks the variant and calls
  DEFAULT_VARIANT, variants(*dims), tune_key(dtype, *dims)   the autotune space (dims as SPEC.dims names them)
  export_args(**variant[, sms=])            a variant -> the export's variant arguments (pure)
The export takes the output's descriptor first, then the entry's arguments in order (tensors as
descriptors, scalars as they are), then the variant's arguments, then device_id and stream.

Most of a row kernel's declaration (an (m, n) problem over rows, optional row_stride) is shared:
``row_kernel`` fills it in. ``shapes`` writes a list of configs as a table, ``sweep_grid`` the
products of sizes that `make sweep` times (docs/sweep.md).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from tilekit.runtime import checks, ffi, port


def names(kernels_dir: Path | None = None) -> list[str]:
    """Every kernel: a folder of kernels/ holding kernel.rs (as the Makefile and build.rs find them)."""
    return sorted(p.parent.name for p in (kernels_dir or ffi.KERNELS_DIR).glob("*/kernel.rs"))


def load(name: str) -> KernelSpec:
    """kernels/<name>/spec.py's SPEC."""
    spec = getattr(importlib.import_module(f"kernels.{name}.spec"), "SPEC", None)
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"kernels/{name}/spec.py: declare the kernel as SPEC = tilekit.runtime.kernel.KernelSpec(...)")
    return spec


def torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def generator(device, seed: int | None = None):
    """A torch.Generator on `device`, seeded (fresh random when seed is None); None on the meta
    device, where make_inputs lays tensors out without data (the CPU tests' descriptors)."""
    import torch

    if torch.device(device).type == "meta":
        return None
    g = torch.Generator(device=device)
    g.seed() if seed is None else g.manual_seed(seed)
    return g


def stacked(y, shape: tuple | None = None):
    """A baseline's output as the port's one `out` (of `shape`): a library that makes its outputs apart
    is checked with them joined as the port writes them: stacked along a new first dim where each has
    shape's other dims and there are shape[0] of them (fused_add_rms_norm's (y, s) as out[0], out[1]),
    side by side along the one dim where their sizes add up to shape's and agree with it on every
    other (silu_and_mul_backward's (dgate, dup) as [dgate | dup]; rope's q and k heads), else as
    rows, each flattened to rows of the first one's width (rms_norm_backward's (dx, dw)); a tensor is
    returned as it is. Only the check joins them: the timed call returns what the library makes.

    >>> import torch
    >>> stacked((torch.zeros(2, 3), torch.ones(3))).tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    >>> stacked((torch.zeros(2, 1), torch.ones(2, 2)), (2, 3)).tolist()
    [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    >>> stacked((torch.zeros(1, 2), torch.ones(1, 2)), (2, 1, 2)).tolist()
    [[[0.0, 0.0]], [[1.0, 1.0]]]
    >>> stacked((torch.zeros(1, 2, 3, 1), torch.ones(1, 1, 3, 1)), (1, 3, 3, 1))[0, :, 0, 0].tolist()
    [0.0, 0.0, 1.0]
    """
    if not isinstance(y, (tuple, list)):
        return y
    import torch

    if shape is not None and len(y) == shape[0] and all(tuple(t.shape) == tuple(shape[1:]) for t in y):
        return torch.stack(list(y))
    for dim in reversed(range(len(shape or ()))):
        others = [i for i in range(len(shape)) if i != dim]
        if all(t.dim() == len(shape) and all(t.shape[i] == shape[i] for i in others) for t in y):
            if sum(t.shape[dim] for t in y) == shape[dim]:
                return torch.cat(list(y), dim)
    return torch.cat([t.reshape(-1, y[0].shape[-1]) for t in y])


def call(*args, **kwargs) -> tuple[tuple, dict]:
    """The arguments of one call of the entry, for BadInput."""
    return args, kwargs


def shapes(keys: str, *rows: tuple) -> list[dict]:
    """Configs from a table: each row's values under `keys`, in order (a shorter row leaves the last
    keys out).

    >>> shapes("m n row_stride", (1, 1), (4096, 4096, 4160))
    [{'m': 1, 'n': 1}, {'m': 4096, 'n': 4096, 'row_stride': 4160}]
    """
    return [dict(zip(keys.split(), row)) for row in rows]


SWEEP_SIZES = ("quick", "full")  # make sweep's SWEEP=: a few dozen configs, or a few hundred


def grid(axes: dict, keep: Callable[[dict], bool] | None = None) -> list[dict]:
    """Every combination of the axes' values, the first axis outermost; a None value leaves its key
    out (``bt=(None, 1)``: row-major B, then column-major); `keep` drops the configs it refuses.

    >>> grid({"m": (1, 8), "bt": (None, 1)})
    [{'m': 1}, {'m': 1, 'bt': 1}, {'m': 8}, {'m': 8, 'bt': 1}]
    """
    configs = [{k: v for k, v in zip(axes, values) if v is not None} for values in itertools.product(*axes.values())]
    return [c for c in configs if keep is None or keep(c)]


def sweep_grid(quick: dict, full: dict, keep: Callable[[dict], bool] | None = None) -> dict[str, list[dict]]:
    """A kernel's sweep (KernelSpec.sweep): SWEEP=quick and SWEEP=full as grids of axes (dims, dtype
    and optional keys), `keep` applied to both."""
    return {"quick": grid(quick, keep), "full": grid(full, keep)}


@dataclass(frozen=True)
class BadInput:
    """A call the entry refuses in Python, before the GPU: make() -> call(...), the exception and
    a substring of its message."""

    make: Callable[[], tuple[tuple, dict]]
    error: type[Exception]
    message: str


@dataclass(frozen=True)
class FfiCase:
    """One call of the export on CPU tensors and its return code: `tensors()` replaces some of the
    ffi_example's ({"out": ..., <input name>: ...}), `variant` some knobs of DEFAULT_VARIANT;
    `message` is a substring of the error. The device is one no machine has, so -4 means valid."""

    tensors: Callable[[], dict] = dict
    variant: dict = field(default_factory=dict)
    code: int = -6
    message: str = ""


@dataclass(frozen=True)
class KernelSpec:
    op: ModuleType  # kernels/<name>/op.py: the name, entry, dtypes and autotune space
    dims: dict  # the problem's sizes, in id order -> the largest the CPU property draws
    correctness_shapes: list  # shapes (dims, optional strides): test_op runs each with every dtype
    perf_configs: list  # test_perf's configs (dims and dtype)
    tolerance: dict  # dtype -> (relative L2, max |y - ref| / (scale + |ref|)) against reference
    make_inputs: Callable  # (cfg, device="cuda", seed=None) -> {name: tensor or scalar}: the entry's args, in order
    reference: Callable  # inputs -> the float64 result
    out_shape: Callable  # cfg -> the output's shape
    bytes_moved: Callable  # cfg -> the fewest bytes a call moves (GB/s)
    variant_shapes: list  # test_op_every_variant_cutile_rs: every candidate on each of these
    bad_inputs: dict  # case -> BadInput (test_op_bad_input_cutile_rs, on the CPU)
    ffi_example: dict  # a small cfg: the CPU tensors the FfiCases and the generic CPU calls start from
    ffi_cases: dict = field(default_factory=dict)  # case -> FfiCase: what ffi.rs's validation returns
    alias_example: dict | None = (
        None  # a small cfg where an input has out's shape (matmul: k = n), when the ffi_example has none
    )
    flops: Callable | None = None  # cfg -> flops; where declared, records report TFLOP/s instead of GB/s
    strides: dict = field(default_factory=dict)  # optional row-stride keys of a shape -> their prefix in ids
    options: dict = field(default_factory=dict)  # other optional keys of a shape -> their prefix in ids
    out_row_stride: str | None = None  # the cfg key of the output's row stride, when a shape can pad it
    perf_id_sep: str = "-"  # joins the dims in test_perf ids
    max_variants: int = 12  # variants() stays this short (each candidate is a JIT when tuning)
    autotune_edges: list = field(default_factory=list)  # shapes the CPU property always tries
    size_check: Callable | None = None  # (**dims): op.py's ValueError for sizes no variant can serve
    every_variant_default: bool = False  # test_op_every_variant_cutile_rs also runs variant="default"
    sweep: dict = field(default_factory=dict)  # SWEEP size -> configs of `make sweep` (sweep_grid; else perf_configs)
    # the max error's scale: "one" (1 + |ref|) or "rms" (max(1, the reference's RMS) + |ref|), for
    # long reductions whose elements near zero are differences of partial sums of the tensor's size
    max_error_scale: str = "one"
    # dtype -> the gradients' tolerance (test_op_backward_cutile_rs) where it is not `tolerance`'s
    backward_tolerance: dict = field(default_factory=dict)
    # a gradient may cancel to zero exactly (attention rows that each see one key: dq = 0): its
    # relative error is then judged against the rounding floor (harness.gradient_norm_floor)
    gradient_floor: bool = False
    # cfg -> why test_op_backward_cutile_rs cannot judge the gradient there (a pytest skip with it,
    # shown in correctness.md), or None: for a config where the gradient is ill-conditioned itself
    backward_skip: Callable = lambda cfg: None  # noqa: E731
    # inputs -> None, or (rows, the float64 reference of those rows of the output, as stacked) where
    # the whole reference would cost minutes (attention_backward's perf configs): harness.check
    # compares those rows only
    reference_part: Callable | None = None
    # cfg -> {name: (first row, end row)} of an output made of blocks of different scales (stacked
    # gradients: fused_linear_cross_entropy's [dh; dW], where dh can be 2 % of the whole norm):
    # harness.check judges each block against its own rows of the reference, not the whole alone
    out_blocks: Callable | None = None
    # inputs a forward made from the others (a backward's: attention_backward's o and lse) -> their
    # dtype, or None for the config's: not random, so they may hold zeros (a query that sees no key)
    saved_inputs: dict = field(default_factory=dict)
    # floating inputs with no gradient (rope's cos/sin tables: a model's constants): the gradient test
    # leaves them out of its leaves
    constant_inputs: tuple = ()
    # cfg -> {input: dtype} for inputs whose dtype is not the config's (rope's int64 position ids and
    # its float32 tables)
    input_dtypes: Callable = lambda cfg: {}  # noqa: E731
    # the output's dtype where it is not the first input's (cross_entropy's per-row f32 losses)
    out_dtype: str | None = None

    # -- what is derived, never restated ----------------------------------------------------------

    @property
    def name(self) -> str:
        return port.name(self.op)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(self.op.DTYPES)

    @property
    def entry(self) -> Callable:
        return getattr(self.op, self.name)

    @property
    def layouts(self) -> dict[str, str]:
        """The entry's tensor arguments and their layouts, as its tilekit.runtime.port.entry declares them."""
        return dict(getattr(self.entry, "layouts", {}))

    @property
    def in_place(self) -> tuple[str, ...]:
        """The inputs `out` may be (an in-place call), as the entry's tilekit.runtime.port.entry declares them."""
        return tuple(getattr(self.entry, "in_place", ()))

    def dims_of(self, cfg: dict) -> dict:
        return {d: cfg[d] for d in self.dims}

    def torch_op_shapes(self) -> list[dict]:
        """The configs of the op's GPU tests (opcheck, torch.compile, CUDA graphs): the first two
        correctness shapes (the small ones) in each dtype."""
        return [dict(s, dtype=d) for s in self.correctness_shapes[:2] for d in self.dtypes]

    def backward_shapes(self) -> list[dict]:
        """The configs of the gradient's GPU test: torch_op_shapes, and in the first dtype every other
        correctness shape whose sizes are all at most 1024 (the odd sizes, strides and layouts: each
        is a shape class the op autotunes on first use, so the big ones are left to the forward)."""
        small = [s for s in self.correctness_shapes[2:] if max(v for k, v in s.items() if k in self.dims) <= 1024]
        return self.torch_op_shapes() + [dict(s, dtype=self.dtypes[0]) for s in small]

    def config_error(self, cfg: dict) -> str | None:
        """What a config given by hand (a script's --shapes) lacks of the dims and dtype, or None."""
        missing = [d for d in (*self.dims, "dtype") if d not in cfg]
        return f"{cfg} lacks {missing} (kernels/{self.name}/spec.py dims: {list(self.dims)})" if missing else None

    def variants(self, cfg: dict) -> list[dict]:
        return self.op.variants(**self.dims_of(cfg))

    def tune_key(self, cfg: dict) -> dict:
        return self.op.tune_key(cfg["dtype"], **self.dims_of(cfg))

    def export_args(self, variant: dict, sms: int) -> tuple:
        """The variant's arguments of the export as tilekit.runtime.port passes them (on a GPU with `sms` SMs)."""
        return port.export_args(self.op, variant, sms)

    def shape_id(self, shape: dict, sep: str = "x", strides: bool = True) -> str:
        """'257x4097', '4096x4096ld4160', '777x1280x2000-lda2048-ldb1344-ldc1408', '3x1000-no_bias'."""
        text = sep.join(str(shape[d]) for d in self.dims)
        text += "".join(f"{p}{shape[k]}" for k, p in self.strides.items() if strides and k in shape)
        return text + "".join(f"{p}{shape[k]}" for k, p in self.options.items() if k in shape)

    # -- calling each side ----------------------------------------------------------------------

    def run_port(self, inputs: dict, out=None, variant="auto"):
        return self.entry(*inputs.values(), variant=variant, out=out)

    def baselines(self) -> ModuleType:
        """kernels/<name>/baselines.py (BACKENDS, VARIANTS, unavailable_reason), imported on first use."""
        return importlib.import_module(f"kernels.{self.name}.baselines")

    def run_baseline(self, backend: str, inputs: dict, variant: str | None = None):
        """backend: a record name of baselines.BACKENDS; variant: one of baselines.VARIANTS."""
        kwargs = {} if variant is None else {"variant": variant}
        return self.baselines().BACKENDS[backend](*inputs.values(), **kwargs)

    def out_dtype_like(self, first):
        """The output's torch dtype for inputs whose first tensor is `first`: out_dtype, else first's."""
        return torch_dtype(self.out_dtype) if self.out_dtype else first.dtype

    def make_out(self, cfg: dict, inputs: dict):
        """The output the caller passes in, NaN-poisoned (an element the kernel does not write fails
        the check), inside rows of cfg[out_row_stride] elements when the shape has that key."""
        import torch

        like = next(v for v in inputs.values() if isinstance(v, torch.Tensor))
        shape = tuple(self.out_shape(cfg))
        padded = (*shape[:-1], cfg.get(self.out_row_stride, shape[-1])) if self.out_row_stride else shape
        out = torch.full(padded, float("nan"), dtype=self.out_dtype_like(like), device=like.device)
        return out[..., : shape[-1]] if padded != shape else out

    def shared_ffi_cases(self) -> dict[str, FfiCase]:
        """The invalid calls every export refuses alike, in ffi_util's words, on the ffi_example (run
        before ffi_cases): its first input with one dim more or fewer or a strided last dim, the output
        in another dtype, occupancy 33 and, where the export takes worker warps, 2 or 16."""
        import torch

        inputs = self.make_inputs(self.ffi_example, device="cpu", seed=0)
        (name, x), dim = next(iter(inputs.items())), next(iter(inputs.values())).dim()
        out_name = re.search(r"TensorDesc\*\s*(\w+)", self.op.CDEF)[1]  # the export's first argument
        have = self.ffi_example["dtype"]
        other = next(d for d in ("float16", "bfloat16", "float32") if d != have)
        r = ffi.RUST_DTYPE_NAMES
        code, refusal = -6, f"`{name}` is {r[have]} but `{out_name}` is {r[other]}: all tensors must share one dtype"
        if self.out_dtype:  # an output of its own dtype: out in another is refused as an unsupported dtype
            other = next(d for d in ("float16", "bfloat16", "float32") if d != self.out_dtype)
            code, refusal = -2, f"{out_name} is {r[other]}; {self.name} supports {r[self.out_dtype]}"
        cases = {
            "out_dtype": FfiCase(
                lambda: {"out": self.make_out(self.ffi_example, inputs).to(torch_dtype(other))},
                code=code,
                message=refusal,
            ),
            # every other element of a buffer twice as wide: strided in its last dim and in no dim 1
            f"{name}_last_dim_stride": FfiCase(
                lambda: {name: torch.stack((x, x), -1).flatten(-2)[..., ::2]},
                message=f"`{name}` must be contiguous in its last dim",
            ),
            f"{name}_one_dim_more": FfiCase(
                lambda: {name: x[None]}, message=f"`{name}` must have {dim} dims, got ndim={dim + 1}"
            ),
            "occupancy": FfiCase(variant={"occupancy": 33}, message="variant occupancy=33: use 1..=32"),
        }
        if dim > 1:
            cases[f"{name}_one_dim_fewer"] = FfiCase(
                lambda: {name: x.flatten()}, message=f"`{name}` must have {dim} dims, got ndim=1"
            )
        if "warps" in inspect.signature(self.op.export_args).parameters:
            cases |= {
                f"warps_{w}": FfiCase(variant={"warps": w}, message=f"variant warps={w}: use 4 or 8") for w in (2, 16)
            }
        return cases

    def bad_input_cases(self) -> dict[str, BadInput]:
        """test_op_bad_input_cutile_rs's cases: the calls every entry refuses alike, in
        tilekit.runtime.checks' words, on the ffi_example's CPU inputs (as they are: on the CPU; in float64;
        the first one strided in its last dim), then bad_inputs (a case of the same name replaces
        the shared one)."""
        import torch

        first = next(iter(self.make_inputs(self.ffi_example, device="meta")))

        def made(change=lambda name, t: t):
            inputs = self.make_inputs(self.ffi_example, device="cpu", seed=0)
            return call(*(change(n, v) if isinstance(v, torch.Tensor) else v for n, v in inputs.items()))

        def strided(name, t):  # every other element of a buffer twice as wide: strided in its last dim only
            return torch.stack((t, t), -1).flatten(-2)[..., ::2] if name == first else t

        allowed = tuple(torch_dtype(d) for d in self.dtypes)
        shared = {
            "cpu_tensor": BadInput(made, ValueError, "CUDA device"),
            "last_dim_stride": BadInput(
                lambda: made(strided), ValueError, f"{first} must be contiguous in its last dim"
            ),
            f"{first}_not_a_tensor": BadInput(
                lambda: made(lambda name, t: t.tolist() if name == first else t), TypeError, "must be a torch.Tensor"
            ),
        }
        if "float64" not in self.dtypes:
            double = lambda: made(lambda name, t: t.double())  # noqa: E731
            shared["float64"] = BadInput(double, TypeError, f"of {allowed}, got torch.float64")
        for name, layout in self.layouts.items():  # a 0-d tensor, and one dim more where the rank is exact
            wrong = {f"{name}_0d": lambda t: t.flatten()[0]}
            if not checks.layout_rank(layout)[1]:
                wrong[f"{name}_{checks.layout_rank(layout)[0] + 1}d"] = lambda t: t[None]
            for case, change in wrong.items():
                remade = functools.partial(made, lambda n, t, name=name, change=change: change(t) if n == name else t)
                shared[case] = BadInput(remade, ValueError, f"{name} must be {layout.partition('; ')[0]}, a tensor of")
        for name in self.in_place:  # allowed by the aliasing rule: the call goes on to the device check
            shared[f"out_is_{name}_in_place"] = BadInput(
                lambda name=name: self.aliased_call("cpu", name, "same"), ValueError, "CUDA device"
            )
        return shared | self.aliasing_cases("cpu") | self.bad_inputs

    def aliased_call(self, device: str, name: str, how: str, cfg: dict | None = None) -> tuple[tuple, dict]:
        """A call of the entry on the inputs of `cfg` (the ffi_example; on `device`) whose `out` shares
        memory with input `name`: how="same" is that input itself; "shifted" one element past its start
        in one buffer; "restrided" from its first element with every stride but the last doubled."""
        import torch

        cfg = cfg or self.ffi_example
        inputs = self.make_inputs(cfg, device=device, seed=0)
        t, shape = inputs[name], tuple(self.out_shape(cfg))
        if how == "same":
            return call(*inputs.values(), out=t)
        size = math.prod(shape)
        buffer = torch.zeros(t.numel() + 2 * size + 1, dtype=t.dtype, device=device)  # no NaN for torch.equal
        inputs[name] = buffer[: t.numel()].view(t.shape).copy_(t)
        if how == "shifted":
            return call(*inputs.values(), out=buffer[1 : 1 + size].view(shape))
        strides = [math.prod(shape[i + 1 :]) * (1 if i == len(shape) - 1 else 2) for i in range(len(shape))]
        return call(*inputs.values(), out=buffer.as_strided(shape, strides if len(shape) > 1 else [2]))

    def aliasing_cases(self, device: str) -> dict[str, BadInput]:
        """The calls the aliasing rule refuses (tilekit.runtime.checks.out_aliasing; docs/kernels.md), for each
        tensor input of the ffi_example with out's dtype: out over it shifted by one element, out from
        its first element with other strides, and, where its shape is out's in the ffi_example (or the
        alias_example) and the kernel does not run in place of it, out as the input itself. On
        `device`: the CPU tests and the GPU suite (test_op_aliasing_cutile_rs) run the same cases."""
        cases = {}
        for name in self.aliasable(self.ffi_example):
            for how in ("shifted", "restrided"):
                make = functools.partial(self.aliased_call, device, name, how)
                cases[f"out_{how}_over_{name}"] = BadInput(make, ValueError, f"out overlaps {name}: out")
        for cfg in (self.ffi_example, self.alias_example or {}):
            for name in self.aliasable(cfg, same_shape=True) if cfg else ():
                if name not in self.in_place and f"out_is_{name}" not in cases:
                    make = functools.partial(self.aliased_call, device, name, "same", cfg)
                    cases[f"out_is_{name}"] = BadInput(make, ValueError, f"out is {name} (the same memory")
        return cases

    def aliasable(self, cfg: dict, same_shape: bool = False) -> list[str]:
        """The tensor inputs of cfg that out could share memory with (out's dtype: the first input's
        unless out_dtype says otherwise; two elements or more), with `same_shape` only those of out's shape."""
        import torch

        probe = self.make_inputs(cfg, device="meta")
        dtype = self.out_dtype_like(next(v for v in probe.values() if isinstance(v, torch.Tensor)))
        return [
            name
            for name, t in probe.items()
            if isinstance(t, torch.Tensor)
            and t.dtype == dtype
            and t.numel() > 1
            and (not same_shape or tuple(t.shape) == tuple(self.out_shape(cfg)))
        ]

    # -- the declaration checks itself (tests/kit/test_kernel_contract.py) ---------------------------

    def problems(self) -> list[str]:
        """What is missing or inconsistent in the declaration and op.py; [] when complete."""
        op, out = self.op, []
        for attr in ("CDEF", "DTYPES", "DEFAULT_VARIANT", "variants", "tune_key", "export_args", self.name):
            if not hasattr(op, attr):
                out.append(f"kernels/{self.name}/op.py has no {attr}")
        if out:
            return out
        if not hasattr(self.entry, "layouts"):
            out.append(
                f"kernels/{self.name}/op.py: decorate {self.name} with tilekit.runtime.port.entry(layouts=..., in_place=...) "
                "(each tensor argument's layout, the inputs out may be: docs/kernels.md, 'Aliasing')"
            )
        params = [n for n, p in inspect.signature(self.entry).parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
        made = list(self.make_inputs(self.ffi_example, device="meta"))
        if made != params:
            out.append(f"make_inputs returns {made}: name them as the entry's arguments {params}, in order")
        if ffi.declared_functions(op.CDEF)[:1] != [f"cutile_{self.name}"]:
            out.append(f"op.CDEF must declare cutile_{self.name} first, got {ffi.declared_functions(op.CDEF)}")
        if not " ".join(op.CDEF.split()).endswith("int32_t device_id, uint64_t stream);"):
            out.append("op.CDEF: the last two arguments must be int32_t device_id, uint64_t stream")
        if not self.dtypes or not set(self.dtypes) <= set(ffi.DTYPE_CODES):
            out.append(f"op.DTYPES {self.dtypes} must name dtypes of {list(ffi.DTYPE_CODES)}")
        if set(self.tolerance) != set(self.dtypes):
            out.append(f"tolerance has {sorted(self.tolerance)}, op.DTYPES {sorted(self.dtypes)}")
        if self.max_error_scale not in ("one", "rms"):
            out.append(f"max_error_scale is {self.max_error_scale!r}: use 'one' or 'rms'")
        known = set(self.dims) | set(self.strides) | set(self.options) | {"dtype", self.out_row_stride}
        for what, cfgs in (
            ("correctness_shapes", self.correctness_shapes),
            ("perf_configs", self.perf_configs),
            ("variant_shapes", self.variant_shapes),
        ):
            if not cfgs:
                out.append(f"{what} is empty")
            for cfg in cfgs:
                if not set(self.dims) <= set(cfg) <= known:
                    out.append(f"{what}: {cfg} must have {list(self.dims)} and only {sorted(known - {None})}")
        if set(self.sweep) - set(SWEEP_SIZES):
            out.append(f"sweep has {sorted(self.sweep)}: its sizes are {list(SWEEP_SIZES)} (sweep_grid)")
        swept = [c for size in SWEEP_SIZES for c in self.sweep.get(size, [])]
        for cfg in swept[:1] + [c for c in swept if set(c) != set(swept[0])][:1]:  # one of each key set
            if not set(self.dims) <= set(cfg) <= known:
                out.append(f"sweep: {cfg} must have {list(self.dims)} and only {sorted(known - {None})}")
        for cfg in self.perf_configs + self.variant_shapes + swept:
            if cfg.get("dtype") not in self.dtypes:
                out.append(f"{cfg}: dtype must be one of {self.dtypes}")
                break
        if self.alias_example is not None and not self.aliasable(self.alias_example, same_shape=True):
            out.append(
                f"alias_example {self.alias_example}: no input has out's shape {self.out_shape(self.alias_example)}"
            )
        if not self.bad_inputs or not all(isinstance(b, BadInput) for b in self.bad_inputs.values()):
            out.append("bad_inputs: declare at least one BadInput")
        if not all(isinstance(c, FfiCase) for c in self.ffi_cases.values()):
            out.append("ffi_cases: every case must be an FfiCase")
        return out


# -- what the row kernels share -------------------------------------------------------------------

ROW_EDGES = [(1000, 1), (4097, 4097), (1000, 11008), (3, 151936), (5, 16385)]  # (m, width) the property always tries


# The row kernels' sweep: rows from a decode batch to a long prefill, widths of real models (hidden
# sizes, MLP widths, Qwen2's 151936 vocabulary) and powers of two, every dtype of the kernel; up to
# ROW_SWEEP_BYTES moved per call (the float64 check of a case stays a few GB).
ROW_SWEEP_ROWS = {"quick": (64, 4096, 65536), "full": (1, 32, 256, 2048, 16384, 65536, 262144)}
ROW_SWEEP_WIDTHS = {
    "quick": (1000, 4096, 5120, 16384),
    "full": (128, 1000, 1024, 2048, 3584, 4096, 5120, 8192, 11008, 14336, 16384, 32768, 151936),
}
ROW_SWEEP_BYTES = 4 << 30


def row_sweep(op: ModuleType, width: str, bytes_moved: Callable, size_check: Callable | None = None) -> dict:
    """The default sweep of a row kernel: dtype x rows x width (ROW_SWEEP_*), without the configs
    that move more than ROW_SWEEP_BYTES or that size_check refuses."""

    def keep(cfg: dict) -> bool:
        if bytes_moved(cfg) > ROW_SWEEP_BYTES:
            return False
        try:
            size_check and size_check(m=cfg["m"], **{width: cfg[width]})
        except ValueError:
            return False
        return True

    axes = {s: {"dtype": tuple(op.DTYPES), "m": ROW_SWEEP_ROWS[s], width: ROW_SWEEP_WIDTHS[s]} for s in SWEEP_SIZES}
    return sweep_grid(**axes, keep=keep)


def row_kernel(op: ModuleType, width: str = "n", **fields) -> KernelSpec:
    """The declaration of a kernel over the rows of an (m, width) problem (x's rows, optionally in
    rows of `row_stride` elements, to out (m, width)), with what such kernels share filled in: dims
    up to 2^20 rows of 2^18, the id prefix `ld` of row_stride, out_shape, a tolerance of a few
    output ulps of each dtype, ROW_EDGES, a 4 x 8 float32 ffi_example and the sweep (row_sweep).
    `fields` give the rest (and may replace any of those)."""
    if "sweep" not in fields and "bytes_moved" in fields:
        fields["sweep"] = row_sweep(op, width, fields["bytes_moved"], fields.get("size_check"))
    shared = dict(
        dims={"m": 1 << 20, width: 1 << 18},
        strides={"row_stride": "ld"},
        out_shape=lambda cfg: (cfg["m"], cfg[width]),
        tolerance={"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-5)},
        autotune_edges=shapes(f"m {width}", *ROW_EDGES),
        ffi_example={"m": 4, width: 8, "dtype": "float32"},
    )
    return KernelSpec(op=op, **{**shared, **fields})
