"""Unit tests of iclr26.hooks: HookPoint and the HookedModule API every model shares."""

import numpy as np
import pytest
import torch
from torch import nn

from iclr26.hooks import HookedModule, HookPoint
from iclr26.models import MLP, TinyDiT, TinyTransformer, TransformerConfig


class Toy(HookedModule):
    """x -> 2x -> 2x + 1, with hook points "double" and "plus" (registered in reverse order on purpose)."""

    def __init__(self, ordered: bool = False):
        super().__init__()
        self.hook_plus = HookPoint("plus")
        self.inner = nn.Module()
        self.inner.hook_double = HookPoint("double")
        self.ordered = ordered

    def _hook_order(self):
        return ["double", "plus"] if self.ordered else super()._hook_order()

    def forward(self, x, *, add=1.0):
        return self.hook_plus(self.inner.hook_double(2 * x) + add)


def test_hook_point_is_an_identity_with_a_name():
    p = HookPoint("a.b")
    x = torch.randn(3)
    assert p(x) is x and p.name == "a.b" and "a.b" in repr(p)
    assert not p.active
    with pytest.raises(TypeError, match="name"):
        HookPoint(3)
    with pytest.raises(ValueError, match="name"):
        HookPoint("")


def test_hook_names_discovered_at_any_depth():
    assert Toy().hook_names == ["plus", "double"]  # registration order by default
    assert Toy(ordered=True).hook_names == ["double", "plus"]  # a subclass can give the forward order
    toy = Toy()
    assert toy.hook_point("double") is toy.inner.hook_double
    with pytest.raises(ValueError, match=r"unknown hook name\(s\) \['nope'\]; valid names are \['plus', 'double'\]"):
        toy.hook_point("nope")


def test_duplicate_names_are_refused():
    class Twice(HookedModule):
        def __init__(self):
            super().__init__()
            self.a, self.b = HookPoint("x"), HookPoint("x")

    with pytest.raises(ValueError, match="two hook points share the name 'x'"):
        _ = Twice().hook_names


def test_run_with_cache_passes_arguments_and_caches_detached_tensors():
    toy = Toy()
    x = torch.ones(2, requires_grad=True)
    out, cache = toy.run_with_cache(x, add=3.0)
    torch.testing.assert_close(out, torch.full((2,), 5.0))
    assert set(cache) == {"plus", "double"}
    torch.testing.assert_close(cache["double"], torch.full((2,), 2.0))
    assert not cache["plus"].requires_grad and out.requires_grad
    _, cache = toy.run_with_cache(x, names=["double"])
    assert list(cache) == ["double"]
    assert not toy.is_hooked("double")  # the cache is detached again afterwards


def test_run_with_cache_bad_names():
    toy = Toy()
    x = torch.ones(2)
    with pytest.raises(TypeError, match="single string"):
        toy.run_with_cache(x, names="double")
    with pytest.raises(TypeError, match="names"):
        toy.run_with_cache(x, names=3)
    with pytest.raises(TypeError, match="hook names must be str"):
        toy.run_with_cache(x, names=[1])
    with pytest.raises(ValueError, match="unknown hook"):
        toy.run_with_cache(x, names=["double", "triple"])


def test_run_with_cache_restores_state_after_an_error():
    toy = Toy()
    with pytest.raises(TypeError):
        toy.run_with_cache(torch.ones(2), unknown_kwarg=1)
    assert not toy.is_hooked("double") and not toy.is_hooked("plus")


def test_nested_run_with_cache_keeps_the_outer_cache():
    toy = Toy()
    inner = {}

    def probe(t, name):  # a hook that itself runs the model with a cache (once)
        if "started" not in inner:
            inner["started"] = True
            inner.update(toy.run_with_cache(torch.zeros(1), names=["plus"])[1])
        return None

    with toy.hooks({"double": probe}):
        _, outer = toy.run_with_cache(torch.ones(1), names=["double", "plus"])
    torch.testing.assert_close(inner["plus"], torch.ones(1))  # 2·0 + 1
    torch.testing.assert_close(outer["plus"], torch.full((1,), 3.0))  # the outer cache is back after the inner run
    assert not toy.is_hooked("plus")


def test_hooks_patch_nest_and_restore():
    toy = Toy()
    x = torch.ones(2)
    seen = []

    def zero(t, name):
        seen.append(name)
        return torch.zeros_like(t)

    with toy.hooks({"double": zero}) as m:
        assert m is toy and toy.is_hooked("double") and not toy.is_hooked("plus")
        torch.testing.assert_close(toy(x), torch.ones(2))
        with toy.hooks({"double": lambda t, n: t + 10}):
            torch.testing.assert_close(toy(x), torch.full((2,), 13.0))
        torch.testing.assert_close(toy(x), torch.ones(2))  # the outer hook is back
    assert seen == ["double", "double"]
    assert not toy.is_hooked("double")
    torch.testing.assert_close(toy(x), torch.full((2,), 3.0))
    with toy.hooks({"double": lambda t, n: None}):  # None keeps the value: a read-only hook
        torch.testing.assert_close(toy(x), torch.full((2,), 3.0))


def test_hooks_bad_input():
    toy = Toy()
    with pytest.raises(TypeError, match="fns must be a dict"):
        with toy.hooks([("double", print)]):
            pass
    with pytest.raises(TypeError, match="callable"):
        with toy.hooks({"double": 3}):
            pass
    with pytest.raises(ValueError, match="unknown hook"):
        with toy.hooks({"triple": print}):
            pass
    with pytest.raises(ValueError, match="shape"):
        with toy.hooks({"double": lambda t, n: t[:1]}):
            toy(torch.ones(2))
    with pytest.raises(ValueError, match="shape"):
        with toy.hooks({"double": lambda t, n: 3.0}):
            toy(torch.ones(2))
    assert not toy.is_hooked("double")  # restored after the error


def test_is_hooked_sees_torch_forward_hooks():
    toy = Toy()
    handle = toy.hook_point("plus").register_forward_hook(lambda mod, inp, out: None)
    assert toy.is_hooked("plus")
    handle.remove()
    assert not toy.is_hooked("plus")
    with pytest.raises(ValueError, match="unknown hook"):
        toy.is_hooked("nope")


def test_every_model_is_a_hooked_module():
    cfg = TransformerConfig(vocab_size=5, n_ctx=3, d_model=8, n_heads=2, d_mlp=8)
    for model in (TinyTransformer(cfg), MLP([3, 4, 2]), TinyDiT(img_size=4, patch=2, dim=8, depth=1, heads=2)):
        assert isinstance(model, HookedModule)
        assert sorted(model.hook_names) == sorted(model._hook_map())  # the forward order lists every point once


def test_mlp_hooks_and_cache():
    torch.manual_seed(0)
    mlp = MLP([6, 8, 5, 3], act="gelu")
    x = torch.randn(4, 6)
    assert mlp.hook_names == ["layers.0.pre", "layers.0.post", "layers.1.pre", "layers.1.post"]
    out, cache = mlp.run_with_cache(x)
    torch.testing.assert_close(cache["layers.0.pre"], mlp.layers[0](x))
    torch.testing.assert_close(cache["layers.0.post"], torch.nn.functional.gelu(mlp.layers[0](x)))
    with mlp.hooks({"layers.1.post": lambda t, n: torch.zeros_like(t)}):
        ablated = mlp(x)
    torch.testing.assert_close(ablated, mlp.layers[2].bias.expand(4, 3))
    torch.testing.assert_close(mlp(x), out)
    # the state dict is unchanged by the hook points: same keys as a plain stack of Linear layers
    assert list(mlp.state_dict()) == [f"layers.{i}.{w}" for i in range(3) for w in ("weight", "bias")]


def test_mlp_arguments():
    assert MLP([np.int64(3), 4, 2]).sizes == [3, 4, 2]
    for bad in ("63", 6, [6, 2.0], [6, True]):
        with pytest.raises(TypeError, match="sizes"):
            MLP(bad)
    for bad in ([6], [6, 0, 3]):
        with pytest.raises(ValueError, match="sizes"):
            MLP(bad)
    with pytest.raises(ValueError, match="act"):
        MLP([2, 2], act="sigmoid")
    with pytest.raises(TypeError, match="bias"):
        MLP([2, 2], bias=1)
    mlp = MLP([2, 3])
    with pytest.raises(TypeError, match="x"):
        mlp(torch.ones(4, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="last dimension"):
        mlp(torch.ones(4, 5))


# ------------------------------------------------------------------------------------------------ activation patching
def _pair():
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=11, n_ctx=5, d_model=16, n_layers=2, n_heads=2, d_mlp=32))
    gen = torch.Generator().manual_seed(3)
    return model, torch.randint(0, 11, (4, 5), generator=gen), torch.randint(0, 11, (4, 5), generator=gen)


def test_patching_every_position_gives_the_source_run():
    model, clean, cf = _pair()
    name = "blocks.0.resid_post"
    cf_out, cf_cache = model.run_with_cache(cf, names=[name])
    out, cache = model.run_with_cache(clean, names=[name], patch={name: cf_cache[name]})
    # from block 1 on the clean run sees the counterfactual's residual everywhere: the token embeddings are gone
    torch.testing.assert_close(out, cf_out)
    torch.testing.assert_close(cache[name], cf_cache[name])


def test_patching_chosen_positions_only():
    model, clean, cf = _pair()
    name = "blocks.1.resid_post"  # the last block: a position only changes its own output
    clean_out = model(clean)
    cf_out, cf_cache = model.run_with_cache(cf, names=[name])
    out, _ = model.run_with_cache(clean, names=[], patch={name: cf_cache[name]}, positions=[-1, 1])
    torch.testing.assert_close(out[:, [1, 4]], cf_out[:, [1, 4]])
    torch.testing.assert_close(out[:, [0, 2, 3]], clean_out[:, [0, 2, 3]])
    out2, _ = model.run_with_cache(clean, names=[], patch={name: cf_cache[name]}, positions=4)
    torch.testing.assert_close(out2[:, 4], cf_out[:, 4])


def test_patching_one_head_and_the_fast_path():
    model, clean, cf = _pair()
    name = "blocks.0.attn.head_out"
    _, cf_cache = model.run_with_cache(cf, names=[name])
    _, clean_cache = model.run_with_cache(clean, names=[name])
    _, cache = model.run_with_cache(clean, names=[name], patch={name: cf_cache[name]}, positions=[-1], heads=[1])
    got, want = cache[name], clean_cache[name].clone()
    want[:, -1, 1] = cf_cache[name][:, -1, 1]
    torch.testing.assert_close(got, want)
    # patching every head of a layer equals patching its attn_out (the explicit path gives the same numbers)
    _, cf_attn = model.run_with_cache(cf, names=["blocks.0.attn_out"])
    a, _ = model.run_with_cache(clean, names=[], patch={name: cf_cache[name]})
    b, _ = model.run_with_cache(clean, names=[], patch={"blocks.0.attn_out": cf_attn["blocks.0.attn_out"]})
    torch.testing.assert_close(a, b)
    # nothing stays attached: the next plain pass takes the fast path again
    assert not model.is_hooked(name)


def test_patch_hooks_compose_with_hooks():
    model, clean, cf = _pair()
    name = "blocks.0.resid_mid"
    _, cf_cache = model.run_with_cache(cf, names=[name])
    with model.hooks(model.patch_hooks({name: cf_cache[name]}, positions=[0])):
        a = model(clean)
    b, _ = model.run_with_cache(clean, names=[], patch={name: cf_cache[name]}, positions=[0])
    torch.testing.assert_close(a, b)


def test_patching_bad_input():
    model, clean, cf = _pair()
    name = "blocks.0.resid_post"
    _, cf_cache = model.run_with_cache(cf, names=[name])
    src = {name: cf_cache[name]}
    with pytest.raises(TypeError, match="patch"):
        model.run_with_cache(clean, patch=[cf_cache[name]])
    with pytest.raises(ValueError, match="patch: unknown hook"):
        model.run_with_cache(clean, patch={"nope": cf_cache[name]})
    with pytest.raises(TypeError, match="patch\\['blocks.0.resid_post'\\]"):
        model.run_with_cache(clean, patch={name: cf_cache[name].numpy()})
    with pytest.raises(ValueError, match="shape"):
        model.run_with_cache(clean, patch={name: cf_cache[name][:, :3]})
    with pytest.raises(ValueError, match="positions"):
        model.run_with_cache(clean, patch=src, positions=[7])
    with pytest.raises(ValueError, match="positions"):
        model.run_with_cache(clean, patch=src, positions=[])
    with pytest.raises(TypeError, match="positions"):
        model.run_with_cache(clean, patch=src, positions=[1.5])
    with pytest.raises(TypeError, match="positions"):
        model.run_with_cache(clean, patch=src, positions="1")
    with pytest.raises(ValueError, match="heads"):
        model.run_with_cache(clean, patch=src, heads=[0])  # resid_post has no head axis
    with pytest.raises(ValueError, match="heads"):
        hname = "blocks.0.attn.head_out"
        _, c = model.run_with_cache(cf, names=[hname])
        model.run_with_cache(clean, patch={hname: c[hname]}, heads=[2])
    with pytest.raises(ValueError, match="pass patch"):
        model.run_with_cache(clean, positions=[0])
    assert not model.is_hooked(name)  # errors leave no hook behind


# ------------------------------------------------------------------------------------------------ one vocabulary
def _hooked():
    from iclr26.models import TinyTransformer, TransformerConfig

    torch.manual_seed(0)
    return TinyTransformer(TransformerConfig(vocab_size=16, n_ctx=8, d_model=8, n_heads=2, d_mlp=16)).eval()


def test_capture_reads_hook_points_and_submodules_alike():
    from iclr26.hooks import capture

    model, x = _hooked(), torch.randint(0, 16, (2, 6), generator=torch.Generator().manual_seed(1))
    _, cache = model.run_with_cache(x, names=["blocks.0.resid_post"])
    with capture(model, ["blocks.0.resid_post", "blocks.0"]) as got:  # a hook point and a submodule (the block)
        model(x)
    assert torch.equal(got["blocks.0.resid_post"], cache["blocks.0.resid_post"])
    assert torch.equal(got["blocks.0"], cache["blocks.0.resid_post"])  # the block returns its residual stream
    assert not model.is_hooked("blocks.0.resid_post")  # removed on exit
    with pytest.raises(ValueError, match="neither a hook point nor a submodule"):
        with capture(model, "blocks.0.resid_psot"):
            pass


def test_steer_and_patch_on_hook_points_match_the_models_own_api():
    from iclr26.hooks import capture, patch, steer

    model, g = _hooked(), torch.Generator().manual_seed(2)
    x, x_cf = torch.randint(0, 16, (2, 6), generator=g), torch.randint(0, 16, (2, 6), generator=g)
    v = torch.randn(8, generator=g)
    with model.hooks({"blocks.0.resid_post": lambda t, n: t + 2.0 * v}):
        expected = model(x)
    with steer(model, "blocks.0.resid_post", v, scale=2.0):
        assert torch.allclose(model(x), expected)
        with capture(model, "blocks.0.resid_post") as got:  # capture sees the steered value
            model(x)
    _, clean = model.run_with_cache(x, names=["blocks.0.resid_post"])
    assert torch.allclose(got["blocks.0.resid_post"], clean["blocks.0.resid_post"] + 2.0 * v)
    with model.hooks({"blocks.0.resid_post": lambda t, n: t * 0}):  # steering adds to what a hook already returns
        with steer(model, "blocks.0.resid_post", v):
            _, both = model.run_with_cache(x, names=["blocks.0.resid_post"])
    assert torch.allclose(both["blocks.0.resid_post"], v.expand(2, 6, 8))
    _, cf = model.run_with_cache(x_cf, names=["blocks.0.resid_post"])
    want, _ = model.run_with_cache(x, patch=cf, positions=[-1])
    with patch(model, {"blocks.0.resid_post": cf["blocks.0.resid_post"]}, positions=[-1]):
        assert torch.allclose(model(x), want)
    with patch(model, {"blocks.0": cf["blocks.0.resid_post"]}, positions=[-1]):  # the same through the submodule
        assert torch.allclose(model(x), want)
    with pytest.raises(ValueError, match="heads"):
        with patch(model, {"blocks.0": cf["blocks.0.resid_post"]}, heads=[0]):
            pass


def test_steer_layers_adds_one_vector_per_layer_on_both_model_kinds(tmp_path):
    from transformers import AutoModelForCausalLM

    from iclr26.hf import write_tiny_model
    from iclr26.hooks import capture, steer, steer_layers

    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=11, n_ctx=6, d_model=8, n_layers=2, n_heads=2, d_mlp=16))
    x = torch.randint(0, 11, (3, 6))
    names = ["blocks.0.resid_post", "blocks.1.resid_post"]
    vs = {n: torch.randn(8) for n in names}
    with torch.no_grad():
        base = model(x)
        with steer_layers(model, vs, scale=0.0):  # c = 0 is the identity
            assert torch.equal(model(x), base)
        with steer_layers(model, {names[0]: vs[names[0]]}, scale=2.0):
            one = model(x)
        with steer(model, names[0], vs[names[0]], scale=2.0):
            assert torch.allclose(model(x), one)
        with steer_layers(model, vs, scale=2.0):
            both = model(x)
        with steer(model, names[0], vs[names[0]], scale=2.0), steer(model, names[1], vs[names[1]], scale=2.0):
            assert torch.allclose(model(x), both)
        assert not torch.allclose(both, base)
        assert torch.equal(model(x), base)  # hooks removed on exit
    lm = AutoModelForCausalLM.from_pretrained(write_tiny_model("llama", tmp_path / "llama")).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    d = lm.config.hidden_size
    layer_vs = {"model.layers.0": torch.randn(d), "model.layers.1": torch.randn(d)}
    with torch.no_grad():
        with capture(lm, list(layer_vs)) as plain:
            lm(ids)
        plain = {k: v.clone() for k, v in plain.items()}
        with steer_layers(lm, layer_vs, scale=1.5), capture(lm, "model.layers.0") as st:
            lm(ids)
        assert torch.allclose(
            st["model.layers.0"], plain["model.layers.0"] + 1.5 * layer_vs["model.layers.0"], atol=1e-5
        )
        with steer_layers(lm, layer_vs, scale=1.5, positions=[3]), capture(lm, "model.layers.0") as st:
            lm(ids)
        d0 = st["model.layers.0"] - plain["model.layers.0"]
        assert torch.allclose(d0[0, 3], 1.5 * layer_vs["model.layers.0"], atol=1e-5) and torch.allclose(
            d0[0, :3], torch.zeros(3, d)
        )
        with steer_layers(model, vs, scale=2.0, positions=range(2)), capture(model, names[0]) as first:
            model(x)
        with capture(model, names[0]) as plain0:
            model(x)
        diff = first[names[0]] - plain0[names[0]]
        assert torch.allclose(diff[:, :2], 2.0 * vs[names[0]].expand(3, 2, 8), atol=1e-5)
        assert torch.equal(diff[:, 2:], torch.zeros(3, 4, 8))
        with steer_layers(model, vs, scale=2.0, positions=[0, 99]):  # beyond the length: skipped
            model(x)
    with pytest.raises(TypeError, match="vectors"), steer_layers(model, {}):
        pass
    with pytest.raises(ValueError, match="vectors key"), steer_layers(model, {"no.such": torch.ones(8)}):
        pass
    with pytest.raises(ValueError, match="width"), steer_layers(model, {names[0]: torch.ones(5)}), torch.no_grad():
        model(x)
    with pytest.raises(ValueError, match="positions"), steer_layers(model, vs, positions=[-1]):
        pass
    with pytest.raises(ValueError, match="one vector"), steer_layers(model, {names[0]: torch.ones(2, 8)}):
        pass


def test_capture_reads_what_enters_a_site():
    from iclr26.hooks import capture

    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=16, n_ctx=8, d_model=8, n_layers=2, n_heads=2, d_mlp=16))
    x = torch.randint(0, 16, (2, 6), generator=torch.Generator().manual_seed(3))
    _, cache = model.run_with_cache(x, names=["blocks.0.resid_post"])
    with capture(model, ["blocks.1", "blocks.0.resid_post"], read="input") as got:
        model(x)
    assert torch.equal(got["blocks.1"], cache["blocks.0.resid_post"])  # block 1 receives block 0's residual
    assert torch.equal(got["blocks.0.resid_post"], cache["blocks.0.resid_post"])  # a point passes its value through
    with model.hooks({"blocks.0.resid_post": lambda t, n: 0 * t}):  # a point's input is its value before the hook
        with (
            capture(model, "blocks.0.resid_post", read="input") as before,
            capture(model, "blocks.1", read="input") as after,
        ):
            model(x)
    assert torch.equal(before["blocks.0.resid_post"], cache["blocks.0.resid_post"])
    assert torch.equal(after["blocks.1"], torch.zeros_like(after["blocks.1"]))
    assert not model.is_hooked("blocks.0.resid_post")
    with pytest.raises(ValueError, match="read"), capture(model, "blocks.0", read="inputs"):
        pass


def test_forward_pre_hooks_read_and_rewrite_keyword_inputs(tmp_path):
    from transformers import AutoModelForCausalLM

    from iclr26.hf import write_tiny_model
    from iclr26.hooks import capture, forward_pre_hooks

    lm = AutoModelForCausalLM.from_pretrained(write_tiny_model("llama", tmp_path / "llama")).eval()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    seen = {}

    def look(module, args, kwargs):  # transformers passes a decoder layer's inputs by keyword
        seen["keys"] = set(kwargs)
        seen["pos"] = kwargs["position_ids"].clone()

    with torch.no_grad():
        plain = lm(ids).logits
        with capture(lm, "model.layers.1", read="input") as entering, capture(lm, "model.layers.0") as leaving:
            lm(ids)
        assert torch.equal(entering["model.layers.1"], leaving["model.layers.0"])  # a keyword input is read too
        with forward_pre_hooks(lm, {"model.layers.1": look}):
            lm(ids)
        assert {"position_ids", "position_embeddings"} <= seen["keys"] and seen["pos"].tolist() == [[0, 1, 2, 3, 4]]

        def drop_first(module, args, kwargs):  # token surgery: layer 0 never sees the first token's embedding
            x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            x = torch.cat([torch.zeros_like(x[:, :1]), x[:, 1:]], 1)
            if "hidden_states" in kwargs:
                return args, {**kwargs, "hidden_states": x}
            return (x, *args[1:]), kwargs

        with forward_pre_hooks(lm, {"model.layers.0": drop_first}):
            cut = lm(ids).logits
        assert not torch.allclose(cut, plain)
        assert torch.equal(lm(ids).logits, plain)  # removed on exit
    with pytest.raises(ValueError, match="hooks key"), forward_pre_hooks(lm, {"model.layer.0": look}):
        pass
    with pytest.raises(TypeError, match="args, kwargs"), forward_pre_hooks(lm, {"model.layers.0": 3}):
        pass
