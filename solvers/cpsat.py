"""The slotted problem directly in CP-SAT (OR-Tools).

Built from a :class:`~formulation.discretize.SlottedProblem`, so it means exactly what the Pyomo model
means: same slots, modes, integer work and speeds, windows and GPU symmetry rule. The formulation, as
math next to this code, is in ``docs/oracle.md``. In short, per job ``i`` (canonical order):

* ``S_i, E_i, D_i``: start, exclusive end and duration in slots with an interval ``[S_i, E_i)``;
  ``x[i,m]``: its mode; ``z[i,g]``: its GPUs (``Σ_g z = G_i``).
* Capacity: per GPU a cumulative of capacity ``C`` over optional intervals present iff ``z[i,g]``,
  plus a redundant global cumulative (demand ``G_i``, capacity ``C·#GPUs``).
* ``sh[i,k]``: the two jobs share a GPU (``z[i,g] ∧ z[k,g] ⇒ sh``; fixed to 1 by pigeonhole when
  ``G_i + G_k > #GPUs``); ``b[i,k]``: ``E_i ≤ S_k``; pairs that may not share (interference ``None``
  or no mode pair fits in memory) satisfy ``sh ⇒ b[i,k] ∨ b[k,i]``; memory: ``sh ∧ overlap ⇒`` a mode
  pair that fits.
* Progress: ``U·D_i − loss_i ≥ Σ_m work[i,m]·x[i,m]``. For a one-GPU job (``C = 2``: one partner at a
  time) the loss is exactly ``Σ_k (U − speed[i][k])·shared_overlap[i,k]`` with the overlap length
  ``max(0, min(E_i,E_k) − max(S_i,S_k))`` counted when ``sh[i,k]``. For a gang (slowest worker) or
  ``C > 2``, a loss per slot ``ℓ[i,t] ≥ (U − speed[i][k])·corun[i,k,t]`` with
  ``corun ⇐ sh ∧ run[i,t] ∧ run[k,t]`` from an order encoding of ``S`` and ``E``.
* Implications go one way only: sharing only ever costs, so a solver never gains from setting a
  sharing literal it does not have to; every solution is re-evaluated with the exact rule anyway.
* Symmetry: GPUs labelled by first use in canonical job order (inside nodes, and nodes among
  themselves); warm starts are canonicalised the same way (:func:`formulation.discretize.canonicalize`).

Anytime: every improving solution and bound is reported through the
:class:`~solvers.backend_protocol.Reporter`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from formulation.discretize import SlotAssignment, SlotSolution, SlottedProblem, evaluate
from solvers.backend_protocol import BackendOutcome, NullReporter, Reporter
from solvers.result import SolveStatus


@dataclass
class _Vars:
    start: list[cp_model.IntVar] = field(default_factory=list)
    end: list[cp_model.IntVar] = field(default_factory=list)
    dur: list[cp_model.IntVar] = field(default_factory=list)
    mode: list[list[Any]] = field(default_factory=list)  # literals, or [1] when a single mode
    gpu: list[list[Any]] = field(default_factory=list)  # z[i][g]: literal or constant 0/1
    share: dict[tuple[int, int], Any] = field(default_factory=dict)
    before: dict[tuple[int, int], Any] = field(default_factory=dict)
    objective: Any = None


CORE_MAX_JOBS = 20
"""Up to this many jobs (with two workers) the full search worker is ``core``; above it as well when
the releases are spread in time (:func:`core_search`)."""


def core_search(problem: SlottedProblem) -> bool:
    """Whether two CP-SAT workers should be the ``core`` search (objective lower-bound search) and the
    LNS thread rather than CP-SAT's default (``default_lp`` and the LNS thread).

    With releases spread in time, a core (a set of jobs that cannot all end at their earliest) is
    local in time, and ``core`` proves what the default search does not. Measured with Poisson
    arrivals on one 8-GPU node at 60 s (``bnp``): 24 jobs 4 of 5 proven (3 of 5 before), 32 jobs 2 of 3
    in 12-13 s (33-34 s before), 50 jobs 1 of 3 (none before). With all jobs released together, above
    :data:`CORE_MAX_JOBS` jobs, the bound comes from the relaxations either way (24 jobs: the same
    bounds), so CP-SAT's default stays there (docs/oracle-measurements.md, "The search with arrivals").
    """
    return problem.num_jobs <= CORE_MAX_JOBS or problem.releases_spread


def _pair_loss(problem: SlottedProblem, i: int, k: int) -> int:
    speed = problem.speed[i][k]
    return problem.units_per_slot - (speed if speed is not None else 0)


class CpsatModel:
    """The CP-SAT model of a slotted problem (see the module docstring)."""

    def __init__(
        self,
        problem: SlottedProblem,
        objective: str = "jct",
        *,
        symmetry_breaking: bool = True,
        overlap_encoding: bool = True,
        mode_dominance: bool = True,
    ) -> None:
        self.problem = problem
        self.objective_kind = objective
        self.model = cp_model.CpModel()
        self.v = _Vars()
        self.symmetry_breaking = symmetry_breaking
        self.overlap_encoding = overlap_encoding
        self._start_le: dict[tuple[int, int], Any] = {}
        self._end_le: dict[tuple[int, int], Any] = {}
        self._overlaps: dict[tuple[int, int], Any] = {}
        self._shared_overlaps: dict[tuple[int, int], Any] = {}
        self.mode_dominance = mode_dominance
        self._build()

    # --- building ---------------------------------------------------------------------------------
    def _build(self) -> None:
        p = self.problem
        m = self.model
        v = self.v
        n = p.num_jobs
        self.timed_jobs = {i for i, job in enumerate(p.jobs) if job.num_gpus > 1 or p.capacity > 2}
        if not self.overlap_encoding:
            self.timed_jobs = set(range(n))
        self.slot_conditions = sum(
            max(0, min(p.jobs[i].latest_end, p.jobs[k].latest_end) - max(p.jobs[i].release, p.jobs[k].release))
            for i, k in p.sharing_pairs
            if i in self.timed_jobs or k in self.timed_jobs
        )
        main_intervals = []
        for i, job in enumerate(p.jobs):
            lo_d = job.min_slots
            hi_d = max(lo_d, min(job.max_slots, job.latest_end - job.release))
            s = m.new_int_var(job.release, max(job.release, job.latest_start), f"S{i}")
            e = m.new_int_var(job.earliest_end, job.latest_end, f"E{i}")
            d = m.new_int_var(lo_d, hi_d, f"D{i}")
            main_intervals.append(m.new_interval_var(s, d, e, f"I{i}"))
            v.start.append(s)
            v.end.append(e)
            v.dur.append(d)
            if len(job.modes) == 1:
                v.mode.append([1])
            else:
                lits = [m.new_bool_var(f"x{i}_{mm}") for mm in range(len(job.modes))]
                m.add_exactly_one(lits)
                m.add(d >= sum(mode.min_slots * lit for mode, lit in zip(job.modes, lits, strict=True)))
                v.mode.append(lits)
            if job.num_gpus == p.num_gpus:
                v.gpu.append([1] * p.num_gpus)
            else:
                z = [m.new_bool_var(f"z{i}_{g}") for g in range(p.num_gpus)]
                m.add(sum(z) == job.num_gpus)
                v.gpu.append(z)
        self._placement()
        # capacity: per GPU and globally (redundant)
        for g in range(p.num_gpus):
            intervals = []
            for i in range(n):
                z = v.gpu[i][g]
                if isinstance(z, int):
                    intervals.append(main_intervals[i])
                else:
                    intervals.append(m.new_optional_interval_var(v.start[i], v.dur[i], v.end[i], z, f"I{i}_{g}"))
            if p.capacity < n:
                m.add_cumulative(intervals, [1] * len(intervals), p.capacity)
        m.add_cumulative(main_intervals, [job.num_gpus for job in p.jobs], p.capacity * p.num_gpus)
        if p.capacity > 2:
            self._memory_cumulative()
        self._pairs()
        if self.mode_dominance and p.capacity == 2:  # pairwise memory argument: C = 2 only
            self._mode_dominance()
        self._progress()
        if self.symmetry_breaking:
            self._symmetry()
        if self.objective_kind == "jct":
            v.objective = sum(v.end)
        else:
            makespan = m.new_int_var(max(job.earliest_end for job in p.jobs), p.horizon, "makespan")
            m.add_max_equality(makespan, v.end)
            v.objective = makespan
        m.minimize(v.objective)

    def _placement(self) -> None:
        """one_node / multi_node modes: the GPU set lies in one node / spans at least two."""
        p, m, v = self.problem, self.model, self.v
        gpn = p.gpus_per_node
        for i, job in enumerate(p.jobs):
            placements = {mode.placement for mode in job.modes}
            if placements == {"any"}:
                continue
            used = []
            for node in range(p.num_nodes):
                u = m.new_bool_var(f"u{i}_{node}")
                zs = [v.gpu[i][g] for g in range(node * gpn, (node + 1) * gpn)]
                for z in zs:
                    m.add_implication(z, u)
                m.add_bool_or(zs).only_enforce_if(u)
                used.append(u)
            one = [lit for lit, mode in zip(v.mode[i], job.modes, strict=True) if mode.placement == "one_node"]
            multi = [lit for lit, mode in zip(v.mode[i], job.modes, strict=True) if mode.placement == "multi_node"]
            if one and multi:
                is_one = m.new_bool_var(f"one{i}")
                m.add(sum(one) == is_one)
                m.add(sum(used) == 1).only_enforce_if(is_one)
                m.add(sum(used) >= 2).only_enforce_if(is_one.Not())
            elif one:
                m.add(sum(used) == 1)
            elif multi:
                m.add(sum(used) >= 2)

    def _memory_cumulative(self) -> None:
        """C > 2: the memory of all jobs on a GPU fits (pairs are covered by :meth:`_pairs`)."""
        p, m, v = self.problem, self.model, self.v
        scale = 1000  # MiB-ish integers; rounded up so the model never over-packs
        cap = math.floor(p.gpu_memory_gib * scale * (1 + 1e-9) + 1e-6)
        # a cumulative demand must be one affine term: one memory variable per multi-mode job
        memory: list[Any] = []
        for i, job in enumerate(p.jobs):
            mems = [math.ceil(mode.memory_gib * scale - 1e-6) for mode in job.modes]
            if len(mems) == 1:
                memory.append(mems[0])
                continue
            var = m.new_int_var(min(mems), max(mems), f"mem{i}")
            m.add(var == sum(mm * lit_m for mm, lit_m in zip(mems, v.mode[i], strict=True)))
            memory.append(var)
        for g in range(p.num_gpus):
            intervals, demands = [], []
            for i in range(p.num_jobs):
                z = v.gpu[i][g]
                lit = z if not isinstance(z, int) else None
                demand = memory[i]
                if lit is None:
                    intervals.append(m.new_interval_var(v.start[i], v.dur[i], v.end[i], f"M{i}_{g}"))
                else:
                    intervals.append(m.new_optional_interval_var(v.start[i], v.dur[i], v.end[i], lit, f"M{i}_{g}"))
                demands.append(demand)
            m.add_cumulative(intervals, demands, cap)

    def _pairs(self) -> None:
        p, m, v = self.problem, self.model, self.v
        for i, k in p.overlapping_pairs:
            shareable = p.can_share(i, k)
            forced = p.must_share_if_overlapping(i, k)
            if forced:
                sh: Any = 1  # pigeonhole: their GPU sets always intersect
            else:
                sh = m.new_bool_var(f"sh{i}_{k}")
                for g in range(p.num_gpus):
                    zi, zk = v.gpu[i][g], v.gpu[k][g]
                    clause = [sh]
                    if not isinstance(zi, int):
                        clause.append(zi.Not())
                    if not isinstance(zk, int):
                        clause.append(zk.Not())
                    m.add_bool_or(clause)
            v.share[(i, k)] = sh
            # b_ik ⇔ E_i ≤ S_k (fully reified, so "overlap" below is exact both ways)
            b_ik = m.new_bool_var(f"b{i}_{k}")
            b_ki = m.new_bool_var(f"b{k}_{i}")
            m.add(v.end[i] <= v.start[k]).only_enforce_if(b_ik)
            m.add(v.end[i] > v.start[k]).only_enforce_if(b_ik.Not())
            m.add(v.end[k] <= v.start[i]).only_enforce_if(b_ki)
            m.add(v.end[k] > v.start[i]).only_enforce_if(b_ki.Not())
            m.add_bool_or([b_ik.Not(), b_ki.Not()])
            v.before[(i, k)], v.before[(k, i)] = b_ik, b_ki
            if not shareable:
                if forced:
                    m.add_bool_or([b_ik, b_ki])
                else:
                    m.add_bool_or([b_ik, b_ki]).only_enforce_if(sh)
                continue
            table = p.memory_table(i, k)
            bad = [(a, b) for a in range(len(table)) for b in range(len(table[a])) if not table[a][b]]
            if bad:
                overlap = self._overlap(i, k)
                for a, b in bad:
                    clause = [overlap.Not()]
                    if not forced:
                        clause.append(sh.Not())
                    for lits, idx in ((v.mode[i], a), (v.mode[k], b)):
                        lit = lits[idx]
                        if not isinstance(lit, int):
                            clause.append(lit.Not())
                    m.add_bool_or(clause)

    def _overlap(self, i: int, k: int) -> Any:
        """Literal ⇔ the two jobs overlap in time (``i < k``)."""
        key = (i, k)
        if key not in self._overlaps:
            m, v = self.model, self.v
            lit = m.new_bool_var(f"ov{i}_{k}")
            m.add_bool_or([v.before[(i, k)], v.before[(k, i)], lit])
            m.add_implication(lit, v.before[(i, k)].Not())
            m.add_implication(lit, v.before[(k, i)].Not())
            self._overlaps[key] = lit
        return self._overlaps[key]

    def _shared_overlap(self, i: int, k: int) -> Any:
        """Literal ⇒ the two jobs share a GPU and overlap in time (used only as a reason)."""
        key = (min(i, k), max(i, k))
        if key not in self._shared_overlaps:
            m = self.model
            lit = m.new_bool_var(f"sov{key[0]}_{key[1]}")
            m.add_implication(lit, self._overlap(*key))
            sh = self.v.share[key]
            if not isinstance(sh, int):
                m.add_implication(lit, sh)
            self._shared_overlaps[key] = lit
        return self._shared_overlaps[key]

    def _mode_dominance(self) -> None:
        """A slower mode (same placement) is chosen only if a partner that shares a GPU with the job and
        overlaps it in time runs in a mode that fits next to it but not next to the next faster mode.
        Otherwise the faster mode is as feasible and never worse (progress is monotone): this cuts
        dominated choices, not optima."""
        p, m, v = self.problem, self.model, self.v
        partners: dict[int, list[int]] = {}
        for i, k in p.sharing_pairs:
            partners.setdefault(i, []).append(k)
            partners.setdefault(k, []).append(i)
        for i, job in enumerate(p.jobs):
            if len(job.modes) == 1:
                continue
            for mm, mode in enumerate(job.modes):
                faster = [
                    f for f in range(mm) if job.modes[f].placement == mode.placement and job.modes[f].work <= mode.work
                ]
                if not faster:
                    continue
                previous = faster[-1]
                reasons = []
                for k in partners.get(i, []):
                    table = p.memory_table(i, k)
                    if any(table[mm][mk] and not table[previous][mk] for mk in range(len(p.jobs[k].modes))):
                        reasons.append(self._shared_overlap(i, k))
                if not reasons:
                    m.add(v.mode[i][mm] == 0)
                else:
                    m.add_bool_or(reasons).only_enforce_if(v.mode[i][mm])

    def _order_literals(self, i: int) -> None:
        """``S_i ≤ t`` and ``E_i ≤ t`` literals over job ``i``'s window, chained."""
        p, m, v = self.problem, self.model, self.v
        job = p.jobs[i]
        prev_s = prev_e = None
        for t in range(job.release, job.latest_end):
            ls = m.new_bool_var(f"sle{i}_{t}")
            m.add(v.start[i] <= t).only_enforce_if(ls)
            m.add(v.start[i] > t).only_enforce_if(ls.Not())
            le = m.new_bool_var(f"ele{i}_{t}")
            m.add(v.end[i] <= t).only_enforce_if(le)
            m.add(v.end[i] > t).only_enforce_if(le.Not())
            if prev_s is not None and prev_e is not None:
                m.add_implication(prev_s, ls)
                m.add_implication(prev_e, le)
            m.add_implication(le, ls)
            self._start_le[(i, t)], self._end_le[(i, t)] = ls, le
            prev_s, prev_e = ls, le

    def _running(self, i: int, t: int) -> list[Any]:
        """Literals whose conjunction says job ``i`` runs in slot ``t`` (``S_i ≤ t < E_i``)."""
        if (i, t) not in self._start_le:
            self._order_literals(i)
        return [self._start_le[(i, t)], self._end_le[(i, t)].Not()]

    def _progress(self) -> None:
        p, m, v = self.problem, self.model, self.v
        units = p.units_per_slot
        loss_terms: list[list[Any]] = [[] for _ in range(p.num_jobs)]
        slot_loss: dict[tuple[int, int], list[tuple[int, list[Any]]]] = {}
        self.stats_corun = 0
        for i, k in p.sharing_pairs:
            loss_ik, loss_ki = _pair_loss(p, i, k), _pair_loss(p, k, i)
            if loss_ik == 0 and loss_ki == 0:
                continue  # free sharing: nothing to count
            sh = v.share[(i, k)]
            untimed = [(a, loss) for a, loss in ((i, loss_ik), (k, loss_ki)) if loss and a not in self.timed_jobs]
            timed = [(a, loss) for a, loss in ((i, loss_ik), (k, loss_ki)) if loss and a in self.timed_jobs]
            if untimed:
                # exact overlap length, counted when they share a GPU (one-GPU side: one partner at a time)
                hi = min(p.jobs[i].max_slots, p.jobs[k].max_slots)
                lo_end = m.new_int_var(0, p.horizon, f"mnE{i}_{k}")
                m.add_min_equality(lo_end, [v.end[i], v.end[k]])
                hi_start = m.new_int_var(0, p.horizon, f"mxS{i}_{k}")
                m.add_max_equality(hi_start, [v.start[i], v.start[k]])
                shared = m.new_int_var(0, hi, f"so{i}_{k}")
                if isinstance(sh, int):
                    m.add(shared >= lo_end - hi_start)
                else:
                    m.add(shared >= lo_end - hi_start).only_enforce_if(sh)
                # either precedence means no overlap; this only helps propagation
                m.add(shared == 0).only_enforce_if(v.before[(i, k)])
                m.add(shared == 0).only_enforce_if(v.before[(k, i)])
                for a, loss in untimed:
                    loss_terms[a].append(loss * shared)
            if not timed:
                continue
            # a gang (or C > 2): per slot, its loss is at least that of every partner running with it
            lo = max(p.jobs[i].release, p.jobs[k].release)
            hi_t = min(p.jobs[i].latest_end, p.jobs[k].latest_end)
            for t in range(lo, hi_t):
                condition = self._running(i, t) + self._running(k, t)
                if not isinstance(sh, int):
                    condition.append(sh)
                self.stats_corun += 1
                for a, loss in timed:
                    slot_loss.setdefault((a, t), []).append((loss, condition))
        for (i, t), entries in slot_loss.items():
            ell = m.new_int_var(0, max(loss for loss, _ in entries), f"l{i}_{t}")
            for loss, condition in entries:
                m.add(ell >= loss).only_enforce_if(condition)
            loss_terms[i].append(ell)
        for i, job in enumerate(p.jobs):
            work = (
                job.modes[0].work
                if len(job.modes) == 1
                else sum(mode.work * lit for mode, lit in zip(job.modes, v.mode[i], strict=True))
            )
            m.add(units * v.dur[i] - sum(loss_terms[i]) >= work)
            if len(job.modes) > 1:
                m.add(v.dur[i] <= sum(mode.max_slots * lit for mode, lit in zip(job.modes, v.mode[i], strict=True)))

    def _symmetry(self) -> None:
        """First-use labelling of GPUs (inside nodes) and of nodes, in canonical job order."""
        p, m, v = self.problem, self.model, self.v
        gpn = p.gpus_per_node
        prev: list[Any] | None = None
        for i in range(p.num_jobs):
            used: list[Any] = []
            for g in range(p.num_gpus):
                z = v.gpu[i][g]
                if isinstance(z, int) and z == 1:
                    used.append(1)
                    continue
                if prev is None:
                    used.append(z)
                    continue
                before = prev[g]
                if isinstance(before, int) and before == 1:
                    used.append(1)
                    continue
                u = m.new_bool_var(f"used{i}_{g}")
                m.add_implication(z, u)
                m.add_implication(before, u)
                m.add_bool_or([z, before, u.Not()])
                used.append(u)
            for g in range(p.num_gpus):
                if isinstance(used[g], int):
                    continue
                if g % gpn:
                    left = used[g - 1]
                    if not isinstance(left, int):
                        m.add_implication(used[g], left)
                elif g >= gpn:
                    left = used[g - gpn]
                    if not isinstance(left, int):
                        m.add_implication(used[g], left)
                    else:
                        pass
            prev = used

    # --- solution I/O -----------------------------------------------------------------------------
    def add_hint(self, solution: SlotSolution) -> None:
        """Hint the solver with a (canonical) slot-level solution."""
        p, m, v = self.problem, self.model, self.v
        ends = evaluate(p, solution, exact=True)
        for i, job in enumerate(p.jobs):
            a = solution[job.id]
            m.add_hint(v.start[i], a.start)
            m.add_hint(v.end[i], ends[job.id])
            m.add_hint(v.dur[i], ends[job.id] - a.start)
            for mm, lit in enumerate(v.mode[i]):
                if not isinstance(lit, int):
                    m.add_hint(lit, mm == a.mode)
            for g, z in enumerate(v.gpu[i]):
                if not isinstance(z, int):
                    m.add_hint(z, g in a.gpus)

    def complete_hint(self, time_limit: float) -> bool:
        """Turn the (partial) hint into a full assignment of every variable, by solving with the hinted
        variables fixed (one worker, no LP: about a second at 16-24 jobs). CP-SAT then starts from a
        complete feasible solution instead of having to repair the hint. Returns False if it failed."""
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.fix_variables_to_their_hinted_value = True
        params.num_workers = 1
        params.linearization_level = 0  # propagation alone fixes everything: no LP
        params.stop_after_first_solution = True
        params.max_presolve_iterations = 1
        params.max_time_in_seconds = time_limit
        status = solver.solve(self.model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return False
        values = list(solver.response_proto.solution)
        self.model.clear_hints()
        for index, value in enumerate(values):
            self.model.add_hint(self.model.get_int_var_from_proto_index(index), value)
        return True

    def extract(self, values: Any) -> SlotSolution:
        """Slot-level solution from a solver or solution callback (``values.Value``)."""
        p, v = self.problem, self.v
        solution: SlotSolution = {}
        for i, job in enumerate(p.jobs):
            mode = 0
            for mm, lit in enumerate(v.mode[i]):
                if isinstance(lit, int) or values.BooleanValue(lit):
                    mode = mm
                    break
            gpus = tuple(
                g for g, z in enumerate(v.gpu[i]) if (z == 1 if isinstance(z, int) else values.BooleanValue(z))
            )
            solution[job.id] = SlotAssignment(int(values.Value(v.start[i])), gpus, mode, int(values.Value(v.end[i])))
        return solution

    def restrict(self, windows: list[Any] | None = None, cutoff: int | None = None) -> None:
        """Restrict the model to a branch-and-price node: ``windows[i] = (s_lo, s_hi, e_lo, e_hi)`` bounds
        job ``i``'s start and exclusive end (``None``: not bounded on that side), and ``cutoff`` asks for
        an objective of at most that value (nothing better than the incumbent: the node is then
        infeasible and pruned)."""
        m, v = self.model, self.v
        if windows is not None:
            if len(windows) != self.problem.num_jobs:
                raise ValueError(f"windows: {len(windows)} entries for {self.problem.num_jobs} jobs")
            for i, window in enumerate(windows):
                s_lo, s_hi, e_lo, e_hi = window
                if s_lo is not None:
                    m.add(v.start[i] >= int(s_lo))
                if s_hi is not None:
                    m.add(v.start[i] <= int(s_hi))
                if e_lo is not None:
                    m.add(v.end[i] >= int(e_lo))
                if e_hi is not None:
                    m.add(v.end[i] <= int(e_hi))
        if cutoff is not None:
            m.add(v.objective <= int(cutoff))

    def stats(self) -> dict[str, Any]:
        proto = self.model.proto
        return {
            "variables": len(proto.variables),
            "constraints": len(proto.constraints),
            "corun_literals": self.stats_corun,
            "order_encoded_jobs": len({i for i, _ in self._start_le}),
            "slot_conditions": self.slot_conditions,
        }


class _Callback(cp_model.CpSolverSolutionCallback):
    def __init__(self, model: CpsatModel, report: Reporter) -> None:
        super().__init__()
        self.model = model
        self.report = report
        self.best: SlotSolution | None = None
        self.best_value = math.inf
        self.count = 0

    def on_solution_callback(self) -> None:
        value = self.ObjectiveValue()
        if value < self.best_value:
            self.best_value = value
            self.best = self.model.extract(self)
            self.count += 1
            self.report.incumbent(self.best, value, self.BestObjectiveBound())


def solve_cpsat(
    problem: SlottedProblem,
    solver_name: str = "cpsat",
    time_limit: float = 60.0,
    objective: str = "jct",
    warm_start: SlotSolution | None = None,
    report: Reporter | None = None,
    **options: Any,
) -> BackendOutcome:
    """Solve the slotted problem with CP-SAT (backend protocol, see ``solvers.backend_protocol``).

    Options
    -------
    num_workers : int
        Search workers (default 2).
    symmetry_breaking : bool
        First-use GPU labelling (default on).
    overlap_encoding : bool
        Overlap lengths for one-GPU jobs instead of per-slot literals (default on).
    log : bool
        CP-SAT search log on stderr.
    seed : int
        ``random_seed`` (default 0).
    parameters : dict
        Extra ``CpSolverParameters`` fields by name.
    windows : list of (s_lo, s_hi, e_lo, e_hi)
        Per job (canonical order), bounds on its start and exclusive end slot, ``None`` for unbounded
        (a branch-and-price node, :meth:`CpsatModel.restrict`).
    cutoff : int
        Accept only objectives of at most this value (slots); ``INFEASIBLE`` then means none exists.
    """
    report = report or NullReporter()
    began = time.perf_counter()
    model = CpsatModel(
        problem,
        objective,
        symmetry_breaking=bool(options.get("symmetry_breaking", True)),
        overlap_encoding=bool(options.get("overlap_encoding", True)),
        mode_dominance=bool(options.get("mode_dominance", True)),
    )
    if options.get("windows") is not None or options.get("cutoff") is not None:
        model.restrict(options.get("windows"), options.get("cutoff"))
    hint_note = "none"
    if warm_start is not None:
        model.add_hint(warm_start)
        hint_note = "partial"
        if options.get("complete_hint", True) and model.complete_hint(max(0.1, min(5.0, 0.1 * time_limit))):
            hint_note = "complete"
    build_seconds = time.perf_counter() - began
    stats = model.stats()
    num_workers = int(options.get("num_workers", options.get("threads", 2)))
    extra = dict(options.get("parameters", {}))
    search = "given" if "subsolvers" in extra else "default"
    if search == "default" and num_workers == 2 and core_search(problem):
        # two workers are one full search and one thread of LNS; the first of these is the full one
        extra["subsolvers"] = ["core", "default_lp"]
        search = "core"
    # in the build's report too: that one reaches the caller even when the worker is stopped at the limit
    stats["search"] = search
    report.built(build_seconds, stats)

    solver = cp_model.CpSolver()
    params = solver.parameters
    params.max_time_in_seconds = max(0.05, time_limit - build_seconds)
    params.num_workers = num_workers
    params.random_seed = int(options.get("seed", 0))
    params.log_search_progress = bool(options.get("log", False))
    # presolve probing can take a third of a short budget on these models (measured); keep it bounded
    params.max_presolve_iterations = int(options.get("max_presolve_iterations", 2))
    params.presolve_probing_deterministic_time_limit = float(options.get("probing_dtime", 0.2))
    for name, value in extra.items():
        if isinstance(value, list):
            getattr(params, name).extend(value)
        else:
            setattr(params, name, value)
    best_bound = [-math.inf]

    def on_bound(bound: float) -> None:
        if bound > best_bound[0]:
            best_bound[0] = bound
            report.bound(bound)

    solver.best_bound_callback = on_bound
    callback = _Callback(model, report)
    solve_began = time.perf_counter()
    status = solver.solve(model.model, callback)
    solve_seconds = time.perf_counter() - solve_began

    solution = callback.best
    value = callback.best_value
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        final = model.extract(solver)
        final_value = solver.objective_value
        if final_value <= value:
            solution, value = final, final_value
    bound = solver.best_objective_bound if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else best_bound[0]
    if status == cp_model.OPTIMAL:
        result_status = SolveStatus.OPTIMAL
        bound = value
    elif status == cp_model.FEASIBLE:
        result_status = SolveStatus.TIME_LIMIT
    elif status == cp_model.INFEASIBLE:
        result_status = SolveStatus.INFEASIBLE
    elif status == cp_model.MODEL_INVALID:
        result_status = SolveStatus.ERROR
    else:
        result_status = SolveStatus.UNKNOWN if solution is None else SolveStatus.TIME_LIMIT
    stats.update(
        {
            "cpsat_status": solver.status_name(status),
            "branches": solver.num_branches,
            "conflicts": solver.num_conflicts,
            "solutions_reported": callback.count,
            "num_workers": params.num_workers,
            "hint": hint_note,
        }
    )
    return BackendOutcome(
        status=result_status,
        solution=solution,
        objective=value if solution is not None else math.nan,
        bound=bound if math.isfinite(bound) else math.nan,
        build_seconds=build_seconds,
        solve_seconds=solve_seconds,
        message=solver.status_name(status),
        stats=stats,
    )
