"""Daemon configuration: a JSON file (``--config``) and command-line flags over it.

Every field has a safe default; see docs/runtime.md for a complete example.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from formulation.errors import DuettoInputError
from formulation.io import _validation_message

SOCKET_NAME = "duetto.sock"
DB_NAME = "state.db"
LOCK_NAME = "daemon.lock"


def default_state_dir() -> Path:
    """``$DUETTO_STATE``, else ``$XDG_STATE_HOME/duetto``, else ``~/.local/state/duetto``."""
    env = os.environ.get("DUETTO_STATE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    return Path(xdg) / "duetto" if xdg else Path.home() / ".local" / "state" / "duetto"


#: Variables of the daemon's (or Ray agent's) environment a job process gets; ``NAME*`` is a prefix.
#: Everything else (credentials, tokens, the daemon's own settings) stays out: a job gets this, the
#: job contract's variables and its spec's ``env``.
DEFAULT_JOB_ENV_PASSTHROUGH = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "TERM",
    "HOSTNAME",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CUDA_HOME",
    "CUDA_PATH",
    "NCCL_*",
)


class MpsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["auto", "on", "off"] = Field(
        default="auto", description="on: MPS required; auto: used when the control program is on PATH; off: never"
    )
    binary: str = "nvidia-cuda-mps-control"
    pipe_dir: str | None = Field(default=None, description="default <state>/mps/node<k>/pipe (per node)")
    log_dir: str | None = Field(default=None, description="default <state>/mps/node<k>/log (per node)")
    default_active_thread_percentage: int | None = Field(default=None, ge=1, le=100)
    shared_active_thread_percentage: int | None = Field(
        default=None, ge=1, le=100, description="for a job that shares a GPU; default 100 // (jobs on the GPU)"
    )
    check_interval_s: float = Field(default=2.0, gt=0, description="how often the control daemon is checked")


class RuntimeConfig(BaseModel):
    """Everything the daemon needs; paths are resolved against the state directory."""

    model_config = ConfigDict(extra="forbid")

    state_dir: Path = Field(default_factory=default_state_dir)
    backend: Literal["local", "ray"] = "local"
    # inventory (local backend): a fake spec, a file, or real GPUs through NVML
    fake_gpus: str | None = Field(default=None, description="NODESxGPUS, e.g. 2x4 (no GPU needed)")
    inventory_file: Path | None = None
    gpu_memory_gib: float = Field(default=32.0, gt=0, description="memory of each fake GPU")
    capacity: int = Field(default=2, ge=1, description="C: most jobs on one GPU")
    # ray backend
    ray_address: str | None = Field(default=None, description="Ray cluster address (default: 'auto')")
    ray_namespace: str = "duetto"
    ray_fake_gpus: bool = Field(
        default=False, description="nodes without NVML GPUs use their Ray GPU count with fake UUIDs (tests)"
    )
    ray_placement_timeout_s: float = Field(default=10.0, gt=0)
    # scheduling
    policy: str | None = Field(default=None, description="heuristics policy asked on every arrival/completion")
    profiles_file: Path | None = Field(
        default=None, description="instance-format JSON whose profiles (and interference) jobs may name"
    )
    default_xi: float = Field(default=1.0, ge=1.0, description="interference ratio for unmeasured pairs")
    # reconcile
    reconcile_interval_s: float = Field(default=0.5, gt=0)
    stop_grace_s: float = Field(default=10.0, ge=0)
    retry_backoff_s: float = Field(default=1.0, ge=0)
    default_max_retries: int = Field(default=3, ge=0)
    mps: MpsConfig = Field(default_factory=lambda: MpsConfig())
    job_env_passthrough: list[str] = Field(
        default_factory=lambda: list(DEFAULT_JOB_ENV_PASSTHROUGH),
        description="daemon environment variables jobs inherit (NAME or NAME* prefix); nothing else leaks",
    )
    # API
    listen: str | None = Field(
        default=None, description="HOST:PORT to listen on TCP (needs token_file); default: unix socket"
    )
    token_file: Path | None = None
    socket_path: Path | None = Field(default=None, description="default <state>/duetto.sock")
    # fault injection for the crash tests: SIGKILL self after this many process spawns
    debug_crash_after_launches: int | None = Field(default=None, ge=1)

    @property
    def socket(self) -> Path:
        return self.socket_path or self.state_dir / SOCKET_NAME

    @property
    def db_path(self) -> Path:
        return self.state_dir / DB_NAME

    @property
    def runs_dir(self) -> Path:
        return self.state_dir / "runs"

    def mps_dirs(self, node: int) -> tuple[Path, Path]:
        """(pipe, log) directories of node ``node``'s MPS control daemon."""
        base = self.state_dir / "mps" / f"node{node}"
        pipe = Path(self.mps.pipe_dir.format(node=node)) if self.mps.pipe_dir else base / "pipe"
        logs = Path(self.mps.log_dir.format(node=node)) if self.mps.log_dir else base / "log"
        return pipe, logs


def load_config(path: str | Path | None, **overrides: Any) -> RuntimeConfig:
    """A config from a JSON file (optional) with non-``None`` overrides applied on top."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DuettoInputError("file not found", source=str(path)) from None
        except (OSError, json.JSONDecodeError) as error:
            raise DuettoInputError(f"cannot read config: {error}", source=str(path)) from None
        if not isinstance(data, dict):
            raise DuettoInputError("expected a JSON object", source=str(path))
    for key, value in overrides.items():
        if value is None:
            continue
        if key.startswith("mps_"):
            data.setdefault("mps", {})[key[4:]] = value
        else:
            data[key] = value
    try:
        return RuntimeConfig.model_validate(data)
    except ValidationError as error:
        location, message = _validation_message(error)
        raise DuettoInputError(message, source=str(path) if path else "config", field=location) from None
