"""Unit tests of iclr26.validate, and one test per companion module that it follows the same rules:
an integer argument takes ``np.int64`` (what a NumPy grid yields) and refuses a float with a ``TypeError`` naming it."""

import math
import types

import numpy as np
import pytest
import torch

from iclr26 import counterfactuals, data, diffusion, hf, optim, runtime, sae, sweep, topology, train
from iclr26.validate import (
    as_bool,
    as_device,
    as_float,
    as_generator,
    as_int,
    as_module,
    as_prob,
    float_tensor,
    one_of,
    torch_generator,
)


# ------------------------------------------------------------------------------------------------ float_tensor
def test_float_tensor_accepts_and_returns():
    x = torch.zeros(2, 3)
    assert float_tensor(x, "x", ndim=2, last=3) is x
    assert float_tensor(np.zeros((2, 3)), "x", numpy_ok=True).shape == (2, 3)


def test_float_tensor_bad_input_names_argument():
    with pytest.raises(TypeError, match="weights must be a torch.Tensor"):
        float_tensor([1.0], "weights")
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        float_tensor(np.zeros(3), "x")
    with pytest.raises(TypeError, match="floating-point"):
        float_tensor(torch.zeros(3, dtype=torch.long), "x")
    with pytest.raises(ValueError, match="2 or 3 dimensions"):
        float_tensor(torch.zeros(3), "x", ndim=(2, 3))
    with pytest.raises(ValueError, match="last dimension 4"):
        float_tensor(torch.zeros(2, 3), "x", last=4)


# ------------------------------------------------------------------------------------------------ scalars
def test_check_int_accepts_integers_and_returns_a_python_int():
    for v in (3, np.int64(3), np.int32(3), np.uint8(3)):
        out = as_int(v, "n", low=1, high=3)
        assert out == 3 and type(out) is int
    assert as_int(-5, "n") == -5  # no bounds: any int


@pytest.mark.parametrize("bad", [3.0, np.float64(3.0), True, np.bool_(True), "3", None, torch.tensor(3)])
def test_check_int_wrong_type_is_a_type_error_naming_the_argument(bad):
    with pytest.raises(TypeError, match=r"^n_steps must be an int"):
        as_int(bad, "n_steps")


def test_check_int_out_of_range_is_a_value_error_with_the_range():
    with pytest.raises(ValueError, match=r"^k must be an int >= 1, got 0$"):
        as_int(0, "k", low=1)
    with pytest.raises(ValueError, match=r"^k must be an int <= 4, got 5$"):
        as_int(np.int64(5), "k", high=4)
    with pytest.raises(ValueError, match=r"^k must be an int in \[1, 4\], got 9$"):
        as_int(9, "k", 1, 4)


def test_check_float_accepts_reals_and_returns_a_float():
    for v in (2, 2.0, np.float32(2.0), np.float64(2.0), np.int64(2)):
        out = as_float(v, "lr", 0.0, low_open=True)
        assert out == 2.0 and type(out) is float
    assert as_float(0.0, "wd", 0.0) == 0.0  # closed bound: the bound itself is allowed
    assert as_float(math.inf, "t", 0.0, allow_inf=True) == math.inf


@pytest.mark.parametrize("bad", [True, "0.1", None, [0.1], torch.tensor(0.1), 1j])
def test_check_float_wrong_type_is_a_type_error(bad):
    with pytest.raises(TypeError, match=r"^lr must be a number"):
        as_float(bad, "lr")


def test_check_float_bounds_nan_and_inf_are_value_errors():
    with pytest.raises(ValueError, match=r"^lr must be a number > 0.0, got 0.0$"):
        as_float(0.0, "lr", 0.0, low_open=True)
    with pytest.raises(ValueError, match=r"^beta must be a number in \[0.0, 1.0\), got 1.0$"):
        as_float(1.0, "beta", 0.0, 1.0, high_open=True)
    with pytest.raises(ValueError, match=r"^p must be a number in \(0.0, 1.0\]"):
        as_float(-0.5, "p", 0.0, 1.0, low_open=True)
    with pytest.raises(ValueError, match=r"^x must be a finite number, got nan$"):
        as_float(float("nan"), "x")
    with pytest.raises(ValueError, match="finite"):
        as_float(math.inf, "x")
    with pytest.raises(ValueError, match="finite"):
        as_float(float("nan"), "x", allow_inf=True)  # NaN is never a number here
    with pytest.raises(ValueError, match="<= 1.0"):
        as_float(math.inf, "x", high=1.0, allow_inf=True)  # ±inf still obeys the bounds


def test_check_prob():
    assert as_prob(0, "p") == 0.0 and as_prob(np.float64(1.0), "p") == 1.0
    with pytest.raises(ValueError, match=r"^p must be a number in \[0.0, 1.0\]"):
        as_prob(1.5, "p")
    with pytest.raises(TypeError, match="^p must be"):
        as_prob("0.5", "p")


def test_check_bool():
    assert as_bool(True, "fast") is True and as_bool(np.bool_(False), "fast") is False
    for bad in (0, 1, "True", None):
        with pytest.raises(TypeError, match="^fast must be a bool"):
            as_bool(bad, "fast")


def test_check_choice():
    assert one_of("b", "mode", ("a", "b")) == "b"
    assert one_of(None, "fn", (None, "x")) is None
    with pytest.raises(ValueError, match=r"^mode must be one of 'a', 'b'; got 'c'$"):
        one_of("c", "mode", ["a", "b"])
    with pytest.raises(ValueError, match="^mode must be one of"):
        one_of({}, "mode", ("a", "b"))  # unhashable: still a clear ValueError


def test_check_device():
    assert as_device("cpu") == torch.device("cpu")
    dev = torch.device("cpu")
    assert as_device(dev) is dev
    with pytest.raises(ValueError, match="^device is not a device torch knows"):
        as_device("tpu9")
    with pytest.raises(TypeError, match="^where must be a str or torch.device, got int"):
        as_device(0, "where")


# ------------------------------------------------------------------------------------------------ randomness
def test_check_module():
    lin = torch.nn.Linear(2, 2)
    assert as_module(lin) is lin
    with pytest.raises(TypeError, match=r"net must be a torch.nn.Module, got function"):
        as_module(lambda x: x, "net")
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        as_module(torch.zeros(2))


def test_as_generator_int_is_default_rng_and_generator_passes_through():
    a, b = as_generator(7), np.random.default_rng(7)
    np.testing.assert_array_equal(a.random(5), b.random(5))
    np.testing.assert_array_equal(as_generator(np.int64(7)).random(3), np.random.default_rng(7).random(3))
    g = np.random.default_rng(1)
    assert as_generator(g) is g  # one generator threaded through several calls


@pytest.mark.parametrize(
    "bad, err",
    [
        (1.0, TypeError),
        (True, TypeError),
        ("1", TypeError),
        (None, TypeError),
        (np.random.RandomState(0), TypeError),
        (-1, ValueError),
    ],
)
def test_as_generator_bad_seed(bad, err):
    with pytest.raises(err, match="^rng_seed must be an int >= 0 or a numpy.random.Generator"):
        as_generator(bad, "rng_seed")


def test_torch_generator_int_is_manual_seed():
    a = torch.randn(4, generator=torch_generator(3))
    b = torch.randn(4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    assert torch.equal(
        torch.randn(2, generator=torch_generator(np.int64(3))),
        torch.randn(2, generator=torch.Generator().manual_seed(3)),
    )


def test_torch_generator_from_numpy_generator_is_reproducible_and_advances_it():
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    t1, t2 = torch_generator(g1), torch_generator(g2)
    assert torch.equal(torch.randn(3, generator=t1), torch.randn(3, generator=t2))
    assert g1.bit_generator.state != np.random.default_rng(5).bit_generator.state  # one draw was taken
    assert torch_generator(g1).initial_seed() != torch_generator(g1).initial_seed()


def test_torch_generator_bad_input():
    with pytest.raises(TypeError, match="^seed must be an int"):
        torch_generator(1.5)
    with pytest.raises(ValueError, match="^seed must be an int >= 0"):
        torch_generator(-1)
    with pytest.raises(ValueError, match="device"):
        torch_generator(0, device="tpu9")
    assert torch_generator(0, device=torch.device("cpu")).device == torch.device("cpu")


# ------------------------------------------------------------------------------------------------ every module
def _fake_lm():
    """A stand-in for a transformers causal LM: a config, parameters, and a list of blocks that each add 1."""

    class FakeLM(torch.nn.Module):
        config = types.SimpleNamespace(num_hidden_layers=2)

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.layers = torch.nn.ModuleList([torch.nn.Identity(), torch.nn.Identity()])

        def forward(self, input_ids, **kwargs):
            h = input_ids.float()[..., None].expand(-1, -1, 3)
            for block in self.layers:
                h = block(h + 1)
            return h

    return FakeLM()


def _classifier():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    y = (X[:, 0] > 0).astype(int)
    return LogisticRegression().fit(X, y), X[y == 0][:3]


def _fake_lm_activations(n):
    return hf.residual_activations(_fake_lm(), torch.ones(2, 3, dtype=torch.long), layer=n)


def _make_optimizer(n):
    return optim.make_optimizer("muon", torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 2)), ns_steps=n)


def _growing_spheres(n):
    model, X = _classifier()
    return counterfactuals.growing_spheres_cf(model, X, n_samples=n, seed=0)


# (module, argument, value, a call that takes the value): one public function per module
MODULES = [
    ("train", "total_steps", 10, lambda n: train.lr_multiplier(0, n, "warmup_cosine")),
    ("optim", "ns_steps", 5, _make_optimizer),
    ("sweep", "max_evals", 3, lambda n: sweep.coordinate_descent(lambda c: c["a"] ** 2, {"a": [0, 1]}, max_evals=n)),
    ("runtime", "seed", 0, lambda n: runtime.seed_everything(n, deterministic=False)),
    ("sae", "k", 2, lambda n: sae.TopKSAE(d_in=4, width=8, k=n)),
    ("diffusion", "T", 10, lambda n: diffusion.make_schedule(n)),
    ("counterfactuals", "n_samples", 10, _growing_spheres),
    ("topology", "n_perm", 10, lambda n: topology.mmd_circular_test([0.0, 0.5, 1.0], [1.0, 1.5, 2.0], n_perm=n)),
    ("hf", "layer", 1, _fake_lm_activations),
    ("data.markov", "vocab_size", 4, lambda n: data.MarkovLanguage(vocab_size=n)),
    ("data.languages", "n_topics", 4, lambda n: data.TopicLanguage(n_topics=n)),
    ("data.planted", "n_seq", 2, lambda n: data.planted_slow_fast(n, 8, 4)),
    ("data.tabular", "max_rows", 50, lambda n: data.load_tabular("breast_cancer", max_rows=n)),
]


@pytest.mark.parametrize("module, arg, value, call", MODULES, ids=[m[0] for m in MODULES])
def test_every_module_takes_numpy_ints_and_refuses_floats(module, arg, value, call):
    call(np.int64(value))  # a NumPy integer is an int
    with pytest.raises(TypeError, match=rf"^{arg} must be an int"):
        call(float(value))  # a float where an int belongs: TypeError, naming the argument
