"""duetto solvers: the exact oracle of the time-slotted problem (SPEC.md, Castor Eq. 6-13).

``solve(instance, solver="cpsat" | "highs" | "pyomo:NAME", time_limit=..., slot=..., objective=...)``
returns a :class:`Result`. Importing this package loads no solver: each solve runs its backend in a
worker process (see :mod:`solvers.api`).
"""

from solvers.api import Progress, check_instance_fits, solve, solve_many
from solvers.backend_protocol import SolverUnavailableError
from solvers.backends import available_solvers
from solvers.result import Result, SolveStatus

__all__ = [
    "Progress",
    "Result",
    "SolveStatus",
    "SolverUnavailableError",
    "available_solvers",
    "check_instance_fits",
    "solve",
    "solve_many",
]
