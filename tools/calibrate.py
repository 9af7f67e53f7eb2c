"""Calibrate a chapter's thresholds: run it at one scale over several seeds and tabulate every check's value.

    python -m tools.calibrate nbs/clock_pizza.ipynb --scale ci --seeds 1 2 3 4 5 6
    python -m tools.calibrate nbs/clock_pizza.ipynb --scale book --seeds 1 2 3 --out _build/calibration

One notebook at a time (the machine is shared). Each (scale, seed) run is kept as
``<out>/<slug>-<scale>-seed<k>.json``, so a later call runs only the seeds it lacks (``--rerun`` forces them). The
table gives, per claim, control, sanity check and report, its value on every seed, the line it is compared with and
how many seeds passed; a threshold is calibrated when it sits between the values with a margin on every seed.

Float results depend on the thread count (torch's reductions split differently): ``make robustness`` runs each chapter
with ``OMP_NUM_THREADS`` = cores / jobs (2 on the 2-core CI machine). ``--threads`` sets the count for these runs, and
the table's header states the count used, so a threshold calibrated at one thread keeps room for the other.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from tools.common import ROOT, run_chapter


def table(runs: list[dict]) -> list[dict]:
    """One row per check: its kind, the line (bound), the value on each seed and the number of seeds passed."""
    rows: dict[str, dict] = {}
    for run in sorted(runs, key=lambda r: r["seed"]):
        for c in run.get("claims", []):
            row = rows.setdefault(
                c["name"], {"name": c["name"], "kind": c["kind"], "bound": c.get("bound"), "values": {}}
            )
            row["values"][run["seed"]] = c["value"]
            if c["kind"] != "report":
                row["passed"] = row.get("passed", 0) + bool(c["passed"])
    return list(rows.values())


def fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--scale", default="ci", choices=["ci", "book", "paper"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "calibration")
    ap.add_argument("--rerun", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="OMP/MKL threads for the runs (default: as set)")
    args = ap.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            raise SystemExit("--threads must be at least 1")
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)
    if not args.notebook.is_file():
        raise SystemExit(f"no notebook at {args.notebook}")
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for seed in args.seeds:
        path = args.out / f"{args.notebook.stem}-{args.scale}-seed{seed}.json"
        if args.rerun or not path.is_file():
            path.write_text(json.dumps(run_chapter(args.notebook.resolve(), args.scale, seed), indent=1))
        runs.append(json.loads(path.read_text()))
    seeds = [r["seed"] for r in runs]
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    print(f"{args.notebook.stem} at {args.scale}, seeds {seeds}, OMP_NUM_THREADS={threads} (runs kept from earlier")
    print(f"calls keep theirs); wall s: {[r.get('seconds') for r in runs]}")
    print("| check | kind | line | " + " | ".join(f"seed {s}" for s in seeds) + " | passed |")
    print("|---|---|---|" + "---|" * len(seeds) + "---|")
    for row in table(runs):
        vals = " | ".join(fmt(row["values"].get(s, "")) for s in seeds)
        passed = f"{row['passed']}/{len(seeds)}" if "passed" in row else ""
        print(f"| {row['name']} | {row['kind']} | {fmt(row['bound'])} | {vals} | {passed} |")
    return 0 if all(r.get("ok") or r.get("claims") for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
