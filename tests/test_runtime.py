import math
import random

import numpy as np
import pytest
import torch

from iclr26.runtime import Config, Timer, pick_device, scale_table, seed_everything, select_scale

TABLE = {"ci": {"n": 10, "steps": 5}, "book": {"n": 100, "steps": 50}, "paper": {"n": 1000, "steps": 500}}


def test_pick_device_auto_and_cpu(monkeypatch):
    """auto prefers CUDA, then MPS, then the CPU: each branch is forced, so the test checks the order itself."""
    mps = getattr(torch.backends, "mps", None)

    def force(cuda: bool, has_mps: bool):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        if mps is not None:
            monkeypatch.setattr(mps, "is_available", lambda: has_mps)

    force(cuda=True, has_mps=True)
    assert pick_device("auto") == torch.device("cuda")
    if mps is not None:
        force(cuda=False, has_mps=True)
        assert pick_device("auto") == torch.device("mps")
    force(cuda=False, has_mps=False)
    assert pick_device("auto") == torch.device("cpu")
    assert pick_device("cpu") == torch.device("cpu")


def test_pick_device_bad_input():
    with pytest.raises(TypeError, match="device"):
        pick_device(3)
    with pytest.raises(ValueError, match="device"):
        pick_device("tpu-please")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            pick_device("cuda")


def test_seed_everything_repeats_all_generators():
    seed_everything(123)
    a = (random.random(), np.random.rand(), torch.rand(1).item())
    seed_everything(123)
    b = (random.random(), np.random.rand(), torch.rand(1).item())
    assert a == b


def test_seed_everything_bad_input():
    with pytest.raises(TypeError, match="seed"):
        seed_everything("0")
    with pytest.raises(TypeError, match="seed"):
        seed_everything(True)
    with pytest.raises(ValueError, match="seed"):
        seed_everything(-1)


def test_select_scale_returns_attribute_config():
    cfg = select_scale(TABLE, "book")
    assert isinstance(cfg, Config)
    assert cfg.n == 100 and cfg["steps"] == 50
    with pytest.raises(AttributeError, match="knob"):
        _ = cfg.missing


def test_select_scale_rejects_unknown_scale_and_bad_tables():
    with pytest.raises(ValueError, match="scale must be one of"):
        select_scale(TABLE, "huge")
    with pytest.raises(TypeError, match="scale"):
        select_scale(TABLE, 1)
    with pytest.raises(ValueError, match="lacks"):
        select_scale({"ci": {}, "book": {}}, "ci")
    with pytest.raises(ValueError, match="unknown scale"):
        select_scale({**TABLE, "tiny": {}}, "ci")
    with pytest.raises(ValueError, match="same knobs"):
        select_scale({**TABLE, "paper": {"n": 1}}, "ci")
    with pytest.raises(TypeError, match="table"):
        select_scale([1, 2], "ci")


def test_scale_table_marks_active_scale():
    frame = scale_table(TABLE, "ci")
    assert "▶ ci" in frame.columns and list(frame.index) == ["n", "steps"]
    with pytest.raises(ValueError, match="scale"):
        scale_table(TABLE, "nope")


def test_timer_measures():
    import time

    assert math.isnan(Timer().seconds)  # nothing measured yet
    with Timer() as t:
        time.sleep(0.05)
    assert 0.045 <= t.seconds < 1.0
