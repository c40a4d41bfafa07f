"""NVIDIA MPS control daemon lifecycle for one node (Castor §8: spatial sharing through MPS).

``nvidia-cuda-mps-control -d`` starts the control daemon with its pipe and log directories taken from
``CUDA_MPS_PIPE_DIRECTORY`` / ``CUDA_MPS_LOG_DIRECTORY``; it writes ``nvidia-cuda-mps-control.pid``
into the pipe directory. Commands (``set_default_active_thread_percentage 50``, ``get_server_list``,
``quit``) are written to the standard input of ``nvidia-cuda-mps-control`` run without arguments.
CUDA clients connect to the daemon through the same pipe directory, so every job the runtime launches
gets these two variables, and ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` when it shares a GPU.

Tests and CI run this code against a stand-in ``nvidia-cuda-mps-control`` script (no GPU there);
the command lines and files are those of the real tool.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cluster_runtime.procs import is_running

log = logging.getLogger(__name__)

PID_FILE = "nvidia-cuda-mps-control.pid"
DEFAULT_BINARY = "nvidia-cuda-mps-control"


class MpsError(RuntimeError):
    """The MPS control daemon could not be started or did not answer."""


@dataclass
class MpsStatus:
    enabled: bool
    alive: bool
    pid: int | None
    restarts: int
    pipe_dir: str
    log_dir: str
    default_active_thread_percentage: int | None
    binary: str | None
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


class MpsControl:
    """One node's MPS control daemon.

    Parameters
    ----------
    pipe_dir, log_dir
        ``CUDA_MPS_PIPE_DIRECTORY`` and ``CUDA_MPS_LOG_DIRECTORY`` (created 0700 if missing).
    binary
        The control program (name on ``PATH`` or a path).
    default_active_thread_percentage
        Sent as ``set_default_active_thread_percentage`` after every start (``None``: leave MPS's 100).
    timeout
        Seconds to wait for the daemon to come up or go away, and for one command.
    """

    def __init__(
        self,
        pipe_dir: str | Path,
        log_dir: str | Path,
        binary: str = DEFAULT_BINARY,
        default_active_thread_percentage: int | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.pipe_dir = Path(pipe_dir)
        self.log_dir = Path(log_dir)
        self.binary = binary
        self.default_active_thread_percentage = default_active_thread_percentage
        self.timeout = timeout
        self.restarts = 0
        self._started_once = False

    # --- environment -----------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """The variables that point a process (control daemon or CUDA client) at this daemon."""
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir), "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir)}

    def client_env(self, active_thread_percentage: int | None = None) -> dict[str, str]:
        """Environment of a job launched as an MPS client (thread share only when it shares a GPU)."""
        env = self.env()
        if active_thread_percentage is not None:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(int(active_thread_percentage))
        return env

    def _resolved_binary(self) -> str:
        found = shutil.which(self.binary)
        if found is None:
            raise MpsError(f"'{self.binary}' not found on PATH")
        return found

    def _run(self, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **self.env()}
        return subprocess.run(
            [self._resolved_binary(), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=full_env,
            timeout=self.timeout,
            check=False,
        )

    # --- lifecycle -------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The control daemon's pid from its pid file, or ``None``."""
        try:
            return int((self.pipe_dir / PID_FILE).read_text().strip())
        except (FileNotFoundError, ValueError, OSError):
            return None

    def alive(self) -> bool:
        """``True`` if the pid file names a live process."""
        pid = self.pid()
        return pid is not None and is_running(pid, None)

    def start(self) -> None:
        """Start the control daemon (``-d``) unless one already runs; then set the default thread share.

        Raises
        ------
        MpsError
            If the program is missing, fails, or no live daemon appears within ``timeout``.
        """
        if self.alive():
            return
        for folder in (self.pipe_dir, self.log_dir):
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
        # A stale pid file (daemon killed) would make us think it is up; remove it first.
        with contextlib.suppress(FileNotFoundError):
            (self.pipe_dir / PID_FILE).unlink()
        result = self._run(["-d"])
        if result.returncode != 0:
            raise MpsError(
                f"'{self.binary} -d' failed with exit code {result.returncode}: "
                f"{(result.stderr or result.stdout).strip()}"
            )
        deadline = time.monotonic() + self.timeout
        while not self.alive():
            if time.monotonic() > deadline:
                raise MpsError(f"MPS control daemon did not write {self.pipe_dir / PID_FILE} in {self.timeout} s")
            time.sleep(0.02)
        if self._started_once:
            self.restarts += 1
        self._started_once = True
        if self.default_active_thread_percentage is not None:
            self.command(f"set_default_active_thread_percentage {int(self.default_active_thread_percentage)}")
        log.info("MPS control daemon up (pid %s, pipe %s)", self.pid(), self.pipe_dir)

    def command(self, text: str) -> str:
        """Send one control command and return the daemon's answer.

        Raises
        ------
        MpsError
            If the client exits with an error (e.g. no daemon).
        """
        result = self._run([], stdin=text + "\n")
        if result.returncode != 0:
            raise MpsError(
                f"MPS command {text!r} failed ({result.returncode}): {(result.stderr or result.stdout).strip()}"
            )
        return result.stdout.strip()

    def ensure(self) -> bool:
        """Restart the control daemon if it died; returns ``True`` if it had to be restarted."""
        if self.alive():
            return False
        log.warning("MPS control daemon of %s is not running; restarting it", self.pipe_dir)
        self.start()
        return True

    def quit(self) -> None:
        """``quit`` the control daemon and wait until it is gone (no-op if it is not running)."""
        pid = self.pid()
        if pid is None or not is_running(pid, None):
            return
        try:
            self.command("quit")
        except (MpsError, subprocess.TimeoutExpired) as error:
            log.warning("MPS quit failed: %s", error)
            return
        deadline = time.monotonic() + self.timeout
        while is_running(pid, None) and time.monotonic() < deadline:
            time.sleep(0.02)

    def status(self, enabled: bool = True, message: str = "") -> MpsStatus:
        return MpsStatus(
            enabled=enabled,
            alive=self.alive(),
            pid=self.pid(),
            restarts=self.restarts,
            pipe_dir=str(self.pipe_dir),
            log_dir=str(self.log_dir),
            default_active_thread_percentage=self.default_active_thread_percentage,
            binary=shutil.which(self.binary),
            message=message,
        )


def mps_available(binary: str = DEFAULT_BINARY) -> bool:
    """``True`` if the MPS control program can be found."""
    return shutil.which(binary) is not None
