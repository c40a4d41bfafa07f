"""Process identity on Linux: a pid plus its start time (``/proc/PID/stat`` field 22) names one process,
so a recycled pid is never mistaken for a job we launched."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

_PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
    end = text.rfind(")")
    return text[end + 2 :].split()


def proc_start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (as text), or ``None`` if it does not exist."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    return fields[19]  # field 22 overall; fields[0] is field 3 (state)


def is_running(pid: int, start_time: str | None) -> bool:
    """``True`` if the process ``pid`` that started at ``start_time`` still runs (zombies do not)."""
    fields = _stat_fields(pid)
    if fields is None:
        return False
    if fields[0] in ("Z", "X"):
        return False
    return start_time is None or fields[19] == start_time


def signal_group(pid: int, start_time: str | None, signum: int) -> bool:
    """Send ``signum`` to the process group led by ``pid``, only if ``pid`` is still that process.

    Returns ``True`` if a signal was sent.
    """
    if not is_running(pid, start_time):
        # The leader is gone; its group may still hold stragglers, but the pid might be reused by
        # then, so only signal a group whose leader we can still identify.
        return False
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    return True


def find_by_arguments(*needle: str) -> list[tuple[int, str]]:
    """Processes (pid, start time) whose command line contains the consecutive arguments ``needle``."""
    wanted = b"\0".join(part.encode() for part in needle)
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if wanted in cmdline and (b"\0" + wanted + b"\0" in b"\0" + cmdline):
            start = proc_start_time(int(entry.name))
            if start is not None and is_running(int(entry.name), start):
                found.append((int(entry.name), start))
    return found


def kill_hard(pid: int, start_time: str | None) -> bool:
    """``SIGKILL`` the process group of ``pid`` (identity-checked)."""
    return signal_group(pid, start_time, signal.SIGKILL)


#: Environment variables the runtime sets in every job process; they tag the job's processes (and
#: whatever they start: children inherit the environment, also across ``setsid`` and a dead wrapper).
TAG_JOB = "DUETTO_JOB_ID"
TAG_LAUNCH = "DUETTO_LAUNCH_ID"
TAG_RUN_DIR = "DUETTO_RUN_DIR"


def tagged_processes() -> list[tuple[int, str, dict[str, str]]]:
    """Live processes of this user carrying the runtime's tags: ``(pid, start time, {tag: value})``.

    The containment of a launch without cgroups: a job's processes are found by the
    ``DUETTO_LAUNCH_ID`` in their environment (``/proc/PID/environ``, fixed at ``exec``), so a process
    that left the wrapper's session, or whose wrapper was killed, is still found. One pass over
    ``/proc``; processes of other users are not readable and are skipped.
    """
    me = os.getpid()
    found = []
    prefix = b"DUETTO_"
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if prefix not in environ:
            continue
        tags: dict[str, str] = {}
        for item in environ.split(b"\0"):
            if item.startswith(prefix):
                name, _, value = item.partition(b"=")
                key = name.decode(errors="replace")
                if key in (TAG_JOB, TAG_LAUNCH, TAG_RUN_DIR):
                    tags[key] = value.decode(errors="replace")
        if TAG_LAUNCH not in tags:
            continue
        pid = int(entry.name)
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
            continue
        found.append((pid, fields[19], tags))
    return found


def kill_processes(members: list[tuple[int, str]], wait_s: float = 5.0) -> list[int]:
    """``SIGKILL`` each ``(pid, start time)`` that is still that process; wait until they are gone.

    Returns the pids still alive after ``wait_s`` (normally none: only a process stuck in the
    kernel survives ``SIGKILL`` for long).
    """
    for pid, start in members:
        if is_running(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    left = [(pid, start) for pid, start in members if is_running(pid, start)]
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [(pid, start) for pid, start in left if is_running(pid, start)]
    return [pid for pid, _ in left]
