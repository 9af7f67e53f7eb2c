"""Write book/reproducibility.md from run results (``python -m iclr26 run --json`` files or tools/bench.py's runs).

python -m tools.reproducibility _build/bench.json          # rewrite book/reproducibility.md
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

from tools.common import ROOT


def load_runs(items: Iterable[Path | dict]) -> tuple[list[dict], dict]:
    """Runs from bench files and/or single run results (paths or dicts), and the last bench file's other keys."""
    runs: list[dict] = []
    meta: dict = {}
    for item in items:
        data = item if isinstance(item, dict) else json.loads(Path(item).read_text())
        if "runs" in data:  # a bench file
            runs.extend(data["runs"])
            meta = {k: v for k, v in data.items() if k != "runs"}
        else:
            runs.append(data)
    return runs, meta


def _manifest_cell(run: dict) -> str:
    """The run against its chapter's manifest (exact check set, glue, time budget)."""
    m = run.get("manifest")
    if m is None:
        return "—"
    if m["errors"]:
        return "; ".join(m["errors"]).replace("|", "\\|")
    return "over budget (≤ 1.5×)" if m["warnings"] else "as promised"


def write_page(items: Iterable[Path | dict], out: Path, source: str) -> Path:
    """Render one row per chapter and scale: claims passed/total, wall time, peak memory."""
    runs, meta = load_runs(items)
    lines = [
        "# Reproducibility",
        "",
        f"Every chapter's claims and run time, from {source}"
        + (f" on {meta['date']} ({meta['machine']})" if "date" in meta else "")
        + ". Times are wall-clock seconds for the whole notebook, kernel start included.",
        "",
    ]
    if meta.get("merged_from") and meta.get("rerun"):
        lines += [
            f"Only {', '.join(f'`{s}`' for s in meta['rerun'])} ran in the last call ({meta['date']}); the other "
            f"chapters keep their earlier runs ({meta['merged_from']}, same machine), their code unchanged since.",
            "",
        ]
    if not runs:
        lines += ["No run has been recorded yet: `make bench` fills this page.", ""]
    else:
        lines += [
            "Paper claims are empirical statements about a paper's results (they could fail if the paper were wrong at",
            "this scale); controls show that a measurement detects the paper's effect where it is present by",
            "construction; sanity checks are identities and by-construction properties (they fail only on a bug);",
            "reports are numbers shown, not asserted. The {doc}`verdicts` page says, per headline claim of each paper,",
            "what was reproduced.",
            "",
            "| chapter | scale | seed | paper claims passed | controls passed | sanity checks passed | reports "
            "| verdicts | wall time (s) | peak memory (MB) | status | manifest |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in sorted(runs, key=lambda r: (Path(r["notebook"]).stem, ["ci", "book", "paper"].index(r["scale"]))):
            claims = r.get("claims", [])
            counts = []
            for kind in ("claim", "control", "sanity"):
                part = [c for c in claims if c.get("kind", "claim") == kind]
                counts.append(f"{sum(bool(c['passed']) for c in part)}/{len(part)}")
            counts.append(str(sum(c.get("kind") == "report" for c in claims)))
            peak = r.get("peak_rss_mb")
            status = "ok" if r.get("ok") else ("execution failed" if r.get("error") else "claim failed")
            peak_text = "" if peak is None else f"{peak:.0f}"
            lines.append(
                f"| `{Path(r['notebook']).stem}` | `{r['scale']}` | {r['seed']} | {' | '.join(counts)} | "
                f"{len(r.get('verdicts', []))} | {r['seconds']:.1f} | {peak_text} | {status} | {_manifest_cell(r)} |"
            )
        lines.append("")
    fit = meta.get("fit_overhead")
    if fit:
        lines += [
            "## The training loop's overhead",
            "",
            f"`iclr26.train.fit` against a hand-written torch loop on the same model, data and steps: "
            f"{fit['fit_seconds']:.3f} s vs {fit['manual_seconds']:.3f} s, a ratio of **{fit['ratio']:.3f}** "
            f"(median of {fit['repeats']} repeats; the goal is ≤ 1.10).",
            "",
        ]
    sae = meta.get("sae_speed")
    if sae:
        tps, c = sae["tokens_per_s"], sae["config"]
        lines += [
            "## TopK SAE training speed",
            "",
            f"One benchmark run of `tools/bench_sae.py`: a TopK SAE with d_in {c['d_in']}, width {c['width']}, "
            f"k {c['k']}, batch {c['batch']}, Adam lr {c['lr']:g}, float32, {c['threads']} threads, "
            f"{c['warmup']} warm-up and {c['steps']} timed steps per variant, interleaved.",
            "",
            "| variant | training tokens/s |",
            "|---|---|",
            f"| `TopKSAE(fast=True)`: k-sparse decode and backward | {tps['fast']:,.0f} |",
            f"| `TopKSAE(fast=False)`: the dense reference | {tps['dense']:,.0f} |",
            f"| a hand-written dense autograd loop | {tps['hand_dense']:,.0f} |",
            "",
            f"The fast path trains **{sae['ratio_fast_over_dense']:.2f}×** as many tokens per second as the dense "
            f"reference ({sae['ratio_fast_over_hand_dense']:.2f}× the hand-written loop); the goals are ≥ 15,000 "
            "tokens/s and ≥ 2.7×.",
            "",
        ]
    att = meta.get("attention_speed")
    if att:
        tps, c = att["tokens_per_s"], att["config"]
        lines += [
            "## Attention fast path",
            "",
            f"One benchmark run of `tools/bench_attention.py`: forward and backward passes (next-token loss) of a "
            f"`TinyTransformer` with d_model {c['d_model']}, {c['n_heads']} heads, {c['n_layers']} layer(s), "
            f"sequence {c['seq_len']}, batch {c['batch']}, causal, α = {c['attn_alpha']:g}, float32, "
            f"{c['threads']} threads, {c['warmup']} warm-up and {c['steps']} timed steps per variant, interleaved.",
            "",
            "| attention path | training tokens/s |",
            "|---|---|",
            f"| fast: `F.scaled_dot_product_attention`, then `W_O` (no hook on the attention) | {tps['fast']:,.0f} |",
            f"| explicit: scores, pattern and per-head outputs (`fast_attention=False`, or hooked) "
            f"| {tps['explicit']:,.0f} |",
            "",
            f"The fast path trains **{att['speedup']:.2f}×** as many tokens per second; the two agree to "
            f"{att['max_abs_diff']['grad']:.1e} in every gradient (float32 rounding).",
            "",
        ]
    lm = meta.get("lm_speed")
    if lm:
        tps, gf, c, m = lm["tokens_per_s"], lm["gflops"], lm["config"], lm["model"]
        lines += [
            "## A real language model's activations",
            "",
            f"One benchmark run of `tools/bench_lm.py`: the residual stream of {m['name']} (the dequantised Q4_1 "
            f"build, float32) after block {c['layer']} of {m['layers']}, for {c['n_tokens']:,} tokens of Python's "
            f"documentation in windows of {c['window']}, batches of {c['batch']} windows, {c['threads']} threads, "
            "the three measurements interleaved batch by batch. GFLOP/s count the linear layers of the blocks that "
            f"run ({lm['gflop_per_token']:.3f} GFLOP per token).",
            "",
            "| measurement | tokens/s | GFLOP/s |",
            "|---|---|---|",
            f"| `iclr26.hf.residual_activations(model, ids, {c['layer']})`: blocks 1–{c['layer']} only, no logits "
            f"| {tps['residual']:,.0f} | {gf['residual']:.0f} |",
            f"| `model(ids, output_hidden_states=True)`: every block and the logits | {tps['plain']:,.0f} | |",
            f"| one block's matmuls on the model's own shapes (median; best {gf['matmul_best']:.0f}) | | "
            f"{gf['matmul']:.0f} |",
            "",
            f"`residual_activations` runs at **{lm['fraction_of_matmul']:.0%}** of the matmul rate and "
            f"**{lm['speedup']:.1f}×** as fast as the plain forward pass, which does {lm['flop_ratio']:.2f}× its "
            "matmul arithmetic (every block and the logits), so equal efficiency would give "
            f"{lm['flop_ratio']:.2f}×; the goals are ≥ 60 % and ≥ 4×. Loading the model from its converted copy "
            f"took {lm['load_seconds']:.1f} s.",
            "",
        ]
    out = Path(out)
    out.write_text("\n".join(lines))
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python -m tools.reproducibility RESULT.json [...]", file=sys.stderr)
        sys.exit(2)
    print(write_page([Path(p) for p in sys.argv[1:]], ROOT / "book" / "reproducibility.md", source="`make bench`"))
