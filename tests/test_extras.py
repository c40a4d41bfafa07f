"""The lean core install and its extras (pyproject ``[project.optional-dependencies]``).

Absence of an extra is simulated for real: the command runs in a fresh interpreter whose
``sys.meta_path`` starts with a finder that refuses the extra's packages, so ``import ray`` fails there
exactly as it does where Ray is not installed (``ModuleNotFoundError``), and so does
``importlib.util.find_spec``. Nothing of duetto is patched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from formulation.extras import EXTRAS, MissingExtraError, duetto_extra_missing, has_extra, require_extra
from formulation.paths import shared_data_dir

ROOT = Path(__file__).resolve().parent.parent
DATA = shared_data_dir()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not available")
HEAVY = ("ray", "pyarrow", "sklearn", "jsonschema")

BLOCKER = '''
import os, sys
_BLOCKED = {name for name in os.environ.get("DUETTO_TEST_BLOCK_IMPORTS", "").split(",") if name}


class _NotInstalled:
    """Refuses the blocked top-level packages (and their submodules), as a missing install does."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
'''


@pytest.fixture
def without(tmp_path: Path):
    """``run(blocked, *args)``: ``python -m duetto *args`` (or ``-c CODE``) in an interpreter where the
    ``blocked`` packages cannot be imported; returns the completed process."""
    site = tmp_path / "site-block"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")

    def run(blocked: tuple[str, ...], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT), env.get("PYTHONPATH", "")])
        env["DUETTO_TEST_BLOCK_IMPORTS"] = ",".join(blocked)
        env["DUETTO_SHARED_DATA"] = str(DATA)
        command = [sys.executable, *args] if args[0] == "-c" else [sys.executable, "-m", "duetto", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout)

    return run


def _one_line_error(run: subprocess.CompletedProcess[str], extra: str) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr and lines[0].startswith("error:")
    assert f"pip install 'duetto[{extra}]'" in lines[0]
    return lines[0]


def test_the_blocker_really_hides_a_package(without) -> None:
    code = "import importlib.util, sys\ntry:\n import ray\nexcept ModuleNotFoundError as e: print('missing', e.name)\n"
    code += "print(importlib.util.find_spec('json') is not None)"
    run = without(("ray",), "-c", code)
    assert run.stdout.split() == ["missing", "ray", "True"], run.stderr


def test_core_dependencies_leave_the_heavy_libraries_to_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def names(requirements: list[str]) -> set[str]:
        return {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip() for r in requirements}

    core = names(project["dependencies"])
    assert core.isdisjoint({"ray", "pyarrow", "scikit-learn", "jsonschema"}), core
    extras = project["optional-dependencies"]
    assert {"ray", "parquet", "predictor", "all", "dev"} <= set(extras)
    for extra, (_, distribution) in EXTRAS.items():  # the hint names an extra that installs the library
        assert distribution.split("[")[0] in names(extras[extra]), extra
    assert extras["all"] == ["duetto[ray,parquet,predictor,fast]"]  # fast: numba, the compiled lane pricing
    assert "duetto[all]" in extras["dev"] and "jsonschema" in names(extras["dev"])  # the tests need all of it


def test_the_error_names_the_extra_and_the_feature() -> None:
    error = duetto_extra_missing("parquet", "Parquet output")
    assert isinstance(error, MissingExtraError)
    assert str(error) == "Parquet output needs pyarrow, which is not installed: pip install 'duetto[parquet]'"
    with pytest.raises(KeyError, match="unknown extra"):
        duetto_extra_missing("gpu", "x")
    assert has_extra("ray") and has_extra("parquet") and has_extra("predictor")  # the dev install has all
    require_extra("ray", "anything")  # installed: no error


def test_every_module_imports_without_any_extra(without) -> None:
    """No module imports an extra at import time: the core install can load all of duetto."""
    code = (
        "import importlib, pkgutil, sys\n"
        "names = []\n"
        "for package in ('formulation', 'solvers', 'heuristics', 'cluster_runtime', 'benchmarks', 'duetto'):\n"
        "    module = importlib.import_module(package)\n"
        "    names += [package] + [m.name for m in pkgutil.walk_packages(module.__path__, package + '.')]\n"
        # solvers.cpsat loads OR-Tools, which must not share a process with highspy (loaded by nothing
        # else here, but kept out to be safe); __main__ modules run a command
        "names = [n for n in names if not n.endswith('__main__') and n != 'solvers.cpsat']\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        f"print(len(names), [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    run = without(HEAVY, "-c", code)
    assert run.returncode == 0, run.stderr
    count, loaded = run.stdout.split(maxsplit=1)
    assert int(count) > 40 and loaded.strip() == "[]"


def test_the_ray_backend_without_ray_says_which_extra(without, tmp_path: Path) -> None:
    state = tmp_path / "state"
    run = without(("ray",), "daemon", "--backend", "ray", "--fake-gpus", "1x2", "--state", str(state))
    assert "Ray backend" in _one_line_error(run, "ray")
    assert not state.exists()  # refused before anything was started or written


def test_a_study_on_ray_without_ray_says_which_extra(without, tmp_path: Path) -> None:
    out = tmp_path / "gap"
    args = ["gap", "--sizes", "2", "--cluster", "1x2", "--seeds", "1", "--arrivals", "zero", "--policy", "fifo"]
    run = without(("ray",), *args, "--ray-address", "local", "--out", str(out), "--no-progress", "--no-figures")
    assert "--ray-address" in _one_line_error(run, "ray")
    assert not (out / "rows.jsonl").exists()  # no task ran


def test_a_study_without_pyarrow_writes_csv_and_says_how_to_get_parquet(without, tmp_path: Path) -> None:
    out = tmp_path / "gap"
    args = ["gap", "--sizes", "2", "--cluster", "1x2", "--seeds", "1", "--arrivals", "zero", "--policy", "fifo"]
    run = without(("pyarrow",), *args, "--workers", "1", "--out", str(out), "--no-progress", "--no-figures")
    assert run.returncode == 0, run.stdout + run.stderr
    notes = [line for line in run.stderr.splitlines() if "parquet" in line]
    assert notes == [
        "note: gap.parquet not written: Parquet output needs pyarrow, which is not installed: "
        "pip install 'duetto[parquet]'"
    ]
    assert not (out / "gap.parquet").exists()
    frame = pd.read_csv(out / "gap.csv")
    assert set(frame["method"]) == {"oracle:cpsat", "fifo"} and frame["validated"].all()


@needs_data
def test_fitting_the_predictor_without_scikit_learn_says_which_extra(without, tmp_path: Path) -> None:
    run = without(("sklearn",), "predictor-study", "--seeds", "1", "--out", str(tmp_path / "p"))
    assert "interference predictor" in _one_line_error(run, "predictor")
    trace = DATA / "gavel" / "msr_seed0" / "e13805.trace"
    args = ["replay", "gavel", str(trace), "--limit", "10", "--interference", "predicted", "--policy", "fifo"]
    run = without(("sklearn",), *args, "--out", str(tmp_path / "r"), "--no-progress")
    _one_line_error(run, "predictor")


def test_the_demo_runs_on_the_core_install(without) -> None:
    """The README's first command on a core install: no extra is needed to solve, simulate, validate."""
    code = (
        "import sys, duetto\n"
        "instance = duetto.generate_instance(5, nodes=1, gpus_per_node=2, seed=1)\n"
        "result = duetto.solve(instance, solver='cpsat', time_limit=30)\n"
        "policy = duetto.simulate(instance, 'sjf-bsbf', slot=result.schedule.slot)\n"
        "assert duetto.validate(instance, result.schedule).ok and policy.report.ok\n"
        f"print(result.status.value, policy.metrics['total_jct'] >= result.objective - 1e-6, "
        f"[m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    run = without(HEAVY, "-c", code)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "optimal True []"
