"""A real language model's residual activations: `iclr26.hf.residual_activations` against a plain forward pass.

    python -m tools.bench_lm        # -> prints the result and writes _build/bench_lm.json

:func:`lm_speed` loads SmolLM2-135M-Instruct (the dequantised Q4_1 build, from the float32 copy `make venv` wrote)
with `iclr26.hf.load_small_lm`, packs Python's own documentation (`iclr26.data.load_prose`) into 32 windows of 256
tokens (8,192 tokens) and reads the residual stream after block 15 of 30, float32, 2 CPU threads, in batches of 8
windows (2,048 tokens), three ways, interleaved batch by batch (who goes first alternates), so that drift in the
machine's load hits all three alike:

* ``residual``: `residual_activations(model, ids, 15)`: blocks 1-15 only, no KV cache, no LM head;
* ``plain``: `model(ids, output_hidden_states=True).hidden_states[15]`, as one would write it first: all 30 blocks and
  the 49,152-way logits;
* ``matmul``: the seven linear layers of one block (q, k, v, o, gate, up, down, with the model's own weights) on a
  random 2,048-token batch, three times: the float32 matmul rate on the model's own shapes, the ceiling for
  ``residual``.

FLOPs per token are those of the linear layers of the first 15 blocks, 2 × their weights, from the model's config
(0.106 GFLOP for SmolLM2-135M); attention scores and norms are not counted (at 256 tokens, attention adds about 8 %).
The plain pass does ``flop_ratio`` = 2.53 times that arithmetic (30 blocks and the 576 × 49,152 LM head), so at equal
efficiency it is 2.5 times slower; a larger speed-up means the plain pass runs less efficiently, not that ours beats
the matmul rate.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from iclr26.data import load_prose, pack_tokens
from iclr26.hf import load_small_lm, residual_activations
from iclr26.validate import as_int
from tools.common import machine_info, write_result

CONFIG = {
    "n_tokens": 8192,
    "window": 256,
    "batch": 8,
    "layer": 15,
    "matmul_repeats": 3,
    "threads": 2,
    "dtype": "float32",
    "text": "iclr26.data.load_prose()",
}


def block_flops_per_token(config) -> int:
    """2 × the weights of one block's linear layers (attention q, k, v, o; gated MLP): its matmul FLOPs per token."""
    d = config.hidden_size
    head = getattr(config, "head_dim", None) or d // config.num_attention_heads
    q = config.num_attention_heads * head
    kv = config.num_key_value_heads * head
    return 2 * (d * q + 2 * d * kv + q * d + 3 * d * config.intermediate_size)


def lm_speed(
    gguf_file: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    *,
    n_tokens: int = CONFIG["n_tokens"],
    window: int = CONFIG["window"],
    batch: int = CONFIG["batch"],
    layer: int = CONFIG["layer"],
) -> dict:
    """Tokens per second (and GFLOP/s) of ``residual`` and ``plain`` and the ``matmul`` rate, as the module docstring
    says. ``gguf_file``/``cache_dir`` go to `load_small_lm` (the tests use a tiny model). Returns ``{"tokens_per_s":
    {"residual", "plain"}, "speedup", "gflop_per_token", "gflops": {"residual", "matmul", "matmul_best"},
    "fraction_of_matmul", "flop_ratio", "max_abs_diff", "load_seconds", "model", "config", "machine"}``;
    ``fraction_of_matmul`` compares ``residual`` with the median of the interleaved matmul measurements."""
    n_tokens = as_int(n_tokens, "n_tokens", low=1)
    window = as_int(window, "window", low=1)
    batch = as_int(batch, "batch", low=1)
    layer = as_int(layer, "layer", low=1)
    if n_tokens % (window * batch):
        raise ValueError(f"n_tokens must be a multiple of window × batch = {window * batch}, got {n_tokens}")
    c = {**CONFIG, "n_tokens": n_tokens, "window": window, "batch": batch, "layer": layer}
    threads_before = torch.get_num_threads()
    torch.set_num_threads(c["threads"])
    try:
        t0 = time.perf_counter()
        model, tok = load_small_lm(gguf_file, cache_dir=cache_dir)
        load_seconds = time.perf_counter() - t0
        cfg = model.config
        if layer > cfg.num_hidden_layers:
            raise ValueError(f"layer must be at most {cfg.num_hidden_layers}, got {layer}")
        ids = pack_tokens(load_prose().values(), window, n_tokens // window, tokenizer=tok)
        batches = ids.split(batch)
        gflop_per_token = layer * block_flops_per_token(cfg) / 1e9
        linears = [m.weight for m in model.model.layers[0].modules() if isinstance(m, torch.nn.Linear)]
        x = torch.randn(batch * window, cfg.hidden_size, generator=torch.Generator().manual_seed(0))
        x_mlp = torch.randn(batch * window, cfg.intermediate_size, generator=torch.Generator().manual_seed(1))
        matmul_gflop = c["matmul_repeats"] * batch * window * block_flops_per_token(cfg) / 1e9

        def residual(b: torch.Tensor) -> torch.Tensor:
            return residual_activations(model, b, layer, batch_size=batch)

        def plain(b: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return model(b, output_hidden_states=True).hidden_states[layer]

        def matmul(_: torch.Tensor) -> None:
            with torch.no_grad():
                for _ in range(c["matmul_repeats"]):
                    for w in linears:
                        F.linear(x_mlp if w.shape[1] == cfg.intermediate_size else x, w)

        runs = {"residual": residual, "plain": plain, "matmul": matmul}
        max_abs_diff = float((residual(batches[0]) - plain(batches[0])).abs().max())  # also the warm-up
        matmul(batches[0])
        seconds = {name: [] for name in runs}
        for i, b in enumerate(batches):
            order = list(runs)[i % 3 :] + list(runs)[: i % 3]  # rotate who goes first
            for name in order:
                t = time.perf_counter()
                runs[name](b)
                seconds[name].append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(threads_before)
    tps = {name: n_tokens / sum(seconds[name]) for name in ("residual", "plain")}
    matmul_rates = sorted(matmul_gflop / s for s in seconds["matmul"])
    matmul_median = matmul_rates[len(matmul_rates) // 2]
    return {
        "tokens_per_s": tps,
        "speedup": tps["residual"] / tps["plain"],
        "gflop_per_token": gflop_per_token,
        "gflops": {
            "residual": tps["residual"] * gflop_per_token,
            "matmul": matmul_median,
            "matmul_best": matmul_rates[-1],
        },
        "fraction_of_matmul": tps["residual"] * gflop_per_token / matmul_median,
        # the plain pass's matmul FLOPs over ours: all blocks and the logits against `layer` blocks; the speed-up
        # that equal efficiency would give
        "flop_ratio": (cfg.num_hidden_layers * block_flops_per_token(cfg) + 2 * cfg.hidden_size * cfg.vocab_size)
        / (layer * block_flops_per_token(cfg)),
        "max_abs_diff": max_abs_diff,
        "load_seconds": load_seconds,
        "model": {
            "name": Path(cfg.name_or_path).name,
            "layers": cfg.num_hidden_layers,
            "d_model": cfg.hidden_size,
            "parameters": sum(p.numel() for p in model.parameters()),
        },
        "config": c,
        "machine": machine_info(),
    }


if __name__ == "__main__":
    write_result(lm_speed(), "bench_lm.json")
