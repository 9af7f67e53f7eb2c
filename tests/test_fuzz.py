"""Bad input, fuzzed (issue #57): every public name of ``iclr26`` has an entry in the fuzz table, and every case of it
ends well — a bad value refused with a ``TypeError``/``ValueError`` raised by the companion and naming the argument, a
valid stand-in accepted — with no hang (each case runs under a timeout), no silent NaN, no error from deep inside torch.

The table is ``tests/fuzz_entries.py`` (one line per public name; see ``tests/fuzz_cases.py``). Everything runs in
this process, without kernels or subprocesses; ``python tests/fuzz_cases.py`` prints every outcome's count.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

import fuzz_cases  # noqa: E402

from iclr26.book import claims  # noqa: E402

ENTRIES = fuzz_cases.table()
NAMES = fuzz_cases.public_names()


def test_every_public_name_has_an_entry():
    missing = sorted(set(NAMES) - set(ENTRIES))
    assert not missing, (
        "public names without a fuzz entry (add one line each to tests/fuzz_entries.py: E(...) for a callable, "
        f"DATA(...) for a constant or result type, SKIP(..., why) for what cannot run here): {missing}"
    )


def test_every_entry_names_a_public_name():
    stale = sorted(set(ENTRIES) - set(NAMES))
    assert not stale, f"fuzz entries for names that are not public (renamed or removed?): {stale}"


def test_skips_say_why():
    assert all(len(e.skip) > 10 for e in ENTRIES.values() if e.skip)


@pytest.fixture(scope="module")
def session_state():
    """The fuzzed calls record claims, seed the generators, set threads and the plot style: put them all back."""
    import matplotlib

    saved = (
        dict(claims._CLAIMS),
        dict(claims._VERDICTS),
        set(claims._GLUED),
        torch.get_num_threads(),
        torch.get_rng_state(),
        np.random.get_state(),
        random.getstate(),
        dict(matplotlib.rcParams),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    yield
    c, v, g, threads, trng, nrng, prng, rc, det, warn = saved
    claims.reset()
    claims._CLAIMS.update(c)
    claims._VERDICTS.update(v)
    claims._GLUED.update(g)
    torch.set_num_threads(threads)
    torch.set_rng_state(trng)
    np.random.set_state(nrng)
    random.setstate(prng)
    matplotlib.rcParams.update(rc)
    torch.use_deterministic_algorithms(det, warn_only=warn)


CALLED = sorted(name for name, e in ENTRIES.items() if not (e.data or e.skip))


@pytest.mark.parametrize("name", CALLED)
def test_bad_input_is_refused_clearly_and_valid_input_accepted(name, session_state):
    bad = []
    for case in fuzz_cases.cases(ENTRIES[name]):
        outcome, detail = case.run()
        if outcome not in ("good", "accepted"):
            bad.append(f"{outcome}: {name}({case.label}): {detail[:300]}")
    assert not bad, "\n".join(bad)


def test_the_table_covers_the_issue():
    """The issue's bar: at least 171 public callables fuzzed."""
    assert len(CALLED) >= 171, len(CALLED)
