"""Schedule metrics (SPEC.md "Metrics"), computed from the validator's recomputation — never from
what a producer claims. One module; every report, benchmark and CLI command calls it.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from typing import Any

import numpy as np

from formulation.instance import Instance
from formulation.validator import Occupancy, ValidationReport

#: SJF-BSBF Tables III-IV: "jobs requiring more than 4 GPUs are considered large".
DEFAULT_LARGE_THRESHOLD = 4


def _summary(values: list[float], prefix: str) -> dict[str, float]:
    if not values:
        return {f"{prefix}_avg": math.nan, f"{prefix}_median": math.nan, f"{prefix}_p99": math.nan}
    array = np.asarray(values, dtype=float)
    return {
        f"{prefix}_avg": float(array.mean()),
        f"{prefix}_median": float(np.median(array)),
        f"{prefix}_p99": float(np.percentile(array, 99)),
    }


def compute_metrics(
    instance: Instance, report: ValidationReport, *, large_threshold: int = DEFAULT_LARGE_THRESHOLD
) -> dict[str, Any]:
    """Metrics of a validated schedule.

    Parameters
    ----------
    instance
        The problem.
    report
        The validator's report on the schedule (its recomputed completions and GPU occupancy).
    large_threshold
        Jobs with more than this many GPUs count as large (SJF-BSBF: 4).

    Returns
    -------
    dict
        ``jobs``, ``completed``, ``valid``; ``jct_avg/median/p99``; ``makespan`` (first arrival to last
        completion); ``queueing_avg`` (first start − arrival); ``gpu_utilization`` (busy GPU-time over
        ``num_gpus × makespan``); ``shared_gpu_seconds`` (GPU-time with two or more jobs); ``sharing_benefit``
        (Castor Eq. 24, mean over jobs that shared; see :func:`sharing_benefits`); the same JCT and queueing
        averages for ``large_*`` and ``small_*`` jobs; ``total_jct``.
    """
    completion = report.completion
    jobs = instance.jobs
    jct = [completion[j.id] - j.arrival for j in jobs if j.id in completion]
    queueing = [report.start[j.id] - j.arrival for j in jobs if j.id in report.start]
    result: dict[str, Any] = {
        "jobs": len(jobs),
        "completed": len(jct),
        "valid": report.ok,
        "total_jct": float(sum(jct)),
    }
    result.update(_summary(jct, "jct"))
    result["queueing_avg"] = float(np.mean(queueing)) if queueing else math.nan
    if jct:
        first_arrival = min(j.arrival for j in jobs)
        last_completion = max(completion.values())
        makespan = last_completion - first_arrival
    else:
        makespan = math.nan
    result["makespan"] = makespan

    busy = sum((o.end - o.start) for o in report.occupancy)
    shared = sum((o.end - o.start) for o in report.occupancy if len(o.jobs) >= 2)
    capacity_time = instance.cluster.num_gpus * makespan if jct and makespan > 0 else math.nan
    result["gpu_utilization"] = busy / capacity_time if capacity_time == capacity_time else math.nan
    result["busy_gpu_seconds"] = busy
    result["shared_gpu_seconds"] = shared

    benefits = sharing_benefits(instance, report)
    result["sharing_benefit"] = float(np.mean(list(benefits.values()))) if benefits else math.nan
    result["shared_jobs"] = len(benefits)

    for label, selector in (
        ("large", lambda g: g > large_threshold),
        ("small", lambda g: g <= large_threshold),
    ):
        group = [j for j in jobs if selector(j.num_gpus)]
        group_jct = [completion[j.id] - j.arrival for j in group if j.id in completion]
        group_queue = [report.start[j.id] - j.arrival for j in group if j.id in report.start]
        result[f"{label}_jobs"] = len(group)
        result[f"{label}_jct_avg"] = float(np.mean(group_jct)) if group_jct else math.nan
        result[f"{label}_queueing_avg"] = float(np.mean(group_queue)) if group_queue else math.nan
    return result


def sharing_benefits(instance: Instance, report: ValidationReport) -> dict[str, float]:
    """Castor Eq. 24 per job that shared a GPU: ``t_solo / t_colocation``.

    ``t_colocation`` is the job's JCT in the schedule. ``t_solo`` is its JCT had it stayed pending until
    enough GPUs were free of other jobs (in this schedule, with no new arrivals) and then run alone for
    its isolated duration ``L_j``: ``(t_free − a_j) + L_j``. Values above 1 mean sharing paid off.
    """
    # Per GPU, the disjoint occupancy intervals in time order, for bisection.
    by_gpu: dict[int, list[Occupancy]] = defaultdict(list)
    for item in sorted(report.occupancy, key=lambda o: (o.gpu, o.start)):
        by_gpu[item.gpu].append(item)
    starts = {gpu: [o.start for o in items] for gpu, items in by_gpu.items()}
    shared_jobs: set[str] = {job for o in report.occupancy if len(o.jobs) >= 2 for job in o.jobs}
    change_points = sorted({o.end for o in report.occupancy})
    benefits: dict[str, float] = {}
    num_gpus = instance.cluster.num_gpus

    def busy_with_others(gpu: int, t: float, job_id: str) -> bool:
        items = by_gpu.get(gpu)
        if not items:
            return False
        index = bisect.bisect_right(starts[gpu], t) - 1
        if index < 0:
            return False
        item = items[index]
        return item.start <= t < item.end and any(j != job_id for j in item.jobs)

    for job_id in sorted(shared_jobs):
        if job_id not in report.completion or job_id not in report.start:
            continue
        job = instance.job(job_id)
        start = report.start[job_id]
        t_free = math.inf
        first = bisect.bisect_right(change_points, start)
        for t in [start, *change_points[first:]]:
            free = sum(not busy_with_others(gpu, t, job_id) for gpu in range(num_gpus))
            if free >= job.num_gpus:
                t_free = t
                break
        if not math.isfinite(t_free):
            continue
        colocation = report.completion[job_id] - job.arrival
        solo = (t_free - job.arrival) + instance.isolated_duration(job)
        if colocation > 0:
            benefits[job_id] = solo / colocation
    return benefits
