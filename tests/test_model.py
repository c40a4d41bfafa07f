"""The problem model: speed model (Eq. 1-3), instances, interference, JSON round trips."""

from __future__ import annotations

import json

import jsonschema
import pytest

from formulation import (
    Cluster,
    ConstantInterference,
    DuettoInputError,
    InfeasibleInstanceError,
    Instance,
    Job,
    Profile,
    StageInterference,
    TableInterference,
    iteration_time,
)
from formulation.interference import interleaved_period, interleaving_efficiency
from formulation.io import (
    instance_from_dict,
    instance_json_schema,
    instance_to_dict,
    load_instance,
    save_instance,
    schedule_from_dict,
    schedule_json_schema,
    schedule_to_dict,
)
from formulation.schedule import Schedule


def test_eq1_to_eq3_by_hand() -> None:
    profile = Profile(
        "p",
        compute_alpha=0.1,
        compute_beta=0.01,
        comm_alpha=0.2,
        comm_beta=0.001,
        message_size=100,
        overlap_delta=2.0,
        inter_node_comm_factor=1.5,
    )
    # Single GPU: no communication; s=1 → t_comp(64) = 0.1 + 0.64.
    assert iteration_time(profile, 64, 1, num_gpus=1) == pytest.approx(0.74)
    # Two GPUs, one node: t_comm = 0.2 + 0.1 = 0.3; δ=2 → sqrt(0.74² + 0.3²).
    assert iteration_time(profile, 64, 1, num_gpus=2) == pytest.approx((0.74**2 + 0.3**2) ** 0.5)
    # Across nodes t_comm grows by the factor: 0.45.
    assert iteration_time(profile, 64, 1, num_gpus=2, num_nodes=2) == pytest.approx((0.74**2 + 0.45**2) ** 0.5)
    # s = 4: sub-batch 16, t_comp = 0.26; 3 micro-steps then the overlapped last one.
    expected = 3 * 0.26 + (0.26**2 + 0.3**2) ** 0.5
    assert iteration_time(profile, 64, 4, num_gpus=2) == pytest.approx(expected)
    with pytest.raises(DuettoInputError, match="do not divide"):
        iteration_time(profile, 64, 3, num_gpus=1)


def test_measured_table_restricts_sub_batches() -> None:
    profile = Profile("t", compute_table=((32, 0.5), (16, 0.3)))
    assert iteration_time(profile, 32, 2, num_gpus=1) == pytest.approx(0.3 + 0.3)
    assert profile.supports_sub_batch(16) and not profile.supports_sub_batch(8)
    cluster = Cluster(1, 2)
    instance = Instance(cluster, [Job("a", 0, 1, 10, 32, "t")], {"t": profile})
    assert [m.steps for m in instance.modes("a")] == [1, 2]


def test_modes_respect_memory_and_isolated_duration() -> None:
    profile = Profile("p", compute_alpha=0.1, compute_beta=0.01, memory_base_gib=2, memory_per_sample_gib=0.5)
    # Full batch 64 needs 34 GiB > 16 GiB; sub-batch 16 (8+2=10 GiB) fits.
    instance = Instance(Cluster(1, 1, gpu_memory_gib=16), [Job("a", 0, 1, 100, 64, "p")], {"p": profile})
    steps = [m.steps for m in instance.modes("a")]
    assert 1 not in steps and 2 not in steps and 4 in steps
    fastest = min(instance.modes("a"), key=lambda m: m.iteration_time)
    assert fastest.steps == 4
    assert instance.isolated_duration("a") == pytest.approx(100 * (3 * 0.26 + 0.26))


@pytest.mark.parametrize(
    ("job_kwargs", "match"),
    [
        ({"num_gpus": 0}, "num_gpus"),
        ({"iterations": 0}, "iterations"),
        ({"iterations": -5}, "iterations"),
        ({"arrival": -1}, "arrival"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_job_rejects_bad_fields(job_kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {
        "id": "j",
        "arrival": 0,
        "num_gpus": 1,
        "iterations": 10,
        "batch_size": 8,
        "profile": "p",
    }
    base.update(job_kwargs)
    with pytest.raises(DuettoInputError, match=match):
        Job(**base)  # type: ignore[arg-type]


def test_instance_rejects_unfit_jobs() -> None:
    profile = Profile("p", compute_alpha=1.0, memory_base_gib=40)
    with pytest.raises(InfeasibleInstanceError, match=r"job .a..*fits in 32"):
        Instance(Cluster(1, 4), [Job("a", 0, 1, 1, 1, "p")], {"p": profile})
    ok = Profile("q", compute_alpha=1.0)
    with pytest.raises(InfeasibleInstanceError, match="demands 8 GPUs but the cluster has 4"):
        Instance(Cluster(1, 4), [Job("a", 0, 8, 1, 1, "q")], {"q": ok})
    with pytest.raises(DuettoInputError, match="unknown profile 'zzz'"):
        Instance(Cluster(1, 4), [Job("a", 0, 1, 1, 1, "zzz")], {"q": ok})
    with pytest.raises(DuettoInputError, match="duplicate job id"):
        Instance(Cluster(1, 4), [Job("a", 0, 1, 1, 1, "q"), Job("a", 0, 1, 1, 1, "q")], {"q": ok})


def test_interference_ratio_below_one_is_rejected() -> None:
    with pytest.raises(DuettoInputError, match=">= 1"):
        ConstantInterference(0.9)
    with pytest.raises(DuettoInputError, match="'a' next to 'b'"):
        TableInterference({("a", "b"): 0.5})


def test_muri_interleaving_examples_from_the_paper() -> None:
    # Muri §4 (Figure 4, Eq. 1-2): A and B overlap perfectly (γ = 1); with A and C the CPU is always
    # busy and the GPU half of the time (γ = 0.75). Stage times are (CPU, GPU).
    a, b, c = (1.0, 1.0), (1.0, 1.0), (1.0, 0.0)
    assert interleaving_efficiency([a, b]) == pytest.approx(1.0)
    assert interleaving_efficiency([(2.0, 0.0), (0.0, 2.0)]) == pytest.approx(1.0)
    assert interleaving_efficiency([a, c]) == pytest.approx(0.75)
    # Four stages, the best ordering matters (Muri Figure 6).
    period, offsets = interleaved_period([(2, 1, 1, 1), (1, 2, 1, 1)])
    assert period == pytest.approx(5.0)
    assert offsets[0] == 0


def test_stage_interference_ratio() -> None:
    victim = Profile("v", compute_alpha=1.0, stage_times=(1.0, 1.0, 0.0))
    other = Profile("o", compute_alpha=1.0, stage_times=(1.0, 1.0, 0.0))
    # Best interleaving of two identical (1,1,0) jobs over three stages: T = 3 → ξ = 3/2.
    assert StageInterference().ratio(victim, other) == pytest.approx(1.5)
    plain = Profile("x", compute_alpha=1.0)
    assert StageInterference(fallback=1.2).ratio(victim, plain) == pytest.approx(1.2)


def _sample_instance() -> Instance:
    profiles = {
        "p": Profile("p", compute_alpha=0.1, compute_beta=0.002, memory_base_gib=1, memory_per_sample_gib=0.1),
        "q": Profile("q", compute_table=((16, 0.2), (8, 0.12)), stage_times=(0.05, 0.1, 0.0)),
    }
    jobs = [Job("a", 0, 1, 100, 32, "p"), Job("b", 5.5, 2, 50, 16, "q")]
    interference = TableInterference({("p", "q"): 1.3, ("q", "p"): None}, default=1.1)
    return Instance(Cluster(2, 2, 16.0), jobs, profiles, interference, name="sample", metadata={"seed": 3})


def test_instance_json_round_trip_and_schema(tmp_path) -> None:
    instance = _sample_instance()
    data = instance_to_dict(instance)
    jsonschema.validate(data, instance_json_schema())
    again = instance_from_dict(json.loads(json.dumps(data)))
    assert instance_to_dict(again) == data
    path = tmp_path / "inst.json"
    save_instance(instance, path)
    assert instance_to_dict(load_instance(path)) == data
    assert again.ratio("b", "a") is None and again.ratio("a", "b") == pytest.approx(1.3)


def test_schedule_json_round_trip_and_schema() -> None:
    schedule = Schedule.non_preemptive([("a", 0, [0], 1), ("b", 10, [1, 2], 2)], completions={"a": 9.0})
    data = schedule_to_dict(schedule)
    jsonschema.validate(data, schedule_json_schema())
    assert schedule_to_dict(schedule_from_dict(data)) == data


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d["jobs"][0].update(num_gpus=0), "jobs.0.num_gpus"),
        (lambda d: d["jobs"][1].pop("iterations"), "jobs.1.iterations"),
        (lambda d: d["jobs"][0].update(profile="nope"), "unknown profile 'nope'"),
        (lambda d: d["interference"].update(default=0.5), "interference"),
        (lambda d: d["cluster"].update(capacity=0), "cluster.capacity"),
        (lambda d: d.update(format="something"), "format"),
        (lambda d: d["jobs"][0].update(surprise=1), "surprise"),
    ],
)
def test_bad_instance_json_names_the_field(mutate, match: str) -> None:
    data = instance_to_dict(_sample_instance())
    mutate(data)
    with pytest.raises(DuettoInputError, match=match):
        instance_from_dict(data, source="inst.json")
