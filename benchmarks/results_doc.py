"""Results tables that cannot go stale: ``docs/results.md``'s tables generated from stored study outputs.

Each generated table sits in the document between two markers::

    <!-- generated: NAME (duetto results) -->
    | ... the table ... |
    <!-- end: NAME -->

and :data:`TABLES` says, per ``NAME``, which study output folder (under ``results/``) it is rendered
from, the command that produces that folder, and how it is rendered. ``duetto results`` rewrites every
block whose folder is there (``--check``: changes nothing, exits 1 naming each stale table), so the
numbers in the document are the stored outputs' numbers, recomputed by the code of the day. The stored
outputs a table reads (``rows.jsonl``, or the predictor study's CSV files) are committed under
``results/``; the test suite checks that every table of the document equals its stored output.

Tables:

* ``table3`` / ``table3-restart``: trace replay in SJF-BSBF's Table III shape (:func:`render_replay`,
  :func:`render_restart`);
* ``fig6b``: the interference sweep (:func:`render_sweep`);
* ``muri``: Muri's traces, one row per trace (:func:`render_muri`);
* ``gap`` / ``gap-by-size``: the optimality-gap study (:func:`render_gap`, :func:`render_gap_by_size`);
  ``gap-8gpu`` / ``gap-8gpu-by-size``: the same at 12-32 jobs on one 8-GPU node, with ``bnp``;
* ``predictor-rmse`` / ``predictor-decisions``: the interference predictor study
  (:func:`render_predictor_rmse`, :func:`render_predictor_decisions`).

Each has a *small* variant (``<name>-small``, listed in :data:`SMALL_TABLES`): a study of a few seconds
whose command the test suite reruns, requiring the rendered numbers to equal the document's
(``tests/test_results_doc.py``): a code change that moves the numbers fails CI until the document is
regenerated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.runner import RowStore
from formulation.errors import DuettoInputError
from formulation.io import write_text_atomic

HOUR = 3600.0

TABLE3_POLICIES = ("fifo", "sjf", "tiresias", "sjf-ffs", "sjf-bsbf")
SMALL_POLICIES = ("fifo", "sjf", "sjf-bsbf")
SMALL_WORKLOAD = "pollux/workloads-1.5/workload-1.csv"
SMALL_LIMIT = 40
POLLUX_ALL = "../shared/data/pollux/workloads-1.5/workload-*.csv"
#: the interference sweep: ξ values and the two policies compared (the second against the first)
SWEEP_XI = (1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0)
SWEEP_SMALL_XI = (1.0, 1.5, 2.0)
SWEEP_POLICIES = ("sjf-ffs", "sjf-bsbf")
RESTART_COSTS = (0.0, 60.0, 300.0)
#: Muri's comparisons: (baseline, Muri) with durations known, then unknown
MURI_PAIRS = (("srsf", "muri-s"), ("tiresias", "muri-l"))
MURI_POLICIES = tuple(p for pair in MURI_PAIRS for p in pair)
MURI_TRACES = ("trace1", "trace1_pr", "trace2", "trace2_pr", "trace3", "trace3_pr", "trace4", "trace4_pr")
MURI_SMALL_TRACES = ("trace1", "trace3")
MURI_SMALL_LIMIT = 60
GAP_SMALL_POLICIES = ("fifo", "sjf", "sjf-bsbf", "sjf-bsbf-lookahead")
PREDICTOR_TRACE = "gavel/msr_seed0/e13805.trace"
QUIET = "--no-progress --no-figures"


def _cell(value: float, digits: int = 2) -> str:
    return "–" if not math.isfinite(value) else f"{value:.{digits}f}"


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _header(columns: Sequence[str]) -> list[str]:
    return [_row(columns), "|" + "---|" * len(columns)]


def replay_rows(folder: Path) -> pd.DataFrame:
    """The stored rows of a replay study (``rows.jsonl``); a clear error if there are none."""
    path = folder / "rows.jsonl"
    if not path.is_file():
        raise DuettoInputError("no stored study rows (rows.jsonl): run the study first", source=str(folder))
    frame = RowStore(path).frame()
    if frame.empty:
        raise DuettoInputError("the study stored no rows", source=str(path))
    return frame


def _require(frame: pd.DataFrame, column: str, wanted: Sequence[str], folder: Path, what: str = "") -> None:
    missing = [w for w in wanted if w not in set(frame[column])]
    if missing:
        raise DuettoInputError(f"no stored rows for {', '.join(missing)}{what}", source=str(folder))


def render_replay(folder: Path, policies: Sequence[str], variant: str = "default") -> str:
    """The paper-shape table (:func:`benchmarks.replay.paper_table`, jobs of all files pooled) of a
    replay study's stored rows, as markdown: one row per (metric, policy) in ``policies`` order."""
    from benchmarks.replay import paper_table

    frame = replay_rows(folder)
    frame = frame[(frame["interference"] == variant) & frame["policy"].isin(policies)]
    _require(frame, "policy", policies, folder, f" ({variant})")
    order = {policy: position for position, policy in enumerate(policies)}
    frame = frame.sort_values("policy", key=lambda column: column.map(order), kind="stable")
    table = paper_table(frame).reset_index()
    lines = _header(["metric (hours)", "policy", "All", "Large", "Small"])
    for record in table.to_dict(orient="records"):
        cells = [_cell(float(record[c])) for c in ("All", "Large", "Small")]
        lines.append(f"| {record['metric']} | {record['policy']} | {' | '.join(cells)} |")
    return "\n".join(lines)


def render_restart(folders: Sequence[Path], policy: str = "tiresias") -> str:
    """Restart-cost sensitivity: ``policy``'s pooled average JCT (all / large / small, hours) and its
    preemptions per file, one row per stored restart cost of the replay studies in ``folders``."""
    from benchmarks.replay import _pooled

    frames = [replay_rows(folder) for folder in folders]
    frame = pd.concat(frames, ignore_index=True)
    frame = frame[(frame["policy"] == policy) & (frame["interference"] == "default")]
    if frame.empty:
        raise DuettoInputError(f"no stored rows for {policy}", source=", ".join(str(f) for f in folders))
    lines = _header(
        [
            "restart cost (s)",
            f"{policy} avg JCT (h)",
            "large (h)",
            "small (h)",
            "preemptions per workload",
        ]
    )
    for cost in sorted(float(c) for c in frame["restart_cost"].unique()):
        rows = frame[frame["restart_cost"].astype(float) == cost]
        hours = [_pooled(rows, c) / HOUR for c in ("jct_avg", "large_jct_avg", "small_jct_avg")]
        lines.append(_row([f"{cost:g}", *(_cell(h) for h in hours), _cell(float(rows["preemptions"].mean()))]))
    return "\n".join(lines)


def render_sweep(folder: Path, policies: Sequence[str] = SWEEP_POLICIES) -> str:
    """The interference sweep (SJF-BSBF Fig. 6b shape): per constant ξ of a replay study, each policy's
    pooled average JCT (hours), the second policy against the first (%), and jobs that shared a GPU
    (mean over files)."""
    from benchmarks.replay import _pooled

    frame = replay_rows(folder)
    frame = frame[frame["interference"].astype(str).str.startswith("constant:") & frame["policy"].isin(policies)]
    _require(frame, "policy", policies, folder)
    frame = frame.assign(xi=[float(str(v).split(":", 1)[1]) for v in frame["interference"]])
    base, other = policies[0], policies[1]
    short = {p: p.upper().removeprefix("SJF-") for p in policies}
    lines = _header(
        [
            "ξ",
            f"{base} avg JCT (h)",
            f"{other} avg JCT (h)",
            f"{short[other]} vs {short[base]} (%)",
            f"jobs shared, {short[base]}",
            f"jobs shared, {short[other]}",
        ]
    )
    for xi in sorted(float(x) for x in frame["xi"].unique()):
        rows = frame[frame["xi"] == xi]
        by = {p: rows[rows["policy"] == p] for p in policies}
        if any(r.empty for r in by.values()):
            raise DuettoInputError(f"ξ = {xi:g}: not every policy has stored rows", source=str(folder))
        jct = {p: _pooled(r, "jct_avg") / HOUR for p, r in by.items()}
        shared = {p: float(r["shared_jobs"].astype(float).mean()) for p, r in by.items()}
        change = 100.0 * (jct[other] - jct[base]) / jct[base]
        lines.append(
            _row(
                [
                    f"{xi:.2f}",
                    _cell(jct[base]),
                    _cell(jct[other]),
                    _cell(change),
                    _cell(shared[base]),
                    _cell(shared[other]),
                ]
            )
        )
    return "\n".join(lines)


def _muri_label(file: str) -> str:
    stem = Path(file).stem
    name, pr, _ = stem.partition("_pr")
    return name.replace("trace", "trace ") + ("'" if pr else "")


def render_muri(folder: Path, pairs: Sequence[tuple[str, str]] = MURI_PAIRS) -> str:
    """Muri's Fig. 9-10 shape: one row per trace file of a replay study; per metric (average JCT,
    makespan, p99 JCT) each (baseline, Muri) pair in hours and the speed-up baseline / Muri."""
    frame = replay_rows(folder)
    frame = frame[frame["interference"] == "default"]
    policies = [p for pair in pairs for p in pair]
    _require(frame, "policy", policies, folder)
    metrics = (("avg JCT", "jct_avg"), ("makespan", "makespan"), ("p99 JCT", "jct_p99"))
    columns = ["trace", "jobs"]
    for label, _ in metrics:
        for base, muri in pairs:
            suffix = muri.removeprefix("muri-").upper()
            columns += [f"{label}: {base} / {muri} (h)", f"{label} ×{suffix}"]
    lines = _header([*columns, "all valid"])
    for file, rows in sorted(frame.groupby("file"), key=lambda item: str(item[0])):
        by = {str(r["policy"]): r for r in rows.to_dict(orient="records")}
        missing = [p for p in policies if p not in by]
        if missing:
            raise DuettoInputError(f"{file}: no stored rows for {', '.join(missing)}", source=str(folder))
        cells: list[object] = [_muri_label(str(file)), int(by[policies[0]]["jobs"])]
        for _, column in metrics:
            for base, muri in pairs:
                b, m = float(by[base][column]), float(by[muri][column])
                cells += [f"{b / HOUR:.0f} / {m / HOUR:.0f}", _cell(b / m if m > 0 else math.nan)]
        cells.append(all(bool(by[p]["validated"]) for p in policies))
        lines.append(_row(cells))
    return "\n".join(lines)


def gap_rows(folder: Path) -> pd.DataFrame:
    """The stored rows of a gap study with the gap columns (:func:`benchmarks.gap.add_gaps`)."""
    from benchmarks.gap import add_gaps

    return add_gaps(replay_rows(folder))


def _method_order(summary: pd.DataFrame) -> list[str]:
    """Oracle methods first, then by mean gap over the proven instances (no gap: last), then name."""

    def key(record: dict[Any, Any]) -> tuple[int, float, str]:
        mean = float(str(record["gap_mean"]))
        name = str(record["method"])
        return (0 if name.startswith("oracle:") else 1, mean if math.isfinite(mean) else math.inf, name)

    return [str(r["method"]) for r in sorted(summary.to_dict(orient="records"), key=key)]


def _percent(value: object, digits: int) -> str:
    return _cell(100.0 * float(str(value)), digits)


def render_gap(folder: Path) -> str:
    """The gap study's summary: per solver, instances proven optimal (in all and per size); per method,
    the gap on total JCT against the proven optimum (median / mean / p95 / max %, the proven instances
    only), and why a method has no gap (its ``note``)."""
    from benchmarks.gap import summarize

    frame = gap_rows(folder)
    summary = summarize(frame, by=("method",))
    lines = []
    oracle = frame[frame["method_kind"] == "oracle"]
    for method, rows in oracle.groupby("method", sort=True):
        proven = rows["proven_optimal"].astype(bool) & rows["validated"].astype(bool)
        per_size = ", ".join(
            f"{int(proven[rows['n'] == n].sum())}/{int((rows['n'] == n).sum())} at n = {n}"
            for n in sorted(rows["n"].unique())
        )
        lines.append(f"{method} proved optimality on {int(proven.sum())} of {len(rows)} instances ({per_size}).")
        unproven = rows[~proven.to_numpy()]
        gaps = unproven["gap"].astype(float).dropna()
        if len(gaps):
            lines.append(
                f"On the {len(unproven)} instances without a proof its incumbent is {_percent(gaps.min(), 1)}-"
                f"{_percent(gaps.max(), 1)} % above the best bound (median {_percent(gaps.median(), 1)} %)."
            )
    lines.append("")
    lines += _header(
        [
            "method",
            "proven instances",
            "median gap (%)",
            "mean (%)",
            "p95 (%)",
            "max (%)",
            "unproven: median gap to bound (%)",
        ]
    )
    records = {str(r["method"]): r for r in summary.to_dict(orient="records")}
    notes = []
    for method in _method_order(summary):
        record = records[method]
        stats = [_percent(record[f"gap_{s}"], 1) for s in ("median", "mean", "p95", "max")]
        lines.append(_row([method, int(record["proven"]), *stats, _percent(record["bound_gap_median"], 1)]))
        if record["note"]:
            notes.append(f"{method}: {record['note']}")
    if notes:
        lines += ["", *(f"* {note}" for note in notes)]
    return "\n".join(lines)


def render_gap_by_size(folder: Path) -> str:
    """The gap study per method and size: median / p95 / max gap (%) over the proven instances."""
    from benchmarks.gap import summarize

    frame = gap_rows(folder)
    summary = summarize(frame)
    order = [m for m in _method_order(summarize(frame, by=("method",))) if not m.startswith("oracle:")]
    sizes = sorted(int(n) for n in summary["n"].unique())
    lines = _header(["method", *(f"n = {n}" for n in sizes)])
    for method in order:
        rows = summary[summary["method"] == method]
        cells = []
        for n in sizes:
            match = rows[rows["n"] == n]
            if match.empty or not int(match["proven"].iloc[0]):
                cells.append("–")
                continue
            record = match.iloc[0]
            digits = {"gap_median": 1, "gap_p95": 0, "gap_max": 0}
            cells.append(" / ".join(_percent(record[column], d) for column, d in digits.items()))
        lines.append(_row([method, *cells]))
    return "\n".join(lines)


def _csv(folder: Path, name: str) -> pd.DataFrame:
    path = folder / name
    if not path.is_file():
        raise DuettoInputError(f"no stored {name}: run the study first", source=str(folder))
    return pd.read_csv(path)


def render_predictor_rmse(folder: Path) -> str:
    """Held-out RMSE of predicted ξ per estimator and split (``rmse_summary.csv``)."""
    summary = _csv(folder, "rmse_summary.csv")
    first = summary.iloc[0]
    lines = [
        f"{int(first['samples']):,} measured ordered pairs ({int(first['unordered_pairs'])} unordered), "
        f"{int(first['seeds'])} seeded split(s):",
        "",
    ]
    columns = ("test_samples", "rmse_mean", "rmse_std", "mae_mean", "rmse_v100_mean", "rmse_baseline_mean")
    lines += _header(["estimator", "split", "test samples (mean)", *columns[1:]])
    for record in summary.to_dict(orient="records"):
        lines.append(_row([record["estimator"], record["split"], *(_cell(float(record[c]), 3) for c in columns)]))
    return "\n".join(lines)


def render_predictor_decisions(folder: Path) -> str:
    """What each belief about ξ does to the policy (``decisions.csv``; truth = measured ξ)."""
    decisions = _csv(folder, "decisions.csv")
    first = decisions.iloc[0]
    measured = decisions[decisions["belief"] == "measured"]
    reference = float(measured["jct_avg"].iloc[0]) if not measured.empty else math.nan
    lines = [
        f"{first['policy']} on {first['trace']} ({int(first['jobs'])} jobs, {int(first['gpus'])} GPUs):",
        "",
    ]
    lines += _header(
        [
            "belief",
            "valid",
            "avg JCT (h)",
            "vs measured (%)",
            "sharing benefit mean",
            "median",
            "jobs shared",
            "decisions as measured",
            "RMSE of believed ξ on shared pairs",
        ]
    )
    for record in decisions.to_dict(orient="records"):
        jct = float(record["jct_avg"])
        lines.append(
            _row(
                [
                    record["belief"],
                    bool(record["validated"]),
                    _cell(jct / HOUR, 3),
                    _cell(100.0 * (jct - reference) / reference, 3),
                    _cell(float(record["sharing_benefit"]), 3),
                    _cell(float(record["sharing_benefit_median"]), 3),
                    int(record["shared_jobs"]),
                    _cell(float(record["decisions_same"]), 3),
                    _cell(float(record["belief_rmse_on_shared"]), 3),
                ]
            )
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class DocTable:
    """One generated table: where its study output is, the command that writes it, how to render it.

    ``sources`` are the files (relative to the results folder) the renderer reads: the table is
    rendered when all of them are stored, reported missing otherwise (they are what is committed)."""

    name: str
    folder: str  # under the results folder
    command: str
    render: Callable[[Path], str] = field(repr=False)
    sources: tuple[str, ...] = ()

    def source_files(self) -> tuple[str, ...]:
        return self.sources or (f"{self.folder}/rows.jsonl",)


def _policies(names: Sequence[str]) -> str:
    return " ".join(f"--policy {p}" for p in names)


def _sweep(values: Sequence[float]) -> str:
    return " ".join(f"--interference constant:{x:.1f}" for x in values)


def _muri_command(traces: Sequence[str], limit: int | None, out: str) -> str:
    files = " ".join(f"../shared/data/muri/{t}.csv" for t in traces)
    if limit is None:  # the full study: parallel, with its figures
        return f"duetto replay muri {files} {_policies(MURI_POLICIES)} --capacity 4 --no-bound --out results/{out}"
    return (
        f"duetto replay muri {files} --limit {limit} {_policies(MURI_POLICIES)} --capacity 4 --no-bound "
        f"--workers 1 {QUIET} --out results/{out}"
    )


#: the gap study at the sizes branch-and-price proves on one 8-GPU node (docs/results.md, section 4)
GAP_8GPU_COMMAND = (
    "duetto gap --sizes 12,16,24,32 --cluster 1x8 --arrivals zero --arrivals poisson --seeds 3 --solver bnp "
    "--time-limit 60 --workers 1 --out results/gap-8gpu"
)


def _gap_small_command() -> str:
    return (
        f"duetto gap --sizes 4 --cluster 1x4 --arrivals zero --arrivals poisson --seeds 1 "
        f"{_policies(GAP_SMALL_POLICIES)} --time-limit 30 --workers 1 {QUIET} --out results/gap-small"
    )


def _predictor_command(out: str, small: bool) -> str:
    if small:
        return (
            f"duetto predictor-study --seeds 1 --estimator tree --trace ../shared/data/{PREDICTOR_TRACE} "
            f"--nodes 1 --gpus-per-node 8 --limit 60 --no-figures --out results/{out}"
        )
    return (
        f"duetto predictor-study --seeds 10 --trace ../shared/data/{PREDICTOR_TRACE} "
        f"--nodes 4 --gpus-per-node 8 --out results/{out}"
    )


TABLES: tuple[DocTable, ...] = (
    DocTable(
        "table3",
        "table3",
        f"duetto replay pollux {POLLUX_ALL} {_policies(TABLE3_POLICIES)} --no-bound --out results/table3",
        lambda folder: render_replay(folder, TABLE3_POLICIES),
    ),
    DocTable(
        "table3-restart",
        "table3-restart",
        "for c in 60 300; do duetto replay pollux "
        f"{POLLUX_ALL} --policy tiresias --restart-cost $c --no-bound --out results/table3-restart/$c; done",
        lambda folder: render_restart([folder.parent / "table3", folder / "60", folder / "300"]),
        ("table3/rows.jsonl", "table3-restart/60/rows.jsonl", "table3-restart/300/rows.jsonl"),
    ),
    DocTable(
        "fig6b",
        "fig6b",
        f"duetto replay pollux {POLLUX_ALL} {_policies(SWEEP_POLICIES)} {_sweep(SWEEP_XI)} --no-bound "
        "--out results/fig6b",
        render_sweep,
    ),
    DocTable("muri", "muri", _muri_command(MURI_TRACES, None, "muri"), render_muri),
    DocTable(
        "gap",
        "gap",
        "duetto gap --sizes 4,6,8,10 --cluster 1x4 --cluster 2x4 --arrivals zero --arrivals poisson "
        "--seeds 3 --time-limit 30 --workers 1 --out results/gap",
        render_gap,
    ),
    DocTable(
        "gap-by-size",
        "gap",
        "duetto gap --sizes 4,6,8,10 --cluster 1x4 --cluster 2x4 --arrivals zero --arrivals poisson "
        "--seeds 3 --time-limit 30 --workers 1 --out results/gap",
        render_gap_by_size,
    ),
    DocTable("gap-8gpu", "gap-8gpu", GAP_8GPU_COMMAND, render_gap),
    DocTable("gap-8gpu-by-size", "gap-8gpu", GAP_8GPU_COMMAND, render_gap_by_size),
    DocTable(
        "predictor-rmse",
        "predictor",
        _predictor_command("predictor", small=False),
        render_predictor_rmse,
        ("predictor/rmse_summary.csv",),
    ),
    DocTable(
        "predictor-decisions",
        "predictor",
        _predictor_command("predictor", small=False),
        render_predictor_decisions,
        ("predictor/decisions.csv",),
    ),
    # --- the small variants: the test suite reruns each command and compares with the document ----------
    DocTable(
        "table3-small",
        "table3-small",
        f"duetto replay pollux ../shared/data/{SMALL_WORKLOAD} --limit {SMALL_LIMIT} "
        f"{_policies(SMALL_POLICIES)} --no-bound --workers 1 {QUIET} --out results/table3-small",
        lambda folder: render_replay(folder, SMALL_POLICIES),
    ),
    DocTable(
        "fig6b-small",
        "fig6b-small",
        f"duetto replay pollux ../shared/data/{SMALL_WORKLOAD} --limit {SMALL_LIMIT} "
        f"{_policies(SWEEP_POLICIES)} {_sweep(SWEEP_SMALL_XI)} --no-bound --workers 1 {QUIET} "
        "--out results/fig6b-small",
        render_sweep,
    ),
    DocTable("muri-small", "muri-small", _muri_command(MURI_SMALL_TRACES, MURI_SMALL_LIMIT, "muri-small"), render_muri),
    DocTable("gap-small", "gap-small", _gap_small_command(), render_gap),
    DocTable(
        "predictor-small",
        "predictor-small",
        _predictor_command("predictor-small", small=True),
        lambda folder: render_predictor_rmse(folder) + "\n\n" + render_predictor_decisions(folder),
        ("predictor-small/rmse_summary.csv", "predictor-small/decisions.csv"),
    ),
)

#: the tables whose command the test suite reruns (a few seconds each)
SMALL_TABLES: tuple[str, ...] = tuple(t.name for t in TABLES if t.name.endswith("-small"))


def doc_table(name: str) -> DocTable:
    """The :class:`DocTable` called ``name``."""
    for entry in TABLES:
        if entry.name == name:
            return entry
    raise DuettoInputError(f"no generated table '{name}'; known: {', '.join(t.name for t in TABLES)}")


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
        if not all((Path(results) / source).is_file() for source in table.source_files()):
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
