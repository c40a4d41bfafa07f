"""Issue 15 item 3: one meaning of validity. What ``duetto simulate`` calls valid, ``duetto validate``
calls valid, for every policy at capacity 1, 2 and 4 (the capacity travels with the schedule)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from duetto.cli import app
from formulation import io
from formulation.generator import generate_instance
from heuristics.registry import available_policies

runner = CliRunner()
POLICIES = [info.name for info in available_policies()]


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("validity") / "i.json"
    io.save_instance(generate_instance(10, 1, 4, seed=11, arrivals="poisson", load=1.5), path)
    return path


@pytest.mark.parametrize("capacity", [1, 2, 4])
def test_simulate_and_validate_agree_for_every_policy(instance_file: Path, capacity: int) -> None:
    checked = 0
    for policy in POLICIES:
        schedule = instance_file.parent / f"{policy}-{capacity}.json"
        arguments = ["simulate", str(instance_file), "--policy", policy, "--capacity", str(capacity), "--json"]
        simulated = runner.invoke(app, [*arguments, "-o", str(schedule)])
        if simulated.exit_code == 2:  # the policy cannot serve this capacity: refused, nothing to compare
            continue
        assert simulated.exit_code in (0, 1), simulated.output
        summary = json.loads(simulated.stdout[simulated.stdout.index("{") :]) if simulated.exit_code == 0 else None
        simulate_valid = summary is not None and summary["valid"] is True
        validated = runner.invoke(app, ["validate", str(instance_file), str(schedule), "--json"])
        assert validated.exit_code in (0, 1), validated.output
        assert (validated.exit_code == 0) == simulate_valid, (policy, capacity, validated.output[:500])
        assert json.loads(validated.stdout)["capacity"] == capacity
        checked += 1
    assert checked >= len(POLICIES) - 2  # nearly every policy serves every capacity


def test_validate_takes_the_capacity_and_restart_cost_explicitly(instance_file: Path) -> None:
    schedule = instance_file.parent / "c4.json"
    assert runner.invoke(app, ["simulate", str(instance_file), "-p", "fifo", "--capacity", "4", "-o", str(schedule)])
    forced = runner.invoke(app, ["validate", str(instance_file), str(schedule), "--capacity", "4", "--json"])
    assert forced.exit_code == 0 and json.loads(forced.stdout)["capacity"] == 4
    assert runner.invoke(app, ["validate", str(instance_file), str(schedule), "--capacity", "0"]).exit_code == 2
