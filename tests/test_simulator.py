"""The scheduling loop and the simulator: progress semantics (continuous and slotted) on hand-worked
cases, action checks, bad input, the pluggable clock, random instances through the validator, and the
``duetto simulate`` / ``duetto policies`` commands."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from duetto.commands import simulate as simulate_commands
from formulation.cluster import Cluster
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference, TableInterference
from formulation.io import load_schedule, save_instance
from formulation.speed import Profile
from formulation.validator import validate
from heuristics import (
    ClusterView,
    InvalidActionError,
    Preempt,
    SchedulingLoop,
    Start,
    available_policies,
    make_policy,
    simulate,
)
from heuristics.core import Action
from heuristics.loop import PolicyStalledError

UNIT = Profile("unit", compute_beta=0.01, memory_base_gib=10.0, memory_per_sample_gib=0.05)  # 1 s/iter


def _instance(
    jobs: list[tuple[str, float, int, float]],
    *,
    gpus: int = 1,
    capacity: int = 2,
    xi: float = 1.5,
    memory: float = 32.0,
) -> Instance:
    return Instance(
        Cluster(1, gpus, memory, capacity),
        tuple(Job(j, a, g, s, 100, "unit") for j, a, g, s in jobs),
        {"unit": UNIT},
        ConstantInterference(xi),
    )


class Scripted:
    """A test policy that returns pre-written actions at given times."""

    name = "scripted"
    preemptive = True
    round_length: float | None = None

    def __init__(self, script: Mapping[float, Sequence[Action]]) -> None:
        self.script = {when: list(actions) for when, actions in script.items()}

    def decide(self, view: ClusterView) -> Sequence[Action]:
        return self.script.pop(view.time, [])

    def next_decision_time(self, view: ClusterView) -> float | None:
        return min(self.script, default=None)


# --- progress semantics -------------------------------------------------------------------------------


def test_shared_progress_continuous() -> None:
    # A (100 s) and B (50 s) share one GPU from 0 with ξ = 1.5: B ends at 75; A did 50 s of work by
    # then and needs 50 s more alone: 125.
    instance = _instance([("A", 0, 1, 100), ("B", 0, 1, 50)])
    result = simulate(instance, Scripted({0.0: [Start("A", (0,)), Start("B", (0,))]}))
    assert result.report.ok and not result.mismatches
    assert result.completion == pytest.approx({"A": 125.0, "B": 75.0})


def test_shared_progress_slotted() -> None:
    # Same with Δ = 10: B reaches 50 s of work at 75, inside slot [70, 80): it completes at 80 and holds
    # the GPU until then. A: 80/1.5 = 53.33 s done, 46.67 s alone from 80 -> 126.67, inside [120, 130).
    instance = _instance([("A", 0, 1, 100), ("B", 0, 1, 50)])
    result = simulate(instance, Scripted({0.0: [Start("A", (0,)), Start("B", (0,))]}), slot=10.0)
    assert result.report.ok and not result.mismatches
    assert result.completion == pytest.approx({"A": 130.0, "B": 80.0})
    assert result.schedule.slot == 10.0


def test_slotted_decisions_wait_for_the_slot_boundary() -> None:
    instance = _instance([("A", 5, 1, 20)])
    result = simulate(instance, "fifo", slot=10.0)
    segment = result.schedule.plan_index["A"].segments[0]
    assert segment.start == pytest.approx(10.0)  # arrived at 5, seen at the next boundary
    assert result.completion["A"] == pytest.approx(30.0)
    # An exact fit completes at the end of its own slot, not one later (tolerance 1e-9 relative).
    assert validate(result.instance, result.schedule).completion["A"] == pytest.approx(30.0)


def test_gang_runs_at_its_slowest_worker() -> None:
    # G (2 GPUs, 100 s) shares GPU 0 with X (ξ 2.0 for G next to X) and GPU 1 with Y (ξ 1.2): G's factor is 2.
    profiles = {name: Profile(name, compute_beta=0.01, memory_base_gib=1.0) for name in ("pg", "px", "py")}
    table = TableInterference({("pg", "px"): 2.0, ("pg", "py"): 1.2}, default=1.0)
    jobs = (Job("G", 0, 2, 100.0, 100, "pg"), Job("X", 0, 1, 1000.0, 100, "px"), Job("Y", 0, 1, 1000.0, 100, "py"))
    instance = Instance(Cluster(1, 2, 32.0, 2), jobs, profiles, table)
    script = {0.0: [Start("X", (0,)), Start("Y", (1,)), Start("G", (0, 1))]}
    result = simulate(instance, Scripted(script))
    assert result.report.ok and not result.mismatches
    assert result.completion["G"] == pytest.approx(200.0)


def test_rates_change_when_a_partner_leaves() -> None:
    # A alone 0-10 (10 s done), B joins at 10 (ξ 2): until B ends at 10 + 20·2 = 50, A does 20 s;
    # A then has 70 s alone: 120.
    instance = _instance([("A", 0, 1, 100), ("B", 10, 1, 20)], xi=2.0)
    result = simulate(instance, Scripted({0.0: [Start("A", (0,))], 10.0: [Start("B", (0,))]}))
    assert result.completion == pytest.approx({"A": 120.0, "B": 50.0})


def test_migration_with_restart_cost() -> None:
    instance = _instance([("A", 0, 1, 100)], gpus=2)
    script: dict[float, list[Action]] = {0.0: [Start("A", (0,))], 30.0: [Preempt("A"), Start("A", (1,))]}
    result = simulate(instance, Scripted(script), restart_cost=5.0)
    assert result.report.ok and not result.mismatches
    assert result.completion["A"] == pytest.approx(105.0)
    assert result.stats.migrations == 1 and result.stats.preemptions == 1
    segments = result.schedule.plan_index["A"].segments
    assert [(s.start, s.end, s.gpus) for s in segments] == [(0, 30, (0,)), (30, None, (1,))]


def test_preempt_and_restart_in_place_is_a_no_op() -> None:
    instance = _instance([("A", 0, 1, 100)])
    script: dict[float, list[Action]] = {0.0: [Start("A", (0,))], 30.0: [Preempt("A"), Start("A", (0,))]}
    result = simulate(instance, Scripted(script), restart_cost=5.0)
    assert result.completion["A"] == pytest.approx(100.0)
    assert len(result.schedule.plan_index["A"].segments) == 1


# --- action checks ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actions", "rule"),
    [
        ([Start("nope", (0,))], "unknown-job"),
        ([Start("A", (0, 1))], "gang"),  # A needs one GPU
        ([Start("W", (0, 0))], "gang"),  # a GPU twice
        ([Start("A", (7,))], "gpu"),
        ([Start("A", (0,), steps=3)], "steps"),
        ([Start("A", (0,)), Start("B", (0,)), Start("C", (0,))], "capacity"),
        ([Start("A", (0,)), Start("A", (1,))], "not-pending"),
        ([Preempt("A")], "not-running"),
    ],
)
def test_bad_actions_raise_clear_errors(actions: list[Action], rule: str) -> None:
    instance = _instance([("A", 0, 1, 10), ("B", 0, 1, 10), ("C", 0, 1, 10), ("W", 0, 2, 10)], gpus=2)
    with pytest.raises(InvalidActionError) as caught:
        simulate(instance, Scripted({0.0: actions}))
    assert caught.value.rule == rule
    assert "scripted" in str(caught.value) and "t=0" in str(caught.value)


def test_memory_and_forbidden_pairs_are_checked() -> None:
    big = Profile("big", compute_beta=0.01, memory_base_gib=20.0)
    jobs = (Job("A", 0, 1, 10.0, 100, "big"), Job("B", 0, 1, 10.0, 100, "big"))
    instance = Instance(Cluster(1, 1, 32.0, 2), jobs, {"big": big}, ConstantInterference(1.0))
    with pytest.raises(InvalidActionError, match=r"\[memory\].*40.000 GiB"):
        simulate(instance, Scripted({0.0: [Start("A", (0,)), Start("B", (0,))]}))
    small = Profile("small", compute_beta=0.01, memory_base_gib=1.0)
    table = TableInterference({("small", "small"): None})
    forbidden = Instance(
        Cluster(1, 1, 32.0, 2), tuple(Job(j, 0, 1, 10.0, 100, "small") for j in "AB"), {"small": small}, table
    )
    with pytest.raises(InvalidActionError, match=r"\[pair\]"):
        simulate(forbidden, Scripted({0.0: [Start("A", (0,)), Start("B", (0,))]}))


def test_a_policy_that_never_starts_is_reported() -> None:
    with pytest.raises(PolicyStalledError, match="leaves 1 jobs pending"):
        simulate(_instance([("A", 0, 1, 10)]), Scripted({}))


# --- parameters and bad input -------------------------------------------------------------------------


def test_capacity_parameter() -> None:
    instance = generate_instance(30, 1, 4, 2, arrivals="zero", xi_range=(1.0, 1.2))
    shared = simulate(instance, "sjf-ffs", capacity=2)
    alone = simulate(instance, "sjf-ffs", capacity=1)
    assert shared.metrics is not None and alone.metrics is not None
    assert shared.metrics["shared_gpu_seconds"] > 0
    assert alone.metrics["shared_gpu_seconds"] == 0
    assert alone.instance.cluster.capacity == 1 and alone.report.ok
    four = simulate(instance, "sjf-ffs", capacity=4)
    assert four.report.ok and not four.mismatches


@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_below_one_is_an_input_error(capacity: int) -> None:
    with pytest.raises(DuettoInputError, match="capacity"):
        simulate(_instance([("A", 0, 1, 10)]), "fifo", capacity=capacity)


def test_unknown_policy_names_the_known_ones() -> None:
    with pytest.raises(DuettoInputError, match=r"unknown policy 'nope'.*sjf-bsbf"):
        make_policy("nope")
    with pytest.raises(DuettoInputError, match="does not take the options"):
        make_policy("sjf", wrong=1)


def test_bad_slot_and_restart_cost() -> None:
    instance = _instance([("A", 0, 1, 10)])
    with pytest.raises(DuettoInputError, match="slot"):
        simulate(instance, "fifo", slot=0.0)
    with pytest.raises(DuettoInputError, match="restart_cost"):
        simulate(instance, "fifo", restart_cost=-1.0)


def test_registry_lists_every_policy_with_a_description() -> None:
    names = {info.name for info in available_policies()}
    assert {"fifo", "sjf", "ssf", "srsf", "tiresias", "sjf-ffs", "sjf-bsbf"} <= names
    assert all(info.description for info in available_policies())
    assert make_policy("sjf-bsbf+hay").name == "sjf-bsbf+hay"


# --- the pluggable clock ------------------------------------------------------------------------------


def test_loop_driven_by_an_external_clock_matches_the_simulator() -> None:
    """The runtime's way: step the loop at event times it observes, report completions itself."""
    instance = _instance([("A", 0, 1, 100), ("B", 10, 1, 20), ("C", 15, 1, 5)])
    loop = SchedulingLoop(instance, make_policy("sjf"))
    actions = loop.step(0.0, arrivals=["A"])
    assert actions == [Start("A", (0,), 1)]
    assert loop.step(10.0, arrivals=["B"]) == []
    assert loop.step(15.0, arrivals=["C"]) == []
    assert loop.state.next_completion() == (100.0, "A")  # the model's prediction
    started = loop.step(100.0, completions=["A"])  # the runtime observes the completion itself
    assert started == [Start("C", (0,), 1)]  # C (5 s) before B (20 s)
    assert loop.step(105.0, completions=["C"]) == [Start("B", (0,), 1)]
    loop.step(125.0, completions=["B"])
    schedule = loop.state.schedule("sjf")
    report = validate(instance, schedule)
    assert report.ok
    assert report.completion == pytest.approx({"A": 100.0, "C": 105.0, "B": 125.0})


# --- every policy on random instances -----------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("slot", [None, 45.0])
def test_every_policy_passes_the_validator_on_random_instances(seed: int, slot: float | None) -> None:
    instance = generate_instance(40, 2, 4, seed, arrivals="poisson", load=1.8, xi_range=(1.0, 2.5))
    for info in available_policies():
        for name in (info.name, f"{info.name}+hay"):
            try:
                policy = make_policy(name)
            except DuettoInputError:
                continue  # a policy without a Hay variant
            try:
                result = simulate(instance, policy, slot=slot, restart_cost=10.0)
            except DuettoInputError as error:  # a policy that cannot serve these instances says why
                assert "needs" in str(error) or "missing" in str(error)
                continue
            assert result.report.ok, (name, result.report.violations[:3])
            assert not result.mismatches, (name, list(result.mismatches.items())[:3])


# --- command line -------------------------------------------------------------------------------------


@pytest.fixture()
def cli() -> typer.Typer:
    app = typer.Typer()
    simulate_commands.register(app)
    return app


def test_cli_simulate_writes_a_valid_schedule(cli: typer.Typer, tmp_path: Path) -> None:
    instance = generate_instance(25, 1, 4, 7, arrivals="poisson", load=1.5)
    path = tmp_path / "inst.json"
    save_instance(instance, path)
    out = tmp_path / "schedule.json"
    runner = CliRunner()
    result = runner.invoke(cli, ["simulate", str(path), "--policy", "sjf-bsbf", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["valid"] is True and summary["metrics"]["completed"] == 25
    # Issue 19: simulation, validation and metrics timed apart.
    for key in ("simulation_seconds", "validation_seconds", "metrics_seconds"):
        assert isinstance(summary[key], float) and summary[key] > 0, key
    report = validate(instance, load_schedule(out))
    assert report.ok
    assert report.total_jct(instance) / 25 == pytest.approx(summary["metrics"]["jct_avg"])
    slotted = runner.invoke(
        cli,
        [
            "simulate",
            str(path),
            "--policy",
            "tiresias",
            "--slotted",
            "--slot",
            "60",
            "--restart-cost",
            "30",
            "--option",
            "promote_knob=4",
        ],
    )
    assert slotted.exit_code == 0, slotted.output
    assert "average JCT" in slotted.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--policy", "fifo", "--capacity", "0"], "--capacity must be an integer >= 1"),
        (["--policy", "fifo", "--slotted"], "--slotted needs --slot"),
        (["--policy", "fifo", "--option", "x"], "KEY=VALUE"),
        (["--policy", "tiresias", "--option", "promote_knob=-1"], "promote_knob"),
        (["--policy", "sjf", "--option", "placement=nowhere"], "unknown placement 'nowhere'"),
    ],
)
def test_cli_bad_input_is_one_line(cli: typer.Typer, tmp_path: Path, args: list[str], message: str) -> None:
    path = tmp_path / "inst.json"
    save_instance(_instance([("A", 0, 1, 10)]), path)
    result = CliRunner().invoke(cli, ["simulate", str(path), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_cli_missing_file(cli: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["simulate", str(tmp_path / "none.json"), "--policy", "fifo"])
    assert result.exit_code == 2 and "file not found" in result.output


def test_cli_policies_lists_one_line_each(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["policies"])
    assert result.exit_code == 0
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    names = [info.name for info in available_policies()]
    for name in names:
        assert any(line.startswith(name + " ") for line in lines)


def test_numpy_gpu_ids_are_accepted() -> None:
    import numpy as np

    instance = _instance([("A", 0, 1, 10)], gpus=2)
    result = simulate(instance, Scripted({0.0: [Start("A", (np.int64(1),))]}))  # type: ignore[arg-type]
    assert result.report.ok
    assert result.schedule.plan_index["A"].segments[0].gpus == (1,)
