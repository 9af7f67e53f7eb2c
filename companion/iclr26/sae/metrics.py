"""SAE metrics: reconstruction (:func:`fvu`, :func:`nmse`, :func:`variance_explained`), codes (:func:`l0`,
:func:`dead_fraction`, :func:`dense_fraction`, :func:`firing_rates`), recovery of a planted dictionary, event
boundaries (:func:`cosine_gram`, :func:`step_change`, :func:`block_contrast`), and the pathology metrics of the
LocA-SAE code (:func:`angular_variance`, :func:`absorption`, :func:`k_sparse_probe_f1`, :func:`splitting`)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from iclr26.sae._validation import _as_tensor
from iclr26.validate import as_bool, as_float, as_int, as_prob

__all__ = [
    "fvu",
    "variance_explained",
    "l0",
    "dead_fraction",
    "dense_fraction",
    "DictionaryRecovery",
    "dictionary_recovery",
    "cosine_gram",
    "step_change",
    "block_contrast",
    "part_variance_explained",
    "nmse",
    "firing_rates",
    "angular_variance",
    "feature_latent_corr",
    "absorption",
    "k_sparse_probe_f1",
    "splitting",
]


def _flat_pair(x: Any, x_hat: Any, names: tuple[str, str] = ("x", "x_hat")) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = names
    x = _as_tensor(x, a)
    x_hat = _as_tensor(x_hat, b)
    if x.shape != x_hat.shape:
        raise ValueError(f"{a} and {b} must have the same shape, got {tuple(x.shape)} and {tuple(x_hat.shape)}")
    return x.detach().reshape(-1, x.shape[-1]).double(), x_hat.detach().reshape(-1, x.shape[-1]).double()


def fvu(x: Any, x_hat: Any) -> float:
    """Fraction of variance unexplained: ``sum ||x - x_hat||^2 / sum ||x - mean(x)||^2`` over all tokens."""
    x, x_hat = _flat_pair(x, x_hat)
    total = (x - x.mean(0)).pow(2).sum()
    if total <= 0:
        raise ValueError("x has zero variance: FVU is undefined")
    return float((x - x_hat).pow(2).sum() / total)


def variance_explained(x: Any, x_hat: Any) -> float:
    """``1 - fvu(x, x_hat)``."""
    return 1.0 - fvu(x, x_hat)


def _codes(z: Any) -> torch.Tensor:
    z = _as_tensor(z, "z")
    if z.ndim == 0:
        raise ValueError("z must have a latent axis (last dimension)")
    return z.detach().reshape(-1, z.shape[-1])


def part_variance_explained(part: Any, target: Any) -> float:
    """The official demo's variance explained by one part of a reconstruction: ``Var(part) / Var(target)``, the
    per-feature variances over all tokens summed over features. For parts that are uncorrelated with each other the
    shares add up to the whole reconstruction's."""
    target, part = _flat_pair(target, part, ("target", "part"))
    total = target.var(0).sum()
    if total <= 0:
        raise ValueError("target has zero variance: the variance explained is undefined")
    return float(part.var(0).sum() / total)


def l0(z: Any, threshold: float = 0.0) -> float:
    """Mean number of latents with ``|z| > threshold`` per token."""
    z = _codes(z)
    return float((z.abs() > as_float(threshold, "threshold", low=0.0)).float().sum(-1).mean())


def dead_fraction(z: Any, threshold: float = 0.0) -> float:
    """Fraction of latents that never exceed ``threshold`` (in absolute value) on the given tokens."""
    z = _codes(z)
    return float(((z.abs() > as_float(threshold, "threshold", low=0.0)).sum(0) == 0).float().mean())


def dense_fraction(z: Any, frequency: float = 0.5, threshold: float = 0.0) -> float:
    """Fraction of latents active (``|z| > threshold``) on more than ``frequency`` of the tokens."""
    z = _codes(z)
    frequency = as_prob(frequency, "frequency")
    return float(((z.abs() > as_float(threshold, "threshold", low=0.0)).float().mean(0) > frequency).float().mean())


@dataclass(frozen=True)
class DictionaryRecovery:
    """Result of :func:`dictionary_recovery`.

    ``cos[i]`` is the cosine between true atom ``i`` and its matched learned atom ``match[i]``; ``mean_cos`` their mean;
    ``recovered`` the fraction with ``cos >= threshold``.
    """

    cos: np.ndarray
    match: np.ndarray
    mean_cos: float
    recovered: float


def dictionary_recovery(learned: Any, true: Any, threshold: float = 0.9) -> DictionaryRecovery:
    """Match each true atom (rows of ``true``, ``(n_true, d)``) to a distinct learned atom (rows of ``learned``,
    ``(n_learned, d)``, ``n_learned >= n_true``) maximising the summed cosine (Hungarian algorithm,
    ``scipy.optimize.linear_sum_assignment``)."""
    from scipy.optimize import linear_sum_assignment

    learned = _as_tensor(learned, "learned", ndim=2).detach().double()
    true = _as_tensor(true, "true", ndim=2).detach().double()
    if learned.shape[1] != true.shape[1]:
        raise ValueError(
            f"learned and true must have the same number of columns, got {learned.shape[1]} and {true.shape[1]}"
        )
    if learned.shape[0] < true.shape[0]:
        raise ValueError(f"learned needs at least as many atoms as true ({true.shape[0]}), got {learned.shape[0]}")
    threshold = as_float(threshold, "threshold", 0.0, 1.0)
    cos = F.normalize(true, dim=1) @ F.normalize(learned, dim=1).T
    rows, cols = linear_sum_assignment(cos.cpu().numpy(), maximize=True)
    matched = cos[rows, cols].cpu().numpy()
    return DictionaryRecovery(
        cos=matched, match=cols, mean_cos=float(matched.mean()), recovered=float((matched >= threshold).mean())
    )


def cosine_gram(z: Any, centre: bool = True) -> np.ndarray:
    """Cosine-similarity matrix between the rows of ``z`` (``(time, width)``); all-zero rows get similarity 0.

    ``centre=True`` (the official demo's convention) subtracts the sequence's mean code, ``z - z.mean(time)``, first,
    so that a component shared by every position does not make all positions look alike.
    """
    zn = _unit_rows(_as_tensor(z, "z", ndim=2), centre, time_axis=0)
    return (zn @ zn.T).cpu().numpy()


def step_change(z: Any, centre: bool = True) -> np.ndarray:
    """The event-boundary score ``1 - cos(z_t, z_{t-1})`` for ``t >= 1``: an array ``(n_seq, time - 1)`` for codes
    or activations ``z`` of shape ``(n_seq, time, width)``.

    ``centre=True`` subtracts each sequence's mean over time first (as :func:`cosine_gram` does); an all-zero row
    has similarity 0 with anything, so it scores 1.
    """
    z = _as_tensor(z, "z", ndim=3)
    if z.shape[1] < 2:
        raise ValueError(f"z must have at least 2 time steps, got {z.shape[1]}")
    zn = _unit_rows(z, centre, time_axis=1)
    return (1 - (zn[:, 1:] * zn[:, :-1]).sum(-1)).cpu().numpy()


def _unit_rows(z: torch.Tensor, centre: Any, time_axis: int) -> torch.Tensor:
    """``z`` in float64 with unit-norm rows (last axis; all-zero rows stay 0), after subtracting its mean over
    ``time_axis`` when ``centre``: the cosine similarities of :func:`cosine_gram` and :func:`step_change`."""
    z = z.detach().double()
    if as_bool(centre, "centre"):
        z = z - z.mean(time_axis, keepdim=True)
    return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def block_contrast(gram: Any, segments: Any) -> float:
    """Mean similarity within segments minus mean similarity across segments (off-diagonal entries only).

    ``gram`` is a ``(T, T)`` similarity matrix, ``segments`` a length-``T`` array of segment ids.
    """
    gram = _as_tensor(gram, "gram", ndim=2).detach().double().cpu().numpy()
    seg = np.asarray(segments)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1]:
        raise ValueError(f"gram must be a square matrix, got shape {gram.shape}")
    if seg.shape != (gram.shape[0],):
        raise ValueError(f"segments must have shape ({gram.shape[0]},), got {seg.shape}")
    same = seg[:, None] == seg[None, :]
    off = ~np.eye(len(seg), dtype=bool)
    if not (same & off).any() or not (~same).any():
        raise ValueError("segments must contain at least two segments and one segment of length >= 2")
    return float(gram[same & off].mean() - gram[~same].mean())


def nmse(x: Any, x_hat: Any) -> float:
    """Normalised squared error ``sum ||x - x_hat||^2 / sum ||x||^2`` over all tokens (the LocA-SAE code's NMSE;
    :func:`fvu` divides by the variance instead)."""
    x, x_hat = _flat_pair(x, x_hat)
    total = x.pow(2).sum()
    if total <= 0:
        raise ValueError("x is all zeros: NMSE is undefined")
    return float((x - x_hat).pow(2).sum() / total)


def firing_rates(z: Any, threshold: float = 0.0) -> np.ndarray:
    """Per latent, the fraction of tokens with ``|z| > threshold``, shape ``(width,)``."""
    z = _codes(z)
    return (z.abs() > as_float(threshold, "threshold", low=0.0)).double().mean(0).cpu().numpy()


def angular_variance(x: Any, z: Any, dead_value: float = 1.0) -> np.ndarray:
    """Per latent ``j``, ``AV_j = 1 - || mean over tokens with z_j > 0 of x / ||x|| ||``, shape ``(width,)``.

    0 for a latent whose inputs all point one way, larger the more their directions spread. A latent that never
    fires gets ``dead_value`` (the official code's 1; pass ``float("nan")`` to mark it instead)."""
    x = _as_tensor(x, "x", ndim=2).detach().double()
    z = _as_tensor(z, "z", ndim=2).detach()
    if z.shape[0] != x.shape[0]:
        raise ValueError(f"z must have one row per row of x ({x.shape[0]}), got {z.shape[0]}")
    if not isinstance(dead_value, numbers.Real) or isinstance(dead_value, bool):
        raise TypeError(f"dead_value must be a float, got {type(dead_value).__name__}")
    if math.isinf(dead_value):
        raise ValueError(f"dead_value must be a finite number or NaN, got {dead_value}")
    xn = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    fire = (z > 0).double().to(x.device)
    counts = fire.sum(0)
    mean = (fire.T @ xn) / counts.clamp_min(1)[:, None]
    av = (1 - mean.norm(dim=1)).cpu().numpy()
    av[counts.cpu().numpy() == 0] = float(dead_value)
    return av


def _labels(labels: Any, n: int) -> np.ndarray:
    if torch.is_tensor(labels):
        labels = labels.detach().cpu().numpy()
    if not isinstance(labels, np.ndarray):
        raise TypeError(f"labels must be a numpy array or tensor of shape (n, n_features), got {type(labels).__name__}")
    if labels.ndim == 1:
        labels = labels[:, None]
    if labels.ndim != 2 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n}, n_features), got {labels.shape}")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("labels must be binary (0/1 or bool)")
    return labels.astype(bool)


def feature_latent_corr(z: Any, labels: Any) -> np.ndarray:
    """Pearson correlation of each latent's activation with each binary feature label, shape ``(n_features, width)``
    (0 where a latent or a label is constant)."""
    z = _codes(z).double().cpu().numpy()
    y = _labels(labels, z.shape[0]).astype(float)
    zc, yc = z - z.mean(0), y - y.mean(0)
    num = yc.T @ zc / z.shape[0]
    den = np.outer(yc.std(0), zc.std(0))
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def absorption(z: Any, labels: Any, n_aux: int = 5) -> np.ndarray:
    """Per feature, the absorption rate of the LocA-SAE code: rank latents by ``|corr|`` with the feature's label
    (:func:`feature_latent_corr`); on the tokens where the feature is present, the fraction on which the top latent
    is off (``z <= 0``) while one of the next ``n_aux`` is on. Shape ``(n_features,)``; NaN for a feature never
    present."""
    zt = _codes(z)
    y = _labels(labels, zt.shape[0])
    n_aux = as_int(n_aux, "n_aux", low=1)
    if n_aux + 1 > zt.shape[1]:
        raise ValueError(f"n_aux must be < width={zt.shape[1]}, got {n_aux}")
    on = (zt > 0).cpu().numpy()
    order = np.argsort(-np.abs(feature_latent_corr(zt, y)), axis=1, kind="stable")
    out = np.full(y.shape[1], np.nan)
    for f in range(y.shape[1]):
        pos = y[:, f]
        if pos.any():
            main, aux = order[f, 0], order[f, 1 : 1 + n_aux]
            out[f] = float((~on[pos, main] & on[pos][:, aux].any(1)).mean())
    return out


def k_sparse_probe_f1(z: Any, labels: Any, ks: Any = (1, 2)) -> np.ndarray:
    """Per feature and per ``k`` in ``ks``, the F1 of a logistic-regression probe on the ``k`` latents most correlated
    with the feature's label (columns z-scored; balanced class weights; fitted and scored on the same tokens, as in the
    LocA-SAE code). Shape ``(n_features, len(ks))``; NaN for a label that is constant."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    zt = _codes(z)
    y = _labels(labels, zt.shape[0])
    if isinstance(ks, (str, bytes)) or not hasattr(ks, "__iter__"):
        raise TypeError(f"ks must be a sequence of ints, got {type(ks).__name__}")
    ks = tuple(as_int(k, "ks", low=1, high=zt.shape[1]) for k in ks)
    if not ks:
        raise ValueError("ks must name at least one k")
    zn = zt.double().cpu().numpy()
    zs = (zn - zn.mean(0)) / (zn.std(0) + 1e-6)
    order = np.argsort(-np.abs(feature_latent_corr(zt, y)), axis=1, kind="stable")
    out = np.full((y.shape[1], len(ks)), np.nan)
    for f in range(y.shape[1]):
        if y[:, f].all() or not y[:, f].any():
            continue
        for i, k in enumerate(ks):
            feats = zs[:, order[f, :k]]
            clf = LogisticRegression(max_iter=1000, solver="liblinear", class_weight="balanced")
            clf.fit(feats, y[:, f])
            out[f, i] = f1_score(y[:, f], clf.predict(feats))
    return out


def splitting(z: Any, labels: Any) -> np.ndarray:
    """Per feature, ``F1@2 - F1@1`` of :func:`k_sparse_probe_f1`: how much a second latent adds to the best one
    (large when the feature is split across latents). Shape ``(n_features,)``."""
    f1 = k_sparse_probe_f1(z, labels, ks=(1, 2))
    return f1[:, 1] - f1[:, 0]
