"""Non-sharing baselines: FIFO, SJF, SSF (non-preemptive) and SRSF (preemptive).

- FIFO: SJF-BSBF (IWQoS'24) §VI-A1; strict arrival order, the head blocks (as Tiresias' simulator).
- SJF: SJF-BSBF §VI-A2; isolated duration ``L_j``, backfilling.
- SSF: shortest service (``L_j × G_j``) first, Tiresias' ``shortest-gpu``; non-preemptive.
- SRSF: Muri (SIGCOMM'22) §4.3 ``p_i = r_i × g_i`` / Tiresias (NSDI'19); preemptive at every event.

Every job runs alone on its GPUs in its fastest accumulation mode; placement is consolidated (or Hay
with the ``+hay`` suffix). See docs/policies.md for the paper sections and the choices made.

The pending queue is kept sorted incrementally in per-GPU-demand buckets (:class:`PendingQueue`), so a
decision costs O(#demands) per job started instead of a scan of the whole queue: the best job that
fits ``f`` free GPUs is the best head among the buckets of demand ``<= f`` — exactly what a scan of
the priority order skipping jobs that do not fit (backfilling) would pick.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from heuristics.core import Action, ClusterView, Preempt, Start
from heuristics.placement import InstanceFacts, Scratch, check_placement
from heuristics.registry import register_policy

Key = tuple[Any, ...]
KeyFunction = Callable[[InstanceFacts, ClusterView, str], Key]


class PendingQueue:
    """Pending jobs in priority order, bucketed by GPU demand, synchronised with ``view.pending``.

    Parameters
    ----------
    key
        ``key(facts, view, job_id)``: smaller is served first. Evaluated once, when the job (re-)enters
        the queue; a job's key must not change while it is pending (re-queue it otherwise).
    """

    def __init__(self, facts: InstanceFacts, key: KeyFunction) -> None:
        self.facts = facts
        self.key = key
        self.members: dict[str, tuple[Key, int, str]] = {}
        self.buckets: dict[int, list[tuple[Key, int, str]]] = {}
        self._demand: dict[str, int] = {job.id: job.num_gpus for job in facts.instance.jobs}
        self._order: dict[str, int] = {job.id: i for i, job in enumerate(facts.instance.jobs)}

    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self.members

    def demand(self, job_id: str) -> int:
        return self._demand[job_id]

    def sync(self, view: ClusterView) -> None:
        """Add newly pending jobs, drop jobs that are no longer pending (set operations, C speed).

        Fast path: between two decisions the pending set changes only by arrivals (it grows) and by
        the owning policy's own actions (which it mirrors in the queue), so equal sizes mean nothing
        changed; any other difference triggers a full resynchronisation.
        """
        current = view.pending_set if view.pending_set is not None else set(view.pending)
        members = self.members
        if len(current) == len(members):
            return
        for job_id in members.keys() - current:
            self.discard(job_id)
        for job_id in sorted(current - members.keys(), key=self._order.__getitem__):
            self.add(job_id, self.key(self.facts, view, job_id))

    def add(self, job_id: str, key: Key) -> None:
        item = (key, self._order[job_id], job_id)
        self.members[job_id] = item
        bisect.insort(self.buckets.setdefault(self._demand[job_id], []), item)

    def discard(self, job_id: str) -> None:
        item = self.members.pop(job_id, None)
        if item is None:
            return
        bucket = self.buckets[self._demand[job_id]]
        index = bisect.bisect_left(bucket, item)
        del bucket[index]

    def best_fitting(self, free: int) -> tuple[Key, int, str] | None:
        """The first job in priority order whose demand is at most ``free``."""
        best: tuple[Key, int, str] | None = None
        for demand, bucket in self.buckets.items():
            if demand <= free and bucket and (best is None or bucket[0] < best):
                best = bucket[0]
        return best

    def first(self) -> tuple[Key, int, str] | None:
        """The first job in priority order, whatever its demand."""
        return self.best_fitting(1 << 30)

    def ordered(self, max_demand: int | None = None) -> Iterator[tuple[Key, int, str]]:
        """Jobs in priority order (only those with demand <= ``max_demand``), a snapshot."""
        import heapq

        lists = [
            list(bucket)
            for demand, bucket in self.buckets.items()
            if bucket and (max_demand is None or demand <= max_demand)
        ]
        return heapq.merge(*lists)


def plan_by_priority(
    queue: PendingQueue, running: list[tuple[Key, int, str]], capacity: int
) -> tuple[list[str], list[str]]:
    """Greedy selection over running and pending jobs in one priority order (exclusive GPUs).

    Walks the merged order of ``running`` (sorted here) and ``queue``; a job is chosen if its demand fits
    in the GPUs left (GPU count: placement is free to consolidate), otherwise skipped. Returns
    ``(preempt, start)``: running jobs not chosen and pending jobs chosen (removed from ``queue``). When
    nothing would start, nothing is preempted either (no point stopping jobs to leave GPUs idle) and
    ``queue`` is left unchanged.
    """
    running = sorted(running)
    preempt: list[str] = []
    start: list[tuple[Key, int, str]] = []
    index = 0
    while capacity > 0:
        candidate = queue.best_fitting(capacity)
        current = running[index] if index < len(running) else None
        if current is None and candidate is None:
            break
        if current is not None and (candidate is None or current[:2] <= candidate[:2]):
            index += 1
            demand = queue.demand(current[2])
            if demand <= capacity:
                capacity -= demand
            else:
                preempt.append(current[2])
            continue
        assert candidate is not None
        queue.discard(candidate[2])
        start.append(candidate)
        capacity -= queue.demand(candidate[2])
    preempt.extend(item[2] for item in running[index:])
    if not start:
        return [], []
    return preempt, [item[2] for item in start]


def key_fifo(facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:
    """FIFO (SJF-BSBF §VI-A1): arrival time (ties: instance order)."""
    return (facts.job(job_id).arrival,)


def key_sjf(facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:
    """SJF (SJF-BSBF §VI-A2; Algorithm 1 line 1's ``L_k``): remaining time alone = remaining iterations ×
    fastest alone iteration time (``L_j`` for a job that has not run)."""
    return (view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id), facts.job(job_id).arrival)


def key_ssf(facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:
    """SSF (Tiresias' ``shortest-gpu``): remaining service = remaining time alone × GPU demand (GPU-s)."""
    job = facts.job(job_id)
    return (view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id) * job.num_gpus, job.arrival)


class QueuePolicy:
    """A non-preemptive, non-sharing policy: serve pending jobs in ``key`` order on idle GPUs.

    FIFO (SJF-BSBF §VI-A1), SJF (§VI-A2) and SSF (Tiresias ``shortest-gpu``) are instances of it.

    Parameters
    ----------
    name
        Registered name.
    key
        Priority (smaller first), fixed while a job is pending.
    backfill
        ``True``: a job that does not fit is skipped and later ones may start (SJF/SSF as in Tiresias'
        simulator); ``False``: strict order, the head blocks the queue (FIFO).
    placement
        ``"consolidated"`` or ``"hay"`` (see :mod:`heuristics.placement`).
    """

    preemptive = False
    round_length: float | None = None

    def __init__(self, name: str, key: KeyFunction, *, backfill: bool, placement: str = "consolidated") -> None:
        self.name = name if placement == "consolidated" else f"{name}+{placement}"
        self.key = key
        self.backfill = backfill
        self.placement = check_placement(placement)
        self.reset()

    def reset(self) -> None:
        self.facts: InstanceFacts | None = None
        self.queue: PendingQueue | None = None

    def _bind(self, view: ClusterView) -> PendingQueue:
        if self.facts is None or self.facts.instance is not view.instance or self.queue is None:
            self.facts = InstanceFacts(view.instance)
            self.queue = PendingQueue(self.facts, self.key)
        self.queue.sync(view)
        return self.queue

    def decide(self, view: ClusterView) -> Sequence[Action]:
        queue = self._bind(view)
        if not len(queue):
            return []
        occupancy = view.occupancy
        free = sum(1 for jobs in occupancy if not jobs) if occupancy is not None else len(view.free_gpus())
        if free == 0:
            return []
        head = queue.best_fitting(free) if self.backfill else queue.first()
        if head is None or queue.demand(head[2]) > free:
            return []
        assert self.facts is not None
        scratch = Scratch(view, self.facts)
        actions: list[Action] = []
        while head is not None:
            job_id = head[2]
            demand = queue.demand(job_id)
            if demand > scratch.free_count:
                break
            gpus = scratch.pick_free(demand, self.placement)
            if gpus is None:  # pragma: no cover - pick_free only fails when too few GPUs are idle
                break
            steps = self.facts.fastest_steps(job_id)
            scratch.place(job_id, gpus, steps)
            queue.discard(job_id)
            actions.append(Start(job_id, tuple(gpus), steps))
            if scratch.free_count == 0:
                break
            head = queue.best_fitting(scratch.free_count) if self.backfill else queue.first()
        return actions


class SRSFPolicy:
    """Shortest Remaining Service First, preemptive, exclusive GPUs.

    Priority ``p = r × g`` (remaining time alone × GPUs; Muri §4.3, from Tiresias). At every event the
    jobs to run are chosen greedily in priority order over running and pending jobs (a job that does not
    fit in what is left is skipped); running jobs not chosen are preempted, chosen pending jobs start on
    idle GPUs. Running jobs keep their GPUs (no migration); ties keep the running job.
    """

    preemptive = True
    round_length: float | None = None

    def __init__(self, *, placement: str = "consolidated") -> None:
        self.placement = check_placement(placement)
        self.name = "srsf" if placement == "consolidated" else f"srsf+{placement}"
        self.reset()

    def reset(self) -> None:
        self.facts: InstanceFacts | None = None
        self.queue: PendingQueue | None = None

    @staticmethod
    def _pending_key(facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:
        job = facts.job(job_id)
        service = view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id) * job.num_gpus
        return (service, 1, job.arrival)  # 1: a pending job loses ties against a running one

    def decide(self, view: ClusterView) -> Sequence[Action]:
        if self.facts is None or self.facts.instance is not view.instance or self.queue is None:
            self.facts = InstanceFacts(view.instance)
            self.queue = PendingQueue(self.facts, self._pending_key)
        facts, queue = self.facts, self.queue
        queue.sync(view)
        if not len(queue):
            return []
        running: list[tuple[Key, int, str]] = []
        for job_id in view.running:
            job = facts.job(job_id)
            service = view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id) * job.num_gpus
            running.append(((service, 0, job.arrival), 0, job_id))
        preempt, start = plan_by_priority(queue, running, view.instance.cluster.num_gpus)
        if not start:
            return []
        return preempt_and_start(view, facts, queue, preempt, start, self.placement)


def preempt_and_start(
    view: ClusterView,
    facts: InstanceFacts,
    queue: PendingQueue,
    preempt: Sequence[str],
    start: Sequence[str],
    placement: str,
) -> list[Action]:
    """The actions of a :func:`plan_by_priority` plan: preempt ``preempt``, then start each job of
    ``start`` exclusively on free GPUs (``placement``) in its fastest mode."""
    scratch = Scratch(view, facts)
    for job_id in preempt:
        scratch.remove(job_id)
    actions: list[Action] = [Preempt(job_id) for job_id in preempt]
    for job_id in start:
        gpus = scratch.pick_free(queue.demand(job_id), placement)
        assert gpus is not None  # plan_by_priority only starts what fits
        steps = facts.fastest_steps(job_id)
        scratch.place(job_id, gpus, steps)
        actions.append(Start(job_id, tuple(gpus), steps))
    return actions


def _register() -> None:
    register_policy(
        "fifo",
        lambda placement="consolidated", backfill=False: QueuePolicy(
            "fifo", key_fifo, backfill=backfill, placement=placement
        ),
        "First-In-First-Out, exclusive GPUs, non-preemptive, strict order (SJF-BSBF §VI-A1)",
    )
    register_policy(
        "sjf",
        lambda placement="consolidated", backfill=True: QueuePolicy(
            "sjf", key_sjf, backfill=backfill, placement=placement
        ),
        "Shortest Job First by isolated duration L_j, exclusive, non-preemptive, backfilling (SJF-BSBF §VI-A2)",
    )
    register_policy(
        "ssf",
        lambda placement="consolidated", backfill=True: QueuePolicy(
            "ssf", key_ssf, backfill=backfill, placement=placement
        ),
        "Shortest Service First by GPU-time L_j×G_j, exclusive, non-preemptive, backfilling "
        "(Tiresias 'shortest-gpu'; Muri §4.3 without preemption)",
    )
    register_policy(
        "srsf",
        lambda placement="consolidated": SRSFPolicy(placement=placement),
        "Shortest Remaining Service First (remaining time × GPUs), exclusive, preemptive at every event "
        "(Muri §4.3 / Tiresias)",
    )


_register()
