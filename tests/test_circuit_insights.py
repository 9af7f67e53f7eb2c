"""Unit tests of iclr26.sae.circuit_insights: WeightLens, the activation baseline, F1, feature type, CircuitLens'
decomposition and the transformers path (on a tiny random GPT-2 with a random transcoder)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from iclr26.models import TinyTransformer, TransformerConfig
from iclr26.sae import (
    Transcoder,
    activation_description,
    decompose,
    detection_f1,
    load_official_transcoder,
    mlp_io,
    token_explained_share,
    weightlens,
    weightlens_gpt2,
    zscore_outliers,
)


def test_zscore_outliers_matches_the_official_rule_on_a_topk():
    v = torch.zeros(64)
    v[[3, 7]] = 1.0
    assert sorted(zscore_outliers(v, 5.5).tolist()) == [3, 7]  # z = 5.52 for two equal outliers among 64
    v[11] = 1.0
    assert zscore_outliers(v, 5.5).tolist() == []  # three: z = 4.47
    assert sorted(zscore_outliers(v, 3.0).tolist()) == [3, 7, 11]
    # the z-scores are taken within the top values, not the whole vector
    w = torch.cat([torch.tensor([10.0, 9.0]), torch.zeros(100)])
    assert zscore_outliers(w, 1.0, top=3).tolist() == []  # among [10, 9, 0] neither is 1 std above the mean
    assert zscore_outliers(w, 1.0, top=1000).tolist() == [0, 1]
    assert zscore_outliers(torch.ones(5), 1.0).tolist() == []


def _direct_model():
    """A 'model' whose feature activations are ReLU(W_E[t] @ W_enc + b): the direct path only."""
    torch.manual_seed(0)
    W_E = torch.linalg.qr(torch.randn(64, 50))[0].T.contiguous()  # 50 orthonormal token embeddings in d = 64
    W_enc = torch.zeros(64, 3)
    W_enc[:, 0] = W_E[4] * 3  # feature 0 reads token 4 strongly
    W_enc[:, 1] = W_E[7]  # feature 1: a candidate (token 7) that never fires (bias below)
    W_enc[:, 2] = torch.randn(64) * 0.01
    b = torch.tensor([-0.5, -100.0, -100.0])

    def acts(layer, ids):
        return torch.relu(W_E[ids] @ W_enc + b)

    return W_E, W_enc, b, acts


def test_weightlens_describes_a_direct_path_feature_and_validates():
    W_E, W_enc, _, acts = _direct_model()
    W_U = torch.randn(64, 50)
    W_dec = torch.randn(3, 64)
    res = weightlens(W_E, W_U, {0: W_enc}, {0: W_dec}, acts, bos=0, threshold_tokens=3.0)
    assert res[(0, 0)].candidates[0] == 4 and 4 in res[(0, 0)].description and res[(0, 0)].described
    assert res[(0, 1)].candidates == [7] and not res[(0, 1)].described  # validation removes it
    assert not res[(0, 2)].described
    # output tokens follow the same rule on W_dec @ W_U
    top = zscore_outliers(W_dec[0] @ W_U, 3.0).tolist()
    assert res[(0, 0)].outputs == top


def test_weightlens_links_a_second_layer_and_adds_upstream_descriptions():
    W_E, W_enc, b, acts0 = _direct_model()
    W_dec0 = torch.zeros(3, 64)
    W_dec0[0] = torch.randn(64)
    W_enc1 = torch.zeros(64, 2)
    W_enc1[:, 0] = W_dec0[0] * 5  # layer-1 feature 0 reads layer-0 feature 0's write
    W_enc1[:, 1] = torch.randn(64) * 1e-3

    def acts(layer, ids):
        z0 = acts0(0, ids)
        if layer == 0:
            return z0
        return torch.relu((z0 @ W_dec0) @ W_enc1 - 0.01)

    args = (W_E, torch.randn(64, 50), {0: W_enc, 1: W_enc1}, {0: W_dec0, 1: torch.randn(2, 64)}, acts)
    options = dict(bos=0, threshold_tokens=3.0, threshold_features=1.0)
    res = weightlens(*args, **options)
    links = res[(1, 0)].links
    assert links and links[0][:2] == (0, 0) and 0 < links[0][3] <= 1
    assert 4 in res[(1, 0)].description
    # the official GPT-2 rule: only layer-0 links may add descriptions; none allowed here
    res2 = weightlens(*args, **options, link_layers=[])
    assert 4 not in res2[(1, 0)].description


def test_weightlens_checks_its_arguments():
    W_E, W_enc, _, acts = _direct_model()
    with pytest.raises(ValueError, match="W_U"):
        weightlens(W_E, torch.randn(5, 50), {0: W_enc}, {0: torch.randn(3, 64)}, acts, bos=0)
    with pytest.raises(ValueError, match="bos"):
        weightlens(W_E, torch.randn(64, 50), {0: W_enc}, {0: torch.randn(3, 64)}, acts, bos=99)
    with pytest.raises(TypeError, match="feature_acts"):
        weightlens(W_E, torch.randn(64, 50), {0: W_enc}, {0: torch.randn(3, 64)}, "acts", bos=0)
    with pytest.raises(ValueError, match="feature_acts"):
        weightlens(
            W_E,
            torch.randn(64, 50),
            {0: W_enc},
            {0: torch.randn(3, 64)},
            lambda layer, i: torch.zeros(1),
            bos=0,
            threshold_tokens=3.0,
        )


def test_activation_baselines_f1_and_token_share():
    tokens = torch.tensor([0, 1, 2, 1, 2, 3, 1, 2, 3, 0] * 3)
    acts = torch.zeros(30, 2)
    acts[tokens == 1, 0] = 2.0  # feature 0 fires on token 1
    acts[tokens == 2, 0] = 1.5  # ... and on token 2, less strongly
    acts[::4, 1] = 1.0  # feature 1 fires by position, not token
    assert activation_description(acts, tokens, n_top=9)[0] == [1]  # the top-9 are all token 1
    assert activation_description(acts, tokens, rule="mean")[0] == [1, 2]
    f1 = detection_f1([[1, 2], []], acts, tokens)
    assert f1[0] == pytest.approx(1.0) and f1[1] == pytest.approx(0.0)
    assert np.isnan(detection_f1([[], []], torch.zeros(30, 2), tokens)).all()
    share = token_explained_share(acts, tokens, acts, tokens)
    assert share[0] == pytest.approx(1.0) and share[1] < 0.5
    with pytest.raises(ValueError, match="descriptions"):
        detection_f1([[1]], acts, tokens)
    with pytest.raises(ValueError, match="rule"):
        activation_description(acts, tokens, rule="median")


@pytest.mark.parametrize("n_layers", [1, 2])
def test_decompose_is_exact(n_layers):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=13, n_ctx=7, d_model=8, n_layers=n_layers, n_heads=2, d_mlp=16, layernorm=False)
    model = TinyTransformer(cfg).eval()
    tokens = torch.randint(13, (4, 7))
    w = torch.randn(8)
    tcs = {0: Transcoder(8, 10)} if n_layers == 2 else None
    d = decompose(model, tokens, n_layers - 1, w, 0.3, transcoders=tcs)
    assert d.max_relative_error() < 1e-5  # the model runs in float32
    assert d.heads.shape == (4, 7, n_layers, 2, 7)
    assert bool((d.heads[:, 2, :, :, 3:] == 0).all())  # causal: no write from later sources
    if n_layers == 2:
        assert d.upstream[0].shape == (4, 7, 10)
    with torch.no_grad():
        _, c = model.run_with_cache(tokens, names=[f"blocks.{n_layers - 1}.resid_mid"])
    assert torch.allclose(d.total, c[f"blocks.{n_layers - 1}.resid_mid"].double() @ w.double() + 0.3)


def test_decompose_refuses_layernorm_and_bad_vectors():
    model = TinyTransformer(TransformerConfig(vocab_size=5, n_ctx=4, d_model=8, n_heads=2, layernorm=True))
    with pytest.raises(ValueError, match="layernorm"):
        decompose(model, torch.zeros(1, 4, dtype=torch.long), 0, torch.randn(8))
    model = TinyTransformer(TransformerConfig(vocab_size=5, n_ctx=4, d_model=8, n_heads=2, layernorm=False))
    with pytest.raises(ValueError, match="w_enc"):
        decompose(model, torch.zeros(1, 4, dtype=torch.long), 0, torch.randn(7))
    with pytest.raises(TypeError, match="model"):
        decompose(torch.nn.Linear(2, 2), torch.zeros(1, 4, dtype=torch.long), 0, torch.randn(8))


def test_paper_path_on_a_tiny_random_gpt2(tmp_path):
    """The functions the paper scale calls, on a tiny random GPT-2 and a random transcoder (numbers mean nothing)."""
    from iclr26.hf import load_pretrained, write_tiny_model

    folder = write_tiny_model("gpt2", tmp_path / "gpt2")
    lm = load_pretrained(str(folder), "causal_lm").eval()
    vocab = lm.config.vocab_size
    ids = torch.randint(vocab, (3, 5))
    x, y = mlp_io(lm, ids, "transformer.h.0.ln_2", "transformer.h.0.mlp", stop_layer=1, batch_size=2)
    d = lm.config.n_embd
    assert x.shape == (3, 5, d) and y.shape == (3, 5, d)
    tc = Transcoder(d, 8)

    def acts(layer, tok):
        with torch.no_grad():
            return tc.encode(mlp_io(lm, tok, "transformer.h.0.ln_2", "transformer.h.0.mlp", stop_layer=1)[0])

    E = lm.get_input_embeddings().weight.detach()
    U = lm.get_output_embeddings().weight.detach().T
    res = weightlens(E, U, {0: tc.W_enc.detach()}, {0: tc.W_dec.detach()}, acts, bos=0, threshold_tokens=1.0)
    assert len(res) == 8 and all(set(r.description) <= set(r.candidates) for r in res.values())


def test_weightlens_candidates_are_zscore_outliers_of_each_column():
    torch.manual_seed(3)
    W_E, enc, dec, W_U = torch.randn(300, 8), torch.randn(8, 5), torch.randn(5, 8), torch.randn(8, 300)
    res = weightlens(
        W_E,
        W_U,
        {0: enc},
        {0: dec},
        lambda layer, ids: torch.ones(*ids.shape, 5),
        bos=0,
        threshold_tokens=2.0,
        top_tokens=100,
        chunk=2,
    )
    for i in range(5):
        assert res[(0, i)].candidates == zscore_outliers(W_E @ enc[:, i], 2.0, top=100).tolist()
        assert res[(0, i)].outputs == zscore_outliers(dec[i] @ W_U, 2.0, top=100).tolist()
        assert res[(0, i)].description == sorted(res[(0, i)].candidates)  # every candidate fires here


@dataclass
class LanguageModelSAERunnerConfig:  # the kind of training config stored beside the official GPT-2 weights
    d_in: int = 16
    hook_point: str = "blocks.0.ln2.hook_normalized"
    dtype: torch.dtype = torch.float32


def _write_official(path, d, width, seed=0, with_cfg=True):
    """A random transcoder in the official GPT-2 format (pchlenski/gpt2-transcoders): a pickled dict."""
    g = torch.Generator().manual_seed(seed)
    sd = {
        "W_enc": torch.randn(d, width, generator=g),
        "W_dec": torch.randn(width, d, generator=g),
        "b_enc": torch.randn(width, generator=g) - 1.0,
        "b_dec": torch.randn(d, generator=g),
        "b_dec_out": torch.randn(d, generator=g),
    }
    torch.save({"cfg": LanguageModelSAERunnerConfig(d_in=d), "state_dict": sd} if with_cfg else sd, path)
    return sd


def test_load_official_transcoder_maps_the_keys_weights_only(tmp_path):
    path = tmp_path / "final_sparse_autoencoder_gpt2-small_blocks.0.ln2.hook_normalized_24.pt"
    sd = _write_official(path, 16, 24)
    with pytest.raises(Exception):  # noqa: B017 - the plain weights-only load refuses the pickled config
        torch.load(path, weights_only=True)
    tc = load_official_transcoder(path)
    assert (tc.d_in, tc.width, tc.d_out) == (16, 24, 16)
    for k in ("W_enc", "W_dec", "b_enc", "b_dec"):
        assert torch.equal(getattr(tc, k).detach(), sd[k])
    x = torch.randn(5, 16)
    z = torch.relu(x @ sd["W_enc"] + sd["b_enc"])  # no input centring, b_dec_out dropped: the official reading
    y_hat, z_tc = tc(x)
    assert torch.allclose(z_tc, z) and torch.allclose(y_hat, z @ sd["W_dec"] + sd["b_dec"], atol=1e-5)
    _write_official(tmp_path / "bare.pt", 4, 6, with_cfg=False)  # a bare state dict loads too
    assert load_official_transcoder(tmp_path / "bare.pt").width == 6
    torch.save({"state_dict": {"W_enc": torch.zeros(4, 6)}}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="lacks"):
        load_official_transcoder(tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="path"):
        load_official_transcoder(tmp_path / "missing.pt")
    with pytest.raises(TypeError, match="path"):
        load_official_transcoder(3)


def test_weightlens_gpt2_on_a_tiny_random_gpt2_with_official_files(tmp_path):
    """The paper scale's path: the tiny random GPT-2, random transcoders written in the official format."""
    from iclr26.hf import load_pretrained, write_tiny_model

    lm = load_pretrained(str(write_tiny_model("gpt2", tmp_path / "gpt2")), "causal_lm").eval()
    d, vocab = lm.config.n_embd, lm.config.vocab_size
    tcs = {}
    for layer in range(2):
        _write_official(tmp_path / f"l{layer}.pt", d, 12, seed=layer)
        tcs[layer] = load_official_transcoder(tmp_path / f"l{layer}.pt")
    ids = torch.randint(vocab, (3, 5))
    x, y = mlp_io(lm, ids, "transformer.h.1.ln_2", "transformer.h.1.mlp", stop_layer=2, read_input=True)
    xn, _ = mlp_io(lm, ids, "transformer.h.1.ln_2", "transformer.h.1.mlp", stop_layer=2)
    with torch.no_grad():
        assert torch.allclose(lm.transformer.h[1].ln_2(x), xn, atol=1e-5)  # the raw residual before ln_2
    res = weightlens_gpt2(lm, tcs, bos=2, threshold_tokens=1.0, threshold_features=1.0)
    assert len(res) == 24 and all(set(r.tokens) <= set(r.candidates) for r in res.values())
    assert any(r.links for (layer, _), r in res.items() if layer == 1)
    with pytest.raises(ValueError, match="transcoders"):
        weightlens_gpt2(lm, {1: tcs[1]})
    with pytest.raises(TypeError, match="GPT-2"):
        weightlens_gpt2(torch.nn.Linear(2, 2), tcs)
