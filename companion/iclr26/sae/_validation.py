"""Argument conversion shared by the SAE modules."""

from __future__ import annotations

import functools

from iclr26.validate import float_tensor

_as_tensor = functools.partial(float_tensor, numpy_ok=True)
