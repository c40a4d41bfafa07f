"""duetto against Muri's own simulator on the Muri simulation traces, side by side (issue 19, item 4).

For each trace and each of the four policies both simulators share (SRSF, Tiresias, Muri-S, Muri-L), this
replays the trace in duetto with the authors' settings (the loader's defaults: C = 4, runtime from
iterations, Muri's simulator's progress rule for a simulation trace, Muri's own policy side) and, when a
copy of Muri's simulator is available, runs it on the same file with the authors' flags (their
``sim_fig9.sh`` / ``sim_fig10.sh``: ``--scheme=yarn --multi_resource 4``, the cluster spec beside the trace,
``packing_num`` 4 by default) in a subprocess, then reads its ``job.csv``. Reported per policy: average JCT
and makespan of both, their ratios, the mean absolute per-job JCT difference, and each side's wall time.

Muri's simulator is not part of duetto. Point to a folder holding its ``run_sim.py`` (Rivendile/Muri
``simulator/``) with ``--muri-simulator DIR`` or the ``MURI_SIMULATOR`` environment variable; without one
the Muri side is skipped and only duetto's numbers are printed. ``--muri-python`` chooses the
interpreter it runs under (its own environment: it imports its own modules, which must not be duetto's).

Usage::

    python -m benchmarks.muri_fidelity                                  # trace3, duetto only
    MURI_SIMULATOR=~/Muri/simulator python -m benchmarks.muri_fidelity --trace trace3 --trace trace4
    python -m benchmarks.muri_fidelity --muri-simulator DIR --muri-flag=--autopack   # a flag of theirs

docs/results.md, "Against Muri's simulator", has the table this prints.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from formulation.errors import DuettoInputError
from formulation.paths import shared_data_dir
from formulation.trace_settings import trace_policy_options
from formulation.traces import load_trace
from heuristics.simulator import simulate

#: duetto policy → Muri's simulator's ``--schedule`` (its run scripts' names for the same policy).
MURI_SCHEDULES: dict[str, str] = {
    "srsf": "shortest-gpu",
    "tiresias": "dlas-gpu",
    "muri-s": "multi-resource-blossom-same-gpu",
    "muri-l": "multi-resource-blossom-same-gpu-unaware",
}
HOUR = 3600.0


@dataclass(frozen=True)
class SideResult:
    """One simulator's outcome on one trace under one policy."""

    jct: dict[str, float]  # job id -> JCT (seconds)
    makespan: float  # last completion - first arrival (seconds)
    seconds: float  # wall time of the run

    @property
    def avg_jct(self) -> float:
        return math.fsum(self.jct.values()) / len(self.jct) if self.jct else math.nan


def muri_simulator_dir(explicit: str | Path | None = None) -> Path | None:
    """The folder of Muri's simulator (``--muri-simulator``, else ``$MURI_SIMULATOR``), or ``None``.

    Raises
    ------
    DuettoInputError
        A folder was named but holds no ``run_sim.py``.
    """
    value = explicit if explicit is not None else os.environ.get("MURI_SIMULATOR")
    if not value:
        return None
    folder = Path(value).expanduser()
    if not (folder / "run_sim.py").is_file():
        raise DuettoInputError("no run_sim.py in this folder (Rivendile/Muri simulator/)", source=str(folder))
    return folder


def read_muri_jobs(log_path: Path) -> SideResult:
    """Muri's simulator's per-job log (``<log_path>/job.csv``: ``job_id``, ``submit_time``, ``end_time``,
    ``JCT``, seconds) as a :class:`SideResult` (``seconds`` 0).

    Raises
    ------
    DuettoInputError
        The file is missing or lacks a column.
    """
    file = log_path / "job.csv"
    if not file.is_file():
        raise DuettoInputError("Muri's simulator wrote no job.csv", source=str(log_path))
    with file.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    needed = {"job_id", "submit_time", "end_time", "JCT"}
    if rows and not needed <= rows[0].keys():
        raise DuettoInputError(f"needs columns {', '.join(sorted(needed))}", source=str(file))
    jct = {row["job_id"]: float(row["JCT"]) for row in rows}
    first = min((float(row["submit_time"]) for row in rows), default=0.0)
    last = max((float(row["end_time"]) for row in rows), default=0.0)
    return SideResult(jct, last - first, 0.0)


def _head(trace: Path, limit: int, folder: Path) -> Path:
    """The ``limit`` earliest arrivals of ``trace`` (ties: file order; as ``load_trace(limit=)``) as a file."""
    with trace.open(newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        rows = sorted(enumerate(reader), key=lambda item: (float(item[1]["submit_time"]), item[0]))[:limit]
    head = folder / trace.name
    with head.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(row for _, row in sorted(rows))
    return head


def run_muri(
    simulator: Path,
    trace: Path,
    policy: str,
    python: str = sys.executable,
    flags: Sequence[str] = (),
    limit: int | None = None,
) -> SideResult:
    """Run Muri's simulator on ``trace`` (its ``limit`` earliest jobs) under ``policy`` with the authors'
    flags (plus ``flags``)."""
    cluster = trace.parent / "cluster_n8g8.csv"
    with tempfile.TemporaryDirectory(prefix="muri-sim-") as folder:
        if limit is not None:
            trace = _head(trace, limit, Path(folder))
        command = [python, "run_sim.py", f"--trace_file={trace.resolve()}", f"--schedule={MURI_SCHEDULES[policy]}"]
        command += ["--scheme=yarn", "--print", f"--log_path={folder}", "--multi_resource", "4"]
        command += [f"--cluster_spec={cluster.resolve()}"] if cluster.is_file() else []
        command += list(flags)
        start = time.perf_counter()
        # its own modules (flags, jobs, cluster ...) come from its folder, never duetto's
        done = subprocess.run(command, cwd=simulator, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise DuettoInputError(f"Muri's simulator failed on {policy}: {tail[0]}", source=str(simulator))
        result = read_muri_jobs(Path(folder))
    return SideResult(result.jct, result.makespan, seconds)


def run_duetto(trace: Path, policy: str, limit: int | None = None) -> SideResult:
    """duetto's replay of ``trace`` (its ``limit`` earliest jobs) under ``policy`` with the authors'
    settings (validated)."""
    instance = load_trace("muri", trace, limit=limit)
    start = time.perf_counter()
    result = simulate(instance, policy, policy_options=trace_policy_options(instance, policy), metrics=False)
    seconds = time.perf_counter() - start
    if result.report is not None and not result.report.ok:
        raise DuettoInputError(f"duetto's {policy} schedule is invalid", source=str(trace))
    jct = {job.id: result.completion[job.id] - job.arrival for job in instance.jobs}
    first = min(job.arrival for job in instance.jobs)
    return SideResult(jct, max(result.completion.values()) - first, seconds)


def compare(
    traces: Sequence[Path],
    policies: Sequence[str],
    simulator: Path | None,
    python: str = sys.executable,
    flags: Sequence[str] = (),
    limit: int | None = None,
) -> list[dict[str, object]]:
    """One row per (trace, policy): both sides' averages and ratios (Muri's columns ``None`` without it)."""
    rows: list[dict[str, object]] = []
    for trace in traces:
        for policy in policies:
            if policy not in MURI_SCHEDULES:
                raise DuettoInputError(f"unknown policy {policy!r}; shared: {', '.join(MURI_SCHEDULES)}")
            ours = run_duetto(trace, policy, limit)
            row: dict[str, object] = {
                "trace": trace.stem,
                "policy": policy,
                "duetto_jct_h": ours.avg_jct / HOUR,
                "duetto_makespan_h": ours.makespan / HOUR,
                "duetto_s": ours.seconds,
                "muri_jct_h": None,
                "muri_makespan_h": None,
                "jct_ratio": None,
                "makespan_ratio": None,
                "mean_abs_job_diff_h": None,
                "muri_s": None,
            }
            if simulator is not None:
                theirs = run_muri(simulator, trace, policy, python, flags, limit)
                common = ours.jct.keys() & theirs.jct.keys()
                row |= {
                    "muri_jct_h": theirs.avg_jct / HOUR,
                    "muri_makespan_h": theirs.makespan / HOUR,
                    "jct_ratio": ours.avg_jct / theirs.avg_jct,
                    "makespan_ratio": ours.makespan / theirs.makespan,
                    "mean_abs_job_diff_h": math.fsum(abs(ours.jct[j] - theirs.jct[j]) for j in common)
                    / max(1, len(common))
                    / HOUR,
                    "muri_s": theirs.seconds,
                }
            rows.append(row)
    return rows


def markdown(rows: Sequence[dict[str, object]]) -> str:
    """The rows as the table docs/results.md prints."""

    def cell(value: object, digits: int = 2) -> str:
        return "–" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    lines = [
        "| trace | policy | avg JCT (h) duetto / Muri's simulator | ratio | makespan (h) duetto / Muri's | ratio "
        "| mean per-job |ΔJCT| (h) | seconds duetto / Muri's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['trace']} | {r['policy']} | {cell(r['duetto_jct_h'])} / {cell(r['muri_jct_h'])} | "
            f"{cell(r['jct_ratio'], 3)} | {cell(r['duetto_makespan_h'], 1)} / {cell(r['muri_makespan_h'], 1)} | "
            f"{cell(r['makespan_ratio'], 3)} | {cell(r['mean_abs_job_diff_h'])} | "
            f"{cell(r['duetto_s'], 1)} / {cell(r['muri_s'], 1)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", help="trace name in the shared Muri folder or a path (repeat)")
    parser.add_argument("--policy", action="append", choices=sorted(MURI_SCHEDULES), help="default: all four")
    parser.add_argument("--muri-simulator", help="folder of Muri's run_sim.py (default: $MURI_SIMULATOR)")
    parser.add_argument("--muri-python", default=sys.executable, help="interpreter for Muri's simulator")
    parser.add_argument("--muri-flag", action="append", default=[], help="extra flag for run_sim.py (repeat)")
    parser.add_argument("--limit", type=int, help="only the N earliest jobs of each trace (both sides)")
    parser.add_argument("--out", help="also write the rows as CSV here")
    args = parser.parse_args(argv)
    try:
        simulator = muri_simulator_dir(args.muri_simulator)
        traces = []
        for name in args.trace or ["trace3"]:
            path = Path(name) if Path(name).suffix == ".csv" else shared_data_dir() / "muri" / f"{name}.csv"
            if not path.is_file():
                raise DuettoInputError("no such trace", source=str(path))
            traces.append(path)
        if args.limit is not None and args.limit < 1:
            raise DuettoInputError("must be >= 1", field="--limit")
        policies = args.policy or list(MURI_SCHEDULES)
        rows = compare(traces, policies, simulator, args.muri_python, args.muri_flag, args.limit)
    except DuettoInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if simulator is None:
        print("Muri's simulator: not available (set MURI_SIMULATOR or --muri-simulator); duetto's side only")
    print(markdown(rows))
    if args.out:
        with open(args.out, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
