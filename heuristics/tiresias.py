"""Tiresias' discretised 2D-LAS (Gu et al., NSDI'19, §3.2-3.3; as in its open-source simulator).

Priority is the *attained service* in GPU-seconds (GPUs held × time held), discretised into K queues:
a job enters queue 0 and is demoted to queue ``k+1`` when its attained service since its last
promotion reaches ``thresholds[k]``. Queues are served in order; inside a queue, running jobs keep
their GPUs ahead of pending ones (no preemption within a queue) and pending jobs are served first come,
first served (a job joins the back of its queue when it arrives, is demoted, promoted or preempted).
A job of a higher queue that does not fit is skipped (the lower-priority jobs behind it may run). The
selection is redone at every arrival, completion, demotion and promotion; running jobs not selected are
preempted (they keep their progress; restarting costs ``restart_cost``).

Starvation: a pending job not in queue 0 whose pending time since its last promotion reaches
``promote_knob`` × its executed time since then (seconds held, not GPU-seconds, as Tiresias'
simulator compares them) is promoted back to queue 0 with that service reset (Tiresias'
``PROMOTE_KNOB``; 0 disables it).

Timing: by default the policy is event-driven and asks to be woken at the exact instant of the next
demotion or promotion (Tiresias' simulator does the same); with ``round_length`` set, queues are
re-evaluated at arrivals, completions and round boundaries only.

Choices (docs/policies.md): ``thresholds = (3250, 7200)`` GPU-seconds, i.e. three queues — the defaults of
Tiresias' simulator (``queue_limit``); ``promote_knob = 0`` (starvation promotion off) by default, as in
that simulator's ``dlas-gpu`` scheme that Muri and SJF-BSBF compare against — set e.g. ``promote_knob=8``
to turn it on (on heavily overloaded traces it time-slices the cluster: Muri trace2 goes from about 10k
to about 770k preemptions event-driven, 470k with 360-s rounds); placement consolidated (Tiresias
consolidates placement-sensitive jobs; duetto has no model-skew information, so it consolidates all).
Exclusive GPUs (no sharing).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from formulation.errors import DuettoInputError
from heuristics.baselines import Key, PendingQueue, plan_by_priority, preempt_and_start
from heuristics.core import Action, ClusterView
from heuristics.placement import InstanceFacts, check_placement
from heuristics.registry import register_policy

DEFAULT_THRESHOLDS: tuple[float, ...] = (3250.0, 7200.0)
#: Off by default, as in Tiresias' simulator (``dlas-gpu``), the configuration Muri (§5: "default
#: hyper-parameters in the open-source code") and SJF-BSBF compare against. Tiresias' simulator sweeps
#: 0.5-1000; 8 is a typical value.
DEFAULT_PROMOTE_KNOB = 0.0
#: ``None``: event-driven, woken at the exact instant of every demotion and promotion (as Tiresias'
#: simulator jumps to its next "job jump"); a number: queues are re-evaluated at arrivals, completions
#: and every ``round_length`` seconds instead.
DEFAULT_ROUND_LENGTH: float | None = None


def _no_key(facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:  # pragma: no cover
    raise AssertionError("Tiresias adds pending jobs with explicit keys")


class LasQueues:
    """The bookkeeping of Tiresias' discretised 2D-LAS (module docstring), shared by :class:`TiresiasPolicy`
    and the LAS ordering of Muri-L and Tesserae-T (:class:`heuristics.muri.LASOrdering`): per job its
    queue, its place in the queue, its attained service at the last promotion and its pending time; the
    demotion of running jobs, the starvation promotion of pending ones and the time of the next of
    either. Subclasses set ``queue`` (the :class:`PendingQueue` of pending jobs) and ``facts``."""

    queue: PendingQueue | None
    facts: InstanceFacts | None

    def __init__(self, thresholds: Sequence[float], promote_knob: float) -> None:
        try:
            limits = tuple(float(t) for t in thresholds)
        except (TypeError, ValueError):
            raise DuettoInputError(f"must be a list of numbers, got {thresholds!r}", field="thresholds") from None
        if any(not t > 0 for t in limits) or list(limits) != sorted(limits):
            raise DuettoInputError(f"must be positive and increasing, got {thresholds!r}", field="thresholds")
        if not isinstance(promote_knob, int | float) or not promote_knob >= 0:
            raise DuettoInputError(f"must be a number >= 0, got {promote_knob!r}", field="promote_knob")
        self.thresholds = limits
        self.promote_knob = float(promote_knob)
        self.reset_queues()

    def reset_queues(self) -> None:
        self.level: dict[str, int] = {}  # queue index per job
        self.base: dict[str, float] = {}  # attained service at the last promotion
        self.stamp: dict[str, int] = {}  # order inside the queue
        self.pending_since: dict[str, float] = {}
        self.pending_total: dict[str, float] = {}  # pending time since the last promotion
        self.promotions: list[tuple[float, int, str]] = []  # (time, stamp, job) — lazy
        self._counter = 0
        self.promoted = 0
        self.demoted = 0

    def _restamp(self, job_id: str) -> int:
        self._counter += 1
        self.stamp[job_id] = self._counter
        return self._counter

    def _pending_key(self, job_id: str) -> Key:
        return (self.level[job_id], 1, self.stamp[job_id])

    def running_keys(self, view: ClusterView) -> list[tuple[Key, int, str]]:
        """Running jobs ranked as :func:`~heuristics.baselines.plan_by_priority` wants them."""
        level, stamp = self.level, self.stamp
        return [((level.get(j, 0), 0, stamp.get(j, 0)), 0, j) for j in view.running]

    def _executed(self, view: ClusterView, job_id: str) -> float:
        return view.attained_service.get(job_id, 0.0) - self.base.get(job_id, 0.0)

    def _schedule_promotion(self, view: ClusterView, job_id: str) -> None:
        if self.promote_knob <= 0 or self.level[job_id] == 0:
            return
        executed = self._executed(view, job_id)
        if executed <= 0:
            return
        # Tiresias compares the waiting time with the executed *time* (GPU-seconds / GPUs), not GPU-time.
        executed_time = executed / self.facts.job(job_id).num_gpus if self.facts is not None else executed
        due = self.pending_since[job_id] + max(0.0, self.promote_knob * executed_time - self.pending_total[job_id])
        heapq.heappush(self.promotions, (due, self.stamp[job_id], job_id))

    def _enqueue(self, view: ClusterView, job_id: str) -> None:
        """``job_id`` became pending (arrived or preempted): it joins the back of its queue."""
        assert self.queue is not None
        if job_id not in self.level:  # a new arrival enters queue 0
            self.level[job_id] = 0
            self.base[job_id] = 0.0
            self.pending_total[job_id] = 0.0
        self._restamp(job_id)
        self.pending_since[job_id] = view.time
        self.queue.add(job_id, self._pending_key(job_id))
        self._schedule_promotion(view, job_id)

    def _demote_running(self, view: ClusterView) -> bool:
        last = len(self.thresholds)
        moved_any = False
        for job_id in view.running:
            level = self.level.get(job_id, 0)
            if level >= last:
                continue
            executed = self._executed(view, job_id)
            moved = False
            while level < last and executed >= self.thresholds[level] * (1 - 1e-12):
                level += 1
                moved = True
            if moved:
                self.level[job_id] = level
                self._restamp(job_id)
                self.demoted += 1
                moved_any = True
        return moved_any

    def _promote_starved(self, view: ClusterView, queue: PendingQueue) -> bool:
        now = view.time
        heap = self.promotions
        promoted = False
        while heap and heap[0][0] <= now * (1 + 1e-12) + 1e-9:
            _, stamp, job_id = heapq.heappop(heap)
            if job_id not in queue or self.stamp.get(job_id) != stamp or self.level.get(job_id, 0) == 0:
                continue  # stale: the job ran, moved or was promoted since
            self.level[job_id] = 0
            self.base[job_id] = view.attained_service.get(job_id, 0.0)
            self.pending_total[job_id] = 0.0
            self.pending_since[job_id] = now
            queue.discard(job_id)
            self._restamp(job_id)
            queue.add(job_id, self._pending_key(job_id))
            self.promoted += 1
            promoted = True
        return promoted

    def _count_pending_time(self, view: ClusterView, job_id: str) -> None:
        """``job_id`` starts: its pending time since it last ran counts towards starvation."""
        if self.attained_started(view, job_id):
            now = view.time
            self.pending_total[job_id] = self.pending_total.get(job_id, 0.0) + now - self.pending_since.get(job_id, now)

    def attained_started(self, view: ClusterView, job_id: str) -> bool:
        """Whether ``job_id`` already ran (its pending time then counts towards starvation)."""
        return self._executed(view, job_id) > 0

    def _next_queue_change(self, view: ClusterView) -> float:
        """The next demotion of a running job or promotion of a starving one (``inf``: none)."""
        best = math.inf
        last = len(self.thresholds)
        for job_id in view.running:
            level = self.level.get(job_id, 0)
            if level >= last:
                continue
            gpus = len(view.running[job_id].gpus)
            left = self.thresholds[level] - self._executed(view, job_id)
            best = min(best, view.time + max(left, 0.0) / gpus)
        heap = self.promotions
        queue = self.queue
        while heap and (queue is None or heap[0][2] not in queue or self.stamp.get(heap[0][2]) != heap[0][1]):
            heapq.heappop(heap)
        if heap:
            best = min(best, heap[0][0])
        return best


class TiresiasPolicy(LasQueues):
    """Discretised 2D-LAS with starvation promotion (see the module docstring).

    Parameters
    ----------
    thresholds
        Attained-service limits (GPU-seconds) between consecutive queues, increasing.
    promote_knob
        Starvation promotion factor (0 disables promotion).
    round_length
        ``None`` (default): event-driven, woken at the exact instant of each demotion and promotion.
        A number of seconds: queues are re-evaluated at arrivals, completions and every round instead
        (e.g. 360, the six-minute interval of Muri and Tesserae), so queue changes wait for the next
        event or round (with starvation promotion on, far fewer preemptions on overloaded traces).
    """

    preemptive = True

    def __init__(
        self,
        *,
        thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
        promote_knob: float = DEFAULT_PROMOTE_KNOB,
        placement: str = "consolidated",
        round_length: float | None = DEFAULT_ROUND_LENGTH,
    ) -> None:
        super().__init__(thresholds, promote_knob)
        if round_length is not None and not (isinstance(round_length, int | float) and round_length > 0):
            raise DuettoInputError(f"must be a number > 0 or none, got {round_length!r}", field="round_length")
        self.round_length: float | None = None if round_length is None else float(round_length)
        self.placement = check_placement(placement)
        self.name = "tiresias" if placement == "consolidated" else f"tiresias+{placement}"
        self.reset()

    def reset(self) -> None:
        self.facts = None
        self.queue = None
        self.reset_queues()
        self._expected: tuple[int, int] = (-1, -1)

    # --- bookkeeping -------------------------------------------------------------------------------
    def _sync(self, view: ClusterView) -> PendingQueue:
        if self.facts is None or self.facts.instance is not view.instance or self.queue is None:
            self.reset()
            self.facts = InstanceFacts(view.instance)
            self.queue = PendingQueue(self.facts, _no_key)
        queue = self.queue
        current = view.pending_set if view.pending_set is not None else set(view.pending)
        if len(current) == len(queue):  # only arrivals and our own actions change it (see PendingQueue)
            return queue
        for job_id in queue.members.keys() - current:
            queue.discard(job_id)
        for job_id in sorted(current - queue.members.keys(), key=lambda j: (view.instance.job(j).arrival, j)):
            self._enqueue(view, job_id)
        return queue

    # --- the policy ---------------------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Sequence[Action]:
        queue = self._sync(view)
        changed = self._demote_running(view)
        changed = self._promote_starved(view, queue) or changed
        counts = (len(queue), len(view.running))
        if not len(queue) or (not changed and counts == self._expected):
            # Same jobs with the same priorities as after the last decision: the same plan.
            self._expected = counts
            return []
        running = self.running_keys(view)
        preempt, start = plan_by_priority(queue, running, view.instance.cluster.num_gpus)
        self._expected = (len(queue) + len(preempt), len(view.running) - len(preempt) + len(start))
        if not start:
            return []
        assert self.facts is not None
        actions = preempt_and_start(view, self.facts, queue, preempt, start, self.placement)
        for job_id in start:
            self._count_pending_time(view, job_id)
        for job_id in preempt:  # back to the end of their queues, as pending jobs
            self._enqueue(view, job_id)
        return actions

    def next_decision_time(self, view: ClusterView) -> float | None:
        """The next demotion of a running job or promotion of a starving one (exact mode only)."""
        if self.round_length is not None:
            return None
        best = self._next_queue_change(view)
        return best if math.isfinite(best) else None


register_policy(
    "tiresias",
    lambda **options: TiresiasPolicy(**options),
    "Tiresias discretised 2D-LAS: queues on attained GPU-time (3250/7200 GPU-s), preemptive, optional "
    "starvation promotion (promote_knob) (Tiresias NSDI'19 §3.2-3.3)",
)
