"""Helpers shared by the runtime tests: daemons as real processes, job specs for the stand-in job,
and clean-up that leaves no process behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cluster_runtime.api import DaemonUnavailable, RuntimeClient

FIXTURES = Path(__file__).resolve().parent
STANDIN = FIXTURES / "train_standin.py"
REPO = FIXTURES.parent.parent


def runtime_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of daemons and CLI calls in tests: the stand-in MPS control program first on
    PATH, then this Python's folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DUETTO_", "CUDA_MPS_"))}
    env["PATH"] = os.pathsep.join([str(FIXTURES), str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update(extra or {})
    return env


def job_spec(
    job_id: str,
    iterations: int = 5,
    batch_size: int = 8,
    num_gpus: int = 1,
    alpha: float = 0.01,
    beta: float = 0.0,
    args: tuple[str, ...] = (),
    memory: tuple[float, float] = (1.0, 0.1),
    profile: str | None = None,
    max_retries: int | None = None,
    ledger: Path | None = None,
    lock_dir: Path | None = None,
) -> dict[str, Any]:
    """A job running the stand-in training script (inline profile unless ``profile`` names one)."""
    command = [
        sys.executable,
        str(STANDIN),
        "--alpha",
        str(alpha),
        "--beta",
        str(beta),
        "--sub-batch",
        "{sub_batch}",
        "--steps",
        "{steps}",
        *args,
    ]
    if ledger is not None:
        command += ["--ledger", str(ledger)]
    if lock_dir is not None:
        command += ["--lock-dir", str(lock_dir)]
    spec: dict[str, Any] = {
        "id": job_id,
        "command": command,
        "num_gpus": num_gpus,
        "iterations": iterations,
        "batch_size": batch_size,
        "profile": profile
        or {
            "name": f"standin-{job_id}",
            "compute_alpha": alpha or 0.001,
            "compute_beta": beta,
            "memory_base_gib": memory[0],
            "memory_per_sample_gib": memory[1],
        },
    }
    if max_retries is not None:
        spec["max_retries"] = max_retries
    return spec


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events(ledger: list[dict[str, Any]], kind: str, job: str | None = None) -> list[dict[str, Any]]:
    return [e for e in ledger if e["event"] == kind and (job is None or e["job"] == job)]


class DaemonProcess:
    """``python -m cluster_runtime daemon`` as a real process on a test state directory."""

    def __init__(self, state: Path, *args: str, log: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.state = state
        self.args = list(args)
        self.env = dict(env or {})
        self.log = log or state.parent / f"{state.name}-daemon.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.client = RuntimeClient(socket_path=state / "duetto.sock", timeout=30)

    def start(self, *extra: str, wait: bool = True) -> DaemonProcess:
        command = [
            sys.executable,
            "-m",
            "cluster_runtime",
            "daemon",
            "--state",
            str(self.state),
            "--reconcile-interval",
            "0.05",
            "--retry-backoff",
            "0",
            "--stop-grace",
            "3",
            *self.args,
            *extra,
        ]
        handle = open(self.log, "ab")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            command,
            env=runtime_env(self.env),
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
        handle.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.process.returncode}:\n{self.log.read_text()}")
            with contextlib.suppress(DaemonUnavailable, OSError):
                self.client.health()
                return
            time.sleep(0.05)
        raise TimeoutError(f"daemon not ready:\n{self.log.read_text()}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the daemon only (its jobs live in their own sessions and keep running)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(Exception):
            self.client.shutdown()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()


def daemon_command(state: Path, *args: str) -> list[str]:
    """The command line of a daemon on ``state`` (for starts that are expected to be refused)."""
    return [sys.executable, "-m", "cluster_runtime", "daemon", "--state", str(state), *args]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def leftover_processes(marker: str) -> list[int]:
    """Pids of live processes whose command line mentions ``marker`` (a test's folder), or whose
    environment does (a job's helper that left its session: ``DUETTO_RUN_DIR`` is under the folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        mine = entry.name.isdigit() and int(entry.name) != os.getpid()
        if mine and (
            any(marker in part for part in _cmdline(int(entry.name))) or marker.encode() in _environ(int(entry.name))
        ):
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat[stat.rfind(")") + 2] not in "ZX":
                found.append(int(entry.name))
    return found


def mps_pids(state: Path) -> list[int]:
    pids = []
    for pid_file in state.glob("mps/*/pipe/nvidia-cuda-mps-control.pid"):
        with contextlib.suppress(ValueError, OSError):
            pids.append(int(pid_file.read_text().strip()))
    return [p for p in pids if Path(f"/proc/{p}").exists()]


def cleanup(folder: Path) -> list[int]:
    """Kill every process a test left under ``folder`` (jobs, wrappers, daemons, stand-in MPS);
    returns what it had to kill (a passing test leaves nothing)."""
    killed = []
    for pid in leftover_processes(str(folder)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            killed.append(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for state in {p.parent.parent.parent.parent for p in folder.glob("**/mps/*/pipe/nvidia-cuda-mps-control.pid")}:
        for pid in mps_pids(state):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed
