"""duetto is a typed package (PEP 561): every package ships ``py.typed``, so a user's mypy reads the
hints of the installed wheel instead of skipping it as untyped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("formulation", "solvers", "heuristics", "cluster_runtime", "benchmarks", "duetto")


def _package_dirs() -> list[str]:
    return sorted(str(path.parent.relative_to(ROOT)) for top in PACKAGES for path in (ROOT / top).rglob("__init__.py"))


def test_every_package_of_the_source_tree_has_py_typed() -> None:
    packages = _package_dirs()
    assert len(packages) >= len(PACKAGES)
    assert [p for p in packages if not (ROOT / p / "py.typed").is_file()] == []


def test_the_wheel_ships_py_typed_and_a_users_mypy_checks_against_duettos_hints(tmp_path: Path) -> None:
    # built from a copy: setuptools leaves build/ and *.egg-info next to the sources
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for top in PACKAGES:
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(tmp_path / "wheel"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("duetto-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(site)
    assert {f"{p}/py.typed" for p in _package_dirs()} <= names
    # A user's script, checked by mypy against the unpacked wheel (outside this repository and its config).
    user = tmp_path / "user" / "script.py"
    user.parent.mkdir()
    user.write_text(
        "import duetto\n"
        "from formulation.instance import Instance\n\n"
        "instance = duetto.generate_instance(4, nodes=1, gpus_per_node=2, seed=0)\n"
        "ok: Instance = instance\n"
        "wrong: int = instance\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    mypy = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull, "script.py"],
        capture_output=True,
        text=True,
        cwd=user.parent,
        env=env,
        timeout=300,
    )
    # exactly the user's mistake: the package was analysed (not "missing library stubs or py.typed")
    assert mypy.returncode == 1, mypy.stdout + mypy.stderr
    errors = [line for line in mypy.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "script.py:6" in errors[0], mypy.stdout
    assert 'expression has type "Instance", variable has type "int"' in errors[0]
