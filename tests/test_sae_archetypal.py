"""RA-SAE's relaxed archetypal dictionary and the BatchTopK SAE (iclr26.sae.archetypal, iclr26.sae.batchtopk)."""

from __future__ import annotations

import pytest
import torch

from iclr26.sae import BatchTopKSAE, RelaxedArchetypalDictionary, TopKSAE, fit_sae


def _data(n=512, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g).relu()


def test_dictionary_starts_at_the_candidates_and_projects():
    c = _data(16)
    dico = RelaxedArchetypalDictionary(c, 6, delta=0.5)
    assert torch.allclose(dico.get_dictionary(), c[:6])
    with torch.no_grad():
        dico.W.add_(torch.randn_like(dico.W))
        dico.Relax.add_(3 * torch.randn_like(dico.Relax))
    dico.get_dictionary()
    assert float(dico.W.detach().min()) >= 0
    assert torch.allclose(dico.W.sum(1), torch.ones(6), atol=1e-5)
    assert float(dico.Relax.detach().norm(dim=1).max()) <= 0.5 + 1e-5


def test_eval_fuses_the_training_dictionary_and_is_fixed():
    dico = RelaxedArchetypalDictionary(_data(16), 6)
    with torch.no_grad():
        dico.W.add_(torch.rand_like(dico.W))
        dico.multiplier.fill_(0.3)
    dico.train()
    d_train = dico.get_dictionary().detach().clone()
    dico.eval()
    assert torch.allclose(dico.fused, d_train, atol=1e-6)
    with torch.no_grad():
        dico.W.mul_(0)
    assert torch.allclose(dico.get_dictionary(), d_train)  # eval mode: the fused matrix
    z = torch.rand(3, 6)
    assert torch.allclose(dico(z), z @ d_train, atol=1e-5)


def test_more_atoms_than_candidates_and_no_multiplier():
    dico = RelaxedArchetypalDictionary(_data(4), 6, use_multiplier=False)
    assert not any(n == "multiplier" for n, _ in dico.named_parameters())
    assert dico.get_dictionary().shape == (6, 8)


def test_batchtopk_keeps_k_per_token_on_average_in_training():
    x = _data(64)
    sae = BatchTopKSAE(8, 16, 3)
    z = sae.encode(x)
    assert int((z > 0).sum()) == 3 * 64
    assert not torch.isnan(sae.running_threshold)


def test_batchtopk_running_threshold_is_an_ema():
    sae = BatchTopKSAE(8, 16, 2, momentum=0.5)
    x1, x2 = _data(32, seed=1), _data(32, seed=2)
    t1 = torch.relu(sae.pre_activations(x1)).reshape(-1).topk(64).values[-1]
    sae.encode(x1)
    t2 = torch.relu(sae.pre_activations(x2)).reshape(-1).topk(64).values[-1]
    sae.encode(x2)
    assert torch.allclose(sae.running_threshold, 0.5 * t1 + 0.5 * t2)
    sae.eval()
    z = sae.encode(x2)
    codes = torch.relu(sae.pre_activations(x2))
    assert torch.equal(z > 0, codes >= sae.running_threshold)


def test_batchtopk_eval_without_threshold_raises():
    sae = BatchTopKSAE(8, 16, 2).eval()
    with pytest.raises(RuntimeError, match="running threshold"):
        sae.encode(_data(4))


def test_rasae_trains_and_keeps_its_constraints():
    x = _data(1024)
    sae = BatchTopKSAE(8, 16, 2, dictionary=RelaxedArchetypalDictionary(x[:32], 16, delta=0.2))
    hist = fit_sae(sae, x, steps=60, batch_size=128, lr=3e-3, progress=False)
    assert hist["mse"].iloc[-1] < hist["mse"].iloc[0]
    assert hist["l0"].iloc[-1] == pytest.approx(2.0)
    dico = sae.archetypal
    W = dico.W.detach()
    assert float(W.min()) >= 0 and torch.allclose(W.sum(1), torch.ones(16), atol=1e-4)
    assert float(dico.Relax.detach().norm(dim=1).max()) <= 0.2 + 1e-5
    sae.eval()
    x_hat, z = sae(x)
    assert x_hat.shape == x.shape and z.shape == (1024, 16)
    assert torch.allclose(sae.dictionary, dico.fused)


def test_free_batchtopk_has_unit_rows_and_no_decoder_bias():
    sae = BatchTopKSAE(8, 16, 2)
    assert torch.allclose(sae.dictionary.norm(dim=1), torch.ones(16), atol=1e-5)
    assert "b_dec" not in dict(sae.named_parameters())
    assert isinstance(sae, type(TopKSAE(8, 16, 2)).__mro__[1])


def test_bad_arguments():
    with pytest.raises(ValueError, match="k"):
        BatchTopKSAE(8, 4, 5)
    with pytest.raises(ValueError, match="momentum"):
        BatchTopKSAE(8, 16, 2, momentum=1.5)
    with pytest.raises(TypeError, match="dictionary"):
        BatchTopKSAE(8, 16, 2, dictionary=torch.zeros(16, 8))
    with pytest.raises(ValueError, match="dictionary"):
        BatchTopKSAE(8, 16, 2, dictionary=RelaxedArchetypalDictionary(_data(4), 12))
    with pytest.raises(ValueError, match="delta"):
        RelaxedArchetypalDictionary(_data(4), 3, delta=-1.0)
    with pytest.raises(TypeError, match="points"):
        RelaxedArchetypalDictionary([[1.0, 2.0]], 3)
    with pytest.raises(ValueError, match="z"):
        RelaxedArchetypalDictionary(_data(4), 3)(torch.zeros(2, 5))
