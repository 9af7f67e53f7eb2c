"""Hyperparameter sweeps with a cache: :func:`grid_search` and :func:`coordinate_descent`.

An *objective* takes a configuration (a dict of hyperparameters) and returns the loss to minimise, either a float
or a dict with a ``"loss"`` key and any other JSON-serialisable numbers (e.g. a mid-training loss). Every result
goes into a :class:`SweepCache` keyed by the configuration (plus any ``fixed`` settings), so a second sweep over
overlapping points - another grid, another start, another threshold - never trains the same configuration twice,
and the cache can be saved to / loaded from JSON.

Coordinate descent follows the protocol of Wen et al. (2025), Phase I: start from a configuration on the grid,
move one hyperparameter to a neighbouring grid value, keep the move only when the loss improves by more than
``threshold``, keep walking in a direction while it pays, and stop when a full pass over the hyperparameters
changes nothing.

    cache = SweepCache()
    res = coordinate_descent(objective, {"lr": [1e-3, 3e-3, 1e-2], "weight_decay": [0.0, 0.1]},
                             init={"lr": 3e-3, "weight_decay": 0.1}, threshold=3e-3, cache=cache)
    res.best, res.best_loss, res.n_evals, res.history
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

from iclr26.validate import as_float, as_int, json_value

__all__ = ["SweepCache", "SweepResult", "grid_search", "coordinate_descent"]

Objective = Callable[[dict[str, Any]], "float | Mapping[str, Any]"]


class SweepCache:
    """Results of an objective by configuration: ``cache[config] -> {"loss": ..., ...}``; JSON on disk."""

    def __init__(self, results: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._results: dict[str, dict[str, Any]] = {}
        if results is not None:
            if not isinstance(results, Mapping):
                raise TypeError(f"results must be a mapping key -> result dict, got {type(results).__name__}")
            for k, v in results.items():
                if not isinstance(k, str) or not isinstance(v, Mapping) or "loss" not in v:
                    raise ValueError("results must map string keys to dicts with a 'loss' entry")
                self._results[k] = dict(v)

    @staticmethod
    def key(config: Mapping[str, Any]) -> str:
        """The cache key of a configuration: its JSON with sorted keys."""
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping of hyperparameters, got {type(config).__name__}")
        return json.dumps({str(k): json_value(v, f"config[{k!r}]") for k, v in config.items()}, sort_keys=True)

    def __contains__(self, config: Mapping[str, Any]) -> bool:
        return self.key(config) in self._results

    def __getitem__(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return self._results[self.key(config)]

    def __setitem__(self, config: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        self._results[self.key(config)] = dict(result)

    def __len__(self) -> int:
        return len(self._results)

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def items(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """``(config, result)`` pairs in insertion order."""
        return [(json.loads(k), dict(v)) for k, v in self._results.items()]

    def to_json(self) -> str:
        return json.dumps(self._results, sort_keys=True)

    def save(self, path: str | Path) -> Path:
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> SweepCache:
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"path {str(path)!r} does not exist")
        return cls(json.loads(path.read_text()))


@dataclass
class SweepResult:
    """The best configuration, its loss, every configuration asked for (in order) and how many were trained."""

    best: dict[str, Any]
    best_loss: float
    history: list[dict[str, Any]] = field(default_factory=list)
    n_evals: int = 0

    def frame(self):
        """The history as a pandas DataFrame (one row per configuration asked for)."""
        import pandas as pd

        return pd.DataFrame(self.history)


# ---------------------------------------------------------------------------------------------- helpers
def _check_objective(objective: Any) -> None:
    if not callable(objective):
        raise TypeError(f"objective must be a callable config -> loss, got {type(objective).__name__}")


def _check_grid(grid: Any) -> dict[str, list[Any]]:
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError("grid must be a non-empty mapping name -> list of values")
    out: dict[str, list[Any]] = {}
    for name, values in grid.items():
        if not isinstance(name, str):
            raise TypeError(f"grid keys must be strings, got {type(name).__name__}")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
            raise ValueError(f"grid[{name!r}] must be a non-empty list of values, got {values!r}")
        vals = list(values)
        keys = [json.dumps(json_value(v, f"grid[{name!r}]")) for v in vals]
        if len(set(keys)) != len(keys):
            raise ValueError(f"grid[{name!r}] has repeated values: {vals!r}")
        out[name] = vals
    return out


def _check_fixed(fixed: Any, grid: Mapping[str, Any]) -> dict[str, Any]:
    if fixed is None:
        return {}
    if not isinstance(fixed, Mapping):
        raise TypeError(f"fixed must be a mapping of settings or None, got {type(fixed).__name__}")
    clash = sorted(set(fixed) & set(grid))
    if clash:
        raise ValueError(f"fixed and grid both set {clash}")
    return dict(fixed)


def _check_cache(cache: Any) -> SweepCache:
    if cache is None:
        return SweepCache()
    if not isinstance(cache, SweepCache):
        raise TypeError(f"cache must be a SweepCache or None, got {type(cache).__name__}")
    return cache


class _Evaluator:
    """Calls the objective through the cache and records the history."""

    def __init__(self, objective: Objective, fixed: dict[str, Any], cache: SweepCache, max_evals: int | None) -> None:
        self.objective, self.fixed, self.cache, self.max_evals = objective, fixed, cache, max_evals
        self.history: list[dict[str, Any]] = []
        self.n_evals = 0

    def __call__(self, config: dict[str, Any]) -> float:
        full = {**self.fixed, **config}
        cached = full in self.cache
        if cached:
            result = self.cache[full]
        else:
            if self.max_evals is not None and self.n_evals >= self.max_evals:
                return math.inf
            out = self.objective(dict(full))
            if isinstance(out, Mapping):
                if "loss" not in out:
                    raise ValueError("objective returned a dict without a 'loss' entry")
                result = {
                    k: (float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else v)
                    for k, v in out.items()
                }
            elif isinstance(out, numbers.Real) and not isinstance(out, bool):
                result = {"loss": float(out)}
            else:
                item = getattr(out, "item", None)
                if callable(item) and getattr(out, "ndim", 1) == 0:
                    result = {"loss": float(item())}
                else:
                    raise TypeError(f"objective must return a number or a dict with 'loss', got {type(out).__name__}")
            self.cache[full] = result
            self.n_evals += 1
        loss = float(result["loss"])
        if math.isnan(loss):
            loss = math.inf  # a diverged run is the worst possible result, never the best
        self.history.append({**config, "loss": loss, "cached": cached})
        return loss


# ---------------------------------------------------------------------------------------------- sweeps
def grid_search(
    objective: Objective,
    grid: Mapping[str, Sequence[Any]],
    *,
    fixed: Mapping[str, Any] | None = None,
    cache: SweepCache | None = None,
) -> SweepResult:
    """Evaluate every combination of ``grid`` (with the ``fixed`` settings added) and return the best."""
    _check_objective(objective)
    grid = _check_grid(grid)
    ev = _Evaluator(objective, _check_fixed(fixed, grid), _check_cache(cache), None)
    best, best_loss = None, math.inf
    names = list(grid)
    for values in product(*(grid[n] for n in names)):
        config = dict(zip(names, values))
        loss = ev(config)
        if best is None or loss < best_loss:
            best, best_loss = config, loss
    return SweepResult(best=dict(best), best_loss=best_loss, history=ev.history, n_evals=ev.n_evals)


def coordinate_descent(
    objective: Objective,
    grid: Mapping[str, Sequence[Any]],
    *,
    init: Mapping[str, Any] | None = None,
    threshold: float = 3e-3,
    fixed: Mapping[str, Any] | None = None,
    cache: SweepCache | None = None,
    max_evals: int | None = None,
) -> SweepResult:
    """Coordinate descent on a grid: accept a move to a neighbouring value only if the loss drops by > ``threshold``.

    ``init`` picks the starting value of each hyperparameter (default: the middle of its list); its values must
    be on the grid. Hyperparameters are visited in the grid's order; for each, both neighbours are tried and the
    better one is taken if it beats the current loss by more than ``threshold``, then the walk continues in that
    direction while it keeps paying. Passes repeat until one changes nothing. ``max_evals`` caps the number of
    new (uncached) trainings.
    """
    _check_objective(objective)
    grid = _check_grid(grid)
    threshold = as_float(threshold, "threshold", 0.0)
    if max_evals is not None:
        max_evals = as_int(max_evals, "max_evals", low=1)
    fixed = _check_fixed(fixed, grid)
    index: dict[str, int] = {}
    init = {} if init is None else init
    if not isinstance(init, Mapping):
        raise TypeError(f"init must be a mapping name -> value or None, got {type(init).__name__}")
    unknown = sorted(set(init) - set(grid))
    if unknown:
        raise ValueError(f"init sets {unknown}, which are not in the grid {sorted(grid)}")
    for name, values in grid.items():
        if name in init:
            keys = [json.dumps(json_value(v, name)) for v in values]
            k = json.dumps(json_value(init[name], f"init[{name!r}]"))
            if k not in keys:
                raise ValueError(f"init[{name!r}]={init[name]!r} is not on the grid {values!r}")
            index[name] = keys.index(k)
        else:
            index[name] = (len(values) - 1) // 2
    ev = _Evaluator(objective, fixed, _check_cache(cache), max_evals)

    def config_at(idx: Mapping[str, int]) -> dict[str, Any]:
        return {n: grid[n][i] for n, i in idx.items()}

    best_loss = ev(config_at(index))
    changed = True
    while changed:
        changed = False
        for name, values in grid.items():
            trials = []
            for step in (-1, +1):
                j = index[name] + step
                if 0 <= j < len(values):
                    trials.append((ev(config_at({**index, name: j})), step))
            if not trials:
                continue
            loss, step = min(trials)
            if loss < best_loss - threshold:
                index[name] += step
                best_loss = loss
                changed = True
                while 0 <= index[name] + step < len(values):  # keep walking while it pays
                    nxt = ev(config_at({**index, name: index[name] + step}))
                    if nxt < best_loss - threshold:
                        index[name] += step
                        best_loss = nxt
                    else:
                        break
    return SweepResult(best=config_at(index), best_loss=best_loss, history=ev.history, n_evals=ev.n_evals)
