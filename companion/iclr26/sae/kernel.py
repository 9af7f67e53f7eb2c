"""The k-sparse fast path of a TopK SAE: top-k selection in cache-sized chunks and a custom autograd function
that decodes and back-propagates from the k selected latents alone (the math of the dense reference)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = []


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
