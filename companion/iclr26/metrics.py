"""Small statistics shared by the chapters.

:func:`loglog_slope` fits a power law ``y ≈ C x^slope`` by least squares on ``log x, log y`` and gives the slope's
95 % confidence interval, so a chapter can compare a measured scaling exponent (queries against ε, memory against
sequence length, …) with a theoretical one.

:func:`ksg_mi` estimates the mutual information of two continuous vectors with the Kraskov–Stögbauer–Grassberger
k-nearest-neighbour estimator (the first of their two, max-norm, as in NPEET's ``mi``), and :func:`conditional_mi`
builds ``I(a; b | c) = I(a; [b, c]) − I(a; c)`` from it, clipped at 0, as the boosting chapter's official code does.

:func:`discordant_pairs` counts the pairs two rankings order oppositely (the count behind Kendall's τ),
ties excluded.

:func:`transformer_flops` counts the matrix-multiply FLOPs of one decoder forward pass layer by layer, from the
number of tokens each layer sees, so that token-dropping schedules (a vision-language model's pruned image tokens)
can be compared analytically.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from iclr26.validate import as_float, as_generator, as_int

__all__ = ["SlopeFit", "conditional_mi", "discordant_pairs", "ksg_mi", "loglog_slope", "transformer_flops"]


class SlopeFit(NamedTuple):
    """A fitted power law ``y ≈ exp(intercept) * x**slope``; ``[low, high]`` is the slope's 95 % interval."""

    slope: float
    intercept: float
    low: float
    high: float


def _real_array(values, what: str, expected: str) -> np.ndarray:
    """``values`` as a NumPy array of real numbers (ints or floats, not bools): ``TypeError`` naming ``what`` and
    saying it expected ``expected`` otherwise."""
    if values is None or isinstance(values, (str, bytes)) or isinstance(values, numbers.Number):
        raise TypeError(f"{what} must be {expected}, got {type(values).__name__}")
    try:
        arr = np.asarray(values)
    except Exception as exc:  # ragged input
        raise TypeError(f"{what} must be {expected}") from exc
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{what} must hold real numbers, got dtype {arr.dtype}")
    return arr


def _positive_vector(values, what: str) -> np.ndarray:
    arr = _real_array(values, what, "a sequence of positive numbers")
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


def _sample_matrix(values, what: str) -> np.ndarray:
    """``values`` as a float matrix (n, d): a vector is one column; finite real numbers only."""
    arr = _real_array(values, what, "an array of samples (n,) or (n, d)")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(f"{what} must have shape (n,) or (n, d) with d >= 1, got shape {np.shape(values)}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be finite")
    return arr


def _ksg(x: np.ndarray, y: np.ndarray, k: int, base: float, jitter: float, rng: np.random.Generator) -> float:
    from scipy.spatial import cKDTree
    from scipy.special import digamma

    x = x + jitter * rng.random(x.shape)
    y = y + jitter * rng.random(y.shape)
    joint = np.hstack([x, y])
    # distance to the k-th neighbour in the joint space (max-norm; the point itself is neighbour 0)
    eps = cKDTree(joint).query(joint, k=k + 1, p=np.inf)[0][:, k]
    r = np.maximum(eps - 1e-15, 0.0)  # strictly closer than the k-th joint neighbour
    n_x = cKDTree(x).query_ball_point(x, r, p=np.inf, return_length=True)  # counts include the point itself
    n_y = cKDTree(y).query_ball_point(y, r, p=np.inf, return_length=True)
    nats = digamma(k) + digamma(len(x)) - np.mean(digamma(n_x)) - np.mean(digamma(n_y))
    return float(nats / np.log(base))


def ksg_mi(x, y, k: int = 5, *, base: float = 2.0, jitter: float = 1e-10, seed=0) -> float:
    """Mutual information ``I(x; y)`` by the KSG k-nearest-neighbour estimator, in log-``base`` units (default bits).

    ``x`` and ``y`` are samples, shape ``(n,)`` or ``(n, d)``, paired by row. The estimator is Kraskov et al.'s first
    (2004, eq. 8) with the max-norm, computed as NPEET's ``mi`` does: uniform noise of size ``jitter`` breaks ties
    (drawn from ``seed``), ``ε_i`` is the distance to the ``k``-th neighbour in the joint space, ``n_x(i)`` counts the
    points strictly within ``ε_i`` in ``x`` (the point itself included), and
    ``I = ψ(k) + ψ(n) − ⟨ψ(n_x)⟩ − ⟨ψ(n_y)⟩``. It can be slightly negative for independent samples; it is not clipped.

        >>> rng = np.random.default_rng(0)
        >>> z = rng.normal(size=(2000, 2))
        >>> x, y = z[:, 0], 0.8 * z[:, 0] + 0.6 * z[:, 1]  # correlation 0.8: I = -log(1 - 0.64) / 2 nats
        >>> abs(ksg_mi(x, y, base=np.e) - 0.5108) < 0.05
        True
    """
    xs = _sample_matrix(x, "x")
    ys = _sample_matrix(y, "y")
    k = as_int(k, "k", low=1)
    if xs.shape[0] != ys.shape[0]:
        raise ValueError(f"x and y must hold the same number of samples, got {xs.shape[0]} and {ys.shape[0]}")
    k, base, jitter = _ksg_options(k, xs.shape[0], base, jitter)
    return _ksg(xs, ys, k, base, jitter, as_generator(seed))


def _ksg_options(k, n: int, base, jitter) -> tuple[int, float, float]:
    """``k`` (below the ``n`` samples), the logarithm's ``base`` (positive, not 1) and ``jitter``, checked."""
    k = as_int(k, "k", low=1)
    if n <= k:
        raise ValueError(f"k must be smaller than the number of samples ({n}), got {k}")
    base = as_float(base, "base", 0.0, low_open=True)
    if base == 1.0:
        raise ValueError("base must not be 1 (log 1 = 0)")
    return k, base, as_float(jitter, "jitter", 0.0)


def conditional_mi(
    a, b, c, k: int = 5, *, base: float = 2.0, jitter: float = 1e-10, clip: bool = True, seed=0
) -> float:
    """Conditional mutual information ``I(a; b | c) = I(a; [b, c]) − I(a; c)``, each term by :func:`ksg_mi`.

    This is the chain-rule form of the boosting chapter's official code (two KSG estimates, the second subtracted), not
    the Frenzel–Pompe conditional estimator; with ``clip`` (the official choice) a negative difference is returned as 0.
    ``a``, ``b``, ``c``: samples ``(n,)`` or ``(n, d)`` paired by row; ``k``, ``base``, ``jitter`` and ``seed`` as in
    :func:`ksg_mi` (the two estimates use the same seed).

        >>> rng = np.random.default_rng(0)
        >>> a = rng.normal(size=1000); c = a + rng.normal(size=1000); b = c + rng.normal(size=1000)
        >>> conditional_mi(a, b, c) < 0.05  # a -> c -> b: a and b are independent given c
        True
    """
    a_ = _sample_matrix(a, "a")
    b_ = _sample_matrix(b, "b")
    c_ = _sample_matrix(c, "c")
    if not a_.shape[0] == b_.shape[0] == c_.shape[0]:
        sizes = f"{a_.shape[0]}, {b_.shape[0]}, {c_.shape[0]}"
        raise ValueError(f"a, b and c must hold the same number of samples, got {sizes}")
    if not isinstance(clip, (bool, np.bool_)):
        raise TypeError(f"clip must be a bool, got {type(clip).__name__}")
    k, base, jitter = _ksg_options(k, a_.shape[0], base, jitter)
    joint = _ksg(a_, np.hstack([b_, c_]), k, base, jitter, as_generator(seed))
    given = _ksg(a_, c_, k, base, jitter, as_generator(seed))
    value = joint - given
    return float(max(0.0, value)) if clip else float(value)


def _real_vector(values, what: str) -> np.ndarray:
    arr = _real_array(values, what, "a sequence of real numbers")
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    arr = arr.astype(float)
    if np.isnan(arr).any():
        raise ValueError(f"{what} must not contain NaN (rank a failed run explicitly, e.g. as +inf)")
    return arr


def discordant_pairs(a, b) -> int:
    """The number of pairs ``i < j`` that ``a`` and ``b`` order oppositely: ``(a_i − a_j)(b_i − b_j) < 0``.

    A pair tied in ``a`` or in ``b`` is neither concordant nor discordant and is not counted. ``a`` and ``b`` are
    one-dimensional sequences of real numbers of equal length (±inf allowed, so a diverged run can be ranked last;
    NaN refused). For ``n`` items without ties, ``discordant_pairs = n(n−1)/2 · (1 − τ)/2`` with Kendall's τ.

        >>> discordant_pairs([1, 2, 3, 4], [1, 3, 2, 4])
        1
        >>> discordant_pairs([1, 2, 3], [3, 2, 2])   # the pair tied in b is not counted
        2
    """
    xa = _real_vector(a, "a")
    xb = _real_vector(b, "b")
    if xa.size != xb.size:
        raise ValueError(f"a and b must have the same length, got {xa.size} and {xb.size}")
    with np.errstate(invalid="ignore"):  # inf − inf is a tie (NaN sign → 0)
        da = np.sign(xa[:, None] - xa[None, :])
        db = np.sign(xb[:, None] - xb[None, :])
    prod = np.nan_to_num(da * db, nan=0.0)
    return int((np.triu(prod, 1) < 0).sum())


def transformer_flops(
    tokens_per_layer,
    *,
    d_model: int,
    d_mlp: int,
    d_attn: int | None = None,
    vocab_size: int = 0,
    logit_tokens: int = 1,
) -> float:
    """Matrix-multiply FLOPs (2 per multiply-add) of one sequence's forward pass through a pre-LN decoder.

    ``tokens_per_layer``: the number of tokens s_l each layer processes (one entry per layer). Layer l costs
    ``2·s_l·d·(3·d_attn)`` for Q, K, V, ``2·2·s_l²·d_attn`` for the scores and the attention-weighted values (every
    query against every key, as a dense kernel computes them), ``2·s_l·d_attn·d`` for the output projection and
    ``2·2·s_l·d·d_mlp`` for the MLP; ``d_attn = n_heads·d_head`` (default ``d_model``). The unembedding adds
    ``2·logit_tokens·d·vocab_size``. Norms, softmax and additions are not counted (they are O(s·d)).
    """
    s = _real_array(tokens_per_layer, "tokens_per_layer", "a sequence of token counts (one per layer)")
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"tokens_per_layer must be a non-empty 1-D sequence, got shape {s.shape}")
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError("tokens_per_layer must hold finite counts >= 0")
    d = as_int(d_model, "d_model", low=1)
    m = as_int(d_mlp, "d_mlp", low=1)
    a = d if d_attn is None else as_int(d_attn, "d_attn", low=1)
    v = as_int(vocab_size, "vocab_size", low=0)
    t = as_int(logit_tokens, "logit_tokens", low=0)
    s = s.astype(float)
    per_layer = 2 * s * d * 3 * a + 4 * s * s * a + 2 * s * a * d + 4 * s * d * m
    return float(per_layer.sum() + 2.0 * t * d * v)
