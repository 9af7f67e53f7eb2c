"""Run by tests/test_distributed.py under ``torchrun --nproc_per_node=2`` (gloo, CPU), or alone for the reference.

    python distributed_worker.py OUT_DIR [fit|resume|launch-free]

Trains the same tiny model on the same global batches with :func:`iclr26.train.fit` and writes each rank's final
parameters and history to OUT_DIR/rank<r>.safetensors / .json.
"""

import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from iclr26.train import distributed_env, fit

STEPS = 6
BATCH = 8  # the global batch: each of 2 ranks trains on 4 rows


def model_and_optimizer(init_seed: int = 0):
    torch.manual_seed(init_seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


def global_batch(step: int):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH, 5, generator=g)
    return x, torch.randint(0, 3, (BATCH,), generator=g)


def loss_fn(model, batch):
    x, y = batch
    logits = model(x)
    return torch.nn.functional.cross_entropy(logits, y), {"acc": (logits.argmax(-1) == y).float().mean()}


def main(out: Path, mode: str) -> None:
    env = distributed_env()
    rank = 0 if env is None else env.rank
    common = dict(log_every=1, clip=1.0, progress=False)
    if mode == "fit":
        # ranks start from different weights: fit must copy rank 0's to every rank first
        model, opt = model_and_optimizer(init_seed=rank)
        history = fit(model, loss_fn, global_batch, opt, steps=STEPS, **common)
    elif mode == "resume":
        model, opt = model_and_optimizer()
        ckpt = out / "half.safetensors"
        fit(model, loss_fn, global_batch, opt, steps=STEPS // 2, checkpoint=ckpt, **common)
        assert ckpt.is_file(), "rank 0 wrote the checkpoint before fit returned on any rank"
        model, opt = model_and_optimizer(init_seed=99)  # fresh weights: everything must come from the checkpoint
        history = fit(model, loss_fn, global_batch, opt, steps=STEPS, resume=ckpt, **common)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / f"rank{rank}.safetensors"))
    (out / f"rank{rank}.json").write_text(history.to_json(orient="records"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "fit")
