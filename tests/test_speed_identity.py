"""Issue 19: the optimised hot paths give exactly what the code before them gave.

The unoptimised code is kept frozen in ``benchmarks/reference/`` (it is also what
``benchmarks.policy_speed`` measures the speed-up against); these tests run both on seeded instances and
compare every start, GPU set, accumulation step and completion (exact equality, no tolerance).
"""

from __future__ import annotations

from typing import Any

import pytest

import heuristics.lookahead as lookahead
from benchmarks.reference import lookahead_ref
from formulation.generator import generate_instance
from formulation.instance import Instance
from formulation.paths import shared_data_dir
from heuristics.simulator import SimulationResult, simulate


def _schedule(result: SimulationResult) -> dict[str, Any]:
    plans = {p.job_id: [(s.start, s.end, tuple(s.gpus), s.steps) for s in p.segments] for p in result.schedule.plans}
    return {"plans": plans, "completion": result.completion}


def _muri_prefix(jobs: int) -> Instance:
    from formulation.traces import load_trace

    path = shared_data_dir() / "muri" / "trace2.csv"
    if not path.exists():
        pytest.skip(f"Muri trace not found at {path}")
    instance = load_trace("muri", path)
    return instance.replace(jobs=sorted(instance.jobs, key=lambda j: (j.arrival, j.id))[:jobs])


@pytest.mark.parametrize(
    ("n", "nodes", "gpn", "seed", "arrivals", "slot", "capacity"),
    [
        (12, 1, 4, 0, "zero", 30.0, None),
        (16, 2, 4, 1, "poisson", None, None),
        (40, 2, 8, 2, "zero", 60.0, None),
        (60, 2, 8, 3, "poisson", None, None),
        (80, 4, 8, 4, "poisson", None, 3),
        (30, 1, 8, 5, "zero", None, 1),
    ],
)
def test_lookahead_identical_to_reference(
    n: int, nodes: int, gpn: int, seed: int, arrivals: str, slot: float | None, capacity: int | None
) -> None:
    instance = generate_instance(n, nodes, gpn, seed, arrivals=arrivals)  # type: ignore[arg-type]
    new_policy = lookahead.LookaheadPolicy()
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


@pytest.mark.parametrize("slot", [None, 60.0])
def test_lookahead_identical_on_muri_trace_prefix(slot: float | None) -> None:
    """Muri's trace2 (gangs of 1-32 GPUs on 64 GPUs): where the shortcuts for gangs are exercised."""
    instance = _muri_prefix(150)
    new_policy = lookahead.LookaheadPolicy()
    old_policy = lookahead_ref.LookaheadPolicy()
    new = simulate(instance, new_policy, slot=slot, validate=False)
    old = simulate(instance, old_policy, slot=slot, validate=False)
    assert _schedule(new) == _schedule(old)
    assert (new_policy.rollouts, new_policy.events) == (old_policy.rollouts, old_policy.events)
    assert new_policy.deviations > 0  # the look-ahead did decide something there
