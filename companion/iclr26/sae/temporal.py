"""Temporal Feature Analysis (Lubana et al.; the ``temporal_sae`` chapter): :class:`TemporalSAE`, whose code splits
into a predictable part (attention over the past codes, :class:`CodeAttention`) and a novel part, as the official
code defines it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.sae._validation import _as_tensor
from iclr26.sae.dictionary import _dense_code, _topk_relu
from iclr26.sae.kernel import _TopKSparseCode
from iclr26.validate import as_bool, as_float, as_int

__all__ = ["CodeAttention", "TemporalSAE"]


class CodeAttention(nn.Module):
    """One causal multi-head attention layer in code space (the official ``ManualAttention``).

    Queries come from the current tokens' codes (``target``), keys and values from the context codes (``ctx``);
    position ``t`` attends to context positions ``0..t``. ``bottleneck_factor`` shrinks the query/key width.
    Weights start with rows of norm ``1/sqrt(head dim)`` (queries, keys, values) and ``1/sqrt(width)`` (output),
    as in the official code.
    """

    def __init__(self, width: int, n_heads: int = 4, bottleneck_factor: int = 1) -> None:
        super().__init__()
        width = as_int(width, "width", low=1)
        n_heads = as_int(n_heads, "n_heads", low=1)
        bottleneck_factor = as_int(bottleneck_factor, "bottleneck_factor", low=1)
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
        self.d_in = as_int(d_in, "d_in", low=1)
        self.width = as_int(width, "width", low=1)
        if novel not in ("topk", "relu", "nullify"):
            raise ValueError(f"novel must be 'topk', 'relu' or 'nullify', got {novel!r}")
        if novel == "topk":
            if k is None:
                raise ValueError("k must be given when novel='topk'")
            k = as_int(k, "k", low=1)
            if k > self.width:
                raise ValueError(f"k must be <= width={self.width}, got {k}")
        fast = as_bool(fast, "fast")
        self.scaling_factor = as_float(scaling_factor, "scaling_factor", 0.0, low_open=True)
        self.k, self.novel, self.fast = k, novel, fast
        self.lam = 1.0 / (4 * self.d_in)
        self.eps = 1e-6
        n_attn_layers = as_int(n_attn_layers, "n_attn_layers", low=1)
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
        return_pattern = as_bool(return_pattern, "return_pattern")
        kval = self.k if k is None else as_int(k, "k", low=1)
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
        gamma = as_float(gamma, "gamma", low=0.0)
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
