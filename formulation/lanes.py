"""A Dantzig-Wolfe (lane) relaxation of the slotted problem, solved by column generation.

Why it exists: the pair-coupled LP (:mod:`formulation.relaxation`) knows which two jobs share a GPU,
but only as aggregate GPU time per window: a job's fractional runs can take their sharing where it is
cheapest and pay for it elsewhere (``docs/oracle.md``: about 70 % of its slack at 12 jobs). Here a
column is one GPU's whole **lane**: the sequence of jobs that run on it, each with its start and end
slot, two at a time at most, where every overlap of two jobs in the lane is the *same* overlap for
both and slows each by its own ratio. The LP then mixes whole lanes, not runs and cells.

The master (all in slot units; ``G_j`` GPUs, ``w_j = W_j/U`` alone-slots of work in the job's least-work
mode, ``σ_jk`` the fraction of a slot ``j`` progresses next to ``k`` in its fastest mode that fits next
to ``k``, as in the coupled LP):

* ``λ_c ≥ 0`` per lane ``c``; ``Σ_c λ_c ≤ #GPUs``;
* ``y_{jS}``, ``z_{jE}``: the start and end distributions of job ``j``, ``q_j`` its mass ending past the
  cut (``Σ_S y_{jS} + q_j = 1``, ``Σ_E z_{jE} + q_j = 1``);
* gang linking: ``Σ_c [j starts at S in c]·λ_c = G_j·y_{jS}`` and ``Σ_c [j ends at E in c]·λ_c =
  G_j·z_{jE}`` (a gang is ``G_j`` lanes that start and end together);
* progress: ``Σ_c prog_c(j)·λ_c ≥ G_j·w_j·(1 − q_j)``, where ``prog_c(j) = (E − S) − Σ_k (1 − σ_jk)·
  overlap_c(j, k)`` is what ``j`` would progress if its partners in lane ``c`` were its only ones (a
  gang's slowest worker is no faster than any single lane of it, so every real lane satisfies
  ``prog ≥ w_j``);
* objective ``min Σ_j (Σ_E E·z_{jE} + late_j·q_j)``, ``late_j = max(cut + 1, r_j + d_j)``;
* cover cuts for sets of jobs too wide to run side by side (``Σ_{j∈Q} G_j > #GPUs``), added where the LP
  violates them (:class:`_CoverRows`): per slot, the lanes holding two of them are at least
  ``e_Q·(Σ_{j∈Q} P_j − |Q| + 1)``, ``e_Q = Σ_{j∈Q} G_j − #GPUs``.

The master solved (:class:`_Master`) is this LP with ``y`` and ``z`` substituted out: they appear only in
their own linking and simplex rows, so ``y_{jS} = Σ_c [j starts at S in c]·λ_c / G_j`` and the rows
reduce to one coverage row per job, ``Σ_c m_c(j)·λ_c + G_j·q_j = G_j``, with a lane costing ``Σ E/G_j``
over its entries. Same LP, same optimum, about ``2·T`` fewer rows per job.

Every schedule of the slotted model cut into its GPUs' lanes is a feasible point (a relaxation: GPU
placement across nodes, modes and the slowest-worker rule are relaxed as described), so the LP optimum
is a lower bound on ``Σ_j E_j``.

**Mode-aware lanes** (``modes=True``, :class:`PseudoJobs`): the lanes above give a job its least-work mode
and, next to a partner, the speed of its fastest mode that fits there, so a job that must take a slower
mode to share pays for it only while it shares. With modes, each (job, mode) is a pseudo-job of the same
DP, a lane entry carries its mode, the coverage row stays per job and the progress row is per pseudo-job
with right side 0 (``Σ_c (prog_c(p) − w_p·m_c(p))·λ_c ≥ 0``). Every real lane is still a column, and the
LP is at least the mode-free one (:func:`modal_duals`). In a tree the mode-aware master starts from the
mode-free root (:func:`modal_master`).

Pricing (:class:`_LanePricing`) finds the lane of largest dual value by a dynamic program over slots
whose states are "job ``i`` runs since slot ``S`` and is alone at slot ``t``". From such a state, ``i``
may run one more slot alone, end, host a *nested* partner ``k`` that starts now and ends while ``i``
still runs (``k`` is shared for its whole run, so ``σ_ki·(E_k − t) ≥ w_k`` is checked exactly), or
*hand over* to a partner ``k`` that starts now and outlives ``i`` (``i``'s progress with this overlap
is checked; ``k`` continues as the running job). Every real lane (at most two jobs at a time) is such a
path. The DP prices a superset of the lanes (a job's losses before its last partner are charged by the
progress row's dual rather than checked in the column; a job may appear twice in one lane), so its
optimum bounds the true pricing problem and the Lagrangian bound ``z_RMP + #GPUs · min(0, rc)`` holds
after any round. Where no pair may share (``C = 1``) the lanes are sequences of alone runs and the
exclusive pass prices them instead (:meth:`_LanePricing._price_exclusive`): a DP over (slot, the gangs
run so far) that never runs a gang twice in one lane, still a superset of the real lanes. Columns of
the superset are valid in the master for the same reason: the LP over them is a relaxation of the LP
over real lanes.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal, Self

import numpy as np

from formulation import lane_kernel
from formulation.discretize import SlottedProblem, evaluate
from formulation.relaxation import _shared_speed, default_cut

NEG = lane_kernel.NEG
"""Value of an unreachable DP state (finite, so sums of two stay comparable)."""
REACHABLE = lane_kernel.REACHABLE
PRICING_TOLERANCE = 1e-6
"""A lane enters the master when its reduced cost is below minus this (slot units)."""
DEFAULT_SMOOTHING = 0.8
"""Wentges' weight on the best-bound duals when pricing (0: plain column generation)."""
MAX_SEPARATIONS = 30
SEPARATION_GAP = 0.01
"""Rounds of cover rows added per column generation at most (:class:`_CoverRows`)."""
LANE_PRICINGS = ("fast", "progress")
"""The lane DPs :func:`lane_bound` takes (``pricing``)."""
DEFAULT_MAX_LANE_STATES = 12_000_000
"""Above this many DP cells (``jobs × (T+1)²``, about 26 bytes each) the lane bound is skipped."""

MAX_TRACKED_JOBS = 10
"""Where no pair may share, the pricing keeps at most this many gangs (most GPU-slots of work first,
:func:`tracked_jobs`) out of a second run in one lane (:func:`formulation.lane_kernel._exclusive_forward`:
its labels are sets of them, so its time grows with ``2^count``)."""


@dataclass(frozen=True)
class LaneEntry:
    """One job's run in a lane: start and exclusive end slot, and its lane-local progress (alone-slots
    of its least-work mode)."""

    job: int
    start: int
    end: int
    progress: float
    mode: int = 0
    """The job's mode (an index into its modes) where the lanes are mode-aware (:class:`PseudoJobs`); 0
    otherwise, where the progress is in alone-slots of its least-work mode."""


@dataclass(frozen=True)
class Lane:
    """A column of the master: one GPU's jobs."""

    entries: tuple[LaneEntry, ...]

    def key(self) -> tuple[tuple[int, int, int, int], ...]:
        return tuple(sorted((e.job, e.start, e.end, e.mode) for e in self.entries))


@dataclass(frozen=True)
class LaneBound:
    """Result of :func:`lane_bound`.

    Attributes
    ----------
    value
        Proven lower bound on ``Σ_j E_j`` (slots); ``nan`` when none was proven.
    status
        ``"optimal"`` (no lane prices out: the LP optimum), ``"time_limit"`` / ``"cancelled"`` /
        ``"max_rounds"`` (the best Lagrangian bound of the rounds done), ``"skipped: <reason>"`` or
        ``"failed: <reason>"``.
    master_value
        The restricted master's last optimum (an upper bound on the LP optimum).
    rounds, columns
        Pricing rounds and lanes in the master at the end.
    seconds, pricing_seconds, master_seconds
        Total, pricing and master time.
    horizon
        Slots of the lanes (the cut).
    """

    value: float
    status: str
    master_value: float = math.nan
    rounds: int = 0
    columns: int = 0
    seconds: float = 0.0
    pricing_seconds: float = 0.0
    master_seconds: float = 0.0
    horizon: int = 0
    history: tuple[tuple[float, float, float], ...] = field(default=(), repr=False)
    """(seconds, master value, best bound) after each round."""
    gang_repeat_share: float = math.nan
    """With ``gang_repeats=True``: the share of the gangs' lane-units (``Σ G_j``) that the last master
    covers by a gang's second or later entry in one lane (time-slicing a gang on one GPU)."""
    elementary_ceiling: float = math.nan
    """With ``gang_repeats=True``: the last master re-solved without the lanes that hold a gang twice.
    Not a bound: a subset of the elementary lanes, so the LP over *every* lane that holds each gang at
    most once is at most this (``nan`` if that master did not solve)."""
    mode_aware: bool = False
    """Whether the lanes were mode-aware (:class:`PseudoJobs`)."""
    others: tuple[float, ...] | None = field(default=None, repr=False)
    """``[j]``: a lower bound on ``Σ_{k≠j} E_k`` (slots) from the duals of ``value``
    (:meth:`_Master.others_bounds`; canonical job order), for :func:`latest_ends`; ``None`` when no
    bound was proven."""

    @property
    def proven(self) -> bool:
        return math.isfinite(self.value)

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "bound_slots": self.value if self.proven else None,
            "master_slots": None if math.isnan(self.master_value) else self.master_value,
            "rounds": self.rounds,
            "columns": self.columns,
            "seconds": round(self.seconds, 3),
            "pricing_seconds": round(self.pricing_seconds, 3),
            "master_seconds": round(self.master_seconds, 3),
            "horizon": self.horizon,
            "mode_aware": self.mode_aware,
        }


# --- data --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaneData:
    """The numbers the master and the pricing share (arrays indexed by job, slot)."""

    n: int
    horizon: int  # T: lanes live in slots [0, T); ends up to T
    gpus: int
    num_gpus: np.ndarray  # G_j
    work: np.ndarray  # w_j, alone-slots
    release: np.ndarray
    min_slots: np.ndarray  # d_j
    max_slots: np.ndarray  # D_j
    last_start: np.ndarray  # latest start within the lanes' horizon
    last_end: np.ndarray  # latest end within the horizon
    late_cost: np.ndarray  # E_j when ending past the horizon (0 where not allowed)
    can_be_late: np.ndarray  # bool
    sigma: np.ndarray  # (n, n) fraction of a slot j progresses next to k; 0 where they may not share
    shareable: np.ndarray  # (n, n) bool
    nested_min: np.ndarray  # (n, n) [k, i]: slots k needs when shared with i for its whole run
    pseudo: PseudoJobs | None = None  # each job in each of its modes, where the lanes are mode-aware

    @staticmethod
    def from_problem(problem: SlottedProblem, horizon: int, modes: bool = False) -> LaneData:
        """The lane data of ``problem`` with lanes ending by ``horizon``; ``modes=True`` makes the lanes
        mode-aware (:class:`PseudoJobs`) where some job has two modes and some pair may share."""
        data = LaneData._mode_free(problem, horizon)
        if modes:
            pseudo = PseudoJobs.of(problem, data)
            if pseudo is not None:
                return replace(data, pseudo=pseudo)
        return data

    @staticmethod
    def _mode_free(problem: SlottedProblem, horizon: int) -> LaneData:
        jobs = problem.jobs
        n = len(jobs)
        units = problem.units_per_slot
        least = [min(mode.work for mode in job.modes) for job in jobs]
        sigma = np.zeros((n, n))
        for i, k in problem.sharing_pairs if problem.capacity >= 2 else ():  # C = 1: a job a GPU
            sigma[i, k] = _shared_speed(problem, i, k, least[i]) / units
            sigma[k, i] = _shared_speed(problem, k, i, least[k]) / units
        shareable = (sigma > 0) & (sigma.T > 0)
        sigma = np.where(shareable, sigma, 0.0)
        work = np.array(least, dtype=float) / units
        with np.errstate(divide="ignore"):
            nested = np.where(shareable, np.ceil(work[:, None] / np.where(shareable, sigma, 1.0) - 1e-9), np.inf)
        release = np.array([job.release for job in jobs])
        min_slots = np.array([job.min_slots for job in jobs])
        max_slots = np.array([max(job.max_slots, job.min_slots) for job in jobs])
        latest_end = np.array([job.latest_end for job in jobs])
        last_end = np.minimum(latest_end, horizon)
        can_be_late = latest_end > horizon
        late_cost = np.where(can_be_late, np.maximum(horizon + 1, release + min_slots), 0)
        return LaneData(
            n=n,
            horizon=horizon,
            gpus=problem.num_gpus,
            num_gpus=np.array([job.num_gpus for job in jobs]),
            work=work,
            release=release,
            min_slots=min_slots,
            max_slots=max_slots,
            last_start=last_end - min_slots,
            last_end=last_end,
            late_cost=late_cost,
            can_be_late=can_be_late,
            sigma=sigma,
            shareable=shareable,
            nested_min=nested,
        )

    def sharing_only(self, allowed: np.ndarray) -> LaneData:
        """The same data with sharing left only to the pairs ``allowed[i, k]`` marks (symmetric, bool):
        a restriction, so every bound over it bounds the schedules that share only within those pairs."""
        allowed = np.asarray(allowed, dtype=bool)
        if allowed.shape != self.shareable.shape:
            raise ValueError(f"allowed must be {self.shareable.shape}, got {allowed.shape}")
        shareable = self.shareable & allowed & allowed.T
        pseudo = self.pseudo
        if pseudo is not None:
            owner = pseudo.owner
            pseudo = replace(pseudo, data=pseudo.data.sharing_only(allowed[np.ix_(owner, owner)]))
        return replace(
            self,
            shareable=shareable,
            sigma=np.where(shareable, self.sigma, 0.0),
            nested_min=np.where(shareable, self.nested_min, np.inf),
            pseudo=pseudo,
        )

    @property
    def priced(self) -> LaneData:
        """The data the lane DP runs over: the pseudo-jobs' where the lanes are mode-aware, else this."""
        return self if self.pseudo is None else self.pseudo.data

    def entry_index(self, entry: LaneEntry) -> int:
        """The row of :attr:`priced` that a lane entry stands for (its pseudo-job, or its job)."""
        return entry.job if self.pseudo is None else int(self.pseudo.of_mode[entry.job][entry.mode])

    def too_wide(self, size: int | None = None) -> bool:
        """Whether some ``size`` jobs (any number: ``None``) need more GPUs than the cluster has."""
        widest = np.sort(self.num_gpus)[::-1]
        return int(widest[:size].sum()) > self.gpus

    def window(self) -> Window:
        """Every start and end each job may take within the horizon (the root of a search)."""
        return Window(self.release, self.last_start, self.release + self.min_slots, self.last_end)

    def progress(self, job: int, start: int, end: int, overlaps: dict[int, float]) -> float:
        """Lane-local progress of ``job`` run in ``[start, end)`` with ``overlaps[k]`` slots next to ``k``."""
        loss = sum((1.0 - self.sigma[job, k]) * slots for k, slots in overlaps.items())
        return float(end - start) - loss


@dataclass(frozen=True)
class PseudoJobs:
    """Mode-aware lanes: each job in each of its modes as a job of its own for the lane DP.

    The mode-free lanes give a job its least-work mode and, next to a partner, the speed of its fastest
    mode that fits in memory next to it: a job that needs a slower (smaller sub-batch, more work) mode to
    share pays for that mode only while it shares, though a real job keeps one mode for its whole run
    (docs/oracle-measurements.md, "Modes: what the lanes charge for memory"). Here pseudo-job ``p`` is job
    ``owner[p]`` in mode ``mode[p]``: its work ``w_p`` is that mode's (alone-slots: every mode runs ``U``
    units a slot alone), its run lengths that mode's, and ``σ_pq`` (slot units, pseudo-job ``q``'s owner
    beside it) the pair's slotted speed where the two modes fit on one GPU together, else the two may not
    share. The master covers each *job* once over all of its pseudo-jobs and keeps a progress row per
    pseudo-job, ``Σ_c (prog_c(p) − w_p·m_c(p))·λ_c ≥ 0`` (:class:`_Master`). A real schedule keeps each
    job in one mode, so its lanes are columns of this master too: still a relaxation, at least as tight.

    Attributes
    ----------
    owner, mode
        ``[p]``: the job and the mode of pseudo-job ``p``.
    of_mode
        ``[j][m]``: the pseudo-job of job ``j`` in mode ``m``.
    data
        The pseudo-jobs as the lane DP's jobs (``n = P``; their releases, windows and late costs their
        owners').
    collapsed
        ``[p]``: whether pseudo-job ``p`` stands for all its owner's modes (a job not expanded:
        :meth:`of`'s ``expand``); its ``mode`` is then the owner's least-work mode, its work that mode's,
        its speed beside ``q`` the fastest of its modes fitting beside ``q``'s, in those units (the
        mode-free rule). A real schedule's lane is still a column: still a relaxation.
    """

    owner: np.ndarray
    mode: np.ndarray
    of_mode: tuple[tuple[int, ...], ...]
    data: LaneData
    collapsed: np.ndarray

    @staticmethod
    def of(problem: SlottedProblem, real: LaneData, expand: Collection[int] | None = None) -> PseudoJobs | None:
        """The pseudo-jobs of ``problem`` over the mode-free lane data ``real``; ``None`` where they
        would change nothing (every job has one mode, or no pair may share, or ``expand`` names no job
        with two modes). ``expand``: the jobs given a pseudo-job per mode (default: every job); each
        other job is one *collapsed* pseudo-job standing for all its modes, as in the mode-free lanes."""
        jobs = problem.jobs
        multi = {j for j, job in enumerate(jobs) if len(job.modes) > 1}
        expanded = multi if expand is None else multi & {int(j) for j in expand}
        if not real.shareable.any() or not expanded:
            return None
        units = problem.units_per_slot
        owner_list: list[int] = []
        mode_list: list[int] = []
        allowed: list[tuple[int, ...]] = []  # the modes each pseudo-job stands for
        of_mode: list[tuple[int, ...]] = []
        for j, job in enumerate(jobs):
            first = len(owner_list)
            if j in expanded:
                of_mode.append(tuple(range(first, first + len(job.modes))))
                owner_list += [j] * len(job.modes)
                mode_list += list(range(len(job.modes)))
                allowed += [(m,) for m in range(len(job.modes))]
            else:
                least = job.least_work_mode
                of_mode.append((first,) * len(job.modes))
                owner_list.append(j)
                mode_list.append(least)
                allowed.append(tuple(range(len(job.modes))))
        owner = np.array(owner_list, dtype=np.int64)
        mode = np.array(mode_list, dtype=np.int64)
        count = owner.size
        collapsed = np.array([len(a) > 1 for a in allowed], dtype=bool)
        mode_work = [[float(m.work) for m in job.modes] for job in jobs]
        # a pseudo-job's work is its least over the modes it stands for (one mode's where expanded)
        work_units = np.array([min(mode_work[j][m] for m in a) for j, a in zip(owner_list, allowed, strict=True)])
        work = work_units / units
        min_slots = np.empty(count, dtype=np.int64)
        max_slots = np.empty(count, dtype=np.int64)
        for p, (j, m) in enumerate(zip(owner_list, mode_list, strict=True)):
            if collapsed[p]:
                min_slots[p], max_slots[p] = real.min_slots[j], real.max_slots[j]
            else:
                slot_mode = jobs[j].modes[m]
                min_slots[p], max_slots[p] = slot_mode.min_slots, max(slot_mode.max_slots, slot_mode.min_slots)
        sigma = np.zeros((count, count))
        for a in range(count):
            i = int(owner[a])
            for b in range(count):
                k = int(owner[b])
                if not real.shareable[i, k]:
                    continue
                table = problem.memory_table(i, k)
                # a's speed beside b: its fastest mode (of those it stands for) fitting beside one of b's,
                # in units of a's work (mode-free's rule where a is collapsed; the mode's speed if not)
                fitting = [mode_work[i][m] for m in allowed[a] if any(table[m][n] for n in allowed[b])]
                if fitting:
                    sigma[a, b] = (problem.speed[i][k] or 0) / units * work_units[a] / min(fitting)
        shareable = (sigma > 0) & (sigma.T > 0)
        sigma = np.where(shareable, sigma, 0.0)
        with np.errstate(divide="ignore"):
            nested = np.where(shareable, np.ceil(work[:, None] / np.where(shareable, sigma, 1.0) - 1e-9), np.inf)
        last_end = real.last_end[owner]
        data = replace(
            real,
            n=count,
            num_gpus=real.num_gpus[owner],
            work=work,
            release=real.release[owner],
            min_slots=min_slots,
            max_slots=max_slots,
            last_start=last_end - min_slots,
            last_end=last_end,
            late_cost=real.late_cost[owner],
            can_be_late=real.can_be_late[owner],
            sigma=sigma,
            shareable=shareable,
            nested_min=nested,
            pseudo=None,
        )
        return PseudoJobs(owner=owner, mode=mode, of_mode=tuple(of_mode), data=data, collapsed=collapsed)

    def real(self, lane: Lane) -> Lane:
        """A lane over pseudo-jobs as a lane over jobs, each entry with its mode."""
        return Lane(
            tuple(
                LaneEntry(int(self.owner[e.job]), e.start, e.end, e.progress, int(self.mode[e.job]))
                for e in lane.entries
            )
        )

    def window(self, window: Window) -> Window:
        """A window over jobs as one over the pseudo-jobs (each its owner's)."""
        owner = self.owner
        return Window(window.start_lo[owner], window.start_hi[owner], window.end_lo[owner], window.end_hi[owner])


def solution_runs(problem: SlottedProblem) -> dict[int, tuple[int, int, frozenset[int]]]:
    """Each job's run in the problem's upper-bound solution: job index -> (start, end, its GPUs), the end
    as the slotted model evaluates it; empty without a solution."""
    solution = problem.upper_bound
    if solution is None:
        return {}
    ends = evaluate(problem, dict(solution), exact=True)
    index = problem.index
    return {index[job_id]: (a.start, ends[job_id], frozenset(a.gpus)) for job_id, a in solution.items()}


def lanes_of_solution(problem: SlottedProblem, data: LaneData) -> list[Lane]:
    """The lanes (one per used GPU) of the problem's upper-bound solution, with lane-local progress
    (jobs ending past ``data.horizon`` left out)."""
    on_gpu: dict[int, list[tuple[int, int, int]]] = {}
    for i, (start, end, gpus) in solution_runs(problem).items():
        for g in gpus:
            on_gpu.setdefault(g, []).append((i, start, end))
    solution = problem.upper_bound or {}
    index = problem.index
    modes = {index[job_id]: a.mode for job_id, a in solution.items()}
    lanes = []
    for every_run in on_gpu.values():
        # a job ending past the lanes' horizon is the master's "late" mass, not part of the lane
        runs = [run for run in every_run if run[2] <= data.horizon]
        if runs:
            lanes.append(lane_of_runs(data, runs, modes))
    return lanes


def lane_of_runs(data: LaneData, runs: Iterable[tuple[int, int, int]], modes: dict[int, int] | None = None) -> Lane:
    """The lane of ``(job, start, end)`` runs on one GPU, each job's progress charged for the slots it
    overlaps each other run (with at most two runs at a time, those are exactly its shared slots).
    Where the lanes are mode-aware, job ``j`` runs in mode ``modes[j]`` (default: its least-work mode, 0)."""
    runs = list(runs)
    if data.pseudo is not None:
        pseudo, chosen = data.pseudo, modes or {}
        return pseudo.real(lane_of_runs(pseudo.data, [(pseudo.of_mode[i][chosen.get(i, 0)], s, e) for i, s, e in runs]))
    entries = []
    for i, start, end in runs:
        overlaps: dict[int, float] = {}
        for k, s2, e2 in runs:
            if (k, s2, e2) != (i, start, end) and min(end, e2) > max(start, s2):
                overlaps[k] = overlaps.get(k, 0.0) + min(end, e2) - max(start, s2)
        entries.append(LaneEntry(i, start, end, data.progress(i, start, end, overlaps)))
    return Lane(tuple(entries))


def single_job_lanes(data: LaneData) -> list[Lane]:
    """Every job alone at every start it may take (the master's first pool besides the upper bound's
    lanes: it lets the first duals move off the upper-bound solution)."""
    if data.pseudo is not None:
        return [data.pseudo.real(lane) for lane in single_job_lanes(data.pseudo.data)]
    lanes = []
    for j in range(data.n):
        d = int(data.min_slots[j])
        for s in range(int(data.release[j]), int(data.last_start[j]) + 1):
            lanes.append(Lane((LaneEntry(j, s, s + d, float(d)),)))
    return lanes


# --- the master ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """Start and end slots each job may take (a branch-and-bound node): ``start_lo[j] ≤ S_j ≤
    start_hi[j]``, ``end_lo[j] ≤ E_j ≤ end_hi[j]``."""

    start_lo: np.ndarray
    start_hi: np.ndarray
    end_lo: np.ndarray
    end_hi: np.ndarray

    def starts(self, horizon: int) -> np.ndarray:
        """``[j, S]``: whether job ``j`` may start in slot ``S``."""
        return _between(self.start_lo, self.start_hi, horizon)

    def ends(self, horizon: int) -> np.ndarray:
        """``[j, E]``: whether job ``j`` may end at slot ``E``."""
        return _between(self.end_lo, self.end_hi, horizon)


def _between(lo: np.ndarray, hi: np.ndarray, horizon: int) -> np.ndarray:
    slots = np.arange(horizon + 1)
    return (slots[None, :] >= lo[:, None]) & (slots[None, :] <= hi[:, None])


@dataclass(frozen=True)
class Duals:
    """Duals of the master's rows as the pricing takes them: what a lane entry of job ``j`` run in
    ``[S, E)`` is worth is ``alpha[j, S] + beta[j, E] + eta[j]·progress`` (plus the cover rows' share
    bonus). ``eta[j] ≥ 0`` is the progress row's dual, ``nu[r] ≥ 0`` the cover rows' (in the order the
    master added them, :class:`_CoverRows`; rows added after these duals count as 0) and ``mu[j]`` the
    coverage row's (:class:`_Master`): ``alpha = mu − (the cover rows' price of running from S on)/G_j``,
    ``beta = −E/G_j + (the same from E on)/G_j``. All of it is linear in the rows' duals, so :meth:`mix`
    of two masters' duals is the duals of the mixed point. ``mu`` is empty where only the pricing is
    concerned (tests that price arbitrary values)."""

    PADDED: ClassVar[tuple[str, ...]] = ("nu",)
    """Fields holding the duals of cut rows (rows added later count 0 in an older point)."""

    alpha: np.ndarray
    beta: np.ndarray
    eta: np.ndarray
    nu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mu: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def mix(self, other: Duals, weight: float) -> Self:
        """``weight · self + (1 − weight) · other``, field by field (a subclass's too: the duals of cut rows,
        :attr:`PADDED`, padded with zeros to the longer; ``mu`` empty unless both have it alike)."""
        if type(other) is not type(self):
            raise TypeError(f"{type(self).__name__} mixes only with its own kind, not {type(other).__name__}")
        mixed: dict[str, np.ndarray] = {}
        for item in fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            if item.name in self.PADDED:
                mixed[item.name] = mix_padded(mine, theirs, weight)
            elif item.name == "mu" and mine.size != theirs.size:
                mixed[item.name] = np.zeros(0)
            else:
                mixed[item.name] = weight * mine + (1 - weight) * theirs
        return type(self)(**mixed)


def mix_padded(mine: np.ndarray, theirs: np.ndarray, weight: float) -> np.ndarray:
    """``weight · mine + (1 − weight) · theirs`` for duals of cut rows, the shorter padded with zeros (rows
    added after one of the two points count 0 there)."""
    size = max(mine.size, theirs.size)
    return weight * np.pad(mine, (0, size - mine.size)) + (1 - weight) * np.pad(theirs, (0, size - theirs.size))


class _SlotIndex:
    """Rows filed by a key (a job, a pair of jobs) with the slot each is about: which rows of a key lie in
    a stretch of slots (numpy arrays made once per key after each change)."""

    def __init__(self) -> None:
        self._lists: dict[Any, tuple[list[int], list[int]]] = {}
        self._arrays: dict[Any, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, key: Any, slot: int, row: int) -> None:
        slots, rows = self._lists.setdefault(key, ([], []))
        slots.append(slot)
        rows.append(row)
        self._arrays.pop(key, None)

    def rows(self, key: Any, lo: int, hi: int, first: int = 0) -> np.ndarray:
        """The rows ``≥ first`` filed under ``key`` whose slot is in ``[lo, hi)``."""
        if key not in self._lists:
            return np.zeros(0, dtype=np.int64)
        if key not in self._arrays:
            slots_list, rows_list = self._lists[key]
            self._arrays[key] = (np.array(slots_list, dtype=np.int64), np.array(rows_list, dtype=np.int64))
        slots, rows = self._arrays[key]
        return rows[(slots >= lo) & (slots < hi) & (rows >= first)]


class _CoverRows:
    """The master's cover rows over sets of jobs too wide to run all at once, added as cutting planes
    where the LP violates them.

    A set ``Q`` of jobs with ``Σ_{j∈Q} G_j > #GPUs`` cannot run side by side: whenever all of ``Q`` run,
    at least ``e_Q = Σ_{j∈Q} G_j − #GPUs`` GPUs hold two of them (a GPU holds at most two jobs; if they
    may not share, they never all run together). Per slot ``t`` of the lanes, with ``P_j(t) = Σ_c
    run_c(j, t)·λ_c / G_j``: ``Σ_c share_c(Q, t)·λ_c ≥ e_Q·(Σ_{j∈Q} P_j(t) − |Q| + 1)``, where
    ``share_c(Q, t)`` is 1 when lane ``c`` holds two jobs of ``Q`` in slot ``t``. Every real schedule's
    lanes satisfy it (all of ``Q`` running: at least ``e_Q`` lanes hold two; fewer: the right side is
    at most 0). Pairs wider than the cluster (``G_i + G_k > #GPUs``) are the two-job case. The lane LP
    without these rows runs a gang on a fraction of its lanes next to jobs that fill the rest, so the
    gang never meets the jobs it would crowd out (docs/oracle-measurements.md, "Where the slack is").

    In the master the row of ``(Q, t)`` names the lanes that hold two of its jobs at ``t`` (coefficient
    ``share_c(Q, t)``, :meth:`coefficients`) and a column ``R_jt = P_j(t)`` per job (``−e_Q``), defined
    by a row of its own (:meth:`_Master.separate`). A row's dual ``ν`` pays a lane ``+ν``
    per slot it holds two of the row's jobs (the DP adds it to that pair's cost as prefix sums,
    :meth:`bonus`) and charges each entry of a row's job running at ``t`` ``e_Q·ν/G_j``, which the
    master folds into the start and end duals the pricing takes (:meth:`start_end_prices`).

    The same machinery holds **general rows** ``Σ_{i<k} b_ik·S_ik(t) − Σ_j a_j·R_jt ≥ rhs`` (a cover row
    is ``b = 1``, ``a = e_Q``, ``rhs = −e_Q·(|Q| − 1)``): the configuration rows where no two jobs may
    share (:meth:`configurations_violated`).
    """

    MAX_NEW_ROWS = 400
    """Rows added per separation at most (the most violated first)."""

    KEPT_SETS = 200
    """Fitting sets kept per slot to start the next configuration separation there (the latest)."""

    def __init__(self, data: LaneData, sets: bool = True) -> None:
        self.data = data
        self.sets = sets  # look for sets of three or more jobs too (pairs always)
        self.jobs: list[tuple[int, ...]] = []  # r -> Q (sorted)
        self.width: list[int] = []  # r -> e_Q
        self.slot: list[int] = []  # r -> t
        self.rows: list[int] = []  # r -> the master's row
        self.known: set[tuple[tuple[int, ...], int]] = set()
        # each row under every pair (i < k) of its jobs, for a lane's coefficients
        self._by_pair = _SlotIndex()
        # every (row, job, slot) and every (row, ordered pair of its jobs, slot), flat, for the duals'
        # prices; as arrays with each row's e_Q and right-hand side, made once per batch of rows
        self._members: list[tuple[int, int, int]] = []
        self._pairs: list[tuple[int, int, int, int]] = []
        # general rows (hull cuts): each member's price weight (e_Q for a cover), each pair's share
        # coefficient (1 for a cover), each row's right-hand side
        self._member_weight: list[float] = []
        self._pair_weight: list[float] = []
        self.rhs: list[float] = []
        # r -> (a by the row's jobs, b by pair i < k, rhs) for a general row, None for a cover row
        self.general: list[tuple[tuple[float, ...], dict[tuple[int, int], float], float] | None] = []
        self._flat: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        # t -> the sets that fit which the last configuration separation at t priced: the next one there
        # starts its LP with them (the LP point moves little between rounds)
        self._fitting_sets: dict[int, list[tuple[int, ...]]] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def row_list(self) -> list[Any]:
        """Every row, in order, as :meth:`_Master.add_cover_rows` takes them."""
        out: list[Any] = []
        for jobs, width, slot, general in zip(self.jobs, self.width, self.slot, self.general, strict=True):
            out.append((jobs, width, slot) if general is None else (jobs, width, slot, general))
        return out

    def add(
        self,
        jobs: tuple[int, ...],
        width: int,
        slot: int,
        row: int,
        general: tuple[tuple[float, ...], dict[tuple[int, int], float], float] | None = None,
    ) -> None:
        """Record the row over ``jobs`` (sorted) at ``slot``, with ``e_Q = width``, as the master's ``row``.

        ``general`` = ``(weights, pair coefficients, rhs)`` records a general row instead:
        ``Σ_{i<k} b_ik·S_ik(t) − Σ_j a_j·R_jt ≥ rhs`` with ``a_j`` = ``weights`` (by ``jobs``) and
        ``b_ik`` the pair coefficients (``i < k``)."""
        r = len(self.rows)
        self.jobs.append(jobs)
        self.width.append(width)
        self.slot.append(slot)
        self.rows.append(row)
        self._flat = None
        if general is None:
            self.known.add((jobs, slot))  # what :meth:`violated` looks for
            self._members += [(r, j, slot) for j in jobs]
            self._member_weight += [float(width)] * len(jobs)
            self._pairs += [(r, i, k, slot) for i in jobs for k in jobs if i != k]
            self._pair_weight += [1.0] * (len(jobs) * (len(jobs) - 1))
            self.rhs.append(-float(width * (len(jobs) - 1)))
            self.general.append(None)
            for a in range(len(jobs)):
                for b in range(a + 1, len(jobs)):
                    self._by_pair.add((jobs[a], jobs[b]), slot, r)
            return
        weights, pairs, rhs = general
        self._members += [(r, j, slot) for j, w in zip(jobs, weights, strict=True) if w != 0.0]
        self._member_weight += [float(w) for w in weights if w != 0.0]
        coefficients = {(min(i, k), max(i, k)): float(b) for (i, k), b in pairs.items() if b != 0.0}
        for (i, k), coefficient in coefficients.items():
            self._pairs += [(r, i, k, slot), (r, k, i, slot)]
            self._pair_weight += [coefficient, coefficient]
            self._by_pair.add((i, k), slot, r)
        self.rhs.append(float(rhs))
        self.general.append((tuple(float(w) for w in weights), coefficients, float(rhs)))

    def coefficients(self, lane: Lane, first: int = 0) -> dict[int, float]:
        """The lane's coefficient in each row ``r ≥ first`` that it enters (by ``r``): 1 per slot in
        which it holds two of the row's jobs."""
        out: dict[int, float] = {}
        if len(self.rows) <= first:
            return out
        for i, k, lo, hi in _overlaps(lane):  # i < k
            for r in self._by_pair.rows((i, k), lo, hi, first):
                general = self.general[int(r)]
                value = 1.0 if general is None else general[1][(i, k)]
                out[int(r)] = out.get(int(r), 0.0) + value
        return out

    def violated(self, lanes: list[Lane], weights: np.ndarray) -> list[tuple[tuple[int, ...], int, int]]:
        """Rows ``(Q, e_Q, t)`` not yet in the master that lanes at these weights violate, most violated
        first (at most :attr:`MAX_NEW_ROWS`).

        Pairs wider than the cluster are checked in every slot (exact). With :attr:`sets`, per slot,
        sets are also grown greedily from each partly running job (and from none): the job that adds
        most to ``e_Q·(1 − Σ_{j∈Q}(1 − P_j)) − share(Q)`` joins (while ``e_Q ≤ 0``, as if ``e_Q`` were
        0), until none adds; the most violated set of three or more is kept. A heuristic: every row it
        returns is valid and violated; it may miss some."""
        data = self.data
        gpus = data.num_gpus.astype(float)
        run, share = self._slot_points(lanes, weights)
        deficit = 1.0 - run / gpus[:, None]
        found: list[tuple[float, tuple[int, ...], int, int]] = []
        # every pair too wide to run side by side, in every slot (exact: few pairs)
        first, second = np.nonzero(np.triu(gpus[:, None] + gpus[None, :] > data.gpus, 1))
        if first.size:
            widths = gpus[first] + gpus[second] - data.gpus
            held = share[:, first, second].T  # (pairs, T)
            score = widths[:, None] * (1.0 - deficit[first] - deficit[second]) - held
            for p, t in np.argwhere(score > 1e-6):
                members: tuple[int, ...] = (int(first[p]), int(second[p]))
                if (members, int(t)) not in self.known:
                    found.append((float(score[p, t]), members, round(float(widths[p])), int(t)))
        previous: tuple[int, float, list[int]] | None = None  # (slot, violation, members) last searched
        for t in range(data.horizon if self.sets else 0):
            active = np.nonzero(deficit[:, t] < 1.0 - 1e-6)[0]
            if gpus[active].sum() <= data.gpus:
                continue
            if (
                previous is not None
                and np.array_equal(deficit[:, t], deficit[:, previous[0]])
                and np.array_equal(share[t], share[previous[0]])
            ):
                best, chosen = previous[1], previous[2]  # the LP point is piecewise constant in time
            else:
                best, jobs = _most_violated_cover(
                    gpus[active], deficit[active, t], share[t][np.ix_(active, active)], data.gpus
                )
                chosen = [int(active[j]) for j in jobs]
            previous = (t, best, chosen)
            if best > 1e-6 and len(chosen) > 2:
                members = tuple(chosen)
                if (members, t) not in self.known:
                    width = round(float(gpus[list(members)].sum())) - data.gpus
                    found.append((best, members, width, t))
        found.sort(key=lambda row: -row[0])
        return [(jobs, width, t) for _, jobs, width, t in found[: self.MAX_NEW_ROWS]]

    def _slot_points(self, lanes: list[Lane], weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The lanes' GPUs running each job per slot (``(n, T)``) and holding each pair (``(T, n, n)``,
        symmetric) at these weights."""
        data = self.data
        run = np.zeros((data.n, data.horizon))
        share = np.zeros((data.horizon, data.n, data.n))
        for lane, weight in zip(lanes, weights, strict=True):
            for e in lane.entries:
                run[e.job, e.start : e.end] += weight
            for i, k, lo, hi in _overlaps(lane):
                share[lo:hi, i, k] += weight
        return run, share + share.transpose(0, 2, 1)

    def configurations_violated(self, lanes: list[Lane], weights: np.ndarray, highspy: Any) -> list[Any]:
        """Configuration rows the lanes at these weights violate, where no two jobs may share (``C = 1``,
        or no pair fits): general rows for :meth:`_Master.add_cover_rows`, most violated first (at most
        :attr:`MAX_NEW_ROWS`).

        Without sharing, the jobs running in one slot are a set that fits side by side
        (``Σ G_j ≤ #GPUs``), so the point ``P(t)`` (``P_j(t)`` the lanes' share of job ``j`` running at
        ``t``) lies in the hull of those sets' indicator vectors, a knapsack polytope. The cover rows
        are some of its facets; a row ``Σ_j a_j·P_j(t) ≤ K(a)``, ``K(a)`` the largest ``Σ a_j`` over the
        sets that fit (a knapsack, solved exactly), holds for every schedule whatever ``a ≥ 0``. Per
        slot the most violated ``a`` comes from an LP over the sets found so far, grown by the knapsack
        until none beats the LP's right-hand side (:func:`_most_violated_configuration`)."""
        data = self.data
        run, _ = self._slot_points(lanes, weights)
        running = run / data.num_gpus.astype(float)[:, None]
        found: list[tuple[float, Any]] = []
        seen: dict[bytes, Any] = {}  # the LP point is piecewise constant in time
        for t in range(data.horizon):
            point = running[:, t]
            key = point.tobytes()
            if key not in seen:
                sets = self._fitting_sets.get(t, [])
                seen[key] = _most_violated_configuration(point, data.num_gpus, data.gpus, highspy, sets)
                self._fitting_sets[t] = sets[-self.KEPT_SETS :]
            got = seen[key]
            if got is not None:
                violation, jobs, coefficients, rhs = got
                found.append((violation, (jobs, 0, t, (coefficients, {}, -rhs))))
        found.sort(key=lambda row: -row[0])
        return [row for _, row in found[: self.MAX_NEW_ROWS]]

    def _weights(self, nu: np.ndarray) -> np.ndarray | None:
        """``ν_r`` for every row (0 for rows added after these duals); ``None`` when every one is 0."""
        count = min(nu.size, len(self.rows))
        if count == 0 or not np.any(nu[:count] > 0):
            return None
        weights = np.zeros(len(self.rows))
        weights[:count] = np.maximum(nu[:count], 0.0)
        return weights

    def _flat_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(members (r, j, t), pairs (r, i, k, t), each member's price weight, each pair's share
        coefficient, the rows' right-hand sides)``."""
        if self._flat is None:
            self._flat = (
                np.array(self._members, dtype=np.int64).reshape(-1, 3),
                np.array(self._pairs, dtype=np.int64).reshape(-1, 4),
                np.array(self._member_weight, dtype=float),
                np.array(self._pair_weight, dtype=float),
                np.array(self.rhs, dtype=float),
            )
        return self._flat

    def bonus(self, nu: np.ndarray) -> np.ndarray | None:
        """Each pair's share bonus from the rows' duals, prefix-summed over slots (``(n, n, T+1)``:
        sharing ``[t, E)`` earns ``[i, k, E] − [i, k, t]``); ``None`` when every dual is 0."""
        weights = self._weights(nu)
        if weights is None:
            return None
        data = self.data
        _, pairs, _, pair_weight, _ = self._flat_arrays()
        bonus = np.zeros((data.n, data.n, data.horizon))
        np.add.at(bonus, (pairs[:, 1], pairs[:, 2], pairs[:, 3]), weights[pairs[:, 0]] * pair_weight)
        prefix = np.zeros((data.n, data.n, data.horizon + 1))
        np.cumsum(bonus, axis=2, out=prefix[:, :, 1:])
        return prefix

    def start_end_prices(self, nu: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The rows' price of running job ``j`` from ``S`` (``e_Q·ν`` summed over its rows at slots
        ``t ≥ S``) and the same from ``E`` with the sign turned, as ``(n, T+1)`` arrays, so that running
        ``[S, E)`` costs ``[j, S] + [j, E]`` (for all of its ``G_j`` lanes); ``None`` when every dual is 0."""
        weights = self._weights(nu)
        if weights is None:
            return None
        data = self.data
        members, _, member_weight, _, _ = self._flat_arrays()
        rows = members[:, 0]
        per_slot = np.zeros((data.n, data.horizon + 1))
        np.add.at(per_slot, (members[:, 1], members[:, 2]), weights[rows] * member_weight)
        suffix = np.cumsum(per_slot[:, ::-1], axis=1)[:, ::-1]  # [j, S]: Σ over t ≥ S
        return suffix, -suffix

    def constant(self, nu: np.ndarray) -> float:
        """The rows' right-hand sides times their duals (``Σ_r ν_r·(−e_r·(|Q_r| − 1))``)."""
        count = min(nu.size, len(self.rows))
        if count == 0:
            return 0.0
        rhs = self._flat_arrays()[4]
        return float(np.dot(nu[:count], rhs[:count]))


CONFIGURATION_ROUNDS = 60
"""Knapsack pricings per slot at most when separating a configuration row."""


def _knapsack_best(values: np.ndarray, sizes: np.ndarray, capacity: int) -> tuple[float, list[int]]:
    """The largest ``Σ values`` over the items (positive values only) whose sizes sum to at most
    ``capacity``, and one such set: a DP over the capacity, exact."""
    best = np.zeros(capacity + 1)
    take: list[np.ndarray] = []
    for value, size in zip(values, sizes, strict=True):
        size = int(size)
        row = np.zeros(capacity + 1, dtype=bool)
        if value > 0 and size <= capacity:
            candidate = best[: capacity + 1 - size] + value
            better = candidate > best[size:]
            row[size:] = better
            best[size:] = np.where(better, candidate, best[size:])
        take.append(row)
    chosen: list[int] = []
    room = capacity
    for item in range(len(values) - 1, -1, -1):
        if take[item][room]:
            chosen.append(item)
            room -= int(sizes[item])
    return float(best[capacity]), chosen[::-1]


def _most_violated_configuration(
    point: np.ndarray, gpus: np.ndarray, capacity: int, highspy: Any, sets: list[tuple[int, ...]] | None = None
) -> tuple[float, tuple[int, ...], tuple[float, ...], float] | None:
    """The row ``Σ_j a_j·P_j ≤ K(a)`` most violated at ``point`` (``a ∈ [0, 1]`` on the running jobs,
    ``K(a)`` the knapsack's exact optimum), as ``(violation, jobs, a, K(a))``, or ``None``.

    The LP ``max a·P − ρ`` subject to ``a·x ≤ ρ`` for the sets ``x`` found so far is solved (HiGHS, warm
    from the previous set), the knapsack prices the set that most exceeds ``ρ``, and the set joins until
    none does (then ``ρ = K(a)``). ``sets``: sets of jobs that fit (each job's index in ``point``),
    whose parts among the running jobs start the LP; the sets this LP priced are appended to it.
    Starting from more sets only saves knapsack rounds: the LP ends over the same hull, so the violation
    found is the same (the row may be another of its optima)."""
    active = np.nonzero(point > 1e-7)[0]
    if gpus[active].sum() <= capacity or active.size < 2:
        return None
    values = point[active]
    sizes = gpus[active]
    count = active.size
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    inf = highspy.kHighsInf
    h.addVars(count + 1, np.zeros(count + 1), np.concatenate([np.ones(count), [inf]]))
    h.changeColsCost(count + 1, np.arange(count + 1, dtype=np.int32), np.concatenate([-values, [1.0]]))
    rho_column = np.int32(count)
    for j in range(count):  # each running job alone
        h.addRow(-inf, 0.0, 2, np.array([j, rho_column], dtype=np.int32), np.array([1.0, -1.0]))
    position = {int(job): p for p, job in enumerate(active)}
    known = {tuple(position[j] for j in chosen if j in position) for chosen in sets or ()}
    for part in sorted(part for part in known if len(part) >= 2):
        index = np.array([*part, count], dtype=np.int32)
        h.addRow(-inf, 0.0, index.size, index, np.concatenate([np.ones(len(part)), [-1.0]]))
    a = np.zeros(count)
    for _ in range(CONFIGURATION_ROUNDS):
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        solution = np.asarray(h.getSolution().col_value)
        a, rho = solution[:count], float(solution[-1])
        top, chosen = _knapsack_best(a, sizes, capacity)
        if top <= rho + 1e-9:
            break
        index = np.array([*chosen, count], dtype=np.int32)
        h.addRow(-inf, 0.0, index.size, index, np.concatenate([np.ones(len(chosen)), [-1.0]]))
        if sets is not None:
            sets.append(tuple(int(active[p]) for p in chosen))
    a = np.where(a > 1e-9, a, 0.0)
    top, _ = _knapsack_best(a, sizes, capacity)
    violation = float(a @ values) - top
    if violation <= 1e-6:
        return None
    keep = a > 0
    return violation, tuple(int(j) for j in active[keep]), tuple(float(v) for v in a[keep]), top


def _most_violated_cover(
    gpus: np.ndarray, deficit: np.ndarray, share: np.ndarray, capacity: int
) -> tuple[float, list[int]]:
    """The greedy search of :meth:`_CoverRows.violated` in one slot: the best ``(violation, sorted
    members)`` over sets grown from each partly running job and from none; ``(0, [])`` if none is violated."""
    n = len(gpus)
    best: tuple[float, list[int]] = (0.0, [])
    anchors = [None, *(int(j) for j in np.nonzero(deficit > 1e-6)[0])]
    for anchor in anchors:
        inside = np.zeros(n, dtype=bool)
        width, missing, shared = -float(capacity), 0.0, 0.0
        with_members = np.zeros(n)  # Σ_{i∈Q} share[i, j]
        nxt = anchor
        while True:
            if nxt is None:
                gain = gpus * (1.0 - missing - deficit) - max(width, 0.0) * deficit - with_members
                gain[inside | (missing + deficit >= 1.0)] = -np.inf
                nxt = int(np.argmax(gain))
                if not gain[nxt] > 1e-9:
                    break
            inside[nxt] = True
            width += gpus[nxt]
            missing += deficit[nxt]
            shared += with_members[nxt]
            with_members += share[nxt]
            nxt = None
            if width > 0:
                score = width * (1.0 - missing) - shared
                if score > best[0] + 1e-9:
                    best = (score, [int(j) for j in np.nonzero(inside)[0]])
    return best


def _overlaps(lane: Lane) -> Iterator[tuple[int, int, int, int]]:
    """``(i, k, first slot, end slot)``, ``i < k``, of every stretch in which the lane holds jobs ``i`` and ``k``."""
    entries = lane.entries
    for a in range(len(entries)):
        for b in range(a + 1, len(entries)):
            x, y = entries[a], entries[b]
            lo, hi = max(x.start, y.start), min(x.end, y.end)
            if hi > lo and x.job != y.job:
                yield min(x.job, y.job), max(x.job, y.job), lo, hi


class _Master:
    """The restricted master LP in HiGHS, columns added as lanes come (the basis is kept between
    solves, so each re-solve starts from the last optimum).

    Rows (the module docstring's master with the start and end variables substituted out): per job a
    *coverage* row ``Σ_c m_c(j)·λ_c + G_j·q_j = G_j`` (``m_c(j)``: the lane's entries of ``j``) and its
    progress row; the GPU row; the cover rows as they are separated. A lane costs ``Σ E/G_j`` over its
    entries. The start and end distributions the module docstring writes with linking rows are the
    lanes' own: ``y_{jS} = Σ_c [j starts at S in c]·λ_c / G_j`` (:meth:`distributions`). Those rows
    said nothing more (``y`` and ``z`` appear nowhere else but in their simplex rows, which sum the
    linking rows to the coverage row), so the LP and its optimum are the same. Without the ``2·T``
    mostly-zero rows per job the master's time fell 5-16 times at 24-50 jobs on 8 GPUs and column
    generation needs a third fewer rounds (docs/oracle-measurements.md, "The master without linking rows").
    """

    def __init__(
        self,
        data: LaneData,
        highspy: Any,
        artificial_cost: float | None = None,
        cover_rows: bool = True,
        cover_sets: bool = True,
    ) -> None:
        self.data = data
        # the cover rows come as cutting planes (:meth:`separate`); the pricing must know them
        wide = data.too_wide(None if cover_sets else 2)  # else no row could ever be violated
        self.covers = _CoverRows(data, sets=cover_sets) if cover_rows and wide else None
        self.hs = highspy
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        self.h = h
        inf = highspy.kHighsInf
        self.inf = inf
        n, horizon = data.n, data.horizon
        gpus = data.num_gpus.astype(float)
        # mode-aware lanes (:class:`PseudoJobs`): coverage per job, progress per pseudo-job (right side 0)
        self.modal = data.pseudo is not None
        priced = data.priced
        self.coverage_row = np.arange(n, dtype=np.int64)
        self.progress_row = np.arange(n, n + priced.n, dtype=np.int64)
        self.gpu_row = n + priced.n
        h.addRows(
            n + priced.n + 1,
            np.concatenate([gpus, np.zeros(priced.n) if self.modal else gpus * data.work, [-inf]]),
            np.concatenate([gpus, np.full(priced.n, inf), [float(data.gpus)]]),
            0,
            np.array([], dtype=np.int32),
            np.array([], dtype=np.int32),
            np.array([], dtype=float),
        )
        self.columns = 0

        def add_column(cost: float, upper: float, rows: list[int], values: list[float]) -> None:
            h.addCol(cost, 0.0, upper, len(rows), np.array(rows, dtype=np.int32), np.array(values, dtype=float))
            self.columns += 1

        for j in range(n):
            covered = [int(self.coverage_row[j])] + ([] if self.modal else [int(self.progress_row[j])])
            whole = [float(gpus[j])] + ([] if self.modal else [float(gpus[j] * data.work[j])])
            if artificial_cost is not None:
                # the job covered at a price no real choice reaches: a node whose windows leave the pool
                # no lane for the job still solves, and its duals price such lanes in (big-M phase one,
                # in place of Farkas pricing); the Lagrangian bound never counts these columns
                add_column(artificial_cost, inf, covered, whole)
            if data.can_be_late[j]:
                add_column(float(data.late_cost[j]), 1.0, covered, whole)  # q_j: ends past the cut
        if artificial_cost is not None:  # an extra lane at a price no real lane saves: always feasible
            add_column(artificial_cost, inf, [self.gpu_row], [-1.0])
        root = data.window()
        self.root_starts = root.starts(horizon)
        self.root_ends = root.ends(horizon)
        self.start_allowed = self.root_starts
        self.end_allowed = self.root_ends
        # the same per row of the pricing's data (each pseudo-job's own where the lanes are mode-aware)
        entry_root = priced.window()
        self.entry_starts = entry_root.starts(horizon)
        self.entry_ends = entry_root.ends(horizon)
        # what ending at E costs each of the job's lanes, in the pricing's value (−E/G_j)
        self.end_value = np.where(
            self.entry_ends, -np.arange(horizon + 1)[None, :] / priced.num_gpus.astype(float)[:, None], 0.0
        )
        self.lanes: list[Lane] = []
        self.lane_cols: list[int] = []
        self.window: Window | None = None
        self.keys: set[tuple[tuple[int, ...], ...]] = set()
        # the cover rows' running columns (:meth:`_running`): (j, t) -> (its row, its column)
        self.running: dict[tuple[int, int], tuple[int, int]] = {}
        self._running_by_job = _SlotIndex()  # their rows under their job

    def add(self, lanes: list[Lane]) -> int:
        added = 0
        for lane in lanes:
            key = lane.key()
            if key in self.keys:
                continue
            cost, coefficients = self._lane_column(lane)
            rows = np.array(list(coefficients), dtype=np.int32)
            upper = self.inf if self._inside(lane) else 0.0
            self.h.addCol(cost, 0.0, upper, len(rows), rows, np.array(list(coefficients.values())))
            self.lane_cols.append(self.columns)
            self.columns += 1
            self.keys.add(key)
            self.lanes.append(lane)
            added += 1
        return added

    def known(self, lane: Lane) -> bool:
        """Whether ``lane`` is a column of the master already."""
        return lane.key() in self.keys

    def column_count(self) -> int:
        """The generated columns in the master (lanes; a variant's own kinds too)."""
        return len(self.lanes)

    def _lane_column(self, lane: Lane) -> tuple[float, dict[int, float]]:
        """A lane's cost and its coefficients by row."""
        gpus = self.data.num_gpus
        coefficients: dict[int, float] = {int(self.gpu_row): 1.0}
        cost = 0.0
        data = self.data
        for e in lane.entries:
            p = data.entry_index(e)
            if not (self.entry_starts[p, e.start] and self.entry_ends[p, e.end]):
                raise ValueError(f"lane entry outside job {e.job}'s window: {e}")
            progress = e.progress - float(data.priced.work[p]) if self.modal else e.progress
            for row, value in ((int(self.coverage_row[e.job]), 1.0), (int(self.progress_row[p]), progress)):
                coefficients[row] = coefficients.get(row, 0.0) + value
            cost += e.end / float(gpus[e.job])
        if self.covers is not None:
            for r, value in self.covers.coefficients(lane).items():
                coefficients[self.covers.rows[r]] = value
            coefficients.update(self._running_rows(lane))
        return cost, coefficients

    def separate(self, values: np.ndarray) -> int:
        """Add the cover rows (:class:`_CoverRows`) that the lanes at ``values`` (a solve's column values)
        violate, with every pooled lane's coefficients; returns how many.

        A row names the lanes that hold two of its jobs at its slot (its share part) and, for each of
        its jobs ``j``, a free column ``R_jt = Σ_c run_c(j, t)·λ_c / G_j`` kept by a row of its own
        (:meth:`_running`): rows at one slot share their jobs' ``R``, so each lane that runs ``j`` at
        ``t`` is written once, not once per row (measured 3.8 times fewer such entries at 24 jobs)."""
        covers = self.covers
        if covers is None:
            return 0
        cols = np.array(self.lane_cols, dtype=np.int64)
        weights = values[cols]
        used = np.nonzero(weights > 1e-9)[0]
        lanes, weights = [self.lanes[u] for u in used], weights[used]
        found: list[Any] = list(covers.violated(lanes, weights))
        if not found and not self.data.shareable.any():
            # no cover row left and no two jobs may share: the running sets' own hull, per slot
            found = covers.configurations_violated(lanes, weights, self.hs)
        if not found:
            return 0
        self.add_cover_rows(found)
        return len(found)

    def start_from(self, other: _Master) -> None:
        """Take ``other``'s cover rows (in its order, so that its duals keep their meaning here) and its
        lanes."""
        if other.covers is not None and self.covers is not None:
            self.add_cover_rows(other.covers.row_list())
        self.add(other.lanes)

    def add_cover_rows(self, found: list[Any]) -> None:
        """Add cover rows ``(Q, e_Q, t)`` (as :meth:`_CoverRows.violated` gives them; a fourth element
        ``(weights, pair coefficients, rhs)`` makes a general row, :meth:`_CoverRows.add`) with every
        pooled lane's coefficients."""
        covers = self.covers
        if covers is None or not found:
            return
        self._running({(j, row[2]) for row in found for j in row[0]})
        jobs = {j for row in found for j in row[0]}
        first = len(covers)
        base = int(self.h.getNumRow())
        per_row: list[list[tuple[int, float]]] = []
        lower: list[float] = []
        for number, row in enumerate(found):
            members, width, t = row[0], row[1], row[2]
            general = row[3] if len(row) > 3 else None
            covers.add(members, width, t, base + number, general)
            weights = [float(width)] * len(members) if general is None else list(general[0])
            per_row.append([(self.running[(j, t)][1], -w) for j, w in zip(members, weights, strict=True) if w != 0.0])
            lower.append(covers.rhs[first + number])
        for lane, col in zip(self.lanes, self.lane_cols, strict=True):
            if sum(e.job in jobs for e in lane.entries) < 2:
                continue
            for r, value in covers.coefficients(lane, first).items():
                per_row[r - first].append((col, value))
        self._add_rows(per_row, lower, self.inf)

    def _add_rows(self, per_row: list[list[tuple[int, float]]], lower: list[float], upper: float) -> None:
        starts = np.cumsum([0] + [len(entries) for entries in per_row[:-1]]).astype(np.int32)
        index = np.array([col for entries in per_row for col, _ in entries], dtype=np.int32)
        coefficients = np.array([v for entries in per_row for _, v in entries], dtype=float)
        self.h.addRows(
            len(per_row), np.array(lower), np.full(len(per_row), upper), len(index), starts, index, coefficients
        )

    def _running(self, wanted: set[tuple[int, int]]) -> None:
        """Columns ``R_jt`` (free, cost 0) with their rows ``G_j·R_jt − Σ_c run_c(j, t)·λ_c = 0`` for the
        pairs ``(j, t)`` not yet in the master."""
        new = sorted(wanted - set(self.running))
        if not new:
            return
        slots_of: dict[int, list[int]] = {}
        for j, t in new:
            slots_of.setdefault(j, []).append(t)
        position = {key: number for number, key in enumerate(new)}
        per_row: list[list[tuple[int, float]]] = [[] for _ in new]
        for lane, col in zip(self.lanes, self.lane_cols, strict=True):
            for e in lane.entries:
                for t in slots_of.get(e.job, ()):
                    if e.start <= t < e.end:
                        per_row[position[(e.job, t)]].append((col, -1.0))
        base = int(self.h.getNumRow())
        self._add_rows(per_row, [0.0] * len(new), 0.0)
        gpus = [float(self.data.num_gpus[j]) for j, _ in new]
        self.h.addCols(
            len(new),
            np.zeros(len(new)),
            np.full(len(new), -self.inf),
            np.full(len(new), self.inf),
            len(new),
            np.arange(len(new), dtype=np.int32),
            np.arange(base, base + len(new), dtype=np.int32),
            np.array(gpus),
        )
        for number, key in enumerate(new):
            self.running[key] = (base + number, self.columns + number)
            self._running_by_job.add(key[0], key[1], base + number)
        self.columns += len(new)

    def _running_rows(self, lane: Lane) -> dict[int, float]:
        """A lane's coefficients in the rows of :meth:`_running`: −1 per ``R_jt`` whose job it runs at ``t``."""
        out: dict[int, float] = {}
        for e in lane.entries:
            for row in self._running_by_job.rows(e.job, e.start, e.end):
                out[int(row)] = out.get(int(row), 0.0) - 1.0
        return out

    def _inside(self, lane: Lane) -> bool:
        if self.window is None:
            return True
        w = self.window
        return all(
            w.start_lo[e.job] <= e.start <= w.start_hi[e.job] and w.end_lo[e.job] <= e.end <= w.end_hi[e.job]
            for e in lane.entries
        )

    def restrict(self, window: Window) -> None:
        """Allow job ``j`` to start only in ``[start_lo[j], start_hi[j]]`` and end in ``[end_lo[j],
        end_hi[j]]``: every lane that runs it otherwise is fixed to zero (a branch-and-bound node)."""
        self.window = window
        self.start_allowed = self.root_starts & window.starts(self.data.horizon)
        self.end_allowed = self.root_ends & window.ends(self.data.horizon)
        columns = np.array(self.lane_cols, dtype=np.int32)
        uppers = np.array([self.inf if self._inside(lane) else 0.0 for lane in self.lanes])
        self.h.changeColsBounds(len(columns), columns, np.zeros(len(columns)), uppers)

    def _gang_repeats(self, lane: Lane) -> int:
        """The lane's entries of a gang after that gang's first."""
        gangs = [e.job for e in lane.entries if self.data.num_gpus[e.job] > 1]
        return len(gangs) - len(set(gangs))

    def gang_repeat_share(self, values: np.ndarray) -> float:
        """The share of the gangs' lane-units (``Σ_{G_j > 1} G_j``) covered at column values ``values`` by
        a gang's second or later entry in one lane."""
        gangs = self.data.num_gpus > 1
        if not gangs.any():
            return 0.0
        repeated = 0.0
        for lane, col in zip(self.lanes, self.lane_cols, strict=True):
            weight = float(values[col])
            if weight > 1e-12:
                repeated += weight * self._gang_repeats(lane)
        return repeated / float(self.data.num_gpus[gangs].sum())

    def without_gang_repeats(self, seconds: float) -> float | None:
        """The master's optimum with every lane that holds a gang twice fixed to 0 (the master is changed
        for good), or None if it did not solve."""
        for lane, col in zip(self.lanes, self.lane_cols, strict=True):
            if self._gang_repeats(lane):
                self.h.changeColBounds(col, 0.0, 0.0)
        solved = self.solve(seconds)
        return None if solved is None else float(solved[0])

    def use_simplex(self, kind: str) -> None:
        """Solve the following masters by HiGHS's ``"primal"`` or ``"dual"`` simplex (its default).

        Where lanes come every round and rows seldom (a root's column generation) the basis stays primal
        feasible and the primal simplex takes half the master time where the master dominates (16 × 8
        seed 5: 31.8 → 15.8 s; 50 × 8 seed 0: 47.0 → 24.7 s); where a node's windows change the columns'
        bounds it must repair them, and the dual simplex does better (docs/oracle-measurements.md, "Four more leads at
        `C = 2`" and "The lane root by the primal simplex")."""
        if kind not in ("primal", "dual"):
            raise ValueError(f"simplex must be 'primal' or 'dual', got {kind!r}")
        self.h.setOptionValue("simplex_strategy", 4 if kind == "primal" else 1)

    def values(self) -> np.ndarray:
        """The last solve's column values."""
        return np.asarray(self.h.getSolution().col_value)

    def distributions(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each job's start and end distributions at column values ``values``: ``[j, S]`` is
        ``Σ_c [j starts at S in c]·λ_c / G_j`` (the module docstring's ``y``), and the same for ends."""
        data = self.data
        starts = np.zeros((data.n, data.horizon + 1))
        ends = np.zeros((data.n, data.horizon + 1))
        for lane, col in zip(self.lanes, self.lane_cols, strict=True):
            weight = float(values[col])
            if weight <= 1e-12:
                continue
            for e in lane.entries:
                share = weight / float(data.num_gpus[e.job])
                starts[e.job, e.start] += share
                ends[e.job, e.end] += share
        return starts, ends

    def _run(self, seconds: float) -> None:
        # HiGHS compares its limit with the object's run time summed over every solve
        self.h.setOptionValue("time_limit", self.h.getRunTime() + max(0.01, seconds))
        self.h.run()

    def solve(self, time_limit: float) -> tuple[float, Duals, float] | None:
        """The master's optimum, its duals (without the GPU row's) and the GPU row's dual ``ρ ≤ 0``."""
        began = time.perf_counter()
        self._run(time_limit)
        left = time_limit - (time.perf_counter() - began)
        if self.h.getModelStatus() == self.hs.HighsModelStatus.kUnknown and left > 0:
            # the warm-started simplex sometimes ends "unknown" after many added columns and rows (seen on
            # Poisson 24 x 8 after ~170 rounds); the same LP from a fresh start solves
            self.h.clearSolver()
            self._run(left)
        if self.h.getModelStatus() != self.hs.HighsModelStatus.kOptimal:
            return None
        row_dual = np.asarray(self.h.getSolution().row_dual)
        cover_rows = np.array(self.covers.rows if self.covers is not None else [], dtype=np.int64)
        duals = self.duals(
            mu=row_dual[self.coverage_row],
            eta=np.maximum(row_dual[self.progress_row], 0.0),
            nu=np.maximum(row_dual[cover_rows], 0.0),
        )
        return self.h.getInfo().objective_function_value, duals, float(row_dual[self.gpu_row])

    def duals(self, mu: np.ndarray, eta: np.ndarray, nu: np.ndarray) -> Duals:
        """The pricing's :class:`Duals` of the rows' duals ``mu`` (coverage), ``eta`` (progress) and
        ``nu`` (cover rows)."""
        data = self.data
        gpus = data.num_gpus.astype(float)
        # by the pricing's rows: pseudo-job p stands for job owner[p] (the identity without modes), and
        # its progress row's right side is 0, so what it must progress comes off its start's value
        owner = np.arange(data.n) if data.pseudo is None else data.pseudo.owner
        start_value = mu[owner] - eta * data.priced.work if self.modal else mu
        alpha = np.where(self.entry_starts, start_value[:, None], 0.0)
        beta = self.end_value.copy()
        prices = self.covers.start_end_prices(nu) if self.covers is not None else None
        if prices is not None:
            alpha -= np.where(self.entry_starts, (prices[0] / gpus[:, None])[owner], 0.0)
            beta -= np.where(self.entry_ends, (prices[1] / gpus[:, None])[owner], 0.0)
        return Duals(alpha=alpha, beta=beta, eta=eta, nu=nu, mu=mu)

    def lagrangian(self, duals: Duals, top: float) -> float:
        """The Lagrangian bound at ``duals`` (from :meth:`duals`, or a mix of such; ``η, ν ≥ 0``): the
        coverage, progress and cover rows dualized, ``q_j ∈ [0, 1]`` and ``Σλ ≤ #GPUs`` kept; ``top`` is
        the largest lane value at these duals under the current windows (:meth:`_LanePricing.price`). A
        job the windows leave no start or no end keeps its coverage row: it ends past the cut (or, if it
        may not, the node is infeasible)."""
        data = self.data
        if duals.mu.size != data.n:
            raise ValueError("the Lagrangian needs the coverage rows' duals (Duals.mu, from _Master.duals)")
        gpus = data.num_gpus.astype(float)
        whole, eta = self._progress_sides(duals)
        total = float(np.sum(whole * eta)) + data.gpus * min(0.0, -top)
        if self.covers is not None:
            total += self.covers.constant(duals.nu)
        on_time = self.start_allowed.any(axis=1) & self.end_allowed.any(axis=1)
        late_saving = np.where(data.can_be_late, data.late_cost - gpus * duals.mu - whole * eta, 0.0)
        total += float(np.sum(np.where(on_time, gpus * duals.mu + np.minimum(0.0, late_saving), 0.0)))
        stuck = ~on_time
        if np.any(stuck & ~data.can_be_late):
            return math.inf
        total += float(np.sum(np.where(stuck, data.late_cost - whole * eta, 0.0)))
        return total

    def _progress_sides(self, duals: Duals) -> tuple[np.ndarray, np.ndarray]:
        """Per job, its progress row's right side ``G_j·w_j`` and that row's dual, as the Lagrangian
        counts them; zeros where the lanes are mode-aware (the pseudo-jobs' rows have right side 0 and
        hold no late mass)."""
        if self.modal:
            return np.zeros(self.data.n), np.zeros(self.data.n)
        return self.data.num_gpus.astype(float) * self.data.work, duals.eta

    def others_bounds(self, duals: Duals, top: float) -> np.ndarray:
        """``[j]``: a lower bound on ``Σ_{k≠j} E_k`` (slots) over every schedule in the master's windows,
        from the Lagrangian at ``duals`` (``top`` as for :meth:`lagrangian`), with no pricing.

        Delete job ``j`` from a schedule: what is left is a schedule of the others in which no job ends
        later (a partner gone only speeds a job up) and each stays in its window. So the lane Lagrangian of
        the instance without ``j``, at these duals, bounds their ends: the same function without ``j``'s
        coverage and progress terms, the cover rows kept (with ``R_jt = 0`` each still holds), and the
        best lane without ``j`` is worth at most the best lane (``top``). docs/oracle-measurements.md, "Windows from
        the lane LP's duals"."""
        data = self.data
        total = self.lagrangian(duals, top)
        gpus = data.num_gpus.astype(float)
        whole, eta = self._progress_sides(duals)
        on_time = self.start_allowed.any(axis=1) & self.end_allowed.any(axis=1)
        late_saving = np.where(data.can_be_late, data.late_cost - gpus * duals.mu - whole * eta, 0.0)
        own = whole * eta + np.where(
            on_time, gpus * duals.mu + np.minimum(0.0, late_saving), data.late_cost - whole * eta
        )
        return np.asarray(total - own, dtype=float)

    def lane_value(self, lane: Lane, duals: Duals) -> float:
        """``Σ_rows dual · coefficient − cost`` of a lane without the GPU row (its reduced cost is ``−ρ −``
        this)."""
        total = 0.0
        for e in lane.entries:
            p = self.data.entry_index(e)
            total += duals.alpha[p, e.start] + duals.beta[p, e.end] + duals.eta[p] * e.progress
        if self.covers is not None and duals.nu.size:
            for r, value in self.covers.coefficients(lane).items():
                if r < duals.nu.size:
                    total += duals.nu[r] * value
        return float(total)


# --- pricing -------------------------------------------------------------------------------------


def tracked_jobs(data: LaneData, most: int) -> list[int]:
    """The jobs the exclusive pricing keeps from running twice in one lane: the gangs, at most ``most``
    (most GPU-slots of work first). A gang time-sliced in one lane is where the exclusive lanes' LP gains
    most from repeats; tracking one-GPU jobs as well multiplies the labels (short jobs fit in many
    subsets) for little (docs/oracle-measurements.md, "Elementary lanes for exclusive GPUs")."""
    gangs = [j for j in range(data.n) if data.num_gpus[j] >= 2]
    return sorted(gangs, key=lambda j: (-data.num_gpus[j] * data.work[j], j))[:most]


class _LanePricing:
    """The lane DP (module docstring) for one set of duals.

    ``value[j, S, E]``: what job ``j`` run in ``[S, E)`` alone is worth in a lane (:class:`Duals`: its
    coverage, progress and cover rows' duals, less its end's cost); a shared slot costs
    ``pair_cost[i, k] = η_i(1 − σ_ik) + η_k(1 − σ_ki)``.
    """

    def __init__(self, data: LaneData, covers: _CoverRows | None = None) -> None:
        # mode-aware lanes: the DP runs over the pseudo-jobs, and its lanes come back over the jobs
        self.pseudo = data.pseudo
        data = data.priced
        self.data = data
        self.covers = covers  # the master's cover rows, whose duals this pricing takes
        n, horizon = data.n, data.horizon
        slots = np.arange(horizon + 1)
        self.length = slots[None, None, :] - slots[None, :, None]  # E − S
        whole = data.window()
        self.start_ok = whole.starts(horizon)
        self.valid_run = (
            self.start_ok[:, :, None]
            & whole.ends(horizon)[:, None, :]
            & (self.length >= data.min_slots[:, None, None])
            & (self.length <= data.max_slots[:, None, None])
        )
        self.max_run = int(data.max_slots.max()) if n else 0
        self.n = n
        self._valid_base, self._start_base = self.valid_run, self.start_ok
        self.compiled = True  # the numba pass where installed (formulation.lane_kernel)
        # where no pair may share, a lane is a sequence of alone runs: priced by the exclusive pass,
        # which also keeps the tracked jobs from running twice in one lane
        self.exclusive = not bool(data.shareable.any())
        self.tracked = tracked_jobs(data, MAX_TRACKED_JOBS) if self.exclusive else []
        self.tracked_bit = np.full(n, -1, dtype=np.int64)  # [j]: its bit in the exclusive pass's labels
        self.tracked_bit[self.tracked] = np.arange(len(self.tracked))

    def restrict(self, window: Window) -> None:
        """Run job ``j`` only inside ``window`` (a branch-and-bound node)."""
        if self.pseudo is not None:
            window = self.pseudo.window(window)
        starts, ends = window.starts(self.data.horizon), window.ends(self.data.horizon)
        self.start_ok = self._start_base & starts
        self.valid_run = self._valid_base & starts[:, :, None] & ends[:, None, :]

    def price(self, duals: Duals, want: int) -> tuple[float, list[Lane]]:
        """The largest lane value (``max_c Σ dual·coef`` without the GPU row) and up to ``want`` lanes of
        large value (the best one whose last job is each job, best first)."""
        data = self.data
        n = self.n
        eta = duals.eta
        value = duals.alpha[:, :, None] + duals.beta[:, None, :] + eta[:, None, None] * self.length
        value = np.where(self.valid_run, value, NEG)
        if self.exclusive:  # no lane shares: no share bonus to build
            return self._price_exclusive(value, want)
        bonus = self._bonus(duals)
        loss = 1.0 - data.sigma
        pair_cost = np.where(data.shareable, eta[:, None] * loss + eta[None, :] * loss.T, np.inf)
        run = self._forward(value, pair_cost, bonus)
        ends_value, ends_arg = run
        best = float(ends_value.max()) if n else 0.0
        order = np.argsort(-ends_value)
        lanes = []
        for j in order[:want]:
            if ends_value[j] <= REACHABLE:
                break
            start, end = ends_arg[j]
            lanes.append(self._backtrack(int(j), int(start), int(end)))
        if self.pseudo is not None:
            lanes = [self.pseudo.real(lane) for lane in lanes]
        return max(best, 0.0), lanes

    def _price_exclusive(self, value: np.ndarray, want: int) -> tuple[float, list[Lane]]:
        """:meth:`price` where no pair may share: the exclusive pass (compiled where ready, else its numpy
        twin, same numbers), whose lanes hold no tracked job twice. No lane shares, so the cover rows'
        share bonuses never apply; their running prices are in ``value`` already."""
        data = self.data
        arrays = (
            np.ascontiguousarray(value, dtype=np.float64),
            self.tracked_bit,
            len(self.tracked),
            np.ascontiguousarray(data.max_slots, dtype=np.int64),
        )
        if self.compiled and lane_kernel.ready():
            ends_value, ends_at, back_job, back_start, back_mask = lane_kernel.exclusive_forward(*arrays)
        else:
            ends_value, ends_at, back_job, back_start, back_mask = lane_kernel.exclusive_forward_numpy(*arrays)
        best = float(ends_value.max()) if self.n else 0.0
        lanes = []
        for j in np.argsort(-ends_value, kind="stable")[:want]:
            if ends_value[j] <= REACHABLE:
                break
            start, end, mask = (int(v) for v in ends_at[j])
            runs = [(int(j), start, end)]
            t = start
            while t > 0:
                job = int(back_job[t, mask])
                if job < 0:
                    t -= 1
                    continue
                runs.append((job, int(back_start[t, mask]), t))
                t, mask = int(back_start[t, mask]), int(back_mask[t, mask])
            lanes.append(lane_of_runs(data, runs))
        return max(best, 0.0), lanes

    def _bonus(self, duals: Duals) -> np.ndarray | None:
        """What sharing each pair earns per slot, prefix-summed (``(n, n, T+1)``), from the rows that
        count shared slots (here the cover rows); ``None`` when nothing."""
        bonus = self.covers.bonus(duals.nu) if self.covers is not None else None
        if bonus is None and duals.nu.size and np.any(duals.nu > 0):
            raise ValueError("duals of cover rows given to a pricing that does not know the rows")
        if bonus is not None and self.pseudo is not None:  # the rows are over jobs: each pseudo-job's owner's
            owner = self.pseudo.owner
            bonus = bonus[np.ix_(owner, owner)]
        return bonus

    def _forward(
        self, value: np.ndarray, pair_cost: np.ndarray, bonus: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """The DP's forward pass: compiled (:mod:`formulation.lane_kernel`) where numba is installed and
        :attr:`compiled` is on, else in numpy; both give the same arrays. ``bonus[i, k, t]``: the pair's
        share bonus prefix-summed over slots (sharing ``[t, E)`` earns ``bonus[i, k, E] − bonus[i, k, t]``)."""
        if not (self.compiled and lane_kernel.ready()):
            return self._forward_numpy(value, pair_cost, bonus)
        data = self.data
        ends_value, ends_arg, kind, back_a, back_b, idle_end, carry = lane_kernel.forward(
            np.ascontiguousarray(value, dtype=np.float64),
            np.ascontiguousarray(pair_cost, dtype=np.float64),
            np.ascontiguousarray(self.start_ok),
            np.ascontiguousarray(data.nested_min.T, dtype=np.float64),
            np.ascontiguousarray(data.work, dtype=np.float64),
            np.ascontiguousarray(1.0 - data.sigma, dtype=np.float64),
            np.ascontiguousarray(data.max_slots, dtype=np.int64),
            np.ascontiguousarray(data.shareable),
            int(self.max_run),
            np.ascontiguousarray(bonus if bonus is not None else np.zeros((1, 1, 1)), dtype=np.float64),
            bonus is not None,
        )
        self.kind, self.back_a, self.back_b, self.idle_end, self.carry = kind, back_a, back_b, idle_end, carry
        return ends_value, [(int(s), int(e)) for s, e in ends_arg]

    def _forward_numpy(
        self, value: np.ndarray, pair_cost: np.ndarray, bonus: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[tuple[int, int]]]:
        data = self.data
        n, horizon = self.n, data.horizon
        carry = np.full((n, horizon + 1, horizon + 1), NEG)
        kind = np.zeros((n, horizon + 1, horizon + 1), dtype=np.int8)  # 1 alone, 2 nested, 3 handover, 4 start
        back_a = np.zeros((n, horizon + 1, horizon + 1), dtype=np.int32)
        back_b = np.zeros((n, horizon + 1, horizon + 1), dtype=np.int32)
        idle = np.full(horizon + 1, NEG)
        idle_end = np.full((horizon + 1, 2), -1, dtype=np.int64)  # (job, start) that ended at t, or -1 idle
        idle[0] = 0.0
        ends_value = np.full(n, NEG)
        ends_arg: list[tuple[int, int]] = [(-1, -1)] * n
        max_run = self.max_run
        nested_min_t = data.nested_min.T  # [i, k]: k nested in i
        work = data.work
        one_minus = 1.0 - data.sigma
        jobs = np.arange(n)
        for t in range(horizon + 1):
            lo = max(0, t - max_run)
            width = t - lo + 1
            # jobs ending at t: the GPU is free from t
            if t > 0 and idle[t - 1] > idle[t]:
                idle[t] = idle[t - 1]
                idle_end[t] = (-1, -1)
            ending = carry[:, lo : t + 1, t] + value[:, lo : t + 1, t]
            flat = int(np.argmax(ending))
            j_end, s_end = divmod(flat, width)
            if ending[j_end, s_end] > idle[t] and ending[j_end, s_end] > REACHABLE:
                idle[t] = ending[j_end, s_end]
                idle_end[t] = (j_end, lo + s_end)
            per_job = ending.max(axis=1)
            better = per_job > ends_value
            if better.any():
                args = ending.argmax(axis=1)
                for j in np.nonzero(better)[0]:
                    ends_value[j] = per_job[j]
                    ends_arg[j] = (lo + int(args[j]), t)
            # jobs starting at t on a free GPU
            if idle[t] > REACHABLE:
                starting = self.start_ok[:, t] & (idle[t] > carry[:, t, t])
                carry[starting, t, t] = idle[t]
                kind[starting, t, t] = 4
            if t == horizon:
                break
            current = carry[:, lo : t + 1, t]  # (n, width): job i started at lo + s, alone at t
            starts = np.arange(lo, t + 1)
            alive = (current > REACHABLE) & ((t - starts)[None, :] <= data.max_slots[:, None])
            if not alive.any():
                if idle[t] > idle[t + 1]:
                    idle[t + 1] = idle[t]
                    idle_end[t + 1] = (-1, -1)
                continue
            current = np.where(alive, current, NEG)
            # one more slot alone
            nxt = carry[:, lo : t + 1, t + 1]
            step = current > nxt
            nxt[step] = current[step]
            kind[:, lo : t + 1, t + 1][step] = 1
            ends = np.arange(t + 1, horizon + 1)
            duration = ends - t  # (L,)
            # nested: k starts at t and ends at E while i runs on (k shared its whole run)
            gain = value[None, :, t, t + 1 :] - pair_cost[:, :, None] * duration[None, None, :]  # [i, k, E]
            if bonus is not None:
                gain = gain + (bonus[:, :, t + 1 :] - bonus[:, :, t][:, :, None])
            gain = np.where(duration[None, None, :] >= nested_min_t[:, :, None], gain, NEG)
            best_k = gain.argmax(axis=1)  # (n, L)
            nested = np.take_along_axis(gain, best_k[:, None, :], axis=1)[:, 0, :]
            ai, a_s = np.nonzero(alive)
            if ai.size:
                cand = current[ai, a_s][:, None] + nested[ai, :]  # (active, L)
                run_ok = (ends[None, :] - starts[a_s][:, None]) <= data.max_slots[ai][:, None]
                cand = np.where(run_ok, cand, NEG)
                target = carry[ai, lo + a_s, t + 1 :]
                improve = cand > target
                if improve.any():
                    rows, cols = np.nonzero(improve)
                    carry[ai[rows], lo + a_s[rows], t + 1 + cols] = cand[rows, cols]
                    kind[ai[rows], lo + a_s[rows], t + 1 + cols] = 2
                    back_a[ai[rows], lo + a_s[rows], t + 1 + cols] = t
                    back_b[ai[rows], lo + a_s[rows], t + 1 + cols] = best_k[ai[rows], cols]
            # handover: k starts at t; i ends at E while k runs on
            base = current[:, :, None] + value[:, lo : t + 1, t + 1 :]  # [i, s, E]
            prefix = np.maximum.accumulate(base, axis=1)
            where = np.where(base >= prefix, np.arange(width)[None, :, None], -1)
            prefix_arg = np.maximum.accumulate(where, axis=1)
            # i's progress with the overlap [t, E): (E − S) − (1 − σ_ik)(E − t) ≥ w_i ⇔ S ≤ threshold
            threshold = np.floor(
                ends[None, None, :] - work[:, None, None] - one_minus[:, :, None] * duration[None, None, :] + 1e-9
            ).astype(np.int64)  # [i, k, E]
            index = np.clip(threshold - lo, -1, width - 1)
            safe = np.maximum(index, 0)
            ii = jobs[:, None, None]
            ee = np.arange(len(ends))[None, None, :]
            reach = np.where(index >= 0, prefix[ii, safe, ee], NEG)  # [i, k, E]
            reach_s = prefix_arg[ii, safe, ee]
            hand = reach - pair_cost[:, :, None] * duration[None, None, :]
            if bonus is not None:
                hand = hand + (bonus[:, :, t + 1 :] - bonus[:, :, t][:, :, None])
            hand = np.where(data.shareable[:, :, None], hand, NEG)
            best_i = hand.argmax(axis=0)  # [k, E]
            handed = np.take_along_axis(hand, best_i[None, :, :], axis=0)[0]  # [k, E]
            handed = np.where(self.start_ok[:, t][:, None], handed, NEG)
            target = carry[:, t, t + 1 :]
            improve = handed > target
            if improve.any():
                ks, cols = np.nonzero(improve)
                carry[ks, t, t + 1 + cols] = handed[ks, cols]
                kind[ks, t, t + 1 + cols] = 3
                prev = best_i[ks, cols]
                back_a[ks, t, t + 1 + cols] = prev
                back_b[ks, t, t + 1 + cols] = lo + reach_s[prev, ks, cols]
            if idle[t] > idle[t + 1]:
                idle[t + 1] = idle[t]
                idle_end[t + 1] = (-1, -1)
        self.kind, self.back_a, self.back_b, self.idle_end, self.carry = kind, back_a, back_b, idle_end, carry
        return ends_value, ends_arg

    def _backtrack(self, job: int, start: int, end: int) -> Lane:
        """The lane whose last job ``job`` runs in ``[start, end)`` (then the GPU idles)."""
        runs: list[tuple[int, int, int]] = [(job, start, end)]  # (job, start, end)
        i, s, t = job, start, end
        for _ in range(10 * (self.data.horizon + 2) * (self.n + 1)):
            k = int(self.kind[i, s, t])
            if k == 1:
                t -= 1
            elif k == 2:  # a partner nested in [back_a, t)
                t0 = int(self.back_a[i, s, t])
                runs.append((int(self.back_b[i, s, t]), t0, t))
                t = t0
            elif k == 3:  # i started at s by taking over from a job that ended at t
                previous, previous_start = int(self.back_a[i, s, t]), int(self.back_b[i, s, t])
                runs.append((previous, previous_start, t))
                i, s, t = previous, previous_start, s
            elif k == 4:
                # i started at s on a free GPU: walk back over idle slots to the job that ended last
                t = s
                while t > 0 and int(self.idle_end[t][0]) < 0:
                    t -= 1
                if t == 0:
                    break
                i, s = (int(v) for v in self.idle_end[t])
                runs.append((i, s, t))
            else:
                raise RuntimeError(f"lane backtracking reached an unset state ({i}, {s}, {t})")
        else:
            raise RuntimeError("lane backtracking did not end")
        return lane_of_runs(self.data, runs)


class _ProgressPricing:
    """The lane DP with every job's progress checked in the column.

    States ``(i, t, R)``: job ``i`` runs and is alone at slot ``t`` with ``R`` grid units of work left
    (``q`` units per alone-slot). A job starts with ``R = ⌈q·w_i⌉``; an alone slot takes ``q`` off (exact);
    ``d`` slots next to ``k`` take ``⌈q·σ_ik·d⌉`` off (at most one unit, ``1/q`` slot, too much per
    partner: the relaxed direction, so every real lane stays a path); it may end once ``R = 0``. The
    transitions are those of :class:`_LanePricing` (alone, end, nested partner, hand-over), with the
    running job's start folded into its start dual when it starts. Compared with it, a lane whose
    running job ends before its work is done is no longer priced; a run's maximum length is not
    enforced (a relaxation).
    """

    def __init__(self, data: LaneData, grid: int = 4) -> None:
        self.data = data
        self.q = grid
        n, horizon = data.n, data.horizon
        self.n = n
        self.r_start = np.maximum(1, np.ceil(grid * data.work - 1e-9)).astype(np.int64)
        self.r_max = int(self.r_start.max()) if n else 0
        durations = np.arange(horizon + 1)
        self.dec = np.ceil(grid * data.sigma[:, :, None] * durations[None, None, :] - 1e-9).astype(np.int64)
        self.run_cap = np.minimum(data.max_slots, horizon)
        whole = data.window()
        self.start_ok, self.end_ok = whole.starts(horizon), whole.ends(horizon)
        self._start_base, self._end_base = self.start_ok, self.end_ok

    def restrict(self, window: Window) -> None:
        """Run job ``j`` only inside ``window`` (a branch-and-bound node)."""
        self.start_ok = self._start_base & window.starts(self.data.horizon)
        self.end_ok = self._end_base & window.ends(self.data.horizon)

    def price(self, duals: Duals, want: int) -> tuple[float, list[Lane]]:
        if duals.nu.size and np.any(duals.nu > 0):
            raise ValueError("the progress pricing does not take the cover rows' duals")
        data = self.data
        n, horizon, q, r_max = self.n, data.horizon, self.q, self.r_max
        start_value = np.where(self.start_ok, duals.alpha, NEG)
        end_value = np.where(self.end_ok, duals.beta, NEG)
        eta, sigma = duals.eta, data.sigma
        carry = np.full((n, horizon + 1, r_max + 1), NEG)
        kind = np.zeros(carry.shape, dtype=np.int8)  # 1 alone, 2 nested, 3 hand-over, 4 start
        back_t = np.zeros(carry.shape, dtype=np.int32)
        back_job = np.zeros(carry.shape, dtype=np.int32)
        back_r = np.zeros(carry.shape, dtype=np.int32)
        # a free GPU remembers the job that just ended on it (n: none), which may not start again
        # right away (a gang must not cover itself by running twice on one GPU)
        idle = np.full((horizon + 1, n + 1), NEG)
        idle_from_end = np.zeros((horizon + 1, n + 1), dtype=bool)
        idle[0, n] = 0.0
        ends_value = np.full(n, NEG)
        ends_at = np.zeros(n, dtype=np.int64)
        jobs = np.arange(n)
        levels = np.arange(r_max + 1)
        for t in range(horizon + 1):
            if t > 0:
                step = idle[t - 1] > idle[t]
                idle[t, step] = idle[t - 1, step]
            ending = carry[:, t, 0] + end_value[:, t]
            improve_end = (ending > idle[t, :n]) & (ending > REACHABLE)
            idle[t, :n][improve_end] = ending[improve_end]
            idle_from_end[t, :n][improve_end] = True
            better = ending > ends_value
            ends_value[better], ends_at[better] = ending[better], t
            order = np.argsort(-idle[t])
            first, second = int(order[0]), int(order[1]) if n > 0 else int(order[0])
            if idle[t, first] > REACHABLE:
                source = np.where(jobs == first, second, first)  # the best free state another job ended
                value = idle[t, source] + start_value[:, t]
                improve = (value > carry[jobs, t, self.r_start]) & (idle[t, source] > REACHABLE)
                carry[jobs[improve], t, self.r_start[improve]] = value[improve]
                kind[jobs[improve], t, self.r_start[improve]] = 4
                back_job[jobs[improve], t, self.r_start[improve]] = source[improve]
            if t == horizon:
                break
            current = np.where((t < data.last_end)[:, None], carry[:, t, :], NEG)
            if not (current > REACHABLE).any():
                continue
            prefix = np.maximum.accumulate(current, axis=1)
            prefix_arg = np.maximum.accumulate(np.where(current >= prefix, levels[None, :], 0), axis=1)
            # alone for one slot: R − q (clamped at 0)
            moved = np.full(current.shape, NEG)
            source = np.zeros(current.shape, dtype=np.int64)
            moved[:, 0] = prefix[:, min(q, r_max)]
            source[:, 0] = prefix_arg[:, min(q, r_max)]
            if r_max > q:
                moved[:, 1 : r_max + 1 - q] = current[:, q + 1 :]
                source[:, 1 : r_max + 1 - q] = levels[q + 1 :][None, :]
            moved = moved + eta[:, None]
            target = carry[:, t + 1, :]
            improve = moved > target
            target[improve] = moved[improve]
            kind[:, t + 1, :][improve] = 1
            back_r[:, t + 1, :][improve] = source[improve]
            carriers = np.nonzero((current > REACHABLE).any(axis=1))[0]
            for k in range(n):
                if start_value[k, t] <= REACHABLE:
                    continue
                length = int(min(horizon - t, self.run_cap[k]))
                if length <= 0:
                    continue
                duration = np.arange(1, length + 1)
                ends = t + duration
                partner = carriers[data.shareable[carriers, k]]
                if partner.size == 0:
                    continue
                own = start_value[k, t] + end_value[k, ends]  # k run in [t, E)
                # nested: k shared for its whole run with i, which runs on
                gain = (
                    own[None, :]
                    + (eta[k] * sigma[k, partner])[:, None] * duration[None, :]
                    + (eta[partner] * sigma[partner, k])[:, None] * duration[None, :]
                )
                gain = np.where(duration[None, :] >= data.nested_min[k, partner][:, None], gain, NEG)
                dec = self.dec[partner, k, 1 : length + 1]  # (partners, L)
                src = levels[None, None, :] + dec[:, :, None]
                src[:, :, 0] = np.minimum(dec, r_max)  # R' = 0 from any R ≤ dec
                inside = src <= r_max
                safe = np.minimum(src, r_max)
                rows = partner[:, None, None]
                from_value = np.where(inside, current[rows, safe], NEG)
                from_value[:, :, 0] = prefix[partner[:, None], np.minimum(dec, r_max)]
                from_source = safe.copy()
                from_source[:, :, 0] = prefix_arg[partner[:, None], np.minimum(dec, r_max)]
                cand = from_value + gain[:, :, None]
                target = carry[partner[:, None], ends[None, :], :]  # (partners, L, R)
                improve = cand > target
                if improve.any():
                    pi, li, ri = np.nonzero(improve)
                    ii, ee = partner[pi], ends[li]
                    carry[ii, ee, ri] = cand[pi, li, ri]
                    kind[ii, ee, ri] = 2
                    back_t[ii, ee, ri] = t
                    back_job[ii, ee, ri] = k
                    back_r[ii, ee, ri] = from_source[pi, li, ri]
                # hand-over: k starts at t, i ends at E (its work done), k runs on
                done = prefix[partner[:, None], np.minimum(dec, r_max)]  # best R ≤ what E − t takes off
                done_r = prefix_arg[partner[:, None], np.minimum(dec, r_max)]
                handed = (
                    done
                    + end_value[partner[:, None], ends[None, :]]
                    + start_value[k, t]
                    + (eta[partner] * sigma[partner, k])[:, None] * duration[None, :]
                    + (eta[k] * sigma[k, partner])[:, None] * duration[None, :]
                )
                left = np.maximum(self.r_start[k] - self.dec[k, partner, 1 : length + 1], 0)  # (partners, L)
                # each carrier leaves k with its own work left: one scatter per carrier
                for p_index in range(partner.size):
                    value = handed[p_index]
                    r_left = left[p_index]
                    slot_target = carry[k, ends, r_left]
                    improve_h = value > slot_target
                    if improve_h.any():
                        ee = ends[improve_h]
                        rr = r_left[improve_h]
                        carry[k, ee, rr] = value[improve_h]
                        kind[k, ee, rr] = 3
                        back_t[k, ee, rr] = t
                        back_job[k, ee, rr] = partner[p_index]
                        back_r[k, ee, rr] = done_r[p_index][improve_h]
            step = idle[t] > idle[t + 1]
            idle[t + 1, step] = idle[t, step]
        self.kind, self.back_t, self.back_job, self.back_r = kind, back_t, back_job, back_r
        self.idle_from_end = idle_from_end
        top = float(ends_value.max()) if n else 0.0
        lanes = []
        for j in np.argsort(-ends_value)[:want]:
            if ends_value[j] <= REACHABLE:
                break
            lanes.append(self._backtrack(int(j), int(ends_at[j])))
        return max(top, 0.0), lanes

    def _backtrack(self, job: int, end: int) -> Lane:
        runs: list[list[int]] = [[job, -1, end]]  # job, start (found when reached), end
        current, i, t, r = 0, job, end, 0
        for _ in range(10 * (self.data.horizon + 2) * (self.n + 2) * (self.r_max + 2)):
            k = int(self.kind[i, t, r])
            if k == 1:
                t, r = t - 1, int(self.back_r[i, t, r])
            elif k == 2:  # a partner nested in [back_t, t)
                t0, partner, r0 = int(self.back_t[i, t, r]), int(self.back_job[i, t, r]), int(self.back_r[i, t, r])
                runs.append([partner, t0, t])
                t, r = t0, r0
            elif k == 3:  # i started at back_t by taking over from a job that ended at t
                t0, previous, r0 = int(self.back_t[i, t, r]), int(self.back_job[i, t, r]), int(self.back_r[i, t, r])
                runs[current][1] = t0
                runs.append([previous, -1, t])
                current, i, t, r = len(runs) - 1, previous, t0, r0
            elif k == 4:
                runs[current][1] = t
                last = int(self.back_job[i, t, r])
                # the free GPU's history: idle steps back to the end of `last`
                while t > 0 and not self.idle_from_end[t, last]:
                    t -= 1
                if t == 0 or last == self.n:
                    break
                i, r = last, 0
                runs.append([i, -1, t])
                current = len(runs) - 1
            else:
                raise RuntimeError(f"lane backtracking reached an unset state ({i}, {t}, {r})")
        else:
            raise RuntimeError("lane backtracking did not end")
        return lane_of_runs(self.data, [(j, s0, e0) for j, s0, e0 in runs])


# --- the column generation ----------------------------------------------------------------------


def lane_skip_reason(problem: SlottedProblem, max_states: int = DEFAULT_MAX_LANE_STATES) -> str | None:
    """Why :func:`lane_bound` would not run on ``problem`` (total JCT and one or two jobs per GPU only, an
    upper bound needed, the DP within ``max_states``); ``None`` when it would."""
    return _skip_reason(problem, default_cut(problem), max_states)


SECONDS_PER_CONVERGENCE = 2e-7
"""Fitted (idle machine, one thread): a whole column generation with the default pricing takes about
this times ``n³ · cut²`` seconds (12 jobs: 6-12 s, 16 jobs: 14-18 s, 24 jobs: 47 s on 8 GPUs; about
``5n`` rounds of ``n² · cut²`` DP work each)."""
COMPILED_SPEEDUP = 2.5
"""How much sooner the column generation converges with the compiled pricing (:mod:`formulation.lane_kernel`);
measured side by side, same rounds and values: 16 jobs 62 → 6 s, 24 jobs 105 → 42 s (the master's share
grows with n), on a loaded 2-core machine."""


def expected_lane_seconds(problem: SlottedProblem) -> float:
    """Rough wall time :func:`lane_bound` needs to converge alone (:data:`SECONDS_PER_CONVERGENCE`, divided
    by :data:`COMPILED_SPEEDUP` where the compiled pricing is installed)."""
    seconds = SECONDS_PER_CONVERGENCE * problem.num_jobs**3 * default_cut(problem) ** 2
    return seconds / COMPILED_SPEEDUP if lane_kernel.AVAILABLE else seconds


def lane_cut(problem: SlottedProblem, cut: int | None, max_states: int) -> tuple[int, str | None]:
    """The lanes' horizon (``cut``, default :func:`formulation.relaxation.default_cut`, within the
    problem's) and why the lane bounds skip the problem (``None``: they do not)."""
    if problem.upper_bound is None:
        return 0, "needs an upper-bound solution"
    cut = default_cut(problem) if cut is None else max(1, min(cut, problem.horizon))
    return cut, _skip_reason(problem, cut, max_states)


def _skip_reason(problem: SlottedProblem, cut: int, max_states: int) -> str | None:
    if problem.objective != "jct" or problem.capacity not in (1, 2):
        return "total JCT with one or two jobs per GPU only"
    if problem.upper_bound is None:
        return "needs an upper-bound solution"
    if problem.num_jobs * (cut + 1) ** 2 > max_states:
        return f"{problem.num_jobs} jobs x {cut + 1}^2 slots exceed {max_states} DP states"
    return None


@dataclass
class _Generation:
    """What :func:`_column_generation` reached."""

    best: float
    status: str
    master_value: float
    rounds: int
    pricing_seconds: float
    master_seconds: float
    history: list[tuple[float, float, float]]
    values: np.ndarray | None
    center: Duals | None = None  # the duals of the best bound
    center_top: float = math.nan  # the best lane's value at ``center`` (what the Lagrangian took)
    cuts: int = 0  # cover rows in the master after the last separation


def _column_generation(
    master: _Master,
    pricer: _LanePricing | _ProgressPricing,
    *,
    deadline: float,
    want: int,
    smoothing: float,
    max_rounds: int,
    cancel: threading.Event | None = None,
    on_bound: Callable[[_Generation], bool] | None = None,
    center: Duals | None = None,
    enough: float = math.inf,
    max_separations: int = MAX_SEPARATIONS,
) -> _Generation:
    """Column generation on the master as it is (its columns, bounds and windows) until its LP optimum,
    the deadline, ``max_rounds`` or ``cancel``: Wentges smoothing, and the exact Lagrangian bound after
    every pricing (the best one is ``best``).

    ``center`` (e.g. a branch-and-bound parent's best duals) is priced first, under this master's
    windows, and starts the smoothing there; the generation stops (status ``"enough"``) once the bound
    reaches ``enough`` (a node that the incumbent prunes needs no more rounds)."""
    began = time.perf_counter()
    outcome = _Generation(-math.inf, "max_rounds", math.nan, 0, 0.0, 0.0, [], None)
    if center is not None and deadline > time.perf_counter():
        tick = time.perf_counter()
        top, _ = pricer.price(center, 0)
        outcome.pricing_seconds += time.perf_counter() - tick
        outcome.best = master.lagrangian(center, top)
        outcome.center, outcome.center_top = center, top
        if outcome.best >= enough:
            outcome.status = "enough"
            return outcome
    center = outcome.center
    last_round = 0.0
    separations = 0
    while outcome.rounds < max_rounds:
        if cancel is not None and cancel.is_set():
            outcome.status = "cancelled"
            break
        left = deadline - time.perf_counter()
        if left <= 0 or left < last_round:  # a round that cannot end in time is not started
            outcome.status = "time_limit"
            break
        round_began = tick = time.perf_counter()
        solved = master.solve(left)
        outcome.master_seconds += time.perf_counter() - tick
        if solved is None:
            too_late = time.perf_counter() >= deadline
            outcome.status = "time_limit" if too_late else "failed: the master LP did not solve"
            break
        outcome.master_value, duals, rho = solved
        outcome.values = master.values()
        outcome.rounds += 1
        # Wentges smoothing: price at a point between the best-bound duals and the master's; when that
        # finds nothing for the master (a mispricing), price at the master's own duals
        entering: list[Lane] = []
        weight = smoothing if center is not None else 0.0
        while True:
            point = center.mix(duals, weight) if center is not None and weight > 0 else duals
            tick = time.perf_counter()
            top, lanes = pricer.price(point, want)
            outcome.pricing_seconds += time.perf_counter() - tick
            bound = master.lagrangian(point, top)
            if bound > outcome.best:
                outcome.best, center = bound, point
                outcome.center, outcome.center_top = center, top
                if on_bound is not None and not on_bound(outcome):
                    outcome.status = "stopped"
                if outcome.best >= enough:
                    outcome.status = "enough"
            entering = [lane for lane in lanes if -rho - master.lane_value(lane, duals) < -PRICING_TOLERANCE]
            if entering and all(master.known(lane) for lane in entering):
                # all already columns: HiGHS' own reduced costs for them are above its tolerance, so they
                # price out by rounding only (the duals clipped to their signs, times progress
                # coefficients of tens of slots; seen with the gang paces' master at 16 jobs)
                entering = []
            if entering or weight == 0.0 or outcome.status in ("stopped", "enough"):
                break
            weight = 0.0
        outcome.history.append((time.perf_counter() - began, outcome.master_value, outcome.best))
        last_round = time.perf_counter() - round_began
        if outcome.status in ("stopped", "enough"):
            break
        converged = outcome.best >= outcome.master_value - PRICING_TOLERANCE * max(1.0, abs(outcome.master_value))
        if not entering:  # priced at the master's duals: no lane has a negative reduced cost
            outcome.best = max(outcome.best, outcome.master_value)
            converged = True
        # rows are looked for once the bound is near the master (a tail of rounds per batch costs more)
        near = outcome.best >= outcome.master_value - SEPARATION_GAP * max(1.0, abs(outcome.master_value))
        if (
            near
            and not converged
            and separations < max_separations
            and outcome.values is not None
            and master.separate(outcome.values)
        ):
            separations += 1
            outcome.cuts = len(master.covers) if master.covers is not None else 0
        if converged:
            # the LP with these rows is solved: add the cover rows it violates and go on, else done
            if separations < max_separations and outcome.values is not None and master.separate(outcome.values):
                separations += 1
                outcome.cuts = len(master.covers) if master.covers is not None else 0
                if entering:
                    master.add(entering)
                continue
            outcome.status = "optimal"
            break
        if not master.add(entering):
            outcome.status = "failed: pricing found no new lane with a negative reduced cost"
            break
    if outcome.values is not None and outcome.values.size < master.columns:
        # stopped by max_rounds after adding lanes: they are at 0 in the last solve (still a feasible point
        # of the master), and whoever reads the values by column index (the tree's split) needs them all
        outcome.values = np.concatenate([outcome.values, np.zeros(master.columns - outcome.values.size)])
    return outcome


def check_restrictions(
    problem: SlottedProblem,
    fixed_starts: dict[str, int] | None,
    sharing_pairs: Iterable[tuple[str, str]] | None,
) -> list[tuple[str, str]] | None:
    """Refuse restrictions (:func:`lane_bound`'s ``fixed_starts`` and ``sharing_pairs``) that name a job
    the problem does not have; the pairs as a list (``None`` stays ``None``)."""
    pairs = None if sharing_pairs is None else list(sharing_pairs)
    for job_id in [*(fixed_starts or {}), *(j for pair in pairs or () for j in pair)]:
        if job_id not in problem.index:
            raise ValueError(f"fixed_starts / sharing_pairs name job {job_id!r}, which the problem does not have")
    return pairs


def lane_data(
    problem: SlottedProblem, cut: int, modes: bool = False, max_states: int = DEFAULT_MAX_LANE_STATES
) -> LaneData:
    """:meth:`LaneData.from_problem`, mode-aware where ``modes`` asks and the pseudo-jobs' DP stays within
    ``max_states`` cells (else mode-free, as the lanes skip a problem past it)."""
    data = LaneData.from_problem(problem, cut, modes=modes)
    if data.pseudo is not None and data.pseudo.data.n * (cut + 1) ** 2 > max_states:
        return replace(data, pseudo=None)
    return data


def restricted_data(
    problem: SlottedProblem,
    cut: int,
    fixed_starts: dict[str, int] | None = None,
    sharing_pairs: list[tuple[str, str]] | None = None,
    modes: bool = False,
    max_states: int = DEFAULT_MAX_LANE_STATES,
) -> tuple[LaneData, Window | None]:
    """The lane data (mode-aware as :func:`lane_data` says) with sharing left only to ``sharing_pairs``
    (job ids; all pairs when ``None``), and the root window with each job of ``fixed_starts`` at its one
    start (``None`` when none is fixed)."""
    index = problem.index
    data = lane_data(problem, cut, modes, max_states)
    if sharing_pairs is not None:
        allowed = np.zeros((data.n, data.n), dtype=bool)
        for a, b in sharing_pairs:
            allowed[index[a], index[b]] = allowed[index[b], index[a]] = True
        data = data.sharing_only(allowed)
    if not fixed_starts:
        return data, None
    whole = data.window()
    start_lo, start_hi = whole.start_lo.copy(), whole.start_hi.copy()
    for job_id, start in fixed_starts.items():
        start_lo[index[job_id]] = start_hi[index[job_id]] = int(start)
    return data, Window(start_lo, start_hi, whole.end_lo, whole.end_hi)


_NO_STATE_LIMIT = 2**62
"""``max_states`` that never skips (selective mode expansion checks the limit itself, per expansion)."""


def lane_bound(
    problem: SlottedProblem,
    *,
    time_limit: float = 60.0,
    cut: int | None = None,
    max_rounds: int = 10_000,
    columns_per_round: int | None = None,
    cancel: threading.Event | None = None,
    on_bound: Callable[[LaneBound], bool] | None = None,
    max_states: int = DEFAULT_MAX_LANE_STATES,
    smoothing: float = DEFAULT_SMOOTHING,
    pricing: str = "fast",
    grid: int = 4,
    cover_sets: bool = True,
    fixed_starts: dict[str, int] | None = None,
    sharing_pairs: Iterable[tuple[str, str]] | None = None,
    gang_repeats: bool = False,
    modes: bool | Literal["selective"] = False,
) -> LaneBound:
    """Lower bound on ``Σ_j E_j`` (slots) by column generation over lanes (module docstring).

    Parameters
    ----------
    problem
        A slotted problem with an upper-bound solution (its lanes start the master; its windows bound
        every job's start and end).
    time_limit
        Wall seconds; the best Lagrangian bound so far is returned when they run out.
    cut
        Lanes end at this slot (default :func:`formulation.relaxation.default_cut`); a job may end past
        it at cost ``max(cut + 1, r_j + d_j)``.
    max_rounds, columns_per_round
        Pricing rounds at most (with ``modes``, in the mode-free LP and again in the mode-aware one);
        lanes added per round (default: the number of jobs).
    cancel
        Set to stop at the next round.
    on_bound
        Called with each improved proven bound; returning ``False`` stops the generation.
    max_states
        Skip (status ``skipped``) when the DP would have more cells than this.
    smoothing
        Wentges' weight on the best-bound duals (0: plain column generation).
    pricing, grid
        ``"fast"`` (:class:`_LanePricing`, the default) or ``"progress"`` (:class:`_ProgressPricing`:
        every job's progress checked in its lane to ``1/grid`` slot per partner; 3-7 times slower per
        round; 0.5-1 % stronger on 7-job instances before the cover rows, which it does not take; since
        them the default is the stronger root: docs/oracle-measurements.md, "Per-lane progress, checked").
    cover_sets
        Look for cover rows over sets of three or more jobs too (:class:`_CoverRows`; pairs wider than
        the cluster always). Measured at 16 jobs on 8 GPUs: the root 0-0.9 % higher, 1.5-3 times slower.
    fixed_starts, sharing_pairs
        Restrictions, for measuring where the LP's slack lies (``benchmarks.lane_slack``): job id →
        the only start slot it may take, and the only pairs of job ids that may share. The value then
        bounds the schedules that keep to them, not the problem's.
    gang_repeats
        Also measure how much the last master time-slices gangs (a gang twice in one lane) and what
        forbidding that could gain at most (:attr:`LaneBound.gang_repeat_share`,
        :attr:`LaneBound.elementary_ceiling`; a diagnostic, after the bound, at most 60 s more).
    modes
        Mode-aware lanes (:class:`PseudoJobs`): each job keeps one mode for its whole run. ``True``: every
        job with two modes is given a pseudo-job per mode; ``"selective"``: only the jobs the LP's lanes
        need (:func:`modal_master`'s ``selective``, until :data:`MODE_EXPAND_SHARE` of the time). Either
        way the mode-free LP comes first (at most :data:`MODE_FREE_SHARE` of the time; its bounds are
        reported as they come) and its best duals start the mode-aware master at its bound, as in the
        tree: so the mode-aware bound is never below the mode-free one (started on its own, the mode-aware
        master's cover rows could end it a little below). With the fast pricing only; where the
        pseudo-jobs' DP would pass ``max_states``, the lanes are mode-free.
    """
    if modes not in (False, True, "selective"):
        raise ValueError(f"modes must be False, True or 'selective', got {modes!r}")
    if pricing not in LANE_PRICINGS:
        raise ValueError(f"pricing must be 'fast' or 'progress', got {pricing!r}")
    if modes and pricing != "fast":
        raise ValueError("modes=True needs pricing='fast' (the progress pricing is mode-free)")
    sharing_pairs = check_restrictions(problem, fixed_starts, sharing_pairs)
    if not (isinstance(grid, int) and grid >= 1):
        raise ValueError(f"grid must be an integer >= 1, got {grid!r}")
    began = time.perf_counter()
    deadline = began + time_limit
    cut, reason = lane_cut(problem, cut, max_states)
    if reason is not None:
        return LaneBound(math.nan, f"skipped: {reason}")
    import highspy

    selective = modes == "selective"
    # selective: modal_master expands only as far as max_states allows, so every job's modes are offered
    data, window = restricted_data(
        problem, cut, fixed_starts, sharing_pairs, bool(modes), _NO_STATE_LIMIT if selective else max_states
    )
    master: _Master
    pricer: _LanePricing | _ProgressPricing
    center: Duals | None = None
    free_best: LaneBound | None = None  # mode-aware: the mode-free LP's best bound, reported before
    reported = -math.inf  # the best value on_bound was given
    stopped = False  # on_bound returned False

    def tell(result: LaneBound) -> bool:
        nonlocal reported, stopped
        reported = max(reported, result.value)
        stopped = on_bound is not None and not on_bound(result)
        return not stopped

    def report_free(outcome: _Generation, free: _Master) -> bool:
        nonlocal free_best
        free_best = _with_others(_result(outcome, "running", free, began), free, outcome)
        return tell(free_best)

    if data.pseudo is not None:
        free_until, expand_until = modal_deadlines(began, time_limit, selective)
        master, pricer, center = modal_master(
            problem,
            data,
            window=window,
            free_until=free_until,
            smoothing=smoothing,
            cancel=cancel,
            cover_sets=cover_sets,
            selective=selective,
            expand_until=expand_until,
            max_states=max_states,
            on_free_bound=report_free,
            max_rounds=max_rounds,
        )
        if stopped and free_best is not None:  # the caller has what it needs from the mode-free LP
            return replace(free_best, status="stopped", seconds=time.perf_counter() - began)
    else:
        # the progress pricing does not take the cover rows' duals: no such rows with it
        master = root_master(problem, data, highspy, cover_rows=pricing == "fast", cover_sets=cover_sets)
        pricer = _ProgressPricing(data, grid) if pricing == "progress" else _LanePricing(data, master.covers)
        if window is not None:
            master.restrict(window)
            pricer.restrict(window)
    want = columns_per_round or max(1, master.data.priced.n)

    def report(outcome: _Generation) -> bool:
        if not outcome.best > reported:
            return True  # not above what was reported (the mode-free LP's bounds)
        return tell(_with_others(_result(outcome, "running", master, began), master, outcome))

    outcome = _column_generation(
        master,
        pricer,
        deadline=deadline,
        want=want,
        smoothing=smoothing,
        max_rounds=max_rounds,
        cancel=cancel,
        on_bound=report,
        center=center,
    )
    result = _with_others(_result(outcome, outcome.status, master, began), master, outcome)
    if free_best is not None and not result.value >= free_best.value:  # no mode-aware round in time, or below
        others = result.others if result.others is not None else free_best.others
        result = replace(result, value=free_best.value, others=others)
    if on_bound is not None and not stopped and result.value > reported:
        # the LP's optimum once converged (or the first mode-aware Lagrangian bound) comes after the rounds'
        on_bound(result)
    if gang_repeats and outcome.values is not None:
        share = master.gang_repeat_share(outcome.values)
        ceiling = master.without_gang_repeats(60.0)
        result = replace(result, gang_repeat_share=share, elementary_ceiling=math.nan if ceiling is None else ceiling)
    return result


def lane_end_windows(
    problem: SlottedProblem,
    *,
    time_limit: float = 60.0,
    cut: int | None = None,
    max_states: int = DEFAULT_MAX_LANE_STATES,
    cancel: threading.Event | None = None,
) -> tuple[LaneBound, list[int]]:
    """The lane LP (:func:`lane_bound`'s root) and, from its best duals, every job's latest end slot
    for the schedules at most as good as the problem's upper bound (canonical job order).

    :func:`formulation.discretize.discretize` bounds ``E_j ≤ UB − LB(Σ_{k≠j} E_k)`` with a static
    ``LB``; here ``LB`` is also :meth:`_Master.others_bounds`, 45-80 slots higher at 16 jobs on 8 GPUs.
    Each latest end is at most the problem's own and at least the job's earliest end, and the upper
    bound's schedule keeps to them. Where the lanes are skipped (status ``skipped: ...``) or no bound
    came in time, the problem's own latest ends are returned. Measured (docs/oracle-measurements.md, "Windows from the
    lane LP's duals"): 30-50 % fewer window slots; with them CP-SAT proved Poisson 24 x 8 seeds 1 and 2 in
    12-52 s where it needed 30 s and more than 120 s without."""
    own = [job.latest_end for job in problem.jobs]
    began = time.perf_counter()
    cut, reason = lane_cut(problem, cut, max_states)
    if reason is not None:
        return LaneBound(math.nan, f"skipped: {reason}"), own
    data = LaneData.from_problem(problem, cut)
    master, outcome = lane_lp_first(problem, data, window=None, deadline=began + time_limit, cancel=cancel)
    result = _with_others(_result(outcome, outcome.status, master, began), master, outcome)
    if result.others is None or problem.upper_bound_value is None:
        return result, own
    return result, latest_ends(problem, result.others, problem.upper_bound_value)


def latest_ends(problem: SlottedProblem, others: Sequence[float], upper_value: float) -> list[int]:
    """Every job's latest end slot (canonical order) for the schedules of objective at most
    ``upper_value`` (slots, ``Σ_j E_j``): ``E_j ≤ upper_value − ⌈others[j]⌉``, ``others[j]`` a lower bound
    on ``Σ_{k≠j} E_k`` over those schedules (:attr:`LaneBound.others`). Never later than the problem's
    own latest end (which holds the same with the static bound) nor earlier than the job's earliest end:
    a schedule of value ``upper_value`` keeps to them."""
    if len(others) != problem.num_jobs:
        raise ValueError(f"others: {len(others)} entries for {problem.num_jobs} jobs")
    value = math.floor(upper_value + 1e-9)
    # a hair off each bound for float noise, as the solve does for the bounds it offers: a bound rounded
    # up past a whole slot it only touches would cut off a schedule of value upper_value
    return [
        max(job.earliest_end, min(job.latest_end, value - math.ceil(others[j] - 1e-6 * max(1.0, abs(others[j])))))
        for j, job in enumerate(problem.jobs)
    ]


def root_master(
    problem: SlottedProblem,
    data: LaneData,
    highspy: Any,
    *,
    artificial_cost: float | None = None,
    cover_rows: bool = True,
    cover_sets: bool = True,
) -> _Master:
    """A lane master for a root's column generation (the arguments as for :class:`_Master`): the upper
    bound's lanes and every job alone, solved by the primal simplex (:meth:`_Master.use_simplex`: at a
    root lanes come every round)."""
    master = _Master(data, highspy, artificial_cost=artificial_cost, cover_rows=cover_rows, cover_sets=cover_sets)
    master.use_simplex("primal")
    master.add(lanes_of_solution(problem, data))
    master.add(single_job_lanes(data))
    return master


def lane_lp_first(
    problem: SlottedProblem,
    data: LaneData,
    *,
    window: Window | None,
    deadline: float,
    smoothing: float = DEFAULT_SMOOTHING,
    max_rounds: int = 10_000,
    cancel: threading.Event | None = None,
    artificial_cost: float | None = None,
    cover_sets: bool = True,
    on_bound: Callable[[_Generation, _Master], bool] | None = None,
) -> tuple[_Master, _Generation]:
    """The lane LP (the upper bound's lanes and every job alone to start, restricted to ``window``) by
    column generation until it converges or ``deadline``: what a variant's master (gang runs or paces)
    starts from (:meth:`_Master.start_from`, and the generation's best duals). ``on_bound`` is called with
    each improved Lagrangian bound and this master; returning ``False`` stops the generation."""
    import highspy

    master = root_master(problem, data, highspy, artificial_cost=artificial_cost, cover_sets=cover_sets)
    pricer = _LanePricing(data, master.covers)
    if window is not None:
        master.restrict(window)
        pricer.restrict(window)
    outcome = _column_generation(
        master,
        pricer,
        deadline=deadline,
        want=max(1, data.priced.n),
        smoothing=smoothing,
        max_rounds=max_rounds,
        cancel=cancel,
        on_bound=None if on_bound is None else (lambda o: on_bound(o, master)),
    )
    return master, outcome


MODE_FREE_SHARE = 1 / 3
"""The most of a mode-aware tree's time (:func:`formulation.lane_tree.lane_tree_bound`) that the mode-free
root takes before the mode-aware master starts from it (:func:`modal_master`)."""
MODE_EXPAND_SHARE = 2 / 3
"""With selective mode expansion (:func:`modal_master`), the most of the tree's time by which the root
may still expand jobs' modes (each expansion rebuilds the master)."""


def modal_deadlines(began: float, time_limit: float, selective: bool) -> tuple[float, float | None]:
    """:func:`modal_master`'s ``free_until`` and ``expand_until`` for a run of ``time_limit`` seconds from
    ``began`` (:data:`MODE_FREE_SHARE`, :data:`MODE_EXPAND_SHARE`; no expansion deadline unless selective)."""
    return began + time_limit * MODE_FREE_SHARE, began + time_limit * MODE_EXPAND_SHARE if selective else None


MODE_COMBINATIONS = 256
"""A mode-free lane is given modes (:func:`modal_lane`) only where its jobs' mode combinations are at most
this many."""


def modal_lane(data: LaneData, lane: Lane, fixed: dict[int, int] | None = None) -> Lane | None:
    """A mode-free lane as a mode-aware one (``data`` mode-aware): each of its jobs in one mode, chosen
    among the combinations in which every overlapping pair may share and every run's length and window
    suit its mode, least total work first (job ``j`` in ``fixed[j]`` where given); ``None`` where none does
    (or there are more than :data:`MODE_COMBINATIONS`)."""
    pseudo = data.pseudo
    if pseudo is None:
        raise ValueError("modal_lane needs mode-aware lane data")
    priced = pseudo.data
    jobs = sorted({e.job for e in lane.entries})
    # one mode per distinct pseudo-job (a collapsed job's modes are all one)
    distinct = [[m for m, p in enumerate(pseudo.of_mode[j]) if pseudo.of_mode[j].index(p) == m] for j in jobs]
    choices = [[fixed[j]] if fixed and j in fixed else modes for j, modes in zip(jobs, distinct, strict=True)]
    if math.prod(len(c) for c in choices) > MODE_COMBINATIONS:
        return None
    runs = [(e.job, e.start, e.end) for e in lane.entries]
    overlapping = [
        (x, y) for a, x in enumerate(runs) for y in runs[a + 1 :] if x[0] != y[0] and min(x[2], y[2]) > max(x[1], y[1])
    ]
    best: tuple[float, dict[int, int]] | None = None
    for combination in itertools.product(*choices):
        modes = dict(zip(jobs, combination, strict=True))
        of = {j: pseudo.of_mode[j][m] for j, m in modes.items()}
        if any(
            not (
                priced.min_slots[of[j]] <= end - start <= priced.max_slots[of[j]]
                and start <= priced.last_start[of[j]]
                and end <= priced.last_end[of[j]]
            )
            for j, start, end in runs
        ):
            continue
        if any(not priced.shareable[of[x[0]], of[y[0]]] for x, y in overlapping):
            continue
        work = sum(float(priced.work[of[j]]) for j, _, _ in runs)
        if best is None or work < best[0]:
            best = (work, modes)
    return None if best is None else lane_of_runs(data, runs, best[1])


def modal_duals(free: _Master, duals: Duals, master: _Master) -> Duals:
    """Mode-free duals (of ``free``'s rows) as duals of the mode-aware ``master`` (same jobs, same cover
    rows in the same order) whose Lagrangian is at least as high: ``μ'_j = μ_j + η_j·w_j`` and
    ``η_p = η_j·w_j / w_p`` for each pseudo-job ``p`` of job ``j`` (``w_j`` its least work). A mode-aware
    lane is worth then at most the mode-free lane of the same runs (its progress in the job's least-work
    units is at least ``w_j / w_p`` times its own), so the best lane is worth no more and every other term
    of the Lagrangian is the same."""
    data = master.data
    pseudo = data.pseudo
    if pseudo is None or free.data.pseudo is not None:
        raise ValueError("modal_duals maps mode-free duals to a mode-aware master")
    least = free.data.work
    mu = duals.mu + duals.eta * least
    eta = duals.eta[pseudo.owner] * least[pseudo.owner] / np.maximum(pseudo.data.work, 1e-12)
    return master.duals(mu=mu, eta=eta, nu=duals.nu)


def mode_conflicts(problem: SlottedProblem, data: LaneData, lanes: Iterable[Lane]) -> set[int]:
    """The jobs whose collapsed pseudo-job (mode-free where ``data`` is) shares in one of ``lanes`` in a
    way its least-work mode could not: the pair's modes (a collapsed job's least-work one) do not fit on one
    GPU together. There the lane charged the job a faster speed than its run in one mode can have, so these
    are the jobs whose modes to expand (:func:`modal_master`'s ``selective``)."""
    pseudo = data.pseudo
    least = [job.least_work_mode for job in problem.jobs]

    def mode_of(entry: LaneEntry) -> tuple[int, bool]:
        if pseudo is None:
            return least[entry.job], len(problem.jobs[entry.job].modes) > 1
        p = pseudo.of_mode[entry.job][entry.mode]
        return int(pseudo.mode[p]), bool(pseudo.collapsed[p])

    found: set[int] = set()
    for lane in lanes:
        entries = lane.entries
        for a, x in enumerate(entries):
            for y in entries[a + 1 :]:
                if x.job == y.job or min(x.end, y.end) <= max(x.start, y.start):
                    continue
                (mx, cx), (my, cy) = mode_of(x), mode_of(y)
                if (cx or cy) and not problem.memory_fits(x.job, mx, y.job, my):
                    found |= {e.job for e, c in ((x, cx), (y, cy)) if c}
    return found


def expanded_duals(old: _Master, duals: Duals, new: _Master) -> Duals:
    """Duals of a mode-aware master (``old``) as duals of ``new``, the same jobs and cover rows with more
    of them expanded: ``μ`` kept and ``η_p = η_q·w_q / w_p`` for the pseudo-job ``q`` of ``old`` that ``p``
    refines. The start value ``μ_j − η_p·w_p`` is unchanged and a lane of ``new`` is worth at most the same
    runs in ``old`` (a collapsed job progresses at least ``w_q / w_p`` times as much), so the Lagrangian at
    the mapped duals is at least ``old``'s (as :func:`modal_duals`)."""
    before, after = old.data.pseudo, new.data.pseudo
    if before is None or after is None:
        raise ValueError("expanded_duals maps a mode-aware master's duals to another's")
    refines = np.array(
        [before.of_mode[int(j)][int(m)] for j, m in zip(after.owner, after.mode, strict=True)], dtype=np.int64
    )
    eta = duals.eta[refines] * before.data.work[refines] / np.maximum(after.data.work, 1e-12)
    return new.duals(mu=duals.mu, eta=eta, nu=duals.nu)


def modal_master(
    problem: SlottedProblem,
    data: LaneData,
    *,
    window: Window | None,
    free_until: float,
    smoothing: float = DEFAULT_SMOOTHING,
    cancel: threading.Event | None = None,
    artificial_cost: float | None = None,
    cover_sets: bool = True,
    selective: bool = False,
    expand_until: float | None = None,
    max_states: int = DEFAULT_MAX_LANE_STATES,
    on_free_bound: Callable[[_Generation, _Master], bool] | None = None,
    max_rounds: int = 10_000,
) -> tuple[_Master, _LanePricing, Duals | None]:
    """A mode-aware master (``data`` mode-aware) that starts from the mode-free root: the mode-free lane LP
    by column generation until it converges or ``free_until``, then a mode-aware master with its cover
    rows, its lanes in use given modes (:func:`modal_lane`), the upper bound's lanes and every pseudo-job
    alone, and its best duals mapped (:func:`modal_duals`) as the first point to price: so the mode-aware
    bound starts at the mode-free one, and the mode-aware pricing starts where the LP is already tight.

    ``selective``: expand only the jobs the LP needs (:func:`mode_conflicts` of its lanes in use), the
    others one collapsed pseudo-job each; after each mode-aware LP converges (by ``expand_until``), the
    jobs its lanes now conflict on are expanded too and the master rebuilt from its lanes in use and its
    duals (:func:`expanded_duals`), until no lane conflicts, the time is up or the pseudo-jobs' DP would
    pass ``max_states`` cells. The master it returns may be mode-free (no lane in use conflicts, or no
    expansion within ``max_states``). Returns the master, its pricing and the point to price first
    (``None`` if no root proved anything). ``on_free_bound`` and ``max_rounds``: :func:`lane_lp_first`'s
    ``on_bound`` and ``max_rounds`` for the mode-free root; where ``on_free_bound`` stops it, the mode-free
    master is returned as it is."""
    import highspy

    real = replace(data, pseudo=None)
    free, outcome = lane_lp_first(
        problem,
        real,
        window=window,
        deadline=free_until,
        smoothing=smoothing,
        cancel=cancel,
        artificial_cost=artificial_cost,
        cover_sets=cover_sets,
        max_rounds=max_rounds,
        on_bound=on_free_bound,
    )
    current, current_pricer = free, None
    expanded: set[int] = set()
    while outcome.status != "stopped":  # on_free_bound asked to stop: the mode-free root is returned
        values = outcome.values
        used = (
            []
            if values is None
            else [lane for lane, col in zip(current.lanes, current.lane_cols, strict=True) if values[col] > 1e-9]
        )
        if selective:
            more = mode_conflicts(problem, current.data, used) - expanded
            if not more:
                break
            pseudo = PseudoJobs.of(problem, real, expand=expanded | more)
            if pseudo is None or pseudo.data.n * (real.horizon + 1) ** 2 > max_states:
                break  # nothing to expand, or the DP's arrays past the limit: keep what is expanded
            expanded |= more
            target = replace(real, pseudo=pseudo)
        else:
            target = data
        master = root_master(problem, target, highspy, artificial_cost=artificial_cost, cover_sets=cover_sets)
        if current.covers is not None and master.covers is not None:
            master.add_cover_rows(current.covers.row_list())
        old_pseudo = current.data.pseudo
        carried = []
        for lane in used:
            fixed = (
                None
                if old_pseudo is None
                else {
                    e.job: e.mode for e in lane.entries if not old_pseudo.collapsed[old_pseudo.of_mode[e.job][e.mode]]
                }
            )
            moded = modal_lane(target, lane, fixed)
            if moded is not None:
                carried.append(moded)
        master.add(carried)
        pricer = _LanePricing(target, master.covers)
        if window is not None:
            master.restrict(window)
            pricer.restrict(window)
        center = outcome.center
        if center is not None:
            mapping = modal_duals if old_pseudo is None else expanded_duals
            center = mapping(current, center, master)
        if not selective or expand_until is None or time.perf_counter() >= expand_until:
            return master, pricer, center
        current, current_pricer = master, pricer
        outcome = _column_generation(
            master,
            pricer,
            deadline=expand_until,
            want=max(1, target.priced.n),
            smoothing=smoothing,
            max_rounds=10_000,
            cancel=cancel,
            center=center,
        )
        if outcome.status != "optimal":
            break
    if current_pricer is None:  # the mode-free LP conflicts nowhere: it is the root
        pricer = _LanePricing(real, free.covers)
        if window is not None:
            pricer.restrict(window)
        return free, pricer, outcome.center
    return current, current_pricer, outcome.center


def generation_bound(
    master: _Master,
    pricer: _LanePricing,
    *,
    began: float,
    time_limit: float,
    smoothing: float,
    max_rounds: int,
    cancel: threading.Event | None,
    on_bound: Callable[[LaneBound], bool] | None,
    max_separations: int = MAX_SEPARATIONS,
    center: Duals | None = None,
) -> LaneBound:
    """:func:`_column_generation` on a master and pricing the caller built (a variant's, e.g. with gang
    runs or paces) until ``began + time_limit``, ``n`` columns asked per round, as a :class:`LaneBound`
    (``on_bound`` as for :func:`lane_bound`)."""
    outcome = _column_generation(
        master,
        pricer,
        deadline=began + time_limit,
        want=max(1, master.data.priced.n),
        smoothing=smoothing,
        max_rounds=max_rounds,
        cancel=cancel,
        on_bound=None if on_bound is None else (lambda o: on_bound(_result(o, "running", master, began))),
        max_separations=max_separations,
        center=center,
    )
    return _result(outcome, outcome.status, master, began)


def _with_others(result: LaneBound, master: _Master, outcome: _Generation) -> LaneBound:
    """``result`` with :attr:`LaneBound.others` from the generation's best duals (the lane master's
    own; a variant's master has other rows)."""
    if outcome.center is None or not math.isfinite(outcome.center_top):
        return result
    others = master.others_bounds(outcome.center, outcome.center_top)
    return replace(result, others=tuple(float(x) for x in others))


def _result(outcome: _Generation, status: str, master: _Master, began: float) -> LaneBound:
    return LaneBound(
        value=outcome.best if math.isfinite(outcome.best) else math.nan,
        status=status,
        master_value=outcome.master_value,
        rounds=outcome.rounds,
        columns=master.column_count(),
        seconds=time.perf_counter() - began,
        pricing_seconds=outcome.pricing_seconds,
        master_seconds=outcome.master_seconds,
        horizon=master.data.horizon,
        history=tuple(outcome.history),
        mode_aware=master.data.pseudo is not None,
    )
