"""Dictionary SAEs: :class:`ReLUSAE` (L1) and :class:`TopKSAE` (k-sparse, with the fast path of
:mod:`iclr26.sae.kernel`), with unit-norm or free decoder rows."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.sae._validation import _as_tensor
from iclr26.sae.kernel import _TopKSparseCode
from iclr26.validate import as_bool, as_float, as_int, one_of

__all__ = ["ReLUSAE", "TopKSAE"]


class _DictionarySAE(nn.Module):
    """Shared parts of :class:`ReLUSAE` and :class:`TopKSAE`: untied encoder, decoder with norm handling."""

    def __init__(self, d_in: int, width: int, decoder_norm: str = "unit") -> None:
        super().__init__()
        self.d_in = as_int(d_in, "d_in", low=1)
        self.width = as_int(width, "width", low=1)
        self.decoder_norm = one_of(decoder_norm, "decoder_norm", ("unit", "free"))
        w = torch.randn(self.width, self.d_in)
        w = w / w.norm(dim=1, keepdim=True)
        self.W_dec = nn.Parameter(w.clone())  # (width, d_in): one dictionary atom per row
        self.W_enc = nn.Parameter(w.T.clone())  # (d_in, width): initialised as the decoder's transpose
        self.b_enc = nn.Parameter(torch.zeros(self.width))
        self.b_dec = nn.Parameter(torch.zeros(self.d_in))

    @property
    def dictionary(self) -> torch.Tensor:
        """The decoder rows actually used in the forward pass, shape ``(width, d_in)``."""
        if self.decoder_norm == "unit":
            return self.W_dec / self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-8)
        return self.W_dec

    def _check_input(self, x: torch.Tensor) -> torch.Tensor:
        return _as_tensor(x, "x", last=self.d_in, finite=False, dtype=self.W_enc.dtype)

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check_input(x)
        return (x - self.b_dec) @ self.W_enc + self.b_enc

    def encode(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - overridden
        raise NotImplementedError

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        z = _as_tensor(z, "z", last=self.width, finite=False, dtype=self.W_dec.dtype)
        return z @ self.dictionary + self.b_dec

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(x_hat, z)`` for ``x`` of shape ``(..., d_in)``."""
        z = self.encode(x)
        return self.decode(z), z

    def penalty(self, z: torch.Tensor) -> torch.Tensor:
        return z.new_zeros(())

    def loss(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Mean over tokens of the squared error summed over features, plus the sparsity penalty."""
        x_hat, z = self(x)
        mse = (x - x_hat).pow(2).sum(-1).mean()
        return mse + self.penalty(z), {"mse": mse.detach(), "l0": (z > 0).float().sum(-1).mean().detach()}


class ReLUSAE(_DictionarySAE):
    """ReLU SAE with an L1 penalty: ``z = ReLU((x - b_dec) W_enc + b_enc)``,
    loss ``||x - x_hat||^2 + l1 * sum_i z_i ||d_i||``.

    With ``decoder_norm="unit"`` the row norms are 1 and the penalty is the plain L1 norm.
    """

    def __init__(self, d_in: int, width: int, l1: float = 1e-2, decoder_norm: str = "unit") -> None:
        super().__init__(d_in, width, decoder_norm)
        self.l1 = as_float(l1, "l1", low=0.0)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.pre_activations(x))

    def penalty(self, z: torch.Tensor) -> torch.Tensor:
        z = _as_tensor(z, "z", last=self.width, finite=False, dtype=self.W_dec.dtype)
        norms = self.dictionary.norm(dim=1)
        return self.l1 * (z * norms).sum(-1).mean()


class TopKSAE(_DictionarySAE):
    """TopK SAE: keep the ``k`` largest ReLU pre-activations of each token, zero the rest (no penalty).

    ``fast=True`` (the default) runs :meth:`forward` and :meth:`loss` through the k-sparse path
    (:class:`_TopKSparseCode`): the reconstruction is summed from the ``k`` selected dictionary rows of each token
    and the backward pass computes the encoder and decoder gradients from those ``k`` indices only, never forming
    the dense ``(tokens, width)`` code or its gradient. The math is the dense reference's (``fast=False``: ReLU,
    top-k, scatter, ``z @ D``) up to floating-point rounding; the decoder norm and ``b_dec`` are handled by the same
    code in both.
    """

    def __init__(self, d_in: int, width: int, k: int, decoder_norm: str = "unit", fast: bool = True) -> None:
        super().__init__(d_in, width, decoder_norm)
        self.k = as_int(k, "k", low=1)
        if self.k > self.width:
            raise ValueError(f"k must be <= width={self.width}, got {k}")
        fast = as_bool(fast, "fast")
        self.fast = fast

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return _topk_relu(self.pre_activations(x), self.k)

    def sparse_forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The k-sparse path: ``(x_hat, vals, idx)`` with ``vals``, ``idx`` of shape ``(..., k)`` (the ReLU'd top-k
        pre-activations and their latent indices, in no particular order) — ``z`` is ``vals`` scattered to ``idx``."""
        x = self._check_input(x)
        lead = x.shape[:-1]
        xc = (x - self.b_dec).reshape(-1, self.d_in)
        recon, vals, idx = _TopKSparseCode.apply(xc, self.W_enc, self.b_enc, self.dictionary, self.k)
        x_hat = (recon + self.b_dec).reshape(*lead, self.d_in)
        return x_hat, vals.reshape(*lead, self.k), idx.reshape(*lead, self.k)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(x_hat, z)`` for ``x`` of shape ``(..., d_in)`` (``z`` dense, ``(..., width)``, on both paths)."""
        if not self.fast:
            return super().forward(x)
        x_hat, vals, idx = self.sparse_forward(x)
        return x_hat, _dense_code(vals, idx, self.width)

    def loss(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Mean over tokens of the squared error summed over features (the fast path never forms the dense ``z``)."""
        if not self.fast:
            return super().loss(x)
        x_hat, vals, _ = self.sparse_forward(x)
        mse = (x - x_hat).pow(2).sum(-1).mean()
        return mse, {"mse": mse.detach(), "l0": (vals > 0).float().sum(-1).mean().detach()}


def _topk_relu(pre: torch.Tensor, k: int) -> torch.Tensor:
    vals, idx = F.relu(pre).topk(k, dim=-1)
    return _dense_code(vals, idx, pre.shape[-1])


def _dense_code(vals: torch.Tensor, idx: torch.Tensor, width: int) -> torch.Tensor:
    """The dense ``(..., width)`` code holding ``vals`` at the latent indices ``idx`` (both ``(..., k)``), else 0."""
    return vals.new_zeros(*vals.shape[:-1], width).scatter(-1, idx, vals)
