"""``pyomo:<name>``: the Pyomo model of the slotted problem solved by any solver Pyomo knows.

Gurobi, CPLEX, SCIP, CBC, GLPK, Xpress, HiGHS through Pyomo's own interfaces (``appsi_highs``), …:
whatever ``pyomo.environ.SolverFactory(name)`` can run on this machine. A solver that is missing gives
a :class:`~solvers.backend_protocol.SolverUnavailableError` naming the package or executable to
install. The time limit and a zero MIP gap are passed under each solver family's own option names;
a warm start is passed when the interface supports one. Unlike the ``highs`` backend
(:mod:`solvers.highs`), a generic solver reports its incumbent only at the end.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from formulation.discretize import SlotSolution, SlottedProblem
from formulation.pyomo_model import ModelOptions, build_pyomo_model, extract_solution
from solvers.backend_protocol import BackendOutcome, NullReporter, Reporter, SolverUnavailableError
from solvers.result import SolveStatus

#: What to install for the solvers people ask for (matched on the name's family, see ``_family``).
INSTALL_HINTS: dict[str, str] = {
    "gurobi": "Gurobi: pip install gurobipy (and a Gurobi licence), or the gurobi_cl executable on PATH",
    "cplex": "CPLEX: pip install cplex, or the cplex executable on PATH",
    "cbc": "CBC: the 'cbc' executable on PATH (apt install coinor-cbc, or conda install -c conda-forge coincbc)",
    "glpk": "GLPK: the 'glpsol' executable on PATH (apt install glpk-utils)",
    "scip": "SCIP: the 'scip' executable with its AMPL interface on PATH (conda install -c conda-forge scip)",
    "xpress": "FICO Xpress: pip install xpress (and a licence)",
    "highs": "HiGHS: pip install highspy",
    "mosek": "MOSEK: pip install mosek (and a licence)",
}

#: Time limit / gap / threads option names per family (Pyomo passes ``options`` through verbatim).
_OPTION_NAMES: dict[str, tuple[str | None, str | None, str | None]] = {
    "gurobi": ("TimeLimit", "MIPGap", "Threads"),
    "cplex": ("timelimit", "mip_tolerances_mipgap", "threads"),
    "cbc": ("sec", "ratioGap", "threads"),
    "glpk": ("tmlim", "mipgap", None),
    "scip": ("limits/time", "limits/gap", None),
    "xpress": ("maxtime", "miprelstop", "threads"),
    "highs": ("time_limit", "mip_rel_gap", "threads"),
    "mosek": ("dparam.optimizer_max_time", "dparam.mio_tol_rel_gap", "iparam.num_threads"),
}


def _family(name: str) -> str:
    lowered = name.lower()
    for family in _OPTION_NAMES:
        if family in lowered:
            return family
    return lowered


def solver_factory(name: str) -> Any:
    """``SolverFactory(name)``, or :class:`SolverUnavailableError` naming what to install."""
    import pyomo.environ as pyo
    from pyomo.opt.base.solvers import UnknownSolver

    # an unknown name makes Pyomo log a warning with its own traceback before it returns an
    # UnknownSolver; the error below says it in one line
    pyomo_log = logging.getLogger("pyomo.opt")
    level = pyomo_log.level
    pyomo_log.setLevel(logging.ERROR)
    try:
        solver = pyo.SolverFactory(name)
    except Exception as error:  # a plugin that fails to construct is as good as missing
        raise SolverUnavailableError(f"Pyomo cannot create solver '{name}': {error}") from error
    finally:
        pyomo_log.setLevel(level)
    if solver is None or isinstance(solver, UnknownSolver):
        raise SolverUnavailableError(
            f"Pyomo knows no solver named '{name}' (try gurobi, cplex, scip, cbc, glpk, appsi_highs)"
        )
    try:
        available = bool(solver.available(exception_flag=False))
    except Exception:
        available = False
    if not available:
        hint = INSTALL_HINTS.get(_family(name), f"the '{name}' solver")
        raise SolverUnavailableError(f"solver 'pyomo:{name}' is not available on this machine; install {hint}")
    return solver


def solve_generic(
    problem: SlottedProblem,
    solver_name: str,
    time_limit: float = 60.0,
    objective: str = "jct",
    warm_start: SlotSolution | None = None,
    report: Reporter | None = None,
    **options: Any,
) -> BackendOutcome:
    """Solve the Pyomo model with ``SolverFactory(solver_name)`` (backend protocol).

    Options
    -------
    threads : int
        Solver threads, where the family has such an option.
    solver_options : dict
        Extra options passed verbatim to the solver.
    model_options : dict
        :class:`formulation.pyomo_model.ModelOptions` fields.
    log : bool
        Show the solver's output (``tee``).
    """
    from pyomo.opt import SolverStatus, TerminationCondition

    report = report or NullReporter()
    solver = solver_factory(solver_name)
    began = time.perf_counter()
    model = build_pyomo_model(
        problem, objective, warm_start, options=ModelOptions(**dict(options.get("model_options", {})))
    )
    build_seconds = time.perf_counter() - began
    stats: dict[str, Any] = dict(model._duetto_index.stats)
    report.built(build_seconds, dict(stats))

    remaining = max(1.0, time_limit - build_seconds)
    limit_name, gap_name, threads_name = _OPTION_NAMES.get(_family(solver_name), (None, None, None))
    solver_options: dict[str, Any] = {}
    if limit_name:
        solver_options[limit_name] = math.ceil(remaining) if _family(solver_name) == "glpk" else remaining
    if gap_name:
        solver_options[gap_name] = 0.0
    if threads_name and options.get("threads") is not None:
        solver_options[threads_name] = int(options["threads"])
    solver_options.update(dict(options.get("solver_options", {})))
    kwargs: dict[str, Any] = {"load_solutions": False, "tee": bool(options.get("log", False))}
    warm = warm_start is not None and _warm_start_capable(solver)
    if warm:
        kwargs["warmstart"] = True
    solve_began = time.perf_counter()
    try:
        results = solver.solve(model, options=solver_options, **kwargs)
    except TypeError:  # an interface without ``options=`` / ``warmstart=``
        for key in ("warmstart",):
            kwargs.pop(key, None)
        solver.options.update(solver_options)
        results = solver.solve(model, **kwargs)
    solve_seconds = time.perf_counter() - solve_began

    termination = results.solver.termination_condition
    has_solution = len(getattr(results, "solution", [])) > 0 and results.solver.status in (
        SolverStatus.ok,
        SolverStatus.warning,
        SolverStatus.aborted,
    )
    solution: SlotSolution | None = None
    value = math.nan
    if has_solution:
        try:
            model.solutions.load_from(results)
            solution = extract_solution(model, problem)
            value = float(round(model.objective()))
        except Exception:  # a status with no usable values
            solution = None
    if termination == TerminationCondition.optimal and solution is not None:
        status = SolveStatus.OPTIMAL
    elif termination in (TerminationCondition.maxTimeLimit, TerminationCondition.maxIterations):
        status = SolveStatus.TIME_LIMIT if solution is not None else SolveStatus.UNKNOWN
    elif termination in (TerminationCondition.infeasible, TerminationCondition.infeasibleOrUnbounded):
        status = SolveStatus.ERROR  # windows come from a feasible solution: a model bug
    else:
        status = SolveStatus.FEASIBLE if solution is not None else SolveStatus.UNKNOWN
    bound = _lower_bound(results)
    if status is SolveStatus.OPTIMAL:
        bound = value
    if solution is not None:
        report.incumbent(solution, value, bound)
    stats.update({"termination": str(termination), "warm_start_passed": warm, "solver_options": solver_options})
    return BackendOutcome(
        status=status,
        solution=solution,
        objective=value,
        bound=bound,
        build_seconds=build_seconds,
        solve_seconds=solve_seconds,
        message=str(termination),
        stats=stats,
    )


def _warm_start_capable(solver: Any) -> bool:
    try:
        return bool(solver.warm_start_capable())
    except Exception:
        return False


def _lower_bound(results: Any) -> float:
    try:
        bound = results.problem.lower_bound
    except AttributeError:
        return math.nan
    try:
        value = float(bound)
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) else math.nan
