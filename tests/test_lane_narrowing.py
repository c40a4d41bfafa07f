"""CP-SAT restarted in the windows the lane LP's duals allow, during a solve: the bounds on the others'
ends that the lane bound and the tree's root report (:attr:`formulation.lanes.LaneBound.others`,
``lane_tree_bound(on_root_others=...)``), :func:`formulation.lanes.latest_ends`, and the restart itself
(:class:`solvers.api._Narrowing`; docs/oracle-measurements.md, "Windows from the lane LP's duals")."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import pytest
from test_lane_windows import _counted_ends
from test_run_columns import contended

import solvers.api as api
from formulation.discretize import SlottedProblem, discretize, evaluate
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.lane_tree import lane_tree_bound
from formulation.lanes import LaneBound, LaneData, lane_bound, latest_ends
from formulation.relaxation import RelaxationBound, default_cut, pair_coupled_bound, refined_coupled_bound
from formulation.validator import validate
from solvers import SolveStatus, solve
from solvers.backends import resolve
from solvers.warmstart import warm_start


def _assert_others_hold(problem: SlottedProblem, others: np.ndarray | tuple[float, ...]) -> None:
    """Each bound on ``Σ_{k≠j} E_k`` is at most what the upper-bound schedule has (as the lanes count)."""
    data = LaneData.from_problem(problem, default_cut(problem))
    ends = _counted_ends(problem, data, dict(problem.upper_bound or {}))
    total = sum(ends)
    assert len(others) == problem.num_jobs
    for j in range(problem.num_jobs):
        assert others[j] <= total - ends[j] + 1e-6, j


@pytest.mark.parametrize("seed", [0, 1])
def test_every_lane_bound_reports_bounds_on_the_others_that_hold(seed: int) -> None:
    _, problem = contended(seed)
    reported: list[LaneBound] = []
    final = lane_bound(problem, time_limit=60, on_bound=lambda bound: reported.append(bound) or True)
    assert final.status == "optimal" and final.others is not None
    assert reported and all(bound.others is not None for bound in reported)
    for bound in [*reported, final]:
        assert bound.others is not None
        _assert_others_hold(problem, bound.others)
    # the converged duals bound the others far above the first round's
    assert sum(final.others) > sum(reported[0].others or ())


def test_latest_ends_keep_the_upper_bound_schedule_and_refuse_a_wrong_length() -> None:
    _, problem = contended(2)
    bound = lane_bound(problem, time_limit=60)
    assert bound.others is not None and problem.upper_bound_value is not None
    latest = latest_ends(problem, bound.others, problem.upper_bound_value)
    ends = evaluate(problem, dict(problem.upper_bound or {}), exact=True)
    for j, job in enumerate(problem.jobs):
        assert job.earliest_end <= latest[j] <= job.latest_end
        assert ends[job.id] <= latest[j]
    assert sum(latest) < sum(job.latest_end for job in problem.jobs)
    with pytest.raises(ValueError, match="entries"):
        latest_ends(problem, bound.others[:-1], problem.upper_bound_value)


def test_the_trees_root_reports_bounds_on_the_others_that_hold() -> None:
    _, problem = contended(0)
    seen: list[np.ndarray] = []
    tree = lane_tree_bound(problem, time_limit=30, max_nodes=3, on_root_others=seen.append)
    assert tree.nodes >= 1 and seen
    for others in seen:
        _assert_others_hold(problem, others)
    # not from a region of the problem (its bounds would hold there only)
    fixed: list[np.ndarray] = []
    data = LaneData.from_problem(problem, default_cut(problem))
    lane_tree_bound(problem, time_limit=10, max_nodes=1, root_window=data.window(), on_root_others=fixed.append)
    assert fixed == []


def _poisson_problem(jobs: int, gpus: int, seed: int) -> tuple[object, SlottedProblem]:
    instance = generate_instance(jobs, 1, gpus, seed, arrivals="poisson")
    base = discretize(instance)
    return instance, base.with_upper_bound(warm_start(base))


def test_cpsat_restarted_in_the_lane_windows_proves_the_same_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    instance, problem = _poisson_problem(10, 4, 1)
    assert problem.upper_bound is not None and problem.upper_bound_value is not None
    own = solve(instance, "cpsat", time_limit=60, slot=problem.slot, options={"lane_windows": False})
    assert own.status is SolveStatus.OPTIMAL and own.stats["lane_windows"] is None
    optimum = int(own.stats["objective_slots"])

    bound = lane_bound(problem, time_limit=60)
    assert bound.others is not None
    tracker = api._Tracker(problem, problem.upper_bound, float(problem.upper_bound_value), -math.inf)
    tracker.offer_others(np.asarray(bound.others) - 5.0)  # elementwise the larger: the next offer wins
    tracker.offer_others(bound.others)
    assert tracker.others is not None and np.allclose(tracker.others, bound.others)
    began = time.time()
    payload = api._solver_payload(instance, problem, resolve("cpsat"), deadline=began + 60)
    # any narrowing is due (the share is a hair above 0): the first run is stopped once its model is built
    monkeypatch.setattr(api, "NARROW_SHARE", 1e-9)
    monkeypatch.setattr(api, "NARROW_AFTER_SECONDS", 0.0)
    tracker.narrowing = api._Narrowing(payload, tracker, began, began + 60)
    worker = api._ReusedWorker()
    runs: list[dict] = []

    def run(one: dict, stop: Callable[[], bool]) -> bool:
        runs.append(one)
        return worker.run(one, tracker, began + 90, None, stop)

    try:
        killed = api._run_narrowing(run, payload, tracker, lambda: False)
    finally:
        worker.kill()
    assert not killed and len(runs) == 2 and len(tracker.builds) == 2  # both models were built
    restarts = tracker.narrowing.restarts
    assert len(restarts) == 1 and restarts[0]["window_slack"][1] < restarts[0]["window_slack"][0]
    # the restart solves the same problem from the best schedule, with the caller's hint setting
    assert runs[1]["use_warm_start"] is payload["use_warm_start"] and runs[1]["instance"] == payload["instance"]
    windows = runs[1]["options"]["windows"]
    assert len(windows) == problem.num_jobs and all(w[:3] == (None, None, None) for w in windows)
    # the restart proves the optimum the problem's own windows prove, and the windows hold that optimum
    assert tracker.done is not None and tracker.done[1] == SolveStatus.OPTIMAL.value
    assert tracker.best_model_value == optimum
    ends = evaluate(problem, tracker.best, exact=True)
    assert all(ends[job.id] <= windows[j][3] for j, job in enumerate(problem.jobs))
    # the other solve's optimum keeps to them too (they hold every schedule as good as the upper bound)
    assert own.schedule is not None
    own_ends = evaluate(problem, api._user_warm_start(problem, own.schedule), exact=True)
    assert all(own_ends[job.id] <= windows[j][3] for j, job in enumerate(problem.jobs))


def test_solve_narrows_with_arrivals_only_and_refuses_a_bad_option() -> None:
    spread = generate_instance(8, 1, 4, 0, arrivals="poisson")
    together = generate_instance(8, 1, 4, 0)
    for instance, expect in ((spread, True), (together, False)):
        result = solve(instance, "cpsat", time_limit=20)
        assert result.schedule is not None and validate(instance, result.schedule).ok
        narrowing = result.stats["lane_windows"]
        assert (narrowing is not None) is expect
        if narrowing is not None:
            assert isinstance(narrowing["restarts"], list)
    # branch-and-price runs its tree first there: the root's duals give the windows
    tree = solve(spread, "bnp", time_limit=20)
    assert tree.schedule is not None and validate(spread, tree.schedule).ok
    assert tree.stats["lane_windows"] is not None and tree.stats["lane_bound"]["order"] == "first"
    off = solve(spread, "cpsat", time_limit=20, options={"lane_windows": False})
    assert off.stats["lane_windows"] is None and off.schedule is not None and validate(spread, off.schedule).ok
    with pytest.raises(DuettoInputError, match="lane_windows"):
        solve(spread, "cpsat", time_limit=20, options={"lane_windows": "yes"})


def test_a_solve_restarted_in_the_lane_windows_keeps_a_valid_schedule_and_its_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # any narrowing is due at once: restarts as soon as the lanes' first duals come
    monkeypatch.setattr(api, "NARROW_SHARE", 1e-9)
    monkeypatch.setattr(api, "NARROW_AFTER_SECONDS", 0.0)
    # 20 jobs with arrivals on 8 GPUs, not proven in the time: restarted 4 s in (measured), the time is 30 s
    instance = generate_instance(20, 1, 8, 2, arrivals="poisson")
    result = solve(instance, "cpsat", time_limit=30)
    assert result.schedule is not None and validate(instance, result.schedule).ok
    assert result.bound <= result.objective + 1e-6
    restarts = result.stats["lane_windows"]["restarts"]
    assert 1 <= len(restarts) <= api.MAX_NARROW_RESTARTS
    for restart in restarts:
        assert restart["window_slack"][1] < restart["window_slack"][0]
        assert restart["seconds"] <= 30 - api.NARROW_MIN_SECONDS
        assert restart["upper_bound_slots"] >= result.stats["objective_slots"]  # the best only improves
    # every model's build counts, and build and solve add up to the wall time
    wall = result.stats["wall_seconds"]
    assert result.build_seconds + result.solve_seconds == pytest.approx(wall, abs=0.05)


def _others_hold_for(problem: SlottedProblem, others: tuple[float, ...], solution: dict) -> None:
    """Each bound on ``Σ_{k≠j} E_k`` is at most what ``solution`` (a schedule in the problem's windows) has."""
    ends = evaluate(problem, solution, exact=True)
    total = sum(ends[job.id] for job in problem.jobs)
    for j, job in enumerate(problem.jobs):
        assert others[j] <= total - ends[job.id] + 1e-6, (j, others[j], total - ends[job.id])


@pytest.mark.parametrize("seed", [0, 1])
def test_the_coupled_lp_bounds_the_others_after_one_round_and_converged(seed: int) -> None:
    _, problem = contended(seed)  # the proven optimum is the upper bound
    assert pair_coupled_bound(problem).others is None  # only when asked for
    first = pair_coupled_bound(problem, others=True, initial_partners=0, max_rounds=1)  # missing cells boxed
    converged = pair_coupled_bound(problem, others=True, window_slots=1)
    assert first.others is not None and converged.status == "optimal" and converged.others is not None
    for outcome in (first, converged):
        assert outcome.others is not None
        _others_hold_for(problem, outcome.others, dict(problem.upper_bound or {}))
    # and they narrow: some job's latest end moves in from its window's
    assert problem.upper_bound_value is not None
    latest = latest_ends(problem, converged.others, problem.upper_bound_value)
    assert any(end < job.latest_end for end, job in zip(latest, problem.jobs, strict=True))


def test_the_coupled_lps_bounds_on_the_others_hold_for_every_schedule_in_the_windows() -> None:
    # windows from a greedy upper bound; the optimum and the warm start both lie in them
    instance, problem = _poisson_problem(10, 4, 1)
    optimum = solve(instance, "cpsat", time_limit=60, slot=problem.slot, options={"lane_windows": False})
    assert optimum.status is SolveStatus.OPTIMAL and optimum.schedule is not None
    outcome = refined_coupled_bound(problem, time_limit=60, others=True)
    assert outcome.others is not None
    for solution in (dict(problem.upper_bound or {}), api._user_warm_start(problem, optimum.schedule)):
        _others_hold_for(problem, outcome.others, solution)
    # the bound on the others of j is at most the optimum less j's end there: a check that can bind
    ends = evaluate(problem, api._user_warm_start(problem, optimum.schedule), exact=True)
    value = int(optimum.stats["objective_slots"])
    slack = [value - ends[job.id] - outcome.others[j] for j, job in enumerate(problem.jobs)]
    assert min(slack) >= -1e-6 and min(slack) < 0.25 * value


def test_a_refinement_started_from_a_solved_level_goes_on_from_the_next_width() -> None:
    _, problem = contended(2)
    coarse = pair_coupled_bound(problem, window_slots=4)
    finer = refined_coupled_bound(problem, time_limit=60, start=coarse)
    assert finer.proven and finer.window_slots < coarse.window_slots and finer.value >= coarse.value - 1e-6
    # a level stopped before its optimum is solved again from the first width, and stays if it is the best
    stopped = RelaxationBound(coarse.value - 5.0, "time_limit", coarse.window_slots)
    again = refined_coupled_bound(problem, time_limit=60, start=stopped)
    assert again is not stopped and again.status == "optimal" and again.value >= coarse.value - 1e-6
    higher = RelaxationBound(coarse.value + 1000.0, "time_limit", coarse.window_slots)  # nothing beats it
    kept = refined_coupled_bound(problem, time_limit=60, start=higher)
    assert (kept.value, kept.status) == (higher.value, "time_limit")


def test_cpsat_starts_in_the_coupled_lps_windows_also_where_the_lanes_are_off() -> None:
    # the coupled LP's first level, before CP-SAT starts, gives its first model narrower windows
    instance = generate_instance(16, 1, 8, 2, arrivals="poisson")
    for lanes in (True, False):
        result = solve(instance, "cpsat", time_limit=20, lane_bound=lanes)
        assert result.schedule is not None and validate(instance, result.schedule).ok
        assert result.bound <= result.objective + 1e-6
        assert result.stats["coupled_bound"]["bound_slots"] is not None
        narrowing = result.stats["lane_windows"]
        assert narrowing is not None
        problem_slack, first_slack = narrowing["first_model_slack"]
        assert first_slack is not None and first_slack < problem_slack
        assert (result.stats["lane_bound"] is None) is not lanes
    # all jobs at 0: no narrowing, and CP-SAT starts in the problem's own windows
    together = solve(generate_instance(8, 1, 4, 0), "cpsat", time_limit=10)
    assert together.stats["lane_windows"] is None
