"""Windows from the lane LP's duals: :meth:`formulation.lanes._Master.others_bounds` and
:func:`formulation.lanes.lane_end_windows` (docs/oracle-measurements.md, "Windows from the lane LP's duals")."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_run_columns import contended

from benchmarks import lane_windows
from formulation.discretize import SlottedProblem, completion_sum_lower_bounds, discretize, evaluate
from formulation.generator import generate_instance
from formulation.lanes import LaneData, _LanePricing, lane_end_windows, lane_lp_first
from formulation.relaxation import default_cut
from solvers.warmstart import warm_start


def _counted_ends(problem: SlottedProblem, data: LaneData, solution: dict) -> list[float]:
    """Each job's end in the upper-bound schedule as the lane master counts it (past the cut: the late
    cost, which is at most the real end)."""
    ends = evaluate(problem, solution, exact=True)
    return [
        float(min(ends[job.id], data.late_cost[j]) if ends[job.id] > data.horizon else ends[job.id])
        for j, job in enumerate(problem.jobs)
    ]


@pytest.mark.parametrize("rounds", [3, 10_000])
def test_the_others_bound_holds_for_the_optimum_early_and_converged(rounds: int) -> None:
    # valid at any duals: after three rounds as well as at the LP optimum
    for seed in (0, 1):
        _, problem = contended(seed)
        data = LaneData.from_problem(problem, default_cut(problem))
        master, outcome = lane_lp_first(problem, data, window=None, deadline=1e18, max_rounds=rounds)
        assert outcome.center is not None
        top, _ = _LanePricing(data, master.covers).price(outcome.center, 0)
        others = master.others_bounds(outcome.center, top)
        ends = _counted_ends(problem, data, dict(problem.upper_bound or {}))
        total = sum(ends)
        for j in range(data.n):
            assert others[j] <= total - ends[j] + 1e-6, (seed, j)
        if rounds > 100:
            # at the LP optimum it beats the static bound of discretize's windows for most jobs: their point
            static = completion_sum_lower_bounds(problem)
            assert sum(others[j] > static[j] for j in range(data.n)) > data.n / 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_windows_keep_every_schedule_as_good_as_the_upper_bound(seed: int) -> None:
    optimum, tight = contended(seed)
    best = dict(tight.upper_bound or {})
    optimal_ends = evaluate(tight, best, exact=True)
    # from a worse upper bound (the warm start's), the optimum must stay inside the windows too
    instance = generate_instance(7, 1, 4, seed, memory_pressure=0.6)
    base = discretize(instance, slot=tight.slot)
    loose = base.with_upper_bound(warm_start(base))
    assert (loose.upper_bound_value or 0) >= optimum
    shrunk = 0
    for problem in (tight, loose):
        bound, latest = lane_end_windows(problem, time_limit=60)
        assert bound.status == "optimal" and bound.value <= optimum + 1e-6
        for j, job in enumerate(problem.jobs):
            assert job.earliest_end <= latest[j] <= job.latest_end
            assert optimal_ends[job.id] <= latest[j], (job.id, optimal_ends[job.id], latest[j])
        shrunk += sum(job.latest_end - end for job, end in zip(problem.jobs, latest, strict=True))
    assert shrunk > 0, "the lane LP's bounds on the others narrowed no window"


def test_where_the_lanes_do_not_apply_the_windows_are_the_problems_own() -> None:
    instance = generate_instance(5, 1, 4, 0)
    problem = discretize(instance, objective="makespan")
    bound, latest = lane_end_windows(problem, time_limit=5)
    assert bound.status.startswith("skipped")
    assert latest == [job.latest_end for job in problem.jobs]


def test_the_benchmark_measures_both_windows(tmp_path: Path) -> None:
    output = tmp_path / "windows.csv"
    argv = ["--jobs", "6", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "1", "--time-limit", "5"]
    options = ["--lp-time-limit", "20", "--check-seconds", "10", "--output", str(output)]
    assert lane_windows.main([*argv, *options]) == 0
    row = pd.read_csv(output).iloc[0]
    assert row["narrow_window_slots"] <= row["window_slots"]
    assert row["narrow_horizon"] <= row["horizon"]
    assert row["lp_bound"] <= row["schedule_slots"] + 1e-6
    for name in ("own", "narrow"):
        # each run starts from the schedule: its value is never worse, its bound never above it
        assert row[f"{name}_objective_slots"] <= row["schedule_slots"] + 1e-6
        assert row[f"{name}_bound_slots"] <= row[f"{name}_objective_slots"] + 1e-6
    # the narrower windows hold every schedule as good as the start, so a proven optimum is the same
    if row["own_status"] == "optimal" and row["narrow_status"] == "optimal":
        assert row["own_objective_slots"] == pytest.approx(row["narrow_objective_slots"])
    assert lane_windows.main([*argv[:-2], "--time-limit", "0"]) == 2
    assert lane_windows.main(["--jobs", "0"]) == 2
