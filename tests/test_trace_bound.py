"""The trace-scale lower bound (formulation/trace_bound.py), `duetto bound` and the replay's certified gaps."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from benchmarks.common import evaluate, simulate_policy
from benchmarks.replay import ReplayStudy, run_replay
from duetto.cli import app
from formulation import io
from formulation.discretize import choose_slot
from formulation.generator import generate_instance
from formulation.instance import Instance
from formulation.paths import shared_data_dir
from formulation.trace_bound import (
    _interval_data,
    _IntervalLP,
    interval_grid,
    lagrangian_value,
    safe_lp_bound,
    srpt_completions,
    trace_jobs,
    trace_lower_bound,
)
from formulation.traces import load_trace
from solvers import SolveStatus, solve

POLLUX = shared_data_dir() / "pollux" / "workloads-1.5" / "workload-1.csv"
POLICIES = ("fifo", "sjf", "srsf", "tiresias", "sjf-bsbf", "sjf-ffs", "tesserae-t")


def _total_jct(instance: Instance, policy: str, capacity: int | None = None) -> float:
    result, _ = simulate_policy(instance, policy, slot=None, capacity=capacity)
    evaluation = evaluate(result.instance, result.schedule, slotted=False)
    assert evaluation.valid, f"{policy}: {evaluation.report.violations[:3]}"
    return float(sum(evaluation.report.completion[j.id] - j.arrival for j in instance.jobs))


def test_srpt_completions_by_hand() -> None:
    # two jobs at 0 on a speed-2 machine: works 2 and 4 end at 1 and 3
    assert srpt_completions(np.array([0.0, 0.0]), np.array([2.0, 4.0]), 2.0).tolist() == [1.0, 3.0]
    # a short job arriving at 1 preempts the long one (4 units, 3 left): ends at 2, the long one at 5
    assert srpt_completions(np.array([0.0, 1.0]), np.array([4.0, 1.0]), 1.0).tolist() == [2.0, 5.0]
    # an idle gap: the second job starts at its release
    assert srpt_completions(np.array([0.0, 10.0]), np.array([1.0, 1.0]), 1.0).tolist() == [1.0, 11.0]


def test_effective_area_counts_the_best_partner_and_the_capacity() -> None:
    instance = generate_instance(8, 1, 4, seed=3, xi_range=(1.2, 1.8))
    jobs = trace_jobs(instance)
    gpus = np.array([job.num_gpus for job in instance.jobs], dtype=float)
    alone = gpus * jobs.duration
    assert np.all(jobs.area <= alone + 1e-9)
    for index, job in enumerate(instance.jobs):
        ratios = [
            instance.ratio(job, other)
            for other in instance.jobs
            if other.id != job.id and instance.ratio(job, other) is not None and instance.ratio(other, job) is not None
        ]
        # memory may forbid some partners: the area is never below what the best ratio allows
        best = min([1.0, *[r / 2 for r in ratios if r is not None]])
        assert jobs.area[index] >= alone[index] * best - 1e-9
    exclusive = trace_jobs(instance.replace(cluster=replace(instance.cluster, capacity=1)))
    assert np.allclose(exclusive.area, alone)


def test_lagrangian_at_the_lp_prices_equals_the_lp() -> None:
    instance = generate_instance(30, 2, 4, seed=5, arrivals="poisson", load=1.5)
    jobs = trace_jobs(instance)
    data = _interval_data(jobs, interval_grid(jobs, 300))
    model = _IntervalLP(jobs, data, threads=1)
    assert model.solve(30.0) == "Optimal"
    prices = model.prices()
    assert prices is not None
    value, usage = lagrangian_value(jobs, data, prices, model.rows)
    lp_total = model.objective() + float(jobs.duration.sum()) / 2
    assert value == pytest.approx(lp_total, rel=1e-6)
    # prices are a certificate: any other nonnegative prices give no more
    rng = np.random.default_rng(0)
    for _ in range(5):
        other, _ = lagrangian_value(jobs, data, prices * rng.uniform(0.0, 2.0, size=len(prices)), model.rows)
        assert other <= value * (1 + 1e-9)
    # at the LP optimum no capacity row is over (complementary slackness: the minimiser may differ)
    assert usage.shape == (len(model.rows),)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_never_exceeds_a_proven_optimum(seed: int) -> None:
    instance = generate_instance(7, 1, 4, seed=seed, arrivals="poisson", load=1.5)
    result = solve(instance, "cpsat", time_limit=30, slot=choose_slot(instance, 40))
    assert result.status == SolveStatus.OPTIMAL and result.schedule is not None
    evaluation = evaluate(instance, result.schedule)
    assert evaluation.valid
    optimum = sum(evaluation.report.completion[j.id] - j.arrival for j in instance.jobs)
    bound = trace_lower_bound(instance, time_limit=20, max_intervals=400)
    assert bound.lp_status == "Optimal"
    assert bound.total_jct <= optimum * (1 + 1e-9)
    # and it is not trivial: above the per-job bound (each job alone from its arrival) or equal to it
    assert bound.total_jct >= bound.components["per_job"] - 1e-6


@pytest.mark.parametrize("capacity", [1, 2])
def test_bound_holds_for_every_policy_on_a_real_trace(capacity: int) -> None:
    instance = load_trace("pollux", POLLUX, limit=80)
    instance = instance.replace(cluster=replace(instance.cluster, capacity=capacity))
    bound = trace_lower_bound(instance, time_limit=20)
    totals = {policy: _total_jct(instance, policy) for policy in POLICIES}
    assert all(total >= bound.total_jct for total in totals.values()), (bound.total_jct, totals)
    # the LP adds to the order-statistics bound on a loaded trace
    assert bound.components["lagrangian"] > bound.components["order_statistics"]


def test_a_stopped_bound_is_still_valid() -> None:
    instance = load_trace("pollux", POLLUX, limit=80)
    full = trace_lower_bound(instance, time_limit=20)
    stopped = trace_lower_bound(instance, time_limit=0.2)
    assert stopped.lp_status != "Optimal"
    assert stopped.total_jct <= full.total_jct * (1 + 1e-9)
    assert stopped.total_jct >= stopped.components["order_statistics"] - 1e-6
    assert stopped.seconds < 5.0


def test_cli_bound_certifies_a_schedule_and_refuses_an_invalid_one(tmp_path: Path) -> None:
    runner = CliRunner()
    instance = load_trace("pollux", POLLUX, limit=40)
    instance_path = tmp_path / "inst.json"
    io.save_instance(instance, instance_path)
    result, _ = simulate_policy(instance, "srsf", slot=None)
    io.save_schedule(result.schedule, tmp_path / "srsf.json")
    out = runner.invoke(app, ["bound", str(instance_path), "-s", str(tmp_path / "srsf.json"), "--json", "-t", "10"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["num_jobs"] == 40
    (row,) = data["schedules"]
    assert row["gap_pct"] >= 0
    assert row["jct_avg"] == pytest.approx(data["average_jct"] * (1 + row["gap_pct"] / 100), rel=1e-9)
    # a schedule of another instance is refused with its first violation, exit 1
    other = load_trace("pollux", POLLUX, limit=40).replace(jobs=instance.jobs[:20])
    other_result, _ = simulate_policy(other, "fifo", slot=None)
    io.save_schedule(other_result.schedule, tmp_path / "other.json")
    out = runner.invoke(app, ["bound", str(instance_path), "-s", str(tmp_path / "other.json")])
    assert out.exit_code == 1 and "not a valid schedule" in out.output
    out = runner.invoke(app, ["bound", str(instance_path), "-t", "0"])
    assert out.exit_code == 2 and "--time-limit" in out.output


def test_replay_prints_certified_gaps(tmp_path: Path) -> None:
    study = ReplayStudy(
        trace="pollux", paths=(str(POLLUX),), policies=("fifo", "srsf"), limit=60, bound_time_limit=20.0
    )
    outcome = run_replay(study, tmp_path, workers=1, progress=False, figures=False)
    gaps = outcome.certified["default"]
    assert list(gaps.index) == ["fifo", "srsf"]
    assert (gaps["gap_pct"] >= 0).all()
    assert gaps["bound_jct_avg"].nunique() == 1  # one bound for the file, whatever the policy
    rows = outcome.rows.set_index("policy")
    assert gaps.loc["srsf", "jct_avg"] == pytest.approx(rows.loc["srsf", "jct_avg"] / 3600)
    saved = pd.read_csv(tmp_path / "certified_gap-default.csv", index_col=0)
    assert saved["gap_pct"].tolist() == pytest.approx(gaps["gap_pct"].tolist())
    # a rerun reads the stored bound instead of proving it again
    bounds = (tmp_path / "bounds.jsonl").read_text().splitlines()
    assert len(bounds) == 1
    run_replay(study, tmp_path, workers=1, progress=False, figures=False)
    assert (tmp_path / "bounds.jsonl").read_text().splitlines() == bounds


def test_pairing_cuts_raise_the_bound_and_stay_below_every_policy() -> None:
    # ratios drawn per pair from [1, 2]: the area rows alone let every job share at its best ratio
    instance = generate_instance(24, 2, 4, seed=11, arrivals="poisson", load=1.5)
    plain = trace_lower_bound(instance, time_limit=10, max_intervals=600, pairing_cuts=False)
    cut = trace_lower_bound(instance, time_limit=6, max_intervals=600)
    assert cut.cut_rounds >= 1
    assert cut.total_jct > plain.total_jct * 1.01
    for policy in POLICIES:
        assert _total_jct(instance, policy) >= cut.total_jct, policy


def test_safe_lp_bound_is_valid_at_any_duals() -> None:
    import highspy
    import scipy.sparse as sparse

    rng = np.random.default_rng(4)
    rows, cols = 12, 20
    matrix = sparse.csc_matrix(rng.uniform(0, 1, size=(rows, cols)) * (rng.uniform(size=(rows, cols)) < 0.5))
    cost = rng.uniform(-1, 1, size=cols)
    lower, upper = np.zeros(cols), np.ones(cols)
    row_lower = np.full(rows, -np.inf)
    row_upper = np.asarray(matrix.sum(axis=1)).ravel() * 0.4
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = cols, rows
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lower, upper
    lp.row_lower_ = np.full(rows, -highspy.kHighsInf)
    lp.row_upper_ = row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    h.run()
    optimum = h.getInfo().objective_function_value
    duals = np.asarray(h.getSolution().row_dual)
    assert safe_lp_bound(cost, matrix, row_lower, row_upper, lower, upper, duals) == pytest.approx(optimum, abs=1e-7)
    for _ in range(20):
        other = duals + rng.normal(0, 0.3, size=rows)  # wrong signs included: they are zeroed
        assert safe_lp_bound(cost, matrix, row_lower, row_upper, lower, upper, other) <= optimum + 1e-9


def test_split_lp_lifts_the_bound_on_a_loaded_trace() -> None:
    instance = load_trace("pollux", POLLUX, limit=120)
    bound = trace_lower_bound(instance, time_limit=30, max_intervals=600)
    assert bound.statuses["split_joint"] == "Optimal"
    # sharing paid in completion time: above the interval LP, which lets every job share for free
    assert bound.components["split_joint"] > bound.components["lagrangian"] * 1.01
    assert bound.method == "split_joint" and bound.total_jct == bound.components["split_joint"]
    assert all(_total_jct(instance, policy) >= bound.total_jct for policy in ("srsf", "sjf-bsbf", "tesserae-t"))


@pytest.mark.parametrize("capacity", [2, 4])
def test_bound_holds_for_muri_groups_on_a_muri_trace(capacity: int) -> None:
    # per-stage ratios, groups of up to four jobs per GPU at C = 4
    instance = load_trace("muri", shared_data_dir() / "muri" / "trace1.csv", limit=60, semantics="duetto")
    instance = instance.replace(cluster=replace(instance.cluster, capacity=capacity))
    bound = trace_lower_bound(instance, time_limit=10, max_intervals=400)
    for policy in ("muri-s", "muri-l", "srsf", "sjf-bsbf"):
        assert _total_jct(instance, policy, capacity=capacity) >= bound.total_jct, policy


def test_cli_bound_allows_the_capacity_a_schedule_was_made_for(tmp_path: Path) -> None:
    instance = load_trace("muri", shared_data_dir() / "muri" / "trace1.csv", limit=40, capacity=2, semantics="duetto")
    assert instance.cluster.capacity == 2
    io.save_instance(instance, tmp_path / "inst.json")
    result, _ = simulate_policy(instance, "muri-s", slot=None, capacity=4)
    assert result.schedule.capacity == 4
    io.save_schedule(result.schedule, tmp_path / "muri4.json")
    out = CliRunner().invoke(
        app, ["bound", str(tmp_path / "inst.json"), "-s", str(tmp_path / "muri4.json"), "--json", "-t", "10"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["capacity"] == 4  # a bound at C = 2 would not cover groups of four
    assert data["schedules"][0]["gap_pct"] >= -1e-9  # equal up to float rounding when the bound is tight


def test_public_api_replay_reports_certified_gaps(tmp_path: Path) -> None:
    import duetto

    rows = duetto.replay("pollux", POLLUX, policies=["srsf"], limit=40, out=tmp_path, bound_time_limit=10.0)
    # the full bound is anytime (its split LPs take what the 10 s leave: 2,375-2,443 s measured, 2,375 on
    # a busy CI machine); the interval LP alone ends in well under a second with a fixed value, and the
    # full bound starts from it, so the replay's bound lies between it and the policy's JCT
    floor = duetto.trace_lower_bound(
        load_trace("pollux", POLLUX, limit=40), time_limit=10.0, split=False, pairing_cuts=False
    )
    (row,) = rows.to_dict(orient="records")
    assert floor.average_jct * (1 - 1e-9) <= row["bound_jct_avg"] <= row["jct_avg"]
    assert row["certified_gap_pct"] == pytest.approx((row["jct_avg"] / row["bound_jct_avg"] - 1) * 100)
    assert row["certified_gap_pct"] >= 0
