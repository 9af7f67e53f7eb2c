"""The sparse-autoencoder family and its metrics.

    sae = TopKSAE(d_in=64, width=256, k=8)              # k-sparse decode and backward (fast=True, the default)
    sae = TopKSAE(d_in=64, width=256, k=8, fast=False)  # the dense reference, same math (or ReLUSAE(...))
    x_hat, z = sae(x)                                  # x: (..., d_in) -> reconstruction, codes (..., width)
    loss, metrics = sae.loss(x)                        # per-token squared error (+ sparsity penalty), logs
    fit_sae(sae, x, steps=1000, batch_size=512)        # AdamW, warmup-cosine, clipping via iclr26.train.fit

    tfa = TemporalSAE(d_in=64, width=256, k=4)         # Temporal Feature Analysis (Lubana et al.)
    x_hat, out = tfa(x_seq)                            # x_seq: (batch, time, d_in)
    z_pred, z_nov = out["pred_codes"], out["novel_codes"]

    loca = GroupedTopKSAE.from_topk(sae, groups, group_ks=[3, 2, 2, 1])  # a TopK per group of latents (LocA-SAE)
    z = ista(x, sae.dictionary, lam, steps=30, z0=sae.encode(x))      # per-sample inference on a fixed decoder

Metrics: :func:`fvu` (fraction of variance unexplained), :func:`nmse`, :func:`variance_explained`, :func:`l0`,
:func:`dead_fraction`, :func:`dense_fraction`, :func:`firing_rates`, :func:`dictionary_recovery` (Hungarian matching
against a planted dictionary), :func:`cosine_gram`, :func:`block_contrast` and :func:`step_change` (event
boundaries from centred code similarity, as the official TFA demo computes it), :func:`part_variance_explained` (the
demo's per-part variance explained), and
the pathology metrics of the LocA-SAE code: :func:`angular_variance`, :func:`absorption`, :func:`k_sparse_probe_f1`
and :func:`splitting` against binary feature labels.

Per-sample inference: :func:`ista` / :func:`fista` (non-negative or signed proximal gradient on
:func:`lasso_objective`, step ``1 / ||D||_2^2`` from :func:`spectral_norm_sq`) and :func:`calibrate_lambda`
(the penalty whose codes fire at a target density).

Decoder norms. A sparsity penalty on ``z`` can be dodged by shrinking ``z`` and growing the decoder rows, so
:class:`ReLUSAE` and :class:`TopKSAE` either keep unit-norm decoder rows by construction
(``decoder_norm="unit"``: the forward pass divides each row by its norm) or leave them free and weight the L1
penalty by the row norms (``decoder_norm="free"``, scale-invariant). :class:`TemporalSAE` follows the official
code: a tied dictionary ``D`` with free norms and a fixed encoder scale ``lam = 1 / (4 d_in)``; its input scale
comes from :func:`scaling_factor` (the official ``1 / mean ||x||`` by default) and :func:`fit_temporal_sae` ends its
cosine at the official ``min_lr`` (0.9 of the peak).

The real-model path (``paper`` scale) reads residual activations of a transformers causal LM with
:func:`iclr26.hf.residual_activations`, and :meth:`TemporalSAE.from_official` loads a released TFA checkpoint; planted
temporal data come from :func:`iclr26.data.planted_slow_fast`.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr26.checks import check_bool, check_choice, check_float, check_int, check_prob, float_tensor, torch_generator

__all__ = [
    "ReLUSAE",
    "TopKSAE",
    "GroupedTopKSAE",
    "CodeAttention",
    "TemporalSAE",
    "fit_sae",
    "fit_temporal_sae",
    "scaling_factor",
    "fvu",
    "variance_explained",
    "l0",
    "dead_fraction",
    "dense_fraction",
    "DictionaryRecovery",
    "dictionary_recovery",
    "cosine_gram",
    "step_change",
    "block_contrast",
    "part_variance_explained",
    "spectral_norm_sq",
    "lasso_objective",
    "ista",
    "fista",
    "LambdaCalibration",
    "calibrate_lambda",
    "nmse",
    "firing_rates",
    "angular_variance",
    "feature_latent_corr",
    "absorption",
    "k_sparse_probe_f1",
    "splitting",
]


# ------------------------------------------------------------------------------------------------ validation
_as_tensor = functools.partial(float_tensor, numpy_ok=True)


# ------------------------------------------------------------------------------------------------ standard SAEs
class _DictionarySAE(nn.Module):
    """Shared parts of :class:`ReLUSAE` and :class:`TopKSAE`: untied encoder, decoder with norm handling."""

    def __init__(self, d_in: int, width: int, decoder_norm: str = "unit") -> None:
        super().__init__()
        self.d_in = check_int(d_in, "d_in", low=1)
        self.width = check_int(width, "width", low=1)
        self.decoder_norm = check_choice(decoder_norm, "decoder_norm", ("unit", "free"))
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
        self.l1 = check_float(l1, "l1", low=0.0)

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
        self.k = check_int(k, "k", low=1)
        if self.k > self.width:
            raise ValueError(f"k must be <= width={self.width}, got {k}")
        fast = check_bool(fast, "fast")
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
        self.usage_weight = check_float(usage_weight, "usage_weight", low=0.0)
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
    sizes = tuple(check_int(s, f"group_sizes[{i}]", low=1) for i, s in enumerate(group_sizes))
    ks = tuple(check_int(k, f"group_ks[{i}]", low=1) for i, k in enumerate(group_ks))
    if not sizes:
        raise ValueError("group_sizes must name at least one group")
    if len(ks) != len(sizes):
        raise ValueError(f"group_ks must have one k per group ({len(sizes)}), got {len(ks)}")
    for g, (s, k) in enumerate(zip(sizes, ks)):
        if k > s:
            raise ValueError(f"group_ks[{g}]={k} must be <= group_sizes[{g}]={s}")
    return sizes, ks


# ------------------------------------------------------------------------------------------------ k-sparse path
_CHUNK_ELEMENTS = 1 << 22  # pre-activations computed this many at a time (a 16 MiB float32 block): cache-sized


def _group_size(width: int, k: int) -> int:
    """The column-group size of :func:`_topk_select`: the largest power of two ``g`` dividing ``width`` with
    ``g^2 k <= width`` (which balances the ``width / g`` group maxima against the ``g k`` candidates), or 1 if
    that is below 4 (then grouping does not pay)."""
    g = 1
    while width % (2 * g) == 0 and (2 * g) ** 2 * k <= width:
        g *= 2
    return g if g >= 4 else 1


def _topk_select(pre: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Exactly ``pre.topk(k, dim=-1, sorted=False)`` for a contiguous 2-D ``pre`` (up to the order of the ``k``
    results and which index wins an exact tie), faster on the CPU when ``k`` is much smaller than the width.

    The columns are split into ``width / g`` groups (group ``c`` holds columns ``c, c + m, c + 2m, ...`` with
    ``m = width / g``, so the group maxima are one vectorised pass). The maxima of the ``k`` groups with the largest
    maxima are ``k`` values ``>= tau``, the smallest of those maxima, so the ``k``-th largest value is ``>= tau`` and
    every element that can be in the top ``k`` lies in one of those ``k`` groups: the top ``k`` of their ``g k``
    members is the top ``k`` of the row.
    """
    n, width = pre.shape
    g = _group_size(width, k) if pre.device.type == "cpu" else 1  # torch.topk is already fast on accelerators
    if g == 1:
        return pre.topk(k, dim=-1, sorted=False)
    m = width // g
    _, groups = pre.view(n, g, m).amax(1).topk(k, dim=-1, sorted=False)
    cand = (groups.unsqueeze(-1) + m * torch.arange(g, device=pre.device)).reshape(n, k * g)
    vals, j = pre.gather(1, cand).topk(k, dim=-1, sorted=False)
    return vals, cand.gather(1, j)


def _row_plan(idx: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group the ``(token, slot)`` pairs of ``idx`` (``(n, k)``) by latent: ``order`` sorts the flattened pairs by
    latent, ``tokens`` is each sorted pair's token, ``offsets`` where each latent's run starts (``width`` runs)."""
    flat = idx.reshape(-1)
    order = torch.argsort(flat)
    tokens = torch.div(order, idx.shape[1], rounding_mode="floor")
    offsets = torch.zeros(width, dtype=torch.long, device=idx.device)
    torch.cumsum(torch.bincount(flat, minlength=width)[:-1], 0, out=offsets[1:])
    return order, tokens, offsets


def _rows_sum(
    plan: tuple[torch.Tensor, torch.Tensor, torch.Tensor], src: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """``out[j] = sum over pairs (n, i) with idx[n, i] == j of weights[n, i] * src[n]``, shape ``(width, d)``:
    the gradient of a weight matrix that only the selected rows touched, in one pass over the ``n k`` pairs."""
    order, tokens, offsets = plan
    return F.embedding_bag(tokens, src, offsets, mode="sum", per_sample_weights=weights.reshape(-1)[order])


def _pair_dots(table: torch.Tensor, idx: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``out[n, i] = <table[idx[n, i]], grad[n]>`` (``(n, k)``) without gathering the ``(n, k, d)`` rows: the
    per-sample-weight gradient of ``embedding_bag``."""
    n, k = idx.shape
    offsets = torch.arange(0, n * k, k, device=idx.device)
    bags = torch.arange(n, device=idx.device).repeat_interleave(k)
    return torch.ops.aten._embedding_bag_per_sample_weights_backward(
        grad.contiguous(), table, idx.reshape(-1), offsets, bags, 0
    ).view(n, k)


class _TopKSparseCode(torch.autograd.Function):
    """TopK encode + decode from the ``k`` selected latents of each token, with a backward pass that only touches
    them.

    ``apply(xc, W_enc, b_enc, dictionary, k) -> (recon, vals, idx)`` for ``xc`` ``(n, d)``, ``W_enc`` ``(d, width)``,
    ``b_enc`` ``(width,)`` or ``None`` and ``dictionary`` ``(width, d)``: ``pre = xc @ W_enc + b_enc``, ``idx`` the
    top-``k`` latents of ``pre``, ``vals = ReLU(pre[idx])`` and ``recon = sum_i vals_i dictionary[idx_i]``
    (``F.embedding_bag``). Selecting on ``pre`` rather than ``ReLU(pre)`` can only change which zero-valued latents
    fill the ``k`` slots of a token with fewer than ``k`` positive pre-activations: same code, same gradients.
    ``pre`` is computed and reduced a block of tokens at a time (``_CHUNK_ELEMENTS``), so the dense
    ``(n, width)`` matrix never exists.

    Backward, with ``g_pre = g_vals * (vals > 0)`` (the ReLU) on the selected pairs and zero elsewhere:
    ``grad W_enc = xc^T g_pre`` and ``grad dictionary = vals^T g_recon`` are summed pair by pair into the selected
    columns / rows (:func:`_rows_sum`), ``grad xc = g_pre W_enc^T`` reads only the selected columns, ``grad vals``
    gets ``<dictionary[idx], g_recon>`` (:func:`_pair_dots`) — ``O(n k d)`` work instead of the dense ``O(n width d)``.
    """

    @staticmethod
    def forward(ctx, xc, W_enc, b_enc, dictionary, k):  # noqa: D102
        n, width = xc.shape[0], W_enc.shape[1]
        vals = xc.new_empty(n, k)
        idx = torch.empty(n, k, dtype=torch.long, device=xc.device)
        rows = max(1, _CHUNK_ELEMENTS // width)
        buf = xc.new_empty(min(rows, n), width)
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            pre = torch.mm(xc[start:stop], W_enc, out=buf[: stop - start])
            if b_enc is not None:
                pre += b_enc  # as the dense path's `(x - b_dec) @ W_enc + b_enc`
            vals[start:stop], idx[start:stop] = _topk_select(pre, k)
        del buf
        vals.relu_()
        recon = F.embedding_bag(idx, dictionary, mode="sum", per_sample_weights=vals)
        ctx.save_for_backward(xc, W_enc, dictionary, vals, idx)
        ctx.mark_non_differentiable(idx)
        return recon, vals, idx

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_recon, g_vals, _g_idx):  # noqa: D102
        xc, W_enc, dictionary, vals, idx = ctx.saved_tensors
        need_x, need_enc, need_b, need_dict = ctx.needs_input_grad[:4]
        width = dictionary.shape[0]
        plan = _row_plan(idx, width) if need_enc or need_dict else None
        g_recon = g_recon.contiguous()
        g_vals = g_vals + _pair_dots(dictionary, idx, g_recon)
        grad_dict = _rows_sum(plan, g_recon, vals) if need_dict else None
        g_pre = g_vals * (vals > 0)  # ReLU backward on the selected pairs; the rest have no gradient
        grad_x = F.embedding_bag(idx, W_enc.t().contiguous(), mode="sum", per_sample_weights=g_pre) if need_x else None
        grad_enc = _rows_sum(plan, xc, g_pre).t() if need_enc else None
        grad_b = vals.new_zeros(width).index_add_(0, idx.reshape(-1), g_pre.reshape(-1)) if need_b else None
        return grad_x, grad_enc, grad_b, grad_dict, None


# ------------------------------------------------------------------------------------------------ Temporal SAE
class CodeAttention(nn.Module):
    """One causal multi-head attention layer in code space (the official ``ManualAttention``).

    Queries come from the current tokens' codes (``target``), keys and values from the context codes (``ctx``);
    position ``t`` attends to context positions ``0..t``. ``bottleneck_factor`` shrinks the query/key width.
    Weights start with rows of norm ``1/sqrt(head dim)`` (queries, keys, values) and ``1/sqrt(width)`` (output),
    as in the official code.
    """

    def __init__(self, width: int, n_heads: int = 4, bottleneck_factor: int = 1) -> None:
        super().__init__()
        width = check_int(width, "width", low=1)
        n_heads = check_int(n_heads, "n_heads", low=1)
        bottleneck_factor = check_int(bottleneck_factor, "bottleneck_factor", low=1)
        if width % (n_heads * bottleneck_factor):
            raise ValueError(
                f"width={width} must be divisible by n_heads * bottleneck_factor = {n_heads * bottleneck_factor}"
            )
        self.width, self.n_heads = width, n_heads
        self.n_embd = width // bottleneck_factor
        self.k_ctx = nn.Linear(width, self.n_embd)
        self.q_target = nn.Linear(width, self.n_embd)
        self.v_ctx = nn.Linear(width, width)
        self.c_proj = nn.Linear(width, width)
        with torch.no_grad():
            for lin, scale in (
                (self.k_ctx, 1 / math.sqrt(self.n_embd // n_heads)),
                (self.q_target, 1 / math.sqrt(self.n_embd // n_heads)),
                (self.v_ctx, 1 / math.sqrt(width // n_heads)),
                (self.c_proj, 1 / math.sqrt(width)),
            ):
                lin.weight.mul_(scale / (1e-6 + lin.weight.norm(dim=1, keepdim=True)))

    def forward(
        self, ctx: torch.Tensor, target: torch.Tensor, return_pattern: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, _ = ctx.shape
        h = self.n_heads
        q = self.q_target(target).view(B, T, h, -1).transpose(1, 2)
        k = self.k_ctx(ctx).view(B, T, h, -1).transpose(1, 2)
        v = self.v_ctx(ctx).view(B, T, h, -1).transpose(1, 2)
        pattern = None
        if return_pattern or q.device.type == "cpu":  # explicit softmax: faster than SDPA's CPU kernel here
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
            pattern = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            out = pattern @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(out.transpose(1, 2).reshape(B, T, self.width)), pattern


class TemporalSAE(nn.Module):
    """Temporal Feature Analysis (the official ``TemporalSAE``): a predictable code from context + a sparse novel code.

    For a sequence ``x`` of shape ``(batch, time, d_in)`` (multiplied by ``scaling_factor`` first):

    1. ``x~ = x - b``; raw codes ``u_t = ReLU(lam * x~_t D^T)`` with the tied dictionary ``D`` (``width x d_in``);
    2. context codes shifted by one step, ``c_t = u_{t-1}`` (``c_1 = 0``): :meth:`context_codes`;
    3. ``z~_t = ReLU(CodeAttention(c, u)_t)`` (:meth:`predict_codes`); least-squares scale
       ``alpha_t = <z~_t D, x~_t> / ||z~_t D||^2``; predictable code ``z_pred_t = alpha_t z~_t``; the residual
       ``r_t = x~_t - z_pred_t D`` goes on (repeated for ``n_attn_layers`` layers);
    4. novel code ``z_nov_t = TopK_k(ReLU(lam * r_t D^T))`` (``novel="topk"``), ``ReLU`` (``"relu"``, trained with
       an L2 penalty) or zero (``"nullify"``);
    5. ``x_hat = ((z_pred + z_nov) D + b) / scaling_factor``.

    Variants are subclasses: override :meth:`context_codes` (e.g. no shift, so the current token leaks into its own
    "prediction") or :meth:`predict_codes` (e.g. a moving average of past codes instead of the attention); the rest of
    the model (the scale ``alpha``, the novel code, the loss, :func:`fit_temporal_sae`) is unchanged.

    ``fast=True`` (the default; ``novel="topk"`` only) computes the novel code and its reconstruction through the
    k-sparse path of :class:`TopKSAE` (:class:`_TopKSparseCode` with encoder ``lam D^T`` and decoder ``D``): same
    math, with the novel part's backward touching only the ``k`` selected latents per token.
    """

    def __init__(
        self,
        d_in: int,
        width: int,
        k: int | None = None,
        n_heads: int = 4,
        n_attn_layers: int = 1,
        bottleneck_factor: int = 1,
        novel: str = "topk",
        scaling_factor: float = 1.0,
        fast: bool = True,
    ) -> None:
        super().__init__()
        self.d_in = check_int(d_in, "d_in", low=1)
        self.width = check_int(width, "width", low=1)
        if novel not in ("topk", "relu", "nullify"):
            raise ValueError(f"novel must be 'topk', 'relu' or 'nullify', got {novel!r}")
        if novel == "topk":
            if k is None:
                raise ValueError("k must be given when novel='topk'")
            k = check_int(k, "k", low=1)
            if k > self.width:
                raise ValueError(f"k must be <= width={self.width}, got {k}")
        fast = check_bool(fast, "fast")
        self.scaling_factor = check_float(scaling_factor, "scaling_factor", 0.0, low_open=True)
        self.k, self.novel, self.fast = k, novel, fast
        self.lam = 1.0 / (4 * self.d_in)
        self.eps = 1e-6
        n_attn_layers = check_int(n_attn_layers, "n_attn_layers", low=1)
        self.attn_layers = nn.ModuleList(
            [CodeAttention(self.width, n_heads, bottleneck_factor) for _ in range(n_attn_layers)]
        )
        self.D = nn.Parameter(torch.randn(self.width, self.d_in))
        self.b = nn.Parameter(torch.zeros(self.d_in))

    def context_codes(self, u: torch.Tensor) -> torch.Tensor:
        """The codes each position may predict from: ``u`` shifted one step into the past, ``c_t = u_{t-1}``,
        ``c_1 = 0`` (``u``: ``(batch, time, width)``). Override in a subclass to change what the predictor sees."""
        return torch.cat([torch.zeros_like(u[:, :1]), u[:, :-1]], dim=1)

    def predict_codes(
        self, layer: nn.Module, ctx: torch.Tensor, u: torch.Tensor, return_pattern: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The raw predicted codes (before the ReLU and the scale ``alpha``) and the attention pattern (or ``None``):
        the official :class:`CodeAttention` ``layer`` reads the context codes ``ctx`` (keys, values) with queries from
        the current codes ``u``. Override in a subclass to try another predictor (return ``(codes, None)``)."""
        return layer(ctx, u, return_pattern=return_pattern)

    def forward(
        self, x: torch.Tensor, return_pattern: bool = False, k: int | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor | None]]:
        """Return ``(x_hat, out)``; ``out`` holds ``pred_codes``, ``novel_codes``, ``pred_recons``,
        ``novel_recons`` (without the bias, in input units), ``alpha`` and ``attn`` (patterns if asked)."""
        x = _as_tensor(x, "x", ndim=3, last=self.d_in, finite=False, dtype=self.D.dtype)
        return_pattern = check_bool(return_pattern, "return_pattern")
        kval = self.k if k is None else check_int(k, "k", low=1)
        xt = x * self.scaling_factor - self.b
        z_pred = torch.zeros(*x.shape[:2], self.width, device=x.device, dtype=x.dtype)
        alphas, patterns = [], []
        for layer in self.attn_layers:
            u = F.relu((xt * self.lam) @ self.D.T)
            raw, pattern = self.predict_codes(layer, self.context_codes(u), u, return_pattern=return_pattern)
            raw = F.relu(raw)
            recon = raw @ self.D
            alpha = (recon * xt).sum(-1, keepdim=True) / (recon.norm(dim=-1, keepdim=True) + self.eps).pow(2)
            z_pred = z_pred + alpha * raw
            xt = xt - alpha * recon
            alphas.append(alpha.squeeze(-1))
            if pattern is not None:
                patterns.append(pattern)
        if self.novel == "topk" and self.fast:
            lead = xt.shape[:-1]
            nov_rec, vals, idx = _TopKSparseCode.apply(
                (xt * self.lam).reshape(-1, self.d_in), self.D.T, None, self.D, kval
            )
            nov_rec, vals, idx = nov_rec.reshape(*lead, self.d_in), vals.reshape(*lead, -1), idx.reshape(*lead, -1)
            z_nov = _dense_code(vals, idx, self.width)
            pred_rec = z_pred @ self.D
            x_hat = (pred_rec + nov_rec + self.b) / self.scaling_factor
        else:
            pre = (xt * self.lam) @ self.D.T
            if self.novel == "topk":
                z_nov = _topk_relu(pre, kval)
            elif self.novel == "relu":
                z_nov = F.relu(pre)
            else:
                z_nov = torch.zeros_like(z_pred)
            x_hat = ((z_pred + z_nov) @ self.D + self.b) / self.scaling_factor
            pred_rec, nov_rec = z_pred @ self.D, z_nov @ self.D
        out = {
            "pred_codes": z_pred,
            "novel_codes": z_nov,
            "pred_recons": pred_rec.detach() / self.scaling_factor,
            "novel_recons": nov_rec.detach() / self.scaling_factor,
            "alpha": torch.stack(alphas, -1),
            "attn": torch.stack(patterns, 1) if patterns else None,
        }
        return x_hat, out

    def loss(self, x: torch.Tensor, gamma: float = 0.0) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The official objective: squared error summed over features, averaged over tokens (in scaled units),
        plus ``gamma * mean ||z_nov||_2`` (the ReLU variant's penalty)."""
        gamma = check_float(gamma, "gamma", low=0.0)
        x_hat, out = self(x)
        s = self.scaling_factor
        mse = ((x - x_hat) * s).pow(2).sum(-1).mean()
        reg = out["novel_codes"].norm(dim=-1).mean() if gamma > 0 else mse.new_zeros(())
        return mse + gamma * reg, {"mse": mse.detach()}

    @classmethod
    def from_official(cls, conf: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor]) -> TemporalSAE:
        """Build from an official checkpoint: ``conf`` is its ``conf.yaml`` as a dict, ``state_dict`` its tensors
        (``D``, ``b`` and ``attn_layers.{i}.{k_ctx,q_target,v_ctx,c_proj}.{weight,bias}``)."""
        if not isinstance(conf, Mapping) or "llm" not in conf or "sae" not in conf:
            raise ValueError("conf must be the official conf.yaml as a dict with 'llm' and 'sae' sections")
        if not isinstance(state_dict, Mapping) or "D" not in state_dict:
            raise ValueError("state_dict must be a mapping of tensors holding at least 'D'")
        llm, sae = conf["llm"], conf["sae"]
        if sae.get("tied_weights", True) is not True:
            raise ValueError("only tied-weight TFA checkpoints are supported (conf['sae']['tied_weights'] is False)")
        d_in = int(llm["dimin"])
        model = cls(
            d_in=d_in,
            width=int(d_in * sae["exp_factor"]),
            k=sae.get("kval_topk"),
            n_heads=int(sae.get("n_heads", 4)),
            n_attn_layers=int(sae.get("n_attn_layers", 1)),
            bottleneck_factor=int(sae.get("bottleneck_factor", 1)),
            novel=sae.get("sae_diff_type", "topk"),
            scaling_factor=float(sae.get("scaling_factor", 1.0)),
        )
        sd = {name: torch.as_tensor(t) for name, t in state_dict.items()}
        sd["b"] = sd["b"].reshape(-1)
        model.load_state_dict(sd)
        return model


# ------------------------------------------------------------------------------------------------ training
def scaling_factor(x: torch.Tensor, convention: str = "official") -> float:
    """The input scale ``s`` for a :class:`TemporalSAE` (tokens on the last axis of ``x``).

    ``convention="official"`` (the default) computes what the official ``compute_scaling_factor.py`` computes,
    ``s = 1 / mean ||x||``, so that the scaled tokens have unit mean norm (that script's docstring speaks of
    ``sqrt(d_in)``, its code does not); ``"sqrt_d"`` makes the mean squared norm of ``s x`` equal to ``d_in``.
    """
    x = _as_tensor(x, "x")
    if not isinstance(convention, str):
        raise TypeError(f"convention must be a str, got {type(convention).__name__}")
    check_choice(convention, "convention", ("official", "sqrt_d"))
    flat = x.detach().reshape(-1, x.shape[-1]).double()
    if not bool(flat.any()):
        raise ValueError("x is all zeros: no scaling factor")
    if convention == "official":
        return 1.0 / float(flat.norm(dim=-1).mean())
    return math.sqrt(x.shape[-1] / float(flat.pow(2).sum(-1).mean()))


def _train_on_samples(
    model: nn.Module,
    x: torch.Tensor,
    loss,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    warmup: int | None,
    clip: float,
    seed: int | np.random.Generator,
    progress: bool,
    desc: str,
    min_lr_ratio: float = 0.0,
    eval_fn=None,
    eval_every: int | None = None,
):
    """The shared recipe: minibatches drawn from ``x`` along its first axis, AdamW (betas 0.9, 0.95),
    warmup then cosine, gradient clipping — through :func:`iclr26.train.fit`."""
    from iclr26.train import fit

    steps = check_int(steps, "steps", low=1)
    batch_size = check_int(batch_size, "batch_size", low=1)
    warmup = max(1, steps // 20) if warmup is None else check_int(warmup, "warmup", low=0)
    lr = check_float(lr, "lr", 0.0, low_open=True)
    weight_decay = check_float(weight_decay, "weight_decay", low=0.0)
    gen = torch_generator(seed)  # on the CPU: the same minibatches on every device
    device = next(model.parameters()).device
    x = x.to(device)
    n = x.shape[0]

    def batches(step: int) -> torch.Tensor:
        return x[torch.randint(n, (min(batch_size, n),), generator=gen).to(device)]

    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    return fit(
        model,
        loss,
        batches,
        opt,
        steps=steps,
        schedule="warmup_cosine",
        warmup=min(warmup, steps),
        clip=clip,
        progress=progress,
        desc=desc,
        min_lr_ratio=min_lr_ratio,
        eval_fn=eval_fn,
        eval_every=eval_every,
    )


def fit_sae(
    sae: _DictionarySAE,
    x: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 512,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    warmup: int | None = None,
    clip: float = 1.0,
    seed: int | np.random.Generator = 0,
    progress: bool = True,
    desc: str = "SAE",
    eval_fn=None,
    eval_every: int | None = None,
):
    """Train a :class:`ReLUSAE`, :class:`TopKSAE` or :class:`GroupedTopKSAE` on tokens ``x`` (``(n, d_in)``; more
    axes are flattened) with AdamW (betas 0.9, 0.95), a warmup-cosine schedule and gradient clipping; returns the
    history. ``eval_fn(sae) -> {"name": value}`` runs every ``eval_every`` steps and at the end, in eval mode under
    ``torch.no_grad()``, and its values join the history's rows (e.g. pathology metrics over training, as
    :func:`iclr26.train.fit` does)."""
    if not isinstance(sae, _DictionarySAE):
        raise TypeError(f"sae must be a ReLUSAE or TopKSAE, got {type(sae).__name__}")
    x = _as_tensor(x, "x", last=sae.d_in, dtype=next(sae.parameters()).dtype).reshape(-1, sae.d_in)
    return _train_on_samples(
        sae,
        x,
        lambda m, b: m.loss(b),
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        weight_decay=weight_decay,
        warmup=warmup,
        clip=clip,
        seed=seed,
        progress=progress,
        desc=desc,
        eval_fn=eval_fn,
        eval_every=eval_every,
    )


def fit_temporal_sae(
    tfa: TemporalSAE,
    x: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    warmup: int | None = None,
    clip: float = 1.0,
    gamma: float = 0.0,
    min_lr_ratio: float = 0.9,
    seed: int | np.random.Generator = 0,
    progress: bool = True,
    desc: str = "TFA",
):
    """Train a :class:`TemporalSAE` on sequences ``x`` (``(n_seq, time, d_in)``) with the official recipe:
    AdamW (betas 0.9, 0.95, weight decay 1e-4), warmup then cosine down to ``min_lr_ratio`` of the peak (the
    official ``min_lr`` is 0.9 of ``learning_rate``), gradient clipping at 1."""
    if not isinstance(tfa, TemporalSAE):
        raise TypeError(f"tfa must be a TemporalSAE, got {type(tfa).__name__}")
    x = _as_tensor(x, "x", ndim=3, last=tfa.d_in, dtype=next(tfa.parameters()).dtype)
    gamma = check_float(gamma, "gamma", low=0.0)
    min_lr_ratio = check_float(min_lr_ratio, "min_lr_ratio", 0.0, 1.0)
    return _train_on_samples(
        tfa,
        x,
        lambda m, b: m.loss(b, gamma=gamma),
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        weight_decay=weight_decay,
        warmup=warmup,
        clip=clip,
        seed=seed,
        progress=progress,
        desc=desc,
        min_lr_ratio=min_lr_ratio,
    )


# ------------------------------------------------------------------------------------------------ metrics
def _flat_pair(x: Any, x_hat: Any, names: tuple[str, str] = ("x", "x_hat")) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = names
    x = _as_tensor(x, a)
    x_hat = _as_tensor(x_hat, b)
    if x.shape != x_hat.shape:
        raise ValueError(f"{a} and {b} must have the same shape, got {tuple(x.shape)} and {tuple(x_hat.shape)}")
    return x.detach().reshape(-1, x.shape[-1]).double(), x_hat.detach().reshape(-1, x.shape[-1]).double()


def fvu(x: Any, x_hat: Any) -> float:
    """Fraction of variance unexplained: ``sum ||x - x_hat||^2 / sum ||x - mean(x)||^2`` over all tokens."""
    x, x_hat = _flat_pair(x, x_hat)
    total = (x - x.mean(0)).pow(2).sum()
    if total <= 0:
        raise ValueError("x has zero variance: FVU is undefined")
    return float((x - x_hat).pow(2).sum() / total)


def variance_explained(x: Any, x_hat: Any) -> float:
    """``1 - fvu(x, x_hat)``."""
    return 1.0 - fvu(x, x_hat)


def _codes(z: Any) -> torch.Tensor:
    z = _as_tensor(z, "z")
    if z.ndim == 0:
        raise ValueError("z must have a latent axis (last dimension)")
    return z.detach().reshape(-1, z.shape[-1])


def part_variance_explained(part: Any, target: Any) -> float:
    """The official demo's variance explained by one part of a reconstruction: ``Var(part) / Var(target)``, the
    per-feature variances over all tokens summed over features. For parts that are uncorrelated with each other the
    shares add up to the whole reconstruction's."""
    target, part = _flat_pair(target, part, ("target", "part"))
    total = target.var(0).sum()
    if total <= 0:
        raise ValueError("target has zero variance: the variance explained is undefined")
    return float(part.var(0).sum() / total)


def l0(z: Any, threshold: float = 0.0) -> float:
    """Mean number of latents with ``|z| > threshold`` per token."""
    z = _codes(z)
    return float((z.abs() > check_float(threshold, "threshold", low=0.0)).float().sum(-1).mean())


def dead_fraction(z: Any, threshold: float = 0.0) -> float:
    """Fraction of latents that never exceed ``threshold`` (in absolute value) on the given tokens."""
    z = _codes(z)
    return float(((z.abs() > check_float(threshold, "threshold", low=0.0)).sum(0) == 0).float().mean())


def dense_fraction(z: Any, frequency: float = 0.5, threshold: float = 0.0) -> float:
    """Fraction of latents active (``|z| > threshold``) on more than ``frequency`` of the tokens."""
    z = _codes(z)
    frequency = check_prob(frequency, "frequency")
    return float(((z.abs() > check_float(threshold, "threshold", low=0.0)).float().mean(0) > frequency).float().mean())


@dataclass(frozen=True)
class DictionaryRecovery:
    """Result of :func:`dictionary_recovery`.

    ``cos[i]`` is the cosine between true atom ``i`` and its matched learned atom ``match[i]``; ``mean_cos`` their mean;
    ``recovered`` the fraction with ``cos >= threshold``.
    """

    cos: np.ndarray
    match: np.ndarray
    mean_cos: float
    recovered: float


def dictionary_recovery(learned: Any, true: Any, threshold: float = 0.9) -> DictionaryRecovery:
    """Match each true atom (rows of ``true``, ``(n_true, d)``) to a distinct learned atom (rows of ``learned``,
    ``(n_learned, d)``, ``n_learned >= n_true``) maximising the summed cosine (Hungarian algorithm,
    ``scipy.optimize.linear_sum_assignment``)."""
    from scipy.optimize import linear_sum_assignment

    learned = _as_tensor(learned, "learned", ndim=2).detach().double()
    true = _as_tensor(true, "true", ndim=2).detach().double()
    if learned.shape[1] != true.shape[1]:
        raise ValueError(
            f"learned and true must have the same number of columns, got {learned.shape[1]} and {true.shape[1]}"
        )
    if learned.shape[0] < true.shape[0]:
        raise ValueError(f"learned needs at least as many atoms as true ({true.shape[0]}), got {learned.shape[0]}")
    threshold = check_float(threshold, "threshold", 0.0, 1.0)
    cos = F.normalize(true, dim=1) @ F.normalize(learned, dim=1).T
    rows, cols = linear_sum_assignment(cos.cpu().numpy(), maximize=True)
    matched = cos[rows, cols].cpu().numpy()
    return DictionaryRecovery(
        cos=matched, match=cols, mean_cos=float(matched.mean()), recovered=float((matched >= threshold).mean())
    )


def cosine_gram(z: Any, centre: bool = True) -> np.ndarray:
    """Cosine-similarity matrix between the rows of ``z`` (``(time, width)``); all-zero rows get similarity 0.

    ``centre=True`` (the official demo's convention) subtracts the sequence's mean code, ``z - z.mean(time)``, first,
    so that a component shared by every position does not make all positions look alike.
    """
    zn = _unit_rows(_as_tensor(z, "z", ndim=2), centre, time_axis=0)
    return (zn @ zn.T).cpu().numpy()


def step_change(z: Any, centre: bool = True) -> np.ndarray:
    """The event-boundary score ``1 - cos(z_t, z_{t-1})`` for ``t >= 1``: an array ``(n_seq, time - 1)`` for codes
    or activations ``z`` of shape ``(n_seq, time, width)``.

    ``centre=True`` subtracts each sequence's mean over time first (as :func:`cosine_gram` does); an all-zero row
    has similarity 0 with anything, so it scores 1.
    """
    z = _as_tensor(z, "z", ndim=3)
    if z.shape[1] < 2:
        raise ValueError(f"z must have at least 2 time steps, got {z.shape[1]}")
    zn = _unit_rows(z, centre, time_axis=1)
    return (1 - (zn[:, 1:] * zn[:, :-1]).sum(-1)).cpu().numpy()


def _unit_rows(z: torch.Tensor, centre: Any, time_axis: int) -> torch.Tensor:
    """``z`` in float64 with unit-norm rows (last axis; all-zero rows stay 0), after subtracting its mean over
    ``time_axis`` when ``centre``: the cosine similarities of :func:`cosine_gram` and :func:`step_change`."""
    z = z.detach().double()
    if check_bool(centre, "centre"):
        z = z - z.mean(time_axis, keepdim=True)
    return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def block_contrast(gram: Any, segments: Any) -> float:
    """Mean similarity within segments minus mean similarity across segments (off-diagonal entries only).

    ``gram`` is a ``(T, T)`` similarity matrix, ``segments`` a length-``T`` array of segment ids.
    """
    gram = _as_tensor(gram, "gram", ndim=2).detach().double().cpu().numpy()
    seg = np.asarray(segments)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1]:
        raise ValueError(f"gram must be a square matrix, got shape {gram.shape}")
    if seg.shape != (gram.shape[0],):
        raise ValueError(f"segments must have shape ({gram.shape[0]},), got {seg.shape}")
    same = seg[:, None] == seg[None, :]
    off = ~np.eye(len(seg), dtype=bool)
    if not (same & off).any() or not (~same).any():
        raise ValueError("segments must contain at least two segments and one segment of length >= 2")
    return float(gram[same & off].mean() - gram[~same].mean())


# ------------------------------------------------------------------------------------------------ per-sample inference
def _dictionary(dictionary: Any) -> torch.Tensor:
    d = _as_tensor(dictionary, "dictionary", ndim=2).detach()
    if d.shape[0] == 0 or d.shape[1] == 0:
        raise ValueError(f"dictionary must have at least one atom and one feature, got shape {tuple(d.shape)}")
    return d


def _problem(x: Any, dictionary: Any) -> tuple[torch.Tensor, torch.Tensor]:
    d = _dictionary(dictionary)
    x = _as_tensor(x, "x", ndim=2, last=d.shape[1]).detach()
    return x.to(d.dtype), d


def spectral_norm_sq(dictionary: Any, iters: int = 100, seed: int | np.random.Generator = 0) -> float:
    """``||D||_2^2``, the largest eigenvalue of ``D^T D``, by power iteration (``iters`` steps from a random start):
    the Lipschitz constant of the gradient of ``1/2 ||x - z D||^2`` in ``z`` (``D``: ``(width, d)``, atoms as rows)."""
    d = _dictionary(dictionary).double()
    iters = check_int(iters, "iters", low=1)
    v = torch.randn(d.shape[1], generator=torch_generator(seed), dtype=torch.float64).to(d.device)
    v = v / v.norm().clamp_min(1e-30)
    for _ in range(iters):
        w = d.T @ (d @ v)
        nw = w.norm()
        if nw == 0:
            return 0.0
        v = w / nw
    return float(v @ (d.T @ (d @ v)))


def _lasso(x: torch.Tensor, d: torch.Tensor, z: torch.Tensor, lam: float) -> torch.Tensor:
    return 0.5 * (x - z @ d).pow(2).sum(-1) + lam * z.abs().sum(-1)


def lasso_objective(x: Any, dictionary: Any, z: Any, lam: float) -> torch.Tensor:
    """Per-sample ``L(z) = 1/2 ||x - z D||^2 + lam ||z||_1`` (``x``: ``(n, d)``, ``D``: ``(width, d)``,
    ``z``: ``(n, width)``), shape ``(n,)``."""
    x, d = _problem(x, dictionary)
    z = _as_tensor(z, "z", ndim=2, last=d.shape[0]).detach().to(d.dtype)
    if z.shape[0] != x.shape[0]:
        raise ValueError(f"z must have one row per row of x ({x.shape[0]}), got {z.shape[0]}")
    lam = check_float(lam, "lam", low=0.0)
    return _lasso(x, d, z, lam)


def ista(
    x: Any,
    dictionary: Any,
    lam: float,
    steps: int,
    z0: Any = None,
    *,
    nonnegative: bool = True,
    accelerate: bool = False,
    step_size: float | None = None,
    return_trace: bool = False,
):
    """Per-sample sparse inference on a fixed dictionary: proximal gradient on ``L(z)`` (:func:`lasso_objective`).

    Each step is ``z <- prox(z - eta * (z D - x) D^T)`` with ``eta = 1 / ||D||_2^2`` (:func:`spectral_norm_sq`) unless
    ``step_size`` is given; ``prox`` is ``max(0, . - eta lam)`` with ``nonnegative=True`` (SAE codes) or the two-sided
    soft threshold. ``z0``: the start (``(n, width)``; default zeros; negative entries are refused when
    ``nonnegative``). ``accelerate=True`` is FISTA (Nesterov momentum, not monotone). With ``eta <= 1/||D||_2^2``
    ISTA never increases ``L``. Returns ``z`` (``(n, width)``), and with ``return_trace`` also the per-sample
    objective after each step, ``(steps + 1, n)`` (row 0: the start)."""
    x, d = _problem(x, dictionary)
    lam = check_float(lam, "lam", low=0.0)
    steps = check_int(steps, "steps", low=0)
    nonnegative = check_bool(nonnegative, "nonnegative")
    accelerate = check_bool(accelerate, "accelerate")
    return_trace = check_bool(return_trace, "return_trace")
    if step_size is None:
        lip = spectral_norm_sq(d)
        eta = 1.0 / lip if lip > 0 else 1.0
    else:
        eta = check_float(step_size, "step_size", 0.0, low_open=True)
    if z0 is None:
        z = x.new_zeros(x.shape[0], d.shape[0])
    else:
        z = _as_tensor(z0, "z0", ndim=2, last=d.shape[0]).detach().to(d.dtype).clone()
        if z.shape[0] != x.shape[0]:
            raise ValueError(f"z0 must have one row per row of x ({x.shape[0]}), got {z.shape[0]}")
        if nonnegative and bool((z < 0).any()):
            raise ValueError("z0 must be non-negative when nonnegative=True (a feasible start)")

    def prox(v: torch.Tensor) -> torch.Tensor:
        if nonnegative:
            return (v - eta * lam).clamp_min(0)
        return v.sign() * (v.abs() - eta * lam).clamp_min(0)

    trace = [_lasso(x, d, z, lam)] if return_trace else None
    y, t = z, 1.0
    for _ in range(steps):
        z_new = prox(y - eta * ((y @ d - x) @ d.T))
        if accelerate:
            t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
            y = z_new + ((t - 1) / t_new) * (z_new - z)
            t = t_new
        else:
            y = z_new
        z = z_new
        if return_trace:
            trace.append(_lasso(x, d, z, lam))
    if return_trace:
        return z, torch.stack(trace)
    return z


def fista(x: Any, dictionary: Any, lam: float, steps: int, z0: Any = None, **kwargs: Any):
    """:func:`ista` with Nesterov acceleration (FISTA): faster, but the objective may go up between steps."""
    return ista(x, dictionary, lam, steps, z0, accelerate=True, **kwargs)


@dataclass(frozen=True)
class LambdaCalibration:
    """Result of :func:`calibrate_lambda`: the chosen ``lam``, the ``grid`` and the firing ``density`` at each point."""

    lam: float
    grid: np.ndarray
    density: np.ndarray


def calibrate_lambda(
    x: Any,
    dictionary: Any,
    target_density: float,
    grid: Any = None,
    steps: int = 100,
    nonnegative: bool = True,
) -> LambdaCalibration:
    """The ``lam`` of ``grid`` (default ``logspace(-5, -1, 9)``) whose ISTA codes (``steps`` steps from zero) have the
    firing density ``mean(z != 0)`` closest to ``target_density`` — the official calibration."""
    x, d = _problem(x, dictionary)
    target_density = check_prob(target_density, "target_density")
    if grid is not None and (isinstance(grid, str) or not isinstance(grid, (np.ndarray, torch.Tensor, list, tuple))):
        raise TypeError(f"grid must be None or a sequence of positive λ values, got {type(grid).__name__}")
    grid = np.logspace(-5, -1, 9) if grid is None else np.asarray(grid, dtype=float).reshape(-1)
    if grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid < 0):
        raise ValueError("grid must be a non-empty sequence of finite lam >= 0")
    steps = check_int(steps, "steps", low=1)
    eta = 1.0 / max(spectral_norm_sq(d), 1e-30)
    density = np.array(
        [
            float((ista(x, d, float(lam), steps, nonnegative=nonnegative, step_size=eta) != 0).double().mean())
            for lam in grid
        ]
    )
    return LambdaCalibration(
        lam=float(grid[int(np.argmin(np.abs(density - target_density)))]), grid=grid, density=density
    )


# ------------------------------------------------------------------------------------------------ pathology metrics
def nmse(x: Any, x_hat: Any) -> float:
    """Normalised squared error ``sum ||x - x_hat||^2 / sum ||x||^2`` over all tokens (the LocA-SAE code's NMSE;
    :func:`fvu` divides by the variance instead)."""
    x, x_hat = _flat_pair(x, x_hat)
    total = x.pow(2).sum()
    if total <= 0:
        raise ValueError("x is all zeros: NMSE is undefined")
    return float((x - x_hat).pow(2).sum() / total)


def firing_rates(z: Any, threshold: float = 0.0) -> np.ndarray:
    """Per latent, the fraction of tokens with ``|z| > threshold``, shape ``(width,)``."""
    z = _codes(z)
    return (z.abs() > check_float(threshold, "threshold", low=0.0)).double().mean(0).cpu().numpy()


def angular_variance(x: Any, z: Any, dead_value: float = 1.0) -> np.ndarray:
    """Per latent ``j``, ``AV_j = 1 - || mean over tokens with z_j > 0 of x / ||x|| ||``, shape ``(width,)``.

    0 for a latent whose inputs all point one way, larger the more their directions spread. A latent that never
    fires gets ``dead_value`` (the official code's 1; pass ``float("nan")`` to mark it instead)."""
    x = _as_tensor(x, "x", ndim=2).detach().double()
    z = _as_tensor(z, "z", ndim=2).detach()
    if z.shape[0] != x.shape[0]:
        raise ValueError(f"z must have one row per row of x ({x.shape[0]}), got {z.shape[0]}")
    if not isinstance(dead_value, numbers.Real) or isinstance(dead_value, bool):
        raise TypeError(f"dead_value must be a float, got {type(dead_value).__name__}")
    if math.isinf(dead_value):
        raise ValueError(f"dead_value must be a finite number or NaN, got {dead_value}")
    xn = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    fire = (z > 0).double().to(x.device)
    counts = fire.sum(0)
    mean = (fire.T @ xn) / counts.clamp_min(1)[:, None]
    av = (1 - mean.norm(dim=1)).cpu().numpy()
    av[counts.cpu().numpy() == 0] = float(dead_value)
    return av


def _labels(labels: Any, n: int) -> np.ndarray:
    if torch.is_tensor(labels):
        labels = labels.detach().cpu().numpy()
    if not isinstance(labels, np.ndarray):
        raise TypeError(f"labels must be a numpy array or tensor of shape (n, n_features), got {type(labels).__name__}")
    if labels.ndim == 1:
        labels = labels[:, None]
    if labels.ndim != 2 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n}, n_features), got {labels.shape}")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("labels must be binary (0/1 or bool)")
    return labels.astype(bool)


def feature_latent_corr(z: Any, labels: Any) -> np.ndarray:
    """Pearson correlation of each latent's activation with each binary feature label, shape ``(n_features, width)``
    (0 where a latent or a label is constant)."""
    z = _codes(z).double().cpu().numpy()
    y = _labels(labels, z.shape[0]).astype(float)
    zc, yc = z - z.mean(0), y - y.mean(0)
    num = yc.T @ zc / z.shape[0]
    den = np.outer(yc.std(0), zc.std(0))
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def absorption(z: Any, labels: Any, n_aux: int = 5) -> np.ndarray:
    """Per feature, the absorption rate of the LocA-SAE code: rank latents by ``|corr|`` with the feature's label
    (:func:`feature_latent_corr`); on the tokens where the feature is present, the fraction on which the top latent
    is off (``z <= 0``) while one of the next ``n_aux`` is on. Shape ``(n_features,)``; NaN for a feature never
    present."""
    zt = _codes(z)
    y = _labels(labels, zt.shape[0])
    n_aux = check_int(n_aux, "n_aux", low=1)
    if n_aux + 1 > zt.shape[1]:
        raise ValueError(f"n_aux must be < width={zt.shape[1]}, got {n_aux}")
    on = (zt > 0).cpu().numpy()
    order = np.argsort(-np.abs(feature_latent_corr(zt, y)), axis=1, kind="stable")
    out = np.full(y.shape[1], np.nan)
    for f in range(y.shape[1]):
        pos = y[:, f]
        if pos.any():
            main, aux = order[f, 0], order[f, 1 : 1 + n_aux]
            out[f] = float((~on[pos, main] & on[pos][:, aux].any(1)).mean())
    return out


def k_sparse_probe_f1(z: Any, labels: Any, ks: Any = (1, 2)) -> np.ndarray:
    """Per feature and per ``k`` in ``ks``, the F1 of a logistic-regression probe on the ``k`` latents most correlated
    with the feature's label (columns z-scored; balanced class weights; fitted and scored on the same tokens, as in the
    LocA-SAE code). Shape ``(n_features, len(ks))``; NaN for a label that is constant."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    zt = _codes(z)
    y = _labels(labels, zt.shape[0])
    if isinstance(ks, (str, bytes)) or not hasattr(ks, "__iter__"):
        raise TypeError(f"ks must be a sequence of ints, got {type(ks).__name__}")
    ks = tuple(check_int(k, "ks", low=1, high=zt.shape[1]) for k in ks)
    if not ks:
        raise ValueError("ks must name at least one k")
    zn = zt.double().cpu().numpy()
    zs = (zn - zn.mean(0)) / (zn.std(0) + 1e-6)
    order = np.argsort(-np.abs(feature_latent_corr(zt, y)), axis=1, kind="stable")
    out = np.full((y.shape[1], len(ks)), np.nan)
    for f in range(y.shape[1]):
        if y[:, f].all() or not y[:, f].any():
            continue
        for i, k in enumerate(ks):
            feats = zs[:, order[f, :k]]
            clf = LogisticRegression(max_iter=1000, solver="liblinear", class_weight="balanced")
            clf.fit(feats, y[:, f])
            out[f, i] = f1_score(y[:, f], clf.predict(feats))
    return out


def splitting(z: Any, labels: Any) -> np.ndarray:
    """Per feature, ``F1@2 - F1@1`` of :func:`k_sparse_probe_f1`: how much a second latent adds to the best one
    (large when the feature is split across latents). Shape ``(n_features,)``."""
    f1 = k_sparse_probe_f1(z, labels, ks=(1, 2))
    return f1[:, 1] - f1[:, 0]
