"""Unit tests of iclr26.models (fast: tiny models only)."""

import pytest
import torch

from iclr26.models import MLP, TinyTransformer, TransformerConfig


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
        (dict(positional="rotary"), "positional"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(n_layers=1.0), "n_layers"),
        (dict(layernorm="no"), "layernorm"),
        (dict(attn_uniform="sum"), "attn_uniform"),
        (dict(init_std=-1.0), "init_std"),
    ],
)
def test_bad_config(kw, field):
    base = dict(vocab_size=11, n_ctx=4, d_model=16, n_heads=2)
    base.update(kw)
    with pytest.raises(ValueError, match=field):
        TransformerConfig(**base)


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
    for bad in ([6], [6, 0, 3], "63", [6, 2.0]):
        with pytest.raises(ValueError, match="sizes"):
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


@pytest.mark.parametrize("extra", [dict(), dict(causal=False, attn_alpha=0.0, attn_uniform="ones"),
                                   dict(attn_alpha=0.5, layernorm=False, n_layers=1)])
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
