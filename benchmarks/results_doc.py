"""Results tables that cannot go stale: ``docs/results.md``'s tables generated from stored study outputs.

Each generated table sits in the document between two markers::

    <!-- generated: NAME (duetto results) -->
    | ... the table ... |
    <!-- end: NAME -->

and :data:`TABLES` says, per ``NAME``, which study output folder (under ``results/``) it is rendered
from, the command that produces that folder, and how it is rendered. ``duetto results`` rewrites every
block whose folder is there (``--check``: changes nothing, exits 1 naming each stale table), so the
numbers in the document are the stored outputs' numbers, recomputed by the code of the day.

A *small* variant of a table (``table3-small``: one workload, 40 jobs) is in the document too, and
the test suite reruns its study and checks that the rendered numbers equal the document's
(``tests/test_results_doc.py``): a code change that moves the numbers fails CI until the document is
regenerated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchmarks.runner import RowStore
from formulation.errors import DuettoInputError
from formulation.io import write_text_atomic

TABLE3_POLICIES = ("fifo", "sjf", "tiresias", "sjf-ffs", "sjf-bsbf")
SMALL_POLICIES = ("fifo", "sjf", "sjf-bsbf")
SMALL_WORKLOAD = "pollux/workloads-1.5/workload-1.csv"
SMALL_LIMIT = 40


def _cell(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:.2f}"


def replay_rows(folder: Path) -> pd.DataFrame:
    """The stored rows of a replay study (``rows.jsonl``); a clear error if there are none."""
    path = folder / "rows.jsonl"
    if not path.is_file():
        raise DuettoInputError("no stored study rows (rows.jsonl): run the study first", source=str(folder))
    frame = RowStore(path).frame()
    if frame.empty:
        raise DuettoInputError("the study stored no rows", source=str(path))
    return frame


def render_replay(folder: Path, policies: Sequence[str], variant: str = "default") -> str:
    """The paper-shape table (:func:`benchmarks.replay.paper_table`, jobs of all files pooled) of a
    replay study's stored rows, as markdown: one row per (metric, policy) in ``policies`` order."""
    from benchmarks.replay import paper_table

    frame = replay_rows(folder)
    frame = frame[(frame["interference"] == variant) & frame["policy"].isin(policies)]
    missing = [p for p in policies if p not in set(frame["policy"])]
    if missing:
        raise DuettoInputError(f"no stored rows for {', '.join(missing)} ({variant})", source=str(folder))
    order = {policy: position for position, policy in enumerate(policies)}
    frame = frame.sort_values("policy", key=lambda column: column.map(order), kind="stable")
    table = paper_table(frame).reset_index()
    lines = ["| metric (hours) | policy | All | Large | Small |", "|---|---|---|---|---|"]
    for record in table.to_dict(orient="records"):
        cells = [_cell(float(record[c])) for c in ("All", "Large", "Small")]
        lines.append(f"| {record['metric']} | {record['policy']} | {' | '.join(cells)} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class DocTable:
    """One generated table: where its study output is, the command that writes it, how to render it."""

    name: str
    folder: str  # under the results folder
    command: str
    render: Callable[[Path], str] = field(repr=False)


TABLES: tuple[DocTable, ...] = (
    DocTable(
        "table3",
        "table3",
        "duetto replay pollux ../shared/data/pollux/workloads-1.5/workload-*.csv "
        + " ".join(f"--policy {p}" for p in TABLE3_POLICIES)
        + " --out results/table3",
        lambda folder: render_replay(folder, TABLE3_POLICIES),
    ),
    DocTable(
        "table3-small",
        "table3-small",
        f"duetto replay pollux ../shared/data/{SMALL_WORKLOAD} --limit {SMALL_LIMIT} "
        + " ".join(f"--policy {p}" for p in SMALL_POLICIES)
        + " --out results/table3-small",
        lambda folder: render_replay(folder, SMALL_POLICIES),
    ),
)


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated: {re.escape(name)} \(duetto results\) -->\n)(.*?)(\n<!-- end: {re.escape(name)} -->)",
        re.DOTALL,
    )


def document_table(text: str, name: str) -> str | None:
    """The block of table ``name`` in a document's text, or ``None`` if it has no such markers."""
    match = _pattern(name).search(text)
    return match.group(2) if match else None


@dataclass
class DocUpdate:
    """What :func:`update_document` found: tables rewritten (or stale, with ``check``), already current,
    and not generated (no stored output: the command that writes it)."""

    changed: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)


def _replacement(body: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return match.group(1) + body + match.group(3)

    return replace


def update_document(
    document: str | Path, results: str | Path, *, check: bool = False, tables: Sequence[DocTable] = TABLES
) -> DocUpdate:
    """Render every table of ``tables`` that has markers in ``document`` and a stored output under
    ``results``; write the document back unless ``check`` (then only report what is stale)."""
    path = Path(document)
    if not path.is_file():
        raise DuettoInputError("document not found", source=str(path))
    text = original = path.read_text(encoding="utf-8")
    update = DocUpdate()
    for table in tables:
        current = document_table(text, table.name)
        if current is None:
            continue
        folder = Path(results) / table.folder
        if not (folder / "rows.jsonl").is_file():
            update.missing[table.name] = table.command
            continue
        rendered = table.render(folder)
        if rendered == current:
            update.current.append(table.name)
            continue
        update.changed.append(table.name)
        text = _pattern(table.name).sub(_replacement(rendered), text)
    if not check and text != original:
        write_text_atomic(path, text)
    return update
