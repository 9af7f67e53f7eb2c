"""Real text, offline: the prose of CPython's own documentation (:func:`load_prose`, no install, on Colab too), a
corpus read from local files or from a hub dataset's files for the ``paper`` scale (offline first, see
:func:`iclr26.hf.dataset_files`), and token packing into fixed-length rows, with each token's document id where
chapters need document boundaries (:func:`pack_tokens`).

Reading needs nothing beyond the standard library, except ``.parquet`` files (``pyarrow``, imported when one is read).
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from iclr26.hf import dataset_files
from iclr26.validate import as_bool, as_int, one_of

__all__ = ["TEXT_SUFFIXES", "load_prose", "load_text_corpus", "pack_tokens"]

TEXT_SUFFIXES = (".txt", ".txt.gz", ".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet")
"""The file types :func:`load_text_corpus` reads."""


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for s in sorted(TEXT_SUFFIXES, key=len, reverse=True):
        if name.endswith(s):
            return s
    raise ValueError(f"cannot read {str(path)!r} as text: its name must end with one of {', '.join(TEXT_SUFFIXES)}")


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _split_stream(f: io.TextIOBase, separator: str, chunk: int = 1 << 20) -> Iterator[str]:
    buf = ""
    while block := f.read(chunk):
        buf += block
        *docs, buf = buf.split(separator)
        yield from docs
    yield buf


def _record_text(record: Any, text_field: str, path: Path) -> str | None:
    if isinstance(record, str):
        return record
    if isinstance(record, dict):
        if text_field not in record:
            raise ValueError(
                f"text_field {text_field!r} is not a field of the records in {str(path)!r}; "
                f"they have {', '.join(map(repr, record))}"
            )
        return record[text_field]
    raise ValueError(
        f"{str(path)!r} holds {type(record).__name__} records; want objects with a {text_field!r} field, or strings"
    )


def _read_file(path: Path, text_field: str, separator: str | None) -> Iterator[str | None]:
    kind = _suffix(path)
    if kind == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as e:
            raise ImportError(f"reading {str(path)!r} needs pyarrow: pip install pyarrow") from e
        pf = pq.ParquetFile(path)
        if text_field not in pf.schema_arrow.names:
            raise ValueError(
                f"text_field {text_field!r} is not a column of {str(path)!r}; it has "
                f"{', '.join(map(repr, pf.schema_arrow.names))}"
            )
        for batch in pf.iter_batches(columns=[text_field]):
            yield from batch.column(0).to_pylist()
        return
    with _open_text(path) as f:
        if kind in (".txt", ".txt.gz"):
            if separator is None:
                for line in f:
                    yield line.rstrip("\r\n")
            else:
                yield from _split_stream(f, separator)
            return
        first = f.read(1)
        while first and first.isspace():
            first = f.read(1)
        if first == "[":  # a JSON array of records
            for record in json.loads(first + f.read()):
                yield _record_text(record, text_field, path)
            return
        for i, line in enumerate(itertools.chain([first + f.readline()], f), start=1):  # JSON lines
            if line.strip():
                yield _record_text(_json_line(line, path, i), text_field, path)


def _json_line(line: str, path: Path, lineno: int) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{str(path)!r}, line {lineno}: not a JSON record ({e.msg})") from None


def load_text_corpus(
    source: str | os.PathLike,
    *,
    data_files: str | Iterable[str] | None = None,
    text_field: str = "text",
    separator: str | None = None,
    n_docs: int | None = None,
    allow_download: bool | None = None,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Iterator[str]:
    """The documents of a text corpus, read lazily, one string each (empty ones skipped), in file order.

    ``source``: a local file, a local directory, or a hub dataset id, found offline first by
    :func:`iclr26.hf.dataset_files` (``data_files``: glob patterns relative to it, required for a hub id;
    ``allow_download``, ``revision``, ``cache_dir`` as there). A missing hub dataset raises
    :class:`iclr26.hf.NotDownloadedError` with the command that fetches exactly ``data_files``, e.g.::

        load_text_corpus("allenai/c4", data_files="en/c4-train.0000[0-3]-of-01024.json.gz")
        # hf download allenai/c4 --repo-type dataset --include "en/c4-train.0000[0-3]-of-01024.json.gz"

    Files, by name: ``.jsonl`` / ``.json`` (JSON lines, or one JSON array; records are objects whose ``text_field``
    holds the text, or strings), ``.txt`` (one document per line, or per ``separator`` such as ``"\\n\\n"`` or
    ``"<|endoftext|>"``), each also gzipped (``.gz``), and ``.parquet`` (column ``text_field``; needs ``pyarrow``).
    ``n_docs``: stop after that many documents. Bad arguments, missing paths and unreadable file types fail at the
    call; a record without ``text_field`` fails when it is read.
    """
    if not isinstance(text_field, str) or not text_field:
        raise TypeError(f"text_field must be a non-empty str, got {text_field!r}")
    if separator is not None and (not isinstance(separator, str) or not separator):
        raise TypeError(f"separator must be None or a non-empty str, got {separator!r}")
    if n_docs is not None:
        n_docs = as_int(n_docs, "n_docs", low=1)
    files = dataset_files(
        source,
        data_files,
        suffixes=TEXT_SUFFIXES,
        allow_download=allow_download,
        revision=revision,
        cache_dir=cache_dir,
    )
    for path in files:
        _suffix(path)  # an unreadable file type fails now, not halfway through the corpus
    return _documents(files, text_field, separator, n_docs)


def _documents(files: list[Path], text_field: str, separator: str | None, n_docs: int | None) -> Iterator[str]:
    count = 0
    for path in files:
        for text in _read_file(path, text_field, separator):
            if text is None or (isinstance(text, str) and not text.strip()):
                continue
            if not isinstance(text, str):
                raise ValueError(f"{str(path)!r}: field {text_field!r} holds {type(text).__name__}, not text")
            yield text
            count += 1
            if n_docs is not None and count >= n_docs:
                return


def _token_ids(doc: Any, tokenizer: Callable[[str], Any] | None, index: int, limit: int | None = None) -> np.ndarray:
    if tokenizer is not None:
        if not isinstance(doc, str):
            raise TypeError(f"docs[{index}] must be a str when a tokenizer is given, got {type(doc).__name__}")
        ids = tokenizer(doc)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
    else:
        if isinstance(doc, str):
            raise TypeError(f"docs[{index}] is a str: pass tokenizer= to tokenise text, or give token ids")
        ids = doc
    if torch.is_tensor(ids):
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(
            f"docs[{index}] must give a 1-D sequence of integer token ids, got dtype {arr.dtype} and shape {arr.shape}"
        )
    if arr.size and arr.min() < 0:
        raise ValueError(f"docs[{index}] holds a negative token id ({arr.min()})")
    if limit is not None and arr.size and arr.max() > limit:
        raise ValueError(f"docs[{index}] holds token id {arr.max()}, more than dtype holds ({limit}): use torch.long")
    return arr.astype(np.int64, copy=False)


def pack_tokens(
    docs: Iterable[Any],
    seq_len: int,
    n_rows: int | None = None,
    *,
    tokenizer: Callable[[str], Any] | None = None,
    eos_id: int | None = None,
    dtype: torch.dtype = torch.long,
    return_doc_ids: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Concatenate documents, each followed by ``eos_id``, and cut the stream into rows of ``seq_len`` tokens.

    ``docs``: token-id sequences (lists, arrays, 1-D tensors), or strings when ``tokenizer`` is given: any callable
    ``tokenizer(text)`` returning ids or a dict with ``"input_ids"`` (a transformers tokenizer is one; its
    ``eos_token_id`` is the default ``eos_id``). ``eos_id=None`` and no tokenizer EOS: no separator.
    ``n_rows``: stop once that many rows are full (``docs`` may be an endless or lazy stream, e.g.
    :func:`load_text_corpus`); ``ValueError`` if the documents run out first. ``None``: every full row of the whole
    stream. The tokens after the last full row are dropped. ``dtype``: ``torch.long`` or ``torch.int32`` (half the
    memory for a corpus that stays on the CPU). Returns a ``(rows, seq_len)`` tensor; with ``return_doc_ids``, also
    a ``(rows, seq_len)`` int64 tensor holding the index in ``docs`` of each token's document (an EOS counts to the
    document it ends), so a row's document boundaries are where it changes.
    """
    if isinstance(docs, (str, bytes)) or not isinstance(docs, Iterable):
        raise TypeError(f"docs must be an iterable of documents, got {type(docs).__name__}")
    seq_len = as_int(seq_len, "seq_len", low=1)
    if n_rows is not None:
        n_rows = as_int(n_rows, "n_rows", low=1)
    if tokenizer is not None and not callable(tokenizer):
        raise TypeError(f"tokenizer must be callable as tokenizer(text), got {type(tokenizer).__name__}")
    if eos_id is None and tokenizer is not None:
        eos_id = getattr(tokenizer, "eos_token_id", None)
    if eos_id is not None:
        eos_id = as_int(eos_id, "eos_id", low=0)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be torch.long or torch.int32, got {dtype!r}")
    one_of(dtype, "dtype", (torch.long, torch.int32))
    return_doc_ids = as_bool(return_doc_ids, "return_doc_ids")
    np_dtype = np.int64 if dtype == torch.long else np.int32
    limit = int(np.iinfo(np_dtype).max)
    if eos_id is not None and eos_id > limit:
        raise ValueError(f"eos_id={eos_id} does not fit dtype {dtype}")
    eos = np.array([eos_id] if eos_id is not None else [], dtype=np.int64)

    def result(flat: np.ndarray, doc_of: np.ndarray, rows: int) -> Any:
        ids = torch.from_numpy(flat[: rows * seq_len].astype(np_dtype, copy=False).reshape(rows, seq_len))
        return (ids, torch.from_numpy(doc_of[: rows * seq_len].reshape(rows, seq_len))) if return_doc_ids else ids

    if n_rows is not None:
        flat = np.empty(n_rows * seq_len, dtype=np_dtype)
        doc_of = np.empty(n_rows * seq_len if return_doc_ids else 0, dtype=np.int64)
        filled = 0
        for i, doc in enumerate(docs):
            part = np.concatenate([_token_ids(doc, tokenizer, i, limit), eos])
            take = min(len(part), len(flat) - filled)
            flat[filled : filled + take] = part[:take]
            if return_doc_ids:
                doc_of[filled : filled + take] = i
            filled += take
            if filled == len(flat):
                return result(flat, doc_of, n_rows)
        raise ValueError(f"docs gave only {filled // seq_len} rows of {seq_len} tokens, n_rows={n_rows} wanted")
    parts, lengths = [], []
    for i, doc in enumerate(docs):
        parts += [_token_ids(doc, tokenizer, i, limit), eos]
        lengths.append(len(parts[-2]) + len(eos))
    stream = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    rows = len(stream) // seq_len
    if rows == 0:
        raise ValueError(f"docs hold {len(stream)} tokens (EOS included), fewer than one row of seq_len={seq_len}")
    doc_of = np.repeat(np.arange(len(lengths)), lengths) if return_doc_ids else stream
    return result(stream, doc_of, rows)


_UNDERLINE = re.compile(r"\s*([*=\-~^\"'`#+])\1{2,}\s*")


def _prose(text: str) -> str:
    """The prose paragraphs of a reStructuredText-like plain-text page, each on one line, blank-line separated:
    heading underlines dropped; code, grammar and doctest blocks (indented by an odd number of spaces, as literal
    blocks are under prose and list items, or starting with ``>>>``) and tables dropped; wrapped lines joined."""
    out = []
    for para in re.split(r"\n[ \t]*\n", text.strip("\n")):
        lines = [line for line in para.split("\n") if not _UNDERLINE.fullmatch(line)]
        if not lines:
            continue
        first = lines[0].lstrip(" ")
        if (len(lines[0]) - len(first)) % 2 or first.startswith((">>>", "+-", "|")):
            continue
        out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def load_prose(*, prose_only: bool = True) -> dict[str, str]:
    """Real English prose that every Python installation ships: the 79 topic pages of the Python language reference
    that ``help()`` shows (CPython's ``pydoc_data.topics``, 465k characters), as ``{topic: text}`` sorted by topic —
    one document each, so packed windows have real document boundaries.

    ``prose_only`` (default): keep the prose paragraphs, each on one line (the page's 70-column wrapping undone), and
    drop headings' underlines, code, grammar and doctest blocks and tables (Python 3.11: 272k characters remain,
    64k SmolLM2 tokens, 249 windows of 256).
    ``False``: the pages as they are. Technical English, not a general web corpus: say so where it matters.

    >>> ids, doc = pack_tokens(load_prose().values(), 256, tokenizer=tok, return_doc_ids=True)
    """
    from pydoc_data.topics import topics

    prose_only = as_bool(prose_only, "prose_only")
    return {name: _prose(topics[name]) if prose_only else topics[name] for name in sorted(topics)}
