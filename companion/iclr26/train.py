"""One training loop for every chapter: :func:`fit`.

    history = fit(model, loss_fn, batches, optimizer, steps=2000, schedule="warmup_cosine", warmup=100, clip=1.0)

* ``loss_fn(model, batch)`` returns the loss tensor, or ``(loss, {"acc": ...})`` to log extra metrics;
* ``batches`` is a callable ``step -> batch`` (a sampler; full-batch training is ``lambda step: (x, y)``) or an
  iterable of batches (cycled when exhausted); tensors inside a batch are moved to the model's device;
* ``optimizer`` is a ``torch.optim.Optimizer`` or a list of them (e.g. Muon for matrices + AdamW for the rest);
* schedules multiply each parameter group's initial learning rate: ``"constant"``, ``"warmup_cosine"``,
  ``"wsd"`` (warmup–stable–decay with a linear decay over the last ``decay_frac`` of training), or a callable
  ``(step, total_steps) -> multiplier``;
* bf16 autocast on CUDA (``amp="auto"``), gradient clipping, a tqdm bar, a pandas history;
* ``checkpoint="run.safetensors"`` saves model, optimizer, step, RNG states and history every ``checkpoint_every``
  steps and at the end; ``resume=`` that file continues exactly where it stopped.

Many processes (``torchrun --nproc_per_node=N``, one per GPU, or ``gloo`` processes on a CPU): :func:`fit` runs
unchanged. It finds the launcher's environment (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``), joins the process group
(``nccl`` for a CUDA model, ``gloo`` otherwise), copies rank 0's parameters to every rank, and trains data-parallel:

* **the batch contract**: ``batches`` gives the *global* batch, the same on every rank (a seeded sampler, or the same
  iterable); each rank keeps its slice of the leading dimension of every tensor in it (rank ``r`` of ``N`` keeps
  rows ``r·B/N … (r+1)·B/N``, so ``B`` must be divisible by ``N``). With a loss that averages over the batch, the
  averaged gradient is the gradient of the global batch, and ``N`` processes follow a one-process run on the whole
  batch up to float rounding;
* after each backward the gradients are averaged across ranks (what ``DistributedDataParallel`` does; ``fit`` does it
  without wrapping the model, so ``loss_fn`` and ``eval_fn`` receive the model itself and may call its methods);
* logged losses and metrics are averaged across ranks (so early stopping and time budgets decide the same on every
  rank); only rank 0 shows a progress bar and writes checkpoints; every rank returns the same history.

One process (no launcher) is untouched by all this: the same code path and the same numbers as before.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from iclr26.checks import check_bool, check_choice, check_float, check_int, check_module, token_tensor

__all__ = [
    "fit",
    "lr_multiplier",
    "next_token_loss",
    "save_checkpoint",
    "load_checkpoint",
    "Checkpoint",
    "SCHEDULES",
    "DistributedEnv",
    "distributed_env",
    "init_distributed",
    "shard_batch",
]

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
    step = check_int(step, "step", low=0)
    total_steps = check_int(total_steps, "total_steps", low=1)
    warmup = check_int(warmup, "warmup", 0, total_steps)
    decay_frac = check_float(decay_frac, "decay_frac", 0.0, 1.0)
    min_lr_ratio = check_float(min_lr_ratio, "min_lr_ratio", 0.0, 1.0)
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
    return check_choice(schedule, "schedule", SCHEDULES)


# ------------------------------------------------------------------------------------------------ helpers
def _to_device(batch: Any, device: torch.device) -> Any:
    if torch.is_tensor(batch):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(_to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


def _as_optimizers(optimizer: Any, name: str = "optimizer", empty_ok: bool = False) -> list[torch.optim.Optimizer]:
    opts = list(optimizer) if isinstance(optimizer, Sequence) and not isinstance(optimizer, str) else [optimizer]
    if (not opts and not empty_ok) or not all(isinstance(o, torch.optim.Optimizer) for o in opts):
        raise TypeError(f"{name} must be a torch.optim.Optimizer or a {'' if empty_ok else 'non-empty '}list of them")
    return opts


def _check_history(history: Any) -> list[dict]:
    if history is None:
        return []
    if not isinstance(history, list) or not all(isinstance(r, Mapping) for r in history):
        raise TypeError(f"history must be a list of dicts (one row per logged step) or None, got {history!r:.60}")
    return history


def _check_path(path: Any, name: str) -> Path:
    if not isinstance(path, (str, Path)):
        raise TypeError(f"{name} must be a str or Path (a file path), got {type(path).__name__}")
    return Path(path)


def _scalar(x: Any) -> float:
    return float(x.detach().float().item()) if torch.is_tensor(x) else float(x)


class _BatchStream:
    """Batches by step: a sampler is called with the step; an iterable is cycled and can skip ahead."""

    def __init__(self, batches: Any) -> None:
        if callable(batches):
            self.sampler, self.iterable = batches, None
        elif isinstance(batches, Iterable):
            self.sampler, self.iterable = None, batches
            self._it = iter(batches)
        else:
            raise TypeError(
                f"batches must be a callable step -> batch or an iterable of batches, got {type(batches).__name__}"
            )

    def skip(self, n: int) -> None:
        if self.iterable is not None:
            for _ in range(n):
                self._next()

    def _next(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self.iterable)
            try:
                return next(self._it)
            except StopIteration:
                raise ValueError("batches is an empty iterable") from None

    def get(self, step: int) -> Any:
        return self.sampler(step) if self.sampler is not None else self._next()


# ------------------------------------------------------------------------------------------------ many processes
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
        check_choice(backend, "backend", ("nccl", "gloo"))
    env = distributed_env()
    if env is None:
        return None
    if backend is not None:
        check_choice(backend, "backend", ("nccl", "gloo"))
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
    world_size = check_int(world_size, "world_size", low=1)
    rank = check_int(rank, "rank", 0, world_size - 1)
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


# ------------------------------------------------------------------------------------------------ checkpoints
def _flatten_optimizer(opt: torch.optim.Optimizer, prefix: str) -> tuple[dict[str, torch.Tensor], dict]:
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for pid, state in sd["state"].items():
        for key, val in state.items():
            name = f"{prefix}.state.{pid}.{key}"
            if torch.is_tensor(val):
                tensors[name] = val.detach().cpu().contiguous().clone()
            else:
                scalars[name] = val
    try:
        json.dumps(sd["param_groups"])
        json.dumps(scalars)
    except TypeError as err:
        raise ValueError(f"optimizer state of {type(opt).__name__} is not JSON-serialisable: {err}") from err
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _unflatten_optimizer(opt: torch.optim.Optimizer, prefix: str, tensors: dict, meta: dict) -> None:
    state: dict[int, dict[str, Any]] = {}
    head = prefix + ".state."
    for name, val in list(tensors.items()) + list(meta["scalars"].items()):
        if name.startswith(head):
            pid, key = name[len(head) :].split(".", 1)
            state.setdefault(int(pid), {})[key] = val
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def save_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizers: Sequence[torch.optim.Optimizer] = (),
    step: int = 0,
    history: list[dict] | None = None,
) -> Path:
    """Save model weights, optimizer states, the step, RNG states and the history to one safetensors file."""
    from safetensors.torch import save_file

    path = _check_path(path, "path")
    check_module(model)
    optimizers = _as_optimizers(optimizers, "optimizers", empty_ok=True)
    step = check_int(step, "step", low=0)
    history = _check_history(history)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{k}": v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    opt_meta = []
    for j, opt in enumerate(optimizers):
        t, m = _flatten_optimizer(opt, f"optim{j}")
        tensors.update(t)
        opt_meta.append(m)
    tensors["rng.torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    np_state = np.random.get_state()
    tensors["rng.numpy"] = torch.from_numpy(np.asarray(np_state[1], dtype=np.int64))
    meta = {
        "step": str(step),
        "optimizers": json.dumps(opt_meta),
        "rng_numpy": json.dumps([np_state[0], int(np_state[2]), int(np_state[3]), float(np_state[4])]),
        "rng_python": json.dumps(random.getstate(), default=list),
        "history": json.dumps(history or []),
    }
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=meta)
    tmp.replace(path)
    return path


class Checkpoint(NamedTuple):
    """What :func:`load_checkpoint` returns: the step the checkpoint was saved at and the history up to it."""

    step: int
    history: list[dict]


def load_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizers: Sequence[torch.optim.Optimizer] = (),
    restore_rng: bool = True,
) -> Checkpoint:
    """Load what :func:`save_checkpoint` wrote into ``model`` and ``optimizers``; return ``Checkpoint(step, history)``
    (``step, history = load_checkpoint(...)`` unpacks it)."""
    from safetensors import safe_open

    path = _check_path(path, "path")
    check_module(model)
    optimizers = _as_optimizers(optimizers, "optimizers", empty_ok=True)
    restore_rng = check_bool(restore_rng, "restore_rng")
    if not path.is_file():
        raise ValueError(f"checkpoint path {str(path)!r} does not exist")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if "step" not in meta:
        raise ValueError(f"checkpoint {str(path)!r} was not written by iclr26.train.save_checkpoint")
    state = {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")}
    try:
        model.load_state_dict(state)
    except RuntimeError as e:  # missing or unexpected keys, or shapes that differ
        raise ValueError(f"model does not match the checkpoint {str(path)!r}: {e}") from None
    opt_meta = json.loads(meta["optimizers"])
    if len(opt_meta) != len(optimizers):
        raise ValueError(f"checkpoint holds {len(opt_meta)} optimizer state(s), got {len(optimizers)} optimizer(s)")
    for j, (opt, m) in enumerate(zip(optimizers, opt_meta)):
        _unflatten_optimizer(opt, f"optim{j}", tensors, m)
    if restore_rng:
        torch.set_rng_state(tensors["rng.torch"])
        cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda.")]
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda)
        name, pos, has_gauss, gauss = json.loads(meta["rng_numpy"])
        np.random.set_state((name, tensors["rng.numpy"].numpy().astype(np.uint32), pos, has_gauss, gauss))
        version, internal, gauss_next = json.loads(meta["rng_python"])
        random.setstate((version, tuple(internal), gauss_next))
    return Checkpoint(int(meta["step"]), json.loads(meta["history"]))


# ------------------------------------------------------------------------------------------------ fit
def fit(
    model: torch.nn.Module,
    loss_fn: Callable[[torch.nn.Module, Any], Any],
    batches: Callable[[int], Any] | Iterable[Any],
    optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
    *,
    steps: int | None = None,
    time_budget: float | None = None,
    schedule: str | Callable[[int, int], float] = "constant",
    warmup: int = 0,
    decay_frac: float = 0.2,
    min_lr_ratio: float = 0.0,
    clip: float | None = None,
    amp: str | bool = "auto",
    log_every: int = 10,
    eval_fn: Callable[[torch.nn.Module], Mapping[str, float]] | None = None,
    eval_every: int | None = None,
    stop_fn: Callable[[Mapping[str, float]], bool] | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume: str | Path | None = None,
    progress: bool = True,
    desc: str = "train",
    distributed: str | bool = "auto",
):
    """Train ``model`` and return its history as a DataFrame (one row per logged step).

    Parameters
    ----------
    steps, time_budget
        Train for ``steps`` optimizer steps and/or until ``time_budget`` seconds have passed (at least one of them).
        Schedules other than ``"constant"`` need ``steps``.
    schedule, warmup, decay_frac, min_lr_ratio
        The learning-rate schedule (see :func:`lr_multiplier`); a callable gets ``(step, steps)``.
    clip
        Clip the global gradient norm to this value (``None``: no clipping); the norm is logged as ``grad_norm``.
    amp
        ``"auto"``: bf16 autocast on CUDA only; ``True``/``"bf16"``: always; ``False``/``"off"``: never.
    log_every
        Record loss, learning rate and metrics every this many steps (and at the last step).
    eval_fn, eval_every
        ``eval_fn(model) -> {"name": value}`` every ``eval_every`` steps (default ``log_every``) and at the end;
        run under ``torch.no_grad()`` with the model in eval mode.
    stop_fn
        ``stop_fn(row) -> bool`` is called after every evaluation; returning True ends training (early stopping).
    checkpoint, checkpoint_every, resume
        Save a safetensors checkpoint every ``checkpoint_every`` steps and at the end; resume from one.
    distributed
        ``"auto"``: train data-parallel when a launcher (``torchrun``) started several processes, see the module
        docstring; ``False``: train this process alone even then.
    """
    import pandas as pd
    from tqdm.auto import tqdm

    check_module(model)
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a callable (model, batch) -> loss, got {type(loss_fn).__name__}")
    opts = _as_optimizers(optimizer)
    own = {id(p) for p in model.parameters()}
    if not any(id(p) in own for o in opts for g in o.param_groups for p in g["params"]):
        raise ValueError("optimizer holds none of model's parameters: build it from model.parameters()")
    stream = _BatchStream(batches)
    if steps is None and time_budget is None:
        raise ValueError("give steps or time_budget (or both)")
    if steps is not None:
        steps = check_int(steps, "steps", low=1)
    if time_budget is not None:
        time_budget = check_float(time_budget, "time_budget", 0.0, low_open=True)
    warmup = check_int(warmup, "warmup", low=0)
    decay_frac = check_float(decay_frac, "decay_frac", 0.0, 1.0)
    min_lr_ratio = check_float(min_lr_ratio, "min_lr_ratio", 0.0, 1.0)
    if callable(schedule):
        sched_fn = schedule
    else:
        _check_schedule_name(schedule)
        if schedule != "constant" and steps is None:
            raise ValueError(f"schedule={schedule!r} needs steps (the schedule's length)")
        total = steps if steps is not None else 1

        def sched_fn(step: int, _total: int) -> float:
            if steps is None:
                return (step + 1) / warmup if step < warmup else 1.0
            return lr_multiplier(step, total, schedule, warmup, decay_frac, min_lr_ratio)

        sched_fn(0, steps or 1)  # validates warmup against steps at the door
    if clip is not None:
        clip = check_float(clip, "clip", 0.0, low_open=True)
    check_choice(amp, "amp", ("auto", "bf16", "off", True, False))
    log_every = check_int(log_every, "log_every", low=1)
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError("eval_fn must be a callable model -> dict of metrics, or None")
    eval_every = log_every if eval_every is None else check_int(eval_every, "eval_every", low=1)
    if stop_fn is not None and not callable(stop_fn):
        raise TypeError(f"stop_fn must be a callable row -> bool, or None, got {type(stop_fn).__name__}")
    if stop_fn is not None and eval_fn is None:
        raise ValueError("stop_fn needs eval_fn: it is called with each evaluation's metrics")
    if checkpoint_every is not None:
        checkpoint_every = check_int(checkpoint_every, "checkpoint_every", low=1)
    progress = check_bool(progress, "progress")
    if not isinstance(desc, str):
        raise TypeError(f"desc must be a str (the progress bar's label), got {type(desc).__name__}")
    if checkpoint_every is not None and checkpoint is None:
        raise ValueError("checkpoint_every needs checkpoint (a file path)")
    if checkpoint is not None:
        _check_path(checkpoint, "checkpoint")
    if resume is not None and not _check_path(resume, "resume").is_file():
        raise ValueError(f"resume: checkpoint path {str(resume)!r} does not exist")
    check_choice(distributed, "distributed", ("auto", True, False))

    try:
        device = next(model.parameters()).device
    except StopIteration:
        raise ValueError("model has no parameters to train") from None
    use_amp = amp in ("bf16", True) or (amp == "auto" and device.type == "cuda")
    dist_env = init_distributed("nccl" if device.type == "cuda" else "gloo") if distributed else None
    if distributed is True and dist_env is None:
        raise ValueError("distributed=True needs a launcher's environment (WORLD_SIZE > 1, e.g. torchrun)")
    params = [p for p in model.parameters() if p.requires_grad]
    if dist_env is not None:
        import torch.distributed as dist

        with torch.no_grad():  # every rank starts from rank 0's weights, as DistributedDataParallel does
            for t in list(model.parameters()) + list(model.buffers()):
                dist.broadcast(t.data, src=0)
    is_main = dist_env is None or dist_env.rank == 0
    for opt in opts:
        for group in opt.param_groups:
            group.setdefault("initial_lr", group["lr"])

    history: list[dict] = []
    start = 0
    if resume is not None:
        start, history = load_checkpoint(resume, model, opts)
        stream.skip(start)

    def evaluate(row: dict) -> None:
        model.eval()
        with torch.no_grad():
            metrics = eval_fn(model)
        model.train()
        if not isinstance(metrics, Mapping):
            raise TypeError(f"eval_fn must return a dict of metrics, got {type(metrics).__name__}")
        row.update({k: _scalar(v) for k, v in metrics.items()})

    model.train()
    t0 = time.perf_counter()
    elapsed_before = history[-1]["seconds"] if history else 0.0
    bar = tqdm(total=steps, initial=start, desc=desc, disable=not (progress and is_main), mininterval=1.0, leave=False)
    step = start
    stopped = False
    last_mult = None
    try:
        while steps is None or step < steps:
            mult = sched_fn(step, steps or 1)
            if mult != last_mult:
                for opt in opts:
                    for group in opt.param_groups:
                        group["lr"] = group["initial_lr"] * mult
                last_mult = mult
            batch = _to_device(stream.get(step), device)
            if dist_env is not None:
                batch = shard_batch(batch, dist_env.rank, dist_env.world_size)
            if use_amp:
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    out = loss_fn(model, batch)
            else:
                out = loss_fn(model, batch)
            loss, metrics = out if isinstance(out, tuple) else (out, {})
            if not torch.is_tensor(loss) or loss.ndim != 0:
                raise TypeError("loss_fn must return a scalar tensor, or (scalar tensor, dict of metrics)")
            for opt in opts:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            if dist_env is not None:
                _average_gradients(params, dist_env.world_size)
            grad_norm = None
            if clip is not None:
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for opt in opts:
                opt.step()
            step += 1
            seconds = elapsed_before + time.perf_counter() - t0
            out_of_time = time_budget is not None and seconds >= time_budget
            if dist_env is not None and time_budget is not None:
                out_of_time = _any_rank(out_of_time, device)
            last = step == steps or out_of_time
            do_eval = eval_fn is not None and (step % eval_every == 0 or last)
            if step % log_every == 0 or last or do_eval:
                row = {"step": step, "loss": _scalar(loss), "lr": opts[0].param_groups[0]["lr"], "seconds": seconds}
                if grad_norm is not None:
                    row["grad_norm"] = _scalar(grad_norm)
                row.update({k: _scalar(v) for k, v in metrics.items()})
                if do_eval:
                    evaluate(row)
                if dist_env is not None:
                    _average_row(row, dist_env.world_size, device)
                if do_eval and stop_fn is not None and stop_fn(row):
                    stopped = True
                history.append(row)
                bar.set_postfix(loss=f"{row['loss']:.4g}", refresh=False)
            bar.update(1)
            if is_main and checkpoint is not None and checkpoint_every and step % checkpoint_every == 0:
                save_checkpoint(checkpoint, model, opts, step, history)
            if out_of_time or stopped:
                break
    finally:
        bar.close()
    if is_main and checkpoint is not None:
        save_checkpoint(checkpoint, model, opts, step, history)
    if dist_env is not None:
        dist.barrier()  # the checkpoint is on disk before any rank moves on (and may read it)
    frame = pd.DataFrame(history)
    frame.attrs["stopped_early"] = stopped
    return frame


# ------------------------------------------------------------------------------------------------ losses
def next_token_loss(model: Callable, tokens: torch.Tensor, skip: int = 0, *, feed_last: bool = False) -> torch.Tensor:
    """Mean cross-entropy of predicting ``tokens[:, t + 1]`` from the logits at position ``t``, for a language model.

    ``model(tokens)`` must return logits of shape ``(batch, seq, vocab)`` (any causal LM: ``TinyTransformer``, ...).
    ``tokens`` is an integer tensor ``(batch, T)``. The targets are ``tokens[:, 1:]``; ``skip`` leaves out the first
    ``skip`` of them (positions that have not yet seen enough context, e.g. the first ``order - 1`` positions of an
    order-``order`` Markov chain, so that the loss's floor is the chain's entropy rate), so ``T - 1 - skip`` targets
    per row remain (at least one). Works directly as ``fit``'s ``loss_fn``: ``fit(model, next_token_loss, ...)``.

    The model reads ``tokens[:, :-1]`` (the last token is only a target); ``feed_last=True`` feeds all ``T`` tokens
    and drops the last position's logits instead: the same loss up to float rounding, one position more work. It
    exists so that results computed that way stay bit-identical.
    """
    if not callable(model):
        raise TypeError(f"model must be callable (tokens -> logits), got {type(model).__name__}")
    if not torch.is_tensor(tokens) or tokens.dtype == torch.bool or tokens.is_floating_point() or tokens.is_complex():
        got = tokens.dtype if torch.is_tensor(tokens) else type(tokens).__name__
        raise TypeError(f"tokens must be an integer tensor of shape (batch, seq), got {got}")
    if tokens.dim() != 2 or tokens.shape[0] == 0:
        raise ValueError(f"tokens must have shape (batch, seq) with batch >= 1, got {tuple(tokens.shape)}")
    vocab = getattr(getattr(model, "cfg", None), "vocab_size", None)
    token_tensor(tokens, "tokens", vocab if isinstance(vocab, int) else None)
    skip = check_int(skip, "skip", low=0)
    feed_last = check_bool(feed_last, "feed_last")
    T = tokens.shape[1]
    if T < skip + 2:
        raise ValueError(f"tokens has {T} positions: need at least skip + 2 = {skip + 2} to leave one target")
    logits = model(tokens if feed_last else tokens[:, :-1])
    n_in = T if feed_last else T - 1
    if not torch.is_tensor(logits) or logits.dim() != 3 or tuple(logits.shape[:2]) != (tokens.shape[0], n_in):
        got = tuple(logits.shape) if torch.is_tensor(logits) else type(logits).__name__
        raise ValueError(
            f"model must return logits of shape (batch, seq, vocab) = ({tokens.shape[0]}, {n_in}, vocab), got {got}"
        )
    logits = logits[:, skip : T - 1]
    targets = tokens[:, skip + 1 :]
    if vocab is None:  # a model that does not declare its vocabulary: check the targets against its logits
        token_tensor(targets, "tokens", logits.shape[-1])
    if targets.dtype != torch.int64:  # cross_entropy wants int64 targets; int32 tokens are accepted as the model does
        targets = targets.long()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
