"""Worker process entry point: ``python -m solvers.worker READ_FD WRITE_FD``.

:func:`solvers.api.solve` starts it with :mod:`subprocess` (not :mod:`multiprocessing`, which would
re-import the caller's ``__main__``), sends payloads (``None`` to stop) through ``READ_FD`` and reads
progress from ``WRITE_FD`` (both pipes wrapped as :class:`multiprocessing.connection.Connection`). The solver's own
console output goes to stderr, never to the parent's stdout.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection


def main(argv: list[str]) -> int:
    read_fd, write_fd = int(argv[0]), int(argv[1])
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
