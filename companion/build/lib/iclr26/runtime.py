"""Device choice, seeding, the per-scale size table, and a wall-clock timer.

Every chapter starts the same way::

    device = pick_device(device)          # "auto" -> cuda, else mps, else cpu
    seed_everything(seed)
    cfg = select_scale(SCALES, scale)     # the chapter's size knobs for "ci" | "book" | "paper"
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

SCALES = ("ci", "book", "paper")

__all__ = ["SCALES", "Config", "pick_device", "seed_everything", "select_scale", "scale_table", "Timer"]


def pick_device(device: str = "auto"):
    """Return a ``torch.device``: ``"auto"`` picks CUDA, else Apple MPS, else the CPU.

    Any explicit torch device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) is accepted;
    asking for CUDA or MPS where it is missing raises ``ValueError``.
    """
    import torch

    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a string such as 'auto', 'cpu' or 'cuda', got {type(device).__name__}")
    if isinstance(device, torch.device):
        device = str(device)
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda[:N]' or 'mps', got {device!r}") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} asked for CUDA, but no CUDA device is available")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"device={device!r} asked for MPS, but MPS is not available")
    return dev


def seed_everything(seed: int, deterministic: bool = True) -> int:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA).

    With ``deterministic=True`` torch is asked for deterministic algorithms where it has them
    (``warn_only``, so an op without a deterministic variant still runs). Returns the seed.
    """
    import torch

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    return seed


class Config(dict):
    """A dict whose keys also read as attributes: ``cfg.n_steps`` is ``cfg["n_steps"]``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"this scale's config has no knob {name!r}; knobs: {sorted(self)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def _check_table(table: Mapping[str, Mapping[str, Any]]) -> None:
    if not isinstance(table, Mapping):
        raise TypeError(f"table must be a mapping from scale name to a dict of knobs, got {type(table).__name__}")
    unknown = [k for k in table if k not in SCALES]
    if unknown:
        raise ValueError(f"table has unknown scale(s) {unknown}; expected keys among {SCALES}")
    missing = [k for k in SCALES if k not in table]
    if missing:
        raise ValueError(f"table lacks scale(s) {missing}; every chapter defines all of {SCALES}")
    keys = None
    for name, knobs in table.items():
        if not isinstance(knobs, Mapping):
            raise TypeError(f"table[{name!r}] must be a dict of knobs, got {type(knobs).__name__}")
        if keys is None:
            keys = set(knobs)
        elif set(knobs) != keys:
            raise ValueError(
                f"table[{name!r}] has knobs {sorted(knobs)} but another scale has {sorted(keys)}; "
                "every scale must set the same knobs"
            )


def select_scale(table: Mapping[str, Mapping[str, Any]], scale: str) -> Config:
    """Pick one scale's knobs from a chapter's size table.

    ``table`` maps each of ``"ci"``, ``"book"``, ``"paper"`` to a dict with the same keys.
    Returns a :class:`Config` (a dict with attribute access). An unknown scale raises ``ValueError``.
    """
    _check_table(table)
    if not isinstance(scale, str):
        raise TypeError(f"scale must be a string, one of {SCALES}, got {type(scale).__name__}")
    if scale not in table:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    return Config(table[scale])


def scale_table(table: Mapping[str, Mapping[str, Any]], scale: str | None = None):
    """The size table as a DataFrame (knobs as rows, scales as columns), the active scale marked with ▶."""
    import pandas as pd

    _check_table(table)
    if scale is not None and scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES} or None, got {scale!r}")
    frame = pd.DataFrame({s: {k: str(v) for k, v in table[s].items()} for s in SCALES})
    frame.index.name = "knob"
    if scale is not None:
        frame = frame.rename(columns={scale: f"▶ {scale}"})
    return frame


class Timer:
    """Wall-clock timer: ``with Timer() as t: ...``, then ``t.seconds``."""

    def __init__(self) -> None:
        self.start = None
        self.seconds = float("nan")

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start

    def __repr__(self) -> str:
        return f"Timer(seconds={self.seconds:.3f})"
