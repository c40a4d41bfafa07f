"""duetto's JSON formats for instances and schedules (documented in docs/formats.md).

The wire models are pydantic models: they give the JSON Schemas (``duetto schema``) and error
messages that name the field. They convert to and from the immutable problem types; a round trip
through JSON gives back an equal instance.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from formulation.cluster import Cluster
from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import (
    ConstantInterference,
    HashedPairInterference,
    InterferenceModel,
    StageInterference,
    TableInterference,
)
from formulation.progress import MURI_DEFAULT_OVERHEAD, MURI_STRETCH, SPEC_PROGRESS, MuriProgress, ProgressRule
from formulation.schedule import JobPlan, Schedule, Segment
from formulation.speed import Profile

INSTANCE_FORMAT: Literal["duetto-instance"] = "duetto-instance"
SCHEDULE_FORMAT: Literal["duetto-schedule"] = "duetto-schedule"
FORMAT_VERSION: Literal[1] = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterModel(_Strict):
    nodes: int = Field(ge=1, description="number of servers")
    gpus_per_node: int = Field(ge=1, description="identical GPUs per server")
    gpu_memory_gib: float = Field(32.0, gt=0, description="memory of each GPU, GiB")
    capacity: int = Field(2, ge=1, description="at most this many jobs on one GPU at once (C)")


class ProfileModel(_Strict):
    name: str = Field(min_length=1)
    compute_alpha: float = Field(0.0, ge=0, description="Eq. 1 intercept, seconds")
    compute_beta: float = Field(0.0, ge=0, description="Eq. 1 slope, seconds per sample")
    compute_table: list[tuple[int, float]] | None = Field(
        None, description="measured computation seconds per sub-batch: [[b, seconds], ...]"
    )
    comm_alpha: float = Field(0.0, ge=0, description="Eq. 2 intercept, seconds")
    comm_beta: float = Field(0.0, ge=0, description="Eq. 2 slope, seconds per unit of message size")
    message_size: float = Field(0.0, ge=0, description="M of Eq. 2 (e.g. MB of gradients)")
    inter_node_comm_factor: float = Field(1.0, ge=1, description="t_comm multiplier across nodes")
    overlap_delta: float = Field(1.0, ge=1, description="δ of Eq. 3")
    memory_base_gib: float = Field(0.0, ge=0)
    memory_per_sample_gib: float = Field(0.0, ge=0)
    stage_times: list[float] | None = Field(None, description="seconds per iteration in each resource stage")


class ConstantInterferenceModel(_Strict):
    kind: Literal["constant"]
    xi: float = Field(ge=1)


class PairRatio(_Strict):
    victim: str
    other: str
    xi: float | None = Field(ge=1, description="ξ of victim next to other; null: they cannot share")


class TableInterferenceModel(_Strict):
    kind: Literal["table"]
    default: float | None = Field(None, ge=1)
    pairs: list[PairRatio]


class StageInterferenceModel(_Strict):
    kind: Literal["stages"]
    fallback: float | None = Field(None, ge=1)


class HashedPairInterferenceModel(_Strict):
    kind: Literal["hashed_pairs"]
    seed: int
    low: float = Field(ge=1)
    high: float = Field(ge=1)
    decimals: int = Field(2, ge=0, le=12)


class PredictedInterferenceModel(_Strict):
    """ξ predicted by exported gradient-boosted trees from per-profile features (Castor §6)."""

    kind: Literal["predicted"]
    worker_type: str = "v100"
    fallback: float | None = Field(None, ge=1)
    features: dict[str, dict[str, float]] = Field(description="profile name -> feature name -> value")
    forbidden: list[tuple[str, str]] = Field(default_factory=list, description="ordered pairs that may not share")
    model: dict[str, Any] = Field(description="the exported tree ensemble (formulation.predictor.TreeEnsemble)")
    provenance: dict[str, Any] = Field(default_factory=dict)


InterferenceSpec = Annotated[
    ConstantInterferenceModel
    | TableInterferenceModel
    | StageInterferenceModel
    | HashedPairInterferenceModel
    | PredictedInterferenceModel,
    Field(discriminator="kind"),
]


class SpecProgressModel(_Strict):
    """SPEC.md's progress rule: rate 1 / (t_iter · ξ_eff) (docs/model.md, "Progress rules")."""

    kind: Literal["spec"]


class MuriProgressModel(_Strict):
    """Muri's simulator's progress rule: stretched group periods, start overheads at events."""

    kind: Literal["muri"]
    stretch: list[float] = Field(
        default_factory=lambda: list(MURI_STRETCH),
        min_length=1,
        description="iteration-time factors: alone, groups of 2, 3, 4 (a group's period is T·f_n/f_1)",
    )
    overheads: dict[str, float] = Field(default_factory=dict, description="profile name -> start overhead, seconds")
    default_overhead: float = Field(MURI_DEFAULT_OVERHEAD, ge=0, description="seconds for profiles not listed")


ProgressSpec = Annotated[SpecProgressModel | MuriProgressModel, Field(discriminator="kind")]


class JobModel(_Strict):
    id: str = Field(min_length=1)
    arrival: float = Field(ge=0, description="submission time, seconds")
    num_gpus: int = Field(ge=1)
    iterations: float = Field(gt=0)
    batch_size: int = Field(ge=1, description="the user's per-GPU batch size B")
    profile: str


class InstanceModel(_Strict):
    format: Literal["duetto-instance"] = INSTANCE_FORMAT
    version: Literal[1] = FORMAT_VERSION
    name: str = "instance"
    cluster: ClusterModel
    profiles: list[ProfileModel]
    interference: InterferenceSpec = ConstantInterferenceModel(kind="constant", xi=1.0)
    jobs: list[JobModel]
    metadata: dict[str, Any] = Field(default_factory=dict)
    progress: ProgressSpec = Field(
        SpecProgressModel(kind="spec"), description="progress rule of every schedule of this instance"
    )


class SegmentModel(_Strict):
    start: float = Field(ge=0)
    gpus: list[int] = Field(min_length=1)
    steps: int = Field(1, ge=1, description="gradient-accumulation steps")
    end: float | None = Field(None, description="preemption time; null: runs to completion")


class JobPlanModel(_Strict):
    id: str
    segments: list[SegmentModel] = Field(min_length=1)
    completion: float | None = Field(None, description="completion time the producer computed")


class ScheduleModel(_Strict):
    format: Literal["duetto-schedule"] = SCHEDULE_FORMAT
    version: Literal[1] = FORMAT_VERSION
    producer: str = "unknown"
    slot: float | None = Field(None, gt=0, description="slot length Δ when slotted")
    restart_overhead: float = Field(0.0, ge=0)
    capacity: int | None = Field(
        None, ge=1, description="jobs per GPU (C) the schedule was made for; null: the instance's"
    )
    jobs: list[JobPlanModel]
    metadata: dict[str, Any] = Field(default_factory=dict)


# --- conversion -------------------------------------------------------------------------------------


def _interference_from_model(
    spec: ConstantInterferenceModel
    | TableInterferenceModel
    | StageInterferenceModel
    | HashedPairInterferenceModel
    | PredictedInterferenceModel,
) -> InterferenceModel:
    if isinstance(spec, PredictedInterferenceModel):
        # Imported here: the predictor pulls in numpy/pandas machinery plain instances never need.
        from formulation.predictor import PredictedInterference

        return PredictedInterference.from_dict(spec.model_dump())
    if isinstance(spec, ConstantInterferenceModel):
        return ConstantInterference(spec.xi)
    if isinstance(spec, TableInterferenceModel):
        return TableInterference({(p.victim, p.other): p.xi for p in spec.pairs}, spec.default)
    if isinstance(spec, HashedPairInterferenceModel):
        return HashedPairInterference(spec.seed, spec.low, spec.high, spec.decimals)
    return StageInterference(spec.fallback)


def _interference_to_dict(model: InterferenceModel) -> dict[str, Any]:
    if isinstance(model, ConstantInterference):
        return {"kind": "constant", "xi": model.xi}
    if isinstance(model, TableInterference):
        return {
            "kind": "table",
            "default": model.default,
            "pairs": [{"victim": v, "other": o, "xi": xi} for (v, o), xi in model.pairs.items()],
        }
    if isinstance(model, StageInterference):
        return {"kind": "stages", "fallback": model.fallback}
    if isinstance(model, HashedPairInterference):
        return {
            "kind": "hashed_pairs",
            "seed": model.seed,
            "low": model.low,
            "high": model.high,
            "decimals": model.decimals,
        }
    to_dict = getattr(model, "to_dict", None)
    if to_dict is None:
        raise DuettoInputError(f"interference model '{model.kind}' cannot be written to JSON")
    return dict(to_dict())


def _profile_from_model(spec: ProfileModel) -> Profile:
    data = spec.model_dump()
    table = data.pop("compute_table")
    stages = data.pop("stage_times")
    return Profile(
        **data,
        compute_table=tuple((int(b), float(t)) for b, t in table) if table is not None else None,
        stage_times=tuple(stages) if stages is not None else None,
    )


def _profile_to_dict(profile: Profile) -> dict[str, Any]:
    return {
        "name": profile.name,
        "compute_alpha": profile.compute_alpha,
        "compute_beta": profile.compute_beta,
        "compute_table": [list(entry) for entry in profile.compute_table] if profile.compute_table else None,
        "comm_alpha": profile.comm_alpha,
        "comm_beta": profile.comm_beta,
        "message_size": profile.message_size,
        "inter_node_comm_factor": profile.inter_node_comm_factor,
        "overlap_delta": profile.overlap_delta,
        "memory_base_gib": profile.memory_base_gib,
        "memory_per_sample_gib": profile.memory_per_sample_gib,
        "stage_times": list(profile.stage_times) if profile.stage_times is not None else None,
    }


def _validation_message(error: ValidationError) -> tuple[str, str]:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    extra = f" (and {error.error_count() - 1} more problems)" if error.error_count() > 1 else ""
    return location, f"{first['msg']}{extra}"


_FILE_KINDS = {INSTANCE_FORMAT: "an instance", SCHEDULE_FORMAT: "a schedule"}


def _check_kind(data: Any, expected: str, source: str) -> None:
    """A schedule given where an instance is expected (or the reverse) is named as such, instead of
    as dozens of missing fields."""
    found = data.get("format") if isinstance(data, dict) else None
    if isinstance(found, str) and found != expected and found in _FILE_KINDS:
        raise DuettoInputError(
            f"this is {_FILE_KINDS[found]} (format '{found}'), {_FILE_KINDS[expected]} is expected here",
            source=source,
            field="format",
        )


def instance_from_dict(data: Any, source: str = "instance") -> Instance:
    """Build an :class:`Instance` from parsed JSON, raising :class:`DuettoInputError` naming the field."""
    _check_kind(data, INSTANCE_FORMAT, source)
    try:
        spec = InstanceModel.model_validate(data)
    except ValidationError as error:
        location, message = _validation_message(error)
        raise DuettoInputError(message, source=source, field=location) from None
    try:
        profiles = {}
        for item in spec.profiles:
            if item.name in profiles:
                raise DuettoInputError(f"duplicate profile name '{item.name}'", field="profiles.name")
            profiles[item.name] = _profile_from_model(item)
        return Instance(
            cluster=Cluster(**spec.cluster.model_dump()),
            jobs=tuple(Job(**job.model_dump()) for job in spec.jobs),
            profiles=profiles,
            interference=_interference_from_model(spec.interference),
            name=spec.name,
            metadata=spec.metadata,
            progress=_progress_from_model(spec.progress),
        )
    except DuettoInputError as error:
        raise error.located(source) from None


def _progress_from_model(spec: SpecProgressModel | MuriProgressModel) -> ProgressRule:
    if isinstance(spec, MuriProgressModel):
        return MuriProgress(tuple(spec.stretch), spec.overheads, spec.default_overhead)
    return SPEC_PROGRESS


def _progress_to_dict(rule: ProgressRule) -> dict[str, Any]:
    if isinstance(rule, MuriProgress):
        return {
            "kind": "muri",
            "stretch": list(rule.stretch),
            "overheads": dict(rule.overheads),
            "default_overhead": rule.default_overhead,
        }
    return {"kind": "spec"}


def instance_to_dict(instance: Instance) -> dict[str, Any]:
    cluster = instance.cluster
    return {
        "format": INSTANCE_FORMAT,
        "version": FORMAT_VERSION,
        "name": instance.name,
        "cluster": {
            "nodes": cluster.nodes,
            "gpus_per_node": cluster.gpus_per_node,
            "gpu_memory_gib": cluster.gpu_memory_gib,
            "capacity": cluster.capacity,
        },
        "profiles": [_profile_to_dict(p) for p in instance.profiles.values()],
        "interference": _interference_to_dict(instance.interference),
        "jobs": [
            {
                "id": job.id,
                "arrival": job.arrival,
                "num_gpus": job.num_gpus,
                "iterations": job.iterations,
                "batch_size": job.batch_size,
                "profile": job.profile,
            }
            for job in instance.jobs
        ],
        "metadata": dict(instance.metadata),
        # written only when it is not SPEC.md's rule, so that SPEC instances keep their exact old JSON
        **({"progress": _progress_to_dict(instance.progress)} if instance.progress != SPEC_PROGRESS else {}),
    }


def schedule_from_dict(data: Any, source: str = "schedule") -> Schedule:
    """Build a :class:`Schedule` from parsed JSON, raising :class:`DuettoInputError` naming the field."""
    _check_kind(data, SCHEDULE_FORMAT, source)
    try:
        spec = ScheduleModel.model_validate(data)
    except ValidationError as error:
        location, message = _validation_message(error)
        raise DuettoInputError(message, source=source, field=location) from None
    try:
        return Schedule(
            plans=tuple(
                JobPlan(
                    plan.id,
                    tuple(Segment(s.start, tuple(s.gpus), s.steps, s.end) for s in plan.segments),
                    plan.completion,
                )
                for plan in spec.jobs
            ),
            slot=spec.slot,
            restart_overhead=spec.restart_overhead,
            producer=spec.producer,
            metadata=spec.metadata,
            capacity=spec.capacity,
        )
    except DuettoInputError as error:
        raise error.located(source) from None


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    return {
        "format": SCHEDULE_FORMAT,
        "version": FORMAT_VERSION,
        "producer": schedule.producer,
        "slot": schedule.slot,
        "restart_overhead": schedule.restart_overhead,
        "capacity": schedule.capacity,
        "jobs": [
            {
                "id": plan.job_id,
                "segments": [
                    {"start": s.start, "gpus": list(s.gpus), "steps": s.steps, "end": s.end} for s in plan.segments
                ],
                "completion": _finite_or_none(plan.claimed_completion),
            }
            for plan in schedule.plans
        ],
        "metadata": _jsonable(dict(schedule.metadata)),
    }


def _jsonable(value: Any) -> Any:
    """Make producer metadata JSON-safe (NaN/inf become null, tuples lists)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# --- files ----------------------------------------------------------------------------------------


def read_json(path: str | Path) -> Any:
    """Parse a JSON file, raising :class:`DuettoInputError` naming the file on any problem."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DuettoInputError("file not found", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise DuettoInputError(f"cannot read file: {error}", source=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise DuettoInputError(
            f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}", source=str(path)
        ) from None


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` sets it, racing other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a reader sees the old file or the whole new one, never a part.

    The file gets the mode a plain ``open(path, "w")`` would give it (an existing file's mode, else
    0666 less the umask), not the 0600 of the temporary file it is written through.
    """
    target = Path(path)
    if target.is_dir():
        raise DuettoInputError("is a directory; give a file name", source=str(target))
    try:
        mode = target.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as error:  # a read-only or missing place: a user's path, not a bug
        raise DuettoInputError(f"cannot write here: {error.strerror or error}", source=str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, target)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):  # e.g. the disk is full: one line, the old file untouched
            raise DuettoInputError(f"cannot write: {error.strerror or error}", source=str(target)) from None
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON to ``path`` atomically (:func:`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def load_instance(path: str | Path) -> Instance:
    return instance_from_dict(read_json(path), source=str(path))


def save_instance(instance: Instance, path: str | Path) -> None:
    write_json_atomic(path, instance_to_dict(instance))


def load_schedule(path: str | Path) -> Schedule:
    return schedule_from_dict(read_json(path), source=str(path))


def save_schedule(schedule: Schedule, path: str | Path) -> None:
    write_json_atomic(path, schedule_to_dict(schedule))


def instance_json_schema() -> dict[str, Any]:
    return InstanceModel.model_json_schema()


def schedule_json_schema() -> dict[str, Any]:
    return ScheduleModel.model_json_schema()
