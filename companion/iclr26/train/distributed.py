"""Many processes under ``torchrun``: the launcher's environment, the process group, each rank's slice of the batch,
and the all-reduces :func:`~iclr26.train.fit` uses (gradients, logged rows, a stop flag)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from iclr26.validate import as_int, one_of

__all__ = ["DistributedEnv", "distributed_env", "init_distributed", "shard_batch"]


class DistributedEnv(NamedTuple):
    """Where this process sits in a ``torchrun`` launch."""

    rank: int
    world_size: int
    local_rank: int


def distributed_env() -> DistributedEnv | None:
    """The launcher's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``, or ``None`` for a single process (no launcher, or a
    world of one)."""
    import os

    world = os.environ.get("WORLD_SIZE")
    if world is None or int(world) <= 1:
        return None
    rank = int(os.environ.get("RANK", "0"))
    return DistributedEnv(rank, int(world), int(os.environ.get("LOCAL_RANK", str(rank))))


def init_distributed(backend: str | None = None) -> DistributedEnv | None:
    """Join the launcher's process group if there is one (``backend``: ``"nccl"`` where CUDA is available, else
    ``"gloo"``, unless given); return :func:`distributed_env`. A no-op for a single process or when the group exists.
    """
    import torch.distributed as dist

    if backend is not None:
        one_of(backend, "backend", ("nccl", "gloo"))
    env = distributed_env()
    if env is None:
        return None
    if backend is not None:
        one_of(backend, "backend", ("nccl", "gloo"))
    if not dist.is_available():
        raise RuntimeError("this torch build has no torch.distributed, but WORLD_SIZE > 1 asks for many processes")
    if not dist.is_initialized():
        if backend is None:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(env.local_rank)
        dist.init_process_group(backend=backend)
    return env


def shard_batch(batch: Any, rank: int, world_size: int) -> Any:
    """This rank's slice of the leading dimension of every tensor in ``batch`` (nested tuples, lists, dicts and
    NamedTuples are walked; other values are kept whole). ``ValueError`` when a leading dimension is not divisible
    by ``world_size``."""
    world_size = as_int(world_size, "world_size", low=1)
    rank = as_int(rank, "rank", 0, world_size - 1)
    if world_size == 1:
        return batch
    if torch.is_tensor(batch):
        if batch.ndim == 0:
            return batch
        n = batch.shape[0]
        if n % world_size:
            raise ValueError(
                f"batches: a batch's leading dimension ({n}) must be divisible by the number of processes "
                f"({world_size}) so that every rank gets an equal share"
            )
        size = n // world_size
        return batch[rank * size : (rank + 1) * size]
    if isinstance(batch, Mapping):
        return type(batch)({k: shard_batch(v, rank, world_size) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(shard_batch(v, rank, world_size) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(shard_batch(v, rank, world_size) for v in batch)
    return batch


def _average_gradients(params: list[torch.nn.Parameter], world_size: int) -> None:
    """Average ``.grad`` across ranks in one flat all-reduce; a gradient that no rank has stays ``None``."""
    import torch.distributed as dist

    if not params:
        return
    ref = params[0]
    flat = torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).to(ref.dtype) for p in params]
    )
    present = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=ref.device)
    dist.all_reduce(flat)
    dist.all_reduce(present)
    flat /= world_size
    offset = 0
    for p, seen in zip(params, present.tolist()):
        n = p.numel()
        if seen > 0:
            p.grad = flat[offset : offset + n].view_as(p).to(p.dtype).clone()
        offset += n


def _average_row(row: dict, world_size: int, device: torch.device) -> None:
    """Average a history row's numbers across ranks (in place); ``step`` and ``seconds`` are taken from rank 0."""
    import torch.distributed as dist

    keys = sorted(k for k in row if k not in ("step", "seconds", "lr"))
    values = torch.tensor([row[k] for k in keys], dtype=torch.float64, device=device)
    seconds = torch.tensor([row["seconds"]], dtype=torch.float64, device=device)
    dist.all_reduce(values)
    dist.broadcast(seconds, src=0)  # elapsed time: rank 0's clock decides
    for k, v in zip(keys, values.tolist()):
        row[k] = v / world_size
    row["seconds"] = seconds.item()


def _any_rank(flag: bool, device: torch.device) -> bool:
    import torch.distributed as dist

    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)
