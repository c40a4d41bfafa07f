"""Replay fidelity (issue 16): Pollux workloads from anywhere (profiles fall back to the shared copy,
``--profiles DIR``), ..."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from duetto.cli import app
from formulation.errors import DuettoInputError
from formulation.paths import shared_data_dir
from formulation.traces import load_pollux

DATA = shared_data_dir()
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not found beside the repository")
POLLUX = DATA / "pollux" / "workloads-1.5" / "workload-1.csv"
cli = CliRunner()


def _elsewhere(tmp_path: Path, rows: int | None = None) -> Path:
    """A copy of a Pollux workload in a folder with no ``profiles`` anywhere near it."""
    folder = tmp_path / "elsewhere" / "deep"
    folder.mkdir(parents=True)
    target = folder / "workload-1.csv"
    lines = POLLUX.read_text().splitlines()
    target.write_text("\n".join(lines if rows is None else lines[: rows + 1]) + "\n")
    return target


def _scaled_profiles(tmp_path: Path, applications: set[str], factor: float) -> Path:
    """A profiles folder for ``applications`` whose measured step times are ``factor`` times the shared ones."""
    root = tmp_path / "my-profiles"
    for application in applications:
        source = DATA / "pollux" / "profiles" / application
        shutil.copytree(source, root / application)
        for name in ("placements.csv", "scalability.csv"):
            table = pd.read_csv(source / name)
            table["step_time"] = table["step_time"] * factor
            table.to_csv(root / application / name, index=False)
    return root


# --- item 5: Pollux workloads from anywhere -------------------------------------------------------------


def test_pollux_workload_elsewhere_uses_the_shared_profiles(tmp_path: Path) -> None:
    moved = load_pollux(_elsewhere(tmp_path))
    original = load_pollux(POLLUX)
    assert len(moved.jobs) == 240
    assert moved.jobs == original.jobs
    assert moved.profiles == original.profiles
    assert Path(moved.metadata["profiles"]).resolve() == (DATA / "pollux" / "profiles").resolve()


def test_pollux_profiles_option_changes_the_numbers(tmp_path: Path) -> None:
    workload = _elsewhere(tmp_path, rows=12)
    base = load_pollux(workload)
    applications = {job.profile.rsplit("-r", 1)[0] for job in base.jobs}
    slow = load_pollux(workload, profiles_dir=_scaled_profiles(tmp_path, applications, 2.0))
    for fast_job, slow_job in zip(base.jobs, slow.jobs, strict=True):
        ratio = slow.isolated_duration(slow_job) / base.isolated_duration(fast_job)
        assert ratio == pytest.approx(2.0, rel=0.01)  # Eq. 1-3 is homogeneous: twice the step times


def test_pollux_profiles_errors(tmp_path: Path) -> None:
    with pytest.raises(DuettoInputError, match="profiles folder not found"):
        load_pollux(POLLUX, profiles_dir=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DuettoInputError, match=r"row 1.*unknown application 'ncf'"):
        load_pollux(POLLUX, profiles_dir=tmp_path / "empty")


def test_profiles_on_import_simulate_and_replay(tmp_path: Path) -> None:
    workload = _elsewhere(tmp_path, rows=8)
    out = tmp_path / "w.json"
    plain = cli.invoke(app, ["import", "pollux", str(workload), "-o", str(out), "--json"])
    assert plain.exit_code == 0, plain.output
    base = json.loads(plain.output)
    applications = {line.split(",")[2] for line in workload.read_text().splitlines()[1:] if line.strip()}
    profiles = _scaled_profiles(tmp_path, applications, 3.0)
    scaled = cli.invoke(app, ["import", "pollux", str(workload), "--profiles", str(profiles), "-o", str(out), "--json"])
    assert scaled.exit_code == 0, scaled.output
    assert json.loads(scaled.output)["gpu_seconds"] == pytest.approx(3.0 * base["gpu_seconds"], rel=0.01)

    simulated = cli.invoke(
        app,
        ["simulate", str(workload), "--trace", "pollux", "--profiles", str(profiles), "--policy", "fifo", "--json"],
    )
    assert simulated.exit_code == 0, simulated.output
    assert json.loads(simulated.output)["valid"] is True

    replayed = cli.invoke(
        app,
        [
            *("replay", "pollux", str(workload), "--profiles", str(profiles), "--policy", "fifo"),
            *("--no-bound", "--no-figures", "--no-progress", "--workers", "1", "--out", str(tmp_path / "r")),
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    rows = pd.read_csv(tmp_path / "r" / "replay.csv")
    assert rows["validated"].all() and len(rows) == 1

    for args in (
        ["import", "muri", str(DATA / "muri" / "trace1.csv"), "--profiles", str(profiles)],
        ["import", "pollux", str(workload), "--profiles", str(tmp_path / "missing")],
        ["simulate", str(out), "--profiles", str(profiles), "--policy", "fifo"],
    ):
        bad = cli.invoke(app, [*args, "-o", str(tmp_path / "x.json")] if args[0] == "import" else args)
        assert bad.exit_code == 2, bad.output
        assert "Traceback" not in bad.output and "--profiles" in bad.output
