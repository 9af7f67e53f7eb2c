"""Unit tests of iclr26.sae: the SAE family, the Temporal SAE, metrics, planted data and the transformers path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26.data import planted_slow_fast
from iclr26.sae import (
    CodeAttention,
    GroupedTopKSAE,
    ReLUSAE,
    TemporalSAE,
    TopKSAE,
    absorption,
    angular_variance,
    block_contrast,
    calibrate_lambda,
    cosine_gram,
    dead_fraction,
    dense_fraction,
    dictionary_recovery,
    feature_latent_corr,
    firing_rates,
    fista,
    fit_sae,
    fit_temporal_sae,
    fvu,
    ista,
    k_sparse_probe_f1,
    l0,
    lasso_objective,
    nmse,
    part_variance_explained,
    scaling_factor,
    spectral_norm_sq,
    splitting,
    step_change,
    variance_explained,
)


# ------------------------------------------------------------------------------------------------ standard SAEs
def test_topk_sae_shapes_and_sparsity():
    torch.manual_seed(0)
    sae = TopKSAE(8, 32, k=3)
    x = torch.randn(5, 7, 8)
    x_hat, z = sae(x)
    assert x_hat.shape == x.shape and z.shape == (5, 7, 32)
    assert ((z > 0).sum(-1) <= 3).all() and (z >= 0).all()
    assert torch.allclose(sae.dictionary.norm(dim=1), torch.ones(32), atol=1e-5)


def test_decoder_norm_unit_is_invariant_to_row_scale():
    torch.manual_seed(0)
    sae = ReLUSAE(6, 12, l1=0.1)
    x = torch.randn(4, 6)
    before = sae(x)[0]
    with torch.no_grad():
        sae.W_dec.mul_(torch.rand(12, 1) * 5 + 0.1)
    assert torch.allclose(before, sae(x)[0], atol=1e-5)


def test_relu_sae_free_norm_penalty_weights_rows():
    sae = ReLUSAE(4, 3, l1=1.0, decoder_norm="free")
    with torch.no_grad():
        sae.W_dec.copy_(torch.tensor([[2.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 3.0, 0]]))
    z = torch.tensor([[1.0, 1.0, 0.0]])
    assert sae.penalty(z).item() == pytest.approx(3.0)


def test_fit_sae_recovers_planted_dictionary():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    atoms = rng.standard_normal((8, 16))
    atoms /= np.linalg.norm(atoms, axis=1, keepdims=True)
    coef = np.zeros((2048, 8))
    idx = rng.integers(0, 8, 2048)
    coef[np.arange(2048), idx] = rng.uniform(1, 2, 2048)
    x = torch.tensor(coef @ atoms, dtype=torch.float32)
    sae = TopKSAE(16, 16, k=1)
    hist = fit_sae(sae, x, steps=200, batch_size=128, lr=2e-2, progress=False)
    assert hist["loss"].iloc[-1] < hist["loss"].iloc[0]
    rec = dictionary_recovery(sae.dictionary.detach(), torch.tensor(atoms, dtype=torch.float32))
    assert rec.mean_cos > 0.8  # random unit vectors in 16-d would give about 0.45
    assert fvu(x, sae(x)[0].detach()) < 0.3


# ------------------------------------------------------------------------------------------------ TopK fast path
_TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def _assert_rel(fast, ref, tol, what, scale=None):
    """``max |fast - ref| <= tol * max |ref|`` (or ``tol * scale``): a relative error per tensor."""
    fast, ref = fast.detach(), ref.detach()
    scale = float(ref.abs().max()) if scale is None else scale
    err = float((fast - ref).abs().max())
    assert err <= tol * max(scale, 1e-30), f"{what}: max error {err:.3g} vs scale {scale:.3g}"


def _twin_topk(d_in, width, k, decoder_norm, dtype, b_dec, seed=0):
    """A dense reference TopKSAE and a fast copy with the same (deliberately generic) weights."""
    torch.manual_seed(seed)
    ref = TopKSAE(d_in, width, k=k, decoder_norm=decoder_norm).to(dtype)
    with torch.no_grad():
        ref.W_enc.add_(0.3 * torch.randn_like(ref.W_enc))  # untie the encoder from the decoder
        ref.W_dec.mul_(torch.rand(width, 1, dtype=dtype) * 2 + 0.3)  # rows of unequal norm
        ref.b_enc.normal_(std=0.2)
        if b_dec:
            ref.b_dec.normal_()
    fast = TopKSAE(d_in, width, k=k, decoder_norm=decoder_norm, fast=True).to(dtype)
    fast.load_state_dict(ref.state_dict())
    return ref, fast


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("decoder_norm", ["unit", "free"])
@pytest.mark.parametrize("k", [1, 5, 32])  # 32 = width
@pytest.mark.parametrize("b_dec", [False, True])
def test_topk_fast_path_matches_dense_reference(dtype, decoder_norm, k, b_dec):
    tol = _TOL[dtype]
    ref, fast = _twin_topk(12, 32, k, decoder_norm, dtype, b_dec)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 16, 12, generator=gen, dtype=dtype) + 0.5  # leading axes, not centred
    # forward: reconstruction and the dense code
    (xr, zr), (xf, zf) = ref(x), fast(x)
    assert zf.shape == zr.shape == (4, 16, 32)
    _assert_rel(xf, xr, tol, "x_hat")
    _assert_rel(zf, zr, tol, "z")
    # loss, metrics and every parameter's gradient
    (lr, mr), (lf, mf) = ref.loss(x), fast.loss(x)
    _assert_rel(lf, lr, tol, "loss")
    _assert_rel(mf["mse"], mr["mse"], tol, "mse")
    assert float(mf["l0"]) == float(mr["l0"])
    lr.backward()
    lf.backward()
    for (name, pr), pf in zip(ref.named_parameters(), fast.parameters()):
        _assert_rel(pf.grad, pr.grad, tol, f"grad {name}")
    # 20 Adam steps on fresh batches
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (ref, fast)]
    for _ in range(20):
        xb = torch.randn(64, 12, generator=gen, dtype=dtype) + 0.5
        for m, opt in zip((ref, fast), opts):
            opt.zero_grad()
            m.loss(xb)[0].backward()
            opt.step()
    for (name, pr), pf in zip(ref.named_parameters(), fast.parameters()):
        _assert_rel(pf.detach(), pr.detach(), tol, f"{name} after 20 Adam steps")


def test_topk_fast_path_with_fewer_positive_than_k():
    """Tokens with fewer than k positive pre-activations: the empty slots hold zeros with no gradient."""
    ref, fast = _twin_topk(10, 24, 8, "unit", torch.float64, True)
    with torch.no_grad():
        for m in (ref, fast):
            m.b_enc.fill_(-2.0)
    x = torch.randn(50, 10, dtype=torch.float64)
    assert ((ref.pre_activations(x) > 0).sum(-1) < 8).any()
    lr, lf = ref.loss(x)[0], fast.loss(x)[0]
    lr.backward()
    lf.backward()
    _assert_rel(lf, lr, 1e-10, "loss")
    _assert_rel(fast(x)[1], ref(x)[1], 1e-10, "z")
    for (name, pr), pf in zip(ref.named_parameters(), fast.parameters()):
        _assert_rel(pf.grad, pr.grad, 1e-10, f"grad {name}")


@pytest.mark.parametrize("n, width, k", [(64, 4096, 32), (50, 256, 4), (33, 1000, 3), (20, 96, 1), (9, 64, 64)])
def test_topk_select_is_exact(n, width, k):
    from iclr26.sae.kernel import _group_size, _topk_select

    torch.manual_seed(0)
    for pre in (torch.randn(n, width), torch.randint(0, 4, (n, width)).float()):  # distinct values, many ties
        vals, idx = _topk_select(pre, k)
        ref_vals, _ = pre.topk(k, dim=-1)
        assert torch.equal(vals.sort(-1).values, ref_vals.sort(-1).values)
        assert torch.equal(pre.gather(1, idx), vals)
        assert (idx.sort(-1).values.diff(dim=-1) > 0).all()  # k distinct latents per token
    assert _group_size(4096, 32) == 8 and _group_size(1000, 3) == 8 and _group_size(96, 1) == 8
    assert _group_size(64, 64) == 1 and _group_size(32, 5) == 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_topk_fast_path_grouped_and_chunked(dtype, monkeypatch):
    """Wide enough for the grouped top-k, and pre-activations computed a few (uneven) token blocks at a time."""
    import iclr26.sae.kernel as sae_mod

    monkeypatch.setattr(sae_mod, "_CHUNK_ELEMENTS", 256 * 7)  # blocks of 7 tokens
    tol = _TOL[dtype]
    ref, fast = _twin_topk(16, 256, 4, "unit", dtype, True)
    assert sae_mod._group_size(256, 4) == 8
    x = torch.randn(3, 17, 16, dtype=dtype)
    (lr, mr), (lf, mf) = ref.loss(x), fast.loss(x)
    _assert_rel(lf, lr, tol, "loss")
    assert float(mf["l0"]) == float(mr["l0"])
    _assert_rel(fast(x)[1], ref(x)[1], tol, "z")
    lr.backward()
    lf.backward()
    for (name, pr), pf in zip(ref.named_parameters(), fast.parameters()):
        _assert_rel(pf.grad, pr.grad, tol, f"grad {name}")


def test_topk_sparse_code_gradcheck():
    """The custom backward against finite differences, through all three outputs (recon, vals; idx is an index)."""
    from iclr26.sae.kernel import _TopKSparseCode

    torch.manual_seed(0)
    xc = torch.randn(7, 5, dtype=torch.float64, requires_grad=True)
    W_enc = torch.randn(5, 9, dtype=torch.float64, requires_grad=True)
    b_enc = (0.1 * torch.randn(9, dtype=torch.float64)).requires_grad_()
    D = torch.randn(9, 5, dtype=torch.float64, requires_grad=True)

    def f(xc, W_enc, b_enc, D):
        recon, vals, idx = _TopKSparseCode.apply(xc, W_enc, b_enc, D, 3)
        return recon, vals

    assert torch.autograd.gradcheck(f, (xc, W_enc, b_enc, D))
    assert torch.autograd.gradcheck(lambda xc, W, D: _TopKSparseCode.apply(xc, W, None, D, 3)[0], (xc, W_enc, D))


def test_fit_sae_fast_matches_dense():
    """The whole recipe (AdamW, warmup-cosine, clipping) gives the same history and weights on both paths."""
    x = torch.randn(256, 8, dtype=torch.float64)
    ref, fast = _twin_topk(8, 24, 3, "unit", torch.float64, False)
    hists = [fit_sae(m, x, steps=30, batch_size=64, lr=1e-2, progress=False) for m in (ref, fast)]
    assert np.allclose(hists[0]["loss"], hists[1]["loss"], rtol=1e-10, atol=0)
    _assert_rel(fast.W_dec.detach(), ref.W_dec.detach(), 1e-10, "W_dec")
    _assert_rel(fast.W_enc.detach(), ref.W_enc.detach(), 1e-10, "W_enc")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_temporal_sae_fast_matches_dense(dtype):
    tol = _TOL[dtype]
    torch.manual_seed(0)
    ref = TemporalSAE(8, 32, k=3, scaling_factor=1.7).to(dtype)
    with torch.no_grad():
        ref.b.normal_()
    fast = TemporalSAE(8, 32, k=3, scaling_factor=1.7, fast=True).to(dtype)
    fast.load_state_dict(ref.state_dict())
    x = torch.randn(3, 6, 8, dtype=dtype)
    (xr, outr), (xf, outf) = ref(x, k=4), fast(x, k=4)
    _assert_rel(xf, xr, tol, "x_hat")
    for key in ("novel_codes", "pred_codes", "novel_recons", "pred_recons"):
        _assert_rel(outf[key], outr[key], tol, key)
    (lr, _), (lf, _) = ref.loss(x, gamma=0.1), fast.loss(x, gamma=0.1)  # gamma > 0: gradient through the code too
    _assert_rel(lf, lr, tol, "loss")
    lr.backward()
    lf.backward()
    scale = max(float(p.grad.abs().max()) for p in ref.parameters())  # some gradients are zero up to rounding
    for (name, pr), pf in zip(ref.named_parameters(), fast.parameters()):
        _assert_rel(pf.grad, pr.grad, tol, f"grad {name}", scale=scale)


# ------------------------------------------------------------------------------------------------ Temporal SAE
def test_temporal_sae_output_and_causality():
    torch.manual_seed(0)
    tfa = TemporalSAE(8, 32, k=2)
    x = torch.randn(3, 10, 8)
    x_hat, out = tfa(x, return_pattern=True)
    assert x_hat.shape == x.shape
    assert out["pred_codes"].shape == out["novel_codes"].shape == (3, 10, 32)
    assert ((out["novel_codes"] > 0).sum(-1) <= 2).all()
    assert out["attn"].shape == (3, 1, 4, 10, 10)
    assert torch.allclose(out["attn"].sum(-1), torch.ones(3, 1, 4, 10))
    # the first position sees only the zero context; predictions at t never use tokens after t
    x2 = x.clone()
    x2[:, 6:] = torch.randn(3, 4, 8)
    _, out2 = tfa(x2)
    assert torch.allclose(out["pred_codes"][:, :6], out2["pred_codes"][:, :6], atol=1e-5)


def _raw_prediction(tfa, x, t):
    """The predicted code's direction at position t (before the least-squares scale alpha)."""
    _, out = tfa(x)
    return out["pred_codes"][:, t] / out["alpha"][:, t, :1]


class _NoShift(TemporalSAE):
    """A variant as the chapter's exercise writes it: the context includes the current token's own code."""

    def context_codes(self, u):
        return u


class _MeanOfPast(TemporalSAE):
    """A variant predictor: the mean of the context codes up to each position, no attention pattern."""

    def predict_codes(self, layer, ctx, u, return_pattern=False):
        return ctx.cumsum(1) / torch.arange(1, ctx.shape[1] + 1, dtype=ctx.dtype)[:, None], None


@pytest.mark.parametrize("cls, shift", [(TemporalSAE, True), (_NoShift, False)])
def test_temporal_sae_shift_means_token_cannot_predict_itself(cls, shift):
    """With the shift, position t attends to the codes of tokens 0..t-1 only: with the query switched off (uniform
    attention), the predicted direction at t cannot change when token t changes. A subclass without the shift
    (overriding ``context_codes``) lets it change."""
    torch.manual_seed(0)
    tfa = cls(8, 32, k=2)
    with torch.no_grad():
        for layer in tfa.attn_layers:
            layer.q_target.weight.zero_()
            layer.q_target.bias.zero_()
    x = torch.randn(2, 6, 8)
    x2 = x.clone()
    x2[:, 3] = torch.randn(2, 8)
    same = torch.allclose(_raw_prediction(tfa, x, 3), _raw_prediction(tfa, x2, 3), atol=1e-5)
    assert same is shift
    # causal in every case: earlier positions never see token 3
    _, a = tfa(x)
    _, b = tfa(x2)
    assert torch.allclose(a["pred_codes"][:, :3], b["pred_codes"][:, :3], atol=1e-5)


def test_temporal_sae_reconstruction_is_pred_plus_novel():
    torch.manual_seed(0)
    tfa = TemporalSAE(8, 32, k=2)
    x = torch.randn(2, 6, 8)
    # the reconstruction is exactly pred + novel through the tied dictionary
    x_hat, out = tfa(x)
    recon = (out["pred_codes"] + out["novel_codes"]) @ tfa.D + tfa.b
    assert torch.allclose(x_hat, recon, atol=1e-5)


def test_temporal_sae_alpha_is_least_squares():
    torch.manual_seed(0)
    tfa = TemporalSAE(8, 32, novel="nullify", scaling_factor=2.0)
    x = torch.randn(2, 5, 8)
    x_hat, out = tfa(x)
    # nullify: x_hat*s - b is the projection of x*s - b onto the predicted direction -> residual orthogonal to it
    xt = x * 2.0 - tfa.b
    resid = xt - (x_hat * 2.0 - tfa.b)
    direction = out["pred_recons"] * 2.0
    assert (resid * direction).sum(-1).abs().max() < 1e-3


def test_temporal_sae_variants_and_training():
    torch.manual_seed(0)
    data = planted_slow_fast(16, 16, 8, n_topics=3, n_slow=4, atoms_per_topic=2, n_fast=8, k_fast=1, seed=0)
    for cls, kw in ((_NoShift, {}), (_MeanOfPast, {}), (TemporalSAE, {"novel": "relu"})):
        tfa = cls(8, 16, k=2, **kw)
        x_hat, out = tfa(data.x, return_pattern=True)
        assert x_hat.shape == data.x.shape and torch.isfinite(x_hat).all()
        assert (out["attn"] is None) == (cls is _MeanOfPast)
    # a variant overriding a hook computes exactly what the hook says: the mean of past codes, scaled by alpha
    torch.manual_seed(0)
    variant = _MeanOfPast(8, 16, k=2)
    _, out = variant(data.x)
    u = torch.relu((data.x - variant.b) * variant.lam @ variant.D.T)
    ctx = torch.cat([torch.zeros_like(u[:, :1]), u[:, :-1]], dim=1)
    expected = torch.relu(ctx.cumsum(1) / torch.arange(1, ctx.shape[1] + 1)[:, None]) * out["alpha"]
    torch.testing.assert_close(out["pred_codes"], expected)
    tfa = TemporalSAE(8, 16, k=2, scaling_factor=scaling_factor(data.x))
    hist = fit_temporal_sae(tfa, data.x, steps=40, batch_size=4, lr=3e-3, progress=False)
    assert hist["loss"].iloc[-1] < hist["loss"].iloc[0]
    hist = fit_temporal_sae(TemporalSAE(8, 16, novel="relu"), data.x, steps=5, gamma=0.1, progress=False)
    assert len(hist) >= 1


def test_from_official_roundtrip():
    torch.manual_seed(0)
    src = TemporalSAE(8, 16, k=2, n_heads=2, scaling_factor=0.5)
    sd = {k: v.clone() for k, v in src.state_dict().items()}
    sd["b"] = sd["b"].reshape(1, -1)  # the official checkpoints store b as (1, d)
    conf = {
        "llm": {"dimin": 8},
        "sae": {
            "exp_factor": 2,
            "kval_topk": 2,
            "n_heads": 2,
            "n_attn_layers": 1,
            "bottleneck_factor": 1,
            "sae_diff_type": "topk",
            "tied_weights": True,
            "scaling_factor": 0.5,
        },
    }
    dst = TemporalSAE.from_official(conf, sd)
    x = torch.randn(2, 5, 8)
    assert torch.allclose(src(x)[0], dst(x)[0], atol=1e-6)
    with pytest.raises(ValueError, match="conf"):
        TemporalSAE.from_official({}, sd)
    with pytest.raises(ValueError, match="tied"):
        TemporalSAE.from_official({**conf, "sae": {**conf["sae"], "tied_weights": False}}, sd)


# ------------------------------------------------------------------------------------------------ metrics
def test_metrics_values():
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    assert fvu(x, x) == 0.0
    assert fvu(x, torch.zeros_like(x)) == pytest.approx(1.0)
    assert variance_explained(x, 0.5 * x) == pytest.approx(0.75)
    z = torch.tensor([[1.0, 0.0, 2.0], [1.0, 0.0, 0.0], [3.0, 0.0, 0.0]])
    assert l0(z) == pytest.approx(4 / 3)
    assert dead_fraction(z) == pytest.approx(1 / 3)
    assert dense_fraction(z, 0.5) == pytest.approx(1 / 3)


def test_dictionary_recovery_hungarian():
    true = torch.eye(3)
    learned = torch.tensor([[0.0, 0.0, 2.0], [1.0, 0.1, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    rec = dictionary_recovery(learned, true, threshold=0.999)
    assert list(rec.match) == [1, 2, 0]
    assert rec.mean_cos > 0.99 and rec.recovered == pytest.approx(2 / 3)


def test_gram_and_block_contrast():
    z = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
    g = cosine_gram(z)
    assert g.shape == (4, 4) and np.allclose(np.diag(g), 1)
    assert block_contrast(g, [0, 0, 1, 1]) > 0.8


def test_cosine_gram_centres_by_default_as_the_official_demo():
    # a shared offset makes every raw row alike; centring removes it and leaves the two blocks
    z = torch.tensor([[5.0, 1.0, 0.0], [5.0, 1.0, 0.1], [5.0, 0.0, 1.0], [5.0, 0.1, 1.0]])
    raw, centred = cosine_gram(z, centre=False), cosine_gram(z)
    assert raw.min() > 0.9  # uncentred: everything looks alike
    np.testing.assert_allclose(centred, cosine_gram(z - z.mean(0)), atol=1e-12)
    assert centred[0, 1] > 0.9 and centred[0, 2] < -0.9
    assert block_contrast(centred, [0, 0, 1, 1]) > block_contrast(raw, [0, 0, 1, 1]) + 1.0
    with pytest.raises(TypeError, match="centre"):
        cosine_gram(z, centre=1)


def test_step_change_is_one_minus_cosine_of_consecutive_centred_codes():
    z = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]])
    sc = step_change(z, centre=False)
    assert sc.shape == (1, 3)
    np.testing.assert_allclose(sc[0], [0.0, 1.0, 1.0])  # same, orthogonal, then an all-zero row scores 1
    zc = z - z.mean(1, keepdim=True)
    expected = 1 - torch.nn.functional.cosine_similarity(zc[:, 1:].double(), zc[:, :-1].double(), dim=-1)
    np.testing.assert_allclose(step_change(z), expected.numpy(), atol=1e-12)
    # agrees with the diagonal above the main one of cosine_gram, sequence by sequence
    x = torch.randn(3, 9, 5, generator=torch.Generator().manual_seed(0))
    for i in range(3):
        np.testing.assert_allclose(step_change(x)[i], 1 - np.diag(cosine_gram(x[i]), 1), atol=1e-10)
    with pytest.raises(ValueError, match="3 dimensions"):
        step_change(torch.randn(4, 2))
    with pytest.raises(ValueError, match="2 time steps"):
        step_change(torch.randn(2, 1, 3))


def test_part_variance_explained_adds_up_for_uncorrelated_parts():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2000, 1, generator=g) * torch.tensor([[1.0, 0.0, 0.0]])
    b = torch.randn(2000, 1, generator=g) * torch.tensor([[0.0, 2.0, 0.0]])
    target = a + b + 0.1 * torch.randn(2000, 3, generator=g)
    va, vb = part_variance_explained(a, target), part_variance_explained(b, target)
    total = float(target.var(0).sum())
    assert va == pytest.approx(float(a.var(0).sum()) / total)
    assert va + vb == pytest.approx(part_variance_explained(a + b, target), abs=0.02)
    assert 0 < va < vb < 1  # never negative, unlike 1 - FVU of a part on its own
    assert part_variance_explained(a.reshape(100, 20, 3), target.reshape(100, 20, 3)) == pytest.approx(va)
    with pytest.raises(ValueError, match="same shape"):
        part_variance_explained(a[:, :2], target)
    with pytest.raises(ValueError, match="zero variance"):
        part_variance_explained(a, torch.ones_like(a))


def test_scaling_factor_conventions():
    x = torch.randn(500, 16, generator=torch.Generator().manual_seed(0)) * 3.0
    s_off, s_d = scaling_factor(x), scaling_factor(x, "sqrt_d")
    assert s_off == pytest.approx(1 / float(x.norm(dim=-1).mean()), rel=1e-6)  # the official: unit mean norm
    assert float((s_off * x).norm(dim=-1).mean()) == pytest.approx(1.0, rel=1e-5)
    assert float((s_d * x).pow(2).sum(-1).mean()) == pytest.approx(16.0, rel=1e-5)  # E||s x||^2 = d
    assert scaling_factor(x.reshape(50, 10, 16)) == pytest.approx(s_off)
    with pytest.raises(ValueError, match="convention"):
        scaling_factor(x, "unit")
    with pytest.raises(TypeError, match="convention"):
        scaling_factor(x, 1)


def test_fit_temporal_sae_cosine_ends_at_min_lr_ratio():
    data = planted_slow_fast(6, 10, 8, seed=0)
    hist = fit_temporal_sae(TemporalSAE(8, 16, k=2), data.x, steps=30, batch_size=2, lr=1e-2, warmup=5, progress=False)
    assert hist["lr"].iloc[-1] == pytest.approx(0.9e-2, rel=1e-3)  # the official min_lr is 0.9 of the peak
    assert hist["lr"].min() >= 0.9e-2 * (1 - 1e-3) or hist["lr"].idxmin() < 5  # only the warmup goes lower
    hist = fit_temporal_sae(
        TemporalSAE(8, 16, k=2), data.x, steps=30, batch_size=2, lr=1e-2, warmup=5, min_lr_ratio=0.0, progress=False
    )
    assert hist["lr"].iloc[-1] == pytest.approx(0.0, abs=1e-4)
    with pytest.raises(ValueError, match="min_lr_ratio"):
        fit_temporal_sae(TemporalSAE(8, 16, k=2), data.x, steps=3, min_lr_ratio=1.5, progress=False)


def test_planted_data_ground_truth():
    data = planted_slow_fast(4, 50, 12, switch_prob=0.2, noise=0.0, seed=1)
    assert data.x.shape == (4, 50, 12)
    assert torch.allclose(data.x, data.slow + data.fast, atol=1e-5)
    changed = torch.cat([torch.zeros(4, 1, dtype=torch.bool), data.topic[:, 1:] != data.topic[:, :-1]], 1)
    assert torch.equal(changed, data.boundary)
    assert ((data.fast_coef > 0).sum(-1) == 3).all()
    assert torch.allclose(data.fast, data.fast_coef @ data.fast_atoms, atol=1e-5)


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "make, err, match",
    [
        (lambda: TopKSAE(8, 4, k=5), ValueError, "k must be <= width"),
        (lambda: TopKSAE(8, 4, k=5, fast=True), ValueError, "k must be <= width"),
        (lambda: TopKSAE(8, 4, k=0, fast=True), ValueError, "k must be an int >= 1"),
        (lambda: TopKSAE(8, 4, k=2, fast=1), TypeError, "fast"),
        (lambda: TopKSAE(8, 4, k=2, fast="yes"), TypeError, "fast"),
        (lambda: TemporalSAE(8, 16, k=2, fast=None), TypeError, "fast"),
        (lambda: TopKSAE(8, 16, k=2, fast=True)(torch.randn(3, 7)), ValueError, "last dimension 8"),
        (lambda: TopKSAE(8, 16, k=2, fast=True).loss(torch.randn(3, 7)), ValueError, "last dimension 8"),
        (lambda: TopKSAE(8, 0, k=1), ValueError, "width"),
        (lambda: TopKSAE(8.0, 4, k=1), TypeError, "d_in"),
        (lambda: ReLUSAE(8, 4, l1=-1.0), ValueError, "l1"),
        (lambda: ReLUSAE(8, 4, decoder_norm="sphere"), ValueError, "decoder_norm"),
        (lambda: TemporalSAE(8, 16), ValueError, "k must be given"),
        (lambda: TemporalSAE(8, 16, k=2, novel="jump"), ValueError, "novel"),
        (lambda: TemporalSAE(8, 16, k=2, scaling_factor=0.0), ValueError, "scaling_factor"),
        (lambda: CodeAttention(10, n_heads=4), ValueError, "divisible"),
        (lambda: TopKSAE(8, 16, k=2)(torch.randn(3, 7)), ValueError, "last dimension 8"),
        (lambda: TopKSAE(8, 16, k=2)(torch.ones(3, 8, dtype=torch.long)), TypeError, "floating"),
        (lambda: TemporalSAE(8, 16, k=2)(torch.randn(3, 8)), ValueError, "3 dimensions"),
        (lambda: TemporalSAE(8, 16, k=2)([[1.0]]), TypeError, "torch.Tensor"),
        (lambda: fvu(torch.randn(3, 2), torch.randn(3, 3)), ValueError, "same shape"),
        (lambda: fvu(torch.ones(3, 2), torch.ones(3, 2)), ValueError, "zero variance"),
        (lambda: l0(torch.randn(3, 2), threshold=-1.0), ValueError, "threshold"),
        (lambda: dense_fraction(torch.randn(3, 2), frequency=2.0), ValueError, "frequency"),
        (lambda: dictionary_recovery(torch.randn(2, 3), torch.randn(3, 3)), ValueError, "at least as many"),
        (lambda: dictionary_recovery(torch.randn(4, 3), torch.randn(3, 2)), ValueError, "columns"),
        (lambda: block_contrast(np.eye(3), [0, 0]), ValueError, "segments"),
        (lambda: block_contrast(np.eye(3), [0, 0, 0]), ValueError, "two segments"),
        (lambda: planted_slow_fast(2, 8, 4, atoms_per_topic=20), ValueError, "atoms_per_topic"),
        (lambda: planted_slow_fast(2, 8, 4, switch_prob=1.5), ValueError, "switch_prob"),
        (lambda: planted_slow_fast(2, 1, 4), ValueError, "seq_len"),
        (lambda: fit_sae(TemporalSAE(4, 8, k=1), torch.randn(3, 4), steps=1), TypeError, "ReLUSAE or TopKSAE"),
        (lambda: fit_temporal_sae(TemporalSAE(4, 8, k=1), torch.randn(3, 4), steps=1), ValueError, "3 dimensions"),
        (lambda: fit_temporal_sae(TemporalSAE(4, 8, k=1), torch.randn(3, 2, 4), steps=0), ValueError, "steps"),
        (lambda: scaling_factor(torch.zeros(3, 4)), ValueError, "all zeros"),
    ],
)
def test_bad_input(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_fit_sae_seed_int_is_the_old_torch_stream_and_a_generator_works():
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))

    def run(seed):
        torch.manual_seed(1)
        sae = TopKSAE(4, 8, k=2)
        return fit_sae(sae, x, steps=3, batch_size=8, seed=seed, progress=False)["loss"].tolist(), sae

    (a, _), (b, _) = run(5), run(np.int64(5))
    assert a == b
    # the minibatch indices of an int seed come from torch.Generator().manual_seed(seed), as before
    gen = torch.Generator().manual_seed(5)
    drawn = [torch.randint(64, (8,), generator=gen) for _ in range(3)]
    torch.manual_seed(1)
    ref = TopKSAE(4, 8, k=2)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)
    from iclr26.train import fit

    expected = fit(
        ref,
        lambda m, bt: m.loss(bt),
        lambda step: x[drawn[step]],
        opt,
        steps=3,
        schedule="warmup_cosine",
        warmup=1,
        clip=1.0,
        progress=False,
    )["loss"].tolist()
    assert a == expected
    c, _ = run(np.random.default_rng(5))
    d, _ = run(np.random.default_rng(5))
    assert c == d


@pytest.mark.parametrize(
    "make, err, match",
    [
        (lambda: TopKSAE(np.int64(8), np.int64(16), k=np.int64(2)).k == 2, None, None),
        (lambda: TopKSAE(8, 16, k=2.0), TypeError, "k must be an int"),
        (lambda: ReLUSAE(8, 16, l1="0.1"), TypeError, "l1 must be a number"),
        (lambda: TopKSAE(8, 16, k=2, fast=np.bool_(False)).fast is False, None, None),
        (lambda: TemporalSAE(8, 16, k=2, scaling_factor="1"), TypeError, "scaling_factor must be a number"),
        (lambda: fit_sae(TopKSAE(4, 8, k=1), torch.randn(3, 4), steps=1.0), TypeError, "steps must be an int"),
        (lambda: fit_sae(TopKSAE(4, 8, k=1), torch.randn(3, 4), steps=1, lr=0.0), ValueError, "lr must be a number >"),
        (lambda: fit_sae(TopKSAE(4, 8, k=1), torch.randn(3, 4), steps=1, seed=0.5), TypeError, "seed"),
        (lambda: dense_fraction(torch.randn(3, 2), frequency="0.5"), TypeError, "frequency must be a number"),
        (lambda: l0(torch.randn(3, 2), threshold=None), TypeError, "threshold must be a number"),
    ],
)
def test_argument_types(make, err, match):
    if err is None:
        assert make()
        return
    with pytest.raises(err, match=match):
        make()


# --------------------------------------------------------------------------------------------- LocA-SAE: grouped TopK


def test_grouped_topk_per_group_l0_is_exact():
    torch.manual_seed(0)
    sae = GroupedTopKSAE(8, [6, 10, 4], [3, 1, 2])
    with torch.no_grad():
        sae.b_enc.fill_(50.0)  # every pre-activation positive: each group keeps exactly its k
    z = sae.encode(torch.randn(40, 8))
    per_group = [(z[:, a:b] > 0).sum(-1) for a, b in zip(sae.offsets, sae.offsets[1:])]
    assert [bool((g == k).all()) for g, k in zip(per_group, (3, 1, 2))] == [True, True, True]
    assert torch.allclose(sae.group_l0(z), torch.tensor([3.0, 1.0, 2.0]))
    assert sae.k == 6 and sae.width == 20
    # each group's code is the top-k of its own block of pre-activations
    x = torch.randn(5, 8)
    pre, z = sae.pre_activations(x), sae.encode(x)
    for a, b, k in zip(sae.offsets, sae.offsets[1:], (3, 1, 2)):
        top = pre[:, a:b].topk(k, dim=-1).indices
        assert torch.equal(z[:, a:b].gather(1, top), pre[:, a:b].gather(1, top).relu())
        assert int((z[:, a:b] != 0).sum()) <= 5 * k


def test_grouped_topk_from_topk_one_group_is_the_topk_sae():
    torch.manual_seed(1)
    sae = TopKSAE(8, 12, k=3)
    with torch.no_grad():
        sae.b_enc.normal_()
        sae.b_dec.normal_()
    perm = torch.randperm(12)
    one = GroupedTopKSAE.from_topk(sae, [perm], [3])
    x = torch.randn(30, 8)
    (xa, za), (xb, zb) = sae(x), one(x)
    assert torch.allclose(xa, xb, atol=1e-5)
    assert torch.allclose(za[:, perm], zb, atol=1e-6)  # latent i of the grouped SAE is latent perm[i]
    assert torch.equal(one.latent_order, perm)
    # two groups with ks summing to k: a constrained TopK (same dictionary, at most k_g per group)
    two = GroupedTopKSAE.from_topk(sae, [perm[:6], perm[6:]], [2, 1])
    z2 = two.encode(x)
    assert ((z2[:, :6] > 0).sum(-1) <= 2).all() and ((z2[:, 6:] > 0).sum(-1) <= 1).all()
    assert torch.allclose(two.dictionary, sae.dictionary[perm], atol=1e-6)


def test_grouped_usage_term_is_reported_but_has_no_gradient():
    torch.manual_seed(2)
    a = GroupedTopKSAE(6, [5, 5], [2, 1], usage_weight=1e-3).double()
    b = GroupedTopKSAE(6, [5, 5], [2, 1]).double()
    b.load_state_dict(a.state_dict())
    x = torch.randn(20, 6, dtype=torch.float64)
    (la, ma), (lb, _) = a.loss(x), b.loss(x)
    usage = ((a.encode(x) > 0).float().mean(0) - 3 / 10).pow(2).mean()
    assert float(ma["usage"]) == pytest.approx(float(usage)) and float(usage) > 0
    assert float((la - lb).detach()) == pytest.approx(1e-3 * float(usage), rel=1e-6)
    la.backward()
    lb.backward()
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa.grad, pb.grad)  # as in the official code: an indicator carries no gradient


def test_fit_sae_trains_a_grouped_sae():
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    sae = GroupedTopKSAE(8, [8, 8], [2, 1])
    hist = fit_sae(sae, x, steps=60, batch_size=64, lr=1e-2, progress=False)
    assert hist["loss"].iloc[-5:].mean() < hist["loss"].iloc[:5].mean()


def test_fit_sae_evaluates_over_training():
    """eval_fn runs every eval_every steps and at the end, in eval mode without gradients; its values join the
    history (the loca_sae chapter follows absorption and splitting over training this way)."""
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    seen = []

    def probe(m):
        seen.append((m.training, torch.is_grad_enabled()))
        return {"l0": float((m.encode(x) > 0).float().sum(1).mean())}

    hist = fit_sae(
        TopKSAE(8, 16, k=3), x, steps=25, batch_size=32, lr=1e-2, progress=False, eval_fn=probe, eval_every=10
    )
    evaluated = hist.dropna(subset=["l0"])
    assert evaluated["step"].tolist() == [10, 20, 25]
    assert evaluated["l0"].tolist() == pytest.approx([3.0, 3.0, 3.0])
    assert seen == [(False, False)] * 3
    with pytest.raises(TypeError, match="eval_fn"):
        fit_sae(TopKSAE(8, 16, k=3), x, steps=2, progress=False, eval_fn=3)


# --------------------------------------------------------------------------------------------- LocA-SAE: ISTA / FISTA
def _lasso_problem(seed=0, n=64, d=16, m=48):
    g = torch.Generator().manual_seed(seed)
    dic = torch.nn.functional.normalize(torch.randn(m, d, generator=g, dtype=torch.float64), dim=1)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return x, dic


def test_spectral_norm_sq_is_the_largest_singular_value_squared():
    _, dic = _lasso_problem()
    assert spectral_norm_sq(dic, iters=500) == pytest.approx(float(torch.linalg.matrix_norm(dic, 2)) ** 2, rel=1e-6)
    assert spectral_norm_sq(torch.zeros(3, 2)) == 0.0


def test_ista_is_monotone_from_a_feasible_start():
    x, dic = _lasso_problem(1)
    z0 = torch.rand(64, 48, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 0.5
    for nonneg in (True, False):
        _, trace = ista(x, dic, 0.05, 100, z0=z0, nonnegative=nonneg, return_trace=True)
        assert bool((trace[1:] <= trace[:-1] + 1e-12).all())  # never up, on any sample, at any step
        assert bool((trace[-1] < trace[0]).all())


def test_fista_is_not_monotone_but_faster():
    x, dic = _lasso_problem(2, n=200, m=64)
    _, trace = fista(x, dic, 0.01, 200, return_trace=True)
    rises = (trace[1:] > trace[:-1] + 1e-9).any(0)
    assert bool(rises.any())  # momentum overshoots: the objective goes up on some samples
    slow = lasso_objective(x, dic, ista(x, dic, 0.01, 200), 0.01)
    assert float(trace[-1].mean()) < float(slow.mean())  # faster than ISTA for the same number of steps


@pytest.mark.parametrize("nonneg", [True, False])
def test_ista_converges_to_the_kkt_point(nonneg):
    x, dic = _lasso_problem(3, n=20, m=24)
    lam = 0.1
    z = ista(x, dic, lam, 5000, nonnegative=nonneg)
    grad = (z @ dic - x) @ dic.T
    on = z != 0
    if nonneg:
        assert bool((z >= 0).all())
        assert float((grad[on] + lam).abs().max()) < 1e-6  # stationary on the support
        assert float((grad[~on] + lam).min()) > -1e-6  # no descent direction off it
    else:
        assert float((grad[on] + lam * z[on].sign()).abs().max()) < 1e-5
        assert float(grad[~on].abs().max()) <= lam + 1e-6


def test_calibrate_lambda_picks_the_closest_density():
    x, dic = _lasso_problem(4, n=50, m=32)
    cal = calibrate_lambda(x, dic, target_density=0.2, grid=[1e-3, 1e-2, 1e-1, 1.0], steps=200)
    assert bool(np.all(np.diff(cal.density) <= 0))  # a larger penalty fires fewer latents
    assert cal.lam == cal.grid[np.argmin(np.abs(cal.density - 0.2))]
    z = ista(x, dic, cal.lam, 200)
    assert float((z != 0).double().mean()) == pytest.approx(cal.density[list(cal.grid).index(cal.lam)])


# --------------------------------------------------------------------------------------------- LocA-SAE: metrics
def test_nmse_and_firing_rates():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert nmse(x, torch.zeros_like(x)) == pytest.approx(1.0)
    assert nmse(x, x * 0.5) == pytest.approx(0.25)
    z = torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, -1.0]])
    assert firing_rates(z).tolist() == [1.0, 0.0, 0.5]


def test_angular_variance_values():
    e1, e2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    x = torch.stack([e1, 3 * e1, e2, 2 * e2])
    z = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    av = angular_variance(x, z)
    assert av[0] == pytest.approx(0.0)  # one direction
    assert av[1] == pytest.approx(1 - 1 / np.sqrt(2))  # two orthogonal directions, equally often
    assert av[2] == 1.0  # never fires: the official code's value
    assert np.isnan(angular_variance(x, z, dead_value=float("nan"))[2])


def test_absorption_and_splitting_on_constructed_codes():
    rng = np.random.default_rng(0)
    n = 400
    y = rng.random(n) < 0.3
    child = y & (rng.random(n) < 0.5)  # half the positives: a child that absorbs the parent
    z = np.zeros((n, 10))
    z[y & ~child, 0] = 1.0  # parent latent fires only without the child
    z[child, 1] = 1.0  # child latent fires instead
    z[:, 2:] = rng.random((n, 8)) * (rng.random((n, 8)) < 0.1)  # noise latents
    ab = absorption(z, y)
    assert ab.shape == (1,)
    # main latent = 0 or 1 (both correlate with y); on the positives it is off exactly when the other one is on
    main = np.argmax(np.abs(feature_latent_corr(z, y))[0])
    other = 1 - main
    assert ab[0] == pytest.approx(float(np.mean(z[y, other] > 0)))
    # the feature is split across latents 0 and 1: two latents recover it, one cannot
    f1 = k_sparse_probe_f1(z, y, ks=(1, 2))
    assert f1[0, 1] == pytest.approx(1.0) and f1[0, 0] < 0.8
    assert splitting(z, y)[0] == pytest.approx(f1[0, 1] - f1[0, 0])
    # a monosemantic latent: no absorption, no splitting
    z_clean = z.copy()
    z_clean[:, 0] = y
    z_clean[:, 1] = 0
    assert absorption(z_clean, y)[0] == 0.0 and splitting(z_clean, y)[0] == pytest.approx(0.0)


@pytest.mark.parametrize(
    "make, err, match",
    [
        (lambda: GroupedTopKSAE(8, [4, 4], [2]), ValueError, "one k per group"),
        (lambda: GroupedTopKSAE(8, [4, 4], [2, 5]), ValueError, r"group_ks\[1\]=5 must be <="),
        (lambda: GroupedTopKSAE(8, [4, 0], [1, 1]), ValueError, "group_sizes"),
        (lambda: GroupedTopKSAE(8, 4, [1]), TypeError, "group_sizes"),
        (lambda: GroupedTopKSAE(8, [4], [1.5]), TypeError, "group_ks"),
        (lambda: GroupedTopKSAE(8, [], []), ValueError, "at least one group"),
        (lambda: GroupedTopKSAE(8, [4], [1], usage_weight=-1.0), ValueError, "usage_weight"),
        (lambda: GroupedTopKSAE.from_topk(ReLUSAE(4, 8), [range(8)], [1]), TypeError, "TopKSAE"),
        (lambda: GroupedTopKSAE.from_topk(TopKSAE(4, 8, k=1), [[0, 1], [1, 2]], [1, 1]), ValueError, "partition"),
        (lambda: GroupedTopKSAE.from_topk(TopKSAE(4, 4, k=1), [[0.0, 1.0], [2, 3]], [1, 1]), ValueError, "groups"),
        (lambda: GroupedTopKSAE.from_topk(TopKSAE(4, 4, k=1), "ab", [1]), TypeError, "groups"),
        (lambda: ista(torch.randn(3, 4), torch.randn(5, 4), -0.1, 10), ValueError, "lam"),
        (lambda: ista(torch.randn(3, 4), torch.randn(5, 4), 0.1, -1), ValueError, "steps"),
        (lambda: ista(torch.randn(3, 3), torch.randn(5, 4), 0.1, 10), ValueError, "x must have last dimension 4"),
        (lambda: ista(torch.randn(3, 4), torch.randn(5, 4), 0.1, 10, z0=-torch.ones(3, 5)), ValueError, "non-negative"),
        (lambda: ista(torch.randn(3, 4), torch.randn(5, 4), 0.1, 10, z0=torch.ones(2, 5)), ValueError, "one row per"),
        (lambda: ista(torch.randn(3, 4), torch.randn(5, 4), 0.1, 10, step_size=0.0), ValueError, "step_size"),
        (lambda: ista(torch.randn(3, 4), torch.randn(5, 4), 0.1, 10, nonnegative=1), TypeError, "nonnegative"),
        (lambda: ista([[1.0]], torch.randn(5, 1), 0.1, 10), TypeError, "x must be"),
        (lambda: ista(torch.randn(3, 4), torch.randn(4), 0.1, 10), ValueError, "dictionary must have 2"),
        (lambda: lasso_objective(torch.randn(3, 4), torch.randn(5, 4), torch.randn(3, 4), 0.1), ValueError, "z must"),
        (lambda: spectral_norm_sq(torch.randn(3, 4), iters=0), ValueError, "iters"),
        (lambda: calibrate_lambda(torch.randn(3, 4), torch.randn(5, 4), 1.5), ValueError, "target_density"),
        (lambda: calibrate_lambda(torch.randn(3, 4), torch.randn(5, 4), 0.1, grid=[]), ValueError, "grid"),
        (lambda: calibrate_lambda(torch.randn(3, 4), torch.randn(5, 4), 0.1, grid=[-1.0]), ValueError, "grid"),
        (lambda: nmse(torch.zeros(2, 3), torch.zeros(2, 3)), ValueError, "all zeros"),
        (lambda: angular_variance(torch.randn(3, 4), torch.randn(2, 5)), ValueError, "one row per row"),
        (lambda: angular_variance(torch.randn(3, 4), torch.randn(3, 5), dead_value="1"), TypeError, "dead_value"),
        (lambda: absorption(torch.rand(4, 6), [1, 0, 1, 0]), TypeError, "labels must be"),
        (lambda: absorption(torch.rand(4, 6), np.array([1, 0, 1])), ValueError, "labels must have shape"),
        (lambda: absorption(torch.rand(4, 6), np.array([1, 0, 2, 0])), ValueError, "binary"),
        (lambda: absorption(torch.rand(4, 6), np.array([1, 0, 1, 0]), n_aux=6), ValueError, "n_aux"),
        (lambda: k_sparse_probe_f1(torch.rand(4, 6), np.array([1, 0, 1, 0]), ks=(0,)), ValueError, "ks"),
        (lambda: k_sparse_probe_f1(torch.rand(4, 6), np.array([1, 0, 1, 0]), ks=2), TypeError, "ks"),
        (lambda: firing_rates(torch.rand(4, 6), threshold=-1.0), ValueError, "threshold"),
    ],
)
def test_loca_bad_input(make, err, match):
    with pytest.raises(err, match=match):
        make()
