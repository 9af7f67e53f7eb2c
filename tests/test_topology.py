"""Unit tests of iclr26.topology (fast: small point clouds)."""

import numpy as np
import pytest

from iclr26.topology import (
    MMDTest,
    circular_mean,
    circular_resultant,
    mmd_circular_test,
    persistence,
    wrap_angle,
)


def test_wrap_angle():
    x = np.array([0.0, np.pi, -np.pi, 3 * np.pi, 2 * np.pi + 0.1, -0.1])
    w = wrap_angle(x)
    assert np.all(w > -np.pi) and np.all(w <= np.pi)
    np.testing.assert_allclose(w, [0.0, np.pi, np.pi, np.pi, 0.1, -0.1], atol=1e-12)
    with pytest.raises(ValueError, match="finite"):
        wrap_angle([np.nan])


def test_resultant_and_mean():
    assert circular_resultant(np.full(10, 1.3)) == pytest.approx(1.0)
    assert circular_mean(np.full(10, 1.3)) == pytest.approx(1.3)
    uniform = np.linspace(-np.pi, np.pi, 100, endpoint=False)
    assert circular_resultant(uniform) < 1e-10
    assert circular_mean([np.pi - 0.1, -np.pi + 0.1]) == pytest.approx(np.pi)
    with pytest.raises(ValueError, match="1-D"):
        circular_resultant(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="empty"):
        circular_resultant([])


def test_mmd_matches_kernel_definition_and_separates():
    rng = np.random.default_rng(0)
    x = rng.vonmises(0.0, 8.0, 40)
    y = rng.uniform(-np.pi, np.pi, 50)
    mmd2, p = mmd_circular_test(x, y, kappa=2.0, n_perm=200)

    def k(a, b):
        return np.exp(2.0 * (np.cos(a[:, None] - b[None, :]) - 1))

    direct = k(x, x).mean() + k(y, y).mean() - 2 * k(x, y).mean()
    assert mmd2 == pytest.approx(direct, rel=1e-6)
    assert p < 0.01
    _, p_same = mmd_circular_test(x[:20], x[20:], n_perm=200)
    assert p_same > 0.05
    for bad in (dict(kappa=0), dict(n_perm=0), dict(max_order=0)):
        with pytest.raises(ValueError):
            mmd_circular_test(x, y, **bad)
    with pytest.raises(ValueError, match="y"):
        mmd_circular_test(x, [])


def test_persistence_circle_torus_disc():
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 2 * np.pi, 150)
    circle = np.c_[np.cos(t), np.sin(t)]
    assert persistence(circle).count(1, 0.2) == 1
    g = np.linspace(0, 2 * np.pi, 14, endpoint=False)
    u, v = (a.ravel() for a in np.meshgrid(g, g))
    torus = np.c_[np.cos(u), np.sin(u), np.cos(v), np.sin(v)]  # a 14 x 14 grid on the Clifford torus
    ph = persistence(torus, n_points=None)
    assert ph.count(1, 0.2) == 2
    assert persistence(torus, n_points=50).n_points == 50
    r = np.sqrt(rng.uniform(0, 1, 200))
    disc = np.c_[r * np.cos(rng.uniform(0, 2 * np.pi, 200)), r * np.sin(rng.uniform(0, 2 * np.pi, 200))]
    assert persistence(disc).count(1, 0.15) == 0
    rel = ph.relative(1)
    assert np.all(np.diff(rel) <= 0)
    with pytest.raises(ValueError, match="dim"):
        ph.relative(3)
    with pytest.raises(ValueError, match="threshold"):
        ph.count(1, 1.5)


def test_persistence_bad_inputs():
    with pytest.raises(ValueError, match="points"):
        persistence(np.zeros(5))
    with pytest.raises(ValueError, match="diameter"):
        persistence(np.zeros((5, 2)))
    with pytest.raises(ValueError, match="maxdim"):
        persistence(np.eye(4), maxdim=3)
    with pytest.raises(ValueError, match="n_points"):
        persistence(np.eye(4), n_points=2)
    with pytest.raises(ValueError, match="sample"):
        persistence(np.eye(4), sample="grid")
    with pytest.raises(ValueError, match="diameter"):
        persistence(np.ones((10, 3)), n_points=5, sample="furthest")


def test_furthest_point_sample_covers_evenly_and_shortens_spurious_bars():
    rng = np.random.default_rng(0)
    g = np.linspace(0, 2 * np.pi, 40, endpoint=False)
    u, v = (a.ravel() for a in np.meshgrid(g, g))
    torus = np.c_[np.cos(u), np.sin(u), np.cos(v), np.sin(v)] + 0.01 * rng.normal(size=(1600, 4))
    even = persistence(torus, n_points=200, sample="furthest")
    rand = persistence(torus, n_points=200, seed=0)
    assert even.n_points == rand.n_points == 200
    assert even.count(1, 0.2) == 2  # the torus' two loops
    assert even.relative(1)[2] < rand.relative(1)[2]  # the longest spurious bar is shorter
    # deterministic (it starts from the first point), whatever the seed
    again = persistence(torus, n_points=200, sample="furthest", seed=5)
    np.testing.assert_allclose(again.dgms[1], even.dgms[1])


def test_mmd_returns_a_named_result_and_takes_generators_and_numpy_ints():
    rng = np.random.default_rng(1)
    x, y = rng.vonmises(0.0, 4.0, 20), rng.uniform(-np.pi, np.pi, 20)
    out = mmd_circular_test(x, y, n_perm=50, seed=2)
    assert isinstance(out, MMDTest) and out._fields == ("mmd2", "p_value")
    mmd2, p = out
    assert (mmd2, p) == (out.mmd2, out.p_value)
    # an int seed and np.random.default_rng of it draw the same permutations; np.int64 counts are ints
    assert mmd_circular_test(x, y, n_perm=np.int64(50), max_order=np.int64(64), seed=np.random.default_rng(2)) == out
    with pytest.raises(TypeError, match="n_perm must be an int"):
        mmd_circular_test(x, y, n_perm=50.0)
    with pytest.raises(TypeError, match="seed"):
        mmd_circular_test(x, y, seed=0.5)
    with pytest.raises(TypeError, match="kappa must be a number"):
        mmd_circular_test(x, y, kappa="2")


def test_persistence_seed_generator_and_numpy_ints():
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 2 * np.pi, 120)
    circle = np.c_[np.cos(t), np.sin(t)]
    a = persistence(circle, n_points=40, seed=4)
    b = persistence(circle, n_points=np.int64(40), maxdim=np.int64(1), seed=np.random.default_rng(4))
    np.testing.assert_array_equal(a.dgms[1], b.dgms[1])
    assert a.count(np.int64(1), 0.2) == 1 and a.relative(np.int64(0)).ndim == 1
    with pytest.raises(TypeError, match="n_points must be an int"):
        persistence(circle, n_points=40.0)
    with pytest.raises(TypeError, match="maxdim must be an int"):
        persistence(circle, maxdim=1.0)
    with pytest.raises(TypeError, match="dim must be an int"):
        a.relative(1.0)
    with pytest.raises(TypeError, match="seed"):
        persistence(circle, seed="0")
