"""tilekit.runtime.modules on the CPU: the swap of a Hugging Face model's modules for ports, on tiny random
Llama, Qwen2 and Mistral configs whose parameters are fake CUDA tensors (FakeTensorMode: no GPU, no
memory), run through prefill and a cached decode step: what was swapped, which port each call
reached (attention through the port where the mask is causal alone, transformers' SDPA where it pads),
and the output shapes. Numbers are the GPU's to check (make model)."""

import collections

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

transformers = pytest.importorskip("transformers", reason="transformers is in env/requirements.txt: run make setup")

from tilekit.runtime import modules  # noqa: E402
from tilekit.testing.model import relative_l2  # noqa: E402

TINY = dict(
    vocab_size=128,
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 8}),
}


@pytest.fixture
def ports_called(monkeypatch):
    """Counts each port's calls (and attention's window), and transformers' SDPA fallbacks."""
    from transformers.integrations import sdpa_attention

    calls = collections.Counter()
    entry, sdpa = modules._entry, sdpa_attention.sdpa_attention_forward

    def counting_entry(kernel):
        run = entry(kernel)

        def call(*args, **kwargs):
            calls[kernel] += 1
            if kernel == "attention":
                calls[f"window={kwargs.get('window')}"] += 1
            return run(*args, **kwargs)

        return call

    def counting_sdpa(*args, **kwargs):
        calls["sdpa"] += 1
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(modules, "_entry", counting_entry)
    monkeypatch.setattr(sdpa_attention, "sdpa_attention_forward", counting_sdpa)
    return calls


def fake_model(family: str):
    """A tiny random model of the family, bf16, its parameters fake CUDA tensors, and its mode."""
    config, model, extra = (getattr(transformers, n) if isinstance(n, str) else n for n in FAMILIES[family])
    mode = FakeTensorMode()
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with mode, torch.device("cuda"):
            return model(config(**TINY, **extra)), mode
    finally:
        torch.set_default_dtype(default)


@pytest.mark.parametrize("family", FAMILIES)
def test_patch_swaps_norms_mlps_linears_and_attention(family):
    model, _ = fake_model(family)
    swapped = modules.patch(model)
    assert swapped == {"rms_norm": 5, "mlp": 2, "linear": 9, "attention": 2, "rope": 1}
    assert model.config._attn_implementation == modules.ATTENTION
    kinds = collections.Counter(type(m).__name__ for m in model.modules())
    assert (kinds["RMSNorm"], kinds["GatedMLP"], kinds["Linear"]) == (5, 2, 9 + 2 * 2)  # a GatedMLP holds two
    assert not any(type(m) is torch.nn.Linear for m in model.modules())


@pytest.mark.parametrize("family", FAMILIES)
def test_a_patched_model_runs_prefill_and_decode_on_ports(family, ports_called):
    model, mode = fake_model(family)
    modules.patch(model)
    window = FAMILIES[family][2].get("sliding_window")
    with mode, torch.device("cuda"):
        ids = torch.randint(0, TINY["vocab_size"], (2, 16))
        prefill = model(ids, use_cache=True)
        step = model(ids[:, :1], past_key_values=prefill.past_key_values, use_cache=True)
    assert (tuple(prefill.logits.shape), tuple(step.logits.shape)) == ((2, 16, 128), (2, 1, 128))
    layers = TINY["num_hidden_layers"]
    # per forward: 2 norms a layer + the last, q k v o + gate_up, down a layer + lm_head, one attention
    assert dict(ports_called) == {
        "rms_norm": 2 * (2 * layers + 1),
        "matmul": 2 * (6 * layers + 1),
        "silu_and_mul": 2 * layers,
        "attention": 2 * layers,
        f"window={window}": 2 * layers,
        "rope": 2 * layers,
    }


@pytest.mark.parametrize("family", FAMILIES)
def test_a_mask_that_cannot_be_read_while_tracing_takes_transformers_sdpa(family, ports_called):
    """A fake (traced) padding mask has no values to read: hf_mask cannot tell it is all ones."""
    model, mode = fake_model(family)
    modules.patch(model)
    with mode, torch.device("cuda"):
        ids = torch.randint(0, TINY["vocab_size"], (2, 16))
        model(ids, attention_mask=torch.ones(2, 16, dtype=torch.long), use_cache=False)
    assert ports_called["sdpa"] == TINY["num_hidden_layers"] and ports_called["attention"] == 0


def test_hf_mask_is_none_exactly_where_the_port_computes_the_mask():
    """None (the port, causal from the last key) for causal and sliding-window masks without padding
    whose keys end with the queries; SDPA's mask for padding, a static cache's unfilled tail, a
    chunked mask."""
    from transformers import masking_utils as mu

    ones, padded = torch.ones(2, 16, dtype=torch.bool), torch.ones(2, 16, dtype=torch.bool)
    padded[0, :3] = False
    window = mu.sliding_window_causal_mask_function(4)
    chunked = mu.chunked_causal_mask_function(4, torch.zeros(2, dtype=torch.long))
    assert modules.hf_mask(2, 16, 16) is None and modules.hf_mask(2, 16, 16, attention_mask=ones) is None
    assert modules.hf_mask(2, 1, 16, q_offset=15, attention_mask=ones) is None  # a decode step
    assert modules.hf_mask(2, 16, 16, mask_function=window, local_size=4) is None
    assert modules.hf_mask(2, 16, 16, attention_mask=padded).shape == (2, 1, 16, 16)
    static = torch.ones(2, 32, dtype=torch.bool)
    static[:, 16:] = False  # a static cache of 32 slots, 16 filled: the keys do not end with the query
    assert modules.hf_mask(2, 1, 32, q_offset=15, attention_mask=static).shape == (2, 1, 1, 32)
    assert modules.hf_mask(2, 16, 32, attention_mask=static) is not None  # its prefill: SDPA would skip
    assert modules.hf_mask(2, 16, 16, mask_function=chunked, local_size=4) is not None
    assert modules.hf_mask(2, 16, 16, allow_is_causal_skip=False) is not None
    # a static cache's offsets are tensors: not read (no sync, no data-dependent branch), SDPA's mask
    assert modules.hf_mask(2, 1, 16, q_offset=torch.tensor(15), attention_mask=ones).shape == (2, 1, 1, 16)


def test_the_fused_gate_up_weight_is_gate_then_up_and_a_tied_head_stays_tied():
    torch.manual_seed(0)
    gate, up, down = torch.nn.Linear(8, 16, bias=False), torch.nn.Linear(8, 16, bias=False), torch.nn.Linear(16, 8)
    mlp = modules.GatedMLP.of(gate, up, down)
    assert torch.equal(mlp.gate_up.weight, torch.cat((gate.weight, up.weight))) and mlp.down.weight is down.weight
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY, tie_word_embeddings=True))
    modules.patch(model, attention=False)
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_patch_refuses_a_model_of_another_family():
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=64))
    with pytest.raises(ValueError, match="GPT2LMHeadModel is not one of LlamaForCausalLM"):
        modules.patch(model)


def test_the_sliding_window_mask_is_told_from_other_masks():
    from transformers import masking_utils as mu

    assert modules._sliding_window_causal(mu.sliding_window_causal_mask_function(8))
    assert not modules._sliding_window_causal(mu.causal_mask_function)
    assert not modules._sliding_window_causal(mu.chunked_causal_mask_function(8, torch.zeros(1, dtype=torch.long)))
    assert not modules._sliding_window_causal(mu.and_masks(mu.causal_mask_function, mu.causal_mask_function))


# -- on a GPU (pytest tests/kit/test_modules.py on the GPU host; CI skips them) --------------------


@pytest.fixture
def gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here (torch.cuda.is_available() is False): run on a GPU host, from the bundle")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_patched_model_gives_the_originals_logits_on_the_gpu(gpu, family):
    """bf16 logits of the patched model (prefill, then a cached decode step) against the unpatched
    model in float32: within 3e-2 relative L2, and no worse than twice the unpatched bf16 model's."""
    import copy

    config, cls, extra = (getattr(transformers, n) if isinstance(n, str) else n for n in FAMILIES[family])
    torch.manual_seed(0)
    original = cls(config(**TINY, **extra)).to("cuda").eval()
    reference, ported = original, copy.deepcopy(original).to(torch.bfloat16)
    plain = copy.deepcopy(original).to(torch.bfloat16)
    modules.patch(ported)
    ids = torch.randint(0, TINY["vocab_size"], (2, 33), device="cuda")
    with torch.no_grad():
        for name, call in (
            ("prefill", lambda m: m(ids[:, :32]).logits),
            ("decode", lambda m: m(ids[:, 32:], past_key_values=m(ids[:, :32], use_cache=True).past_key_values).logits),
        ):
            got = call(ported).float()
            with modules.transformers_rope():  # the unpatched models rotate as transformers does
                want, bf16 = call(reference).float(), call(plain).float()
            err, base = relative_l2(got, want), relative_l2(bf16, want)
            assert err <= max(3e-2, 2 * base), f"{family} {name}: ports {err:.2e}, transformers bf16 {base:.2e}"


def test_a_patched_model_compiles_and_its_ports_break_no_graph(gpu):
    """torch.compile of the patched tiny Llama's forward: one graph, no break (the ports are ops,
    looked up without an import); the compiled logits are the eager ones."""
    import torch._dynamo

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY)).to("cuda", torch.bfloat16).eval()
    modules.patch(model)
    ids = torch.randint(0, TINY["vocab_size"], (2, 32), device="cuda")

    def logits(ids):
        return model(ids, use_cache=False).logits

    with torch.no_grad():
        eager = logits(ids)
        torch._dynamo.reset()
        explained = torch._dynamo.explain(logits)(ids)
        assert explained.graph_break_count == 0, explained.break_reasons
        compiled = torch.compile(logits)(ids)
    assert torch.allclose(compiled.float(), eager.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_that_falls_back_to_sdpa_computes_transformers_mask(family):
    """Where the port does not take the call (here: CPU tensors, a head dim of 32) the patched
    attention gives the stock model's logits, prefill and a prefill after a cached prefix included:
    hf_mask's None is spelled out for SDPA (aligned to the last key, with the window)."""
    import copy

    config, cls, extra = (getattr(transformers, n) if isinstance(n, str) else n for n in FAMILIES[family])
    torch.manual_seed(0)
    stock = cls(config(**TINY | {"num_attention_heads": 8}, **extra | ({"sliding_window": 4} if extra else {}))).eval()
    patched = copy.deepcopy(stock)
    modules.patch(patched, rms_norm=False, mlp=False, linear=False)
    ids = torch.randint(0, TINY["vocab_size"], (2, 12))
    with torch.no_grad():
        for model_ in (stock, patched):
            model_.outputs = [
                model_(ids).logits,
                model_(ids[:, 6:], past_key_values=model_(ids[:, :6], use_cache=True).past_key_values).logits,
            ]
    for want, got in zip(stock.outputs, patched.outputs):
        assert torch.allclose(got, want, atol=1e-5), float((got - want).abs().max())


def test_the_modules_compile_in_one_graph():
    """torch.compile's tracer through each module's forward (fake CUDA tensors): one graph, no
    break; the ports are ops in it."""
    import torch._dynamo

    with FakeTensorMode(), torch.device("cuda"):
        bf16 = torch.bfloat16
        cases = [
            (modules.RMSNorm(256, dtype=bf16), (torch.empty(4, 256, dtype=bf16),)),
            (modules.Linear(256, 512, bias=True, dtype=bf16), (torch.empty(2, 4, 256, dtype=bf16),)),
            (modules.GatedMLP(256, 512, dtype=bf16), (torch.empty(4, 256, dtype=bf16),)),
            (modules.Attention(window=16), tuple(torch.empty(1, 32, h, 64, dtype=bf16) for h in (8, 2, 2))),
        ]
    for module, args in cases:
        torch._dynamo.reset()
        explained = torch._dynamo.explain(module)(*args)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), (
            type(module).__name__,
            explained.break_reasons,
        )


def test_apply_rotary_pos_emb_falls_back_to_transformers_where_the_port_does_not_serve():
    """CPU tensors, or an unsqueeze_dim other than 1 (by name or by position): transformers' own
    function, with the arguments as given."""
    from transformers.models.llama import modeling_llama

    original = modules._transformers_rope()
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 5, 8, generator=g), torch.randn(2, 2, 5, 8, generator=g)
    cos, sin = torch.randn(2, 5, 8, generator=g), torch.randn(2, 5, 8, generator=g)
    for args, kwargs in (((), {}), ((1,), {}), ((), {"unsqueeze_dim": 1})):
        got = modules.apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs)
        want = original(q, k, cos, sin, *args, **kwargs)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    qt, kt = q.transpose(1, 2), k.transpose(1, 2)  # (b, s, h, d): unsqueeze_dim 2
    got = modules.apply_rotary_pos_emb(qt, kt, cos, sin, unsqueeze_dim=2)
    assert all(torch.equal(a, b) for a, b in zip(got, original(qt, kt, cos, sin, unsqueeze_dim=2)))
    assert modeling_llama.apply_rotary_pos_emb in (original, modules.apply_rotary_pos_emb)
