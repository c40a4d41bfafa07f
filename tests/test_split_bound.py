"""The arrival-split bound (:mod:`solvers.split`): the sum of exact solves of groups of consecutive
arrivals never exceeds the proven optimum, its planner and partition search are exact against brute
force, and branch-and-price uses it (with its bound, its schedule validated and the time limit kept)."""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import replace

import numpy as np
import pytest

from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.instance import Instance
from formulation.validator import validate
from solvers import Progress, SolveStatus, solve, solve_many
from solvers.split import (
    PartOutcome,
    _best_cuts,
    arrival_order,
    best_partition,
    cut_overlaps,
    group_instance,
    plan_partitions,
    split_applies,
    split_bound,
)


def _partitions(n: int, max_part: int, parts: int) -> list[tuple[int, ...]]:
    """Every cut set of ``0..n-1`` into exactly ``parts`` runs of at most ``max_part`` jobs."""
    found = []
    for cuts in itertools.combinations(range(1, n), parts - 1):
        bounds = (0, *cuts, n)
        if all(1 <= bounds[i + 1] - bounds[i] <= max_part for i in range(parts)):
            found.append(cuts)
    return found


@pytest.mark.parametrize("n,max_part", [(7, 3), (10, 4), (9, 9), (12, 5)])
def test_the_planner_starts_at_the_cheapest_partition_and_never_repeats(n: int, max_part: int) -> None:
    rng = np.random.default_rng(n * 31 + max_part)
    overlaps = [0.0, *rng.uniform(0, 100, n - 1).round(3)]
    parts = max(2, math.ceil(n / max_part))
    every = _partitions(n, max_part, parts)
    cheapest = min(sum(overlaps[k] for k in cuts) for cuts in every)
    plans = list(plan_partitions(overlaps, max_part, limit=6))
    assert plans and math.isclose(sum(overlaps[k] for k in plans[0]), cheapest)
    assert len(set(plans)) == len(plans) == min(6, len(every))
    assert all(cuts in every for cuts in plans)


def test_no_partition_when_the_groups_cannot_cover_the_jobs() -> None:
    assert _best_cuts(10, 2, 4, lambda k: 0.0) is None
    assert _best_cuts(8, 2, 4, lambda k: 0.0) == (4,)


def test_best_partition_is_the_longest_path_over_the_solved_groups() -> None:
    rng = np.random.default_rng(5)
    n = 7
    for _ in range(30):
        solved = {}
        for first in range(n):
            for stop in range(first + 1, n + 1):
                if rng.random() < 0.4:
                    solved[(first, stop)] = PartOutcome("optimal", int(rng.integers(0, 50)), 0, 0.0)
        value, groups = best_partition(n, solved)
        brute = -1
        for size in range(1, n + 1):
            for cuts in itertools.combinations(range(1, n), size - 1):
                bounds = (0, *cuts, n)
                pieces = [(bounds[i], bounds[i + 1]) for i in range(size)]
                if all(piece in solved for piece in pieces):
                    brute = max(brute, sum(solved[piece].bound_slots for piece in pieces))
        assert value == brute
        if value >= 0:
            assert groups[0][0] == 0 and groups[-1][1] == n
            assert all(a[1] == b[0] for a, b in itertools.pairwise(groups))
            assert sum(solved[group].bound_slots for group in groups) == value


def test_cut_overlaps_count_the_gpu_seconds_still_running_after_the_next_arrival() -> None:
    instance = generate_instance(3, 1, 4, 0, arrivals="poisson")
    order = arrival_order(instance)
    a, b, c = order
    start = {a.id: a.arrival, b.id: b.arrival + 5.0, c.id: c.arrival}
    completion = {a.id: c.arrival + 7.0, b.id: c.arrival + 2.0, c.id: c.arrival + 50.0}
    overlaps = cut_overlaps(order, start, completion)
    assert overlaps[1] == pytest.approx(a.num_gpus * (completion[a.id] - b.arrival))
    assert overlaps[2] == pytest.approx(a.num_gpus * 7.0 + b.num_gpus * 2.0)


def test_the_split_applies_only_to_spread_arrivals() -> None:
    assert not split_applies(generate_instance(8, 1, 4, 1))
    assert split_applies(generate_instance(8, 1, 4, 1, arrivals="poisson"))


def _two_bursts(seed: int, jobs: int) -> Instance:
    """Two bursts of ``jobs`` jobs each (all at 0 within a burst); the second arrives once the first
    could have run one job after the other, so a schedule drains between them."""
    first = generate_instance(jobs, 1, 4, seed)
    later = sum(first.isolated_duration(job) for job in first.jobs) + 600.0
    second = generate_instance(jobs, 1, 4, seed + 100)
    moved = tuple(replace(job, id=f"b{job.id}", arrival=later, profile=f"b{job.profile}") for job in second.jobs)
    profiles = {f"b{name}": replace(profile, name=f"b{name}") for name, profile in second.profiles.items()}
    return replace(first, jobs=first.jobs + moved, profiles={**first.profiles, **profiles}, name="bursts")


def _group_solver(slot: float, units: int):  # type: ignore[no-untyped-def]
    def solve_group(group: Instance, seconds: float) -> PartOutcome:
        result = solve(group, "cpsat", time_limit=max(seconds, 30.0), slot=slot, units_per_slot=units)
        assert result.schedule is not None and validate(group, result.schedule).ok
        return PartOutcome(
            result.status.value, int(result.stats["bound_slots"]), int(result.stats["objective_slots"]), 0.0
        )

    return solve_group


@pytest.mark.parametrize("seed", [0, 3])
def test_every_split_bound_stays_below_the_proven_optimum(seed: int) -> None:
    """For every cut of a high-load Poisson instance, the two groups' proven optima add up to at most
    the whole instance's proven optimum (the theorem the bound rests on), at the same slot length."""
    instance = generate_instance(8, 1, 4, seed, arrivals="poisson", load=2.0, memory_pressure=0.6)
    whole = solve(instance, "cpsat", time_limit=60, units_per_slot=1000)
    assert whole.status is SolveStatus.OPTIMAL and whole.schedule is not None
    assert validate(instance, whole.schedule).ok
    slot, optimum = whole.schedule.slot, int(whole.stats["objective_slots"])  # type: ignore[union-attr]
    order = arrival_order(instance)
    groups = [group_instance(instance, order, 0, k) for k in range(1, 8)]
    groups += [group_instance(instance, order, k, 8) for k in range(1, 8)]
    results = solve_many(groups, "cpsat", time_limit=60, slot=slot, units_per_slot=1000)
    assert all(result.status is SolveStatus.OPTIMAL for result in results)
    assert all(
        result.schedule is not None and validate(group, result.schedule).ok
        for group, result in zip(groups, results, strict=True)
    )
    values = [int(result.stats["objective_slots"]) for result in results]
    sums = [values[k - 1] + values[7 + k - 1] for k in range(1, 8)]
    assert max(sums) <= optimum
    # sharing and queueing across the cut are what a split misses: not every cut is exact here
    assert min(sums) < optimum


def test_the_split_of_two_separate_bursts_is_exact() -> None:
    instance = _two_bursts(seed=2, jobs=5)
    whole = solve(instance, "cpsat", time_limit=60, units_per_slot=1000)
    assert whole.status is SolveStatus.OPTIMAL and whole.schedule is not None
    report = validate(instance, whole.schedule)
    assert report.ok
    found = split_bound(
        instance,
        report.start,
        report.completion,
        _group_solver(whole.schedule.slot or 0.0, 1000),  # type: ignore[arg-type]
        time.time() + 120,
        max_part=5,
    )
    assert found is not None
    assert [(part.first, part.stop) for part in found.parts] == [(0, 5), (5, 10)]
    assert found.value_slots == int(whole.stats["objective_slots"])
    assert found.overlap_fraction == 0.0


def test_branch_and_price_adds_the_split_bound_on_arrivals() -> None:
    instance = generate_instance(24, 1, 8, 2, arrivals="poisson")
    limit = 24.0
    began = time.perf_counter()
    seen: list[Progress] = []
    result = solve(instance, "bnp", time_limit=limit, progress=seen.append, options={"split": True})
    assert time.perf_counter() - began <= limit * 1.1 + 2
    # one clock across the whole solve, the split and the resumed solve; the bound only rises
    assert all(a.elapsed <= b.elapsed + 1e-6 for a, b in itertools.pairwise(seen))
    bounds = [state.bound for state in seen if math.isfinite(state.bound)]
    assert all(a <= b + 1e-6 for a, b in itertools.pairwise(bounds))
    assert result.schedule is not None
    report = validate(instance, result.schedule)
    assert report.ok, [str(v) for v in report.violations[:3]]
    assert round(report.total_jct(instance), 6) == round(result.objective, 6)
    split = result.stats["split_bound"]
    if split.get("status", "").startswith("not run"):  # proven in the first step's 12 s (measured: 30-50 s)
        assert result.status is SolveStatus.OPTIMAL, split
        return
    assert split["whole_bound_slots"] <= result.stats["bound_slots"]
    if "groups" in split:  # a partition was solved in the time (groups of 16 and 8 take seconds)
        assert sum(group["jobs"] for group in split["groups"]) == 24
        assert sum(group["bound_slots"] for group in split["groups"]) == split["bound_slots"]
        assert split["bound_slots"] <= result.stats["bound_slots"]
        assert any(state.phase == "split bound" for state in seen)
    assert 0 < result.bound <= result.objective + 1e-6


def test_the_split_is_asked_for_and_bad_options_are_named() -> None:
    instance = generate_instance(6, 1, 4, 1, arrivals="poisson")
    result = solve(instance, "bnp", time_limit=20)
    assert "split_bound" not in result.stats and result.status is SolveStatus.OPTIMAL
    assert result.schedule is not None and validate(instance, result.schedule).ok
    asked = solve(instance, "bnp", time_limit=20, options={"split": True})
    # proven by the whole instance's first step, so the split says why it did not run
    assert asked.status is SolveStatus.OPTIMAL and asked.stats["split_bound"]["status"].startswith("not run")
    assert math.isclose(asked.objective, result.objective)
    with pytest.raises(DuettoInputError) as error:
        solve(instance, "bnp", time_limit=20, options={"split_max_part": 0})
    assert error.value.field == "options.split_max_part"
    with pytest.raises(DuettoInputError) as error:
        solve(instance, "bnp", time_limit=20, options={"split": "yes"})
    assert error.value.field == "options.split"


def test_the_planner_past_enumeration_still_starts_at_the_cheapest(monkeypatch: pytest.MonkeyPatch) -> None:
    import solvers.split as split_module

    monkeypatch.setattr(split_module, "ENUMERATE_PARTITIONS", 3)
    rng = np.random.default_rng(11)
    overlaps = [0.0, *rng.uniform(0, 100, 13).round(3)]
    every = _partitions(14, 4, 4)
    plans = list(plan_partitions(overlaps, 4, limit=4))
    assert len(every) > 3 and plans and all(cuts in every for cuts in plans)
    assert math.isclose(sum(overlaps[k] for k in plans[0]), min(sum(overlaps[k] for k in c) for c in every))
    assert len(set(plans)) == len(plans)
