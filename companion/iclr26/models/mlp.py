"""A plain MLP with named hook points on its hidden pre- and post-activations."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from iclr26.hooks import HookedModule, HookPoint
from iclr26.models.transformer import ACTIVATIONS
from iclr26.validate import as_bool, as_int, float_tensor, one_of

__all__ = ["MLP"]


class MLP(HookedModule):
    """A plain MLP ``sizes=[d_in, h1, ..., d_out]``: Linear, act, ..., Linear (no activation after the last layer).

    Hook points ``layers.{i}.pre`` (before the activation) and ``layers.{i}.post`` (after it) for every hidden layer
    i, so ``run_with_cache(x)`` returns ``(output, {"layers.0.pre": ..., "layers.0.post": ..., ...})`` and
    ``with mlp.hooks({"layers.0.post": fn}): ...`` patches a hidden layer (:class:`iclr26.hooks.HookedModule`).
    """

    def __init__(self, sizes: Sequence[int], act: str = "relu", bias: bool = True) -> None:
        super().__init__()
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
            raise TypeError(f"sizes must be a list [d_in, ..., d_out] of positive ints, got {type(sizes).__name__}")
        if len(sizes) < 2:
            raise ValueError(f"sizes must be a list [d_in, ..., d_out] of at least two positive ints, got {sizes!r}")
        self.sizes = [as_int(n, f"sizes[{i}]", low=1) for i, n in enumerate(sizes)]
        one_of(act, "act", sorted(ACTIVATIONS))
        bias = as_bool(bias, "bias")
        self.act = ACTIVATIONS[act]
        self.layers = nn.ModuleList([nn.Linear(i, o, bias=bias) for i, o in zip(self.sizes[:-1], self.sizes[1:])])
        self.hook_points = nn.ModuleList(
            [HookPoint(f"layers.{i}.{where}") for i in range(len(self.layers) - 1) for where in ("pre", "post")]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = float_tensor(x, "x", finite=False, empty_ok=True, dtype=self.layers[0].weight.dtype)
        if x.ndim == 0 or x.shape[-1] != self.sizes[0]:
            raise ValueError(f"x must have last dimension {self.sizes[0]}, got shape {tuple(x.shape)}")
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.hook_points[2 * i](x)
                x = self.hook_points[2 * i + 1](self.act(x))
        return x
