"""Tests of iclr26.data: the Markov language and its exact entropy rate."""

import math

import numpy as np
import pytest
import torch

from iclr26.data import MarkovLanguage


def test_table_stationary_and_entropy_are_consistent():
    lang = MarkovLanguage(vocab_size=5, order=2, concentration=0.5, backoff=0.3, seed=1)
    assert lang.transition.shape == (25, 5)
    assert np.allclose(lang.transition.sum(1), 1.0)
    assert math.isclose(lang.stationary.sum(), 1.0)
    # stationarity: one step of the context chain leaves pi unchanged
    nxt = (np.arange(25)[:, None] * 5 + np.arange(5)[None, :]) % 25
    moved = np.bincount(nxt.ravel(), weights=(lang.stationary[:, None] * lang.transition).ravel(), minlength=25)
    assert np.allclose(moved, lang.stationary, atol=1e-12)
    assert 0 < lang.entropy_rate < lang.unigram_entropy <= math.log(5) + 1e-12
    assert "entropy_rate" in repr(lang)


def test_entropy_rate_of_a_uniform_chain_is_log_v():
    lang = MarkovLanguage(vocab_size=4, order=1, concentration=1e6, seed=0)
    assert math.isclose(lang.entropy_rate, math.log(4), rel_tol=1e-4)


def test_samples_match_the_entropy_rate():
    lang = MarkovLanguage(vocab_size=6, order=2, concentration=0.4, backoff=0.5, seed=2)
    x = lang.sample(4000, 12, seed=3)
    assert x.shape == (4000, 12) and x.dtype == torch.int64 and int(x.min()) >= 0 and int(x.max()) < 6
    ctx = (x[:, :-2] * 6 + x[:, 1:-1]).numpy()
    nll = -np.log(lang.transition[ctx, x[:, 2:].numpy()]).mean()
    assert abs(nll - lang.entropy_rate) < 0.02  # Monte Carlo estimate of the exact rate
    assert torch.equal(x, lang.sample(4000, 12, seed=3))  # deterministic given the seed


def test_bad_inputs():
    with pytest.raises(ValueError, match="vocab_size must be an int >= 2"):
        MarkovLanguage(vocab_size=1)
    with pytest.raises(TypeError, match="order must be an int"):
        MarkovLanguage(vocab_size=4, order=1.5)
    with pytest.raises(ValueError, match="concentration must be a number > 0"):
        MarkovLanguage(vocab_size=4, concentration=0.0)
    with pytest.raises(ValueError, match="backoff must be a number in"):
        MarkovLanguage(vocab_size=4, backoff=1.0)
    with pytest.raises(ValueError, match="too many"):
        MarkovLanguage(vocab_size=300, order=2)
    lang = MarkovLanguage(vocab_size=4, order=2)
    with pytest.raises(ValueError, match="seq_len must be an int >= 3"):
        lang.sample(2, 2)
    with pytest.raises(ValueError, match="n_seq must be an int >= 1"):
        lang.sample(0, 5)


def test_seeds_are_ints_or_generators_with_the_same_stream():
    a = MarkovLanguage(vocab_size=5, order=2, backoff=0.3, seed=2)
    b = MarkovLanguage(vocab_size=np.int64(5), order=np.int64(2), backoff=0.3, seed=np.random.default_rng(2))
    np.testing.assert_array_equal(a.transition, b.transition)
    assert a.seed == 2 and isinstance(b.seed, np.random.Generator)
    assert torch.equal(a.sample(3, 8, seed=4), a.sample(np.int64(3), np.int64(8), seed=np.random.default_rng(4)))
    assert torch.equal(a.sample(3, 8, seed=np.int64(4)), a.sample(3, 8, seed=4))
    with pytest.raises(TypeError, match="seed"):
        MarkovLanguage(vocab_size=4, seed=0.5)
    with pytest.raises(ValueError, match="seed"):
        a.sample(3, 8, seed=-1)
    with pytest.raises(TypeError, match="concentration must be a number"):
        MarkovLanguage(vocab_size=4, concentration="0.3")
