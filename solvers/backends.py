"""Registry of exact backends: solver name → module, function and the packages it needs.

Names: ``"cpsat"`` (OR-Tools CP-SAT, :mod:`solvers.cpsat`), ``"highs"`` (the Pyomo model solved by
HiGHS, :mod:`solvers.highs`), ``"portfolio"`` (both at once, one core each, best schedule and best
bound of either: both models are exact, NOTES-oracle pitfall 6), ``"bnp"`` (branch-and-price: the
lane tree of :mod:`formulation.lane_tree` in the caller's process, CP-SAT in the worker as its primal
heuristic and, in a second worker, as the exact check of its leaves; see :mod:`solvers.api`) and
``"pyomo:NAME"`` (the same
Pyomo model with any solver Pyomo knows, e.g. ``pyomo:gurobi``, ``pyomo:cbc``, ``pyomo:appsi_highs``).
Nothing here imports a solver: the backend module is imported inside the worker process only (see
:mod:`solvers.backend_protocol`).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from solvers.backend_protocol import SolverUnavailableError


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """How to run one solver name."""

    name: str  # as the user wrote it
    module: str  # module holding the backend function
    function: str  # backend function (backend protocol)
    solver_name: str  # passed to the function as ``solver_name``
    packages: tuple[str, ...]  # Python packages that must be importable


_FIXED: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "cpsat": ("solvers.cpsat", "solve_cpsat", "cpsat", ("ortools",)),
    "highs": ("solvers.highs", "solve_pyomo", "highs", ("pyomo", "highspy")),
    # both exact models side by side, one core each: best schedule and best bound of either (see api)
    "portfolio": ("solvers.cpsat", "solve_cpsat", "portfolio", ("ortools", "pyomo", "highspy")),
    # branch-and-price: the lane tree in the parent (highspy), CP-SAT as primal heuristic and leaf check
    "bnp": ("solvers.cpsat", "solve_cpsat", "bnp", ("ortools", "highspy")),
}
_PIP_NAME = {"ortools": "ortools", "pyomo": "pyomo", "highspy": "highspy"}


def resolve(name: str) -> BackendSpec:
    """The :class:`BackendSpec` of a solver name, or :class:`SolverUnavailableError` /
    ``DuettoInputError`` with a clear message."""
    from formulation.errors import DuettoInputError

    if not isinstance(name, str) or not name:
        raise DuettoInputError(
            f"must be 'highs', 'cpsat', 'portfolio', 'bnp' or 'pyomo:NAME', got {name!r}", field="solver"
        )
    key = name.strip().lower()
    if key in _FIXED:
        module, function, solver_name, packages = _FIXED[key]
        return BackendSpec(key, module, function, solver_name, packages)
    if key.startswith("pyomo:"):
        solver_name = name.strip()[len("pyomo:") :]
        if not solver_name:
            raise DuettoInputError("'pyomo:' needs a solver name, e.g. pyomo:cbc or pyomo:gurobi", field="solver")
        return BackendSpec(key, "solvers.highs", "solve_pyomo", solver_name, ("pyomo",))
    raise DuettoInputError(
        f"unknown solver {name!r}: use 'highs', 'cpsat', 'portfolio', 'bnp' or 'pyomo:NAME'", field="solver"
    )


def check_available(spec: BackendSpec) -> None:
    """Raise :class:`SolverUnavailableError` naming the package to install, or the missing backend."""
    for package in spec.packages:
        if importlib.util.find_spec(package) is None:
            raise SolverUnavailableError(
                f"solver '{spec.name}' needs the Python package '{package}': pip install {_PIP_NAME[package]}"
            )
    if importlib.util.find_spec(spec.module) is None:
        raise SolverUnavailableError(f"solver '{spec.name}' is not available: module {spec.module} is missing")


def available_solvers() -> tuple[str, ...]:
    """Solver names whose packages are installed (``"pyomo:NAME"`` stands for any Pyomo solver; whether
    that solver's executable exists is only known when it runs)."""
    names = []
    for name in ("cpsat", "highs", "portfolio", "bnp", "pyomo:NAME"):
        try:
            check_available(resolve(name))
        except SolverUnavailableError:
            continue
        names.append(name)
    return tuple(names)
