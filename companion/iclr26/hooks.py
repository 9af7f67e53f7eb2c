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
that replaces the value downstream.

The same verbs work on any torch model, ours or a transformers one, through one vocabulary of *sites* named by a
string — a hook point of a :class:`HookedModule`, or else a submodule of ``model.named_modules()`` (its output's hidden
state): :func:`capture` records values, :func:`steer` adds a vector, :func:`patch` copies another run's values in
(activation patching), :func:`steer_layers` steers a set of layers at once; :func:`forward_hooks` and
:func:`forward_pre_hooks` register raw forward hooks and keyword pre-hooks on submodules (token surgery: drop, insert or
re-position tokens before a block sees them) and :func:`block_names` lists a model's blocks::

    with capture(lm, ["model.layers.3"]) as acts:             # a transformers LLaMA
        lm(ids)
    with steer(model, "blocks.1.resid_post", v, scale=4.0):     # one of our models
        steered = model(x)
    with patch(model, {"blocks.1.resid_post": cf_acts}, positions=[-1]):
        patched = model(x)
    with capture(gpt2, "transformer.h.0.ln_2", read="input") as acts:   # what enters a submodule
        gpt2(ids)

Models use :meth:`HookedModule.is_hooked` (or :attr:`HookPoint.active`) to skip
building an intermediate that nobody asked for (the transformer's attention takes a fused fast path then).
"""

from __future__ import annotations

import contextlib
import difflib
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from iclr26.validate import as_bool, as_float, as_int, as_module, float_tensor, one_of

__all__ = [
    "HookPoint",
    "HookFn",
    "HookedModule",
    "capture",
    "steer",
    "steer_layers",
    "patch",
    "forward_hooks",
    "forward_pre_hooks",
    "block_names",
]

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
        as_int(i.item() if isinstance(i, torch.Tensor) and i.dim() == 0 else i, f"{name}[{j}]")
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


# ------------------------------------------------------------------------------------------------ one vocabulary
# capture / steer / patch take a *site* by name: a hook point of a HookedModule (our models: "blocks.0.resid_post"), or
# else a named submodule of any torch model (transformers: "model.layers.3"), whose output's hidden state is the value.


def _submodule(model: nn.Module, name: Any, what: str) -> nn.Module:
    """``model.get_submodule(name)``, or a ``ValueError`` listing close matches among ``model.named_modules()``."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a submodule name (str), got {type(name).__name__}")
    try:
        return model.get_submodule(name)
    except AttributeError:
        names = [n for n, _ in model.named_modules() if n]
        close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
        hint = (
            f"close matches: {', '.join(map(repr, close))}"
            if close
            else f"its top-level submodules: {', '.join(repr(n) for n, _ in model.named_children())}"
        )
        raise ValueError(f"{what} {name!r} is not a submodule of {type(model).__name__}; {hint}") from None


def _site(model: nn.Module, name: Any, what: str) -> tuple[str, Any]:
    """``("point", HookPoint)`` when ``model`` is a :class:`HookedModule` with a hook point ``name``, else
    ``("module", submodule)``; a ``ValueError`` naming ``what`` and close matches when it is neither."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a hook point or submodule name (str), got {type(name).__name__}")
    if isinstance(model, HookedModule):
        points = model._hook_map()
        if name in points:
            return "point", points[name]
        try:
            return "module", model.get_submodule(name)
        except AttributeError:
            close = difflib.get_close_matches(name, list(points) + [n for n, _ in model.named_modules() if n], 5, 0.6)
            hint = f"close matches: {', '.join(map(repr, close))}" if close else f"its hook points: {model.hook_names}"
            raise ValueError(
                f"{what} {name!r} is neither a hook point nor a submodule of {type(model).__name__}; {hint}"
            ) from None
    return "module", _submodule(model, name, what)


@contextmanager
def _registered(model: nn.Module, hooks: Any, prepend: Any, *, pre: bool) -> Iterator[None]:
    """Check ``model``, ``hooks`` ({submodule name: fn}) and ``prepend``, then hold each fn registered on its submodule
    (a keyword pre-hook when ``pre``, else a forward hook) until the block exits."""
    as_module(model)
    prepend = as_bool(prepend, "prepend")
    if not isinstance(hooks, Mapping):
        raise TypeError(f"hooks must be a mapping {{submodule name: fn}}, got {type(hooks).__name__}")
    signature = "fn(module, args, kwargs)" if pre else "fn(module, inputs, output)"
    targets = []
    for name, fn in hooks.items():
        module = _submodule(model, name, "hooks key")
        if not callable(fn):
            raise TypeError(f"hooks[{name!r}] must be callable as {signature}, got {type(fn).__name__}")
        targets.append((module, fn))
    handles = []
    try:
        for module, fn in targets:
            if pre:
                handles.append(module.register_forward_pre_hook(fn, with_kwargs=True, prepend=prepend))
            else:
                handles.append(module.register_forward_hook(fn, prepend=prepend))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def forward_hooks(
    model: nn.Module, hooks: Mapping[str, Callable[..., Any]], *, prepend: bool = True
) -> Iterator[nn.Module]:
    """Register forward hooks on named submodules for the length of a ``with`` block; yields ``model``.

    ``hooks``: ``{submodule name: fn}``, names as in ``model.named_modules()`` (``""`` is the model itself).
    ``fn(module, inputs, output)`` is called after the submodule's forward; returning something other than ``None``
    replaces its output (patching, steering, ablating, dropping tokens), as ``register_forward_hook`` does. Every
    name is checked before any hook is registered; unknown names raise ``ValueError`` listing close matches. The
    hooks are removed on exit, even when the block raises.

    ``prepend`` (default): the hooks run before those already on the submodule — among them the hooks transformers
    installs to record ``output_hidden_states``, which then report the replaced output. (So, nested on one
    submodule, the inner block's hooks run first.) ``prepend=False`` runs them after, as :func:`capture` does.

    >>> with forward_hooks(model, {"transformer.h.3": lambda m, i, out: out * 0}):  # zero-ablate block 3
    ...     logits = model(ids).logits
    """
    with _registered(model, hooks, prepend, pre=False):
        yield model


@contextmanager
def forward_pre_hooks(
    model: nn.Module, hooks: Mapping[str, Callable[..., Any]], *, prepend: bool = True
) -> Iterator[nn.Module]:
    """Register keyword forward pre-hooks on named submodules for the length of a ``with`` block; yields ``model``.

    ``hooks``: ``{submodule name: fn}``. ``fn(module, args, kwargs)`` is called before the submodule's forward with
    its positional and keyword arguments (transformers passes most of a decoder layer's inputs by keyword:
    ``hidden_states``, ``attention_mask``, ``position_ids``, ``position_embeddings``; the base model gets
    ``inputs_embeds``); returning an ``(args, kwargs)`` pair replaces them, ``None`` keeps them, as torch's
    ``register_forward_pre_hook(..., with_kwargs=True)`` does. That is the place for token surgery: read a multimodal
    model's merged embeddings, or drop, insert or re-position tokens before a layer sees them. A hook may raise to
    stop the forward pass once it has what it needs. Names are checked before any hook is registered; unknown names
    raise ``ValueError`` listing close matches; the hooks are removed on exit, even when the block raises.
    ``prepend`` (default): these run before pre-hooks already on the submodule.

    >>> def merged(module, args, kwargs):             # what a transformers LLaVA's language model receives
    ...     seen["embeds"] = kwargs["inputs_embeds"]
    >>> with forward_pre_hooks(llava, {"model.language_model": merged}):
    ...     llava(**inputs)
    """
    with _registered(model, hooks, prepend, pre=True):
        yield model


def _main_input(args: tuple, kwargs: dict, name: str) -> torch.Tensor:
    """The hidden state a submodule receives: its first positional argument, or else the keyword ``hidden_states``
    (transformers' decoder layers), ``inputs_embeds`` or ``input``."""
    if args and torch.is_tensor(args[0]):
        return args[0]
    for key in ("hidden_states", "inputs_embeds", "input"):
        if torch.is_tensor(kwargs.get(key)):
            return kwargs[key]
    raise TypeError(
        f"submodule {name!r} receives no tensor as its first argument nor as hidden_states / inputs_embeds / input "
        f"(write the hook with forward_pre_hooks)"
    )


def _main_output(output: Any, name: str) -> torch.Tensor:
    """The hidden state in a submodule's output: the tensor itself, or the first entry of a tuple, list or
    ``ModelOutput``."""
    if torch.is_tensor(output):
        return output
    if hasattr(output, "to_tuple"):  # a transformers ModelOutput
        output = output.to_tuple()
    if isinstance(output, (tuple, list)) and output and torch.is_tensor(output[0]):
        return output[0]
    raise TypeError(f"submodule {name!r} returns {type(output).__name__}, not a tensor or a tuple starting with one")


def _with_main_output(output: Any, new: torch.Tensor, name: str) -> Any:
    if torch.is_tensor(output):
        return new
    if isinstance(output, (tuple, list)) and output and torch.is_tensor(output[0]):
        return type(output)([new, *output[1:]]) if isinstance(output, list) else (new, *output[1:])
    raise TypeError(
        f"submodule {name!r} returns {type(output).__name__}; steer needs a tensor or a tuple starting "
        f"with one (write the hook with forward_hooks)"
    )


def _names(names: Any) -> list[str]:
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, Iterable):
        raise TypeError(f"names must be a submodule name or a list of them, got {type(names).__name__}")
    names = list(names)
    if not names:
        raise ValueError("names must hold at least one submodule name")
    if len(set(names)) != len(names):
        raise ValueError(f"names must not repeat a name, got {names}")
    return names


@contextmanager
def capture(
    model: nn.Module, names: str | Iterable[str], detach: bool = True, *, read: str = "output"
) -> Iterator[dict[str, torch.Tensor]]:
    """Record values by name: yields a dict ``{name: tensor}`` that every forward pass overwrites.

    A name is a hook point of a :class:`HookedModule` (the value as it leaves the point, after any hook function
    there) or a submodule of any torch model (the output's hidden state: the first entry of a tuple output, as it
    leaves the submodule, after every replacement: an enclosing or enclosed :func:`steer` shows). Detached unless
    ``detach=False``. ``read="input"`` records what *enters* each site instead: a submodule's first positional
    argument or its ``hidden_states`` / ``inputs_embeds`` keyword (e.g. GPT-2's ``"transformer.h.0.ln_2"``: the
    residual stream before the norm), a hook point's value before its hook function. For many batches, read (or
    ``.cpu()``) the dict after each forward pass::

        with capture(model, ["model.layers.3"]) as acts:
            for ids in batches:
                model(ids)
                feats.append(acts["model.layers.3"][:, -1].cpu())
    """
    as_module(model)
    names = _names(names)
    sites = {name: _site(model, name, "names") for name in names}
    detach = as_bool(detach, "detach")
    read = one_of(read, "read", ("output", "input"))
    store: dict[str, torch.Tensor] = {}

    def keep(name: str, value: torch.Tensor) -> None:
        store[name] = value.detach() if detach else value

    def recorder(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            keep(name, _main_output(output, name))

        return hook

    def entry_recorder(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
            keep(name, _main_input(args, kwargs, name))

        return hook

    handles = []
    try:
        # a hook point and a submodule register alike, after the hooks already there (as steer's show); a pre-hook
        # sees the value as it arrives, before a hook point's own hook function
        for name, (_, site) in sites.items():
            if read == "output":
                handles.append(site.register_forward_hook(recorder(name)))
            else:
                handles.append(site.register_forward_pre_hook(entry_recorder(name), with_kwargs=True))
        yield store
    finally:
        for handle in handles:
            handle.remove()


def _add(value: torch.Tensor, vector: torch.Tensor, scale: float, name: str) -> torch.Tensor:
    """``value + scale * vector``, checked: the last dimensions match and the shape does not change."""
    if value.shape[-1] != vector.shape[-1]:
        raise ValueError(f"vector has width {vector.shape[-1]} but {name!r} has width {value.shape[-1]}")
    try:
        new = value + scale * vector.to(device=value.device, dtype=value.dtype)
    except RuntimeError as e:
        raise ValueError(
            f"vector of shape {tuple(vector.shape)} does not broadcast against {name!r}, shape {tuple(value.shape)}"
        ) from e
    if new.shape != value.shape:
        raise ValueError(
            f"vector of shape {tuple(vector.shape)} would change the shape of {name!r} "
            f"from {tuple(value.shape)} to {tuple(new.shape)}"
        )
    return new


@contextmanager
def _point_fn(point: HookPoint, fn: HookFn) -> Iterator[None]:
    """Run ``fn`` at ``point`` after the hook function already there (if any), for the length of a ``with`` block."""
    previous = point.fn

    def chained(x: torch.Tensor, name: str) -> torch.Tensor | None:
        if previous is not None:
            out = previous(x, name)
            x = x if out is None else out
        return fn(x, name)

    point.fn = chained
    try:
        yield
    finally:
        point.fn = previous


@contextmanager
def steer(model: nn.Module, name: str, vector: torch.Tensor, scale: float = 1.0) -> Iterator[nn.Module]:
    """Add ``scale * vector`` to the value at ``name`` (a hook point, or a submodule's output hidden state) for the
    length of a ``with`` block; yields ``model``.

    ``vector``: a float tensor whose last dimension is the value's width; ``(d,)`` steers every position, and any
    shape that broadcasts against the value (``(T, d)``: one vector per position) works too. It is moved to the
    value's device and dtype. Works during ``generate`` as well (each step's output is steered). Steering a hook point
    adds to whatever the hook function already there returns.
    """
    as_module(model)
    kind, site = _site(model, name, "name")
    vector = float_tensor(vector, "vector")
    if vector.ndim == 0:
        raise ValueError("vector must have at least one dimension (its last is the value's width), got a scalar")
    scale = as_float(scale, "scale")
    if kind == "point":
        with _point_fn(site, lambda x, n: _add(x, vector, scale, n)):
            yield model
        return

    def hook(module: nn.Module, inputs: Any, output: Any) -> Any:
        return _with_main_output(output, _add(_main_output(output, name), vector, scale, name), name)

    with forward_hooks(model, {name: hook}):
        yield model


@contextmanager
def steer_layers(
    model: nn.Module,
    vectors: Mapping[str, torch.Tensor],
    scale: float = 1.0,
    positions: int | Sequence[int] | None = None,
) -> Iterator[nn.Module]:
    """:func:`steer` at a set of sites at once: ``vectors`` maps each name (a hook point, or a submodule whose output
    hidden state is steered — ``"blocks.1.resid_post"`` or ``"model.layers.3"``) to its own vector, and every site
    gets ``scale * vectors[name]`` for the length of a ``with`` block; yields ``model``.

    This is steering over a layer set, ``h_l <- h_l + scale * v_l`` for every ``l`` in it (one vector per layer, as
    a per-layer mean difference gives). ``positions`` (default: all) are the sequence positions (axis 1 of the
    value) that are steered, e.g. ``range(prompt_len)`` to steer a prompt and not the tokens sampled after it;
    positions beyond a pass's sequence length are skipped. They index axis 1 of the value as the pass computes it:
    a pass that computes fewer positions (a key-value cache in ``generate``, ``TinyTransformer``'s
    ``last_only=True``, which :func:`~iclr26.models.sample` asks for) counts them within that pass, so steer a prompt
    with full passes (``sample(lambda t: model(t), ...)``). Every name and vector is checked before any hook is
    registered; the hooks are removed on exit, even when the block raises.
    """
    as_module(model)
    if not isinstance(vectors, Mapping) or not vectors:
        raise TypeError(f"vectors must be a non-empty dict name -> vector, got {vectors!r:.60}")
    sites, vecs = {}, {}
    for name, vector in vectors.items():
        sites[name] = _site(model, name, "vectors key")
        vecs[name] = float_tensor(vector, f"vectors[{name!r}]")
        if vecs[name].ndim != 1:
            raise ValueError(f"vectors[{name!r}] must be one vector (d,), got shape {tuple(vecs[name].shape)}")
    scale = as_float(scale, "scale")
    if isinstance(positions, range):
        positions = list(positions)
    pos = _index_list(positions, "positions")
    if pos is not None and any(i < 0 for i in pos):
        raise ValueError(f"positions must be ≥ 0 (counted from the start), got {pos}")

    def add(vector: torch.Tensor) -> Callable[[torch.Tensor, str], torch.Tensor]:
        def fn(x: torch.Tensor, name: str) -> torch.Tensor:
            if pos is None:
                return _add(x, vector, scale, name)
            if x.dim() < 3:
                raise ValueError(f"positions: {name!r} has shape {tuple(x.shape)}, no sequence axis 1 to index")
            keep = torch.zeros(x.shape[1], dtype=x.dtype, device=x.device)
            idx = [i for i in pos if i < x.shape[1]]
            keep[idx] = 1
            return _add(x, keep[:, None] * vector.to(device=x.device, dtype=x.dtype), scale, name)

        return fn

    with contextlib.ExitStack() as stack:
        for name, (kind, site) in sites.items():
            fn = add(vecs[name])
            if kind == "point":
                stack.enter_context(_point_fn(site, fn))
            else:
                hook = (lambda f, n: lambda m, i, out: _with_main_output(out, f(_main_output(out, n), n), n))(fn, name)
                stack.enter_context(forward_hooks(model, {name: hook}))
        yield model


@contextmanager
def patch(
    model: nn.Module,
    sources: Mapping[str, torch.Tensor],
    positions: int | Sequence[int] | None = None,
    heads: int | Sequence[int] | None = None,
) -> Iterator[nn.Module]:
    """Activation patching for the length of a ``with`` block: the value at each name of ``sources`` (a hook point,
    or a submodule's output hidden state) is replaced by ``sources[name]`` (e.g. from a counterfactual run's
    :func:`capture`), at ``positions`` (sequence positions, axis 1; default all; negative counts from the end) and,
    on a per-head hook point, ``heads`` (default all). Everything else keeps the running pass's value; yields
    ``model``. On a :class:`HookedModule` this is :meth:`HookedModule.patch_hooks`."""
    as_module(model)
    if not isinstance(sources, Mapping) or not sources:
        raise TypeError(f"sources must be a non-empty dict name -> source tensor, got {sources!r:.60}")
    sites = {name: _site(model, name, "sources key") for name in sources}
    for name, src in sources.items():
        if not isinstance(src, torch.Tensor):
            raise TypeError(f"sources[{name!r}] must be a tensor, got {type(src).__name__}")
    pos = _index_list(positions, "positions")
    hd = _index_list(heads, "heads")
    points = {n: sources[n] for n, (kind, _) in sites.items() if kind == "point"}
    modules = {n: sources[n] for n, (kind, _) in sites.items() if kind == "module"}
    if hd is not None and modules:
        raise ValueError(f"heads: only a per-head hook point has heads, not the submodule(s) {sorted(modules)}")
    fns = model.patch_hooks(points, positions, heads) if points else {}

    def module_hook(name: str) -> Callable[..., Any]:
        fn = _patch_fn(modules[name], pos, 1, None, None)
        return lambda module, inputs, output: _with_main_output(output, fn(_main_output(output, name), name), name)

    with contextlib.ExitStack() as stack:
        for name, fn in fns.items():
            stack.enter_context(_point_fn(sites[name][1], fn))
        stack.enter_context(forward_hooks(model, {name: module_hook(name) for name in modules}))
        yield model


def block_names(model: nn.Module, within: str = "") -> list[str]:
    """The names of a model's blocks: the entries of the shallowest ``nn.ModuleList`` (the longest among equally deep
    ones) under submodule ``within`` — ``["transformer.h.0", …]`` for GPT-2, ``["model.layers.0", …]`` for LLaMA,
    ``["encoder.layer.0", …]`` for ViT/DINOv2. In a vision-language model, pick the tower with ``within``."""
    as_module(model)
    root = _submodule(model, within, "within")
    lists = [(n, m) for n, m in root.named_modules() if isinstance(m, nn.ModuleList) and len(m) > 0]
    if not lists:
        raise ValueError(f"{type(root).__name__} (within={within!r}) holds no nn.ModuleList of blocks")
    sub, blocks = min(lists, key=lambda nm: (nm[0].count("."), -len(nm[1])))
    prefix = ".".join(p for p in (within, sub) if p)
    return [f"{prefix}.{i}" for i in range(len(blocks))]
