"""Worker process entry point: ``python -m solvers.worker READ_FD WRITE_FD LIFELINE_FD``.

:func:`solvers.api.solve` starts it with :mod:`subprocess` (not :mod:`multiprocessing`, which would
re-import the caller's ``__main__``), sends payloads (``None`` to stop) through ``READ_FD`` and reads
progress from ``WRITE_FD`` (both pipes wrapped as :class:`multiprocessing.connection.Connection`). The solver's own
console output goes to stderr, never to the parent's stdout.

``LIFELINE_FD`` is the read end of a pipe whose write end only the parent holds and never writes to:
it reads end-of-file once the parent is gone, however it went (``kill``, a crash, SIGKILL), and the
worker then exits at once instead of solving on to its time limit with nobody to report to.
"""

from __future__ import annotations

import os
import sys
import threading
from multiprocessing.connection import Connection

PARENT_GONE_EXIT_CODE = 3


def _exit_when_parent_is_gone(lifeline_fd: int) -> None:
    try:
        while os.read(lifeline_fd, 1):  # the parent never writes: only end-of-file comes
            pass
    except OSError:
        pass
    os._exit(PARENT_GONE_EXIT_CODE)  # not sys.exit: the solver's threads must stop too


def main(argv: list[str]) -> int:
    read_fd, write_fd, lifeline_fd = int(argv[0]), int(argv[1]), int(argv[2])
    threading.Thread(target=_exit_when_parent_is_gone, args=(lifeline_fd,), daemon=True).start()
    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    from solvers.api import _worker

    while True:  # one payload after the other until the parent sends None or goes away
        try:
            payload = inbox.recv()
        except (EOFError, OSError):
            break
        if payload is None:
            break
        _worker(outbox, payload)
    outbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
