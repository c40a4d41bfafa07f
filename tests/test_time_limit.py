"""Issue 15 item 1: the time limit holds on any instance (every step before the solver counts against
it, those steps scale, and an instance too large for the exact model is refused up front)."""

from __future__ import annotations

import time

import pytest

from formulation.discretize import completion_sum_lower_bound, completion_sum_lower_bounds, discretize
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.paths import shared_data_dir
from formulation.traces import load_trace
from formulation.validator import validate
from solvers import solve

DATA = shared_data_dir()
TRACE2 = DATA / "muri" / "trace2.csv"
needs_trace = pytest.mark.skipif(not TRACE2.is_file(), reason="shared Muri trace2 not found beside the repository")


def test_bounds_without_each_job_equal_the_one_at_a_time_bound() -> None:
    instance = generate_instance(30, 1, 8, seed=5, arrivals="poisson", load=1.5)
    problem = discretize(instance)
    assert completion_sum_lower_bounds(problem) == [
        completion_sum_lower_bound(problem, exclude=i) for i in range(problem.num_jobs)
    ]


@needs_trace
def test_a_thousand_trace_jobs_return_a_valid_schedule_within_the_limit() -> None:
    # the first 1,000 jobs of Muri's trace2 with a 10 s limit ran past 150 s inside the window bounds
    instance = load_trace("muri", TRACE2, limit=1000, semantics="duetto")
    limit = 8.0
    began = time.perf_counter()
    result = solve(instance, "cpsat", time_limit=limit)
    wall = time.perf_counter() - began
    assert wall <= 1.1 * limit + 2.0, wall
    assert len(result.schedule.plans) == 1000
    assert validate(instance, result.schedule, slotted=True).ok


@needs_trace
def test_too_large_instances_are_refused_up_front_in_one_line() -> None:
    instance = load_trace("muri", TRACE2, semantics="duetto")
    began = time.perf_counter()
    with pytest.raises(DuettoInputError, match="5755 jobs is too large for the exact model") as error:
        solve(instance, "cpsat", time_limit=20)
    assert time.perf_counter() - began < 2.0  # refused before any discretization
    assert "\n" not in str(error.value)
    subset = load_trace("muri", TRACE2, limit=1000, semantics="duetto")
    with pytest.raises(DuettoInputError, match=r"give at least \d+ s") as error:
        solve(subset, "cpsat", time_limit=2)
