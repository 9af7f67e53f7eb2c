"""Flat gradients of chosen parameters, and adding a flat vector back to them.

Methods that learn *from* gradients (GRADIEND trains an autoencoder on them; influence and data-selection methods
compare them) need one vector per batch: the gradient of a loss with respect to a chosen set of a model's
parameters, flattened and concatenated in a fixed order. Methods that *write* a direction into a model need the
inverse: reshape a flat vector into those parameters and add it.

    names = param_names(model, ["blocks.1.mlp.*"])        # which weights (fnmatch patterns; None: all trainable)
    G = flat_grads(model, loss_fn, batches, names)         # (len(batches), n): one row per batch, via torch.func
    add_flat_(model, direction, names, scale=lr)           # W <- W + lr * direction, in place

``loss_fn(model, batch)`` returns a scalar tensor, the signature :func:`~iclr26.train.fit` uses. The order of the
flat vector is the order of ``names``; :func:`flat_params` gives the parameters themselves in that order.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from iclr26.validate import as_float, as_module, one_of

__all__ = ["param_names", "flat_params", "flat_grads", "add_flat_"]


def param_names(model: nn.Module, include: Sequence[str] | str | None = None) -> list[str]:
    """The names of ``model``'s trainable parameters (``requires_grad``), in ``named_parameters`` order, that match
    any of the ``fnmatch`` patterns in ``include`` (``None``: all of them). A pattern that matches nothing raises
    ``ValueError``, so a typo does not silently select fewer weights."""
    model = as_module(model, "model")
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    if include is None:
        if not trainable:
            raise ValueError("model has no trainable parameters")
        return trainable
    patterns = [include] if isinstance(include, str) else include
    if not isinstance(patterns, Sequence) or not patterns or not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"include must be None, a pattern or a non-empty sequence of patterns, got {include!r}")
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(n, pattern) for n in trainable):
            raise ValueError(f"include pattern {pattern!r} matches no trainable parameter of the model")
    return [n for n in trainable if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def _checked_names(model: nn.Module, names: Sequence[str] | None) -> tuple[list[str], dict[str, nn.Parameter]]:
    params = dict(model.named_parameters())
    if names is None:
        return param_names(model), params
    if isinstance(names, str) or not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"names must be None or a sequence of parameter names, got {names!r}")
    names = list(names)
    if not names:
        raise ValueError("names must name at least one parameter")
    if len(set(names)) != len(names):
        raise ValueError("names must not repeat a parameter")
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"names holds {missing[:3]} which are not parameters of the model")
    return names, params


def flat_params(model: nn.Module, names: Sequence[str] | None = None) -> torch.Tensor:
    """The parameters ``names`` (default: all trainable) of ``model``, detached, flattened and concatenated."""
    model = as_module(model, "model")
    names, params = _checked_names(model, names)
    return torch.cat([params[n].detach().reshape(-1) for n in names])


class _Loss(nn.Module):
    """``model`` and ``loss_fn`` as one module, so that ``torch.func.functional_call`` can swap the parameters."""

    def __init__(self, model: nn.Module, loss_fn: Callable[[nn.Module, Any], torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch: Any) -> torch.Tensor:
        loss = self.loss_fn(self.model, batch)
        if not torch.is_tensor(loss) or loss.ndim > 1 or loss.numel() == 0 or not loss.is_floating_point():
            raise ValueError(
                "loss_fn must return a scalar float tensor or a 1-D one of several losses, got "
                f"{type(loss).__name__} {getattr(loss, 'shape', '')}"
            )
        return loss


def flat_grads(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    batches: Sequence[Any],
    names: Sequence[str] | None = None,
    *,
    method: str = "func",
) -> torch.Tensor:
    """One flat gradient per batch: row ``i`` is d ``loss_fn(model, batches[i])`` / d (the parameters ``names``, in
    that order; default: all trainable), a ``(len(batches), n)`` float tensor on the parameters' device. A
    ``loss_fn`` that returns a 1-D tensor of ``k`` losses (e.g. the same forward pass scored against two targets)
    gives ``(len(batches), k, n)``: one forward pass per batch, ``k`` gradients.

    ``method="func"`` differentiates with ``torch.func.grad`` through ``functional_call`` (the model's own
    parameters are neither changed nor given ``.grad``); ``"autograd"`` runs ``torch.autograd.grad`` per batch,
    the reference the unit tests compare it with. The model's train/eval mode is left as it is (use ``eval()`` for
    gradients without dropout)."""
    model = as_module(model, "model")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable as loss_fn(model, batch), got {type(loss_fn).__name__}")
    if isinstance(batches, (str, bytes)) or not isinstance(batches, Sequence):
        raise TypeError(f"batches must be a sequence (list or tuple) of batches, got {type(batches).__name__}")
    if len(batches) == 0:
        raise ValueError("batches must hold at least one batch")
    method = one_of(method, "method", ("func", "autograd"))
    names, params = _checked_names(model, names)
    wrapped = _Loss(model, loss_fn)
    rows, shapes = [], set()
    if method == "func":
        base = {"model." + n: params[n].detach() for n in names}

        def loss_of(p: dict[str, torch.Tensor], batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
            loss = torch.func.functional_call(wrapped, p, (batch,))
            return loss, loss.detach()

        for batch in batches:
            g, value = torch.func.jacrev(loss_of, has_aux=True)(base, batch)
            shapes.add(tuple(value.shape))
            k = value.numel()
            rows.append(torch.cat([g["model." + n].reshape(k, -1) for n in names], 1).reshape(*value.shape, -1))
    else:
        chosen = [params[n] for n in names]
        for batch in batches:
            loss = wrapped(batch)
            shapes.add(tuple(loss.shape))
            parts = []
            for i, li in enumerate(loss.reshape(-1)):
                g = torch.autograd.grad(li, chosen, allow_unused=True, retain_graph=i < loss.numel() - 1)
                parts.append(
                    torch.cat([(torch.zeros_like(p) if gi is None else gi).reshape(-1) for p, gi in zip(chosen, g)])
                )
            rows.append(torch.stack(parts).reshape(*loss.shape, -1))
    if len(shapes) > 1:
        raise ValueError(f"loss_fn must return the same number of losses for every batch, got shapes {sorted(shapes)}")
    return torch.stack(rows).detach()


@torch.no_grad()
def add_flat_(
    model: nn.Module, vec: torch.Tensor, names: Sequence[str] | None = None, *, scale: float = 1.0
) -> nn.Module:
    """In place: each parameter in ``names`` (default: all trainable) += ``scale`` × its slice of the flat ``vec``
    (the layout of :func:`flat_params` and :func:`flat_grads`). Returns ``model``. ``scale=0`` leaves it unchanged."""
    model = as_module(model, "model")
    names, params = _checked_names(model, names)
    if not torch.is_tensor(vec) or vec.ndim != 1 or not vec.is_floating_point():
        raise TypeError(f"vec must be a 1-D float tensor, got {type(vec).__name__} {getattr(vec, 'shape', '')}")
    n = sum(params[k].numel() for k in names)
    if vec.numel() != n:
        raise ValueError(f"vec has {vec.numel()} entries, the parameters in names have {n}")
    if not torch.isfinite(vec).all():
        raise ValueError("vec must be finite")
    scale = as_float(scale, "scale")
    at = 0
    for k in names:
        p = params[k]
        p.add_(vec[at : at + p.numel()].reshape(p.shape).to(p.device, p.dtype), alpha=scale)
        at += p.numel()
    return model
