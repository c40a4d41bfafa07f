"""Issue 19: the optimised hot paths give exactly what the code before them gave.

The unoptimised code is kept frozen in ``benchmarks/reference/`` (it is also what
``benchmarks.policy_speed`` measures the speed-up against); these tests run both on seeded instances and
compare every start, GPU set, accumulation step and completion (exact equality, no tolerance).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import heuristics.lookahead as lookahead
from benchmarks.reference import lookahead_ref, validator_ref
from benchmarks.reference.tesserae_ref import PerPairTesserae
from formulation import interference, validator
from formulation.generator import generate_instance
from formulation.instance import Instance
from formulation.interference import TableInterference
from formulation.paths import shared_data_dir
from formulation.schedule import JobPlan, Schedule, Segment
from heuristics import lookahead_kernel
from heuristics.placement import InstanceFacts
from heuristics.simulator import SimulationResult, simulate
from heuristics.tesserae import TesseraePolicy


def _schedule(result: SimulationResult) -> dict[str, Any]:
    plans = {p.job_id: [(s.start, s.end, tuple(s.gpus), s.steps) for s in p.segments] for p in result.schedule.plans}
    return {"plans": plans, "completion": result.completion}


def _muri_prefix(jobs: int) -> Instance:
    from formulation.traces import load_trace

    path = shared_data_dir() / "muri" / "trace2.csv"
    if not path.exists():
        pytest.skip(f"Muri trace not found at {path}")
    instance = load_trace("muri", path, semantics="duetto")  # the frozen reference code knows SPEC's rule only
    return instance.replace(jobs=sorted(instance.jobs, key=lambda j: (j.arrival, j.id))[:jobs])


# generated instances for the look-ahead identity tests: (n, nodes, gpn, seed, arrivals, slot, capacity)
LOOKAHEAD_CASES = [
    (12, 1, 4, 0, "zero", 30.0, None),
    (16, 2, 4, 1, "poisson", None, None),
    (40, 2, 8, 2, "zero", 60.0, None),
    (60, 2, 8, 3, "poisson", None, None),
    (80, 4, 8, 4, "poisson", None, 3),
    (30, 1, 8, 5, "zero", None, 1),
]


@pytest.mark.parametrize(("n", "nodes", "gpn", "seed", "arrivals", "slot", "capacity"), LOOKAHEAD_CASES)
def test_lookahead_identical_to_reference(
    n: int, nodes: int, gpn: int, seed: int, arrivals: str, slot: float | None, capacity: int | None
) -> None:
    instance = generate_instance(n, nodes, gpn, seed, arrivals=arrivals)  # type: ignore[arg-type]
    new_policy = lookahead.LookaheadPolicy(compiled=False)  # the compiled model: compared with this one below
    old_policy = lookahead_ref.LookaheadPolicy()
    new = simulate(instance, new_policy, slot=slot, capacity=capacity)
    old = simulate(instance, old_policy, slot=slot, capacity=capacity, validate=False)
    assert new.report is not None and new.report.ok and not new.mismatches
    assert _schedule(new) == _schedule(old)
    assert (new_policy.rollouts, new_policy.events, new_policy.deviations) == (
        old_policy.rollouts,
        old_policy.events,
        old_policy.deviations,
    )
    assert new_policy.rollouts > 0


@pytest.mark.parametrize(
    "options",
    [
        {"foresight": True},  # arrivals inside the rollouts (the pending list grows there)
        {"bases": ("bsbf", "nosharing", "share"), "tail": True},
        {"order": "area", "head": 4, "partners": 2, "horizon": 20, "max_events": 12},
    ],
)
def test_lookahead_options_identical_to_reference(options: dict[str, Any]) -> None:
    instance = generate_instance(50, 2, 4, 7, arrivals="poisson")
    new_policy = lookahead.LookaheadPolicy(compiled=False, **options)
    old_policy = lookahead_ref.LookaheadPolicy(**options)
    new = simulate(instance, new_policy, capacity=3)
    old = simulate(instance, old_policy, capacity=3, validate=False)
    assert new.report is not None and new.report.ok
    assert _schedule(new) == _schedule(old)
    assert (new_policy.rollouts, new_policy.events, new_policy.deviations) == (
        old_policy.rollouts,
        old_policy.events,
        old_policy.deviations,
    )
    assert new_policy.rollouts > 0


@pytest.mark.parametrize("slot", [None, 60.0])
def test_lookahead_identical_on_muri_trace_prefix(slot: float | None) -> None:
    """Muri's trace2 (gangs of 1-32 GPUs on 64 GPUs): where the shortcuts for gangs are exercised."""
    instance = _muri_prefix(150)
    new_policy = lookahead.LookaheadPolicy(compiled=False)
    old_policy = lookahead_ref.LookaheadPolicy()
    new = simulate(instance, new_policy, slot=slot, validate=False)
    old = simulate(instance, old_policy, slot=slot, validate=False)
    assert _schedule(new) == _schedule(old)
    assert (new_policy.rollouts, new_policy.events) == (old_policy.rollouts, old_policy.events)
    assert new_policy.deviations > 0  # the look-ahead did decide something there


# --- the compiled forward model (heuristics.lookahead_kernel) ----------------------------------------------


def _compiled_equals_python(instance: Instance, options: dict[str, Any], **run: Any) -> None:
    """Run the policy with the compiled rollouts and with the Python model: the same schedule, rollouts,
    events and deviations (the compiled model's scores are the Python floats bit for bit)."""
    if not lookahead_kernel.compile_now():
        pytest.skip("numba not installed (pip install 'duetto[fast]')")
    fast = lookahead.LookaheadPolicy(compiled=True, **options)
    slow = lookahead.LookaheadPolicy(compiled=False, **options)
    new = simulate(instance, fast, **run)
    old = simulate(instance, slow, **{**run, "validate": False})
    assert new.report is None or (new.report.ok and not new.mismatches)
    assert _schedule(new) == _schedule(old)
    assert (fast.rollouts, fast.events, fast.deviations) == (slow.rollouts, slow.events, slow.deviations)
    assert fast.compiled_steps > 0 and slow.compiled_steps == 0  # each ran the model it was meant to
    assert fast.rollouts > 0


@pytest.mark.parametrize(("n", "nodes", "gpn", "seed", "arrivals", "slot", "capacity"), LOOKAHEAD_CASES)
def test_lookahead_compiled_identical(
    n: int, nodes: int, gpn: int, seed: int, arrivals: str, slot: float | None, capacity: int | None
) -> None:
    instance = generate_instance(n, nodes, gpn, seed, arrivals=arrivals)  # type: ignore[arg-type]
    _compiled_equals_python(instance, {}, slot=slot, capacity=capacity)


@pytest.mark.parametrize(
    "options",
    [
        {"foresight": True},
        {"foresight": True, "order": "area"},
        {"bases": ("bsbf", "nosharing", "share"), "tail": True},
        {"bases": ("share", "bsbf"), "scan": 2, "share_tries": 1},
        {"order": "area", "head": 4, "partners": 2, "horizon": 20, "max_events": 12},
    ],
)
@pytest.mark.parametrize("slot", [None, 30.0])
def test_lookahead_compiled_identical_options(options: dict[str, Any], slot: float | None) -> None:
    instance = generate_instance(50, 2, 4, 7, arrivals="poisson")
    _compiled_equals_python(instance, options, slot=slot, capacity=3)


@pytest.mark.parametrize("slot", [None, 60.0])
def test_lookahead_compiled_identical_on_muri_trace(slot: float | None) -> None:
    """Gangs of 1-32 GPUs on 64 GPUs with C = 4 (Muri's trace2, 300 jobs from the middle of it)."""
    from formulation.traces import load_trace

    path = shared_data_dir() / "muri" / "trace2.csv"
    if not path.exists():
        pytest.skip(f"Muri trace not found at {path}")
    # the loader's defaults (what a user runs: Muri's simulator's progress rule, continuous time); slotted
    # runs need SPEC.md's rule
    instance = load_trace("muri", path, **({} if slot is None else {"semantics": "duetto"}))
    jobs = sorted(instance.jobs, key=lambda j: (j.arrival, j.id))[3000:3300]
    _compiled_equals_python(instance.replace(jobs=jobs), {}, slot=slot, validate=False)


# --- the validator ----------------------------------------------------------------------------------------


def _mutate(schedule: Schedule, instance: Instance, rng: np.random.Generator, count: int) -> Schedule:
    """``count`` random edits that break rules (or not): moved, shortened, re-placed, re-stepped, split or
    dropped segments, and claimed completions that lie."""
    plans = list(schedule.plans)
    num_gpus = instance.cluster.num_gpus
    for _ in range(count):
        which = int(rng.integers(len(plans)))
        plan = plans[which]
        segments = list(plan.segments)
        k = int(rng.integers(len(segments)))
        seg = segments[k]
        kind = int(rng.integers(8))
        claimed = plan.claimed_completion
        if kind == 0:  # move the segment (earlier: before arrival or overlapping others)
            shift = float(rng.choice([-1.0, 1.0]) * rng.uniform(0, 600))
            if schedule.slot:
                shift = round(shift / schedule.slot) * schedule.slot
            end = None if seg.end is None else seg.end + shift
            segments[k] = Segment(seg.start + shift, seg.gpus, seg.steps, end)
        elif kind == 1:  # other GPUs (maybe crowded, maybe out of range)
            gpus = tuple(int(g) for g in rng.choice(num_gpus + 1, size=len(seg.gpus), replace=False))
            segments[k] = Segment(seg.start, gpus, seg.steps, seg.end)
        elif kind == 2:  # another accumulation step count (maybe invalid)
            segments[k] = Segment(seg.start, seg.gpus, int(rng.choice([1, 2, 3, 4, 8])), seg.end)
        elif kind == 3:  # cut the segment short: the job may never complete
            length = float(rng.uniform(1, 900))
            if schedule.slot:
                length = max(1, round(length / schedule.slot)) * schedule.slot
            segments[k] = Segment(seg.start, seg.gpus, seg.steps, seg.start + length)
            segments = segments[: k + 1]
        elif kind == 4:  # split into two segments (a preemption) on other GPUs
            if seg.end is None:
                cut = seg.start + (schedule.slot or 1.0) * int(rng.integers(1, 20))
                gpus = tuple(int(g) for g in rng.choice(num_gpus, size=len(seg.gpus), replace=False))
                segments[k : k + 1] = [Segment(seg.start, seg.gpus, seg.steps, cut), Segment(cut, gpus, seg.steps)]
        elif kind == 5:  # a claimed completion that lies
            claimed = None if claimed is None else claimed + float(rng.uniform(-100, 100))
        elif kind == 6:  # squeeze another job onto this job's GPUs at the same time (capacity, pairs)
            other = plans[int(rng.integers(len(plans)))]
            first = other.segments[0]
            if len(first.gpus) == len(seg.gpus) and other.job_id != plan.job_id:
                end = first.end and seg.start + (first.end - first.start)
                moved = Segment(seg.start, seg.gpus, first.steps, end)
                plans[plans.index(other)] = JobPlan(other.job_id, (moved, *other.segments[1:]), None)
                continue
        else:  # drop the job's plan
            plans.pop(which)
            continue
        plans[which] = JobPlan(plan.job_id, tuple(segments), claimed)
    return Schedule(tuple(plans), slot=schedule.slot, restart_overhead=schedule.restart_overhead)


def _same_report(instance: Instance, schedule: Schedule, **options: Any) -> validator.ValidationReport:
    new = validator.validate(instance, schedule, **options)
    old = validator_ref.validate(instance, schedule, **options)
    assert [(v.rule, v.message, v.job_id, v.gpu, v.time) for v in new.violations] == [
        (v.rule, v.message, v.job_id, v.gpu, v.time) for v in old.violations
    ]
    assert new.ok == old.ok and new.slotted == old.slotted and new.slot == old.slot
    assert list(new.completion.items()) == list(old.completion.items())  # same values, same order
    assert new.start == old.start
    assert [(o.gpu, o.start, o.end, o.jobs) for o in new.occupancy] == [
        (o.gpu, o.start, o.end, o.jobs) for o in old.occupancy
    ]
    return new


_POLICIES = ("sjf-bsbf", "tiresias", "srsf", "sjf-ffs", "tesserae-t")


@pytest.mark.parametrize("seed", range(12))
def test_validator_identical_to_reference(seed: int) -> None:
    """Policy schedules (valid; preemptive ones with restart overheads; slotted and continuous) and the
    same schedules after random edits (invalid in every way the mutations can make): same report."""
    rng = np.random.default_rng(seed)
    slot = [None, 30.0, 60.0][seed % 3]
    capacity = [2, 3, 1][seed % 3]
    instance = generate_instance(int(rng.integers(8, 40)), 2, 4, seed, arrivals="poisson" if seed % 2 else "zero")
    policy = _POLICIES[seed % len(_POLICIES)]
    restart = [0.0, 45.0][seed % 2]
    result = simulate(instance, policy, slot=slot, capacity=capacity, restart_cost=restart, metrics=False)
    schedule = result.schedule
    report = _same_report(result.instance, schedule)
    assert report.ok
    invalid = 0
    for round_ in range(6):
        mutated = _mutate(schedule, result.instance, rng, 1 + 2 * round_)
        invalid += not _same_report(result.instance, mutated).ok
        if slot is not None:  # the same schedule swept in continuous time
            _same_report(result.instance, mutated, slotted=False)
    assert invalid >= 3  # the edits did break rules


def test_validator_identical_on_muri_trace_prefix() -> None:
    instance = _muri_prefix(300)
    for policy, capacity in (("tiresias", 2), ("sjf-bsbf", 2), ("srsf", 4)):
        result = simulate(instance, policy, capacity=capacity, restart_cost=30.0, validate=False)
        assert _same_report(result.instance, result.schedule).ok


# --- Tesserae's packing weights ----------------------------------------------------------------------------


def test_profile_ratios_equal_one_by_one() -> None:
    instance = generate_instance(400, 4, 8, 11)
    model = instance.interference
    names = [(a, b) for a in list(instance.profiles)[:20] for b in instance.profiles]  # the diagonal too
    facts = InstanceFacts(instance)
    expected = [model.ratio(instance.profiles[a], instance.profiles[b]) for a, b in names]
    assert facts.profile_ratios(names) == expected
    assert facts.profile_ratios(names[::-1]) == expected[::-1]  # now from the cache


@pytest.mark.parametrize("decimals", [0, 1, 2, 3, 6, 12])
def test_round_decimals_is_pythons_round(decimals: int) -> None:
    """The vectorised rounding of the hashed ratios gives Python's ``round`` bit for bit, also next to the
    half-way points where scaling in floating point would pick the wrong side."""
    rng = np.random.default_rng(decimals)
    scale = 10.0**decimals
    halves = (np.arange(-500, 4000) + 0.5) / scale  # nearest doubles to the half-way points
    near = np.concatenate([np.nextafter(halves, np.inf), halves, np.nextafter(halves, -np.inf)])
    values = np.concatenate(
        [
            rng.uniform(1.0, 2.0, 20000),
            rng.uniform(-3.0, 50.0, 20000),
            near,
            np.nextafter(near, np.inf),
            np.nextafter(near, -np.inf),
            [0.0, -0.0, 1e-300, 1e17, -1e17, 2.0**52 + 1, 123456.785, 2.675, 0.125, 0.375],
        ]
    )
    got = interference.round_decimals(values, decimals)
    want = [round(float(v), decimals) for v in values]
    assert [float(g).hex() for g in got] == [w.hex() for w in want]


@pytest.mark.parametrize(("seed", "low", "high", "decimals"), [(0, 1.0, 2.0, 2), (7, 1.0, 3.5, 3), (3, 1.2, 1.2, 2)])
def test_hashed_ratio_matrix_bit_identical(seed: int, low: float, high: float, decimals: int) -> None:
    model = interference.HashedPairInterference(seed, low, high, decimals)
    profiles = list(generate_instance(60, 1, 8, seed).profiles.values())
    victims, others = profiles[:25], profiles[10:]  # overlapping: the diagonal (a profile next to itself)
    matrix = model.ratio_matrix(victims, others)
    assert matrix.shape == (25, len(others))
    want = [[model.ratio(v, o) for o in others] for v in victims]
    assert [[float(x).hex() for x in row] for row in matrix] == [[float(x).hex() for x in row] for row in want]  # type: ignore[arg-type]
    pairs = [(v, o) for v in victims for o in others]
    assert [x.hex() for x in model.ratios(pairs)] == [float(x).hex() for row in want for x in row]  # type: ignore[union-attr,arg-type]
    assert model.ratio_matrix([], others).shape == (0, len(others))


def test_tesserae_identical_with_forbidden_pairs() -> None:
    """A pair table with forbidden pairs (``None``: NaN in the vectorised weights, no edge) and no batch
    hook: the block look-up's fallback gives the per-pair weights."""
    instance = generate_instance(200, 2, 8, 5)
    names = sorted(instance.profiles)
    table = {
        (a, b): (None if (i * 7 + j) % 5 == 0 else 1.0 + 0.05 * ((i + 3 * j) % 19))
        for i, a in enumerate(names)
        for j, b in enumerate(names)
    }
    instance = instance.replace(interference=TableInterference(table, default=None))
    new_policy, old_policy = TesseraePolicy(), PerPairTesserae()
    new = simulate(instance, new_policy, validate=False)
    old = simulate(instance, old_policy, validate=False)
    assert _schedule(new) == _schedule(old)
    assert new_policy.packed_pairs == old_policy.packed_pairs > 0


@pytest.mark.parametrize(("jobs", "nodes", "seed", "arrivals"), [(300, 4, 0, "zero"), (200, 2, 1, "poisson")])
def test_tesserae_identical_to_per_pair_weights(jobs: int, nodes: int, seed: int, arrivals: str) -> None:
    instance = generate_instance(jobs, nodes, 8, seed, arrivals=arrivals)  # type: ignore[arg-type]
    new_policy, old_policy = TesseraePolicy(), PerPairTesserae()
    new = simulate(instance, new_policy, validate=False)
    old = simulate(instance, old_policy, validate=False)
    assert _schedule(new) == _schedule(old)
    assert new_policy.packed_pairs == old_policy.packed_pairs > 0


def test_tesserae_identical_on_muri_trace_prefix() -> None:
    """Stage-time interference (no batch look-up: the one-by-one fallback) on Muri's trace."""
    instance = _muri_prefix(200)
    new_policy, old_policy = TesseraePolicy(), PerPairTesserae()
    new = simulate(instance, new_policy, validate=False)
    old = simulate(instance, old_policy, validate=False)
    assert _schedule(new) == _schedule(old)
    assert new_policy.packed_pairs == old_policy.packed_pairs > 0


def test_validator_identical_with_forbidden_pairs() -> None:
    """Shared schedules validated against an instance where every pair is forbidden (``pair`` rule, ξ of a
    forbidden pair counted as 1 in the progress) and where only some are (a table)."""
    instance = generate_instance(30, 2, 4, 21, arrivals="poisson")
    result = simulate(instance, "sjf-bsbf", validate=False)
    forbidden = instance.replace(interference=TableInterference({}, default=None))
    report = _same_report(forbidden, result.schedule)
    assert any(v.rule == "pair" for v in report.violations)
    names = sorted(instance.profiles)
    table = {
        (a, b): (None if (i + j) % 3 == 0 else 1.0 + 0.1 * ((i * j) % 7))
        for i, a in enumerate(names)
        for j, b in enumerate(names)
    }
    partial = instance.replace(interference=TableInterference(table, default=1.5))
    _same_report(partial, result.schedule)
    _same_report(partial, result.schedule, slotted=True, slot=60.0)
