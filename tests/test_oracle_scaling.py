"""Smoke tests of ``benchmarks/oracle_scaling.py``: the scaling rows, the cross-check and the
argument errors, on a 4-job instance that both exact solvers prove in seconds."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.oracle_scaling import COLUMNS, largest_proven, main


def _argv(arguments: str, output: Path) -> list[str]:
    return [*shlex.split(arguments), "--output", str(output)]


def test_scaling_rows_are_proven_valid_and_complete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "x.csv"
    code = main(_argv("--solver cpsat --jobs 4 --shape 1x4 --seeds 1 --time-limit 5", output))
    assert code == 0
    frame = pd.read_csv(output)
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["solver"] == "cpsat"
    assert (row["jobs"], row["nodes"], row["gpus"], row["seed"]) == (4, 1, 4, 0)
    assert row["shape"] == "1x4"
    assert row["status"] == "optimal"
    assert bool(row["proven"]) is True
    assert bool(row["valid"]) is True
    assert row["gap"] == 0
    assert math.isfinite(row["objective"]) and row["objective"] > 0
    assert row["objective"] == pytest.approx(row["bound"])
    for column in ("coupled_bound", "coupled_bound_seconds", "overrun", "rows", "columns"):
        assert column in frame.columns
    # a proven optimum: the coupled LP's bound (a relaxation) cannot exceed it
    if math.isfinite(row["coupled_bound"]):
        assert row["coupled_bound"] <= row["objective"] + 1e-6
    # the overrun is the wall time against the limit, and a proven 4-job solve ends well before it
    assert row["overrun"] == pytest.approx(row["wall_seconds"] / 5 - 1, abs=2e-3)
    assert -1 < row["overrun"] < 0.5
    assert row["rows"] > 0 and row["columns"] > 0
    assert math.isnan(row["lane_window_restarts"])  # all jobs at 0: CP-SAT is never restarted in lane windows
    out = capsys.readouterr().out
    assert "largest n proven optimal for every seed: {'1x4': 4}" in out


def test_lane_windows_with_arrivals_and_without(tmp_path: Path) -> None:
    rows = {}
    for name, extra in (("on", ""), ("off", " --no-lane-windows")):
        output = tmp_path / f"{name}.csv"
        arguments = f"--solver cpsat --jobs 6 --shape 1x4 --seeds 1 --time-limit 10 --arrivals poisson{extra}"
        assert main(_argv(arguments, output)) == 0
        rows[name] = pd.read_csv(output).iloc[0]
    assert rows["on"]["lane_window_restarts"] >= 0 and math.isnan(rows["off"]["lane_window_restarts"])
    for row in rows.values():
        assert bool(row["valid"]) is True and row["bound"] <= row["objective"] + 1e-6


def test_exclusive_gpus_rows(tmp_path: Path) -> None:
    output = tmp_path / "c1.csv"
    assert main(_argv("--solver cpsat --jobs 5 --shape 1x4 --seeds 1 --time-limit 10 --capacity 1", output)) == 0
    row = pd.read_csv(output).iloc[0]
    assert row["capacity"] == 1 and bool(row["valid"]) is True
    assert row["bound"] <= row["objective"] + 1e-6
    assert not str(row["lane_bound_status"]).startswith("skipped")  # the lanes bound exclusive GPUs too


def test_largest_proven_needs_every_seed() -> None:
    table = pd.DataFrame(
        {
            "shape": ["1x8"] * 4 + ["2x4"] * 2,
            "jobs": [4, 4, 6, 6, 4, 4],
            "proven": [True, True, True, False, False, True],
        }
    )
    assert largest_proven(table) == {"1x8": 4, "2x4": 0}


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--shape", "4by2"], "--shape"),
        (["--shape", "0x4"], "--shape"),
        (["--gpus", "6", "--gpus-per-node", "4"], "--gpus"),
        (["--solver", "foo"], "--solver"),
        (["--solver", "cpsat", "--cross-check-with", "nosuchsolver"], "--cross-check-with"),
        (["--capacity", "0"], "--capacity"),
    ],
)
def test_bad_cluster_arguments_are_argparse_errors(
    arguments: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["--jobs", "4", "--seeds", "1", "--output", str(tmp_path / "x.csv"), *arguments])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert named in err
    assert "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def test_cross_check_highs_against_cpsat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "check.csv"
    code = main(_argv("--solver highs --cross-check-with cpsat --jobs 4 --shape 1x4 --seeds 1 --time-limit 20", output))
    assert code == 0
    frame = pd.read_csv(output)
    assert len(frame) == 1
    row = frame.iloc[0]
    assert (row["n"], row["shape"], row["seed"]) == (4, "1x4", 0)
    assert row["highs_status"] == "optimal" and row["cpsat_status"] == "optimal"
    assert bool(row["highs_valid"]) and bool(row["cpsat_valid"])
    assert bool(row["both_proven"]) is True
    assert bool(row["agree"]) is True
    assert round(row["highs_slots"]) == round(row["cpsat_slots"])
    assert "both proven: 1 of 1; agreeing: 1" in capsys.readouterr().out


def test_a_solver_pyomo_cannot_run_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # known only once the worker asks Pyomo: the run stops with exit status 2 and one line, no CSV
    output = tmp_path / "x.csv"
    code = main(_argv("--solver pyomo:nosuchsolver --jobs 4 --shape 1x4 --seeds 1 --time-limit 20", output))
    assert code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "error: Pyomo knows no solver named 'nosuchsolver' (try gurobi, cplex, scip, cbc, glpk, appsi_highs)"
    ]
    assert not output.exists()
