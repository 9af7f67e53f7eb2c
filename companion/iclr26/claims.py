"""Claims, sanity checks, verdicts and glued numbers: the checked core of every chapter.

Two kinds of checks, both recorded and both failing the run when they fail:

* a **claim** (``claim_*``) is an empirical statement about the paper's result at this scale, the value this run
  measured, and whether it passed: it could fail if the paper were wrong here;
* a **sanity check** (``check_*``, same signatures) is an identity, an invariant or a by-construction property
  (an exact formula against a refit, a generator valid by construction, an LP being optimal): it fails only on a bug.

Each call shows a ✓/✗ row in the notebook and records the check in the cell's output, so the tests and
``python -m iclr26 run`` read it back from the executed notebook (:func:`read_notebook`). :func:`claims_table` shows
them in two sections.

A **verdict** (:func:`verdict`) is one row of a chapter's verdict table: a headline claim *of the paper* and whether
this chapter reproduced it — one of :data:`VERDICTS` — with its evidence and one line of why. "not reproduced" is a
result, not a failure: the run still passes. :func:`verdicts_table` shows the rows.

:func:`glue` writes a value in myst-nb's glue format (without importing myst_nb, which Colab lacks), so the
book's prose quotes numbers from the run with ``{glue:text}`name``` instead of typing them.

    check_at_most("exact_equals_refit", "the exact formula matches a refit (max rel. error)", err, 1e-8)
    claim_at_least("power", "the test detects planted influential sets", power, 0.9)
    verdict("The test has power against planted sets", "reproduced", evidence="power", why="...")
    glue("power", power)
    verdicts_table()
    claims_table()
"""

from __future__ import annotations

import html
import json
import math
import numbers
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iclr26.checks import json_value

__all__ = [
    "Claim",
    "claim",
    "claim_at_least",
    "claim_at_most",
    "claim_greater_than",
    "claim_less_than",
    "claim_close_to",
    "claim_between",
    "check",
    "check_at_least",
    "check_at_most",
    "check_greater_than",
    "check_less_than",
    "check_close_to",
    "check_between",
    "KINDS",
    "VERDICTS",
    "Verdict",
    "verdict",
    "verdicts_table",
    "recorded_verdicts",
    "glue",
    "claims_table",
    "recorded_claims",
    "reset",
    "read_notebook",
]

KINDS = ("claim", "sanity")
VERDICTS = ("reproduced", "partly", "not reproduced", "reported only", "not tested here")

GLUE_PREFIX = "application/papermill.record/"  # myst-nb's prefix for glued values that are not displayed
META_KEY = "iclr26"

_CLAIMS: dict[str, Claim] = {}
_VERDICTS: dict[str, Verdict] = {}


@dataclass(frozen=True)
class Claim:
    """One checked statement: ``name`` (an identifier), the ``statement``, the measured ``value``, ``passed``.

    ``kind`` is ``"claim"`` (about the paper's result) or ``"sanity"`` (an identity or by-construction property);
    ``detail`` says what was compared; ``calibration`` (optional) the worst value seen over calibration seeds.
    ``bound`` is the number the value was compared with (the threshold, baseline ± margin, the nearer end of an
    interval, or the allowed deviation of ``claim_close_to``) and ``slack`` how far the value is from failing, in the
    value's units (positive: passes with room; zero or negative: on or over the line); both are ``None`` for a
    check made with :func:`claim`, which compares nothing numeric. The seed-robustness page ranks claims by them.
    """

    name: str
    statement: str
    value: Any
    passed: bool
    detail: str = ""
    kind: str = "claim"
    calibration: str = ""
    bound: float | None = None
    slack: float | None = None

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
def claim(
    name: str,
    statement: str,
    value: Any,
    passed: bool,
    detail: str = "",
    *,
    kind: str = "claim",
    calibration: str = "",
    bound: float | None = None,
    slack: float | None = None,
) -> Claim:
    """Record and show one check. ``passed`` must be a real bool (numpy bools are accepted).

    ``kind="claim"`` (default) for a statement about the paper's result, ``kind="sanity"`` for an identity or
    by-construction property (the ``check_*`` functions set it). ``calibration`` states, where a threshold was
    calibrated over seeds, the worst value seen there (e.g. ``"ci seeds 0–7: min 0.83"``); the table shows it
    beside the threshold. Prefer the comparison helpers below; use this one for checks they do not cover.
    ``bound`` and ``slack`` (optional numbers) are the comparison's line and the distance from it (see :class:`Claim`);
    the comparison helpers fill them in.
    """
    _check_name(name)
    if not isinstance(statement, str) or not statement.strip():
        raise TypeError(f"statement must be a non-empty string, got {statement!r}")
    if not isinstance(detail, str):
        raise TypeError(f"detail must be a string, got {type(detail).__name__}")
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string, got {type(kind).__name__}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(calibration, str):
        raise TypeError(f"calibration must be a string, got {type(calibration).__name__}")
    if type(passed).__module__ == "numpy" and type(passed).__name__ in ("bool", "bool_"):  # numpy.bool_
        passed = bool(passed)
    if not isinstance(passed, bool):
        raise TypeError(f"passed must be a bool, got {type(passed).__name__}")
    bound = None if bound is None else _check_number(bound, "bound")
    slack = None if slack is None else _check_number(slack, "slack")
    c = Claim(
        name=name,
        statement=statement,
        value=json_value(value, "value"),
        passed=passed,
        detail=detail,
        kind=kind,
        calibration=calibration,
        bound=bound,
        slack=slack,
    )
    _CLAIMS[name] = c
    _publish(
        {"text/html": _claim_html(c), "text/plain": _claim_text(c)},
        {META_KEY: {"claim": _json_safe(asdict(c))}},
    )
    return c


def claim_at_least(
    name: str, statement: str, value: Any, threshold: Any, *, kind: str = "claim", calibration: str = ""
) -> Claim:
    """Passes iff ``value >= threshold``."""
    v, t = _check_number(value, "value"), _check_number(threshold, "threshold")
    return claim(
        name, statement, v, bool(v >= t), f"≥ {_fmt(t)}", kind=kind, calibration=calibration, bound=t, slack=v - t
    )


def claim_at_most(
    name: str, statement: str, value: Any, threshold: Any, *, kind: str = "claim", calibration: str = ""
) -> Claim:
    """Passes iff ``value <= threshold``."""
    v, t = _check_number(value, "value"), _check_number(threshold, "threshold")
    return claim(
        name, statement, v, bool(v <= t), f"≤ {_fmt(t)}", kind=kind, calibration=calibration, bound=t, slack=t - v
    )


def _against_baseline(value: Any, baseline: Any, margin: Any) -> tuple[float, float, float]:
    v, b, m = _check_number(value, "value"), _check_number(baseline, "baseline"), _check_number(margin, "margin")
    if m < 0:
        raise ValueError(f"margin must be ≥ 0, got {m}")
    return v, b, m


def claim_greater_than(
    name: str,
    statement: str,
    value: Any,
    baseline: Any,
    margin: Any = 0.0,
    *,
    kind: str = "claim",
    calibration: str = "",
) -> Claim:
    """Passes iff ``value > baseline + margin`` (the baseline is measured in the same run)."""
    v, b, m = _against_baseline(value, baseline, margin)
    detail = f"baseline {_fmt(b)}" + (f" + margin {_fmt(m)}" if m else "")
    return claim(
        name, statement, v, bool(v > b + m), detail, kind=kind, calibration=calibration, bound=b + m, slack=v - (b + m)
    )


def claim_less_than(
    name: str,
    statement: str,
    value: Any,
    baseline: Any,
    margin: Any = 0.0,
    *,
    kind: str = "claim",
    calibration: str = "",
) -> Claim:
    """Passes iff ``value < baseline - margin``."""
    v, b, m = _against_baseline(value, baseline, margin)
    detail = f"baseline {_fmt(b)}" + (f" − margin {_fmt(m)}" if m else "")
    return claim(
        name, statement, v, bool(v < b - m), detail, kind=kind, calibration=calibration, bound=b - m, slack=(b - m) - v
    )


def claim_close_to(
    name: str, statement: str, value: Any, target: Any, rtol: Any, *, kind: str = "claim", calibration: str = ""
) -> Claim:
    """Passes iff ``|value − target| ≤ rtol·|target|``."""
    v, t, r = _check_number(value, "value"), _check_number(target, "target"), _check_number(rtol, "rtol")
    if r < 0:
        raise ValueError(f"rtol must be ≥ 0, got {r}")
    detail = f"target {_fmt(t)} ± {_fmt(r * 100)}%"
    allowed = r * abs(t)
    return claim(
        name,
        statement,
        v,
        bool(abs(v - t) <= allowed),
        detail,
        kind=kind,
        calibration=calibration,
        bound=allowed,
        slack=allowed - abs(v - t),
    )


def claim_between(
    name: str, statement: str, value: Any, low: Any, high: Any, *, kind: str = "claim", calibration: str = ""
) -> Claim:
    """Passes iff ``low ≤ value ≤ high``."""
    v, lo, hi = _check_number(value, "value"), _check_number(low, "low"), _check_number(high, "high")
    if lo > hi:
        raise ValueError(f"low must be ≤ high, got low={lo}, high={hi}")
    detail = f"in [{_fmt(lo)}, {_fmt(hi)}]"
    near = lo if v - lo <= hi - v else hi
    return claim(
        name,
        statement,
        v,
        bool(lo <= v <= hi),
        detail,
        kind=kind,
        calibration=calibration,
        bound=near,
        slack=min(v - lo, hi - v),
    )


# ---------------------------------------------------------------------------------------------- sanity checks
def _sanity(fn):
    """The ``check_*`` twin of a ``claim_*`` function: the same check, recorded with ``kind="sanity"``."""

    def check_fn(*args: Any, **kwargs: Any) -> Claim:
        if "kind" in kwargs:
            raise TypeError(f"{check_fn.__name__}() records a sanity check; it takes no kind argument")
        return fn(*args, kind="sanity", **kwargs)

    check_fn.__name__ = check_fn.__qualname__ = fn.__name__.replace("claim", "check", 1)
    check_fn.__doc__ = (
        f"Like :func:`{fn.__name__}`, for an identity, invariant or by-construction property (a sanity check): "
        f"{(fn.__doc__ or '').strip()}"
    )
    check_fn.__wrapped__ = fn
    return check_fn


check = _sanity(claim)
check_at_least = _sanity(claim_at_least)
check_at_most = _sanity(claim_at_most)
check_greater_than = _sanity(claim_greater_than)
check_less_than = _sanity(claim_less_than)
check_close_to = _sanity(claim_close_to)
check_between = _sanity(claim_between)


def recorded_claims() -> list[Claim]:
    """The claims and sanity checks recorded in this Python session, in order."""
    return list(_CLAIMS.values())


def reset() -> None:
    """Forget the claims, sanity checks and verdicts recorded in this session (tests use it)."""
    _CLAIMS.clear()
    _VERDICTS.clear()


_SECTIONS = {"claim": "Paper claims", "sanity": "Sanity checks"}
_SECTION_NOTES = {
    "claim": "empirical statements about the paper's results at this scale: they could fail if the paper were wrong",
    "sanity": "identities and by-construction properties: they fail only on a bug, and are not evidence for the paper",
}


class ChecksTable:
    """Claims and sanity checks in two sections; renders as HTML in a notebook. ``frame`` holds the rows."""

    def __init__(self, claims: list[Claim]):
        import pandas as pd

        rows = [
            {
                "kind": c.kind,
                "": c.mark,
                "name": c.name,
                "statement": c.statement,
                "measured": _fmt(c.value),
                "check": c.detail,
                "calibration": c.calibration,
            }
            for c in claims
        ]
        self.frame = pd.DataFrame(rows, columns=["kind", "", "name", "statement", "measured", "check", "calibration"])

    def _sections(self):
        for kind in KINDS:
            part = self.frame[self.frame.kind == kind].drop(columns="kind")
            if not part.calibration.astype(bool).any():
                part = part.drop(columns="calibration")
            yield kind, part

    def _repr_html_(self) -> str:
        out = []
        for kind, part in self._sections():
            passed = int((part[""] == "✓").sum())
            out.append(
                f"<p><b>{_SECTIONS[kind]}</b> ({passed}/{len(part)} passed) — "
                f"<span style='color:#57606a'>{_SECTION_NOTES[kind]}</span></p>"
            )
            if len(part):
                styler = part.style.hide(axis="index").set_properties(**{"text-align": "left"})
                out.append(styler.to_html())
            else:
                out.append("<p><i>none</i></p>")
        return "\n".join(out)

    def __repr__(self) -> str:
        out = []
        for kind, part in self._sections():
            passed = int((part[""] == "✓").sum())
            out.append(f"{_SECTIONS[kind]} ({passed}/{len(part)} passed)")
            out.append(part.to_string(index=False) if len(part) else "  none")
        return "\n".join(out)


def claims_table(claims: list[Claim] | None = None) -> ChecksTable:
    """The claims (default: all recorded in this session) as two tables, paper claims and sanity checks."""
    claims = recorded_claims() if claims is None else claims
    if not isinstance(claims, list) or not all(isinstance(c, Claim) for c in claims):
        raise TypeError("claims must be a list of Claim objects or None")
    return ChecksTable(claims)


# ---------------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """One row of a chapter's verdict table: a ``headline`` claim of the paper, the ``verdict`` (one of
    :data:`VERDICTS`), the ``evidence`` (claim names, glued numbers) and ``why`` in one line."""

    headline: str
    verdict: str
    evidence: str
    why: str


def _check_text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must be a non-empty string")
    return value.strip()


def verdict(headline: str, verdict: str, evidence: str, why: str) -> Verdict:
    """Record one row of the chapter's verdict table (shown by :func:`verdicts_table`).

    ``headline`` is one headline claim of the paper (from the paper, not from what happened to work here);
    ``verdict`` one of ``"reproduced"``, ``"partly"``, ``"not reproduced"``, ``"reported only"``, ``"not tested here"``;
    ``evidence`` names the claims or quotes the numbers of this run it rests on; ``why`` says in one line why.
    :func:`verdicts_table` shows the rows and stores them in its output, where ``read_notebook(...)["verdicts"]``
    and ``python -m iclr26 run --json`` find them; recording the same headline twice keeps the last row.
    """
    headline = _check_text(headline, "headline")
    word = _check_text(verdict, "verdict")
    if word not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    row = Verdict(
        headline=headline, verdict=word, evidence=_check_text(evidence, "evidence"), why=_check_text(why, "why")
    )
    _VERDICTS[headline] = row
    return row


def recorded_verdicts() -> list[Verdict]:
    """The verdict rows recorded in this Python session, in order."""
    return list(_VERDICTS.values())


_VERDICT_COLOURS = {
    "reproduced": "#1a7f37",
    "partly": "#9a6700",
    "not reproduced": "#cf222e",
    "reported only": "#57606a",
    "not tested here": "#57606a",
}


class VerdictsTable:
    """The verdict rows as a table; renders as HTML in a notebook. ``frame`` holds the rows."""

    def __init__(self, rows: list[Verdict]):
        import pandas as pd

        self.frame = pd.DataFrame([asdict(r) for r in rows], columns=["headline", "verdict", "evidence", "why"])

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, str], dict[str, Any]]:
        # the rows travel in the output's metadata, where read_notebook finds them
        rows = [_json_safe(dict(r._asdict())) for r in self.frame.itertuples(index=False)]
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}, {META_KEY: {"verdicts": rows}}

    def _repr_html_(self) -> str:
        head = "".join(
            f"<th style='text-align:left'>{h}</th>" for h in ("the paper claims", "verdict", "evidence", "why")
        )
        body = []
        for r in self.frame.itertuples(index=False):
            colour = _VERDICT_COLOURS[r.verdict]
            body.append(
                f"<tr><td>{html.escape(r.headline)}</td><td><b style='color:{colour}'>{html.escape(r.verdict)}</b></td>"
                f"<td>{html.escape(r.evidence)}</td><td>{html.escape(r.why)}</td></tr>"
            )
        return f"<table class='iclr26-verdicts'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"

    def __repr__(self) -> str:
        return "\n".join(f"[{r.verdict}] {r.headline} — {r.evidence} — {r.why}" for r in self.frame.itertuples())


def verdicts_table(rows: list[Verdict] | None = None) -> VerdictsTable:
    """The verdict rows (default: all recorded in this session) as one table."""
    rows = recorded_verdicts() if rows is None else rows
    if not isinstance(rows, list) or not all(isinstance(r, Verdict) for r in rows):
        raise TypeError("rows must be a list of Verdict objects or None")
    return VerdictsTable(rows)


# ---------------------------------------------------------------------------------------------- glue
def glue(name: str, value: Any, display: bool = False) -> Any:
    """Glue ``value`` under ``name`` in myst-nb's format, for ``{glue:text}`name``` in the book's prose.

    Numbers, bools and strings (and lists/dicts of those) are accepted. ``display=True`` also shows it.
    Returns the value, so ``x = glue("x", compute())`` reads naturally.
    """
    _check_name(name)
    if not isinstance(display, bool):
        raise TypeError(f"display must be a bool, got {type(display).__name__}")
    plain = json_value(value, "value")
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
    """Claims, sanity checks, verdicts and glued values recorded in an executed notebook.

    Returns ``{"claims": [{name, statement, value, passed, detail, kind, calibration, bound, slack}, ...],
    "verdicts": [{headline, verdict, evidence, why}, ...], "glued": {name: value}, "duplicates": [name, ...]}``.
    ``duplicates`` lists the claim names that two different cells recorded (the last one is kept in ``claims``):
    a chapter must not record one name twice, since the later row would hide the earlier one.
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
    verdicts: dict[str, dict[str, Any]] = {}
    glued: dict[str, Any] = {}
    duplicates: list[str] = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) or []:
            meta = (out.get("metadata") or {}).get(META_KEY) or {}
            if "claim" in meta:
                c = {"detail": "", "kind": "claim", "calibration": "", "bound": None, "slack": None, **meta["claim"]}
                if c["name"] in claims and c["name"] not in duplicates:
                    duplicates.append(c["name"])
                claims[c["name"]] = c
            for row in meta.get("verdicts", []):
                verdicts[row["headline"]] = row
            if "glue" in meta:
                name = (out.get("metadata") or {}).get("scrapbook", {}).get("name")
                if name:
                    glued[name] = meta["glue"]
    return {
        "claims": list(claims.values()),
        "verdicts": list(verdicts.values()),
        "glued": glued,
        "duplicates": duplicates,
    }
