import numpy as np
import pytest
from scipy import stats

from iclr26.metrics import SlopeFit, loglog_slope


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
