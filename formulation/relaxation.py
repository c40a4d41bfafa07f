"""A lower bound on total completion time that couples the two jobs of every shared GPU.

Why it exists: the per-job bounds (:func:`formulation.discretize.completion_sum_lower_bound`) and the
LP relaxations inside the exact models let every job share with its *own* best partner, at the best
pair's throughput everywhere, and sit 35-40 % below the schedules anyone finds from about 24 jobs on 8
GPUs (``docs/oracle.md``). Here a shared GPU-slot is one variable that serves *both* of its jobs: it
counts once against the cluster's GPUs and slows each of the two by its own ratio, so a job can only
gain from a partner that runs at the same time and pays for it. Each job's run is one block of
slots, convexified: the LP holds the distributions of its start and its end. The bound is the optimum
of this LP (fractional runs and GPUs allowed), solved by HiGHS.

Per job ``i`` (``G_i`` GPUs, least work ``W_i`` over its modes, ``U`` units per slot alone, run length
``d_i ≤ E_i − S_i ≤ D̄_i``), slot ``t`` and time window ``w = [a_w, b_w)`` (a few slots):

* ``X[i,t] = P(S_i ≤ t)``, ``Y[i,t] = P(E_i ≤ t)``: nondecreasing, ``Y[i,t] ≤ X[i,t−d_i]`` and
  ``X[i,t] ≤ Y[i,t+D̄_i]`` (a quantile coupling of the two then gives every run a length in
  ``[d_i, D̄_i]``, so these marginals are exactly the convex hull of single runs); slot ``t`` is
  occupied with probability ``X − Y`` and ``E_i = Σ_t (1 − Y[i,t])``;
* ``r[i,w] = Σ_{t∈w} (X[i,t] − Y[i,t])``: slots job ``i`` runs in ``w`` (on ``G_i`` GPUs);
* ``s[i,k,w] ≥ 0`` per pair that may share: GPU-slots on which ``i`` and ``k`` run together;
* ``p[i,w] ≥ 0``: its useful work in ``w``; ``Σ_w p[i,w] = W_i``.

Constraints (``C = 2``: a GPU holds two jobs at most, so each GPU-slot of ``i`` has one partner at most
and the shared GPU-slots of different pairs are disjoint):

* GPUs: per slot, the GPUs in use beyond ``#GPUs`` are shared ones:
  ``e_t ≥ Σ_i G_i·(X[i,t] − Y[i,t]) − #GPUs``, ``e_t ≥ 0``, and ``Σ_{t∈w} e_t ≤ Σ_{i<k} s[i,k,w]``;
* ``s[i,k,w] ≤ min(G_i, G_k)·r[i,w]`` and ``≤ min(G_i, G_k)·r[k,w]``; ``Σ_k s[i,k,w] ≤ G_i·r[i,w]``;
* progress: ``p[i,w] ≤ U·r[i,w] − loss[i,w]`` with ``λ_ik = U − σ_ik``, ``σ_ik`` the pair speed of ``i``
  next to ``k`` scaled to its fastest mode's work, in the fastest mode that fits in memory next to
  some mode of ``k`` (a job's mode is fixed for its whole run; letting it differ is a relaxation).
  A one-GPU job loses exactly ``Σ_k λ_ik·s[i,k,w]``. A gang runs at its slowest worker's pace: at
  least ``λ_ik·s[i,k,w] / min(G_i, G_k)`` for each partner (the time they run together), and at least
  ``Σ_k λ_ik·s[i,k,w] / G_i`` (at any instant the largest ratio is at least the GPU-weighted mean);
* completion, also by mean busy time (Goemans): the work of ``i`` is done at a rate of at most ``U``
  per slot, so ``E_i ≥ M_i + W_i/(2U)`` with ``M_i`` the mean time of its work; in window ``w`` that
  work starts at ``a'_w = max(a_w, release_i)`` and takes at least ``p/U`` slots, so its mean time is
  at least ``a'_w + p/(2U)``; the convex term ``p²/(2U)`` is bounded below by tangents. Also
  ``E_i ≥ release_i + d_i``.

Minimising ``Σ_i E_i`` gives the bound. Every schedule of the slotted model with objective at most the
problem's upper bound is a feasible point (its windows come from that bound), so the LP optimum, capped
by the upper bound, bounds the optimum. Wider windows make a smaller, weaker LP; the width is chosen so
that the pair-window cells stay within a budget, and an LP that would still be too large is skipped.
``C > 2`` (several partners per GPU) and the makespan objective are not covered: skipped too.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from formulation.discretize import SlotJob, SlottedProblem

DEFAULT_MAX_CELLS = 12_000
"""Pair-window cells (``s`` variables) the LP may have; the window width grows until it fits."""
DEFAULT_MAX_COLUMNS = 40_000
"""Above this many columns (start/end distributions plus cells) the LP is skipped: measured on 8
GPUs, 33 k columns solve in about 14 s (32 jobs), 57 k in 90 s (50 jobs, where windows of 50-60
slots also make it weaker than the static bound)."""
TANGENTS = (0.25, 0.5, 0.75, 1.0)
"""Where ``p²/(2U)`` is bounded below by its tangent, as fractions of a window's full-speed work."""


@dataclass(frozen=True)
class RelaxationBound:
    """Result of :func:`pair_coupled_bound`.

    Attributes
    ----------
    value
        The lower bound on ``Σ_j E_j`` in slot units (``nan`` unless ``status == "optimal"``).
    status
        ``"optimal"``, ``"time_limit"``, ``"cancelled"``, ``"failed: ..."`` or ``"skipped: <reason>"``.
    window_slots
        Width of the LP's time windows in slots.
    variables, constraints
        LP size.
    seconds
        Build and solve time.
    shared_fraction
        Share of the busy GPU time the LP's optimum spends with two jobs on a GPU (a diagnostic: how
        much the relaxation leans on sharing).
    """

    value: float
    status: str
    window_slots: int = 0
    variables: int = 0
    constraints: int = 0
    seconds: float = 0.0
    shared_fraction: float = math.nan

    @property
    def proven(self) -> bool:
        """Whether :attr:`value` is a valid bound (the LP was solved to optimality)."""
        return self.status == "optimal" and math.isfinite(self.value)


def _pair_cells(problem: SlottedProblem, width: int) -> int:
    cells = 0
    for i, k in problem.sharing_pairs:
        a, b = problem.jobs[i], problem.jobs[k]
        lo, hi = max(a.release, b.release), min(a.latest_end, b.latest_end)
        if hi > lo:
            cells += (hi - 1) // width - lo // width + 1
    return cells


def choose_window(problem: SlottedProblem, max_cells: int = DEFAULT_MAX_CELLS) -> int:
    """The narrowest window width (slots) whose pair-window cells fit in ``max_cells``."""
    width = 1
    while width < problem.horizon and _pair_cells(problem, width) > max_cells:
        width = max(width + 1, math.ceil(width * 1.25))
    return width


class _LinearProgram:
    """Column and row lists for HiGHS (rows as sparse coefficient lists)."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self.starts: list[int] = []
        self.indices: list[int] = []
        self.values: list[float] = []
        self.shared: list[int] = []  # s columns, for the shared fraction
        self.gpu_time: dict[int, int] = {}  # r column -> G_i, for the shared fraction

    def column(self, lower: float = 0.0, upper: float = math.inf, cost: float = 0.0) -> int:
        self.cost.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.cost) - 1

    def row(self, terms: list[tuple[int, float]], lower: float = -math.inf, upper: float = math.inf) -> None:
        self.starts.append(len(self.indices))
        for index, value in terms:
            self.indices.append(index)
            self.values.append(value)
        self.row_lower.append(lower)
        self.row_upper.append(upper)


def _shared_speed(problem: SlottedProblem, i: int, k: int, least_work: int) -> float:
    """Most progress per slot, in units of job ``i``'s fastest mode, that ``i`` makes next to ``k``: its
    pair speed in the fastest of its modes that fits in memory next to some mode of ``k`` (a slower
    mode needs more work for the same job)."""
    speed = problem.speed[i][k] or 0
    table = problem.memory_table(i, k)
    fitting = [mode.work for mode, row in zip(problem.jobs[i].modes, table, strict=True) if any(row)]
    return speed * least_work / min(fitting) if fitting else 0.0


def _start_end_rows(
    lp: _LinearProgram,
    job: SlotJob,
    completion: int,
    run: dict[int, int],
    width: int,
    occupied: dict[int, list[tuple[int, float]]],
    occupied_for_sure: dict[int, float],
) -> None:
    """Non-preemption, convexified: the distributions of the start and the end (cumulative
    ``X_t = P(S ≤ t)``, ``Y_t = P(E ≤ t)``) with ``d ≤ E − S ≤ D̄`` as ``Y_t ≤ X_{t−d}`` and
    ``X_t ≤ Y_{t+D̄}`` (the quantile coupling then gives every run a length in ``[d, D̄]``); slot ``t``
    is occupied with probability ``X_t − Y_t`` and ``E = Σ_t (1 − Y_t)``."""
    release, latest, d = job.release, job.latest_end, job.min_slots
    longest = max(d, min(job.max_slots, latest - release))
    # columns only where the value is open: X_t = 1 from latest − d on (started by then), Y_t = 0
    # before release + d (no run ends earlier); a slot missing from x / y has that known value
    x: dict[int, int] = {}
    y: dict[int, int] = {}
    for cumulative, first, stop in ((x, release, latest - d), (y, release + d, latest)):
        previous = None
        for t in range(first, stop):
            cumulative[t] = column = lp.column(upper=1.0)
            if previous is not None:
                lp.row([(column, 1.0), (previous, -1.0)], lower=0.0)  # nondecreasing
            previous = column
    for t, end in y.items():
        if t - d in x:
            lp.row([(end, 1.0), (x[t - d], -1.0)], upper=0.0)  # Y_t ≤ X_{t−d}
    for t, start in x.items():
        if t + longest in y:
            lp.row([(start, 1.0), (y[t + longest], -1.0)], upper=0.0)  # X_t ≤ Y_{t+D̄}
    # E = Σ_t (1 − Y_t): E + Σ Y_t ≥ latest
    lp.row([(completion, 1.0)] + [(column, 1.0) for column in y.values()], lower=float(latest))
    # occupied in slot t with probability X_t − Y_t: G·X_t − G·Y_t GPUs for the per-slot count
    gpus = float(job.num_gpus)
    for t in range(release, latest):
        gpu_terms = occupied.setdefault(t, [])
        if t in x:
            gpu_terms.append((x[t], gpus))
        else:
            occupied_for_sure[t] = occupied_for_sure.get(t, 0.0) + gpus
        if t in y:
            gpu_terms.append((y[t], -gpus))
    # run time in each window = Σ_t (X_t − Y_t)
    for w, r in run.items():
        terms: list[tuple[int, float]] = [(r, 1.0)]
        constant = 0.0
        for t in range(max(release, w * width), min(latest, (w + 1) * width)):
            if t in x:
                terms.append((x[t], -1.0))
            else:
                constant += 1.0
            if t in y:
                terms.append((y[t], 1.0))
        lp.row(terms, lower=constant, upper=constant)


def _build(problem: SlottedProblem, width: int) -> _LinearProgram:
    jobs = problem.jobs
    units = problem.units_per_slot
    gpus = [job.num_gpus for job in jobs]
    work = [min(mode.work for mode in job.modes) for job in jobs]
    windows = [(a, min(problem.horizon, a + width)) for a in range(0, problem.horizon, width)]
    lp = _LinearProgram()

    def job_windows(i: int) -> range:
        job = jobs[i]
        return range(job.release // width, (max(job.latest_end, job.release + 1) - 1) // width + 1)

    def available(i: int, w: int) -> int:
        a, b = windows[w]
        return max(0, min(b, jobs[i].latest_end) - max(a, jobs[i].release))

    run: dict[tuple[int, int], int] = {}
    progress: dict[tuple[int, int], int] = {}
    occupied: dict[int, list[tuple[int, float]]] = {}  # slot -> G_i·X_it and −G_i·Y_it terms
    occupied_for_sure: dict[int, float] = {}  # slot -> GPUs of jobs surely started (X = 1)
    for i, job in enumerate(jobs):
        completion = lp.column(lower=job.release + job.min_slots, cost=1.0)
        mean_busy: list[tuple[int, float]] = [(completion, -1.0)]
        total: list[tuple[int, float]] = []
        for w in job_windows(i):
            length = available(i, w)
            if length <= 0:
                continue
            run[(i, w)] = lp.column(upper=float(length))
            lp.gpu_time[run[(i, w)]] = job.num_gpus
            progress[(i, w)] = p = lp.column()
            total.append((p, 1.0))
            start = max(windows[w][0], job.release)
            square = lp.column()  # ≥ p²/(2U), by tangents at x0: p·x0/U − x0²/(2U)
            for fraction in TANGENTS:
                x0 = fraction * units * length
                lp.row([(p, x0 / units), (square, -1.0)], upper=x0 * x0 / (2 * units))
            mean_busy += [(p, start / work[i]), (square, 1.0 / work[i])]
        lp.row(total, lower=work[i], upper=work[i])
        # E_i ≥ Σ_w (a'_w·p + p²/(2U)) / W_i + W_i / (2U)
        lp.row(mean_busy, upper=-work[i] / (2 * units))
        _start_end_rows(
            lp,
            job,
            completion,
            {w: run[(i, w)] for w in job_windows(i) if (i, w) in run},
            width,
            occupied,
            occupied_for_sure,
        )

    shared: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (job, window) -> [(s column, partner)]
    shared_in_window: dict[int, list[tuple[int, float]]] = {}
    for i, k in problem.sharing_pairs:
        both = min(gpus[i], gpus[k])
        for w in range(len(windows)):
            if (i, w) not in run or (k, w) not in run:
                continue
            s = lp.column()
            lp.shared.append(s)
            lp.row([(s, 1.0), (run[(i, w)], -float(both))], upper=0.0)
            lp.row([(s, 1.0), (run[(k, w)], -float(both))], upper=0.0)
            shared_in_window.setdefault(w, []).append((s, -1.0))
            shared.setdefault((i, w), []).append((s, k))
            shared.setdefault((k, w), []).append((s, i))
    # GPUs, per slot: the GPUs in use beyond #GPUs are shared ones, e_t ≥ Σ_i G_i·occ_it − #GPUs, and
    # the window's shared GPU time pays for them: Σ_{t∈w} e_t ≤ Σ_{i<k} s[i,k,w] (C = 2)
    excess: dict[int, list[tuple[int, float]]] = {}
    for t, terms in sorted(occupied.items()):
        e = lp.column()
        lp.row([(e, 1.0)] + [(c, -v) for c, v in terms], lower=occupied_for_sure.get(t, 0.0) - problem.num_gpus)
        excess.setdefault(t // width, []).append((e, 1.0))
    for w, terms in excess.items():
        lp.row(terms + shared_in_window.get(w, []), upper=0.0)
    for (i, w), r in run.items():
        partners = shared.get((i, w), [])
        p = progress[(i, w)]
        if partners:
            lp.row([(s, 1.0) for s, _ in partners] + [(r, -float(gpus[i]))], upper=0.0)
        losses = [(s, units - _shared_speed(problem, i, k, work[i]), k) for s, k in partners]
        if gpus[i] == 1:
            lp.row([(p, 1.0), (r, -float(units))] + [(s, loss) for s, loss, _ in losses if loss], upper=0.0)
            continue
        if not any(loss for _, loss, _ in losses):
            lp.row([(p, 1.0), (r, -float(units))], upper=0.0)
            continue
        slowest = lp.column()
        lp.row([(p, 1.0), (r, -float(units)), (slowest, 1.0)], upper=0.0)
        for s, loss, k in losses:
            if loss:
                lp.row([(s, loss / min(gpus[i], gpus[k])), (slowest, -1.0)], upper=0.0)
        lp.row([(s, loss / gpus[i]) for s, loss, _ in losses if loss] + [(slowest, -1.0)], upper=0.0)
    return lp


def pair_coupled_bound(
    problem: SlottedProblem,
    *,
    max_cells: int | None = None,
    max_columns: int | None = None,
    window_slots: int | None = None,
    time_limit: float | None = None,
    cancel: threading.Event | None = None,
) -> RelaxationBound:
    """Lower bound on ``Σ_j E_j`` (slot units) from the pair-coupled LP (see the module docstring).

    Parameters
    ----------
    problem
        The slotted problem (its windows, from its upper bound, limit the LP's time axis).
    max_cells
        Budget of pair-window cells that sets the window width (ignored if ``window_slots`` is given).
        Default: :data:`DEFAULT_MAX_CELLS`, scaled with ``time_limit`` (the default is sized for a
        minute; a quarter to four times it).
    max_columns
        Skip the LP (status ``"skipped: ..."``) when its estimated size exceeds this. Default:
        :data:`DEFAULT_MAX_COLUMNS`, scaled like ``max_cells``.
    window_slots
        Window width in slots (default: :func:`choose_window`).
    time_limit
        Seconds for building and solving; a bound is returned only if the LP is solved to optimality.
    cancel
        When set (from another thread), HiGHS stops at its next simplex check and the status is
        ``"cancelled"``: a solver that proved optimality need not wait for the bound.

    Returns
    -------
    RelaxationBound
        ``value`` capped at the problem's upper bound when it has one.
    """
    began = time.perf_counter()
    if problem.objective != "jct":
        return RelaxationBound(math.nan, "skipped: the bound is for total JCT only")
    if problem.capacity != 2:
        return RelaxationBound(math.nan, "skipped: the bound assumes at most two jobs per GPU")
    import highspy  # lazily: HiGHS loads a shared library

    # the LP's size follows the time it has: the defaults are sized for a minute (measured)
    scale = 1.0 if time_limit is None else min(4.0, max(0.25, time_limit / 60.0))
    max_cells = round(DEFAULT_MAX_CELLS * scale) if max_cells is None else max_cells
    max_columns = round(DEFAULT_MAX_COLUMNS * scale) if max_columns is None else max_columns
    width = window_slots or choose_window(problem, max_cells)
    columns = 2 * sum(job.latest_end - job.release for job in problem.jobs) + _pair_cells(problem, width)
    if columns > max_columns:
        return RelaxationBound(
            math.nan, f"skipped: about {columns} columns (more than {max_columns})", width, columns, 0, 0.0
        )
    lp = _build(problem, width)
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", 1)
    if time_limit is not None:  # counted from the call: building the LP takes part of it
        highs.setOptionValue("time_limit", max(0.01, float(time_limit) - (time.perf_counter() - began)))
    num_cols, num_rows = len(lp.cost), len(lp.row_lower)
    inf = highspy.kHighsInf

    def finite(values: list[float]) -> np.ndarray:
        return np.array([min(max(v, -inf), inf) for v in values], dtype=np.float64)

    highs.addVars(num_cols, finite(lp.lower), finite(lp.upper))
    highs.changeColsCost(num_cols, np.arange(num_cols, dtype=np.int32), np.array(lp.cost, dtype=np.float64))
    highs.addRows(
        num_rows,
        finite(lp.row_lower),
        finite(lp.row_upper),
        len(lp.indices),
        np.array(lp.starts, dtype=np.int32),
        np.array(lp.indices, dtype=np.int32),
        np.array(lp.values, dtype=np.float64),
    )
    if cancel is not None:
        stop = cancel

        def interrupt_if_cancelled(event: Any) -> None:
            if stop.is_set():
                event.interrupt()

        highs.cbSimplexInterrupt += interrupt_if_cancelled
    highs.run()
    model_status = highs.getModelStatus()
    seconds = time.perf_counter() - began
    shared_fraction = math.nan
    if model_status == highspy.HighsModelStatus.kOptimal:
        value = float(highs.getInfo().objective_function_value)
        if problem.upper_bound_value is not None:
            value = min(value, float(problem.upper_bound_value))
        status = "optimal"
        solution = highs.getSolution().col_value
        busy = sum(solution[column] * count for column, count in lp.gpu_time.items())
        if busy > 0:
            shared_fraction = sum(solution[column] for column in lp.shared) / busy
    else:
        value = math.nan
        if model_status == highspy.HighsModelStatus.kTimeLimit:
            status = "time_limit"
        elif cancel is not None and cancel.is_set():
            status = "cancelled"
        else:
            status = f"failed: {highs.modelStatusToString(model_status)}"
    return RelaxationBound(value, status, width, num_cols, num_rows, seconds, shared_fraction)
