"""Every chapter in _toc.yml, executed by papermill at the `ci` scale: it runs, passes every check, and matches its
manifest (metadata.iclr26.manifest): exactly the checks listed for `ci` and every glued name. Its time budget only
warns here (budgets are measured by `make bench` on a quiet machine, not asserted in a timed test); a hung cell
(over 1.5× the budget) or notebook (over 3×) fails with its name.

The executed notebooks land in _build/ci/executed/ and their results in _build/ci/results/, where `make ci-book`
builds the book from them with warnings as errors. Set ICLR26_SEED to run another seed (every claim must hold on any
seed): ``ICLR26_SEED=3 make chapters``.
"""

import json
import os
import warnings
from collections import Counter
from pathlib import Path

import pytest

from iclr26.book.cli import list_chapters, run_notebook
from iclr26.book.manifest import BUDGET_FAIL, check_against_manifest, read_manifest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = list_chapters(ROOT / "_toc.yml")
SEED = int(os.environ.get("ICLR26_SEED", "0"))
OUT = ROOT / "_build" / "ci"


@pytest.mark.chapter
@pytest.mark.parametrize("notebook", CHAPTERS, ids=[nb.stem for nb in CHAPTERS])
def test_chapter_runs_and_its_claims_hold(notebook: Path):
    slug = notebook.stem
    manifest = read_manifest(notebook)
    budget = manifest["budget_s"]["ci"]
    result = run_notebook(
        notebook,
        scale="ci",
        seed=SEED,
        out=OUT / "executed" / f"{slug}.ipynb",
        cell_timeout=BUDGET_FAIL * budget,
        timeout=2 * BUDGET_FAIL * budget,
    )
    (OUT / "results").mkdir(parents=True, exist_ok=True)
    (OUT / "results" / f"{slug}.json").write_text(json.dumps(result, indent=2, default=str))
    rel = notebook.relative_to(ROOT)
    rerun = f"rerun: ICLR26_SEED={SEED} make chapters, or .venv/bin/python -m iclr26 run {rel} --scale ci --seed {SEED}"
    print(f"\n{slug} [ci, seed {SEED}]: {result['seconds']:.1f} s")
    for c in result["claims"]:
        print(f"  {'✓' if c['passed'] else '✗'} [{c['kind']}] {c['name']}: {c['value']}")
    assert "error" not in result, f"{slug} failed to execute ({rerun}):\n{result.get('error', '')[-4000:]}"
    assert result["claims"], f"{slug} records no check ({rerun})"
    assert not result.get("duplicates"), f"{slug}: check names recorded twice: {result['duplicates']} ({rerun})"
    failed = [c for c in result["claims"] if not c["passed"]]
    assert not failed, f"{slug}: checks failed at seed {SEED}: {failed} ({rerun})"
    errors, warnings_ = check_against_manifest(result, manifest, budget_fails=False)
    for w in warnings_:
        warnings.warn(f"{slug}: {w}", stacklevel=1)
    assert not errors, f"{slug} does not match its manifest: {errors} ({rerun})"
    assert result["verdicts"], f"{slug} records no verdict table"
    assert not result.get("verdict_problems"), f"{slug}: verdict rows break the rules: {result['verdict_problems']}"
    executed = json.loads((OUT / "executed" / f"{slug}.ipynb").read_text())
    figures = sum("image/png" in o.get("data", {}) for c in executed["cells"] for o in c.get("outputs", []))
    assert figures >= 3, f"{slug}: only {figures} figures rendered (a non-inline matplotlib backend?)"
    glued = Counter(
        o["metadata"]["scrapbook"]["name"]
        for c in executed["cells"]
        for o in c.get("outputs", [])
        if "scrapbook" in o.get("metadata", {})
    )
    twice = sorted(name for name, n in glued.items() if n > 1)
    assert not twice, f"{slug}: names glued twice (report() glues its value; -W fails the book): {twice}"
