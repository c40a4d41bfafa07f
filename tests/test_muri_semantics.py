"""Issue 19: the policy side of Muri's own simulator as a Muri-S/L option (``semantics="muri"``)."""

from __future__ import annotations

import pytest

from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.paths import shared_data_dir
from formulation.traces import load_trace
from heuristics.core import Start
from heuristics.loop import ClusterState
from heuristics.muri import AttainedOrdering, LASOrdering, MuriPolicy, SRSFOrdering, merged_order
from heuristics.placement import InstanceFacts
from heuristics.registry import make_policy
from heuristics.simulator import simulate


def _trace(jobs: int) -> Instance:
    path = shared_data_dir() / "muri" / "trace3.csv"
    if not path.exists():
        pytest.skip(f"Muri trace not found at {path}")
    instance = load_trace("muri", path)
    return instance.replace(jobs=sorted(instance.jobs, key=lambda j: (j.arrival, j.id))[:jobs])


def test_attained_ordering_ranks_by_total_gpu_seconds() -> None:
    """Running and pending jobs in one order of attained GPU-seconds (GPUs × time held), no queues."""
    instance = _trace(10**6)  # every job of the trace; only three are submitted
    jobs = sorted(instance.jobs, key=lambda j: (j.num_gpus, j.id))
    one = [j for j in jobs if j.num_gpus == 1][:2]
    wide = [j for j in jobs if j.num_gpus >= 2][:1]
    assert len(one) == 2 and wide, "the trace prefix needs 1-GPU and multi-GPU jobs"
    state = ClusterState(instance)
    chosen = [*one, *wide]
    for job in chosen:
        state.submit(job.id, 0.0)
    # one[0] runs alone on GPU 0; wide[0] on the next GPUs; one[1] waits.
    state.apply([Start(one[0].id, (0,), 1)], 0.0)
    state.apply([Start(wide[0].id, tuple(range(8, 8 + wide[0].num_gpus)), 1)], 0.0)
    ordering = AttainedOrdering()
    ordering.bind(InstanceFacts(instance))
    view = state.view(100.0)
    queue = ordering.sync(view)
    order = [job_id for job_id, _ in merged_order(queue, ordering.running_keys(view))]
    # Attained: one[1] 0 (pending) < one[0] 100 GPU-s < wide[0] 100 × GPUs.
    assert order == [one[1].id, one[0].id, wide[0].id]
    attained = view.attained_service
    assert attained.get(one[0].id, 0.0) == pytest.approx(100.0)
    assert attained.get(wide[0].id, 0.0) == pytest.approx(100.0 * wide[0].num_gpus)


def test_semantics_option_selects_the_ordering_and_event_replanning() -> None:
    assert isinstance(MuriPolicy(priority="las").ordering, LASOrdering)
    muri_l = MuriPolicy(priority="las", semantics="muri")
    assert isinstance(muri_l.ordering, AttainedOrdering) and muri_l.replan_on_events
    muri_s = make_policy("muri-s", semantics="muri")
    assert isinstance(muri_s, MuriPolicy) and isinstance(muri_s.ordering, SRSFOrdering) and muri_s.replan_on_events
    assert not MuriPolicy().replan_on_events
    with pytest.raises(DuettoInputError, match="semantics"):
        MuriPolicy(semantics="muri-sim")  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["muri-s", "muri-l"])
def test_muri_semantics_replans_at_events_and_validates(policy: str) -> None:
    instance = _trace(120)
    ours = make_policy(policy, semantics="duetto")  # "auto" would follow the instance's rule
    theirs = make_policy(policy, semantics="muri")
    a = simulate(instance, ours, capacity=4, metrics=False)
    b = simulate(instance, theirs, capacity=4, metrics=False)
    for result in (a, b):
        assert result.report is not None and result.report.ok and not result.mismatches
    assert theirs.plans > ours.plans  # type: ignore[attr-defined]
    assert theirs.fills == 0  # type: ignore[attr-defined]  # events replan instead of filling idle GPUs
    assert a.schedule.plans != b.schedule.plans
