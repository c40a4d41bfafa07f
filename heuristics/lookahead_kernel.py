"""The look-ahead's rollouts compiled with numba (``pip install 'duetto[fast]'``).

Why: a look-ahead decision is almost all rollouts (about 90 % of a trace run under cProfile), each a few
dozen simulated events of :class:`heuristics.lookahead._Sim` in Python; after the exact Python
shortcuts of issue 19 the profile was flat, so what was left was the interpreter itself. The compiled
forward model (:mod:`heuristics.lookahead_jit`) is the same model, method for method, over arrays: the
same comparisons in the same order and the same floating-point operations, so every score is the same
bit for bit and the policy makes the same decisions (``tests/test_speed_identity.py`` runs both on
seeded instances and Muri's trace and requires equal schedules, rollouts and events).

Use: :func:`ready` (the first ask compiles on a background thread, 20-40 s the first time, loaded from
numba's cache in about a second later; the Python model serves until then, with the same results),
then :class:`Decision` per decision: it numbers the decision's jobs and builds their tables once, and
:meth:`Decision.score` scores a pilot step's candidates (all rollouts of all bases) in one call. Without
numba, :data:`AVAILABLE` is False and the Python model runs.
"""

from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from formulation.compiled import BackgroundCompile

if TYPE_CHECKING:
    from heuristics.lookahead import _Candidate, _Sim, _Static

AVAILABLE = importlib.util.find_spec("numba") is not None
"""Whether the compiled model can run (numba installed). numba itself is imported on first use only."""

_BASE_CODES = {"bsbf": 0, "nosharing": 1, "share": 2}

_lock = threading.Lock()
_compiled: Any = None  # heuristics.lookahead_jit.score, once imported
_ready = False


def _dispatcher() -> Any:
    global _compiled
    with _lock:
        if _compiled is None:
            from heuristics import lookahead_jit

            _compiled = lookahead_jit.score
        return _compiled


def compile_now() -> bool:
    """Compile (or load from numba's on-disk cache) the model for the argument types the policy uses, by
    scoring a one-GPU example. Returns whether it is usable."""
    global _ready
    if not AVAILABLE:
        return False
    i64 = np.int64
    f = np.array
    _dispatcher()(
        1, 2, 32.0, f([0, 1], dtype=i64), f([1], dtype=i64), f([10.0]), f([1.0]), f([0.0]), f([0], dtype=i64),
        f([1], dtype=i64), f([[1.0]]), f([[10.0]]), f([5.0]), np.ones((1, 1, 2)), np.full((1, 1), np.nan),
        f([0, 0, 1, 0, 1, 0, 0, 0], dtype=i64), f([0.0, 0.0]), np.zeros((1, 2), dtype=i64), f([0], dtype=i64),
        f([0.0]), f([0.0]), np.zeros(1, dtype=np.bool_), np.zeros((1, 1), dtype=i64), f([0], dtype=i64),
        f([0.0]), f([0.0]), f([0.0]), f([0.0]), f([-1], dtype=i64), f([0.0]), f([0], dtype=i64),
        np.zeros(0), np.zeros(0, dtype=i64), np.zeros(0, dtype=i64), np.zeros(0), np.zeros(0, dtype=i64),
        f([0], dtype=i64), f([0], dtype=i64), np.zeros((1, 1), dtype=i64), f([1], dtype=i64), f([0, 1], dtype=i64),
        0.0, False, 48, 8, 0.0, 16,
    )  # fmt: skip
    _ready = True
    return True


def ready() -> bool:
    """Whether the compiled model is ready now. The first ask starts compiling it on a background thread,
    so that a run never waits for the compiler: the Python model serves until then, with the same
    results."""
    return AVAILABLE and _background.ready()


_background = BackgroundCompile("lookahead-kernel-compile", compile_now, lambda: _ready)


class Tables:
    """Per-instance tables of every job, indexed by the job's rank among the ids sorted as strings."""

    def __init__(self, st: _Static) -> None:
        instance = st.instance
        ids = sorted(job.id for job in instance.jobs)
        self.gid = {job_id: i for i, job_id in enumerate(ids)}
        nodes = st.nodes
        modes = [instance.modes(job_id) for job_id in ids]
        width = max(len(m) for m in modes)
        count = len(ids)
        self.demand = np.zeros(count, dtype=np.int64)
        self.iterations = np.zeros(count)
        self.alone = np.zeros(count)
        self.nmodes = np.zeros(count, dtype=np.int64)
        self.mmem = np.full((count, width), math.inf)
        self.mtib = np.zeros((count, width))
        self.halfseq = np.zeros(count)
        self.titer = np.full((count, width, nodes + 1), math.nan)
        self.steps: list[list[int]] = []
        self.profile = np.zeros(count, dtype=np.int64)
        profile_index: dict[str, int] = {}
        self.representative: list[str] = []  # a job of each profile (ratios are per profile pair)
        for k, job_id in enumerate(ids):
            job = instance.job_index[job_id]
            i_b = job.iterations
            self.demand[k] = job.num_gpus
            self.iterations[k] = i_b
            self.alone[k] = modes[k][0].iteration_time
            self.nmodes[k] = len(modes[k])
            # the same products as _Static.verdict_constants
            self.halfseq[k] = 0.5 * modes[k][0].iteration_time * i_b
            for m, mode in enumerate(modes[k]):
                self.mmem[k, m] = mode.memory_gib
                self.mtib[k, m] = mode.iteration_time * i_b
                for n in range(1, min(job.num_gpus, nodes) + 1):
                    self.titer[k, m, n] = instance.iteration_time(job_id, mode.steps, n)
            self.steps.append([mode.steps for mode in modes[k]])
            p = profile_index.get(job.profile)
            if p is None:
                p = profile_index[job.profile] = len(profile_index)
                self.representative.append(job_id)
            self.profile[k] = p
        size = len(profile_index)
        self.ratio = np.full((size, size), math.nan)
        self.known = np.zeros((size, size), dtype=np.bool_)
        self.room_level = np.array(st.room_level, dtype=np.int64)

    def ratios(self, st: _Static, profiles: np.ndarray) -> np.ndarray:
        """ξ_{victim|other} between the given profiles (NaN: may not share), from the same look-up as the
        Python model (``InstanceFacts.ratio`` of one job of each profile)."""
        unique = np.unique(profiles)
        block = np.ix_(unique, unique)
        if not self.known[block].all():
            rep = self.representative
            for a in unique.tolist():
                for b in unique.tolist():
                    if not self.known[a, b]:
                        value = st.facts.ratio(rep[a], rep[b])
                        self.ratio[a, b] = math.nan if value is None else value
                        self.known[a, b] = True
        return np.ascontiguousarray(self.ratio[np.ix_(profiles, profiles)])


class Decision:
    """One decision's jobs (running, pending, arriving in the model) numbered in id order, with their
    tables; :meth:`score` converts a pilot state and scores candidates in the compiled model."""

    def __init__(self, st: _Static, sim: _Sim, slot: float | None) -> None:
        tables = st.kernel_tables
        if tables is None:
            tables = st.kernel_tables = Tables(st)
        self.st = st
        self.slot = slot
        ids = sorted({*sim.run, *sim.pending, *(job_id for _, job_id in sim.arrivals)})
        self.lidx = {job_id: i for i, job_id in enumerate(ids)}
        g = np.array([tables.gid[job_id] for job_id in ids], dtype=np.int64)
        self.g = g
        self.tables = tables
        self.demand = tables.demand[g]
        self.iterations = tables.iterations[g]
        self.alone = tables.alone[g]
        self.arrival = np.array([st.arrival[job_id] for job_id in ids])
        self.keyrank = np.zeros(len(ids), dtype=np.int64)
        if sim.arrivals:  # only arrivals are inserted by key
            order = sorted(range(len(ids)), key=lambda i: st.key[ids[i]])
            self.keyrank[order] = np.arange(len(ids), dtype=np.int64)
        self.nmodes = tables.nmodes[g]
        self.mmem = np.ascontiguousarray(tables.mmem[g])
        self.mtib = np.ascontiguousarray(tables.mtib[g])
        self.halfseq = tables.halfseq[g]
        self.titer = np.ascontiguousarray(tables.titer[g])
        self.ratio = tables.ratios(st, tables.profile[g])
        self.width = int(self.demand.max()) if len(ids) else 1
        self.at = np.array([seen for seen, _ in sim.arrivals], dtype=float)
        self.aj = np.array([self.lidx[job_id] for _, job_id in sim.arrivals], dtype=np.int64)

    def score(
        self,
        sim: _Sim,
        candidates: Sequence[_Candidate],
        bases: Sequence[str],
        max_events: int,
        scan: int,
        tail: float,
        tries: int,
    ) -> tuple[list[float], int, int]:
        """``LookaheadPolicy._score`` of each candidate from the pilot state ``sim``: ``(scores, rollouts,
        events)``."""
        lidx = self.lidx
        st = self.st
        num_gpus = st.num_gpus
        kjobs = len(lidx)
        width = self.width
        occupancy = sim.occ
        depth = max(2, max(map(len, occupancy)))
        occ = np.zeros((num_gpus, depth), dtype=np.int64)
        occn = np.zeros(num_gpus, dtype=np.int64)
        for gpu, jobs in enumerate(occupancy):
            if jobs:
                occn[gpu] = len(jobs)
                occ[gpu, : len(jobs)] = [lidx[job_id] for job_id in jobs]
        running = np.zeros(kjobs, dtype=np.bool_)
        jg = np.zeros((kjobs, width), dtype=np.int64)
        jn = np.zeros(kjobs, dtype=np.int64)
        titer = np.zeros(kjobs)
        prog = np.zeros(kjobs)
        tat = np.zeros(kjobs)
        rate = np.zeros(kjobs)
        ver = np.full(kjobs, -1, dtype=np.int64)
        own = np.zeros(kjobs)
        if sim.run:
            rows = list(sim.run.items())
            index = [lidx[job_id] for job_id, _ in rows]
            running[index] = True
            for i, (_, record) in zip(index, rows, strict=True):
                gpus = record[0]
                jg[i, : len(gpus)] = gpus
                jn[i] = len(gpus)
            records = [record for _, record in rows]
            titer[index] = [r[1] for r in records]
            prog[index] = [r[2] for r in records]
            tat[index] = [r[3] for r in records]
            rate[index] = [r[4] for r in records]
            ver[index] = [r[5] for r in records]
            own[index] = [r[6] for r in records]
        heap = sim.heap
        hd = np.array([e[0] for e in heap], dtype=float)
        hs = np.array([e[1] for e in heap], dtype=np.int64)
        hj = np.array([lidx[e[2]] for e in heap], dtype=np.int64)
        pend = np.array([lidx[job_id] for job_id in sim.pending], dtype=np.int64)
        si = np.array(
            [sim.seq, sim.next_arrival, sim.free_count, sim.nsingle, len(sim.pending), len(heap), 0, 0],
            dtype=np.int64,
        )
        sf = np.array([sim.t, sim.total])
        count = len(candidates)
        cjob = np.full(count, -1, dtype=np.int64)
        cmode = np.zeros(count, dtype=np.int64)
        cgpus = np.zeros((count, max(width, 1)), dtype=np.int64)
        cng = np.zeros(count, dtype=np.int64)
        steps_of = self.tables.steps
        gid = self.tables.gid
        for k, candidate in enumerate(candidates):
            if candidate.job_id:
                cjob[k] = lidx[candidate.job_id]
                cmode[k] = steps_of[gid[candidate.job_id]].index(candidate.steps)
                cgpus[k, : len(candidate.gpus)] = candidate.gpus
                cng[k] = len(candidate.gpus)
        slot = self.slot
        scores, rollouts, events = _dispatcher()(
            st.gpn, st.capacity, float(st.gpu_memory), self.tables.room_level, self.demand, self.iterations,
            self.alone, self.arrival, self.keyrank, self.nmodes, self.mmem, self.mtib, self.halfseq, self.titer,
            self.ratio, si, sf, occ, occn, np.array(sim.mem, dtype=float), np.array(sim.released, dtype=float),
            running, jg, jn, titer, prog, tat, rate, ver, own, pend, hd, hs, hj, self.at, self.aj,
            cjob, cmode, cgpus, cng, np.array([_BASE_CODES[b] for b in bases], dtype=np.int64),
            0.0 if slot is None else float(slot), slot is not None, int(max_events), int(scan), float(tail),
            int(tries),
        )  # fmt: skip
        return scores.tolist(), int(rollouts), int(events)
