"""Trace replay (``duetto replay``): policies on a public trace, reported in the papers' table shape.

A study is a trace (``formulation.traces.load_trace``), a cluster, one or more *interference variants*
and a list of policies; every (variant, policy) is one task (parallel, resumable). Each schedule is
validated and measured with :func:`formulation.metrics.compute_metrics`; the table has the shape of
SJF-BSBF's Tables III-IV — rows (metric, policy), columns all / large / small jobs, in hours — for
average JCT, average queueing delay, makespan and p99 JCT (large = more than ``large_threshold`` GPUs).

Interference variants (:func:`interference_from_spec`):

* ``default``: the loader's model (measured pairs for Gavel traces, per-stage times for Muri, a
  constant 1.5 for Pollux);
* ``constant:X``: every pair slows both jobs by ``X`` (SJF-BSBF Fig. 6b sweeps it from 1.0 to 2.0);
* ``gavel[:WORKER]``: Gavel's measured pairs (profiles must be Gavel job types);
* ``predicted[:WORKER]``: :class:`formulation.predictor.PredictedInterference` fitted on every Gavel
  pair, with Gavel's measured feasibility (profiles must be Gavel job types);
* ``table:FILE``: a measured pair table (:mod:`formulation.pair_tables`: ``victim,other,ratio``,
  isolated / co-located throughputs, or Lucid's ``colocate_info.csv``) applied to the profiles it
  names; other pairs keep the loader's ratios.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from benchmarks.common import evaluate, simulate_policy
from benchmarks.runner import Row, RowStore, RunSummary, run_tasks, write_table
from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.interference import ConstantInterference, InterferenceModel, TableInterference
from formulation.metrics import DEFAULT_LARGE_THRESHOLD
from formulation.trace_settings import trace_policy_options

HOUR = 3600.0

#: (label, all column, large column, small column) of the paper table; None: not reported.
TABLE_METRICS: tuple[tuple[str, str, str | None, str | None], ...] = (
    ("Average JCT", "jct_avg", "large_jct_avg", "small_jct_avg"),
    ("Average queueing", "queueing_avg", "large_queueing_avg", "small_queueing_avg"),
    ("Makespan", "makespan", None, None),
    ("p99 JCT", "jct_p99", "large_jct_p99", "small_jct_p99"),
)


def interference_from_spec(spec: str, instance: Instance, *, warn: bool = True) -> InterferenceModel | None:
    """The interference model named by ``spec`` for ``instance`` (``None``: keep the loader's).

    ``warn``: issue the :class:`~formulation.errors.DuettoWarning` of a pair table whose ratios below 1
    were clipped (a study's tasks pass ``False``: :func:`check_interference_specs` warned once).

    Raises
    ------
    DuettoInputError
        An unknown spec, a bad number, or a Gavel-based model on profiles that are not Gavel job types.
    """
    text = spec.strip()
    kind, _, argument = text.partition(":")
    kind = kind.lower()
    if kind == "default":
        return None
    if kind == "table":
        from formulation.pair_tables import pair_table_interference, read_pair_table

        if not argument.strip():
            raise DuettoInputError(f"expected 'table:FILE', got '{spec}'", field="interference")
        return pair_table_interference(read_pair_table(argument.strip(), warn=warn), instance)
    if kind == "constant":
        try:
            xi = float(argument)
        except ValueError:
            raise DuettoInputError(
                f"expected 'constant:X' with a number X >= 1, got '{spec}'", field="interference"
            ) from None
        return ConstantInterference(xi)
    if kind in ("gavel", "predicted"):
        from formulation.predictor import gavel_job_type
        from formulation.traces.gavel import expand_to_profiles, gavel_interference_table

        worker = argument or "v100"
        table = gavel_interference_table(worker)
        job_types = {name: gavel_job_type(name) for name in instance.profiles}
        known = {a for a, _ in table.pairs}
        unknown = sorted(name for name, job_type in job_types.items() if job_type not in known)
        if unknown:
            raise DuettoInputError(
                f"'{spec}' needs profiles named after Gavel job types; not one: {', '.join(unknown[:3])}",
                field="interference",
            )
        measured = expand_to_profiles(table, job_types)
        if kind == "gavel":
            return cast(InterferenceModel, measured)
        return cast(InterferenceModel, predicted_for_gavel_instance(instance, measured, worker))
    raise DuettoInputError(
        f"unknown interference '{spec}'; use default, constant:X, gavel[:WORKER], predicted[:WORKER] or table:FILE",
        field="interference",
    )


def check_interference_specs(specs: Sequence[str]) -> None:
    """Read every ``table:FILE`` of ``specs`` once, before a study's tasks run: a bad file is reported at
    once, and the clipping warning is issued here, once, not by every task."""
    from formulation.pair_tables import read_pair_table

    for spec in specs:
        kind, _, argument = spec.strip().partition(":")
        if kind.lower() == "table":
            if not argument.strip():
                raise DuettoInputError(f"expected 'table:FILE', got '{spec}'", field="interference")
            read_pair_table(argument.strip())


def predicted_for_gavel_instance(
    instance: Instance,
    measured: TableInterference,
    worker: str = "v100",
    *,
    seed: int = 0,
    exclude_pairs: Sequence[tuple[str, str]] = (),
    estimator: str = "gradient-boosting",
) -> Any:
    """:class:`~formulation.predictor.PredictedInterference` for an instance of Gavel job types, trained on
    every measured Gavel pair except ``exclude_pairs``; pairs the measured table forbids stay forbidden."""
    from formulation.predictor import PredictedInterference, fit_gavel_predictor, gavel_job_type

    predictor = fit_gavel_predictor(seed=seed, exclude_pairs=exclude_pairs, estimator=cast(Any, estimator))
    job_types = {name: gavel_job_type(name) for name in instance.profiles}
    forbidden = [pair for pair, xi in measured.pairs.items() if xi is None]
    return PredictedInterference.for_profiles(predictor, job_types, worker_type=worker, forbidden=forbidden)


@dataclass(frozen=True)
class ReplayStudy:
    """Parameters of a replay.

    Parameters
    ----------
    trace, paths
        Trace kind (``pollux``, ``muri``, ``gavel``, ``tiresias``, ``shockwave``) and files (several files
        of one kind, e.g. the 8 Pollux workloads: the table averages their metrics).
    policies
        Registered policy names.
    interference
        Interference variants (see the module docstring); each gets its own table.
    nodes, gpus_per_node, limit, capacity
        Loader options (``None``: the loader's default); ``capacity`` is also the simulator's ``C``.
    slot
        Slot length for the slotted semantics; ``None``: continuous time (the papers' simulators).
    restart_cost
        Seconds lost per preemption.
    large_threshold
        Jobs with more GPUs than this are large.
    loader_options
        Other keyword options of the loader.
    schedules_dir
        Where to save every schedule (default: ``schedules/`` in the output folder).
    bound_time_limit
        Seconds for each file's proven lower bound on total JCT (:mod:`benchmarks.trace_gap`);
        ``None``: no bound, no certified-gap table.
    """

    trace: str
    paths: tuple[str, ...]
    policies: tuple[str, ...]
    interference: tuple[str, ...] = ("default",)
    nodes: int | None = None
    gpus_per_node: int | None = None
    limit: int | None = None
    capacity: int | None = None
    slot: float | None = None
    restart_cost: float = 0.0
    large_threshold: int = DEFAULT_LARGE_THRESHOLD
    loader_options: Mapping[str, Any] = field(default_factory=dict)
    schedules_dir: str | None = None
    bound_time_limit: float | None = None

    def loader_kwargs(self) -> dict[str, Any]:
        from formulation.trace_settings import KIND_SETTINGS

        options = dict(self.loader_options)
        # the settings are part of a task's key where they change numbers (results stored before the
        # authors' settings became the default do not resume as if they were made with them)
        if self.trace in KIND_SETTINGS:
            options.setdefault("settings", "authors")
        else:
            options.pop("settings", None)
        for name in ("nodes", "gpus_per_node", "limit", "capacity"):
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        return options

    def tasks(self) -> list[dict[str, Any]]:
        return [
            {
                "trace": self.trace,
                "path": str(path),
                "loader": self.loader_kwargs(),
                "interference": variant,
                "policy": policy,
                "slot": self.slot,
                "restart_cost": float(self.restart_cost),
                "large_threshold": int(self.large_threshold),
                "schedules_dir": self.schedules_dir,
            }
            for path in self.paths
            for variant in self.interference
            for policy in self.policies
        ]


def task_key(task: Mapping[str, Any]) -> str:
    loader = json.dumps(task["loader"], sort_keys=True)
    return (
        f"{task['trace']}:{Path(task['path']).resolve()}|{loader}|{task['interference']}|{task['policy']}"
        f"|slot={task['slot']}|restart={task['restart_cost']:g}|large>{task['large_threshold']}"
    )


def load_replay_instance(task: Mapping[str, Any]) -> Instance:
    """The trace of a task with its interference variant applied."""
    from formulation.traces import load_trace

    instance = load_trace(task["trace"], task["path"], **dict(task["loader"]))
    model = interference_from_spec(str(task["interference"]), instance, warn=False)
    return instance if model is None else instance.replace(interference=model)


def _file_stem(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def run_replay_task(task: Mapping[str, Any]) -> list[Row]:
    """Simulate one policy on one variant of the trace; one row of metrics (plus per-job JCTs)."""
    instance = load_replay_instance(task)
    slot = task.get("slot")
    threshold = int(task["large_threshold"])
    simulation, wall = simulate_policy(
        instance,
        task["policy"],
        slot=slot,
        restart_cost=float(task["restart_cost"]),
        policy_options=trace_policy_options(instance, task["policy"]),
    )
    evaluation = evaluate(
        simulation.instance, simulation.schedule, slotted=slot is not None, slot=slot, large_threshold=threshold
    )
    metrics = evaluation.metrics
    completion = evaluation.report.completion
    jobs = [j for j in instance.jobs if j.id in completion]
    jct = np.asarray([completion[j.id] - j.arrival for j in jobs], dtype=float)
    large = np.asarray([j.num_gpus > threshold for j in jobs], dtype=bool)
    row: Row = {
        "trace": task["trace"],
        "path": str(task["path"]),
        "file": Path(task["path"]).name,
        "interference": task["interference"],
        "policy": task["policy"],
        "jobs": len(instance.jobs),
        "gpus": instance.cluster.num_gpus,
        "nodes": instance.cluster.nodes,
        "gpus_per_node": instance.cluster.gpus_per_node,
        "capacity": simulation.instance.cluster.capacity,
        "slot": slot,
        "restart_cost": float(task["restart_cost"]),
        "large_threshold": threshold,
        "validated": evaluation.valid,
        "violations": len(evaluation.report.violations),
        "wall_seconds": wall,
        "preemptions": int(getattr(simulation.stats, "preemptions", 0)),
        **{k: v for k, v in metrics.items() if isinstance(v, int | float | bool)},
        "large_jct_p99": float(np.percentile(jct[large], 99)) if large.any() else math.nan,
        "small_jct_p99": float(np.percentile(jct[~large], 99)) if (~large).any() else math.nan,
        "job_jct": [float(v) for v in jct],
        "job_large": [bool(v) for v in large],
    }
    if task.get("schedules_dir"):
        from formulation import io

        trace_folder = _file_stem(Path(task["path"]).stem)
        folder = Path(task["schedules_dir"]) / trace_folder / _file_stem(str(task["interference"]))
        io.save_schedule(simulation.schedule, folder / f"{_file_stem(str(task['policy']))}.json")
        io.write_json_atomic(folder / "instance.json", io.instance_to_dict(simulation.instance))
    return [row]


#: weight of each averaged column when files are pooled: the jobs it averages over
_POOL_WEIGHTS = {
    "jct_avg": "completed",
    "queueing_avg": "jobs",
    "large_jct_avg": "large_jobs",
    "large_queueing_avg": "large_jobs",
    "small_jct_avg": "small_jobs",
    "small_queueing_avg": "small_jobs",
}


def _pooled(rows: pd.DataFrame, column: str) -> float:
    """``column`` of one policy over several files, with every job counting once (not every file)."""
    if column == "makespan":
        return float(rows[column].astype(float).mean())  # no pooled meaning: the mean over files
    if column.endswith("_p99") and "job_jct" in rows and "job_large" in rows and rows["job_large"].notna().all():
        pooled = [
            jct
            for jcts, larges in zip(rows["job_jct"], rows["job_large"], strict=True)
            for jct, large in zip(jcts, larges, strict=True)
            if column == "jct_p99" or large == column.startswith("large_")
        ]
        return float(np.percentile(pooled, 99)) if pooled else math.nan
    weight_column = _POOL_WEIGHTS.get(column)
    if weight_column is None or weight_column not in rows:
        return float(rows[column].astype(float).mean())
    values = rows[column].astype(float).to_numpy()
    weights = rows[weight_column].astype(float).to_numpy()
    keep = np.isfinite(values) & (weights > 0)
    return float(np.average(values[keep], weights=weights[keep])) if keep.any() else math.nan


def paper_table(frame: pd.DataFrame, *, unit: float = HOUR) -> pd.DataFrame:
    """SJF-BSBF Table III shape: index (metric, policy), columns All / Large / Small (in ``unit``).

    With several rows per policy (several trace files) the jobs are **pooled**: an average is over
    every job of every file (each file weighted by its jobs, large and small by their own counts, so
    All lies between Large and Small), a p99 is over every job's JCT; the makespan, which has no pooled
    meaning, is the mean over files. (Averaging files equally put "All" below both "Large" and "Small"
    on Gavel's seed-1 traces: "Large" counted only the files that have large jobs.)
    """
    columns = [c for _, *cols in TABLE_METRICS for c in cols if c is not None and c in frame.columns]
    frame = pd.DataFrame(
        [
            {"policy": policy, **{c: _pooled(rows, c) for c in columns}}
            for policy, rows in frame.groupby("policy", sort=False)
        ]
    )
    records = []
    for label, all_col, large_col, small_col in TABLE_METRICS:
        for values in frame.to_dict(orient="records"):
            records.append(
                {
                    "metric": label,
                    "policy": values["policy"],
                    "All": values.get(all_col, math.nan) / unit,
                    "Large": values.get(large_col, math.nan) / unit if large_col else math.nan,
                    "Small": values.get(small_col, math.nan) / unit if small_col else math.nan,
                }
            )
    return pd.DataFrame(records).set_index(["metric", "policy"])


@dataclass
class ReplayOutcome:
    rows: pd.DataFrame
    tables: dict[str, pd.DataFrame]  # interference variant → paper table
    files: list[Path]
    run: RunSummary
    #: interference variant → certified gaps (:func:`benchmarks.trace_gap.certified_gap_table`)
    certified: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: one proven bound per file and variant (:func:`benchmarks.trace_gap.replay_bounds`)
    bounds: pd.DataFrame = field(default_factory=pd.DataFrame)


def run_replay(
    study: ReplayStudy,
    out_dir: str | Path,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: bool = True,
    figures: bool = True,
) -> ReplayOutcome:
    """Run (or resume) a replay into ``out_dir``: ``rows.jsonl``, ``replay.csv`` / ``.parquet`` (one row
    per file × variant × policy), ``table-<variant>.csv`` (paper shape, jobs of all files pooled),
    ``jct_cdf-<variant>.png`` (jobs of every file) and, when every variant is a constant ξ,
    ``sweep_jct.png`` (average JCT against ξ, mean over files)."""
    if not study.policies:
        raise DuettoInputError("give at least one policy", field="policies")
    from heuristics.registry import make_policy

    for name in study.policies:
        make_policy(name)  # an unknown name fails here, naming the known ones
    check_interference_specs(study.interference)
    out = Path(out_dir)
    store = RowStore(out / "rows.jsonl")
    tasks = study.tasks()
    pending = [t for t in tasks if task_key(t) not in store]
    checked: set[tuple[str, str]] = set()
    for task in pending:
        # a bad file, cluster or interference variant fails here once, with its message, not in every task
        pair = (str(task["path"]), str(task["interference"]))
        if pair not in checked:
            load_replay_instance(task)
            checked.add(pair)
    if study.schedules_dir is None:
        tasks = [{**t, "schedules_dir": str(out / "schedules")} for t in tasks]
    run = run_tasks(
        run_replay_task,
        tasks,
        key=task_key,
        store=store,
        workers=workers,
        ray_address=ray_address,
        progress=progress,
        description="replay",
    )
    frame = store.frame([task_key(t) for t in tasks])
    files: list[Path] = []
    tables: dict[str, pd.DataFrame] = {}
    if frame.empty:
        return ReplayOutcome(frame, tables, files, run)
    files += write_table(frame.drop(columns=["job_jct", "job_large"], errors="ignore"), out / "replay")
    for variant, rows in frame.groupby("interference", sort=False):
        table = paper_table(rows)
        tables[str(variant)] = table
        path = out / f"table-{_file_stem(str(variant))}.csv"
        table.to_csv(path)
        files.append(path)
        if figures:
            from benchmarks.plots import jct_cdf

            jcts: dict[str, list[float]] = {}
            for record in rows.to_dict(orient="records"):
                jcts.setdefault(str(record["policy"]), []).extend(record["job_jct"])
            files.append(jct_cdf(jcts, out / f"jct_cdf-{_file_stem(str(variant))}.png"))
    certified: dict[str, pd.DataFrame] = {}
    bounds = pd.DataFrame()
    if study.bound_time_limit is not None:
        from benchmarks.trace_gap import certified_gap_table, replay_bounds

        bounds = replay_bounds(tasks, frame, out, time_limit=study.bound_time_limit)
        gaps = certified_gap_table(frame, bounds)
        for variant in dict.fromkeys(frame["interference"]):
            if variant in gaps.index.get_level_values("interference"):
                certified[str(variant)] = cast(pd.DataFrame, gaps.xs(variant, level="interference"))
                path = out / f"certified_gap-{_file_stem(str(variant))}.csv"
                certified[str(variant)].to_csv(path)
                files.append(path)
    variants = list(dict.fromkeys(frame["interference"]))
    if figures and len(variants) > 1 and all(str(v).startswith("constant:") for v in variants):
        from benchmarks.plots import line_sweep

        sweep = (
            frame.assign(xi=[float(str(v).split(":", 1)[1]) for v in frame["interference"]])
            .groupby(["policy", "xi"], sort=False)["jct_avg"]
            .mean()
            .reset_index()
        )
        sweep["jct_hours"] = sweep["jct_avg"] / HOUR
        files.append(
            line_sweep(
                sweep,
                "xi",
                "jct_hours",
                "policy",
                out / "sweep_jct.png",
                xlabel="interference ratio ξ (all pairs)",
                ylabel="average JCT (hours)",
                title="Average JCT against the interference ratio",
            )
        )
    return ReplayOutcome(frame, tables, files, run, certified, bounds)


def load_instance_any(path: str | Path) -> Instance:
    """Read an instance JSON, including the ``predicted`` interference kind that ``formulation.io`` cannot
    read yet (:class:`~formulation.predictor.PredictedInterference`)."""
    from formulation import io

    data = io.read_json(path)
    spec = data.get("interference") if isinstance(data, dict) else None
    if not (isinstance(spec, dict) and spec.get("kind") == "predicted"):
        return io.load_instance(path)
    from formulation.predictor import PredictedInterference

    placeholder = {**data, "interference": {"kind": "constant", "xi": 1.0}}
    instance = io.instance_from_dict(placeholder, source=str(path))
    return instance.replace(interference=cast(InterferenceModel, PredictedInterference.from_dict(spec)))


def plot_schedule(
    schedule_path: str | Path,
    instance_path: str | Path,
    out: str | Path,
    *,
    slotted: bool | None = None,
    allow_invalid: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """Gantt chart of a schedule file (validated against the instance file). Returns the figure path and
    the schedule's metrics.

    Raises
    ------
    DuettoInputError
        The schedule is invalid for the instance (e.g. the wrong instance), naming the first
        violations, unless ``allow_invalid``: nothing is written.
    """
    from benchmarks.plots import check_figure_path, gantt
    from formulation import io

    check_figure_path(out)  # before any work: a name matplotlib cannot write is the user's mistake
    instance = load_instance_any(instance_path)
    schedule = io.load_schedule(schedule_path)
    evaluation = evaluate(instance, schedule, slotted=slotted)
    violations = evaluation.report.violations
    if violations and not allow_invalid:
        first = "; ".join(str(v) for v in violations[:3])
        raise DuettoInputError(
            f"the schedule is not valid for instance '{instance.name}' ({len(violations)} violations; the wrong "
            f"instance?): {first}; pass --allow-invalid to draw it anyway",
            source=str(schedule_path),
        )
    jct = evaluation.metrics["jct_avg"]
    title = (
        f"{instance.name} — {schedule.producer} (avg JCT "
        + (f"{jct:.0f} s" if math.isfinite(jct) else "none completed")
        + ("" if evaluation.report.ok else f", {len(evaluation.report.violations)} violations")
        + ")"
    )
    return gantt(instance, evaluation.report, out, title=title), evaluation.metrics
