"""TinyTransformer's attention fast path against its explicit path: training tokens per second.

    python -m tools.bench_attention        # -> prints the result and writes _build/bench_attention.json

:func:`attention_speed` times forward + backward (next-token cross-entropy) of two copies of one
:class:`~iclr26.models.TinyTransformer` on the same batches, at a shape like the optimizer benchmark's paper scale
(d_model 768, 12 heads of 64, sequence 512, batch 2, one layer with d_mlp 3072, causal, α = 1, float32, 2 CPU
threads):

* ``fast``: the default, ``F.scaled_dot_product_attention`` and one ``W_O`` product, taken while no hook reads or
  patches the attention's scores, pattern or per-head outputs;
* ``explicit``: ``TransformerConfig(fast_attention=False)``, the path every hook can see: scores, the (q, k) pattern
  and the per-head (batch, seq, heads, d_model) outputs, then their sum.

Before timing, both compute the loss and gradients of one batch; their largest differences are reported (they agree
up to float32 rounding). The timed steps run interleaved, a few per variant in turn, so that drift in the machine's
load hits both alike.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping

import torch
import torch.nn.functional as F

from iclr26.models import TinyTransformer, TransformerConfig
from iclr26.validate import as_int
from tools.common import machine_info, write_result

CONFIG = {
    "d_model": 768,
    "n_heads": 12,
    "seq_len": 512,
    "batch": 2,
    "n_layers": 1,
    "vocab": 512,
    "attn_alpha": 1.0,
    "dtype": "float32",
    "threads": 2,
    "chunk": 2,
    "n_batches": 4,
    "seed": 0,
}
SHAPE_KEYS = ("d_model", "n_heads", "seq_len", "batch", "n_layers", "vocab")


def _loss(model: TinyTransformer, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def attention_speed(steps: int = 4, warmup: int = 1, shape: Mapping[str, int] | None = None) -> dict:
    """Training tokens per second of the ``fast`` and ``explicit`` attention paths (see the module docstring):
    ``warmup`` untimed steps each, then ``steps`` timed forward + backward passes each, interleaved in chunks.

    ``shape`` overrides some of ``d_model``, ``n_heads``, ``seq_len``, ``batch``, ``n_layers``, ``vocab`` (tests use a
    tiny one). Returns ``{"tokens_per_s": {"fast": ..., "explicit": ...}, "speedup": ..., "max_abs_diff": {"loss":
    ..., "grad": ...}, "config": {...}, "machine": {...}}``.
    """
    steps = as_int(steps, "steps", low=1)
    warmup = as_int(warmup, "warmup", low=0)
    if shape is None:
        shape = {}
    if not isinstance(shape, Mapping):
        raise TypeError(f"shape must be a dict with keys among {SHAPE_KEYS}, got {type(shape).__name__}")
    unknown = sorted(set(shape) - set(SHAPE_KEYS))
    if unknown:
        raise ValueError(f"shape: unknown key(s) {unknown}; allowed are {SHAPE_KEYS}")
    c = {**CONFIG, **{k: as_int(v, f"shape[{k!r}]", low=1) for k, v in shape.items()}}
    threads_before = torch.get_num_threads()
    torch.set_num_threads(c["threads"])
    try:
        torch.manual_seed(c["seed"])
        cfg = TransformerConfig(
            vocab_size=c["vocab"],
            n_ctx=c["seq_len"],
            d_model=c["d_model"],
            n_layers=c["n_layers"],
            n_heads=c["n_heads"],
            d_mlp=4 * c["d_model"],
            attn_alpha=c["attn_alpha"],
            act="gelu",
        )
        models = {"fast": TinyTransformer(cfg)}
        models["explicit"] = copy.deepcopy(models["fast"])
        models["explicit"].cfg.fast_attention = False  # the copy's own config, shared by its blocks
        gen = torch.Generator().manual_seed(c["seed"])
        data = [
            torch.randint(0, c["vocab"], (c["batch"], c["seq_len"] + 1), generator=gen) for _ in range(c["n_batches"])
        ]

        # the two paths agree (float32 rounding) before anything is timed
        losses, grads = {}, {}
        for name, model in models.items():
            model.zero_grad(set_to_none=True)
            loss = _loss(model, data[0])
            loss.backward()
            losses[name] = float(loss.detach())
            grads[name] = [p.grad.clone() for p in model.parameters()]
        diff = {
            "loss": abs(losses["fast"] - losses["explicit"]),
            "grad": max(float((a - b).abs().max()) for a, b in zip(grads["fast"], grads["explicit"])),
        }

        done = dict.fromkeys(models, 0)
        seconds = dict.fromkeys(models, 0.0)

        def run(name: str, n: int) -> float:
            model = models[name]
            t0 = time.perf_counter()
            for _ in range(n):
                model.zero_grad(set_to_none=True)
                _loss(model, data[done[name] % len(data)]).backward()
                done[name] += 1
            return time.perf_counter() - t0

        for name in models:
            if warmup:
                run(name, warmup)
        order = list(models)
        remaining, rnd = steps, 0
        while remaining > 0:
            n = min(c["chunk"], remaining)
            for name in order[rnd % 2 :] + order[: rnd % 2]:  # alternate who goes first
                seconds[name] += run(name, n)
            remaining -= n
            rnd += 1
    finally:
        torch.set_num_threads(threads_before)
    tokens = steps * c["batch"] * c["seq_len"]
    tps = {name: tokens / seconds[name] for name in models}
    return {
        "tokens_per_s": tps,
        "speedup": tps["fast"] / tps["explicit"],
        "seconds": seconds,
        "max_abs_diff": diff,
        "config": {**c, "steps": steps, "warmup": warmup},
        "machine": machine_info(),
    }


if __name__ == "__main__":
    write_result(attention_speed(), "bench_attention.json")
