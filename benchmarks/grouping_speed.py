"""Speed of Muri's grouping, Tesserae's packing + migration, and whole-trace simulations (numbers, not
timed tests).

Targets (issue 4):

1. Muri grouping of 1,000 jobs in <= 1 s with an exact optimum (Algorithm 1, ``⌈log2 4⌉ = 2`` rounds of
   exact maximum-weight matching). Jobs are sampled from Muri's trace2 (their GPU-count buckets and
   stage profiles); the class route (:mod:`heuristics.matching`) is timed and its per-round optimum is
   compared with plain rustworkx blossom on the same integer weights (``--verify-size``; plain blossom
   on 1,000 nodes takes tens of seconds, so by default the check runs on a smaller sample, and on the
   full 1,000 with ``--verify-size 1000``).
2. Tesserae packing + migration in <= 0.2 s at 2,048 jobs / 256 GPUs (32 nodes × 8): one round of
   Tesserae-T with jobs already running from the previous round (so migration minimisation has work),
   split into placement, packing (Algorithm 4) and migration minimisation (Algorithms 2-3). Two
   workloads: Gavel's ``ee9e8c`` trace (2,000 jobs, 133 profiles, measured pair throughputs) padded
   to 2,048 jobs, and the synthetic generator (2,048 distinct profiles, the worst case for class
   collapsing).
3. Whole Muri trace2 (5,755 jobs, 64 GPUs, capacity 4) simulated in <= 60 s under muri-s, muri-l and
   tesserae-t.

Times are wall and CPU seconds of this process (the machine may be shared; CPU time is the steadier
number).

Usage::

    python -m benchmarks.grouping_speed                      # all three parts
    python -m benchmarks.grouping_speed --part grouping --verify-size 1000
    python -m benchmarks.grouping_speed --part trace --policies muri-s
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.reference.tesserae_ref import PerPairWeights
from formulation.cluster import Cluster
from formulation.generator import generate_instance
from formulation.instance import Instance, Job
from formulation.paths import shared_data_dir
from formulation.traces import load_trace
from heuristics.loop import ClusterState
from heuristics.muri import GroupingItem, GroupingStats, bucket_grouping
from heuristics.simulator import simulate
from heuristics.tesserae import TesseraePolicy


def _clock(function: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = function()
    return value, time.perf_counter() - wall, time.process_time() - cpu


# --- 1. Muri grouping -----------------------------------------------------------------------------------


def muri_items(count: int, seed: int = 0, single_bucket: bool = False) -> list[GroupingItem]:
    """``count`` jobs sampled from Muri's trace2 (stage profiles and GPU counts as in the trace)."""
    instance = load_trace("muri", shared_data_dir() / "muri" / "trace2.csv")
    jobs = [job for job in instance.jobs if not single_bucket or job.num_gpus == 1]
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(jobs), size=count, replace=len(jobs) < count)
    items = []
    for index in chosen:
        job = jobs[int(index)]
        stages = instance.profiles[job.profile].stage_times
        assert stages is not None
        items.append(GroupingItem(job.num_gpus, tuple(stages), 0.0, job.profile))
    return items


def _grouper(items: list[GroupingItem], method: str, stats: list[GroupingStats]) -> Callable[[], Any]:
    """Algorithm 1 (two rounds, groups of up to four) on ``items`` with a fresh cache."""
    return lambda: bucket_grouping(items, max_group_size=4, method=method, stats=stats)  # type: ignore[arg-type]


def grouping_part(jobs: int, verify_size: int, repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for label, single in (("trace2 buckets", False), ("one bucket (1-GPU jobs)", True)):
        items = muri_items(jobs, single_bucket=single)
        walls, cpus = [], []
        stats: list[GroupingStats] = []
        groups: list[tuple[int, ...]] = []
        for _ in range(repeats):  # a fresh cache each time: nothing is reused between repeats
            stats = []
            groups, wall, cpu = _clock(_grouper(items, "classes", stats))
            walls.append(wall)
            cpus.append(cpu)
        sizes = Counter(len(g) for g in groups)
        entry: dict[str, Any] = {
            "jobs": jobs,
            "buckets": len({item.num_gpus for item in items}),
            "classes": len({(item.num_gpus, item.stage_times) for item in items}),
            "median_wall_s": statistics.median(walls),
            "median_cpu_s": statistics.median(cpus),
            "round_weights": stats[0].matched_weight,
            "methods": sorted(set(stats[0].methods)),
            "group_sizes": dict(sorted(sizes.items())),
        }
        sample = items[:verify_size]
        check_classes: list[GroupingStats] = []
        check_blossom: list[GroupingStats] = []
        _grouper(sample, "classes", check_classes)()
        _, wall, _ = _clock(_grouper(sample, "blossom", check_blossom))
        entry["verify_jobs"] = len(sample)
        entry["verify_equal_optimum"] = check_classes[0].matched_weight == check_blossom[0].matched_weight
        entry["verify_plain_blossom_wall_s"] = wall
        results[label] = entry
    return results


# --- 2. Tesserae packing + migration ---------------------------------------------------------------------


def _gavel_2048() -> Instance:
    base = load_trace("gavel", shared_data_dir() / "gavel" / "msr_seed0" / "ee9e8c.trace")
    jobs = [Job(job.id, 0.0, job.num_gpus, job.iterations, job.batch_size, job.profile) for job in base.jobs]
    for i, job in enumerate(base.jobs[: 2048 - len(jobs)]):
        jobs.append(Job(f"{job.id}-copy{i}", 0.0, job.num_gpus, job.iterations, job.batch_size, job.profile))
    jobs = [job for job in jobs if job.num_gpus <= 256]
    return base.replace(cluster=Cluster(32, 8, base.cluster.gpu_memory_gib, 2), jobs=jobs, name="gavel-2048")


class _TimedTesserae(TesseraePolicy):
    """Tesserae-T that records the time of its placement, packing and migration steps."""

    def reset(self) -> None:
        super().reset()
        self.timings: list[dict[str, float]] = []

    def plan(self, view: Any, facts: Any) -> dict[str, tuple[tuple[int, ...], int]]:
        record: dict[str, float] = {}
        pack, rename = self._pack, self._rename

        def timed_pack(*args: Any) -> None:
            start = time.perf_counter()
            pack(*args)
            record["packing_s"] = time.perf_counter() - start

        def timed_rename(*args: Any) -> Any:
            start = time.perf_counter()
            value = rename(*args)
            record["migration_s"] = time.perf_counter() - start
            return value

        self._pack = timed_pack  # type: ignore[method-assign,assignment]
        self._rename = timed_rename  # type: ignore[method-assign,assignment]
        start, cpu = time.perf_counter(), time.process_time()
        try:
            target = super().plan(view, facts)
        finally:
            del self._pack, self._rename
        record["plan_s"] = time.perf_counter() - start
        record["plan_cpu_s"] = time.process_time() - cpu
        self.timings.append(record)
        return target


class _TimedPerPairTesserae(PerPairWeights, _TimedTesserae):
    """The same, with the packing weights looked up pair by pair (the code before issue 19)."""


def tesserae_round(
    instance: Instance, rounds: int = 3, round_length: float = 360.0, reference: bool = False
) -> dict[str, Any]:
    """Run ``rounds`` Tesserae-T rounds on ``instance`` (every job submitted at 0); time each plan.
    ``reference``: with the pre-issue-19 per-pair packing weights."""
    policy = (_TimedPerPairTesserae if reference else _TimedTesserae)(round_length=round_length)
    state = ClusterState(instance)
    for job in instance.jobs:
        state.submit(job.id, 0.0)
    policy.check_instance(instance)
    last_actions = 0
    for k in range(1, rounds + 1):
        now = k * round_length
        view = state.view(now)
        actions = policy.decide(view)
        state.apply(actions, now, policy.name)
        policy.next_decision_time(state.view(now))
        last_actions = len(actions)
    timings = policy.timings
    later = timings[1:] if len(timings) > 1 else timings  # rounds with jobs already running
    return {
        "jobs": len(instance.jobs),
        "gpus": instance.cluster.num_gpus,
        "profiles": len(instance.profiles),
        "running_after": len(state.running),
        "packed_pairs_total": policy.packed_pairs,
        "actions_last_round": last_actions,
        "first_round": timings[0],
        "later_rounds_median": {key: statistics.median(t[key] for t in later if key in t) for key in later[0]},
    }


def tesserae_part(reference: bool = False) -> dict[str, Any]:
    out = {
        "gavel ee9e8c padded to 2048": tesserae_round(_gavel_2048()),
        "synthetic 2048 distinct profiles": tesserae_round(generate_instance(2048, 32, 8, 0)),
    }
    if reference:  # the same rounds with the per-pair weights, right after, in this process
        out["gavel ee9e8c padded to 2048, per-pair weights (before issue 19)"] = tesserae_round(
            _gavel_2048(), reference=True
        )
        out["synthetic 2048 distinct profiles, per-pair weights (before issue 19)"] = tesserae_round(
            generate_instance(2048, 32, 8, 0), reference=True
        )
    return out


# --- 3. whole trace2 ---------------------------------------------------------------------------------------


def trace_part(
    policies: list[str], validate: bool, on_result: Callable[[str, dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    # SPEC.md's progress rule, as the trace2 figures in docs/policies-muri-tesserae.md were measured
    instance = load_trace("muri", shared_data_dir() / "muri" / "trace2.csv", capacity=4, semantics="duetto")
    results: dict[str, Any] = {}
    for name in policies:
        from heuristics.registry import make_policy

        policy = make_policy(name)
        wall, cpu = time.perf_counter(), time.process_time()
        result = simulate(instance, policy, validate=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        entry: dict[str, Any] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "decisions": result.stats.decisions,
            "decide_wall_s": result.stats.decide_seconds,
            "preemptions": result.stats.preemptions,
            "migrations": result.stats.migrations,
            "avg_jct_days": result.avg_jct / 86400,
            "makespan_days": max(result.completion.values()) / 86400,
        }
        for attribute in ("plans", "skipped_rounds", "reused_plans", "fills", "packed_pairs"):
            if hasattr(policy, attribute):
                entry[attribute] = getattr(policy, attribute)
        if hasattr(policy, "group_sizes"):
            entry["planned_group_sizes"] = dict(sorted(getattr(policy, "group_sizes").items()))  # noqa: B009
            entry["max_group_vs_pairwise_slowdown"] = getattr(policy, "model_gap_max")  # noqa: B009
            count = getattr(policy, "model_gap_count")  # noqa: B009
            entry["mean_group_vs_pairwise_slowdown"] = getattr(policy, "model_gap_sum") / count if count else 1.0  # noqa: B009
        if validate:
            from formulation.validator import validate as run_validator

            start = time.perf_counter()
            report = run_validator(result.instance, result.schedule)
            entry["valid"] = bool(report.ok)
            entry["violations"] = len(report.violations)
            entry["completion_mismatches"] = sum(
                1
                for job, mine in result.completion.items()
                if abs(report.completion.get(job, float("nan")) - mine) > 1e-6 * max(1.0, abs(mine))
            )
            entry["validator_wall_s"] = time.perf_counter() - start
        results[name] = entry
        if on_result is not None:
            on_result(name, entry)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["all", "grouping", "tesserae", "trace"], default="all")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs to group (part grouping)")
    parser.add_argument(
        "--verify-size", type=int, default=300, help="jobs on which the class route is checked against plain blossom"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policies", default="muri-s,muri-l,tesserae-t")
    parser.add_argument("--validate", action="store_true", help="also validate the trace2 schedules (timed separately)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    parser.add_argument(
        "--reference", action="store_true", help="also time Tesserae with the pre-issue-19 per-pair packing weights"
    )
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}

    def show(part: str, label: str, values: dict[str, Any]) -> None:
        if args.json:
            return
        print(f"[{part}] {label}:")
        for key, value in values.items():
            shown = f"{value:.4f}" if isinstance(value, float) else value
            print(f"    {key}: {shown}")
        print(flush=True)

    if args.part in ("all", "grouping"):
        report["muri_grouping"] = grouping_part(args.jobs, args.verify_size, args.repeats)
        for label, values in report["muri_grouping"].items():
            show("muri_grouping", label, values)
    if args.part in ("all", "tesserae"):
        report["tesserae_round"] = tesserae_part(args.reference)
        for label, values in report["tesserae_round"].items():
            show("tesserae_round", label, values)
    if args.part in ("all", "trace"):
        report["trace2"] = trace_part(
            [p for p in args.policies.split(",") if p], args.validate, lambda name, values: show("trace2", name, values)
        )
    if args.json:
        print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
