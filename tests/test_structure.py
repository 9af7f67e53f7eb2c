"""The book's conventions, checked on every chapter notebook (BOOK_DESIGN.md)."""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO_URL = CONFIG["repository"]["url"].rstrip("/")
NOTEBOOKS = sorted((ROOT / "nbs").glob("*.ipynb"))

# The nineteen fixed chapter slugs (../shared/papers/abstracts.md).
SLUGS = {
    "temporal_sae",
    "diffusion_memorization",
    "cola_counterfactuals",
    "vlm_binding",
    "correlation_clustering_testing",
    "rl_planning",
    "loca_sae",
    "conceptual_blindspots",
    "clock_pizza",
    "hidivdrop",
    "weightlens_circuitlens",
    "measure_attention_memory",
    "optimizer_benchmark",
    "proxy_data_selection",
    "bias_gradient_neuron",
    "boosting_ood",
    "patronus_diffusion",
    "influential_sets",
    "eval_awareness_steering",
}


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part.get("chapters", [])]
    return files


def _cells(nb_path: Path) -> list[dict]:
    return json.loads(nb_path.read_text())["cells"]


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def _src_all(nb_path: Path) -> str:
    return "\n".join(_src(c) for c in _cells(nb_path))


def _literal(node):
    """A SCALES table's value: literals, lists, tuples, dicts and dict(...) calls of them."""
    import ast

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    return ast.literal_eval(node)


def _knob(node):
    """A knob's value, or None when it is an expression (``LR[2:6]``) rather than a literal."""
    try:
        return _literal(node)
    except ValueError:
        return None


def scales_table(nb_path: Path) -> dict:
    """The chapter's ``SCALES = {...}`` table, read from the source without running it (a knob whose value is an
    expression, such as ``LR[2:6]``, reads as None and is left out of the switch rule)."""
    import ast

    for cell in _cells(nb_path):
        if cell["cell_type"] != "code":
            continue
        for stmt in ast.parse(_src(cell)).body:
            if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "SCALES" for t in stmt.targets):
                table = {}
                for key, row in zip(stmt.value.keys, stmt.value.values, strict=True):  # row: dict(...) or {...}
                    if isinstance(row, ast.Call):
                        pairs = [(kw.arg, kw.value) for kw in row.keywords]
                    else:
                        pairs = [(ast.literal_eval(k), v) for k, v in zip(row.keys, row.values, strict=True)]
                    table[ast.literal_eval(key)] = {name: _knob(node) for name, node in pairs}
                return table
    raise AssertionError(f"{nb_path.name}: no SCALES table")


def book_only_switches(table: dict, exempt: dict | None = None) -> list[str]:
    """Knobs that switch something on at ``book`` and off at ``ci``: a value that is true-ish at book (True, a
    non-empty list, a non-zero count) and false-ish at ci, or a list of variant names (strings) at book with a name
    that ci lacks. ``exempt`` (the notebook's ``metadata.iclr26.book_only``: knob -> why) lists the knobs that truly
    cannot run at ci size."""
    exempt = exempt or {}
    ci, book = table["ci"], table["book"]
    found = []
    for knob, value in book.items():
        if knob in exempt or value is None or ci.get(knob, 0) is None:
            continue
        if value and not ci.get(knob):
            found.append(f"{knob} (book {value!r}, ci {ci.get(knob)!r})")
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            missing = [v for v in value if v not in (ci.get(knob) or [])]
            if missing:
                found.append(f"{knob} (ci lacks {missing})")
    return found


def test_switch_rule_flags_a_planted_book_only_switch():
    table = {
        "ci": {"n": 10, "extra": False, "variants": ["a"]},
        "book": {"n": 99, "extra": True, "variants": ["a", "b"]},
    }
    assert book_only_switches(table) == ["extra (book True, ci False)", "variants (ci lacks ['b'])"]
    assert book_only_switches(table, {"extra": "why", "variants": "why"}) == []
    table["ci"].update(extra=True, variants=["a", "b"])
    assert book_only_switches(table) == []


def test_course_guide_is_current():
    from tools.teaching import main as teaching

    assert teaching(["--check"]) == 0, "book/teaching.md is not what the chapters give: run `python -m tools.teaching`"


def test_toc_entries_exist():
    for f in _toc_files():
        assert (ROOT / f"{f}.md").is_file() or (ROOT / f"{f}.ipynb").is_file(), f"_toc.yml lists missing page {f}"


def test_references_cover_all_papers():
    keys = set(re.findall(r"^@\w+\{(\w+),", (ROOT / "book" / "references.bib").read_text(), re.M))
    assert SLUGS <= keys, f"references.bib lacks {sorted(SLUGS - keys)}"


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
class TestChapterNotebook:
    def test_slug_is_fixed_and_listed_in_toc(self, nb_path):
        assert nb_path.stem in SLUGS, f"{nb_path.name}: not one of the nineteen chapter slugs"
        assert f"nbs/{nb_path.stem}" in _toc_files(), f"{nb_path.name} is not in _toc.yml"

    def test_outputs_stripped_and_python_kernel(self, nb_path):
        nb = json.loads(nb_path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3"
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, "outputs must be stripped"

    def test_header_title_citation_and_badge(self, nb_path):
        first = _cells(nb_path)[0]
        text = _src(first)
        assert first["cell_type"] == "markdown" and text.startswith("# "), "the first cell is the title"
        assert f"{{cite}}`{nb_path.stem}`" in text, "the header cites the paper by its slug"
        badge = f"https://colab.research.google.com/github/{REPO_URL.removeprefix('https://github.com/')}/blob/main/nbs/{nb_path.name}"
        assert badge in text, f"the header's Colab badge must link {badge}"
        assert re.search(r"ci ≈ [\d.–]+ s", text) and re.search(r"book ≈ [\d.–]+ (s|min)", text), "measured run times"

    def test_teaching_metadata_for_the_course_guide(self, nb_path):
        from tools.teaching import chapter_info

        info = chapter_info(nb_path)  # raises, naming the chapter, when the guide lacks something
        assert len(info["exercises"]) == _src_all(nb_path).count(":class: dropdown"), (
            "metadata.iclr26.teaching.exercises gives one difficulty per exercise"
        )
        link = f"{REPO_URL.removeprefix('https://github.com/')}/blob/main/student/{nb_path.name}"
        assert link in _src(_cells(nb_path)[0]), "the header links the student edition (run `make student`)"

    def test_colab_cell_then_parameters(self, nb_path):
        code = [c for c in _cells(nb_path) if c["cell_type"] == "code"]
        colab, params = code[0], code[1]
        assert "google.colab" in _src(colab) and "remove-cell" in colab["metadata"].get("tags", [])
        assert f"git+{REPO_URL}#subdirectory=companion" in _src(colab), "install from the repository in _config.yml"
        assert "parameters" in params["metadata"].get("tags", [])
        src = _src(params)
        assert re.search(r'^scale = "book"', src, re.M), "the committed default scale is book"
        assert re.search(r"^seed = \d+", src, re.M) and re.search(r'^device = "auto"', src, re.M)

    def test_reading_order_idea_first_setup_hidden(self, nb_path):
        """The page opens with prose: the idea and what we reproduce come before any visible code."""
        cells = _cells(nb_path)
        learn = _src(cells[1])
        assert cells[1]["cell_type"] == "markdown" and learn.startswith("```{admonition} You will learn"), (
            "a 'You will learn' admonition follows the title"
        )
        assert len(re.findall(r"^- \S", learn, re.M)) == 3, "'You will learn' lists three objectives"
        second = _src(cells[2])
        assert cells[2]["cell_type"] == "markdown" and second.startswith("## The idea"), "the idea follows"
        assert re.search(r"^## What we reproduce", second, re.M), "'What we reproduce' comes with the idea, before code"
        code = [c for c in cells if c["cell_type"] == "code"]
        setup = code[2]
        assert "hide-input" in setup["metadata"].get("tags", []), "the setup cell's input is hidden (tag hide-input)"
        src = _src(setup)
        assert re.search(r"\bsetup\(", src) or "scale_table(" in src, (
            "the setup cell shows the scale table: iclr26.setup(SCALES, scale, ...) or scale_table(SCALES, scale)"
        )

    def test_results_open_with_a_verdict_table(self, nb_path):
        """Results are one cell: a verdict(...) row per headline claim of the paper, citing results by name, then
        results(slug), which renders the verdict table, the claims, controls, reports and sanity checks."""
        cells = _cells(nb_path)
        heads = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and re.match(r"## Results", _src(c))]
        assert heads, "a '## Results' section"
        first_code = next(c for c in cells[heads[0] :] if c["cell_type"] == "code")
        src = _src(first_code)
        assert "verdict(" in src and src.rstrip().endswith(f'results("{nb_path.stem}")'), (
            f'the first code cell of Results records verdict(...) rows and ends with results("{nb_path.stem}")'
        )
        assert len(re.findall(r"(?<![\w.])verdict\(", src)) >= 3, "a verdict row per headline claim (at least three)"
        assert "paper_vs_ours" not in _src_all(nb_path), "what the paper reports goes into verdict(paper=...)"
        assert "calibration=" not in _src_all(nb_path), "calibration comes from the robustness data, not typed"

    def test_every_switch_on_at_book_is_on_at_ci(self, nb_path):
        """ci runs every code path book runs, at smaller sizes (book/conventions.md): a feature switch on at book is
        on at ci too, unless metadata.iclr26.book_only names it with the reason it cannot run at ci size."""
        meta = json.loads(nb_path.read_text())["metadata"].get("iclr26", {})
        exempt = meta.get("book_only", {})
        assert all(isinstance(why, str) and why.strip() for why in exempt.values()), "book_only: knob -> why"
        table = scales_table(nb_path)
        assert set(exempt) <= set(table["book"]), (
            f"book_only names unknown knobs {sorted(set(exempt) - set(table['book']))}"
        )
        off = book_only_switches(table, exempt)
        assert not off, f"{nb_path.stem}: on at book, off at ci: {'; '.join(off)}"

    def test_has_claims_results_and_exercises(self, nb_path):
        text = _src_all(nb_path)
        assert "results(" in text
        three = all(f in text for f in ("select_scale(", "seed_everything(", "pick_device("))
        assert re.search(r"\bsetup\(", text) or three, (
            "the chapter selects its scale, seeds and picks the device: iclr26.setup(...), or the three calls"
        )
        assert re.search(r"^#+ .*Exercises", text, re.M), "an Exercises section"
        assert text.count(":class: dropdown") >= 3, "three exercises with solutions in dropdowns"
