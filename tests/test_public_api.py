"""The public API: ``import duetto`` gives every public name, lazily, and the documented flow works."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import duetto
from duetto.results import JOB_COLUMNS
from formulation.paths import shared_data_dir

POLLUX = shared_data_dir() / "pollux" / "workloads-1.5" / "workload-1.csv"
needs_data = pytest.mark.skipif(not POLLUX.is_file(), reason="shared data not available")


def test_every_public_name_is_the_object_of_its_home_module() -> None:
    for name in duetto.__all__:
        if name == "__version__":
            continue
        home = importlib.import_module(duetto._EXPORTS[name])
        assert getattr(duetto, name) is getattr(home, name), name
    assert set(duetto._EXPORTS) == set(duetto.__all__) - {"__version__"}
    assert set(duetto.__all__) <= set(dir(duetto))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        duetto.no_such_name  # noqa: B018


def test_importing_duetto_loads_no_solver_or_cluster_library() -> None:
    # the CLI imports the package on every command: it must stay light
    heavy = ["ortools", "pyomo", "highspy", "ray", "pandas", "matplotlib", "formulation", "solvers"]
    code = f"import duetto, json, sys; print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == []


def test_the_documented_flow_solve_validate_simulate() -> None:
    instance = duetto.generate_instance(6, nodes=1, gpus_per_node=4, seed=3)
    result = duetto.solve(instance, solver="cpsat", time_limit=30)
    assert result.status == duetto.SolveStatus.OPTIMAL and result.gap == 0
    report = duetto.validate(instance, result.schedule)
    assert report.ok
    assert duetto.compute_metrics(instance, report)["total_jct"] == pytest.approx(result.objective)
    policy = duetto.simulate(instance, "sjf-bsbf", slot=result.schedule.slot)
    assert policy.report.ok
    assert policy.metrics is not None and policy.metrics["total_jct"] >= result.objective - 1e-6
    with pytest.raises(duetto.DuettoInputError, match="unknown policy"):
        duetto.simulate(instance, "no-such-policy")


def test_the_command_prints_its_version() -> None:
    from typer.testing import CliRunner

    from duetto.cli import app

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"duetto {duetto.__version__}"
    assert duetto.__version__[0].isdigit()


def test_python_dash_m_duetto_is_the_command() -> None:
    run = subprocess.run([sys.executable, "-m", "duetto", "--version"], capture_output=True, text=True, check=False)
    assert run.returncode == 0 and run.stdout.strip() == f"duetto {duetto.__version__}"


def test_output_to_a_pipe_is_not_squeezed_into_80_columns() -> None:
    # Tables printed to a file or a pipe keep their width (Rich would fold them to 80 columns and
    # truncate their headers); COLUMNS still decides when the user sets it.
    import os

    code = "from duetto.cli_support import console; print(console.width)"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert int(piped.stdout) == 220
    env["COLUMNS"] = "100"
    chosen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert int(chosen.stdout) == 100


# --- studies and per-job results from the public API ------------------------------------------------


def test_gap_study_returns_the_rows_and_each_row_is_the_documented_solve_or_simulation(tmp_path: Path) -> None:
    rows = duetto.gap_study(
        sizes=3, cluster="1x2", seeds=2, arrivals="zero", policies=["fifo", "sjf-bsbf"], time_limit=30, workers=1
    )
    assert isinstance(rows, pd.DataFrame) and len(rows) == 2 * 3  # 2 instances x (oracle + 2 policies)
    assert set(rows["method"]) == {"oracle:cpsat", "fifo", "sjf-bsbf"} and rows["validated"].all()
    oracle = rows[rows["method"] == "oracle:cpsat"]
    assert oracle["proven_optimal"].all() and (oracle["gap"] == 0).all()
    assert (rows.loc[rows["gap_kind"] == "optimum", "gap"] >= 0).all()  # non-preemptive policies: never below
    for record in rows[rows["method"] != "oracle:cpsat"].to_dict(orient="records"):
        # the same instance and slot through the public API give the row's numbers
        instance = duetto.generate_instance(3, nodes=1, gpus_per_node=2, seed=int(record["seed"]))
        policy = duetto.simulate(instance, str(record["method"]), slot=float(record["slot"]))
        assert policy.metrics is not None
        assert record["objective"] == pytest.approx(policy.metrics["total_jct"])
        optimum = float(oracle.loc[oracle["seed"] == record["seed"], "objective"].iloc[0])
        assert record["gap"] == pytest.approx(policy.metrics["total_jct"] / optimum - 1)
    # with a folder: the command's files, and a rerun reads the stored rows (same frame)
    kept = duetto.gap_study(
        sizes=3, cluster=(1, 2), seeds=[0], arrivals="zero", policies="fifo", out=tmp_path, workers=1, figures=False
    )
    assert (tmp_path / "gap.csv").is_file() and (tmp_path / "summary.csv").is_file()
    again = duetto.gap_study(sizes=3, cluster=(1, 2), seeds=[0], arrivals="zero", policies="fifo", out=tmp_path)
    pd.testing.assert_frame_equal(kept, again)


def test_studies_refuse_bad_arguments_before_running() -> None:
    with pytest.raises(duetto.DuettoInputError, match="unknown policy"):
        duetto.gap_study(sizes=3, policies=["no-such-policy"])
    with pytest.raises(duetto.DuettoInputError, match="cluster"):
        duetto.gap_study(sizes=3, cluster="2y4", policies="fifo")
    with pytest.raises(duetto.DuettoInputError, match="seeds"):
        duetto.scale_study(solvers=(), policies="fifo", seeds=0)
    with pytest.raises(duetto.DuettoInputError, match="no such file"):
        duetto.replay("pollux", "no-such-trace.csv", policies="fifo")


def test_scale_study_returns_one_row_per_method_size_and_seed() -> None:
    rows = duetto.scale_study(solvers=(), policies=["fifo", "sjf"], policy_sizes=(8, 16), seeds=2, workers=1)
    assert len(rows) == 2 * 2 * 2 and rows["validated"].all()
    assert sorted(set(rows["n"])) == [8, 16] and set(rows["method"]) == {"fifo", "sjf"}
    assert (rows["seconds"] > 0).all()


@needs_data
def test_replay_returns_the_metrics_of_simulating_the_trace() -> None:
    rows = duetto.replay("pollux", POLLUX, policies=["fifo", "sjf"], limit=20, workers=1)
    assert len(rows) == 2 and rows["validated"].all()
    instance = duetto.load_trace("pollux", POLLUX, limit=20)
    for record in rows.to_dict(orient="records"):
        policy = duetto.simulate(instance, str(record["policy"]))
        assert policy.metrics is not None
        assert record["jct_avg"] == pytest.approx(policy.metrics["jct_avg"])
        assert len(record["job_jct"]) == 20


def test_jobs_frame_of_a_simulation_and_of_a_solve() -> None:
    instance = duetto.generate_instance(8, nodes=1, gpus_per_node=4, seed=3)
    result = duetto.solve(instance, solver="cpsat", time_limit=30)
    policy = duetto.simulate(instance, "sjf-bsbf", slot=result.schedule.slot)
    frame = policy.jobs_frame()
    assert list(frame.columns) == list(JOB_COLUMNS) and list(frame["job"]) == [j.id for j in instance.jobs]
    assert frame.attrs["valid"] is True
    metrics = policy.metrics
    assert metrics is not None
    assert frame["jct"].mean() == pytest.approx(metrics["jct_avg"])
    assert frame["queueing"].mean() == pytest.approx(metrics["queueing_avg"])
    assert frame["completion"].max() - frame["arrival"].min() == pytest.approx(metrics["makespan"])
    assert int(frame["sharing_benefit"].notna().sum()) == metrics["shared_jobs"]
    assert (frame["running"] > 0).all() and (frame["gpus"].map(len) == frame["num_gpus"]).all()
    solved = result.jobs_frame(instance)
    assert solved["jct"].sum() == pytest.approx(result.objective)
    assert (solved["segments"] == 1).all()  # the oracle is non-preemptive
    pd.testing.assert_frame_equal(solved, duetto.jobs_frame(instance, result.schedule))
    empty = duetto.Result(duetto.SolveStatus.UNKNOWN, float("nan"), float("nan"), None, "cpsat")
    with pytest.raises(duetto.DuettoInputError, match="without a schedule"):
        empty.jobs_frame(instance)


def test_a_study_runs_from_a_plain_script_without_a_main_guard(tmp_path: Path) -> None:
    # by default the tasks run in the calling process: no pool re-imports (and re-runs) the script
    script = tmp_path / "study.py"
    script.write_text(
        "import duetto\n"
        "rows = duetto.scale_study(solvers=(), policies='fifo', policy_sizes=8, seeds=2)\n"
        "print('rows', len(rows), bool(rows['validated'].all()))\n",
        encoding="utf-8",
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["rows 2 True"]
