import json

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from iclr26.book import (
    VERDICTS,
    check,
    check_at_least,
    check_at_most,
    check_between,
    check_close_to,
    check_greater_than,
    check_less_than,
    claim,
    claim_at_least,
    claim_at_most,
    claim_between,
    claim_close_to,
    claim_greater_than,
    claim_less_than,
    claim_where,
    claims,
    claims_table,
    control,
    control_at_least,
    control_at_most,
    glue,
    read_notebook,
    recorded_verdicts,
    report,
    results,
    verdict,
    verdict_problems,
    verdict_word,
    verdicts_table,
)
from iclr26.book.verdicts import uncited


@pytest.fixture(autouse=True)
def _fresh():
    claims.reset()
    yield
    claims.reset()


def test_comparisons_pass_and_fail():
    assert claim_at_least("a", "x at least", 0.95, 0.9).passed
    assert not claim_at_least("b", "x at least", 0.85, 0.9).passed
    assert claim_at_most("c", "x at most", 1e-10, 1e-8).passed
    assert not claim_at_most("d", "x at most", 1e-6, 1e-8).passed
    assert claim_greater_than("e", "beats", 0.8, 0.5, margin=0.2).passed
    assert not claim_greater_than("f", "beats", 0.6, 0.5, margin=0.2).passed
    assert claim_less_than("g", "below", 0.2, 0.5, margin=0.1).passed
    assert not claim_less_than("h", "below", 0.45, 0.5, margin=0.1).passed
    assert claim_close_to("i", "close", 0.29, 0.2916, rtol=0.05).passed
    assert not claim_close_to("j", "close", 0.5, 0.2916, rtol=0.05).passed
    assert claim_between("k", "between", 0.5, 0.0, 1.0).passed
    assert not claim_between("l", "between", 1.5, 0.0, 1.0).passed


def test_accepts_numpy_and_torch_scalars():
    import torch

    assert claim_at_least("np", "numpy value", np.float32(0.9), np.float64(0.5)).passed
    assert claim_at_least("pt", "torch value", torch.tensor(0.9), 0.5).passed
    assert claim("b", "numpy bool", 1, np.bool_(True)).passed


def test_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="name"):
        claim(3, "s", 1, True)
    with pytest.raises(ValueError, match="name"):
        claim("has space", "s", 1, True)
    with pytest.raises(TypeError, match="statement"):
        claim("x", "", 1, True)
    with pytest.raises(TypeError, match="passed"):
        claim("x", "s", 1, "yes")
    with pytest.raises(TypeError, match="value"):
        claim_at_least("x", "s", "high", 0.5)
    with pytest.raises(TypeError, match="threshold"):
        claim_at_least("x", "s", 0.5, None)
    with pytest.raises(ValueError, match="margin"):
        claim_greater_than("x", "s", 1, 0, margin=-1)
    with pytest.raises(ValueError, match="rtol"):
        claim_close_to("x", "s", 1, 1, rtol=-0.1)
    with pytest.raises(ValueError, match="low"):
        claim_between("x", "s", 1, 2, 0)
    with pytest.raises(TypeError, match="value"):
        glue("x", object())
    with pytest.raises(TypeError, match="display"):
        glue("x", 1, display="no")


def test_claims_table_lists_marks_in_sections(tmp_path, monkeypatch):
    claim_at_least("ok", "passes", 1.0, 0.5)
    claim_at_least("bad", "fails", 0.0, 0.5)
    check_at_most("identity", "an identity holds", 1e-12, 1e-8)
    control_at_least("oracle", "the oracle is detected", 1.0, 0.9)
    report("gap", 0.25, "the gap, shown not asserted", holds=False)
    table = claims_table()
    frame = table.frame
    assert list(frame[""]) == ["✓", "✗", "✓", "✓", "○"]
    assert list(frame["kind"]) == ["claim", "claim", "sanity", "control", "report"]
    html_ = table._repr_html_()
    order = ["Paper claims</b> (1/2 passed)", "Controls</b> (1/1 passed)", "Reports</b> (1)", "Sanity checks</b> (1/1"]
    assert [html_.index(x) for x in order] == sorted(html_.index(x) for x in order)
    assert "over seeds" not in html_
    assert "Sanity checks (1/1 passed)" in repr(table)
    # how each check fared over seeds comes from the robustness data, never typed
    data = {"seeds": [0, 1], "checks": {"demo": {"ok": {"passed": 2, "runs": 2, "worst_seed": 1, "value": 0.8}}}}
    (tmp_path / "r.json").write_text(json.dumps(data))
    monkeypatch.setenv("ICLR26_ROBUSTNESS", str(tmp_path / "r.json"))
    seeded = claims_table(chapter="demo")
    assert "2/2, worst 0.8 (seed 1)" in seeded._repr_html_() and "over seeds 0, 1" in seeded._repr_html_()
    with pytest.raises(TypeError, match="claims"):
        claims_table(["not a claim"])
    with pytest.raises(ValueError, match="chapter"):
        claims_table(chapter="a b")


def test_checks_are_claims_of_kind_sanity():
    pairs = [
        (check_at_least, claim_at_least, (1.0, 0.5)),
        (check_at_most, claim_at_most, (1.0, 0.5)),
        (check_greater_than, claim_greater_than, (1.0, 0.5)),
        (check_less_than, claim_less_than, (1.0, 0.5)),
        (check_close_to, claim_close_to, (1.0, 1.0, 0.1)),
        (check_between, claim_between, (1.0, 0.0, 2.0)),
    ]
    for i, (chk, clm, args) in enumerate(pairs):
        a, b = chk(f"s{i}", "statement", *args), clm(f"c{i}", "statement", *args)
        assert a.kind == "sanity" and b.kind == "claim"
        assert (a.passed, a.value, a.detail) == (b.passed, b.value, b.detail)
        assert chk.__name__.startswith("check_")
    assert check("eq", "exact", 0.0, True).kind == "sanity"
    assert not check_at_most("bug", "an identity fails on a bug", 1e-3, 1e-8).passed
    with pytest.raises(TypeError, match="kind"):
        check_at_least("x", "s", 1.0, 0.5, kind="claim")
    with pytest.raises(ValueError, match="kind"):
        claim("x", "s", 1, True, kind="identity")
    with pytest.raises(TypeError, match="calibration"):
        claim_at_least("x", "s", 1.0, 0.5, calibration="typed by hand")
    with pytest.raises(ValueError, match="report"):
        claim("x", "s", 1, True, kind="report")
    assert control("c", "the effect is seen where planted", 1, True).kind == "control"
    assert control_at_least.__name__ == "control_at_least"
    with pytest.raises(TypeError, match="kind"):
        control_at_least("x", "s", 1.0, 0.5, kind="claim")


def test_values_in_dicts_and_lists_are_formatted_like_numbers():
    assert claims.format_value({"k=4": 0.12581594469487842, "k=16": 2}) == "{k=4: 0.1258, k=16: 2}"
    assert claims.format_value([1e-7, True, "a"]) == "[1.000e-07, True, a]"


def test_report_records_glues_and_never_fails():
    assert report("gap", 0.3, "the gap", holds=np.bool_(True)) == 0.3
    r = claims.recorded_claims()[-1]
    assert (r.kind, r.passed, r.holds, r.mark) == ("report", True, True, "●")
    assert report("plain", 2, "no direction") == 2 and claims.recorded_claims()[-1].mark == "·"
    assert "gap" in claims._GLUED
    report("not_glued", 1.0, "kept out of the glue", glued=False)
    assert "not_glued" not in claims._GLUED
    with pytest.raises(TypeError, match="text"):
        report("x", 1.0, "")
    with pytest.raises(TypeError, match="holds"):
        report("x", 1.0, "t", holds="yes")
    with pytest.raises(ValueError, match="name"):
        report("a b", 1.0, "t")


def test_claim_where_asserts_under_its_premise_and_reports_otherwise():
    held = claim_where(True, claim_at_least, "held", "the method beats the line", 0.4, 0.5)
    assert (held.kind, held.passed, held.bound) == ("claim", False, 0.5)  # under its premise a claim can fail
    ctl = claim_where(np.bool_(True), control_at_most, "ctl", "a control", 0.1, threshold=0.2)
    assert (ctl.kind, ctl.passed) == ("control", True)
    off = claim_where(False, claim_at_least, "off", "the method beats the line", 0.4, 0.5)
    assert (off.kind, off.passed, off.holds) == ("report", True, False)
    on = claim_where(False, control_at_most, "on", "a control", 0.1, 0.2)
    assert (on.kind, on.holds) == ("report", True)
    assert [c.name for c in claims.recorded_claims()] == ["held", "ctl", "off", "on"]  # each recorded once
    assert not {"held", "ctl", "off", "on"} & set(claims._GLUED)  # nothing glued, as for a claim
    with pytest.raises(TypeError, match="premise"):
        claim_where("yes", claim_at_least, "x", "s", 1.0, 0.5)
    with pytest.raises(TypeError, match="check"):
        claim_where(True, check_at_least, "x", "s", 1.0, 0.5)  # a sanity check has no premise
    with pytest.raises(TypeError, match="check"):
        claim_where(False, print, "x", "s", 1.0, 0.5)
    with pytest.raises(ValueError, match="threshold"):
        claim_where(False, claim_at_least, "x", "s", 1.0, float("nan"))  # the comparison's own validation
    assert "x" not in {c.name for c in claims.recorded_claims()}


def _recorded():
    claim_at_least("beats", "the method beats the baseline", 0.6, 0.5)
    check_at_most("identity", "an identity", 0.0, 1e-9)
    control_at_least("planted", "the test sees a planted effect", 0.95, 0.9)
    report("gap_book", 0.01, "the gain at book scale", holds=False)
    report("size", 0.19, "rejection rate under the null")


def test_verdicts_cite_recorded_names_and_render_their_values():
    _recorded()
    v = verdict("Method beats baseline", "reproduced", paper="+0.1 on ImageNet", evidence=["beats"], why="it does")
    verdict(
        "Effect at scale",
        "not reproduced",
        paper="grows with n",
        evidence="gap_book",
        controls=["planted"],
        why="no gain where a planted gain is seen",
    )
    verdict("A bigger model helps", "not tested here", paper="7B > 1B", why="needs a 7B model")
    assert v.evidence == ("beats",) and v.controls == () and len(recorded_verdicts()) == 3
    data, meta = verdicts_table()._repr_mimebundle_()
    assert "+0.1 on ImageNet" in data["text/html"] and "<code>beats</code> 0.6" in data["text/html"]
    assert "control <code>planted</code> 0.95" in data["text/html"]
    assert "✓ beats 0.6" in data["text/plain"]
    rows = meta["iclr26"]["verdicts"]
    assert rows[1] == {
        "headline": "Effect at scale",
        "verdict": "not reproduced",
        "paper": "grows with n",
        "evidence": ["gap_book"],
        "controls": ["planted"],
        "why": "no gain where a planted gain is seen",
    }
    assert set(VERDICTS) == {"reproduced", "partly", "not reproduced", "reported only", "not tested here"}
    assert uncited() == ["identity"]  # reports are glued, so quotable


def test_verdict_rules_are_enforced():
    _recorded()
    ok = {"paper": "p", "why": "w"}
    with pytest.raises(ValueError, match="did not record"):
        verdict("h", "reproduced", evidence=["beats", "typo"], **ok)
    with pytest.raises(ValueError, match="passing control"):
        verdict("h", "not reproduced", evidence=["gap_book"], **ok)
    with pytest.raises(ValueError, match="control_"):
        verdict("h", "not reproduced", evidence=["gap_book"], controls=["identity"], **ok)
    with pytest.raises(ValueError, match="passing claim"):
        verdict("h", "reproduced", evidence=["identity", "size"], **ok)
    with pytest.raises(ValueError, match="what holds and what does not"):
        verdict("h", "partly", evidence=["beats"], **ok)
    with pytest.raises(ValueError, match="reports it rests on"):
        verdict("h", "reported only", **ok)
    verdict("h", "partly", evidence=["beats", "gap_book"], **ok)
    verdict("h2", "reported only", evidence=["size"], **ok)
    with pytest.raises(ValueError, match="verdict"):
        verdict("h", "mostly", **ok)
    with pytest.raises(TypeError, match="evidence"):
        verdict("h", "partly", evidence=3, **ok)
    with pytest.raises(ValueError, match="twice"):
        verdict("h", "partly", evidence=["beats", "beats"], **ok)
    with pytest.raises(ValueError, match="why"):
        verdict("h", "reported only", evidence="size", paper="p", why="  ")
    with pytest.raises(TypeError, match="paper"):
        verdict("h", "reported only", evidence="size", paper=None, why="w")
    with pytest.raises(TypeError):
        verdict("h", "reported only", "size", "w")  # evidence, paper and why are keywords
    with pytest.raises(TypeError, match="rows"):
        verdicts_table(["row"])


def test_verdict_word_by_rule():
    _recorded()
    assert verdict_word("beats", "planted") == "reproduced"
    assert verdict_word("beats", "gap_book") == "partly"
    assert verdict_word("gap_book", False) == "not reproduced"
    assert verdict_word("size", none="not tested here") == "not tested here"  # a report without holds does not hold
    assert verdict_word(np.bool_(True)) == "reproduced"
    # a row shown but not read for the paper: every condition holding reads "reported only", anything less `none`
    assert verdict_word("beats", "planted", held="reported only", none="not tested here") == "reported only"
    assert verdict_word("beats", "gap_book", held="reported only", none="not tested here") == "not tested here"
    assert verdict_word("size", held="reported only", none="not tested here") == "not tested here"
    with pytest.raises(ValueError, match="held"):
        verdict_word(True, held="partly")
    with pytest.raises(ValueError, match="did not record"):
        verdict_word("typo")
    with pytest.raises(ValueError, match="condition"):
        verdict_word()
    with pytest.raises(ValueError, match="none"):
        verdict_word(True, none="reproduced")
    with pytest.raises(TypeError, match="conditions"):
        verdict_word(0.5)


def test_verdict_problems_reads_a_run():
    claims_ = [
        {"name": "c", "kind": "claim", "passed": True, "holds": None},
        {"name": "k", "kind": "control", "passed": True, "holds": None},
        {"name": "s", "kind": "sanity", "passed": True, "holds": None},
    ]
    good = {"headline": "g", "verdict": "not reproduced", "evidence": ["c"], "controls": ["k"]}
    assert verdict_problems({"claims": claims_, "verdicts": [good]}) == []
    planted = [
        {"headline": "unrecorded", "verdict": "reproduced", "evidence": ["c", "ghost"], "controls": []},
        {"headline": "no control", "verdict": "not reproduced", "evidence": ["c"], "controls": []},
        {"headline": "sanity only", "verdict": "reproduced", "evidence": ["s"], "controls": []},
        {"headline": "wrong control", "verdict": "not reproduced", "evidence": ["c"], "controls": ["s"]},
        {"headline": "old style", "verdict": "reproduced", "evidence": "c"},
    ]
    problems = verdict_problems({"claims": claims_, "verdicts": planted})
    assert len(problems) == 6 and "ghost" in problems[0] and "passing control" in problems[1]
    assert "passing claim" in problems[2] and "not controls" in problems[3] and "lists" in problems[5]
    with pytest.raises(TypeError, match="result"):
        verdict_problems([])


def test_results_renders_verdicts_checks_and_uncited():
    _recorded()
    glue("size", 0.19)  # quoted in the prose: not listed as uncited
    verdict("Method beats baseline", "reproduced", paper="+0.1", evidence=["beats"], why="it does")
    data, meta = results("demo")._repr_mimebundle_()
    html_ = data["text/html"]
    assert html_.index("iclr26-verdicts") < html_.index("Paper claims") < html_.index("Controls")
    assert html_.index("Controls") < html_.index("Reports") < html_.index("Sanity checks")
    assert meta["iclr26"]["uncited"] == ["identity", "planted"]
    assert "cited by no verdict" in data["text/plain"]
    with pytest.raises(ValueError, match="chapter"):
        results("no spaces")


@pytest.mark.kernel
def test_read_notebook_round_trip(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from iclr26.book import claim_at_least, glue\n"
            "glue('power', 0.93)\nglue('flag', True)\nglue('nan_value', float('nan'))\n"
            "claim_at_least('power_high', 'power is high', 0.93, 0.9)\n"
            "claim_at_least('size_low', 'fails on purpose', 0.2, 0.9)\n"
        ),
        nbformat.v4.new_code_cell(
            "from iclr26.book import check_at_most, report, results, verdict\n"
            "check_at_most('identity', 'an identity', 0.0, 1e-9)\n"
            "report('gap', 0.01, 'a gap', holds=False)\n"
            "verdict('the paper says so', 'partly', paper='p', evidence=['power_high', 'gap'], why='one of two')\n"
            "results()\n"
        ),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    rec = read_notebook(path)
    assert rec["glued"]["power"] == 0.93 and rec["glued"]["flag"] is True
    assert rec["glued"]["nan_value"] == "nan"
    by_name = {c["name"]: c for c in rec["claims"]}
    assert by_name["power_high"]["passed"] is True and by_name["size_low"]["passed"] is False
    assert by_name["power_high"]["kind"] == "claim" and by_name["identity"]["kind"] == "sanity"
    assert by_name["size_low"]["bound"] == 0.9 and by_name["size_low"]["slack"] == pytest.approx(-0.7)
    assert rec["verdicts"] == [
        {
            "headline": "the paper says so",
            "verdict": "partly",
            "paper": "p",
            "evidence": ["power_high", "gap"],
            "controls": [],
            "why": "one of two",
        }
    ]
    assert by_name["gap"]["kind"] == "report" and by_name["gap"]["holds"] is False and rec["glued"]["gap"] == 0.01
    assert rec["uncited"] == ["size_low", "identity"]
    assert rec["duplicates"] == []
    # the glue output is what myst-nb reads: prefixed mime type + scrapbook metadata
    outputs = [o for o in nb.cells[0].outputs if o.get("metadata", {}).get("scrapbook", {}).get("name") == "power"]
    assert outputs and "application/papermill.record/text/plain" in outputs[0]["data"]
    json.dumps(rec)  # JSON-ready


def test_read_notebook_bad_input(tmp_path):
    with pytest.raises(TypeError, match="path"):
        read_notebook(3)
    with pytest.raises(ValueError, match="not a file"):
        read_notebook(tmp_path / "missing.ipynb")
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a notebook"):
        read_notebook(bad)


@pytest.mark.kernel
def test_read_notebook_flags_a_name_recorded_twice(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from iclr26.book import claim_at_least\nclaim_at_least('x', 'first', 0.1, 0.5)"),
        nbformat.v4.new_code_cell("claim_at_least('x', 'second hides the first', 0.9, 0.5)"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    path = tmp_path / "twice.ipynb"
    nbformat.write(nb, path)
    rec = read_notebook(path)
    assert rec["duplicates"] == ["x"]


@pytest.mark.parametrize(
    "record, bound, slack",
    [
        (lambda: claim_at_least("a", "s", 0.9, 0.8), 0.8, 0.1),
        (lambda: claim_at_most("b", "s", 0.9, 0.8), 0.8, -0.1),
        (lambda: claim_greater_than("c", "s", 0.9, 0.5, margin=0.1), 0.6, 0.3),
        (lambda: claim_less_than("d", "s", 0.2, 0.5, margin=0.1), 0.4, 0.2),
        (lambda: claim_close_to("e", "s", 1.05, 1.0, 0.1), 0.1, 0.05),
        (lambda: claim_between("f", "s", 0.3, 0.0, 1.0), 0.0, 0.3),
        (lambda: claim_between("g", "s", 0.9, 0.0, 1.0), 1.0, 0.1),
        (lambda: claim_between("h", "s", 1.2, 0.0, 1.0), 1.0, -0.2),
    ],
)
def test_comparisons_record_their_line_and_slack(record, bound, slack):
    c = record()
    assert c.bound == pytest.approx(bound)
    assert c.slack == pytest.approx(slack)
    assert (c.slack >= 0) == c.passed or c.slack == 0  # the slack's sign agrees with the verdict


def test_plain_claim_has_no_slack_unless_given():
    c = claim("p", "s", "yes", True)
    assert c.bound is None and c.slack is None
    c = claim("q", "s", 3, True, bound=2, slack=1)
    assert (c.bound, c.slack) == (2.0, 1.0)
    with pytest.raises(TypeError, match="slack"):
        claim("r", "s", 3, True, slack="wide")


def test_a_claim_left_as_a_cells_last_value_displays_nothing_more():
    """IPython calls _ipython_display_ instead of showing the repr; the row was published when it was recorded."""
    c = claim_at_least("shown_once", "a value shown once", 1.0, 0.5)
    assert c._ipython_display_() is None and repr(c).startswith("Claim(name='shown_once'")
