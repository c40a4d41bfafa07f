"""``duetto demo``: the whole pipeline on an embedded default, end to end, in about a minute."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer
from rich.table import Table

from duetto.cli_support import console, print_json, progress_bar, user_errors


def run_demo(
    jobs: int = 8,
    nodes: int = 1,
    gpus_per_node: int = 4,
    seed: int = 3,
    time_limit: float = 30.0,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Generate a seeded instance, solve it exactly, simulate every policy that can serve it in the same
    slotted semantics, validate every schedule and compare each with the optimum.

    Returns
    -------
    dict
        ``instance`` (summary), ``oracle`` (Result summary) and ``methods``: one row per method with
        ``total_jct``, ``jct_avg``, ``makespan``, ``valid`` and ``gap`` to the optimum (or to the bound).
    """
    from duetto.commands.instances import instance_summary
    from formulation.errors import DuettoInputError
    from formulation.generator import generate_instance
    from formulation.metrics import compute_metrics
    from formulation.validator import validate
    from heuristics import simulate
    from heuristics.registry import policy_names
    from solvers import solve

    instance = generate_instance(jobs, nodes, gpus_per_node, seed)
    policies = policy_names()
    rows: list[dict[str, Any]] = []
    with progress_bar("demo", total=1 + len(policies), enabled=show_progress) as advance:
        result = solve(instance, solver="cpsat", time_limit=time_limit)
        advance(1)
        if result.schedule is None:
            raise DuettoInputError(f"the oracle found no schedule ({result.status.value}: {result.message})")
        slot = result.schedule.slot
        report = validate(instance, result.schedule)
        reference = compute_metrics(instance, report)["total_jct"]
        proven = result.proven_optimal
        bound = result.bound if math.isfinite(result.bound) else math.nan

        def row(method: str, metrics: dict[str, Any], valid: bool, note: str = "") -> dict[str, Any]:
            total = metrics["total_jct"]
            base = reference if proven else bound
            gap = (total - base) / base if base and base > 0 and math.isfinite(base) else math.nan
            return {
                "method": method,
                "total_jct": total,
                "jct_avg": metrics["jct_avg"],
                "makespan": metrics["makespan"],
                "valid": valid,
                "gap": gap,
                "gap_kind": "to optimum" if proven else "to bound",
                "note": note,
            }

        rows.append(row("oracle (cpsat)", compute_metrics(instance, report), report.ok, result.status.value))
        for name in policies:
            try:
                simulated = simulate(instance, name, slot=slot)
            except DuettoInputError as error:
                rows.append({"method": name, "valid": None, "note": f"n/a: {error}"})
                advance(1)
                continue
            checked = validate(instance, simulated.schedule)
            rows.append(row(name, compute_metrics(instance, checked), checked.ok))
            advance(1)
    return {"instance": instance_summary(instance), "oracle": result.summary(), "slot": slot, "methods": rows}


def register(app: typer.Typer) -> None:
    @app.command()
    @user_errors
    def demo(
        jobs: Annotated[int, typer.Option("--jobs", "-n", help="jobs in the demo instance")] = 8,
        gpus_per_node: Annotated[int, typer.Option(help="GPUs (one node)")] = 4,
        seed: Annotated[int, typer.Option(help="random seed")] = 3,
        time_limit: Annotated[float, typer.Option(help="oracle time limit, seconds")] = 30.0,
        json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """Generate a small instance, solve it exactly, run every policy, validate all and compare."""
        outcome = run_demo(jobs, 1, gpus_per_node, seed, time_limit, show_progress=not json_output)
        if json_output:
            print_json(outcome)
            return
        oracle = outcome["oracle"]
        summary = outcome["instance"]
        console.print(
            f"instance {summary['name']}: {summary['jobs']} jobs on {summary['gpus']} GPUs, "
            f"slot Δ = {outcome['slot']:g} s; oracle {oracle['status']} in {oracle['solve_seconds']:.1f} s "
            f"(objective {oracle['objective']}, bound {oracle['bound']})"
        )
        skipped: dict[str, list[str]] = {}  # reason → methods, so a reason shared by several prints once
        table = Table(title="total JCT in the slotted semantics, every schedule validated")
        for column in ("method", "total JCT (s)", "avg JCT (s)", "makespan (s)", "valid", "gap"):
            table.add_column(column, justify="left" if column == "method" else "right")
        for item in outcome["methods"]:
            if item.get("valid") is None:
                table.add_row(item["method"], "", "", "", "n/a", "")
                skipped.setdefault(item["note"].removeprefix("n/a: "), []).append(item["method"])
                continue
            gap = item["gap"]
            table.add_row(
                item["method"],
                f"{item['total_jct']:,.0f}",
                f"{item['jct_avg']:,.1f}",
                f"{item['makespan']:,.0f}",
                "yes" if item["valid"] else "[red]NO[/]",
                f"{gap:+.1%}{'' if item['gap_kind'] == 'to optimum' else '†'}" if gap == gap else "",
            )
        console.print(table)
        if oracle["status"] != "optimal":
            console.print("† gap to the solver's proven lower bound: optimality not proven within the time limit")
        for reason, methods in skipped.items():
            console.print(f"[dim]n/a {', '.join(methods)}: {reason}[/]", highlight=False)
