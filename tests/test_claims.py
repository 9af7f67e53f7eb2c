import json

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from iclr26 import claims
from iclr26.claims import (
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
    claims_table,
    glue,
    read_notebook,
    recorded_verdicts,
    verdict,
    verdicts_table,
)


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


def test_claims_table_lists_marks_in_two_sections():
    claim_at_least("ok", "passes", 1.0, 0.5, calibration="ci seeds 0–7: min 0.8")
    claim_at_least("bad", "fails", 0.0, 0.5)
    check_at_most("identity", "an identity holds", 1e-12, 1e-8)
    table = claims_table()
    frame = table.frame
    assert list(frame[""]) == ["✓", "✗", "✓"]
    assert list(frame["name"]) == ["ok", "bad", "identity"]
    assert list(frame["kind"]) == ["claim", "claim", "sanity"]
    html_ = table._repr_html_()
    assert html_.index("Paper claims</b> (1/2 passed)") < html_.index("Sanity checks</b> (1/1 passed)")
    assert "ci seeds 0–7: min 0.8" in html_
    assert "Sanity checks (1/1 passed)" in repr(table)
    with pytest.raises(TypeError, match="claims"):
        claims_table(["not a claim"])


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
        claim_at_least("x", "s", 1.0, 0.5, calibration=3)


def test_verdicts_record_validate_and_render():
    v = verdict("Method beats baseline", "not reproduced", evidence="ours 0.5 vs 0.6", why="too small a model")
    verdict("Limit law holds", "reproduced", evidence="claim shape_ok", why="matches the table")
    assert v.verdict == "not reproduced" and len(recorded_verdicts()) == 2
    table = verdicts_table()
    data, meta = table._repr_mimebundle_()
    assert "not reproduced" in data["text/html"] and "Limit law holds" in data["text/plain"]
    assert [r["headline"] for r in meta["iclr26"]["verdicts"]] == ["Method beats baseline", "Limit law holds"]
    assert set(VERDICTS) == {"reproduced", "partly", "not reproduced", "reported only", "not tested here"}
    with pytest.raises(ValueError, match="verdict"):
        verdict("h", "mostly", "e", "w")
    with pytest.raises(TypeError, match="evidence"):
        verdict("h", "partly", None, "w")
    with pytest.raises(ValueError, match="why"):
        verdict("h", "partly", "e", "  ")
    with pytest.raises(TypeError, match="rows"):
        verdicts_table(["row"])


def test_read_notebook_round_trip(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from iclr26.claims import claim_at_least, glue\n"
            "glue('power', 0.93)\nglue('flag', True)\nglue('nan_value', float('nan'))\n"
            "claim_at_least('power_high', 'power is high', 0.93, 0.9)\n"
            "claim_at_least('size_low', 'fails on purpose', 0.2, 0.9)\n"
        ),
        nbformat.v4.new_code_cell(
            "from iclr26.claims import check_at_most, verdict, verdicts_table\n"
            "check_at_most('identity', 'an identity', 0.0, 1e-9)\n"
            "verdict('the paper says so', 'partly', 'power_high', 'one of two')\n"
            "verdicts_table()\n"
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
        {"headline": "the paper says so", "verdict": "partly", "evidence": "power_high", "why": "one of two"}
    ]
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


def test_read_notebook_flags_a_name_recorded_twice(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from iclr26.claims import claim_at_least\nclaim_at_least('x', 'first', 0.1, 0.5)"),
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
