"""``python -m iclr26 list | run`` — the book's command line.

    python -m iclr26 list
    python -m iclr26 run nbs/influential_sets.ipynb --scale ci --seed 7 --out run.ipynb --json result.json

``run`` executes a chapter with papermill at the chosen scale and seed, prints one line per paper claim and sanity
check, the chapter's verdicts and a summary, and exits 0 iff the notebook ran and every check passed; 1 if a check
failed, none was recorded, or one name was recorded twice; 2 if execution failed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from iclr26.book.claims import read_notebook
from iclr26.book.manifest import check_against_manifest, read_manifest
from iclr26.book.verdicts import verdict_problems
from iclr26.runtime import SCALES

__all__ = [
    "main",
    "run_notebook",
    "list_chapters",
    "chapter_title",
    "read_manifest",
    "check_against_manifest",
    "NotebookTimeout",
]


class NotebookTimeout(Exception):
    """A whole notebook ran past the ``timeout`` given to :func:`run_notebook`."""


def _find_toc(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        if (folder / "_toc.yml").is_file():
            return folder / "_toc.yml"
    return None


def _toc_files(node: Any) -> list[str]:
    files: list[str] = []
    if isinstance(node, dict):
        if "file" in node:
            files.append(str(node["file"]))
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []) or []:
                files.extend(_toc_files(child))
    elif isinstance(node, list):
        for child in node:
            files.extend(_toc_files(child))
    return files


def _path(value: Any, name: str) -> Path:
    if not isinstance(value, (str, Path)):
        raise TypeError(f"{name} must be a str or Path, got {type(value).__name__}")
    return Path(value)


def list_chapters(toc: str | Path) -> list[Path]:
    """The chapter notebooks (``nbs/*.ipynb``) that ``_toc.yml`` lists, in book order."""
    import yaml

    toc = _path(toc, "toc")
    if not toc.is_file():
        raise ValueError(f"toc {str(toc)!r} is not a file")
    data = yaml.safe_load(toc.read_text(encoding="utf-8")) or {}
    root = toc.parent
    out = []
    for f in _toc_files(data):
        f = re.sub(r"\.ipynb$", "", f)
        if f.startswith("nbs/") and (root / f"{f}.ipynb").is_file():
            out.append(root / f"{f}.ipynb")
    return out


def chapter_title(notebook: str | Path) -> str:
    """The first ``# heading`` of a notebook (its paper title)."""
    nb = json.loads(_path(notebook, "notebook").read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return Path(notebook).stem


def run_notebook(
    notebook: str | Path,
    scale: str = "ci",
    seed: int = 0,
    out: str | Path | None = None,
    kernel: str = "python3",
    progress: bool = False,
    cell_timeout: float | None = 900,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Execute ``notebook`` with papermill at ``scale``/``seed``; return the result dict that ``run --json`` writes.

    Keys: ``notebook``, ``scale``, ``seed``, ``seconds``, ``ok``, ``claims``
    (``{name, statement, value, passed, kind, bound, slack, holds}``, ``kind`` being ``"claim"``, ``"control"``,
    ``"sanity"`` or ``"report"``, ``slack`` the distance from failing, see :class:`iclr26.book.Claim`), ``verdicts``
    (``{headline, verdict, paper, evidence, controls, why}``, evidence and controls as lists of names in ``claims``),
    ``glued`` (``{name: value}``), ``uncited`` (names no verdict cites and no glue quotes), plus ``error`` (a string,
    only when execution failed), ``duplicates`` (names recorded twice) and ``verdict_problems`` (verdict rows that
    break the rules of :func:`iclr26.book.verdict`), each only when there are some.

    ``cell_timeout`` (seconds, default 900) stops a hung cell and names it in ``error``; ``timeout`` (seconds) bounds
    the whole notebook, where the platform has ``SIGALRM`` and this runs in the main thread.

    ``ok`` is true iff the notebook executed, recorded at least one check, recorded no name twice, every check
    passed and every verdict row keeps the rules. A verdict of "not reproduced" does not make a run fail.
    """
    import papermill as pm

    notebook = Path(notebook)
    if not notebook.is_file() or notebook.suffix != ".ipynb":
        raise ValueError(f"notebook must be an existing .ipynb file, got {str(notebook)!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    for name, value in (("cell_timeout", cell_timeout), ("timeout", timeout)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    tmpdir = None
    if out is None:
        tmpdir = tempfile.TemporaryDirectory()
        out = Path(tmpdir.name) / notebook.name
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"notebook": str(notebook), "scale": scale, "seed": seed}
    t0 = time.perf_counter()
    error = None
    alarm = timeout is not None and hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if alarm:

        def _expired(signum, frame):
            raise NotebookTimeout(f"{notebook.name} ran past its limit of {timeout:g} s at scale {scale!r}")

        previous = signal.signal(signal.SIGALRM, _expired)
        signal.setitimer(signal.ITIMER_REAL, float(timeout))
    try:
        pm.execute_notebook(
            str(notebook),
            str(out),
            parameters={"scale": scale, "seed": seed},
            kernel_name=kernel,
            cwd=str(notebook.resolve().parent),
            progress_bar=progress,
            execution_timeout=None if cell_timeout is None else int(math.ceil(cell_timeout)),
        )
    except Exception as err:  # papermill raises PapermillExecutionError with the cell's traceback
        error = f"{type(err).__name__}: {err}"
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    result["seconds"] = round(time.perf_counter() - t0, 2)
    empty = {"claims": [], "verdicts": [], "glued": {}, "uncited": [], "duplicates": []}
    record = read_notebook(out) if out.is_file() else empty
    keys = ("name", "statement", "value", "passed", "kind", "bound", "slack", "holds")
    claims = [{k: c.get(k) for k in keys} for c in record["claims"]]
    duplicates = record["duplicates"]
    result["claims"] = claims
    result["verdicts"] = record["verdicts"]
    problems = verdict_problems(result)
    checks = [c for c in claims if c["kind"] != "report"]
    result["ok"] = (
        error is None and bool(checks) and not duplicates and not problems and all(c["passed"] for c in claims)
    )
    result["glued"] = record["glued"]
    result["uncited"] = record["uncited"]
    if error is not None:
        result["error"] = error
    if duplicates:
        result["duplicates"] = duplicates
    if problems:
        result["verdict_problems"] = problems
    if tmpdir is not None:
        tmpdir.cleanup()
    return result


def _cmd_list(args: argparse.Namespace) -> int:
    toc = Path(args.toc) if args.toc else _find_toc(Path.cwd())
    if toc is None or not toc.is_file():
        print("error: no _toc.yml found here or above; pass --toc", file=sys.stderr)
        return 2
    chapters = list_chapters(toc)
    if not chapters:
        print("(no chapters yet)")
    for nb in chapters:
        print(f"{nb.stem:32s} {chapter_title(nb)}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        result = run_notebook(args.notebook, scale=args.scale, seed=args.seed, out=args.out, progress=args.progress)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    counts = []
    for kind, label in (("claim", "paper claims"), ("control", "controls"), ("sanity", "sanity checks")):
        part = [c for c in result["claims"] if c["kind"] == kind]
        for c in part:
            mark = "✓" if c["passed"] else "✗"
            print(f"{mark} [{kind}] {c['name']}: {c['value']}  — {c['statement']}")
        if part or kind != "control":
            counts.append(f"{sum(c['passed'] for c in part)}/{len(part)} {label}")
    for c in (c for c in result["claims"] if c["kind"] == "report"):
        holds = {True: " (holds)", False: " (does not hold)"}.get(c.get("holds"), "")
        print(f"· [report] {c['name']}: {c['value']}{holds}  — {c['statement']}")
    for v in result["verdicts"]:
        cites = ", ".join([*v.get("evidence", []), *(f"control {n}" for n in v.get("controls", []))])
        print(f"verdict: {v['verdict']} — {v['headline']}" + (f" [{cites}]" if cites else ""))
    for p in result.get("verdict_problems", []):
        print(f"verdict rule broken: {p}")
    if "error" in result:
        status = "EXECUTION FAILED"
    elif not result["claims"]:
        status = "NO CLAIM RECORDED"
    elif "duplicates" in result:
        status = f"NAMES RECORDED TWICE: {', '.join(result['duplicates'])}"
    elif "verdict_problems" in result:
        status = "VERDICT RULES BROKEN"
    else:
        status = "ok" if result["ok"] else "CLAIM FAILED"
    print(
        f"{Path(args.notebook).stem} [{args.scale}, seed {args.seed}]: {', '.join(counts)} passed, "
        f"{len(result['verdicts'])} verdicts, {result['seconds']:.1f} s — {status}"
    )
    if "error" in result:
        print(result["error"][-3000:], file=sys.stderr)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, allow_nan=False, default=str) + "\n", encoding="utf-8")
    if "error" in result:
        return 2
    return 0 if result["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr26", description="ICLR 2026, Reproduced — chapters and runs")
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="list the chapters in _toc.yml with their paper titles")
    p_list.add_argument("--toc", help="path to _toc.yml (default: found from the current folder upwards)")
    p_run = sub.add_parser("run", help="execute a chapter at a scale and check its claims")
    p_run.add_argument("notebook", help="the chapter notebook, e.g. nbs/influential_sets.ipynb")
    p_run.add_argument("--scale", default="ci", choices=SCALES)
    p_run.add_argument("--seed", type=int, default=0)
    p_run.add_argument("--out", help="where to write the executed notebook")
    p_run.add_argument("--json", help="where to write the result as JSON")
    p_run.add_argument("--progress", action="store_true", help="show papermill's cell progress bar")
    args = parser.parse_args(argv)
    if args.command == "list":
        return _cmd_list(args)
    if args.seed < 0:
        parser.error("--seed must be ≥ 0")
    return _cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
