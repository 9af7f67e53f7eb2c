"""Checkpoints: model weights, optimizer states, the step, every RNG state and the history in one safetensors file,
so that a resumed :func:`~iclr26.train.fit` continues exactly where it stopped."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from iclr26.validate import as_bool, as_int, as_module

__all__ = ["save_checkpoint", "load_checkpoint", "Checkpoint"]


def _as_optimizers(optimizer: Any, name: str = "optimizer", empty_ok: bool = False) -> list[torch.optim.Optimizer]:
    opts = list(optimizer) if isinstance(optimizer, Sequence) and not isinstance(optimizer, str) else [optimizer]
    if (not opts and not empty_ok) or not all(isinstance(o, torch.optim.Optimizer) for o in opts):
        raise TypeError(f"{name} must be a torch.optim.Optimizer or a {'' if empty_ok else 'non-empty '}list of them")
    return opts


def _check_history(history: Any) -> list[dict]:
    if history is None:
        return []
    if not isinstance(history, list) or not all(isinstance(r, Mapping) for r in history):
        raise TypeError(f"history must be a list of dicts (one row per logged step) or None, got {history!r:.60}")
    return history


def _check_path(path: Any, name: str) -> Path:
    if not isinstance(path, (str, Path)):
        raise TypeError(f"{name} must be a str or Path (a file path), got {type(path).__name__}")
    return Path(path)


def _flatten_optimizer(opt: torch.optim.Optimizer, prefix: str) -> tuple[dict[str, torch.Tensor], dict]:
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for pid, state in sd["state"].items():
        for key, val in state.items():
            name = f"{prefix}.state.{pid}.{key}"
            if torch.is_tensor(val):
                tensors[name] = val.detach().cpu().contiguous().clone()
            else:
                scalars[name] = val
    try:
        json.dumps(sd["param_groups"])
        json.dumps(scalars)
    except TypeError as err:
        raise ValueError(f"optimizer state of {type(opt).__name__} is not JSON-serialisable: {err}") from err
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _unflatten_optimizer(opt: torch.optim.Optimizer, prefix: str, tensors: dict, meta: dict) -> None:
    state: dict[int, dict[str, Any]] = {}
    head = prefix + ".state."
    for name, val in list(tensors.items()) + list(meta["scalars"].items()):
        if name.startswith(head):
            pid, key = name[len(head) :].split(".", 1)
            state.setdefault(int(pid), {})[key] = val
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def save_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizers: Sequence[torch.optim.Optimizer] = (),
    step: int = 0,
    history: list[dict] | None = None,
) -> Path:
    """Save model weights, optimizer states, the step, RNG states and the history to one safetensors file."""
    from safetensors.torch import save_file

    path = _check_path(path, "path")
    as_module(model)
    optimizers = _as_optimizers(optimizers, "optimizers", empty_ok=True)
    step = as_int(step, "step", low=0)
    history = _check_history(history)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{k}": v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    opt_meta = []
    for j, opt in enumerate(optimizers):
        t, m = _flatten_optimizer(opt, f"optim{j}")
        tensors.update(t)
        opt_meta.append(m)
    tensors["rng.torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    np_state = np.random.get_state()
    tensors["rng.numpy"] = torch.from_numpy(np.asarray(np_state[1], dtype=np.int64))
    meta = {
        "step": str(step),
        "optimizers": json.dumps(opt_meta),
        "rng_numpy": json.dumps([np_state[0], int(np_state[2]), int(np_state[3]), float(np_state[4])]),
        "rng_python": json.dumps(random.getstate(), default=list),
        "history": json.dumps(history or []),
    }
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=meta)
    tmp.replace(path)
    return path


class Checkpoint(NamedTuple):
    """What :func:`load_checkpoint` returns: the step the checkpoint was saved at and the history up to it."""

    step: int
    history: list[dict]


def load_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizers: Sequence[torch.optim.Optimizer] = (),
    restore_rng: bool = True,
) -> Checkpoint:
    """Load what :func:`save_checkpoint` wrote into ``model`` and ``optimizers``; return ``Checkpoint(step, history)``
    (``step, history = load_checkpoint(...)`` unpacks it)."""
    from safetensors import safe_open

    path = _check_path(path, "path")
    as_module(model)
    optimizers = _as_optimizers(optimizers, "optimizers", empty_ok=True)
    restore_rng = as_bool(restore_rng, "restore_rng")
    if not path.is_file():
        raise ValueError(f"checkpoint path {str(path)!r} does not exist")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if "step" not in meta:
        raise ValueError(f"checkpoint {str(path)!r} was not written by iclr26.train.save_checkpoint")
    state = {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")}
    try:
        model.load_state_dict(state)
    except RuntimeError as e:  # missing or unexpected keys, or shapes that differ
        raise ValueError(f"model does not match the checkpoint {str(path)!r}: {e}") from None
    opt_meta = json.loads(meta["optimizers"])
    if len(opt_meta) != len(optimizers):
        raise ValueError(f"checkpoint holds {len(opt_meta)} optimizer state(s), got {len(optimizers)} optimizer(s)")
    for j, (opt, m) in enumerate(zip(optimizers, opt_meta)):
        _unflatten_optimizer(opt, f"optim{j}", tensors, m)
    if restore_rng:
        torch.set_rng_state(tensors["rng.torch"])
        cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda.")]
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda)
        name, pos, has_gauss, gauss = json.loads(meta["rng_numpy"])
        np.random.set_state((name, tensors["rng.numpy"].numpy().astype(np.uint32), pos, has_gauss, gauss))
        version, internal, gauss_next = json.loads(meta["rng_python"])
        random.setstate((version, tuple(internal), gauss_next))
    return Checkpoint(int(meta["step"]), json.loads(meta["history"]))
