"""A per-job Dantzig-Wolfe relaxation: a column is one job's whole run with its sharing pattern.

Why it exists: the lane relaxation (:mod:`formulation.lanes`) sums a gang's progress over its lanes and
lets them differ (docs/oracle-measurements.md, "Per-lane progress, checked"), and the pair-coupled LP
(:mod:`formulation.relaxation`) lets a job's fractional runs take their sharing where it is cheapest.
Both leave most of their slack on gangs. Here a column is **one job's run**: its start ``S`` and end
``E`` and, in every slot of ``[S, E)``, which partners share which of its GPUs. Inside a column the job's
progress is checked exactly as the slotted model counts it (a gang at its slowest worker's pace, the
slot's rate ``min_k σ_jk`` over the partners present; alone a whole slot), to a grid of ``1/q`` slot
rounded in the relaxed direction. A gang therefore always runs on all of its GPUs at once, with one
start and one end.

What couples the jobs is the pair-coupled LP's accounting, with the claims of each side made explicit
(``a_c(k, w)``: GPU-slots column ``c`` of job ``i`` shares with ``k`` in time window ``w``):

* ``λ_c ≥ 0``, ``Σ_{c of j} λ_c + q_j = 1`` (``q_j``: the job ends past the cut, cost
  ``max(cut + 1, r_j + d_j)``, no GPUs charged: a relaxation);
* per slot ``t``: ``Σ_c G_j·run_c(t)·λ_c − e_t ≤ #GPUs``, ``0 ≤ e_t ≤ #GPUs`` (GPUs in use beyond the
  cluster's are shared ones);
* per window ``w``: ``Σ_{t∈w} e_t ≤ Σ_{i<k} s_{ikw}`` and ``s_{ikw} ≤ Σ_{c of i} a_c(k, w)·λ_c``,
  ``s_{ikw} ≤ Σ_{c of k} a_c(i, w)·λ_c`` (a shared GPU-slot counts once against the GPUs and only if
  *both* jobs say they share it: a job that claims a partner pays for it in its own progress);
* pairs too wide to run side by side (``G_i + G_k > #GPUs``), per window over the slots both may run
  in: ``s_{ikw} ≥ e·(Σ_{t∈w} (R_it + R_kt) − |w|)``, ``e = G_i + G_k − #GPUs`` (``R_jt`` the mass of
  ``j``'s columns running at ``t``; whenever both run they share ``e`` GPUs), and ``Σ_{t∈w} (R_it +
  R_kt) ≤ |w|`` for such a pair that may not share;
* ``min Σ_c E_c·λ_c + Σ_j late_j·q_j``.

Every schedule of the slotted model is a feasible point: each job's run is a column (its claims are
what it really shares), ``s`` the GPU-slots really shared, ``e_t`` the GPUs beyond the cluster's. Node
placement, modes (each partner at the job's fastest mode that fits next to it) and the grid are
relaxed; a column may also end at the first slot its gridded progress is complete, which is never
later than the real end (its claims then stop there too: ``s`` is a minimum, so that only loosens).
So the LP optimum bounds ``Σ_j E_j``.

Pricing: for each job a DP backwards over slots with states (slot, work left on the grid). In a slot
the job picks a *rate level* ``L`` (its own ``σ_jk`` values and 1, alone): its GPUs then go, greedily,
to the partners of ``σ_jk ≥ L`` whose claim dual is highest (each partner on at most ``min(G_j, G_k)``
GPUs), so the slot's rate is at least ``L`` and its reward the best any sharing at that rate gets.
Every real run is dominated by a path of the DP, so the DP's minimum is the exact pricing minimum over
(a superset of) runs, and the Lagrangian bound holds after every round.

Measured (docs/oracle-measurements.md, "One job's run as the column"): valid, but **weaker than the lane LP**
where compared, and its master slow. On the contended 7-job set (optima 86 / 125 / 109) it reaches
81.5 / 107.7 / 91.9 against the lanes' 81.45 / 114.3 / 99.9: the lanes' GPU identity (a job's
partners are the jobs on its own GPUs, one after the other) is worth more than what this column gets
right (a gang whole, progress checked). It is a diagnostic (``python -m benchmarks.bound_comparison
--methods lanes runs``), not part of :func:`solvers.solve`.
"""

from __future__ import annotations

import importlib.util
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formulation.discretize import SlottedProblem
from formulation.lanes import LaneData, solution_runs
from formulation.relaxation import default_cut

DEFAULT_GRID = 4
"""Grid of the DP's work: ``1/grid`` alone-slot."""
DEFAULT_WIDTH = 2
"""Slots per window of the pair claims (``s`` cells); 1 is the finest, wider is smaller and weaker."""
PRICING_TOLERANCE = 1e-7
SMOOTHING = 0.7


@dataclass(frozen=True)
class RunColumn:
    """One job's run: ``[start, end)`` and its shared GPU-slots ``(partner, slot, gpus)``."""

    job: int
    start: int
    end: int
    shares: tuple[tuple[int, int, int], ...] = ()

    def key(self) -> tuple[int, int, int, tuple[tuple[int, int, int], ...]]:
        return (self.job, self.start, self.end, self.shares)


@dataclass
class RunBound:
    """Result of :func:`run_bound`: ``value`` the best Lagrangian bound (slots; ``nan`` if none)."""

    value: float
    status: str
    master_value: float = math.nan
    rounds: int = 0
    columns: int = 0
    seconds: float = 0.0
    pricing_seconds: float = 0.0
    master_seconds: float = 0.0
    history: list[tuple[float, float, float]] = field(default_factory=list)

    @property
    def proven(self) -> bool:
        return math.isfinite(self.value)


# --- the pricing kernel (plain Python; compiled by numba when it is installed) ------------------------


def _price_job_py(
    grid_need: int,
    gpus: int,
    slot_cost: np.ndarray,  # (T,) what running in each slot costs (GPU and too-wide rows' duals)
    claim: np.ndarray,  # (n, W) ρ_{j,k,w} ≥ 0 for this job j
    available: np.ndarray,  # (n, T) bool: partner k may run at t
    sigma: np.ndarray,  # (n,) σ_jk (0: may not share)
    by_speed: np.ndarray,  # (n,) partners by σ_jk, fastest first: the greedy's order on equal duals
    partner_gpus: np.ndarray,  # (n,) G_k
    levels: np.ndarray,  # (L,) rate levels, the last 1.0
    window_of: np.ndarray,  # (T,) window of each slot
    grid: int,
    first: int,  # the job's release
    stop: int,  # slots < stop may run (its latest end within the horizon)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    horizon = slot_cost.shape[0]
    n = sigma.shape[0]
    count = levels.shape[0]
    reward = np.zeros((horizon, count))
    decrement = np.zeros((horizon, count), dtype=np.int64)
    for t in range(first, stop):
        values = claim[:, window_of[t]]
        order = by_speed[np.argsort(-values[by_speed], kind="mergesort")]
        for level_index in range(count):
            level = levels[level_index]
            left = gpus
            total = 0.0
            rate = 1.0
            for position in range(n):
                if left == 0:
                    break
                k = order[position]
                value = values[k]
                if value <= 0.0:
                    break
                if sigma[k] < level or sigma[k] <= 0.0 or not available[k, t]:
                    continue
                taken = min(left, partner_gpus[k], gpus)
                total += taken * value
                left -= taken
                if sigma[k] < rate:
                    rate = sigma[k]
            reward[t, level_index] = total
            decrement[t, level_index] = max(0, math.ceil(grid * rate - 1e-9))
    value_to_go = np.full((horizon + 1, grid_need + 1), np.inf)
    choice = np.full((horizon + 1, grid_need + 1), -1, dtype=np.int64)
    for t in range(first, min(stop, horizon) + 1):
        value_to_go[t, 0] = float(t)
    for t in range(min(stop, horizon) - 1, first - 1, -1):
        base = slot_cost[t]
        for left_work in range(1, grid_need + 1):
            best = np.inf
            arg = -1
            for level_index in range(count):
                after = left_work - decrement[t, level_index]
                if after < 0:
                    after = 0
                candidate = base - reward[t, level_index] + value_to_go[t + 1, after]
                if candidate < best:
                    best = candidate
                    arg = level_index
            value_to_go[t, left_work] = best
            choice[t, left_work] = arg
    return value_to_go, choice, decrement


_KERNEL: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
_KERNEL_LOCK = threading.Lock()


def _kernel() -> Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]:
    global _KERNEL
    with _KERNEL_LOCK:
        if _KERNEL is None:
            if importlib.util.find_spec("numba") is not None:
                import numba

                _KERNEL = numba.njit(cache=True)(_price_job_py)
            else:
                _KERNEL = _price_job_py
        return _KERNEL


def _partners(
    gpus: int,
    claim_values: np.ndarray,
    available_now: np.ndarray,
    sigma: np.ndarray,
    by_speed: np.ndarray,
    partner_gpus: np.ndarray,
    level: float,
) -> list[tuple[int, int]]:
    """The kernel's greedy choice at one slot and level, as ``(partner, gpus)``; same order, same ties."""
    order = by_speed[np.argsort(-claim_values[by_speed], kind="mergesort")]
    left = gpus
    chosen: list[tuple[int, int]] = []
    for k in order:
        if left == 0 or claim_values[k] <= 0.0:
            break
        if sigma[k] < level or sigma[k] <= 0.0 or not available_now[k]:
            continue
        taken = int(min(left, partner_gpus[k], gpus))
        chosen.append((int(k), taken))
        left -= taken
    return chosen


# --- data, master, pricing -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Duals:
    gpu: np.ndarray  # (T,) π ≥ 0
    credit: np.ndarray  # (W,) φ ≥ 0
    claim: np.ndarray  # (n, n, W) ρ ≥ 0
    convexity: np.ndarray  # (n,) μ (free)
    wide: np.ndarray  # (rows,) ν ≥ 0 of the too-wide rows

    def mix(self, other: _Duals, weight: float) -> _Duals:
        return _Duals(
            weight * self.gpu + (1 - weight) * other.gpu,
            weight * self.credit + (1 - weight) * other.credit,
            weight * self.claim + (1 - weight) * other.claim,
            weight * self.convexity + (1 - weight) * other.convexity,
            weight * self.wide + (1 - weight) * other.wide,
        )


class _RunModel:
    """The data the master and the pricing share, and both of them."""

    def __init__(self, problem: SlottedProblem, cut: int, width: int, grid: int, highspy: Any) -> None:
        data = LaneData.from_problem(problem, cut)
        self.data = data
        self.grid = grid
        self.width = width
        n, horizon = data.n, data.horizon
        self.n, self.horizon = n, horizon
        self.windows = (horizon + width - 1) // width
        self.window_of = (np.arange(horizon) // width).astype(np.int64)
        self.partner_gpus = data.num_gpus.astype(np.int64)
        # slots each job may run in: up to its latest end, or to the cut if it may end past it
        self.stop = np.where(data.can_be_late, horizon, data.last_end).astype(np.int64)
        self.available = np.zeros((n, horizon), dtype=np.bool_)
        for j in range(n):
            self.available[j, int(data.release[j]) : int(self.stop[j])] = True
        self.need = np.array([max(1, math.ceil(grid * w - 1e-9)) for w in data.work], dtype=np.int64)
        self.levels = []
        for j in range(n):
            values = sorted({float(s) for s in data.sigma[j][data.shareable[j]] if s > 0})
            self.levels.append(np.array([*values, 1.0]))
        self.by_speed = [np.argsort(-data.sigma[j], kind="mergesort").astype(np.int64) for j in range(n)]
        self.hs = highspy
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        self.h = h
        inf = highspy.kHighsInf
        self.inf = inf
        gpus = float(data.gpus)
        # rows: convexity (n), GPUs per slot (T), credit per window (W), claims (i, k, w)
        self.convexity_row = np.arange(n)
        self.gpu_row = n + np.arange(horizon)
        self.credit_row = n + horizon + np.arange(self.windows)
        self.claim_row: dict[tuple[int, int, int], int] = {}
        lower = [1.0] * n + [-inf] * (horizon + self.windows)
        upper = [1.0] * n + [gpus] * horizon + [0.0] * self.windows
        rows = n + horizon + self.windows
        self.cells: list[tuple[int, int, int, float]] = []  # (i, k, w, upper bound of s)
        # pairs too wide to run side by side (G_i + G_k > #GPUs): per window, the slots both may run
        # in carry s_{ikw} ≥ e·(Σ_{t∈w} (R_it + R_kt) − slots), e = G_i + G_k − #GPUs (per slot they
        # share e GPUs whenever both run); a pair that may not share never overlaps (s = 0)
        self.wide: list[tuple[int, int, int, float, np.ndarray]] = []  # (i, k, w, e, slots both may run)
        wide_rows: list[int] = []
        for i in range(n):
            for k in range(i + 1, n):
                both = self.available[i] & self.available[k]
                excess = float(data.num_gpus[i] + data.num_gpus[k] - data.gpus)
                for w in range(self.windows):
                    inside = np.flatnonzero(both[w * width : (w + 1) * width]) + w * width
                    if not inside.size:
                        continue
                    if data.shareable[i, k]:
                        self.claim_row[(i, k, w)] = rows
                        self.claim_row[(k, i, w)] = rows + 1
                        rows += 2
                        lower += [-inf, -inf]
                        upper += [0.0, 0.0]
                        top = float(min(data.num_gpus[i], data.num_gpus[k]) * inside.size)
                        self.cells.append((i, k, w, top))
                    if excess > 0:
                        shared = excess if data.shareable[i, k] else 1.0
                        self.wide.append((i, k, w, shared, inside))
                        wide_rows.append(rows)
                        lower.append(-shared * inside.size)
                        upper.append(inf)
                        rows += 1
        self.wide_row = np.array(wide_rows, dtype=np.int64)
        self.wide_lower = np.array([-e * inside.size for _, _, _, e, inside in self.wide])
        wide_of_cell = {(i, k, w): r for r, (i, k, w, _, _) in enumerate(self.wide)}
        # the cells as arrays for the Lagrangian, each with its too-wide row (an index into self.wide; −1: none)
        self.cell_i, self.cell_k, self.cell_w = (np.array([c[a] for c in self.cells], dtype=np.int64) for a in range(3))
        self.cell_top = np.array([c[3] for c in self.cells])
        self.cell_wide = np.array([wide_of_cell.get(c[:3], -1) for c in self.cells], dtype=np.int64)
        # per job, the wide rows it is in: (row index in self.wide, slots)
        self.wide_of_job: list[list[int]] = [[] for _ in range(n)]
        for r, (i, k, _, _, _) in enumerate(self.wide):
            self.wide_of_job[i].append(r)
            self.wide_of_job[k].append(r)
        empty_i = np.array([], dtype=np.int32)
        h.addRows(rows, np.array(lower), np.array(upper), 0, empty_i, empty_i, np.array([], dtype=float))
        # e_t and s_{ikw}
        for t in range(horizon):
            idx = np.array([self.gpu_row[t], self.credit_row[self.window_of[t]]], dtype=np.int32)
            h.addCol(0.0, 0.0, gpus, 2, idx, np.array([-1.0, 1.0]))
        for (i, k, w, top), wide in zip(self.cells, self.cell_wide, strict=True):
            rows_of = [self.credit_row[w], self.claim_row[(i, k, w)], self.claim_row[(k, i, w)]]
            values_of = [-1.0, 1.0, 1.0]
            if wide >= 0:
                rows_of.append(int(self.wide_row[wide]))
                values_of.append(1.0)
            h.addCol(0.0, 0.0, top, len(rows_of), np.array(rows_of, dtype=np.int32), np.array(values_of))
        for j in range(n):
            if data.can_be_late[j]:
                h.addCol(float(data.late_cost[j]), 0.0, 1.0, 1, np.array([j], dtype=np.int32), np.array([1.0]))
        self.columns: list[RunColumn] = []
        self.keys: set[tuple[int, int, int, tuple[tuple[int, int, int], ...]]] = set()

    # -- master --

    def add(self, columns: list[RunColumn]) -> int:
        added = 0
        gpus = self.data.num_gpus
        for column in columns:
            key = column.key()
            if key in self.keys:
                continue
            j = column.job
            coefficients: dict[int, float] = {j: 1.0}
            for t in range(column.start, column.end):
                coefficients[int(self.gpu_row[t])] = float(gpus[j])
            for r in self.wide_of_job[j]:
                _, _, _, excess, inside = self.wide[r]
                slots = int(((inside >= column.start) & (inside < column.end)).sum())
                if slots:
                    coefficients[int(self.wide_row[r])] = -excess * slots
            for k, t, taken in column.shares:
                row = self.claim_row.get((j, k, int(self.window_of[t])))
                if row is not None:
                    coefficients[row] = coefficients.get(row, 0.0) - taken
            rows = np.array(list(coefficients), dtype=np.int32)
            self.h.addCol(float(column.end), 0.0, self.inf, len(rows), rows, np.array(list(coefficients.values())))
            self.keys.add(key)
            self.columns.append(column)
            added += 1
        return added

    def solve(self, seconds: float) -> tuple[float, _Duals] | None:
        self.h.setOptionValue("time_limit", self.h.getRunTime() + max(0.01, seconds))
        self.h.run()
        if self.h.getModelStatus() == self.hs.HighsModelStatus.kUnknown:
            self.h.clearSolver()
            self.h.run()
        if self.h.getModelStatus() != self.hs.HighsModelStatus.kOptimal:
            return None
        dual = np.asarray(self.h.getSolution().row_dual)
        claim = np.zeros((self.n, self.n, self.windows))
        for (i, k, w), row in self.claim_row.items():
            claim[i, k, w] = max(0.0, -dual[row])
        duals = _Duals(
            gpu=np.maximum(0.0, -dual[self.gpu_row]),
            credit=np.maximum(0.0, -dual[self.credit_row]),
            claim=claim,
            convexity=dual[self.convexity_row].copy(),
            wide=np.maximum(0.0, dual[self.wide_row]) if self.wide_row.size else np.zeros(0),
        )
        return float(self.h.getInfo().objective_function_value), duals

    def reduced_cost(self, column: RunColumn, duals: _Duals) -> float:
        j = column.job
        value = float(column.end) - float(duals.convexity[j])
        value += float(self.slot_cost(j, duals)[column.start : column.end].sum())
        for k, t, taken in column.shares:
            value -= taken * float(duals.claim[j, k, self.window_of[t]])
        return value

    # -- pricing --

    def slot_cost(self, j: int, duals: _Duals) -> np.ndarray:
        """What running job ``j`` in each slot costs at ``duals``: its GPUs' price and the too-wide rows'."""
        cost = float(self.data.num_gpus[j]) * duals.gpu
        for r in self.wide_of_job[j]:
            if duals.wide[r] > 0:
                _, _, _, excess, inside = self.wide[r]
                cost[inside] += duals.wide[r] * excess
        return cost

    def price(self, duals: _Duals, per_job: int) -> tuple[np.ndarray, list[RunColumn]]:
        """Each job's least ``E + Σ G·π − Σ ρ·a`` over its runs, and its best columns (``per_job`` starts)."""
        kernel = _kernel()
        data = self.data
        best = np.full(self.n, np.inf)
        columns: list[RunColumn] = []
        for j in range(self.n):
            first, stop = int(data.release[j]), int(self.stop[j])
            if stop <= first:
                continue
            to_go, choice, decrement = kernel(
                int(self.need[j]),
                int(data.num_gpus[j]),
                self.slot_cost(j, duals),
                np.ascontiguousarray(duals.claim[j]),
                self.available,
                np.ascontiguousarray(data.sigma[j]),
                self.by_speed[j],
                self.partner_gpus,
                self.levels[j],
                self.window_of,
                self.grid,
                first,
                stop,
            )
            last_start = min(int(data.last_start[j]), stop - 1) if not data.can_be_late[j] else stop - 1
            starts = to_go[first : last_start + 1, self.need[j]]
            if starts.size == 0 or not np.isfinite(starts).any():
                continue
            best[j] = float(starts.min())
            for offset in np.argsort(starts, kind="stable")[:per_job]:
                if np.isfinite(starts[offset]):
                    columns.append(self._backtrack(j, first + int(offset), choice, decrement, duals))
        return best, columns

    def _backtrack(self, j: int, start: int, choice: np.ndarray, decrement: np.ndarray, duals: _Duals) -> RunColumn:
        data = self.data
        t, left = start, int(self.need[j])
        shares: list[tuple[int, int, int]] = []
        levels = self.levels[j]
        while left > 0:
            level_index = int(choice[t, left])
            level = float(levels[level_index])
            rate = 1.0
            if level < 1.0:
                for k, taken in _partners(
                    int(data.num_gpus[j]),
                    duals.claim[j, :, self.window_of[t]],
                    self.available[:, t],
                    data.sigma[j],
                    self.by_speed[j],
                    data.num_gpus,
                    level,
                ):
                    shares.append((k, t, taken))
                    rate = min(rate, float(data.sigma[j, k]))
            step = max(0, math.ceil(self.grid * rate - 1e-9))
            if step != int(decrement[t, level_index]):  # the kernel and this replay must agree
                expected = int(decrement[t, level_index])
                raise RuntimeError(f"run pricing: job {j} slot {t}: the replay's step {step} is not {expected}")
            left = max(0, left - step)
            t += 1
        return RunColumn(j, start, t, tuple(shares))

    def lagrangian(self, duals: _Duals, best: np.ndarray) -> float:
        data = self.data
        per_job = np.where(data.can_be_late, np.minimum(best, data.late_cost.astype(float)), best)
        if not np.isfinite(per_job).all():
            return -math.inf
        total = float(per_job.sum()) - data.gpus * float(duals.gpu.sum())
        # e_t: reduced cost φ_w − π_t, at most #GPUs
        total += data.gpus * float(np.minimum(0.0, duals.credit[self.window_of] - duals.gpu).sum())
        # s_ikw: reduced cost ρ_ikw + ρ_kiw − φ_w − ν (its too-wide row's), at most its upper bound
        i, k, w = self.cell_i, self.cell_k, self.cell_w
        reduced = duals.claim[i, k, w] + duals.claim[k, i, w] - duals.credit[w]
        has_wide = self.cell_wide >= 0
        reduced[has_wide] -= duals.wide[self.cell_wide[has_wide]]
        total += float(np.dot(self.cell_top, np.minimum(0.0, reduced)))
        if self.wide:
            total += float(np.dot(duals.wide, self.wide_lower))
        return total


def columns_of_solution(problem: SlottedProblem, model: _RunModel) -> list[RunColumn]:
    """Each job's run in the problem's upper-bound solution, with what it really shares (jobs ending past
    the cut left out: they are the master's late mass)."""
    runs = solution_runs(problem)
    columns = []
    for j, (start, end, gpus) in runs.items():
        if end > model.horizon:
            continue
        shares = []
        for k, (s2, e2, g2) in runs.items():
            common = len(gpus & g2)
            if k == j or not common:
                continue
            for t in range(max(start, s2), min(end, e2)):
                shares.append((k, t, common))
        columns.append(RunColumn(j, start, end, tuple(sorted(shares, key=lambda s: (s[1], s[0])))))
    return columns


def alone_columns(model: _RunModel) -> list[RunColumn]:
    """Every job alone at every start it may take."""
    data = model.data
    columns = []
    for j in range(model.n):
        d = int(data.min_slots[j])
        for s in range(int(data.release[j]), int(data.last_end[j]) - d + 1):
            columns.append(RunColumn(j, s, s + d))
    return columns


def run_bound(
    problem: SlottedProblem,
    *,
    time_limit: float = 60.0,
    cut: int | None = None,
    width: int = DEFAULT_WIDTH,
    grid: int = DEFAULT_GRID,
    per_job: int = 3,
    smoothing: float = SMOOTHING,
    max_rounds: int = 100_000,
    cancel: threading.Event | None = None,
) -> RunBound:
    """Lower bound on ``Σ_j E_j`` (slots) by column generation over job runs (module docstring).

    Parameters
    ----------
    problem
        A slotted problem with an upper-bound solution (total JCT, at most two jobs per GPU).
    time_limit
        Wall seconds; the best Lagrangian bound so far is returned when they run out.
    cut
        Runs end by this slot (default :func:`formulation.relaxation.default_cut`).
    width
        Slots per window of the pair claims.
    grid
        The DP's work grid per alone-slot.
    per_job
        Columns added per job and round (its best starts).
    smoothing
        Wentges' weight on the best-bound duals.
    """
    if width < 1 or grid < 1 or per_job < 1:
        raise ValueError(f"width, grid and per_job must be >= 1, got {width}, {grid}, {per_job}")
    began = time.perf_counter()
    deadline = began + time_limit
    if problem.upper_bound is None:
        return RunBound(math.nan, "skipped: needs an upper-bound solution")
    if problem.objective != "jct" or problem.capacity != 2:
        return RunBound(math.nan, "skipped: total JCT with two jobs per GPU only")
    import highspy

    cut = default_cut(problem) if cut is None else max(1, min(cut, problem.horizon))
    model = _RunModel(problem, cut, width, grid, highspy)
    model.add(columns_of_solution(problem, model))
    model.add(alone_columns(model))
    outcome = RunBound(-math.inf, "max_rounds")
    center: _Duals | None = None
    last_round = 0.0
    while outcome.rounds < max_rounds:
        if cancel is not None and cancel.is_set():
            outcome.status = "cancelled"
            break
        left = deadline - time.perf_counter()
        if left <= 0 or left < last_round:
            outcome.status = "time_limit"
            break
        round_began = tick = time.perf_counter()
        solved = model.solve(left)
        outcome.master_seconds += time.perf_counter() - tick
        if solved is None:
            outcome.status = "time_limit" if time.perf_counter() >= deadline else "failed: the master LP did not solve"
            break
        outcome.master_value, duals = solved
        outcome.rounds += 1
        weight = smoothing if center is not None else 0.0
        while True:
            point = center.mix(duals, weight) if center is not None and weight > 0 else duals
            tick = time.perf_counter()
            best, columns = model.price(point, per_job)
            outcome.pricing_seconds += time.perf_counter() - tick
            bound = model.lagrangian(point, best)
            if bound > outcome.value:
                outcome.value, center = bound, point
            entering = [c for c in columns if model.reduced_cost(c, duals) < -PRICING_TOLERANCE]
            if entering or weight == 0.0:
                break
            weight = 0.0
        outcome.history.append((time.perf_counter() - began, outcome.master_value, outcome.value))
        last_round = time.perf_counter() - round_began
        if not entering:
            outcome.value = max(outcome.value, outcome.master_value)
            outcome.status = "optimal"
            break
        if outcome.value >= outcome.master_value - PRICING_TOLERANCE * max(1.0, abs(outcome.master_value)):
            outcome.status = "optimal"
            break
        model.add(entering)
    if not math.isfinite(outcome.value):
        outcome.value = math.nan
    outcome.columns = len(model.columns)
    outcome.seconds = time.perf_counter() - began
    return outcome
