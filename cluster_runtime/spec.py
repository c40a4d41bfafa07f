"""What arrives through the API: job specs and plans, and the job contract (environment, templating).

Job spec (``duetto submit job.json``)::

    {"id": "bert-1", "command": ["python", "train.py", "--micro-batch", "{sub_batch}"],
     "num_gpus": 1, "iterations": 500, "batch_size": 64, "profile": "bert",
     "env": {"DATA": "/data"}, "workdir": "/home/me/bert", "max_retries": 3}

``profile`` names a profile the daemon knows (its profiles file or a measured profile) or is a
profile object in the instance format (formulation/io.py ``ProfileModel``).

Plan (``duetto apply plan.json``): the complete desired set of running jobs::

    {"format": "duetto-plan", "entries": [{"job_id": "bert-1", "gpus": [0, 1], "steps": 2},
                                          {"job_id": "gpt-2", "gpus": [[1, 0]], "steps": 1}]}

GPUs are flat ids, ``[node, index]`` pairs or GPU UUID strings. A bare list of entries is accepted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from formulation.errors import DuettoInputError
from formulation.io import ProfileModel, _profile_from_model, _validation_message
from formulation.speed import Profile

PLAN_FORMAT: Literal["duetto-plan"] = "duetto-plan"

#: Placeholders a command may contain; each ``{name}`` argument part is replaced at launch.
TEMPLATE_FIELDS = (
    "job_id",
    "launch_id",
    "attempt",
    "batch_size",
    "sub_batch",
    "steps",
    "iterations",
    "start_iteration",
    "num_gpus",
    "gpus",
    "node_rank",
    "num_nodes",
    "master_addr",
    "master_port",
    "progress_file",
    "run_dir",
)
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Job ids name folders under the state directory: keep them to a safe alphabet.
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
_RESERVED_ENV = ("DUETTO_", "CUDA_VISIBLE_DEVICES", "CUDA_MPS_")
# An environment variable name exec can pass on: no '=' (it would split the name), no NUL.
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Bounds that keep every number exact in a float (the model's time arithmetic) and in SQLite's 64-bit
# integers: far above anything real, far below what overflows.
MAX_ITERATIONS = 10**12
MAX_BATCH_SIZE = 10**9
MAX_GPUS = 2**16
MAX_RETRIES = 10**4
MAX_STEPS = 2**20


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JobSpecModel(_Strict):
    # Strict types: a JSON string, float or boolean is never coerced into a number (``"2"``, ``2.0``,
    # ``true`` are rejected with the field named), and numbers are bounded so none overflows later.
    id: StrictStr = Field(pattern=JOB_ID_PATTERN, description="unique job id (letters, digits, '_', '.', '-')")
    command: list[StrictStr] = Field(min_length=1, description="argv of the training process; never run by a shell")
    num_gpus: StrictInt = Field(1, ge=1, le=MAX_GPUS, description="gang size G_j")
    iterations: StrictInt = Field(
        ge=1, le=MAX_ITERATIONS, description="iterations I_j (optimizer steps over the full batch)"
    )
    batch_size: StrictInt = Field(ge=1, le=MAX_BATCH_SIZE, description="the user's per-GPU batch size B_j")
    profile: StrictStr | ProfileModel = Field(description="profile name known to the daemon, or a profile object")
    env: dict[StrictStr, StrictStr] = Field(default_factory=dict, description="extra environment variables")
    workdir: StrictStr | None = Field(
        None, description="absolute working directory (default: the launch's run directory)"
    )
    max_retries: StrictInt | None = Field(
        None, ge=0, le=MAX_RETRIES, description="restarts after a crash (default: daemon setting)"
    )


@dataclass(frozen=True)
class JobSpec:
    """A validated job submission."""

    id: str
    command: tuple[str, ...]
    num_gpus: int
    iterations: int
    batch_size: int
    profile_name: str
    inline_profile: Profile | None
    env: Mapping[str, str]
    workdir: str | None
    max_retries: int | None
    raw: Mapping[str, Any]


def job_spec_from_dict(data: Any, source: str = "job") -> JobSpec:
    """Validate a job spec, raising :class:`DuettoInputError` naming the field."""
    try:
        model = JobSpecModel.model_validate(data)
    except ValidationError as error:
        location, message = _validation_message(error)
        raise DuettoInputError(message, source=source, field=location) from None
    _check_startable(model, source)
    for name in model.env:
        if name.startswith(_RESERVED_ENV):
            raise DuettoInputError(
                f"'{name}' is set by the runtime (job contract) and may not be overridden",
                source=source,
                field="env",
            )
    for part in model.command:
        for placeholder in _PLACEHOLDER.findall(part.replace("{{", "").replace("}}", "")):
            if placeholder not in TEMPLATE_FIELDS:
                raise DuettoInputError(
                    f"unknown placeholder '{{{placeholder}}}' in {part!r}; known: " + ", ".join(TEMPLATE_FIELDS),
                    source=source,
                    field="command",
                )
    inline: Profile | None = None
    if isinstance(model.profile, ProfileModel):
        try:
            inline = _profile_from_model(model.profile)
        except DuettoInputError as error:
            raise error.located(source) from None
        name = inline.name
    else:
        name = model.profile
    return JobSpec(
        id=model.id,
        command=tuple(model.command),
        num_gpus=model.num_gpus,
        iterations=model.iterations,
        batch_size=model.batch_size,
        profile_name=name,
        inline_profile=inline,
        env=dict(model.env),
        workdir=model.workdir,
        max_retries=model.max_retries,
        raw=model.model_dump(mode="json"),
    )


def _check_startable(model: JobSpecModel, source: str) -> None:
    """Refuse at the door what ``exec`` could never start, rather than fail after every retry."""
    if not model.command[0]:
        raise DuettoInputError("the program (first argument) is empty", source=source, field="command.0")
    for index, part in enumerate(model.command):
        if "\0" in part:
            raise DuettoInputError("an argument holds a NUL character", source=source, field=f"command.{index}")
    for name, value in model.env.items():
        if not ENV_NAME_PATTERN.match(name):
            raise DuettoInputError(
                f"environment variable name {name!r} is not a valid name (letters, digits, '_'; no '=')",
                source=source,
                field="env",
            )
        if "\0" in value:
            raise DuettoInputError(f"the value of '{name}' holds a NUL character", source=source, field="env")
    if model.workdir is not None and ("\0" in model.workdir or not model.workdir.startswith("/")):
        raise DuettoInputError(
            f"workdir must be an absolute path, got {model.workdir!r}", source=source, field="workdir"
        )


def render_command(command: tuple[str, ...] | list[str], values: Mapping[str, Any]) -> list[str]:
    """Replace ``{name}`` placeholders in each argument (``{{``/``}}`` give literal braces).

    The result is an argv list handed to ``exec`` directly: no shell ever sees it, so an argument
    is one argument whatever characters it holds.
    """

    def one(part: str) -> str:
        pieces = part.split("{{")
        out = []
        for piece in pieces:
            subs = piece.split("}}")
            out.append("}".join(_PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), s) for s in subs))
        return "{".join(out)

    return [one(part) for part in command]


# --- plans -------------------------------------------------------------------------------------------


class PlanEntryModel(_Strict):
    job_id: StrictStr = Field(min_length=1)
    # Strict: ``true`` or ``3.0`` is not GPU 1 or 3 (bool is an int subclass in Python; lax mode took it).
    gpus: list[StrictInt | tuple[StrictInt, StrictInt] | StrictStr] = Field(min_length=1)
    steps: StrictInt = Field(1, ge=1, le=MAX_STEPS, description="gradient-accumulation steps")


class PlanModel(_Strict):
    format: Literal["duetto-plan"] = PLAN_FORMAT
    version: Literal[1] = 1
    entries: list[PlanEntryModel]
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RawPlanEntry:
    """A plan entry as written: GPUs not yet resolved against the inventory."""

    job_id: str
    gpus: tuple[int | tuple[int, int] | str, ...]
    steps: int


def _gpu_ok(gpu: Any) -> bool:
    if isinstance(gpu, bool):
        return False
    if isinstance(gpu, int | str):
        return True
    return isinstance(gpu, list | tuple) and len(gpu) == 2 and all(_gpu_ok(x) and isinstance(x, int) for x in gpu)


def _check_gpu_notation(data: Any, source: str) -> None:
    """Name a GPU given as a boolean, a float or a malformed pair in one clear line (the union of
    notations would otherwise give one message per notation tried)."""
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return
    for i, entry in enumerate(entries):
        gpus = entry.get("gpus") if isinstance(entry, dict) else None
        if not isinstance(gpus, list):
            continue
        for k, gpu in enumerate(gpus):
            if not _gpu_ok(gpu):
                raise DuettoInputError(
                    f"a GPU is a flat id (integer), a [node, index] pair of integers or a UUID string, "
                    f"got {json.dumps(gpu)}",
                    source=source,
                    field=f"entries.{i}.gpus.{k}",
                )


def plan_from_dict(data: Any, source: str = "plan") -> list[RawPlanEntry]:
    """Parse a plan (object with ``entries`` or a bare list), raising :class:`DuettoInputError`."""
    if isinstance(data, list):
        data = {"format": PLAN_FORMAT, "entries": data}
    _check_gpu_notation(data, source)
    try:
        model = PlanModel.model_validate(data)
    except ValidationError as error:
        location, message = _validation_message(error)
        raise DuettoInputError(message, source=source, field=location) from None
    entries = []
    for entry in model.entries:
        gpus: list[int | tuple[int, int] | str] = []
        for gpu in entry.gpus:
            gpus.append((int(gpu[0]), int(gpu[1])) if isinstance(gpu, tuple) else gpu)
        entries.append(RawPlanEntry(entry.job_id, tuple(gpus), entry.steps))
    return entries
