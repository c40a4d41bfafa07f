"""The instance commands of the CLI: generate, inspect, validate, schema, and their error handling."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from duetto.cli import app
from formulation.io import load_instance, save_schedule
from formulation.schedule import Schedule

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args))


def _sequential_schedule(instance_path: Path) -> Schedule:
    instance = load_instance(instance_path)
    entries, now = [], 0.0
    for job in instance.jobs:
        start = max(now, job.arrival)
        entries.append((job.id, start, list(range(job.num_gpus)), instance.modes(job.id)[0].steps))
        now = start + instance.isolated_duration(job)
    return Schedule.non_preemptive(entries, producer="test")


def test_generate_is_deterministic_and_inspect_reports_it(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert _run("generate", "-n", "7", "--gpus-per-node", "4", "--seed", "5", "-o", str(first)).exit_code == 0
    assert _run("generate", "-n", "7", "--gpus-per-node", "4", "--seed", "5", "-o", str(second)).exit_code == 0
    assert first.read_text() == second.read_text()
    result = _run("inspect", str(first), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["jobs"] == 7 and summary["gpus"] == 4


def test_written_files_get_the_mode_open_would_give(tmp_path: Path) -> None:
    # Written through a 0600 temporary file and renamed: the result must still honour the umask
    # (readable by the group and others under 022) and keep an existing file's mode.
    old_mask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.json"
        assert _run("generate", "-n", "3", "--seed", "1", "-o", str(fresh)).exit_code == 0
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
        kept = tmp_path / "kept.json"
        kept.write_text("{}")
        kept.chmod(0o640)
        assert _run("generate", "-n", "3", "--seed", "1", "-o", str(kept)).exit_code == 0
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640
        assert kept.read_text() == fresh.read_text()
    finally:
        os.umask(old_mask)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_validate_valid_and_invalid(tmp_path: Path) -> None:
    instance_path = tmp_path / "inst.json"
    assert _run("generate", "-n", "5", "--gpus-per-node", "8", "--seed", "2", "-o", str(instance_path)).exit_code == 0
    good = _sequential_schedule(instance_path)
    save_schedule(good, tmp_path / "good.json")
    result = _run("validate", str(instance_path), str(tmp_path / "good.json"), "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["valid"] is True and payload["metrics"]["completed"] == 5

    # Everything at time 0 on GPU 0..G-1: several jobs on GPU 0 → capacity violations, exit 1.
    crowded = Schedule.non_preemptive([(p.job_id, 0.0, p.segments[0].gpus, p.segments[0].steps) for p in good.plans])
    save_schedule(crowded, tmp_path / "bad.json")
    result = _run("validate", str(instance_path), str(tmp_path / "bad.json"))
    assert result.exit_code == 1
    assert "capacity" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("generate", "-n", "0", "-o", "{tmp}/x.json"), "num_jobs"),
        (("generate", "-n", "3", "--xi-range", "0.5,2", "-o", "{tmp}/x.json"), "xi_range"),
        (("generate", "-n", "3", "--xi-range", "abc", "-o", "{tmp}/x.json"), "xi-range"),
        (("inspect", "{tmp}/missing.json"), "file not found"),
        (("inspect", "{tmp}/broken.json"), "malformed JSON"),
        (("inspect", "{tmp}/negative.json"), "jobs.0.iterations"),
        (("import", "muri", "{tmp}/missing.csv", "-o", "{tmp}/x.json"), "missing.csv"),
        (("inspect", "{tmp}/schedule.json"), "this is a schedule (format 'duetto-schedule'), an instance is expected"),
        (("validate", "{tmp}/ok.json", "{tmp}/ok.json"), "this is an instance (format 'duetto-instance'), a schedule"),
        (("generate", "-n", "2", "-o", "{tmp}"), "is a directory; give a file name"),
        (("generate", "-n", "2", "-o", "{tmp}/ok.json/x.json"), "ok.json/x.json: cannot write here"),
    ],
)
def test_bad_input_gives_one_line_error_exit_2_and_no_output(tmp_path: Path, args, message: str) -> None:
    (tmp_path / "broken.json").write_text('{"cluster": ')
    generated = tmp_path / "ok.json"
    _run("generate", "-n", "2", "--gpus-per-node", "2", "-o", str(generated))
    data = json.loads(generated.read_text())
    data["jobs"][0]["iterations"] = -3
    (tmp_path / "negative.json").write_text(json.dumps(data))
    save_schedule(_sequential_schedule(generated), tmp_path / "schedule.json")
    result = _run(*(arg.format(tmp=tmp_path) for arg in args))
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1
    assert not (tmp_path / "x.json").exists()


def test_schema_command_prints_json_schema() -> None:
    result = _run("schema", "instance")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert "jobs" in schema["properties"] and "cluster" in schema["required"]


@pytest.mark.parametrize(
    ("kind", "relative", "jobs"),
    [
        ("muri", "muri/trace1.csv", 1494),
        ("tiresias", "tiresias/60_job.csv", 60),
        ("gavel", "gavel/msr_seed0/0e4a51.trace", None),
        ("shockwave", "shockwave/traces/120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace", 120),
        ("pollux", "pollux/workloads-1.5/workload-1.csv", 240),
    ],
)
def test_import_each_format_through_the_cli(tmp_path: Path, kind: str, relative: str, jobs: int | None) -> None:
    from formulation.paths import shared_data_dir

    source = shared_data_dir() / relative
    output = tmp_path / "inst.json"
    result = _run("import", kind, str(source), "-o", str(output), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    expected = jobs if jobs is not None else sum(1 for line in source.read_text().splitlines() if line.strip())
    assert summary["jobs"] == expected
    assert len(load_instance(output).jobs) == expected
