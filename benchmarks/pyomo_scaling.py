"""How far the exact Pyomo model gets (benchmark, not a test): proven optimality against job count.

For each job count ``n``, cluster shape and seed it solves the standard random instance
``formulation.generator.generate_instance(n, nodes, gpus_per_node, seed)`` with
:func:`solvers.api.solve` (the same path users take: a worker subprocess, the limit enforced from
outside) and records status, objective, proven bound, gap, the backend's build and solve seconds, the
wall time against the limit, and the model size. Then it reports, per shape, the largest ``n`` at
which every seed was proven optimal.

Reproduce the numbers in ``docs/pyomo-model.md``::

    python -m benchmarks.pyomo_scaling --solver highs --jobs 4 --jobs 6 --jobs 8 --jobs 10 \\
        --shape 1x8 --shape 2x4 --seeds 0 --seeds 1 --seeds 2 --time-limit 60 --out pyomo_scaling.csv

The cross-check of HiGHS against CP-SAT (same proven optimum, every schedule validated)::

    python -m benchmarks.pyomo_scaling --solver highs --cross-check-with cpsat --jobs 4 --jobs 5 \\
        --jobs 6 --shape 1x4 --shape 1x8 --shape 2x4 --seeds 0 --seeds 1 --seeds 2 --seeds 3

``--target-slots`` picks ``Δ`` with :func:`formulation.discretize.choose_slot` (without it: the
library's default, about 120 slots); ``--slot`` fixes it in seconds. ``--solver cpsat`` runs the
CP-SAT model on the same instances for comparison.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from formulation.discretize import choose_slot
from formulation.generator import generate_instance
from formulation.validator import validate


def _shape(text: str) -> tuple[int, int]:
    try:
        nodes, gpn = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise typer.BadParameter(f"shape must look like 1x8 (nodes x GPUs per node), got {text!r}") from None
    return nodes, gpn


def run_one(
    n: int,
    nodes: int,
    gpus_per_node: int,
    seed: int,
    *,
    solver: str = "highs",
    time_limit: float = 60.0,
    target_slots: int | None = None,
    slot: float | None = None,
    objective: str = "jct",
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Solve one instance and return its row (objective and bound in seconds)."""
    from solvers.api import solve

    instance = generate_instance(n, nodes, gpus_per_node, seed)
    if slot is None and target_slots is not None:
        slot = choose_slot(instance, target_slots)
    began = time.perf_counter()
    result = solve(instance, solver, time_limit=time_limit, slot=slot, objective=objective, options=options)
    wall = time.perf_counter() - began
    valid = None
    if result.schedule is not None:
        valid = validate(instance, result.schedule, slotted=True).ok
    stats = {**result.stats.get("model", {}), **result.stats.get("backend", {})}
    return {
        "solver": solver,
        "n": n,
        "shape": f"{nodes}x{gpus_per_node}",
        "seed": seed,
        "slot": result.schedule.slot if result.schedule is not None else slot,
        "status": result.status.value,
        "proven": result.proven_optimal,
        "objective": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "build_s": round(result.build_seconds, 2),
        "solve_s": round(result.solve_seconds, 2),
        "wall_s": round(wall, 2),
        "overrun": round(wall / time_limit - 1.0, 3),
        "rows": stats.get("rows", stats.get("constraints")),
        "columns": stats.get("columns", stats.get("variables")),
        "nodes": stats.get("nodes", stats.get("branches")),
        "valid": valid,
    }


def run_scaling(
    jobs: Sequence[int],
    shapes: Sequence[tuple[int, int]],
    seeds: Sequence[int],
    *,
    solver: str = "highs",
    time_limit: float = 60.0,
    target_slots: int | None = None,
    slot: float | None = None,
    objective: str = "jct",
    stop_after_failures: bool = True,
    echo: bool = True,
) -> pd.DataFrame:
    """Rows for every (n, shape, seed). With ``stop_after_failures`` a shape stops climbing after a size
    at which no seed was proven (larger sizes would only burn the time limit)."""
    rows: list[dict[str, Any]] = []
    for nodes, gpn in shapes:
        for n in sorted(jobs):
            batch = []
            for seed in seeds:
                row = run_one(
                    n,
                    nodes,
                    gpn,
                    seed,
                    solver=solver,
                    time_limit=time_limit,
                    target_slots=target_slots,
                    slot=slot,
                    objective=objective,
                )
                batch.append(row)
                if echo:
                    print(
                        f"{solver} n={n} {nodes}x{gpn} seed={seed}: {row['status']} obj={row['objective']:.0f} "
                        f"bound={row['bound']:.0f} gap={row['gap']:.3f} build={row['build_s']}s "
                        f"solve={row['solve_s']}s wall={row['wall_s']}s",
                        flush=True,
                    )
            rows += batch
            if stop_after_failures and not any(row["proven"] for row in batch):
                break
    return pd.DataFrame(rows)


def cross_check(
    specs: Sequence[tuple[int, int, int, int]],
    *,
    solvers: tuple[str, str] = ("highs", "cpsat"),
    time_limit: float = 60.0,
    target_slots: int | None = None,
    echo: bool = True,
) -> pd.DataFrame:
    """Solve each ``(n, nodes, gpus_per_node, seed)`` instance with both solvers; ``agree`` is true when
    both proved optimality with the same objective in slot units (the integer model's objective:
    two optimal schedules may differ in the float re-evaluation by a rounding, see
    ``formulation/discretize.py``), and every returned schedule passed the validator."""
    from solvers.api import solve

    rows: list[dict[str, Any]] = []
    for n, nodes, gpn, seed in specs:
        instance = generate_instance(n, nodes, gpn, seed)
        slot = choose_slot(instance, target_slots) if target_slots else choose_slot(instance)
        row: dict[str, Any] = {"n": n, "shape": f"{nodes}x{gpn}", "seed": seed, "slot": slot}
        slots_value: dict[str, float] = {}
        for solver in solvers:
            result = solve(instance, solver, time_limit=time_limit, slot=slot)
            total_arrival = sum(job.arrival for job in instance.jobs)
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
        row["agree"] = (
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


def largest_proven(table: pd.DataFrame) -> dict[str, int]:
    """Per shape: the largest ``n`` at which every seed was proven optimal (0 if none)."""
    result: dict[str, int] = {}
    for shape, group in table.groupby("shape"):
        proven = group.groupby("n")["proven"].all()
        sizes = [int(str(n)) for n, ok in proven.items() if ok]
        result[str(shape)] = max(sizes) if sizes else 0
    return result


def main(
    solver: Annotated[str, typer.Option(help="highs, cpsat or pyomo:NAME")] = "highs",
    jobs: Annotated[list[int], typer.Option(help="job counts")] = [4, 6, 8, 10, 12],  # noqa: B006
    shape: Annotated[list[str], typer.Option(help="cluster shapes NODESxGPUS")] = ["1x8"],  # noqa: B006
    seeds: Annotated[list[int], typer.Option(help="instance seeds")] = [0, 1, 2],  # noqa: B006
    time_limit: Annotated[float, typer.Option(help="seconds per solve")] = 60.0,
    target_slots: Annotated[int, typer.Option(help="choose Δ for about this many slots (0: library default)")] = 0,
    slot: Annotated[float, typer.Option(help="Δ in seconds (overrides --target-slots)")] = 0.0,
    objective: Annotated[str, typer.Option(help="jct or makespan")] = "jct",
    out: Annotated[Path | None, typer.Option(help="CSV file for the rows")] = None,
    cross_check_with: Annotated[
        str, typer.Option(help="instead: solve every instance with --solver and this solver and compare")
    ] = "",
) -> None:
    """Run the scaling benchmark and print the rows and the largest proven size per shape (or, with
    ``--cross-check-with cpsat``, the cross-check of two solvers' proven optima)."""
    if cross_check_with:
        specs = [(n, *_shape(s), seed) for n in jobs for s in shape for seed in seeds]
        checked = cross_check(
            [(n, nodes, gpn, seed) for n, nodes, gpn, seed in specs],
            solvers=(solver, cross_check_with),
            time_limit=time_limit,
            target_slots=target_slots or None,
        )
        print(
            f"both proven: {int(checked['both_proven'].sum())} of {len(checked)}; "
            f"agreeing: {int(checked['agree'].sum())}"
        )
        if out is not None:
            checked.to_csv(out, index=False)
        return
    table = run_scaling(
        jobs,
        [_shape(s) for s in shape],
        seeds,
        solver=solver,
        time_limit=time_limit,
        target_slots=target_slots or None,
        slot=slot or None,
        objective=objective,
    )
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table.to_string(index=False))
    print("largest n proven optimal for every seed:", largest_proven(table))
    overrun = table["overrun"].max() if len(table) else math.nan
    print(f"worst wall time against the limit: {overrun:+.1%}")
    if out is not None:
        table.to_csv(out, index=False)


if __name__ == "__main__":
    typer.run(main)
