"""Benchmark: reconcile 1,000 submitted jobs on a 64-GPU simulated node set.

Target (issue 6): a reconcile pass that applies a plan takes under 1 s. The daemon runs in-process
(no socket) with a fake inventory of 8 nodes x 8 GPUs and capacity C = 2; jobs are stand-ins that
finish at once (``/bin/true`` behind the real launch wrapper: every launch is a real process, with
its run directory, captured output, exit file and SQLite rows). Waves: a plan puts the next 128
pending jobs on the 64 GPUs (two per GPU, so every launch is an MPS-shared one), a reconcile pass
starts them, later passes observe their exits, until all 1,000 are done.

Reported per pass: wall time of passes that start a wave (plan applied: 128 process spawns), of
passes that observe completions, and of idle passes; plus plan validation time (``apply``), submit
throughput and the whole run. With ``--policy NAME`` the plan comes from the policy instead, through
the scheduling loop, on every arrival and completion.

Usage::

    python -m benchmarks.runtime_reconcile [--jobs 1000] [--nodes 8] [--gpus-per-node 8] [--policy fifo]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from cluster_runtime.config import MpsConfig, RuntimeConfig
from cluster_runtime.daemon import Daemon


def _spec(index: int) -> dict[str, Any]:
    return {
        "id": f"job{index:05d}",
        "command": [shutil.which("true") or "/bin/true"],
        "num_gpus": 1,
        "iterations": 1,
        "batch_size": 8,
        "profile": {"name": "instant", "compute_alpha": 0.001, "memory_base_gib": 1.0},
    }


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    ordered = sorted(values)
    return {
        "count": len(values),
        "median_s": statistics.median(ordered),
        "p95_s": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "max_s": ordered[-1],
    }


def run(
    jobs: int = 1000,
    nodes: int = 8,
    gpus_per_node: int = 8,
    capacity: int = 2,
    policy: str | None = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Run the benchmark; returns the figures (seconds)."""
    folder = Path(workdir or tempfile.mkdtemp(prefix="duetto-bench-"))
    config = RuntimeConfig(
        state_dir=folder / "state",
        fake_gpus=f"{nodes}x{gpus_per_node}",
        capacity=capacity,
        policy=policy,
        retry_backoff_s=0.0,
        reconcile_interval_s=0.01,
        mps=MpsConfig(mode="auto"),
    )
    daemon = Daemon(config, serve_api=False)
    reconciler = daemon.reconciler
    num_gpus = nodes * gpus_per_node
    wave_passes: list[float] = []
    observe_passes: list[float] = []
    idle_passes: list[float] = []
    applies: list[float] = []
    begin = time.perf_counter()
    try:
        clock = time.perf_counter()
        for index in range(jobs):
            reconciler.submit(_spec(index))
        submit_seconds = time.perf_counter() - clock
        run_clock = time.perf_counter()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            with reconciler.store.read() as tx:
                pending = [j.id for j in tx.jobs(("pending",))]
                running = tx.active_launches()
                desired = tx.desired()
            if not pending and not running:
                break
            if policy is None and not running and not desired:
                wave = pending[: num_gpus * capacity]
                plan = [{"job_id": job_id, "gpus": [i % num_gpus], "steps": 1} for i, job_id in enumerate(wave)]
                clock = time.perf_counter()
                from cluster_runtime.spec import plan_from_dict

                reconciler.apply(plan_from_dict(plan))
                applies.append(time.perf_counter() - clock)
            stats = reconciler.reconcile()
            if stats.started:
                wave_passes.append(stats.seconds)
            elif stats.ended:
                observe_passes.append(stats.seconds)
            else:
                idle_passes.append(stats.seconds)
                time.sleep(0.01)
        run_seconds = time.perf_counter() - run_clock
        with reconciler.store.read() as tx:
            completed = len(tx.jobs(("completed",)))
            launches = tx.conn.execute("SELECT COUNT(*) FROM launches").fetchone()[0]
    finally:
        daemon.close()
    return {
        "jobs": jobs,
        "gpus": num_gpus,
        "capacity": capacity,
        "policy": policy,
        "completed": completed,
        "launches": launches,
        "submit_seconds": submit_seconds,
        "run_seconds": run_seconds,
        "total_seconds": time.perf_counter() - begin,
        "apply_plan": _summary(applies),
        "reconcile_starting_a_wave": _summary(wave_passes),
        "reconcile_observing_exits": _summary(observe_passes),
        "reconcile_idle": _summary(idle_passes),
        "mps": daemon.backend.mps_status()[0]["enabled"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--capacity", type=int, default=2)
    parser.add_argument("--policy")
    args = parser.parse_args()
    result = run(args.jobs, args.nodes, args.gpus_per_node, args.capacity, args.policy)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
