"""Planted generators: synthetic data whose ground truth is known, for the SAE chapters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from iclr26.validate import as_float, as_generator, as_int

__all__ = ["PlantedSlowFast", "planted_slow_fast"]


@dataclass(frozen=True)
class PlantedSlowFast:
    """Sequences ``x = slow + fast + noise`` with their ground truth (see :func:`planted_slow_fast`)."""

    x: torch.Tensor  # (n_seq, T, d)
    slow: torch.Tensor  # (n_seq, T, d)
    fast: torch.Tensor  # (n_seq, T, d)
    topic: torch.Tensor  # (n_seq, T) long: the current topic
    boundary: torch.Tensor  # (n_seq, T) bool: the topic changed at this step
    fast_coef: torch.Tensor  # (n_seq, T, n_fast): ground-truth fast coefficients
    slow_atoms: torch.Tensor  # (n_slow, d)
    fast_atoms: torch.Tensor  # (n_fast, d)
    topic_atoms: torch.Tensor  # (n_topics, atoms_per_topic) long: which slow atoms make up each topic


def planted_slow_fast(
    n_seq: int,
    seq_len: int,
    d: int,
    *,
    n_topics: int = 8,
    n_slow: int = 16,
    atoms_per_topic: int = 3,
    n_fast: int = 64,
    k_fast: int = 3,
    switch_prob: float = 1 / 16,
    slow_scale: float = 1.0,
    fast_scale: float = 1.0,
    noise: float = 0.05,
    seed: int | np.random.Generator = 0,
) -> PlantedSlowFast:
    """Planted temporal data: a slow topic component that switches at random plus fast i.i.d. sparse atoms.

    The topic (one of ``n_topics``, each the sum of ``atoms_per_topic`` unit slow atoms with coefficients drawn once
    per segment from U(0.5, 1.5) times ``slow_scale``) switches to a different topic with probability ``switch_prob``
    per step; each step also adds ``k_fast`` of ``n_fast`` unit fast atoms with coefficients U(0.5, 1.5) times
    ``fast_scale``, and Gaussian noise of standard deviation ``noise`` per coordinate.
    """
    n_seq, seq_len, d = as_int(n_seq, "n_seq", low=1), as_int(seq_len, "seq_len", low=2), as_int(d, "d", low=1)
    n_topics, n_slow = as_int(n_topics, "n_topics", low=2), as_int(n_slow, "n_slow", low=1)
    atoms_per_topic = as_int(atoms_per_topic, "atoms_per_topic", low=1)
    n_fast, k_fast = as_int(n_fast, "n_fast", low=1), as_int(k_fast, "k_fast", low=1)
    if atoms_per_topic > n_slow:
        raise ValueError(f"atoms_per_topic must be <= n_slow={n_slow}, got {atoms_per_topic}")
    if k_fast > n_fast:
        raise ValueError(f"k_fast must be <= n_fast={n_fast}, got {k_fast}")
    switch_prob = as_float(switch_prob, "switch_prob", 0.0, 1.0)
    slow_scale = as_float(slow_scale, "slow_scale", low=0.0)
    fast_scale = as_float(fast_scale, "fast_scale", low=0.0)
    noise = as_float(noise, "noise", low=0.0)
    rng = as_generator(seed)

    def unit_rows(n: int) -> np.ndarray:
        a = rng.standard_normal((n, d))
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    slow_atoms, fast_atoms = unit_rows(n_slow), unit_rows(n_fast)
    topic_atoms = np.stack([rng.choice(n_slow, atoms_per_topic, replace=False) for _ in range(n_topics)])
    topic = np.zeros((n_seq, seq_len), dtype=np.int64)
    boundary = np.zeros((n_seq, seq_len), dtype=bool)
    slow_coef = np.zeros((n_seq, seq_len, n_slow))
    for s in range(n_seq):
        cur = rng.integers(n_topics)
        coef = rng.uniform(0.5, 1.5, atoms_per_topic) * slow_scale
        for t in range(seq_len):
            if t > 0 and rng.random() < switch_prob:
                cur = (cur + rng.integers(1, n_topics)) % n_topics
                coef = rng.uniform(0.5, 1.5, atoms_per_topic) * slow_scale
                boundary[s, t] = True
            topic[s, t] = cur
            slow_coef[s, t, topic_atoms[cur]] = coef
    fast_coef = np.zeros((n_seq, seq_len, n_fast))
    idx = np.argsort(rng.random((n_seq, seq_len, n_fast)), axis=-1)[..., :k_fast]
    np.put_along_axis(fast_coef, idx, rng.uniform(0.5, 1.5, (n_seq, seq_len, k_fast)) * fast_scale, axis=-1)
    slow = slow_coef @ slow_atoms
    fast = fast_coef @ fast_atoms
    x = slow + fast + noise * rng.standard_normal((n_seq, seq_len, d))
    f32 = lambda a: torch.tensor(a, dtype=torch.float32)
    return PlantedSlowFast(
        x=f32(x),
        slow=f32(slow),
        fast=f32(fast),
        topic=torch.tensor(topic),
        boundary=torch.tensor(boundary),
        fast_coef=f32(fast_coef),
        slow_atoms=f32(slow_atoms),
        fast_atoms=f32(fast_atoms),
        topic_atoms=torch.tensor(topic_atoms),
    )
