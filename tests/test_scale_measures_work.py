"""Issue 15 item 4: ``duetto scale`` measures the work, not the start-up, and says why a row is empty."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from benchmarks.scale import ScaleStudy, run_scale_study
from duetto.cli import app


def test_a_linear_policy_grows_with_n_and_start_up_is_reported_apart(tmp_path: Path) -> None:
    # fresh pool workers: before, each task's time was mostly imports (fitted exponent 0.03)
    study = ScaleStudy(
        solvers=("cpsat",),
        solver_sizes=(12,),
        policies=("fifo",),
        policy_sizes=(10, 100, 1000),
        seeds=(0,),
        time_limit=3.0,
    )
    outcome = run_scale_study(study, tmp_path, workers=2, progress=False, figures=False)
    fits = outcome.fits.set_index("method")
    assert fits.loc["fifo", "exponent"] > 0.5, outcome.summary.to_string()
    assert fits.loc["fifo", "points"] == 3
    fifo = outcome.rows[outcome.rows["method"] == "fifo"]
    assert (fifo["startup_seconds"].astype(float) > 0).all()
    # the start-up is not in the work: the smallest run is far shorter than its worker's warm-up
    small = fifo[fifo["n"] == 10].iloc[0]
    assert small["seconds"] < small["startup_seconds"]
    # (a skipped method's row and reason: test_tables_say_what; Muri now serves the random family)


def test_the_console_says_why_a_method_stopped(tmp_path: Path) -> None:
    arguments = ["scale", "--solver", "cpsat", "--solver-sizes", "4", "--time-limit", "3", "--seeds", "1"]
    arguments += ["--policy", "sjf", "--policy-sizes", "10,20", "--max-seconds", "1e-9"]
    result = CliRunner().invoke(app, [*arguments, "--out", str(tmp_path), "--no-progress", "--no-figures"])
    assert result.exit_code == 0, result.output
    # every run takes longer than 1e-9 s: sjf stops after n=10 and the console says why
    assert "sjf: not run from n=20: median" in " ".join(result.output.split())
    assert "stopped before n=" not in result.output
