"""Unit tests of iclr26.diffusion: schedules, noising, losses, samplers, exact scores, memorisation metrics."""

import math

import numpy as np
import pytest
import torch

from iclr26.diffusion import (
    AlphaSigma,
    Noised,
    NoiseSchedule,
    PrecisionRecall,
    ddim_invert,
    ddim_sample,
    ddpm_sample,
    empirical_score,
    eps_loss,
    frechet_distance,
    gmm_logpdf,
    gmm_sample,
    gmm_score,
    improved_precision_recall,
    make_schedule,
    memorized_fraction,
    nn_distance_ratio,
    ou_alpha_sigma,
    ou_noise,
    ou_sample,
    q_sample,
    score_loss,
)


def _gmm(K=3, d=2, scale=0.2, seed=0):  # noqa: N803
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(K, d, generator=g, dtype=torch.float64) * 2
    covs = torch.eye(d, dtype=torch.float64).repeat(K, 1, 1) * scale
    return means, covs, torch.full((K,), 1 / K, dtype=torch.float64)


def test_ou_alpha_sigma_variance_preserving():
    a, s = ou_alpha_sigma(torch.tensor([0.01, 1.0, 5.0]))
    assert torch.allclose(a**2 + s**2, torch.ones(3))
    a1, _ = ou_alpha_sigma(2.0)
    assert math.isclose(float(a1), math.exp(-1), rel_tol=1e-6)
    with pytest.raises(ValueError):
        ou_alpha_sigma(0.0)
    with pytest.raises(TypeError):
        ou_alpha_sigma("1")


def test_ou_noise_and_score_loss_target():
    x0 = torch.randn(5, 3)
    xt, eps = ou_noise(x0, 0.3)
    a, s = ou_alpha_sigma(0.3)
    assert torch.allclose(xt, a * x0 + s * eps, atol=1e-6)
    # the conditional score -eps/sigma has zero loss
    assert torch.allclose(score_loss(-eps / s, eps, float(s)), torch.zeros(5), atol=1e-8)
    with pytest.raises(ValueError):
        ou_noise(x0, torch.ones(4))
    with pytest.raises(ValueError):
        ou_noise(x0, -1.0)
    with pytest.raises(ValueError):
        score_loss(torch.zeros(5, 3), torch.zeros(5, 2), 1.0)
    with pytest.raises(TypeError):
        ou_noise(np.zeros((2, 2)), 0.1)


def test_gmm_score_matches_autograd_of_log_density():
    means, covs, w = _gmm()
    t = 0.4
    x = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    a, s = ou_alpha_sigma(torch.tensor(t, dtype=torch.float64))
    comps = torch.distributions.MultivariateNormal(a * means, a**2 * covs + s**2 * torch.eye(2, dtype=torch.float64))
    logp = torch.logsumexp(comps.log_prob(x[:, None, :]) + torch.log(w), dim=1).sum()
    (grad,) = torch.autograd.grad(logp, x)
    assert torch.allclose(gmm_score(x.detach(), t, means, covs, w), grad, atol=1e-8)
    # per-sample times give the same answer
    t_vec = torch.full((6,), t, dtype=torch.float64)
    assert torch.allclose(gmm_score(x.detach(), t_vec, means, covs, w), grad, atol=1e-8)
    with pytest.raises(ValueError):
        gmm_score(x.detach(), t, means, covs, torch.tensor([0.5, 0.5, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError):
        gmm_score(torch.zeros(2, 3, dtype=torch.float64), t, means, covs, w)


def test_empirical_score_is_score_of_noised_training_set():
    data = torch.randn(7, 3, dtype=torch.float64)
    t = 0.2
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    a, s = ou_alpha_sigma(torch.tensor(t, dtype=torch.float64))
    logp = torch.logsumexp(-((x[:, None] - a * data[None]) ** 2).sum(-1) / (2 * s**2), dim=1).sum()
    (grad,) = torch.autograd.grad(logp, x)
    assert torch.allclose(empirical_score(x.detach(), t, data, chunk=3), grad, atol=1e-8)
    with pytest.raises(ValueError):
        empirical_score(x.detach(), t, torch.zeros(7, 2, dtype=torch.float64))
    with pytest.raises(ValueError):
        empirical_score(x.detach(), t, data, chunk=0)


def test_loss_gap_equals_fisher_on_a_tiny_mixture():
    means, covs, w = _gmm()
    g = torch.Generator().manual_seed(1)
    data = gmm_sample(8, means, covs, w, generator=g)
    t, m = 0.05, 40_000
    x0 = data[torch.arange(m) % 8]
    xt, eps = ou_noise(x0, t, generator=g)
    s = float(ou_alpha_sigma(t)[1])
    st, se = gmm_score(xt, t, means, covs, w), empirical_score(xt, t, data)
    gap = (score_loss(st, eps, s) - score_loss(se, eps, s)).mean()
    fisher = (se - st).pow(2).sum(1).mean()
    assert abs(float(gap / fisher) - 1) < 0.05


def test_schedules_and_q_sample():
    for kind in ("linear", "cosine"):
        sched = make_schedule(100, kind)
        assert isinstance(sched, NoiseSchedule) and sched.T == 100
        assert bool(torch.all(sched.alpha_bars[1:] < sched.alpha_bars[:-1]))
    sched = make_schedule(50)
    x0 = torch.randn(3, 1, 4, 4)
    xk, eps = q_sample(x0, 10, sched)
    ab = sched.alpha_bars[10]
    assert torch.allclose(xk, ab.sqrt() * x0 + (1 - ab).sqrt() * eps, atol=1e-6)
    with pytest.raises(ValueError):
        make_schedule(10, "quadratic")
    with pytest.raises(ValueError):
        make_schedule(0)
    with pytest.raises(ValueError):
        q_sample(x0, 50, sched)
    with pytest.raises(TypeError):
        q_sample(x0, 1.5, sched)
    with pytest.raises(TypeError):
        q_sample(x0, 1, "linear")


def test_eps_loss_and_samplers_run_and_validate():
    sched = make_schedule(20)
    model = lambda x, k: torch.zeros_like(x)  # predicts no noise
    x0 = torch.rand(4, 1, 2, 2)
    assert float(eps_loss(model, x0, sched)) > 0
    assert eps_loss(model, x0, sched, reduction="none").shape == (4,)
    g = torch.Generator().manual_seed(0)
    outs = (
        ddpm_sample(model, (3, 1, 2, 2), sched, generator=g),
        ddim_sample(model, (3, 1, 2, 2), sched, steps=5, generator=g),
    )
    for out in outs:
        assert out.shape == (3, 1, 2, 2) and torch.isfinite(out).all() and float(out.abs().max()) <= 1 + 1e-5
    # DDIM with eta=0 is deterministic given x_T
    x_T = torch.randn(2, 1, 2, 2)
    lin = lambda x, k: 0.1 * x
    first = ddim_sample(lin, (2, 1, 2, 2), sched, steps=4, x_T=x_T)
    assert torch.equal(first, ddim_sample(lin, (2, 1, 2, 2), sched, steps=4, x_T=x_T))
    with pytest.raises(ValueError):
        ddim_sample(model, (2, 1, 2, 2), sched, steps=50)
    with pytest.raises(ValueError):
        ddim_sample(model, (2, 1, 2, 2), sched, eta=2.0)
    with pytest.raises(TypeError, match="shape"):
        ddpm_sample(model, [2, 2], sched)
    with pytest.raises(ValueError, match=r"shape\[1\]"):
        ddpm_sample(model, (2, 0), sched)
    with pytest.raises(ValueError):
        eps_loss(model, x0, sched, reduction="sum")


def test_ou_sample_with_exact_empirical_score_memorises():
    g = torch.Generator().manual_seed(0)
    data = torch.randn(5, 2, generator=g, dtype=torch.float64) * 3
    times = torch.logspace(math.log10(6.0), -3, 80, dtype=torch.float64)
    x_T = torch.randn(200, 2, generator=g, dtype=torch.float64)
    xs = ou_sample(lambda x, t: empirical_score(x, t, data), x_T, times, generator=g)
    assert memorized_fraction(xs, data) > 0.9
    xs_ode = ou_sample(lambda x, t: empirical_score(x, t, data), x_T, times, stochastic=False)
    assert memorized_fraction(xs_ode, data) > 0.9
    with pytest.raises(ValueError):
        ou_sample(lambda x, t: x, x_T, torch.tensor([0.1, 0.5], dtype=torch.float64))


def test_nn_ratio_and_memorized_fraction():
    train = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    samples = torch.tensor([[0.1, 0.0], [5.0, 0.0]])
    r = nn_distance_ratio(samples, train)
    assert math.isclose(float(r[0]), 0.1 / math.hypot(9.9, 0.0), rel_tol=1e-6)
    assert math.isclose(float(r[1]), 1.0, rel_tol=1e-6)
    assert torch.allclose(nn_distance_ratio(samples, train, squared=True), r**2)
    assert memorized_fraction(samples, train) == 0.5
    assert memorized_fraction(samples, train, threshold=1 / 9, squared=True) == memorized_fraction(samples, train)
    with pytest.raises(ValueError):
        memorized_fraction(samples, train, threshold=1.5)
    with pytest.raises(ValueError):
        nn_distance_ratio(samples, train[:1])
    with pytest.raises(ValueError):
        nn_distance_ratio(samples, torch.zeros(3, 3))


def test_frechet_distance():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2000, 3))
    assert frechet_distance(a, a) < 1e-8
    b = a + np.array([1.0, 0, 0])
    assert math.isclose(frechet_distance(a, b), 1.0, rel_tol=1e-6)
    # two Gaussians with covariances I and 4I: FD = 3·(1 + 4 - 2·2) = 3
    assert abs(frechet_distance(torch.tensor(a), torch.tensor(2 * rng.normal(size=(200_000, 3)))) - 3) < 0.15
    with pytest.raises(ValueError):
        frechet_distance(a, a[:, :2])
    with pytest.raises(TypeError):
        frechet_distance([[1.0]], a)


def test_improved_precision_recall_exact_cases():
    rng = np.random.default_rng(0)
    real = rng.normal(size=(50, 4))
    assert improved_precision_recall(real, real.copy()) == (1.0, 1.0)
    far = torch.tensor(real + 1000.0)
    assert improved_precision_recall(torch.tensor(real), far, k=3) == (0.0, 0.0)
    # 1-D by hand, k = 1: real {0, 1, 2} has radii (1, 1, 1), manifold [-1, 3]; fake {2.5, 10, 10.5} has
    # radii (7.5, 0.5, 0.5): manifold [-5, 10] ∪ [9.5, 11] holds every real point
    p, r = improved_precision_recall(np.array([[0.0], [1.0], [2.0]]), np.array([[2.5], [10.0], [10.5]]), k=1)
    assert (p, r) == (pytest.approx(1 / 3), 1.0)
    # a mode-dropping generator: high precision, recall ≈ the share of real mass it covers
    two_modes = np.concatenate([rng.normal(size=(300, 2)), rng.normal(size=(300, 2)) + 50])
    p, r = improved_precision_recall(two_modes, rng.normal(size=(300, 2)), k=3, chunk=64)
    assert p > 0.9 and 0.4 < r < 0.55


def test_improved_precision_recall_bad_input():
    a = np.zeros((5, 2))
    with pytest.raises(TypeError, match="real_feats"):
        improved_precision_recall([[0.0, 1.0]], a)
    with pytest.raises(ValueError, match="fake_feats"):
        improved_precision_recall(a, np.zeros(5))
    with pytest.raises(ValueError, match="feature dimension"):
        improved_precision_recall(a, np.zeros((5, 3)))
    with pytest.raises(ValueError, match="k"):
        improved_precision_recall(a, a, k=0)
    with pytest.raises(ValueError, match="k \\+ 1"):
        improved_precision_recall(a, a, k=5)
    with pytest.raises(ValueError, match="real_feats"):
        improved_precision_recall(np.full((5, 2), np.nan), a)


def test_pairs_are_named_tuples_that_unpack():
    ab = ou_alpha_sigma(1.0)
    assert isinstance(ab, AlphaSigma) and ab._fields == ("alpha", "sigma")
    a, s = ab
    assert a is ab.alpha and s is ab.sigma and torch.allclose(a**2 + s**2, torch.ones(()))
    x0 = torch.randn(3, 2)
    for out in (ou_noise(x0, 0.5), q_sample(x0, 2, make_schedule(5))):
        assert isinstance(out, Noised) and out._fields == ("x", "noise")
        x, eps = out
        assert x.shape == eps.shape == x0.shape and x is out.x
    real = np.random.default_rng(0).normal(size=(20, 3))
    pr = improved_precision_recall(real, real + 0.01)
    assert isinstance(pr, PrecisionRecall) and pr._fields == ("precision", "recall")
    p, r = pr
    assert (p, r) == (pr.precision, pr.recall)


def test_numpy_scalars_are_numbers_and_wrong_types_are_type_errors():
    sched = make_schedule(np.int64(10), beta_start=np.float64(1e-4), beta_end=np.float32(0.02))
    assert torch.allclose(sched.betas, make_schedule(10).betas)
    a, s = ou_alpha_sigma(np.float32(0.5))
    assert torch.allclose(a, ou_alpha_sigma(0.5).alpha)
    x0 = torch.randn(2, 1, 2, 2)
    assert q_sample(x0, np.int64(3), sched).x.shape == x0.shape
    model = lambda x, k: torch.zeros_like(x)
    assert ddim_sample(model, (np.int64(2), 1, 2, 2), sched, steps=np.int64(3), eta=np.float64(0.5)).shape == x0.shape
    assert ddpm_sample(model, (2, 1, 2, 2), sched, device=torch.device("cpu")).shape == x0.shape
    with pytest.raises(TypeError, match="T must be an int"):
        make_schedule(10.0)
    with pytest.raises(TypeError, match="steps must be an int"):
        ddim_sample(model, (2, 1, 2, 2), sched, steps=3.0)
    with pytest.raises(ValueError, match=r"steps must be an int in \[1, 10\]"):
        ddim_sample(model, (2, 1, 2, 2), sched, steps=11)
    with pytest.raises(TypeError, match="eta must be a number"):
        ddim_sample(model, (2, 1, 2, 2), sched, steps=3, eta="0")
    with pytest.raises(TypeError, match=r"shape\[0\] must be an int"):
        ddpm_sample(model, (2.0, 1), sched)
    with pytest.raises(ValueError, match="clip_x0"):
        ddpm_sample(model, (2, 1), sched, clip_x0=0.0)
    with pytest.raises(ValueError, match="device"):
        ddpm_sample(model, (2, 1), sched, device="tpu9")
    with pytest.raises(TypeError, match="beta_start must be a number"):
        make_schedule(10, beta_start="1e-4")
    with pytest.raises(ValueError, match="kind must be one of"):
        make_schedule(10, kind="quadratic")
    with pytest.raises(TypeError, match="n must be an int"):
        gmm_sample(4.0, *_gmm())
    with pytest.raises(TypeError, match="chunk must be an int"):
        improved_precision_recall(np.zeros((5, 2)), np.ones((5, 2)), chunk=8.0)
    with pytest.raises(TypeError, match="threshold must be a number"):
        memorized_fraction(torch.zeros(2, 2), torch.randn(3, 2), threshold="1/3")
    with pytest.raises(TypeError, match="stochastic must be a bool"):
        ou_sample(lambda x, t: x, torch.zeros(2, 2), torch.tensor([0.5, 0.1]), stochastic=1)


def test_gmm_logpdf_matches_scipy_and_validates():
    from scipy.stats import multivariate_normal

    g = torch.Generator().manual_seed(0)
    means = torch.randn(3, 2, generator=g, dtype=torch.float64)
    a = torch.randn(3, 2, 2, generator=g, dtype=torch.float64)
    covs = a @ a.transpose(1, 2) + 0.3 * torch.eye(2, dtype=torch.float64)
    w = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    x = torch.randn(5, 2, generator=g, dtype=torch.float64)
    ref = np.log(
        sum(float(w[k]) * multivariate_normal(means[k].numpy(), covs[k].numpy()).pdf(x.numpy()) for k in range(3))
    )
    np.testing.assert_allclose(gmm_logpdf(x, means, covs, w).numpy(), ref, rtol=1e-10)
    # its gradient is the t -> 0 limit of the noised mixture's score
    xg = x.clone().requires_grad_(True)
    gmm_logpdf(xg, means, covs, w).sum().backward()
    torch.testing.assert_close(xg.grad, gmm_score(x, 1e-9, means, covs, w), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="columns"):
        gmm_logpdf(torch.zeros(2, 3, dtype=torch.float64), means, covs, w)
    with pytest.raises(TypeError):
        gmm_logpdf(x.numpy(), means, covs, w)


def _gaussian_eps(sched, var):
    """The exact ε-predictor of data ~ N(0, var·I): ε̂(x, k) = √(1-ᾱ) x / (ᾱ var + 1 - ᾱ)."""

    def eps(x, k):
        ab = sched.alpha_bars[k].reshape(-1, *([1] * (x.ndim - 1))).to(x.dtype)
        return (1 - ab).sqrt() * x / (ab * var + 1 - ab)

    return eps


def test_ddim_return_x0s_ends_at_the_sample_and_changes_nothing_else():
    sched = make_schedule(50)
    eps = _gaussian_eps(sched, 0.25)
    x_T = torch.randn(3, 1, 2, 2, generator=torch.Generator().manual_seed(1))
    plain = ddim_sample(eps, (3, 1, 2, 2), sched, steps=10, x_T=x_T)
    out, x0s = ddim_sample(eps, (3, 1, 2, 2), sched, steps=10, x_T=x_T, return_x0s=True)
    assert torch.equal(out, plain)
    assert x0s.shape == (10, 3, 1, 2, 2)
    torch.testing.assert_close(x0s[-1], out)
    with pytest.raises(TypeError, match="return_x0s"):
        ddim_sample(eps, (3, 1, 2, 2), sched, steps=10, x_T=x_T, return_x0s="yes")


def test_ddim_invert_round_trips_and_improves_with_more_steps():
    sched = make_schedule(200)
    eps = _gaussian_eps(sched, 0.25)
    x0 = 0.5 * torch.randn(4, 1, 3, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    errs = {}
    for steps in (5, 100):
        x_T = ddim_invert(eps, x0, sched, steps=steps)
        assert x_T.shape == x0.shape
        back = ddim_sample(eps, tuple(x0.shape), sched, steps=steps, x_T=x_T, clip_x0=None)
        errs[steps] = float((back - x0).pow(2).mean())
    assert errs[100] < 1e-3 and errs[100] < errs[5]
    # the inverted noise has about unit variance (x0 has variance 0.25)
    assert 0.5 < float(ddim_invert(eps, x0, sched, steps=100).std()) < 2.0
    # a point mass: every x̂_0 is the point, so inversion then sampling is exact
    point = torch.full((2, 1, 2, 2), 0.3, dtype=torch.float64)
    exact = lambda x, k: (
        (x - sched.alpha_bars[k].sqrt()[:, None, None, None] * point)
        / (1 - sched.alpha_bars[k]).sqrt()[:, None, None, None]
    )
    back = ddim_sample(exact, (2, 1, 2, 2), sched, steps=7, x_T=ddim_invert(exact, point, sched, steps=7), clip_x0=None)
    torch.testing.assert_close(back, point)
    with pytest.raises(TypeError, match="model"):
        ddim_invert(None, x0, sched)
    with pytest.raises(ValueError, match="steps"):
        ddim_invert(eps, x0, sched, steps=0)
    with pytest.raises(ValueError, match="x0"):
        ddim_invert(eps, torch.ones(3), sched)
    with pytest.raises(ValueError, match="clip_x0"):
        ddim_invert(eps, x0, sched, clip_x0=-1.0)
