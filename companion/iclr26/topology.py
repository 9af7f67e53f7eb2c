"""Circular statistics, a two-sample test on the circle, and persistent homology with relative persistence.

Small helpers around ``scipy`` and ``ripser`` for chapters that study the shape of learned representations::

    wrap_angle(phi_L - phi_R)                    # angles into (-π, π]
    circular_resultant(dphi)                      # R = |mean e^{iθ}| in [0, 1]: 1 = all equal, ~0 = spread out
    mmd_circular_test(dphi_a, dphi_b)             # MMDTest(mmd2, p_value): MMD² (von Mises kernel), permutation p
    ph = persistence(cloud, n_points=500)         # ripser H0/H1 on a subsample; bar lengths / point-cloud diameter
    persistence(cloud, n_points=500, sample="furthest")   # an even (furthest-point) subsample instead of a random one
    ph.count(1, threshold=0.2)                    # number of H1 bars longer than 20 % of the diameter
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.spatial.distance import pdist
from scipy.special import ive

from iclr26.validate import as_float, as_generator, as_int, one_of

__all__ = [
    "wrap_angle",
    "circular_resultant",
    "circular_mean",
    "MMDTest",
    "mmd_circular_test",
    "Persistence",
    "persistence",
]


def _floats(x, what: str) -> np.ndarray:
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an array of numbers, got {type(x).__name__}") from None


def _angles(x, what: str) -> np.ndarray:
    arr = _floats(x, what)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array of angles in radians, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must contain finite angles only")
    return arr


def wrap_angle(x) -> np.ndarray:
    """Wrap angles (radians, any shape) into (-π, π]."""
    arr = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError("x must contain finite angles only")
    out = np.angle(np.exp(1j * arr))
    return np.where(out <= -np.pi, out + 2 * np.pi, out)


def circular_resultant(angles) -> float:
    """Mean resultant length R = |mean_j e^{iθ_j}| ∈ [0, 1]: 1 when all angles agree, ≈ 1/√n for uniform angles."""
    a = _angles(angles, "angles")
    return float(np.abs(np.exp(1j * a).mean()))


def circular_mean(angles) -> float:
    """The direction of the mean resultant vector, in (-π, π]."""
    a = _angles(angles, "angles")
    return float(wrap_angle(np.angle(np.exp(1j * a).mean())))


class MMDTest(NamedTuple):
    """Result of :func:`mmd_circular_test`: the observed MMD² and its permutation p-value."""

    mmd2: float
    p_value: float


def mmd_circular_test(
    x, y, *, kappa: float = 2.0, n_perm: int = 1000, seed: int | np.random.Generator = 0, max_order: int = 64
) -> MMDTest:
    """Two-sample permutation test on the circle with the von Mises kernel k(θ, θ') = exp(κ (cos(θ − θ') − 1)).

    The kernel expands as k = Σ_j c_j cos(j (θ − θ')) with c_j ∝ I_j(κ) (modified Bessel functions), so the
    (biased, V-statistic) MMD² is Σ_j c_j |m_x(j) − m_y(j)|², a weighted distance between the samples' trigonometric
    moments m(j) = mean e^{ijθ}. That makes each permutation O(n · J) instead of O(n²). Small κ compares only the
    first few moments (mean direction, spread); large κ resolves fine detail.

    Returns :class:`MMDTest` ``(mmd2, p_value)`` with the permutation p-value (1 + #{perm ≥ observed}) / (1 + n_perm).
    ``seed`` is an int or a ``np.random.Generator`` (the permutations' randomness).
    """
    xa, ya = _angles(x, "x"), _angles(y, "y")
    kappa = as_float(kappa, "kappa", 0.0, 50.0, low_open=True)
    n_perm = as_int(n_perm, "n_perm", low=1)
    max_order = as_int(max_order, "max_order", low=1)
    rng = as_generator(seed)
    j = np.arange(max_order + 1)
    c = ive(j, kappa)  # I_j(κ) e^{-κ}: the kernel's Fourier weights, exp(κ(cos − 1)) = Σ_j (2 − δ_j0) c_j cos(j·)
    c = c * np.where(j == 0, 1.0, 2.0)
    keep = c > 1e-12 * c[0]
    j, c = j[keep][1:], c[keep][1:]  # order 0 cancels in a difference of means
    pooled = np.concatenate([xa, ya])
    feats = np.exp(1j * np.outer(pooled, j))  # (n, J)
    n = len(xa)

    def stat(mask: np.ndarray) -> np.ndarray:  # mask (..., N): 1 for the "x" group, 0 for the "y" group
        mx = (mask @ feats) / n
        my = ((1.0 - mask) @ feats) / (len(pooled) - n)
        return (np.abs(mx - my) ** 2) @ c

    observed = float(stat((np.arange(len(pooled)) < n).astype(float)))
    chunk = max(1, 2**21 // len(pooled))  # permutations per batch: bounded memory for large samples
    null = []
    for start in range(0, n_perm, chunk):
        masks = np.zeros((min(chunk, n_perm - start), len(pooled)))
        for row in masks:
            row[rng.permutation(len(pooled))[:n]] = 1.0
        null.append(stat(masks))
    null = np.concatenate(null)
    p_value = (1 + int(np.sum(null >= observed - 1e-15))) / (1 + n_perm)
    return MMDTest(observed, float(p_value))


@dataclass
class Persistence:
    """Persistence diagrams of a point cloud and their bar lengths relative to the cloud's diameter."""

    dgms: list[np.ndarray]  # ripser diagrams, one (n_bars, 2) array per homology dimension
    diameter: float
    n_points: int

    def relative(self, dim: int) -> np.ndarray:
        """Finite bar lengths in dimension ``dim`` divided by the diameter, longest first."""
        dim = as_int(dim, "dim", 0, len(self.dgms) - 1)
        d = self.dgms[dim]
        life = d[:, 1] - d[:, 0]
        life = life[np.isfinite(life)]
        return np.sort(life)[::-1] / self.diameter

    def count(self, dim: int, threshold: float) -> int:
        """Number of bars in ``dim`` whose relative persistence exceeds ``threshold`` (a Betti-number estimate)."""
        threshold = as_float(threshold, "threshold", 0.0, 1.0, low_open=True, high_open=True)
        return int(np.sum(self.relative(dim) > threshold))


def persistence(
    points, *, maxdim: int = 1, n_points: int | None = 500, seed: int | np.random.Generator = 0, sample: str = "random"
) -> Persistence:
    """Vietoris–Rips persistent homology (``ripser``) of ``points`` (n, d), on a subsample of ``n_points``.

    ``sample="random"`` draws the subsample uniformly (with ``seed``, an int or a ``np.random.Generator``);
    ``sample="furthest"`` takes ripser's greedy
    permutation (furthest-point sampling from the first point; ``seed`` is not used), which covers the cloud evenly, so
    gaps between sampled points - and the short spurious H₁ bars they cause - are smaller for the same cost.

    Relative persistence (bar length / diameter of the subsample) makes bars comparable across clouds of different
    scale; a circle gives one long H₁ bar, a torus two, a disc none.
    """
    from ripser import ripser

    pts = _floats(points, "points")
    if pts.ndim != 2 or pts.shape[0] < 3:
        raise ValueError(f"points must be a 2-D array (n_points >= 3, dim), got shape {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("points must be finite")
    maxdim = as_int(maxdim, "maxdim", 0, 2)
    if n_points is not None:
        n_points = as_int(n_points, "n_points", low=3)
    sample = one_of(sample, "sample", ("random", "furthest"))
    rng = as_generator(seed)
    n_perm = None
    if n_points is not None and n_points < len(pts):
        if sample == "random":
            pts = pts[rng.choice(len(pts), n_points, replace=False)]
        else:
            n_perm = n_points
    if not np.any(pts != pts[0]):
        raise ValueError("points are all identical: the diameter is 0")
    result = ripser(pts, maxdim=maxdim, n_perm=n_perm)
    if n_perm is not None:
        pts = pts[result["idx_perm"]]  # the furthest-point sample ripser used
    diameter = float(pdist(pts).max())
    return Persistence(dgms=[np.asarray(d) for d in result["dgms"]], diameter=diameter, n_points=len(pts))
