"""The student edition (tools/student.py, `make student`): solutions tagged in every chapter, taken out cleanly, the
rest of the chapter unchanged, student/ up to date, and a student notebook that runs at `ci` up to its first stub."""

import ast
import json
from pathlib import Path

import nbformat
import pytest

from iclr26.book.cli import list_chapters
from tools.student import (
    ADMONITION,
    STUB_TAG,
    exercises_in,
    is_solution,
    solution_runs,
    student_notebook,
    student_text,
)

ROOT = Path(__file__).resolve().parent.parent

CHAPTERS = list_chapters(ROOT / "_toc.yml")


def _md(src, tags=()):
    return {"cell_type": "markdown", "id": "m", "metadata": {"tags": list(tags)} if tags else {}, "source": src}


def _code(src, tags=()):
    meta = {"tags": list(tags)} if tags else {}
    return {"cell_type": "code", "id": "c", "metadata": meta, "outputs": [], "execution_count": None, "source": src}


SOL = "```{admonition} Solution\n:class: dropdown\nBecause.\n```"


def _nb(cells):
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _stubs(nb):
    return [c for c in nb["cells"] if STUB_TAG in c["metadata"].get("tags", [])]


def test_each_solution_becomes_one_stub_naming_what_it_defines():
    cells = [
        _md("# Title"),
        _code("a = 1"),
        _md("**1. Do it.**"),
        _md(SOL, ["solution"]),
        _code("def helper():\n    return 2\n\nanswer = helper()\nfor i in range(3):\n    pass", ["solution"]),
        _md("**2. Again.**"),
        _md(SOL, ["solution"]),
        _code("fig = None\nresult_two = answer + 1", ["solution"]),
        _code("print(a)", ["remove-cell"]),
    ]
    out = student_notebook(_nb(cells), "demo")
    stubs = _stubs(out)
    assert len(stubs) == 2
    assert stubs[0]["source"].startswith("# Exercise 1: your code here.")
    assert "helper, answer" in stubs[0]["source"] and "i" not in stubs[0]["source"].split("defines:")[1].split(", ")
    assert stubs[1]["source"].startswith("# Exercise 2") and "result_two" in stubs[1]["source"]
    assert "fig" not in stubs[1]["source"]
    assert not any(is_solution(c) for c in out["cells"])
    assert not any(ADMONITION.search("".join(c["source"])) for c in out["cells"])
    # everything else kept, in order: title, the student note, then the rest
    kept = [c["source"] for c in out["cells"] if c not in stubs][2:]
    assert kept == ["a = 1", "**1. Do it.**", "**2. Again.**", "print(a)"]
    assert out["metadata"]["iclr26"]["edition"] == "student"
    assert "blob/main/nbs/demo.ipynb" in out["cells"][1]["source"]


def test_code_first_solutions_split_at_each_dropdown():
    run = [_code("x1 = 1", ["solution"]), _md(SOL, ["solution"]), _code("x2 = 2", ["solution"]), _md(SOL, ["solution"])]
    assert [len(g) for g in exercises_in(run)] == [2, 2]
    run = [_md(SOL, ["solution"]), _code("x1 = 1", ["solution"]), _md(SOL, ["solution"]), _code("x2 = 2", ["solution"])]
    groups = exercises_in(run)
    assert [len(g) for g in groups] == [2, 2] and groups[1][1]["source"] == "x2 = 2"


def test_a_notebook_without_tagged_solutions_is_refused():
    with pytest.raises(ValueError, match="tagged 'solution'"):
        student_notebook(_nb([_md("# T"), _md(SOL)]), "demo")


def _stored_names(src: str) -> set[str]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _loaded_names(src: str) -> set[str]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[nb.stem for nb in CHAPTERS])
class TestStudentEdition:
    def test_every_exercise_has_a_tagged_solution(self, notebook):
        cells = json.loads(notebook.read_text())["cells"]
        dropdowns = [
            i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and ADMONITION.search("".join(c["source"]))
        ]
        assert len(dropdowns) >= 3, f"{notebook.stem}: three exercises with Solution dropdowns"
        untagged = [i for i in dropdowns if not is_solution(cells[i])]
        assert not untagged, f"{notebook.stem}: Solution dropdowns not tagged 'solution' (cells {untagged})"
        # a code cell right next to a dropdown belongs to its solution unless it is bookkeeping the book hides
        for i in dropdowns:
            for j in (i - 1, i + 1):
                if 0 <= j < len(cells) and cells[j]["cell_type"] == "code":
                    tags = cells[j]["metadata"].get("tags", [])
                    assert is_solution(cells[j]) or {"remove-cell", "remove-input", "exercise"} & set(tags), (
                        f"{notebook.stem}: code cell {j} beside a Solution dropdown is not tagged 'solution' "
                        "(tag it 'exercise' if it is scaffolding the student keeps)"
                    )
        n_groups = sum(len(exercises_in(cells[a:b])) for a, b in solution_runs(cells))
        assert n_groups == len(dropdowns), f"{notebook.stem}: {len(dropdowns)} dropdowns but {n_groups} solutions"

    def test_student_edition_keeps_the_chapter_and_runs_without_solutions(self, notebook):
        nb = json.loads(notebook.read_text())
        student = student_notebook(nb, notebook.stem)
        cells = [c for c in student["cells"] if c.get("id") != "student-edition"]
        stubs = [i for i, c in enumerate(cells) if STUB_TAG in c["metadata"].get("tags", [])]
        original = nb["cells"]
        first = next(i for i, c in enumerate(original) if is_solution(c))
        assert [c["source"] for c in cells[: stubs[0]]] == [c["source"] for c in original[:first]], (
            "up to the first exercise, the student edition is the chapter (which the chapter test executes)"
        )
        for i in stubs:
            compile("".join(cells[i]["source"]), f"{notebook.stem} stub {i}", "exec")
        nbformat.validate(nbformat.from_dict(student))
        only_in_solutions = set()
        for c in original:
            if c["cell_type"] == "code" and is_solution(c):
                only_in_solutions |= _stored_names("".join(c["source"]))
        for c in original:
            if c["cell_type"] == "code" and not is_solution(c):
                only_in_solutions -= _stored_names("".join(c["source"]))
        for c in cells[stubs[0] :]:
            if c["cell_type"] == "code":
                used = _loaded_names("".join(c["source"])) & only_in_solutions
                assert not used, f"{notebook.stem}: a later cell uses {sorted(used)}, which only solutions define"

    def test_student_copy_in_the_repository_is_current(self, notebook):
        have = ROOT / "student" / notebook.name
        assert have.is_file() and have.read_text(encoding="utf-8") == student_text(notebook), (
            f"student/{notebook.name} is not the student edition of nbs/{notebook.name}: run `make student`"
        )


@pytest.mark.chapter
def test_a_student_notebook_executes_at_ci_up_to_its_first_stub(tmp_path):
    """The cheapest chapter's student edition, cut after its first stub, executed as a student would at `ci`."""
    import papermill as pm

    slug = "correlation_clustering_testing"
    nb = student_notebook(json.loads((ROOT / "nbs" / f"{slug}.ipynb").read_text()), slug)
    first_stub = next(i for i, c in enumerate(nb["cells"]) if STUB_TAG in c["metadata"].get("tags", []))
    nb["cells"] = nb["cells"][: first_stub + 1]
    src = tmp_path / f"{slug}.ipynb"
    src.write_text(json.dumps(nb))
    pm.execute_notebook(
        str(src),
        str(tmp_path / "out.ipynb"),
        parameters={"scale": "ci", "seed": 0},
        cwd=str(ROOT / "nbs"),
        progress_bar=False,
        execution_timeout=120,
    )
    done = json.loads((tmp_path / "out.ipynb").read_text())
    assert done["cells"][-1]["metadata"]["papermill"]["status"] == "completed"
