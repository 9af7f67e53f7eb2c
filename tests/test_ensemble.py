import pytest
import torch
from torch import nn

from iclr26.models import MLP, Ensemble, TinyTransformer, TransformerConfig


def _members(make, seeds=(0, 1, 2)):
    out = []
    for s in seeds:
        torch.manual_seed(s)
        out.append(make())
    return out


class _WithBuffer(nn.Module):
    """A linear map followed by a fixed per-member offset stored as a buffer."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("offset", torch.randn(2))

    def forward(self, x):
        return self.lin(x) + self.offset


def _tiny_transformer():
    return TinyTransformer(TransformerConfig(vocab_size=7, n_ctx=4, d_model=8, n_layers=1, n_heads=2, d_mlp=16))


@pytest.mark.parametrize("vectorize", [True, False, None])
@pytest.mark.parametrize(
    "make, x",
    [
        (lambda: MLP([4, 8, 3]), torch.randn(3, 5, 4)),
        (_WithBuffer, torch.randn(3, 5, 3)),
        (_tiny_transformer, torch.randint(7, (3, 5, 4))),
    ],
)
def test_each_member_sees_its_own_batch(make, x, vectorize):
    members = _members(make)
    ens = Ensemble(members)
    assert len(ens) == ens.n_members == 3
    with torch.no_grad():
        out = ens(x, vectorize=vectorize)
        for i, m in enumerate(members):
            torch.testing.assert_close(out[i], m(x[i]))


def test_construction_uses_no_randomness_and_copies_the_members():
    members = _members(lambda: MLP([4, 8, 3]))
    torch.manual_seed(5)
    ens = Ensemble(members)
    after = torch.rand(4)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(4))  # stacking draws nothing: the chapters' numbers do not move
    with torch.no_grad():
        members[0].layers[0].weight.add_(1.0)  # the ensemble holds copies
    assert not torch.equal(ens.member(0).layers[0].weight, members[0].layers[0].weight)


def test_training_the_stack_trains_each_member_as_alone():
    """AdamW on the summed loss of the stack = AdamW on each member separately (same steps, same data)."""
    members = _members(lambda: MLP([4, 8, 1]))
    alone = [MLP([4, 8, 1]) for _ in members]
    for a, m in zip(alone, members):
        a.load_state_dict(m.state_dict())
    ens = Ensemble(members)
    x, y = torch.randn(3, 16, 4), torch.randn(3, 16, 1)
    opt = torch.optim.AdamW(ens.parameters(), lr=1e-2)
    opts = [torch.optim.AdamW(a.parameters(), lr=1e-2) for a in alone]
    for _ in range(5):
        opt.zero_grad()
        (((ens(x) - y) ** 2).mean((1, 2)).sum()).backward()
        opt.step()
        for i, (a, o) in enumerate(zip(alone, opts)):
            o.zero_grad()
            ((a(x[i]) - y[i]) ** 2).mean().backward()
            o.step()
    for i, a in enumerate(alone):
        for (name, p), q in zip(ens.member(i).named_parameters(), a.parameters()):
            torch.testing.assert_close(p, q, msg=f"member {i}, {name}")


def test_member_is_a_standalone_copy_in_eval_mode():
    members = _members(_WithBuffer)
    ens = Ensemble(members)
    m1 = ens.member(1)
    assert isinstance(m1, _WithBuffer) and not m1.training
    assert torch.equal(m1.offset, members[1].offset) and torch.equal(m1.lin.weight, members[1].lin.weight)
    with torch.no_grad():
        m1.lin.weight.zero_()
    assert not torch.equal(ens.member(1).lin.weight, m1.lin.weight)  # editing the copy leaves the stack alone


@pytest.mark.parametrize(
    "make, err, match",
    [
        (lambda: Ensemble(MLP([2, 2])), TypeError, "members"),
        (lambda: Ensemble("mlp"), TypeError, "members"),
        (lambda: Ensemble([]), ValueError, "at least one"),
        (lambda: Ensemble([MLP([2, 2]), "mlp"]), TypeError, r"members\[1\]"),
        (lambda: Ensemble([MLP([2, 2]), MLP([2, 3])]), ValueError, "one architecture"),
        (lambda: Ensemble([MLP([2, 2]), nn.Linear(2, 2)]), ValueError, "one architecture"),
        (lambda: Ensemble([MLP([2, 2])] * 2)(torch.randn(3, 4, 2)), ValueError, "M=2"),
        (lambda: Ensemble([MLP([2, 2])] * 2)(torch.tensor(1.0)), ValueError, "M=2"),
        (lambda: Ensemble([MLP([2, 2])] * 2)([[1.0, 2.0]]), TypeError, "x must be a torch.Tensor"),
        (lambda: Ensemble([MLP([2, 2])] * 2)(torch.randn(2, 4, 2), vectorize=1), TypeError, "vectorize"),
        (lambda: Ensemble([MLP([2, 2])] * 2).member(2), ValueError, "i must be"),
        (lambda: Ensemble([MLP([2, 2])] * 2).member(-1), ValueError, "i must be"),
        (lambda: Ensemble([MLP([2, 2])] * 2).member(1.0), TypeError, "i must be"),
    ],
)
def test_bad_input(make, err, match):
    with pytest.raises(err, match=match):
        make()
