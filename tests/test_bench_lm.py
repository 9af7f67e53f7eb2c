"""tools/bench_lm.py on a tiny GGUF model (the real SmolLM2 run is `make bench`), and its Reproducibility section."""

from pathlib import Path

import pytest

from tools.reproducibility import write_page

ROOT = Path(__file__).resolve().parent.parent


def test_lm_speed_on_a_tiny_gguf_and_its_page_section(tmp_path):
    pytest.importorskip("gguf")
    from iclr26.hf import write_tiny_gguf
    from tools.bench_lm import lm_speed

    gguf_file = write_tiny_gguf(tmp_path / "tiny.gguf", n_layers=2, d_model=32, d_mlp=64)
    res = lm_speed(gguf_file, tmp_path / "cache", n_tokens=128, window=16, batch=2, layer=1)
    assert res["tokens_per_s"]["residual"] > 0 and res["tokens_per_s"]["plain"] > 0
    assert res["max_abs_diff"] < 1e-5  # the two ways give the same activations
    assert res["gflop_per_token"] == 2 * (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 64) / 1e9  # q, o; k, v (2 kv heads); mlp
    assert res["flop_ratio"] == pytest.approx((2 * 18432 + 2 * 32 * 271) / 18432)  # 2 blocks + LM head vs 1 block
    assert res["model"] == {"name": "tiny", "layers": 2, "d_model": 32, "parameters": res["model"]["parameters"]}
    bench = {"date": "2026-12-05", "machine": "2 CPU cores", "runs": [], "lm_speed": res}
    text = write_page([bench], tmp_path / "r.md", source="test").read_text()
    assert "## A real language model's activations" in text
    assert f"**{res['speedup']:.1f}×** as fast as the plain forward pass, which does {res['flop_ratio']:.2f}×" in text
    with pytest.raises(ValueError, match="n_tokens must be a multiple"):
        lm_speed(gguf_file, tmp_path / "cache", n_tokens=100, window=16, batch=2)
    with pytest.raises(ValueError, match="layer must be at most 2"):
        lm_speed(gguf_file, tmp_path / "cache", n_tokens=32, window=16, batch=2, layer=3)
    with pytest.raises(TypeError, match="window"):
        lm_speed(gguf_file, tmp_path / "cache", window=16.0)
