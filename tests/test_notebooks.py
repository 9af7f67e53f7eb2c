"""Every chapter in _toc.yml, executed by papermill at the `ci` scale: it runs, passes every claim, glues its numbers.

The executed notebooks land in _build/ci/executed/ and their results in _build/ci/results/, where `make ci-book`
builds the book from them with warnings as errors. Set ICLR26_SEED to run another seed
(every claim must hold on any seed).
"""

import json
import os
from pathlib import Path

import pytest

from iclr26.cli import list_chapters, run_notebook

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = list_chapters(ROOT / "_toc.yml")
SEED = int(os.environ.get("ICLR26_SEED", "0"))
OUT = ROOT / "_build" / "ci"

# The numbers each chapter must glue at every scale (fixed names, read by the reproducibility page and outside checks).
REQUIRED_GLUE = {
    "influential_sets": [
        "boston_beta_full",
        "boston_beta_without_s",
        "boston_delta_exact",
        "boston_xi_x",
        "evt_size",
        "mc_size",
        "power",
    ],
    "clock_pizza": [
        "acc_alpha0",
        "acc_alpha1",
        "acc_mlp",
        "dphi_aligned_frac_alpha0",
        "dphi_aligned_frac_alpha1",
        "circ_r_mlp",
        "h1_bars_alpha1",
        "h1_bars_mlp",
        "mmd_pvalue_alpha0_vs_alpha1",
    ],
    "temporal_sae": [
        "fvu_tfa",
        "fvu_topk",
        "boundary_auroc_tfa",
        "boundary_auroc_sae",
        "topic_probe_pred",
        "topic_probe_novel",
        "fast_corr_novel",
        "fast_corr_pred",
    ],
    "diffusion_memorization": [
        "lossgap_fisher_max_relerr",
        "lossgap_ratio_small_vs_mid_t",
        "mem_frac_wide_small_n",
        "mem_frac_narrow_large_n",
        "mem_frac_control",
        "mem_original",
        "mem_pruned",
        "mem_random_pruned",
        "fd_original",
        "fd_pruned",
    ],
    "cola_counterfactuals": [
        "edit_ratio_mean",
        "edit_ratio_random",
        "cola_over_optimum",
        "ot_cost",
        "identity_cost",
        "random_perm_cost",
        "nn_cost",
    ],
    "optimizer_benchmark": [
        "speedup_tuned_vs_recipe",
        "best_lr_adamw",
        "best_lr_lion",
        "best_lr_muon",
        "speedup_muon",
        "speedup_soap",
        "ranking_flip",
        "entropy_rate",
    ],
}


@pytest.mark.chapter
@pytest.mark.parametrize("notebook", CHAPTERS, ids=[nb.stem for nb in CHAPTERS])
def test_chapter_runs_and_its_claims_hold(notebook: Path):
    slug = notebook.stem
    result = run_notebook(notebook, scale="ci", seed=SEED, out=OUT / "executed" / f"{slug}.ipynb")
    (OUT / "results").mkdir(parents=True, exist_ok=True)
    (OUT / "results" / f"{slug}.json").write_text(json.dumps(result, indent=2, default=str))
    print(f"\n{slug} [ci, seed {SEED}]: {result['seconds']:.1f} s")
    for c in result["claims"]:
        print(f"  {'✓' if c['passed'] else '✗'} {c['name']}: {c['value']}")
    assert "error" not in result, f"{slug} failed to execute:\n{result.get('error', '')[-4000:]}"
    assert result["claims"], f"{slug} checks no claim"
    failed = [c for c in result["claims"] if not c["passed"]]
    assert not failed, f"{slug}: claims failed: {failed}"
    missing = [name for name in REQUIRED_GLUE.get(slug, []) if name not in result["glued"]]
    assert not missing, f"{slug}: numbers not glued: {missing}"
    executed = json.loads((OUT / "executed" / f"{slug}.ipynb").read_text())
    figures = sum("image/png" in o.get("data", {}) for c in executed["cells"] for o in c.get("outputs", []))
    assert figures >= 3, f"{slug}: only {figures} figures rendered (a non-inline matplotlib backend?)"
