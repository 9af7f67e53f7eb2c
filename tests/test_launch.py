"""`python -m iclr26.book.launch` (and under `torchrun`): a chapter's cells tagged `launch` run outside the notebook,
the entry function trains through `fit`, and `save_result`/`load_results` carry the runs back to the notebook."""

import json
from pathlib import Path

import nbformat
import pytest
import torch
from safetensors.torch import load_file

from iclr26.book.launch import launch_cells, load_results, run_chapter, save_result

NBS = Path(__file__).resolve().parent.parent / "nbs"


def _kept(out: Path) -> dict[str, int]:
    """The kept JSON results under ``out`` with their modification times (unchanged by a pass that trains nothing)."""
    return {p.name: p.stat().st_mtime_ns for p in out.glob("*.json")}


SETUP = """
import torch
from iclr26.book.launch import save_result
from iclr26.train import fit
SCALES = {"ci": {"steps": 4, "batch": 8}, "book": {"steps": 8, "batch": 8}, "paper": {"steps": 50, "batch": 64}}
cfg = SCALES[scale]
"""
TRAIN = """
def batches(step):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(cfg["batch"], 3, generator=g)
    return x, x.sum(-1, keepdim=True)


def launch(out):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1])
    history = fit(model, loss, batches, opt, steps=cfg["steps"], log_every=1, progress=False)
    record = {"final_loss": float(history.loss.iloc[-1]), "device": device}
    save_result(out, f"linear_{scale}_seed{seed}", record, model)
    return history
"""


def _notebook(tmp_path: Path, cells=None, entry=None) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = (
        cells
        if cells is not None
        else [
            nbformat.v4.new_code_cell(SETUP, metadata={"tags": ["launch"]}),
            nbformat.v4.new_code_cell("raise RuntimeError('a cell without the launch tag ran')"),
            nbformat.v4.new_code_cell(TRAIN, metadata={"tags": ["launch", "hide-input"]}),
        ]
    )
    if entry:
        nb.metadata["iclr26"] = {"launch": {"entry": entry}}
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    return path


def test_one_process_runs_the_tagged_cells_and_keeps_the_result(tmp_path):
    nb = _notebook(tmp_path)
    cells, entry = launch_cells(nb)
    assert len(cells) == 2 and entry is None  # no entry named: `launch` is called if the cells define it
    history = run_chapter(nb, tmp_path / "runs", scale="ci", seed=3, device="cpu")
    assert len(history) == 4
    results = load_results(tmp_path / "runs")
    assert list(results) == ["linear_ci_seed3"]
    assert results["linear_ci_seed3"]["final_loss"] == pytest.approx(history.loss.iloc[-1])
    assert results["linear_ci_seed3"]["device"] == "cpu"
    assert set(load_file(str(tmp_path / "runs" / "linear_ci_seed3.safetensors"))) == {"weight", "bias"}


@pytest.mark.kernel
def test_two_gloo_processes_under_torchrun_match_one(tmp_path, torchrun):
    nb = _notebook(tmp_path)
    run_chapter(nb, tmp_path / "one", scale="book", seed=0)
    torchrun("-m", "iclr26.book.launch", nb, "--scale", "book", "--out", tmp_path / "two", cwd=tmp_path)
    one, two = load_results(tmp_path / "one"), load_results(tmp_path / "two")
    assert list(two) == ["linear_book_seed0"]  # rank 0 alone wrote
    assert two["linear_book_seed0"]["final_loss"] == pytest.approx(one["linear_book_seed0"]["final_loss"], rel=1e-5)
    w1 = load_file(str(tmp_path / "one" / "linear_book_seed0.safetensors"))
    w2 = load_file(str(tmp_path / "two" / "linear_book_seed0.safetensors"))
    for k in w1:
        assert torch.allclose(w1[k], w2[k], atol=1e-6), k


def test_launch_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no code cell tagged 'launch'"):
        launch_cells(_notebook(tmp_path, cells=[nbformat.v4.new_code_cell("x = 1")]))
    magic = [nbformat.v4.new_code_cell("%matplotlib inline", metadata={"tags": ["launch"]})]
    with pytest.raises(ValueError, match="not plain Python"):
        launch_cells(_notebook(tmp_path, cells=magic))
    nb = _notebook(tmp_path, entry="train_everything")
    with pytest.raises(ValueError, match="train_everything"):
        run_chapter(nb, tmp_path / "out", scale="ci")
    nb = _notebook(tmp_path)
    with pytest.raises(ValueError, match="scale"):
        run_chapter(nb, tmp_path / "out", scale="huge")
    with pytest.raises(ValueError, match="seed"):
        run_chapter(nb, tmp_path / "out", seed=-1)
    with pytest.raises(TypeError, match="out"):
        run_chapter(nb, 3)
    with pytest.raises(ValueError, match="not a notebook"):
        launch_cells(tmp_path / "missing.ipynb")
    with pytest.raises(ValueError, match="name"):
        save_result(tmp_path, "a/b", {})
    with pytest.raises(TypeError, match="record"):
        save_result(tmp_path, "ok", [1, 2])
    with pytest.raises(TypeError, match="model"):
        save_result(tmp_path, "ok", {}, model="weights")
    assert load_results(tmp_path / "nowhere") == {}
    json.dumps(load_results(tmp_path))


def test_cells_without_an_entry_function_are_the_job(tmp_path):
    cells = [
        nbformat.v4.new_code_cell(
            SETUP + "\nsave_result(results, 'done', {'scale': scale})", metadata={"tags": ["launch"]}
        )
    ]
    namespace = run_chapter(_notebook(tmp_path, cells=cells), tmp_path / "out", scale="ci")
    assert namespace["results"] == str(tmp_path / "out") and namespace["cfg"]["steps"] == 4
    assert load_results(tmp_path / "out") == {"done": {"scale": "ci"}}


@pytest.mark.chapter
def test_optimizer_benchmark_trains_outside_the_notebook_and_reads_its_runs_back(tmp_path):
    """The chapter's launch cells at `ci`: every run is kept, and a second pass (what the notebook does with
    `results` set) reads them all instead of training."""
    nb = NBS / "optimizer_benchmark.ipynb"
    out = tmp_path / "runs"
    first = run_chapter(nb, out, scale="ci", seed=0, device="cpu")
    kept = _kept(out)
    assert len(kept) == len(first["runs"]) > 0, "one kept result per training run"
    second = run_chapter(nb, out, scale="ci", seed=0, device="cpu")
    assert _kept(out) == kept, "the second pass trained nothing"
    cols = ["optimizer", "d_model", "budget", "seed", "loss"]
    assert second["final"][cols].equals(first["final"][cols])


@pytest.mark.chapter
def test_conceptual_blindspots_trains_its_rasae_outside_the_notebook(tmp_path):
    """The chapter's launch cells at `ci` (the tiny DINOv2 fixture): the RA-SAE and its delta table are kept, and the
    table reads back as the notebook reads it with `runs_dir` set."""
    nb = NBS / "conceptual_blindspots.ipynb"
    out = tmp_path / "runs"
    table = run_chapter(nb, out, scale="ci", seed=0, device="cpu")
    kept = load_results(out)["blindspot_table"]
    assert kept["scale"] == "ci" and kept["atom"] == table.index.tolist()
    assert kept["E_real"] == table["E_real"].tolist()
    weights = load_file(str(out / "blindspot_table.safetensors"))
    assert any(k.endswith("W") for k in weights) and any(k.endswith("Relax") for k in weights)


@pytest.mark.chapter
def test_proxy_data_selection_trains_its_lm_runs_outside_the_notebook(tmp_path):
    """The chapter's launch cells at `ci` (a tiny random GPT-NeoX, Markov-chain recipes): every proxy and target run is
    kept, a second pass trains nothing and reads the same table back, and the Spearman summary covers every proxy
    rate and the tuned proxy."""
    nb = NBS / "proxy_data_selection.ipynb"
    out = tmp_path / "runs"
    first = run_chapter(nb, out, scale="ci", seed=0, device="cpu")
    kept = _kept(out)
    runs = load_results(out)
    n_recipes = len(first)
    assert len(kept) == len(runs) == n_recipes * 4, "2 proxy and 2 target rates per recipe at ci, each kept"
    assert all(r["tokens"] > 0 and r["loss"] > 0 for r in runs.values())
    for i, row in enumerate(first.itertuples()):
        target = [r["loss"] for r in runs.values() if r["role"] == "target" and r["recipe"] == i]
        assert row[1] == min(target), "the tuned target is each recipe's best run"
    second = run_chapter(nb, out, scale="ci", seed=0, device="cpu")
    assert _kept(out) == kept, "the second pass trained nothing"
    assert second.equals(first)
    namespace = {"__name__": "iclr26_launch", "scale": "ci", "seed": 0, "device": "cpu", "results": str(out)}
    for src in launch_cells(nb)[0]:
        exec(src, namespace)
    spearman = namespace["lm_spearman"](second)
    assert list(spearman.index) == [*second.filter(like="proxy ").columns, "proxy tuned over its rates"]
    assert spearman.between(-1, 1).all()


@pytest.mark.chapter
def test_patronus_paper_path_runs_on_tiny_files(tmp_path):
    """patronus_diffusion's launch cells at `ci`: the Fashion-MNIST (IDX) and CelebA (original layout) loaders, the
    official-settings training and the official metrics run on tiny files in those formats, and every run is kept."""
    nb = NBS / "patronus_diffusion.ipynb"
    records = run_chapter(nb, tmp_path / "runs", scale="ci", seed=0, device="cpu")
    assert set(records) == {"fmnist", "celeba", "celeba_hair_smile"}
    assert set(load_results(tmp_path / "runs")) == set(records)
    assert all((tmp_path / "runs" / f"{name}.safetensors").is_file() for name in records)
    assert 0 <= records["fmnist"]["probe_accuracy"] <= 1
    assert set(records["celeba"]["probe_auroc"]) == {"Black_Hair", "Blond_Hair", "Brown_Hair", "Smiling"}
    assert records["celeba_hair_smile"]["n_train"] < records["celeba"]["n_train"]  # the hair/smile subset


@pytest.mark.chapter
def test_measure_attention_memory_trains_outside_the_notebook_and_reads_its_runs_back(tmp_path):
    """The chapter's launch cells at `ci`: every training (the n grid, the baselines, the sweep settings, the
    true-density variant) is kept, and a second pass reads them back instead of training, with the same risks."""
    nb = NBS / "measure_attention_memory.ipynb"
    out = tmp_path / "runs"
    first = run_chapter(nb, out, scale="ci", seed=0, device="cpu")
    kept = _kept(out)
    n_sweep = int((first["sweep"].setting != "base").sum())
    assert len(kept) == len(first["runs"]) + n_sweep + 1, "one kept result per training run"
    assert len(list(out.glob("*.safetensors"))) == len(kept), "each run keeps its weights"
    second = run_chapter(nb, out, scale="ci", seed=0, device="cpu")
    assert _kept(out) == kept, "the second pass trained nothing"
    assert second["runs"][["kind", "n", "risk", "mass"]].equals(first["runs"][["kind", "n", "risk", "mass"]])
    assert second["sweep"].rel_risk.tolist() == first["sweep"].rel_risk.tolist()
