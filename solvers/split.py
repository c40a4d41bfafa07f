"""The arrival-split bound: a lower bound on total JCT from exact solves of groups of jobs.

Why it is valid
---------------
Take any schedule of all jobs and delete the jobs outside a group ``A``. What is left is a schedule of
``A``, and no job of ``A`` finishes later in it: a job without a partner progresses at least as fast as
next to one (every interference ratio is ``ξ ≥ 1``, and a gang runs at its slowest worker's speed, a
minimum over fewer partners), and fewer jobs on a GPU never break memory or the jobs-per-GPU limit. So
the group's part of an optimal schedule costs at least ``opt(A)``, and for any partition of the jobs
into groups ``A_1 .. A_P``

    ``Σ_p opt(A_p) ≤ opt``,

with each ``opt(A_p)`` replaceable by any proven lower bound on it. The same holds in the slotted
integer model (its shared speeds are rounded up from ``U/ξ ≤ U``; alone they are exactly ``U``), so the
groups are solved at the instance's slot length and their bounds added in slot units.

What it misses is what the groups do to each other: later jobs queueing behind earlier ones still
running, or sharing their GPUs. With arrivals spread in time the groups are runs of consecutive jobs in
arrival order and that loss is small; each group is small enough to be *proven* in seconds, where the
whole instance's relaxations stop several per cent short (docs/oracle-measurements.md, "The arrival-split bound").
With all jobs at time 0 every group sees an empty cluster and the bound is weak: :func:`split_applies`
says no.

Which partition
---------------
Any partition is valid; the best is where groups interact least. The incumbent schedule shows where:
the cost of a cut before position ``k`` (arrival order) is the GPU-seconds the jobs before it still run
after the job at ``k`` arrives (:func:`cut_overlaps`). Partitions into the fewest groups of at most
``max_part`` jobs are tried cheapest first (:func:`plan_partitions`); every group solved is kept, and the
bound is the best partition of all the solved groups together (:func:`best_partition`, a longest path
over positions), so a group solved for one partition also serves the others.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from formulation.instance import Instance, Job

MAX_PART_JOBS = 16
"""Default largest group: on one 8-GPU node, 16 jobs with Poisson arrivals are proven in 1-17 s
(docs/oracle.md), and a group that is not proven adds only its bound."""
MAX_PARTITIONS = 12
"""Partitions tried at most (each one after the first usually needs only a few new groups)."""


@dataclass(frozen=True)
class PartOutcome:
    """What one group's solve proved (slot units of the whole instance's slotted model)."""

    status: str
    bound_slots: int
    objective_slots: int
    seconds: float


@dataclass(frozen=True)
class SplitPart:
    """One group of a partition: the jobs at positions ``first .. stop-1`` in arrival order."""

    first: int
    stop: int
    outcome: PartOutcome

    @property
    def size(self) -> int:
        return self.stop - self.first


@dataclass
class SplitBound:
    """The best partition bound found: ``value_slots = Σ`` of its groups' proven bounds."""

    value_slots: int
    parts: tuple[SplitPart, ...]
    groups_solved: int = 0
    partitions_tried: int = 0
    seconds: float = 0.0
    stopped: str = ""
    max_part: int = MAX_PART_JOBS
    overlap_fraction: float = math.nan
    tried: list[dict[str, Any]] = field(default_factory=list)

    @property
    def proven_parts(self) -> int:
        return sum(1 for part in self.parts if part.outcome.status == "optimal")

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the value, the groups of the best partition, and how the search went."""
        return {
            "bound_slots": self.value_slots,
            "groups": [
                {
                    "jobs": part.size,
                    "positions": [part.first, part.stop],
                    "status": part.outcome.status,
                    "bound_slots": part.outcome.bound_slots,
                    "objective_slots": part.outcome.objective_slots,
                    "seconds": round(part.outcome.seconds, 3),
                }
                for part in self.parts
            ],
            "groups_proven": self.proven_parts,
            "groups_solved": self.groups_solved,
            "partitions_tried": self.partitions_tried,
            "max_part": self.max_part,
            "overlap_fraction": None if math.isnan(self.overlap_fraction) else round(self.overlap_fraction, 4),
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
            "tried": self.tried,
        }


def arrival_order(instance: Instance) -> tuple[Job, ...]:
    """The jobs by arrival (ties by id): the order groups are cut from."""
    return tuple(sorted(instance.jobs, key=lambda job: (job.arrival, job.id)))


def split_applies(instance: Instance) -> bool:
    """True when the jobs arrive at two or more different times: with one arrival time every group
    would see an empty cluster at that time, and the bound would be far below the whole instance's."""
    return len({job.arrival for job in instance.jobs}) >= 2 and len(instance.jobs) >= 2


def cut_overlaps(order: Sequence[Job], start: Mapping[str, float], completion: Mapping[str, float]) -> list[float]:
    """``overlaps[k]`` for ``k = 1 .. n-1`` (index 0 unused): the GPU-seconds the jobs at positions
    ``< k`` run, in the given schedule, after the job at position ``k`` arrives. Zero where the schedule
    has drained by then: a cut there loses nothing that this schedule shows."""
    overlaps = [0.0] * len(order)
    for k in range(1, len(order)):
        cut = order[k].arrival
        overlaps[k] = sum(job.num_gpus * max(0.0, completion[job.id] - max(cut, start[job.id])) for job in order[:k])
    return overlaps


def _best_cuts(n: int, parts: int, max_part: int, cost: Callable[[int], float]) -> tuple[int, ...] | None:
    """Cut positions (ascending) into exactly ``parts`` runs of 1..``max_part`` jobs with the least total
    ``cost``; None when no such partition exists."""
    inf = math.inf
    # best[p][k]: least cost of the first k jobs in p runs, the last ending at k
    best = [[inf] * (n + 1) for _ in range(parts + 1)]
    back = [[-1] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0.0
    for p in range(1, parts + 1):
        for k in range(1, n + 1):
            for size in range(1, min(max_part, k) + 1):
                before = best[p - 1][k - size]
                if before == inf:
                    continue
                value = before + (cost(k - size) if k - size > 0 else 0.0)
                if value < best[p][k]:
                    best[p][k], back[p][k] = value, k - size
    if best[parts][n] == inf:
        return None
    cuts: list[int] = []
    k = n
    for p in range(parts, 0, -1):
        k = back[p][k]
        if k > 0:
            cuts.append(k)
    return tuple(sorted(cuts))


ENUMERATE_PARTITIONS = 20_000
"""Up to this many partitions are listed and sorted exactly; beyond, the planner uses penalties."""


def _all_cuts(n: int, parts: int, max_part: int, cap: int) -> list[tuple[int, ...]] | None:
    """Every cut set of ``n`` jobs into ``parts`` runs of 1..``max_part``; None past ``cap`` of them."""
    found: list[tuple[int, ...]] = []

    def extend(first: int, left: int, cuts: tuple[int, ...]) -> bool:
        if left == 1:
            if 1 <= n - first <= max_part:
                found.append(cuts)
            return len(found) <= cap
        # the runs after this one must still fit: at least one job each, at most max_part
        for size in range(max(1, n - first - (left - 1) * max_part), min(max_part, n - first - (left - 1)) + 1):
            if not extend(first + size, left - 1, (*cuts, first + size)):
                return False
        return True

    return found if extend(0, parts, ()) else None


def plan_partitions(overlaps: Sequence[float], max_part: int, limit: int = MAX_PARTITIONS) -> Iterator[tuple[int, ...]]:
    """Up to ``limit`` cut sets into the fewest runs of at most ``max_part`` jobs (two at least), the
    cheapest by ``overlaps`` first.

    Where there are at most :data:`ENUMERATE_PARTITIONS` such partitions they are sorted exactly (ties by
    position). Beyond, the first is the cheapest (a dynamic program) and each next one the cheapest after
    the cuts already used are made dearer by the largest overlap, so that later ones explore other cuts."""
    n = len(overlaps)
    if n < 2:
        return
    parts = max(2, math.ceil(n / max_part))

    def cost(cuts: tuple[int, ...]) -> float:
        return sum(overlaps[k] for k in cuts)

    every = _all_cuts(n, parts, max_part, ENUMERATE_PARTITIONS)
    if every is not None:
        yield from sorted(every, key=lambda cuts: (cost(cuts), cuts))[:limit]
        return
    penalty = max(overlaps[1:], default=0.0) + 1.0
    used: dict[int, int] = {}
    seen: set[tuple[int, ...]] = set()
    for _ in range(limit * 4):
        found = _best_cuts(n, parts, max_part, lambda k: overlaps[k] + penalty * used.get(k, 0))
        if found is None:
            return
        for k in found:
            used[k] = used.get(k, 0) + 1
        if found in seen:
            continue
        seen.add(found)
        yield found
        if len(seen) >= limit:
            return


def best_partition(n: int, solved: Mapping[tuple[int, int], PartOutcome]) -> tuple[int, tuple[tuple[int, int], ...]]:
    """The partition of positions ``0 .. n-1`` into solved groups with the largest sum of bounds (a
    longest path over positions); ``(-1, ())`` when the solved groups cover no partition."""
    best: list[int] = [-1] * (n + 1)
    back: list[tuple[int, int] | None] = [None] * (n + 1)
    best[0] = 0
    ending: dict[int, list[tuple[int, int]]] = {}
    for first, stop in solved:
        ending.setdefault(stop, []).append((first, stop))
    for k in range(1, n + 1):
        for first, stop in ending.get(k, []):
            if best[first] < 0:
                continue
            value = best[first] + solved[(first, stop)].bound_slots
            if value > best[k]:
                best[k], back[k] = value, (first, stop)
    if best[n] < 0:
        return -1, ()
    groups: list[tuple[int, int]] = []
    k = n
    while k > 0:
        group = back[k]
        assert group is not None
        groups.append(group)
        k = group[0]
    return best[n], tuple(reversed(groups))


def group_instance(instance: Instance, order: Sequence[Job], first: int, stop: int) -> Instance:
    """The instance of the jobs at positions ``first .. stop-1`` in arrival order (same cluster,
    profiles, interference and progress rule)."""
    return replace(instance, jobs=tuple(order[first:stop]), name=f"{instance.name}[{first}:{stop}]")


def split_bound(
    instance: Instance,
    start: Mapping[str, float],
    completion: Mapping[str, float],
    solve_group: Callable[[Instance, float], PartOutcome],
    deadline: float,
    *,
    max_part: int = MAX_PART_JOBS,
    min_seconds: Callable[[int], float] = lambda size: 1.0,
    target_slots: float = math.inf,
    on_bound: Callable[[int], None] | None = None,
) -> SplitBound | None:
    """The arrival-split bound of ``instance`` (see the module's docstring), anytime until ``deadline``.

    Parameters
    ----------
    instance
        The whole instance.
    start, completion
        A schedule of it (the incumbent, validated): where to cut.
    solve_group
        Solves one group's instance within the given seconds and says what it proved, in slot units of
        the whole instance's model (same slot length and progress units).
    deadline
        ``time.time()`` by which it returns; a group is started only with at least ``min_seconds(size)``
        left.
    max_part
        Largest group.
    target_slots
        Stop once the bound reaches it (the incumbent's value: proven optimal).
    on_bound
        Called with every improvement of the bound.

    Returns
    -------
    SplitBound | None
        The best partition found, or None when no partition was solved in the time.
    """
    began = time.time()
    order = arrival_order(instance)
    n = len(order)
    overlaps = cut_overlaps(order, start, completion)
    work = sum(job.num_gpus * max(0.0, completion[job.id] - start[job.id]) for job in order)
    solved: dict[tuple[int, int], PartOutcome] = {}
    best_value = -1
    stopped = "every planned partition tried"
    tried: list[dict[str, Any]] = []
    partitions = 0
    for cuts in plan_partitions(overlaps, max_part):
        bounds = (0, *cuts, n)
        groups = [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
        todo = [group for group in groups if group not in solved]
        total = sum(stop - first for first, stop in todo)
        left = deadline - time.time()
        if any(left * (stop - first) / total < min_seconds(stop - first) for first, stop in todo):
            stopped = "time limit"  # some group of this partition could not be started: start none
            break
        complete = True
        for index, (first, stop) in enumerate(todo):
            left = deadline - time.time()
            remaining = sum(b - a for a, b in todo[index:])
            seconds = left * (stop - first) / remaining
            if seconds < min_seconds(stop - first):
                complete = False
                break
            solved[(first, stop)] = solve_group(group_instance(instance, order, first, stop), seconds)
        partitions += complete  # every group of it solved
        value, _ = best_partition(n, solved)
        tried.append({"cuts": list(cuts), "overlap": round(sum(overlaps[k] for k in cuts), 3), "best_slots": value})
        if value > best_value:
            best_value = value
            if on_bound is not None:
                on_bound(value)
        if not complete:
            stopped = "time limit"
            break
        if best_value >= target_slots - 1e-9:
            stopped = "reached the incumbent"
            break
        if time.time() >= deadline:
            stopped = "time limit"
            break
    value, groups_found = best_partition(n, solved)
    if value < 0:
        return None
    parts = tuple(SplitPart(first, stop, solved[(first, stop)]) for first, stop in groups_found)
    chosen = [k for k in range(1, n) if any(part.first == k for part in parts)]
    return SplitBound(
        value_slots=value,
        parts=parts,
        groups_solved=len(solved),
        partitions_tried=partitions,
        seconds=time.time() - began,
        stopped=stopped,
        max_part=max_part,
        overlap_fraction=sum(overlaps[k] for k in chosen) / work if work > 0 else math.nan,
        tried=tried,
    )
