"""Device choice, seeding, the per-scale size table, and a wall-clock timer.

Every chapter starts the same way, in one call::

    cfg, device = setup(SCALES, scale, seed=seed, device=device)

which applies the book's figure style, picks the device (``"auto"`` -> cuda, else mps, else cpu), seeds every
generator, optionally caps torch's threads, selects the scale's knobs (``cfg``) and shows the size table in a notebook.
Its parts stay public: :func:`pick_device`, :func:`seed_everything`, :func:`select_scale`, :func:`scale_table`.
:func:`pip_install` installs a missing package into the running interpreter (on Colab).
"""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from iclr26.plot import use_style
from iclr26.validate import as_bool, as_device, as_int, one_of

SCALES = ("ci", "book", "paper")

__all__ = [
    "SCALES",
    "Config",
    "Setup",
    "setup",
    "pick_device",
    "seed_everything",
    "select_scale",
    "scale_table",
    "Timer",
    "pip_install",
]


def pick_device(device: str = "auto"):
    """Return a ``torch.device``: ``"auto"`` picks CUDA (``cuda:LOCAL_RANK`` under ``torchrun``), else Apple MPS,
    else the CPU.

    Any explicit torch device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) is accepted;
    asking for CUDA or MPS where it is missing raises ``ValueError``.
    """
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            local_rank = os.environ.get("LOCAL_RANK")  # under torchrun: one GPU per process
            return torch.device("cuda", int(local_rank)) if local_rank is not None else torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    dev = as_device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(dev)!r} asked for CUDA, but no CUDA device is available")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"device={str(dev)!r} asked for MPS, but MPS is not available")
    return dev


def seed_everything(seed: int, deterministic: bool = True) -> int:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA).

    With ``deterministic=True`` torch is asked for deterministic algorithms where it has them
    (``warn_only``, so an op without a deterministic variant still runs). Returns the seed.
    """
    import torch

    seed = as_int(seed, "seed", 0, 2**32 - 1)
    deterministic = as_bool(deterministic, "deterministic")
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


def _check_table(table: Mapping[str, Mapping[str, Any]], what: str = "table") -> None:
    if not isinstance(table, Mapping):
        raise TypeError(f"{what} must be a mapping from scale name to a dict of knobs, got {type(table).__name__}")
    unknown = [k for k in table if k not in SCALES]
    if unknown:
        raise ValueError(f"{what} has unknown scale(s) {unknown}; expected keys among {SCALES}")
    missing = [k for k in SCALES if k not in table]
    if missing:
        raise ValueError(f"{what} lacks scale(s) {missing}; every chapter defines all of {SCALES}")
    keys = None
    for name, knobs in table.items():
        if not isinstance(knobs, Mapping):
            raise TypeError(f"{what}[{name!r}] must be a dict of knobs, got {type(knobs).__name__}")
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
    return Config(table[one_of(scale, "scale", SCALES)])


def scale_table(table: Mapping[str, Mapping[str, Any]], scale: str | None = None):
    """The size table as a DataFrame (knobs as rows, scales as columns), the active scale marked with ▶."""
    import pandas as pd

    _check_table(table)
    if scale is not None:
        one_of(scale, "scale", SCALES)
    frame = pd.DataFrame({s: {k: str(v) for k, v in table[s].items()} for s in SCALES})
    frame.index.name = "knob"
    if scale is not None:
        frame = frame.rename(columns={scale: f"▶ {scale}"})
    return frame


class Setup(NamedTuple):
    """What :func:`setup` returns: the active scale's knobs and the device to run on."""

    cfg: Config
    device: Any  # torch.device (torch is imported lazily)


def _show(obj: Any) -> None:
    """Display ``obj`` as a cell output inside an IPython kernel; do nothing elsewhere (scripts, tests)."""
    import sys

    ipython = sys.modules.get("IPython")
    if ipython is None or ipython.get_ipython() is None:
        return
    from IPython.display import display

    display(obj)


def setup(
    scales: Mapping[str, Mapping[str, Any]],
    scale: str,
    *,
    seed: int = 0,
    device: str = "auto",
    threads: int | None = None,
    style: bool = True,
    show: bool = True,
) -> Setup:
    """A chapter's setup in one call; returns ``Setup(cfg, device)``, so ``cfg, device = setup(SCALES, scale, ...)``.

    In this order (the order the chapters always used, so seeded numbers do not move):

    1. ``style=True``: the book's figure style (:func:`iclr26.plot.use_style`);
    2. ``device``: :func:`pick_device` (``"auto"`` -> CUDA, else MPS, else the CPU);
    3. ``seed``: :func:`seed_everything` (Python, NumPy's global generator, torch, deterministic algorithms);
    4. ``threads``: if given, caps torch's intra-op threads at that many
       (``torch.set_num_threads(min(threads, torch.get_num_threads()))``; never raises the count);
    5. ``cfg = select_scale(scales, scale)``; with ``show=True`` the size table (:func:`scale_table`, the active scale
       marked) is displayed as a cell output when running inside IPython/Jupyter, and nothing is printed elsewhere.

    Every argument is checked before anything changes: a bad table, scale, seed, device or thread count raises
    ``TypeError``/``ValueError`` and leaves the style, the seeds and the threads as they were.
    """
    _check_table(scales, "scales")
    cfg = select_scale(scales, scale)
    style = as_bool(style, "style")
    show = as_bool(show, "show")
    if threads is not None:
        threads = as_int(threads, "threads", low=1)
    as_int(seed, "seed", 0, 2**32 - 1)
    dev = pick_device(device)
    if style:
        use_style()
    seed_everything(seed)
    if threads is not None:
        import torch

        torch.set_num_threads(min(threads, torch.get_num_threads()))
    if show:
        _show(scale_table(scales, scale))
    return Setup(cfg, dev)


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


def pip_install(requirements: list[str], *, no_deps: bool = False, quiet: bool = True) -> bool:
    """``python -m pip install [-q] [--no-deps] *requirements`` with the running interpreter; return whether it
    succeeded. A failure (no network, no pip, no interpreter at ``sys.executable``) warns with pip's last line
    instead of raising, so the caller can say what to run by hand."""
    if isinstance(requirements, str) or not all(isinstance(r, str) and r for r in requirements) or not requirements:
        raise TypeError(f"requirements must be a non-empty list of requirement strings, got {requirements!r}")
    no_deps, quiet = as_bool(no_deps, "no_deps"), as_bool(quiet, "quiet")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        *(["-q"] if quiet else []),
        *(["--no-deps"] if no_deps else []),
        *requirements,
    ]
    try:
        done = subprocess.run(cmd, capture_output=quiet, text=True)
    except OSError as err:  # no interpreter at sys.executable (embedded Python): pip cannot run
        done = subprocess.CompletedProcess(cmd, returncode=-1, stderr=str(err))
    if done.returncode != 0:
        detail = (done.stderr or "").strip().splitlines()[-1:] if quiet else []
        warnings.warn(
            f"could not install {' '.join(requirements)}: `{' '.join(cmd)}` exited with {done.returncode}"
            + (f" ({detail[0]})" if detail else ""),
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    importlib.invalidate_caches()  # let importlib.util.find_spec see what was installed a moment ago
    return True
