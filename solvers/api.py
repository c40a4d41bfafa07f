"""``solve``: the one entry point of the exact oracle.

Flow (all in the calling process unless noted):

1. Check the arguments, the solver's packages (:class:`SolverUnavailableError` names what to
   install) and that every job can run at all (:class:`InfeasibleInstanceError` names the job).
2. Discretize (:func:`formulation.discretize.discretize`), run the greedy warm start
   (:func:`solvers.warmstart.warm_start`) and derive the windows from it.
3. Run the backend in a **worker subprocess** (``spawn``: OR-Tools and highspy cannot share a
   process, and a fresh process has neither loaded). The worker streams every improving incumbent and
   bound through a pipe.
4. Enforce the time limit from outside (HiGHS can overrun its own): the worker gets the remaining
   time minus a margin; at ``time_limit`` plus a small grace (at most 5 % of the limit, at most 3 s)
   the parent kills it and keeps the best incumbent and bound it received.
5. Return a :class:`~solvers.result.Result` — always, with the best schedule known (at worst the
   warm start): objective recomputed with the float slotted semantics, the proven bound (the model's,
   never below the trivial bound, never above the objective), the gap, and wall times.
6. Branch-and-price (``bnp``) on total JCT with arrivals spread in time and ``options={"split": True}``
   runs 2-5 up to three times in the one limit (:func:`_solve_with_split`): the whole instance for half
   of it, then if unproven the arrival-split bound (:mod:`solvers.split`, groups of consecutive
   arrivals solved exactly), then the whole instance again from the larger bound. It is off by
   default: since CP-SAT's ``core`` search runs on such instances (:func:`solvers.cpsat.core_search`),
   one uninterrupted solve did as well or better than the three steps in all but one of the pairs of
   runs measured (docs/oracle-measurements.md, "The search with arrivals").
7. ``cpsat`` and ``bnp`` on total JCT with releases spread in time restart CP-SAT's worker once in a
   while in step 4: when the lane relaxation's duals bound every job's end a third tighter than the
   running model's windows (:class:`_Narrowing`), the worker is stopped and a fresh one solves the same
   problem in those windows from the best schedule; the best schedule and bound carry over.

The ``time_limit`` covers steps 2-4 (export of the model, when asked, runs before and is not counted):
the warm starts stop at shares of it (:data:`PRESOLVE_SHARE`), and an instance whose pre-solve steps
alone could not fit in it, or too large for the exact model, is refused up front
(:func:`check_exact_size`).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as mp_wait
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from formulation import io
from formulation.discretize import (
    ObjectiveKind,
    SlotAssignment,
    SlotSolution,
    SlottedProblem,
    check_solution_both_rules,
    completion_sum_lower_bound,
    discretize,
    evaluate,
    from_schedule,
    to_schedule,
)
from formulation.errors import DuettoInputError, InfeasibleInstanceError
from formulation.instance import Instance
from formulation.interference import TableInterference
from formulation.lane_tree import LaneTreeBound, LeafVerdict, Region, lane_tree_bound
from formulation.lanes import LaneBound, expected_lane_seconds, lane_skip_reason, latest_ends
from formulation.lanes import lane_bound as solve_lane_bound
from formulation.relaxation import RelaxationBound, pair_coupled_bound, refined_coupled_bound
from formulation.schedule import Schedule
from formulation.validator import validate
from solvers.backend_protocol import BackendOutcome, SolverUnavailableError
from solvers.backends import BackendSpec, check_available, resolve
from solvers.result import Result, SolveStatus
from solvers.split import MAX_PART_JOBS, PartOutcome, split_applies, split_bound
from solvers.warmstart import local_search as improve_by_local_search
from solvers.warmstart import policy_warm_starts
from solvers.warmstart import warm_start as greedy_warm_start

OBJECTIVES = ("jct", "makespan")
POLICY_WARM_START_SHARE = 0.2  # of the time limit, at most, for simulating the policies of the warm start
LOCAL_SEARCH_SHARE = 0.1  # of the time limit, at most, for improving the warm start (solvers.warmstart.local_search)
PRESOLVE_SHARE = 0.5  # of the time limit, at most, for everything before the solver (the greedy stops there)
MAX_EXACT_JOBS = 2000
"""Largest instance :func:`solve` takes: the slotted problem holds a speed for every pair of jobs, and
the exact model a variable per overlapping pair (n² in memory and time)."""
PRESOLVE_SECONDS_PER_PAIR = 3e-6
"""Seconds per pair of jobs that discretizing, the bounds and the serial warm start take at least
(measured: 1.2 s at 1,000 jobs on one core of the 2-core CI machine, x2.5 for slower machines)."""
_BOUND_TOL = 1e-6


@dataclass(frozen=True, slots=True)
class Progress:
    """What the parent knows while the worker runs (seconds of objective, not slots)."""

    elapsed: float
    phase: str  # "building", "solving", "done"
    objective: float  # best schedule's objective (float semantics), nan if none
    bound: float  # best proven bound, nan if none
    incumbents: int


ProgressCallback = Callable[[Progress], None]


# --- argument checks --------------------------------------------------------------------------------


def check_instance_fits(instance: Instance) -> None:
    """Reject, before any solving, an instance with a job no schedule can serve, naming the job."""
    if not instance.jobs:
        raise DuettoInputError("the instance has no jobs", field="jobs")
    cluster = instance.cluster
    for job in instance.jobs:
        where = f"job '{job.id}'"
        if job.num_gpus > cluster.num_gpus:
            raise InfeasibleInstanceError(
                f"demands {job.num_gpus} GPUs but the cluster has {cluster.num_gpus}", source=where, field="num_gpus"
            )
        if not instance.modes(job.id):
            raise InfeasibleInstanceError(
                f"no sub-batch of batch size {job.batch_size} fits in {cluster.gpu_memory_gib} GiB of GPU memory",
                source=where,
                field="batch_size",
            )
        if not instance.isolated_duration(job) > 0 or not math.isfinite(instance.isolated_duration(job)):
            raise InfeasibleInstanceError("has no finite positive duration", source=where, field="iterations")


def check_exact_size(instance: Instance, time_limit: float) -> None:
    """Refuse up front, in one line, an instance too large for the exact model or for ``time_limit``:
    the steps before the solver grow with the square of the jobs and are not interruptible, so a
    limit shorter than they take cannot hold (``docs/oracle.md``)."""
    n = len(instance.jobs)
    what = "simulate a policy (duetto simulate) or solve a subset (duetto import --limit)"
    if n > MAX_EXACT_JOBS:
        raise DuettoInputError(
            f"{n} jobs is too large for the exact model (at most {MAX_EXACT_JOBS} jobs): {what}", field="jobs"
        )
    needed = PRESOLVE_SECONDS_PER_PAIR * n * n
    if needed > PRESOLVE_SHARE * time_limit:
        raise DuettoInputError(
            f"{n} jobs need about {needed:.0f} s to build the exact model, more than half of the "
            f"{time_limit:g} s time limit: give at least {math.ceil(needed / PRESOLVE_SHARE)} s, or {what}",
            field="time_limit",
        )


LaneOrder = bool | Literal["first", "after"]
"""How :func:`solve` runs the lane relaxation beside its solver (its ``lane_bound`` argument)."""


def _check_lane_bound(lane_bound: object) -> None:
    if not (lane_bound is True or lane_bound is False or lane_bound in ("first", "after")):
        raise DuettoInputError(f"must be True, False, 'first' or 'after', got {lane_bound!r}", field="lane_bound")


LANES_FIRST_MIN_SECONDS = 5.0
"""By default the lanes run first only with at least this much time left: setting them up (the first
time in a process, importing the compiled pricing) costs a fraction of a second, which a solve of a few
tenths cannot spare (30 jobs in 0.3 s: 0.66 s), and in a few seconds they bound nothing the coupled LP
does not. With less, they run after the coupled LP where they are expected to converge."""


def _lanes_first(lane_bound: LaneOrder, tree: bool, seconds: float) -> bool | None:
    """Whether the lanes run before the coupled LP, given ``seconds`` left (``None``: only where they would
    otherwise be skipped, not expected to converge in the time). By default (``True``) they do, except
    where they are a tree (``bnp``, ``portfolio``), which runs after the coupled LP where it is expected to
    converge and first where not; neither with less than :data:`LANES_FIRST_MIN_SECONDS`. Measured on 27
    instances (cpsat, 60 s, 12-50 jobs, one 8-GPU node or two of 4, all jobs at 0 or Poisson arrivals),
    the lanes first never gave a lower bound and up to a 13 % higher one (docs/oracle-measurements.md, "The lanes
    first, by default")."""
    if lane_bound == "first":
        return True
    if lane_bound is True and seconds >= LANES_FIRST_MIN_SECONDS:
        return None if tree else True
    return False


def _check_arguments(time_limit: float, slot: float | None, objective: str) -> None:
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or not math.isfinite(time_limit):
        raise DuettoInputError(f"must be a finite number of seconds, got {time_limit!r}", field="time_limit")
    if time_limit <= 0:
        raise DuettoInputError(f"must be > 0 seconds, got {time_limit!r}", field="time_limit")
    if slot is not None and (
        isinstance(slot, bool) or not isinstance(slot, int | float) or not math.isfinite(slot) or slot <= 0
    ):
        raise DuettoInputError(f"must be a positive number of seconds, got {slot!r}", field="slot")
    if objective not in OBJECTIVES:
        raise DuettoInputError(f"must be 'jct' or 'makespan', got {objective!r}", field="objective")


# --- transport to the worker ------------------------------------------------------------------------


def _portable_instance(instance: Instance) -> dict[str, Any]:
    """JSON-able instance with the interference model as a table over the profiles in use (same ratios,
    whatever model produced them), so any instance can travel to the worker."""
    try:
        return io.instance_to_dict(instance)
    except DuettoInputError:
        pass
    names = sorted({job.profile for job in instance.jobs})
    pairs = {
        (a, b): instance.interference.ratio(instance.profiles[a], instance.profiles[b]) for a in names for b in names
    }
    return io.instance_to_dict(instance.replace(interference=TableInterference(pairs, None)))


def _pack(solution: SlotSolution) -> dict[str, tuple[int, tuple[int, ...], int, int | None]]:
    return {job_id: (a.start, a.gpus, a.mode, a.end) for job_id, a in solution.items()}


def _unpack(data: Mapping[str, tuple[int, tuple[int, ...], int, int | None]]) -> SlotSolution:
    return {job_id: SlotAssignment(int(s), tuple(g), int(m), e) for job_id, (s, g, m, e) in data.items()}


class _PipeReporter:
    """Backend-side :class:`~solvers.backend_protocol.Reporter` writing to the parent's pipe."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def _send(self, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):  # the parent gave up: keep solving quietly
            self.conn.send(message)

    def built(self, seconds: float, stats: dict[str, Any]) -> None:
        self._send(("built", float(seconds), dict(stats)))

    def incumbent(self, solution: SlotSolution, objective: float, bound: float = math.nan) -> None:
        self._send(("incumbent", _pack(solution), float(objective), float(bound)))

    def bound(self, bound: float) -> None:
        self._send(("bound", float(bound)))


def _worker(conn: Connection, payload: dict[str, Any]) -> None:
    """Solve one payload in the worker process: rebuild the problem, run the backend, report. Always
    ends with one final message ("done", "exported", "unavailable", "input_error" or "error")."""
    try:
        import importlib

        instance = io.instance_from_dict(payload["instance"], source="solver payload")
        ub = _unpack(payload["warm_start"])
        problem = discretize(
            instance,
            payload["slot"],
            payload["horizon_slots"],
            upper_bound_schedule=ub,
            objective=payload["objective"],
            units_per_slot=payload["units_per_slot"],
        )
        module = importlib.import_module(payload["module"])
        if payload.get("export_path"):
            export = getattr(module, "export_model", None)
            if export is None:
                raise SolverUnavailableError(f"{payload['module']} cannot export models")
            export(problem, payload["export_path"], payload["objective"])
            conn.send(("exported", payload["export_path"]))
            return
        function = getattr(module, payload["function"])
        budget = payload["deadline"] - time.time()
        outcome: BackendOutcome = function(
            problem,
            payload["solver_name"],
            max(0.05, budget),
            payload["objective"],
            ub if payload["use_warm_start"] else None,
            _PipeReporter(conn),
            **payload["options"],
        )
        conn.send(
            (
                "done",
                outcome.status.value,
                _pack(outcome.solution) if outcome.solution is not None else None,
                float(outcome.objective),
                float(outcome.bound),
                float(outcome.build_seconds),
                float(outcome.solve_seconds),
                outcome.message,
                dict(outcome.stats),
            )
        )
    except SolverUnavailableError as error:
        conn.send(("unavailable", str(error)))
    except DuettoInputError as error:
        conn.send(("input_error", str(error)))
    except BaseException as error:  # anything else: report, the parent turns it into status "error"
        conn.send(("error", f"{type(error).__name__}: {error}", traceback.format_exc()))


# --- the parent side --------------------------------------------------------------------------------


@dataclass
class _Tracker:
    problem: SlottedProblem
    best: SlotSolution
    best_model_value: float
    bound: float  # slot units
    incumbents: int = 0
    built: tuple[float, dict[str, Any]] | None = None
    done: tuple[Any, ...] | None = None
    failure: tuple[str, str] | None = None  # (kind, message)
    solve_started: float | None = None

    rejected: int = 0
    final_rejected: bool = False
    relaxation: dict[str, Any] | None = None  # the coupled LP bound's summary, if it ran
    lanes: dict[str, Any] | None = None  # the lane relaxation's summary, if it ran
    solver_bound: float = -math.inf  # the backend's own bound (slot units), without the relaxations'
    relaxations_yielded: float | None = None  # seconds into the solve when the bound thread gave way
    # [j]: a lower bound on Σ_{k≠j} E_k from the lane LP's duals (the best of each, elementwise), if any
    others: np.ndarray | None = None
    narrowing: _Narrowing | None = None  # restarts CP-SAT in the windows `others` allows (cpsat, bnp)
    builds: list[float] = field(default_factory=list)  # each model's build seconds (one per restart more)
    # the coupled LP's thread offers bounds too: compare-and-set under a lock
    _bound_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _best_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def offer(self, solution: SlotSolution, value: float) -> bool:
        """Keep ``solution`` if it is valid under both completion rules (a rounding near miss can make a
        model solution hold a GPU one slot longer in the float semantics) and improves on the best, by
        its exactly re-evaluated objective (a restricted model's own value may be pessimistic).
        Returns False if it was invalid."""
        if check_solution_both_rules(self.problem, solution):
            self.rejected += 1
            return False
        exact = float(self.problem.objective_slots(evaluate(self.problem, solution, exact=True)))
        with self._best_lock:  # branch-and-price's leaf checks offer from the tree's thread too
            if exact < self.best_model_value - 1e-9:
                self.best, self.best_model_value = solution, exact
                self.incumbents += 1
        return True

    def offer_bound(self, bound: float) -> None:
        with self._bound_lock:
            if math.isfinite(bound) and bound > self.bound:
                self.bound = bound

    def offer_others(self, others: np.ndarray | tuple[float, ...]) -> None:
        """Keep the elementwise larger of ``others`` and the bounds on ``Σ_{k≠j} E_k`` so far (each
        vector is a valid bound, so their maximum is)."""
        values = np.asarray(others, dtype=float)
        if values.shape != (self.problem.num_jobs,) or not np.all(np.isfinite(values)):
            return
        with self._bound_lock:
            self.others = values if self.others is None else np.maximum(self.others, values)

    def offer_solver_bound(self, bound: float) -> None:
        """A bound from the backend's own search: the solve's bound, and kept apart as ``solver_bound``
        (what the bound thread compares its own with before it gives way)."""
        self.offer_bound(bound)
        # only the thread that follows the worker writes it; the bound thread reads one float
        if math.isfinite(bound) and bound > self.solver_bound:
            self.solver_bound = bound


def _handle(tracker: _Tracker, message: tuple[Any, ...]) -> None:
    kind = message[0]
    if kind == "built":
        tracker.built = (message[1], message[2])
        tracker.builds.append(float(message[1]))
        tracker.solve_started = time.perf_counter()
    elif kind == "incumbent":
        tracker.offer(_unpack(message[1]), message[2])
        tracker.offer_solver_bound(message[3])
    elif kind == "bound":
        tracker.offer_solver_bound(message[1])
    elif kind == "done":
        tracker.done = message
        if message[2] is not None:
            tracker.final_rejected = not tracker.offer(_unpack(message[2]), message[3])
        tracker.offer_solver_bound(message[4])
    elif kind in ("unavailable", "input_error", "error"):
        tracker.failure = (kind, message[1] if len(message) < 3 else f"{message[1]}\n{message[2]}")
    elif kind == "exported":
        tracker.done = message


NARROW_SHARE = 1 / 3
"""CP-SAT (``cpsat``, and ``bnp``'s primal heuristic) is restarted in the windows the lane LP's duals
allow (:func:`formulation.lanes.latest_ends`) once they leave its model at least this share less slack
(``Σ_j`` latest end − earliest end). Measured (docs/oracle-measurements.md, "Windows from the lane LP's duals"):
CP-SAT proved Poisson 24 × 8 seeds 1-2 2.5-3 times faster in windows 30-50 % narrower."""
NARROW_AFTER_SECONDS = 15.0
"""CP-SAT runs this long in its first model before any restart, so that the instances it proves quickly
are not disturbed. Measured (Poisson × 8, 60 s): restarts 2-3 s into CP-SAT's search made 24-job seeds 0
and 4 (proven in 13-14 s without) 2-7 s slower; 10 s in, 24-job seed 4 and 32-job seed 1 (proven in
15 and 26 s without) 6-10 s slower (docs/oracle-measurements.md, "CP-SAT restarted in the lanes' windows")."""
NARROW_MIN_SECONDS = 5.0
"""Time left below which CP-SAT is not restarted (its model is rebuilt and its search starts over)."""
MAX_NARROW_RESTARTS = 2
"""Restarts at most per solve."""


class _Narrowing:
    """When and how to restart CP-SAT in narrower windows during one solve.

    The coupled LP (its first, coarse level, seconds in) and the lane relaxation offer the tracker a
    bound on ``Σ_{k≠j} E_k`` per job (:attr:`_Tracker.others`).
    With the best schedule's value ``UB``, every schedule at least as good ends job ``j`` by
    ``UB − others[j]``; so does an optimum, and the model restricted to those ends keeps the best
    schedule (its hint, unless ``warm_start=False``) and proves the problem's optimum and bound. The
    restart is due once those ends leave :data:`NARROW_SHARE` less slack than the running model's,
    after :data:`NARROW_AFTER_SECONDS` of CP-SAT's first model, with :data:`NARROW_MIN_SECONDS` left,
    :data:`MAX_NARROW_RESTARTS` at most."""

    def __init__(self, payload: dict[str, Any], tracker: _Tracker, began: float, deadline: float) -> None:
        self.payload = payload
        self.tracker = tracker
        self.began = began
        self.deadline = deadline
        self._due: np.ndarray | None = None  # the latest ends found due by due(), for the restart
        problem = tracker.problem
        self.earliest = np.array([job.earliest_end for job in problem.jobs], dtype=np.int64)
        # the latest ends given to the running model (valid for every schedule as good as the best), and
        # the running model's own: those within its windows (at first both the problem's)
        self.given = self._latest(problem)
        self.running = self.given.copy()
        self.restarts: list[dict[str, Any]] = []
        self.problem_slack = self._slack(self.given)
        self.first_windows: int | None = None  # the slack CP-SAT's first model starts with, if narrowed

    @staticmethod
    def _latest(problem: SlottedProblem) -> np.ndarray:
        return np.array([job.latest_end for job in problem.jobs], dtype=np.int64)

    def _slack(self, latest: np.ndarray) -> int:
        return int(np.sum(np.maximum(0, latest - self.earliest)))

    def candidate(self) -> np.ndarray | None:
        """The narrower latest ends, if a restart is due now."""
        tracker = self.tracker
        if not self.pending():
            return None
        started = tracker.solve_started  # perf_counter when the running model was built
        if not self.restarts and (started is None or time.perf_counter() - started < NARROW_AFTER_SECONDS):
            return None
        others = tracker.others
        if others is None or not math.isfinite(tracker.best_model_value):
            return None
        # valid ends (each bound holds for every schedule at least as good as the best): the restart's
        given = np.minimum(self.given, latest_ends(tracker.problem, others.tolist(), tracker.best_model_value))
        if self._slack(np.minimum(self.running, given)) > (1.0 - NARROW_SHARE) * self._slack(self.running):
            return None
        return given

    def start_in(self, latest: Sequence[int]) -> np.ndarray:
        """The first model's latest ends, before it starts (:func:`_windows_from_the_start`): ``latest``
        within the problem's; restarts are then counted against them."""
        ends = np.minimum(self.given, np.asarray(latest, dtype=np.int64))
        self.given, self.running = ends, ends.copy()
        self.first_windows = self._slack(ends)
        return ends

    def pending(self) -> bool:
        """Whether a restart may still come (restarts and time left)."""
        return len(self.restarts) < MAX_NARROW_RESTARTS and self.deadline - time.time() >= NARROW_MIN_SECONDS

    def due(self) -> bool:
        self._due = self.candidate()
        return self._due is not None

    def restart_payload(self) -> dict[str, Any] | None:
        """The payload of the restart :meth:`due` found due (its windows, the best schedule as hint and
        upper bound), or ``None`` when none was."""
        narrow, self._due = self._due, None
        if narrow is None:
            return None
        tracker = self.tracker
        best, value = tracker.best, tracker.best_model_value
        before = self._slack(self.running)
        # the worker derives its windows from the best schedule as discretize does (with_upper_bound)
        self.given = narrow
        self.running = np.minimum(narrow, self._latest(tracker.problem.with_upper_bound(best)))
        self.restarts.append(
            {
                "seconds": round(time.time() - self.began, 3),
                "window_slack": [before, self._slack(self.running)],
                "upper_bound_slots": value,
            }
        )
        options = dict(self.payload["options"])
        options["windows"] = [(None, None, None, int(end)) for end in narrow]
        # the best schedule's windows, and its hint unless the caller turned hints off
        return dict(self.payload, warm_start=_pack(best), options=options)


def _less_a_hair(value: float) -> float:
    """A bound a relaxation proved, less a hair for HiGHS' optimality tolerances (the objective is
    rounded up to whole slots after)."""
    return value - 1e-6 * max(1.0, abs(value))


def _windows_from_the_start(
    problem: SlottedProblem, tracker: _Tracker, payload: dict[str, Any], seconds: float
) -> RelaxationBound | None:
    """Before CP-SAT starts, where it may be restarted in narrower windows (``tracker.narrowing``): the
    coupled LP's first, coarse level bounds every job's others (:attr:`RelaxationBound.others`), and
    CP-SAT's first model starts in the ends they allow with the upper bound's value (``payload``'s
    ``windows``), rather than waiting for a restart. Offers the LP's bound; returns the LP (``None`` if it
    failed: a bound is an extra)."""
    narrowing = tracker.narrowing
    if narrowing is None:
        return None
    try:
        outcome = pair_coupled_bound(problem, time_limit=max(0.01, seconds), others=True)
    except Exception:
        return None
    if outcome.proven:
        tracker.offer_bound(_less_a_hair(outcome.value))
    if outcome.others is not None and math.isfinite(tracker.best_model_value):
        tracker.offer_others(outcome.others)
        ends = narrowing.start_in(latest_ends(problem, outcome.others, tracker.best_model_value))
        options = cast(dict[str, Any], payload["options"])
        options["windows"] = [(None, None, None, int(end)) for end in ends]
    return outcome


def _run_narrowing(
    run: Callable[[dict[str, Any], Callable[[], bool]], bool],
    payload: dict[str, Any],
    tracker: _Tracker,
    stop: Callable[[], bool],
) -> bool:
    """Run ``payload`` by ``run(payload, stop)`` (True: not followed to its end, the worker killed);
    where the tracker has a :class:`_Narrowing`, stop it once a restart is due and run the restart's
    payload instead. Returns what the last run returned."""
    narrowing = tracker.narrowing
    while True:
        if narrowing is None:
            return run(payload, stop)
        killed = run(payload, lambda: stop() or narrowing.due())
        if not killed or stop():
            return killed
        restart = narrowing.restart_payload()
        if restart is None:  # stopped by the deadline
            return killed
        payload = restart


class _WorkerProcess:
    """A worker subprocess (``python -m solvers.worker``) that solves payloads one after the other."""

    def __init__(self) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # the worker exits when this pipe's write end closes: when this process ends, however it ends
        lifeline_r, lifeline_w = os.pipe()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "solvers.worker", str(to_child_r), str(from_child_w), str(lifeline_r)],
                pass_fds=(to_child_r, from_child_w, lifeline_r),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno() if _has_fileno(sys.stderr) else subprocess.DEVNULL,
                env=env,
                cwd=root,
                # out of the terminal's process group: Ctrl-C interrupts this process, which ends the
                # worker itself (no KeyboardInterrupt traceback from a worker caught mid-import). A process
                # group, not a session: Linux shares the CPU fairly between sessions (autogroups) before
                # threads, so a worker in a session of its own got one share however many threads it ran,
                # and CP-SAT's two beside the bound's one thread proved half as fast (docs/oracle.md)
                process_group=0,
            )
        except BaseException:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w, lifeline_r, lifeline_w):
                os.close(fd)
            raise
        os.close(to_child_r)
        os.close(from_child_w)
        os.close(lifeline_r)
        self.lifeline = lifeline_w
        self.sender = Connection(to_child_w, readable=False)
        self.receiver = Connection(from_child_r, writable=False)

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(
        self,
        payload: dict[str, Any],
        tracker: _Tracker,
        hard_deadline: float,
        on_progress: Callable[[], None] | None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Send one payload and follow it until its final message, ``hard_deadline`` (``time.time()``) or
        ``stop()`` (e.g. a bound from elsewhere proved the incumbent optimal). Returns True when it was
        not followed to its end (the caller must then :meth:`kill` this worker)."""
        try:
            self.sender.send(payload)
        except (BrokenPipeError, OSError):
            tracker.failure = ("error", "the solver process is not running")
            return False
        while True:
            now = time.time()
            # stop() counts once the backend has built its model: a missing solver is still reported
            if now >= hard_deadline or (stop is not None and tracker.built is not None and stop()):
                return True
            try:
                ready = self.receiver.poll(min(0.2, max(0.0, hard_deadline - now)))
                message = self.receiver.recv() if ready else None
            except (EOFError, OSError):
                break  # the worker died and closed its end
            if message is not None:
                _handle(tracker, message)
                if tracker.done is not None or tracker.failure is not None:
                    return False
            elif not self.alive():
                break
            if on_progress is not None:
                on_progress()
        self.process.wait()
        tracker.failure = ("error", f"the solver process exited unexpectedly (exit code {self.process.returncode})")
        return False

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.close()

    def close(self) -> None:
        """Ask the worker to stop (it exits after its current payload) and reap it."""
        try:
            if self.alive():
                self.sender.send(None)
        except (BrokenPipeError, OSError):
            pass
        for conn in (self.sender, self.receiver):
            with contextlib.suppress(OSError):
                conn.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.lifeline >= 0:
            os.close(self.lifeline)
            self.lifeline = -1


class _ReusedWorker:
    """One worker process for the payloads of a call, one after the other: started when first needed,
    replaced after a payload that was stopped or failed (never reused then)."""

    def __init__(self) -> None:
        self.worker: _WorkerProcess | None = None

    def run(
        self,
        payload: dict[str, Any],
        tracker: _Tracker,
        hard_deadline: float,
        on_progress: Callable[[], None] | None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """:meth:`_WorkerProcess.run` in this worker; True if it was stopped (the worker is then gone)."""
        if self.worker is None or not self.worker.alive():
            self.worker = _WorkerProcess()
        killed = self.worker.run(payload, tracker, hard_deadline, on_progress, stop=stop)
        if killed or tracker.failure is not None:
            self.kill()
        return killed

    def kill(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker = None

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def _run_worker(
    payload: dict[str, Any],
    tracker: _Tracker,
    hard_deadline: float,
    on_progress: Callable[[], None] | None,
) -> bool:
    """One payload in a fresh worker; True if it was killed at ``hard_deadline``."""
    worker = _WorkerProcess()
    try:
        killed = worker.run(payload, tracker, hard_deadline, on_progress)
    finally:
        worker.kill()
    return killed


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def solve(
    instance: Instance,
    solver: str = "cpsat",
    time_limit: float = 60.0,
    slot: float | None = None,
    objective: str = "jct",
    *,
    warm_start: bool = True,
    warm_start_schedule: Schedule | None = None,
    policy_warm_start: bool = True,
    local_search: bool = True,
    coupled_bound: bool = True,
    lane_bound: LaneOrder = True,
    export_model: str | Path | None = None,
    horizon_slots: int | None = None,
    units_per_slot: int | None = None,
    options: Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> Result:
    """Solve the time-slotted problem of ``instance`` exactly (or as far as ``time_limit`` allows).

    Parameters
    ----------
    instance
        The instance.
    solver
        ``"cpsat"``, ``"highs"``, ``"portfolio"`` (both at once), ``"bnp"`` (branch-and-price: the lane
        tree with CP-SAT as primal heuristic and leaf check; ``options={"primal": False}`` runs the
        tree alone) or ``"pyomo:NAME"`` (any solver Pyomo knows).
    time_limit
        Wall seconds for discretizing, the warm start and the solve together; enforced from outside
        the solver (the result comes back within about 5 % of it).
    slot
        ``Δ`` in seconds; ``None`` chooses it (:func:`formulation.discretize.choose_slot`).
    objective
        ``"jct"`` (total = average JCT) or ``"makespan"``.
    warm_start
        Hint the solver with the best initial schedule (the windows always come from it).
    warm_start_schedule
        A schedule of your own (e.g. a policy's, simulated with ``slot``) to start from: one more
        candidate for the initial schedule, next to the greedy and the policies. It must be
        non-preemptive with starts on slot boundaries and valid in the slotted model; its ``slot`` is
        used when ``slot`` is ``None``.
    policy_warm_start
        Also simulate SJF-BSBF and its look-ahead in the slotted semantics and start from the best
        (:func:`solvers.warmstart.policy_warm_starts`; a fraction of a second at 50 jobs).
    local_search
        Then improve the best initial schedule by a search over the greedy's job order
        (:func:`solvers.warmstart.local_search`) for up to a tenth of ``time_limit``: at 24-50 jobs it
        often finds better schedules than the solver does in the rest of the time.
    coupled_bound
        While the solver runs, also solve the pair-coupled LP relaxation
        (:func:`formulation.relaxation.refined_coupled_bound`, total JCT with two jobs per GPU;
        coarse windows first, then finer ones while it is the best bound) on one thread and report
        the larger of its bound and the solver's.
    lane_bound
        On the same thread, also solve the lane relaxation by column generation
        (:func:`formulation.lanes.lane_bound`: one column per GPU's sequence of jobs; total JCT with
        one or two jobs per GPU; with one, configuration rows too); the larger bound is reported.
        ``True`` (the default): the lanes first, with all the time and no convergence estimate (their
        Lagrangian bound holds whenever they stop), then the coupled LP with what they leave, given at
        least :data:`LANES_FIRST_MIN_SECONDS` (else as ``"after"``); for ``bnp`` and ``portfolio``,
        whose lanes are a branch-and-price tree, as ``"after"`` where the tree's root is expected to
        converge in the time and first where not. ``"first"``: the lanes first for every solver.
        ``"after"``: the coupled LP first with at most :data:`COUPLED_SHARE` of the time, then the lanes
        with what it leaves, only where their column generation is expected to converge in it
        (:func:`formulation.lanes.expected_lane_seconds` × :data:`CONTENTION`). Measured (``cpsat``,
        60 s, seeds 0-2; docs/oracle.md): at 50 jobs on one 8-GPU node, all jobs at 0, gaps 23.9 /
        21.9 / 23.3 % with the lanes first against 27.4 / 30.7 / 32.2 % after; at 12-32 jobs and with
        Poisson arrivals the bound was the same or higher on every instance.
    export_model
        Write the Pyomo model of the same problem to this ``.mps`` / ``.lp`` file before solving.
    horizon_slots
        Optional cap on the horizon (may make the model infeasible; the default never does).
    units_per_slot
        Progress units per slot (default :data:`formulation.discretize.DEFAULT_UNITS_PER_SLOT`).
    options
        Backend options, e.g. ``{"num_workers": 2}`` for CP-SAT; for ``bnp``, ``{"split": True}`` adds the
        arrival-split bound (``"split_max_part"``: the largest group, default 16). For ``cpsat`` and
        ``bnp`` on total JCT with releases spread in time, CP-SAT is restarted in the narrower windows
        the coupled and lane LPs' duals allow (:class:`_Narrowing`; ``stats["lane_windows"]``);
        ``{"lane_windows": False}`` turns that off. ``"lane_modes"``: mode-aware lane bounds, ``True``,
        ``False``, ``"selective"`` (only the jobs the root's lanes need) or ``"auto"`` (the default:
        selective for a ``bnp``/``portfolio`` tree that runs after the coupled LP and for the lane LP
        alone where it is expected to converge in the time and CP-SAT is not restarted in its windows,
        else mode-free).
    progress
        Called about five times a second with a :class:`Progress` while the solver runs.

    Returns
    -------
    Result
        Status, objective and proven bound (seconds), gap, build and solve wall times, schedule.

    Raises
    ------
    DuettoInputError
        Bad arguments; an instance too large for the exact model or for ``time_limit``
        (:func:`check_exact_size`); :class:`InfeasibleInstanceError` for a job that cannot run at all;
        :class:`SolverUnavailableError` when the solver's package is missing.
    """
    _check_arguments(time_limit, slot, objective)
    _check_lane_bound(lane_bound)
    spec: BackendSpec = resolve(solver)
    check_available(spec)
    check_instance_fits(instance)
    check_exact_size(instance, float(time_limit))
    if slot is None and warm_start_schedule is not None and warm_start_schedule.slot is not None:
        slot = warm_start_schedule.slot
    settings = _Settings(
        spec=spec,
        time_limit=float(time_limit),
        objective=objective,
        warm_start=warm_start,
        horizon_slots=horizon_slots,
        units_per_slot=units_per_slot,
        options=options,
        warm_start_schedule=warm_start_schedule,
        policy_warm_start=policy_warm_start,
        local_search=local_search,
        coupled_bound=coupled_bound,
        lane_bound=lane_bound,
    )
    if export_model is not None:
        _export(instance, _portable_instance(instance), slot, settings, export_model)
    # one worker for every solve of this call (branch-and-price's arrival split solves several)
    worker = _ReusedWorker()

    def runner(payload: dict[str, Any], tracker: _Tracker, hard: float, on_progress: Callable[[], None]) -> bool:
        if spec.name == "portfolio":
            return _run_portfolio(payload, tracker, hard, on_progress)
        return _run_narrowing(
            lambda one, stop: worker.run(one, tracker, hard, on_progress, stop),
            payload,
            tracker,
            lambda: _proven_optimal(tracker),
        )

    try:
        return _solve_with_split(instance, slot, settings, runner, progress)
    finally:
        worker.kill()


def _run_portfolio(
    payload: dict[str, Any], tracker: _Tracker, hard_deadline: float, on_progress: Callable[[], None] | None
) -> bool:
    """CP-SAT (one worker) and HiGHS (one thread) on the same problem at once, into one tracker: every
    incumbent of either is offered, the bound is the larger of the two (both models are exact). Stops
    when one proves optimality or both finish; True if the deadline stopped it."""
    options = dict(payload["options"])
    threads = max(1, int(options.get("threads", 2)) // 2)
    payloads = {
        "cpsat": dict(payload, options={**options, "num_workers": threads, "threads": threads}),
        "highs": dict(
            payload,
            module="solvers.highs",
            function="solve_pyomo",
            solver_name="highs",
            options={**options, "threads": threads},
        ),
    }
    workers = {name: _WorkerProcess() for name in payloads}
    for name, worker in workers.items():
        with contextlib.suppress(BrokenPipeError, OSError):
            worker.sender.send(payloads[name])
    finished: dict[str, tuple[Any, ...]] = {}
    failures: dict[str, str] = {}
    killed = False
    try:
        receivers = {worker.receiver: name for name, worker in workers.items()}
        while len(finished) + len(failures) < len(workers):
            now = time.time()
            if now >= hard_deadline:
                killed = True
                break
            pending = [r for r, name in receivers.items() if name not in finished and name not in failures]
            for ready in mp_wait(pending, timeout=min(0.2, max(0.0, hard_deadline - now))):
                receiver = cast(Connection, ready)
                name = receivers[receiver]
                try:
                    message: tuple[Any, ...] = receiver.recv()
                except (EOFError, OSError):
                    failures[name] = "the solver process exited unexpectedly"
                    continue
                kind = message[0]
                if kind == "done":
                    finished[name] = message
                    if message[2] is not None:
                        tracker.offer(_unpack(message[2]), message[3])
                    tracker.offer_bound(message[4])
                elif kind in ("unavailable", "input_error", "error"):
                    failures[name] = message[1]
                else:
                    _handle(tracker, message)
            if any(done[1] == SolveStatus.OPTIMAL.value for done in finished.values()):
                break
            if on_progress is not None:
                on_progress()
    finally:
        for worker in workers.values():
            worker.kill()
    if not finished and failures and not killed:
        tracker.failure = ("error", "; ".join(f"{name}: {text}" for name, text in failures.items()))
        return False
    if finished:
        statuses = {name: done[1] for name, done in finished.items()}
        status = (
            SolveStatus.OPTIMAL.value
            if SolveStatus.OPTIMAL.value in statuses.values()
            else (SolveStatus.TIME_LIMIT.value if killed or tracker.best is not None else SolveStatus.UNKNOWN.value)
        )
        summary = "; ".join(
            [f"{name}: {done[7]}" for name, done in finished.items()] + [f"{n}: {t}" for n, t in failures.items()]
        )
        tracker.done = (
            "done",
            status,
            None,
            math.nan,
            math.nan,
            max(done[5] for done in finished.values()),
            max(done[6] for done in finished.values()),
            summary,
            {name: done[8] for name, done in finished.items()},
        )
    return killed


def solve_many(
    instances: list[Instance],
    solver: str = "cpsat",
    time_limit: float = 60.0,
    slot: float | list[float | None] | None = None,
    objective: str = "jct",
    *,
    warm_start: bool = True,
    policy_warm_start: bool = True,
    local_search: bool = True,
    coupled_bound: bool = True,
    lane_bound: LaneOrder = True,
    horizon_slots: int | None = None,
    units_per_slot: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Result]:
    """:func:`solve` for many instances, one after the other, in one reused worker process (its start
    and imports cost seconds). Each instance gets ``time_limit``, enforced as in :func:`solve`: a
    worker that overruns is killed and a fresh one serves the next instance.

    Parameters
    ----------
    slot
        One slot length for all, ``None`` (chosen per instance), or one entry per instance.
    """
    _check_arguments(time_limit, None, objective)
    _check_lane_bound(lane_bound)
    slots = list(slot) if isinstance(slot, list) else [slot] * len(instances)
    if len(slots) != len(instances):
        raise DuettoInputError(f"needs one slot per instance ({len(instances)}), got {len(slots)}", field="slot")
    for value in slots:
        _check_arguments(time_limit, value, objective)
    spec = resolve(solver)
    check_available(spec)
    for instance in instances:
        check_instance_fits(instance)
        check_exact_size(instance, float(time_limit))
    settings = _Settings(
        spec=spec,
        time_limit=float(time_limit),
        objective=objective,
        warm_start=warm_start,
        horizon_slots=horizon_slots,
        units_per_slot=units_per_slot,
        options=options,
        policy_warm_start=policy_warm_start,
        local_search=local_search,
        coupled_bound=coupled_bound,
        lane_bound=lane_bound,
    )
    worker = _ReusedWorker()

    def runner(payload: dict[str, Any], tracker: _Tracker, hard: float, on_progress: Callable[[], None]) -> bool:
        return _run_narrowing(
            lambda one, stop: worker.run(one, tracker, hard, on_progress, stop), payload, tracker, lambda: False
        )

    results = []
    try:
        for instance, value in zip(instances, slots, strict=True):
            results.append(_solve_with_split(instance, value, settings, runner, None))
    finally:
        worker.close()
    return results


@dataclass(kw_only=True)
class _Settings:
    spec: BackendSpec
    time_limit: float
    objective: str
    warm_start: bool
    horizon_slots: int | None
    units_per_slot: int | None
    options: Mapping[str, Any] | None
    warm_start_schedule: Schedule | None = None
    policy_warm_start: bool = True
    local_search: bool = True
    coupled_bound: bool = True
    lane_bound: LaneOrder = True

    @property
    def kwargs(self) -> dict[str, Any]:
        return {} if self.units_per_slot is None else {"units_per_slot": int(self.units_per_slot)}


def _initial_solution(problem: SlottedProblem, settings: _Settings, deadline: float | None = None) -> SlotSolution:
    """The schedule the windows (upper bound) and the hint come from: the best of the greedy, the
    policies simulated in the slotted semantics and the user's warm-start schedule, improved by the
    local search over the greedy's order. With ``deadline`` (``time.time()``) every step counts against
    it: the policies and the search get what is left of their shares, a greedy still running then is
    dropped (the serial schedule and the policies' remain)."""

    def left(share: float) -> float:
        budget = share * settings.time_limit
        return budget if deadline is None else max(0.0, min(budget, deadline - time.time()))

    # a fifth of the limit at most for the policies, so that the solver keeps most of it
    candidates = (
        policy_warm_starts(problem, time_budget=left(POLICY_WARM_START_SHARE)) if settings.policy_warm_start else []
    )
    if settings.warm_start_schedule is not None:
        candidates.append(_user_warm_start(problem, settings.warm_start_schedule))
    best = greedy_warm_start(problem, candidates=candidates, deadline=deadline)
    if not settings.local_search or left(LOCAL_SEARCH_SHARE) <= 0:
        return best
    improved = improve_by_local_search(problem, best, time_budget=left(LOCAL_SEARCH_SHARE))
    return greedy_warm_start(problem, candidates=[best, improved], greedy=False)  # the models' form


def _user_warm_start(problem: SlottedProblem, schedule: Schedule) -> SlotSolution:
    """The user's schedule as a slot-level solution; a clear error if it does not fit the model."""
    try:
        solution = from_schedule(problem, schedule)
    except DuettoInputError as error:
        raise DuettoInputError(str(error), field="warm_start_schedule") from None
    problems = check_solution_both_rules(problem, solution)
    if problems:
        raise DuettoInputError(
            f"not valid in the slotted model (slot {problem.slot:g} s): {problems[0]}", field="warm_start_schedule"
        )
    return solution


_Runner = Callable[[dict[str, Any], "_Tracker", float, Callable[[], None]], bool]


def _solver_payload(
    instance: Instance,
    problem: SlottedProblem,
    spec: BackendSpec,
    *,
    deadline: float,
    use_warm_start: bool = True,
    options: Mapping[str, Any] | None = None,
    horizon_slots: int | None = None,
) -> dict[str, Any]:
    """What a worker process solves (:func:`_worker`): ``problem`` (which has an upper-bound solution: the
    worker rebuilds the same windows from it, and hints it with ``use_warm_start``) by ``spec``'s backend
    until ``deadline`` (``time.time()``)."""
    if problem.upper_bound is None:
        raise ValueError("the problem needs an upper-bound solution (SlottedProblem.with_upper_bound)")
    return {
        "instance": _portable_instance(instance),
        "slot": problem.slot,
        "horizon_slots": horizon_slots,
        "objective": problem.objective,
        "units_per_slot": problem.units_per_slot,
        "warm_start": _pack(problem.upper_bound),
        "use_warm_start": bool(use_warm_start),
        "module": spec.module,
        "function": spec.function,
        "solver_name": spec.solver_name,
        "deadline": deadline,
        "options": dict(options or {}),
    }


def _solve_one(
    instance: Instance,
    slot: float | None,
    settings: _Settings,
    runner: _Runner,
    progress: ProgressCallback | None,
) -> Result:
    return _solve_problem(instance, slot, settings, runner, progress)[0]


def _solve_problem(
    instance: Instance,
    slot: float | None,
    settings: _Settings,
    runner: _Runner,
    progress: ProgressCallback | None,
    known_bound: float = -math.inf,
) -> tuple[Result, SlottedProblem]:
    """One solve; also returns the slotted problem it solved. ``known_bound`` (slot units) is a bound
    proven elsewhere (the arrival-split bound): the solve starts from it and stops once its schedule
    meets it."""
    began = time.time()
    began_perf = time.perf_counter()
    time_limit = settings.time_limit
    deadline = began + time_limit
    grace = min(0.05 * time_limit, 3.0)
    margin = min(0.03 * time_limit, 1.0)  # for the worker's final message
    objective = settings.objective

    base = discretize(
        instance,
        slot,
        settings.horizon_slots,
        objective=cast(ObjectiveKind, objective),
        **settings.kwargs,
    )
    # every step before the solver counts against the limit: the warm starts stop at a share of it
    initial = _initial_solution(base, settings, deadline=began + PRESOLVE_SHARE * time_limit)
    problem = base.with_upper_bound(initial)
    parent_build = time.perf_counter() - began_perf
    tracker = _Tracker(
        problem, initial, float(problem.upper_bound_value or math.inf), max(float(_static_bound(problem)), known_bound)
    )

    def report_progress(phase: str) -> None:
        if progress is None:
            return
        objective_s, bound_s = _seconds(problem, tracker)
        progress(Progress(time.time() - began, phase, objective_s, bound_s, tracker.incumbents))

    report_progress("building")
    spec = settings.spec
    payload = _solver_payload(
        instance,
        problem,
        spec,
        deadline=deadline - margin,
        use_warm_start=settings.warm_start,
        options=settings.options,
        horizon_slots=settings.horizon_slots,
    )
    branch_and_price = spec.name == "bnp"
    options = cast(dict[str, Any], payload["options"])
    narrow = _lane_windows_option(options)
    lane_modes = _lane_modes_option(options)
    leaf_checker: _LeafChecker | None = None
    primal = True
    if branch_and_price:
        # CP-SAT beside the tree is its primal heuristic, with cpsat's own default of two workers: measured
        # on a quiet 2-core machine at 16 x 8 (docs/oracle.md), one worker left the tree's core free but found
        # worse schedules (mean gap 9.4 % against 8.4 %) while the tree got hardly more nodes
        primal = bool(options.pop("primal", True))
        leaf_checker = _LeafChecker(payload, tracker, deadline + grace)
    lanes = bool(settings.lane_bound) or branch_and_price
    if (
        narrow
        and (lanes or settings.coupled_bound)
        and primal
        and spec.name in ("cpsat", "bnp")
        and objective == "jct"
        and options.get("windows") is None
        and options.get("cutoff") is None
        and problem.releases_spread  # measured to help with arrivals only
    ):
        tracker.narrowing = _Narrowing(payload, tracker, began, deadline - margin)
    first = None
    if tracker.narrowing is not None and settings.coupled_bound:
        first = _windows_from_the_start(problem, tracker, payload, FIRST_WINDOWS_SHARE * time_limit)
    relaxation = None
    if settings.coupled_bound or lanes:
        tree = branch_and_price or spec.name == "portfolio"
        lanes_first = _lanes_first(settings.lane_bound, tree, deadline - margin - time.time())
        if tracker.narrowing is not None and tree and lanes_first is None:
            lanes_first = True  # the tree's root first: its duals give the windows (_Narrowing)
        relaxation = _Relaxations(
            problem,
            tracker,
            deadline - margin,
            coupled=settings.coupled_bound,
            lanes=lanes,
            tree=tree,
            leaf_check=leaf_checker,
            began=began,
            lanes_first=lanes_first,
            first=first,
            modes=lane_modes,
        )
    try:
        if time.time() < deadline - margin and not primal and relaxation is not None:
            killed = _follow_tree(relaxation, tracker, deadline + grace, lambda: report_progress("solving"))
        elif time.time() < deadline - margin:
            killed = runner(payload, tracker, deadline + grace, lambda: report_progress("solving"))
        else:
            killed = True  # building alone used the time: return the warm start
    except BaseException:
        if relaxation is not None:
            relaxation.cancel.set()  # an interrupted solve (Ctrl+C, a failure) does not wait for its bound
        if leaf_checker is not None:
            leaf_checker.close()
        raise
    if relaxation is not None:
        relaxation.finish(deadline + grace)
    if leaf_checker is not None:
        leaf_checker.close()
        if tracker.lanes is not None:
            tracker.lanes["leaf_check_seconds"] = round(leaf_checker.seconds, 3)
    wall = time.perf_counter() - began_perf
    report_progress("done")
    if tracker.failure is not None and tracker.failure[0] == "unavailable":
        raise SolverUnavailableError(tracker.failure[1])
    if tracker.failure is not None and tracker.failure[0] == "input_error":
        raise DuettoInputError(tracker.failure[1])
    result = _result(spec, problem, tracker, killed, parent_build, wall, objective, tree_alone=not primal)
    return result, problem


SPLIT_FIRST_SHARE = 0.5
"""Branch-and-price with the arrival-split bound (:mod:`solvers.split`): the share of the time limit the
whole instance's solve gets first. Measured on Poisson arrivals, 24 jobs on 8 GPUs: the instances it
proves at all it proves in 11-23 s of 60 (docs/oracle-measurements.md, "The arrival-split bound")."""
SPLIT_SHARE = 0.3
"""The most of the time limit the split's groups get, so that the resumed whole solve keeps at least a
fifth of it for the schedule. Without a cap, on Poisson 32 × 8 seed 2 one unproven 16-job group took
the rest of the limit and the schedule stayed at the first step's (4.4 % worse than without the split)."""
SPLIT_GROUP_MIN_SECONDS = 2.0
"""The least time one group of the split is started with (its warm starts and model take about 1 s)."""
SPLIT_RESUME_MIN_SECONDS = 5.0
"""Time left after the split below which the whole instance's solve is not resumed."""


def _lane_windows_option(options: dict[str, Any]) -> bool:
    """Take ``lane_windows`` (restart CP-SAT in the LPs' windows, :class:`_Narrowing`; default
    true) out of the backend's options."""
    value = options.pop("lane_windows", True)
    if not isinstance(value, bool):
        raise DuettoInputError(f"must be true or false, got {value!r}", field="options.lane_windows")
    return value


LANE_MODES_DEFAULT = "auto"
"""Whether the lane bounds are mode-aware (:class:`formulation.lanes.PseudoJobs`) unless
``options["lane_modes"]`` says otherwise. ``"auto"``: ``"selective"`` for a branch-and-price tree that runs
after the coupled LP (its root expected to converge in the time) and for the lane LP alone where it is
expected to converge and CP-SAT is not restarted in its windows, else mode-free (:func:`_auto_modes`)."""

LANE_MODE_NAMES: dict[str, bool | str] = {"auto": "auto", "on": True, "off": False, "selective": "selective"}
"""The ``lane_modes`` values by the names the command line gives them (``duetto solve --lane-modes``, the
oracle benchmarks): one table, so every command means the same."""


def _lane_modes_option(options: dict[str, Any]) -> bool | str:
    """Take ``lane_modes`` (mode-aware lanes in the lane bound and the tree: true, false, ``"selective"``
    or ``"auto"``; default :data:`LANE_MODES_DEFAULT`) out of the backend's options."""
    value = options.pop("lane_modes", LANE_MODES_DEFAULT)
    if not isinstance(value, bool) and value not in ("selective", "auto"):
        raise DuettoInputError(f"must be true, false, 'selective' or 'auto', got {value!r}", field="options.lane_modes")
    return value


def _auto_modes(modes: bool | str, tree: bool, lanes_first: bool, converges: bool = False) -> bool | str:
    """``lane_modes`` as the lanes run it: ``"auto"`` is ``"selective"`` for a tree after the coupled LP and
    for the lane LP alone where it is expected to converge in the time (``converges``), mode-free
    otherwise. Measured (60 s, 2 threads, 2026-12-01, both one after the other per seed): the
    selective tree's bound against the mode-free one's, 16 × 8 seeds 0-9 +0.37 % in all (+1.3 and +3.0 % on
    seeds 0 and 5, within -0.6 % on the five it loses), 24 × 8 seeds 0-2 +0.36 % (none lower); where the
    tree runs first (its root not expected to converge: 50 × 8, arrivals spread in time) the selective
    one's slower rounds cost more than the modes give (50 × 8: 25 % gaps against 21-25 %). The lane LP alone
    (``cpsat``, ``highs``; :func:`formulation.lanes.lane_bound`, which starts the mode-aware master from the
    mode-free LP): measured with ``cpsat`` (60 s, 2 threads, 2026-12-01, eleventh session), selective
    against mode-free, 16 × 8 seeds 0 / 3 / 5 bounds +2.2 / +0.7 / +3.3 %, 24 × 8 seed 0 +0.7 %, and
    50 × 8 seed 0 −0.15 % (its mode-free LP does not converge in the share it gets first); with releases
    spread in time, where CP-SAT is restarted in the lanes' windows, mode-free (Poisson 24 × 8 seeds 0-2:
    mode-free proved all three, the last in 57 s; selective the first two)."""
    if modes != "auto":
        return modes
    if tree:
        return "selective" if not lanes_first else False
    return "selective" if converges else False


def _split_options(settings: _Settings) -> tuple[_Settings, bool, int]:
    """Take the split's own options (``split``, ``split_max_part``) out of the backend's options."""
    options = dict(settings.options or {})
    use_split = options.pop("split", False)
    max_part = options.pop("split_max_part", MAX_PART_JOBS)
    if not isinstance(use_split, bool):
        raise DuettoInputError(f"must be true or false, got {use_split!r}", field="options.split")
    if isinstance(max_part, bool) or not isinstance(max_part, int) or max_part < 1:
        raise DuettoInputError(f"must be an integer >= 1, got {max_part!r}", field="options.split_max_part")
    return replace(settings, options=options), use_split, max_part


def _solve_with_split(
    instance: Instance,
    slot: float | None,
    settings: _Settings,
    runner: _Runner,
    progress: ProgressCallback | None,
) -> Result:
    """:func:`_solve_one`, and for branch-and-price on total JCT with arrivals spread in time, in three
    steps within the one time limit: the whole instance for :data:`SPLIT_FIRST_SHARE` of it; if that
    does not prove it, the arrival-split bound (:func:`solvers.split.split_bound`: groups of consecutive
    arrivals solved exactly at the same slot length, their bounds added); then the whole instance again
    with the time left, warm-started from the best schedule and starting from the larger bound."""
    settings, use_split, max_part = _split_options(settings)
    first_limit = SPLIT_FIRST_SHARE * settings.time_limit
    n = len(instance.jobs)
    applies = settings.spec.name == "bnp" and use_split and settings.objective == "jct" and split_applies(instance)
    # the first step must still fit its model-building steps in its share (as check_exact_size asks of a solve)
    if not applies or PRESOLVE_SECONDS_PER_PAIR * n * n > PRESOLVE_SHARE * first_limit:
        return _solve_one(instance, slot, settings, runner, progress)
    began = time.time()
    deadline = began + settings.time_limit
    first, problem = _solve_problem(instance, slot, replace(settings, time_limit=first_limit), runner, progress)
    if first.status in (SolveStatus.OPTIMAL, SolveStatus.ERROR) or first.schedule is None:
        first.stats["split_bound"] = {"status": f"not run: the whole instance's solve ended {first.status.value}"}
        return first
    report = validate(instance, first.schedule)
    if not report.ok:  # cannot happen (the tracker keeps only valid schedules); cut nowhere rather than guess
        first.stats["split_bound"] = {"status": "not run: the schedule to cut by did not validate"}
        return first
    target = math.ceil(problem.objective_to_slots(first.objective) - _BOUND_TOL)
    group_settings = replace(settings, warm_start_schedule=None, units_per_slot=problem.units_per_slot)

    split_value = -math.inf  # the split's bound so far (slot units), for the progress reports

    def report_split(value: float | None = None) -> None:
        nonlocal split_value
        if value is not None:
            split_value = max(split_value, value)
        if progress is not None:
            bound_slots = max(float(first.stats["bound_slots"]), split_value)
            bound = min(problem.objective_seconds(bound_slots), first.objective)
            incumbents = int(first.stats.get("incumbents", 0))
            progress(Progress(time.time() - began, "split bound", first.objective, bound, incumbents))

    def solve_group(group: Instance, seconds: float) -> PartOutcome:
        started = time.time()
        result = _solve_one(
            group,
            problem.slot,
            replace(group_settings, time_limit=seconds),
            runner,
            (lambda _state: report_split()) if progress is not None else None,
        )
        return PartOutcome(
            status=result.status.value,
            bound_slots=int(result.stats["bound_slots"]),
            objective_slots=int(result.stats["objective_slots"]),
            seconds=time.time() - started,
        )

    def group_seconds(size: int) -> float:
        return max(SPLIT_GROUP_MIN_SECONDS, PRESOLVE_SECONDS_PER_PAIR * size * size / PRESOLVE_SHARE)

    split = split_bound(
        instance,
        report.start,
        report.completion,
        solve_group,
        # at most SPLIT_SHARE, so the resumed solve keeps time to improve the schedule; a group may
        # overrun by its grace
        min(deadline - min(0.03 * settings.time_limit, 1.0), time.time() + SPLIT_SHARE * settings.time_limit),
        max_part=max_part,
        min_seconds=group_seconds,
        target_slots=target,
        on_bound=report_split,
    )
    bound_slots = max(float(first.stats["bound_slots"]), float(split.value_slots) if split is not None else -math.inf)
    summary: dict[str, Any] = split.summary() if split is not None else {"status": "no partition solved in the time"}
    if split is not None:
        summary["bound_seconds"] = problem.objective_seconds(split.value_slots)
    summary["whole_bound_slots"] = first.stats["bound_slots"]
    left = deadline - time.time()
    final = first
    if bound_slots < target and left >= SPLIT_RESUME_MIN_SECONDS:
        offset = time.time() - began

        def shifted(state: Progress) -> None:
            if progress is not None:
                progress(replace(state, elapsed=state.elapsed + offset))

        resumed, _ = _solve_problem(
            instance,
            problem.slot,
            replace(settings, time_limit=left, warm_start_schedule=first.schedule),
            runner,
            shifted if progress is not None else None,
            known_bound=bound_slots,
        )
        if resumed.status is not SolveStatus.ERROR and resumed.objective <= first.objective:
            final = resumed
            summary["resumed_seconds"] = round(left, 3)
    final = _with_bound(final, problem, bound_slots)
    final.stats["split_bound"] = summary
    final.stats["wall_seconds"] = round(time.time() - began, 4)
    return replace(final, solve_seconds=max(0.0, time.time() - began - final.build_seconds))


def _with_bound(result: Result, problem: SlottedProblem, bound_slots: float) -> Result:
    """``result`` with the larger of its bound and ``bound_slots`` (proven elsewhere, slot units of
    ``problem``); proven optimal when that meets its schedule, as :func:`_result` decides."""
    bound_slots = math.ceil(bound_slots - _BOUND_TOL)
    if result.schedule is None or bound_slots <= result.stats.get("bound_slots", -math.inf):
        return result
    objective_s = result.objective
    bound_s = min(problem.objective_seconds(bound_slots), objective_s)
    status, message = result.status, result.message
    if _bound_meets(objective_s, bound_s) and status is not SolveStatus.ERROR:
        status, bound_s = SolveStatus.OPTIMAL, objective_s
        message = "proven optimal: the arrival-split bound meets the schedule"
    stats = dict(result.stats, bound_slots=float(bound_slots))
    schedule = replace(result.schedule, metadata={**result.schedule.metadata, "bound": bound_s, "status": status.value})
    return replace(result, status=status, bound=bound_s, message=message, stats=stats, schedule=schedule)


def _follow_tree(
    relaxation: _Relaxations, tracker: _Tracker, hard_deadline: float, on_progress: Callable[[], None]
) -> bool:
    """Branch-and-price without the CP-SAT primal heuristic (``options={"primal": False}``: the tree and
    its leaf checks alone, e.g. to measure them): wait for the tree. True if the deadline stopped it."""
    while relaxation.thread.is_alive():
        if time.time() >= hard_deadline:
            return True
        relaxation.thread.join(min(0.2, max(0.0, hard_deadline - time.time())))
        on_progress()
    return False


def _proven_optimal(tracker: _Tracker) -> bool:
    """The backend reported a proven optimum, or the bound already meets the best schedule."""
    if tracker.done is not None and tracker.done[1] == SolveStatus.OPTIMAL.value:
        return True
    return math.ceil(tracker.bound - _BOUND_TOL) >= tracker.best_model_value - 1e-9


COUPLED_SHARE = 0.5
"""With both relaxations on, the share of the bound thread's time the coupled LP gets before the lanes."""
FIRST_WINDOWS_SHARE = 0.1
"""Where CP-SAT may be restarted in narrower windows, the share of the time limit the coupled LP's
first, coarse level may take before CP-SAT starts (:func:`_windows_from_the_start`; 1-4 s at 24 jobs on
8 GPUs)."""
TREE_COUPLED_SHARE = 0.3
"""Branch-and-price (``bnp``): the share the coupled LP gets before the tree (its bound stands beside
the tree's; the tree is what can prove optimality)."""
LEAF_SECONDS = 10.0
"""Branch-and-price: seconds at most for one leaf's exact check before the leaf is split on a window."""


class _LeafChecker:
    """Branch-and-price's exact check of a leaf (:data:`formulation.lane_tree.LeafCheck`): CP-SAT on the
    node's region with the objective cut off below the incumbent, one search worker, in a worker process
    of its own (OR-Tools cannot share the parent's process with highspy), kept for the next leaf. Every
    schedule it finds is offered to the solve's tracker (validated there like the solver's own)."""

    def __init__(self, payload: dict[str, Any], tracker: _Tracker, hard_deadline: float) -> None:
        self.payload = payload
        self.tracker = tracker
        self.hard_deadline = hard_deadline
        self.worker: _WorkerProcess | None = None
        self.seconds = 0.0
        self._lock = threading.Lock()  # close() from the parent's thread while a check runs on the tree's
        self._closed = False
        self.nice: int | None = None  # the priority its workers run at, once the bound thread gave way

    def give_way(self, nice: int) -> None:
        """Run this worker and the next ones at nice value ``nice`` (:meth:`_Relaxations._give_way`)."""
        with self._lock:
            self.nice = nice
            if self.worker is not None:
                _lower_thread_priority(nice, self.worker.process.pid)

    def __call__(self, region: Region, cutoff: int, seconds: float) -> LeafVerdict:
        began = time.perf_counter()
        try:
            return self._check(region, cutoff, seconds)
        finally:
            self.seconds += time.perf_counter() - began

    def _check(self, region: Region, cutoff: int, seconds: float) -> LeafVerdict:
        with self._lock:
            if self._closed:
                return LeafVerdict("open")
            if self.worker is None:
                self.worker = _WorkerProcess()
                if self.nice is not None:
                    _lower_thread_priority(self.nice, self.worker.process.pid)
            worker = self.worker
        deadline = min(time.time() + seconds, self.hard_deadline)
        options = {**self.payload["options"], "num_workers": 1, "windows": region, "cutoff": cutoff}
        payload = dict(self.payload, use_warm_start=False, deadline=deadline, options=options)
        leaf = _Tracker(self.tracker.problem, self.tracker.best, math.inf, -math.inf)
        killed = worker.run(payload, leaf, min(self.hard_deadline, deadline + 2.0), None)
        if killed or leaf.failure is not None or leaf.done is None:
            with self._lock:
                worker.kill()
                self.worker = None
            return LeafVerdict("open")
        if leaf.incumbents:
            self.tracker.offer(leaf.best, leaf.best_model_value)
        status, objective, bound = leaf.done[1], leaf.done[3], leaf.done[4]
        if status == SolveStatus.OPTIMAL.value and math.isfinite(objective):
            return LeafVerdict("optimal", float(objective))
        if status == SolveStatus.INFEASIBLE.value:
            return LeafVerdict("infeasible")
        return LeafVerdict("open", float(bound) if math.isfinite(bound) else math.nan)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self.worker is not None:
                self.worker.kill()
                self.worker = None


def standalone_leaf_checker(instance: Instance, problem: SlottedProblem, seconds: float) -> _LeafChecker:
    """A leaf checker outside a solve (tests, ``benchmarks.lane_slack``): CP-SAT on a region of
    ``problem`` (which needs an upper-bound solution), in a worker process of its own, for at most
    ``seconds`` from now. What it finds goes to a tracker of its own (``checker.tracker``); call
    ``close()`` when done."""
    if problem.upper_bound is None or problem.upper_bound_value is None:
        raise ValueError("the problem needs an upper-bound solution (SlottedProblem.with_upper_bound)")
    payload = _solver_payload(instance, problem, resolve("bnp"), deadline=time.time() + seconds, use_warm_start=False)
    tracker = _Tracker(problem, problem.upper_bound, float(problem.upper_bound_value), 0.0)
    return _LeafChecker(payload, tracker, time.time() + seconds)


RELAXATION_YIELD_NICE = 10
"""The nice value the bound thread (and branch-and-price's leaf checks) takes once the backend's own
bound has caught up with it: on 2 cores beside CP-SAT's two workers it then gets about a tenth of a
core while they run, and all of what they leave."""


def _lower_thread_priority(nice: int, pid: int | None = None) -> bool:
    """Raise the nice value of the calling thread (or of process ``pid``'s main thread, whose threads
    started later inherit it) to ``nice``. Linux only, where niceness is per thread; False elsewhere or
    when refused."""
    if not sys.platform.startswith("linux"):
        return False
    target = threading.get_native_id() if pid is None else pid
    try:
        if os.getpriority(os.PRIO_PROCESS, target) < nice:
            os.setpriority(os.PRIO_PROCESS, target, nice)
    except OSError:
        return False
    return True


CONTENTION = 1.5
"""How much slower the lane relaxation runs beside the solver (two cores: at 16 jobs 14-19 s alone,
converged within about 30 s beside CP-SAT)."""


_RUNNING_RELAXATIONS: set[_Relaxations] = set()
"""Relaxation threads started and not yet ended (their runs remove themselves)."""
_EXIT_JOIN_SECONDS = 10.0


def _stop_relaxations_at_exit() -> None:
    """Cancel every relaxation thread still running and give them a moment to end their round.

    They are daemon threads (a solve never waits for them past its deadline), but one killed inside a
    HiGHS call while the interpreter tears down can crash the process at exit; a cancelled one ends
    after its current round. Runs from :mod:`atexit`, after the non-daemon threads are joined and
    before the interpreter is torn down."""
    running = list(_RUNNING_RELAXATIONS)
    for relaxation in running:
        relaxation.cancel.set()
    until = time.time() + _EXIT_JOIN_SECONDS
    for relaxation in running:
        relaxation.thread.join(max(0.0, until - time.time()))


atexit.register(_stop_relaxations_at_exit)


class _Relaxations:
    """The relaxations on a thread of the parent while the solver's worker runs: the lane relaxation
    (:func:`formulation.lanes.lane_bound`, or the tree :func:`formulation.lane_tree.lane_tree_bound`)
    and the pair-coupled LP (:func:`formulation.relaxation.refined_coupled_bound`: coarse windows, then
    finer ones while it is the best bound), one after the other (``lanes_first``: ``True`` the lanes
    first with all the time; ``False`` the coupled LP first with a share, then the lanes only where
    they are expected to converge in what it leaves; ``None`` the latter, but the lanes first where
    they would be skipped from the start). HiGHS releases the GIL and both stop at the deadline. Each
    bound they prove is offered to the tracker like the solver's own. Once the solve is proven optimal
    they are cancelled rather than waited for."""

    def __init__(
        self,
        problem: SlottedProblem,
        tracker: _Tracker,
        deadline: float,
        *,
        coupled: bool = True,
        lanes: bool = True,
        tree: bool = False,
        leaf_check: _LeafChecker | None = None,
        began: float | None = None,
        lanes_first: bool | None = False,
        first: RelaxationBound | None = None,
        modes: bool | str = False,
    ) -> None:
        self.tree = tree
        # the coupled LP's first level, solved before the solver started (:func:`_windows_from_the_start`):
        # its refinement goes on from the next width
        self.first = first
        self.leaf_check = leaf_check
        self.began = time.time() if began is None else began
        self.own_bound = -math.inf  # the best bound this thread has offered (slot units)
        self.outcome: RelaxationBound | None = None
        self.offered: RelaxationBound | None = None  # the best LP proven so far (a finer one may be running)
        self.error: str | None = None
        self.lane_outcome: LaneBound | LaneTreeBound | None = None
        self.lane_offered: LaneBound | None = None
        if first is not None and first.proven:  # offered already, as _prove would
            self.offered = first
            self.own_bound = _less_a_hair(first.value)
        self.tree_offered = -math.inf  # the best global bound the tree has offered (slot units)
        self.lane_error: str | None = None
        self.tracker = tracker
        self.problem = problem
        self.coupled = coupled
        # after the coupled LP, the lanes run only where their column generation is expected to converge
        # (at 24 jobs on 8 GPUs in a minute it would not); first, they run whatever the estimate
        self.lanes_skipped: str | None = None
        self.coupled_started = False
        self.lane_seconds = 0.0
        # the lane LP's duals (or the tree root's) are still improving: they may still narrow CP-SAT's windows
        self.duals_coming = False
        if lanes:
            self.lanes_skipped = lane_skip_reason(problem)
            self.lane_seconds = CONTENTION * expected_lane_seconds(problem) if self.lanes_skipped is None else 0.0
            if self.lanes_skipped is None and self.lane_seconds > deadline - time.time():
                if lanes_first is None:  # rather than skipped: their Lagrangian bound holds whenever they stop
                    lanes_first = True
                elif not lanes_first:
                    self.lanes_skipped = "not expected to converge in the time limit"
        self.lanes_first = bool(lanes_first)
        # where CP-SAT is restarted in the lanes' windows (releases spread in time) their duals are wanted
        # soon, and there the mode-free ones come sooner (Poisson 24 × 8 seed 2: `cpsat` proved in 57 s with
        # them, not in 60 s with the selective lanes)
        converges = (
            lanes
            and tracker.narrowing is None
            and self.lanes_skipped is None
            and self.lane_seconds <= deadline - time.time()
        )
        self.modes = _auto_modes(modes, tree, self.lanes_first, converges)  # mode-aware lanes (lanes.PseudoJobs)
        self.lanes = lanes and self.lanes_skipped is None
        self.cancel = threading.Event()
        self.thread = threading.Thread(
            target=self._guarded_run, args=(problem, deadline), name="relaxations", daemon=True
        )
        _RUNNING_RELAXATIONS.add(self)
        self.thread.start()

    def _guarded_run(self, problem: SlottedProblem, deadline: float) -> None:
        try:
            self._run(problem, deadline)
        finally:
            _RUNNING_RELAXATIONS.discard(self)

    def _run(self, problem: SlottedProblem, deadline: float) -> None:
        start = self.first  # the coupled LP's refinement goes on from it
        if self.lanes_first:
            # the lanes first with all the time (their Lagrangian bound holds whenever they stop), then the
            # coupled LP with whatever they leave
            if self.lanes:
                self._lanes(problem, deadline)
            if self.coupled and not self._done(deadline):
                self._coupled(problem, deadline, 1.0, start)
            return
        if self.coupled:
            share = (TREE_COUPLED_SHARE if self.tree else COUPLED_SHARE) if self.lanes else 1.0
            self._coupled(problem, deadline, share, start)
        if not self.lanes or self._done(deadline):
            return
        if self.lane_seconds > deadline - time.time():  # the coupled LP used what the lanes needed
            self.lanes, self.lanes_skipped = False, "not expected to converge in the time left after the coupled LP"
            return
        self._lanes(problem, deadline)

    def _done(self, deadline: float) -> bool:
        return self.cancel.is_set() or _proven_optimal(self.tracker) or time.time() >= deadline

    def _coupled(
        self, problem: SlottedProblem, deadline: float, share: float, start: RelaxationBound | None = None
    ) -> None:
        self.coupled_started = True
        try:
            outcome = refined_coupled_bound(
                problem,
                time_limit=max(0.01, share * (deadline - time.time())),
                cancel=self.cancel,
                on_bound=self._offer,
                others=self.tracker.narrowing is not None,
                start=start,
            )
        except Exception as error:  # a bound is an extra; a failure must not lose the solve
            self.error = f"{type(error).__name__}: {error}"
        else:
            self.outcome = outcome

    def _lanes(self, problem: SlottedProblem, deadline: float) -> None:
        self.duals_coming = True
        try:
            if self.tree:
                self.lane_outcome = lane_tree_bound(
                    problem,
                    time_limit=max(0.01, deadline - time.time()),
                    cancel=self.cancel,
                    on_bound=self._offer_tree,
                    incumbent_value=self._tree_incumbent,
                    leaf_check=self.leaf_check,
                    leaf_seconds=LEAF_SECONDS,
                    on_root_others=self.tracker.offer_others,
                    modes=self.modes,
                )
                if self.lane_outcome.proven:
                    self._offer_tree(self.lane_outcome.value)
            else:
                self.lane_outcome = solve_lane_bound(
                    problem,
                    time_limit=max(0.01, deadline - time.time()),
                    cancel=self.cancel,
                    on_bound=self._offer_lanes,
                    modes="selective" if self.modes == "selective" else bool(self.modes),
                )
        except Exception as error:
            self.lane_error = f"{type(error).__name__}: {error}"
        finally:
            self.duals_coming = False

    def _give_way(self) -> None:
        """On the bound thread: once the backend's own bound has reached every bound this thread has
        proven, the backend's search is what closes the gap, and the thread goes on at a lower priority
        on the CPU the backend leaves. One way: Linux lets a process lower a thread's priority, not raise
        it back. Measured (12 jobs on 8 GPUs): ``bnp`` then proves as fast as ``cpsat``; at 16 jobs the
        tree's bound stays above CP-SAT's and the tree keeps its share (docs/oracle.md)."""
        tracker = self.tracker
        if tracker.relaxations_yielded is not None or not math.isfinite(self.own_bound):
            return
        if self.duals_coming and tracker.narrowing is not None and tracker.narrowing.pending():
            return  # the lanes' duals may still narrow CP-SAT's windows (_Narrowing): keep the share
        if tracker.solver_bound < self.own_bound:
            return
        if _lower_thread_priority(RELAXATION_YIELD_NICE):
            tracker.relaxations_yielded = round(time.time() - self.began, 3)
            if self.leaf_check is not None:
                self.leaf_check.give_way(RELAXATION_YIELD_NICE)

    def _tree_incumbent(self) -> float:
        """The tree asks for the incumbent before each node: on its thread, the moment to give way."""
        self._give_way()
        return self.tracker.best_model_value

    def _prove(self, value: float) -> float:
        """Offer a bound this thread has proven to the solve, less a hair for HiGHS' optimality
        tolerances (the objective is rounded up to whole slots after); returns what was offered."""
        value = _less_a_hair(value)
        self.tracker.offer_bound(value)
        self.own_bound = max(self.own_bound, value)
        self._give_way()
        return value

    def _offer(self, outcome: RelaxationBound) -> bool:
        """Offer a proven bound (and its bounds on the others' ends, for :class:`_Narrowing`); refine
        the LP only while it is the best bound and the solve goes on."""
        if outcome.others is not None:
            self.tracker.offer_others(outcome.others)
        value = self._prove(outcome.value)
        if self.offered is None or outcome.value > self.offered.value:
            self.offered = outcome
        return self.tracker.bound <= value + 1e-9 and not _proven_optimal(self.tracker)

    def _offer_lanes(self, outcome: LaneBound) -> bool:
        """Offer a lane bound (each round's Lagrangian bound that improves) and its bounds on the others'
        ends (for :class:`_Narrowing`); go on until proven optimal."""
        self._prove(outcome.value)
        if outcome.others is not None:
            self.tracker.offer_others(outcome.others)
        self.lane_offered = outcome
        return not _proven_optimal(self.tracker)

    def _offer_tree(self, value: float) -> bool:
        """Offer the tree's global bound (it only rises); go on until proven optimal. The first comes
        once the root is solved: no more windows come from its duals after it."""
        self.duals_coming = False
        self.tree_offered = max(self.tree_offered, value)
        self._prove(value)
        return not _proven_optimal(self.tracker)

    def finish(self, hard_deadline: float) -> None:
        """Wait for the relaxations until ``hard_deadline`` at most (cancel them first if the solve is
        already proven optimal) and record their summaries in the tracker."""
        if self.thread.is_alive() and _proven_optimal(self.tracker):
            self.cancel.set()
        self.thread.join(max(0.0, hard_deadline - time.time()))
        if self.thread.is_alive():  # past its deadline (a slow round on a loaded machine): stop it now
            self.cancel.set()
        if self.coupled:
            self._record_coupled()
        if self.lanes_skipped is not None:
            self.tracker.lanes = {"status": f"skipped: {self.lanes_skipped}"}
        elif self.lanes:
            lanes = self.lane_outcome or self.lane_offered
            if self.lane_error is not None:
                self.tracker.lanes = {"status": f"failed: {self.lane_error}"}
            elif lanes is None:
                if self.thread.is_alive():
                    status = "time_limit"
                elif _proven_optimal(self.tracker):
                    status = "not run: the solve was proven optimal first"
                else:
                    status = "not run"
                # the tree may have offered bounds before it overran: the best of them is proven
                offered = self.tree_offered if self.tree and math.isfinite(self.tree_offered) else None
                self.tracker.lanes = {
                    "status": status,
                    "bound_slots": offered,
                    "bound_seconds": (
                        None if offered is None else self.problem.objective_seconds(math.ceil(offered - _BOUND_TOL))
                    ),
                }
            else:
                summary = lanes.summary()
                summary["bound_seconds"] = (
                    self.problem.objective_seconds(math.ceil(lanes.value - _BOUND_TOL)) if lanes.proven else None
                )
                self.tracker.lanes = summary
        if self.tracker.lanes is not None:
            self.tracker.lanes.setdefault("bound_slots", None)  # every summary has it: None when none proven
            self.tracker.lanes["method"] = "branch-and-price" if self.tree else "lane LP"
            self.tracker.lanes["order"] = "first" if self.lanes_first else "after"
            self.tracker.lanes["lane_modes"] = self.modes  # asked for ("auto" resolved); "mode_aware": what ran

    def _record_coupled(self) -> None:
        # a finer LP still being solved at the deadline leaves the best one proven before it
        outcome = self.outcome or self.offered
        if self.error is not None:
            self.tracker.relaxation = {"status": f"failed: {self.error}"}
        elif outcome is None:
            status = "time_limit"
            if self.lanes_first and not self.coupled_started:
                proven = _proven_optimal(self.tracker)
                status = "not run: " + ("the solve was proven optimal first" if proven else "the lanes took the time")
            self.tracker.relaxation = {"status": status}
        else:
            self.tracker.relaxation = {
                "status": outcome.status,
                "refining": self.outcome is None,
                "bound_slots": outcome.value if outcome.proven else None,
                "bound_seconds": (
                    self.problem.objective_seconds(math.ceil(outcome.value - _BOUND_TOL)) if outcome.proven else None
                ),
                "window_slots": outcome.window_slots,
                "variables": outcome.variables,
                "constraints": outcome.constraints,
                "seconds": round(outcome.seconds, 3),
                "rounds": outcome.rounds,
                "shared_fraction": None if math.isnan(outcome.shared_fraction) else round(outcome.shared_fraction, 4),
            }


def _export(
    instance: Instance,
    portable: dict[str, Any],
    slot: float | None,
    settings: _Settings,
    path: str | Path,
) -> None:
    suffix = Path(path).suffix.lower()
    if suffix not in (".mps", ".lp"):
        raise DuettoInputError(f"must end in .mps or .lp, got '{path}'", field="export_model")
    spec = resolve("pyomo:export")
    check_available(spec)
    horizon_slots, objective = settings.horizon_slots, settings.objective
    base = discretize(instance, slot, horizon_slots, objective=objective, **settings.kwargs)  # type: ignore[arg-type]
    initial = _initial_solution(base, settings)  # the same windows as the model that is solved
    payload = {
        "instance": portable,
        "slot": base.slot,
        "horizon_slots": horizon_slots,
        "objective": objective,
        "units_per_slot": base.units_per_slot,
        "warm_start": _pack(initial),
        "module": spec.module,
        "export_path": str(Path(path).resolve()),
    }
    tracker = _Tracker(base, initial, math.inf, -math.inf)
    _run_worker(payload, tracker, time.time() + 600, None)
    if tracker.failure is not None:
        kind, message = tracker.failure
        if kind == "unavailable":
            raise SolverUnavailableError(message)
        raise DuettoInputError(f"cannot export the model: {message.splitlines()[0]}", source=str(path))


def _static_bound(problem: SlottedProblem) -> int:
    """A valid bound before any solving: every job alone from its release, and for total JCT the
    order-statistics area bound (``completion_sum_lower_bound``)."""
    if problem.objective == "jct":
        return max(problem.trivial_lower_bound(), completion_sum_lower_bound(problem))
    return problem.trivial_lower_bound()


def _bound_slots(problem: SlottedProblem, tracker: _Tracker) -> float:
    # the objective is an integer in slot units: round a fractional bound up
    return float(math.ceil(tracker.bound - _BOUND_TOL))


def _seconds(problem: SlottedProblem, tracker: _Tracker) -> tuple[float, float]:
    ends = evaluate(problem, tracker.best)
    value = problem.objective_seconds(problem.objective_slots(ends))
    bound = problem.objective_seconds(_bound_slots(problem, tracker))
    return value, min(bound, value)


def _bound_meets(objective_s: float, bound_s: float) -> bool:
    """The bound (seconds) proves the schedule's objective optimal, up to float noise."""
    return objective_s - bound_s <= 1e-9 * max(1.0, abs(objective_s))


def _result(
    spec: BackendSpec,
    problem: SlottedProblem,
    tracker: _Tracker,
    killed: bool,
    parent_build: float,
    wall: float,
    objective: str,
    *,
    tree_alone: bool = False,
) -> Result:
    objective_s, bound_s = _seconds(problem, tracker)
    status = SolveStatus.TIME_LIMIT
    message = ""
    worker_build = 0.0
    solve_seconds = 0.0
    stats: dict[str, Any] = {"problem": problem.summary()}
    if tracker.built is not None:
        worker_build = tracker.built[0]
        stats["model"] = tracker.built[1]
    if tracker.done is not None:
        _, status_value, _, _, _, build_s, solve_s, backend_message, backend_stats = tracker.done
        status = SolveStatus(status_value)
        worker_build, solve_seconds, message = build_s, solve_s, backend_message
        stats["backend"] = backend_stats
        if status is SolveStatus.INFEASIBLE:
            status = SolveStatus.ERROR
            message = "the model reported infeasible although the warm start is feasible: " + backend_message
        elif status is SolveStatus.UNKNOWN:
            status = SolveStatus.TIME_LIMIT
    elif killed:
        message = "time limit reached; the solver process was stopped"
        if tracker.solve_started is not None:
            solve_seconds = time.perf_counter() - tracker.solve_started
    elif tracker.failure is not None:
        status = SolveStatus.ERROR
        message = tracker.failure[1]
    elif tree_alone:
        # branch-and-price without CP-SAT (options.primal = False): the tree is the solver, and one that
        # stopped before the time limit (skipped where the lanes do not apply, open, a node or pool limit)
        # stopped for another reason; an optimum is recognised below, where the bound meets the schedule
        tree_status = str((tracker.lanes or {}).get("status", "not run"))
        if tree_status != "time_limit":
            status = SolveStatus.FEASIBLE
            message = f"branch-and-price without its primal heuristic: the tree ended ({tree_status})"
    if len(tracker.builds) > 1:
        # CP-SAT was restarted (_Narrowing): every model's build counts, and the solve is the rest of the time
        worker_build = sum(tracker.builds)
        solve_seconds = max(0.0, wall - parent_build - worker_build)
    if status is SolveStatus.OPTIMAL and tracker.final_rejected:
        # the model's optimum was rejected (float near miss, see formulation.discretize): not proven
        status = SolveStatus.FEASIBLE
        message = "the model's optimum is invalid under the float semantics (rounding near miss); best valid kept"
    if status is SolveStatus.OPTIMAL:
        bound_s = objective_s
    elif _bound_meets(objective_s, bound_s) and status is not SolveStatus.ERROR:
        status = SolveStatus.OPTIMAL  # the bound meets the schedule: proven, even if the solver stopped
        if killed:
            message = "proven optimal: the bound meets the schedule; the solver process was stopped"
        elif tree_alone:
            message = "proven optimal: the bound meets the schedule (branch-and-price without its primal heuristic)"
    stats.update(
        {
            "warm_start_objective": problem.objective_seconds(problem.upper_bound_value or 0),
            "incumbents": tracker.incumbents,
            "rejected_incumbents": tracker.rejected,
            "killed": killed,
            "wall_seconds": round(wall, 4),
            "bound_slots": _bound_slots(problem, tracker),
            "coupled_bound": tracker.relaxation,
            "lane_bound": tracker.lanes,
            "relaxations_yielded_seconds": tracker.relaxations_yielded,
            "lane_windows": None
            if tracker.narrowing is None
            else {
                "restarts": tracker.narrowing.restarts,
                "first_model_slack": [tracker.narrowing.problem_slack, tracker.narrowing.first_windows],
            },
            "objective_slots": problem.objective_slots(evaluate(problem, tracker.best, exact=True)),
        }
    )
    schedule = to_schedule(
        problem,
        tracker.best,
        producer=spec.name,
        metadata={
            "objective_kind": objective,
            "objective": objective_s,
            "bound": bound_s,
            "status": status.value,
        },
    )
    return Result(
        status=status,
        objective=objective_s,
        bound=bound_s,
        schedule=schedule,
        solver=spec.name,
        objective_kind=objective,
        build_seconds=parent_build + worker_build,
        solve_seconds=solve_seconds,
        message=message,
        stats=stats,
    )
