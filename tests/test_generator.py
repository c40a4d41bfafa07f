"""The standard random instance family (formulation.generator)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from formulation import io
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.interference import HashedPairInterference


def test_same_seed_same_instance() -> None:
    a = io.instance_to_dict(generate_instance(30, 2, 4, 7, arrivals="poisson"))
    b = io.instance_to_dict(generate_instance(30, 2, 4, 7, arrivals="poisson"))
    assert a == b
    # and it survives a JSON round trip unchanged
    again = io.instance_to_dict(io.instance_from_dict(json.loads(json.dumps(a))))
    assert again == a


def test_different_seeds_differ() -> None:
    a = io.instance_to_dict(generate_instance(30, 2, 4, 1))
    b = io.instance_to_dict(generate_instance(30, 2, 4, 2))
    assert a["jobs"] != b["jobs"]
    assert a["profiles"] != b["profiles"]


def test_ids_profiles_and_clean_numbers() -> None:
    inst = generate_instance(40, 2, 4, 3)
    assert [job.id for job in inst.jobs] == [f"j{i}" for i in range(40)]
    assert all(job.profile == f"p-{job.id}" for job in inst.jobs)
    assert set(inst.profiles) == {f"p-j{i}" for i in range(40)}
    for job in inst.jobs:
        assert job.arrival == 0.0
        assert job.iterations == int(job.iterations) >= 1
        assert job.batch_size in (32, 64, 128, 256)
        duration = inst.isolated_duration(job)
        # isolated durations are whole seconds in the sampled range
        assert duration == pytest.approx(round(duration), rel=1e-12)
        assert 60 <= round(duration) <= 3600
        profile = inst.profile_of(job)
        if job.num_gpus > 1:
            assert profile.comm_time(job.num_gpus) > 0
            assert profile.inter_node_comm_factor == 1.5
        else:
            assert profile.comm_time(1) == 0.0


def test_interference_covers_all_ordered_pairs_rounded() -> None:
    inst = generate_instance(12, 1, 4, 5, xi_range=(1.2, 1.8))
    model = inst.interference
    assert isinstance(model, HashedPairInterference)
    values = {(a.id, b.id): inst.ratio(a, b) for a in inst.jobs for b in inst.jobs if a.id != b.id}
    assert len(values) == 12 * 11
    assert all(xi is not None and 1.2 <= xi <= 1.8 and round(xi, 2) == xi for xi in values.values())
    # ordered: the two directions are independent draws, and they spread over the range
    assert any(values[(a, b)] != values[(b, a)] for (a, b) in values)
    assert max(v for v in values.values() if v) - min(v for v in values.values() if v) > 0.3
    # the same seed gives the same ratios; another seed other ones
    again = generate_instance(12, 1, 4, 5, xi_range=(1.2, 1.8))
    assert all(again.ratio(a, b) == xi for (a, b), xi in values.items())
    other = generate_instance(12, 1, 4, 6, xi_range=(1.2, 1.8))
    assert any(other.ratio(a, b) != xi for (a, b), xi in values.items())


def test_demands_larger_than_cluster_are_dropped() -> None:
    inst = generate_instance(200, 1, 2, 11)
    assert {job.num_gpus for job in inst.jobs} <= {1, 2}
    big = generate_instance(400, 2, 8, 11)
    counts = {g: sum(job.num_gpus == g for job in big.jobs) for g in (1, 2, 4, 8)}
    assert set(counts) == {1, 2, 4, 8} and all(counts.values())
    # 0.5 / 0.3 / 0.15 / 0.05 mix, loosely
    assert 150 < counts[1] < 250 and counts[8] < 40


def test_memory_pressure_fraction_and_meaning() -> None:
    inst = generate_instance(400, 2, 4, 13, memory_pressure=0.3, gpu_memory_gib=16.0)
    half = inst.cluster.gpu_memory_gib / 2
    heavy = []
    for job in inst.jobs:
        full = inst.profile_of(job).memory_gib(job.batch_size)
        assert full <= inst.cluster.gpu_memory_gib  # always fits alone at full batch
        if full > half:
            heavy.append(job)
            # a heavy job has a sub-batch mode that needs at most half the GPU
            assert any(m.memory_gib <= half for m in inst.modes(job.id))
        else:
            assert full <= 0.4 * inst.cluster.gpu_memory_gib + 1e-9
    assert 0.22 < len(heavy) / 400 < 0.38
    none = generate_instance(50, 2, 4, 13, memory_pressure=0.0)
    assert all(
        none.profile_of(j).memory_gib(j.batch_size) <= 0.4 * none.cluster.gpu_memory_gib + 1e-9 for j in none.jobs
    )


def test_full_batch_is_the_fastest_mode() -> None:
    inst = generate_instance(50, 2, 4, 17)
    for job in inst.jobs:
        modes = inst.modes(job.id)
        assert modes[0].steps == 1
        assert len(modes) > 1


def test_poisson_arrivals_meet_offered_load() -> None:
    # Over many jobs, Σ G·L / (num_gpus · last arrival) is close to the requested load.
    for load in (0.5, 2.0):
        inst = generate_instance(1000, 4, 4, 21, arrivals="poisson", load=load, xi_range=(1.0, 1.0))
        arrivals = np.array([job.arrival for job in inst.jobs])
        assert arrivals[0] == 0.0
        assert np.all(np.diff(arrivals) >= 0)
        assert np.all(arrivals == np.round(arrivals))
        work = sum(job.num_gpus * inst.isolated_duration(job) for job in inst.jobs)
        offered = work / (inst.cluster.num_gpus * arrivals[-1])
        assert offered == pytest.approx(load, rel=0.08)


def test_metadata_records_parameters() -> None:
    inst = generate_instance(5, 1, 8, 99, arrivals="poisson", load=0.7, name="mine")
    assert inst.name == "mine"
    meta = inst.metadata
    assert meta["seed"] == 99 and meta["arrivals"] == "poisson" and meta["load"] == 0.7
    assert meta["gpu_demand_weights"] == {"1": 0.5, "2": 0.3, "4": 0.15, "8": 0.05}
    json.dumps(dict(meta))  # JSON-safe
    assert generate_instance(5, 1, 8, 99).name == "random-n5-1x8-s99"


def test_cluster_parameters() -> None:
    inst = generate_instance(3, 3, 2, 0, gpu_memory_gib=24.0, capacity=3)
    assert (inst.cluster.nodes, inst.cluster.gpus_per_node) == (3, 2)
    assert inst.cluster.gpu_memory_gib == 24.0 and inst.cluster.capacity == 3


def test_custom_duration_range_and_demand_mix() -> None:
    inst = generate_instance(100, 2, 4, 8, duration_range=(100, 200), gpu_demand_weights={4: 1.0})
    assert all(job.num_gpus == 4 for job in inst.jobs)
    assert all(100 <= round(inst.isolated_duration(job)) <= 200 for job in inst.jobs)
    assert math.isclose(inst.isolated_duration("j0"), round(inst.isolated_duration("j0")), rel_tol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"num_jobs": 0}, "num_jobs"),
        ({"nodes": 0}, "nodes"),
        ({"gpus_per_node": 1.5}, "gpus_per_node"),
        ({"seed": -1}, "seed"),
        ({"arrivals": "uniform"}, "arrivals"),
        ({"load": 0.0}, "load"),
        ({"load": math.inf}, "load"),
        ({"xi_range": (0.9, 1.5)}, "xi_range"),
        ({"xi_range": (2.0, 1.5)}, "xi_range"),
        ({"xi_range": "abc"}, "xi_range"),
        ({"duration_range": (0.0, 10.0)}, "duration_range"),
        ({"gpu_demand_weights": {16: 1.0}}, "gpu_demand_weights"),
        ({"gpu_demand_weights": {1: -1.0}}, "gpu_demand_weights"),
        ({"gpu_demand_weights": {}}, "gpu_demand_weights"),
        ({"gpu_memory_gib": -2.0}, "gpu_memory_gib"),
        ({"memory_pressure": 1.5}, "memory_pressure"),
        ({"capacity": 0}, "capacity"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs: dict[str, Any], field: str) -> None:
    args: dict[str, Any] = {"num_jobs": 4, "nodes": 1, "gpus_per_node": 4, "seed": 0}
    args.update(kwargs)
    with pytest.raises(DuettoInputError) as info:
        generate_instance(**args)
    assert info.value.field == field
    assert field in str(info.value)
