"""The model check's CPU parts: the PyTorch stack it compares against (its cache, its attention
with windows and sinks, in float32 on small dimensions), the report rendered from a log alone
(verdicts, the goals, where a gap goes), and `run` without a GPU. The ports' numbers are the
GPU's (make model)."""

import contextlib
import gc
import json
import math
import weakref

import pytest
import torch

from tilekit.reports import model_report
from tilekit.testing import model

TINY = model.Config("tiny", hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=96, vocab=50, layers=2)
WINDOWED = model.Config(
    "tiny-oss", hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=96, vocab=50, window=3, sinks=True
)


def naive_attention(q, k, v, sinks=None, window=None):
    """One query at a time, straight from the definition (q (b, h, s_q, d), k/v (b, h_kv, s_kv, d))."""
    b, h, sq, d = q.shape
    skv, group = k.shape[2], h // k.shape[1]
    out = torch.zeros(b, h, sq, d, dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            for i in range(sq):
                last = i + skv - sq
                seen = [j for j in range(skv) if j <= last and (window is None or j > last - window)]
                logits = [float(q[bi, hi, i].double() @ k[bi, hi // group, j].double()) / math.sqrt(d) for j in seen]
                extra = [float(sinks[hi])] if sinks is not None else []
                top = max(logits + extra)
                weights = [math.exp(x - top) for x in logits]
                total = sum(weights) + sum(math.exp(x - top) for x in extra)
                for wgt, j in zip(weights, seen):
                    out[bi, hi, i] += wgt / total * v[bi, hi // group, j].double()
    return out


@pytest.mark.parametrize("window,sinks", [(None, False), (3, False), (None, True), (2, True)])
def test_reference_attention_is_the_definition(window, sinks):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, s, 8, generator=g) for h, s in ((4, 5), (2, 7), (2, 7)))
    sink = torch.randn(4, generator=g) if sinks else None
    got = model.reference_attention(q, k, v, sink, window)
    assert torch.allclose(got.double(), naive_attention(q, k, v, sink, window), atol=1e-5)


def test_the_torch_ops_sdpa_path_agrees_with_the_reference():
    g = torch.Generator().manual_seed(1)
    for sq, skv in ((6, 6), (1, 9)):
        q = torch.randn(2, sq, 4, 16, generator=g)
        k, v = (torch.randn(2, skv, 2, 16, generator=g) for _ in range(2))
        want = model.reference_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
        assert torch.allclose(model.Ops().attention(q, k, v), want, atol=1e-5)


@pytest.mark.parametrize("cfg", [TINY, WINDOWED], ids=lambda c: c.name)
def test_a_decode_step_after_a_prefill_gives_the_logits_of_the_whole_sequence(cfg):
    """The cache logic: prefill of 9 tokens then one step == one pass over the 10 (last position)."""
    w = model.make_weights(cfg, device="cpu", dtype=torch.float32)
    ids = torch.randint(0, cfg.vocab, (2, 10), generator=torch.Generator().manual_seed(2))
    whole = model.forward(cfg, model.Ops(), w, ids, model.new_cache(cfg, 2, 10, torch.float32, "cpu"), 0, keep=1)
    cache = model.new_cache(cfg, 2, 10, torch.float32, "cpu")
    model.forward(cfg, model.Ops(), w, ids[:, :9], cache, 0, keep=1)
    step = model.forward(cfg, model.Ops(), w, ids[:, 9:], cache, 9, keep=1)
    assert step.shape == (2, 1, cfg.vocab) and torch.allclose(step, whole, atol=1e-4)


def record(kind, impl, phase="decode", batch=1, **extra):
    base = {
        "kind": kind,
        "config": "llama3-8b",
        "impl": impl,
        "phase": phase,
        "batch": batch,
        "tokens": 1,
        "context": 1024,
    }
    return base | extra


def timing(impl, ms, phase="decode", batch=1, **ops):
    kernels = {f"{op}_kernel" if op != "matmul" else "nvjet_gemm": t for op, t in ops.items()}
    return record("timing", impl, phase, batch, median_ms=ms, kernels=kernels, env={"gpu": "NVIDIA H200"})


def correct(impl, err, phase="decode", batch=1):
    return record("correctness", impl, phase, batch, rel_l2=err, tolerance=3e-2, ok=err <= 3e-2)


def test_a_graphed_step_keeps_the_tensors_its_graph_reads_alive(monkeypatch):
    """A CUDA graph reads its inputs at their capture-time addresses and holds none of them; the step's
    closure holds its rope tables and positions, so graphed's replay must hold the step as long as it
    lives (dropped, its memory was reused and PyTorch's decode step indexed out of bounds on the GPU)."""

    class Graph:
        replays = 0

        def replay(self):
            Graph.replays += 1

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", lambda graph: contextlib.nullcontext())

    class Step:  # step_fn's closure
        def __call__(self):
            return torch.zeros(1)

    step = Step()
    alive = weakref.ref(step)
    replay, _ = model.graphed(step)
    del step
    gc.collect()
    assert alive() is not None, "the graph's inputs were freed while it can still be replayed"
    replay()
    assert Graph.replays == 1
    del replay
    gc.collect()
    assert alive() is None


def test_the_report_is_done_when_logits_agree_and_the_ports_are_no_slower():
    records = [
        correct("ports", 8e-3),
        correct("torch", 7e-3),
        timing("ports", 1.00, attention=0.2, matmul=0.7, rms_norm=0.1),
        timing("compile", 1.10, attention=0.2, matmul=0.8, rms_norm=0.1),
        timing("ports", 20.0, "prefill", 4, matmul=20.0),
        timing("compile", 21.0, "prefill", 4, matmul=21.0),
    ]
    text, chart = model_report.render(records)
    assert text.splitlines()[0] == "VERDICT: DONE"
    assert "- llama3-8b decode b=1: ports 1.000 ms, torch.compile 1.100 ms, ratio 0.909: met" in text
    assert chart == {"llama3-8b decode b=1": 1.0 / 1.1, "llama3-8b prefill": 20.0 / 21.0}


def test_a_slower_decode_step_is_investigated_and_its_gap_named_by_operation():
    records = [
        correct("ports", 8e-3),
        timing("ports", 1.40, batch=64, attention=0.6, matmul=0.7, rms_norm=0.1),
        timing("compile", 1.00, batch=64, attention=0.2, matmul=0.7, rms_norm=0.1),
    ]
    text, _ = model_report.render(records)
    assert text.splitlines()[0] == "VERDICT: INVESTIGATE"
    assert "- llama3-8b decode b=64: ports 1.40x torch.compile" not in text  # ratios print with 3 decimals
    assert "- llama3-8b decode b=64: ports 1.400x torch.compile" in text
    assert "attention +0.400 ms: the gap is attention's (the others together +0.000 ms)" in text


def test_logits_out_of_tolerance_and_a_missing_reference_are_reasons():
    text, _ = model_report.render([correct("ports", 0.2), timing("ports", 1.0)])
    assert "ports logits rel L2 2.00e-01 > 3e-02" in text and "no compile record" in text
    assert model_report.render([])[0].startswith("VERDICT: BLOCKED")


def test_a_bad_log_line_is_named_by_file_and_line(tmp_path):
    log = tmp_path / "model.jsonl"
    log.write_text(json.dumps(correct("ports", 1e-3)) + "\n{not json\n")
    with pytest.raises(model_report.LogError, match=r"model.jsonl:2: not a JSON record"):
        model_report.read_log(log)
    assert model_report.main(["--out", str(tmp_path)]) == 2


def test_the_report_command_writes_the_report_and_chart(tmp_path):
    lines = [timing("ports", 1.0, attention=1.0), timing("compile", 2.0, attention=2.0), correct("ports", 1e-3)]
    (tmp_path / "model.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert model_report.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "performance.md").read_text().startswith("VERDICT: DONE")
    assert (tmp_path / "performance.svg").read_text().startswith("<?xml")


def test_run_without_a_gpu_says_so_and_writes_nothing(tmp_path, capsys):
    assert model.main(["run", "--out", str(tmp_path)]) == 0
    assert "no CUDA GPU here" in capsys.readouterr().err and not (tmp_path / "model.jsonl").exists()


def test_the_model_modules_doctests_pass():
    import doctest

    assert doctest.testmod(model).failed == 0 and doctest.testmod(model_report).failed == 0


def test_tune_without_a_gpu_says_so(capsys):
    assert model.main(["tune"]) == 0
    assert "no CUDA GPU here; nothing tuned" in capsys.readouterr().err


def test_done_needs_the_ports_checked_and_timed_everywhere_and_graphs_that_match_eager():
    no_ports = [correct("torch", 1e-3), timing("compile", 1.0, attention=1.0)]
    text, _ = model_report.render(no_ports)
    assert text.startswith("VERDICT: INVESTIGATE")
    assert "llama3-8b: no correctness record of the ports" in text and "decode batch 1: no timing of the ports" in text
    unchecked = [correct("torch", 1e-3), timing("ports", 0.5, attention=0.5), timing("compile", 1.0, attention=1.0)]
    assert "no correctness record of the ports" in model_report.render(unchecked)[0]
    drifting = [correct("ports", 1e-3), timing("ports", 0.5) | {"graph_vs_eager": 0.2}, timing("compile", 1.0)]
    assert "ports's CUDA graph gives 2.00e-01 rel L2 from its eager step" in model_report.render(drifting)[0]


def test_the_goals_judge_the_ports_compiled_where_the_step_has_them_and_a_rounding_of_graph_drift_passes():
    # like for like: the ports' stack under torch.compile against torch.compile; the eager ports stay
    # in the tables but do not make the verdict
    records = [
        correct("ports", 8e-3),
        correct("ports-compile", 8e-3),
        timing("ports", 1.30, attention=0.2, matmul=0.7, rms_norm=0.1, other=0.3),
        timing("ports-compile", 0.95, attention=0.2, matmul=0.7, rms_norm=0.05) | {"graph_vs_eager": 0.0},
        timing("compile", 1.00, attention=0.2, matmul=0.7, rms_norm=0.1) | {"graph_vs_eager": 1.5e-3},
        timing("ports", 20.0, "prefill", 4, matmul=20.0),
        timing("compile", 19.0, "prefill", 4, matmul=19.0),
    ]
    text, chart = model_report.render(records)
    assert "- llama3-8b decode b=1: ports in torch.compile 0.950 ms, torch.compile 1.000 ms, ratio 0.950: met" in text
    # a step the compiled ports were not timed at is judged on the eager ports
    assert "- llama3-8b prefill: ports 20.000 ms, torch.compile 19.000 ms, ratio 1.053: not met" in text
    assert chart == {"llama3-8b decode b=1": 0.95, "llama3-8b prefill": 20.0 / 19.0}
    assert "CUDA graph gives" not in text  # 1.5e-3 is within one bf16 rounding (2^-8)
    assert "| config    | phase  | batch | ports    | ports in torch.compile |" in text  # both checked
    assert (
        "| config    | batch | ports   | ports in torch.compile | torch.compile | goal: ports / torch.compile |" in text
    )


def test_a_goal_judged_on_the_compiled_ports_needs_their_logits_checked():
    records = [
        correct("ports", 8e-3),
        timing("ports-compile", 0.95, attention=0.95),
        timing("compile", 1.00, attention=1.0),
    ]
    text, _ = model_report.render(records)
    assert text.startswith("VERDICT: INVESTIGATE")
    assert "llama3-8b: no correctness record of ports in torch.compile" in text
    assert "--impls ports-compile" in text
    assert model_report.render(records + [correct("ports-compile", 8e-3)])[0].startswith("VERDICT: DONE")


def test_the_implementations_are_the_ports_eager_and_compiled_and_torchs():
    impls = model.implementations(["ports", "ports-compile", "ports-unfused", "torch", "compile", "compile-max"])
    kinds = {name: (type(ops).__name__, mode) for name, (ops, mode) in impls.items()}
    assert kinds == {
        "ports": ("PortOps", None),
        "ports-compile": ("PortOps", "default"),
        "ports-unfused": ("UnfusedPortOps", None),
        "torch": ("Ops", None),
        "compile": ("Ops", "default"),
        "compile-max": ("Ops", "max-autotune-no-cudagraphs"),
    }
    assert list(model.IMPLS[:2]) == ["ports", "ports-compile"]
    # the ports before issue 44's ops: PyTorch's residual add, RoPE and loss around the other ports
    unfused = impls["ports-unfused"][0]
    assert (type(unfused).rope, type(unfused).cross_entropy) == (model.Ops.rope, model.Ops.cross_entropy)
    assert type(unfused).lm_head_loss is model.Ops.lm_head_loss is not model.PortOps.lm_head_loss
    assert type(unfused).rms_norm is model.PortOps.rms_norm
    unfused.rms_norm = model.Ops().rms_norm  # the port's rms_norm is a GPU's: its formula here
    x, delta, w = torch.randn(3, 8), torch.randn(3, 8), torch.rand(8)
    y, s = unfused.add_rms_norm(x, delta, w, 1e-6)
    assert torch.equal(s, x + delta) and torch.allclose(y, torch.nn.functional.rms_norm(x + delta, (8,), w, 1e-6))
    with pytest.raises(ValueError, match="unknown implementation 'ports_compile'"):
        model.implementations(["ports_compile"])


@pytest.mark.parametrize("cfg", [TINY, WINDOWED], ids=lambda c: c.name)
def test_a_training_step_gives_every_weight_its_gradient_and_its_loss_is_cross_entropy(cfg):
    """train_fn on the CPU stack: a gradient for every weight (the embedding's only at the tokens
    seen), equal to autograd of the loss written out by hand (forward over a zero cache, keep = s)."""
    w = model.leaves(model.make_weights(cfg, device="cpu", dtype=torch.float32))
    g = torch.Generator().manual_seed(5)
    ids, targets = (torch.randint(0, cfg.vocab, (2, 7), generator=g) for _ in range(2))
    loss, grads = model.train_fn(cfg, model.Ops(), None, w, ids, targets)()
    assert [tuple(gr.shape) for gr in grads] == [tuple(t.shape) for t in w.values()]
    cache = model.new_cache(cfg, 2, 7, torch.float32, "cpu")
    logits = model.forward(cfg, model.Ops(), w, ids, cache, 0, keep=7)
    by_hand = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1))
    assert torch.allclose(loss, by_hand, atol=1e-6)
    expected = torch.autograd.grad(by_hand, list(w.values()))
    for name, got, want in zip(w, grads, expected):
        assert torch.allclose(got, want, atol=1e-6), name
    unseen = sorted(set(range(cfg.vocab)) - set(ids.flatten().tolist()))
    assert bool((grads[0][unseen] == 0).all()) and bool(grads[0][ids[0, 0]].abs().sum() > 0)


def test_a_training_step_is_reported_not_judged_and_a_bad_gradient_is_named():
    records = [
        correct("ports", 8e-3),
        timing("ports", 1.00, attention=1.0),
        timing("compile", 1.10, attention=1.1),
        record(
            "correctness",
            "ports",
            "train",
            1,
            rel_l2=9e-2,
            tolerance=5e-2,
            ok=False,
            gradients={"0.qkv": 9e-2, "embed": 1e-2},
        ),  # fmt: skip
        timing("ports", 30.0, "train", 1, matmul=30.0),
        timing("compile", 20.0, "train", 1, matmul=20.0),
    ]
    text, chart = model_report.render(records)
    assert text.splitlines()[0] == "VERDICT: INVESTIGATE"
    assert "llama3-8b train batch 1: ports gradient of 0.qkv rel L2 9.00e-02 > 5e-02" in text
    assert "train" not in "".join(chart) and "1.5x torch.compile" not in text  # slower, but not a goal
    assert "## Training step: forward, cross-entropy, backward (reported, not a goal) (1 x 1 tokens)" in text
    assert "for a training step its worst parameter gradient (tolerance 5e-02)" in text


def test_a_log_of_training_steps_alone_judges_no_goal_and_says_so():
    records = [
        correct("ports", 8e-3, "train"),
        timing("ports", 30.0, "train", 1, matmul=30.0),
        timing("compile", 20.0, "train", 1, matmul=20.0),
    ]
    text, _ = model_report.render(records)
    assert text.splitlines()[0] == "VERDICT: INVESTIGATE"
    assert "no prefill or decode timing: no goal was judged" in text and "| goal:" not in text
