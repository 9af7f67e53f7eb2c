"""WeightLens and CircuitLens (Golimblevskaia et al., "Circuit Insights", ICLR 2026) for transcoders.

    res = weightlens(W_E, W_U, {0: W_enc}, {0: W_dec}, feature_acts, bos=0)   # {(layer, i): WeightLensResult}
    desc = activation_description(acts, tokens, n_top=20)                    # the activation baseline
    f1 = detection_f1(descriptions, acts, tokens)                            # fires iff the current token is described
    share = token_explained_share(acts_fit, tok_fit, acts_test, tok_test)     # held-out R^2 of the current token
    d = decompose(model, tokens, layer=0, w_enc=tc.W_enc[:, i], b_enc=tc.b_enc[i])   # CircuitLens' exact split
    x, y = mlp_io(hf_model, ids, "model.layers.0.post_attention_layernorm", "model.layers.0.mlp", stop_layer=1)
    res = weightlens_gpt2(gpt2, {0: load_official_transcoder(path0), 1: ...}, bos=2)   # the official GPT-2 setup

WeightLens follows the official ``weight_lens`` code (``input_invariant_analysis.analyze_feature`` and
``generate_description``): the input score of feature ``i`` is ``W_E @ W_enc[:, i]``; of its ``top_tokens`` (1000)
largest values, those whose z-score *within the top values* exceeds ``threshold_tokens`` (5.5) are candidates, and a
candidate ``t`` is kept when the feature fires at ``t`` in the two-token input ``[bos, t]`` (the official code
hard-codes ``bos=2``, Gemma's BOS, for every model). Output tokens: the same rule on ``W_dec[i] @ W_U``. Upstream
links: for each earlier layer, ``W_dec^(l') @ W_enc[:, i]``, top ``top_features`` (100), z > ``threshold_features``
(4), relative contribution ``|c| / (sum |W_E W_enc[:, i]| + sum |all links|)``; a linked feature's description joins
when the feature fires on it, fed as one sequence ``[bos, t_1, ..., t_n]``. A feature is *described* when its
validated description is non-empty.

CircuitLens' decomposition (:func:`decompose`) is exact for a :class:`~iclr26.models.TinyTransformer` without
LayerNorm and without attention biases, with the attention patterns of the pass held fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from iclr26.sae._validation import _as_tensor
from iclr26.sae.transcoder import Transcoder
from iclr26.validate import as_bool, as_float, as_int, as_module, one_of, token_tensor

__all__ = [
    "WeightLensResult",
    "zscore_outliers",
    "weightlens",
    "activation_description",
    "detection_f1",
    "token_explained_share",
    "Decomposition",
    "decompose",
    "mlp_io",
    "weightlens_gpt2",
]


def zscore_outliers(values: Any, threshold: float, top: int = 1000) -> torch.Tensor:
    """Indices (largest first) of the ``top`` largest ``values`` whose z-score among those ``top`` values (mean and
    unbiased std, as ``torch.std``) exceeds ``threshold`` — the official ``get_outliers`` applied to a top-k."""
    v = _as_tensor(values, "values", ndim=1)
    threshold = as_float(threshold, "threshold")
    top = as_int(top, "top", low=2)
    vals, idx = torch.topk(v, k=min(top, v.numel()))
    if vals.numel() < 2:
        return idx[:0]
    std = vals.std()
    if not bool(std > 0):
        return idx[:0]
    return idx[(vals - vals.mean()) / std > threshold]


@dataclass
class WeightLensResult:
    """One feature's WeightLens analysis: ``candidates`` (input tokens past the z cut-off), ``tokens`` (the
    validated ones), ``outputs`` (output tokens), ``links`` (``(layer, feature, contribution, relative)`` upstream),
    ``description`` (validated tokens plus validated upstream descriptions, sorted) and ``described``."""

    layer: int
    feature: int
    candidates: list[int]
    tokens: list[int]
    outputs: list[int]
    links: list[tuple[int, int, float, float]] = field(default_factory=list)
    description: list[int] = field(default_factory=list)

    @property
    def described(self) -> bool:
        return len(self.description) > 0


def _tokens(x: Any, name: str, vocab: int | None = None, ndim: int | None = None) -> torch.Tensor:
    """Token ids as an int64 tensor (a NumPy integer array is accepted), checked by ``token_tensor``."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integer token ids, got dtype {x.dtype}")
        x = torch.from_numpy(x)
    return token_tensor(x, name, vocab, ndim).long()


def _outliers_by_column(mat: torch.Tensor, threshold: float, top: int) -> list[list[int]]:
    """:func:`zscore_outliers` of every column of ``mat`` at once (the same indices, largest first)."""
    vals, idx = torch.topk(mat, k=min(top, mat.shape[0]), dim=0)
    if vals.shape[0] < 2:
        return [[] for _ in range(mat.shape[1])]
    std = vals.std(dim=0)
    z = (vals - vals.mean(dim=0)) / torch.where(std > 0, std, torch.ones_like(std))
    keep = (z > threshold) & (std > 0)
    return [idx[keep[:, j], j].tolist() for j in range(mat.shape[1])]


def _fires(feature_acts: Callable, layer: int, ids: torch.Tensor, width: int) -> torch.Tensor:
    out = feature_acts(layer, ids)
    if not torch.is_tensor(out) or out.shape[:2] != ids.shape or out.shape[-1] != width:
        raise ValueError(
            f"feature_acts({layer}, ids of shape {tuple(ids.shape)}) must return (n, seq, {width}), "
            f"got {getattr(out, 'shape', type(out).__name__)}"
        )
    return out.detach().float().cpu()


def weightlens(
    W_E: Any,
    W_U: Any,
    encoders: Mapping[int, Any],
    decoders: Mapping[int, Any],
    feature_acts: Callable[[int, torch.Tensor], torch.Tensor],
    bos: int,
    *,
    threshold_tokens: float = 5.5,
    threshold_features: float = 4.0,
    top_tokens: int = 1000,
    top_features: int = 100,
    link_layers: Sequence[int] | None = None,
    features: Mapping[int, Sequence[int]] | None = None,
    chunk: int = 256,
) -> dict[tuple[int, int], WeightLensResult]:
    """WeightLens over the transcoders' features, layer by layer (see the module docstring for the rule).

    ``W_E`` ``(vocab, d)``, ``W_U`` ``(d, vocab)``; ``encoders[l]`` ``(d, width)`` and ``decoders[l]`` ``(width, d)``;
    ``feature_acts(l, ids)`` returns layer ``l``'s feature activations ``(n, seq, width)`` for token ids ``(n, seq)``.
    ``link_layers``: the upstream layers whose descriptions may join (the official GPT-2 run: ``[0]``; default all).
    ``features``: which features per layer (default all). Returns ``{(layer, i): WeightLensResult}``.
    """
    W_E = _as_tensor(W_E, "W_E", ndim=2).float()
    W_U = _as_tensor(W_U, "W_U", ndim=2).float()
    if W_U.shape[0] != W_E.shape[1]:
        raise ValueError(f"W_U must be (d, vocab) with d={W_E.shape[1]}, got {tuple(W_U.shape)}")
    if not isinstance(encoders, Mapping) or not isinstance(decoders, Mapping) or not encoders:
        raise TypeError("encoders and decoders must be non-empty dicts layer -> matrix")
    if sorted(encoders) != sorted(decoders):
        raise ValueError(f"encoders and decoders must have the same layers, got {sorted(encoders)}, {sorted(decoders)}")
    if not callable(feature_acts):
        raise TypeError(f"feature_acts must be callable, got {type(feature_acts).__name__}")
    vocab, d = W_E.shape
    bos = as_int(bos, "bos", low=0, high=vocab - 1)
    threshold_tokens = as_float(threshold_tokens, "threshold_tokens")
    threshold_features = as_float(threshold_features, "threshold_features")
    top_tokens = as_int(top_tokens, "top_tokens", low=2)
    top_features = as_int(top_features, "top_features", low=2)
    chunk = as_int(chunk, "chunk", low=1)
    layers = sorted(as_int(k, "encoders key", low=0) for k in encoders)
    enc = {lay: _as_tensor(encoders[lay], f"encoders[{lay}]", ndim=2).float() for lay in layers}
    dec = {lay: _as_tensor(decoders[lay], f"decoders[{lay}]", ndim=2).float() for lay in layers}
    for lay in layers:
        if enc[lay].shape[0] != d or dec[lay].shape != (enc[lay].shape[1], d):
            raise ValueError(f"encoders[{lay}] must be (d={d}, width) and decoders[{lay}] (width, d)")
    if link_layers is not None and (not isinstance(link_layers, Sequence) or isinstance(link_layers, str)):
        raise TypeError(f"link_layers must be a list of layers or None, got {type(link_layers).__name__}")
    allowed_links = set(layers if link_layers is None else [as_int(x, "link_layers", low=0) for x in link_layers])
    if features is not None and not isinstance(features, Mapping):
        raise TypeError(f"features must be a dict layer -> feature indices or None, got {type(features).__name__}")
    out: dict[tuple[int, int], WeightLensResult] = {}
    for lay in layers:
        width = enc[lay].shape[1]
        feats = (
            list(range(width))
            if features is None or lay not in features
            else [as_int(i, f"features[{lay}]", low=0, high=width - 1) for i in features[lay]]
        )
        cand: dict[int, list[int]] = {}
        outs: dict[int, list[int]] = {}
        totals: dict[int, float] = {}
        for start in range(0, len(feats), chunk):
            part = feats[start : start + chunk]
            scores = W_E @ enc[lay][:, part]  # (vocab, chunk): the direct path of every token
            logits = dec[lay][part] @ W_U  # (chunk, vocab)
            c_part = _outliers_by_column(scores, threshold_tokens, top_tokens)
            o_part = _outliers_by_column(logits.T, threshold_tokens, top_tokens)
            t_part = scores.abs().sum(0).tolist()
            for j, i in enumerate(part):
                cand[i], outs[i], totals[i] = c_part[j], o_part[j], t_part[j]
        # validation: [bos, t] for every candidate token, one batch per layer
        pool = sorted({t for i in feats for t in cand[i]})
        fired: dict[int, torch.Tensor] = {}
        if pool:
            ids = torch.tensor([[bos, t] for t in pool], dtype=torch.long)
            acts = _fires(feature_acts, lay, ids, width)[:, -1]  # (n_pool, width)
            fired = {t: acts[r] for r, t in enumerate(pool)}
        links: dict[int, list[tuple[int, int, float]]] = {i: [] for i in feats}
        for lp in [x for x in layers if x < lay]:
            proj = dec[lp] @ enc[lay][:, feats]  # (width', n_feats)
            tops = _outliers_by_column(proj, threshold_features, top_features)
            for j, i in enumerate(feats):
                totals[i] += float(proj[:, j].abs().sum())
                links[i] += [(lp, int(f), float(proj[f, j])) for f in tops[j]]
        for i in feats:
            tokens = [t for t in cand[i] if float(fired[t][i]) > 0]
            res = WeightLensResult(lay, i, cand[i], tokens, outs[i])
            res.links = sorted(
                [(lp, f, c, abs(c) / totals[i]) for lp, f, c in links[i]], key=lambda r: r[3], reverse=True
            )
            description = set(tokens)
            for lp, f, _, _ in res.links:
                up = out.get((lp, f))
                if lp not in allowed_links or up is None or not up.description:
                    continue
                seq = torch.tensor([[bos, *up.description]], dtype=torch.long)
                a = _fires(feature_acts, lay, seq, width)[0, 1:, i]
                description |= {t for t, v in zip(up.description, a.tolist(), strict=True) if v > 0}
            res.description = sorted(description)
            out[(lay, i)] = res
    return out


def _acts_tokens(
    acts: Any, tokens: Any, names: tuple[str, str] = ("acts", "tokens")
) -> tuple[torch.Tensor, torch.Tensor]:
    acts = _as_tensor(acts, names[0]).float()
    acts = acts.reshape(-1, acts.shape[-1])
    tokens = _tokens(tokens, names[1]).reshape(-1)
    if tokens.numel() and int(tokens.min()) < 0:
        raise ValueError(f"{names[1]} must hold token ids >= 0, got {int(tokens.min())}")
    if tokens.numel() != acts.shape[0]:
        raise ValueError(f"{names[1]} must have one entry per row of {names[0]}: {tokens.numel()} vs {acts.shape[0]}")
    return acts, tokens


def activation_description(
    acts: Any, tokens: Any, n_top: int = 20, rule: str = "top", frac: float = 0.5, min_count: int = 3
) -> list[list[int]]:
    """The activation baseline, per feature (last axis of ``acts``; ``tokens`` gives each row's current token),
    sorted token ids. ``rule="top"``: the distinct current tokens of the feature's ``n_top`` largest positive
    activations (a list of max-activating examples). ``rule="mean"``: the tokens whose mean activation (over their
    occurrences, at least ``min_count`` of them) is at least ``frac`` times the best token's (top-activating tokens)."""
    acts, tokens = _acts_tokens(acts, tokens)
    n_top = as_int(n_top, "n_top", low=1)
    one_of(rule, "rule", ("top", "mean"))
    frac = as_float(frac, "frac", 0.0, 1.0)
    min_count = as_int(min_count, "min_count", low=1)
    if rule == "top":
        vals, idx = acts.topk(min(n_top, acts.shape[0]), dim=0)  # (n_top, width)
        return [sorted(set(tokens[idx[vals[:, i] > 0, i]].tolist())) for i in range(acts.shape[1])]
    n_tok = int(tokens.max()) + 1
    sums = torch.zeros(n_tok, acts.shape[1]).index_add_(0, tokens, acts)
    counts = torch.bincount(tokens, minlength=n_tok).float()[:, None]
    means = torch.where(counts >= min_count, sums / counts.clamp_min(1), torch.zeros_like(sums))
    best = means.max(0).values
    keep = (means >= frac * best) & (means > 0) & (best > 0)
    return [torch.nonzero(keep[:, i]).flatten().tolist() for i in range(acts.shape[1])]


def detection_f1(descriptions: Sequence[Sequence[int]], acts: Any, tokens: Any) -> np.ndarray:
    """Per feature, the F1 of predicting "the feature fires (activation > 0)" by "the current token is in its
    description"; NaN for a feature that never fires here and has an empty description."""
    acts, tokens = _acts_tokens(acts, tokens)
    if not isinstance(descriptions, Sequence) or isinstance(descriptions, str):
        raise TypeError(f"descriptions must be a list of token-id lists, got {type(descriptions).__name__}")
    if len(descriptions) != acts.shape[1]:
        raise ValueError(f"descriptions must have one entry per feature ({acts.shape[1]}), got {len(descriptions)}")
    fires = (acts > 0).numpy()
    tok = tokens.numpy()
    f1 = np.full(acts.shape[1], np.nan)
    for i, desc in enumerate(descriptions):
        pred = np.isin(tok, np.asarray(list(desc), dtype=np.int64))
        tp = float((pred & fires[:, i]).sum())
        denom = float(pred.sum() + fires[:, i].sum())
        if denom > 0:
            f1[i] = 2 * tp / denom
    return f1


def token_explained_share(acts_fit: Any, tokens_fit: Any, acts_test: Any, tokens_test: Any) -> np.ndarray:
    """Per feature, the held-out share of activation variance explained by the current token: the per-token means
    of the fit split (the overall mean for a token it never saw) predict the test split, ``1 - SSE / SST``
    (NaN where the feature is constant on the test split)."""
    a, t = _acts_tokens(acts_fit, tokens_fit, ("acts_fit", "tokens_fit"))
    b, u = _acts_tokens(acts_test, tokens_test, ("acts_test", "tokens_test"))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"acts_fit and acts_test must have the same features, got {a.shape[1]} and {b.shape[1]}")
    n_tok = int(max(t.max(), u.max())) + 1
    sums = torch.zeros(n_tok, a.shape[1]).index_add_(0, t, a)
    counts = torch.bincount(t, minlength=n_tok).float()[:, None]
    means = torch.where(counts > 0, sums / counts.clamp_min(1), a.mean(0, keepdim=True))
    sse = (b - means[u]).pow(2).sum(0)
    sst = (b - b.mean(0)).pow(2).sum(0)
    share = 1 - sse / sst
    return torch.where(sst > 1e-12, share, torch.full_like(share, float("nan"))).double().numpy()


@dataclass
class Decomposition:
    """The exact split of a feature's pre-activation at every position (all ``(batch, seq, ...)``, float64):
    ``token``, ``position``, ``heads`` ``(b, q, n_layers, n_heads, k)`` (each head's write from each source
    position, weight × value), ``upstream`` ``{layer: (b, q, width)}`` (each upstream transcoder feature's write),
    ``error`` (the upstream transcoders' reconstruction error; the whole MLP output where a layer has none),
    ``bias`` and ``total`` (the model's own pre-activation)."""

    token: torch.Tensor
    position: torch.Tensor
    heads: torch.Tensor
    upstream: dict[int, torch.Tensor]
    error: torch.Tensor
    bias: torch.Tensor
    total: torch.Tensor

    def sum(self) -> torch.Tensor:
        s = self.token + self.position + self.heads.sum((2, 3, 4)) + self.error + self.bias
        for v in self.upstream.values():
            s = s + v.sum(-1)
        return s

    def max_relative_error(self) -> float:
        """``max |sum - total| / max |total|``."""
        return float((self.sum() - self.total).abs().max() / self.total.abs().max().clamp_min(1e-12))


def decompose(
    model: Any,
    tokens: Any,
    layer: int,
    w_enc: Any,
    b_enc: Any = 0.0,
    transcoders: Mapping[int, Transcoder] | None = None,
) -> Decomposition:
    """CircuitLens' decomposition of the pre-activation ``resid_mid_l · w_enc + b_enc`` of a feature reading layer
    ``layer``'s MLP input, for a :class:`~iclr26.models.TinyTransformer` with ``layernorm=False`` and no attention
    biases, with the attention patterns of this pass fixed. ``transcoders[l']`` (``l' < layer``) splits that
    layer's MLP output into its features, its decoder bias and its error; a layer without one counts as error."""
    from iclr26.models import TinyTransformer

    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    cfg = model.cfg
    if cfg.layernorm or cfg.attn_bias:
        raise ValueError("model: the exact decomposition needs layernorm=False and attn_bias=False")
    layer = as_int(layer, "layer", low=0, high=cfg.n_layers - 1)
    tokens = _tokens(tokens, "tokens", cfg.vocab_size, ndim=2)
    w = _as_tensor(w_enc, "w_enc", ndim=1).detach().double()
    if w.numel() != cfg.d_model:
        raise ValueError(f"w_enc must have d_model={cfg.d_model} entries, got {w.numel()}")
    b0 = as_float(float(b_enc.detach()) if torch.is_tensor(b_enc) and b_enc.numel() == 1 else b_enc, "b_enc")
    transcoders = dict(transcoders or {})
    for lp, tc in transcoders.items():
        as_int(lp, "transcoders key", low=0, high=layer - 1 if layer else 0)
        if lp >= layer or not isinstance(tc, Transcoder):
            raise ValueError(f"transcoders[{lp}] must be a Transcoder of a layer below {layer}")
    names = ["embed", f"blocks.{layer}.resid_mid"]
    if cfg.positional != "none":
        names.append("pos_embed")
    for lp in range(layer + 1):
        names += [f"blocks.{lp}.resid_pre", f"blocks.{lp}.attn.pattern"]
        if lp < layer:
            names += [f"blocks.{lp}.resid_mid", f"blocks.{lp}.mlp_out"]
    from iclr26.hooks import capture

    dev = next(model.parameters()).device
    with torch.no_grad(), capture(model, names) as c:
        model(tokens.to(dev))
    c = {k: v.double().cpu() for k, v in c.items()}
    b, s = tokens.shape
    H = cfg.n_heads
    token = c["embed"] @ w
    position = (c["pos_embed"] @ w).expand(b, s) if "pos_embed" in c else torch.zeros(b, s, dtype=torch.float64)
    heads = torch.zeros(b, s, layer + 1, H, s, dtype=torch.float64)
    error = torch.zeros(b, s, dtype=torch.float64)
    bias = torch.full((b, s), b0, dtype=torch.float64)
    upstream: dict[int, torch.Tensor] = {}
    for lp in range(layer + 1):
        att = model.blocks[lp].attn
        W_V = att.W_V.weight.detach().double().cpu().view(H, cfg.d_head, cfg.d_model)  # (h, e, d)
        W_O = att.W_O.weight.detach().double().cpu().view(cfg.d_model, H, cfg.d_head)  # (d, h, e)
        ov_w = torch.einsum("hed,Dhe,D->hd", W_V, W_O, w)  # each head's OV circuit read by w: (h, d)
        v = torch.einsum("bkd,hd->bkh", c[f"blocks.{lp}.resid_pre"], ov_w)
        term = c[f"blocks.{lp}.attn.pattern"] * v.permute(0, 2, 1)[:, :, None, :]  # (b, h, q, k)
        heads[:, :, lp] = term.permute(0, 2, 1, 3)
        if lp < layer:
            mlp_w = c[f"blocks.{lp}.mlp_out"] @ w
            tc = transcoders.get(lp)
            if tc is None:
                error += mlp_w
                continue
            with torch.no_grad():
                z = tc.encode(c[f"blocks.{lp}.resid_mid"].float().to(tc.W_enc.device)).double().cpu()
            wd = tc.W_dec.detach().double().cpu() @ w
            upstream[lp] = z * wd
            bias += float(tc.b_dec.detach().double().cpu() @ w)
            error += mlp_w - upstream[lp].sum(-1) - float(tc.b_dec.detach().double().cpu() @ w)
    total = c[f"blocks.{layer}.resid_mid"] @ w + b0
    return Decomposition(token, position, heads, upstream, error, bias, total)


def mlp_io(
    model: Any,
    input_ids: Any,
    in_name: str,
    out_name: str,
    stop_layer: int,
    batch_size: int = 64,
    read_input: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A transformers LM's MLP input and output at one block, ``(n, seq, d)`` each, float32 on the CPU: the outputs
    of the submodules ``in_name`` (e.g. ``"model.layers.0.post_attention_layernorm"``, the normalised input) and
    ``out_name`` (``"model.layers.0.mlp"``), running no block above ``stop_layer`` (a
    :func:`iclr26.hf.residual_activations` layer: ``l + 1`` for block ``l``). ``read_input=True`` reads the *input*
    of ``in_name`` instead (GPT-2's ``"transformer.h.0.ln_2"``: the residual stream before the norm, the official
    transcoders' ``hook_resid_mid``)."""
    from iclr26.hf import residual_activations
    from iclr26.hooks import capture

    as_module(model)
    ids = _tokens(input_ids, "input_ids", ndim=2)
    batch_size = as_int(batch_size, "batch_size", low=1)
    read_input = as_bool(read_input, "read_input")
    if not isinstance(in_name, str):
        raise TypeError(f"in_name must be a submodule name, got {type(in_name).__name__}")
    xs, ys = [], []
    with (
        capture(model, in_name, read="input" if read_input else "output") as x,
        capture(model, out_name) as y,
    ):
        for start in range(0, ids.shape[0], batch_size):
            residual_activations(model, ids[start : start + batch_size], layer=stop_layer, batch_size=batch_size)
            xs.append(x[in_name].float().cpu())
            ys.append(y[out_name].float().cpu())
    return torch.cat(xs), torch.cat(ys)


def weightlens_gpt2(
    model: Any,
    transcoders: Mapping[int, Transcoder],
    bos: int = 2,
    *,
    link_layers: Sequence[int] | None = (0,),
    batch_size: int = 256,
    **options: Any,
) -> dict[tuple[int, int], WeightLensResult]:
    """:func:`weightlens` on a ``transformers`` GPT-2 with the official transcoders (:func:`load_official_transcoder`),
    as the official GPT-2 run sets it up: ``W_E`` = ``transformer.wte``, ``W_U`` = the LM head, layer ``l``'s features
    read the input of ``transformer.h.{l}.ln_2`` (``hook_resid_mid``), validation prefix ``bos`` (the official
    ``analyze_feature`` hard-codes id 2), and only layer-0 links add descriptions (``link_layers=(0,)``). One
    difference: the official ``generate_description`` feeds a linked feature's tokens to GPT-2 without a prefix; here
    they follow ``bos`` as the candidate tokens do. The transcoders' layers must be ``0 .. L-1``. ``options`` go to
    :func:`weightlens` (thresholds, ``features``, ...)."""
    as_module(model)
    if not hasattr(model, "transformer") or not hasattr(model.transformer, "h"):
        raise TypeError(f"model must be a transformers GPT-2 (GPT2LMHeadModel), got {type(model).__name__}")
    if not isinstance(transcoders, Mapping) or not transcoders:
        raise TypeError("transcoders must be a non-empty dict layer -> Transcoder")
    layers = sorted(transcoders)
    if layers != list(range(len(layers))) or len(layers) > len(model.transformer.h):
        raise ValueError(f"transcoders must cover layers 0 .. L-1 of the model, got {layers}")
    d = int(model.config.n_embd)
    for lay, tc in transcoders.items():
        if not isinstance(tc, Transcoder) or tc.d_in != d or tc.d_out != d:
            raise ValueError(f"transcoders[{lay}] must be a Transcoder with d_in = d_out = {d}")
    batch_size = as_int(batch_size, "batch_size", low=1)
    if link_layers is not None:
        link_layers = list(link_layers)

    def feature_acts(layer: int, ids: torch.Tensor) -> torch.Tensor:
        x, _ = mlp_io(
            model,
            ids,
            f"transformer.h.{layer}.ln_2",
            f"transformer.h.{layer}.mlp",
            stop_layer=layer + 1,
            batch_size=batch_size,
            read_input=True,
        )
        tc = transcoders[layer]
        with torch.no_grad():
            return tc.encode(x.to(tc.W_enc.device)).cpu()

    W_E = model.get_input_embeddings().weight.detach().float().cpu()
    W_U = model.get_output_embeddings().weight.detach().float().cpu().T
    return weightlens(
        W_E,
        W_U,
        {lay: transcoders[lay].W_enc.detach().cpu() for lay in layers},
        {lay: transcoders[lay].W_dec.detach().cpu() for lay in layers},
        feature_acts,
        bos,
        link_layers=link_layers,
        **options,
    )
