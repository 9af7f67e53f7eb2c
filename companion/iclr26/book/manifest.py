"""A chapter's manifest (``metadata.iclr26.manifest`` of its notebook): the checks and reports each scale records, the
glued names the page and outside checks read, and the time budget per scale. :func:`write_manifest` writes it from run
results (``python -m tools.manifest`` is its command line), :func:`read_manifest` reads it back, and
:func:`check_against_manifest` holds a run to it (the chapter tests and `make bench` do)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iclr26.runtime import SCALES

__all__ = ["read_manifest", "check_against_manifest", "write_manifest", "DEFAULT_BUDGET"]

BUDGET_WARN, BUDGET_FAIL = 1.0, 1.5  # a run above its budget warns, above 1.5× its budget fails
DEFAULT_BUDGET = {"ci": 60, "book": 180}


def write_manifest(
    notebook: Path, results: list[dict], glue: list[str] | None = None, budget: dict | None = None
) -> dict:
    """Rewrite ``notebook``'s manifest from ``results`` (``python -m iclr26 run --json`` dicts, one per scale): their
    check names per scale, ``glue`` (kept from the old manifest when None; each must be glued by every run) and
    ``budget`` over the default. Returns the manifest."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    meta = nb.setdefault("metadata", {}).setdefault("iclr26", {})
    old = meta.get("manifest") or {}
    claims = dict(old.get("claims", {}))
    for r in results:
        claims[r["scale"]] = [c["name"] for c in r["claims"]]
    glue = list(old.get("glue", [])) if glue is None else list(glue)
    missing = [g for r in results for g in glue if g not in r.get("glued", {})]
    if missing:
        raise ValueError(f"glue names not glued by the runs given: {sorted(set(missing))}")
    manifest = {
        "claims": claims,
        "glue": glue,
        "budget_s": {**DEFAULT_BUDGET, **old.get("budget_s", {}), **(budget or {})},
    }
    meta["manifest"] = manifest
    Path(notebook).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def _path(value: Any, name: str) -> Path:
    if not isinstance(value, (str, Path)):
        raise TypeError(f"{name} must be a str or Path, got {type(value).__name__}")
    return Path(value)


def read_manifest(notebook: str | Path) -> dict[str, Any]:
    """A chapter's manifest, from its notebook's metadata (``metadata.iclr26.manifest``).

    ``{"claims": {scale: [names]}, "glue": [names], "budget_s": {scale: seconds}}``: the check names (paper claims and
    sanity checks) a run records at each scale, the glued names the page and outside checks read, and the time budget
    per scale. Raises ``ValueError`` when the notebook has none or it is malformed.
    """
    path = _path(notebook, "notebook")
    if not path.is_file():
        raise ValueError(f"notebook {str(path)!r} is not a file")
    meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    manifest = (meta.get("iclr26") or {}).get("manifest")
    if not isinstance(manifest, dict):
        raise ValueError(f"{path.name} has no manifest (metadata.iclr26.manifest)")
    claims, glue, budget = manifest.get("claims"), manifest.get("glue"), manifest.get("budget_s")
    ok = (
        isinstance(claims, dict)
        and all(k in SCALES and isinstance(v, list) and all(isinstance(n, str) for n in v) for k, v in claims.items())
        and isinstance(glue, list)
        and all(isinstance(n, str) for n in glue)
        and isinstance(budget, dict)
        and all(k in SCALES and isinstance(v, (int, float)) and v > 0 for k, v in budget.items())
    )
    if not ok:
        raise ValueError(
            f"{path.name}: the manifest must be {{'claims': {{scale: [names]}}, 'glue': [names], "
            f"'budget_s': {{scale: seconds}}}}, got {manifest!r}"
        )
    return manifest


def check_against_manifest(
    result: dict[str, Any], manifest: dict[str, Any], *, budget_fails: bool = True
) -> tuple[list[str], list[str]]:
    """Compare a :func:`run_notebook` result with the chapter's manifest: ``(errors, warnings)``.

    Errors: a check the manifest expects at this scale is missing, or one it does not list was recorded (a branch
    that skips or adds a check is visible, never a silent 8/9); a glued name is missing; the run took more than
    1.5× its budget. Warning: it took between 1× and 1.5× its budget (timing noise).

    ``budget_fails=False`` makes a run over 1.5× its budget a warning too: budgets are measured by ``make bench`` on
    a quiet machine, not asserted in a timed test, whose machine may be slower (the chapter test passes it).
    """
    if not isinstance(budget_fails, bool):
        raise TypeError(f"budget_fails must be a bool, got {type(budget_fails).__name__}")
    if not isinstance(result, dict) or not isinstance(result.get("scale"), str):
        raise TypeError(f"result must be a run_notebook result (a dict with 'scale', 'claims', ...), got {result!r}")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("claims"), dict):
        raise TypeError(f"manifest must be a read_manifest dict ('claims', 'glue', 'budget_s'), got {manifest!r}")
    errors: list[str] = []
    warnings: list[str] = []
    scale = result["scale"]
    expected = manifest["claims"].get(scale)
    recorded = [c["name"] for c in result.get("claims", [])]
    if expected is not None:
        missing = [n for n in expected if n not in recorded]
        extra = [n for n in recorded if n not in expected]
        if missing:
            errors.append(f"checks the manifest expects at {scale} but the run did not record: {missing}")
        if extra:
            errors.append(f"checks recorded at {scale} that the manifest does not list: {extra}")
    missing_glue = [n for n in manifest["glue"] if n not in result.get("glued", {})]
    if missing_glue:
        errors.append(f"numbers not glued: {missing_glue}")
    budget = manifest["budget_s"].get(scale)
    if budget is not None and "seconds" in result:
        ratio = result["seconds"] / budget
        if ratio > BUDGET_FAIL:
            over = f"took {result['seconds']:.1f} s, over {BUDGET_FAIL}× its {scale} budget of {budget:g} s"
            (errors if budget_fails else warnings).append(over)
        elif ratio > BUDGET_WARN:
            warnings.append(f"took {result['seconds']:.1f} s, over its {scale} budget of {budget:g} s")
    return errors, warnings
