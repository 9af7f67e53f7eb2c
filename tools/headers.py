"""Write each chapter header's measured run times from a `make bench` file, so no header is typed by hand.

    python -m tools.headers _build/bench.json

A chapter's header line reads ``*Run time on 2 CPU cores (measured by `make bench`, DATE): ci ≈ N s · book ≈ N s …*``;
this rewrites DATE and the two numbers from the bench file's `ci` and `book` runs, and leaves the rest of the line
(notes, the `paper` estimate) as its author wrote it. DATE is the later of the two runs' own dates, so a chapter kept
from an earlier bench by `--merge` keeps the date it was measured on (a run kept from a file whose runs carried no date
keeps the date the header already shows). The notebooks stay stripped of outputs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tools.common import ROOT

HEADER = re.compile(r"\(measured by `make bench`, [0-9-]+\): ci ≈ [\d.–]+ s · book ≈ [\d.–]+ (?:s|min)")


def header_text(date: str, ci_seconds: float, book_seconds: float) -> str:
    # rounded from the one-decimal value the Reproducibility page shows, so the two can never read differently
    ci, book = round(ci_seconds, 1), round(book_seconds, 1)
    return f"(measured by `make bench`, {date}): ci ≈ {ci:.0f} s · book ≈ {book:.0f} s"


def update_headers(bench: dict, nbs: Path = ROOT / "nbs") -> list[str]:
    """Rewrite the header of every notebook that has a `ci` and a `book` run in ``bench``; return the slugs changed."""
    seconds: dict[str, dict[str, float]] = {}
    dates: dict[str, dict[str, str | None]] = {}
    for r in bench.get("runs", []):
        seconds.setdefault(Path(r["notebook"]).stem, {})[r["scale"]] = float(r["seconds"])
        dates.setdefault(Path(r["notebook"]).stem, {})[r["scale"]] = r.get("date")
    changed = []
    for slug, by_scale in sorted(seconds.items()):
        path = Path(nbs) / f"{slug}.ipynb"
        if not path.is_file() or not {"ci", "book"} <= set(by_scale):
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        first = nb["cells"][0]
        text = "".join(first["source"])
        run_dates = [dates[slug][scale] for scale in ("ci", "book")]
        if all(run_dates):
            date = max(run_dates)
        elif not bench.get("merged_from"):  # an unmerged file: every run was measured on its date
            date = bench["date"]
        else:  # kept by --merge from a file whose runs carried no date: keep the header's
            shown = re.search(r"\(measured by `make bench`, ([0-9-]+)\)", text)
            date = shown.group(1) if shown else bench["date"]
        new = HEADER.sub(header_text(date, by_scale["ci"], by_scale["book"]), text, count=1)
        if new == text:
            continue
        first["source"] = new.splitlines(keepends=True)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        changed.append(slug)
    return changed


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m tools.headers BENCH.json", file=sys.stderr)
        sys.exit(2)
    print("headers updated:", ", ".join(update_headers(json.loads(Path(sys.argv[1]).read_text()))) or "none")
