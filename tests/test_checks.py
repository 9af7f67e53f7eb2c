import numpy as np
import pytest
import torch

from iclr26.checks import float_tensor


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
