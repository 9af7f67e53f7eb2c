"""`fit` under `torchrun` (many processes, gloo on the CPU): the ranks agree with each other and with one process
trained on the whole batch; resume from rank 0's checkpoint works; batches are sharded by rank as documented."""

import json
import sys
from collections import namedtuple
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from iclr26.train import distributed_env, fit, shard_batch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import distributed_worker as worker  # noqa: E402

TOL = 1e-5  # float32: the two-rank average of half-batch gradients vs the whole-batch gradient, after 6 AdamW steps


def test_shard_batch_slices_every_tensor_by_rank():
    Pair = namedtuple("Pair", "x y")
    batch = {"a": torch.arange(8).reshape(4, 2), "pair": Pair(torch.arange(4), [torch.arange(4) * 10]), "n": 3}
    first, second = shard_batch(batch, 0, 2), shard_batch(batch, 1, 2)
    assert first["a"].tolist() == [[0, 1], [2, 3]] and second["a"].tolist() == [[4, 5], [6, 7]]
    assert isinstance(second["pair"], Pair) and second["pair"].x.tolist() == [2, 3]
    assert second["pair"].y[0].tolist() == [20, 30] and second["n"] == 3
    assert shard_batch(batch, 0, 1) is batch
    scalar = torch.tensor(2.0)
    assert shard_batch(scalar, 1, 2) is scalar


@pytest.mark.parametrize(
    "args, exc, match",
    [
        ((torch.zeros(5, 2), 0, 2), ValueError, "divisible"),
        ((torch.zeros(4), 2, 2), ValueError, "rank"),
        ((torch.zeros(4), 0, 0), ValueError, "world_size"),
        ((torch.zeros(4), 0.5, 2), TypeError, "rank"),
    ],
)
def test_shard_batch_bad_input(args, exc, match):
    with pytest.raises(exc, match=match):
        shard_batch(*args)


def test_single_process_is_untouched(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed_env() is None
    model, opt = worker.model_and_optimizer()
    with pytest.raises(ValueError, match="distributed=True"):
        fit(model, worker.loss_fn, worker.global_batch, opt, steps=1, progress=False, distributed=True)
    with pytest.raises(ValueError, match="distributed"):
        fit(model, worker.loss_fn, worker.global_batch, opt, steps=1, progress=False, distributed="yes")


def _reference(steps: int):
    """One process on the whole global batch."""
    model, opt = worker.model_and_optimizer()
    history = fit(model, worker.loss_fn, worker.global_batch, opt, steps=steps, log_every=1, clip=1.0, progress=False)
    return model.state_dict(), history


@pytest.mark.kernel
@pytest.mark.parametrize("mode", ["fit", "resume"])
def test_two_gloo_ranks_match_one_process_on_the_whole_batch(tmp_path, mode, torchrun):
    torchrun(HERE / "distributed_worker.py", tmp_path, mode)
    ranks = [load_file(str(tmp_path / f"rank{r}.safetensors")) for r in (0, 1)]
    ref_state, ref_history = _reference(worker.STEPS)
    for name, want in ref_state.items():
        assert torch.equal(ranks[0][name], ranks[1][name]), f"{mode}: ranks disagree on {name}"
        diff = (ranks[0][name] - want).abs().max().item()
        assert diff <= TOL, f"{mode}: {name} differs from the one-process run by {diff:.2e} > {TOL}"
    histories = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [row["loss"] for row in histories[0]] == [row["loss"] for row in histories[1]]
    assert [row["step"] for row in histories[0]] == ref_history["step"].tolist()
    # the logged loss is the rank average of half-batch means = the whole-batch mean
    assert histories[0][-1]["loss"] == pytest.approx(ref_history["loss"].iloc[-1], abs=1e-5)
    assert histories[0][-1]["acc"] == pytest.approx(ref_history["acc"].iloc[-1], abs=1e-6)
    if mode == "resume":
        assert (tmp_path / "half.safetensors").is_file()
