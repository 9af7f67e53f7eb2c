"""iclr26 — the companion package of the executable book *ICLR 2026, Reproduced*.

The core is flat: ``runtime`` (``setup``: style, device, seed, threads, the scale table), ``train`` (the ``fit`` loop),
``claims`` (claims, sanity checks, verdicts and glue), ``checks`` (argument checks), ``optim``, ``sweep``, ``metrics``,
``plot`` and ``cli`` (``python -m iclr26 list | run``). Above it: ``hooks``, the subpackages ``models`` and ``data``,
``hf`` (real models through transformers), and the methods ``sae``, ``diffusion``, ``counterfactuals``, ``topology``.
The companion's README maps which module holds what.
"""

from iclr26.claims import (
    check,
    check_at_least,
    check_at_most,
    check_between,
    check_close_to,
    check_greater_than,
    check_less_than,
    claim,
    claim_at_least,
    claim_at_most,
    claim_between,
    claim_close_to,
    claim_greater_than,
    claim_less_than,
    claims_table,
    glue,
    verdict,
    verdicts_table,
)
from iclr26.runtime import Config, Timer, pick_device, scale_table, seed_everything, select_scale, setup

__version__ = "0.1.0"

__all__ = [
    "Config",
    "Timer",
    "claim",
    "claim_at_least",
    "claim_at_most",
    "claim_between",
    "claim_close_to",
    "claim_greater_than",
    "claim_less_than",
    "claims_table",
    "check",
    "check_at_least",
    "check_at_most",
    "check_between",
    "check_close_to",
    "check_greater_than",
    "check_less_than",
    "glue",
    "verdict",
    "verdicts_table",
    "pick_device",
    "scale_table",
    "seed_everything",
    "select_scale",
    "setup",
]
