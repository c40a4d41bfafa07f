"""A proven lower bound on total JCT for a whole trace: jobs with arrivals, hundreds to thousands of them.

The exact model (``formulation.pyomo_model``, ``solvers``) and the lane relaxation (``formulation.lanes``)
certify instances of tens of jobs. A trace replay has hundreds, spread over days, and policies are run
on it in continuous time. This module bounds ``Σ_j (E_j − a_j)`` from below for such an instance, in
the semantics of SPEC.md (the validator's), for any schedule any policy can produce: preemptive or not,
any placement, any sub-batch, any sharing up to the cluster's capacity ``C``.

The relaxation (docs/oracle.md, "Certified gaps at trace scale")
------------------------------------------------------------------
Each job ``j`` has its arrival ``r_j``, its shortest isolated duration ``p_j``
(:meth:`Instance.isolated_duration`: the fastest mode on the fewest nodes) and an **effective area**
``A_j``: the fewest GPU-seconds one unit of its work can cost. A GPU holding ``k`` jobs gives each a
``1/k`` share of its time; a job sharing runs at rate ``1/(p_j·ξ)`` with ``ξ`` at least its ``(k−1)``-th
smallest ratio to any job it may share with (memory, both ratios defined). So
``A_j = G_j·p_j·min_{k ≤ C} ξ_j^{(k−1)}/k`` (``ξ^{(0)} = 1``). The cluster delivers at most ``#GPUs``
GPU-seconds per second, and a job progresses at most at rate ``1/p_j``.

* **Interval LP** (by Lagrangian duality). Time is cut into intervals ``[τ_t, τ_{t+1})`` at the
  arrivals plus a refinement, and a last interval without end. ``x_{jt}`` is the share of job ``j``'s
  work done in interval ``t``: ``Σ_t x_{jt} = 1``; nothing before the interval ``r_j`` falls in;
  ``x_{jt}·p_j ≤ τ_{t+1} − τ_t`` (no faster than alone); ``Σ_j A_j·x_{jt} ≤ #GPUs·(τ_{t+1} − τ_t)``.
  A job's *mean busy time* is at least ``Σ_t x_{jt}·τ_t``, and because its rate is capped its
  completion is at least that plus ``p_j/2`` (Goemans' single-machine argument). Minimise the sum.
  For ``C = 2``, **pairing cuts** (:func:`_separate`): per interval, weights ``v_c ≤ 1`` per class
  with ``v_c/ξ_{c|d} + v_d/ξ_{d|c} ≤ 1`` for every pair of classes that may share give the valid
  row ``Σ_j v_{c(j)}·G_j·p_j·x_{jt} ≤ #GPUs·|I_t|``; violated ones are added and the LP re-solved.
  The **certificate** is the Lagrangian function with the capacity rows priced by ``λ ≥ 0``: each job
  then solves a fractional knapsack over its intervals, computed exactly here, so the number does
  not rest on the LP solver's tolerances, and a stopped solve still certifies what its prices give
  (a subgradient ascent continues where the LP could not finish).
* **Split LP** (:func:`split_lp_bound`): work done alone and work done sharing apart, the second
  slower and cheaper, with the completion-time price of sharing (``p_j·(ξ_j − 1)·V_j²/2`` for a
  job sharing a fraction ``V_j``); certified by :func:`safe_lp_bound` from any duals.
* **Order statistics** (always computed, costs ``O(n log n)``): the ``k``-th completion in any schedule
  is at least the ``k``-th smallest ``r_j + p_j`` and at least the ``k``-th completion of SRPT on one
  machine of speed ``#GPUs`` processing the areas (Chekuri, Motwani, Natarajan & Stein 2001): the sum
  over ``k`` of the larger of the two.

The reported bound is the largest of them. It ignores that partners must be present together on the
same GPUs, that gangs need all their GPUs at once (the relaxation lets them time-slice perfectly) and
placement; that is where its slack is (docs/oracle.md measures it against the policies).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.progress import SPEC_PROGRESS

#: Intervals per job in the default grid (arrivals plus a refinement), capped by ``max_intervals``.
INTERVALS_PER_JOB = 6
#: Most jobs × intervals cells the default grid allows (the Lagrangian's dense arrays, HiGHS's LP).
MAX_CELLS = 4_000_000
#: Share of the time limit for the interval LP and its cuts when the split LPs follow.
LAGRANGIAN_SHARE = 0.3
#: Most (job, interval) cells of the split LP with separate time caps on the first grid (dual
#: simplex: 4 s at 330,000 cells); beyond, it gets a coarser grid.
SPLIT_CELLS = 1_000_000
#: Share of the time left that the interval LP and its cuts get on a split LP's own, coarser grid.
COARSE_CUT_SHARE = 0.25
#: Cells per second of time left for the split LP with joint time caps (interior point: 15-40 s at
#: 210,000-230,000 cells on one core).
JOINT_CELLS_PER_SECOND = 4_500


@dataclass(frozen=True)
class TraceJobs:
    """The per-job data the bound needs, as arrays in the instance's job order."""

    ids: tuple[str, ...]
    arrival: np.ndarray  # r_j, seconds
    duration: np.ndarray  # p_j, seconds: fastest isolated duration
    area: np.ndarray  # A_j, GPU-seconds: fewest GPU-seconds the whole job can cost
    num_gpus: int  # of the cluster
    alone_work: np.ndarray = field(default_factory=lambda: np.zeros(0))  # G_j·p_j, GPU-seconds alone
    job_class: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # class of each job
    #: (c, d, ξ_{c|d}, ξ_{d|c}) for every pair of classes that may share a GPU (c = d: two jobs of c);
    #: only filled when ``C = 2`` (the pairing cuts are for pairs)
    class_pairs: tuple[tuple[int, int, float, float], ...] = ()
    #: GPU-seconds one unit of work costs when done sharing (min over 2 <= k <= C; inf: never shares)
    shared_area: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: ξ to the best partner: work done sharing runs at 1/(p_j·ξ) at most (inf: never shares)
    min_ratio: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _min_memory(instance: Instance, job_id: str) -> float:
    """Least GPU memory the job needs in any sub-batch (fewest bytes: the most accumulation steps)."""
    return min(mode.memory_gib for mode in instance.modes(job_id))


def trace_jobs(instance: Instance) -> TraceJobs:
    """Arrivals, shortest durations and effective areas of every job (module docstring).

    Jobs with the same profile, batch size and GPU count are one class, so the partner ratios are
    looked up per pair of classes, not per pair of jobs.
    """
    capacity = instance.cluster.capacity
    memory = instance.cluster.gpu_memory_gib
    classes: dict[tuple[str, int], list[int]] = {}
    for index, job in enumerate(instance.jobs):
        classes.setdefault((job.profile, job.batch_size), []).append(index)
    keys = list(classes)
    position = {key: index for index, key in enumerate(keys)}
    representative = {key: instance.jobs[members[0]] for key, members in classes.items()}
    class_memory = {key: _min_memory(instance, representative[key].id) for key in keys}
    pairs: list[tuple[int, int, float, float]] = []
    # factor[key] = min over k <= C of (the (k-1)-th smallest ratio to a possible partner) / k
    factor: dict[tuple[str, int], float] = {}
    shared_factor: dict[tuple[str, int], float] = {}  # the same over k >= 2 only (inf: never shares)
    smallest_ratio: dict[tuple[str, int], float] = {}  # ξ to the best partner (inf: never shares)
    for key in keys:
        victim = representative[key]
        partners: list[tuple[float, int]] = []  # (ratio, how many jobs)
        if capacity >= 2:
            for other_key in keys:
                count = len(classes[other_key]) - (1 if other_key == key else 0)
                if count <= 0:
                    continue
                other = representative[other_key]
                forward = instance.ratio(victim, other)
                backward = instance.ratio(other, victim)
                if forward is None or backward is None:
                    continue
                if class_memory[key] + class_memory[other_key] > memory + 1e-9:
                    continue
                partners.append((max(1.0, forward), count))
                c, d = position[key], position[other_key]
                if capacity == 2 and c <= d:
                    pairs.append((c, d, max(1.0, forward), max(1.0, backward)))
        partners.sort()
        shared = math.inf
        taken = 0
        cursor = 0
        for k in range(2, capacity + 1):
            # the (k-1)-th smallest ratio over distinct partner jobs
            while cursor < len(partners) and taken + partners[cursor][1] < k - 1:
                taken += partners[cursor][1]
                cursor += 1
            if cursor >= len(partners):
                break
            shared = min(shared, partners[cursor][0] / k)
        factor[key] = min(1.0, shared)
        shared_factor[key] = shared
        smallest_ratio[key] = partners[0][0] if partners else math.inf
    arrival = np.array([job.arrival for job in instance.jobs], dtype=float)
    duration = np.array([instance.isolated_duration(job) for job in instance.jobs], dtype=float)
    gpus = np.array([job.num_gpus for job in instance.jobs], dtype=float)
    scale = np.array([factor[(job.profile, job.batch_size)] for job in instance.jobs], dtype=float)
    return TraceJobs(
        ids=tuple(job.id for job in instance.jobs),
        arrival=arrival,
        duration=duration,
        area=gpus * duration * scale,
        num_gpus=instance.cluster.num_gpus,
        alone_work=gpus * duration,
        job_class=np.array([position[(job.profile, job.batch_size)] for job in instance.jobs], dtype=int),
        shared_area=gpus * duration * np.array([shared_factor[(j.profile, j.batch_size)] for j in instance.jobs]),
        min_ratio=np.array([smallest_ratio[(job.profile, job.batch_size)] for job in instance.jobs], dtype=float),
        class_pairs=tuple(pairs),
    )


# --- order statistics ---------------------------------------------------------------------------------
def srpt_completions(release: np.ndarray, work: np.ndarray, speed: float) -> np.ndarray:
    """Completion times, sorted, of SRPT on one machine of ``speed`` (preemptive, with releases)."""
    order = np.argsort(release, kind="stable")
    heap: list[tuple[float, int]] = []
    done: list[float] = []
    now = 0.0
    cursor = 0
    n = len(order)
    while cursor < n or heap:
        if not heap:
            now = max(now, float(release[order[cursor]]))
        while cursor < n and release[order[cursor]] <= now:
            j = int(order[cursor])
            heapq.heappush(heap, (float(work[j]) / speed, j))
            cursor += 1
        remaining, j = heapq.heappop(heap)
        next_release = float(release[order[cursor]]) if cursor < n else math.inf
        if now + remaining <= next_release:
            now += remaining
            done.append(now)
        else:
            heapq.heappush(heap, (remaining - (next_release - now), j))
            now = next_release
    return np.array(done)


def order_statistics_bound(jobs: TraceJobs) -> float:
    """``Σ_k max(k-th SRPT completion on a speed-#GPUs machine, k-th smallest r_j + p_j)`` (a bound on ``Σ E_j``)."""
    if len(jobs.ids) == 0:
        return 0.0
    srpt = srpt_completions(jobs.arrival, jobs.area, float(jobs.num_gpus))
    alone = np.sort(jobs.arrival + jobs.duration)
    return float(np.maximum(srpt, alone).sum())


# --- the interval LP and its Lagrangian -------------------------------------------------------------
def interval_grid(jobs: TraceJobs, max_intervals: int) -> np.ndarray:
    """Interval boundaries ``τ_0 < … < τ_K``: every arrival, points after each arrival at fractions of
    that job's duration (where short jobs complete in good schedules), then a uniform refinement of
    the busy span; the last boundary opens the interval without end (past an order-statistics
    estimate of the last completion). Beyond ``max_intervals`` the points are thinned evenly, arrivals
    included (a job may then use the interval its arrival falls in: still a relaxation)."""
    start = float(jobs.arrival.min())
    srpt = srpt_completions(jobs.arrival, jobs.area, float(jobs.num_gpus))
    end = max(float(srpt.max()), float((jobs.arrival + jobs.duration).max()))
    end = start + 1.5 * (end - start)
    points = [jobs.arrival]
    for fraction in (0.5, 1.0, 2.0, 4.0):
        points.append(jobs.arrival + fraction * jobs.duration)
    base = np.unique(np.concatenate(points))
    base = base[base < end]
    budget = max(0, max_intervals - len(base))
    uniform = np.linspace(start, end, budget + 2) if budget else np.array([start, end])
    grid = np.unique(np.concatenate([base, uniform]))
    if len(grid) > max_intervals + 1:
        arrivals = np.unique(jobs.arrival)
        if len(arrivals) <= max_intervals // 2:
            # keep every arrival (no job then shares its first interval with earlier time) and thin the rest
            others = np.setdiff1d(grid, arrivals)
            keep = np.linspace(0, len(others) - 1, max(2, max_intervals - len(arrivals))).round().astype(int)
            grid = np.unique(np.concatenate([arrivals, others[keep], [start, end]]))
        else:
            keep = np.linspace(0, len(grid) - 1, max_intervals + 1).round().astype(int)
            grid = np.unique(np.concatenate([grid[keep], [start, end]]))
    return grid


def _grid_with_cells(jobs: TraceJobs, cells: float) -> _IntervalData:
    """The default grid thinned until it has at most about ``cells`` (job, interval) cells."""
    intervals = max(50, int(cells / max(1, len(jobs.ids))))
    data = _interval_data(jobs, interval_grid(jobs, intervals))
    for _ in range(4):
        have = float((len(data.length) - data.first).sum())
        if have <= cells * 1.05 or intervals <= 50:
            break
        intervals = max(50, int(intervals * cells / have * 0.95))
        data = _interval_data(jobs, interval_grid(jobs, intervals))
    return data


@dataclass
class _IntervalData:
    grid: np.ndarray  # τ_0..τ_K; interval t = [τ_t, τ_{t+1}) for t < K, plus the open tail K
    first: np.ndarray  # per job: first interval it may use
    length: np.ndarray  # per interval (K of them): τ_{t+1} − τ_t

    @property
    def num_intervals(self) -> int:
        return len(self.grid)  # K finite intervals and the tail


def _interval_data(jobs: TraceJobs, grid: np.ndarray) -> _IntervalData:
    # a job may use the interval its arrival falls in and every later one (an arrival on a grid point
    # starts its interval; one inside an interval may use it, at the interval's start cost)
    first = np.searchsorted(grid, jobs.arrival, side="right") - 1
    return _IntervalData(grid=grid, first=np.clip(first, 0, len(grid) - 1), length=np.diff(grid))


@dataclass
class CapacityRows:
    """The capacity rows of the interval LP: row ``r`` reads ``Σ_j coef_r[j]·x_{j,t_r} ≤ #GPUs·|I_{t_r}|``.

    The first ``K`` rows are the area rows (``coef = A_j``, one per finite interval); the pairing cuts
    (:func:`_separate`) follow.
    """

    interval: np.ndarray  # t_r per row
    coef: np.ndarray  # (rows, jobs)

    @classmethod
    def area_rows(cls, jobs: TraceJobs, num_finite: int) -> CapacityRows:
        return cls(np.arange(num_finite), np.tile(jobs.area, (num_finite, 1)))

    def extend(self, interval: np.ndarray, coef: np.ndarray) -> None:
        self.interval = np.concatenate([self.interval, interval])
        self.coef = np.vstack([self.coef, coef])

    def __len__(self) -> int:
        return len(self.interval)


def lagrangian_value(
    jobs: TraceJobs, data: _IntervalData, prices: np.ndarray, rows: CapacityRows | None = None
) -> tuple[float, np.ndarray]:
    """The Lagrangian function at capacity prices ``prices >= 0`` (one per capacity row), exactly.

    Returns
    -------
    (value, usage)
        The bound on ``Σ_j E_j`` and each row's left-hand side at the minimiser (for the subgradient).
    """
    num_finite = len(data.length)
    if rows is None:
        rows = CapacityRows.area_rows(jobs, num_finite)
    prices = np.maximum(prices, 0.0)
    # per job and finite interval: the priced cost of one unit of the job's work there
    surcharge = np.zeros((len(jobs.ids), num_finite))
    np.add.at(surcharge.T, rows.interval, prices[:, None] * rows.coef)
    starts = data.grid  # mass in interval t costs at least its start τ_t (the tail: τ_K)
    total = 0.0
    shares = np.zeros((len(jobs.ids), num_finite))
    for j in range(len(jobs.ids)):
        first = int(data.first[j])
        p = float(jobs.duration[j])
        cost = starts[first:].copy()
        cost[: num_finite - first] += surcharge[j, first:]
        room = np.empty(len(cost))
        room[: num_finite - first] = data.length[first:] / p if p > 0 else 1.0
        room[num_finite - first :] = 1.0  # the tail has no end
        order = np.argsort(cost, kind="stable")
        filled = np.cumsum(room[order])
        # cheapest first: everything up to the interval where the running total reaches 1
        stop = min(int(np.searchsorted(filled, 1.0 - 1e-12, side="left")), len(order) - 1)
        take = room[order[: stop + 1]].copy()
        take[-1] = 1.0 - (filled[stop - 1] if stop > 0 else 0.0)
        total += float(np.dot(cost[order[: stop + 1]], take)) + p / 2.0
        chosen = order[: stop + 1]
        finite = chosen < num_finite - first
        shares[j, chosen[finite] + first] = take[finite]
    usage = np.einsum("rj,jr->r", rows.coef, shares[:, rows.interval])
    value = total - float(np.dot(prices, data.length[rows.interval])) * jobs.num_gpus
    return value, usage


class _IntervalLP:
    """The interval LP in HiGHS, with its capacity rows; cuts are added as rows (warm re-solves)."""

    def __init__(self, jobs: TraceJobs, data: _IntervalData, threads: int) -> None:
        import highspy

        self.hs = highspy
        self.jobs = jobs
        self.data = data
        n = len(jobs.ids)
        num_finite = len(data.length)
        job_of = np.concatenate([np.full(num_finite + 1 - int(f), j) for j, f in enumerate(data.first)])
        interval_of = np.concatenate([np.arange(int(f), num_finite + 1) for f in data.first])
        self.job_of, self.interval_of = job_of, interval_of
        is_tail = interval_of == num_finite
        self.finite = ~is_tail
        num_columns = len(job_of)
        upper = np.ones(num_columns)
        length = data.length[np.minimum(interval_of, num_finite - 1)]
        upper[~is_tail] = np.minimum(1.0, length[~is_tail] / np.maximum(jobs.duration[job_of[~is_tail]], 1e-12))
        # CSC: each column has its job row (1) and, unless it is the tail, its interval's area row (A_j)
        rows_per_column = np.where(is_tail, 1, 2)
        starts = np.concatenate([[0], np.cumsum(rows_per_column)]).astype(np.int32)
        index = np.empty(int(starts[-1]), dtype=np.int32)
        value = np.empty(int(starts[-1]))
        index[starts[:-1]] = job_of
        value[starts[:-1]] = 1.0
        second = starts[:-1][~is_tail] + 1
        index[second] = n + interval_of[~is_tail]
        value[second] = jobs.area[job_of[~is_tail]]
        lp = highspy.HighsLp()
        lp.num_col_ = num_columns
        lp.num_row_ = n + num_finite
        lp.col_cost_ = data.grid[interval_of]
        lp.col_lower_ = np.zeros(num_columns)
        lp.col_upper_ = upper
        lp.row_lower_ = np.concatenate([np.ones(n), np.full(num_finite, -highspy.kHighsInf)])
        lp.row_upper_ = np.concatenate([np.ones(n), data.length * jobs.num_gpus])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = starts
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = value
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self.h.setOptionValue("threads", max(1, threads))
        self.h.passModel(lp)
        self.rows = CapacityRows.area_rows(jobs, num_finite)
        # column of (job, finite interval), -1 where the job may not run
        self.column = -np.ones((n, num_finite), dtype=np.int64)
        finite_columns = np.flatnonzero(~is_tail)
        self.column[job_of[~is_tail], interval_of[~is_tail]] = finite_columns

    def solve(self, time_limit: float) -> str:
        self.h.setOptionValue("time_limit", self.h.getRunTime() + max(0.05, float(time_limit)))
        self.h.run()
        return str(self.h.modelStatusToString(self.h.getModelStatus()))

    @property
    def optimal(self) -> bool:
        return bool(self.h.getModelStatus() == self.hs.HighsModelStatus.kOptimal)

    def objective(self) -> float:
        return float(self.h.getInfo().objective_function_value)

    def shares(self) -> np.ndarray:
        """``x_{jt}`` over the finite intervals (jobs × intervals)."""
        x = np.asarray(self.h.getSolution().col_value)
        shares = np.zeros(self.column.shape)
        shares[self.job_of[self.finite], self.interval_of[self.finite]] = x[self.finite]
        return shares

    def prices(self) -> np.ndarray | None:
        """Every capacity row's price ``λ_r >= 0`` (HiGHS's duals of ``≤`` rows are ``<= 0``), or None."""
        solution = self.h.getSolution()
        if not solution.dual_valid:
            return None
        n = len(self.jobs.ids)
        return np.maximum(-np.asarray(solution.row_dual)[n:], 0.0)

    def add_cuts(self, interval: np.ndarray, coef: np.ndarray) -> None:
        starts: list[int] = []
        index: list[int] = []
        value: list[float] = []
        for t, row in zip(interval, coef, strict=True):
            members = np.flatnonzero((row > 0) & (self.column[:, t] >= 0))
            starts.append(len(index))
            index.extend(self.column[members, t].tolist())
            value.extend(row[members].tolist())
        self.h.addRows(
            len(interval),
            np.full(len(interval), -self.hs.kHighsInf),
            self.data.length[interval] * self.jobs.num_gpus,
            len(index),
            np.array(starts, dtype=np.int32),
            np.array(index, dtype=np.int32),
            np.array(value, dtype=float),
        )
        self.rows.extend(interval, coef)


def _separate(jobs: TraceJobs, data: _IntervalData, shares: np.ndarray, highspy: Any) -> tuple[np.ndarray, np.ndarray]:
    """Pairing cuts violated by ``shares`` (``C = 2``): per interval, the weights ``v_c`` of classes that
    maximise ``Σ_c v_c·W_c`` (``W_c``: class ``c``'s alone-GPU-seconds of work there) subject to
    ``v_c ≤ 1`` and ``v_c/ξ_{c|d} + v_d/ξ_{d|c} ≤ 1`` for every pair that may share (``c = d``: two jobs
    of the class). One GPU-second delivers at most 1 of weighted work whoever holds it, so
    ``Σ_j v_{c(j)}·G_j·p_j·x_{jt} ≤ #GPUs·|I_t|`` holds for every schedule; a cut where it is violated.
    """
    num_classes = int(jobs.job_class.max()) + 1 if len(jobs.job_class) else 0
    work = np.zeros((num_classes, shares.shape[1]))
    np.add.at(work, jobs.job_class, shares * jobs.alone_work[:, None])
    capacity = data.length * jobs.num_gpus
    intervals: list[int] = []
    coefs: list[np.ndarray] = []
    candidates = np.flatnonzero(work.sum(axis=0) > capacity * (1 + 1e-7))
    pairs = np.array(jobs.class_pairs, dtype=float).reshape(-1, 4)
    for t in candidates:
        active = np.flatnonzero(work[:, t] > 1e-12 * capacity[t])
        local = {int(c): i for i, c in enumerate(active)}
        keep = [k for k in range(len(pairs)) if int(pairs[k, 0]) in local and int(pairs[k, 1]) in local]
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        lp = highspy.HighsLp()
        lp.num_col_ = len(active)
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.col_cost_ = work[active, t] / capacity[t]
        lp.col_lower_ = np.zeros(len(active))
        lp.col_upper_ = np.ones(len(active))
        lp.num_row_ = len(keep)
        lp.row_lower_ = np.full(len(keep), -highspy.kHighsInf)
        lp.row_upper_ = np.ones(len(keep))
        starts: list[int] = []
        index: list[int] = []
        value: list[float] = []
        for k in keep:
            c, d, forward, backward = pairs[k]
            starts.append(len(index))
            if int(c) == int(d):
                index.append(local[int(c)])
                value.append(1.0 / forward + 1.0 / backward)
            else:
                index.extend([local[int(c)], local[int(d)]])
                value.extend([1.0 / forward, 1.0 / backward])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array([*starts, len(index)], dtype=np.int32)
        lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(value, dtype=float)
        h.passModel(lp)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            continue
        weights = np.clip(np.asarray(h.getSolution().col_value), 0.0, 1.0)
        # the weights must satisfy every pair exactly (a cut must hold for all schedules): scale down
        # by the worst pair's excess, which the solver's tolerance may leave
        worst = 1.0
        for k in keep:
            c, d, forward, backward = pairs[k]
            a, b = weights[local[int(c)]], weights[local[int(d)]]
            worst = max(worst, a / forward + b / backward if int(c) != int(d) else a * (1 / forward + 1 / backward))
        weights = weights / worst
        if float(np.dot(weights, work[active, t])) <= capacity[t] * (1 + 1e-6):
            continue
        per_class = np.zeros(num_classes)
        per_class[active] = weights
        intervals.append(int(t))
        coefs.append(per_class[jobs.job_class] * jobs.alone_work)
    if not intervals:
        return np.zeros(0, dtype=int), np.zeros((0, len(jobs.ids)))
    return np.array(intervals, dtype=int), np.vstack(coefs)


@dataclass
class _Priced:
    """What :func:`_cut_and_price` leaves: the best certified value, its prices, the rows, the status."""

    value: float
    prices: np.ndarray
    rows: CapacityRows
    status: str
    rounds: int
    lp_value: float | None  # the last optimal LP's objective as HiGHS reports it (plus Σ p/2)


def _cut_and_price(
    jobs: TraceJobs,
    data: _IntervalData,
    deadline: float,
    threads: int,
    pairing_cuts: bool,
    say: Callable[[str], None],
) -> _Priced:
    """The interval LP on ``data`` with pairing cuts added while violated, until ``deadline``; the
    Lagrangian certificate at every round's prices, the best kept."""
    rows = CapacityRows.area_rows(jobs, len(data.length))
    prices = np.zeros(len(rows))
    best = lagrangian_value(jobs, data, prices, rows)[0]
    result = _Priced(best, prices, rows, "skipped", 0, None)
    if deadline - time.monotonic() <= 0.5:
        return result
    model = _IntervalLP(jobs, data, threads)
    result.rows = model.rows
    evaluation_time = 0.0
    while True:
        # keep time for one more evaluation of the Lagrangian after the solve
        result.status = model.solve(max(0.05, deadline - time.monotonic() - evaluation_time))
        found = model.prices()
        if found is not None:
            tick = time.monotonic()
            value = lagrangian_value(jobs, data, found, model.rows)[0]
            evaluation_time = time.monotonic() - tick
            if value > result.value:
                result.value, result.prices = value, found
        if not model.optimal:
            break
        result.lp_value = model.objective() + float(jobs.duration.sum()) / 2
        if not pairing_cuts or not jobs.class_pairs or time.monotonic() + 2 * evaluation_time >= deadline:
            break
        interval, coef = _separate(jobs, data, model.shares(), model.hs)
        if len(interval) == 0:
            break
        result.rounds += 1
        say(f"pairing cuts, round {result.rounds}: {len(interval)} intervals")
        model.add_cuts(interval, coef)
    if len(result.prices) < len(model.rows):
        result.prices = np.concatenate([result.prices, np.zeros(len(model.rows) - len(result.prices))])
    return result


def _subgradient(
    jobs: TraceJobs,
    data: _IntervalData,
    rows: CapacityRows,
    prices: np.ndarray,
    deadline: float,
    target: float,
    best: float,
) -> tuple[float, np.ndarray]:
    """Projected subgradient ascent on the prices with Polyak steps toward ``target``; best value seen."""
    best_prices = prices.copy()
    capacity = data.length[rows.interval] * jobs.num_gpus
    scale = 1.0
    stalls = 0
    while time.monotonic() < deadline:
        value, usage = lagrangian_value(jobs, data, prices, rows)
        if value > best + 1e-9 * max(1.0, abs(best)):
            best, best_prices, stalls = value, prices.copy(), 0
        else:
            stalls += 1
            if stalls >= 5:
                scale, stalls = scale / 2, 0
                if scale < 1e-4:
                    break
        gradient = usage - capacity
        norm = float(np.dot(gradient, gradient))
        if norm <= 1e-18:
            break
        step = scale * max(target - value, 1e-6 * max(1.0, abs(value))) / norm
        prices = np.maximum(0.0, prices + step * gradient)
    return best, best_prices


#: Tangent points of ``Q_j ≥ V_j²`` in the split LP.
TANGENTS = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)


def safe_lp_bound(
    cost: np.ndarray,
    matrix: Any,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
    col_lower: np.ndarray,
    col_upper: np.ndarray,
    row_dual: np.ndarray,
) -> float:
    """A lower bound on ``min c·x`` over ``row_lower ≤ A x ≤ row_upper``, ``col_lower ≤ x ≤ col_upper``
    (every column bounded) from *any* row duals ``y``: ``Σ_i y_i·(bound of row i on y_i's side) +
    Σ_j min(r_j·l_j, r_j·u_j)`` with ``r = c − Aᵀy`` (Neumaier & Shcherbina 2004). Valid whether or not
    the solver converged: an interrupted interior point still certifies what its duals give."""
    y = np.asarray(row_dual, dtype=float).copy()
    y[(y > 0) & ~np.isfinite(row_lower)] = 0.0
    y[(y < 0) & ~np.isfinite(row_upper)] = 0.0
    reduced = cost - matrix.T @ y
    rows = np.where(y > 0, y * np.where(np.isfinite(row_lower), row_lower, 0.0), 0.0) + np.where(
        y < 0, y * np.where(np.isfinite(row_upper), row_upper, 0.0), 0.0
    )
    columns = np.minimum(reduced * col_lower, reduced * col_upper)
    return float(rows.sum() + columns.sum())


def split_lp_bound(
    jobs: TraceJobs,
    data: _IntervalData,
    cuts: CapacityRows | None,
    *,
    time_rows: bool,
    time_limit: float,
    threads: int = 1,
) -> tuple[float, str]:
    """The interval LP with each job's work split into work done alone and work done sharing.

    Work done alone (``u_{jt}``) runs at ``1/p_j`` at most and costs ``G_j·p_j`` GPU-seconds per unit;
    work done sharing (``v_{jt}``) runs at ``1/(p_j·ξ_j)`` at most (``ξ_j``: the ratio to its best
    partner) and costs ``jobs.shared_area``. A job that shares a fraction ``V_j`` of its work completes
    at least ``p_j/2 + p_j·(ξ_j − 1)·V_j²/2`` after its mean busy time (the slow part first, the fast
    part last is the latest the mass can sit), with ``V_j²`` bounded by tangents. With ``time_rows``
    the time a job runs in an interval (``p_j·u + p_j·ξ_j·v``) is capped jointly, else each part alone.
    The capacity rows are the area rows and any pairing ``cuts`` (the same coefficient on both parts).

    Returns
    -------
    (bound on Σ_j E_j, HiGHS status)
        The bound is :func:`safe_lp_bound` at HiGHS's duals (dual simplex; with ``time_rows`` the
        interior point without crossover).
    """
    import highspy
    import scipy.sparse as sparse

    n = len(jobs.ids)
    num_finite = len(data.length)
    length, grid = data.length, data.grid
    shares = np.isfinite(jobs.min_ratio) & np.isfinite(jobs.shared_area)
    ratio = np.where(shares, jobs.min_ratio, 1.0)
    shared_area = np.where(shares, jobs.shared_area, 0.0)
    cells = num_finite - data.first  # finite cells per job
    per_job = 2 * cells + 4  # u cells, v cells, u tail, v tail, V, Q
    offset = np.concatenate([[0], np.cumsum(per_job)])
    num_cols = int(offset[-1])
    job_cell = np.repeat(np.arange(n), cells)
    cell_interval = np.concatenate([np.arange(int(f), num_finite) for f in data.first]) if n else np.zeros(0, int)
    cell_rank = cell_interval - data.first[job_cell]
    u_col = offset[job_cell] + cell_rank
    v_col = u_col + cells[job_cell]
    u_tail = offset[:-1] + 2 * cells
    v_tail, v_var, q_var = u_tail + 1, u_tail + 2, u_tail + 3
    p = jobs.duration
    cost = np.zeros(num_cols)
    cost[u_col] = grid[cell_interval]
    cost[v_col] = grid[cell_interval]
    cost[u_tail] = cost[v_tail] = grid[-1]
    cost[q_var] = np.where(shares, p * (ratio - 1) / 2, 0.0)
    lower = np.zeros(num_cols)
    upper = np.ones(num_cols)
    upper[u_col] = np.minimum(1.0, length[cell_interval] / p[job_cell])
    upper[v_col] = np.where(shares[job_cell], np.minimum(1.0, length[cell_interval] / (p * ratio)[job_cell]), 0.0)
    upper[v_tail] = upper[v_var] = np.where(shares, 1.0, 0.0)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    row_lower: list[np.ndarray] = []
    row_upper: list[np.ndarray] = []
    inf = np.inf

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        rows.append(r)
        cols.append(c)
        vals.append(v)

    # capacity rows 0..K-1: the area rows, then the cuts
    capacity = CapacityRows.area_rows(jobs, num_finite) if cuts is None else cuts
    num_capacity = len(capacity)
    add(cell_interval, u_col, jobs.alone_work[job_cell])
    add(cell_interval, v_col, shared_area[job_cell])
    row_lower.append(np.full(num_finite, -inf))
    row_upper.append(length * jobs.num_gpus)
    if num_capacity > num_finite:
        extra = np.arange(num_finite, num_capacity)
        for r in extra:
            t = int(capacity.interval[r])
            members = np.flatnonzero((capacity.coef[r] > 0) & (data.first <= t))
            column = offset[members] + (t - data.first[members])
            both = np.concatenate([column, column + cells[members]])
            add(np.full(2 * len(members), r), both, np.tile(capacity.coef[r, members], 2))
        row_lower.append(np.full(len(extra), -inf))
        row_upper.append(length[capacity.interval[extra]] * jobs.num_gpus)
    base = num_capacity
    # job rows: all work done once
    add(base + job_cell, u_col, np.ones(len(u_col)))
    add(base + job_cell, v_col, np.ones(len(v_col)))
    add(base + np.arange(n), u_tail, np.ones(n))
    add(base + np.arange(n), v_tail, np.ones(n))
    row_lower.append(np.ones(n))
    row_upper.append(np.ones(n))
    base += n
    # V_j = Σ v: V − Σ v = 0
    add(base + np.arange(n), v_var, np.ones(n))
    add(base + job_cell, v_col, -np.ones(len(v_col)))
    add(base + np.arange(n), v_tail, -np.ones(n))
    row_lower.append(np.zeros(n))
    row_upper.append(np.zeros(n))
    base += n
    # Q_j ≥ 2aV_j − a²
    for a in TANGENTS:
        add(base + np.arange(n), q_var, np.ones(n))
        add(base + np.arange(n), v_var, np.full(n, -2 * a))
        row_lower.append(np.full(n, -a * a))
        row_upper.append(np.full(n, inf))
        base += n
    if time_rows:
        # joint time in an interval, only where one part alone could overrun it
        needed = np.flatnonzero(shares[job_cell] & ((p * ratio)[job_cell] > length[cell_interval]))
        k = len(needed)
        add(base + np.arange(k), u_col[needed], p[job_cell[needed]])
        add(base + np.arange(k), v_col[needed], (p * ratio)[job_cell[needed]])
        row_lower.append(np.full(k, -inf))
        row_upper.append(length[cell_interval[needed]])
        base += k
    matrix = sparse.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(base, num_cols)
    )
    lower_rows = np.concatenate(row_lower)
    upper_rows = np.concatenate(row_upper)
    lp = highspy.HighsLp()
    lp.num_col_ = num_cols
    lp.num_row_ = base
    lp.col_cost_ = cost
    lp.col_lower_ = lower
    lp.col_upper_ = upper
    lp.row_lower_ = np.where(np.isfinite(lower_rows), lower_rows, -highspy.kHighsInf)
    lp.row_upper_ = np.where(np.isfinite(upper_rows), upper_rows, highspy.kHighsInf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr.astype(np.int32)
    lp.a_matrix_.index_ = matrix.indices.astype(np.int32)
    lp.a_matrix_.value_ = matrix.data
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", max(1, threads))
    if time_rows:
        # the joint time rows make simplex slow (47 s against 4 s for the interior point at 240 jobs)
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "off")
    h.setOptionValue("time_limit", max(0.1, float(time_limit)))
    h.passModel(lp)
    h.run()
    status = str(h.modelStatusToString(h.getModelStatus()))
    solution = h.getSolution()
    if not solution.dual_valid:
        return -math.inf, status
    value = safe_lp_bound(cost, matrix, lower_rows, upper_rows, lower, upper, np.asarray(solution.row_dual))
    return value + float(p.sum()) / 2, status


@dataclass(frozen=True)
class TraceBound:
    """A proven lower bound on a trace's total (and average) JCT, and how it was obtained.

    Attributes
    ----------
    total_jct
        Lower bound on ``Σ_j (E_j − a_j)`` in seconds.
    average_jct
        ``total_jct / #jobs``.
    method
        Which component gave the number (``order_statistics``, ``lagrangian``, ``split``, ``split_joint``).
    lp_status
        HiGHS's status of the interval LP (``"Optimal"``, ``"Time limit reached"``, ``"skipped"``, ...).
    components
        Every bound computed, as totals of JCT in seconds: ``per_job``, ``order_statistics``,
        ``lagrangian`` (the interval LP's certificate), ``split`` and ``split_joint`` (the split LPs'
        safe bounds), and ``lp`` (the interval LP's optimum as HiGHS reports it, for comparison).
    statuses
        HiGHS's status of each LP (``interval``, ``split``, ``split_joint``).
    intervals
        Intervals in the grid (the open tail included).
    cut_rounds
        Rounds of pairing cuts added to the LP.
    seconds
        Wall time.
    """

    total_jct: float
    average_jct: float
    method: str
    lp_status: str
    components: dict[str, float] = field(default_factory=dict)
    intervals: int = 0
    seconds: float = 0.0
    num_jobs: int = 0
    cut_rounds: int = 0
    statuses: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_jct": self.total_jct,
            "average_jct": self.average_jct,
            "method": self.method,
            "lp_status": self.lp_status,
            "components": dict(self.components),
            "intervals": self.intervals,
            "seconds": self.seconds,
            "num_jobs": self.num_jobs,
            "cut_rounds": self.cut_rounds,
            "statuses": dict(self.statuses),
        }


def trace_lower_bound(
    instance: Instance,
    *,
    time_limit: float = 60.0,
    max_intervals: int | None = None,
    threads: int = 1,
    upper_bound: float | None = None,
    pairing_cuts: bool = True,
    split: bool = True,
    progress: Callable[[str], None] | None = None,
) -> TraceBound:
    """A proven lower bound on the total JCT of ``instance`` under any schedule (module docstring).

    Parameters
    ----------
    instance
        The trace (any size; arrivals allowed).
    time_limit
        Seconds for the whole computation (a split LP stopped by it still certifies its duals).
    max_intervals
        Cap on the grid's intervals (default ``INTERVALS_PER_JOB · #jobs``, at least 2,000, at most 20,000
        and ``MAX_CELLS`` jobs × intervals).
    threads
        HiGHS threads.
    upper_bound
        A known total JCT (e.g. the best policy's), the subgradient's target when the LP cannot finish.
    pairing_cuts
        Add the pairing cuts (``C = 2``: which classes may share, at which ratios; :func:`_separate`)
        and re-solve while they are violated and time is left.
    split
        After the interval LP (``LAGRANGIAN_SHARE`` of the time), solve :func:`split_lp_bound` with
        separate, then joint, time caps in what is left.
    progress
        Called with a short message at each phase.

    Returns
    -------
    TraceBound
    """
    if instance.progress != SPEC_PROGRESS:
        # every cut and LP below is proven for SPEC.md's rate 1 / (t_iter · ξ), not Muri's simulator's rule
        raise DuettoInputError(
            "the lower bound is proven under SPEC.md's progress rule, and this instance uses "
            f"'{instance.progress.kind}': load it with semantics='duetto' (--semantics duetto, the default)",
            field="progress",
        )
    begin = time.monotonic()
    final = begin + max(0.0, time_limit)
    # the simple LP and its cuts first (a share of the time), then the split LPs with what is left
    deadline = begin + max(0.0, time_limit) * (LAGRANGIAN_SHARE if split else 1.0)
    say = progress or (lambda _message: None)
    jobs = trace_jobs(instance)
    n = len(jobs.ids)
    arrivals = float(jobs.arrival.sum())
    if n == 0:
        return TraceBound(0.0, 0.0, "order_statistics", "skipped", {}, 0, time.monotonic() - begin, 0)
    per_job = float((jobs.arrival + jobs.duration).sum())
    ordered = order_statistics_bound(jobs)
    components = {"per_job": per_job - arrivals, "order_statistics": ordered - arrivals}
    if max_intervals is not None:
        cap = max_intervals
    else:
        # the Lagrangian keeps jobs × intervals arrays and the LP a column per cell: MAX_CELLS at most
        cap = min(20_000, max(2_000, INTERVALS_PER_JOB * n), max(50, MAX_CELLS // n))
    grid = interval_grid(jobs, cap)
    data = _interval_data(jobs, grid)
    say(f"interval LP: {n} jobs x {data.num_intervals} intervals")
    phase = _cut_and_price(jobs, data, deadline, threads, pairing_cuts, say)
    if phase.lp_value is not None:
        components["lp"] = phase.lp_value - arrivals
    best, rows, status, rounds = phase.value, phase.rows, phase.status, phase.rounds
    if status != "Optimal" and time.monotonic() < deadline:
        say("subgradient ascent on the interval prices")
        target = upper_bound + arrivals if upper_bound is not None else max(best, ordered) * 1.2
        best, _ = _subgradient(jobs, data, rows, phase.prices, deadline, target, best)
    components["lagrangian"] = best - arrivals
    statuses: dict[str, str] = {"interval": status}
    if split:
        cuts = rows if len(rows) > len(data.length) else None
        for time_rows in (False, True):
            left = final - time.monotonic()
            cells = float((len(data.length) - data.first).sum())
            if left < 1.0:
                break
            allowed = JOINT_CELLS_PER_SECOND * left if time_rows else SPLIT_CELLS
            if cells > allowed:
                # a coarser grid of its own: its pairing cuts from the interval LP on it, in a share
                # of the time (that LP's certificate counts too)
                split_data = _grid_with_cells(jobs, allowed)
                own = _cut_and_price(
                    jobs, split_data, time.monotonic() + COARSE_CUT_SHARE * left, threads, pairing_cuts, say
                )
                best = max(best, own.value)
                components["lagrangian"] = best - arrivals
                split_cuts = own.rows if len(own.rows) > len(split_data.length) else None
                left = final - time.monotonic()
            else:
                split_data, split_cuts = data, cuts
            say(f"split LP ({'joint' if time_rows else 'separate'} time caps)")
            value, split_status = split_lp_bound(
                jobs, split_data, split_cuts, time_rows=time_rows, time_limit=left, threads=threads
            )
            name = "split_joint" if time_rows else "split"
            statuses[name] = split_status
            if math.isfinite(value):
                components[name] = value - arrivals
    certified_names = ("order_statistics", "lagrangian", "split", "split_joint")
    method = max((name for name in certified_names if name in components), key=lambda name: components[name])
    total = components[method]
    return TraceBound(
        total_jct=total,
        average_jct=total / n,
        method=method,
        lp_status=status,
        components=components,
        intervals=data.num_intervals,
        seconds=time.monotonic() - begin,
        num_jobs=n,
        cut_rounds=rounds,
        statuses=statuses,
    )
