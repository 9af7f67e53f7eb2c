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
from typing import TYPE_CHECKING, Any

from iclr26.validate import as_bool, json_value

if TYPE_CHECKING:
    from iclr26.book.verdicts import Verdict

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
    "claim_where",
    "report",
    "KINDS",
    "VERDICTS",
    "result_mark",
    "glue",
    "format_value",
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

    def _ipython_display_(self) -> None:
        """Nothing: the row was shown when the result was recorded, so a ``claim_*(...)`` call left as a cell's last
        line does not add the dataclass's repr below it (``repr`` itself is unchanged)."""


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


_DRY_RUN: list[bool] = []  # non-empty while claim_where evaluates a comparison without recording it


def _record(c: Claim) -> Claim:
    if _DRY_RUN:
        return c
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


# ---------------------------------------------------------------------------------------------- a claim with a premise
_PREMISED = (
    claim_at_least,
    claim_at_most,
    claim_greater_than,
    claim_less_than,
    claim_close_to,
    claim_between,
    control_at_least,
    control_at_most,
    control_greater_than,
    control_less_than,
    control_close_to,
    control_between,
)


def claim_where(premise: Any, check: Any, name: str, statement: str, value: Any, *line: Any, **kw: Any) -> Claim:
    """Assert ``check(name, statement, value, *line, **kw)`` (a ``claim_*`` or ``control_*`` comparison) where the
    test's ``premise`` holds; where it does not, record the same comparison as a report whose ``holds`` says whether
    it would have passed. A report never fails the run: use this for a claim whose test means something only under a
    premise measured in the same run (a control passed, a model left its loss plateau), and say in the verdict what
    the premise was. The premise may also be a scale's switch, for a claim that one scale cannot decide honestly (a
    training too short for it to hold on every seed); the chapter's ``metadata.iclr26.book_only`` then says why, and
    the larger scale asserts it. The premise must not be the claim itself (that would be a claim that cannot fail).

    Either way nothing is glued (a claim is not); returns the recorded :class:`Claim` (kind ``"report"`` when the
    premise failed).
    """
    premise = as_bool(premise, "premise")
    if not any(check is fn for fn in _PREMISED):
        raise TypeError(
            "check must be one of the claim_*/control_* comparisons (claim_at_least, ..., control_between), "
            f"got {getattr(check, '__name__', type(check).__name__)!r}"
        )
    if premise:
        return check(name, statement, value, *line, **kw)
    _DRY_RUN.append(True)
    try:
        would = check(name, statement, value, *line, **kw)
    finally:
        _DRY_RUN.pop()
    report(name, value, statement, holds=would.passed, glued=False)
    return _CLAIMS[name]


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
    glued = as_bool(glued, "glued")
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


# ---------------------------------------------------------------------------------------------- glue
def glue(name: str, value: Any, display: bool = False) -> Any:
    """Glue ``value`` under ``name`` in myst-nb's format, for ``{glue:text}`name``` in the book's prose.

    Numbers, bools and strings (and lists/dicts of those) are accepted. ``display=True`` also shows it.
    Returns the value, so ``x = glue("x", compute())`` reads naturally.
    """
    _check_name(name)
    display = as_bool(display, "display")
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
