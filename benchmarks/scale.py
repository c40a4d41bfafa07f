"""The scaling study (``duetto scale``): time to schedule against job count, exact solvers and policies.

Instances come from :func:`benchmarks.families.scaled_instance` (the standard random family, the cluster
growing with the job count: ``jobs_per_gpu`` jobs per GPU). For each method and size, every seed is one
task (run in parallel, resumable). Sizes are climbed in increasing order; a method stops climbing once
its median time at a size exceeds ``max_seconds`` (so a slow policy does not hold the study for hours).

Timing measures the work, not the start-up: before a policy's timed run, the same policy is simulated
once on a small instance of the family in the same worker (imports, the policy's first-call set-up);
that warm-up's wall time is the row's ``startup_seconds``, reported apart (a fresh worker's first task
used to absorb ~0.5 s of imports, flattening every policy's curve to a fitted exponent of 0.03). A run
shorter than :data:`MIN_TIMED_SECONDS` is repeated and its median kept (``repeats``).

Rows: ``method, n, seed, seconds`` (wall time of the solve / simulation), solver ``status``,
``proven_optimal``, ``solver_gap`` (``(objective − bound)/objective`` of the solver's own run), the
validator's objective and ``validated``. :func:`fit_growth` fits ``seconds ≈ c·n^b`` per method on log-log
axes (for solvers, only on sizes where every seed finished before the time limit: a time-limited run's
time is the limit, not its cost).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import clean_float, default_workers, evaluate, simulate_policy, solve_oracle, solver_cpus
from benchmarks.runner import Row, RowStore, RunSummary, run_tasks, write_table
from formulation.errors import DuettoInputError

ORACLE_PREFIX = "oracle:"


@dataclass(frozen=True)
class ScaleStudy:
    """Parameters of a scaling study.

    Parameters
    ----------
    solvers, solver_sizes
        Exact backends and the job counts they are run at.
    policies, policy_sizes
        Registered policies and their job counts (up to 10,000 by default).
    seeds
        Seeds per size.
    time_limit
        Seconds per exact solve.
    max_seconds
        A method stops climbing sizes once its median time at a size exceeds this.
    gpus_per_node, jobs_per_gpu, arrivals, load, xi_range
        Instance family (:func:`benchmarks.families.scaled_instance`).
    target_slots
        Slot rule for the slotted semantics (same Δ for solvers and policies at one size).
    """

    solvers: tuple[str, ...] = ("highs", "cpsat")
    solver_sizes: tuple[int, ...] = (4, 6, 8, 12, 16, 24)
    policies: tuple[str, ...] = ()
    policy_sizes: tuple[int, ...] = (10, 30, 100, 300, 1000, 3000, 10000)
    seeds: tuple[int, ...] = (0, 1, 2)
    time_limit: float = 60.0
    max_seconds: float = 300.0
    gpus_per_node: int = 4
    jobs_per_gpu: float = 2.0
    arrivals: str = "poisson"
    load: float = 1.0
    xi_range: tuple[float, float] = (1.0, 2.0)
    target_slots: int = 120
    solver_options: Mapping[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """The family's and the slot rule's own checks (on a one-job instance), so that a bad argument
        stops the study before any task runs. Raises :class:`DuettoInputError`."""
        from benchmarks.families import scaled_instance
        from formulation.discretize import choose_slot

        instance = scaled_instance(
            1,
            0,
            gpus_per_node=self.gpus_per_node,
            jobs_per_gpu=self.jobs_per_gpu,
            arrivals=self.arrivals,  # type: ignore[arg-type]  # checked by the generator
            load=self.load,
            xi_range=self.xi_range,
        )
        choose_slot(instance, self.target_slots)

    def ladder(self) -> list[tuple[str, list[int]]]:
        """(method, increasing sizes) for every method."""
        methods = [(f"{ORACLE_PREFIX}{s}", sorted(set(self.solver_sizes))) for s in self.solvers]
        methods += [(p, sorted(set(self.policy_sizes))) for p in self.policies]
        return methods

    def task(self, method: str, n: int, seed: int) -> dict[str, Any]:
        return {
            "method": method,
            "n": int(n),
            "seed": int(seed),
            "gpus_per_node": self.gpus_per_node,
            "jobs_per_gpu": float(self.jobs_per_gpu),
            "arrivals": self.arrivals,
            "load": float(self.load),
            "xi_low": float(self.xi_range[0]),
            "xi_high": float(self.xi_range[1]),
            "target_slots": int(self.target_slots),
            "time_limit": float(self.time_limit),
            "solver_options": dict(self.solver_options),
        }


def task_key(task: Mapping[str, Any]) -> str:
    limit = f"@{task['time_limit']:g}s" if str(task["method"]).startswith(ORACLE_PREFIX) else ""
    return (
        f"{task['method']}{limit}|n{task['n']}-g{task['gpus_per_node']}-jpg{task['jobs_per_gpu']:g}-{task['arrivals']}"
        f"-load{task['load']:g}-xi{task['xi_low']:g}-{task['xi_high']:g}-ts{task['target_slots']}-s{task['seed']}"
    )


def run_scale_task(task: Mapping[str, Any]) -> list[Row]:
    """Time one method on one instance."""
    from benchmarks.families import scaled_instance
    from formulation.discretize import choose_slot

    instance = scaled_instance(
        int(task["n"]),
        int(task["seed"]),
        gpus_per_node=int(task["gpus_per_node"]),
        jobs_per_gpu=float(task["jobs_per_gpu"]),
        arrivals=task["arrivals"],
        load=float(task["load"]),
        xi_range=(float(task["xi_low"]), float(task["xi_high"])),
    )
    slot = choose_slot(instance, int(task["target_slots"]))
    method = str(task["method"])
    row: Row = {
        "method": method,
        "method_kind": "oracle" if method.startswith(ORACLE_PREFIX) else "policy",
        "n": int(task["n"]),
        "seed": int(task["seed"]),
        "gpus": instance.cluster.num_gpus,
        "arrivals": task["arrivals"],
        "load": float(task["load"]),
        "xi_low": float(task["xi_low"]),
        "xi_high": float(task["xi_high"]),
        "slot": slot,
    }
    if method.startswith(ORACLE_PREFIX):
        time_limit = float(task["time_limit"])
        result, wall = solve_oracle(
            instance, method[len(ORACLE_PREFIX) :], time_limit=time_limit, slot=slot, **dict(task["solver_options"])
        )
        if result.status.value == "error":
            raise RuntimeError(f"solver {method} failed: {result.message[-300:]}")
        evaluation = evaluate(instance, result.schedule, slotted=True, slot=slot) if result.schedule else None
        row.update(
            {
                "time_limit": time_limit,
                "seconds": wall,
                "build_seconds": clean_float(result.build_seconds),
                "solve_seconds": clean_float(result.solve_seconds),
                "status": str(result.status.value),
                "proven_optimal": bool(result.proven_optimal),
                "solver_gap": clean_float(result.gap),
                "bound": clean_float(result.bound),
            }
        )
    else:
        try:
            row["startup_seconds"] = _warm_up(method, task)
            simulation, wall, repeats = _timed_simulation(instance, method, slot)
            row["repeats"] = repeats
        except DuettoInputError as error:
            # the policy cannot serve this family (e.g. Muri needs per-stage times): say so, no numbers
            row.update(
                {
                    "time_limit": math.nan,
                    "seconds": math.nan,
                    "build_seconds": math.nan,
                    "solve_seconds": math.nan,
                    "status": "skipped",
                    "proven_optimal": False,
                    "solver_gap": math.nan,
                    "bound": math.nan,
                    "validated": False,
                    "objective": math.nan,
                    "jct_avg": math.nan,
                    "message": str(error)[:300],
                }
            )
            return [row]
        evaluation = evaluate(simulation.instance, simulation.schedule, slotted=True, slot=slot)
        row.update(
            {
                "time_limit": math.nan,
                "seconds": wall,
                "build_seconds": math.nan,
                "solve_seconds": wall,
                "status": "ok",
                "proven_optimal": False,
                "solver_gap": math.nan,
                "bound": math.nan,
            }
        )
    row["validated"] = bool(evaluation is not None and evaluation.valid)
    row["objective"] = clean_float(evaluation.metrics["total_jct"]) if evaluation else math.nan
    row["jct_avg"] = clean_float(evaluation.metrics["jct_avg"]) if evaluation else math.nan
    return [row]


WARM_UP_JOBS = 4
MIN_TIMED_SECONDS = 0.2
"""A policy run shorter than this is repeated (at most :data:`MAX_REPEATS` times) and its median kept:
a sub-millisecond run is otherwise mostly the noise of a shared machine."""
MAX_REPEATS = 25


def _timed_simulation(instance: Any, policy: str, slot: float) -> tuple[Any, float, int]:
    """``(result, median wall seconds, runs)`` of simulating ``policy``: repeated while the runs so far
    took under :data:`MIN_TIMED_SECONDS` in all (the simulation is deterministic: same schedule)."""
    simulation, wall = simulate_policy(instance, policy, slot=slot)
    walls = [wall]
    while sum(walls) < MIN_TIMED_SECONDS and len(walls) < MAX_REPEATS:
        walls.append(simulate_policy(instance, policy, slot=slot)[1])
    return simulation, float(np.median(walls)), len(walls)


def _warm_up(policy: str, task: Mapping[str, Any]) -> float:
    """Simulate ``policy`` once on a small instance of the task's family (imports, first-call set-up)
    so that the timed run measures the work; returns the warm-up's wall seconds (the start-up)."""
    from benchmarks.families import scaled_instance
    from formulation.discretize import choose_slot

    small = scaled_instance(
        WARM_UP_JOBS,
        int(task["seed"]),
        gpus_per_node=int(task["gpus_per_node"]),
        jobs_per_gpu=float(task["jobs_per_gpu"]),
        arrivals=task["arrivals"],
        load=float(task["load"]),
        xi_range=(float(task["xi_low"]), float(task["xi_high"])),
    )
    _, wall = simulate_policy(small, policy, slot=choose_slot(small, int(task["target_slots"])))
    gc.collect()  # the imports' garbage, collected now rather than inside the timed run
    return wall


def fit_growth(frame: pd.DataFrame) -> pd.DataFrame:
    """Fit ``log seconds = a + b·log n`` per method on the median time per size.

    Solver sizes where some seed hit the time limit (not proven optimal) are censored and left out.

    Returns
    -------
    pandas.DataFrame
        ``method, exponent (b), intercept (a), points, r2, n_min, n_max``.
    """
    rows = []
    for method, group in frame.groupby("method", sort=False):
        group = group[group["seconds"].notna()]
        usable = group
        if (group["method_kind"] == "oracle").all():
            finished = group.groupby("n")["proven_optimal"].all()
            usable = group[group["n"].isin(finished[finished].index)]
        medians = usable.groupby("n")["seconds"].median()
        medians = medians[medians > 0]
        if len(medians) >= 2:
            x = np.log(medians.index.to_numpy(dtype=float))
            y = np.log(medians.to_numpy(dtype=float))
            slope, intercept = np.polyfit(x, y, 1)
            predicted = intercept + slope * x
            ss_res = float(np.sum((y - predicted) ** 2))
            ss_tot = float(np.sum((y - y.mean()) ** 2))
            r2 = 1 - ss_res / ss_tot if ss_tot > 0 else math.nan
        else:
            slope = intercept = r2 = math.nan
        rows.append(
            {
                "method": method,
                "exponent": float(slope),
                "intercept": float(intercept),
                "points": len(medians),
                "r2": r2,
                "n_min": int(medians.index.min()) if len(medians) else None,
                "n_max": int(medians.index.max()) if len(medians) else None,
            }
        )
    return pd.DataFrame(rows)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method and size: median / max seconds (and start-up apart), fraction proven optimal, median
    final solver gap, and a ``note``: why a row has no numbers (``skipped: <the reason>``)."""
    rows = []
    for (method, n), group in frame.groupby(["method", "n"], sort=True):
        startup = group["startup_seconds"].astype(float) if "startup_seconds" in group else pd.Series([math.nan])
        if group["seconds"].isna().all():
            # skipped: the method cannot serve the family; the row stays, with the reason
            messages = group["message"].dropna().astype(str) if "message" in group else pd.Series([], dtype=str)
            note = f"skipped: {messages.iloc[0]}" if len(messages) else "skipped"
            rows.append(
                {"method": method, "n": n, "runs": len(group), "seconds_median": math.nan, "seconds_max": math.nan}
                | {"startup_median": math.nan, "proven_fraction": math.nan, "solver_gap_median": math.nan}
                | {"validated": 0, "note": note}
            )
            continue
        rows.append(
            {
                "method": method,
                "n": n,
                "runs": len(group),
                "seconds_median": float(group["seconds"].median()),
                "seconds_max": float(group["seconds"].max()),
                "startup_median": float(startup.median()) if startup.notna().any() else math.nan,
                "proven_fraction": float(group["proven_optimal"].astype(bool).mean()),
                "solver_gap_median": float(group["solver_gap"].astype(float).median()),
                "validated": int(group["validated"].astype(bool).sum()),
                "note": "",
            }
        )
    return pd.DataFrame(rows)


@dataclass
class ScaleOutcome:
    rows: pd.DataFrame
    summary: pd.DataFrame
    fits: pd.DataFrame
    files: list[Path]
    runs: list[RunSummary]
    stopped: dict[str, int]  # method → first of its own sizes it was not run at
    reasons: dict[str, str] = field(default_factory=dict)  # method → why it stopped (or never ran)


def run_scale_study(
    study: ScaleStudy,
    out_dir: str | Path,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: bool = True,
    figures: bool = True,
) -> ScaleOutcome:
    """Run (or resume) a scaling study into ``out_dir``: ``rows.jsonl``, ``scale.csv`` / ``.parquet``,
    ``summary.csv``, ``fits.csv`` and ``scale_loglog.png``."""
    ladder = study.ladder()
    if not ladder:
        raise DuettoInputError("nothing to run: give at least one policy or solver", field="policies")
    study.check()
    out = Path(out_dir)
    store = RowStore(out / "rows.jsonl")
    sizes = sorted({n for _, ns in ladder for n in ns})
    active = {method for method, _ in ladder}
    stopped: dict[str, int] = {}
    reasons: dict[str, str] = {}
    own_sizes = dict(ladder)
    all_keys: list[str] = []
    runs: list[RunSummary] = []
    cpus = solver_cpus(study.solver_options)
    for n in sizes:
        tasks = [
            study.task(method, n, seed) for method, ns in ladder if method in active and n in ns for seed in study.seeds
        ]
        if not tasks:
            continue
        # a timing study: tasks that solve must not share cores (nor policies' with a solve's)
        solves = any(str(t["method"]).startswith(ORACLE_PREFIX) for t in tasks)
        runs.append(
            run_tasks(
                run_scale_task,
                tasks,
                key=task_key,
                store=store,
                workers=default_workers(solves, cpus) if workers is None and ray_address is None else workers,
                ray_address=ray_address,
                progress=progress,
                description=f"scale n={n}",
                ray_num_cpus=float(cpus if solves else 1),
            )
        )
        keys = [task_key(t) for t in tasks]
        all_keys += keys
        done = store.frame(keys)
        if done.empty:
            continue
        for method, group in done.groupby("method"):
            seconds = group["seconds"].astype(float)
            skipped = bool((group["status"] == "skipped").all())
            if skipped or float(seconds.median()) > study.max_seconds:
                active.discard(str(method))
                # the next of the method's own sizes (not a size of another method's ladder)
                following = [m for m in own_sizes[str(method)] if m > n]
                if following:
                    stopped[str(method)] = following[0]
                if skipped:
                    messages = list(group["message"].dropna().astype(str)) if "message" in group else []
                    why = messages[0] if messages else "the method cannot serve this family"
                    reasons[str(method)] = f"skipped at n={n}: {why}"
                else:
                    reasons[str(method)] = (
                        f"median {float(seconds.median()):.1f} s at n={n} is over --max-seconds {study.max_seconds:g}"
                    )
    frame = store.frame(all_keys)
    files = write_table(frame, out / "scale")
    summary = summarize(frame) if not frame.empty else pd.DataFrame()
    fits = fit_growth(frame) if not frame.empty else pd.DataFrame()
    summary.to_csv(out / "summary.csv", index=False)
    fits.to_csv(out / "fits.csv", index=False)
    files += [out / "summary.csv", out / "fits.csv"]
    if figures and not frame.empty:
        from benchmarks.plots import scaling_loglog

        fit_map = {
            str(r["method"]): (float(r["intercept"]), float(r["exponent"])) for r in fits.to_dict(orient="records")
        }
        timed = frame[frame["seconds"].notna()]
        if not timed.empty:
            files.append(scaling_loglog(timed, fit_map, out / "scale_loglog.png"))
    return ScaleOutcome(frame, summary, fits, files, runs, stopped, reasons)


def policy_sizes_arg(values: Sequence[int]) -> tuple[int, ...]:
    """Validate a list of sizes (each >= 1)."""
    for value in values:
        if value < 1:
            raise DuettoInputError(f"sizes must be >= 1, got {value}", field="sizes")
    return tuple(sorted(set(values)))
