"""Several small trainings at once on a CPU, each on one thread: :func:`run_concurrently`.

A small model uses a CPU's cores poorly: torch splits each small operation across its intra-op threads, and some
fused kernels (the CPU attention with a head of 8 dimensions, say) gain little from a second thread. Independent
jobs run side by side, one torch thread each, keep every core busy instead. While they run, torch's intra-op thread
count is 1, so each job computes exactly what it computes alone under ``torch.set_num_threads(1)``: the results are,
bit for bit, those of running the jobs one after another on one thread, whatever the machine's core count.

    histories = run_concurrently([lambda m=m: fit(m, loss_fn, batches, opt_for(m), steps=1000) for m in models])

A job must not draw from a global random number generator (torch's, numpy's, Python's) while others run, since the
order of their draws would then depend on timing: seed and build the models first, and give a job that samples as it
trains a ``torch.Generator`` of its own. Nor may it change torch's thread count, which is one for the whole process.
"The same bits" holds on one CPU type and torch build: another instruction set (AVX2, AVX-512, ARM) has kernels of
its own even on one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import torch

from iclr26.validate import as_int

__all__ = ["run_concurrently"]


def run_concurrently(jobs: Sequence[Callable[[], Any]], workers: int | None = None) -> list[Any]:
    """Run independent jobs (callables of no argument) side by side on CPU threads, one torch thread each, and
    return their results in the order of ``jobs``.

    ``workers``: at most this many jobs at once (default: torch's intra-op thread count when called, at most
    ``len(jobs)``); with one worker the jobs run one after another on the calling thread. Either way torch's
    intra-op thread count is 1 while they run and is restored after, and each job runs in the calling thread's grad
    mode, so the results are the same for every ``workers``: those of the jobs one after another under
    ``torch.set_num_threads(1)``. Where a job raises, the jobs not yet started are dropped, those running finish,
    and the first exception in the order of ``jobs`` is raised here.
    """
    if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
        raise TypeError(f"jobs must be a sequence (list or tuple) of callables, got {type(jobs).__name__}")
    for i, job in enumerate(jobs):
        if not callable(job):
            raise TypeError(f"jobs[{i}] must be a callable of no argument, got {type(job).__name__}")
    before = torch.get_num_threads()
    workers = min(before if workers is None else as_int(workers, "workers", low=1), max(len(jobs), 1))
    grad = torch.is_grad_enabled()

    def run(job: Callable[[], Any]) -> Any:
        torch.set_num_threads(1)  # this thread's own OpenMP and MKL settings, not only the process's count
        with torch.set_grad_enabled(grad):  # grad mode is per thread: a worker starts with it on
            return job()

    torch.set_num_threads(1)
    try:
        if workers == 1:
            return [run(job) for job in jobs]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run, job) for job in jobs]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            if any(f.exception() is not None for f in done):
                for f in futures:
                    f.cancel()  # drops the jobs not yet started; the pool waits for those running
        for f in futures:
            if not f.cancelled() and f.exception() is not None:
                raise f.exception()
        return [f.result() for f in futures]
    finally:
        torch.set_num_threads(before)
