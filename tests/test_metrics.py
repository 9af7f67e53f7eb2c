import itertools

import numpy as np
import pytest
from scipy import stats
from sklearn.feature_selection import mutual_info_regression

from iclr26.metrics import SlopeFit, conditional_mi, discordant_pairs, ksg_mi, loglog_slope


def test_exact_power_law_recovers_slope_and_intercept():
    x = np.array([0.2, 0.1, 0.05, 0.025, 0.0125])
    fit = loglog_slope(x, 7.0 * x**-1.5)
    assert isinstance(fit, SlopeFit)
    assert fit.slope == pytest.approx(-1.5, abs=1e-12)
    assert fit.intercept == pytest.approx(np.log(7.0), abs=1e-12)
    assert fit.low == pytest.approx(-1.5, abs=1e-9) and fit.high == pytest.approx(-1.5, abs=1e-9)


def test_noisy_fit_interval_matches_t_quantile_and_covers_truth():
    rng = np.random.default_rng(0)
    x = np.geomspace(1, 100, 12)
    y = 3 * x**0.7 * np.exp(rng.normal(0, 0.1, x.size))
    fit = loglog_slope(x, y)
    ref = stats.linregress(np.log(x), np.log(y))
    half = stats.t.ppf(0.975, x.size - 2) * ref.stderr
    assert fit.slope == pytest.approx(ref.slope)
    assert fit.high - fit.slope == pytest.approx(half) and fit.slope - fit.low == pytest.approx(half)
    assert fit.low < 0.7 < fit.high
    # a z quantile (1.96) would give a narrower interval than the t quantile with 10 degrees of freedom
    assert fit.high - fit.low > 2 * 1.96 * ref.stderr


def test_three_points_is_enough_and_lists_work():
    fit = loglog_slope([1, 10, 100], [5, 0.5, 0.05])
    assert fit.slope == pytest.approx(-1.0)


@pytest.mark.parametrize(
    ("x", "y", "exc", "word"),
    [
        ([1, 2, 3], [1, 2, 0], ValueError, "y"),
        ([1, -2, 3], [1, 2, 3], ValueError, "x"),
        ([1, 2, np.nan], [1, 2, 3], ValueError, "x"),
        ([1, 2, 3, 4], [1, 2, 3], ValueError, "same length"),
        ([1, 2], [1, 2], ValueError, "at least 3"),
        ([2, 2, 2], [1, 2, 3], ValueError, "distinct"),
        ([[1, 2, 3]], [[1, 2, 3]], ValueError, "one-dimensional"),
        ("abc", [1, 2, 3], TypeError, "x"),
        ([1, 2, 3], 5.0, TypeError, "y"),
        ([1, 2, 3], ["a", "b", "c"], TypeError, "y"),
        ([True, False, True], [1, 2, 3], TypeError, "x"),
    ],
)
def test_bad_input_names_the_argument(x, y, exc, word):
    with pytest.raises(exc, match=word):
        loglog_slope(x, y)


# ------------------------------------------------------------------------------------ KSG mutual information
def _gaussian_pair(rho, n, seed):
    z = np.random.default_rng(seed).normal(size=(n, 2))
    return z[:, 0], rho * z[:, 0] + np.sqrt(1 - rho**2) * z[:, 1]


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_ksg_matches_the_gaussian_closed_form(rho):
    x, y = _gaussian_pair(rho, 3000, seed=1)
    truth = -0.5 * np.log(1 - rho**2)  # nats
    assert ksg_mi(x, y, base=np.e) == pytest.approx(truth, abs=0.04)
    assert ksg_mi(x, y) == pytest.approx(ksg_mi(x, y, base=np.e) / np.log(2), rel=1e-9)  # bits by default


def test_ksg_multivariate_gaussian_closed_form():
    # I(X; Y) for jointly Gaussian blocks: 0.5 log(det Sx det Sy / det S)
    rng = np.random.default_rng(2)
    A = rng.normal(size=(4, 4))
    S = A @ A.T + 2 * np.eye(4)
    z = rng.multivariate_normal(np.zeros(4), S, size=3000)
    truth = 0.5 * np.log(np.linalg.det(S[:2, :2]) * np.linalg.det(S[2:, 2:]) / np.linalg.det(S))
    assert ksg_mi(z[:, :2], z[:, 2:], base=np.e) == pytest.approx(truth, abs=0.06)


def test_ksg_agrees_with_scikit_learn_on_standardised_data():
    x, y = _gaussian_pair(0.7, 1500, seed=3)
    x, y = x / x.std(), y / y.std()  # scikit-learn scales the feature to unit variance
    ours = ksg_mi(x, y, k=3, base=np.e)
    theirs = mutual_info_regression(x[:, None], y, n_neighbors=3, random_state=0)[0]
    assert ours == pytest.approx(theirs, abs=1e-3)


def test_ksg_invariant_to_the_order_of_rows_and_to_swapping_arguments():
    x, y = _gaussian_pair(0.6, 800, seed=4)
    perm = np.random.default_rng(0).permutation(800)
    assert ksg_mi(x[perm], y[perm], jitter=0.0) == pytest.approx(ksg_mi(x, y, jitter=0.0), abs=1e-12)
    assert ksg_mi(y, x, jitter=0.0) == pytest.approx(ksg_mi(x, y, jitter=0.0), abs=1e-12)


def test_conditional_mi_on_a_markov_chain_and_a_collider():
    rng = np.random.default_rng(5)
    n = 2000
    a = rng.normal(size=n)
    c = a + rng.normal(size=n)
    b = c + rng.normal(size=n)
    # a -> c -> b: I(a; b | c) = 0 while I(a; b) > 0
    assert conditional_mi(a, b, c) < 0.05
    assert ksg_mi(a, b) > 0.2
    # Gaussian closed form of I(a; c | b) in the same chain: -0.5 log(1 - partial corr^2)
    S = np.cov(np.vstack([a, b, c]))
    P = np.linalg.inv(S)
    pcorr = -P[0, 2] / np.sqrt(P[0, 0] * P[2, 2])
    assert conditional_mi(a, c, b, base=np.e) == pytest.approx(-0.5 * np.log(1 - pcorr**2), abs=0.05)
    # a collider: u, v independent, w = u + v; given w they are dependent
    u, v = rng.normal(size=(2, n))
    assert ksg_mi(u, v) < 0.05 and conditional_mi(u, v, u + v) > 0.5


def test_conditional_mi_clip_and_chain_rule():
    rng = np.random.default_rng(6)
    a, b, c = rng.normal(size=(3, 500))
    raw = conditional_mi(a, b, c, clip=False)
    assert raw == pytest.approx(ksg_mi(a, np.column_stack([b, c])) - ksg_mi(a, c), abs=1e-12)
    assert conditional_mi(a, b, c) == max(0.0, raw)


@pytest.mark.parametrize(
    ("kwargs", "exc", "word"),
    [
        (dict(x="abc"), TypeError, "x"),
        (dict(y=[[np.nan]] * 10), ValueError, "y"),
        (dict(y=np.ones(9)), ValueError, "same number"),
        (dict(k=0), ValueError, "k"),
        (dict(k=10), ValueError, "k"),
        (dict(k=2.5), TypeError, "k"),
        (dict(base=1.0), ValueError, "base"),
        (dict(base=-2.0), ValueError, "base"),
        (dict(jitter=-1.0), ValueError, "jitter"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(x=np.ones((10, 0))), ValueError, "x"),
    ],
)
def test_ksg_refuses_bad_input(kwargs, exc, word):
    args = dict(x=np.arange(10.0), y=np.arange(10.0) ** 2) | kwargs
    with pytest.raises(exc, match=word):
        ksg_mi(**args)


def test_conditional_mi_refuses_bad_input():
    a = np.arange(20.0)
    with pytest.raises(ValueError, match="same number"):
        conditional_mi(a, a, a[:10])
    with pytest.raises(TypeError, match="clip"):
        conditional_mi(a, a, a, clip="yes")
    with pytest.raises(TypeError, match="c"):
        conditional_mi(a, a, None)


def _brute_discordant(a, b):
    return sum(
        1
        for i, j in itertools.combinations(range(len(a)), 2)
        if (a[i] < a[j] and b[i] > b[j]) or (a[i] > a[j] and b[i] < b[j])
    )


@pytest.mark.parametrize("seed", range(20))
def test_discordant_pairs_matches_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 15))
    a = rng.integers(0, 4, n).astype(float)  # few values: many ties
    b = rng.integers(0, 4, n).astype(float)
    if n and seed % 3 == 0:
        a[0] = np.inf  # a diverged run ranked last
        b[-1] = -np.inf
    assert discordant_pairs(a, b) == _brute_discordant(list(a), list(b))


def test_discordant_pairs_without_ties_matches_kendall_tau():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=12), rng.normal(size=12)
    tau = stats.kendalltau(a, b).statistic
    assert discordant_pairs(a, b) == pytest.approx(66 * (1 - tau) / 2)
    assert discordant_pairs(a, a) == 0 and discordant_pairs(a, -a) == 66


def test_discordant_pairs_ties_and_infinities():
    assert discordant_pairs([1, 2, 3], [3, 2, 2]) == 2
    assert discordant_pairs([np.inf, np.inf, 1], [0, 1, 2]) == 2  # the two inf tie; each beats 1 while b says less
    assert discordant_pairs([], []) == 0


@pytest.mark.parametrize(
    "a, b, err",
    [
        ("abc", [1, 2, 3], TypeError),
        (3, [1], TypeError),
        ([True, False], [1, 2], TypeError),
        ([[1, 2]], [1, 2], ValueError),
        ([1, 2], [1, 2, 3], ValueError),
        ([1, np.nan], [1, 2], ValueError),
        (["a", "b"], [1, 2], TypeError),
    ],
)
def test_discordant_pairs_rejects_bad_input(a, b, err):
    with pytest.raises(err, match=r"\ba\b|\bb\b"):
        discordant_pairs(a, b)


def test_transformer_flops_equals_the_counted_matmul_flops():
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from iclr26.metrics import transformer_flops
    from iclr26.models import TinyTransformer, TransformerConfig

    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=13, n_ctx=12, d_model=16, n_layers=3, n_heads=2, d_mlp=24, fast_attention=False)
    model = TinyTransformer(cfg).eval()
    keep = {1: 7, 2: 4}  # drop to 7 tokens before block 1 and to 4 before block 2

    def cb(layer, x, pos):
        if layer in keep:
            return x[:, -keep[layer] :], pos[:, -keep[layer] :]
        return None

    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(1, 10, dtype=torch.long), token_callback=cb)
    # the explicit path's last_only=False unembeds every position of the final layer (4 of them)
    want = transformer_flops([10, 7, 4], d_model=16, d_mlp=24, vocab_size=13, logit_tokens=4)
    assert counter.get_total_flops() == want


def test_transformer_flops_arithmetic_and_bad_input():
    from iclr26.metrics import transformer_flops

    one = transformer_flops([5], d_model=4, d_mlp=8)
    assert one == 2 * 5 * 4 * 12 + 4 * 25 * 4 + 2 * 5 * 4 * 4 + 4 * 5 * 4 * 8
    assert transformer_flops([5, 0], d_model=4, d_mlp=8) == one
    assert transformer_flops([5], d_model=4, d_mlp=8, vocab_size=10, logit_tokens=2) == one + 2 * 2 * 4 * 10
    with pytest.raises(ValueError, match="tokens_per_layer"):
        transformer_flops([-1], d_model=4, d_mlp=8)
    with pytest.raises(ValueError, match="tokens_per_layer"):
        transformer_flops([], d_model=4, d_mlp=8)
    with pytest.raises(TypeError, match="tokens_per_layer"):
        transformer_flops("x", d_model=4, d_mlp=8)
    with pytest.raises(ValueError, match="d_model"):
        transformer_flops([3], d_model=0, d_mlp=8)
