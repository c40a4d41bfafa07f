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
the lanes with the gangs' paces per slot (:func:`formulation.gang_paces.gang_pace_bound`).
``--branching starts joint ends`` runs the tree once per branching rule
(:data:`formulation.lane_tree.BRANCHINGS`; methods ``tree``, ``tree:joint``, ``tree:ends``).

Columns: ``jobs, gpus, arrivals, last_release`` (the latest release slot), ``seed, slot, horizon,
ub_slots, method, bound_slots, status, seconds, rounds, columns, gap_to_ub`` (``(ub − bound)/ub``)
and ``peak_rss_mib`` (the process's peak resident memory after the method ran: a ceiling, since it
never goes down). At the end a table per size: each method's median bound relative to the better of
the two on the same instance, and how often each is the larger.
Run it alone on the machine: timings are wall-clock.
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
from formulation.discretize import choose_slot, discretize
from formulation.gang_lanes import gang_lane_bound
from formulation.gang_paces import gang_pace_bound
from formulation.generator import generate_instance
from formulation.lane_tree import BRANCHINGS, lane_tree_bound
from formulation.lanes import lane_bound
from formulation.relaxation import refined_coupled_bound
from formulation.run_columns import run_bound
from solvers.warmstart import warm_start

METHODS = ("lanes", "coupled", "tree", "runs", "gang_lanes", "gang_tree", "gang_paces")
DEFAULT_METHODS = ("lanes", "coupled")


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
) -> pd.DataFrame:
    """Solve both relaxations on every instance; one row per (instance, method)."""
    rows: list[dict[str, Any]] = []
    for n in jobs:
        for seed in seeds:
            instance = generate_instance(
                n,
                max(1, gpus // gpus_per_node),
                gpus_per_node,
                seed,
                arrivals="poisson" if arrivals == "poisson" else "zero",
            )
            slot = choose_slot(instance, target_slots) if target_slots else None
            base = discretize(instance, slot)
            problem = base.with_upper_bound(warm_start(base))
            ub = float(problem.upper_bound_value or math.nan)
            for method in methods:
                began = time.perf_counter()
                if method == "lanes":
                    lanes = lane_bound(problem, time_limit=time_limit)
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
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    trees = ["tree" if rule == "starts" else f"tree:{rule}" for rule in args.branching]
    methods = [name for method in args.methods for name in (trees if method == "tree" else [method])]
    if args.time_limit <= 0:
        print("error: --time-limit must be positive", file=sys.stderr)
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
    )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.output, index=False)
    print(frame.to_string(index=False))
    if len(methods) > 1:
        print(summarize(frame).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
