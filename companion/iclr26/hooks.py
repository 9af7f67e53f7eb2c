"""Named hook points: read (cache), patch, ablate or steer any intermediate of a model by its name.

A model marks each intermediate worth looking at with a :class:`HookPoint` (an identity module with a name) and
inherits :class:`HookedModule`, which gives it one API::

    model.hook_names                                          # every name, in the order a forward pass reaches them
    out, cache = model.run_with_cache(x, names=["blocks.0.mlp.pre"])   # cache[name]: a detached tensor
    with model.hooks({"blocks.0.mlp.post": lambda t, name: 0 * t}):    # patch / ablate / steer
        ablated = model(x)
    model.is_hooked("blocks.0.attn.pattern")                  # is anyone reading or patching it right now?
    _, cf = model.run_with_cache(x_counterfactual, names=["blocks.1.resid_post"])
    patched, cache = model.run_with_cache(x, patch=cf, positions=[-1])   # activation patching: the last position
                                                                          # of blocks.1.resid_post comes from cf

A hook function ``fn(tensor, name)`` returns ``None`` (keep the value: a read-only hook) or a tensor of the same shape
that replaces the value downstream. Models use :meth:`HookedModule.is_hooked` (or :attr:`HookPoint.active`) to skip
building an intermediate that nobody asked for (the transformer's attention takes a fused fast path then).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from iclr26.checks import check_int

__all__ = ["HookPoint", "HookFn", "HookedModule"]

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]


class HookPoint(nn.Module):
    """Identity with a name. Its owning :class:`HookedModule` sets ``fn`` (patch) and ``cache`` (record)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        if not name:
            raise ValueError("name must be a non-empty str")
        self.name = name
        self.fn: HookFn | None = None
        self.cache: dict[str, torch.Tensor] | None = None

    @property
    def active(self) -> bool:
        """True while a hook function, a cache or a torch forward (pre-)hook is attached: the value is wanted."""
        return self.fn is not None or self.cache is not None or bool(self._forward_hooks or self._forward_pre_hooks)

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


class HookedModule(nn.Module):
    """Base class of a model with named :class:`HookPoint` submodules (at any depth).

    Subclasses create their hook points in ``__init__`` and call them in ``forward``; everything else comes from
    here. :attr:`hook_names` lists the points in registration order; a subclass whose modules are registered in
    another order than the forward pass reaches them overrides :meth:`_hook_order`.
    """

    def _hook_map(self) -> dict[str, HookPoint]:
        """``{name: HookPoint}`` of every hook point below this module (found once, then kept)."""
        found = self.__dict__.get("_hook_points_found")
        if found is None:
            found = {}
            for path, m in self.named_modules():
                if isinstance(m, HookPoint):
                    if m.name in found:
                        raise ValueError(f"two hook points share the name {m.name!r} (the second at {path!r})")
                    found[m.name] = m
            self.__dict__["_hook_points_found"] = found
        return found

    def _hook_order(self) -> list[str]:
        """Hook names in forward order; the default is registration order."""
        return list(self._hook_map())

    @property
    def hook_names(self) -> list[str]:
        """Every hook name, in the order a forward pass reaches them."""
        return self._hook_order()

    def hook_point(self, name: str) -> HookPoint:
        """The :class:`HookPoint` called ``name``; ``ValueError`` listing the valid names if there is none."""
        return self._hook_map()[self._check_names([name], "name")[0]]

    def is_hooked(self, name: str) -> bool:
        """Whether a hook function, a cache (:meth:`run_with_cache`) or a torch hook wants hook ``name`` right now."""
        return self.hook_point(name).active

    def _check_names(self, names: Sequence[str] | Mapping[str, object], what: str) -> list[str]:
        names = list(names)
        points = self._hook_map()
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"{what}: hook names must be str, got {n!r} ({type(n).__name__})")
        unknown = [n for n in names if n not in points]
        if unknown:
            raise ValueError(f"{what}: unknown hook name(s) {unknown}; valid names are {self.hook_names}")
        return names

    @contextmanager
    def hooks(self, fns: Mapping[str, HookFn]) -> Iterator[HookedModule]:
        """Within the block, ``fns[name](tensor, name)`` runs at hook ``name``; a returned tensor replaces the value.

        Hooks nest: on exit each point gets back the function it had before.
        """
        if not isinstance(fns, Mapping):
            raise TypeError(f"fns must be a dict hook name -> fn(tensor, name), got {type(fns).__name__}")
        self._check_names(fns, "fns")
        for name, fn in fns.items():
            if not callable(fn):
                raise TypeError(f"fns[{name!r}] must be callable fn(tensor, name), got {type(fn).__name__}")
        points = self._hook_map()
        previous = {name: points[name].fn for name in fns}
        try:
            for name, fn in fns.items():
                points[name].fn = fn
            yield self
        finally:
            for name, fn in previous.items():
                points[name].fn = fn

    def hook_axes(self, name: str) -> tuple[int, int | None]:
        """``(position axis, head axis or None)`` of hook ``name``'s tensor, used by activation patching.

        The default is ``(1, None)``: (batch, seq, ...) without heads; models with per-head hook points override it.
        """
        self._check_names([name], "name")
        return 1, None

    def patch_hooks(
        self,
        patch: Mapping[str, torch.Tensor],
        positions: int | Sequence[int] | None = None,
        heads: int | Sequence[int] | None = None,
    ) -> dict[str, HookFn]:
        """Hook functions (for :meth:`hooks`) that replace values by another run's: activation patching.

        ``patch[name]`` is the source value of hook ``name`` (e.g. from a counterfactual run's
        :meth:`run_with_cache`), of the same shape as the value it replaces. ``positions`` (default: all) are the
        sequence positions taken from the source (negative indices count from the end); ``heads`` (default: all)
        the heads, for hook points with a head axis (:meth:`hook_axes`; e.g. the transformer's ``attn.head_out``).
        Everything else keeps the running pass's value.
        """
        if not isinstance(patch, Mapping):
            raise TypeError(f"patch must be a dict hook name -> source tensor, got {type(patch).__name__}")
        self._check_names(patch, "patch")
        pos = _index_list(positions, "positions")
        hd = _index_list(heads, "heads")
        fns: dict[str, HookFn] = {}
        for name, src in patch.items():
            if not isinstance(src, torch.Tensor):
                raise TypeError(f"patch[{name!r}] must be a tensor, got {type(src).__name__}")
            pos_axis, head_axis = self.hook_axes(name)
            if hd is not None and head_axis is None:
                raise ValueError(f"heads: hook {name!r} has no head axis; patch heads on a per-head hook point")
            fns[name] = _patch_fn(src, pos, pos_axis, hd, head_axis)
        return fns

    def run_with_cache(
        self,
        *args: Any,
        names: Sequence[str] | None = None,
        patch: Mapping[str, torch.Tensor] | None = None,
        positions: int | Sequence[int] | None = None,
        heads: int | Sequence[int] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, dict[str, torch.Tensor]]:
        """``self(*args, **kwargs)`` and ``{hook name: detached tensor}`` for ``names`` (default: every hook).

        ``patch`` (optional): activation patching during this pass, see :meth:`patch_hooks` (``positions`` and
        ``heads`` choose what is replaced). A patched hook's cache entry holds the patched value.
        """
        if patch is not None:
            with self.hooks(self.patch_hooks(patch, positions, heads)):
                return self.run_with_cache(*args, names=names, **kwargs)
        if positions is not None or heads is not None:
            raise ValueError("positions and heads choose what patch replaces; pass patch as well")
        if isinstance(names, str):
            raise TypeError("names must be a list of hook names, not a single string")
        if names is not None and not isinstance(names, (Sequence, set, frozenset)):
            raise TypeError(f"names must be a list of hook names or None, got {type(names).__name__}")
        wanted = self.hook_names if names is None else self._check_names(names, "names")
        points = self._hook_map()
        previous = {name: points[name].cache for name in wanted}
        cache: dict[str, torch.Tensor] = {}
        try:
            for name in wanted:
                points[name].cache = cache
            out = self(*args, **kwargs)
        finally:
            for name, old in previous.items():
                points[name].cache = old
        return out, cache


def _index_list(value: int | Sequence[int] | None, name: str) -> list[int] | None:
    """None, or ``value`` (an int or a non-empty sequence of ints) as a list of ints."""
    if value is None:
        return None
    items = [value] if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value
    if isinstance(items, (str, bytes)) or not isinstance(items, (Sequence, torch.Tensor)) or isinstance(items, bool):
        raise TypeError(f"{name} must be an int, a sequence of ints or None, got {type(value).__name__}")
    out = [
        check_int(i.item() if isinstance(i, torch.Tensor) and i.dim() == 0 else i, f"{name}[{j}]")
        for j, i in enumerate(items)
    ]
    if not out:
        raise ValueError(f"{name} must not be empty (None means all)")
    return out


def _patch_fn(
    src: torch.Tensor, pos: list[int] | None, pos_axis: int, heads: list[int] | None, head_axis: int | None
) -> HookFn:
    """A hook function that copies ``src`` at the chosen positions and heads into the running value."""

    def fn(x: torch.Tensor, name: str) -> torch.Tensor:
        if src.shape != x.shape:
            raise ValueError(f"patch[{name!r}] has shape {tuple(src.shape)}, the value it replaces {tuple(x.shape)}")
        mask = torch.ones((1,) * x.dim(), dtype=torch.bool, device=x.device)
        for axis, idx in ((pos_axis, pos), (head_axis, heads)):
            if idx is None:
                continue
            n = x.shape[axis]
            bad = [i for i in idx if not -n <= i < n]
            if bad:
                what = "positions" if axis == pos_axis else "heads"
                raise ValueError(f"{what} {bad} out of range for {name!r} (size {n} on axis {axis})")
            keep = torch.zeros(n, dtype=torch.bool, device=x.device)
            keep[torch.tensor(idx, device=x.device)] = True
            shape = [1] * x.dim()
            shape[axis] = n
            mask = mask & keep.view(shape)
        return torch.where(mask, src.to(device=x.device, dtype=x.dtype), x)

    return fn
