"""SJF-BSBF with rollout look-ahead (``"sjf-bsbf-lookahead"``): a pilot method over SJF-BSBF's decisions.

Why
---
SJF-BSBF (:mod:`heuristics.sjf_bsbf`) decides every pair on its own: Theorem 1 compares "share now" with
"wait for the running job" for *one* running job A and *one* new job B, ignoring every other pending
job; the partner, the GPUs and the order of starts are fixed greedily. On contended instances (8-20 jobs
on 4-8 GPUs) that leaves 15-25 % of total JCT on the table (``NOTES-oracle.md``, "The greedy's gap").

Method (rollout / pilot method: Bertsekas, Tsitsiklis & Wu 1997; Duin & Voss 1999)
-------------------------------------------------------------------------------
At each decision point the policy builds its set of starts one action at a time. For the current
partial plan it enumerates *candidate actions*, for the first ``head`` pending jobs in SJF order
(remaining time alone, SJF-BSBF's order):

* start the job alone on idle GPUs (consolidated placement, fastest mode), if enough are idle;
* share (one-GPU jobs: with each of the ``partners`` best running jobs that are alone on a GPU; gangs:
  Algorithm 1's construction, partners by pair JCT, idle GPUs completing the gang, with and without
  Theorem 1's filter), in the sub-batch Algorithm 2 picks next to the partner — *without* Theorem 1's
  veto: the rollout decides whether sharing pays;
* ``stop``: start nothing more now, wait for the next completion (only when something runs).

The list starts with the base policy's own next start, then every head job's first option, then every
job's second option, and so on (so trimming it to the budget keeps it diverse).

Each candidate is scored by **rollouts**: a copy of the cluster state (running jobs with their progress,
the candidate applied) is simulated forward by an internal model of SPEC.md's progress rule — the same
speed model (:meth:`formulation.instance.Instance.iteration_time`), the same ``ξ_eff`` (largest ratio
over GPU partners), the same slotted completion rule when the loop is slotted — with a *base policy*
taking every later start, until every modelled job completes. The score is the sum of the modelled
jobs' completion times (total JCT up to a constant), the smallest over the base policies (``bases``:
``"bsbf"`` = SJF-BSBF itself, ``"nosharing"`` = SJF without sharing, ``"share"`` = SJF-BSBF without
Theorem 1's veto). The best candidate joins the plan; ties (relative 1e-9) go to the earlier candidate,
so to the base policy's own action. The model reproduces the loop exactly: run with the SJF-BSBF base
from an initial state it gives SJF-BSBF's schedule cost to 1e-9 (``tests/test_lookahead.py``). Because
SJF-BSBF's next action is always a candidate, with every job known and the horizon covering them, the
plan can never be worse than SJF-BSBF's in the model (the cost-improvement property of rollout).

The Theorem 1 / Algorithm 2 arithmetic runs inline (:func:`pair_verdict`): the overlapped pair JCT only
grows with B's iteration time and the sequential one does not depend on B's sub-batch, so Algorithm 2's
best sub-batch is the fastest mode that fits next to A (ties between modes of equal speed aside).

Bounded work (decision time independent of the queue length)
------------------------------------------------------------
* ``horizon``: only the first pending jobs (SJF order; default twice the GPUs, at least 16) enter the
  model; the jobs behind are ignored (a shorter horizon undervalues the GPU time an action uses);
* ``max_events``: a rollout simulates at most that many events, then estimates the rest (running jobs
  finish at their current rate, jobs not started are list-scheduled alone on the earliest-free GPUs);
* ``budget``: simulated events per decision (default ``32000 / #GPUs``, at least 500): the candidate
  list is trimmed to what the budget pays for, and once it is spent the rest of the decision is the
  base policy's (``budget=0`` is exactly SJF-BSBF);
* ``scan`` / ``share_tries``: in a rollout the base policy examines at most ``scan`` share partners per
  job (shortest remaining time first) and tries to share at most ``share_tries`` jobs per instant (both
  larger than anything met at n <= 12, so there the base is SJF-BSBF exactly).

Unknown futures: the policy never looks at jobs that have not arrived (the view's instance may list
them). ``foresight=True`` (studies only) lets the rollouts see future arrivals, to measure how much of
the gap to the clairvoyant oracle is the price of not knowing them (docs/lookahead.md: little, because
the base policies are work-conserving).
"""

from __future__ import annotations

import bisect
import heapq
import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

from formulation.instance import Instance
from heuristics import lookahead_kernel
from heuristics.baselines import PendingQueue
from heuristics.core import Action, ClusterView, Start
from heuristics.placement import InstanceFacts
from heuristics.registry import register_policy
from heuristics.sjf_bsbf import TIE_TOLERANCE, ModeOption

#: Relative tolerance of "progress reached I_j" (SPEC.md; the loop's and the validator's REL_TOL).
REL_TOL = 1e-9
_MEMORY_SLACK = 1e-9
BASES: tuple[str, ...] = ("bsbf", "nosharing", "share")
_MIN_HORIZON = 16
_SCORE_TOL = 1e-9
_BUDGET_GPU_EVENTS = 32000
_MIN_BUDGET = 500
ORDERS: tuple[str, ...] = ("sjf", "area")
#: A running job in the model: ``[gpus, t_iter, progress, time_at, rate, version, memory]`` (progress in
#: iterations at ``time_at``, rate in iterations per second, version of its current completion entry in the
#: heap, memory per GPU in its accumulation mode).
_Record = list[Any]
#: A share partner (a running job alone on some GPUs): ``(remaining time alone, job, those GPUs, the most
#: memory used on one of them)``.
_Partner = tuple[float, str, list[int], float]
_first_item = operator.itemgetter(0)


class _Static:
    """Per-instance cached facts the forward model looks up in its hot loops."""

    def __init__(self, instance: Instance, order: str = "sjf") -> None:
        self.instance = instance
        self.order = order
        self.facts = InstanceFacts(instance)
        self._index = {job.id: i for i, job in enumerate(instance.jobs)}
        cluster = instance.cluster
        self.num_gpus = cluster.num_gpus
        self.gpn = cluster.gpus_per_node
        self.nodes = cluster.nodes
        self.capacity = cluster.capacity
        self.gpu_memory = cluster.gpu_memory_gib
        # room (idle + single-job GPUs) -> the largest GPU demand of any job that fits in it (0: none): the
        # pending jobs a base step examines depend on the room only through this level.
        demands = sorted({job.num_gpus for job in instance.jobs})
        self.room_level = [max([d for d in demands if d <= room], default=0) for room in range(self.num_gpus + 1)]
        self.demand: dict[str, int] = {}
        self.arrival: dict[str, float] = {}  # as the loop sees it (slotted: the next slot boundary)
        self.key: dict[str, tuple[float, float, int]] = {}  # priority of a job not yet started (smaller first)
        self.iterations: dict[str, float] = {}
        self.batch: dict[str, int] = {}
        self.options: dict[str, tuple[ModeOption, ...]] = {}
        self.alone: dict[str, float] = {}  # fastest alone iteration time on the fewest nodes
        self._titer: dict[tuple[str, int, int], float] = {}
        self.nodes_of: dict[tuple[int, ...], int] = {}  # GPU set -> nodes it spans
        self._memory: dict[tuple[str, int], float] = {}
        self._ratio: dict[str, dict[str, float | None]] = {}  # victim -> other -> ξ_{victim|other}
        # Per new job B: partner A -> (ξ_{A|B}, ξ_{B|A}), or None when the pair may not share.
        self._pairs: dict[str, dict[str, tuple[float, float] | None]] = {}
        # Per new job B: ((memory, iteration time, steps, t_B·i_B), ...) fastest mode first, and
        # 0.5·t_B,alone·i_B (the hot loop's constants of Theorem 1, same arithmetic as pair_verdict).
        self._verdict: dict[str, tuple[tuple[tuple[float, float, int, float], ...], float, float]] = {}
        self.kernel_tables: lookahead_kernel.Tables | None = None  # the compiled model's (built on first use)

    def pair_row(self, job_id: str) -> dict[str, tuple[float, float] | None]:
        """Job ``job_id``'s cached ``(ξ_{A|B}, ξ_{B|A})`` per partner ``A`` (filled by :meth:`pair`)."""
        row = self._pairs.get(job_id)
        if row is None:
            row = self._pairs[job_id] = {}
        return row

    def pair(self, job_id: str, other: str) -> tuple[float, float] | None:
        """``(ξ_{other|job}, ξ_{job|other})``, or ``None`` when either is ``None`` (cached)."""
        row = self.pair_row(job_id)
        try:
            return row[other]
        except KeyError:
            xi_a = self.ratio(other, job_id)
            xi_b = self.ratio(job_id, other) if xi_a is not None else None
            value = row[other] = (xi_a, xi_b) if xi_a is not None and xi_b is not None else None
            return value

    def verdict_constants(self, job_id: str) -> tuple[tuple[tuple[float, float, int, float], ...], float, float]:
        """``(modes, half_sequential, i_B)`` of new job ``job_id`` for :meth:`_Sim.share_options`."""
        value = self._verdict.get(job_id)
        if value is None:
            options = self.options[job_id]
            i_b = self.iterations[job_id]
            modes = tuple((o.memory_gib, o.iteration_time, o.steps, o.iteration_time * i_b) for o in options)
            value = self._verdict[job_id] = (modes, 0.5 * options[0].iteration_time * i_b, i_b)
        return value

    def ratio(self, victim: str, other: str) -> float | None:
        """ξ_{victim|other} (``None``: may not share), cached by job pair (the hot loops' look-up)."""
        row = self.ratio_row(victim)
        try:
            return row[other]
        except KeyError:
            value = row[other] = self.facts.ratio(victim, other)
            return value

    def ratio_row(self, victim: str) -> dict[str, float | None]:
        """``victim``'s cached ξ_{victim|other} per ``other`` (filled by :meth:`ratio`)."""
        row = self._ratio.get(victim)
        if row is None:
            row = self._ratio[victim] = {}
        return row

    def job(self, job_id: str) -> None:
        """Cache ``job_id``'s facts (idempotent)."""
        if job_id in self.demand:
            return
        job = self.instance.job_index[job_id]
        self.demand[job_id] = job.num_gpus
        self.iterations[job_id] = job.iterations
        self.batch[job_id] = job.batch_size
        modes = self.instance.modes(job_id)
        self.options[job_id] = tuple(ModeOption(m.steps, m.sub_batch, m.iteration_time, m.memory_gib) for m in modes)
        self.alone[job_id] = modes[0].iteration_time
        for m in modes:
            self._memory[(job_id, m.steps)] = m.memory_gib
        # The queue's key of a job that has not run (PendingQueue: key, then instance order).
        length = job.iterations * self.facts.alone_iteration_time(job_id)
        weight = job.num_gpus if self.order == "area" else 1
        self.key[job_id] = (length * weight, job.arrival, self._index[job_id])
        self.arrival[job_id] = job.arrival

    def memory(self, job_id: str, steps: int) -> float:
        value = self._memory.get((job_id, steps))
        if value is None:
            value = self.facts.memory(job_id, steps)
            self._memory[(job_id, steps)] = value
        return value

    def titer(self, job_id: str, steps: int, gpus: Sequence[int]) -> float:
        gpn = self.gpn
        nodes = 1 if len(gpus) == 1 else len({g // gpn for g in gpus})
        key = (job_id, steps, nodes)
        value = self._titer.get(key)
        if value is None:
            value = self.instance.iteration_time(job_id, steps, nodes)
            self._titer[key] = value
        return value


@dataclass(frozen=True, slots=True)
class _Candidate:
    """One action of the pilot: start ``job_id`` on ``gpus`` with ``steps`` (``job_id`` empty = stop)."""

    job_id: str
    gpus: tuple[int, ...]
    steps: int


_STOP = _Candidate("", (), 0)


class _Sim:
    """A copyable forward model of the cluster (running jobs, occupancy, the jobs still to start).

    Running job record: ``[gpus, t_iter, progress, time_at, rate, version]`` (progress in iterations at
    ``time_at``; ``rate`` in iterations per second).
    """

    __slots__ = (
        "_partners",
        "arrivals",
        "co",
        "free_by_node",
        "free_count",
        "heap",
        "mem",
        "next_arrival",
        "nsingle",
        "occ",
        "pdem",
        "pending",
        "released",
        "run",
        "seq",
        "singles",
        "st",
        "steps",
        "t",
        "todo",
        "total",
    )

    def __init__(self, st: _Static) -> None:
        self.st = st
        self.t = 0.0
        self.occ: list[list[str]] = []
        self.mem: list[float] = []
        self.released: list[float] = []  # per GPU: when it last became idle (valid while idle)
        self.free_by_node: list[list[int]] = []
        self.free_count = 0
        self.nsingle = 0  # GPUs holding exactly one job
        self.singles: set[int] = set()  # those GPUs
        self._partners: list[_Partner] | None = None
        self.run: dict[str, _Record] = {}
        # Running job -> the running jobs sharing at least one GPU with it (its ξ_eff is the largest ratio
        # over them): kept at starts and completions so a re-rate does not scan the job's GPUs.
        self.co: dict[str, set[str]] = {}
        self.steps: dict[str, int] = {}
        self.heap: list[tuple[float, int, str, int]] = []
        self.seq = 0
        self.pending: list[str] = []
        self.pdem: list[int] = []  # GPU demand of each pending job (same order)
        # room level -> the pending jobs that fit in it as (job, demand), in order
        self.todo: dict[int, list[tuple[str, int]]] = {}
        self.total = 0.0
        self.arrivals: list[tuple[float, str]] = []  # future arrivals in the model (time order; shared, read-only)
        self.next_arrival = 0

    def copy(self) -> _Sim:
        other = _Sim.__new__(_Sim)
        other.st = self.st
        other.t = self.t
        other.occ = list(map(list, self.occ))
        other.mem = list(self.mem)
        other.released = list(self.released)
        other.free_by_node = list(map(list, self.free_by_node))
        other.free_count = self.free_count
        other.nsingle = self.nsingle
        other.singles = set(self.singles)
        other._partners = None
        other.run = dict(zip(self.run, map(list, self.run.values()), strict=True))
        other.co = dict(zip(self.co, map(set.copy, self.co.values()), strict=True))
        other.steps = dict(self.steps)
        other.heap = list(self.heap)
        other.seq = self.seq
        other.pending = list(self.pending)
        other.pdem = list(self.pdem)
        other.todo = {level: list(jobs) for level, jobs in self.todo.items()}
        other.total = self.total
        other.arrivals = self.arrivals
        other.next_arrival = self.next_arrival
        return other

    # --- placement ------------------------------------------------------------------------------------
    def pick_free(self, count: int, near: set[int] | None = None) -> list[int] | None:
        """Consolidated placement (as :meth:`heuristics.placement.Scratch.pick_free`)."""
        if count <= 0:
            return []
        if self.free_count < count:
            return None
        fbn = self.free_by_node
        taken: list[int] = []
        exclude: set[int] = set()
        if near:
            for node in sorted(near, key=lambda n: (-len(fbn[n]), n)):
                taken.extend(fbn[node][: count - len(taken)])
                if len(taken) == count:
                    return taken
            exclude = near
        need = count - len(taken)
        best_node, best_free = -1, 1 << 30
        for node, free in enumerate(fbn):
            size = len(free)
            if need <= size < best_free and node not in exclude:
                best_node, best_free = node, size
        if best_node >= 0:
            return taken + fbn[best_node][:need]
        order = sorted((n for n in range(len(fbn)) if n not in exclude and fbn[n]), key=lambda n: (-len(fbn[n]), n))
        for node in order:
            taken.extend(fbn[node][: count - len(taken)])
            if len(taken) == count:
                break
        return taken if len(taken) == count else None

    def budget(self, gpus: Sequence[int]) -> float:
        return self.st.gpu_memory - max((self.mem[g] for g in gpus), default=0.0)

    # --- dynamics -------------------------------------------------------------------------------------
    def _advance(self, record: _Record, now: float) -> None:
        if now > record[3]:
            record[2] += record[4] * (now - record[3])
            record[3] = now

    def _rerate(self, job_ids: Iterable[str], slot: float | None) -> None:
        """Bring each job's progress to now and, if its rate changed (ξ_eff: the largest ratio over the jobs
        sharing a GPU with it), schedule its new completion (in ``job_ids`` order: the heap's tie-break)."""
        run = self.run
        now = self.t
        co = self.co
        st = self.st
        rows = st._ratio
        iterations_of = st.iterations
        heap = self.heap
        for job_id in job_ids:
            record = run[job_id]
            if now > record[3]:  # _advance, inlined
                record[2] += record[4] * (now - record[3])
                record[3] = now
            xi = 1.0
            others = co[job_id]
            if others:  # a max: the order of the set does not matter
                row = rows.get(job_id) or st.ratio_row(job_id)
                for other in others:
                    try:
                        r = row[other]
                    except KeyError:
                        r = st.ratio(job_id, other)
                    if r is not None and r > xi:
                        xi = r
            rate = 1.0 / (record[1] * xi)
            if rate == record[4]:
                continue
            record[4] = rate
            iterations = iterations_of[job_id]
            remaining = iterations - record[2]
            if slot is None:
                done = now + max(0.0, remaining) / rate
            else:
                slots = max(1, math.ceil((remaining - REL_TOL * iterations) / (rate * slot)))
                done = (round(now / slot) + slots) * slot
            seq = self.seq = self.seq + 1
            record[5] = seq
            heapq.heappush(heap, (done, seq, job_id, seq))

    def start(self, job_id: str, gpus: Sequence[int], steps: int, slot: float | None, progress: float = 0.0) -> None:
        st = self.st
        own = st._memory.get((job_id, steps))
        if own is None:
            own = st.memory(job_id, steps)
        gpn = st.gpn
        touched: set[str] = set()
        occ = self.occ
        mem = self.mem
        singles = self.singles
        fbn = self.free_by_node
        idle = 0  # idle GPUs taken (each becomes a single-job GPU)
        shared = 0  # single-job GPUs that now hold two jobs
        for gpu in gpus:
            jobs = occ[gpu]
            if not jobs:
                fbn[gpu // gpn].remove(gpu)
                idle += 1
                singles.add(gpu)
            else:
                if len(jobs) == 1:
                    shared += 1
                    singles.discard(gpu)
                touched.update(jobs)
            jobs.append(job_id)
            mem[gpu] += own
        self.free_count -= idle
        self.nsingle += idle - shared
        co = self.co
        co[job_id] = touched
        for other in touched:
            co[other].add(job_id)
        self._partners = None
        placed = tuple(gpus)
        nodes = 1 if len(placed) == 1 else st.nodes_of.get(placed)
        if nodes is None:
            nodes = st.nodes_of[placed] = len({g // gpn for g in placed})
        titer = st._titer.get((job_id, steps, nodes))
        if titer is None:
            titer = st.titer(job_id, steps, placed)
        record: _Record = [placed, titer, progress, self.t, 0.0, -1, own]
        self.run[job_id] = record
        self.steps[job_id] = steps
        if not touched:
            # Alone on idle GPUs: what _rerate computes with ξ = 1 (same expressions).
            rate = 1.0 / (record[1] * 1.0)
            if rate == 0.0:  # as _rerate: an unchanged rate (the record starts at 0) schedules nothing
                return
            record[4] = rate
            iterations = st.iterations[job_id]
            remaining = iterations - progress
            if slot is None:
                done = self.t + max(0.0, remaining) / rate
            else:
                slots = max(1, math.ceil((remaining - REL_TOL * iterations) / (rate * slot)))
                done = (round(self.t / slot) + slots) * slot
            self.seq += 1
            record[5] = self.seq
            heapq.heappush(self.heap, (done, self.seq, job_id, self.seq))
            return
        self._rerate(sorted([*touched, job_id]), slot)

    def next_event(self, slot: float | None) -> bool:
        """Advance to the next completion(s) (release their GPUs) and arrivals (queue them).

        ``False`` when nothing runs and nothing is left to arrive."""
        heap = self.heap
        run = self.run
        while heap:
            done, _, job_id, version = heap[0]
            record = run.get(job_id)
            if record is None or record[5] != version:
                heapq.heappop(heap)
                continue
            break
        else:
            done = math.inf
        arrivals = self.arrivals
        coming = arrivals[self.next_arrival][0] if self.next_arrival < len(arrivals) else math.inf
        now = min(done, coming)
        if now == math.inf:
            return False
        limit = now + 1e-9 * max(1.0, abs(now))
        if coming <= limit:
            self._arrive(limit)
        finished: list[str] = []
        while heap and heap[0][0] <= limit:
            _, _, job_id, version = heapq.heappop(heap)
            record = run.get(job_id)
            if record is not None and record[5] == version:
                finished.append(job_id)
        self.t = now
        gpn = self.st.gpn
        touched: set[str] = set()
        occ = self.occ
        mem = self.mem
        singles = self.singles
        self._partners = None
        co = self.co
        freed = 0  # GPUs that became idle
        new_single = 0  # GPUs left with one job
        for job_id in finished:
            record = run.pop(job_id)
            self.total += now
            del self.steps[job_id]
            own = record[6]
            partners = co.pop(job_id)
            if partners:
                for other in partners:
                    co[other].discard(job_id)
                touched |= partners
                for gpu in record[0]:
                    jobs = occ[gpu]
                    jobs.remove(job_id)
                    left = len(jobs)
                    if left:
                        mem[gpu] -= own
                        if left == 1:
                            new_single += 1
                            singles.add(gpu)
                    else:
                        mem[gpu] = 0.0
                        self.released[gpu] = now
                        bisect.insort(self.free_by_node[gpu // gpn], gpu)
                        freed += 1
                        singles.discard(gpu)
            else:  # alone on all its GPUs: they all become idle
                released = self.released
                fbn = self.free_by_node
                for gpu in record[0]:
                    occ[gpu].remove(job_id)
                    mem[gpu] = 0.0
                    released[gpu] = now
                    bisect.insort(fbn[gpu // gpn], gpu)
                    singles.discard(gpu)
                freed += len(record[0])
        self.free_count += freed
        self.nsingle += new_single - freed
        if touched:
            self._rerate([other for other in sorted(touched) if other in run], slot)
        return True

    def _arrive(self, limit: float) -> None:
        """Queue the model's arrivals up to ``limit`` in priority order."""
        arrivals = self.arrivals
        key = self.st.key
        while self.next_arrival < len(arrivals) and arrivals[self.next_arrival][0] <= limit:
            job_id = arrivals[self.next_arrival][1]
            self.next_arrival += 1
            rank = key[job_id]
            pending = self.pending
            index = len(pending)
            while index > 0 and key[pending[index - 1]] > rank:
                index -= 1
            pending.insert(index, job_id)
            self.pdem.insert(index, self.st.demand[job_id])
            self.todo.clear()

    def drop(self, job_id: str) -> None:
        """Remove ``job_id`` from the pending jobs (it started)."""
        index = self.pending.index(job_id)
        demand = self.pdem[index]
        del self.pending[index]
        del self.pdem[index]
        if self.todo:
            entry = (job_id, demand)
            for level, jobs in self.todo.items():
                if demand <= level:
                    jobs.remove(entry)

    # --- the base policies ----------------------------------------------------------------------------
    def partner_list(self) -> list[_Partner]:
        """Running jobs alone on some GPUs (SJF-BSBF's ``G_OJ`` grouped by job) as ``(remaining time alone,
        job, GPUs, most memory used on one of them)``, shortest remaining first."""
        if self._partners is not None:
            return self._partners
        out: list[_Partner] = []
        if not self.nsingle:
            self._partners = out
            return out
        run = self.run
        iterations = self.st.iterations
        t = self.t
        mem = self.mem
        occ = self.occ
        # Running job -> the GPUs it is alone on (GPU order: jobs in order of their first such GPU).
        groups: dict[str, list[int]] = {}
        for gpu in sorted(self.singles):
            job_id = occ[gpu][0]
            gpus = groups.get(job_id)
            if gpus is None:
                groups[job_id] = [gpu]
            else:
                gpus.append(gpu)
        for job_id, gpus in groups.items():
            record = run[job_id]
            left = iterations[job_id] - (record[2] + record[4] * (t - record[3]))
            used = mem[gpus[0]] if len(gpus) == 1 else max([mem[g] for g in gpus])
            out.append((max(0.0, left) * record[1], job_id, gpus, used))
        out.sort(key=_first_item)
        self._partners = out
        return out

    def share_options(
        self,
        job_id: str,
        partners: list[_Partner],
        limit: int | None = None,
        veto: bool = False,
        need: int = 0,
        scanned_gpus: int = -1,
    ) -> list[tuple[float, bool, str, list[int], int]]:
        """Algorithm 2 next to running jobs (the first ``limit`` of ``partners``): ``(pair JCT, share?, A,
        GPUs, steps)``, best pair JCT first.

        Algorithm 2 scores every sub-batch that fits next to A with Theorem 1 and keeps the best. The pair's
        overlapped JCT only grows with B's iteration time and the sequential one does not depend on the
        sub-batch, so the best is the *fastest* mode that fits (up to ties between modes of equal speed):
        this is :func:`heuristics.sjf_bsbf.best_sub_batch` without scoring every size. With ``veto`` only
        the options Theorem 1 accepts are returned (the same list, filtered); with ``veto`` and ``need``, an
        empty list as soon as the accepted options cannot hold ``need`` GPUs any more (a gang that
        :meth:`gang_from` could not complete: the caller rejects it either way); ``scanned_gpus``: the GPUs
        of the scanned partners when the caller knows it.
        """
        # Same arithmetic as pair_verdict(x_a, 1.0, ξ_a, t_B, i_B, ξ_B, t_B,alone), inlined (the hot loop
        # of every rollout): identical floats, hence identical decisions.
        st = self.st
        modes, half_sequential, _ = st._verdict.get(job_id) or st.verdict_constants(job_id)
        row = st._pairs.get(job_id)
        if row is None:
            row = st.pair_row(job_id)
        pair = st.pair
        gpu_memory = st.gpu_memory + _MEMORY_SLACK
        result = []
        scanned = partners if limit is None else partners[:limit]
        # GPUs the accepted options could still hold (only tracked for a gang with ``veto``).
        if veto and need > 0:
            potential = scanned_gpus if scanned_gpus >= 0 else sum([len(p[2]) for p in scanned])
        else:
            potential = 1 << 30
        for x_a, other, gpus, used in scanned:
            try:
                xis = row[other]
            except KeyError:
                xis = pair(job_id, other)
            if xis is None:
                potential -= len(gpus)
                if potential < need:
                    return []
                continue
            xi_a, xi_b = xis
            for mode in modes:  # fastest first
                if used + mode[0] <= gpu_memory:
                    break
            else:
                potential -= len(gpus)
                if potential < need:
                    return []
                continue
            steps, alone_b = mode[2], mode[3]
            shared_a = xi_a * x_a
            shared_b = xi_b * alone_b
            if shared_a <= shared_b:
                overlap = shared_a + 0.5 * (alone_b - shared_a / xi_b)
            else:
                overlap = shared_b + 0.5 * (x_a - shared_b / xi_a)
            sequential = x_a + half_sequential
            if overlap < sequential - TIE_TOLERANCE * abs(sequential):  # a tie waits (theorem1_share)
                result.append((overlap, True, other, gpus, steps))
            elif not veto:
                result.append((sequential, False, other, gpus, steps))
            else:
                potential -= len(gpus)
                if potential < need:
                    return []
        result.sort(key=_first_item)
        return result

    def best_share(
        self, job_id: str, partners: list[_Partner], limit: int | None, veto: bool
    ) -> tuple[int, int] | None:
        """A one-GPU job's share placement as ``gang_from(share_options(...))`` gives it (filtered by
        Theorem 1's verdict when ``veto``): the first option of least pair JCT, as ``(GPU, steps)``.

        One pass, no list or sort: a stable sort's first element is the earliest minimum."""
        st = self.st
        modes, half_sequential, _ = st._verdict.get(job_id) or st.verdict_constants(job_id)
        row = st._pairs.get(job_id)
        if row is None:
            row = st.pair_row(job_id)
        pair = st.pair
        gpu_memory = st.gpu_memory + _MEMORY_SLACK
        best = math.inf
        found: tuple[int, int] | None = None
        for x_a, other, gpus, used in partners if limit is None else partners[:limit]:
            try:
                xis = row[other]
            except KeyError:
                xis = pair(job_id, other)
            if xis is None:
                continue
            xi_a, xi_b = xis
            for mode in modes:  # fastest first
                if used + mode[0] <= gpu_memory:
                    break
            else:
                continue
            steps, alone_b = mode[2], mode[3]
            shared_a = xi_a * x_a
            shared_b = xi_b * alone_b
            if shared_a <= shared_b:
                overlap = shared_a + 0.5 * (alone_b - shared_a / xi_b)
            else:
                overlap = shared_b + 0.5 * (x_a - shared_b / xi_a)
            sequential = x_a + half_sequential
            if overlap < sequential - TIE_TOLERANCE * abs(sequential):  # a tie waits (theorem1_share)
                value = overlap
            elif veto:
                continue
            else:
                value = sequential
            if found is None or value < best:
                best = value
                found = (gpus[0], steps)
        return found

    def gang_from(
        self, job_id: str, demand: int, options: list[tuple[float, bool, str, list[int], int]]
    ) -> tuple[list[int], int] | None:
        """Algorithm 1, lines 14-17: GPUs of the partners in ``options`` order, idle GPUs complete the gang."""
        chosen: list[int] = []
        steps_seen: list[int] = []
        for _, _, _, gpus, steps in options:
            chosen.extend(gpus[: demand - len(chosen)])
            steps_seen.append(steps)
            if len(chosen) == demand:
                break
        if not chosen:
            return None
        if len(chosen) < demand:
            extra = self.pick_free(demand - len(chosen), {g // self.st.gpn for g in chosen})
            if extra is None:
                return None
            chosen.extend(extra)
        if len(steps_seen) == 1:
            return chosen, steps_seen[0]
        budget = self.budget(chosen)
        for option in self.st.options[job_id]:
            if option.memory_gib <= budget + _MEMORY_SLACK:
                return chosen, option.steps
        return None

    def base_step(self, base: str, slot: float | None, scan: int | None = None, tries: int = 1 << 30) -> None:
        """The base policy's starts at ``self.t``: SJF-BSBF (``"bsbf"``; share partners: the ``scan`` with
        the shortest remaining time, all when ``None``) or SJF without sharing (``"nosharing"``)."""
        if not self.pending:
            return
        st = self.st
        sharing = base != "nosharing" and st.capacity >= 2
        veto = base == "bsbf"  # Theorem 1's veto (the "share" base shares whenever a sub-batch fits)
        single = self.nsingle if sharing else 0
        free = self.free_count
        if free + single == 0:
            return
        started: list[str] = []
        partners: list[_Partner] | None = None
        partner_gpus = -1  # GPUs of the scanned partners (-1: not counted yet)
        # free + single never grows during a step (a start alone turns idle GPUs into single ones, a
        # shared start uses single ones), so a job too large now stays too large: skip those up front.
        level = st.room_level[free + single]
        todo = self.todo.get(level)
        if todo is None:
            pdem = self.pdem
            todo = self.todo[level] = list(compress(zip(self.pending, pdem, strict=True), map(level.__ge__, pdem)))
        for job_id, demand in todo:
            if free + single == 0:
                break
            if demand > free + single:
                continue
            if demand <= free:
                gpus = self.pick_free(demand)
                assert gpus is not None
                steps = st.options[job_id][0].steps
            else:
                if tries <= 0:
                    if not free:
                        break
                    continue
                tries -= 1
                if partners is None:
                    partners = self.partner_list()
                    partner_gpus = -1
                if demand == 1:
                    best = self.best_share(job_id, partners, scan, veto)
                    if best is None:
                        continue
                    gpus, steps = [best[0]], best[1]
                else:
                    # gang_from cannot complete the gang from fewer partner + idle GPUs than it needs
                    # (an exact shortcut: it would return None after scoring every partner).
                    if partner_gpus < 0:
                        partner_gpus = sum([len(p[2]) for p in (partners if scan is None else partners[:scan])])
                    if partner_gpus + free < demand:
                        continue
                    options = self.share_options(job_id, partners, scan, veto, demand - free, partner_gpus)
                    if not options or sum([len(o[3]) for o in options]) + free < demand:
                        continue  # the same shortcut with the partners Theorem 1 accepts
                    placed = self.gang_from(job_id, demand, options)
                    if placed is None:
                        continue
                    gpus, steps = placed
            self.start(job_id, gpus, steps, slot)
            started.append(job_id)
            partners = None
            free = self.free_count
            if sharing:
                single = self.nsingle
        for job_id in started:
            self.drop(job_id)

    def rollout(
        self, base: str, slot: float | None, max_events: int, scan: int | None, tail: float, tries: int
    ) -> tuple[float, int]:
        """Run the base policy until every job in the model completes, or for ``max_events`` completion
        events and then estimate the rest (:meth:`terminal`). Returns ``(score, events)``: the sum of the
        modelled jobs' completion times plus ``tail`` × the sum over GPUs of the time each becomes idle
        for good (the delay the jobs behind the horizon see)."""
        events = 0
        sharing = base != "nosharing" and self.st.capacity >= 2
        while True:
            # (base_step returns at once when nothing is pending or no GPU is idle or, sharing, single)
            if self.pending and (self.free_count or (sharing and self.nsingle)):
                self.base_step(base, slot, scan, tries)
            if events >= max_events:
                return self.terminal(tail), events
            if not self.next_event(slot):
                break
            events += 1
        if self.pending:  # cannot place them at all (should not happen): a prohibitive score
            return math.inf, events
        return self.total + (tail * sum(self.released) if tail else 0.0), events

    def terminal(self, tail: float = 0.0) -> float:
        """Completed sum + estimate of the rest: running jobs finish at their current predicted times; the
        jobs not started are list-scheduled in order, alone, on the earliest-free GPUs (no sharing); plus
        ``tail`` × the sum of the GPUs' idle-for-good times."""
        total = self.total
        free_at = [self.t] * self.st.num_gpus
        run = self.run
        for done, _, job_id, version in self.heap:
            record = run.get(job_id)
            if record is not None and record[5] == version:
                total += done
                for gpu in record[0]:
                    if done > free_at[gpu]:
                        free_at[gpu] = done
        st = self.st
        later = [job_id for _, job_id in self.arrivals[self.next_arrival :]]
        if self.pending or later:
            free_at.sort()
            arrival = st.arrival
            for job_id in self.pending + later:
                demand = st.demand[job_id]
                begin = max(free_at[demand - 1], arrival[job_id])
                done = begin + st.iterations[job_id] * st.alone[job_id]
                total += done
                del free_at[:demand]
                at = bisect.bisect_right(free_at, done)  # what ``demand`` insorts of ``done`` give, at once
                free_at[at:at] = [done] * demand
        return total + (tail * sum(free_at) if tail else 0.0)


def pair_verdict(
    t_a: float, i_a: float, xi_a: float, t_b: float, i_b: float, xi_b: float, t_b_alone: float
) -> tuple[bool, float]:
    """Theorem 1 inline (same arithmetic as :func:`heuristics.sjf_bsbf.theorem1_share`, no objects).

    Returns ``(share, pair average JCT)``: share now (κ = 0) iff its average completion time is below
    the sequential one (κ = t_A·i_A) by more than :data:`~heuristics.sjf_bsbf.TIE_TOLERANCE`.
    """
    alone_a = t_a * i_a
    alone_b = t_b * i_b
    shared_a = xi_a * alone_a
    shared_b = xi_b * alone_b
    if shared_a <= shared_b:
        overlap = shared_a + 0.5 * (alone_b - shared_a / xi_b)
    else:
        overlap = shared_b + 0.5 * (alone_a - shared_b / xi_a)
    sequential = alone_a + 0.5 * t_b_alone * i_b
    if overlap < sequential - TIE_TOLERANCE * abs(sequential):
        return True, overlap
    return False, sequential


def _key_sjf(facts: InstanceFacts, view: ClusterView, job_id: str) -> tuple[float, float]:
    return (view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id), facts.job(job_id).arrival)


def _key_area(facts: InstanceFacts, view: ClusterView, job_id: str) -> tuple[float, float]:
    job = facts.job(job_id)
    return (view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id) * job.num_gpus, job.arrival)


class LookaheadPolicy:
    """SJF-BSBF with rollout look-ahead (see the module docstring).

    Parameters
    ----------
    head
        Pending jobs (in priority order) considered as candidates for the next start.
    partners
        Share options kept per one-GPU candidate job (best by Algorithm 2's pair JCT).
    horizon
        Pending jobs (priority order) simulated in a rollout; later ones are ignored. Default: twice the
        number of GPUs, at least 16 (a shorter horizon undervalues the GPU time an action uses: measured
        worse than SJF-BSBF itself on 150 jobs / 32 GPUs with 16).
    max_events
        Completion events simulated per rollout; after that the rest is estimated (running jobs at their
        current rate, jobs not started list-scheduled alone).
    scan
        Share partners (shortest remaining time first) the base policy examines per job in a rollout.
    share_tries
        Jobs the base policy tries to share per instant in a rollout.
    budget
        Simulated events per decision; once spent, the rest of the decision is the base policy's. Default:
        ``32000 / #GPUs`` (at least 500): an event costs about linearly more with the cluster size, so
        this bounds a decision's time; it never binds on the standard family at n <= 12 (the most a
        decision used there: about 1,800 events on 4 GPUs, budget 8,000).
    tail
        Add (jobs behind the horizon / #GPUs) × the sum over GPUs of the time each becomes idle for good to
        a rollout's score (charges the GPU time an action uses to the jobs the model ignores). Off by
        default: with the default horizon it measured slightly worse (docs/lookahead.md).
    bases
        Base policies of the rollouts (from ``"bsbf"``, ``"nosharing"``, ``"share"``); a candidate's score
        is the best over them; the first one's next start is always a candidate.
    order
        Priority order: ``"sjf"`` (remaining time alone, SJF-BSBF's) or ``"area"`` (× GPU demand).
    foresight
        **Studies only** (not an online policy): the rollouts also see the jobs that have not arrived yet
        (the next ``horizon`` by arrival). Measures how much of the gap to the clairvoyant oracle is the
        price of not knowing the future.
    compiled
        Run the rollouts in the compiled model (:mod:`heuristics.lookahead_kernel`) where numba is
        installed and compiled; the same scores bit for bit, so the same decisions. ``False``: always the
        Python model.
    """

    preemptive = False
    round_length: float | None = None

    def __init__(
        self,
        *,
        head: int = 8,
        partners: int = 8,
        horizon: int | None = None,
        max_events: int = 48,
        scan: int = 8,
        share_tries: int = 16,
        budget: int | None = None,
        tail: bool = False,
        bases: Sequence[str] = ("bsbf", "nosharing"),
        order: str = "sjf",
        foresight: bool = False,
        compiled: bool = True,
    ) -> None:
        if min(head, horizon or 1, max_events, scan) < 1 or partners < 0 or (budget is not None and budget < 0):
            raise ValueError("head, horizon, max_events, scan must be >= 1 and partners, budget >= 0")
        unknown = [b for b in bases if b not in BASES]
        if unknown or not bases:
            raise ValueError(f"bases must be a non-empty subset of {BASES}, got {list(bases)}")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        self.head = head
        self.partners = partners
        self.horizon = horizon
        self.max_events = max_events
        self.scan = scan
        self.budget = budget
        self.tail = tail
        self.share_tries = share_tries
        self.foresight = foresight
        self.compiled = compiled
        self.bases = tuple(bases)
        self.order = order
        self.name = "sjf-bsbf-lookahead"
        self.reset()

    def reset(self) -> None:
        self.static: _Static | None = None
        self.queue: PendingQueue | None = None
        self._arrival_order: list[tuple[float, str]] | None = None
        self.rollouts = 0  # over the run (for reports and tests)
        self.events = 0  # simulated completion events over the run
        self.deviations = 0  # decisions where the pilot chose other than the first base's action
        self.compiled_steps = 0  # pilot steps scored by the compiled model

    # --- state ------------------------------------------------------------------------------------------
    def _bind(self, view: ClusterView) -> tuple[_Static, PendingQueue]:
        if self.static is None or self.static.instance is not view.instance or self.queue is None:
            self.reset()
            self.static = _Static(view.instance, self.order)
            self.queue = PendingQueue(self.static.facts, _key_sjf if self.order == "sjf" else _key_area)
        self.queue.sync(view)
        return self.static, self.queue

    def _future(self, view: ClusterView, st: _Static, count: int) -> list[tuple[float, str]]:
        """``foresight`` only: the next ``count`` jobs that have not arrived yet, at the time the loop will
        see them (slotted: the next slot boundary)."""
        if self._arrival_order is None:
            slot = view.slot
            timed = []
            for index, job in enumerate(view.instance.jobs):
                seen = job.arrival if slot is None else math.ceil(job.arrival / slot - 1e-9) * slot
                timed.append((seen, index, job.id))
            timed.sort()
            self._arrival_order = [(seen, job_id) for seen, _, job_id in timed]
        out = []
        for seen, job_id in self._arrival_order:
            if seen > view.time + 1e-9 * max(1.0, view.time):
                st.job(job_id)
                st.arrival[job_id] = seen
                out.append((seen, job_id))
                if len(out) >= count:
                    break
        return out

    def _model(self, view: ClusterView, st: _Static, pending: list[str]) -> _Sim:
        sim = _Sim(st)
        sim.t = view.time
        num_gpus = st.num_gpus
        sim.occ = [[] for _ in range(num_gpus)]
        sim.mem = [0.0] * num_gpus
        sim.released = [view.time] * num_gpus
        sim.free_by_node = [list(range(n * st.gpn, (n + 1) * st.gpn)) for n in range(st.nodes)]
        sim.free_count = num_gpus
        running = [view.running[j] for j in view.running]
        # Place every running job first (no re-rating), then rate them all once.
        for job in running:
            st.job(job.job_id)
            own = st.memory(job.job_id, job.steps)
            for gpu in job.gpus:
                if not sim.occ[gpu]:
                    sim.free_by_node[gpu // st.gpn].remove(gpu)
                    sim.free_count -= 1
                sim.occ[gpu].append(job.job_id)
                sim.mem[gpu] += own
            sim.run[job.job_id] = [
                tuple(job.gpus),
                st.titer(job.job_id, job.steps, job.gpus),
                job.progress,
                view.time,
                0.0,
                -1,
                own,
            ]
            sim.steps[job.job_id] = job.steps
        sim.singles = {gpu for gpu, jobs in enumerate(sim.occ) if len(jobs) == 1}
        sim.co = {job.job_id: set() for job in running}
        for jobs in sim.occ:
            for job_id in jobs:
                sim.co[job_id].update(other for other in jobs if other != job_id)
        sim.nsingle = len(sim.singles)
        sim._rerate([job.job_id for job in running], view.slot)
        for job_id in pending:
            st.job(job_id)
        sim.pending = list(pending)
        sim.pdem = [st.demand[job_id] for job_id in pending]
        sim.todo = {}
        return sim

    # --- candidates -------------------------------------------------------------------------------------
    def _candidates(self, sim: _Sim, first_base: _Candidate | None) -> list[_Candidate]:
        """The pilot's candidate starts, most promising first: the base policy's own next start, then each
        head job's first option (alone on idle GPUs if they suffice, else its best share), then every job's
        second option, and so on (so that trimming the list to a budget keeps it diverse)."""
        st = sim.st
        per_job: list[list[_Candidate]] = []
        partners: list[_Partner] | None = None
        sharing = st.capacity >= 2
        for job_id in sim.pending[: self.head]:
            mine: list[_Candidate] = []
            per_job.append(mine)
            demand = st.demand[job_id]
            if demand <= sim.free_count:
                gpus = sim.pick_free(demand)
                assert gpus is not None
                mine.append(_Candidate(job_id, tuple(sorted(gpus)), st.options[job_id][0].steps))
                if demand > 1 or not sharing:
                    continue
            if not sharing:
                continue
            if partners is None:
                partners = sim.partner_list()
            if not partners or sum(len(p[2]) for p in partners) + sim.free_count < demand:
                continue
            options = sim.share_options(job_id, partners)
            if not options:
                continue
            if demand == 1:
                mine.extend(_Candidate(job_id, (option[3][0],), option[4]) for option in options[: self.partners])
            elif demand > sim.free_count:
                for chosen in (options, [o for o in options if o[1]]):
                    placed = sim.gang_from(job_id, demand, chosen) if chosen else None
                    if placed is not None:
                        mine.append(_Candidate(job_id, tuple(sorted(placed[0])), placed[1]))
        out: list[_Candidate] = []
        seen: set[_Candidate] = set()
        for candidate in ([first_base] if first_base is not None else []) + [
            c
            for rank in range(max((len(m) for m in per_job), default=0))
            for m in per_job
            if rank < len(m)
            for c in (m[rank],)
        ]:
            if candidate not in seen:
                seen.add(candidate)
                out.append(candidate)
        return out

    def _first_base_action(self, sim: _Sim, base: str, slot: float | None) -> _Candidate | None:
        """What the base policy would start next (the first of its starts now), or ``None``."""
        probe = sim.copy()
        before = set(probe.run)
        probe.base_step(base, slot, self.scan, self.share_tries)
        new = [j for j in sim.pending if j in probe.run and j not in before]
        if not new:
            return None
        job_id = new[0]
        return _Candidate(job_id, tuple(sorted(probe.run[job_id][0])), probe.steps[job_id])

    def _score(self, sim: _Sim, candidate: _Candidate, slot: float | None, tail: float) -> float:
        best = math.inf
        for base in self.bases:
            trial = sim.copy()
            if candidate.job_id:
                trial.start(candidate.job_id, candidate.gpus, candidate.steps, slot)
                trial.drop(candidate.job_id)
                # The base policy completes the decision at this instant, then continues.
            elif not trial.next_event(slot):  # stop: nothing more now
                continue
            self.rollouts += 1
            value, events = trial.rollout(base, slot, self.max_events, self.scan, tail, self.share_tries)
            self.events += events
            if value < best:
                best = value
        return best

    # --- the policy ---------------------------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Sequence[Action]:
        st, queue = self._bind(view)
        if not len(queue):
            return []
        horizon = self.horizon or max(_MIN_HORIZON, 2 * st.num_gpus)
        pending = [job_id for _, _, job_id in _first(queue, max(horizon, self.head))]
        # Jobs behind the horizon: each GPU-second the modelled jobs hold delays them (1/#GPUs each).
        tail = (len(queue) - len(pending)) / st.num_gpus if self.tail else 0.0
        sim = self._model(view, st, pending)
        slot = view.slot
        if self.foresight:
            sim.arrivals = self._future(view, st, horizon)
        spent_before = self.events
        # The compiled rollouts where available (same scores bit for bit); the Python model otherwise.
        use_fast = self.compiled and lookahead_kernel.ready()
        fast: lookahead_kernel.Decision | None = None
        budget = self.budget if self.budget is not None else max(_MIN_BUDGET, _BUDGET_GPU_EVENTS // st.num_gpus)
        actions: list[Action] = []
        while sim.pending:
            if sim.free_count == 0 and not sim.nsingle:
                break
            base_action = self._first_base_action(sim, self.bases[0], slot)
            candidates = self._candidates(sim, base_action)
            if not candidates:
                break
            can_stop = bool(sim.run) or sim.next_arrival < len(sim.arrivals)
            left = budget - (self.events - spent_before)
            if len(candidates) == 1 and not can_stop:
                choice = candidates[0]
            elif left <= 0:
                choice = base_action if base_action is not None else _STOP
            else:
                # Keep as many candidates (in generation order: the base's action first) as the budget
                # pays for, at the events a rollout has cost so far in this run (max_events at first).
                per = self.events / self.rollouts if self.rollouts else self.max_events
                room = max(1, int(left / (max(per, 1.0) * len(self.bases))) - int(can_stop))
                candidates = candidates[:room]
                if can_stop:
                    candidates.append(_STOP)
                if use_fast:
                    if fast is None:  # the decision's jobs and tables, once (its job set stays the same)
                        fast = lookahead_kernel.Decision(st, sim, slot)
                    scores, rollouts, events = fast.score(
                        sim, candidates, self.bases, self.max_events, self.scan, tail, self.share_tries
                    )
                    self.rollouts += rollouts
                    self.events += events
                    self.compiled_steps += 1
                else:
                    scores = [self._score(sim, c, slot, tail) for c in candidates]
                choice = candidates[_argmin(scores)]
                if choice != base_action:
                    self.deviations += 1
            if not choice.job_id:
                break
            sim.start(choice.job_id, choice.gpus, choice.steps, slot)
            sim.drop(choice.job_id)
            queue.discard(choice.job_id)
            actions.append(Start(choice.job_id, choice.gpus, choice.steps))
        return actions


def _argmin(scores: Sequence[float]) -> int:
    """Index of the smallest score; scores within a relative 1e-9 of it are ties, won by the earliest
    candidate (the base policy's action comes first): float sums in a different order must not flip a
    decision."""
    low = min(scores)
    limit = low + _SCORE_TOL * max(1.0, abs(low)) if math.isfinite(low) else low
    for index, value in enumerate(scores):
        if value <= limit:
            return index
    return 0


def _first(queue: PendingQueue, count: int) -> list[tuple[Any, int, str]]:
    """The first ``count`` jobs of ``queue`` in priority order (a lazy merge of its demand buckets)."""
    merged = heapq.merge(*(bucket for bucket in queue.buckets.values() if bucket))
    out: list[tuple[Any, int, str]] = []
    for item in merged:
        out.append(item)
        if len(out) >= count:
            break
    return out


register_policy(
    "sjf-bsbf-lookahead",
    lambda **options: LookaheadPolicy(**options),
    "SJF-BSBF with rollout look-ahead: each start (alone, share with Algorithm 2's sub-batch, or wait) is "
    "chosen by simulating SJF-BSBF forward from it (pilot method over Castor §5's decisions)",
)
