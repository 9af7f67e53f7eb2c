"""Claims, controls, sanity checks, reports, verdicts and glued numbers: the checked core of every chapter.

Four kinds of recorded results, each shown as a row where it is computed and stored in the cell's output, where the
tests and ``python -m iclr26 run`` read them back (:func:`read_notebook`):

* a **claim** (``claim_*``) is an empirical statement about the paper's result at this scale, the value this run
  measured, and whether it passed: it could fail if the paper were wrong here;
* a **control** (``control_*``, same signatures) shows that this chapter's *measurement* detects the paper's effect
  where the effect is present by construction: an oracle or exact solution, a planted model, a task where the shortcut
  fails, the paper's own configuration at small size. A verdict of "not reproduced" must cite one that passed;
* a **sanity check** (``check_*``, same signatures) is an identity, an invariant or a by-construction property
  (an exact formula against a refit, a generator valid by construction, an LP being optimal): it fails only on a bug;
* a **report** (:func:`report`) is a measured number that is shown and glued for the prose, but not asserted; it may
  say whether the paper's direction ``holds`` in this run.

Claims, controls and sanity checks fail the run when they fail; a report never does.

A **verdict** (:func:`verdict`) is one row of a chapter's verdict table: a headline claim *of the paper*, what the
paper reports, and whether this chapter reproduced it — one of :data:`VERDICTS` — with its ``evidence`` and
``controls`` *by name*, so that every number is written once and the table shows its measured value from the run.
The word follows rules (see :func:`verdict`); :func:`verdict_word` picks it from what holds. :func:`results` renders
the Results section: the verdict table, then the claims, controls, reports and sanity checks.

    check_at_most("exact_equals_refit", "the exact formula matches a refit (max rel. error)", err, 1e-8)
    control_at_least("planted_detected", "the test finds a planted set", power_planted, 0.9)
    claim_at_least("power", "the test detects planted influential sets", power, 0.9)
    report("size", size, "rejection rate under the null", holds=size <= 0.07)
    verdict("The test has power", verdict_word("power"), paper="power → 1 as n grows", evidence=["power"],
            controls=["planted_detected"], why="...")
    results("influential_sets")
"""

from __future__ import annotations

import html
import json
import math
import numbers
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iclr26.checks import check_bool, json_value

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
    "control",
    "control_at_least",
    "control_at_most",
    "control_greater_than",
    "control_less_than",
    "control_close_to",
    "control_between",
    "report",
    "KINDS",
    "VERDICTS",
    "Verdict",
    "verdict",
    "verdicts_table",
    "verdict_word",
    "verdict_problems",
    "result_mark",
    "recorded_verdicts",
    "results",
    "glue",
    "format_value",
    "claims_table",
    "recorded_claims",
    "reset",
    "read_notebook",
]

KINDS = ("claim", "control", "sanity", "report")
CHECK_KINDS = ("claim", "control", "sanity")  # the kinds that fail the run when they fail
VERDICTS = ("reproduced", "partly", "not reproduced", "reported only", "not tested here")

GLUE_PREFIX = "application/papermill.record/"  # myst-nb's prefix for glued values that are not displayed
META_KEY = "iclr26"

_CLAIMS: dict[str, Claim] = {}
_VERDICTS: dict[str, Verdict] = {}
_GLUED: set[str] = set()


@dataclass(frozen=True)
class Claim:
    """One checked statement: ``name`` (an identifier), the ``statement``, the measured ``value``, ``passed``.

    ``kind`` is one of :data:`KINDS`: ``"claim"`` (about the paper's result), ``"control"`` (the measurement detects
    the effect where it is present by construction), ``"sanity"`` (an identity or by-construction property) or
    ``"report"`` (shown, not asserted: ``passed`` is always true and ``holds`` says, where given, whether the paper's
    direction holds in this run); ``detail`` says what was compared.
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
    bound: float | None = None
    slack: float | None = None
    holds: bool | None = None

    @property
    def mark(self) -> str:
        return result_mark(self.kind, self.passed, self.holds)

    @property
    def established(self) -> bool | None:
        """Whether this result supports the paper's statement: a check's ``passed``, a report's ``holds``."""
        return _established(self.kind, self.passed, self.holds)


def _established(kind: str, passed: Any, holds: Any) -> Any:
    return holds if kind == "report" else passed


def result_mark(kind: str, passed: Any, holds: Any = None) -> str:
    """The mark a recorded result shows: ✓/✗ for a check that passed or failed; for a report ● (the paper's direction
    holds here), ○ (it does not) or · (no direction given). Used for :class:`Claim` rows and the run's JSON alike."""
    if kind == "report":
        return {True: "●", False: "○"}.get(holds, "·")
    return "✓" if passed else "✗"


# ---------------------------------------------------------------------------------------------- validation
def _check_name(name: Any, what: str = "name") -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a string, got {type(name).__name__}")
    if not name or not all(ch.isalnum() or ch in "_-." for ch in name):
        raise ValueError(f"{what} must be a non-empty identifier of letters, digits, '_', '-', '.', got {name!r}")
    return name


def _check_number(value: Any, what: str, finite: bool = False) -> float:
    """A real number; ``finite``: also refuse NaN and ±inf (a threshold, baseline, margin or tolerance that is not
    finite makes the comparison meaningless: NaN fails or passes everything, an infinite tolerance passes anything).
    A measured ``value`` may be NaN or infinite: the claim then fails (or passes) by its comparison, loudly."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        # numpy scalars are numbers.Real; 0-d arrays and tensors expose .item()
        item = getattr(value, "item", None)
        if callable(item) and getattr(value, "ndim", 1) == 0:
            return _check_number(item(), what, finite)
        raise TypeError(f"{what} must be a real number, got {type(value).__name__}")
    if finite and not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {float(value)}")
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
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def format_value(value: Any) -> str:
    """A measured value as the tables show it (4 significant digits; scientific outside [1e-3, 1e5))."""
    return _fmt(value)


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
    bound: float | None = None,
    slack: float | None = None,
) -> Claim:
    """Record and show one check. ``passed`` must be a real bool (numpy bools are accepted).

    ``kind="claim"`` (default) for a statement about the paper's result, ``kind="control"`` for a check that the
    measurement detects the effect where it is present by construction (the ``control_*`` functions set it),
    ``kind="sanity"`` for an identity or by-construction property (the ``check_*`` functions set it). How the
    threshold fared over seeds comes from the seed-robustness data (``make robustness``), shown by :func:`results`;
    it is never typed. Prefer the comparison helpers below; use this one for checks they do not cover.
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
    if kind not in CHECK_KINDS:
        raise ValueError(
            f"kind must be one of {CHECK_KINDS} (record a shown, unasserted number with report()), got {kind!r}"
        )
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
        bound=bound,
        slack=slack,
    )
    return _record(c)


def _record(c: Claim) -> Claim:
    _CLAIMS[c.name] = c
    _publish(
        {"text/html": _claim_html(c), "text/plain": _claim_text(c)},
        {META_KEY: {"claim": _json_safe(asdict(c))}},
    )
    return c


def claim_at_least(name: str, statement: str, value: Any, threshold: Any, *, kind: str = "claim") -> Claim:
    """Passes iff ``value >= threshold``."""
    v, t = _check_number(value, "value"), _check_number(threshold, "threshold", finite=True)
    return claim(name, statement, v, bool(v >= t), f"≥ {_fmt(t)}", kind=kind, bound=t, slack=v - t)


def claim_at_most(name: str, statement: str, value: Any, threshold: Any, *, kind: str = "claim") -> Claim:
    """Passes iff ``value <= threshold``."""
    v, t = _check_number(value, "value"), _check_number(threshold, "threshold", finite=True)
    return claim(name, statement, v, bool(v <= t), f"≤ {_fmt(t)}", kind=kind, bound=t, slack=t - v)


def _against_baseline(value: Any, baseline: Any, margin: Any) -> tuple[float, float, float]:
    v = _check_number(value, "value")
    b, m = _check_number(baseline, "baseline", finite=True), _check_number(margin, "margin", finite=True)
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
) -> Claim:
    """Passes iff ``value > baseline + margin`` (the baseline is measured in the same run)."""
    v, b, m = _against_baseline(value, baseline, margin)
    detail = f"baseline {_fmt(b)}" + (f" + margin {_fmt(m)}" if m else "")
    return claim(name, statement, v, bool(v > b + m), detail, kind=kind, bound=b + m, slack=v - (b + m))


def claim_less_than(
    name: str,
    statement: str,
    value: Any,
    baseline: Any,
    margin: Any = 0.0,
    *,
    kind: str = "claim",
) -> Claim:
    """Passes iff ``value < baseline - margin``."""
    v, b, m = _against_baseline(value, baseline, margin)
    detail = f"baseline {_fmt(b)}" + (f" − margin {_fmt(m)}" if m else "")
    return claim(name, statement, v, bool(v < b - m), detail, kind=kind, bound=b - m, slack=(b - m) - v)


def claim_close_to(name: str, statement: str, value: Any, target: Any, rtol: Any, *, kind: str = "claim") -> Claim:
    """Passes iff ``|value − target| ≤ rtol·|target|``."""
    v = _check_number(value, "value")
    t, r = _check_number(target, "target", finite=True), _check_number(rtol, "rtol", finite=True)
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
        bound=allowed,
        slack=allowed - abs(v - t),
    )


def claim_between(name: str, statement: str, value: Any, low: Any, high: Any, *, kind: str = "claim") -> Claim:
    """Passes iff ``low ≤ value ≤ high``."""
    v = _check_number(value, "value")
    lo, hi = _check_number(low, "low", finite=True), _check_number(high, "high", finite=True)
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
        bound=near,
        slack=min(v - lo, hi - v),
    )


# ---------------------------------------------------------------------------------------------- sanity checks, controls
_TWINS = {
    "sanity": ("check", "an identity, invariant or by-construction property (a sanity check)"),
    "control": (
        "control",
        "a control: the measurement detects the paper's effect where it is present by construction (an oracle, an "
        "exact solution, a planted case, a task where the shortcut fails)",
    ),
}


def _twin(fn, kind: str):
    """The ``check_*``/``control_*`` twin of a ``claim_*`` function: the same check, recorded with another kind."""
    prefix, what = _TWINS[kind]

    def twin(*args: Any, **kwargs: Any) -> Claim:
        if "kind" in kwargs:
            raise TypeError(f"{twin.__name__}() records a {kind} check; it takes no kind argument")
        return fn(*args, kind=kind, **kwargs)

    twin.__name__ = twin.__qualname__ = fn.__name__.replace("claim", prefix, 1)
    twin.__doc__ = f"Like :func:`{fn.__name__}`, for {what}: {(fn.__doc__ or '').strip()}"
    twin.__wrapped__ = fn
    return twin


check = _twin(claim, "sanity")
check_at_least = _twin(claim_at_least, "sanity")
check_at_most = _twin(claim_at_most, "sanity")
check_greater_than = _twin(claim_greater_than, "sanity")
check_less_than = _twin(claim_less_than, "sanity")
check_close_to = _twin(claim_close_to, "sanity")
check_between = _twin(claim_between, "sanity")

control = _twin(claim, "control")
control_at_least = _twin(claim_at_least, "control")
control_at_most = _twin(claim_at_most, "control")
control_greater_than = _twin(claim_greater_than, "control")
control_less_than = _twin(claim_less_than, "control")
control_close_to = _twin(claim_close_to, "control")
control_between = _twin(claim_between, "control")


# ---------------------------------------------------------------------------------------------- reports
def report(name: str, value: Any, text: str, *, holds: Any = None, glued: bool = True) -> Any:
    """Record a measured number that is shown but not asserted, and glue it under ``name`` for the prose.

    ``text`` says what was measured. ``holds`` (optional bool) says whether the paper's statement holds in this run
    by this number (a verdict can then cite it for what holds and what does not); a report never fails the run.
    ``glued=False`` records it without gluing (when the prose glues the same name another way). Returns ``value``,
    so ``gap = report("gap", a - b, "...")`` reads naturally.
    """
    _check_name(name)
    if not isinstance(text, str) or not text.strip():
        raise TypeError(f"text must be a non-empty string, got {text!r}")
    if holds is not None:
        if type(holds).__module__ == "numpy" and type(holds).__name__ in ("bool", "bool_"):
            holds = bool(holds)
        if not isinstance(holds, bool):
            raise TypeError(f"holds must be a bool or None, got {type(holds).__name__}")
    glued = check_bool(glued, "glued")
    plain = json_value(value, "value")
    detail = "" if holds is None else ("holds here" if holds else "does not hold here")
    _record(
        Claim(name=name, statement=text.strip(), value=plain, passed=True, detail=detail, kind="report", holds=holds)
    )
    if glued:
        glue(name, value)
    return value


def recorded_claims() -> list[Claim]:
    """The claims, controls, sanity checks and reports recorded in this Python session, in order."""
    return list(_CLAIMS.values())


def reset() -> None:
    """Forget the checks, reports, verdicts and glued names recorded in this session (tests use it)."""
    _CLAIMS.clear()
    _VERDICTS.clear()
    _GLUED.clear()


# ---------------------------------------------------------------------------------------------- seed robustness
ROBUSTNESS_FILE = "book/robustness.json"  # written by `make robustness`, found from the notebook's folder upwards


def load_robustness(path: str | Path | None = None) -> dict[str, Any]:
    """The seed-robustness summary that ``make robustness`` writes (``{"seeds": [...], "checks": {chapter: {name:
    {"passed", "runs", "worst_seed", "value", "bound", "slack"}}}}``), or ``{}`` where there is none (on Colab, say).

    ``path`` defaults to the environment variable ``ICLR26_ROBUSTNESS``, else ``book/robustness.json`` in the current
    folder or one above it (a chapter runs in ``nbs/``).
    """
    import os

    if path is None:
        path = os.environ.get("ICLR26_ROBUSTNESS")
    if path is None:
        here = Path.cwd()
        found = [d / ROBUSTNESS_FILE for d in (here, *here.parents[:2]) if (d / ROBUSTNESS_FILE).is_file()]
        if not found:
            return {}
        path = found[0]
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str, Path or None, got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"path {str(path)!r} is not a robustness summary (invalid JSON: {err})") from err
    return data if isinstance(data, dict) else {}


def _over_seeds(entry: dict[str, Any] | None) -> str:
    if not entry:
        return ""
    text = f"{entry.get('passed', '?')}/{entry.get('runs', '?')}"
    if entry.get("value") is not None:
        text += f", worst {_fmt(entry['value'])} (seed {entry.get('worst_seed', '?')})"
    return text


# ---------------------------------------------------------------------------------------------- tables
_SECTIONS = {"claim": "Paper claims", "control": "Controls", "report": "Reports", "sanity": "Sanity checks"}
_SECTION_ORDER = ("claim", "control", "report", "sanity")
_SECTION_NOTES = {
    "claim": "empirical statements about the paper's results at this scale: they could fail if the paper were wrong",
    "control": "checks that the measurement detects the paper's effect where it is present by construction",
    "report": "measured and shown, not asserted (● the paper's direction holds here, ○ it does not)",
    "sanity": "identities and by-construction properties: they fail only on a bug, and are not evidence for the paper",
}


class ChecksTable:
    """Claims, controls, reports and sanity checks in sections; renders as HTML in a notebook. ``frame`` holds the
    rows; the column ``over seeds`` comes from the seed-robustness data where ``chapter`` is given and it exists."""

    def __init__(self, claims: list[Claim], chapter: str | None = None, robustness: dict[str, Any] | None = None):
        import pandas as pd

        seeds = ((robustness or {}).get("checks") or {}).get(chapter or "", {})
        rows = [
            {
                "kind": c.kind,
                "": c.mark,
                "name": c.name,
                "statement": c.statement,
                "measured": _fmt(c.value),
                "check": c.detail,
                "over seeds": "" if c.kind == "report" else _over_seeds(seeds.get(c.name)),
            }
            for c in claims
        ]
        columns = ["kind", "", "name", "statement", "measured", "check", "over seeds"]
        self.frame = pd.DataFrame(rows, columns=columns)
        self.seeds = (robustness or {}).get("seeds")

    def _sections(self):
        for kind in _SECTION_ORDER:
            part = self.frame[self.frame.kind == kind].drop(columns="kind")
            if kind in ("claim", "sanity") or len(part):
                if not part["over seeds"].astype(bool).any():
                    part = part.drop(columns="over seeds")
                if not part["check"].astype(bool).any():
                    part = part.drop(columns="check")
                yield kind, part

    def _count(self, kind: str, part) -> str:
        if kind == "report":
            return f"{len(part)}"
        return f"{int((part[''] == '✓').sum())}/{len(part)} passed"

    def _repr_html_(self) -> str:
        out = []
        for kind, part in self._sections():
            out.append(
                f"<p><b>{_SECTIONS[kind]}</b> ({self._count(kind, part)}) — "
                f"<span style='color:#57606a'>{_SECTION_NOTES[kind]}</span></p>"
            )
            if len(part):
                styler = part.style.hide(axis="index").set_properties(**{"text-align": "left"})
                out.append(styler.to_html())
            else:
                out.append("<p><i>none</i></p>")
        if self.seeds and self.frame["over seeds"].astype(bool).any():
            out.append(
                "<p style='color:#57606a'><i>over seeds</i>: passes and the value nearest the line at the "
                f"<code>ci</code> scale over seeds {', '.join(map(str, self.seeds))}, from the seed-robustness page "
                "(<code>make robustness</code>).</p>"
            )
        return "\n".join(out)

    def __repr__(self) -> str:
        out = []
        for kind, part in self._sections():
            out.append(f"{_SECTIONS[kind]} ({self._count(kind, part)})")
            out.append(part.to_string(index=False) if len(part) else "  none")
        return "\n".join(out)


def claims_table(claims: list[Claim] | None = None, chapter: str | None = None) -> ChecksTable:
    """The checks and reports (default: all recorded in this session) as tables by kind: paper claims, controls,
    reports, sanity checks. With ``chapter`` (its slug), each check shows how it fared over the seeds of the
    seed-robustness data (:func:`load_robustness`)."""
    claims = recorded_claims() if claims is None else claims
    if not isinstance(claims, list) or not all(isinstance(c, Claim) for c in claims):
        raise TypeError("claims must be a list of Claim objects or None")
    if chapter is not None:
        _check_name(chapter, "chapter")
    return ChecksTable(claims, chapter, load_robustness() if chapter else None)


# ---------------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """One row of a chapter's verdict table: a ``headline`` claim of the paper, the ``verdict`` (one of
    :data:`VERDICTS`), what the ``paper`` reports, the ``evidence`` and ``controls`` (names of results recorded in the
    run) and ``why`` in one line."""

    headline: str
    verdict: str
    paper: str
    evidence: tuple[str, ...]
    controls: tuple[str, ...]
    why: str


def _check_text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must be a non-empty string")
    return value.strip()


def _names(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{what} must be a name or a list of names of recorded results, got {type(value).__name__}")
    names = tuple(_check_name(v, what) for v in value)
    if len(set(names)) != len(names):
        raise ValueError(f"{what} names a result twice: {list(names)}")
    return names


def _row_problems(word: Any, evidence: Any, controls: Any, recorded: dict[str, Any]) -> list[str]:
    """What the verdict rules find wrong with a row citing ``evidence`` and ``controls`` (names), given the results
    ``recorded`` by name (:class:`Claim` objects in a session, dicts in a run's JSON)."""

    def get(c: Any, key: str) -> Any:
        return c.get(key) if isinstance(c, dict) else getattr(c, key)

    missing = [n for n in (*evidence, *controls) if n not in recorded]
    if missing:
        return [f"evidence/controls name results this run did not record: {missing}"]
    ev, ctl = [recorded[n] for n in evidence], [recorded[n] for n in controls]
    problems = []
    not_controls = [n for n in controls if get(recorded[n], "kind") != "control"]
    if not_controls:
        problems.append(f"controls must be recorded with control_*; these are not controls: {not_controls}")
    if word == "not reproduced" and not any(get(c, "kind") == "control" and get(c, "passed") for c in ctl):
        problems.append(
            "'not reproduced' needs a passing control (a check, recorded with control_*, that the measurement detects "
            "the paper's effect where it is present by construction); without one the word is 'not tested here', and "
            "why says what a fair test would need"
        )
    if word == "reproduced" and not any(get(c, "kind") == "claim" and get(c, "passed") for c in ev):
        problems.append(
            "'reproduced' needs at least one passing claim (claim_*) in its evidence, not only sanity checks or reports"
        )
    if word == "partly":
        holds = [get(c, "name") for c in ev if _established(get(c, "kind"), get(c, "passed"), get(c, "holds"))]
        short = [get(c, "name") for c in ev if get(c, "name") not in holds]
        if not holds or not short:
            problems.append(
                "'partly' names what holds and what does not, each with evidence: cite at least one result that holds "
                "(a passing claim, or a report with holds=True) and one that does not or is not established (a report "
                f"with holds=False or None); holds: {holds}, does not: {short}"
            )
    if word == "reported only" and not ev:
        problems.append("'reported only' needs the reports it rests on in its evidence")
    return problems


def verdict(
    headline: str,
    verdict: str,
    *,
    paper: str,
    evidence: Any = (),
    controls: Any = (),
    why: str,
) -> Verdict:
    """Record one row of the chapter's verdict table (shown by :func:`results`).

    ``headline`` is one headline claim of the paper (from the paper, not from what happened to work here); ``paper``
    what the paper reports for it (its number, figure or setting); ``verdict`` one of :data:`VERDICTS`;
    ``evidence`` the names of the claims, reports and sanity checks of this run it rests on, and ``controls`` the names
    of the controls that show the measurement could have seen the effect — all recorded before this call; the table
    shows their measured values, so a number is written once. ``why`` says in one line why.

    The rules (a ``ValueError`` otherwise): every name was recorded in this run and every control is a control;
    **not reproduced** cites at least one control that passed (without one the word is **not tested here**, and
    ``why`` says what a fair test would need); **reproduced** cites at least one passing claim; **partly** cites what
    holds and what does not (a passing claim or a report that holds, and a report that does not or is not
    established); **reported only** cites its reports. :func:`verdict_word` picks the word from what holds.
    Recording the same headline twice keeps the last row.
    """
    headline = _check_text(headline, "headline")
    word = _check_text(verdict, "verdict")
    if word not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    paper = _check_text(paper, "paper")
    why = _check_text(why, "why")
    ev, ctl = _names(evidence, "evidence"), _names(controls, "controls")
    problems = _row_problems(word, ev, ctl, _CLAIMS)
    if problems:
        raise ValueError(f"verdict {headline!r} ({word}): " + "; ".join(problems))
    row = Verdict(headline=headline, verdict=word, paper=paper, evidence=ev, controls=ctl, why=why)
    _VERDICTS[headline] = row
    return row


def verdict_word(*conditions: Any, none: str = "not reproduced") -> str:
    """The verdict word by rule: ``"reproduced"`` if every condition holds, ``"partly"`` if some do, else ``none``.

    A condition is a bool or the name of a recorded result: a check holds when it passed, a report when its
    ``holds`` is true (a report without ``holds`` does not count as holding). ``none`` is ``"not reproduced"``
    (which :func:`verdict` accepts only with a passing control), ``"not tested here"`` or ``"reported only"``.
    """
    if not conditions:
        raise ValueError("verdict_word needs at least one condition (conditions: bools or names of results)")
    if none not in ("not reproduced", "not tested here", "reported only"):
        raise ValueError(f"none must be 'not reproduced', 'not tested here' or 'reported only', got {none!r}")
    flags = []
    for c in conditions:
        if type(c).__module__ == "numpy" and type(c).__name__ in ("bool", "bool_"):
            c = bool(c)
        if isinstance(c, bool):
            flags.append(c)
        elif isinstance(c, str):
            if c not in _CLAIMS:
                raise ValueError(f"conditions name a result this run did not record: {c!r}")
            flags.append(bool(_CLAIMS[c].established))
        else:
            raise TypeError(f"conditions must be bools or names of recorded results, got {type(c).__name__}")
    return "reproduced" if all(flags) else "partly" if any(flags) else none


def recorded_verdicts() -> list[Verdict]:
    """The verdict rows recorded in this Python session, in order."""
    return list(_VERDICTS.values())


def verdict_problems(result: dict[str, Any]) -> list[str]:
    """What breaks the verdict rules in a run's result (``python -m iclr26 run --json``, or :func:`read_notebook`):
    rows citing names the run did not record, controls that are not controls, and the rules of :func:`verdict`."""
    if not isinstance(result, dict):
        raise TypeError(f"result must be a dict, got {type(result).__name__}")
    recorded = {c["name"]: c for c in result.get("claims", [])}
    problems = []
    for row in result.get("verdicts", []):
        head = row.get("headline", "?")
        ev, ctl = row.get("evidence"), row.get("controls", [])
        if not isinstance(ev, list) or not isinstance(ctl, list):
            problems.append(f"{head!r}: evidence and controls must be lists of recorded names")
            continue
        problems += [f"{head!r}: {p}" for p in _row_problems(row.get("verdict"), ev, ctl, recorded)]
    return problems


def uncited(claims: list[Claim] | None = None, rows: list[Verdict] | None = None) -> list[str]:
    """Names recorded in this session that no verdict cites and the prose cannot quote (never glued)."""
    claims = recorded_claims() if claims is None else claims
    rows = recorded_verdicts() if rows is None else rows
    cited = {n for r in rows for n in (*r.evidence, *r.controls)}
    return [c.name for c in claims if c.name not in cited and c.name not in _GLUED]


_VERDICT_COLOURS = {
    "reproduced": "#1a7f37",
    "partly": "#9a6700",
    "not reproduced": "#cf222e",
    "reported only": "#57606a",
    "not tested here": "#57606a",
}


def _evidence_html(names: tuple[str, ...], label: str = "") -> str:
    parts = []
    for n in names:
        c = _CLAIMS.get(n)
        if c is None:
            parts.append(f"<code>{html.escape(n)}</code> (not recorded)")
            continue
        colour = {"✓": "#1a7f37", "✗": "#cf222e", "●": "#1a7f37", "○": "#cf222e"}.get(c.mark, "#57606a")
        check = f" <span style='color:#57606a'>({html.escape(c.detail)})</span>" if c.detail else ""
        parts.append(
            f"<span title='{html.escape(c.statement, quote=True)}'><b style='color:{colour}'>{c.mark}</b> {label}"
            f"<code>{html.escape(n)}</code> {html.escape(_fmt(c.value))}{check}</span>"
        )
    return "<br>".join(parts)


def _evidence_text(names: tuple[str, ...], label: str = "") -> str:
    return "; ".join(
        f"{_CLAIMS[n].mark} {label}{n} {_fmt(_CLAIMS[n].value)}" if n in _CLAIMS else f"{n} (not recorded)"
        for n in names
    )


class VerdictsTable:
    """The verdict rows as a table; renders as HTML in a notebook. ``frame`` holds the rows."""

    def __init__(self, rows: list[Verdict]):
        import pandas as pd

        self.rows = rows
        self.frame = pd.DataFrame(
            [asdict(r) for r in rows], columns=["headline", "verdict", "paper", "evidence", "controls", "why"]
        )

    def metadata(self) -> list[dict[str, Any]]:
        return [
            _json_safe({**asdict(r), "evidence": list(r.evidence), "controls": list(r.controls)}) for r in self.rows
        ]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, str], dict[str, Any]]:
        # the rows travel in the output's metadata, where read_notebook finds them
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}, {META_KEY: {"verdicts": self.metadata()}}

    def _repr_html_(self) -> str:
        # one block per row (headline and verdict, then the paper, the evidence and why on their own lines): it reads
        # in the book's narrow column, where a five-column table would squeeze every cell
        blocks = []
        for r in self.rows:
            colour = _VERDICT_COLOURS[r.verdict]
            ev = "<br>".join(x for x in (_evidence_html(r.evidence), _evidence_html(r.controls, "control ")) if x)
            blocks.append(
                f"<div class='iclr26-verdict' style='border-left: 4px solid {colour}; padding: 0.2em 0 0.2em 0.7em; "
                f"margin: 0.6em 0;'><div><b>{html.escape(r.headline)}</b> — "
                f"<b style='color:{colour}'>{html.escape(r.verdict)}</b></div>"
                f"<div><i>The paper:</i> {html.escape(r.paper)}</div>"
                f"<div><i>Evidence from this run:</i><br>{ev or '—'}</div>"
                f"<div><i>Why:</i> {html.escape(r.why)}</div></div>"
            )
        return f"<div class='iclr26-verdicts'>{''.join(blocks)}</div>"

    def __repr__(self) -> str:
        lines = []
        for r in self.rows:
            ev = "; ".join(x for x in (_evidence_text(r.evidence), _evidence_text(r.controls, "control ")) if x)
            lines.append(f"[{r.verdict}] {r.headline} — paper: {r.paper} — {ev or 'no evidence'} — {r.why}")
        return "\n".join(lines)


def verdicts_table(rows: list[Verdict] | None = None) -> VerdictsTable:
    """The verdict rows (default: all recorded in this session) as one table."""
    rows = recorded_verdicts() if rows is None else rows
    if not isinstance(rows, list) or not all(isinstance(r, Verdict) for r in rows):
        raise TypeError("rows must be a list of Verdict objects or None")
    return VerdictsTable(rows)


class Results:
    """A chapter's Results: the verdict table, then the checks and reports by kind, then what no verdict cites.

    Renders as HTML in a notebook; its output carries the verdict rows, where :func:`read_notebook` finds them."""

    def __init__(self, chapter: str | None = None):
        self.verdicts = verdicts_table()
        self.checks = claims_table(chapter=chapter)
        self.uncited = uncited()

    def _uncited_note(self) -> str:
        if not self.uncited:
            return ""
        return "Recorded, but cited by no verdict and quoted nowhere in the text: " + ", ".join(self.uncited) + "."

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, str], dict[str, Any]]:
        note = self._uncited_note()
        page = [
            "<p><b>Verdicts</b> — <span style='color:#57606a'>each headline claim of the paper, our verdict, what the "
            "paper reports, and the results of this run it rests on (hover a name for its statement)</span></p>",
            self.verdicts._repr_html_(),
            self.checks._repr_html_(),
        ]
        if note:
            page.append(f"<p style='color:#57606a'>{html.escape(note)}</p>")
        text = "\n".join(x for x in (repr(self.verdicts), repr(self.checks), note) if x)
        meta = {META_KEY: {"verdicts": self.verdicts.metadata(), "uncited": self.uncited}}
        return {"text/html": "\n".join(page), "text/plain": text}, meta

    def __repr__(self) -> str:
        return self._repr_mimebundle_()[0]["text/plain"]


def results(chapter: str | None = None) -> Results:
    """The chapter's Results section in one call: the verdict table (headline | the paper | verdict | evidence | why),
    then the paper claims, controls, reports and sanity checks, then the names no verdict cites and no glue quotes.

    ``chapter`` (the chapter's slug) looks up how each check fared over seeds in the seed-robustness data
    (:func:`load_robustness`). Call it last in the Results cell, after the :func:`verdict` rows."""
    if chapter is not None:
        _check_name(chapter, "chapter")
    return Results(chapter)


# ---------------------------------------------------------------------------------------------- glue
def glue(name: str, value: Any, display: bool = False) -> Any:
    """Glue ``value`` under ``name`` in myst-nb's format, for ``{glue:text}`name``` in the book's prose.

    Numbers, bools and strings (and lists/dicts of those) are accepted. ``display=True`` also shows it.
    Returns the value, so ``x = glue("x", compute())`` reads naturally.
    """
    _check_name(name)
    display = check_bool(display, "display")
    plain = json_value(value, "value")
    text = _fmt(plain) if isinstance(plain, (int, float)) and not isinstance(plain, bool) else str(plain)
    if isinstance(plain, float):
        text = repr(plain)  # full precision: the book formats it with {glue:text}`name:.3f`
    _GLUED.add(name)
    prefix = "" if display else GLUE_PREFIX
    metadata = {"scrapbook": {"name": name, "mime_prefix": prefix}, META_KEY: {"glue": _json_safe(plain)}}
    if _in_ipython():
        from IPython.display import display as ipy_display

        ipy_display({prefix + "text/plain": text}, raw=True, metadata=metadata)
    return value


# ---------------------------------------------------------------------------------------------- reading back
def read_notebook(path: str | Path) -> dict[str, Any]:
    """Checks, reports, verdicts and glued values recorded in an executed notebook.

    Returns ``{"claims": [{name, statement, value, passed, detail, kind, bound, slack, holds}, ...],
    "verdicts": [{headline, verdict, paper, evidence, controls, why}, ...], "glued": {name: value},
    "uncited": [name, ...], "duplicates": [name, ...]}``: ``claims`` holds every kind (claims, controls, sanity
    checks and reports, told apart by ``kind``); ``uncited`` the names that :func:`results` found cited by no verdict
    and never glued.
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
    uncited_names: list[str] = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) or []:
            meta = (out.get("metadata") or {}).get(META_KEY) or {}
            if "claim" in meta:
                c = {"detail": "", "kind": "claim", "bound": None, "slack": None, "holds": None, **meta["claim"]}
                if c["name"] in claims and c["name"] not in duplicates:
                    duplicates.append(c["name"])
                claims[c["name"]] = c
            for row in meta.get("verdicts", []):
                verdicts[row["headline"]] = row
            if "uncited" in meta:
                uncited_names = list(meta["uncited"])
            if "glue" in meta:
                name = (out.get("metadata") or {}).get("scrapbook", {}).get("name")
                if name:
                    glued[name] = meta["glue"]
    return {
        "claims": list(claims.values()),
        "verdicts": list(verdicts.values()),
        "glued": glued,
        "uncited": uncited_names,
        "duplicates": duplicates,
    }
