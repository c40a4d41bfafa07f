"""Certified gaps for trace replays: every policy's average JCT against a proven lower bound.

For each (trace file, interference variant) of a replay, :func:`formulation.trace_bound.trace_lower_bound`
bounds the total JCT of *any* schedule of that instance (preemptive or not, with the capacity the
replay simulated). A policy's **certified gap** is ``(its total JCT − bound) / bound``, pooled over the
files: the sum of every file's total JCT over the sum of every file's bound, so a file counts by its
jobs, not once. The gap is an upper bound on the policy's true distance to the optimum.

Bounds are cached in ``bounds.jsonl`` in the replay's folder (a rerun reuses them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from formulation.instance import Instance
from formulation.progress import SPEC_PROGRESS
from formulation.trace_bound import TraceBound, trace_lower_bound

HOUR = 3600.0


def bound_key(task: Mapping[str, Any], capacity: int) -> str:
    """Cache key: the file, the loader options, the interference variant and the capacity."""
    loader = json.dumps(task["loader"], sort_keys=True)
    return f"{task['path']}|{loader}|{task['interference']}|C={capacity}"


def _with_capacity(instance: Instance, capacity: int) -> Instance:
    if instance.cluster.capacity == capacity:
        return instance
    from dataclasses import replace

    return instance.replace(cluster=replace(instance.cluster, capacity=capacity))


def replay_bounds(
    tasks: Sequence[Mapping[str, Any]],
    rows: pd.DataFrame,
    out_dir: str | Path,
    *,
    time_limit: float,
    threads: int = 1,
) -> pd.DataFrame:
    """One proven bound per (file, interference variant), computed or read from ``bounds.jsonl``.

    The capacity is the largest any policy used on that file and variant (a bound for a larger
    capacity holds for a smaller one), so every row of the replay is certified by it.

    Returns
    -------
    DataFrame
        Columns ``path``, ``interference``, ``capacity``, ``jobs``, ``bound_total_jct``,
        ``bound_jct_avg``, ``method``, ``lp_status``, ``bound_seconds`` and the components.
    """
    from benchmarks.replay import load_replay_instance

    path = Path(out_dir) / "bounds.jsonl"
    cached: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                cached[record["key"]] = record
    records = []
    seen: set[tuple[str, str]] = set()
    for task in tasks:
        pair = (str(task["path"]), str(task["interference"]))
        if pair in seen:
            continue
        seen.add(pair)
        mask = (rows["path"] == pair[0]) & (rows["interference"] == pair[1]) if not rows.empty else None
        capacities = rows.loc[mask, "capacity"] if mask is not None and "capacity" in rows else pd.Series([], dtype=int)
        instance = load_replay_instance(task)
        if instance.progress != SPEC_PROGRESS:
            continue  # the bound is proven for SPEC.md's progress rule only (Muri's rule: no certified gap)
        capacity = int(max([instance.cluster.capacity, *[int(c) for c in capacities.dropna()]]))
        key = bound_key(task, capacity)
        if key not in cached:
            bound = trace_lower_bound(_with_capacity(instance, capacity), time_limit=time_limit, threads=threads)
            record = {"key": key, "path": pair[0], "interference": pair[1], "capacity": capacity, **_flat(bound)}
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            cached[key] = record
        records.append(cached[key])
    return pd.DataFrame(records)


def _flat(bound: TraceBound) -> dict[str, Any]:
    return {
        "jobs": bound.num_jobs,
        "bound_total_jct": bound.total_jct,
        "bound_jct_avg": bound.average_jct,
        "method": bound.method,
        "lp_status": bound.lp_status,
        "bound_seconds": bound.seconds,
        "intervals": bound.intervals,
        **{f"bound_{name}": value for name, value in bound.components.items()},
    }


def certified_gap_table(rows: pd.DataFrame, bounds: pd.DataFrame, *, unit: float = HOUR) -> pd.DataFrame:
    """Per interference variant and policy: pooled average JCT, the bound's, and the certified gap.

    Parameters
    ----------
    rows
        The replay's rows (``path``, ``interference``, ``policy``, ``jobs``, ``jct_avg``).
    bounds
        :func:`replay_bounds`' frame.
    unit
        Seconds per reported unit (hours by default).

    Returns
    -------
    DataFrame
        Index (``interference``, ``policy``); columns ``files``, ``jobs``, ``jct_avg``,
        ``bound_jct_avg`` (in ``unit``) and ``gap_pct``. Files whose bound is missing are left out.
    """
    if rows.empty or bounds.empty:
        return pd.DataFrame(columns=["interference", "policy", "files", "jobs", "jct_avg", "bound_jct_avg", "gap_pct"])
    merged = rows.merge(bounds[["path", "interference", "bound_total_jct"]], on=["path", "interference"], how="inner")
    merged = merged.assign(total_jct=merged["jct_avg"] * merged["jobs"])
    grouped = merged.groupby(["interference", "policy"], sort=False)
    table = pd.DataFrame(
        {
            "files": grouped["path"].nunique(),
            "jobs": grouped["jobs"].sum(),
            "jct_avg": grouped["total_jct"].sum() / grouped["jobs"].sum() / unit,
            "bound_jct_avg": grouped["bound_total_jct"].sum() / grouped["jobs"].sum() / unit,
        }
    )
    table["gap_pct"] = np.where(
        table["bound_jct_avg"] > 0,
        (table["jct_avg"] - table["bound_jct_avg"]) / table["bound_jct_avg"] * 100,
        np.nan,
    )
    return table
