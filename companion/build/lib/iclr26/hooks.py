"""Named hook points: read (cache), patch, ablate or steer any intermediate of a model by its name."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["HookPoint", "HookFn"]

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]


class HookPoint(nn.Module):
    """Identity with a name. The owning :class:`TinyTransformer` sets ``fn`` (patch) and ``cache`` (record)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.fn: HookFn | None = None
        self.cache: dict[str, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fn is not None:
            out = self.fn(x, self.name)
            if out is not None:
                if not isinstance(out, torch.Tensor) or out.shape != x.shape:
                    raise ValueError(
                        f"hook on {self.name!r} must return None or a tensor of shape {tuple(x.shape)}, "
                        f"got {getattr(out, 'shape', type(out).__name__)}"
                    )
                x = out
        if self.cache is not None:
            self.cache[self.name] = x.detach()
        return x

    def extra_repr(self) -> str:
        return repr(self.name)
