"""Batched autoregressive sampling from a causal language model, with per-token log-probabilities.

Any causal LM that maps integer tokens ``(batch, seq)`` to logits ``(batch, seq, vocab)`` works (``TinyTransformer``,
a wrapped ``transformers`` model, ...)::

    out = sample(model, prompt, max_new_tokens=12, temperature=1.0, stop_token=targets, seed=0)
    out.tokens      # (batch, prompt_len + n): the prompt, then the sampled tokens (``pad_token`` after a stop)
    out.log_probs   # (batch, n): log-probability of each sampled token under the distribution it was drawn from
    out.mask        # (batch, n) bool: True for tokens generated up to and including the stop token
    lp = token_log_probs(model, out.tokens, prompt_len=prompt.shape[1])   # with gradients, for policy gradients

The distribution at each step is ``softmax(logits / temperature)`` restricted to the ``allowed`` tokens (a fixed mask or
a function of the tokens so far); ``temperature=0`` is greedy decoding (its log-probabilities are those of the
``temperature=1`` distribution, restricted alike). Sampling runs under ``torch.no_grad``; :func:`token_log_probs`
recomputes the same numbers with gradients (one forward pass over the whole sequence). Randomness comes from a
``torch.Generator`` (or a ``seed`` from which one is made), so a call is reproducible.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from iclr26.validate import as_float, as_int, token_tensor, torch_generator

__all__ = ["Samples", "sample", "token_log_probs", "masked_log_softmax"]


class Samples(NamedTuple):
    """What :func:`sample` returns: ``tokens`` (batch, prompt_len + n), ``log_probs`` (batch, n, float; 0 where
    ``mask`` is False), ``mask`` (batch, n, bool; True up to and including a row's stop token) and ``lengths``
    (batch,): the number of generated tokens per row, the stop token included."""

    tokens: torch.Tensor
    log_probs: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor


def _check_tokens(tokens: Any, name: str, vocab: int | None = None) -> torch.Tensor:
    if not torch.is_tensor(tokens) or tokens.dtype not in (torch.int64, torch.int32):
        got = tokens.dtype if torch.is_tensor(tokens) else type(tokens).__name__
        raise TypeError(f"{name} must be an integer (long) tensor of shape (batch, seq), got {got}")
    if tokens.dim() != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(f"{name} must have shape (batch, seq) with batch, seq >= 1, got {tuple(tokens.shape)}")
    token_tensor(tokens, name, vocab)
    return tokens.long()


def _model_vocab(model: Any) -> int | None:
    """The vocabulary size a model declares (``model.cfg.vocab_size``, or ``model.config.vocab_size``), if any."""
    for attr in ("cfg", "config"):
        v = getattr(getattr(model, attr, None), "vocab_size", None)
        if isinstance(v, int):
            return v
    return None


def _logits(out: Any) -> torch.Tensor:
    """The logits tensor of a model's output: the tensor itself, or its ``.logits`` (``transformers`` outputs)."""
    logits = out if torch.is_tensor(out) else getattr(out, "logits", None)
    if not torch.is_tensor(logits) or logits.dim() != 3:
        raise TypeError(
            "model must return logits (batch, seq, vocab) or an object with .logits, got "
            f"{type(out).__name__}{'' if not torch.is_tensor(logits) else ' of shape ' + str(tuple(logits.shape))}"
        )
    return logits


def _takes_last_only(model: Callable) -> bool:
    try:
        return "last_only" in inspect.signature(model.forward if hasattr(model, "forward") else model).parameters
    except (TypeError, ValueError):
        return False


def masked_log_softmax(logits: torch.Tensor, allowed: torch.Tensor | None = None, temperature: float = 1.0):
    """``log_softmax(logits / temperature)`` over the last dimension, with ``-inf`` where ``allowed`` is False.

    ``allowed``: None or a bool tensor broadcastable to ``logits``; every row must allow at least one token.
    """
    if not torch.is_tensor(logits) or not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point tensor, got {getattr(logits, 'dtype', type(logits))}")
    temperature = as_float(temperature, "temperature", 0.0, low_open=True)
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have a vocabulary axis (the last) of size >= 1, got shape {tuple(logits.shape)}")
    z = logits.float() / temperature
    if allowed is not None:
        if not torch.is_tensor(allowed) or allowed.dtype != torch.bool:
            raise TypeError("allowed must be a bool tensor (vocab,) or (batch, vocab)")
        try:
            torch.broadcast_shapes(allowed.shape, z.shape)
        except RuntimeError:
            raise ValueError(
                f"allowed must broadcast to logits' shape {tuple(z.shape)}, got {tuple(allowed.shape)}"
            ) from None
        if not bool(allowed.any(-1).all()):
            raise ValueError("allowed must allow at least one token in every row")
        z = z.masked_fill(~allowed, float("-inf"))
    return torch.log_softmax(z, dim=-1)


def _stop_tensor(stop_token: Any, batch: int, vocab: int | None, device: torch.device) -> torch.Tensor | None:
    if stop_token is None:
        return None
    if torch.is_tensor(stop_token):
        if stop_token.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"stop_token must be an int or an integer tensor (batch,), got {stop_token.dtype}")
        if stop_token.shape != (batch,):
            raise ValueError(f"stop_token must have shape ({batch},) to match prompt, got {tuple(stop_token.shape)}")
        stop = stop_token.long().to(device)
    else:
        stop = torch.full((batch,), as_int(stop_token, "stop_token", low=0), dtype=torch.long, device=device)
    if bool((stop < 0).any()) or (vocab is not None and bool((stop >= vocab).any())):
        raise ValueError(f"stop_token must lie in [0, vocab_size) = [0, {vocab}), got {stop.tolist()}")
    return stop


def sample(
    model: Callable[[torch.Tensor], torch.Tensor],
    prompt: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    allowed: torch.Tensor | Callable[[torch.Tensor], torch.Tensor] | None = None,
    stop_token: int | torch.Tensor | None = None,
    pad_token: int | None = None,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> Samples:
    """Sample ``max_new_tokens`` tokens after ``prompt`` (batch, prompt_len) from ``model``, all rows at once.

    Parameters
    ----------
    model
        A causal LM: ``model(tokens) -> logits (batch, seq, vocab)``, or an output with ``.logits`` (a
        ``transformers`` causal LM called on ``input_ids``). A model whose ``forward`` accepts
        ``last_only`` (``TinyTransformer``) is asked for the last position only.
    temperature
        ``>= 0``; the tokens are drawn from ``softmax(logits / temperature)``; ``0`` takes the argmax (greedy).
    allowed
        Restricts the tokens: a bool tensor ``(vocab,)`` or ``(batch, vocab)``, or a function
        ``tokens so far (batch, seq) -> bool (batch, vocab)`` called at every step (e.g. a grammar or a graph's edges).
    stop_token
        An int, or one per row (long tensor ``(batch,)``): a row that samples it stops; later positions hold
        ``pad_token`` (default: the stop token), log-probability 0 and ``mask`` False. All rows stopped: sampling ends
        early (``tokens`` is then shorter than ``prompt_len + max_new_tokens``).
    generator, seed
        The randomness: a ``torch.Generator`` on the model's device, or a ``seed`` to make one (default: torch's
        global generator).
    """
    if not callable(model):
        raise TypeError(f"model must be callable (tokens -> logits), got {type(model).__name__}")
    prompt = _check_tokens(prompt, "prompt", _model_vocab(model))
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", low=1)
    temperature = as_float(temperature, "temperature", 0.0)
    if generator is not None and seed is not None:
        raise ValueError("pass generator or seed, not both")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if allowed is not None and not callable(allowed):
        if not torch.is_tensor(allowed) or allowed.dtype != torch.bool:
            raise TypeError("allowed must be a bool tensor (vocab,) or (batch, vocab), or a callable tokens -> mask")
        if allowed.dim() not in (1, 2) or (allowed.dim() == 2 and allowed.shape[0] not in (1, prompt.shape[0])):
            raise ValueError(
                f"allowed must have shape (vocab,) or ({prompt.shape[0]}, vocab), got {tuple(allowed.shape)}"
            )
    cfg = getattr(model, "cfg", None)
    vocab = getattr(cfg, "vocab_size", None)
    n_ctx = getattr(cfg, "n_ctx", None)
    if n_ctx is not None and prompt.shape[1] + max_new_tokens > n_ctx:
        raise ValueError(
            f"max_new_tokens: prompt length {prompt.shape[1]} + max_new_tokens {max_new_tokens} exceeds n_ctx={n_ctx}"
        )
    params = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    device = params[0].device if params else prompt.device
    prompt = prompt.to(device)
    batch = prompt.shape[0]
    stop = _stop_tensor(stop_token, batch, vocab, device)
    pad = None if pad_token is None else as_int(pad_token, "pad_token", low=0)
    if pad is not None and vocab is not None and pad >= vocab:
        raise ValueError(f"pad_token must lie in [0, vocab_size) = [0, {vocab}), got {pad}")
    if seed is not None:
        generator = torch_generator(seed, device)
    last_only = _takes_last_only(model)

    tokens = prompt
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    logps, masks = [], []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = _logits(model(tokens, last_only=True) if last_only else model(tokens))[:, -1]
            if pad is not None and pad >= logits.shape[-1]:
                raise ValueError(f"pad_token must lie in [0, vocab) = [0, {logits.shape[-1]}), got {pad}")
            mask = allowed(tokens) if callable(allowed) else allowed
            if mask is not None:
                mask = mask.to(device)
                if mask.dtype != torch.bool or mask.shape[-1] != logits.shape[-1]:
                    raise ValueError(
                        f"allowed must give a bool mask (batch, {logits.shape[-1]}), got "
                        f"{mask.dtype} {tuple(mask.shape)}"
                    )
            if temperature == 0.0:
                logp = masked_log_softmax(logits, mask)
                nxt = logp.argmax(-1)
            else:
                logp = masked_log_softmax(logits, mask, temperature)
                nxt = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
            lp = logp.gather(1, nxt[:, None]).squeeze(1)
            active = ~done
            if stop is not None:
                filler = stop if pad is None else torch.full_like(stop, pad)
                nxt = torch.where(active, nxt, filler)
            lp = torch.where(active, lp, torch.zeros_like(lp))
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            logps.append(lp)
            masks.append(active)
            if stop is not None:
                done = done | (nxt == stop)
                if bool(done.all()):
                    break
    log_probs = torch.stack(logps, dim=1)
    gen_mask = torch.stack(masks, dim=1)
    return Samples(tokens, log_probs, gen_mask, gen_mask.sum(1))


def token_log_probs(
    model: Callable[[torch.Tensor], torch.Tensor],
    tokens: torch.Tensor,
    prompt_len: int,
    *,
    temperature: float = 1.0,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """``log π(tokens[:, i] | tokens[:, :i])`` for every position ``i >= prompt_len``: (batch, seq - prompt_len).

    One forward pass, with gradients: the log-probabilities :func:`sample` returned, now differentiable (REINFORCE,
    KL terms). ``temperature`` (> 0) and a fixed ``allowed`` mask (bool, broadcastable to (batch, seq - prompt_len,
    vocab)) must match those of the sampling for the numbers to agree. Mask out padding with :attr:`Samples.mask`.
    """
    if not callable(model):
        raise TypeError(f"model must be callable (tokens -> logits), got {type(model).__name__}")
    tokens = _check_tokens(tokens, "tokens", _model_vocab(model))
    prompt_len = as_int(prompt_len, "prompt_len", 1, tokens.shape[1] - 1)
    logits = _logits(model(tokens[:, :-1]))[:, prompt_len - 1 :]
    token_tensor(tokens, "tokens", logits.shape[-1])
    logp = masked_log_softmax(logits, allowed, temperature)
    return logp.gather(-1, tokens[:, prompt_len:, None].to(logp.device)).squeeze(-1)
