"""Compiled kernels that never keep a caller waiting: compiled on a background thread when first asked for.

Both numba kernels (:mod:`formulation.lane_kernel`, :mod:`heuristics.lookahead_kernel`) have a pure
numpy/Python twin that gives the same numbers, so a time-limited caller uses the twin until the compiled
one is ready instead of waiting 10-40 s for the compiler (numba's on-disk cache makes later processes
ready in about a second).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class BackgroundCompile:
    """Start ``compile_now`` on a daemon thread the first time :meth:`ready` is asked, once.

    Parameters
    ----------
    name
        The thread's name.
    compile_now
        Compiles (or loads from the cache) the kernel; may also be called directly, e.g. by tests.
    done
        Whether the kernel is compiled now, however that came about.
    """

    def __init__(self, name: str, compile_now: Callable[[], bool], done: Callable[[], bool]) -> None:
        self._name = name
        self._compile_now = compile_now
        self._done = done
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def ready(self) -> bool:
        """Whether the kernel is ready now; the first ask starts compiling it in the background."""
        if self._done():
            return True
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._compile_now, name=self._name, daemon=True)
                self._thread.start()
        return False
