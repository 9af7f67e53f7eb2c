"""iclr26 — the companion package of the executable book *ICLR 2026, Reproduced*.

Modules: ``runtime`` (device, seeds, scales), ``train`` (the ``fit`` loop), ``claims`` (claims and glue),
``plot`` (the figure style), ``cli`` (``python -m iclr26 list | run``); chapters add the building blocks they share.
"""

from iclr26.claims import (
    claim,
    claim_at_least,
    claim_at_most,
    claim_between,
    claim_close_to,
    claim_greater_than,
    claim_less_than,
    claims_table,
    glue,
)
from iclr26.runtime import Config, Timer, pick_device, scale_table, seed_everything, select_scale

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
    "glue",
    "pick_device",
    "scale_table",
    "seed_everything",
    "select_scale",
]
