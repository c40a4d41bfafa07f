"""Windows from the lane LP's duals: how much narrower, and whether CP-SAT proves faster in them.

For each instance: a schedule (``--solver``, ``--time-limit``), the lane LP from it
(:func:`formulation.lanes.lane_end_windows`, ``--lp-time-limit``) and the latest end slot it allows each
job for schedules at most as good as that one; then CP-SAT (``solve(..., "cpsat")`` from that schedule,
with neither relaxation beside it, ``--check-seconds`` each) once in the problem's own windows and once
with those ends added (``options={"windows": ...}``), for each ``--cpsat-seeds``::

    python -m benchmarks.lane_windows --jobs 24 --seeds 3 --arrivals poisson --cpsat-seeds 0 1 2 \\
        --check-seconds 120 --output results/lane_windows.csv

One CSV row per instance and CP-SAT seed: ``jobs, gpus, seed, arrivals, slot, schedule_slots``; the lane
LP's ``lp_bound``, ``lp_status``, ``lp_seconds``; ``window_slots`` and ``narrow_window_slots``
(``Σ_j latest end − release`` before and after), ``horizon`` and ``narrow_horizon``; ``cpsat_seed``; and
per run (``own`` windows / ``narrow`` ones) its ``_status`` (``optimal`` when proven), ``_bound_slots``,
``_objective_slots`` and ``_seconds`` (wall). Every schedule is validated. CP-SAT with two workers is
not deterministic: run several seeds. Run it alone on the machine: the runs are timed. Measured in
docs/oracle-measurements.md, "Windows from the lane LP's duals".
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from benchmarks.common import add_family_arguments, family_error, family_seeds
from formulation.discretize import discretize
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.instance import Instance
from formulation.lanes import lane_end_windows
from formulation.schedule import Schedule
from formulation.validator import validate
from solvers import SolverUnavailableError, solve
from solvers.backends import check_available, resolve


def _cpsat_run(
    instance: Instance, schedule: Schedule, slot: float, seconds: float, seed: int, latest: list[int] | None
) -> dict[str, Any]:
    """CP-SAT alone from ``schedule``, in the problem's windows or with the latest ends ``latest``."""
    options: dict[str, Any] = {"seed": seed}
    if latest is not None:
        options["windows"] = [(None, None, None, end) for end in latest]
    began = time.perf_counter()
    result = solve(
        instance,
        "cpsat",
        time_limit=seconds,
        slot=slot,
        warm_start_schedule=schedule,
        policy_warm_start=False,
        local_search=False,
        coupled_bound=False,
        lane_bound=False,
        options=options,
    )
    wall = time.perf_counter() - began
    if result.schedule is None or not validate(instance, result.schedule).ok:
        raise RuntimeError("CP-SAT returned no valid schedule")
    return {
        "status": str(result.status.value),
        "bound_slots": result.stats.get("bound_slots", math.nan),
        "objective_slots": result.stats.get("objective_slots", math.nan),
        "seconds": round(wall, 2),
    }


def measure(
    jobs: Sequence[int],
    gpus: int,
    gpus_per_node: int,
    seeds: Sequence[int],
    *,
    arrivals: Literal["zero", "poisson"] = "zero",
    solver: str = "cpsat",
    time_limit: float = 60.0,
    lp_time_limit: float = 120.0,
    check_seconds: float = 120.0,
    cpsat_seeds: Sequence[int] = (0,),
    progress: bool = True,
) -> pd.DataFrame:
    """One row per instance and CP-SAT seed (module docstring)."""
    rows: list[dict[str, Any]] = []
    for n in jobs:
        for seed in seeds:
            instance = generate_instance(n, max(1, gpus // gpus_per_node), gpus_per_node, seed, arrivals=arrivals)
            result = solve(instance, solver, time_limit=time_limit)
            if result.schedule is None or not validate(instance, result.schedule).ok:
                raise RuntimeError(f"{solver} gave no valid schedule for n={n} seed={seed}")
            slot = float(result.stats["problem"]["slot_seconds"])
            problem = discretize(instance, slot).with_upper_bound(result.schedule)
            bound, latest = lane_end_windows(problem, time_limit=lp_time_limit)
            base: dict[str, Any] = {
                "jobs": n,
                "gpus": gpus,
                "seed": seed,
                "arrivals": arrivals,
                "slot": slot,
                "schedule_slots": problem.upper_bound_value,
                "lp_bound": bound.value,
                "lp_status": bound.status,
                "lp_seconds": round(bound.seconds, 2),
                "window_slots": sum(job.latest_end - job.release for job in problem.jobs),
                "narrow_window_slots": sum(end - job.release for job, end in zip(problem.jobs, latest, strict=True)),
                "horizon": problem.horizon,
                "narrow_horizon": max(latest, default=0),
            }
            for cpsat_seed in cpsat_seeds:
                row = {**base, "cpsat_seed": cpsat_seed}
                for name, ends in (("own", None), ("narrow", latest)):
                    run = _cpsat_run(instance, result.schedule, slot, check_seconds, cpsat_seed, ends)
                    row.update({f"{name}_{key}": value for key, value in run.items()})
                rows.append(row)
                if progress:
                    own = f"{row['own_status']} in {row['own_seconds']} s (bound {row['own_bound_slots']})"
                    narrow = f"{row['narrow_status']} in {row['narrow_seconds']} s (bound {row['narrow_bound_slots']})"
                    print(
                        f"n={n} seed={seed} {arrivals} (CP-SAT seed {cpsat_seed}): schedule {row['schedule_slots']}, "
                        f"lane LP {row['lp_bound']:.1f} in {row['lp_seconds']} s; window slots "
                        f"{row['window_slots']} -> {row['narrow_window_slots']}; CP-SAT {own} -> {narrow}",
                        file=sys.stderr,
                    )
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_family_arguments(parser, [24])
    parser.add_argument("--arrivals", choices=["zero", "poisson"], default="poisson")
    parser.add_argument("--solver", default="cpsat")
    parser.add_argument("--time-limit", type=float, default=60.0, help="the solver's, for the schedule")
    parser.add_argument("--lp-time-limit", type=float, default=120.0, help="the lane LP's")
    parser.add_argument("--check-seconds", type=float, default=120.0, help="each CP-SAT run's")
    parser.add_argument("--cpsat-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.time_limit <= 0 or args.lp_time_limit <= 0 or args.check_seconds <= 0:
        print("error: --time-limit, --lp-time-limit and --check-seconds must be positive", file=sys.stderr)
        return 2
    if (problem := family_error(args)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        check_available(resolve(args.solver))
        frame = measure(
            args.jobs,
            args.gpus,
            args.gpus_per_node,
            family_seeds(args),
            arrivals=args.arrivals,
            solver=args.solver,
            time_limit=args.time_limit,
            lp_time_limit=args.lp_time_limit,
            check_seconds=args.check_seconds,
            cpsat_seeds=args.cpsat_seeds,
        )
    except (DuettoInputError, SolverUnavailableError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.output, index=False)
    shown = ["jobs", "seed", "cpsat_seed", "schedule_slots", "lp_bound", "lp_seconds", "window_slots"]
    shown += ["narrow_window_slots", "own_status", "own_seconds", "own_bound_slots"]
    shown += ["narrow_status", "narrow_seconds", "narrow_bound_slots"]
    print(frame[shown].to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
