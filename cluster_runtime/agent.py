"""The node agent: everything that happens on one GPU node.

It keeps the node's MPS control daemon alive, starts job processes (through ``supervise.py``, in
their own session, argv only), watches them (pid + process start time), reads their progress files,
stops them (``SIGTERM`` to the process group, ``SIGKILL`` after the grace period) and re-adopts
processes a crashed daemon left running. The local backend holds one agent per node in the daemon's
process; the Ray backend runs the same class as a Ray actor pinned to its node.

Every method takes and returns plain data (dicts, lists, strings) so the Ray actor can serve it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_runtime import procs
from cluster_runtime.mps import MpsControl, MpsError, mps_available

log = logging.getLogger(__name__)

SUPERVISE = str(Path(__file__).with_name("supervise.py"))
EXIT_FILE = "exit.json"
PROGRESS_FILE = "progress"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"
WRAPPER_PID_FILE = "wrapper.pid"
# Variables of the daemon's own environment that must not leak into a job: the runtime sets them.
_STRIPPED_PREFIXES = ("DUETTO_", "CUDA_MPS_")
_STRIPPED = ("CUDA_VISIBLE_DEVICES",)


@dataclass
class _Tracked:
    pid: int
    proc_start: str | None
    run_dir: Path


def read_progress(path: Path) -> tuple[float, float | None] | None:
    """The last complete ``ITERATION [UNIX_TIME]`` line of a progress file, or ``None``."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 4096))
            tail = handle.read()
    except OSError:
        return None
    lines = tail.split(b"\n")
    # The last element is an incomplete line (or empty after a final newline): skip it.
    for raw in reversed(lines[:-1]):
        parts = raw.split()
        if not parts:
            continue
        try:
            iteration = float(parts[0])
            stamp = float(parts[1]) if len(parts) > 1 else None
        except ValueError:
            continue
        return iteration, stamp
    return None


def read_progress_history(path: Path) -> list[tuple[float, float]]:
    """Every ``(iteration, unix_time)`` line of a progress file (lines without a time are skipped)."""
    result: list[tuple[float, float]] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return result
    for raw in text.split("\n")[:-1]:
        parts = raw.split()
        if len(parts) >= 2:
            try:
                result.append((float(parts[0]), float(parts[1])))
            except ValueError:
                continue
    return result


def read_wrapper_pid(run_dir: Path) -> tuple[int, str, str] | None:
    """``(pid, start time, launch id)`` from a wrapper's pid file, or ``None``."""
    try:
        parts = (run_dir / WRAPPER_PID_FILE).read_text(encoding="utf-8").split()
        return int(parts[0]), parts[1], parts[2]
    except (OSError, ValueError, IndexError):
        return None


def read_exit(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / EXIT_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def job_environment(extra: dict[str, str], passthrough: tuple[str, ...] | list[str] | None = None) -> dict[str, str]:
    """The allow-listed part of the daemon's environment (``passthrough``: names, or prefixes ending in
    ``*``; default :data:`~cluster_runtime.config.DEFAULT_JOB_ENV_PASSTHROUGH`), never a runtime-owned
    variable, plus ``extra`` (the job contract and the job's own ``env``)."""
    from cluster_runtime.config import DEFAULT_JOB_ENV_PASSTHROUGH

    allowed = DEFAULT_JOB_ENV_PASSTHROUGH if passthrough is None else tuple(passthrough)
    names = {a for a in allowed if not a.endswith("*")}
    prefixes = tuple(a[:-1] for a in allowed if a.endswith("*"))
    env = {
        key: value
        for key, value in os.environ.items()
        if (key in names or (prefixes and key.startswith(prefixes)))
        and not key.startswith(_STRIPPED_PREFIXES)
        and key not in _STRIPPED
    }
    env.update(extra)
    return env


class NodeAgent:
    """One node's agent.

    Parameters
    ----------
    node
        The node's index in the inventory.
    mps
        ``{"mode", "binary", "pipe_dir", "log_dir", "default_active_thread_percentage"}``; ``mode`` is
        ``"on"`` (required), ``"auto"`` (used when the binary is found) or ``"off"``.
    gpus
        This node's GPUs as ``[{"uuid", "memory_gib", "name"}]`` (fake inventory), or ``None`` to
        discover them through NVML (falling back to ``fake_gpu_count`` fake GPUs if given).
    python
        Interpreter that runs ``supervise.py``.
    env_passthrough
        Variables of this process's environment a job gets (see :func:`job_environment`).
    """

    def __init__(
        self,
        node: int,
        mps: dict[str, Any],
        gpus: list[dict[str, Any]] | None = None,
        fake_gpu_count: int | None = None,
        fake_memory_gib: float = 32.0,
        python: str | None = None,
        env_passthrough: list[str] | None = None,
    ) -> None:
        self.node = node
        self.env_passthrough = env_passthrough
        self.python = python or sys.executable
        self._tracked: dict[str, _Tracked] = {}
        self._zygote: subprocess.Popen[str] | None = None
        self._zygote_lock = threading.Lock()
        self._gpus = gpus
        self._fake_gpu_count = fake_gpu_count
        self._fake_memory_gib = fake_memory_gib
        mode = mps.get("mode", "auto")
        binary = mps.get("binary", "nvidia-cuda-mps-control")
        self.mps_enabled = mode == "on" or (mode == "auto" and mps_available(binary))
        self.mps_message = "" if self.mps_enabled or mode == "off" else f"'{binary}' not on PATH: MPS off"
        self.mps = MpsControl(
            mps["pipe_dir"],
            mps["log_dir"],
            binary=binary,
            default_active_thread_percentage=mps.get("default_active_thread_percentage"),
        )

    # --- node facts --------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """Host name, address, pid and GPUs of this node (NVML first, then the fake list)."""
        gpus = self._gpus
        if gpus is None:
            from cluster_runtime.inventory import discover_local_gpus

            found = discover_local_gpus()
            if found:
                gpus = [{"uuid": u, "memory_gib": m, "name": n} for u, m, n in found]
            elif self._fake_gpu_count:
                host = socket.gethostname()
                gpus = [
                    {
                        "uuid": f"GPU-fake-{host}-{os.getpid()}-{i}",
                        "memory_gib": self._fake_memory_gib,
                        "name": "fake",
                    }
                    for i in range(self._fake_gpu_count)
                ]
            else:
                gpus = []
            self._gpus = gpus
        return {
            "hostname": socket.gethostname(),
            "address": _node_address(),
            "pid": os.getpid(),
            "gpus": gpus,
            "fake": any(str(g.get("name")) == "fake" for g in gpus),
        }

    def ping(self) -> int:
        return os.getpid()

    def free_port(self) -> int:
        """A TCP port free on this node now (for a multi-node gang's rendezvous)."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            return int(sock.getsockname()[1])

    # --- MPS -------------------------------------------------------------------------------------
    def start_mps(self) -> dict[str, Any]:
        """Bring the node up: the MPS control daemon (if enabled) and the launch zygote."""
        if self.mps_enabled:
            self.mps.start()
        self.warm()
        return self.mps_status()

    def ensure_mps(self) -> dict[str, Any]:
        """Restart a dead control daemon; the status says whether it did."""
        restarted = False
        message = self.mps_message
        if self.mps_enabled:
            try:
                restarted = self.mps.ensure()
            except MpsError as error:
                message = f"MPS control daemon down and restart failed: {error}"
                log.error(message)
        status = self.mps_status(message)
        status["restarted"] = restarted
        return status

    def quit_mps(self) -> None:
        if self.mps_enabled:
            self.mps.quit()

    def mps_status(self, message: str | None = None) -> dict[str, Any]:
        return self.mps.status(self.mps_enabled, self.mps_message if message is None else message).to_dict()

    def mps_command(self, text: str) -> str:
        return self.mps.command(text)

    # --- processes -------------------------------------------------------------------------------
    def launch(self, request: dict[str, Any]) -> dict[str, Any]:
        """Start one job process; see :meth:`launch_many`."""
        answer = self.launch_many([request])[0]
        if "error" in answer:
            raise RuntimeError(f"launch {request['launch_id']}: {answer['error']}")
        return answer

    def launch_many(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Start job processes, pipelined through this node's zygote.

        Each request: ``launch_id``, ``run_dir``, ``argv`` (list), ``env`` (the job contract and the
        user's variables), ``workdir`` (or ``None``), ``gpu_uuids`` and ``thread_percentage``.
        Returns ``{"pid", "proc_start"}`` (or ``{"error"}``) per request, in order. Idempotent per
        launch id: a launch that already runs is not started again.

        Raises
        ------
        RuntimeError
            If the zygote died mid-batch: which requests started is then unknown here (their wrappers'
            pid files tell; see :meth:`find`).
        """
        answers: list[dict[str, Any] | None] = [None] * len(requests)
        calls: list[tuple[int, dict[str, Any]]] = []
        stale = self._earlier_copies(requests)
        for index, request in enumerate(requests):
            launch_id = request["launch_id"]
            tracked = self._tracked.get(launch_id)
            if tracked is not None and self._alive(tracked):
                answers[index] = {"pid": tracked.pid, "proc_start": tracked.proc_start}
                continue
            if launch_id in stale:
                answers[index] = {"error": stale[launch_id], "runtime_fault": True}
                continue
            workdir = request.get("workdir")
            if workdir and not os.path.isdir(workdir):
                # Checked at submit on the local backend; on Ray this node is the first to know.
                answers[index] = {
                    "error": f"workdir {workdir!r} is not a directory on node {self.node}",
                    "job_fault": True,
                }
                continue
            run_dir = Path(request["run_dir"])
            run_dir.mkdir(parents=True, exist_ok=True)
            extra = dict(request["env"])
            extra["CUDA_VISIBLE_DEVICES"] = ",".join(request["gpu_uuids"])
            if self.mps_enabled:
                extra.update(self.mps.client_env(request.get("thread_percentage")))
            calls.append(
                (
                    index,
                    {
                        "launch_id": launch_id,
                        "argv": list(request["argv"]),
                        "env": job_environment(extra, self.env_passthrough),
                        "cwd": request.get("workdir") or str(run_dir),
                        "stdout": str(run_dir / STDOUT_FILE),
                        "stderr": str(run_dir / STDERR_FILE),
                        "exit_file": str(run_dir / EXIT_FILE),
                        "pid_file": str(run_dir / WRAPPER_PID_FILE),
                    },
                )
            )
        replies = self._zygote_calls([call for _, call in calls])
        for (index, call), reply in zip(calls, replies, strict=True):
            if "error" in reply:
                answers[index] = {"error": str(reply["error"])}
                continue
            pid, start = int(reply["pid"]), reply.get("proc_start")
            self._tracked[call["launch_id"]] = _Tracked(pid, start, Path(requests[index]["run_dir"]))
            answers[index] = {"pid": pid, "proc_start": start}
        return [answer or {"error": "no answer"} for answer in answers]

    def _earlier_copies(self, requests: list[dict[str, Any]]) -> dict[str, str]:
        """Before a job starts again: kill every process an earlier launch of it left on this node
        (an orphan whose wrapper was killed, a child that left its session). Returns, per launch id,
        why it must not start now (processes that survived ``SIGKILL``); normally empty."""
        # A job's first launch has no earlier copy to look for (no /proc scan for a wave of new jobs).
        wanted = {
            str(r["env"].get(procs.TAG_JOB)): str(r["launch_id"])
            for r in requests
            if str(r["env"].get("DUETTO_ATTEMPT", "2")) != "1"
        }
        members: dict[str, list[tuple[int, str]]] = {}
        if not wanted:
            return {}
        for pid, start, tags in procs.tagged_processes():
            job = tags.get(procs.TAG_JOB)
            if job in wanted and tags.get(procs.TAG_LAUNCH) != wanted[job]:
                members.setdefault(wanted[job], []).append((pid, start))
        blocked = {}
        for launch_id, found in members.items():
            log.warning(
                "node %s: killing %d process(es) of an earlier launch before %s", self.node, len(found), launch_id
            )
            left = procs.kill_processes(found)
            if left:
                blocked[launch_id] = f"processes of an earlier launch survive SIGKILL: {left}"
        return blocked

    def sweep(self, runs_dir: str) -> list[int]:
        """Kill every job process of this state directory still running here (shutdown: no orphan
        survives ``duetto shutdown``); returns the pids killed."""
        prefix = runs_dir.rstrip("/") + "/"
        found = [
            (pid, start)
            for pid, start, tags in procs.tagged_processes()
            if tags.get(procs.TAG_RUN_DIR, "").startswith(prefix)
        ]
        procs.kill_processes(found)
        return [pid for pid, _ in found]

    def warm(self) -> None:
        """Start the launch zygote now rather than on the first launch."""
        with self._zygote_lock:
            if self._zygote is None or self._zygote.poll() is not None:
                self._zygote = self._new_zygote()

    def _new_zygote(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [self.python, "-I", "-S", SUPERVISE, "--zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            close_fds=True,
        )

    def _zygote_calls(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send requests to this node's zygote (started on first use, restarted if it died), then
        read the answers: the zygote forks while we are still writing."""
        if not requests:
            return []
        with self._zygote_lock:
            zygote = self._zygote
            if zygote is None or zygote.poll() is not None:
                if zygote is not None:
                    log.warning("launch zygote of node %s died; starting a new one", self.node)
                zygote = self._zygote = self._new_zygote()
            assert zygote.stdin is not None and zygote.stdout is not None
            answers: list[dict[str, Any]] = []
            try:
                zygote.stdin.write("".join(json.dumps(request) + "\n" for request in requests))
                zygote.stdin.flush()
                for _ in requests:
                    line = zygote.stdout.readline()
                    if not line:
                        break
                    answers.append(json.loads(line))
            except (BrokenPipeError, OSError) as error:
                log.error("launch zygote of node %s: %s", self.node, error)
            if len(answers) < len(requests):
                # Some requests may have been forked before the zygote died: they have pid files, and
                # the reconciler's recovery path finds them. Report the failure for the rest.
                self._zygote = None
                raise RuntimeError(f"the launch zygote of node {self.node} stopped answering")
            return answers

    def close(self) -> None:
        """End the zygote (wrappers it forked keep running; they do not depend on it)."""
        with self._zygote_lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            with contextlib.suppress(OSError):
                assert zygote.stdin is not None
                zygote.stdin.close()
            try:
                zygote.wait(timeout=5)
            except subprocess.TimeoutExpired:
                zygote.kill()
                zygote.wait(timeout=5)
            if zygote.stdout is not None:
                zygote.stdout.close()

    def _alive(self, tracked: _Tracked) -> bool:
        # Wrappers are the zygote's children, reaped there: a pid + start time check is enough.
        return procs.is_running(tracked.pid, tracked.proc_start)

    def _status(self, tracked: _Tracked) -> dict[str, Any]:
        alive = self._alive(tracked)
        # No exit file from a dead wrapper: it was killed itself (SIGKILL to the group); "lost".
        exit_record = None if alive else read_exit(tracked.run_dir)
        progress = read_progress(tracked.run_dir / PROGRESS_FILE)
        return {
            "known": True,
            "alive": alive,
            "exit": exit_record,
            "progress": None if progress is None else progress[0],
            "progress_time": None if progress is None else progress[1],
        }

    def poll(self, launch_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Status of each launch: ``alive``, ``exit`` (record or ``None``), ``progress``.

        A launch whose wrapper vanished without an exit record (the wrapper was killed: ``lost``) is
        reported ended only once no process of it is left: the job itself, orphaned, and anything it
        started are killed first, so a lost launch never runs on next to its relaunch. (Leftovers of
        launches that ended normally are killed before the job starts again and at shutdown; looking
        for them here would cost a /proc scan per pass.)
        """
        result: dict[str, dict[str, Any]] = {}
        ended = []
        for launch_id in launch_ids:
            tracked = self._tracked.get(launch_id)
            result[launch_id] = {"known": False} if tracked is None else self._status(tracked)
            if tracked is not None and not result[launch_id]["alive"] and result[launch_id]["exit"] is None:
                ended.append(launch_id)
        if ended:
            for launch_id, members in self._members(ended).items():
                log.warning(
                    "node %s: launch %s ended with %d process(es) left; killing them",
                    self.node,
                    launch_id,
                    len(members),
                )
                left = procs.kill_processes(members)
                result[launch_id]["orphans_killed"] = len(members) - len(left)
                if left:
                    result[launch_id]["alive"] = True  # not ended while a process of it runs
        return result

    def _members(self, launch_ids: list[str]) -> dict[str, list[tuple[int, str]]]:
        """Live processes of each tracked launch on this node, found by their environment tag (one pass
        over /proc). The run directory is per rank, so the ranks of one gang on other (fake) nodes of
        the same machine are not this node's."""
        wanted = {str(self._tracked[i].run_dir): i for i in launch_ids if i in self._tracked}
        members: dict[str, list[tuple[int, str]]] = {}
        if not wanted:
            return members
        for pid, start, tags in procs.tagged_processes():
            launch_id = wanted.get(tags.get(procs.TAG_RUN_DIR, ""))
            if launch_id is not None:
                members.setdefault(launch_id, []).append((pid, start))
        return members

    def stop(self, launch_id: str, force: bool = False) -> bool:
        """``SIGTERM`` (or ``SIGKILL`` when ``force``) the launch's process group."""
        tracked = self._tracked.get(launch_id)
        signum = signal.SIGKILL if force else signal.SIGTERM
        sent = tracked is not None and procs.signal_group(tracked.pid, tracked.proc_start, signum)
        if force or not sent:
            # Processes of the launch outside the wrapper's group (left the session, or the wrapper is gone).
            for pid, start in self._members([launch_id]).get(launch_id, []):
                if procs.is_running(pid, start):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signum)
                        sent = True
        return sent

    def adopt(self, launch_id: str, pid: int, proc_start: str | None, run_dir: str) -> dict[str, Any]:
        """Track a process started by an earlier daemon; returns its status."""
        if launch_id not in self._tracked:
            self._tracked[launch_id] = _Tracked(pid, proc_start, Path(run_dir))
        return self._status(self._tracked[launch_id])

    def find(self, launch_id: str, run_dir: str) -> dict[str, Any] | None:
        """Look for a launch whose pid was never recorded: a live wrapper with this launch id, or its
        exit file. Adopts it when found and returns ``{"pid", "proc_start", "status"}``."""
        if launch_id in self._tracked:
            tracked = self._tracked[launch_id]
            return {"pid": tracked.pid, "proc_start": tracked.proc_start, "status": self._status(tracked)}
        pid_file = read_wrapper_pid(Path(run_dir))
        if pid_file is not None and pid_file[2] == launch_id:
            pid, start = pid_file[0], pid_file[1]
            return {"pid": pid, "proc_start": start, "status": self.adopt(launch_id, pid, start, run_dir)}
        found = procs.find_by_arguments("--launch-id", launch_id)  # a wrapper started in direct mode
        if found:
            pid, start = found[0]
            return {"pid": pid, "proc_start": start, "status": self.adopt(launch_id, pid, start, run_dir)}
        record = read_exit(Path(run_dir))
        if record is not None:
            pid = int(record.get("pid") or 0)
            status = self.adopt(launch_id, pid or -1, "gone", run_dir)
            return {"pid": pid, "proc_start": None, "status": status}
        return None

    def forget(self, launch_ids: list[str]) -> None:
        for launch_id in launch_ids:
            self._tracked.pop(launch_id, None)

    def tracked(self) -> list[str]:
        return sorted(self._tracked)

    # --- files -----------------------------------------------------------------------------------
    def read_log(self, run_dir: str, stream: str = "stdout", tail_bytes: int = 65536) -> str:
        name = STDERR_FILE if stream == "stderr" else STDOUT_FILE
        path = Path(run_dir) / name
        try:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - tail_bytes))
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def progress_history(self, run_dir: str) -> list[tuple[float, float]]:
        return read_progress_history(Path(run_dir) / PROGRESS_FILE)

    def stop_all(self, grace_s: float) -> list[str]:
        """Stop every live tracked process (``SIGTERM``, then ``SIGKILL`` after ``grace_s``)."""
        live = [launch_id for launch_id, t in self._tracked.items() if self._alive(t)]
        for launch_id in live:
            self.stop(launch_id)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(self._alive(self._tracked[i]) for i in live):
            time.sleep(0.05)
        for launch_id in live:
            if self._alive(self._tracked[launch_id]):
                self.stop(launch_id, force=True)
        return live


def _node_address() -> str:
    ray = sys.modules.get("ray")  # only inside a Ray worker; never import Ray for the local backend
    if ray is not None and ray.is_initialized():
        return str(ray.util.get_node_ip_address())
    return "127.0.0.1"
