"""Tests of iclr26.optim: the optimizer factory and the parameter split."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from iclr26.models import TinyTransformer, TransformerConfig
from iclr26.optim import (
    DEFAULTS,
    MATRIX_OPTIMIZERS,
    OPTIMIZERS,
    describe,
    make_optimizer,
    non_embedding_params,
    split_parameters,
)


def tiny() -> TinyTransformer:
    torch.manual_seed(0)
    return TinyTransformer(TransformerConfig(vocab_size=11, n_ctx=6, d_model=8, n_layers=1, n_heads=2, d_mlp=16))


def one_step_loss(model: nn.Module, opts: list) -> tuple[float, float]:
    x = torch.randint(0, 11, (4, 6), generator=torch.Generator().manual_seed(0))

    def loss() -> torch.Tensor:
        return nn.functional.cross_entropy(model(x)[:, :-1].reshape(-1, 11), x[:, 1:].reshape(-1))

    before = loss()
    for o in opts:
        o.zero_grad()
    before.backward()
    for o in opts:
        o.step()
    with torch.no_grad():
        after = loss()
    return float(before.detach()), float(after)


def test_split_routes_embeddings_away_from_hidden_matrices():
    model = tiny()
    groups = split_parameters(model)
    names = {k: [n for n, _ in v] for k, v in groups.items()}
    assert set(names["embedding"]) == {"W_E.weight", "W_pos", "W_U.weight"}
    assert all(p.ndim == 2 for _, p in groups["hidden"])
    assert all(p.ndim == 1 for _, p in groups["other"])
    total = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for v in groups.values() for _, p in v) == total
    emb = sum(p.numel() for _, p in groups["embedding"])
    assert non_embedding_params(model) == total - emb


def test_split_custom_is_embedding():
    model = tiny()
    groups = split_parameters(model, is_embedding=lambda name, p: name.startswith("W_E"))
    assert [n for n, _ in groups["embedding"]] == ["W_E.weight"]
    assert "W_U.weight" in [n for n, _ in groups["hidden"]]


@pytest.mark.parametrize("name", [n for n in OPTIMIZERS if n != "kron"])
def test_every_optimizer_builds_and_lowers_the_loss(name):
    model = tiny()
    lr = {"lion": 1e-3, "muon": 0.02}.get(name, 1e-2)
    opts = make_optimizer(name, model, lr=lr)
    assert isinstance(opts, list) and all(isinstance(o, torch.optim.Optimizer) for o in opts)
    trained = {id(p) for o in opts for g in o.param_groups for p in g["params"]}
    assert trained == {id(p) for p in model.parameters()}  # every parameter, exactly once
    assert sum(len(g["params"]) for o in opts for g in o.param_groups) == len(trained)
    before, after = one_step_loss(model, opts)
    assert after < before
    assert "params" in describe(opts)


def test_kron_builds_and_steps():
    model = tiny()
    opts = make_optimizer("kron", model, lr=1e-3, pre_conditioner_update_probability=1.0)
    assert type(opts[0]).__name__ == "Kron"
    start = [p.detach().clone() for p in model.parameters()]
    before, after = one_step_loss(model, opts)
    assert math.isfinite(after)
    moved = [not torch.equal(a, p) for a, p in zip(start, model.parameters())]
    assert all(moved), "every parameter takes a step"
    assert after < before


def test_matrix_optimizers_route_to_adamw():
    model = tiny()
    for name in MATRIX_OPTIMIZERS:
        opts = make_optimizer(name, model)
        assert len(opts) == 2 and isinstance(opts[1], torch.optim.AdamW)
        main = {id(p) for g in opts[0].param_groups for p in g["params"]}
        assert id(model.W_E.weight) not in main and id(model.W_U.weight) not in main and id(model.W_pos) not in main
        assert all(p.ndim == 2 for g in opts[0].param_groups for p in g["params"])
    assert type(make_optimizer("muon", model)[0]) is torch.optim.Muon


def test_weight_decay_only_on_matrices_and_hparams_passed():
    model = tiny()
    (opt,) = make_optimizer("adamw", model, lr=0.05, weight_decay=0.3, betas=(0.8, 0.9))
    for g in opt.param_groups:
        assert g["lr"] == 0.05 and g["betas"] == (0.8, 0.9)
        assert g["weight_decay"] == (0.3 if all(p.ndim >= 2 for p in g["params"]) else 0.0)
    muon, adam = make_optimizer("muon", model, lr=0.04, adam_lr=0.002)
    assert muon.param_groups[0]["lr"] == 0.04 and adam.param_groups[0]["lr"] == 0.002
    (lion,) = make_optimizer("lion", model, cautious=True)
    assert lion.param_groups[0]["cautious"] is True
    (c,) = make_optimizer("cautious", model)
    assert c.param_groups[0]["cautious"] is True and c.param_groups[0]["gamma"] == 0.0
    assert set(DEFAULTS) == set(OPTIMIZERS)


def test_bad_inputs():
    model = tiny()
    with pytest.raises(ValueError, match="name must be one of"):
        make_optimizer("sgdx", model)
    with pytest.raises(TypeError, match="name must be a string"):
        make_optimizer(3, model)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        make_optimizer("adamw", "model")
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        make_optimizer("adamw", model, momentum=0.9)
    with pytest.raises(ValueError, match="lr must be a number > 0"):
        make_optimizer("adamw", model, lr=-1.0)
    with pytest.raises(ValueError, match="lr must be a finite number"):
        make_optimizer("lion", model, lr=float("nan"))
    with pytest.raises(ValueError, match=r"betas\[1\] must be a number in \[0.0, 1.0\)"):
        make_optimizer("adamw", model, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="betas must be a pair"):
        make_optimizer("adamw", model, betas=(0.9, 0.95, 0.99))
    with pytest.raises(TypeError, match="betas must be a pair"):
        make_optimizer("adamw", model, betas=0.9)
    with pytest.raises(ValueError, match="weight_decay must be a number >= 0"):
        make_optimizer("muon", model, weight_decay=-0.1)
    with pytest.raises(ValueError, match="momentum must be a number in"):
        make_optimizer("muon", model, momentum=1.5)
    with pytest.raises(ValueError, match="adjust_lr_fn"):
        make_optimizer("muon", model, adjust_lr_fn="rms")
    with pytest.raises(TypeError, match="cautious must be a bool"):
        make_optimizer("lion", model, cautious=1)
    with pytest.raises(ValueError, match="no trainable parameters"):
        make_optimizer("adamw", nn.Identity())
    with pytest.raises(ValueError, match="needs 2-D hidden weight matrices"):
        make_optimizer("muon", nn.Embedding(4, 3))
    with pytest.raises(TypeError, match="is_embedding must be a callable"):
        split_parameters(model, is_embedding="W_E")
    with pytest.raises(TypeError, match="opts must be a list"):
        describe("adamw")


def test_numpy_scalars_are_accepted_and_wrong_types_are_type_errors():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    opts = make_optimizer(
        "muon",
        model,
        lr=np.float64(0.02),
        ns_steps=np.int64(3),
        nesterov=np.bool_(False),
        adam_betas=(np.float32(0.9), 0.95),
    )
    assert opts[0].param_groups[0]["ns_steps"] == 3 and opts[0].param_groups[0]["nesterov"] is False
    for kwargs, match in (
        (dict(ns_steps=3.0), "ns_steps must be an int"),
        (dict(lr="0.02"), "lr must be a number"),
        (dict(momentum=None), "momentum must be a number"),
        (dict(nesterov="yes"), "nesterov must be a bool"),
    ):
        with pytest.raises(TypeError, match=match):
            make_optimizer("muon", model, **kwargs)
    with pytest.raises(ValueError, match="pre_conditioner_update_probability"):
        make_optimizer("kron", model, pre_conditioner_update_probability=0.0)


def test_nadamw_is_optax_nadamw():
    """nadamw follows optax's ``nadamw`` (scale_by_adam(nesterov=True), decoupled weight decay) step by step: a fixed
    momentum β1, not torch's Dozat schedule."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    lr, (b1, b2), eps, wd = 0.01, (0.8, 0.95), 1e-8, 0.1
    (opt,) = make_optimizer("nadamw", model, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    w = model.weight.detach().clone().double()
    m = torch.zeros_like(w)
    v = torch.zeros_like(w)
    x = torch.randn(16, 4)
    for t in range(1, 8):
        opt.zero_grad()
        model(x * t).pow(2).mean().backward()
        g = model.weight.grad.detach().double()
        opt.step()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = b1 * m / (1 - b1 ** (t + 1)) + (1 - b1) * g / (1 - b1**t)
        w = w * (1 - lr * wd) - lr * m_hat / ((v / (1 - b2**t)).sqrt() + eps)
        assert torch.allclose(model.weight.detach().double(), w, atol=1e-6), t
    # torch's default schedule (momentum_decay=4e-3) is a different optimizer
    (sched,) = make_optimizer("nadamw", torch.nn.Linear(4, 3), momentum_decay=4e-3)
    assert sched.param_groups[0]["momentum_decay"] == 4e-3
