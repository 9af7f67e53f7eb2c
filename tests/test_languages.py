"""Unit tests of iclr26.data: the topic-switching language and its garden-path sentences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26.data import TopicLanguage
from iclr26.data.languages import transition_topics


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


def test_transition_topics_share_tokens_and_differ_in_transitions():
    data = transition_topics(64, 60, 12, n_topics=4, n_atoms=16, branching=2, switch_prob=0.1, noise=0.0, seed=3)
    assert data.x.shape == (64, 60, 12) and data.token.shape == data.topic.shape == data.boundary.shape == (64, 60)
    assert data.atoms.shape == (16, 12) and data.successors.shape == (4, 16, 2)
    torch.testing.assert_close(data.atoms.norm(dim=1), torch.ones(16))
    changed = torch.cat([torch.zeros(64, 1, dtype=torch.bool), data.topic[:, 1:] != data.topic[:, :-1]], 1)
    assert torch.equal(changed, data.boundary) and data.boundary.any()
    # every step follows one of the successors that the current topic allows
    nxt, prev, z = data.token[:, 1:], data.token[:, :-1], data.topic[:, 1:]
    allowed = data.successors[z, prev]  # (n_seq, T - 1, branching)
    assert (allowed == nxt[..., None]).any(-1).all()
    # each topic's successors are permutations of the vocabulary: every token is reachable equally often
    for topic in range(4):
        for j in range(2):
            assert sorted(data.successors[topic, :, j].tolist()) == list(range(16))
    # without noise each activation is a positive multiple (0.5 to 1.5) of its token's embedding
    coef = (data.x * data.atoms[data.token]).sum(-1)
    torch.testing.assert_close(data.x, coef[..., None] * data.atoms[data.token], atol=1e-5, rtol=1e-5)
    assert coef.min() >= 0.5 - 1e-5 and coef.max() <= 1.5 + 1e-5
    # the same tokens appear under every topic: single-token frequencies barely depend on the topic
    for topic in range(4):
        counts = torch.bincount(data.token[data.topic == topic], minlength=16).float()
        assert (counts > 0).all()
    # same seed, same data; a different seed, different data
    again = transition_topics(64, 60, 12, n_topics=4, n_atoms=16, branching=2, switch_prob=0.1, noise=0.0, seed=3)
    assert torch.equal(data.token, again.token) and torch.equal(data.x, again.x)
    assert not torch.equal(data.token, transition_topics(64, 60, 12, switch_prob=0.1, noise=0.0, seed=4).token)


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
        (lambda: transition_topics(2, 1, 4), ValueError, "seq_len"),
        (lambda: transition_topics(2, 8, 4, n_topics=1), ValueError, "n_topics"),
        (lambda: transition_topics(2, 8, 4, n_atoms=4, branching=5), ValueError, "branching"),
        (lambda: transition_topics(2, 8, 4, switch_prob=-0.1), ValueError, "switch_prob"),
        (lambda: transition_topics(2, 8, 4, noise=-1.0), ValueError, "noise"),
        (lambda: transition_topics(2.0, 8, 4), TypeError, "n_seq"),
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
