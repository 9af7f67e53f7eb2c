"""Unit tests of iclr26.sae.transcoder: the transcoder, its training on paired data and the splice."""

from __future__ import annotations

import pytest
import torch

from iclr26.models import TinyTransformer, TransformerConfig
from iclr26.sae import Transcoder, fit_transcoder, splice


def _model(seed: int = 0) -> TinyTransformer:
    torch.manual_seed(seed)
    return TinyTransformer(TransformerConfig(vocab_size=11, n_ctx=6, d_model=8, n_heads=2, d_mlp=16, layernorm=False))


def test_relu_transcoder_shapes_and_penalty():
    tc = Transcoder(4, 6, d_out=3, l1=0.5)
    x = torch.randn(5, 4)
    y_hat, z = tc(x)
    assert y_hat.shape == (5, 3) and z.shape == (5, 6) and bool((z >= 0).all())
    loss, logs = tc.loss(torch.cat([x, torch.randn(5, 3)], -1))
    mse = logs["mse"]
    assert float(loss.detach()) >= float(mse)  # the L1 term is non-negative
    assert torch.allclose(tc.pre_activations(x), x @ tc.W_enc + tc.b_enc)


def test_topk_transcoder_keeps_k_features():
    tc = Transcoder(4, 10, k=3)
    with torch.no_grad():
        tc.b_enc.fill_(5.0)  # every pre-activation positive: exactly k survive
    z = tc.encode(torch.randn(7, 4))
    assert bool(((z > 0).sum(-1) == 3).all())
    loss, logs = tc.loss(torch.randn(7, 8))
    assert torch.isclose(loss, logs["mse"])  # no penalty for TopK


def test_fit_transcoder_learns_a_linear_map():
    torch.manual_seed(0)
    x = torch.randn(2048, 4)
    y = torch.relu(x) @ torch.randn(4, 4)
    tc = Transcoder(4, 16, l1=1e-4)
    with torch.no_grad():
        before = (tc(x)[0] - y).pow(2).mean()
    fit_transcoder(tc, x, y, steps=400, batch_size=256, lr=1e-2, seed=0, progress=False)
    with torch.no_grad():
        after = (tc(x)[0] - y).pow(2).mean()
    assert after < 0.2 * before


def test_fit_transcoder_rejects_unpaired_data():
    tc = Transcoder(4, 8)
    with pytest.raises(ValueError, match="y"):
        fit_transcoder(tc, torch.randn(10, 4), torch.randn(9, 4), steps=1, progress=False)
    with pytest.raises(TypeError, match="tc"):
        fit_transcoder(object(), torch.randn(10, 4), torch.randn(10, 4), steps=1)


def test_splice_replaces_the_mlp_and_the_error_term_restores_it():
    model = _model().eval()
    tc = Transcoder(8, 12)
    tokens = torch.randint(11, (3, 6))
    with torch.no_grad():
        base = model(tokens)
        _, cache = model.run_with_cache(tokens, names=["blocks.0.resid_mid"])
        with splice(model, {0: tc}):
            spliced, c2 = model.run_with_cache(tokens, names=["blocks.0.mlp_out"])
        with splice(model, {0: tc}, error=True):
            restored = model(tokens)
    assert torch.allclose(c2["blocks.0.mlp_out"], tc(cache["blocks.0.resid_mid"])[0], atol=1e-6)
    assert not torch.allclose(spliced, base)
    assert torch.allclose(restored, base, atol=1e-5)
    assert torch.allclose(model(tokens), base)  # the hooks are gone


def test_splice_checks_its_arguments():
    model = _model()
    with pytest.raises(TypeError, match="model"):
        with splice(torch.nn.Linear(2, 2), {0: Transcoder(8, 4)}):
            pass
    with pytest.raises(TypeError, match="transcoders"):
        with splice(model, {0: "nope"}):
            pass
    with pytest.raises(ValueError, match="transcoders"):
        with splice(model, {3: Transcoder(8, 4)}):
            pass


def test_topk_sparse_decode_equals_the_dense_decode():
    torch.manual_seed(1)
    tc = Transcoder(5, 12, d_out=4, k=3)
    x = torch.randn(2, 7, 5)
    y_hat, z = tc(x)
    assert torch.allclose(y_hat, tc.decode(tc.encode(x)), atol=1e-6)
    assert torch.equal(z, tc.encode(x))
