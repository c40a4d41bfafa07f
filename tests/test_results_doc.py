"""Issue 15 item 6: results tables are generated from stored study outputs with one command, every table
of docs/results.md equals what its stored output renders to today, and each table's small variant is
recomputed here by running the exact command the document prints: its numbers must equal the document's."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.results_doc import (
    SMALL_TABLES,
    TABLES,
    doc_table,
    document_table,
    update_document,
)
from duetto.cli import app
from formulation.paths import shared_data_dir

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "docs" / "results.md"
STORED = ROOT / "results"
SHARED = "../shared/data/"
needs_data = pytest.mark.skipif(
    not (shared_data_dir() / "pollux").is_dir(), reason="shared trace data not found beside the repository"
)


def run_documented(command: str, results: Path) -> None:
    """Run a table's documented ``duetto ...`` command in-process, with the shared data where the tests find
    it and ``results/`` replaced by ``results``."""
    words = shlex.split(command)
    assert words[0] == "duetto", command
    arguments = []
    for word in words[1:]:
        if word.startswith(SHARED):
            word = str(shared_data_dir() / word.removeprefix(SHARED))
        elif word.startswith("results/"):
            word = str(results / word.removeprefix("results/"))
        arguments.append(word)
    outcome = CliRunner().invoke(app, arguments)
    assert outcome.exit_code == 0, outcome.output


@pytest.fixture(scope="module")
def small_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every small table's study, run by its documented command (a few seconds each)."""
    results = tmp_path_factory.mktemp("results")
    if (shared_data_dir() / "pollux").is_dir():
        for name in SMALL_TABLES:
            run_documented(doc_table(name).command, results)
    return results


@needs_data
@pytest.mark.parametrize("name", SMALL_TABLES)
def test_the_documents_small_table_equals_what_its_command_computes(name: str, small_results: Path) -> None:
    printed = document_table(DOCUMENT.read_text(encoding="utf-8"), name)
    assert printed is not None, f"docs/results.md lost its generated table {name}"
    entry = doc_table(name)
    assert entry.render(small_results / entry.folder) == printed, (
        f"{name}: the code's numbers moved: rerun `{entry.command}` and `duetto results` (docs/results.md)"
    )


def test_every_table_of_the_document_equals_its_stored_output() -> None:
    """The committed study outputs under results/ render to exactly the document's tables: a hand-edited
    number, or a renderer change without regenerating, fails here."""
    update = update_document(DOCUMENT, STORED, check=True)
    assert update.missing == {}, f"stored outputs missing: {sorted(update.missing)}"
    assert update.changed == [], f"stale tables (run `duetto results`): {update.changed}"
    assert sorted(update.current) == sorted(t.name for t in TABLES)


def test_check_names_a_stale_table_and_changes_nothing(tmp_path: Path) -> None:
    document = tmp_path / "results.md"
    text = DOCUMENT.read_text(encoding="utf-8")
    gap = document_table(text, "gap")
    sweep = document_table(text, "fig6b")
    assert gap is not None and sweep is not None
    # one number of the gap table and one of the sweep changed by hand
    stale = text.replace(gap, gap.replace("| 0.0 |", "| 0.1 |", 1)).replace(sweep, sweep.replace("1.", "9.", 1))
    assert stale != text
    document.write_text(stale, encoding="utf-8")
    arguments = ["results", "--results", str(STORED), "--doc", str(document)]
    checked = CliRunner().invoke(app, [*arguments, "--check"])
    assert checked.exit_code == 1
    assert "gap: stale" in checked.output and "fig6b: stale" in checked.output
    assert "gap-by-size: current" in checked.output
    assert document.read_text(encoding="utf-8") == stale  # --check changes nothing
    rewritten = CliRunner().invoke(app, arguments)
    assert rewritten.exit_code == 0, rewritten.output
    assert document.read_text(encoding="utf-8") == text
    assert CliRunner().invoke(app, [*arguments, "--check"]).exit_code == 0


@needs_data
def test_one_command_regenerates_and_says_what_is_missing(small_results: Path, tmp_path: Path) -> None:
    document = tmp_path / "results.md"
    shutil.copy(DOCUMENT, document)
    text = document.read_text(encoding="utf-8")
    head, marker, tail = text.rpartition("| Average JCT | fifo |")  # corrupt a row of the small table
    stale = head + marker + " 99.99 |" + tail
    document.write_text(stale, encoding="utf-8")
    arguments = ["results", "--results", str(small_results), "--doc", str(document)]
    checked = CliRunner().invoke(app, [*arguments, "--check"])
    assert checked.exit_code == 1 and "table3-small: stale" in checked.output
    rewritten = CliRunner().invoke(app, arguments)
    assert rewritten.exit_code == 0, rewritten.output
    # the full studies' outputs are not in this results folder: said so, with the command that writes each
    said = " ".join(rewritten.output.split())
    assert "table3: no stored output" in said and "muri: no stored output" in said
    assert "duetto gap --sizes 4,6,8,10" in said
    assert document.read_text(encoding="utf-8") == text
    assert CliRunner().invoke(app, [*arguments, "--check"]).exit_code == 0


def test_every_generated_table_has_its_markers_and_its_command_printed() -> None:
    text = DOCUMENT.read_text(encoding="utf-8")
    flat = " ".join(text.replace("\\\n", " ").split())  # commands may continue lines with a backslash
    for table in TABLES:
        assert document_table(text, table.name) is not None, table.name
        assert table.command.startswith(("duetto ", "for ")) and f"results/{table.folder}" in table.command
        assert table.command in flat, f"{table.name}: the document does not print its command"
    assert {"table3-small", "fig6b-small", "muri-small", "gap-small", "predictor-small"} <= set(SMALL_TABLES)


def test_predictor_study_refuses_an_unknown_estimator_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "p"
    outcome = CliRunner().invoke(app, ["predictor-study", "--estimator", "forest", "--out", str(out)])
    assert outcome.exit_code == 2
    assert "unknown estimator 'forest'" in outcome.output and "Traceback" not in outcome.output
    assert not out.exists()  # nothing half-written
