"""Plans: the desired set of running jobs, resolved against the inventory and checked as a whole.

A plan is rejected whole, with every problem named, when it over-fills a GPU (capacity ``C``),
breaks a gang (GPU count differs from ``G_j``), names an unknown GPU or job, uses accumulation steps
the job cannot run, pairs jobs the interference model forbids to share, or exceeds GPU memory (the
instance profiles give each job's memory at its sub-batch). Nothing changes when a plan is rejected.

The rules are the problem's (SPEC.md "Schedules") and are checked in one place: the scheduling loop
(heuristics/loop.py), the same checks every policy action passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cluster_runtime.inventory import Inventory
from cluster_runtime.spec import RawPlanEntry
from formulation.errors import DuettoInputError
from formulation.instance import Instance
from heuristics.core import Start
from heuristics.loop import ClusterState, InvalidActionError


@dataclass(frozen=True, slots=True)
class Assignment:
    """One job of a plan: where it runs and with how many accumulation steps."""

    job_id: str
    gpus: tuple[int, ...]
    steps: int

    def to_dict(self) -> dict[str, object]:
        return {"job_id": self.job_id, "gpus": list(self.gpus), "steps": self.steps}


class PlanRejected(DuettoInputError):
    """A plan that breaks the rules; ``problems`` lists each broken rule in words."""

    def __init__(self, problems: Sequence[str], source: str = "plan") -> None:
        self.problems = list(problems)
        count = len(self.problems)
        head = f"rejected whole, nothing changed ({count} problem{'s' if count != 1 else ''})"
        super().__init__(head + ": " + "; ".join(self.problems), source=source)


def resolve_gpus(raw: Iterable[int | tuple[int, int] | str], inventory: Inventory) -> tuple[tuple[int, ...], list[str]]:
    """Flat GPU ids of a plan entry's GPUs, and a problem message per unknown GPU."""
    flat: list[int] = []
    problems: list[str] = []
    for gpu in raw:
        if isinstance(gpu, tuple):
            node, index = gpu
            if 0 <= node < len(inventory.nodes) and 0 <= index < inventory.gpus_per_node:
                flat.append(inventory.flat_id(node, index))
            else:
                problems.append(
                    f"unknown GPU (node {node}, index {index}): the inventory has {len(inventory.nodes)} "
                    f"node(s) of {inventory.gpus_per_node} GPU(s)"
                )
        elif isinstance(gpu, str):
            found = inventory.flat_of_uuid(gpu)
            if found is None:
                problems.append(f"unknown GPU '{gpu}'")
            else:
                flat.append(found)
        elif 0 <= gpu < inventory.num_gpus:
            flat.append(gpu)
        else:
            problems.append(f"unknown GPU {gpu}: flat ids run 0..{inventory.num_gpus - 1}")
    return tuple(flat), problems


def resolve_plan(
    entries: Sequence[RawPlanEntry], inventory: Inventory
) -> tuple[list[Assignment], dict[str, list[str]]]:
    """Resolve every entry's GPUs; returns the assignments and, per job, its unknown GPUs' messages."""
    assignments = []
    unknown: dict[str, list[str]] = {}
    for entry in entries:
        gpus, problems = resolve_gpus(entry.gpus, inventory)
        if problems:
            unknown[entry.job_id] = problems
        assignments.append(Assignment(entry.job_id, gpus, entry.steps))
    return assignments, unknown


#: The loop's rule names, in the words of a rejection message.
_RULE_WORDS = {
    "gang": "breaks its gang",
    "capacity": "over-fills a GPU",
    "memory": "exceeds GPU memory",
    "gpu": "names an unknown GPU",
    "unknown-job": "is unknown (not submitted)",
    "steps": "has invalid accumulation steps",
    "pair": "may not share a GPU (interference model)",
    "not-pending": "cannot start",
}


def check_plan(
    assignments: Sequence[Assignment],
    instance: Instance,
    finished: Mapping[str, str] | None = None,
    now: float = 0.0,
) -> list[str]:
    """Every rule the plan breaks, as messages (empty: the plan is valid).

    The rules are checked by the scheduling loop itself (:class:`heuristics.loop.ClusterState`, the
    checks every policy action passes): the plan's entries are applied one by one as ``Start``
    actions on an empty cluster where every unfinished job is pending, and each refused entry adds
    its message (so a rejection names every problem, not only the first).

    Parameters
    ----------
    assignments
        The complete desired set of running jobs.
    instance
        Cluster (capacity, memory), profiles and interference model, with every submitted job.
    finished
        Jobs that may no longer run (completed, failed, cancelled) → their state.
    now
        Loop time of the check (only used in messages).
    """
    finished = finished or {}
    state = ClusterState(instance)
    for job in instance.jobs:
        if job.id not in finished:
            state.submit(job.id, min(job.arrival, now))
    problems: list[str] = []
    seen: set[str] = set()
    for entry in assignments:
        job_id = entry.job_id
        if job_id in seen:
            problems.append(f"job '{job_id}' appears more than once")
            continue
        seen.add(job_id)
        if job_id in finished:
            problems.append(f"job '{job_id}' is {finished[job_id]} and cannot run")
            continue
        try:
            state.apply([Start(job_id, tuple(entry.gpus), entry.steps)], now, "plan")
        except InvalidActionError as error:
            text = str(error)
            detail = text.split("]: ", 1)[1] if "]: " in text else text  # drop the loop's policy/time prefix
            words = _RULE_WORDS.get(error.rule, error.rule)
            problems.append(f"job '{job_id}' on GPUs {list(entry.gpus)} {words}: {detail}")
    return problems


def validate_plan(
    entries: Sequence[RawPlanEntry],
    inventory: Inventory,
    instance: Instance,
    finished: Mapping[str, str] | None = None,
    source: str = "plan",
) -> list[Assignment]:
    """Resolve and check a plan; raise :class:`PlanRejected` naming every problem.

    Returns
    -------
    list[Assignment]
        The plan with flat GPU ids, in the order given.
    """
    assignments, unknown = resolve_plan(entries, inventory)
    problems = [f"job '{job_id}': {message}" for job_id, messages in unknown.items() for message in messages]
    # An entry with an unknown GPU already has its message; checking its gang again would only add noise.
    problems += check_plan([a for a in assignments if a.job_id not in unknown], instance, finished)
    if problems:
        raise PlanRejected(problems, source=source)
    return assignments
