"""The model check's report, from its raw log alone (no GPU): <out>/model.jsonl (tilekit.testing.model run)
-> <out>/performance.md and <out>/performance.svg.

    python -m tilekit model report --out out/model

performance.md's first line is the verdict: DONE when every correctness record is within its
tolerance and the goals hold (the ports' prefill no slower than torch.compile's, the ports' CUDA-
graph decode step no slower than torch.compile's at every batch; the ports' side is the ports'
stack under torch.compile where the step has it, `GOAL_PORTS`), INVESTIGATE with the reasons
otherwise, BLOCKED when the log has no timing. Where a decode step is slower, the breakdown says
which operations the gap is made of (the same CUPTI samples, kernels grouped by
`category`). Of several records of one measurement (a run repeated), the last is used.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from tilekit.reports.markdown import cell, markdown_table
from tilekit.reports.records import write_atomic

# A decode step's graph replay against the same step run eagerly (rel L2 of bf16 logits): one bf16
# rounding (2^-8). The same kernels replayed give 0 (the ports do); cuBLAS may pick another algorithm
# under capture, which moves the logits by a rounding (torch's step: 1.5e-3 on the H200).
GRAPH_TOLERANCE = 2.0**-8
GOAL_REFERENCE = "compile"  # the goals compare the ports with torch.compile (default mode)
# The ports' side of a goal: the ports' stack under torch.compile where the step has it (like for like:
# inductor fuses the glue, RoPE and the residual adds, around the ports as it does around torch's ops),
# else the ports in eager PyTorch.
GOAL_PORTS = ("ports-compile", "ports")
IMPL_ORDER = ("ports", "ports-compile", "ports-unfused", "torch", "compile", "compile-max", "liger")
IMPL_TITLES = {
    "ports": "ports",
    "ports-compile": "ports in torch.compile",
    "ports-unfused": "ports without issue 44's ops",
    "torch": "PyTorch eager",
    "compile": "torch.compile",
    "compile-max": "torch.compile max-autotune-no-cudagraphs",
    "liger": "Liger-Kernel",
}
# the columns of the per-operation breakdown: every category of CATEGORIES, then "other"
OPERATIONS = ("attention", "matmul", "rms_norm", "silu_and_mul", "rope", "loss", "other")
# The phases whose ports step is judged against torch.compile's; a training step (issue 43) is
# reported with every implementation's time, not judged.
GOAL_PHASES = ("prefill", "decode")


def checked_what(record: dict) -> str:
    """What a correctness record's rel_l2 measures: the logits, or a training step's worst gradient."""
    if record["phase"] != "train":
        return "logits"
    worst = max(record.get("gradients") or {"?": 0.0}, key=lambda k: (record.get("gradients") or {}).get(k, 0.0))
    return f"gradient of {worst}"


class LogError(ValueError):
    """A line of model.jsonl that is not a record, with its file and line."""


def read_log(path: Path) -> list[dict]:
    """The records of model.jsonl, in order; LogError naming path:line for a line that is not JSON
    or lacks a record's keys."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise LogError(f"{path}:{number}: not a JSON record ({e.msg}); the raw log is kept as it is") from e
        missing = [k for k in ("kind", "config", "impl", "phase", "batch") if k not in record]
        if missing:
            raise LogError(f"{path}:{number}: a record without {missing}")
        records.append(record)
    return records


def label(record: dict) -> str:
    """The stack a record measured: its config, and its layers where the record says."""
    return record["config"] + (f" ({record['layers']} layers)" if "layers" in record else "")


def latest(records: list[dict], kind: str) -> dict:
    """{(stack, phase, batch, impl): the last record of that kind}."""
    return {(label(r), r["phase"], r["batch"], r["impl"]): r for r in records if r["kind"] == kind}


# Kernel name patterns (regular expressions searched in the lower-case name) -> the operation a kernel
# belongs to, for the breakdown (first match wins).
CATEGORIES = (
    # the training step's loss: the ports' cross_entropy_rows, Liger's liger_cross_entropy_kernel,
    # PyTorch's LogSoftMax and nll_loss kernels, inductor's fused log_softmax (before attention's
    # "softmax"; LEGACY_CUT below for names that lost their "LogSoftMax")
    ("loss", ("cross_entropy", "nll_loss", "logsoftmax", "log_softmax")),
    ("rope", (r"rope", "rotary")),  # the ports' rope_tokens, Liger's _triton_rope; inductor's fused RoPE is "other"
    ("attention", ("attention", "flash", "fmha", "sdpa", "softmax", "bmm")),
    # inductor names its fused kernels by their ops (triton_red_fused_..._rsqrt_..., triton_tem_fused_mm)
    ("rms_norm", ("rms_norm", "rmsnorm", "rms", "rsqrt")),
    # the gated family's entries (cutile_kernels/src/gated.rs) are fused_* / split_*, not inductor's *_fused_*
    ("silu_and_mul", ("silu", "swiglu", "act_and_mul", "sigmoid", r"^(fused|split)_\w*entry$")),
    ("matmul", ("matmul", "gemm", "nvjet", "xmma", "cutlass", "sm90", "mma", "splitk", "_mm_", "addmm", "tem_fused")),
)


# The model check's records up to its H100 run of 2026-12-06 cut kernel names at 120 characters,
# where PyTorch's cunn_SoftMaxForward / cunn_SoftMaxBackward lose the "LogSoftMax" epilogue that
# says they are the loss's. Those records are all of llama3-8b, whose eager attention is SDPA's
# fused kernels (s_q = 1 or s_kv), so a cut cunn_SoftMax there is the loss's log_softmax; a full
# name (kept to model.NAME_CHARS characters since) is matched by its epilogue, and an eager attention's plain
# softmax (gpt-oss-like's window and sinks: `reference_attention`) stays attention's.
LEGACY_CUT = 120


def category(kernel_name: str) -> str:
    """The operation a kernel of the stack belongs to, by its name; "other" (copies, adds, and RoPE
    where it is not a kernel of its own name).

    >>> [category(n) for n in ("rms_norm_row_exact", "nvjet_tst_128x256", "attention_fwd", "elementwise_kernel")]
    ['rms_norm', 'matmul', 'attention', 'other']
    >>> [category(n) for n in ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "triton_poi_fused_mul_sigmoid_1")]
    ['rms_norm', 'silu_and_mul']
    >>> [category(n) for n in ("fused_exact_entry", "split_masked_tail_entry", "triton_poi_fused_add_0")]
    ['silu_and_mul', 'silu_and_mul', 'other']
    >>> [category(n) for n in ("rope_tokens", "_triton_rope", "fused_add_rms_norm_rows")]
    ['rope', 'rope', 'rms_norm']
    >>> [category(n) for n in ("cross_entropy_rows", "void at::native::cunn_SoftMaxForward<LogSoftMaxForwardEpilogue>")]
    ['loss', 'loss']
    >>> cut = "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::"
    >>> [category((cut + "(anonymous namespace)::L")[:120]), category(cut + "SoftMaxBackwardEpilogue>")]
    ['loss', 'attention']
    """
    low = kernel_name.lower()
    if len(kernel_name) == LEGACY_CUT and "cunn_softmax" in low:
        return "loss"
    return next((cat for cat, keys in CATEGORIES if any(re.search(k, low) for k in keys)), "other")


def by_operation(kernels: dict) -> dict:
    """ms per step by operation (`category`) of a record's per-kernel medians, every one of OPERATIONS.

    >>> ops = by_operation({"rope_tokens": 1.0, "cross_entropy_rows": 2.0, "nvjet_tst": 0.5})
    >>> [ops[o] for o in ("rope", "loss", "matmul", "attention")]
    [1.0, 2.0, 0.5, 0.0]
    """
    out = dict.fromkeys(OPERATIONS, 0.0)
    for name, ms in kernels.items():
        out[category(name)] += ms
    return out


def _impls(keys) -> list[str]:
    present = {k[-1] for k in keys}
    return [i for i in IMPL_ORDER if i in present] + sorted(present - set(IMPL_ORDER))


def goal_ports(timing: dict, step: tuple) -> str:
    """The implementation a step's goal judges: the first of GOAL_PORTS timed at `step` (stack,
    phase, batch), "ports" when neither is."""
    return next((i for i in GOAL_PORTS if (*step, i) in timing), "ports")


def gap_text(ports: dict, reference: dict) -> str:
    """Where a slower ports step's time goes: each operation's difference in ms, the largest first,
    and whether the whole gap is one operation's."""
    ops_p, ops_r = by_operation(ports["kernels"]), by_operation(reference["kernels"])
    diffs = sorted(((ops_p[o] - ops_r[o], o) for o in OPERATIONS), reverse=True)
    gap = ports["median_ms"] - reference["median_ms"]
    parts = ", ".join(f"{o} {d:+.3f} ms" for d, o in diffs if abs(d) >= 0.0005)
    top, name = diffs[0]
    alone = sum(d for d, o in diffs if o != name)
    whose = (
        f"the gap is {name}'s (the others together {alone:+.3f} ms)"
        if alone <= 0.1 * max(gap, 1e-9)
        else (f"{name} is the largest part")
    )
    return f"{parts}: {whose}"


def render(records: list[dict], log_name: str = "model.jsonl") -> tuple[str, dict]:
    """(performance.md, the chart's data {label: ports / reference}) from the records."""
    timing, correct = latest(records, "timing"), latest(records, "correctness")
    lines, problems = [], []
    if not timing:
        body = "No timing record in the log: nothing was run on a GPU (`make model` on a GPU host)."
        return f"VERDICT: BLOCKED\n\n# Model check\n\n{body}\n\nRaw log: {log_name}\n", {}
    bad = [r for r in correct.values() if not r["ok"]]
    problems += [
        f"{r['config']} {r['phase']} batch {r['batch']}: {r['impl']} {checked_what(r)} rel L2 {r['rel_l2']:.2e} > "
        f"{r['tolerance']:.0e}"
        for r in bad
    ]
    for impl in GOAL_PORTS:  # a goal may be judged on either, so both must have been checked
        timed = {k[0] for k in timing if k[3] == impl} | ({k[0] for k in timing} if impl == "ports" else set())
        for stack in sorted(timed - {k[0] for k in correct if k[3] == impl}):
            problems.append(
                f"{stack}: no correctness record of {'the ports' if impl == 'ports' else IMPL_TITLES[impl]}: run "
                f"`python -m tilekit model run --phases correctness --impls {impl}`"
            )
    for stack, phase, batch in sorted({k[:3] for k in timing} - {k[:3] for k in timing if k[3] in GOAL_PORTS}):
        problems.append(f"{stack} {phase} batch {batch}: no timing of the ports")
    problems += [
        f"{k[0]} {k[1]} batch {k[2]}: {k[3]}'s CUDA graph gives {r['graph_vs_eager']:.2e} rel L2 from its eager step"
        for k, r in sorted(timing.items())
        if (r.get("graph_vs_eager") or 0.0) > GRAPH_TOLERANCE
    ]
    chart = {}
    goal_lines = []
    for (config, phase, batch, impl), r in sorted(timing.items()):
        if impl != goal_ports(timing, (config, phase, batch)) or phase not in GOAL_PHASES:
            continue
        ref = timing.get((config, phase, batch, GOAL_REFERENCE))
        label = f"{config} {phase}" + (f" b={batch}" if phase == "decode" else "")
        if ref is None:
            problems.append(f"{label}: no {GOAL_REFERENCE} record to judge the ports against")
            continue
        ratio = r["median_ms"] / ref["median_ms"]
        chart[label] = ratio
        met = ratio <= 1.0
        text = (
            f"- {label}: {IMPL_TITLES[impl]} {r['median_ms']:.3f} ms, torch.compile {ref['median_ms']:.3f} ms, ratio {ratio:.3f}: "
            + ("met" if met else f"not met; {gap_text(r, ref)}")
        )
        goal_lines.append(text)
        if not met:
            problems.append(f"{label}: {IMPL_TITLES[impl]} {ratio:.3f}x torch.compile")
    if not goal_lines and not any(p.endswith("no timing of the ports") for p in problems):
        problems.append(
            f"no {' or '.join(GOAL_PHASES)} timing: no goal was judged (`python -m tilekit model run --phases "
            f"{','.join(GOAL_PHASES)}`)"
        )
    verdict = "DONE" if not problems else "INVESTIGATE"
    lines += [f"VERDICT: {verdict}", "", "# Model check: decoder stacks on ports against PyTorch", ""]
    if problems:
        lines += ["Why not DONE:", "", *[f"- {p}" for p in problems], ""]
    lines += [
        "The same stack and random weights (tilekit.testing.model: embedding, layers of RMSNorm, QKV projection, "
        "RoPE, attention over a KV cache, output projection, RMSNorm, gate-up projection, SiLU-and-mul, down "
        "projection; final RMSNorm, LM head) with five operations from each implementation; times are CUPTI "
        "kernel time per call (tilekit.runtime.bench's policy: L2 flushed, launch gaps out), medians; decode steps "
        "replay a CUDA graph.",
        "",
        "## Goals (against torch.compile, default mode)",
        "",
        *goal_lines,
        "",
    ]
    if correct:
        impls = _impls(correct)
        rows = [
            [
                config,
                phase,
                str(batch),
                *(
                    f"{correct[(config, phase, batch, i)]['rel_l2']:.2e}"
                    if (config, phase, batch, i) in correct
                    else "-"
                    for i in impls
                ),
            ]
            for config, phase, batch in sorted({k[:3] for k in correct})
        ]
        tols = {r["phase"] == "train": r["tolerance"] for r in correct.values()}
        judged = [f"the logits (tolerance {tols[False]:.0e})"] if False in tols else []
        if True in tols:
            judged.append(f"for a training step its worst parameter gradient (tolerance {tols[True]:.0e})")
        lines += [
            f"## Correctness: relative L2 against the float32 stack: {', and '.join(judged)}",
            "",
            markdown_table(rows, ["config", "phase", "batch", *(IMPL_TITLES.get(i, i) for i in impls)]),
            "",
        ]
    impls = _impls(timing)
    for phase, title in (
        ("prefill", "Prefill"),
        ("decode", "Decode step in a CUDA graph"),
        ("train", "Training step: forward, cross-entropy, backward (reported, not a goal)"),
    ):
        keys = sorted({k[:3] for k in timing if k[1] == phase})
        if not keys:
            continue
        first = timing[(*keys[0], next(i for i in impls if (*keys[0], i) in timing))]
        shape = (
            f"after {first['context']} tokens" if phase == "decode" else f"{first['batch']} x {first['tokens']} tokens"
        )
        rows = []
        for key in keys:
            ms = {i: timing[(*key, i)]["median_ms"] for i in impls if (*key, i) in timing}
            ours = goal_ports(timing, key)
            ratio = ms[ours] / ms[GOAL_REFERENCE] if ours in ms and GOAL_REFERENCE in ms else None
            rows.append(
                [
                    key[0],
                    str(key[2]),
                    *(f"{ms[i]:.4f}" if i in ms else "-" for i in impls),
                    "-" if ratio is None else f"{ratio:.3f}",
                ]
            )
        lines += [
            f"## {title} ({shape}): ms per call",
            "",
            markdown_table(
                rows,
                [
                    "config",
                    "batch",
                    *(IMPL_TITLES.get(i, i) for i in impls),
                    ("goal: " if phase in GOAL_PHASES else "") + "ports / torch.compile",
                ],
            ),
            "",
        ]
    rows = []
    for (config, phase, batch, impl), r in sorted(
        timing.items(), key=lambda kv: (kv[0][:3], IMPL_ORDER.index(kv[0][3]) if kv[0][3] in IMPL_ORDER else 99)
    ):
        ops = by_operation(r["kernels"])
        rows.append([config, phase, str(batch), impl, *(f"{ops[o]:.4f}" for o in OPERATIONS), f"{r['median_ms']:.4f}"])
    lines += [
        "## Where the time goes: ms per call by operation (kernels grouped by name, the same samples)",
        "",
        markdown_table(rows, ["config", "phase", "batch", "impl", *OPERATIONS, "total"]),
        "",
    ]
    env = next(iter(timing.values())).get("env", {})
    lines += [
        "## Environment",
        "",
        *(f"- {k}: {cell(str(v))}" for k, v in sorted(env.items())),
        "",
        f"Raw log: {log_name} (one JSON record a line: every sample and every kernel's median).",
        "Chart: performance.svg (ports / torch.compile per step). The goals and the tables' ratio take the ports "
        "in torch.compile where a step has them, else the ports in eager PyTorch.",
        "",
    ]
    return "\n".join(lines), chart


def chart_svg(chart: dict) -> str:
    """Bars of ports / torch.compile per step, the 1.0 line marked."""
    from tilekit.reports import charts

    def build():
        from matplotlib.figure import Figure

        labels = list(chart)
        fig = Figure(figsize=(6.4, 0.35 * len(labels) + 1.2))
        ax = fig.add_subplot()
        ax.barh(range(len(labels)), [chart[k] for k in labels], color=charts.PORT_COLOR)
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.axvline(1.0, color="#333333", linewidth=0.8)
        ax.set_xlabel("ports time (in torch.compile where timed) / torch.compile time (lower is faster)")
        ax.set_title("Model check: the ports against torch.compile")
        fig.tight_layout()
        return fig

    return charts._svg(build)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tilekit model report", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="the folder holding model.jsonl")
    args = p.parse_args(argv)
    log = args.out / "model.jsonl"
    try:
        records = read_log(log) if log.is_file() else []
    except LogError as e:
        print(f"model report: {e}", file=sys.stderr)
        return 2
    text, chart = render(records)
    write_atomic(str(args.out / "performance.md"), text)
    if chart:
        from tilekit.reports import charts

        reason = charts.missing_matplotlib()
        if reason:
            print(f"model report: no chart: {reason}", file=sys.stderr)
        else:
            write_atomic(str(args.out / "performance.svg"), chart_svg(chart))
    print(f"model report: {args.out / 'performance.md'}: {text.splitlines()[0]}")
    return 0
