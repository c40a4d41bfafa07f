"""The two relaxations side by side: the lane (Dantzig-Wolfe) bound and the pair-coupled LP.

One CSV row per instance and relaxation, each given the same time limit on one thread, from the same
upper-bound solution (the slotted greedy's warm start, whose schedule also gives the upper bound
``ub_slots``)::

    python -m benchmarks.bound_comparison --jobs 12 16 24 --gpus 8 --seeds 3 --time-limit 60 \\
        --output results/bounds.csv

``--arrivals poisson`` takes the family's Poisson arrivals at load 1. ``--methods lanes coupled tree``
adds branch-and-bound on the lane LP (:func:`formulation.lane_tree.lane_tree_bound`; its ``rounds``
column holds the nodes solved, ``columns`` the nodes left open); ``runs`` the per-job run relaxation
(:func:`formulation.run_columns.run_bound`, a diagnostic: weaker than the lanes where measured);
``gang_lanes`` the lanes with gang run columns (:func:`formulation.gang_lanes.gang_lane_bound`, a
diagnostic) and ``gang_tree`` the tree on them (``lane_tree_bound(..., gang_runs=True)``); ``gang_paces``
the lanes with the gangs' paces per slot (:func:`formulation.gang_paces.gang_pace_bound`);
``mode_lanes`` the mode-aware lanes (``lane_bound(..., modes=True)``: each job one mode for its run).
``--memory-pressure`` sets the family's (0.3 by default; higher makes the modes matter).
``--branching starts joint ends`` runs the tree once per branching rule
(:data:`formulation.lane_tree.BRANCHINGS`; methods ``tree``, ``tree:joint``, ``tree:ends``).

Columns: ``jobs, gpus, arrivals, last_release`` (the latest release slot), ``seed, slot, horizon,
ub_slots, method, bound_slots, status, seconds, rounds, columns, gap_to_ub`` (``(ub − bound)/ub``)
and ``peak_rss_mib`` (the process's peak resident memory after the method ran: a ceiling, since it
never goes down). At the end a table per size: each method's median bound relative to the better of
the two on the same instance, and how often each is the larger.
Run it alone on the machine: timings are wall-clock.

**Against the optimum** (``--optimum SECONDS``): each instance is also solved by ``cpsat`` in that time
(in its own worker process); where it proves the optimum, ``optimum_slots`` holds it and
``above_optimum`` says whether the bound is above it (more than ``1e-6``), which no valid bound may be:
the command then names each such row and exits with 1. A check over random instances, beside the
tests' fixed ones::

    python -m benchmarks.bound_comparison --jobs 6 8 10 --gpus 4 --gpus-per-node 4 --seeds 10 \
        --methods lanes mode_lanes coupled tree --memory-pressure 0.6 --optimum 40 --time-limit 30
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.common import add_family_arguments, family_error, family_seeds
from formulation.discretize import SlottedProblem, choose_slot, discretize, from_schedule
from formulation.gang_lanes import gang_lane_bound
from formulation.gang_paces import gang_pace_bound
from formulation.generator import generate_instance
from formulation.instance import Instance
from formulation.lane_tree import BRANCHINGS, lane_tree_bound
from formulation.lanes import lane_bound
from formulation.relaxation import refined_coupled_bound
from formulation.run_columns import run_bound
from solvers import solve
from solvers.result import SolveStatus
from solvers.warmstart import warm_start

METHODS = ("lanes", "mode_lanes", "coupled", "tree", "runs", "gang_lanes", "gang_tree", "gang_paces")
DEFAULT_METHODS = ("lanes", "coupled")


DEFAULT_MEMORY_PRESSURE = 0.3
"""The family's memory pressure (:func:`formulation.generator.generate_instance`'s default)."""

OPTIMUM_TOLERANCE = 1e-6
"""How far (slots) a bound may pass a proven optimum before ``above_optimum`` calls it wrong."""


def _proven_optimum(instance: Instance, problem: SlottedProblem, time_limit: float) -> float:
    """``Σ_j E_j`` (slots) of ``cpsat``'s optimum on ``problem``'s slots, ``nan`` where not proven in time.

    CP-SAT runs in :func:`solvers.solve`'s worker process, so this process keeps to HiGHS (the two
    cannot be loaded in one process)."""
    result = solve(instance, "cpsat", time_limit=time_limit, slot=problem.slot, lane_bound=False)
    if result.status is not SolveStatus.OPTIMAL or result.schedule is None:
        return math.nan
    value = problem.with_upper_bound(from_schedule(problem, result.schedule)).upper_bound_value
    return math.nan if value is None else float(value)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def compare(
    jobs: Sequence[int],
    gpus: int,
    gpus_per_node: int,
    seeds: Sequence[int],
    time_limit: float,
    target_slots: int | None = None,
    methods: Sequence[str] = DEFAULT_METHODS,
    progress: bool = True,
    arrivals: str = "zero",
    memory_pressure: float = DEFAULT_MEMORY_PRESSURE,
    optimum_time_limit: float | None = None,
) -> pd.DataFrame:
    """Solve the relaxations on every instance; one row per (instance, method).

    ``optimum_time_limit``: also solve each instance with ``cpsat`` for that long and, where it proves
    the optimum, record it (``optimum_slots``) and whether each bound is above it (``above_optimum``)."""
    rows: list[dict[str, Any]] = []
    for n in jobs:
        for seed in seeds:
            instance = generate_instance(
                n,
                max(1, gpus // gpus_per_node),
                gpus_per_node,
                seed,
                arrivals="poisson" if arrivals == "poisson" else "zero",
                memory_pressure=memory_pressure,
            )
            slot = choose_slot(instance, target_slots) if target_slots else None
            base = discretize(instance, slot)
            problem = base.with_upper_bound(warm_start(base))
            ub = float(problem.upper_bound_value or math.nan)
            optimum = math.nan if optimum_time_limit is None else _proven_optimum(instance, problem, optimum_time_limit)
            for method in methods:
                began = time.perf_counter()
                if method in ("lanes", "mode_lanes"):
                    lanes = lane_bound(problem, time_limit=time_limit, modes=method == "mode_lanes")
                    value, status, rounds, columns = lanes.value, lanes.status, lanes.rounds, lanes.columns
                elif method == "tree" or method.startswith("tree:"):
                    rule = method.partition(":")[2] or "starts"
                    tree = lane_tree_bound(problem, time_limit=time_limit, branching=rule)
                    value, status, rounds, columns = tree.value, tree.status, tree.nodes, tree.open_nodes
                elif method == "runs":
                    runs = run_bound(problem, time_limit=time_limit)
                    value, status, rounds, columns = runs.value, runs.status, runs.rounds, runs.columns
                elif method == "gang_tree":
                    tree = lane_tree_bound(problem, time_limit=time_limit, gang_runs=True)
                    value, status, rounds, columns = tree.value, tree.status, tree.nodes, tree.open_nodes
                elif method == "gang_paces":
                    paces = gang_pace_bound(problem, time_limit=time_limit)
                    value, status, rounds, columns = paces.value, paces.status, paces.rounds, paces.columns
                elif method == "gang_lanes":
                    gangs = gang_lane_bound(problem, time_limit=time_limit)
                    value, status, rounds, columns = gangs.value, gangs.status, gangs.rounds, gangs.columns
                else:
                    coupled = refined_coupled_bound(problem, time_limit=time_limit)
                    value, status, rounds, columns = coupled.value, coupled.status, coupled.rounds, coupled.variables
                row = {
                    "jobs": n,
                    "gpus": gpus,
                    "arrivals": arrivals,
                    "last_release": max(job.release for job in problem.jobs),
                    "seed": seed,
                    "slot": problem.slot,
                    "horizon": problem.horizon,
                    "ub_slots": ub,
                    "method": method,
                    "bound_slots": value,
                    "status": status,
                    "seconds": round(time.perf_counter() - began, 2),
                    "rounds": rounds,
                    "columns": columns,
                    "gap_to_ub": (ub - value) / ub if math.isfinite(value) else math.nan,
                    "peak_rss_mib": round(_peak_rss_mib(), 1),
                    "optimum_slots": optimum,
                    "above_optimum": bool(math.isfinite(value) and value > optimum + OPTIMUM_TOLERANCE),
                }
                rows.append(row)
                if progress:
                    print(
                        f"n={n} seed={seed} {method}: bound {value:.1f} ({status}) ub {ub:.0f} in {row['seconds']} s",
                        file=sys.stderr,
                        flush=True,
                    )
    return pd.DataFrame(rows)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per size and method: median bound relative to the better method's, wins, median seconds."""
    wide = frame.pivot_table(index=["jobs", "seed"], columns="method", values="bound_slots")
    best = wide.max(axis=1)
    rows = []
    for method in wide.columns:
        relative = wide[method] / best
        for n, group in relative.groupby(level="jobs"):
            seconds = frame[(frame["jobs"] == n) & (frame["method"] == method)]["seconds"]
            rows.append(
                {
                    "jobs": n,
                    "method": method,
                    "median_of_best": round(float(group.median()), 4),
                    "wins": int((group >= 1 - 1e-9).sum()),
                    "instances": len(group),
                    "median_seconds": float(seconds.median()),
                }
            )
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_family_arguments(parser, [12, 16])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--target-slots", type=int, default=None)
    parser.add_argument("--arrivals", choices=["zero", "poisson"], default="zero")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(DEFAULT_METHODS))
    parser.add_argument(
        "--branching", nargs="+", choices=BRANCHINGS, default=["starts"], help="the tree's rules, one row each"
    )
    parser.add_argument(
        "--memory-pressure",
        type=float,
        default=DEFAULT_MEMORY_PRESSURE,
        help="the family's memory pressure (higher: more jobs need slower modes to share)",
    )
    parser.add_argument(
        "--optimum",
        type=float,
        default=None,
        metavar="SECONDS",
        help="also solve each instance with cpsat for this long; where proven, check every bound against it",
    )
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    trees = ["tree" if rule == "starts" else f"tree:{rule}" for rule in args.branching]
    methods = [name for method in args.methods for name in (trees if method == "tree" else [method])]
    if args.time_limit <= 0:
        print("error: --time-limit must be positive", file=sys.stderr)
        return 2
    if args.optimum is not None and not args.optimum > 0:
        print(f"error: --optimum must be positive, got {args.optimum}", file=sys.stderr)
        return 2
    if not 0 <= args.memory_pressure <= 1:
        print(f"error: --memory-pressure must be in [0, 1], got {args.memory_pressure}", file=sys.stderr)
        return 2
    if (problem := family_error(args)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    seeds = family_seeds(args)
    frame = compare(
        args.jobs,
        args.gpus,
        args.gpus_per_node,
        seeds,
        args.time_limit,
        args.target_slots,
        methods,
        arrivals=args.arrivals,
        memory_pressure=args.memory_pressure,
        optimum_time_limit=args.optimum,
    )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.output, index=False)
    print(frame.to_string(index=False))
    if len(methods) > 1:
        print(summarize(frame).to_string(index=False))
    if args.optimum is not None:
        instances = frame.drop_duplicates(["jobs", "seed"])
        wrong = frame[frame["above_optimum"]]
        print(f"optimum proven on {instances['optimum_slots'].notna().sum()} of {len(instances)} instances")
        for _, row in wrong.iterrows():
            print(
                f"error: {row['method']} bound {row['bound_slots']:.4f} above the optimum {row['optimum_slots']:.0f} "
                f"(jobs {row['jobs']}, seed {row['seed']})",
                file=sys.stderr,
            )
        if len(wrong):
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
