"""Launch wrappers: each job process gets a wrapper that waits for it and records how it ended.

A wrapper runs in its own session (process-group leader, so it outlives a crashed daemon), starts
the job's argv directly (``fork`` + ``execvpe``, never a shell), waits for it and writes
``{"returncode", "signal", "started", "ended", "pid"}`` to the exit file atomically. A daemon that
restarts after a crash reads that file to learn whether a job it did not see end succeeded, failed or
was killed. Signals sent to the process group (``SIGTERM`` to stop a job) reach the job; the wrapper
only waits, so the exit status is always recorded.

Two ways to get a wrapper:

- **zygote** (what node agents use): ``python -I -S supervise.py --zygote`` is a small long-lived
  process that reads one JSON request per line on stdin and *forks* a wrapper for each: a fork of a
  small process costs a few milliseconds, where starting a fresh interpreter per job costs tens of
  milliseconds of CPU (a reconcile pass may start a hundred jobs). Requests may be pipelined: the
  zygote answers each with the wrapper's pid and start time right after the fork. The wrapper's first
  act is to write ``wrapper.pid`` (pid, start time, launch id) into the run directory, so a restarted
  daemon finds a wrapper whose pid it never recorded. The zygote exits when its stdin closes (its
  agent is gone); the wrappers it forked do not depend on it.
- **direct**: ``python -I -S supervise.py --launch-id ID --exit-file PATH -- ARGV...`` (tools, tests).

Built-in modules only (plus ``json`` in the zygote): start-up cost matters.
"""

import os
import signal
import sys
import time

PID_FILE = "wrapper.pid"


def _write_exit(path, returncode, started, pid):
    sig = -returncode if returncode < 0 else None
    signal_text = "null" if sig is None else str(sig)
    text = (
        f'{{"returncode": {returncode}, "signal": {signal_text}, "started": {started!r}, '
        f'"ended": {time.time()!r}, "pid": {pid}}}\n'
    )
    tmp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _ignore(signum, frame):
    # A handler, not SIG_IGN, installed after the fork: the job keeps default signal handling.
    return None


def _start_time(pid):
    with open(f"/proc/{pid}/stat") as handle:
        text = handle.read()
    return text[text.rfind(")") + 2 :].split()[19]


def run_wrapped(command, env, exit_file):
    """Fork + exec ``command``, wait for it, record its exit; returns the wrapper's exit code."""
    started = time.time()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        # Python ignores SIGPIPE and SIGXFSZ; exec keeps ignored signals ignored: restore defaults.
        for name in ("SIGPIPE", "SIGXFSZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        try:
            if env is None:
                os.execvp(command[0], command)
            else:
                os.execvpe(command[0], command, env)
        except OSError as error:
            os.write(2, f"duetto: cannot start {command[0]!r}: {error}\n".encode())
        os._exit(127)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)
    _, status = os.waitpid(pid, 0)  # retried on EINTR (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    _write_exit(exit_file, code, started, pid)
    return code


def _exit_status(code):
    return code if code >= 0 else 128 - code


def _fork_wrapper(request):
    """Fork one wrapper for ``request``; returns ``(pid, start_time)`` at once (the wrapper writes its
    pid file itself, within a millisecond, whether or not anyone still listens)."""
    pid = os.fork()
    if pid == 0:
        code = 127
        try:
            os.setsid()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; we wait for the job
            null = os.open(os.devnull, os.O_RDONLY)
            out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for source, target in ((null, 0), (out, 1), (err, 2)):
                os.dup2(source, target)
            os.closerange(3, 65536)
            os.chdir(request["cwd"])
            me = os.getpid()
            line = f"{me} {_start_time(me)} {request['launch_id']}\n"
            tmp = request["pid_file"] + ".tmp"
            with open(tmp, "w") as handle:
                handle.write(line)
            os.replace(tmp, request["pid_file"])
            code = _exit_status(run_wrapped(request["argv"], request["env"], request["exit_file"]))
        except BaseException as error:  # never return into the zygote's loop from a child
            try:  # noqa: SIM105 - contextlib would cost start-up time
                os.write(2, f"duetto wrapper: {error}\n".encode())
            except OSError:
                pass
        os._exit(code)
    return pid, _start_time(pid)


def _reap():
    """Collect every wrapper that has ended (they stay zombies until then, so that the zygote can
    always read a new wrapper's start time, however fast it ends)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def zygote():
    import json
    import select

    source = sys.stdin.fileno()
    pending = b""
    while True:
        readable, _, _ = select.select([source], [], [], 0.5)
        _reap()
        if not readable:
            continue
        chunk = os.read(source, 1 << 16)
        if not chunk:
            break  # the agent is gone; the wrappers we forked go on without us
        pending += chunk
        replies = []
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                pid, start = _fork_wrapper(json.loads(line))
                replies.append({"pid": pid, "proc_start": start})
            except Exception as error:  # report, keep serving
                replies.append({"error": f"{type(error).__name__}: {error}"})
        if replies:
            data = "".join(json.dumps(reply) + "\n" for reply in replies).encode()
            while data:
                data = data[os.write(1, data) :]
    _reap()
    return 0


def main(argv):
    if argv == ["--zygote"]:
        return zygote()
    if "--" not in argv:
        sys.stderr.write("usage: supervise.py --zygote | --launch-id ID --exit-file PATH -- ARGV...\n")
        return 2
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    values = dict(zip(options[::2], options[1::2], strict=False))
    exit_file = values.get("--exit-file")
    if not exit_file or not command:
        sys.stderr.write("supervise.py: --exit-file and a command are required\n")
        return 2
    return _exit_status(run_wrapped(command, None, exit_file))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
