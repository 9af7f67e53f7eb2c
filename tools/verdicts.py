"""Write book/verdicts.md: every chapter's verdict rows in one table, with the book-wide totals.

    python tools/verdicts.py _build/bench.json        # rewrite book/verdicts.md from a `make bench` file

The rows come from each chapter's `book`-scale run (its `verdicts`, as ``python -m iclr26 run --json`` writes them);
where the `ci` run of the same chapter gave another verdict word, the page says so.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "companion"))

from reproducibility import load_runs  # noqa: E402

from iclr26.claims import VERDICTS  # noqa: E402

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


def totals_sentence(rows: list[dict]) -> str:
    counts = Counter(r["verdict"] for r in rows)
    n_papers = len({r["chapter"] for r in rows})
    parts = [f"{counts[w]} {w}" for w in VERDICTS if counts[w]]
    return f"Of {len(rows)} headline claims across {n_papers} papers: " + ", ".join(parts) + "."


def write_page(items, out: Path, source: str = "`make bench`") -> Path:
    runs, _ = load_runs(items)
    rows = verdict_rows(runs)
    intro = (
        "Which of each paper's headline claims this book reproduced, which it did not, and which it only reports. "
        "Each row is a chapter's own verdict table, as its published (`book`-scale) run recorded it, from "
        f"{source}. A verdict of *not reproduced* is a result, not a failure: the chapter still runs, and says why."
    )
    legend = (
        "*reproduced*: the paper's claim holds here and is asserted as a claim; *partly*: some of it holds, or only "
        "at some scales; *not reproduced*: measured here, and the result contradicts the paper; *reported only*: "
        "measured and shown, but not asserted (it does not hold on every seed, or the scale is too small to decide); "
        "*not tested here*: outside what this chapter runs."
    )
    lines = ["# Verdicts", "", intro, "", legend, ""]
    if not rows:
        lines += ["No verdict has been recorded yet: `make bench` fills this page.", ""]
    else:
        lines += [f"**{totals_sentence(rows)}**", ""]
        per = Counter((r["chapter"], r["verdict"]) for r in rows)
        chapters = sorted({r["chapter"] for r in rows})
        lines += ["| chapter | " + " | ".join(VERDICTS) + " |", "|---" * (len(VERDICTS) + 1) + "|"]
        for slug in chapters:
            lines.append(f"| `{slug}` | " + " | ".join(str(per[(slug, w)]) for w in VERDICTS) + " |")
        lines.append("")
        for slug in chapters:  # one narrow table per chapter, so the page reads without scrolling sideways
            lines += [f"## `{slug}`", "", f"{{doc}}`The chapter <../nbs/{slug}>`.", ""]
            lines += ["| the paper claims | verdict | why, and the evidence |", "|---|---|---|"]
            for r in (r for r in rows if r["chapter"] == slug):
                word = f"**{r['verdict']}**"
                if r["ci_verdict"] and r["ci_verdict"] != r["verdict"]:
                    word += f" (at `ci`: {r['ci_verdict']})"
                why = _cell(r["why"]).rstrip(".")
                lines.append(f"| {_cell(r['headline'])} | {word} | {why}. *Evidence:* {_cell(r['evidence'])} |")
            lines.append("")
    out = Path(out)
    out.write_text("\n".join(lines))
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python tools/verdicts.py BENCH_OR_RESULT.json [...]", file=sys.stderr)
        sys.exit(2)
    print(write_page([Path(p) for p in sys.argv[1:]], ROOT / "book" / "verdicts.md"))
