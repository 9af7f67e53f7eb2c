"""Models the chapters train from scratch, every one with named hook points (:mod:`iclr26.hooks`).

``TinyTransformer`` (with ``TransformerConfig``) is a small decoder or encoder transformer, ``MLP`` a plain MLP,
``TinyDiT`` a small diffusion transformer with per-head gates.
"""

from iclr26.models.dit import DiTBlock, GatedAttention, TinyDiT, gate_grads, patchify, timestep_embedding, unpatchify
from iclr26.models.ensemble import Ensemble
from iclr26.models.mlp import MLP
from iclr26.models.transformer import ACTIVATIONS, TinyTransformer, TransformerConfig

__all__ = [
    "ACTIVATIONS",
    "DiTBlock",
    "Ensemble",
    "GatedAttention",
    "MLP",
    "TinyDiT",
    "TinyTransformer",
    "TransformerConfig",
    "gate_grads",
    "patchify",
    "timestep_embedding",
    "unpatchify",
]
