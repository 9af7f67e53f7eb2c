"""The book's tools: measurement (``bench``, ``bench_sae``, ``bench_attention``, ``bench_lm``, ``robustness``), the
generated pages (``reproducibility``, ``verdicts``, ``headers``, ``teaching``, ``student``), the manifest writer and the
strict ci book. Run them as modules from the repository root, e.g. ``python -m tools.bench``; shared helpers live in
:mod:`tools.common`.
"""
