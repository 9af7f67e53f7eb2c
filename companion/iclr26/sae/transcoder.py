"""Transcoders: a sparse dictionary that reads an MLP's input and writes its output.

    tc = Transcoder(d_in=64, width=256, l1=3e-3)          # ReLU + L1 (the GPT-2 and Llama-3.2-1B transcoders' kind)
    tc = Transcoder(d_in=64, width=256, k=8)              # TopK
    y_hat, z = tc(x)                                      # x: MLP input (..., d_in) -> MLP output (..., d_out), codes
    fit_transcoder(tc, x, y, steps=600)                   # paired data, AdamW + warmup-cosine via iclr26.train.fit
    with splice(model, {0: tc}):                          # blocks.0.mlp_out := tc(blocks.0.resid_mid)
        logits = model(tokens)
    with splice(model, {0: tc}, error=True):              # ... + the error term: the model's own logits again
        logits = model(tokens)

Encoder ``z = ReLU(x W_enc + b_enc)`` (TopK: keep the ``k`` largest), decoder ``y_hat = z W_dec + b_dec``, as the
official transcoders (``circuit-tracer``'s ``SingleLayerTranscoder``) compute them: the input is not centred by
``b_dec``. The L1 penalty is weighted by the decoder row norms, so rescaling a feature cannot dodge it.

    tc = load_official_transcoder("final_sparse_autoencoder_gpt2-small_blocks.0.ln2.hook_normalized_24576.pt")

reads one of the official GPT-2 transcoders (``pchlenski/gpt2-transcoders``) with ``torch.load(weights_only=True)``
into a :class:`Transcoder`, with the keys the official WeightLens loader keeps.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr26.sae._validation import _as_tensor
from iclr26.validate import as_bool, as_float, as_int

__all__ = ["Transcoder", "fit_transcoder", "splice", "load_official_transcoder"]


class Transcoder(nn.Module):
    """A transcoder from ``d_in`` to ``d_out`` (default ``d_in``) with ``width`` features: ReLU + L1 (``k=None``)
    or TopK (``k`` features per token, no penalty). ``W_enc`` is ``(d_in, width)`` (feature ``i`` reads
    ``W_enc[:, i]``), ``W_dec`` is ``(width, d_out)`` (feature ``i`` writes ``W_dec[i]``)."""

    def __init__(self, d_in: int, width: int, d_out: int | None = None, l1: float = 1e-2, k: int | None = None) -> None:
        super().__init__()
        self.d_in = as_int(d_in, "d_in", low=1)
        self.width = as_int(width, "width", low=1)
        self.d_out = self.d_in if d_out is None else as_int(d_out, "d_out", low=1)
        self.l1 = as_float(l1, "l1", low=0.0)
        self.k = None if k is None else as_int(k, "k", low=1, high=self.width)
        w = torch.randn(self.width, self.d_in)
        w = w / w.norm(dim=1, keepdim=True)
        self.W_enc = nn.Parameter(w.T.clone())
        dec = torch.randn(self.width, self.d_out)
        self.W_dec = nn.Parameter(0.1 * dec / dec.norm(dim=1, keepdim=True))
        self.b_enc = nn.Parameter(torch.zeros(self.width))
        self.b_dec = nn.Parameter(torch.zeros(self.d_out))

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """``x W_enc + b_enc``, shape ``(..., width)``."""
        x = _as_tensor(x, "x", last=self.d_in, finite=False, dtype=self.W_enc.dtype)
        return x @ self.W_enc + self.b_enc

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The feature activations ``(..., width)``."""
        z = F.relu(self.pre_activations(x))
        if self.k is None:
            return z
        vals, idx = z.topk(self.k, dim=-1)
        return torch.zeros_like(z).scatter(-1, idx, vals)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        z = _as_tensor(z, "z", last=self.width, finite=False, dtype=self.W_dec.dtype)
        return z @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(y_hat, z)`` for the MLP input ``x`` (TopK: decoded from the ``k`` selected rows only)."""
        if self.k is None:
            z = self.encode(x)
            return self.decode(z), z
        vals, idx = F.relu(self.pre_activations(x)).topk(self.k, dim=-1)
        y_hat = torch.einsum("...k,...kd->...d", vals, self.W_dec[idx]) + self.b_dec
        return y_hat, torch.zeros(*vals.shape[:-1], self.width, dtype=vals.dtype, device=vals.device).scatter(
            -1, idx, vals
        )

    def loss(self, xy: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``xy`` holds the input and the target side by side, ``(n, d_in + d_out)``: the squared error summed over
        features, averaged over tokens, plus ``l1 * sum_i z_i ||W_dec[i]||`` (ReLU only)."""
        xy = _as_tensor(xy, "xy", last=self.d_in + self.d_out, dtype=self.W_enc.dtype)
        x, y = xy[..., : self.d_in], xy[..., self.d_in :]
        y_hat, z = self(x)
        mse = (y - y_hat).pow(2).sum(-1).mean()
        loss = mse
        if self.k is None and self.l1 > 0:
            loss = loss + self.l1 * (z * self.W_dec.norm(dim=1)).sum(-1).mean()
        return loss, {"mse": mse.detach(), "l0": (z > 0).float().sum(-1).mean().detach()}


def fit_transcoder(
    tc: Transcoder,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 512,
    lr: float = 1e-3,
    warmup: int | None = None,
    clip: float = 1.0,
    seed: int | np.random.Generator = 0,
    progress: bool = True,
    desc: str = "transcoder",
):
    """Train ``tc`` to map the MLP inputs ``x`` ``(..., d_in)`` to the MLP outputs ``y`` ``(..., d_out)`` (the same
    leading shape) with :func:`iclr26.sae.fit_sae`'s recipe (AdamW, betas 0.9/0.95, warmup-cosine, clipping);
    returns the history."""
    from iclr26.sae.training import _train_on_samples

    if not isinstance(tc, Transcoder):
        raise TypeError(f"tc must be a Transcoder, got {type(tc).__name__}")
    dtype = tc.W_enc.dtype
    x = _as_tensor(x, "x", last=tc.d_in, dtype=dtype).reshape(-1, tc.d_in)
    y = _as_tensor(y, "y", last=tc.d_out, dtype=dtype).reshape(-1, tc.d_out)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"y must pair with x: {x.shape[0]} inputs, {y.shape[0]} outputs")
    return _train_on_samples(
        tc,
        torch.cat([x, y], dim=-1),
        lambda m, b: m.loss(b),
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        weight_decay=0.0,
        warmup=warmup,
        clip=clip,
        seed=seed,
        progress=progress,
        desc=desc,
    )


@contextmanager
def splice(model: Any, transcoders: Mapping[int, Transcoder], error: bool = False) -> Iterator[Any]:
    """Within the block, each layer ``l`` of ``transcoders`` writes ``tc(blocks.l.resid_mid)`` instead of its MLP
    (hook ``blocks.l.mlp_out`` of a :class:`~iclr26.models.TinyTransformer` without LayerNorm, whose MLP reads
    ``resid_mid``). ``error=True`` adds the error term ``mlp_out - tc(resid_mid)`` of the same pass, so the model's
    own outputs come back (a check of the splice). Yields ``model``."""
    from iclr26.hooks import HookedModule

    if not isinstance(model, HookedModule):
        raise TypeError(f"model must be a HookedModule (e.g. TinyTransformer), got {type(model).__name__}")
    if not isinstance(transcoders, Mapping) or not transcoders:
        raise TypeError(f"transcoders must be a non-empty dict layer -> Transcoder, got {transcoders!r:.60}")
    error = as_bool(error, "error")
    fns = {}
    for layer, tc in transcoders.items():
        layer = as_int(layer, "transcoders key", low=0)
        if not isinstance(tc, Transcoder):
            raise TypeError(f"transcoders[{layer}] must be a Transcoder, got {type(tc).__name__}")
        store: dict[str, torch.Tensor] = {}

        def keep(t: torch.Tensor, name: str, store: dict = store) -> None:
            store["x"] = t

        def write(t: torch.Tensor, name: str, store: dict = store, tc: Transcoder = tc) -> torch.Tensor:
            y_hat = tc(store["x"])[0]
            return y_hat + (t - y_hat).detach() if error else y_hat

        fns[f"blocks.{layer}.resid_mid"] = keep
        fns[f"blocks.{layer}.mlp_out"] = write
    model._check_names(list(fns), "transcoders")
    with model.hooks(fns):
        yield model


class _Record:
    """A stand-in for a class named in a checkpoint's pickle (the training config stored beside the weights): it
    keeps the arguments and state it is given and runs no code from the checkpoint."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state


def load_official_transcoder(path: Any, *, map_location: str = "cpu") -> Transcoder:
    """One official GPT-2 transcoder (``pchlenski/gpt2-transcoders``, a ``.pt`` file per layer) as a
    :class:`Transcoder`, read with ``torch.load(weights_only=True)`` only.

    The file holds ``{"cfg": <training config>, "state_dict": {...}}`` (or the state dict alone). As the official
    WeightLens loader (``model_utils.load_replacement_model_from_yaml``) fills circuit-tracer's
    ``SingleLayerTranscoder``: ``W_enc`` ``(d_model, width)``, ``W_dec`` ``(width, d_model)``, ``b_enc`` ``(width,)``
    and ``b_dec`` ``(d_model,)`` are kept, ``b_dec_out`` is dropped, and the features are
    ``ReLU(x W_enc + b_enc)`` of the input ``x`` without centring, decoded as ``z W_dec + b_dec``. Its config
    (``feature_input_hook: hook_resid_mid``, ``feature_output_hook: mlp.hook_out``) reads the residual stream before
    ``ln_2`` and writes the MLP's output: in ``transformers`` the input of ``transformer.h.{l}.ln_2`` and the output
    of ``transformer.h.{l}.mlp`` (see :func:`iclr26.sae.mlp_io` with ``read_input=True``). Classes named in the
    pickle beside the tensors (the training config) are read into inert stand-ins; nothing in the file is run.
    """
    import os

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if not os.path.isfile(path):
        raise ValueError(f"path must be an existing file, got {str(path)!r}")
    from torch import serialization

    names = serialization.get_unsafe_globals_in_checkpoint(path)
    with serialization.safe_globals([(_Record, name) for name in names]):
        obj = torch.load(path, map_location=map_location, weights_only=True)
    sd = obj.get("state_dict", obj) if isinstance(obj, Mapping) else None
    if not isinstance(sd, Mapping):
        raise ValueError(f"path: expected a state dict (or {{'state_dict': ...}}), got {type(obj).__name__}")
    missing = [k for k in ("W_enc", "W_dec", "b_enc", "b_dec") if k not in sd]
    if missing:
        raise ValueError(f"path: the state dict lacks {missing} (keys: {sorted(sd)[:8]})")
    W_enc, W_dec, b_enc, b_dec = (sd[k] for k in ("W_enc", "W_dec", "b_enc", "b_dec"))
    if not all(torch.is_tensor(t) for t in (W_enc, W_dec, b_enc, b_dec)) or W_enc.ndim != 2:
        raise ValueError("path: W_enc, W_dec, b_enc and b_dec must be tensors, W_enc of shape (d_model, width)")
    d, width = W_enc.shape
    if W_dec.shape != (width, d) or b_enc.shape != (width,) or b_dec.shape != (d,):
        raise ValueError(
            f"path: shapes do not match the official layout: W_enc {tuple(W_enc.shape)}, W_dec {tuple(W_dec.shape)}, "
            f"b_enc {tuple(b_enc.shape)}, b_dec {tuple(b_dec.shape)}"
        )
    tc = Transcoder(d, width, l1=0.0)
    with torch.no_grad():
        for name, t in (("W_enc", W_enc), ("W_dec", W_dec), ("b_enc", b_enc), ("b_dec", b_dec)):
            getattr(tc, name).copy_(t.float())
    return tc.eval()
