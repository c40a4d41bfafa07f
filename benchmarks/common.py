"""Pieces every study shares: running a policy or the oracle on an instance and turning the outcome
into a tidy row whose numbers come from the validator and :func:`formulation.metrics.compute_metrics`
(never from what a producer claims).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from formulation.instance import Instance
from formulation.metrics import DEFAULT_LARGE_THRESHOLD, compute_metrics
from formulation.schedule import Schedule
from formulation.validator import ValidationReport, validate

#: CPUs one exact solve uses when the study does not say: CP-SAT's two default workers (the coupled
#: LP's thread runs beside them).
DEFAULT_SOLVER_CPUS = 2


def solver_cpus(solver_options: Mapping[str, Any]) -> int:
    """CPUs one exact solve of a study uses: its ``num_workers`` option, else :data:`DEFAULT_SOLVER_CPUS`."""
    return max(1, int(solver_options.get("num_workers") or DEFAULT_SOLVER_CPUS))


def default_workers(solves: bool, cpus_per_solve: int) -> int:
    """Parallel local tasks when the user gives none: the CPU count, divided by a solve's CPUs when
    some task solves exactly (solves sharing cores prove less within their limit and time worse)."""
    cpus = os.cpu_count() or 1
    return max(1, cpus // cpus_per_solve) if solves else cpus


#: Metric columns copied from compute_metrics into study rows.
METRIC_COLUMNS: tuple[str, ...] = (
    "total_jct",
    "jct_avg",
    "jct_median",
    "jct_p99",
    "makespan",
    "queueing_avg",
    "gpu_utilization",
    "shared_gpu_seconds",
    "sharing_benefit",
    "shared_jobs",
)


@dataclass
class Evaluation:
    """A schedule checked by the validator, with its metrics."""

    report: ValidationReport
    metrics: dict[str, Any]

    @property
    def valid(self) -> bool:
        return bool(self.report.ok) and self.metrics["completed"] == self.metrics["jobs"]


def evaluate(
    instance: Instance,
    schedule: Schedule,
    *,
    slotted: bool | None = None,
    slot: float | None = None,
    large_threshold: int = DEFAULT_LARGE_THRESHOLD,
) -> Evaluation:
    """Validate ``schedule`` (slotted when it carries a slot, unless ``slotted`` says otherwise; ``slot``
    overrides the schedule's Δ) and compute its metrics."""
    report = validate(instance, schedule, slotted=slotted, slot=slot)
    return Evaluation(report, compute_metrics(instance, report, large_threshold=large_threshold))


def as_continuous(schedule: Schedule) -> Schedule:
    """The same decisions (starts, GPU sets, steps, preemption times) read in continuous time: no slot and
    no claimed completions (those were computed in the slotted semantics)."""
    plans = tuple(dataclasses.replace(plan, claimed_completion=None) for plan in schedule.plans)
    return dataclasses.replace(schedule, plans=plans, slot=None)


def metric_fields(evaluation: Evaluation | None, prefix: str = "") -> dict[str, Any]:
    """The :data:`METRIC_COLUMNS` of an evaluation (NaN when there is none), optionally prefixed."""
    if evaluation is None:
        return {f"{prefix}{name}": math.nan for name in METRIC_COLUMNS}
    return {f"{prefix}{name}": evaluation.metrics.get(name, math.nan) for name in METRIC_COLUMNS}


def policy_is_preemptive(name: str) -> bool:
    """Whether a registered policy preempts (its schedules are outside the non-preemptive oracle's space)."""
    from heuristics.registry import make_policy

    return bool(getattr(make_policy(name), "preemptive", False))


def simulate_policy(
    instance: Instance,
    policy: Any,
    *,
    slot: float | None,
    capacity: int | None = None,
    restart_cost: float = 0.0,
    policy_options: Mapping[str, Any] | None = None,
) -> tuple[Any, float]:
    """Simulate ``policy`` (a name or a policy object) without the simulator's own validation.

    Returns
    -------
    (SimulationResult, wall seconds)
        Validate ``result.schedule`` against ``result.instance`` (it carries the capacity used).
    """
    from heuristics.simulator import simulate

    clock = time.perf_counter()
    result = simulate(
        instance,
        policy,
        slot=slot,
        capacity=capacity,
        restart_cost=restart_cost,
        validate=False,
        policy_options=policy_options,
    )
    return result, time.perf_counter() - clock


def solve_oracle(
    instance: Instance, solver: str, *, time_limit: float, slot: float, objective: str = "jct", **options: Any
) -> tuple[Any, float]:
    """Solve with the exact oracle (in its worker subprocess); ``options`` go to the backend (e.g.
    ``num_workers`` for CP-SAT, ``threads`` for HiGHS). Returns ``(Result, wall seconds)``."""
    from solvers import solve

    clock = time.perf_counter()
    result = solve(
        instance, solver=solver, time_limit=time_limit, slot=slot, objective=objective, options=options or None
    )
    return result, time.perf_counter() - clock


def clean_float(value: Any) -> float:
    """A finite float, or NaN."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def add_family_arguments(parser: argparse.ArgumentParser, jobs: list[int]) -> None:
    """The standard random family's options of the oracle studies (``--jobs`` default ``jobs``): job
    counts, cluster shape and seeds (:func:`family_seeds`, :func:`family_error`)."""
    parser.add_argument("--jobs", type=int, nargs="+", default=jobs)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)


def family_error(args: argparse.Namespace) -> str | None:
    """What is wrong with :func:`add_family_arguments`' values (``None``: nothing)."""
    if args.seeds < 1 or min(args.jobs) < 1 or args.gpus < 1 or args.gpus_per_node < 1:
        return "--seeds, --jobs, --gpus and --gpus-per-node must be positive"
    return None


def family_seeds(args: argparse.Namespace) -> range:
    """The instance seeds :func:`add_family_arguments` asked for."""
    return range(args.first_seed, args.first_seed + args.seeds)
