"""Mode-aware lanes (:class:`formulation.lanes.PseudoJobs`): each job in each of its modes a pseudo-job of
the lane DP, one coverage row per job. Every real schedule's lanes are columns, the bound stays below
proven optima and at or above the mode-free lane LP, and ``bnp`` takes them as an option."""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks import lane_slack
from formulation.discretize import SlottedProblem, choose_slot, discretize
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.instance import Instance
from formulation.lane_tree import lane_tree_bound
from formulation.lanes import (
    DEFAULT_MAX_LANE_STATES,
    Duals,
    LaneData,
    PseudoJobs,
    _column_generation,
    _LanePricing,
    _Master,
    expanded_duals,
    lane_bound,
    lane_cut,
    lane_lp_first,
    lane_of_runs,
    lanes_of_solution,
    modal_master,
    mode_conflicts,
    root_master,
    single_job_lanes,
    solution_runs,
)
from formulation.validator import validate
from heuristics.simulator import simulate
from solvers import SolveStatus, solve
from solvers.api import LANE_MODES_DEFAULT, _auto_modes


@functools.cache
def proven(seed: int) -> tuple[Instance, int, SlottedProblem]:
    """7 jobs on 4 GPUs with memory pressure (most jobs have several modes, some pairs fit only in slower
    ones), its CP-SAT-proven optimum (slots) and its slotted problem with the optimal schedule."""
    instance = generate_instance(7, 1, 4, seed, memory_pressure=0.6)
    result = solve(instance, "cpsat", time_limit=30, slot=choose_slot(instance, 40))
    assert result.status is SolveStatus.OPTIMAL
    problem = discretize(instance, slot=result.stats["problem"]["slot_seconds"]).with_upper_bound(result.schedule)
    return instance, int(result.stats["objective_slots"]), problem


def test_pseudo_jobs_are_each_job_in_each_mode_sharing_where_both_modes_fit() -> None:
    instance = generate_instance(7, 1, 4, 0, memory_pressure=0.6)
    problem = discretize(instance, slot=choose_slot(instance, 40))
    data = LaneData.from_problem(problem, problem.horizon, modes=True)
    pseudo = data.pseudo
    assert pseudo is not None
    assert pseudo.data.n == sum(len(job.modes) for job in problem.jobs)
    units = problem.units_per_slot
    fits_only_slower = 0
    for p in range(pseudo.data.n):
        j, m = int(pseudo.owner[p]), int(pseudo.mode[p])
        assert pseudo.of_mode[j][m] == p
        assert pseudo.data.work[p] == pytest.approx(problem.jobs[j].modes[m].work / units)
        assert pseudo.data.min_slots[p] == problem.jobs[j].modes[m].min_slots
        for q in range(pseudo.data.n):
            k, n = int(pseudo.owner[q]), int(pseudo.mode[q])
            both = bool(data.shareable[j, k]) and problem.memory_fits(j, m, k, n) and problem.memory_fits(k, n, j, m)
            assert bool(pseudo.data.shareable[p, q]) == both
            if both:
                assert pseudo.data.sigma[p, q] == pytest.approx(problem.speed[j][k] / units)
        # a pair the mode-free lanes let share which fits only in some slower mode of j
        fits_only_slower += sum(
            1
            for k in range(problem.num_jobs)
            if m == 0 and data.shareable[j, k] and not pseudo.data.shareable[p, pseudo.of_mode[k][0]]
        )
    assert fits_only_slower > 0  # where the modes matter
    # nothing to gain without sharing: the lanes stay mode-free
    exclusive = generate_instance(7, 1, 4, 0, memory_pressure=0.6, capacity=1)
    problem_1 = discretize(exclusive, slot=choose_slot(exclusive, 40))
    assert LaneData.from_problem(problem_1, problem_1.horizon, modes=True).pseudo is None


@pytest.mark.parametrize("policy", ["sjf-bsbf", "fifo"])
def test_every_lane_of_a_real_schedule_in_its_modes_is_a_column(policy: str) -> None:
    # each entry runs in its schedule's mode and progresses at least that mode's work in its own lane
    instance = generate_instance(16, 1, 8, 3, memory_pressure=0.6)
    problem = discretize(instance, slot=choose_slot(instance, 60))
    schedule = simulate(instance, policy, slot=problem.slot).schedule
    assert validate(instance, schedule).ok
    problem = problem.with_upper_bound(schedule)
    data = LaneData.from_problem(problem, problem.horizon, modes=True)
    assert data.pseudo is not None
    lanes = lanes_of_solution(problem, data)
    modes = {problem.index[job_id]: a.mode for job_id, a in problem.upper_bound.items()}
    import highspy

    master = _Master(data, highspy, cover_rows=False)
    assert master.add(lanes) == len({lane.key() for lane in lanes})
    for lane in lanes:
        for e in lane.entries:
            assert e.mode == modes[e.job]
            assert e.progress >= data.priced.work[data.entry_index(e)] - 1e-9
    assert sum(len(lane.entries) for lane in lanes) == sum(job.num_gpus for job in instance.jobs)
    if policy == "sjf-bsbf":  # batch-size scaling: some job shares in a slower mode
        assert any(e.mode > 0 for lane in lanes for e in lane.entries)
    # every job alone in each of its modes that fits in the horizon
    alone = single_job_lanes(data)
    priced = data.priced
    assert {(e.job, e.mode) for lane in alone for e in lane.entries} == {
        (j, m)
        for j, job in enumerate(problem.jobs)
        for m in range(len(job.modes))
        if priced.release[data.pseudo.of_mode[j][m]] <= priced.last_start[data.pseudo.of_mode[j][m]]
    }


def test_the_pricing_returns_lanes_over_jobs_worth_what_it_says() -> None:
    # random duals over the pseudo-jobs: the best lane the DP returns, read back over jobs and modes, is
    # worth the DP's optimum by the master's own valuation
    _, _, problem = proven(0)
    data = LaneData.from_problem(problem, problem.horizon, modes=True)
    import highspy

    master = _Master(data, highspy, cover_rows=False)
    pricing = _LanePricing(data)
    rng = np.random.default_rng(0)
    priced = data.priced
    for _ in range(10):
        shape = (priced.n, priced.horizon + 1)
        duals = Duals(rng.normal(0, 3, shape), rng.normal(0, 3, shape), rng.uniform(0, 2, priced.n))
        top, lanes = pricing.price(duals, priced.n)
        if lanes:
            assert master.lane_value(lanes[0], duals) == pytest.approx(top, abs=1e-7)
            for lane in lanes:
                assert all(0 <= e.job < data.n and e.mode < len(problem.jobs[e.job].modes) for e in lane.entries)


@pytest.mark.parametrize("seed", range(3))
def test_mode_aware_bound_stays_below_the_optimum_and_above_the_mode_free_lp(seed: int) -> None:
    _, optimum, problem = proven(seed)
    free = lane_bound(problem, time_limit=60, cover_sets=False)
    aware = lane_bound(problem, time_limit=60, cover_sets=False, modes=True)
    assert free.status == aware.status == "optimal"
    # a mode-aware lane is a mode-free lane with its progress counted in the job's fastest fitting mode
    assert free.value - 1e-6 * free.value <= aware.value <= optimum + 1e-6
    # the windows' bounds from its duals hold for the optimal schedule: Σ_{k≠j} E_k ≥ others[j]
    ends = {j: end for j, (_, end, _) in solution_runs(problem).items()}
    assert aware.others is not None and len(aware.others) == problem.num_jobs
    for j, others in enumerate(aware.others):
        assert others <= sum(ends.values()) - ends[j] + 1e-6
    # stopped early, the Lagrangian bound is still a bound
    first = lane_bound(problem, max_rounds=1, modes=True)
    assert first.proven and first.value <= optimum + 1e-6
    tree = lane_tree_bound(problem, time_limit=30, modes=True)
    assert tree.proven and aware.value - 1e-6 * aware.value <= tree.value <= optimum + 1e-6


def test_a_schedule_with_a_pair_that_fits_only_in_slower_modes_is_a_column_at_its_cost() -> None:
    # the lane of two jobs sharing in the modes in which they fit: a column whose progress rows hold
    _, _, problem = proven(0)
    data = LaneData.from_problem(problem, problem.horizon, modes=True)
    pseudo = data.pseudo
    assert pseudo is not None
    found = None
    for j in range(data.n):
        for k in range(data.n):
            if j < k and data.num_gpus[j] == data.num_gpus[k] == 1 and data.shareable[j, k]:
                pairs = [
                    (m, n)
                    for m in range(len(problem.jobs[j].modes))
                    for n in range(len(problem.jobs[k].modes))
                    if pseudo.data.shareable[pseudo.of_mode[j][m], pseudo.of_mode[k][n]]
                ]
                if pairs and pairs[0] != (0, 0):
                    found = (j, k, pairs[0])
    if found is None:
        pytest.skip("no one-GPU pair that fits only in slower modes on this instance")
    j, k, (m, n) = found
    p, q = pseudo.of_mode[j][m], pseudo.of_mode[k][n]
    length = int(max(pseudo.data.nested_min[p, q], pseudo.data.nested_min[q, p]))
    start = int(max(data.release[j], data.release[k]))
    lane = lane_of_runs(data, [(j, start, start + length), (k, start, start + length)], {j: m, k: n})
    assert [(e.job, e.mode) for e in lane.entries] == [(j, m), (k, n)]
    for e in lane.entries:
        assert e.progress >= data.priced.work[data.entry_index(e)] - 1e-9


@pytest.mark.parametrize("seed", range(2))
def test_bnp_with_mode_aware_lanes_proves_the_optimum_and_its_schedule_is_valid(seed: int) -> None:
    instance, optimum, problem = proven(seed)
    result = solve(instance, "bnp", time_limit=60, slot=problem.slot, options={"lane_modes": True})
    assert validate(instance, result.schedule).ok
    assert result.status is SolveStatus.OPTIMAL
    assert result.stats["objective_slots"] == optimum
    assert result.bound <= result.objective + 1e-6


def test_lane_modes_option_must_be_one_of_its_values() -> None:
    instance = generate_instance(4, 1, 2, 0)
    with pytest.raises(DuettoInputError) as error:
        solve(instance, "bnp", time_limit=5, options={"lane_modes": "yes"})
    assert "options.lane_modes" in str(error.value) and "true, false, 'selective' or 'auto'" in str(error.value)
    _, _, problem = proven(0)
    with pytest.raises(ValueError, match="pricing='fast'"):
        lane_bound(problem, pricing="progress", modes=True)
    with pytest.raises(ValueError, match="gang_runs"):
        lane_tree_bound(problem, modes=True, gang_paces=True)


@pytest.mark.parametrize("seed", range(2))
def test_the_mode_free_duals_mapped_start_the_mode_aware_bound_at_the_mode_free_one(seed: int) -> None:
    # modal_duals: at the mapped point no mode-aware lane is worth more than its mode-free twin, so the
    # mode-aware Lagrangian there is at least the mode-free bound (and, like every bound, below the optimum)
    _, optimum, problem = proven(seed)
    data = LaneData.from_problem(problem, problem.horizon, modes=True)
    deadline = time.perf_counter() + 60
    _, free = lane_lp_first(problem, replace(data, pseudo=None), window=None, deadline=deadline)
    assert free.status == "optimal" and free.center is not None
    master, pricer, center = modal_master(problem, data, window=None, free_until=deadline)
    assert center is not None and master.data.pseudo is not None
    top, _ = pricer.price(center, 0)
    started = master.lagrangian(center, top)
    assert free.best - 1e-6 * abs(free.best) <= started <= optimum + 1e-6
    # the mode-free lanes in use came over with modes: every overlapping pair shares in modes that fit
    priced = data.priced
    shared = 0
    for lane in master.lanes:
        for a, x in enumerate(lane.entries):
            for y in lane.entries[a + 1 :]:
                if x.job != y.job and min(x.end, y.end) > max(x.start, y.start):
                    assert priced.shareable[data.entry_index(x), data.entry_index(y)]
                    shared += 1
    assert shared > 0


def _multi_mode_jobs(problem: SlottedProblem) -> list[int]:
    return [j for j, job in enumerate(problem.jobs) if len(job.modes) > 1]


def test_collapsed_pseudo_jobs_keep_the_mode_free_rule_and_expanded_ones_their_modes() -> None:
    _, _, problem = proven(0)
    real = LaneData.from_problem(problem, problem.horizon)
    full = PseudoJobs.of(problem, real)
    multi = _multi_mode_jobs(problem)
    chosen = set(multi[: len(multi) // 2])
    mixed = PseudoJobs.of(problem, real, expand=chosen)
    assert full is not None and mixed is not None and len(chosen) >= 2
    assert mixed.data.n == sum(len(job.modes) if j in chosen else 1 for j, job in enumerate(problem.jobs))
    assert PseudoJobs.of(problem, real, expand=()) is None
    assert PseudoJobs.of(problem, real, expand=[j for j in range(problem.num_jobs) if j not in multi]) is None
    units = problem.units_per_slot
    for p in range(mixed.data.n):
        j, m = int(mixed.owner[p]), int(mixed.mode[p])
        collapsed = j in multi and j not in chosen
        assert bool(mixed.collapsed[p]) == collapsed
        if collapsed:  # one pseudo-job for every mode, in the least-work one's units
            assert set(mixed.of_mode[j]) == {p}
            assert problem.jobs[j].modes[m].work == min(mode.work for mode in problem.jobs[j].modes)
            assert mixed.data.min_slots[p] == real.min_slots[j] and mixed.data.max_slots[p] == real.max_slots[j]
        else:
            assert mixed.of_mode[j][m] == p
        for q in range(mixed.data.n):
            k, n = int(mixed.owner[q]), int(mixed.mode[q])
            sigma = mixed.data.sigma[p, q]
            if mixed.collapsed[p] and mixed.collapsed[q]:
                assert sigma == pytest.approx(real.sigma[j, k])
            elif not mixed.collapsed[p] and not mixed.collapsed[q]:
                assert sigma == pytest.approx(full.data.sigma[full.of_mode[j][m], full.of_mode[k][n]])
            elif mixed.collapsed[p] and mixed.data.shareable[p, q]:
                # the fastest of j's modes that fits beside k's one mode, in least-work units
                fitting = [mode.work for i, mode in enumerate(problem.jobs[j].modes) if problem.memory_fits(j, i, k, n)]
                least = min(mode.work for mode in problem.jobs[j].modes)
                assert sigma == pytest.approx(problem.speed[j][k] / units * least / min(fitting))


def test_every_lane_of_a_real_schedule_is_a_column_where_only_some_jobs_are_expanded() -> None:
    # a collapsed job runs in some mode of its schedule's; its lane progress, counted in its least-work
    # mode's units at its fastest fitting speed, is still at least that least work
    instance = generate_instance(16, 1, 8, 3, memory_pressure=0.6)
    problem = discretize(instance, slot=choose_slot(instance, 60))
    schedule = simulate(instance, "sjf-bsbf", slot=problem.slot).schedule
    assert validate(instance, schedule).ok
    problem = problem.with_upper_bound(schedule)
    real = LaneData.from_problem(problem, problem.horizon)
    multi = _multi_mode_jobs(problem)
    slowed = 0
    for chosen in (multi[::2], multi[1::2]):
        pseudo = PseudoJobs.of(problem, real, expand=chosen)
        assert pseudo is not None
        data = replace(real, pseudo=pseudo)
        lanes = lanes_of_solution(problem, data)
        for lane in lanes:
            for e in lane.entries:
                p = data.entry_index(e)
                assert e.progress >= data.priced.work[p] - 1e-9
                slowed += int(bool(pseudo.collapsed[p]) and problem.upper_bound[problem.jobs[e.job].id].mode != e.mode)
    assert slowed > 0  # some collapsed job runs in a slower mode than the one its entry stands for


def test_mode_conflicts_name_the_collapsed_jobs_of_pairs_whose_modes_do_not_fit() -> None:
    _, _, problem = proven(0)
    real = LaneData.from_problem(problem, problem.horizon)
    least = [job.least_work_mode for job in problem.jobs]
    conflicting = fitting = None
    for j in range(real.n):
        for k in range(j + 1, real.n):
            if real.shareable[j, k]:  # the lanes' counting does not look at the jobs' widths
                if problem.memory_fits(j, least[j], k, least[k]):
                    fitting = fitting or (j, k)
                else:
                    conflicting = conflicting or (j, k)
    assert conflicting is not None and fitting is not None
    j, k = conflicting
    start = int(max(real.release[j], real.release[k]))
    lane = lane_of_runs(real, [(j, start, start + 3), (k, start + 1, start + 4)])
    assert mode_conflicts(problem, real, [lane]) == {i for i in (j, k) if len(problem.jobs[i].modes) > 1}
    apart = lane_of_runs(real, [(j, start, start + 3), (k, start + 3, start + 6)])
    assert mode_conflicts(problem, real, [apart]) == set()  # in turn, not side by side
    a, b = fitting
    start = int(max(real.release[a], real.release[b]))
    assert mode_conflicts(problem, real, [lane_of_runs(real, [(a, start, start + 3), (b, start, start + 3)])]) == set()
    # j expanded, in a mode that fits beside k's least-work one: no conflict left
    pseudo = PseudoJobs.of(problem, real, expand={j})
    if pseudo is not None:
        data = replace(real, pseudo=pseudo)
        for m in range(len(problem.jobs[j].modes)):
            if problem.memory_fits(j, m, k, least[k]):
                moded = lane_of_runs(data, [(j, start, start + 3), (k, start, start + 3)], {j: m})
                assert mode_conflicts(problem, data, [moded]) == set()


@pytest.mark.parametrize("seed", [0, 2])
def test_selective_expansion_ends_with_no_lane_in_conflict_and_stays_a_bound(seed: int) -> None:
    # converged, the selectively expanded LP's lanes in use conflict nowhere (each collapsed job shares
    # only where its least-work mode fits); it lies between the mode-free LP and the optimum, as does the
    # tree with it
    _, optimum, problem = proven(seed)
    data = LaneData.from_problem(problem, problem.horizon, modes=True)
    free = lane_bound(problem, time_limit=60, cover_sets=False)
    began = time.perf_counter()
    master, pricer, center = modal_master(
        problem, data, window=None, free_until=began + 60, selective=True, expand_until=began + 120, cover_sets=False
    )
    outcome = _column_generation(
        master, pricer, deadline=began + 180, want=master.data.priced.n, smoothing=0.8, max_rounds=10_000, center=center
    )
    assert outcome.status == "optimal" and free.status == "optimal"
    assert outcome.values is not None
    used = [lane for lane, col in zip(master.lanes, master.lane_cols, strict=True) if outcome.values[col] > 1e-9]
    assert mode_conflicts(problem, master.data, used) == set()
    # at least the mode-free LP it started from (whose cover rows it keeps), at most the optimum
    assert free.value - 1e-6 * free.value <= outcome.best <= optimum + 1e-6
    pseudo = master.data.pseudo
    if pseudo is not None:  # fewer pseudo-jobs than every mode of every job
        assert pseudo.data.n <= data.priced.n
    tree = lane_tree_bound(problem, time_limit=30, modes="selective")
    assert tree.proven and tree.value <= optimum + 1e-6


def test_expanding_more_jobs_maps_the_duals_to_a_bound_at_least_as_high() -> None:
    _, optimum, problem = proven(1)
    real = LaneData.from_problem(problem, problem.horizon)
    multi = _multi_mode_jobs(problem)
    import highspy

    first = replace(real, pseudo=PseudoJobs.of(problem, real, expand=multi[:1]))
    before = root_master(problem, first, highspy)
    pricing = _LanePricing(first, before.covers)
    outcome = _column_generation(
        before, pricing, deadline=time.perf_counter() + 60, want=first.priced.n, smoothing=0.8, max_rounds=10_000
    )
    assert outcome.status == "optimal" and outcome.center is not None
    second = replace(real, pseudo=PseudoJobs.of(problem, real, expand=multi))
    after = root_master(problem, second, highspy)
    if before.covers is not None and after.covers is not None:
        after.add_cover_rows(before.covers.row_list())
    mapped = expanded_duals(before, outcome.center, after)
    top, _ = _LanePricing(second, after.covers).price(mapped, 0)
    assert outcome.best - 1e-6 * abs(outcome.best) <= after.lagrangian(mapped, top) <= optimum + 1e-6


def test_bnp_with_selective_mode_lanes_proves_the_optimum_and_bad_values_are_refused() -> None:
    instance, optimum, problem = proven(2)
    result = solve(instance, "bnp", time_limit=60, slot=problem.slot, options={"lane_modes": "selective"})
    assert validate(instance, result.schedule).ok
    assert result.status is SolveStatus.OPTIMAL and result.stats["objective_slots"] == optimum
    assert result.stats["lane_bound"]["lane_modes"] == "selective"
    with pytest.raises(DuettoInputError) as error:
        solve(instance, "bnp", time_limit=5, options={"lane_modes": "some"})
    assert "options.lane_modes" in str(error.value) and "'selective'" in str(error.value)
    with pytest.raises(ValueError, match="modes must be"):
        lane_tree_bound(problem, modes="some")
    # no expansion fits in the DP's state limit: the tree stays mode-free, and a bound
    cut, _ = lane_cut(problem, None, DEFAULT_MAX_LANE_STATES)
    tight = lane_tree_bound(problem, time_limit=10, modes="selective", max_states=problem.num_jobs * (cut + 1) ** 2)
    roomy = lane_tree_bound(problem, time_limit=10, modes="selective")
    assert not tight.mode_aware and roomy.mode_aware
    assert tight.proven and tight.value <= optimum + 1e-6


def test_auto_lane_modes_are_selective_where_the_lanes_converge_and_mode_free_elsewhere() -> None:
    # the default: where the tree's root is expected to converge (it runs after the coupled LP) and where
    # the lane LP alone is expected to converge, the selective lanes; where the tree runs first, or the
    # lane LP alone is not expected to converge, mode-free
    assert LANE_MODES_DEFAULT == "auto"
    assert _auto_modes("auto", tree=True, lanes_first=False) == "selective"
    assert _auto_modes("auto", tree=True, lanes_first=True, converges=True) is False
    assert _auto_modes("auto", tree=False, lanes_first=True, converges=True) == "selective"
    assert _auto_modes("auto", tree=False, lanes_first=True, converges=False) is False
    assert _auto_modes("auto", tree=False, lanes_first=False) is False
    assert _auto_modes(True, tree=False, lanes_first=True) is True
    assert _auto_modes(False, tree=True, lanes_first=False, converges=True) is False
    instance, optimum, problem = proven(1)
    result = solve(instance, "bnp", time_limit=60, slot=problem.slot)
    assert validate(instance, result.schedule).ok
    assert result.status is SolveStatus.OPTIMAL and result.stats["objective_slots"] == optimum
    lanes = result.stats["lane_bound"]
    assert lanes["order"] == "after" and lanes["lane_modes"] == "selective"
    result = solve(
        instance, "bnp", time_limit=60, slot=problem.slot, options={"lane_modes": "auto"}, lane_bound="first"
    )
    assert validate(instance, result.schedule).ok
    assert result.stats["objective_slots"] == optimum
    assert result.stats["lane_bound"]["order"] == "first" and result.stats["lane_bound"]["lane_modes"] is False
    # the lane LP alone (cpsat), expected to converge in the minute on 7 jobs: selective
    result = solve(instance, "cpsat", time_limit=60, slot=problem.slot)
    assert validate(instance, result.schedule).ok
    assert result.stats["objective_slots"] == optimum
    assert result.stats["lane_bound"]["order"] == "first" and result.stats["lane_bound"]["lane_modes"] == "selective"
    # releases spread in time: CP-SAT is restarted in the lanes' windows, whose mode-free duals come sooner
    spread = generate_instance(7, 1, 4, 1, arrivals="poisson", memory_pressure=0.6)
    result = solve(spread, "cpsat", time_limit=20)
    assert validate(spread, result.schedule).ok
    assert "lane_windows" in result.stats and result.stats["lane_bound"]["lane_modes"] is False


def test_the_lane_lp_with_modes_starts_from_the_mode_free_one_and_never_ends_below_it() -> None:
    # 6 jobs on 8 GPUs with memory pressure: started on its own, the mode-aware master once converged
    # below the mode-free LP (its cover rows are found by a heuristic); from the mode-free root it cannot
    instance = generate_instance(6, 1, 8, 8011, memory_pressure=0.6)
    result = solve(instance, "cpsat", time_limit=30)
    assert result.status is SolveStatus.OPTIMAL and validate(instance, result.schedule).ok
    optimum = int(result.stats["objective_slots"])
    problem = discretize(instance, slot=result.stats["problem"]["slot_seconds"]).with_upper_bound(result.schedule)
    seen: list[float] = []
    free = lane_bound(problem, time_limit=60, on_bound=lambda b: seen.append(b.value) or True)
    assert free.status == "optimal" and not free.mode_aware
    # every improved bound is reported, the converged LP's last (what a solve offers as its bound)
    assert seen == sorted(seen) and seen[-1] == pytest.approx(free.value)
    reported: list[float] = []
    for modes in (True, "selective"):
        reported.clear()
        aware = lane_bound(problem, time_limit=60, modes=modes, on_bound=lambda b: reported.append(b.value) or True)
        assert aware.status == "optimal" and aware.mode_aware
        assert free.value - 1e-6 * free.value <= aware.value <= optimum + 1e-6
        # the mode-free LP's bounds come first, then the mode-aware ones, each above the last, the result's
        # value (the LP's optimum, once converged) last
        assert reported and reported == sorted(reported) and reported[-1] == pytest.approx(aware.value)
        assert reported[0] < free.value - 1e-6  # the first report is the mode-free LP's first round
    # stopped by its caller in the mode-free LP: no mode-aware master, and no call after the stop
    calls: list[float] = []
    stopped = lane_bound(problem, time_limit=60, modes=True, on_bound=lambda b: calls.append(b.value) and False)
    assert stopped.status == "stopped" and not stopped.mode_aware
    assert len(calls) == 1 and stopped.value == calls[0] <= optimum
    with pytest.raises(ValueError, match="modes must be False, True or 'selective'"):
        lane_bound(problem, modes="all")  # type: ignore[arg-type]


def test_lane_slack_with_mode_lanes_orders_each_lp_between_the_mode_free_one_and_the_schedule(
    tmp_path: Path,
) -> None:
    # the benchmark's --mode-lanes: the same restricted LPs with each job held to one mode. Each starts from
    # the mode-free LP, so it is never below it, and it is still a relaxation of the schedules that keep
    # to its restriction, so with the schedule's starts and pairs it stays at or below the schedule
    output = tmp_path / "slack_modes.csv"
    argv = ["--jobs", "6", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "2", "--time-limit", "5"]
    options = ["--lp-time-limit", "30", "--check-seconds", "10", "--mode-lanes", "selective"]
    code = lane_slack.main([*argv, *options, "--lps", "root", "starts_and_pairs", "--output", str(output)])
    assert code == 0
    frame = pd.read_csv(output)
    assert len(frame) == 2
    for _, row in frame.iterrows():
        tol = 1e-4 * row["schedule_slots"]
        for name in ("root", "starts_and_pairs"):
            assert row[f"{name}_status"] == "optimal" and row[f"{name}_modes_status"] == "optimal"
            assert row[f"{name}_modes"] >= row[name] - tol
        assert row["starts_and_pairs_modes"] <= row["schedule_slots"] + tol
        if row["check"] != "open":  # a real schedule's value: the root bounds every schedule
            assert row["root_modes"] <= row["best_given_starts"] + tol
    with pytest.raises(SystemExit, match="2"):  # argparse names --mode-lanes and its choices
        lane_slack.main([*argv, "--mode-lanes", "always"])
