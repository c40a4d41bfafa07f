"""Issue 19 item 4: Muri's simulator's progress rule (``formulation.progress.MuriProgress``) as problem data.

The simulator (``heuristics.loop``) and the validator implement it independently; these tests check that
they agree with each other and with the rule worked out by hand, and that the Muri traces load with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from duetto.cli import app
from formulation.cluster import Cluster
from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference, interleaved_period
from formulation.io import instance_from_dict, instance_json_schema, instance_to_dict
from formulation.paths import shared_data_dir
from formulation.progress import MURI_STRETCH, SPEC_PROGRESS, MuriProgress, muri_group_period
from formulation.speed import Profile
from formulation.traces import load_trace
from formulation.traces.muri import MURI_START_OVERHEADS
from formulation.validator import validate
from heuristics.core import Action, ClusterView, Start
from heuristics.muri import AttainedOrdering, GroupingCache, MuriPolicy, muri_sim_efficiency
from heuristics.registry import make_policy
from heuristics.simulator import simulate

TRACE3 = shared_data_dir() / "muri" / "trace3.csv"


def _trace3(jobs: int, semantics: str = "muri") -> Instance:
    if not TRACE3.exists():
        pytest.skip(f"Muri trace not found at {TRACE3}")
    return load_trace("muri", TRACE3, semantics=semantics).head(jobs)


# --- the group period ------------------------------------------------------------------------------------


def test_muri_group_period_by_hand() -> None:
    # One job only loads data, the other only computes: Muri's pipeline overlaps them fully, period 1.
    assert muri_group_period([(1.0, 0.0, 0.0), (0.0, 1.0, 0.0)]) == pytest.approx(1.0)
    # A pair may run max(d_a, g_b + c_b) + max(d_b, g_a + c_a) = max(0.2, 0.3) + max(0.4, 0.6) = 0.9,
    # no longer than the recurrence's orderings here.
    a, b = (0.2, 0.5, 0.1), (0.4, 0.2, 0.1)
    assert muri_group_period([a, b]) == pytest.approx(0.9)
    assert muri_group_period([b, a]) == pytest.approx(0.9)
    # Not duetto's Eq. 3 reading: ShuffleNet and ResNet-18 on 4 GPUs (trace3's stage times) overlap their
    # data stages in Muri's pipeline, 0.909 s against Eq. 3's 1.499 s (the pair formula gives 1.426 s).
    shufflenet, resnet = (0.703, 0.062, 0.017), (0.723, 0.113, 0.073)
    assert muri_group_period([shufflenet, resnet]) == pytest.approx(0.909)
    assert interleaved_period([shufflenet, resnet])[0] == pytest.approx(1.499)


def test_group_period_is_stretched_by_the_group_size() -> None:
    rule = MuriProgress()
    p1 = Profile("p1", compute_alpha=1.0, stage_times=(1.0, 0.0, 0.0))
    p2 = Profile("p2", compute_alpha=1.0, stage_times=(0.0, 1.0, 0.0))
    assert rule.solo_period(2.0) == pytest.approx(2.0 * 1.015)
    assert rule.group_period([p1, p2]) == pytest.approx(1.0 * 1.33 / 1.015)
    p3 = Profile("p3", compute_alpha=1.0, stage_times=(0.0, 0.0, 1.0))
    three = muri_group_period([(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)])
    assert rule.group_period([p1, p2, p3]) == pytest.approx(three * 1.5 / 1.015)
    with pytest.raises(DuettoInputError, match="stage_times"):
        rule.group_period([p1, Profile("bare", compute_alpha=1.0)])


# --- a hand-computed instance --------------------------------------------------------------------------


class _FirstGpuFirst:
    """Starts every pending job at once: on GPU 0 while it holds fewer than ``C`` jobs, else on GPU 1."""

    name = "first-gpu-first"
    preemptive = False

    def decide(self, view: ClusterView) -> Sequence[Action]:
        actions: list[Action] = []
        taken = [len(view.occupancy[0]), len(view.occupancy[1])]
        for job_id in view.pending:
            gpu = 0 if taken[0] < view.instance.cluster.capacity else 1
            taken[gpu] += 1
            actions.append(Start(job_id, (gpu,), 1))
        return actions


def _hand_instance(progress: MuriProgress | None) -> Instance:
    profiles = {
        "a": Profile("a", compute_alpha=1.0, stage_times=(1.0, 0.0, 0.0)),
        "b": Profile("b", compute_alpha=1.0, stage_times=(0.0, 1.0, 0.0)),
        "c": Profile("c", compute_alpha=2.0, stage_times=(1.0, 1.0, 0.0)),
    }
    jobs = (Job("A", 0.0, 1, 100, 1, "a"), Job("B", 10.0, 1, 50, 1, "b"), Job("C", 30.0, 1, 10, 1, "c"))
    return Instance(
        Cluster(1, 2, 32.0, 2),
        jobs,
        profiles,
        interference=ConstantInterference(1.2),
        progress=progress if progress is not None else SPEC_PROGRESS,
    )


def test_stretch_and_overheads_change_a_hand_computed_jct_as_the_rule_says() -> None:
    rule = MuriProgress(overheads={"a": 5.0, "b": 7.0, "c": 3.0})
    muri = _hand_instance(rule)
    spec = _hand_instance(None)
    # SPEC.md: A alone 10 s (10 it), then A and B at 1/1.2 it/s: B's 50 it end at 70, A has 10 + 50 = 60
    # and runs its last 40 alone: 110. C (GPU 1, alone, 2 s/it) ends at 50.
    spec_done = {"A": 110.0, "B": 70.0, "C": 50.0}
    # Muri's rule: alone 1.015 × t_iter; A and B (stages (1,0,0), (0,1,0): T_M = 1) run one iteration per
    # P = 1.33 / 1.015 s and lose 5 + 7 = 12 s per interval between events. Events: 0, 10 (B), 30 (C
    # arrives and starts on GPU 1), C's completion, B's completion.
    period = 1.33 / 1.015
    done_c = 30.0 + 10 * 2.0 * 1.015  # 50.3: C's only interval ends with its completion (no overhead)
    a_at_10 = (10.0 - 5.0) / 1.015
    b_at_c = (30.0 - 10.0 - 12.0) / period + (done_c - 30.0 - 12.0) / period  # loses 12 s at 30 and at 50.3
    done_b = done_c + (50 - b_at_c) * period
    a_at_b = a_at_10 + b_at_c + (done_b - done_c - 12.0) / period  # beside B over the same intervals
    done_a = done_b + (100 - a_at_b) * 1.015
    muri_done = {"A": done_a, "B": done_b, "C": done_c}
    assert done_c == pytest.approx(50.3) and done_b == pytest.approx(34.0 + 50 * period)

    for instance, expected in ((spec, spec_done), (muri, muri_done)):
        result = simulate(instance, _FirstGpuFirst(), metrics=False)
        assert result.completion == pytest.approx(expected, rel=1e-9)
        assert result.report is not None and result.report.ok, result.report.violations
        assert result.report.completion == pytest.approx(expected, rel=1e-9)  # the validator, independently
    # the same schedule claims SPEC's completions: under Muri's rule they are wrong, job by job
    spec_schedule = simulate(spec, _FirstGpuFirst(), validate=False).schedule
    report = validate(muri, spec_schedule)
    assert not report.ok and {v.job_id for v in report.violations if v.rule == "completion"} == {"A", "B", "C"}


def test_an_arrival_alone_is_an_event() -> None:
    # D arrives at 20 and waits for a 2-GPU gang: nothing changes on the GPUs, yet A pays its overhead.
    profiles = {"a": Profile("a", compute_alpha=1.0, stage_times=(1.0, 0.0, 0.0))}
    jobs = (Job("A", 0.0, 1, 100, 1, "a"), Job("D", 20.0, 2, 1, 1, "a"))
    rule = MuriProgress(overheads={"a": 4.0})
    instance = Instance(Cluster(1, 2, 32.0, 2), jobs, profiles, progress=rule)

    class OneAtATime:
        name = "one-at-a-time"

        def decide(self, view: ClusterView) -> Sequence[Action]:
            if view.running or not view.pending:
                return []
            job_id = view.pending[0]
            return [Start(job_id, tuple(range(view.instance.job(job_id).num_gpus)), 1)]

    result = simulate(instance, OneAtATime(), metrics=False)
    done_a = 20.0 + (100 - (20.0 - 4.0) / 1.015) * 1.015  # loses 4 s at D's arrival: 104
    assert result.completion["A"] == pytest.approx(done_a)
    assert result.completion["D"] == pytest.approx(done_a + 1.015)
    assert result.report is not None and result.report.ok and not result.mismatches


# --- agreement on a Muri trace --------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["muri-s", "muri-l", "srsf", "tiresias", "sjf-bsbf"])
def test_simulate_and_validate_agree_under_muris_rule(policy: str) -> None:
    instance = _trace3(120)
    assert isinstance(instance.progress, MuriProgress)
    result = simulate(instance, policy, capacity=4, metrics=False)
    assert result.report is not None and result.report.ok, result.report.violations[:3]
    assert not result.mismatches
    # the validator uses the rule: the same schedule under SPEC's rule claims wrong completions
    spec = instance.replace(progress=SPEC_PROGRESS)
    report = validate(spec, result.schedule)
    assert any(v.rule == "completion" for v in report.violations)
    # same input, same numbers
    again = simulate(instance, policy, capacity=4, metrics=False)
    assert again.schedule.plans == result.schedule.plans and again.completion == result.completion


def test_muri_policies_follow_the_instances_rule() -> None:
    instance = _trace3(60)
    policy = make_policy("muri-l")
    assert isinstance(policy, MuriPolicy) and policy.semantics == "auto"
    simulate(instance, policy, capacity=4, metrics=False)
    assert policy.effective_semantics == "muri" and policy.replan_on_events
    assert isinstance(policy.ordering, AttainedOrdering) and policy.cache.period_model == "muri"
    simulate(instance.replace(progress=SPEC_PROGRESS), policy, capacity=4, metrics=False)
    assert policy.effective_semantics == "duetto" and not policy.replan_on_events
    assert policy.cache.period_model == "eq3"


def test_muri_policy_side_on_a_spec_instance_scores_groups_by_eq3() -> None:
    # The authors' settings give Muri-S/L semantics="muri" on a Muri trace under SPEC.md's rule (the
    # testbed's): event replanning and attained-time Muri-L, but groups scored by the period that rule
    # charges (Eq. 3), which keeps the testbed within 15 % of the authors (tests/test_replay_fidelity.py).
    spec, muri = _trace3(60, "duetto"), _trace3(60)
    policy = make_policy("muri-l", semantics="muri")
    assert isinstance(policy, MuriPolicy)
    simulate(spec, policy, capacity=4, metrics=False)
    assert policy.replan_on_events and isinstance(policy.ordering, AttainedOrdering)
    assert policy.cache.period_model == "eq3"
    simulate(muri, policy, capacity=4, metrics=False)
    assert policy.cache.period_model == "muri"
    assert isinstance(load_trace("muri", TRACE3, limit=60).progress, MuriProgress)  # a simulation trace's default


def test_grouping_scores_groups_by_the_rules_period() -> None:
    # ShuffleNet + ResNet-18 (trace3, 4 GPUs): busy 1.691 s over 3 resources; Eq. 3 period 1.499 s,
    # Muri's simulator's 0.909 s: γ = 1.691 / (3 · T).
    shufflenet, resnet = (0.703, 0.062, 0.017), (0.723, 0.113, 0.073)
    assert GroupingCache().gamma([shufflenet, resnet]) == pytest.approx(1.691 / (3 * 1.499))
    assert GroupingCache(period_model="muri").gamma([shufflenet, resnet]) == pytest.approx(1.691 / (3 * 0.909))
    assert muri_sim_efficiency([shufflenet]) == GroupingCache().gamma([shufflenet])


def test_muris_rule_changes_trace_jcts() -> None:
    muri = simulate(_trace3(150), "srsf", capacity=4, metrics=False)
    duetto = simulate(_trace3(150, "duetto"), "srsf", capacity=4, metrics=False)
    assert muri.avg_jct > duetto.avg_jct  # every job is at least 1.5 % slower, and pays overheads


# --- data, loader, errors -------------------------------------------------------------------------------


def test_muri_loader_default_and_option() -> None:
    # a simulation trace gets Muri's simulator's rule by default (issue 19; the testbed keeps SPEC.md's:
    # tests/test_muri_simulator_fidelity.py); semantics= chooses either
    assert isinstance(load_trace("muri", TRACE3, limit=20).progress, MuriProgress)
    instance = _trace3(20)
    rule = instance.progress
    assert isinstance(rule, MuriProgress) and rule.stretch == MURI_STRETCH
    for job in instance.jobs:
        model = job.profile.split("-b")[0]
        assert rule.overhead(job.profile) == MURI_START_OVERHEADS[job.num_gpus][model]
    assert _trace3(20, "duetto").progress == SPEC_PROGRESS
    with pytest.raises(DuettoInputError, match="semantics"):
        load_trace("muri", TRACE3, semantics="muri-sim")


def test_progress_rule_round_trips_through_json() -> None:
    instance = _trace3(10)
    data = instance_to_dict(instance)
    jsonschema.validate(json.loads(json.dumps(data)), instance_json_schema())
    back = instance_from_dict(data)
    assert back.progress == instance.progress and back.progress.overheads == instance.progress.overheads  # type: ignore[union-attr]
    spec = instance_to_dict(_trace3(10, "duetto"))
    assert "progress" not in spec and instance_from_dict(spec).progress == SPEC_PROGRESS
    data["progress"]["default_overhead"] = -1
    with pytest.raises(DuettoInputError, match="default_overhead"):
        instance_from_dict(data)


def test_muris_rule_refuses_what_it_does_not_define() -> None:
    instance = _trace3(30)
    with pytest.raises(DuettoInputError, match="continuous"):
        simulate(instance, "srsf", slot=60.0)
    with pytest.raises(DuettoInputError, match="restart"):
        simulate(instance, "srsf", restart_cost=30.0)
    schedule = simulate(instance, "srsf", metrics=False).schedule
    with pytest.raises(DuettoInputError, match="continuous"):
        validate(instance, schedule, slotted=True, slot=60.0)
    # the exact model and the trace bound are SPEC.md's problem: refused in one line, not solved wrongly
    from formulation.discretize import discretize
    from formulation.trace_bound import trace_lower_bound

    with pytest.raises(DuettoInputError, match="exact model"):
        discretize(_trace3(5))
    with pytest.raises(DuettoInputError, match="lower bound"):
        trace_lower_bound(_trace3(5), time_limit=1.0)
    for bare in (Profile("x", compute_alpha=1.0), Profile("x", compute_alpha=1.0, stage_times=(0.0, 0.0, 0.0))):
        with pytest.raises(DuettoInputError, match="stage_times"):
            Instance(Cluster(1, 1), (Job("j", 0.0, 1, 1, 1, "x"),), {"x": bare}, progress=MuriProgress())


def test_cli_semantics_option(tmp_path: Path) -> None:
    if not TRACE3.exists():
        pytest.skip(f"Muri trace not found at {TRACE3}")
    runner = CliRunner()
    base = ["simulate", str(TRACE3), "--trace", "muri", "--limit", "40", "--policy", "srsf", "--json"]
    muri = runner.invoke(app, [*base, "--semantics", "muri"])
    duetto = runner.invoke(app, [*base, "--semantics", "duetto"])
    assert muri.exit_code == 0 and duetto.exit_code == 0, muri.output + duetto.output
    default = runner.invoke(app, base)  # a simulation trace: Muri's simulator's rule by default
    assert default.exit_code == 0 and json.loads(default.output)["progress"] == "muri"
    assert json.loads(default.output)["metrics"] == json.loads(muri.output)["metrics"]
    assert json.loads(muri.output)["metrics"]["jct_avg"] > json.loads(duetto.output)["metrics"]["jct_avg"]
    assert json.loads(muri.output)["progress"] == "muri" and json.loads(duetto.output)["progress"] == "spec"
    bad = runner.invoke(app, [*base, "--semantics", "spec"])
    assert bad.exit_code == 2 and "'duetto' or 'muri'" in bad.output
    out = runner.invoke(
        app, ["import", "muri", str(TRACE3), "--limit", "5", "--semantics", "duetto", "-o", str(tmp_path / "i.json")]
    )
    assert out.exit_code == 0, out.output
    assert "progress" not in json.loads((tmp_path / "i.json").read_text())


def test_simulate_and_validate_agree_for_every_policy_under_muris_rule(tmp_path: Path) -> None:
    """The one-meaning-of-validity check (tests/test_validity_agreement.py) on an instance that carries
    Muri's rule through its JSON: every policy, C = 4, the CLI's simulate and validate."""
    from formulation.generator import generate_instance
    from formulation.io import save_instance
    from formulation.stages import with_derived_stages
    from heuristics.registry import available_policies

    base = with_derived_stages(generate_instance(10, 1, 4, seed=11, arrivals="poisson", load=1.5))
    path = tmp_path / "muri.json"
    save_instance(base.replace(progress=MuriProgress(overheads={base.jobs[0].profile: 30.0})), path)
    runner = CliRunner()
    checked = 0
    for info in available_policies():
        schedule = tmp_path / f"{info.name}.json"
        arguments = ["simulate", str(path), "--policy", info.name, "--capacity", "4", "--json", "-o", str(schedule)]
        simulated = runner.invoke(app, arguments)
        if simulated.exit_code == 2:  # the policy cannot serve this instance: refused, nothing to compare
            continue
        assert simulated.exit_code == 0, (info.name, simulated.output)
        summary = json.loads(simulated.stdout[simulated.stdout.index("{") :])
        assert summary["progress"] == "muri" and summary["valid"] is True, info.name
        validated = runner.invoke(app, ["validate", str(path), str(schedule), "--json"])
        assert validated.exit_code == 0, (info.name, validated.output)
        checked += 1
    assert checked == len(available_policies())  # every policy serves it


def test_cli_replay_refuses_slots_under_muris_rule(tmp_path: Path) -> None:
    if not TRACE3.exists():
        pytest.skip(f"Muri trace not found at {TRACE3}")
    base = ["replay", "muri", str(TRACE3), "--limit", "10", "--policy", "srsf", "--no-bound", "--no-figures"]
    base += ["--no-progress", "--workers", "1", "--out", str(tmp_path)]
    refused = CliRunner().invoke(app, [*base, "--slot", "60", "--semantics", "muri"])
    assert refused.exit_code == 2 and "--semantics duetto" in refused.output
    refused = CliRunner().invoke(app, [*base, "--restart-cost", "30", "--semantics", "muri"])
    assert refused.exit_code == 2 and "--semantics duetto" in refused.output
    refused = CliRunner().invoke(app, [*base, "--slot", "60"])  # Muri's rule: a simulation trace's default
    assert refused.exit_code == 2 and "--semantics duetto" in refused.output
    slotted = CliRunner().invoke(app, [*base, "--slot", "60", "--semantics", "duetto"])  # SPEC.md's rule
    assert slotted.exit_code == 0, slotted.output
