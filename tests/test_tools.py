"""The generated pages and headers (tools/): verdicts, reproducibility, chapter run times."""

import json
import re
from pathlib import Path

import pytest

from tools.bench_attention import attention_speed
from tools.headers import HEADER, update_headers
from tools.reproducibility import write_page as write_repro
from tools.verdicts import totals_sentence, verdict_rows
from tools.verdicts import write_page as write_verdicts

ROOT = Path(__file__).resolve().parent.parent


def _run(slug, scale, verdicts, seconds=12.3, claims=None):
    return {
        "notebook": f"nbs/{slug}.ipynb",
        "scale": scale,
        "seed": 0,
        "seconds": seconds,
        "ok": True,
        "claims": claims or [],
        "verdicts": verdicts,
        "glued": {},
    }


def _v(headline, word, evidence=(), controls=()):
    return {
        "headline": headline,
        "verdict": word,
        "paper": "p|aper",
        "evidence": list(evidence),
        "controls": list(controls),
        "why": "because",
    }


@pytest.fixture()
def bench():
    return {
        "date": "2026-12-03",
        "machine": "2 CPU cores",
        "runs": [
            _run("alpha", "ci", [_v("A1", "not tested here"), _v("A2", "reproduced")], 11.0),
            _run("alpha", "book", [_v("A1", "partly"), _v("A2", "reproduced")], 61.4),
            _run(
                "beta",
                "book",
                [_v("B1", "not reproduced", evidence=["c", "gap"], controls=["k"])],
                claims=[
                    {"name": "c", "statement": "s", "value": 1, "passed": True, "kind": "claim"},
                    {"name": "s", "statement": "s", "value": 1, "passed": True, "kind": "sanity"},
                    {"name": "t", "statement": "s", "value": 1, "passed": False, "kind": "sanity"},
                    {"name": "k", "statement": "s", "value": 0.95, "passed": True, "kind": "control"},
                    {"name": "gap", "statement": "s", "value": 0.01, "passed": True, "kind": "report", "holds": False},
                ],
            ),
        ],
    }


def test_verdict_rows_take_the_largest_scale_and_note_ci(bench):
    rows = verdict_rows(bench["runs"])
    assert [(r["chapter"], r["headline"], r["verdict"]) for r in rows] == [
        ("alpha", "A1", "partly"),
        ("alpha", "A2", "reproduced"),
        ("beta", "B1", "not reproduced"),
    ]
    assert rows[0]["ci_verdict"] == "not tested here"
    assert totals_sentence(rows) == (
        "Of 3 headline claims across 2 papers: 1 reproduced, 1 partly, 1 not reproduced; 1 of the rows cite a control."
    )


def test_verdicts_page(bench, tmp_path):
    out = write_verdicts([bench], tmp_path / "v.md")
    text = out.read_text()
    assert "Of 3 headline claims across 2 papers" in text
    assert "**partly** (at `ci`: not tested here)" in text
    assert "p\\|aper" in text  # a pipe in a cell cannot break the table
    assert "| {doc}`beta <../nbs/beta>` | 1 not reproduced | 1 |" in text
    assert "| {doc}`alpha <../nbs/alpha>` | 1 reproduced · 1 partly | 0 |" in text
    assert "## `alpha`\n\n{doc}`The chapter <../nbs/alpha>`." in text
    assert "- A1 — **partly** (at `ci`: not tested here)\\\n  *The paper:* p\\|aper\\\n  *Evidence:* —" in text
    # the evidence is rendered from the run's recorded values, by name
    assert "  *Evidence:* ✓ `c` 1; ○ `gap` 0.01; ✓ control `k` 0.95\\\n  *Why:* because." in text


def test_reproducibility_page_counts_claims_and_sanity_checks_apart(bench, tmp_path):
    text = write_repro([bench], tmp_path / "r.md", source="test").read_text()
    assert "| `beta` | `book` | 0 | 1/1 | 1/1 | 1/2 | 1 | 1 |" in text


def test_headers_rewritten_from_bench(bench, tmp_path):
    nb = {
        "cells": [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": [
                    "# Alpha\n",
                    "*Run time (measured by `make bench`, 2026-01-01): ci ≈ 99 s · book ≈ 2 min · paper: long.*",
                ],
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "alpha.ipynb").write_text(json.dumps(nb))
    assert update_headers(bench, tmp_path) == ["alpha"]
    text = "".join(json.loads((tmp_path / "alpha.ipynb").read_text())["cells"][0]["source"])
    assert "(measured by `make bench`, 2026-12-03): ci ≈ 11 s · book ≈ 61 s · paper: long." in text
    assert update_headers(bench, tmp_path) == []  # idempotent


def test_headers_take_each_chapters_own_run_date(bench, tmp_path):
    """A merged bench file stamps a chapter with the date its runs were measured, not the merge's date."""
    nb = {
        "cells": [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": ["*Run time (measured by `make bench`, 2026-01-01): ci ≈ 99 s · book ≈ 99 s · paper: long.*"],
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "alpha.ipynb"
    path.write_text(json.dumps(nb))
    runs = [r for r in bench["runs"] if r["notebook"] == "nbs/alpha.ipynb"]
    runs[0]["date"], runs[1]["date"] = "2026-11-30", "2026-12-01"
    update_headers(bench, tmp_path)
    assert "(measured by `make bench`, 2026-12-01): ci ≈ 11 s" in path.read_text()
    del runs[0]["date"]  # kept by --merge from a file whose runs carried no date: the header keeps its own
    bench["merged_from"] = "2026-11-01"
    path.write_text(json.dumps(nb))
    update_headers(bench, tmp_path)
    assert "(measured by `make bench`, 2026-01-01): ci ≈ 11 s" in path.read_text()


def _page_times() -> dict[tuple[str, str], float]:
    page = (ROOT / "book" / "reproducibility.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \|(?:[^|]*\|){6} ([\d.]+) \|", page, re.M)
    return {(slug, scale): float(sec) for slug, scale, sec in rows}


@pytest.mark.parametrize("nb_path", sorted((ROOT / "nbs").glob("*.ipynb")), ids=lambda p: p.stem)
def test_chapter_header_times_match_the_reproducibility_page(nb_path):
    """Headers are written by `make bench` from the same run as the Reproducibility page: they cannot disagree."""
    times = _page_times()
    assert times, "book/reproducibility.md has no run rows (run `make bench`), or its table format changed"
    if (nb_path.stem, "ci") not in times:
        pytest.skip(f"{nb_path.stem} has no `make bench` run yet")
    header = "".join(json.loads(nb_path.read_text())["cells"][0]["source"])
    m = HEADER.search(header)
    assert m, f"{nb_path.stem}: no measured run-time header"
    want = f"ci ≈ {times[(nb_path.stem, 'ci')]:.0f} s · book ≈ {times[(nb_path.stem, 'book')]:.0f} s"
    assert want in m.group(0), f"{nb_path.stem}: header says {m.group(0)!r}, make bench measured {want!r}"


def test_reproducibility_page_shows_the_sae_speed(bench, tmp_path):
    bench["sae_speed"] = {
        "tokens_per_s": {"fast": 27582.0, "dense": 4684.0, "hand_dense": 4655.0},
        "ratio_fast_over_dense": 5.89,
        "ratio_fast_over_hand_dense": 5.93,
        "config": {
            "d_in": 256,
            "width": 4096,
            "k": 32,
            "batch": 4096,
            "lr": 3e-4,
            "threads": 2,
            "steps": 50,
            "warmup": 5,
        },
    }
    text = write_repro([bench], tmp_path / "r.md", source="test").read_text()
    assert "| `TopKSAE(fast=True)`: k-sparse decode and backward | 27,582 |" in text
    assert "**5.89×**" in text


def test_sae_speed_rejects_bad_counts():
    from tools.bench_sae import sae_speed

    with pytest.raises(TypeError, match="steps"):
        sae_speed(steps=2.5)
    with pytest.raises(ValueError, match="warmup"):
        sae_speed(warmup=-1)


# ------------------------------------------------------------------------------------ tools/bench_attention.py
def test_attention_speed_small_shape():
    res = attention_speed(steps=2, warmup=1, shape=dict(d_model=16, n_heads=2, seq_len=8, batch=2, n_layers=1))
    assert set(res["tokens_per_s"]) == {"fast", "explicit"}
    assert res["speedup"] == pytest.approx(res["tokens_per_s"]["fast"] / res["tokens_per_s"]["explicit"])
    assert res["max_abs_diff"]["loss"] < 1e-4 and res["max_abs_diff"]["grad"] < 1e-4
    assert res["config"]["d_model"] == 16 and res["config"]["steps"] == 2


def test_attention_speed_rejects_bad_arguments():
    with pytest.raises(TypeError, match="steps"):
        attention_speed(steps=2.5)
    with pytest.raises(ValueError, match="warmup"):
        attention_speed(warmup=-1)
    with pytest.raises(ValueError, match="shape"):
        attention_speed(shape=dict(heads=3))
    with pytest.raises(TypeError, match="shape"):
        attention_speed(shape=[1, 2])


def test_reproducibility_page_shows_the_attention_speed(tmp_path):
    bench = {
        "date": "2026-12-03",
        "machine": "2 CPU cores",
        "runs": [],
        "attention_speed": {
            "tokens_per_s": {"fast": 1234.0, "explicit": 800.0},
            "speedup": 1.5425,
            "max_abs_diff": {"grad": 2.2e-8},
            "config": {
                "d_model": 768,
                "n_heads": 12,
                "n_layers": 1,
                "seq_len": 512,
                "batch": 2,
                "attn_alpha": 1.0,
                "threads": 2,
                "warmup": 1,
                "steps": 4,
            },
        },
    }
    text = write_repro([bench], tmp_path / "r.md", source="test").read_text()
    assert "## Attention fast path" in text and "d_model 768, 12 heads" in text
    assert "(no hook on the attention) | 1,234 |" in text and "| 800 |" in text
    assert "**1.54×**" in text and "2.2e-08" in text
    bench["attention_speed"] = None  # `--skip-attention`: no section
    assert "Attention fast path" not in write_repro([bench], tmp_path / "r.md", source="test").read_text()


def test_robustness_counts_passes_and_finds_the_tightest_seed(tmp_path):
    from tools.robustness import room, summarise
    from tools.robustness import write_page as write_robustness

    def claim(name, value, bound, slack, passed, kind="claim"):
        return {
            "name": name,
            "statement": f"{name} holds",
            "value": value,
            "passed": passed,
            "kind": kind,
            "bound": bound,
            "slack": slack,
        }

    def alpha(seed, wide, tight):
        return {**_run("alpha", "ci", []), "seed": seed, "claims": [claim("wide", *wide), claim("tight", *tight)]}

    runs = [
        alpha(0, (0.9, 0.5, 0.4, True), (0.52, 0.5, 0.02, True)),
        alpha(1, (0.7, 0.5, 0.2, True), (0.49, 0.5, -0.01, False)),
        alpha(2, (0.8, 0.5, 0.3, True), (0.6, 0.5, 0.1, True)),
        {**_run("beta", "ci", []), "seed": 0, "claims": [claim("flag", "yes", None, None, True, kind="sanity")]},
        {**_run("beta", "ci", []), "seed": 1, "claims": [], "error": "PapermillExecutionError: boom"},
    ]
    rows = {(r["chapter"], r["name"]): r for r in summarise(runs)}
    wide, tight = rows["alpha", "wide"], rows["alpha", "tight"]
    assert (wide["passed"], wide["seeds"], wide["worst"]["seed"]) == (3, [0, 1, 2], 1)
    assert (tight["passed"], tight["worst"]["seed"]) == (2, 1)  # the failing seed is the worst, whatever its slack
    assert wide["room"] == pytest.approx(0.2 / 0.7) and rows["beta", "flag"]["room"] is None
    assert room(0.1, 0.0, 0.0) == float("inf") and room(None, 1.0, 2.0) is None
    page = write_robustness(runs, tmp_path / "robustness.md", {"date": "2026-12-03", "machine": "2 cores"}).read_text()
    assert "2 of 3 checks passed on every seed" in page
    tightest = page.split("## The tightest claims")[1].split("## ")[0]
    assert tightest.index("`tight`") < tightest.index("`wide`")  # least room first
    assert "2/3 ✗" in page and "`beta`, seed 1" in page  # a failed seed and a run that did not execute are shown
    assert "{doc}`/nbs/alpha`" in page


def test_robustness_leaves_reports_out_and_writes_what_chapters_read():
    from tools.robustness import notebook_summary, summarise

    report = {"name": "r", "statement": "s", "value": 3.0, "passed": True, "kind": "report", "holds": None}
    check = {"name": "c", "statement": "s", "value": 0.6, "passed": True, "kind": "control", "bound": 0.5, "slack": 0.1}
    runs = [{**_run("alpha", "ci", []), "seed": s, "claims": [report, {**check, "value": 0.6 + s}]} for s in (0, 1)]
    rows = summarise(runs)
    assert [r["name"] for r in rows] == ["c"]
    summary = notebook_summary(rows, [0, 1], "2026-12-05")
    assert summary["seeds"] == [0, 1] and summary["date"] == "2026-12-05"
    assert summary["checks"]["alpha"]["c"] == {
        "kind": "control",
        "passed": 2,
        "runs": 2,
        "worst_seed": 0,
        "value": 0.6,
        "bound": 0.5,
        "slack": 0.1,
    }


def test_robustness_compares_the_hash_seed_twin(tmp_path):
    from tools.robustness import determinism, glue_differences, write_page

    run = {"notebook": "nbs/alpha.ipynb", "seed": 0, "claims": [], "glued": {"a": 1.0, "seconds_fit": 3.1, "b": "x"}}
    run["glued"].update(lm_tokens_per_s=900.0, step_speedup=1.6)
    same = {**run, "glued": {"a": 1.0, "seconds_fit": 2.7, "b": "x", "lm_tokens_per_s": 870.0, "step_speedup": 1.5}}
    assert glue_differences(run, same) == []  # run times differ by nature and are left out
    other = {**run, "notebook": "nbs/beta.ipynb"}
    moved = {**other, "glued": {"a": 1.5, "c": 0}}
    assert glue_differences(other, moved) == ["a", "b", "c"]  # a changed value, a name glued in one run only
    broken = {"notebook": "nbs/gamma.ipynb", "seed": 0, "error": "boom", "glued": {}}
    hashing = determinism([run, other, {**broken, "error": None}], [same, moved, broken])
    assert hashing == {"alpha": [], "beta": ["a", "b", "c"], "gamma": None}
    threaded = {**other, "notebook": "nbs/delta.ipynb", "threads": "2"}
    assert determinism([threaded], [{**moved, "notebook": "nbs/delta.ipynb", "threads": "1"}]) == {}  # not comparable
    assert determinism([threaded], [{**moved, "notebook": "nbs/delta.ipynb", "threads": "2"}]) == {
        "delta": ["a", "b", "c"]
    }
    unrecorded = {k: v for k, v in threaded.items() if k != "threads"}  # kept before thread counts were recorded
    assert determinism([unrecorded], [{**moved, "notebook": "nbs/delta.ipynb", "threads": "1"}]) == {
        "delta": ["a", "b", "c"]
    }
    page = write_page([run], tmp_path / "r.md", hashing=hashing).read_text()
    assert "1 of 3 chapters glue identical values" in page
    assert "- `beta`: differs in a, b, c" in page and "- `gamma`: did not run to the end" in page


def test_calibrate_tables_every_check_per_seed_and_reuses_kept_runs(tmp_path, monkeypatch, capsys):
    from tools import calibrate

    def claim(name, kind, value, passed, bound=0.5):
        return {"name": name, "kind": kind, "value": value, "passed": passed, "bound": bound}

    def fake_run(notebook, scale, seed):
        run = _run("demo", scale, [], claims=[claim("c", "claim", 0.1 * seed, seed < 3), claim("r", "report", 1, True)])
        run["seed"] = seed
        return run

    rows = calibrate.table([fake_run(None, "ci", s) for s in (2, 1, 3)])
    assert rows[0] == {
        "name": "c",
        "kind": "claim",
        "bound": 0.5,
        "values": {1: 0.1, 2: 0.2, 3: 0.30000000000000004},
        "passed": 2,
    }
    assert "passed" not in rows[1]  # a report is shown, not passed or failed
    nb = tmp_path / "demo.ipynb"
    nb.write_text("{}")
    calls = []
    monkeypatch.setattr(calibrate, "run_chapter", lambda n, sc, s: calls.append(s) or fake_run(n, sc, s))
    assert calibrate.main([str(nb), "--seeds", "1", "2", "--out", str(tmp_path / "cal")]) == 0
    assert calibrate.main([str(nb), "--seeds", "1", "2", "3", "--out", str(tmp_path / "cal")]) == 0
    assert calls == [1, 2, 3]  # the second call ran only the seed it lacked
    assert "| c | claim | 0.5 | 0.1 | 0.2 | 0.3 | 2/3 |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        calibrate.main([str(tmp_path / "missing.ipynb")])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # restored after the test: --threads sets it for the runs
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    assert calibrate.main([str(nb), "--seeds", "1", "--threads", "2", "--out", str(tmp_path / "cal")]) == 0
    assert "OMP_NUM_THREADS=2" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--threads"):
        calibrate.main([str(nb), "--threads", "0"])
