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

The package, one concept a file: :mod:`~iclr26.train.loop` (:func:`fit`), :mod:`~iclr26.train.schedules`
(:func:`lr_multiplier`), :mod:`~iclr26.train.checkpoint` (safetensors checkpoints with RNG states),
:mod:`~iclr26.train.distributed` (``torchrun``: the environment, sharding, gradient averaging),
:mod:`~iclr26.train.losses` (:func:`next_token_loss`), :mod:`~iclr26.train.grads` (flat per-batch gradients of chosen
parameters, :func:`flat_grads`, and :func:`add_flat_` to write a flat vector back) and
:mod:`~iclr26.train.concurrent` (:func:`run_concurrently`: several small trainings side by side on a CPU, one thread
each, bit for bit what one thread gives them one after another).
``from iclr26.train import fit`` is the way in.
"""

from iclr26.train.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from iclr26.train.concurrent import run_concurrently
from iclr26.train.distributed import DistributedEnv, distributed_env, init_distributed, shard_batch
from iclr26.train.grads import add_flat_, flat_grads, flat_params, param_names
from iclr26.train.loop import fit
from iclr26.train.losses import next_token_loss
from iclr26.train.schedules import SCHEDULES, lr_multiplier

__all__ = [
    "fit",
    "run_concurrently",
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
    "param_names",
    "flat_params",
    "flat_grads",
    "add_flat_",
]
