"""A synthetic language with a known entropy rate: a random order-``k`` Markov chain over ``vocab_size`` tokens.

Each context (the last ``order`` tokens) has its own next-token distribution, drawn from a symmetric
Dirichlet with the given ``concentration`` (small = peaky = low entropy). Because the chain is Markov, the best
possible next-token loss of *any* model that sees at least ``order`` previous tokens is the chain's entropy rate

    H = sum_c pi(c) * H(T[c, :])        (nats per token),

with ``pi`` the stationary distribution over contexts. :class:`MarkovLanguage` computes it exactly, so a language
model trained on :meth:`MarkovLanguage.sample` has a known loss floor::

    lang = MarkovLanguage(vocab_size=16, order=2, concentration=0.3, backoff=0.5, seed=0)
    tokens = lang.sample(1024, seq_len=32, seed=1)    # LongTensor (1024, 32), started in the stationary distribution
    lang.entropy_rate                                  # the floor of the loss on positions >= order
"""

from __future__ import annotations

import numpy as np
import torch

from iclr26.validate import as_float, as_generator, as_int

__all__ = ["MarkovLanguage"]


class MarkovLanguage:
    """A random order-``order`` Markov chain over ``vocab_size`` tokens with an exactly computed entropy rate.

    Parameters
    ----------
    vocab_size
        Number of tokens (>= 2).
    order
        How many previous tokens the next-token distribution depends on (>= 1); there are ``vocab_size ** order``
        contexts, at most 2**16.
    concentration
        Dirichlet concentration of each context's next-token distribution (> 0); smaller is peakier.
    backoff
        Weight in [0, 1) of a shared lower-order part: each context's distribution is
        ``backoff * B[last token] + (1 - backoff) * D[context]`` with ``B`` and ``D`` Dirichlet tables, so a model
        that only learns bigram statistics already gains part of the way (learning is gradual, as in real text).
        The chain is still exactly order ``order`` and its entropy rate is still exact.
    seed
        Seed of the transition table (the language itself; sampling has its own seed): an int, or a
        ``np.random.Generator`` to draw the table from.
    """

    def __init__(
        self,
        vocab_size: int,
        order: int = 2,
        concentration: float = 0.3,
        backoff: float = 0.0,
        seed: int | np.random.Generator = 0,
    ) -> None:
        self.vocab_size = as_int(vocab_size, "vocab_size", low=2)
        self.order = as_int(order, "order", low=1)
        self.concentration = as_float(concentration, "concentration", 0.0, low_open=True)
        self.backoff = as_float(backoff, "backoff", 0.0, 1.0, high_open=True)
        rng = as_generator(seed)
        self.seed = seed if isinstance(seed, np.random.Generator) else int(seed)
        self.n_contexts = self.vocab_size**self.order
        if self.n_contexts > 2**16:
            raise ValueError(
                f"vocab_size ** order = {self.n_contexts} contexts is too many (at most 65536); "
                "lower vocab_size or order"
            )
        table = rng.dirichlet(np.full(self.vocab_size, self.concentration), size=self.n_contexts)
        if self.backoff > 0:
            bigram = rng.dirichlet(np.full(self.vocab_size, self.concentration), size=self.vocab_size)
            last = np.arange(self.n_contexts) % self.vocab_size  # the context's most recent token
            table = self.backoff * bigram[last] + (1 - self.backoff) * table
        # floor tiny probabilities so every transition is possible (the chain is then ergodic) and renormalise
        table = np.maximum(table, 1e-6)
        self.transition = table / table.sum(axis=1, keepdims=True)  # (contexts, vocab)
        self.stationary = self._stationary()
        self.entropy_rate = float(self._entropy_rate())

    # ------------------------------------------------------------------------------------------ exact quantities
    def _next_context(self) -> np.ndarray:
        """Index of the context after emitting token b from context c: (c * V + b) mod V^k, shape (contexts, V)."""
        c = np.arange(self.n_contexts)[:, None]
        b = np.arange(self.vocab_size)[None, :]
        return (c * self.vocab_size + b) % self.n_contexts

    def _stationary(self, tol: float = 1e-14, max_iter: int = 100_000) -> np.ndarray:
        """The stationary distribution over contexts, by power iteration on the context chain."""
        nxt = self._next_context().ravel()
        pi = np.full(self.n_contexts, 1.0 / self.n_contexts)
        for _ in range(max_iter):
            new = np.bincount(nxt, weights=(pi[:, None] * self.transition).ravel(), minlength=self.n_contexts)
            new /= new.sum()
            if np.abs(new - pi).sum() < tol:
                return new
            pi = new
        raise RuntimeError("the stationary distribution did not converge")  # pragma: no cover

    def _entropy_rate(self) -> float:
        p = self.transition
        row_entropy = -(p * np.log(p)).sum(axis=1)
        return float(self.stationary @ row_entropy)

    @property
    def unigram_entropy(self) -> float:
        """Entropy (nats) of the stationary token distribution: the loss of a model that ignores the context."""
        marg = self.stationary.reshape(-1, self.vocab_size).sum(axis=0)  # last token of the context
        return float(-(marg * np.log(marg)).sum())

    # ------------------------------------------------------------------------------------------ sampling
    def sample(self, n_seq: int, seq_len: int, seed: int | np.random.Generator = 0) -> torch.Tensor:
        """``n_seq`` sequences of ``seq_len`` tokens (LongTensor), the first ``order`` tokens drawn from the
        stationary distribution, so every later position has conditional entropy exactly :attr:`entropy_rate`."""
        n_seq = as_int(n_seq, "n_seq", low=1)
        seq_len = as_int(seq_len, "seq_len", low=self.order + 1)
        rng = as_generator(seed)
        v, k = self.vocab_size, self.order
        out = np.empty((n_seq, seq_len), dtype=np.int64)
        ctx = rng.choice(self.n_contexts, size=n_seq, p=self.stationary)
        for i in range(k):  # decode the context index into its k tokens (most significant first)
            out[:, i] = (ctx // v ** (k - 1 - i)) % v
        cdf = np.cumsum(self.transition, axis=1)
        cdf[:, -1] = 1.0
        u = rng.random((n_seq, seq_len - k))
        for t in range(k, seq_len):
            tok = (cdf[ctx] < u[:, t - k, None]).sum(axis=1)
            out[:, t] = tok
            ctx = (ctx * v + tok) % self.n_contexts
        return torch.from_numpy(out)

    def __repr__(self) -> str:
        return (
            f"MarkovLanguage(vocab_size={self.vocab_size}, order={self.order}, concentration={self.concentration}, "
            f"backoff={self.backoff}, seed={self.seed}; entropy_rate={self.entropy_rate:.4f} nats)"
        )
