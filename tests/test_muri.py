"""Muri: interleaving efficiency (Eq. 1-4), exact matching routes, multi-round grouping (Algorithm 1),
and the Muri-S / Muri-L policies on the public traces (every schedule passes the validator)."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from formulation.cluster import Cluster
from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import StageInterference, interleaved_period, interleaving_efficiency
from formulation.paths import shared_data_dir
from formulation.speed import Profile
from formulation.traces import load_trace
from formulation.validator import validate
from heuristics.matching import (
    MatchingMethod,
    class_matching,
    class_matching_milp,
    dense_blossom_matching,
    edmonds_lp_matching,
    max_weight_matching,
    quantize,
)
from heuristics.muri import (
    GroupingCache,
    GroupingItem,
    GroupingStats,
    MuriPolicy,
    bucket_grouping,
    group_efficiency,
    group_model_gap,
    group_offsets,
    group_period,
    group_slowdowns,
    grouping_rounds,
    multi_round_grouping,
)
from heuristics.registry import make_policy
from heuristics.simulator import simulate

DATA = shared_data_dir()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not found beside the repository")

# Muri Figure 4: (CPU, GPU) time units per iteration. A and C lean on the CPU, B and D on the GPU.
A = (2.0, 1.0)
B = (1.0, 2.0)
C = (2.0, 1.0)
D = (1.0, 2.0)


# --- Eq. 1-4 --------------------------------------------------------------------------------------------


def test_gamma_paper_examples() -> None:
    # "the interleaving efficiency of grouping A and B is 1" / "of grouping A and C is 0.75".
    assert group_efficiency([A, B]) == pytest.approx(1.0)
    assert group_efficiency([A, C]) == pytest.approx(0.75)
    # Eq. 1: T = max(t_0^0, t_1^1) + max(t_0^1, t_1^0).
    assert group_period([A, B]) == pytest.approx(max(A[0], B[1]) + max(A[1], B[0]))
    assert group_period([A, C]) == pytest.approx(4.0)
    # Same numbers as formulation.interference (the functions are reused, not re-derived).
    assert group_efficiency([A, C]) == pytest.approx(interleaving_efficiency([A, C]))
    assert group_slowdowns([A, B]) == pytest.approx((1.0, 1.0))
    assert group_slowdowns([A, C]) == pytest.approx((4 / 3, 4 / 3))


def test_best_ordering_matters() -> None:
    # Muri Figure 6: four resources; A spends 2 units on the CPU, B 2 units on the GPU, 1 elsewhere.
    a, b = (2.0, 1.0, 1.0, 1.0), (1.0, 2.0, 1.0, 1.0)
    periods = {offset: sum(max(a[slot], b[(slot + offset) % 4]) for slot in range(4)) for offset in (1, 2, 3)}
    assert periods == {1: 5.0, 2: 6.0, 3: 6.0}  # only one ordering overlaps perfectly
    assert group_period([a, b]) == 5.0
    assert group_offsets([a, b]) == (0, 1)
    assert group_slowdowns([a, b]) == (1.0, 1.0)
    assert group_efficiency([a, b]) == pytest.approx(10 / (4 * 5))
    worst = 10 / (4 * 6)
    assert group_efficiency([a, b]) > worst


def test_groups_larger_than_stage_count_use_idle_slots() -> None:
    # Four jobs that only use resource 0 of three: one slot per job, each waits for the others.
    job = (1.0, 0.0, 0.0)
    assert group_period([job] * 4) == 4.0
    assert group_efficiency([job] * 4) == pytest.approx(4 / (3 * 4))
    assert group_slowdowns([job] * 4) == (4.0,) * 4
    # SPEC's pairwise rule sees only the pair period (2): the group period is twice as slow.
    assert interleaved_period([job, job])[0] == 2.0
    assert group_model_gap([job] * 4) == pytest.approx(2.0)
    assert group_model_gap([A, B]) == pytest.approx(1.0)  # pairs: identical models


def test_grouping_rounds() -> None:
    assert [grouping_rounds(k) for k in (1, 2, 3, 4, 8)] == [0, 1, 2, 2, 3]


# --- exact matching -------------------------------------------------------------------------------------


def _networkx_total(weights: np.ndarray) -> float:
    graph = nx.Graph()
    n = weights.shape[0]
    graph.add_nodes_from(range(n))
    for u, v in itertools.combinations(range(n), 2):
        if np.isfinite(weights[u, v]) and weights[u, v] > 0:
            graph.add_edge(u, v, weight=float(weights[u, v]))
    matching = nx.max_weight_matching(graph)
    return sum(weights[u, v] for u, v in matching)


def test_blossom_equals_networkx_on_small_graphs() -> None:
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(2, 15))
        weights = rng.random((n, n))
        weights = (weights + weights.T) / 2
        if trial % 2:
            weights[rng.random((n, n)) < 0.3] = np.nan
            weights = np.where(np.isnan(weights) | np.isnan(weights.T), np.nan, weights)
        pairs = dense_blossom_matching(weights, resolution=1e-9)
        ours = sum(weights[u, v] for u, v in pairs)
        assert ours == pytest.approx(_networkx_total(weights), abs=n * 1e-9)
        # Item classes of size one: the class route solves the same problem.
        result = max_weight_matching(list(range(n)), weights, method="classes", resolution=1e-9)
        assert sum(weights[u, v] for u, v in result.pairs) == pytest.approx(ours, abs=n * 1e-9)


def test_grouping_round_equals_networkx_on_small_graphs() -> None:
    # Algorithm 1's first round on up to 12 jobs: the matched γ equals networkx's maximum weight.
    rng = np.random.default_rng(13)
    for _ in range(20):
        n = int(rng.integers(2, 13))
        stages = [tuple(rng.uniform(0.0, 1.0, size=3)) for _ in range(n)]
        gamma = np.array([[group_efficiency([a, b]) for b in stages] for a in stages])
        methods: tuple[MatchingMethod, ...] = ("blossom", "classes")
        for method in methods:
            stats: list[GroupingStats] = []
            items = [GroupingItem(1, stage) for stage in stages]
            bucket_grouping(items, max_group_size=2, method=method, stats=stats)
            assert stats[0].matched_weight[0] * 1e-6 == pytest.approx(_networkx_total(gamma), abs=n * 1e-6)


def test_class_collapsing_is_exact_against_plain_blossom() -> None:
    rng = np.random.default_rng(11)
    for trial in range(150):
        m = int(rng.integers(1, 9))
        n = int(rng.integers(2, 70))
        weights = rng.random((m, m))
        weights = (weights + weights.T) / 2
        if trial % 3 == 0:
            forbid = rng.random((m, m)) < 0.3
            forbid |= forbid.T
            weights[forbid] = np.nan
        labels = rng.integers(0, m, size=n)
        plain = max_weight_matching(labels, weights, method="blossom")
        classes = max_weight_matching(labels, weights, method="classes")
        assert classes.weight == plain.weight, trial
        # The returned pairs are a matching with that weight.
        used = [i for pair in classes.pairs for i in pair]
        assert len(used) == len(set(used))
        integer = np.where(np.isfinite(weights), quantize(np.nan_to_num(weights)), 0)
        assert sum(int(integer[labels[u], labels[v]]) for u, v in classes.pairs) == plain.weight


def test_both_class_solvers_agree_and_the_lp_certifies() -> None:
    rng = np.random.default_rng(3)
    certified = 0
    for _ in range(60):
        m = int(rng.integers(2, 9))
        weights = quantize((lambda w: (w + w.T) / 2)(rng.random((m, m))))
        sizes = rng.integers(0, 40, size=m)
        milp = class_matching_milp(weights, sizes)
        lp = edmonds_lp_matching(weights, sizes)
        assert class_matching(weights, sizes).weight == milp.weight
        if lp is not None:
            certified += 1
            assert lp.weight == milp.weight
            assert np.all(lp.degree(m) <= sizes)
    assert certified >= 55  # the Edmonds polytope is integral: the certificate almost always closes


def test_thousand_jobs_exact_and_fast_enough_to_test() -> None:
    # 1,000 jobs of 8 stage profiles: the class route's answer equals plain blossom on a sample size
    # blossom handles quickly, and the 1,000-job call returns a perfect matching.
    rng = np.random.default_rng(5)
    profiles = [tuple(rng.uniform(0.0, 1.0, size=3)) for _ in range(8)]
    weights = np.array([[group_efficiency([p, q]) for q in profiles] for p in profiles])
    labels = rng.integers(0, 8, size=1000)
    result = max_weight_matching(labels, weights, method="classes")
    assert len(result.pairs) == 500
    sample = labels[:120]
    assert (
        max_weight_matching(sample, weights, method="classes").weight
        == max_weight_matching(sample, weights, method="blossom").weight
    )


# --- Algorithm 1 ----------------------------------------------------------------------------------------


def test_figure4_grouping_pairs_complementary_jobs() -> None:
    groups = multi_round_grouping([A, C, B, D], max_group_size=2)
    assert sorted(groups) == [(0, 2), (1, 3)]  # A with B, C with D (plan 1 of Figure 4)


def test_multi_round_grouping_builds_groups_of_four() -> None:
    rng = np.random.default_rng(2)
    stages = [tuple(rng.uniform(0.1, 1.0, size=3)) for _ in range(16)]
    groups = multi_round_grouping(stages, max_group_size=4)
    assert sorted(i for g in groups for i in g) == list(range(16))
    assert all(len(g) == 4 for g in groups)
    # Budgeted: stop merging as soon as the groups fit.
    fitted = multi_round_grouping(stages, max_group_size=4, target_groups=10)
    assert len(fitted) == 10
    assert max(len(g) for g in fitted) <= 4


def test_rounds_match_exactly_with_either_route() -> None:
    rng = np.random.default_rng(9)
    profiles = [tuple(rng.uniform(0.05, 1.0, size=3)) for _ in range(5)]
    items = [GroupingItem(1, profiles[int(rng.integers(0, 5))]) for _ in range(70)]
    results = {}
    methods: tuple[MatchingMethod, ...] = ("blossom", "classes")
    for method in methods:
        stats: list[GroupingStats] = []
        groups = bucket_grouping(items, max_group_size=4, method=method, stats=stats)
        results[method] = (stats[0].matched_weight, sorted(len(g) for g in groups))
    assert results["blossom"][0] == results["classes"][0]  # same optimum in every round


def test_buckets_memory_and_budget() -> None:
    items = [GroupingItem(g, (0.5, 0.3, 0.2), memory) for g, memory in [(1, 10.0)] * 6 + [(2, 10.0)] * 4]
    groups = bucket_grouping(items, max_group_size=4, gpu_budget=4, memory_limit=25.0)
    for group in groups:
        assert len({items[i].num_gpus for i in group}) == 1  # only jobs of equal GPU count share
        assert sum(items[i].memory_gib for i in group) <= 25.0  # at most two 10 GiB jobs fit
        assert len(group) <= 2
    # 6 one-GPU jobs in pairs need 3 GPUs, 4 two-GPU jobs in pairs need 4: the budget of 4 cannot be
    # met, so everything that can merge has merged.
    assert sum(items[g[0]].num_gpus for g in groups) == 3 + 4
    cache = GroupingCache()
    again = bucket_grouping(items, max_group_size=4, gpu_budget=4, memory_limit=25.0, cache=cache)
    bucket_grouping(items, max_group_size=4, gpu_budget=4, memory_limit=25.0, cache=cache)
    assert cache.hits > 0 and again == groups


# --- policies -------------------------------------------------------------------------------------------


def _stage_instance(capacity: int = 4) -> Instance:
    profiles = {
        "cpu": Profile("cpu", compute_table=((8, 1.0),), stage_times=(0.7, 0.2, 0.1)),
        "gpu": Profile("gpu", compute_table=((8, 1.0),), stage_times=(0.1, 0.8, 0.1)),
        "net": Profile("net", compute_table=((8, 1.0),), stage_times=(0.1, 0.2, 0.7)),
    }
    jobs = []
    for i in range(24):
        kind = ("cpu", "gpu", "net")[i % 3]
        jobs.append(
            Job(
                f"j{i}",
                arrival=60.0 * (i // 6),
                num_gpus=1 + (i % 2),
                iterations=600.0 + 50 * i,
                batch_size=8,
                profile=kind,
            )
        )
    return Instance(Cluster(1, 4, capacity=capacity), tuple(jobs), profiles, StageInterference(), name="stages")


@pytest.mark.parametrize("policy", ["muri-s", "muri-l"])
@pytest.mark.parametrize("slot", [None, 30.0])
def test_policies_share_gpus_and_validate(policy: str, slot: float | None) -> None:
    instance = _stage_instance()
    result = simulate(instance, policy, slot=slot)
    assert result.report.ok, result.report.violations[:3]
    assert not result.mismatches
    shared = any(len(o.jobs) > 1 for o in result.report.occupancy)
    assert shared  # 24 jobs on 4 GPUs: Muri groups them
    assert max(len(o.jobs) for o in result.report.occupancy) <= 4


def test_muri_beats_exclusive_srsf_on_complementary_jobs() -> None:
    instance = _stage_instance()
    muri = simulate(instance, "muri-s", policy_options={"round_length": 60.0})
    srsf = simulate(instance, "srsf")
    assert muri.report.ok and srsf.report.ok
    assert muri.metrics is not None and srsf.metrics is not None
    assert muri.metrics["jct_avg"] < srsf.metrics["jct_avg"]


@pytest.mark.parametrize("policy", ["muri-l+hay", "muri-s+hay", "tesserae-t+hay"])
def test_hay_placement_variants(policy: str) -> None:
    result = simulate(_stage_instance(), policy)
    assert result.report.ok, result.report.violations[:3]
    assert result.policy == policy


@needs_data
def test_overloaded_trace_head_is_grouped_and_valid() -> None:
    # 80 jobs of trace2 submitted at once on 16 GPUs: Muri must build groups of up to four.
    instance = load_trace("muri", DATA / "muri" / "trace2_pr.csv", limit=80, capacity=4, nodes=2, gpus_per_node=8)
    instance = instance.replace(jobs=[job for job in instance.jobs if job.num_gpus <= 16])
    policy = MuriPolicy(priority="srsf")
    result = simulate(instance, policy)
    assert result.report.ok, result.report.violations[:3]
    assert not result.mismatches
    assert max(policy.group_sizes) >= 3
    assert max(len(o.jobs) for o in result.report.occupancy) <= 4


def test_capacity_two_means_pairs_only() -> None:
    result = simulate(_stage_instance(capacity=2), "muri-s")
    assert result.report.ok
    assert max(len(o.jobs) for o in result.report.occupancy) == 2


def test_missing_stage_times_is_a_clear_error() -> None:
    instance = _stage_instance()
    plain = Profile("plain", compute_table=((8, 1.0),))
    jobs = (*instance.jobs[:3], Job("x", 0.0, 1, 10.0, 8, "plain"))
    broken = Instance(instance.cluster, jobs, {**instance.profiles, "plain": plain}, StageInterference())
    with pytest.raises(DuettoInputError, match=r"stage_times.*'plain'"):
        simulate(broken, "muri-s")
    with pytest.raises(DuettoInputError, match="1 of 4 jobs"):
        MuriPolicy().check_instance(broken)


@needs_data
def test_muri_runs_on_a_gavel_trace_and_never_groups_a_forbidden_pair() -> None:
    # Gavel traces get derived stage times (docs/model.md "Per-stage times"); their measured pair
    # table forbids some pairs, which Muri's grouping must respect (it knows only memory otherwise)
    trace = sorted((DATA / "gavel" / "msr_seed0").glob("*.trace"))[0]
    instance = load_trace("gavel", trace, limit=80, nodes=1, gpus_per_node=4)  # loaded: Muri groups
    forbidden = {
        (a, b)
        for a in instance.profiles
        for b in instance.profiles
        if instance.interference.ratio(instance.profiles[a], instance.profiles[b]) is None
    }
    assert forbidden  # the measured table has pairs that may not share
    for policy in ("muri-s", "muri-l"):
        result = simulate(instance, policy)
        report = validate(result.instance, result.schedule)
        assert report.ok, report.violations[:3]
        grouped = 0
        for occupancy in report.occupancy:
            profiles = [instance.job(job_id).profile for job_id in occupancy.jobs]
            grouped += len(profiles) > 1
            assert not any((a, b) in forbidden for a in profiles for b in profiles if a != b or profiles.count(a) > 1)
        assert grouped > 0  # it does group where pairs are allowed


MURI_FILES = [
    "trace1.csv",
    "trace2.csv",
    "trace3.csv",
    "trace4.csv",
    "trace1_pr.csv",
    "trace2_pr.csv",
    "trace3_pr.csv",
    "trace4_pr.csv",
    "job_type_1.csv",
    "job_type_2.csv",
    "job_type_3.csv",
    "job_type_4.csv",
    "testbed_400_jobs.csv",
]


@needs_data
@pytest.mark.parametrize("file", MURI_FILES)
def test_muri_policies_validate_on_every_muri_trace(file: str) -> None:
    instance = load_trace("muri", DATA / "muri" / file, limit=40, capacity=4)
    for policy in ("muri-s", "muri-l"):
        result = simulate(instance, policy)
        report = validate(result.instance, result.schedule)
        assert report.ok, (policy, report.violations[:3])
        assert not result.mismatches
        assert all(math.isfinite(t) for t in report.completion.values())
        assert len(report.completion) == len(instance.jobs)


@needs_data
@pytest.mark.parametrize(
    "kind,path",
    [
        ("gavel", "gavel/msr_seed0/0e4a51.trace"),
        ("shockwave", "shockwave/traces/120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace"),
    ],
)
def test_muri_serves_traces_without_measured_stage_profiles(kind: str, path: str) -> None:
    # per-stage times derived from the Eq. 1-3 profile (docs/model.md): every job has them
    instance = load_trace(kind, DATA / path, limit=10)
    make_policy("muri-s").check_instance(instance)  # type: ignore[attr-defined]
    assert all(instance.profiles[job.profile].stage_times is not None for job in instance.jobs)
    assert "derived" in str(instance.metadata["stage_times"])
