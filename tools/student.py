"""`make student`: the student edition of every chapter — the same notebook with the exercises' solutions taken out.

    python -m tools.student                  # every chapter in _toc.yml -> _build/student/nbs/ and student/
    python -m tools.student --check          # fail if student/ is not what the chapters give (the tests run this)

A solution is every cell tagged ``solution`` (the ``Solution`` dropdown and the code cells that belong to it). Each
run of consecutive solution cells becomes one stub code cell: ``# Your code here`` and the names the solution defines
(its functions, classes and top-level variables), so a student knows what to write. Everything else is unchanged,
in the same order, and outputs are stripped. A short note after the title says that this is the student edition and
links the full chapter. The tool also ends each chapter's header line with a link to its student edition.

The student notebooks are written to ``_build/student/nbs/<slug>.ipynb`` and copied to ``student/<slug>.ipynb``,
which the repository keeps so that each chapter's header can link the student edition on GitHub and Colab.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import sys
from pathlib import Path

import yaml

from tools.common import ROOT, cell_source

TAG = "solution"
STUB_TAG = "exercise-stub"
ADMONITION = re.compile(r"^\s*```\{admonition\}\s*Solution", re.M)
# Names a solution defines that say nothing about what the exercise asks for.
IGNORED_NAMES = {"fig", "ax", "axes", "axs", "rows", "row", "df", "table", "out", "res", "i", "j", "k", "x", "y"}


def repository() -> str:
    """``owner/name`` of the repository, from _config.yml (the one place it is written)."""
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"].rstrip("/")
    return url.removeprefix("https://github.com/")


def student_links(slug: str) -> dict[str, str]:
    """Where the student edition of chapter ``slug`` is read: on GitHub and on Colab."""
    repo = repository()
    return {
        "github": f"https://github.com/{repo}/blob/main/student/{slug}.ipynb",
        "colab": f"https://colab.research.google.com/github/{repo}/blob/main/student/{slug}.ipynb",
    }


def is_solution(cell: dict) -> bool:
    return TAG in (cell.get("metadata", {}).get("tags") or [])


def defined_names(cells: list[dict]) -> list[str]:
    """Functions, classes and top-level variables the code cells define, in order (loop variables, private names
    and plot handles left out)."""
    names: list[str] = []

    def add(name: str) -> None:
        if name not in names and not name.startswith("_") and name not in IGNORED_NAMES:
            names.append(name)

    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse(cell_source(cell))
        except SyntaxError:  # IPython magics: no names to report
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name):
                            add(sub.id)
    return names


def solution_runs(cells: list[dict]) -> list[tuple[int, int]]:
    """``(start, stop)`` of every maximal run of consecutive solution cells."""
    runs, start = [], None
    for i, cell in enumerate(cells + [{"metadata": {}}]):
        if is_solution(cell) and start is None:
            start = i
        elif not is_solution(cell) and start is not None:
            runs.append((start, i))
            start = None
    return runs


def _is_admonition(cell: dict) -> bool:
    return cell["cell_type"] == "markdown" and bool(ADMONITION.search(cell_source(cell)))


def exercises_in(run: list[dict]) -> list[list[dict]]:
    """A run of solution cells split into one group per ``Solution`` dropdown: the dropdown with the code cells
    after it when the run opens with a dropdown, or the code cells with the dropdown that closes them otherwise."""
    groups: list[list[dict]] = []
    opens = _is_admonition(run[0])
    for cell in run:
        closed = bool(groups) and _is_admonition(groups[-1][-1])
        if not groups or (opens and _is_admonition(cell)) or (not opens and closed):
            groups.append([])
        groups[-1].append(cell)
    return groups


def stub_cell(number: int, names: list[str], most: int = 8) -> dict:
    lines = [f"# Exercise {number}: your code here."]
    if names:
        more = f" (and {len(names) - most} more)" if len(names) > most else ""
        lines.append("# The solution defines: " + ", ".join(names[:most]) + more)
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": f"stub-{number}",
        "metadata": {"tags": [STUB_TAG]},
        "outputs": [],
        "source": "\n".join(lines),
    }


def student_notebook(nb: dict, slug: str) -> dict:
    """The student edition of notebook ``nb`` (a parsed .ipynb) of chapter ``slug``."""
    nb = copy.deepcopy(nb)
    cells = nb["cells"]
    runs = solution_runs(cells)
    if not runs:
        raise ValueError(f"{slug}: no cell is tagged {TAG!r}, so there is no solution to take out")
    out, pos, exercise = [], 0, 0
    for start, stop in runs:
        out += cells[pos:start]
        for group in exercises_in(cells[start:stop]):
            exercise += 1
            out.append(stub_cell(exercise, defined_names(group)))
        pos = stop
    out += cells[pos:]
    for cell in out:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    links = student_links(slug)
    repo = repository()
    note = {
        "cell_type": "markdown",
        "id": "student-edition",
        "metadata": {},
        "source": (
            "```{note}\n**Student edition.** The exercises' solutions are taken out: each is a cell that says what to "
            f"write. The full chapter, solutions included, is [on GitHub](https://github.com/{repo}/blob/main/nbs/"
            f"{slug}.ipynb) ([student edition on Colab]({links['colab']})).\n```"
        ),
    }
    nb["cells"] = out[:1] + [note] + out[1:]
    nb.setdefault("metadata", {}).setdefault("iclr26", {})["edition"] = "student"
    return nb


def header_link(slug: str) -> str:
    links = student_links(slug)
    return f"[student edition]({links['github']}) ([Colab]({links['colab']}))"


def link_header(notebook: Path) -> bool:
    """Put the student-edition link at the end of the chapter's header line (the one with the Colab badge);
    return whether the notebook changed."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    title = nb["cells"][0]
    lines = cell_source(title).split("\n")
    badge = next((i for i, line in enumerate(lines) if "colab-badge.svg" in line), None)
    if badge is None:
        raise ValueError(f"{notebook.name}: the title cell has no Colab badge line to put the link on")
    line = re.sub(r" · \[student edition\]\([^)]*\) \(\[Colab\]\([^)]*\)\)", "", lines[badge])
    lines[badge] = f"{line} · {header_link(notebook.stem)}"
    text = "\n".join(lines)
    if text == cell_source(title):
        return False
    title["source"] = [line + "\n" for line in text.split("\n")[:-1]] + [text.split("\n")[-1]]
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


def student_text(notebook: Path) -> str:
    """The student edition of ``notebook`` as the file :func:`write_student` writes."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return json.dumps(student_notebook(nb, notebook.stem), indent=1, ensure_ascii=False) + "\n"


def write_student(notebook: Path, out_dirs: list[Path]) -> list[Path]:
    text = student_text(notebook)
    written = []
    for d in out_dirs:
        d.mkdir(parents=True, exist_ok=True)
        (d / notebook.name).write_text(text, encoding="utf-8")
        written.append(d / notebook.name)
    return written


def main(argv: list[str] | None = None) -> int:
    from iclr26.book.cli import list_chapters

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that student/ is up to date")
    args = parser.parse_args(argv)
    chapters = list_chapters(ROOT / "_toc.yml")
    if args.check:
        stale = []
        for nb in chapters:
            have = ROOT / "student" / nb.name
            if not have.is_file() or have.read_text(encoding="utf-8") != student_text(nb):
                stale.append(nb.stem)
        for slug in stale:
            print(f"student/{slug}.ipynb is not the student edition of nbs/{slug}.ipynb: run `make student`")
        return 1 if stale else 0
    failed = 0
    for nb in chapters:
        try:
            if link_header(nb):
                print(f"{nb.relative_to(ROOT)}: header links the student edition")
            for path in write_student(nb, [ROOT / "_build" / "student" / "nbs", ROOT / "student"]):
                print(path.relative_to(ROOT))
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
