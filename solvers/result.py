"""The one result type every exact backend returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from formulation.schedule import Schedule

if TYPE_CHECKING:
    import pandas as pd

    from formulation.instance import Instance


class SolveStatus(StrEnum):
    OPTIMAL = "optimal"  # proven optimal
    FEASIBLE = "feasible"  # a schedule, optimality not proven (the solver stopped for another reason)
    TIME_LIMIT = "time_limit"  # stopped by the time limit with a schedule
    INFEASIBLE = "infeasible"  # proven: no schedule exists within the model (e.g. horizon)
    UNKNOWN = "unknown"  # stopped with no schedule
    ERROR = "error"  # the backend failed; see ``message``


@dataclass(frozen=True)
class Result:
    """Outcome of one exact solve.

    Parameters
    ----------
    status
        See :class:`SolveStatus`.
    objective
        Objective of ``schedule`` in the model's units (seconds: total JCT, or makespan), or ``nan``.
    bound
        Proven lower bound on the optimum (same units), or ``nan``.
    schedule
        The best schedule found (slotted semantics), or ``None``.
    solver
        Backend name (``"highs"``, ``"cpsat"``, ``"pyomo:cbc"``).
    objective_kind
        ``"jct"`` (sum of JCTs) or ``"makespan"``.
    build_seconds, solve_seconds
        Wall time to build the model and to solve it.
    message
        Extra information (an error, why it stopped).
    stats
        Model size and solver statistics (variables, constraints, nodes, ...).
    """

    status: SolveStatus
    objective: float
    bound: float
    schedule: Schedule | None
    solver: str
    objective_kind: str = "jct"
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """Relative gap ``(objective - bound) / objective`` (0 when proven optimal, ``nan`` if unknown)."""
        if self.status is SolveStatus.OPTIMAL:
            return 0.0
        if not (math.isfinite(self.objective) and math.isfinite(self.bound)) or self.objective <= 0:
            return math.nan
        return max(0.0, (self.objective - self.bound) / self.objective)

    @property
    def proven_optimal(self) -> bool:
        return self.status is SolveStatus.OPTIMAL

    def jobs_frame(self, instance: Instance) -> pd.DataFrame:
        """One row per job of ``instance`` (start, completion, JCT, GPUs, sharing) in this result's schedule,
        as a pandas DataFrame measured by the validator: see :func:`duetto.results.jobs_frame`. Raises
        :class:`~formulation.errors.DuettoInputError` when the solve found no schedule."""
        from duetto.results import jobs_frame, require_schedule

        return jobs_frame(instance, require_schedule(self.schedule, self.status.value))

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: status, objective, bound, gap, wall times and statistics."""

        def clean(value: float) -> float | None:
            return round(value, 9) if math.isfinite(value) else None

        return {
            "solver": self.solver,
            "status": self.status.value,
            "objective_kind": self.objective_kind,
            "objective": clean(self.objective),
            "bound": clean(self.bound),
            "gap": clean(self.gap),
            "build_seconds": round(self.build_seconds, 4),
            "solve_seconds": round(self.solve_seconds, 4),
            "message": self.message,
            "stats": self.stats,
        }
