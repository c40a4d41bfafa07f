"""Lanes with gang paces: the slowest-worker rule of :mod:`formulation.gang_lanes` without run columns.

Why it exists: the gang runs (docs/oracle-measurements.md, "Lanes with gang runs") close much of what the lane LP lacks
on gangs, but their master does not converge at the 16-job root in ten minutes: every gang's run is a
column that must be priced to match the lanes, and the master re-solves slowly. Here a gang's run is
replaced by what the slowest-worker rows need of it, per slot: how much of the gang runs at each *pace*.

Master: the lane master of :class:`formulation.lanes._Master` (its rows unchanged) and, for every gang
``j`` (``G_j > 1``) and slot ``t``, explicit columns in ``[0, 1]``:

* ``Y_jtℓ``, the part of the gang running at ``t`` at pace ``ℓ`` (1 alone, else one of ``j``'s ``σ_jk``),
  so that its occupancy is ``O_jt = Σ_ℓ Y_jtℓ``: per slot, lanes starting minus lanes ending at ``t`` =
  ``G_j·(O_jt − O_j,t−1)`` (the occupancy written as its changes, as the gang-run master does; ``O`` is
  not a column of its own: measured, a split row per slot made the master slower);
* its **pace progress**: ``Σ_t Σ_ℓ ℓ·Y_jtℓ + w_j·q_j ≥ w_j`` (``q_j`` the lane master's "ends past the
  cut" column): the gang's work is done at its slowest worker's pace;
* **slowest worker** (cutting planes), per partner ``k`` and slot ``t``: ``Σ_c share_c({j, k}, t)·λ_c ≤
  min(G_j, G_k)·Σ_{ℓ ≤ σ_jk} Y_jtℓ``.

Only the paces some row needs are columns: ``Y_jt1`` (alone) from the start, ``Y_jtℓ`` with its first
slowest-worker row at ``ℓ = σ_jk``. Every slotted schedule is a point: ``O`` its occupancy, ``Y`` at
each slot the least pace made a column that is at least the gang's real one there (``min_k σ_jk`` over
the partners on its GPUs, 1 alone; the alone pace is always one). Its progress is then at least the real
one, and where lanes share ``j`` with ``k`` at ``t`` its real pace, so the column taken, is at most
``σ_jk`` (a row ``(j, k, t)`` exists only with its pace a column). So the LP optimum bounds ``Σ_j E_j``
(tests: the optimal schedules of the contended 7-job set are points violating no row).

Against the gang runs: the same slowest-worker rows, but a gang's paces are pooled over its lanes and
slots (no one run must start, go and end whole), so it is weaker where runs tie a gang's lanes together;
and it needs no pricing beyond the lane DP (the change rows' duals fold into a gang entry's start and end
values, the slowest-worker rows' into a per-slot share cost, as for the gang runs). The Lagrangian bound
keeps the explicit columns in their boxes (each adds ``min(0, its reduced cost)``).

A diagnostic for now (``python -m benchmarks.bound_comparison --methods lanes gang_paces``); measured in
docs/oracle-measurements.md, "Gang paces".
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formulation.discretize import SlottedProblem
from formulation.gang_lanes import MAX_SEPARATIONS, SlowestWorkerDuals, _SlowestWorkerMaster, slowest_worker_bonus
from formulation.lanes import (
    DEFAULT_MAX_LANE_STATES,
    DEFAULT_SMOOTHING,
    Duals,
    LaneBound,
    LaneData,
    Window,
    _LanePricing,
    check_restrictions,
    generation_bound,
    lane_cut,
    lane_lp_first,
    lanes_of_solution,
    restricted_data,
    single_job_lanes,
)

PROGRESS_TOLERANCE = 1e-6
"""The pace-progress row asks for ``w_j`` less this (a real run's paces sum to ``w_j`` within rounding)."""


@dataclass(frozen=True)
class PaceDuals(SlowestWorkerDuals):
    """:class:`formulation.gang_lanes.SlowestWorkerDuals` plus the pace progress rows' ``phi[j] ≥ 0``."""

    phi: np.ndarray = field(default_factory=lambda: np.zeros(0))


class _PaceMaster(_SlowestWorkerMaster):
    """The lane master with gang paces (module docstring). With ``artificial_cost`` (a tree's nodes) each
    job's artificial column does its gang's pace progress too."""

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
        # per gang its pace progress (≥ w_j), which its artificial and late columns do as well
        base = int(self.h.getNumRow())
        self.pace_row = {j: base + g for g, j in enumerate(self.gangs)}
        per_row = [[(col, float(data.work[j])) for col in self.covering.get(j, [])] for j in self.gangs]
        self._add_rows(per_row, [float(data.work[j]) - PROGRESS_TOLERANCE for j in self.gangs], self.inf)
        # paces: j's σ_jk below 1, and 1; Y_jt at pace 1 for every slot
        self.paces: dict[int, np.ndarray] = {
            j: np.array([*sorted({float(s) for s in data.sigma[j][data.shareable[j]] if 0 < s < 1.0}), 1.0])
            for j in self.gangs
        }
        # _pace_of[j, i]: j's i-th pace (0 past its last); _top[j, k]: the index of σ_jk among j's paces
        widest = max((len(p) for p in self.paces.values()), default=1)
        self._pace_of = np.zeros((n, widest))
        self._top = np.zeros((n, n), dtype=np.int64)
        for j, paces in self.paces.items():
            self._pace_of[j, : len(paces)] = paces
            self._top[j] = np.searchsorted(paces, data.sigma[j] + 1e-12, side="right") - 1
        self.pace_cols: dict[tuple[int, int], dict[int, int]] = {}  # (j, t) -> pace index -> column
        self.pace_keys: list[tuple[int, int, int]] = []  # (j, t, pace index) of each pace column, as made
        for j in self.gangs:
            top = len(self.paces[j]) - 1
            for t in range(horizon):
                self._add_pace(j, t, top)

    def _add_pace(self, j: int, t: int, index: int) -> int:
        """The column ``Y_jtℓ`` (``ℓ = paces[j][index]``, in ``[0, 1]``): ``−G_j`` in change row ``t``,
        ``+G_j`` in change row ``t + 1``, ``ℓ`` in the pace progress, and ``−min(G_j, G_k)`` in the
        slowest-worker rows already there that it may serve (partners ``k`` with ``σ_jk ≥ ℓ``)."""
        pace = float(self.paces[j][index])
        sigma, gpus = self.data.sigma, self.data.num_gpus
        rows = [int(self.change_row[j][t]), int(self.change_row[j][t + 1]), int(self.pace_row[j])]
        values = [-float(gpus[j]), float(gpus[j]), pace]
        for r in self.cuts.gang_rows(j, t):
            k = self.cuts.partner[r]
            if pace <= sigma[j, k] + 1e-12:
                rows.append(self.cuts.rows[r])
                values.append(-float(min(gpus[j], gpus[k])))
        self.h.addCol(0.0, 0.0, 1.0, len(rows), np.array(rows, dtype=np.int32), np.array(values, dtype=float))
        col = self.columns
        self.columns += 1
        self.pace_cols.setdefault((j, t), {})[index] = col
        self.pace_keys.append((j, t, index))
        return col

    # -- rows --

    def _slow_mass(self, values: np.ndarray, j: int, partners: np.ndarray) -> np.ndarray:
        thresholds = self.data.sigma[j, partners]
        slow = np.zeros((self.data.horizon, partners.size))
        for (gang, t), columns in self.pace_cols.items():
            if gang != j:
                continue
            for index, col in columns.items():
                weight = float(values[col])
                if weight > 1e-9:
                    slow[t] += weight * (self.paces[j][index] <= thresholds + 1e-12)
        return slow

    def _prepare_rows(self, keys: list[tuple[int, int, int]]) -> None:
        # each row's own pace, made a column (in the rows already there) before the rows name it
        for j, k, t in keys:
            index = int(self._top[j, k])
            if index >= 0 and index not in self.pace_cols.get((j, t), {}):
                self._add_pace(j, t, index)

    def _gang_side(self, keys: list[tuple[int, int, int]], first: int) -> list[list[tuple[int, float]]]:
        data = self.data
        per_row: list[list[tuple[int, float]]] = [[] for _ in keys]
        for number, (j, k, t) in enumerate(keys):
            m = -float(min(data.num_gpus[j], data.num_gpus[k]))
            for index, col in self.pace_cols[(j, t)].items():
                if self.paces[j][index] <= data.sigma[j, k] + 1e-12:
                    per_row[number].append((col, m))
        return per_row

    # -- duals and bounds --

    def solve(self, time_limit: float) -> tuple[float, Duals, float] | None:
        solved = super().solve(time_limit)
        if solved is None:
            return None
        value, base, gpu_dual = solved
        row_dual, delta, rho = self.gang_row_duals()
        phi = np.zeros(self.data.n)
        for j in self.gangs:
            phi[j] = max(0.0, float(row_dual[self.pace_row[j]]))
        return value, self.with_pace_duals(base, delta, phi, rho), gpu_dual

    def with_pace_duals(self, base: Duals, delta: np.ndarray, phi: np.ndarray, rho: np.ndarray) -> PaceDuals:
        """``base`` (the lane master's duals) with the change rows' duals folded into the gangs' start and
        end values (an entry run in ``[S, E)`` earns ``δ_jS − δ_jE``)."""
        alpha = base.alpha + np.where(self.root_starts, delta, 0.0)
        beta = base.beta - np.where(self.root_ends, delta, 0.0)
        return PaceDuals(alpha, beta, base.eta, base.nu, base.mu, delta=delta, phi=phi, rho=rho)

    def from_lane_duals(self, duals: Duals) -> PaceDuals:
        """The lane master's duals (same cover rows, in the same order) as this master's, the pace rows'
        duals 0: every pace column then costs nothing and the Lagrangian is the lane master's."""
        data = self.data
        return PaceDuals(
            duals.alpha,
            duals.beta,
            duals.eta,
            duals.nu,
            duals.mu,
            delta=np.zeros((data.n, data.horizon + 1)),
            phi=np.zeros(data.n),
            rho=np.zeros(0),
        )

    def pace_reduced_costs(self, duals: PaceDuals) -> np.ndarray:
        """The reduced costs of the pace columns (in the order they were made) at ``duals``."""
        data = self.data
        horizon = data.horizon
        keys = np.array(self.pace_keys, dtype=np.int64).reshape(-1, 3)
        j, t, index = keys[:, 0], keys[:, 1], keys[:, 2]
        gpus = data.num_gpus.astype(float)[j]
        reduced = gpus * (duals.delta[j, t] - duals.delta[j, t + 1]) - duals.phi[j] * self._pace_of[j, index]
        count = min(duals.rho.size, len(self.cuts))
        if count:
            # a row (j, k, t) pays its dual times min(G_j, G_k) to each of (j, t)'s paces up to σ_jk's
            gang, partner, slot, m = self.cuts.arrays()
            gang, slot = gang[:count], slot[:count]
            top = self._top[gang, partner[:count]]
            paid = np.zeros((data.n * horizon, self._pace_of.shape[1]))
            np.add.at(paid, (gang * horizon + slot, top), m[:count] * duals.rho[:count])
            paid = np.cumsum(paid[:, ::-1], axis=1)[:, ::-1]  # [jt, i]: the rows whose pace is i or more
            reduced -= paid[j * horizon + t, index]
        return reduced

    def lagrangian(self, duals: Duals, top: float) -> float:
        """The lane master's Lagrangian (:meth:`formulation.lanes._Master.lagrangian`), with the pace
        rows dualized, the late columns' value there, and the explicit columns in ``[0, 1]``."""
        if not isinstance(duals, PaceDuals):
            raise TypeError("the pace master's Lagrangian needs pace duals")
        data = self.data
        total = super().lagrangian(duals, top)
        if not math.isfinite(total) or not self.gangs:
            return total
        gpus = data.num_gpus.astype(float)
        whole = gpus * data.work
        on_time = np.asarray(self.start_allowed.any(axis=1) & self.end_allowed.any(axis=1))
        for j in self.gangs:
            total += float(duals.phi[j]) * (float(data.work[j]) - PROGRESS_TOLERANCE)
            if not on_time[j]:  # the windows leave it no lane: late (q_j = 1), its work done there
                total -= float(data.work[j]) * float(duals.phi[j])
            elif data.can_be_late[j]:
                saving = float(data.late_cost[j] - gpus[j] * duals.mu[j] - whole[j] * duals.eta[j])
                total += min(0.0, saving - float(data.work[j]) * float(duals.phi[j])) - min(0.0, saving)
        return total + float(np.minimum(self.pace_reduced_costs(duals), 0.0).sum())


class _PacePricing(_LanePricing):
    """The lane DP with the slowest-worker rows' duals as a share cost."""

    def __init__(self, data: LaneData, master: _PaceMaster) -> None:
        super().__init__(data, master.covers)
        self.master = master

    def _bonus(self, duals: Duals) -> np.ndarray | None:
        bonus = super()._bonus(duals)
        if not isinstance(duals, PaceDuals):
            return bonus
        extra = slowest_worker_bonus(self.data, self.master.cuts, duals.rho)
        if extra is None:
            return bonus
        return extra if bonus is None else bonus + extra


def pace_master(
    problem: SlottedProblem,
    data: LaneData,
    *,
    window: Window | None,
    lanes_until: float | None = None,
    smoothing: float = DEFAULT_SMOOTHING,
    cancel: threading.Event | None = None,
    artificial_cost: float | None = None,
    cover_sets: bool = True,
) -> tuple[_PaceMaster, _PacePricing, PaceDuals | None]:
    """A pace master and its pricing, restricted to ``window``, with the upper bound's lanes and every job
    alone. With ``lanes_until`` (a ``time.perf_counter()`` deadline) the lane LP runs first, until it
    converges or then: its lanes and cover rows (same order) start the pace master, and its best duals
    (:meth:`_PaceMaster.from_lane_duals`, where the pace master's Lagrangian is the lane bound) are
    returned as where the smoothing starts (``None`` without)."""
    import highspy

    master = _PaceMaster(data, highspy, artificial_cost=artificial_cost, cover_sets=cover_sets)
    pricer = _PacePricing(data, master)
    seed: Duals | None = None
    if lanes_until is not None:
        lanes_master, outcome = lane_lp_first(
            problem,
            data,
            window=window,
            deadline=lanes_until,
            smoothing=smoothing,
            cancel=cancel,
            artificial_cost=artificial_cost,
            cover_sets=cover_sets,
        )
        master.start_from(lanes_master)
        seed = outcome.center
    else:
        master.add(lanes_of_solution(problem, data))
        master.add(single_job_lanes(data))
    if window is not None:
        master.restrict(window)
        pricer.restrict(window)
    return master, pricer, None if seed is None else master.from_lane_duals(seed)


def gang_pace_bound(
    problem: SlottedProblem,
    *,
    time_limit: float = 60.0,
    cut: int | None = None,
    smoothing: float = DEFAULT_SMOOTHING,
    max_rounds: int = 10_000,
    cancel: threading.Event | None = None,
    max_states: int = DEFAULT_MAX_LANE_STATES,
    on_bound: Callable[[LaneBound], bool] | None = None,
    fixed_starts: dict[str, int] | None = None,
    sharing_pairs: Iterable[tuple[str, str]] | None = None,
    lane_share: float = 0.25,
) -> LaneBound:
    """Lower bound on ``Σ_j E_j`` (slots) by column generation over lanes with gang paces (module
    docstring); the same arguments and result as :func:`formulation.lanes.lane_bound` (``fixed_starts``
    and ``sharing_pairs`` restrict it as there). ``lane_share`` of the time goes to the lane LP first
    (:func:`pace_master`; 0: none): where it converges in that time, the bound is never below the lane
    LP's (measured without: 24 × 8 seed 1 ended 0.2 % below the lanes, unconverged after 300 s)."""
    if not 0.0 <= lane_share <= 1.0:
        raise ValueError(f"lane_share must be in [0, 1], got {lane_share!r}")
    pairs = check_restrictions(problem, fixed_starts, sharing_pairs)
    began = time.perf_counter()
    cut, reason = lane_cut(problem, cut, max_states)
    if reason is not None:
        return LaneBound(math.nan, f"skipped: {reason}")
    data, window = restricted_data(problem, cut, fixed_starts, pairs)
    master, pricer, center = pace_master(
        problem,
        data,
        window=window,
        lanes_until=began + lane_share * time_limit if lane_share > 0 else None,
        smoothing=smoothing,
        cancel=cancel,
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
