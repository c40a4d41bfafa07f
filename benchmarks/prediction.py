"""Interference prediction study (Castor §6 and Fig. 13).

1. :func:`rmse_study`: held-out RMSE of predicted ξ on Gavel's measured pairs, holding out whole pairs
   (both directions, every GPU type), seeded; also holding out whole victim job types, and a baseline
   that predicts the training median.
2. :func:`decision_study`: what deciding with predicted instead of measured ξ does to a policy
   (SJF-BSBF by default) on a Gavel trace. The **truth** is always the measured table: the simulator
   computes progress with it and the validator re-checks every schedule with it. Only the policy's
   *belief* changes (:class:`BeliefPolicy` hands it a copy of the instance with another interference
   model):

   * ``measured``: the policy knows the measured ξ (Castor's "mathematical fitting" reference);
   * ``predicted (cross-fitted)``: every pair's ξ predicted by a model that never saw that pair
     (5-fold by pair) — the honest setting of an unprofiled pair;
   * ``predicted (in-sample)``: one model fitted on every pair, used as ``PredictedInterference``;
   * ``constant median``: no pair profiling at all, every pair that fits believed at the median measured ξ.

   Reported per belief (Fig. 13 shape): average JCT and Castor's sharing benefit (Eq. 24), jobs that
   shared, and how many decisions (start time and GPU set per job) agree with the ``measured`` run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from benchmarks.common import evaluate, simulate_policy
from formulation.instance import Instance
from formulation.interference import InterferenceModel, TableInterference


class BeliefPolicy:
    """Wrap a policy so that it decides with ``belief`` (an instance with the same jobs and another
    interference model) while the simulator runs the true instance."""

    def __init__(self, inner: Any, belief: Instance, label: str | None = None) -> None:
        self.inner = inner
        self.belief = belief
        self.name = label or str(getattr(inner, "name", "policy"))
        self.preemptive = bool(getattr(inner, "preemptive", False))
        self.round_length = getattr(inner, "round_length", None)

    def _view(self, view: Any) -> Any:
        return dataclasses.replace(view, instance=self.belief)

    def decide(self, view: Any) -> Any:
        return self.inner.decide(self._view(view))

    def check_instance(self, instance: Instance) -> None:
        check = getattr(self.inner, "check_instance", None)
        if check is not None:
            check(self.belief)

    def reset(self) -> None:
        reset = getattr(self.inner, "reset", None)
        if reset is not None:
            reset()

    def next_decision_time(self, view: Any) -> float | None:
        ask = getattr(self.inner, "next_decision_time", None)
        return ask(self._view(view)) if ask is not None else None


def rmse_study(
    *,
    seeds: Sequence[int] = tuple(range(10)),
    estimators: Sequence[str] = ("gradient-boosting", "tree"),
    splits: Sequence[str] = ("pair", "job"),
    test_fraction: float = 0.2,
    data_dir: str | Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Held-out RMSE per seed and its summary (mean, std over seeds) per estimator and split."""
    from formulation.predictor import gavel_job_features, gavel_pair_samples, held_out_rmse

    features = gavel_job_features(data_dir)
    samples = gavel_pair_samples(data_dir)
    frames = [
        held_out_rmse(
            samples,
            features,
            estimator=cast(Any, est),
            split=cast(Any, split),
            test_fraction=test_fraction,
            seeds=seeds,
        )
        for est in estimators
        for split in splits
    ]
    rows = pd.concat(frames, ignore_index=True)
    summary = (
        rows.groupby(["estimator", "split"], sort=False)
        .agg(
            seeds=("seed", "count"),
            test_samples=("test", "mean"),
            rmse_mean=("rmse", "mean"),
            rmse_std=("rmse", "std"),
            mae_mean=("mae", "mean"),
            rmse_v100_mean=("rmse_v100", "mean"),
            rmse_baseline_mean=("rmse_baseline", "mean"),
        )
        .reset_index()
    )
    summary.insert(2, "samples", len(samples))
    summary.insert(3, "unordered_pairs", samples["pair"].nunique())
    return rows, summary


def cross_fitted_table(
    measured: TableInterference,
    job_types: Mapping[str, str],
    worker: str = "v100",
    *,
    folds: int = 5,
    seed: int = 0,
    estimator: str = "gradient-boosting",
    data_dir: str | Path | None = None,
) -> TableInterference:
    """Out-of-fold predicted ξ for every (victim, other) profile pair (by their Gavel job types) on
    ``worker``; pairs ``measured`` forbids stay forbidden."""
    from formulation.predictor import gavel_job_features, gavel_pair_samples, out_of_fold_predictions

    features = gavel_job_features(data_dir)
    samples = gavel_pair_samples(data_dir)
    predicted = out_of_fold_predictions(samples, features, estimator=cast(Any, estimator), folds=folds, seed=seed)
    on_worker = samples.assign(predicted=predicted)
    on_worker = on_worker[on_worker["worker_type"] == worker]
    by_types = {
        (v, o): float(p)
        for v, o, p in zip(on_worker["victim"], on_worker["other"], on_worker["predicted"], strict=True)
    }
    pairs: dict[tuple[str, str], float | None] = {}
    for a, type_a in job_types.items():
        for b, type_b in job_types.items():
            if measured.pairs.get((a, b), measured.default) is None:
                pairs[(a, b)] = None
            else:
                pairs[(a, b)] = by_types.get((type_a, type_b))
    return TableInterference(pairs, default=None)


def _constant_keeping_feasibility(measured: TableInterference, xi: float) -> TableInterference:
    """ξ = ``xi`` for every pair the measured table lets share; forbidden pairs stay forbidden (whether a
    pair fits is known without profiling the pair: it is a memory question)."""
    return TableInterference(
        {pair: (None if value is None else xi) for pair, value in measured.pairs.items()},
        default=None if measured.default is None else xi,
    )


def _decisions(schedule: Any) -> dict[str, tuple[float, tuple[int, ...]]]:
    return {
        plan.job_id: (round(plan.segments[0].start, 6), tuple(sorted(plan.segments[0].gpus))) for plan in schedule.plans
    }


def decision_study(
    trace_path: str | Path,
    *,
    policy: str = "sjf-bsbf",
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    limit: int | None = None,
    worker: str = "v100",
    slot: float | None = None,
    seed: int = 0,
    estimator: str = "gradient-boosting",
) -> pd.DataFrame:
    """Run ``policy`` on a Gavel trace with each belief about ξ (module docstring); truth = measured.

    Returns
    -------
    pandas.DataFrame
        One row per belief: ``belief, policy, jobs, validated, jct_avg, sharing_benefit, shared_jobs,
        shared_gpu_seconds, makespan, queueing_avg, decisions_same (fraction of jobs with the same start and
        GPUs as under the measured belief), belief_rmse_on_shared (RMSE of the believed ξ against the
        measured one over the pairs that actually shared a GPU in that run)``.
    """
    from formulation.metrics import sharing_benefits
    from formulation.predictor import gavel_job_type
    from formulation.traces import load_trace
    from heuristics.registry import make_policy

    options: dict[str, Any] = {"worker_type": worker}
    for name, value in (("nodes", nodes), ("gpus_per_node", gpus_per_node), ("limit", limit)):
        if value is not None:
            options[name] = value
    truth = load_trace("gavel", trace_path, **options)
    measured = cast(TableInterference, truth.interference)
    job_types = {name: gavel_job_type(name) for name in truth.profiles}
    from benchmarks.replay import predicted_for_gavel_instance

    finite = [xi for xi in measured.pairs.values() if xi is not None]
    beliefs: dict[str, InterferenceModel] = {
        "measured": cast(InterferenceModel, measured),
        "predicted (cross-fitted)": cast(
            InterferenceModel, cross_fitted_table(measured, job_types, worker, seed=seed, estimator=estimator)
        ),
        "predicted (in-sample)": cast(
            InterferenceModel, predicted_for_gavel_instance(truth, measured, worker, seed=seed, estimator=estimator)
        ),
        "constant median": cast(
            InterferenceModel, _constant_keeping_feasibility(measured, float(np.median(finite)) if finite else 1.0)
        ),
    }
    rows = []
    reference: dict[str, tuple[float, tuple[int, ...]]] | None = None
    for label, model in beliefs.items():
        belief = truth if label == "measured" else truth.replace(interference=model)
        wrapped = BeliefPolicy(make_policy(policy), belief, label=policy)
        simulation, wall = simulate_policy(truth, wrapped, slot=slot)
        evaluation = evaluate(simulation.instance, simulation.schedule, slotted=slot is not None, slot=slot)
        decisions = _decisions(simulation.schedule)
        if reference is None:
            reference = decisions
        same = sum(decisions.get(j) == d for j, d in reference.items()) / max(1, len(reference))
        errors = []
        for item in evaluation.report.occupancy:
            if len(item.jobs) >= 2:
                for victim in item.jobs:
                    for other in item.jobs:
                        if victim != other:
                            true_xi = truth.ratio(victim, other)
                            believed = belief.ratio(victim, other)
                            if true_xi is not None and believed is not None:
                                errors.append(believed - true_xi)
        metrics = evaluation.metrics
        benefits = sharing_benefits(simulation.instance, evaluation.report)
        rows.append(
            {
                "belief": label,
                "policy": policy,
                "trace": Path(trace_path).name,
                "jobs": len(truth.jobs),
                "gpus": truth.cluster.num_gpus,
                "validated": evaluation.valid,
                "jct_avg": metrics["jct_avg"],
                "jct_p99": metrics["jct_p99"],
                "makespan": metrics["makespan"],
                "queueing_avg": metrics["queueing_avg"],
                "sharing_benefit": metrics["sharing_benefit"],
                "sharing_benefit_median": float(np.median(list(benefits.values()))) if benefits else math.nan,
                "shared_jobs": metrics["shared_jobs"],
                "shared_gpu_seconds": metrics["shared_gpu_seconds"],
                "decisions_same": same,
                "belief_rmse_on_shared": float(np.sqrt(np.mean(np.square(errors)))) if errors else math.nan,
                "wall_seconds": wall,
            }
        )
    return pd.DataFrame(rows)


def plot_decisions(frame: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Castor Fig. 13 shape: average JCT and sharing benefit per belief."""
    from benchmarks.plots import grouped_bars

    out = Path(out_dir)
    data = frame.assign(jct_hours=frame["jct_avg"] / 3600.0)
    return [
        grouped_bars(
            data,
            "trace",
            "belief",
            "jct_hours",
            out / "prediction_jct.png",
            ylabel="average JCT (hours)",
            title="Average JCT by interference derivation",
        ),
        grouped_bars(
            data,
            "trace",
            "belief",
            "sharing_benefit",
            out / "prediction_sharing_benefit.png",
            ylabel="sharing benefit (Eq. 24)",
            title="Sharing benefit by interference derivation",
        ),
    ]


def run_predictor_study(
    out_dir: str | Path,
    *,
    seeds: Sequence[int] = tuple(range(10)),
    estimators: Sequence[str] = ("gradient-boosting", "tree"),
    trace: str | Path | None = None,
    policy: str = "sjf-bsbf",
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    limit: int | None = None,
    figures: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame | None, list[Path]]:
    """``duetto predictor-study``: the RMSE study (every estimator of ``estimators``) into ``out_dir``
    (``rmse_rows.csv``, ``rmse_summary.csv``) and, with a ``trace``, the decision study (``decisions.csv``,
    with figures unless ``figures`` is false), whose predictions come from the first estimator.

    Returns
    -------
    tuple
        The RMSE summary, the decision table (``None`` without a trace) and the files written.
    """
    from formulation.errors import DuettoInputError

    if not seeds:
        raise DuettoInputError("give at least one seed", field="seeds")
    if not estimators:
        raise DuettoInputError("give at least one estimator", field="estimator")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, summary = rmse_study(seeds=tuple(seeds), estimators=tuple(estimators))
    rows.to_csv(out / "rmse_rows.csv", index=False)
    summary.to_csv(out / "rmse_summary.csv", index=False)
    files = [out / "rmse_rows.csv", out / "rmse_summary.csv"]
    decisions = None
    if trace is not None:
        decisions = decision_study(
            trace, policy=policy, nodes=nodes, gpus_per_node=gpus_per_node, limit=limit, estimator=estimators[0]
        )
        decisions.to_csv(out / "decisions.csv", index=False)
        files.append(out / "decisions.csv")
        if figures:
            files += plot_decisions(decisions, out)
    return summary, decisions, files
