"""Unit tests of iclr26.models: patchify, timestep embedding, adaLN-Zero DiT, per-head gates."""

import copy

import pytest
import torch

from iclr26.models import GatedAttention, TinyDiT, gate_grads, patchify, timestep_embedding, unpatchify


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


def test_timestep_embedding():
    e = timestep_embedding(torch.tensor([0, 10, 999]), 16)
    assert e.shape == (3, 16)
    assert torch.allclose(e[0, :8], torch.ones(8)) and torch.allclose(e[0, 8:], torch.zeros(8))
    assert timestep_embedding(torch.tensor([1.5]), 7).shape == (1, 7)
    with pytest.raises(ValueError):
        timestep_embedding(torch.tensor(3), 8)
    with pytest.raises(ValueError):
        timestep_embedding(torch.tensor([1]), 0)


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
    assert torch.equal(m2(x, t), before)
    assert torch.count_nonzero(attn.last_head_out[:, 2]) == 0
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
