"""The BatchTopK SAE (Bussmann et al. 2024, as the ``overcomplete`` library's ``BatchTopKSAE``), with a free
unit-norm dictionary or a :class:`~iclr26.sae.archetypal.RelaxedArchetypalDictionary` (RA-SAE).

    sae = BatchTopKSAE(d_in=32, width=64, k=4)                                  # free dictionary, unit-norm rows
    sae = BatchTopKSAE(d_in=32, width=64, k=4, dictionary=RelaxedArchetypalDictionary(centroids, 64))  # RA-SAE
    fit_sae(sae, x, steps=1000)                                                 # the same training loop as TopKSAE
    sae.eval(); z = sae.encode(x)                                               # inference: the running threshold

Codes are ``relu(x W_enc + b_enc)``. In training mode a batch of ``n`` tokens keeps its ``k * n`` largest codes: the
threshold is the ``(k n)``-th largest code of the batch (``k`` is the *average* number per token, as the official
``top_k`` counts the whole batch), and an exponential moving average of it (momentum 0.9) is kept. In eval mode that
running threshold replaces the batch's. The decoder has no bias (``b_dec`` is a zero buffer), as in ``overcomplete``.
"""

from __future__ import annotations

import torch

from iclr26.sae._validation import _as_tensor
from iclr26.sae.archetypal import RelaxedArchetypalDictionary
from iclr26.sae.dictionary import _DictionarySAE
from iclr26.validate import as_float, as_int

__all__ = ["BatchTopKSAE"]


class BatchTopKSAE(_DictionarySAE):
    """BatchTopK SAE: the ``k * n_tokens`` largest ReLU codes of each training batch, a running threshold (EMA with
    ``momentum``) at inference. ``dictionary``: ``None`` for a free dictionary with unit-norm rows, or a
    :class:`RelaxedArchetypalDictionary` of ``width`` atoms in ``d_in`` dimensions (its ``W`` starts at the identity,
    so the encoder starts as the transpose of the initial atoms, normalised)."""

    def __init__(
        self,
        d_in: int,
        width: int,
        k: int,
        dictionary: RelaxedArchetypalDictionary | None = None,
        momentum: float = 0.9,
    ) -> None:
        super().__init__(d_in, width, "unit")
        self.k = as_int(k, "k", low=1)
        if self.k > self.width:
            raise ValueError(f"k must be <= width={self.width}, got {k}")
        self.momentum = as_float(momentum, "momentum", 0.0, 1.0)
        del self.b_dec
        self.register_buffer("b_dec", torch.zeros(self.d_in))
        self.register_buffer("running_threshold", torch.full((), float("nan")))
        if dictionary is not None:
            if not isinstance(dictionary, RelaxedArchetypalDictionary):
                raise TypeError(
                    f"dictionary must be None or a RelaxedArchetypalDictionary, got {type(dictionary).__name__}"
                )
            if (dictionary.n_atoms, dictionary.d) != (self.width, self.d_in):
                raise ValueError(
                    f"dictionary must have width={self.width} atoms in d_in={self.d_in} dimensions, "
                    f"got {dictionary.n_atoms} in {dictionary.d}"
                )
            del self.W_dec
            self.archetypal = dictionary
            with torch.no_grad():
                d0 = dictionary.W.detach() @ dictionary.C
                self.W_enc.copy_((d0 / d0.norm(dim=1, keepdim=True).clamp_min(1e-8)).T)
        else:
            self.archetypal = None

    @property
    def dictionary(self) -> torch.Tensor:
        """The atoms used in the forward pass, ``(width, d_in)``: the archetypal dictionary's (projected in training
        mode, fused in eval mode) or the free rows normalised to unit norm."""
        if self.archetypal is not None:
            return self.archetypal.get_dictionary()
        return super().dictionary

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Codes ``(..., width)``; in training mode this also updates the running threshold."""
        codes = torch.relu(self.pre_activations(x))
        if self.training:
            flat = codes.reshape(-1)
            n_tokens = flat.numel() // self.width
            keep = min(self.k * max(n_tokens, 1), flat.numel())
            threshold = flat.topk(keep).values[-1]
            t = threshold.detach()
            if torch.isnan(self.running_threshold):
                self.running_threshold.copy_(t)
            else:
                self.running_threshold.mul_(self.momentum).add_((1 - self.momentum) * t)
        else:
            if torch.isnan(self.running_threshold):
                raise RuntimeError("BatchTopKSAE has no running threshold yet: train it (or set running_threshold)")
            threshold = self.running_threshold
        return codes * (codes >= threshold).to(codes.dtype).detach()

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``z @ D`` (no decoder bias) for codes ``z`` of shape ``(..., width)``."""
        z = _as_tensor(z, "z", last=self.width, finite=False, dtype=self.W_enc.dtype)
        return z @ self.dictionary + self.b_dec

    def loss(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Mean over tokens of the squared error summed over features (no penalty)."""
        return super().loss(x)

    def extra_repr(self) -> str:
        kind = "archetypal" if self.archetypal is not None else "free"
        return f"d_in={self.d_in}, width={self.width}, k={self.k}, dictionary={kind}, momentum={self.momentum}"
