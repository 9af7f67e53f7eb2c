"""Offline-first loading of hub models and datasets: :func:`load_pretrained` and :func:`dataset_files` read a local
folder or the Hugging Face cache and raise :class:`NotDownloadedError` (with the command to run once, with network)
when something is missing; downloads only where allowed (:func:`download_allowed`)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr26.validate import (
    as_bool,
    as_device,
    one_of,
)

__all__ = ["ALLOW_DOWNLOAD_ENV", "KINDS", "NotDownloadedError", "download_allowed", "load_pretrained", "dataset_files"]


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
