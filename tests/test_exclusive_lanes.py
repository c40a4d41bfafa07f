"""The lane relaxation with one job per GPU (``C = 1``): its configuration rows (the hull of the sets of
jobs that fit side by side, per slot) are valid for every schedule and cut off what the cover rows
leave, and the bound they give stays below proven optima."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

from formulation import lanes
from formulation.discretize import SlottedProblem, choose_slot, discretize
from formulation.generator import generate_instance
from formulation.lanes import (
    LaneData,
    _CoverRows,
    _knapsack_best,
    _most_violated_configuration,
    lane_bound,
    lanes_of_solution,
)
from formulation.validator import validate
from solvers import SolveStatus, solve
from solvers.warmstart import warm_start


def _fitting_sets(sizes: np.ndarray, capacity: int) -> list[tuple[int, ...]]:
    return [
        chosen
        for r in range(len(sizes) + 1)
        for chosen in itertools.combinations(range(len(sizes)), r)
        if sizes[list(chosen)].sum() <= capacity
    ]


def _random_jobs(rng: np.random.Generator, count: int) -> tuple[np.ndarray, int, list[tuple[int, ...]]]:
    """``count`` jobs of 1, 2 or 4 GPUs on 4 GPUs: their sizes, the capacity and every set that fits."""
    sizes = rng.choice([1, 2, 4], count)
    return sizes, 4, _fitting_sets(sizes, 4)


def _random_point(rng: np.random.Generator, sizes: np.ndarray, capacity: int) -> np.ndarray:
    """A point with the capacity row met (as the lanes always meet it), in the hull or not."""
    point = rng.uniform(0, 1, len(sizes))
    return point * min(1.0, capacity / float(sizes @ point))


def test_the_knapsack_is_exact() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        count = int(rng.integers(1, 8))
        values = rng.uniform(-0.5, 1.0, count)
        sizes = rng.choice([1, 2, 4, 8], count)
        capacity = int(rng.choice([1, 4, 8]))
        top, chosen = _knapsack_best(values, sizes, capacity)
        brute = max(sum(values[j] for j in s if values[j] > 0) for s in _fitting_sets(sizes, capacity))
        assert top == pytest.approx(brute, abs=1e-12)
        assert sizes[chosen].sum() <= capacity
        assert sum(values[j] for j in chosen) == pytest.approx(top, abs=1e-12)


def test_a_configuration_row_holds_for_every_set_that_fits_and_cuts_the_point() -> None:
    import highspy

    rng = np.random.default_rng(1)
    cut_off = 0
    for _ in range(60):
        count = int(rng.integers(3, 7))
        sizes, capacity, fitting = _random_jobs(rng, count)
        point = _random_point(rng, sizes, capacity)
        got = _most_violated_configuration(point, sizes, capacity, highspy)
        # is the point a mix of the fitting sets? (an LP over them, the exact answer)
        matrix = np.array([[1.0 if j in s else 0.0 for s in fitting] for j in range(count)])
        mix = linprog(
            np.zeros(len(fitting)),
            A_eq=np.vstack([matrix, np.ones(len(fitting))]),
            b_eq=np.concatenate([point, [1.0]]),
            bounds=(0, None),
            method="highs",
        )
        if got is None:
            assert mix.status == 0, "a point outside the hull must be cut off"
            continue
        violation, jobs, coefficients, rhs = got
        a = np.zeros(count)
        a[list(jobs)] = coefficients
        assert all(a[list(s)].sum() <= rhs + 1e-9 for s in fitting)
        assert a @ point - rhs == pytest.approx(violation, abs=1e-9) and violation > 1e-6
        assert mix.status != 0  # violated: so outside the hull
        cut_off += 1
    assert cut_off >= 5  # the sample reaches points outside the hull


def test_a_separation_started_from_known_sets_finds_the_same_violation() -> None:
    # the sets a slot's earlier separations priced start the next one there: fewer knapsack rounds,
    # the same hull, so the same violation, and a row that still holds for every set that fits
    import highspy

    rng = np.random.default_rng(2)
    compared = 0
    for _ in range(40):
        count = int(rng.integers(4, 8))
        sizes, capacity, fitting = _random_jobs(rng, count)
        pool: list[tuple[int, ...]] = []
        for _ in range(3):  # the same slot over three rounds: the point moves a little
            point = _random_point(rng, sizes, capacity)
            point[rng.random(count) < 0.2] = 0.0  # jobs not running: the pool's sets are cut to the rest
            before = len(pool)
            fresh = _most_violated_configuration(point, sizes, capacity, highspy)
            seeded = _most_violated_configuration(point, sizes, capacity, highspy, pool)
            assert (fresh is None) == (seeded is None)
            assert all(sizes[list(chosen)].sum() <= capacity for chosen in pool[before:])
            if fresh is None or seeded is None:
                continue
            assert seeded[0] == pytest.approx(fresh[0], abs=1e-7)
            a = np.zeros(count)
            a[list(seeded[1])] = seeded[2]
            assert all(a[list(chosen)].sum() <= seeded[3] + 1e-9 for chosen in fitting)
            compared += before > 0
    assert compared >= 10  # separations that started from earlier sets


def _problem(seed: int) -> SlottedProblem:
    instance = generate_instance(7, 1, 4, seed, capacity=1)
    problem = discretize(instance, slot=choose_slot(instance, 30))
    return problem.with_upper_bound(warm_start(problem))


def test_with_one_job_per_gpu_the_lanes_never_share() -> None:
    problem = _problem(8)
    assert problem.capacity == 1 and problem.sharing_pairs  # pairs would fit in memory: C forbids them
    data = LaneData.from_problem(problem, problem.horizon)
    assert not data.shareable.any() and not data.sigma.any()


@pytest.mark.parametrize("seed", [1, 8])
def test_configuration_rows_raise_the_exclusive_bound_and_it_stays_below_the_optimum(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = _problem(seed)
    with_rows = lane_bound(problem, time_limit=30)
    monkeypatch.setattr(_CoverRows, "configurations_violated", lambda self, *args: [])
    covers_only = lane_bound(problem, time_limit=30)
    monkeypatch.undo()
    assert with_rows.status == covers_only.status == "optimal"
    assert with_rows.value > covers_only.value + 1.0  # both instances have pairs of 4-GPU jobs on 4 GPUs
    exact = solve(problem.instance, "cpsat", time_limit=30, slot=problem.slot, lane_bound=False)
    assert exact.status is SolveStatus.OPTIMAL and exact.schedule is not None
    assert validate(problem.instance, exact.schedule).ok
    optimum = round(exact.objective / problem.slot)  # all jobs at 0: total JCT = Δ·Σ E_j
    assert with_rows.value <= optimum + 1e-6


def test_a_real_exclusive_schedule_violates_no_configuration_row(monkeypatch: pytest.MonkeyPatch) -> None:
    import highspy

    masters: list[lanes._Master] = []
    original = lanes._column_generation

    def keep(master: lanes._Master, *args: Any, **kwargs: Any) -> Any:
        masters.append(master)
        return original(master, *args, **kwargs)

    monkeypatch.setattr(lanes, "_column_generation", keep)
    for seed in (1, 8, 9):
        problem = _problem(seed)
        data = LaneData.from_problem(problem, problem.horizon)
        real = lanes_of_solution(problem, data)
        assert _CoverRows(data).configurations_violated(real, np.ones(len(real)), highspy) == []
        # the rows the LP needed hold at the real schedule's point too
        lane_bound(problem, time_limit=30)
        rows = masters[-1].covers
        assert rows is not None
        general = [row for row in rows.row_list() if len(row) > 3]
        assert general
        run, _ = _CoverRows(data)._slot_points(real, np.ones(len(real)))
        point = run / data.num_gpus[:, None]
        for jobs, _, t, (coefficients, _, rhs) in general:
            assert sum(c * point[j, t] for j, c in zip(jobs, coefficients, strict=True)) <= -rhs + 1e-9


def test_solve_bounds_exclusive_instances_with_the_lanes() -> None:
    instance = generate_instance(7, 1, 4, 8, capacity=1)
    slot = choose_slot(instance, 30)
    optima = {}
    for solver in ("cpsat", "bnp"):
        result = solve(instance, solver, time_limit=20, slot=slot)
        assert result.schedule is not None and validate(instance, result.schedule).ok
        assert result.bound <= result.objective + 1e-6
        assert result.status is SolveStatus.OPTIMAL
        assert "skipped" not in str(result.stats["lane_bound"]["status"])
        optima[solver] = round(result.objective / slot)
    assert optima["cpsat"] == optima["bnp"]


def _random_value(pricer: lanes._LanePricing, rng: np.random.Generator) -> np.ndarray:
    """A pricing's ``value[j, S, E]`` at random duals, as :meth:`_LanePricing.price` builds it."""
    data = pricer.data
    shape = (data.n, data.horizon + 1)
    duals = lanes.Duals(rng.normal(0, 3, shape), rng.normal(0, 3, shape), rng.uniform(0, 2, data.n))
    value = duals.alpha[:, :, None] + duals.beta[:, None, :] + duals.eta[:, None, None] * pricer.length
    return np.where(pricer.valid_run, value, lanes.NEG)


def _best_lanes_by_brute_force(value: np.ndarray, max_slots: np.ndarray, tracked: set[int]) -> np.ndarray:
    """``[j]``: the best lane whose last run is ``j``'s, over every sequence of alone runs in which no
    tracked job runs twice: a search over (free slot, tracked jobs used)."""
    n, horizon = value.shape[0], value.shape[1] - 1
    best = np.full(n, -np.inf)

    def walk(t: int, used: frozenset[int], total: float) -> None:
        for s in range(t, horizon):
            for j in range(n):
                if j in used:
                    continue
                for e in range(s + 1, min(horizon, s + int(max_slots[j])) + 1):
                    if value[j, s, e] <= lanes.REACHABLE:
                        continue
                    here = total + value[j, s, e]
                    best[j] = max(best[j], here)
                    walk(e, used | {j} if j in tracked else used, here)

    walk(0, frozenset(), 0.0)
    return best


def test_the_exclusive_pricing_finds_the_best_lane_with_no_tracked_job_twice() -> None:
    # three jobs on a short horizon: every lane enumerated. With all jobs tracked the pricing's lanes
    # are exactly the real ones (each job at most once); with none tracked, repeats are allowed
    instance = generate_instance(3, 1, 2, 4, capacity=1, duration_range=(60.0, 240.0))
    problem = discretize(instance, slot=60.0)
    problem = problem.with_upper_bound(warm_start(problem))
    data = LaneData.from_problem(problem, problem.horizon)
    pricer = lanes._LanePricing(data)
    assert pricer.exclusive
    assert data.horizon <= 14
    rng = np.random.default_rng(3)
    repeats_paid = 0
    for _ in range(6):
        value = _random_value(pricer, rng)
        every = set(range(data.n))
        for tracked in (sorted(every), []):
            bit = np.full(data.n, -1, dtype=np.int64)
            for b, j in enumerate(tracked):
                bit[j] = b
            ends_value = lanes.lane_kernel.exclusive_forward_numpy(value, bit, len(tracked), data.max_slots)[0]
            brute = _best_lanes_by_brute_force(value, data.max_slots, set(tracked))
            reached = brute > -np.inf
            assert np.array_equal(ends_value > lanes.REACHABLE, reached)
            assert np.allclose(ends_value[reached], brute[reached], atol=1e-9)
            if not tracked:
                elementary = _best_lanes_by_brute_force(value, data.max_slots, every)
                repeats_paid += int(np.any(brute[reached] > elementary[reached] + 1e-9))
    assert repeats_paid > 0  # the duals make some job worth running twice: the tracking is what stops it


@pytest.mark.skipif(not lanes.lane_kernel.AVAILABLE, reason="numba not installed (pip install 'duetto[fast]')")
@pytest.mark.parametrize("seed", [1, 9])
def test_the_compiled_exclusive_pass_is_its_numpy_twin(seed: int) -> None:
    assert lanes.lane_kernel.compile_now() and lanes.lane_kernel.ready()
    problem = _problem(seed)
    data = LaneData.from_problem(problem, problem.horizon)
    pricer = lanes._LanePricing(data)
    assert pricer.exclusive and sorted(pricer.tracked) == [j for j in range(data.n) if data.num_gpus[j] >= 2]
    rng = np.random.default_rng(seed)
    duals_list = []
    for _ in range(4):
        shape = (data.n, data.horizon + 1)
        duals_list.append(lanes.Duals(rng.normal(0, 3, shape), rng.normal(0, 3, shape), rng.uniform(0, 2, data.n)))
    for duals in duals_list:
        pricer.compiled = False
        top_numpy, lanes_numpy = pricer.price(duals, data.n)
        pricer.compiled = True
        top, found = pricer.price(duals, data.n)
        assert top == top_numpy
        assert [lane.key() for lane in found] == [lane.key() for lane in lanes_numpy]
        for lane in found:  # real exclusive lanes: runs one after the other, no tracked job twice
            runs = sorted((e.start, e.end, e.job) for e in lane.entries)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(runs))
            jobs = [e.job for e in lane.entries if e.job in pricer.tracked]
            assert len(jobs) == len(set(jobs))
