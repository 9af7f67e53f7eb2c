"""Tests of the text and image loaders of iclr26.data on tiny local files (nothing downloads): Python's own prose,
text corpora and token packing with document ids (data/text.py), image folders, .npz arrays and parquet image
datasets (data/images.py)."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr26.data import (
    ImageData,
    images_to_tensor,
    load_image_dataset,
    load_prose,
    load_text_corpus,
    pack_tokens,
)
from iclr26.hf import ALLOW_DOWNLOAD_ENV, NotDownloadedError

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _hub_cache(cache: Path, repo_id: str, files_from: Path) -> Path:
    """Lay ``files_from`` out as the Hugging Face cache does after downloading the dataset ``repo_id``."""
    repo = cache / f"datasets--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    shutil.copytree(files_from, repo / "snapshots" / COMMIT)
    return cache


# ------------------------------------------------------------------------------------------------ text corpora
@pytest.fixture
def corpus(tmp_path) -> Path:
    (tmp_path / "lines.txt").write_text("first doc\n\n  \nsecond doc\r\nthird doc\n")
    (tmp_path / "stories.txt").write_text("once upon<|endoftext|>a time<|endoftext|><|endoftext|>the end")
    records = [{"text": "json one", "id": 1}, {"text": "json two", "id": 2}, {"text": "", "id": 3}]
    (tmp_path / "shard-0.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    with gzip.open(tmp_path / "shard-1.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps({"text": "gz one"}) + "\n" + json.dumps({"text": "gz two"}) + "\n")
    (tmp_path / "array.json").write_text(json.dumps([{"text": "arr one"}, "arr two"]))
    return tmp_path


def test_load_text_corpus_reads_each_file_type(corpus):
    assert list(load_text_corpus(corpus / "lines.txt")) == ["first doc", "second doc", "third doc"]
    assert list(load_text_corpus(corpus / "stories.txt", separator="<|endoftext|>")) == [
        "once upon",
        "a time",
        "the end",
    ]
    assert list(load_text_corpus(corpus / "shard-0.jsonl")) == ["json one", "json two"]  # empty text skipped
    assert list(load_text_corpus(corpus / "shard-1.jsonl.gz")) == ["gz one", "gz two"]
    assert list(load_text_corpus(corpus / "array.json")) == ["arr one", "arr two"]


def test_load_text_corpus_reads_a_folder_in_order_and_lazily(corpus):
    docs = load_text_corpus(corpus, data_files="shard-*")
    assert not isinstance(docs, list) and next(docs) == "json one"  # an iterator: nothing read past what is used
    assert list(docs) == ["json two", "gz one", "gz two"]
    every = list(load_text_corpus(corpus))
    assert every[:2] == ["arr one", "arr two"] and len(every) == 2 + 3 + 2 + 2 + 1  # stories.txt: one line
    assert list(load_text_corpus(corpus, data_files="shard-*", n_docs=3)) == ["json one", "json two", "gz one"]


def test_load_text_corpus_reads_the_hub_cache(corpus, tmp_path_factory, monkeypatch):
    monkeypatch.delenv(ALLOW_DOWNLOAD_ENV, raising=False)
    cache = _hub_cache(tmp_path_factory.mktemp("cache"), "owner/web-text", corpus)
    assert list(load_text_corpus("owner/web-text", data_files="shard-1.*", cache_dir=cache)) == ["gz one", "gz two"]
    with pytest.raises(NotDownloadedError, match='--repo-type dataset --include "en/train-\\*.json.gz"'):
        load_text_corpus("owner/web-text", data_files="en/train-*.json.gz", cache_dir=cache)
    with pytest.raises(ValueError, match="data_files is required"):
        load_text_corpus("owner/web-text", cache_dir=cache)


def test_load_text_corpus_reads_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["pq one", None, "pq two"], "n": [1, 2, 3]}), tmp_path / "a.parquet")
    assert list(load_text_corpus(tmp_path / "a.parquet")) == ["pq one", "pq two"]
    with pytest.raises(ValueError, match="text_field 'body'"):
        list(load_text_corpus(tmp_path / "a.parquet", text_field="body"))
    with pytest.raises(ValueError, match="holds int"):
        list(load_text_corpus(tmp_path / "a.parquet", text_field="n"))


def test_load_text_corpus_bad_input(corpus):
    with pytest.raises(FileNotFoundError):
        load_text_corpus(corpus / "missing.txt")
    with pytest.raises(ValueError, match="cannot read"):
        (corpus / "notes.md").write_text("x")
        load_text_corpus(corpus / "notes.md")
    with pytest.raises(TypeError, match="text_field"):
        load_text_corpus(corpus / "lines.txt", text_field="")
    with pytest.raises(TypeError, match="separator"):
        load_text_corpus(corpus / "lines.txt", separator="")
    with pytest.raises(ValueError, match="n_docs"):
        load_text_corpus(corpus / "lines.txt", n_docs=0)
    with pytest.raises(TypeError, match="n_docs"):
        load_text_corpus(corpus / "lines.txt", n_docs=2.0)
    with pytest.raises(TypeError, match="allow_download"):
        load_text_corpus(corpus / "lines.txt", allow_download="no")
    # problems inside a file show when it is read
    with pytest.raises(ValueError, match="text_field 'body' is not a field"):
        list(load_text_corpus(corpus / "shard-0.jsonl", text_field="body"))
    with pytest.raises(ValueError, match="holds int"):
        list(load_text_corpus(corpus / "shard-0.jsonl", text_field="id"))
    (corpus / "broken.jsonl").write_text('{"text": "ok"}\n{"text": \n')
    with pytest.raises(ValueError, match="line 2: not a JSON record"):
        list(load_text_corpus(corpus / "broken.jsonl"))
    (corpus / "numbers.jsonl").write_text("1\n2\n")
    with pytest.raises(ValueError, match="int records"):
        list(load_text_corpus(corpus / "numbers.jsonl"))


# ------------------------------------------------------------------------------------------------ pack_tokens
class CharTokenizer:
    """The optimizer_benchmark chapter's stand-in with a transformers tokenizer's call signature."""

    eos_token_id = 0

    def __call__(self, text):
        return {"input_ids": [1 + (ord(ch) % 255) for ch in text]}


def _chapter_pack_tokens(texts, tokenizer, seq_len, n_rows):
    """The loop the chapter had before pack_tokens existed: the reference."""
    out = np.empty((n_rows, seq_len), dtype=np.int32)
    ids, filled = [], 0
    for text in texts:
        ids.extend(tokenizer(text)["input_ids"] + [tokenizer.eos_token_id])
        while len(ids) >= seq_len and filled < n_rows:
            out[filled] = ids[:seq_len]
            ids = ids[seq_len:]
            filled += 1
        if filled == n_rows:
            break
    return torch.from_numpy(out)


def test_pack_tokens_matches_the_chapter_loop():
    texts = ["the cat sat on the mat. " * 3, "a dog ran. " * 4, "x" * 40]
    got = pack_tokens(texts, 16, 8, tokenizer=CharTokenizer(), dtype=torch.int32)
    assert got.dtype == torch.int32 and torch.equal(got, _chapter_pack_tokens(texts, CharTokenizer(), 16, 8))


def test_pack_tokens_concatenates_with_eos_and_cuts_rows():
    docs = [[1, 2, 3], np.array([4, 5]), torch.tensor([6, 7, 8, 9])]
    assert pack_tokens(docs, 4, eos_id=0).tolist() == [[1, 2, 3, 0], [4, 5, 0, 6], [7, 8, 9, 0]]
    assert pack_tokens(docs, 4).tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]]  # no separator; the 9 is dropped
    assert pack_tokens(docs, 3, 2, eos_id=0).tolist() == [[1, 2, 3], [0, 4, 5]]
    assert pack_tokens(docs, 4).dtype == torch.long
    # n_rows stops reading: an endless stream of documents is fine
    assert pack_tokens(itertools.repeat([5, 6]), 3, 2).tolist() == [[5, 6, 5], [6, 5, 6]]
    # text through a tokenizer (whose eos_token_id separates); once n_rows are full the rest is left unread
    docs = iter(["ab", "cd"])
    assert pack_tokens(docs, 3, 1, tokenizer=CharTokenizer()).tolist() == [[98, 99, 0]]
    assert next(docs) == "cd"
    assert pack_tokens(["ab", "cd"], 3, tokenizer=CharTokenizer()).tolist() == [[98, 99, 0], [100, 101, 0]]


def test_pack_tokens_gives_each_token_its_document():
    docs = [[1, 2, 3], np.array([4, 5]), torch.tensor([6, 7, 8, 9])]
    ids, doc = pack_tokens(docs, 4, eos_id=0, return_doc_ids=True)
    assert ids.tolist() == [[1, 2, 3, 0], [4, 5, 0, 6], [7, 8, 9, 0]]
    assert doc.tolist() == [[0, 0, 0, 0], [1, 1, 1, 2], [2, 2, 2, 2]] and doc.dtype == torch.long  # EOS ends its doc
    ids, doc = pack_tokens(itertools.repeat([5, 6]), 3, 2, return_doc_ids=True, dtype=torch.int32)
    assert ids.dtype == torch.int32 and doc.tolist() == [[0, 0, 1], [1, 2, 2]]
    full = pack_tokens(docs, 3, eos_id=0, return_doc_ids=True)
    first = pack_tokens(docs, 3, 3, eos_id=0, return_doc_ids=True)
    assert full[0].shape == (4, 3) and all(torch.equal(a[:3], b) for a, b in zip(full, first))
    with pytest.raises(TypeError, match="return_doc_ids"):
        pack_tokens(docs, 3, return_doc_ids=1)


def test_load_prose_is_pythons_documentation_without_code():
    from pydoc_data.topics import topics

    prose = load_prose()
    assert list(prose) == sorted(topics) and len(prose) >= 70
    assert 200_000 < sum(map(len, prose.values())) < sum(map(len, topics.values()))
    assert prose["assignment"].startswith("Assignment statements\n\nAssignment statements are used to (re)bind names")
    text = "\n\n".join(prose.values())
    assert "assignment_stmt ::=" not in text and ">>> " not in text and "****" not in text and "+---" not in text
    assert load_prose(prose_only=False) == {name: topics[name] for name in sorted(topics)}
    ids, doc = pack_tokens(prose.values(), 64, tokenizer=CharTokenizer(), return_doc_ids=True)
    assert ids.shape == doc.shape and doc[-1, -1] > doc[0, 0] == 0  # many documents, boundaries inside rows
    with pytest.raises(TypeError, match="prose_only"):
        load_prose(prose_only="yes")


def test_pack_tokens_with_a_transformers_tokenizer():
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<eos>", "<unk>", "the", "cat", "sat", "."]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>")
    assert pack_tokens(["the cat sat .", "cat ."], 4, tokenizer=fast).tolist() == [[2, 3, 4, 5], [0, 3, 5, 0]]


def test_pack_tokens_bad_input():
    with pytest.raises(ValueError, match="only 1 rows"):
        pack_tokens([[1, 2, 3, 4, 5]], 4, 2)
    with pytest.raises(ValueError, match="fewer than one row"):
        pack_tokens([[1, 2]], 4)
    with pytest.raises(ValueError, match="fewer than one row"):
        pack_tokens([], 4)
    with pytest.raises(ValueError, match="seq_len"):
        pack_tokens([[1]], 0)
    with pytest.raises(TypeError, match="seq_len"):
        pack_tokens([[1]], 2.0)
    with pytest.raises(ValueError, match="n_rows"):
        pack_tokens([[1]], 1, 0)
    with pytest.raises(ValueError, match="eos_id"):
        pack_tokens([[1]], 1, eos_id=-1)
    with pytest.raises(ValueError, match="dtype"):
        pack_tokens([[1]], 1, dtype=torch.float32)
    with pytest.raises(TypeError, match="dtype"):
        pack_tokens([[1]], 1, dtype="long")
    with pytest.raises(TypeError, match="docs"):
        pack_tokens("the cat", 2)
    with pytest.raises(TypeError, match="docs"):
        pack_tokens(3, 2)
    with pytest.raises(TypeError, match="tokenizer="):
        pack_tokens(["the cat"], 2)
    with pytest.raises(TypeError, match="docs\\[0\\] must be a str"):
        pack_tokens([[1, 2]], 2, tokenizer=CharTokenizer())
    with pytest.raises(TypeError, match="tokenizer"):
        pack_tokens([[1, 2]], 2, tokenizer="gpt2")
    with pytest.raises(ValueError, match="docs\\[1\\] must give a 1-D sequence of integer"):
        pack_tokens([[1, 2], [0.5]], 2)
    with pytest.raises(ValueError, match="docs\\[0\\] must give a 1-D"):
        pack_tokens([[[1, 2]]], 2)
    with pytest.raises(ValueError, match="negative"):
        pack_tokens([[1, -2]], 2)


# ------------------------------------------------------------------------------------------------ images
def _png(path: Path, array: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


@pytest.fixture
def pixels() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (6, 8, 8, 3), dtype=np.uint8)


def test_images_to_tensor_maps_uint8_to_minus_one_one(pixels):
    x = images_to_tensor(pixels)
    # exactly what the diffusion chapter computed from a .npz: float, channels first, / 127.5 - 1
    assert torch.equal(x, torch.tensor(pixels, dtype=torch.float32).permute(0, 3, 1, 2) / 127.5 - 1)
    assert x.shape == (6, 3, 8, 8) and x.is_contiguous() and x.min() >= -1 and x.max() <= 1
    from PIL import Image

    assert torch.equal(images_to_tensor([Image.fromarray(p) for p in pixels]), x)  # PIL path == array path
    assert torch.equal(images_to_tensor(list(pixels)), x)
    assert torch.equal(images_to_tensor(torch.from_numpy(pixels)), x)
    gray = pixels[..., 0]
    assert torch.equal(images_to_tensor(gray, channels=1), torch.tensor(gray[:, None], dtype=torch.float32) / 127.5 - 1)
    assert torch.equal(images_to_tensor(gray), images_to_tensor(gray, channels=1).expand(-1, 3, -1, -1))
    luma = images_to_tensor(pixels, channels=1)  # PIL's ITU-R 601-2 luma
    assert luma.shape == (6, 1, 8, 8)
    assert torch.equal(
        luma, images_to_tensor([np.asarray(Image.fromarray(p).convert("L")) for p in pixels], channels=1)
    )
    assert images_to_tensor(pixels, size=4).shape == (6, 3, 4, 4)
    assert images_to_tensor(pixels, size=(4, 6)).shape == (6, 3, 4, 6)
    wide = np.zeros((1, 4, 8, 3), dtype=np.uint8)
    wide[:, :, 2:6] = 255
    assert torch.equal(images_to_tensor(wide, center_crop=True), torch.ones(1, 3, 4, 4))  # the middle 4×4


def test_images_to_tensor_bad_input(pixels):
    with pytest.raises(ValueError, match="channels"):
        images_to_tensor(pixels, channels=2)
    with pytest.raises(ValueError, match="size"):
        images_to_tensor(pixels, size=0)
    with pytest.raises(TypeError, match="size"):
        images_to_tensor(pixels, size=4.0)
    with pytest.raises(ValueError, match="size"):
        images_to_tensor(pixels, size=(4, 4, 4))
    with pytest.raises(TypeError, match="center_crop"):
        images_to_tensor(pixels, center_crop=1)
    with pytest.raises(TypeError, match="uint8"):
        images_to_tensor(pixels.astype(np.float32))
    with pytest.raises(TypeError, match="uint8"):
        images_to_tensor([pixels[0].astype(np.float32)])
    with pytest.raises(ValueError, match="shape"):
        images_to_tensor(np.zeros((2, 2), dtype=np.uint8))
    with pytest.raises(ValueError, match="images\\[0\\]"):
        images_to_tensor([np.zeros((2, 2, 2), dtype=np.uint8)])
    with pytest.raises(ValueError, match="pass size="):
        images_to_tensor([pixels[0], pixels[0, :4]])
    with pytest.raises(ValueError, match="at least one"):
        images_to_tensor([])
    with pytest.raises(TypeError, match="images"):
        images_to_tensor("cat.png")
    with pytest.raises(TypeError, match="images"):
        images_to_tensor(3)


def test_load_image_dataset_from_a_class_folder(tmp_path, pixels):
    for i, p in enumerate(pixels):
        _png(tmp_path / ("cat" if i % 2 else "dog") / f"{i}.png", p)
    data = load_image_dataset(tmp_path)
    assert isinstance(data, ImageData) and data.classes == ["cat", "dog"]
    order = [1, 3, 5, 0, 2, 4]  # cat/1, cat/3, cat/5, dog/0, …: sorted by path
    assert torch.equal(data.images, images_to_tensor(pixels[order])) and data.labels.tolist() == [0, 0, 0, 1, 1, 1]
    first = load_image_dataset(tmp_path, n=2, size=4, channels=1)
    assert first.images.shape == (2, 1, 4, 4) and first.labels.tolist() == [0, 0]
    flat = load_image_dataset(tmp_path / "cat")
    assert flat.labels is None and flat.classes is None and flat.images.shape == (3, 3, 8, 8)
    single = load_image_dataset(tmp_path / "cat" / "1.png")
    assert torch.equal(single.images, images_to_tensor(pixels[1:2]))
    assert load_image_dataset(tmp_path, data_files="dog/*").images.shape == (3, 3, 8, 8)


def test_load_image_dataset_from_npz(tmp_path, pixels):
    labels = np.arange(6)
    np.savez(tmp_path / "nhwc.npz", images=pixels, labels=labels)
    np.savez(tmp_path / "nchw.npz", images=pixels.transpose(0, 3, 1, 2))
    np.savez(tmp_path / "odd.npz", x_train=pixels, y_train=labels)
    data = load_image_dataset(tmp_path / "nhwc.npz")
    assert torch.equal(data.images, torch.tensor(pixels, dtype=torch.float32).permute(0, 3, 1, 2) / 127.5 - 1)
    assert data.labels.dtype == torch.long and data.labels.tolist() == list(range(6)) and data.classes is None
    assert torch.equal(load_image_dataset(tmp_path / "nchw.npz").images, data.images)
    odd = load_image_dataset(tmp_path / "odd.npz", image_column="x_train", label_column="y_train", n=4)
    assert torch.equal(odd.images, data.images[:4]) and odd.labels.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="pass image_column"):
        load_image_dataset(tmp_path / "odd.npz")
    with pytest.raises(ValueError, match="label_column 'labels'"):
        load_image_dataset(tmp_path / "nchw.npz", label_column="labels")
    with pytest.raises(ValueError, match="3 .npz files"):
        load_image_dataset(tmp_path)
    np.savez(tmp_path / "bad.npz", images=pixels, labels=np.arange(5))
    with pytest.raises(ValueError, match="one per image"):
        load_image_dataset(tmp_path / "bad.npz")


def _parquet(path: Path, pixels: np.ndarray, labels: list[int]) -> None:
    """An image dataset as the hub stores it: encoded PNGs in a struct column, ClassLabel names in the metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    def png(a):
        buf = __import__("io").BytesIO()
        Image.fromarray(a).save(buf, format="PNG")
        return {"bytes": buf.getvalue(), "path": None}

    meta = {
        "info": {
            "features": {
                "img": {"_type": "Image"},
                "label": {"names": ["airplane", "automobile"], "_type": "ClassLabel"},
            }
        }
    }
    table = pa.table({"img": [png(a) for a in pixels], "label": labels})
    table = table.replace_schema_metadata({b"huggingface": json.dumps(meta).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def test_load_image_dataset_from_hub_parquet(tmp_path, pixels, monkeypatch):
    pytest.importorskip("pyarrow")
    monkeypatch.delenv(ALLOW_DOWNLOAD_ENV, raising=False)
    files = tmp_path / "files"
    _parquet(files / "plain_text" / "train-00000-of-00002.parquet", pixels[:4], [0, 1, 1, 0])
    _parquet(files / "plain_text" / "train-00001-of-00002.parquet", pixels[4:], [1, 1])
    _parquet(files / "plain_text" / "test-00000-of-00001.parquet", pixels[:1], [0])
    cache = _hub_cache(tmp_path / "cache", "owner/cifar", files)
    data = load_image_dataset("owner/cifar", data_files="plain_text/train-*.parquet", cache_dir=cache)
    assert torch.equal(data.images, images_to_tensor(pixels))
    assert data.labels.tolist() == [0, 1, 1, 0, 1, 1] and data.classes == ["airplane", "automobile"]
    five = load_image_dataset(files, data_files="plain_text/train-*", n=5)
    assert torch.equal(five.images, data.images[:5]) and len(five.labels) == 5
    with pytest.raises(NotDownloadedError, match='hf download owner/cifar --repo-type dataset --include "x/\\*"'):
        load_image_dataset("owner/cifar", data_files="x/*", cache_dir=cache)
    with pytest.raises(ValueError, match="image_column 'image'"):
        load_image_dataset(files, data_files="plain_text/test-*", image_column="image")
    with pytest.raises(ValueError, match="encoded images"):
        load_image_dataset(files, data_files="plain_text/test-*", image_column="label")


def test_load_image_dataset_bad_input(tmp_path, pixels):
    _png(tmp_path / "a.png", pixels[0])
    np.savez(tmp_path / "b.npz", images=pixels)
    with pytest.raises(ValueError, match="mixes file types"):
        load_image_dataset(tmp_path)
    with pytest.raises(ValueError, match="n"):
        load_image_dataset(tmp_path / "b.npz", n=0)
    with pytest.raises(ValueError, match="channels"):
        load_image_dataset(tmp_path / "b.npz", channels=4)
    with pytest.raises(ValueError, match="size"):
        load_image_dataset(tmp_path / "b.npz", size=-1)
    with pytest.raises(TypeError, match="image_column"):
        load_image_dataset(tmp_path / "b.npz", image_column=1)
    with pytest.raises(TypeError, match="center_crop"):
        load_image_dataset(tmp_path / "b.npz", center_crop="yes")
    with pytest.raises(FileNotFoundError):
        load_image_dataset(tmp_path / "missing")
    with pytest.raises(ValueError, match="data_files is required"):
        load_image_dataset("owner/images")
    np.savez(tmp_path / "float.npz", images=pixels.astype(np.float32))
    with pytest.raises(TypeError, match="uint8"):
        load_image_dataset(tmp_path / "float.npz")


def test_load_mnist_5k_real_digits_offline():
    from iclr26.data import load_mnist_5k

    full = load_mnist_5k()
    assert full.images.shape == (5000, 1, 28, 28) and full.classes == [str(d) for d in range(10)]
    assert torch.equal(torch.bincount(full.labels), torch.full((10,), 500))
    assert full.images.min() == -1 and full.images.max() == 1  # uint8 0..255 mapped to [-1, 1]
    # a digit is drawn bright on a dark background: the border is background, the centre is ink on average
    assert full.images[:, :, 0].mean() == -1 and full.images[:, :, 10:18, 10:18].mean() > -0.5
    sub = load_mnist_5k(size=16, digits=[7, 3], n_per_digit=5, channels=3)
    assert sub.images.shape == (10, 3, 16, 16) and sub.labels.tolist() == [3] * 5 + [7] * 5
    first3 = full.images[full.labels == 3][:5]
    assert torch.equal(load_mnist_5k(digits=[3], n_per_digit=5).images, first3)
