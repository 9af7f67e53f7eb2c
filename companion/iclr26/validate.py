"""Argument validation shared by every companion module, one rule per mistake (as scikit-learn's ``check_scalar`` does).

Each function returns the value, converted where that is safe (``steps = as_int(steps, "steps", low=1)``). The names
say what comes back (``as_int``, ``as_float``, ``as_prob``, ``as_bool``, ``as_device``, ``as_module``, ``one_of``,
``float_tensor``, ``token_tensor``, ``as_generator``, ``torch_generator``, ``json_value``), so that ``check_*`` in the
book means one thing only: a recorded sanity check (:mod:`iclr26.book.claims`).


* a value of the wrong **type** raises ``TypeError`` (a float where an int belongs, a string where a number belongs);
* a value of the right type but out of range or not among the choices raises ``ValueError``;
* every message names the argument: ``"k must be an int >= 1, got 0"``.

Integers accept any ``numbers.Integral`` (``np.int64`` from a NumPy grid is an int) but never ``bool``; reals accept any
``numbers.Real`` but never ``bool`` and never NaN. Randomness follows one convention: a ``seed`` argument is an int or a
``np.random.Generator`` (:func:`as_generator`), and torch generators are derived from it (:func:`torch_generator`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported where a function needs it, so `import iclr26` stays light
    import torch

__all__ = [
    "as_int",
    "as_float",
    "as_prob",
    "as_bool",
    "one_of",
    "as_device",
    "as_module",
    "float_tensor",
    "token_tensor",
    "json_value",
    "as_generator",
    "torch_generator",
]


def _range_text(kind: str, low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"{kind} in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{kind} {'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{kind} {'<' if high_open else '<='} {high}"
    return kind


def _bound(value: Any, what: str) -> None:
    """A bound a module passes to a check: None or a number that is not NaN (a NaN bound would accept anything)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value)):
        raise ValueError(f"the {what} bound of a check must be None or a number, got {value!r}")


def as_int(value: Any, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int, if it is an integer (not a bool) in ``[low, high]``; else raise naming ``name``."""
    _bound(low, "low")
    _bound(high, "high")
    want = _range_text("an int", low, high, False, False)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {want}, got {value!r} ({type(value).__name__})")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be {want}, got {value}")
    return value


def as_float(
    value: Any,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """``value`` as a float, if it is a finite real number (not a bool) within the bounds; else raise naming ``name``.

    ``low_open`` / ``high_open`` make a bound strict: ``as_float(lr, "lr", 0, low_open=True)`` asks for ``lr > 0``.
    ``allow_inf`` lets ±inf through (still subject to the bounds); NaN is always refused.
    """
    _bound(low, "low")
    _bound(high, "high")
    want = _range_text("a number", low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {want}, got {value!r} ({type(value).__name__})")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be a finite {want.removeprefix('a ')}, got {value}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {want}, got {value}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"{name} must be {want}, got {value}")
    return value


def as_prob(value: Any, name: str) -> float:
    """A probability in ``[0, 1]``."""
    return as_float(value, name, 0.0, 1.0)


def as_bool(value: Any, name: str) -> bool:
    """A ``bool`` (``np.bool_`` too); ``0``/``1`` and strings are refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return bool(value)


def one_of(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices``; else ``ValueError`` listing them.

    Equality is not enough: ``1`` and ``0`` do not stand for ``True`` and ``False`` (nor ``1.0`` for ``1``); a choice
    matches a value of its own type (``np.bool_`` counts as a bool, a NumPy integer as an int)."""
    if isinstance(choices, (str, bytes)) or not isinstance(choices, Iterable):
        raise TypeError(f"choices (for {name}) must be an iterable of allowed values, got {type(choices).__name__}")
    choices = tuple(choices)

    def kind(v: Any) -> type:
        for k in (bool, np.bool_, numbers.Integral, str, numbers.Real):
            if isinstance(v, k):
                return bool if k is np.bool_ else k
        return type(v)

    try:
        ok = any(value == c and kind(value) is kind(c) for c in choices)
    except (TypeError, ValueError):  # uncomparable, or an array
        ok = False
    if not ok:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def as_device(device: Any, name: str = "device") -> torch.device:
    """A ``torch.device`` from a string (``"cpu"``, ``"cuda:0"``, …) or a device, else ``TypeError``/``ValueError``;
    a CUDA or MPS device must also be available on this machine (``ValueError`` otherwise)."""
    import torch

    if not isinstance(device, torch.device):
        if not isinstance(device, str):
            raise TypeError(f"{name} must be a str or torch.device, got {type(device).__name__}")
        try:
            device = torch.device(device)
        except RuntimeError as e:
            raise ValueError(f"{name} is not a device torch knows: {device!r} ({e})") from None
    if device.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError(f"{name}={str(device)!r}: CUDA is not available on this machine")
        if device.index is not None and device.index >= n:
            raise ValueError(f"{name}={str(device)!r}: this machine has {n} CUDA device(s)")
    elif device.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError(f"{name}={str(device)!r}: MPS is not available on this machine")
    return device


def as_module(value: Any, name: str = "model") -> torch.nn.Module:
    """``value`` if it is a ``torch.nn.Module``; else ``TypeError`` naming ``name``."""
    import torch

    if not isinstance(value, torch.nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(value).__name__}")
    return value


def _check_shape(x: torch.Tensor, name: str, ndim: int | tuple[int, ...] | None, empty_ok: bool) -> None:
    """``x`` has one of the allowed numbers of dimensions (any if ``ndim`` is None) and, unless ``empty_ok``, an
    element."""
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.ndim not in allowed:
            want = " or ".join(map(str, allowed))
            raise ValueError(f"{name} must have {want} dimensions, got shape {tuple(x.shape)}")
    if not empty_ok and x.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(x.shape)}")


def float_tensor(
    x: Any,
    name: str,
    ndim: int | tuple[int, ...] | None = None,
    last: int | None = None,
    numpy_ok: bool = False,
    *,
    finite: bool = True,
    empty_ok: bool = False,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Return ``x`` if it is a floating-point tensor of the expected shape and contents, else raise naming ``name``.

    ``ndim``: allowed number(s) of dimensions (default: any but 0); ``last``: required size of the last dimension;
    ``numpy_ok``: also accept a NumPy array (converted without copying); ``finite``: refuse NaN and ±inf (on by
    default: off only on a model's hot path, where the check would cost a pass and a device sync per call);
    ``empty_ok``: accept a tensor with no elements; ``dtype``: the dtype it must have (a model's weights' dtype), so a
    float64 input is refused here rather than in a matmul deep inside torch.
    """
    import torch

    if numpy_ok and isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not torch.is_tensor(x):
        kinds = "a torch.Tensor or numpy array" if numpy_ok else "a torch.Tensor"
        raise TypeError(f"{name} must be {kinds}, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    _check_shape(x, name, ndim, empty_ok)
    if ndim is None and x.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension, got a 0-d tensor")
    if last is not None and (x.ndim == 0 or x.shape[-1] != last):
        raise ValueError(f"{name} must have last dimension {last}, got shape {tuple(x.shape)}")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype} (the model's), got {x.dtype}; convert it with .to({dtype})")
    if finite and x.numel():
        try:
            ok = bool(torch.isfinite(x).all())
        except RuntimeError:  # under a function transform (vmap), where a data-dependent check cannot run
            ok = True
        if not ok:
            raise ValueError(f"{name} must be finite, found NaN or inf")
    return x


def token_tensor(
    x: Any, name: str, vocab: int | None = None, ndim: int | tuple[int, ...] | None = None, *, empty_ok: bool = False
) -> torch.Tensor:
    """Return ``x`` if it is an integer tensor (not bool) of token ids in ``[0, vocab)`` with the allowed number(s) of
    dimensions, else raise naming ``name``: an id out of range would otherwise fail deep inside an embedding lookup
    (an ``IndexError`` on the CPU, a device-side assert on CUDA). A caller that needs int64 converts it."""
    import torch

    if not torch.is_tensor(x) or x.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        got = f"dtype {x.dtype}" if torch.is_tensor(x) else type(x).__name__
        raise TypeError(f"{name} must be an integer tensor of token ids, got {got}")
    _check_shape(x, name, ndim, empty_ok)
    if vocab is not None and x.numel():
        try:
            lo, hi = (int(v) for v in torch.aminmax(x))
        except RuntimeError:  # under a function transform (vmap), where a data-dependent check cannot run
            return x
        if lo < 0 or hi >= vocab:
            raise ValueError(f"{name} must hold token ids in [0, {vocab}), got ids in [{lo}, {hi}]")
    return x


def as_generator(seed: Any, name: str = "seed") -> np.random.Generator:
    """The NumPy generator for ``seed``: a non-negative int seeds a new one; a ``np.random.Generator`` is used as is
    (so a caller can thread one generator through several calls)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be an int >= 0 or a numpy.random.Generator, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"{name} must be an int >= 0 or a numpy.random.Generator, got {seed}")
    return np.random.default_rng(int(seed))


def torch_generator(seed: Any, device: Any = "cpu", name: str = "seed") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` derived from ``seed`` (an int, or a ``np.random.Generator`` that is advanced
    by one draw), so NumPy and torch randomness in one call come from the same seed."""
    import torch

    if isinstance(seed, np.random.Generator):
        value = int(seed.integers(2**63 - 1))
    else:
        value = as_int(seed, name, low=0)
    gen = torch.Generator(device=as_device(device))
    gen.manual_seed(value)
    return gen


def json_value(value: Any, name: str = "value") -> Any:
    """``value`` as plain JSON: Python/NumPy/torch scalars and arrays, (nested) lists, tuples, dicts and strings;
    ``TypeError`` naming ``name`` for anything else."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        return json_value(item(), name)
    if hasattr(value, "tolist"):
        return json_value(value.tolist(), name)
    if isinstance(value, Mapping):
        return {str(k): json_value(v, name) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v, name) for v in value]
    raise TypeError(f"{name} must be a number, bool, string, or a list/dict of those, got {type(value).__name__}")
