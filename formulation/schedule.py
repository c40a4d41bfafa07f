"""Schedules: what a solver or policy decided, per job.

A job runs in one or more *segments*. A segment has a start time, a fixed GPU set and a number of
gradient-accumulation steps. Non-preemptive schedules (the exact model, SJF-BSBF, ...) have one
segment per job with ``end = None``: it runs until the job completes. Preemptive policies (Tiresias,
Muri and Tesserae rounds) give every segment but the last an explicit ``end``; each segment after the
first pays ``restart_overhead`` seconds without progress (checkpoint restore / migration).

A schedule may carry the completion times its producer believes (``claimed_completion``); the
validator recomputes them from the progress rule and reports any disagreement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from formulation.errors import DuettoInputError


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of time during which a job holds a fixed set of GPUs."""

    start: float
    gpus: tuple[int, ...]
    steps: int = 1
    end: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", tuple(int(g) for g in self.gpus))


@dataclass(frozen=True, slots=True)
class JobPlan:
    """The schedule of one job: its segments, in time order."""

    job_id: str
    segments: tuple[Segment, ...]
    claimed_completion: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "segments", tuple(self.segments))

    @property
    def start(self) -> float:
        return self.segments[0].start


@dataclass(frozen=True)
class Schedule:
    """A complete schedule for an instance.

    Parameters
    ----------
    plans
        One :class:`JobPlan` per job.
    slot
        ``Δ`` in seconds when the schedule follows the slotted semantics, else ``None``.
    restart_overhead
        Seconds without progress at the start of every segment after a job's first.
    producer
        Who made it (``"cpsat"``, ``"sjf-bsbf"``, ...).
    metadata
        Free-form facts from the producer (objective, bound, wall time, ...).
    capacity
        Jobs per GPU ``C`` the schedule was made for, when it differs from the instance's (``duetto
        simulate --capacity``); the validator checks it, so what the producer called valid is valid.
        ``None``: the instance's.
    """

    plans: tuple[JobPlan, ...]
    slot: float | None = None
    restart_overhead: float = 0.0
    producer: str = "unknown"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    capacity: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "plans", tuple(self.plans))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        if self.slot is not None and not self.slot > 0:
            raise DuettoInputError(f"must be > 0, got {self.slot!r}", field="schedule.slot")
        if self.restart_overhead < 0:
            raise DuettoInputError(f"must be >= 0, got {self.restart_overhead!r}", field="schedule.restart_overhead")
        if self.capacity is not None and (
            isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity < 1
        ):
            raise DuettoInputError(f"must be an integer >= 1, got {self.capacity!r}", field="schedule.capacity")

    @property
    def plan_index(self) -> Mapping[str, JobPlan]:
        return {plan.job_id: plan for plan in self.plans}

    @classmethod
    def non_preemptive(
        cls,
        entries: Iterable[tuple[str, float, Iterable[int], int]],
        *,
        completions: Mapping[str, float] | None = None,
        slot: float | None = None,
        producer: str = "unknown",
        metadata: Mapping[str, Any] | None = None,
    ) -> Schedule:
        """Build a one-segment-per-job schedule from ``(job_id, start, gpus, steps)`` tuples."""
        completions = completions or {}
        plans = tuple(
            JobPlan(job_id, (Segment(float(start), tuple(gpus), int(steps)),), completions.get(job_id))
            for job_id, start, gpus, steps in entries
        )
        return cls(plans, slot=slot, producer=producer, metadata=metadata or {})
