"""Claims and glued numbers: the checked core of every chapter.

A *claim* is a sentence about a paper's result, the value this run measured, and whether it passed.
Each call shows a ✓/✗ row in the notebook and records the claim in the cell's output, so the tests and
``python -m iclr26 run`` read it back from the executed notebook (:func:`read_notebook`).

:func:`glue` writes a value in myst-nb's glue format (without importing myst_nb, which Colab lacks), so the
book's prose quotes numbers from the run with ``{glue:text}`name``` instead of typing them.

    claim_at_least("exact_equals_refit", "the exact formula matches a refit", 1 - err, 1 - 1e-8)
    glue("power", power)
    claims_table()
"""

from __future__ import annotations

import html
import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Claim",
    "claim",
    "claim_at_least",
    "claim_at_most",
    "claim_greater_than",
    "claim_less_than",
    "claim_close_to",
    "claim_between",
    "glue",
    "claims_table",
    "recorded_claims",
    "reset",
    "read_notebook",
]

GLUE_PREFIX = "application/papermill.record/"  # myst-nb's prefix for glued values that are not displayed
META_KEY = "iclr26"

_CLAIMS: dict[str, Claim] = {}


@dataclass(frozen=True)
class Claim:
    """One checked statement: ``name`` (an identifier), the ``statement``, the measured ``value``, ``passed``."""

    name: str
    statement: str
    value: Any
    passed: bool
    detail: str = ""

    @property
    def mark(self) -> str:
        return "✓" if self.passed else "✗"


# ---------------------------------------------------------------------------------------------- validation
def _check_name(name: Any, what: str = "name") -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a string, got {type(name).__name__}")
    if not name or not all(ch.isalnum() or ch in "_-." for ch in name):
        raise ValueError(f"{what} must be a non-empty identifier of letters, digits, '_', '-', '.', got {name!r}")
    return name


def _check_number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        # numpy scalars are numbers.Real; 0-d arrays and tensors expose .item()
        item = getattr(value, "item", None)
        if callable(item) and getattr(value, "ndim", 1) == 0:
            return _check_number(item(), what)
        raise TypeError(f"{what} must be a real number, got {type(value).__name__}")
    return float(value)


def _jsonable(value: Any, what: str = "value") -> Any:
    """Python/numpy/torch scalars and (nested) lists, dicts and strings as plain JSON values."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        return _jsonable(item(), what)
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist(), what)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, what) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, what) for v in value]
    raise TypeError(f"{what} must be a number, bool, string, or a list/dict of those, got {type(value).__name__}")


def _json_safe(value: Any) -> Any:
    """NaN and infinities are not JSON: write them as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        if v == 0 or not math.isfinite(v):
            return str(v)
        return f"{v:.4g}" if 1e-3 <= abs(v) < 1e5 else f"{v:.3e}"
    return str(value)


# ---------------------------------------------------------------------------------------------- display
def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def _publish(data: dict[str, Any], metadata: dict[str, Any]) -> None:
    if _in_ipython():
        from IPython.display import display

        display(data, raw=True, metadata=metadata)
    elif "text/plain" in data:
        print(data["text/plain"])


_ROW_STYLE = "font-family: var(--pst-font-family-monospace, monospace); margin: 0.15em 0;"


def _claim_html(c: Claim) -> str:
    colour = "#1a7f37" if c.passed else "#cf222e"
    detail = f" <span style='color:#57606a'>({html.escape(c.detail)})</span>" if c.detail else ""
    return (
        f"<div class='iclr26-claim' style='{_ROW_STYLE}'>"
        f"<b style='color:{colour}'>{c.mark}</b> <code>{html.escape(c.name)}</code> — {html.escape(c.statement)}: "
        f"<b>{html.escape(_fmt(c.value))}</b>{detail}</div>"
    )


def _claim_text(c: Claim) -> str:
    detail = f" ({c.detail})" if c.detail else ""
    return f"{c.mark} {c.name} — {c.statement}: {_fmt(c.value)}{detail}"


# ---------------------------------------------------------------------------------------------- claims
def claim(name: str, statement: str, value: Any, passed: bool, detail: str = "") -> Claim:
    """Record and show one claim. ``passed`` must be a real bool (numpy bools are accepted).

    Prefer the comparison helpers below; use this one for checks they do not cover.
    """
    _check_name(name)
    if not isinstance(statement, str) or not statement.strip():
        raise TypeError(f"statement must be a non-empty string, got {statement!r}")
    if not isinstance(detail, str):
        raise TypeError(f"detail must be a string, got {type(detail).__name__}")
    if type(passed).__module__ == "numpy" and type(passed).__name__ in ("bool", "bool_"):  # numpy.bool_
        passed = bool(passed)
    if not isinstance(passed, bool):
        raise TypeError(f"passed must be a bool, got {type(passed).__name__}")
    c = Claim(name=name, statement=statement, value=_jsonable(value, "value"), passed=passed, detail=detail)
    _CLAIMS[name] = c
    _publish(
        {"text/html": _claim_html(c), "text/plain": _claim_text(c)},
        {META_KEY: {"claim": _json_safe(asdict(c))}},
    )
    return c


def claim_at_least(name: str, statement: str, value: Any, threshold: Any) -> Claim:
    """Passes iff ``value >= threshold``."""
    v, t = _check_number(value, "value"), _check_number(threshold, "threshold")
    return claim(name, statement, v, bool(v >= t), detail=f"≥ {_fmt(t)}")


def claim_at_most(name: str, statement: str, value: Any, threshold: Any) -> Claim:
    """Passes iff ``value <= threshold``."""
    v, t = _check_number(value, "value"), _check_number(threshold, "threshold")
    return claim(name, statement, v, bool(v <= t), detail=f"≤ {_fmt(t)}")


def claim_greater_than(name: str, statement: str, value: Any, baseline: Any, margin: Any = 0.0) -> Claim:
    """Passes iff ``value > baseline + margin`` (the baseline is measured in the same run)."""
    v, b, m = _check_number(value, "value"), _check_number(baseline, "baseline"), _check_number(margin, "margin")
    if m < 0:
        raise ValueError(f"margin must be ≥ 0, got {m}")
    detail = f"baseline {_fmt(b)}" + (f" + margin {_fmt(m)}" if m else "")
    return claim(name, statement, v, bool(v > b + m), detail=detail)


def claim_less_than(name: str, statement: str, value: Any, baseline: Any, margin: Any = 0.0) -> Claim:
    """Passes iff ``value < baseline - margin``."""
    v, b, m = _check_number(value, "value"), _check_number(baseline, "baseline"), _check_number(margin, "margin")
    if m < 0:
        raise ValueError(f"margin must be ≥ 0, got {m}")
    detail = f"baseline {_fmt(b)}" + (f" − margin {_fmt(m)}" if m else "")
    return claim(name, statement, v, bool(v < b - m), detail=detail)


def claim_close_to(name: str, statement: str, value: Any, target: Any, rtol: Any) -> Claim:
    """Passes iff ``|value − target| ≤ rtol·|target|``."""
    v, t, r = _check_number(value, "value"), _check_number(target, "target"), _check_number(rtol, "rtol")
    if r < 0:
        raise ValueError(f"rtol must be ≥ 0, got {r}")
    return claim(name, statement, v, bool(abs(v - t) <= r * abs(t)), detail=f"target {_fmt(t)} ± {_fmt(r * 100)}%")


def claim_between(name: str, statement: str, value: Any, low: Any, high: Any) -> Claim:
    """Passes iff ``low ≤ value ≤ high``."""
    v, lo, hi = _check_number(value, "value"), _check_number(low, "low"), _check_number(high, "high")
    if lo > hi:
        raise ValueError(f"low must be ≤ high, got low={lo}, high={hi}")
    return claim(name, statement, v, bool(lo <= v <= hi), detail=f"in [{_fmt(lo)}, {_fmt(hi)}]")


def recorded_claims() -> list[Claim]:
    """The claims recorded in this Python session, in order."""
    return list(_CLAIMS.values())


def reset() -> None:
    """Forget the claims recorded in this session (tests use it)."""
    _CLAIMS.clear()


def claims_table(claims: list[Claim] | None = None):
    """A DataFrame of claims (default: all recorded in this session) with a ✓/✗ column; it renders as a table."""
    import pandas as pd

    claims = recorded_claims() if claims is None else claims
    if not isinstance(claims, list) or not all(isinstance(c, Claim) for c in claims):
        raise TypeError("claims must be a list of Claim objects or None")
    rows = [
        {"": c.mark, "claim": c.name, "statement": c.statement, "measured": _fmt(c.value), "check": c.detail}
        for c in claims
    ]
    frame = pd.DataFrame(rows, columns=["", "claim", "statement", "measured", "check"])
    return frame.style.hide(axis="index").set_properties(**{"text-align": "left"})


# ---------------------------------------------------------------------------------------------- glue
def glue(name: str, value: Any, display: bool = False) -> Any:
    """Glue ``value`` under ``name`` in myst-nb's format, for ``{glue:text}`name``` in the book's prose.

    Numbers, bools and strings (and lists/dicts of those) are accepted. ``display=True`` also shows it.
    Returns the value, so ``x = glue("x", compute())`` reads naturally.
    """
    _check_name(name)
    if not isinstance(display, bool):
        raise TypeError(f"display must be a bool, got {type(display).__name__}")
    plain = _jsonable(value, "value")
    text = _fmt(plain) if isinstance(plain, (int, float)) and not isinstance(plain, bool) else str(plain)
    if isinstance(plain, float):
        text = repr(plain)  # full precision: the book formats it with {glue:text}`name:.3f`
    prefix = "" if display else GLUE_PREFIX
    metadata = {"scrapbook": {"name": name, "mime_prefix": prefix}, META_KEY: {"glue": _json_safe(plain)}}
    if _in_ipython():
        from IPython.display import display as ipy_display

        ipy_display({prefix + "text/plain": text}, raw=True, metadata=metadata)
    return value


# ---------------------------------------------------------------------------------------------- reading back
def read_notebook(path: str | Path) -> dict[str, Any]:
    """Claims and glued values recorded in an executed notebook.

    Returns ``{"claims": [{name, statement, value, passed, detail}, ...], "glued": {name: value}}``;
    a claim recorded twice keeps its last value.
    """
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path {str(path)!r} is not a file")
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"path {str(path)!r} is not a notebook (invalid JSON: {err})") from err
    claims: dict[str, dict[str, Any]] = {}
    glued: dict[str, Any] = {}
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) or []:
            meta = (out.get("metadata") or {}).get(META_KEY) or {}
            if "claim" in meta:
                claims[meta["claim"]["name"]] = meta["claim"]
            if "glue" in meta:
                name = (out.get("metadata") or {}).get("scrapbook", {}).get("name")
                if name:
                    glued[name] = meta["glue"]
    return {"claims": list(claims.values()), "glued": glued}
