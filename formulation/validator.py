"""The independent schedule validator (SPEC.md "Schedules").

Given an instance and a schedule, it checks every rule — arrival, gang size, GPU ids, capacity ``C``,
memory, pairs that may not share, segment order, valid accumulation steps — and *recomputes* every
completion time from the progress rule itself, in continuous time or in the slotted semantics. It
shares no code with the solvers or policies beyond the problem types and the speed model.

The recomputation is an event sweep: between two consecutive events (a segment start or end, the end
of a restart overhead, a completion) the set of jobs on each GPU is constant, so each job's rate
``1 / (t_iter · ξ_eff)`` is constant; the next completion is found in closed form. In slotted mode
every event lies on a slot boundary and a job completes at the end of the first slot in which its
progress reaches ``I_j``, holding its GPUs until then.

An instance whose progress rule is Muri's simulator's (``Instance.progress``, :mod:`formulation.progress`)
is swept the same way with that rule: every job's arrival is an event too, each interval gives a job
``max(0, span − o) / period`` (its group's period and start overhead), and a job completes at
``t_0 + (I_j − p_0) · period`` when that falls before the next event. Continuous time only.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.progress import MuriProgress
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
    instance: Instance,
    schedule: Schedule,
    *,
    slotted: bool | None = None,
    slot: float | None = None,
    capacity: int | None = None,
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
    capacity
        Jobs per GPU ``C`` (default ``schedule.capacity``, else the instance's): the capacity the
        schedule was made for is the one it is checked against.

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
    if isinstance(instance.progress, MuriProgress):
        # Muri's simulator is continuous and charges its own per-model overheads (docs/model.md).
        if use_slots:
            raise DuettoInputError(
                "the instance uses Muri's progress rule, which is continuous-time: it has no slotted semantics",
                field="progress",
            )
        if schedule.restart_overhead > 0:
            raise DuettoInputError(
                "the instance uses Muri's progress rule, which charges its own start overheads: the schedule's "
                f"restart_overhead must be 0, got {schedule.restart_overhead:g}",
                field="restart_overhead",
            )
    wanted = capacity if capacity is not None else schedule.capacity
    if wanted is not None and wanted != instance.cluster.capacity:
        instance = instance.replace(cluster=instance.cluster.with_capacity(wanted))
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
    """Recompute progress and completions; check capacity, memory and pairs on every interval.

    Event-based: between events only the jobs whose GPUs changed are re-rated and re-checked, and a GPU's
    occupancy interval is extended until its job set changes. Every float is computed by the same
    expression, in the same order, as the interval-by-interval sweep this replaced (kept in
    ``benchmarks/reference/validator_ref.py``; ``tests/test_speed_identity.py`` checks that both give the
    same violations, completions and occupancy): a rate is a pure function of the job's segment and its
    GPU partners (so recomputing it only when they change gives the same value), progress still grows by
    ``rate · span`` on every interval, and a GPU whose job set did not change produces only violations
    already reported (deduplicated by GPU and job set).
    """
    instance, slot = sweep.instance, sweep.slot
    cluster = instance.cluster
    overhead = sweep.schedule.restart_overhead
    if slot is not None and overhead > 0:
        # In slotted mode a restart costs whole slots (documented in docs/model.md).
        overhead = math.ceil(overhead / slot - 1e-9) * slot

    muri = instance.progress if isinstance(instance.progress, MuriProgress) else None
    progress = {job_id: 0.0 for job_id in plans}
    completion: dict[str, float] = {}
    occupancy: list[Occupancy] = []
    job_index = instance.job_index
    iterations = {job_id: job_index[job_id].iterations for job_id in plans}
    profile_of = {job_id: job_index[job_id].profile for job_id in plans}
    profiles = instance.profiles
    interference = instance.interference
    ratios: dict[tuple[str, str], float | None] = {}  # by profile pair (Instance.ratio's own argument)

    def ratio_of(victim: str, other: str) -> float | None:
        key = (profile_of[victim], profile_of[other])
        try:
            return ratios[key]
        except KeyError:
            value = ratios[key] = interference.ratio(profiles[key[0]], profiles[key[1]])
            return value

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
    if muri is not None:
        # Muri's rule charges its overhead at every event, and every arrival is one (docs/model.md).
        fixed_events.update(job.arrival for job in instance.jobs)
    events = sorted(fixed_events)
    event_pos = 0
    queue_pos = 0
    active: dict[str, tuple[int, Segment]] = {}
    now = events[0] if events else 0.0

    # Incremental state. ``order`` numbers jobs as they enter ``active`` (a dict keeps insertion order; a
    # segment replacing a running one keeps its place), so each GPU's list is in ``active`` order, as the
    # sweep that rebuilt ``on_gpu`` from ``active`` every interval had it.
    order: dict[str, int] = {}
    counter = 0
    on_gpu: dict[int, list[str]] = {}
    ends: list[tuple[float, int, str, int]] = []  # (segment end, tie-break, job, segment index)
    t_iter: dict[str, float] = {}
    rates: dict[str, float] = {}
    periods: dict[str, float] = {}  # Muri's rule: seconds per iteration over the current interval
    losses: dict[str, float] = {}  # Muri's rule: seconds of start overhead charged per interval
    dirty: set[str] = set()  # jobs to re-rate
    restoring: set[str] = set()  # jobs inside a restart overhead
    changed: set[int] = set()  # GPUs whose job set changed since the last checked interval
    open_since: dict[int, tuple[float, tuple[str, ...]]] = {}  # GPU -> (start, jobs) of its open interval

    def leave(job_id: str) -> None:
        _, segment = active.pop(job_id)
        for gpu in segment.gpus:
            jobs = on_gpu[gpu]
            jobs.remove(job_id)
            dirty.update(jobs)
            changed.add(gpu)
        rates.pop(job_id, None)
        restoring.discard(job_id)

    def join(job_id: str, index: int, segment: Segment) -> None:
        nonlocal counter
        if job_id in active:  # a following segment that starts (within TIME_TOL) before this one ends
            rank = order[job_id]
            _, old = active[job_id]
            for gpu in old.gpus:
                jobs = on_gpu[gpu]
                jobs.remove(job_id)
                dirty.update(jobs)
                changed.add(gpu)
            restoring.discard(job_id)
        else:
            counter += 1
            rank = order[job_id] = counter
        active[job_id] = (index, segment)
        for gpu in segment.gpus:
            jobs = on_gpu.setdefault(gpu, [])
            position = len(jobs)
            while position > 0 and order[jobs[position - 1]] > rank:
                position -= 1
            jobs.insert(position, job_id)
            dirty.update(jobs)
            changed.add(gpu)
        t_iter[job_id] = instance.iteration_time(job_index[job_id], segment.steps, cluster.nodes_spanned(segment.gpus))
        if index > 0 and overhead > 0:
            restoring.add(job_id)
        if segment.end is not None:
            heapq.heappush(ends, (segment.end, counter, job_id, index))

    while True:
        # Segments that ended by now leave; segments that start by now join (jobs already done do not).
        while ends and ends[0][0] <= now + 1e-12:
            _, _, job_id, index = heapq.heappop(ends)
            current = active.get(job_id)
            if current is not None and current[0] == index:
                leave(job_id)
        while queue_pos < len(queue) and queue[queue_pos][0] <= now + 1e-12:
            _, job_id, index = queue[queue_pos]
            queue_pos += 1
            segment = plans[job_id].segments[index]
            if job_id in completion or (segment.end is not None and segment.end <= now + 1e-12):
                continue
            join(job_id, index, segment)
        while event_pos < len(events) and events[event_pos] <= now + 1e-12:
            event_pos += 1
        next_fixed = events[event_pos] if event_pos < len(events) else math.inf

        # Occupancy: a GPU's interval closes when its job set changes.
        check: list[tuple[int, int, int]] = []
        for gpu in changed:
            jobs = on_gpu.get(gpu)
            current_jobs = tuple(sorted(jobs)) if jobs else ()
            opened = open_since.get(gpu)
            if opened is not None and opened[1] != current_jobs:
                if opened[0] <= now:
                    occupancy.append(Occupancy(gpu, opened[0], now, opened[1]))
                del open_since[gpu]
                opened = None
            if opened is None and current_jobs:
                open_since[gpu] = (now, current_jobs)
            if jobs:
                first = jobs[0]
                check.append((order[first], active[first][1].gpus.index(gpu), gpu))
        changed.clear()

        if not active:
            if next_fixed == math.inf:
                break
            now = next_fixed
            continue

        # Same GPU order as the sweep that built ``on_gpu`` by walking ``active`` and each job's GPUs.
        check.sort()
        for _, _, gpu in check:
            _check_gpu(sweep, active, gpu, on_gpu[gpu], now, ratio_of)

        for job_id in restoring:
            dirty.add(job_id)
        for job_id in dirty:
            entry = active.get(job_id)
            if entry is None:
                continue
            index, segment = entry
            if index > 0 and now < segment.start + overhead - 1e-12:
                rates[job_id] = 0.0  # restoring a checkpoint: GPUs held, no progress
                continue
            restoring.discard(job_id)
            if muri is not None:
                period, loss = _muri_period(muri, instance, job_id, t_iter[job_id], segment, on_gpu, profile_of)
                periods[job_id] = period
                losses[job_id] = loss
                rates[job_id] = 1.0 / period
                continue
            xi = 1.0
            for gpu in segment.gpus:
                for other in on_gpu[gpu]:
                    if other != job_id:
                        ratio = ratio_of(job_id, other)
                        xi = max(xi, ratio if ratio is not None else 1.0)
            rates[job_id] = 1.0 / (t_iter[job_id] * xi)
        dirty.clear()

        # Earliest completion among active jobs at these rates (walked in ``active`` order).
        next_done = math.inf
        finishing: dict[str, float] = {}
        for job_id in active:
            rate = rates[job_id]
            if rate <= 0:
                continue
            total = iterations[job_id]
            remaining = total - progress[job_id]
            if muri is not None:
                done_at = now + max(0.0, remaining) * periods[job_id]
            elif slot is None:
                done_at = now + max(0.0, remaining) / rate
            else:
                per_slot = rate * slot
                slots_needed = max(1, math.ceil((remaining - REL_TOL * total) / per_slot))
                done_at = now + slots_needed * slot
            finishing[job_id] = done_at
            if done_at < next_done:
                next_done = done_at
        next_time = min(next_fixed, next_done)
        if next_time == math.inf:
            break  # active jobs without progress and nothing else to come: they never complete
        span = next_time - now
        if muri is not None:
            # Every interval ends at an event; a job that does not complete in it loses its overhead.
            for job_id in active:
                progress[job_id] += max(0.0, span - losses[job_id]) / periods[job_id]
        else:
            for job_id in active:
                progress[job_id] += rates[job_id] * span
        limit = next_time + 1e-9 * max(1.0, next_time)
        for job_id, done_at in finishing.items():
            if done_at <= limit:
                completion[job_id] = next_time
                progress[job_id] = iterations[job_id]
                leave(job_id)
        now = next_time

    # Intervals still open were swept up to ``now`` (the sweep stops before [now, ∞)).
    for gpu, (since, jobs_there) in open_since.items():
        if since < now:
            occupancy.append(Occupancy(gpu, since, now, jobs_there))

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


def _muri_period(
    rule: MuriProgress,
    instance: Instance,
    job_id: str,
    t_iter: float,
    segment: Segment,
    on_gpu: dict[int, list[str]],
    profile_of: dict[str, str],
) -> tuple[float, float]:
    """Muri's rule: ``(seconds per iteration, overhead per interval)`` of ``job_id`` on ``segment``'s GPUs
    with the jobs there now: the slowest GPU's group period and the largest group overhead."""
    profiles = instance.profiles
    period = 0.0
    loss = 0.0
    seen: set[tuple[str, ...]] = set()
    for gpu in segment.gpus:
        jobs = tuple(on_gpu[gpu])
        if jobs in seen:
            continue
        seen.add(jobs)
        if len(jobs) == 1:
            here = rule.solo_period(t_iter)
        else:
            here = rule.group_period([profiles[profile_of[other]] for other in jobs])
        period = max(period, here)
        loss = max(loss, sum(rule.overhead(profile_of[other]) for other in jobs))
    return period, loss


def _check_gpu(
    sweep: _Sweep,
    active: dict[str, tuple[int, Segment]],
    gpu: int,
    jobs: list[str],
    now: float,
    ratio_of: Callable[[str, str], float | None],
) -> None:
    """Capacity, memory and pair rules on one GPU holding ``jobs`` (in ``active`` order) from ``now``."""
    instance = sweep.instance
    cluster = instance.cluster
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
                if victim < other and (ratio_of(victim, other) is None or ratio_of(other, victim) is None):
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
