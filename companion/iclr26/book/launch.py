"""Run a chapter's training outside its notebook, on many GPUs: ``torchrun ... -m iclr26.book.launch``.

A notebook kernel is one process, so a chapter's `paper`-scale training on several GPUs runs here instead:

    torchrun --nproc_per_node=8 -m iclr26.book.launch optimizer_benchmark --scale paper --out runs/
    python -m iclr26.book.launch optimizer_benchmark --scale ci --out runs/       # one process, e.g. to try it

The launcher executes the chapter's code cells tagged ``launch`` (imports, the scale table, the training code: plain
Python, no cell magics) with the parameters ``scale``, ``seed``, ``device`` and ``results`` (the output folder) set as
the parameters cell would set them. If those cells define an entry function — the one ``metadata.iclr26.launch.entry``
of the notebook names, else ``launch`` — it is then called with the output folder; otherwise running the cells was the
job. The training goes through :func:`iclr26.train.fit`, which is data-parallel under ``torchrun``, and each run is kept
with :func:`save_result` (rank 0 writes; weights as safetensors, numbers as JSON). With ``results`` set to the same
folder, the notebook reads the runs back with :func:`load_results` instead of training them in the kernel.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from iclr26.book.cli import _find_toc, list_chapters
from iclr26.runtime import SCALES
from iclr26.train import distributed_env, init_distributed
from iclr26.validate import as_int, one_of

__all__ = ["launch_cells", "run_chapter", "save_result", "load_results", "main", "TAG"]

TAG = "launch"


def _notebook_path(chapter: str | Path) -> Path:
    path = Path(chapter)
    if path.suffix == ".ipynb":
        if not path.is_file():
            raise ValueError(f"chapter {str(chapter)!r} is not a notebook file")
        return path
    toc = _find_toc(Path.cwd())
    if toc is None:
        raise ValueError(f"chapter {str(chapter)!r}: no _toc.yml here or above; run from the book or give a path")
    for nb in list_chapters(toc):
        if nb.stem == str(chapter):
            return nb
    raise ValueError(f"chapter {str(chapter)!r} is not in {toc}")


def launch_cells(notebook: str | Path) -> tuple[list[str], str]:
    """The sources of ``notebook``'s cells tagged ``launch``, in order, and the name of its entry function (``None``:
    call ``launch`` if the cells define it)."""
    path = _notebook_path(notebook)
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "code" and TAG in (cell.get("metadata", {}).get("tags") or []):
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            try:
                compile(src, f"{path.name} cell {i}", "exec")
            except SyntaxError as err:
                raise ValueError(f"{path.name}: cell {i} is tagged {TAG!r} but is not plain Python: {err.msg}") from err
            cells.append(src)
    if not cells:
        raise ValueError(f"{path.name} has no code cell tagged {TAG!r}: it has nothing to run outside the notebook")
    entry = nb.get("metadata", {}).get("iclr26", {}).get("launch", {}).get("entry")
    return cells, entry


def run_chapter(
    notebook: str | Path, out: str | Path, scale: str = "paper", seed: int = 0, device: str = "auto"
) -> Any:
    """Execute ``notebook``'s ``launch`` cells at ``scale``/``seed`` with ``results = out`` (a folder, created) and
    call its entry function with ``out`` if it has one. Returns what the entry function returns, else the namespace
    the cells ran in (a dict)."""
    one_of(scale, "scale", SCALES)
    seed = as_int(seed, "seed", low=0)
    if not isinstance(device, str):
        raise TypeError(f"device must be a string, got {type(device).__name__}")
    if not isinstance(out, (str, Path)):
        raise TypeError(f"out must be a str or Path, got {type(out).__name__}")
    cells, entry = launch_cells(notebook)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    namespace: dict[str, Any] = {
        "__name__": "iclr26_launch",
        "scale": scale,
        "seed": seed,
        "device": device,
        "results": str(out),
    }
    for i, src in enumerate(cells):
        exec(compile(src, f"{Path(notebook).name} launch cell {i}", "exec"), namespace)
    fn = namespace.get(entry or "launch")
    if callable(fn):
        return fn(out)
    if entry is not None:
        raise ValueError(f"{Path(notebook).name}: its launch cells define no function {entry!r} to call")
    return namespace


def save_result(out: str | Path, name: str, record: dict, model: Any = None) -> Path | None:
    """Keep one run: ``record`` (JSON-ready numbers) as ``out/name.json`` and, if given, ``model``'s weights as
    ``out/name.safetensors``. Only rank 0 writes under ``torchrun``; returns the JSON path there, else None."""
    from iclr26.validate import as_module, json_value

    if not isinstance(out, (str, Path)):
        raise TypeError(f"out must be a str or Path (a folder), got {type(out).__name__}")
    if not isinstance(name, str) or not name or any(c in name for c in "/\\"):
        raise ValueError(f"name must be a non-empty file name without slashes, got {name!r}")
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict, got {type(record).__name__}")
    record = json_value(record, "record")
    if model is not None:
        as_module(model)
    env = distributed_env()
    if env is not None and env.rank != 0:
        return None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if model is not None:
        from safetensors.torch import save_file

        weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        save_file(weights, str(out / f"{name}.safetensors"))
    path = out / f"{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def load_results(out: str | Path) -> dict[str, dict]:
    """Every record :func:`save_result` kept in ``out``, by name (``{}`` when the folder does not exist)."""
    if not isinstance(out, (str, Path)):
        raise TypeError(f"out must be a str or Path, got {type(out).__name__}")
    out = Path(out)
    if not out.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr26.book.launch", description=__doc__.splitlines()[0])
    parser.add_argument("chapter", help="a chapter slug from _toc.yml, or a notebook path")
    parser.add_argument("--scale", default="paper", choices=SCALES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", required=True, help="folder for the results (safetensors + JSON)")
    args = parser.parse_args(argv)
    env = init_distributed()
    try:
        run_chapter(args.chapter, args.out, scale=args.scale, seed=args.seed, device=args.device)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if env is not None:
            import torch.distributed as dist

            dist.barrier()
            dist.destroy_process_group()
    if env is None or env.rank == 0:
        print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
