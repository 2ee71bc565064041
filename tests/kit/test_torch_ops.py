"""Every port as a PyTorch op (tilekit.runtime.ops, tilekit.runtime.port.entry), on the CPU: the ops exist with the
entry's schema; their fake implementation gives the output's shape, dtype and device for every
correctness shape and refuses bad input at trace time with op.py's message; torch.compile's tracer
(dynamo) goes through a block of entries in one graph with no break. Fake CUDA tensors need no GPU.
The ops' real runs (opcheck, compiled against eager, CUDA graphs) are the GPU suites' tests."""

import inspect
import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from tilekit.runtime import kernel, ops

NAMES = kernel.names()


def fake_cuda(value):
    """A fake CUDA tensor with value's shape, strides and dtype; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="cuda")
    return value


@pytest.mark.parametrize("name", NAMES)
def test_every_port_is_an_op_with_the_entrys_arguments(name):
    spec = kernel.load(name)
    op = getattr(torch.ops.tilekit, name)
    assert spec.entry.op is op and name in ops.defined()
    schema = op.default._schema
    params = [n for n, p in inspect.signature(spec.entry).parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [a.name for a in schema.arguments] == params == list(spec.make_inputs(spec.ffi_example, device="meta"))
    assert str(schema.returns[0].type) == "Tensor" and not schema.is_mutable


@pytest.mark.parametrize("name", NAMES)
def test_the_fake_op_gives_the_outputs_shape_dtype_and_device(name):
    spec = kernel.load(name)
    op = getattr(torch.ops.tilekit, name)
    for shape in spec.correctness_shapes:
        for dtype in spec.dtypes:
            cfg = dict(shape, dtype=dtype)
            inputs = spec.make_inputs(cfg, device="meta")
            with FakeTensorMode():
                y = op(*map(fake_cuda, inputs.values()))
            expected = (tuple(spec.out_shape(cfg)), spec.out_dtype or dtype, "cuda")
            assert (tuple(y.shape), str(y.dtype)[6:], y.device.type) == expected


def refused_at_trace_time(spec):
    """The kernel's bad inputs an op call can carry (no out, every tensor argument a tensor, not about
    the device), as fake CUDA tensors."""
    schema = {a.name: str(a.type) for a in spec.entry.op.default._schema.arguments}
    for case, bad in spec.bad_input_cases().items():
        args, kwargs = bad.make()
        given = dict(zip(schema, args)) | kwargs
        tensors_ok = all(
            isinstance(given.get(n), torch.Tensor) or (t == "Optional[Tensor]" and given.get(n) is None)
            for n, t in schema.items()
            if "Tensor" in t
        )
        if "out" in kwargs or "device" in bad.message.lower() or not tensors_ok:
            continue
        yield case, bad, args, kwargs


@pytest.mark.parametrize("name", NAMES)
def test_the_fake_op_refuses_bad_input_with_op_pys_message(name):
    spec = kernel.load(name)
    op = getattr(torch.ops.tilekit, name)
    seen = []
    for case, bad, args, kwargs in refused_at_trace_time(spec):
        with FakeTensorMode(), pytest.raises(bad.error, match=re.escape(bad.message)):
            op(*map(fake_cuda, args), **{k: fake_cuda(v) for k, v in kwargs.items()})
        seen.append(case)
    assert seen, f"{name}: no bad input reached the op"


def block(x, w_norm, w_gate_up, w_down, q, k, v):
    """A decoder's pieces through the Python entries (as a model calls them)."""
    from kernels.attention.op import attention
    from kernels.matmul.op import matmul
    from kernels.rms_norm.op import rms_norm
    from kernels.silu_and_mul.op import silu_and_mul

    h = rms_norm(x, w_norm)
    h = matmul(silu_and_mul(matmul(h, w_gate_up.t())), w_down.t())
    o = attention(q, k, v, causal=True)
    return h, o


def test_torch_compile_traces_a_block_of_ports_in_one_graph_without_a_break():
    import torch._dynamo

    torch._dynamo.reset()
    with FakeTensorMode():
        bf16 = dict(dtype=torch.bfloat16, device="cuda")
        args = (
            torch.empty(64, 256, **bf16),
            torch.empty(256, **bf16),
            torch.empty(1024, 256, **bf16),
            torch.empty(256, 512, **bf16),
            *(torch.empty(1, 64, h, 64, **bf16).transpose(1, 2) for h in (8, 2, 2)),  # (b, s, h, d) as (b, h, s, d)
        )
    explained = torch._dynamo.explain(block)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    targets = {str(n.target) for g in explained.graphs for n in g.graph.nodes if n.op == "call_function"}
    assert {f"tilekit.{k}" for k in ("rms_norm", "matmul", "silu_and_mul", "attention")} <= targets, targets


def test_matmul_acc_traces_as_one_in_place_op_and_its_fake_refuses_aliasing():
    """c += a @ b (a weight's gradient over chunks of tokens): torch.compile keeps the in-place op
    whole (one graph, no break), and the fake op runs the entry's checks at trace time."""
    import torch._dynamo

    from kernels.matmul.op import matmul_acc_

    torch._dynamo.reset()
    with FakeTensorMode():
        bf16 = dict(dtype=torch.bfloat16, device="cuda")
        c, a, w = torch.empty(256, 128, **bf16), torch.empty(64, 256, **bf16), torch.empty(64, 128, **bf16)
        explained = torch._dynamo.explain(lambda c, g, h: matmul_acc_(c, g.t(), h))(c, a, w)
        with pytest.raises(ValueError, match="matmul_acc_: c and b share memory"):
            torch.ops.tilekit.matmul_acc_(c, a.t()[:, :64], c[:64])
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    targets = {str(n.target) for g in explained.graphs for n in g.graph.nodes if n.op == "call_function"}
    assert "tilekit.matmul_acc_" in targets, targets


def test_a_block_of_ports_compiles_once_for_every_sequence_length():
    """dynamic=True: the ops' fake implementation keeps the sizes symbolic (the entries compute
    tune keys only for real tensors), so three lengths share one graph. Lengths other than the head
    dim (64): dynamo would give equal sizes one symbol."""
    import torch._dynamo

    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    compiled = torch.compile(block, backend=backend, fullgraph=True, dynamic=True)
    for s in (80, 96, 112):
        with FakeTensorMode():
            bf16 = dict(dtype=torch.bfloat16, device="cuda")
            weights = (torch.empty(256, **bf16), torch.empty(1024, 256, **bf16), torch.empty(256, 512, **bf16))
            qkv = (torch.empty(1, s, h, 64, **bf16).transpose(1, 2) for h in (8, 2, 2))
            h, o = compiled(torch.empty(s, 256, **bf16), *weights, *qkv)
        assert (tuple(h.shape), tuple(o.shape)) == ((s, 256), (1, 8, s, 64))
    assert len(graphs) == 1


def test_under_compile_an_entrys_out_is_checked_as_in_eager():
    """The entry under torch.compile calls the op and copies into `out`: an out of another shape or
    dtype is refused with op.py's message (eager refuses it), never broadcast or cast."""
    import torch._dynamo

    from kernels.rms_norm.op import rms_norm

    def into(x, w, out):
        return rms_norm(x, w, out=out)

    for shape, dtype in (((2, 8, 256), torch.bfloat16), ((8, 256), torch.float32)):
        torch._dynamo.reset()
        with FakeTensorMode():
            x, w = (
                torch.empty(8, 256, dtype=torch.bfloat16, device="cuda"),
                torch.empty(256, dtype=torch.bfloat16, device="cuda"),
            )
            out = torch.empty(shape, dtype=dtype, device="cuda")
            with pytest.raises(Exception, match=r"rms_norm: out must be \(8, 256\) torch.bfloat16"):
                torch.compile(into, backend="eager")(x, w, out)


# ---------------------------------------------------------------------------------------------
# Gradients (issue 43). The autograd engine needs a real device, so on the CPU the gradient
# functions run alone on fake CUDA tensors; the GPU suites' test_op_backward_cutile_rs runs
# loss.backward() through the entries against the float64 reference's gradients.


class OpCalls(TorchDispatchMode):
    """Records each tilekit op called under it: (op name, its tensor arguments' shapes and strides)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "tilekit":
            tensors = [(tuple(t.shape), t.stride()) for t in args if isinstance(t, torch.Tensor)]
            self.calls.append((func.__name__.split(".")[0], tensors))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    "name,a_shape,b_shape",
    [("matmul", (64, 32), (32, 48)), ("bmm", (3, 64, 32), (3, 32, 48))],
)
def test_the_gemm_gradients_are_the_port_itself_on_transposed_views(name, a_shape, b_shape):
    kernel.load(name)
    assert ops.has_backward(name)
    with FakeTensorMode():
        a, b = (torch.empty(s, dtype=torch.bfloat16, device="cuda") for s in (a_shape, b_shape))
        b = b.transpose(-2, -1).contiguous().transpose(-2, -1)  # column-major, as x @ W.t() passes W
        grad = torch.empty((*a_shape[:-1], b_shape[-1]), dtype=torch.bfloat16, device="cuda")
        with OpCalls() as seen:
            da, db = ops.backward_of(name)((a, b), grad, (True, True))
        assert (da.shape, db.shape) == (a.shape, b.shape)
        # each gradient in its operand's layout (autograd keeps it as it is): dA = dC @ Bᵀ row-major
        # like A; B is column-major (as x @ W.t() passes W), so dB = (dCᵀ @ A)ᵀ, column-major like B
        assert (da.stride(-1), db.stride(-2)) == (1, 1)
        bt, gt = b.transpose(-2, -1), grad.transpose(-2, -1)
        assert seen.calls == [
            (name, [(tuple(grad.shape), grad.stride()), (tuple(bt.shape), bt.stride())]),
            (name, [(tuple(gt.shape), gt.stride()), (tuple(a.shape), a.stride())]),
        ]
        with OpCalls() as seen:  # a column-major A: dA = (B @ dCᵀ)ᵀ
            at = a.transpose(-2, -1).contiguous().transpose(-2, -1)
            da, _ = ops.backward_of(name)((at, b), grad, (True, False))
        assert da.stride(-2) == 1 and seen.calls == [
            (name, [(tuple(b.shape), b.stride()), (tuple(gt.shape), gt.stride())])
        ]
        with OpCalls() as seen:  # only the gradients asked for
            assert ops.backward_of(name)((a, b), grad, (False, True))[0] is None and len(seen.calls) == 1


def test_an_input_that_requires_grad_runs_the_entry_through_its_op_and_without_none_stays_direct():
    spec = kernel.load("rms_norm")
    with FakeTensorMode():
        x = torch.empty(4, 64, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(64, dtype=torch.bfloat16, device="cuda")
        with OpCalls() as seen:
            assert spec.entry(x, w).grad_fn is None  # no grad: the entry's direct call, no op
            y = spec.entry(x, w.requires_grad_())
        assert [c[0] for c in seen.calls] == ["rms_norm"] and y.requires_grad
        with torch.no_grad(), OpCalls() as seen:
            spec.entry(x, w)
        assert seen.calls == []
    # attention's gradient comes with a training call: its entry with grad runs attention_train
    kernel.load("attention")
    assert ops.has_backward("attention") and ops.training_call("attention") is not None
    assert ops.training_call("rms_norm") is None


def test_layer_norm_gradients_are_three_views_and_an_absent_weight_is_ones():
    kernel.load("layer_norm")
    assert ops.has_backward("layer_norm")
    with FakeTensorMode():
        x, grad = (torch.empty(2, 3, 64, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        w, b = (torch.empty(64, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        with OpCalls() as seen:
            dx, dw, db, d_eps = ops.backward_of("layer_norm")((x, w, b, 1e-5), grad, (True, True, True, False))
        assert (dx.shape, dw.shape, db.shape, d_eps) == (x.shape, w.shape, b.shape, None)
        assert dx._base is not None and dx._base is dw._base is db._base  # rows [0, 6), 6 and 7 of (8, 64)
        assert [c[0] for c in seen.calls] == ["layer_norm_backward"]
        with OpCalls() as seen:  # no weight, no bias: ones go to the port, only dx comes back
            grads = ops.backward_of("layer_norm")((x, None, None, 1e-5), grad, (True, False, False, False))
        assert grads[1:] == (None, None, None) and seen.calls[0][1][2] == ((64,), (1,))


def test_softmax_gradient_is_made_from_the_forwards_output():
    """softmax's gradient asks for the op's output (register_backward saves it then) and sends it, not
    the input, to softmax_backward."""
    kernel.load("softmax")
    assert ops.has_backward("softmax")
    with FakeTensorMode():
        x, grad = (torch.empty(4, 100, dtype=torch.float16, device="cuda") for _ in range(2))
        y = torch.empty(4, 128, dtype=torch.float16, device="cuda")[:, :100]  # strides tell it from x
        with OpCalls() as seen:
            (dx,) = ops.backward_of("softmax")((x,), grad, (True,), output=y)
        assert dx.shape == x.shape and seen.calls == [
            ("softmax_backward", [((4, 100), (100, 1)), ((4, 100), (128, 1))])
        ]
        assert ops.backward_of("softmax")((x,), grad, (False,), output=y) == (None,)


def test_rms_norm_gradients_are_two_views_of_the_backward_ports_one_output():
    kernel.load("rms_norm")
    assert ops.has_backward("rms_norm")
    with FakeTensorMode():
        x, grad = (torch.empty(2, 3, 64, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        w = torch.empty(64, dtype=torch.bfloat16, device="cuda")
        with OpCalls() as seen:
            dx, dw, d_eps = ops.backward_of("rms_norm")((x, w, 1e-6), grad, (True, True, False))
        assert (dx.shape, dw.shape, d_eps) == (x.shape, w.shape, None)
        assert dx._base is not None and dx._base is dw._base  # rows [0, 6) and row 6 of one (7, 64) output
        assert seen.calls == [
            ("rms_norm_backward", [((2, 3, 64), grad.stride()), ((2, 3, 64), x.stride()), ((64,), (1,))])
        ]
        with OpCalls() as seen:  # only the gradients asked for
            assert ops.backward_of("rms_norm")((x, w, 1e-6), grad, (False, False, False)) == (None, None, None)
        assert seen.calls == []
        with OpCalls() as seen:  # a broadcast gradient (row stride 0, as from y.mean(0)) goes as a copy
            ops.backward_of("rms_norm")(
                (x, w, 1e-6), torch.empty(64, dtype=x.dtype, device="cuda").expand(2, 3, 64), (True, True, False)
            )
        assert seen.calls[0][1][0] == ((2, 3, 64), (192, 64, 1))
