"""Tests of iclr26.hf on tiny local artifacts (nothing downloads): offline-first loading and its error, dataset files
in a local folder or a Hugging Face cache, iclr26.hooks' forward hooks / capture / steer on tiny transformers models,
residual activations and image features."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from iclr26.hf import (
    ALLOW_DOWNLOAD_ENV,
    KINDS,
    NotDownloadedError,
    dataset_files,
    download_allowed,
    image_features,
    load_pretrained,
    residual_activations,
)
from iclr26.hooks import block_names, capture, forward_hooks, steer
from iclr26.sae import TemporalSAE, scaling_factor

transformers = pytest.importorskip("transformers")

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _fake_cache(cache: Path, repo_id: str, files_from: Path, repo_type: str = "model") -> Path:
    """Lay ``files_from`` out as the Hugging Face cache does after a download of ``repo_id``."""
    repo = cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    shutil.copytree(files_from, repo / "snapshots" / COMMIT)
    return cache


def _tiny_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<eos>", "<unk>", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "."]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>")


def _hooks(model: nn.Module) -> set:
    """Every forward hook on every submodule (transformers installs some of its own on the first forward pass)."""
    return {(name, key) for name, m in model.named_modules() for key in m._forward_hooks}


def _gpt2():
    cfg = transformers.GPT2Config(
        n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=32, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


# the tiny causal LMs' shared shape (GPT-2 names its fields differently)
_TINY_LM = dict(
    num_hidden_layers=2,
    hidden_size=16,
    num_attention_heads=2,
    intermediate_size=32,
    vocab_size=50,
    max_position_embeddings=32,
)


def _llama():
    cfg = transformers.LlamaConfig(num_key_value_heads=2, bos_token_id=0, eos_token_id=0, pad_token_id=0, **_TINY_LM)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


@pytest.fixture(scope="module")
def tiny_lm_dir(tmp_path_factory) -> Path:
    """A tiny GPT-2 and a word-level tokenizer, saved as save_pretrained writes them."""
    path = tmp_path_factory.mktemp("tiny_gpt2")
    _gpt2().save_pretrained(path)
    _tiny_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def gpt2():
    model = _gpt2()
    model(torch.tensor([[1]]), output_hidden_states=True)  # transformers installs its recording hooks now
    return model


@pytest.fixture(scope="module")
def llama():
    model = _llama()
    model(torch.tensor([[1]]), output_hidden_states=True)
    return model


# ------------------------------------------------------------------------------------------------ load_pretrained
def test_load_pretrained_reads_a_local_directory(tiny_lm_dir):
    model = load_pretrained(tiny_lm_dir)
    assert isinstance(model, transformers.GPT2LMHeadModel) and not model.training
    assert isinstance(load_pretrained(str(tiny_lm_dir), "model", device="cpu"), transformers.GPT2Model)
    assert load_pretrained(tiny_lm_dir, "config").n_embd == 16
    tok = load_pretrained(tiny_lm_dir, "tokenizer")
    assert tok("the cat sat .")["input_ids"] == [2, 3, 4, 10] and tok.eos_token_id == 0
    # any class with from_pretrained is a kind
    assert isinstance(load_pretrained(tiny_lm_dir, transformers.GPT2LMHeadModel), transformers.GPT2LMHeadModel)


def test_every_kind_is_a_transformers_auto_class():
    for kind, name in KINDS.items():
        assert callable(getattr(getattr(transformers, name), "from_pretrained", None)), kind


def test_load_pretrained_reads_the_hub_cache_offline(tiny_lm_dir, tmp_path):
    cache = _fake_cache(tmp_path / "cache", "iclr26-test/tiny-gpt2", tiny_lm_dir)
    model = load_pretrained("iclr26-test/tiny-gpt2", cache_dir=cache)
    ids = torch.tensor([[2, 3, 4]])
    assert torch.allclose(model(ids).logits, load_pretrained(tiny_lm_dir)(ids).logits)
    assert load_pretrained("iclr26-test/tiny-gpt2", "tokenizer", cache_dir=cache).eos_token_id == 0


def test_load_pretrained_says_what_to_download(tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_DOWNLOAD_ENV, raising=False)
    with pytest.raises(NotDownloadedError) as err:
        load_pretrained("iclr26-test/never-downloaded", "tokenizer", cache_dir=tmp_path, revision="v1")
    msg = str(err.value)
    assert isinstance(err.value, OSError)
    assert "'iclr26-test/never-downloaded' (tokenizer) is not on this machine" in msg
    assert 'hf download iclr26-test/never-downloaded --revision v1 --cache-dir "' in msg
    assert "snapshot_download('iclr26-test/never-downloaded', revision='v1'" in msg
    assert "allow_download=True" in msg and ALLOW_DOWNLOAD_ENV in msg and "never downloads" in msg


class _FakeHub:
    """A class with from_pretrained: nothing is cached, and a download returns a marker."""

    calls: list = []

    @classmethod
    def from_pretrained(cls, name, **kwargs):
        cls.calls.append(kwargs.get("local_files_only", False))
        if kwargs.get("local_files_only"):
            raise OSError("not in the cache")
        return f"downloaded {name}"


def test_load_pretrained_downloads_only_when_allowed(monkeypatch):
    monkeypatch.delenv(ALLOW_DOWNLOAD_ENV, raising=False)
    _FakeHub.calls.clear()
    assert load_pretrained("owner/model", _FakeHub, allow_download=True) == "downloaded owner/model"
    assert _FakeHub.calls == [True, False]  # the cache first, then the hub
    with pytest.raises(NotDownloadedError, match="_FakeHub"):
        load_pretrained("owner/model", _FakeHub)
    monkeypatch.setenv(ALLOW_DOWNLOAD_ENV, "1")
    assert download_allowed() and load_pretrained("owner/model", _FakeHub) == "downloaded owner/model"
    assert not download_allowed(False)
    with pytest.raises(NotDownloadedError):
        load_pretrained("owner/model", _FakeHub, allow_download=False)  # an explicit False beats the environment
    monkeypatch.setenv(ALLOW_DOWNLOAD_ENV, "0")
    assert not download_allowed()


def test_load_pretrained_bad_input(tiny_lm_dir, tmp_path):
    with pytest.raises(ValueError, match="kind"):
        load_pretrained(tiny_lm_dir, "llm")
    with pytest.raises(TypeError, match="kind"):
        load_pretrained(tiny_lm_dir, 3)
    with pytest.raises(TypeError, match="name_or_path"):
        load_pretrained(3)
    with pytest.raises(ValueError, match="name_or_path"):
        load_pretrained("")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_pretrained(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_pretrained("./missing/model")
    with pytest.raises(ValueError, match="hub id"):
        load_pretrained("not a hub id!")
    with pytest.raises(ValueError, match="directory"):
        load_pretrained(tiny_lm_dir / "config.json")
    with pytest.raises(TypeError, match="allow_download"):
        load_pretrained(tiny_lm_dir, allow_download="yes")
    with pytest.raises(ValueError, match="device"):
        load_pretrained(tiny_lm_dir, device="gpu0")
    with pytest.raises(TypeError, match="local_files_only"):
        load_pretrained(tiny_lm_dir, local_files_only=False)


# ------------------------------------------------------------------------------------------------ dataset_files
def test_dataset_files_in_a_local_folder(tmp_path):
    for rel in ["b/2.jsonl", "a/1.jsonl", "a/notes.md", ".cache/huggingface/x.jsonl", "c.txt"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    rel = lambda files: [f.relative_to(tmp_path).as_posix() for f in files]  # noqa: E731
    assert rel(dataset_files(tmp_path, suffixes=[".jsonl"])) == ["a/1.jsonl", "b/2.jsonl"]  # sorted, hidden skipped
    assert rel(dataset_files(tmp_path, "*.txt")) == ["c.txt"]
    assert rel(dataset_files(tmp_path, ["a/*", "c.*"])) == ["a/1.jsonl", "a/notes.md", "c.txt"]
    assert dataset_files(tmp_path / "c.txt") == [tmp_path / "c.txt"]
    with pytest.raises(ValueError, match="no file matching"):
        dataset_files(tmp_path, "*.parquet")
    with pytest.raises(ValueError, match="no file ending"):
        dataset_files(tmp_path, suffixes=[".png"])
    with pytest.raises(ValueError, match="data_files"):
        dataset_files(tmp_path / "c.txt", "*.txt")
    with pytest.raises(TypeError, match="data_files"):
        dataset_files(tmp_path, 3)
    with pytest.raises(ValueError, match="data_files"):
        dataset_files(tmp_path, [])
    with pytest.raises(TypeError, match="source"):
        dataset_files(None)
    with pytest.raises(FileNotFoundError):
        dataset_files(tmp_path / "missing")


def test_dataset_files_in_the_hub_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_DOWNLOAD_ENV, raising=False)
    files = tmp_path / "files"
    (files / "en").mkdir(parents=True)
    for name in ["c4-train.00000-of-01024.json.gz", "c4-train.00001-of-01024.json.gz", "c4-validation.00000.json.gz"]:
        (files / "en" / name).write_bytes(b"")
    cache = _fake_cache(tmp_path / "cache", "owner/corpus", files, repo_type="dataset")
    got = dataset_files("owner/corpus", "en/c4-train.*", cache_dir=cache)
    assert [f.name for f in got] == ["c4-train.00000-of-01024.json.gz", "c4-train.00001-of-01024.json.gz"]
    with pytest.raises(NotDownloadedError) as err:
        dataset_files("owner/corpus", "en/c4-test.*", cache_dir=cache)  # the repo is cached, these files are not
    assert 'hf download owner/corpus --repo-type dataset --include "en/c4-test.*"' in str(err.value)
    with pytest.raises(NotDownloadedError) as err:
        dataset_files("owner/absent", ["a/*.parquet", "b/*.parquet"], cache_dir=cache)
    msg = str(err.value)
    assert '--repo-type dataset --include "a/*.parquet" --include "b/*.parquet"' in msg
    assert "allow_patterns=['a/*.parquet', 'b/*.parquet']" in msg
    with pytest.raises(ValueError, match="data_files is required"):
        dataset_files("owner/corpus", cache_dir=cache)
    with pytest.raises(TypeError, match="revision"):
        dataset_files("owner/corpus", "*", revision=1, cache_dir=cache)
    with pytest.raises(TypeError, match="cache_dir"):
        dataset_files("owner/corpus", "*", cache_dir=1)


# ------------------------------------------------------------------------------------------------ hooks
def test_block_names(gpt2, llama):
    assert block_names(gpt2) == ["transformer.h.0", "transformer.h.1"]
    assert block_names(llama) == ["model.layers.0", "model.layers.1"]
    assert block_names(llama, within="model.layers") == ["model.layers.0", "model.layers.1"]
    # the shallowest list wins over a longer nested one (MoE experts inside blocks)
    net = nn.Module()
    net.blocks = nn.ModuleList([nn.Module() for _ in range(2)])
    net.blocks[0].experts = nn.ModuleList([nn.Linear(2, 2) for _ in range(8)])
    assert block_names(net) == ["blocks.0", "blocks.1"]
    assert block_names(net, "blocks.0") == [f"blocks.0.experts.{i}" for i in range(8)]
    with pytest.raises(ValueError, match="ModuleList"):
        block_names(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="within"):
        block_names(gpt2, within="transformer.blocks")
    with pytest.raises(TypeError, match="model"):
        block_names("gpt2")


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_capture_matches_the_hidden_states(arch, gpt2, llama):
    model = gpt2 if arch == "gpt2" else llama
    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(0))
    names = block_names(model)
    with torch.no_grad(), capture(model, names) as acts:
        hs = model(ids, output_hidden_states=True).hidden_states
    assert torch.allclose(acts[names[0]], hs[1], atol=1e-6)  # block i's output is hidden_states[i + 1]
    assert torch.allclose(acts[names[0]], residual_activations(model, ids, layer=1), atol=1e-6)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_steering_shows_in_hidden_states_and_capture(arch, gpt2, llama):
    """Our hooks run before transformers' own recording hooks, so hidden_states (and residual_activations) report
    the steered block output, whichever of steer and capture encloses the other."""
    model = gpt2 if arch == "gpt2" else llama
    ids = torch.randint(1, 50, (2, 6), generator=torch.Generator().manual_seed(1))
    v = torch.randn(16, generator=torch.Generator().manual_seed(2))
    name = block_names(model)[0]
    before = _hooks(model)
    with torch.no_grad():
        base = residual_activations(model, ids, layer=1)
        with capture(model, name) as outer, steer(model, name, v, scale=2.0):
            steered = residual_activations(model, ids, layer=1)
        with steer(model, name, v, scale=2.0), capture(model, name) as inner:
            model(ids)
    assert torch.allclose(steered, base + 2.0 * v, atol=1e-5)
    assert torch.allclose(outer[name], steered, atol=1e-6) and torch.allclose(inner[name], steered, atol=1e-6)
    assert _hooks(model) == before


def test_forward_hooks_replace_outputs_and_are_removed(gpt2):
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        base = gpt2(ids).logits
        with forward_hooks(gpt2, {"transformer.h.1": lambda m, i, out: torch.zeros_like(out)}) as m:
            assert m is gpt2
            ablated = gpt2(ids).logits
        assert not torch.allclose(base, ablated)
        assert torch.equal(gpt2(ids).logits, base)  # removed on exit
        before = _hooks(gpt2)
        with pytest.raises(RuntimeError, match="boom"), forward_hooks(gpt2, {"transformer.h.0": lambda *a: None}):
            assert len(_hooks(gpt2)) == len(before) + 1
            raise RuntimeError("boom")
    assert _hooks(gpt2) == before  # removed even on error


def test_forward_hooks_drop_tokens():
    """A hook that returns fewer tokens drops them for everything downstream (token dropping)."""
    net = nn.Sequential(nn.Linear(4, 4), nn.Identity())
    with forward_hooks(net, {"0": lambda m, i, out: out[:, ::2]}):
        assert net(torch.randn(1, 6, 4)).shape == (1, 3, 4)


def test_forward_hooks_bad_input(gpt2):
    before = _hooks(gpt2)
    with pytest.raises(ValueError, match="close matches: 'transformer.h.1'"):
        with forward_hooks(gpt2, {"transformer.h.0": lambda *a: None, "transformer.h1": lambda *a: None}):
            pass
    assert _hooks(gpt2) == before  # nothing registered when one name is bad
    with pytest.raises(TypeError, match="prepend"):
        with forward_hooks(gpt2, {}, prepend=None):
            pass
    with pytest.raises(ValueError, match="top-level submodules: 'transformer', 'lm_head'"):
        with forward_hooks(gpt2, {"zzz": lambda *a: None}):
            pass
    with pytest.raises(TypeError, match="callable"):
        with forward_hooks(gpt2, {"transformer.h.0": 3}):
            pass
    with pytest.raises(TypeError, match="mapping"):
        with forward_hooks(gpt2, ["transformer.h.0"]):
            pass
    with pytest.raises(TypeError, match="hooks key"):
        with forward_hooks(gpt2, {0: lambda *a: None}):
            pass
    with pytest.raises(TypeError, match="model"):
        with forward_hooks("gpt2", {}):
            pass


class _TupleBlock(nn.Module):
    """A block that returns (hidden, aux), as older transformers blocks do."""

    def forward(self, x):
        return x * 2, "aux"


def test_steer_adds_a_vector(gpt2):
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    v = torch.randn(16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        with capture(gpt2, "transformer.h.0") as base:
            gpt2(ids)
        with steer(gpt2, "transformer.h.0", v, scale=3.0) as m:
            assert m is gpt2
            with capture(gpt2, ["transformer.h.0", "transformer.h.1"]) as st:
                steered = gpt2(ids).logits
            out = gpt2.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)  # steering every step
        assert torch.allclose(st["transformer.h.0"], base["transformer.h.0"] + 3.0 * v, atol=1e-5)
        assert not torch.allclose(steered, gpt2(ids).logits) and out.shape == (1, 8)
        assert not torch.equal(out, gpt2.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0))
        per_position = torch.zeros(5, 16)
        per_position[-1] = v
        with steer(gpt2, "transformer.h.0", per_position), capture(gpt2, "transformer.h.0") as last:
            gpt2(ids)
        diff = last["transformer.h.0"] - base["transformer.h.0"]
        assert torch.allclose(diff[0, -1], v, atol=1e-5) and torch.allclose(diff[0, :-1], torch.zeros(4, 16))
    net = nn.Sequential(_TupleBlock())
    with steer(net, "0", torch.ones(3), scale=0.5):
        h, aux = net(torch.zeros(2, 3))
    assert torch.equal(h, torch.full((2, 3), 0.5)) and aux == "aux"


def test_steer_and_capture_bad_input(gpt2):
    ids = torch.tensor([[1, 2]])
    before = _hooks(gpt2)
    with pytest.raises(ValueError, match="width"), steer(gpt2, "transformer.h.0", torch.ones(8)):
        gpt2(ids)
    with pytest.raises(ValueError, match="broadcast"), steer(gpt2, "transformer.h.0", torch.ones(3, 16)):
        gpt2(ids)
    with pytest.raises(ValueError, match="shape"), steer(gpt2, "transformer.h.0", torch.ones(2, 1, 2, 16)):
        gpt2(ids)
    for vector, err in [
        (torch.ones(16, dtype=torch.long), TypeError),
        ([0.0] * 16, TypeError),
        (torch.tensor(1.0), ValueError),
    ]:
        with pytest.raises(err, match="vector"), steer(gpt2, "transformer.h.0", vector):
            pass
    with pytest.raises(TypeError, match="scale"), steer(gpt2, "transformer.h.0", torch.ones(16), scale=True):
        pass
    with pytest.raises(ValueError, match="scale"), steer(gpt2, "transformer.h.0", torch.ones(16), scale=float("nan")):
        pass
    with pytest.raises(ValueError, match="close matches"), steer(gpt2, "transformer.h.00", torch.ones(16)):
        pass
    odd = nn.Sequential(_StrModule())
    with pytest.raises(TypeError, match="returns str"), steer(odd, "0", torch.ones(1)):
        odd(torch.zeros(1))
    with pytest.raises(ValueError, match="repeat"), capture(gpt2, ["transformer.h.0", "transformer.h.0"]):
        pass
    with pytest.raises(ValueError, match="at least one"), capture(gpt2, []):
        pass
    with pytest.raises(TypeError, match="names"), capture(gpt2, 3):
        pass
    with pytest.raises(TypeError, match="detach"), capture(gpt2, "transformer.h.0", detach=1):
        pass
    assert _hooks(gpt2) == before


class _StrModule(nn.Module):
    def forward(self, x):
        return "not a tensor"


def test_capture_keeps_the_graph_when_asked(gpt2):
    with capture(gpt2, "transformer.h.0", detach=False) as acts:
        gpt2(torch.tensor([[1, 2]]))
    assert acts["transformer.h.0"].requires_grad
    with capture(gpt2, "") as whole:  # the model itself: the first entry of its ModelOutput (the logits)
        logits = gpt2(torch.tensor([[1, 2]])).logits
    assert torch.equal(whole[""], logits.detach())


# ------------------------------------------------------------------------------------------------ residual_activations
def _tiny_causal_lm(arch: str):
    if arch == "gpt2":
        return _gpt2()
    if arch == "llama":
        return _llama()
    cfg = transformers.GPTNeoXConfig(**_TINY_LM)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


@pytest.mark.parametrize("arch", ["gpt2", "gpt_neox", "llama"])
def test_hf_residual_activations_match_the_hidden_states(tmp_path, arch):
    """Every layer, from the embeddings (0) to the last block after the final norm (n), is hidden_states[layer]."""
    model = _tiny_causal_lm(arch)
    model.save_pretrained(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ids = torch.randint(0, 50, (5, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        hs = model(ids, output_hidden_states=True).hidden_states
    for layer in range(3):
        acts = residual_activations(model, ids, layer, batch_size=2)
        assert acts.shape == (5, 10, 16) and acts.dtype == torch.float32
        assert torch.allclose(acts, hs[layer], atol=1e-6)
    several = residual_activations(model, ids.numpy().astype("int32"), layers=[2, 0, 1])
    assert list(several) == [2, 0, 1]  # in the order asked for
    assert all(torch.allclose(several[k], hs[k], atol=1e-6) for k in range(3))
    tfa = TemporalSAE(16, 32, k=2, scaling_factor=scaling_factor(several[1]))
    assert tfa(several[1])[0].shape == several[1].shape


def test_hf_residual_activations_stop_after_the_deepest_layer(llama):
    """The blocks above the deepest layer asked for and the LM head never run; the hooks are gone afterwards."""
    ran = []

    def note(name):
        return lambda *args: ran.append(name)

    names = ["model.layers.0", "model.layers.1", "model.norm", "lm_head"]
    before = _hooks(llama)
    with forward_hooks(llama, {name: note(name) for name in names}):
        residual_activations(llama, torch.ones(3, 4, dtype=torch.long), layers=[0, 1], batch_size=2)
        assert ran == ["model.layers.0"] * 2
        ran.clear()
        residual_activations(llama, torch.ones(1, 4, dtype=torch.long), 0)
        assert ran == []
        residual_activations(llama, torch.ones(1, 4, dtype=torch.long), 2)
        assert ran == ["model.layers.0", "model.layers.1", "model.norm"]  # no lm_head
    assert _hooks(llama) == before


def test_hf_residual_activations_bad_input(gpt2):
    ids = torch.randint(0, 50, (3, 10))
    with pytest.raises(ValueError, match=r"layer must be in \[0, 2\]"):
        residual_activations(gpt2, ids, layer=9)
    with pytest.raises(ValueError, match="layers must be in"):
        residual_activations(gpt2, ids, layers=[1, 3])
    with pytest.raises(ValueError, match="layer must be"):
        residual_activations(gpt2, ids, layer=-1)
    with pytest.raises(TypeError, match="exactly one of layer"):
        residual_activations(gpt2, ids)
    with pytest.raises(TypeError, match="exactly one of layer"):
        residual_activations(gpt2, ids, 1, layers=[1])
    with pytest.raises(TypeError, match="layers must be a list"):
        residual_activations(gpt2, ids, layers=1)
    with pytest.raises(ValueError, match="at least one"):
        residual_activations(gpt2, ids, layers=[])
    with pytest.raises(ValueError, match="repeat"):
        residual_activations(gpt2, ids, layers=[1, 1])
    with pytest.raises(TypeError, match="layer"):
        residual_activations(gpt2, ids, layer=1.0)
    with pytest.raises(TypeError, match="input_ids"):
        residual_activations(gpt2, ids.float(), layer=1)
    with pytest.raises(ValueError, match="input_ids"):
        residual_activations(gpt2, ids[0], layer=1)
    with pytest.raises(ValueError, match="input_ids"):
        residual_activations(gpt2, ids[:0], layer=1)
    with pytest.raises(ValueError, match="batch_size"):
        residual_activations(gpt2, ids, layer=1, batch_size=0)
    with pytest.raises(TypeError, match="model"):
        residual_activations(nn.Linear(2, 2), ids, layer=1)


# ------------------------------------------------------------------------------------------------ image_features
@pytest.fixture(scope="module")
def tiny_dinov2(tmp_path_factory):
    torch.manual_seed(0)
    cfg = transformers.Dinov2Config(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8
    )
    path = tmp_path_factory.mktemp("dinov2_tiny")
    transformers.Dinov2Model(cfg).save_pretrained(path)
    return path


def test_hub_image_features_loads_a_local_model(tiny_dinov2):
    g = torch.Generator().manual_seed(0)
    imgs = torch.rand(5, 3, 16, 16, generator=g) * 2 - 1  # [-1, 1], resized to the config's 32×32
    f = image_features(imgs, tiny_dinov2, batch_size=2)
    assert f.shape == (5, 32) and f.dtype == torch.float32 and bool(torch.isfinite(f).all())
    # batching does not change the features; [0, 1] input with value_range=(0, 1) gives the same features
    assert torch.allclose(f, image_features(imgs, str(tiny_dinov2), batch_size=5), atol=1e-5)
    assert torch.allclose(f, image_features((imgs + 1) / 2, tiny_dinov2, value_range=(0, 1)), atol=1e-5)
    # grayscale is repeated to RGB; an explicit image size is honoured (DINOv2 interpolates its position embeddings)
    gray = image_features(imgs[:, :1], tiny_dinov2)
    assert torch.allclose(gray, image_features(imgs[:, :1].expand(-1, 3, -1, -1), tiny_dinov2), atol=1e-5)
    assert image_features(imgs, tiny_dinov2, image_size=24).shape == (5, 32)
    assert block_names(load_pretrained(tiny_dinov2, "model")) == ["encoder.layer.0"]


def test_hub_image_features_bad_input(tiny_dinov2, monkeypatch):
    imgs = torch.zeros(2, 3, 8, 8)
    with pytest.raises(TypeError, match="images"):
        image_features(imgs.numpy(), tiny_dinov2)
    with pytest.raises(ValueError, match="images"):
        image_features(torch.zeros(2, 2, 8, 8), tiny_dinov2)
    with pytest.raises(ValueError, match="images"):
        image_features(torch.zeros(3, 8, 8), tiny_dinov2)
    with pytest.raises(TypeError, match="model_name_or_path"):
        image_features(imgs, 3)
    with pytest.raises(ValueError, match="batch_size"):
        image_features(imgs, tiny_dinov2, batch_size=0)
    with pytest.raises(ValueError, match="value_range"):
        image_features(imgs, tiny_dinov2, value_range=(1, 0))
    monkeypatch.delenv(ALLOW_DOWNLOAD_ENV, raising=False)
    with pytest.raises(NotDownloadedError, match="hf download iclr26-test/absent-dinov2"):
        image_features(imgs, "iclr26-test/absent-dinov2")


# ------------------------------------------------------------------------------------------------ write_tiny_model
@pytest.mark.parametrize("kind", ["gpt2", "llama", "gpt_neox"])
def test_write_tiny_model_causal_lms_load_and_run(tmp_path, kind):
    from iclr26.hf import write_tiny_model

    folder = write_tiny_model(kind, tmp_path / kind, words=["red circle", "blue"])
    model = load_pretrained(folder)
    tok = load_pretrained(folder, "tokenizer")
    ids = tok("the red circle is blue", return_tensors="pt").input_ids
    assert tok.unk_token_id not in ids.tolist()[0]  # the words given are in the vocabulary
    h = residual_activations(model, ids, layers=[0, 2])
    assert h[2].shape == (1, ids.shape[1], 16) and bool(torch.isfinite(h[2]).all())
    state = torch.random.get_rng_state()
    again = load_pretrained(write_tiny_model(kind, tmp_path / "again", words=["red circle", "blue"]))
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's random stream is untouched
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_write_tiny_model_bert_is_a_masked_lm_with_a_mask_token(tmp_path):
    from iclr26.hf import write_tiny_model

    folder = write_tiny_model("bert", tmp_path / "bert", words=["anna said that he likes tea", "she"])
    model = load_pretrained(folder, "masked_lm")
    tok = load_pretrained(folder, "tokenizer")
    assert isinstance(model, transformers.BertForMaskedLM)
    enc = tok(["anna said that [MASK] likes tea", "she"], return_tensors="pt", padding=True)
    words = tok.convert_ids_to_tokens(enc.input_ids[0].tolist())
    assert words == ["[CLS]", "anna", "said", "that", "[MASK]", "likes", "tea", "[SEP]"]
    assert enc.input_ids[1, -1] == tok.pad_token_id and enc.attention_mask[1].sum() == 3
    assert tok.encode("he", add_special_tokens=False) != tok.encode("she", add_special_tokens=False)
    logits = model(**enc).logits
    assert logits.shape == (2, 8, len(tok)) and bool(torch.isfinite(logits).all())
    again = load_pretrained(
        write_tiny_model("bert", tmp_path / "again", words=["anna said that he likes tea", "she"]), "masked_lm"
    )
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_write_tiny_model_dinov2_gives_image_features(tmp_path):
    """With an image processor saved beside it, as a hub DINOv2 ships one (its crop size is a SizeDict in recent
    transformers, which image_features once mistook for the size itself)."""
    from iclr26.hf import write_tiny_model

    folder = write_tiny_model("dinov2", tmp_path)
    assert load_pretrained(folder, "image_processor").crop_size["height"] == 32
    f = image_features(torch.rand(3, 1, 8, 8), folder, batch_size=2)
    assert f.shape == (3, 32) and bool(torch.isfinite(f).all())


def test_write_tiny_model_bad_input(tmp_path):
    from iclr26.hf import write_tiny_model

    with pytest.raises(ValueError, match="kind"):
        write_tiny_model("t5", tmp_path)
    with pytest.raises(TypeError, match="path"):
        write_tiny_model("gpt2", 3)
    with pytest.raises(TypeError, match="words"):
        write_tiny_model("gpt2", tmp_path, words="red")
    with pytest.raises(TypeError, match="words"):
        write_tiny_model("gpt2", tmp_path, words=[1])
    with pytest.raises(ValueError, match="seed"):
        write_tiny_model("gpt2", tmp_path, seed=-1)
