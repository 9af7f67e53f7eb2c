"""Real models through transformers, for the ``paper`` scale: activations, image features, hooks on named submodules.

Everything here loads lazily (``transformers`` is imported inside the functions) and offline first.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from iclr26.checks import check_int, float_tensor

__all__ = ["residual_activations", "image_features"]


def residual_activations(model: Any, input_ids: Any, layer: int, batch_size: int = 8) -> torch.Tensor:
    """Residual-stream activations of a transformers causal LM after block ``layer`` (``hidden_states[layer]``,
    where 0 is the embedding output) for ``input_ids`` of shape ``(n_seq, T)``; returns float32 on the CPU."""
    if not hasattr(model, "config") or not callable(model):
        raise TypeError(f"model must be a transformers model, got {type(model).__name__}")
    if isinstance(input_ids, np.ndarray):
        input_ids = torch.from_numpy(input_ids)
    if not torch.is_tensor(input_ids) or input_ids.dtype not in (torch.int64, torch.int32) or input_ids.ndim != 2:
        raise ValueError("input_ids must be an integer tensor of shape (n_seq, T)")
    n_layers = int(getattr(model.config, "num_hidden_layers", getattr(model.config, "n_layer", -1)))
    layer = check_int(layer, "layer", low=0)
    if n_layers >= 0 and layer > n_layers:
        raise ValueError(f"layer must be in [0, {n_layers}], got {layer}")
    batch_size = check_int(batch_size, "batch_size", low=1)
    device = next(model.parameters()).device
    outs = []
    with torch.no_grad():
        for i in range(0, input_ids.shape[0], batch_size):
            ids = input_ids[i : i + batch_size].long().to(device)
            hs = model(input_ids=ids, output_hidden_states=True).hidden_states
            outs.append(hs[layer].float().cpu())
    return torch.cat(outs)


_IMAGENET_MEAN, _IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def image_features(
    images: torch.Tensor,
    model_name_or_path: str | os.PathLike,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    value_range: tuple[float, float] = (-1.0, 1.0),
    image_size: int | None = None,
) -> torch.Tensor:
    """Pooled features of a pretrained image backbone loaded with ``transformers.AutoModel`` (e.g. DINOv2).

    ``images``: ``(N, C, H, W)`` with C = 1 (repeated to RGB) or 3, values in ``value_range`` (``(-1, 1)`` as the
    diffusion models produce, or ``(0, 1)``); clamped to that range, mapped to [0, 1], resized (bicubic, antialiased)
    to ``image_size`` — by default the checkpoint's image processor crop size if it ships one, else
    ``config.image_size`` — and normalised with the processor's mean/std (ImageNet's if there is no processor).
    ``model_name_or_path``: a hub id (e.g. ``"facebook/dinov2-base"``, needs the hub or its cache) or a local
    directory written by ``save_pretrained``. Returns a float32 CPU tensor ``(N, hidden)``: the model's
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
    batch_size = check_int(batch_size, "batch_size", low=1)
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a str or torch.device, got {type(device).__name__}")
    if (not isinstance(value_range, (tuple, list)) or len(value_range) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value_range)
            or not value_range[0] < value_range[1]):
        raise ValueError(f"value_range must be a pair (low, high) with low < high, got {value_range!r}")
    if image_size is not None:
        image_size = check_int(image_size, "image_size", low=1)

    from transformers import AutoImageProcessor, AutoModel  # lazy: only the paper scale needs it

    model = AutoModel.from_pretrained(str(model_name_or_path)).to(device).eval()
    mean, std, crop = _IMAGENET_MEAN, _IMAGENET_STD, None
    try:
        proc = AutoImageProcessor.from_pretrained(str(model_name_or_path))
        mean, std = tuple(proc.image_mean), tuple(proc.image_std)
        crop = getattr(proc, "crop_size", None)
        crop = crop.get("height") if isinstance(crop, dict) else crop
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
                x = torch.nn.functional.interpolate(x, size=(image_size, image_size), mode="bicubic",
                                                    align_corners=False, antialias=True).clamp(0, 1)
            out = model(pixel_values=(x - mean_t) / std_t)
            pooled = getattr(out, "pooler_output", None)
            if pooled is None:
                pooled = out.last_hidden_state.mean(dim=1)
            feats.append(pooled.flatten(1).float().cpu())
    return torch.cat(feats)
