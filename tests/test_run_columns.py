"""The per-job run relaxation (a diagnostic): its pricing covers every real run, its columns are real
runs worth what the pricing says, and its bound stays below proven optima and orders by window width."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import highspy
import numpy as np
import pandas as pd
import pytest

from benchmarks import bound_comparison
from formulation.discretize import SlottedProblem, choose_slot, discretize
from formulation.generator import generate_instance
from formulation.relaxation import default_cut
from formulation.run_columns import RunColumn, _Duals, _RunModel, run_bound
from solvers import SolveStatus, solve
from solvers.warmstart import warm_start


@functools.cache
def contended(seed: int) -> tuple[int, SlottedProblem]:
    """7 jobs with gangs on 4 GPUs (about 40 slots), its proven optimum (slots) and its slotted problem
    with the optimal schedule as upper bound."""
    instance = generate_instance(7, 1, 4, seed, memory_pressure=0.6)
    result = solve(instance, "cpsat", time_limit=30, slot=choose_slot(instance, 40))
    assert result.status is SolveStatus.OPTIMAL
    problem = discretize(instance, slot=result.stats["problem"]["slot_seconds"]).with_upper_bound(result.schedule)
    return int(result.stats["objective_slots"]), problem


def _random_duals(model: _RunModel, rng: np.random.Generator) -> _Duals:
    n = model.n
    return _Duals(
        gpu=rng.uniform(0, 1, model.horizon),
        credit=rng.uniform(0, 1, model.windows),
        claim=rng.uniform(0, 1, (n, n, model.windows)) * (rng.uniform(size=(n, n, model.windows)) < 0.6),
        convexity=rng.normal(0, 3, n),
        wide=rng.uniform(0, 1, len(model.wide)),
    )


def _value(model: _RunModel, column: RunColumn, duals: _Duals) -> float:
    """What the pricing minimises: ``E + Σ slot costs − Σ claims``."""
    return model.reduced_cost(column, duals) + float(duals.convexity[column.job])


def _grid_progress(model: _RunModel, column: RunColumn) -> int:
    """The column's progress on the grid: per slot ``ceil(grid · min σ)`` over its partners there."""
    rates = {t: 1.0 for t in range(column.start, column.end)}
    for k, t, _ in column.shares:
        rates[t] = min(rates[t], float(model.data.sigma[column.job, k]))
    return sum(math.ceil(model.grid * rate - 1e-9) for rate in rates.values())


def _real_runs(model: _RunModel, j: int) -> list[RunColumn]:
    """Every run of one-GPU job ``j``: each start, and in each slot alone or next to one partner that may
    run then, until its gridded progress is complete (a brute force)."""
    data = model.data
    runs: list[RunColumn] = []

    def extend(start: int, t: int, left: int, shares: tuple[tuple[int, int, int], ...]) -> None:
        if left <= 0:
            runs.append(RunColumn(j, start, t, shares))
            return
        if t >= model.stop[j]:
            return
        extend(start, t + 1, left - model.grid, shares)
        for k in range(model.n):
            if data.shareable[j, k] and model.available[k, t]:
                step = math.ceil(model.grid * float(data.sigma[j, k]) - 1e-9)
                extend(start, t + 1, left - step, (*shares, (k, t, 1)))

    for start in range(int(data.release[j]), int(model.stop[j])):
        extend(start, start, int(model.need[j]), ())
    return runs


@pytest.mark.parametrize("seed", range(3))
def test_pricing_dominates_every_real_run_and_its_runs_are_worth_what_it_says(seed: int) -> None:
    # three one-GPU jobs of a few slots on one GPU: every real run, enumerated, is worth no less than
    # the DP's minimum; the run it returns is a real run worth exactly that
    instance = generate_instance(3, 1, 1, seed, gpu_demand_weights={1: 1.0})
    problem = discretize(instance, slot=choose_slot(instance, 10))
    problem = problem.with_upper_bound(warm_start(problem))
    model = _RunModel(problem, problem.horizon, 2, 4, highspy)
    rng = np.random.default_rng(seed)
    for _ in range(20):
        duals = _random_duals(model, rng)
        best, columns = model.price(duals, 1)
        for j in range(model.n):
            runs = _real_runs(model, j)
            assert runs, "every job has a run"
            cheapest = min(_value(model, run, duals) for run in runs)
            assert best[j] <= cheapest + 1e-9
            mine = [column for column in columns if column.job == j]
            assert len(mine) == 1
            assert _value(model, mine[0], duals) == pytest.approx(best[j], abs=1e-9)
            assert _grid_progress(model, mine[0]) >= model.need[j]
            assert best[j] == pytest.approx(cheapest, abs=1e-9)  # the DP's run is one of them


@pytest.mark.parametrize("seed", range(2))
def test_priced_gang_runs_use_their_gpus_and_complete(seed: int) -> None:
    _, problem = contended(seed)
    model = _RunModel(problem, default_cut(problem), 2, 4, highspy)
    data = model.data
    rng = np.random.default_rng(seed)
    for _ in range(5):
        duals = _random_duals(model, rng)
        best, columns = model.price(duals, 2)
        assert columns
        for column in columns:
            j = column.job
            assert _grid_progress(model, column) >= model.need[j]
            assert _value(model, column, duals) >= best[j] - 1e-9
            per_slot: dict[int, int] = {}
            for k, t, taken in column.shares:
                assert column.start <= t < column.end and model.available[k, t] and data.shareable[j, k]
                assert 1 <= taken <= min(data.num_gpus[j], data.num_gpus[k])
                per_slot[t] = per_slot.get(t, 0) + taken
            assert all(used <= data.num_gpus[j] for used in per_slot.values())  # one partner per GPU
    assert any(data.num_gpus[j] > 1 for j in range(model.n))


@pytest.mark.parametrize("seed", range(2))
def test_run_bound_stays_below_the_optimum_and_wider_windows_relax_it(seed: int) -> None:
    optimum, problem = contended(seed)
    fine = run_bound(problem, width=2, time_limit=60)
    coarse = run_bound(problem, width=4, time_limit=60)
    assert fine.status == "optimal" and coarse.status == "optimal"
    assert fine.value <= optimum + 1e-6
    # the same columns with the claims summed over windows twice as wide: a relaxation (a pricing whose
    # replay picked other partners than its DP on equal duals once broke this, at one and two slots)
    assert coarse.value <= fine.value + 1e-6
    assert fine.value >= 0.7 * optimum
    first = run_bound(problem, max_rounds=1)
    assert first.proven and first.value <= fine.value + 1e-6
    assert run_bound(problem, smoothing=0.0).value == pytest.approx(fine.value, abs=1e-4)


def test_run_bound_skips_and_refuses_what_it_does_not_cover() -> None:
    instance = generate_instance(5, 1, 2, 0)
    makespan = discretize(instance, objective="makespan")
    assert run_bound(makespan.with_upper_bound(warm_start(makespan))).status.startswith("skipped")
    problem = discretize(instance)
    with pytest.raises(ValueError, match="width"):
        run_bound(problem.with_upper_bound(warm_start(problem)), width=0)


def test_bound_comparison_runs_the_run_relaxation(tmp_path: Path) -> None:
    output = tmp_path / "runs.csv"
    argv = ["--jobs", "6", "--gpus", "4", "--gpus-per-node", "4", "--seeds", "1", "--time-limit", "5"]
    assert bound_comparison.main([*argv, "--methods", "lanes", "runs", "--output", str(output)]) == 0
    frame = pd.read_csv(output)
    assert sorted(frame["method"]) == ["lanes", "runs"]
    assert (frame["bound_slots"] <= frame["ub_slots"] + 1e-6).all() and (frame["bound_slots"] > 0).all()
