"""Unit tests of iclr26.data.scenes: the shape-scene generator of the vlm_binding chapter."""

import numpy as np
import pytest
import torch

from iclr26.data import COLOURS, SHAPES, VOCAB, make_scenes, render_scenes, sentence_length


def words(row):
    return [VOCAB[i] for i in row if i]


def test_scenes_are_consistent():
    sc = make_scenes(200, (2, 4), seed=0)
    assert sc.images.shape == (200, 3, 16, 16) and sc.tokens.shape == (200, sentence_length(4))
    assert set(sc.n_objects.tolist()) == {2, 3, 4}
    for i in range(len(sc)):
        k = int(sc.n_objects[i])
        cells = sc.cells[i, :k].tolist()
        assert len(set(cells)) == k and (sc.cells[i, k:] == -1).all()
        objs = list(zip(sc.colours[i, :k].tolist(), sc.shapes[i, :k].tolist()))
        assert len(set(objs)) == k  # no two objects share colour and shape
        w = words(sc.tokens[i])
        assert w[:3] == ["there", "is", "a"] and w[-3:-1] == ["and", "a"]
        assert w[-1] == list(COLOURS)[objs[-1][0]]  # the sentence ends with the target's colour
        named = {(list(COLOURS).index(w[j]), SHAPES.index(w[j + 1])) for j in range(len(w) - 3) if w[j] in COLOURS}
        assert named == set(objs[:-1])  # every object but the target is named
    assert torch.equal(sc.answers[:, 0], sc.tokens[:, -1])
    assert sc.target_cell.tolist() == [int(sc.cells[i, sc.n_objects[i] - 1]) for i in range(len(sc))]


def test_render_puts_each_object_in_its_cell():
    sc = make_scenes(20, 3, seed=1)
    img = sc.images
    for i in range(20):
        lit = {
            int(c)
            for c in range(16)
            if img[i, :, 4 * (c // 4) : 4 * (c // 4) + 4, 4 * (c % 4) : 4 * (c % 4) + 4].sum() > 0
        }
        assert lit == set(sc.cells[i].tolist())
    assert torch.equal(render_scenes(sc.cells, sc.colours, sc.shapes), img)


def test_seed_palette_padding_and_correlation():
    a, b = make_scenes(50, 2, seed=3), make_scenes(50, 2, seed=3)
    assert torch.equal(a.images, b.images) and torch.equal(a.tokens, b.tokens)
    rng = np.random.default_rng(0)
    assert not torch.equal(make_scenes(50, 2, seed=rng).tokens, make_scenes(50, 2, seed=rng).tokens)
    sub = make_scenes(100, 2, colours=[3, 4, 5], seed=0)
    assert set(sub.colours.flatten().tolist()) <= {3, 4, 5}
    padded = make_scenes(10, 2, pad_objects=4, seed=0)
    assert padded.tokens.shape[1] == sentence_length(4) and (padded.tokens[:, :8] == 0).all()
    corr = make_scenes(500, 2, correlation=1.0, seed=0)
    same = (corr.colours[:, :2] == corr.shapes[:, :2]).float().mean()
    assert same > 0.95
    assert len(make_scenes(5, 2, seed=0).subset([0, 2])) == 2


@pytest.mark.parametrize(
    "kw, err, match",
    [
        (dict(n=0), ValueError, "n"),
        (dict(n=2.5), TypeError, "n"),
        (dict(n_objects=1), ValueError, "n_objects"),
        (dict(n_objects=(4, 2)), ValueError, "n_objects"),
        (dict(n_objects=(2, 3, 4)), ValueError, "n_objects"),
        (dict(colours=[0, 0]), ValueError, "colours"),
        (dict(colours=[9]), ValueError, "colours"),
        (dict(colours="red"), TypeError, "colours"),
        (dict(shapes=[0], colours=[0]), ValueError, "distinct objects"),
        (dict(correlation=1.5), ValueError, "correlation"),
        (dict(pad_objects=1), ValueError, "pad_objects"),
        (dict(seed=-1), ValueError, "seed"),
    ],
)
def test_bad_arguments(kw, err, match):
    args = dict(n=4, n_objects=2)
    args.update(kw)
    with pytest.raises(err, match=match):
        make_scenes(**args)


def test_render_and_sentence_length_bad_input():
    with pytest.raises(TypeError, match="cells"):
        render_scenes(torch.zeros(2, 2), torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long))
    z = torch.zeros(2, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="out of range"):
        render_scenes(z + 16, z, z)
    with pytest.raises(ValueError, match="one shape"):
        render_scenes(z, z[:, :1], z)
    with pytest.raises(ValueError, match="max_objects"):
        sentence_length(1)


# ------------------------------------------------------------------------------------------------ paper scale
def test_scene_prompts_and_pil_images():
    from iclr26.data import scene_pil_images, scene_prompts

    sc = make_scenes(3, 2, seed=0)
    prompts = scene_prompts(sc)
    c, s = list(COLOURS)[int(sc.colours[0, 0])], SHAPES[int(sc.shapes[0, 0])]
    assert prompts[0] == f"In this image there is a {c} {s} and a" and len(prompts) == 3
    imgs = scene_pil_images(sc, size=32)
    assert imgs[0].size == (32, 32) and imgs[0].mode == "RGB"
    back = torch.tensor(np.asarray(imgs[1].resize((16, 16), 0))).permute(2, 0, 1).float() / 255
    torch.testing.assert_close(back, sc.images[1], atol=1 / 255, rtol=0)
    with pytest.raises(ValueError, match="2 objects"):
        scene_prompts(make_scenes(3, 3, seed=0))
    with pytest.raises(TypeError, match="scenes"):
        scene_prompts(sc.images)
    with pytest.raises(TypeError, match="size"):
        scene_pil_images(sc, size=2.5)


def test_paper_scale_loading_on_a_tiny_random_vlm(tmp_path):
    """The paper-scale path of the vlm_binding chapter (load_pretrained + vlm_query_states) on a tiny local VLM."""
    import warnings

    from iclr26.data import vlm_query_states
    from iclr26.hf import load_pretrained, write_tiny_model

    pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_tiny_model(
            "llava", tmp_path, words=["In this image there is a and Describe the image.", *COLOURS, *SHAPES]
        )
        processor = load_pretrained(tmp_path, "processor")
        model = load_pretrained(tmp_path, "image_text_to_text", dtype=torch.float32).eval()
        sc = make_scenes(3, 2, seed=1)
        states, pred = vlm_query_states(model, processor, sc, size=32)
        plain, _ = vlm_query_states(model, processor, sc, size=32, chat=False)
    assert states.shape == (3, 3, 16) and states.dtype == torch.float32  # embeddings + 2 layers, d = 16
    assert pred.shape == (3,) and ((pred >= 0) & (pred < len(COLOURS))).all()
    assert not torch.allclose(states, plain)  # the chat template changes the context
    with pytest.raises(TypeError, match="chat"):
        vlm_query_states(model, processor, sc, chat="yes")
    with pytest.raises(TypeError, match="model and processor"):
        vlm_query_states(None, processor, sc)
