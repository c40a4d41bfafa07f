"""Carrying out a computed schedule (the oracle's, or any policy's simulated one) on a real clock.

A schedule says when each job starts, where, with how many accumulation steps. Real jobs do not end
exactly when the model predicts, so the runtime replays the schedule's *order*, not its clock:

- a job starts on its scheduled GPUs with its scheduled steps once it is submitted and
- every job that the schedule runs on one of those GPUs *before and not alongside* it (scheduled
  completion at or before this job's start) has finished, and every job scheduled there earlier
  (started before it) has started; with no scheduled completions in the file, only the second rule
  applies;
- and the GPUs have room now (capacity, memory, pairs: :class:`heuristics.placement.Scratch`, the
  policies' own checks), else it waits.

This is a :class:`heuristics.core.Policy`, so the daemon drives it through the same scheduling loop
as every policy. Only non-preemptive schedules (one segment per job) can be replayed; for preemptive
policies run the policy itself in the daemon (``--policy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from formulation.errors import DuettoInputError
from formulation.schedule import Schedule
from heuristics.core import Action, ClusterView, Start
from heuristics.placement import InstanceFacts, Scratch

_EPS = 1e-9


class ScheduleReplay:
    """Replays a non-preemptive schedule's order (see the module docstring).

    Parameters
    ----------
    schedule
        One segment per job; GPU ids are flat ids of the runtime's inventory.
    """

    preemptive = False
    round_length: float | None = None

    def __init__(self, schedule: Schedule) -> None:
        multi = [plan.job_id for plan in schedule.plans if len(plan.segments) != 1]
        if multi:
            raise DuettoInputError(
                f"{len(multi)} job(s) have several segments (e.g. '{multi[0]}'): a preemptive schedule cannot be "
                "replayed in order; run its policy in the daemon instead (--policy)",
                field="jobs.segments",
            )
        self.schedule = schedule
        self.name = f"replay:{schedule.producer}"
        self.segments = {plan.job_id: plan.segments[0] for plan in schedule.plans}
        completion = {plan.job_id: plan.claimed_completion for plan in schedule.plans}
        self.order = sorted(self.segments, key=lambda j: (self.segments[j].start, j))
        on_gpu: dict[int, list[str]] = {}
        for job_id in self.order:
            for gpu in self.segments[job_id].gpus:
                on_gpu.setdefault(gpu, []).append(job_id)
        self.must_finish: dict[str, set[str]] = {j: set() for j in self.order}
        self.must_start: dict[str, set[str]] = {j: set() for j in self.order}
        for job_id in self.order:
            start = self.segments[job_id].start
            for gpu in self.segments[job_id].gpus:
                for other in on_gpu[gpu]:
                    if other == job_id or self.segments[other].start > start + _EPS:
                        continue
                    if (self.segments[other].start, other) > (start, job_id):
                        continue  # same start, later in order: not a predecessor
                    done = completion.get(other)
                    if done is not None and done <= start + _EPS:
                        self.must_finish[job_id].add(other)
                    else:
                        self.must_start[job_id].add(other)

    def check(self, num_gpus: int) -> None:
        """Raise :class:`DuettoInputError` if the schedule names GPUs the inventory does not have."""
        for job_id, segment in self.segments.items():
            bad = [g for g in segment.gpus if not 0 <= g < num_gpus]
            if bad:
                raise DuettoInputError(
                    f"job '{job_id}' is scheduled on GPU(s) {bad}; the inventory has GPUs 0..{num_gpus - 1}",
                    field="jobs.segments.gpus",
                )

    def decide(self, view: ClusterView) -> Sequence[Action]:
        instance = view.instance
        known = instance.job_index
        running = set(view.running)
        unfinished = set(view.progress) | running
        finished = {j for j in self.segments if j in known and j not in unfinished}
        started = finished | running | set(view.first_start)
        pending = set(view.pending)
        scratch = Scratch(view, InstanceFacts(instance))
        actions: list[Action] = []
        for job_id in self.order:
            if job_id not in pending:
                continue
            if not self.must_finish[job_id] <= finished or not self.must_start[job_id] <= started:
                continue
            segment = self.segments[job_id]
            if all(scratch.can_join(gpu, job_id, segment.steps) for gpu in segment.gpus):
                scratch.place(job_id, segment.gpus, segment.steps)
                actions.append(Start(job_id, tuple(segment.gpus), segment.steps))
                started.add(job_id)
        return actions

    def describe(self) -> dict[str, Any]:
        return {"producer": self.schedule.producer, "jobs": len(self.segments)}
