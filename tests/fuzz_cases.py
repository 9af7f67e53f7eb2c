"""The fuzz table of the companion (issue #57): for every public name of ``iclr26`` and its modules, one valid call and,
one argument at a time, bad values (which must be refused with a ``TypeError``/``ValueError`` raised by the companion
and naming the argument) and valid stand-ins (which must be accepted).

``tests/test_fuzz.py`` runs it; ``python tests/fuzz_cases.py`` prints the outcome counts and every defect.

Adding a public name is one line in ``ENTRIES``: ``E(name, make, kinds)`` for a callable (``make`` returns the callable
and a dict of valid keyword arguments; ``kinds`` maps an argument to the kind of value it takes, from which the bad
values and stand-ins are derived), or ``DATA(name)`` for a constant or a result container the caller never builds.

Outcomes of one case:

* ``good`` — a bad value refused with ``TypeError``/``ValueError``, raised inside ``iclr26``, naming the argument;
* ``accepted`` — a valid stand-in accepted (or, for an ``either`` case, any clean outcome);
* ``hang`` — the call ran past its timeout;
* ``silent`` — a bad value accepted;
* ``obscure`` — another exception, or one raised deep inside torch/numpy;
* ``rejected`` — a valid stand-in refused;
* ``vague`` — refused, but the message does not name the argument.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import iclr26

PKG_DIR = str(Path(iclr26.__file__).resolve().parent)
TIMEOUT_S = 10.0
OUTCOMES = ("good", "accepted", "hang", "silent", "obscure", "rejected", "vague")
NAN, INF = float("nan"), float("inf")
_ids = itertools.count()


def uid() -> str:
    return f"fuzz_{next(_ids)}"


# ------------------------------------------------------------------------------------------------ kinds of value
def _mut(x: Any, f_t: Callable, f_np: Callable) -> Any:
    return f_t(x.clone()) if torch.is_tensor(x) else f_np(np.array(x, copy=True))


def _set_first(x: Any, v: Any) -> Any:
    def t(a):
        a.view(-1)[0] = v
        return a

    def n(a):
        a.reshape(-1)[0] = v
        return a

    return _mut(x, t, n)


def _as_int(x: Any) -> Any:
    return x.round().long() if torch.is_tensor(x) else np.asarray(x).round().astype(np.int64)


class Kind:
    """The bad values (must be refused) and stand-ins (must be accepted) for an argument whose valid value is ``v``."""

    def bad(self, v: Any) -> list[tuple[str, Any]]:
        return []

    def ok(self, v: Any) -> list[tuple[str, Any]]:
        return []

    def either(self, v: Any) -> list[tuple[str, Any]]:
        return []


@dataclass
class Int(Kind):
    low: int | None = None
    high: int | None = None
    none_ok: bool = False

    def bad(self, v):
        out = [("str", "3"), ("float", 2.5), ("nan", NAN), ("bool", True)]
        if not self.none_ok:
            out.append(("None", None))
        if self.low is not None:
            out.append((f"below {self.low}", self.low - 1))
        if self.high is not None:
            out.append((f"above {self.high}", self.high + 1))
        return out

    def ok(self, v):
        out = [("np.int64", np.int64(v))] if isinstance(v, int) and not isinstance(v, bool) else []
        return out + ([("None", None)] if self.none_ok else [])


@dataclass
class Real(Kind):
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    inf_ok: bool = False
    none_ok: bool = False

    def bad(self, v):
        out = [("str", "0.5"), ("nan", NAN), ("bool", True)]
        if not self.none_ok:
            out.append(("None", None))
        if not self.inf_ok:
            out += [("inf", INF), ("-inf", -INF)]
        if self.low is not None:
            out.append((f"below {self.low}", self.low if self.low_open else self.low - 1))
        if self.high is not None:
            out.append((f"above {self.high}", self.high if self.high_open else self.high + 1))
        return out

    def ok(self, v):
        out = []
        if isinstance(v, float):
            out.append(("np.float32", np.float32(v)))
            out.append(("np.float64", np.float64(v)))
        return out + ([("None", None)] if self.none_ok else [])


PROB = Real(0.0, 1.0)


@dataclass
class Bool(Kind):
    def bad(self, v):
        return [("None", None), ("str", "yes"), ("int 1", 1)]

    def ok(self, v):
        return [("np.bool_", np.bool_(v))]


BOOL = Bool()


@dataclass
class Seed(Kind):
    def bad(self, v):
        return [("None", None), ("-1", -1), ("float", 2.5), ("str", "0")]

    def ok(self, v):
        return [("Generator", np.random.default_rng(0)), ("np.int64", np.int64(0))]


SEED = Seed()


@dataclass
class Choice(Kind):
    none_ok: bool = False

    def bad(self, v):
        return [("unknown", "no-such-option")] + ([] if self.none_ok else [("None", None)])


CHOICE = Choice()


@dataclass
class Str(Kind):
    def bad(self, v):
        return [("None", None), ("int", 3)]


STR = Str()


@dataclass
class Obj(Kind):
    """An object of a given kind (a module, a callable, a dataclass the package built): None, a string, an int."""

    none_ok: bool = False

    def bad(self, v):
        return [("str", "x"), ("int", 3)] + ([] if self.none_ok else [("None", None)])


OBJ = Obj()


@dataclass
class Device(Kind):
    def bad(self, v):
        out = [("unknown", "no-such-device"), ("int", 3.5), ("None", None)]
        if not torch.cuda.is_available():
            out.append(("cuda unavailable", "cuda:0"))
        return out

    def ok(self, v):
        return [("torch.device", torch.device("cpu"))]


DEVICE = Device()


@dataclass
class Floats(Kind):
    """A float tensor (or array) whose valid value is ``v``: NaN, inf, empty, 0-d, wrong rank, int dtype are refused.

    ``ranks``: the ranks it accepts (one more and one fewer than the valid value's are tried unless listed);
    ``nan_ok``: NaN/inf are data here (a threshold, a mask); ``empty_ok``: an empty batch is a valid input;
    ``int_ok``: integers are accepted as numbers; ``f64``: ``"ok"`` float64 must be accepted, ``"either"`` it may be
    refused clearly or accepted.
    """

    ranks: tuple[int, ...] | None = None
    nan_ok: bool = False
    empty_ok: bool = False
    int_ok: bool = False
    none_ok: bool = False
    f64: str = "either"
    like: Callable[[], Any] | None = None  # a valid value to derive the bad ones from, where the default is None

    def bad(self, v):
        if v is None:
            if self.like is None:
                return [("str", "x")]
            v = self.like()
        out = [("str", "x")] + ([] if self.none_ok else [("None", None)])
        if not self.nan_ok:
            out += [("nan", _set_first(v, NAN)), ("inf", _set_first(v, INF))]
        if not self.empty_ok and v.shape[0] > 0:
            out.append(("empty", v[:0]))
        ranks = self.ranks or (v.ndim,)
        if 0 not in ranks:
            out.append(("0-d", v.reshape(-1)[0] if torch.is_tensor(v) else np.asarray(v.reshape(-1)[0])))
        if v.ndim + 1 not in ranks:
            out.append(("rank+1", v[None]))
        if v.ndim - 1 not in ranks and v.ndim >= 2:
            out.append(("rank-1", v[0]))
        if not self.int_ok:
            out.append(("int dtype", _as_int(v)))
        return out

    def ok(self, v):
        if v is None:
            return []
        out = [("float32", v.float() if torch.is_tensor(v) else v.astype(np.float32))] if self.f64 == "ok" else []
        if self.f64 == "ok":
            out.append(("float64", v.double() if torch.is_tensor(v) else v.astype(np.float64)))
        return out + ([("None", None)] if self.none_ok else [])

    def either(self, v):
        v = self.like() if v is None and self.like is not None else v
        if self.f64 == "either" and torch.is_tensor(v):
            return [("float64", v.double())]
        return []


FLOATS = Floats()


@dataclass
class Tokens(Kind):
    """Integer token ids in ``[0, vocab)``."""

    vocab: int | None = None
    ranks: tuple[int, ...] | None = None
    empty_ok: bool = False

    def bad(self, v):
        out = [("None", None), ("str", "x"), ("float dtype", v.float()), ("bool dtype", v > 0)]
        if self.vocab is not None:
            out += [("id = vocab", _set_first(v, self.vocab)), ("id -1", _set_first(v, -1))]
        if not self.empty_ok:
            out.append(("empty", v[:0]))
        ranks = self.ranks or (v.ndim,)
        if 0 not in ranks:
            out.append(("0-d", v.reshape(-1)[0]))
        if v.ndim + 1 not in ranks:
            out.append(("rank+1", v[None]))
        return out

    def ok(self, v):
        return [("int32", v.int())]


@dataclass
class Given(Kind):
    """Hand-written values: ``bad`` must be refused, ``ok`` accepted."""

    bad_values: list = field(default_factory=list)
    ok_values: list = field(default_factory=list)
    either_values: list = field(default_factory=list)

    def bad(self, v):
        return [(repr(b)[:40], b) for b in self.bad_values]

    def ok(self, v):
        return [(repr(b)[:40], b) for b in self.ok_values]

    def either(self, v):
        return [(repr(b)[:40], b) for b in self.either_values]


# ------------------------------------------------------------------------------------------------ entries
@dataclass
class Entry:
    name: str
    make: Callable[[], tuple[Callable, dict]] | None = None
    kinds: dict[str, Kind] = field(default_factory=dict)
    extra: list[tuple[str, Callable[[], tuple[Callable, dict]], str, str]] = field(default_factory=list)
    data: bool = False
    skip: str = ""
    valid: bool = True  # False: the base call cannot run here (a missing model): only its refusals are checked
    say: dict[str, str] = field(default_factory=dict)


ENTRIES: dict[str, Entry] = {}


def E(
    name: str,
    make: Callable[[], tuple[Callable, dict]],
    kinds: dict[str, Kind] | None = None,
    *,
    extra=(),
    say: dict[str, str] | None = None,
    valid: bool = True,
) -> None:
    """A callable: ``make()`` returns it and valid keyword arguments; ``extra``: hand-written cases
    ``(label, make, expect, argument)`` with ``expect`` one of ``"bad"``, ``"ok"``, ``"either"``."""
    assert name not in ENTRIES, name
    ENTRIES[name] = Entry(name, make, dict(kinds or {}), list(extra), say=dict(say or {}), valid=valid)


def DATA(*names: str) -> None:
    """Constants, type aliases and result containers that a caller reads and never builds from its own input."""
    for name in names:
        assert name not in ENTRIES, name
        ENTRIES[name] = Entry(name, data=True)


def SKIP(name: str, why: str) -> None:
    """A public name that cannot run here (a kernel, a download, a launcher): why, so the table stays complete."""
    assert name not in ENTRIES, name
    ENTRIES[name] = Entry(name, skip=why)


def INNER(name: str) -> None:
    """A layer's ``forward`` that only its model calls, with input the model's ``forward`` has checked."""
    SKIP(name, "a layer inside its model: the model's forward checks the input")


def X(label: str, make, expect: str = "bad", arg: str = "") -> tuple:
    return (label, make, expect, arg)


# ------------------------------------------------------------------------------------------------ running one case
class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout


def _raised_inside(exc: BaseException) -> bool:
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and str(Path(last).resolve()).startswith(PKG_DIR)


def _names(msg: str, arg: str) -> bool:
    if not arg:
        return True
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(a)}(?![A-Za-z0-9_])", msg) for a in arg.split("|"))


def run_case(fn: Callable, kwargs: dict, expect: str, arg: str, timeout: float = TIMEOUT_S) -> tuple[str, str]:
    """Call ``fn(**kwargs)`` under a timeout and classify the outcome; returns (outcome, detail)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            out = fn(**kwargs)
            if hasattr(out, "__enter__") and hasattr(out, "__exit__") and not isinstance(out, (torch.nn.Module, Path)):
                # a context manager (hooks, capture, steer): its checks run when it is entered
                with out:
                    pass
    except _Timeout:
        return "hang", f"no answer in {timeout:g} s"
    except (TypeError, ValueError, FileNotFoundError) as e:  # a missing file is FileNotFoundError, as open() says
        signal.setitimer(signal.ITIMER_REAL, 0)
        msg = f"{type(e).__name__}: {e}"
        if expect == "ok":
            return "rejected", msg
        if not _raised_inside(e):
            where = traceback.extract_tb(e.__traceback__)[-1]
            return "obscure", f"{msg} (raised in {Path(where.filename).name}:{where.lineno})"
        if not _names(str(e), arg):
            return ("vague" if expect == "bad" else "vague"), msg
        return ("good" if expect == "bad" else "accepted"), msg
    except Exception as e:  # noqa: BLE001 - every other exception is the finding
        signal.setitimer(signal.ITIMER_REAL, 0)
        where = traceback.extract_tb(e.__traceback__)[-1]
        return (
            "rejected" if expect == "ok" else "obscure",
            f"{type(e).__name__}: {e} (raised in {Path(where.filename).name}:{where.lineno})",
        )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if expect == "bad":
        return "silent", f"returned {type(out).__name__}"
    return "accepted", ""


@dataclass
class Case:
    entry: str
    label: str
    make: Callable[[], tuple[Callable, dict]]
    expect: str
    arg: str
    override: tuple[str, Any] | None = None

    def run(self) -> tuple[str, str]:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            fn, kwargs = self.make()
        if self.override is not None:
            k, v = self.override
            kwargs = {**kwargs, k: v}
        return run_case(fn, kwargs, self.expect, self.arg)


def cases(entry: Entry) -> list[Case]:
    """The valid call, then each argument's bad values and stand-ins, then the hand-written cases."""
    if entry.data or entry.skip:
        return []
    out = [Case(entry.name, "valid", entry.make, "ok", "")] if entry.valid else []
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        _, base = entry.make()
    for arg, kind in entry.kinds.items():
        v = base.get(arg)
        groups = (("bad", kind.bad(v)), ("ok", kind.ok(v)), ("either", kind.either(v)))
        for expect, values in groups if entry.valid else groups[:1]:
            for label, value in values:
                out.append(
                    Case(entry.name, f"{arg}={label}", entry.make, expect, entry.say.get(arg, arg), (arg, value))
                )
    for label, make, expect, arg in entry.extra:
        out.append(Case(entry.name, label, make, expect, arg))
    return out


# ------------------------------------------------------------------------------------------------ public names
def public_names() -> dict[str, Any]:
    """Every ``__all__`` entry of ``iclr26`` and its modules, keyed by where it is defined, plus the public methods
    of the public classes (``module.Class.method``)."""
    import importlib
    import inspect
    import pkgutil

    mods = [iclr26] + [
        importlib.import_module(m.name)
        for m in pkgutil.walk_packages(iclr26.__path__, "iclr26.")
        if not m.name.endswith("__main__")
    ]
    found: dict[int, tuple[str, Any]] = {}
    for mod in sorted(mods, key=lambda m: -m.__name__.count(".")):  # the defining (deepest) module first
        for n in getattr(mod, "__all__", ()):
            obj = getattr(mod, n)
            if id(obj) in found:
                continue
            defined = getattr(obj, "__module__", None)
            qual = getattr(obj, "__qualname__", None)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and defined and qual and defined.startswith("iclr26"):
                key = f"{defined}.{qual}"
            else:
                key = f"{mod.__name__}.{n}"
            found[id(obj)] = (key, obj)
    names = dict(found.values())
    for key, obj in list(names.items()):
        if inspect.isclass(obj) and getattr(obj, "__module__", "").startswith("iclr26"):
            for m, v in vars(obj).items():
                if (
                    not m.startswith("_")
                    and m != "extra_repr"
                    and (inspect.isfunction(v) or isinstance(v, staticmethod))
                ):
                    names[f"{key}.{m}"] = v
    return names


def table() -> dict[str, Entry]:
    import fuzz_entries  # noqa: F401 - fills ENTRIES

    return ENTRIES


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    entries = table()
    names = public_names()
    missing = sorted(set(names) - set(entries))
    unknown = sorted(set(entries) - set(names))
    only = argv[1:] if len(argv) > 1 else None
    counts = dict.fromkeys(OUTCOMES, 0)
    callables = 0
    defects = []
    for name, entry in entries.items():
        if only and not any(o in name for o in only):
            continue
        if name not in names:  # measuring an older version of the package, which lacks this name
            continue
        cs = cases(entry)
        callables += bool(cs)
        for c in cs:
            try:
                outcome, detail = c.run()
            except Exception as e:  # noqa: BLE001 - a broken entry
                outcome, detail = "obscure", f"entry failed to build: {type(e).__name__}: {e}"
            counts[outcome] += 1
            if outcome not in ("good", "accepted"):
                defects.append(f"{outcome:9s} {name}({c.label}): {detail[:200]}")
    print("\n".join(defects))
    print(f"callables: {callables}; cases: {sum(counts.values())}; " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if missing:
        print("no entry:", ", ".join(missing))
    if unknown:
        print("entry for no public name:", ", ".join(unknown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    import fuzz_cases  # the table fills that module's ENTRIES, not __main__'s

    sys.exit(fuzz_cases.main(sys.argv))
