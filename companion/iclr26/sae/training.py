"""Training SAEs through :func:`iclr26.train.fit`: :func:`fit_sae`, :func:`fit_temporal_sae` (the official cosine
with its ``min_lr``) and :func:`scaling_factor` (the input scale)."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from iclr26.sae._validation import _as_tensor
from iclr26.sae.dictionary import _DictionarySAE
from iclr26.sae.temporal import TemporalSAE
from iclr26.validate import as_float, as_int, one_of, torch_generator

__all__ = ["fit_sae", "fit_temporal_sae", "scaling_factor"]


def scaling_factor(x: torch.Tensor, convention: str = "official") -> float:
    """The input scale ``s`` for a :class:`TemporalSAE` (tokens on the last axis of ``x``).

    ``convention="official"`` (the default) computes what the official ``compute_scaling_factor.py`` computes,
    ``s = 1 / mean ||x||``, so that the scaled tokens have unit mean norm (that script's docstring speaks of
    ``sqrt(d_in)``, its code does not); ``"sqrt_d"`` makes the mean squared norm of ``s x`` equal to ``d_in``.
    """
    x = _as_tensor(x, "x")
    if not isinstance(convention, str):
        raise TypeError(f"convention must be a str, got {type(convention).__name__}")
    one_of(convention, "convention", ("official", "sqrt_d"))
    flat = x.detach().reshape(-1, x.shape[-1]).double()
    if not bool(flat.any()):
        raise ValueError("x is all zeros: no scaling factor")
    if convention == "official":
        return 1.0 / float(flat.norm(dim=-1).mean())
    return math.sqrt(x.shape[-1] / float(flat.pow(2).sum(-1).mean()))


def _train_on_samples(
    model: nn.Module,
    x: torch.Tensor,
    loss,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    warmup: int | None,
    clip: float,
    seed: int | np.random.Generator,
    progress: bool,
    desc: str,
    min_lr_ratio: float = 0.0,
    eval_fn=None,
    eval_every: int | None = None,
):
    """The shared recipe: minibatches drawn from ``x`` along its first axis, AdamW (betas 0.9, 0.95),
    warmup then cosine, gradient clipping — through :func:`iclr26.train.fit`."""
    from iclr26.train import fit

    steps = as_int(steps, "steps", low=1)
    batch_size = as_int(batch_size, "batch_size", low=1)
    warmup = max(1, steps // 20) if warmup is None else as_int(warmup, "warmup", low=0)
    lr = as_float(lr, "lr", 0.0, low_open=True)
    weight_decay = as_float(weight_decay, "weight_decay", low=0.0)
    gen = torch_generator(seed)  # on the CPU: the same minibatches on every device
    device = next(model.parameters()).device
    x = x.to(device)
    n = x.shape[0]

    def batches(step: int) -> torch.Tensor:
        return x[torch.randint(n, (min(batch_size, n),), generator=gen).to(device)]

    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    return fit(
        model,
        loss,
        batches,
        opt,
        steps=steps,
        schedule="warmup_cosine",
        warmup=min(warmup, steps),
        clip=clip,
        progress=progress,
        desc=desc,
        min_lr_ratio=min_lr_ratio,
        eval_fn=eval_fn,
        eval_every=eval_every,
    )


def fit_sae(
    sae: _DictionarySAE,
    x: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 512,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    warmup: int | None = None,
    clip: float = 1.0,
    seed: int | np.random.Generator = 0,
    progress: bool = True,
    desc: str = "SAE",
    eval_fn=None,
    eval_every: int | None = None,
):
    """Train a :class:`ReLUSAE`, :class:`TopKSAE` or :class:`GroupedTopKSAE` on tokens ``x`` (``(n, d_in)``; more
    axes are flattened) with AdamW (betas 0.9, 0.95), a warmup-cosine schedule and gradient clipping; returns the
    history. ``eval_fn(sae) -> {"name": value}`` runs every ``eval_every`` steps and at the end, in eval mode under
    ``torch.no_grad()``, and its values join the history's rows (e.g. pathology metrics over training, as
    :func:`iclr26.train.fit` does)."""
    if not isinstance(sae, _DictionarySAE):
        raise TypeError(f"sae must be a ReLUSAE or TopKSAE, got {type(sae).__name__}")
    x = _as_tensor(x, "x", last=sae.d_in, dtype=next(sae.parameters()).dtype).reshape(-1, sae.d_in)
    return _train_on_samples(
        sae,
        x,
        lambda m, b: m.loss(b),
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        weight_decay=weight_decay,
        warmup=warmup,
        clip=clip,
        seed=seed,
        progress=progress,
        desc=desc,
        eval_fn=eval_fn,
        eval_every=eval_every,
    )


def fit_temporal_sae(
    tfa: TemporalSAE,
    x: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    warmup: int | None = None,
    clip: float = 1.0,
    gamma: float = 0.0,
    min_lr_ratio: float = 0.9,
    seed: int | np.random.Generator = 0,
    progress: bool = True,
    desc: str = "TFA",
):
    """Train a :class:`TemporalSAE` on sequences ``x`` (``(n_seq, time, d_in)``) with the official recipe:
    AdamW (betas 0.9, 0.95, weight decay 1e-4), warmup then cosine down to ``min_lr_ratio`` of the peak (the
    official ``min_lr`` is 0.9 of ``learning_rate``), gradient clipping at 1."""
    if not isinstance(tfa, TemporalSAE):
        raise TypeError(f"tfa must be a TemporalSAE, got {type(tfa).__name__}")
    x = _as_tensor(x, "x", ndim=3, last=tfa.d_in, dtype=next(tfa.parameters()).dtype)
    gamma = as_float(gamma, "gamma", low=0.0)
    min_lr_ratio = as_float(min_lr_ratio, "min_lr_ratio", 0.0, 1.0)
    return _train_on_samples(
        tfa,
        x,
        lambda m, b: m.loss(b, gamma=gamma),
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        weight_decay=weight_decay,
        warmup=warmup,
        clip=clip,
        seed=seed,
        progress=progress,
        desc=desc,
        min_lr_ratio=min_lr_ratio,
    )
