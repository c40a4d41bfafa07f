"""The lane pricing DP's forward pass compiled with numba (``pip install 'duetto[fast]'``).

Why: pricing was about 90 % of the lane relaxation's and the branch-and-price tree's time with the numpy
pass (with this kernel a quarter to two thirds: 26 % at 50 jobs on 8 GPUs, where HiGHS's master takes
more), and the numpy forward pass (:meth:`formulation.lanes._LanePricing._forward_numpy`) pays Python
and temporary arrays once per slot. This is the same recursion in loops: the same comparisons in the
same order (first index on ties, ``>`` where numpy's masks use ``>``), the same floating-point
operations. Unlike the numpy pass it skips what cannot reach a lane: jobs that may not start at a slot,
runs longer than a job's ``max_slots``, starts whose run would be too long, partners that may not share
(one pricing on random duals 2-2.7× faster at 24-50 jobs on 8 GPUs; the pricing of a whole column
generation 1.3-2.1×), and all nesting and handover work for a job no partner may share with (where no
pair may share, ``C = 1``: 63 → 7 ms per pricing at 16 jobs on 8 GPUs; the pricing there now uses
:func:`_exclusive_forward` instead). The handover's prefix table is built one host at a time (a
``T × T`` table that stays in cache, where one ``n × T × T`` table was rewritten every slot), and only for a
host some partner may take over from at that slot: one pricing 1.1-1.3× faster at 24-50 jobs on 8 GPUs,
1.25-1.8× with mode-aware lanes (39 pseudo-jobs at 16 jobs). So it returns the same ends and the same
values and back-pointers in every state a lane can use (reachable, no longer than its job's
``max_slots``) bit for bit, and may differ only in unreachable states, which no lane reads (a test
compares them on random duals, mode-free and mode-aware). Without numba,
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
    # the handover's prefix table, one host at a time (small enough to stay in cache), and per partner k
    # and overlap the best host so far: its value, the host, the host's start
    prefix = np.empty((size, size))
    prefix_arg = np.zeros((size, size), dtype=np.int64)
    first = np.zeros(size, dtype=np.int64)
    hand_top = np.empty((n, size))
    hand_arg = np.zeros((n, size), dtype=np.int64)
    hand_start = np.zeros((n, size), dtype=np.int64)
    starters = np.zeros(n, dtype=np.bool_)
    # a job no partner may share with never nests one nor hands over: its nested and handover work
    # (most of a pass where no pair may share, C = 1 or memory) is skipped, its states are the same
    partnered = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        for k in range(n):
            if shareable[i, k] or shareable[k, i]:
                partnered[i] = True
    any_nested = np.zeros(n, dtype=np.bool_)
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
            any_nested[i] = False
            if not partnered[i]:
                continue
            for e in range(length):
                nested[i, e] = NEG
                best_k[i, e] = 0
        for k in range(n):
            if not start_ok[k, t] or not partnered[k]:
                continue
            e_hi = min(length, max_slots[k])
            for e in range(e_hi):
                v = value[k, t, t + 1 + e]
                if v <= REACHABLE:
                    continue
                duration = e + 1
                for i in range(n):
                    if not shareable[i, k] or not duration >= nested_min_t[i, k]:
                        continue
                    g = v - pair_cost[i, k] * duration
                    if has_bonus:
                        g = g + (bonus[i, k, t + 1 + e] - bonus[i, k, t])
                    if g > nested[i, e]:
                        nested[i, e] = g
                        best_k[i, e] = k
                        any_nested[i] = True
        for i in range(n):
            if not any_nested[i]:
                continue
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
        # handover: k starts at t; host i ends at E = t + 1 + e while k runs on. Host by host (i in
        # increasing order, so the first host wins ties, as a loop over i per (k, e) would): its prefix
        # table prefix[e, s], the best of its starts up to s (s contiguous), then every partner k's
        # candidate from it
        any_starter = False
        for k in range(n):
            starters[k] = start_ok[k, t] and partnered[k]
            if not starters[k]:
                continue
            any_starter = True
            for e in range(min(length, max_slots[k])):
                hand_top[k, e] = -math.inf
        for i in range(n if any_starter else 0):
            if not partnered[i]:
                continue
            hosts = False  # whether some k may take over from i at t (else its table is not needed)
            for k in range(n):
                if starters[k] and shareable[i, k]:
                    hosts = True
                    break
            if not hosts:
                continue
            e_top = min(length, max_slots[i])
            for e in range(e_top):
                run_max = -math.inf
                run_arg = -1
                first[e] = max(0, (t + 1 + e) - max_slots[i] - lo)  # earlier starts: runs too long
                for s in range(first[e], width):
                    b = current[i, s] + value[i, lo + s, t + 1 + e]
                    if s == first[e] or b > run_max:
                        run_max = b
                    if b >= run_max:
                        run_arg = s
                    prefix[e, s] = run_max
                    prefix_arg[e, s] = run_arg
            for k in range(n):
                if not starters[k] or not shareable[i, k]:
                    continue
                for e in range(min(e_top, max_slots[k])):
                    duration = e + 1
                    # i's progress with the overlap [t, E): (E − S) − (1 − σ_ik)(E − t) ≥ w_i ⇔ S ≤ threshold
                    threshold = math.floor((t + 1 + e) - work[i] - one_minus[i, k] * duration + 1e-9)
                    index = min(max(threshold - lo, -1), width - 1)
                    if index < first[e]:
                        continue
                    h = prefix[e, index] - pair_cost[i, k] * duration
                    if has_bonus:
                        h = h + (bonus[i, k, t + 1 + e] - bonus[i, k, t])
                    if h > hand_top[k, e]:
                        hand_top[k, e] = h
                        hand_arg[k, e] = i
                        hand_start[k, e] = lo + prefix_arg[e, index]
        for k in range(n if any_starter else 0):
            if not starters[k]:
                continue
            for e in range(min(length, max_slots[k])):
                handed = hand_top[k, e]
                if handed > carry[k, t, t + 1 + e]:
                    carry[k, t, t + 1 + e] = handed
                    kind[k, t, t + 1 + e] = 3
                    back_a[k, t, t + 1 + e] = hand_arg[k, e]
                    back_b[k, t, t + 1 + e] = hand_start[k, e]
        if idle[t] > idle[t + 1]:
            idle[t + 1] = idle[t]
            idle_end[t + 1, 0] = -1
            idle_end[t + 1, 1] = -1
    return ends_value, ends_arg, kind, back_a, back_b, idle_end, carry


def exclusive_arrays(
    jobs: int, horizon: int, bits: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The exclusive pass's arrays, as both passes start them: ``label[t, m]`` (only the empty lane at
    ``(0, ∅)``), the back-pointers ``back_job`` (``-1``), ``back_start``, ``back_mask``, ``ends_value``
    and ``ends_at`` (``(S, E, m)``, ``-1`` where none)."""
    size, masks = horizon + 1, 1 << bits
    label = np.full((size, masks), NEG)
    label[0, 0] = 0.0
    return (
        label,
        np.full((size, masks), -1, dtype=np.int64),
        np.zeros((size, masks), dtype=np.int64),
        np.zeros((size, masks), dtype=np.int64),
        np.full(jobs, NEG),
        np.full((jobs, 3), -1, dtype=np.int64),
    )


def _exclusive_forward(
    value: np.ndarray,
    bit: np.ndarray,
    bits: int,
    max_slots: np.ndarray,
    label: np.ndarray,
    back_job: np.ndarray,
    back_start: np.ndarray,
    back_mask: np.ndarray,
    ends_value: np.ndarray,
    ends_at: np.ndarray,
) -> None:
    """The lane DP where no pair may share (``C = 1``): a lane is a sequence of alone runs, and no
    tracked job runs twice in it (``bit[j]``: its bit in the label's set, ``-1`` untracked).

    ``label[t, m]``: the best lane prefix with the GPU free at ``t`` whose tracked jobs are the set ``m``;
    labels in order of ``t``, then ``m``; a label one of whose subsets (one tracked job fewer) is worth
    at least as much at ``t`` is not extended (every lane it leads to, that subset leads to as well).
    Fills the arrays of :func:`exclusive_arrays` in place: ``ends_value[j]`` (the best lane whose last
    run is ``j``'s), ``ends_at[j] = (S, E, m)``, and the back-pointers ``back_job[t, m]`` (``-1``: idle
    from ``t − 1``), ``back_start``, ``back_mask``. :func:`exclusive_forward_numpy` is the same pass in
    numpy, with the same numbers.
    """
    n = value.shape[0]
    horizon = value.shape[1] - 1
    masks = label.shape[1]
    for t in range(horizon):
        for mask in range(masks):
            f = label[t, mask]
            if f <= REACHABLE:
                continue
            dominated = False
            for b in range(bits):
                if (mask >> b) & 1 and label[t, mask ^ (1 << b)] >= f:
                    dominated = True
                    break
            if dominated:
                continue
            for j in range(n):
                b = bit[j]
                if b >= 0 and (mask >> b) & 1:
                    continue
                nm = mask | (1 << b) if b >= 0 else mask
                top = -math.inf
                arg = -1
                for e in range(t + 1, min(horizon, t + max_slots[j]) + 1):
                    v = value[j, t, e]
                    if v <= REACHABLE:
                        continue
                    c = f + v
                    if c > label[e, nm]:
                        label[e, nm] = c
                        back_job[e, nm] = j
                        back_start[e, nm] = t
                        back_mask[e, nm] = mask
                    if c > top:
                        top = c
                        arg = e
                if arg >= 0 and top > ends_value[j]:
                    ends_value[j] = top
                    ends_at[j, 0] = t
                    ends_at[j, 1] = arg
                    ends_at[j, 2] = mask
            if f > label[t + 1, mask]:
                label[t + 1, mask] = f
                back_job[t + 1, mask] = -1


def exclusive_forward_numpy(
    value: np.ndarray, bit: np.ndarray, bits: int, max_slots: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_exclusive_forward` in numpy (the pass a solve uses until the compiled one is ready): one
    label at a time, its runs at once. The same comparisons in the same order, so the same numbers."""
    n = value.shape[0]
    horizon = value.shape[1] - 1
    label, back_job, back_start, back_mask, ends_value, ends_at = exclusive_arrays(n, horizon, bits)
    tracked = bit >= 0
    flags = np.where(tracked, np.left_shift(1, np.maximum(bit, 0)), 0)
    max_run = int(max_slots.max()) if n else 0
    for t in range(horizon):
        hi = min(horizon, t + max_run)
        ends = np.arange(t + 1, hi + 1)
        runs = value[:, t, t + 1 : hi + 1]  # [j, e]
        usable = (runs > REACHABLE) & ((ends - t)[None, :] <= max_slots[:, None])
        for mask in np.nonzero(label[t] > REACHABLE)[0]:
            f = label[t, mask]
            subsets = [mask ^ (1 << b) for b in range(bits) if (mask >> b) & 1]
            if subsets and np.any(label[t, subsets] >= f):
                continue
            allowed = usable & ((flags & mask) == 0)[:, None]
            cand = np.where(allowed, f + runs, -math.inf)
            # untracked jobs keep the set: per end, the first best job
            loose = cand[~tracked]
            if loose.shape[0]:
                who = np.nonzero(~tracked)[0]
                pick = loose.argmax(axis=0)
                best = loose[pick, np.arange(len(ends))]
                better = best > label[ends, mask]
                label[ends[better], mask] = best[better]
                back_job[ends[better], mask] = who[pick[better]]
                back_start[ends[better], mask] = t
                back_mask[ends[better], mask] = mask
            for j in np.nonzero(tracked & allowed.any(axis=1))[0]:
                nm = mask | int(flags[j])
                better = cand[j] > label[ends, nm]
                label[ends[better], nm] = cand[j][better]
                back_job[ends[better], nm] = j
                back_start[ends[better], nm] = t
                back_mask[ends[better], nm] = mask
            tops = cand.max(axis=1)
            args = cand.argmax(axis=1)
            for j in np.nonzero(tops > ends_value)[0]:
                ends_value[j] = tops[j]
                ends_at[j] = (t, int(ends[args[j]]), mask)
            if f > label[t + 1, mask]:
                label[t + 1, mask] = f
                back_job[t + 1, mask] = -1
    return ends_value, ends_at, back_job, back_start, back_mask


_lock = threading.Lock()
_compiled: dict[str, Any] = {}  # a pass's name -> its numba dispatcher, once made
_PASSES = (_forward, _exclusive_forward)  # what compile_now compiles and ready waits for


def _dispatcher(function: Any = _forward) -> Any:
    """The numba dispatcher of one of the passes, :func:`_forward` or :func:`_exclusive_forward`
    (``nogil``: it runs on the bound thread beside the solver's process and the caller's other threads;
    ``cache``: compiled once per installation)."""
    with _lock:
        if function.__name__ not in _compiled:
            import numba

            _compiled[function.__name__] = numba.njit(cache=True, nogil=True)(function)
        return _compiled[function.__name__]


def compile_now() -> bool:
    """Compile (or load from numba's on-disk cache) both passes (:data:`_PASSES`) for the argument types
    the pricing uses. Returns whether they are usable."""
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
    exclusive_forward(np.full((1, 2, 2), NEG), np.full(1, -1, dtype=np.int64), 0, np.ones(1, dtype=np.int64))
    return True


def ready() -> bool:
    """Whether the compiled pass is ready now. The first ask starts compiling it on a background thread
    (the first compile takes 10-20 s, later processes load it from numba's cache in well under a second),
    so that a time-limited solve never waits for the compiler: the numpy pass serves until then, with
    the same results."""
    return AVAILABLE and _background.ready()


_background = BackgroundCompile(
    "lane-kernel-compile",
    compile_now,
    lambda: all(bool(getattr(_compiled.get(kernel.__name__), "signatures", None)) for kernel in _PASSES),
)


def forward(*arrays: Any) -> Any:
    """Run the compiled pass (call :func:`ready` or :func:`compile_now` first)."""
    return _dispatcher()(*arrays)


def exclusive_forward(
    value: np.ndarray, bit: np.ndarray, bits: int, max_slots: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run the compiled exclusive pass, :func:`_exclusive_forward` (call :func:`ready` first); returns
    ``(ends_value, ends_at, back_job, back_start, back_mask)`` as :func:`exclusive_forward_numpy` does."""
    label, back_job, back_start, back_mask, ends_value, ends_at = exclusive_arrays(
        value.shape[0], value.shape[1] - 1, bits
    )
    _dispatcher(_exclusive_forward)(
        value, bit, bits, max_slots, label, back_job, back_start, back_mask, ends_value, ends_at
    )
    return ends_value, ends_at, back_job, back_start, back_mask
