"""Non-sharing baselines (FIFO, SJF, SSF, SRSF) and Tiresias on small instances worked out by hand.

Every job's profile makes one iteration take exactly 1 s alone, so ``iterations`` = seconds alone."""

from __future__ import annotations

import pytest

from formulation.cluster import Cluster
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference
from formulation.speed import Profile
from heuristics import make_policy, simulate

ONE_SECOND = Profile("unit", compute_beta=0.01, memory_base_gib=1.0, memory_per_sample_gib=0.01)


def _instance(
    jobs: list[tuple[str, float, int, float]], *, nodes: int = 1, gpus_per_node: int = 1, xi: float = 1.5
) -> Instance:
    """``jobs``: (id, arrival, gpus, seconds alone)."""
    return Instance(
        Cluster(nodes, gpus_per_node, 32.0, 2),
        tuple(Job(j, a, g, s, 100, "unit") for j, a, g, s in jobs),
        {"unit": ONE_SECOND},
        ConstantInterference(xi),
    )


def _run(instance: Instance, policy: str, **kwargs: object) -> dict[str, float]:
    result = simulate(instance, policy, **kwargs)  # type: ignore[arg-type]
    assert result.report.ok, result.report.violations[:3]
    assert not result.mismatches
    return result.completion


def test_fifo_is_strict_and_sjf_backfills() -> None:
    # 2 GPUs. A (1 GPU, 100 s) runs; B (2 GPUs) waits for A; C (1 GPU, 10 s) arrives after B.
    instance = _instance([("A", 0, 1, 100), ("B", 1, 2, 50), ("C", 2, 1, 10)], gpus_per_node=2)
    fifo = _run(instance, "fifo")
    assert fifo == pytest.approx({"A": 100, "B": 150, "C": 160})  # C waits behind B
    sjf = _run(instance, "sjf")
    # SJF: at t=2 C (10 s) is first and fits on the idle GPU; B starts when A ends.
    assert sjf == pytest.approx({"A": 100, "C": 12, "B": 150})


def test_sjf_orders_by_duration_and_ssf_by_gpu_time() -> None:
    # Both wait for the running job X (2 GPUs, 100 s). S: 2 GPUs x 30 s (60 GPU-s); L: 1 GPU x 40 s.
    instance = _instance([("X", 0, 2, 100), ("L", 1, 1, 40), ("S", 2, 2, 30)], gpus_per_node=2)
    sjf = _run(instance, "sjf")  # S (30 s) before L (40 s)
    assert sjf == pytest.approx({"X": 100, "S": 130, "L": 170})
    ssf = _run(instance, "ssf")  # L (40 GPU-s) before S (60 GPU-s); L leaves one GPU idle, S waits
    assert ssf == pytest.approx({"X": 100, "L": 140, "S": 170})


@pytest.mark.parametrize("restart_cost", [0.0, 7.0])
def test_srsf_preempts_for_a_shorter_job_and_pays_the_restart(restart_cost: float) -> None:
    instance = _instance([("A", 0, 1, 100), ("B", 20, 1, 10)])
    done = _run(instance, "srsf", restart_cost=restart_cost)
    # At 20 A has 80 s left > B's 10: B runs 20-30, A restarts at 30, pays the restart, 80 s more.
    assert done == pytest.approx({"B": 30, "A": 110 + restart_cost})
    result = simulate(instance, "srsf", restart_cost=restart_cost)
    segments = result.schedule.plan_index["A"].segments
    assert [(s.start, s.end) for s in segments] == [(0, 20), (30, None)]
    assert result.schedule.restart_overhead == restart_cost
    assert result.stats.preemptions == 1


def test_srsf_keeps_a_running_job_that_is_shorter() -> None:
    instance = _instance([("A", 0, 1, 100), ("B", 90, 1, 50)])
    assert _run(instance, "srsf") == pytest.approx({"A": 100, "B": 150})


def test_srsf_in_slotted_mode_rounds_restarts_up_to_whole_slots() -> None:
    instance = _instance([("A", 0, 1, 100), ("B", 20, 1, 10)])
    done = _run(instance, "srsf", slot=10.0, restart_cost=3.0)
    # B runs 20-30; A resumes at 30, its 3 s restart costs a whole slot (30-40), then 80 s: ends at 120.
    assert done == pytest.approx({"B": 30, "A": 120})


def test_tiresias_demotes_and_a_new_job_preempts() -> None:
    # One threshold of 50 GPU-s: two queues. A runs alone and is demoted at 50. B arrives at 100 in
    # queue 0 and preempts A; B (30 s) ends at 130; A resumes and needs its remaining 100 s.
    instance = _instance([("A", 0, 1, 200), ("B", 100, 1, 30)])
    policy = make_policy("tiresias", thresholds=(50.0,))
    result = simulate(instance, policy)
    assert result.report.ok and not result.mismatches
    assert result.completion == pytest.approx({"B": 130, "A": 230})
    assert policy.demoted >= 1  # type: ignore[attr-defined]


def test_tiresias_does_not_preempt_within_a_queue() -> None:
    # A and B both stay in queue 0 (threshold 1000 GPU-s): B waits for A, no preemption.
    instance = _instance([("A", 0, 1, 200), ("B", 100, 1, 30)])
    result = simulate(instance, make_policy("tiresias", thresholds=(1000.0,)))
    assert result.completion == pytest.approx({"A": 200, "B": 230})
    assert result.stats.preemptions == 0


def test_tiresias_attained_service_counts_gpus() -> None:
    # A 2-GPU job reaches 50 GPU-s after 25 s: demoted then; B (1 GPU, queue 0) arriving at 30 takes a
    # GPU, A (needing 2) is preempted, resumes when B ends.
    instance = _instance([("A", 0, 2, 100), ("B", 30, 1, 10)], gpus_per_node=2)
    result = simulate(instance, make_policy("tiresias", thresholds=(50.0,)))
    assert result.report.ok and not result.mismatches
    assert result.completion == pytest.approx({"B": 40, "A": 110})


def test_tiresias_promotes_a_starving_job() -> None:
    # A 1 GPU, long; it is demoted at 10 (threshold 10 GPU-s). A stream of queue-0 jobs then keeps it
    # pending. With promote_knob=1 it returns to queue 0 once it has waited as long as it ran (10 s).
    jobs: list[tuple[str, float, int, float]] = [("A", 0, 1, 100)]
    jobs += [(f"s{i}", 10 + 5 * i, 1, 9) for i in range(12)]
    instance = _instance(jobs)
    starving = make_policy("tiresias", thresholds=(10.0,), promote_knob=0.0)
    promoting = make_policy("tiresias", thresholds=(10.0,), promote_knob=1.0)
    plain = simulate(instance, starving)
    helped = simulate(instance, promoting)
    for result in (plain, helped):
        assert result.report.ok and not result.mismatches
    assert promoting.promoted >= 1  # type: ignore[attr-defined]
    assert starving.promoted == 0  # type: ignore[attr-defined]
    # Without promotion A waits until the stream is served (10 + 12·9 = 118 s). With it, A is promoted
    # at 20 (it waited 10 s, as long as it had run) to the back of queue 0: behind s1 (running since 19,
    # no preemption inside a queue) and s2 (arrived at 20), so it runs again at 19 + 9 + 9 = 37.
    resume_plain = plain.schedule.plan_index["A"].segments[1].start
    resume_helped = helped.schedule.plan_index["A"].segments[1].start
    assert resume_plain == pytest.approx(118.0)
    assert resume_helped == pytest.approx(37.0)


@pytest.mark.parametrize("round_length", [None, 30.0])
def test_tiresias_round_modes_are_valid(round_length: float | None) -> None:
    from formulation.generator import generate_instance

    instance = generate_instance(50, 2, 4, 3, arrivals="poisson", load=2.0)
    for knob in (0.0, 4.0):
        policy = make_policy("tiresias", round_length=round_length, promote_knob=knob)
        result = simulate(instance, policy, restart_cost=5.0)
        assert result.report.ok and not result.mismatches


def test_baselines_never_share() -> None:
    from formulation.generator import generate_instance

    instance = generate_instance(40, 2, 4, 5, arrivals="poisson", load=2.0)
    for name in ("fifo", "sjf", "ssf", "srsf", "tiresias"):
        result = simulate(instance, name)
        assert result.report.ok and not result.mismatches
        assert result.metrics is not None and result.metrics["shared_gpu_seconds"] == 0


def test_policies_are_deterministic() -> None:
    from formulation.generator import generate_instance
    from formulation.io import schedule_to_dict

    instance = generate_instance(30, 1, 8, 11, arrivals="poisson", load=1.5)
    for name in ("sjf", "srsf", "tiresias", "sjf-bsbf", "sjf-ffs"):
        first = schedule_to_dict(simulate(instance, name, validate=False).schedule)
        second = schedule_to_dict(simulate(instance, name, validate=False).schedule)
        first["metadata"].pop("simulation_seconds")
        second["metadata"].pop("simulation_seconds")
        assert first == second
