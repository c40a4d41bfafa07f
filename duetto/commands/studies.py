"""Study commands: gap (policies against the oracle), scale (time against job count), replay (policies on
a public trace, papers' table shape) and plot (per-GPU Gantt chart of a schedule).

The studies live in :mod:`benchmarks`; these commands parse options, run them (local process pool, or Ray
with ``--ray-address``), print the summary and list the files written. Rerunning a study with the same
``--out`` skips the rows already computed.
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from duetto.cli_support import EXIT_INTERRUPTED, console, fail, print_json, user_errors
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
)
from formulation.errors import DuettoInputError


class ArrivalChoice(StrEnum):
    zero = "zero"
    poisson = "poisson"


WORKERS_HELP = "parallel tasks (default: the CPU count; divided by --num-workers, default 2, where tasks solve)"


def _ints(text: str, name: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise DuettoInputError(f"expected comma-separated integers, got '{text}'", field=name) from None
    if not values or any(v < 1 for v in values):
        raise DuettoInputError(f"expected integers >= 1, got '{text}'", field=name)
    return values


def _range(text: str, name: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise DuettoInputError(f"expected 'LOW,HIGH', got '{text}'", field=name) from None
    return low, high


def _cluster(text: str) -> tuple[int, int]:
    try:
        nodes, gpus = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise DuettoInputError(f"expected NODESxGPUS (e.g. 2x4), got '{text}'", field="cluster") from None
    if nodes < 1 or gpus < 1:
        raise DuettoInputError(f"expected positive sizes, got '{text}'", field="cluster")
    return nodes, gpus


def _policies(names: list[str] | None) -> tuple[str, ...]:
    """The chosen policies (every registered one by default), each checked to exist."""
    from heuristics.registry import make_policy, policy_names

    chosen = tuple(names) if names else tuple(policy_names())
    for name in chosen:
        make_policy(name)  # unknown → DuettoInputError listing the known names
    return chosen


def _seeds(count: int, first: int) -> tuple[int, ...]:
    if count < 1:
        raise DuettoInputError(f"must be >= 1, got {count}", field="seeds")
    if first < 0:
        raise DuettoInputError(f"must be >= 0, got {first}", field="first-seed")
    return tuple(range(first, first + count))


def _solvers(names: list[str] | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """The chosen oracle backends, each checked to exist and to be installed before any task runs."""
    from solvers.backends import check_available, resolve

    chosen = tuple(names) if names else default
    for name in chosen:
        check_available(resolve(name))  # unknown or missing → DuettoInputError naming it
    return chosen


def _solver_limits(items: list[str] | None, solvers: tuple[str, ...]) -> dict[str, float]:
    limits: dict[str, float] = {}
    for item in items or []:
        name, _, seconds = item.rpartition("=")
        try:
            value = float(seconds)
        except ValueError:
            raise DuettoInputError(f"expected SOLVER=SECONDS, got '{item}'", field="solver-time-limit") from None
        if not name or value <= 0:
            raise DuettoInputError(f"expected SOLVER=SECONDS with SECONDS > 0, got '{item}'", field="solver-time-limit")
        if name not in solvers:
            raise DuettoInputError(
                f"'{name}' is not one of the study's solvers ({', '.join(solvers)})", field="solver-time-limit"
            )
        limits[name] = value
    return limits


def _solver_options(num_workers: int | None) -> dict[str, Any]:
    return {} if num_workers is None else {"num_workers": num_workers}


def _fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        return f"{value:.{digits}f}"
    return str(value)


KEY_COLUMNS = ("method", "n", "policy", "metric")
"""Columns repeated in every part of a folded table (they say what a row is)."""
WRAPPED_WIDTH = 36
"""Free-text columns (``note``) wrap at this width instead of widening the table."""


def _print_frame(
    frame: Any, title: str, columns: list[str] | None = None, digits: int = 3, out: Console | None = None
) -> None:
    """Print ``frame`` as a table that fits the console: when its columns are wider than the console,
    it is folded into several tables, each repeating the key columns (method, n, ...), headers whole."""
    target = out or console
    shown = [c for c in (columns or list(frame.columns)) if c in frame.columns]
    cells = {c: [_fmt(v, digits) for v in frame[c]] for c in shown}

    def width(column: str) -> int:
        longest = max([len(str(column)), *(len(v) for v in cells[column])])
        return min(longest, max(WRAPPED_WIDTH, len(str(column)))) + 3  # padding and the border

    keys = [c for c in shown if c in KEY_COLUMNS]
    rest = [c for c in shown if c not in keys]
    budget = target.width - 1 - sum(width(c) for c in keys)
    parts: list[list[str]] = []
    for column in rest:
        if parts and sum(width(c) for c in parts[-1]) + width(column) <= budget:
            parts[-1].append(column)
        else:
            parts.append([column])
    for number, part in enumerate(parts or [[]]):
        suffix = "" if len(parts) <= 1 else f" ({number + 1}/{len(parts)})"
        table = Table(title=title + suffix if number == 0 else f"{title.split(' (')[0]}{suffix}")
        for column in [*keys, *part]:
            table.add_column(str(column), no_wrap=column != "note", overflow="fold", min_width=len(str(column)))
        for index in range(len(frame)):
            table.add_row(*(cells[c][index] for c in [*keys, *part]))
        target.print(table)


def _print_files(files: list[Path]) -> None:
    for path in files:
        console.print(f"  wrote {path}", highlight=False)


@contextmanager
def _interrupt_keeps_finished_tasks(out: Path) -> Iterator[None]:
    """Ctrl-C, or SIGTERM (a batch system's time limit, ``kill``), stops the sweep at once (the running
    tasks too) and says that what finished is stored; exit 130 or 143 (128 + the signal)."""
    received: list[int] = []

    def terminate(signum: int, frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt  # the same path as Ctrl-C: the sweep ends its workers

    in_main_thread = threading.current_thread() is threading.main_thread()  # signals: main thread only
    previous = signal.signal(signal.SIGTERM, terminate) if in_main_thread else None
    try:
        yield
    except KeyboardInterrupt:
        code = 128 + received[0] if received else EXIT_INTERRUPTED
        fail(f"interrupted: the tasks that finished are kept in {out}; the same command resumes", code)
    finally:
        if in_main_thread:  # None: the handler was not set from Python; the default is what is left
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _exit_if_failed(runs: list[Any]) -> None:
    """Exit 1 after the tables and files are written when some task raised (it runs again on a rerun)."""
    if any(run.failed for run in runs):
        raise typer.Exit(1)


def _print_run(run: Any) -> None:
    console.print(
        f"{run.ran} tasks run, {run.skipped} already done, {len(run.failed)} failed "
        f"({run.backend}, {run.wall_seconds:.1f} s)",
        highlight=False,
    )
    for key, message in list(run.failed.items())[:10]:
        console.print(f"  [red]failed[/] {key}: {message}", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command()
    @user_errors
    def gap(
        sizes: Annotated[str, typer.Option(help="job counts, comma-separated")] = "4,6",
        cluster: Annotated[list[str] | None, typer.Option(help="cluster shape NODESxGPUS (repeatable)")] = None,
        arrivals: Annotated[list[ArrivalChoice] | None, typer.Option(help="arrival mode (repeatable)")] = None,
        xi_range: Annotated[list[str] | None, typer.Option(help="interference range LOW,HIGH (repeatable)")] = None,
        seeds: Annotated[int, typer.Option(help="instances per combination (seeds FIRST..FIRST+N-1)")] = 3,
        first_seed: Annotated[int, typer.Option(help="first seed")] = 0,
        load: Annotated[float, typer.Option(help="offered load of Poisson arrivals")] = 1.0,
        policy: Annotated[list[str] | None, typer.Option(help="policy (repeatable; default: every one)")] = None,
        solver: Annotated[list[str] | None, typer.Option(help="oracle backend (repeatable; default cpsat)")] = None,
        time_limit: Annotated[float, typer.Option(help="seconds per exact solve")] = 60.0,
        solver_time_limit: Annotated[
            list[str] | None, typer.Option(help="SOLVER=SECONDS: another limit for one solver (repeatable)")
        ] = None,
        num_workers: Annotated[int | None, typer.Option(help="solver threads per solve")] = None,
        target_slots: Annotated[int, typer.Option(help="slot rule: about this many slots per schedule")] = 120,
        out: Annotated[Path, typer.Option("--out", "-o", help="output folder (rerun: resumes)")] = Path("results/gap"),
        workers: Annotated[int | None, typer.Option(help=WORKERS_HELP)] = None,
        ray_address: Annotated[str | None, typer.Option(help="run on Ray: address, or 'local'")] = None,
        progress: Annotated[bool, typer.Option(help="show a progress bar")] = True,
        figures: Annotated[bool, typer.Option(help="write the figures")] = True,
        refresh: Annotated[
            list[str] | None,
            typer.Option(help="recompute this method's stored rows (repeatable; 'policies': every policy)"),
        ] = None,
        json_output: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    ) -> None:
        """Optimality gap of every policy against the exact oracle on random instances."""
        from benchmarks.gap import GapStudy, run_gap_study

        if time_limit <= 0:
            fail("--time-limit must be > 0")
        solvers = _solvers(solver, ("cpsat",))
        study = GapStudy(
            sizes=_ints(sizes, "sizes"),
            clusters=tuple(_cluster(c) for c in (cluster or ["1x4"])),
            arrivals=tuple(a.value for a in (arrivals or [ArrivalChoice.zero, ArrivalChoice.poisson])),
            xi_ranges=tuple(_range(x, "xi-range") for x in (xi_range or ["1.0,2.0"])),
            seeds=_seeds(seeds, first_seed),
            policies=_policies(policy),
            solvers=solvers,
            time_limit=time_limit,
            solver_time_limits=_solver_limits(solver_time_limit, solvers),
            load=load,
            target_slots=target_slots,
            solver_options=_solver_options(num_workers),
        )
        with _interrupt_keeps_finished_tasks(out):
            outcome = run_gap_study(
                study,
                out,
                workers=workers,
                ray_address=ray_address,
                progress=progress,
                figures=figures,
                refresh=tuple(refresh or ()),
            )
        if json_output:
            print_json(
                {
                    "summary": outcome.summary.to_dict(orient="records"),
                    "files": [str(f) for f in outcome.files],
                    "failed": outcome.run.failed,
                }
            )
            _exit_if_failed([outcome.run])
            return
        _print_run(outcome.run)
        if not outcome.summary.empty:
            _print_frame(
                outcome.summary,
                "gap per method and size (fractions; gap_*: against a proven optimum, "
                "bound_gap_*: against the best bound where no solver proved one)",
                [
                    "method",
                    "n",
                    "instances",
                    "proven",
                    "gap_median",
                    "gap_p95",
                    "gap_max",
                    "to_bound",
                    "bound_gap_median",
                    "bound_gap_max",
                    "wall_median_s",
                    "note",
                ],
            )
        _print_files(outcome.files)
        _exit_if_failed([outcome.run])

    @app.command()
    @user_errors
    def scale(
        solver: Annotated[
            list[str] | None, typer.Option(help="oracle backend (repeatable; default highs, cpsat)")
        ] = None,
        solver_sizes: Annotated[str, typer.Option(help="job counts for the solvers")] = "4,6,8,12,16,24",
        policy: Annotated[list[str] | None, typer.Option(help="policy (repeatable; default: every one)")] = None,
        policy_sizes: Annotated[str, typer.Option(help="job counts for the policies")] = (
            "10,30,100,300,1000,3000,10000"
        ),
        seeds: Annotated[int, typer.Option(help="instances per size")] = 3,
        first_seed: Annotated[int, typer.Option(help="first seed")] = 0,
        time_limit: Annotated[float, typer.Option(help="seconds per exact solve")] = 60.0,
        max_seconds: Annotated[
            float, typer.Option(help="stop a method after a size whose median exceeds this")
        ] = 300.0,
        num_workers: Annotated[int | None, typer.Option(help="solver threads per solve")] = None,
        gpus_per_node: Annotated[int, typer.Option(help="GPUs per node")] = 4,
        jobs_per_gpu: Annotated[float, typer.Option(help="the cluster grows with n: this many jobs per GPU")] = 2.0,
        arrivals: Annotated[ArrivalChoice, typer.Option(help="arrival mode")] = ArrivalChoice.poisson,
        load: Annotated[float, typer.Option(help="offered load of Poisson arrivals")] = 1.0,
        out: Annotated[Path, typer.Option("--out", "-o", help="output folder (rerun: resumes)")] = Path(
            "results/scale"
        ),
        workers: Annotated[int | None, typer.Option(help=WORKERS_HELP)] = None,
        ray_address: Annotated[str | None, typer.Option(help="run on Ray: address, or 'local'")] = None,
        progress: Annotated[bool, typer.Option(help="show a progress bar")] = True,
        figures: Annotated[bool, typer.Option(help="write the figure")] = True,
        json_output: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    ) -> None:
        """Time to schedule against job count: exact solvers and every policy (log-log, fitted exponents)."""
        from benchmarks.scale import ScaleStudy, run_scale_study

        if time_limit <= 0 or max_seconds <= 0:
            fail("--time-limit and --max-seconds must be > 0")
        study = ScaleStudy(
            solvers=_solvers(solver, ("highs", "cpsat")),
            solver_sizes=_ints(solver_sizes, "solver-sizes"),
            policies=_policies(policy),
            policy_sizes=_ints(policy_sizes, "policy-sizes"),
            seeds=_seeds(seeds, first_seed),
            time_limit=time_limit,
            max_seconds=max_seconds,
            gpus_per_node=gpus_per_node,
            jobs_per_gpu=jobs_per_gpu,
            arrivals=arrivals.value,
            load=load,
            solver_options=_solver_options(num_workers),
        )
        with _interrupt_keeps_finished_tasks(out):
            outcome = run_scale_study(
                study, out, workers=workers, ray_address=ray_address, progress=progress, figures=figures
            )
        if json_output:
            print_json(
                {
                    "summary": outcome.summary.to_dict(orient="records"),
                    "fits": outcome.fits.to_dict(orient="records"),
                    "stopped": outcome.stopped,
                    "reasons": outcome.reasons,
                    "files": [str(f) for f in outcome.files],
                    "failed": {key: message for run in outcome.runs for key, message in run.failed.items()},
                }
            )
            _exit_if_failed(outcome.runs)
            return
        for run in outcome.runs:
            _print_run(run)
        if not outcome.summary.empty:
            _print_frame(
                outcome.summary,
                "seconds per method and size (startup: the warm-up run, not counted; note: why a row is empty)",
                [
                    "method",
                    "n",
                    "runs",
                    "seconds_median",
                    "seconds_max",
                    "startup_median",
                    "proven_fraction",
                    "solver_gap_median",
                    "validated",
                    "note",
                ],
            )
        if not outcome.fits.empty:
            _print_frame(outcome.fits, "fitted growth: seconds ≈ c·n^exponent", digits=2)
        for method, why in outcome.reasons.items():
            size = outcome.stopped.get(method)
            after = f"not run from n={size}: " if size is not None else ""
            console.print(f"  {method}: {after}{why}", highlight=False)
        _print_files(outcome.files)
        _exit_if_failed(outcome.runs)

    @app.command()
    @user_errors
    def replay(
        kind: Annotated[str, typer.Argument(help="trace format: pollux, muri, gavel, tiresias, shockwave")],
        paths: Annotated[list[Path], typer.Argument(help="trace file(s); several: the table pools their jobs")],
        policy: Annotated[list[str] | None, typer.Option(help="policy (repeatable; default: every one)")] = None,
        interference: Annotated[
            list[str] | None,
            typer.Option(
                help="default | constant:X | gavel[:WORKER] | predicted[:WORKER] | table:FILE (repeatable: a sweep)"
            ),
        ] = None,
        nodes: Annotated[int | None, typer.Option(help="servers (default: the trace's cluster)")] = None,
        gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per server")] = None,
        limit: Annotated[int | None, typer.Option(help="keep only the first N jobs")] = None,
        capacity: Annotated[
            int | None,
            typer.Option(help="jobs per GPU at most, C (default: the authors' setting; muri 4, tiresias 1, else 2)"),
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
        slot: Annotated[float | None, typer.Option(help="slotted semantics with this Δ (default: continuous)")] = None,
        restart_cost: Annotated[float, typer.Option(help="seconds lost per preemption")] = 0.0,
        large_threshold: Annotated[int, typer.Option(help="jobs with more GPUs than this are large")] = 4,
        out: Annotated[Path, typer.Option("--out", "-o", help="output folder (rerun: resumes)")] = Path(
            "results/replay"
        ),
        workers: Annotated[int | None, typer.Option(help="parallel tasks (default: CPU count)")] = None,
        ray_address: Annotated[str | None, typer.Option(help="run on Ray: address, or 'local'")] = None,
        progress: Annotated[bool, typer.Option(help="show a progress bar")] = True,
        figures: Annotated[bool, typer.Option(help="write the figures")] = True,
        bound: Annotated[
            bool, typer.Option(help="prove a lower bound on total JCT per file and print every policy's gap to it")
        ] = True,
        bound_time_limit: Annotated[float, typer.Option(help="seconds for each file's bound")] = 60.0,
        json_output: Annotated[bool, typer.Option("--json", help="print the tables as JSON")] = False,
    ) -> None:
        """Replay a public trace under chosen policies; print the papers' table (hours; all/large/small)
        and each policy's certified gap to a proven lower bound on average JCT."""
        from benchmarks.replay import ReplayStudy, run_replay
        from duetto.commands.trace_options import trace_loader_options

        if large_threshold < 0:
            fail("--large-threshold must be >= 0")
        if slot is not None and slot <= 0:
            fail("--slot must be > 0")
        if limit is not None and limit < 1:
            fail("--limit must be >= 1")
        if bound and not bound_time_limit > 0:
            fail("--bound-time-limit must be > 0")
        loader_options = trace_loader_options(
            kind,
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
        )
        if kind == "muri" and (slot is not None or restart_cost > 0):
            from formulation.traces.muri import muri_default_semantics

            def rule(path: Path) -> str:
                if semantics is not None:
                    return semantics
                return "duetto" if settings == "duetto" else muri_default_semantics(path, experiment or "auto")

            muri_rule = [str(path) for path in paths if rule(path) == "muri"]
            if muri_rule:
                # refused up front rather than by every task (docs/model.md, "Progress rules")
                fail(
                    f"--slot and --restart-cost need --semantics duetto on a Muri trace ({muri_rule[0]} runs "
                    "under Muri's simulator's progress rule, the default for its simulation traces): that "
                    "rule is continuous and charges its own start overheads"
                )
        study = ReplayStudy(
            trace=kind,
            paths=tuple(str(p) for p in paths),
            policies=_policies(policy),
            interference=tuple(interference or ["default"]),
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            limit=limit,
            capacity=capacity,
            slot=slot,
            restart_cost=restart_cost,
            large_threshold=large_threshold,
            loader_options=loader_options,
            bound_time_limit=bound_time_limit if bound else None,
        )
        with _interrupt_keeps_finished_tasks(out):
            outcome = run_replay(
                study, out, workers=workers, ray_address=ray_address, progress=progress, figures=figures
            )
        if json_output:
            print_json(
                {variant: table.reset_index().to_dict(orient="records") for variant, table in outcome.tables.items()}
                | {
                    "certified_gap": {
                        variant: table.reset_index().to_dict(orient="records")
                        for variant, table in outcome.certified.items()
                    }
                }
                | {"failed": outcome.run.failed}
            )
            _exit_if_failed([outcome.run])
            return
        _print_run(outcome.run)
        for variant, table in outcome.tables.items():
            rows = outcome.rows[outcome.rows["interference"] == variant].iloc[0]
            flat = table.reset_index()
            files_text = (
                paths[0].name if len(paths) == 1 else f"{len(paths)} traces, jobs pooled (makespan: mean over files)"
            )
            _print_frame(
                flat,
                f"{files_text} on {rows['nodes']}×{rows['gpus_per_node']} GPUs, interference "
                f"{variant} (hours; large: > {large_threshold} GPUs)",
                digits=2,
            )
        for variant, gaps in outcome.certified.items():
            _print_frame(
                gaps.reset_index(),
                f"certified gap, interference {variant}: average JCT (hours) against a proven lower bound "
                "(pooled over files; docs/oracle.md)",
                digits=2,
            )
        if not outcome.rows.empty:
            invalid = outcome.rows[~outcome.rows["validated"].astype(bool)]
            for row in invalid.to_dict(orient="records"):
                console.print(f"  [red]invalid schedule[/]: {row['policy']} ({row['interference']})", highlight=False)
        _print_files(outcome.files)
        _exit_if_failed([outcome.run])

    @app.command()
    @user_errors
    def results(
        results_dir: Annotated[Path, typer.Option("--results", help="folder of the stored study outputs")] = Path(
            "results"
        ),
        document: Annotated[Path, typer.Option("--doc", help="document with generated tables")] = Path(
            "docs/results.md"
        ),
        check: Annotated[
            bool, typer.Option("--check", help="change nothing; exit 1 if a table differs from its stored output")
        ] = False,
        json_output: Annotated[bool, typer.Option("--json", help="print what was done as JSON")] = False,
    ) -> None:
        """Regenerate the results document's tables from the stored study outputs (one command)."""
        from benchmarks.results_doc import update_document

        update = update_document(document, results_dir, check=check)
        if json_output:
            print_json({"changed": update.changed, "current": update.current, "missing": update.missing})
        else:
            verb = "stale" if check else "rewritten"
            for name in update.changed:
                console.print(f"  {name}: {verb}", highlight=False)
            for name in update.current:
                console.print(f"  {name}: current", highlight=False)
            for name, command in update.missing.items():
                console.print(f"  {name}: no stored output in {results_dir}; it comes from: {command}", highlight=False)
        if check and update.changed:
            raise typer.Exit(1)

    @app.command("predictor-study")
    @user_errors
    def predictor_study(
        trace: Annotated[Path | None, typer.Option(help="Gavel trace for the decision study (none: RMSE only)")] = None,
        policy: Annotated[str, typer.Option(help="policy whose decisions are compared")] = "sjf-bsbf",
        seeds: Annotated[int, typer.Option(help="held-out splits (seeds 0..N-1)")] = 10,
        nodes: Annotated[int | None, typer.Option(help="servers for the decision study")] = None,
        gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per server")] = None,
        limit: Annotated[int | None, typer.Option(help="keep only the first N jobs of the trace")] = None,
        estimator: Annotated[
            list[str] | None,
            typer.Option(
                help="gradient-boosting | tree (repeatable; default both): the RMSE study's estimators, "
                "the first also predicts ξ in the decision study"
            ),
        ] = None,
        out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path("results/predictor"),
        figures: Annotated[bool, typer.Option(help="write the figures")] = True,
        json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """Interference predictor (Castor §6): held-out RMSE on Gavel's pairs and, on a Gavel trace, what
        deciding with predicted instead of measured ξ does to a policy's JCT and sharing benefit."""
        from benchmarks.prediction import run_predictor_study
        from formulation.predictor import DEFAULT_HYPERPARAMETERS

        if seeds < 1:
            fail("--seeds must be >= 1")
        estimators = tuple(estimator or ("gradient-boosting", "tree"))
        for name in estimators:
            if name not in DEFAULT_HYPERPARAMETERS:
                raise DuettoInputError(
                    f"unknown estimator '{name}'; choose {', '.join(DEFAULT_HYPERPARAMETERS)}", field="estimator"
                )
        summary, decisions, files = run_predictor_study(
            out,
            seeds=tuple(range(seeds)),
            estimators=estimators,
            trace=trace,
            policy=policy,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            limit=limit,
            figures=figures,
        )
        if json_output:
            print_json(
                {
                    "rmse": summary.to_dict(orient="records"),
                    "decisions": None if decisions is None else decisions.to_dict(orient="records"),
                }
            )
            return
        _print_frame(summary, "held-out RMSE of predicted ξ (baseline: the training median)")
        if decisions is not None:
            _print_frame(
                decisions,
                f"{policy} deciding with each belief; truth = measured ξ",
                [
                    "belief",
                    "validated",
                    "jct_avg",
                    "sharing_benefit",
                    "shared_jobs",
                    "decisions_same",
                    "belief_rmse_on_shared",
                ],
            )
        _print_files(files)

    @app.command()
    @user_errors
    def plot(
        schedule_path: Annotated[Path, typer.Argument(help="schedule JSON")],
        instance: Annotated[Path, typer.Option("--instance", "-i", help="the instance JSON it schedules")],
        output: Annotated[Path, typer.Option("--output", "-o", help="figure to write (.png, .pdf, .svg)")] = Path(
            "schedule.png"
        ),
        slotted: Annotated[
            bool | None, typer.Option("--slotted/--continuous", help="semantics (default: the schedule's)")
        ] = None,
        allow_invalid: Annotated[
            bool, typer.Option("--allow-invalid", help="draw a schedule that fails validation (else exit 2)")
        ] = False,
    ) -> None:
        """Per-GPU Gantt chart of a schedule (from the validator's occupancy intervals).

        A schedule that is not valid for the instance (the wrong instance, most often) exits 2 with the
        validator's first violations and writes nothing, unless --allow-invalid."""
        from benchmarks.replay import plot_schedule

        path, metrics = plot_schedule(schedule_path, instance, output, slotted=slotted, allow_invalid=allow_invalid)
        state = "valid" if metrics["valid"] else "[red]INVALID[/]"
        jct, makespan = metrics["jct_avg"], metrics["makespan"]
        numbers = (
            f"average JCT {jct:,.1f} s, makespan {makespan:,.1f} s"
            if math.isfinite(jct) and math.isfinite(makespan)
            else "no job completed"
        )
        console.print(f"wrote {path} ({state}; {numbers})", highlight=False)
