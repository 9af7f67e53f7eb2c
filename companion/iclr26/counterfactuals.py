"""Counterfactual generators and exact/sampled baseline Shapley values for tabular classifiers.

The COLA chapter refines counterfactuals made by any generator; this module holds the generators and the
Shapley machinery it uses, so the chapter can show the method itself (coupling, p-SHAP, edit order, search).

Conventions: a *model* is a fitted scikit-learn style binary classifier (``predict_proba``); inputs are float
arrays in the space the model was trained on (the chapter standardises features); the *target* class is 1.

Generators (each returns :class:`Counterfactuals` ``(rows, valid)``: one counterfactual row per factual row and
whether it flips the model; ``R, valid = generator(...)`` unpacks it):

* :func:`nearest_target_cf` — the nearest pool point (e.g. training rows) that the model puts in the target class;
* :func:`wachter_cf` — Wachter et al. (2017): proximal gradient (a gradient step on ``λ·hinge(logit)²``, then
  the L1 soft-threshold) on ``λ·hinge(logit)² + ‖r − x‖₁``, with λ raised for rows that have not flipped; needs a
  differentiable model (:func:`torch_logit`); the soft-threshold leaves untouched features exactly at x;
* :func:`growing_spheres_cf` — Laugel et al. (2018): sample in growing spherical shells around x, keep the
  nearest sample that flips the model, then (by default) their sparsification step, :func:`sparsify_cf`;
* :func:`sample_target_cf` — a distributional set: random target-class pool rows, not paired with the factuals;
* :func:`random_subset_cf` — DiCE's "random" method in spirit: overwrite random feature subsets with values of
  target-class pool rows until the model flips (sparse counterfactuals).

Edits: :func:`edit_mask` says which (row, feature) pairs count as an *edit* — an absolute change above
``EDIT_TOL`` (1e-3, in the units of the inputs, standardised in the chapter), not a float inequality;
:func:`sparsify_cf` is Laugel et al.'s sparsification step for any counterfactuals.

Shapley:

* :func:`baseline_shapley` — Shapley values of the game ``v(S) = f(x_S, b_{S̄})`` for many (x, b) pairs at once,
  exact over all 2^d coalitions for small d, permutation sampling (antithetic) otherwise;
* :func:`exhaustive_min_edits` — per row, the fewest features of q to copy into x so the model flips.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import combinations
from typing import NamedTuple

import numpy as np

from iclr26.runtime import pick_device
from iclr26.validate import as_bool, as_device, as_float, as_generator, as_int

__all__ = [
    "EDIT_TOL",
    "Counterfactuals",
    "edit_mask",
    "sparsify_cf",
    "positive_proba",
    "predict_target",
    "torch_logit",
    "nearest_target_cf",
    "wachter_cf",
    "growing_spheres_cf",
    "random_subset_cf",
    "sample_target_cf",
    "baseline_shapley",
    "exhaustive_min_edits",
    "GENERATORS",
]


# ---------------------------------------------------------------------------------------------- validation
def _as_matrix(X, what: str, d: int | None = None) -> np.ndarray:
    if not hasattr(X, "__array__") and not isinstance(X, (list, tuple)):
        raise TypeError(f"{what} must be a 2-D array, got {type(X).__name__}")
    try:
        A = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a 2-D array of numbers") from None
    if A.ndim != 2:
        raise ValueError(f"{what} must be 2-D (rows × features), got shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{what} must have at least one row and one feature, got shape {A.shape}")
    if d is not None and A.shape[1] != d:
        raise ValueError(f"{what} must have {d} columns, got {A.shape[1]}")
    if not np.isfinite(A).all():
        raise ValueError(f"{what} must be finite")
    return A


def _row_pairs(X, Y, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``X`` and ``Y`` (named ``what``) as matrices of the same shape: one row of ``Y`` per row of ``X``."""
    X = _as_matrix(X, "X")
    Y = _as_matrix(Y, what, X.shape[1])
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"{what} must have as many rows as X ({X.shape[0]}), got {Y.shape[0]}")
    return X, Y


def _check_model(model) -> None:
    if not hasattr(model, "predict_proba"):
        raise TypeError(f"model must have predict_proba (a fitted classifier), got {type(model).__name__}")
    if hasattr(model, "get_params") and hasattr(model, "fit"):  # a scikit-learn estimator: is it fitted?
        from sklearn.exceptions import NotFittedError
        from sklearn.utils.validation import check_is_fitted

        try:
            check_is_fitted(model)
        except NotFittedError:
            raise ValueError(f"model is an unfitted {type(model).__name__}: fit it first") from None


def _numbers(value, what: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an array of numbers, got {type(value).__name__}") from None


def _called(fn, arg: np.ndarray, what: str, dtype) -> np.ndarray:
    """``fn(arg)`` as an array of one value per row of ``arg``; ``ValueError`` naming ``what`` otherwise."""
    out = np.asarray(fn(arg))
    if out.shape != (len(arg),):
        raise ValueError(f"{what} must return one value per row: shape ({len(arg)},), got {out.shape}")
    return out.astype(dtype)


EDIT_TOL = 1e-3


def edit_mask(X, Q, *, tol: float = EDIT_TOL) -> np.ndarray:
    """Boolean (N, d) array: does ``Q`` edit feature k of row i, i.e. ``|q_ik − x_ik| > tol``?

    Counting edits by ``x != q`` would count the 1e-12 drift of a gradient search as an edit; ``tol`` is in the
    units of the inputs (standardised units in the chapter).
    """
    X, Q = _row_pairs(X, Q, "Q")
    tol = as_float(tol, "tol", 0.0)
    return np.abs(Q - X) > tol


class Counterfactuals(NamedTuple):
    """What every generator returns: ``rows[i]`` is the counterfactual of factual row ``i`` (or, for
    :func:`sample_target_cf`, an unpaired target-class row) and ``valid[i]`` whether the model puts it in the
    target class."""

    rows: np.ndarray
    valid: np.ndarray


def _result(model, R: np.ndarray) -> Counterfactuals:
    return Counterfactuals(R, predict_target(model, R))


# ---------------------------------------------------------------------------------------------- model helpers
def positive_proba(model, X) -> np.ndarray:
    """The model's probability of the target class 1 for each row of ``X``."""
    _check_model(model)
    return model.predict_proba(_as_matrix(X, "X"))[:, 1]


def predict_target(model, X) -> np.ndarray:
    """Boolean array: does the model put each row of ``X`` in the target class 1?"""
    return positive_proba(model, X) > 0.5


def torch_logit(model, device="cpu") -> Callable:
    """A torch function ``x (n, d) -> logit (n,)`` equal to the model's log-odds of class 1.

    Supports scikit-learn ``LogisticRegression`` and ``LinearDiscriminantAnalysis`` (binary), ``MLPClassifier``
    (any hidden activation) and a ``torch.nn.Module`` that already returns logits. The scikit-learn weights are
    copied (float64) to ``device``, where ``x`` must live; a module is used where it is.
    """
    import torch

    dev = as_device(device)
    if isinstance(model, torch.nn.Module):
        return lambda x: model(x).reshape(-1)
    name = type(model).__name__
    if name in ("LogisticRegression", "LinearDiscriminantAnalysis"):
        if model.coef_.shape[0] != 1:
            raise ValueError(f"model must be a binary classifier, got coef_ of shape {model.coef_.shape}")
        w = torch.tensor(model.coef_[0], dtype=torch.float64, device=dev)
        b = float(np.ravel(model.intercept_)[0])
        return lambda x: x.double() @ w + b
    if name == "MLPClassifier":
        if model.out_activation_ != "logistic":
            raise ValueError("model must be a binary MLPClassifier (logistic output)")
        acts = {
            "relu": torch.relu,
            "tanh": torch.tanh,
            "logistic": torch.sigmoid,
            "identity": lambda h: h,
        }
        act = acts[model.activation]
        Ws = [torch.tensor(W, dtype=torch.float64, device=dev) for W in model.coefs_]
        bs = [torch.tensor(b, dtype=torch.float64, device=dev) for b in model.intercepts_]

        def logit(x):
            h = x.double()
            for i, (W, b) in enumerate(zip(Ws, bs)):
                h = h @ W + b
                if i < len(Ws) - 1:
                    h = act(h)
            return h.reshape(-1)

        return logit
    raise TypeError(
        f"model must be LogisticRegression, LinearDiscriminantAnalysis, MLPClassifier or a torch Module; got {name}"
    )


# ---------------------------------------------------------------------------------------------- generators
def nearest_target_cf(model, X, pool, *, metric_weights=None) -> Counterfactuals:
    """For each row of ``X``, the nearest row of ``pool`` (Euclidean) that the model puts in the target class."""
    X = _as_matrix(X, "X")
    pool = _as_matrix(pool, "pool", X.shape[1])
    _check_model(model)
    cand = pool[predict_target(model, pool)]
    if len(cand) == 0:
        raise ValueError("pool has no row that the model puts in the target class")
    w = np.ones(X.shape[1]) if metric_weights is None else _numbers(metric_weights, "metric_weights")
    if w.shape != (X.shape[1],) or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"metric_weights must be {X.shape[1]} non-negative numbers")
    d2 = (((X[:, None, :] - cand[None, :, :]) ** 2) * w).sum(-1)
    R = cand[d2.argmin(1)].copy()
    return _result(model, R)


def wachter_cf(
    model,
    X,
    *,
    lam: float = 1.0,
    lr: float = 0.05,
    steps: int = 200,
    rounds: int = 5,
    margin: float = 0.5,
    max_grad_norm: float = 1.0,
    scale=None,
    device="cpu",
) -> Counterfactuals:
    """Wachter-style counterfactuals: minimise ``λ·relu(margin − logit(r))² + Σ_k |r_k − x_k| / s_k`` by proximal
    gradient descent (ISTA).

    Each step divides the objective by λ, takes a gradient step of size ``lr`` on ``relu(margin − logit(r))²`` and
    applies the proximal map of the L1 term: the soft-threshold of ``r − x`` at ``lr / (λ s_k)``. Features whose
    pull is weaker than the threshold stay exactly at x, so the counterfactuals are sparse, as the L1 distance of
    Wachter et al. intends (a plain (sub)gradient step would leave every feature jittering around x). Starts at
    ``r = x``; after each of ``rounds`` rounds of ``steps`` steps, λ is multiplied by 4 for the rows that have not
    flipped (Wachter's "increase λ until the target is met"). Each row's hinge gradient is clipped to norm
    ``max_grad_norm`` before the step, so a step moves a row by at most ``lr · max_grad_norm`` plus the threshold:
    where the logit is steep (a ReLU network far from its training data) an unclipped step overshoots by hundreds of
    standard deviations. ``scale`` (default 1) is the per-feature L1 scale,
    e.g. the median absolute deviation. The search runs in float64 on ``device`` (``"cpu"``, ``"cuda[:N]"`` or
    ``"auto"``, see :func:`iclr26.runtime.pick_device`; MPS has no float64).
    """
    import torch

    X = _as_matrix(X, "X")
    _check_model(model)
    lam = as_float(lam, "lam", 0.0, low_open=True)
    lr = as_float(lr, "lr", 0.0, low_open=True)
    margin = as_float(margin, "margin")
    max_grad_norm = as_float(max_grad_norm, "max_grad_norm", 0.0, low_open=True)
    steps, rounds = as_int(steps, "steps", low=1), as_int(rounds, "rounds", low=1)
    s = np.ones(X.shape[1]) if scale is None else _numbers(scale, "scale")
    if s.shape != (X.shape[1],) or not np.isfinite(s).all() or (s <= 0).any():
        raise ValueError(f"scale must be {X.shape[1]} positive numbers")
    dev = pick_device(device)
    if dev.type == "mps":
        raise ValueError("device='mps' cannot run wachter_cf: it computes in float64, which MPS does not support")
    f = torch_logit(model, dev)
    x0 = torch.tensor(X, dtype=torch.float64, device=dev)
    inv_s = torch.tensor(1.0 / s, dtype=torch.float64, device=dev)
    r = x0.clone()
    lams = torch.full((X.shape[0],), lam, dtype=torch.float64, device=dev)
    for _ in range(rounds):
        thr = lr * inv_s[None, :] / lams[:, None]  # the L1 prox threshold of the objective divided by λ
        for _ in range(steps):
            r.requires_grad_(True)
            hinge = (torch.relu(margin - f(r)) ** 2).sum()
            (grad,) = torch.autograd.grad(hinge, r)
            with torch.no_grad():
                grad = grad / torch.clamp(grad.norm(dim=1, keepdim=True) / max_grad_norm, min=1.0)
                z = r - lr * grad - x0
                r = x0 + torch.sign(z) * torch.relu(z.abs() - thr)
        with torch.no_grad():
            flipped = f(r) > 0
        if bool(flipped.all()):
            break
        lams = torch.where(flipped, lams, lams * 4)
    R = r.detach().cpu().numpy()
    return _result(model, R)


def sparsify_cf(model, X, R) -> Counterfactuals:
    """Laugel et al.'s (2018) sparsification step, for every row at once.

    Repeatedly move the coordinate of ``r_i`` that differs least from ``x_i`` back to ``x_i``, as long as the
    model still puts the row in the target class; a row stops at its first move that would undo the flip (the
    move is not made). Rows of ``R`` that are not in the target class are returned unchanged.
    """
    X, R = _row_pairs(X, R, "R")
    _check_model(model)
    R = R.copy()
    active = predict_target(model, R)
    while active.any():
        idx = np.flatnonzero(active)
        gap = np.abs(R[idx] - X[idx])
        gap[gap == 0] = np.inf
        k = gap.argmin(1)
        has = np.isfinite(gap[np.arange(len(idx)), k])
        idx, k = idx[has], k[has]
        if len(idx) == 0:
            break
        trial = R[idx].copy()
        trial[np.arange(len(idx)), k] = X[idx, k]
        ok = predict_target(model, trial)
        R[idx[ok]] = trial[ok]
        active[:] = False
        active[idx[ok]] = True
    return _result(model, R)


def _keep_closest(todo, ok, dist, cand, R, valid) -> np.ndarray:
    """For each row in ``todo`` with a valid candidate (``ok``), store its closest one (by ``dist``) in ``R`` and
    mark it ``valid``; return the rows still without a counterfactual."""
    done = []
    for a, i in enumerate(todo):
        if ok[a].any():
            j = np.flatnonzero(ok[a])[dist[a, ok[a]].argmin()]
            R[i], valid[i] = cand[a, j], True
            done.append(i)
    return np.setdiff1d(todo, done)


def growing_spheres_cf(
    model, X, *, seed=0, n_samples: int = 300, step: float = 0.25, max_layers: int = 60, sparsify: bool = True
) -> Counterfactuals:
    """Growing-spheres counterfactuals (Laugel et al., 2018): sample ``n_samples`` points uniformly in the shell
    ``[kη, (k+1)η]`` around each row, k = 0, 1, …, keep the nearest sample that flips the model (η = ``step``),
    then, if ``sparsify``, apply the authors' sparsification step (:func:`sparsify_cf`)."""
    X = _as_matrix(X, "X")
    _check_model(model)
    rng = as_generator(seed)
    n_samples, max_layers = as_int(n_samples, "n_samples", low=1), as_int(max_layers, "max_layers", low=1)
    step = as_float(step, "step", 0.0, low_open=True)
    sparsify = as_bool(sparsify, "sparsify")
    n, d = X.shape
    R, valid = X.copy(), predict_target(model, X)
    todo = np.flatnonzero(~valid)
    for k in range(max_layers):
        if len(todo) == 0:
            break
        u = rng.standard_normal((len(todo), n_samples, d))
        u /= np.linalg.norm(u, axis=-1, keepdims=True)
        lo, hi = k * step, (k + 1) * step
        rad = (lo**d + rng.random((len(todo), n_samples)) * (hi**d - lo**d)) ** (1.0 / d)
        cand = X[todo, None, :] + rad[..., None] * u
        ok = predict_target(model, cand.reshape(-1, d)).reshape(len(todo), n_samples)
        todo = _keep_closest(todo, ok, rad, cand, R, valid)
    if sparsify:
        R = sparsify_cf(model, X, R).rows
    return _result(model, R)


def sample_target_cf(model, X, pool, *, seed=0) -> Counterfactuals:
    """A *distributional* counterfactual set: ``len(X)`` random ``pool`` rows that the model puts in the target
    class, drawn without replacement where possible and **not** paired with the rows of ``X``.

    Group and distributional generators return such sets; the coupling then decides which counterfactual each
    factual is refined towards.
    """
    X = _as_matrix(X, "X")
    pool = _as_matrix(pool, "pool", X.shape[1])
    _check_model(model)
    rng = as_generator(seed)
    cand = pool[predict_target(model, pool)]
    if len(cand) == 0:
        raise ValueError("pool has no row that the model puts in the target class")
    R = cand[rng.choice(len(cand), size=len(X), replace=len(cand) < len(X))].copy()
    return _result(model, R)


def random_subset_cf(model, X, pool, *, seed=0, n_tries: int = 200) -> Counterfactuals:
    """Sparse random counterfactuals: for subset sizes k = 1, 2, …, try ``n_tries`` random (feature subset, donor)
    pairs per row, copying the donor's values (a target-class ``pool`` row) into those features; keep the closest
    flip found at the smallest k."""
    X = _as_matrix(X, "X")
    pool = _as_matrix(pool, "pool", X.shape[1])
    _check_model(model)
    rng = as_generator(seed)
    n_tries = as_int(n_tries, "n_tries", low=1)
    donors = pool[predict_target(model, pool)]
    if len(donors) == 0:
        raise ValueError("pool has no row that the model puts in the target class")
    n, d = X.shape
    R, valid = X.copy(), predict_target(model, X)
    todo = np.flatnonzero(~valid)
    for k in range(1, d + 1):
        if len(todo) == 0:
            break
        keys = rng.random((len(todo), n_tries, d))
        mask = keys <= np.sort(keys, axis=-1)[..., k - 1 : k]  # k random features per try
        don = donors[rng.integers(len(donors), size=(len(todo), n_tries))]
        cand = np.where(mask, don, X[todo, None, :])
        ok = predict_target(model, cand.reshape(-1, d)).reshape(len(todo), n_tries)
        dist = np.linalg.norm(cand - X[todo, None, :], axis=-1)
        todo = _keep_closest(todo, ok, dist, cand, R, valid)
    return _result(model, R)


GENERATORS = {
    "knn": "nearest training row in the target class",
    "wachter": "Wachter proximal-gradient (L1) search (differentiable models only)",
    "spheres": "growing spheres (random search in shells, then Laugel et al.'s sparsification)",
    "sample": "random target-class rows, unpaired (a distributional counterfactual set)",
    "random_subset": "random feature subsets copied from target-class rows (DiCE-random style)",
}


# ---------------------------------------------------------------------------------------------- Shapley
def _all_masks(d: int) -> np.ndarray:
    return ((np.arange(2**d)[:, None] >> np.arange(d)[None, :]) & 1).astype(bool)


def baseline_shapley(
    f: Callable[[np.ndarray], np.ndarray],
    X,
    B,
    *,
    exact_max: int = 12,
    n_permutations: int = 64,
    seed=0,
) -> np.ndarray:
    """Shapley values of ``v_i(S) = f(x_i on S, b_i elsewhere)`` for every row pair (x_i, b_i).

    ``f`` maps an (n, d) array to n numbers (e.g. the probability of the target class). With d ≤ ``exact_max``
    all 2^d coalitions are enumerated (exact); otherwise ``n_permutations`` random feature orders per row
    (half of them reversed copies of the other half: antithetic sampling) estimate the values. Either way the
    values are efficient: ``φ_i.sum() == f(x_i) − f(b_i)``. Features with ``x_ik == b_ik`` get exactly 0.
    Returns an (N, d) array.
    """
    if not callable(f):
        raise TypeError(f"f must be callable, got {type(f).__name__}")
    X, B = _row_pairs(X, B, "B")
    exact_max = as_int(exact_max, "exact_max", 0, 20)
    n_permutations = as_int(n_permutations, "n_permutations", low=1)
    rng = as_generator(seed)
    N, d = X.shape
    if N == 0:
        return np.zeros((0, d))
    if d <= exact_max:
        masks = _all_masks(d)  # (2^d, d): True = factual value
        H = np.where(masks[None], X[:, None, :], B[:, None, :]).reshape(-1, d)
        V = _called(f, H, "f", float).reshape(N, 2**d)
        sizes = masks.sum(1)
        w = np.array([math.factorial(s) * math.factorial(d - s - 1) / math.factorial(d) for s in range(d)])
        phi = np.empty((N, d))
        idx = np.arange(2**d)
        for k in range(d):
            without = idx[~masks[:, k]]
            phi[:, k] = (V[:, without | (1 << k)] - V[:, without]) @ w[sizes[without]]
        return phi
    half = max(1, n_permutations // 2)
    perms = np.argsort(rng.random((N, half, d)), axis=-1)
    perms = np.concatenate([perms, perms[..., ::-1]], axis=1)  # antithetic pairs
    P = perms.shape[1]
    # step t of a permutation switches feature perm[t] from b to x; position of feature k in the order:
    pos = np.argsort(perms, axis=-1)  # (N, P, d)
    t = np.arange(d + 1)[:, None]
    on = pos[:, :, None, :] < t[None, None]  # (N, P, d+1, d): features switched on after t steps
    H = np.where(on, X[:, None, None, :], B[:, None, None, :]).reshape(-1, d)
    V = np.asarray(f(H), dtype=float).reshape(N, P, d + 1)
    gains = np.diff(V, axis=-1)  # gain of the feature added at step t
    phi = np.zeros((N, P, d))
    np.put_along_axis(phi, perms, gains, axis=-1)
    phi = phi.mean(1)
    phi[X == B] = 0.0
    return phi


def exhaustive_min_edits(valid: Callable[[np.ndarray], np.ndarray], X, Q, *, max_features: int = 16) -> np.ndarray:
    """For each row, the fewest features of ``q_i`` to copy into ``x_i`` so that ``valid`` holds (searched by
    subset size, all subsets of each size). Rows where even ``q_i`` is not valid get -1.

    ``valid`` maps an (n, d) array to n booleans. Only features with ``x_ik != q_ik`` are candidates; rows with
    more than ``max_features`` of them raise ``ValueError`` (the search is exponential).
    """
    if not callable(valid):
        raise TypeError(f"valid must be callable, got {type(valid).__name__}")
    X, Q = _row_pairs(X, Q, "Q")
    max_features = as_int(max_features, "max_features", low=1)
    diff = [np.flatnonzero(X[i] != Q[i]) for i in range(len(X))]
    if max((len(c) for c in diff), default=0) > max_features:
        raise ValueError(f"a row differs in more than max_features={max_features} features; too many subsets")
    best = np.full(len(X), -1)
    ok_full = _called(valid, Q, "valid", bool) if len(X) else np.zeros(0, bool)
    todo = [i for i in range(len(X)) if ok_full[i]]
    for k in range(0, X.shape[1] + 1):
        if not todo:
            break
        rows, owners = [], []
        for i in todo:
            for S in combinations(diff[i], k):
                h = X[i].copy()
                h[list(S)] = Q[i, list(S)]
                rows.append(h)
                owners.append(i)
        if not rows:
            break
        ok = _called(valid, np.array(rows), "valid", bool)
        owners = np.array(owners)
        solved = set(owners[ok].tolist())
        for i in solved:
            best[i] = k
        todo = [i for i in todo if i not in solved]
    return best
