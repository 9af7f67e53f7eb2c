"""What the tools share: the repository root, a chapter run in a fresh process, the machine a measurement ran on,
and a notebook cell's source.

The tools are a package run from the repository root: ``python -m tools.bench``, ``python -m tools.robustness``, ...
(``make help`` lists the make targets that call them).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def machine_info() -> dict:
    """What a speed measurement ran on: torch, CPU count and type, the load average after the run."""
    import torch

    return {
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "loadavg_after": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def write_result(result: dict, name: str) -> None:
    """Print a speed result and keep it in _build/<name>."""
    print(json.dumps(result, indent=2))
    out = ROOT / "_build" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_chapter(notebook: Path, scale: str, seed: int = 0, env: dict[str, str] | None = None) -> dict:
    """Run one chapter with ``python -m iclr26 run`` in a fresh process (``env``: extra environment variables)."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            "-m",
            "iclr26",
            "run",
            str(notebook),
            "--scale",
            scale,
            "--seed",
            str(seed),
            "--out",
            str(Path(tmp) / notebook.name),
            "--json",
            str(out_json),
        ]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        ps = psutil.Process(proc.pid)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss(ps))
            time.sleep(0.1)
        wall = time.perf_counter() - t0
        output = proc.stdout.read()
        if out_json.is_file():
            result = json.loads(out_json.read_text())
        else:
            result = {
                "notebook": str(notebook),
                "scale": scale,
                "seed": seed,
                "ok": False,
                "claims": [],
                "glued": {},
                "error": output[-2000:],
            }
        result["seconds"] = round(wall, 2)  # the whole process: interpreter, papermill, kernel start, execution
        result["peak_rss_mb"] = round(peak / 2**20, 1)
        print(output.strip().splitlines()[-1] if output.strip() else "(no output)", flush=True)
        return result


def cell_source(cell: dict) -> str:
    """A notebook cell's source as one string (nbformat stores a string or a list of lines)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src
