"""Unit tests of iclr26.data: the topic-switching language and its garden-path sentences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26.data import TopicLanguage


def test_emission_rows_are_distributions_and_vocab_is_partitioned():
    lang = TopicLanguage(n_topics=4, words_per_topic=5, n_function=6, n_ambiguous=2, seed=0)
    assert lang.vocab_size == 6 + 4 * 5 + 2 * 2
    assert np.allclose(lang.emission.sum(1), 1)
    # content words belong to one topic; ambiguous words to both topics of a pair, more to the first
    for z in range(4):
        others = [o for o in range(4) if o != z]
        assert (lang.emission[others][:, lang.content_words(z)] == 0).all()
    amb = lang.ambiguous_words(0)
    assert (lang.emission[0, amb] > lang.emission[1, amb]).all() and (lang.emission[2:, amb] == 0).all()


def test_sample_topics_and_boundaries_agree():
    lang = TopicLanguage(switch_prob=0.2, seed=1)
    batch = lang.sample(16, 40, seed=2)
    assert batch.tokens.shape == batch.topic.shape == batch.boundary.shape == (16, 40)
    changed = torch.cat([torch.zeros(16, 1, dtype=torch.bool), batch.topic[:, 1:] != batch.topic[:, :-1]], 1)
    assert torch.equal(changed, batch.boundary)
    assert batch.tokens.min() >= 0 and batch.tokens.max() < lang.vocab_size
    # same seed, same sample
    assert torch.equal(batch.tokens, lang.sample(16, 40, seed=2).tokens)


def test_garden_path_alignment():
    lang = TopicLanguage(seed=0)
    gp = lang.garden_path(8, seq_len=20, n_ambiguous_prefix=3, seed=4)
    assert gp.pivot == gp.start + 3
    assert torch.equal(gp.tokens[:, : gp.pivot], gp.control[:, : gp.pivot])
    for i in range(8):
        pair = int(gp.first[i]) // 2
        assert int(gp.second[i]) == int(gp.first[i]) + 1
        assert set(gp.tokens[i, gp.start : gp.pivot].tolist()) <= set(lang.ambiguous_words(pair).tolist())
        assert int(gp.tokens[i, gp.pivot]) in lang.content_words(int(gp.second[i]))
        assert int(gp.control[i, gp.pivot]) in lang.content_words(int(gp.first[i]))


@pytest.mark.parametrize(
    "make, err, match",
    [
        (lambda: TopicLanguage(n_topics=3), ValueError, "even"),
        (lambda: TopicLanguage(n_topics=1), ValueError, "n_topics"),
        (lambda: TopicLanguage(switch_prob=1.5), ValueError, "switch_prob"),
        (lambda: TopicLanguage(p_function=0.9, p_ambiguous=0.2), ValueError, "p_function"),
        (lambda: TopicLanguage(ambiguity_bias=0.5), ValueError, "ambiguity_bias"),
        (lambda: TopicLanguage(words_per_topic=2.0), TypeError, "words_per_topic"),
        (lambda: TopicLanguage().sample(0, 10), ValueError, "n must be"),
        (lambda: TopicLanguage().sample(4, 1), ValueError, "seq_len"),
        (lambda: TopicLanguage().garden_path(4, seq_len=6, n_ambiguous_prefix=3), ValueError, "too short"),
    ],
)
def test_bad_input(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_seeds_are_ints_or_generators_with_the_same_stream():
    a, b = TopicLanguage(seed=3), TopicLanguage(seed=np.random.default_rng(3))
    np.testing.assert_array_equal(a.emission, b.emission)
    assert np.array_equal(a.emission, TopicLanguage(n_topics=np.int64(4), words_per_topic=np.int64(8), seed=3).emission)
    s1, s2 = a.sample(4, 10, seed=5), a.sample(np.int64(4), np.int64(10), seed=np.random.default_rng(5))
    assert torch.equal(s1.tokens, s2.tokens) and torch.equal(s1.topic, s2.topic)
    g1, g2 = a.garden_path(3, seed=7), a.garden_path(3, seed=np.random.default_rng(7))
    assert torch.equal(g1.tokens, g2.tokens) and torch.equal(g1.control, g2.control)
    g = np.random.default_rng(1)  # one generator threaded through two calls gives two different batches
    assert not torch.equal(a.sample(4, 10, seed=g).tokens, a.sample(4, 10, seed=g).tokens)
    with pytest.raises(TypeError, match="seed"):
        TopicLanguage(seed=1.0)
    with pytest.raises(TypeError, match="seed"):
        a.sample(4, 10, seed="x")
    with pytest.raises(TypeError, match="ambiguity_bias must be a number"):
        TopicLanguage(ambiguity_bias="4")
