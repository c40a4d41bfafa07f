"""First use as documented: the README's commands and install section, and a contributing guide for
outside contributors that matches what CI runs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _ci_commands() -> list[str]:
    """The lint and test commands of ``.ci/run`` (everything after the install)."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if re.match(r"^(ruff|mypy|python -m pytest)", line.strip())]


def test_the_contributing_guide_replaces_the_internal_note() -> None:
    assert not (ROOT / "docs" / "CONTRIBUTING-helpers.md").exists()
    guide = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    # what CI runs is what the guide asks for, in the same words
    commands = _ci_commands()
    assert commands == ["ruff check .", "ruff format --check .", "mypy", "python -m pytest"]
    assert " && ".join(commands) in guide
    assert 'pip install -e ".[dev]"' in guide and "DUETTO_SHARED_DATA" in guide
    # no machine paths or working notes of the project's own sessions in what users read
    for path in (ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "examples" / "README.md"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"/work/|NOTES-[a-z]+\.md|the lead ", text), path.name
    assert "[`CONTRIBUTING.md`](CONTRIBUTING.md)" in README


def test_the_readme_keeps_its_two_commands_and_documents_each_extra() -> None:
    first = README.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert first[0].startswith(
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev]" && duetto demo'
    )
    assert first[1].startswith(". .venv/bin/activate && python -m pytest")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    install = README.split("## Install", 1)[1].split("\n## ", 1)[0]
    for extra in extras:
        assert f'pip install -e ".[{extra}]"' in install or f'".[{extra}]"' in install, extra
    # the measured core install is reported: packages, size, time
    row = next(line for line in install.splitlines() if line.startswith("| core"))
    packages, size, seconds = (cell.strip() for cell in row.strip("|").split("|")[1:])
    assert int(packages) > 0 and size.endswith(" MB") and seconds.endswith(" s")


def test_every_public_name_is_documented() -> None:
    import duetto

    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [name for name in duetto.__all__ if name != "__version__" and f"`{name}" not in api]
    assert missing == []
    for name in ("gap_study", "scale_study", "replay", "jobs_frame"):
        function = getattr(duetto, name)
        assert "Returns" in (function.__doc__ or ""), name  # numpy-style docstring with its return value
