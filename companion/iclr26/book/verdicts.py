"""Verdicts and the Results section: a chapter's verdict rows (:func:`verdict`, the word by :func:`verdict_word` and
its rules), and :func:`results`, which renders the verdict table, then the claims, controls, reports and sanity checks
(how each fared over seeds read from ``book/robustness.json``)."""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iclr26.book.claims import (
    _CLAIMS,
    _GLUED,
    _VERDICTS,
    META_KEY,
    VERDICTS,
    Claim,
    _check_name,
    _established,
    _fmt,
    _json_safe,
    recorded_claims,
)

__all__ = [
    "Verdict",
    "verdict",
    "verdicts_table",
    "verdict_word",
    "verdict_problems",
    "recorded_verdicts",
    "results",
    "claims_table",
]


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


def verdict_word(*conditions: Any, none: str = "not reproduced", held: str = "reproduced") -> str:
    """The verdict word by rule: ``held`` if every condition holds, ``"partly"`` if some do, else ``none``.

    A condition is a bool or the name of a recorded result: a check holds when it passed, a report when its
    ``holds`` is true (a report without ``holds`` does not count as holding). ``none`` is ``"not reproduced"``
    (which :func:`verdict` accepts only with a passing control), ``"not tested here"`` or ``"reported only"``.

    ``held`` is ``"reproduced"``, or ``"reported only"`` for a row whose outcome is shown but not read for the paper
    (a pass would not count for it, so a miss does not count against it): then every condition holding gives
    ``"reported only"`` and anything less gives ``none``, never ``"partly"``.
    """
    if not conditions:
        raise ValueError("verdict_word needs at least one condition (conditions: bools or names of results)")
    if none not in ("not reproduced", "not tested here", "reported only"):
        raise ValueError(f"none must be 'not reproduced', 'not tested here' or 'reported only', got {none!r}")
    if held not in ("reproduced", "reported only"):
        raise ValueError(f"held must be 'reproduced' or 'reported only', got {held!r}")
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
    if all(flags):
        return held
    return "partly" if any(flags) and held == "reproduced" else none


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
