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
  ``E_i ≥ release_i + d_i``;
* too large to run side by side (``G_i + G_k > #GPUs``): whenever both run they share at least
  ``G_i + G_k − #GPUs`` GPUs, and both run in at least ``r[i,w] + r[k,w] − |w|`` slots of ``w`` (``|w|``
  at most the window width), so ``s[i,k,w] ≥ (G_i + G_k − #GPUs)·(r[i,w] + r[k,w] − |w|)``; if they
  may not share, ``r[i,w] + r[k,w] ≤ |w|``.

Minimising ``Σ_i E_i`` gives the bound. Every schedule of the slotted model with objective at most the
problem's upper bound is a feasible point (its windows come from that bound), so the LP optimum, capped
by the upper bound, bounds the optimum. ``C > 2`` (several partners per GPU) and the makespan objective
are not covered: skipped.

Size (``docs/oracle.md``): columns stop at a ``cut`` (1.25 × the upper-bound schedule's makespan);
past it a job's work has no GPU limit and ``E[(E − cut)⁺] ≥ p_tail / U`` (a relaxation). The cells
``s[i,k,w]`` enter by column generation (:class:`_Pricing`): the LP starts with each job's best
partners, and every missing cell is priced with the row duals until none has a negative reduced
cost; stopped early, the last solve still gives a Lagrangian bound. Wider windows make a smaller,
weaker LP: :func:`refined_coupled_bound` solves a coarse one first, then halves the width while time
lasts.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from formulation.discretize import SlotJob, SlottedProblem, evaluate

DEFAULT_MAX_CELLS = 12_000
"""Pair-window cells (``s`` variables) the LP may have; the window width grows until it fits."""
DEFAULT_MAX_COLUMNS = 40_000
"""Above this many columns (start/end distributions plus cells) the LP is skipped: measured on 8
GPUs, 33 k columns solve in about 14 s (32 jobs), 57 k in 90 s (50 jobs, where windows of 50-60
slots also make it weaker than the static bound)."""
CUT_FACTOR = 1.25
"""The LP's time axis ends at this times the upper-bound schedule's makespan (:func:`default_cut`)."""
INITIAL_PARTNERS = 3
"""Cells the LP starts with: those of each job's best partners (by pair throughput); pricing adds
the others that can lower it."""
PRICING_TOLERANCE = 1e-7
"""A cell enters the LP when its reduced cost is below minus this."""
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
    rounds
        LP solves of the column generation (each prices the cells not yet in the LP).
    active_pairs
        Pairs ``(i, k)`` (job indices, ``i < k``) that share in the LP's optimum: a finer LP of the
        same problem starts with their cells (:func:`refined_coupled_bound`).
    others
        ``[j]``: a lower bound on ``Σ_{k≠j} E_k`` (slots) over every schedule in the problem's windows,
        from the last solve's duals with job ``j`` deleted (:func:`_others_bounds`); ``None`` unless asked
        for (``others=True``) and the last solve finished.
    """

    value: float
    status: str
    window_slots: int = 0
    variables: int = 0
    constraints: int = 0
    seconds: float = 0.0
    shared_fraction: float = math.nan
    rounds: int = 0
    active_pairs: frozenset[tuple[int, int]] = frozenset()
    others: tuple[float, ...] | None = None

    @property
    def proven(self) -> bool:
        """Whether :attr:`value` is a valid bound: the LP's optimum, or (stopped before the last cells
        entered) the Lagrangian bound of the last solved LP."""
        return math.isfinite(self.value)


def _pair_cells(problem: SlottedProblem, width: int, cut: int) -> int:
    cells = 0
    for i, k in problem.sharing_pairs:
        a, b = problem.jobs[i], problem.jobs[k]
        lo, hi = max(a.release, b.release), min(a.latest_end, b.latest_end, cut)
        if hi > lo:
            cells += (hi - 1) // width - lo // width + 1
    return cells


def choose_window(
    problem: SlottedProblem,
    max_cells: int = DEFAULT_MAX_CELLS,
    *,
    cut: int | None = None,
) -> int:
    """The narrowest window width (slots) whose candidate pair-window cells fit in ``max_cells`` (time
    axis up to ``cut``, default the horizon)."""
    cut = problem.horizon if cut is None else cut
    width = 1
    while width < cut and _pair_cells(problem, width, cut) > max_cells:
        width = max(width + 1, math.ceil(width * 1.25))
    return width


def default_cut(problem: SlottedProblem) -> int:
    """Where the LP's time axis ends by default: :data:`CUT_FACTOR` times the makespan of the problem's
    upper-bound schedule (the horizon without one). Past it only the work is counted (a relaxation), and
    an LP optimum seldom runs anything that late: at 24 jobs the bound moves by 0.03 %."""
    if problem.upper_bound is None:
        return problem.horizon
    makespan = max(evaluate(problem, dict(problem.upper_bound)).values(), default=problem.horizon)
    return max(1, min(problem.horizon, math.ceil(CUT_FACTOR * makespan)))


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
        self.gpu_time: dict[int, int] = {}  # r column -> G_i, for the shared fraction
        # whose each column is (a job's index; -1: shared by all), for the bounds on the others
        # (:func:`_others_bounds`): new columns take `owner`
        self.owner = -1
        self.column_owner: list[int] = []
        # row -> {job: the part of the row's lower bound that comes from that job}
        self.row_constants: dict[int, dict[int, float]] = {}

    def column(self, lower: float = 0.0, upper: float = math.inf, cost: float = 0.0) -> int:
        self.column_owner.append(self.owner)
        self.cost.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.cost) - 1

    def row(self, terms: list[tuple[int, float]], lower: float = -math.inf, upper: float = math.inf) -> int:
        self.starts.append(len(self.indices))
        for index, value in terms:
            self.indices.append(index)
            self.values.append(value)
        self.row_lower.append(lower)
        self.row_upper.append(upper)
        return len(self.row_lower) - 1


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
    cut: int,
    tail: tuple[int, float] | None,
    occupied: dict[int, list[tuple[int, float]]],
    occupied_for_sure: dict[int, dict[int, float]],
    index: int,
) -> None:
    """Non-preemption, convexified: the distributions of the start and the end (cumulative
    ``X_t = P(S ≤ t)``, ``Y_t = P(E ≤ t)``) with ``d ≤ E − S ≤ D̄`` as ``Y_t ≤ X_{t−d}`` and
    ``X_t ≤ Y_{t+D̄}`` (the quantile coupling then gives every run a length in ``[d, D̄]``); slot ``t``
    is occupied with probability ``X_t − Y_t`` and ``E = Σ_t (1 − Y_t)``. Only slots before ``cut`` have
    columns; past it (``tail``: the column of the work done there and ``U``) the end is bounded by
    ``E[(E − cut)⁺] ≥ p_tail / U``."""
    release, latest, d = job.release, job.latest_end, job.min_slots
    longest = max(d, min(job.max_slots, latest - release))
    # columns only where the value is open: X_t = 1 from latest − d on (started by then), Y_t = 0
    # before release + d (no run ends earlier); a slot missing from x / y has that known value
    x: dict[int, int] = {}
    y: dict[int, int] = {}
    for cumulative, first, stop in ((x, release, min(latest - d, cut)), (y, release + d, min(latest, cut))):
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
    if tail is None:  # E = Σ_t (1 − Y_t): E + Σ Y_t ≥ latest
        lp.row([(completion, 1.0)] + [(column, 1.0) for column in y.values()], lower=float(latest))
    else:  # E = Σ_{t<cut} (1 − Y_t) + E[(E − cut)⁺] ≥ cut − Σ_{t<cut} Y_t + p_tail / U
        column, units = tail
        lp.row([(completion, 1.0), (column, -1.0 / units)] + [(c, 1.0) for c in y.values()], lower=float(cut))
    # occupied in slot t with probability X_t − Y_t: G·X_t − G·Y_t GPUs for the per-slot count
    gpus = float(job.num_gpus)
    for t in range(release, min(latest, cut)):
        gpu_terms = occupied.setdefault(t, [])
        if t in x:
            gpu_terms.append((x[t], gpus))
        else:
            sure = occupied_for_sure.setdefault(t, {})
            sure[index] = sure.get(index, 0.0) + gpus
        if t in y:
            gpu_terms.append((y[t], -gpus))
    # run time in each window = Σ_t (X_t − Y_t)
    for w, r in run.items():
        terms: list[tuple[int, float]] = [(r, 1.0)]
        constant = 0.0
        for t in range(max(release, w * width), min(latest, (w + 1) * width, cut)):
            if t in x:
                terms.append((x[t], -1.0))
            else:
                constant += 1.0
            if t in y:
                terms.append((y[t], 1.0))
        lp.row(terms, lower=constant, upper=constant)


def _mean_busy_terms(
    lp: _LinearProgram, p: int, start: int, length: int, units: int, work: int
) -> list[tuple[int, float]]:
    """Terms of ``(a'·p + p²/(2U)) / W`` for work ``p`` done from slot ``a'`` on (tangents of the
    square at fractions of the ``length`` slots' full-speed work)."""
    square = lp.column()  # ≥ p²/(2U), by tangents at x0: p·x0/U − x0²/(2U)
    for fraction in TANGENTS:
        x0 = fraction * units * length
        lp.row([(p, x0 / units), (square, -1.0)], upper=x0 * x0 / (2 * units))
    return [(p, start / work), (square, 1.0 / work)]


def _build(problem: SlottedProblem, width: int, cut: int | None = None) -> tuple[_LinearProgram, _Cells]:
    """The LP without its pair-window cells, and the cells' bookkeeping."""
    jobs = problem.jobs
    units = problem.units_per_slot
    cut = problem.horizon if cut is None else min(cut, problem.horizon)
    pairs = problem.sharing_pairs
    gpus = [job.num_gpus for job in jobs]
    work = [min(mode.work for mode in job.modes) for job in jobs]
    windows = [(a, min(cut, a + width)) for a in range(0, cut, width)]
    lp = _LinearProgram()

    def job_windows(i: int) -> range:
        job = jobs[i]
        stop = min(job.latest_end, cut)
        if job.release >= stop:
            return range(0)
        return range(job.release // width, (stop - 1) // width + 1)

    def available(i: int, w: int) -> int:
        a, b = windows[w]
        return max(0, min(b, jobs[i].latest_end) - max(a, jobs[i].release))

    run: dict[tuple[int, int], int] = {}
    progress: dict[tuple[int, int], int] = {}
    occupied: dict[int, list[tuple[int, float]]] = {}  # slot -> G_i·X_it and −G_i·Y_it terms
    occupied_for_sure: dict[int, dict[int, float]] = {}  # slot -> job -> GPUs of jobs surely started (X = 1)
    for i, job in enumerate(jobs):
        lp.owner = i
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
            mean_busy += _mean_busy_terms(lp, p, max(windows[w][0], job.release), length, units, work[i])
        tail = None
        if job.latest_end > cut:  # past the cut: no GPU limit, the end bounded by the work left
            p = lp.column()
            total.append((p, 1.0))
            start = max(cut, job.release)
            mean_busy += _mean_busy_terms(lp, p, start, job.latest_end - start, units, work[i])
            tail = (p, float(units))
        lp.row(total, lower=work[i], upper=work[i])
        # E_i ≥ Σ_w (a'_w·p + p²/(2U)) / W_i + W_i / (2U)
        lp.row(mean_busy, upper=-work[i] / (2 * units))
        _start_end_rows(
            lp,
            job,
            completion,
            {w: run[(i, w)] for w in job_windows(i) if (i, w) in run},
            width,
            cut,
            tail,
            occupied,
            occupied_for_sure,
            i,
        )
    lp.owner = -1

    # GPUs, per slot: the GPUs in use beyond #GPUs are shared ones, e_t ≥ Σ_i G_i·occ_it − #GPUs, and
    # the window's shared GPU time pays for them: Σ_{t∈w} e_t ≤ Σ_{i<k} s[i,k,w] (C = 2)
    excess: dict[int, list[tuple[int, float]]] = {}
    for t, terms in sorted(occupied.items()):
        e = lp.column()
        sure = occupied_for_sure.get(t, {})
        row = lp.row([(e, 1.0)] + [(c, -v) for c, v in terms], lower=sum(sure.values()) - problem.num_gpus)
        if sure:
            lp.row_constants[row] = sure
        excess.setdefault(t // width, []).append((e, 1.0))
    # jobs too large to run side by side that may not share either never overlap: per window their
    # run times add up to its length at most
    for i, k in problem.conflict_pairs:
        if gpus[i] + gpus[k] > problem.num_gpus:
            for w, (a, b) in enumerate(windows):
                if (i, w) in run and (k, w) in run:
                    lp.row([(run[(i, w)], 1.0), (run[(k, w)], 1.0)], upper=float(b - a))
    cells = _Cells(problem, width, pairs, run, work)
    for w, terms in excess.items():
        cells.excess_row[w] = lp.row(terms, upper=0.0)
    sharing = {i for pair in pairs for i in pair}
    for (i, w), r in run.items():
        p = progress[(i, w)]
        if i not in sharing:
            lp.row([(p, 1.0), (r, -float(units))], upper=0.0)
            continue
        # Σ_k s[i,k,w] ≤ G_i·r[i,w]: one partner per GPU-slot (C = 2)
        cells.share_row[(i, w)] = lp.row([(r, -float(gpus[i]))], upper=0.0)
        if gpus[i] == 1:  # p ≤ U·r − Σ_k λ_ik·s[i,k,w]
            cells.loss_row[(i, w)] = lp.row([(p, 1.0), (r, -float(units))], upper=0.0)
            continue
        # a gang at its slowest worker's pace: p ≤ U·r − slowest, slowest ≥ Σ_k λ_ik·s[i,k,w] / G_i
        # (and ≥ λ_ik·s[i,k,w] / min(G_i, G_k) per partner, a row that comes with the cell)
        lp.owner = i
        slowest = lp.column()
        lp.owner = -1
        cells.slowest[(i, w)] = slowest
        lp.row([(p, 1.0), (r, -float(units)), (slowest, 1.0)], upper=0.0)
        cells.loss_row[(i, w)] = lp.row([(slowest, -1.0)], upper=0.0)
    return lp, cells


class _Cells:
    """The pair-window cells ``s[i,k,w]`` (shared GPU-slots of jobs ``i`` and ``k`` in window ``w``) and
    what one brings to the LP, so that they can enter it by pricing (column generation): a cell is a
    column in its window's GPU-excess row, both jobs' one-partner-per-GPU-slot rows and loss rows, with
    rows of its own (``s ≤ min(G_i, G_k)·r`` for both jobs; the per-partner pace of a gang)."""

    def __init__(
        self,
        problem: SlottedProblem,
        width: int,
        pairs: tuple[tuple[int, int], ...],
        run: dict[tuple[int, int], int],
        work: list[int],
    ) -> None:
        self.problem = problem
        self.units = problem.units_per_slot
        self.gpus = [job.num_gpus for job in problem.jobs]
        self.width = width
        self.run = run
        self.excess_row: dict[int, int] = {}
        self.share_row: dict[tuple[int, int], int] = {}
        self.loss_row: dict[tuple[int, int], int] = {}
        self.slowest: dict[tuple[int, int], int] = {}
        self.pairs = pairs
        # σ of each job next to each partner, and the loss λ = U − σ it costs a shared GPU-slot
        self.speed = {(a, b): _shared_speed(problem, a, b, work[a]) for i, k in pairs for a, b in ((i, k), (k, i))}
        self.loss = {key: self.units - speed for key, speed in self.speed.items()}

    def best_partner_pairs(self, partners: int) -> set[tuple[int, int]]:
        """Pairs among the ``partners`` best of either job (by pair throughput ``σ_ik + σ_ki``)."""
        ranked: dict[int, list[tuple[float, int]]] = {}
        for i, k in self.pairs:
            throughput = self.speed[(i, k)] + self.speed[(k, i)]
            ranked.setdefault(i, []).append((-throughput, k))
            ranked.setdefault(k, []).append((-throughput, i))
        chosen: set[tuple[int, int]] = set()
        for i, options in ranked.items():
            for _, k in sorted(options)[:partners]:
                chosen.add((min(i, k), max(i, k)))
        return chosen

    def candidates(self) -> list[tuple[int, int, int]]:
        """Every cell: explicit pair and window where both jobs may run."""
        windows: dict[int, list[int]] = {}
        for i, w in self.run:
            windows.setdefault(i, []).append(w)
        return [
            (i, k, w) for i, k in self.pairs for w in windows.get(i, ()) if (k, w) in self.run and w in self.excess_row
        ]

    def entries(self, i: int, k: int, w: int) -> list[tuple[int, float]]:
        """The cell's coefficients in the LP's existing rows."""
        terms = [(self.excess_row[w], -1.0), (self.share_row[(i, w)], 1.0), (self.share_row[(k, w)], 1.0)]
        for a, b in ((i, k), (k, i)):
            loss = self.loss[(a, b)]
            if loss > 0:
                terms.append((self.loss_row[(a, w)], loss / (1 if self.gpus[a] == 1 else self.gpus[a])))
        return terms

    def upper(self, i: int, k: int, w: int) -> float:
        """Most shared GPU-slots in the cell (both jobs through the window): a box for the pricing bound."""
        both = min(self.gpus[i], self.gpus[k])
        return float(both * self.width)

    def forced(self, i: int, k: int) -> int:
        """GPUs the two jobs share whenever they run at the same time (pigeonhole: ``G_i + G_k − #GPUs``)."""
        return max(0, self.gpus[i] + self.gpus[k] - self.problem.num_gpus)

    def own_rows(self, i: int, k: int, w: int, column: int) -> list[tuple[list[tuple[int, float]], float]]:
        """Rows ``terms ≤ upper`` that come with the cell."""
        both = float(min(self.gpus[i], self.gpus[k]))
        rows = [
            ([(column, 1.0), (self.run[(i, w)], -both)], 0.0),
            ([(column, 1.0), (self.run[(k, w)], -both)], 0.0),
        ]
        for a, b in ((i, k), (k, i)):
            loss = self.loss[(a, b)]
            if self.gpus[a] > 1 and loss > 0:
                rows.append(([(column, loss / min(self.gpus[a], self.gpus[b])), (self.slowest[(a, w)], -1.0)], 0.0))
        forced = float(self.forced(i, k))
        if forced:
            # jobs too large to run side by side share ≥ `forced` GPUs in every slot both run, and both
            # run in at least r_i + r_k − |w| of the window's slots: s ≥ forced·(r_i + r_k − |w|). Not
            # slack at s = 0: such cells are in the LP from the start (never priced)
            terms = [(column, -1.0), (self.run[(i, w)], forced), (self.run[(k, w)], forced)]
            rows.append((terms, forced * self.width))
        return rows


def pair_coupled_bound(
    problem: SlottedProblem,
    *,
    max_cells: int | None = None,
    max_columns: int | None = None,
    window_slots: int | None = None,
    cut: int | None = None,
    initial_partners: int = INITIAL_PARTNERS,
    initial_pairs: frozenset[tuple[int, int]] = frozenset(),
    max_rounds: int | None = None,
    time_limit: float | None = None,
    cancel: threading.Event | None = None,
    others: bool = False,
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
    cut
        Slots with columns; past them no GPU limit and the end is bounded by the work left (default:
        :data:`CUT_FACTOR` times the makespan of the problem's upper-bound schedule, else the horizon).
    initial_partners
        The LP starts with the cells of each job's that many best partners; pricing adds the rest.
    initial_pairs
        Pairs ``(i, k)`` (``i < k``) whose cells the LP starts with as well, e.g. the
        :attr:`RelaxationBound.active_pairs` of a coarser LP of the same problem.
    max_rounds
        Stop pricing after this many LP solves (default: until no cell can lower the LP).
    time_limit
        Seconds for building and solving. Stopped before the last cells entered (time, rounds, a
        failed re-solve), the value is the Lagrangian bound of the last solved LP.
    cancel
        When set (from another thread), HiGHS stops at its next simplex check and the status is
        ``"cancelled"``: a solver that proved optimality need not wait for the bound.
    others
        Also bound ``Σ_{k≠j} E_k`` for every job ``j`` from each solve's duals
        (:attr:`RelaxationBound.others`, the elementwise best over the solves): what narrows the jobs'
        latest ends (:func:`formulation.lanes.latest_ends`).

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
    cut = default_cut(problem) if cut is None else max(1, min(cut, problem.horizon))
    width = window_slots or choose_window(problem, max_cells, cut=cut)
    columns = 2 * sum(max(0, min(job.latest_end, cut) - job.release) for job in problem.jobs)
    if columns > max_columns:
        return RelaxationBound(
            math.nan, f"skipped: about {columns} columns (more than {max_columns})", width, columns, 0, 0.0
        )
    lp, cells = _build(problem, width, cut)
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", 1)
    inf = highspy.kHighsInf

    def finite(values: list[float]) -> np.ndarray:
        return np.array([min(max(v, -inf), inf) for v in values], dtype=np.float64)

    num_cols, num_rows = len(lp.cost), len(lp.row_lower)
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
    pricing = _Pricing(cells, num_rows)
    pricing.add(highs, pricing.initial(initial_partners, initial_pairs))
    best = -math.inf
    others_best: np.ndarray | None = None
    rounds = 0
    status = "failed: not solved"
    while True:
        if time_limit is not None:  # counted from the call: building the LP takes part of it
            left = float(time_limit) - (time.perf_counter() - began)
            if left <= 0:
                status = "time_limit"
                break
            highs.setOptionValue("time_limit", highs.getRunTime() + left)
        highs.run()
        rounds += 1
        model_status = highs.getModelStatus()
        retry = model_status not in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit)
        if retry and rounds > 1 and not (cancel is not None and cancel.is_set()):
            # seen once in a while: a re-solve from the previous basis ends "unknown" after new cells
            # entered; solving again from scratch settles it
            highs.clearSolver()
            highs.run()
            model_status = highs.getModelStatus()
        if model_status != highspy.HighsModelStatus.kOptimal:
            if model_status == highspy.HighsModelStatus.kTimeLimit:
                status = "time_limit"
            elif cancel is not None and cancel.is_set():
                status = "cancelled"
            else:
                status = f"failed: {highs.modelStatusToString(model_status)}"
            break
        value, entering = pricing.price(highs)
        best = max(best, value)
        if others:
            bounds = _others_bounds(highs, lp, pricing, problem.num_jobs)
            if bounds is not None:
                others_best = bounds if others_best is None else np.maximum(others_best, bounds)
        if len(entering) == 0:
            status = "optimal"
            break
        if max_rounds is not None and rounds >= max_rounds:
            status = "rounds"
            break
        pricing.add(highs, entering)
    seconds = time.perf_counter() - began
    shared_fraction = math.nan
    active: frozenset[tuple[int, int]] = frozenset()
    if math.isfinite(best) and problem.upper_bound_value is not None:
        best = min(best, float(problem.upper_bound_value))
    if status in ("optimal", "rounds"):  # the last solve finished: its solution is the LP's
        solution = highs.getSolution().col_value
        busy = sum(solution[column] * count for column, count in lp.gpu_time.items())
        if busy > 0:
            shared_fraction = sum(solution[column] for column in pricing.columns) / busy
        active = pricing.active_pairs(solution)
    value = best if math.isfinite(best) else math.nan
    num_cols, num_rows = highs.getNumCol(), highs.getNumRow()
    return RelaxationBound(
        value,
        status,
        width,
        num_cols,
        num_rows,
        seconds,
        shared_fraction,
        rounds,
        active,
        None if others_best is None else tuple(float(v) for v in others_best),
    )


def refined_coupled_bound(
    problem: SlottedProblem,
    *,
    time_limit: float,
    max_cells: int | None = None,
    cancel: threading.Event | None = None,
    on_bound: Callable[[RelaxationBound], bool] | None = None,
    others: bool = False,
    start: RelaxationBound | None = None,
) -> RelaxationBound:
    """:func:`pair_coupled_bound` at the width its budget (``max_cells``) picks, then at half that
    width, and so on down to one slot while ``time_limit`` (seconds, for all of it) leaves the next
    LP (about twice as slow as the last) time to finish: narrower windows give a stronger but larger
    LP, and the first, coarse one makes sure a bound comes in time. Each bound is passed to
    ``on_bound`` as it is proven, which says whether to go on (a solver whose own bound is higher has
    no use for a finer LP); the best one is returned (``seconds``: the whole refinement). ``others``:
    each LP also bounds the others' ends (:attr:`RelaxationBound.others`). ``start``: an LP of this
    problem already solved (one level of this refinement); the refinement goes on from the next width
    (from the first again if it was stopped before its optimum; it stays the best if nothing beats it).
    """
    began = time.perf_counter()
    best: RelaxationBound | None = None
    width: int | None = None
    if start is not None and start.proven:
        best = start
        if start.status == "optimal":  # else (stopped early) solved again from the first width
            if start.window_slots <= 1:
                return start
            width = start.window_slots // 2
    while True:
        left = time_limit - (time.perf_counter() - began)
        if left <= 0 or (cancel is not None and cancel.is_set()):
            break
        # a finer LP starts with the cells of the pairs the last one shared: measured 15-45 % faster
        # (fewer pricing rounds and smaller ones) than from each job's best partners alone
        outcome = pair_coupled_bound(
            problem,
            max_cells=max_cells,
            window_slots=width,
            time_limit=left,
            cancel=cancel,
            initial_pairs=best.active_pairs if best is not None else frozenset(),
            others=others,
        )
        go_on = on_bound(outcome) if outcome.proven and on_bound is not None else True
        if best is None or (outcome.proven and not (best.proven and best.value >= outcome.value)):
            best = outcome
        if not go_on or outcome.status != "optimal" or outcome.window_slots <= 1:
            break
        if time_limit - (time.perf_counter() - began) < 2 * outcome.seconds:
            break  # half the width takes about twice as long (measured): it would not finish
        width = outcome.window_slots // 2
    if best is None:
        return RelaxationBound(math.nan, "time_limit")
    return replace(best, seconds=time.perf_counter() - began)


class _Pricing:
    """Column generation over the pair-window cells: the LP starts with the cells of each job's best
    partners; after each solve every cell not yet in it is priced with the row duals (its reduced
    cost ``−Σ_r y_r·a_r``, over the rows it would enter), the most negative enter, and the loop ends
    when none is negative, at the optimum of the LP with every cell. Each solve also gives a valid
    bound before that (Lagrangian, with the missing cells boxed by ``[0, u]``):
    ``z + Σ_cells u·min(0, reduced cost)``."""

    def __init__(self, cells: _Cells, base_rows: int) -> None:
        self.cells = cells
        self.candidates = cells.candidates()
        count = len(self.candidates)
        self.rows = np.full((count, 5), base_rows, dtype=np.int64)  # base_rows: a dual of 0
        self.coefficients = np.zeros((count, 5), dtype=np.float64)
        for c, (i, k, w) in enumerate(self.candidates):
            for j, (row, value) in enumerate(cells.entries(i, k, w)):
                self.rows[c, j] = row
                self.coefficients[c, j] = value
        self.upper = np.array([cells.upper(i, k, w) for i, k, w in self.candidates], dtype=np.float64)
        self.in_model = np.zeros(count, dtype=bool)
        self.columns: list[int] = []
        self.column_cells: list[int] = []  # the candidate of each column in self.columns
        self.base_rows = base_rows
        self.batch = max(1000, 40 * len(cells.problem.jobs))  # measured: fewer, larger rounds are faster
        self.reduced = np.zeros(count, dtype=np.float64)  # the missing cells' reduced costs at the last pricing

    def initial(self, partners: int, pairs: frozenset[tuple[int, int]] = frozenset()) -> np.ndarray:
        """The cells of each job's ``partners`` best partners (:meth:`_Cells.best_partner_pairs`) and of
        the pairs that must share when they run together (their cells carry a row that is not slack at
        ``s = 0``, so they cannot be priced in)."""
        chosen = self.cells.best_partner_pairs(partners) | pairs
        return np.array(
            [c for c, (i, k, _) in enumerate(self.candidates) if (i, k) in chosen or self.cells.forced(i, k)],
            dtype=np.int64,
        )

    def add(self, highs: Any, entering: np.ndarray) -> None:
        if len(entering) == 0:
            return
        first = highs.getNumCol()
        starts: list[int] = []
        indices: list[int] = []
        values: list[float] = []
        for c in entering:
            starts.append(len(indices))
            for row, value in zip(self.rows[c], self.coefficients[c], strict=True):
                if row < self.base_rows:
                    indices.append(int(row))
                    values.append(float(value))
        count = len(entering)
        highs.addCols(
            count,
            np.zeros(count),
            np.zeros(count),
            self.upper[entering],
            len(indices),
            np.array(starts, dtype=np.int32),
            np.array(indices, dtype=np.int32),
            np.array(values, dtype=np.float64),
        )
        own_starts: list[int] = []
        own_indices: list[int] = []
        own_values: list[float] = []
        own_upper: list[float] = []
        for offset, c in enumerate(entering):
            i, k, w = self.candidates[c]
            for terms, upper in self.cells.own_rows(i, k, w, first + offset):
                own_starts.append(len(own_indices))
                own_upper.append(upper)
                for column, value in terms:
                    own_indices.append(column)
                    own_values.append(value)
        rows = len(own_starts)
        highs.addRows(
            rows,
            np.full(rows, -_highs_infinity()),
            np.array(own_upper, dtype=np.float64),
            len(own_indices),
            np.array(own_starts, dtype=np.int32),
            np.array(own_indices, dtype=np.int32),
            np.array(own_values, dtype=np.float64),
        )
        self.in_model[entering] = True
        self.columns.extend(range(first, first + count))
        self.column_cells.extend(int(c) for c in entering)

    def active_pairs(self, solution: Sequence[float]) -> frozenset[tuple[int, int]]:
        """Pairs with a shared cell above zero in ``solution``."""
        pairs = set()
        for column, c in zip(self.columns, self.column_cells, strict=True):
            if solution[column] > 1e-7:
                i, k, _ = self.candidates[c]
                pairs.add((i, k))
        return frozenset(pairs)

    def price(self, highs: Any) -> tuple[float, np.ndarray]:
        """The bound this solve proves and the cells to enter next (none: the LP is optimal)."""
        objective = float(highs.getInfo().objective_function_value)
        duals = np.append(np.asarray(highs.getSolution().row_dual[: self.base_rows], dtype=np.float64), 0.0)
        reduced = -(self.coefficients * duals[self.rows]).sum(axis=1)
        reduced[self.in_model] = 0.0
        self.reduced = reduced
        bound = objective + float(np.minimum(reduced, 0.0) @ self.upper)
        negative = np.flatnonzero(reduced < -PRICING_TOLERANCE)
        if len(negative) == 0:
            return objective, negative
        order = negative[np.argsort(reduced[negative], kind="stable")]
        return bound, order[: self.batch]


DUAL_TOLERANCE = 1e-7
"""Reduced costs and row duals smaller than this count as zero in :func:`_others_bounds` (HiGHS's own
dual feasibility tolerance: the LP's optimum is trusted to the same)."""


def _others_bounds(highs: Any, lp: _LinearProgram, pricing: _Pricing, num_jobs: int) -> np.ndarray | None:
    """``[j]``: a lower bound on ``Σ_{k≠j} E_k`` over every schedule in the problem's windows, from the
    last solve's duals and no other solve (``None`` if the duals give none).

    Delete job ``j`` from a schedule: what is left is a schedule of the others in which no job ends
    later (a partner gone only speeds a job up) and every job stays in its window, so it is a point of
    this LP without ``j``'s columns, without the rows that only they enter, and with ``j``'s GPUs gone
    from the per-slot GPU rows' constants. Every other column keeps its rows and so its reduced cost:
    the duals stay feasible, and the Lagrangian (dual) objective of that smaller LP at these duals,
    ``Σ_rows π·bound + Σ_columns min over the box of d·x`` (the missing cells boxed as in
    :meth:`_Pricing.price`), bounds the others' ends. It is the whole LP's dual objective less ``j``'s
    terms: the lane LP's argument (``formulation.lanes._Master.others_bounds``) for this LP."""
    import highspy
    from scipy.sparse import csc_matrix, csr_matrix

    model = highs.getLp()
    num_cols, num_rows = int(model.num_col_), int(model.num_row_)
    a = model.a_matrix_
    arrays = (np.asarray(a.value_, dtype=np.float64), np.asarray(a.index_), np.asarray(a.start_))
    if a.format_ == highspy.MatrixFormat.kColwise:
        matrix = csr_matrix(csc_matrix(arrays, shape=(num_rows, num_cols)))
    else:
        matrix = csr_matrix(arrays, shape=(num_rows, num_cols))
    solution = highs.getSolution()
    duals = np.asarray(solution.row_dual, dtype=np.float64)
    if len(duals) != num_rows:
        return None
    reduced = np.asarray(model.col_cost_, dtype=np.float64) - matrix.T @ duals
    inf = _highs_infinity()

    def side(value: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """``value`` times the bound its sign picks; a value within the tolerance on a side with no
        bound counts as zero (the rows are in work units, up to ``10⁷``: their duals are tiny and
        still count where the bound is finite)."""
        bound = np.where(value > 0, lower, upper)
        finite = np.abs(bound) < inf
        terms = np.where(finite, value * np.where(finite, bound, 0.0), 0.0)
        return np.where(finite | (np.abs(value) <= DUAL_TOLERANCE), terms, -np.inf)

    row_terms = side(duals, np.asarray(model.row_lower_), np.asarray(model.row_upper_))
    column_terms = side(reduced, np.asarray(model.col_lower_), np.asarray(model.col_upper_))
    missing = np.minimum(pricing.reduced, 0.0) * pricing.upper
    total = float(row_terms.sum() + column_terms.sum() + missing.sum())
    if not math.isfinite(total):
        return None
    # who deletes each column: its job, or either job of a cell
    first = np.full(num_cols, -1, dtype=np.int64)
    second = np.full(num_cols, -1, dtype=np.int64)
    base = min(len(lp.column_owner), num_cols)
    first[:base] = lp.column_owner[:base]
    for column, c in zip(pricing.columns, pricing.column_cells, strict=True):
        i, k, _ = pricing.candidates[c]
        first[column], second[column] = i, k
    # a row goes with job j when every one of its columns does; such a j deletes the row's first column
    nonempty = np.diff(matrix.indptr) > 0
    starts = matrix.indptr[:-1][nonempty]
    leading = matrix.indices[starts]
    rows = np.flatnonzero(nonempty)
    entry_rows = np.repeat(np.arange(num_rows), np.diff(matrix.indptr))
    others = np.full(num_jobs, total)
    for candidate in (first[leading], second[leading]):
        per_row = np.full(num_rows, -1, dtype=np.int64)
        per_row[rows] = candidate
        wanted = per_row[entry_rows]
        hit = (first[matrix.indices] == wanted) | (second[matrix.indices] == wanted)
        deleted = np.logical_and.reduceat(hit, starts) & (candidate >= 0)
        others -= np.bincount(candidate[deleted], weights=row_terms[rows[deleted]], minlength=num_jobs)
    for owners in (first, second):
        mask = owners >= 0
        others -= np.bincount(owners[mask], weights=column_terms[mask], minlength=num_jobs)
    for c, (i, k, _) in enumerate(pricing.candidates):
        if missing[c]:
            others[i] -= missing[c]
            others[k] -= missing[c]
    # the GPU rows kept, with j's sure GPUs gone from their lower bound
    for row, constants in lp.row_constants.items():
        if duals[row] > 0:
            for j, value in constants.items():
                others[j] -= duals[row] * value
    return others  # finite: every term is (the total is)


def _highs_infinity() -> float:
    import highspy

    return float(highspy.kHighsInf)
