"""Issue 15 item 7: plots refuse the wrong instance, help keeps flag names whole at 80 columns, wide
tables fold, ``inspect`` prints units and the GPU demand as a table."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from rich.console import Console
from typer.testing import CliRunner

from duetto.cli import app
from duetto.commands.studies import _print_frame
from formulation import io as duetto_io
from formulation.generator import generate_instance

runner = CliRunner()


def test_plot_against_the_wrong_instance_exits_2_with_the_first_violations(tmp_path: Path) -> None:
    right, wrong = tmp_path / "right.json", tmp_path / "wrong.json"
    duetto_io.save_instance(generate_instance(6, 1, 4, seed=1), right)
    duetto_io.save_instance(generate_instance(6, 1, 4, seed=2, duration_range=(7200, 20000)), wrong)
    schedule = tmp_path / "s.json"
    assert runner.invoke(app, ["simulate", str(right), "-p", "fifo", "-o", str(schedule)]).exit_code == 0
    figure = tmp_path / "g.png"
    result = runner.invoke(app, ["plot", str(schedule), "--instance", str(wrong), "-o", str(figure)])
    assert result.exit_code == 2, result.output
    assert "violations" in result.output and "--allow-invalid" in result.output
    assert not figure.exists()
    allowed = runner.invoke(
        app, ["plot", str(schedule), "--instance", str(wrong), "-o", str(figure), "--allow-invalid"]
    )
    assert allowed.exit_code == 0, allowed.output
    assert "INVALID" in allowed.output and figure.stat().st_size > 1000
    assert runner.invoke(app, ["plot", str(schedule), "--instance", str(right), "-o", str(figure)]).exit_code == 0


def test_help_at_80_columns_keeps_flag_names_whole() -> None:
    env = {**os.environ, "COLUMNS": "80", "TERM": "xterm"}
    output = subprocess.run(
        [sys.executable, "-m", "duetto", "solve", "--help"], capture_output=True, text=True, env=env, check=True
    ).stdout
    for flag in ("--policy-warm-start", "--no-policy-warm-start", "--no-local-search", "--no-coupled-bound"):
        assert flag in output
    assert "…" not in output
    assert max(len(line) for line in output.splitlines()) <= 80


def test_a_wide_table_folds_into_parts_that_fit() -> None:
    columns = ["method", "n", "instances", "proven", "gap_median", "gap_p95", "gap_max", "to_bound"]
    columns += ["bound_gap_median", "bound_gap_max", "wall_median_s", "note"]
    frame = pd.DataFrame([{c: 0.25 for c in columns} | {"method": "sjf-bsbf-lookahead", "n": 8, "note": ""}] * 2)
    buffer = io.StringIO()
    _print_frame(frame, "gap per method and size", columns, out=Console(width=80, file=buffer))
    text = buffer.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    for column in columns:
        assert column in text  # every header whole, none cut letter by letter
    assert "(1/" in text and text.count("sjf-bsbf-lookahead") >= 4  # key column repeated in each part


def test_inspect_prints_units_and_gpu_demand_as_a_table(tmp_path: Path) -> None:
    path = tmp_path / "i.json"
    duetto_io.save_instance(generate_instance(12, 2, 4, seed=3), path)
    result = runner.invoke(app, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "GiB" in result.output and "GPU·s" in result.output and " s" in result.output
    assert "GPU demand" in result.output and "GPUs per job" in result.output
    assert "{'" not in result.output  # not a Python dict
