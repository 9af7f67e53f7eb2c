"""Reading real models: :func:`residual_activations` (a causal LM's residual stream at any layers, running no block
above the deepest one) and :func:`image_features` (pooled features of a pretrained image backbone such as DINOv2)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr26.hf.loading import load_pretrained
from iclr26.hooks import _main_output, block_names
from iclr26.validate import (
    as_device,
    as_float,
    as_int,
    float_tensor,
    token_tensor,
)

__all__ = ["residual_activations", "image_features"]


class _Stop(Exception):
    """Raised by the hook after the deepest layer that was asked for: the rest of the forward pass never runs."""


def _layer_list(layer: Any, layers: Any, n_layers: int) -> tuple[list[int], bool]:
    """The requested layers (sorted, unique) and whether one int was asked for (then a tensor is returned)."""
    if (layer is None) == (layers is None):
        raise TypeError("residual_activations takes exactly one of layer (an int) and layers (a list of ints)")
    if layer is not None:
        wanted, single = [as_int(layer, "layer", low=0)], True
    else:
        if isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable):
            raise TypeError(f"layers must be a list of ints, got {type(layers).__name__}")
        wanted, single = [as_int(v, "layers[]", low=0) for v in layers], False
        if not wanted:
            raise ValueError("layers must hold at least one layer")
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"layers must not repeat a layer, got {wanted}")
    name = "layer" if single else "layers"
    if max(wanted) > n_layers:
        raise ValueError(
            f"{name} must be in [0, {n_layers}] (0: the embeddings, {n_layers}: the last block's "
            f"output after the final norm), got {layer if single else wanted}"
        )
    return wanted, single


def residual_activations(
    model: Any,
    input_ids: Any,
    layer: int | None = None,
    batch_size: int | None = None,
    *,
    layers: Iterable[int] | None = None,
) -> torch.Tensor | dict[int, torch.Tensor]:
    """The residual stream of a transformers causal LM at one layer or several, for ``input_ids`` of shape
    ``(n_seq, T)``, computing no more of the model than it needs.

    Layers count as ``output_hidden_states`` does: ``0`` is the embedding output (the first block's input), ``l`` the
    output of block ``l`` (``hidden_states[l]``), and ``num_hidden_layers`` the last block's output after the final
    norm (``last_hidden_state``). Hooks stop the forward pass right after the deepest layer asked for, so the blocks
    above it and the LM head (SmolLM2's 49k-way logits) never run; hooks already on the model (:func:`steer`) run
    first, so a steered block shows. No KV cache is built; the rows run ``batch_size`` at a time (default: about 2,048
    tokens a batch, where CPU matmuls reach their peak). ``layer=3`` returns a float32 CPU tensor ``(n_seq, T, d)``;
    ``layers=[3, 6]`` a dict ``{3: tensor, 6: tensor}``.
    """
    if not hasattr(model, "config") or not isinstance(model, nn.Module):
        raise TypeError(f"model must be a transformers model, got {type(model).__name__}")
    if isinstance(input_ids, np.ndarray):
        input_ids = torch.from_numpy(input_ids)
    if not torch.is_tensor(input_ids) or input_ids.dtype not in (torch.int64, torch.int32):
        kind = f"dtype {input_ids.dtype}" if torch.is_tensor(input_ids) else type(input_ids).__name__
        raise TypeError(f"input_ids must be an integer tensor of shape (n_seq, T), got {kind}")
    if input_ids.ndim != 2 or 0 in input_ids.shape:
        raise ValueError(f"input_ids must have shape (n_seq, T) with n_seq, T >= 1, got {tuple(input_ids.shape)}")
    vocab = getattr(model.config, "vocab_size", None)
    token_tensor(input_ids, "input_ids", vocab if isinstance(vocab, int) else None)
    blocks = block_names(model)
    n_layers = int(getattr(model.config, "num_hidden_layers", getattr(model.config, "n_layer", len(blocks))))
    wanted, single = _layer_list(layer, layers, n_layers)
    n_seq, T = input_ids.shape
    batch_size = max(1, 2048 // T) if batch_size is None else as_int(batch_size, "batch_size", low=1)
    base = getattr(model, "base_model", model)  # a transformers LM's body, without its head
    deepest = max(wanted)
    store: dict[int, torch.Tensor] = {}

    def recorder(at: int) -> Callable[..., None]:
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            store[at] = _main_output(output, blocks[at - 1] if at < n_layers else "the base model")
            if at == deepest:
                raise _Stop

        return hook

    def embeddings(module: nn.Module, args: tuple, kwargs: dict) -> None:  # block 0's input: hidden_states[0]
        store[0] = args[0] if args else kwargs["hidden_states"]
        if deepest == 0:
            raise _Stop

    handles = []
    out: dict[int, torch.Tensor] = {}
    device = next(model.parameters()).device
    try:
        for at in wanted:
            if at == 0:
                handles.append(model.get_submodule(blocks[0]).register_forward_pre_hook(embeddings, with_kwargs=True))
            else:
                target = base if at == n_layers else model.get_submodule(blocks[at - 1])
                handles.append(target.register_forward_hook(recorder(at)))
        with torch.inference_mode():
            for i in range(0, n_seq, batch_size):
                store.clear()
                try:
                    model(input_ids=input_ids[i : i + batch_size].long().to(device), use_cache=False)
                except _Stop:
                    pass
                for at in wanted:
                    if at not in store:
                        raise RuntimeError(
                            f"the forward pass of {type(model).__name__} never reached layer {at} "
                            f"(the blocks {blocks[0]!r}…{blocks[-1]!r} and the base model's output)"
                        )
                    if at not in out:
                        out[at] = torch.empty(n_seq, T, store[at].shape[-1], dtype=torch.float32)
                    out[at][i : i + batch_size] = store[at]
    finally:
        for handle in handles:
            handle.remove()
    return out[wanted[0]] if single else {at: out[at] for at in wanted}


_IMAGENET_MEAN, _IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def image_features(
    images: torch.Tensor,
    model_name_or_path: str | os.PathLike,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    value_range: tuple[float, float] = (-1.0, 1.0),
    image_size: int | None = None,
    allow_download: bool | None = None,
) -> torch.Tensor:
    """Pooled features of a pretrained image backbone loaded with ``transformers.AutoModel`` (e.g. DINOv2).

    ``images``: ``(N, C, H, W)`` with C = 1 (repeated to RGB) or 3, values in ``value_range`` (``(-1, 1)`` as the
    diffusion models produce, or ``(0, 1)``); clamped to that range, mapped to [0, 1], resized (bicubic, antialiased)
    to ``image_size`` — by default the checkpoint's image processor crop size if it ships one, else
    ``config.image_size`` — and normalised with the processor's mean/std (ImageNet's if there is no processor).
    ``model_name_or_path``: a hub id (e.g. ``"facebook/dinov2-base"``, needs the hub or its cache) or a local
    directory written by ``save_pretrained``, loaded with :func:`load_pretrained` (offline first; ``allow_download``
    as there). Returns a float32 CPU tensor ``(N, hidden)``: the model's
    ``pooler_output`` (DINOv2: the layer-normed CLS token, the FD_DINOv2 feature of Stein et al. 2023), or the mean
    of ``last_hidden_state`` over tokens when the model has no pooler.
    """
    images = float_tensor(images, "images", ndim=4)
    if images.shape[1] not in (1, 3):
        raise ValueError(f"images must have 1 or 3 channels (N, C, H, W), got shape {tuple(images.shape)}")
    if images.shape[0] == 0:
        raise ValueError("images must hold at least one image")
    if not isinstance(model_name_or_path, (str, os.PathLike)) or not str(model_name_or_path):
        raise TypeError(f"model_name_or_path must be a non-empty str or path, got {model_name_or_path!r}")
    batch_size = as_int(batch_size, "batch_size", low=1)
    device = as_device(device)
    if not isinstance(value_range, (tuple, list)) or len(value_range) != 2:
        raise TypeError(f"value_range must be a pair (low, high) with low < high, got {value_range!r}")
    if not as_float(value_range[0], "value_range[0]") < as_float(value_range[1], "value_range[1]"):
        raise ValueError(f"value_range must be a pair (low, high) with low < high, got {value_range!r}")
    if image_size is not None:
        image_size = as_int(image_size, "image_size", low=1)

    model = load_pretrained(model_name_or_path, "model", allow_download=allow_download, device=device).eval()
    mean, std, crop = _IMAGENET_MEAN, _IMAGENET_STD, None
    try:
        proc = load_pretrained(model_name_or_path, "image_processor", allow_download=allow_download)
        mean, std = tuple(proc.image_mean), tuple(proc.image_std)
        crop = getattr(proc, "crop_size", None)
        # a dict in older transformers, a SizeDict (attributes, no .get) in newer ones, as a real DINOv2 ships it
        crop = crop.get("height") if isinstance(crop, Mapping) else getattr(crop, "height", crop)
    except (OSError, ValueError, AttributeError, TypeError):  # no preprocessor config saved with the model
        pass
    if image_size is None:
        image_size = int(crop or getattr(model.config, "image_size", 224))
    mean_t = torch.tensor(mean, device=device).view(1, 3, 1, 1)
    std_t = torch.tensor(std, device=device).view(1, 3, 1, 1)
    lo, hi = float(value_range[0]), float(value_range[1])
    feats = []
    with torch.no_grad():
        for batch in images.split(batch_size):
            x = (batch.to(device=device, dtype=torch.float32).clamp(lo, hi) - lo) / (hi - lo)
            if x.shape[1] == 1:
                x = x.expand(-1, 3, -1, -1)
            if x.shape[-2:] != (image_size, image_size):
                x = torch.nn.functional.interpolate(
                    x, size=(image_size, image_size), mode="bicubic", align_corners=False, antialias=True
                ).clamp(0, 1)
            out = model(pixel_values=(x - mean_t) / std_t)
            pooled = getattr(out, "pooler_output", None)
            if pooled is None:
                pooled = out.last_hidden_state.mean(dim=1)
            feats.append(pooled.flatten(1).float().cpu())
    return torch.cat(feats)
