"""Unit tests of iclr26.models: patchify, timestep embedding, adaLN-Zero DiT, per-head gates."""

import copy

import numpy as np
import pytest
import torch

from iclr26.models import DiTBlock, GatedAttention, TinyDiT, gate_grads, patchify, timestep_embedding, unpatchify


def test_patchify_roundtrip_and_errors():
    x = torch.randn(2, 3, 8, 8)
    tok = patchify(x, 2)
    assert tok.shape == (2, 16, 12)
    assert torch.equal(unpatchify(tok, 2, 3, 8, 8), x)
    # first token is the top-left 2×2 patch
    assert torch.equal(tok[0, 0].reshape(2, 2, 3).permute(2, 0, 1), x[0, :, :2, :2])
    with pytest.raises(ValueError):
        patchify(x, 3)
    with pytest.raises(ValueError):
        patchify(torch.randn(3, 8, 8), 2)
    with pytest.raises(ValueError):
        unpatchify(tok, 2, 1, 8, 8)
    with pytest.raises(TypeError, match="x"):
        patchify(x.numpy(), 2)
    with pytest.raises(TypeError, match="patch"):
        patchify(x, 2.0)
    with pytest.raises(ValueError, match="patch"):
        patchify(x, 0)
    with pytest.raises(TypeError, match="tokens"):
        unpatchify(tok.numpy(), 2, 3, 8, 8)
    with pytest.raises(TypeError, match="height"):
        unpatchify(tok, 2, 3, 8.0, 8)
    assert torch.equal(unpatchify(tok, np.int64(2), np.int64(3), 8, 8), x)


def test_timestep_embedding():
    e = timestep_embedding(torch.tensor([0, 10, 999]), 16)
    assert e.shape == (3, 16)
    assert torch.allclose(e[0, :8], torch.ones(8)) and torch.allclose(e[0, 8:], torch.zeros(8))
    assert timestep_embedding(torch.tensor([1.5]), 7).shape == (1, 7)
    with pytest.raises(ValueError):
        timestep_embedding(torch.tensor(3), 8)
    with pytest.raises(ValueError):
        timestep_embedding(torch.tensor([1]), 0)
    with pytest.raises(TypeError, match="t must"):
        timestep_embedding([1, 2], 8)
    with pytest.raises(TypeError, match="dim"):
        timestep_embedding(torch.tensor([1]), 8.0)
    with pytest.raises(ValueError, match="max_period"):
        timestep_embedding(torch.tensor([1]), 8, max_period=0.0)


def test_dit_shapes_and_adaln_zero_init():
    torch.manual_seed(0)
    m = TinyDiT(img_size=8, patch=2, in_channels=1, dim=32, depth=2, heads=4)
    x, t = torch.randn(3, 1, 8, 8), torch.tensor([1, 50, 999])
    out = m(x, t)
    assert out.shape == x.shape
    assert torch.equal(out, torch.zeros_like(out))  # adaLN-Zero: the final layer starts at zero
    for blk in m.blocks:
        assert torch.count_nonzero(blk.ada[1].weight) == 0
    with pytest.raises(ValueError):
        m(torch.randn(3, 1, 6, 6), t)
    with pytest.raises(ValueError):
        m(x, torch.tensor([1, 2]))
    with pytest.raises(ValueError):
        TinyDiT(img_size=8, patch=3)
    with pytest.raises(ValueError):
        TinyDiT(dim=30, heads=4)
    with pytest.raises(ValueError):
        GatedAttention(10, 3)


def test_dit_argument_types():
    assert TinyDiT(img_size=np.int64(8), patch=np.int64(2), dim=np.int64(16), depth=np.int64(1), heads=2).dim == 16
    for kw, field in (
        (dict(dim=32.0), "dim"),
        (dict(depth="2"), "depth"),
        (dict(mlp_ratio="4"), "mlp_ratio"),
        (dict(heads=True), "heads"),
        (dict(fast_attention=1), "fast_attention"),
    ):
        with pytest.raises(TypeError, match=field):
            TinyDiT(**kw)
    for kw, field in ((dict(depth=0), "depth"), (dict(mlp_ratio=0.0), "mlp_ratio"), (dict(img_size=-8), "img_size")):
        with pytest.raises(ValueError, match=field):
            TinyDiT(**kw)
    with pytest.raises(TypeError, match="layer"):
        GatedAttention(8, 2, layer=1.0)
    with pytest.raises(ValueError, match="layer"):
        DiTBlock(8, 2, layer=-1)
    m = TinyDiT(img_size=8, patch=2, dim=16, depth=1, heads=2)
    t = torch.tensor([1, 2])
    with pytest.raises(TypeError, match="x"):
        m(torch.zeros(2, 1, 8, 8, dtype=torch.long), t)
    with pytest.raises(TypeError, match="t must"):
        m(torch.zeros(2, 1, 8, 8), [1, 2])
    with pytest.raises(TypeError, match="gates"):
        m.set_gates([[1.0, 1.0]])


def _trained_like(seed=0):
    torch.manual_seed(seed)
    m = TinyDiT(img_size=8, patch=4, in_channels=1, dim=16, depth=2, heads=4)
    for p in m.parameters():  # leave adaLN-Zero so that every path is active
        torch.nn.init.normal_(p, std=0.2)
    return m


def test_gate_zero_removes_head_exactly():
    m = _trained_like()
    gates = torch.ones(2, 4)
    gates[1, 2] = 0
    m.set_gates(gates)
    x, t = torch.randn(2, 1, 8, 8), torch.tensor([3, 400])
    before = m(x, t)
    m2 = copy.deepcopy(m)
    attn = m2.blocks[1].attn
    D, hd = m2.dim, attn.head_dim  # noqa: N806
    with torch.no_grad():
        attn.qkv.weight[2 * D + 2 * hd : 2 * D + 3 * hd] += 5.0  # that head's value rows
        attn.qkv.weight[2 * hd : 3 * hd] -= 5.0  # its query rows
    names = ["blocks.1.attn.head_out"]
    out, cache = m2.run_with_cache(x, t, names=names)  # layer 1 explicit: compare with the same path
    assert torch.equal(out, m.run_with_cache(x, t, names=names)[0])
    assert torch.equal(m2(x, t), before)
    assert torch.count_nonzero(cache["blocks.1.attn.head_out"][:, 2]) == 0
    assert torch.count_nonzero(cache["blocks.1.attn.head_out"][:, 1]) > 0
    assert not hasattr(attn, "last_head_out")  # the side channel is gone: hooks replace it
    # an open head does change the output
    m3 = copy.deepcopy(m)
    with torch.no_grad():
        m3.blocks[1].attn.qkv.weight[2 * D : 2 * D + hd] += 5.0
    assert not torch.allclose(m3(x, t), before)
    assert torch.equal(m.gates, gates)
    with pytest.raises(ValueError):
        m.set_gates(torch.ones(4, 2))


def test_gate_grads_match_finite_differences_and_restore():
    m = _trained_like(1).double()
    x, t = torch.randn(2, 1, 8, 8, dtype=torch.float64), torch.tensor([10, 300])
    with gate_grads(m) as gates:
        m(x, t).pow(2).sum().backward()
        grads = torch.stack([g.grad for g in gates])
    assert not any(b.attn.gate.requires_grad for b in m.blocks)
    assert torch.equal(m.gates, torch.ones(2, 4, dtype=m.gates.dtype))
    eps = 1e-6
    g = torch.ones(2, 4, dtype=torch.float64)
    g[0, 1] += eps
    m.set_gates(g)
    with torch.no_grad():
        up = float(m(x, t).pow(2).sum())
    g[0, 1] -= 2 * eps
    m.set_gates(g)
    with torch.no_grad():
        down = float(m(x, t).pow(2).sum())
    assert abs((up - down) / (2 * eps) - float(grads[0, 1])) < 1e-4 * max(1.0, abs(float(grads[0, 1])))
    with pytest.raises(TypeError):
        with gate_grads(torch.nn.Linear(2, 2)):
            pass


def test_dit_hook_points():
    m = _trained_like()
    x, t = torch.randn(2, 1, 8, 8), torch.tensor([3, 400])
    per_block = ("attn.pattern", "attn.head_out", "attn_out", "resid_mid", "mlp_out", "resid_post")
    assert m.hook_names == ["embed", "cond"] + [f"blocks.{i}.{n}" for i in range(2) for n in per_block]
    out, cache = m.run_with_cache(x, t)
    assert set(cache) == set(m.hook_names)
    torch.testing.assert_close(out, m(x, t))
    n = (8 // 4) ** 2
    assert cache["embed"].shape == (2, n, 16) and cache["cond"].shape == (2, 16)
    assert cache["blocks.0.attn.pattern"].shape == (2, 4, n, n)
    torch.testing.assert_close(cache["blocks.0.attn.pattern"].sum(-1), torch.ones(2, 4, n))
    assert cache["blocks.1.attn.head_out"].shape == (2, 4, n, 4)
    torch.testing.assert_close(cache["blocks.1.resid_mid"], cache["blocks.0.resid_post"] + cache["blocks.1.attn_out"])
    torch.testing.assert_close(cache["blocks.1.resid_post"], cache["blocks.1.resid_mid"] + cache["blocks.1.mlp_out"])
    # zeroing one head's output through a hook equals gating it off
    gates = torch.ones(2, 4)
    gates[0, 3] = 0

    def drop_head_3(h, name):
        h = h.clone()
        h[:, 3] = 0
        return h

    with m.hooks({"blocks.0.attn.head_out": drop_head_3}):
        hooked = m(x, t)
    m.set_gates(gates)
    torch.testing.assert_close(hooked, m(x, t))


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)], ids=["f64", "f32"])
def test_dit_fast_attention_equals_the_explicit_path(dtype, tol, monkeypatch):
    fast = _trained_like(2).to(dtype)
    gates = torch.ones(2, 4, dtype=dtype)
    gates[0, 1] = 0.0
    gates[1, 0] = 0.0
    gates[1, 2] = 0.5
    fast.set_gates(gates)
    explicit = copy.deepcopy(fast)
    for b in explicit.blocks:
        b.attn.fast_attention = False
    g = torch.Generator().manual_seed(3)
    x, t = torch.randn(3, 1, 8, 8, generator=g, dtype=dtype), torch.tensor([3, 50, 900])
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        torch.nn.functional, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    outs, grads, gate_gs = [], [], []
    for model in (fast, explicit):
        with gate_grads(model) as leaves:
            out = model(x, t)
            (out * torch.linspace(-1, 1, out.numel(), dtype=dtype).view_as(out)).sum().backward()
        outs.append(out.detach())
        grads.append([p.grad for p in model.parameters()])
        gate_gs.append(torch.stack([gl.grad for gl in leaves]))
    assert len(calls) == 2  # the fast model's two layers; the explicit one never calls the kernel
    torch.testing.assert_close(outs[0], outs[1], rtol=tol, atol=tol)
    torch.testing.assert_close(gate_gs[0], gate_gs[1], rtol=tol, atol=tol)
    assert gate_gs[0][0, 1] != 0  # a closed gate still has a gradient (it is what head importance reads)
    for a, b in zip(grads[0], grads[1]):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    # caching a head's output switches that layer (only) to the explicit path
    calls.clear()
    fast.run_with_cache(x, t, names=["blocks.1.attn.head_out"])
    assert len(calls) == 1


def test_gate_grads_per_example_match_one_backward_per_example():
    m = _trained_like(1).double()
    gates = torch.ones(2, 4, dtype=torch.float64)
    gates[1, 2] = 0.0  # a closed gate stays closed in the per-example copies
    m.set_gates(gates)
    g = torch.Generator().manual_seed(5)
    x, t = torch.randn(3, 1, 8, 8, generator=g, dtype=torch.float64), torch.tensor([5, 200, 700])
    with gate_grads(m, batch_size=3) as leaves:
        assert [tuple(leaf.shape) for leaf in leaves] == [(3, 4), (3, 4)]
        m(x, t).pow(2).flatten(1).sum(1).sum().backward()
        per_example = torch.stack([leaf.grad for leaf in leaves], 1)  # (3, depth, heads)
    assert torch.equal(m.gates, gates)  # restored as (heads,) buffers with their values
    assert all(b.attn.gate.shape == (4,) and not b.attn.gate.requires_grad for b in m.blocks)
    for b in range(3):
        with gate_grads(m) as leaves:
            m(x[b : b + 1], t[b : b + 1]).pow(2).sum().backward()
            one = torch.stack([leaf.grad for leaf in leaves])
        torch.testing.assert_close(per_example[b], one)
    # the batch gradient is the sum of the per-example ones; their magnitudes are not
    with gate_grads(m) as leaves:
        m(x, t).pow(2).sum().backward()
        batch = torch.stack([leaf.grad for leaf in leaves])
    torch.testing.assert_close(per_example.sum(0), batch)
    with pytest.raises(ValueError, match="batch_size"):
        with gate_grads(m, batch_size=0):
            pass
    with pytest.raises(TypeError, match="batch_size"):
        with gate_grads(m, batch_size=2.0):
            pass


def test_dit_condition_adds_an_mlp_of_s_to_c_and_leaves_the_unconditioned_model_unchanged():
    torch.manual_seed(0)
    plain = TinyDiT(img_size=4, patch=2, dim=8, depth=1, heads=2)
    torch.manual_seed(0)
    cond = TinyDiT(img_size=4, patch=2, dim=8, depth=1, heads=2, cond_dim=3)
    assert plain.cond_mlp is None and plain.cond_dim == 0
    # the shared parameters initialise identically: the condition MLP is built last
    shared = dict(plain.named_parameters())
    for name, p in cond.named_parameters():
        if not name.startswith("cond_mlp"):
            assert torch.equal(p, shared[name]), name
    for m in (cond.blocks[0].ada[1], cond.final_ada[1], cond.final):  # make c matter
        torch.nn.init.normal_(m.weight, std=0.3)
    x, t = torch.randn(2, 1, 4, 4), torch.tensor([3, 7])
    s = torch.randn(2, 3)
    _, cache = cond.run_with_cache(x, t, cond=s, names=["cond"])
    expect = cond.t_mlp(timestep_embedding(t, 8)) + cond.cond_mlp(s)
    torch.testing.assert_close(cache["cond"], expect)
    assert not torch.allclose(cond(x, t, cond=s), cond(x, t, cond=s + 1))
    with pytest.raises(ValueError, match="cond"):
        cond(x, t)
    with pytest.raises(ValueError, match="cond"):
        cond(x, t, cond=torch.randn(2, 4))
    with pytest.raises(TypeError, match="cond"):
        cond(x, t, cond=torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="cond"):
        plain(x, t, cond=s)
    with pytest.raises(ValueError, match="cond_dim"):
        TinyDiT(img_size=4, patch=2, dim=8, depth=1, heads=2, cond_dim=-1)
