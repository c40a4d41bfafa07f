"""The lane pricing DP's forward pass compiled with numba (``pip install 'duetto[fast]'``).

Why: pricing was about 90 % of the lane relaxation's and the branch-and-price tree's time with the numpy
pass (with this kernel a quarter to two thirds: 26 % at 50 jobs on 8 GPUs, where HiGHS's master takes
more), and the numpy forward pass (:meth:`formulation.lanes._LanePricing._forward_numpy`) pays Python
and temporary arrays once per slot. This is the same recursion in loops: the same comparisons in the
same order (first index on ties, ``>`` where numpy's masks use ``>``), the same floating-point
operations. Unlike the numpy pass it skips what cannot reach a lane: jobs that may not start at a slot,
runs longer than a job's ``max_slots``, starts whose run would be too long, partners that may not share
(one pricing on random duals 2-2.7× faster at 24-50 jobs on 8 GPUs; the pricing of a whole column
generation 1.3-2.1×). So it returns the same ends and the same values and back-pointers in every state a
lane can use (reachable, no longer than its job's ``max_slots``) bit for bit, and may differ only in
unreachable states, which no lane reads (a test compares them on random duals). Without numba,
:data:`AVAILABLE` is False and the numpy pass runs.

The arrays (``n`` jobs, ``T`` the horizon): ``value[j, S, E]`` what job ``j`` run in ``[S, E)`` is
worth; ``pair_cost[i, k]`` a shared slot's cost (``inf`` where the pair may not share);
``start_ok[j, t]``; ``nested_min_t[i, k]`` the slots ``k`` needs nested in ``i``; ``work[i]``;
``one_minus[i, k] = 1 − σ_ik``; ``max_slots[i]``; ``shareable[i, k]``; ``bonus[i, k, t]`` a pair's
share bonus prefix-summed over slots (read only where ``has_bonus``: the master's wide-pair rows).
Returns ``ends_value[j]``, ``ends_arg[j] = (S, E)``, the back-pointers ``kind, back_a, back_b,
idle_end`` that ``_backtrack`` reads, and the states' values ``carry[j, S, t]`` (job ``j`` started at
``S``, alone on the GPU at ``t``).
"""

from __future__ import annotations

import importlib.util
import math
import threading
from typing import Any

import numpy as np

from formulation.compiled import BackgroundCompile

AVAILABLE = importlib.util.find_spec("numba") is not None
"""Whether the compiled pass can run (numba installed). numba itself is imported on first use only."""

NEG = -1e30
"""Value of an unreachable DP state (finite, so sums of two stay comparable); ``formulation.lanes`` uses
these two."""
REACHABLE = NEG / 2


def _forward(
    value: np.ndarray,
    pair_cost: np.ndarray,
    start_ok: np.ndarray,
    nested_min_t: np.ndarray,
    work: np.ndarray,
    one_minus: np.ndarray,
    max_slots: np.ndarray,
    shareable: np.ndarray,
    max_run: int,
    bonus: np.ndarray,
    has_bonus: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = value.shape[0]
    horizon = value.shape[1] - 1
    size = horizon + 1
    carry = np.full((n, size, size), NEG)
    kind = np.zeros((n, size, size), dtype=np.int8)  # 1 alone, 2 nested, 3 handover, 4 start
    back_a = np.zeros((n, size, size), dtype=np.int32)
    back_b = np.zeros((n, size, size), dtype=np.int32)
    idle = np.full(size, NEG)
    idle_end = np.full((size, 2), -1, dtype=np.int64)
    idle[0] = 0.0
    ends_value = np.full(n, NEG)
    ends_arg = np.full((n, 2), -1, dtype=np.int64)
    current = np.empty((n, size))
    alive = np.zeros((n, size), dtype=np.bool_)
    nested = np.empty((n, size))
    best_k = np.zeros((n, size), dtype=np.int64)
    prefix = np.empty((n, size, size))
    prefix_arg = np.zeros((n, size, size), dtype=np.int64)
    first = np.zeros((n, size), dtype=np.int64)
    for t in range(horizon + 1):
        lo = max(0, t - max_run)
        width = t - lo + 1
        if t > 0 and idle[t - 1] > idle[t]:
            idle[t] = idle[t - 1]
            idle_end[t, 0] = -1
            idle_end[t, 1] = -1
        # jobs ending at t: the best over (job, start), first in row-major order on ties
        best = -math.inf
        j_end = 0
        s_end = 0
        for j in range(n):
            per_job = -math.inf
            arg = 0
            for s in range(width):
                v = carry[j, lo + s, t] + value[j, lo + s, t]
                if v > per_job:
                    per_job = v
                    arg = s
                if v > best:
                    best = v
                    j_end = j
                    s_end = s
            if per_job > ends_value[j]:
                ends_value[j] = per_job
                ends_arg[j, 0] = lo + arg
                ends_arg[j, 1] = t
        if best > idle[t] and best > REACHABLE:
            idle[t] = best
            idle_end[t, 0] = j_end
            idle_end[t, 1] = lo + s_end
        # jobs starting at t on a free GPU
        if idle[t] > REACHABLE:
            for j in range(n):
                if start_ok[j, t] and idle[t] > carry[j, t, t]:
                    carry[j, t, t] = idle[t]
                    kind[j, t, t] = 4
        if t == horizon:
            break
        any_alive = False
        for i in range(n):
            for s in range(width):
                c = carry[i, lo + s, t]
                ok = c > REACHABLE and (t - (lo + s)) <= max_slots[i]
                alive[i, s] = ok
                current[i, s] = c if ok else NEG
                any_alive = any_alive or ok
        if not any_alive:
            if idle[t] > idle[t + 1]:
                idle[t + 1] = idle[t]
                idle_end[t + 1, 0] = -1
                idle_end[t + 1, 1] = -1
            continue
        # one more slot alone
        for i in range(n):
            for s in range(width):
                if current[i, s] > carry[i, lo + s, t + 1]:
                    carry[i, lo + s, t + 1] = current[i, s]
                    kind[i, lo + s, t + 1] = 1
        length = horizon - t  # ends t + 1 .. horizon
        # nested: k starts at t and ends at E while i runs on (k shared its whole run); only k that may
        # start at t, and only its run lengths
        for i in range(n):
            for e in range(length):
                nested[i, e] = NEG
                best_k[i, e] = 0
        for k in range(n):
            if not start_ok[k, t]:
                continue
            e_hi = min(length, max_slots[k])
            for e in range(e_hi):
                v = value[k, t, t + 1 + e]
                if v <= REACHABLE:
                    continue
                duration = e + 1
                for i in range(n):
                    if not duration >= nested_min_t[i, k]:
                        continue
                    g = v - pair_cost[i, k] * duration
                    if has_bonus:
                        g = g + (bonus[i, k, t + 1 + e] - bonus[i, k, t])
                    if g > nested[i, e]:
                        nested[i, e] = g
                        best_k[i, e] = k
        for i in range(n):
            for s in range(width):
                if not alive[i, s]:
                    continue
                e_hi = min(length, max_slots[i] - (t - (lo + s)))
                for e in range(e_hi):
                    if nested[i, e] <= REACHABLE:
                        continue
                    cand = current[i, s] + nested[i, e]
                    if cand > carry[i, lo + s, t + 1 + e]:
                        carry[i, lo + s, t + 1 + e] = cand
                        kind[i, lo + s, t + 1 + e] = 2
                        back_a[i, lo + s, t + 1 + e] = t
                        back_b[i, lo + s, t + 1 + e] = best_k[i, e]
        # handover: k starts at t; i ends at E while k runs on. prefix[i, s, e]: the best start up to s
        for i in range(n):
            for e in range(min(length, max_slots[i])):
                run_max = -math.inf
                run_arg = -1
                first[i, e] = max(0, (t + 1 + e) - max_slots[i] - lo)  # earlier starts: runs too long
                for s in range(first[i, e], width):
                    b = current[i, s] + value[i, lo + s, t + 1 + e]
                    if s == first[i, e] or b > run_max:
                        run_max = b
                    if b >= run_max:
                        run_arg = s
                    prefix[i, s, e] = run_max
                    prefix_arg[i, s, e] = run_arg
        for k in range(n):
            if not start_ok[k, t]:
                continue
            for e in range(min(length, max_slots[k])):
                duration = e + 1
                top = -math.inf
                arg = 0
                for i in range(n):
                    if not shareable[i, k] or e >= max_slots[i]:
                        continue
                    # i's progress with the overlap [t, E): (E − S) − (1 − σ_ik)(E − t) ≥ w_i ⇔ S ≤ threshold
                    threshold = math.floor((t + 1 + e) - work[i] - one_minus[i, k] * duration + 1e-9)
                    index = min(max(threshold - lo, -1), width - 1)
                    if index < first[i, e]:
                        continue
                    reach = prefix[i, index, e]
                    h = reach - pair_cost[i, k] * duration
                    if has_bonus:
                        h = h + (bonus[i, k, t + 1 + e] - bonus[i, k, t])
                    if h > top:
                        top = h
                        arg = i
                handed = top
                if handed > carry[k, t, t + 1 + e]:
                    carry[k, t, t + 1 + e] = handed
                    kind[k, t, t + 1 + e] = 3
                    back_a[k, t, t + 1 + e] = arg
                    threshold = math.floor((t + 1 + e) - work[arg] - one_minus[arg, k] * duration + 1e-9)
                    safe = max(min(max(threshold - lo, -1), width - 1), 0)
                    back_b[k, t, t + 1 + e] = lo + prefix_arg[arg, safe, e]
        if idle[t] > idle[t + 1]:
            idle[t + 1] = idle[t]
            idle_end[t + 1, 0] = -1
            idle_end[t + 1, 1] = -1
    return ends_value, ends_arg, kind, back_a, back_b, idle_end, carry


_lock = threading.Lock()
_compiled: Any = None  # the numba dispatcher, once made


def _dispatcher() -> Any:
    """The numba dispatcher of :func:`_forward` (``nogil``: it runs on the bound thread beside the
    solver's process and the caller's other threads; ``cache``: compiled once per installation)."""
    global _compiled
    with _lock:
        if _compiled is None:
            import numba

            _compiled = numba.njit(cache=True, nogil=True)(_forward)
        return _compiled


def compile_now() -> bool:
    """Compile (or load from numba's on-disk cache) the pass for the argument types the pricing uses.
    Returns whether it is usable."""
    if not AVAILABLE:
        return False
    _dispatcher()(
        np.full((1, 2, 2), NEG),
        np.zeros((1, 1)),
        np.ones((1, 2), dtype=np.bool_),
        np.ones((1, 1)),
        np.ones(1),
        np.zeros((1, 1)),
        np.ones(1, dtype=np.int64),
        np.zeros((1, 1), dtype=np.bool_),
        1,
        np.zeros((1, 1, 1)),
        False,
    )
    return True


def ready() -> bool:
    """Whether the compiled pass is ready now. The first ask starts compiling it on a background thread
    (the first compile takes 10-20 s, later processes load it from numba's cache in well under a second),
    so that a time-limited solve never waits for the compiler: the numpy pass serves until then, with
    the same results."""
    return AVAILABLE and _background.ready()


_background = BackgroundCompile(
    "lane-kernel-compile", compile_now, lambda: _compiled is not None and bool(_compiled.signatures)
)


def forward(*arrays: Any) -> Any:
    """Run the compiled pass (call :func:`ready` or :func:`compile_now` first)."""
    return _dispatcher()(*arrays)
