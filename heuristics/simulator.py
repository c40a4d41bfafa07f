"""Event-driven simulation of a policy on an instance (SPEC.md semantics).

The simulator is the virtual clock around :class:`heuristics.loop.SchedulingLoop`: it jumps from event
to event — the next arrival, the next predicted completion (a heap with lazy invalidation, kept by the
loop's state), the next round of a round-based policy, or a time the policy asked to be woken at — and
steps the loop there. Between events nothing changes but progress, which the state integrates in
closed form, so the cost is per event, not per second.

Continuous mode: events at their exact times. Slotted mode (``slot=Δ``): every event is moved to the
next multiple of Δ (an arrival at 5 s is seen at Δ = 10 s), so decisions happen on slot boundaries
only; a job completes at the end of the first slot in which its progress reaches ``I_j`` and holds its
GPUs until then; restart overheads cost whole slots. Both match :func:`formulation.validator.validate`.
An instance may carry Muri's simulator's progress rule instead of SPEC.md's (``Instance.progress``; Muri's
simulation traces by default): the loop applies it
(:meth:`heuristics.loop.ClusterState.event`), continuous only.
"""

from __future__ import annotations

import dataclasses
import math
import time as _time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.schedule import Schedule
from heuristics.core import Policy, Start
from heuristics.loop import LoopStats, PolicyStalledError, SchedulingLoop
from heuristics.registry import make_policy

if TYPE_CHECKING:
    import pandas as pd

#: Completions closer than this (relative) to the event time are processed together (the validator
#: merges completions the same way).
_SIMULTANEOUS = 1e-9


@dataclass
class SimulationResult:
    """What a simulation produced.

    Attributes
    ----------
    instance
        The instance simulated (with the capacity used); validate the schedule against this one.
    schedule
        One :class:`~formulation.schedule.JobPlan` per job, claimed completions set.
    completion
        The simulator's completion time per job.
    policy
        Name of the policy.
    stats
        Decisions, decision wall time, starts, preemptions, migrations.
    events
        Number of event times the loop was stepped at.
    wall_seconds
        Wall time of the simulation proper (without validation).
    validation_seconds, metrics_seconds
        Wall time of the validator and of :func:`formulation.metrics.compute_metrics` (``None`` when not
        run), reported apart from the simulation's.
    report, metrics
        The validator's report and :func:`formulation.metrics.compute_metrics` when ``validate=True``.
    mismatches
        Jobs whose validator completion differs from the simulator's by more than 1e-6 relative.
    """

    instance: Instance
    schedule: Schedule
    completion: dict[str, float]
    policy: str
    stats: LoopStats
    events: int
    wall_seconds: float
    report: Any = None
    metrics: dict[str, Any] | None = None
    mismatches: dict[str, tuple[float, float]] = field(default_factory=dict)
    validation_seconds: float | None = None
    metrics_seconds: float | None = None

    @property
    def avg_jct(self) -> float:
        """Average JCT from the simulator's own completions."""
        jobs = self.instance.jobs
        return sum(self.completion[j.id] - j.arrival for j in jobs) / len(jobs) if jobs else math.nan

    def jobs_frame(self) -> pd.DataFrame:
        """One row per job (start, completion, JCT, GPUs, sharing) as a pandas DataFrame, measured by the
        validator: see :func:`duetto.results.jobs_frame`."""
        from duetto.results import jobs_frame

        return jobs_frame(self.instance, self.schedule, report=self.report)


def with_capacity(instance: Instance, capacity: int | None) -> Instance:
    """``instance`` with GPU capacity ``C = capacity`` (unchanged when ``None``).

    Raises
    ------
    DuettoInputError
        If ``capacity`` is not an integer >= 1.
    """
    if capacity is None:
        return instance
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise DuettoInputError(f"must be an integer >= 1 (jobs per GPU at once), got {capacity!r}", field="capacity")
    if capacity == instance.cluster.capacity:
        return instance
    return instance.replace(cluster=instance.cluster.with_capacity(capacity))


class Simulator:
    """One simulation run (see :func:`simulate`)."""

    def __init__(
        self,
        instance: Instance,
        policy: Policy,
        *,
        slot: float | None = None,
        restart_cost: float = 0.0,
        record_decide_times: bool = False,
    ) -> None:
        self.instance = instance
        self.policy = policy
        self.slot = slot
        self.loop = SchedulingLoop(
            instance, policy, restart_cost=restart_cost, slot=slot, record_decide_times=record_decide_times
        )
        round_length = getattr(policy, "round_length", None)
        if round_length is not None and not (math.isfinite(round_length) and round_length > 0):
            raise DuettoInputError(f"policy round length must be > 0, got {round_length!r}", field="round_length")
        self.round_slots: int | None = None
        if round_length is not None and slot is not None:
            self.round_slots = max(1, math.ceil(round_length / slot - 1e-9))
        self.round_length = round_length
        self.events = 0

    def _quantize(self, t: float) -> float:
        """The first decision time at or after ``t`` (itself in continuous time)."""
        if self.slot is None:
            return t
        return math.ceil(t / self.slot - 1e-9) * self.slot

    def _tick(self, k: int) -> float:
        if self.round_slots is not None and self.slot is not None:
            return (k * self.round_slots) * self.slot
        assert self.round_length is not None
        return k * self.round_length

    def _first_tick_after(self, t: float) -> int:
        """Index of the first round tick strictly after ``t``."""
        length = self.round_slots * self.slot if self.round_slots is not None and self.slot else self.round_length
        assert length is not None
        k = max(1, math.floor(t / length) + 1)
        while self._tick(k) <= t:
            k += 1
        while k > 1 and self._tick(k - 1) > t:
            k -= 1
        return k

    def run(self) -> None:
        loop = self.loop
        state = loop.state
        arrivals = sorted(
            (self._quantize(job.arrival), state.static[job.id].rank, job.id) for job in self.instance.jobs
        )
        total = len(arrivals)
        index = 0
        tick = self._first_tick_after(arrivals[0][0]) if self.round_length is not None and arrivals else None
        now = -math.inf
        idle_decisions = 0
        while True:
            t_arrival = arrivals[index][0] if index < total else math.inf
            upcoming = state.next_completion()
            t_done = upcoming[0] if upcoming is not None else math.inf
            busy = bool(state.running) or bool(state.pending)
            t_round = math.inf
            if tick is not None:
                if not busy and t_arrival < math.inf and self._tick(tick) < t_arrival:
                    tick = self._first_tick_after(t_arrival)
                if busy or t_arrival < math.inf:
                    t_round = self._tick(tick)
            t_wake = math.inf
            if loop.requested is not None and math.isfinite(loop.requested):
                t_wake = self._quantize(loop.requested)
                if t_wake <= now:
                    t_wake = math.inf if self.slot is None else now + self.slot
            when = min(t_arrival, t_done, t_round, t_wake)
            if when == math.inf:
                break
            # Everything that happens at ``when``: completions (together), arrivals, a round tick.
            done: list[tuple[str, float]] = []
            limit = when + _SIMULTANEOUS * max(1.0, abs(when))
            while upcoming is not None and upcoming[0] <= limit:
                finished_at, job_id = upcoming
                done.append((job_id, finished_at if self.slot is None else when))
                state.running[job_id].version = -1  # its heap entry is now stale
                upcoming = state.next_completion()
            arrived: list[str] = []
            while index < total and arrivals[index][0] <= when:
                arrived.append(arrivals[index][2])
                index += 1
            if tick is not None and t_round <= when:
                tick = self._first_tick_after(when)
            now = when
            actions = loop.step(when, arrived, [job_id for job_id, _ in done])
            for job_id, finished_at in done:
                state.completion[job_id] = max(finished_at, when) if self.slot is None else when
            self.events += 1
            # An idle cluster with pending jobs and nothing left to come: the policy is stuck.
            if not state.running and state.pending and index >= total:
                started = any(isinstance(a, Start) for a in actions)
                idle_decisions = 0 if started else idle_decisions + 1
                if idle_decisions >= 3 or (loop.requested is None and tick is None):
                    pending = state.pending
                    shown = ", ".join(pending[:5]) + (f" (and {len(pending) - 5} more)" if len(pending) > 5 else "")
                    raise PolicyStalledError(
                        f"policy '{loop.name}' leaves {len(pending)} jobs pending on an idle cluster at "
                        f"t={when:g} with nothing left to happen: {shown}"
                    )
            else:
                idle_decisions = 0
        unfinished = [job.id for job in self.instance.jobs if job.id not in state.completion]
        if unfinished:
            raise PolicyStalledError(
                f"policy '{loop.name}' ended with {len(unfinished)} unfinished jobs: {', '.join(unfinished[:5])}"
            )


def simulate(
    instance: Instance,
    policy: str | Policy,
    *,
    capacity: int | None = None,
    slot: float | None = None,
    restart_cost: float = 0.0,
    validate: bool = True,
    metrics: bool = True,
    policy_options: Mapping[str, Any] | None = None,
    record_decide_times: bool = False,
) -> SimulationResult:
    """Simulate ``policy`` on ``instance``.

    Parameters
    ----------
    instance
        The problem.
    policy
        A registered policy name (see ``duetto policies``) or a policy object.
    capacity
        ``C``, jobs per GPU at once; default: the instance's (2 unless it says otherwise).
    slot
        Slot length Δ (seconds) for the slotted semantics; ``None``: continuous time.
    restart_cost
        Seconds without progress at the start of every segment after a job's first (preemption or
        migration cost).
    validate
        Run :func:`formulation.validator.validate` on the schedule (and fill ``mismatches``).
    metrics
        With ``validate``, also compute :func:`formulation.metrics.compute_metrics` from the report
        (its sharing-benefit part grows quadratically with the number of jobs that shared: minutes on
        the largest traces).
    policy_options
        Keyword options for the policy's factory (only with a policy name).
    record_decide_times
        Keep each decision's wall time in ``result.stats.decide_times``.

    Returns
    -------
    SimulationResult

    Raises
    ------
    DuettoInputError
        Unknown policy, capacity < 1, bad slot or restart cost, an instance the policy cannot serve.
    heuristics.loop.InvalidActionError
        The policy returned an action that breaks a rule.
    heuristics.loop.PolicyStalledError
        The policy left jobs pending forever.
    """
    sim_instance = with_capacity(instance, capacity)
    policy_obj = make_policy(policy, **dict(policy_options or {})) if isinstance(policy, str) else policy
    if slot is not None and not (isinstance(slot, int | float) and math.isfinite(slot) and slot > 0):
        raise DuettoInputError(f"must be a finite number > 0, got {slot!r}", field="slot")
    if not sim_instance.jobs:
        raise DuettoInputError("the instance has no jobs", field="jobs")
    clock = _time.perf_counter()
    simulator = Simulator(
        sim_instance, policy_obj, slot=slot, restart_cost=restart_cost, record_decide_times=record_decide_times
    )
    simulator.run()
    wall = _time.perf_counter() - clock
    state = simulator.loop.state
    name = simulator.loop.name
    schedule = state.schedule(
        producer=name,
        metadata={
            "policy": name,
            "capacity": sim_instance.cluster.capacity,
            "slot": slot,
            "restart_cost": restart_cost,
            "decisions": state.stats.decisions,
            "preemptions": state.stats.preemptions,
            "migrations": state.stats.migrations,
            "simulation_seconds": wall,
        },
    )
    # the capacity travels with the schedule: validate() checks the C it was made for
    schedule = dataclasses.replace(schedule, capacity=sim_instance.cluster.capacity)
    result = SimulationResult(
        instance=sim_instance,
        schedule=schedule,
        completion=dict(state.completion),
        policy=name,
        stats=state.stats,
        events=simulator.events,
        wall_seconds=wall,
    )
    if validate:
        from formulation.metrics import compute_metrics
        from formulation.validator import validate as run_validator

        clock = _time.perf_counter()
        report = run_validator(sim_instance, schedule)
        result.validation_seconds = _time.perf_counter() - clock
        result.report = report
        if metrics:
            clock = _time.perf_counter()
            result.metrics = compute_metrics(sim_instance, report)
            result.metrics_seconds = _time.perf_counter() - clock
        for job_id, mine in result.completion.items():
            theirs = report.completion.get(job_id)
            if theirs is None or abs(theirs - mine) > 1e-6 * max(1.0, abs(theirs)):
                result.mismatches[job_id] = (mine, math.nan if theirs is None else theirs)
    return result
