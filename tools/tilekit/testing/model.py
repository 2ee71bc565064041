"""The model check (`make model`, docs/models.md): a decoder stack made of ports against the same
stack on PyTorch's ops, torch.compile and Liger-Kernel, in one process and one harness.

    python -m tilekit model run --out out/model [--config llama3-8b] [--impls ports,torch,...]
    python -m tilekit model report --out out/model
    python -m tilekit model tune [--config llama3-8b] [--prefill 4x2048] [--batches 1,8]   (tune ahead)

The stack (`forward`) is a Llama decoder: embedding, `layers` x (RMSNorm, fused QKV projection,
RoPE, attention over a KV cache, output projection, residual add + RMSNorm, fused gate-up
projection, SiLU-and-mul, down projection, residual add + the next RMSNorm), LM head on the last
positions; a training step (phase `train`) runs it over every position of TRAIN tokens with a
cross-entropy loss and its gradients with respect to every weight. Eight operations vary with the
implementation (`Ops`): rms_norm, add_rms_norm (the residual add and the norm after it), rope (q and
k from the cos/sin tables of the positions, made once per forward as Hugging Face's rotary module
makes them), linear (x @ W.t()), silu_and_mul, attention ((b, s, h, d) tensors, causal from the last
key, a sliding window, sinks), the training step's cross_entropy and the projection layout; the
tables and the cache writes are PyTorch's in every one. The weights are random (seeded) and shared
by every implementation.

`run` writes one JSON record a line to <out>/model.jsonl (kept: the raw log) and `report` renders
<out>/performance.md from it (tilekit.reports.model_report). Each record is one measurement: correctness
(logits against the float32 PyTorch stack) or timing (CUPTI through tilekit.runtime.bench, with the
per-kernel breakdown of the same samples).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Config:
    """A decoder's dimensions; `window` a sliding window on the even layers (gpt-oss alternates
    sliding and full attention), `sinks` per-head sink logits on every layer."""

    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    layers: int = 2
    eps: float = 1e-5
    rope_theta: float = 500000.0
    window: int | None = None
    sinks: bool = False

    def layer_window(self, layer: int) -> int | None:
        return self.window if self.window and layer % 2 == 0 else None


CONFIGS = {
    # Llama-3-8B's dimensions (32 query heads, 8 key/value heads, MLP 14336, vocabulary 128256)
    "llama3-8b": Config("llama3-8b", 4096, 32, 8, 128, 14336, 128256),
    # gpt-oss-20b's attention (64 heads of 64, 8 key/value heads, a 128-token window on every other
    # layer, sinks) and its 2880 hidden size, with a dense MLP of the experts' width
    "gpt-oss-like": Config("gpt-oss-like", 2880, 64, 8, 64, 2880, 201088, rope_theta=150000.0, window=128, sinks=True),
}
PREFILL = (4, 2048)  # (batch, tokens) of the prefill timed and checked
DECODE_BATCHES = (1, 8, 64, 256)
DECODE_CONTEXT = 1024  # tokens already in the cache when a decode step is timed
CHECK_CONTEXT = 256  # the context of the decode correctness check
KEEP = 16  # logits of the last positions (the LM head over every prefill position is 4 GB)
TOLERANCE = 3e-2  # relative L2 of bf16 logits against the float32 stack (the report states it)
TRAIN = (1, 2048)  # (batch, tokens) of the training step checked and timed
# relative L2 of each parameter's bf16 gradient against the float32 stack's (the report states it):
# a gradient sums bf16 roundings over every position and layer above it, a few times the logits'
TRAIN_TOLERANCE = 5e-2
# kernel names kept in a record (cut past this: a cutlass template's name runs to thousands); up to
# 2026-12-06 they were cut at 120, which hid PyTorch's LogSoftMax epilogue (model_report.LEGACY_CUT)
NAME_CHARS = 400
IMPLS = ("ports", "ports-compile", "ports-unfused", "torch", "compile", "compile-max", "liger")


# -- weights and the stack --------------------------------------------------------------------------


def make_weights(cfg: Config, device="cuda", dtype=None, seed: int = 0) -> dict:
    """Random weights of cfg (seeded, never zeros): projections ~ N(0, 1/fan_in), norm weights
    1 + N(0, 0.1), the embedding N(0, 1), sinks N(0, 1)."""
    import torch

    dtype = dtype or torch.bfloat16
    g = torch.Generator(device=device)
    g.manual_seed(seed)

    def normal(*shape, std=1.0, mean=0.0):
        return (mean + std * torch.randn(*shape, generator=g, device=device, dtype=torch.float32)).to(dtype)

    h, d = cfg.hidden, cfg.head_dim
    qkv = (cfg.heads + 2 * cfg.kv_heads) * d
    w = {
        "embed": normal(cfg.vocab, h),
        "norm": normal(h, std=0.1, mean=1.0),
        "lm_head": normal(cfg.vocab, h, std=h**-0.5),
    }
    for i in range(cfg.layers):
        w |= {
            f"{i}.attn_norm": normal(h, std=0.1, mean=1.0),
            f"{i}.qkv": normal(qkv, h, std=h**-0.5),
            f"{i}.o": normal(h, cfg.heads * d, std=(cfg.heads * d) ** -0.5),
            f"{i}.mlp_norm": normal(h, std=0.1, mean=1.0),
            f"{i}.gate_up": normal(2 * cfg.intermediate, h, std=h**-0.5),
            f"{i}.down": normal(h, cfg.intermediate, std=cfg.intermediate**-0.5),
        }
        if cfg.sinks:
            w[f"{i}.sinks"] = normal(cfg.heads)
    return w


class Ops:
    """PyTorch's ops, in the weights' dtype: F.rms_norm, F.linear, silu(gate) * up, SDPA (GQA; a
    window or sinks: the scores materialized, softmax in float32, as transformers' eager path)."""

    name = "torch"

    def rms_norm(self, x, w, eps):
        import torch.nn.functional as F

        return F.rms_norm(x, (x.shape[-1],), w, eps)

    def add_rms_norm(self, x, delta, w, eps):
        """(rms_norm(x + delta) * w, x + delta): a block's residual add and the norm after it."""
        x = x + delta
        return self.rms_norm(x, w, eps), x

    def rope(self, q, k, cos, sin, positions):
        """q (b, s, h, d) and k (b, s, h_kv, d) rotated by the rows `positions` (s,) of the (rows, d)
        tables: Hugging Face's apply_rotary_pos_emb (the rows cast to q's dtype, as its rotary module
        casts them)."""
        cos, sin = (t[positions][None, :, None, :].to(q.dtype) for t in (cos, sin))
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def linear(self, x, w):
        import torch.nn.functional as F

        return F.linear(x, w)

    def cross_entropy(self, logits, targets):
        """The mean cross-entropy of (tokens, vocab) logits against (tokens,) targets, float32: the
        logits upcast first (transformers' loss_function upcasts them so)."""
        import torch.nn.functional as F

        return F.cross_entropy(logits.float(), targets)

    def lm_head_loss(self, h, w, targets):
        """The training step's loss from the final hidden states (tokens, H) and the LM head's weight
        (vocab, H): cross_entropy of the logits linear(h, w) (they exist in memory)."""
        return self.cross_entropy(self.linear(h, w), targets)

    def silu_and_mul(self, x):
        import torch.nn.functional as F

        half = x.shape[-1] // 2
        return F.silu(x[..., :half]) * x[..., half:]

    def attention(self, q, k, v, sinks=None, window=None):
        """q (b, s_q, h, d), k and v (b, s_kv, h_kv, d) -> (b, s_q, h, d); causal from the last key."""
        import torch.nn.functional as F

        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        sq, skv = q.shape[2], k.shape[2]
        if sinks is None and window is None and (sq == skv or sq == 1):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=sq > 1, enable_gqa=True)
            return o.transpose(1, 2)
        return reference_attention(q, k, v, sinks, window).to(q.dtype).transpose(1, 2)


def reference_attention(q, k, v, sinks=None, window=None):
    """Attention in float32 with the scores materialized: q (b, h, s_q, d), k and v (b, h_kv, s_kv,
    d); query i sees key j iff j <= i + s_kv - s_q (and j > i + s_kv - s_q - window); a sink is one
    more logit of its head, of value zero."""
    import torch

    b, h, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    k = k.repeat_interleave(h // hkv, dim=1).float()
    v = v.repeat_interleave(h // hkv, dim=1).float()
    scores = q.float() @ k.transpose(-1, -2) / math.sqrt(d)
    i = torch.arange(sq, device=q.device)[:, None] + skv - sq
    j = torch.arange(skv, device=q.device)[None, :]
    seen = j <= i if window is None else (j <= i) & (j > i - window)
    scores = scores.masked_fill(~seen, float("-inf"))
    if sinks is not None:
        sink = sinks.float().view(1, h, 1, 1).expand(b, h, sq, 1)
        scores = torch.cat((scores, sink), dim=-1)
    p = torch.softmax(scores, dim=-1)[..., :skv]
    return p @ v


class PortOps(Ops):
    """The ports: kernels/rms_norm, fused_add_rms_norm, rope (q and k in one launch, the float32
    tables as they are), matmul (x @ W.t(), W read in place), silu_and_mul, attention, cross_entropy."""

    name = "ports"

    def __init__(self):
        from tilekit.runtime import modules

        self._entry = modules._entry

    def rms_norm(self, x, w, eps):
        return self._entry("rms_norm")(x, w, eps)

    def add_rms_norm(self, x, delta, w, eps):
        y, s = self._entry("fused_add_rms_norm")(delta, x, w, eps)
        return y, s

    def rope(self, q, k, cos, sin, positions):
        qk = self._entry("rope")(q, k, cos, sin, positions)
        return qk.split((q.shape[2], k.shape[2]), dim=2)

    def linear(self, x, w):
        y = self._entry("matmul")(x.reshape(-1, x.shape[-1]), w.t())
        return y.view(*x.shape[:-1], w.shape[0])

    def cross_entropy(self, logits, targets):
        """kernels/cross_entropy on the logits as they are (float32 inside): with grad its training op,
        the gradient written in the loss's launch."""
        from kernels.cross_entropy.op import cross_entropy_loss

        return cross_entropy_loss(logits, targets).float()

    def lm_head_loss(self, h, w, targets):
        """kernels/fused_linear_cross_entropy: the LM head and the loss in chunks of rows, the logits
        never whole, dh and dW written by the loss's launches."""
        from kernels.fused_linear_cross_entropy.op import fused_linear_cross_entropy_loss

        return fused_linear_cross_entropy_loss(h, w, targets).float()

    def silu_and_mul(self, x):
        return self._entry("silu_and_mul")(x)

    def attention(self, q, k, v, sinks=None, window=None):
        from tilekit.runtime.modules import attention_bshd

        return attention_bshd(q, k, v, sinks, causal=True, window=window)


class UnfusedPortOps(PortOps):
    """The ports as they were before issue 44's ops: the residual add in PyTorch then the rms_norm
    port, PyTorch's RoPE and cross entropy (float32), the rest the ports'. What the step took before
    fused_add_rms_norm, rope and cross_entropy were ports (the issue's "before")."""

    name = "ports-unfused"

    def add_rms_norm(self, x, delta, w, eps):
        x = x + delta
        return self.rms_norm(x, w, eps), x

    rope = Ops.rope
    cross_entropy = Ops.cross_entropy
    lm_head_loss = Ops.lm_head_loss


class LigerOps(Ops):
    """PyTorch's ops with Liger-Kernel's Triton RMSNorm, RoPE, SiLU-and-mul and cross entropy
    (LigerRMSNormFunction, LigerRopeFunction on (b, h, s, d) views, LigerSiLUMulFunction on the two
    halves, LigerCrossEntropyFunction), as apply_liger_kernel_to_llama patches a model (which leaves
    the residual add and norm apart), and in the training step its default loss,
    LigerFusedLinearCrossEntropyFunction over the final hidden states and the LM head's weight (the
    logits never whole)."""

    name = "liger"

    def __init__(self):
        from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        from liger_kernel.ops.rope import LigerRopeFunction
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction

        self._norm, self._rope, self._silu_mul = LigerRMSNormFunction, LigerRopeFunction, LigerSiLUMulFunction
        from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction

        self._loss, self._linear_loss = LigerCrossEntropyFunction, LigerFusedLinearCrossEntropyFunction

    def cross_entropy(self, logits, targets):
        """Liger's cross entropy (loss and gradient in its forward) on the logits as they are."""
        return self._loss.apply(logits, targets, None)[0].float()  # (input, target, weight)

    def lm_head_loss(self, h, w, targets):
        """Liger's fused linear cross entropy (its loss in a patched model's training step)."""
        return self._linear_loss.apply(h, w, targets)[0].float()  # (input, weight, target)

    def rope(self, q, k, cos, sin, positions):
        cos, sin = (t[positions][None].to(q.dtype) for t in (cos, sin))
        q_rot, k_rot = self._rope.apply(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return q_rot.transpose(1, 2), k_rot.transpose(1, 2)

    def rms_norm(self, x, w, eps):
        return self._norm.apply(x, w, eps)

    def silu_and_mul(self, x):
        half = x.shape[-1] // 2
        return self._silu_mul.apply(x[..., :half], x[..., half:])


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the halves of the last dim."""
    import torch

    d = x.shape[-1]
    return torch.cat((-x[..., d // 2 :], x[..., : d // 2]), dim=-1)


def rope_tables(positions, d: int, theta: float):
    """float32 (s, d) cos and sin of `positions` (s,) (the frequencies twice: Hugging Face's layout)."""
    import torch

    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=positions.device, dtype=torch.float32) / d)
    angles = positions.float()[:, None] * inv[None, :]
    angles = torch.cat((angles, angles), -1)
    return angles.cos(), angles.sin()


def rope_inputs(cfg: Config, start: int, s: int, device) -> tuple:
    """(cos, sin, positions) of a call over positions start .. start + s: the float32 tables of
    positions 0 .. start + s (rope_tables), made once per step function before it is compiled or
    captured, as a serving engine keeps its cos/sin cache, and the positions (s,) int64 each
    implementation's `rope` looks up (the ports' kernel on the GPU, PyTorch and Liger by indexing)."""
    import torch

    cos, sin = rope_tables(torch.arange(start + s, device=device), cfg.head_dim, cfg.rope_theta)
    return cos, sin, torch.arange(start, start + s, device=device)


def new_cache(cfg: Config, batch: int, length: int, dtype=None, device="cuda") -> list:
    """Per layer, (k, v) buffers (batch, length, kv_heads, head_dim), random (a decode step's past)."""
    import torch

    dtype = dtype or torch.bfloat16
    shape = (batch, length, cfg.kv_heads, cfg.head_dim)
    return [
        (torch.randn(shape, device=device).to(dtype), torch.randn(shape, device=device).to(dtype))
        for _ in range(cfg.layers)
    ]


def forward(
    cfg: Config, ops: Ops, w: dict, ids, cache: list, start: int, keep: int = KEEP, rope=None, head: bool = True
):
    """Logits (b, keep, vocab) of the last `keep` positions of ids (b, s), the tokens at positions
    start .. start + s; writes their keys and values into `cache` and attends over cache[:start + s].
    `rope`: rope_inputs(cfg, start, s) made by the caller once (else here). `head` False: the final
    hidden states (b, keep, H) instead, the LM head left to the caller."""
    b, s = ids.shape
    h, hkv, d = cfg.heads, cfg.kv_heads, cfg.head_dim
    cos, sin, positions = rope if rope is not None else rope_inputs(cfg, start, s, ids.device)
    x = w["embed"][ids]
    h_in = ops.rms_norm(x, w["0.attn_norm"], cfg.eps)
    for i in range(cfg.layers):
        qkv = ops.linear(h_in, w[f"{i}.qkv"])
        q, k, v = qkv.split((h * d, hkv * d, hkv * d), dim=-1)
        q, k = ops.rope(q.view(b, s, h, d), k.view(b, s, hkv, d), cos, sin, positions)
        k_cache, v_cache = cache[i]
        k_cache[:, start : start + s] = k
        v_cache[:, start : start + s] = v.view(b, s, hkv, d)
        o = ops.attention(q, k_cache[:, : start + s], v_cache[:, : start + s], w.get(f"{i}.sinks"), cfg.layer_window(i))
        h_mlp, x = ops.add_rms_norm(x, ops.linear(o.reshape(b, s, h * d), w[f"{i}.o"]), w[f"{i}.mlp_norm"], cfg.eps)
        mlp = ops.linear(ops.silu_and_mul(ops.linear(h_mlp, w[f"{i}.gate_up"])), w[f"{i}.down"])
        if i + 1 < cfg.layers:
            h_in, x = ops.add_rms_norm(x, mlp, w[f"{i + 1}.attn_norm"], cfg.eps)
    # the last residual add and the final norm over the kept positions only
    h_out, _ = ops.add_rms_norm(x[:, -keep:], mlp[:, -keep:], w["norm"], cfg.eps)
    return ops.linear(h_out, w["lm_head"]) if head else h_out


# -- measurements -----------------------------------------------------------------------------------


def profile(fn, nrep: int, warmup: int = 3, *, launches: bool = False) -> dict:
    """fn timed by tilekit.runtime.bench's CUPTI policy (L2 flushed, launch gaps out), with every kernel's
    median duration over the same samples: {"median_ms", "samples_ms", "kernels": {name: ms}}. With
    `launches` each launch of a call is its own entry, in launch order, keyed "#<i> <name>" (i from 1):
    three products of one kernel function, summed by name otherwise, come apart."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from tilekit.runtime import bench

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    flush = bench._flush_buffer(torch.cuda.current_device())
    samples, per_kernel = [], {}
    for _ in range(nrep):
        flush.zero_()
        torch.cuda.synchronize()
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        acts = bench.device_activities(prof)
        samples.append(sum(ms for _, ms in acts))
        call = {}
        for i, (name, ms) in enumerate(acts, 1):
            key = f"#{i} {name[:NAME_CHARS]}" if launches else name[:NAME_CHARS]
            call[key] = call.get(key, 0.0) + ms
        for name, ms in call.items():
            per_kernel.setdefault(name, []).append(ms)
    kernels = {n: statistics.median(v + [0.0] * (nrep - len(v))) for n, v in per_kernel.items()}
    return {"median_ms": statistics.median(samples), "samples_ms": samples, "kernels": kernels}


def relative_l2(y, ref) -> float:
    return float((y.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30))


def implementations(names) -> dict:
    """{impl name: (ops, compile mode or None)}; an implementation that cannot run here (Liger not
    installed) is left out with the reason printed."""
    out = {}
    for name in names:
        if name == "ports":
            out[name] = (PortOps(), None)
        elif name == "ports-compile":  # the ports' stack under torch.compile: inductor fuses the glue around them
            out[name] = (PortOps(), "default")
        elif name == "ports-unfused":
            out[name] = (UnfusedPortOps(), None)
        elif name == "torch":
            out[name] = (Ops(), None)
        elif name == "compile":
            out[name] = (Ops(), "default")
        elif name == "compile-max":
            out[name] = (Ops(), "max-autotune-no-cudagraphs")
        elif name == "liger":
            try:
                out[name] = (LigerOps(), None)
            except ImportError as e:
                print(f"model: liger left out: {e}", file=sys.stderr)
        else:
            raise ValueError(f"model: unknown implementation {name!r}; use {', '.join(IMPLS)}")
    return out


def step_fn(cfg, ops, mode, w, ids, cache, start):
    """One call of the stack, compiled with `mode` when given (torch.compile of the whole forward)."""
    import functools

    import torch

    call = functools.partial(forward, cfg, ops, w, rope=rope_inputs(cfg, start, ids.shape[1], ids.device))
    if mode is not None:
        # one shape per compiled call: dynamo's state from the last one would count it as a
        # recompile of the same code (a run meets more shapes than its recompile limit)
        torch._dynamo.reset()
        call = torch.compile(call, mode=mode, fullgraph=True, dynamic=False)
    return lambda: call(ids, cache, start)


def graphed(fn):
    """fn captured in a CUDA graph after two warm-up calls; returns (replay, the graph's output).

    replay holds fn: a graph reads its inputs at the addresses they had at capture and keeps none of
    them alive, and fn's closure is what holds a step's rope tables and positions. Dropped, their
    memory went back to the allocator for any later tensor to take, and each replay read whatever
    was there: on an H100, PyTorch's decode step at batch 256 indexed its rope table out of bounds (a
    device-side assert), as the ports' rope kernel would (it asserts each position id is a table row)."""
    import torch

    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay():
        graph.replay()

    replay.captured = fn  # fn's tensors live as long as replay does
    return replay, out


def case(cfg: Config, impl: str, phase: str, batch: int, tokens: int, context: int) -> dict:
    """What a record measured: the config, implementation, phase and shape."""
    return {"config": cfg.name, "impl": impl, "phase": phase, "batch": batch, "tokens": tokens, "context": context}


def train_loss(cfg: Config, ops: Ops, w: dict, ids, targets, rope=None):
    """The training step's loss: cross-entropy (float32, the mean over every position) of the stack's
    logits at every position of ids (b, s) against targets (b, s), over a fresh cache of s positions
    (the keys and values of this pass only), with the implementation's `lm_head_loss` (the LM head and
    the loss: `cross_entropy` of the logits, or a fused linear cross-entropy)."""
    import torch

    b, s = ids.shape
    dtype = next(iter(w.values())).dtype
    cache = [tuple(torch.zeros(b, s, cfg.kv_heads, cfg.head_dim, dtype=dtype, device=ids.device) for _ in range(2))
             for _ in range(cfg.layers)]  # fmt: skip
    h_out = forward(cfg, ops, w, ids, cache, 0, keep=s, rope=rope, head=False)
    return ops.lm_head_loss(h_out.reshape(b * s, -1), w["lm_head"], targets.reshape(-1))


def train_fn(cfg, ops, mode, w, ids, targets):
    """One training step's gradients, () -> (loss, gradients of w's tensors in w's order): the loss
    (train_loss, compiled with `mode` when given: torch.compile of the forward and the loss, whose
    backward AOTAutograd compiles too) and torch.autograd.grad of it; w's tensors require grad."""
    import functools

    import torch

    loss_of = functools.partial(train_loss, cfg, ops, w, rope=rope_inputs(cfg, 0, ids.shape[1], ids.device))
    if mode is not None:
        torch._dynamo.reset()
        loss_of = torch.compile(loss_of, mode=mode, fullgraph=True, dynamic=False)
    params = list(w.values())

    def step():
        loss = loss_of(ids, targets)
        return loss, torch.autograd.grad(loss, params)

    return step


def leaves(w: dict) -> dict:
    """w's tensors as new leaves that require grad (the parameters of a training step)."""
    return {k: v.detach().clone().requires_grad_() for k, v in w.items()}


def check_training(cfg: Config, impls: dict, emit) -> None:
    """A training step (TRAIN tokens) of each implementation (bf16 weights) against the float32
    PyTorch stack's, same weights, tokens and targets: each parameter's gradient's relative L2, the
    worst of them judged against TRAIN_TOLERANCE (every one is in the record), and the loss."""
    import torch

    w16 = make_weights(cfg)
    g = torch.Generator(device="cuda").manual_seed(3)
    batch, tokens = TRAIN
    ids, targets = (torch.randint(0, cfg.vocab, (batch, tokens), generator=g, device="cuda") for _ in range(2))
    ref_loss, ref_grads = train_fn(cfg, Ops(), None, leaves({k: v.float() for k, v in w16.items()}), ids, targets)()
    ref = dict(zip(w16, ref_grads))
    del ref_grads
    checked = [(n, (ops, mode)) for n, (ops, mode) in impls.items() if mode is None or isinstance(ops, PortOps)]
    for name, (ops, mode) in checked:
        loss, grads = train_fn(cfg, ops, mode, leaves(w16), ids, targets)()
        errors = {k: relative_l2(gr, ref[k]) for k, gr in zip(w16, grads)}
        worst = max(errors.values())
        emit(
            case(cfg, name, "train", batch, tokens, 0)
            | {
                "kind": "correctness",
                "layers": cfg.layers,
                "rel_l2": worst,
                "tolerance": TRAIN_TOLERANCE,
                "ok": worst <= TRAIN_TOLERANCE,
                "gradients": errors,
                "loss": float(loss),
                "loss_float32": float(ref_loss),
            }
        )
        del loss, grads
        torch.cuda.empty_cache()


def time_training(cfg: Config, impls: dict, nrep: int, emit) -> None:
    """CUPTI times of a training step (TRAIN tokens: forward, loss, backward) per implementation, with
    the per-kernel breakdown."""
    import torch

    w = make_weights(cfg)
    g = torch.Generator(device="cuda").manual_seed(4)
    batch, tokens = TRAIN
    ids, targets = (torch.randint(0, cfg.vocab, (batch, tokens), generator=g, device="cuda") for _ in range(2))
    for name, (ops, mode) in impls.items():
        started = time.monotonic()
        fn = train_fn(cfg, ops, mode, leaves(w), ids, targets)
        timing = profile(fn, nrep)
        emit(
            case(cfg, name, "train", batch, tokens, 0)
            | {
                "kind": "timing",
                "graph": False,
                "graph_vs_eager": None,
                "layers": cfg.layers,
                "nrep": nrep,
                **timing,
                "setup_s": round(time.monotonic() - started, 1),
            }
        )
        del fn
        torch.cuda.empty_cache()


def check_correctness(cfg: Config, impls: dict, emit) -> None:
    """Logits of each implementation (bf16) against the float32 PyTorch stack, same weights and
    tokens: the prefill's last KEEP positions, and a decode step after CHECK_CONTEXT tokens at each
    DECODE_BATCHES batch."""
    import torch

    w16 = make_weights(cfg)
    w32 = {k: v.float() for k, v in w16.items()}
    g = torch.Generator(device="cuda").manual_seed(1)
    cases = [("prefill", *PREFILL, 0)] + [("decode", b, 1, CHECK_CONTEXT) for b in DECODE_BATCHES]
    for phase, batch, tokens, context in cases:
        ids = torch.randint(0, cfg.vocab, (batch, context + tokens), generator=g, device="cuda")
        refs = {}
        # torch.compile of `torch`'s ops is checked as `torch`, not compiled again; the ports' stack is
        # checked compiled too (inductor's glue around the ports is code of its own)
        checked = [(n, (ops, mode)) for n, (ops, mode) in impls.items() if mode is None or isinstance(ops, PortOps)]
        for name, (ops, mode) in [("float32", (Ops(), None)), *checked]:
            weights, dtype = (w32, torch.float32) if name == "float32" else (w16, torch.bfloat16)
            cache = new_cache(cfg, batch, context + tokens, dtype)
            if context:  # the past, through the same implementation
                forward(cfg, ops, weights, ids[:, :context], cache, 0, keep=1)
            logits = step_fn(cfg, ops, mode, weights, ids[:, context:], cache, context)()
            if name == "float32":
                refs["float32"] = logits
                continue
            err = relative_l2(logits, refs["float32"])
            emit(
                case(cfg, name, phase, batch, tokens, context)
                | {
                    "kind": "correctness",
                    "layers": cfg.layers,
                    "rel_l2": err,
                    "tolerance": TOLERANCE,
                    "ok": err <= TOLERANCE,
                }
            )
            del cache, logits
        torch.cuda.empty_cache()


def time_steps(cfg: Config, impls: dict, phases, batches, nrep: int, emit) -> None:
    """CUPTI times of the prefill and of a CUDA-graph decode step (after DECODE_CONTEXT tokens) at
    each batch, per implementation, with the per-kernel breakdown."""
    import torch

    w = make_weights(cfg)
    g = torch.Generator(device="cuda").manual_seed(2)
    cases = [("prefill", *PREFILL, 0)] if "prefill" in phases else []
    cases += [("decode", b, 1, DECODE_CONTEXT) for b in batches] if "decode" in phases else []
    for phase, batch, tokens, context in cases:
        ids = torch.randint(0, cfg.vocab, (batch, tokens), generator=g, device="cuda")
        for name, (ops, mode) in impls.items():
            cache = new_cache(cfg, batch, context + tokens)
            fn = step_fn(cfg, ops, mode, w, ids, cache, context)
            started = time.monotonic()
            graph_error = None
            if phase == "decode":
                eager = fn().clone()
                fn, out = graphed(fn)
            timing = profile(fn, nrep)
            if phase == "decode":  # the last timed replay's output against the step run eagerly
                graph_error = relative_l2(out, eager)
            emit(
                case(cfg, name, phase, batch, tokens, context)
                | {
                    "kind": "timing",
                    "graph": phase == "decode",
                    "graph_vs_eager": graph_error,
                    "layers": cfg.layers,
                    "nrep": nrep,
                    **timing,
                    "setup_s": round(time.monotonic() - started, 1),
                }
            )
            del cache, fn
            torch.cuda.empty_cache()


def run(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tilekit model run", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="the folder of model.jsonl (appended) and the report")
    p.add_argument("--config", action="append", choices=sorted(CONFIGS), help="default: every one")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated of {', '.join(IMPLS)}")
    p.add_argument(
        "--phases",
        default="correctness,prefill,decode,train",
        help="of correctness, prefill, decode, train (a training step: with correctness, its gradients are checked)",
    )
    p.add_argument("--batches", default=",".join(map(str, DECODE_BATCHES)))
    p.add_argument("--layers", type=int, help="layers of the stack (default: each config's, 2)")
    p.add_argument("--nrep", type=int, default=20)
    args = p.parse_args(argv)
    import torch

    from tilekit.runtime import bench

    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "model.jsonl"
    if not torch.cuda.is_available():
        print("model: no CUDA GPU here; nothing run (make model runs on a GPU host, from the bundle)", file=sys.stderr)
        return 0
    env = bench.environment()

    def emit(record: dict) -> None:
        record = {"env": env, **record}
        with log.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        short = {k: v for k, v in record.items() if k not in ("env", "kernels", "samples_ms")}
        print(f"model: {json.dumps(short, sort_keys=True)}", flush=True)

    impls = implementations([i for i in args.impls.split(",") if i])
    phases = set(args.phases.split(","))
    for name in args.config or sorted(CONFIGS):
        cfg = CONFIGS[name]
        if args.layers:
            cfg = Config(**(asdict(cfg) | {"layers": args.layers}))
        if "correctness" in phases:
            check_correctness(cfg, impls, emit)
            if "train" in phases:
                check_training(cfg, impls, emit)
        time_steps(cfg, impls, phases, [int(b) for b in args.batches.split(",")], args.nrep, emit)
        if "train" in phases:
            time_training(cfg, impls, args.nrep, emit)
    print(f"model: appended to {log}")
    return 0


def tune(argv: list[str]) -> int:
    """Tune ahead: run the ports' stack once on each shape a model will meet (prefills, decode steps),
    so autotune stores its picks in $TILEKIT_AUTOTUNE_CACHE (tilekit.runtime.autotune; per GPU, kernel and
    shape class) and the JIT its kernels in its disk cache: a later process starts warm."""
    p = argparse.ArgumentParser(prog="python -m tilekit model tune", description=tune.__doc__.split(":")[0])
    p.add_argument("--config", action="append", choices=sorted(CONFIGS), help="default: every one")
    p.add_argument("--prefill", default="1x2048,4x2048", help="batch x tokens of the prefills, comma-separated")
    p.add_argument("--batches", default=",".join(map(str, DECODE_BATCHES)), help="batches of the decode steps")
    p.add_argument("--context", type=int, default=DECODE_CONTEXT, help="tokens in the cache at a decode step")
    args = p.parse_args(argv)
    import torch

    from tilekit.runtime import autotune

    if not torch.cuda.is_available():
        print("model tune: no CUDA GPU here; nothing tuned (the picks are per GPU)", file=sys.stderr)
        return 0
    try:
        prefills = [tuple(int(v) for v in shape.split("x")) for shape in args.prefill.split(",") if shape]
        batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        p.error(f"--prefill {args.prefill!r} / --batches {args.batches!r}: give BxT,BxT and B,B (whole numbers)")
    path = autotune.cache_path()
    before = autotune.load(path)
    started = time.monotonic()
    for name in args.config or sorted(CONFIGS):
        cfg, ops = CONFIGS[name], PortOps()
        w = make_weights(cfg)
        shapes = [(b, t, 0) for b, t in prefills] + [(b, 1, args.context) for b in batches]
        for batch, tokens, start in shapes:
            ids = torch.zeros(batch, tokens, dtype=torch.long, device="cuda")
            forward(cfg, ops, w, ids, new_cache(cfg, batch, start + tokens), start)
            torch.cuda.synchronize()
            print(f"model tune: {name} batch {batch} x {tokens} tokens after {start}: done", flush=True)
    after = autotune.load(path)

    def classes(data):
        return {(g, k, key) for g, kernels in data.items() for k, keys in kernels.items() for key in keys}

    added = len(classes(after) - classes(before))
    print(f"model tune: {added} shape classes tuned in {time.monotonic() - started:.0f} s, stored in {path}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        return run(argv[1:])
    if argv[:1] == ["tune"]:
        return tune(argv[1:])
    if argv[:1] == ["report"]:
        from tilekit.reports import model_report

        return model_report.main(argv[1:])
    print(
        "usage: python -m tilekit model run|report --out DIR [options], or model tune [options] (--help after the verb)",
        file=sys.stderr,
    )
    return 2
