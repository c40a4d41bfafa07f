"""The time-slotted problem both exact models (CP-SAT and Pyomo) are built from.

:func:`discretize` turns an :class:`~formulation.instance.Instance` into a :class:`SlottedProblem`:
every number a model needs, already in **integers** (slots and progress units), so that two models
built from it mean exactly the same thing and a solution can be checked exactly.

Slots
-----
Slot ``τ`` (``τ = 0, 1, ...``) covers ``[τ·Δ, (τ+1)·Δ)`` seconds. A job that starts in slot ``S`` and
completes in slot ``E-1`` *occupies* slots ``S .. E-1``; ``E`` (an exclusive end, "end slot") is the
number used everywhere below: its completion time is ``E·Δ`` (SPEC.md: a job holds its GPUs to the end
of its completing slot), its JCT ``E·Δ - a_j``. ``release`` is ``ceil(a_j/Δ)``: the first slot boundary
at or after the arrival. Every job ends at or before the horizon ``T`` (``E ≤ T``).

Progress units (why integers, and which rounding)
-------------------------------------------------
SPEC.md: in a slot where job ``j`` runs, it makes ``Δ/(t_iter·ξ_eff)`` iterations and completes at the
end of the first slot where its progress reaches ``I_j``. Dividing by what one slot alone gives, a job
needs ``x = I_j·t_iter(mode)/Δ`` *alone-slots* of work and makes ``1/ξ`` alone-slots per shared slot.
Both are scaled by ``U = units_per_slot`` (default ``10**6``) and made integers:

* ``work[j, mode] = ceil(U·x)`` with the validator's relative tolerance of 1e-9 (a job needing 3
  slots in floating point is not pushed to 4), and
* ``speed[j][k] = ceil(U/ξ_{j|k})`` (same tolerance): units per slot of ``j`` while ``k`` shares one
  of its GPUs (exactly ``U`` alone).

Why round speeds *up*: schedules hit thresholds exactly all the time with "nice" data — twelve slots
at ``ξ = 1.2`` are exactly ten alone-slots — and rounding ``U/1.2`` down (or to nearest, 833 333)
would make the integer model miss that completion by a slot. Rounded up, every completion the float
semantics sees, the integer model sees too, in the same slot. The converse fails only in a
*near miss*: true progress short of the target by less than one unit per shared slot
(``≈ 10**-4`` alone-slots), where the integer model completes a slot early. Alone, speeds are exact
and the two always agree. :func:`evaluate` gives both rules; :func:`check_solution` with
``semantics="float"`` tells whether a model solution is still valid when such a job holds its GPUs one
slot longer, and ``solvers.solve`` only returns schedules valid under the float semantics, with
objectives recomputed under it. ``U = 10**6`` keeps the near-miss window tiny while all sums stay
below ``10**12`` (exact in CP-SAT's int64 and in a MIP solver's doubles, far above its feasibility
tolerance).

A gang is as fast as its slowest worker: in a slot, ``j`` progresses ``min_k speed[j][k]`` over the
jobs ``k`` that share any of its GPUs in that slot (``U`` when there are none).

Modes
-----
A job's modes are :meth:`Instance.modes` (accumulation steps that fit GPU memory alone) crossed with a
*placement* when placement changes the speed: a gang of ``1 < G_j ≤ gpus_per_node`` GPUs whose
communication is slower across nodes (``inter_node_comm_factor > 1``) has a ``"one_node"`` mode (its
GPUs must lie in one node; Eq. 3 with one node) and a ``"multi_node"`` mode (its GPUs must span at
least two nodes; Eq. 3 with ``num_nodes > 1``). Every other job's modes are ``"any"``. A mode whose
work is not smaller than another mode's of the same placement while needing no less memory is
dropped (dominated: it can never help).

Sharing
-------
``speed[j][k] is None`` when ``j`` and ``k`` may not share a GPU (the interference model says so in
either direction). Which mode pairs fit together in memory is :meth:`SlottedProblem.memory_fits`
(``mem_j + mem_k ≤ M_gpu``, tolerance 1e-9). For ``C > 2`` the memory of all jobs on one GPU must fit.

Windows
-------
From an upper bound (a feasible slot-level solution, :attr:`SlottedProblem.upper_bound`) every job
gets a window ``[earliest_start, latest_end]`` that contains it in every solution *at least as good*
as the bound (NOTES-oracle pitfall 5):

* objective ``"jct"``: ``Σ_k E_k ≤ UB`` and ``E_k ≥ release_k + min_slots_k`` give
  ``E_j ≤ UB − Σ_{k≠j} (release_k + min_slots_k)``;
* objective ``"makespan"``: ``E_j ≤ max_k E_k(UB solution)``.

Without a given bound the serial schedule (one job at a time, in release order, fastest mode) is used:
always feasible, so the horizon can never make the model infeasible. The horizon is
``T = max_j latest_end_j``. Use :meth:`SlottedProblem.with_upper_bound` to tighten the windows with a
better solution (the greedy's, a previous solve's).

GPU symmetry (both models must use the same rule, and :func:`canonicalize` puts warm starts in it)
-------------------------------------------------------------------------------------------------
Jobs are kept in a fixed *canonical order* (``problem.jobs``: by release, then larger gangs, then
longer jobs). Label GPUs by first use in that order: with ``used[i, g] = OR_{i' ≤ i} z[i', g]``,

* inside a node: ``used[i, g] ≤ used[i, g-1]`` for consecutive GPUs ``g-1, g`` of one node;
* across nodes: ``used[i, first(n)] ≤ used[i, first(n-1)]``.

Any solution can be relabelled to satisfy both (:func:`canonicalize`), so they cut no optimum.

API summary
-----------
``discretize(instance, slot=None, horizon_slots=None, upper_bound_schedule=None, objective="jct")``
→ :class:`SlottedProblem`; :func:`choose_slot`; slot-level solutions are ``dict[job_id,``
:class:`SlotAssignment` ``]`` (:data:`SlotSolution`); :func:`evaluate` (end slots: float semantics or
exact integer model), :func:`check_solution` (rules of the integer model), :func:`canonicalize`,
:func:`to_schedule` / :func:`from_schedule` (↔ :class:`~formulation.schedule.Schedule`),
:meth:`SlottedProblem.objective_seconds` / :meth:`SlottedProblem.objective_slots`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

import numpy as np

from formulation.errors import DuettoInputError, InfeasibleInstanceError
from formulation.instance import Instance, Job
from formulation.progress import SPEC_PROGRESS
from formulation.schedule import Schedule

Placement = Literal["any", "one_node", "multi_node"]
ObjectiveKind = Literal["jct", "makespan"]

DEFAULT_UNITS_PER_SLOT = 10**6
DEFAULT_TARGET_SLOTS = 120
MAX_SLOTS_PER_JOB = 100_000
REL_TOL = 1e-9  # the validator's relative tolerance on completion
MEMORY_TOL = 1e-9
_NICE_MANTISSAS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)


# --- data ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SlotMode:
    """One way to run a job in the slotted model.

    Attributes
    ----------
    steps, sub_batch
        Gradient-accumulation steps and the resulting sub-batch (Algorithm 2's knob).
    memory_gib
        Per-GPU memory in this mode.
    placement
        ``"any"`` (speed does not depend on where the GPUs are), ``"one_node"`` (all GPUs in one node)
        or ``"multi_node"`` (GPUs on at least two nodes).
    iteration_time
        Seconds per iteration alone under this placement (Eq. 3 via ``Instance.iteration_time``).
    work
        Progress units needed (``ceil(U · I_j · iteration_time / Δ)``).
    min_slots
        Slots needed alone: ``ceil(work / U)``.
    max_slots
        Slots needed next to the job's slowest possible partner for the whole run.
    """

    steps: int
    sub_batch: int
    memory_gib: float
    placement: Placement
    iteration_time: float
    work: int
    min_slots: int
    max_slots: int


@dataclass(frozen=True, slots=True)
class SlotJob:
    """One job of a :class:`SlottedProblem` (index ``i`` = position in ``problem.jobs``).

    Attributes
    ----------
    id, arrival, num_gpus
        From the instance.
    release
        First slot it may start in: ``ceil(arrival / Δ)``.
    modes
        Non-dominated :class:`SlotMode` s, fastest (least work) first.
    min_slots, max_slots
        Over all modes: shortest duration alone, longest next to its slowest partner.
    latest_end
        Exclusive end slot no solution at least as good as the upper bound exceeds (``E_j ≤`` this).
    """

    id: str
    arrival: float
    num_gpus: int
    release: int
    modes: tuple[SlotMode, ...]
    min_slots: int
    max_slots: int
    latest_end: int

    @property
    def earliest_start(self) -> int:
        return self.release

    @property
    def least_work_mode(self) -> int:
        """The index of the least-work (fastest) mode, the first of equals (``0`` as the modes are built)."""
        return min(range(len(self.modes)), key=lambda m: self.modes[m].work)

    @property
    def latest_start(self) -> int:
        """Latest start slot: ``latest_end - min_slots``."""
        return self.latest_end - self.min_slots

    @property
    def earliest_end(self) -> int:
        return self.release + self.min_slots


@dataclass(frozen=True, slots=True)
class SlotAssignment:
    """A job's decision in a slot-level solution.

    Attributes
    ----------
    start
        Start slot.
    gpus
        Flat GPU ids (sorted).
    mode
        Index into the job's ``modes``.
    end
        Exclusive end slot claimed by the producer (optional; :func:`evaluate` recomputes it).
    """

    start: int
    gpus: tuple[int, ...]
    mode: int = 0
    end: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", tuple(sorted(int(g) for g in self.gpus)))


SlotSolution = dict[str, SlotAssignment]
"""A slot-level solution: job id → :class:`SlotAssignment`."""


@dataclass(frozen=True, eq=False)
class SlottedProblem:
    """The slotted problem: everything in integers, shared by the CP-SAT and Pyomo models.

    Attributes
    ----------
    instance
        The source instance.
    slot
        ``Δ`` in seconds.
    units_per_slot
        ``U``: progress units of one slot alone.
    jobs
        :class:`SlotJob` s in canonical order (index ``i`` used by every array below).
    speed
        ``speed[i][k]``: units per slot of job ``i`` while job ``k`` shares one of its GPUs, or
        ``None`` if the two may not share (either direction forbidden). ``speed[i][i]`` is ``U``.
    horizon
        ``T``: every job ends at or before slot boundary ``T``.
    objective
        ``"jct"`` or ``"makespan"`` (the windows depend on it).
    upper_bound
        The solution the windows were derived from (valid, evaluated), or ``None``.
    upper_bound_value
        Its objective in slot units (:meth:`objective_slots`), or ``None``.
    """

    instance: Instance
    slot: float
    units_per_slot: int
    jobs: tuple[SlotJob, ...]
    speed: tuple[tuple[int | None, ...], ...]
    horizon: int
    objective: ObjectiveKind
    upper_bound: SlotSolution | None = None
    upper_bound_value: int | None = None
    horizon_cap: int | None = None
    _memory_fit: dict[tuple[int, int], tuple[tuple[bool, ...], ...]] = field(
        default_factory=dict, repr=False, compare=False
    )

    # --- sizes and look-ups -----------------------------------------------------------------------
    @property
    def num_jobs(self) -> int:
        return len(self.jobs)

    @property
    def num_gpus(self) -> int:
        return self.instance.cluster.num_gpus

    @property
    def gpus_per_node(self) -> int:
        return self.instance.cluster.gpus_per_node

    @property
    def num_nodes(self) -> int:
        return self.instance.cluster.nodes

    @property
    def capacity(self) -> int:
        return self.instance.cluster.capacity

    @property
    def gpu_memory_gib(self) -> float:
        return self.instance.cluster.gpu_memory_gib

    @property
    def releases_spread(self) -> bool:
        """The jobs are released at two or more different slots (arrivals spread in time): where CP-SAT's
        ``core`` search and the restarts in the lane windows were measured to pay."""
        return len({job.release for job in self.jobs}) >= 2

    @cached_property
    def index(self) -> Mapping[str, int]:
        """Job id → index in :attr:`jobs`."""
        return {job.id: i for i, job in enumerate(self.jobs)}

    def node_of(self, gpu: int) -> int:
        return gpu // self.gpus_per_node

    # --- sharing ------------------------------------------------------------------------------------
    def memory_fits(self, i: int, mode_i: int, k: int, mode_k: int) -> bool:
        """Whether job ``i`` in ``mode_i`` and job ``k`` in ``mode_k`` fit on one GPU together."""
        return self.memory_table(i, k)[mode_i][mode_k]

    def memory_table(self, i: int, k: int) -> tuple[tuple[bool, ...], ...]:
        """``table[m][m2]``: :meth:`memory_fits` for every mode pair of jobs ``i`` and ``k``."""
        key = (i, k)
        if key not in self._memory_fit:
            limit = self.gpu_memory_gib * (1 + MEMORY_TOL) + MEMORY_TOL
            self._memory_fit[key] = tuple(
                tuple(a.memory_gib + b.memory_gib <= limit for b in self.jobs[k].modes) for a in self.jobs[i].modes
            )
        return self._memory_fit[key]

    @cached_property
    def min_memory(self) -> tuple[float, ...]:
        """Per job, the smallest per-GPU memory over its modes (GiB)."""
        return tuple(min(m.memory_gib for m in job.modes) for job in self.jobs)

    def can_share(self, i: int, k: int) -> bool:
        """Whether jobs ``i`` and ``k`` may ever share a GPU: allowed both ways and some mode pair fits."""
        if i == k or self.speed[i][k] is None or self.speed[k][i] is None:
            return False
        # some mode pair fits (memory_table's rule) iff the two smallest ones do: O(1), not O(modes²)
        return self.min_memory[i] + self.min_memory[k] <= self.gpu_memory_gib * (1 + MEMORY_TOL) + MEMORY_TOL

    @cached_property
    def share_classes(self) -> tuple[tuple[int, ...], ...]:
        """Jobs that are alike for :meth:`can_share` and :attr:`speed` (same profile, same smallest
        memory), at most two members each: pair questions over classes instead of over all pairs
        (a trace of 1,000 jobs has a few dozen profiles)."""
        classes: dict[tuple[str, float], list[int]] = {}
        for i, job in enumerate(self.jobs):
            members = classes.setdefault((self.instance.job(job.id).profile, self.min_memory[i]), [])
            if len(members) < 2:
                members.append(i)
        return tuple(tuple(members) for members in classes.values())

    @cached_property
    def _worst_speeds(self) -> tuple[int, ...]:
        units = self.units_per_slot
        reps = self.share_classes
        worst = []
        for i in range(self.num_jobs):
            speeds = [units]
            for members in reps:
                k = members[0] if members[0] != i else (members[1] if len(members) > 1 else None)
                if k is not None and self.can_share(i, k):
                    speeds.append(self.speed[i][k])  # type: ignore[arg-type]
            worst.append(min(speeds))
        return tuple(worst)

    @cached_property
    def best_pair_speed(self) -> int:
        """Most units per slot two jobs sharing a GPU make together (``U`` if no two may share)."""
        best = self.units_per_slot
        reps = self.share_classes
        for a, first in enumerate(reps):
            for second in reps[a:]:
                i, k = first[0], second[0]
                if first is second:
                    if len(first) < 2:
                        continue
                    k = first[1]
                if self.can_share(i, k):
                    best = max(best, (self.speed[i][k] or 0) + (self.speed[k][i] or 0))
        return best

    def windows_overlap(self, i: int, k: int) -> bool:
        """Whether the windows ``[release, latest_end)`` of the two jobs intersect."""
        a, b = self.jobs[i], self.jobs[k]
        return a.release < b.latest_end and b.release < a.latest_end

    @cached_property
    def overlapping_pairs(self) -> tuple[tuple[int, int], ...]:
        """Pairs ``(i, k)``, ``i < k``, whose windows intersect: only these can run at the same time."""
        return tuple(
            (i, k) for i in range(self.num_jobs) for k in range(i + 1, self.num_jobs) if self.windows_overlap(i, k)
        )

    @cached_property
    def sharing_pairs(self) -> tuple[tuple[int, int], ...]:
        """Overlapping pairs that may share a GPU (:meth:`can_share`)."""
        return tuple((i, k) for i, k in self.overlapping_pairs if self.can_share(i, k))

    @cached_property
    def conflict_pairs(self) -> tuple[tuple[int, int], ...]:
        """Overlapping pairs that may not share: if they overlap in time their GPU sets are disjoint."""
        return tuple((i, k) for i, k in self.overlapping_pairs if not self.can_share(i, k))

    def must_share_if_overlapping(self, i: int, k: int) -> bool:
        """Pigeonhole: ``G_i + G_k > #GPUs``, so running at the same time means sharing a GPU."""
        return self.jobs[i].num_gpus + self.jobs[k].num_gpus > self.num_gpus

    def worst_speed(self, i: int) -> int:
        """Slowest progress per slot job ``i`` can have (its slowest possible partner; ``U`` if none)."""
        return self._worst_speeds[i]

    # --- objective ---------------------------------------------------------------------------------
    def objective_slots(self, ends: Mapping[str, int] | Iterable[int], kind: ObjectiveKind | None = None) -> int:
        """Objective in slot units from exclusive end slots: ``Σ_j E_j`` (jct) or ``max_j E_j``."""
        values = list(ends.values()) if isinstance(ends, Mapping) else list(ends)
        return sum(values) if (kind or self.objective) == "jct" else max(values)

    def objective_seconds(self, value_slots: float, kind: ObjectiveKind | None = None) -> float:
        """Seconds from slot units: ``Δ·ΣE − Σa`` (total JCT) or ``Δ·maxE − min a`` (makespan)."""
        if (kind or self.objective) == "jct":
            return self.slot * value_slots - sum(job.arrival for job in self.jobs)
        return self.slot * value_slots - min(job.arrival for job in self.jobs)

    def objective_to_slots(self, seconds: float, kind: ObjectiveKind | None = None) -> float:
        """Inverse of :meth:`objective_seconds` (slot units, a float)."""
        if (kind or self.objective) == "jct":
            return (seconds + sum(job.arrival for job in self.jobs)) / self.slot
        return (seconds + min(job.arrival for job in self.jobs)) / self.slot

    def trivial_lower_bound(self, kind: ObjectiveKind | None = None) -> int:
        """A lower bound in slot units: every job alone from its release (and, for makespan, total
        GPU-slots over the cluster's capacity at the best sharing throughput)."""
        ends = [job.earliest_end for job in self.jobs]
        if (kind or self.objective) == "jct":
            return sum(ends)
        return max(ends)

    # --- derived problems --------------------------------------------------------------------------
    def with_upper_bound(self, solution: SlotSolution | Schedule) -> SlottedProblem:
        """The same problem with windows re-derived from ``solution`` (kept if it is no better)."""
        return _with_windows(self, _as_slot_solution(self, solution))

    def summary(self) -> dict[str, Any]:
        """Sizes for logs and result statistics."""
        return {
            "slot_seconds": self.slot,
            "horizon_slots": self.horizon,
            "units_per_slot": self.units_per_slot,
            "jobs": self.num_jobs,
            "gpus": self.num_gpus,
            "modes": sum(len(job.modes) for job in self.jobs),
            "overlapping_pairs": len(self.overlapping_pairs),
            "sharing_pairs": len(self.sharing_pairs),
            "window_slots": sum(job.latest_end - job.release for job in self.jobs),
            "upper_bound_slots": self.upper_bound_value,
        }


# --- slot choice -----------------------------------------------------------------------------------


def estimate_makespan(instance: Instance) -> float:
    """A rough makespan of a list schedule (seconds): the larger of the longest job from its arrival
    and the total GPU-seconds over the cluster after the first arrival."""
    jobs = instance.jobs
    longest = max(job.arrival + instance.isolated_duration(job) for job in jobs)
    area = sum(instance.isolated_duration(job) * job.num_gpus for job in jobs) / instance.cluster.num_gpus
    return max(longest, min(job.arrival for job in jobs) + area)


def nice_number_at_least(value: float) -> float:
    """Smallest of ``{1, 2, 3, 4, 5, 6, 8}·10^k`` that is ``≥ value`` (integers for ``≥ 1`` second)."""
    if not value > 0 or not math.isfinite(value):
        raise DuettoInputError(f"cannot choose a slot length for a span of {value!r} seconds")
    exponent = math.floor(math.log10(value))
    for exp in (exponent, exponent + 1):
        for mantissa in _NICE_MANTISSAS:
            candidate = mantissa * 10.0**exp if exp < 0 else float(int(mantissa) * 10**exp)
            if candidate >= value * (1 - 1e-12):
                return candidate
    return 10.0 ** (exponent + 1)  # pragma: no cover - unreachable


def choose_slot(instance: Instance, target_slots: int = DEFAULT_TARGET_SLOTS) -> float:
    """The default slot length ``Δ`` for an instance.

    Rule: the smallest "nice" length (``{1,2,3,4,5,6,8}·10^k`` seconds) such that a list schedule's
    estimated makespan (:func:`estimate_makespan`) spans at most ``target_slots`` slots (default 120).
    The makespan horizon is then 50-120 slots; per-job windows for the JCT objective can reach further
    (they come from the upper bound, see the module docstring), a few hundred slots at most on the
    standard random family. Shorter slots make the model larger and slower, longer ones round every
    job up to more of a slot.
    """
    if not instance.jobs:
        raise DuettoInputError("the instance has no jobs", field="jobs")
    if target_slots < 1:
        raise DuettoInputError(f"must be >= 1, got {target_slots}", field="target_slots")
    return nice_number_at_least(estimate_makespan(instance) / target_slots)


# --- building --------------------------------------------------------------------------------------


def _ceil_tol(value: float) -> int:
    """``ceil`` that forgives a relative error of ``REL_TOL`` (3.0000000001 → 3)."""
    return math.ceil(value - abs(value) * REL_TOL)


def _placements(instance: Instance, job: Job) -> tuple[tuple[Placement, int], ...]:
    """``(placement, num_nodes for Eq. 3)`` choices that change the job's speed."""
    cluster = instance.cluster
    profile = instance.profile_of(job)
    min_nodes = instance.min_nodes(job)
    spread_matters = (
        1 < job.num_gpus <= cluster.gpus_per_node
        and cluster.nodes > 1
        and profile.comm_time(job.num_gpus, 1) != profile.comm_time(job.num_gpus, 2)
    )
    if spread_matters:
        return (("one_node", 1), ("multi_node", 2))
    return (("any", min_nodes),)


def _job_modes(instance: Instance, job: Job, slot: float, units: int) -> list[SlotMode]:
    modes: list[SlotMode] = []
    for placement, nodes in _placements(instance, job):
        candidates = []
        for mode in instance.modes(job.id):
            t_iter = instance.iteration_time(job, mode.steps, num_nodes=nodes)
            work = max(1, _ceil_tol(units * job.iterations * t_iter / slot))
            candidates.append((work, mode.memory_gib, mode.steps, mode.sub_batch, t_iter))
        candidates.sort(key=lambda c: (c[0], c[1], c[2]))
        kept: list[tuple[int, float, int, int, float]] = []
        for cand in candidates:
            # dominated: some kept mode needs no more work and no more memory
            if any(k[0] <= cand[0] and k[1] <= cand[1] + MEMORY_TOL for k in kept):
                continue
            kept.append(cand)
        for work, memory, steps, sub_batch, t_iter in kept:
            min_slots = -(-work // units)
            if min_slots > MAX_SLOTS_PER_JOB:
                raise InfeasibleInstanceError(
                    f"needs {min_slots} slots of {slot:g} s even alone (limit {MAX_SLOTS_PER_JOB}): "
                    "choose a longer slot",
                    source=f"job '{job.id}'",
                    field="iterations",
                )
            modes.append(SlotMode(steps, sub_batch, memory, placement, t_iter, work, min_slots, min_slots))
    modes.sort(key=lambda m: (m.work, m.memory_gib, m.placement, m.steps))
    return modes


def _canonical_order(instance: Instance, slot: float) -> list[Job]:
    def key(job: Job) -> tuple[int, int, float, str]:
        release = _ceil_tol(job.arrival / slot)
        return (release, -job.num_gpus, -instance.isolated_duration(job), job.id)

    return sorted(instance.jobs, key=key)


def discretize(
    instance: Instance,
    slot: float | None = None,
    horizon_slots: int | None = None,
    upper_bound_schedule: SlotSolution | Schedule | None = None,
    *,
    objective: ObjectiveKind = "jct",
    units_per_slot: int = DEFAULT_UNITS_PER_SLOT,
) -> SlottedProblem:
    """Build the slotted problem of ``instance``.

    Parameters
    ----------
    instance
        The instance.
    slot
        ``Δ`` in seconds; ``None`` picks :func:`choose_slot`.
    horizon_slots
        Optional cap on the horizon ``T`` (slots). The default derives it from the upper bound, which
        can never make the model infeasible; a cap can (then :class:`InfeasibleInstanceError` names
        the first job that cannot finish in time).
    upper_bound_schedule
        A feasible solution (slot-level, or a slotted :class:`Schedule` on the same ``Δ``) whose
        objective bounds the windows; ``None`` uses the serial schedule.
    objective
        ``"jct"`` (total JCT) or ``"makespan"``: the windows derived from the bound depend on it.
    units_per_slot
        ``U`` (see the module docstring).

    Returns
    -------
    SlottedProblem

    Raises
    ------
    DuettoInputError
        The instance's progress rule is not SPEC.md's (the slotted model is SPEC.md's problem).
    """
    if instance.progress != SPEC_PROGRESS:
        raise DuettoInputError(
            "the exact model is SPEC.md's problem, and this instance uses the "
            f"'{instance.progress.kind}' progress rule: load it with "
            "semantics='duetto' (--semantics duetto, the default)",
            field="progress",
        )
    if objective not in ("jct", "makespan"):
        raise DuettoInputError(f"must be 'jct' or 'makespan', got {objective!r}", field="objective")
    if not instance.jobs:
        raise DuettoInputError("the instance has no jobs", field="jobs")
    if slot is None:
        slot = choose_slot(instance)
    if not (isinstance(slot, int | float) and math.isfinite(slot) and slot > 0):
        raise DuettoInputError(f"must be a positive number of seconds, got {slot!r}", field="slot")
    slot = float(slot)
    if units_per_slot < 1:
        raise DuettoInputError(f"must be >= 1, got {units_per_slot}", field="units_per_slot")
    if horizon_slots is not None and horizon_slots < 1:
        raise DuettoInputError(f"must be >= 1, got {horizon_slots}", field="horizon_slots")

    ordered = _canonical_order(instance, slot)
    # the speed depends on the two profiles only: one ratio per profile pair, not per job pair
    by_profiles: dict[tuple[str, str], int | None] = {}
    speed: list[list[int | None]] = []
    for i, a in enumerate(ordered):
        row: list[int | None] = []
        for b in ordered:
            key = (a.profile, b.profile)
            if key not in by_profiles:
                forward, backward = instance.ratio(a, b), instance.ratio(b, a)
                by_profiles[key] = (
                    None
                    if forward is None or backward is None
                    else min(units_per_slot, max(1, _ceil_tol(units_per_slot / forward)))
                )
            row.append(by_profiles[key])
        row[i] = units_per_slot
        speed.append(row)
    jobs = []
    for job in ordered:
        modes = _job_modes(instance, job, slot, units_per_slot)
        release = max(0, _ceil_tol(job.arrival / slot))
        jobs.append(SlotJob(job.id, job.arrival, job.num_gpus, release, tuple(modes), 0, 0, 0))
    if instance.cluster.capacity == 2:
        jobs = _prune_by_memory_class(jobs, speed, instance.cluster.gpu_memory_gib)
    base = SlottedProblem(
        instance=instance,
        slot=slot,
        units_per_slot=units_per_slot,
        jobs=tuple(jobs),
        speed=tuple(tuple(row) for row in speed),
        horizon=0,
        objective=objective,
        horizon_cap=horizon_slots,
    )
    # durations at the worst partner need can_share, which needs the modes: fill them in now
    filled = []
    for i, slot_job in enumerate(base.jobs):
        worst = base.worst_speed(i)
        bounded = tuple(replace(m, max_slots=max(m.min_slots, -(-m.work // worst))) for m in slot_job.modes)
        filled.append(
            replace(
                slot_job,
                modes=bounded,
                min_slots=min(m.min_slots for m in bounded),
                max_slots=max(m.max_slots for m in bounded),
            )
        )
    base = replace(base, jobs=tuple(filled), _memory_fit={})
    bound = serial_solution(base) if upper_bound_schedule is None else _as_slot_solution(base, upper_bound_schedule)
    return _with_windows(base, bound, force=True)


def _prune_by_memory_class(jobs: list[SlotJob], speed: list[list[int | None]], memory: float) -> list[SlotJob]:
    """Drop modes that a faster mode of the same placement dominates in memory *class* (C = 2 only).

    With two jobs per GPU, a mode's memory matters only through which partner modes it fits next
    to. A slower mode whose smaller memory fits next to no partner mode that the faster mode cannot
    fit next to is useless. Dropping modes removes partner modes, so repeat until nothing changes.
    """
    limit = memory * (1 + MEMORY_TOL) + MEMORY_TOL
    changed = True
    while changed:
        changed = False
        for i, job in enumerate(jobs):
            partner_memory = sorted(
                {
                    mode.memory_gib
                    for k, other in enumerate(jobs)
                    if k != i and speed[i][k] is not None and speed[k][i] is not None
                    for mode in other.modes
                }
            )

            def fit_class(mode: SlotMode, partners: list[float] = partner_memory) -> int:
                return sum(1 for m in partners if mode.memory_gib + m <= limit)

            kept: list[SlotMode] = []
            for mode in sorted(job.modes, key=lambda m: (m.work, m.memory_gib)):
                if any(
                    k.placement == mode.placement and k.work <= mode.work and fit_class(k) >= fit_class(mode)
                    for k in kept
                ):
                    continue
                kept.append(mode)
            if len(kept) < len(job.modes):
                jobs[i] = replace(job, modes=tuple(kept))
                changed = True
    return jobs


def serial_solution(problem: SlottedProblem) -> SlotSolution:
    """One job at a time in canonical (release) order, fastest mode, alone: always feasible."""
    solution: SlotSolution = {}
    clock = 0
    for job in problem.jobs:
        mode_index = job.least_work_mode
        mode = job.modes[mode_index]
        gpus = _placement_gpus(problem, job.num_gpus, mode.placement)
        start = max(clock, job.release)
        clock = start + mode.min_slots
        solution[job.id] = SlotAssignment(start, gpus, mode_index, clock)
    return solution


def _placement_gpus(problem: SlottedProblem, count: int, placement: Placement) -> tuple[int, ...]:
    if placement == "multi_node":
        # spread over two nodes: first half on node 0, rest on node 1
        first = (count + 1) // 2
        return tuple(range(first)) + tuple(range(problem.gpus_per_node, problem.gpus_per_node + count - first))
    return tuple(range(count))


def sharing_throughput(problem: SlottedProblem) -> float:
    """Most alone-slots of work one GPU can deliver in one slot (1 alone; ``1/ξ_ik + 1/ξ_ki`` for the
    best pair when ``C = 2``; ``C`` as a safe bound when more jobs may share)."""
    if problem.capacity == 1:
        return 1.0
    if problem.capacity > 2:
        return float(problem.capacity)
    return problem.best_pair_speed / problem.units_per_slot


def completion_sum_lower_bound(problem: SlottedProblem, exclude: int | None = None) -> int:
    """A lower bound on ``Σ_j E_j`` (slot units) over all jobs but ``exclude``: the larger of two.

    * **Order statistics.** The ``k``-th job to complete (in any schedule) ends no earlier than the
      ``k``-th smallest ``release + min_slots`` and no earlier than ``min release + ⌈(sum of the k
      smallest GPU-work areas) / (cluster throughput per slot)⌉``, the throughput counting the most a
      shared GPU can deliver (:func:`sharing_throughput`). Both bound the ``k``-th order statistic, so
      their maximum does, and summing over ``k`` bounds the total.
    * **Mean busy time** (Goemans' single-machine relaxation, as in Eastman-Even-Isaacs' bound for
      parallel machines). Job ``j`` does ``a_j = G_j·work_j`` units of GPU-work at a rate of at most
      ``G_j·U`` per slot, so the mean time ``M_j`` of its work satisfies ``E_j ≥ M_j + d_j/2`` with
      ``d_j = work_j/U``; and the cluster, a single machine of speed ``m`` (the throughput above), gives
      ``Σ_j M_j`` at least its value when the areas are processed shortest first, preemptively:
      ``Σ_j (A_{<j} + a_j/2)/m`` (``A_{<j}``: the areas before ``j``). Both measured from ``min release``.
      This adds about half of every job's length to the first bound's area term, which dominates from
      about three jobs per GPU on (``docs/oracle.md``).
    """
    members = [job for i, job in enumerate(problem.jobs) if i != exclude]
    if not members:
        return 0
    earliest = np.sort(np.array([job.earliest_end for job in members], dtype=np.int64))
    areas = np.sort(np.array([min(m.work for m in job.modes) * job.num_gpus for job in members], dtype=np.int64))
    work_sum = sum(min(m.work for m in job.modes) for job in members)
    first = min(job.release for job in members)
    return _completion_bound(problem, earliest, areas, work_sum, first)


def completion_sum_lower_bounds(problem: SlottedProblem) -> list[int]:
    """:func:`completion_sum_lower_bound` excluding each job in turn (``result[i]``: without job ``i``),
    from one sort of the whole set: O(n²) array work instead of n sorts and Python loops (the windows
    of :func:`discretize` need all of them; at 1,000 jobs the old way took minutes)."""
    n = problem.num_jobs
    if n <= 1:
        return [0] * n
    works = [min(m.work for m in job.modes) for job in problem.jobs]
    earliest_all = np.array([job.earliest_end for job in problem.jobs], dtype=np.int64)
    areas_all = np.array([w * job.num_gpus for w, job in zip(works, problem.jobs, strict=True)], dtype=np.int64)
    releases = [job.release for job in problem.jobs]
    e_order = np.argsort(earliest_all, kind="stable")
    a_order = np.argsort(areas_all, kind="stable")
    earliest, areas = earliest_all[e_order], areas_all[a_order]
    e_rank, a_rank = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    e_rank[e_order], a_rank[a_order] = np.arange(n), np.arange(n)
    by_release = sorted(range(n), key=releases.__getitem__)
    total_work = sum(works)
    bounds = []
    for i in range(n):
        first = releases[by_release[1]] if i == by_release[0] else releases[by_release[0]]
        bounds.append(
            _completion_bound(
                problem,
                np.delete(earliest, e_rank[i]),
                np.delete(areas, a_rank[i]),
                total_work - works[i],
                first,
            )
        )
    return bounds


def _completion_bound(
    problem: SlottedProblem, earliest: np.ndarray, areas: np.ndarray, work_sum: int, first: int
) -> int:
    """The two bounds of :func:`completion_sum_lower_bound` from the sorted earliest ends and areas."""
    units = problem.units_per_slot
    per_slot = sharing_throughput(problem) * problem.num_gpus * units
    cumulative = np.cumsum(areas)
    mean_busy = float(np.sum((cumulative - areas + areas / 2) / per_slot))
    area_ends = first + np.ceil(cumulative / per_slot - 1e-9).astype(np.int64)
    order_statistics = int(np.sum(np.maximum(earliest, area_ends)))
    mean_busy += work_sum / (2 * units) + first * len(earliest)
    return max(order_statistics, math.ceil(mean_busy - 1e-6))


def _with_windows(problem: SlottedProblem, solution: SlotSolution, *, force: bool = False) -> SlottedProblem:
    problems = check_solution(problem, solution, check_windows=False)
    if problems:
        raise DuettoInputError(f"the upper-bound solution is not feasible: {problems[0]}")
    ends = evaluate(problem, solution, exact=True)
    value = problem.objective_slots(ends)
    if not force and problem.upper_bound_value is not None and value >= problem.upper_bound_value:
        return problem
    # a solution at least as good as the bound: E_j ≤ UB − LB(Σ_{k≠j} E_k) (jct), E_j ≤ UB (makespan)
    jobs = []
    jct = problem.objective == "jct"
    others = completion_sum_lower_bounds(problem) if jct else []
    for i, job in enumerate(problem.jobs):
        latest = value - others[i] if jct else value
        if problem.horizon_cap is not None:
            latest = min(latest, problem.horizon_cap)
            if latest < job.earliest_end:
                raise InfeasibleInstanceError(
                    f"cannot finish within the horizon of {problem.horizon_cap} slots "
                    f"(needs slot {job.earliest_end} at the earliest)",
                    source=f"job '{job.id}'",
                )
        jobs.append(replace(job, latest_end=max(latest, job.earliest_end)))
    horizon = max(job.latest_end for job in jobs)
    result = replace(
        problem,
        jobs=tuple(jobs),
        horizon=horizon,
        upper_bound=dict(solution),
        upper_bound_value=value,
        _memory_fit=dict(problem._memory_fit),
    )
    # cached properties of the old object must not leak: replace() builds a fresh instance
    return result


# --- solutions -------------------------------------------------------------------------------------


def _as_slot_solution(problem: SlottedProblem, solution: SlotSolution | Schedule) -> SlotSolution:
    if isinstance(solution, Schedule):
        return from_schedule(problem, solution)
    return dict(solution)


def from_schedule(problem: SlottedProblem, schedule: Schedule) -> SlotSolution:
    """Slot-level solution of a non-preemptive schedule whose starts lie on slot boundaries.

    The mode is the fastest of the job's modes with the schedule's accumulation steps and a placement
    matching its GPU set.
    """
    result: SlotSolution = {}
    plans = schedule.plan_index
    for job in problem.jobs:
        plan = plans.get(job.id)
        if plan is None:
            raise DuettoInputError("missing from the schedule", source=f"job '{job.id}'")
        if len(plan.segments) != 1 or plan.segments[0].end is not None:
            raise DuettoInputError(
                "has a preemptive plan; the slotted model needs one segment", source=f"job '{job.id}'"
            )
        segment = plan.segments[0]
        ratio = segment.start / problem.slot
        start = round(ratio)
        if abs(ratio - start) > 1e-6:
            raise DuettoInputError(
                f"starts at {segment.start} s, not on a slot boundary of {problem.slot:g} s", source=f"job '{job.id}'"
            )
        nodes = len({problem.node_of(g) for g in segment.gpus})
        candidates = [
            m
            for m, mode in enumerate(job.modes)
            if mode.steps == segment.steps and _placement_ok(mode.placement, nodes)
        ]
        if not candidates:
            raise DuettoInputError(
                f"runs with {segment.steps} accumulation steps, not a non-dominated mode of the slotted model",
                source=f"job '{job.id}'",
            )
        result[job.id] = SlotAssignment(start, tuple(segment.gpus), candidates[0], None)
    return result


def _placement_ok(placement: Placement, nodes: int) -> bool:
    if placement == "one_node":
        return nodes == 1
    if placement == "multi_node":
        return nodes >= 2
    return True


def check_solution(
    problem: SlottedProblem,
    solution: SlotSolution,
    *,
    check_windows: bool = True,
    semantics: Literal["exact", "float"] = "exact",
) -> list[str]:
    """Rules of the slotted model a solution must meet (a quick self-check for backends and tests; the
    independent check is ``formulation.validator``). Returns messages, empty when fine.

    ``semantics`` picks the completion rule of :func:`evaluate` that decides how long each job holds
    its GPUs: ``"exact"`` (the integer model) or ``"float"`` (SPEC.md, as the validator)."""
    messages: list[str] = []
    for job in problem.jobs:
        a = solution.get(job.id)
        if a is None:
            messages.append(f"job '{job.id}': missing")
            continue
        if not 0 <= a.mode < len(job.modes):
            messages.append(f"job '{job.id}': mode {a.mode} out of range")
            continue
        if a.start < job.release:
            messages.append(f"job '{job.id}': starts in slot {a.start} before its release slot {job.release}")
        if len(set(a.gpus)) != job.num_gpus or any(not 0 <= g < problem.num_gpus for g in a.gpus):
            messages.append(f"job '{job.id}': GPU set {a.gpus} is not {job.num_gpus} distinct valid GPUs")
        nodes = len({problem.node_of(g) for g in a.gpus})
        if not _placement_ok(job.modes[a.mode].placement, nodes):
            messages.append(f"job '{job.id}': {nodes} node(s) do not match placement {job.modes[a.mode].placement}")
    if messages:
        return messages
    ends = evaluate(problem, solution, exact=semantics == "exact")
    # capacity and memory per GPU and slot
    occupancy: dict[tuple[int, int], list[int]] = {}
    for i, job in enumerate(problem.jobs):
        a = solution[job.id]
        if check_windows and ends[job.id] > job.latest_end:
            messages.append(f"job '{job.id}': ends at slot {ends[job.id]} after its latest end {job.latest_end}")
        for t in range(a.start, ends[job.id]):
            for g in a.gpus:
                occupancy.setdefault((g, t), []).append(i)
    for (g, t), members in sorted(occupancy.items()):
        if len(members) > problem.capacity:
            messages.append(f"GPU {g}, slot {t}: {len(members)} jobs exceed capacity {problem.capacity}")
        memory = sum(problem.jobs[i].modes[solution[problem.jobs[i].id].mode].memory_gib for i in members)
        if memory > problem.gpu_memory_gib * (1 + MEMORY_TOL) + MEMORY_TOL:
            messages.append(f"GPU {g}, slot {t}: memory {memory:g} GiB exceeds {problem.gpu_memory_gib:g}")
        for x in members:
            for y in members:
                if x < y and not problem.can_share(x, y):
                    messages.append(
                        f"GPU {g}, slot {t}: jobs '{problem.jobs[x].id}' and '{problem.jobs[y].id}' may not share"
                    )
    return messages


def check_solution_both_rules(problem: SlottedProblem, solution: SlotSolution) -> list[str]:
    """:func:`check_solution` under the integer and the float completion rule (windows not checked): what
    every incumbent and every warm start must pass, since a rounding near miss can hold a GPU one slot
    longer in the float semantics (``docs/oracle.md``, "Units and rounding")."""
    return check_solution(problem, solution, check_windows=False) or check_solution(
        problem, solution, check_windows=False, semantics="float"
    )


def evaluate(problem: SlottedProblem, solution: SlotSolution, *, exact: bool = False) -> dict[str, int]:
    """Exclusive end slot of every job under the slotted progress rule.

    Parameters
    ----------
    exact
        ``False`` (default): SPEC.md's float semantics, as the validator computes them (Eq. 3 with the
        nodes the GPU set actually spans, ``ξ_eff`` = largest ratio over jobs sharing a GPU in the
        slot, completion when progress ≥ ``I_j·(1 − 1e-9)``). ``True``: the integer model's rule
        (units, ``speed``, ``work``) — what a backend's end variables must equal.
    """
    order = list(problem.jobs)
    n = len(order)
    assign = [solution[job.id] for job in order]
    ends: list[int | None] = [None] * n
    need: list[float] = []  # units (exact) or iterations (float) to complete
    per_slot: list[float] = []  # float semantics: iterations per slot alone
    for i, job in enumerate(order):
        a = assign[i]
        if exact:
            need.append(float(job.modes[a.mode].work))
            continue
        inst_job = problem.instance.job(job.id)
        nodes = len({problem.node_of(g) for g in a.gpus})
        t_iter = problem.instance.iteration_time(inst_job, job.modes[a.mode].steps, num_nodes=nodes)
        need.append(inst_job.iterations)
        per_slot.append(problem.slot / t_iter)
    progress = [0.0] * n
    # partners through per-GPU buckets, running jobs from a start-sorted cursor: no pass over all
    # pairs or all jobs per slot (at 1,000 jobs over 16,000 slots that took seconds per call)
    on_gpu: dict[int, list[int]] = {}
    for i, a in enumerate(assign):
        for g in a.gpus:
            on_gpu.setdefault(g, []).append(i)
    partners = [sorted({k for g in assign[i].gpus for k in on_gpu[g]} - {i}) for i in range(n)]
    by_start = sorted(range(n), key=lambda i: assign[i].start)
    cursor = 0
    running: list[int] = []
    t = assign[by_start[0]].start
    remaining = n
    limit = max(a.start for a in assign) + sum(
        job.modes[a.mode].max_slots + 1 for job, a in zip(order, assign, strict=True)
    )
    while remaining:
        if t > limit + 1:
            raise RuntimeError("evaluation did not terminate (a job makes no progress)")
        while cursor < n and assign[by_start[cursor]].start <= t:
            running.append(by_start[cursor])
            cursor += 1
        if not running:  # idle until the next start: nothing progresses, nothing completes
            t = assign[by_start[cursor]].start
            continue
        running_set = set(running)
        for i in running:
            co = [k for k in partners[i] if k in running_set]  # both occupy the whole slot
            if exact:
                rate = min([problem.units_per_slot] + [_speed(problem, i, k) for k in co])
                progress[i] += rate
            else:
                xi = max([1.0] + [_ratio(problem, i, k) for k in co])
                progress[i] += per_slot[i] / xi
        for i in running:
            done = progress[i] >= need[i] if exact else progress[i] >= need[i] * (1 - REL_TOL)
            if done:
                ends[i] = t + 1
                remaining -= 1
        running = [i for i in running if ends[i] is None]
        t += 1
    return {order[i].id: int(ends[i]) for i in range(n)}  # type: ignore[arg-type]


def _speed(problem: SlottedProblem, i: int, k: int) -> int:
    value = problem.speed[i][k]
    # a forbidden pair sharing is an invalid solution; evaluate it as the slowest speed (check_solution
    # reports it)
    return value if value is not None else 1


def _ratio(problem: SlottedProblem, i: int, k: int) -> float:
    value = problem.instance.ratio(problem.jobs[i].id, problem.jobs[k].id)
    return value if value is not None else math.inf


def prefer_faster_modes(problem: SlottedProblem, solution: SlotSolution) -> SlotSolution:
    """Switch every job to the fastest mode of its placement that fits next to the partners it really
    shares a GPU with while running (``C = 2``). Never worse: less work, same GPUs and starts, so every
    job ends no later. The result meets the mode-dominance rule of the CP-SAT model (a slower mode only
    when a sharing partner's mode needs its memory), so warm starts pass through this."""
    if problem.capacity != 2:
        return dict(solution)
    current = dict(solution)
    changed = True
    while changed:
        changed = False
        ends = evaluate(problem, current, exact=True)
        on_gpu: dict[int, list[int]] = {}  # jobs per GPU: partners without a pass over all pairs
        for k, other in enumerate(problem.jobs):
            for g in current[other.id].gpus:
                on_gpu.setdefault(g, []).append(k)
        for i, job in enumerate(problem.jobs):
            a = current[job.id]
            if a.mode == 0:
                continue  # already the fastest mode
            sharing = sorted({k for g in a.gpus for k in on_gpu[g]} - {i})
            partners = [
                (k, current[problem.jobs[k].id].mode)
                for k in sharing
                if current[problem.jobs[k].id].start < ends[job.id] and a.start < ends[problem.jobs[k].id]
            ]
            mode = job.modes[a.mode]
            for m, candidate in enumerate(job.modes):
                if m == a.mode:
                    break
                if candidate.placement != mode.placement or candidate.work > mode.work:
                    continue
                if all(problem.memory_fits(i, m, k, mk) for k, mk in partners):
                    current[job.id] = replace(a, mode=m, end=None)
                    changed = True
                    break
            if changed:
                break
    return current


def canonicalize(problem: SlottedProblem, solution: SlotSolution) -> SlotSolution:
    """Relabel GPUs so the solution meets the symmetry-breaking rule (module docstring): nodes ordered
    by first use in canonical job order, GPUs within each node by first use. Same schedule, other
    names; pass warm starts through this before handing them to a model with symmetry breaking."""
    gpn = problem.gpus_per_node
    node_order: list[int] = []
    gpu_order: dict[int, list[int]] = {}
    for job in problem.jobs:
        gpus = solution[job.id].gpus
        for g in gpus:
            node = g // gpn
            if node not in node_order:
                node_order.append(node)
        for g in gpus:
            node = g // gpn
            order = gpu_order.setdefault(node, [])
            if g not in order:
                order.append(g)
    for node in range(problem.num_nodes):
        if node not in node_order:
            node_order.append(node)
    mapping: dict[int, int] = {}
    for new_node, node in enumerate(node_order):
        used = gpu_order.get(node, [])
        rest = [g for g in range(node * gpn, (node + 1) * gpn) if g not in used]
        for position, g in enumerate(used + rest):
            mapping[g] = new_node * gpn + position
    return {job_id: replace(a, gpus=tuple(sorted(mapping[g] for g in a.gpus))) for job_id, a in solution.items()}


def is_canonical(problem: SlottedProblem, solution: SlotSolution) -> bool:
    """Whether ``solution`` meets the GPU symmetry-breaking rule (module docstring)."""
    gpn = problem.gpus_per_node
    used: set[int] = set()
    for job in problem.jobs:
        used |= set(solution[job.id].gpus)
        for g in range(problem.num_gpus):
            if g % gpn and g in used and g - 1 not in used:
                return False
        for node in range(1, problem.num_nodes):
            if node * gpn in used and (node - 1) * gpn not in used:
                return False
    return True


def to_schedule(
    problem: SlottedProblem,
    solution: SlotSolution,
    *,
    producer: str = "oracle",
    metadata: Mapping[str, Any] | None = None,
) -> Schedule:
    """A slotted :class:`Schedule` (``slot = Δ``) of a slot-level solution; claimed completions are the
    float-semantics completions (:func:`evaluate`), as the validator will recompute them."""
    ends = evaluate(problem, solution)
    entries = []
    for job in problem.jobs:
        a = solution[job.id]
        entries.append((job.id, a.start * problem.slot, a.gpus, job.modes[a.mode].steps))
    order = {job.id: position for position, job in enumerate(problem.instance.jobs)}
    entries.sort(key=lambda e: order[e[0]])
    return Schedule.non_preemptive(
        entries,
        completions={job_id: end * problem.slot for job_id, end in ends.items()},
        slot=problem.slot,
        producer=producer,
        metadata=dict(metadata or {}),
    )


def solution_objective(problem: SlottedProblem, solution: SlotSolution, kind: ObjectiveKind | None = None) -> float:
    """Objective in seconds of a solution under the float semantics (what the validator recomputes)."""
    ends = evaluate(problem, solution)
    return problem.objective_seconds(problem.objective_slots(ends, kind), kind)
