"""What an exact backend implements, and how it talks to :func:`solvers.solve`.

:func:`solvers.api.solve` builds the :class:`~formulation.discretize.SlottedProblem` and a warm start in
the calling process, then runs the backend in a **worker subprocess** (OR-Tools and highspy cannot
share a process; HiGHS can overrun its time limit, so the parent enforces it by killing the worker).
Inside the worker it calls the backend function

.. code-block:: python

    def solve_xxx(
        problem: SlottedProblem,        # windows already derived from the warm start
        solver_name: str,               # "cpsat", "highs", or NAME of "pyomo:NAME"
        time_limit: float,              # seconds the backend may use for build + solve
        objective: str,                 # "jct" (minimise Σ_j E_j) or "makespan" (minimise max_j E_j)
        warm_start: SlotSolution | None,  # canonical (see formulation.discretize.canonicalize)
        report: Reporter,               # stream progress to the parent
        **options: Any,                 # backend options (num_workers, ...); ignore unknown ones
    ) -> BackendOutcome: ...

Registered backends: ``"cpsat"`` → ``solvers.cpsat.solve_cpsat``; ``"highs"`` and ``"pyomo:NAME"`` →
``solvers.highs.solve_pyomo`` (``solver_name`` is ``"highs"`` or ``NAME``). A Pyomo backend module may
also expose ``export_model(problem, path, objective) -> None`` writing ``.mps`` / ``.lp``.

Units: **slot units** everywhere — the objective is ``Σ_j E_j`` (jct) or ``max_j E_j`` (makespan) over
exclusive end slots ``E_j``; bounds are in the same units and may be fractional (the parent rounds a
bound up, as the objective is an integer). The parent converts to seconds and recomputes every
solution's objective with :func:`formulation.discretize.evaluate`.

Reporting: call ``report.incumbent(solution, objective, bound)`` for every improving solution (as soon
as it is found: if the worker is killed at the time limit, the last one reported is what the user
gets), ``report.bound(bound)`` whenever the proven bound improves, and ``report.built(seconds, stats)``
once the model is built. The worker fills in the final :class:`BackendOutcome` itself from the return
value. Raise :class:`SolverUnavailableError` (naming the package or executable to install) when the
solver is missing; any other exception becomes a result with status ``error``.

Status values (:class:`solvers.result.SolveStatus`): ``optimal`` only when the solver proved it;
``time_limit`` when it stopped on the limit; ``feasible`` when it stopped otherwise with a solution;
``infeasible`` must not happen (the windows come from a feasible solution) and is reported as an error
of the model; ``unknown`` when no solution was found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from formulation.discretize import SlotSolution
from formulation.errors import DuettoInputError
from solvers.result import SolveStatus


class SolverUnavailableError(DuettoInputError):
    """The requested solver (or the package it needs) is not installed."""


class Reporter(Protocol):
    """Progress channel from a backend to the parent process (all values in slot units)."""

    def built(self, seconds: float, stats: dict[str, Any]) -> None:
        """The model is built: wall seconds and size statistics (variables, constraints, ...)."""
        ...

    def incumbent(self, solution: SlotSolution, objective: float, bound: float = math.nan) -> None:
        """An improving solution, its model objective and the bound known at that moment."""
        ...

    def bound(self, bound: float) -> None:
        """The proven lower bound improved."""
        ...


@dataclass
class BackendOutcome:
    """What a backend returns (slot units; see the module docstring).

    Attributes
    ----------
    status
        :class:`SolveStatus` of the backend's own run.
    solution
        Best solution it found (``None`` if none beyond what it already reported).
    objective
        Model objective of ``solution`` (``nan`` if none).
    bound
        Best proven lower bound (``nan`` if none).
    build_seconds, solve_seconds
        Wall time to build the model (including loading it into the solver) and to solve it.
    message
        Why it stopped, solver messages.
    stats
        Model size and solver statistics.
    """

    status: SolveStatus
    solution: SlotSolution | None = None
    objective: float = math.nan
    bound: float = math.nan
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


class NullReporter:
    """A :class:`Reporter` that drops everything (for calling a backend directly in tests)."""

    def __init__(self) -> None:
        self.incumbents: list[tuple[float, float]] = []
        self.bounds: list[float] = []
        self.build: tuple[float, dict[str, Any]] | None = None

    def built(self, seconds: float, stats: dict[str, Any]) -> None:
        self.build = (seconds, stats)

    def incumbent(self, solution: SlotSolution, objective: float, bound: float = math.nan) -> None:
        self.incumbents.append((objective, bound))

    def bound(self, bound: float) -> None:
        self.bounds.append(bound)
