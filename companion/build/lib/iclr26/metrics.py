"""Small statistics shared by the chapters.

:func:`loglog_slope` fits a power law ``y ≈ C x^slope`` by least squares on ``log x, log y`` and gives the slope's
95 % confidence interval, so a chapter can compare a measured scaling exponent (queries against ε, memory against
sequence length, …) with a theoretical one.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

__all__ = ["SlopeFit", "loglog_slope"]


class SlopeFit(NamedTuple):
    """A fitted power law ``y ≈ exp(intercept) * x**slope``; ``[low, high]`` is the slope's 95 % interval."""

    slope: float
    intercept: float
    low: float
    high: float


def _positive_vector(values, what: str) -> np.ndarray:
    if isinstance(values, (str, bytes)) or isinstance(values, numbers.Number):
        raise TypeError(f"{what} must be a sequence of positive numbers, got {type(values).__name__}")
    try:
        arr = np.asarray(values)
    except Exception as exc:  # ragged input
        raise TypeError(f"{what} must be a sequence of positive numbers") from exc
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{what} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{what} must be finite and positive (a log-log fit), got min {arr.min()}")
    return arr


def loglog_slope(x, y) -> SlopeFit:
    """Slope of ``log y`` against ``log x`` (``scipy.stats.linregress``) with a 95 % interval.

    The interval is ``slope ± t_{0.975, m-2} · stderr`` for ``m`` points. ``x`` and ``y`` must be one-dimensional,
    of equal length, with at least 3 points (so the interval is defined), finite and positive.

        >>> round(loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]).slope, 6)
        2.0
    """
    from scipy import stats

    xs = _positive_vector(x, "x")
    ys = _positive_vector(y, "y")
    if xs.size != ys.size:
        raise ValueError(f"x and y must have the same length, got {xs.size} and {ys.size}")
    if xs.size < 3:
        raise ValueError(f"x must hold at least 3 points for a slope with an interval, got {xs.size}")
    if np.ptp(np.log(xs)) == 0:
        raise ValueError("x must hold at least two distinct values")
    fit = stats.linregress(np.log(xs), np.log(ys))
    half = float(stats.t.ppf(0.975, xs.size - 2) * fit.stderr)
    slope = float(fit.slope)
    return SlopeFit(slope=slope, intercept=float(fit.intercept), low=slope - half, high=slope + half)
