"""Several small trainings at once on a CPU, each on one thread: :func:`run_concurrently`.

A small model uses a CPU's cores poorly: torch splits each small operation across its intra-op threads, and some
fused kernels (the CPU attention with a head of 8 dimensions, say) gain little from a second thread. Independent
jobs run side by side, one torch thread each, keep every core busy instead. While they run, torch's intra-op thread
count is 1, so each job computes exactly what it computes alone under ``torch.set_num_threads(1)``: the results are,
bit for bit, those of running the jobs one after another on one thread, whatever the machine's core count.

    models = run_concurrently([lambda m=m: fit(m, loss_fn, batches, opt_for(m), steps=1000) for m in models])

A job must not draw from a global random number generator (torch's, numpy's, Python's) while others run, since the
order of their draws would then depend on timing: seed and build the models first, and give a job that samples as it
trains a ``torch.Generator`` of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from iclr26.validate import as_int

__all__ = ["run_concurrently"]


def run_concurrently(jobs: Sequence[Callable[[], Any]], workers: int | None = None) -> list[Any]:
    """Run independent jobs (callables of no argument) side by side on CPU threads, one torch thread each, and
    return their results in the order of ``jobs``.

    ``workers``: at most this many jobs at once (default: torch's intra-op thread count when called, at most
    ``len(jobs)``); with one worker the jobs run one after another on the calling thread. Either way torch's
    intra-op thread count is 1 while they run and is restored after, so the results are the same for every
    ``workers``: those of the jobs one after another under ``torch.set_num_threads(1)``.
    A job's exception is raised here (the first in the order of ``jobs``) once every started job has ended.
    """
    if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
        raise TypeError(f"jobs must be a sequence (list or tuple) of callables, got {type(jobs).__name__}")
    for i, job in enumerate(jobs):
        if not callable(job):
            raise TypeError(f"jobs[{i}] must be a callable of no argument, got {type(job).__name__}")
    before = torch.get_num_threads()
    workers = min(before, max(len(jobs), 1)) if workers is None else as_int(workers, "workers", low=1)
    workers = min(workers, max(len(jobs), 1))
    torch.set_num_threads(1)
    try:
        if workers == 1:
            return [job() for job in jobs]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]  # the pool has waited for every job: the first failure in order raises
    finally:
        torch.set_num_threads(before)
