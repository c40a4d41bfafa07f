"""``duetto solve``: the exact oracle from the command line."""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from duetto.cli_support import console, error_console, fail, print_json, user_errors

if TYPE_CHECKING:
    from solvers.api import Progress
    from solvers.result import Result


class LaneModes(StrEnum):
    """``--lane-modes``: the lane bounds' modes (``options["lane_modes"]``)."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"
    SELECTIVE = "selective"


class ObjectiveKind(StrEnum):
    jct = "jct"
    makespan = "makespan"


def _fmt(value: float, digits: int = 2) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.{digits}f}"


def _print_result(result: Result) -> None:
    summary = result.summary()
    table = Table(title=f"{result.solver}: {result.status.value}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    unit = "s (total JCT)" if result.objective_kind == "jct" else "s (makespan)"
    table.add_row("objective", f"{_fmt(result.objective)} {unit}")
    table.add_row("proven bound", f"{_fmt(result.bound)} s")
    table.add_row("gap", "-" if summary["gap"] is None else f"{100 * summary['gap']:.2f} %")
    table.add_row("build", f"{result.build_seconds:.2f} s")
    table.add_row("solve", f"{result.solve_seconds:.2f} s")
    problem = result.stats.get("problem", {})
    if problem:
        table.add_row("slot", f"{problem.get('slot_seconds')} s, horizon {problem.get('horizon_slots')} slots")
    if result.schedule is not None and result.objective_kind == "jct":
        jobs = len(result.schedule.plans)
        table.add_row("average JCT", f"{_fmt(result.objective / max(1, jobs))} s")
    for key, label in (("coupled_bound", "coupled LP bound"), ("lane_bound", "lane bound / tree")):
        relaxation = result.stats.get(key)
        if not relaxation:
            continue
        if relaxation.get("bound_seconds") is not None:
            text = f"{_fmt(relaxation['bound_seconds'])} s in {relaxation['seconds']:.1f} s"
            if key == "lane_bound" and relaxation.get("method") == "branch-and-price":
                tree = f"{relaxation['nodes']} nodes, {relaxation['leaf_checks']} leaf checks"
                text += f" ({tree}, {relaxation['status']})"
            elif key == "lane_bound":
                when = "before" if relaxation.get("order") == "first" else "after"
                text += f" ({relaxation['rounds']} rounds, {when} the coupled LP)"
        else:
            text = str(relaxation["status"])
        table.add_row(label, text)
    narrowing = result.stats.get("lane_windows")
    if narrowing is not None:
        restarts = narrowing.get("restarts", [])
        text = "; ".join(
            f"CP-SAT restarted at {r['seconds']:.1f} s (window slack {before} -> {after} slots)"
            for r in restarts
            for before, after in [r["window_slack"]]
        )
        table.add_row("lane windows", text or "no restart (not narrower by a third in time)")
    split = result.stats.get("split_bound")
    if split:
        if split.get("bound_seconds") is not None:
            sizes = " + ".join(str(group["jobs"]) for group in split["groups"])
            proven = f"{split['groups_proven']} of {len(split['groups'])} proven"
            text = f"{_fmt(split['bound_seconds'])} s: groups of {sizes} jobs ({proven}), in {split['seconds']:.1f} s"
        else:
            text = str(split.get("status", "-"))
        table.add_row("arrival-split bound", text)
    if result.message:
        table.add_row("message", result.message.splitlines()[0])
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command()
    @user_errors
    def solve(
        instance_path: Annotated[Path, typer.Argument(metavar="INSTANCE", help="instance JSON")],
        solver: Annotated[
            str,
            typer.Option(
                "--solver",
                "-s",
                help=(
                    "cpsat, highs, portfolio (both, best of either), bnp (branch-and-price: lane tree,"
                    " CP-SAT beside it and at its leaves) or pyomo:NAME (any solver Pyomo knows)"
                ),
            ),
        ] = "cpsat",
        time_limit: Annotated[float, typer.Option("--time-limit", "-t", help="wall seconds, enforced")] = 60.0,
        slot: Annotated[
            float | None, typer.Option("--slot", help="slot length in seconds (default: chosen from the instance)")
        ] = None,
        objective: Annotated[
            ObjectiveKind, typer.Option("--objective", help="total (= average) JCT or makespan")
        ] = ObjectiveKind.jct,
        export_model: Annotated[
            Path | None, typer.Option("--export-model", help="write the model as FILE.mps or FILE.lp first")
        ] = None,
        output: Annotated[Path | None, typer.Option("--output", "-o", help="schedule JSON to write")] = None,
        warm_start: Annotated[
            Path | None,
            typer.Option(
                "--warm-start",
                help="schedule JSON to start from (e.g. duetto simulate --slotted -o); its slot is used by default",
            ),
        ] = None,
        policy_warm_start: Annotated[
            bool,
            typer.Option(
                "--policy-warm-start/--no-policy-warm-start",
                help="also start from SJF-BSBF and its look-ahead simulated in the slotted semantics",
            ),
        ] = True,
        local_search: Annotated[
            bool,
            typer.Option(
                "--local-search/--no-local-search",
                help="improve the initial schedule by a search over the greedy's job order (a tenth of the time)",
            ),
        ] = True,
        coupled_bound: Annotated[
            bool,
            typer.Option(
                "--coupled-bound/--no-coupled-bound",
                help="also solve the pair-coupled LP relaxation (HiGHS, one thread) for a stronger bound",
            ),
        ] = True,
        lane_bound: Annotated[
            bool,
            typer.Option(
                "--lane-bound/--no-lane-bound",
                help="also solve the lane relaxation by column generation (one column per GPU's jobs)",
            ),
        ] = True,
        lanes_first: Annotated[
            bool | None,
            typer.Option(
                "--lanes-first/--lanes-after",
                help=(
                    "run the lane relaxation before the coupled LP, with all the time (default, except"
                    " for bnp and portfolio), or after it, only where it is expected to converge"
                ),
                show_default=False,
            ),
        ] = None,
        split_bound: Annotated[
            bool,
            typer.Option(
                "--split-bound/--no-split-bound",
                help=(
                    "bnp with arrivals spread in time: if the whole instance is not proven in half the limit, "
                    "also bound it by exact solves of groups of consecutive arrivals (off by default)"
                ),
            ),
        ] = False,
        lane_windows: Annotated[
            bool,
            typer.Option(
                "--lane-windows/--no-lane-windows",
                help=(
                    "cpsat and bnp with arrivals spread in time: restart CP-SAT in the narrower windows the"
                    " coupled and lane LPs' duals allow once they have a third less slack"
                ),
            ),
        ] = True,
        lane_modes: Annotated[
            LaneModes,
            typer.Option(
                "--lane-modes",
                help=(
                    "mode-aware lane bounds (each job keeps one mode, its sub-batch, for its whole run in"
                    " the lanes too): on, off, selective (only the jobs the root's lanes need), or auto"
                    " (selective where the lane LP, or a bnp/portfolio tree's root, is expected to"
                    " converge in the time, but not for cpsat's lane LP where CP-SAT is restarted in"
                    " the lanes' windows, i.e. releases spread in time; else off)"
                ),
                case_sensitive=False,
            ),
        ] = LaneModes.AUTO,
        threads: Annotated[
            int | None, typer.Option("--threads", help="solver threads / CP-SAT workers (default 2 for CP-SAT)")
        ] = None,
        json_output: Annotated[bool, typer.Option("--json", help="print the result summary as JSON")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")] = False,
    ) -> None:
        """Solve the time-slotted integer program exactly (CP-SAT, HiGHS or any Pyomo solver)."""
        from formulation.io import load_instance, load_schedule, save_schedule
        from solvers.api import LANE_MODE_NAMES
        from solvers.api import solve as run_solve

        if threads is not None and threads < 1:
            fail(f"--threads must be >= 1, got {threads}")
        if lanes_first is not None and not lane_bound:
            fail("--lanes-first / --lanes-after order the lane bound: they cannot go with --no-lane-bound")
        instance = load_instance(instance_path)
        initial = load_schedule(warm_start) if warm_start is not None else None
        options: dict[str, Any] = {}
        if threads is not None:
            options = {"threads": threads, "num_workers": threads}
        if split_bound:
            options["split"] = True
        if not lane_windows:
            options["lane_windows"] = False
        options["lane_modes"] = LANE_MODE_NAMES[lane_modes.value]
        arguments = (instance, solver, time_limit, slot, objective.value)
        settings: dict[str, Any] = {
            "export_model": export_model,
            "options": options,
            "warm_start_schedule": initial,
            "policy_warm_start": policy_warm_start,
            "local_search": local_search,
            "coupled_bound": coupled_bound,
            "lane_bound": lane_bound and (True if lanes_first is None else "first" if lanes_first else "after"),
        }
        show = not quiet and not json_output and error_console.is_terminal
        if show:
            from rich.live import Live

            status_line = f"solving {instance.name} with {solver}"
            with Live(status_line, console=error_console, transient=True, refresh_per_second=4) as live:

                def on_progress(state: Progress) -> None:
                    live.update(
                        f"{solver} [{state.phase}] {state.elapsed:6.1f}/{time_limit:g} s  "
                        f"best {_fmt(state.objective)}  bound {_fmt(state.bound)}  "
                        f"incumbents {state.incumbents}"
                    )

                result = run_solve(*arguments, progress=on_progress, **settings)
        else:
            result = run_solve(*arguments, **settings)
        if output is not None and result.schedule is not None:
            save_schedule(result.schedule, output)
        if json_output:
            summary = result.summary()
            if output is not None:
                summary["schedule_path"] = str(output)
            if export_model is not None:
                summary["model_path"] = str(export_model)
            print_json(summary)
        else:
            _print_result(result)
            if export_model is not None:
                console.print(f"model written to {export_model}")
            if output is not None:
                console.print(f"schedule written to {output}")
        if result.status.value == "error":
            raise typer.Exit(1)
