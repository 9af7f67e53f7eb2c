"""One factory for the optimizers the book compares: :func:`make_optimizer`.

    opts = make_optimizer("muon", model, lr=0.02, adam_lr=3e-3)   # always a list of torch optimizers
    history = fit(model, loss_fn, batches, opts, steps=1000, schedule="wsd")

The optimizers come from the libraries, not rewritten here:

========== ================================================ ======================================================
name       update                                           implementation
========== ================================================ ======================================================
adamw      Adam with decoupled weight decay                 ``torch.optim.AdamW``
nadamw     Nesterov Adam with a fixed momentum β1, as in    ``torch.optim.NAdam(decoupled_weight_decay=True,
           optax ``nadamw`` (and the paper's levanter)      momentum_decay=1e9)``: the huge decay switches off
                                                            torch's Dozat schedule, so μ_t = β1 at every step
lion       sign of an interpolated momentum                 ``pytorch_optimizer.Lion``
cautious   AdamW whose update is masked where it disagrees  ``pytorch_optimizer.MARS(mars_type="adamw", gamma=0,
           in sign with the gradient (C-AdamW)              cautious=True)`` (γ=0 switches MARS's correction off;
                                                            MARS still clips each tensor's gradient to norm <= 1)
mars       AdamW on a variance-reduced gradient             ``pytorch_optimizer.MARS(mars_type="adamw")``
muon       orthogonalised momentum (Newton–Schulz)          ``torch.optim.Muon`` on hidden matrices + AdamW
soap       Adam in Shampoo's eigenbasis                     ``pytorch_optimizer.SOAP`` on hidden matrices + AdamW
kron       PSGD with Kronecker-factored preconditioner      ``pytorch_optimizer.Kron`` on hidden matrices + AdamW
========== ================================================ ======================================================

*Matrix* optimizers (muon, soap, kron) only make sense for the 2-D weight matrices inside the network. Following the
usual practice (and the paper), the embedding, the positional embedding, the unembedding, biases and norm gains go
to AdamW, with their own ``adam_lr``, ``adam_betas`` and ``adam_weight_decay``. :func:`split_parameters` makes that
split; :func:`non_embedding_params` counts the parameters that the Chinchilla rule (20 tokens per parameter) uses.

Weight decay is applied to matrices only (``ndim >= 2``); biases and norm gains are never decayed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from iclr26.validate import as_bool, as_float, as_int, as_module, one_of

__all__ = [
    "OPTIMIZERS",
    "MATRIX_OPTIMIZERS",
    "DEFAULTS",
    "NADAMW_FIXED_MOMENTUM",
    "EMBEDDING_NAMES",
    "make_optimizer",
    "split_parameters",
    "non_embedding_params",
    "describe",
]

# Parameter-name components that mark embeddings / unembeddings (TinyTransformer, GPT-2, Llama conventions).
EMBEDDING_NAMES = ("W_E", "W_pos", "W_U", "wte", "wpe", "embed_tokens", "lm_head", "embed", "unembed", "embedding")

#: ``momentum_decay`` that makes ``torch.optim.NAdam`` optax's ``nadamw``: torch's momentum at step t is
#: β1·(1 − ½·0.96^(t·momentum_decay)), which is β1 exactly once 0.96^(t·1e9) underflows to 0 (from t = 1). Its update is
#: then θ ← θ(1 − ηλ) − η[β1·m_t/(1 − β1^(t+1)) + (1 − β1)·g_t/(1 − β1^t)] / (√(v_t/(1 − β2^t)) + ε), optax's
#: ``scale_by_adam(nesterov=True)`` followed by decoupled weight decay. torch's own default (4e-3) keeps the schedule,
#: whose momentum stays near β1/2 for the first thousands of steps.
NADAMW_FIXED_MOMENTUM = 1e9

_ADAM_SIDE = {"adam_lr": 3e-3, "adam_betas": (0.9, 0.95), "adam_weight_decay": 0.1, "adam_eps": 1e-8}

#: Default hyperparameters per optimizer; every key here is a tunable of that optimizer (others raise ValueError).
DEFAULTS: dict[str, dict[str, Any]] = {
    "adamw": {"lr": 3e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1},
    "nadamw": {
        "lr": 3e-3,
        "betas": (0.9, 0.95),
        "eps": 1e-8,
        "weight_decay": 0.1,
        "momentum_decay": NADAMW_FIXED_MOMENTUM,
    },
    "lion": {"lr": 3e-4, "betas": (0.9, 0.99), "weight_decay": 0.1, "cautious": False},
    "cautious": {"lr": 3e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1},
    "mars": {"lr": 3e-3, "betas": (0.95, 0.99), "eps": 1e-8, "weight_decay": 0.1, "gamma": 0.025, "cautious": False},
    "muon": {
        "lr": 0.02,
        "momentum": 0.95,
        "nesterov": True,
        "weight_decay": 0.1,
        "ns_steps": 5,
        "adjust_lr_fn": None,
        **_ADAM_SIDE,
    },
    "soap": {
        "lr": 3e-3,
        "betas": (0.95, 0.95),
        "eps": 1e-8,
        "weight_decay": 0.1,
        "precondition_frequency": 10,
        **_ADAM_SIDE,
    },
    "kron": {
        "lr": 1e-3,
        "momentum": 0.9,
        "weight_decay": 0.1,
        "pre_conditioner_update_probability": None,
        **_ADAM_SIDE,
    },
}
OPTIMIZERS = tuple(DEFAULTS)
MATRIX_OPTIMIZERS = ("muon", "soap", "kron")


# ------------------------------------------------------------------------------------------------ parameters
def _check_model(model: Any) -> nn.Module:
    as_module(model)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters")
    return model


def _is_embedding(name: str, param: torch.Tensor, embedding_ids: set[int]) -> bool:
    if id(param) in embedding_ids:
        return True
    parts = re.split(r"[.]", name)
    return any(part in EMBEDDING_NAMES for part in parts)


def split_parameters(
    model: nn.Module, is_embedding: Callable[[str, torch.Tensor], bool] | None = None
) -> dict[str, list[tuple[str, torch.Tensor]]]:
    """Split the trainable parameters of ``model`` into three lists of ``(name, parameter)``:

    * ``"hidden"``: 2-D weight matrices inside the network (what Muon/SOAP/Kron precondition);
    * ``"embedding"``: token/positional embeddings and the unembedding (parameters owned by ``nn.Embedding``, or
      whose name has a component in :data:`EMBEDDING_NAMES`, or for which ``is_embedding(name, p)`` is True);
    * ``"other"``: everything else with ``ndim < 2`` (biases, norm gains) or ``ndim > 2``.

    Shared (tied) parameters appear once.
    """
    _check_model(model)
    if is_embedding is not None and not callable(is_embedding):
        raise TypeError("is_embedding must be a callable (name, parameter) -> bool, or None")
    embedding_ids = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    groups: dict[str, list[tuple[str, torch.Tensor]]] = {"hidden": [], "embedding": [], "other": []}
    for name, p in model.named_parameters():  # named_parameters() already removes duplicates (tied weights)
        if not p.requires_grad:
            continue
        emb = is_embedding(name, p) if is_embedding is not None else _is_embedding(name, p, embedding_ids)
        if emb:
            groups["embedding"].append((name, p))
        elif p.ndim == 2:
            groups["hidden"].append((name, p))
        else:
            groups["other"].append((name, p))
    return groups


def non_embedding_params(model: nn.Module) -> int:
    """Number of trainable parameters outside the embeddings and unembedding (the Chinchilla-rule count)."""
    groups = split_parameters(model)
    return sum(p.numel() for _, p in groups["hidden"] + groups["other"])


# ------------------------------------------------------------------------------------------------ validation
def _betas(value: Any, name: str) -> tuple[float, float]:
    """A pair ``(beta1, beta2)``, each in ``[0, 1)``."""
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{name} must be a pair (beta1, beta2) in [0, 1), got {type(value).__name__}")
    if len(value) != 2:
        raise ValueError(f"{name} must be a pair (beta1, beta2) in [0, 1), got {value!r}")
    b1, b2 = (as_float(b, f"{name}[{i}]", 0.0, 1.0, high_open=True) for i, b in enumerate(value))
    return b1, b2


def _validate(name: str, hp: dict[str, Any]) -> dict[str, Any]:
    """Check the hyperparameters of optimizer ``name`` (after the defaults are filled in)."""
    for key in ("lr", "adam_lr", "eps", "adam_eps"):
        if key in hp:
            hp[key] = as_float(hp[key], key, 0.0, low_open=True)
    for key in ("weight_decay", "adam_weight_decay", "gamma", "momentum_decay"):
        if key in hp:
            hp[key] = as_float(hp[key], key, 0.0)
    for key in ("betas", "adam_betas"):
        if key in hp:
            hp[key] = _betas(hp[key], key)
    if "momentum" in hp:
        hp["momentum"] = as_float(hp["momentum"], "momentum", 0.0, 1.0, high_open=True)
    for key in ("nesterov", "cautious"):
        if key in hp:
            hp[key] = as_bool(hp[key], key)
    for key in ("ns_steps", "precondition_frequency"):
        if key in hp:
            hp[key] = as_int(hp[key], key, low=1)
    if "adjust_lr_fn" in hp:
        one_of(hp["adjust_lr_fn"], "adjust_lr_fn", (None, "original", "match_rms_adamw"))
    if hp.get("pre_conditioner_update_probability") is not None:
        hp["pre_conditioner_update_probability"] = as_float(
            hp["pre_conditioner_update_probability"], "pre_conditioner_update_probability", 0.0, 1.0, low_open=True
        )
    return hp


def _decay_groups(params: list[tuple[str, torch.Tensor]], weight_decay: float) -> list[dict[str, Any]]:
    """Matrices get ``weight_decay``, vectors (biases, norm gains) none; empty groups are dropped."""
    decay = [p for _, p in params if p.ndim >= 2]
    no_decay = [p for _, p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


# ------------------------------------------------------------------------------------------------ factory
def make_optimizer(
    name: str,
    model: nn.Module,
    *,
    is_embedding: Callable[[str, torch.Tensor], bool] | None = None,
    **hparams: Any,
) -> list[torch.optim.Optimizer]:
    """Build optimizer ``name`` for ``model`` and return it as a list (what :func:`iclr26.train.fit` takes).

    ``hparams`` override :data:`DEFAULTS` ``[name]``; unknown keys raise ``ValueError`` listing the known ones.
    Element-wise optimizers (adamw, nadamw, lion, cautious, mars) train every parameter; matrix optimizers
    (muon, soap, kron) train the hidden 2-D matrices and an AdamW (``adam_*`` keys) trains the rest
    (see :func:`split_parameters`, whose ``is_embedding`` you may override).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, one of {OPTIMIZERS}, got {type(name).__name__}")
    key = one_of(name.lower(), "name", OPTIMIZERS)
    _check_model(model)
    unknown = sorted(set(hparams) - set(DEFAULTS[key]))
    if unknown:
        raise ValueError(f"unknown hyperparameter(s) {unknown} for {key!r}; known: {sorted(DEFAULTS[key])}")
    hp = _validate(key, {**DEFAULTS[key], **hparams})
    groups = split_parameters(model, is_embedding)
    everything = groups["hidden"] + groups["embedding"] + groups["other"]

    if key == "adamw":
        return [
            torch.optim.AdamW(
                _decay_groups(everything, hp["weight_decay"]), lr=hp["lr"], betas=hp["betas"], eps=hp["eps"]
            )
        ]
    if key == "nadamw":
        return [
            torch.optim.NAdam(
                _decay_groups(everything, hp["weight_decay"]),
                lr=hp["lr"],
                betas=hp["betas"],
                eps=hp["eps"],
                momentum_decay=hp["momentum_decay"],
                decoupled_weight_decay=True,
            )
        ]
    import pytorch_optimizer as po

    if key == "lion":
        return [
            po.Lion(
                _decay_groups(everything, hp["weight_decay"]), lr=hp["lr"], betas=hp["betas"], cautious=hp["cautious"]
            )
        ]
    if key in ("cautious", "mars"):
        gamma = 0.0 if key == "cautious" else hp["gamma"]
        cautious = True if key == "cautious" else hp["cautious"]
        return [
            po.MARS(
                _decay_groups(everything, hp["weight_decay"]),
                lr=hp["lr"],
                betas=hp["betas"],
                eps=hp["eps"],
                gamma=gamma,
                mars_type="adamw",
                optimize_1d=True,
                cautious=cautious,
            )
        ]

    # matrix optimizers: hidden 2-D matrices to the preconditioner, everything else to AdamW
    hidden = [p for _, p in groups["hidden"]]
    rest = groups["embedding"] + groups["other"]
    if not hidden:
        raise ValueError(f"{key!r} needs 2-D hidden weight matrices, but model has none outside the embeddings")
    if key == "muon":
        main: torch.optim.Optimizer = torch.optim.Muon(
            hidden,
            lr=hp["lr"],
            weight_decay=hp["weight_decay"],
            momentum=hp["momentum"],
            nesterov=hp["nesterov"],
            ns_steps=hp["ns_steps"],
            adjust_lr_fn=hp["adjust_lr_fn"],
        )
    elif key == "soap":
        main = po.SOAP(
            hidden,
            lr=hp["lr"],
            betas=hp["betas"],
            eps=hp["eps"],
            weight_decay=hp["weight_decay"],
            precondition_frequency=hp["precondition_frequency"],
        )
    else:  # kron
        main = po.Kron(
            hidden,
            lr=hp["lr"],
            momentum=hp["momentum"],
            weight_decay=hp["weight_decay"],
            pre_conditioner_update_probability=hp["pre_conditioner_update_probability"],
        )
    opts = [main]
    if rest:
        opts.append(
            torch.optim.AdamW(
                _decay_groups(rest, hp["adam_weight_decay"]),
                lr=hp["adam_lr"],
                betas=hp["adam_betas"],
                eps=hp["adam_eps"],
            )
        )
    return opts


def describe(opts: list[torch.optim.Optimizer]) -> str:
    """A one-line summary: each optimizer's class and how many parameters it trains."""
    if not isinstance(opts, (list, tuple)) or not all(isinstance(o, torch.optim.Optimizer) for o in opts):
        raise TypeError("opts must be a list of torch.optim.Optimizer")
    parts = []
    for o in opts:
        n = sum(p.numel() for g in o.param_groups for p in g["params"])
        parts.append(f"{type(o).__name__}({n:,} params)")
    return " + ".join(parts)
