"""Learning-rate schedules as a factor on each parameter group's initial rate: constant, warmup-cosine, WSD, linear."""

from __future__ import annotations

import math
from typing import Any

from iclr26.validate import as_float, as_int, one_of

__all__ = ["SCHEDULES", "lr_multiplier"]

SCHEDULES = ("constant", "warmup_cosine", "wsd", "linear")


# ------------------------------------------------------------------------------------------------ schedules
def lr_multiplier(
    step: int,
    total_steps: int,
    schedule: str = "constant",
    warmup: int = 0,
    decay_frac: float = 0.2,
    min_lr_ratio: float = 0.0,
) -> float:
    """The factor on the initial learning rate at ``step`` (0-based) of ``total_steps``.

    * ``constant``: linear warmup over ``warmup`` steps, then 1.
    * ``warmup_cosine``: warmup, then cosine from 1 to ``min_lr_ratio`` at the last step.
    * ``wsd``: warmup, a stable phase at 1, then a linear decay to ``min_lr_ratio`` over the last
      ``decay_frac`` of the steps.
    * ``linear``: warmup, then linear decay to ``min_lr_ratio``.
    """
    _check_schedule_name(schedule)
    step = as_int(step, "step", low=0)
    total_steps = as_int(total_steps, "total_steps", low=1)
    warmup = as_int(warmup, "warmup", 0, total_steps)
    decay_frac = as_float(decay_frac, "decay_frac", 0.0, 1.0)
    min_lr_ratio = as_float(min_lr_ratio, "min_lr_ratio", 0.0, 1.0)
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    last = total_steps - 1
    if schedule == "warmup_cosine":
        span = max(last - warmup, 1)
        progress = min(max((step - warmup) / span, 0.0), 1.0)
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    if schedule == "linear":
        span = max(last - warmup, 1)
        progress = min(max((step - warmup) / span, 0.0), 1.0)
        return 1 - (1 - min_lr_ratio) * progress
    # wsd
    decay_steps = int(round(decay_frac * total_steps))
    decay_start = max(total_steps - decay_steps, warmup)
    if step < decay_start or decay_steps == 0:
        return 1.0
    progress = min((step - decay_start + 1) / max(total_steps - decay_start, 1), 1.0)
    return 1 - (1 - min_lr_ratio) * progress


def _check_schedule_name(schedule: Any) -> str:
    if not isinstance(schedule, str):
        raise TypeError(f"schedule must be one of {SCHEDULES} or a callable, got {type(schedule).__name__}")
    return one_of(schedule, "schedule", SCHEDULES)
