"""How far the exact oracle gets in a time limit, by instance size (the issue's performance target).

Usage::

    python -m benchmarks.oracle_scaling --solver cpsat --jobs 8 12 16 24 32 50 --gpus 8 --seeds 3 \\
        --time-limit 60 --output results/oracle_scaling_cpsat.csv

Instances are the standard random family (``formulation.generator.generate_instance``: seeds
``0 .. seeds-1``, ``gpus / gpus_per_node`` nodes); each is solved with :func:`solvers.solve` (a worker
process per instance, the time limit enforced from outside, ``--threads`` solver threads). One CSV row
per solve: status, objective, proven bound, gap, build / solve / wall seconds, slot and horizon; a
summary per size is printed at the end. Run it alone on the machine: timings are wall-clock.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from formulation.discretize import choose_slot
from formulation.generator import generate_instance
from solvers import solve

COLUMNS = [
    "solver",
    "jobs",
    "gpus",
    "nodes",
    "arrivals",
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
    "build_seconds",
    "solve_seconds",
    "wall_seconds",
    "time_limit",
    "slot",
    "horizon_slots",
    "window_slots",
    "variables",
]


def run_one(
    solver: str,
    jobs: int,
    gpus: int,
    gpus_per_node: int,
    seed: int,
    time_limit: float,
    arrivals: str,
    threads: int,
    slot: float | None,
    target_slots: int | None = None,
) -> dict[str, Any]:
    """Solve one instance of the family; a row of the CSV. ``target_slots`` picks the slot as
    :func:`~formulation.discretize.choose_slot` does for that many slots over the estimated makespan."""
    nodes = gpus // gpus_per_node
    instance = generate_instance(jobs, nodes, gpus_per_node, seed, arrivals=arrivals)  # type: ignore[arg-type]
    if slot is None and target_slots is not None:
        slot = choose_slot(instance, target_slots)
    began = time.perf_counter()
    result = solve(
        instance, solver, time_limit=time_limit, slot=slot, options={"threads": threads, "num_workers": threads}
    )
    wall = time.perf_counter() - began
    problem = result.stats.get("problem", {})
    model = result.stats.get("model", {})
    coupled = result.stats.get("coupled_bound") or {}
    return {
        "solver": solver,
        "jobs": jobs,
        "gpus": gpus,
        "nodes": nodes,
        "arrivals": arrivals,
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
        "build_seconds": round(result.build_seconds, 3),
        "solve_seconds": round(result.solve_seconds, 3),
        "wall_seconds": round(wall, 3),
        "time_limit": time_limit,
        "slot": problem.get("slot_seconds"),
        "horizon_slots": problem.get("horizon_slots"),
        "window_slots": problem.get("window_slots"),
        "variables": model.get("variables", model.get("columns")),
    }


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per size: how many proven, median / max gap, max wall time over the limit."""
    grouped = frame.groupby(["solver", "jobs", "gpus"])
    improvement = (frame["warm_start_objective"] - frame["objective"]) / frame["warm_start_objective"]
    return pd.DataFrame(
        {
            "runs": grouped.size(),
            "proven": grouped["proven"].sum(),
            "median_gap_pct": grouped["gap"].median() * 100,
            "max_gap_pct": grouped["gap"].max() * 100,
            "median_wall_s": grouped["wall_seconds"].median(),
            "max_wall_over_limit": (grouped["wall_seconds"].max() / grouped["time_limit"].max()),
            "median_vs_warm_start_pct": improvement.groupby([frame["solver"], frame["jobs"], frame["gpus"]]).median()
            * 100,
        }
    ).round(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solver", default="cpsat", help="cpsat, highs or pyomo:NAME")
    parser.add_argument("--jobs", type=int, nargs="+", default=[8, 12, 16, 24, 32, 50])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=2, help="solver threads / CP-SAT workers")
    parser.add_argument("--arrivals", choices=["zero", "poisson"], default="zero")
    parser.add_argument("--slot", type=float, default=None, help="slot length (default: chosen per instance)")
    parser.add_argument(
        "--target-slots", type=int, default=None, help="slot chosen for about this many slots over the makespan"
    )
    parser.add_argument("--output", type=Path, default=Path("results/oracle_scaling.csv"))
    args = parser.parse_args(argv)
    if args.gpus % args.gpus_per_node:
        parser.error("--gpus must be a multiple of --gpus-per-node")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for jobs in args.jobs:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            row = run_one(
                args.solver,
                jobs,
                args.gpus,
                args.gpus_per_node,
                seed,
                args.time_limit,
                args.arrivals,
                args.threads,
                args.slot,
                args.target_slots,
            )
            rows.append(row)
            print(
                f"{row['solver']:6s} n={jobs:3d} seed={seed} {row['status']:10s} obj={row['objective']:.0f} "
                f"bound={row['bound']:.0f} gap={100 * row['gap']:.2f}% wall={row['wall_seconds']:.1f}s",
                flush=True,
            )
            pd.DataFrame(rows, columns=COLUMNS).to_csv(args.output, index=False)  # keep partial results
    frame = pd.DataFrame(rows, columns=COLUMNS)
    print(summarize(frame).to_string())
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
