"""Shared helpers of the trace loaders: reading tables with errors that name file, row and column,
cluster defaults, and profiles built from a measured iteration time.

Row numbers in errors are 1-based *data* rows (the header and blank lines are not counted); errors
about the file's structure (field counts) give the 1-based line number instead.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from formulation.cluster import Cluster
from formulation.errors import DuettoInputError, InfeasibleInstanceError
from formulation.instance import Instance
from formulation.speed import Profile

PathLike = str | Path


def existing_file(path: PathLike, what: str = "trace") -> Path:
    """``path`` as a :class:`Path`, or a :class:`DuettoInputError` if it is not a readable file."""
    file = Path(path)
    if not file.is_file():
        raise DuettoInputError(f"{what} file not found", source=str(path))
    return file


def read_table(path: PathLike, required: Sequence[str], *, what: str = "trace") -> pd.DataFrame:
    """Read a comma-separated file with a header into a frame of *strings*.

    Every value stays text so that :func:`numeric_column` can name the row and column of a bad one.

    Raises
    ------
    DuettoInputError
        The file is missing, is not valid CSV (ragged rows), or lacks a required column.
    """
    file = existing_file(path, what)
    # pandas silently pads short rows and pushes extra fields into the index; check the raw field
    # count per line first so that a ragged row is reported where it is.
    header = _check_field_counts(file)
    missing = [column for column in required if column not in header]
    if missing:
        raise DuettoInputError(
            f"missing column(s) {', '.join(missing)}; the header has {', '.join(header)}",
            source=str(file),
        )
    try:
        frame = pd.read_csv(file, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError, csv.Error) as error:
        raise DuettoInputError(f"malformed CSV: {error}", source=str(file)) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def _check_field_counts(file: Path) -> list[str]:
    """The header's column names, after checking every line has as many fields (blank lines aside)."""
    header: list[str] | None = None
    try:
        with file.open(newline="", encoding="utf-8") as handle:
            for line_no, row in enumerate(csv.reader(handle), start=1):
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank line: pandas skips it too
                if header is None:
                    header = [name.strip() for name in row]
                elif len(row) != len(header):
                    raise DuettoInputError(
                        f"malformed CSV: {len(row)} fields, the header has {len(header)}",
                        source=f"{file}, line {line_no}",
                    )
    except (UnicodeDecodeError, csv.Error) as error:
        raise DuettoInputError(f"malformed CSV: {error}", source=str(file)) from None
    if header is None:
        raise DuettoInputError("file is empty (no header)", source=str(file))
    return header


def row_source(file: PathLike, index: int) -> str:
    """Location string of data row ``index`` (0-based, counted in the file)."""
    return f"{file}, row {index + 1}"


def _row_of(frame: pd.DataFrame, position: int) -> int:
    """The file row (0-based) of the frame's ``position``-th row (frames keep the file's index)."""
    return int(frame.index[position])


def numeric_column(
    frame: pd.DataFrame,
    column: str,
    file: PathLike,
    *,
    integer: bool = False,
    positive: bool = False,
    nonnegative: bool = False,
) -> np.ndarray:
    """Column ``column`` as floats (or ints), with a :class:`DuettoInputError` naming the first bad
    row: not a number, not finite, not an integer when ``integer``, <= 0 when ``positive``, < 0 when
    ``nonnegative``."""
    raw = frame[column]
    values = pd.to_numeric(raw.str.strip(), errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        index = int(np.argmax(bad))
        raise DuettoInputError(
            f"not a finite number: {raw.iloc[index]!r}", source=row_source(file, _row_of(frame, index)), field=column
        )
    if integer:
        fractional = values != np.round(values)
        if fractional.any():
            index = int(np.argmax(fractional))
            raise DuettoInputError(
                f"must be an integer, got {raw.iloc[index]!r}",
                source=row_source(file, _row_of(frame, index)),
                field=column,
            )
    if positive and (values <= 0).any():
        index = int(np.argmax(values <= 0))
        raise DuettoInputError(
            f"must be > 0, got {raw.iloc[index]!r}", source=row_source(file, _row_of(frame, index)), field=column
        )
    if nonnegative and (values < 0).any():
        index = int(np.argmax(values < 0))
        raise DuettoInputError(
            f"must be >= 0, got {raw.iloc[index]!r}", source=row_source(file, _row_of(frame, index)), field=column
        )
    return values.astype(np.int64) if integer else values


def text_column(frame: pd.DataFrame, column: str, file: PathLike) -> list[str]:
    """Column ``column`` as stripped, non-empty strings."""
    values = [value.strip() for value in frame[column].tolist()]
    for index, value in enumerate(values):
        if not value:
            raise DuettoInputError("must not be empty", source=row_source(file, _row_of(frame, index)), field=column)
    return values


def read_cluster_spec(path: PathLike) -> tuple[int, int]:
    """``(nodes, gpus_per_node)`` from a Tiresias/Muri cluster spec CSV
    (``num_switch,num_node_p_switch,num_gpu_p_node,...``): nodes = switches × nodes per switch."""
    frame = read_table(path, ("num_switch", "num_node_p_switch", "num_gpu_p_node"), what="cluster spec")
    if len(frame) != 1:
        raise DuettoInputError(f"expected exactly one data row, found {len(frame)}", source=str(path))
    switches = numeric_column(frame, "num_switch", path, integer=True, positive=True)
    per_switch = numeric_column(frame, "num_node_p_switch", path, integer=True, positive=True)
    gpus = numeric_column(frame, "num_gpu_p_node", path, integer=True, positive=True)
    return int(switches[0] * per_switch[0]), int(gpus[0])


def build_cluster(
    nodes: int | None,
    gpus_per_node: int | None,
    default: tuple[int, int],
    gpu_memory_gib: float,
    capacity: int,
) -> Cluster:
    """The cluster a loader uses: given sizes override the format's default one by one."""
    return Cluster(
        default[0] if nodes is None else nodes,
        default[1] if gpus_per_node is None else gpus_per_node,
        gpu_memory_gib,
        capacity,
    )


def read_job_table(file: Path, required: Sequence[str], limit: int | None) -> pd.DataFrame:
    """A Tiresias/Muri-style job CSV with the ``required`` columns, non-empty, cut to its ``limit``
    earliest ``submit_time`` rows (file order kept)."""
    frame = read_table(file, required)
    if frame.empty:
        raise DuettoInputError("no jobs in the trace", source=str(file))
    if limit is not None:
        frame = frame.iloc[earliest(numeric_column(frame, "submit_time", file, nonnegative=True), limit)]
    return frame


def spec_cluster(
    file: Path,
    nodes: int | None,
    gpus_per_node: int | None,
    cluster_spec: PathLike | None,
    spec_name: str,
    fallback: tuple[int, int],
    gpu_memory_gib: float,
    capacity: int,
) -> Cluster:
    """The cluster of a Tiresias/Muri trace: the given sizes, else the cluster spec CSV
    (``cluster_spec``, or ``spec_name`` next to the trace when it exists), else ``fallback``."""
    if nodes is None or gpus_per_node is None:
        spec = Path(cluster_spec) if cluster_spec is not None else file.parent / spec_name
        default = read_cluster_spec(spec) if cluster_spec is not None or spec.is_file() else fallback
    else:
        default = (nodes, gpus_per_node)
    return build_cluster(nodes, gpus_per_node, default, gpu_memory_gib, capacity)


def earliest(arrivals: np.ndarray | Sequence[float], limit: int | None) -> np.ndarray:
    """Positions of the ``limit`` earliest arrivals (ties: file order), in file order; all if None."""
    values = np.asarray(arrivals, dtype=float)
    if limit is None or limit >= len(values):
        return np.arange(len(values))
    return np.sort(np.argsort(values, kind="stable")[:limit])


def check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DuettoInputError(f"must be a positive integer or None, got {limit!r}", field="limit")


def check_gang_fits(
    job_ids: Sequence[str], gpus: Iterable[int], cluster: Cluster, file: PathLike, rows: Sequence[str] | None = None
) -> None:
    """A clear error for the first job that needs more GPUs than the cluster has."""
    for position, (job_id, demand) in enumerate(zip(job_ids, gpus, strict=True)):
        if demand > cluster.num_gpus:
            where = rows[position] if rows is not None else f"row {position + 1}"
            raise InfeasibleInstanceError(
                f"job '{job_id}' needs {demand} GPUs but the cluster has {cluster.num_gpus} "
                f"({cluster.nodes} nodes × {cluster.gpus_per_node}); pass larger nodes= / gpus_per_node=",
                source=f"{file}, {where}",
                field="num_gpus",
            )


def check_unique_ids(job_ids: Sequence[str], file: PathLike, rows: Sequence[str] | None = None) -> None:
    seen: dict[str, int] = {}
    for position, job_id in enumerate(job_ids):
        if job_id in seen:
            where = rows[position] if rows is not None else f"row {position + 1}"
            raise DuettoInputError(
                f"duplicate job id '{job_id}' (first seen at position {seen[job_id] + 1})",
                source=f"{file}, {where}",
                field="job_id",
            )
        seen[job_id] = position


class ProfileNamer:
    """Deterministic, readable profile names: one per distinct key, ``base``, then ``base-2``, ..."""

    def __init__(self) -> None:
        self._by_key: dict[object, str] = {}
        self._used: set[str] = set()

    def name(self, key: object, base: str) -> tuple[str, bool]:
        """The name for ``key`` and whether it is new."""
        if key in self._by_key:
            return self._by_key[key], False
        candidate, counter = base, 1
        while candidate in self._used:
            counter += 1
            candidate = f"{base}-{counter}"
        self._by_key[key] = candidate
        self._used.add(candidate)
        return candidate, True


def measured_profile(
    name: str, batch_size: int, iteration_seconds: float, stage_times: tuple[float, ...] | None = None
) -> Profile:
    """A profile whose only mode is the measured iteration time at the job's batch size.

    Memory is unknown in these traces, so it is 0 GiB: the job always fits. Communication is part of
    the measured time (it was measured at the job's GPU count), so Eq. 2 is zero.
    """
    if not math.isfinite(iteration_seconds) or iteration_seconds <= 0:
        raise DuettoInputError(f"iteration time must be > 0, got {iteration_seconds!r}", source=f"profile '{name}'")
    return Profile(name=name, compute_table=((batch_size, iteration_seconds),), stage_times=stage_times)


# --- format and unit checks (a trace read with the wrong loader or unit must not load silently) -----

MAX_PLAUSIBLE_SECONDS = 365 * 24 * 3600.0
"""A job running longer than a year alone is refused unless the caller allows it: it is what a trace
in milliseconds read as seconds looks like (Muri's ``trace2.csv`` as Tiresias gave a 49-year job)."""

_CSV_SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    # most specific first: a Muri header is a Tiresias header plus Muri's own columns
    ("muri", frozenset({"job_id", "num_gpu", "submit_time", "duration", "iteration_time", "resource_time_0"})),
    ("tiresias", frozenset({"job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration"})),
    ("pollux", frozenset({"name", "time", "application", "num_replicas", "batch_size"})),
)


def detect_kind(path: PathLike) -> str | None:
    """The trace format a file's first line says it is (``muri``, ``tiresias``, ``pollux``, ``gavel``
    for 7-10 tab-separated fields, ``shockwave`` for 12), or ``None`` when it is none of these."""
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline().rstrip("\r\n")
    except OSError:
        return None
    if "\t" in first:
        count = len(first.split("\t"))
        return "shockwave" if count == 12 else ("gavel" if count in (7, 9, 10) else None)
    header = {name.strip() for name in first.split(",")}
    for kind, signature in _CSV_SIGNATURES:
        if signature <= header:
            return kind
    return None


def check_kind(path: PathLike, kind: str) -> None:
    """Refuse a file whose header is another format's, naming the format that matches."""
    detected = detect_kind(path)
    compatible = {kind, "gavel", "shockwave"} if kind in ("gavel", "shockwave") else {kind}
    if detected is not None and detected not in compatible:
        raise DuettoInputError(
            f"this is a {detected} trace (by its header), not {kind}: import it as {detected} "
            f"(its times are in the units that format defines)",
            source=str(path),
        )


def frame_rows(frame: pd.DataFrame) -> list[str]:
    """``row N`` (1-based data rows of the file) for each row of ``frame``, for :func:`check_plausible`."""
    return [f"row {int(index) + 1}" for index in frame.index]


def check_plausible(instance: Instance, file: PathLike, rows: Sequence[str] | None = None, *, allow: bool) -> Instance:
    """``instance`` unless a job is absurd: alone longer than :data:`MAX_PLAUSIBLE_SECONDS`, or a
    negative arrival. The error names the file's row (``rows[position]``, else the job id) and the
    option that keeps such jobs (``allow``: ``allow_implausible=True``, ``--allow-implausible``)."""
    if allow:
        return instance
    for position, job in enumerate(instance.jobs):
        where = f"{file}, {rows[position]}" if rows is not None else f"{file}, job '{job.id}'"
        if job.arrival < 0:
            raise DuettoInputError(
                f"job '{job.id}' arrives at {job.arrival:g} s, before time 0", source=where, field="arrival"
            )
        duration = instance.isolated_duration(job)
        if duration > MAX_PLAUSIBLE_SECONDS:
            raise DuettoInputError(
                f"job '{job.id}' runs {duration:,.0f} s alone ({duration / MAX_PLAUSIBLE_SECONDS:,.1f} years): "
                "a unit mix-up? (allow_implausible=True / --allow-implausible keeps it)",
                source=where,
                field="duration",
            )
    return instance
