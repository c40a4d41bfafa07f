"""Branch-and-bound on the lane relaxation: a lower bound that rises above the root LP's.

Why: the lane LP (:mod:`formulation.lanes`), like the coupled LP, lets a gang start at several slots
with fractions of its GPUs (``y_{jS} = 1/4`` at four starts covers a 4-GPU job with one GPU each time):
the time-indexed relaxation's weakness that only branching removes (``docs/oracle.md``). Here a node is
the problem with some jobs' start and end slots restricted to windows; its bound is the
lane LP of that subproblem, by column generation over one shared pool of lanes (lanes that break a
window are fixed to zero, the pricing DP never starts a job outside its window). A node whose bound
reaches the incumbent (the problem's upper-bound solution, or a better value given) is pruned; the
others are split on the job whose start distribution is most spread (weighted by its GPUs, so gangs
first) at the median of that distribution, or, when every start is a single slot, on an end
distribution the same way. Best bound first.

The global bound — the smallest bound of a node still open (or of one that cannot be split further),
and the incumbent when none is left — is valid at every moment: every schedule at least as good as
the incumbent lies in one open node, and every node's bound is a Lagrangian bound of its subproblem.
When the tree closes the incumbent is proven optimal. Each node's master keeps the GPU row feasible
with an artificial lane at a cost no real lane can save (``n × (T + 1)``), so a node whose windows
leave the pool empty still gives duals; the bound itself is the exact Lagrangian function, valid for
any duals.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from formulation.discretize import SlottedProblem
from formulation.lanes import (
    DEFAULT_MAX_LANE_STATES,
    DEFAULT_SMOOTHING,
    LaneData,
    Window,
    _column_generation,
    _LanePricing,
    _Master,
    _skip_reason,
    default_cut,
    lanes_of_solution,
    single_job_lanes,
)

BOUND_TOLERANCE = 1e-6
"""Below a whole number of slots by less than this, a bound counts as that number (LP tolerances)."""


@dataclass(frozen=True)
class LaneTreeBound:
    """Result of :func:`lane_tree_bound`.

    Attributes
    ----------
    value
        Proven lower bound on ``Σ_j E_j`` (slots); ``nan`` when none was proven.
    status
        ``"optimal"`` (the tree closed: the incumbent is optimal), ``"open"`` (the nodes left cannot
        be split further: their starts and ends are single slots in their LPs), ``"time_limit"``,
        ``"cancelled"``, ``"node_limit"``, ``"stopped"`` (``on_bound`` said so), ``"skipped: <reason>"``.
    root
        The root node's bound (the lane LP's).
    incumbent
        The value the tree prunes against (slots).
    nodes, open_nodes, depth
        Nodes solved, nodes left open, deepest node solved.
    seconds
        Wall time.
    """

    value: float
    status: str
    root: float = math.nan
    incumbent: float = math.nan
    nodes: int = 0
    open_nodes: int = 0
    depth: int = 0
    seconds: float = 0.0

    @property
    def proven(self) -> bool:
        return math.isfinite(self.value)

    def summary(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "bound_slots": self.value if self.proven else None,
            "root_slots": None if math.isnan(self.root) else self.root,
            "incumbent_slots": self.incumbent,
            "nodes": self.nodes,
            "open_nodes": self.open_nodes,
            "depth": self.depth,
            "seconds": round(self.seconds, 3),
        }


@dataclass(order=True)
class _Node:
    bound: float
    serial: int
    window: Window = field(compare=False)
    depth: int = field(compare=False)


def _spread(columns: np.ndarray, values: np.ndarray, lo: int, hi: int) -> tuple[float, int] | None:
    """How evenly a job's start (or end) distribution splits at its median, and the split slot."""
    slots = np.nonzero(columns >= 0)[0]
    slots = slots[(slots >= lo) & (slots <= hi)]
    if slots.size < 2:
        return None
    mass = np.maximum(values[columns[slots]], 0.0)
    total = float(mass.sum())
    if total <= 1e-9:
        return None
    cumulative = np.cumsum(mass) / total
    k = min(int(np.searchsorted(cumulative, 0.5 - 1e-9)), slots.size - 2)
    below = float(cumulative[k])
    spread = min(below, 1.0 - below) * total
    return (spread, int(slots[k])) if spread > 1e-6 else None


def _children(master: _Master, values: np.ndarray, window: Window) -> tuple[Window, Window] | None:
    """Split the node on the job whose start (or, failing any, end) distribution is most spread,
    weighted by its GPUs; ``None`` when every job's start and end are single slots."""
    data = master.data
    for kind in ("start", "end"):
        best: tuple[float, int, int] | None = None
        for j in range(data.n):
            if kind == "start":
                found = _spread(master.start_col[j], values, int(window.start_lo[j]), int(window.start_hi[j]))
            else:
                found = _spread(master.end_col[j], values, int(window.end_lo[j]), int(window.end_hi[j]))
            if found is not None and (best is None or found[0] * data.num_gpus[j] > best[0]):
                best = (found[0] * float(data.num_gpus[j]), j, found[1])
        if best is None:
            continue
        _, job, at = best
        if kind == "start":
            left_hi, right_lo = window.start_hi.copy(), window.start_lo.copy()
            left_hi[job], right_lo[job] = at, at + 1
            return replace(window, start_hi=left_hi), replace(window, start_lo=right_lo)
        left_hi, right_lo = window.end_hi.copy(), window.end_lo.copy()
        left_hi[job], right_lo[job] = at, at + 1
        return replace(window, end_hi=left_hi), replace(window, end_lo=right_lo)
    return None


def lane_tree_bound(
    problem: SlottedProblem,
    *,
    time_limit: float = 60.0,
    incumbent: float | None = None,
    cut: int | None = None,
    max_nodes: int = 100_000,
    node_rounds: int = 10_000,
    smoothing: float = DEFAULT_SMOOTHING,
    cancel: threading.Event | None = None,
    on_bound: Callable[[float], bool] | None = None,
    max_states: int = DEFAULT_MAX_LANE_STATES,
) -> LaneTreeBound:
    """A lower bound on ``Σ_j E_j`` (slots) by branch-and-bound over the lane relaxation (module
    docstring).

    Parameters
    ----------
    problem
        A slotted problem with an upper-bound solution (the incumbent unless ``incumbent`` is given).
    time_limit
        Wall seconds; the global bound at that moment is returned.
    incumbent
        A known objective (slots) to prune against, e.g. a better schedule's.
    cut, smoothing, max_states
        As for :func:`formulation.lanes.lane_bound`.
    max_nodes, node_rounds
        Nodes solved at most; pricing rounds per node at most.
    cancel
        Set to stop after the current node.
    on_bound
        Called with each improved global bound; returning ``False`` stops the search.
    """
    began = time.perf_counter()
    deadline = began + time_limit
    if problem.upper_bound is None:
        return LaneTreeBound(math.nan, "skipped: needs an upper-bound solution")
    cut = default_cut(problem) if cut is None else max(1, min(cut, problem.horizon))
    reason = _skip_reason(problem, cut, max_states)
    if reason is not None:
        return LaneTreeBound(math.nan, f"skipped: {reason}")
    import highspy

    best_known = float(problem.upper_bound_value) if problem.upper_bound_value is not None else math.inf
    if incumbent is not None:
        best_known = min(best_known, float(incumbent))
    data = LaneData.from_problem(problem, cut)
    master = _Master(data, highspy, artificial_cost=float(data.n * (data.horizon + 1)))
    master.add(lanes_of_solution(problem, data))
    master.add(single_job_lanes(data))
    pricer = _LanePricing(data)
    want = max(1, data.n)
    heap: list[_Node] = [_Node(-math.inf, 0, data.window(), 0)]
    leaves: list[float] = []  # bounds of nodes that cannot be split
    serial = 1
    nodes = depth = 0
    root = math.nan
    status = "optimal"
    reported = -math.inf

    def prune_value(bound: float) -> bool:
        if not math.isfinite(bound):
            return bound > 0
        return math.ceil(bound - BOUND_TOLERANCE) >= best_known - 1e-9

    def global_bound() -> float:
        candidates = [node.bound for node in heap] + leaves
        return min([best_known, *candidates])

    while heap:
        if cancel is not None and cancel.is_set():
            status = "cancelled"
            break
        if time.perf_counter() >= deadline:
            status = "time_limit"
            break
        if nodes >= max_nodes:
            status = "node_limit"
            break
        node = heapq.heappop(heap)
        if prune_value(node.bound):
            continue
        master.restrict(node.window)
        pricer.restrict(node.window)
        outcome = _column_generation(
            master, pricer, deadline=deadline, want=want, smoothing=smoothing, max_rounds=node_rounds, cancel=cancel
        )
        nodes += 1
        depth = max(depth, node.depth)
        bound = max(node.bound, outcome.best)
        if nodes == 1:
            root = bound
        if outcome.status in ("time_limit", "cancelled"):
            heapq.heappush(heap, _Node(bound, node.serial, node.window, node.depth))  # still open
            status = outcome.status
            break
        if not prune_value(bound):
            split = None if outcome.values is None else _children(master, outcome.values, node.window)
            if split is None:
                leaves.append(bound)
            else:
                for child in split:
                    heapq.heappush(heap, _Node(bound, serial, child, node.depth + 1))
                    serial += 1
        current = global_bound()
        if current > reported:
            reported = current
            if on_bound is not None and not on_bound(current):
                status = "stopped"
                break
    value = global_bound() if status != "optimal" or heap or leaves else best_known
    if status == "optimal" and (heap or leaves):
        status = "open"
    return LaneTreeBound(
        value=value,
        status=status,
        root=root,
        incumbent=best_known,
        nodes=nodes,
        open_nodes=len(heap) + len(leaves),
        depth=depth,
        seconds=time.perf_counter() - began,
    )
