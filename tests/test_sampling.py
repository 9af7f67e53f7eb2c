import pytest
import torch

from iclr26.models import TinyTransformer, TransformerConfig, masked_log_softmax, sample, token_log_probs


def _model(vocab=7, n_ctx=12, seed=0):
    torch.manual_seed(seed)
    return TinyTransformer(TransformerConfig(vocab_size=vocab, n_ctx=n_ctx, d_model=16, n_heads=1, d_mlp=32)).eval()


class FixedLM(torch.nn.Module):
    """A 'language model' whose next-token logits are fixed: exact probabilities for a statistical test."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.as_tensor(logits, dtype=torch.float32))

    def forward(self, tokens):
        return self.logits.expand(tokens.shape[0], tokens.shape[1], -1)


def test_shapes_and_reproducible():
    model = _model()
    prompt = torch.tensor([[1, 2], [3, 4], [0, 0]])
    a = sample(model, prompt, 5, seed=3)
    b = sample(model, prompt, 5, generator=torch.Generator().manual_seed(3))
    assert a.tokens.shape == (3, 7) and a.log_probs.shape == (3, 5) and a.mask.all()
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.log_probs, b.log_probs)
    assert torch.equal(a.tokens[:, :2], prompt)
    assert torch.equal(a.lengths, torch.full((3,), 5))


def test_log_probs_equal_log_softmax_gathered():
    model = _model()
    prompt = torch.randint(0, 7, (16, 3), generator=torch.Generator().manual_seed(0))
    out = sample(model, prompt, 6, temperature=0.7, seed=1)
    with torch.no_grad():
        logits = model(out.tokens[:, :-1])[:, 2:]  # logits predicting positions 3..8
    want = torch.log_softmax(logits / 0.7, -1).gather(-1, out.tokens[:, 3:, None]).squeeze(-1)
    torch.testing.assert_close(out.log_probs, want, atol=1e-5, rtol=1e-5)
    again = token_log_probs(model, out.tokens, 3, temperature=0.7)
    torch.testing.assert_close(again, want, atol=1e-5, rtol=1e-5)
    assert again.requires_grad  # differentiable: REINFORCE can use it


def test_frequencies_match_softmax():
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0, 0.5])
    model = FixedLM(logits)
    n, temp = 20000, 1.5
    out = sample(model, torch.zeros(n, 1, dtype=torch.long), 1, temperature=temp, seed=0)
    freq = torch.bincount(out.tokens[:, 1], minlength=5).float() / n
    p = torch.softmax(logits / temp, -1)
    # five standard errors per cell, and a chi-square test at a fixed 1e-3 level (df = 4: critical value 18.47)
    assert ((freq - p).abs() <= 5 * (p * (1 - p) / n).sqrt()).all(), (freq, p)
    chi2 = float((n * (freq - p) ** 2 / p).sum())
    assert chi2 < 18.47, chi2


def test_allowed_mask_and_greedy():
    model = FixedLM(torch.tensor([3.0, 0.0, 1.0, 2.0]))
    prompt = torch.zeros(500, 1, dtype=torch.long)
    allowed = torch.tensor([False, True, True, False])
    out = sample(model, prompt, 3, allowed=allowed, seed=0)
    assert set(out.tokens[:, 1:].unique().tolist()) <= {1, 2}
    want = torch.log_softmax(torch.tensor([0.0, 1.0]), -1)
    assert torch.allclose(out.log_probs[out.tokens[:, 1:] == 2], want[1].expand(int((out.tokens[:, 1:] == 2).sum())))
    greedy = sample(model, prompt[:2], 2, temperature=0.0)
    assert (greedy.tokens[:, 1:] == 0).all()
    # a callable mask: forbid repeating the last token
    alt = sample(model, prompt[:8], 4, temperature=0.0, allowed=lambda t: torch.nn.functional.one_hot(t[:, -1], 4) == 0)
    assert (alt.tokens[:, 1:] != alt.tokens[:, :-1]).all()


def test_stop_token_per_row_and_padding():
    model = FixedLM(torch.tensor([0.0, 0.0, 0.0]))
    prompt = torch.zeros(200, 1, dtype=torch.long)
    stop = torch.tensor([1, 2] * 100)
    out = sample(model, prompt, 10, stop_token=stop, pad_token=0, seed=2)
    gen = out.tokens[:, 1:]
    for row in range(200):
        n = int(out.lengths[row])
        assert out.mask[row, :n].all() and not out.mask[row, n:].any()
        if n < gen.shape[1] or gen[row, n - 1] == stop[row]:
            assert gen[row, n - 1] == stop[row] and (gen[row, : n - 1] != stop[row]).all()
            assert (gen[row, n:] == 0).all() and (out.log_probs[row, n:] == 0).all()
    # all rows stopped: sampling ends early
    early = sample(FixedLM(torch.tensor([-50.0, 50.0])), torch.zeros(4, 1, dtype=torch.long), 8, stop_token=1)
    assert early.tokens.shape == (4, 2) and (early.lengths == 1).all()


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(prompt=[[1, 2]]), TypeError, "prompt"),
        (dict(prompt=torch.ones(2, 2)), TypeError, "prompt"),
        (dict(prompt=torch.ones(2, dtype=torch.long)), ValueError, "prompt"),
        (dict(max_new_tokens=0), ValueError, "max_new_tokens"),
        (dict(max_new_tokens=2.0), TypeError, "max_new_tokens"),
        (dict(max_new_tokens=20), ValueError, "n_ctx"),
        (dict(temperature=-1.0), ValueError, "temperature"),
        (dict(temperature="hot"), TypeError, "temperature"),
        (dict(allowed=torch.ones(7)), TypeError, "allowed"),
        (dict(allowed=torch.ones(3, 7, dtype=torch.bool)), ValueError, "allowed"),
        (dict(allowed=torch.zeros(7, dtype=torch.bool)), ValueError, "allowed"),
        (dict(stop_token=-1), ValueError, "stop_token"),
        (dict(stop_token=1.5), TypeError, "stop_token"),
        (dict(stop_token=torch.tensor([1, 2, 3])), ValueError, "stop_token"),
        (dict(stop_token=torch.tensor([9, 1])), ValueError, "stop_token"),
        (dict(generator=0), TypeError, "generator"),
        (dict(generator=torch.Generator(), seed=1), ValueError, "seed"),
        (dict(seed=-2), ValueError, "seed"),
        (dict(model="gpt"), TypeError, "model"),
    ],
)
def test_bad_input_names_the_argument(kwargs, exc, name):
    args = dict(model=_model(), prompt=torch.ones(2, 2, dtype=torch.long), max_new_tokens=3)
    args.update(kwargs)
    with pytest.raises(exc, match=name):
        sample(args.pop("model"), args.pop("prompt"), args.pop("max_new_tokens"), **args)


def test_token_log_probs_bad_input():
    model = _model()
    with pytest.raises(ValueError, match="prompt_len"):
        token_log_probs(model, torch.ones(2, 3, dtype=torch.long), 3)
    with pytest.raises(TypeError, match="tokens"):
        token_log_probs(model, torch.ones(2, 3), 1)
    with pytest.raises(TypeError, match="logits"):
        masked_log_softmax(torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        masked_log_softmax(torch.ones(3), temperature=0.0)


class HFStyleLM(torch.nn.Module):
    """Returns an object with ``.logits``, as ``transformers`` causal LMs do."""

    def __init__(self, logits):
        super().__init__()
        self.inner = FixedLM(logits)

    def forward(self, input_ids):
        return type("Output", (), {"logits": self.inner(input_ids)})()


def test_outputs_with_logits_attribute_and_bad_outputs():
    logits = torch.tensor([0.5, -1.0, 2.0])
    prompt = torch.zeros(4, 2, dtype=torch.long)
    a = sample(HFStyleLM(logits), prompt, 3, seed=0)
    b = sample(FixedLM(logits), prompt, 3, seed=0)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.log_probs, b.log_probs)
    torch.testing.assert_close(token_log_probs(HFStyleLM(logits), a.tokens, 2), a.log_probs)
    with pytest.raises(TypeError, match="model must return logits"):
        sample(lambda tokens: tokens.float(), prompt, 2)
