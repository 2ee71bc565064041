"""Every kernel's GPU suites, generated from its declaration (kernels/<name>/spec.py, tilekit.runtime.kernel):

    test_op[<backend>-<shape>-<dtype>]            correctness of the port (its default variant) and each baseline
    test_op_every_variant_cutile_rs[<shape>-<dtype>]   each autotune candidate on the variant shapes
    test_op_bad_input_cutile_rs[cutile_rs-<case>]      bad input refused in Python (runs on the CPU), the
                                                  aliasing rule's refusals among them
    test_op_aliasing_cutile_rs[cutile_rs-<case>]       the same refusals on GPU tensors, nothing written
    test_op_in_place_cutile_rs[<input>-<shape>-<dtype>]   out=<input> where the entry allows it, on a fresh
                                                  autotune cache (only kernels that run in place)
    test_op_torch_op_cutile_rs[<shape>-<dtype>]   torch.ops.tilekit.<name> under torch.library.opcheck
    test_op_compiled_cutile_rs[<shape>-<dtype>]   the entry under torch.compile(fullgraph=True): no break
    test_op_cuda_graph_cutile_rs[<shape>-<dtype>] captured after a warm-up, replayed on new inputs
    test_op_backward_cutile_rs[<shape>-<dtype>]   the gradients through the entry (autograd, the op's
                                                  register_backward) against the float64 reference's
                                                  (only kernels with a backward)
    test_perf[<backend>-<config>-<dtype>]         CUPTI time and record (tilekit.testing.pytest_plugin prints it)
    test_settle[<config>-<dtype>]                 a config of a few µs: the port and its baselines in one
                                                  process, over placements, interleaved, cold and hot
                                                  (make settle; skips a config of 20 µs or more)
    test_sweep[<backend>-<config>-<dtype>]        the same over the sweep grid, only when TILEKIT_SWEEP
                                                  names a size (make sweep; tilekit.testing.sweep)

plus the kernel's own GPU tests, the test_* functions of kernels/<name>/tests.py when it exists.
tests/kernels/test_<name>.py is a name-free stub that gives them their path: `make` names that file
and selects with -k "cutile_rs and test_op"; tilekit.testing.stage_logs reads the kernel from the file name
and the backend from the id's first part. A kernel folder without a stub is collected all the same,
under the same node ids (tests/conftest.py), so copying a folder is enough for pytest.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from tilekit.runtime import autotune, kernel, ops, port
from tilekit.testing import harness, sweep


def cases(spec, swept: tuple[str, str] | None = None) -> dict[str, list]:
    """{test name: [pytest.param(..., id=...)]}: every parametrized case of the kernel's suite and
    its id, made here and nowhere else (ids: harness.case_id); test_sweep's for `swept` = (size,
    shard) (tilekit.testing.sweep.from_env), costliest config first."""
    b_ids = harness.BACKEND_IDS
    sweep_cases = (
        {
            "test_sweep": [
                pytest.param(b, c, id=harness.case_id(b, sweep.case_id(spec, c)))
                for c in sweep.cases(spec, *swept)
                for b in b_ids
            ]
        }
        if swept
        else {}
    )
    return sweep_cases | {
        "test_op": [
            pytest.param(b, dict(s, dtype=d), id=harness.case_id(b, spec.shape_id(s), d))
            for b in b_ids
            for s in spec.correctness_shapes
            for d in spec.dtypes
        ],
        "test_op_every_variant_cutile_rs": [
            pytest.param(c, id=f"{spec.shape_id(c, strides=False)}-{c['dtype']}") for c in spec.variant_shapes
        ],
        "test_op_bad_input_cutile_rs": [
            pytest.param(case, id=harness.case_id("cutile_rs", case)) for case in spec.bad_input_cases()
        ],
        "test_op_aliasing_cutile_rs": [
            pytest.param(case, id=harness.case_id("cutile_rs", case)) for case in spec.aliasing_cases("meta")
        ],
        **{
            test: [pytest.param(c, id=f"{spec.shape_id(c)}-{c['dtype']}") for c in spec.torch_op_shapes()]
            for test in ("test_op_torch_op_cutile_rs", "test_op_compiled_cutile_rs", "test_op_cuda_graph_cutile_rs")
        },
        "test_op_backward_cutile_rs": [
            pytest.param(c, id=f"{spec.shape_id(c)}-{c['dtype']}")
            for c in (spec.backward_shapes() if ops.has_backward(spec.name) else [])
        ],
        "test_op_in_place_cutile_rs": [
            pytest.param(name, c, id=f"{name}-{spec.shape_id(c)}-{c['dtype']}")
            for name in spec.in_place
            for c in spec.variant_shapes
        ],
        "test_perf": [
            pytest.param(b, c, id=harness.case_id(b, sweep.case_id(spec, c))) for b in b_ids for c in spec.perf_configs
        ],
        "test_settle": [pytest.param(c, id=sweep.case_id(spec, c)) for c in spec.perf_configs],
    }


def generate(name: str) -> dict:
    """{test function name: function} of kernels/<name>'s suite, for a test module's namespace."""
    import torch

    spec = kernel.load(name)
    swept = sweep.from_env()
    params = cases(spec, swept)

    @pytest.mark.parametrize("backend_id,cfg", params["test_op"])
    def test_op(cuda, backend_id, cfg):
        """The port runs its export's own choice (variant "default": one JIT per shape, no autotune
        timing); each autotune candidate is checked by test_op_every_variant_cutile_rs on the
        variant shapes, and autotune's pick on each perf config by test_perf before it is timed."""
        fn = harness.implementation(spec, backend_id, variant="default")
        inputs = spec.make_inputs(cfg)
        out = spec.make_out(cfg, inputs)
        y = harness.checked_call(spec, backend_id, cfg, inputs, lambda inp: fn(inp, out))
        if backend_id == "cutile_rs":
            assert y is out, "the port must write the caller's out tensor"
            harness.check_padding_untouched(out, f"{backend_id} {cfg}")

    @pytest.mark.parametrize("cfg", params["test_op_every_variant_cutile_rs"])
    def test_op_every_variant_cutile_rs(cuda, cfg):
        """Autotune may pick any candidate variant, so each one must be right. The candidates are
        compiled side by side first (autotune.warm); a failure there is raised by the loop."""
        inputs = spec.make_inputs(cfg)
        candidates = spec.variants(cfg) + (["default"] if spec.every_variant_default else [])
        autotune.warm(
            candidates, lambda v: lambda: spec.run_port(inputs, spec.make_out(cfg, inputs), v), autotune.threads()
        )
        torch.cuda.synchronize()  # a launch fault of the warm-up shows here, not as a later candidate's
        for v in candidates:
            harness.check_variant(spec, cfg, inputs, v)
            for name in spec.in_place:  # the kernel runs in place of these: every candidate, in place
                harness.check_in_place(spec, cfg, spec.make_inputs(cfg), name, v)

    @pytest.mark.parametrize("case", params["test_op_aliasing_cutile_rs"])
    def test_op_aliasing_cutile_rs(cuda, case):
        """The aliasing rule's refusals (tilekit.runtime.checks.out_aliasing) on GPU tensors: the message names
        out and the input, and nothing was written."""
        bad = spec.aliasing_cases("cuda")[case]
        args, kwargs = bad.make()
        before = [a.clone() for a in (*args, kwargs["out"]) if isinstance(a, torch.Tensor)]
        with pytest.raises(bad.error, match=re.escape(bad.message)):
            spec.entry(*args, **kwargs)
        torch.cuda.synchronize()
        after = [a for a in (*args, kwargs["out"]) if isinstance(a, torch.Tensor)]
        assert all(torch.equal(a, b) for a, b in zip(after, before)), "a refused call wrote to a tensor"

    @pytest.mark.parametrize("cfg", params["test_op_torch_op_cutile_rs"])
    def test_op_torch_op_cutile_rs(cuda, cfg):
        """torch.ops.tilekit.<name>: torch.library.opcheck (schema, fake against real: shapes, dtypes,
        strides; dynamic-shape tracing), and its result against the reference."""
        inputs = spec.make_inputs(cfg)
        torch.library.opcheck(spec.entry.op.default, tuple(inputs.values()))
        harness.check(spec, "cutile_rs", dict(cfg, via="torch.ops"), inputs, spec.entry.op(*inputs.values()))

    @pytest.mark.parametrize("cfg", params["test_op_compiled_cutile_rs"])
    def test_op_compiled_cutile_rs(cuda, cfg):
        """The entry under torch.compile(fullgraph=True) (inductor): one graph, no break, the op in it;
        the compiled result against the reference and equal to eager's (the same op and pick)."""
        import torch._dynamo

        inputs = spec.make_inputs(cfg)

        def fn(*args):
            return spec.entry(*args)

        torch._dynamo.reset()
        explained = torch._dynamo.explain(fn)(*inputs.values())
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
        y = torch.compile(fn, fullgraph=True)(*inputs.values())
        harness.check(spec, "cutile_rs", dict(cfg, via="torch.compile"), inputs, y)
        eager = spec.entry(*inputs.values())
        assert torch.equal(y, eager), "compiled and eager runs of the same op differ"

    @pytest.mark.parametrize("cfg", params["test_op_cuda_graph_cutile_rs"])
    def test_op_cuda_graph_cutile_rs(cuda, cfg):
        """After one warm-up call, a call captured in a torch.cuda.CUDAGraph replays on new values of
        its inputs with the reference's result, twice alike; a call never made before capture is
        refused (port.CaptureNotWarm) and leaves the capture clean."""
        inputs = spec.make_inputs(cfg)
        spec.entry(*inputs.values())  # warm-up: JIT and autotune
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = spec.entry(*inputs.values())
        fresh = spec.make_inputs(cfg)
        for t, new in zip(inputs.values(), fresh.values()):
            if isinstance(t, torch.Tensor):
                t.copy_(new)
        graph.replay()
        first = y.clone()
        graph.replay()
        torch.cuda.synchronize()
        harness.check(spec, "cutile_rs", dict(cfg, via="CUDA graph"), fresh, y)
        assert torch.equal(first, y), "two replays of one graph differ"
        # the default variant, made cold: an earlier test of this process may have run it on tensors
        # of these shapes (rope's variant shapes are among its correctness shapes), which made it warm
        cold = dict(spec.op.DEFAULT_VARIANT)
        port.forget_warm(spec.name, cold)
        with pytest.raises(port.CaptureNotWarm, match="warm"), torch.cuda.graph(torch.cuda.CUDAGraph()):
            spec.entry(*inputs.values(), variant=cold)

    @pytest.mark.parametrize("cfg", params["test_op_backward_cutile_rs"])
    def test_op_backward_cutile_rs(cuda, monkeypatch, cfg):
        """loss.backward() through the entry (as training calls it): each floating input's gradient
        against the float64 reference's autograd gradient of the same inputs and output gradient,
        with the kernel's tolerance. The op runs its first candidate (TILEKIT_AUTOTUNE=0: each
        gradient is a shape class of its own, and tuning three per case would outlast the case's
        deadline); every candidate is right by test_op_every_variant_cutile_rs."""
        reason = spec.backward_skip(cfg)
        if reason:
            pytest.skip(f"{spec.name} {cfg}: {reason}")
        monkeypatch.setenv("TILEKIT_AUTOTUNE", "0")
        harness.check_backward(spec, cfg, spec.make_inputs(cfg))

    @pytest.mark.parametrize("name,cfg", params["test_op_in_place_cutile_rs"])
    def test_op_in_place_cutile_rs(cuda, tmp_path, monkeypatch, name, cfg):
        """out=<input> on a shape class this process has never tuned (an empty autotune cache): the first
        call tunes on scratch copies (tilekit.runtime.port.tuning_tensors) and writes the caller's tensor once."""
        monkeypatch.setenv("TILEKIT_AUTOTUNE_CACHE", str(tmp_path / "autotune.json"))
        monkeypatch.setattr(autotune, "_MEMO", {})
        monkeypatch.delenv("TILEKIT_AUTOTUNE", raising=False)
        harness.check_in_place(spec, cfg, spec.make_inputs(cfg), name, "auto")

    @pytest.mark.parametrize("case", params["test_op_bad_input_cutile_rs"])
    def test_op_bad_input_cutile_rs(case):
        """Rejected in Python before the GPU is touched, with a message that says what to fix (runs on
        CPU tensors, so also on machines without a GPU)."""
        bad = spec.bad_input_cases()[case]
        args, kwargs = bad.make()
        with pytest.raises(bad.error, match=re.escape(bad.message)):
            spec.entry(*args, **kwargs)

    def timed(request, backend_id, cfg) -> dict:
        fn = harness.implementation(spec, backend_id)
        inputs = spec.make_inputs(cfg)
        harness.checked_call(spec, backend_id, cfg, inputs, fn)  # a fast wrong answer is not a result
        return harness.run_perf(
            request,
            kernel=spec.name,
            backend_id=backend_id,
            cfg=cfg,
            call=lambda: fn(inputs),
            **harness.rate(spec, cfg),
        )

    @pytest.mark.parametrize("backend_id,cfg", params["test_perf"])
    def test_perf(cuda, request, backend_id, cfg):
        timed(request, backend_id, cfg)

    @pytest.mark.parametrize("cfg", params["test_settle"])
    def test_settle(cuda, request, cfg):
        """A config of a few µs: the port and its baselines timed in this one process over
        placements, interleaved, cold and hot (tilekit.testing.harness.run_settle; make settle)."""
        harness.run_settle(request, spec, cfg)

    @pytest.mark.parametrize("backend_id,cfg", params.get("test_sweep", []))
    def test_sweep(cuda, request, backend_id, cfg):
        """test_perf over the sweep grid; the record (already attached) also names the host, the kit
        and the sweep, and for the port its JIT counters (tilekit.testing.sweep.record_extra)."""
        timed(request, backend_id, cfg).update(sweep.record_extra(backend_id, *swept))

    tests = {"test_op": test_op, "test_op_every_variant_cutile_rs": test_op_every_variant_cutile_rs}
    if (kernel.ffi.KERNELS_DIR / name / "tests.py").is_file():
        extra = importlib.import_module(f"kernels.{name}.tests")
        tests.update((k, v) for k, v in vars(extra).items() if k.startswith("test_") and callable(v))
    tests.update(
        test_op_bad_input_cutile_rs=test_op_bad_input_cutile_rs, test_op_aliasing_cutile_rs=test_op_aliasing_cutile_rs
    )
    if spec.in_place:
        tests["test_op_in_place_cutile_rs"] = test_op_in_place_cutile_rs
    tests.update(
        test_op_torch_op_cutile_rs=test_op_torch_op_cutile_rs,
        test_op_compiled_cutile_rs=test_op_compiled_cutile_rs,
        test_op_cuda_graph_cutile_rs=test_op_cuda_graph_cutile_rs,
    )
    if params["test_op_backward_cutile_rs"]:
        tests["test_op_backward_cutile_rs"] = test_op_backward_cutile_rs
    tests["test_perf"] = test_perf
    tests["test_settle"] = test_settle
    if swept:
        tests["test_sweep"] = test_sweep
    return tests


def suite(file: str) -> dict:
    """The namespace of tests/kernels/test_<name>.py: kernels/<name>'s generated suite."""
    return generate(Path(file).stem.removeprefix("test_"))


class GeneratedModule(pytest.Module):
    """tests/kernels/test_<name>.py for a kernel folder that has no such file: the same tests,
    built in memory instead of imported from the stub."""

    def _getobj(self):
        import types

        module = types.ModuleType(self.path.stem, f"kernels/{self.path.stem.removeprefix('test_')}'s generated suite")
        module.__file__ = str(self.path)
        vars(module).update(suite(str(self.path)))
        return module


class KernelSuites(pytest.Dir):
    """tests/kernels/: its files, plus a GeneratedModule for every kernel folder without a stub."""

    def collect(self):
        yield from super().collect()
        for name in kernel.names():
            path = self.path / f"test_{name}.py"
            if not path.exists():
                yield GeneratedModule.from_parent(self, path=path)
