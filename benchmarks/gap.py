"""The optimality-gap study (``duetto gap``): policies against the exact oracle on random instances.

For every instance of a family (sizes × cluster shapes × arrival modes × interference ranges × seeds,
from :func:`formulation.generator.generate_instance`) the oracle solves it (one row per solver) and every
chosen policy runs in the slotted simulator with the **same slot length Δ** (one row per policy). Every
schedule is checked by the validator and its objective — total JCT, the exact model's objective — is
recomputed by :func:`formulation.metrics.compute_metrics`. Continuous-time figures are reported beside
(``continuous_*``: the policy simulated in continuous time; the oracle's decisions — starts, GPU sets,
accumulation steps — re-validated in continuous time, where jobs finish earlier than at their slot ends).

The gap of a method on an instance (:func:`add_gaps`) is ``(objective − reference) / reference``:

* ``gap_kind = "optimum"``: some solver proved optimality; the reference is that schedule's objective;
* ``gap_kind = "bound"``: no proof; the reference is the best proven lower bound of any solver (the gap
  to the bound over-states the true gap: it is an upper bound on it);
* ``gap_kind = "none"``: no bound at all.

The oracle is non-preemptive and uses the instance's capacity ``C``: a preemptive policy (column
``preemptive``) lives in a larger schedule space, so its gap may be negative without anything being
wrong. ``gap_to_best`` compares with the best valid schedule any method found on the instance.

One task = one (instance, method): tasks run in parallel (:mod:`benchmarks.runner`) and a rerun skips
finished ones, so adding a policy to a finished study runs only that policy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import (
    as_continuous,
    clean_float,
    default_workers,
    evaluate,
    metric_fields,
    simulate_policy,
    solve_oracle,
    solver_cpus,
)
from benchmarks.runner import Row, RowStore, RunSummary, run_tasks, write_table
from formulation.errors import DuettoInputError
from formulation.instance import Instance

ORACLE_PREFIX = "oracle:"
#: Objectives closer than this (relative) are equal (NOTES-oracle pitfall 8: round before comparing).
REL_EQ = 1e-9


@dataclass(frozen=True)
class GapStudy:
    """Parameters of a gap study (every combination of the tuples is one instance).

    Parameters
    ----------
    sizes
        Job counts.
    clusters
        ``(nodes, gpus_per_node)`` shapes.
    arrivals
        ``"zero"`` and/or ``"poisson"``.
    xi_ranges
        ξ ranges of the generator's interference table.
    seeds
        Generator seeds.
    policies
        Registered policy names (any name :func:`heuristics.registry.make_policy` accepts).
    solvers
        Oracle backends (``"cpsat"``, ``"highs"``, ``"pyomo:NAME"``).
    time_limit
        Seconds per exact solve.
    solver_time_limits
        Per-solver overrides of ``time_limit`` (e.g. ``{"highs": 10.0}``).
    load
        Offered load of Poisson arrivals.
    target_slots
        Slot rule: Δ = :func:`formulation.discretize.choose_slot` with this many slots.
    memory_pressure, duration_range
        Generator options.
    solver_options
        Extra options for ``solvers.solve`` (e.g. ``num_workers``).
    """

    sizes: tuple[int, ...] = (4, 6)
    clusters: tuple[tuple[int, int], ...] = ((1, 4),)
    arrivals: tuple[str, ...] = ("zero", "poisson")
    xi_ranges: tuple[tuple[float, float], ...] = ((1.0, 2.0),)
    seeds: tuple[int, ...] = (0, 1, 2)
    policies: tuple[str, ...] = ()
    solvers: tuple[str, ...] = ("cpsat",)
    time_limit: float = 60.0
    solver_time_limits: Mapping[str, float] = field(default_factory=dict)
    load: float = 1.0
    target_slots: int = 120
    memory_pressure: float = 0.3
    duration_range: tuple[float, float] = (60.0, 3600.0)
    solver_options: Mapping[str, Any] = field(default_factory=dict)

    def instance_specs(self) -> list[dict[str, Any]]:
        """One JSON-like spec per instance, in a fixed order."""
        specs = []
        for n, (nodes, gpn), arrival, (lo, hi), seed in itertools.product(
            self.sizes, self.clusters, self.arrivals, self.xi_ranges, self.seeds
        ):
            if arrival not in ("zero", "poisson"):
                raise DuettoInputError(f"must be 'zero' or 'poisson', got {arrival!r}", field="arrivals")
            specs.append(
                {
                    "n": int(n),
                    "nodes": int(nodes),
                    "gpus_per_node": int(gpn),
                    "arrivals": arrival,
                    "load": float(self.load) if arrival == "poisson" else None,
                    "xi_low": float(lo),
                    "xi_high": float(hi),
                    "seed": int(seed),
                    "memory_pressure": float(self.memory_pressure),
                    "duration_low": float(self.duration_range[0]),
                    "duration_high": float(self.duration_range[1]),
                    "target_slots": int(self.target_slots),
                }
            )
        return specs

    def check(self) -> None:
        """The generator's and the slot rule's own checks on each instance family of the study (a
        one-job instance of it), so that a bad argument (an inverted ξ range, a load of 0) stops the
        study before any task runs instead of failing every task. Raises :class:`DuettoInputError`."""
        seen: set[tuple[tuple[str, Any], ...]] = set()
        for spec in self.instance_specs():
            family = tuple(sorted((k, v) for k, v in spec.items() if k not in ("n", "seed")))
            if family not in seen:
                seen.add(family)
                instance_slot(build_instance({**spec, "n": 1}), int(spec["target_slots"]))

    def methods(self) -> list[str]:
        return [f"{ORACLE_PREFIX}{s}" for s in self.solvers] + list(self.policies)

    def time_limit_of(self, method: str) -> float:
        """Seconds for ``method`` (an ``oracle:`` method's solver may have its own limit)."""
        solver = method[len(ORACLE_PREFIX) :] if method.startswith(ORACLE_PREFIX) else method
        return float(self.solver_time_limits.get(solver, self.time_limit))

    def tasks(self) -> list[dict[str, Any]]:
        """One task per (instance, method)."""
        return [
            {
                "instance": spec,
                "method": method,
                "time_limit": self.time_limit_of(method),
                "solver_options": dict(self.solver_options),
            }
            for spec in self.instance_specs()
            for method in self.methods()
        ]


def instance_key(spec: Mapping[str, Any]) -> str:
    """Stable readable key of an instance spec (every parameter that produced it)."""
    load = f"-load{spec['load']:g}" if spec.get("load") is not None else ""
    return (
        f"n{spec['n']}-{spec['nodes']}x{spec['gpus_per_node']}-{spec['arrivals']}{load}"
        f"-xi{spec['xi_low']:g}-{spec['xi_high']:g}-mp{spec['memory_pressure']:g}"
        f"-d{spec['duration_low']:g}-{spec['duration_high']:g}-ts{spec['target_slots']}-s{spec['seed']}"
    )


def task_key(task: Mapping[str, Any]) -> str:
    limit = f"@{task['time_limit']:g}s" if str(task["method"]).startswith(ORACLE_PREFIX) else ""
    return f"{instance_key(task['instance'])}|{task['method']}{limit}"


def build_instance(spec: Mapping[str, Any]) -> Instance:
    """The generator's instance for ``spec``."""
    from formulation.generator import generate_instance

    return generate_instance(
        int(spec["n"]),
        int(spec["nodes"]),
        int(spec["gpus_per_node"]),
        int(spec["seed"]),
        arrivals=spec["arrivals"],
        load=float(spec["load"]) if spec.get("load") is not None else 1.0,
        xi_range=(float(spec["xi_low"]), float(spec["xi_high"])),
        duration_range=(float(spec["duration_low"]), float(spec["duration_high"])),
        memory_pressure=float(spec["memory_pressure"]),
    )


def instance_slot(instance: Instance, target_slots: int) -> float:
    from formulation.discretize import choose_slot

    return choose_slot(instance, target_slots)


def _base_row(spec: Mapping[str, Any], instance: Instance, slot: float, method: str) -> Row:
    return {
        "instance": instance_key(spec),
        **{k: spec[k] for k in ("n", "nodes", "gpus_per_node", "arrivals", "load", "xi_low", "xi_high", "seed")},
        "gpus": instance.cluster.num_gpus,
        "memory_pressure": spec["memory_pressure"],
        "duration_low": spec["duration_low"],
        "duration_high": spec["duration_high"],
        "slot": slot,
        "method": method,
    }


def run_gap_task(task: Mapping[str, Any]) -> list[Row]:
    """Solve or simulate one (instance, method) and return its row (see :func:`add_gaps` for gaps)."""
    spec = task["instance"]
    method = str(task["method"])
    instance = build_instance(spec)
    slot = instance_slot(instance, int(spec["target_slots"]))
    row = _base_row(spec, instance, slot, method)
    if method.startswith(ORACLE_PREFIX):
        row.update(_oracle_fields(instance, method[len(ORACLE_PREFIX) :], slot, task))
    else:
        row.update(_policy_fields(instance, method, slot))
    return [row]


def _oracle_fields(instance: Instance, solver: str, slot: float, task: Mapping[str, Any]) -> Row:
    time_limit = float(task["time_limit"])
    result, wall = solve_oracle(
        instance, solver, time_limit=time_limit, slot=slot, objective="jct", **dict(task.get("solver_options", {}))
    )
    if result.status.value == "error":
        # a backend failure is not a result: the task is not stored and runs again on the next run
        raise RuntimeError(f"solver {solver} failed: {result.message[-300:]}")
    fields: Row = {
        "method_kind": "oracle",
        "preemptive": False,
        "time_limit": time_limit,
        "status": str(result.status.value),
        "proven_optimal": bool(result.proven_optimal),
        "model_objective": clean_float(result.objective),
        "bound": clean_float(result.bound),
        "solver_gap": clean_float(result.gap),
        "build_seconds": clean_float(result.build_seconds),
        "solve_seconds": clean_float(result.solve_seconds),
        "wall_seconds": wall,
        "message": (result.message or "")[:300],
    }
    slotted = continuous = None
    if result.schedule is not None:
        slotted = evaluate(instance, result.schedule, slotted=True, slot=slot)
        continuous = evaluate(instance, as_continuous(result.schedule), slotted=False)
    fields.update(_evaluation_fields(slotted, continuous))
    return fields


def _policy_fields(instance: Instance, policy: str, slot: float) -> Row:
    from heuristics.registry import make_policy

    preemptive = bool(getattr(make_policy(policy), "preemptive", False))
    fields: Row = {
        "method_kind": "policy",
        "preemptive": preemptive,
        "time_limit": math.nan,
        "proven_optimal": False,
        "model_objective": math.nan,
        "bound": math.nan,
        "solver_gap": math.nan,
        "build_seconds": math.nan,
        "solve_seconds": math.nan,
    }
    try:
        simulation, wall = simulate_policy(instance, policy, slot=slot)
        slotted = evaluate(simulation.instance, simulation.schedule, slotted=True, slot=slot)
        continuous_run, _ = simulate_policy(instance, policy, slot=None)
        continuous = evaluate(continuous_run.instance, continuous_run.schedule, slotted=False)
    except DuettoInputError as error:
        # the policy cannot serve this instance (e.g. it needs per-stage times): say so, no numbers
        fields.update({"status": "skipped", "wall_seconds": math.nan, "message": str(error)[:300]})
        fields.update(_evaluation_fields(None, None))
        return fields
    fields.update({"status": "ok", "wall_seconds": wall, "message": ""})
    fields.update(_evaluation_fields(slotted, continuous))
    if not fields["validated"]:
        fields["status"] = "invalid"
        fields["message"] = "; ".join(str(v) for v in slotted.report.violations[:3])[:300]
    return fields


def _evaluation_fields(slotted: Any, continuous: Any) -> Row:
    fields: Row = {
        "validated": bool(slotted is not None and slotted.valid),
        "violations": len(slotted.report.violations) if slotted is not None else math.nan,
        "objective": clean_float(slotted.metrics["total_jct"]) if slotted is not None else math.nan,
        "continuous_validated": bool(continuous is not None and continuous.valid),
        "continuous_objective": clean_float(continuous.metrics["total_jct"]) if continuous is not None else math.nan,
    }
    fields.update(metric_fields(slotted))
    fields.update({f"continuous_{k}": v for k, v in metric_fields(continuous).items() if k != "total_jct"})
    return fields


# --- gaps, summary, figures -----------------------------------------------------------------------


def add_gaps(frame: pd.DataFrame) -> pd.DataFrame:
    """Add the reference and gap columns to the rows of a gap study (one row per instance × method).

    Added columns: ``opt_proven``, ``opt_objective`` (validator objective of a proven-optimal schedule),
    ``best_bound`` (largest proven lower bound of any solver), ``reference``, ``gap_kind``
    (``optimum`` / ``bound`` / ``none``), ``gap`` (``(objective − reference)/reference``; NaN without a
    valid schedule or reference), ``best_known`` and ``gap_to_best`` (against the best valid schedule of any
    method), ``continuous_gap_to_best``.
    """
    if frame.empty:
        return frame
    out = frame.copy()
    for column in (
        "opt_proven",
        "opt_objective",
        "best_bound",
        "reference",
        "gap_kind",
        "gap",
        "best_known",
        "gap_to_best",
        "continuous_gap_to_best",
    ):
        out[column] = math.nan
    out["gap_kind"] = "none"
    out["opt_proven"] = False
    for _, index in out.groupby("instance").groups.items():
        group = out.loc[index]
        oracle = group[group["method_kind"] == "oracle"]
        proven = oracle[oracle["proven_optimal"].astype(bool) & oracle["validated"].astype(bool)]
        opt = float(proven["objective"].min()) if not proven.empty else math.nan
        bounds = oracle["bound"].astype(float)
        best_bound = float(bounds.max()) if bounds.notna().any() else math.nan
        valid = group[group["validated"].astype(bool)]
        best_known = float(valid["objective"].min()) if not valid.empty else math.nan
        valid_cont = group[group["continuous_validated"].astype(bool)]
        best_cont = float(valid_cont["continuous_objective"].min()) if not valid_cont.empty else math.nan
        if math.isfinite(opt):
            reference, kind = opt, "optimum"
        elif math.isfinite(best_bound) and best_bound > 0:
            reference, kind = best_bound, "bound"
        else:
            reference, kind = math.nan, "none"
        out.loc[index, "opt_proven"] = math.isfinite(opt)
        out.loc[index, "opt_objective"] = opt
        out.loc[index, "best_bound"] = best_bound
        out.loc[index, "reference"] = reference
        out.loc[index, "gap_kind"] = kind
        out.loc[index, "best_known"] = best_known
        objective = group["objective"].astype(float)
        ok = group["validated"].astype(bool)
        if math.isfinite(reference) and reference > 0:
            gap = (objective - reference) / reference
            out.loc[index, "gap"] = np.where(ok, _snap(gap), math.nan)
        if math.isfinite(best_known) and best_known > 0:
            out.loc[index, "gap_to_best"] = np.where(ok, _snap((objective - best_known) / best_known), math.nan)
        if math.isfinite(best_cont) and best_cont > 0:
            cont = group["continuous_objective"].astype(float)
            cont_ok = group["continuous_validated"].astype(bool)
            relative = _snap((cont - best_cont) / best_cont)
            out.loc[index, "continuous_gap_to_best"] = np.where(cont_ok, relative, math.nan)
    out["opt_proven"] = out["opt_proven"].astype(bool)
    return out


def _snap(values: pd.Series | np.ndarray) -> np.ndarray:
    """Round relative differences within floating-point noise to exactly 0."""
    array = np.asarray(values, dtype=float)
    return np.where(np.abs(array) <= REL_EQ, 0.0, array)


def _stats(values: pd.Series, prefix: str) -> dict[str, float]:
    if not len(values):
        return {
            f"{prefix}_median": math.nan,
            f"{prefix}_p95": math.nan,
            f"{prefix}_max": math.nan,
            f"{prefix}_mean": math.nan,
        }
    return {
        f"{prefix}_median": float(values.median()),
        f"{prefix}_p95": float(np.percentile(values, 95)),
        f"{prefix}_max": float(values.max()),
        f"{prefix}_mean": float(values.mean()),
    }


def summarize(frame: pd.DataFrame, by: Sequence[str] = ("method", "n")) -> pd.DataFrame:
    """Per method and size: median / p95 / max / mean gap against a **proven optimum** (``gap_*``, over the
    instances some solver proved) and against the best **bound** where none did (``bound_gap_*``: an upper
    bound on the true gap), counts, fraction of instances proven optimal, median wall time."""
    if frame.empty:
        return pd.DataFrame()
    rows = []
    for keys, group in frame.groupby(list(by), sort=True):
        values: tuple[Any, ...] = keys if isinstance(keys, tuple) else (keys,)
        gaps = group["gap"].astype(float)
        proven = gaps[(group["gap_kind"] == "optimum") & gaps.notna()]
        bounded = gaps[(group["gap_kind"] == "bound") & gaps.notna()]
        rows.append(
            {
                **dict(zip(by, values, strict=True)),
                "instances": group["instance"].nunique(),
                "validated": int(group["validated"].astype(bool).sum()),
                "proven": len(proven),
                **_stats(proven, "gap"),
                "to_bound": len(bounded),
                **_stats(bounded, "bound_gap"),
                "proven_fraction": float(group["opt_proven"].astype(bool).mean()),
                "wall_median_s": float(group["wall_seconds"].astype(float).median()),
                "note": _note(group),
            }
        )
    return pd.DataFrame(rows)


def _note(group: pd.DataFrame) -> str:
    """Why some of a group's rows have no gap: ``skipped: <reason>`` (all), ``2 of 5 skipped: ...``,
    ``1 invalid: ...``; empty when every row has its numbers. The console shows it beside the numbers."""
    status = group["status"].astype(str) if "status" in group else pd.Series([], dtype=str)
    messages = group["message"].fillna("").astype(str) if "message" in group else pd.Series([""] * len(group))
    parts = []
    for kind in ("skipped", "invalid"):
        hit = status == kind
        if not hit.any():
            continue
        count = "" if hit.all() else f"{int(hit.sum())} of {len(group)} "
        reason = next((m for m in messages[hit] if m), "")
        parts.append(f"{count}{kind}" + (f": {reason}" if reason else ""))
    return "; ".join(parts)


def plot_gaps(frame: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Box plots of the gap per method, and the gap against n (median with p95 whisker)."""
    from benchmarks.plots import gap_boxplot, gap_vs_n

    out = Path(out_dir)
    return [gap_boxplot(frame, out / "gap_boxplot.png"), gap_vs_n(frame, out / "gap_vs_n.png")]


@dataclass
class GapOutcome:
    """Files and tables of a gap study run."""

    rows: pd.DataFrame
    summary: pd.DataFrame
    files: list[Path]
    run: RunSummary


def run_gap_study(
    study: GapStudy,
    out_dir: str | Path,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: bool = True,
    figures: bool = True,
    refresh: Sequence[str] = (),
) -> GapOutcome:
    """Run (or resume) a gap study into ``out_dir``.

    ``refresh`` names methods whose stored rows are dropped and recomputed (``"policies"``: every policy),
    e.g. after a policy changed, keeping the expensive oracle rows.

    Writes ``rows.jsonl`` (the resumable log), ``gap.csv`` / ``gap.parquet`` (tidy: one row per
    instance × method, gap columns added), ``summary.csv`` (per method and size) and, with ``figures``,
    ``gap_boxplot.png`` and ``gap_vs_n.png``.
    """
    if not study.methods():
        raise DuettoInputError("nothing to run: give at least one policy or solver", field="policies")
    study.check()
    out = Path(out_dir)
    store = RowStore(out / "rows.jsonl")
    tasks = study.tasks()
    if refresh:
        wanted = set(refresh)
        store.discard(
            task_key(t)
            for t in tasks
            if t["method"] in wanted or ("policies" in wanted and not str(t["method"]).startswith(ORACLE_PREFIX))
        )
    cpus = solver_cpus(study.solver_options)
    if workers is None and ray_address is None:
        workers = default_workers(bool(study.solvers), cpus)
    run = run_tasks(
        run_gap_task,
        tasks,
        key=task_key,
        store=store,
        workers=workers,
        ray_address=ray_address,
        progress=progress,
        description="gap study",
        ray_num_cpus=float(cpus),
    )
    keys = [task_key(t) for t in tasks]
    frame = add_gaps(store.frame(keys))
    files = write_table(frame, out / "gap")
    summary = summarize(frame)
    summary.to_csv(out / "summary.csv", index=False)
    files.append(out / "summary.csv")
    if figures and not frame.empty:
        files += plot_gaps(frame, out)
    return GapOutcome(frame, summary, files, run)
