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
        sizes = rng.choice([1, 2, 4], count)
        capacity = 4
        fitting = _fitting_sets(sizes, capacity)
        # a point with the capacity row met (as the lanes always meet it), in the hull or not
        point = rng.uniform(0, 1, count)
        point *= min(1.0, capacity / float(sizes @ point))
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
