"""iclr26.train.grads: flat per-batch gradients (torch.func against autograd) and adding a flat vector back."""

import pytest
import torch
from torch import nn

from iclr26.models import TinyTransformer, TransformerConfig
from iclr26.train import add_flat_, flat_grads, flat_params, param_names


def _model(seed=0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=11, n_ctx=8, d_model=16, n_layers=2, n_heads=2, d_mlp=32, causal=False)
    return TinyTransformer(cfg).double().eval()


def _loss(model, batch):
    ids, pos, target = batch
    logits = model(ids)[torch.arange(len(ids)), pos]
    return nn.functional.cross_entropy(logits, target)


def _batches(n=3, b=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        (
            torch.randint(0, 11, (b, 8), generator=g),
            torch.randint(0, 8, (b,), generator=g),
            torch.randint(0, 11, (b,), generator=g),
        )
        for _ in range(n)
    ]


def test_param_names_patterns_and_order():
    m = _model()
    mlp = param_names(m, ["blocks.1.mlp.*"])
    assert mlp and all(n.startswith("blocks.1.mlp.") for n in mlp)
    all_names = param_names(m)
    assert all_names == [n for n, _ in m.named_parameters()]
    assert param_names(m, "blocks.1.mlp.*") == mlp
    with pytest.raises(ValueError, match="include"):
        param_names(m, ["no.such.*"])
    with pytest.raises(TypeError, match="include"):
        param_names(m, 3)


def test_flat_grads_func_equals_autograd_loop():
    m = _model()
    names = param_names(m, ["blocks.1.mlp.*", "W_E.*"])
    batches = _batches()
    g_func = flat_grads(m, _loss, batches, names)
    g_auto = flat_grads(m, _loss, batches, names, method="autograd")
    n = sum(dict(m.named_parameters())[k].numel() for k in names)
    assert g_func.shape == (3, n)
    torch.testing.assert_close(g_func, g_auto, atol=1e-10, rtol=1e-8)
    # the reference by hand: backward on a fresh graph, batch 1
    m.zero_grad()
    _loss(m, batches[1]).backward()
    params = dict(m.named_parameters())
    by_hand = torch.cat([params[k].grad.reshape(-1) for k in names])
    torch.testing.assert_close(g_func[1], by_hand)


def test_flat_grads_leaves_parameters_alone():
    m = _model()
    before = flat_params(m).clone()
    flat_grads(m, _loss, _batches(n=2), None)
    assert torch.equal(flat_params(m), before)


def test_add_flat_round_trip_and_zero_scale():
    m = _model()
    names = param_names(m, ["blocks.0.attn.*"])
    w0 = flat_params(m, names).clone()
    v = torch.randn_like(w0)
    add_flat_(m, v, names, scale=0.0)
    assert torch.equal(flat_params(m, names), w0)
    add_flat_(m, v, names, scale=0.5)
    torch.testing.assert_close(flat_params(m, names), w0 + 0.5 * v)
    add_flat_(m, v, names, scale=-0.5)
    torch.testing.assert_close(flat_params(m, names), w0)
    others = [n for n in param_names(m) if n not in names]
    o0 = flat_params(m, others).clone()
    add_flat_(m, v, names)
    assert torch.equal(flat_params(m, others), o0)


def test_bad_input():
    m = _model()
    names = param_names(m, ["blocks.1.mlp.*"])
    n = flat_params(m, names).numel()
    with pytest.raises(ValueError, match="vec"):
        add_flat_(m, torch.zeros(n + 1, dtype=torch.float64), names)
    with pytest.raises(TypeError, match="vec"):
        add_flat_(m, torch.zeros(2, n), names)
    with pytest.raises(ValueError, match="vec"):
        add_flat_(m, torch.full((n,), float("nan"), dtype=torch.float64), names)
    with pytest.raises(ValueError, match="names"):
        flat_params(m, ["nope"])
    with pytest.raises(ValueError, match="names"):
        flat_params(m, [names[0], names[0]])
    with pytest.raises(ValueError, match="method"):
        flat_grads(m, _loss, _batches(), names, method="loop")
    with pytest.raises(ValueError, match="batches"):
        flat_grads(m, _loss, [], names)
    with pytest.raises(TypeError, match="loss_fn"):
        flat_grads(m, 3, _batches(), names)
    with pytest.raises(ValueError, match="loss_fn"):
        flat_grads(m, lambda mm, b: mm(b[0]), _batches(), names)


def test_several_losses_from_one_forward():
    m = _model()
    names = param_names(m, ["blocks.1.*"])
    batches = _batches(n=2)

    def two(model, batch):
        ids, pos, target = batch
        logits = model(ids)[torch.arange(len(ids)), pos]
        other = (target + 1) % 11
        return torch.stack([nn.functional.cross_entropy(logits, target), nn.functional.cross_entropy(logits, other)])

    def second(model, batch):
        return two(model, batch)[1]

    for method in ("func", "autograd"):
        g = flat_grads(m, two, batches, names, method=method)
        assert g.shape[:2] == (2, 2)
        torch.testing.assert_close(g[:, 0], flat_grads(m, _loss, batches, names))
        torch.testing.assert_close(g[:, 1], flat_grads(m, second, batches, names))
