"""A tiny transformer with named hook points.

minGPT-style: one config dataclass, one model, forward passes that read like the math. Every intermediate that
interpretability work looks at passes through a named :class:`HookPoint` (TransformerLens-style names)::

    cfg = TransformerConfig(vocab_size=113, n_ctx=3, d_model=128, n_heads=4, attn_alpha=0.0, layernorm=False)
    model = TinyTransformer(cfg)
    logits = model(tokens)                                   # (batch, seq) -> (batch, seq, vocab)
    logits = model(embeds=x)                                 # (batch, seq, d_model), skipping the token embedding
    last = model(tokens, last_only=True)                     # (batch, 1, vocab): read-out position only, less work
    logits, cache = model.run_with_cache(tokens)             # cache["blocks.0.mlp.pre"]: (batch, seq, d_mlp)
    with model.hooks({"blocks.0.mlp.post": lambda t, name: 0 * t}):   # patch / ablate / steer
        ablated = model(tokens)

The hook API (``hooks``, ``run_with_cache``, ``hook_names``, ``is_hooked``) is :class:`iclr26.hooks.HookedModule`'s.

Hook names: ``embed``, ``pos_embed``, ``blocks.{l}.resid_pre``, ``blocks.{l}.attn.scores`` (b, h, q, k; scaled,
masked, before the softmax), ``blocks.{l}.attn.pattern`` (b, h, q, k; after the α-mixing), ``blocks.{l}.attn.head_out``
(b, s, h, d_model; what each head writes into the residual stream), ``blocks.{l}.attn_out``, ``blocks.{l}.resid_mid``,
``blocks.{l}.mlp.pre``, ``blocks.{l}.mlp.post`` (b, s, d_mlp), ``blocks.{l}.mlp_out``, ``blocks.{l}.resid_post``,
``final_resid``.

Attention mixes a learned pattern with a constant one (the "Clock and Pizza" knob of Zhong et al., 2023)::

    A = α · softmax(Q Kᵀ / √d_head) + (1 − α) · U

where U is uniform over the allowed keys (``attn_uniform="mean"``, rows sum to 1) or the all-ones matrix of Zhong et
al.'s code (``attn_uniform="ones"``, allowed entries equal 1). α = 1 is ordinary attention; α = 0 is constant attention.

**Two ways to compute attention, one result.** While no hook reads or patches a layer's ``attn.scores``,
``attn.pattern`` or ``attn.head_out``, that layer takes the fast path: ``A V`` is computed as
``α · F.scaled_dot_product_attention(Q, K, V) + (1 − α) · U V`` (a fused kernel; no (q, k) pattern and no per-head
(b, s, h, d_model) tensor is built; α = 0 skips the softmax part, Q and K altogether) and the heads are mixed by ``W_O``
in one matrix product. Otherwise, or with ``TransformerConfig(fast_attention=False)``, the explicit path builds every
intermediate above. Both give the same numbers up to floating-point rounding (the sums run in another order).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.hooks import HookedModule, HookPoint
from iclr26.validate import as_bool, as_device, as_float, as_int, float_tensor, one_of, token_tensor

__all__ = [
    "TransformerConfig",
    "TinyTransformer",
    "Attention",
    "MLPBlock",
    "Block",
    "ACTIVATIONS",
    "prefix_lm_mask",
    "TinyVLM",
]

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "gelu": F.gelu}


# ------------------------------------------------------------------------------------------------ config
@dataclass
class TransformerConfig:
    """Sizes and switches of :class:`TinyTransformer`.

    A field of the wrong type raises ``TypeError``, a bad value ``ValueError``, both naming the field. Integer fields
    accept any integer type (``np.int64`` from a NumPy grid) and are stored as ``int``.
    """

    vocab_size: int
    n_ctx: int
    d_model: int = 128
    n_layers: int = 1
    n_heads: int = 4
    d_head: int | None = None  # default d_model // n_heads
    d_mlp: int = 512
    act: str = "relu"  # "relu" | "gelu"
    attn_alpha: float = 1.0  # A = alpha * softmax + (1 - alpha) * uniform
    layernorm: bool = True  # False: no LayerNorm anywhere (the Clock/Pizza setting)
    causal: bool = True  # False: every query sees every key
    positional: str = "learned"  # "learned" | "none"
    tie_embeddings: bool = False
    unembed_bias: bool = False
    # --- optional extras (defaults keep the behaviour above) ---
    attn_uniform: str = "mean"  # "mean": U rows sum to 1 over allowed keys; "ones": allowed entries = 1 (Zhong)
    attn_bias: bool = False  # biases on W_Q, W_K, W_V, W_O
    init_std: float | None = None  # None: N(0, 1/fan_in) for every matrix; a float: N(0, init_std²) everywhere
    # False: always the explicit attention path (same numbers up to rounding; slower). A built model reads it at
    # every forward pass, so `model.cfg.fast_attention = False` switches it over.
    fast_attention: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_ctx", "d_model", "n_layers", "n_heads", "d_mlp"):
            setattr(self, name, as_int(getattr(self, name), f"TransformerConfig.{name}", low=1))
        if self.d_head is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"TransformerConfig.d_head: d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                    "set d_head explicitly"
                )
            self.d_head = self.d_model // self.n_heads
        self.d_head = as_int(self.d_head, "TransformerConfig.d_head", low=1)
        one_of(self.act, "TransformerConfig.act", sorted(ACTIVATIONS))
        self.attn_alpha = as_float(self.attn_alpha, "TransformerConfig.attn_alpha", 0.0, 1.0)
        one_of(self.positional, "TransformerConfig.positional", ("learned", "none"))
        one_of(self.attn_uniform, "TransformerConfig.attn_uniform", ("mean", "ones"))
        for name in ("layernorm", "causal", "tie_embeddings", "unembed_bias", "attn_bias", "fast_attention"):
            setattr(self, name, as_bool(getattr(self, name), f"TransformerConfig.{name}"))
        if self.init_std is not None:
            self.init_std = as_float(self.init_std, "TransformerConfig.init_std", 0.0, low_open=True)


def _init_(weight: torch.Tensor, fan_in: int, std: float | None) -> None:
    nn.init.normal_(weight, mean=0.0, std=std if std is not None else 1.0 / math.sqrt(fan_in))


def _in_functorch_transform() -> bool:
    """True inside ``torch.func.vmap`` / ``grad`` & co (private torch API; False if it moved)."""
    peek = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None)
    return peek is not None and peek() is not None


def sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
) -> torch.Tensor:
    """``softmax(Q Kᵀ / √d, masked) V`` with ``F.scaled_dot_product_attention``.

    Inside a ``torch.func`` transform (``vmap`` of an ensemble) it is spelled out in plain tensor operations instead:
    the fused CPU kernel has no batching rule there, and torch would loop over the batch.
    """
    if not _in_functorch_transform():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if is_causal:
        attn_mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def prefix_lm_mask(seq: int, prefix_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Bool (seq, seq), True where query q may attend to key k: causal, except that the first ``prefix_len``
    positions (a VLM's image patches) form a bidirectional prefix — ``k <= q or k < prefix_len``."""
    seq = as_int(seq, "seq", low=1)
    prefix_len = as_int(prefix_len, "prefix_len", low=0, high=seq)
    idx = torch.arange(seq, device=None if device is None else as_device(device))
    return (idx[None, :] <= idx[:, None]) | (idx[None, :] < prefix_len)


# ------------------------------------------------------------------------------------------------ blocks
def _check_block(cfg: Any, layer: Any) -> int:
    if not isinstance(cfg, TransformerConfig):
        raise TypeError(f"cfg must be a TransformerConfig, got {type(cfg).__name__}")
    return as_int(layer, "layer", low=0)


class Attention(nn.Module):
    """Multi-head attention with α-mixing between the softmax pattern and a constant (uniform) pattern."""

    def __init__(self, cfg: TransformerConfig, layer: int) -> None:
        layer = _check_block(cfg, layer)
        super().__init__()
        self.cfg = cfg
        h, dh, d = cfg.n_heads, cfg.d_head, cfg.d_model
        self.W_Q = nn.Linear(d, h * dh, bias=cfg.attn_bias)
        self.W_K = nn.Linear(d, h * dh, bias=cfg.attn_bias)
        self.W_V = nn.Linear(d, h * dh, bias=cfg.attn_bias)
        self.W_O = nn.Linear(h * dh, d, bias=cfg.attn_bias)
        for lin, fan_in in ((self.W_Q, d), (self.W_K, d), (self.W_V, d), (self.W_O, d)):
            _init_(lin.weight, fan_in, cfg.init_std)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
        p = f"blocks.{layer}.attn."
        self.hook_scores = HookPoint(p + "scores")
        self.hook_pattern = HookPoint(p + "pattern")
        self.hook_head_out = HookPoint(p + "head_out")

    @property
    def explicit(self) -> bool:
        """Whether the next forward pass takes the explicit path: forced by the config, or a hook wants one of the
        scores, the pattern or the per-head outputs."""
        return not self.cfg.fast_attention or (
            self.hook_scores.active or self.hook_pattern.active or self.hook_head_out.active
        )

    def forward(
        self, x: torch.Tensor, allowed: torch.Tensor, last_only: bool = False, allowed_kind: str = "general"
    ) -> torch.Tensor:
        """x: (b, s, d_model); allowed: bool (b or 1, 1, s, s), True where query q may attend to key k.

        ``last_only``: only the last position queries (every position is still a key): returns (b, 1, d_model).
        ``allowed_kind``: what ``allowed`` is, so the fast path can skip the mask: ``"causal"`` (exactly the causal
        mask), ``"full"`` (all True) or ``"general"`` (anything; always correct).
        """
        one_of(allowed_kind, "allowed_kind", ("general", "causal", "full"))
        b, s, _ = x.shape
        h, dh = self.cfg.n_heads, self.cfg.d_head
        xq = x[:, -1:].contiguous() if last_only else x
        if last_only:
            allowed = allowed[..., -1:, :]
            if allowed_kind == "causal":  # the last query sees every key
                allowed_kind = "full"
        sq = xq.shape[1]
        if not self.explicit:
            return self._fast(xq, x, allowed, allowed_kind)
        # (Q, K, V in this order: autograd sums their gradients into x in reverse order, so the order fixes the bits)
        q = self.W_Q(xq).view(b, sq, h, dh).transpose(1, 2)  # (b, h, sq, dh)
        k = self.W_K(x).view(b, s, h, dh).transpose(1, 2)  # (b, h, s, dh)
        v = self.W_V(x).view(b, s, h, dh).transpose(1, 2)

        scores = (q @ k.transpose(-2, -1)) / math.sqrt(dh)  # (b, h, q, k)
        scores = self.hook_scores(scores.masked_fill(~allowed, float("-inf")))
        alpha = self.cfg.attn_alpha
        uniform = allowed.to(x.dtype).expand(b, h, sq, s)
        if self.cfg.attn_uniform == "mean":
            uniform = uniform / uniform.sum(-1, keepdim=True).clamp_min(1.0)
        if alpha == 1.0:
            pattern = torch.softmax(scores, dim=-1)
        elif alpha == 0.0:
            pattern = uniform
        else:
            pattern = alpha * torch.softmax(scores, dim=-1) + (1.0 - alpha) * uniform
        pattern = self.hook_pattern(torch.nan_to_num(pattern))  # a query with no allowed key reads nothing

        z = pattern @ v  # (b, h, q, dh)
        W_O = self.W_O.weight.view(self.cfg.d_model, h, dh)  # (d_model, h, dh)
        head_out = self.hook_head_out(torch.einsum("bhqe,dhe->bqhd", z, W_O))  # (b, sq, h, d_model)
        out = head_out.sum(dim=2)
        if self.W_O.bias is not None:
            out = out + self.W_O.bias
        return out

    def _fast(self, xq: torch.Tensor, x: torch.Tensor, allowed: torch.Tensor, kind: str) -> torch.Tensor:
        """``W_O(α · SDPA(Q, K, V) + (1 − α) · U V)``: no pattern, no per-head output tensor."""
        b, sq, _ = xq.shape
        s = x.shape[1]
        h, dh = self.cfg.n_heads, self.cfg.d_head
        alpha = self.cfg.attn_alpha
        z = None
        if alpha > 0.0:
            q = self.W_Q(xq).view(b, sq, h, dh).transpose(1, 2)
            k = self.W_K(x).view(b, s, h, dh).transpose(1, 2)
        v = self.W_V(x).view(b, s, h, dh).transpose(1, 2)
        if alpha > 0.0:
            if kind == "full":
                z = sdpa(q, k, v)
            elif kind == "causal":
                z = sdpa(q, k, v, is_causal=True)
            else:
                has_key = allowed.any(-1, keepdim=True)  # (b or 1, 1, sq, 1)
                # a query with no allowed key may look everywhere (no NaN, forward or backward), then reads nothing
                z = sdpa(q, k, v, attn_mask=allowed | ~has_key)
                z = z.masked_fill(~has_key, 0.0)
        if alpha < 1.0:
            u = self._uniform_times(v, allowed, kind, sq)
            z = u if z is None else alpha * z + (1.0 - alpha) * u
        return self.W_O(z.transpose(1, 2).reshape(b, sq, h * dh))

    def _uniform_times(self, v: torch.Tensor, allowed: torch.Tensor, kind: str, sq: int) -> torch.Tensor:
        """``U V`` for the constant pattern U (rows summing to 1, or ones, over the allowed keys): (b, h, sq, dh)."""
        mean = self.cfg.attn_uniform == "mean"
        b, h, s, dh = v.shape
        if kind == "full":
            uv = v.mean(-2, keepdim=True) if mean else v.sum(-2, keepdim=True)
            return uv.expand(b, h, sq, dh)
        if kind == "causal":  # sq == s here: query i averages (or sums) keys 0..i
            uv = v.cumsum(-2)
            if mean:
                uv = uv / torch.arange(1, s + 1, device=v.device, dtype=v.dtype).unsqueeze(-1)
            return uv
        u = allowed.to(v.dtype)
        if mean:
            u = u / u.sum(-1, keepdim=True).clamp_min(1.0)
        return u @ v


class MLPBlock(nn.Module):
    """The transformer's feed-forward layer: W_out · act(W_in · x + b_in) + b_out."""

    def __init__(self, cfg: TransformerConfig, layer: int) -> None:
        layer = _check_block(cfg, layer)
        super().__init__()
        self.W_in = nn.Linear(cfg.d_model, cfg.d_mlp)
        self.W_out = nn.Linear(cfg.d_mlp, cfg.d_model)
        _init_(self.W_in.weight, cfg.d_model, cfg.init_std)
        _init_(self.W_out.weight, cfg.d_mlp, cfg.init_std)
        nn.init.zeros_(self.W_in.bias)
        nn.init.zeros_(self.W_out.bias)
        self.act = ACTIVATIONS[cfg.act]
        self.hook_pre = HookPoint(f"blocks.{layer}.mlp.pre")
        self.hook_post = HookPoint(f"blocks.{layer}.mlp.post")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.hook_pre(self.W_in(x))
        post = self.hook_post(self.act(pre))
        return self.W_out(post)


class Block(nn.Module):
    """Pre-LN residual block: x + attn(ln1(x)), then + mlp(ln2(x)). LayerNorms are identities when switched off."""

    def __init__(self, cfg: TransformerConfig, layer: int) -> None:
        layer = _check_block(cfg, layer)
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model) if cfg.layernorm else nn.Identity()
        self.ln2 = nn.LayerNorm(cfg.d_model) if cfg.layernorm else nn.Identity()
        self.attn = Attention(cfg, layer)
        self.mlp = MLPBlock(cfg, layer)
        p = f"blocks.{layer}."
        self.hook_resid_pre = HookPoint(p + "resid_pre")
        self.hook_attn_out = HookPoint(p + "attn_out")
        self.hook_resid_mid = HookPoint(p + "resid_mid")
        self.hook_mlp_out = HookPoint(p + "mlp_out")
        self.hook_resid_post = HookPoint(p + "resid_post")

    def forward(
        self, x: torch.Tensor, allowed: torch.Tensor, last_only: bool = False, allowed_kind: str = "general"
    ) -> torch.Tensor:
        """``last_only``: compute the block's output at the last position only, (b, 1, d_model).

        ``allowed_kind``: see :meth:`Attention.forward`."""
        x = self.hook_resid_pre(x)
        attn_out = self.hook_attn_out(self.attn(self.ln1(x), allowed, last_only, allowed_kind))
        x = self.hook_resid_mid((x[:, -1:] if last_only else x) + attn_out)
        x = self.hook_resid_post(x + self.hook_mlp_out(self.mlp(self.ln2(x))))
        return x


# ------------------------------------------------------------------------------------------------ model
class TinyTransformer(HookedModule):
    """A small decoder (or encoder, ``causal=False``) transformer with named hook points; see the module docstring."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(cfg, TransformerConfig):
            raise TypeError(f"cfg must be a TransformerConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.W_E = nn.Embedding(cfg.vocab_size, cfg.d_model)
        _init_(self.W_E.weight, cfg.d_model, cfg.init_std)
        if cfg.positional == "learned":
            self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model))
            _init_(self.W_pos, cfg.d_model, cfg.init_std)
        else:
            self.register_parameter("W_pos", None)
        self.blocks = nn.ModuleList([Block(cfg, layer) for layer in range(cfg.n_layers)])
        self.ln_final = nn.LayerNorm(cfg.d_model) if cfg.layernorm else nn.Identity()
        self.W_U = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.unembed_bias)
        if cfg.tie_embeddings:
            self.W_U.weight = self.W_E.weight
        else:
            _init_(self.W_U.weight, cfg.d_model, cfg.init_std)
        if self.W_U.bias is not None:
            nn.init.zeros_(self.W_U.bias)
        self.hook_embed = HookPoint("embed")
        self.hook_pos_embed = HookPoint("pos_embed")
        self.hook_final_resid = HookPoint("final_resid")
        self.register_buffer("causal_mask", torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool)), False)

    # -------------------------------------------------------------------------------------------- hooks API
    def _hook_order(self) -> list[str]:
        """All hook names, in the order a forward pass reaches them (the modules are registered in another)."""
        order = ["embed", "pos_embed"]
        for layer in range(self.cfg.n_layers):
            p = f"blocks.{layer}."
            order += [
                p + n
                for n in (
                    "resid_pre",
                    "attn.scores",
                    "attn.pattern",
                    "attn.head_out",
                    "attn_out",
                    "resid_mid",
                    "mlp.pre",
                    "mlp.post",
                    "mlp_out",
                    "resid_post",
                )
            ]
        return order + ["final_resid"]

    def hook_axes(self, name: str) -> tuple[int, int | None]:
        """Position and head axes for activation patching: ``attn.scores``/``attn.pattern`` are (b, h, q, k), so
        positions are queries (axis 2) and heads axis 1; ``attn.head_out`` is (b, s, h, d): axes 1 and 2."""
        self._check_names([name], "name")
        if name.endswith(("attn.scores", "attn.pattern")):
            return 2, 1
        if name.endswith("attn.head_out"):
            return 1, 2
        return 1, None

    # -------------------------------------------------------------------------------------------- forward
    def forward(
        self,
        tokens: torch.Tensor | None = None,
        *,
        embeds: torch.Tensor | None = None,
        prefix_embeds: torch.Tensor | None = None,
        prefix_len: int | None = None,
        attn_mask: torch.Tensor | None = None,
        last_only: bool = False,
        position_ids: torch.Tensor | None = None,
        token_callback: Callable[..., Any] | None = None,
    ) -> torch.Tensor:
        """Logits (batch, seq, vocab) from ``tokens`` (batch, seq) or from input ``embeds`` (batch, seq, d_model).

        ``attn_mask``: optional bool (seq, seq) or (batch, seq, seq), True where a query may attend to a key; it is
        combined (AND) with the causal mask when ``cfg.causal``.

        ``prefix_embeds``: optional float (batch, P, d_model) placed before the token (or ``embeds``) embeddings, so
        that one sequence holds, say, a VLM's image patches and its words. ``prefix_len`` (default: P when
        ``prefix_embeds`` is given, else 0) makes the first ``prefix_len`` positions a bidirectional prefix: they see
        each other, every later position sees all of them, and the rest stays causal (:func:`prefix_lm_mask`; only
        matters when ``cfg.causal``). The ``embed`` hook sees the whole sequence, and learned positions
        (``W_pos``) are added over the whole sequence, prefix included.

        ``last_only=True`` returns the logits at the last position only, (batch, 1, vocab), and skips the work no
        other output needs: the final block computes its attention query, MLP and unembedding at the last position
        alone (earlier blocks run in full). The values equal ``forward(...)[:, -1:]``; hooks in the final block and
        ``final_resid`` then see a sequence length of 1.

        ``position_ids``: optional long (seq,) or (batch, seq), the row of ``W_pos`` each position gets (default
        ``0 … seq-1``), each in ``[0, n_ctx)``; the attention mask still follows the order in the sequence.

        ``token_callback``: optional ``fn(layer, x, position_ids) -> (x, position_ids)`` (or ``None``: unchanged),
        called before every block ``layer = 0 … n_layers-1`` with the residual stream ``x`` (batch, s, d_model) and
        the position ids (batch, s) of its tokens. It may insert tokens (their embeddings, position embedding
        included, are the caller's), keep some or drop some; the mask is rebuilt for the new length before the
        block (causal in sequence order, or full when not ``cfg.causal``), so it cannot be combined with
        ``attn_mask`` or a bidirectional prefix (``prefix_len`` > 1). Without ``position_ids`` and
        ``token_callback`` the forward pass is the plain one, bit for bit.
        """
        last_only = as_bool(last_only, "last_only")
        cfg = self.cfg
        if (tokens is None) == (embeds is None):
            raise ValueError("pass exactly one of tokens (batch, seq) or embeds (batch, seq, d_model)")
        if tokens is not None:
            if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
                got = getattr(tokens, "dtype", type(tokens))
                raise TypeError(f"tokens must be an integer (long) tensor, got {got}")
            if tokens.dim() != 2:
                raise ValueError(f"tokens must have shape (batch, seq), got {tuple(tokens.shape)}")
            token_tensor(tokens, "tokens", cfg.vocab_size, empty_ok=True)
            x = self.W_E(tokens)
        else:
            if not isinstance(embeds, torch.Tensor) or not embeds.is_floating_point():
                raise TypeError("embeds must be a floating-point tensor of shape (batch, seq, d_model)")
            if embeds.dim() != 3 or embeds.shape[-1] != cfg.d_model:
                raise ValueError(f"embeds must have shape (batch, seq, {cfg.d_model}), got {tuple(embeds.shape)}")
            x = float_tensor(embeds, "embeds", finite=False, dtype=self.W_E.weight.dtype)
        if prefix_embeds is not None:
            if not isinstance(prefix_embeds, torch.Tensor) or not prefix_embeds.is_floating_point():
                raise TypeError("prefix_embeds must be a floating-point tensor of shape (batch, prefix, d_model)")
            if (
                prefix_embeds.dim() != 3
                or prefix_embeds.shape[-1] != cfg.d_model
                or prefix_embeds.shape[0] != x.shape[0]
            ):
                got = tuple(prefix_embeds.shape)
                raise ValueError(f"prefix_embeds must have shape ({x.shape[0]}, prefix, {cfg.d_model}), got {got}")
            x = torch.cat([prefix_embeds.to(x.dtype), x], dim=1)
        x = self.hook_embed(x)
        b, s = x.shape[:2]
        if s > cfg.n_ctx:
            what = "tokens" if tokens is not None else "embeds"
            what += " and prefix_embeds" if prefix_embeds is not None else ""
            raise ValueError(f"{what}: sequence length {s} exceeds n_ctx={cfg.n_ctx}")
        if position_ids is not None or token_callback is not None:
            position_ids = self._position_ids(position_ids, b, s, x.device)
        if self.W_pos is not None:
            if position_ids is None:
                x = x + self.hook_pos_embed(self.W_pos[:s].unsqueeze(0).expand(b, s, cfg.d_model))
            else:
                x = x + self.hook_pos_embed(self.W_pos[position_ids])

        if prefix_len is None:
            prefix_len = 0 if prefix_embeds is None else prefix_embeds.shape[1]
        prefix_len = as_int(prefix_len, "prefix_len", low=0, high=s)
        if token_callback is not None:
            if not callable(token_callback):
                raise TypeError(f"token_callback must be callable, got {type(token_callback).__name__}")
            if attn_mask is not None or (cfg.causal and prefix_len > 1):
                raise ValueError(
                    "token_callback rebuilds the mask at every layer: it cannot be combined with attn_mask or "
                    "prefix_len > 1"
                )
        allowed, kind = self._plain_mask(s, x.device)
        if cfg.causal and prefix_len > 1:
            allowed = prefix_lm_mask(s, prefix_len, device=x.device)
            kind = "general"
        if attn_mask is not None:
            kind = "general"
            if not isinstance(attn_mask, torch.Tensor) or attn_mask.dtype != torch.bool:
                raise TypeError("attn_mask must be a bool tensor (seq, seq) or (batch, seq, seq)")
            if attn_mask.shape[-2:] != (s, s) or attn_mask.dim() not in (2, 3):
                raise ValueError(
                    f"attn_mask must have shape ({s}, {s}) or (batch, {s}, {s}), got {tuple(attn_mask.shape)}"
                )
            allowed = allowed & attn_mask
        allowed = allowed.view(-1, 1, s, s) if allowed.dim() == 3 else allowed.view(1, 1, s, s)

        for i, block in enumerate(self.blocks):
            if token_callback is not None:
                x, position_ids = self._call_back(token_callback, i, x, position_ids)
                s = x.shape[1]
                allowed, kind = self._plain_mask(s, x.device)
                allowed = allowed.view(1, 1, s, s)
            x = block(x, allowed, last_only and i == len(self.blocks) - 1, kind)
        x = self.hook_final_resid(self.ln_final(x))
        return self.W_U(x)

    def _plain_mask(self, s: int, device: torch.device) -> tuple[torch.Tensor, str]:
        """The (s, s) mask of the config (causal, or full when not ``cfg.causal``) and its kind, which lets the fast
        attention path skip the mask."""
        if self.cfg.causal:
            return self.causal_mask[:s, :s].to(device), "causal"
        return torch.ones(s, s, dtype=torch.bool, device=device), "full"

    def _position_ids(self, position_ids: Any, b: int, s: int, device: torch.device) -> torch.Tensor:
        """``position_ids`` checked and expanded to (b, s) long; ``0 … s-1`` when ``None``."""
        if position_ids is None:
            return torch.arange(s, device=device).unsqueeze(0).expand(b, s)
        if not isinstance(position_ids, torch.Tensor) or position_ids.dtype not in (torch.int64, torch.int32):
            got = getattr(position_ids, "dtype", type(position_ids).__name__)
            raise TypeError(f"position_ids must be an integer (long) tensor (seq,) or (batch, seq), got {got}")
        if position_ids.dim() == 1:
            position_ids = position_ids.unsqueeze(0)
        if position_ids.dim() != 2 or position_ids.shape[1] != s or position_ids.shape[0] not in (1, b):
            raise ValueError(f"position_ids must have shape ({s},) or ({b}, {s}), got {tuple(position_ids.shape)}")
        if position_ids.numel() and (int(position_ids.min()) < 0 or int(position_ids.max()) >= self.cfg.n_ctx):
            raise ValueError(f"position_ids must lie in [0, n_ctx={self.cfg.n_ctx})")
        return position_ids.long().to(device).expand(b, s)

    def _call_back(
        self, fn: Callable[..., Any], layer: int, x: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run ``token_callback`` before block ``layer`` and check what it returns."""
        out = fn(layer, x, position_ids)
        if out is None:
            return x, position_ids
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError("token_callback must return (x, position_ids) or None")
        new_x, new_pos = out
        if not isinstance(new_x, torch.Tensor) or not new_x.is_floating_point():
            raise TypeError("token_callback must return x as a floating-point tensor (batch, seq, d_model)")
        if new_x.dim() != 3 or new_x.shape[0] != x.shape[0] or new_x.shape[2] != x.shape[2] or new_x.shape[1] < 1:
            raise ValueError(
                f"token_callback returned x of shape {tuple(new_x.shape)}; expected ({x.shape[0]}, s >= 1, "
                f"{x.shape[2]})"
            )
        if new_x.shape[1] > self.cfg.n_ctx:
            raise ValueError(f"token_callback returned {new_x.shape[1]} tokens, more than n_ctx={self.cfg.n_ctx}")
        if not isinstance(new_pos, torch.Tensor) or new_pos.dtype not in (torch.int64, torch.int32):
            raise TypeError("token_callback must return position_ids as an integer tensor (batch, seq)")
        if new_pos.shape != new_x.shape[:2]:
            raise ValueError(
                f"token_callback returned position_ids of shape {tuple(new_pos.shape)}; expected "
                f"{tuple(new_x.shape[:2])}"
            )
        return new_x, new_pos.long()


# ------------------------------------------------------------------------------------------------ VLM
class TinyVLM(HookedModule):
    """A tiny vision-language model: image patches, linearly embedded, as a bidirectional prefix before the words.

    ``TinyVLM(cfg, patch_dim, n_patches)`` wraps a :class:`TinyTransformer` (``self.lm``) whose ``cfg.n_ctx`` must
    hold ``n_patches`` plus the longest prompt. ``model(patches, tokens)`` embeds ``patches`` (batch, n_patches,
    patch_dim) with one linear map, prepends them to the word embeddings and runs the transformer with
    ``prefix_len=n_patches`` (patches see each other, every word sees every patch, words are causal). With
    ``cfg.positional="learned"`` the transformer's ``W_pos`` rows of the first ``n_patches`` positions are a learned
    position embedding of the patch grid (one vector per cell, not factorised into row and column). The hook names
    are the transformer's (``blocks.{l}.resid_post``, ...), with the patches at positions ``0 … n_patches-1``.
    """

    def __init__(self, cfg: TransformerConfig, patch_dim: int, n_patches: int) -> None:
        super().__init__()
        if not isinstance(cfg, TransformerConfig):
            raise TypeError(f"cfg must be a TransformerConfig, got {type(cfg).__name__}")
        self.patch_dim = as_int(patch_dim, "patch_dim", low=1)
        self.n_patches = as_int(n_patches, "n_patches", low=1)
        if cfg.n_ctx <= self.n_patches:
            raise ValueError(f"cfg.n_ctx={cfg.n_ctx} must exceed n_patches={self.n_patches} (room for the words)")
        self.cfg = cfg
        self.patch_embed = nn.Linear(self.patch_dim, cfg.d_model)
        _init_(self.patch_embed.weight, self.patch_dim, cfg.init_std)
        nn.init.zeros_(self.patch_embed.bias)
        self.lm = TinyTransformer(cfg)

    def _hook_order(self) -> list[str]:
        return self.lm._hook_order()

    def hook_axes(self, name: str) -> tuple[int, int | None]:
        return self.lm.hook_axes(name)

    def forward(self, patches: torch.Tensor, tokens: torch.Tensor, *, last_only: bool = False) -> torch.Tensor:
        """Logits (batch, n_patches + seq, vocab), or (batch, 1, vocab) with ``last_only``."""
        if not isinstance(patches, torch.Tensor) or not patches.is_floating_point():
            raise TypeError("patches must be a floating-point tensor (batch, n_patches, patch_dim)")
        if patches.dim() != 3 or patches.shape[1:] != (self.n_patches, self.patch_dim):
            raise ValueError(
                f"patches must have shape (batch, {self.n_patches}, {self.patch_dim}), got {tuple(patches.shape)}"
            )
        float_tensor(patches, "patches", finite=False, dtype=self.patch_embed.weight.dtype)
        return self.lm(tokens, prefix_embeds=self.patch_embed(patches), last_only=last_only)
