"""Instance commands: generate, import, inspect, validate, schema."""

from __future__ import annotations

import dataclasses
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from duetto.cli_support import console, fail, print_json, user_errors
from duetto.commands.trace_options import (
    ClusterSpecOption,
    DurationFromOption,
    ExperimentOption,
    MemoryOption,
    MissingThroughputOption,
    ProfilesOption,
    SemanticsOption,
    SettingsOption,
    ThroughputsOption,
    WorkerTypeOption,
    trace_loader_options,
)
from formulation.errors import DuettoInputError


class ArrivalMode(StrEnum):
    zero = "zero"
    poisson = "poisson"


class TraceKind(StrEnum):
    muri = "muri"
    tiresias = "tiresias"
    gavel = "gavel"
    shockwave = "shockwave"
    pollux = "pollux"


INTERFERENCE_HELP = (
    "interference model: default (the loader's) | constant:X | gavel[:WORKER] | predicted[:WORKER] | "
    "table:FILE (a measured pair table: victim,other,ratio; isolated/co-located throughputs; Lucid's)"
)


def with_interference(instance: Any, spec: str) -> Any:
    """``instance`` with the interference model ``spec`` names (``default``: unchanged)."""
    from benchmarks.replay import interference_from_spec

    model = interference_from_spec(spec, instance)
    return instance if model is None else instance.replace(interference=model)


class SchemaKind(StrEnum):
    instance = "instance"
    schedule = "schedule"


def _parse_range(text: str, name: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise DuettoInputError(f"expected 'LOW,HIGH', got '{text}'", field=name) from None
    return low, high


def instance_summary(instance: Any) -> dict[str, Any]:
    """Key facts about an instance, for ``inspect`` and the demo."""
    from formulation.interference import describe

    durations = [instance.isolated_duration(job) for job in instance.jobs]
    demands: dict[int, int] = {}
    for job in instance.jobs:
        demands[job.num_gpus] = demands.get(job.num_gpus, 0) + 1
    arrivals = [job.arrival for job in instance.jobs]
    cluster = instance.cluster
    return {
        "name": instance.name,
        "nodes": cluster.nodes,
        "gpus_per_node": cluster.gpus_per_node,
        "gpus": cluster.num_gpus,
        "gpu_memory_gib": cluster.gpu_memory_gib,
        "capacity": cluster.capacity,
        "jobs": len(instance.jobs),
        "profiles": len(instance.profiles),
        "interference": describe(instance.interference),
        "gpu_demand": {str(k): v for k, v in sorted(demands.items())},
        "arrival_first": min(arrivals) if arrivals else math.nan,
        "arrival_last": max(arrivals) if arrivals else math.nan,
        "duration_min": min(durations) if durations else math.nan,
        "duration_median": sorted(durations)[len(durations) // 2] if durations else math.nan,
        "duration_max": max(durations) if durations else math.nan,
        "gpu_seconds": sum(d * j.num_gpus for d, j in zip(durations, instance.jobs, strict=True)),
    }


SUMMARY_UNITS = {
    "gpu_memory_gib": "GiB",
    "capacity": "jobs per GPU",
    "arrival_first": "s",
    "arrival_last": "s",
    "duration_min": "s",
    "duration_median": "s",
    "duration_max": "s",
    "gpu_seconds": "GPU·s",
}
"""Unit of each number of :func:`instance_summary` (the JSON output keeps plain numbers)."""


def _with_unit(key: str, value: Any) -> str:
    unit = SUMMARY_UNITS.get(key, "")
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        text = f"{value:,.2f}" if unit not in ("s", "GPU·s") or abs(value) < 3600 else f"{value:,.0f}"
        if unit in ("s", "GPU·s") and abs(value) >= 3600:
            return f"{text} {unit} ({value / 3600:,.1f} {'h' if unit == 's' else 'GPU·h'})"
        return f"{text} {unit}".rstrip()
    return f"{value} {unit}".rstrip()


def _print_summary(summary: dict[str, Any]) -> None:
    table = Table(title=f"instance {summary['name']}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for key, value in summary.items():
        if key == "gpu_demand":
            continue  # its own table below
        table.add_row(key.removesuffix("_gib").replace("_", " "), _with_unit(key, value))
    console.print(table)
    demand = Table(title="GPU demand")
    demand.add_column("GPUs per job", justify="right")
    demand.add_column("jobs", justify="right")
    demand.add_column("share", justify="right")
    total = sum(summary["gpu_demand"].values()) or 1
    for gpus, count in summary["gpu_demand"].items():
        demand.add_row(str(gpus), str(count), f"{count / total:.0%}")
    console.print(demand)


def register(app: typer.Typer) -> None:
    @app.command()
    @user_errors
    def generate(
        jobs: Annotated[int, typer.Option("--jobs", "-n", help="number of jobs")],
        nodes: Annotated[int, typer.Option(help="servers in the cluster")] = 1,
        gpus_per_node: Annotated[int, typer.Option(help="GPUs per server")] = 8,
        seed: Annotated[int, typer.Option(help="random seed: same seed, same instance")] = 0,
        arrivals: Annotated[ArrivalMode, typer.Option(help="all at time 0, or a Poisson process")] = ArrivalMode.zero,
        load: Annotated[float, typer.Option(help="offered load for Poisson arrivals (1.0 = cluster capacity)")] = 1.0,
        xi_range: Annotated[str, typer.Option(help="interference ratios drawn uniformly in LOW,HIGH")] = "1.0,2.0",
        duration_range: Annotated[str, typer.Option(help="isolated durations log-uniform in LOW,HIGH seconds")] = (
            "60,3600"
        ),
        gpu_memory: Annotated[float, typer.Option(help="GPU memory, GiB")] = 32.0,
        capacity: Annotated[int, typer.Option(help="jobs per GPU at most (C)")] = 2,
        output: Annotated[Path, typer.Option("--output", "-o", help="instance JSON to write")] = Path("instance.json"),
        json_output: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    ) -> None:
        """Generate a random instance of the standard family (seeded)."""
        from formulation.generator import generate_instance
        from formulation.io import save_instance

        instance = generate_instance(
            jobs,
            nodes,
            gpus_per_node,
            seed,
            arrivals=arrivals.value,
            load=load,
            xi_range=_parse_range(xi_range, "xi-range"),
            duration_range=_parse_range(duration_range, "duration-range"),
            gpu_memory_gib=gpu_memory,
            capacity=capacity,
        )
        save_instance(instance, output)
        summary = instance_summary(instance)
        if json_output:
            print_json({"output": str(output), **summary})
        else:
            console.print(f"wrote {output}: {len(instance.jobs)} jobs on {instance.cluster.num_gpus} GPUs")

    @app.command("import")
    @user_errors
    def import_trace(
        kind: Annotated[TraceKind, typer.Argument(help="trace format")],
        path: Annotated[Path, typer.Argument(help="trace file")],
        nodes: Annotated[int | None, typer.Option(help="servers (default: the trace's own cluster)")] = None,
        gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per server")] = None,
        limit: Annotated[int | None, typer.Option(help="keep only the first N jobs by arrival")] = None,
        capacity: Annotated[
            int | None, typer.Option(help="jobs per GPU, C (default: the authors' setting; muri 4, tiresias 1, else 2)")
        ] = None,
        settings: SettingsOption = None,
        profiles: ProfilesOption = None,
        duration_from: DurationFromOption = None,
        worker_type: WorkerTypeOption = None,
        throughputs: ThroughputsOption = None,
        missing_throughput: MissingThroughputOption = None,
        cluster_spec: ClusterSpecOption = None,
        memory: MemoryOption = None,
        semantics: SemanticsOption = None,
        experiment: ExperimentOption = None,
        allow_implausible: Annotated[
            bool, typer.Option("--allow-implausible", help="keep jobs longer than a year alone (else refused)")
        ] = False,
        interference: Annotated[str, typer.Option(help=INTERFERENCE_HELP)] = "default",
        output: Annotated[Path, typer.Option("--output", "-o", help="instance JSON to write")] = Path("instance.json"),
        json_output: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    ) -> None:
        """Import a public trace (Muri, Tiresias, Gavel, Shockwave, Pollux) as a duetto instance.

        The header must be the format's (another format's header is named) and absurd values (a job
        longer than a year, a negative time) are refused with their row unless --allow-implausible."""
        from formulation.io import save_instance
        from formulation.traces import load_trace

        options: dict[str, Any] = {
            "nodes": nodes,
            "gpus_per_node": gpus_per_node,
            "allow_implausible": allow_implausible,
            **trace_loader_options(
                kind.value,
                profiles=profiles,
                duration_from=duration_from,
                worker_type=worker_type,
                throughputs=throughputs,
                missing_throughput=missing_throughput,
                cluster_spec=cluster_spec,
                memory=memory,
                semantics=semantics,
                experiment=experiment,
                settings=settings,
            ),
        }
        if capacity is not None:
            if capacity < 1:
                fail(f"--capacity must be an integer >= 1 (jobs per GPU at once), got {capacity}")
            options["capacity"] = capacity
        if limit is not None:
            if limit < 1:
                fail("--limit must be >= 1")
            options["limit"] = limit
        instance = load_trace(kind.value, path, **options)
        instance = with_interference(instance, interference)
        save_instance(instance, output)
        summary = instance_summary(instance)
        if json_output:
            print_json({"output": str(output), **summary})
        else:
            console.print(f"wrote {output}: {len(instance.jobs)} jobs on {instance.cluster.num_gpus} GPUs")

    @app.command()
    @user_errors
    def inspect(
        instance_path: Annotated[Path, typer.Argument(help="instance JSON")],
        json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """Summarise an instance: cluster, job mix, durations, interference."""
        from formulation.io import load_instance

        summary = instance_summary(load_instance(instance_path))
        if json_output:
            print_json(summary)
        else:
            _print_summary(summary)

    @app.command()
    @user_errors
    def validate(
        instance_path: Annotated[Path, typer.Argument(help="instance JSON")],
        schedule_path: Annotated[Path, typer.Argument(help="schedule JSON")],
        slotted: Annotated[bool, typer.Option("--slotted", help="use the slotted semantics")] = False,
        slot: Annotated[float | None, typer.Option(help="slot length Δ in seconds (default: the schedule's)")] = None,
        capacity: Annotated[
            int | None, typer.Option(help="jobs per GPU, C (default: the schedule's, else the instance's)")
        ] = None,
        restart_cost: Annotated[
            float | None, typer.Option(help="seconds without progress after each preemption (default: the schedule's)")
        ] = None,
        json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """Check a schedule against an instance; exit 0 if valid, 1 with every violation listed.

        The capacity, slot and restart cost are the schedule's own (what `simulate` used) unless given
        here, so a schedule `simulate` calls valid is valid here too."""
        from formulation.io import load_instance, load_schedule
        from formulation.metrics import compute_metrics
        from formulation.validator import validate as run_validator

        instance = load_instance(instance_path)
        schedule = load_schedule(schedule_path)
        use_slots = slotted or schedule.slot is not None or slot is not None
        if slot is not None and slot <= 0:
            fail("--slot must be > 0")
        if capacity is not None and capacity < 1:
            fail(f"--capacity must be an integer >= 1 (jobs per GPU at once), got {capacity}")
        if restart_cost is not None:
            if restart_cost < 0 or not math.isfinite(restart_cost):
                fail(f"--restart-cost must be a finite number >= 0, got {restart_cost}")
            schedule = dataclasses.replace(schedule, restart_overhead=restart_cost)
        report = run_validator(instance, schedule, slotted=use_slots, slot=slot, capacity=capacity)
        used_capacity = capacity or schedule.capacity or instance.cluster.capacity
        metrics = compute_metrics(instance, report)
        if json_output:
            print_json(
                {
                    "valid": report.ok,
                    "slotted": report.slotted,
                    "capacity": used_capacity,
                    "restart_cost": schedule.restart_overhead,
                    "violations": [
                        {"rule": v.rule, "job": v.job_id, "gpu": v.gpu, "time": v.time, "message": v.message}
                        for v in report.violations
                    ],
                    "completion": report.completion,
                    "metrics": metrics,
                }
            )
        elif report.ok:
            console.print(
                f"[green]valid[/] ({'slotted' if report.slotted else 'continuous'}, C={used_capacity}): "
                f"{metrics['completed']} jobs, "
                f"average JCT {metrics['jct_avg']:,.2f} s, makespan {metrics['makespan']:,.2f} s"
            )
        else:
            console.print(f"[red]invalid[/] (C={used_capacity}): {len(report.violations)} violations")
            for violation in report.violations:
                console.print(f"  {violation}", highlight=False)
        if not report.ok:
            raise typer.Exit(1)

    @app.command()
    def schema(kind: Annotated[SchemaKind, typer.Argument(help="which JSON Schema")]) -> None:
        """Print the JSON Schema of duetto's instance or schedule format."""
        from formulation.io import instance_json_schema, schedule_json_schema

        print_json(instance_json_schema() if kind is SchemaKind.instance else schedule_json_schema())
