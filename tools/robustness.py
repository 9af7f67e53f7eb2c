"""`make robustness`: every chapter at `ci` over several seeds; per claim, how often it passed and how close it came.

    python -m tools.robustness                        # every chapter, seeds 0-4 -> _build/robustness.json + page
    python -m tools.robustness --only clock_pizza --seeds 0 1 2
    python -m tools.robustness --jobs 1               # one notebook at a time (default: one per two cores)
    python -m tools.robustness --pages-only           # rewrite book/robustness.md from the runs kept on disk

Each (chapter, seed) run is kept in _build/robustness/<slug>-seed<k>.json, so a later call reruns only what is
missing or ran other code than the notebook now holds (``--rerun`` forces every run). Runs execute side by side,
each with ``OMP_NUM_THREADS`` set to its share of the cores: the claims do not depend on timing, so the run times here
are not budgets (`make bench` measures those on a quiet machine).

For every check the page gives the number of seeds on which it passed, its value on the seed where it came closest
to failing, the line it is compared with, and the *slack* there (how far the value is from failing, in the value's
units; see :class:`iclr26.book.Claim`). The *room* is the slack relative to the larger of |line| and |value|: the
claims with the least room are the book's tightest, and they head the page. Reports (numbers shown, not asserted)
have no line and are left out.

Cross-process determinism: every run sets ``PYTHONHASHSEED`` (1), and each chapter's seed-0 run is repeated under a
second hash seed (2) in _build/robustness/<slug>-hashtwin.json. A chapter whose glued values (run times aside) differ
between the two depends on string hashing or set order, which a reader's rerun would not reproduce: the page lists it
and the command fails.

Beside the page it writes book/robustness.json (committed): per chapter and check, the pass count and the worst
seed's value, line and slack. Each chapter's Results table (``iclr26.results``) reads it to show how a check fared over
seeds beside its threshold, so that no calibration is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.common import ROOT, machine_info, run_chapter

RUNS = ROOT / "_build" / "robustness"
SUMMARY = ROOT / "book" / "robustness.json"
TIGHTEST = 8  # rows in the page's "tightest claims" table
HASH_SEED, TWIN_HASH_SEED = "1", "2"  # PYTHONHASHSEED of every run, and of each chapter's seed-0 twin
TIMING = re.compile(r"(^|_)(seconds|speedup)($|_)|_per_s$")  # glued run times, speeds, speed-ups: differ run to run


def room(slack: float | None, bound: float | None, value) -> float | None:
    """``slack`` relative to the larger of |bound| and |value| (None where the check has no numeric slack)."""
    if slack is None or bound is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    scale = max(abs(bound), abs(float(value)))
    if not math.isfinite(scale) or not math.isfinite(slack):
        return None
    return slack / scale if scale > 0 else (0.0 if slack == 0 else math.copysign(math.inf, slack))


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (chapter, check) over the runs given: passes, seeds, the worst seed's value, line and slack."""
    rows: dict[tuple[str, str], dict] = {}
    for run in sorted(runs, key=lambda r: (Path(r["notebook"]).stem, r["seed"])):
        slug = Path(run["notebook"]).stem
        for c in run.get("claims", []):
            if c.get("kind") == "report":
                continue
            row = rows.setdefault(
                (slug, c["name"]),
                {
                    "chapter": slug,
                    "name": c["name"],
                    "kind": c.get("kind", "claim"),
                    "statement": c["statement"],
                    "seeds": [],
                    "passed": 0,
                    "worst": None,
                },
            )
            row["seeds"].append(run["seed"])
            row["passed"] += bool(c["passed"])
            slack = c.get("slack")
            candidate = {
                "seed": run["seed"],
                "value": c["value"],
                "bound": c.get("bound"),
                "slack": slack,
                "passed": bool(c["passed"]),
            }
            worst = row["worst"]
            if worst is None:
                row["worst"] = candidate
            elif worst["passed"] and not candidate["passed"]:
                row["worst"] = candidate
            elif (
                worst["passed"] == candidate["passed"]
                and slack is not None
                and (worst["slack"] is None or slack < worst["slack"])
            ):
                row["worst"] = candidate
    out = []
    for row in rows.values():
        w = row["worst"]
        row["room"] = room(w["slack"], w["bound"], w["value"])
        out.append(row)
    return out


def notebook_summary(rows: list[dict], seeds: list[int], date: str) -> dict:
    """What the chapters read (book/robustness.json): ``{"date", "seeds", "checks": {chapter: {name: {"kind",
    "passed", "runs", "worst_seed", "value", "bound", "slack"}}}}``."""
    checks: dict[str, dict[str, dict]] = {}
    for r in rows:
        w = r["worst"]
        checks.setdefault(r["chapter"], {})[r["name"]] = {
            "kind": r["kind"],
            "passed": r["passed"],
            "runs": len(r["seeds"]),
            "worst_seed": w["seed"],
            "value": w["value"],
            "bound": w["bound"],
            "slack": w["slack"],
        }
    return {"date": date, "seeds": sorted(seeds), "checks": {k: checks[k] for k in sorted(checks)}}


def failed_runs(runs: list[dict]) -> list[dict]:
    """Runs that did not execute to the end (their claims are missing, so the rows above cannot show them)."""
    return [r for r in runs if r.get("error")]


def _fmt(x) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        return "0" if x == 0 else (f"{x:.3g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.2e}")
    return str(x).replace("|", "\\|")


def _room(x: float | None) -> str:
    return "—" if x is None else ("∞" if math.isinf(x) else f"{100 * x:.0f} %")


def write_page(
    runs: list[dict],
    out: Path,
    meta: dict | None = None,
    rows: list[dict] | None = None,
    hashing: dict[str, list[str] | None] | None = None,
) -> Path:
    """book/robustness.md: the tightest claims of the book, cross-process determinism (``hashing``: what
    :func:`determinism` gives), then one table per chapter (``rows``: what :func:`summarise` gives for ``runs``, when
    the caller has it already)."""
    rows = summarise(runs) if rows is None else rows
    meta = meta or {}
    seeds = sorted({r["seed"] for r in runs})
    lines = [
        "# Seed robustness",
        "",
        "Every claim of every chapter must hold on *any* seed at the `ci` scale, not only on the seed the page was "
        "built with. This page runs each chapter at `ci` over "
        + (f"seeds {', '.join(map(str, seeds))}" if seeds else "several seeds")
        + (f", on {meta['date']} ({meta['machine']})" if "date" in meta else "")
        + ", and shows, per check, how often it passed and how close it came to failing. Rebuild it with "
        "`make robustness`.",
        "",
        "*Slack* is the distance from the value to the line it is compared with (positive: passes with room), "
        "on the seed where it was smallest; *room* is that slack relative to the larger of the line and the value. "
        "Checks made without a numeric line (a plain true/false statement) show only their pass count.",
        "",
    ]
    if not runs:
        lines += ["No run has been recorded yet: `make robustness` fills this page.", ""]
        out.write_text("\n".join(lines))
        return out
    broken = failed_runs(runs)
    if broken:
        lines += ["```{warning}", "These runs did not execute to the end; their checks are missing below:", ""]
        lines += [
            f"- `{Path(r['notebook']).stem}`, seed {r['seed']}: {_fmt(str(r['error']).splitlines()[-1])}"
            for r in broken
        ]
        lines += ["```", ""]
    total, passed = len(rows), sum(r["passed"] == len(r["seeds"]) for r in rows)
    lines += [
        f"{passed} of {total} checks passed on every seed they ran on.",
        "",
        "## The tightest claims",
        "",
        "Paper claims (not sanity checks) with the least room, across the book:",
        "",
        "| chapter | claim | passed | worst seed | value | line | slack | room |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ranked = sorted((r for r in rows if r["kind"] == "claim" and r["room"] is not None), key=lambda r: r["room"])
    for r in ranked[:TIGHTEST]:
        w = r["worst"]
        lines.append(
            f"| `{r['chapter']}` | `{r['name']}` | {r['passed']}/{len(r['seeds'])} | {w['seed']} | {_fmt(w['value'])} "
            f"| {_fmt(w['bound'])} | {_fmt(w['slack'])} | {_room(r['room'])} |"
        )
    lines.append("")
    if hashing:
        same = [slug for slug, names in hashing.items() if names == []]
        lines += [
            "## Cross-process determinism",
            "",
            f"Each chapter's seed-0 run, repeated in a fresh process under another `PYTHONHASHSEED` ({HASH_SEED} and "
            f"{TWIN_HASH_SEED}): {len(same)} of {len(hashing)} chapters glue identical values (run times aside), so "
            "nothing they show depends on string hashing or set order.",
            "",
        ]
        lines += [
            f"- `{slug}`: " + ("did not run to the end" if names is None else "differs in " + ", ".join(names))
            for slug, names in hashing.items()
            if names != []
        ]
        lines.append("")
    for chapter in sorted({r["chapter"] for r in rows}):
        lines += [
            f"## {{doc}}`/nbs/{chapter}`",
            "",
            "| check | kind | passed | worst seed | value | line | slack | room |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in sorted((r for r in rows if r["chapter"] == chapter), key=lambda r: (r["kind"], r["name"])):
            w = r["worst"]
            mark = "" if r["passed"] == len(r["seeds"]) else " ✗"
            lines.append(
                f"| `{r['name']}` | {r['kind']} | {r['passed']}/{len(r['seeds'])}{mark} | {w['seed']} "
                f"| {_fmt(w['value'])} | {_fmt(w['bound'])} | {_fmt(w['slack'])} | {_room(r['room'])} |"
            )
        lines.append("")
    out.write_text("\n".join(lines))
    return out


def _run_path(slug: str, seed: int) -> Path:
    return RUNS / f"{slug}-seed{seed}.json"


def _twin_path(slug: str) -> Path:
    return RUNS / f"{slug}-hashtwin.json"


def glue_differences(run: dict, twin: dict) -> list[str]:
    """Names glued with different values in two runs of the same chapter and seed (run times left out), or glued in
    one run only."""
    a, b = run.get("glued", {}), twin.get("glued", {})
    return sorted(n for n in set(a) | set(b) if not TIMING.search(n) and (n not in a or n not in b or a[n] != b[n]))


def determinism(runs: list[dict], twins: list[dict]) -> dict[str, list[str] | None]:
    """Per chapter with a twin: the glued names that differ between its seed-0 run and its twin (empty: none; None:
    one of the two did not run to the end)."""
    seed0 = {Path(r["notebook"]).stem: r for r in runs if r["seed"] == 0}
    out: dict[str, list[str] | None] = {}
    for twin in sorted(twins, key=lambda t: Path(t["notebook"]).stem):
        slug = Path(twin["notebook"]).stem
        run = seed0.get(slug)
        if run is None:
            continue
        if run.get("error") or twin.get("error"):
            out[slug] = None
        elif not _same_threads(run.get("threads"), twin.get("threads")):
            continue  # run at another thread count: not comparable (the next run redoes the twin)
        else:
            out[slug] = glue_differences(run, twin)
    return out


def code_hash(notebook: Path) -> str:
    """A hash of the notebook's code cells: prose, tags and outputs do not change what a run computes."""
    import hashlib

    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return hashlib.sha256(json.dumps(code).encode()).hexdigest()[:16]


def _fresh(path: Path, code: str, hash_seed: str, threads: str) -> bool:
    """A kept run counts while the notebook's code (``code``: its :func:`code_hash`), hash seed and thread count are
    what it ran (a run kept before thread counts were recorded counts for any). Torch's reductions split work by
    thread, so a run at another thread count may differ in the last bits, and the hash-seed twin would then report a
    difference that no hash seed caused."""
    if not path.is_file():
        return False
    kept = json.loads(path.read_text())
    return (
        kept.get("code_hash") == code
        and kept.get("hash_seed") == hash_seed
        and _same_threads(kept.get("threads"), threads)
    )


def _same_threads(a, b) -> bool:
    """Whether two runs' thread counts match; a run kept before thread counts were recorded (None) matches any."""
    return a is None or b is None or str(a) == str(b)


def load_runs(slugs: set[str] | None = None) -> list[dict]:
    """Every run kept in _build/robustness/ (for the chapters given)."""
    runs = [json.loads(p.read_text()) for p in sorted(RUNS.glob("*-seed*.json"))]
    return [r for r in runs if slugs is None or Path(r["notebook"]).stem in slugs]


def main(argv: list[str] | None = None) -> int:
    from iclr26.book.cli import list_chapters

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="chapter slugs (default: every chapter in _toc.yml)")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--rerun", action="store_true", help="rerun runs already kept on disk")
    parser.add_argument("--pages-only", action="store_true", help="rewrite the page from the runs kept on disk")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if any(s < 0 for s in args.seeds):
        parser.error("--seeds must be non-negative")
    every = list_chapters(ROOT / "_toc.yml")
    chapters = every
    if args.only:
        unknown = set(args.only) - {c.stem for c in every}
        if unknown:
            parser.error(f"not chapters in _toc.yml: {sorted(unknown)}")
        chapters = [c for c in every if c.stem in set(args.only)]
    if not args.pages_only:
        codes = {nb.stem: code_hash(nb) for nb in chapters}
        plan = [(nb, s, _run_path(nb.stem, s), HASH_SEED) for nb in chapters for s in args.seeds]
        if 0 in args.seeds:
            plan += [(nb, 0, _twin_path(nb.stem), TWIN_HASH_SEED) for nb in chapters]
        threads = str(max(1, (os.cpu_count() or 1) // args.jobs))
        todo = [item for item in plan if args.rerun or not _fresh(item[2], codes[item[0].stem], item[3], threads)]
        os.environ["OMP_NUM_THREADS"] = threads
        RUNS.mkdir(parents=True, exist_ok=True)

        def one(item):
            nb, seed, path, hash_seed = item
            run = run_chapter(nb.relative_to(ROOT), "ci", seed, env={"PYTHONHASHSEED": hash_seed})
            result = {**run, "code_hash": codes[nb.stem], "hash_seed": hash_seed, "threads": threads}
            path.write_text(json.dumps(result, indent=2, default=str) + "\n")
            return result

        print(f"{len(todo)} runs to do ({args.jobs} at a time)", flush=True)
        with ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(one, todo))
    runs = [r for r in load_runs({c.stem for c in every}) if r["seed"] in set(args.seeds)]
    meta = {"date": dt.date.today().isoformat(), "machine": f"{os.cpu_count()} cores", **machine_info()}
    twins = [json.loads(p.read_text()) for p in sorted(RUNS.glob("*-hashtwin.json"))]
    twins = [t for t in twins if Path(t["notebook"]).stem in {c.stem for c in every}]
    hashing = determinism(runs, twins)
    summary = {**meta, "seeds": args.seeds, "rows": summarise(runs), "determinism": hashing}
    (ROOT / "_build").mkdir(exist_ok=True)
    (ROOT / "_build" / "robustness.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(write_page(runs, ROOT / "book" / "robustness.md", meta, summary["rows"], hashing))
    seeds_run = sorted({r["seed"] for r in runs})
    SUMMARY.write_text(json.dumps(notebook_summary(summary["rows"], seeds_run, meta["date"]), indent=1) + "\n")
    print(SUMMARY)
    rows = summary["rows"]
    bad = [f"{r['chapter']}:{r['name']}" for r in rows if r["passed"] < len(r["seeds"])] + [
        f"{Path(r['notebook']).stem} seed {r['seed']} did not run" for r in failed_runs(runs)
    ]
    bad += [
        f"{slug} glues {names or 'nothing comparable'} differently under two hash seeds"
        for slug, names in hashing.items()
        if names != []
    ]
    for line in bad:
        print("not robust:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
