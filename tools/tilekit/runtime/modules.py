"""The modules a model is made of, on ports, and the swap of a Hugging Face Llama-family model's
modules for them, in place (as Liger-Kernel's apply_liger_kernel_to_llama does; every port being a
torch op, the patched model also compiles with torch.compile(fullgraph=True)):

    from tilekit.runtime.modules import patch
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16).cuda()
    patch(model)                        # RMSNorm, MLP, Linear, attention, RoPE -> ports

- RMSNorm, LayerNorm: kernels/rms_norm, kernels/layer_norm over the last dim.
- Linear: kernels/matmul on x @ weight.t(), the weight in nn.Linear's (out, in) layout (read in
  place as a column-major operand), plus the bias.
- GatedMLP: down(silu(gate(x)) * up(x)) as one matmul into [gate | up] (the two weights
  concatenated), kernels/silu_and_mul, one matmul down.
- Attention: kernels/attention over q, k, v in a model's (b, s, h, d) layout, GQA, causal, a
  sliding window, per-head sinks; `attention_bshd` is the function.
- `apply_rotary_pos_emb`: transformers' function of that name on kernels/rope (q and k in one launch),
  which `patch` puts in the model family's module in its place, as Liger-Kernel does.
- `patch(model)`: Llama, Qwen2 and Mistral (the classes in SUPPORTED) get these modules, and
  attention through transformers' AttentionInterface under the name "tilekit", which calls the
  port where a call is what the kernel computes (causal, no mask beyond that, a head dim of 64 or
  128, no dropout) and transformers' own SDPA path otherwise (padding masks, other head dims).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys

import torch
from torch import nn

SUPPORTED = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM", "LlamaModel", "Qwen2Model", "MistralModel")
ATTENTION = "tilekit"  # the name of the ports' attention in transformers' AttentionInterface


def _import_entries() -> dict:
    """Every kernel's entry, kernels/<name>/op.py imported once, here (which defines every
    torch.ops.tilekit.<name>): a forward then looks an entry up, which torch.compile traces, where
    an import inside forward would break the graph."""
    import importlib

    from tilekit.runtime import kernel

    return {name: getattr(importlib.import_module(f"kernels.{name}.op"), name) for name in kernel.names()}


ENTRIES = _import_entries()


def _entry(kernel: str):
    """kernels/<kernel>/op.py's entry."""
    return ENTRIES[kernel]


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight over the last dim (kernels/rms_norm)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        self.eps = eps

    def forward(self, x):
        return _entry("rms_norm")(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


class LayerNorm(nn.Module):
    """(x - mean) * rsqrt(var + eps) * weight + bias over the last dim (kernels/layer_norm)."""

    def __init__(self, hidden_size: int, eps: float = 1e-5, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(hidden_size, device=device, dtype=dtype)) if bias else None
        self.eps = eps

    def forward(self, x):
        return _entry("layer_norm")(x, self.weight, self.bias, self.eps)


class Linear(nn.Module):
    """x @ weight.t() + bias, the weight (out_features, in_features) as nn.Linear holds it
    (kernels/matmul reads it in place, as a column-major operand)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype)) if bias else None

    @classmethod
    def of(cls, linear: nn.Linear) -> Linear:
        """The same layer on the port, sharing linear's parameters (a tied lm_head stays tied)."""
        return cls.with_parameters(linear.weight, linear.bias)

    @classmethod
    def with_parameters(cls, weight: nn.Parameter, bias: nn.Parameter | None) -> Linear:
        """The layer holding these parameters (weight (out, in)), allocating nothing."""
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.out_features, new.in_features = weight.shape
        new.weight, new.bias = weight, bias
        return new

    def forward(self, x):
        y = _entry("matmul")(x.reshape(-1, self.in_features), self.weight.t())
        y = y.view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class GatedMLP(nn.Module):
    """down(silu(gate(x)) * up(x)): one matmul into [gate | up] (gate_up's weight is the two
    weights stacked), kernels/silu_and_mul, one matmul down."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool = False, device=None, dtype=None):
        super().__init__()
        self.gate_up = Linear(hidden_size, 2 * intermediate_size, bias, device, dtype)
        self.down = Linear(intermediate_size, hidden_size, bias, device, dtype)

    @classmethod
    def of(cls, gate: nn.Linear, up: nn.Linear, down: nn.Linear) -> GatedMLP:
        """The MLP of three nn.Linear (a Llama MLP's gate_proj, up_proj, down_proj): gate's and up's
        weights copied into one, down's shared."""
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        bias = None if gate.bias is None else nn.Parameter(torch.cat((gate.bias.detach(), up.bias.detach())))
        new.gate_up = Linear.with_parameters(nn.Parameter(torch.cat((gate.weight.detach(), up.weight.detach()))), bias)
        new.down = Linear.of(down)
        return new

    def forward(self, x):
        return self.down(_entry("silu_and_mul")(self.gate_up(x)))


def attention_bshd(q, k, v, sinks=None, causal: bool = True, scale: float | None = None, window: int | None = None):
    """Attention over a model's (b, s, h, d) layout: q (b, s_q, h, d), k and v (b, s_kv, h_kv, d)
    -> (b, s_q, h, d), read and written in place through transposed views (no copy)."""
    o = _entry("attention")(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), sinks, causal=causal, scale=scale, window=window
    )
    return o.transpose(1, 2)


class Attention(nn.Module):
    """attention_bshd with the head counts, mask and sinks of one layer: forward(q, k, v) on
    (b, s, h, d) tensors; `sinks` (num_heads,) logits where given (gpt-oss)."""

    def __init__(self, causal: bool = True, window: int | None = None, sinks: torch.Tensor | None = None, scale=None):
        super().__init__()
        self.causal, self.window, self.scale = causal, window, scale
        self.sinks = nn.Parameter(sinks) if sinks is not None else None

    def forward(self, q, k, v):
        return attention_bshd(q, k, v, self.sinks, causal=self.causal, scale=self.scale, window=self.window)


# -- Hugging Face models ------------------------------------------------------------------------------


def hf_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers' attention interface (query (b, h, s_q, d), key and value (b, h_kv, s_kv, d),
    returns ((b, s_q, h, d), None)) on the port: causal, with the layer's sliding window and sinks
    (`module.sinks`, gpt-oss), when no mask but the causal one is asked for; else transformers' SDPA."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    causal = getattr(module, "is_causal", True)
    window = kwargs.get("sliding_window")
    kernel_takes = query.is_cuda and query.dtype in (torch.bfloat16, torch.float16) and query.shape[-1] in (64, 128)
    if attention_mask is None and causal and dropout == 0.0 and kernel_takes:
        o = _entry("attention")(
            query, key, value, getattr(module, "sinks", None), causal=True, scale=scaling, window=window
        )
        return o.transpose(1, 2), None
    if attention_mask is None and causal:
        # hf_mask said "the causal mask from the last key" (None): SDPA's own None would align it to
        # the first key and drop the window, so the mask is spelled out for it
        attention_mask = causal_mask(query.shape[-2], key.shape[-2], window, query.device)
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def causal_mask(sq: int, skv: int, window: int | None, device) -> torch.Tensor:
    """(1, 1, sq, skv) bool, True where query i sees key j: j <= i + skv - sq, and within the window
    (j > i + skv - sq - window) where one is given (the port's mask, as hf_mask promises it).

    >>> causal_mask(2, 4, None, "cpu")[0, 0].int().tolist(), causal_mask(3, 3, 2, "cpu")[0, 0].int().tolist()
    ([[1, 1, 1, 0], [1, 1, 1, 1]], [[1, 0, 0], [1, 1, 0], [0, 1, 1]])
    """
    last = torch.arange(sq, device=device)[:, None] + skv - sq
    j = torch.arange(skv, device=device)[None, :]
    seen = (j <= last) if window is None else (j <= last) & (j > last - window)
    return seen[None, None]


def hf_mask(
    batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None, attention_mask=None, **kwargs
):
    """transformers' mask interface for "tilekit": None (hf_attention then runs the port, causal,
    with the layer's window) where the mask is the causal or sliding-window causal one alone: no
    padding, and the keys end where the queries end (the kernel aligns its mask to the last key, as a
    growing cache does; a static cache's empty slots are padding); else SDPA's mask, always
    materialized (SDPA's None would mean its is_causal, aligned to the first key, which hf_attention
    would take for the port's). A padding mask given while tracing (torch.compile, CUDA-graph
    capture) cannot be read: SDPA's mask then."""
    from transformers.masking_utils import causal_mask_function, fast_all, prepare_padding_mask, sdpa_mask
    from transformers.utils.import_utils import is_tracing

    kwargs.update(q_offset=q_offset, kv_offset=kv_offset, attention_mask=attention_mask)
    if mask_function is not None:
        kwargs["mask_function"] = mask_function
    if kwargs.get("allow_is_causal_skip", True):
        plain = mask_function in (None, causal_mask_function) or _sliding_window_causal(mask_function)
        # a static cache gives its offsets as tensors: not read (no host sync, no data-dependent branch)
        numbers = not any(isinstance(v, torch.Tensor) for v in (q_offset, kv_offset, q_length, kv_length))
        aligned = numbers and kv_offset + kv_length == q_offset + q_length
        padding = prepare_padding_mask(attention_mask, kv_length, kv_offset) if plain and aligned else None
        # a padding mask is read on the host, as transformers' SDPA path reads it; not while tracing
        unpadded = padding is None or (not is_tracing(padding) and bool(fast_all(padding)))
        if plain and aligned and unpadded:
            return None
    # materialized: SDPA's own None (is_causal, aligned to the first key) is not the port's mask
    return sdpa_mask(batch_size, q_length, kv_length, **dict(kwargs, allow_is_causal_skip=False))


def _sliding_window_causal(mask_function) -> bool:
    """Whether a transformers mask function is sliding_window_causal_mask_function(w)'s: the
    intersection (and_masks) of the sliding-window overlay and the causal mask, nothing else (a
    chunked or packed mask is not)."""
    from transformers.masking_utils import causal_mask_function

    parts = [c.cell_contents for c in getattr(mask_function, "__closure__", None) or ()]
    if getattr(mask_function, "__qualname__", "") != "and_masks.<locals>.and_mask" or len(parts) != 1:
        return False
    names = sorted(getattr(f, "__qualname__", "") for f in parts[0])
    return (
        len(parts[0]) == 2
        and causal_mask_function in parts[0]
        and names[1] == "sliding_window_overlay.<locals>.inner_mask"
    )


def register_attention() -> None:
    """Make "tilekit" an attention implementation transformers knows, with its mask (hf_mask)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(ATTENTION, hf_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, hf_mask)


def _is_rms_norm(m: nn.Module) -> bool:
    return type(m).__name__.endswith("RMSNorm") and hasattr(m, "weight") and m.weight.dim() == 1


def _is_gated_mlp(m: nn.Module) -> bool:
    act = getattr(m, "act_fn", None)
    silu = isinstance(act, nn.SiLU) or type(act).__name__ in ("SiLU", "SiLUActivation")
    return silu and all(isinstance(getattr(m, n, None), nn.Linear) for n in ("gate_proj", "up_proj", "down_proj"))


def apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs):
    """transformers' apply_rotary_pos_emb on kernels/rope: q (b, h, s, d) and k (b, h_kv, s, d)
    rotated by cos and sin (1 or b, s, d), as (q, k) views of the port's one output. Where the port
    does not compute what transformers' function does (partial rotary dims, an unsqueeze_dim other
    than 1, tables of another batch, another dtype, tensors off the GPU) transformers' own function
    runs, with the same arguments (bound to its signature: `unsqueeze_dim` found by name)."""
    original = _transformers_rope()
    bound = _signature(original).bind(q, k, cos, sin, *args, **kwargs)
    bound.apply_defaults()
    served = (
        q.is_cuda
        and q.dim() == 4
        and cos.dim() == 3
        and cos.shape[-1] == q.shape[-1]
        and cos.shape[0] in (1, q.shape[0])
        and q.dtype in (torch.float16, torch.bfloat16, torch.float32)
        and cos.dtype in (q.dtype, torch.float32)
        and bound.arguments.get("unsqueeze_dim", 1) == 1
    )
    if not served:
        return original(*bound.args, **bound.kwargs)
    qk = _entry("rope")(q, k, cos, sin, None, True)
    return qk.split((q.shape[1], k.shape[1]), dim=1)


_ORIGINAL_ROPE: list = []  # transformers' own apply_rotary_pos_emb, kept by patch_rope before it replaces it
_PATCHED_ROPE: list = []  # the modeling modules patch_rope swapped


@functools.cache
def _signature(fn) -> inspect.Signature:
    """fn's signature, read once (apply_rotary_pos_emb binds its arguments to it at every call)."""
    return inspect.signature(fn)


def _transformers_rope():
    if _ORIGINAL_ROPE:
        return _ORIGINAL_ROPE[0]
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as original

    return original


def patch_rope(model: nn.Module) -> int:
    """Put apply_rotary_pos_emb in place of transformers' function in the model's modeling module
    (every model of that family in the process then rotates on the port, as Liger's patch does;
    `transformers_rope()` undoes it for a while); 1 when swapped, 0 where the module has no such
    function."""
    module = sys.modules[type(model).__module__]
    current = getattr(module, "apply_rotary_pos_emb", None)
    if current is None:
        return 0
    if current is not apply_rotary_pos_emb:
        if not _ORIGINAL_ROPE:
            _ORIGINAL_ROPE.append(current)
        module.apply_rotary_pos_emb = apply_rotary_pos_emb
        _PATCHED_ROPE.append(module)
    return 1


@contextlib.contextmanager
def transformers_rope():
    """Within: every modeling module patch_rope swapped runs transformers' own function again (an
    unpatched model of a patched family computes as transformers does: a test's reference)."""
    for module in _PATCHED_ROPE:
        module.apply_rotary_pos_emb = _transformers_rope()
    try:
        yield
    finally:
        for module in _PATCHED_ROPE:
            module.apply_rotary_pos_emb = apply_rotary_pos_emb


def patch(model: nn.Module, *, rms_norm=True, mlp=True, linear=True, attention=True, rope=True) -> dict[str, int]:
    """Swap a Hugging Face Llama, Qwen2 or Mistral model's modules for ports, in place: each
    RMSNorm, each SiLU-gated MLP, every other nn.Linear (projections, lm_head), through
    transformers' AttentionInterface attention, and its family's apply_rotary_pos_emb (patch_rope).
    Returns how many of each were swapped. ValueError for a model of another family (SUPPORTED),
    naming it."""
    if type(model).__name__ not in SUPPORTED:
        raise ValueError(
            f"tilekit.runtime.modules.patch: {type(model).__name__} is not one of {', '.join(SUPPORTED)}; its "
            "modules may compute otherwise (Gemma's RMSNorm scales by 1 + weight): swap them by hand"
        )
    swapped = {"rms_norm": 0, "mlp": 0, "linear": 0, "attention": 0, "rope": 0}
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if rms_norm and _is_rms_norm(child):
                eps = getattr(child, "variance_epsilon", getattr(child, "eps", 1e-6))
                new = RMSNorm.__new__(RMSNorm)
                nn.Module.__init__(new)
                new.weight, new.eps = child.weight, float(eps)
                setattr(parent, name, new)
                swapped["rms_norm"] += 1
            elif mlp and _is_gated_mlp(child):
                setattr(parent, name, GatedMLP.of(child.gate_proj, child.up_proj, child.down_proj))
                swapped["mlp"] += 1
    if linear:
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if type(child) is nn.Linear:
                    setattr(parent, name, Linear.of(child))
                    swapped["linear"] += 1
    if attention:
        register_attention()
        model.set_attn_implementation(ATTENTION)
        swapped["attention"] = sum(1 for m in model.modules() if type(m).__name__.endswith("Attention"))
    if rope:
        swapped["rope"] = patch_rope(model)
    return swapped
