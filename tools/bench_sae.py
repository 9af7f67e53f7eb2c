"""TopK SAE training speed: the k-sparse fast path against the dense reference and a hand-written dense loop.

    python -m tools.bench_sae            # -> prints the result and writes _build/bench_sae.json

:func:`sae_speed` trains three TopK SAEs side by side on the same synthetic batches (d_in 256, width 4096, k 32,
batch 4096, Adam lr 3e-4, float32, 2 CPU threads):

* ``fast``: ``TopKSAE(..., fast=True)`` (top-k values and indices only; sparse backward);
* ``dense``: ``TopKSAE(..., fast=False)``, the reference (ReLU, top-k, scatter to the dense code, ``z @ D``);
* ``hand_dense``: a plain dense autograd loop with its own parameters (ReLU-topk-scatter, dense decode, squared
  error, Adam; free decoder norms), i.e. what one would write without the library.

The timed steps run interleaved, in chunks of a few steps per variant in turn, so that drift in the machine's
load hits all three alike. Data: each token is the sum of 16 of 16384 random unit directions with Exp(1) weights
plus Gaussian noise of standard deviation 0.05 per coordinate (generated before timing).
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.sae import TopKSAE
from iclr26.validate import as_int
from tools.common import machine_info, write_result

CONFIG = {
    "d_in": 256,
    "width": 4096,
    "k": 32,
    "batch": 4096,
    "lr": 3e-4,
    "dtype": "float32",
    "threads": 2,
    "n_directions": 16384,
    "directions_per_token": 16,
    "noise": 0.05,
    "chunk": 5,
    "n_batches": 4,
    "seed": 0,
}


def synthetic_batches(
    n_batches: int, batch: int, d_in: int, n_directions: int, per_token: int, noise: float, seed: int
) -> list[torch.Tensor]:
    """``n_batches`` batches of ``batch`` tokens: sums of ``per_token`` of ``n_directions`` random unit directions
    with Exp(1) weights, plus N(0, noise^2) per coordinate."""
    gen = torch.Generator().manual_seed(seed)
    dirs = F.normalize(torch.randn(n_directions, d_in, generator=gen), dim=1)
    out = []
    for _ in range(n_batches):
        idx = torch.randint(0, n_directions, (batch, per_token), generator=gen)
        w = torch.empty(batch, per_token).exponential_(1.0, generator=gen)
        x = F.embedding_bag(idx, dirs, per_sample_weights=w, mode="sum")
        out.append(x + noise * torch.randn(batch, d_in, generator=gen))
    return out


class HandDenseTopK(nn.Module):
    """A TopK SAE written the plain way: dense code, dense decode, autograd for everything."""

    def __init__(self, d_in: int, width: int, k: int, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        w = F.normalize(torch.randn(width, d_in, generator=gen), dim=1)
        self.k = k
        self.W_enc = nn.Parameter(w.T.clone())
        self.b_enc = nn.Parameter(torch.zeros(width))
        self.W_dec = nn.Parameter(w.clone())
        self.b_dec = nn.Parameter(torch.zeros(d_in))

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        act = F.relu((x - self.b_dec) @ self.W_enc + self.b_enc)
        vals, idx = act.topk(self.k, dim=-1)
        z = torch.zeros_like(act).scatter(-1, idx, vals)
        x_hat = z @ self.W_dec + self.b_dec
        return (x - x_hat).pow(2).sum(-1).mean()


def sae_speed(steps: int = 50, warmup: int = 5) -> dict:
    """Training tokens per second of the ``fast``, ``dense`` and ``hand_dense`` TopK SAEs (see the module
    docstring): ``warmup`` untimed steps each, then ``steps`` timed steps each, interleaved in chunks.

    Returns ``{"tokens_per_s": {...}, "ratio_fast_over_dense": ..., "config": {...}}`` plus ``final_loss`` (per
    variant: ``fast`` and ``dense`` follow the same trajectory up to rounding) and ``machine``.
    """
    steps = as_int(steps, "steps", low=1)
    warmup = as_int(warmup, "warmup", low=0)
    c = CONFIG
    threads_before = torch.get_num_threads()
    torch.set_num_threads(c["threads"])
    try:
        data = synthetic_batches(
            c["n_batches"], c["batch"], c["d_in"], c["n_directions"], c["directions_per_token"], c["noise"], c["seed"]
        )
        models = {}
        for name in ("fast", "dense"):
            torch.manual_seed(c["seed"])  # the same initial weights for both
            models[name] = TopKSAE(c["d_in"], c["width"], k=c["k"], fast=name == "fast")
        models["hand_dense"] = HandDenseTopK(c["d_in"], c["width"], c["k"], seed=c["seed"])
        opts = {name: torch.optim.Adam(m.parameters(), lr=c["lr"]) for name, m in models.items()}
        done = dict.fromkeys(models, 0)
        seconds = dict.fromkeys(models, 0.0)
        last = {}

        def run(name: str, n: int) -> float:
            model, opt = models[name], opts[name]
            t0 = time.perf_counter()
            for _ in range(n):
                x = data[done[name] % len(data)]
                out = model.loss(x)
                loss = out[0] if isinstance(out, tuple) else out
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                done[name] += 1
            last[name] = float(loss.detach())
            return time.perf_counter() - t0

        for name in models:
            if warmup:
                run(name, warmup)
        order = list(models)
        remaining = steps
        rnd = 0
        while remaining > 0:
            n = min(c["chunk"], remaining)
            for name in order[rnd % 3 :] + order[: rnd % 3]:  # rotate who goes first
                seconds[name] += run(name, n)
            remaining -= n
            rnd += 1
    finally:
        torch.set_num_threads(threads_before)
    tps = {name: steps * c["batch"] / seconds[name] for name in models}
    return {
        "tokens_per_s": tps,
        "ratio_fast_over_dense": tps["fast"] / tps["dense"],
        "ratio_fast_over_hand_dense": tps["fast"] / tps["hand_dense"],
        "final_loss": last,
        "config": {**c, "steps": steps, "warmup": warmup},
        "machine": machine_info(),
    }


if __name__ == "__main__":
    write_result(sae_speed(), "bench_sae.json")
