"""The contract between scheduling policies and the loop that drives them.

One scheduling loop drives every policy: the simulator runs it on a virtual clock, the cluster runtime
on a real one. At each decision point (an arrival, a completion, a round boundary of a round-based
policy) the loop hands the policy a read-only :class:`ClusterView` and applies the actions it returns.

Blox's shape: a scheduling policy decides *which* jobs run and in what order; a placement policy
decides *where* (which GPUs); an optional packing/grouping step decides who shares. A :class:`Policy`
composes them and returns concrete actions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol

from formulation.instance import Instance


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding GPUs now."""

    job_id: str
    gpus: tuple[int, ...]
    steps: int  # gradient-accumulation steps of the current segment
    start: float  # start of the current segment
    progress: float  # iterations completed so far (all segments)


@dataclass(frozen=True)
class ClusterView:
    """What a policy may look at when it decides.

    Parameters
    ----------
    time
        Now (seconds; virtual in the simulator, wall-clock-derived in the runtime).
    instance
        Cluster, profiles and interference model, and every job submitted so far.
    pending
        Ids of jobs that arrived and do not hold GPUs, in arrival order.
    running
        Jobs holding GPUs now, by id.
    attained_service
        GPU-seconds each job has received so far (for LAS / Tiresias priorities).
    first_start
        First start time of each job that has ever run (for queueing metrics and starvation rules).
    progress
        Iterations completed so far by every arrived job (running or pending).
    """

    time: float
    instance: Instance
    pending: tuple[str, ...]
    running: Mapping[str, RunningJob]
    attained_service: Mapping[str, float] = field(default_factory=dict)
    first_start: Mapping[str, float] = field(default_factory=dict)
    progress: Mapping[str, float] = field(default_factory=dict)
    #: Optional, filled by the loop: ``occupancy[g]`` = ids of the running jobs on GPU ``g`` (a fast
    #: path for :meth:`gpu_occupants`; ``None`` means "derive it from ``running``").
    occupancy: Sequence[Sequence[str]] | None = None
    #: Optional, filled by the loop: the simulation is slotted with this slot length Δ (decisions are
    #: taken on multiples of Δ only); ``None`` in continuous time.
    slot: float | None = None
    #: Optional, filled by the loop: the ids of ``pending`` as a set (read-only; fast membership and
    #: set differences for policies that keep their own queues). ``None``: use ``set(pending)``.
    pending_set: AbstractSet[str] | None = None

    def remaining_iterations(self, job_id: str) -> float:
        return max(0.0, self.instance.job(job_id).iterations - self.progress.get(job_id, 0.0))

    def gpu_occupants(self) -> dict[int, list[str]]:
        """GPU id → ids of running jobs on it."""
        if self.occupancy is not None:
            return {g: list(jobs) for g, jobs in enumerate(self.occupancy)}
        occupants: dict[int, list[str]] = {g: [] for g in range(self.instance.cluster.num_gpus)}
        for job in self.running.values():
            for gpu in job.gpus:
                occupants[gpu].append(job.job_id)
        return occupants

    def occupants_of(self, gpu: int) -> Sequence[str]:
        """Ids of the running jobs on ``gpu``."""
        if self.occupancy is not None:
            return self.occupancy[gpu]
        return [job.job_id for job in self.running.values() if gpu in job.gpus]

    def free_gpus(self) -> list[int]:
        """GPUs that hold no job, in id order."""
        if self.occupancy is not None:
            return [g for g, jobs in enumerate(self.occupancy) if not jobs]
        used = {gpu for job in self.running.values() for gpu in job.gpus}
        return [g for g in range(self.instance.cluster.num_gpus) if g not in used]


@dataclass(frozen=True, slots=True)
class Start:
    """Start (or resume) ``job_id`` now on ``gpus`` with ``steps`` accumulation steps."""

    job_id: str
    gpus: tuple[int, ...]
    steps: int = 1


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop ``job_id`` now; it keeps its progress and returns to the pending queue."""

    job_id: str


Action = Start | Preempt


class Policy(Protocol):
    """A scheduling policy (with its placement and packing steps).

    Register a policy with :func:`heuristics.registry.register_policy`; the loop
    (:mod:`heuristics.loop`) drives it. Besides the members below, a policy may define these optional
    methods (the loop calls them when present):

    ``check_instance(instance) -> None``
        Raise :class:`formulation.errors.DuettoInputError` naming what is missing if the policy cannot
        serve ``instance`` (e.g. per-stage times for Muri). Called once before the first decision.
    ``reset() -> None``
        Forget per-run state; called before a run starts (a policy object may be reused).
    ``next_decision_time(view) -> float | None``
        Ask to be called again at that time even if no arrival/completion/round happens before it (e.g.
        Tiresias' queue demotions). Called after every decision; ``None`` = no request.

    The mappings in a :class:`ClusterView` are read-only views of the loop's live state: valid during
    ``decide`` only, never keep them.
    """

    name: str
    #: ``True`` if the policy may preempt (its schedules have several segments per job).
    preemptive: bool
    #: Seconds between scheduling rounds for round-based policies, ``None`` for event-driven only.
    round_length: float | None

    def decide(self, view: ClusterView) -> Sequence[Action]:
        """Actions to apply now; ``Preempt`` actions are applied before ``Start`` actions."""
        ...
