"""Simulation commands: ``duetto simulate`` and ``duetto policies``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from duetto.cli_support import console, fail, print_json, user_errors
from duetto.commands.instances import INTERFERENCE_HELP, with_interference
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

_TRACE_KINDS = ("muri", "tiresias", "gavel", "shockwave", "pollux")

# Metrics shown in the table, with their labels and units.
_SHOWN: tuple[tuple[str, str, str], ...] = (
    ("jobs", "jobs", ""),
    ("jct_avg", "average JCT", "s"),
    ("jct_median", "median JCT", "s"),
    ("jct_p99", "p99 JCT", "s"),
    ("makespan", "makespan", "s"),
    ("queueing_avg", "average queueing delay", "s"),
    ("gpu_utilization", "GPU utilisation", ""),
    ("shared_gpu_seconds", "shared GPU-seconds", "s"),
    ("sharing_benefit", "sharing benefit (Eq. 24)", ""),
)


def _parse_options(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` policy options; values parsed as int, float, bool or ``none`` when they look so."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise DuettoInputError(f"expected KEY=VALUE, got {item!r}", field="option")
        text = raw.strip()
        value: Any
        if text.lower() in ("none", "null"):
            value = None
        elif text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            try:
                value = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    value = text
        options[key] = value
    return options


def _format(value: Any, unit: str) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if unit == "s":
            return f"{value:,.1f} s" + (f" ({value / 3600:,.2f} h)" if abs(value) >= 3600 else "")
        return f"{value:.4g}"
    return str(value)


def register(app: typer.Typer) -> None:
    @app.command()
    @user_errors
    def simulate(
        instance_path: Annotated[Path, typer.Argument(help="instance JSON (or a trace file with --trace)")],
        policy: Annotated[str, typer.Option("--policy", "-p", help="policy name (see `duetto policies`)")],
        capacity: Annotated[
            int | None, typer.Option(help="jobs per GPU at most, C (default: the instance's, normally 2)")
        ] = None,
        slotted: Annotated[
            bool, typer.Option("--slotted", help="decide on slot boundaries only (needs --slot)")
        ] = False,
        slot: Annotated[float | None, typer.Option(help="slot length Δ in seconds (slotted mode)")] = None,
        restart_cost: Annotated[
            float, typer.Option(help="seconds without progress after each preemption/migration")
        ] = 0.0,
        output: Annotated[Path | None, typer.Option("--output", "-o", help="schedule JSON to write")] = None,
        json_output: Annotated[bool, typer.Option("--json", help="print the metrics as JSON")] = False,
        option: Annotated[
            list[str] | None, typer.Option("--option", help="policy option KEY=VALUE (repeatable)")
        ] = None,
        trace: Annotated[
            str | None,
            typer.Option(help=f"read the input as a public trace of this format ({', '.join(_TRACE_KINDS)})"),
        ] = None,
        limit: Annotated[int | None, typer.Option(help="with --trace: the first N jobs by arrival")] = None,
        interference: Annotated[str, typer.Option(help=INTERFERENCE_HELP)] = "default",
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
    ) -> None:
        """Simulate a policy on an instance; print the metrics (from the validated schedule).

        An instance from a public trace is simulated with its authors' policy settings unless it was
        loaded with --settings duetto (Muri traces: muri-s/muri-l with semantics=muri); --option wins."""
        from formulation.io import load_instance, save_schedule
        from heuristics.loop import InvalidActionError, PolicyStalledError
        from heuristics.simulator import simulate as run_simulation

        if slot is not None and not slot > 0:
            fail("--slot must be > 0")
        if slotted and slot is None:
            fail("--slotted needs --slot S (the slot length in seconds)")
        if capacity is not None and capacity < 1:
            fail(f"--capacity must be an integer >= 1 (jobs per GPU at once), got {capacity}")
        if restart_cost < 0 or not math.isfinite(restart_cost):
            fail(f"--restart-cost must be a finite number >= 0, got {restart_cost}")
        if limit is not None and (trace is None or limit < 1):
            fail("--limit needs --trace and must be >= 1")
        loader_flags: dict[str, Any] = {
            "profiles": profiles,
            "duration_from": duration_from,
            "worker_type": worker_type,
            "throughputs": throughputs,
            "missing_throughput": missing_throughput,
            "cluster_spec": cluster_spec,
            "memory": memory,
            "semantics": semantics,
            "experiment": experiment,
            "settings": settings,
        }
        if trace is None:
            for keyword, value in loader_flags.items():
                if value is not None:
                    fail(f"--{keyword.replace('_', '-')} needs --trace KIND (it is a trace loader option)")
        if trace is not None:
            from formulation.traces import load_trace

            loader = trace_loader_options(trace, **loader_flags)
            loader |= {"limit": limit} if limit else {}
            instance = load_trace(trace, instance_path, **loader)
        else:
            instance = load_instance(instance_path)
        instance = with_interference(instance, interference)
        from formulation.trace_settings import trace_policy_options

        # the trace's authors' policy settings (recorded with the instance), then the user's --option
        options = trace_policy_options(instance, policy, _parse_options(option or []))
        try:
            result = run_simulation(
                instance,
                policy,
                capacity=capacity,
                slot=slot,
                restart_cost=restart_cost,
                policy_options=options,
            )
        except (InvalidActionError, PolicyStalledError) as error:
            fail(str(error), code=1)
        report = result.report
        metrics = dict(result.metrics or {})
        if output is not None:
            save_schedule(result.schedule, output)
        summary = {
            "policy": result.policy,
            "instance": instance.name,
            "capacity": result.instance.cluster.capacity,
            "slot": slot,
            "restart_cost": restart_cost,
            "policy_options": options,
            "progress": result.instance.progress.kind,  # the progress rule (docs/model.md, "Progress rules")
            "valid": bool(report.ok) if report is not None else None,
            "decisions": result.stats.decisions,
            "preemptions": result.stats.preemptions,
            "migrations": result.stats.migrations,
            "simulation_seconds": result.wall_seconds,
            "validation_seconds": result.validation_seconds,
            "metrics_seconds": result.metrics_seconds,
            "schedule": str(output) if output is not None else None,
            "metrics": metrics,
        }
        if json_output:
            print_json(summary)
        else:
            table = Table(
                title=f"{result.policy} on {instance.name} "
                f"({'slotted, Δ=' + format(slot, 'g') + ' s' if slot else 'continuous'}, "
                f"C={result.instance.cluster.capacity}, {result.instance.progress.kind} progress rule)"
            )
            table.add_column("metric")
            table.add_column("value", justify="right")
            for key, label, unit in _SHOWN:
                if key in metrics:
                    table.add_row(label, _format(metrics[key], unit))
            table.add_row("preemptions", str(result.stats.preemptions))
            table.add_row("simulation time", f"{result.wall_seconds:.2f} s")
            if result.validation_seconds is not None:
                table.add_row("validation time", f"{result.validation_seconds:.2f} s")
            console.print(table)
            if output is not None:
                console.print(f"wrote {output}")
        if report is not None and not report.ok:
            shown = "; ".join(str(v) for v in report.violations[:3])
            fail(f"the simulated schedule fails validation (a bug, please report): {shown}", code=1)

    @app.command()
    @user_errors
    def policies(
        json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """List the scheduling policies, one line each (append +hay to a name for Hay placement)."""
        from heuristics.registry import available_policies

        infos = available_policies()
        if json_output:
            print_json([{"name": info.name, "description": info.description} for info in infos])
            return
        width = max(len(info.name) for info in infos)
        for info in infos:
            console.print(f"{info.name:<{width}}  {info.description}", highlight=False, soft_wrap=True)
        console.print("(any name + '+hay': Hay busyness-score placement instead of consolidated)", highlight=False)
