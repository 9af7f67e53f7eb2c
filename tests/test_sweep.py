"""Tests of iclr26.sweep: grid search and coordinate descent with a cache."""

import math

import pytest

from iclr26.sweep import SweepCache, coordinate_descent, grid_search

LRS = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
WDS = [0.0, 0.1, 0.3]


def bowl(config):
    """Minimum at lr=1e-2, wd=0.1; log-lr distance dominates."""
    return (math.log10(config["lr"]) + 2) ** 2 + 10 * (config["wd"] - 0.1) ** 2


def test_grid_search_finds_the_minimum_and_counts_evals():
    res = grid_search(bowl, {"lr": LRS, "wd": WDS})
    assert res.best == {"lr": 1e-2, "wd": 0.1} and res.best_loss == 0.0
    assert res.n_evals == 15 and len(res.history) == 15
    assert list(res.frame().columns) == ["lr", "wd", "loss", "cached"]


def test_coordinate_descent_walks_to_the_minimum_with_fewer_evals():
    calls = []

    def objective(c):
        calls.append(c)
        return bowl(c)

    res = coordinate_descent(objective, {"lr": LRS, "wd": WDS}, init={"lr": 1e-4, "wd": 0.3}, threshold=1e-3)
    assert res.best == {"lr": 1e-2, "wd": 0.1}
    assert res.n_evals == len(calls) < 15


def test_threshold_blocks_small_improvements():
    res = coordinate_descent(bowl, {"lr": LRS, "wd": WDS}, init={"lr": 1e-2, "wd": 0.0}, threshold=0.5)
    assert res.best == {"lr": 1e-2, "wd": 0.0}  # moving wd to 0.1 gains only 0.1 < 0.5


def test_cache_is_shared_and_round_trips(tmp_path):
    cache = SweepCache()
    grid_search(bowl, {"lr": LRS}, fixed={"wd": 0.1}, cache=cache)
    assert len(cache) == 5
    res = coordinate_descent(bowl, {"lr": LRS}, fixed={"wd": 0.1}, cache=cache)
    assert res.n_evals == 0 and all(h["cached"] for h in res.history)
    path = cache.save(tmp_path / "c.json")
    again = SweepCache.load(path)
    assert len(again) == 5 and again[{"lr": 1e-2, "wd": 0.1}]["loss"] == 0.0
    assert again.items()[0][0] == {"lr": 1e-4, "wd": 0.1}


def test_dict_objective_nan_and_max_evals():
    res = grid_search(lambda c: {"loss": float("nan") if c["lr"] > 0.5 else c["lr"], "mid": 2.0}, {"lr": [0.1, 1.0]})
    assert res.best == {"lr": 0.1}
    cache = SweepCache()
    coordinate_descent(lambda c: {"loss": c["lr"], "mid": 3.0}, {"lr": LRS}, cache=cache, max_evals=2)
    assert len(cache) == 2 and cache[{"lr": 1e-2}]["mid"] == 3.0


def test_bad_inputs(tmp_path):
    with pytest.raises(TypeError, match="objective must be a callable"):
        grid_search(3, {"lr": LRS})
    with pytest.raises(ValueError, match="grid must be a non-empty mapping"):
        grid_search(bowl, {})
    with pytest.raises(ValueError, match=r"grid\['lr'\] must be a non-empty list"):
        grid_search(bowl, {"lr": []})
    with pytest.raises(ValueError, match="repeated values"):
        grid_search(bowl, {"lr": [1e-3, 1e-3]})
    with pytest.raises(ValueError, match="fixed and grid both set"):
        grid_search(bowl, {"lr": LRS}, fixed={"lr": 1.0})
    with pytest.raises(TypeError, match="cache must be a SweepCache"):
        grid_search(bowl, {"lr": LRS}, cache={})
    with pytest.raises(ValueError, match="threshold must be a number >= 0"):
        coordinate_descent(bowl, {"lr": LRS, "wd": WDS}, threshold=-1)
    with pytest.raises(ValueError, match="is not on the grid"):
        coordinate_descent(bowl, {"lr": LRS, "wd": WDS}, init={"lr": 0.5})
    with pytest.raises(ValueError, match="not in the grid"):
        coordinate_descent(bowl, {"lr": LRS, "wd": WDS}, init={"beta": 0.5})
    with pytest.raises(ValueError, match="max_evals must be an int >= 1"):
        coordinate_descent(bowl, {"lr": LRS, "wd": WDS}, max_evals=0)
    with pytest.raises(TypeError, match="objective must return a number"):
        grid_search(lambda c: "bad", {"lr": LRS})
    with pytest.raises(ValueError, match="without a 'loss' entry"):
        grid_search(lambda c: {"mid": 1.0}, {"lr": LRS})
    with pytest.raises(TypeError, match="must be a number, bool, string"):
        SweepCache.key({"lr": object()})
    with pytest.raises(ValueError, match="does not exist"):
        SweepCache.load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="'loss' entry"):
        SweepCache({"k": {"mid": 1.0}})


def test_numpy_counts_and_wrong_types():
    import numpy as np

    res = coordinate_descent(bowl, {"lr": LRS, "wd": WDS}, max_evals=np.int64(4), threshold=np.float64(0.0))
    assert res.n_evals == 4
    with pytest.raises(TypeError, match="max_evals must be an int"):
        coordinate_descent(bowl, {"lr": LRS, "wd": WDS}, max_evals=4.0)
    with pytest.raises(TypeError, match="threshold must be a number"):
        coordinate_descent(bowl, {"lr": LRS, "wd": WDS}, threshold="0")
