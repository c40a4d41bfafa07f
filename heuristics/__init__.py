"""duetto heuristics: the scheduling loop, the event-driven simulator and the policies.

Public API::

    from heuristics import simulate, make_policy, available_policies

    result = simulate(instance, "sjf-bsbf", capacity=2, slot=None, restart_cost=0.0)
    result.schedule        # formulation.schedule.Schedule, accepted by the validator
    result.metrics         # formulation.metrics.compute_metrics on the validator's report

Writing a policy: implement :class:`heuristics.core.Policy` (``name``, ``preemptive``,
``round_length``, ``decide(view) -> [Start | Preempt]``) and register it with
:func:`heuristics.registry.register_policy`. Placement helpers are in :mod:`heuristics.placement`.
"""

from heuristics.core import Action, ClusterView, Policy, Preempt, RunningJob, Start
from heuristics.loop import ClusterState, InvalidActionError, PolicyStalledError, SchedulingLoop
from heuristics.registry import PolicyInfo, available_policies, make_policy, policy_names, register_policy
from heuristics.simulator import SimulationResult, simulate

__all__ = [
    "Action",
    "ClusterState",
    "ClusterView",
    "InvalidActionError",
    "Policy",
    "PolicyInfo",
    "PolicyStalledError",
    "Preempt",
    "RunningJob",
    "SchedulingLoop",
    "SimulationResult",
    "Start",
    "available_policies",
    "make_policy",
    "policy_names",
    "register_policy",
    "simulate",
]
