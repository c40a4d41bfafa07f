"""Interference prediction (Castor §6): predict the ratio ξ of a pair of jobs from per-job features.

Castor fits a regression tree on hardware counters of each job profiled alone (DCGM: FP32 activity,
SM occupancy, ...) and predicts ξ for pairs that were never measured together. The public data we have
is Gavel's measured throughputs (``../shared/data/gavel``): every job type's isolated throughput on three
GPU types (k80, p100, v100) and at 1, 2, 4, 8 GPUs, and the co-located throughput of every pair of job
types on one GPU. So the per-job features here are what one-time isolated profiling gives:

* ``log_tput_<w>``: log isolated steps/s on each worker type ``w`` (one GPU);
* ``speedup_<w>``: throughput on ``w`` over k80 (how compute-bound the job is: a job that gains a lot
  from a faster GPU keeps the GPU busy, a job that does not is bound elsewhere — input, CPU);
* ``scaling_<w>_<s>``: throughput at ``s`` GPUs over one GPU (communication intensity; ``-1`` when not
  measured);
* ``log2_batch``: the batch size parsed from the job type name (``-1`` if none);
* ``family_<name>``: one-hot model family (``ResNet-18``, ``LM``, ...).

A pair's feature vector is the worker type (one-hot), the victim's and the other job's throughput on that
worker, then the victim's features and the other's. The label is Gavel's ``slowdown_a`` (isolated over
co-located throughput of the victim). Pairs that do not fit together (``feasible = 0``) have no label and
are left out: whether a pair fits is a memory question, which duetto's memory model answers.

The fitted model is an ensemble of regression trees (scikit-learn's ``DecisionTreeRegressor`` or
``GradientBoostingRegressor``), exported to plain arrays (:class:`TreeEnsemble`) so that prediction needs
no scikit-learn and the model can be written to JSON exactly (``PredictedInterference.to_dict``).

:class:`PredictedInterference` is an interference model (the protocol of
:mod:`formulation.interference`): profile name → features, ``ratio`` predicts and clips ξ to >= 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import pandas as pd

from formulation.errors import DuettoInputError
from formulation.extras import require_extra
from formulation.paths import shared_data_dir
from formulation.speed import Profile

WORKER_TYPES: tuple[str, ...] = ("k80", "p100", "v100")
SCALE_FACTORS: tuple[int, ...] = (2, 4, 8)
#: Model families of the Gavel job types (the one-hot features); unknown families get all zeros.
FAMILIES: tuple[str, ...] = ("A3C", "CycleGAN", "LM", "Recommendation", "ResNet-18", "ResNet-50", "Transformer")
ISOLATED_FILE = "gavel_isolated_throughputs.csv"
PAIRS_FILE = "gavel_pairwise_colocation.csv"
MISSING = -1.0  # sentinel for a feature that was not measured (trees split on it like any value)

Estimator = Literal["gradient-boosting", "tree"]
SplitKind = Literal["pair", "job"]

_BATCH_RE = re.compile(r"\(batch size (\d+)\)")


def job_features_names() -> tuple[str, ...]:
    """Names of the per-job features, in order."""
    names = [f"log_tput_{w}" for w in WORKER_TYPES]
    names += [f"speedup_{w}" for w in WORKER_TYPES if w != "k80"]
    names += [f"scaling_{w}_{s}" for w in WORKER_TYPES for s in SCALE_FACTORS]
    names.append("log2_batch")
    names += [f"family_{f}" for f in FAMILIES]
    return tuple(names)


def pair_feature_names() -> tuple[str, ...]:
    """Names of a pair's features, in order: worker one-hot, throughput here, victim's, other's."""
    own = job_features_names()
    return (
        *(f"worker_{w}" for w in WORKER_TYPES),
        "victim_log_tput_here",
        "other_log_tput_here",
        *(f"victim_{n}" for n in own),
        *(f"other_{n}" for n in own),
    )


def family_of(job_type: str) -> str:
    """Model family of a Gavel job type name: ``"ResNet-18 (batch size 32)"`` → ``"ResNet-18"``."""
    return _BATCH_RE.sub("", job_type).strip()


def batch_size_of(job_type: str) -> int | None:
    """Batch size parsed from a Gavel job type name, or ``None``."""
    match = _BATCH_RE.search(job_type)
    return int(match.group(1)) if match else None


def _gavel_file(data_dir: str | Path | None, name: str) -> Path:
    base = Path(data_dir) if data_dir is not None else shared_data_dir() / "gavel"
    file = base / name
    if not file.is_file():
        raise DuettoInputError("Gavel throughput file not found", source=str(file))
    return file


def gavel_job_features(data_dir: str | Path | None = None) -> dict[str, dict[str, float]]:
    """Per-job features of every Gavel job type, from ``gavel_isolated_throughputs.csv``.

    Parameters
    ----------
    data_dir
        Folder holding the Gavel files (default ``shared_data_dir() / "gavel"``).

    Returns
    -------
    dict
        Job type → ``{feature name: value}`` (names :func:`job_features_names`).
    """
    file = _gavel_file(data_dir, ISOLATED_FILE)
    frame = pd.read_csv(file)
    needed = {"worker_type", "job_type", "scale_factor", "isolated_tput_steps_per_s"}
    if not needed <= set(frame.columns):
        raise DuettoInputError(f"expected columns {sorted(needed)}", source=str(file))
    tput: dict[tuple[str, str, int], float] = {
        (str(job_type), str(worker), int(scale)): float(value)
        for job_type, worker, scale, value in zip(
            frame["job_type"].tolist(),
            frame["worker_type"].tolist(),
            frame["scale_factor"].tolist(),
            frame["isolated_tput_steps_per_s"].tolist(),
            strict=True,
        )
    }
    result: dict[str, dict[str, float]] = {}
    for job_type in sorted({str(t) for t in frame["job_type"]}):
        one = {w: tput.get((job_type, w, 1), math.nan) for w in WORKER_TYPES}
        if not all(v > 0 for v in one.values()):
            continue  # not profiled on every worker type alone: no features
        features: dict[str, float] = {f"log_tput_{w}": math.log(one[w]) for w in WORKER_TYPES}
        for w in WORKER_TYPES:
            if w != "k80":
                features[f"speedup_{w}"] = one[w] / one["k80"]
        for w in WORKER_TYPES:
            for s in SCALE_FACTORS:
                scaled = tput.get((job_type, w, s))
                features[f"scaling_{w}_{s}"] = scaled / one[w] if scaled is not None and scaled > 0 else MISSING
        batch = batch_size_of(job_type)
        features["log2_batch"] = math.log2(batch) if batch else MISSING
        family = family_of(job_type)
        for f in FAMILIES:
            features[f"family_{f}"] = 1.0 if family == f else 0.0
        result[job_type] = features
    return result


def gavel_pair_samples(data_dir: str | Path | None = None) -> pd.DataFrame:
    """Measured ξ of every ordered co-located pair (one GPU each, pairs that fit).

    Returns
    -------
    pandas.DataFrame
        Columns ``worker_type, victim, other, xi, pair`` (``pair``: the unordered pair's key, the same for
        both directions and every worker type, used to hold out whole pairs).
    """
    file = _gavel_file(data_dir, PAIRS_FILE)
    frame = pd.read_csv(file)
    needed = {"worker_type", "job_type_a", "job_type_b", "scale_factor", "feasible", "slowdown_a", "slowdown_b"}
    if not needed <= set(frame.columns):
        raise DuettoInputError(f"expected columns {sorted(needed)}", source=str(file))
    frame = frame[(frame["scale_factor"] == 1) & (frame["feasible"] == 1) & frame["worker_type"].isin(WORKER_TYPES)]
    rows: list[dict[str, Any]] = []
    for record in frame.to_dict(orient="records"):
        a, b = str(record["job_type_a"]), str(record["job_type_b"])
        key = " | ".join(sorted((a, b)))
        slow_a, slow_b = float(record["slowdown_a"]), float(record["slowdown_b"])
        # a job type next to itself gives one sample, not two
        directions = ((a, b, slow_a),) if a == b else ((a, b, slow_a), (b, a, slow_b))
        for victim, other, xi in directions:
            rows.append(
                {"worker_type": str(record["worker_type"]), "victim": victim, "other": other, "xi": xi, "pair": key}
            )
    return pd.DataFrame(rows, columns=["worker_type", "victim", "other", "xi", "pair"])


def pair_vector(victim: Mapping[str, float], other: Mapping[str, float], worker_type: str) -> list[float]:
    """Feature vector of ``victim`` next to ``other`` on ``worker_type`` (order :func:`pair_feature_names`).

    Missing per-job features count as :data:`MISSING`.
    """
    if worker_type not in WORKER_TYPES:
        raise DuettoInputError(
            f"unknown worker type '{worker_type}'; known: {', '.join(WORKER_TYPES)}", field="worker_type"
        )
    own = job_features_names()
    vector = [1.0 if worker_type == w else 0.0 for w in WORKER_TYPES]
    vector.append(float(victim.get(f"log_tput_{worker_type}", MISSING)))
    vector.append(float(other.get(f"log_tput_{worker_type}", MISSING)))
    vector += [float(victim.get(name, MISSING)) for name in own]
    vector += [float(other.get(name, MISSING)) for name in own]
    return vector


def design_matrix(samples: pd.DataFrame, features: Mapping[str, Mapping[str, float]]) -> np.ndarray:
    """Feature matrix of ``samples`` (rows of :func:`gavel_pair_samples`)."""
    return np.asarray(
        [
            pair_vector(features[v], features[o], w)
            for v, o, w in zip(samples["victim"], samples["other"], samples["worker_type"], strict=True)
        ],
        dtype=float,
    )


# --- the exported model ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    """One regression tree as arrays (scikit-learn's ``tree_`` layout; a leaf has ``left == -1``)."""

    left: tuple[int, ...]
    right: tuple[int, ...]
    feature: tuple[int, ...]
    threshold: tuple[float, ...]
    value: tuple[float, ...]
    _arrays: tuple[np.ndarray, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # numpy copies once, not at every prediction
        arrays = (
            np.asarray(self.left, dtype=np.int64),
            np.asarray(self.right, dtype=np.int64),
            np.asarray(self.feature, dtype=np.int64),
            np.asarray(self.threshold, dtype=np.float64),
            np.asarray(self.value, dtype=np.float64),
        )
        object.__setattr__(self, "_arrays", arrays)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Leaf values for the rows of ``x`` (already float32-rounded, as scikit-learn compares)."""
        left, right, feature, threshold, value = self._arrays
        node = np.zeros(len(x), dtype=np.int64)
        rows = np.arange(len(x))
        while True:
            inner = left[node] != -1
            if not inner.any():
                break
            f = np.where(inner, feature[node], 0)
            go_left = x[rows, f] <= threshold[node]
            node = np.where(inner, np.where(go_left, left[node], right[node]), node)
        return value[node]

    def to_dict(self) -> dict[str, list[Any]]:
        return {
            "left": list(self.left),
            "right": list(self.right),
            "feature": list(self.feature),
            "threshold": list(self.threshold),
            "value": list(self.value),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[Any]]) -> Tree:
        return cls(
            tuple(int(v) for v in data["left"]),
            tuple(int(v) for v in data["right"]),
            tuple(int(v) for v in data["feature"]),
            tuple(float(v) for v in data["threshold"]),
            tuple(float(v) for v in data["value"]),
        )

    @classmethod
    def from_sklearn(cls, tree: Any) -> Tree:
        t = tree.tree_
        return cls(
            tuple(int(v) for v in t.children_left),
            tuple(int(v) for v in t.children_right),
            tuple(int(v) for v in t.feature),
            tuple(float(v) for v in t.threshold),
            tuple(float(v) for v in t.value[:, 0, 0]),
        )


@dataclass(frozen=True)
class TreeEnsemble:
    """``prediction = base + scale · Σ_trees tree(x)``: a single tree (``base = 0, scale = 1``) or
    gradient boosting with squared error (``base`` = the training mean, ``scale`` = the learning rate)."""

    feature_names: tuple[str, ...]
    trees: tuple[Tree, ...]
    base: float = 0.0
    scale: float = 1.0

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predictions for the rows of ``x`` (columns in ``feature_names`` order)."""
        matrix = np.atleast_2d(np.asarray(x, dtype=np.float32)).astype(np.float64)
        if matrix.shape[1] != len(self.feature_names):
            raise DuettoInputError(
                f"expected {len(self.feature_names)} features, got {matrix.shape[1]}", field="features"
            )
        total = np.zeros(len(matrix))
        for tree in self.trees:
            total += tree.predict(matrix)
        return self.base + self.scale * total

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature_names": list(self.feature_names),
            "base": self.base,
            "scale": self.scale,
            "trees": [tree.to_dict() for tree in self.trees],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TreeEnsemble:
        return cls(
            tuple(str(n) for n in data["feature_names"]),
            tuple(Tree.from_dict(t) for t in data["trees"]),
            float(data.get("base", 0.0)),
            float(data.get("scale", 1.0)),
        )

    @classmethod
    def from_sklearn(cls, model: Any, feature_names: Sequence[str]) -> TreeEnsemble:
        """Export a fitted ``DecisionTreeRegressor`` or squared-error ``GradientBoostingRegressor``."""
        from sklearn.ensemble import GradientBoostingRegressor
        from sklearn.tree import DecisionTreeRegressor

        if isinstance(model, DecisionTreeRegressor):
            return cls(tuple(feature_names), (Tree.from_sklearn(model),))
        if isinstance(model, GradientBoostingRegressor):
            if model.loss != "squared_error":
                raise ValueError("only squared-error gradient boosting can be exported")
            base = float(np.ravel(model.init_.constant_)[0])
            trees = tuple(Tree.from_sklearn(t) for t in model.estimators_[:, 0])
            return cls(tuple(feature_names), trees, base, float(model.learning_rate))
        raise TypeError(f"cannot export {type(model).__name__}")


# --- fitting and evaluation -----------------------------------------------------------------------

#: Hyper-parameters of each estimator (fixed, not tuned on the held-out pairs).
DEFAULT_HYPERPARAMETERS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "gradient-boosting": MappingProxyType(
            {"n_estimators": 300, "max_depth": 3, "learning_rate": 0.05, "subsample": 0.8}
        ),
        "tree": MappingProxyType({"max_depth": 6, "min_samples_leaf": 5}),
    }
)


def _make_estimator(estimator: Estimator, seed: int, **overrides: Any) -> Any:
    require_extra("predictor", "fitting the interference predictor")
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.tree import DecisionTreeRegressor

    if estimator not in DEFAULT_HYPERPARAMETERS:
        raise DuettoInputError(
            f"unknown estimator '{estimator}'; choose {', '.join(DEFAULT_HYPERPARAMETERS)}", field="estimator"
        )
    params = {**DEFAULT_HYPERPARAMETERS[estimator], **overrides, "random_state": seed}
    if estimator == "tree":
        return DecisionTreeRegressor(**params)
    return GradientBoostingRegressor(**params)


def fit_ensemble(
    x: np.ndarray, y: np.ndarray, *, estimator: Estimator = "gradient-boosting", seed: int = 0, **overrides: Any
) -> TreeEnsemble:
    """Fit ``estimator`` on ``(x, y)`` and export it (columns in :func:`pair_feature_names` order)."""
    model = _make_estimator(estimator, seed, **overrides)
    model.fit(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    return TreeEnsemble.from_sklearn(model, pair_feature_names())


def split_groups(samples: pd.DataFrame, kind: SplitKind) -> np.ndarray:
    """Group label of each sample for a held-out split: the unordered pair (``"pair"``: a held-out pair
    is unseen in both directions and on every worker type) or the victim job type (``"job"``)."""
    if kind == "pair":
        return samples["pair"].to_numpy()
    if kind == "job":
        return samples["victim"].to_numpy()
    raise DuettoInputError(f"unknown split '{kind}'; choose pair or job", field="split")


def held_out_rmse(
    samples: pd.DataFrame,
    features: Mapping[str, Mapping[str, float]],
    *,
    estimator: Estimator = "gradient-boosting",
    split: SplitKind = "pair",
    test_fraction: float = 0.2,
    seeds: Iterable[int] = range(5),
) -> pd.DataFrame:
    """RMSE of predicted ξ on held-out groups, one row per seed (Castor §6.4 uses an 80:20 pair split).

    For ``split="job"`` a held-out victim job type's pairs are all in the test set, but the job type can
    still appear as the *other* job of a training pair (its features are known: it was profiled alone).

    Returns
    -------
    pandas.DataFrame
        ``seed, estimator, split, train, test, rmse, mae, rmse_baseline`` (baseline: the training
        median), ``rmse_v100`` (test rows on v100 only).
    """
    require_extra("predictor", "fitting the interference predictor")
    from sklearn.model_selection import GroupShuffleSplit

    x = design_matrix(samples, features)
    y = samples["xi"].to_numpy(dtype=float)
    groups = split_groups(samples, split)
    workers = samples["worker_type"].to_numpy()
    rows = []
    for seed in seeds:
        splitter = GroupShuffleSplit(n_splits=1, test_size=test_fraction, random_state=seed)
        train, test = next(splitter.split(x, y, groups))
        model = fit_ensemble(x[train], y[train], estimator=estimator, seed=seed)
        predicted = np.maximum(1.0, model.predict(x[test]))
        error = predicted - y[test]
        baseline = float(np.median(y[train])) - y[test]
        v100 = workers[test] == "v100"
        rows.append(
            {
                "seed": seed,
                "estimator": estimator,
                "split": split,
                "train": len(train),
                "test": len(test),
                "rmse": float(np.sqrt(np.mean(error**2))),
                "mae": float(np.mean(np.abs(error))),
                "rmse_baseline": float(np.sqrt(np.mean(baseline**2))),
                "rmse_v100": float(np.sqrt(np.mean(error[v100] ** 2))) if v100.any() else math.nan,
            }
        )
    return pd.DataFrame(rows)


def out_of_fold_predictions(
    samples: pd.DataFrame,
    features: Mapping[str, Mapping[str, float]],
    *,
    estimator: Estimator = "gradient-boosting",
    folds: int = 5,
    seed: int = 0,
    split: SplitKind = "pair",
) -> np.ndarray:
    """ξ of every sample predicted by a model that never saw its group (``folds``-fold cross-fitting by
    group, seeded), clipped to >= 1: the honest "predicted instead of measured" table."""
    require_extra("predictor", "fitting the interference predictor")
    from sklearn.model_selection import GroupKFold

    x = design_matrix(samples, features)
    y = samples["xi"].to_numpy(dtype=float)
    groups = split_groups(samples, split)
    # GroupKFold is deterministic; shuffle the group labels with the seed so folds differ per seed.
    rng = np.random.default_rng(seed)
    unique = np.unique(groups)
    relabel = dict(zip(unique, rng.permutation(len(unique)), strict=True))
    shuffled = np.asarray([relabel[g] for g in groups])
    predicted = np.empty(len(y))
    for train, test in GroupKFold(n_splits=folds).split(x, y, shuffled):
        model = fit_ensemble(x[train], y[train], estimator=estimator, seed=seed)
        predicted[test] = model.predict(x[test])
    return np.maximum(1.0, predicted)


@dataclass(frozen=True)
class InterferencePredictor:
    """A fitted predictor of ξ with its provenance."""

    ensemble: TreeEnsemble
    estimator: str
    seed: int
    training_samples: int
    job_features: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def predict(self, victim: Mapping[str, float], other: Mapping[str, float], worker_type: str = "v100") -> float:
        """ξ of ``victim`` next to ``other`` (per-job feature dicts), clipped to >= 1."""
        value = float(self.ensemble.predict(np.asarray([pair_vector(victim, other, worker_type)]))[0])
        return max(1.0, value)

    def predict_types(self, victim: str, other: str, worker_type: str = "v100") -> float:
        """ξ of Gavel job type ``victim`` next to ``other``."""
        for name in (victim, other):
            if name not in self.job_features:
                raise DuettoInputError(f"no features for job type '{name}'", field="job_type")
        return self.predict(self.job_features[victim], self.job_features[other], worker_type)


def fit_gavel_predictor(
    data_dir: str | Path | None = None,
    *,
    estimator: Estimator = "gradient-boosting",
    seed: int = 0,
    exclude_pairs: Iterable[tuple[str, str]] = (),
) -> InterferencePredictor:
    """Fit the predictor on every measured Gavel pair (all three worker types).

    Parameters
    ----------
    data_dir
        Folder of the Gavel files (default ``shared_data_dir() / "gavel"``).
    estimator
        ``"gradient-boosting"`` (default, the better held-out RMSE) or ``"tree"`` (one regression tree,
        as Castor).
    seed
        Seed of the estimator.
    exclude_pairs
        Unordered job-type pairs to leave out of training (both directions, every worker type).
    """
    features = gavel_job_features(data_dir)
    samples = gavel_pair_samples(data_dir)
    excluded = {" | ".join(sorted(pair)) for pair in exclude_pairs}
    if excluded:
        samples = samples[~samples["pair"].isin(excluded)]
    ensemble = fit_ensemble(
        design_matrix(samples, features), samples["xi"].to_numpy(dtype=float), estimator=estimator, seed=seed
    )
    return InterferencePredictor(ensemble, estimator, seed, len(samples), MappingProxyType(features))


# --- the interference model -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PredictedInterference:
    """Interference model that predicts ξ from per-job features (Castor §6).

    Parameters
    ----------
    ensemble
        The fitted trees (:class:`TreeEnsemble`).
    features
        Profile name → per-job features (:func:`job_features_names`; a missing feature counts as
        :data:`MISSING`).
    worker_type
        GPU type the instance runs on (one of :data:`WORKER_TYPES`).
    fallback
        ξ for a pair where a profile has no features; ``None`` forbids sharing for it.
    forbidden
        Ordered profile pairs that may not share a GPU whatever the prediction (e.g. Gavel's pairs that
        do not fit in memory together: feasibility is measured per pair, not predicted); ``ratio`` gives
        ``None`` for them.
    provenance
        Free-form facts about the fit (estimator, seed, data), written out with the model.
    """

    ensemble: TreeEnsemble
    features: Mapping[str, Mapping[str, float]]
    worker_type: str = "v100"
    fallback: float | None = None
    forbidden: frozenset[tuple[str, str]] = frozenset()
    provenance: Mapping[str, Any] = field(default_factory=dict)
    _cache: dict[tuple[str, str], float | None] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.worker_type not in WORKER_TYPES:
            raise DuettoInputError(
                f"unknown worker type '{self.worker_type}'; known: {', '.join(WORKER_TYPES)}",
                field="interference.worker_type",
            )
        if self.fallback is not None and (not math.isfinite(self.fallback) or self.fallback < 1.0):
            raise DuettoInputError(f"must be >= 1, got {self.fallback!r}", field="interference.fallback")
        if tuple(self.ensemble.feature_names) != pair_feature_names():
            raise DuettoInputError(
                "the model's features are not this version's pair features", field="interference.model"
            )
        object.__setattr__(
            self, "features", MappingProxyType({str(k): MappingProxyType(dict(v)) for k, v in self.features.items()})
        )
        object.__setattr__(self, "provenance", MappingProxyType(dict(self.provenance)))
        object.__setattr__(self, "forbidden", frozenset((str(a), str(b)) for a, b in self.forbidden))

    @property
    def kind(self) -> str:
        return "predicted"

    def ratio(self, victim: Profile, other: Profile) -> float | None:
        """Predicted ξ_{victim|other} >= 1, or ``fallback`` if either profile has no features."""
        key = (victim.name, other.name)
        if key in self._cache:
            return self._cache[key]
        if not self._cache and victim.name in self.features and other.name in self.features:
            self._predict_all()
            if key in self._cache:
                return self._cache[key]
        own = self.features.get(victim.name)
        partner = self.features.get(other.name)
        value: float | None
        if key in self.forbidden:
            value = None
        elif own is None or partner is None:
            value = self.fallback
        else:
            predicted = float(self.ensemble.predict(np.asarray([pair_vector(own, partner, self.worker_type)]))[0])
            value = max(1.0, predicted)
        self._cache[key] = value
        return value

    def _predict_all(self) -> None:
        """Predict every ordered pair of profiles with features in one batch (one pass over the trees
        instead of one per pair)."""
        names = list(self.features)
        pairs = [(a, b) for a in names for b in names if (a, b) not in self.forbidden]
        if not pairs:
            return
        x = np.asarray([pair_vector(self.features[a], self.features[b], self.worker_type) for a, b in pairs])
        values = np.maximum(1.0, self.ensemble.predict(x))
        for pair, value in zip(pairs, values.tolist(), strict=True):
            self._cache[pair] = float(value)
        for pair in self.forbidden:
            self._cache[pair] = None

    def table(self, profiles: Iterable[str]) -> dict[tuple[str, str], float | None]:
        """ξ of every ordered pair of ``profiles`` (by name), e.g. to compare with a measured table."""
        names = list(profiles)
        dummy = {name: Profile(name=name, compute_alpha=1.0) for name in names}
        return {(a, b): self.ratio(dummy[a], dummy[b]) for a in names for b in names if a != b}

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``kind: "predicted"``): the exported trees, the per-profile features, worker type,
        fallback and provenance. :meth:`from_dict` reads it back exactly."""
        return {
            "kind": "predicted",
            "worker_type": self.worker_type,
            "fallback": self.fallback,
            "features": {name: dict(values) for name, values in self.features.items()},
            "forbidden": [list(pair) for pair in sorted(self.forbidden)],
            "model": self.ensemble.to_dict(),
            "provenance": dict(self.provenance),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PredictedInterference:
        """Inverse of :meth:`to_dict`; raises :class:`DuettoInputError` naming a missing field."""
        if data.get("kind") != "predicted":
            raise DuettoInputError(f"expected kind 'predicted', got {data.get('kind')!r}", field="interference.kind")
        for name in ("features", "model"):
            if name not in data:
                raise DuettoInputError("missing", field=f"interference.{name}")
        try:
            ensemble = TreeEnsemble.from_dict(data["model"])
            features = {str(k): {str(n): float(v) for n, v in values.items()} for k, values in data["features"].items()}
            forbidden = frozenset((str(a), str(b)) for a, b in data.get("forbidden", []))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise DuettoInputError(f"malformed predicted interference model: {error}", field="interference") from None
        fallback = data.get("fallback")
        return cls(
            ensemble,
            features,
            str(data.get("worker_type", "v100")),
            None if fallback is None else float(fallback),
            forbidden,
            dict(data.get("provenance", {})),
        )

    @classmethod
    def for_profiles(
        cls,
        predictor: InterferencePredictor,
        job_type_of: Mapping[str, str],
        *,
        worker_type: str = "v100",
        fallback: float | None = None,
        forbidden: Iterable[tuple[str, str]] = (),
    ) -> PredictedInterference:
        """A model for an instance whose profiles are Gavel job types.

        Parameters
        ----------
        predictor
            From :func:`fit_gavel_predictor` (holds the Gavel job types' features).
        job_type_of
            Profile name → Gavel job type (profiles not listed, or of unknown job types, use ``fallback``).
        worker_type, fallback, forbidden
            As the class parameters.
        """
        features = {
            profile: predictor.job_features[job_type]
            for profile, job_type in job_type_of.items()
            if job_type in predictor.job_features
        }
        provenance = {
            "estimator": predictor.estimator,
            "seed": predictor.seed,
            "training_samples": predictor.training_samples,
            "data": "gavel_pairwise_colocation.csv + gavel_isolated_throughputs.csv",
            "job_types": dict(job_type_of),
        }
        return cls(predictor.ensemble, features, worker_type, fallback, frozenset(forbidden), provenance)


def gavel_job_type(profile_name: str) -> str:
    """Gavel job type of a profile made by the Gavel loader (``"ResNet-50 (batch size 64) x4"`` →
    ``"ResNet-50 (batch size 64)"``: a multi-GPU job shares each GPU as its job type does)."""
    return re.sub(r" x\d+$", "", profile_name)
