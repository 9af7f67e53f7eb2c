"""Losses :func:`~iclr26.train.fit` takes as they are: :func:`next_token_loss` for causal language models."""

from __future__ import annotations

from collections.abc import Callable

import torch

from iclr26.validate import as_bool, as_int, token_tensor

__all__ = ["next_token_loss"]


def next_token_loss(model: Callable, tokens: torch.Tensor, skip: int = 0, *, feed_last: bool = False) -> torch.Tensor:
    """Mean cross-entropy of predicting ``tokens[:, t + 1]`` from the logits at position ``t``, for a language model.

    ``model(tokens)`` must return logits of shape ``(batch, seq, vocab)`` (any causal LM: ``TinyTransformer``, ...).
    ``tokens`` is an integer tensor ``(batch, T)``. The targets are ``tokens[:, 1:]``; ``skip`` leaves out the first
    ``skip`` of them (positions that have not yet seen enough context, e.g. the first ``order - 1`` positions of an
    order-``order`` Markov chain, so that the loss's floor is the chain's entropy rate), so ``T - 1 - skip`` targets
    per row remain (at least one). Works directly as ``fit``'s ``loss_fn``: ``fit(model, next_token_loss, ...)``.

    The model reads ``tokens[:, :-1]`` (the last token is only a target); ``feed_last=True`` feeds all ``T`` tokens
    and drops the last position's logits instead: the same loss up to float rounding, one position more work. It
    exists so that results computed that way stay bit-identical.
    """
    if not callable(model):
        raise TypeError(f"model must be callable (tokens -> logits), got {type(model).__name__}")
    if not torch.is_tensor(tokens) or tokens.dtype == torch.bool or tokens.is_floating_point() or tokens.is_complex():
        got = tokens.dtype if torch.is_tensor(tokens) else type(tokens).__name__
        raise TypeError(f"tokens must be an integer tensor of shape (batch, seq), got {got}")
    if tokens.dim() != 2 or tokens.shape[0] == 0:
        raise ValueError(f"tokens must have shape (batch, seq) with batch >= 1, got {tuple(tokens.shape)}")
    vocab = getattr(getattr(model, "cfg", None), "vocab_size", None)
    token_tensor(tokens, "tokens", vocab if isinstance(vocab, int) else None)
    skip = as_int(skip, "skip", low=0)
    feed_last = as_bool(feed_last, "feed_last")
    T = tokens.shape[1]
    if T < skip + 2:
        raise ValueError(f"tokens has {T} positions: need at least skip + 2 = {skip + 2} to leave one target")
    logits = model(tokens if feed_last else tokens[:, :-1])
    n_in = T if feed_last else T - 1
    if not torch.is_tensor(logits) or logits.dim() != 3 or tuple(logits.shape[:2]) != (tokens.shape[0], n_in):
        got = tuple(logits.shape) if torch.is_tensor(logits) else type(logits).__name__
        raise ValueError(
            f"model must return logits of shape (batch, seq, vocab) = ({tokens.shape[0]}, {n_in}, vocab), got {got}"
        )
    logits = logits[:, skip : T - 1]
    targets = tokens[:, skip + 1 :]
    if vocab is None:  # a model that does not declare its vocabulary: check the targets against its logits
        token_tensor(targets, "tokens", logits.shape[-1])
    if targets.dtype != torch.int64:  # cross_entropy wants int64 targets; int32 tokens are accepted as the model does
        targets = targets.long()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
