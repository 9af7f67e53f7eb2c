"""The training loop, :func:`fit` (see :mod:`iclr26.train` for what it does): its arguments are checked in one place
(:func:`_plan`), the model and the process group are prepared in another (:func:`_prepare`), and the loop reads as
step, log, evaluate, checkpoint."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from iclr26.train.checkpoint import _as_optimizers, _check_path, load_checkpoint, save_checkpoint
from iclr26.train.distributed import (
    DistributedEnv,
    _any_rank,
    _average_gradients,
    _average_row,
    init_distributed,
    shard_batch,
)
from iclr26.train.schedules import _check_schedule_name, lr_multiplier
from iclr26.validate import as_bool, as_float, as_int, as_module, one_of

__all__ = ["fit"]


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


@dataclass
class _Plan:
    """fit's arguments, checked: what the loop reads."""

    opts: list[torch.optim.Optimizer]
    stream: _BatchStream
    steps: int | None
    time_budget: float | None
    sched_fn: Callable[[int, int], float]
    clip: float | None
    log_every: int
    eval_fn: Callable[[torch.nn.Module], Mapping[str, float]] | None
    eval_every: int
    stop_fn: Callable[[Mapping[str, float]], bool] | None
    checkpoint: str | Path | None
    checkpoint_every: int | None


def _plan(
    *,
    model,
    loss_fn,
    batches,
    optimizer,
    steps,
    time_budget,
    schedule,
    warmup,
    decay_frac,
    min_lr_ratio,
    clip,
    amp,
    log_every,
    eval_fn,
    eval_every,
    stop_fn,
    checkpoint,
    checkpoint_every,
    resume,
    progress,
    desc,
    distributed,
) -> _Plan:
    """Every argument of :func:`fit` checked at the door (TypeError/ValueError naming it)."""
    as_module(model)
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
        steps = as_int(steps, "steps", low=1)
    if time_budget is not None:
        time_budget = as_float(time_budget, "time_budget", 0.0, low_open=True)
    warmup = as_int(warmup, "warmup", low=0)
    decay_frac = as_float(decay_frac, "decay_frac", 0.0, 1.0)
    min_lr_ratio = as_float(min_lr_ratio, "min_lr_ratio", 0.0, 1.0)
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
        clip = as_float(clip, "clip", 0.0, low_open=True)
    one_of(amp, "amp", ("auto", "bf16", "off", True, False))
    log_every = as_int(log_every, "log_every", low=1)
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError("eval_fn must be a callable model -> dict of metrics, or None")
    eval_every = log_every if eval_every is None else as_int(eval_every, "eval_every", low=1)
    if stop_fn is not None and not callable(stop_fn):
        raise TypeError(f"stop_fn must be a callable row -> bool, or None, got {type(stop_fn).__name__}")
    if stop_fn is not None and eval_fn is None:
        raise ValueError("stop_fn needs eval_fn: it is called with each evaluation's metrics")
    if checkpoint_every is not None:
        checkpoint_every = as_int(checkpoint_every, "checkpoint_every", low=1)
    as_bool(progress, "progress")
    if not isinstance(desc, str):
        raise TypeError(f"desc must be a str (the progress bar's label), got {type(desc).__name__}")
    if checkpoint_every is not None and checkpoint is None:
        raise ValueError("checkpoint_every needs checkpoint (a file path)")
    if checkpoint is not None:
        _check_path(checkpoint, "checkpoint")
    if resume is not None and not _check_path(resume, "resume").is_file():
        raise ValueError(f"resume: checkpoint path {str(resume)!r} does not exist")
    one_of(distributed, "distributed", ("auto", True, False))
    return _Plan(
        opts,
        stream,
        steps,
        time_budget,
        sched_fn,
        clip,
        log_every,
        eval_fn,
        eval_every,
        stop_fn,
        checkpoint,
        checkpoint_every,
    )


def _prepare(model: torch.nn.Module, plan: _Plan, amp: Any, distributed: Any):
    """The device, whether to autocast to bf16, the process group (None alone) with rank 0's weights on every rank,
    and each optimizer group's initial learning rate (what the schedule multiplies)."""
    try:
        device = next(model.parameters()).device
    except StopIteration:
        raise ValueError("model has no parameters to train") from None
    use_amp = amp in ("bf16", True) or (amp == "auto" and device.type == "cuda")
    dist_env = init_distributed("nccl" if device.type == "cuda" else "gloo") if distributed else None
    if distributed is True and dist_env is None:
        raise ValueError("distributed=True needs a launcher's environment (WORLD_SIZE > 1, e.g. torchrun)")
    if dist_env is not None:
        import torch.distributed as dist

        with torch.no_grad():  # every rank starts from rank 0's weights, as DistributedDataParallel does
            for t in list(model.parameters()) + list(model.buffers()):
                dist.broadcast(t.data, src=0)
    for opt in plan.opts:
        for group in opt.param_groups:
            group.setdefault("initial_lr", group["lr"])
    return device, use_amp, dist_env


def _train_step(model, loss_fn, batch, plan: _Plan, params, use_amp: bool, device, dist_env: DistributedEnv | None):
    """One optimizer step on ``batch``: the loss (under bf16 autocast if asked), backward, the gradients averaged
    across ranks, clipping, every optimizer's step. Returns the loss, the loss function's metrics and the norm."""
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
    for opt in plan.opts:
        opt.zero_grad(set_to_none=True)
    loss.backward()
    if dist_env is not None:
        _average_gradients(params, dist_env.world_size)
    grad_norm = None
    if plan.clip is not None:
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), plan.clip)
    for opt in plan.opts:
        opt.step()
    return loss, metrics, grad_norm


def _evaluate(model: torch.nn.Module, eval_fn: Callable, row: dict) -> None:
    """``eval_fn(model)``'s metrics into ``row``, in eval mode and without gradients."""
    model.eval()
    with torch.no_grad():
        metrics = eval_fn(model)
    model.train()
    if not isinstance(metrics, Mapping):
        raise TypeError(f"eval_fn must return a dict of metrics, got {type(metrics).__name__}")
    row.update({k: _scalar(v) for k, v in metrics.items()})


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
    plan = _plan(**locals())  # every argument, checked at the door (before any other local is defined)
    import pandas as pd
    from tqdm.auto import tqdm

    device, use_amp, dist_env = _prepare(model, plan, amp, distributed)
    params = [p for p in model.parameters() if p.requires_grad]
    is_main = dist_env is None or dist_env.rank == 0
    steps = plan.steps
    history: list[dict] = []
    start = 0
    if resume is not None:
        start, history = load_checkpoint(resume, model, plan.opts)
        plan.stream.skip(start)

    model.train()
    t0 = time.perf_counter()
    elapsed_before = history[-1]["seconds"] if history else 0.0
    bar = tqdm(total=steps, initial=start, desc=desc, disable=not (progress and is_main), mininterval=1.0, leave=False)
    step, stopped, last_mult = start, False, None
    try:
        while steps is None or step < steps:
            mult = plan.sched_fn(step, steps or 1)
            if mult != last_mult:
                for opt in plan.opts:
                    for group in opt.param_groups:
                        group["lr"] = group["initial_lr"] * mult
                last_mult = mult
            batch = _to_device(plan.stream.get(step), device)
            loss, metrics, grad_norm = _train_step(model, loss_fn, batch, plan, params, use_amp, device, dist_env)
            step += 1
            seconds = elapsed_before + time.perf_counter() - t0
            out_of_time = plan.time_budget is not None and seconds >= plan.time_budget
            if dist_env is not None and plan.time_budget is not None:
                out_of_time = _any_rank(out_of_time, device)
            last = step == steps or out_of_time
            do_eval = plan.eval_fn is not None and (step % plan.eval_every == 0 or last)
            if step % plan.log_every == 0 or last or do_eval:
                row = {
                    "step": step,
                    "loss": _scalar(loss),
                    "lr": plan.opts[0].param_groups[0]["lr"],
                    "seconds": seconds,
                }
                if grad_norm is not None:
                    row["grad_norm"] = _scalar(grad_norm)
                row.update({k: _scalar(v) for k, v in metrics.items()})
                if do_eval:
                    _evaluate(model, plan.eval_fn, row)
                if dist_env is not None:
                    _average_row(row, dist_env.world_size, device)
                if do_eval and plan.stop_fn is not None and plan.stop_fn(row):
                    stopped = True
                history.append(row)
                bar.set_postfix(loss=f"{row['loss']:.4g}", refresh=False)
            bar.update(1)
            if is_main and checkpoint is not None and plan.checkpoint_every and step % plan.checkpoint_every == 0:
                save_checkpoint(checkpoint, model, plan.opts, step, history)
            if out_of_time or stopped:
                break
    finally:
        bar.close()
    if is_main and checkpoint is not None:
        save_checkpoint(checkpoint, model, plan.opts, step, history)
    if dist_env is not None:
        import torch.distributed as dist

        dist.barrier()  # the checkpoint is on disk before any rank moves on (and may read it)
    frame = pd.DataFrame(history)
    frame.attrs["stopped_early"] = stopped
    return frame
