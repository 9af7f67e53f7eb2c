"""Write book/teaching.md, the course guide, from the chapters themselves.

    python -m tools.teaching            # rewrite book/teaching.md
    python -m tools.teaching --check    # fail if book/teaching.md is not what the chapters give (the tests run this)

Each chapter carries what the guide needs: its "You will learn" cell (the second cell: three objectives), and
``metadata.iclr26.teaching`` in the notebook — ``topic`` (one sentence), ``prerequisites`` (a list) and
``exercises`` (one difficulty per exercise: easy, medium or hard). Run times come from the chapter's header, which
`make bench` writes; `make bench` also rewrites this page. The course paths below list only the chapters that exist,
so they grow as chapters land.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from tools.common import ROOT, cell_source

LEARN = re.compile(r"```\{admonition\} You will learn\n(?::class: \w+\n)?((?:- .*\n?)+)```", re.M)
DIFFICULTY = {"easy": "★", "medium": "★★", "hard": "★★★"}
COLAB_INSTALL_S = 60  # the install cell on a fresh Colab runtime (pip install of the companion), estimated

# Two course paths: (week title, chapter slugs). Chapters that do not exist yet are left out of the page.
PATHS = {
    "Interpretability": [
        ("Features in toy models: Fourier neurons, discs and tori", ["clock_pizza"]),
        ("Sparse autoencoders and a temporal prior", ["temporal_sae"]),
        ("What amortised SAE inference costs", ["loca_sae"]),
        ("Concept energies through an archetypal SAE: blindspots of image generators", ["conceptual_blindspots"]),
        ("Transcoder features read from the weights, and circuits from attributions", ["weightlens_circuitlens"]),
        ("Binding in vision-language models", ["vlm_binding"]),
        ("Which layers use the image: late injection, pyramid pruning and early exit of vision tokens", ["hidivdrop"]),
        ("Steering an evaluation-aware model organism", ["eval_awareness_steering"]),
        ("A feature in one gradient neuron: GRADIEND and rewriting a planted bias", ["bias_gradient_neuron"]),
        ("Memorisation and attention heads in diffusion models", ["diffusion_memorization"]),
        ("Prototypes inside a diffusion model: what, where, when, and shortcuts", ["patronus_diffusion"]),
        ("Explaining a model's decisions: counterfactuals", ["cola_counterfactuals"]),
    ],
    "Statistics and optimisation": [
        ("Influence, extreme values and the size of a test", ["influential_sets"]),
        ("Distribution shift under hidden confounding: what boosted trees' leaves know", ["boosting_ood"]),
        ("Property testing and query complexity", ["correlation_clustering_testing"]),
        ("Attention as associative memory on measures: recall, rates and long contexts", ["measure_attention_memory"]),
        ("Score matching as estimation: the Fisher-divergence gap", ["diffusion_memorization"]),
        ("Benchmarking optimizers: tuning, scaling fits, rankings", ["optimizer_benchmark"]),
        ("Choosing data with small proxy runs: rankings, tuning and learning rates", ["proxy_data_selection"]),
    ],
}


def chapter_info(notebook: Path) -> dict:
    """What the guide shows for one chapter; ValueError naming the chapter when something is missing."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    slug, cells = notebook.stem, nb["cells"]
    teaching = nb.get("metadata", {}).get("iclr26", {}).get("teaching")
    if not isinstance(teaching, dict):
        raise ValueError(f"{slug}: the notebook has no metadata.iclr26.teaching")
    for key, kind in (("topic", str), ("prerequisites", list), ("exercises", list)):
        if not isinstance(teaching.get(key), kind) or not teaching[key]:
            raise ValueError(f"{slug}: metadata.iclr26.teaching.{key} must be a non-empty {kind.__name__}")
    bad = [d for d in teaching["exercises"] if d not in DIFFICULTY]
    if bad:
        raise ValueError(f"{slug}: exercise difficulties must be one of {sorted(DIFFICULTY)}, got {bad}")
    match = LEARN.search(cell_source(cells[1])) if len(cells) > 1 else None
    if match is None:
        raise ValueError(f"{slug}: the second cell must be the 'You will learn' admonition")
    objectives = [line[2:].strip() for line in match.group(1).strip().splitlines()]
    header = cell_source(cells[0])
    book = re.search(r"book ≈ ([\d.–]+) (s|min)", header)
    seconds = None
    if book and "–" not in book.group(1):
        seconds = float(book.group(1)) * (60 if book.group(2) == "min" else 1)
    return {"slug": slug, "objectives": objectives, "book_seconds": seconds, **teaching}


def _minutes(seconds: float | None, estimate: bool = False) -> str:
    if seconds is None:
        return "not measured"
    text = f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
    return f"≈ {text} (est.)" if estimate else text


def render(chapters: list[dict]) -> str:
    by_slug = {c["slug"]: c for c in chapters}
    lines = [
        "# Teaching with this book",
        "",
        "Every chapter is a self-contained unit: a paper's idea, its method implemented, its claims checked at a size "
        "that runs on a laptop, and three exercises with solutions. This page is for a course: what each chapter "
        "teaches and needs, how long it runs, and two suggested paths through the book.",
        "",
        "**Student edition.** `make student` writes every chapter without its solutions (each exercise's solution "
        "becomes a cell that says what to write); each chapter's header links its student edition on GitHub and "
        "Colab. Hand out the student edition, and the full chapter after the deadline.",
        "",
        "**Run times.** *Laptop* is the `book` scale measured by `make bench` on 2 CPU cores (the chapter headers "
        "show the same numbers). *Colab* is an estimate, not a measurement: Colab's free CPU runtime also has 2 "
        f"cores, so we add about {COLAB_INSTALL_S} s for the install cell; a free GPU runtime is not needed below the "
        "`paper` scale. Exercise difficulty (★ easy, ★★ medium, ★★★ hard) is our judgment.",
        "",
        "## The chapters",
        "",
        "| chapter | topic | prerequisites | laptop (`book`) | Colab (free tier) | exercises |",
        "|---|---|---|---|---|---|",
    ]
    for c in chapters:
        colab = None if c["book_seconds"] is None else c["book_seconds"] + COLAB_INSTALL_S
        lines.append(
            f"| {{doc}}`/nbs/{c['slug']}` | {c['topic']} | {'; '.join(c['prerequisites'])} "
            f"| {_minutes(c['book_seconds'])} | {_minutes(colab, estimate=True)} "
            f"| {' · '.join(DIFFICULTY[d] for d in c['exercises'])} |"
        )
    lines += ["", "## What each chapter teaches", ""]
    for c in chapters:
        lines += [f"**{{doc}}`/nbs/{c['slug']}`.** You will learn to", ""]
        lines += [f"- {o}" for o in c["objectives"]]
        lines.append("")
    lines += [
        "## Two course paths",
        "",
        "One chapter a week: read the chapter, run it at `book` scale, do the student edition's exercises, then "
        "change one thing (a seed, a size, a baseline) and say whether the chapter's verdicts still hold "
        "({doc}`robustness` shows how much room each claim has).",
        "",
    ]
    for name, weeks in PATHS.items():
        present = [(title, [s for s in slugs if s in by_slug]) for title, slugs in weeks]
        present = [(title, slugs) for title, slugs in present if slugs]
        lines += [f"### {name} ({len(present)} weeks)", "", "| week | theme | chapter |", "|---|---|---|"]
        for i, (title, slugs) in enumerate(present, 1):
            lines.append(f"| {i} | {title} | {', '.join(f'{{doc}}`/nbs/{s}`' for s in slugs)} |")
        missing = [s for _, slugs in weeks for s in slugs if s not in by_slug]
        if len(missing) == 1:
            lines += ["", f"A week on `{missing[0]}` joins this path when that chapter lands."]
        elif missing:
            lines += ["", f"Weeks on {', '.join(f'`{s}`' for s in missing)} join this path when those chapters land."]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from iclr26.book.cli import list_chapters

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = render([chapter_info(nb) for nb in list_chapters(ROOT / "_toc.yml")])
    page = ROOT / "book" / "teaching.md"
    if args.check:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            print("book/teaching.md is not what the chapters give: run `python -m tools.teaching`")
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    print(page.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
