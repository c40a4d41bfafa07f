"""The independent validator: every rule caught, completion times recomputed by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formulation import (
    Cluster,
    ConstantInterference,
    Instance,
    Job,
    JobPlan,
    Profile,
    Schedule,
    Segment,
    TableInterference,
)
from formulation.metrics import compute_metrics, sharing_benefits
from formulation.validator import validate


def _pair_instance(xi: float = 1.5, memory: float = 10.0) -> Instance:
    """Two one-GPU jobs of 100 s alone (A: 100 × 1 s, B: 50 × 2 s) and a two-GPU job of 10 s."""
    profiles = {
        "a": Profile("a", compute_alpha=1.0, memory_base_gib=3.0),
        "b": Profile("b", compute_alpha=2.0, memory_base_gib=6.0),
    }
    jobs = [Job("A", 0, 1, 100, 1, "a"), Job("B", 0, 1, 50, 1, "b"), Job("C", 10, 2, 10, 1, "a")]
    return Instance(Cluster(1, 2, gpu_memory_gib=memory), jobs, profiles, ConstantInterference(xi))


def _rules(report) -> set[str]:
    return {v.rule for v in report.violations}


def test_correct_shared_schedule_by_hand_continuous() -> None:
    instance = _pair_instance()
    # A and B share GPU 0 from t=0 at ξ=1.5: 100 s of work each takes 150 s. C then runs alone.
    schedule = Schedule.non_preemptive(
        [("A", 0, [0], 1), ("B", 0, [0], 1), ("C", 150, [0, 1], 1)],
        completions={"A": 150.0, "B": 150.0, "C": 160.0},
    )
    report = validate(instance, schedule)
    assert report.ok, report.violations
    assert report.completion == pytest.approx({"A": 150.0, "B": 150.0, "C": 160.0})
    metrics = compute_metrics(instance, report)
    assert metrics["total_jct"] == pytest.approx(150 + 150 + 150)
    assert metrics["makespan"] == pytest.approx(160.0)
    assert metrics["shared_gpu_seconds"] == pytest.approx(150.0)
    assert metrics["busy_gpu_seconds"] == pytest.approx(150 + 2 * 10)


def test_partial_overlap_rates_change_when_partner_finishes() -> None:
    instance = _pair_instance()
    # B starts at 60 next to A. A: 60 s alone (60 it), then shared: 40 it remain → 60 s → done at 120.
    # B: from 60 to 120 shared: 60/(2·1.5) = 20 it; 30 it remain alone at 2 s → 60 s → done at 180.
    schedule = Schedule.non_preemptive([("A", 0, [0], 1), ("B", 60, [0], 1), ("C", 180, [0, 1], 1)])
    report = validate(instance, schedule)
    assert report.ok
    assert report.completion["A"] == pytest.approx(120.0)
    assert report.completion["B"] == pytest.approx(180.0)
    assert report.completion["C"] == pytest.approx(190.0)


def test_gang_factor_is_the_slowest_worker() -> None:
    profiles = {
        "x": Profile("x", compute_alpha=1.0),
        "y": Profile("y", compute_alpha=1.0),
        "z": Profile("z", compute_alpha=1.0),
    }
    interference = TableInterference({("z", "x"): 1.2, ("z", "y"): 2.0}, default=1.0)
    jobs = [Job("X", 0, 1, 1000, 1, "x"), Job("Y", 0, 1, 1000, 1, "y"), Job("Z", 0, 2, 10, 1, "z")]
    instance = Instance(Cluster(1, 2), jobs, profiles, interference)
    schedule = Schedule.non_preemptive([("X", 0, [0], 1), ("Y", 0, [1], 1), ("Z", 0, [0, 1], 1)])
    report = validate(instance, schedule)
    assert report.ok
    # Z shares GPU 0 with X (1.2) and GPU 1 with Y (2.0): the gang runs at the slowest, ξ = 2.
    assert report.completion["Z"] == pytest.approx(20.0)


def test_slotted_completion_by_hand() -> None:
    instance = _pair_instance()
    # Δ = 40: A and B shared progress 40/1.5 = 26.67 s-of-work per slot → 100 needs 4 slots → 160.
    schedule = Schedule.non_preemptive([("A", 0, [0], 1), ("B", 0, [0], 1), ("C", 160, [0, 1], 1)], slot=40.0)
    report = validate(instance, schedule)
    assert report.ok, report.violations
    assert report.completion == pytest.approx({"A": 160.0, "B": 160.0, "C": 200.0})
    # Continuous semantics of the same starts: A and B at 150, C at 170.
    continuous = validate(instance, schedule, slotted=False)
    assert continuous.completion == pytest.approx({"A": 150.0, "B": 150.0, "C": 170.0})


def test_slotted_exact_boundary_is_not_rounded_up() -> None:
    profiles = {"p": Profile("p", compute_alpha=0.5)}
    instance = Instance(Cluster(1, 1), [Job("a", 0, 1, 60, 1, "p")], profiles)
    # 30 s of work, Δ = 10: exactly 3 slots, completion 30 (not 40).
    report = validate(instance, Schedule.non_preemptive([("a", 0, [0], 1)], slot=10.0))
    assert report.completion["a"] == pytest.approx(30.0)


def test_slotted_partner_holds_gpu_to_end_of_its_completing_slot() -> None:
    profiles = {"s": Profile("s", compute_alpha=1.0), "l": Profile("l", compute_alpha=1.0)}
    jobs = [Job("short", 0, 1, 5, 1, "s"), Job("long", 0, 1, 40, 1, "l")]
    instance = Instance(Cluster(1, 1), jobs, profiles, ConstantInterference(2.0))
    report = validate(instance, Schedule.non_preemptive([("short", 0, [0], 1), ("long", 0, [0], 1)], slot=10.0))
    # short: 10 s of work at half speed → slot 0 gives 5 → done at 10. long: slot 0 shared (5), then 35 alone.
    assert report.completion["short"] == pytest.approx(10.0)
    assert report.completion["long"] == pytest.approx(50.0)


def test_preemption_with_restart_overhead() -> None:
    profiles = {"p": Profile("p", compute_alpha=1.0)}
    instance = Instance(Cluster(1, 2), [Job("a", 0, 1, 100, 1, "p")], profiles)
    plan = JobPlan("a", (Segment(0, (0,), 1, end=40), Segment(60, (1,), 1)), claimed_completion=125.0)
    report = validate(instance, Schedule((plan,), restart_overhead=5.0))
    # 40 it, preempted; resumes at 60, 5 s restoring, then 60 it → 125.
    assert report.ok, report.violations
    assert report.completion["a"] == pytest.approx(125.0)


@pytest.mark.parametrize(
    ("entries", "rule"),
    [
        ([("A", 0, [0], 1), ("B", 0, [1], 1), ("C", 5, [0, 1], 1)], "arrival"),
        ([("A", 0, [0], 1), ("B", 0, [1], 1), ("C", 200, [0], 1)], "gang"),
        ([("A", 0, [0], 1), ("B", 0, [1], 1), ("C", 200, [0, 0], 1)], "gang"),
        ([("A", 0, [0], 1), ("B", 0, [5], 1), ("C", 200, [0, 1], 1)], "gpu"),
        ([("A", 0, [0], 1), ("B", 0, [0], 1), ("C", 10, [0, 1], 1)], "capacity"),
        ([("A", 0, [0], 1), ("B", 0, [1], 3), ("C", 200, [0, 1], 1)], "steps"),
    ],
)
def test_each_broken_rule_is_caught(entries, rule: str) -> None:
    report = validate(_pair_instance(), Schedule.non_preemptive(entries))
    assert not report.ok
    assert rule in _rules(report)


def test_memory_violation_names_gpu_and_jobs() -> None:
    instance = _pair_instance(memory=8.0)  # A (3 GiB) + B (6 GiB) > 8 GiB
    report = validate(instance, Schedule.non_preemptive([("A", 0, [0], 1), ("B", 0, [0], 1), ("C", 200, [0, 1], 1)]))
    memory = [v for v in report.violations if v.rule == "memory"]
    assert memory and memory[0].gpu == 0 and "A, B" in memory[0].message


def test_forbidden_pair_and_missing_and_unknown_jobs() -> None:
    profiles = {"a": Profile("a", compute_alpha=1.0), "b": Profile("b", compute_alpha=1.0)}
    interference = TableInterference({("a", "b"): None}, default=1.1)
    instance = Instance(Cluster(1, 1), [Job("A", 0, 1, 1, 1, "a"), Job("B", 0, 1, 1, 1, "b")], profiles, interference)
    report = validate(instance, Schedule.non_preemptive([("A", 0, [0], 1), ("B", 0, [0], 1), ("Z", 0, [0], 1)]))
    assert {"pair", "job"} <= _rules(report)
    missing = validate(instance, Schedule.non_preemptive([("A", 0, [0], 1)]))
    assert any(v.rule == "job" and v.job_id == "B" for v in missing.violations)


def test_wrong_claimed_completion_and_bad_segments() -> None:
    instance = _pair_instance()
    claimed = Schedule.non_preemptive(
        [("A", 0, [0], 1), ("B", 0, [1], 1), ("C", 200, [0, 1], 1)], completions={"A": 99.0}
    )
    report = validate(instance, claimed)
    assert any(v.rule == "completion" and v.job_id == "A" for v in report.violations)
    overlapping = JobPlan("A", (Segment(0, (0,), 1, end=50), Segment(40, (0,), 1)))
    plans = (overlapping, *Schedule.non_preemptive([("B", 0, [1], 1), ("C", 300, [0, 1], 1)]).plans)
    assert "segments" in _rules(validate(instance, Schedule(plans)))
    never = JobPlan("A", (Segment(0, (0,), 1, end=50),))
    plans = (never, *Schedule.non_preemptive([("B", 0, [1], 1), ("C", 300, [0, 1], 1)]).plans)
    report = validate(instance, Schedule(plans))
    assert any(v.rule == "completion" and "never completes" in v.message for v in report.violations)


def test_slot_alignment_is_checked() -> None:
    schedule = Schedule.non_preemptive([("A", 0, [0], 1), ("B", 0, [1], 1), ("C", 105, [0, 1], 1)], slot=10.0)
    report = validate(_pair_instance(), schedule)
    assert any(v.rule == "slot" and v.job_id == "C" for v in report.violations)


# --- property tests ----------------------------------------------------------------------------------


@st.composite
def sequential_instances(draw):
    """An instance and a schedule that runs every job alone, one after another on GPUs 0..G-1."""
    nodes = draw(st.integers(1, 2))
    per_node = draw(st.integers(1, 4))
    cluster = Cluster(nodes, per_node, 16.0)
    count = draw(st.integers(1, 6))
    profiles, jobs = {}, []
    for index in range(count):
        alpha = draw(st.floats(0.01, 2.0))
        comm = draw(st.floats(0.0, 0.5))
        profiles[f"p{index}"] = Profile(f"p{index}", compute_alpha=alpha, comm_alpha=comm, inter_node_comm_factor=1.5)
        jobs.append(
            Job(
                f"j{index}",
                draw(st.floats(0, 100)),
                draw(st.integers(1, cluster.num_gpus)),
                draw(st.integers(1, 500)),
                1,
                f"p{index}",
            )
        )
    instance = Instance(cluster, jobs, profiles, ConstantInterference(draw(st.floats(1.0, 3.0))))
    entries, completions, now = [], {}, 0.0
    for job in jobs:
        start = max(now, job.arrival)
        gpus = list(range(job.num_gpus))
        duration = job.iterations * instance.iteration_time(job, 1, cluster.nodes_spanned(gpus))
        entries.append((job.id, start, gpus, 1))
        completions[job.id] = start + duration
        now = start + duration
    return instance, Schedule.non_preemptive(entries, completions=completions)


@settings(max_examples=60, deadline=None)
@given(sequential_instances())
def test_random_valid_schedules_pass_with_exact_completions(case) -> None:
    instance, schedule = case
    report = validate(instance, schedule)
    assert report.ok, report.violations
    for plan in schedule.plans:
        assert report.completion[plan.job_id] == pytest.approx(plan.claimed_completion, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(sequential_instances(), st.sampled_from(["arrival", "gang", "gpu", "overlap"]), st.data())
def test_random_broken_schedules_are_caught(case, breakage: str, data) -> None:
    instance, schedule = case
    plans = list(schedule.plans)
    index = data.draw(st.integers(0, len(plans) - 1))
    plan = plans[index]
    job = instance.job(plan.job_id)
    segment = plan.segments[0]
    num_gpus = instance.cluster.num_gpus
    if breakage == "arrival":
        if job.arrival < 1e-3:
            return
        new = Segment(job.arrival / 2 - 1e-3, segment.gpus, 1)
        expected = "arrival"
    elif breakage == "gang":
        gpus = segment.gpus[:-1] if len(segment.gpus) > 1 else (0, 1) if num_gpus > 1 else ()
        if not gpus:
            return
        new = Segment(segment.start, tuple(gpus), 1)
        expected = "gang"
    elif breakage == "gpu":
        new = Segment(segment.start, (*segment.gpus[:-1], num_gpus + 3), 1)
        expected = "gpu"
    else:
        # Put every job on GPU 0 at the same instant: three or more jobs on one GPU break capacity.
        if len(plans) < 3:
            return
        plans = [
            JobPlan(
                p.job_id,
                (Segment(max(j.arrival for j in instance.jobs), (0, *range(1, instance.job(p.job_id).num_gpus)), 1),),
            )
            for p in plans
        ]
        report = validate(instance, Schedule(tuple(plans)))
        assert "capacity" in _rules(report)
        return
    plans[index] = JobPlan(plan.job_id, (new,))
    report = validate(instance, Schedule(tuple(plans)))
    assert not report.ok
    assert expected in _rules(report)
    assert all(v.job_id == plan.job_id for v in report.violations if v.rule == expected)


def test_metrics_split_large_and_small() -> None:
    profiles = {"p": Profile("p", compute_alpha=1.0)}
    jobs = [Job("big", 0, 8, 10, 1, "p"), Job("small", 0, 1, 20, 1, "p")]
    instance = Instance(Cluster(1, 8), jobs, profiles)
    report = validate(instance, Schedule.non_preemptive([("big", 0, range(8), 1), ("small", 10, [0], 1)]))
    metrics = compute_metrics(instance, report)
    assert metrics["large_jobs"] == 1 and metrics["large_jct_avg"] == pytest.approx(10.0)
    assert metrics["small_jct_avg"] == pytest.approx(30.0) and metrics["small_queueing_avg"] == pytest.approx(10.0)
    assert metrics["gpu_utilization"] == pytest.approx((80 + 20) / (8 * 30))
    assert math.isnan(metrics["sharing_benefit"])


def test_sharing_benefit_by_hand_and_not_from_a_rounding_sliver() -> None:
    # Castor Eq. 24: the 2-GPU jobs J and K share GPUs 0-1 from 0 at ξ = 1.5 (both done at 150). GPU 2
    # holds X (3 × 0.3 s); Y arrives at 0.9, as X ends, and takes GPU 3 until 100.9. Two GPUs are never
    # free together before Y ends, so J alone would have started at 100.9: t_solo = 100.9 + 100.
    profiles = {"a": Profile("a", compute_alpha=1.0, memory_base_gib=3.0), "x": Profile("x", compute_alpha=0.3)}
    jobs = [
        Job("J", 0, 2, 100, 1, "a"),
        Job("K", 0, 2, 100, 1, "a"),
        Job("X", 0, 1, 3, 1, "x"),
        Job("Y", 0.9, 1, 100, 1, "a"),
    ]
    instance = Instance(Cluster(1, 4, gpu_memory_gib=10.0), jobs, profiles, ConstantInterference(1.5))
    entries = [("J", 0, [0, 1], 1), ("K", 0, [0, 1], 1), ("X", 0, [2], 1)]
    report = validate(instance, Schedule.non_preemptive([*entries, ("Y", 0.9, [3], 1)]))
    assert report.ok, report.violations
    expected = (100.9 + 100) / 150
    benefits = sharing_benefits(instance, report)
    assert set(benefits) == {"J", "K"}
    assert benefits["J"] == pytest.approx(expected) and benefits["K"] == pytest.approx(expected)
    assert compute_metrics(instance, report)["sharing_benefit"] == pytest.approx(expected)
    # Y's start one unit in the last place after X's end (as a long replay's event times come out: an
    # 8-GPU job's sharing benefit moved 6x that way on Pollux, with the CPU's BLAS kernels): the
    # two GPUs "free together" in that sliver are not a start time for J
    sliver = [
        replace(o, start=math.nextafter(o.start, math.inf)) if o.jobs == ("Y",) and o.start > 0 else o
        for o in report.occupancy
    ]
    assert any(o.jobs == ("Y",) and o.start > report.completion["X"] for o in sliver)
    assert sharing_benefits(instance, replace(report, occupancy=sliver))["J"] == pytest.approx(expected)
    # with Y a second later, GPUs 2 and 3 are free together from X's end: J alone would have started there
    later = validate(instance, Schedule.non_preemptive([*entries, ("Y", 1.9, [3], 1)]))
    assert sharing_benefits(instance, later)["J"] == pytest.approx((0.9 + 100) / 150)
