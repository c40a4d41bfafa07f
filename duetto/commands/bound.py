"""``duetto bound``: a proven lower bound on total JCT for a whole trace, and schedules' certified gaps."""

from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from duetto.cli_support import console, fail, print_json, user_errors

_TRACE_KINDS = ("muri", "tiresias", "gavel", "shockwave", "pollux")
HOUR = 3600.0


def _hours(seconds: float) -> str:
    return "-" if not math.isfinite(seconds) else f"{seconds / HOUR:.3f} h"


def register(app: typer.Typer) -> None:
    @app.command()
    @user_errors
    def bound(
        instance_path: Annotated[Path, typer.Argument(help="instance JSON, or a public trace with --trace")],
        schedule: Annotated[
            list[Path] | None,
            typer.Option("--schedule", "-s", help="schedule JSON to certify (repeatable): its gap to the bound"),
        ] = None,
        trace: Annotated[
            str | None,
            typer.Option(help=f"read the input as a public trace of this format ({', '.join(_TRACE_KINDS)})"),
        ] = None,
        limit: Annotated[int | None, typer.Option(help="with --trace: the first N jobs by arrival")] = None,
        capacity: Annotated[
            int | None,
            typer.Option(help="jobs per GPU at most (default: the instance's, or a schedule's if larger)"),
        ] = None,
        time_limit: Annotated[float, typer.Option("--time-limit", "-t", help="seconds")] = 60.0,
        threads: Annotated[int, typer.Option(help="HiGHS threads")] = 1,
        json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """Prove a lower bound on the total (and average) JCT of any schedule of a trace, preemptive or
        not; with --schedule, each schedule's certified gap to it (docs/oracle.md)."""
        from dataclasses import replace

        from formulation.io import load_instance, load_schedule
        from formulation.metrics import compute_metrics
        from formulation.trace_bound import trace_lower_bound
        from formulation.validator import validate

        if not time_limit > 0:
            fail("--time-limit must be > 0")
        if threads < 1:
            fail("--threads must be >= 1")
        if limit is not None and (trace is None or limit < 1):
            fail("--limit needs --trace and must be >= 1")
        if capacity is not None and capacity < 1:
            fail("--capacity must be >= 1")
        if trace is not None:
            from formulation.traces import load_trace

            # the bound is proven under SPEC.md's progress rule: a Muri trace is read with it (not Muri's rule)
            loader: dict[str, Any] = {"limit": limit} if limit else {}
            loader |= {"semantics": "duetto"} if trace == "muri" else {}
            instance = load_trace(trace, instance_path, **loader)
        else:
            instance = load_instance(instance_path)
        schedules = [(path, load_schedule(path)) for path in schedule or []]
        # each schedule is valid for the capacity it was made for (the validator reads it from the
        # schedule); the bound must allow the largest of them, or --capacity if larger
        wanted = max([capacity or instance.cluster.capacity, *[plan.capacity or 0 for _, plan in schedules]])
        if wanted != instance.cluster.capacity:
            instance = instance.replace(cluster=replace(instance.cluster, capacity=wanted))
        reports = []
        for path, plan in schedules:
            report = validate(instance, plan)
            if not report.ok:
                first = report.violations[0]
                fail(
                    f"{path}: not a valid schedule of this instance ({len(report.violations)} violations; "
                    f"first: {first.rule}: {first.message}); only valid schedules can be certified",
                    code=1,
                )
            reports.append((path, compute_metrics(instance, report)))
        with console.status("proving the bound", spinner="dots") if not json_output else nullcontext():
            result = trace_lower_bound(instance, time_limit=time_limit, threads=threads)
        certified: list[dict[str, Any]] = [
            {
                "schedule": str(path),
                "jct_avg": float(metrics["jct_avg"]),
                "gap_pct": (float(metrics["jct_avg"]) - result.average_jct) / result.average_jct * 100
                if result.average_jct > 0
                else math.nan,
            }
            for path, metrics in reports
        ]
        if json_output:
            print_json({**result.to_dict(), "capacity": instance.cluster.capacity, "schedules": certified})
            return
        table = Table(title=f"lower bound on JCT: {instance.name or instance_path.name}")
        table.add_column("")
        table.add_column("value", justify="right")
        table.add_row("jobs", str(result.num_jobs))
        table.add_row("capacity C", str(instance.cluster.capacity))
        table.add_row("average JCT at least", _hours(result.average_jct))
        table.add_row("total JCT at least", _hours(result.total_jct))
        table.add_row(
            "from",
            f"{result.method} (LP: {result.lp_status}, {result.intervals} intervals, "
            f"{result.cut_rounds} rounds of pairing cuts)",
        )
        for name, value in result.components.items():
            table.add_row(f"  {name.replace('_', ' ')}", _hours(value / max(1, result.num_jobs)))
        table.add_row("seconds", f"{result.seconds:.1f}")
        console.print(table)
        if certified:
            gaps = Table(title="certified gaps (average JCT against the bound)")
            for column in ("schedule", "average JCT", "gap"):
                gaps.add_column(column)
            for row in certified:
                gaps.add_row(str(row["schedule"]), _hours(row["jct_avg"]), f"{row['gap_pct']:.1f} %")
            console.print(gaps)
