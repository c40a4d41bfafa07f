"""Tesserae: packing as maximum-weight bipartite matching (Algorithm 4), migration minimisation by
two-level Hungarian matching (Algorithms 2-3), and Tesserae-T on every public trace (validated)."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from formulation.cluster import Cluster
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference
from formulation.paths import shared_data_dir
from formulation.speed import Profile
from formulation.traces import load_trace
from formulation.validator import validate
from heuristics.simulator import simulate
from heuristics.tesserae import (
    combined_throughput,
    count_migrations,
    jobs_per_gpu,
    max_weight_bipartite,
    migration_cost_matrix,
    minimize_migrations,
)

DATA = shared_data_dir()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not found beside the repository")


# --- Algorithm 4 ----------------------------------------------------------------------------------------


def test_combined_throughput() -> None:
    # Tesserae §4.2: PointNet at 15/50 = 0.3 of its isolated speed, GPT3-3B at 1/2 = 0.5 -> 0.8.
    assert combined_throughput(1 / 0.3, 1 / 0.5) == pytest.approx(0.8)
    assert combined_throughput(1.25, 1.25) == pytest.approx(1.6)
    assert combined_throughput(None, 1.2) is None


def test_bipartite_packing_is_a_maximum_weight_matching() -> None:
    rng = np.random.default_rng(4)
    for _ in range(30):
        rows, cols = int(rng.integers(1, 6)), int(rng.integers(1, 8))
        weights = rng.uniform(0.5, 2.0, size=(rows, cols))
        weights[rng.random((rows, cols)) < 0.4] = 0.0  # non-edges
        pairs = max_weight_bipartite(weights)
        assert len({r for r, _ in pairs}) == len(pairs) == len({c for _, c in pairs})
        graph = nx.Graph()
        for r in range(rows):
            for c in range(cols):
                if weights[r, c] > 0:
                    graph.add_edge(("p", r), ("q", c), weight=float(weights[r, c]))
        best = sum(graph[u][v]["weight"] for u, v in nx.max_weight_matching(graph))
        assert sum(weights[r, c] for r, c in pairs) == pytest.approx(best)
        assert all(weights[r, c] > 0 for r, c in pairs)


# --- Algorithms 2-3 -------------------------------------------------------------------------------------


def _brute_force(old: list[list[str]], new: list[list[str]], gpn: int, demand: dict[str, int]) -> float:
    cost = migration_cost_matrix(old, new, demand)
    nodes = len(old) // gpn
    best = np.inf
    for node_perm in itertools.permutations(range(nodes)):  # new node b -> old node node_perm[b]
        total = 0.0
        for b, a in enumerate(node_perm):
            block = cost[a * gpn : (a + 1) * gpn, b * gpn : (b + 1) * gpn]
            total += min(sum(block[i, p[i]] for i in range(gpn)) for p in itertools.permutations(range(gpn)))
        best = min(best, total)
    return best


def test_gpu_renaming_needs_zero_migrations() -> None:
    gpn, nodes = 4, 4
    old_assignment = {
        "a": (0, 1, 2, 3),
        "b": (4, 5),
        "c": (4, 5),
        "d": (6,),
        "e": (8,),
        "f": (9,),
        "g": (9,),
        "h": (12, 13, 14, 15),
        "i": (12, 13, 14, 15),
        "j": (10,),
    }
    demand = {job: len(gpus) for job, gpus in old_assignment.items()}
    rng = np.random.default_rng(0)
    node_perm = rng.permutation(nodes)
    renaming = {}
    for node in range(nodes):
        inner = rng.permutation(gpn)
        for i in range(gpn):
            renaming[node * gpn + i] = int(node_perm[node]) * gpn + int(inner[i])
    new_assignment = {job: tuple(sorted(renaming[g] for g in gpus)) for job, gpus in old_assignment.items()}
    assert count_migrations(old_assignment, new_assignment) > 0  # as planned, jobs would move
    old = jobs_per_gpu(old_assignment, nodes * gpn)
    new = jobs_per_gpu(new_assignment, nodes * gpn)
    plan = minimize_migrations(old, new, gpus_per_node=gpn, demand=demand)
    assert plan.cost == pytest.approx(0.0)
    renamed = {job: tuple(sorted(plan.gpu_map[g] for g in gpus)) for job, gpus in new_assignment.items()}
    assert count_migrations(old_assignment, renamed) == 0
    assert renamed == {job: tuple(sorted(g)) for job, g in old_assignment.items()}
    assert sorted(plan.gpu_map) == list(range(nodes * gpn))  # a permutation


def test_hand_case_with_a_known_minimum() -> None:
    # One node, two GPUs. Now: A on GPU 0, B on GPU 1. Planned: A and B packed on one GPU, C (new)
    # alone on the other. Whatever the renaming, one of A, B must move: minimum cost 0.5 (out) + 0.5 (in).
    old = [["A"], ["B"]]
    new = [["A", "B"], ["C"]]
    demand = {"A": 1, "B": 1, "C": 1}
    plan = minimize_migrations(old, new, gpus_per_node=2, demand=demand)
    assert plan.cost == pytest.approx(1.0)
    assert plan.gpu_map == (0, 1)  # the packed GPU stays where A is: B is the one that moves
    before = {"A": (0,), "B": (1,)}
    after = {"A": (plan.gpu_map[0],), "B": (plan.gpu_map[0],), "C": (plan.gpu_map[1],)}
    assert count_migrations(before, after) == 1


def _random_plan(
    rng: np.random.Generator, jobs: list[str], demand: dict[str, int], gpn: int, nodes: int
) -> list[list[str]]:
    plan: list[list[str]] = [[] for _ in range(gpn * nodes)]
    for job in jobs:
        if rng.random() < 0.8:
            node = int(rng.integers(0, nodes))
            for g in rng.choice(gpn, size=demand[job], replace=False):
                plan[node * gpn + int(g)].append(job)
    return plan


def test_two_gpu_job_costs_one_when_it_moves_and_node_pairs_are_exact() -> None:
    # A 2-GPU job moving entirely costs 2 GPUs × (0.5/2 out + 0.5/2 in) = 1 (amortised per GPU).
    cost = migration_cost_matrix([["x"], ["x"], [], []], [[], [], ["x"], ["x"]], {"x": 2})
    assert cost[0, 0] == pytest.approx(0.25)  # x moves out of GPU 0
    assert cost[2, 2] == pytest.approx(0.25)  # x moves into GPU 2
    assert cost[0, 2] == pytest.approx(0.0)  # renaming plan GPU 2 to GPU 0: x stays
    assert float(np.trace(cost)) == pytest.approx(1.0)  # no renaming: the whole job moves, cost 1
    rng = np.random.default_rng(1)
    gpn, nodes = 3, 3
    jobs = [f"j{i}" for i in range(7)]
    for _ in range(25):
        demand = {j: int(rng.choice([1, 1, 2, 3])) for j in jobs}
        old, new = _random_plan(rng, jobs, demand, gpn, nodes), _random_plan(rng, jobs, demand, gpn, nodes)
        plan = minimize_migrations(old, new, gpus_per_node=gpn, demand=demand)
        assert plan.cost == pytest.approx(_brute_force(old, new, gpn, demand))


# --- Tesserae-T -----------------------------------------------------------------------------------------


def _instance(xi: float, capacity: int = 2) -> Instance:
    profiles = {"p": Profile("p", compute_table=((8, 1.0),))}
    jobs = tuple(
        Job(f"j{i}", arrival=0.0, num_gpus=1 + (i % 2), iterations=1000.0 + 100 * i, batch_size=8, profile="p")
        for i in range(12)
    )
    return Instance(Cluster(1, 4, capacity=capacity), jobs, profiles, ConstantInterference(xi), name="pack")


def test_packs_when_it_pays_and_only_equal_gpu_counts() -> None:
    packed = simulate(_instance(1.2), "tesserae-t")
    assert packed.report.ok and not packed.mismatches
    shared = [o for o in packed.report.occupancy if len(o.jobs) > 1]
    assert shared
    demand = {job.id: job.num_gpus for job in packed.instance.jobs}
    for occupancy in shared:
        assert len(occupancy.jobs) == 2
        assert demand[occupancy.jobs[0]] == demand[occupancy.jobs[1]]
    alone = simulate(_instance(2.5), "tesserae-t")  # 1/2.5 + 1/2.5 = 0.8 < 1: never worth packing
    assert alone.report.ok
    assert all(len(o.jobs) == 1 for o in alone.report.occupancy)
    assert packed.metrics is not None and alone.metrics is not None
    assert packed.metrics["makespan"] < alone.metrics["makespan"]


def test_migration_minimisation_moves_fewer_jobs() -> None:
    instance = _instance(1.2)
    with_it = simulate(instance, "tesserae-t", policy_options={"round_length": 100.0})
    without = simulate(instance, "tesserae-t", policy_options={"round_length": 100.0, "migration": False})
    assert with_it.report.ok and without.report.ok
    assert with_it.stats.migrations <= without.stats.migrations


PUBLIC_TRACES = [
    ("muri", "muri/trace1.csv", {"limit": 60}),
    ("muri", "muri/trace2_pr.csv", {"limit": 60}),
    ("muri", "muri/testbed_400_jobs.csv", {"limit": 60}),
    ("tiresias", "tiresias/60_job.csv", {}),
    ("gavel", "gavel/msr_seed0/0e4a51.trace", {"limit": 60}),
    ("gavel", "gavel/msr_seed0/e13805.trace", {"limit": 60}),
    ("shockwave", "shockwave/traces/120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace", {}),
    (
        "shockwave",
        "shockwave/traces/900_0.2_5_100_5_15_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace",
        {"limit": 80},
    ),
    ("pollux", "pollux/workloads/workload-1.csv", {}),
    ("pollux", "pollux/workloads-1.5/workload-1.csv", {"limit": 80}),
]


@needs_data
@pytest.mark.parametrize(("kind", "path", "options"), PUBLIC_TRACES)
def test_tesserae_validates_on_public_traces(kind: str, path: str, options: dict[str, int]) -> None:
    instance = load_trace(kind, DATA / path, **options)
    result = simulate(instance, "tesserae-t")
    report = validate(result.instance, result.schedule)
    assert report.ok, report.violations[:3]
    assert not result.mismatches
    assert len(report.completion) == len(instance.jobs)


@needs_data
def test_tesserae_slotted_and_with_restart_cost() -> None:
    instance = load_trace("gavel", DATA / "gavel/msr_seed0/0e4a51.trace", limit=40)
    result = simulate(instance, "tesserae-t", slot=60.0, restart_cost=30.0)
    report = validate(result.instance, result.schedule)
    assert report.ok, report.violations[:3]
    assert not result.mismatches


def _every_public_trace() -> list[tuple[str, str]]:
    if not DATA.is_dir():
        return []
    files: list[tuple[str, str]] = [("tiresias", "tiresias/60_job.csv")]
    files += [("muri", f"muri/{p.name}") for p in sorted((DATA / "muri").glob("*.csv")) if "cluster" not in p.name]
    files += [("gavel", f"gavel/msr_seed0/{p.name}") for p in sorted((DATA / "gavel/msr_seed0").glob("*.trace"))]
    files += [("shockwave", f"shockwave/traces/{p.name}") for p in sorted((DATA / "shockwave/traces").glob("*.trace"))]
    for folder in ("workloads", "workloads-0.5", "workloads-1.5"):
        files += [("pollux", f"pollux/{folder}/{p.name}") for p in sorted((DATA / "pollux" / folder).glob("*.csv"))]
    return files


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize(("kind", "path"), _every_public_trace())
def test_every_policy_on_every_public_trace(kind: str, path: str) -> None:
    """Heads (150 jobs) of every public trace file: Tesserae-T and Muri (measured or derived per-stage
    times), each schedule validated."""
    options = {"limit": 150, "capacity": 4} if kind == "muri" else {"limit": 150}
    instance = load_trace(kind, DATA / path, **options)
    for policy in ("tesserae-t", "muri-s", "muri-l"):
        result = simulate(instance, policy)
        report = validate(result.instance, result.schedule)
        assert report.ok, (policy, report.violations[:3])
        assert not result.mismatches
