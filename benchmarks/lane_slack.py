"""Where the lane LP's slack lies: the root against a schedule, with that schedule's starts and pairs given.

For each instance, a schedule (``--solver``, ``--time-limit``) and the lane LP
(:func:`formulation.lanes.lane_bound`, converged or stopped at ``--lp-time-limit``) four times over the
same windows: free (the root), with every job's start fixed at the schedule's, with sharing left only
to the pairs that share in the schedule, and with both. Then CP-SAT on the region of the fixed starts
(ends, GPUs, partners and modes free), cut off one slot below the schedule: ``proven`` says no schedule
with those starts is better, so what the LP still lacks with them is how it charges sharing, not where
jobs start::

    python -m benchmarks.lane_slack --jobs 16 24 --gpus 8 --seeds 3 --time-limit 60 \\
        --output results/lane_slack.csv

``--pricing fast progress`` adds a second row per instance (same schedule): every LP priced by the DP
that checks each job's progress inside its lane (:class:`formulation.lanes._ProgressPricing`, no cover
rows) instead of the default one, which charges a running job's losses by their dual. What is left
with both restrictions and this pricing is the master's charging, not the DP's.

``--one-gpu-jobs`` draws the same family with every job on one GPU: no gangs, so what the LP still
lacks there with the starts and pairs given is not how it charges a gang over its lanes.

``--gang-repeats`` (with the root) adds ``gang_repeat_share``, the share of the gangs' lane-units the
root's optimum covers by a gang's second entry in one lane (a gang time-sliced on one GPU), and
``elementary_ceiling``, the root's master re-solved without such lanes: the LP over lanes that hold
each gang once is at most this, so ``elementary_ceiling − root`` is the most elementary lanes can add.

``--lps ... gang_starts_fixed`` adds the LP with only the gangs' starts (jobs on two or more GPUs) fixed
at the schedule's, and ``--check-gang-starts`` the CP-SAT check on that larger region (columns
``gang_check``, ``best_given_gang_starts``, ``gang_check_seconds``). ``--tree-seconds S`` branches on the
ends for ``S`` seconds inside the region of the schedule's starts
(:func:`formulation.lane_tree.lane_tree_bound` with ``root_window`` and ``branching="ends"``, no leaf
checks; ``starts_fixed_tree`` and its status, nodes and seconds): how far branching closes what the LP
lacks once the starts are known, against the check's answer for the same region.

``--gang-runs`` also solves each LP of the default pricing with gang run columns
(:func:`formulation.gang_lanes.gang_lane_bound`, same restriction and time limit; columns ``NAME_gang``
with its status and seconds): how much of what the lanes lack a gang held whole in one column closes.
``--gang-paces`` does the same with gang paces (:func:`formulation.gang_paces.gang_pace_bound`, columns
``NAME_pace``): the gangs' slowest-worker rows without run columns. ``--mode-lanes selective`` (or
``on``; ``off``, the default, adds none) does the same with mode-aware lanes
(:func:`formulation.lanes.lane_bound` with ``modes``, columns ``NAME_modes``): each job held to one mode
for its whole run, the relaxation `solve` uses by default. Its values are named as `duetto solve
--lane-modes` names them (:data:`solvers.api.LANE_MODE_NAMES`).

One CSV row per instance and pricing: ``jobs, gpus, seed, one_gpu_jobs, slot, horizon, schedule_slots,
solver_bound_slots``; ``pairs`` (sharing in the schedule) and ``shareable_pairs``; ``check``
(``proven``, ``better`` with the value in ``best_given_starts``, or ``open``) and ``check_seconds``;
``pricing``; the four LP values (``root, starts_fixed, pairs_only, starts_and_pairs``; slots of total
JCT; ``--lps`` chooses which) with their status and seconds; and, with the root, the shares of its
slack (``schedule − root``) that fixing the starts, the pairs or both closes. Each restricted LP bounds
only the schedules that keep to its restriction; the shares are a diagnostic, not bounds. The schedule
comes from a solver with two workers and is not deterministic; the instances are
(``formulation.generator.generate_instance``).
Run it alone on the machine: the LPs and the check are timed.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from benchmarks.common import add_family_arguments, family_error, family_seeds
from formulation.discretize import SlottedProblem, discretize, evaluate
from formulation.errors import DuettoInputError
from formulation.gang_lanes import gang_lane_bound
from formulation.gang_paces import gang_pace_bound
from formulation.generator import DEFAULT_GPU_DEMAND_WEIGHTS, generate_instance
from formulation.instance import Instance
from formulation.lane_tree import lane_tree_bound, node_region
from formulation.lanes import LANE_PRICINGS, LaneBound, LaneData, Window, default_cut, lane_bound, restricted_data
from formulation.validator import validate
from solvers import SolverUnavailableError, solve
from solvers.api import LANE_MODE_NAMES, standalone_leaf_checker
from solvers.backends import check_available, resolve

LP_VALUES = ("root", "starts_fixed", "pairs_only", "starts_and_pairs", "gang_starts_fixed")
DEFAULT_LPS = LP_VALUES[:4]


def schedule_pairs(problem: SlottedProblem) -> list[tuple[str, str]]:
    """The pairs of job ids that share a GPU at some slot in the problem's upper-bound solution."""
    solution = problem.upper_bound
    if solution is None:
        return []
    ends = evaluate(problem, dict(solution), exact=True)
    items = sorted(solution.items())
    return [
        (a_id, b_id)
        for i, (a_id, a) in enumerate(items)
        for b_id, b in items[i + 1 :]
        if set(a.gpus) & set(b.gpus) and a.start < ends[b_id] and b.start < ends[a_id]
    ]


def schedule_starts(problem: SlottedProblem, *, gangs_only: bool = False) -> dict[str, int]:
    """The upper-bound solution's start slot of every job (``gangs_only``: of the jobs on two or more
    GPUs)."""
    assert problem.upper_bound is not None
    return {
        job_id: a.start
        for job_id, a in problem.upper_bound.items()
        if not gangs_only or problem.jobs[problem.index[job_id]].num_gpus > 1
    }


def starts_window(problem: SlottedProblem, starts: dict[str, int]) -> tuple[LaneData, Window]:
    """The lane data and the root window with the given jobs' starts fixed."""
    data, window = restricted_data(problem, default_cut(problem), starts)
    return data, window if window is not None else data.window()


def _check_starts(
    instance: Instance, problem: SlottedProblem, seconds: float, *, gangs_only: bool = False
) -> tuple[str, float]:
    """CP-SAT on the region where every job (``gangs_only``: every gang) starts where the upper-bound
    solution starts it, asked for a schedule one slot better: ``("proven", value)`` if none exists,
    ``("better", its value)``, or ``("open", nan)``."""
    assert problem.upper_bound is not None and problem.upper_bound_value is not None
    value = float(problem.upper_bound_value)
    data, window = starts_window(problem, schedule_starts(problem, gangs_only=gangs_only))
    region = node_region(window, data)
    checker = standalone_leaf_checker(instance, problem, seconds + 30)
    try:
        verdict = checker(region, math.ceil(value - 1e-9) - 1, seconds)
    finally:
        checker.close()
    if verdict.status == "infeasible":
        return "proven", value
    if verdict.status == "optimal":
        return "better", float(verdict.value)
    return "open", math.nan


def measure(
    jobs: Sequence[int],
    gpus: int,
    gpus_per_node: int,
    seeds: Sequence[int],
    *,
    solver: str = "cpsat",
    time_limit: float = 60.0,
    lp_time_limit: float = 300.0,
    check_seconds: float = 120.0,
    pricings: Sequence[str] = ("fast",),
    lps: Sequence[str] = DEFAULT_LPS,
    one_gpu_jobs: bool = False,
    gang_repeats: bool = False,
    tree_seconds: float = 0.0,
    check_gang_starts: bool = False,
    gang_runs: bool = False,
    gang_paces: bool = False,
    mode_lanes: bool | Literal["selective"] = False,
    progress: bool = True,
) -> pd.DataFrame:
    """One row per instance and pricing (module docstring); every schedule is validated first."""
    if not set(pricings) <= set(LANE_PRICINGS) or not set(lps) <= set(LP_VALUES):
        raise ValueError(f"pricings must be among {LANE_PRICINGS} and lps among {LP_VALUES}, got {pricings!r}, {lps!r}")
    # the gang variants of each LP (default pricing only): column suffix -> (label, bound function)
    variants: dict[str, tuple[str, Callable[..., LaneBound]]] = {}
    if gang_runs:
        variants["gang"] = ("gang runs", gang_lane_bound)
    if gang_paces:
        variants["pace"] = ("gang paces", gang_pace_bound)
    if mode_lanes:
        variants["modes"] = ("mode-aware lanes", functools.partial(lane_bound, modes=mode_lanes))
    rows: list[dict[str, Any]] = []
    for n in jobs:
        for seed in seeds:
            demand = {1: 1.0} if one_gpu_jobs else DEFAULT_GPU_DEMAND_WEIGHTS
            instance = generate_instance(
                n, max(1, gpus // gpus_per_node), gpus_per_node, seed, gpu_demand_weights=demand
            )
            result = solve(instance, solver, time_limit=time_limit)
            if result.schedule is None or not validate(instance, result.schedule).ok:
                raise RuntimeError(f"{solver} gave no valid schedule for n={n} seed={seed}")
            problem = discretize(instance, result.stats["problem"]["slot_seconds"])
            problem = problem.with_upper_bound(result.schedule)
            assert problem.upper_bound is not None
            schedule = float(problem.upper_bound_value or math.nan)
            starts = schedule_starts(problem)
            gang_starts = schedule_starts(problem, gangs_only=True)
            pairs = schedule_pairs(problem)
            base: dict[str, Any] = {
                "jobs": n,
                "gpus": gpus,
                "seed": seed,
                "one_gpu_jobs": one_gpu_jobs,
                "slot": problem.slot,
                "horizon": problem.horizon,
                "schedule_slots": schedule,
                "solver_bound_slots": result.stats["bound_slots"],
                "pairs": len(pairs),
                "gangs": len(gang_starts),
            }
            data = LaneData.from_problem(problem, default_cut(problem))
            base["shareable_pairs"] = int(data.shareable.sum()) // 2
            if check_seconds > 0:
                began = time.perf_counter()
                base["check"], base["best_given_starts"] = _check_starts(instance, problem, check_seconds)
                base["check_seconds"] = round(time.perf_counter() - began, 2)
            else:
                base["check"], base["best_given_starts"], base["check_seconds"] = "not run", math.nan, 0.0
            if check_gang_starts and check_seconds > 0:
                began = time.perf_counter()
                base["gang_check"], base["best_given_gang_starts"] = _check_starts(
                    instance, problem, check_seconds, gangs_only=True
                )
                base["gang_check_seconds"] = round(time.perf_counter() - began, 2)
            if tree_seconds > 0:
                # branch-and-bound on the ends inside the region of the schedule's starts (no leaf checks)
                _, window = starts_window(problem, starts)
                tree = lane_tree_bound(problem, time_limit=tree_seconds, branching="ends", root_window=window)
                base["starts_fixed_tree"] = tree.value
                base["starts_fixed_tree_status"] = tree.status
                base["starts_fixed_tree_nodes"] = tree.nodes
                base["starts_fixed_tree_seconds"] = round(tree.seconds, 2)
            restrictions: dict[str, dict[str, Any]] = {
                "root": {},
                "starts_fixed": {"fixed_starts": starts},
                "pairs_only": {"sharing_pairs": pairs},
                "starts_and_pairs": {"fixed_starts": starts, "sharing_pairs": pairs},
                "gang_starts_fixed": {"fixed_starts": gang_starts},
            }
            # every pricing against the same schedule: the schedules differ from solve to solve
            for kind in pricings:
                row = {**base, "pricing": kind}
                for name in lps:
                    restriction = restrictions[name]
                    repeats = gang_repeats and name == "root"
                    lp = lane_bound(
                        problem, time_limit=lp_time_limit, pricing=kind, gang_repeats=repeats, **restriction
                    )
                    if repeats:
                        row["gang_repeat_share"] = lp.gang_repeat_share
                        row["elementary_ceiling"] = lp.elementary_ceiling
                    row[name] = lp.value
                    row[f"{name}_status"] = lp.status
                    row[f"{name}_seconds"] = round(lp.seconds, 2)
                    for suffix, (_, variant) in (variants if kind == "fast" else {}).items():
                        bound = variant(problem, time_limit=lp_time_limit, **restriction)
                        row[f"{name}_{suffix}"] = bound.value
                        row[f"{name}_{suffix}_status"] = bound.status
                        row[f"{name}_{suffix}_seconds"] = round(bound.seconds, 2)
                if "root" in lps:
                    slack = schedule - row["root"]
                    for name in [other for other in lps if other != "root"]:
                        row[f"{name}_closes"] = (row[name] - row["root"]) / slack if slack > 0 else math.nan
                rows.append(row)
                if progress:
                    values = " ".join(f"{name} {row[name]:.1f}" for name in lps)
                    for suffix, (label, _) in (variants if kind == "fast" else {}).items():
                        shown = " ".join(f"{name} {row[f'{name}_{suffix}']:.1f}" for name in lps)
                        values += f" | with {label}: {shown}"
                    print(
                        f"n={n} seed={seed} {kind}: schedule {schedule:.0f}; {values}; check {row['check']}",
                        file=sys.stderr,
                    )
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_family_arguments(parser, [16, 24])
    parser.add_argument("--solver", default="cpsat")
    parser.add_argument("--time-limit", type=float, default=60.0, help="the solver's, for the schedule")
    parser.add_argument("--lp-time-limit", type=float, default=300.0, help="each of the four lane LPs'")
    parser.add_argument("--check-seconds", type=float, default=120.0, help="CP-SAT on the fixed starts (0: none)")
    parser.add_argument(
        "--pricing",
        choices=LANE_PRICINGS,
        nargs="+",
        default=["fast"],
        help="the lane DP of the LPs, one row each: 'progress' checks each job's progress in its lane (no cover rows)",
    )
    parser.add_argument(
        "--lps",
        choices=LP_VALUES,
        nargs="+",
        default=list(DEFAULT_LPS),
        help="which LPs to solve (default the first four; gang_starts_fixed fixes only the gangs' starts)",
    )
    parser.add_argument(
        "--one-gpu-jobs", action="store_true", help="every job takes one GPU (no gangs; the family otherwise the same)"
    )
    parser.add_argument(
        "--gang-repeats",
        action="store_true",
        help="with the root: how much it time-slices gangs, and the most lanes holding each gang once could add",
    )
    parser.add_argument(
        "--tree-seconds",
        type=float,
        default=0.0,
        help="also branch on the ends for this long inside the region of the schedule's starts (0: not)",
    )
    parser.add_argument(
        "--check-gang-starts",
        action="store_true",
        help="also run the CP-SAT check on the region where only the gangs' starts are the schedule's",
    )
    parser.add_argument(
        "--gang-runs",
        action="store_true",
        help="also each LP with gang run columns (formulation.gang_lanes; columns NAME_gang), same time limit",
    )
    parser.add_argument(
        "--gang-paces",
        action="store_true",
        help="also each LP with gang paces (formulation.gang_paces; columns NAME_pace), same time limit",
    )
    parser.add_argument(
        "--mode-lanes",
        choices=[name for name in LANE_MODE_NAMES if name != "auto"],  # the names `duetto solve` gives them
        default="off",
        help="also each LP with mode-aware lanes (each job in one mode; columns NAME_modes), same time limit",
    )
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.time_limit <= 0 or args.lp_time_limit <= 0 or args.check_seconds < 0 or args.tree_seconds < 0:
        print(
            "error: --time-limit and --lp-time-limit must be positive, --check-seconds and --tree-seconds at least 0",
            file=sys.stderr,
        )
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
            solver=args.solver,
            time_limit=args.time_limit,
            lp_time_limit=args.lp_time_limit,
            check_seconds=args.check_seconds,
            pricings=args.pricing,
            lps=[name for name in LP_VALUES if name in args.lps],
            one_gpu_jobs=args.one_gpu_jobs,
            gang_repeats=args.gang_repeats,
            tree_seconds=args.tree_seconds,
            check_gang_starts=args.check_gang_starts,
            gang_runs=args.gang_runs,
            gang_paces=args.gang_paces,
            mode_lanes="selective" if args.mode_lanes == "selective" else bool(LANE_MODE_NAMES[args.mode_lanes]),
        )
    except (DuettoInputError, SolverUnavailableError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.output, index=False)
    shown = ["jobs", "seed", "pricing", "schedule_slots", *(name for name in LP_VALUES if name in frame.columns)]
    shown += [name for name in ("gang_repeat_share", "elementary_ceiling") if name in frame.columns]
    shown += [name for name in ("starts_fixed_tree", "starts_fixed_tree_nodes") if name in frame.columns]
    shown += [
        f"{name}_{kind}"
        for kind in ("gang", "pace", "modes")
        for name in LP_VALUES
        if f"{name}_{kind}" in frame.columns
    ]
    shown += ["pairs", "check", "best_given_starts"]
    shown += [name for name in ("gang_check", "best_given_gang_starts") if name in frame.columns]
    print(frame[shown].to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
