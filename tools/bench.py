"""`make bench`: every chapter at `ci` and `book` scale (wall time, peak memory), and `fit`'s overhead.

A full run (every chapter, both scales) rewrites book/reproducibility.md, book/verdicts.md and the measured run times
in every chapter's header.

    python -m tools.bench                     # all chapters, both scales, fit overhead -> _build/bench.json + page
    python -m tools.bench --only influential_sets --scales ci
    python -m tools.bench --fit-only --skip-sae --skip-attention --skip-lm
    python -m tools.bench --pages-only        # re-check the last runs against the manifests, rewrite the pages
    python -m tools.bench --no-pages          # measure only (`make bench` does this, then `make pages`)

Each chapter runs in its own `python -m iclr26 run` process; peak memory is the largest resident set of that
process tree (the papermill driver plus the notebook's kernel), sampled every 0.1 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from tools.bench_attention import attention_speed
from tools.bench_lm import lm_speed
from tools.bench_sae import sae_speed
from tools.common import ROOT, run_chapter
from tools.headers import update_headers
from tools.reproducibility import write_page
from tools.teaching import main as teaching_main
from tools.verdicts import write_page as write_verdicts_page


def fit_overhead(repeats: int = 5, steps: int = 400) -> dict:
    """`fit` vs a hand-written loop: same model, data, optimizer, steps; median wall time of each."""
    import torch

    from iclr26.train import fit

    torch.manual_seed(0)
    x = torch.randn(4096, 32)
    y = torch.randn(4096, 1)

    def make():
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(32, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 1),
        )
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)

    def batch(step):
        i = (step * 128) % 4096
        return x[i : i + 128], y[i : i + 128]

    def manual():
        model, opt = make()
        t0 = time.perf_counter()
        for step in range(steps):
            xb, yb = batch(step)
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if (step + 1) % 50 == 0:
                loss.item()
        return time.perf_counter() - t0

    def with_fit():
        model, opt = make()
        t0 = time.perf_counter()
        fit(
            model,
            lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]),
            batch,
            opt,
            steps=steps,
            clip=1.0,
            log_every=50,
            progress=True,
        )
        return time.perf_counter() - t0

    manual(), with_fit()  # warm up
    m, f = [], []
    for _ in range(repeats):  # interleaved, so drifting machine load hits both alike
        m.append(manual())
        f.append(with_fit())
    mm, fm = statistics.median(m), statistics.median(f)
    return {"manual_seconds": mm, "fit_seconds": fm, "ratio": fm / mm, "repeats": repeats, "steps": steps}


def write_pages(bench: dict) -> None:
    """The Reproducibility and Verdicts pages, the chapter headers and the course guide, from one bench record."""
    print(write_page([bench], ROOT / "book" / "reproducibility.md", source="`make bench`"))
    print(write_verdicts_page([bench], ROOT / "book" / "verdicts.md", source="`make bench`"))
    print("chapter headers updated:", ", ".join(update_headers(bench)) or "none")
    teaching_main([])  # the course guide shows the headers' book times


def _exit_code(runs: list[dict]) -> int:
    """0 iff every run passed its checks and matched its chapter's manifest."""
    return 0 if all(r.get("ok") and not r["manifest"]["errors"] for r in runs) else 1


def main(argv: list[str] | None = None) -> int:
    from iclr26.book.cli import list_chapters
    from iclr26.book.manifest import check_against_manifest, read_manifest

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="chapter slugs (default: every chapter in _toc.yml)")
    parser.add_argument("--scales", nargs="*", default=["ci", "book"], choices=["ci", "book", "paper"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fit-only", action="store_true")
    parser.add_argument("--skip-sae", action="store_true", help="skip the TopK SAE training-speed benchmark")
    parser.add_argument(
        "--skip-attention", action="store_true", help="skip the attention fast-path benchmark (TinyTransformer)"
    )
    parser.add_argument(
        "--skip-lm", action="store_true", help="skip SmolLM2-135M's residual-activation benchmark (tools/bench_lm.py)"
    )
    parser.add_argument("--out", default=str(ROOT / "_build" / "bench.json"))
    parser.add_argument(
        "--pages-only", action="store_true", help="re-render the pages and headers from the last bench file (--out)"
    )
    parser.add_argument("--no-pages", action="store_true", help="measure only (`make bench` then runs `make pages`)")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="with --only: keep the last bench file's runs of the other chapters (and its speed measurements when "
        "skipped here), so the pages describe every chapter",
    )
    args = parser.parse_args(argv)

    def against_manifest(run: dict) -> None:
        """Every run against its chapter's manifest: checks expected at this scale, glue, budget."""
        try:
            errors, warnings = check_against_manifest(run, read_manifest(ROOT / run["notebook"]))
        except ValueError as err:
            errors, warnings = [str(err)], []
        run["manifest"] = {"errors": errors, "warnings": warnings}
        for line in errors:
            print(f"  {Path(run['notebook']).stem} [{run['scale']}] manifest error: {line}")
        for line in warnings:
            print(f"  {Path(run['notebook']).stem} [{run['scale']}] manifest warning: {line}")

    out = Path(args.out)
    if args.pages_only:  # re-render from the last bench file, after a manifest or a page template changed
        if not out.is_file():
            parser.error(f"no bench file at {out}: run `make bench` first")
        bench = json.loads(out.read_text())
        have = {(Path(r["notebook"]).stem, r["scale"]) for r in bench["runs"]}
        chapters = list_chapters(ROOT / "_toc.yml")
        missing = [f"{nb.stem} [{s}]" for nb in chapters for s in ("ci", "book") if (nb.stem, s) not in have]
        if missing:
            parser.error(f"the last bench file lacks {', '.join(missing)}: run `make bench` (or --only ... --merge)")
        for run in bench["runs"]:
            against_manifest(run)
        out.write_text(json.dumps(bench, indent=2) + "\n")
        write_pages(bench)
        return _exit_code(bench["runs"])

    previous = json.loads(out.read_text()) if args.merge and out.is_file() else None
    if args.merge and not args.only:
        parser.error("--merge needs --only (the chapters to rerun)")
    runs = []
    if not args.fit_only:
        chapters = list_chapters(ROOT / "_toc.yml")
        if args.only:
            chapters = [c for c in chapters if c.stem in set(args.only)]
        for nb in chapters:
            for scale in args.scales:
                run = run_chapter(nb, scale, args.seed)
                run["date"] = dt.date.today().isoformat()  # a merged file keeps each run's own date for the headers
                against_manifest(run)
                runs.append(run)
    overhead = fit_overhead()
    print(
        f"fit overhead: {overhead['fit_seconds']:.3f} s vs {overhead['manual_seconds']:.3f} s "
        f"-> ratio {overhead['ratio']:.3f}"
    )
    sae = None
    if not args.skip_sae:
        sae = sae_speed()
        tps = sae["tokens_per_s"]
        print(
            f"TopK SAE training: fast {tps['fast']:,.0f} tokens/s, dense {tps['dense']:,.0f}, "
            f"hand-written dense {tps['hand_dense']:,.0f} -> fast/dense {sae['ratio_fast_over_dense']:.2f}"
        )
    attention = None
    if not args.skip_attention:
        attention = attention_speed()
        tps = attention["tokens_per_s"]
        print(
            f"TinyTransformer attention: fast {tps['fast']:,.0f} tokens/s, explicit {tps['explicit']:,.0f} "
            f"-> speedup {attention['speedup']:.2f}"
        )
    lm = None
    if not args.skip_lm:
        lm = lm_speed()
        tps, gf = lm["tokens_per_s"], lm["gflops"]
        print(
            f"SmolLM2-135M layer-{lm['config']['layer']} activations: residual_activations {tps['residual']:,.0f} "
            f"tokens/s ({gf['residual']:.0f} GFLOP/s, {lm['fraction_of_matmul']:.0%} of the {gf['matmul']:.0f} "
            f"GFLOP/s matmul rate), plain forward {tps['plain']:,.0f} tokens/s -> speedup {lm['speedup']:.1f}"
        )
    merged_from = None
    if previous is not None:
        rerun = {(Path(r["notebook"]).stem, r["scale"]) for r in runs}
        kept = [r for r in previous["runs"] if (Path(r["notebook"]).stem, r["scale"]) not in rerun]
        for r in kept:
            against_manifest(r)
        order = {nb.stem: i for i, nb in enumerate(list_chapters(ROOT / "_toc.yml"))}
        runs = sorted(kept + runs, key=lambda r: (order.get(Path(r["notebook"]).stem, len(order)), r["scale"]))
        sae = sae if sae is not None else previous.get("sae_speed")
        attention = attention if attention is not None else previous.get("attention_speed")
        lm = lm if lm is not None else previous.get("lm_speed")
        merged_from = previous.get("merged_from") or previous["date"]
    bench = {
        "date": dt.date.today().isoformat(),
        "merged_from": merged_from,
        "rerun": sorted(set(args.only)) if previous is not None else None,
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, Python {platform.python_version()}",
        "fit_overhead": overhead,
        "sae_speed": sae,
        "attention_speed": attention,
        "lm_speed": lm,
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(bench, indent=2) + "\n")
    print(f"wrote {out}")
    if not args.no_pages and runs and (args.merge or not args.only) and set(args.scales) >= {"ci", "book"}:
        # the book's pages and the chapter headers describe a full run only, never a partial one
        write_pages(bench)
    return _exit_code(runs)


if __name__ == "__main__":
    sys.exit(main())
