"""Gavel traces and measured throughputs (stanford-futuredata/gavel).

Trace lines are tab-separated; the field count tells the format (checked per line):

* 7 fields (old format, the ``msr_seed0`` traces): job type, command, num_steps_arg,
  needs_data_dir, total_steps, arrival time (s), scale factor;
* 9 fields: job type, command, num_steps_arg, needs_data_dir, total_steps, scale factor,
  priority weight, SLO, arrival time;
* 10 fields: as 9 with the working directory after the command;
* 12 fields (Gavel's generator as used by Shockwave): job type, command, working directory,
  num_steps_arg, needs_data_dir, total_steps, scale factor, mode, priority weight, SLO,
  duration (s), arrival time (s).

A job's GPUs are its scale factor; its iterations are ``total_steps`` and its iteration time is
``1 / throughput`` (steps/s) of its (job type, scale factor) on one worker type (default v100), so
its isolated duration is ``total_steps / throughput``. One profile per (job type, scale factor),
named after the job type, with `` x<scale factor>`` appended when the scale factor is above 1.

Interference is measured: :func:`gavel_interference_table` gives ξ of job type a next to job type b
on one GPU as ``slowdown_a = isolated_tput_a / colocated_tput_a`` (``gavel_pairwise_colocation.csv``,
scale factor 1, the only scale factor with real pair measurements); pairs that do not fit together
(``feasible = 0``) cannot share. A multi-GPU job's ratio is that of its job type (the pair slows each
GPU they share alike).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from formulation.cluster import Cluster
from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import InterferenceModel, TableInterference
from formulation.paths import shared_data_dir
from formulation.speed import Profile
from formulation.stages import with_derived_stages
from formulation.traces.common import (
    PathLike,
    build_cluster,
    check_gang_fits,
    check_kind,
    check_limit,
    check_plausible,
    earliest,
    existing_file,
    measured_profile,
    numeric_column,
    read_table,
)

GAVEL_DEFAULT_CLUSTER = (8, 8)  # 64 GPUs: the largest msr_seed0 job asks for 64
DEFAULT_WORKER_TYPE = "v100"
THROUGHPUTS_FILE = "simulation_throughputs.json"
PAIRWISE_FILE = "gavel_pairwise_colocation.csv"
MissingThroughput = Literal["scale", "error"]

_BATCH = re.compile(r"\(batch size (\d+)\)")


@dataclass(frozen=True, slots=True)
class GavelJobLine:
    """One parsed trace line."""

    line: int  # 1-based line number in the file
    job_type: str
    total_steps: int
    scale_factor: int
    arrival: float
    mode: str | None = None
    duration: float | None = None


def _field_int(value: str, file: Path, line: int, what: str, minimum: int) -> int:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number != int(number) or number < minimum:
        raise DuettoInputError(
            f"must be an integer >= {minimum}, got {value!r}", source=f"{file}, line {line}", field=what
        )
    return int(number)


def _field_float(value: str, file: Path, line: int, what: str, *, positive: bool = False) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "> 0" if positive else ">= 0"
        raise DuettoInputError(
            f"must be a finite number {bound}, got {value!r}", source=f"{file}, line {line}", field=what
        )
    return number


def parse_gavel_trace(path: PathLike, *, formats: tuple[int, ...] = (7, 9, 10, 12)) -> list[GavelJobLine]:
    """Parse a Gavel-format trace, checking the field count of every line.

    Blank lines are skipped. Raises :class:`DuettoInputError` naming the file, the 1-based line and
    the field for any malformed line.
    """
    file = existing_file(path)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DuettoInputError(f"not UTF-8 text: {error}", source=str(file)) from None
    records: list[GavelJobLine] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = raw.split("\t")
        count = len(fields)
        if count not in formats:
            raise DuettoInputError(
                f"{count} tab-separated fields; expected one of {', '.join(map(str, formats))}",
                source=f"{file}, line {line_no}",
            )
        mode: str | None = None
        duration: float | None = None
        if count == 7:
            job_type, _, _, _, steps, arrival, scale = fields
        elif count == 9:
            job_type, _, _, _, steps, scale, _, _, arrival = fields
        elif count == 10:
            job_type, _, _, _, _, steps, scale, _, _, arrival = fields
        else:
            job_type, _, _, _, _, steps, scale, mode, _, _, dur, arrival = fields
            duration = _field_float(dur, file, line_no, "duration", positive=True)
        job_type = job_type.strip()
        if not job_type:
            raise DuettoInputError("empty job type", source=f"{file}, line {line_no}", field="job_type")
        records.append(
            GavelJobLine(
                line=line_no,
                job_type=job_type,
                total_steps=_field_int(steps, file, line_no, "total_steps", 1),
                scale_factor=_field_int(scale, file, line_no, "scale_factor", 1),
                arrival=_field_float(arrival, file, line_no, "arrival_time"),
                mode=mode.strip() if mode is not None else None,
                duration=duration,
            )
        )
    if not records:
        raise DuettoInputError("no jobs in the trace", source=str(file))
    return records


@lru_cache(maxsize=8)
def _read_throughputs(path: str) -> Mapping[str, Mapping[tuple[str, int], float]]:
    file = existing_file(path, "throughputs")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DuettoInputError(f"malformed JSON: {error}", source=path) from None
    if not isinstance(data, dict):
        raise DuettoInputError("expected an object of worker types", source=path)
    result: dict[str, dict[tuple[str, int], float]] = {}
    for worker, entries in data.items():
        table: dict[tuple[str, int], float] = {}
        if not isinstance(entries, dict):
            raise DuettoInputError("expected an object of job types", source=path, field=str(worker))
        for key, value in entries.items():
            try:
                # keys are Python tuple literals: "('ResNet-18 (batch size 16)', 1)"
                job_type, scale = ast.literal_eval(key)
                isolated = float(value["null"])
            except (ValueError, SyntaxError, TypeError, KeyError):
                raise DuettoInputError(
                    f'cannot read entry {key!r}: want "(\'<job type>\', <scale factor>)": {{"null": <steps/s>, ...}}',
                    source=path,
                    field=str(worker),
                ) from None
            table[(str(job_type), int(scale))] = isolated
        result[str(worker)] = table
    return result


def read_isolated_throughputs(path: PathLike, worker_type: str = DEFAULT_WORKER_TYPE) -> dict[tuple[str, int], float]:
    """Isolated throughputs (steps/s) per (job type, scale factor) of one worker type from a Gavel
    throughputs JSON (``simulation_throughputs.json`` or Shockwave's ``tacc_throughputs.json``)."""
    data = _read_throughputs(str(Path(path)))
    if worker_type not in data:
        raise DuettoInputError(
            f"unknown worker type '{worker_type}'; the file has {', '.join(sorted(data))}",
            source=str(path),
            field="worker_type",
        )
    return dict(data[worker_type])


def throughput_for(
    table: Mapping[tuple[str, int], float],
    job_type: str,
    scale_factor: int,
    missing: MissingThroughput,
    where: str,
) -> tuple[float, bool]:
    """Steps/s of ``job_type`` on ``scale_factor`` GPUs and whether it was extrapolated.

    With ``missing="scale"``, a scale factor without a measurement uses the largest measured scale
    factor below it (at least 1) and scales its throughput linearly (same per-GPU throughput).
    """
    measured = table.get((job_type, scale_factor), 0.0)
    if measured > 0:
        return measured, False
    known = sorted(s for (t, s), v in table.items() if t == job_type and v > 0 and s <= scale_factor)
    if missing == "error" or not known:
        reason = "no measured throughput" if not known else "no throughput at this scale factor"
        raise DuettoInputError(
            f"{reason} for job type '{job_type}' on {scale_factor} GPU(s)", source=where, field="job_type"
        )
    base = known[-1]
    return table[(job_type, base)] * scale_factor / base, True


def batch_size_of(job_type: str) -> int:
    """The batch size in a Gavel job type name (``"ResNet-18 (batch size 64)"`` → 64), else 1."""
    match = _BATCH.search(job_type)
    return int(match.group(1)) if match else 1


def profile_name(job_type: str, scale_factor: int) -> str:
    return job_type if scale_factor == 1 else f"{job_type} x{scale_factor}"


def default_data_file(trace: Path, filename: str, folder: str) -> Path:
    for candidate in (trace.parent / filename, trace.parent.parent / filename):
        if candidate.is_file():
            return candidate
    return shared_data_dir() / folder / filename


@lru_cache(maxsize=8)
def _pair_table(path: str, worker_type: str) -> tuple[tuple[tuple[str, str], float | None], ...]:
    columns = ("worker_type", "job_type_a", "job_type_b", "scale_factor", "feasible", "slowdown_a", "slowdown_b")
    frame = read_table(path, columns, what="pairwise co-location")
    frame = frame[(frame["worker_type"].str.strip() == worker_type) & (frame["scale_factor"].str.strip() == "1")]
    if frame.empty:
        raise DuettoInputError(
            f"no scale-factor-1 pairs for worker type '{worker_type}'", source=path, field="worker_type"
        )
    frame = frame.reset_index(drop=True)
    feasible = numeric_column(frame, "feasible", path, integer=True, nonnegative=True)
    pairs: dict[tuple[str, str], float | None] = {}
    for i, (a, b) in enumerate(zip(frame["job_type_a"].str.strip(), frame["job_type_b"].str.strip(), strict=True)):
        if feasible[i] == 0:
            pairs[(a, b)] = pairs[(b, a)] = None
            continue
        values = []
        for column in ("slowdown_a", "slowdown_b"):
            try:
                value = float(frame[column].iloc[i])
            except ValueError:
                value = math.nan
            if not math.isfinite(value) or value <= 0:
                raise DuettoInputError(
                    f"not a positive number: {frame[column].iloc[i]!r}", source=f"{path}, row {i + 1}", field=column
                )
            values.append(max(1.0, value))  # measurement noise below 1 is no speed-up
        pairs[(a, b)] = values[0]
        if a != b:
            pairs[(b, a)] = values[1]
    return tuple(pairs.items())


def gavel_interference_table(worker_type: str = DEFAULT_WORKER_TYPE, path: PathLike | None = None) -> TableInterference:
    """Measured interference ratios of Gavel job types on one GPU of ``worker_type``.

    Parameters
    ----------
    worker_type
        ``k80``, ``p100`` or ``v100``.
    path
        ``gavel_pairwise_colocation.csv``; default the shared data copy.

    Returns
    -------
    TableInterference
        Keyed by Gavel job type names (``"ResNet-18 (batch size 16)"``, ``"A3C"``, ...): ξ of
        ``(a, b)`` is ``slowdown_a``; ``None`` where the pair does not fit (``feasible = 0``);
        pairs not in the table cannot share (``default=None``). On v100, 330 of 351 one-GPU pairs fit.
    """
    file = Path(path) if path is not None else shared_data_dir() / "gavel" / PAIRWISE_FILE
    return TableInterference(dict(_pair_table(str(file), worker_type)), default=None)


def expand_to_profiles(base: TableInterference, profile_types: Mapping[str, str]) -> TableInterference:
    """A table keyed by profile names from one keyed by job types (``profile_types``: profile → type)."""
    pairs: dict[tuple[str, str], float | None] = {}
    for p, type_p in profile_types.items():
        for q, type_q in profile_types.items():
            pairs[(p, q)] = base.pairs.get((type_p, type_q), base.default)
    return TableInterference(pairs, default=base.default)


def build_gavel_instance(
    records: list[GavelJobLine],
    file: Path,
    cluster: Cluster,
    throughputs: Mapping[tuple[str, int], float],
    *,
    missing_throughput: MissingThroughput,
    durations: Literal["steps", "trace"],
    interference: InterferenceModel | None,
    pairwise: PathLike | None,
    worker_type: str,
    name: str,
    metadata: Mapping[str, object],
) -> Instance:
    """Jobs ``j0, j1, ...`` (trace order) from parsed lines; shared by the Gavel and Shockwave loaders.

    ``durations="steps"``: iterations = total_steps; ``"trace"``: iterations = duration × throughput
    so that the isolated duration is the line's ``duration`` field.
    """
    job_ids = [f"j{i}" for i in range(len(records))]
    check_gang_fits(job_ids, [r.scale_factor for r in records], cluster, file, [f"line {r.line}" for r in records])
    profiles: dict[str, Profile] = {}
    profile_types: dict[str, str] = {}
    jobs: list[Job] = []
    extrapolated = 0
    for job_id, record in zip(job_ids, records, strict=True):
        where = f"{file}, line {record.line}"
        steps_per_second, scaled = throughput_for(
            throughputs, record.job_type, record.scale_factor, missing_throughput, where
        )
        extrapolated += scaled
        pname = profile_name(record.job_type, record.scale_factor)
        batch = batch_size_of(record.job_type)
        if pname not in profiles:
            profiles[pname] = measured_profile(pname, batch, 1.0 / steps_per_second)
            profile_types[pname] = record.job_type
        if durations == "trace":
            assert record.duration is not None  # callers only ask for it with 12-field lines
            iterations = record.duration * steps_per_second
        else:
            iterations = float(record.total_steps)
        jobs.append(Job(job_id, record.arrival, record.scale_factor, iterations, batch, pname))
    if interference is None:
        table = gavel_interference_table(worker_type, pairwise)
        interference = expand_to_profiles(table, profile_types)
    instance = Instance(
        cluster=cluster,
        jobs=tuple(jobs),
        profiles=profiles,
        interference=interference,
        name=name,
        metadata={**metadata, "extrapolated_throughputs": extrapolated, "worker_type": worker_type},
    )
    # per-stage times for Muri (docs/model.md); the measured pair table keeps the ratios
    return with_derived_stages(instance)


def load_gavel(
    path: PathLike,
    *,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    gpu_memory_gib: float = 32.0,
    capacity: int = 2,
    interference: InterferenceModel | None = None,
    limit: int | None = None,
    worker_type: str = DEFAULT_WORKER_TYPE,
    throughputs: PathLike | None = None,
    pairwise: PathLike | None = None,
    missing_throughput: MissingThroughput = "scale",
    name: str | None = None,
    allow_implausible: bool = False,
) -> Instance:
    """Load a Gavel trace (``msr_seed0/*.trace``; 7, 9, 10 or 12 fields per line).

    Parameters
    ----------
    path
        The trace.
    nodes, gpus_per_node
        Cluster shape; default 8 nodes × 8 GPUs (the msr_seed0 traces ask for up to 64 GPUs).
    gpu_memory_gib, capacity
        GPU memory and ``C``.
    interference
        Default: measured pairs on ``worker_type`` (:func:`gavel_interference_table`).
    limit
        Keep only the ``limit`` earliest arrivals (ties: file order).
    worker_type
        Which GPU's throughputs give the iteration times (``k80``, ``p100``, ``v100``).
    throughputs
        Gavel throughputs JSON; default ``simulation_throughputs.json`` beside the trace or one folder
        up, else the shared data copy.
    pairwise
        ``gavel_pairwise_colocation.csv`` for the interference table; default the shared data copy.
    missing_throughput
        ``"scale"`` (default): a (job type, scale factor) Gavel did not measure (about 10 % of the
        msr_seed0 jobs: e.g. 4-GPU Recommendation, 16-GPU anything) takes the largest measured scale
        factor below it and scales linearly; ``"error"``: refuse. The count is in
        ``metadata["extrapolated_throughputs"]``.
    name
        Instance name; default the file's stem.
    allow_implausible
        Keep jobs longer than a year alone (:data:`~formulation.traces.common.MAX_PLAUSIBLE_SECONDS`);
        by default they are refused with their row: they are what a unit mix-up looks like.
    """
    check_limit(limit)
    if missing_throughput not in ("scale", "error"):
        raise DuettoInputError(f"must be 'scale' or 'error', got {missing_throughput!r}", field="missing_throughput")
    file = Path(path)
    check_kind(file, "gavel")
    records = parse_gavel_trace(file)
    if limit is not None:
        records = [records[i] for i in earliest([r.arrival for r in records], limit)]
    cluster = build_cluster(nodes, gpus_per_node, GAVEL_DEFAULT_CLUSTER, gpu_memory_gib, capacity)
    tput_file = Path(throughputs) if throughputs is not None else default_data_file(file, THROUGHPUTS_FILE, "gavel")
    table = read_isolated_throughputs(tput_file, worker_type)
    instance = build_gavel_instance(
        records,
        file,
        cluster,
        table,
        missing_throughput=missing_throughput,
        durations="steps",
        interference=interference,
        pairwise=pairwise,
        worker_type=worker_type,
        name=name or file.stem,
        metadata={
            "source": "gavel",
            "file": file.name,
            "throughputs": tput_file.name,
            "limit": limit,
            "units": "arrival s; iteration time = 1 / throughput (steps/s)",
        },
    )
    return check_plausible(instance, file, None, allow=allow_implausible)
