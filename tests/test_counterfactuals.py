import math
from itertools import combinations

import numpy as np
import pytest
import torch
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

from iclr26.counterfactuals import (
    EDIT_TOL,
    Counterfactuals,
    baseline_shapley,
    edit_mask,
    exhaustive_min_edits,
    growing_spheres_cf,
    nearest_target_cf,
    positive_proba,
    predict_target,
    random_subset_cf,
    sample_target_cf,
    sparsify_cf,
    torch_logit,
    wachter_cf,
)


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 2] > 0.2).astype(int)
    lr = LogisticRegression().fit(X, y)
    rf = RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0).fit(X, y)
    mlp = MLPClassifier((8,), max_iter=300, learning_rate_init=0.01, random_state=0).fit(X, y)
    neg = X[~predict_target(lr, X)][:10]
    return dict(X=X, y=y, lr=lr, rf=rf, mlp=mlp, neg=neg)


def test_torch_logit_matches_sklearn(toy):
    x = torch.tensor(toy["X"][:50])
    for model in (toy["lr"], toy["mlp"], LinearDiscriminantAnalysis().fit(toy["X"], toy["y"])):
        p = torch.sigmoid(torch_logit(model)(x)).numpy()
        np.testing.assert_allclose(p, positive_proba(model, toy["X"][:50]), atol=1e-6)
    with pytest.raises(TypeError, match="model"):
        torch_logit(toy["rf"])


@pytest.mark.parametrize("gen", ["knn", "wachter", "spheres", "sample", "random_subset"])
def test_generators_flip_the_model(toy, gen):
    X, pool = toy["neg"], toy["X"]
    model = toy["mlp"] if gen == "wachter" else toy["rf"]
    R, ok = {
        "knn": lambda: nearest_target_cf(model, X, pool),
        "wachter": lambda: wachter_cf(model, X, lr=0.1, steps=100, rounds=6),
        "spheres": lambda: growing_spheres_cf(model, X, seed=0, n_samples=100),
        "sample": lambda: sample_target_cf(model, X, pool, seed=0),
        "random_subset": lambda: random_subset_cf(model, X, pool, seed=0),
    }[gen]()
    assert R.shape == X.shape and ok.all() and predict_target(model, R).all()
    if gen == "knn":  # the nearest flipped pool row
        cand = pool[predict_target(model, pool)]
        d = ((X[:, None] - cand[None]) ** 2).sum(-1).min(1)
        np.testing.assert_allclose(((R - X) ** 2).sum(1), d)
    if gen == "random_subset":
        assert ((R != X).sum(1) <= X.shape[1]).all()


def test_generator_bad_inputs(toy):
    with pytest.raises(TypeError, match="model"):
        nearest_target_cf(object(), toy["neg"], toy["X"])
    with pytest.raises(ValueError, match="pool"):
        nearest_target_cf(toy["lr"], toy["neg"], toy["X"][:, :3])
    with pytest.raises(ValueError, match="2-D"):
        growing_spheres_cf(toy["lr"], toy["neg"][0])
    with pytest.raises(ValueError, match="steps"):
        wachter_cf(toy["lr"], toy["neg"], steps=0)
    with pytest.raises(ValueError, match="lam"):
        wachter_cf(toy["lr"], toy["neg"], lam=-1.0)
    with pytest.raises(TypeError, match="seed"):
        sample_target_cf(toy["lr"], toy["neg"], toy["X"], seed="a")
    with pytest.raises(ValueError, match="target class"):
        sample_target_cf(toy["lr"], toy["neg"], toy["neg"])
    with pytest.raises(ValueError, match="finite"):
        nearest_target_cf(toy["lr"], np.full((2, 4), np.nan), toy["X"])


def _brute_bshap(f, x, b):
    d = len(x)
    phi = np.zeros(d)
    for k in range(d):
        others = [j for j in range(d) if j != k]
        for s in range(d):
            for S in combinations(others, s):
                w = math.factorial(s) * math.factorial(d - s - 1) / math.factorial(d)
                on = np.zeros(d, bool)
                on[list(S)] = True
                h0 = np.where(on, x, b)
                on[k] = True
                h1 = np.where(on, x, b)
                phi[k] += w * (f(h1[None])[0] - f(h0[None])[0])
    return phi


def test_baseline_shapley_exact_matches_brute_force_and_is_efficient(toy):
    f = lambda H: positive_proba(toy["rf"], H)
    X, B = toy["neg"][:3], toy["X"][-3:]
    phi = baseline_shapley(f, X, B)
    for i in range(3):
        np.testing.assert_allclose(phi[i], _brute_bshap(f, X[i], B[i]), atol=1e-12)
    np.testing.assert_allclose(phi.sum(1), f(X) - f(B), atol=1e-12)
    B2 = B.copy()
    B2[:, 1] = X[:, 1]  # equal features are null players
    assert np.all(baseline_shapley(f, X, B2)[:, 1] == 0)


def test_baseline_shapley_sampled_is_efficient_and_close(toy):
    f = lambda H: positive_proba(toy["lr"], H)
    X, B = toy["neg"][:4], toy["X"][-4:]
    exact = baseline_shapley(f, X, B)
    approx = baseline_shapley(f, X, B, exact_max=0, n_permutations=400, seed=1)
    np.testing.assert_allclose(approx.sum(1), f(X) - f(B), atol=1e-12)
    np.testing.assert_allclose(approx, exact, atol=0.02)


def test_baseline_shapley_bad_inputs(toy):
    f = lambda H: positive_proba(toy["lr"], H)
    with pytest.raises(TypeError, match="f"):
        baseline_shapley(3, toy["neg"], toy["neg"])
    with pytest.raises(ValueError, match="rows"):
        baseline_shapley(f, toy["neg"], toy["neg"][:2])
    with pytest.raises(ValueError, match="exact_max"):
        baseline_shapley(f, toy["neg"], toy["neg"], exact_max=40)
    with pytest.raises(ValueError, match="n_permutations"):
        baseline_shapley(f, toy["neg"], toy["neg"], n_permutations=0)


def test_exhaustive_min_edits(toy):
    model = toy["rf"]
    valid = lambda H: predict_target(model, H)
    X = toy["neg"]
    Q, _ = nearest_target_cf(model, X, toy["X"])
    best = exhaustive_min_edits(valid, X, Q)
    for i in range(len(X)):  # brute force over all subsets
        diff = np.flatnonzero(X[i] != Q[i])
        sizes = [
            len(S)
            for k in range(len(diff) + 1)
            for S in combinations(diff, k)
            if valid(np.where(np.isin(np.arange(4), S), Q[i], X[i])[None])[0]
        ]
        assert best[i] == min(sizes)
    assert (exhaustive_min_edits(valid, X, X) == -1).all()  # q itself not valid
    with pytest.raises(TypeError, match="valid"):
        exhaustive_min_edits(None, X, Q)
    with pytest.raises(ValueError, match="max_features"):
        exhaustive_min_edits(valid, X, Q, max_features=1)


def test_generators_return_named_counterfactuals_that_unpack(toy):
    X, pool, model = toy["neg"], toy["X"], toy["rf"]
    out = nearest_target_cf(model, X, pool)
    assert isinstance(out, Counterfactuals) and out._fields == ("rows", "valid")
    R, ok = out
    assert R is out.rows and ok is out.valid and out.valid.dtype == bool


@pytest.mark.parametrize("gen", [growing_spheres_cf, sample_target_cf, random_subset_cf])
def test_seed_is_an_int_or_a_generator_with_the_same_stream(toy, gen):
    X, pool, model = toy["neg"], toy["X"], toy["rf"]
    args = (model, X) if gen is growing_spheres_cf else (model, X, pool)
    by_int = gen(*args, seed=3)
    by_gen = gen(*args, seed=np.random.default_rng(3))
    by_np_int = gen(*args, seed=np.int64(3))
    for other in (by_gen, by_np_int):
        np.testing.assert_array_equal(by_int.rows, other.rows)
    g = np.random.default_rng(3)  # a generator threaded through two calls: the second call continues the stream
    first, second = gen(*args, seed=g), gen(*args, seed=g)
    np.testing.assert_array_equal(first.rows, by_int.rows)
    if gen is sample_target_cf:
        assert not np.array_equal(second.rows, first.rows)


def test_baseline_shapley_seed_generator_matches_int(toy):
    f = lambda H: positive_proba(toy["lr"], H)
    X, B = toy["neg"][:3], toy["X"][-3:]
    a = baseline_shapley(f, X, B, exact_max=0, n_permutations=8, seed=5)
    b = baseline_shapley(f, X, B, exact_max=0, n_permutations=8, seed=np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="seed"):
        baseline_shapley(f, X, B, seed=1.5)  # checked even where the exact path needs no randomness


def _record_devices(monkeypatch):
    """Wrap torch_logit so that the test sees which device wachter_cf optimises on."""
    import iclr26.counterfactuals as cf

    seen = []
    real = cf.torch_logit

    def spy(model, device="cpu"):
        f = real(model, device)
        return lambda x: seen.append(x.device) or f(x)

    monkeypatch.setattr(cf, "torch_logit", spy)
    return seen


def test_wachter_cf_runs_on_the_device_it_is_given(toy, monkeypatch):
    X = toy["neg"][:4]
    reference = wachter_cf(toy["mlp"], X, steps=20, rounds=2)
    seen = _record_devices(monkeypatch)
    devices = ["cpu", torch.device("cpu")] + ([] if torch.cuda.is_available() else ["auto"])  # "auto": the CPU here
    for device in devices:
        seen.clear()
        R, ok = wachter_cf(toy["mlp"], X, steps=20, rounds=2, device=device)
        assert seen and all(d == torch.device("cpu") for d in seen)
        np.testing.assert_array_equal(R, reference.rows)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_wachter_cf_runs_on_cuda_and_agrees_with_the_cpu(toy, monkeypatch):
    X = toy["neg"][:4]
    cpu = wachter_cf(toy["mlp"], X, steps=20, rounds=2)
    seen = _record_devices(monkeypatch)
    gpu = wachter_cf(toy["mlp"], X, steps=20, rounds=2, device="cuda")
    assert seen and all(d.type == "cuda" for d in seen)
    assert isinstance(gpu.rows, np.ndarray)
    np.testing.assert_allclose(gpu.rows, cpu.rows, atol=1e-6)
    logit = torch_logit(toy["lr"], "cuda")
    assert logit(torch.zeros(2, 4, dtype=torch.float64, device="cuda")).device.type == "cuda"


def test_wachter_cf_bad_device_and_numbers(toy):
    X = toy["neg"][:2]
    with pytest.raises(ValueError, match="device"):
        wachter_cf(toy["lr"], X, device="tpu9")
    with pytest.raises(TypeError, match="device"):
        wachter_cf(toy["lr"], X, device=0)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            wachter_cf(toy["lr"], X, device="cuda")
    with pytest.raises(TypeError, match="steps must be an int"):
        wachter_cf(toy["lr"], X, steps=10.0)
    with pytest.raises(TypeError, match="lr must be a number"):
        wachter_cf(toy["lr"], X, lr="0.1")
    with pytest.raises(ValueError, match="margin must be a finite number"):
        wachter_cf(toy["lr"], X, margin=float("nan"))
    with pytest.raises(ValueError, match="device"):
        torch_logit(toy["lr"], "tpu9")


def test_int_arguments_take_numpy_ints(toy):
    X, pool = toy["neg"][:3], toy["X"]
    R, ok = random_subset_cf(toy["rf"], X, pool, n_tries=np.int64(20), seed=0)
    assert R.shape == X.shape
    with pytest.raises(TypeError, match="n_tries must be an int"):
        random_subset_cf(toy["rf"], X, pool, n_tries=20.0)
    f = lambda H: positive_proba(toy["lr"], H)
    assert baseline_shapley(f, X, pool[:3], exact_max=np.int64(4)).shape == X.shape
    with pytest.raises(TypeError, match="max_features must be an int"):
        exhaustive_min_edits(lambda H: predict_target(toy["rf"], H), X, X, max_features=2.0)


def test_edit_mask_counts_changes_above_the_tolerance():
    X = np.zeros((2, 3))
    Q = np.array([[1e-9, 0.5, -2e-3], [EDIT_TOL, -EDIT_TOL * 1.01, 0.0]])
    np.testing.assert_array_equal(edit_mask(X, Q), [[False, True, True], [False, True, False]])
    assert edit_mask(X, Q, tol=0.0).sum() == 5
    with pytest.raises(ValueError, match="tol"):
        edit_mask(X, Q, tol=-1.0)
    with pytest.raises(ValueError, match="Q"):
        edit_mask(X, Q[:1])


def test_wachter_proximal_step_leaves_features_exactly_at_x(toy):
    # y depends on features 0-2 only: the L1 prox keeps feature 3 (weight near 0) exactly at x
    X = toy["neg"]
    R, ok = wachter_cf(toy["lr"], X, lr=0.1, steps=100, rounds=6)
    assert ok.all()
    assert (R[:, 3] == X[:, 3]).all()
    assert edit_mask(X, R).sum(1).max() < X.shape[1]


def test_sparsify_cf_is_laugels_step(toy):
    model, X = toy["lr"], toy["neg"]
    R0 = sample_target_cf(model, X, toy["X"], seed=1).rows
    R, ok = sparsify_cf(model, X, R0)
    assert ok.all()
    same = R == X
    assert same.sum() > (R0 == X).sum()  # some moves were undone...
    # ...and each coordinate is either the original counterfactual's or the factual's
    assert ((R == R0) | same).all()
    # the next smallest remaining move would undo the flip (Laugel's stopping rule)
    for i in range(len(X)):
        gap = np.where(same[i], np.inf, np.abs(R[i] - X[i]))
        if np.isfinite(gap).any():
            h = R[i].copy()
            h[gap.argmin()] = X[i, gap.argmin()]
            assert not predict_target(model, h[None])[0]
    # rows that are already factual-side stay unchanged; bad input names the argument
    np.testing.assert_array_equal(sparsify_cf(model, X, X).rows, X)
    with pytest.raises(ValueError, match="R"):
        sparsify_cf(model, X, R0[:, :2])


def test_growing_spheres_sparsify_option(toy):
    X = toy["neg"]
    dense = growing_spheres_cf(toy["lr"], X, seed=0, n_samples=100, sparsify=False)
    sparse = growing_spheres_cf(toy["lr"], X, seed=0, n_samples=100)
    assert sparse.valid.all() and dense.valid.all()
    assert edit_mask(X, sparse.rows).sum() < edit_mask(X, dense.rows).sum()
    with pytest.raises(TypeError, match="sparsify"):
        growing_spheres_cf(toy["lr"], X, sparsify="yes")


def test_wachter_clips_each_rows_step(toy):
    # a steep logistic model: an unclipped hinge gradient is in the thousands, so one step would overshoot
    steep = LogisticRegression().fit(toy["X"], toy["y"])
    steep.coef_ = steep.coef_ * 1000.0
    steep.intercept_ = steep.intercept_ * 1000.0
    X = toy["X"][~predict_target(steep, toy["X"])][:10]
    one = wachter_cf(steep, X, lr=0.1, steps=1, rounds=1, max_grad_norm=2.0)
    assert np.linalg.norm(one.rows - X, axis=1).max() <= 0.1 * 2.0 + 1e-12
    wild = wachter_cf(steep, X, lr=0.1, steps=1, rounds=1, max_grad_norm=1e12)
    assert np.linalg.norm(wild.rows - X, axis=1).max() > 10.0
    with pytest.raises(ValueError, match="max_grad_norm"):
        wachter_cf(steep, X, max_grad_norm=0.0)
