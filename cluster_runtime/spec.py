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

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JobSpecModel(_Strict):
    id: str = Field(pattern=JOB_ID_PATTERN, description="unique job id (letters, digits, '_', '.', '-')")
    command: list[str] = Field(min_length=1, description="argv of the training process; never run by a shell")
    num_gpus: int = Field(1, ge=1, description="gang size G_j")
    iterations: int = Field(ge=1, description="iterations I_j (optimizer steps over the full batch)")
    batch_size: int = Field(ge=1, description="the user's per-GPU batch size B_j")
    profile: str | ProfileModel = Field(description="profile name known to the daemon, or a profile object")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    workdir: str | None = Field(None, description="working directory (default: the launch's run directory)")
    max_retries: int | None = Field(None, ge=0, description="restarts after a crash (default: daemon setting)")


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
    job_id: str = Field(min_length=1)
    gpus: list[int | tuple[int, int] | str] = Field(min_length=1)
    steps: int = Field(1, ge=1, description="gradient-accumulation steps")


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


def plan_from_dict(data: Any, source: str = "plan") -> list[RawPlanEntry]:
    """Parse a plan (object with ``entries`` or a bare list), raising :class:`DuettoInputError`."""
    if isinstance(data, list):
        data = {"format": PLAN_FORMAT, "entries": data}
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
