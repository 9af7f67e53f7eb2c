"""Models the chapters train from scratch, every one with named hook points (:mod:`iclr26.hooks`).

``TinyTransformer`` (with ``TransformerConfig``) is a small decoder or encoder transformer, ``MLP`` a plain MLP,
``TinyDiT`` a small diffusion transformer with per-head gates, ``TinyVLM`` image patches as a prefix before the words
of a ``TinyTransformer``. ``sample`` draws tokens with their log-probabilities from any causal LM;
``token_log_probs`` recomputes them with gradients. ``load_efficientnet_lite0`` and ``efficientnet_tokens`` read images
as 4×4 grids of 112-wide tokens with the pretrained EfficientNet-lite0 (weights converted once to safetensors).
"""

from iclr26.models.dit import DiTBlock, GatedAttention, TinyDiT, gate_grads, patchify, timestep_embedding, unpatchify
from iclr26.models.efficientnet import (
    TOKEN_WIDTH,
    convert_efficientnet_lite0,
    efficientnet_tokens,
    load_efficientnet_lite0,
)
from iclr26.models.ensemble import Ensemble
from iclr26.models.mlp import MLP
from iclr26.models.sampling import Samples, masked_log_softmax, sample, token_log_probs
from iclr26.models.transformer import ACTIVATIONS, TinyTransformer, TinyVLM, TransformerConfig, prefix_lm_mask

__all__ = [
    "ACTIVATIONS",
    "TOKEN_WIDTH",
    "convert_efficientnet_lite0",
    "efficientnet_tokens",
    "load_efficientnet_lite0",
    "DiTBlock",
    "Ensemble",
    "GatedAttention",
    "MLP",
    "Samples",
    "TinyDiT",
    "TinyTransformer",
    "TinyVLM",
    "TransformerConfig",
    "gate_grads",
    "masked_log_softmax",
    "patchify",
    "prefix_lm_mask",
    "sample",
    "timestep_embedding",
    "token_log_probs",
    "unpatchify",
]
