"""Unit tests of iclr26.models (fast: tiny models only)."""

import copy
import warnings

import numpy as np
import pytest
import torch

from iclr26.models import MLP, TinyTransformer, TransformerConfig
from iclr26.models.transformer import sdpa


def tiny(**kw) -> TinyTransformer:
    torch.manual_seed(0)
    base = dict(vocab_size=11, n_ctx=4, d_model=16, n_layers=2, n_heads=2, d_mlp=32)
    base.update(kw)
    return TinyTransformer(TransformerConfig(**base))


def tokens(b=3, s=4, v=11):
    return torch.randint(0, v, (b, s), generator=torch.Generator().manual_seed(1))


def test_shapes_and_cache_has_every_hook():
    model = tiny()
    x = tokens()
    logits, cache = model.run_with_cache(x)
    assert logits.shape == (3, 4, 11)
    assert set(cache) == set(model.hook_names)
    assert len(model.hook_names) == 2 + 10 * 2 + 1
    assert cache["blocks.1.attn.pattern"].shape == (3, 2, 4, 4)
    assert cache["blocks.0.attn.scores"].shape == (3, 2, 4, 4)
    assert cache["blocks.0.attn.head_out"].shape == (3, 4, 2, 16)
    assert cache["blocks.0.mlp.pre"].shape == (3, 4, 32)
    assert torch.allclose(cache["blocks.0.attn.head_out"].sum(2), cache["blocks.0.attn_out"], atol=1e-5)
    assert not any(t.requires_grad for t in cache.values())
    torch.testing.assert_close(logits, model(x))


def test_names_filter():
    model = tiny()
    _, cache = model.run_with_cache(tokens(), names=["blocks.0.mlp.post"])
    assert list(cache) == ["blocks.0.mlp.post"]
    with pytest.raises(ValueError, match="unknown hook"):
        model.run_with_cache(tokens(), names=["nope"])


def test_causal_mask():
    model = tiny()
    x = tokens()
    _, cache = model.run_with_cache(x)
    pat = cache["blocks.0.attn.pattern"]
    upper = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    assert torch.all(pat[..., upper] == 0)
    torch.testing.assert_close(pat.sum(-1), torch.ones(3, 2, 4))
    # the first position cannot see the future: changing the last token leaves it unchanged
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % 11
    torch.testing.assert_close(model(x)[:, 0], model(y)[:, 0])
    full = tiny(causal=False)
    _, cache = full.run_with_cache(x)
    assert torch.all(cache["blocks.0.attn.pattern"][..., upper] > 0)


def test_alpha_zero_is_uniform_over_allowed_keys():
    model = tiny(attn_alpha=0.0)
    _, cache = model.run_with_cache(tokens())
    pat = cache["blocks.0.attn.pattern"][0, 0]
    expect = torch.tril(torch.ones(4, 4)) / torch.arange(1, 5).unsqueeze(1)
    torch.testing.assert_close(pat, expect)
    ones = tiny(attn_alpha=0.0, attn_uniform="ones", causal=False)
    _, cache = ones.run_with_cache(tokens())
    torch.testing.assert_close(cache["blocks.0.attn.pattern"], torch.ones(3, 2, 4, 4))


def test_alpha_mixes_linearly():
    x = tokens()
    p = {a: tiny(attn_alpha=a).run_with_cache(x)[1]["blocks.0.attn.pattern"] for a in (0.0, 0.5, 1.0)}
    torch.testing.assert_close(p[0.5], 0.5 * p[0.0] + 0.5 * p[1.0])


def test_hooks_patch_and_restore():
    model = tiny()
    x = tokens()
    clean = model(x)
    seen = []

    def zero(t, name):
        seen.append(name)
        return torch.zeros_like(t)

    with model.hooks({"blocks.0.mlp.post": zero, "blocks.1.mlp.post": zero}):
        _, cache = model.run_with_cache(x)
    assert seen == ["blocks.0.mlp.post", "blocks.1.mlp.post"]
    assert torch.all(cache["blocks.0.mlp.post"] == 0)
    b_out = model.blocks[0].mlp.W_out.bias
    torch.testing.assert_close(cache["blocks.0.resid_post"], cache["blocks.0.resid_mid"] + b_out)
    torch.testing.assert_close(model(x), clean)  # hooks removed on exit
    with model.hooks({"final_resid": lambda t, n: None}):  # None keeps the tensor
        torch.testing.assert_close(model(x), clean)
    with pytest.raises(ValueError, match="unknown hook"):
        with model.hooks({"blocks.9.mlp.post": zero}):
            pass
    with pytest.raises(ValueError, match="shape"):
        with model.hooks({"embed": lambda t, n: t[:, :1]}):
            model(x)


def test_embeds_path_equals_tokens_path():
    model = tiny(layernorm=False, positional="none", attn_alpha=0.3)
    x = tokens()
    torch.testing.assert_close(model(embeds=model.W_E(x)), model(x))
    model = tiny()
    torch.testing.assert_close(model(embeds=model.W_E(x)), model(x))


def test_no_layernorm_and_tied():
    model = tiny(layernorm=False, tie_embeddings=True, unembed_bias=True)
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
    assert model.W_U.weight is model.W_E.weight
    assert model(tokens()).shape == (3, 4, 11)


def test_attn_mask_and_grad():
    model = tiny(causal=False)
    x = tokens()
    mask = torch.eye(4, dtype=torch.bool)
    _, cache = model.run_with_cache(x, attn_mask=mask)
    torch.testing.assert_close(cache["blocks.0.attn.pattern"][0, 0], torch.eye(4))
    loss = model(x).logsumexp(-1).mean()
    loss.backward()
    assert model.W_E.weight.grad is not None


@pytest.mark.parametrize(
    "kw,field",
    [
        (dict(d_model=10, n_heads=4), "d_head"),
        (dict(act="tanh"), "act"),
        (dict(attn_alpha=1.5), "attn_alpha"),
        (dict(attn_alpha=float("nan")), "attn_alpha"),
        (dict(positional="rotary"), "positional"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(d_head=0), "d_head"),
        (dict(attn_uniform="sum"), "attn_uniform"),
        (dict(init_std=-1.0), "init_std"),
        (dict(init_std=0.0), "init_std"),
    ],
)
def test_bad_config_value(kw, field):
    base = dict(vocab_size=11, n_ctx=4, d_model=16, n_heads=2)
    base.update(kw)
    with pytest.raises(ValueError, match=field):
        TransformerConfig(**base)


@pytest.mark.parametrize(
    "kw,field",
    [
        (dict(n_layers=1.0), "n_layers"),
        (dict(vocab_size=True), "vocab_size"),
        (dict(d_head="4"), "d_head"),
        (dict(attn_alpha="1"), "attn_alpha"),
        (dict(attn_alpha=True), "attn_alpha"),
        (dict(layernorm="no"), "layernorm"),
        (dict(causal=1), "causal"),
        (dict(fast_attention=None), "fast_attention"),
        (dict(init_std="big"), "init_std"),
    ],
)
def test_bad_config_type(kw, field):
    base = dict(vocab_size=11, n_ctx=4, d_model=16, n_heads=2)
    base.update(kw)
    with pytest.raises(TypeError, match=field):
        TransformerConfig(**base)


def test_config_accepts_numpy_scalars():
    cfg = TransformerConfig(
        vocab_size=np.int64(11),
        n_ctx=np.int32(4),
        d_model=np.int64(16),
        n_heads=np.int64(2),
        attn_alpha=np.float32(0.5),
        layernorm=np.bool_(False),
        init_std=np.float64(0.1),
    )
    assert type(cfg.vocab_size) is int and type(cfg.d_head) is int and cfg.d_head == 8
    assert type(cfg.attn_alpha) is float and cfg.layernorm is False and cfg.init_std == pytest.approx(0.1)
    assert TinyTransformer(cfg)(tokens(v=11)).shape == (3, 4, 11)


def test_bad_inputs():
    model = tiny()
    with pytest.raises(TypeError):
        TinyTransformer({"vocab_size": 3})
    with pytest.raises(ValueError, match="exactly one"):
        model()
    with pytest.raises(TypeError, match="integer"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="n_ctx"):
        model(torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="embeds"):
        model(embeds=torch.zeros(2, 3, 7))
    with pytest.raises(TypeError, match="callable"):
        with model.hooks({"embed": 3}):
            pass


def test_mlp():
    torch.manual_seed(0)
    mlp = MLP([6, 8, 5, 3], act="gelu")
    x = torch.randn(4, 6)
    out, cache = mlp.run_with_cache(x)
    assert out.shape == (4, 3)
    assert set(cache) == {"layers.0.pre", "layers.0.post", "layers.1.pre", "layers.1.post"}
    torch.testing.assert_close(out, mlp(x))
    for bad in ([6], [6, 0, 3]):
        with pytest.raises(ValueError, match="sizes"):
            MLP(bad)
    for bad in ("63", [6, 2.0]):
        with pytest.raises(TypeError, match="sizes"):
            MLP(bad)
    with pytest.raises(ValueError, match="act"):
        MLP([2, 2], act="sigmoid")
    with pytest.raises(ValueError, match="last dimension"):
        mlp(torch.randn(4, 5))


def test_vmap_over_stacked_models():
    from torch.func import functional_call, stack_module_state, vmap

    models = [tiny(n_layers=1, attn_alpha=0.0, layernorm=False, causal=False) for _ in range(3)]
    params, buffers = stack_module_state(models)
    x = tokens()

    def f(p, b):
        return functional_call(models[0], (p, b), (x,))

    out = vmap(f)(params, buffers)
    torch.testing.assert_close(out[2], models[2](x))


@pytest.mark.parametrize(
    "extra",
    [
        dict(),
        dict(causal=False, attn_alpha=0.0, attn_uniform="ones"),
        dict(attn_alpha=0.5, layernorm=False, n_layers=1),
    ],
)
def test_last_only_equals_the_last_position_of_the_full_forward(extra):
    model = tiny(**extra)
    x = tokens()
    full = model(x)
    last = model(x, last_only=True)
    assert last.shape == (3, 1, 11)
    torch.testing.assert_close(last, full[:, -1:])
    mask = torch.tensor([[True, False, True, True]] * 4)
    torch.testing.assert_close(model(x, attn_mask=mask, last_only=True), model(x, attn_mask=mask)[:, -1:])
    # hooks of the final block see one position; earlier blocks are unchanged
    _, cache = model.run_with_cache(x, last_only=True)
    n = model.cfg.n_layers - 1
    assert cache[f"blocks.{n}.mlp.pre"].shape[1] == 1
    assert cache[f"blocks.{n}.attn.pattern"].shape[-2:] == (1, 4)
    assert cache[f"blocks.{n}.resid_pre"].shape[1] == 4
    # gradients flow to every parameter that influences the last position
    last.sum().backward()
    assert model.W_pos.grad is not None and model.W_pos.grad.abs().sum() > 0


def test_last_only_must_be_a_bool():
    with pytest.raises(TypeError, match="last_only"):
        tiny()(tokens(), last_only=1)


# ------------------------------------------------------------------------------------ the attention fast path
def _pair(dtype=torch.float64, **kw):
    """The same model twice: the fast path (default) and the explicit one."""
    fast = tiny(n_ctx=6, **kw).to(dtype)
    explicit = copy.deepcopy(fast)
    explicit.cfg.fast_attention = False  # the copy's blocks share its config
    assert fast.cfg.fast_attention and explicit.blocks[0].attn.explicit
    return fast, explicit


# rows 1 and 3 have no allowed key; the last row keeps two (so last_only sees a real mix)
HOLES = torch.tensor(
    [[1, 0, 1, 0, 1, 0], [0] * 6, [1, 1, 0, 0, 1, 1], [0] * 6, [1, 1, 1, 1, 1, 1], [0, 1, 0, 0, 0, 1]], dtype=torch.bool
)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)], ids=["f64", "f32"])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("uniform", ["mean", "ones"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("mask", [None, "holes", "batch"])
@pytest.mark.parametrize("last_only", [False, True], ids=["all", "last"])
def test_fast_attention_equals_the_explicit_path(dtype, tol, alpha, uniform, causal, mask, last_only):
    fast, explicit = _pair(dtype, attn_alpha=alpha, attn_uniform=uniform, causal=causal, attn_bias=True)
    x = tokens(b=3, s=6)
    if mask == "holes":
        mask = HOLES
    elif mask == "batch":  # one mask per sequence: the first is all False, the others random
        mask = torch.rand(3, 6, 6, generator=torch.Generator().manual_seed(2)) < 0.5
        mask[0] = False
    outs, grads = [], []
    for model in (fast, explicit):
        out = model(x, attn_mask=mask, last_only=last_only)
        (out * torch.linspace(-1, 1, out.numel(), dtype=dtype).view_as(out)).sum().backward()
        outs.append(out.detach())
        grads.append({n: p.grad for n, p in model.named_parameters()})
    assert torch.isfinite(outs[0]).all()
    torch.testing.assert_close(outs[0], outs[1], rtol=tol, atol=tol)
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        g_fast, g_explicit = grads[0][name], grads[1][name]
        if g_explicit is None:  # α = 0: W_Q and W_K take no part in either path
            assert g_fast is None and alpha == 0.0 and (".W_Q." in name or ".W_K." in name), name
            continue
        assert torch.isfinite(g_fast).all(), name
        torch.testing.assert_close(g_fast, g_explicit, rtol=tol, atol=tol, msg=name)


def test_fast_attention_equals_explicit_for_embeds_and_d_head():
    fast, explicit = _pair(d_head=5, n_heads=3, attn_alpha=0.7)
    e = torch.randn(2, 6, 16, dtype=torch.float64)
    torch.testing.assert_close(fast(embeds=e), explicit(embeds=e), rtol=1e-12, atol=1e-12)


def _count_sdpa(monkeypatch):
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
    return calls


def test_fast_path_is_taken_unless_a_hook_wants_the_attention(monkeypatch):
    model = tiny()  # two layers
    x = tokens()
    calls = _count_sdpa(monkeypatch)
    model(x)
    assert len(calls) == 2 and not model.blocks[0].attn.explicit
    calls.clear()
    _, cache = model.run_with_cache(x, names=["blocks.0.resid_post", "blocks.1.mlp.pre", "blocks.1.attn_out"])
    assert len(calls) == 2  # hooks outside the attention keep the fast path
    for hook in ("scores", "pattern", "head_out"):
        calls.clear()
        _, cache = model.run_with_cache(x, names=[f"blocks.1.attn.{hook}"])
        assert len(calls) == 1 and f"blocks.1.attn.{hook}" in cache  # layer 0 fast, layer 1 explicit
        calls.clear()
        with model.hooks({f"blocks.0.attn.{hook}": lambda t, n: None}):
            assert model.blocks[0].attn.explicit and not model.blocks[1].attn.explicit
            model(x)
        assert len(calls) == 1
    calls.clear()
    handle = model.blocks[0].attn.hook_pattern.register_forward_hook(lambda m, i, o: None)
    model(x)
    handle.remove()
    assert len(calls) == 1  # a plain torch hook on the point counts too
    calls.clear()
    tiny(fast_attention=False)(x)
    tiny(attn_alpha=0.0)(x)  # constant attention: no softmax at all
    assert calls == []


def test_fast_path_patching_the_pattern_still_works():
    model = tiny(causal=False)
    x = tokens()
    eye = torch.eye(4).expand(3, 2, 4, 4)
    with model.hooks({"blocks.0.attn.pattern": lambda t, n: eye, "blocks.1.attn.pattern": lambda t, n: eye}):
        patched = model(x)
    torch.testing.assert_close(model(x, attn_mask=torch.eye(4, dtype=torch.bool)), patched)


def test_sdpa_inside_vmap_equals_the_fused_kernel():
    from torch.func import vmap

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, 2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(5, 5, generator=g) < 0.7
    mask[:, 0] = True
    for kw in (dict(), dict(is_causal=True), dict(attn_mask=mask)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "batching rule not implemented" fallback
            batched = vmap(lambda a, b, c, kw=kw: sdpa(a, b, c, **kw))(q, k, v)
        torch.testing.assert_close(batched, torch.stack([sdpa(q[i], k[i], v[i], **kw) for i in range(3)]))


# ------------------------------------------------------------------------------------------------ prefix and VLM
def test_prefix_lm_mask():
    from iclr26.models import prefix_lm_mask

    m = prefix_lm_mask(5, 2)
    want = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]).bool()
    assert torch.equal(m, want)
    assert torch.equal(prefix_lm_mask(4, 0), torch.ones(4, 4, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="prefix_len"):
        prefix_lm_mask(3, 4)
    with pytest.raises(TypeError, match="seq"):
        prefix_lm_mask(3.0, 1)


@pytest.mark.parametrize("fast", [True, False])
def test_prefix_embeds_equal_one_embeds_sequence_with_a_prefix_mask(fast):
    from iclr26.models import prefix_lm_mask

    model = tiny(n_ctx=7, fast_attention=fast)
    x = tokens(s=4)
    prefix = torch.randn(3, 3, 16, generator=torch.Generator().manual_seed(2))
    out = model(x, prefix_embeds=prefix)
    assert out.shape == (3, 7, 11)
    seq = torch.cat([prefix, model.W_E(x)], 1)
    # the same numbers as the whole sequence through `embeds` in a non-causal copy with the prefix-LM mask
    bidirectional = copy.deepcopy(model)
    bidirectional.cfg.causal = False  # the copy's blocks share the copied cfg
    torch.testing.assert_close(out, bidirectional(embeds=seq, attn_mask=prefix_lm_mask(7, 3)))
    torch.testing.assert_close(out, model(embeds=seq, prefix_len=3))
    # the prefix is bidirectional: its first position depends on the last prefix position; the words stay causal
    moved = prefix.clone()
    moved[:, 2] = torch.randn(3, 16, generator=torch.Generator().manual_seed(4))
    assert not torch.allclose(model(x, prefix_embeds=moved)[:, 0], out[:, 0])
    later = x.clone()
    later[:, -1] = (later[:, -1] + 1) % 11
    torch.testing.assert_close(model(later, prefix_embeds=prefix)[:, :-1], out[:, :-1])
    torch.testing.assert_close(model(x, prefix_embeds=prefix, last_only=True), out[:, -1:])
    # prefix_len=0 or 1 is the plain causal model
    torch.testing.assert_close(model(embeds=seq, prefix_len=1), model(embeds=seq))


def test_prefix_arguments_are_checked():
    model = tiny(n_ctx=6)
    x = tokens(s=3)
    with pytest.raises(TypeError, match="prefix_embeds"):
        model(x, prefix_embeds=torch.zeros(3, 2, 16, dtype=torch.long))
    with pytest.raises(ValueError, match="prefix_embeds"):
        model(x, prefix_embeds=torch.zeros(3, 2, 15))
    with pytest.raises(ValueError, match="prefix_embeds"):
        model(x, prefix_embeds=torch.zeros(2, 2, 16))
    with pytest.raises(ValueError, match="prefix_len"):
        model(x, prefix_len=4)
    with pytest.raises(TypeError, match="prefix_len"):
        model(x, prefix_len="2")
    with pytest.raises(ValueError, match="n_ctx"):
        model(x, prefix_embeds=torch.zeros(3, 4, 16))


def test_tiny_vlm():
    from iclr26.models import TinyVLM

    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=11, n_ctx=8, d_model=16, n_layers=2, n_heads=2, d_mlp=32)
    vlm = TinyVLM(cfg, patch_dim=12, n_patches=4)
    patches, x = torch.randn(3, 4, 12), tokens(s=4)
    out = vlm(patches, x)
    assert out.shape == (3, 8, 11)
    torch.testing.assert_close(out, vlm.lm(x, prefix_embeds=vlm.patch_embed(patches)))
    torch.testing.assert_close(vlm(patches, x, last_only=True), out[:, -1:])
    assert vlm.hook_names == vlm.lm.hook_names
    _, cache = vlm.run_with_cache(patches, x, names=["blocks.1.resid_post"])
    assert cache["blocks.1.resid_post"].shape == (3, 8, 16)
    with pytest.raises(TypeError, match="cfg"):
        TinyVLM({}, 12, 4)
    with pytest.raises(ValueError, match="n_patches"):
        TinyVLM(cfg, 12, 8)
    with pytest.raises(TypeError, match="patch_dim"):
        TinyVLM(cfg, 12.0, 4)
    with pytest.raises(TypeError, match="patches"):
        vlm(patches.long(), x)
    with pytest.raises(ValueError, match="patches"):
        vlm(torch.randn(3, 5, 12), x)


def test_hook_axes_for_patching():
    model = tiny()
    assert model.hook_axes("blocks.0.resid_post") == (1, None)
    assert model.hook_axes("blocks.1.attn.head_out") == (1, 2)
    assert model.hook_axes("blocks.0.attn.pattern") == (2, 1)
    with pytest.raises(ValueError, match="unknown hook"):
        model.hook_axes("blocks.9.resid_post")


@pytest.mark.parametrize("fast", [True, False])
def test_measure_attention_is_invariant_to_permuting_and_duplicating_the_context(fast):
    """One layer, one head, no positions, no causal mask, no LayerNorm (the measure_attention_memory setting): the
    output at the query (the last position) depends on the context only through its empirical measure. With the query
    kept from attending to itself, permuting the context tokens or duplicating every one of them changes nothing."""
    torch.manual_seed(0)
    cfg = TransformerConfig(
        vocab_size=1, n_ctx=1025, d_model=16, n_layers=1, n_heads=1, d_mlp=32,
        positional="none", causal=False, layernorm=False, fast_attention=fast,
    )  # fmt: skip
    model = TinyTransformer(cfg).double()
    g = torch.Generator().manual_seed(3)
    ctx = torch.randn(4, 20, 16, generator=g, dtype=torch.float64)
    query = torch.randn(4, 1, 16, generator=g, dtype=torch.float64)

    def at_query(context):
        s = context.shape[1] + 1
        mask = torch.ones(s, s, dtype=torch.bool)
        mask[-1, -1] = False  # the query reads the context measure only
        return model(embeds=torch.cat([context, query], 1), attn_mask=mask, last_only=True)

    base = at_query(ctx)
    torch.testing.assert_close(at_query(ctx[:, torch.randperm(20, generator=g)]), base, atol=1e-12, rtol=0)
    torch.testing.assert_close(at_query(torch.cat([ctx, ctx], 1)), base, atol=1e-12, rtol=0)
    torch.testing.assert_close(at_query(ctx.repeat_interleave(3, dim=1)), base, atol=1e-12, rtol=0)
    # without the mask the query is a key too; the measure of the whole sequence is what counts then
    full = model(embeds=torch.cat([ctx, query], 1), last_only=True)
    doubled = model(embeds=torch.cat([ctx, query, ctx, query], 1), last_only=True)
    torch.testing.assert_close(doubled, full, atol=1e-12, rtol=0)
    # a test that can fail: changing one context token does change the output
    changed = ctx.clone()
    changed[:, 0] += 1.0
    assert (at_query(changed) - base).abs().max() > 1e-6


def test_no_schedule_is_the_plain_forward_bit_for_bit():
    model = tiny(n_ctx=6)
    x = tokens(3, 6)
    plain = model(x)
    assert torch.equal(model(x, token_callback=lambda layer, h, pos: None), plain)
    assert torch.equal(model(x, position_ids=torch.arange(6)), plain)
    last = model(x, last_only=True)
    assert torch.equal(model(x, last_only=True, token_callback=lambda layer, h, pos: (h, pos)), last)


def test_position_ids_pick_the_rows_of_w_pos():
    model = tiny(n_ctx=8)
    x = tokens(2, 4)
    pos = torch.tensor([4, 5, 6, 7])
    shifted = model(x, position_ids=pos)
    assert not torch.allclose(shifted, model(x))
    model2 = copy.deepcopy(model)
    with torch.no_grad():
        model2.W_pos[:4] = model.W_pos[4:8]
    assert torch.allclose(model2(x), shifted, atol=1e-6)  # the same as a model whose first rows are rows 4-7


def test_token_callback_drops_inserts_and_positions_persist():
    model = tiny(n_ctx=10).eval()
    x = tokens(2, 6)
    seen = {}

    def cb(layer, h, pos):
        seen[layer] = pos.clone()
        if layer == 1:  # keep tokens 0, 2 and the text 4, 5: their position ids travel with them
            idx = torch.tensor([0, 2, 4, 5])
            return h[:, idx], pos[:, idx]
        return None

    out = model(x, token_callback=cb)
    assert out.shape == (2, 4, 11)
    assert seen[0].tolist() == [[0, 1, 2, 3, 4, 5]] * 2
    # dropping before block 1 equals running block 0 in full, then block 1 on the kept tokens alone
    with torch.no_grad():
        h = model.W_E(x) + model.W_pos[:6]
        allowed = model.causal_mask[:6, :6].view(1, 1, 6, 6)
        h = model.blocks[0](h, allowed)[:, [0, 2, 4, 5]]
        h = model.blocks[1](h, model.causal_mask[:4, :4].view(1, 1, 4, 4))
        want = model.W_U(model.ln_final(h))
    assert torch.allclose(out, want, atol=1e-6)

    def insert(layer, h, pos):  # late injection: two tokens enter before block 1 with their own positions
        if layer == 1:
            new = torch.zeros(h.shape[0], 2, h.shape[2])
            p = torch.tensor([[0, 1]]).expand(h.shape[0], 2)
            return torch.cat([new, h], 1), torch.cat([p, pos], 1)
        return None

    assert model(x[:, :4], position_ids=torch.arange(2, 6), token_callback=insert).shape == (2, 6, 11)


def test_token_callback_position_ids_after_a_drop():
    model = tiny(n_ctx=10, n_layers=3).eval()
    x = tokens(2, 6)
    seen = {}

    def cb(layer, h, pos):
        seen[layer] = pos.clone()
        if layer == 1:  # drop tokens 1 and 3 before block 1
            idx = torch.tensor([0, 2, 4, 5])
            return h[:, idx], pos[:, idx]
        return None

    assert model(x, token_callback=cb).shape == (2, 4, 11)
    assert seen[1].tolist() == [[0, 1, 2, 3, 4, 5]] * 2
    assert seen[2].tolist() == [[0, 2, 4, 5]] * 2  # the kept tokens arrive at the next layer with their own ids


def test_token_callback_is_checked():
    model = tiny(n_ctx=6)
    x = tokens(2, 4)
    with pytest.raises(TypeError, match="token_callback"):
        model(x, token_callback=3)
    with pytest.raises(TypeError, match="token_callback"):
        model(x, token_callback=lambda layer, h, pos: h)
    with pytest.raises(ValueError, match="token_callback"):
        model(x, token_callback=lambda layer, h, pos: (h[:, :2], pos))
    with pytest.raises(ValueError, match="token_callback"):
        model(x, token_callback=lambda layer, h, pos: None, attn_mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="position_ids"):
        model(x, position_ids=torch.tensor([0, 1, 2, 9]))
    with pytest.raises(ValueError, match="position_ids"):
        model(x, position_ids=torch.arange(3))
    with pytest.raises(TypeError, match="position_ids"):
        model(x, position_ids=torch.arange(4.0))
