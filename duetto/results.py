"""Per-job results as a DataFrame: :func:`jobs_frame` (also ``SimulationResult.jobs_frame()`` and
``Result.jobs_frame(instance)``).

Every number comes from the one validator (:func:`formulation.validator.validate`: starts,
completions and GPU occupancy recomputed from the schedule, never the producer's claims) and, for the
sharing benefit, :func:`formulation.metrics.sharing_benefits`; the per-job JCT and queueing delay are
the terms that :func:`formulation.metrics.compute_metrics` averages.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from formulation.errors import DuettoInputError

if TYPE_CHECKING:
    from formulation.instance import Instance
    from formulation.schedule import Schedule
    from formulation.validator import ValidationReport

__all__ = ["JOB_COLUMNS", "jobs_frame"]

#: The columns of :func:`jobs_frame`, in order.
JOB_COLUMNS: tuple[str, ...] = (
    "job",
    "arrival",
    "num_gpus",
    "iterations",
    "batch_size",
    "profile",
    "start",
    "completion",
    "jct",
    "queueing",
    "running",
    "gpus",
    "steps",
    "segments",
    "shared",
    "sharing_benefit",
)


def jobs_frame(
    instance: Instance,
    schedule: Schedule,
    *,
    report: ValidationReport | None = None,
    slotted: bool | None = None,
) -> pd.DataFrame:
    """One row per job of ``instance``: when it arrived, started and completed in ``schedule``.

    Parameters
    ----------
    instance
        The problem the schedule serves.
    schedule
        A schedule of it (from ``solve``, ``simulate`` or a file).
    report
        The validator's report on it, if already computed (else it is validated here).
    slotted
        Semantics for the validation (default: slotted when the schedule has a slot).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`JOB_COLUMNS`: ``job`` (id), ``arrival``, ``num_gpus``, ``iterations``,
        ``batch_size``, ``profile``; ``start`` (first start), ``completion`` (the validator's),
        ``jct`` (completion − arrival), ``queueing`` (start − arrival), ``running`` (completion −
        start), in seconds; ``gpus`` (GPU ids of the first segment), ``steps`` (its accumulation steps),
        ``segments`` (more than one: preempted or migrated), ``shared`` (held a GPU with another job at
        some time) and ``sharing_benefit`` (Castor Eq. 24, ``t_solo / t_colocation``, for jobs that
        shared; NaN otherwise). Times of a job the schedule does not complete are NaN.
        ``frame.attrs["valid"]`` is whether the schedule passed the validator.
    """
    from formulation.metrics import sharing_benefits
    from formulation.validator import validate

    if report is None:
        report = validate(instance, schedule, slotted=slotted)
    benefits = sharing_benefits(instance, report)
    shared = {job for item in report.occupancy if len(item.jobs) >= 2 for job in item.jobs}
    plans = schedule.plan_index
    rows: list[dict[str, Any]] = []
    for job in instance.jobs:
        start = report.start.get(job.id, math.nan)
        completion = report.completion.get(job.id, math.nan)
        plan = plans.get(job.id)
        first = plan.segments[0] if plan is not None and plan.segments else None
        rows.append(
            {
                "job": job.id,
                "arrival": job.arrival,
                "num_gpus": job.num_gpus,
                "iterations": job.iterations,
                "batch_size": job.batch_size,
                "profile": job.profile,
                "start": start,
                "completion": completion,
                "jct": completion - job.arrival,
                "queueing": start - job.arrival,
                "running": completion - start,
                "gpus": tuple(first.gpus) if first is not None else (),
                "steps": first.steps if first is not None else 0,
                "segments": len(plan.segments) if plan is not None else 0,
                "shared": job.id in shared,
                "sharing_benefit": benefits.get(job.id, math.nan),
            }
        )
    frame = pd.DataFrame(rows, columns=list(JOB_COLUMNS))
    frame.attrs["valid"] = report.ok
    return frame


def require_schedule(schedule: Schedule | None, status: str) -> Schedule:
    """``schedule``, or :class:`DuettoInputError` saying that the solve found none."""
    if schedule is None:
        raise DuettoInputError(f"the solve ended '{status}' without a schedule: no per-job results")
    return schedule
