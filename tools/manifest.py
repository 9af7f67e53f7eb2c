"""Write a chapter's manifest (``metadata.iclr26.manifest`` of its notebook) from run results.

    python -m tools.manifest nbs/clock_pizza.ipynb _build/ci/results/clock_pizza.json book_run.json \\
        [--glue acc_alpha0 acc_alpha1 ...] [--budget ci=60 book=180]

The manifest lists the checks and reports each scale records (taken from the runs given, one per scale), the glued
names that the page and outside checks read (``--glue``; kept from the existing manifest when omitted), and the time
budget per scale (default: ci 60 s, book 180 s). Read it back with ``iclr26.book.manifest.read_manifest``; the
chapter test and `make bench` hold every run to it. Review the diff: a manifest records what a chapter promises, not
what it happened to do.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from iclr26.book.manifest import write_manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("results", nargs="+", type=Path, help="`python -m iclr26 run --json` files, one per scale")
    parser.add_argument("--glue", nargs="*", help="the glued names the chapter promises")
    parser.add_argument("--budget", nargs="*", default=[], help="scale=seconds, e.g. ci=60 book=180")
    args = parser.parse_args(argv)
    budget = {k: float(v) for k, v in (item.split("=", 1) for item in args.budget)}
    results = [json.loads(p.read_text()) for p in args.results]
    print(json.dumps(write_manifest(args.notebook, results, args.glue, budget), indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
