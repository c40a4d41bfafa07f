"""The oracle against the issue's performance targets, in one command (docs/oracle.md, "Against the
issue's targets, all at once").

Each target is a set of solves of the standard random family on one 8-GPU node (``C = 2``, the default
slot rule) with one backend (``bnp`` by default), a time limit (60 s) and two threads, and a goal::

    python -m benchmarks.oracle_targets --output results/oracle_targets.csv

    16     16 jobs, all at 0, seeds 0-9: proven optimal on at least 9
    24     24 jobs, all at 0, seeds 0-2: every proven gap at most 3 %
    50     50 jobs, all at 0, seeds 0-2: every proven gap at most 10 %
    poisson24  24 jobs, Poisson arrivals at load 1, seeds 0-4: every one proven optimal

(the fifth target, the certified gap of SJF-BSBF on Pollux workloads-1.5, is ``duetto bound`` /
``benchmarks.trace_gap``). ``--targets`` picks some; ``--jobs`` and ``--seeds`` replace every chosen
target's job count and seed count (a small rehearsal of the same code path, as the tests do; a goal of
so many proven is then capped at the seeds). The solves
are :func:`benchmarks.oracle_scaling.run_one`'s, one CSV row each with the target's key; the summary gives
per target the solves proven, the gaps, their median and maximum, the largest wall time and whether the
goal is met, and a line in the docs table's form. About 20 minutes for all four on two cores (the
time limit each, less where a solve proves); run it alone on the machine: timings are wall-clock.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.oracle_scaling import COLUMNS, Arrivals, run_one
from formulation.errors import DuettoInputError
from solvers import SolverUnavailableError
from solvers.api import LANE_MODE_NAMES
from solvers.backends import check_available, resolve


@dataclass(frozen=True)
class Target:
    """One performance target: the instances (``jobs`` jobs, seeds ``0 .. seeds − 1``, ``arrivals``) and
    its goal, at least ``proven_at_least`` solves proven optimal or every gap at most ``max_gap``."""

    key: str
    label: str
    jobs: int
    seeds: int
    arrivals: Arrivals
    proven_at_least: int | None = None
    max_gap: float | None = None

    def met(self, proven: int, gaps: Sequence[float]) -> bool:
        """Whether ``proven`` solves proven and these ``gaps`` (fractions; ``nan``: no bound) meet the goal."""
        if self.proven_at_least is not None and proven < self.proven_at_least:
            return False
        if self.max_gap is not None:
            return len(gaps) > 0 and all(math.isfinite(g) and g <= self.max_gap + 1e-12 for g in gaps)
        return True


TARGETS: tuple[Target, ...] = (
    Target("16", "16 jobs proven on 9 of 10 seeds", 16, 10, "zero", proven_at_least=9),
    Target("24", "24 jobs, gap <= 3 %", 24, 3, "zero", max_gap=0.03),
    Target("50", "50 jobs, gap <= 10 %", 50, 3, "zero", max_gap=0.10),
    Target("poisson24", "24 jobs with Poisson arrivals proven", 24, 5, "poisson", proven_at_least=5),
)
"""The issue's targets at ``C = 2`` on one 8-GPU node (the trace bound's is not a set of solves)."""

NODES, GPUS_PER_NODE = 1, 8


def run_targets(
    targets: Sequence[Target],
    *,
    solver: str = "bnp",
    time_limit: float = 60.0,
    threads: int = 2,
    output: Path | None = None,
    echo: bool = True,
    lane_modes: bool | str | None = None,
) -> pd.DataFrame:
    """Solve every target's instances, target by target; one row per solve.

    Parameters
    ----------
    targets
        The targets (:data:`TARGETS`, or variants with fewer jobs or seeds).
    solver, time_limit, threads
        As for :func:`benchmarks.oracle_scaling.run_one`.
    output
        When given, the CSV is rewritten after every solve (partial results survive an interruption).
    echo
        Print a line per solve.
    lane_modes
        Mode-aware lane bounds (``options["lane_modes"]``); ``None``: the solve's default.

    Returns
    -------
    pandas.DataFrame
        Columns ``target`` and :data:`benchmarks.oracle_scaling.COLUMNS`.
    """
    rows: list[dict[str, Any]] = []
    for target in targets:
        for seed in range(target.seeds):
            row = run_one(
                solver,
                target.jobs,
                NODES,
                GPUS_PER_NODE,
                seed,
                time_limit=time_limit,
                arrivals=target.arrivals,
                threads=threads,
                lane_modes=lane_modes,
            )
            rows.append({"target": target.key, **row})
            if echo:
                gap = row["gap"]
                shown = "proven" if row["proven"] else ("no bound" if not math.isfinite(gap) else f"gap {gap:.2%}")
                print(f"{target.key:9s} seed {seed}: {shown}, {row['wall_seconds']:.1f} s", flush=True)
            if output is not None:
                pd.DataFrame(rows, columns=["target", *COLUMNS]).to_csv(output, index=False)
    return pd.DataFrame(rows, columns=["target", *COLUMNS])


def summarize_targets(frame: pd.DataFrame, targets: Sequence[Target]) -> pd.DataFrame:
    """Per target: solves, proven, every gap (%), their median and maximum, the largest wall time, whether
    every schedule was valid, whether the goal is met, and ``now``, the docs table's cell."""
    rows = []
    for target in targets:
        part = frame[frame["target"].astype(str) == target.key]
        if part.empty:
            continue
        proven = int(part["proven"].astype(bool).sum())
        gaps = [float(g) for g in part["gap"]]
        finite = [g for g in gaps if math.isfinite(g)]
        shown = " / ".join("-" if not math.isfinite(g) else f"{100 * g:.2f}" for g in gaps)
        median = statistics.median(finite) if finite else math.nan
        now = f"{shown} %" if target.proven_at_least is None else f"{proven} of {len(part)} proven; gaps {shown} %"
        if finite:
            now += f", median {100 * median:.1f} %"
        rows.append(
            {
                "target": target.key,
                "goal": target.label,
                "solves": len(part),
                "proven": proven,
                "gaps_percent": shown,
                "median_gap": median,
                "max_gap": max(finite) if finite else math.nan,
                "max_wall_seconds": float(part["wall_seconds"].max()),
                "all_valid": bool(part["valid"].fillna(False).astype(bool).all()),
                "met": target.met(proven, gaps),
                "now": now,
            }
        )
    return pd.DataFrame(rows)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    keys = [target.key for target in TARGETS]
    parser.add_argument("--targets", nargs="+", choices=keys, default=keys, help="which targets (default: all)")
    parser.add_argument("--solver", default="bnp", help="the backend (default bnp)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    parser.add_argument("--threads", type=int, default=2, help="solver threads / CP-SAT workers")
    parser.add_argument("--jobs", type=int, default=None, help="replace every chosen target's job count")
    parser.add_argument("--seeds", type=int, default=None, help="replace every chosen target's seed count")
    parser.add_argument(
        "--lane-modes",
        choices=tuple(LANE_MODE_NAMES),
        default=None,
        help="mode-aware lane bounds on, off, only for the jobs the root's lanes need, or the solve's own "
        "choice per backend (auto; default: the solve's default)",
    )
    parser.add_argument("--output", type=Path, default=Path("results/oracle_targets.csv"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen targets and print their summary.

    Parameters
    ----------
    argv
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 for bad arguments or a solver that cannot run.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    for option, value in (("--jobs", args.jobs), ("--seeds", args.seeds), ("--threads", args.threads)):
        if value is not None and value < 1:
            parser.error(f"{option} must be at least 1, got {value}")
    if not args.time_limit > 0:
        parser.error(f"--time-limit must be positive, got {args.time_limit}")
    try:
        check_available(resolve(args.solver))
    except (DuettoInputError, SolverUnavailableError) as error:
        parser.error(f"--solver: {error}")
    chosen = [target for target in TARGETS if target.key in args.targets]
    if args.jobs is not None:
        chosen = [replace(target, jobs=args.jobs) for target in chosen]
    if args.seeds is not None:
        chosen = [
            replace(
                target,
                seeds=args.seeds,
                proven_at_least=None if target.proven_at_least is None else min(target.proven_at_least, args.seeds),
            )
            for target in chosen
        ]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    frame = run_targets(
        chosen,
        solver=args.solver,
        time_limit=args.time_limit,
        threads=args.threads,
        output=args.output,
        lane_modes=None if args.lane_modes is None else LANE_MODE_NAMES[args.lane_modes],
    )
    frame.to_csv(args.output, index=False)
    summary = summarize_targets(frame, chosen)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 80):
        print(summary.drop(columns=["now"]).to_string(index=False))
    for _, row in summary.iterrows():
        print(f"| {row['goal']} | {row['now']} |")
    print(f"largest wall time against the limit: {frame['wall_seconds'].max() / args.time_limit - 1:+.1%}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
