"""Optimality gap and decision time of SJF-BSBF and its rollout look-ahead (issue 5, item 6).

Target: median gap <= 3 %, p95 <= 10 % on the standard random family at n <= 12, with decision time that
still scales to 1,000 pending jobs.

Usage::

    python -m benchmarks.lookahead_gap                        # both parts, default family
    python -m benchmarks.lookahead_gap --part gap --sizes 8,10 --seeds 0-3 --time-limit 60
    python -m benchmarks.lookahead_gap --part time
    python -m benchmarks.lookahead_gap --cache /tmp/oracle.json   # reuse exact solves between runs

Part ``gap``: for every instance of the family (sizes × clusters × arrival modes × seeds, from
:func:`formulation.generator.generate_instance`), the exact oracle (``solvers.solve``, CP-SAT, slot
``Δ = choose_slot(instance, 120)``) and both policies in the simulator with the **same** ``Δ`` (the
oracle schedule's). Every schedule is validated and its total JCT recomputed by
:func:`formulation.metrics.compute_metrics`. The gap of a policy is ``(policy − optimum) / optimum`` on
instances the oracle proved optimal; instances it did not prove are reported apart, with the gap to the
oracle's incumbent (a lower bound of the true gap when the policy is better than the incumbent, which
happens) and to the proven lower bound (an upper bound of the true gap).

Part ``time``: wall and CPU time of ``decide`` on 64 GPUs (8 nodes × 8) at about 100 and 1,000 pending
jobs: a zero-arrival instance of ``pending + 150`` jobs is simulated; after the first (burst) decision
every decision starts one or a few jobs, so the next ones see ``pending`` ± 10 % jobs; the first
``samples`` of those are timed (the run stops there). The burst decision (all GPUs idle, every job
pending) is reported apart.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from formulation.generator import generate_instance
from formulation.instance import Instance
from heuristics.core import Action, ClusterView, Policy
from heuristics.registry import make_policy
from heuristics.simulator import simulate

POLICIES: tuple[str, ...] = ("sjf-bsbf", "sjf-bsbf-lookahead")
CLUSTERS: tuple[tuple[int, int], ...] = ((1, 4), (2, 4), (1, 8))


# --- part 1: the gap ----------------------------------------------------------------------------------


def instance_key(n: int, nodes: int, gpus_per_node: int, arrivals: str, seed: int) -> str:
    return f"n{n}-{nodes}x{gpus_per_node}-{arrivals}-s{seed}"


def oracle_entry(instance: Instance, time_limit: float, num_workers: int) -> dict[str, Any]:
    """Solve ``instance`` exactly (CP-SAT through ``solvers.solve``) and recompute its total JCT."""
    from formulation.discretize import choose_slot
    from formulation.io import schedule_to_dict
    from formulation.metrics import compute_metrics
    from formulation.validator import validate
    from solvers import solve

    clock = time.perf_counter()
    result = solve(
        instance,
        solver="cpsat",
        time_limit=time_limit,
        slot=choose_slot(instance, 120),
        options={"num_workers": num_workers},
    )
    entry: dict[str, Any] = {
        "status": result.status.value,
        "seconds": time.perf_counter() - clock,
        "bound": result.bound if math.isfinite(result.bound) else None,
    }
    if result.schedule is None:
        return entry
    report = validate(instance, result.schedule)
    entry.update(
        {
            "valid": report.ok,
            "slot": result.schedule.slot,
            "total_jct": compute_metrics(instance, report)["total_jct"] if report.ok else None,
            "schedule": schedule_to_dict(result.schedule),
        }
    )
    return entry


def policy_total_jct(instance: Instance, policy: str, slot: float) -> tuple[float, bool]:
    """Total JCT (validator + metrics) of ``policy`` simulated with slot ``Δ``, and whether it is valid."""
    result = simulate(instance, make_policy(policy), slot=slot)
    assert result.report is not None and result.metrics is not None
    return float(result.metrics["total_jct"]), bool(result.report.ok)


def gap_rows(
    sizes: Sequence[int],
    seeds: Sequence[int],
    *,
    clusters: Sequence[tuple[int, int]] = CLUSTERS,
    arrivals: Sequence[str] = ("zero", "poisson"),
    policies: Sequence[str] = POLICIES,
    time_limit: float = 60.0,
    num_workers: int = 2,
    cache: Path | None = None,
    verbose: bool = True,
) -> pd.DataFrame:
    """One row per (instance, policy): objective, oracle status/objective/bound, gaps."""
    store: dict[str, Any] = json.loads(cache.read_text()) if cache is not None and cache.exists() else {}
    rows = []
    for n in sizes:
        for nodes, gpn in clusters:
            for mode in arrivals:
                for seed in seeds:
                    key = instance_key(n, nodes, gpn, mode, seed)
                    instance = generate_instance(n, nodes, gpn, seed, arrivals=mode)  # type: ignore[arg-type]
                    entry = store.get(key)
                    if entry is None or (entry["status"] != "optimal" and entry.get("time_limit", 0) < time_limit):
                        entry = oracle_entry(instance, time_limit, num_workers)
                        entry["time_limit"] = time_limit
                        store[key] = entry
                        if cache is not None:
                            cache.write_text(json.dumps(store))
                    if entry.get("total_jct") is None:
                        if verbose:
                            print(f"{key}: oracle gave no valid schedule ({entry['status']})", flush=True)
                        continue
                    optimum = float(entry["total_jct"])
                    bound = entry.get("bound")
                    line = [f"{key}: oracle {entry['status']} {optimum:.0f} ({entry['seconds']:.1f}s)"]
                    for policy in policies:
                        value, valid = policy_total_jct(instance, policy, float(entry["slot"]))
                        rows.append(
                            {
                                "instance": key,
                                "n": n,
                                "cluster": f"{nodes}x{gpn}",
                                "arrivals": mode,
                                "seed": seed,
                                "policy": policy,
                                "total_jct": value,
                                "valid": valid,
                                "oracle_status": entry["status"],
                                "oracle_total_jct": optimum,
                                "oracle_bound": bound,
                                "proven": entry["status"] == "optimal",
                                "gap": value / optimum - 1.0,
                                "gap_to_bound": value / bound - 1.0 if bound else math.nan,
                            }
                        )
                        line.append(f"{policy} {100 * (value / optimum - 1):+.1f}%")
                    if verbose:
                        print("  ".join(line), flush=True)
    return pd.DataFrame(rows)


def summarize_gaps(frame: pd.DataFrame) -> pd.DataFrame:
    """Median / p95 / mean / max gap per policy: by size, by arrival mode and overall, on the instances the
    oracle proved (``reference = optimum``) and, apart, on the others (``reference = bound``: gap to the
    proven lower bound, an upper bound on the true gap; ``median_vs_incumbent_%``: gap to the oracle's
    best schedule, which a policy may beat)."""
    out = []
    for (policy, proven), group in frame.groupby(["policy", "proven"], sort=False):
        column = "gap" if proven else "gap_to_bound"
        subsets: list[tuple[str, pd.DataFrame]] = [(f"n={n}", sub) for n, sub in sorted(group.groupby("n"))]
        subsets += [(str(mode), sub) for mode, sub in sorted(group.groupby("arrivals"))]
        subsets.append(("all", group))
        for label, sub in subsets:
            values = sub[column].dropna()
            if values.empty:
                continue
            row: dict[str, Any] = {
                "policy": policy,
                "reference": "optimum" if proven else "bound",
                "subset": label,
                "instances": len(values),
                "median_%": 100 * float(np.median(values)),
                "p95_%": 100 * float(np.percentile(values, 95)),
                "mean_%": 100 * float(np.mean(values)),
                "max_%": 100 * float(np.max(values)),
            }
            if not proven:
                row["median_vs_incumbent_%"] = 100 * float(np.median(sub["gap"]))
            out.append(row)
    return pd.DataFrame(out)


# --- part 2: decision time -------------------------------------------------------------------------------


class _Enough(Exception):
    """Raised by the timing wrapper once it has its samples (ends the simulation early)."""


class _Timed:
    """Times every ``decide`` of ``inner`` that sees ``pending`` ± 10 % jobs (after the first)."""

    def __init__(self, inner: Policy, pending: int, samples: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.round_length = inner.round_length
        self.low, self.high = int(0.9 * pending), math.ceil(1.1 * pending)
        self.samples = samples
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.first: tuple[float, float] | None = None

    def reset(self) -> None:
        reset = getattr(self.inner, "reset", None)
        if reset is not None:
            reset()

    def decide(self, view: ClusterView) -> Sequence[Action]:
        wall, cpu = time.perf_counter(), time.process_time()
        actions = self.inner.decide(view)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if self.first is None:
            self.first = (wall, cpu)
        elif self.low <= len(view.pending) <= self.high:
            self.wall.append(wall)
            self.cpu.append(cpu)
            if len(self.wall) >= self.samples:
                raise _Enough
        return actions


def decision_times(
    policy: str, pending: int, *, samples: int = 50, seed: int = 0, nodes: int = 8, gpus_per_node: int = 8
) -> dict[str, float]:
    """Median / p95 wall and CPU milliseconds of ``decide`` at about ``pending`` pending jobs."""
    instance = generate_instance(pending + 150, nodes, gpus_per_node, seed, arrivals="zero")
    timed = _Timed(make_policy(policy), pending, samples)
    with contextlib.suppress(_Enough):
        simulate(instance, timed, validate=False)
    assert timed.first is not None
    return {
        "decisions": float(len(timed.wall)),
        "median_ms": 1e3 * statistics.median(timed.wall),
        "p95_ms": 1e3 * float(np.percentile(timed.wall, 95)),
        "median_cpu_ms": 1e3 * statistics.median(timed.cpu),
        "p95_cpu_ms": 1e3 * float(np.percentile(timed.cpu, 95)),
        "burst_ms": 1e3 * timed.first[0],
    }


def _parse_ints(text: str) -> list[int]:
    values: list[int] = []
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            values.extend(range(int(low), int(high) + 1))
        elif part:
            values.append(int(part))
    return values


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("gap", "time", "all"), default="all")
    parser.add_argument("--sizes", default="8,10,12")
    parser.add_argument("--seeds", default="0-5", help="e.g. 0-5 or 0,2,4")
    parser.add_argument("--clusters", default="1x4,2x4,1x8", help="NODESxGPUS_PER_NODE, comma-separated")
    parser.add_argument("--arrivals", default="zero,poisson")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per exact solve")
    parser.add_argument("--workers", type=int, default=2, help="CP-SAT workers")
    parser.add_argument("--cache", type=Path, default=None, help="JSON file keeping exact solves between runs")
    parser.add_argument("--csv", type=Path, default=None, help="write the per-instance rows here")
    parser.add_argument("--pending", default="100,1000", help="pending-job levels of the timing part")
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args(argv)
    pd.set_option("display.width", 200)
    if args.part in ("gap", "all"):
        clusters = [tuple(int(v) for v in c.split("x")) for c in args.clusters.split(",")]
        frame = gap_rows(
            _parse_ints(args.sizes),
            _parse_ints(args.seeds),
            clusters=clusters,  # type: ignore[arg-type]
            arrivals=args.arrivals.split(","),
            time_limit=args.time_limit,
            num_workers=args.workers,
            cache=args.cache,
        )
        if args.csv is not None:
            frame.to_csv(args.csv, index=False)
        if not frame["valid"].all():
            print("INVALID schedules:", frame.loc[~frame["valid"], ["instance", "policy"]].to_string())
        print("\nGap to the proven optimum (reference=optimum) and, for unproven instances, to the bound:")
        print(summarize_gaps(frame).to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    if args.part in ("time", "all"):
        print("\nDecision time, 64 GPUs (8 nodes x 8):")
        for pending in _parse_ints(args.pending):
            for policy in POLICIES:
                stats = decision_times(policy, pending, samples=args.samples)
                print(
                    f"  {policy:20s} pending~{pending:5d}: " + "  ".join(f"{k}={v:.2f}" for k, v in stats.items()),
                    flush=True,
                )


if __name__ == "__main__":
    main()
