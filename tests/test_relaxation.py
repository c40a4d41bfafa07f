"""The pair-coupled LP bound (formulation.relaxation): valid against proven optima, stronger than the
per-job bounds where a shared GPU must serve both of its jobs, and reported by ``solve``."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest

from formulation import relaxation
from formulation.cluster import Cluster
from formulation.discretize import choose_slot, completion_sum_lower_bound, discretize
from formulation.generator import generate_instance
from formulation.instance import Instance, Job
from formulation.interference import TableInterference
from formulation.relaxation import RelaxationBound, choose_window, pair_coupled_bound, refined_coupled_bound
from formulation.speed import Profile
from solvers import SolveStatus, solve
from solvers.warmstart import warm_start


def one_pair_and_a_loner() -> Instance:
    """One GPU; jobs a and b share at no cost (ξ = 1 both ways), c may share with nobody; 10 s each."""
    profiles = {name: Profile(name, compute_alpha=1.0, memory_base_gib=1.0) for name in ("ab", "c")}
    jobs = (Job("a", 0.0, 1, 10, 1, "ab"), Job("b", 0.0, 1, 10, 1, "ab"), Job("c", 0.0, 1, 10, 1, "c"))
    return Instance(Cluster(1, 1, 16.0), jobs, profiles, TableInterference({("ab", "ab"): 1.0}))


def test_coupled_bound_is_exact_where_the_per_job_bound_is_not() -> None:
    # Optimum: a and b together in [0, 10), then c: 10 + 10 + 20 = 40 slots of 1 s. The per-job bound
    # lets all three jobs' area flow at the best pair's throughput (2 per slot): (5 + 15 + 25)/2 + 15 =
    # 37.5 → 38. The coupled LP knows that c's GPU time serves c alone: 40 up to LP tolerances, so it
    # rounds up to 40 (the objective is a whole number of slots).
    instance = one_pair_and_a_loner()
    problem = discretize(instance, slot=1.0)
    assert completion_sum_lower_bound(problem) == 38
    bound = pair_coupled_bound(problem)
    assert bound.proven and bound.window_slots == 1
    assert 39.5 < bound.value <= 40.0 + 1e-6
    assert math.ceil(bound.value - 1e-6) == 40
    # of the 30 busy GPU-slots (10 per job), a and b spend 10 on one GPU together
    assert bound.shared_fraction == pytest.approx(1 / 3, abs=0.01)
    result = solve(instance, "cpsat", time_limit=20, slot=1.0, lane_bound="after")  # the coupled LP first
    assert result.status is SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(40.0)
    assert result.stats["coupled_bound"]["status"] == "optimal"
    assert result.stats["coupled_bound"]["bound_seconds"] == pytest.approx(40.0)  # 1 s slots, arrivals at 0


@pytest.mark.parametrize("seed", range(3))
def test_coupled_bound_never_exceeds_a_proven_optimum(seed: int) -> None:
    # contended (7 jobs on 4 GPUs, gangs among them, memory forbidding some pairs; about 40 slots so
    # that CP-SAT proves it quickly): the bound of the whole problem (no windows) and of the windowed
    # one reported by solve must both stay below the proven optimum
    instance = generate_instance(7, 1, 4, seed, memory_pressure=0.6)
    result = solve(instance, "cpsat", time_limit=30, slot=choose_slot(instance, 40), lane_bound="after")
    assert result.status is SolveStatus.OPTIMAL
    optimum = result.stats["objective_slots"]
    problem = discretize(instance, slot=result.stats["problem"]["slot_seconds"])
    candidates = (
        pair_coupled_bound(problem),
        pair_coupled_bound(problem, window_slots=3),
        pair_coupled_bound(problem, cut=max(1, problem.horizon // 4)),  # most of it past the cut
        pair_coupled_bound(problem, initial_partners=0, max_rounds=1),  # the Lagrangian bound of round 1
    )
    for candidate in candidates:
        assert candidate.proven
        assert candidate.value <= optimum + 1e-6
    reported = result.stats["coupled_bound"]
    assert reported["status"] == "optimal"
    assert reported["bound_slots"] <= optimum + 1e-6
    assert any(job.num_gpus > 1 for job in instance.jobs)


def test_coupled_bound_raises_the_reported_bound_on_a_contended_instance() -> None:
    # 12 jobs on 8 GPUs with HiGHS: the Pyomo model's LP lets every job share with its own best
    # partner; the coupled LP (solved on a thread while HiGHS runs) gives the larger bound, so the
    # reported gap shrinks
    instance = generate_instance(12, 2, 4, 0)
    slot = choose_slot(instance, 40)
    with_lp = solve(instance, "highs", time_limit=8, slot=slot, lane_bound="after")  # the coupled LP first
    summary = with_lp.stats["coupled_bound"]
    assert summary["status"] == "optimal"
    problem = discretize(instance, slot=slot)
    assert summary["bound_slots"] > completion_sum_lower_bound(problem)
    assert with_lp.stats["bound_slots"] >= math.ceil(summary["bound_slots"] - 1e-5)
    without = solve(instance, "highs", time_limit=8, slot=slot, coupled_bound=False, lane_bound=False)
    assert without.stats["coupled_bound"] is None and without.stats["lane_bound"] is None
    assert with_lp.bound > without.bound
    # the lane relaxation alone (formulation.lanes) raises it too
    lanes_only = solve(instance, "highs", time_limit=8, slot=slot, coupled_bound=False)
    assert lanes_only.stats["coupled_bound"] is None
    assert lanes_only.stats["lane_bound"]["status"] == "optimal"
    assert lanes_only.bound > without.bound


def test_window_width_grows_with_a_smaller_budget() -> None:
    base = discretize(generate_instance(12, 2, 4, 1))
    problem = base.with_upper_bound(warm_start(base))  # windows from a schedule: a shorter horizon
    wide, narrow = choose_window(problem, max_cells=500), choose_window(problem, max_cells=50_000)
    assert wide > narrow >= 1
    coarse = pair_coupled_bound(problem, window_slots=wide)
    assert coarse.proven and coarse.window_slots == wide
    assert coarse.variables < pair_coupled_bound(problem, window_slots=narrow).variables
    # without windows the horizon is the serial schedule's: too large an LP is skipped, not started
    too_large = pair_coupled_bound(base, max_columns=2_000)
    assert too_large.status.startswith("skipped") and "columns" in too_large.status and too_large.seconds == 0.0


def test_coupled_bound_is_skipped_where_it_does_not_apply() -> None:
    instance = one_pair_and_a_loner()
    makespan = pair_coupled_bound(discretize(instance, slot=1.0, objective="makespan"))
    assert makespan.status.startswith("skipped") and not makespan.proven and math.isnan(makespan.value)
    three = Instance(Cluster(1, 1, 16.0, 3), instance.jobs, instance.profiles, TableInterference({("ab", "ab"): 1.0}))
    assert pair_coupled_bound(discretize(three, slot=1.0)).status.startswith("skipped")


def test_a_cancelled_lp_stops_and_says_so() -> None:
    # a solve that is already proven does not wait for the bound: the LP stops at HiGHS' next check
    base = discretize(generate_instance(16, 2, 4, 0))
    problem = base.with_upper_bound(warm_start(base))
    cancel = threading.Event()
    cancel.set()
    outcome = pair_coupled_bound(problem, cancel=cancel)
    assert outcome.status == "cancelled" and not outcome.proven and math.isnan(outcome.value)
    # the same LP, not cancelled, is solved
    assert pair_coupled_bound(problem, max_cells=2000).proven


def test_pricing_reaches_the_lp_with_every_cell() -> None:
    # column generation: starting with no cell and pricing them in ends at the optimum of the LP that
    # has every cell from the start; stopped after one round, the Lagrangian bound is lower but valid
    base = discretize(generate_instance(12, 2, 4, 2))
    problem = base.with_upper_bound(warm_start(base))
    every = pair_coupled_bound(problem, initial_partners=problem.num_jobs)
    priced = pair_coupled_bound(problem, initial_partners=0)
    assert every.status == priced.status == "optimal"
    assert every.rounds == 1 and priced.rounds > 1
    assert priced.value == pytest.approx(every.value, rel=1e-6)
    assert priced.variables < every.variables  # only the cells that can lower the LP entered
    first = pair_coupled_bound(problem, max_rounds=1)  # the cells of each job's 3 best partners
    assert first.status == "rounds" and first.rounds == 1 and first.proven
    assert 0 < first.value < every.value - 1e-3


def test_a_finer_lp_started_from_the_coarser_ones_sharing_pairs_reaches_the_same_optimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = discretize(generate_instance(12, 2, 4, 2))
    problem = base.with_upper_bound(warm_start(base))
    coarse = pair_coupled_bound(problem, window_slots=4)
    assert coarse.status == "optimal" and coarse.active_pairs
    assert coarse.active_pairs <= set(problem.sharing_pairs)
    plain = pair_coupled_bound(problem, window_slots=2)
    seeded = pair_coupled_bound(problem, window_slots=2, initial_pairs=coarse.active_pairs)
    assert plain.status == seeded.status == "optimal"
    assert seeded.value == pytest.approx(plain.value, rel=1e-6)
    # the refinement hands each LP's sharing pairs to the next one
    calls: list[frozenset[tuple[int, int]]] = []
    solve_lp = relaxation.pair_coupled_bound

    def recording(*args: Any, **kwargs: Any) -> RelaxationBound:
        calls.append(kwargs["initial_pairs"])
        outcome = solve_lp(*args, **kwargs)
        results.append(outcome)
        return outcome

    results: list[RelaxationBound] = []
    monkeypatch.setattr(relaxation, "pair_coupled_bound", recording)
    refined_coupled_bound(problem, time_limit=120, max_cells=500)
    assert len(calls) >= 2 and calls[0] == frozenset()
    assert all(calls[n + 1] == results[n].active_pairs for n in range(len(calls) - 1))


def test_a_short_cut_weakens_the_bound_but_keeps_it() -> None:
    base = discretize(generate_instance(12, 2, 4, 2))
    problem = base.with_upper_bound(warm_start(base))
    full = pair_coupled_bound(problem, cut=problem.horizon)
    default = pair_coupled_bound(problem)
    short = pair_coupled_bound(problem, cut=problem.horizon // 8)
    assert full.proven and default.proven and short.proven
    assert short.value <= default.value + 1e-6 <= full.value + 2e-6
    assert default.value >= full.value * 0.995  # the default cut costs next to nothing
    assert short.variables < default.variables < full.variables


def test_refinement_halves_the_windows_while_the_bound_is_wanted() -> None:
    base = discretize(generate_instance(12, 2, 4, 1))
    problem = base.with_upper_bound(warm_start(base))
    seen: list[RelaxationBound] = []

    def keep(outcome: RelaxationBound) -> bool:
        seen.append(outcome)
        return True

    best = refined_coupled_bound(problem, time_limit=120, max_cells=500, on_bound=keep)  # coarse first
    widths = [outcome.window_slots for outcome in seen]
    assert len(seen) >= 2 and widths == sorted(widths, reverse=True) and len(set(widths)) == len(widths)
    assert widths[-1] == 1 and all(outcome.status == "optimal" for outcome in seen)
    assert best.value == max(outcome.value for outcome in seen)
    assert best.value >= seen[0].value
    # a caller that has a better bound of its own stops the refinement after the first LP
    once: list[RelaxationBound] = []
    refined_coupled_bound(
        problem, time_limit=120, max_cells=500, on_bound=lambda outcome: once.append(outcome) is not None
    )
    assert len(once) == 1 and once[0].window_slots == widths[0]


def test_pairs_too_large_to_run_side_by_side_share_whenever_they_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    # two GPUs: a gang of 2 and two one-GPU jobs, ξ = 1.9 everywhere (sharing nearly halves both).
    # Optimum: b and c side by side, then a: 4 + 6 + 16 = 26. Whenever a runs with b or c they share a
    # GPU (2 + 1 > 2 GPUs); with that row the LP is exact, without it a runs fractionally next to them
    # as if it could pick when to pay
    profiles = {name: Profile(name, compute_alpha=1.0, memory_base_gib=1.0) for name in ("big", "small")}
    jobs = (Job("a", 0.0, 2, 10, 1, "big"), Job("b", 0.0, 1, 4, 1, "small"), Job("c", 0.0, 1, 6, 1, "small"))
    table = {(x, y): 1.9 for x in ("big", "small") for y in ("big", "small")}
    instance = Instance(Cluster(1, 2, 16.0), jobs, profiles, TableInterference(table))
    problem = discretize(instance, slot=1.0)
    result = solve(instance, "cpsat", time_limit=20, slot=1.0, coupled_bound=False)
    assert result.status is SolveStatus.OPTIMAL and result.stats["objective_slots"] == 26
    with_rows = pair_coupled_bound(problem)
    assert with_rows.proven and 25.99 < with_rows.value <= 26 + 1e-6
    monkeypatch.setattr("formulation.relaxation._Cells.forced", lambda self, i, k: 0)
    without = pair_coupled_bound(problem)
    assert without.proven and without.value < 25.01


def test_the_summary_keeps_the_bound_of_an_lp_proven_before_the_deadline_cut_the_refinement() -> None:
    from solvers.api import _Relaxations, _Tracker

    base = discretize(generate_instance(12, 2, 4, 1))
    initial = warm_start(base)
    problem = base.with_upper_bound(initial)
    tracker = _Tracker(problem, initial, float(problem.upper_bound_value or math.inf), 0.0)
    offered, released = threading.Event(), threading.Event()

    class HeldAfterTheFirstBound(_Relaxations):
        # the refinement is held right after its first LP, as if the next one were still being solved
        def _offer(self, outcome: RelaxationBound) -> bool:
            go_on = super()._offer(outcome)
            offered.set()
            released.wait(60)
            return go_on

    lp = HeldAfterTheFirstBound(problem, tracker, time.time() + 60, lanes=False)
    assert offered.wait(60)
    lp.finish(time.time())  # the deadline: the refinement has not returned
    released.set()
    lp.cancel.set()
    lp.thread.join(60)
    summary = tracker.relaxation
    assert summary is not None and lp.offered is not None
    assert summary["refining"] is True and summary["status"] == "optimal"
    assert summary["bound_slots"] == lp.offered.value
    assert summary["window_slots"] == lp.offered.window_slots
    assert tracker.bound == pytest.approx(lp.offered.value, rel=1e-5)
    assert summary["bound_seconds"] == problem.objective_seconds(math.ceil(lp.offered.value - 1e-6))
