"""A tiny Diffusion Transformer (DiT, Peebles & Xie 2023) with a gate on every attention head.

    model = TinyDiT(img_size=8, patch=2, in_channels=1, dim=64, depth=4, heads=4)
    eps = model(x_k, k)                       # x_k: (B, C, H, W), k: (B,) timesteps (int or float)

    model = TinyDiT(img_size=16, patch=4, cond_dim=12)   # conditioned on a vector s (B, 12)
    eps = model(x_k, k, cond=s)               # c = t_mlp(emb(k)) + cond_mlp(s)

The pieces read as in the DiT paper: :func:`patchify` → linear patch embedding + fixed 2-D sin-cos positions;
:func:`timestep_embedding` → MLP → conditioning vector ``c`` (with ``cond_dim > 0``, plus an MLP of a condition
vector ``s``, as Patronus adds an MLP of its prototype similarities to the time embedding);
``depth`` :class:`DiTBlock` s with **adaLN-Zero**
(``c`` regresses shift/scale/gate of both sub-layers, initialised to zero so each block starts as the identity);
a final adaLN layer and :func:`unpatchify`.

Each :class:`GatedAttention` multiplies head ``h``'s output by ``gate[h]`` (a buffer, 1 by default) before the output
projection. Setting a gate to 0 removes that head exactly; :func:`gate_grads` makes the gates differentiable for one
backward pass so ``|∂L/∂ξ_h|`` gives a head-importance score (used for memorisation-reducing head pruning); with
``batch_size=B`` it gives every example of a batch its own gates, hence per-example gradients ``∂L(x_b)/∂ξ_h`` from
one backward pass (Michel et al. 2019 average their magnitudes, ``E_x |∂L(x)/∂ξ_h|``).

Named hook points (:class:`iclr26.hooks.HookedModule`): ``embed`` (B, N, dim: patch embedding plus positions),
``cond`` (B, dim: the conditioning vector c), and per block ``l``: ``blocks.{l}.attn.pattern`` (B, heads, N, N: the
softmax), ``blocks.{l}.attn.head_out`` (B, heads, N, head_dim: each head's output after its gate, before the output
projection), ``blocks.{l}.attn_out`` (B, N, dim: what the attention sub-layer adds to the residual stream, g₁·Attn),
``blocks.{l}.resid_mid``, ``blocks.{l}.mlp_out`` (g₂·MLP) and ``blocks.{l}.resid_post``::

    out, cache = model.run_with_cache(x_k, k, names=["blocks.1.attn.head_out"])
    cache["blocks.1.attn.head_out"][:, h]     # head h of layer 1 (all zeros when its gate is 0)

While neither ``attn.pattern`` nor ``attn.head_out`` of a layer is hooked, its attention runs as one fused
``F.scaled_dot_product_attention`` call (``TinyDiT(fast_attention=False)`` forces the explicit softmax; same numbers
up to rounding).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from iclr26.hooks import HookedModule, HookPoint
from iclr26.models.transformer import sdpa
from iclr26.validate import as_bool, as_float, as_int, float_tensor

__all__ = ["patchify", "unpatchify", "timestep_embedding", "GatedAttention", "DiTBlock", "TinyDiT", "gate_grads"]


def patchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """``(B, C, H, W)`` → ``(B, (H/p)(W/p), p·p·C)`` tokens, row-major over patches."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a (B, C, H, W) tensor, got {type(x).__name__}")
    if x.ndim != 4:
        raise ValueError(f"x must be a (B, C, H, W) tensor, got shape {tuple(x.shape)}")
    float_tensor(x, "x", finite=False)
    p = as_int(patch, "patch", low=1)
    B, C, H, W = x.shape  # noqa: N806
    if H % p or W % p:
        raise ValueError(f"patch={p} must divide the image size {H}×{W}")
    x = x.reshape(B, C, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // p) * (W // p), p * p * C)


def unpatchify(tokens: torch.Tensor, patch: int, channels: int, height: int, width: int) -> torch.Tensor:
    """Inverse of :func:`patchify`: ``(B, N, p·p·C)`` → ``(B, C, H, W)``."""
    p = as_int(patch, "patch", low=1)
    channels = as_int(channels, "channels", low=1)
    height = as_int(height, "height", low=1)
    width = as_int(width, "width", low=1)
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a (B, N, p·p·C) tensor, got {type(tokens).__name__}")
    float_tensor(tokens, "tokens", finite=False, empty_ok=tokens.ndim == 3 and tokens.shape[0] == 0)
    if tokens.ndim != 3:
        raise ValueError(f"tokens must be a (B, N, p·p·C) tensor, got shape {tuple(tokens.shape)}")
    hp, wp = height // p, width // p
    if tokens.shape[1] != hp * wp or tokens.shape[2] != p * p * channels:
        raise ValueError(f"tokens must have shape (B, {hp * wp}, {p * p * channels}), got {tuple(tokens.shape)}")
    x = tokens.reshape(tokens.shape[0], hp, wp, p, p, channels).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(tokens.shape[0], channels, height, width)


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embedding of (possibly fractional) timesteps ``t`` (shape ``(B,)``) → ``(B, dim)``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"t must be a 1-D tensor of timesteps, got {type(t).__name__}")
    if t.ndim != 1:
        raise ValueError(f"t must be a 1-D tensor of timesteps, got shape {tuple(t.shape)}")
    dim = as_int(dim, "dim", low=1)
    max_period = as_float(max_period, "max_period", 0.0, low_open=True)
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


def _sincos_2d(dim: int, grid: int) -> torch.Tensor:
    """Fixed 2-D sin-cos positional embedding, ``(grid², dim)`` (dim divisible by 4)."""
    if dim % 4:
        raise ValueError(f"dim must be divisible by 4 for 2-D sin-cos positions, got {dim}")
    q = dim // 4
    omega = 1.0 / 10000 ** (torch.arange(q, dtype=torch.float64) / q)
    axis = torch.arange(grid, dtype=torch.float64)
    ys, xs = torch.meshgrid(axis, axis, indexing="ij")
    out = []
    for pos in (ys.reshape(-1), xs.reshape(-1)):
        a = pos[:, None] * omega[None]
        out += [torch.sin(a), torch.cos(a)]
    return torch.cat(out, dim=1).float()


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale[:, None]) + shift[:, None]


class GatedAttention(nn.Module):
    """Multi-head self-attention whose per-head outputs are multiplied by ``gate`` (shape ``(heads,)``).

    Hook points ``blocks.{layer}.attn.pattern`` and ``blocks.{layer}.attn.head_out``; ``fast_attention``: use the
    fused ``F.scaled_dot_product_attention`` while neither is hooked (False: always the explicit softmax).
    """

    def __init__(self, dim: int, heads: int, *, layer: int = 0, fast_attention: bool = True) -> None:
        super().__init__()
        dim = as_int(dim, "dim", low=1)
        heads = as_int(heads, "heads", low=1)
        layer = as_int(layer, "layer", low=0)
        if dim % heads:
            raise ValueError(f"heads={heads} must divide dim={dim}")
        self.heads, self.head_dim = heads, dim // heads
        self.fast_attention = as_bool(fast_attention, "fast_attention")
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("gate", torch.ones(heads))
        self.hook_pattern = HookPoint(f"blocks.{layer}.attn.pattern")
        self.hook_head_out = HookPoint(f"blocks.{layer}.attn.head_out")

    @property
    def explicit(self) -> bool:
        """Whether the next forward pass builds the attention pattern (forced, or a hook wants it or the heads)."""
        return not self.fast_attention or self.hook_pattern.active or self.hook_head_out.active

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, D = x.shape  # noqa: N806
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        gate = self.gate.to(x.dtype)
        # (heads,): one gate per head; (B, heads): per-example gates (see gate_grads(batch_size=B))
        gate = gate[None, :, None, None] if gate.ndim == 1 else gate[:, :, None, None]
        if not self.explicit:
            heads = sdpa(q, k, v) * gate  # ξ_h · head_h
        else:
            att = self.hook_pattern(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1))
            heads = self.hook_head_out((att @ v) * gate)  # (B, heads, N, head_dim)
        return self.proj(heads.transpose(1, 2).reshape(B, N, D))


class DiTBlock(nn.Module):
    """A DiT block with adaLN-Zero conditioning: ``x + g₁·Attn(mod(LN x)) ; x + g₂·MLP(mod(LN x))``."""

    def __init__(
        self, dim: int, heads: int, mlp_ratio: float = 4.0, *, layer: int = 0, fast_attention: bool = True
    ) -> None:
        super().__init__()
        dim = as_int(dim, "dim", low=1)
        mlp_ratio = as_float(mlp_ratio, "mlp_ratio", 0.0, low_open=True)
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = GatedAttention(dim, heads, layer=layer, fast_attention=fast_attention)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, dim))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        nn.init.zeros_(self.ada[1].weight)
        nn.init.zeros_(self.ada[1].bias)
        p = f"blocks.{layer}."
        self.hook_attn_out = HookPoint(p + "attn_out")
        self.hook_resid_mid = HookPoint(p + "resid_mid")
        self.hook_mlp_out = HookPoint(p + "mlp_out")
        self.hook_resid_post = HookPoint(p + "resid_post")

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        s1, sc1, g1, s2, sc2, g2 = self.ada(c).chunk(6, dim=-1)
        x = self.hook_resid_mid(x + self.hook_attn_out(g1[:, None] * self.attn(_modulate(self.norm1(x), s1, sc1))))
        return self.hook_resid_post(x + self.hook_mlp_out(g2[:, None] * self.mlp(_modulate(self.norm2(x), s2, sc2))))


class TinyDiT(HookedModule):
    """A small DiT predicting the noise ε of ``(B, C, H, W)`` images at timesteps ``t`` (shape ``(B,)``).

    Hook points: see the module docstring. ``fast_attention=False`` makes every layer build its attention pattern.
    ``cond_dim > 0``: ``forward`` takes ``cond`` of shape ``(B, cond_dim)``, and ``c = t_mlp(emb(t)) + cond_mlp(cond)``
    (``cond_mlp``: Linear → SiLU → Linear); ``cond_dim = 0`` (the default) takes no condition.
    """

    def __init__(
        self,
        img_size: int = 8,
        patch: int = 2,
        in_channels: int = 1,
        dim: int = 64,
        depth: int = 4,
        heads: int = 4,
        mlp_ratio: float = 4.0,
        *,
        fast_attention: bool = True,
        cond_dim: int = 0,
    ) -> None:
        super().__init__()
        img_size, patch = as_int(img_size, "img_size", low=1), as_int(patch, "patch", low=1)
        in_channels, dim = as_int(in_channels, "in_channels", low=1), as_int(dim, "dim", low=1)
        depth, heads = as_int(depth, "depth", low=1), as_int(heads, "heads", low=1)
        if img_size % patch:
            raise ValueError(f"patch={patch} must divide img_size={img_size}")
        mlp_ratio = as_float(mlp_ratio, "mlp_ratio", 0.0, low_open=True)
        fast_attention = as_bool(fast_attention, "fast_attention")
        self.img_size, self.patch, self.in_channels, self.dim = img_size, patch, in_channels, dim
        self.depth, self.heads = depth, heads
        grid = img_size // patch
        self.embed = nn.Linear(patch * patch * in_channels, dim)
        self.register_buffer("pos", _sincos_2d(dim, grid)[None], persistent=False)
        self.t_mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.blocks = nn.ModuleList(
            DiTBlock(dim, heads, mlp_ratio, layer=layer, fast_attention=fast_attention) for layer in range(depth)
        )
        self.final_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.final = nn.Linear(dim, patch * patch * in_channels)
        for m in (self.final_ada[1], self.final):
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)
        self.hook_embed = HookPoint("embed")
        self.hook_cond = HookPoint("cond")
        # built last, so that a model without a condition initialises exactly as before
        self.cond_dim = as_int(cond_dim, "cond_dim", low=0)
        self.cond_mlp = (
            nn.Sequential(nn.Linear(self.cond_dim, dim), nn.SiLU(), nn.Linear(dim, dim)) if self.cond_dim else None
        )

    def _hook_order(self) -> list[str]:
        order = ["embed", "cond"]
        for layer in range(self.depth):
            p = f"blocks.{layer}."
            order += [
                p + n for n in ("attn.pattern", "attn.head_out", "attn_out", "resid_mid", "mlp_out", "resid_post")
            ]
        return order

    # -------------------------------------------------------------------------------------- gates
    @property
    def gates(self) -> torch.Tensor:
        """The current gates as a ``(depth, heads)`` tensor (a copy)."""
        return torch.stack([b.attn.gate.detach().clone() for b in self.blocks])

    def set_gates(self, gates: torch.Tensor) -> None:
        """Set all gates from a ``(depth, heads)`` tensor (0 removes a head, 1 keeps it)."""
        if not isinstance(gates, torch.Tensor):
            raise TypeError(f"gates must be a tensor of shape ({self.depth}, {self.heads}), got {type(gates).__name__}")
        if tuple(gates.shape) != (self.depth, self.heads):
            raise ValueError(f"gates must be a tensor of shape ({self.depth}, {self.heads}), got {tuple(gates.shape)}")
        float_tensor(gates, "gates", ndim=2)
        for b, g in zip(self.blocks, gates):
            b.attn.gate = g.detach().to(b.attn.gate.device, b.attn.gate.dtype).clone()

    # -------------------------------------------------------------------------------------- forward
    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        x = float_tensor(x, "x", ndim=4, finite=False, dtype=next(self.parameters()).dtype)
        if tuple(x.shape[1:]) != (self.in_channels, self.img_size, self.img_size):
            raise ValueError(
                f"x must have shape (B, {self.in_channels}, {self.img_size}, {self.img_size}), got {tuple(x.shape)}"
            )
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"t must be a tensor of shape ({x.shape[0]},), got {type(t).__name__}")
        if t.shape != (x.shape[0],):
            raise ValueError(f"t must be a tensor of shape ({x.shape[0]},), got {tuple(t.shape)}")
        h = self.hook_embed(self.embed(patchify(x, self.patch)) + self.pos)
        c = self.t_mlp(timestep_embedding(t, self.dim).to(h.dtype))
        if self.cond_mlp is None:
            if cond is not None:
                raise ValueError("cond was given but the model has cond_dim=0 (build it with cond_dim > 0)")
        else:
            if cond is None:
                raise ValueError(f"cond must be a tensor of shape ({x.shape[0]}, {self.cond_dim}), got None")
            cond = float_tensor(cond, "cond", ndim=2, finite=False, dtype=h.dtype)
            if tuple(cond.shape) != (x.shape[0], self.cond_dim):
                raise ValueError(f"cond must have shape ({x.shape[0]}, {self.cond_dim}), got {tuple(cond.shape)}")
            c = c + self.cond_mlp(cond)
        c = self.hook_cond(c)
        for block in self.blocks:
            h = block(h, c)
        shift, scale = self.final_ada(c).chunk(2, dim=-1)
        out = self.final(_modulate(self.final_norm(h), shift, scale))
        return unpatchify(out, self.patch, self.in_channels, self.img_size, self.img_size)


@contextmanager
def gate_grads(model: TinyDiT, batch_size: int | None = None) -> Iterator[list[torch.Tensor]]:
    """Within the block, every gate is a leaf tensor with ``requires_grad``; yields them (one per layer).

    ``batch_size=None``: each leaf has shape ``(heads,)``; after ``loss.backward()`` inside the block,
    ``gates[l].grad[h]`` is ``∂L/∂ξ_{l,h}`` of the batch loss. ``batch_size=B``: **per-example gates**, each leaf of
    shape ``(B, heads)`` holding the current gate values, example ``b`` of the batch reading row ``b``. A DiT mixes
    nothing across the batch, so after ``per_example_losses.sum().backward()``, ``gates[l].grad[b, h]`` is
    ``∂L(x_b)/∂ξ_{l,h}`` — every example's gradient from one backward pass (the forward passes inside the block must
    use batches of exactly ``B``). On exit the gates are restored as plain ``(heads,)`` buffers, values unchanged.
    """
    if not isinstance(model, TinyDiT):
        raise TypeError(f"model must be a TinyDiT, got {type(model).__name__}")
    if batch_size is not None:
        batch_size = as_int(batch_size, "batch_size", low=1)
    saved = [b.attn.gate.detach().clone() for b in model.blocks]
    leaves = []
    for b, g in zip(model.blocks, saved):
        leaf = (g if batch_size is None else g[None].expand(batch_size, -1)).clone().requires_grad_(True)
        b.attn.gate = leaf
        leaves.append(leaf)
    try:
        yield leaves
    finally:
        for b, g in zip(model.blocks, saved):
            b.attn.gate = g
