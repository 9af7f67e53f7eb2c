"""Write book/verdicts.md: every chapter's verdict rows in one table, with the book-wide totals.

    python -m tools.verdicts _build/bench.json        # rewrite book/verdicts.md from a `make bench` file

The rows come from each chapter's `book`-scale run (its `verdicts`, as ``python -m iclr26 run --json`` writes them),
with the measured values of the results each row cites (evidence and controls, by name); where the `ci` run of the
same chapter gave another verdict word, the page says so. The totals count the rows that rest on a control.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from iclr26.book import VERDICTS, format_value, result_mark
from tools.common import ROOT
from tools.reproducibility import load_runs

_ORDER = {"ci": 0, "book": 1, "paper": 2}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def verdict_rows(runs: list[dict]) -> list[dict]:
    """One row per (chapter, headline): the verdict of the largest scale run, and the `ci` verdict beside it."""
    by_chapter: dict[str, dict[str, dict]] = {}
    for r in runs:
        by_chapter.setdefault(Path(r["notebook"]).stem, {})[r["scale"]] = r
    rows = []
    for slug in sorted(by_chapter):
        scales = by_chapter[slug]
        main_scale = max(scales, key=lambda s: _ORDER.get(s, -1))
        ci_words = {v["headline"]: v["verdict"] for v in scales.get("ci", {}).get("verdicts", [])}
        for v in scales[main_scale].get("verdicts", []):
            rows.append({"chapter": slug, "scale": main_scale, "ci_verdict": ci_words.get(v["headline"]), **v})
    return rows


def _value(x) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return _cell(str(x))
    return format_value(x)


def evidence_cell(row: dict, claims: dict[str, dict], sep: str = "<br>") -> str:
    """The row's evidence and controls with this run's values and marks (✓/✗ checks, ●/○ reports)."""
    parts = []
    for label, names in (("", row.get("evidence", [])), ("control ", row.get("controls", []))):
        for n in names if isinstance(names, list) else [names]:
            c = claims.get(n)
            if c is None:
                parts.append(f"{label}`{n}` (not recorded)")
                continue
            mark = result_mark(c.get("kind", "claim"), c.get("passed"), c.get("holds"))
            parts.append(f"{mark} {label}`{n}` {_value(c.get('value'))}")
    return sep.join(parts) if parts else "—"


def totals_sentence(rows: list[dict]) -> str:
    counts = Counter(r["verdict"] for r in rows)
    n_papers = len({r["chapter"] for r in rows})
    parts = [f"{counts[w]} {w}" for w in VERDICTS if counts[w]]
    controlled = sum(bool(r.get("controls")) for r in rows)
    return (
        f"Of {len(rows)} headline claims across {n_papers} papers: " + ", ".join(parts) + f"; {controlled} of the rows "
        "cite a control."
    )


def write_page(items, out: Path, source: str = "`make bench`") -> Path:
    runs, _ = load_runs(items)
    rows = verdict_rows(runs)
    claims_by_run = {(Path(r["notebook"]).stem, r["scale"]): {c["name"]: c for c in r.get("claims", [])} for r in runs}
    intro = (
        "Which of each paper's headline claims this book reproduced, which it did not, and which it only reports. "
        "Each row is a chapter's own verdict table, as its published (`book`-scale) run recorded it, from "
        f"{source}: what the paper reports, the verdict, the results of the run it rests on — named, with their "
        "measured values — and why. A verdict of *not reproduced* is a result, not a failure: the chapter still "
        "runs, and says why."
    )
    legend = (
        "*reproduced*: the paper's claim holds here and is asserted as a claim; *partly*: some of it holds here and "
        "some does not or is not established, each named; *not reproduced*: measured here, the result contradicts "
        "the paper, and a **control** in the same run (the measurement detects the effect where it is present by "
        "construction) shows that the measurement could have seen it; *reported only*: measured and shown, not "
        "asserted; *not tested here*: outside what this chapter can test fairly, with what a fair test would need. "
        "Marks: ✓/✗ a check passed or failed, ● a report in the paper's direction, ○ one against it, · a number "
        "without a direction. See {doc}`conventions`."
    )
    lines = ["# Verdicts", "", intro, "", legend, ""]
    if not rows:
        lines += ["No verdict has been recorded yet: `make bench` fills this page.", ""]
    else:
        lines += [f"**{totals_sentence(rows)}**", ""]
        per = Counter((r["chapter"], r["verdict"]) for r in rows)
        controls = Counter(r["chapter"] for r in rows if r.get("controls"))
        chapters = sorted({r["chapter"] for r in rows})
        # three narrow columns, so the table fits a laptop's browser without scrolling sideways
        lines += ["| chapter | verdicts | rows with a control |", "|---|---|--:|"]
        for slug in chapters:
            counts = " · ".join(f"{per[(slug, w)]} {w}" for w in VERDICTS if per[(slug, w)])
            lines.append(f"| {{doc}}`{slug} <../nbs/{slug}>` | {counts} | {controls[slug]} |")
        lines.append("")
        for slug in chapters:  # one list per chapter: a row per headline claim, its parts on their own lines
            lines += [f"## `{slug}`", "", f"{{doc}}`The chapter <../nbs/{slug}>`.", ""]
            for r in (r for r in rows if r["chapter"] == slug):
                word = f"**{r['verdict']}**"
                if r["ci_verdict"] and r["ci_verdict"] != r["verdict"]:
                    word += f" (at `ci`: {r['ci_verdict']})"
                ev = evidence_cell(r, claims_by_run.get((slug, r["scale"]), {}), sep="; ")
                why = _cell(r["why"]).rstrip(".")
                lines += [
                    f"- {_cell(r['headline'])} — {word}\\",
                    f"  *The paper:* {_cell(r.get('paper', '—'))}\\",
                    f"  *Evidence:* {ev}\\",
                    f"  *Why:* {why}.",
                ]
            lines.append("")
    out = Path(out)
    out.write_text("\n".join(lines))
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python -m tools.verdicts BENCH_OR_RESULT.json [...]", file=sys.stderr)
        sys.exit(2)
    print(write_page([Path(p) for p in sys.argv[1:]], ROOT / "book" / "verdicts.md"))
