"""LocA-SAE's architecture (the ``loca_sae`` chapter): :class:`GroupedTopKSAE`, a TopK per group of latents, built
from a trained TopK SAE with :meth:`GroupedTopKSAE.from_topk`."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from iclr26.sae._validation import _as_tensor
from iclr26.sae.dictionary import TopKSAE, _DictionarySAE, _topk_relu
from iclr26.validate import as_float, as_int

__all__ = ["GroupedTopKSAE"]


class GroupedTopKSAE(_DictionarySAE):
    """A TopK per group of latents: the multi-encoder SAE of LocA-SAE ("local amortisation").

    The ``width = sum(group_sizes)`` latents form contiguous groups (group ``g`` holds latents
    ``offsets[g]:offsets[g + 1]``), each with its own ``k_g = group_ks[g]``: a token's code keeps the ``k_g``
    largest ReLU pre-activations of every group, so its L0 is at most ``sum(group_ks)``. The encoder and decoder are
    one matrix each, cut into column / row blocks: the same function as separate per-group encoders and decoders
    (the official ``MultiEncoderTopKSAE``), with this module's unit-norm decoder and shared ``b_dec``.

    ``usage_weight`` adds the official usage term ``usage_weight * mean_j (usage_j - sum(group_ks) / width)^2`` to the
    loss, with ``usage_j`` the fraction of the batch on which latent ``j`` fires. As in the official code it is
    computed from the firing indicator ``z > 0``, which has no gradient: it is reported in the metrics and leaves
    training unchanged. :meth:`from_topk` builds one from a trained :class:`TopKSAE` and a grouping of its latents.
    """

    def __init__(
        self, d_in: int, group_sizes: Any, group_ks: Any, decoder_norm: str = "unit", usage_weight: float = 0.0
    ) -> None:
        sizes, ks = _check_groups(group_sizes, group_ks)
        super().__init__(d_in, sum(sizes), decoder_norm)
        self.group_sizes, self.group_ks = sizes, ks
        self.offsets = tuple(int(v) for v in np.cumsum((0, *sizes)))
        self.usage_weight = as_float(usage_weight, "usage_weight", low=0.0)
        self.register_buffer("latent_order", torch.arange(self.width))  # the source latent of each latent

    @property
    def k(self) -> int:
        """The largest L0 a token can have: ``sum(group_ks)``."""
        return sum(self.group_ks)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.pre_activations(x)
        return torch.cat(
            [_topk_relu(pre[..., a:b], k) for a, b, k in zip(self.offsets, self.offsets[1:], self.group_ks)], dim=-1
        )

    def group_l0(self, z: torch.Tensor) -> torch.Tensor:
        """Mean number of active latents per token in each group, shape ``(n_groups,)``."""
        z = _as_tensor(z, "z", last=self.width).detach().reshape(-1, self.width)
        return torch.stack([(z[:, a:b] > 0).float().sum(-1).mean() for a, b in zip(self.offsets, self.offsets[1:])])

    def usage_penalty(self, z: torch.Tensor) -> torch.Tensor:
        """The official usage term (without its weight): ``mean_j (usage_j - sum(group_ks) / width)^2``, where
        ``usage_j`` is latent ``j``'s firing rate on the batch ``z`` (no gradient: an indicator)."""
        z = _as_tensor(z, "z", last=self.width, finite=False)
        usage = (z.reshape(-1, self.width) > 0).float().mean(0)
        return (usage - self.k / self.width).pow(2).mean()

    def loss(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Per-token squared error summed over features, averaged, plus the (gradient-free) usage term."""
        x_hat, z = self(x)
        mse = (x - x_hat).pow(2).sum(-1).mean()
        usage = self.usage_penalty(z)
        total = mse + self.usage_weight * usage if self.usage_weight > 0 else mse
        return total, {"mse": mse.detach(), "l0": (z > 0).float().sum(-1).mean().detach(), "usage": usage.detach()}

    @classmethod
    def from_topk(cls, sae: TopKSAE, groups: Any, group_ks: Any, usage_weight: float = 0.0) -> GroupedTopKSAE:
        """A grouped SAE initialised from ``sae``: ``groups`` lists, per group, the indices of ``sae``'s latents it
        takes (disjoint, covering all of them); latent ``i`` of the result is ``sae``'s latent ``latent_order[i]``
        (its encoder column, encoder bias and decoder row). ``b_dec`` and the decoder-norm mode are copied."""
        if not isinstance(sae, TopKSAE):
            raise TypeError(f"sae must be a TopKSAE, got {type(sae).__name__}")
        if isinstance(groups, (str, bytes)) or not hasattr(groups, "__len__") or len(groups) == 0:
            raise TypeError("groups must be a non-empty sequence of index arrays, one per group")
        idx = []
        for g, members in enumerate(groups):
            t = torch.as_tensor(np.asarray(members.cpu() if torch.is_tensor(members) else members))
            if t.ndim != 1 or t.numel() == 0 or t.is_floating_point() or t.dtype == torch.bool:
                raise ValueError(f"groups[{g}] must be a non-empty 1-D array of latent indices")
            idx.append(t.long())
        order = torch.cat(idx)
        if order.numel() != sae.width or not torch.equal(order.sort().values, torch.arange(sae.width)):
            raise ValueError(f"groups must partition the {sae.width} latents of sae (each index exactly once)")
        model = cls(sae.d_in, [len(t) for t in idx], group_ks, decoder_norm=sae.decoder_norm, usage_weight=usage_weight)
        ref = next(sae.parameters())
        model = model.to(device=ref.device, dtype=ref.dtype)
        with torch.no_grad():
            o = order.to(ref.device)
            model.W_enc.copy_(sae.W_enc[:, o])
            model.b_enc.copy_(sae.b_enc[o])
            model.W_dec.copy_(sae.W_dec[o])
            model.b_dec.copy_(sae.b_dec)
            model.latent_order.copy_(o)
        return model


def _check_groups(group_sizes: Any, group_ks: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    for name, v in (("group_sizes", group_sizes), ("group_ks", group_ks)):
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise TypeError(f"{name} must be a sequence of ints, got {type(v).__name__}")
    sizes = tuple(as_int(s, f"group_sizes[{i}]", low=1) for i, s in enumerate(group_sizes))
    ks = tuple(as_int(k, f"group_ks[{i}]", low=1) for i, k in enumerate(group_ks))
    if not sizes:
        raise ValueError("group_sizes must name at least one group")
    if len(ks) != len(sizes):
        raise ValueError(f"group_ks must have one k per group ({len(sizes)}), got {len(ks)}")
    for g, (s, k) in enumerate(zip(sizes, ks)):
        if k > s:
            raise ValueError(f"group_ks[{g}]={k} must be <= group_sizes[{g}]={s}")
    return sizes, ks
