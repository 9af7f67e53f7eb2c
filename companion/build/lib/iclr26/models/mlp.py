"""A plain MLP with a cache of its hidden pre- and post-activations."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from iclr26.models.transformer import ACTIVATIONS

__all__ = ["MLP"]


class MLP(nn.Module):
    """A plain MLP ``sizes=[d_in, h1, ..., d_out]``: Linear, act, ..., Linear (no activation after the last layer).

    ``run_with_cache(x)`` also returns ``{"layers.{i}.pre": ..., "layers.{i}.post": ...}`` for every hidden layer i.
    """

    def __init__(self, sizes: Sequence[int], act: str = "relu", bias: bool = True) -> None:
        super().__init__()
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) < 2:
            raise ValueError(f"sizes must be a list [d_in, ..., d_out] of at least two positive ints, got {sizes!r}")
        if any(isinstance(n, bool) or not isinstance(n, int) or n <= 0 for n in sizes):
            raise ValueError(f"sizes must contain positive ints only, got {list(sizes)}")
        if act not in ACTIVATIONS:
            raise ValueError(f"act must be one of {sorted(ACTIVATIONS)}, got {act!r}")
        if not isinstance(bias, bool):
            raise ValueError(f"bias must be a bool, got {bias!r}")
        self.sizes = list(sizes)
        self.act = ACTIVATIONS[act]
        self.layers = nn.ModuleList([nn.Linear(i, o, bias=bias) for i, o in zip(self.sizes[:-1], self.sizes[1:])])

    def _forward(self, x: torch.Tensor, cache: dict[str, torch.Tensor] | None) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError("x must be a floating-point tensor")
        if x.shape[-1] != self.sizes[0]:
            raise ValueError(f"x must have last dimension {self.sizes[0]}, got shape {tuple(x.shape)}")
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                if cache is not None:
                    cache[f"layers.{i}.pre"] = x.detach()
                x = self.act(x)
                if cache is not None:
                    cache[f"layers.{i}.post"] = x.detach()
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._forward(x, None)

    def run_with_cache(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cache: dict[str, torch.Tensor] = {}
        return self._forward(x, cache), cache
