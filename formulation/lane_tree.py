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
distribution the same way (``branching`` chooses ends first, or the most spread of either; measured no
better, docs/oracle-measurements.md "Branching on ends, and the regions of fixed starts"). Best bound first.

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
    MAX_SEPARATIONS,
    Duals,
    LaneData,
    Window,
    _column_generation,
    _Generation,
    _LanePricing,
    _Master,
    lane_cut,
    lane_data,
    modal_deadlines,
    modal_master,
    root_master,
)

MAX_POOL_COLUMNS = 400_000
"""The tree stops (status ``"pool_limit"``, its global bound still valid) once its master holds this many
columns: the pool is shared by every node and only grows (measured: about 30 lanes of 16 jobs per node
at 16 jobs on 8 GPUs, so a 60 s solve stays under a few thousand)."""
NODE_SEPARATIONS = 0
"""Batches of cover rows a node below the root may add (the root: ``MAX_SEPARATIONS``; its rows stay
for every node). Measured: rows added at nodes made nodes 1.7 times slower for no bound (7 jobs on 4
GPUs, seed 1, 60 s: 209 nodes and 120.75 with 2 batches per node, 355 nodes and 120.82 with none)."""
MAX_CENTERS = 5_000
"""Open nodes that keep their parent's duals (two slot-by-job arrays each) to start from."""
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
        ``"cancelled"``, ``"node_limit"``, ``"pool_limit"`` (:data:`MAX_POOL_COLUMNS`), ``"stopped"``
        (``on_bound`` said so), ``"skipped: <reason>"``.
    root
        The root node's bound (the lane LP's).
    incumbent
        The value the tree prunes against (slots).
    nodes, open_nodes, depth
        Nodes solved, nodes left open, deepest node solved.
    seconds
        Wall time.
    leaf_checks, leaves_closed
        Exact checks of nodes run, and nodes they decided.
    columns
        Columns of the shared master at the end (lanes, late and artificial columns).
    """

    value: float
    status: str
    root: float = math.nan
    incumbent: float = math.nan
    nodes: int = 0
    open_nodes: int = 0
    depth: int = 0
    seconds: float = 0.0
    leaf_checks: int = 0
    leaves_closed: int = 0
    columns: int = 0
    mode_aware: bool = False
    """Whether the lanes were mode-aware (:class:`formulation.lanes.PseudoJobs`)."""

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
            "leaf_checks": self.leaf_checks,
            "leaves_closed": self.leaves_closed,
            "columns": self.columns,
            "seconds": round(self.seconds, 3),
            "mode_aware": self.mode_aware,
        }


@dataclass(frozen=True)
class LeafVerdict:
    """What an exact check of one node's region found (:data:`LeafCheck`).

    Attributes
    ----------
    status
        ``"optimal"``: ``value`` is the region's optimum (its schedule was offered as an incumbent);
        ``"infeasible"``: no schedule of the region reaches the cutoff (the node is pruned);
        ``"open"``: the check stopped first; ``value`` is a lower bound for the region (or ``nan``).
    value
        Slots, as above.
    """

    status: str
    value: float = math.nan


Region = list[tuple[int, int | None, int, int | None]]
"""Per job (canonical order): ``(s_lo, s_hi, e_lo, e_hi)`` on its start and exclusive end slot, ``None``
where the node does not bound that side (see :func:`node_region`)."""

LeafCheck = Callable[[Region, int, float], LeafVerdict]
"""An exact check of a node: ``check(region, cutoff, seconds)`` looks for the best schedule of the
region with objective at most ``cutoff`` (slots) within ``seconds`` (e.g. CP-SAT with the windows as
domains, in its own process)."""


def node_region(window: Window, data: LaneData) -> Region:
    """The schedules a node stands for, as bounds on starts and ends.

    The lanes only see slots up to the cut; a job that may end past it (``can_be_late``) is the master's
    "late" mass, whatever its start. So the root window's upper ends are no bound for such a job, and a
    child keeps that while its upper end is still the root's (it is the right-most piece of every split):
    the regions of a node's children then partition the node's region."""
    root = data.window()
    region: Region = []
    for j in range(data.n):
        late = bool(data.can_be_late[j])
        s_hi = int(window.start_hi[j])
        e_hi = int(window.end_hi[j])
        region.append(
            (
                int(window.start_lo[j]),
                None if late and s_hi >= int(root.start_hi[j]) else s_hi,
                int(window.end_lo[j]),
                None if late and e_hi >= int(root.end_hi[j]) else e_hi,
            )
        )
    return region


def _window_split(master: _Master, values: np.ndarray, window: Window) -> tuple[Window, ...] | None:
    """Split a node whose LP has every start and end at one slot but whose check did not decide it: the
    job with the widest start (then end) window, weighted by its GPUs, into the slots before its LP
    slot, that slot, and the slots after (the middle of the window where the LP has none of it)."""
    data = master.data
    distributions = master.distributions(values)
    for kind in ("start", "end"):
        lo = window.start_lo if kind == "start" else window.end_lo
        hi = window.start_hi if kind == "start" else window.end_hi
        allowed = master.root_starts if kind == "start" else master.root_ends
        widths = (hi - lo) * data.num_gpus
        job = int(np.argmax(widths))
        if widths[job] <= 0:
            continue
        first, last = int(lo[job]), int(hi[job])
        slots = np.nonzero(allowed[job])[0]
        slots = slots[(slots >= first) & (slots <= last)]
        mass = distributions[0 if kind == "start" else 1][job][slots] if slots.size else np.zeros(0)
        at = int(slots[int(np.argmax(mass))]) if slots.size and float(mass.max()) > 1e-9 else (first + last) // 2
        pieces = [(first, at - 1), (at, at), (at + 1, last)]
        children = []
        for a, b in pieces:
            if a > b:
                continue
            new_lo, new_hi = lo.copy(), hi.copy()
            new_lo[job], new_hi[job] = a, b
            if kind == "start":
                children.append(replace(window, start_lo=new_lo, start_hi=new_hi))
            else:
                children.append(replace(window, end_lo=new_lo, end_hi=new_hi))
        return tuple(children)
    return None


@dataclass(order=True)
class _Node:
    bound: float
    serial: int
    window: Window = field(compare=False)
    depth: int = field(compare=False)
    center: Duals | None = field(default=None, compare=False)  # the parent's best duals


def _spread(allowed: np.ndarray, distribution: np.ndarray, lo: int, hi: int) -> tuple[float, int] | None:
    """How evenly a job's start (or end) distribution (mass per slot; ``allowed``: the slots it may take
    at the root) splits at its median, and the split slot."""
    slots = np.nonzero(allowed)[0]
    slots = slots[(slots >= lo) & (slots <= hi)]
    if slots.size < 2:
        return None
    mass = np.maximum(distribution[slots], 0.0)
    total = float(mass.sum())
    if total <= 1e-9:
        return None
    cumulative = np.cumsum(mass) / total
    k = min(int(np.searchsorted(cumulative, 0.5 - 1e-9)), slots.size - 2)
    below = float(cumulative[k])
    spread = min(below, 1.0 - below) * total
    return (spread, int(slots[k])) if spread > 1e-6 else None


BRANCHINGS = ("starts", "joint", "ends")
"""Which distributions the tree splits on (:func:`_children`): ``"starts"`` starts first, ends only once
every start is one slot; ``"joint"`` the most spread of either; ``"ends"`` ends first."""


def _children(
    master: _Master, values: np.ndarray, window: Window, branching: str = "starts"
) -> tuple[Window, Window] | None:
    """Split the node on the job whose start or end distribution (in the order ``branching`` says) is
    most spread, weighted by its GPUs; ``None`` when every job's start and end are single slots."""
    data = master.data
    starts, ends = master.distributions(values)
    passes: tuple[tuple[str, ...], ...] = {
        "starts": (("start",), ("end",)),
        "joint": (("start", "end"),),
        "ends": (("end",), ("start",)),
    }[branching]
    for kinds in passes:
        best: tuple[float, str, int, int] | None = None
        for kind in kinds:
            for j in range(data.n):
                if kind == "start":
                    found = _spread(master.root_starts[j], starts[j], int(window.start_lo[j]), int(window.start_hi[j]))
                else:
                    found = _spread(master.root_ends[j], ends[j], int(window.end_lo[j]), int(window.end_hi[j]))
                if found is not None and (best is None or found[0] * data.num_gpus[j] > best[0]):
                    best = (found[0] * float(data.num_gpus[j]), kind, j, found[1])
        if best is None:
            continue
        _, kind, job, at = best
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
    incumbent_value: Callable[[], float] | None = None,
    leaf_check: LeafCheck | None = None,
    leaf_seconds: float = 10.0,
    check_depth: int | None = None,
    cover_sets: bool | None = None,
    branching: str = "starts",
    root_window: Window | None = None,
    gang_runs: bool = False,
    gang_paces: bool = False,
    on_root_others: Callable[[np.ndarray], None] | None = None,
    modes: bool | str = False,
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
    cover_sets
        As for :func:`formulation.lanes.lane_bound`; by default (``None``) only where no pair of jobs is
        wider than the cluster. Where such pairs are, their rows hold most of what sets add and the
        sets' rows make every node dearer: at 16 jobs on 8 GPUs the tree ended 0.5-0.8 % lower with them
        on two of three such seeds; where there are none, sets raised the tree's bound 0.3-0.8 % at 60 s
        (docs/oracle-measurements.md, "Cover rows over sets of jobs").
    branching
        Which distributions a node splits on (:data:`BRANCHINGS`).
    root_window
        Search only this region (e.g. every start fixed; for measuring where the slack lies): the
        bound then holds for the schedules inside it, not for the problem.
    gang_runs
        Bound every node by the lanes with gang run columns (:mod:`formulation.gang_lanes`; the root's
        lane LP first, for at most a third of the time, starts it): stronger where gangs share, slower
        per node (docs/oracle-measurements.md, "Lanes with gang runs").
    gang_paces
        Bound every node by the lanes with gang paces (:mod:`formulation.gang_paces`; the root's lane LP
        first, for at most a third of the time; docs/oracle-measurements.md, "Gang paces").
    max_nodes, node_rounds
        Nodes solved at most; pricing rounds per node at most.
    cancel
        Set to stop after the current node.
    on_bound
        Called with each improved global bound; returning ``False`` stops the search.
    incumbent_value
        The best objective known now (slots), asked before each node: schedules found elsewhere (a
        solver beside the tree, a leaf check) prune at once.
    leaf_check
        An exact check for nodes whose LP has every start and end at one slot (the lane LP's own slack
        is then all that is left, and branching on its distributions cannot remove it): it solves the
        node's region (:func:`node_region`) with the objective cut off below the incumbent, in at most
        ``leaf_seconds``. Decided, the node closes; undecided, it is split on a job's window
        (:func:`_window_split`) with the check's bound, so that every node is eventually decided and
        the tree closes. Without it such nodes stay open (status ``"open"``).
    on_root_others
        Called at each improved Lagrangian bound of the root (the lane master's, over the whole
        problem: not with ``root_window``, ``gang_runs`` or ``gang_paces``) with
        :meth:`formulation.lanes._Master.others_bounds` at its duals: ``[j]`` bounds ``Σ_{k≠j} E_k``, for
        :func:`formulation.lanes.latest_ends`. The root's bound itself is reported once the root is
        solved, as before.
    modes
        Mode-aware lanes (:class:`formulation.lanes.PseudoJobs`: each job keeps one mode for its whole
        run), where the pseudo-jobs' DP stays within ``max_states``; not with ``gang_runs`` or
        ``gang_paces``. ``"selective"``: only the jobs the root's lanes need expanded
        (:func:`formulation.lanes.modal_master`'s ``selective``, until :data:`MODE_EXPAND_SHARE` of the
        time), the others one collapsed pseudo-job each, for the root and every node below it.
    check_depth
        With ``leaf_check``, also check nodes this deep (default: the number of jobs), so that CP-SAT
        takes over subtrees small enough for it. The depth adapts: a check that ends within a quarter
        of its time moves it one level up, one that stops moves it two levels down. Each check gets
        ``leaf_seconds`` at most and a quarter of the time left.
    """
    if branching not in BRANCHINGS:
        raise ValueError(f"branching must be one of {BRANCHINGS}, got {branching!r}")
    began = time.perf_counter()
    deadline = began + time_limit
    cut, reason = lane_cut(problem, cut, max_states)
    if reason is not None:
        return LaneTreeBound(math.nan, f"skipped: {reason}")
    import highspy

    best_known = float(problem.upper_bound_value) if problem.upper_bound_value is not None else math.inf
    if incumbent is not None:
        best_known = min(best_known, float(incumbent))
    if modes not in (False, True, "selective"):
        raise ValueError(f"modes must be False, True or 'selective', got {modes!r}")
    if modes and (gang_runs or gang_paces):
        raise ValueError("modes takes the lane master only, not gang_runs or gang_paces")
    selective = modes == "selective"
    # selective: the root expands only what fits in max_states (modal_master), so every job's modes here
    data = (
        LaneData.from_problem(problem, cut, modes=True)
        if selective
        else lane_data(problem, cut, bool(modes), max_states)
    )
    if root_window is not None and any(
        np.shape(bounds) != (data.n,)
        for bounds in (root_window.start_lo, root_window.start_hi, root_window.end_lo, root_window.end_hi)
    ):
        raise ValueError(f"root_window must give each of the {data.n} jobs a start and an end window")
    if cover_sets is None:
        cover_sets = not data.too_wide(2)
    artificial_cost = float(data.n * (data.horizon + 1))
    start_window = data.window() if root_window is None else root_window
    master: _Master
    pricer: _LanePricing
    root_center: Duals | None = None
    if gang_runs and gang_paces:
        raise ValueError("gang_runs and gang_paces are two masters: choose one")
    if gang_paces:
        from formulation.gang_paces import pace_master

        master, pricer, root_center = pace_master(
            problem,
            data,
            window=start_window,
            lanes_until=began + time_limit / 3,
            smoothing=smoothing,
            cancel=cancel,
            artificial_cost=artificial_cost,
            cover_sets=cover_sets,
        )
    elif data.pseudo is not None:
        # mode-aware: from the mode-free root, whose best duals start the mode-aware one at its bound
        free_until, expand_until = modal_deadlines(began, time_limit, selective)
        master, pricer, root_center = modal_master(
            problem,
            data,
            window=start_window,
            free_until=free_until,
            smoothing=smoothing,
            cancel=cancel,
            artificial_cost=artificial_cost,
            cover_sets=cover_sets,
            selective=selective,
            expand_until=expand_until,
            max_states=max_states,
        )
        data = master.data  # selective: as far as the root expanded (mode-free where nothing conflicts)
    elif gang_runs:
        from formulation.gang_lanes import seeded_master

        master, pricer, root_center = seeded_master(
            problem,
            data,
            window=start_window,
            deadline=began + time_limit / 3,
            smoothing=smoothing,
            cancel=cancel,
            artificial_cost=artificial_cost,
            cover_sets=cover_sets,
        )
    else:
        # the root by the primal simplex, the nodes below it by the dual (switched once the root is done)
        master = root_master(problem, data, highspy, artificial_cost=artificial_cost, cover_sets=cover_sets)
        pricer = _LanePricing(data, master.covers)
    want = max(1, data.priced.n)
    root_hook: Callable[[_Generation], bool] | None = None
    if on_root_others is not None and root_window is None and not (gang_runs or gang_paces):

        def root_hook(outcome: _Generation) -> bool:
            if outcome.center is not None and math.isfinite(outcome.center_top):
                on_root_others(master.others_bounds(outcome.center, outcome.center_top))
            return True

    heap: list[_Node] = [_Node(-math.inf, 0, start_window, 0, root_center)]
    leaves: list[float] = []  # bounds of nodes that cannot be split
    serial = 1
    nodes = depth = checks = closed = 0
    check_depth = data.n if check_depth is None else max(0, int(check_depth))
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
        if master.columns >= MAX_POOL_COLUMNS:
            status = "pool_limit"
            break
        if incumbent_value is not None:
            best_known = min(best_known, float(incumbent_value()))
        node = heapq.heappop(heap)
        if prune_value(node.bound):
            continue
        master.restrict(node.window)
        pricer.restrict(node.window)
        outcome = _column_generation(
            master,
            pricer,
            deadline=deadline,
            want=want,
            smoothing=smoothing,
            max_rounds=node_rounds,
            cancel=cancel,
            center=node.center,
            on_bound=root_hook if nodes == 0 else None,
            enough=best_known - 1.0 + 2 * BOUND_TOLERANCE,  # a bound this high prunes the node
            # the root finds most cover rows; below it a few more batches, or nodes get slow
            max_separations=MAX_SEPARATIONS if nodes == 0 else NODE_SEPARATIONS,
        )
        nodes += 1
        depth = max(depth, node.depth)
        bound = max(node.bound, outcome.best)
        if nodes == 1:
            root = bound
            if not (gang_runs or gang_paces):
                master.use_simplex("dual")
        if outcome.status in ("time_limit", "cancelled"):
            heapq.heappush(heap, _Node(bound, node.serial, node.window, node.depth, node.center))  # still open
            status = outcome.status
            break
        if not prune_value(bound):
            split: tuple[Window, ...] | None = (
                None if outcome.values is None else _children(master, outcome.values, node.window, branching)
            )
            must_check = split is None
            if leaf_check is not None and outcome.values is not None and (must_check or node.depth >= check_depth):
                budget = min(leaf_seconds, 0.25 * (deadline - time.perf_counter()))
                check_began = time.perf_counter()
                verdict = (
                    leaf_check(node_region(node.window, data), math.ceil(best_known - 1e-9) - 1, budget)
                    if budget > 0.05
                    else LeafVerdict("open")
                )
                checks += 1
                # checks that end quickly move up the tree (bigger regions); ones that stop move down
                if verdict.status == "open":
                    check_depth += 2
                elif time.perf_counter() - check_began < 0.25 * budget:
                    check_depth = max(1, check_depth - 1)
                if incumbent_value is not None:
                    best_known = min(best_known, float(incumbent_value()))
                if verdict.status == "infeasible":
                    closed += 1
                    split = ()
                elif verdict.status == "optimal":
                    closed += 1
                    split = ()
                    if not prune_value(verdict.value):  # its schedule was not taken: keep the value as a bound
                        leaves.append(verdict.value)
                else:
                    if math.isfinite(verdict.value):
                        bound = max(bound, verdict.value)
                    if prune_value(bound):
                        split = ()
                    elif must_check:
                        split = _window_split(master, outcome.values, node.window)
            if split is None:
                leaves.append(bound)
            else:
                # children start their smoothing at this node's best duals (bounded memory: not in a huge tree)
                center = outcome.center if len(heap) < MAX_CENTERS else None
                for child in split:
                    heapq.heappush(heap, _Node(bound, serial, child, node.depth + 1, center))
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
        leaf_checks=checks,
        leaves_closed=closed,
        columns=master.columns,
        seconds=time.perf_counter() - began,
        mode_aware=data.pseudo is not None,
    )
