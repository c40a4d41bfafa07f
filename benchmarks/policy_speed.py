"""Speed of the policies and the simulator (numbers, not timed tests).

Targets (issue 4): SJF-BSBF <= 1 ms median per decision at 64 GPUs with 100 pending jobs; the whole Muri
trace2 (5,755 jobs, 64 GPUs) simulated in <= 60 s under every policy.

Usage::

    python -m benchmarks.policy_speed                 # both parts
    python -m benchmarks.policy_speed --part decision
    python -m benchmarks.policy_speed --part trace --policies sjf-bsbf,srsf --validate

Part ``decision``: a loaded run on 64 GPUs (8 nodes × 8, 1,500 Poisson jobs at 3× the cluster's
capacity, ξ in [1, 2]); every ``decide`` is timed (wall and CPU time; the machine may be shared) with
the number of pending jobs it saw. Reported: the median over decisions that saw 50-150 pending jobs, and
over those of them with at least one idle or single-job GPU (where SJF-BSBF has work to do: Theorem 1
and Algorithm 2 run); plus *snapshots*: 20 decision points with 90-110 pending jobs and room, each
timed 20 times on fresh policy objects (cold: the queue is built from the view every time).

Part ``trace``: wall and CPU time of ``simulate`` on the whole trace per policy (simulation only; with
``--validate`` also the validator's time; with ``--reference`` also the frozen pre-issue-19 look-ahead and
validator, for the speed-up measured in the same session and a check that the results are identical).
On a shared machine the CPU time is the meaningful one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from formulation.generator import generate_instance
from formulation.instance import Instance
from heuristics.core import Action, ClusterView, Policy
from heuristics.registry import make_policy, policy_names
from heuristics.simulator import simulate


class _Timed:
    """Wraps a policy; records every decision: (pending jobs seen, idle or single-job GPUs, wall s, CPU s).

    With ``snapshot`` set, the first ``snapshots`` decisions that see ``snapshot`` ± 10% pending jobs and
    at least one idle or single-job GPU (so the policy has something to decide) are also timed
    ``repeats`` times on fresh policy objects (cold: each builds its queue from the view).
    """

    def __init__(self, inner: Policy, *, snapshot: int | None = None, snapshots: int = 20, repeats: int = 20) -> None:
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.round_length = inner.round_length
        self.samples: list[tuple[int, int, float, float]] = []
        self.snapshot = snapshot
        self.snapshots = snapshots
        self.repeats = repeats
        self.cold: list[float] = []
        self.cold_cpu: list[float] = []

    def decide(self, view: ClusterView) -> Sequence[Action]:
        occupancy = view.occupancy or []
        room = sum(1 for jobs in occupancy if len(jobs) <= 1)
        pending = len(view.pending)
        if (
            self.snapshot is not None
            and self.snapshots > 0
            and room > 0
            and abs(pending - self.snapshot) <= 0.1 * self.snapshot
        ):
            self.snapshots -= 1
            for _ in range(self.repeats):
                fresh = make_policy(self.inner.name)
                wall, cpu = time.perf_counter(), time.thread_time()
                fresh.decide(view)
                self.cold_cpu.append(time.thread_time() - cpu)
                self.cold.append(time.perf_counter() - wall)
        wall, cpu = time.perf_counter(), time.thread_time()
        actions = self.inner.decide(view)
        cpu = time.thread_time() - cpu
        self.samples.append((pending, room, time.perf_counter() - wall, cpu))
        return actions

    def __getattr__(self, name: str) -> Any:  # next_decision_time, check_instance, reset, ...
        return getattr(self.inner, name)


def busy_instance(seed: int = 0, jobs: int = 1500, load: float = 3.0) -> Instance:
    """64 GPUs (8 nodes × 8), Poisson arrivals at ``load`` × the cluster's capacity, ξ in [1, 2]."""
    return generate_instance(jobs, 8, 8, seed, arrivals="poisson", load=load, xi_range=(1.0, 2.0))


def decision_times(policy: str = "sjf-bsbf", pending: int = 100) -> dict[str, float]:
    """Decision times of ``policy`` on a loaded 64-GPU run (see the module docstring)."""
    timed = _Timed(make_policy(policy), snapshot=pending)
    simulate(busy_instance(), timed, validate=False)
    low, high = int(pending * 0.5), int(pending * 1.5)
    window = [s for s in timed.samples if low <= s[0] <= high]
    busy = [s for s in window if s[1] > 0]

    def ms(values: list[float], q: float = 0.5) -> float:
        if not values:
            return float("nan")
        return 1e3 * (statistics.median(values) if q == 0.5 else statistics.quantiles(values, n=10)[-1])

    return {
        "decisions": float(len(timed.samples)),
        f"decisions_{low}_{high}_pending": float(len(window)),
        "median_ms": ms([s[2] for s in window]),
        "median_cpu_ms": ms([s[3] for s in window]),
        "with_room_decisions": float(len(busy)),
        "with_room_median_ms": ms([s[2] for s in busy]),
        "with_room_median_cpu_ms": ms([s[3] for s in busy]),
        "with_room_p90_cpu_ms": ms([s[3] for s in busy], 0.9),
        f"snapshot_{pending}_cold_median_ms": ms(timed.cold),
        f"snapshot_{pending}_cold_median_cpu_ms": ms(timed.cold_cpu),
        "max_cpu_ms": 1e3 * max(s[3] for s in timed.samples),
    }


def _reference_policy(name: str) -> Policy | None:
    """The frozen pre-issue-19 implementation of ``name`` (``benchmarks/reference``), if there is one."""
    if name == "sjf-bsbf-lookahead":
        from benchmarks.reference.lookahead_ref import LookaheadPolicy

        return LookaheadPolicy()
    return None


def whole_trace(
    policies: Sequence[str],
    trace: str,
    kind: str,
    validate: bool,
    reference: bool = False,
    capacity: int | None = None,
    python_model: bool = False,
) -> list[dict[str, Any]]:
    """Simulate every policy on a whole trace; wall time, events, preemptions, average JCT.

    With ``reference``, the frozen pre-issue-19 code (``benchmarks/reference``: the look-ahead policy and,
    with ``validate``, the validator) runs on the same input right after the current code, in the same
    process: its times (``ref_*``), the ratio, and whether the results are identical.

    The look-ahead's compiled rollouts (``duetto[fast]``) are made ready before it is timed (compiled, or
    loaded from numba's cache: ``kernel_load_s``), so the timed run uses them from its first decision. With
    ``python_model``, the look-ahead also runs with its Python rollouts (``compiled=False``) in the same
    process: its time (``python_*``), the ratio, and whether the schedules are identical."""
    from formulation.traces import load_trace
    from formulation.validator import validate as run_validator

    # SPEC.md's progress rule on the Muri traces too: the frozen reference code knows only that one, and
    # docs/results.md §7 was measured under it
    instance = load_trace(kind, trace, **({"semantics": "duetto"} if kind == "muri" else {}))
    rows = []
    for name in policies:
        load = None
        if name == "sjf-bsbf-lookahead":
            from heuristics import lookahead_kernel

            load = time.perf_counter()
            lookahead_kernel.compile_now()  # numba's on-disk cache after the first time
            load = time.perf_counter() - load
        policy = make_policy(name)
        start, cpu = time.perf_counter(), time.process_time()
        result = simulate(instance, policy, validate=False, capacity=capacity)
        row: dict[str, Any] = {
            "policy": name,
            "jobs": len(instance.jobs),
            "gpus": instance.cluster.num_gpus,
            "simulate_s": time.perf_counter() - start,
            "simulate_cpu_s": time.process_time() - cpu,
            "events": result.events,
            "decide_s": result.stats.decide_seconds,
            "preemptions": result.stats.preemptions,
            "avg_jct_h": result.avg_jct / 3600,
        }
        if load is not None:
            row["kernel_load_s"] = load
            row["compiled_steps"] = getattr(policy, "compiled_steps", 0)  # pilot steps the compiled model scored
        if python_model and name == "sjf-bsbf-lookahead":
            start, cpu = time.perf_counter(), time.process_time()
            slow = simulate(instance, make_policy(name, compiled=False), validate=False, capacity=capacity)
            row["python_simulate_s"] = time.perf_counter() - start
            row["python_simulate_cpu_s"] = time.process_time() - cpu
            row["compiled_speedup"] = row["python_simulate_cpu_s"] / row["simulate_cpu_s"]
            row["python_identical"] = (
                slow.completion == result.completion and slow.schedule.plans == result.schedule.plans
            )
        old_policy = _reference_policy(name) if reference else None
        if old_policy is not None:
            start, cpu = time.perf_counter(), time.process_time()
            old = simulate(instance, old_policy, validate=False, capacity=capacity)
            row["ref_simulate_s"] = time.perf_counter() - start
            row["ref_simulate_cpu_s"] = time.process_time() - cpu
            row["simulate_cpu_speedup"] = row["ref_simulate_cpu_s"] / row["simulate_cpu_s"]
            row["identical"] = old.completion == result.completion and old.schedule.plans == result.schedule.plans
        if validate:
            start, cpu = time.perf_counter(), time.process_time()
            report = run_validator(result.instance, result.schedule)
            row["validate_s"] = time.perf_counter() - start
            row["validate_cpu_s"] = time.process_time() - cpu
            row["valid"] = report.ok
            if reference:
                from benchmarks.reference.validator_ref import validate as reference_validator

                start, cpu = time.perf_counter(), time.process_time()
                old_report = reference_validator(result.instance, result.schedule)
                row["ref_validate_s"] = time.perf_counter() - start
                row["ref_validate_cpu_s"] = time.process_time() - cpu
                row["validate_cpu_speedup"] = row["ref_validate_cpu_s"] / max(row["validate_cpu_s"], 1e-9)
                row["validate_identical"] = (
                    old_report.completion == report.completion
                    and [str(v) for v in old_report.violations] == [str(v) for v in report.violations]
                    # (two Occupancy classes: compare their fields)
                    and [(o.gpu, o.start, o.end, o.jobs) for o in old_report.occupancy]
                    == [(o.gpu, o.start, o.end, o.jobs) for o in report.occupancy]
                )
        rows.append(row)
        print(
            "  " + "  ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    from formulation.paths import shared_data_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("decision", "trace", "all"), default="all")
    parser.add_argument("--policies", default=None, help="comma-separated (default: every registered policy)")
    parser.add_argument("--trace", default=str(shared_data_dir() / "muri" / "trace2.csv"))
    parser.add_argument("--kind", default="muri")
    parser.add_argument("--validate", action="store_true", help="also time the validator on each schedule")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also run the frozen pre-issue-19 code (look-ahead, validator) and report the speed-up",
    )
    parser.add_argument("--capacity", type=int, default=None, help="jobs per GPU (default: the trace's)")
    parser.add_argument(
        "--python-model",
        action="store_true",
        help="also run the look-ahead with its Python rollouts (compiled=False) and report the compiled speed-up",
    )
    args = parser.parse_args(argv)
    if args.part in ("decision", "all"):
        print("SJF-BSBF decision time, 64 GPUs (8 nodes x 8), about 100 pending jobs:")
        for key, value in decision_times().items():
            print(f"  {key} = {value:.3f}")
    if args.part in ("trace", "all"):
        names = args.policies.split(",") if args.policies else policy_names()
        print(f"Whole trace {args.trace}:")
        whole_trace(names, args.trace, args.kind, args.validate, args.reference, args.capacity, args.python_model)


if __name__ == "__main__":
    main()
