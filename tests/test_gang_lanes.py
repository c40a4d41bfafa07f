"""Lanes with gang runs (a diagnostic bound): every real schedule is a point of its master, its run DP
is exact over the runs it covers and dominates real runs, and its bound stays below proven optima."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import highspy
import numpy as np
import pandas as pd
import pytest
from test_run_columns import contended

from benchmarks import bound_comparison, lane_slack
from formulation.discretize import SlottedProblem, evaluate
from formulation.gang_lanes import (
    GangDuals,
    GangRun,
    _GangMaster,
    _RunPricing,
    _SlowestWorkerRows,
    alone_runs,
    gang_lane_bound,
    runs_of_solution,
)
from formulation.lane_tree import lane_tree_bound
from formulation.lanes import LaneData, lane_bound, lanes_of_solution
from formulation.relaxation import default_cut


def _objective(problem: SlottedProblem, data: LaneData) -> float:
    """``Σ_j E_j`` of the upper-bound schedule as the master counts it (past the cut: the late cost)."""
    ends = evaluate(problem, dict(problem.upper_bound or {}), exact=True)
    index = problem.index
    return float(sum(end if end <= data.horizon else data.late_cost[index[job_id]] for job_id, end in ends.items()))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("link_starts", [False, True])
def test_a_real_schedule_is_a_point_of_the_master_and_violates_no_slowest_worker_row(
    seed: int, link_starts: bool
) -> None:
    _, problem = contended(seed)
    data = LaneData.from_problem(problem, default_cut(problem))
    master = _GangMaster(data, highspy, link_starts=link_starts)
    lanes = lanes_of_solution(problem, data)
    runs = runs_of_solution(problem, data)
    assert runs, "the contended instances have gangs"
    master.add(lanes)
    master.add_runs(runs)
    # fix the schedule: each distinct lane as often as it occurs, each run once, nobody late
    count = Counter(lane.key() for lane in lanes)
    h = master.h
    on_time = {int(run.job) for run in runs} | {e.job for lane in lanes for e in lane.entries}
    h.changeColsBounds(
        h.getNumCol(), np.arange(h.getNumCol(), dtype=np.int32), np.zeros(h.getNumCol()), np.zeros(h.getNumCol())
    )
    for lane, col in zip(master.lanes, master.lane_cols, strict=True):
        h.changeColBounds(col, float(count[lane.key()]), float(count[lane.key()]))
    for col in master.run_cols:
        h.changeColBounds(col, 1.0, 1.0)
    late = [j for j in range(data.n) if j not in on_time]
    column = 0
    for j in range(data.n):  # the late columns, in job order, for the jobs the schedule ends past the cut
        if data.can_be_late[j]:
            if j in late:
                h.changeColBounds(column, 1.0, 1.0)
            column += 1
    solved = master.solve(30.0)
    assert solved is not None, "the schedule is not a point of the master"
    assert solved[0] == pytest.approx(_objective(problem, data))
    assert master._separate_slowest_worker(master.values()) == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_the_run_dp_is_worth_what_it_says_and_no_real_run_is_cheaper(seed: int) -> None:
    _, problem = contended(seed)
    data = LaneData.from_problem(problem, default_cut(problem))
    rng = np.random.default_rng(seed)
    cuts = _SlowestWorkerRows(data)
    gangs = [int(j) for j in np.nonzero(data.num_gpus > 1)[0]]
    for number in range(300):  # rows at random (gang, partner, slot); their row numbers do not matter here
        j = int(rng.choice(gangs))
        partners = np.nonzero(data.shareable[j])[0]
        if partners.size:
            key = (j, int(rng.choice(partners)), int(rng.integers(0, data.horizon)))
            if key not in cuts.known:
                cuts.add(*key, row=number)
    pricing = _RunPricing(data, cuts)
    real = runs_of_solution(problem, data) + alone_runs(data)
    for _ in range(10):
        duals = GangDuals(
            np.zeros((data.n, data.horizon + 1)),
            np.zeros((data.n, data.horizon + 1)),
            np.zeros(data.n),
            delta=rng.normal(0, 0.3, (data.n, data.horizon + 1)),
            rho=rng.uniform(0, 1, len(cuts)) * (rng.uniform(size=len(cuts)) < 0.7),
            kappa=rng.normal(0, 5, data.n),
            epsilon=rng.uniform(-0.05, 0.05, data.n),
            theta=rng.normal(0, 0.3, (data.n, data.horizon + 1)),
        )
        best, priced = pricing.priced(duals, 3)
        for j in gangs:
            assert priced[j], f"no run priced for gang {j}"
            top = priced[j][0]
            # the best run is worth exactly the DP's value, and its gridded work is complete
            assert pricing.reduced_cost(top, duals) + duals.kappa[j] == pytest.approx(best[j], abs=1e-7)
            assert sum(math.ceil(pricing.grid * level - 1e-9) for level in top.levels) >= pricing.need[j]
            assert top.end - top.start == len(top.levels)
        for run in real:
            assert pricing.reduced_cost(run, duals) + duals.kappa[run.job] >= best[run.job] - 1e-7


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gang_lane_bound_stays_below_the_optimum_and_above_the_lanes(seed: int) -> None:
    optimum, problem = contended(seed)
    gangs = gang_lane_bound(problem, time_limit=120)
    lanes = lane_bound(problem, time_limit=60)
    assert gangs.status == "optimal" and lanes.status == "optimal"
    assert gangs.value <= optimum + 1e-6
    # the master holds every row of the lane master (the gang's end is linked, not dropped): its LP is
    # a restriction, and both converged
    assert gangs.value >= lanes.value - 1e-6


def test_a_run_of_the_wrong_shape_is_refused() -> None:
    _, problem = contended(0)
    data = LaneData.from_problem(problem, default_cut(problem))
    master = _GangMaster(data, highspy)
    j = int(np.nonzero(data.num_gpus > 1)[0][0])
    with pytest.raises(ValueError, match="wrong shape"):
        master.add_runs([GangRun((), job=j, start=0, end=3, levels=(1.0,))])


def test_the_tree_on_gang_lanes_stays_below_the_optimum_and_starts_above_the_lane_root() -> None:
    optimum, problem = contended(0)
    lanes = lane_bound(problem, time_limit=60)
    tree = lane_tree_bound(problem, time_limit=8, gang_runs=True)
    assert tree.value <= optimum + 1e-6
    assert tree.root >= lanes.value - 1e-6
    assert tree.value >= tree.root - 1e-6


def test_the_lp_with_the_optimums_starts_given_is_below_the_optimum_and_above_the_lanes_there() -> None:
    optimum, problem = contended(1)
    starts = {job_id: a.start for job_id, a in (problem.upper_bound or {}).items()}
    gangs = gang_lane_bound(problem, time_limit=60, fixed_starts=starts)
    lanes = lane_bound(problem, time_limit=60, fixed_starts=starts)
    assert gangs.status == "optimal"
    assert lanes.value - 1e-6 <= gangs.value <= optimum + 1e-6
    with pytest.raises(ValueError, match="fixed_starts / sharing_pairs"):
        gang_lane_bound(problem, fixed_starts={"no such job": 0})


def test_the_benchmarks_run_the_gang_lanes(tmp_path: Path) -> None:
    # bound_comparison's methods and lane_slack's --gang-runs: each bound stays below what it bounds
    output = tmp_path / "bounds.csv"
    argv = ["--jobs", "6", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "1", "--time-limit", "10"]
    methods = ["--methods", "lanes", "gang_lanes", "gang_tree"]
    assert bound_comparison.main([*argv, *methods, "--output", str(output)]) == 0
    frame = pd.read_csv(output).set_index("method")
    assert sorted(frame.index) == ["gang_lanes", "gang_tree", "lanes"]
    assert (frame["bound_slots"] <= frame["ub_slots"] + 1e-6).all() and (frame["bound_slots"] > 0).all()
    check_lane_slack_variant(tmp_path, argv[:-2], "--gang-runs", "gang")


def check_lane_slack_variant(tmp_path: Path, argv: list[str], flag: str, suffix: str) -> None:
    """``lane_slack`` with a gang variant's ``flag`` (columns ``NAME_suffix``) on a small instance: each
    bound stays below what it bounds, and converged it is at least the lanes' (a restriction of them)."""
    slack = tmp_path / f"slack_{suffix}.csv"
    options = ["--lp-time-limit", "30", "--check-seconds", "10", "--lps", "root", "starts_fixed", flag]
    assert lane_slack.main([*argv, "--time-limit", "5", *options, "--output", str(slack)]) == 0
    row = pd.read_csv(slack).iloc[0]
    tol = 1e-4 * row["schedule_slots"]
    # each bound holds for what it bounds, converged or not
    assert 0 < row[f"root_{suffix}"] <= row["schedule_slots"] + tol
    assert 0 < row[f"starts_fixed_{suffix}"] <= row["best_given_starts"] + tol
    for name in ("root", "starts_fixed"):
        if row[f"{name}_{suffix}_status"] == "optimal" and row[f"{name}_status"] == "optimal":
            assert row[name] - tol <= row[f"{name}_{suffix}"]
