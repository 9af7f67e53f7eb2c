"""M independent networks of one architecture, trained and run as one module: :class:`Ensemble`.

Build the members as usual (each with its own seed), stack them, and train the stack with one optimiser::

    members = []
    for s in seeds:
        torch.manual_seed(s)
        members.append(MLP(...))
    ens = Ensemble(members)               # parameters stacked along a new first axis of length M
    logits = ens(x)                       # x: (M, batch, ...) -> (M, batch, ...), member i sees x[i]
    loss = sum of the members' losses     # the members share no parameter, so their gradients stay independent

The members are run with :func:`torch.func.vmap` over :func:`torch.func.functional_call` on a GPU and one after the
other on a CPU (where the loop is faster than vmap's batched matrix products); both give the same numbers.
:meth:`Ensemble.member` hands back member ``i`` as an ordinary module (with its hook points) for analysis.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from iclr26.validate import as_bool, as_int, as_module

__all__ = ["Ensemble"]


class Ensemble(nn.Module):
    """M independent networks of one architecture, run in one call.

    ``members``: a non-empty list of modules of the same architecture (same parameter and buffer names and shapes),
    e.g. built one after the other with different seeds. Their parameters and buffers are copied into stacked
    tensors (``M`` first); the members themselves are not kept, so later changes to them do not reach the ensemble.
    An ``AdamW`` on ``ensemble.parameters()`` with a loss that sums the members' losses trains each member exactly
    as on its own (AdamW is elementwise).

    ``forward(x)`` takes ``x`` of shape ``(M, batch, ...)`` (one batch per member) and returns ``(M, batch, ...)``.
    The architecture's ``forward`` must take one tensor.
    """

    def __init__(self, members: list[nn.Module]) -> None:
        super().__init__()
        if isinstance(members, nn.Module) or not isinstance(members, (list, tuple)):
            raise TypeError(f"members must be a list of nn.Module, got {type(members).__name__}")
        if not members:
            raise ValueError("members must hold at least one module")
        for i, m in enumerate(members):
            as_module(m, f"members[{i}]")
        first = _signature(members[0])
        for i, m in enumerate(members[1:], 1):
            if type(m) is not type(members[0]) or _signature(m) != first:
                raise ValueError(
                    f"members must share one architecture: members[{i}] ({type(m).__name__}) differs from members[0] "
                    f"({type(members[0]).__name__}) in its type or its parameter/buffer names and shapes"
                )
        self.n_members = len(members)  # M
        params, buffers = stack_module_state(list(members))
        self.names = list(params)
        self.stacked = nn.ParameterList([nn.Parameter(params[n]) for n in self.names])
        for i, b in enumerate(buffers.values()):
            self.register_buffer(f"buf{i}", b)
        self.buffer_names = list(buffers)
        # the architecture (not a registered submodule: its own weights are never trained or used)
        object.__setattr__(self, "template", copy.deepcopy(members[0]))

    def __len__(self) -> int:
        return self.n_members

    def forward(self, x: torch.Tensor, vectorize: bool | None = None) -> torch.Tensor:
        """Run member ``i`` on ``x[i]`` for every ``i``; ``x``: ``(M, batch, ...)``, returns ``(M, batch, ...)``.

        ``vectorize``: ``True`` runs every member in one vmap call, ``False`` member by member; ``None`` (default)
        picks vmap on a GPU and the loop on a CPU, where it is faster than vmap's batched matrix products. Same numbers.
        """
        if not torch.is_tensor(x):
            raise TypeError(f"x must be a torch.Tensor of shape (M, batch, ...), got {type(x).__name__}")
        if x.dim() == 0 or x.shape[0] != self.n_members:
            raise ValueError(
                f"x must have shape (M={self.n_members}, batch, ...): one batch per member, got {tuple(x.shape)}"
            )
        floats = [p.dtype for p in self.stacked if p.is_floating_point()]
        if x.is_floating_point() and floats and x.dtype != floats[0]:  # integer x (token ids) goes to the members
            raise TypeError(f"x must have the members' dtype {floats[0]}, got {x.dtype}; convert it with .to()")
        params = dict(zip(self.names, self.stacked))
        buffers = {n: getattr(self, f"buf{i}") for i, n in enumerate(self.buffer_names)}
        if vectorize is None:
            vectorize = self._device().type != "cpu"
        vectorize = as_bool(vectorize, "vectorize")
        if vectorize:
            return vmap(lambda p, b, xi: functional_call(self.template, (p, b), (xi,)))(params, buffers, x)
        outs = []
        for i in range(len(x)):
            own = ({n: v[i] for n, v in params.items()}, {n: v[i] for n, v in buffers.items()})
            outs.append(functional_call(self.template, own, (x[i],)))
        return torch.stack(outs)

    def member(self, i: int) -> nn.Module:
        """Member ``i`` as a standalone module (a copy, in eval mode), e.g. for hooks and ``run_with_cache``."""
        i = as_int(i, "i", 0, self.n_members - 1)
        m = copy.deepcopy(self.template).to(self._device())
        with torch.no_grad():
            for n, p in m.named_parameters():
                p.copy_(self.stacked[self.names.index(n)][i])
            for n, b in m.named_buffers():
                b.copy_(getattr(self, f"buf{self.buffer_names.index(n)}")[i])
        return m.eval()

    def _device(self) -> torch.device:
        if len(self.stacked):
            return self.stacked[0].device
        return self.buf0.device if self.buffer_names else torch.device("cpu")


def _signature(module: nn.Module) -> tuple:
    return (
        tuple((n, tuple(p.shape), p.dtype) for n, p in module.named_parameters()),
        tuple((n, tuple(b.shape), b.dtype) for n, b in module.named_buffers()),
    )
