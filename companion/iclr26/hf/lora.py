"""Low-rank adapters (LoRA, Hu et al. 2021) on the linear layers of any torch model, without ``peft``.

:func:`add_lora` wraps the ``nn.Linear`` submodules whose last name is in ``targets`` (``q_proj``, ``v_proj``, ... in a
transformers Llama) in a :class:`LoRALinear` and freezes every other parameter: ``W x + (alpha / rank) B A x`` with
``A`` (rank × in) drawn like ``peft``'s default (Kaiming-uniform, ``a = sqrt(5)``) and ``B`` (out × rank) zero, so
the model is unchanged until it trains. :func:`lora_parameters` gives the trainable tensors for the optimizer,
:func:`lora_disabled` runs the base model (adapters off) inside a ``with`` block, and :func:`merge_lora` folds each
adapter into its weight and puts the plain ``nn.Linear`` back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from iclr26.validate import as_float, as_int, as_module

__all__ = ["LoRALinear", "add_lora", "lora_parameters", "lora_disabled", "merge_lora"]


class LoRALinear(nn.Module):
    """``base(x) + (alpha / rank) * x A^T B^T``: a frozen ``nn.Linear`` plus a trainable rank-``rank`` update (``B``
    starts at zero). ``enabled = False`` gives the base layer's output."""

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0, generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"base must be an nn.Linear, got {type(base).__name__}")
        rank = as_int(rank, "rank", low=1)
        alpha = as_float(alpha, "alpha", low=0.0, low_open=True)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        w = base.weight
        a = torch.empty(rank, base.in_features, dtype=w.dtype)
        bound = 1.0 / math.sqrt(base.in_features)  # kaiming_uniform_(a=sqrt(5)): sqrt(3) * sqrt(1/3) / sqrt(in)
        a.uniform_(-bound, bound, generator=generator)
        self.lora_A = nn.Parameter(a.to(w.device))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=w.dtype, device=w.device))
        self.rank, self.alpha, self.scaling = rank, alpha, alpha / rank
        self.enabled = True

    def delta_weight(self) -> torch.Tensor:
        """The adapter's update of the weight, ``(alpha / rank) B A`` (out × in)."""
        return self.scaling * (self.lora_B @ self.lora_A)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        if not self.enabled:
            return out
        return out + self.scaling * ((x.to(self.lora_A.dtype) @ self.lora_A.T) @ self.lora_B.T).to(out.dtype)

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha:g}"


def _targets(targets: Iterable[str] | str) -> set[str]:
    if isinstance(targets, str):
        targets = [targets]
    try:
        out = list(targets)
    except TypeError:
        raise TypeError(f"targets must be a str or an iterable of str, got {type(targets).__name__}") from None
    if not out or not all(isinstance(t, str) and t for t in out):
        raise ValueError(f"targets must name at least one submodule (non-empty strings), got {out!r}")
    return set(out)


def add_lora(
    model: nn.Module,
    targets: Iterable[str] | str = ("q_proj", "v_proj"),
    rank: int = 8,
    alpha: float = 16.0,
    seed: int = 0,
) -> list[str]:
    """Wrap every ``nn.Linear`` of ``model`` whose last name is in ``targets`` in a :class:`LoRALinear` (in place),
    freeze all other parameters, and return the wrapped names. ``targets`` defaults to ``peft``'s for Llama
    (``q_proj``, ``v_proj``); ``rank`` and ``alpha`` as in ``peft`` (scaling ``alpha / rank``); ``seed`` draws the
    ``A`` matrices. A ``ValueError`` if nothing matches or the model already has adapters."""
    model = as_module(model, "model")
    names = _targets(targets)
    rank = as_int(rank, "rank", low=1)
    alpha = as_float(alpha, "alpha", low=0.0, low_open=True)
    gen = torch.Generator().manual_seed(as_int(seed, "seed", low=0))
    if any(isinstance(m, LoRALinear) for m in model.modules()):
        raise ValueError("model already has LoRA adapters (merge_lora them first)")
    found = [
        (name, module)
        for name, module in model.named_modules()
        if name and name.rsplit(".", 1)[-1] in names and isinstance(module, nn.Linear)
    ]
    if not found:
        raise ValueError(f"targets {sorted(names)} match no nn.Linear submodule of the model")
    for p in model.parameters():
        p.requires_grad_(False)
    for name, module in found:
        model.set_submodule(name, LoRALinear(module, rank, alpha, generator=gen))
    return [name for name, _ in found]


def _adapters(model: nn.Module) -> list[tuple[str, LoRALinear]]:
    """Every :class:`LoRALinear` of ``model`` with its name; a ``ValueError`` if there is none."""
    found = [(name, m) for name, m in as_module(model, "model").named_modules() if isinstance(m, LoRALinear)]
    if not found:
        raise ValueError("model has no LoRA adapters (add_lora first)")
    return found


def lora_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The adapters' trainable tensors (``A`` and ``B`` of every :class:`LoRALinear`), for the optimizer."""
    return [p for _, m in _adapters(model) for p in (m.lora_A, m.lora_B)]


@contextmanager
def lora_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Inside the block ``model`` runs as its base model (every adapter off); they are back on after it."""
    layers = [m for _, m in _adapters(model)]
    before = [m.enabled for m in layers]
    for m in layers:
        m.enabled = False
    try:
        yield model
    finally:
        for m, on in zip(layers, before):
            m.enabled = on


@torch.no_grad()
def merge_lora(model: nn.Module) -> list[str]:
    """Fold every adapter into its base weight (``W += (alpha / rank) B A``), put the plain ``nn.Linear`` back and
    return the merged names; the parameters frozen by :func:`add_lora` stay frozen."""
    found = _adapters(model)
    for name, m in found:
        if m.enabled:
            m.base.weight += m.delta_weight().to(m.base.weight.dtype)
        model.set_submodule(name, m.base)
    return [name for name, _ in found]
