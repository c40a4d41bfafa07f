"""Frozen copy of ``formulation/validator.py`` before issue 19's event-based sweep.

Used by tests and benchmarks to check that the fast validator reports the same violations and
completions, and to measure the speed-up in the same session.
"""

# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.schedule import JobPlan, Schedule, Segment
from formulation.speed import accumulation_options

# Relative tolerance for "progress reached I_j" and for comparing times.
REL_TOL = 1e-9
TIME_TOL = 1e-6


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule."""

    rule: str  # "arrival", "gang", "gpu", "capacity", "memory", "pair", "segments", "steps", ...
    message: str
    job_id: str | None = None
    gpu: int | None = None
    time: float | None = None

    def __str__(self) -> str:
        parts = [f"[{self.rule}]"]
        if self.job_id is not None:
            parts.append(f"job {self.job_id}")
        if self.gpu is not None:
            parts.append(f"GPU {self.gpu}")
        if self.time is not None:
            parts.append(f"t={self.time:g}")
        return " ".join(parts) + f": {self.message}"


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Jobs on one GPU over ``[start, end)``."""

    gpu: int
    start: float
    end: float
    jobs: tuple[str, ...]


@dataclass
class ValidationReport:
    """What the validator found and recomputed."""

    ok: bool
    violations: list[Violation]
    slotted: bool
    slot: float | None
    completion: dict[str, float] = field(default_factory=dict)
    start: dict[str, float] = field(default_factory=dict)
    occupancy: list[Occupancy] = field(default_factory=list)

    def raise_if_invalid(self) -> None:
        """Raise :class:`DuettoInputError` listing the first violations if the schedule is invalid."""
        if not self.ok:
            shown = "; ".join(str(v) for v in self.violations[:5])
            more = f" (and {len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
            raise DuettoInputError(f"invalid schedule: {shown}{more}")

    def total_jct(self, instance: Instance) -> float:
        return sum(self.completion[j.id] - j.arrival for j in instance.jobs if j.id in self.completion)


def _is_multiple(value: float, slot: float) -> bool:
    ratio = value / slot
    return abs(ratio - round(ratio)) <= 1e-6 * max(1.0, abs(ratio))


class _Sweep:
    """State of the event sweep."""

    def __init__(self, instance: Instance, schedule: Schedule, slot: float | None) -> None:
        self.instance = instance
        self.schedule = schedule
        self.slot = slot
        self.violations: list[Violation] = []
        self.reported: set[tuple[object, ...]] = set()

    def report(self, rule: str, message: str, *, key: tuple[object, ...] | None = None, **where: object) -> None:
        dedup = (rule, *(key if key is not None else (where.get("job_id"), where.get("gpu"))))
        if dedup in self.reported:
            return
        self.reported.add(dedup)
        self.violations.append(Violation(rule, message, **where))  # type: ignore[arg-type]


def _check_static(sweep: _Sweep, job: Job, plan: JobPlan) -> bool:
    """Rules that need no time sweep. Returns ``False`` if the plan cannot be simulated."""
    instance, slot = sweep.instance, sweep.slot
    cluster = instance.cluster
    profile = instance.profiles[job.profile]
    simulable = True
    if not plan.segments:
        sweep.report("segments", "has no segments", job_id=job.id)
        return False
    allowed_steps = set(accumulation_options(profile, job.batch_size))
    for index, segment in enumerate(plan.segments):
        if not math.isfinite(segment.start):
            sweep.report("segments", f"segment {index} starts at a non-finite time", job_id=job.id)
            simulable = False
            continue
        if segment.start < job.arrival - TIME_TOL:
            sweep.report(
                "arrival",
                f"starts at {segment.start:g} before its arrival at {job.arrival:g}",
                job_id=job.id,
                time=segment.start,
            )
        if len(segment.gpus) != job.num_gpus:
            sweep.report(
                "gang",
                f"segment {index} holds {len(segment.gpus)} GPUs but the job needs exactly {job.num_gpus}",
                job_id=job.id,
                time=segment.start,
            )
        if len(set(segment.gpus)) != len(segment.gpus):
            sweep.report("gang", f"segment {index} lists a GPU twice: {list(segment.gpus)}", job_id=job.id)
        for gpu in segment.gpus:
            if not 0 <= gpu < cluster.num_gpus:
                sweep.report(
                    "gpu",
                    f"unknown GPU {gpu} (the cluster has GPUs 0..{cluster.num_gpus - 1})",
                    job_id=job.id,
                    gpu=gpu,
                )
                simulable = False
        if segment.steps not in allowed_steps:
            sweep.report(
                "steps",
                f"{segment.steps} accumulation steps is not a valid choice for batch size {job.batch_size} "
                f"(valid: {sorted(allowed_steps)})",
                job_id=job.id,
            )
            simulable = False
        if segment.end is not None and segment.end <= segment.start + TIME_TOL:
            sweep.report("segments", f"segment {index} ends at or before its start", job_id=job.id)
            simulable = False
        if index < len(plan.segments) - 1:
            following = plan.segments[index + 1]
            if segment.end is None:
                sweep.report("segments", f"segment {index} has no end but another segment follows it", job_id=job.id)
                simulable = False
            elif following.start < segment.end - TIME_TOL:
                sweep.report(
                    "segments",
                    f"segment {index + 1} starts at {following.start:g} before segment {index} ends at {segment.end:g}",
                    job_id=job.id,
                )
                simulable = False
        if slot is not None:
            if not _is_multiple(segment.start, slot):
                sweep.report(
                    "slot",
                    f"segment {index} starts at {segment.start:g}, not a multiple of Δ={slot:g}",
                    job_id=job.id,
                    time=segment.start,
                )
            if segment.end is not None and not _is_multiple(segment.end, slot):
                sweep.report(
                    "slot",
                    f"segment {index} ends at {segment.end:g}, not a multiple of Δ={slot:g}",
                    job_id=job.id,
                    time=segment.end,
                )
    return simulable


def validate(
    instance: Instance, schedule: Schedule, *, slotted: bool | None = None, slot: float | None = None
) -> ValidationReport:
    """Check ``schedule`` against ``instance`` and recompute its completion times.

    Parameters
    ----------
    instance
        The problem.
    schedule
        The schedule to check.
    slotted
        Use the slotted semantics; default: when ``schedule.slot`` is set.
    slot
        Slot length Δ for slotted mode (default ``schedule.slot``).

    Returns
    -------
    ValidationReport
        ``ok`` is true iff there is no violation; ``completion`` holds the recomputed completion time of
        every job that completes.
    """
    use_slots = schedule.slot is not None if slotted is None else slotted
    slot_length = (slot if slot is not None else schedule.slot) if use_slots else None
    if use_slots and slot_length is None:
        raise DuettoInputError("slotted validation needs a slot length: the schedule has none, give --slot")
    sweep = _Sweep(instance, schedule, slot_length)

    plans: dict[str, JobPlan] = {}
    for plan in schedule.plans:
        if plan.job_id not in instance.job_index:
            sweep.report("job", "is not in the instance", job_id=plan.job_id)
            continue
        if plan.job_id in plans:
            sweep.report("job", "has more than one plan", job_id=plan.job_id)
            continue
        plans[plan.job_id] = plan
    simulable: dict[str, JobPlan] = {}
    for job in instance.jobs:
        job_plan = plans.get(job.id)
        if job_plan is None:
            sweep.report("job", "is never scheduled", job_id=job.id)
            continue
        if _check_static(sweep, job, job_plan):
            simulable[job.id] = job_plan

    completion, occupancy = _sweep_progress(sweep, simulable)

    for job_id, plan in simulable.items():
        claimed = plan.claimed_completion
        if claimed is None or job_id not in completion:
            continue
        actual = completion[job_id]
        if abs(claimed - actual) > TIME_TOL * max(1.0, abs(actual)):
            sweep.report(
                "completion",
                f"claims completion at {claimed:.6f} but the progress rule gives {actual:.6f}",
                job_id=job_id,
                time=actual,
            )

    starts = {job_id: plan.segments[0].start for job_id, plan in simulable.items()}
    return ValidationReport(
        ok=not sweep.violations,
        violations=sweep.violations,
        slotted=use_slots,
        slot=slot_length,
        completion=completion,
        start=starts,
        occupancy=occupancy,
    )


def _sweep_progress(sweep: _Sweep, plans: dict[str, JobPlan]) -> tuple[dict[str, float], list[Occupancy]]:
    """Recompute progress and completions; check capacity, memory and pairs on every interval."""
    instance, slot = sweep.instance, sweep.slot
    cluster = instance.cluster
    overhead = sweep.schedule.restart_overhead
    if slot is not None and overhead > 0:
        # In slotted mode a restart costs whole slots (documented in docs/model.md).
        overhead = math.ceil(overhead / slot - 1e-9) * slot

    progress = {job_id: 0.0 for job_id in plans}
    completion: dict[str, float] = {}
    occupancy: list[Occupancy] = []

    # Every segment, by start time; segments become active when ``now`` reaches their start.
    queue = sorted(
        (
            (segment.start, job_id, index)
            for job_id, plan in plans.items()
            for index, segment in enumerate(plan.segments)
        ),
        key=lambda item: item[0],
    )
    fixed_events: set[float] = set()
    for plan in plans.values():
        for index, segment in enumerate(plan.segments):
            fixed_events.add(segment.start)
            if segment.end is not None:
                fixed_events.add(segment.end)
            if index > 0 and overhead > 0:
                fixed_events.add(segment.start + overhead)
    events = sorted(fixed_events)
    event_pos = 0
    queue_pos = 0
    active: dict[str, tuple[int, Segment]] = {}
    now = events[0] if events else 0.0

    while True:
        # Segments that ended by now leave; segments that start by now join (jobs already done do not).
        for job_id in [j for j, (_, seg) in active.items() if seg.end is not None and seg.end <= now + 1e-12]:
            del active[job_id]
        while queue_pos < len(queue) and queue[queue_pos][0] <= now + 1e-12:
            _, job_id, index = queue[queue_pos]
            queue_pos += 1
            segment = plans[job_id].segments[index]
            if job_id in completion or (segment.end is not None and segment.end <= now + 1e-12):
                continue
            active[job_id] = (index, segment)
        while event_pos < len(events) and events[event_pos] <= now + 1e-12:
            event_pos += 1
        next_fixed = events[event_pos] if event_pos < len(events) else math.inf
        if not active:
            if next_fixed == math.inf:
                break
            now = next_fixed
            continue

        on_gpu: dict[int, list[str]] = defaultdict(list)
        for job_id, (_, segment) in active.items():
            for gpu in segment.gpus:
                on_gpu[gpu].append(job_id)
        _check_interval(sweep, active, on_gpu, now)

        rates: dict[str, float] = {}
        for job_id, (index, segment) in active.items():
            if index > 0 and now < segment.start + overhead - 1e-12:
                rates[job_id] = 0.0  # restoring a checkpoint: GPUs held, no progress
                continue
            job = instance.job_index[job_id]
            t_iter = instance.iteration_time(job, segment.steps, cluster.nodes_spanned(segment.gpus))
            xi = 1.0
            for gpu in segment.gpus:
                for other in on_gpu[gpu]:
                    if other != job_id:
                        ratio = instance.ratio(job_id, other)
                        xi = max(xi, ratio if ratio is not None else 1.0)
            rates[job_id] = 1.0 / (t_iter * xi)

        # Earliest completion among active jobs at these rates.
        next_done = math.inf
        finishing: dict[str, float] = {}
        for job_id, rate in rates.items():
            if rate <= 0:
                continue
            iterations = instance.job_index[job_id].iterations
            remaining = iterations - progress[job_id]
            if slot is None:
                done_at = now + max(0.0, remaining) / rate
            else:
                per_slot = rate * slot
                slots_needed = max(1, math.ceil((remaining - REL_TOL * iterations) / per_slot))
                done_at = now + slots_needed * slot
            finishing[job_id] = done_at
            next_done = min(next_done, done_at)
        next_time = min(next_fixed, next_done)
        if next_time == math.inf:
            break  # active jobs without progress and nothing else to come: they never complete
        span = next_time - now
        for job_id, rate in rates.items():
            progress[job_id] += rate * span
        for gpu, jobs in on_gpu.items():
            occupancy.append(Occupancy(gpu, now, next_time, tuple(sorted(jobs))))
        for job_id, done_at in finishing.items():
            if done_at <= next_time + 1e-9 * max(1.0, next_time):
                completion[job_id] = next_time
                progress[job_id] = instance.job_index[job_id].iterations
                del active[job_id]
        now = next_time

    for job_id, plan in plans.items():
        if job_id in completion:
            for index, segment in enumerate(plan.segments):
                if index > 0 and segment.start >= completion[job_id] - TIME_TOL:
                    sweep.report(
                        "segments",
                        f"segment {index} starts at {segment.start:g}, after the job completed at "
                        f"{completion[job_id]:g}",
                        job_id=job_id,
                    )
            continue
        job = instance.job_index[job_id]
        sweep.report(
            "completion",
            f"never completes: {progress[job_id]:.6g} of {job.iterations:g} iterations done when its last segment ends",
            job_id=job_id,
        )
    return completion, _merge_occupancy(occupancy)


def _check_interval(
    sweep: _Sweep, active: dict[str, tuple[int, Segment]], on_gpu: dict[int, list[str]], now: float
) -> None:
    instance = sweep.instance
    cluster = instance.cluster
    for gpu, jobs in on_gpu.items():
        if len(jobs) > cluster.capacity:
            sweep.report(
                "capacity",
                f"{len(jobs)} jobs ({', '.join(sorted(jobs))}) on one GPU; capacity is {cluster.capacity}",
                key=(gpu, tuple(sorted(jobs))),
                gpu=gpu,
                time=now,
            )
        if len(jobs) > 1:
            memory = 0.0
            for job_id in jobs:
                job = instance.job_index[job_id]
                segment = active[job_id][1]
                memory += instance.profiles[job.profile].memory_gib(job.batch_size // segment.steps)
            if memory > cluster.gpu_memory_gib + 1e-9:
                sweep.report(
                    "memory",
                    f"jobs {', '.join(sorted(jobs))} need {memory:.3f} GiB together; the GPU has "
                    f"{cluster.gpu_memory_gib:g} GiB",
                    key=(gpu, tuple(sorted(jobs))),
                    gpu=gpu,
                    time=now,
                )
            for victim in jobs:
                for other in jobs:
                    if victim < other and (
                        instance.ratio(victim, other) is None or instance.ratio(other, victim) is None
                    ):
                        sweep.report(
                            "pair",
                            f"jobs {victim} and {other} may not share a GPU (the interference model forbids it)",
                            key=(gpu, victim, other),
                            gpu=gpu,
                            time=now,
                        )


def _merge_occupancy(intervals: list[Occupancy]) -> list[Occupancy]:
    """Join consecutive intervals of a GPU that hold the same jobs."""
    merged: list[Occupancy] = []
    last: dict[int, int] = {}
    for item in sorted(intervals, key=lambda o: (o.gpu, o.start)):
        index = last.get(item.gpu)
        if index is not None:
            previous = merged[index]
            if previous.jobs == item.jobs and abs(previous.end - item.start) <= 1e-12:
                merged[index] = Occupancy(item.gpu, previous.start, item.end, item.jobs)
                continue
        last[item.gpu] = len(merged)
        merged.append(item)
    return merged
