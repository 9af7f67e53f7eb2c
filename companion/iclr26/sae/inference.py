"""Per-sample inference on a fixed decoder: :func:`ista` / :func:`fista` on :func:`lasso_objective` (step
``1 / ||D||_2^2`` from :func:`spectral_norm_sq`) and :func:`calibrate_lambda`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from iclr26.sae._validation import _as_tensor
from iclr26.validate import as_bool, as_float, as_int, as_prob, torch_generator

__all__ = ["spectral_norm_sq", "lasso_objective", "ista", "fista", "LambdaCalibration", "calibrate_lambda"]


def _dictionary(dictionary: Any) -> torch.Tensor:
    d = _as_tensor(dictionary, "dictionary", ndim=2).detach()
    if d.shape[0] == 0 or d.shape[1] == 0:
        raise ValueError(f"dictionary must have at least one atom and one feature, got shape {tuple(d.shape)}")
    return d


def _problem(x: Any, dictionary: Any) -> tuple[torch.Tensor, torch.Tensor]:
    d = _dictionary(dictionary)
    x = _as_tensor(x, "x", ndim=2, last=d.shape[1]).detach()
    return x.to(d.dtype), d


def spectral_norm_sq(dictionary: Any, iters: int = 100, seed: int | np.random.Generator = 0) -> float:
    """``||D||_2^2``, the largest eigenvalue of ``D^T D``, by power iteration (``iters`` steps from a random start):
    the Lipschitz constant of the gradient of ``1/2 ||x - z D||^2`` in ``z`` (``D``: ``(width, d)``, atoms as rows)."""
    d = _dictionary(dictionary).double()
    iters = as_int(iters, "iters", low=1)
    v = torch.randn(d.shape[1], generator=torch_generator(seed), dtype=torch.float64).to(d.device)
    v = v / v.norm().clamp_min(1e-30)
    for _ in range(iters):
        w = d.T @ (d @ v)
        nw = w.norm()
        if nw == 0:
            return 0.0
        v = w / nw
    return float(v @ (d.T @ (d @ v)))


def _lasso(x: torch.Tensor, d: torch.Tensor, z: torch.Tensor, lam: float) -> torch.Tensor:
    return 0.5 * (x - z @ d).pow(2).sum(-1) + lam * z.abs().sum(-1)


def lasso_objective(x: Any, dictionary: Any, z: Any, lam: float) -> torch.Tensor:
    """Per-sample ``L(z) = 1/2 ||x - z D||^2 + lam ||z||_1`` (``x``: ``(n, d)``, ``D``: ``(width, d)``,
    ``z``: ``(n, width)``), shape ``(n,)``."""
    x, d = _problem(x, dictionary)
    z = _as_tensor(z, "z", ndim=2, last=d.shape[0]).detach().to(d.dtype)
    if z.shape[0] != x.shape[0]:
        raise ValueError(f"z must have one row per row of x ({x.shape[0]}), got {z.shape[0]}")
    lam = as_float(lam, "lam", low=0.0)
    return _lasso(x, d, z, lam)


def ista(
    x: Any,
    dictionary: Any,
    lam: float,
    steps: int,
    z0: Any = None,
    *,
    nonnegative: bool = True,
    accelerate: bool = False,
    step_size: float | None = None,
    return_trace: bool = False,
):
    """Per-sample sparse inference on a fixed dictionary: proximal gradient on ``L(z)`` (:func:`lasso_objective`).

    Each step is ``z <- prox(z - eta * (z D - x) D^T)`` with ``eta = 1 / ||D||_2^2`` (:func:`spectral_norm_sq`) unless
    ``step_size`` is given; ``prox`` is ``max(0, . - eta lam)`` with ``nonnegative=True`` (SAE codes) or the two-sided
    soft threshold. ``z0``: the start (``(n, width)``; default zeros; negative entries are refused when
    ``nonnegative``). ``accelerate=True`` is FISTA (Nesterov momentum, not monotone). With ``eta <= 1/||D||_2^2``
    ISTA never increases ``L``. Returns ``z`` (``(n, width)``), and with ``return_trace`` also the per-sample
    objective after each step, ``(steps + 1, n)`` (row 0: the start)."""
    x, d = _problem(x, dictionary)
    lam = as_float(lam, "lam", low=0.0)
    steps = as_int(steps, "steps", low=0)
    nonnegative = as_bool(nonnegative, "nonnegative")
    accelerate = as_bool(accelerate, "accelerate")
    return_trace = as_bool(return_trace, "return_trace")
    if step_size is None:
        lip = spectral_norm_sq(d)
        eta = 1.0 / lip if lip > 0 else 1.0
    else:
        eta = as_float(step_size, "step_size", 0.0, low_open=True)
    if z0 is None:
        z = x.new_zeros(x.shape[0], d.shape[0])
    else:
        z = _as_tensor(z0, "z0", ndim=2, last=d.shape[0]).detach().to(d.dtype).clone()
        if z.shape[0] != x.shape[0]:
            raise ValueError(f"z0 must have one row per row of x ({x.shape[0]}), got {z.shape[0]}")
        if nonnegative and bool((z < 0).any()):
            raise ValueError("z0 must be non-negative when nonnegative=True (a feasible start)")

    def prox(v: torch.Tensor) -> torch.Tensor:
        if nonnegative:
            return (v - eta * lam).clamp_min(0)
        return v.sign() * (v.abs() - eta * lam).clamp_min(0)

    trace = [_lasso(x, d, z, lam)] if return_trace else None
    y, t = z, 1.0
    for _ in range(steps):
        z_new = prox(y - eta * ((y @ d - x) @ d.T))
        if accelerate:
            t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
            y = z_new + ((t - 1) / t_new) * (z_new - z)
            t = t_new
        else:
            y = z_new
        z = z_new
        if return_trace:
            trace.append(_lasso(x, d, z, lam))
    if return_trace:
        return z, torch.stack(trace)
    return z


def fista(x: Any, dictionary: Any, lam: float, steps: int, z0: Any = None, **kwargs: Any):
    """:func:`ista` with Nesterov acceleration (FISTA): faster, but the objective may go up between steps."""
    return ista(x, dictionary, lam, steps, z0, accelerate=True, **kwargs)


@dataclass(frozen=True)
class LambdaCalibration:
    """Result of :func:`calibrate_lambda`: the chosen ``lam``, the ``grid`` and the firing ``density`` at each point."""

    lam: float
    grid: np.ndarray
    density: np.ndarray


def calibrate_lambda(
    x: Any,
    dictionary: Any,
    target_density: float,
    grid: Any = None,
    steps: int = 100,
    nonnegative: bool = True,
) -> LambdaCalibration:
    """The ``lam`` of ``grid`` (default ``logspace(-5, -1, 9)``) whose ISTA codes (``steps`` steps from zero) have the
    firing density ``mean(z != 0)`` closest to ``target_density`` — the official calibration."""
    x, d = _problem(x, dictionary)
    target_density = as_prob(target_density, "target_density")
    if grid is not None and (isinstance(grid, str) or not isinstance(grid, (np.ndarray, torch.Tensor, list, tuple))):
        raise TypeError(f"grid must be None or a sequence of positive λ values, got {type(grid).__name__}")
    grid = np.logspace(-5, -1, 9) if grid is None else np.asarray(grid, dtype=float).reshape(-1)
    if grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid < 0):
        raise ValueError("grid must be a non-empty sequence of finite lam >= 0")
    steps = as_int(steps, "steps", low=1)
    eta = 1.0 / max(spectral_norm_sq(d), 1e-30)
    density = np.array(
        [
            float((ista(x, d, float(lam), steps, nonnegative=nonnegative, step_size=eta) != 0).double().mean())
            for lam in grid
        ]
    )
    return LambdaCalibration(
        lam=float(grid[int(np.argmin(np.abs(density - target_density)))]), grid=grid, density=density
    )
