import math
import random

import numpy as np
import pytest
import torch

import iclr26
from iclr26 import runtime
from iclr26.runtime import Config, Setup, Timer, pick_device, scale_table, seed_everything, select_scale, setup

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


def test_setup_matches_the_manual_sequence():
    """setup(...) leaves every generator exactly where the chapters' old four lines left them."""
    seed_everything(7)
    manual_device = pick_device("cpu")
    manual_cfg = select_scale(TABLE, "book")
    manual = (random.random(), np.random.rand(), torch.rand(3))
    out = setup(TABLE, "book", seed=7, device="cpu", style=False)
    assert isinstance(out, Setup) and iclr26.setup is setup
    cfg, device = out
    assert cfg == manual_cfg and isinstance(cfg, Config) and cfg.steps == 50
    assert device == manual_device == out.device
    assert (random.random(), np.random.rand()) == manual[:2]
    assert torch.equal(torch.rand(3), manual[2])
    assert setup(TABLE, "ci", seed=3, style=False).cfg.n == 10  # keyword defaults: seed given, device "auto"


def test_setup_applies_the_style_and_caps_threads(monkeypatch):
    import matplotlib as mpl

    monkeypatch.setitem(mpl.rcParams, "figure.dpi", 42)  # restored after the test
    setup(TABLE, "ci", device="cpu", style=False)
    assert mpl.rcParams["figure.dpi"] == 42  # style=False leaves matplotlib alone
    setup(TABLE, "ci", device="cpu")
    assert mpl.rcParams["figure.dpi"] == 110  # the book's style
    calls = []
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    setup(TABLE, "ci", device="cpu", style=False)
    assert calls == []  # threads=None leaves torch's thread count alone
    setup(TABLE, "ci", device="cpu", threads=2, style=False)
    setup(TABLE, "ci", device="cpu", threads=16, style=False)
    assert calls == [2, 8]  # a cap: min(threads, current), never more threads than before


def test_setup_shows_the_scale_table_only_in_ipython(monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(runtime, "_show", shown.append)
    setup(TABLE, "paper", device="cpu", style=False)
    assert len(shown) == 1 and "▶ paper" in shown[0].columns
    setup(TABLE, "paper", device="cpu", style=False, show=False)
    assert len(shown) == 1
    monkeypatch.undo()
    setup(TABLE, "paper", device="cpu", style=False)  # outside IPython: nothing is printed
    assert capsys.readouterr().out == ""


def test_setup_shows_through_ipython_display(monkeypatch):
    """Inside a kernel (get_ipython() is not None) the table goes to IPython.display.display."""
    import IPython
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    setup(TABLE, "ci", device="cpu", style=False)
    assert len(shown) == 1 and "▶ ci" in shown[0].columns


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        ({"scale": "huge"}, ValueError, "scale"),
        ({"scale": 1}, TypeError, "scale"),
        ({"scales": {"ci": {}}}, ValueError, "lacks"),
        ({"seed": "0"}, TypeError, "seed"),
        ({"seed": True}, TypeError, "seed"),
        ({"seed": -1}, ValueError, "seed"),
        ({"seed": 2**32}, ValueError, "seed"),
        ({"device": 3}, TypeError, "device"),
        ({"device": "tpu-please"}, ValueError, "device"),
        ({"threads": 0}, ValueError, "threads"),
        ({"threads": 2.0}, TypeError, "threads"),
        ({"style": "yes"}, TypeError, "style"),
        ({"show": 1}, TypeError, "show"),
    ],
)
def test_setup_bad_input_changes_nothing(kwargs, err, match):
    args = {"seed": 0, "device": "cpu", **kwargs}
    scales, scale = args.pop("scales", TABLE), args.pop("scale", "ci")
    random.seed(99)
    with pytest.raises(err, match=match):
        setup(scales, scale, **args)
    after = random.random()
    random.seed(99)
    assert after == random.random()  # every argument is checked before anything is seeded


def test_seed_everything_and_pick_device_take_numpy_and_torch_values():
    seed_everything(np.int64(5), deterministic=np.bool_(False))
    a = torch.rand(1).item()
    seed_everything(5, deterministic=False)
    assert torch.rand(1).item() == a
    assert pick_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(TypeError, match="seed must be an int"):
        seed_everything(5.0)
    with pytest.raises(ValueError, match="seed must be an int in"):
        seed_everything(2**32)
    with pytest.raises(TypeError, match="deterministic must be a bool"):
        seed_everything(0, deterministic=1)
    with pytest.raises(ValueError, match="scale must be one of"):
        scale_table({"ci": {"a": 1}, "book": {"a": 2}, "paper": {"a": 3}}, "huge")


def test_pick_device_gives_each_torchrun_process_its_own_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert pick_device("auto") == torch.device("cuda", 3)
    monkeypatch.delenv("LOCAL_RANK")
    assert pick_device("auto") == torch.device("cuda")
