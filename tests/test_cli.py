import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from iclr26.book.cli import chapter_title, list_chapters, main, run_notebook
from iclr26.book.manifest import check_against_manifest, read_manifest

PARAMS = 'scale = "book"  # "ci" | "book" | "paper"\nseed = 0\ndevice = "auto"'
BODY = """
from iclr26.book import check_at_most, claim_at_least, control_at_least, glue, results, verdict
if seed == 99:
    raise RuntimeError("boom")
if seed == 77:
    import time
    time.sleep(30)
glue("answer", 42)
glue("scale_seen", scale)
if seed != 5:
    claim_at_least("seed_not_13", "the seed is not 13", float(seed != 13), 1.0)
    check_at_most("zero", "zero is at most zero", 0.0, 0.0)
    control_at_least("planted", "a planted effect is seen", 1.0, 1.0)
if seed == 21:
    claim_at_least("seed_not_13", "recorded twice", 1.0, 0.0)
if seed == 31:
    from iclr26.book import Verdict, claims
    claims._VERDICTS["planted"] = Verdict("planted", "not reproduced", "p", ("zero",), (), "no control")
elif seed != 5:
    verdict("the seed matters", "not reproduced", paper="it does", evidence=["seed_not_13"], controls=["planted"],
            why="it does not")
results()
"""


@pytest.fixture()
def tiny(tmp_path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell(PARAMS)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# A tiny chapter\n\ntext"), params, nbformat.v4.new_code_cell(BODY)]
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.kernel
def test_run_ok_writes_exact_json(tiny, tmp_path, capsys):
    out_json = tmp_path / "r.json"
    rc = main(
        ["run", str(tiny), "--scale", "ci", "--seed", "7", "--out", str(tmp_path / "x.ipynb"), "--json", str(out_json)]
    )
    assert rc == 0
    result = json.loads(out_json.read_text())
    assert set(result) == {"notebook", "scale", "seed", "seconds", "ok", "claims", "verdicts", "glued", "uncited"}
    assert result["scale"] == "ci" and result["seed"] == 7 and result["ok"] is True
    assert result["glued"] == {"answer": 42, "scale_seen": "ci"}
    assert result["claims"] == [
        {
            "name": "seed_not_13",
            "statement": "the seed is not 13",
            "value": 1.0,
            "passed": True,
            "kind": "claim",
            "bound": 1.0,
            "slack": 0.0,
            "holds": None,
        },
        {
            "name": "zero",
            "statement": "zero is at most zero",
            "value": 0.0,
            "passed": True,
            "kind": "sanity",
            "bound": 0.0,
            "slack": 0.0,
            "holds": None,
        },
        {
            "name": "planted",
            "statement": "a planted effect is seen",
            "value": 1.0,
            "passed": True,
            "kind": "control",
            "bound": 1.0,
            "slack": 0.0,
            "holds": None,
        },
    ]
    assert result["verdicts"] == [
        {
            "headline": "the seed matters",
            "verdict": "not reproduced",
            "paper": "it does",
            "evidence": ["seed_not_13"],
            "controls": ["planted"],
            "why": "it does not",
        }
    ]
    assert result["uncited"] == ["zero"]
    assert (tmp_path / "x.ipynb").is_file()
    assert "1/1 paper claims, 1/1 controls, 1/1 sanity checks passed, 1 verdicts" in capsys.readouterr().out


@pytest.mark.kernel
def test_run_fails_on_a_verdict_that_breaks_the_rules(tiny, tmp_path, capsys):
    """A row slipped past verdict() (here written straight into the registry) is caught when the run is read."""
    assert main(["run", str(tiny), "--seed", "31", "--json", str(tmp_path / "v.json")]) == 1
    result = json.loads((tmp_path / "v.json").read_text())
    assert result["ok"] is False and "passing control" in result["verdict_problems"][0]
    assert "VERDICT RULES BROKEN" in capsys.readouterr().out


@pytest.mark.kernel
def test_run_exit_codes(tiny, tmp_path):
    assert main(["run", str(tiny), "--seed", "13", "--json", str(tmp_path / "f.json")]) == 1
    assert json.loads((tmp_path / "f.json").read_text())["ok"] is False
    assert main(["run", str(tiny), "--seed", "99", "--json", str(tmp_path / "e.json")]) == 2
    err = json.loads((tmp_path / "e.json").read_text())
    assert err["ok"] is False and "boom" in err["error"]
    assert main(["run", str(tmp_path / "missing.ipynb")]) == 2
    # no check recorded, or one name recorded twice: not ok
    assert main(["run", str(tiny), "--seed", "5", "--json", str(tmp_path / "n.json")]) == 1
    assert json.loads((tmp_path / "n.json").read_text())["ok"] is False
    assert main(["run", str(tiny), "--seed", "21", "--json", str(tmp_path / "d.json")]) == 1
    assert json.loads((tmp_path / "d.json").read_text())["duplicates"] == ["seed_not_13"]


@pytest.mark.kernel
def test_hung_cell_and_hung_notebook_fail_with_their_names(tiny, tmp_path):
    r = run_notebook(tiny, seed=77, cell_timeout=3)
    assert r["ok"] is False and "CellTimeoutError" in r["error"] and "if seed == 77" in r["error"]  # the cell, named
    r = run_notebook(tiny, seed=77, timeout=4)
    assert r["ok"] is False and "NotebookTimeout" in r["error"] and "tiny.ipynb ran past its limit of 4 s" in r["error"]
    assert r["seconds"] < 25


def test_run_notebook_bad_input(tiny):
    with pytest.raises(ValueError, match="scale"):
        run_notebook(tiny, scale="huge")
    with pytest.raises(ValueError, match="seed"):
        run_notebook(tiny, seed=-1)
    with pytest.raises(ValueError, match="notebook"):
        run_notebook("nope.txt")
    with pytest.raises(ValueError, match="cell_timeout"):
        run_notebook(tiny, cell_timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        run_notebook(tiny, timeout="1h")


@pytest.mark.kernel
def test_list_reads_toc(tmp_path, tiny):
    (tmp_path / "nbs").mkdir()
    (tmp_path / "nbs" / "tiny.ipynb").write_bytes(tiny.read_bytes())
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n  - caption: A\n"
        "    chapters:\n      - file: nbs/tiny\n      - file: other\n"
    )
    assert [p.name for p in list_chapters(tmp_path / "_toc.yml")] == ["tiny.ipynb"]
    assert chapter_title(tmp_path / "nbs" / "tiny.ipynb") == "A tiny chapter"
    proc = subprocess.run([sys.executable, "-m", "iclr26", "list"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and "tiny" in proc.stdout and "A tiny chapter" in proc.stdout
    with pytest.raises(ValueError, match="toc"):
        list_chapters(tmp_path / "missing.yml")


def _result(scale="ci", names=("a", "b"), glued=("x",), seconds=10.0):
    claims = [{"name": n, "statement": "s", "value": 1, "passed": True, "kind": "claim"} for n in names]
    return {"scale": scale, "claims": claims, "glued": {g: 1 for g in glued}, "seconds": seconds}


MANIFEST = {"claims": {"ci": ["a", "b"], "book": ["a", "b", "c"]}, "glue": ["x"], "budget_s": {"ci": 20, "book": 100}}


def test_check_against_manifest_catches_each_hole():
    assert check_against_manifest(_result(), MANIFEST) == ([], [])
    errors, _ = check_against_manifest(_result(names=("a",)), MANIFEST)  # a branch skipped a check
    assert errors and "did not record: ['b']" in errors[0]
    errors, _ = check_against_manifest(_result(names=("a", "b", "z")), MANIFEST)
    assert errors and "does not list: ['z']" in errors[0]
    errors, _ = check_against_manifest(_result(glued=()), MANIFEST)
    assert errors == ["numbers not glued: ['x']"]
    errors, warns = check_against_manifest(_result(seconds=25.0), MANIFEST)  # 1.25x: noise, a warning
    assert not errors and warns and "over its ci budget of 20 s" in warns[0]
    errors, _ = check_against_manifest(_result(seconds=31.0), MANIFEST)  # 1.55x: a failure
    assert errors and "over 1.5× its ci budget" in errors[0]
    # the chapter test: budgets are measured by `make bench`, not asserted in a timed test, so over 1.5x warns there
    errors, warns = check_against_manifest(_result(seconds=31.0), MANIFEST, budget_fails=False)
    assert errors == [] and "over 1.5× its ci budget" in warns[0]
    with pytest.raises(TypeError, match="budget_fails"):
        check_against_manifest(_result(), MANIFEST, budget_fails="no")
    assert check_against_manifest(_result("book", ("a", "b", "c")), MANIFEST) == ([], [])


def test_read_manifest_round_trip_and_bad_input(tiny, tmp_path):
    with pytest.raises(ValueError, match="no manifest"):
        read_manifest(tiny)
    nb = json.loads(tiny.read_text())
    nb["metadata"]["iclr26"] = {"manifest": MANIFEST}
    tiny.write_text(json.dumps(nb))
    assert read_manifest(tiny) == MANIFEST
    nb["metadata"]["iclr26"] = {"manifest": {**MANIFEST, "budget_s": {"ci": -1}}}
    tiny.write_text(json.dumps(nb))
    with pytest.raises(ValueError, match="manifest must be"):
        read_manifest(tiny)
    with pytest.raises(ValueError, match="not a file"):
        read_manifest(tmp_path / "missing.ipynb")
