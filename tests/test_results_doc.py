"""Issue 15 item 6: results tables are generated from stored study outputs with one command, and the
small variant in docs/results.md is recomputed here: its numbers must equal the document's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.replay import ReplayStudy, run_replay
from benchmarks.results_doc import SMALL_LIMIT, SMALL_POLICIES, SMALL_WORKLOAD, TABLES, document_table, render_replay
from duetto.cli import app
from formulation.paths import shared_data_dir

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "docs" / "results.md"
WORKLOAD = shared_data_dir() / SMALL_WORKLOAD
needs_data = pytest.mark.skipif(not WORKLOAD.is_file(), reason="shared Pollux data not found beside the repository")


@pytest.fixture(scope="module")
def small_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("results")
    study = ReplayStudy(trace="pollux", paths=(str(WORKLOAD),), policies=SMALL_POLICIES, limit=SMALL_LIMIT)
    run_replay(study, results / "table3-small", workers=1, progress=False, figures=False)
    return results


@needs_data
def test_the_documents_small_table_equals_what_the_code_computes(small_results: Path) -> None:
    printed = document_table(DOCUMENT.read_text(encoding="utf-8"), "table3-small")
    assert printed is not None, "docs/results.md lost its generated small table"
    assert render_replay(small_results / "table3-small", SMALL_POLICIES) == printed, (
        "the code's numbers moved: regenerate with `duetto results` (see docs/results.md)"
    )


@needs_data
def test_one_command_regenerates_and_check_finds_stale_tables(small_results: Path, tmp_path: Path) -> None:
    document = tmp_path / "results.md"
    shutil.copy(DOCUMENT, document)
    text = document.read_text(encoding="utf-8")
    head, marker, tail = text.rpartition("| Average JCT | fifo |")  # corrupt a row of the small table
    stale = head + marker + " 99.99 |" + tail
    document.write_text(stale, encoding="utf-8")
    arguments = ["results", "--results", str(small_results), "--doc", str(document)]
    checked = CliRunner().invoke(app, [*arguments, "--check"])
    assert checked.exit_code == 1 and "stale" in checked.output
    assert document.read_text(encoding="utf-8") == stale  # --check changes nothing
    rewritten = CliRunner().invoke(app, arguments)
    assert rewritten.exit_code == 0, rewritten.output
    # table3's stored output is not in this results folder: said so, with the command that writes it
    assert "table3: no stored output" in " ".join(rewritten.output.split())
    regenerated = document.read_text(encoding="utf-8")
    assert document_table(regenerated, "table3-small") == document_table(text, "table3-small")
    assert CliRunner().invoke(app, [*arguments, "--check"]).exit_code == 0


def test_every_generated_table_has_its_markers_and_command() -> None:
    text = DOCUMENT.read_text(encoding="utf-8")
    for table in TABLES:
        assert document_table(text, table.name) is not None, table.name
        assert table.command.startswith("duetto ") and f"results/{table.folder}" in table.command
