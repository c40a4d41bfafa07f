"""The public API: ``import duetto`` gives every public name, lazily, and the documented flow works."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import duetto


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
