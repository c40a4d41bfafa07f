"""The one scheduling loop: cluster state, the progress model, applying and checking policy actions.

Two layers, so that the simulator (virtual clock) and the cluster runtime (real clock) share it:

:class:`ClusterState`
    Who holds which GPUs, pending jobs in arrival order, per-job progress under SPEC.md's rule (rate
    ``1/(t_iter(steps, nodes) · ξ_eff)``, ``ξ_eff`` the largest ratio over the jobs sharing any of the
    job's GPUs, no progress during a restart overhead), the segments each job ran, and the *predicted*
    completion of every running job (a heap with lazy invalidation: an entry is stale when the job's
    version changed). Every :class:`~heuristics.core.Start` / :class:`~heuristics.core.Preempt` is
    checked before it is applied; a bad one raises :class:`InvalidActionError` naming job, GPU and rule.
    Rate updates are incremental: starting or stopping a job re-rates only the jobs on its GPUs.

:class:`SchedulingLoop`
    Feeds events (arrivals, completions, ticks) at a given time into the state, asks the policy for
    actions on a :class:`~heuristics.core.ClusterView` and applies them. It has no clock of its own:
    the caller says what time it is. :mod:`heuristics.simulator` drives it from the predicted
    completions; the runtime drives it from real events (it calls :meth:`SchedulingLoop.step` with the
    jobs that really finished, and may correct progress with :meth:`ClusterState.set_progress`).

Slotted mode (``slot=Δ``): the caller only steps on multiples of Δ; predicted completions follow the
slotted rule (a job completes at the end of the first slot in which its progress reaches ``I_j``,
relative tolerance 1e-9, and holds its GPUs through that slot), and a restart overhead costs whole
slots (rounded up), as the validator does.
"""

from __future__ import annotations

import bisect
import heapq
import math
import operator
import time as _time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.progress import MuriProgress
from formulation.schedule import JobPlan, Schedule, Segment
from formulation.speed import accumulation_options
from heuristics.core import Action, ClusterView, Policy, Preempt, RunningJob, Start

#: Relative tolerance of "progress reached I_j" (SPEC.md, slotted semantics; the validator's REL_TOL).
REL_TOL = 1e-9
#: Segments shorter than this (seconds) are not kept: the validator rejects them.
MIN_SEGMENT = 1e-6
_MEMORY_SLACK = 1e-9


class InvalidActionError(RuntimeError):
    """A policy returned an action that breaks a rule (unknown job, gang size, capacity, memory, ...).

    Attributes
    ----------
    policy, time, action, rule
        Who, when, what and which rule; ``str(error)`` is one line with all of them.
    """

    def __init__(self, policy: str, time: float, action: Action, rule: str, message: str) -> None:
        self.policy = policy
        self.time = time
        self.action = action
        self.rule = rule
        super().__init__(f"policy '{policy}' at t={time:g}: invalid {action!r} [{rule}]: {message}")


class PolicyStalledError(RuntimeError):
    """The policy leaves jobs pending on an idle cluster with nothing left to happen."""


@dataclass(slots=True)
class _Static:
    """Per-job facts the loop looks up on every event (cached once)."""

    job: Job
    rank: int  # position in arrival order (ties: instance order)
    allowed_steps: frozenset[int]
    memory: dict[int, float]  # steps -> GiB per GPU


class _Run:
    """A running job's live state."""

    __slots__ = (
        "gpus",
        "loss",
        "overhead_end",
        "period",
        "predicted",
        "progress",
        "rate",
        "segment_start",
        "start_attained",
        "start_progress",
        "steps",
        "t_iter",
        "time_at",
        "version",
    )

    def __init__(
        self,
        gpus: tuple[int, ...],
        steps: int,
        start: float,
        overhead_end: float,
        t_iter: float,
        progress: float,
        attained: float,
    ) -> None:
        self.gpus = gpus
        self.steps = steps
        self.segment_start = start
        self.overhead_end = overhead_end
        self.t_iter = t_iter
        self.progress = progress  # at time_at
        self.time_at = start
        self.rate = 0.0
        self.version = 0
        self.predicted = math.inf
        self.start_progress = progress
        self.start_attained = attained
        self.period = math.inf  # Muri's rule: seconds per iteration since ``time_at`` (the last event)
        self.loss = 0.0  # Muri's rule: overhead charged when the interval from ``time_at`` ends


@dataclass
class LoopStats:
    """Counters of one run of the loop."""

    decisions: int = 0
    decide_seconds: float = 0.0
    starts: int = 0
    preemptions: int = 0
    migrations: int = 0  # restarts on a different GPU set than the previous segment
    decide_times: list[float] = field(default_factory=list)


class ClusterState:
    """Live cluster state and the progress model (see the module docstring).

    Parameters
    ----------
    instance
        The problem; its cluster's ``capacity`` is ``C``.
    restart_cost
        Seconds without progress at the start of every segment after a job's first.
    slot
        Slot length Δ for the slotted semantics, ``None`` for continuous time.
    record_decide_times
        Keep every decision's wall time in :attr:`stats` (for benchmarks).
    """

    def __init__(
        self,
        instance: Instance,
        *,
        restart_cost: float = 0.0,
        slot: float | None = None,
        record_decide_times: bool = False,
    ) -> None:
        if not math.isfinite(restart_cost) or restart_cost < 0:
            raise DuettoInputError(f"must be finite and >= 0, got {restart_cost!r}", field="restart_cost")
        if slot is not None and not (math.isfinite(slot) and slot > 0):
            raise DuettoInputError(f"must be finite and > 0, got {slot!r}", field="slot")
        # Muri's simulator's rule (formulation.progress): continuous, with its own overheads.
        self.muri: MuriProgress | None = instance.progress if isinstance(instance.progress, MuriProgress) else None
        if self.muri is not None and slot is not None:
            raise DuettoInputError(
                "the instance uses Muri's progress rule, which is continuous-time: simulate it without a slot",
                field="slot",
            )
        if self.muri is not None and restart_cost > 0:
            raise DuettoInputError(
                "the instance uses Muri's progress rule, which charges its own start overheads: "
                f"restart_cost must be 0, got {restart_cost:g}",
                field="restart_cost",
            )
        self.instance = instance
        self.cluster = instance.cluster
        self.capacity = instance.cluster.capacity
        self.slot = slot
        self.restart_cost = float(restart_cost)
        # The validator charges a restart whole slots in slotted mode.
        self.overhead = (
            math.ceil(self.restart_cost / slot - 1e-9) * slot
            if slot is not None and self.restart_cost > 0
            else self.restart_cost
        )
        self.record_decide_times = record_decide_times
        ordered = sorted(range(len(instance.jobs)), key=lambda i: (instance.jobs[i].arrival, i))
        self._by_rank: list[str] = [instance.jobs[i].id for i in ordered]
        self.static: dict[str, _Static] = {}
        for rank, index in enumerate(ordered):
            job = instance.jobs[index]
            profile = instance.profiles[job.profile]
            steps = accumulation_options(profile, job.batch_size)
            self.static[job.id] = _Static(
                job, rank, frozenset(steps), {s: profile.memory_gib(job.batch_size // s) for s in steps}
            )
        num_gpus = self.cluster.num_gpus
        self.occupancy: list[list[str]] = [[] for _ in range(num_gpus)]
        self.memory_used: list[float] = [0.0] * num_gpus
        self.running: dict[str, _Run] = {}
        self._pending_ranks: list[int] = []
        self._pending_ids: list[str] = []  # parallel to _pending_ranks
        self._pending_set: set[str] = set()
        self._pending_tuple: tuple[str, ...] | None = ()
        self.progress: dict[str, float] = {}  # arrived jobs not running: iterations done
        self.attained: dict[str, float] = {}  # GPU-seconds held (running: up to segment start)
        self.first_start: dict[str, float] = {}
        self.completion: dict[str, float] = {}
        self.segments: dict[str, list[Segment]] = {}
        self.heap: list[tuple[float, int, str, int]] = []
        self._seq = 0
        self._ratio_cache: dict[tuple[str, str], float | None] = {}
        self._titer_cache: dict[tuple[str, int, int], float] = {}
        self.stats = LoopStats()
        self.now = 0.0

    # --- look-ups ---------------------------------------------------------------------------------
    def ratio(self, victim: str, other: str) -> float | None:
        """ξ of ``victim`` next to ``other`` (cached by profile pair); ``None``: may not share."""
        instance = self.instance
        pv = self.static[victim].job.profile
        po = self.static[other].job.profile
        key = (pv, po)
        try:
            return self._ratio_cache[key]
        except KeyError:
            value = instance.interference.ratio(instance.profiles[pv], instance.profiles[po])
            self._ratio_cache[key] = value
            return value

    def iteration_time(self, job_id: str, steps: int, num_nodes: int) -> float:
        """``Instance.iteration_time`` (Eq. 3), cached."""
        key = (job_id, steps, num_nodes)
        value = self._titer_cache.get(key)
        if value is None:
            value = self.instance.iteration_time(self.static[job_id].job, steps, num_nodes)
            self._titer_cache[key] = value
        return value

    def memory(self, job_id: str, steps: int) -> float:
        """GiB per GPU of ``job_id`` with ``steps`` accumulation steps."""
        return self.static[job_id].memory[steps]

    def is_pending(self, job_id: str) -> bool:
        return job_id in self._pending_set

    @property
    def pending(self) -> tuple[str, ...]:
        """Pending job ids in arrival order."""
        if self._pending_tuple is None:
            self._pending_tuple = tuple(self._pending_ids)
        return self._pending_tuple

    @property
    def pending_set(self) -> frozenset[str] | set[str]:
        """The pending job ids as a set (live; do not modify)."""
        return self._pending_set

    def progress_at(self, job_id: str, now: float) -> float:
        """Iterations done by ``job_id`` at ``now`` (``now`` not before the last event)."""
        run = self.running.get(job_id)
        if run is None:
            return self.progress.get(job_id, 0.0)
        if self.muri is not None:  # as if ``now`` were an event (the rule only moves progress at events)
            return run.progress + max(0.0, now - run.time_at - run.loss) / run.period
        begin = run.time_at if run.time_at > run.overhead_end else run.overhead_end
        if now <= begin:
            return run.progress
        return run.progress + run.rate * (now - begin)

    def attained_at(self, job_id: str, now: float) -> float:
        """GPU-seconds ``job_id`` has held GPUs up to ``now``."""
        run = self.running.get(job_id)
        held = self.attained.get(job_id, 0.0)
        if run is not None:
            held += (now - run.segment_start) * len(run.gpus)
        return held

    def next_completion(self) -> tuple[float, str] | None:
        """Earliest valid predicted completion ``(time, job_id)``, dropping stale heap entries."""
        heap = self.heap
        running = self.running
        while heap:
            when, _, job_id, version = heap[0]
            run = running.get(job_id)
            if run is not None and run.version == version:
                return when, job_id
            heapq.heappop(heap)
        return None

    # --- events -----------------------------------------------------------------------------------
    def submit(self, job_id: str, now: float) -> None:
        """``job_id`` arrives (becomes pending) at ``now``."""
        static = self.static.get(job_id)
        if static is None:
            raise DuettoInputError(f"unknown job '{job_id}'")
        if job_id in self.progress or job_id in self.running or job_id in self.completion:
            raise DuettoInputError(f"job '{job_id}' was already submitted")
        self.progress[job_id] = 0.0
        self.attained[job_id] = 0.0
        self.segments[job_id] = []
        self._add_pending(job_id)

    def complete(self, job_ids: Iterable[str], now: float) -> None:
        """The running jobs ``job_ids`` complete at ``now``; their GPUs are released together."""
        finished = [j for j in job_ids]
        touched: set[str] = set()
        for job_id in finished:
            run = self.running.get(job_id)
            if run is None:
                raise DuettoInputError(f"job '{job_id}' completes at t={now:g} but is not running")
            self._release(job_id, run, now, touched, completing=True)
            self.progress[job_id] = self.static[job_id].job.iterations
            self.completion[job_id] = now
        touched.difference_update(finished)
        for other in touched:
            self._rerate(other, now)

    def set_progress(self, job_id: str, iterations: float, now: float) -> None:
        """Correct a running job's progress with a measured value (the runtime's real clock)."""
        run = self.running.get(job_id)
        if run is None:
            self.progress[job_id] = iterations
            return
        run.progress = iterations
        run.time_at = now
        self._predict(job_id, run)

    # --- actions ----------------------------------------------------------------------------------
    def apply(self, actions: Sequence[Action], now: float, policy: str = "policy") -> list[Action]:
        """Check and apply ``actions`` at ``now``: preemptions first, then starts, in list order.

        Returns the actions applied (a preempt-and-restart of a job on the same GPUs with the same steps
        in one batch is a no-op and is dropped).

        Raises
        ------
        InvalidActionError
            For the first action that breaks a rule; earlier actions of the batch stay applied.
        """
        preempts: list[Preempt] = []
        starts: list[Start] = []
        for action in actions:
            if isinstance(action, Preempt):
                preempts.append(action)
            elif isinstance(action, Start):
                starts.append(action)
            else:
                raise InvalidActionError(policy, now, action, "type", "not a Start or Preempt")
        touched: set[str] = set()
        stopped: dict[str, tuple[_Run, Segment]] = {}
        resumed: set[str] = set()
        applied: list[Action] = []
        for action in preempts:
            run = self.running.get(action.job_id)
            if run is None:
                rule = "unknown-job" if action.job_id not in self.static else "not-running"
                raise InvalidActionError(policy, now, action, rule, "the job is not running")
            segment = self._release(action.job_id, run, now, touched)
            self._add_pending(action.job_id)
            stopped[action.job_id] = (run, segment)
        for action in starts:
            self._check_start(action, now, policy)
            previous = stopped.pop(action.job_id, None)
            gpus = tuple(sorted(operator.index(g) for g in action.gpus))
            if previous is not None and previous[0].gpus == gpus and previous[0].steps == action.steps:
                self._resume(action.job_id, previous[0], now, touched)  # preempt + same restart: no-op
                resumed.add(action.job_id)
                continue
            self._start(action.job_id, gpus, action.steps, now, touched)
            applied.append(action)
        for action in preempts:
            if action.job_id not in resumed:
                applied.append(action)
                self.stats.preemptions += 1
        for job_id in touched:
            if job_id in self.running:
                self._rerate(job_id, now)
        return applied

    def _check_start(self, action: Start, now: float, policy: str) -> None:
        job_id = action.job_id
        static = self.static.get(job_id)
        if static is None:
            raise InvalidActionError(policy, now, action, "unknown-job", f"no job '{job_id}' in the instance")
        if job_id not in self._pending_set:
            state = (
                "running" if job_id in self.running else "completed" if job_id in self.completion else "not arrived yet"
            )
            raise InvalidActionError(policy, now, action, "not-pending", f"the job is {state}")
        job = static.job
        gpus = action.gpus
        if len(gpus) != job.num_gpus or len(set(gpus)) != len(gpus):
            raise InvalidActionError(
                policy,
                now,
                action,
                "gang",
                f"needs exactly {job.num_gpus} distinct GPUs, got {list(gpus)}",
            )
        if action.steps not in static.allowed_steps:
            raise InvalidActionError(
                policy,
                now,
                action,
                "steps",
                f"{action.steps} accumulation steps is not valid for batch size {job.batch_size} "
                f"(valid: {sorted(static.allowed_steps)})",
            )
        own = static.memory[action.steps]
        limit = self.cluster.gpu_memory_gib + _MEMORY_SLACK
        num_gpus = self.cluster.num_gpus
        for raw in gpus:
            try:
                gpu = operator.index(raw)  # ints and numpy integers
            except TypeError:
                gpu = -1
            if not 0 <= gpu < num_gpus:
                raise InvalidActionError(policy, now, action, "gpu", f"unknown GPU {raw!r} (0..{num_gpus - 1})")
            occupants = self.occupancy[gpu]
            if len(occupants) + 1 > self.capacity:
                raise InvalidActionError(
                    policy,
                    now,
                    action,
                    "capacity",
                    f"GPU {gpu} already holds {', '.join(occupants)}; capacity is {self.capacity}",
                )
            if self.memory_used[gpu] + own > limit:
                raise InvalidActionError(
                    policy,
                    now,
                    action,
                    "memory",
                    f"GPU {gpu} would need {self.memory_used[gpu] + own:.3f} GiB (has {self.cluster.gpu_memory_gib:g})",
                )
            for other in occupants:
                if self.ratio(job_id, other) is None or self.ratio(other, job_id) is None:
                    raise InvalidActionError(
                        policy, now, action, "pair", f"jobs {job_id} and {other} may not share GPU {gpu}"
                    )

    # --- internals --------------------------------------------------------------------------------
    def _add_pending(self, job_id: str) -> None:
        ranks = self._pending_ranks
        rank = self.static[job_id].rank
        index = bisect.bisect_left(ranks, rank)
        ranks.insert(index, rank)
        self._pending_ids.insert(index, job_id)
        self._pending_set.add(job_id)
        self._pending_tuple = None

    def _remove_pending(self, job_id: str) -> None:
        ranks = self._pending_ranks
        index = bisect.bisect_left(ranks, self.static[job_id].rank)
        del ranks[index]
        del self._pending_ids[index]
        self._pending_set.discard(job_id)
        self._pending_tuple = None

    def _start(self, job_id: str, gpus: tuple[int, ...], steps: int, now: float, touched: set[str]) -> None:
        self._remove_pending(job_id)
        segments = self.segments[job_id]
        overhead_end = now + self.overhead if segments else now
        nodes = len({g // self.cluster.gpus_per_node for g in gpus})
        run = _Run(
            gpus,
            steps,
            now,
            overhead_end,
            self.iteration_time(job_id, steps, nodes),
            self.progress.pop(job_id),
            self.attained[job_id],
        )
        self.running[job_id] = run
        if (previous := (segments[-1] if segments else None)) and previous.gpus != gpus:
            self.stats.migrations += 1
        segments.append(Segment(now, gpus, steps))
        self.first_start.setdefault(job_id, now)
        own = self.static[job_id].memory[steps]
        for gpu in gpus:
            occupants = self.occupancy[gpu]
            touched.update(occupants)
            occupants.append(job_id)
            self.memory_used[gpu] += own
        touched.add(job_id)
        self.stats.starts += 1

    def _resume(self, job_id: str, run: _Run, now: float, touched: set[str]) -> None:
        """Undo a preemption made in the same batch (the policy restarted the job where it was)."""
        self._remove_pending(job_id)
        segments = self.segments[job_id]
        if segments and segments[-1].start == run.segment_start and segments[-1].gpus == run.gpus:
            last = segments[-1]
            segments[-1] = Segment(last.start, last.gpus, last.steps)
        else:  # the preempted segment was dropped (too short): it starts again, as it was
            segments.append(Segment(run.segment_start, run.gpus, run.steps))
            self.first_start.setdefault(job_id, run.segment_start)
        run.progress = self.progress.pop(job_id)
        run.time_at = now
        run.predicted = math.inf  # its heap entry went stale when it was stopped: predict again
        self.attained[job_id] = run.start_attained
        self.running[job_id] = run
        own = self.static[job_id].memory[run.steps]
        for gpu in run.gpus:
            occupants = self.occupancy[gpu]
            touched.update(occupants)
            occupants.append(job_id)
            self.memory_used[gpu] += own
        touched.add(job_id)

    def _release(self, job_id: str, run: _Run, now: float, touched: set[str], completing: bool = False) -> Segment:
        """Take ``job_id`` off its GPUs at ``now``; close its segment (a completing job's last segment
        stays open-ended). Returns the closed segment."""
        self._advance(run, now)
        del self.running[job_id]
        run.version = -1  # its heap entry is stale
        own = self.static[job_id].memory[run.steps]
        for gpu in run.gpus:
            occupants = self.occupancy[gpu]
            occupants.remove(job_id)
            touched.update(occupants)
            self.memory_used[gpu] = self.memory_used[gpu] - own if occupants else 0.0
        segments = self.segments[job_id]
        segment = segments[-1]
        if completing:
            return segment
        if now - run.segment_start < MIN_SEGMENT:
            # Too short to keep (the validator rejects it): forget it, with what it achieved.
            segments.pop()
            self.progress[job_id] = run.start_progress
            self.attained[job_id] = run.start_attained
            if not segments:
                self.first_start.pop(job_id, None)
            return segment
        self.progress[job_id] = run.progress
        self.attained[job_id] = run.start_attained + (now - run.segment_start) * len(run.gpus)
        segments[-1] = Segment(segment.start, segment.gpus, segment.steps, now)
        return segments[-1]

    def _advance(self, run: _Run, now: float) -> None:
        if self.muri is not None:
            # Muri's rule: an interval ending at an event (not the job's completion) loses ``loss`` seconds.
            if now > run.time_at:
                if run.period < math.inf:
                    run.progress += max(0.0, now - run.time_at - run.loss) / run.period
                run.time_at = now
            return
        begin = run.time_at if run.time_at > run.overhead_end else run.overhead_end
        if now > begin:
            run.progress += run.rate * (now - begin)
        if now > run.time_at:
            run.time_at = now

    def _rerate(self, job_id: str, now: float) -> None:
        run = self.running[job_id]
        self._advance(run, now)
        if self.muri is not None:
            self._muri_rate(job_id, run)
            return
        xi = 1.0
        occupancy = self.occupancy
        for gpu in run.gpus:
            occupants = occupancy[gpu]
            if len(occupants) > 1:
                for other in occupants:
                    if other != job_id:
                        ratio = self.ratio(job_id, other)
                        if ratio is not None and ratio > xi:
                            xi = ratio
        rate = 1.0 / (run.t_iter * xi)
        if rate != run.rate or run.predicted == math.inf:
            run.rate = rate
            self._predict(job_id, run)

    def _muri_rate(self, job_id: str, run: _Run) -> None:
        """Muri's rule: the period and overhead of ``job_id`` with the jobs now on its GPUs (the slowest
        GPU's group), and a new completion prediction from its last event."""
        rule = self.muri
        assert rule is not None
        profiles = self.instance.profiles
        static = self.static
        period = 0.0
        loss = 0.0
        seen: set[tuple[str, ...]] = set()
        for gpu in run.gpus:
            group = tuple(self.occupancy[gpu])
            if group in seen:
                continue
            seen.add(group)
            if len(group) == 1:
                here = rule.solo_period(run.t_iter)
            else:
                here = rule.group_period([profiles[static[other].job.profile] for other in group])
            if here > period:
                period = here
            overhead = sum(rule.overhead(static[other].job.profile) for other in group)
            if overhead > loss:
                loss = overhead
        run.period = period
        run.loss = loss
        run.rate = 1.0 / period
        self._predict(job_id, run)

    def event(self, now: float) -> None:
        """Muri's rule: ``now`` is an event (an arrival, a completion, a segment start or end): every running
        job's interval ends here (charged its overhead) and a new one starts with the jobs now beside it."""
        for job_id in list(self.running):
            self._rerate(job_id, now)

    def _snapshot(self) -> list[tuple[_Run, float, float, float, float, float, int, float]]:
        runs = self.running.values()
        return [(r, r.progress, r.time_at, r.period, r.loss, r.rate, r.version, r.predicted) for r in runs]

    def _predict(self, job_id: str, run: _Run) -> None:
        iterations = self.static[job_id].job.iterations
        remaining = iterations - run.progress
        if self.muri is not None:
            # From the last event, without the overhead: how Muri's simulator predicts a completion.
            done = run.time_at + max(0.0, remaining) * run.period
            self._seq += 1
            run.version = self._seq
            run.predicted = done
            heapq.heappush(self.heap, (done, self._seq, job_id, run.version))
            return
        begin = run.time_at if run.time_at > run.overhead_end else run.overhead_end
        if self.slot is None:
            done = begin + max(0.0, remaining) / run.rate
        else:
            per_slot = run.rate * self.slot
            slots = max(1, math.ceil((remaining - REL_TOL * iterations) / per_slot))
            # ``begin`` is a slot boundary: keep the result an exact integer multiple of Δ.
            done = (round(begin / self.slot) + slots) * self.slot
        # Versions are globally unique sequence numbers, so an entry of an earlier segment of the same
        # job can never look current.
        self._seq += 1
        run.version = self._seq
        run.predicted = done
        heapq.heappush(self.heap, (done, self._seq, job_id, run.version))

    # --- views and output -------------------------------------------------------------------------
    def view(self, now: float) -> ClusterView:
        """A read-only view for a policy decision at ``now`` (valid until the state changes)."""
        return ClusterView(
            time=now,
            instance=self.instance,
            pending=self.pending,
            running=_RunningView(self, now),
            attained_service=_AttainedView(self, now),
            first_start=MappingProxyType(self.first_start),
            progress=_ProgressView(self, now),
            occupancy=self.occupancy,
            slot=self.slot,
            pending_set=self._pending_set,
        )

    def schedule(self, producer: str, metadata: Mapping[str, Any] | None = None) -> Schedule:
        """The schedule of every job that ran (instance order), with claimed completion times."""
        plans = []
        for job in self.instance.jobs:
            segments = self.segments.get(job.id)
            if not segments:
                continue
            plans.append(JobPlan(job.id, tuple(segments), self.completion.get(job.id)))
        return Schedule(
            tuple(plans),
            slot=self.slot,
            restart_overhead=self.restart_cost,
            producer=producer,
            metadata=dict(metadata or {}),
        )


class _RunningView(Mapping[str, RunningJob]):
    def __init__(self, state: ClusterState, now: float) -> None:
        self._state = state
        self._now = now
        self._cache: dict[str, RunningJob] = {}

    def __getitem__(self, job_id: str) -> RunningJob:
        cached = self._cache.get(job_id)
        if cached is not None and job_id in self._state.running:
            return cached
        run = self._state.running[job_id]
        item = RunningJob(job_id, run.gpus, run.steps, run.segment_start, self._state.progress_at(job_id, self._now))
        self._cache[job_id] = item
        return item

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._state.running))

    def __len__(self) -> int:
        return len(self._state.running)

    def placements(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """``job → (gpus, steps)`` of every running job (cheaper than building each RunningJob)."""
        return {job_id: (run.gpus, run.steps) for job_id, run in self._state.running.items()}

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._state.running


class _ProgressView(Mapping[str, float]):
    """Iterations done by every arrived, unfinished job (running ones computed at ``now``)."""

    def __init__(self, state: ClusterState, now: float) -> None:
        self._state = state
        self._now = now

    def __getitem__(self, job_id: str) -> float:
        state = self._state
        if job_id in state.running:
            return state.progress_at(job_id, self._now)
        if job_id in state.progress:
            return state.progress[job_id]
        raise KeyError(job_id)

    def __iter__(self) -> Iterator[str]:
        return iter([*self._state.pending, *self._state.running])

    def __len__(self) -> int:
        return len(self._state._pending_set) + len(self._state.running)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._state.running or job_id in self._state.progress

    def get(self, job_id: str, default: Any = None) -> Any:  # faster than Mapping.get
        state = self._state
        if job_id in state.running:
            return state.progress_at(job_id, self._now)
        return state.progress.get(job_id, default)


class _AttainedView(_ProgressView):
    """GPU-seconds held by every arrived job (running ones computed at ``now``)."""

    def __getitem__(self, job_id: str) -> float:
        state = self._state
        if job_id in state.running or job_id in state.attained:
            return state.attained_at(job_id, self._now)
        raise KeyError(job_id)

    def get(self, job_id: str, default: Any = None) -> Any:
        state = self._state
        if job_id in state.running or job_id in state.attained:
            return state.attained_at(job_id, self._now)
        return default


class SchedulingLoop:
    """Drives a policy: events in, decisions out, on a clock the caller owns.

    Parameters
    ----------
    instance
        The problem.
    policy
        The policy to drive (see :class:`heuristics.core.Policy`).
    restart_cost, slot, record_decide_times
        Passed to :class:`ClusterState`.
    """

    def __init__(
        self,
        instance: Instance,
        policy: Policy,
        *,
        restart_cost: float = 0.0,
        slot: float | None = None,
        record_decide_times: bool = False,
    ) -> None:
        self.policy = policy
        self.state = ClusterState(
            instance, restart_cost=restart_cost, slot=slot, record_decide_times=record_decide_times
        )
        check = getattr(policy, "check_instance", None)
        if check is not None:
            check(instance)
        reset = getattr(policy, "reset", None)
        if reset is not None:
            reset()
        self.requested: float | None = None

    @property
    def name(self) -> str:
        return str(getattr(self.policy, "name", type(self.policy).__name__))

    def step(self, now: float, arrivals: Iterable[str] = (), completions: Iterable[str] = ()) -> list[Action]:
        """Process what happened at ``now`` and let the policy decide.

        Completions are applied first (their GPUs are released), then arrivals; then the policy sees
        the view and its actions are checked and applied. Returns the applied actions (what the
        runtime must enact).
        """
        state = self.state
        state.now = now
        done = list(completions)
        if done:
            state.complete(done, now)
        arrived = list(arrivals)
        for job_id in arrived:
            state.submit(job_id, now)
        # Muri's rule: arrivals and completions are events for every running job (formulation.progress).
        event = state.muri is not None and bool(done or arrived)
        if event:
            state.event(now)
        view = state.view(now)
        clock = _time.perf_counter()
        actions = self.policy.decide(view)
        elapsed = _time.perf_counter() - clock
        stats = state.stats
        stats.decisions += 1
        stats.decide_seconds += elapsed
        if state.record_decide_times:
            stats.decide_times.append(elapsed)
        if state.muri is not None and actions and not event:
            # A decision at a time that is not yet an event: it becomes one only if it changes a segment.
            saved = state._snapshot()
            applied = state.apply(actions, now, self.name)
            if applied:
                state.event(now)
            else:  # e.g. a preempt-and-restart in place: no segment changed, so no event
                for run, progress, time_at, period, loss, rate, version, predicted in saved:
                    run.progress, run.time_at, run.period, run.loss = progress, time_at, period, loss
                    run.rate, run.version, run.predicted = rate, version, predicted
        else:
            # after an arrival or completion every job was re-rated; those whose GPUs change are again in apply
            applied = state.apply(actions, now, self.name) if actions else []
        wake = getattr(self.policy, "next_decision_time", None)
        self.requested = wake(state.view(now)) if wake is not None else None
        return applied
