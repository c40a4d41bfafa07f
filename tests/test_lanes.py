"""The lane (Dantzig-Wolfe) relaxation: its pricing covers every real lane, its bound stays below
proven optima, and it knows which jobs share a GPU."""

from __future__ import annotations

import functools
import itertools
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchmarks import bound_comparison, lane_slack
from formulation import lane_kernel
from formulation.cluster import Cluster
from formulation.discretize import SlottedProblem, choose_slot, discretize
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.instance import Instance, Job
from formulation.interference import TableInterference
from formulation.io import load_instance
from formulation.lane_tree import BRANCHINGS, lane_tree_bound
from formulation.lanes import (
    REACHABLE,
    Duals,
    Lane,
    LaneData,
    LaneEntry,
    Window,
    _column_generation,
    _CoverRows,
    _LanePricing,
    _Master,
    _ProgressPricing,
    lane_bound,
    lane_cut,
    lanes_of_solution,
    restricted_data,
    single_job_lanes,
)
from formulation.paths import shared_data_dir
from formulation.speed import Profile
from formulation.validator import validate
from heuristics.simulator import simulate
from solvers import SolveStatus, solve
from solvers.api import _lanes_first
from solvers.warmstart import warm_start


def one_pair_and_a_loner() -> Instance:
    """One GPU; a and b share at no cost (ξ = 1 both ways), c may share with nobody; 10 s each."""
    profiles = {name: Profile(name, compute_alpha=1.0, memory_base_gib=1.0) for name in ("ab", "c")}
    jobs = (Job("a", 0.0, 1, 10, 1, "ab"), Job("b", 0.0, 1, 10, 1, "ab"), Job("c", 0.0, 1, 10, 1, "c"))
    return Instance(Cluster(1, 1, 16.0), jobs, profiles, TableInterference({("ab", "ab"): 1.0}))


def test_lane_bound_is_exact_on_a_pair_and_a_loner() -> None:
    # a and b together in [0, 10), then c: 10 + 10 + 20 = 40 slots
    problem = discretize(one_pair_and_a_loner(), slot=1.0)
    problem = problem.with_upper_bound(warm_start(problem))
    bound = lane_bound(problem, time_limit=30)
    assert bound.status == "optimal"
    assert 40.0 - 1e-6 <= bound.value <= 40.0 + 1e-6


def _random_duals(data: LaneData, rng: np.random.Generator) -> Duals:
    shape = (data.n, data.horizon + 1)
    return Duals(rng.normal(0, 3, shape), rng.normal(0, 3, shape), rng.uniform(0, 2, data.n))


def _real_lanes(data: LaneData, jobs: list[int]) -> list[Lane]:
    """Every lane of one GPU holding ``jobs`` (each at most once, two at a time at most), with exact
    lane-local progress: a brute force over starts and ends."""
    lanes: list[Lane] = []
    runs = {
        j: [
            (s, e)
            for s in range(int(data.release[j]), int(data.last_start[j]) + 1)
            for e in range(s + int(data.min_slots[j]), min(s + int(data.max_slots[j]), int(data.last_end[j])) + 1)
        ]
        for j in jobs
    }
    for size in range(1, len(jobs) + 1):
        for subset in itertools.combinations(jobs, size):
            for choice in itertools.product(*(runs[j] for j in subset)):
                placed = list(zip(subset, choice, strict=True))
                if any(sum(1 for _, (s, e) in placed if s <= t < e) > 2 for t in range(data.horizon)):  # capacity two
                    continue
                entries = []
                ok = True
                for j, (s, e) in placed:
                    overlaps = {}
                    for k, (s2, e2) in placed:
                        if k != j and min(e, e2) > max(s, s2):
                            if not data.shareable[j, k]:
                                ok = False
                            overlaps[k] = float(min(e, e2) - max(s, s2))
                    progress = data.progress(j, s, e, overlaps)
                    if progress < data.work[j] - 1e-9:
                        ok = False
                    entries.append(LaneEntry(j, s, e, progress))
                if ok:
                    lanes.append(Lane(tuple(entries)))
    return lanes


def _value(lane: Lane, duals: Duals) -> float:
    return sum(
        duals.alpha[e.job, e.start] + duals.beta[e.job, e.end] + duals.eta[e.job] * e.progress for e in lane.entries
    )


@pytest.mark.parametrize("pricer", ["fast", "progress"])
@pytest.mark.parametrize("seed", range(4))
def test_pricing_dominates_every_real_lane_and_its_lanes_are_worth_what_it_says(seed: int, pricer: str) -> None:
    # three one-GPU jobs of a few slots on one GPU: every real lane, enumerated, is worth no more than
    # the DP's optimum (the DP prices a superset); the lane it returns is worth exactly that
    instance = generate_instance(3, 1, 1, seed, duration_range=(60, 240), memory_pressure=0.0)
    problem = discretize(instance, slot=60.0)
    problem = problem.with_upper_bound(warm_start(problem))
    data = LaneData.from_problem(problem, min(problem.horizon, 9))
    pricing = _LanePricing(data) if pricer == "fast" else _ProgressPricing(data, grid=4)
    real = _real_lanes(data, list(range(data.n)))
    assert any(len(lane.entries) == 3 for lane in real)
    assert any(e.progress < e.end - e.start for lane in real for e in lane.entries)  # some lanes share
    rng = np.random.default_rng(seed)
    for _ in range(25):
        duals = _random_duals(data, rng)
        top, lanes = pricing.price(duals, data.n)
        best_real = max(_value(lane, duals) for lane in real)
        assert top >= best_real - 1e-7
        if lanes:
            assert _value(lanes[0], duals) == pytest.approx(top, abs=1e-7)
            for lane in lanes:
                for e in lane.entries:  # a lane the DP returns keeps every partner's exact check
                    assert data.min_slots[e.job] <= e.end - e.start
                    partners = sum(1 for other in lane.entries if other is not e)
                    if pricer == "progress":  # every job's work done, up to 1/4 slot per partner
                        assert e.progress >= data.work[e.job] - partners / 4 - 1e-9
                    else:
                        assert e.end - e.start <= data.max_slots[e.job]


@pytest.mark.parametrize("policy", ["sjf-bsbf", "fifo"])
def test_every_lane_of_a_real_schedule_is_a_column(policy: str) -> None:
    # a gang's lanes each see only their own partner: their progress is at least the job's work
    instance = generate_instance(16, 1, 8, 3)
    problem = discretize(instance, slot=choose_slot(instance, 60))
    schedule = simulate(instance, policy, slot=problem.slot).schedule
    problem = problem.with_upper_bound(schedule)
    data = LaneData.from_problem(problem, problem.horizon)
    lanes = lanes_of_solution(problem, data)
    assert len(lanes) == 8 and any(len(lane.entries) > 2 for lane in lanes)
    shared = 0
    for lane in lanes:
        for e in lane.entries:
            assert e.progress >= data.work[e.job] - 1e-9
            shared += e.progress < e.end - e.start
    assert sum(len(lane.entries) for lane in lanes) == sum(job.num_gpus for job in instance.jobs)
    assert all(len(lane.entries) == 1 for lane in single_job_lanes(data))


@functools.cache
def contended(seed: int) -> tuple[Instance, int, SlottedProblem]:
    """7 jobs on 4 GPUs (gangs, memory forbidding some pairs, about 40 slots), its proven optimum
    (slots) and its slotted problem with the optimal schedule as upper bound."""
    instance = generate_instance(7, 1, 4, seed, memory_pressure=0.6)
    result = solve(instance, "cpsat", time_limit=30, slot=choose_slot(instance, 40))
    assert result.status is SolveStatus.OPTIMAL
    problem = discretize(instance, slot=result.stats["problem"]["slot_seconds"]).with_upper_bound(result.schedule)
    return instance, int(result.stats["objective_slots"]), problem


@pytest.mark.parametrize("seed", range(3))
def test_lane_bound_never_exceeds_a_proven_optimum(seed: int) -> None:
    instance, optimum, problem = contended(seed)
    full = lane_bound(problem, time_limit=60)
    assert full.status == "optimal" and full.value <= optimum + 1e-6
    # the Lagrangian bound of the first round, a short cut, and plain column generation: all valid
    for candidate in (
        lane_bound(problem, max_rounds=1),
        lane_bound(problem, cut=max(1, problem.horizon // 3)),
        lane_bound(problem, smoothing=0.0),
        lane_bound(problem, pricing="progress", time_limit=60),
    ):
        assert candidate.proven and candidate.value <= optimum + 1e-6
    # the same LP whichever way the duals go (pair rows only: rows over sets come from a heuristic whose
    # finds depend on the points it is shown)
    pairs_only = lane_bound(problem, cover_sets=False)
    assert pairs_only.status == "optimal"
    assert lane_bound(problem, smoothing=0.0, cover_sets=False).value == pytest.approx(pairs_only.value, abs=1e-4)
    assert any(job.num_gpus > 1 for job in instance.jobs)


def test_the_master_has_one_optimum_whichever_simplex_solves_it() -> None:
    # the roots run the primal simplex, the tree's nodes the dual (docs/oracle.md): the LP is the same
    import highspy

    _, _, problem = contended(1)
    cut, reason = lane_cut(problem, None, 10**9)
    assert reason is None
    data, _ = restricted_data(problem, cut, None, None)
    masters = []
    for kind in ("primal", "dual"):
        master = _Master(data, highspy, cover_sets=False)
        master.use_simplex(kind)
        master.add(lanes_of_solution(problem, data))
        master.add(single_job_lanes(data))
        masters.append(master)
    pricer = _LanePricing(data, masters[0].covers)
    added = 0
    for _ in range(6):  # the same columns into both, from the first master's duals
        by_primal, by_dual = (master.solve(30) for master in masters)
        assert by_primal is not None and by_dual is not None
        assert by_primal[0] == pytest.approx(by_dual[0], abs=1e-6)
        _, lanes = pricer.price(by_primal[1], data.n)
        for master in masters:
            added += master.add(lanes)
    assert added > 0  # the masters compared were not only the first one
    assert masters[0].h.getOptionValue("simplex_strategy")[1] == 4
    assert masters[1].h.getOptionValue("simplex_strategy")[1] == 1
    with pytest.raises(ValueError, match="simplex must be 'primal' or 'dual'"):
        masters[0].use_simplex("barrier")


def test_lane_bound_measures_how_much_it_time_slices_gangs() -> None:
    # the contended set's masters hold a 4-GPU gang several times in one lane; re-solved without such
    # lanes the master can only rise, and it says so without changing the bound itself
    shares = []
    for seed in range(3):
        _, optimum, problem = contended(seed)
        plain = lane_bound(problem, cover_sets=False)
        measured = lane_bound(problem, cover_sets=False, gang_repeats=True)
        assert measured.value == pytest.approx(plain.value, abs=1e-4) and measured.value <= optimum + 1e-6
        assert math.isnan(plain.elementary_ceiling)
        assert 0.0 <= measured.gang_repeat_share <= 1.0
        assert measured.elementary_ceiling >= measured.value - 1e-4
        shares.append(measured.gang_repeat_share)
    assert max(shares) > 0.0


@pytest.mark.parametrize("name", ["coarse_n8_M4_s1", "coarse_n10_M4_s2", "coarse_n12_M4_s3"])
def test_lane_bound_below_the_optimum_of_the_coarse_instances(name: str) -> None:
    path = shared_data_dir() / "oracle-coarse" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} not present")
    instance = load_instance(path)
    result = solve(instance, "cpsat", time_limit=30, slot=60.0, units_per_slot=100)
    assert result.status is SolveStatus.OPTIMAL
    problem = discretize(instance, slot=60.0, units_per_slot=100).with_upper_bound(result.schedule)
    bound = lane_bound(problem, time_limit=60)
    assert bound.status == "optimal"
    assert bound.value <= result.stats["objective_slots"] + 1e-6
    assert bound.value >= 0.8 * result.stats["objective_slots"]


def test_lane_bound_stops_on_time_and_when_cancelled() -> None:
    instance = generate_instance(16, 1, 8, 0)
    problem = discretize(instance)
    problem = problem.with_upper_bound(warm_start(problem))
    stopped = lane_bound(problem, time_limit=1.0)
    assert stopped.status == "time_limit" and stopped.seconds < 3.0
    assert stopped.value <= (problem.upper_bound_value or math.inf)
    cancel = threading.Event()
    cancel.set()
    assert lane_bound(problem, cancel=cancel).status == "cancelled"


def test_lane_bound_skips_what_it_does_not_cover() -> None:
    instance = generate_instance(5, 1, 2, 0)
    makespan = discretize(instance, objective="makespan")
    assert lane_bound(makespan.with_upper_bound(warm_start(makespan))).status.startswith("skipped")
    problem = discretize(instance)
    problem = problem.with_upper_bound(warm_start(problem))
    assert lane_bound(problem, max_states=10).status.startswith("skipped")
    with pytest.raises(ValueError, match="pricing"):
        lane_bound(problem, pricing="exact")


def test_bound_comparison_benchmark_writes_both_relaxations(tmp_path: Path) -> None:
    # the benchmark's smoke version: both relaxations on two small instances, below the upper bound
    output = tmp_path / "bounds.csv"
    code = bound_comparison.main(
        [
            "--jobs",
            "6",
            "--gpus",
            "4",
            "--gpus-per-node",
            "4",
            "--seeds",
            "2",
            "--time-limit",
            "20",
            "--output",
            str(output),
        ]
    )
    assert code == 0
    frame = pd.read_csv(output)
    assert sorted(frame["method"].unique()) == ["coupled", "lanes"]
    assert len(frame) == 4
    assert (frame["bound_slots"] <= frame["ub_slots"] + 1e-6).all()
    assert (frame["bound_slots"] > 0).all()
    summary = bound_comparison.summarize(frame)
    assert summary["wins"].sum() >= 2  # each instance has a better (or tied) method
    assert (frame["last_release"] == 0).all()
    assert bound_comparison.main(["--jobs", "0"]) == 2
    poisson = tmp_path / "poisson.csv"
    argv = ["--jobs", "6", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "1", "--time-limit", "20"]
    assert bound_comparison.main([*argv, "--arrivals", "poisson", "--output", str(poisson)]) == 0
    frame = pd.read_csv(poisson)
    assert (frame["arrivals"] == "poisson").all() and (frame["last_release"] > 0).all()
    assert (frame["bound_slots"] <= frame["ub_slots"] + 1e-6).all()
    # the tree once per branching rule, each a method of its own
    trees = tmp_path / "trees.csv"
    argv = ["--jobs", "6", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "1", "--time-limit", "3"]
    rules = ["--methods", "tree", "--branching", "starts", "ends"]
    assert bound_comparison.main([*argv, *rules, "--output", str(trees)]) == 0
    frame = pd.read_csv(trees)
    assert list(frame["method"]) == ["tree", "tree:ends"]
    assert ((frame["bound_slots"] > 0) & (frame["bound_slots"] <= frame["ub_slots"] + 1e-6)).all()


def test_bound_comparison_checks_every_bound_against_a_proven_optimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # under memory pressure the mode-aware lanes are their own method; cpsat proves the optimum of the
    # instance in its worker process, and no bound may pass it
    output = tmp_path / "optimum.csv"
    argv = ["--jobs", "5", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "1", "--time-limit", "10"]
    checks = ["--methods", "lanes", "mode_lanes", "coupled", "--memory-pressure", "0.9", "--optimum", "30"]
    assert bound_comparison.main([*argv, *checks, "--output", str(output)]) == 0
    frame = pd.read_csv(output)
    assert list(frame["method"]) == ["lanes", "mode_lanes", "coupled"]
    optimum = frame["optimum_slots"].iloc[0]
    assert math.isfinite(optimum) and (frame["optimum_slots"] == optimum).all()
    assert (frame["bound_slots"] > 0).all() and (frame["bound_slots"] <= optimum + 1e-6).all()
    assert not frame["above_optimum"].any() and optimum <= frame["ub_slots"].iloc[0]
    assert "optimum proven on 1 of 1 instances" in capsys.readouterr().out
    # a bound above the optimum is named and fails the run (here the optimum is made too low)
    monkeypatch.setattr(bound_comparison, "_proven_optimum", lambda instance, problem, seconds: 1.0)
    assert bound_comparison.main([*argv, "--methods", "coupled", "--optimum", "30"]) == 1
    assert "error: coupled bound" in capsys.readouterr().err
    # bad values are one-line errors
    assert bound_comparison.main([*argv, "--optimum", "0"]) == 2
    assert bound_comparison.main([*argv, "--memory-pressure", "1.5"]) == 2
    assert "--memory-pressure must be in [0, 1]" in capsys.readouterr().err


def test_solve_runs_the_lanes_where_they_converge_and_says_why_not_elsewhere() -> None:
    instance = generate_instance(7, 1, 4, 1, memory_pressure=0.6)
    result = solve(instance, "highs", time_limit=20, slot=choose_slot(instance, 40), coupled_bound=False)
    lanes = result.stats["lane_bound"]
    assert lanes["status"] == "optimal" and lanes["rounds"] >= 1
    assert result.stats["bound_slots"] >= math.ceil(lanes["bound_slots"] - 1e-5)
    assert lanes["bound_slots"] <= result.stats["objective_slots"] + 1e-6
    # 24 jobs in 4 s, the lanes after the coupled LP: their column generation would not end in time, so
    # it does not start
    large = solve(generate_instance(24, 1, 8, 0), "cpsat", time_limit=4, lane_bound="after")
    assert large.stats["lane_bound"]["status"] == "skipped: not expected to converge in the time limit"
    assert large.stats["lane_bound"]["order"] == "after"
    makespan = solve(instance, "cpsat", time_limit=5, objective="makespan")
    assert makespan.stats["lane_bound"]["status"].startswith("skipped: total JCT")
    off = solve(instance, "cpsat", time_limit=5, lane_bound=False)
    assert off.stats["lane_bound"] is None


def test_the_lanes_order_by_solver() -> None:
    # the lanes first for cpsat and highs; for a tree (bnp, portfolio) only where it would otherwise be
    # skipped (None); "first" and "after" as asked
    assert _lanes_first(True, tree=False, seconds=60) is True
    assert _lanes_first(True, tree=True, seconds=60) is None
    assert _lanes_first("first", tree=True, seconds=60) is True
    assert _lanes_first("after", tree=False, seconds=60) is False
    # with a few seconds left, not by default (setting the lanes up would cost what the solve cannot spare)
    assert _lanes_first(True, tree=False, seconds=1) is False
    assert _lanes_first(True, tree=True, seconds=1) is False
    assert _lanes_first("first", tree=False, seconds=1) is True


def test_solve_runs_the_lanes_first_by_default_where_they_would_not_converge() -> None:
    # 24 jobs in 10 s (more than LANES_FIRST_MIN_SECONDS left after the warm starts): skipped with the
    # lanes after the coupled LP (above); first, as by default, the lanes run and their bound, if one
    # came, is below the schedule
    big = generate_instance(24, 1, 8, 0)
    large = solve(big, "cpsat", time_limit=10)
    assert large.schedule is not None and validate(big, large.schedule).ok
    lanes = large.stats["lane_bound"]
    assert lanes["order"] == "first"
    assert not lanes["status"].startswith("skipped") and lanes["rounds"] >= 1
    assert lanes["bound_slots"] is None or lanes["bound_slots"] <= large.stats["objective_slots"] + 1e-6
    # where there is time for both: the lanes converge first, then the coupled LP runs too
    instance = generate_instance(7, 1, 4, 1, memory_pressure=0.6)
    result = solve(instance, "highs", time_limit=20, slot=choose_slot(instance, 40), lane_bound="first")
    assert result.schedule is not None and validate(instance, result.schedule).ok
    assert result.stats["lane_bound"]["status"] == "optimal" and result.stats["lane_bound"]["order"] == "first"
    assert result.stats["coupled_bound"]["bound_slots"] is not None
    best = max(result.stats["lane_bound"]["bound_slots"], result.stats["coupled_bound"]["bound_slots"])
    assert result.stats["bound_slots"] >= math.ceil(best - 1e-5)
    with pytest.raises(DuettoInputError) as info:
        solve(instance, "highs", time_limit=5, lane_bound="last")  # type: ignore[arg-type]
    assert info.value.field == "lane_bound"


@pytest.mark.parametrize("seed", range(2))
def test_branching_raises_the_bound_and_never_past_the_optimum(seed: int) -> None:
    # the incumbent the tree prunes against is 10 % worse than the optimum, so a wrong node bound or a
    # wrong pruning would show as a bound above the optimum
    _, optimum, problem = contended(seed)
    seen: list[float] = []
    tree = lane_tree_bound(
        problem, time_limit=8, incumbent=math.ceil(1.1 * optimum), on_bound=lambda value: seen.append(value) is None
    )
    assert tree.proven and tree.value <= optimum + 1e-6
    root = lane_bound(problem, time_limit=30, cover_sets=False)  # the tree's root: cover rows over pairs
    assert tree.root == pytest.approx(root.value, abs=1e-4)
    assert lane_bound(problem, time_limit=30).value >= root.value - 1e-6  # sets of three or more add rows
    assert tree.value > root.value + 0.5  # branching on start / end windows lifts it (by whole slots, given time)
    assert tree.nodes > 1 and tree.depth >= 1
    assert seen == sorted(seen)  # the global bound only rises
    assert tree.seconds < 8 * 1.1 + 1


def test_every_branching_rule_and_a_region_of_fixed_starts_stay_below_the_optimum() -> None:
    # seed 1: two 4-GPU jobs on 4 GPUs. Pruning against an incumbent 10 % worse, a wrong node bound
    # under any rule shows as a bound above the optimum
    _, optimum, problem = contended(1)
    root = lane_bound(problem, time_limit=30, cover_sets=False).value
    for rule in BRANCHINGS:
        tree = lane_tree_bound(problem, time_limit=3, incumbent=math.ceil(1.1 * optimum), branching=rule)
        assert tree.proven and root - 1e-4 <= tree.value <= optimum + 1e-6
    # the region where every job starts where the optimum starts it holds the optimum: the tree there
    # bounds the optimum too, from no lower than the whole problem's root (fewer lanes)
    assert problem.upper_bound is not None and problem.upper_bound_value == optimum
    _, region = lane_slack.starts_window(problem, lane_slack.schedule_starts(problem))
    fixed = lane_tree_bound(problem, time_limit=5, branching="ends", root_window=region)
    assert fixed.proven and root - 1e-4 <= fixed.root <= fixed.value <= optimum + 1e-6
    assert fixed.value == optimum or fixed.status != "optimal"  # closed only by reaching the optimum
    with pytest.raises(ValueError, match="branching must be one of"):
        lane_tree_bound(problem, time_limit=1, branching="widest")
    two_jobs = Window(region.start_lo[:2], region.start_hi[:2], region.end_lo, region.end_hi)
    with pytest.raises(ValueError, match="root_window must give each"):
        lane_tree_bound(problem, time_limit=1, root_window=two_jobs)


def test_a_tree_whose_root_meets_the_incumbent_is_closed() -> None:
    problem = discretize(one_pair_and_a_loner(), slot=1.0)
    problem = problem.with_upper_bound(warm_start(problem))
    assert problem.upper_bound_value == 40
    tree = lane_tree_bound(problem, time_limit=10)
    assert tree.status == "optimal" and tree.value == 40 and tree.nodes == 1
    # from the serial schedule (a, b, c one after another: 60) the bound is still 40, and the tree
    # does not claim that 60 is optimal
    serial = discretize(one_pair_and_a_loner(), slot=1.0)
    assert serial.upper_bound_value == 60
    worse = lane_tree_bound(serial, time_limit=10)
    assert worse.status != "optimal" and worse.value == pytest.approx(40.0, abs=1e-6)


def test_the_master_time_limit_counts_from_each_solve_not_from_the_first() -> None:
    # HiGHS's time limit is compared with its run time summed over all solves: after enough rounds a
    # limit of "the time left" was already spent, and the master stopped at 0 iterations (50 jobs)
    import highspy

    instance = generate_instance(12, 1, 8, 0)
    problem = discretize(instance, slot=choose_slot(instance, 40))
    problem = problem.with_upper_bound(warm_start(problem))
    data = LaneData.from_problem(problem, problem.horizon)
    master = _Master(data, highspy)
    master.add(lanes_of_solution(problem, data) + single_job_lanes(data))
    solves = 0
    while master.h.getRunTime() < 1.5:  # many solves from scratch: the run time adds up
        master.h.clearSolver()
        assert master.solve(60.0) is not None
        solves += 1
    assert solves >= 3  # so one solve takes at most half a second, well inside the limit below
    master.h.clearSolver()
    assert master.solve(1.0) is not None  # 1 s from now, not 1 s of run time in all


def test_a_master_solve_that_highs_ends_unknown_is_solved_again_from_scratch() -> None:
    # HiGHS's warm-started simplex once ended "unknown" after ~170 rounds on Poisson 24 x 8 (seed 2), which
    # stopped the lane bound there at 1151.5 instead of its optimum 1154.8. That run takes a minute, so
    # the failure is played here by a wrapper around the real HiGHS object that reports "unknown" once
    import highspy

    class UnknownOnce:
        def __init__(self, real: Any) -> None:
            self.real, self.failed, self.cleared = real, False, 0

        def getModelStatus(self) -> Any:
            if not self.failed:
                self.failed = True
                return highspy.HighsModelStatus.kUnknown
            return self.real.getModelStatus()

        def clearSolver(self) -> Any:
            self.cleared += 1
            return self.real.clearSolver()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    instance = generate_instance(8, 1, 4, 0)
    problem = discretize(instance, slot=choose_slot(instance, 40))
    problem = problem.with_upper_bound(warm_start(problem))
    data = LaneData.from_problem(problem, problem.horizon)
    lanes = lanes_of_solution(problem, data) + single_job_lanes(data)
    plain = _Master(data, highspy)
    plain.add(lanes)
    expected = plain.solve(10.0)
    assert expected is not None
    master = _Master(data, highspy)
    master.add(lanes)
    proxy = UnknownOnce(master.h)
    master.h = proxy
    solved = master.solve(10.0)
    assert proxy.failed and proxy.cleared == 1
    assert solved is not None and solved[0] == pytest.approx(expected[0], rel=1e-9)


@pytest.mark.skipif(not lane_kernel.AVAILABLE, reason="numba not installed (pip install 'duetto[fast]')")
@pytest.mark.parametrize(
    ("jobs", "gpus", "seed", "capacity", "modes"),
    [(7, 4, 0, 2, False), (12, 4, 1, 2, False), (9, 4, 2, 1, False), (8, 4, 0, 2, True)],
)
def test_the_compiled_pricing_pass_is_the_numpy_pass(
    jobs: int, gpus: int, seed: int, capacity: int, modes: bool
) -> None:
    # same lanes, same values, same back-pointers in every state a lane can use, bit for bit: the
    # compiled pass may take over at any round of a solve without changing a number. It skips states no
    # lane can reach (longer than the job's max_slots, or never reached), and the nesting and handover
    # work of jobs no partner may share with (every job at capacity 1; in the capacity-2 cases every job
    # has a partner), so only unreachable states may differ. With modes, over the pseudo-jobs (some pairs
    # share only in some of their modes: the handover's hosts differ per partner).
    assert lane_kernel.compile_now()
    instance = generate_instance(jobs, 1, gpus, seed, memory_pressure=0.6, capacity=capacity)
    problem = discretize(instance)
    problem = problem.with_upper_bound(warm_start(problem))
    data = LaneData.from_problem(problem, problem.horizon, modes=modes)
    assert (data.pseudo is not None) == modes
    covers = _every_cover_row(data, largest=2)
    pricer = _LanePricing(data, covers)
    pricer.exclusive = False  # the general pass, also where no pair may share (tests/test_exclusive_lanes.py)
    priced = data.priced
    rng = np.random.default_rng(seed)
    for trial in range(5):
        duals = _random_duals(priced, rng)
        if trial == 4 and capacity > 1:  # the cover rows' share bonuses
            assert len(covers) > 0
            duals = Duals(duals.alpha, duals.beta, duals.eta, rng.uniform(0, 2, len(covers)))
        if trial == 3:  # a branch-and-bound node's windows
            window = data.window()
            window.start_hi[0] = window.start_lo[0] + 1
            pricer.restrict(window)
        pricer.compiled = False
        top_numpy, lanes_numpy = pricer.price(duals, data.n)
        states = [pricer.carry.copy(), pricer.kind.copy(), pricer.back_a.copy(), pricer.back_b.copy()]
        idle_end = pricer.idle_end.copy()
        pricer.compiled = True
        top, lanes = pricer.price(duals, data.n)
        assert top == top_numpy
        assert [lane.key() for lane in lanes] == [lane.key() for lane in lanes_numpy]
        assert np.array_equal(pricer.idle_end, idle_end)
        slots = np.arange(priced.horizon + 1)
        usable = (slots[None, None, :] - slots[None, :, None]) <= priced.max_slots[:, None, None]
        reached = usable & (states[0] > REACHABLE)
        assert reached.sum() > 100  # the comparison below covers real states
        assert np.array_equal(usable & (pricer.carry > REACHABLE), reached)
        for ours, theirs in zip([pricer.carry, pricer.kind, pricer.back_a, pricer.back_b], states, strict=True):
            assert np.array_equal(ours[reached], theirs[reached])


def a_gang_and_a_loner() -> Instance:
    """Two GPUs: a 2-GPU job and a 1-GPU job, 10 s each, that may not share: one after the other."""
    profiles = {name: Profile(name, compute_alpha=1.0, memory_base_gib=1.0) for name in ("a", "b")}
    jobs = (Job("A", 0.0, 2, 10, 1, "a"), Job("B", 0.0, 1, 10, 1, "b"))
    return Instance(Cluster(1, 2, 16.0), jobs, profiles, TableInterference({}))


def a_gang_and_two_loners() -> Instance:
    """Three GPUs: a 2-GPU job and two 1-GPU jobs, 10 s each, that may not share. Any two fit side by
    side, all three do not: two run first, the third after (10 + 10 + 20 = 40)."""
    profiles = {name: Profile(name, compute_alpha=1.0, memory_base_gib=1.0) for name in ("a", "b", "c")}
    jobs = (Job("A", 0.0, 2, 10, 1, "a"), Job("B", 0.0, 1, 10, 1, "b"), Job("C", 0.0, 1, 10, 1, "c"))
    return Instance(Cluster(1, 3, 16.0), jobs, profiles, TableInterference({}))


@pytest.mark.parametrize(
    ("instance", "optimum", "without_rows"), [(a_gang_and_a_loner, 30, 25), (a_gang_and_two_loners, 40, 35)]
)
def test_cover_rows_stop_the_lanes_splitting_a_gang_over_time(
    instance: Callable[[], Instance], optimum: int, without_rows: int
) -> None:
    # without the rows the LP runs the loners in [0, 10) and the gang half on the free lane there, half
    # in [10, 20): 25 (two GPUs) or 35 (three, where no pair is too wide, only the three together)
    problem = discretize(instance(), slot=1.0)
    problem = problem.with_upper_bound(warm_start(problem))
    assert problem.upper_bound_value == optimum
    bound = lane_bound(problem, time_limit=30)
    assert bound.status == "optimal"
    assert bound.value == pytest.approx(optimum, abs=1e-6)
    # the progress pricing takes no such rows: its bound is the weaker one
    assert lane_bound(problem, time_limit=30, pricing="progress").value == pytest.approx(without_rows, abs=1e-6)


def test_the_master_s_lanes_carry_the_start_distributions_and_the_cover_rows_running_columns() -> None:
    # the master has no start or end variables: each job's distributions are its lanes' starts and
    # ends over G_j, each must sum to what is not late, and a cover row's running column R_jt must be
    # the lanes' mass running j at t over G_j (its row says so), whatever the LP point
    import highspy

    problem = discretize(a_gang_and_two_loners(), slot=1.0)
    problem = problem.with_upper_bound(warm_start(problem))
    data = LaneData.from_problem(problem, 25)
    master = _Master(data, highspy)
    master.add(lanes_of_solution(problem, data) + single_job_lanes(data))
    pricer = _LanePricing(data, master.covers)
    outcome = _column_generation(
        master, pricer, deadline=time.perf_counter() + 30, want=3, smoothing=0.8, max_rounds=500
    )
    assert outcome.status == "optimal" and outcome.master_value == pytest.approx(40.0, abs=1e-6)
    assert master.covers is not None and len(master.covers) > 0 and master.running
    values = master.values()
    starts, ends = master.distributions(values)
    assert np.allclose(starts.sum(axis=1), 1.0) and np.allclose(ends.sum(axis=1), 1.0)  # nobody late here
    for (j, t), (_, column) in master.running.items():
        mass = sum(
            values[col]
            for lane, col in zip(master.lanes, master.lane_cols, strict=True)
            for e in lane.entries
            if e.job == j and e.start <= t < e.end
        )
        assert values[column] == pytest.approx(mass / data.num_gpus[j], abs=1e-7)
    # the objective is the ends: Σ_j Σ_E E·z_jE
    assert float(np.sum(ends * np.arange(data.horizon + 1)[None, :])) == pytest.approx(outcome.master_value, abs=1e-6)


def test_the_tree_looks_for_sets_only_where_no_pair_is_too_wide() -> None:
    # three GPUs, no pair too wide: the tree's root takes the rows over the three jobs (40, the optimum);
    # with pairs only it has no row (35)
    problem = discretize(a_gang_and_two_loners(), slot=1.0)
    problem = problem.with_upper_bound(warm_start(problem))
    assert lane_tree_bound(problem, time_limit=10).root == pytest.approx(40.0, abs=1e-6)
    assert lane_tree_bound(problem, time_limit=10, cover_sets=False).root == pytest.approx(35.0, abs=1e-6)


def test_the_separation_finds_the_three_jobs_that_do_not_fit() -> None:
    # the LP point of the three-GPU example without rows: B and C on their lanes, A on the third lane
    # in [0, 10) (half its gang) and nothing else; in each of those slots A, B, C are too wide (4 > 3)
    problem = discretize(a_gang_and_two_loners(), slot=1.0)
    data = LaneData.from_problem(problem.with_upper_bound(warm_start(problem)), 20)
    lanes = [Lane((LaneEntry(1, 0, 10, 10.0),)), Lane((LaneEntry(2, 0, 10, 10.0),)), Lane((LaneEntry(0, 0, 10, 10.0),))]
    found = _CoverRows(data).violated(lanes, np.ones(3))
    assert sorted(found) == [((0, 1, 2), 1, t) for t in range(10)]
    # with A's gang whole ([0, 10) on two lanes) and C after it, nothing is violated: A and B fit
    whole = [
        Lane((LaneEntry(0, 0, 10, 10.0), LaneEntry(2, 10, 20, 10.0))),
        Lane((LaneEntry(0, 0, 10, 10.0),)),
        lanes[0],
    ]
    assert _CoverRows(data).violated(whole, np.ones(3)) == []


def _too_wide_sets(data: LaneData, largest: int) -> list[tuple[int, ...]]:
    """Every set of at most ``largest`` jobs too wide to run side by side."""
    return [
        jobs
        for size in range(2, largest + 1)
        for jobs in itertools.combinations(range(data.n), size)
        if data.num_gpus[list(jobs)].sum() > data.gpus
    ]


def _every_cover_row(data: LaneData, largest: int = 3) -> _CoverRows:
    """Rows for every set of at most ``largest`` jobs too wide to run side by side and every slot,
    registered as a master would (no master needed)."""
    covers = _CoverRows(data)
    for jobs in _too_wide_sets(data, largest):
        for t in range(data.horizon):
            covers.add(jobs, int(data.num_gpus[list(jobs)].sum()) - data.gpus, t, len(covers))
    return covers


@pytest.mark.parametrize("seed", range(3))
def test_real_schedules_satisfy_every_cover_row(seed: int) -> None:
    # the lanes of simulated schedules (gangs of 2 and 4 on 4 GPUs, jobs that share): in every slot,
    # every set of jobs too wide to run side by side that all run has at least e_Q lanes holding two of
    # them (checked for every set, not only those the separation would try), and the separation finds
    # nothing
    instance = generate_instance(10, 1, 4, seed, gpu_demand_weights={1: 0.4, 2: 0.3, 4: 0.3})
    problem = discretize(instance, slot=choose_slot(instance, 60))
    checked = 0
    for policy in ("sjf-bsbf", "fifo"):
        schedule = simulate(instance, policy, slot=problem.slot).schedule
        with_schedule = problem.with_upper_bound(schedule)
        data = LaneData.from_problem(with_schedule, with_schedule.horizon)
        lanes = lanes_of_solution(with_schedule, data)
        assert len(lanes) == 4 and any(len(lane.entries) > 1 for lane in lanes)
        for t in range(data.horizon):
            holding = [{e.job for e in lane.entries if e.start <= t < e.end} for lane in lanes]
            running = sorted(set().union(*holding))
            for size in range(2, len(running) + 1):
                for jobs in itertools.combinations(running, size):
                    width = int(data.num_gpus[list(jobs)].sum()) - data.gpus
                    if width > 0:
                        assert sum(len(held & set(jobs)) == 2 for held in holding) >= width
                        checked += 1
        assert _CoverRows(data).violated(lanes, np.ones(len(lanes))) == []
    assert checked > 0


def _worth(lane: Lane, duals: Duals, covers: _CoverRows) -> float:
    """A lane's dual value with the cover rows' share bonuses."""
    return _value(lane, duals) + sum(duals.nu[r] * v for r, v in covers.coefficients(lane).items())


@pytest.mark.parametrize("seed", range(3))
def test_pricing_with_cover_row_duals_dominates_every_real_lane(seed: int) -> None:
    # two GPUs, a 2-GPU job among three: its pairs and the three together are too wide; every real
    # lane's value with the rows' share bonuses is at most the DP's optimum, and the lane the DP
    # returns is worth exactly that
    instance = generate_instance(
        3, 1, 2, seed, duration_range=(60, 240), memory_pressure=0.0, gpu_demand_weights={1: 0.5, 2: 0.5}
    )
    problem = discretize(instance, slot=60.0)
    problem = problem.with_upper_bound(warm_start(problem))
    data = LaneData.from_problem(problem, min(problem.horizon, 9))
    if not data.num_gpus.max() > 1:
        pytest.skip("this seed drew no 2-GPU job")
    covers = _every_cover_row(data)
    pricing = _LanePricing(data, covers)
    real = _real_lanes(data, list(range(data.n)))
    rng = np.random.default_rng(seed)
    for _ in range(25):
        base = _random_duals(data, rng)
        duals = Duals(base.alpha, base.beta, base.eta, rng.uniform(0, 3, len(covers)) * (rng.random(len(covers)) < 0.5))

        top, lanes = pricing.price(duals, data.n)
        assert top >= max(_worth(lane, duals, covers) for lane in real) - 1e-7
        if lanes:
            assert _worth(lanes[0], duals, covers) == pytest.approx(top, abs=1e-7)


def test_lane_slack_benchmark_orders_its_restricted_lps_below_the_schedule(tmp_path: Path) -> None:
    # the benchmark's smoke version: each restriction can only raise the LP, and with the schedule's own
    # starts and pairs the LP still holds the schedule's lanes, so it stays at or below the schedule
    output = tmp_path / "slack.csv"
    argv = ["--jobs", "8", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "2", "--time-limit", "8"]
    options = ["--lp-time-limit", "30", "--check-seconds", "15", "--gang-repeats", "--tree-seconds", "4"]
    options += ["--check-gang-starts", "--lps", *lane_slack.LP_VALUES]
    code = lane_slack.main([*argv, *options, "--output", str(output)])
    assert code == 0
    frame = pd.read_csv(output)
    assert len(frame) == 2 and set(frame["pricing"]) == {"fast"} and not frame["one_gpu_jobs"].any()
    for _, row in frame.iterrows():
        assert all(row[f"{name}_status"] == "optimal" for name in lane_slack.LP_VALUES)
        tol = 1e-4 * row["schedule_slots"]  # LP optima to HiGHS's and the pricing's tolerances
        # the root's master without the lanes that repeat a gang: fewer columns, so no lower
        assert 0.0 <= row["gang_repeat_share"] <= 1.0 and row["elementary_ceiling"] >= row["root"] - tol
        assert row["root"] <= row["starts_fixed"] + tol and row["root"] <= row["pairs_only"] + tol
        assert row["starts_fixed"] <= row["starts_and_pairs"] + tol
        assert row["pairs_only"] <= row["starts_and_pairs"] + tol
        assert row["starts_and_pairs"] <= row["schedule_slots"] + tol
        assert row["pairs"] <= row["shareable_pairs"]
        # fixing only the gangs' starts restricts less than fixing every start
        assert row["root"] <= row["gang_starts_fixed"] + tol <= row["starts_fixed"] + 2 * tol
        assert row["gang_check"] in ("proven", "better", "open") and row["check"] in ("proven", "better")
        if row["gang_check"] == "proven":  # no better schedule with the gangs' starts, so none with all
            assert row["check"] == "proven"
        if row["gang_check"] != "open":
            assert row["gang_starts_fixed"] <= row["best_given_gang_starts"] + tol
            assert row["best_given_gang_starts"] <= row["best_given_starts"]
        # the tree inside the region of the schedule's starts bounds the best schedule there
        assert row["starts_fixed_tree"] <= row["best_given_starts"] + tol and row["starts_fixed_tree_nodes"] >= 1
        if row["check"] == "proven":
            assert row["best_given_starts"] == row["schedule_slots"]
        else:
            assert row["best_given_starts"] < row["schedule_slots"]
    assert lane_slack.main(["--jobs", "0"]) == 2
    assert lane_slack.main([*argv, "--tree-seconds", "-1"]) == 2  # refused before any solve
    assert lane_slack.main([*argv, "--solver", "nonesuch"]) == 2
    with pytest.raises(SystemExit, match="2"):  # argparse's own exit, its message naming --pricing
        lane_slack.main([*argv, "--pricing", "exact"])
    with pytest.raises(ValueError, match="lps among"):
        lane_slack.measure([8], 4, 4, [0], lps=["roots"])


def test_lane_slack_benchmark_prices_the_same_schedule_both_ways(tmp_path: Path) -> None:
    # one schedule, one check, then the chosen LPs under each pricing: a row per pricing; the DP that
    # checks progress in the lane is a relaxation too, so its restricted LPs stay at or below the schedule
    # (jobs of one GPU each here: the family without gangs)
    output = tmp_path / "pricing.csv"
    argv = ["--jobs", "6", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "1", "--time-limit", "5", "--one-gpu-jobs"]
    options = ["--lp-time-limit", "30", "--check-seconds", "10", "--pricing", "fast", "progress"]
    code = lane_slack.main([*argv, *options, "--lps", "starts_fixed", "starts_and_pairs", "--output", str(output)])
    assert code == 0
    frame = pd.read_csv(output)
    assert list(frame["pricing"]) == ["fast", "progress"] and frame["one_gpu_jobs"].all()
    assert "root" not in frame.columns and "starts_fixed_closes" not in frame.columns
    assert frame["schedule_slots"].nunique() == 1 and frame["check"].nunique() == 1
    for _, row in frame.iterrows():
        assert row["starts_fixed_status"] == "optimal" and row["starts_and_pairs_status"] == "optimal"
        tol = 1e-4 * row["schedule_slots"]
        assert row["starts_fixed"] <= row["starts_and_pairs"] + tol <= row["schedule_slots"] + 2 * tol


def test_lane_bound_refuses_restrictions_naming_unknown_jobs() -> None:
    problem = discretize(generate_instance(5, 1, 4, 0))
    problem = problem.with_upper_bound(warm_start(problem))
    with pytest.raises(ValueError, match="nonesuch"):
        lane_bound(problem, fixed_starts={"nonesuch": 0})
    with pytest.raises(ValueError, match="nonesuch"):
        lane_bound(problem, sharing_pairs=[(problem.jobs[0].id, "nonesuch")])
