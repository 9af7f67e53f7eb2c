"""Shape scenes for binding experiments: coloured shapes on a grid, and the sentence that describes them.

A scene is a ``grid × grid`` board of ``cell × cell``-pixel cells (16×16 RGB and 16 cells by default); 2–4 objects,
each a colour (of 6) and a shape (of 6 4×4 masks), sit in distinct cells, and no two objects share both colour and
shape. Its sentence names every object but one, in random order, and then the last one::

    there is a red square and a blue circle and a  ->  green  ->  cross

The model reads the image (as patch tokens) and the sentence; at the last ``a`` it must name the remaining object's
colour, then, given the colour, its shape. ``make_scenes`` returns the images, the objects' cells, colours and shapes
(the remaining, "target" object last) and the sentence as token ids (left-padded to one length)::

    sc = make_scenes(512, n_objects=(2, 4), seed=0)
    sc.images            # (512, 3, 16, 16) float32 in [0, 1]
    sc.tokens            # (512, T) long: the sentence including the target's colour word; predict at -2 and -1
    sc.target_cell       # (512,) the target's cell, 0 … 15 (row-major)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.validate import as_bool, as_float, as_generator, as_int

__all__ = [
    "COLOURS",
    "SHAPES",
    "SHAPE_MASKS",
    "VOCAB",
    "Scenes",
    "make_scenes",
    "render_scenes",
    "scene_pil_images",
    "scene_prompts",
    "sentence_length",
    "vlm_query_states",
]

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (1.0, 0.1, 0.1),
    "green": (0.1, 0.8, 0.1),
    "blue": (0.15, 0.25, 1.0),
    "yellow": (1.0, 0.9, 0.1),
    "magenta": (0.9, 0.1, 0.9),
    "cyan": (0.1, 0.9, 0.9),
}
_S = {
    "square": ["####", "####", "####", "####"],
    "circle": [".##.", "####", "####", ".##."],
    "cross": [".#..", "####", ".#..", ".#.."],
    "triangle": ["...#", "..##", ".###", "####"],
    "bar": ["....", "####", "####", "...."],
    "ring": ["####", "#..#", "#..#", "####"],
}
SHAPES: tuple[str, ...] = tuple(_S)
SHAPE_MASKS = torch.tensor([[[c == "#" for c in row] for row in rows] for rows in _S.values()], dtype=torch.float32)
VOCAB: tuple[str, ...] = ("<pad>", "there", "is", "a", "and", *COLOURS, *SHAPES)
_TOK = {w: i for i, w in enumerate(VOCAB)}
_C0, _S0 = _TOK["red"], _TOK["square"]


def sentence_length(max_objects: int) -> int:
    """Tokens in the model's input for scenes of up to ``max_objects`` objects (the target's colour word included)."""
    max_objects = as_int(max_objects, "max_objects", low=2)
    return 8 + 4 * (max_objects - 2)  # there is a c s (and a c s)* and a c


@dataclass
class Scenes:
    """A batch of scenes. Object arrays are (n, max_objects), padded with -1; the target object is at index
    ``n_objects - 1``. ``tokens`` (n, T): the sentence up to and including the target's colour word; the colour
    answer is predicted at position ``T - 2`` (the last ``a``) and the shape answer at ``T - 1``."""

    images: torch.Tensor
    cells: torch.Tensor
    colours: torch.Tensor
    shapes: torch.Tensor
    n_objects: torch.Tensor
    tokens: torch.Tensor

    def __len__(self) -> int:
        return self.images.shape[0]

    def _target(self, a: torch.Tensor) -> torch.Tensor:
        return a.gather(1, (self.n_objects - 1).unsqueeze(1)).squeeze(1)

    @property
    def target_cell(self) -> torch.Tensor:
        return self._target(self.cells)

    @property
    def target_colour(self) -> torch.Tensor:
        return self._target(self.colours)

    @property
    def target_shape(self) -> torch.Tensor:
        return self._target(self.shapes)

    @property
    def answers(self) -> torch.Tensor:
        """(n, 2) token ids: the target's colour word and shape word."""
        return torch.stack([self.target_colour + _C0, self.target_shape + _S0], 1)

    def subset(self, idx: torch.Tensor | np.ndarray | Sequence[int]) -> Scenes:
        if isinstance(idx, (str, bytes)) or not isinstance(idx, (torch.Tensor, np.ndarray, Sequence)):
            raise TypeError(f"idx must be a tensor, array or sequence of scene indices, got {type(idx).__name__}")
        idx = torch.as_tensor(np.asarray(idx) if isinstance(idx, Sequence) else idx)
        if idx.dtype == torch.bool:
            if idx.shape != (len(self),):
                raise ValueError(f"idx: a bool mask must have shape ({len(self)},), got {tuple(idx.shape)}")
        elif idx.is_floating_point() or idx.is_complex():
            raise TypeError(f"idx must hold integer indices or a bool mask, got dtype {idx.dtype}")
        elif idx.numel() and (int(idx.min()) < -len(self) or int(idx.max()) >= len(self)):
            raise ValueError(f"idx must index {len(self)} scenes, got indices in [{int(idx.min())}, {int(idx.max())}]")
        return Scenes(*(getattr(self, f)[idx] for f in ("images", "cells", "colours", "shapes", "n_objects", "tokens")))


def render_scenes(cells: torch.Tensor, colours: torch.Tensor, shapes: torch.Tensor, grid: int = 4) -> torch.Tensor:
    """Images (n, 3, 4·grid, 4·grid) of the objects (n, k) given by cell, colour and shape indices (-1: none)."""
    grid = as_int(grid, "grid", low=1)
    for name, a in (("cells", cells), ("colours", colours), ("shapes", shapes)):
        if not isinstance(a, torch.Tensor) or a.dtype != torch.long or a.dim() != 2:
            raise TypeError(f"{name} must be a 2-D long tensor (scenes, objects)")
    if not cells.shape == colours.shape == shapes.shape:
        raise ValueError("cells, colours and shapes must have one shape")
    limits = (("cells", cells, grid * grid), ("colours", colours, len(COLOURS)), ("shapes", shapes, len(SHAPES)))
    for name, a, n in limits:
        if a.numel() and (int(a.max()) >= n or int(a.min()) < -1):
            got = f"[{int(a.min())}, {int(a.max())}]"
            raise ValueError(f"{name} out of range: must lie in [-1, {n}) (-1: none; grid={grid}), got {got}")
    n, k = cells.shape
    rgb = torch.tensor(list(COLOURS.values()))
    img = torch.zeros(n, grid, grid, 3, 4, 4)
    for j in range(k):
        ok = cells[:, j] >= 0
        r, c = cells[ok, j] // grid, cells[ok, j] % grid
        patch = rgb[colours[ok, j]][:, :, None, None] * SHAPE_MASKS[shapes[ok, j]][:, None]
        img[ok.nonzero().squeeze(1), r, c] = patch
    return img.permute(0, 3, 1, 4, 2, 5).reshape(n, 3, grid * 4, grid * 4)


def make_scenes(
    n: int,
    n_objects: int | tuple[int, int] = 2,
    *,
    grid: int = 4,
    colours: Sequence[int] | None = None,
    shapes: Sequence[int] | None = None,
    correlation: float = 0.0,
    pad_objects: int | None = None,
    seed: int | np.random.Generator = 0,
) -> Scenes:
    """``n`` random scenes with ``n_objects`` objects (an int, or an inclusive range ``(lo, hi)``) in distinct cells.

    ``colours`` / ``shapes``: the palette to draw from (indices into :data:`COLOURS` / :data:`SHAPES`; default all).
    ``correlation``: the probability that an object's shape is tied to its colour (colour ``i`` → shape ``i``);
    0 draws them independently. Objects with the same colour and shape are redrawn.
    ``pad_objects``: left-pad the sentences to the length of a ``pad_objects``-object sentence (default: the largest
    object count drawn), so that scenes with fewer objects match a model trained on more.
    """
    n = as_int(n, "n", low=1)
    grid = as_int(grid, "grid", low=2)
    if isinstance(n_objects, tuple):
        if len(n_objects) != 2:
            raise ValueError(f"n_objects must be an int or a (lo, hi) pair, got {n_objects!r}")
        lo, hi = (as_int(v, "n_objects", low=2, high=grid * grid) for v in n_objects)
        if lo > hi:
            raise ValueError(f"n_objects: lo={lo} exceeds hi={hi}")
    else:
        lo = hi = as_int(n_objects, "n_objects", low=2, high=grid * grid)
    correlation = as_float(correlation, "correlation", 0.0, 1.0)
    pal_c = _palette(colours, "colours", len(COLOURS))
    pal_s = _palette(shapes, "shapes", len(SHAPES))
    if len(pal_c) * len(pal_s) < hi:
        raise ValueError(f"colours × shapes give {len(pal_c) * len(pal_s)} distinct objects, fewer than {hi}")
    if correlation == 1.0:  # a colour that is also a shape index always gets that shape
        reachable = sum(1 if c in pal_s else len(set(pal_s)) for c in set(pal_c))
        if reachable < hi:
            raise ValueError(
                f"correlation=1.0 ties each colour to its shape, which gives {reachable} distinct objects, fewer than"
                f" n_objects={hi}; lower correlation or n_objects"
            )
    rng = as_generator(seed, "seed")
    k = rng.integers(lo, hi + 1, size=n)
    cells = -np.ones((n, hi), dtype=np.int64)
    col, shp = cells.copy(), cells.copy()
    T = sentence_length(hi if pad_objects is None else as_int(pad_objects, "pad_objects", low=hi))
    tokens = np.zeros((n, T), dtype=np.int64)
    for i in range(n):
        cells[i, : k[i]] = rng.choice(grid * grid, size=k[i], replace=False)
        seen: set[tuple[int, int]] = set()
        for j in range(k[i]):
            for _ in range(_MAX_DRAWS):  # rejection sampling of a pair not yet in the scene
                c = int(rng.choice(pal_c))
                s = c if (correlation > 0 and rng.random() < correlation and c in pal_s) else int(rng.choice(pal_s))
                if (c, s) not in seen:
                    break
            else:
                raise ValueError(
                    f"no new colour-shape pair in {_MAX_DRAWS} draws: correlation={correlation} is too close to 1"
                    f" for n_objects={hi} distinct objects"
                )
            seen.add((c, s))
            col[i, j], shp[i, j] = c, s
        words = ["there", "is"]
        for m, j in enumerate(rng.permutation(k[i] - 1)):
            words += (["a"] if m == 0 else ["and", "a"]) + [VOCAB[_C0 + col[i, j]], VOCAB[_S0 + shp[i, j]]]
        words += ["and", "a", VOCAB[_C0 + col[i, k[i] - 1]]]
        tokens[i, T - len(words) :] = [_TOK[w] for w in words]
    t = {name: torch.from_numpy(a) for name, a in (("cells", cells), ("colours", col), ("shapes", shp))}
    images = render_scenes(t["cells"], t["colours"], t["shapes"], grid)
    return Scenes(images, t["cells"], t["colours"], t["shapes"], torch.from_numpy(k), torch.from_numpy(tokens))


_MAX_DRAWS = 100_000  # draws per object before make_scenes gives up (a valid call needs a handful)


def _palette(value: Sequence[int] | None, name: str, size: int) -> list[int]:
    if value is None:
        return list(range(size))
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a sequence of indices or None, got {type(value).__name__}")
    out = [as_int(v, f"{name}[{i}]", low=0, high=size - 1) for i, v in enumerate(value)]
    if not out or len(set(out)) != len(out):
        raise ValueError(f"{name} must be non-empty and without repeats, got {list(value)}")
    return out


# ------------------------------------------------------------------------------------------------ paper scale
def scene_prompts(scenes: Scenes) -> list[str]:
    """The natural-language prompt of each scene for a pretrained VLM: "In this image there is a ⟨colour⟩ ⟨shape⟩
    and a" (2-object scenes: the first object is named, the second is the target)."""
    if not isinstance(scenes, Scenes):
        raise TypeError(f"scenes must be a Scenes, got {type(scenes).__name__}")
    if not bool((scenes.n_objects == 2).all()):
        raise ValueError("scenes: the prompts name one object, so every scene must hold exactly 2 objects")
    names = list(COLOURS)
    return [
        f"In this image there is a {names[int(c)]} {SHAPES[int(s)]} and a"
        for c, s in zip(scenes.colours[:, 0], scenes.shapes[:, 0])
    ]


def scene_pil_images(scenes: Scenes, size: int = 224) -> list:
    """The scenes as ``size × size`` RGB PIL images (nearest-neighbour upscaling keeps the grid's sharp cells)."""
    from PIL import Image

    if not isinstance(scenes, Scenes):
        raise TypeError(f"scenes must be a Scenes, got {type(scenes).__name__}")
    size = as_int(size, "size", low=1)
    arr = (scenes.images.permute(0, 2, 3, 1).clamp(0, 1).numpy() * 255).round().astype(np.uint8)
    return [Image.fromarray(a).resize((size, size), Image.NEAREST) for a in arr]


def vlm_query_states(
    model, processor, scenes: Scenes, *, size: int = 224, chat: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a pretrained ``transformers`` VLM (e.g. ``AutoModelForImageTextToText``) and its processor on 2-object
    scenes, one at a time: every layer's hidden state at the last prompt token, (n, layers + 1, d) float32 on the CPU,
    and the predicted target colour (n,), the argmax of the next-token logits over the six colour words (each
    colour's first token after a space).

    With ``chat`` the processor's chat template wraps the image ("Describe the image.") and the prompt
    (:func:`scene_prompts`) continues the assistant's turn (use it for Qwen2.5-VL, whose image token needs the
    template's vision markers); otherwise the text is the processor's ``image_token`` (LLaVA's ``<image>``), a space
    and the prompt.
    """
    if not callable(model) or not callable(processor):
        raise TypeError("model and processor must be a transformers model and its processor")
    as_bool(chat, "chat")
    prompts, images = scene_prompts(scenes), scene_pil_images(scenes, size)
    tok = processor.tokenizer
    colour_ids = [tok.encode(" " + c, add_special_tokens=False)[0] for c in COLOURS]
    device = next(model.parameters()).device
    states, pred = [], []
    for img, text in zip(images, prompts):
        if chat:
            msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the image."}]}]
            text = processor.apply_chat_template(msgs, add_generation_prompt=True) + text
        else:
            text = f"{processor.image_token} {text}"
        inputs = processor(images=img, text=text, return_tensors="pt").to(device)
        with torch.no_grad():
            out = model(**inputs, output_hidden_states=True)
        states.append(torch.stack([h[0, -1].float().cpu() for h in out.hidden_states]))
        pred.append(int(out.logits[0, -1, colour_ids].float().argmax()))
    return torch.stack(states), torch.tensor(pred)
