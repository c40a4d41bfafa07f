"""Process identity on Linux: a pid plus its start time (``/proc/PID/stat`` field 22) names one process,
so a recycled pid is never mistaken for a job we launched."""

from __future__ import annotations

import contextlib
import os
import signal
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
