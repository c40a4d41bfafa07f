"""The time-slotted integer program of SPEC.md as a Pyomo model (solved by HiGHS or any MIP solver).

Built from a :class:`~formulation.discretize.SlottedProblem`, so it means exactly what the CP-SAT model
means: the same slots, modes, integer work and speeds, and windows. The formulation as math, next to
the function that builds each part, is in ``docs/pyomo-model.md``. In short, for job ``i`` (canonical
order) with release ``r_i``, latest (exclusive) end ``L_i`` and fewest slots alone ``d_i``:

* **time** (order encoding, :func:`add_time_variables`, :func:`add_time_constraints`):
  ``st[i,t] = [S_i ≤ t]`` and ``fin[i,t] = [E_i ≤ t+1]``, non-decreasing in ``t``; the job *runs*
  in slot ``t`` iff ``run(i,t) = st[i,t] − fin[i,t−1] = 1``. Time-indexed, no big-M:
  ``fin[i,t] ≤ st[i, t−d+1]`` (in a mode of ``d`` slots alone it cannot end earlier). ``mu[i,m]``: the
  mode (accumulation steps × placement).
* **GPUs** (:func:`add_gpu_constraints`): ``z[i,g]``, ``Σ_g z = G_i`` (gang, Eq. 6), one GPU set for the
  whole run (Eq. 8-9: ``z`` has no time index), the mode's node placement, symmetry breaking
  (GPUs and nodes numbered by first use in canonical job order).
* **pairs** (:func:`add_pair_constraints`): ``q[i,k] ≥ z[i,g] + z[k,g] − 1`` (the pair shares a GPU: a
  static fact); ``s[i,k,t] ≥ q + run(i,t) + run(k,t) − 2`` (they share in slot ``t``); pairs that may
  not share get ``q + run(i,t) + run(k,t) ≤ 2``; memory of mode pairs.
* **capacity** (:func:`add_capacity_constraints`, Eq. 7): ``Σ_i y[i,g,t] ≤ C`` with
  ``y ≥ z + run − 1`` for multi-GPU jobs; a one-GPU job's GPU through its partner row
  ``Σ_k s[i,k,t] ≤ run(i,t)`` (:func:`add_sharing_cuts`).
* **progress** (:func:`add_progress_constraints`, Eq. 11): ``U·(d_i + ext_i) − Σ_t loss(i,t) ≥
  Σ_m work[i,m]·mu[i,m]`` with ``ext_i = E_i − S_i − d_i`` and the loss of a slot
  ``≥ (U − speed[i][k])·s[i,k,t]`` for every partner (the gang's slowest worker decides); for a
  one-GPU job (``C = 2``: one partner at a time) the exact sum over partners.
* **sharing cuts** (:func:`add_sharing_cuts`): pigeonhole ``Σ_i G_i run(i,t) − Σ h[i,k,t] ≤ #GPUs``
  with ``h ≤ min(G_i,G_k)·s`` the GPUs a pair shares, and ``Σ_k h[i,k,t] ≤ (C−1)·G_i·run(i,t)``: the LP
  relaxation pays for the sharing an overloaded cluster forces (NOTES-oracle pitfall 6).
* **objective** (:func:`add_objective`): ``Σ_i E_i`` in slot units (seconds: ``Δ·ΣE − Σa``) or
  ``max_i E_i``.

Implications go one way only: sharing only ever costs, so an optimum never sets a sharing variable it
does not have to. A model solution's true end slots (:func:`formulation.discretize.evaluate`,
``exact=True``) are never later than the model's, and they are equal at a JCT optimum.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyomo.environ as pyo

from formulation.discretize import SlotAssignment, SlotSolution, SlottedProblem, evaluate
from formulation.errors import DuettoInputError

Expr = Any  # a Pyomo expression, a variable or a number
Terms = list[tuple[float, Any]]  # (coefficient, variable) pairs


@dataclass(frozen=True)
class ModelOptions:
    """Switches of the formulation. The defaults are what measured best (``docs/pyomo-model.md``);
    the others exist for studies.

    Attributes
    ----------
    symmetry_breaking
        GPUs inside a node, and nodes, numbered by first use in canonical job order (jobs that hold
        every GPU are skipped: they name no GPU).
    pigeonhole
        The per-slot pigeonhole rows and per-job partner bounds (:func:`add_sharing_cuts`).
    static_sharing
        ``s[i,k,t] ≤ q[i,k]``: a pair that shares in one slot shares in every slot both run.
    aggregated_capacity
        ``Σ_i G_i run(i,t) ≤ C·#GPUs`` (redundant with the per-GPU rows, helps the LP).
    one_gpu_capacity_by_partners
        ``C = 2``: the capacity of a one-GPU job's GPU through its partner row instead of per-GPU rows.
    duration_bounds
        ``fin[i,t] ≥ st[i,t−D+1]`` for the slowest duration ``D`` (else only ``ext_i ≤ D − d_i``).
    extra_slot_cuts
        A slot next to a partner that costs more than the job's slack forces an extra slot.
    """

    symmetry_breaking: bool = True
    pigeonhole: bool = True
    static_sharing: bool = True
    aggregated_capacity: bool = True
    one_gpu_capacity_by_partners: bool = True
    duration_bounds: bool = False
    extra_slot_cuts: bool = False


@dataclass
class ModelIndex:
    """Bookkeeping of a built model: which variables exist and how to read a solution back."""

    problem: SlottedProblem
    objective: str
    options: ModelOptions
    start_vars: dict[int, range] = field(default_factory=dict)  # i -> slots t with a st[i,t] variable
    fin_vars: dict[int, range] = field(default_factory=dict)  # i -> slots t with a fin[i,t] variable
    run_slots: dict[int, range] = field(default_factory=dict)  # i -> slots t where it may run
    multi_mode: set[int] = field(default_factory=set)
    free_gpus: set[int] = field(default_factory=set)  # jobs with z variables (G_i < #GPUs)
    placed: set[int] = field(default_factory=set)  # jobs with node-usage variables u[i, node]
    share_pairs: list[tuple[int, int]] = field(default_factory=list)
    conflict_pairs: list[tuple[int, int]] = field(default_factory=list)
    disjoint_pairs: list[tuple[int, int]] = field(default_factory=list)
    pair_slots: dict[tuple[int, int], range] = field(default_factory=dict)
    memory_pairs: list[tuple[int, int]] = field(default_factory=list)
    h_keys: set[tuple[int, int, int]] = field(default_factory=set)
    loss_keys: set[tuple[int, int]] = field(default_factory=set)
    stats: dict[str, Any] = field(default_factory=dict)


# --- small helpers ---------------------------------------------------------------------------------


def _index(model: pyo.ConcreteModel) -> ModelIndex:
    index = getattr(model, "_duetto_index", None)
    if not isinstance(index, ModelIndex):
        raise DuettoInputError("not a model built by formulation.pyomo_model.build_pyomo_model")
    return index


def _lin(terms: Iterable[tuple[float, Any]], constant: float = 0.0) -> Expr:
    """``constant + Σ coef·var`` (operator sums are Pyomo's fastest way to build linear rows)."""
    expr: Expr = constant
    for coef, var in terms:
        if coef == 1:
            expr = expr + var
        elif coef == -1:
            expr = expr - var
        elif coef:
            expr = expr + coef * var
    return expr


def _scale(terms: Terms, factor: float) -> Terms:
    return [(c * factor, v) for c, v in terms]


def _install(model: pyo.ConcreteModel, name: str, rows: list[Any]) -> None:
    """One indexed constraint ``name[0..len(rows)-1]`` from prepared relational expressions."""

    def rule(_: Any, r: int) -> Any:
        return rows[r]

    setattr(model, name, pyo.Constraint(range(len(rows)), rule=rule))


class _Time:
    """Order-encoded time: ``st`` / ``fin`` as variables, or constants outside a job's window."""

    def __init__(self, model: pyo.ConcreteModel, index: ModelIndex) -> None:
        self.m = model
        self.ix = index
        self.p = index.problem

    def started(self, i: int, t: int) -> tuple[float, Terms]:
        """``[S_i ≤ t]`` as (constant, terms)."""
        if t < self.p.jobs[i].release:
            return 0.0, []
        slots = self.ix.start_vars[i]
        if len(slots) == 0 or t > slots[-1]:
            return 1.0, []
        return 0.0, [(1.0, self.m.st[i, t])]

    def finished(self, i: int, t: int) -> tuple[float, Terms]:
        """``[E_i ≤ t + 1]`` (completed by the end of slot ``t``) as (constant, terms)."""
        job = self.p.jobs[i]
        if t < job.release + job.min_slots - 1:
            return 0.0, []
        slots = self.ix.fin_vars[i]
        if len(slots) == 0 or t > slots[-1]:
            return 1.0, []
        return 0.0, [(1.0, self.m.fin[i, t])]

    def run(self, i: int, t: int) -> tuple[float, Terms]:
        """``run(i,t) = st[i,t] − fin[i,t−1]`` as (constant, terms)."""
        c1, t1 = self.started(i, t)
        c2, t2 = self.finished(i, t - 1)
        return c1 - c2, t1 + [(-c, v) for c, v in t2]

    def run_expr(self, i: int, t: int) -> Expr:
        const, terms = self.run(i, t)
        return _lin(terms, const)

    def mode_terms(self, i: int, weights: Sequence[float]) -> tuple[float, Terms]:
        """``Σ_m weights[m]·mu[i,m]`` as (constant, terms)."""
        if i not in self.ix.multi_mode:
            return float(weights[0]), []
        return 0.0, [(float(weights[m]), self.m.mu[i, m]) for m in range(len(self.p.jobs[i].modes))]

    def end_terms(self, i: int) -> tuple[float, Terms]:
        """``E_i = L_i − Σ_t fin[i,t]``."""
        return float(self.p.jobs[i].latest_end), [(-1.0, self.m.fin[i, t]) for t in self.ix.fin_vars[i]]

    def z_terms(self, i: int, g: int) -> tuple[float, Terms]:
        """``z[i,g]`` (constant 1 for a job on every GPU)."""
        if i in self.ix.free_gpus:
            return 0.0, [(1.0, self.m.z[i, g])]
        return 1.0, []


def _alive(index: ModelIndex) -> dict[int, list[int]]:
    alive: dict[int, list[int]] = defaultdict(list)
    for i, slots in index.run_slots.items():
        for t in slots:
            alive[t].append(i)
    return alive


def _pair_loss(problem: SlottedProblem, i: int, k: int) -> int:
    speed = problem.speed[i][k]
    return problem.units_per_slot - (speed if speed is not None else 0)


def _slot_partners(index: ModelIndex) -> dict[tuple[int, int], list[tuple[int, int, int]]]:
    """``(job, slot) → [(i, k, partner)]`` over sharing pairs that may both run in the slot."""
    partners: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
    for i, k in index.share_pairs:
        for t in index.pair_slots[(i, k)]:
            partners[(i, t)].append((i, k, k))
            partners[(k, t)].append((i, k, i))
    return partners


# --- building blocks -------------------------------------------------------------------------------


def add_time_variables(model: pyo.ConcreteModel, index: ModelIndex) -> None:
    """Order-encoded start and end of every job, its mode and its extra slots.

    ``st[i,t]`` for ``t ∈ [r_i, L_i − d_i − 1]`` (later: started by force), ``fin[i,t]`` for
    ``t ∈ [r_i + d_i − 1, L_i − 2]`` (earlier: not finished; ``L_i − 1``: finished by force),
    ``mu[i,m]`` for jobs with several modes, and the integer ``ext[i] = E_i − S_i − d_i ∈ [0, D_i − d_i]``
    (``D_i`` = slots next to its slowest partner throughout).
    """
    p = index.problem
    st_keys, fin_keys, mu_keys = [], [], []
    for i, job in enumerate(p.jobs):
        d = job.min_slots
        starts = range(job.release, max(job.release, job.latest_end - d))
        finishes = range(job.release + d - 1, max(job.release + d - 1, job.latest_end - 1))
        index.start_vars[i] = starts
        index.fin_vars[i] = finishes
        index.run_slots[i] = range(job.release, job.latest_end)
        st_keys += [(i, t) for t in starts]
        fin_keys += [(i, t) for t in finishes]
        if len(job.modes) > 1:
            index.multi_mode.add(i)
            mu_keys += [(i, m) for m in range(len(job.modes))]
    model.st = pyo.Var(st_keys, domain=pyo.Binary)
    model.fin = pyo.Var(fin_keys, domain=pyo.Binary)
    model.mu = pyo.Var(mu_keys, domain=pyo.Binary)

    def ext_bounds(_: Any, i: int) -> tuple[int, int]:
        job = p.jobs[i]
        return 0, max(0, min(job.max_slots, job.latest_end - job.release) - job.min_slots)

    model.ext = pyo.Var(range(p.num_jobs), domain=pyo.NonNegativeIntegers, bounds=ext_bounds)


def add_time_constraints(model: pyo.ConcreteModel, index: ModelIndex) -> None:
    """Monotone order encoding, one mode per job, the chosen mode's duration, and ``ext``.

    * ``st[i,t] ≤ st[i,t+1]``, ``fin[i,t] ≤ fin[i,t+1]``, ``Σ_m mu[i,m] = 1``;
    * for every distinct alone duration ``d`` among the modes:
      ``fin[i,t] ≤ st[i,t−d+1] + Σ_{m: d_m < d} mu[i,m]`` (cannot finish before ``d`` slots);
    * ``ext[i] = Σ_t run(i,t) − d_i``;
    * (``duration_bounds``) for every distinct worst duration ``D``:
      ``fin[i,t] ≥ st[i,t−D+1] − Σ_{m: D_m > D} mu[i,m]``.
    """
    p = index.problem
    tm = _Time(model, index)
    order: list[Any] = []
    durations: list[Any] = []
    modes: list[Any] = []
    ext_rows: list[Any] = []
    for i, job in enumerate(p.jobs):
        starts, finishes = index.start_vars[i], index.fin_vars[i]
        for t in starts[:-1]:
            order.append(model.st[i, t] <= model.st[i, t + 1])
        for t in finishes[:-1]:
            order.append(model.fin[i, t] <= model.fin[i, t + 1])
        if i in index.multi_mode:
            modes.append(sum(model.mu[i, m] for m in range(len(job.modes))) == 1)
        for d in sorted({mode.min_slots for mode in job.modes}):
            shorter = [m for m, mode in enumerate(job.modes) if mode.min_slots < d]
            for t in finishes:
                const, terms = tm.started(i, t - d + 1)
                if const >= 1:
                    continue
                terms = terms + [(1.0, model.mu[i, m]) for m in shorter]
                durations.append(model.fin[i, t] <= _lin(terms, const))
        if index.options.duration_bounds:
            for big in sorted({mode.max_slots for mode in job.modes}):
                longer = [m for m, mode in enumerate(job.modes) if mode.max_slots > big]
                for t in finishes:
                    const, terms = tm.started(i, t - big + 1)
                    if not terms and const <= 0:
                        continue
                    terms = terms + [(-1.0, model.mu[i, m]) for m in longer]
                    durations.append(model.fin[i, t] >= _lin(terms, const))
        # S = L − d − Σ_t st[i,t] and E = L − Σ_t fin[i,t] over the variables' ranges, so
        # ext = E − S − d = Σ_t st[i,t] − Σ_t fin[i,t]
        terms = [(1.0, model.st[i, t]) for t in starts] + [(-1.0, model.fin[i, t]) for t in finishes]
        const = 0.0
        ext_rows.append(model.ext[i] == _lin(terms, const))
    _install(model, "time_order", order)
    _install(model, "one_mode", modes)
    _install(model, "duration", durations)
    _install(model, "ext_link", ext_rows)


def add_gpu_constraints(model: pyo.ConcreteModel, index: ModelIndex) -> None:
    """GPU sets: gang size (Eq. 6), node placement of the mode, symmetry breaking.

    * ``Σ_g z[i,g] = G_i`` (a job that takes every GPU has no ``z``);
    * placement: ``u[i,n] ≥ z[i,g]`` for ``g`` in node ``n``, ``u[i,n] ≤ Σ_{g∈n} z[i,g]``,
      ``1 + multi_i ≤ Σ_n u[i,n] ≤ 1 + (#nodes − 1)·multi_i`` with ``multi_i = Σ_{m multi_node} mu[i,m]``
      (modes ``one_node`` / ``multi_node``; ``any`` is unconstrained);
    * symmetry: ``z[i,g] ≤ Σ_{i' ≤ i} z[i',g−1]`` inside a node and ``z[i,first(n)] ≤
      Σ_{i' ≤ i} z[i',first(n−1)]`` across nodes, over jobs that do not hold every GPU.
    """
    p = index.problem
    num_gpus, gpn = p.num_gpus, p.gpus_per_node
    index.free_gpus = {i for i, job in enumerate(p.jobs) if job.num_gpus < num_gpus}
    free = sorted(index.free_gpus)
    model.z = pyo.Var([(i, g) for i in free for g in range(num_gpus)], domain=pyo.Binary)
    _install(model, "gang", [sum(model.z[i, g] for g in range(num_gpus)) == p.jobs[i].num_gpus for i in free])
    placed = [i for i in free if {mode.placement for mode in p.jobs[i].modes} != {"any"}]
    index.placed = set(placed)
    model.u = pyo.Var([(i, n) for i in placed for n in range(p.num_nodes)], domain=pyo.Binary)
    tm = _Time(model, index)
    rows: list[Any] = []
    for i in placed:
        job = p.jobs[i]
        for n in range(p.num_nodes):
            gpus = range(n * gpn, (n + 1) * gpn)
            rows += [model.z[i, g] <= model.u[i, n] for g in gpus]
            rows.append(model.u[i, n] <= sum(model.z[i, g] for g in gpus))
        const, terms = tm.mode_terms(i, [1.0 if mode.placement == "multi_node" else 0.0 for mode in job.modes])
        used = sum(model.u[i, n] for n in range(p.num_nodes))
        rows.append(used >= _lin(terms, 1.0 + const))
        rows.append(used <= _lin(_scale(terms, p.num_nodes - 1), 1.0 + (p.num_nodes - 1) * const))
    _install(model, "placement", rows)
    symmetry: list[Any] = []
    if index.options.symmetry_breaking:
        for position, i in enumerate(free):
            earlier = free[: position + 1]
            for g in range(1, num_gpus):
                prev = g - 1 if g % gpn else g - gpn
                symmetry.append(model.z[i, g] <= sum(model.z[k, prev] for k in earlier))
    _install(model, "symmetry", symmetry)


def add_pair_constraints(model: pyo.ConcreteModel, index: ModelIndex) -> None:
    """Which pairs share a GPU, and when.

    For every pair whose windows overlap (``problem.overlapping_pairs``):

    * ``G_i + G_k > C·#GPUs``, or they may not share and ``G_i + G_k > #GPUs``: never at the same
      time, ``run(i,t) + run(k,t) ≤ 1``;
    * they may not share (interference ``None`` or no mode pair fits in memory):
      ``q ≥ z[i,g] + z[k,g] − 1``, ``q + run(i,t) + run(k,t) ≤ 2``;
    * they may share: ``s[i,k,t] ≥ q + run(i,t) + run(k,t) − 2`` with ``q ≥ z[i,g] + z[k,g] − 1``, or
      ``s ≥ run(i,t) + run(k,t) − 1`` when ``G_i + G_k > #GPUs`` (pigeonhole: they always share);
      ``s ≤ q`` (``static_sharing``); memory: ``o[i,k] ≥ s[i,k,t]`` and for each mode ``a`` of ``i``
      ``mu[i,a] + Σ_{b: a, b do not fit} mu[k,b] + o[i,k] ≤ 2`` (and from ``k``'s side).

    ``s`` is continuous: at integer ``z``, ``st``, ``fin`` its lower bound is 0 or 1 and nothing gains
    from raising it.
    """
    p = index.problem
    tm = _Time(model, index)
    num_gpus, cap = p.num_gpus, p.capacity
    for i, k in p.overlapping_pairs:
        lo = max(p.jobs[i].release, p.jobs[k].release)
        hi = min(p.jobs[i].latest_end, p.jobs[k].latest_end)
        index.pair_slots[(i, k)] = range(lo, hi)
        demand = p.jobs[i].num_gpus + p.jobs[k].num_gpus
        shareable = p.can_share(i, k)
        if demand > cap * num_gpus or (not shareable and demand > num_gpus):
            index.disjoint_pairs.append((i, k))
        elif not shareable:
            index.conflict_pairs.append((i, k))
        else:
            index.share_pairs.append((i, k))

    def both(i: int, k: int, t: int) -> tuple[float, Terms]:
        c1, t1 = tm.run(i, t)
        c2, t2 = tm.run(k, t)
        return c1 + c2, t1 + t2

    never: list[Any] = []
    for i, k in index.disjoint_pairs:
        for t in index.pair_slots[(i, k)]:
            const, terms = both(i, k, t)
            if terms:
                never.append(_lin(terms, const) <= 1)
    _install(model, "never_together", never)

    forced = {(i, k) for i, k in index.share_pairs if p.must_share_if_overlapping(i, k)}
    q_pairs = [pair for pair in index.conflict_pairs + index.share_pairs if pair not in forced]
    model.q = pyo.Var(q_pairs, bounds=(0, 1))
    q_rows: list[Any] = []
    for i, k in q_pairs:
        if i not in index.free_gpus or k not in index.free_gpus:
            model.q[i, k].fix(1.0)  # one of them holds every GPU
            continue
        for g in range(num_gpus):
            c1, t1 = tm.z_terms(i, g)
            c2, t2 = tm.z_terms(k, g)
            q_rows.append(model.q[i, k] >= _lin(t1 + t2, c1 + c2 - 1.0))
    _install(model, "q_link", q_rows)

    apart: list[Any] = []
    for i, k in index.conflict_pairs:
        for t in index.pair_slots[(i, k)]:
            const, terms = both(i, k, t)
            if terms:
                apart.append(_lin([(1.0, model.q[i, k]), *terms], const) <= 2)
    _install(model, "no_sharing", apart)

    s_keys = [(i, k, t) for i, k in index.share_pairs for t in index.pair_slots[(i, k)]]
    model.s = pyo.Var(s_keys, bounds=(0, 1))
    s_rows: list[Any] = []
    static: list[Any] = []
    for i, k, t in s_keys:
        s = model.s[i, k, t]
        const, terms = both(i, k, t)
        if (i, k) in forced:
            s_rows.append(s >= _lin(terms, const - 1.0))
            continue
        s_rows.append(s >= _lin([(1.0, model.q[i, k]), *terms], const - 2.0))
        if index.options.static_sharing and not model.q[i, k].fixed:
            static.append(s <= model.q[i, k])
    _install(model, "s_link", s_rows)
    _install(model, "static_sharing", static)

    memory_pairs = [(i, k) for i, k in index.share_pairs if not all(all(row) for row in p.memory_table(i, k))]
    index.memory_pairs = memory_pairs
    model.o = pyo.Var(memory_pairs, bounds=(0, 1))
    memory: list[Any] = []
    for i, k in memory_pairs:
        memory += [model.o[i, k] >= model.s[i, k, t] for t in index.pair_slots[(i, k)]]
        table = p.memory_table(i, k)
        for a in range(len(table)):
            bad = [b for b in range(len(table[a])) if not table[a][b]]
            if bad:
                ca, ta = tm.mode_terms(i, [1.0 if m == a else 0.0 for m in range(len(table))])
                cb, tb = tm.mode_terms(k, [1.0 if m in bad else 0.0 for m in range(len(table[a]))])
                memory.append(_lin([*ta, *tb, (1.0, model.o[i, k])], ca + cb) <= 2)
        if len(table) > 1:
            for b in range(len(table[0])):
                bad = [a for a in range(len(table)) if not table[a][b]]
                if bad:
                    ca, ta = tm.mode_terms(i, [1.0 if m in bad else 0.0 for m in range(len(table))])
                    cb, tb = tm.mode_terms(k, [1.0 if m == b else 0.0 for m in range(len(table[0]))])
                    memory.append(_lin([*ta, *tb, (1.0, model.o[i, k])], ca + cb) <= 2)
    _install(model, "memory", memory)


def add_capacity_constraints(model: pyo.ConcreteModel, index: ModelIndex) -> None:
    """At most ``C`` jobs per GPU per slot (Eq. 7), and GPU memory when ``C > 2``.

    ``y[i,g,t] ≥ z[i,g] + run(i,t) − 1`` (continuous: ``y = z ∧ run`` at integer points) and
    ``Σ_i y[i,g,t] ≤ C`` in slots where more than ``C`` jobs may run; a job on every GPU enters with
    ``run(i,t)`` itself. With ``C = 2`` one-GPU jobs are left out of these rows: their partner row
    ``Σ_k s[i,k,t] ≤ run(i,t)`` (:func:`add_sharing_cuts`) allows one job next to them, and any job on
    their GPU while both run forces its ``s`` to 1 — the same rule with far fewer rows. The aggregated
    ``Σ_i G_i run(i,t) ≤ C·#GPUs`` helps the LP. With ``C = 2`` memory is a property of pairs
    (:func:`add_pair_constraints`); with ``C > 2`` every GPU's memory is summed per slot through
    ``mem[i,g,t] ≥ memory(i,m)·(y[i,g,t] + mu[i,m] − 1)``.
    """
    p = index.problem
    tm = _Time(model, index)
    cap, num_gpus = p.capacity, p.num_gpus
    alive = _alive(index)
    by_partners = cap == 2 and index.options.one_gpu_capacity_by_partners

    def in_rows(i: int) -> bool:
        return not (by_partners and p.jobs[i].num_gpus == 1)

    slots = sorted(t for t, jobs in alive.items() if sum(1 for i in jobs if in_rows(i)) > cap)
    y_keys = [
        (i, g, t) for t in slots for i in alive[t] if in_rows(i) and i in index.free_gpus for g in range(num_gpus)
    ]
    model.y = pyo.Var(y_keys, bounds=(0, 1))
    y_rows: list[Any] = []
    for i, g, t in y_keys:
        const, terms = tm.run(i, t)
        y_rows.append(model.y[i, g, t] >= _lin([*terms, (1.0, model.z[i, g])], const - 1.0))
    _install(model, "y_link", y_rows)

    def load(g: int, t: int) -> tuple[float, Terms]:
        const = 0.0
        terms: Terms = []
        for i in alive[t]:
            if not in_rows(i):
                continue
            if i in index.free_gpus:
                terms.append((1.0, model.y[i, g, t]))
            else:
                c, ts = tm.run(i, t)
                const += c
                terms += ts
        return const, terms

    rows: list[Any] = []
    for t in slots:
        for g in range(num_gpus):
            const, terms = load(g, t)
            rows.append(_lin(terms, const) <= cap)
    _install(model, "gpu_capacity", rows)

    cluster: list[Any] = []
    if index.options.aggregated_capacity:
        for t in sorted(alive):
            if sum(p.jobs[i].num_gpus for i in alive[t]) <= cap * num_gpus:
                continue
            terms = []
            const = 0.0
            for i in alive[t]:
                c, ts = tm.run(i, t)
                const += c * p.jobs[i].num_gpus
                terms += _scale(ts, p.jobs[i].num_gpus)
            cluster.append(_lin(terms, const) <= cap * num_gpus)
    _install(model, "cluster_capacity", cluster)

    memory: list[Any] = []
    mem_keys = y_keys if cap > 2 else []
    model.mem = pyo.Var(mem_keys, bounds=(0, None))
    if cap > 2:
        limit = p.gpu_memory_gib * (1 + 1e-9) + 1e-9
        for i, g, t in mem_keys:
            for m, mode in enumerate(p.jobs[i].modes):
                if i in index.multi_mode:
                    memory.append(model.mem[i, g, t] >= mode.memory_gib * (model.y[i, g, t] + model.mu[i, m] - 1))
                else:
                    memory.append(model.mem[i, g, t] >= mode.memory_gib * model.y[i, g, t])
        for t in slots:
            for g in range(num_gpus):
                terms = [(1.0, model.mem[i, g, t]) for i in alive[t] if i in index.free_gpus]
                const = 0.0
                for i in alive[t]:
                    if i not in index.free_gpus:  # on every GPU, with its largest mode's memory
                        c, ts = tm.run(i, t)
                        worst = max(mode.memory_gib for mode in p.jobs[i].modes)
                        const += worst * c
                        terms += _scale(ts, worst)
                memory.append(_lin(terms, const) <= limit)
    _install(model, "gpu_memory", memory)


def add_progress_constraints(model: pyo.ConcreteModel, index: ModelIndex) -> None:
    """Completion (Eq. 11): enough progress units between start and end.

    ``U·(d_i + ext_i) − Σ_t loss(i,t) ≥ Σ_m work[i,m]·mu[i,m]`` where the loss of a slot is

    * one-GPU job and ``C = 2`` (at most one partner at a time): ``Σ_k (U − speed[i][k])·s[i,k,t]``
      directly;
    * otherwise ``loss[i,t] ≥ (U − speed[i][k])·s[i,k,t]`` for each partner ``k``: the slowest
      partner decides (SPEC: a gang is as fast as its slowest worker).

    (``extra_slot_cuts``) with ``σ_i = max over fastest modes of (U·d_i − work)``:
    ``Σ_{k: U − speed[i][k] > σ_i} s[i,k,t] ≤ (C−1)·G_i·ext_i`` — one costly slot forces an extra slot.
    """
    p = index.problem
    units = p.units_per_slot
    partners = _slot_partners(index)
    direct = {i for i, job in enumerate(p.jobs) if job.num_gpus == 1 and p.capacity == 2}
    loss_keys = sorted(
        (i, t)
        for (i, t), entries in partners.items()
        if i not in direct and any(_pair_loss(p, i, other) > 0 for _, _, other in entries)
    )
    index.loss_keys = set(loss_keys)
    model.loss = pyo.Var(loss_keys, bounds=(0, None))
    loss_rows: list[Any] = []
    for i, t in loss_keys:
        for a, b, other in partners[(i, t)]:
            loss = _pair_loss(p, i, other)
            if loss > 0:
                loss_rows.append(model.loss[i, t] >= loss * model.s[a, b, t])
    _install(model, "loss_link", loss_rows)

    tm = _Time(model, index)
    progress: list[Any] = []
    for i, job in enumerate(p.jobs):
        terms: Terms = [(float(units), model.ext[i])]
        for t in index.run_slots[i]:
            if (i, t) in index.loss_keys:
                terms.append((-1.0, model.loss[i, t]))
            elif i in direct:
                for a, b, other in partners.get((i, t), []):
                    loss = _pair_loss(p, i, other)
                    if loss > 0:
                        terms.append((-float(loss), model.s[a, b, t]))
        cw, tw = tm.mode_terms(i, [float(mode.work) for mode in job.modes])
        progress.append(_lin([*terms, *_scale(tw, -1.0)], units * job.min_slots - cw) >= 0)
    _install(model, "progress", progress)

    extra: list[Any] = []
    if index.options.extra_slot_cuts:
        for i, job in enumerate(p.jobs):
            fastest = [mode for mode in job.modes if mode.min_slots == job.min_slots]
            slack = max(units * job.min_slots - mode.work for mode in fastest)
            bound = (p.capacity - 1) * job.num_gpus
            for t in index.run_slots[i]:
                costly = [
                    model.s[a, b, t] for a, b, other in partners.get((i, t), []) if _pair_loss(p, i, other) > slack
                ]
                if costly:
                    extra.append(sum(costly) <= bound * model.ext[i])
    _install(model, "extra_slot", extra)


def add_sharing_cuts(model: pyo.ConcreteModel, index: ModelIndex) -> None:
    """Partner rows (capacity of one-GPU jobs' GPUs, and LP strength) and the pigeonhole.

    * ``h[i,k,t] ≤ min(G_i, G_k)·s[i,k,t]``: GPUs the pair shares in slot ``t`` (``h = s`` when one of
      them has one GPU); when they must share, ``h ≥ (G_i + G_k − #GPUs)·(run(i,t) + run(k,t) − 1)``;
    * partners: ``Σ_k h[i,k,t] ≤ (C − 1)·G_i·run(i,t)`` (each GPU of ``i`` holds at most ``C − 1``
      others; for a one-GPU job with ``C = 2`` this is the capacity of its GPU, always present);
    * pigeonhole: ``Σ_i G_i run(i,t) − Σ_{i<k} h[i,k,t] ≤ #GPUs`` (the GPUs in use, by inclusion-
      exclusion: exact with ``C = 2``, a valid bound otherwise).
    """
    p = index.problem
    tm = _Time(model, index)
    num_gpus, cap = p.num_gpus, p.capacity
    cuts = index.options.pigeonhole
    h_keys = [
        (i, k, t)
        for i, k in index.share_pairs
        if cuts and min(p.jobs[i].num_gpus, p.jobs[k].num_gpus) > 1
        for t in index.pair_slots[(i, k)]
    ]
    index.h_keys = set(h_keys)
    model.h = pyo.Var(h_keys, bounds=(0, None))
    h_rows: list[Any] = []
    for i, k, t in h_keys:
        h_rows.append(model.h[i, k, t] <= min(p.jobs[i].num_gpus, p.jobs[k].num_gpus) * model.s[i, k, t])
        forced = p.jobs[i].num_gpus + p.jobs[k].num_gpus - num_gpus
        if forced > 0:
            c1, t1 = tm.run(i, t)
            c2, t2 = tm.run(k, t)
            h_rows.append(model.h[i, k, t] >= _lin(_scale(t1 + t2, forced), forced * (c1 + c2 - 1)))
    _install(model, "h_link", h_rows)

    def h(i: int, k: int, t: int) -> Any:
        return model.h[i, k, t] if (i, k, t) in index.h_keys else model.s[i, k, t]

    partner_rows: list[Any] = []
    capacity_rows = cap == 2 and index.options.one_gpu_capacity_by_partners
    for (i, t), entries in _slot_partners(index).items():
        if not cuts and not (capacity_rows and p.jobs[i].num_gpus == 1 and len(entries) > 1):
            continue
        c, ts = tm.run(i, t)
        bound = (cap - 1) * p.jobs[i].num_gpus
        terms = [(1.0, h(a, b, t)) for a, b, _ in entries] + _scale(ts, -bound)
        partner_rows.append(_lin(terms, -bound * c) <= 0)
    _install(model, "partners", partner_rows)

    pigeonhole: list[Any] = []
    if cuts:
        alive = _alive(index)
        pairs_at: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for i, k in index.share_pairs:
            for t in index.pair_slots[(i, k)]:
                pairs_at[t].append((i, k))
        for t in sorted(alive):
            if sum(p.jobs[i].num_gpus for i in alive[t]) <= num_gpus:
                continue
            const = 0.0
            terms = []
            for i in alive[t]:
                c, ts = tm.run(i, t)
                const += c * p.jobs[i].num_gpus
                terms += _scale(ts, p.jobs[i].num_gpus)
            terms += [(-1.0, h(i, k, t)) for i, k in pairs_at[t]]
            pigeonhole.append(_lin(terms, const) <= num_gpus)
    _install(model, "pigeonhole", pigeonhole)


def add_objective(model: pyo.ConcreteModel, index: ModelIndex) -> None:
    """``min Σ_i E_i`` (``"jct"``; seconds = ``Δ·ΣE − Σ a``) or ``min C_max`` with ``C_max ≥ E_i``
    (``"makespan"``; seconds = ``Δ·C_max − min a``), in slot units."""
    p = index.problem
    tm = _Time(model, index)
    if index.objective == "jct":
        const = 0.0
        terms: Terms = []
        for i in range(p.num_jobs):
            c, ts = tm.end_terms(i)
            const += c
            terms += ts
        model.objective = pyo.Objective(expr=_lin(terms, const), sense=pyo.minimize)
        return
    low = max(job.earliest_end for job in p.jobs)
    model.makespan = pyo.Var(bounds=(low, max(low, p.horizon)))
    rows: list[Any] = []
    for i in range(p.num_jobs):
        c, ts = tm.end_terms(i)
        if ts or c > low:
            rows.append(model.makespan >= _lin(ts, c))
    _install(model, "makespan_link", rows)
    model.objective = pyo.Objective(expr=model.makespan, sense=pyo.minimize)


# --- public API ------------------------------------------------------------------------------------


def build_pyomo_model(
    problem: SlottedProblem,
    objective: str = "jct",
    warm_start: SlotSolution | None = None,
    *,
    options: ModelOptions | None = None,
) -> pyo.ConcreteModel:
    """The Pyomo model of a slotted problem (see the module docstring and ``docs/pyomo-model.md``).

    Parameters
    ----------
    problem
        The slotted problem (windows already derived from an upper bound).
    objective
        ``"jct"`` (minimise ``Σ_j E_j``, i.e. total and average JCT) or ``"makespan"``.
    warm_start
        A slot-level solution whose values are set on the variables (:func:`apply_warm_start`; its
        GPUs are relabelled into the model's symmetry-breaking order), so a solver can start from it.
    options
        Formulation switches (:class:`ModelOptions`).

    Returns
    -------
    pyomo.environ.ConcreteModel
        With the bookkeeping :class:`ModelIndex` in ``model._duetto_index``.

    Raises
    ------
    DuettoInputError
        Unknown objective.
    """
    if objective not in ("jct", "makespan"):
        raise DuettoInputError(f"must be 'jct' or 'makespan', got {objective!r}", field="objective")
    index = ModelIndex(problem=problem, objective=objective, options=options or ModelOptions())
    model = pyo.ConcreteModel(name=f"duetto-{problem.instance.name}")
    model._duetto_index = index
    add_time_variables(model, index)
    add_time_constraints(model, index)
    add_gpu_constraints(model, index)
    add_pair_constraints(model, index)
    add_capacity_constraints(model, index)
    add_progress_constraints(model, index)
    add_sharing_cuts(model, index)
    add_objective(model, index)
    index.stats = model_statistics(model)
    if warm_start is not None:
        index.stats["warm_start_applied"] = apply_warm_start(model, warm_start)
    return model


def model_statistics(model: pyo.ConcreteModel) -> dict[str, Any]:
    """Numbers of variables (binary or integer / continuous) and constraints of a built model."""
    integers = continuous = 0
    for var in model.component_data_objects(pyo.Var, descend_into=True):
        if var.is_integer():
            integers += 1
        else:
            continuous += 1
    rows = sum(len(con) for con in model.component_objects(pyo.Constraint, active=True, descend_into=True))
    return {"variables": integers + continuous, "binaries": integers, "continuous": continuous, "constraints": rows}


def canonical_labels(problem: SlottedProblem, solution: SlotSolution) -> SlotSolution:
    """Relabel GPUs into the model's symmetry-breaking order: nodes by first use, and GPUs inside each
    node by first use, in canonical job order, ignoring jobs that hold every GPU (they name none).

    The same schedule under other GPU names (NOTES-oracle pitfall 4: a warm start that breaks the
    order would be rejected).
    """
    gpn, num_gpus = problem.gpus_per_node, problem.num_gpus
    node_order: list[int] = []
    gpu_order: dict[int, list[int]] = defaultdict(list)
    for job in problem.jobs:
        if job.num_gpus >= num_gpus:
            continue
        gpus = sorted(solution[job.id].gpus)
        for g in gpus:
            if g // gpn not in node_order:
                node_order.append(g // gpn)
        for g in gpus:
            if g not in gpu_order[g // gpn]:
                gpu_order[g // gpn].append(g)
    node_order += [n for n in range(problem.num_nodes) if n not in node_order]
    mapping: dict[int, int] = {}
    for new_node, node in enumerate(node_order):
        used = gpu_order.get(node, [])
        rest = [g for g in range(node * gpn, (node + 1) * gpn) if g not in used]
        for position, g in enumerate(used + rest):
            mapping[g] = new_node * gpn + position
    return {job_id: replace(a, gpus=tuple(sorted(mapping[g] for g in a.gpus))) for job_id, a in solution.items()}


def apply_warm_start(model: pyo.ConcreteModel, solution: SlotSolution) -> bool:
    """Set every variable to the values of a slot-level solution.

    GPUs are relabelled first (:func:`canonical_labels`); end slots are the exact integer rule's
    (:func:`formulation.discretize.evaluate`), so every constraint holds.

    Returns
    -------
    bool
        ``False`` (and nothing set) when the solution does not fit the model's windows.
    """
    index = _index(model)
    p = index.problem
    if index.options.symmetry_breaking:
        solution = canonical_labels(p, solution)
    ends = evaluate(p, solution, exact=True)
    assign = [solution[job.id] for job in p.jobs]
    end = [ends[job.id] for job in p.jobs]
    for i, job in enumerate(p.jobs):
        if assign[i].start < job.release or end[i] > job.latest_end:
            return False
        if assign[i].start > job.latest_end - job.min_slots:
            return False
    for i, job in enumerate(p.jobs):
        a = assign[i]
        for t in index.start_vars[i]:
            model.st[i, t].set_value(1.0 if a.start <= t else 0.0)
        for t in index.fin_vars[i]:
            model.fin[i, t].set_value(1.0 if end[i] <= t + 1 else 0.0)
        if i in index.multi_mode:
            for m in range(len(job.modes)):
                model.mu[i, m].set_value(1.0 if m == a.mode else 0.0)
        if i in index.free_gpus:
            for g in range(p.num_gpus):
                model.z[i, g].set_value(1.0 if g in a.gpus else 0.0)
        if i in index.placed:
            for n in range(p.num_nodes):
                model.u[i, n].set_value(1.0 if any(p.node_of(g) == n for g in a.gpus) else 0.0)
        model.ext[i].set_value(float(end[i] - a.start - job.min_slots))

    def running(i: int, t: int) -> bool:
        return assign[i].start <= t < end[i]

    for key in model.y:
        i, g, t = key
        model.y[key].set_value(1.0 if running(i, t) and g in assign[i].gpus else 0.0)
    common = {
        (i, k): len(set(assign[i].gpus) & set(assign[k].gpus)) for i, k in index.conflict_pairs + index.share_pairs
    }
    for key in model.q:
        if not model.q[key].fixed:
            model.q[key].set_value(1.0 if common[key] else 0.0)
    for key in model.s:
        i, k, t = key
        model.s[key].set_value(1.0 if common[(i, k)] and running(i, t) and running(k, t) else 0.0)
    for key in model.o:
        i, k = key
        together = any(running(i, t) and running(k, t) for t in index.pair_slots[key])
        model.o[key].set_value(1.0 if common[key] and together else 0.0)
    for key in model.h:
        i, k, t = key
        model.h[key].set_value(float(common[(i, k)]) if running(i, t) and running(k, t) else 0.0)
    partners = _slot_partners(index)
    for key in model.loss:
        i, t = key
        worst = 0.0
        for first, second, other in partners[key]:
            if common[(first, second)] and running(i, t) and running(other, t):
                worst = max(worst, float(_pair_loss(p, i, other)))
        model.loss[key].set_value(worst)
    for key in model.mem:
        i, g, t = key
        on = running(i, t) and g in assign[i].gpus
        model.mem[key].set_value(p.jobs[i].modes[assign[i].mode].memory_gib if on else 0.0)
    if hasattr(model, "makespan"):
        model.makespan.set_value(float(max(end)))
    return True


def _is_one(var: Any) -> bool:
    value = var.value
    return value is not None and value > 0.5


def extract_solution(model: pyo.ConcreteModel, problem: SlottedProblem | None = None) -> SlotSolution:
    """The slot-level solution held in the model's variable values (after a solve).

    Parameters
    ----------
    model
        A model built by :func:`build_pyomo_model` whose variables carry a solution.
    problem
        The slotted problem (default: the one the model was built from; must be that one).

    Returns
    -------
    SlotSolution
        Start slot, GPUs, mode and the model's end slot of every job (the exact rule's end,
        :func:`formulation.discretize.evaluate`, is never later).
    """
    index = _index(model)
    p = problem or index.problem
    if p is not index.problem and [j.id for j in p.jobs] != [j.id for j in index.problem.jobs]:
        raise DuettoInputError("the model was built from another slotted problem")
    solution: SlotSolution = {}
    for i, job in enumerate(p.jobs):
        starts = index.start_vars[i]
        start = next((t for t in starts if _is_one(model.st[i, t])), job.latest_end - job.min_slots)
        end = next((t + 1 for t in index.fin_vars[i] if _is_one(model.fin[i, t])), job.latest_end)
        mode = 0
        if i in index.multi_mode:
            values = [model.mu[i, m].value or 0.0 for m in range(len(job.modes))]
            mode = values.index(max(values))
        if i in index.free_gpus:
            gpus = tuple(g for g in range(p.num_gpus) if _is_one(model.z[i, g]))
        else:
            gpus = tuple(range(p.num_gpus))
        solution[job.id] = SlotAssignment(max(start, job.release), gpus, mode, end)
    return solution


def solution_value(model: pyo.ConcreteModel, solution: Mapping[str, SlotAssignment]) -> int:
    """Objective (slot units) of the end slots in ``solution`` (``Σ E`` or ``max E``)."""
    index = _index(model)
    ends = [a.end if a.end is not None else 0 for a in solution.values()]
    return sum(ends) if index.objective == "jct" else max(ends)


def export_model(model: pyo.ConcreteModel, path: str | Path) -> Path:
    """Write the model as MPS (``.mps``) or CPLEX LP (``.lp``), chosen by the file suffix.

    Raises
    ------
    DuettoInputError
        Any other suffix.
    """
    target = Path(path)
    formats = {".mps": "mps", ".lp": "lp"}
    fmt = formats.get(target.suffix.lower())
    if fmt is None:
        raise DuettoInputError(
            f"unknown model file type '{target.suffix}': use .mps or .lp", source=str(target), field="path"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    model.write(str(target), format=fmt, io_options={"symbolic_solver_labels": True})
    return target


def ceil_bound(bound: float) -> float:
    """Round a proven bound up to the next integer (the objective is integral), with a tolerance."""
    if not math.isfinite(bound):
        return bound
    return float(math.ceil(bound - 1e-6))
