"""How far the exact oracle gets in a time limit, by instance size (the issue's performance target).

Scaling: job counts × seeds on one or more cluster shapes, one CSV row per solve::

    python -m benchmarks.oracle_scaling --solver cpsat --jobs 8 12 16 24 32 50 --gpus 8 --seeds 3 \\
        --time-limit 60 --output results/oracle_scaling_cpsat.csv

    python -m benchmarks.oracle_scaling --solver highs --jobs 4 6 8 10 --shape 1x8 2x4 --seeds 3 \\
        --time-limit 60 --stop-after-unproven --output results/pyomo_scaling.csv

Cross-check: every instance solved with ``--solver`` and ``--cross-check-with``; do the two prove the
same optimum, and does every schedule pass the validator? ::

    python -m benchmarks.oracle_scaling --solver highs --cross-check-with cpsat --jobs 4 5 6 \\
        --shape 1x4 1x8 2x4 --seeds 4 --time-limit 60 --output results/cross_check_highs_cpsat.csv

Instances are the standard random family (``formulation.generator.generate_instance``: seeds
``first_seed .. first_seed + seeds - 1``); the cluster is ``--gpus / --gpus-per-node`` nodes, or each
``--shape NODESxGPUS`` in turn. Each is solved with :func:`solvers.solve` (a worker process per
instance, the time limit enforced from outside, ``--threads`` solver threads). A scaling row holds the
status, objective, proven bound, gap, the pair-coupled LP's bound, build / solve / wall seconds, the
overrun of the wall time against the limit, slot and horizon, the model size (rows, columns, search
nodes) and whether the schedule passed :func:`formulation.validator.validate` in slotted mode. At the
end it prints a summary per shape and size and the largest size proven optimal for every seed per
shape. ``--stop-after-unproven`` stops climbing a shape's sizes after a size at which no seed was
proven (larger sizes would only burn the time limit).

``--target-slots`` picks the slot length with :func:`formulation.discretize.choose_slot` (without it:
the library's default, about 120 slots); ``--slot`` fixes it in seconds. Run it alone on the
machine: timings are wall-clock.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

import pandas as pd

from formulation.discretize import choose_slot
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.validator import validate
from solvers import SolverUnavailableError, solve
from solvers.api import LaneOrder
from solvers.backends import check_available, resolve

Arrivals = Literal["zero", "poisson"]

COLUMNS = [
    "solver",
    "jobs",
    "gpus",
    "nodes",
    "arrivals",
    "capacity",
    "seed",
    "status",
    "proven",
    "objective",
    "bound",
    "gap",
    "warm_start_objective",
    "coupled_bound",
    "coupled_bound_seconds",
    "coupled_bound_window",
    "coupled_bound_rounds",
    "lane_bound",
    "lane_bound_status",
    "lane_bound_rounds",
    "build_seconds",
    "solve_seconds",
    "wall_seconds",
    "time_limit",
    "slot",
    "horizon_slots",
    "window_slots",
    "variables",
    # added when pyomo_scaling.py was merged in
    "shape",
    "objective_kind",
    "overrun",
    "rows",
    "columns",
    "search_nodes",
    "valid",
    # branch-and-price (--solver bnp)
    "tree_nodes",
    "tree_leaf_checks",
    "tree_root_slots",
    # CP-SAT restarted in the lane LP's windows (cpsat, bnp with arrivals; nan where it does not apply)
    "lane_window_restarts",
]
"""The scaling CSV's columns. ``nodes`` is the cluster's node count; ``search_nodes`` the solver's
branch-and-bound nodes (HiGHS) or branches (CP-SAT); ``tree_*`` the branch-and-price tree's nodes, leaf
checks and root bound (slots) with ``--solver bnp`` (``portfolio`` runs the tree too, without leaf
checks)."""


def parse_shape(text: str) -> tuple[int, int]:
    """Parse a cluster shape ``NODESxGPUS`` (e.g. ``2x4``: two nodes of four GPUs).

    Parameters
    ----------
    text
        The shape as written on the command line.

    Returns
    -------
    tuple[int, int]
        ``(nodes, gpus_per_node)``, both at least 1.

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not two positive integers joined by ``x``.
    """
    try:
        nodes, gpus_per_node = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 2x4 (nodes x GPUs per node), got {text!r}") from None
    if nodes < 1 or gpus_per_node < 1:
        raise argparse.ArgumentTypeError(f"shape needs at least one node and one GPU per node, got {text!r}")
    return nodes, gpus_per_node


def run_one(
    solver: str,
    jobs: int,
    nodes: int,
    gpus_per_node: int,
    seed: int,
    *,
    time_limit: float = 60.0,
    arrivals: Arrivals = "zero",
    threads: int = 2,
    slot: float | None = None,
    target_slots: int | None = None,
    objective: str = "jct",
    lane_bound: LaneOrder = True,
    lane_windows: bool = True,
    capacity: int = 2,
    lane_modes: bool | str | None = None,
) -> dict[str, Any]:
    """Solve one instance of the family; a row of the CSV.

    Parameters
    ----------
    solver
        ``"cpsat"``, ``"highs"`` or ``"pyomo:NAME"``.
    jobs, nodes, gpus_per_node, seed
        The instance: ``generate_instance(jobs, nodes, gpus_per_node, seed, arrivals=arrivals,
        capacity=capacity)``.
    time_limit
        Seconds for the solve (enforced from outside the worker).
    arrivals
        ``"zero"`` or ``"poisson"``.
    threads
        Solver threads / CP-SAT workers.
    slot
        Slot length in seconds; ``None``: chosen per instance.
    target_slots
        Without ``slot``: pick the slot as :func:`~formulation.discretize.choose_slot` does for that
        many slots over the estimated makespan.
    objective
        ``"jct"`` or ``"makespan"``.
    lane_bound
        How :func:`solvers.solve` runs the lane relaxation (its ``lane_bound``: by default before the
        coupled LP, ``"after"`` it, ``False`` not at all).
    lane_windows
        Whether :func:`solvers.solve` may restart CP-SAT in the lane LP's windows (its
        ``options["lane_windows"]``; ``cpsat`` and ``bnp`` with arrivals spread in time).
    capacity
        Jobs per GPU at most (``C``; 1: every GPU exclusive).
    lane_modes
        Mode-aware lane bounds (:func:`solvers.solve`'s ``options["lane_modes"]``); ``None``: its default.

    Returns
    -------
    dict[str, Any]
        One value per name in :data:`COLUMNS` (objective and bound in seconds).
    """
    instance = generate_instance(jobs, nodes, gpus_per_node, seed, arrivals=arrivals, capacity=capacity)
    if slot is None and target_slots is not None:
        slot = choose_slot(instance, target_slots)
    began = time.perf_counter()
    result = solve(
        instance,
        solver,
        time_limit=time_limit,
        slot=slot,
        objective=objective,
        options={
            "threads": threads,
            "num_workers": threads,
            **({} if lane_windows else {"lane_windows": False}),
            **({} if lane_modes is None else {"lane_modes": lane_modes}),
        },
        lane_bound=lane_bound,
    )
    wall = time.perf_counter() - began
    narrowing = result.stats.get("lane_windows")
    problem = result.stats.get("problem", {})
    model = result.stats.get("model", {})
    sizes = {**model, **result.stats.get("backend", {})}
    coupled = result.stats.get("coupled_bound") or {}
    lanes = result.stats.get("lane_bound") or {}
    valid = None if result.schedule is None else validate(instance, result.schedule, slotted=True).ok
    return {
        "solver": solver,
        "jobs": jobs,
        "gpus": nodes * gpus_per_node,
        "nodes": nodes,
        "arrivals": arrivals,
        "capacity": capacity,
        "seed": seed,
        "status": result.status.value,
        "proven": result.proven_optimal,
        "objective": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "warm_start_objective": result.stats.get("warm_start_objective", math.nan),
        # the pair-coupled LP's bound alone (seconds), to see what it adds to the solver's
        "coupled_bound": math.nan if coupled.get("bound_seconds") is None else coupled["bound_seconds"],
        "coupled_bound_seconds": coupled.get("seconds", math.nan),
        "coupled_bound_window": coupled.get("window_slots", math.nan),
        "coupled_bound_rounds": coupled.get("rounds", math.nan),
        "lane_bound": math.nan if lanes.get("bound_seconds") is None else lanes["bound_seconds"],
        "lane_bound_status": lanes.get("status", "off"),
        "lane_bound_rounds": lanes.get("rounds", math.nan),
        "tree_nodes": lanes.get("nodes", math.nan),
        "tree_leaf_checks": lanes.get("leaf_checks", math.nan),
        "tree_root_slots": math.nan if lanes.get("root_slots") is None else float(lanes["root_slots"]),
        "build_seconds": round(result.build_seconds, 3),
        "solve_seconds": round(result.solve_seconds, 3),
        "wall_seconds": round(wall, 3),
        "time_limit": time_limit,
        "slot": problem.get("slot_seconds"),
        "horizon_slots": problem.get("horizon_slots"),
        "window_slots": problem.get("window_slots"),
        "variables": model.get("variables", model.get("columns")),
        "shape": f"{nodes}x{gpus_per_node}",
        "objective_kind": objective,
        "overrun": round(wall / time_limit - 1.0, 3),
        "rows": sizes.get("rows", sizes.get("constraints")),
        "columns": sizes.get("columns", sizes.get("variables")),
        "search_nodes": sizes.get("nodes", sizes.get("branches")),
        "valid": valid,
        "lane_window_restarts": math.nan if narrowing is None else len(narrowing["restarts"]),
    }


def run_scaling(
    jobs: Sequence[int],
    shapes: Sequence[tuple[int, int]],
    seeds: Sequence[int],
    *,
    solver: str = "cpsat",
    time_limit: float = 60.0,
    arrivals: Arrivals = "zero",
    threads: int = 2,
    slot: float | None = None,
    target_slots: int | None = None,
    objective: str = "jct",
    lane_bound: LaneOrder = True,
    lane_windows: bool = True,
    capacity: int = 2,
    stop_after_unproven: bool = False,
    output: Path | None = None,
    echo: bool = True,
) -> pd.DataFrame:
    """Solve every (shape, job count, seed) instance, in that order.

    Parameters
    ----------
    jobs
        Job counts, in the order given.
    shapes
        ``(nodes, gpus_per_node)`` pairs.
    seeds
        Instance seeds.
    solver, time_limit, arrivals, threads, slot, target_slots, objective, lane_bound, lane_windows, capacity
        As for :func:`run_one`.
    stop_after_unproven
        After a size at which no seed was proven optimal, skip that shape's sizes at least as large.
    output
        When given, the CSV is rewritten after every solve (partial results survive an interruption).
    echo
        Print a line per solve.

    Returns
    -------
    pandas.DataFrame
        One row per solve, columns :data:`COLUMNS`.
    """
    rows: list[dict[str, Any]] = []
    for nodes, gpus_per_node in shapes:
        ceiling = math.inf  # smallest size of this shape at which no seed was proven
        for n in jobs:
            if n >= ceiling:
                if echo:
                    print(f"{solver:6s} n={n:3d} {nodes}x{gpus_per_node}: skipped (n={ceiling} unproven)", flush=True)
                continue
            batch = []
            for seed in seeds:
                row = run_one(
                    solver,
                    n,
                    nodes,
                    gpus_per_node,
                    seed,
                    time_limit=time_limit,
                    arrivals=arrivals,
                    threads=threads,
                    slot=slot,
                    target_slots=target_slots,
                    objective=objective,
                    lane_bound=lane_bound,
                    lane_windows=lane_windows,
                    capacity=capacity,
                )
                batch.append(row)
                rows.append(row)
                if echo:
                    print(
                        f"{solver:6s} n={n:3d} {row['shape']} seed={seed} {row['status']:10s} "
                        f"obj={row['objective']:.0f} bound={row['bound']:.0f} gap={100 * row['gap']:.2f}% "
                        f"build={row['build_seconds']:.1f}s solve={row['solve_seconds']:.1f}s "
                        f"wall={row['wall_seconds']:.1f}s valid={row['valid']}",
                        flush=True,
                    )
                if output is not None:
                    pd.DataFrame(rows, columns=COLUMNS).to_csv(output, index=False)
            if stop_after_unproven and batch and not any(row["proven"] for row in batch):
                ceiling = min(ceiling, n)
    return pd.DataFrame(rows, columns=COLUMNS)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per solver, shape and size: how many proven, median / max gap, wall time against the limit.

    Parameters
    ----------
    frame
        Rows of :func:`run_scaling` (columns :data:`COLUMNS`).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``(solver, shape, jobs)``: runs, proven, median / max gap (%), median wall seconds,
        max wall / limit, and the median improvement over the warm start (%).
    """
    keys = ["solver", "shape", "jobs"]
    grouped = frame.groupby(keys)
    improvement = (frame["warm_start_objective"] - frame["objective"]) / frame["warm_start_objective"]
    return pd.DataFrame(
        {
            "runs": grouped.size(),
            "proven": grouped["proven"].sum(),
            "median_gap_pct": grouped["gap"].median() * 100,
            "max_gap_pct": grouped["gap"].max() * 100,
            "median_wall_s": grouped["wall_seconds"].median(),
            "max_wall_over_limit": (grouped["wall_seconds"].max() / grouped["time_limit"].max()),
            "median_vs_warm_start_pct": improvement.groupby([frame[key] for key in keys]).median() * 100,
        }
    ).round(2)


def largest_proven(table: pd.DataFrame) -> dict[str, int]:
    """Per shape: the largest job count at which every seed was proven optimal.

    Parameters
    ----------
    table
        Rows with columns ``shape``, ``proven`` and ``jobs`` (those of :func:`run_scaling`).

    Returns
    -------
    dict[str, int]
        Shape (``"2x4"``) to the largest such size, 0 where there is none.
    """
    result: dict[str, int] = {}
    for shape, group in table.groupby("shape"):
        proven = group.groupby("jobs")["proven"].all()
        sizes = [int(str(n)) for n, ok in proven.items() if ok]
        result[str(shape)] = max(sizes) if sizes else 0
    return result


def cross_check(
    specs: Sequence[tuple[int, int, int, int]],
    *,
    solvers: tuple[str, str] = ("highs", "cpsat"),
    time_limit: float = 60.0,
    target_slots: int | None = None,
    echo: bool = True,
    arrivals: Arrivals = "zero",
    threads: int | None = None,
    capacity: int = 2,
) -> pd.DataFrame:
    """Solve each instance with both solvers and compare their proven optima.

    Parameters
    ----------
    specs
        ``(n, nodes, gpus_per_node, seed)`` per instance.
    solvers
        The two solvers, e.g. ``("highs", "cpsat")``.
    time_limit
        Seconds per solve.
    target_slots
        Slot length from :func:`~formulation.discretize.choose_slot` for about this many slots (``None``:
        its default); both solvers get the same slot.
    echo
        Print a line per instance.
    arrivals
        ``"zero"`` or ``"poisson"`` (instance family).
    threads
        Solver threads / CP-SAT workers (``None``: the backends' defaults).
    capacity
        Jobs per GPU at most (``C``).

    Returns
    -------
    pandas.DataFrame
        Per instance ``n``, ``shape``, ``seed``, ``slot``; per solver ``S``: ``S_status``,
        ``S_objective``, ``S_slots`` (total JCT in slot units), ``S_bound``, ``S_seconds`` (build +
        solve), ``S_valid``; then ``both_proven`` and ``agree``: both proved optimality with the same
        objective in slot units (the integer model's objective: two optimal schedules may differ in
        the float re-evaluation by a rounding, see ``formulation/discretize.py``) and every returned
        schedule passed the validator in slotted mode.
    """
    options = None if threads is None else {"threads": threads, "num_workers": threads}
    rows: list[dict[str, Any]] = []
    for n, nodes, gpn, seed in specs:
        instance = generate_instance(n, nodes, gpn, seed, arrivals=arrivals, capacity=capacity)
        slot = choose_slot(instance, target_slots) if target_slots else choose_slot(instance)
        row: dict[str, Any] = {"n": n, "shape": f"{nodes}x{gpn}", "seed": seed, "slot": slot}
        slots_value: dict[str, float] = {}
        total_arrival = sum(job.arrival for job in instance.jobs)
        for solver in solvers:
            result = solve(instance, solver, time_limit=time_limit, slot=slot, options=options)
            value = (result.objective + total_arrival) / slot
            slots_value[solver] = value
            valid = result.schedule is not None and validate(instance, result.schedule, slotted=True).ok
            row.update(
                {
                    f"{solver}_status": result.status.value,
                    f"{solver}_objective": result.objective,
                    f"{solver}_slots": round(value, 6),
                    f"{solver}_bound": result.bound,
                    f"{solver}_seconds": round(result.build_seconds + result.solve_seconds, 2),
                    f"{solver}_valid": valid,
                }
            )
        a, b = solvers
        both = row[f"{a}_status"] == "optimal" and row[f"{b}_status"] == "optimal"
        row["both_proven"] = both
        row["agree"] = bool(
            both and round(slots_value[a]) == round(slots_value[b]) and row[f"{a}_valid"] and row[f"{b}_valid"]
        )
        rows.append(row)
        if echo:
            print(
                f"n={n} {nodes}x{gpn} seed={seed}: "
                + ", ".join(f"{s} {row[f'{s}_status']} {row[f'{s}_slots']:.0f} slots" for s in solvers)
                + f" -> agree={row['agree']}",
                flush=True,
            )
    return pd.DataFrame(rows)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.oracle_scaling", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--solver", default="cpsat", help="cpsat, highs or pyomo:NAME")
    parser.add_argument("--jobs", type=int, nargs="+", default=[8, 12, 16, 24, 32, 50], help="job counts")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs in the cluster (without --shape)")
    parser.add_argument("--gpus-per-node", type=int, default=4, help="GPUs per node (without --shape)")
    parser.add_argument(
        "--shape",
        type=parse_shape,
        nargs="+",
        action="extend",
        default=None,
        metavar="NODESxGPUS",
        help="cluster shapes, e.g. 1x8 2x4 (repeatable; replaces --gpus / --gpus-per-node)",
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds per size")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    parser.add_argument("--threads", type=int, default=2, help="solver threads / CP-SAT workers")
    parser.add_argument("--arrivals", choices=["zero", "poisson"], default="zero")
    parser.add_argument("--capacity", type=int, default=2, help="jobs per GPU at most (1: exclusive GPUs)")
    parser.add_argument("--objective", choices=["jct", "makespan"], default="jct")
    parser.add_argument("--slot", type=float, default=None, help="slot length (default: chosen per instance)")
    parser.add_argument(
        "--no-lane-bound",
        dest="lane_bound",
        action="store_false",
        help="do not run the lane relaxation beside the solver (to measure what it adds)",
    )
    parser.add_argument(
        "--lanes-first",
        dest="lane_bound",
        action="store_const",
        const="first",
        help="run the lane relaxation first, with all the time, then the coupled LP, for every solver "
        "(solve's lane_bound='first'; the default does so except for bnp and portfolio)",
    )
    parser.add_argument(
        "--lanes-after",
        dest="lane_bound",
        action="store_const",
        const="after",
        help="the coupled LP first, then the lanes where they are expected to converge (solve's "
        "lane_bound='after', the earlier default)",
    )
    parser.add_argument(
        "--no-lane-windows",
        dest="lane_windows",
        action="store_false",
        help="never restart CP-SAT in the lane LP's windows (cpsat and bnp with arrivals; to measure what it adds)",
    )
    parser.add_argument(
        "--target-slots", type=int, default=None, help="slot chosen for about this many slots over the makespan"
    )
    parser.add_argument(
        "--stop-after-unproven",
        action="store_true",
        help="stop climbing a shape's sizes after a size where no seed was proven",
    )
    parser.add_argument(
        "--cross-check-with",
        default=None,
        metavar="SOLVER",
        help="instead of scaling rows: solve every instance with --solver and this solver and compare",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="CSV file (default results/oracle_scaling.csv, or results/oracle_cross_check.csv)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the scaling benchmark or, with ``--cross-check-with``, the cross-check of two solvers.

    Parameters
    ----------
    argv
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0, or 2 for a solver that cannot run (bad arguments exit 2 through argparse).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _run(parser, args)
    except (DuettoInputError, SolverUnavailableError) as error:  # e.g. a pyomo:NAME Pyomo cannot run
        print(f"error: {error}", file=sys.stderr)
        return 2


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.shape:
        shapes: list[tuple[int, int]] = list(dict.fromkeys(args.shape))
    else:
        if args.gpus_per_node < 1 or args.gpus < 1 or args.gpus % args.gpus_per_node:
            parser.error("--gpus must be a positive multiple of --gpus-per-node")
        shapes = [(args.gpus // args.gpus_per_node, args.gpus_per_node)]
    if min(args.jobs) < 1 or args.seeds < 1:
        parser.error("--jobs and --seeds must be positive")
    if args.capacity < 1:
        parser.error("--capacity must be at least 1")
    if args.time_limit <= 0:
        parser.error("--time-limit must be positive")
    for option, name in (("--solver", args.solver), ("--cross-check-with", args.cross_check_with)):
        if name is None:
            continue
        try:  # before any solve: a misspelt or missing solver is an argument error, not a traceback
            check_available(resolve(name))
        except (DuettoInputError, SolverUnavailableError) as error:
            parser.error(f"{option}: {error}")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    arrivals = cast(Arrivals, args.arrivals)
    if args.cross_check_with is not None:
        if args.cross_check_with == args.solver:
            parser.error("--cross-check-with must name a solver other than --solver")
        if args.objective != "jct" or args.slot is not None:
            parser.error("--cross-check-with compares total-JCT optima at the chosen slot: no --objective / --slot")
        output = args.output or Path("results/oracle_cross_check.csv")
        output.parent.mkdir(parents=True, exist_ok=True)
        specs = [(n, nodes, gpn, seed) for nodes, gpn in shapes for n in args.jobs for seed in seeds]
        checked = cross_check(
            specs,
            solvers=(args.solver, args.cross_check_with),
            time_limit=args.time_limit,
            target_slots=args.target_slots,
            arrivals=arrivals,
            threads=args.threads,
            capacity=args.capacity,
        )
        checked.to_csv(output, index=False)
        print(
            f"both proven: {int(checked['both_proven'].sum())} of {len(checked)}; "
            f"agreeing: {int(checked['agree'].sum())}"
        )
        print(f"wrote {output}")
        return 0
    output = args.output or Path("results/oracle_scaling.csv")
    output.parent.mkdir(parents=True, exist_ok=True)
    frame = run_scaling(
        args.jobs,
        shapes,
        seeds,
        solver=args.solver,
        time_limit=args.time_limit,
        arrivals=arrivals,
        threads=args.threads,
        slot=args.slot,
        target_slots=args.target_slots,
        objective=args.objective,
        lane_bound=args.lane_bound,
        lane_windows=args.lane_windows,
        capacity=args.capacity,
        stop_after_unproven=args.stop_after_unproven,
        output=output,
    )
    frame.to_csv(output, index=False)
    if len(frame):
        with pd.option_context("display.width", 200, "display.max_columns", 30):
            print(summarize(frame).to_string())
        print("largest n proven optimal for every seed:", largest_proven(frame))
        print(f"worst wall time against the limit: {frame['overrun'].max():+.1%}")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
