"""A fast slotted greedy: the warm start and the upper bound of the exact models.

:func:`warm_start` simulates the slotted progress rule (integer units, exactly as the models count)
slot by slot. In each slot it considers the released, waiting jobs shortest-first (SJF) and starts a
job

* alone, on idle GPUs, in its fastest mode (best-fit node for gangs that fit in one node), or
* next to running jobs, when a pairwise estimate in the spirit of Castor's Theorem 1 says that sharing
  now beats waiting for idle GPUs: the new job's completion plus the delay it causes its partners is
  compared with its completion after waiting (Algorithm 2's mode choice is tried for every mode).

Both a sharing and a non-sharing variant are run (and the serial schedule) and the best one (by :func:`evaluate`, exact
integer rule) is returned, each job in the fastest mode its actual partners allow
(:func:`prefer_faster_modes`), with GPU labels canonicalised (:func:`canonicalize`) so that a model with
symmetry breaking accepts it. Interface: ``warm_start(problem, candidates=...) -> SlotSolution``.

:func:`policy_warm_starts` adds the production policies' schedules, simulated in the problem's slotted
semantics (SJF-BSBF and its look-ahead, ``heuristics/``), as further candidates: the look-ahead beat
this greedy on 8 of 9 instances at 12-50 jobs on 8 GPUs, by 4-12 % (``docs/oracle.md``), and a better upper bound
both hints the solver better and narrows every job's window. A user's own schedule (``duetto solve
--warm-start``) is one more candidate. The best valid candidate wins.

:func:`local_search` then improves it: a search over the greedy's job order (an iterated list
scheduler), decoded by the same greedy.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from formulation.discretize import (
    SlotAssignment,
    SlotJob,
    SlotMode,
    SlotSolution,
    SlottedProblem,
    canonicalize,
    check_solution,
    check_solution_both_rules,
    evaluate,
    from_schedule,
    prefer_faster_modes,
    serial_solution,
)
from formulation.errors import DuettoInputError

log = logging.getLogger(__name__)

POLICY_WARM_STARTS = ("sjf-bsbf-lookahead", "sjf-bsbf")
"""Policies whose slotted schedules are warm-start candidates (best first)."""
LOOKAHEAD_SECONDS_PER_JOB = 0.02
"""A generous estimate of the look-ahead's simulation cost per job (measured 3-12 ms at 50-200 jobs on
8-16 GPUs); it runs only when this estimate fits the time budget."""


@dataclass
class _Running:
    index: int
    gpus: tuple[int, ...]
    mode: int
    remaining: float  # units


def warm_start(
    problem: SlottedProblem,
    *,
    allow_sharing: bool | None = None,
    candidates: Sequence[SlotSolution] = (),
    greedy: bool = True,
    deadline: float | None = None,
) -> SlotSolution:
    """Best of the greedy variants (with and without sharing) and of ``candidates``, canonicalised.

    Parameters
    ----------
    problem
        The slotted problem.
    allow_sharing
        ``None`` (default): run both variants and keep the better; ``True`` / ``False``: only that one.
    candidates
        Further slot-level solutions (e.g. :func:`policy_warm_starts`); invalid ones are skipped.
    greedy
        ``False``: only ``candidates`` (at least one valid), e.g. to put an improved schedule in the
        models' form (fastest modes, canonical GPU labels) without running the greedy again.
    deadline
        ``time.time()`` by which the greedy variants must be done: one still running then is dropped
        (the serial schedule and ``candidates`` remain), so the warm start counts against a time limit.
    """
    variants = [True, False] if allow_sharing is None else [allow_sharing]
    best: SlotSolution | None = None
    best_value = 0
    # the serial schedule is a candidate too, so the warm start is never worse than the default bound
    own: list[SlotSolution | None] = []
    if greedy:
        own = [_greedy(problem, share, deadline=deadline) for share in variants] + [serial_solution(problem)]
    for solution in [*own, *candidates]:
        if solution is None:
            continue  # a greedy variant stopped at the deadline
        if check_solution(problem, solution, check_windows=False):
            continue  # a greedy bug must never leak an invalid warm start; the other variant remains
        value = problem.objective_slots(evaluate(problem, solution, exact=True))
        if best is None or value < best_value:
            best, best_value = solution, value
    if best is None:  # the serial schedule is always valid: only without the greedy
        raise ValueError("no valid schedule among the candidates")
    best = prefer_faster_modes(problem, best)
    ends = evaluate(problem, best, exact=True)
    return canonicalize(
        problem, {job_id: SlotAssignment(a.start, a.gpus, a.mode, ends[job_id]) for job_id, a in best.items()}
    )


def policy_warm_starts(
    problem: SlottedProblem, policies: Sequence[str] = POLICY_WARM_STARTS, *, time_budget: float | None = None
) -> list[SlotSolution]:
    """Slot-level solutions of production policies simulated in ``problem``'s slotted semantics.

    Each policy runs in the event-driven simulator with the problem's slot length and capacity; its
    schedule is kept if it maps onto the model's modes (:func:`~formulation.discretize.from_schedule`)
    and passes the model's own check in both completion rules. A policy that cannot serve the
    instance, whose schedule does not map, or that breaks the scheduling loop's rules, is skipped
    (logged), never fatal: the greedy remains.

    Parameters
    ----------
    problem
        The slotted problem (its ``instance``, ``slot`` and ``capacity`` are used).
    policies
        Registered policy names.
    time_budget
        Seconds these simulations may take (``None``: no limit). The look-ahead is skipped when its
        estimated cost (:data:`LOOKAHEAD_SECONDS_PER_JOB` per job) exceeds it; no policy starts once it
        is spent and one schedule is kept (the first policy always runs: the best policy's schedule is
        what a solve returns at worst).
    """
    # imported here: the heuristics are needed only when a solve starts, not to build models
    from heuristics.loop import InvalidActionError, PolicyStalledError
    from heuristics.simulator import simulate

    solutions: list[SlotSolution] = []
    began = time.perf_counter()
    for name in policies:
        if time_budget is not None and time.perf_counter() - began >= time_budget and solutions:
            break  # the budget is spent: keep what the first policies gave
        if (
            name == "sjf-bsbf-lookahead"
            and time_budget is not None
            and problem.num_jobs * LOOKAHEAD_SECONDS_PER_JOB > time_budget
        ):
            continue
        try:
            result = simulate(
                problem.instance, name, capacity=problem.capacity, slot=problem.slot, validate=False, metrics=False
            )
            solution = from_schedule(problem, result.schedule)
        except DuettoInputError as error:  # the policy cannot serve this instance, or a mode the model pruned
            log.info("warm start from %s skipped: %s", name, error)
            continue
        except (InvalidActionError, PolicyStalledError) as error:  # a policy bug must not stop an exact solve
            log.warning("warm start from %s failed: %s", name, error)
            continue
        if check_solution_both_rules(problem, solution):
            log.info("warm start from %s skipped: not valid in the slotted model", name)
            continue
        solutions.append(solution)
    return solutions


def _greedy(
    problem: SlottedProblem, share: bool, priority: Sequence[float] | None = None, *, deadline: float | None = None
) -> SlotSolution | None:
    """List scheduling slot by slot: waiting jobs in ``priority`` order (default shortest first), each
    started alone or, with ``share``, next to running jobs when the pairwise estimate says so.
    ``None`` if ``deadline`` (``time.time()``) passes first."""
    rank = [float(job.min_slots) for job in problem.jobs] if priority is None else list(priority)
    units = problem.units_per_slot
    capacity = problem.capacity
    occupants: list[list[int]] = [[] for _ in range(problem.num_gpus)]  # job indices per GPU
    running: dict[int, _Running] = {}
    solution: SlotSolution = {}
    pending = sorted(range(problem.num_jobs), key=lambda i: (problem.jobs[i].release, i))
    waiting: list[int] = []
    t = 0
    while pending or waiting or running:
        if deadline is not None and time.time() > deadline:
            return None
        while pending and problem.jobs[pending[0]].release <= t:
            waiting.append(pending.pop(0))
        waiting.sort(key=lambda i: (rank[i], i))
        for i in list(waiting):
            choice = _place(problem, i, occupants, running, share, capacity)
            if choice is None:
                continue
            gpus, mode = choice
            waiting.remove(i)
            for g in gpus:
                occupants[g].append(i)
            running[i] = _Running(i, gpus, mode, float(problem.jobs[i].modes[mode].work))
            solution[problem.jobs[i].id] = SlotAssignment(t, gpus, mode)
        # progress during slot t
        finished = []
        for i, run in running.items():
            partners = {k for g in run.gpus for k in occupants[g] if k != i}
            rate = min([units] + [problem.speed[i][k] or 1 for k in partners])
            run.remaining -= rate
            if run.remaining <= 0:
                finished.append(i)
        for i in finished:
            for g in running[i].gpus:
                occupants[g].remove(i)
            del running[i]
        t += 1
        if not running and not waiting and pending:
            t = max(t, problem.jobs[pending[0]].release)
    return solution


def local_search(
    problem: SlottedProblem,
    start: SlotSolution,
    *,
    time_budget: float,
    seed: int = 0,
    max_stale: int | None = None,
) -> SlotSolution:
    """Improve a schedule by searching over the greedy's job order (an iterated list scheduler).

    The order starts as ``start``'s start slots (ties shortest first), decoded by the greedy with and
    without sharing; then, while ``time_budget`` seconds last, two random jobs swap places in the
    order and the decoded schedule is kept when it is no worse (plateaus are walked). Measured on the
    standard family at 12-50 jobs on 8 GPUs, 6 s of it improved on the best of the greedy and the
    policies on 6 of 12 instances, by up to 4 % (2.9 / 0.9 / 4.0 % at 50 jobs), where CP-SAT improves
    on it by 0-1.5 % in a minute from 32 jobs on (``docs/oracle.md``).

    Parameters
    ----------
    problem
        The slotted problem.
    start
        A valid slot-level solution (e.g. the best warm start); returned if nothing beats it.
    time_budget
        Seconds to search.
    seed
        Seed of the swaps (the search is also bounded by time, so only a run with the same number
        of steps repeats exactly).
    max_stale
        Stop after this many steps without a strict improvement (default ``20 · n``).

    Returns
    -------
    SlotSolution
        The best schedule seen, by the exact integer rule (:func:`evaluate`); valid, not canonicalised.
    """
    began = time.perf_counter()
    n = problem.num_jobs
    if n < 2:
        return dict(start)

    def value(solution: SlotSolution) -> int:
        return problem.objective_slots(evaluate(problem, solution, exact=True))

    best, best_value = dict(start), value(start)
    order = sorted(range(n), key=lambda i: (start[problem.jobs[i].id].start, problem.jobs[i].min_slots, i))
    rank = [0.0] * n
    for position, i in enumerate(order):
        rank[i] = float(position)
    share, current = True, math.inf
    deadline = time.time() + time_budget  # the first decodes count against the budget too
    for variant in (True, False):
        candidate = _greedy(problem, variant, rank, deadline=deadline)
        if candidate is None:
            return best
        if not check_solution(problem, candidate, check_windows=False) and value(candidate) < current:
            share, current = variant, value(candidate)
            if current < best_value:
                best, best_value = candidate, current
    rng = random.Random(seed)
    stale, limit = 0, 20 * n if max_stale is None else max_stale
    while time.perf_counter() - began < time_budget and stale < limit:
        a, b = rng.sample(range(n), 2)
        rank[a], rank[b] = rank[b], rank[a]
        candidate = _greedy(problem, share, rank, deadline=deadline)
        if candidate is None:
            break
        candidate_value = value(candidate)
        if candidate_value <= current and not check_solution(problem, candidate, check_windows=False):
            stale = 0 if candidate_value < current else stale + 1
            current = candidate_value
            if current < best_value:
                best, best_value = candidate, current
        else:
            rank[a], rank[b] = rank[b], rank[a]
            stale += 1
    return best


def _idle_gpus(problem: SlottedProblem, occupants: list[list[int]]) -> list[int]:
    return [g for g in range(problem.num_gpus) if not occupants[g]]


def _pick_gpus(problem: SlottedProblem, candidates: list[int], count: int, placement: str) -> tuple[int, ...] | None:
    """Choose ``count`` GPUs from ``candidates`` (in preference order) meeting ``placement``."""
    if len(candidates) < count:
        return None
    by_node: dict[int, list[int]] = {}
    for g in candidates:
        by_node.setdefault(problem.node_of(g), []).append(g)
    if placement == "one_node" or (placement == "any" and count <= problem.gpus_per_node):
        # best fit: the node with the fewest candidates that still holds the whole gang
        fitting = [(len(gs), node) for node, gs in by_node.items() if len(gs) >= count]
        if fitting:
            _, node = min(fitting)
            return tuple(sorted(by_node[node][:count]))
        if placement == "one_node":
            return None
    if placement == "multi_node":
        if len(by_node) < 2:
            return None
        # take from the emptiest nodes first, but make sure at least two nodes are used
        nodes = sorted(by_node, key=lambda n: -len(by_node[n]))
        first = by_node[nodes[0]][: max(1, min(len(by_node[nodes[0]]), count - 1))]
        rest = [g for n in nodes[1:] for g in by_node[n]]
        chosen = first + rest[: count - len(first)]
        return tuple(sorted(chosen)) if len(chosen) == count else None
    nodes = sorted(by_node, key=lambda n: -len(by_node[n]))
    chosen = [g for n in nodes for g in by_node[n]][:count]
    return tuple(sorted(chosen))


def _alone_placement(problem: SlottedProblem, i: int, occupants: list[list[int]]) -> tuple[tuple[int, ...], int] | None:
    job = problem.jobs[i]
    idle = _idle_gpus(problem, occupants)
    for m, mode in enumerate(job.modes):  # fastest first
        gpus = _pick_gpus(problem, idle, job.num_gpus, mode.placement)
        if gpus is not None:
            return gpus, m
    return None


def _free_time(
    problem: SlottedProblem, job: SlotJob, occupants: list[list[int]], running: dict[int, _Running]
) -> float:
    """Slots until ``job.num_gpus`` GPUs are idle if the running jobs continued alone."""
    units = problem.units_per_slot
    ready = sorted(
        max((running[k].remaining / units for k in occupants[g]), default=0.0) for g in range(problem.num_gpus)
    )
    return ready[job.num_gpus - 1]


def _place(
    problem: SlottedProblem,
    i: int,
    occupants: list[list[int]],
    running: dict[int, _Running],
    share: bool,
    capacity: int,
) -> tuple[tuple[int, ...], int] | None:
    alone = _alone_placement(problem, i, occupants)
    if alone is not None or not share:
        return alone
    job = problem.jobs[i]
    units = problem.units_per_slot
    fastest = job.modes[0]
    wait_cost = _free_time(problem, job, occupants, running) + fastest.work / units
    best: tuple[float, tuple[int, ...], int] | None = None
    for m, mode in enumerate(job.modes):
        candidates = _shareable_gpus(problem, i, m, mode, occupants, running, capacity)
        gpus = _pick_gpus(problem, candidates, job.num_gpus, mode.placement)
        if gpus is None:
            continue
        cost = _share_cost(problem, i, mode, gpus, occupants, running)
        if cost < wait_cost and (best is None or cost < best[0]):
            best = (cost, gpus, m)
    return None if best is None else (best[1], best[2])


def _shareable_gpus(
    problem: SlottedProblem,
    i: int,
    m: int,
    mode: SlotMode,
    occupants: list[list[int]],
    running: dict[int, _Running],
    capacity: int,
) -> list[int]:
    """GPUs ``i`` (in mode ``m``) may join now: idle ones first, then shared ones (shortest partner first)."""
    limit = problem.gpu_memory_gib * (1 + 1e-9) + 1e-9
    idle = [g for g in range(problem.num_gpus) if not occupants[g]]
    shared = []
    for g in range(problem.num_gpus):
        members = occupants[g]
        if not members or len(members) >= capacity:
            continue
        if not all(problem.can_share(i, k) and problem.memory_fits(i, m, k, running[k].mode) for k in members):
            continue
        memory = mode.memory_gib + sum(problem.jobs[k].modes[running[k].mode].memory_gib for k in members)
        if memory > limit:
            continue
        shared.append((max(running[k].remaining for k in members), g))
    return idle + [g for _, g in sorted(shared)]


def _share_cost(
    problem: SlottedProblem,
    i: int,
    mode: SlotMode,
    gpus: tuple[int, ...],
    occupants: list[list[int]],
    running: dict[int, _Running],
) -> float:
    """Completion of ``i`` plus the delay of its partners (slots from now), pair by pair (Theorem 1)."""
    units = problem.units_per_slot
    partners = sorted({k for g in gpus for k in occupants[g]})
    own_rate = min([units] + [problem.speed[i][k] or 1 for k in partners])
    overlap = min(mode.work / own_rate, max(running[k].remaining / (problem.speed[k][i] or 1) for k in partners))
    # i runs slowed for `overlap` slots, then alone
    own_end = overlap + max(0.0, mode.work - own_rate * overlap) / units
    delay = 0.0
    for k in partners:
        rate_k = problem.speed[k][i] or 1
        shared = min(overlap, running[k].remaining / rate_k)
        done_shared = rate_k * shared
        end_k = shared + max(0.0, running[k].remaining - done_shared) / units
        delay += end_k - running[k].remaining / units
    return own_end + delay
