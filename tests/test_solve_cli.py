"""``duetto solve`` (duetto/commands/solve.py) end to end, with real solves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from duetto.commands import solve as solve_command
from formulation import io
from formulation.discretize import choose_slot
from formulation.generator import generate_instance
from formulation.validator import validate
from solvers.api import LANE_MODE_NAMES

REQUIRED = ("status", "objective", "bound", "gap", "build_seconds", "solve_seconds")


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    application = typer.Typer()
    solve_command.register(application)

    @application.command()
    def version() -> None:  # a second command keeps typer in multi-command mode, as in duetto.cli
        typer.echo("test")

    return application


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture()
def instance_file(tmp_path: Path) -> tuple[Path, float]:
    instance = generate_instance(5, 1, 4, 31, memory_pressure=0.5)
    path = tmp_path / "instance.json"
    io.save_instance(instance, path)
    return path, choose_slot(instance, 10)


def test_json_summary_and_schedule_file(
    app: typer.Typer, runner: CliRunner, instance_file: tuple[Path, float], tmp_path: Path
) -> None:
    path, slot = instance_file
    out = tmp_path / "schedule.json"
    result = runner.invoke(
        app,
        [
            *("solve", str(path), "--solver", "cpsat", "--time-limit", "30", "--slot", str(slot)),
            *("--json", "-o", str(out), "--lanes-after"),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    for key in REQUIRED:
        assert key in summary
    assert summary["status"] == "optimal" and summary["gap"] == 0.0
    assert summary["objective"] == summary["bound"]
    coupled = summary["stats"]["coupled_bound"]  # the pair-coupled LP ran beside CP-SAT, before the lanes
    assert summary["stats"]["lane_bound"]["order"] == "after"
    assert coupled["status"] == "optimal" and coupled["bound_slots"] <= summary["stats"]["objective_slots"] + 1e-6
    assert coupled["bound_seconds"] <= summary["objective"] + 1e-6
    without = runner.invoke(
        app, ["solve", str(path), "--time-limit", "30", "--slot", str(slot), "--json", "--no-coupled-bound"]
    )
    assert without.exit_code == 0, without.output
    assert json.loads(without.stdout)["stats"]["coupled_bound"] is None
    assert json.loads(without.stdout)["stats"]["lane_bound"]["order"] == "first"  # the default
    instance = io.load_instance(path)
    schedule = io.load_schedule(out)
    assert schedule.slot == slot and schedule.producer == "cpsat"
    report = validate(instance, schedule)
    assert report.ok and round(report.total_jct(instance), 6) == round(summary["objective"], 6)


def test_makespan_and_human_output(app: typer.Typer, runner: CliRunner, instance_file: tuple[Path, float]) -> None:
    path, slot = instance_file
    result = runner.invoke(
        app, ["solve", str(path), "-t", "30", "--slot", str(slot), "--objective", "makespan", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["objective_kind"] == "makespan" and summary["status"] == "optimal"
    assert summary["stats"]["coupled_bound"]["status"].startswith("skipped")  # a total-JCT bound only
    human = runner.invoke(app, ["solve", str(path), "-t", "30", "--slot", str(slot), "--quiet"])
    assert human.exit_code == 0, human.output
    assert "objective" in human.stdout and "optimal" in human.stdout
    assert "coupled LP bound" in human.stdout


@pytest.mark.parametrize("suffix", [".mps", pytest.param(".lp", marks=pytest.mark.slow)])
def test_export_model_with_highs(
    app: typer.Typer, runner: CliRunner, instance_file: tuple[Path, float], tmp_path: Path, suffix: str
) -> None:
    path, slot = instance_file
    model = tmp_path / f"model{suffix}"
    result = runner.invoke(
        app,
        [
            "solve",
            str(path),
            "--solver",
            "highs",
            "-t",
            "30",
            "--slot",
            str(slot),
            "--export-model",
            str(model),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["status"] == "optimal" and summary["model_path"] == str(model)
    text = model.read_text()
    assert len(text) > 1000
    assert ("ROWS" in text) if suffix == ".mps" else ("minimize" in text.lower() or "min" in text.lower())


def _one_error_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error:")
    return lines[0]


def test_bad_input_gives_one_line_errors(
    app: typer.Typer, runner: CliRunner, instance_file: tuple[Path, float], tmp_path: Path
) -> None:
    path, _ = instance_file
    cases = [
        (["solve", str(path), "--solver", "gurobi"], "unknown solver"),
        (["solve", str(path), "--time-limit", "-3"], "time_limit"),
        (["solve", str(path), "--slot", "0"], "slot"),
        (["solve", str(tmp_path / "missing.json")], "file not found"),
        (["solve", str(path), "--export-model", str(tmp_path / "model.txt")], ".mps or .lp"),
        (["solve", str(path), "--solver", "pyomo:cbc", "-t", "20"], "cbc"),
        (["solve", str(path), "--no-lane-bound", "--lanes-after"], "--no-lane-bound"),
    ]
    for args, expected in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert expected in _one_error_line(result.output), args


def test_a_solver_pyomo_does_not_know_is_one_line_on_the_terminal(instance_file: tuple[Path, float]) -> None:
    # the worker process writes to the real stderr, which CliRunner does not see: run the installed
    # command. Pyomo logs a warning with its own traceback for an unknown name; duetto keeps it quiet
    path, _ = instance_file
    command = Path(sys.executable).parent / "duetto"
    result = subprocess.run(
        [str(command), "solve", str(path), "--solver", "pyomo:nosuchsolver", "-t", "20"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "WARNING" not in result.stderr, result.stderr
    assert "knows no solver named 'nosuchsolver'" in _one_error_line(result.stdout + result.stderr)


def test_instance_that_cannot_fit_is_rejected_naming_the_job(
    app: typer.Typer, runner: CliRunner, tmp_path: Path
) -> None:
    data = io.instance_to_dict(generate_instance(3, 1, 4, 1))
    data["jobs"][1]["num_gpus"] = 16  # the cluster has 4
    path = tmp_path / "too-big.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["solve", str(path)])
    assert result.exit_code == 2
    line = _one_error_line(result.output)
    assert data["jobs"][1]["id"] in line and "16 GPUs" in line
    # a job that needs more slots than the model allows, at the slot asked for
    data = io.instance_to_dict(generate_instance(3, 1, 4, 1))
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["solve", str(path), "--slot", "0.001"])
    assert result.exit_code == 2
    assert "job 'j" in _one_error_line(result.output) and "slots" in result.output


def test_warm_start_from_a_policy_schedule_and_bad_warm_starts(
    app: typer.Typer, runner: CliRunner, tmp_path: Path
) -> None:
    from heuristics import simulate

    # contended enough that 1 s proves nothing: the result can only be as good as where it started
    instance = generate_instance(30, 1, 4, 5)
    path = tmp_path / "instance.json"
    io.save_instance(instance, path)
    slot = choose_slot(instance)
    policy = simulate(instance, "sjf-bsbf", slot=slot)
    policy_path = tmp_path / "bsbf.json"
    io.save_schedule(policy.schedule, policy_path)
    policy_total = validate(instance, policy.schedule).total_jct(instance)
    out = tmp_path / "opt.json"
    args = ["solve", str(path), "--time-limit", "3", "--json", "--warm-start", str(policy_path), "-o", str(out)]
    result = runner.invoke(app, [*args, "--no-policy-warm-start"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["stats"]["problem"]["slot_seconds"] == slot  # the warm start's slot was taken
    assert summary["objective"] <= policy_total + 1e-6
    report = validate(instance, io.load_schedule(out))
    assert report.ok and abs(report.total_jct(instance) - summary["objective"]) < 1e-6

    # a continuous-time schedule does not start on slot boundaries: one line naming the field, exit 2
    continuous = simulate(instance, "sjf-bsbf")
    bad_path = tmp_path / "continuous.json"
    io.save_schedule(continuous.schedule, bad_path)
    bad = runner.invoke(app, ["solve", str(path), "--time-limit", "3", "--slot", "7", "--warm-start", str(bad_path)])
    assert bad.exit_code == 2
    assert "warm_start_schedule" in bad.output and "slot boundary" in bad.output
    assert "Traceback" not in bad.output


def test_branch_and_price_from_the_command_line(
    app: typer.Typer, runner: CliRunner, instance_file: tuple[Path, float], tmp_path: Path
) -> None:
    path, slot = instance_file
    out = tmp_path / "schedule.json"
    result = runner.invoke(
        app, ["solve", str(path), "--solver", "bnp", "--time-limit", "30", "--slot", str(slot), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "optimal" in result.output and "lane bound / tree" in result.output
    schedule = io.load_schedule(out)
    assert schedule.producer == "bnp"
    assert validate(io.load_instance(path), schedule).ok


def test_the_arrival_split_bound_from_the_command_line(app: typer.Typer, runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "poisson.json"
    io.save_instance(generate_instance(24, 1, 8, 2, arrivals="poisson"), path)
    shown = runner.invoke(app, ["solve", str(path), "--solver", "bnp", "--time-limit", "20", "--split-bound"])
    assert shown.exit_code == 0, shown.output
    assert "arrival-split bound" in shown.output
    small = tmp_path / "small.json"
    io.save_instance(generate_instance(6, 1, 4, 1, arrivals="poisson"), small)
    command = ["solve", str(small), "--solver", "bnp", "--time-limit", "20", "--json"]
    on = runner.invoke(app, [*command, "--split-bound"])
    off = runner.invoke(app, command)
    assert on.exit_code == 0 and off.exit_code == 0, on.output + off.output
    assert json.loads(on.output)["stats"]["split_bound"]["status"].startswith("not run")
    assert "split_bound" not in json.loads(off.output)["stats"]


def test_the_lane_windows_from_the_command_line(app: typer.Typer, runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "poisson.json"
    io.save_instance(generate_instance(6, 1, 4, 1, arrivals="poisson"), path)
    shown = runner.invoke(app, ["solve", str(path), "--time-limit", "10"])
    assert shown.exit_code == 0, shown.output
    assert "lane windows" in shown.output
    command = ["solve", str(path), "--time-limit", "10", "--json"]
    on = runner.invoke(app, command)
    off = runner.invoke(app, [*command, "--no-lane-windows"])
    assert on.exit_code == 0 and off.exit_code == 0, on.output + off.output
    assert isinstance(json.loads(on.output)["stats"]["lane_windows"]["restarts"], list)
    assert json.loads(off.output)["stats"]["lane_windows"] is None


def test_mode_aware_lanes_from_the_command_line(app: typer.Typer, runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    instance = generate_instance(7, 1, 4, 0, memory_pressure=0.6)
    io.save_instance(instance, path)
    out = tmp_path / "schedule.json"
    command = ["solve", str(path), "--solver", "bnp", "--time-limit", "20", "--json"]
    on = runner.invoke(app, [*command, "--lane-modes", "on", "-o", str(out)])
    off = runner.invoke(app, [*command, "--lane-modes", "off"])
    auto = runner.invoke(app, command)  # the default: selective for a tree after the coupled LP
    assert on.exit_code == 0 and off.exit_code == 0 and auto.exit_code == 0, on.output + off.output + auto.output
    assert json.loads(on.output)["stats"]["lane_bound"]["lane_modes"] is True
    assert json.loads(off.output)["stats"]["lane_bound"]["lane_modes"] is False
    assert json.loads(auto.output)["stats"]["lane_bound"]["lane_modes"] == "selective"
    objectives = {json.loads(result.output)["objective"] for result in (on, off, auto)}
    assert len(objectives) == 1  # all proven
    assert validate(instance, io.load_schedule(out)).ok
    # every name the option offers is one the solve's table maps (and no other)
    assert {name.value for name in solve_command.LaneModes} == set(LANE_MODE_NAMES)
    bad = runner.invoke(app, [*command, "--lane-modes", "sometimes"])
    assert bad.exit_code != 0 and "--lane-modes" in bad.output and "Traceback" not in bad.output
