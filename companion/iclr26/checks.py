"""Input checks shared by the companion's modules: one message shape for every bad argument."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["float_tensor"]


def float_tensor(
    x: Any,
    name: str,
    ndim: int | tuple[int, ...] | None = None,
    last: int | None = None,
    numpy_ok: bool = False,
) -> torch.Tensor:
    """Return ``x`` if it is a floating-point tensor of the expected shape, else raise naming ``name``.

    ``ndim``: allowed number(s) of dimensions; ``last``: required size of the last dimension;
    ``numpy_ok``: also accept a NumPy array (converted without copying).
    """
    if numpy_ok and isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not torch.is_tensor(x):
        kinds = "a torch.Tensor or numpy array" if numpy_ok else "a torch.Tensor"
        raise TypeError(f"{name} must be {kinds}, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.ndim not in allowed:
            want = " or ".join(map(str, allowed))
            raise ValueError(f"{name} must have {want} dimensions, got shape {tuple(x.shape)}")
    if last is not None and (x.ndim == 0 or x.shape[-1] != last):
        raise ValueError(f"{name} must have last dimension {last}, got shape {tuple(x.shape)}")
    return x
