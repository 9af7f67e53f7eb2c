"""The companion's shape: its layers import only downwards, and the wheel Colab installs holds every module.

Layers, bottom to top:

1. the core (flat modules: runtime, train, claims, plot, cli, validate, metrics, sweep, optim, launch): no chapter
   concept;
2. ``hooks``: named hook points, used by every model;
3. ``models/``, ``data/`` and ``hf``: what chapters train, run on and load;
4. the methods (``sae``, ``diffusion``, ``counterfactuals``, ``topology``): the papers' own machinery.

A module may import its own layer or a lower one, never a higher one.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "companion" / "iclr26"

LAYERS = {
    "core": 1,
    "hooks": 2,
    "models": 3,
    "data": 3,
    "hf": 3,
    "sae": 4,
    "diffusion": 4,
    "counterfactuals": 4,
    "topology": 4,
}
CORE = {
    "__init__",
    "__main__",
    "runtime",
    "train",
    "plot",
    "validate",
    "metrics",
    "sweep",
    "optim",
    "book",
}


def _unit(module: str) -> str:
    """'iclr26.models.transformer' -> 'models'; 'iclr26.train' -> 'core'."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    return "core" if top in CORE else top


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 2:
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, name: str | None = None) -> set[str]:
    """The iclr26 modules ``path`` imports, absolute and relative (``from .sae import X``, ``from .. import hooks``),
    resolved against its module name (``name``; by default read from where the file sits in the package)."""
    name = name or _name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                found.add(".".join(base + [node.module]))
            else:  # from . import x: each name is a module of the package (or a name in its __init__)
                found |= {".".join(base + [a.name]) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("iclr26"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("iclr26")}
    return found


def _upward(name: str, imports: set[str]) -> list[str]:
    """The imports of module ``name`` that reach a higher layer than its own."""
    return sorted(m for m in imports if LAYERS.get(_unit(m), 0) > LAYERS[_unit(name)])


def test_every_module_belongs_to_a_layer():
    unknown = {_unit(_name(p)) for p in _modules()} - set(LAYERS)
    assert not unknown, f"modules outside every layer: {unknown}; add them to LAYERS in tests/test_layout.py"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_go_downwards_only(path: Path):
    me = _unit(_name(path))
    upward = _upward(_name(path), _imports(path))
    assert not upward, f"{path.relative_to(PKG)} (layer {LAYERS[me]}, {me}) imports a higher layer: {upward}"


def test_the_layer_check_can_fail(tmp_path):
    """Planted violations, absolute and relative: a core module (layer 1) importing the SAE and model layers."""
    bad = tmp_path / "runtime.py"
    bad.write_text("from iclr26.sae import TopKSAE\nimport iclr26.models\nfrom .diffusion import q_sample\n")
    assert _upward("iclr26.runtime", _imports(bad, "iclr26.runtime")) == [
        "iclr26.diffusion",
        "iclr26.models",
        "iclr26.sae",
    ]
    init = tmp_path / "__init__.py"  # iclr26/data/__init__.py: `from .. import sae` climbs to the package root
    init.write_text("from .. import sae\nfrom . import scenes\nfrom .scenes import make_scenes\n")
    assert _imports(init, "iclr26.data") == {"iclr26.sae", "iclr26.data.scenes"}
    assert _upward("iclr26.data", _imports(init, "iclr26.data")) == ["iclr26.sae"]
    good = tmp_path / "sae_part.py"  # iclr26/sae/part.py importing down and sideways is fine
    good.write_text("from ..validate import as_int\nfrom .kernel import topk\n")
    assert _upward("iclr26.sae.part", _imports(good, "iclr26.sae.part")) == []


@pytest.mark.kernel
def test_built_wheel_holds_every_module(tmp_path):
    # Build from a copy: an in-tree build would leave companion/build/ behind.
    src = tmp_path / "companion"
    shutil.copytree(ROOT / "companion", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("iclr26-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {str(p.relative_to(PKG.parent)) for p in _modules()}
    missing = sorted(expected - names)
    assert not missing, f"the wheel lacks {missing}: is pyproject.toml's package discovery current?"


def test_every_chapter_has_a_row_in_the_chapter_to_code_table():
    """companion/README.md says where each chapter's method lives; every file it names exists."""
    import re

    import yaml

    text = (ROOT / "companion" / "README.md").read_text()
    table = text.split("<!-- chapter-code -->")[1].split("<!-- /chapter-code -->")[0]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", table, re.M)}
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = [
        c["file"].removeprefix("nbs/") for p in toc["parts"] for c in p["chapters"] if c["file"].startswith("nbs/")
    ]
    assert sorted(rows) == sorted(chapters), "one row per chapter in _toc.yml"
    named = set(re.findall(r"`([\w/]+\.py)`", table))
    assert named and all((PKG / f).is_file() for f in named), sorted(f for f in named if not (PKG / f).is_file())
