"""Diffusion building blocks: schedules, forward noising, ε/score losses, DDPM/DDIM sampling, exact scores.

Two time conventions live side by side, because the theory papers and the image papers use different ones:

* **continuous OU / VP time** ``t > 0`` (the theory): ``X_t = α_t x_0 + σ_t ε`` with ``α_t = exp(-t/2)`` and
  ``σ_t² = 1 - exp(-t)`` (:func:`ou_alpha_sigma`, :func:`ou_noise`, :func:`score_loss`, :func:`ou_sample`);
* **discrete DDPM time** ``k = 0 … T-1`` (the image models): a :class:`NoiseSchedule` of ``β_k`` with
  ``ᾱ_k = ∏ (1 - β_j)`` and ``x_k = √ᾱ_k x_0 + √(1-ᾱ_k) ε`` (:func:`q_sample`, :func:`eps_loss`,
  :func:`ddpm_sample`, :func:`ddim_sample`, whose ``return_x0s=True`` also returns every step's prediction
  ``x̂_0``, and its deterministic inverse :func:`ddim_invert`).

Closed forms for checking a learned score: the exact score of a noised Gaussian mixture (:func:`gmm_score`) and
the *empirical* score, i.e. the exact score of the noised training set, the minimiser of the denoising loss on that
set (:func:`empirical_score`), and the mixture's log-density (:func:`gmm_logpdf`). Plus the two numbers
memorisation studies report: the nearest/second-nearest distance ratio (:func:`nn_distance_ratio`,
:func:`memorized_fraction`), and sample quality on feature sets: the Fréchet distance (:func:`frechet_distance`),
k-NN precision and recall (:func:`improved_precision_recall`), and the pooled
features of a pretrained image backbone loaded through ``transformers`` (:func:`iclr26.hf.image_features`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from iclr26.validate import as_bool, as_device, as_float, as_int, one_of
from iclr26.validate import float_tensor as _tensor

__all__ = [
    "AlphaSigma",
    "Noised",
    "PrecisionRecall",
    "ou_alpha_sigma",
    "ou_noise",
    "score_loss",
    "ou_sample",
    "NoiseSchedule",
    "make_schedule",
    "q_sample",
    "eps_loss",
    "ddpm_sample",
    "ddim_sample",
    "ddim_invert",
    "gmm_sample",
    "gmm_score",
    "gmm_logpdf",
    "empirical_score",
    "nn_distance_ratio",
    "memorized_fraction",
    "frechet_distance",
    "improved_precision_recall",
]

ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class AlphaSigma(NamedTuple):
    """The signal and noise scales ``(α_t, σ_t)`` of the OU / VP forward process at time ``t``."""

    alpha: torch.Tensor
    sigma: torch.Tensor


class Noised(NamedTuple):
    """A noised batch and the standard-normal noise that made it: ``x = scale · x0 + noise_scale · noise``."""

    x: torch.Tensor
    noise: torch.Tensor


class PrecisionRecall(NamedTuple):
    """k-NN precision (quality: generated points on the real manifold) and recall (coverage of the real points)."""

    precision: float
    recall: float


# ------------------------------------------------------------------------------------------------ validation
def _times(t, x: torch.Tensor, name: str = "t") -> torch.Tensor:
    """Broadcast a float or a per-sample tensor of times to shape ``(B,)`` on ``x``'s device and dtype."""
    if isinstance(t, bool):
        raise TypeError(f"{name} must be a positive float or a tensor of shape (batch,), got a bool")
    if isinstance(t, numbers.Real):
        t = torch.full((x.shape[0],), float(t), device=x.device, dtype=x.dtype)
    elif isinstance(t, torch.Tensor):
        if t.ndim == 0:
            t = t.expand(x.shape[0])
        if t.ndim != 1 or t.shape[0] != x.shape[0]:
            raise ValueError(f"{name} must be a scalar or have shape ({x.shape[0]},), got {tuple(t.shape)}")
        t = t.to(device=x.device, dtype=x.dtype)
    else:
        raise TypeError(f"{name} must be a float or a torch.Tensor, got {type(t).__name__}")
    if not bool(torch.all(t > 0)):
        raise ValueError(f"{name} must be > 0 (the OU score is singular at t = 0)")
    return t


def _bcast(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return v.reshape(-1, *([1] * (x.ndim - 1)))


# ------------------------------------------------------------------------------------------------ continuous OU
def ou_alpha_sigma(t: float | torch.Tensor) -> AlphaSigma:
    """``AlphaSigma(α_t, σ_t)`` of the OU / VP forward process: ``α_t = e^{-t/2}``, ``σ_t = √(1 - e^{-t})``."""
    if isinstance(t, bool) or not isinstance(t, (numbers.Real, torch.Tensor)):
        raise TypeError(f"t must be a float or a torch.Tensor, got {type(t).__name__}")
    if not isinstance(t, torch.Tensor):
        t = float(t)
    t = torch.as_tensor(t, dtype=torch.get_default_dtype() if not isinstance(t, torch.Tensor) else None)
    if not torch.is_floating_point(t):
        t = t.to(torch.get_default_dtype())
    if not bool(torch.all(t > 0)):
        raise ValueError("t must be > 0")
    return AlphaSigma(torch.exp(-t / 2), torch.sqrt(-torch.expm1(-t)))


def ou_noise(
    x0: torch.Tensor,
    t: float | torch.Tensor,
    noise: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Noised:
    """Noise ``x0`` (shape ``(B, ...)``) to time ``t``: returns ``Noised(x_t, ε)`` with ``x_t = α_t x0 + σ_t ε``."""
    x0 = _tensor(x0, "x0")
    if x0.ndim < 1:
        raise ValueError("x0 must have a batch dimension")
    t = _times(t, x0)
    if noise is None:
        noise = torch.randn(x0.shape, generator=generator, dtype=x0.dtype).to(x0.device)
    elif _tensor(noise, "noise").shape != x0.shape:
        raise ValueError(f"noise must have x0's shape {tuple(x0.shape)}, got {tuple(noise.shape)}")
    a, s = ou_alpha_sigma(t)
    return Noised(_bcast(a, x0) * x0 + _bcast(s, x0) * noise, noise)


def score_loss(score: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
    """Per-sample denoising score-matching loss ``‖-ε/σ_t - s‖²`` (summed over features, shape ``(B,)``).

    The regression target ``-(x_t - α_t x_0)/σ_t² = -ε/σ_t`` is the conditional score of ``x_t`` given ``x_0``.
    """
    score = _tensor(score, "score")
    noise = _tensor(noise, "noise")
    if score.shape != noise.shape:
        raise ValueError(f"score and noise must have the same shape, got {tuple(score.shape)} and {tuple(noise.shape)}")
    if isinstance(sigma, numbers.Real) and not isinstance(sigma, bool):
        sigma = torch.full((score.shape[0],), float(sigma), dtype=score.dtype, device=score.device)
    sigma = _tensor(sigma, "sigma", ndim=(0, 1))
    if sigma.ndim == 0:  # one σ for the batch, as ou_alpha_sigma(t) returns for a float t
        sigma = sigma.expand(score.shape[0])
    if sigma.shape[0] != score.shape[0] or not bool(torch.all(sigma > 0)):
        raise ValueError(f"sigma must be positive with shape ({score.shape[0]},)")
    return (-noise / _bcast(sigma, noise) - score).pow(2).flatten(1).sum(1)


@torch.no_grad()
def ou_sample(
    score_fn: ScoreFn,
    x_T: torch.Tensor,
    times: torch.Tensor,
    stochastic: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Integrate the reverse OU process from ``times[0]`` down to ``times[-1]`` (a decreasing grid, all > 0).

    ``stochastic=True``: exponential-integrator reverse SDE ``dY = (Y/2 + s) dτ + dW``; ``False``: the probability-flow
    ODE ``dY = (Y/2 + s/2) dτ``. ``score_fn(x, t)`` gets ``t`` of shape ``(B,)``.
    """
    if not callable(score_fn):
        raise TypeError("score_fn must be a callable (x, t) -> score")
    stochastic = as_bool(stochastic, "stochastic")
    x = _tensor(x_T, "x_T").clone()
    times = _tensor(times, "times", ndim=1)
    if x.ndim < 1:
        raise ValueError("x_T must have a batch dimension")
    if times.numel() < 2 or not bool(torch.all(times > 0)) or not bool(torch.all(times[1:] < times[:-1])):
        raise ValueError("times must be a strictly decreasing 1-D grid of at least 2 positive times")
    for t_cur, t_next in zip(times[:-1].tolist(), times[1:].tolist()):
        h = t_cur - t_next
        s = _model_output(score_fn(x, torch.full((x.shape[0],), t_cur, device=x.device, dtype=x.dtype)), x, "score_fn")
        if stochastic:
            # exact for the linear part: x <- e^{h/2} x + 2(e^{h/2} - 1) s + sqrt(e^h - 1) z
            z = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
            x = math.exp(h / 2) * x + 2 * math.expm1(h / 2) * s + math.sqrt(math.expm1(h)) * z
        else:
            x = math.exp(h / 2) * x + math.expm1(h / 2) * s
    return x


# ------------------------------------------------------------------------------------------------ discrete DDPM
@dataclass(frozen=True)
class NoiseSchedule:
    """A discrete variance-preserving schedule: ``betas`` (T,), ``alpha_bars`` = cumulative ∏(1-β) (T,)."""

    betas: torch.Tensor
    alpha_bars: torch.Tensor

    @property
    def T(self) -> int:  # noqa: N802 - the usual name
        return int(self.betas.shape[0])

    def to(self, device) -> NoiseSchedule:
        device = as_device(device)
        return NoiseSchedule(self.betas.to(device), self.alpha_bars.to(device))


def make_schedule(
    T: int = 1000,  # noqa: N803
    kind: str = "linear",
    beta_start: float = 1e-4,
    beta_end: float = 0.02,
) -> NoiseSchedule:
    """DDPM's ``"linear"`` β schedule (Ho et al.) or the ``"cosine"`` ᾱ schedule (Nichol & Dhariwal), T steps."""
    T = as_int(T, "T", low=1)  # noqa: N806
    one_of(kind, "kind", ("linear", "cosine"))
    if kind == "linear":
        beta_start = as_float(beta_start, "beta_start", 0.0, low_open=True)
        beta_end = as_float(beta_end, "beta_end", 0.0, low_open=True)
        if not beta_start < beta_end < 1:
            raise ValueError(f"need 0 < beta_start < beta_end < 1, got {beta_start}, {beta_end}")
        betas = torch.linspace(beta_start, beta_end, T, dtype=torch.float64)
    elif kind == "cosine":
        s = 0.008
        steps = torch.arange(T + 1, dtype=torch.float64) / T
        f = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
        betas = (1 - f[1:] / f[:-1]).clamp(max=0.999)
    alpha_bars = torch.cumprod(1 - betas, 0)
    return NoiseSchedule(betas.float(), alpha_bars.float())


def _check_sched(sched) -> NoiseSchedule:
    if not isinstance(sched, NoiseSchedule):
        raise TypeError(f"sched must be a NoiseSchedule (see make_schedule), got {type(sched).__name__}")
    return sched


def _steps(k, x: torch.Tensor, sched: NoiseSchedule) -> torch.Tensor:
    if isinstance(k, bool):
        raise TypeError("k must be an int or a LongTensor of shape (batch,)")
    if isinstance(k, numbers.Integral):
        k = torch.full((x.shape[0],), int(k), device=x.device, dtype=torch.long)
    if not isinstance(k, torch.Tensor) or k.dtype != torch.long:
        raise TypeError("k must be an int or a LongTensor of shape (batch,)")
    if k.shape != (x.shape[0],):
        raise ValueError(f"k must have shape ({x.shape[0]},), got {tuple(k.shape)}")
    if bool(torch.any(k < 0)) or bool(torch.any(k >= sched.T)):
        raise ValueError(f"k must lie in [0, T={sched.T})")
    return k


def q_sample(
    x0: torch.Tensor,
    k: int | torch.Tensor,
    sched: NoiseSchedule,
    noise: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Noised:
    """DDPM forward noising to step ``k``: ``Noised(√ᾱ_k x0 + √(1-ᾱ_k) ε, ε)``."""
    x0 = _tensor(x0, "x0")
    sched = _check_sched(sched)
    k = _steps(k, x0, sched)
    if noise is None:
        noise = torch.randn(x0.shape, generator=generator, dtype=x0.dtype).to(x0.device)
    elif _tensor(noise, "noise").shape != x0.shape:
        raise ValueError(f"noise must have x0's shape {tuple(x0.shape)}")
    ab = sched.alpha_bars.to(x0.device)[k].to(x0.dtype)
    return Noised(_bcast(ab.sqrt(), x0) * x0 + _bcast((1 - ab).sqrt(), x0) * noise, noise)


def eps_loss(
    model: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x0: torch.Tensor,
    sched: NoiseSchedule,
    k: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """The DDPM ε-prediction loss ``‖ε - model(x_k, k)‖²`` (mean over all entries, or per sample with ``"none"``).

    ``k`` defaults to uniform steps; pass your own (e.g. drawn from Beta(0.8, 2) on [0, 1] and scaled by T) to
    weight small noise levels.
    """
    if not callable(model):
        raise TypeError("model must be a callable (x_k, k) -> predicted noise")
    x0 = _tensor(x0, "x0")
    if x0.ndim < 2:
        raise ValueError(f"x0 must have shape (batch, ...) with at least one feature axis, got {tuple(x0.shape)}")
    sched = _check_sched(sched)
    one_of(reduction, "reduction", ("mean", "none"))
    if k is None:
        k = torch.randint(0, sched.T, (x0.shape[0],), generator=generator, device="cpu").to(x0.device)
    xk, eps = q_sample(x0, k, sched, generator=generator)
    err = (_model_output(model(xk, k), xk, "model") - eps).pow(2).flatten(1).mean(1)
    return err.mean() if reduction == "mean" else err


def _model_output(out, x: torch.Tensor, name: str) -> torch.Tensor:
    """A model's (or score function's) output, which must be a tensor of its input's shape."""
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"{name} must return a tensor of its input's shape {tuple(x.shape)}, got {got}")
    return out


def _check_shape(shape) -> tuple[int, ...]:
    if not isinstance(shape, tuple):
        raise TypeError(f"shape must be a tuple of positive ints, got {type(shape).__name__}")
    if not shape:
        raise ValueError("shape must be a non-empty tuple of positive ints, got ()")
    return tuple(as_int(s, f"shape[{i}]", low=1) for i, s in enumerate(shape))


@torch.no_grad()
def ddpm_sample(
    model: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    shape: tuple[int, ...],
    sched: NoiseSchedule,
    generator: torch.Generator | None = None,
    device: str | torch.device = "cpu",
    clip_x0: float | None = 1.0,
) -> torch.Tensor:
    """Ancestral DDPM sampling over all T steps (posterior variance β̃_k).

    The predicted ``x̂_0`` is clipped to ``±clip_x0`` at every step (DDPM's "clip denoised"; ``None`` to skip), which
    keeps the first steps of a schedule with ᾱ_{T-1} ≈ 0 stable.
    """
    if not callable(model):
        raise TypeError(f"model must be a callable (x_k, k) -> predicted noise, got {type(model).__name__}")
    device = as_device(device)
    sched = _check_sched(sched).to(device)
    shape = _check_shape(shape)
    clip_x0 = None if clip_x0 is None else as_float(clip_x0, "clip_x0", 0.0, low_open=True)
    x = torch.randn(shape, generator=generator, device="cpu").to(device)
    ab, betas = sched.alpha_bars, sched.betas
    one = torch.tensor(1.0, device=device)
    for k in range(sched.T - 1, -1, -1):
        eps = _model_output(model(x, torch.full((shape[0],), k, device=device, dtype=torch.long)), x, "model")
        ab_prev = ab[k - 1] if k > 0 else one
        x0 = (x - (1 - ab[k]).sqrt() * eps) / ab[k].sqrt()
        if clip_x0 is not None:
            x0 = x0.clamp(-clip_x0, clip_x0)
        mean = (ab_prev.sqrt() * betas[k] * x0 + (1 - betas[k]).sqrt() * (1 - ab_prev) * x) / (1 - ab[k])
        if k > 0:
            var = betas[k] * (1 - ab_prev) / (1 - ab[k])
            x = mean + var.sqrt() * torch.randn(shape, generator=generator, device="cpu").to(device)
        else:
            x = mean
    return x


@torch.no_grad()
def ddim_sample(
    model: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    shape: tuple[int, ...],
    sched: NoiseSchedule,
    steps: int = 50,
    eta: float = 0.0,
    generator: torch.Generator | None = None,
    device: str | torch.device = "cpu",
    x_T: torch.Tensor | None = None,
    clip_x0: float | None = 1.0,
    return_x0s: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """DDIM sampling on ``steps`` evenly spaced steps; ``eta=0`` is deterministic (probability-flow-like).

    ``x̂_0`` is clipped to ``±clip_x0`` at every step (``None`` to skip); ε is then recomputed from the clipped ``x̂_0``.
    ``return_x0s=True`` returns ``(x, x0s)``: ``x0s`` of shape ``(steps, *shape)`` holds the prediction ``x̂_0`` made at
    every step, noisiest first (with ``eta=0`` the last one is the sample itself).
    """
    if not callable(model):
        raise TypeError(f"model must be a callable (x_k, k) -> predicted noise, got {type(model).__name__}")
    device = as_device(device)
    sched = _check_sched(sched).to(device)
    steps = as_int(steps, "steps", 1, sched.T)
    eta = as_float(eta, "eta", 0.0, 1.0)
    shape = _check_shape(shape)
    clip_x0 = None if clip_x0 is None else as_float(clip_x0, "clip_x0", 0.0, low_open=True)
    return_x0s = as_bool(return_x0s, "return_x0s")
    if x_T is None:
        x = torch.randn(shape, generator=generator, device="cpu").to(device)
    else:
        x = _tensor(x_T, "x_T").to(device)
        if tuple(x.shape) != shape:
            raise ValueError(f"x_T must have shape {shape}")
    ks = torch.linspace(sched.T - 1, 0, steps).round().long().tolist()
    ab = sched.alpha_bars
    x0s = []
    for i, k in enumerate(ks):
        kk = torch.full((shape[0],), k, device=device, dtype=torch.long)
        eps = _model_output(model(x, kk), x, "model")
        a_t = ab[k]
        a_prev = ab[ks[i + 1]] if i + 1 < len(ks) else torch.tensor(1.0, device=device)
        x0 = (x - (1 - a_t).sqrt() * eps) / a_t.sqrt()
        if clip_x0 is not None:
            x0 = x0.clamp(-clip_x0, clip_x0)
            eps = (x - a_t.sqrt() * x0) / (1 - a_t).sqrt()
        if return_x0s:
            x0s.append(x0)
        sig = eta * ((1 - a_prev) / (1 - a_t) * (1 - a_t / a_prev)).clamp(min=0).sqrt()
        x = a_prev.sqrt() * x0 + (1 - a_prev - sig**2).clamp(min=0).sqrt() * eps
        if eta > 0 and i + 1 < len(ks):
            x = x + sig * torch.randn(shape, generator=generator, device="cpu").to(device)
    return (x, torch.stack(x0s)) if return_x0s else x


@torch.no_grad()
def ddim_invert(
    model: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x0: torch.Tensor,
    sched: NoiseSchedule,
    steps: int = 50,
    clip_x0: float | None = None,
) -> torch.Tensor:
    """Deterministic DDIM inversion: the noise ``x_T`` from which :func:`ddim_sample` (``eta=0``, same ``steps``)
    returns approximately ``x0``.

    Runs the sampler's steps backwards, from the clean image up to step ``T-1``: at each state ``x`` of timestep
    ``k`` (0 for the clean image), ``ε = model(x, k)``, ``x̂_0 = (x - √(1-ᾱ_k) ε)/√ᾱ_k`` (optionally clipped) and the
    next state is ``√ᾱ_next x̂_0 + √(1-ᾱ_next) ε`` (the ``reverse_sample_loop`` of guided-diffusion, which Patronus
    uses for editing). It is exact only as the steps shrink, since ε is read at the state one has, not the one sought.
    """
    if not callable(model):
        raise TypeError(f"model must be a callable (x_k, k) -> predicted noise, got {type(model).__name__}")
    x = _tensor(x0, "x0")
    if x.ndim < 2:
        raise ValueError(f"x0 must have shape (batch, ...) with at least one feature axis, got {tuple(x.shape)}")
    sched = _check_sched(sched).to(x.device)
    steps = as_int(steps, "steps", 1, sched.T)
    clip_x0 = None if clip_x0 is None else as_float(clip_x0, "clip_x0", 0.0, low_open=True)
    ks = torch.linspace(sched.T - 1, 0, steps).round().long().tolist()[::-1]  # the sampler's steps, ascending
    ab = sched.alpha_bars
    k_cur, a_cur = 0, torch.tensor(1.0, device=x.device)
    for k_next in ks:
        kk = torch.full((x.shape[0],), k_cur, device=x.device, dtype=torch.long)
        eps = _model_output(model(x, kk), x, "model")
        x0_hat = (x - (1 - a_cur).sqrt() * eps) / a_cur.sqrt()
        if clip_x0 is not None:
            x0_hat = x0_hat.clamp(-clip_x0, clip_x0)
            if a_cur < 1:
                eps = (x - a_cur.sqrt() * x0_hat) / (1 - a_cur).sqrt()
        a_next = ab[k_next]
        x = a_next.sqrt() * x0_hat + (1 - a_next).sqrt() * eps
        k_cur, a_cur = k_next, a_next
    return x


# ------------------------------------------------------------------------------------------------ exact scores
def _check_gmm(means: torch.Tensor, covs: torch.Tensor, weights: torch.Tensor) -> None:
    _tensor(means, "means", ndim=2)
    _tensor(covs, "covs", ndim=3)
    if covs.dtype != means.dtype:
        raise TypeError(f"means and covs must have one dtype, got {means.dtype} and {covs.dtype}")
    _tensor(weights, "weights", ndim=1)
    K, d = means.shape  # noqa: N806
    if covs.shape != (K, d, d):
        raise ValueError(f"covs must have shape (K, d, d) = {(K, d, d)}, got {tuple(covs.shape)}")
    if weights.shape != (K,):
        raise ValueError(f"weights must have shape (K,) = ({K},), got {tuple(weights.shape)}")
    if bool(torch.any(weights < 0)) or abs(float(weights.sum()) - 1) > 1e-4:
        raise ValueError("weights must be non-negative and sum to 1")


def gmm_sample(
    n: int, means: torch.Tensor, covs: torch.Tensor, weights: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``n`` draws from the mixture ``Σ_k w_k N(means[k], covs[k])`` (shape ``(n, d)``)."""
    n = as_int(n, "n", low=1)
    _check_gmm(means, covs, weights)
    comp = torch.multinomial(weights.cpu(), n, replacement=True, generator=generator).to(means.device)
    chol = torch.linalg.cholesky(covs)
    z = torch.randn((n, means.shape[1]), generator=generator, dtype=means.dtype).to(means.device)
    return means[comp] + torch.einsum("nij,nj->ni", chol[comp], z)


def gmm_score(
    x: torch.Tensor, t: float | torch.Tensor, means: torch.Tensor, covs: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """Exact score ``∇ log p_t(x)`` of a Gaussian mixture noised by the OU process to time ``t``.

    ``p_t = Σ_k w_k N(α_t μ_k, α_t² Σ_k + σ_t² I)``; the score is the posterior-weighted average of the components'
    scores ``-C_k^{-1}(x - α_t μ_k)``, with the posterior computed in log space.
    """
    x = _tensor(x, "x", ndim=2)
    _check_gmm(means, covs, weights)
    if x.dtype != means.dtype:
        raise TypeError(f"x and means must have one dtype, got {x.dtype} and {means.dtype}")
    if x.shape[1] != means.shape[1]:
        raise ValueError(f"x must have d={means.shape[1]} columns, got {x.shape[1]}")
    t = _times(t, x)
    if bool(torch.all(t == t[0])):  # one time for the whole batch: factor each component's covariance once
        t = t[:1]
    a, s = ou_alpha_sigma(t)  # (B,) or (1,)
    d = x.shape[1]
    eye = torch.eye(d, dtype=x.dtype, device=x.device)
    C = a[:, None, None, None] ** 2 * covs[None] + (s**2)[:, None, None, None] * eye  # (B|1, K, d, d)  # noqa: N806
    diff = x[:, None, :] - a[:, None, None] * means[None]  # (B, K, d)
    L = torch.linalg.cholesky(C)  # noqa: N806
    sol = (torch.cholesky_inverse(L) @ diff.unsqueeze(-1)).squeeze(-1)  # C^{-1} diff, broadcast over the batch
    logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    logp = torch.log(weights.clamp_min(1e-300))[None] - 0.5 * (diff * sol).sum(-1) - 0.5 * logdet
    post = torch.softmax(logp, dim=1)  # (B, K)
    return -(post[..., None] * sol).sum(1)


def gmm_logpdf(x: torch.Tensor, means: torch.Tensor, covs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Log-density ``log Σ_k w_k N(x; μ_k, Σ_k)`` of the (un-noised) mixture at every row of ``x`` (shape ``(B,)``).

    A sample-quality measure for generated points: its mean over samples, against its mean over fresh draws from the
    mixture, says whether a sampler puts its points where the data distribution does.
    """
    x = _tensor(x, "x", ndim=2)
    _check_gmm(means, covs, weights)
    if x.dtype != means.dtype:
        raise TypeError(f"x and means must have one dtype, got {x.dtype} and {means.dtype}")
    if x.shape[1] != means.shape[1]:
        raise ValueError(f"x must have d={means.shape[1]} columns, got {x.shape[1]}")
    L = torch.linalg.cholesky(covs.to(x.dtype))  # (K, d, d)  # noqa: N806
    diff = (x[:, None, :] - means.to(x.dtype)[None]).unsqueeze(-1)  # (B, K, d, 1)
    z = torch.linalg.solve_triangular(L[None], diff, upper=False).squeeze(-1)  # (B, K, d)
    logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)  # (K,)
    d = x.shape[1]
    comp = -0.5 * z.pow(2).sum(-1) - 0.5 * logdet[None] - 0.5 * d * math.log(2 * math.pi)
    return torch.logsumexp(torch.log(weights.to(x.dtype).clamp_min(1e-300))[None] + comp, dim=1)


def empirical_score(x: torch.Tensor, t: float | torch.Tensor, data: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Exact score of the noised empirical distribution ``(1/n) Σ_i N(α_t x_i, σ_t² I)`` at ``x`` (shape ``(B, d)``).

    ``ŝ(x, t) = -σ_t^{-2} Σ_i w_i(x) (x - α_t x_i)`` with ``w = softmax_i(-‖x - α_t x_i‖² / 2σ_t²)`` — the minimiser of
    the denoising loss on ``data`` and the score a memorising network converges to. Computed in log space, in chunks.
    """
    x = _tensor(x, "x", ndim=2)
    data = _tensor(data, "data", ndim=2)
    if data.dtype != x.dtype:
        raise TypeError(f"x and data must have one dtype, got {x.dtype} and {data.dtype}")
    if x.shape[1] != data.shape[1]:
        raise ValueError(f"x and data must have the same number of columns, got {x.shape[1]} and {data.shape[1]}")
    chunk = as_int(chunk, "chunk", low=1)
    t = _times(t, x)
    a, s = ou_alpha_sigma(t)
    sq_norms = data.pow(2).sum(1)
    out = []
    for start in range(0, x.shape[0], chunk):
        xb, ab, sb = x[start : start + chunk], a[start : start + chunk], s[start : start + chunk]
        # ‖x - α x_i‖² = ‖x‖² - 2α x·x_i + α²‖x_i‖²; the ‖x‖² term cancels in the softmax
        logits = (2 * ab[:, None] * (xb @ data.T) - ab[:, None] ** 2 * sq_norms[None]) / (2 * sb[:, None] ** 2)
        w = torch.softmax(logits, dim=1)  # (b, n)
        mean = ab[:, None] * (w @ data)  # Σ_i w_i α x_i
        out.append(-(xb - mean) / sb[:, None] ** 2)
    return torch.cat(out)


# ------------------------------------------------------------------------------------------------ memorisation, quality
def nn_distance_ratio(samples: torch.Tensor, train: torch.Tensor, squared: bool = False) -> torch.Tensor:
    """``‖x - NN₁(x)‖ / ‖x - NN₂(x)‖`` for every sample (flattened), against the training set (needs n ≥ 2).

    Unsquared Euclidean distances by default; ``squared=True`` returns the ratio of squared distances (its square).
    """
    samples = _tensor(samples, "samples")
    train = _tensor(train, "train")
    squared = as_bool(squared, "squared")
    if samples.ndim < 2 or train.ndim < 2:
        raise ValueError("samples and train must have a batch dimension and at least one feature dimension")
    a, b = samples.flatten(1), train.flatten(1)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"samples and train must have the same number of features, got {a.shape[1]} and {b.shape[1]}")
    if b.shape[0] < 2:
        raise ValueError("train must hold at least 2 points (the ratio needs a second-nearest neighbour)")
    dist = torch.cdist(a.double(), b.double())
    two = dist.topk(2, dim=1, largest=False).values
    ratio = two[:, 0] / two[:, 1].clamp_min(1e-300)
    return ratio**2 if squared else ratio


def memorized_fraction(
    samples: torch.Tensor, train: torch.Tensor, threshold: float = 1 / 3, squared: bool = False
) -> float:
    """Fraction of samples whose nearest/second-nearest training distance ratio is ≤ ``threshold``.

    The common convention (Yoon et al. 2023; Gu et al. 2023): unsquared distances, threshold 1/3 — the same rule
    as squared distances with threshold 1/9.
    """
    threshold = as_float(threshold, "threshold", 0.0, 1.0, low_open=True, high_open=True)
    return float((nn_distance_ratio(samples, train, squared=squared) <= threshold).double().mean())


def frechet_distance(feats_a: np.ndarray | torch.Tensor, feats_b: np.ndarray | torch.Tensor) -> float:
    """Fréchet distance between Gaussians fitted to two feature sets ``(n_a, p)`` and ``(n_b, p)`` (FID's formula)."""
    arrs = []
    for name, f in (("feats_a", feats_a), ("feats_b", feats_b)):
        if isinstance(f, torch.Tensor):
            f = f.detach().cpu().double().numpy()
        if not isinstance(f, np.ndarray):
            raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(f).__name__}")
        if f.ndim != 2 or f.shape[0] < 2:
            raise ValueError(f"{name} must have shape (n ≥ 2, p), got {f.shape}")
        if not np.issubdtype(f.dtype, np.number) or np.issubdtype(f.dtype, np.complexfloating):
            raise TypeError(f"{name} must hold real numbers, got dtype {f.dtype}")
        if not np.isfinite(f).all():
            raise ValueError(f"{name} must be finite (found nan or inf)")
        arrs.append(f.astype(np.float64))
    a, b = arrs
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"feature dimensions differ: {a.shape[1]} vs {b.shape[1]}")
    mu_a, mu_b = a.mean(0), b.mean(0)
    ca, cb = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    # tr sqrt(Ca Cb) = Σ sqrt(eig(Ca^{1/2} Cb Ca^{1/2})), computed with symmetric eigendecompositions
    w, v = np.linalg.eigh(ca)
    root = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    tr_covmean = np.sqrt(np.clip(np.linalg.eigvalsh(root @ cb @ root), 0, None)).sum()
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(ca) + np.trace(cb) - 2 * tr_covmean)


def _feature_matrix(f, name: str) -> torch.Tensor:
    if isinstance(f, np.ndarray):
        f = torch.from_numpy(f)
    if not isinstance(f, torch.Tensor):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(f).__name__}")
    if not (torch.is_floating_point(f) or f.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{name} must hold real numbers, got dtype {f.dtype}")
    if f.ndim != 2:
        raise ValueError(f"{name} must have shape (n, p), got {tuple(f.shape)}")
    f = f.detach().cpu().double()
    if not bool(torch.isfinite(f).all()):
        raise ValueError(f"{name} must be finite (found nan or inf)")
    return f


def _knn_radii(feats: torch.Tensor, k: int, chunk: int) -> torch.Tensor:
    """Distance from every point to its k-th nearest *other* point of the same set."""
    out = []
    for start in range(0, len(feats), chunk):
        d = torch.cdist(feats[start : start + chunk], feats)
        out.append(d.kthvalue(k + 1, dim=1).values)  # the (k+1)-th smallest counts the point itself (distance 0)
    return torch.cat(out)


def _inside(queries: torch.Tensor, support: torch.Tensor, radii: torch.Tensor, chunk: int) -> torch.Tensor:
    """Whether each query lies in at least one ball B(support_i, radii_i) (closed balls)."""
    out = []
    for start in range(0, len(queries), chunk):
        d = torch.cdist(queries[start : start + chunk], support)
        out.append((d <= radii[None]).any(dim=1))
    return torch.cat(out)


def improved_precision_recall(
    real_feats: np.ndarray | torch.Tensor, fake_feats: np.ndarray | torch.Tensor, k: int = 3, chunk: int = 1024
) -> PrecisionRecall:
    """k-NN precision and recall of Kynkäänniemi et al. (2019), "Improved precision and recall metric".

    Each set's manifold is the union of closed balls centred on its points, of radius the distance to the
    k-th nearest *other* point of the same set. Precision = fraction of ``fake_feats`` inside the real manifold
    (quality); recall = fraction of ``real_feats`` inside the fake manifold (coverage). The paper uses k = 3 and
    equally many real and generated samples. Euclidean distances in float64, computed ``chunk`` rows at a time.
    Returns ``PrecisionRecall(precision, recall)``.
    """
    real = _feature_matrix(real_feats, "real_feats")
    fake = _feature_matrix(fake_feats, "fake_feats")
    if real.shape[1] != fake.shape[1]:
        raise ValueError(
            f"real_feats and fake_feats must have the same feature dimension, got {real.shape[1]} and {fake.shape[1]}"
        )
    k = as_int(k, "k", low=1)
    chunk = as_int(chunk, "chunk", low=1)
    for name, f in (("real_feats", real), ("fake_feats", fake)):
        if f.shape[0] < k + 1:
            raise ValueError(f"{name} must hold at least k + 1 = {k + 1} points, got {f.shape[0]}")
    precision = _inside(fake, real, _knn_radii(real, k, chunk), chunk)
    recall = _inside(real, fake, _knn_radii(fake, k, chunk), chunk)
    return PrecisionRecall(float(precision.double().mean()), float(recall.double().mean()))
