"""Lanes with gang runs: the lane relaxation with each gang's whole run as a second kind of column.

Why it exists: docs/oracle-measurements.md ("The root's slack at 24 jobs, with the starts given", "Per-lane progress,
checked", "Branching on ends") measured that the lane LP (:mod:`formulation.lanes`) keeps most of its
slack on gangs: a gang's lanes are priced and mixed one by one, each with its own start, end, partners
and progress, so the LP runs a gang fast on some lanes and shared on others, and ends its lanes apart.
A gang's *run* column (:mod:`formulation.run_columns` showed that alone it is weaker than the lanes,
which keep GPU identity) holds the gang whole: one start, one end, and a rate per slot at its slowest
worker's pace, its progress checked inside the column. Here both kinds of columns sit in one master,
linked per slot.

Master: the lane master of :class:`formulation.lanes._Master` (coverage, progress, GPU and cover rows,
unchanged and still valid) and, for every gang ``j`` (``G_j > 1``):

* runs ``μ_r ≥ 0`` with ``Σ_r μ_r + q_j = 1`` (``q_j`` the lane master's "ends past the cut" column);
* **occupancy**: per slot, ``Σ_c run_c(j, t)·λ_c = G_j·Σ_r [r runs at t]·μ_r``, written as its changes
  (per slot ``t``: lanes starting minus lanes ending at ``t`` = ``G_j`` × runs starting minus runs
  ending there; equal changes from slot 0 are equal occupancy, and an interval has two entries instead
  of one per slot);
* **end sum**: ``Σ_c (Σ of its entries' ends of j)·λ_c = G_j·Σ_r E_r·μ_r``; the gang's completion is
  paid by its run, and with this row the master is a restriction of the lane master (its LP optimum
  is at least the lane LP's); optionally (``link_starts``) its lanes start where its runs do, per slot;
* **slowest worker** (cutting planes), per partner ``k`` and slot ``t``:
  ``Σ_c share_c({j, k}, t)·λ_c ≤ min(G_j, G_k)·Σ_r [rate_r(t) ≤ σ_jk]·μ_r``: lanes may share ``j``
  with ``k`` at ``t`` only as far as ``j``'s runs are that slow then.

Every slotted schedule is a point: its lanes, and each gang's real run with, per slot, the rate
``min_k σ_jk`` over the partners on its GPUs (1 alone). At most ``min(G_j, G_k)`` GPUs hold both ``j``
and ``k``, and only when ``j`` runs at ``σ_jk`` or slower; the real run is a path of the run DP below
(its gridded progress is complete no later than the real end, and a run may go on after that). So the
LP optimum bounds ``Σ_j E_j`` (tests: every real schedule of the contended 7-job set is a feasible
point violating no row, and no real run is cheaper than the run DP's optimum at random duals).

Pricing: lanes by the lane DP (:class:`formulation.lanes._LanePricing`), a gang's entry earning its
occupancy and end-sum duals at its start and end and a shared slot paying the slowest-worker rows'
duals (as the cover rows' share bonus); runs by one DP per gang over (slot, work left on a grid of
``1/grid`` alone-slot, 20 by default: a coarse grid counts a slot at ``σ = 0.87`` as a whole one)
choosing a rate level per slot (:class:`_RunPricing`). The Lagrangian bound after each pricing keeps
``Σλ ≤ #GPUs`` and each gang's choice of one run or lateness, so it holds whenever the generation stops
(:func:`formulation.lanes._column_generation` drives both). The lane LP runs first
(:func:`seeded_master`): its lanes, cover rows, the runs its lanes imply and its best duals start the
gang master, whose Lagrangian there is the lane bound.

A diagnostic and a tree option for now (``python -m benchmarks.bound_comparison --methods lanes
gang_lanes gang_tree``, ``benchmarks.lane_slack --gang-runs``, ``lane_tree_bound(..., gang_runs=True)``),
not part of :func:`solvers.solve`: measured in docs/oracle-measurements.md, "Lanes with gang runs", it is much
stronger once the starts are known but its root master is too slow at 16 jobs. :mod:`formulation.gang_paces`
keeps its slowest-worker rows without the runs (about the same root on the 7-job set, several times
faster).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from formulation.discretize import SlottedProblem
from formulation.lanes import (
    DEFAULT_MAX_LANE_STATES,
    DEFAULT_SMOOTHING,
    PRICING_TOLERANCE,
    Duals,
    Lane,
    LaneBound,
    LaneData,
    Window,
    _LanePricing,
    _Master,
    _overlaps,
    _SlotIndex,
    check_restrictions,
    generation_bound,
    lane_cut,
    lane_lp_first,
    restricted_data,
    solution_runs,
)

DEFAULT_GRID = 20
"""A run's work is counted on a grid of ``1/grid`` alone-slot (rounded in the relaxed direction)."""
MAX_NEW_CUTS = 500
"""Slowest-worker rows added per separation at most (the most violated first)."""
MAX_SEPARATIONS = 200
"""Separations (cover rows and slowest-worker rows) per column generation at most."""
RUNS_PER_GANG = 3
"""Runs priced per gang and round (its best starts' runs)."""


@dataclass(frozen=True)
class GangRun(Lane):
    """A gang's whole run: ``[start, end)`` and its rate level in each of those slots (``levels[t −
    start]``: 1 alone, else the ``σ_jk`` it runs at, its slowest worker's). A :class:`Lane` with no
    entries only so that it travels with the lanes through the column generation."""

    job: int = -1
    start: int = 0
    end: int = 0
    levels: tuple[float, ...] = ()

    def key(self) -> tuple[tuple[int, int, int, int], ...]:
        # never a lane's key (jobs are >= 0); the master files runs by (job, start, end, levels)
        return ((-1 - self.job, self.start, self.end, 0),)


@dataclass(frozen=True)
class SlowestWorkerDuals(Duals):
    """:class:`formulation.lanes.Duals` plus what both gang masters' rows add: ``delta[j, t]`` the
    occupancy changes' (free) and ``rho[r] ≥ 0`` the slowest-worker rows' (sign turned: the rows are
    ``≤ 0``). ``alpha`` and ``beta`` already hold what ``delta`` pays a gang's lane entries."""

    PADDED: ClassVar[tuple[str, ...]] = ("nu", "rho")

    delta: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    rho: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class GangDuals(SlowestWorkerDuals):
    """:class:`SlowestWorkerDuals` plus the run rows' (free): ``kappa[j]`` the run choice's, ``epsilon[j]``
    the end sum's, ``theta[j, S]`` the start links' (0 without them); ``alpha`` and ``beta`` hold what
    ``epsilon`` and ``theta`` pay a gang's lane entries too."""

    kappa: np.ndarray = field(default_factory=lambda: np.zeros(0))
    epsilon: np.ndarray = field(default_factory=lambda: np.zeros(0))
    theta: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


class _SlowestWorkerRows:
    """The rows ``(j, k, t)``: gang ``j``, partner ``k``, slot ``t``, with ``m = min(G_j, G_k)``."""

    def __init__(self, data: LaneData) -> None:
        self.data = data
        self.gang: list[int] = []
        self.partner: list[int] = []
        self.slot: list[int] = []
        self.rows: list[int] = []
        self.known: set[tuple[int, int, int]] = set()
        self._by_pair = _SlotIndex()  # (a, b), a < b -> row numbers (into these lists)
        self._by_gang = _SlotIndex()  # j -> row numbers
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, j: int, k: int, t: int, row: int) -> None:
        r = len(self.rows)
        self.gang.append(j)
        self.partner.append(k)
        self.slot.append(t)
        self.rows.append(row)
        self.known.add((j, k, t))
        self._by_pair.add((min(j, k), max(j, k)), t, r)
        self._by_gang.add(j, t, r)
        self._arrays = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(gang, partner, slot, m)`` by row number."""
        if self._arrays is None:
            gang = np.array(self.gang, dtype=np.int64)
            partner = np.array(self.partner, dtype=np.int64)
            gpus = self.data.num_gpus
            self._arrays = (
                gang,
                partner,
                np.array(self.slot, dtype=np.int64),
                np.minimum(gpus[gang], gpus[partner]).astype(float),
            )
        return self._arrays

    def lane_coefficients(self, lane: Lane, first: int = 0) -> dict[int, float]:
        """Row number -> the lane's coefficient (1 per slot it holds the row's gang and partner)."""
        out: dict[int, float] = {}
        if len(self.rows) <= first:
            return out
        for i, k, lo, hi in _overlaps(lane):
            for r in self._by_pair.rows((i, k), lo, hi, first):
                out[int(r)] = out.get(int(r), 0.0) + 1.0
        return out

    def gang_rows(self, j: int, t: int) -> list[int]:
        """Row numbers (into these lists) of gang ``j`` at slot ``t``."""
        return [int(r) for r in self._by_gang.rows(j, t, t + 1)]

    def run_coefficients(self, run: GangRun, first: int = 0) -> dict[int, float]:
        """Row number -> the run's coefficient (``−m`` where it is at least as slow as ``σ_jk``)."""
        out: dict[int, float] = {}
        if len(self.rows) <= first:
            return out
        sigma, gpus = self.data.sigma, self.data.num_gpus
        for r in self._by_gang.rows(run.job, run.start, run.end, first):
            k, t = self.partner[r], self.slot[r]
            if run.levels[t - run.start] <= sigma[run.job, k] + 1e-12:
                out[int(r)] = -float(min(gpus[run.job], gpus[k]))
        return out


def lane_shares(data: LaneData, lanes: list[Lane], columns: list[int], values: np.ndarray) -> np.ndarray:
    """``share[t, i, k]``: the lanes' mass (at column values ``values``) holding both ``i`` and ``k`` at
    slot ``t`` (symmetric)."""
    share = np.zeros((data.horizon, data.n, data.n))
    for lane, col in zip(lanes, columns, strict=True):
        weight = float(values[col])
        if weight <= 1e-9:
            continue
        for i, k, lo, hi in _overlaps(lane):
            share[lo:hi, i, k] += weight
    return share + share.transpose(0, 2, 1)


def slowest_worker_bonus(data: LaneData, cuts: _SlowestWorkerRows, rho: np.ndarray) -> np.ndarray | None:
    """What the slowest-worker rows' duals ``rho`` charge a lane for sharing each pair, per slot,
    prefix-summed as :meth:`formulation.lanes._LanePricing._bonus` takes it (``None``: nothing)."""
    count = min(rho.size, len(cuts))
    if count == 0 or not np.any(rho[:count] > 0):
        return None
    gang, partner, slot, _ = cuts.arrays()
    per_slot = np.zeros((data.n, data.n, data.horizon))
    weights = rho[:count]
    np.add.at(per_slot, (gang[:count], partner[:count], slot[:count]), -weights)
    np.add.at(per_slot, (partner[:count], gang[:count], slot[:count]), -weights)
    prefix = np.zeros((data.n, data.n, data.horizon + 1))
    np.cumsum(per_slot, axis=2, out=prefix[:, :, 1:])
    return prefix


class _SlowestWorkerMaster(_Master):
    """The lane master with what both gang masters add (:class:`_GangMaster`, its runs;
    :class:`formulation.gang_paces._PaceMaster`, its paces): per gang ``j``, its occupancy written as its
    changes (per slot ``t``, lanes starting minus lanes ending at ``t`` = ``G_j`` × the gang's own columns
    starting minus ending there; equal changes from slot 0 on are equal occupancy, and an interval has two
    entries instead of one per slot), and the slowest-worker rows as cutting planes, whose gang side is
    the subclass's (:meth:`_slow_mass`, :meth:`_prepare_rows`, :meth:`_gang_side`)."""

    def __init__(
        self,
        data: LaneData,
        highspy: Any,
        artificial_cost: float | None = None,
        cover_rows: bool = True,
        cover_sets: bool = True,
    ) -> None:
        super().__init__(data, highspy, artificial_cost=artificial_cost, cover_rows=cover_rows, cover_sets=cover_sets)
        n, horizon = data.n, data.horizon
        self.is_gang = data.num_gpus > 1
        self.gangs = [int(j) for j in np.nonzero(self.is_gang)[0]]
        # the lane master made, per job in order, its artificial column (with an artificial cost) and its
        # "late" column (if it may end past the cut): what stands for the job when none of its own does
        self.covering: dict[int, list[int]] = {}
        column = 0
        for j in range(n):
            for made in (artificial_cost is not None, bool(data.can_be_late[j])):
                if made:
                    self.covering.setdefault(j, []).append(column)
                    column += 1
        base = int(self.h.getNumRow())
        self.change_row = {j: base + g * (horizon + 1) + np.arange(horizon + 1) for g, j in enumerate(self.gangs)}
        if self.gangs:
            count = len(self.gangs) * (horizon + 1)
            self._add_rows([[] for _ in range(count)], [0.0] * count, 0.0)
        self.cuts = _SlowestWorkerRows(data)

    def _lane_column(self, lane: Lane) -> tuple[float, dict[int, float]]:
        cost, coefficients = super()._lane_column(lane)
        for e in lane.entries:
            if self.is_gang[e.job]:
                rows = self.change_row[e.job]
                for row, change in ((int(rows[e.start]), 1.0), (int(rows[e.end]), -1.0)):
                    coefficients[row] = coefficients.get(row, 0.0) + change
        for r, value in self.cuts.lane_coefficients(lane).items():
            coefficients[self.cuts.rows[r]] = value
        return cost, coefficients

    def lane_value(self, lane: Lane, duals: Duals) -> float:
        total = super().lane_value(lane, duals)
        if isinstance(duals, SlowestWorkerDuals) and duals.rho.size:
            for r, value in self.cuts.lane_coefficients(lane).items():
                if r < duals.rho.size:
                    total -= duals.rho[r] * value
        return total

    def gang_row_duals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """After a solve: every row's dual, the change rows' ``delta[j, t]`` and the slowest-worker rows'
        ``rho ≥ 0`` (sign turned)."""
        row_dual = np.asarray(self.h.getSolution().row_dual)
        delta = np.zeros((self.data.n, self.data.horizon + 1))
        for j in self.gangs:
            delta[j] = row_dual[self.change_row[j]]
        rho = np.maximum(-row_dual[np.array(self.cuts.rows, dtype=np.int64)], 0.0)
        return row_dual, delta, rho

    # -- rows --

    def separate(self, values: np.ndarray) -> int:
        return super().separate(values) + self._separate_slowest_worker(values)

    def _slow_mass(self, values: np.ndarray, j: int, partners: np.ndarray) -> np.ndarray:
        """``slow[t, p]``: gang ``j``'s mass at ``t`` (column values ``values``) that runs at most as fast
        as ``σ_j,partners[p]``."""
        raise NotImplementedError

    def _prepare_rows(self, keys: list[tuple[int, int, int]]) -> None:
        """Before the rows ``keys`` are added: make the gang columns they need (none by default)."""

    def _gang_side(self, keys: list[tuple[int, int, int]], first: int) -> list[list[tuple[int, float]]]:
        """The gang columns' entries ``(column, −m)`` in each new row ``keys[i]`` (its number ``first + i``)."""
        raise NotImplementedError

    def _separate_slowest_worker(self, values: np.ndarray) -> int:
        """Add the slowest-worker rows the point ``values`` violates (the most violated first, at most
        :data:`MAX_NEW_CUTS`)."""
        data = self.data
        if not self.gangs:
            return 0
        share = lane_shares(data, self.lanes, self.lane_cols, values)
        found: list[tuple[float, int, int, int]] = []
        for j in self.gangs:
            partners = np.nonzero(data.shareable[j])[0]
            if not partners.size:
                continue
            slow = self._slow_mass(values, j, partners)
            limit = np.minimum(data.num_gpus[j], data.num_gpus[partners])[None, :] * slow
            excess = share[:, j, partners] - limit
            for t, p in np.argwhere(excess > 1e-6):
                k = int(partners[p])
                if (j, k, int(t)) not in self.cuts.known:
                    found.append((float(excess[t, p]), j, k, int(t)))
        if not found:
            return 0
        found.sort(key=lambda row: -row[0])
        keys = [(j, k, t) for _, j, k, t in found[:MAX_NEW_CUTS]]
        self.add_slowest_worker_rows(keys)
        return len(keys)

    def add_slowest_worker_rows(self, keys: list[tuple[int, int, int]]) -> None:
        """Add the rows ``(j, k, t)`` (gang, partner, slot; not yet in the master) with every pooled lane's
        and gang column's coefficients."""
        self._prepare_rows(keys)
        first = len(self.cuts)
        base = int(self.h.getNumRow())
        for number, (j, k, t) in enumerate(keys):
            self.cuts.add(j, k, t, base + number)
        per_row = self._gang_side(keys, first)
        pairs = {(min(j, k), max(j, k)) for j, k, _ in keys}
        for lane, col in zip(self.lanes, self.lane_cols, strict=True):
            if not any((min(i, k), max(i, k)) in pairs for i, k, _, _ in _overlaps(lane)):
                continue
            for r, value in self.cuts.lane_coefficients(lane, first).items():
                per_row[r - first].append((col, value))
        self._add_rows(per_row, [-self.inf] * len(per_row), 0.0)


class _GangMaster(_SlowestWorkerMaster):
    """The lane master with gang runs (module docstring)."""

    def __init__(
        self,
        data: LaneData,
        highspy: Any,
        artificial_cost: float | None = None,
        cover_rows: bool = True,
        cover_sets: bool = True,
        link_starts: bool = False,
    ) -> None:
        super().__init__(data, highspy, artificial_cost=artificial_cost, cover_rows=cover_rows, cover_sets=cover_sets)
        # primal simplex: columns come in every round and keep the basis primal feasible (measured: the
        # master's time halved at 16 jobs on 8 GPUs with the starts fixed, 0-65 % less on the 7-job set;
        # no change at the 16-job root)
        self.use_simplex("primal")
        horizon = data.horizon
        # a gang's run choice: its runs, or its artificial and late columns
        base = int(self.h.getNumRow())
        self.convexity_row = {j: base + number for number, j in enumerate(self.gangs)}
        per_row: list[list[tuple[int, float]]] = [[(col, 1.0) for col in self.covering.get(j, [])] for j in self.gangs]
        self._add_rows(per_row, [1.0] * len(self.gangs), 1.0)
        # Σ over the gang's lane entries of their ends = G_j·(its run's end): equal at every schedule,
        # and what makes the master a restriction of the lane master whichever side pays the end
        base = int(self.h.getNumRow())
        self.end_row = {j: base + number for number, j in enumerate(self.gangs)}
        self._add_rows([[] for _ in self.gangs], [0.0] * len(self.gangs), 0.0)
        # optionally, per slot: the gang's lanes starting there = G_j·(its runs starting there)
        self.start_row: dict[int, np.ndarray] = {}
        if link_starts and self.gangs:
            base = int(self.h.getNumRow())
            self.start_row = {
                j: base + number * (horizon + 1) + np.arange(horizon + 1) for number, j in enumerate(self.gangs)
            }
            count = len(self.gangs) * (horizon + 1)
            self._add_rows([[] for _ in range(count)], [0.0] * count, 0.0)
        # the gangs' completion is paid by their runs
        self.end_value[self.is_gang] = 0.0
        self.runs: list[GangRun] = []
        self.run_cols: list[int] = []
        self.run_keys: set[tuple[int, int, int, tuple[float, ...]]] = set()
        self.run_pricing: _RunPricing | None = None  # set by the pricing, for the Lagrangian
        self._gpu_dual = 0.0

    # -- columns --

    def _lane_column(self, lane: Lane) -> tuple[float, dict[int, float]]:
        cost, coefficients = super()._lane_column(lane)
        for e in lane.entries:
            if self.is_gang[e.job]:
                cost -= e.end / float(self.data.num_gpus[e.job])
                row = self.end_row[e.job]
                coefficients[row] = coefficients.get(row, 0.0) + float(e.end)
                if self.start_row:
                    row = int(self.start_row[e.job][e.start])
                    coefficients[row] = coefficients.get(row, 0.0) + 1.0
        return cost, coefficients

    def column_count(self) -> int:
        return len(self.lanes) + len(self.runs)

    def known(self, lane: Lane) -> bool:
        if isinstance(lane, GangRun):
            return (lane.job, lane.start, lane.end, lane.levels) in self.run_keys
        return super().known(lane)

    def add(self, lanes: list[Lane]) -> int:
        runs = [lane for lane in lanes if isinstance(lane, GangRun)]
        added = super().add([lane for lane in lanes if not isinstance(lane, GangRun)])
        return added + self.add_runs(runs)

    def add_runs(self, runs: list[GangRun]) -> int:
        added = 0
        for run in runs:
            key = (run.job, run.start, run.end, run.levels)
            if key in self.run_keys:
                continue
            if len(run.levels) != run.end - run.start or run.end > self.data.horizon:
                raise ValueError(f"gang run of the wrong shape: {run}")
            gpus = float(self.data.num_gpus[run.job])
            coefficients: dict[int, float] = {self.convexity_row[run.job]: 1.0, self.end_row[run.job]: -gpus * run.end}
            coefficients[int(self.change_row[run.job][run.start])] = -gpus
            coefficients[int(self.change_row[run.job][run.end])] = gpus
            if self.start_row:
                coefficients[int(self.start_row[run.job][run.start])] = -gpus
            for r, value in self.cuts.run_coefficients(run).items():
                coefficients[self.cuts.rows[r]] = value
            rows = np.array(list(coefficients), dtype=np.int32)
            upper = self.inf if self._run_inside(run) else 0.0
            self.h.addCol(float(run.end), 0.0, upper, len(rows), rows, np.array(list(coefficients.values())))
            self.run_cols.append(self.columns)
            self.columns += 1
            self.runs.append(run)
            self.run_keys.add(key)
            added += 1
        return added

    def _run_inside(self, run: GangRun) -> bool:
        w = self.window
        j = run.job
        return w is None or (w.start_lo[j] <= run.start <= w.start_hi[j] and w.end_lo[j] <= run.end <= w.end_hi[j])

    def restrict(self, window: Window) -> None:
        """:meth:`formulation.lanes._Master.restrict`, the runs as well."""
        super().restrict(window)
        if self.run_cols:
            columns = np.array(self.run_cols, dtype=np.int32)
            uppers = np.array([self.inf if self._run_inside(run) else 0.0 for run in self.runs])
            self.h.changeColsBounds(len(columns), columns, np.zeros(len(columns)), uppers)

    # -- rows --

    def _slow_mass(self, values: np.ndarray, j: int, partners: np.ndarray) -> np.ndarray:
        slow = np.zeros((self.data.horizon, partners.size))
        thresholds = self.data.sigma[j, partners]
        for run, col in zip(self.runs, self.run_cols, strict=True):
            weight = float(values[col])
            if run.job != j or weight <= 1e-9:
                continue
            levels = np.array(run.levels)
            slow[run.start : run.end] += weight * (levels[:, None] <= thresholds[None, :] + 1e-12)
        return slow

    def _gang_side(self, keys: list[tuple[int, int, int]], first: int) -> list[list[tuple[int, float]]]:
        per_row: list[list[tuple[int, float]]] = [[] for _ in keys]
        gangs = {j for j, _, _ in keys}
        for run, col in zip(self.runs, self.run_cols, strict=True):
            if run.job in gangs:
                for r, value in self.cuts.run_coefficients(run, first).items():
                    per_row[r - first].append((col, value))
        return per_row

    # -- duals and bounds --

    def solve(self, time_limit: float) -> tuple[float, Duals, float] | None:
        solved = super().solve(time_limit)
        if solved is None:
            return None
        value, base, gpu_dual = solved
        self._gpu_dual = gpu_dual
        row_dual, delta, rho = self.gang_row_duals()
        data = self.data
        kappa = np.zeros(data.n)
        epsilon = np.zeros(data.n)
        theta = np.zeros((data.n, data.horizon + 1))
        for j in self.gangs:
            if self.start_row:
                theta[j] = row_dual[self.start_row[j]]
            kappa[j] = row_dual[self.convexity_row[j]]
            epsilon[j] = row_dual[self.end_row[j]]
        return value, self.with_gang_duals(base, delta, rho, kappa, epsilon, theta), gpu_dual

    def with_gang_duals(
        self,
        base: Duals,
        delta: np.ndarray,
        rho: np.ndarray,
        kappa: np.ndarray,
        epsilon: np.ndarray,
        theta: np.ndarray,
    ) -> GangDuals:
        """``base`` (the lane master's duals) with the occupancy and end-sum duals folded into the gangs'
        start and end values (an entry run in ``[S, E)`` earns ``δ_jS − δ_jE + θ_jS + ε_j·E``)."""
        horizon = self.data.horizon
        alpha = base.alpha + np.where(self.root_starts, delta + theta, 0.0)
        ends = epsilon[:, None] * np.arange(horizon + 1)[None, :]
        beta = base.beta + np.where(self.root_ends, ends - delta, 0.0)
        return GangDuals(
            alpha, beta, base.eta, base.nu, base.mu, delta=delta, rho=rho, kappa=kappa, epsilon=epsilon, theta=theta
        )

    def from_lane_duals(self, duals: Duals) -> GangDuals:
        """The lane master's duals (same cover rows, in the same order) as this master's: the gangs'
        lanes pay their ends through the end-sum row (``ε_j = −1/G_j``), the other new rows' duals 0.
        The Lagrangian there is the lane master's: every run then costs nothing, as the free ``q_j``."""
        data = self.data
        epsilon = np.where(self.is_gang, -1.0 / data.num_gpus, 0.0)
        return GangDuals(
            duals.alpha,
            duals.beta,
            duals.eta,
            duals.nu,
            duals.mu,
            delta=np.zeros((data.n, data.horizon + 1)),
            rho=np.zeros(0),
            kappa=np.zeros(data.n),
            epsilon=epsilon,
            theta=np.zeros((data.n, data.horizon + 1)),
        )

    def lane_value(self, lane: Lane, duals: Duals) -> float:
        if isinstance(lane, GangRun):
            # the caller takes −(GPU dual) − this as the reduced cost; a run is in no GPU row
            if not isinstance(duals, GangDuals) or self.run_pricing is None:
                raise TypeError("a gang run is priced with gang duals")
            return -self._gpu_dual - self.run_pricing.reduced_cost(lane, duals)
        return super().lane_value(lane, duals)

    def lagrangian(self, duals: Duals, top: float) -> float:
        """The lane master's Lagrangian (:meth:`formulation.lanes._Master.lagrangian`), with each gang
        choosing its best run or lateness in place of the free ``q_j``."""
        if not isinstance(duals, GangDuals) or self.run_pricing is None:
            raise TypeError("the gang master's Lagrangian needs gang duals and its run pricing")
        data = self.data
        total = super().lagrangian(duals, top)
        if not math.isfinite(total) or not self.gangs:
            return total
        best = self.run_pricing.best_costs(duals)
        gpus = data.num_gpus.astype(float)
        whole = gpus * data.work
        for j in self.gangs:
            late_saving = float(data.late_cost[j] - gpus[j] * duals.mu[j] - whole[j] * duals.eta[j])
            if data.can_be_late[j]:
                total -= min(0.0, late_saving)  # the lane master's free q_j, replaced:
                total += min(float(best[j]), late_saving)
            else:
                total += float(best[j])
        return total  # +inf: a gang with no run in the windows that may not be late (the node is empty)


class _RunPricing:
    """One DP per gang over (slot, work left on the grid): the least ``E·(1 + G_j·ε_j) + G_j·(δ_jS + θ_jS −
    δ_jE) − Σ_t gain_t(level_t)`` over its runs ``[S, E)``, where ``gain_t(L) = Σ_k m_jk·ρ_jkt [L ≤
    σ_jk]`` (the slowest-worker rows a run at level ``L`` lets lanes use). Levels are ``j``'s ``σ_jk`` and
    1 (alone); a slot at level ``L`` takes ``⌈grid·L⌉`` off the ``⌈grid·w_j⌉`` the gang needs (the
    relaxed rounding), and a run may end once nothing is left, or go on."""

    def __init__(self, data: LaneData, cuts: _SlowestWorkerRows, grid: int = DEFAULT_GRID) -> None:
        self.data = data
        self.cuts = cuts
        self.grid = grid
        self.gangs = [int(j) for j in np.nonzero(data.num_gpus > 1)[0]]
        self.levels: dict[int, np.ndarray] = {}
        self.step: dict[int, np.ndarray] = {}
        self.need: dict[int, int] = {}
        self.after: dict[int, np.ndarray] = {}
        for j in self.gangs:
            values = sorted({float(s) for s in data.sigma[j][data.shareable[j]] if 0 < s < 1.0})
            self.levels[j] = np.array([*values, 1.0])
            self.step[j] = np.array(
                [max(0, math.ceil(grid * level - 1e-9)) for level in self.levels[j]], dtype=np.int64
            )
            self.need[j] = max(1, math.ceil(grid * float(data.work[j]) - 1e-9))
            self.after[j] = np.maximum(np.arange(self.need[j] + 1)[None, :] - self.step[j][:, None], 0)
        self._cache: tuple[Duals, np.ndarray, dict[int, list[GangRun]]] | None = None
        self.window: Window | None = None

    def restrict(self, window: Window) -> None:
        """Runs only inside ``window`` (their start and end)."""
        self.window = window
        self._cache = None

    def _gains(self, j: int, duals: GangDuals) -> np.ndarray:
        """``gain[t, l]`` for gang ``j``."""
        horizon = self.data.horizon
        levels = self.levels[j]
        gain = np.zeros((horizon, levels.size))
        count = min(duals.rho.size, len(self.cuts))
        if count == 0:
            return gain
        gang, partner, slot, m = self.cuts.arrays()
        mine = np.nonzero((gang[:count] == j) & (duals.rho[:count] > 0))[0]
        if not mine.size:
            return gain
        # the highest level index at or below σ_jk: the row pays every level up to it
        top = np.searchsorted(levels, self.data.sigma[j, partner[mine]] + 1e-12, side="right") - 1
        keep = top >= 0
        at = np.zeros((horizon, levels.size))
        np.add.at(at, (slot[mine][keep], top[keep]), (m[mine] * duals.rho[mine])[keep])
        return np.cumsum(at[:, ::-1], axis=1)[:, ::-1]

    def _solve(self, j: int, duals: GangDuals) -> tuple[np.ndarray, np.ndarray]:
        """``(to_go[t, R], choice[t, R])``: the least cost from slot ``t`` with ``R`` grid units left
        (running at ``t`` unless it ends there), and the level index taken (−1: end)."""
        data = self.data
        horizon = data.horizon
        need = self.need[j]
        gpus = float(data.num_gpus[j])
        first = int(data.release[j])
        last_end = int(data.last_end[j])
        earliest_end = first + int(data.min_slots[j])
        gain = self._gains(j, duals)
        end_price = 1.0 + gpus * float(duals.epsilon[j])
        start_lo = first if self.window is None else max(first, int(self.window.start_lo[j]))
        end_lo, end_hi = (
            (0, horizon) if self.window is None else (int(self.window.end_lo[j]), int(self.window.end_hi[j]))
        )
        after = self.after[j]  # (L, R + 1): grid units left after a slot at each level
        to_go = np.full((horizon + 1, need + 1), np.inf)
        choice = np.full((horizon + 1, need + 1), -1, dtype=np.int64)
        stop = min(last_end, horizon)
        for t in range(stop, start_lo - 1, -1):
            if t < stop:
                candidates = to_go[t + 1][after] - gain[t][:, None]  # (L, R + 1)
                arg = np.argmin(candidates, axis=0)
                best = candidates[arg, np.arange(need + 1)]
                arg[~np.isfinite(best)] = -1
            else:
                best = np.full(need + 1, np.inf)
                arg = np.full(need + 1, -1, dtype=np.int64)
            if earliest_end <= t and end_lo <= t <= end_hi:
                ending = float(t) * end_price - gpus * float(duals.delta[j, t])
                if ending <= best[0]:  # ending wins ties: the shorter run
                    best[0], arg[0] = ending, -1
            to_go[t] = best
            choice[t] = arg
        return to_go, choice

    def _price(self, duals: GangDuals, per_gang: int) -> tuple[np.ndarray, dict[int, list[GangRun]]]:
        data = self.data
        best = np.full(data.n, np.inf)
        runs: dict[int, list[GangRun]] = {}
        for j in self.gangs:
            to_go, choice = self._solve(j, duals)
            first = int(data.release[j])
            last_start = min(int(data.last_start[j]), data.horizon - 1)
            if self.window is not None:
                first = max(first, int(self.window.start_lo[j]))
                last_start = min(last_start, int(self.window.start_hi[j]))
            if last_start < first:
                continue
            starts = to_go[first : last_start + 1, self.need[j]]
            starts = starts + float(data.num_gpus[j]) * (
                duals.theta[j, first : last_start + 1] + duals.delta[j, first : last_start + 1]
            )
            if not np.isfinite(starts).any():
                continue
            best[j] = float(starts.min())
            runs[j] = [
                self._backtrack(j, first + int(offset), choice)
                for offset in np.argsort(starts, kind="stable")[:per_gang]
                if np.isfinite(starts[offset])
            ]
        return best, runs

    def _backtrack(self, j: int, start: int, choice: np.ndarray) -> GangRun:
        t, left = start, self.need[j]
        levels: list[float] = []
        while True:
            level_index = int(choice[t, left])
            if level_index < 0:
                break
            levels.append(float(self.levels[j][level_index]))
            left = max(0, left - int(self.step[j][level_index]))
            t += 1
        return GangRun((), job=j, start=start, end=t, levels=tuple(levels))

    def best_costs(self, duals: GangDuals) -> np.ndarray:
        """Each gang's least run cost without ``κ_j`` (class docstring; ``inf``: no run; other jobs ``inf``)."""
        return self.priced(duals, RUNS_PER_GANG)[0]

    def priced(self, duals: GangDuals, per_gang: int) -> tuple[np.ndarray, dict[int, list[GangRun]]]:
        """:meth:`best_costs` and each gang's best runs (one per start, the best starts first), cached for
        the last duals (the pricing and the Lagrangian ask for the same point)."""
        if self._cache is not None and self._cache[0] is duals:
            return self._cache[1], self._cache[2]
        best, runs = self._price(duals, per_gang)
        self._cache = (duals, best, runs)
        return best, runs

    def reduced_cost(self, run: GangRun, duals: GangDuals) -> float:
        """A run's reduced cost: its cost in the class docstring less ``κ_j``."""
        j = run.job
        gpus = float(self.data.num_gpus[j])
        total = float(run.end) * (1.0 + gpus * float(duals.epsilon[j])) - float(duals.kappa[j])
        total += gpus * float(duals.delta[j, run.start] - duals.delta[j, run.end] + duals.theta[j, run.start])
        for r, value in self.cuts.run_coefficients(run).items():
            if r < duals.rho.size:
                total += float(duals.rho[r]) * value  # value = −m where the run is that slow
        return total


class _GangPricing(_LanePricing):
    """The lane DP with the slowest-worker rows' duals as a share cost, and the gangs' run DPs."""

    def __init__(self, data: LaneData, master: _GangMaster, grid: int = DEFAULT_GRID) -> None:
        super().__init__(data, master.covers)
        self.master = master
        self.runs = _RunPricing(data, master.cuts, grid)
        master.run_pricing = self.runs

    def restrict(self, window: Window) -> None:
        super().restrict(window)
        self.runs.restrict(window)

    def _bonus(self, duals: Duals) -> np.ndarray | None:
        bonus = super()._bonus(duals)
        if not isinstance(duals, GangDuals):
            return bonus
        extra = slowest_worker_bonus(self.data, self.master.cuts, duals.rho)
        if extra is None:
            return bonus
        return extra if bonus is None else bonus + extra

    def price(self, duals: Duals, want: int) -> tuple[float, list[Lane]]:
        top, lanes = super().price(duals, want)
        if want <= 0 or not isinstance(duals, GangDuals):
            return top, lanes
        _, runs = self.runs.priced(duals, RUNS_PER_GANG)
        for priced in runs.values():
            for run in priced:
                if self.runs.reduced_cost(run, duals) < -PRICING_TOLERANCE:
                    lanes.append(run)
        return top, lanes


def runs_of_solution(problem: SlottedProblem, data: LaneData) -> list[GangRun]:
    """Each gang's run in the problem's upper-bound solution, its level per slot the slowest of its
    GPUs' (``min σ_jk`` over the partners there, 1 alone); gangs ending past the cut left out."""
    placed = solution_runs(problem)
    runs = []
    for j, (start, end, gpus) in placed.items():
        if data.num_gpus[j] <= 1 or end > data.horizon:
            continue
        levels = []
        for t in range(start, end):
            level = 1.0
            for k, (s2, e2, g2) in placed.items():
                if k != j and s2 <= t < e2 and gpus & g2:
                    level = min(level, float(data.sigma[j, k]))
            levels.append(level)
        runs.append(GangRun((), job=j, start=start, end=end, levels=tuple(levels)))
    return runs


def runs_of_lanes(data: LaneData, lanes: Iterable[Lane], grid: int = DEFAULT_GRID) -> list[GangRun]:
    """A run per gang entry of the given lanes, at the pace that lane's partners set (``σ_jk`` while
    sharing with ``k``, 1 alone), where its gridded work is complete (a run the run DP could price): the
    lane LP's own runs, so that the gang master starts near the lane LP's optimum and not at the upper
    bound's."""
    runs: dict[tuple[int, int, int, tuple[float, ...]], GangRun] = {}
    for lane in lanes:
        for e in lane.entries:
            if data.num_gpus[e.job] <= 1:
                continue
            levels = np.ones(e.end - e.start)
            for other in lane.entries:
                lo, hi = max(e.start, other.start), min(e.end, other.end)
                if other.job != e.job and hi > lo:
                    levels[lo - e.start : hi - e.start] = np.minimum(
                        levels[lo - e.start : hi - e.start], data.sigma[e.job, other.job]
                    )
            need = max(1, math.ceil(grid * float(data.work[e.job]) - 1e-9))
            if sum(math.ceil(grid * level - 1e-9) for level in levels) >= need:
                run = GangRun((), job=e.job, start=e.start, end=e.end, levels=tuple(float(x) for x in levels))
                runs[(run.job, run.start, run.end, run.levels)] = run
    return list(runs.values())


def alone_runs(data: LaneData) -> list[GangRun]:
    """Every gang alone at every start it may take (``d_j`` slots)."""
    runs = []
    for j in np.nonzero(data.num_gpus > 1)[0]:
        d = int(data.min_slots[j])
        for s in range(int(data.release[j]), int(data.last_start[j]) + 1):
            runs.append(GangRun((), job=int(j), start=s, end=s + d, levels=(1.0,) * d))
    return runs


def seeded_master(
    problem: SlottedProblem,
    data: LaneData,
    *,
    window: Window | None,
    deadline: float,
    smoothing: float = DEFAULT_SMOOTHING,
    max_rounds: int = 10_000,
    cancel: threading.Event | None = None,
    grid: int = DEFAULT_GRID,
    link_starts: bool = False,
    artificial_cost: float | None = None,
    cover_sets: bool = True,
) -> tuple[_GangMaster, _GangPricing, GangDuals | None]:
    """A gang master and its pricing, started from the lane LP: column generation over lanes alone
    until ``deadline`` (fast and well stabilized), then its lanes, its cover rows (same order), the gang
    runs its used lanes imply (:func:`runs_of_lanes`), the upper bound's runs and every gang alone at
    every start go into the gang master; the lane LP's best duals, as the gang master's
    (:meth:`_GangMaster.from_lane_duals`), are where its smoothing starts (``None`` if it got none).
    At those duals the gang master's Lagrangian is the lane LP's bound."""
    import highspy

    lanes_master, first = lane_lp_first(
        problem,
        data,
        window=window,
        deadline=deadline,
        smoothing=smoothing,
        max_rounds=max_rounds,
        cancel=cancel,
        artificial_cost=artificial_cost,
        cover_sets=cover_sets,
    )
    master = _GangMaster(data, highspy, artificial_cost=artificial_cost, cover_sets=cover_sets, link_starts=link_starts)
    pricer = _GangPricing(data, master, grid)
    master.start_from(lanes_master)
    if first.values is not None:
        values = first.values
        # lanes added after the last solve (its entering ones) have no value yet
        used = [
            lane
            for lane, col in zip(lanes_master.lanes, lanes_master.lane_cols, strict=True)
            if col < values.size and values[col] > 1e-9
        ]
        master.add_runs(runs_of_lanes(data, used, grid))
    master.add_runs(runs_of_solution(problem, data))
    master.add_runs(alone_runs(data))
    if window is not None:
        master.restrict(window)
        pricer.restrict(window)
    center = None if first.center is None else master.from_lane_duals(first.center)
    return master, pricer, center


def gang_lane_bound(
    problem: SlottedProblem,
    *,
    time_limit: float = 60.0,
    cut: int | None = None,
    grid: int = DEFAULT_GRID,
    smoothing: float = DEFAULT_SMOOTHING,
    max_rounds: int = 10_000,
    cancel: threading.Event | None = None,
    max_states: int = DEFAULT_MAX_LANE_STATES,
    on_bound: Callable[[LaneBound], bool] | None = None,
    link_starts: bool = False,
    fixed_starts: dict[str, int] | None = None,
    sharing_pairs: Iterable[tuple[str, str]] | None = None,
    lane_share: float = 0.5,
) -> LaneBound:
    """Lower bound on ``Σ_j E_j`` (slots) by column generation over lanes and gang runs (module
    docstring); the same arguments and result as :func:`formulation.lanes.lane_bound`. ``link_starts``
    adds rows per gang and slot that make its lanes start where its runs do (measured: a few tenths of a
    slot on 7-job instances). ``fixed_starts`` (job id -> its only start) restricts the LP to the
    schedules with those starts, and ``sharing_pairs`` to those that share only within those pairs, as
    in :func:`formulation.lanes.lane_bound`. ``lane_share`` of the time goes to the lane LP first (its
    lanes, cover rows and best duals start the gang master, so the bound is never below what the lanes
    reach in that time)."""
    pairs = check_restrictions(problem, fixed_starts, sharing_pairs)
    if not 0.0 <= lane_share <= 1.0:
        raise ValueError(f"lane_share must be in [0, 1], got {lane_share!r}")
    if not (isinstance(grid, int) and grid >= 1):
        raise ValueError(f"grid must be an integer >= 1, got {grid!r}")
    began = time.perf_counter()
    cut, reason = lane_cut(problem, cut, max_states)
    if reason is not None:
        return LaneBound(math.nan, f"skipped: {reason}")
    data, window = restricted_data(problem, cut, fixed_starts, pairs)
    master, pricer, center = seeded_master(
        problem,
        data,
        window=window,
        deadline=began + lane_share * time_limit,
        smoothing=smoothing,
        max_rounds=max_rounds,
        cancel=cancel,
        grid=grid,
        link_starts=link_starts,
    )

    return generation_bound(
        master,
        pricer,
        began=began,
        time_limit=time_limit,
        smoothing=smoothing,
        max_rounds=max_rounds,
        cancel=cancel,
        on_bound=on_bound,
        max_separations=MAX_SEPARATIONS,
        center=center,
    )
