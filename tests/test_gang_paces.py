"""Lanes with gang paces (a diagnostic bound): every real schedule is a point of its master whatever
slowest-worker rows it holds, its Lagrangian bound is below its LP at any duals, and its bound stays
between the lane LP and proven optima."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import highspy
import numpy as np
import pandas as pd
import pytest
from test_gang_lanes import check_lane_slack_variant
from test_run_columns import contended

from benchmarks import bound_comparison
from formulation.discretize import SlottedProblem, evaluate
from formulation.gang_paces import PaceDuals, _PaceMaster, _PacePricing, gang_pace_bound
from formulation.lane_tree import lane_tree_bound
from formulation.lanes import LaneData, lane_bound, lanes_of_solution, single_job_lanes
from formulation.relaxation import default_cut


def _objective(problem: SlottedProblem, data: LaneData) -> float:
    """``Σ_j E_j`` of the upper-bound schedule as the master counts it (past the cut: the late cost)."""
    ends = evaluate(problem, dict(problem.upper_bound or {}), exact=True)
    index = problem.index
    return float(sum(end if end <= data.horizon else data.late_cost[index[job_id]] for job_id, end in ends.items()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_real_schedule_is_a_point_of_the_master_with_every_slowest_worker_row(seed: int) -> None:
    _, problem = contended(seed)
    data = LaneData.from_problem(problem, default_cut(problem))
    master = _PaceMaster(data, highspy)
    assert master.gangs, "the contended instances have gangs"
    lanes = lanes_of_solution(problem, data)
    master.add(lanes)
    # every row the master could ever separate, with every pace column they name
    keys = [(j, int(k), t) for j in master.gangs for k in np.nonzero(data.shareable[j])[0] for t in range(data.horizon)]
    master.add_slowest_worker_rows(keys)
    assert len(master.cuts) == len(keys)
    # fix the schedule: each distinct lane as often as it occurs, nobody late; the explicit columns free
    count = Counter(lane.key() for lane in lanes)
    h = master.h
    on_time = {e.job for lane in lanes for e in lane.entries}
    column = 0
    for j in range(data.n):  # the late columns, in job order
        if data.can_be_late[j]:
            fixed = 0.0 if j in on_time else 1.0
            h.changeColBounds(column, fixed, fixed)
            column += 1
    for lane, col in zip(master.lanes, master.lane_cols, strict=True):
        h.changeColBounds(col, float(count[lane.key()]), float(count[lane.key()]))
    solved = master.solve(30.0)
    assert solved is not None, "the schedule is not a point of the master"
    assert solved[0] == pytest.approx(_objective(problem, data))
    values = master.values()
    # the gangs' occupancy is their lanes' and their paces cover their work
    for j in master.gangs:
        occupancy = np.zeros(data.horizon)
        for (gang, t), columns in master.pace_cols.items():
            if gang == j:
                occupancy[t] = sum(values[col] for col in columns.values())
        assert set(np.round(occupancy, 6)) <= {0.0, 1.0}
        if j in on_time:
            assert occupancy.sum() >= data.work[j] - 1e-6


@pytest.mark.parametrize("seed", [0, 2])
def test_the_lagrangian_is_below_the_lp_at_any_duals(seed: int) -> None:
    _, problem = contended(seed)
    data = LaneData.from_problem(problem, default_cut(problem))
    master = _PaceMaster(data, highspy)
    master.add(lanes_of_solution(problem, data))
    master.add(single_job_lanes(data))
    pricing = _PacePricing(data, master)
    # converge the master with its rows (as gang_pace_bound does, without smoothing)
    optimum = None
    for _ in range(400):
        solved = master.solve(30.0)
        assert solved is not None
        optimum, duals, gpu_dual = solved
        _, lanes = pricing.price(duals, data.n)
        entering = [lane for lane in lanes if -gpu_dual - master.lane_value(lane, duals) < -1e-7]
        if not entering and not master.separate(master.values()):
            break
        master.add(entering)
    else:
        pytest.fail("the master did not converge in 400 rounds")
    assert optimum is not None and len(master.cuts) > 0, "the instance needs slowest-worker rows"
    assert isinstance(duals, PaceDuals)
    top, _ = pricing.price(duals, 0)
    # at the optimal duals the Lagrangian is the LP optimum
    assert master.lagrangian(duals, top) == pytest.approx(optimum, abs=1e-5)
    rng = np.random.default_rng(seed)
    below = 0
    for _ in range(20):
        delta = duals.delta + rng.normal(0, 0.2, duals.delta.shape)
        phi = np.maximum(duals.phi + rng.normal(0, 0.5, duals.phi.shape), 0.0)
        rho = np.maximum(duals.rho + rng.normal(0, 0.5, duals.rho.shape), 0.0)
        base = master.duals(mu=duals.mu + rng.normal(0, 0.5, data.n), eta=duals.eta, nu=duals.nu)
        point = master.with_pace_duals(base, delta, phi, rho)
        top, _ = pricing.price(point, 0)
        value = master.lagrangian(point, top)
        assert value <= optimum + 1e-6
        below += value < optimum - 1e-3
    assert below > 0, "the random duals all landed on the optimum"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gang_pace_bound_stays_below_the_optimum_and_above_the_lanes(seed: int) -> None:
    optimum, problem = contended(seed)
    paces = gang_pace_bound(problem, time_limit=60)
    lanes = lane_bound(problem, time_limit=60)
    assert paces.status == "optimal" and lanes.status == "optimal"
    assert paces.value <= optimum + 1e-6
    # every lane row is still there and the new columns sit only in new rows: a restriction
    assert paces.value >= lanes.value - 1e-6


def test_the_gang_pace_bound_refuses_unknown_jobs() -> None:
    _, problem = contended(0)
    with pytest.raises(ValueError, match="fixed_starts / sharing_pairs"):
        gang_pace_bound(problem, fixed_starts={"no such job": 0})


def test_the_benchmark_runs_the_gang_paces(tmp_path: Path) -> None:
    output = tmp_path / "bounds.csv"
    argv = ["--jobs", "6", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "1", "--time-limit", "10"]
    assert bound_comparison.main([*argv, "--methods", "lanes", "gang_paces", "--output", str(output)]) == 0
    frame = pd.read_csv(output).set_index("method")
    assert sorted(frame.index) == ["gang_paces", "lanes"]
    assert (frame["bound_slots"] <= frame["ub_slots"] + 1e-6).all() and (frame["bound_slots"] > 0).all()
    assert frame.loc["gang_paces", "bound_slots"] >= frame.loc["lanes", "bound_slots"] - 1e-6
    # lane_slack --gang-paces: with the schedule's starts fixed, each bound holds for what it bounds
    check_lane_slack_variant(tmp_path, argv[:-2], "--gang-paces", "pace")


def test_the_tree_on_gang_paces_stays_below_the_optimum_and_starts_above_the_lane_root() -> None:
    optimum, problem = contended(0)
    lanes = lane_bound(problem, time_limit=60)
    tree = lane_tree_bound(problem, time_limit=8, gang_paces=True)
    assert tree.value <= optimum + 1e-6
    assert tree.root >= lanes.value - 1e-6
    assert tree.value >= tree.root - 1e-6
    with pytest.raises(ValueError, match="choose one"):
        lane_tree_bound(problem, time_limit=1, gang_paces=True, gang_runs=True)


def test_the_lane_lp_first_starts_the_pace_master_at_the_lane_bound() -> None:
    optimum, problem = contended(1)
    lanes = lane_bound(problem, time_limit=60)
    first = gang_pace_bound(problem, time_limit=60, lane_share=0.5)
    assert first.status == "optimal"
    assert lanes.value - 1e-6 <= first.value <= optimum + 1e-6
    with pytest.raises(ValueError, match="lane_share"):
        gang_pace_bound(problem, lane_share=1.5)
