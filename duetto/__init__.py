"""duetto: an optimization-model scheduling engine for deep-learning training jobs on shared GPU clusters.

The public API, in one namespace. Each name lives in its own package (``formulation``, ``solvers``,
``heuristics``) and is imported on first use, so ``import duetto`` (and the ``duetto`` command)
stays fast and loads no solver.

Example::

    import duetto

    instance = duetto.generate_instance(8, nodes=1, gpus_per_node=4, seed=3)
    result = duetto.solve(instance, solver="cpsat", time_limit=30)  # the exact oracle
    print(result.status, result.objective, result.bound, result.gap)
    report = duetto.validate(instance, result.schedule)  # slotted: the schedule carries its slot
    policy = duetto.simulate(instance, "sjf-bsbf", slot=result.schedule.slot)
    print(policy.metrics["total_jct"] / result.objective - 1)  # the policy's gap to the optimum

Problem data: :class:`Cluster`, :class:`Job`, :class:`Profile`, :class:`Instance`, the interference
models, :class:`Schedule`; :func:`generate_instance` (the seeded random family), :func:`load_trace`
(public traces), :func:`load_instance` / :func:`save_instance`, :func:`load_schedule` /
:func:`save_schedule`. Measuring: :func:`validate` (the one validator) and :func:`compute_metrics`.
The oracle: :func:`solve`, :func:`solve_many`, :class:`Result`, :class:`SolveStatus`,
:func:`available_solvers`, :func:`choose_slot`. Policies: :func:`simulate`, :func:`make_policy`,
:func:`policy_names`, :func:`register_policy`. Results as tables: :func:`jobs_frame` (one row per job;
also ``SimulationResult.jobs_frame()`` and ``Result.jobs_frame(instance)``) and the studies
:func:`gap_study`, :func:`scale_study` and :func:`replay` (pandas DataFrames, the same code as
``duetto gap`` / ``scale`` / ``replay``). Every user mistake raises :class:`DuettoInputError`.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duetto.results import jobs_frame
    from duetto.studies import StudyFailedError, gap_study, replay, scale_study
    from formulation.cluster import Cluster
    from formulation.discretize import choose_slot
    from formulation.errors import DuettoInputError, InfeasibleInstanceError
    from formulation.generator import generate_instance
    from formulation.instance import Instance, Job
    from formulation.interference import ConstantInterference, InterferenceModel, TableInterference
    from formulation.io import load_instance, load_schedule, save_instance, save_schedule
    from formulation.metrics import compute_metrics
    from formulation.schedule import Schedule
    from formulation.speed import Profile
    from formulation.trace_bound import TraceBound, trace_lower_bound
    from formulation.traces import load_trace
    from formulation.validator import ValidationReport, validate
    from heuristics.registry import make_policy, policy_names, register_policy
    from heuristics.simulator import SimulationResult, simulate
    from solvers import Result, SolveStatus, available_solvers, solve, solve_many

# name -> module that defines it (imported on first access, PEP 562)
_EXPORTS: dict[str, str] = {
    "Cluster": "formulation.cluster",
    "choose_slot": "formulation.discretize",
    "DuettoInputError": "formulation.errors",
    "InfeasibleInstanceError": "formulation.errors",
    "generate_instance": "formulation.generator",
    "Instance": "formulation.instance",
    "Job": "formulation.instance",
    "ConstantInterference": "formulation.interference",
    "InterferenceModel": "formulation.interference",
    "TableInterference": "formulation.interference",
    "load_instance": "formulation.io",
    "load_schedule": "formulation.io",
    "save_instance": "formulation.io",
    "save_schedule": "formulation.io",
    "compute_metrics": "formulation.metrics",
    "Schedule": "formulation.schedule",
    "Profile": "formulation.speed",
    "load_trace": "formulation.traces",
    "TraceBound": "formulation.trace_bound",
    "trace_lower_bound": "formulation.trace_bound",
    "ValidationReport": "formulation.validator",
    "validate": "formulation.validator",
    "make_policy": "heuristics.registry",
    "policy_names": "heuristics.registry",
    "register_policy": "heuristics.registry",
    "SimulationResult": "heuristics.simulator",
    "simulate": "heuristics.simulator",
    "Result": "solvers",
    "SolveStatus": "solvers",
    "available_solvers": "solvers",
    "solve": "solvers",
    "solve_many": "solvers",
    "jobs_frame": "duetto.results",
    "gap_study": "duetto.studies",
    "scale_study": "duetto.studies",
    "replay": "duetto.studies",
    "StudyFailedError": "duetto.studies",
}

__all__ = [
    "Cluster",
    "ConstantInterference",
    "DuettoInputError",
    "InfeasibleInstanceError",
    "Instance",
    "InterferenceModel",
    "Job",
    "Profile",
    "Result",
    "Schedule",
    "SimulationResult",
    "SolveStatus",
    "StudyFailedError",
    "TableInterference",
    "TraceBound",
    "ValidationReport",
    "__version__",
    "available_solvers",
    "choose_slot",
    "compute_metrics",
    "gap_study",
    "generate_instance",
    "jobs_frame",
    "load_instance",
    "load_schedule",
    "load_trace",
    "make_policy",
    "policy_names",
    "register_policy",
    "replay",
    "save_instance",
    "save_schedule",
    "scale_study",
    "simulate",
    "solve",
    "solve_many",
    "trace_lower_bound",
    "validate",
]

try:
    __version__ = metadata.version("duetto")
except metadata.PackageNotFoundError:  # run from a source tree that was not installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'duetto' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
