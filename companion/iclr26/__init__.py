"""iclr26 — the companion package of the executable book *ICLR 2026, Reproduced*.

The core: ``runtime`` (``setup``: style, device, seed, threads, the scale table), the ``train`` package (the ``fit``
loop), ``validate`` (argument validation), ``optim``, ``sweep``, ``metrics``, ``plot``; beside it the ``book`` package,
the book's machinery (claims, controls, sanity checks, reports, verdicts, glue, the manifest, ``python -m iclr26 list |
run`` and the launcher). Above the core: ``hooks``, the subpackages ``models`` and ``data``, ``hf`` (real models through
transformers), and the methods ``sae``, ``diffusion``, ``counterfactuals``, ``topology``. The companion's README maps
which module holds what.
"""

# Names load on first use (PEP 562), so `import iclr26` and `python -m iclr26 list` do not import torch or matplotlib;
# `from iclr26 import glue` works as before.
_LAZY = {
    **dict.fromkeys(
        [
            "check",
            "check_at_least",
            "check_at_most",
            "check_between",
            "check_close_to",
            "check_greater_than",
            "check_less_than",
            "claim",
            "claim_at_least",
            "claim_at_most",
            "claim_between",
            "claim_close_to",
            "claim_greater_than",
            "claim_less_than",
            "claim_where",
            "control",
            "control_at_least",
            "control_at_most",
            "control_between",
            "control_close_to",
            "control_greater_than",
            "control_less_than",
            "glue",
            "report",
        ],
        "iclr26.book.claims",
    ),
    **dict.fromkeys(["claims_table", "results", "verdict", "verdict_word", "verdicts_table"], "iclr26.book.verdicts"),
    **dict.fromkeys(
        ["Config", "Timer", "pick_device", "scale_table", "seed_everything", "select_scale", "setup"], "iclr26.runtime"
    ),
}

__version__ = "0.1.0"

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'iclr26' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
