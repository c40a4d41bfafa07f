"""The ``highs`` backend: the Pyomo model of the slotted problem solved by HiGHS (highspy).

The model is built with :func:`formulation.pyomo_model.build_pyomo_model`, compiled to matrices by
Pyomo's standard-form compiler (``pyomo.repn.plugins.standard_form``, one vectorised pass: far cheaper
than row-by-row loading, NOTES-oracle pitfall 3) and passed to ``highspy.Highs`` in one call. Talking
to highspy directly gives what the Pyomo wrappers do not: a warm start (``setSolution``), every
improving solution and the dual bound as they happen (MIP callbacks, streamed to the parent through
the :class:`~solvers.backend_protocol.Reporter`), and an interrupt when the wall-clock limit passes.

``pyomo:<name>`` (any solver Pyomo's ``SolverFactory`` knows) is in :mod:`solvers.pyomo_generic`;
:func:`solve_pyomo` dispatches on the name, as ``solvers.backend_protocol`` registers it.

Import this module only in a backend worker process: highspy and OR-Tools cannot share a process.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse  # noqa: F401  (imported here, at worker start, not inside the timed model build)

from formulation.discretize import SlotAssignment, SlotSolution, SlottedProblem
from formulation.errors import DuettoInputError
from formulation.pyomo_model import (
    ModelIndex,
    ModelOptions,
    build_pyomo_model,
    extract_solution,
)
from formulation.pyomo_model import (
    export_model as export_pyomo_model,
)
from solvers.backend_protocol import BackendOutcome, NullReporter, Reporter, SolverUnavailableError
from solvers.result import SolveStatus

_INTERRUPT_MARGIN = 0.02  # stop this many seconds before the deadline (the parent kills at the limit)


@dataclass
class CompiledModel:
    """The Pyomo model as matrices, with the columns that carry the schedule.

    Attributes
    ----------
    columns
        Pyomo variables in column order.
    cost, offset, matrix, row_lower, row_upper, col_lower, col_upper, integer
        ``min cost·x + offset`` s.t. ``row_lower ≤ matrix·x ≤ row_upper``, bounds, integrality.
    position
        ``id(pyomo variable) → column``.
    """

    columns: list[Any]
    cost: np.ndarray
    offset: float
    matrix: Any  # scipy.sparse.csc_array
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    position: dict[int, int]

    @property
    def num_cols(self) -> int:
        return len(self.columns)

    @property
    def num_rows(self) -> int:
        return int(self.matrix.shape[0])


def compile_model(model: Any) -> CompiledModel:
    """Compile a linear Pyomo model to matrices (mixed form: each row keeps its sense)."""
    from pyomo.repn.plugins.standard_form import LinearStandardFormCompiler

    info = LinearStandardFormCompiler().write(model, mixed_form=True, set_sense=None)
    columns = list(info.columns)
    ncol = len(columns)
    inf = math.inf
    col_lower = np.empty(ncol)
    col_upper = np.empty(ncol)
    integer = np.zeros(ncol, dtype=bool)
    for j, var in enumerate(columns):
        lb, ub = var.bounds
        if var.fixed:
            lb = ub = var.value
        col_lower[j] = -inf if lb is None else lb
        col_upper[j] = inf if ub is None else ub
        integer[j] = var.is_integer() or var.is_binary()
    rhs = np.asarray(info.rhs, dtype=float)
    row_lower = np.full(len(rhs), -inf)
    row_upper = np.full(len(rhs), inf)
    for r, (_, bound_type) in enumerate(info.rows):
        if bound_type == 0:  # equality
            row_lower[r] = row_upper[r] = rhs[r]
        elif bound_type > 0:  # body <= rhs
            row_upper[r] = rhs[r]
        else:  # body >= rhs
            row_lower[r] = rhs[r]
    if info.c.shape[0]:
        cost = np.asarray(info.c.toarray()).ravel()[:ncol]
        offset = float(info.c_offset[0])
        objective = info.objectives[0]
        if not objective.is_minimizing():
            raise DuettoInputError("the duetto models minimise")
    else:
        cost, offset = np.zeros(ncol), 0.0
    return CompiledModel(
        columns=columns,
        cost=cost,
        offset=offset,
        matrix=info.A.tocsc(),
        row_lower=row_lower,
        row_upper=row_upper,
        col_lower=col_lower,
        col_upper=col_upper,
        integer=integer,
        position={id(v): j for j, v in enumerate(columns)},
    )


def _load_highs(compiled: CompiledModel) -> Any:
    import highspy

    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    lp = highspy.HighsLp()
    lp.num_col_ = compiled.num_cols
    lp.num_row_ = compiled.num_rows
    lp.col_cost_ = compiled.cost
    lp.col_lower_ = np.where(np.isinf(compiled.col_lower), -highspy.kHighsInf, compiled.col_lower)
    lp.col_upper_ = np.where(np.isinf(compiled.col_upper), highspy.kHighsInf, compiled.col_upper)
    lp.row_lower_ = np.where(np.isinf(compiled.row_lower), -highspy.kHighsInf, compiled.row_lower)
    lp.row_upper_ = np.where(np.isinf(compiled.row_upper), highspy.kHighsInf, compiled.row_upper)
    lp.offset_ = compiled.offset
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = compiled.matrix.indptr
    lp.a_matrix_.index_ = compiled.matrix.indices
    lp.a_matrix_.value_ = compiled.matrix.data
    lp.integrality_ = [
        highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous for flag in compiled.integer
    ]
    status = highs.passModel(lp)
    if status == highspy.HighsStatus.kError:
        raise RuntimeError("HiGHS rejected the compiled model")
    return highs


class _SolutionReader:
    """Reads a slot-level solution from a column vector (callbacks and the final solution)."""

    def __init__(self, model: Any, compiled: CompiledModel) -> None:
        self.model = model
        self.compiled = compiled
        self.index: ModelIndex = model._duetto_index

    def load(self, values: np.ndarray) -> None:
        for var, value in zip(self.compiled.columns, values, strict=True):
            var.set_value(float(value), skip_validation=True)

    def read(self, values: np.ndarray) -> SlotSolution:
        self.load(values)
        return extract_solution(self.model, self.index.problem)


def _threads(options: dict[str, Any]) -> int:
    requested = options.get("threads")
    if requested is not None:
        return max(1, int(requested))
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        available = os.cpu_count() or 1
    return max(1, available)


def _status_of(highs: Any, has_solution: bool) -> SolveStatus:
    import highspy

    status = highs.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        return SolveStatus.OPTIMAL
    if status == highspy.HighsModelStatus.kInfeasible:
        return SolveStatus.INFEASIBLE
    if status in (
        highspy.HighsModelStatus.kTimeLimit,
        highspy.HighsModelStatus.kInterrupt,
    ):
        return SolveStatus.TIME_LIMIT if has_solution else SolveStatus.UNKNOWN
    return SolveStatus.FEASIBLE if has_solution else SolveStatus.UNKNOWN


def solve_highs(
    problem: SlottedProblem,
    time_limit: float = 60.0,
    objective: str = "jct",
    warm_start: SlotSolution | None = None,
    report: Reporter | None = None,
    **options: Any,
) -> BackendOutcome:
    """Solve the Pyomo model with HiGHS (backend protocol, see ``solvers.backend_protocol``).

    Options
    -------
    threads : int
        HiGHS threads (default: the CPUs this process may use).
    log : bool
        HiGHS log on stdout.
    highs_options : dict
        Extra HiGHS options by name (``{"mip_heuristic_effort": 0.1}``).
    model_options : dict
        :class:`formulation.pyomo_model.ModelOptions` fields.
    """
    report = report or NullReporter()
    began = time.perf_counter()
    deadline = began + time_limit
    model_options = ModelOptions(**dict(options.get("model_options", {})))
    model = build_pyomo_model(problem, objective, warm_start, options=model_options)
    index: ModelIndex = model._duetto_index
    built_pyomo = time.perf_counter()
    compiled = compile_model(model)
    compiled_at = time.perf_counter()
    highs = _load_highs(compiled)
    build_seconds = time.perf_counter() - began
    stats: dict[str, Any] = dict(index.stats)
    stats.update(
        {
            "pyomo_build_seconds": round(built_pyomo - began, 4),
            "compile_seconds": round(compiled_at - built_pyomo, 4),
            "load_seconds": round(time.perf_counter() - compiled_at, 4),
            "rows": compiled.num_rows,
            "columns": compiled.num_cols,
            "nonzeros": int(compiled.matrix.nnz),
        }
    )
    report.built(build_seconds, dict(stats))

    import highspy

    reader = _SolutionReader(model, compiled)
    threads = _threads(options)
    highs.setOptionValue("output_flag", bool(options.get("log", False)))
    highs.setOptionValue("threads", threads)
    highs.setOptionValue("mip_rel_gap", 0.0)
    highs.setOptionValue("mip_abs_gap", 1e-6)
    highs.setOptionValue("random_seed", int(options.get("seed", 0)))
    # Strong branching took most of the LP iterations on this model (HiGHS log); trusting
    # pseudo-costs after one observation explored 2-4x more nodes and proved the same or better bounds
    # in the variant study of docs/pyomo-model.md.
    highs.setOptionValue("mip_pscost_minreliable", 1)
    # Root restarts (each re-presolves and re-runs the root heuristics) and the root reduced-cost
    # sub-MIP took most of the time on small instances (a 4-job instance: 26 s with them, 5 s without);
    # RINS / RENS stay on, they find the improving solutions (docs/pyomo-model.md).
    highs.setOptionValue("mip_heuristic_run_root_reduced_cost", False)
    highs.setOptionValue("mip_allow_restart", False)
    remaining = max(0.05, deadline - time.perf_counter() - _INTERRUPT_MARGIN)
    highs.setOptionValue("time_limit", remaining)
    for name, value in dict(options.get("highs_options", {})).items():
        highs.setOptionValue(name, value)

    warm_used = False
    if warm_start is not None and index.stats.get("warm_start_applied", False):
        values = np.array([var.value if var.value is not None else 0.0 for var in compiled.columns], dtype=float)
        sol = highspy.HighsSolution()
        sol.col_value = values
        sol.value_valid = True
        warm_used = highs.setSolution(sol) != highspy.HighsStatus.kError

    best: dict[str, Any] = {"value": math.inf, "solution": None, "bound": -math.inf}

    def on_improving(event: Any) -> None:
        value = float(event.data_out.objective_function_value)
        bound = float(event.data_out.mip_dual_bound)
        if value < best["value"] - 1e-9:
            try:
                solution = reader.read(np.asarray(event.data_out.mip_solution))
            except ValueError:  # a vector of another length (never seen): keep solving, report at the end
                return
            best.update(value=value, solution=solution)
            report.incumbent(solution, round(value), bound if math.isfinite(bound) else math.nan)

    def on_interrupt(event: Any) -> None:
        bound = float(event.data_out.mip_dual_bound)
        if math.isfinite(bound) and bound > best["bound"] + 1e-9:
            best["bound"] = bound
            report.bound(bound)
        if time.perf_counter() >= deadline - _INTERRUPT_MARGIN:
            event.interrupt()

    highs.cbMipImprovingSolution.subscribe(on_improving)
    highs.cbMipInterrupt.subscribe(on_interrupt)
    solve_began = time.perf_counter()
    highs.run()
    solve_seconds = time.perf_counter() - solve_began

    info = highs.getInfo()
    solution: SlotSolution | None = None
    value = math.nan
    if info.primal_solution_status == 2:  # kSolutionStatusFeasible
        final = np.asarray(highs.getSolution().col_value)
        solution = reader.read(final)
        value = float(info.objective_function_value)
    elif best["solution"] is not None:
        solution, value = best["solution"], best["value"]
    status = _status_of(highs, solution is not None)
    bound = float(info.mip_dual_bound)
    if status is SolveStatus.OPTIMAL:
        bound = value
    if status is SolveStatus.INFEASIBLE:
        status = SolveStatus.ERROR  # windows come from a feasible solution: a model bug
    stats.update(
        {
            "highs_status": highs.modelStatusToString(highs.getModelStatus()),
            "nodes": int(info.mip_node_count),
            "lp_iterations": int(info.simplex_iteration_count),
            "threads": threads,
            "warm_start_loaded": warm_used,
        }
    )
    return BackendOutcome(
        status=status,
        solution=_with_model_ends(solution),
        objective=float(round(value)) if math.isfinite(value) else math.nan,
        bound=bound if math.isfinite(bound) else math.nan,
        build_seconds=build_seconds,
        solve_seconds=solve_seconds,
        message=stats["highs_status"],
        stats=stats,
    )


def _with_model_ends(solution: SlotSolution | None) -> SlotSolution | None:
    if solution is None:
        return None
    return {job_id: SlotAssignment(a.start, a.gpus, a.mode, a.end) for job_id, a in solution.items()}


def solve_pyomo(
    problem: SlottedProblem,
    solver_name: str = "highs",
    time_limit: float = 60.0,
    objective: str = "jct",
    warm_start: SlotSolution | None = None,
    report: Reporter | None = None,
    **options: Any,
) -> BackendOutcome:
    """Backend entry point for ``"highs"`` and ``"pyomo:NAME"`` (``solver_name`` is ``"highs"`` or
    ``NAME``); see ``solvers.backend_protocol``."""
    if solver_name == "highs":
        try:
            import highspy  # noqa: F401
        except ImportError as error:  # pragma: no cover - highspy is a dependency
            raise SolverUnavailableError(
                "the 'highs' solver needs the Python package highspy (pip install highspy)"
            ) from error
        return solve_highs(problem, time_limit, objective, warm_start, report, **options)
    from solvers.pyomo_generic import solve_generic

    return solve_generic(problem, solver_name, time_limit, objective, warm_start, report, **options)


def export_model(problem: SlottedProblem, path: str | Path, objective: str = "jct") -> Path:
    """Write the Pyomo model of ``problem`` as ``.mps`` or ``.lp`` (by suffix)."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".mps", ".lp"):
        raise DuettoInputError(f"unknown model file type '{Path(path).suffix}': use .mps or .lp", source=str(path))
    return export_pyomo_model(build_pyomo_model(problem, objective), path)
