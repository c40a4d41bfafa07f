"""Schedule metrics (SPEC.md "Metrics"), computed from the validator's recomputation — never from
what a producer claims. One module; every report, benchmark and CLI command calls it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from formulation.instance import Instance
from formulation.validator import REL_TOL, ValidationReport

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
    occupancy = report.occupancy
    shared_jobs = sorted({job for o in occupancy if len(o.jobs) >= 2 for job in o.jobs})
    if not shared_jobs:
        return {}
    num_gpus = instance.cluster.num_gpus
    # One sweep gives free(t) = GPUs with no occupant, piecewise constant on [times[i], times[i+1]).
    # A GPU is "free of others" for job j when it is free or j is its only occupant, so
    # free_of_others_j(t) = free(t) + alone_j(t); after j ends, alone_j = 0 and the answer is a
    # "first index >= i with free >= k" query, answered from one sorted index list per GPU demand k.
    # Event times equal in exact arithmetic can differ in their last bits (on a Pollux workload the
    # validator recomputed a job's end one unit in the last place before the start the simulator gave
    # the jobs that took its GPUs), leaving slivers in which GPUs look free together; which side of a
    # sliver a time falls on moves with the CPU's rounding (one job's benefit 6.2 or 35.8). Times within
    # REL_TOL of one another are one event.
    snap = _event_snapper(
        [t for o in occupancy for t in (o.start, o.end)]
        + list(report.start.values())
        + list(report.completion.values())
    )
    deltas: dict[float, int] = defaultdict(int)
    alone: dict[str, list[tuple[float, float]]] = defaultdict(list)
    wanted = set(shared_jobs)
    for item in occupancy:
        deltas[snap[item.start]] += 1
        deltas[snap[item.end]] -= 1
        if len(item.jobs) == 1 and item.jobs[0] in wanted:
            alone[item.jobs[0]].append((snap[item.start], snap[item.end]))
    times = np.asarray(sorted(deltas), dtype=float)
    free = num_gpus - np.cumsum([deltas[t] for t in times.tolist()])
    free_enough: dict[int, np.ndarray] = {}
    benefits: dict[str, float] = {}
    for job_id in shared_jobs:
        if job_id not in report.completion or job_id not in report.start:
            continue
        job = instance.job(job_id)
        start, completion = snap[report.start[job_id]], snap[report.completion[job_id]]
        t_free = math.inf
        # While j runs: candidates are its start and every change point before its completion.
        lo = int(np.searchsorted(times, start, side="right"))
        hi = int(np.searchsorted(times, completion, side="left"))
        candidates = np.concatenate(([start], times[lo:hi]))
        index = np.searchsorted(times, candidates, side="right") - 1
        count = free[index].copy()
        for a, b in alone.get(job_id, ()):
            count += (candidates >= a) & (candidates < b)
        hits = np.flatnonzero(count >= job.num_gpus)
        if hits.size:
            t_free = float(candidates[hits[0]])
        else:
            # After j: the first change point at or after its completion with enough free GPUs.
            if job.num_gpus not in free_enough:
                free_enough[job.num_gpus] = np.flatnonzero(free >= job.num_gpus)
            ok = free_enough[job.num_gpus]
            first = int(np.searchsorted(times, completion, side="right")) - 1
            position = int(np.searchsorted(ok, max(first, 0)))
            if position < ok.size:
                t_free = max(float(times[ok[position]]), completion)
        if not math.isfinite(t_free):
            continue
        colocation = report.completion[job_id] - job.arrival
        solo = (t_free - job.arrival) + instance.isolated_duration(job)
        if colocation > 0:
            benefits[job_id] = solo / colocation
    return benefits


def _event_snapper(times: list[float]) -> dict[float, float]:
    """Each of ``times`` mapped to the first of its cluster: in sorted order, a time within ``REL_TOL``
    (relative, at least 1 s's worth of it) of its cluster's first joins that cluster."""
    anchor: dict[float, float] = {}
    first: float | None = None
    for t in sorted(set(times)):
        if first is None or t - first > REL_TOL * max(1.0, abs(first)):
            first = t
        anchor[t] = first
    return anchor
