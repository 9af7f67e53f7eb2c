import math

import pytest
import torch

from iclr26.runtime import seed_everything
from iclr26.train import fit, load_checkpoint, lr_multiplier, next_token_loss, save_checkpoint


def _problem(seed=0):
    x = torch.randn(512, 4, generator=torch.Generator().manual_seed(0))  # the data is fixed; the seed drives the rest
    y = (x**2).sum(1, keepdim=True)
    seed_everything(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Dropout(0.1), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def batches(step):  # uses the global RNG on purpose: resume must restore it
        idx = torch.randint(0, 512, (32,))
        return x[idx], y[idx]

    def loss_fn(m, batch):
        xb, yb = batch
        return torch.nn.functional.mse_loss(m(xb), yb), {"mae": (m(xb) - yb).abs().mean()}

    return model, batches, loss_fn, (x, y)


def test_fit_learns_and_returns_history():
    model, batches, loss_fn, _ = _problem()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    hist = fit(
        model,
        loss_fn,
        batches,
        opt,
        steps=300,
        schedule="warmup_cosine",
        warmup=20,
        clip=1.0,
        log_every=50,
        progress=False,
    )
    assert list(hist["step"]) == [50, 100, 150, 200, 250, 300]
    assert {"loss", "lr", "seconds", "grad_norm", "mae"} <= set(hist.columns)
    assert hist["loss"].iloc[-1] < hist["loss"].iloc[0]
    assert hist["lr"].iloc[-1] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("optimizers", ["one", "two"])
def test_resume_matches_uninterrupted_run(tmp_path, optimizers):
    def make(model):
        if optimizers == "one":
            return torch.optim.AdamW(model.parameters(), lr=5e-3)
        first, last = model[0], model[3]
        return [
            torch.optim.AdamW(first.parameters(), lr=5e-3),
            torch.optim.SGD(last.parameters(), lr=1e-3, momentum=0.9),
        ]

    kw = dict(schedule="wsd", warmup=5, decay_frac=0.3, clip=1.0, log_every=10, progress=False)
    model_a, batches, loss_fn, _ = _problem(seed=1)
    hist_a = fit(model_a, loss_fn, batches, make(model_a), steps=60, **kw)

    # interrupted: a run crashes at step 37, after writing a checkpoint at step 25
    ckpt = tmp_path / "run.safetensors"
    model_b, batches, loss_fn, _ = _problem(seed=1)
    opt_b = make(model_b)

    class Interrupt(Exception):
        pass

    def crashing_batches(step):
        if step == 37:
            raise Interrupt
        return batches(step)

    with pytest.raises(Interrupt):
        fit(model_b, loss_fn, crashing_batches, opt_b, steps=60, checkpoint=ckpt, checkpoint_every=25, **kw)

    # a fresh process: new model and optimizer objects, different RNG state, then resume
    model_c, batches, loss_fn, _ = _problem(seed=99)
    torch.manual_seed(12345)
    hist_c = fit(model_c, loss_fn, batches, make(model_c), steps=60, resume=ckpt, **kw)
    for (name, a), c in zip(model_a.state_dict().items(), model_c.state_dict().values()):
        assert torch.equal(a, c), name
    assert list(hist_c["step"]) == list(hist_a["step"])
    assert hist_c["loss"].tolist() == pytest.approx(hist_a["loss"].tolist(), rel=0, abs=0)


def test_iterable_batches_and_early_stop():
    model, batches, loss_fn, (x, y) = _problem()
    data = [(x[i : i + 64], y[i : i + 64]) for i in range(0, 512, 64)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    hist = fit(
        model,
        loss_fn,
        data,
        opt,
        steps=500,
        log_every=20,
        eval_fn=lambda m: {"val": torch.nn.functional.mse_loss(m(x), y)},
        stop_fn=lambda row: row["step"] >= 40,
        progress=False,
    )
    assert hist["step"].iloc[-1] == 40 and hist.attrs["stopped_early"]
    assert "val" in hist.columns


def test_time_budget_stops():
    model, batches, loss_fn, _ = _problem()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    hist = fit(model, loss_fn, batches, opt, time_budget=0.2, log_every=5, progress=False)
    assert 0 < hist["step"].iloc[-1] and hist["seconds"].iloc[-1] >= 0.2


def test_lr_multiplier_shapes():
    assert lr_multiplier(0, 100, "constant", warmup=10) == pytest.approx(0.1)
    assert lr_multiplier(50, 100, "constant", warmup=10) == 1.0
    assert lr_multiplier(99, 100, "warmup_cosine", warmup=10, min_lr_ratio=0.1) == pytest.approx(0.1)
    mid = lr_multiplier(54, 100, "warmup_cosine", warmup=10)
    assert mid == pytest.approx(0.5 * (1 + math.cos(math.pi * 44 / 89)))
    wsd = [lr_multiplier(s, 100, "wsd", warmup=0, decay_frac=0.2) for s in range(100)]
    assert all(v == 1.0 for v in wsd[:80]) and wsd[-1] == pytest.approx(0.0) and wsd[85] < wsd[81]
    assert lr_multiplier(99, 100, "linear") == pytest.approx(0.0)


def test_bad_input_names_the_argument(tmp_path):
    model, batches, loss_fn, _ = _problem()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with pytest.raises(TypeError, match="model"):
        fit("model", loss_fn, batches, opt, steps=1)
    with pytest.raises(TypeError, match="loss_fn"):
        fit(model, 3, batches, opt, steps=1)
    with pytest.raises(TypeError, match="batches"):
        fit(model, loss_fn, 3, opt, steps=1)
    with pytest.raises(TypeError, match="optimizer"):
        fit(model, loss_fn, batches, "adam", steps=1)
    with pytest.raises(ValueError, match="steps or time_budget"):
        fit(model, loss_fn, batches, opt)
    with pytest.raises(ValueError, match="steps"):
        fit(model, loss_fn, batches, opt, steps=0)
    with pytest.raises(ValueError, match="schedule"):
        fit(model, loss_fn, batches, opt, steps=10, schedule="exotic")
    with pytest.raises(ValueError, match="needs steps"):
        fit(model, loss_fn, batches, opt, time_budget=1.0, schedule="warmup_cosine")
    with pytest.raises(ValueError, match="warmup"):
        fit(model, loss_fn, batches, opt, steps=10, warmup=20)
    with pytest.raises(ValueError, match="clip"):
        fit(model, loss_fn, batches, opt, steps=10, clip=-1)
    with pytest.raises(ValueError, match="amp"):
        fit(model, loss_fn, batches, opt, steps=10, amp="fp8")
    with pytest.raises(ValueError, match="stop_fn"):
        fit(model, loss_fn, batches, opt, steps=10, stop_fn=lambda r: True)
    with pytest.raises(ValueError, match="checkpoint_every"):
        fit(model, loss_fn, batches, opt, steps=10, checkpoint_every=5)
    with pytest.raises(TypeError, match="loss_fn must return"):
        fit(model, lambda m, b: 1.0, batches, opt, steps=1, progress=False)
    with pytest.raises(ValueError, match="does not exist"):
        fit(model, loss_fn, batches, opt, steps=1, resume=tmp_path / "nope.safetensors")
    with pytest.raises(ValueError, match="total_steps"):
        lr_multiplier(0, 0)


def test_checkpoint_round_trip_and_mismatch(tmp_path):
    model, *_ = _problem()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(8, model[0].in_features)).pow(2).mean().backward()
    opt.step()  # the optimizer now has state (step count, moments) to save
    path = save_checkpoint(tmp_path / "c.safetensors", model, [opt], step=7, history=[{"step": 7, "loss": 1.0}])
    # load into a *fresh* model and optimizer, so that nothing can pass by being already there
    fresh, *_ = _problem()
    with torch.no_grad():
        for p in fresh.parameters():
            p.add_(1.0)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
    step, hist = load_checkpoint(path, fresh, [fresh_opt])
    assert step == 7 and hist == [{"step": 7, "loss": 1.0}]
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), f"parameter {name} not restored"
    saved, loaded = opt.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert saved.keys() == loaded.keys() and saved
    for k in saved:
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(torch.as_tensor(saved[k][key]), torch.as_tensor(loaded[k][key])), f"optimizer {key}"
    with pytest.raises(ValueError, match="optimizer"):
        load_checkpoint(path, model, [])


# ------------------------------------------------------------------------------------------------ next_token_loss
def _bigram(vocab=7, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Embedding(vocab, vocab)  # logits for the next token from the current one: (batch, seq, vocab)


def test_next_token_loss_is_the_mean_over_scored_positions():
    model = _bigram()
    tokens = torch.randint(7, (3, 9), generator=torch.Generator().manual_seed(1))
    logp = torch.log_softmax(model(tokens), -1)
    for skip in (0, 1, 4, 7):
        terms = [-logp[b, t, tokens[b, t + 1]] for b in range(3) for t in range(skip, 8)]
        expected = torch.stack(terms).mean()
        for feed_last in (False, True):
            got = next_token_loss(model, tokens, skip, feed_last=feed_last)
            torch.testing.assert_close(got, expected)
    assert next_token_loss(model, tokens, 1) != next_token_loss(model, tokens, 0)  # skip changes what is scored


def test_next_token_loss_reproduces_the_chapters_definitions_bitwise():
    """skip=0 is temporal_sae's old lm_loss, skip=k-1 with feed_last optimizer_benchmark's: same bits, same grads."""
    from iclr26.models import TinyTransformer, TransformerConfig

    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=16, n_ctx=16, d_model=24, n_layers=1, n_heads=4, d_mlp=96))
    tokens = torch.randint(16, (32, 16), generator=torch.Generator().manual_seed(2))

    def temporal_sae_lm_loss(m, tok):
        logits = m(tok[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tok[:, 1:].reshape(-1))

    def optimizer_benchmark_lm_loss(m, tok, k):
        logits = m(tok)
        return torch.nn.functional.cross_entropy(
            logits[:, k - 1 : -1].reshape(-1, logits.shape[-1]), tok[:, k:].reshape(-1)
        )

    def value_and_grads(fn):
        model.zero_grad()
        loss = fn()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    for old, new in [
        (lambda: temporal_sae_lm_loss(model, tokens), lambda: next_token_loss(model, tokens)),
        (
            lambda: optimizer_benchmark_lm_loss(model, tokens, 2),
            lambda: next_token_loss(model, tokens, 1, feed_last=True),
        ),
        (lambda: optimizer_benchmark_lm_loss(model, tokens, 1), lambda: next_token_loss(model, tokens, feed_last=True)),
    ]:
        (a, ga), (b, gb) = value_and_grads(old), value_and_grads(new)
        assert torch.equal(a, b) and all(torch.equal(x, y) for x, y in zip(ga, gb))


def test_next_token_loss_trains_with_fit():
    model = _bigram(5)
    seq = torch.arange(40).remainder(5)[None].repeat(8, 1)  # 0 1 2 3 4 0 1 ...: the next token is determined
    hist = fit(
        model,
        next_token_loss,
        lambda step: seq,
        torch.optim.Adam(model.parameters(), lr=0.1),
        steps=60,
        log_every=10,
        progress=False,
    )
    assert hist["loss"].iloc[-1] < 0.1 < hist["loss"].iloc[0]


@pytest.mark.parametrize(
    "make, err, match",
    [
        (lambda m, t: next_token_loss("model", t), TypeError, "model"),
        (lambda m, t: next_token_loss(m, t.float()), TypeError, "tokens"),
        (lambda m, t: next_token_loss(m, t.bool()), TypeError, "tokens"),
        (lambda m, t: next_token_loss(m, t.tolist()), TypeError, "tokens"),
        (lambda m, t: next_token_loss(m, t[0]), ValueError, "tokens"),
        (lambda m, t: next_token_loss(m, t, skip=-1), ValueError, "skip"),
        (lambda m, t: next_token_loss(m, t, skip=1.0), TypeError, "skip"),
        (lambda m, t: next_token_loss(m, t, skip=5), ValueError, "skip"),
        (lambda m, t: next_token_loss(m, t[:, :1]), ValueError, "positions"),
        (lambda m, t: next_token_loss(m, t, feed_last=1), TypeError, "feed_last"),
        (lambda m, t: next_token_loss(lambda x: m(x)[:, :-1], t), ValueError, "logits"),
        (lambda m, t: next_token_loss(lambda x: m(x).sum(-1), t), ValueError, "logits"),
        (lambda m, t: next_token_loss(lambda x: (m(x),), t), ValueError, "logits"),
    ],
)
def test_next_token_loss_bad_input(make, err, match):
    model, tokens = _bigram(), torch.randint(7, (2, 6))
    with pytest.raises(err, match=match):
        make(model, tokens)


def test_load_checkpoint_returns_a_named_pair_and_integer_arguments_take_numpy_ints(tmp_path):
    import numpy as np

    from iclr26.train import Checkpoint

    model, batches, loss_fn, _ = _problem()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    hist = fit(
        model,
        loss_fn,
        batches,
        opt,
        steps=np.int64(4),
        warmup=np.int64(2),
        log_every=np.int64(2),
        schedule="warmup_cosine",
        clip=np.float64(1.0),
        progress=False,
    )
    assert list(hist["step"]) == [2, 4]
    path = save_checkpoint(tmp_path / "c.safetensors", model, [opt], step=np.int64(4), history=[{"step": 4}])
    out = load_checkpoint(path, model, [opt])
    assert isinstance(out, Checkpoint) and out._fields == ("step", "history")
    step, history = out
    assert (step, history) == (out.step, out.history) == (4, [{"step": 4}])
    assert lr_multiplier(np.int64(3), np.int64(10), warmup=np.int64(5)) == pytest.approx(4 / 5)


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(steps=10.0), TypeError, "steps must be an int"),
        (dict(steps=10, warmup=1.5), TypeError, "warmup must be an int"),
        (dict(steps=10, log_every=2.0), TypeError, "log_every must be an int"),
        (dict(steps=10, eval_fn=lambda m: {}, eval_every=0), ValueError, "eval_every must be an int >= 1"),
        (dict(steps=10, clip="1"), TypeError, "clip must be a number"),
        (dict(steps=10, decay_frac=1.5), ValueError, "decay_frac must be a number in"),
        (dict(time_budget="1s"), TypeError, "time_budget must be a number"),
        (dict(steps=10, schedule=3), TypeError, "schedule must be one of"),
        (dict(steps=10, progress=1), TypeError, "progress must be a bool"),
        (dict(steps=10, checkpoint="c.st", checkpoint_every=2.0), TypeError, "checkpoint_every must be an int"),
    ],
)
def test_fit_argument_types(kwargs, err, match):
    model, batches, loss_fn, _ = _problem()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with pytest.raises(err, match=match):
        fit(model, loss_fn, batches, opt, **kwargs)


# ------------------------------------------------------------------------------------------------ run_concurrently
@pytest.fixture
def two_threads():
    """torch at two intra-op threads, so that the one-thread property is visible (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _small_runs(n=3, steps=25, record=None):
    """n small trainings, each seeded and built before it runs; each draws its batches from its own generator.
    Matrices large enough for torch to split them across threads; ``record`` gets each job's thread count."""
    x = torch.randn(2048, 64, generator=torch.Generator().manual_seed(1))
    y = x[:, :1] * x[:, 1:2]
    runs = []
    for i in range(n):
        seed_everything(i)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

        def batches(step, i=i):
            idx = torch.randint(0, 2048, (512,), generator=torch.Generator().manual_seed(1000 * i + step))
            return x[idx], y[idx]

        def job(model=model, opt=opt, batches=batches):
            if record is not None:
                record.append(torch.get_num_threads())
            fit(model, lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]), batches, opt, steps=steps)
            return model

        runs.append(job)
    return runs


def _params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_run_concurrently_is_bit_identical_to_one_thread_one_after_another(two_threads):
    from iclr26.train import run_concurrently

    torch.set_num_threads(1)
    alone = [job() for job in _small_runs()]
    torch.set_num_threads(2)
    for workers in (None, 1, 2, 3):
        seen = []
        together = run_concurrently(_small_runs(record=seen), workers=workers)
        assert seen == [1, 1, 1], workers  # one torch thread in every job ...
        assert len(together) == len(alone)
        for a, b in zip(alone, together):
            assert torch.equal(_params(a), _params(b)), workers
        assert torch.get_num_threads() == 2  # ... and the count restored after


def test_run_concurrently_order_threads_grad_mode_and_errors(two_threads):
    import threading

    from iclr26.train import run_concurrently

    def who(i):
        def job():
            return i, threading.get_ident(), torch.is_grad_enabled()

        return job

    out = run_concurrently([who(i) for i in range(5)], workers=2)
    assert [i for i, _, _ in out] == list(range(5))  # results in the order of jobs
    assert threading.get_ident() not in {t for _, t, _ in out}  # on worker threads
    assert torch.get_num_threads() == 2
    assert {t for _, t, _ in run_concurrently([who(0), who(1)], workers=1)} == {threading.get_ident()}
    with torch.no_grad():  # the caller's grad mode reaches the workers
        assert not any(g for _, _, g in run_concurrently([who(0), who(1)], workers=2))
    assert all(g for _, _, g in run_concurrently([who(0), who(1)], workers=2))
    assert run_concurrently([]) == []

    ran = []

    def boom():
        raise RuntimeError("job failed")

    def later():
        ran.append(1)

    with pytest.raises(RuntimeError, match="job failed"):
        run_concurrently([who(0), boom, who(2)], workers=2)
    with pytest.raises(RuntimeError, match="job failed"):
        run_concurrently([boom, later], workers=1)  # the jobs after a failure do not start
    assert ran == []
    assert torch.get_num_threads() == 2  # restored after a failure too


def test_run_concurrently_rejects_bad_input():
    from iclr26.train import run_concurrently

    with pytest.raises(TypeError, match="jobs"):
        run_concurrently(lambda: 1)
    with pytest.raises(TypeError, match="jobs"):
        run_concurrently("ab")
    with pytest.raises(TypeError, match=r"jobs\[1\]"):
        run_concurrently([lambda: 1, 2])
    with pytest.raises(ValueError, match="workers"):
        run_concurrently([lambda: 1], workers=0)
    with pytest.raises(TypeError, match="workers"):
        run_concurrently([lambda: 1], workers="2")
