"""The relaxed archetypal dictionary of RA-SAE (Fel et al., the ``overcomplete`` library's
``RelaxedArchetypalDictionary``): each atom is a convex combination of fixed candidate points plus a small relaxation.

    dico = RelaxedArchetypalDictionary(points, n_atoms=64, delta=1.0)  # points (n_candidates, d): k-means centroids
    D = dico.get_dictionary()                                           # (n_atoms, d) = (W C + Lambda) * exp(s)
    x_hat = dico(z)                                                     # z @ D

In training mode every dictionary computation first *projects* the parameters, as the official code does: ``W`` to
row-stochastic (ReLU, then each row divided by its sum) and each row of ``Lambda`` to norm at most ``delta``; so an
ordinary optimiser loop needs no hook. ``W`` starts at the identity (atom ``i`` = candidate ``i``), ``Lambda`` at zero
and the log-scale ``s`` at 0. Switching to eval mode (``.eval()``) fuses the pieces into one fixed matrix,
:attr:`fused`, which eval-mode calls return.
"""

from __future__ import annotations

import torch
from torch import nn

from iclr26.sae._validation import _as_tensor
from iclr26.validate import as_bool, as_float, as_int

__all__ = ["RelaxedArchetypalDictionary"]


class RelaxedArchetypalDictionary(nn.Module):
    """``D = (W C + Lambda) * exp(s)`` with ``C`` fixed candidate points ``(n_candidates, d)``, ``W`` row-stochastic
    ``(n_atoms, n_candidates)``, ``||Lambda_i|| <= delta`` and one learned scalar ``s`` (``use_multiplier=False``
    keeps ``s = 0``). ``n_atoms`` may exceed ``n_candidates`` (the extra rows of the identity start at zero)."""

    def __init__(self, points: torch.Tensor, n_atoms: int, delta: float = 1.0, use_multiplier: bool = True) -> None:
        super().__init__()
        points = _as_tensor(points, "points", ndim=2).detach().float().clone()
        self.n_atoms = as_int(n_atoms, "n_atoms", low=1)
        self.delta = as_float(delta, "delta", low=0.0)
        self.use_multiplier = as_bool(use_multiplier, "use_multiplier")
        self.d = points.shape[1]
        self.register_buffer("C", points)
        self.W = nn.Parameter(torch.eye(self.n_atoms, points.shape[0]))
        self.Relax = nn.Parameter(torch.zeros(self.n_atoms, self.d))
        if self.use_multiplier:
            self.multiplier = nn.Parameter(torch.zeros(()))
        else:
            self.register_buffer("multiplier", torch.zeros(()))
        self.fused: torch.Tensor | None = None

    @torch.no_grad()
    def project_(self) -> None:
        """Project in place: ``W`` row-stochastic (ReLU, unit row sums), each ``Lambda`` row clipped to norm
        ``delta``."""
        w = torch.relu(self.W)
        self.W.copy_(w / (w.sum(dim=-1, keepdim=True) + 1e-8))
        norms = self.Relax.norm(dim=-1, keepdim=True)
        self.Relax.mul_(torch.clamp(self.delta / norms.clamp_min(1e-12), max=1.0))

    def get_dictionary(self) -> torch.Tensor:
        """The ``(n_atoms, d)`` dictionary: in training mode projected then computed (differentiable in ``W``,
        ``Lambda`` and ``s``); in eval mode the fused matrix."""
        if self.training:
            self.project_()
            return (self.W @ self.C + self.Relax) * torch.exp(self.multiplier)
        if self.fused is None:  # pragma: no cover - train(False) always fuses
            raise RuntimeError("the dictionary was not fused; call .eval()")
        return self.fused

    def train(self, mode: bool = True) -> RelaxedArchetypalDictionary:
        """Leaving training mode fuses ``W``, ``C``, ``Lambda`` and ``s`` into :attr:`fused` (projected first)."""
        mode = as_bool(mode, "mode")
        if not mode:
            was = self.training
            self.training = True
            with torch.no_grad():
                self.fused = self.get_dictionary().detach().clone()
            self.training = was
        return super().train(mode)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``z @ D`` for codes ``z`` of shape ``(..., n_atoms)``."""
        z = _as_tensor(z, "z", last=self.n_atoms, finite=False, dtype=self.C.dtype)
        return z @ self.get_dictionary()
