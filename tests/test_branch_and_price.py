"""Branch-and-price (``solve(..., "bnp")``): the lane tree with CP-SAT as primal heuristic and leaf
check. Its node regions partition the problem, a leaf check decides a node exactly, and the backend
proves the same optima as ``cpsat`` (the 30-instance cross-check set is in ``test_oracle_crosscheck``)
with every schedule validated and the time limit honoured."""

from __future__ import annotations

import itertools
import math
import os
import sys
import threading
import time

import numpy as np
import pytest

from formulation.discretize import choose_slot, discretize
from formulation.generator import generate_instance
from formulation.io import load_instance
from formulation.lane_tree import _window_split, lane_tree_bound, node_region
from formulation.lanes import LaneData, _Master, default_cut, single_job_lanes
from formulation.paths import shared_data_dir
from formulation.validator import validate
from solvers import SolveStatus, solve
from solvers.api import (
    _RUNNING_RELAXATIONS,
    RELAXATION_YIELD_NICE,
    _Relaxations,
    _stop_relaxations_at_exit,
    _Tracker,
    standalone_leaf_checker,
)
from solvers.warmstart import warm_start


def _small_problem(seed: int = 3, jobs: int = 5):
    instance = generate_instance(jobs, 1, 4, seed, memory_pressure=0.6)
    problem = discretize(instance, slot=choose_slot(instance, 20))
    return instance, problem.with_upper_bound(warm_start(problem))


def _members(region: list[tuple[int, int | None, int, int | None]], problem, job: int) -> set[tuple[int, int]]:
    """The (start, end) pairs of ``job`` inside ``region`` (every slot the model allows)."""
    s_lo, s_hi, e_lo, e_hi = region[job]
    spec = problem.jobs[job]
    return {
        (s, e)
        for s in range(spec.release, spec.latest_end + 1)
        for e in range(spec.release, spec.latest_end + 1)
        if s_lo <= s and (s_hi is None or s <= s_hi) and e_lo <= e and (e_hi is None or e <= e_hi)
    }


@pytest.mark.parametrize("cut_share", [1.0, 0.4])
def test_the_children_of_a_node_partition_its_region(cut_share: float) -> None:
    # with a short cut, jobs may end past it (the lanes' "late" mass): the right-most piece of every
    # split keeps the schedules beyond the lanes' windows
    import highspy

    _, problem = _small_problem()
    data = LaneData.from_problem(problem, max(1, int(cut_share * default_cut(problem))))
    if cut_share < 1.0:
        assert data.can_be_late.any()
    master = _Master(data, highspy, artificial_cost=1e6)
    master.add(single_job_lanes(data))  # so the random LP values below give each job start and end mass
    rng = np.random.default_rng(0)
    window = data.window()
    for step in range(12):
        values = rng.uniform(0.0, 1.0, master.columns)  # any LP values: each choice must partition
        children = _window_split(master, values, window)
        if children is None:  # every window is one slot: nothing left to split
            assert step >= 3
            assert all(window.start_hi - window.start_lo <= 0) and all(window.end_hi - window.end_lo <= 0)
            break
        assert 2 <= len(children) <= 3
        parent = node_region(window, data)
        kids = [node_region(child, data) for child in children]
        # one job's (start, end) set is split into disjoint pieces whose union is the parent's; every
        # other job keeps the parent's set: the children's regions (products over jobs) partition it
        split = [j for j in range(data.n) if len({tuple(kid[j]) for kid in kids}) > 1]
        assert len(split) == 1
        for job in range(data.n):
            whole = _members(parent, problem, job)
            pieces = [_members(kid, problem, job) for kid in kids]
            if job == split[0]:
                assert set().union(*pieces) == whole
                assert all(not (a & b) for a, b in itertools.combinations(pieces, 2))
            else:
                assert all(piece == whole for piece in pieces)
        window = children[int(rng.integers(len(children)))]


def test_a_leaf_check_decides_a_region_exactly() -> None:
    instance, problem = _small_problem(seed=1)
    reference = solve(instance, "cpsat", time_limit=30, slot=problem.slot)
    assert reference.status is SolveStatus.OPTIMAL
    optimum = int(reference.stats["objective_slots"])
    checker = standalone_leaf_checker(instance, problem, 60)
    tracker = checker.tracker
    data = LaneData.from_problem(problem, default_cut(problem))
    root = node_region(data.window(), data)
    try:
        found = checker(root, optimum, 20.0)
        assert found.status == "optimal" and found.value == optimum
        assert tracker.best_model_value == optimum  # its schedule became the incumbent
        assert checker(root, optimum - 1, 20.0).status == "infeasible"  # nothing better exists
        # a region without the optimum's start of the longest job: its optimum is no better
        longest = max(range(problem.num_jobs), key=lambda j: problem.jobs[j].min_slots)
        start = tracker.best[problem.jobs[longest].id].start
        region = list(root)
        _, _, e_lo, e_hi = region[longest]
        region[longest] = (start + 1, None, e_lo, e_hi)
        elsewhere = checker(region, 10 * optimum, 20.0)
        assert elsewhere.status in ("optimal", "infeasible")
        if elsewhere.status == "optimal":
            assert elsewhere.value >= optimum
    finally:
        checker.close()
    assert checker.worker is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's")
def test_the_bound_thread_gives_way_once_the_solvers_own_bound_reaches_its_own() -> None:
    # On 2 cores the tree's thread took a third of the CPU from CP-SAT's two workers, and `bnp` proved
    # 12 jobs on 8 GPUs half as fast as `cpsat` while its tree's bound stayed below CP-SAT's
    _, problem = _small_problem()
    tracker = _Tracker(problem, problem.upper_bound, float(problem.upper_bound_value), 0.0)
    relaxations = _Relaxations(problem, tracker, time.time() + 5, coupled=False, lanes=False)
    relaxations.finish(time.time() + 5)  # nothing to run: its own thread ends at once
    seen: list[tuple[float | None, int]] = []

    def bound_thread() -> None:  # a thread of its own: the priority is lowered for good
        me = threading.get_native_id()
        seen.append((tracker.relaxations_yielded, os.getpriority(os.PRIO_PROCESS, me)))
        relaxations._prove(40.0)
        tracker.offer_solver_bound(39.5)  # the solver's bound still below the thread's: it keeps its share
        relaxations._give_way()
        seen.append((tracker.relaxations_yielded, os.getpriority(os.PRIO_PROCESS, me)))
        tracker.offer_solver_bound(40.0)
        relaxations._give_way()
        seen.append((tracker.relaxations_yielded, os.getpriority(os.PRIO_PROCESS, me)))

    main_priority = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    thread = threading.Thread(target=bound_thread)
    thread.start()
    thread.join()
    (before, base), (still, kept), (yielded, lowered) = seen
    assert before is None and still is None and kept == base
    assert yielded is not None and yielded >= 0
    assert lowered >= max(base, RELAXATION_YIELD_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_priority  # only that thread


def test_branch_and_price_is_anytime_and_honours_the_time_limit() -> None:
    instance = generate_instance(16, 1, 8, 0)
    began = time.perf_counter()
    result = solve(instance, "bnp", time_limit=12)
    took = time.perf_counter() - began
    assert took <= 12 * 1.1 + 2
    assert result.solver == "bnp" and result.schedule is not None
    report = validate(instance, result.schedule)
    assert report.ok, [str(v) for v in report.violations[:3]]
    assert round(report.total_jct(instance), 6) == round(result.objective, 6)
    assert 0 < result.bound <= result.objective + 1e-6
    tree = result.stats["lane_bound"]
    assert tree["status"].startswith(("skipped", "time_limit", "stopped", "not run", "cancelled", "open"))
    assert "leaf_check_seconds" in tree
    # the tree's default: after the coupled LP's share where its root is expected to converge (then skipped
    # if the coupled LP left too little), else first; never skipped from the start
    assert tree["order"] in ("first", "after")
    assert tree["status"] != "skipped: not expected to converge in the time limit"


def test_the_tree_alone_that_stops_before_the_time_limit_says_why_and_not_time_limit() -> None:
    # three jobs per GPU: the lanes do not apply, so branch-and-price without CP-SAT ends at once with the
    # warm start; it used to report "time_limit" with no message after a second of a 20 s limit
    instance = generate_instance(4, 2, 2, 30, memory_pressure=0.8, capacity=3)
    began = time.perf_counter()
    result = solve(instance, "bnp", time_limit=20, options={"primal": False})
    assert time.perf_counter() - began < 15
    assert result.status is SolveStatus.FEASIBLE
    assert "the tree ended (skipped: total JCT with one or two jobs per GPU only)" in result.message
    assert result.schedule is not None and validate(instance, result.schedule).ok
    assert result.bound <= result.objective + 1e-6
    # where the tree runs and closes (it stops once its bound meets the schedule), that is an optimum
    small = generate_instance(4, 1, 4, 11)
    closed = solve(small, "bnp", time_limit=20, options={"primal": False})
    assert closed.schedule is not None and validate(small, closed.schedule).ok
    assert closed.stats["lane_bound"]["status"] == "stopped"
    assert closed.status is SolveStatus.OPTIMAL and closed.bound == closed.objective
    assert closed.message.startswith("proven optimal: the bound meets the schedule")


def test_the_tree_runs_first_where_it_would_not_converge_in_the_time() -> None:
    # 24 jobs in 10 s (more than LANES_FIRST_MIN_SECONDS left after the warm starts): the root is not
    # expected to converge, so the tree runs first rather than not at
    # all (before, it was skipped and the bound was the coupled LP's)
    instance = generate_instance(24, 1, 8, 0)
    result = solve(instance, "bnp", time_limit=10)
    assert result.schedule is not None and validate(instance, result.schedule).ok
    tree = result.stats["lane_bound"]
    assert tree["order"] == "first" and tree["method"] == "branch-and-price"
    assert not tree["status"].startswith("skipped")
    assert tree["bound_slots"] is None or tree["bound_slots"] <= result.stats["objective_slots"] + 1e-6
    after = solve(instance, "bnp", time_limit=10, lane_bound="after")
    assert after.stats["lane_bound"]["status"] == "skipped: not expected to converge in the time limit"
    assert after.schedule is not None and validate(instance, after.schedule).ok


def test_a_tree_still_running_at_the_deadline_keeps_the_bound_it_offered_and_is_stopped() -> None:
    # CI (2 cores) once found the tree's thread still in a round at the hard deadline: its summary then
    # had no bound at all, though the tree had offered its root's. It now keeps the best offered, and
    # the thread is cancelled rather than left running beside the next solve.
    instance = generate_instance(16, 1, 8, 0)
    problem = discretize(instance)
    problem = problem.with_upper_bound(warm_start(problem))
    tracker = _Tracker(problem, problem.upper_bound, float(problem.upper_bound_value), 0.0)
    offered, released = threading.Event(), threading.Event()

    class HeldAfterTheFirstBound(_Relaxations):
        def _offer_tree(self, value: float) -> bool:
            go_on = super()._offer_tree(value)
            offered.set()
            released.wait(60)  # as if the next round were still running at the deadline
            return go_on

    tree = HeldAfterTheFirstBound(
        problem, tracker, time.time() + 60, coupled=False, lanes=True, tree=True, lanes_first=True
    )
    assert offered.wait(60)
    tree.finish(time.time())  # the deadline: the tree has not returned
    assert tree.cancel.is_set() and tree in _RUNNING_RELAXATIONS
    # at interpreter exit such a thread is waited for (briefly) rather than torn down inside HiGHS
    threading.Timer(0.2, released.set).start()
    _stop_relaxations_at_exit()
    assert not tree.thread.is_alive() and tree not in _RUNNING_RELAXATIONS
    summary = tracker.lanes
    assert summary is not None and summary["status"] == "time_limit"
    assert summary["method"] == "branch-and-price" and summary["order"] == "first"
    assert summary["bound_slots"] == tree.tree_offered and math.isfinite(tree.tree_offered)
    assert summary["bound_slots"] <= float(problem.upper_bound_value) + 1e-6
    assert summary["bound_seconds"] == problem.objective_seconds(math.ceil(tree.tree_offered - 1e-6))
    assert tracker.bound == pytest.approx(tree.tree_offered, rel=1e-5)


@pytest.mark.parametrize("name", ["coarse_n8_M4_s2", "coarse_n12_M4_s3"])
def test_branch_and_price_proves_the_coarse_optima(name: str) -> None:
    path = shared_data_dir() / "oracle-coarse" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} not present")
    instance = load_instance(path)
    cpsat = solve(instance, "cpsat", time_limit=30, slot=60.0, units_per_slot=100)
    bnp = solve(instance, "bnp", time_limit=60, slot=60.0, units_per_slot=100)
    assert cpsat.status is SolveStatus.OPTIMAL and bnp.status is SolveStatus.OPTIMAL, bnp.message
    assert math.isclose(cpsat.objective, bnp.objective, abs_tol=1e-6)
    assert bnp.schedule is not None and validate(instance, bnp.schedule).ok


@pytest.mark.slow
def test_branch_and_price_on_every_coarse_instance_slow() -> None:
    folder = shared_data_dir() / "oracle-coarse"
    paths = sorted(folder.glob("coarse_*.json"))
    if not paths:
        pytest.skip(f"{folder} not present")
    for path in paths:
        instance = load_instance(path)
        bnp = solve(instance, "bnp", time_limit=60, slot=60.0, units_per_slot=100)
        cpsat = solve(instance, "cpsat", time_limit=60, slot=60.0, units_per_slot=100)
        assert bnp.schedule is not None and validate(instance, bnp.schedule).ok
        # each one's schedule respects the other's proven bound
        assert bnp.objective >= cpsat.bound - 1e-6 and cpsat.objective >= bnp.bound - 1e-6, path.name
        if bnp.proven_optimal and cpsat.proven_optimal:
            assert math.isclose(bnp.objective, cpsat.objective, abs_tol=1e-6), path.name


def test_the_tree_stops_at_its_pool_limit_with_a_valid_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from formulation import lane_tree

    instance, problem = _small_problem(seed=2, jobs=6)
    free = lane_tree.lane_tree_bound(problem, time_limit=20)
    monkeypatch.setattr(lane_tree, "MAX_POOL_COLUMNS", free.columns // 2)
    capped = lane_tree.lane_tree_bound(problem, time_limit=20)
    assert free.nodes > 1  # the pool grew past half its final size while the tree branched
    assert capped.status == "pool_limit" and capped.columns < free.columns
    # the same search stopped earlier: a valid bound, never above the one the whole search reached
    assert capped.proven and capped.value <= free.value + 1e-9 and capped.nodes < free.nodes
    assert len(instance.jobs) == 6


def test_a_tree_whose_nodes_stop_at_their_round_limit_branches_and_keeps_a_valid_bound() -> None:
    # a node's column generation that stops at node_rounds has just added lanes its last solve never saw;
    # the split read its values by column and failed with an IndexError (found on 8 jobs on 1 x 4 GPUs)
    _, problem = _small_problem(seed=2, jobs=6)
    short = lane_tree_bound(problem, time_limit=4, node_rounds=3)
    assert short.proven and short.nodes > 1  # it branched on nodes cut short
    # a Lagrangian bound at any stop: never above the schedule the problem's windows come from
    assert math.isfinite(short.value) and short.value <= problem.upper_bound_value + 1e-9
