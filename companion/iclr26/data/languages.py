"""Synthetic languages with known latent structure, for training tiny language models.

:class:`TopicLanguage` is a topic-switching hidden Markov language: a hidden topic persists and switches at random
(so event boundaries are known), and each token is a function word (shared by all topics), a content word of the
current topic, or an *ambiguous* word that two topics share (mostly used by the first of the pair). The ambiguous
words make garden-path sentences: a segment that opens with ambiguous words reads as the likelier topic until a
disambiguating word reveals the other one (:meth:`TopicLanguage.garden_path`).

    lang = TopicLanguage(n_topics=4, seed=0)
    batch = lang.sample(256, 64, seed=1)      # batch.tokens (n, T), batch.topic (n, T), batch.boundary (n, T)
    gp = lang.garden_path(64, seq_len=32, seed=2)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from iclr26.validate import as_float, as_generator, as_int, as_prob

__all__ = ["TopicLanguage", "TopicBatch", "GardenPath", "TransitionTopics", "transition_topics"]


@dataclass(frozen=True)
class TopicBatch:
    """Token sequences with their hidden topics and the steps where the topic switched."""

    tokens: torch.Tensor  # (n, T) long
    topic: torch.Tensor  # (n, T) long
    boundary: torch.Tensor  # (n, T) bool


@dataclass(frozen=True)
class GardenPath:
    """Garden-path sequences and their controls, aligned: position ``pivot`` holds the disambiguating word.

    In ``tokens`` the ambiguous opening (positions ``start..pivot-1``) resolves to the *unlikely* topic of its pair
    at ``pivot``; in ``control`` the same opening resolves to the likely topic. ``first`` / ``second``: the readings.
    """

    tokens: torch.Tensor  # (n, T) long
    control: torch.Tensor  # (n, T) long
    first: torch.Tensor  # (n,) the likely reading (topic) of the ambiguous opening
    second: torch.Tensor  # (n,) the topic revealed at the pivot in `tokens`
    start: int
    pivot: int


class TopicLanguage:
    """A topic-switching HMM language with shared, topic-specific and ambiguous words.

    Vocabulary: ``n_function`` function words, then ``words_per_topic`` content words per topic, then
    ``n_ambiguous`` ambiguous words per topic pair ``(2i, 2i+1)``. A topic emits a function word with probability
    ``p_function``, else one of its content words, except that with probability ``p_ambiguous`` it emits an
    ambiguous word of its pair (the first topic of a pair does so ``ambiguity_bias`` times as often as the second).
    The topic switches to a uniformly chosen other topic with probability ``switch_prob`` per step.
    """

    def __init__(
        self,
        n_topics: int = 4,
        words_per_topic: int = 8,
        n_function: int = 8,
        n_ambiguous: int = 3,
        p_function: float = 0.4,
        p_ambiguous: float = 0.15,
        ambiguity_bias: float = 4.0,
        switch_prob: float = 1 / 16,
        seed: int | np.random.Generator = 0,
    ) -> None:
        self.n_topics = as_int(n_topics, "n_topics", low=2)
        if self.n_topics % 2:
            raise ValueError(f"n_topics must be even (ambiguous words come in topic pairs), got {n_topics}")
        self.words_per_topic = as_int(words_per_topic, "words_per_topic", low=1)
        self.n_function = as_int(n_function, "n_function", low=1)
        self.n_ambiguous = as_int(n_ambiguous, "n_ambiguous", low=1)
        self.p_function = as_prob(p_function, "p_function")
        self.p_ambiguous = as_prob(p_ambiguous, "p_ambiguous")
        if self.p_function + self.p_ambiguous > 1:
            raise ValueError("p_function + p_ambiguous must be <= 1")
        self.ambiguity_bias = as_float(ambiguity_bias, "ambiguity_bias", low=1.0)
        self.switch_prob = as_prob(switch_prob, "switch_prob")
        self.seed = seed
        rng = as_generator(seed)
        n_pairs = self.n_topics // 2
        self.vocab_size = self.n_function + self.n_topics * self.words_per_topic + n_pairs * self.n_ambiguous
        self.emission = np.zeros((self.n_topics, self.vocab_size))
        zipf = 1.0 / np.arange(1, self.n_function + 1)
        for z in range(self.n_topics):
            pair = z // 2
            p_amb = self.p_ambiguous if z % 2 == 0 else self.p_ambiguous / self.ambiguity_bias
            self.emission[z, : self.n_function] = self.p_function * zipf / zipf.sum()
            content = rng.dirichlet(np.full(self.words_per_topic, 2.0))
            lo = self.n_function + z * self.words_per_topic
            self.emission[z, lo : lo + self.words_per_topic] = (1 - self.p_function - p_amb) * content
            self.emission[z, self.ambiguous_words(pair)] = p_amb / self.n_ambiguous
        self.emission /= self.emission.sum(1, keepdims=True)

    def content_words(self, topic: int) -> np.ndarray:
        """Token ids of the words only ``topic`` uses."""
        topic = as_int(topic, "topic", 0, self.n_topics - 1)
        lo = self.n_function + topic * self.words_per_topic
        return np.arange(lo, lo + self.words_per_topic)

    def ambiguous_words(self, pair: int) -> np.ndarray:
        """Token ids of the words shared by topics ``2 pair`` and ``2 pair + 1``."""
        pair = as_int(pair, "pair", 0, self.n_topics // 2 - 1)
        lo = self.n_function + self.n_topics * self.words_per_topic + pair * self.n_ambiguous
        return np.arange(lo, lo + self.n_ambiguous)

    def _topics(self, rng: np.random.Generator, n: int, T: int) -> tuple[np.ndarray, np.ndarray]:
        topic = np.zeros((n, T), dtype=np.int64)
        topic[:, 0] = rng.integers(self.n_topics, size=n)
        switch = rng.random((n, T)) < self.switch_prob
        switch[:, 0] = False
        shift = rng.integers(1, self.n_topics, size=(n, T))
        for t in range(1, T):
            topic[:, t] = np.where(switch[:, t], (topic[:, t - 1] + shift[:, t]) % self.n_topics, topic[:, t - 1])
        return topic, switch

    def _emit(self, rng: np.random.Generator, topic: np.ndarray) -> np.ndarray:
        cdf = self.emission.cumsum(1)[topic]  # (n, T, V)
        u = rng.random(topic.shape + (1,))
        return np.minimum((u > cdf).sum(-1), self.vocab_size - 1).astype(np.int64)

    def sample(self, n: int, seq_len: int, seed: int | np.random.Generator = 0) -> TopicBatch:
        """``n`` sequences of ``seq_len`` tokens with their topics and boundaries."""
        n, seq_len = as_int(n, "n", low=1), as_int(seq_len, "seq_len", low=2)
        rng = as_generator(seed)
        topic, switch = self._topics(rng, n, seq_len)
        tokens = self._emit(rng, topic)
        return TopicBatch(torch.from_numpy(tokens), torch.from_numpy(topic), torch.from_numpy(switch))

    def garden_path(
        self, n: int, seq_len: int = 32, n_ambiguous_prefix: int = 3, seed: int | np.random.Generator = 0
    ) -> GardenPath:
        """Garden-path sequences: a context segment of another topic, then at ``start`` a new segment that opens with
        ``n_ambiguous_prefix`` ambiguous words of a pair, then at ``pivot`` a content word of the pair's unlikely
        topic (``tokens``) or of its likely topic (``control``), then that topic's words to the end."""
        n, seq_len = as_int(n, "n", low=1), as_int(seq_len, "seq_len", low=4)
        n_ambiguous_prefix = as_int(n_ambiguous_prefix, "n_ambiguous_prefix", low=1)
        start = seq_len // 2 - n_ambiguous_prefix
        if start < 1:
            raise ValueError(f"seq_len={seq_len} is too short for n_ambiguous_prefix={n_ambiguous_prefix}")
        pivot = start + n_ambiguous_prefix
        if self.n_topics < 4:
            raise ValueError(f"garden_path needs n_topics >= 4 (a context topic outside the pair), got {self.n_topics}")
        rng = as_generator(seed)
        pair = rng.integers(self.n_topics // 2, size=n)
        first, second = 2 * pair, 2 * pair + 1
        other = np.array([rng.choice([z for z in range(self.n_topics) if z // 2 != p]) for p in pair])
        out = []
        for reveal in (second, first):
            topic = np.empty((n, seq_len), dtype=np.int64)
            topic[:, :start] = other[:, None]
            topic[:, start:] = reveal[:, None]
            tokens = self._emit(rng, topic)
            out.append((tokens, topic))
        (tok, _), (ctl, _) = out
        ctl[:, :pivot] = tok[:, :pivot]  # identical up to the pivot
        for i in range(n):
            amb = self.ambiguous_words(pair[i])
            tok[i, start:pivot] = ctl[i, start:pivot] = rng.choice(amb, n_ambiguous_prefix)
            tok[i, pivot] = rng.choice(self.content_words(second[i]))
            ctl[i, pivot] = rng.choice(self.content_words(first[i]))
        return GardenPath(
            torch.from_numpy(tok),
            torch.from_numpy(ctl),
            torch.from_numpy(first),
            torch.from_numpy(second),
            start,
            pivot,
        )


@dataclass(frozen=True)
class TransitionTopics:
    """Planted activations whose topic shows only in the order of tokens (see :func:`transition_topics`)."""

    x: torch.Tensor  # (n_seq, T, d) activations
    token: torch.Tensor  # (n_seq, T) long: the token (atom) at each step
    topic: torch.Tensor  # (n_seq, T) long: the hidden topic
    boundary: torch.Tensor  # (n_seq, T) bool: the topic changed at this step
    atoms: torch.Tensor  # (n_atoms, d) unit token embeddings, shared by all topics
    successors: torch.Tensor  # (n_topics, n_atoms, branching) long: the tokens each topic allows after each token


def transition_topics(
    n_seq: int,
    seq_len: int,
    d: int,
    *,
    n_topics: int = 4,
    n_atoms: int = 16,
    branching: int = 2,
    switch_prob: float = 1 / 16,
    noise: float = 0.05,
    seed: int | np.random.Generator = 0,
) -> TransitionTopics:
    """Topics that share one vocabulary and differ only in their transition structure.

    Every topic uses the same ``n_atoms`` unit token embeddings; topic ``z`` moves from token ``a`` to one of
    ``branching`` successors ``succ[z, a, j] = perm[z, j][a]`` (``branching`` random permutations per topic, one drawn
    uniformly at each step). A mixture of permutations is doubly stochastic, so every topic's tokens are uniform on
    their own: a single token says nothing about the topic, a pair of consecutive tokens almost everything. The topic
    switches to a uniformly chosen other one with probability ``switch_prob`` per step (a labelled boundary); each
    activation is ``c_t atoms[token_t]`` with ``c_t ~ U(0.5, 1.5)``, plus Gaussian noise of standard deviation
    ``noise`` per coordinate.
    """
    n_seq, seq_len, d = as_int(n_seq, "n_seq", low=1), as_int(seq_len, "seq_len", low=2), as_int(d, "d", low=1)
    n_topics, n_atoms = as_int(n_topics, "n_topics", low=2), as_int(n_atoms, "n_atoms", low=2)
    branching = as_int(branching, "branching", low=1)
    if branching > n_atoms:
        raise ValueError(f"branching must be <= n_atoms={n_atoms}, got {branching}")
    switch_prob = as_prob(switch_prob, "switch_prob")
    noise = as_float(noise, "noise", low=0.0)
    rng = as_generator(seed)
    atoms = rng.standard_normal((n_atoms, d))
    atoms /= np.linalg.norm(atoms, axis=1, keepdims=True)
    succ = np.stack([np.stack([rng.permutation(n_atoms) for _ in range(branching)], -1) for _ in range(n_topics)])
    topic = np.zeros((n_seq, seq_len), dtype=np.int64)
    topic[:, 0] = rng.integers(n_topics, size=n_seq)
    switch = rng.random((n_seq, seq_len)) < switch_prob
    switch[:, 0] = False
    shift = rng.integers(1, n_topics, size=(n_seq, seq_len))
    token = np.zeros((n_seq, seq_len), dtype=np.int64)
    token[:, 0] = rng.integers(n_atoms, size=n_seq)
    pick = rng.integers(branching, size=(n_seq, seq_len))
    for t in range(1, seq_len):
        topic[:, t] = np.where(switch[:, t], (topic[:, t - 1] + shift[:, t]) % n_topics, topic[:, t - 1])
        token[:, t] = succ[topic[:, t], token[:, t - 1], pick[:, t]]
    coef = rng.uniform(0.5, 1.5, (n_seq, seq_len, 1))
    x = coef * atoms[token] + noise * rng.standard_normal((n_seq, seq_len, d))
    return TransitionTopics(
        x=torch.tensor(x, dtype=torch.float32),
        token=torch.from_numpy(token),
        topic=torch.from_numpy(topic),
        boundary=torch.from_numpy(switch),
        atoms=torch.tensor(atoms, dtype=torch.float32),
        successors=torch.from_numpy(succ),
    )
