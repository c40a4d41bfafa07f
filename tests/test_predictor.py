"""The interference predictor (formulation/predictor.py) on Gavel's measured pairs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from formulation import io
from formulation.errors import DuettoInputError
from formulation.paths import shared_data_dir
from formulation.predictor import (
    MISSING,
    PredictedInterference,
    Tree,
    TreeEnsemble,
    batch_size_of,
    design_matrix,
    family_of,
    fit_gavel_predictor,
    gavel_job_features,
    gavel_job_type,
    gavel_pair_samples,
    held_out_rmse,
    job_features_names,
    out_of_fold_predictions,
    pair_feature_names,
    pair_vector,
)
from formulation.speed import Profile

GAVEL = shared_data_dir() / "gavel"
pytestmark = pytest.mark.skipif(not GAVEL.is_dir(), reason="shared Gavel data not available")


@pytest.fixture(scope="module")
def features() -> dict[str, dict[str, float]]:
    return gavel_job_features()


@pytest.fixture(scope="module")
def samples():
    return gavel_pair_samples()


@pytest.fixture(scope="module")
def predictor():
    return fit_gavel_predictor(seed=0)


def test_name_parsing() -> None:
    assert family_of("ResNet-18 (batch size 32)") == "ResNet-18"
    assert batch_size_of("ResNet-18 (batch size 32)") == 32
    assert family_of("A3C") == "A3C" and batch_size_of("A3C") is None
    assert gavel_job_type("ResNet-50 (batch size 64) x4") == "ResNet-50 (batch size 64)"
    assert gavel_job_type("A3C") == "A3C"


def test_job_features(features: dict[str, dict[str, float]]) -> None:
    assert len(features) == 26
    names = job_features_names()
    for values in features.values():
        assert list(values) == list(names)
        assert (
            sum(
                values[f"family_{f}"]
                for f in ("A3C", "CycleGAN", "LM", "Recommendation", "ResNet-18", "ResNet-50", "Transformer")
            )
            == 1.0
        )
    resnet = features["ResNet-18 (batch size 32)"]
    assert resnet["log2_batch"] == 5.0
    # v100 is faster than k80 for ResNet-18: the speed-up feature is above 1
    assert resnet["speedup_v100"] > 1.0
    assert features["A3C"]["log2_batch"] == MISSING
    assert len(pair_feature_names()) == 3 + 2 + 2 * len(names)


def test_pair_samples(samples) -> None:
    # 976 feasible one-GPU pair rows over k80/p100/v100; each gives two ordered samples except a job
    # type next to itself (one sample)
    assert set(samples["worker_type"]) == {"k80", "p100", "v100"}
    assert (samples["xi"] >= 1.0 - 1e-9).all()
    self_pairs = samples[samples["victim"] == samples["other"]]
    assert len(samples) == 2 * 976 - len(self_pairs)
    # both directions of a pair share the group key
    row = samples[
        (samples["victim"] == "A3C")
        & (samples["other"] == "ResNet-18 (batch size 16)")
        & (samples["worker_type"] == "v100")
    ].iloc[0]
    assert row["xi"] == pytest.approx(1.287541)
    back = samples[
        (samples["victim"] == "ResNet-18 (batch size 16)")
        & (samples["other"] == "A3C")
        & (samples["worker_type"] == "v100")
    ].iloc[0]
    assert back["pair"] == row["pair"]
    assert back["xi"] == pytest.approx(1.0)


@pytest.mark.parametrize("estimator", ["tree", "gradient-boosting"])
def test_export_matches_sklearn_exactly(features, samples, estimator: str) -> None:
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.tree import DecisionTreeRegressor

    x = design_matrix(samples, features)
    y = samples["xi"].to_numpy()
    model = (
        DecisionTreeRegressor(max_depth=5, random_state=0)
        if estimator == "tree"
        else GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0)
    )
    model.fit(x, y)
    exported = TreeEnsemble.from_sklearn(model, pair_feature_names())
    np.testing.assert_allclose(exported.predict(x), model.predict(x), rtol=0, atol=1e-12)
    again = TreeEnsemble.from_dict(json.loads(json.dumps(exported.to_dict())))
    np.testing.assert_array_equal(again.predict(x), exported.predict(x))


def test_held_out_rmse_beats_baseline_and_is_seeded(features, samples) -> None:
    first = held_out_rmse(samples, features, estimator="gradient-boosting", split="pair", seeds=[0, 1])
    again = held_out_rmse(samples, features, estimator="gradient-boosting", split="pair", seeds=[0, 1])
    assert first["rmse"].tolist() == again["rmse"].tolist()
    # about 20 % of the samples are held out, by whole pairs
    assert (first["test"] / (first["train"] + first["test"])).between(0.1, 0.3).all()
    # the features carry signal: well below predicting the training median, and in the measured range
    assert (first["rmse"] < 0.75 * first["rmse_baseline"]).all()
    assert (first["rmse"] < 0.6).all()


def test_pair_split_holds_out_whole_pairs(samples) -> None:
    from sklearn.model_selection import GroupShuffleSplit

    from formulation.predictor import split_groups

    groups = split_groups(samples, "pair")
    train, test = next(GroupShuffleSplit(n_splits=1, test_size=0.2, random_state=3).split(samples, groups=groups))
    assert not set(groups[train]) & set(groups[test])
    # a held-out pair is unseen in both directions and on every worker type
    held = samples.iloc[test]
    seen = samples.iloc[train]
    for key in list(held["pair"].unique())[:20]:
        assert key not in set(seen["pair"])


def test_out_of_fold_predictions(features, samples) -> None:
    small = samples[samples["worker_type"] == "v100"].reset_index(drop=True)
    predicted = out_of_fold_predictions(small, features, estimator="tree", folds=4, seed=1)
    assert predicted.shape == (len(small),)
    assert (predicted >= 1.0).all()
    np.testing.assert_array_equal(
        predicted, out_of_fold_predictions(small, features, estimator="tree", folds=4, seed=1)
    )


def _profile(name: str) -> Profile:
    return Profile(name=name, compute_alpha=0.1)


def test_predicted_interference_protocol(predictor) -> None:
    model = PredictedInterference.for_profiles(
        predictor,
        {"r18": "ResNet-18 (batch size 32)", "a3c": "A3C", "big": "ResNet-50 (batch size 128)"},
        fallback=1.7,
        forbidden=[("r18", "big")],
    )
    assert model.kind == "predicted"
    xi = model.ratio(_profile("r18"), _profile("a3c"))
    assert xi is not None and xi >= 1.0
    assert xi == pytest.approx(predictor.predict_types("ResNet-18 (batch size 32)", "A3C"))
    assert model.ratio(_profile("r18"), _profile("unknown")) == 1.7  # no features: the fallback
    assert model.ratio(_profile("r18"), _profile("big")) is None  # forbidden pair
    assert model.ratio(_profile("big"), _profile("r18")) is not None  # only that direction was listed
    # the JSON form reads back to the same ratios
    data = json.loads(json.dumps(model.to_dict()))
    again = PredictedInterference.from_dict(data)
    for a in ("r18", "a3c", "big"):
        for b in ("r18", "a3c", "big"):
            assert again.ratio(_profile(a), _profile(b)) == model.ratio(_profile(a), _profile(b))


def test_predicted_ratio_is_clipped_to_one() -> None:
    # a constant ensemble predicting 0.5: ξ must still be >= 1
    leaf = Tree(left=(-1,), right=(-1,), feature=(-2,), threshold=(-2.0,), value=(0.5,))
    ensemble = TreeEnsemble(pair_feature_names(), (leaf,))
    model = PredictedInterference(ensemble, {"a": {}, "b": {}})
    assert model.ratio(_profile("a"), _profile("b")) == 1.0


def test_predicted_interference_rejects_bad_input() -> None:
    leaf = Tree(left=(-1,), right=(-1,), feature=(-2,), threshold=(-2.0,), value=(1.5,))
    ensemble = TreeEnsemble(pair_feature_names(), (leaf,))
    with pytest.raises(DuettoInputError, match="worker type"):
        PredictedInterference(ensemble, {}, worker_type="a100")
    with pytest.raises(DuettoInputError, match=">= 1"):
        PredictedInterference(ensemble, {}, fallback=0.5)
    with pytest.raises(DuettoInputError, match="features"):
        PredictedInterference(TreeEnsemble(("x",), (leaf,)), {})
    with pytest.raises(DuettoInputError, match="kind"):
        PredictedInterference.from_dict({"kind": "table"})
    with pytest.raises(DuettoInputError, match="model"):
        PredictedInterference.from_dict({"kind": "predicted", "features": {}})
    with pytest.raises(DuettoInputError, match="worker type"):
        pair_vector({}, {}, "tpu")


def test_predicted_interference_in_an_instance(predictor) -> None:
    """A Gavel trace scheduled by SJF-BSBF under predicted ξ: the validator accepts the schedule, and
    the instance round-trips through the JSON format with the same ratios."""
    from formulation.metrics import compute_metrics
    from formulation.traces import load_trace
    from formulation.validator import validate
    from heuristics.simulator import simulate

    instance = load_trace("gavel", GAVEL / "msr_seed0" / "e13805.trace", limit=40, nodes=2, gpus_per_node=8)
    job_types = {name: gavel_job_type(name) for name in instance.profiles}
    model = PredictedInterference.for_profiles(predictor, job_types)
    predicted = instance.replace(interference=model)
    result = simulate(predicted, "sjf-bsbf", validate=False)
    report = validate(predicted, result.schedule)
    assert report.ok, report.violations[:3]
    metrics = compute_metrics(predicted, report)
    assert metrics["completed"] == 40
    data = io.instance_to_dict(predicted)
    assert data["interference"]["kind"] == "predicted"
    again = io.instance_from_dict(json.loads(json.dumps(data)))
    assert again.interference.kind == "predicted"
    profiles = list(instance.profiles.values())
    for victim in profiles[:6]:
        for other in profiles[:6]:
            assert again.interference.ratio(victim, other) == predicted.interference.ratio(victim, other)
    assert math.isfinite(metrics["jct_avg"])
