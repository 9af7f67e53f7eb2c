"""Build the book with warnings as errors from notebooks that were already executed (no second execution).

    python -m tools.build_ci_book --executed _build/ci/executed --out _build/ci-book
    python -m tools.build_ci_book --executed /tmp --only influential_sets --out /tmp/one-book   # one chapter

It stages a copy of the book (config, toc, book/ pages, the companion's README) with the executed notebooks in nbs/,
turns execution off, writes the Reproducibility page from the run results found beside the executed notebooks
(``../results/*.json``), and runs
``jupyter-book build -W -n --keep-going --all``. A broken reference, citation or glue name fails it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tools.common import ROOT
from tools.reproducibility import write_page


def _filter_toc(toc: dict, keep: set[str]) -> dict:
    """Keep the non-chapter pages and only the chapters in ``keep`` (slugs); drop parts left empty."""
    parts = []
    for part in toc.get("parts", []):
        chapters = [
            c for c in part.get("chapters", []) if not c["file"].startswith("nbs/") or Path(c["file"]).stem in keep
        ]
        if chapters:
            parts.append({**part, "chapters": chapters})
    return {**toc, "parts": parts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executed", required=True, help="folder with executed <slug>.ipynb files")
    parser.add_argument("--out", required=True, help="staging + output folder")
    parser.add_argument("--only", nargs="*", help="build only these chapter slugs")
    args = parser.parse_args(argv)

    executed = Path(args.executed)
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    extra = os.environ.get("ICLR26_EXTRA_CHAPTER")  # tools/build_one.sh: a draft chapter not yet in _toc.yml
    if extra:
        toc["parts"].insert(-1, {"caption": "Draft", "chapters": [{"file": f"nbs/{extra}"}]})
    slugs = [
        Path(c["file"]).stem
        for p in toc.get("parts", [])
        for c in p.get("chapters", [])
        if c["file"].startswith("nbs/")
    ]
    if args.only:
        unknown = set(args.only) - set(slugs)
        if unknown:
            print(f"error: --only names chapters not in _toc.yml: {sorted(unknown)}", file=sys.stderr)
            return 2
        slugs = list(args.only)
    toc = _filter_toc(toc, set(slugs))
    missing = [s for s in slugs if not (executed / f"{s}.ipynb").is_file()]
    if missing:
        print(f"error: no executed notebook for {missing} in {executed}", file=sys.stderr)
        return 2

    stage = Path(args.out)
    src = stage / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    shutil.copytree(ROOT / "book", src / "book")
    (src / "companion").mkdir()
    shutil.copy(ROOT / "companion" / "README.md", src / "companion")  # book/conventions.md includes its chapter table
    (src / "nbs").mkdir()
    for slug in slugs:
        nb = json.loads((executed / f"{slug}.ipynb").read_text())
        for cell in nb["cells"]:  # papermill's injected parameters: not part of the page
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if "injected-parameters" in tags and "remove-cell" not in tags:
                tags.append("remove-cell")
        (src / "nbs" / f"{slug}.ipynb").write_text(json.dumps(nb))
    (src / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    results = executed.parent / "results"
    if results.is_dir():
        write_page(sorted(results.glob("*.json")), src / "book" / "reproducibility.md", source="the `ci` test run")

    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [
        str(jb),
        "build",
        str(src),
        "--path-output",
        str(stage),
        "--warningiserror",
        "--nitpick",
        "--keep-going",
        "--all",
    ]
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd)
    if rc == 0:
        print(f"strict book build ok: {stage / '_build' / 'html' / 'index.html'}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
