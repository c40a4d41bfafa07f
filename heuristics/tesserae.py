"""Tesserae (scalable placement policies by graph matching) with Tiresias ordering: Tesserae-T.

Every round (six minutes) Tesserae-T

1. ranks the active jobs by Tiresias' discretised 2D-LAS (:class:`heuristics.muri.LASOrdering`, shared
   with :mod:`heuristics.tiresias`);
2. places as many jobs as possible *without packing*, in that order, on an empty cluster (consolidated
   placement; a job that does not fit is skipped and later ones may still be placed) — §3.2, Fig. 5;
3. packs (Algorithm 4, §4.2): a maximum-weight bipartite matching between the placed jobs and the
   remaining ("pending") jobs of the same GPU count, edge weight = the pair's combined normalised
   throughput ``1/ξ_{a|b} + 1/ξ_{b|a}`` (from the instance's interference model); a matched pending job
   shares its partner's GPUs (at most two jobs per GPU);
4. minimises migrations against the current placement (Algorithms 2-3, §4.1): the new plan's GPUs are
   renamed by a node-level assignment whose pair costs are GPU-level assignments inside each node
   pair, both solved exactly with the Hungarian method (:func:`scipy.optimize.linear_sum_assignment`).
   A move-in or move-out of a job costs ``0.5 / G_j`` per GPU (amortised over its ``G_j`` GPUs), so a
   job that moves entirely costs 1.

Between rounds, arrivals and completions only start pending jobs on idle GPUs. Choices where the paper
is vague are in ``docs/policies-muri-tesserae.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from formulation.errors import DuettoInputError
from heuristics.core import ClusterView
from heuristics.muri import DEFAULT_ROUND_LENGTH, LASOrdering, RoundBasedPolicy, _empty_scratch, merged_order
from heuristics.placement import InstanceFacts
from heuristics.registry import register_policy
from heuristics.tiresias import DEFAULT_PROMOTE_KNOB, DEFAULT_THRESHOLDS


def _hungarian(cost: np.ndarray, maximize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`scipy.optimize.linear_sum_assignment`, imported on first use: importing ``scipy.optimize``
    takes 0.1-0.2 s, and every policy look-up imports this module (the first exact solve's warm start
    did, inside its time limit)."""
    from scipy.optimize import linear_sum_assignment as assign

    rows, cols = assign(cost, maximize=maximize)
    return rows, cols


#: Tesserae packs at most two jobs per GPU (§5: "more than two typically does not provide benefits").
TESSERAE_PACK_LIMIT = 2


# --- Algorithm 4: packing as maximum-weight bipartite matching ------------------------------------------


def max_weight_bipartite(weights: np.ndarray) -> list[tuple[int, int]]:
    """Maximum-weight bipartite matching (not necessarily perfect) by the Hungarian method.

    Parameters
    ----------
    weights
        ``P × Q`` matrix; entries ``<= 0`` or NaN are non-edges.

    Returns
    -------
    list of (row, column)
        Matched pairs with positive weight, by row.

    Notes
    -----
    With non-edges at weight 0, a maximum-weight *assignment* of the rectangular matrix is a
    maximum-weight matching once its zero-weight pairs are dropped: every matching extends to an
    assignment of the same weight by zero edges, and vice versa.
    """
    matrix = np.asarray(weights, dtype=float)
    if matrix.size == 0:
        return []
    matrix = np.where(np.isfinite(matrix) & (matrix > 0), matrix, 0.0)
    rows, cols = _hungarian(matrix, maximize=True)
    return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if matrix[r, c] > 0]


def combined_throughput(xi_ab: float | None, xi_ba: float | None) -> float | None:
    """Tesserae's edge weight: the pair's summed normalised throughputs ``1/ξ_{a|b} + 1/ξ_{b|a}``
    (``None`` if the pair may not share)."""
    if xi_ab is None or xi_ba is None:
        return None
    return 1.0 / xi_ab + 1.0 / xi_ba


# --- Algorithms 2-3: migration minimisation -------------------------------------------------------------


@dataclass(frozen=True)
class MigrationPlan:
    """How to rename the new plan's GPUs onto physical GPUs.

    Attributes
    ----------
    gpu_map
        ``gpu_map[q]`` = the physical GPU that the new plan's GPU ``q`` becomes (a permutation that maps
        nodes onto nodes).
    node_map
        ``node_map[b]`` = the physical node the new plan's node ``b`` becomes.
    cost
        Total migration cost (Tesserae's units: a job that moves entirely costs 1).
    """

    gpu_map: tuple[int, ...]
    node_map: tuple[int, ...]
    cost: float


def _migration_terms(
    old: Sequence[Iterable[str]], new: Sequence[Iterable[str]], demand: Mapping[str, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(out_cost, in_cost, kept)`` with ``cost[p, q] = out_cost[p] + in_cost[q] - 2·kept[p, q]``.

    Over the jobs present in both plans: ``out_cost[p]`` = Σ ``0.5/G_j`` of the jobs on old GPU ``p``,
    ``in_cost[q]`` likewise on new GPU ``q``, ``kept[p, q]`` = Σ ``0.5/G_j`` of the jobs on both.
    """
    num = len(old)
    if len(new) != num:
        raise ValueError("old and new plans must cover the same GPUs")
    old_gpus: dict[str, list[int]] = {}
    for gpu, jobs in enumerate(old):
        for job in jobs:
            old_gpus.setdefault(job, []).append(gpu)
    new_gpus: dict[str, list[int]] = {}
    for gpu, jobs in enumerate(new):
        for job in jobs:
            if job in old_gpus:
                new_gpus.setdefault(job, []).append(gpu)
    out_cost = np.zeros(num)
    in_cost = np.zeros(num)
    kept = np.zeros((num, num))
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    for job, after in new_gpus.items():
        before = old_gpus[job]
        value = 0.5 / demand[job]
        out_cost[before] += value
        in_cost[after] += value
        for p in before:
            rows.extend([p] * len(after))
            cols.extend(after)
        values.extend([value] * (len(before) * len(after)))
    if rows:
        np.add.at(kept, (np.array(rows), np.array(cols)), np.array(values))
    return out_cost, in_cost, kept


def migration_cost_matrix(
    old: Sequence[Iterable[str]], new: Sequence[Iterable[str]], demand: Mapping[str, int]
) -> np.ndarray:
    """GPU-level cost of turning physical GPU ``p`` (old plan) into the new plan's GPU ``q``.

    ``cost[p, q] = Σ_{j on p, not on q} 0.5/G_j + Σ_{j on q, not on p} 0.5/G_j`` over the jobs present
    in both plans (Algorithm 2 line 2 drops the others; Algorithm 3 lines 2-7).
    """
    out_cost, in_cost, kept = _migration_terms(old, new, demand)
    return out_cost[:, None] + in_cost[None, :] - 2.0 * kept


def minimize_migrations(
    old: Sequence[Iterable[str]], new: Sequence[Iterable[str]], *, gpus_per_node: int, demand: Mapping[str, int]
) -> MigrationPlan:
    """Tesserae Algorithms 2-3: rename the new plan's GPUs to move as few jobs as possible.

    Parameters
    ----------
    old, new
        ``old[p]`` = jobs on physical GPU ``p`` now; ``new[q]`` = jobs on GPU ``q`` in the new plan (both
        over the same ``nodes × gpus_per_node`` GPUs).
    gpus_per_node
        GPUs per node; renaming keeps a node's GPUs together (consolidation is preserved).
    demand
        ``G_j`` of every job.

    Returns
    -------
    MigrationPlan
        An optimal renaming for the cost of :func:`migration_cost_matrix` among all renamings that map
        nodes to nodes: the node-level assignment (Hungarian) over pair costs that are themselves optimal
        GPU-level assignments (Hungarian) is exact because the cost separates by node pair.

    Notes
    -----
    Inside a node pair ``(a, b)`` the cost of a GPU assignment is ``Σ out_cost(a) + Σ in_cost(b) -
    2·Σ kept``: only the ``kept`` block depends on the assignment, so pairs that share no job need no
    Hungarian at all (any assignment is optimal), which is most of them.
    """
    num = len(old)
    if num % gpus_per_node:
        raise ValueError("the number of GPUs must be a multiple of gpus_per_node")
    nodes = num // gpus_per_node
    out_cost, in_cost, kept = _migration_terms(old, new, demand)
    node_out = out_cost.reshape(nodes, gpus_per_node).sum(axis=1)
    node_in = in_cost.reshape(nodes, gpus_per_node).sum(axis=1)
    blocks = kept.reshape(nodes, gpus_per_node, nodes, gpus_per_node).transpose(0, 2, 1, 3)
    shared = blocks.sum(axis=(2, 3)) > 0
    node_cost = node_out[:, None] + node_in[None, :]
    identity = np.arange(gpus_per_node)
    inner: dict[tuple[int, int], np.ndarray] = {}
    for a, b in zip(*np.nonzero(shared), strict=True):
        rows, cols = _hungarian(blocks[a, b], maximize=True)
        node_cost[a, b] -= 2.0 * float(blocks[a, b][rows, cols].sum())
        inner[(int(a), int(b))] = cols  # old GPU index i (in node a) takes new GPU index cols[i] (in node b)
    old_nodes, new_nodes = _hungarian(node_cost)
    gpu_map = [0] * num
    node_map = [0] * nodes
    total = 0.0
    for a, b in zip(old_nodes.tolist(), new_nodes.tolist(), strict=True):
        node_map[b] = a
        total += float(node_cost[a, b])
        cols = inner.get((a, b), identity)
        for i in range(gpus_per_node):
            gpu_map[b * gpus_per_node + int(cols[i])] = a * gpus_per_node + i
    return MigrationPlan(tuple(gpu_map), tuple(node_map), max(0.0, total))


def count_migrations(before: Mapping[str, Sequence[int]], after: Mapping[str, Sequence[int]]) -> int:
    """Tesserae's Definition 1: jobs present in both plans whose GPU sets differ."""
    return sum(1 for job, gpus in after.items() if job in before and sorted(before[job]) != sorted(gpus))


def jobs_per_gpu(assignment: Mapping[str, Sequence[int]], num_gpus: int) -> list[list[str]]:
    """``assignment`` (job → GPUs) as per-GPU job lists."""
    result: list[list[str]] = [[] for _ in range(num_gpus)]
    for job, gpus in assignment.items():
        for gpu in gpus:
            result[gpu].append(job)
    return result


# --- Tesserae-T -----------------------------------------------------------------------------------------


class TesseraePolicy(RoundBasedPolicy):
    """Tesserae-T: Tiresias ordering, placement without packing, packing by bipartite matching, migration
    minimisation by two-level Hungarian matching (see the module docstring).

    Parameters
    ----------
    round_length
        Seconds between rounds (Tesserae: six minutes).
    packing
        Pack pending jobs onto placed ones (needs capacity ``C >= 2``).
    min_gain
        A pair is an edge only if its combined normalised throughput exceeds ``1 + min_gain``.
    migration
        Rename the plan's GPUs to minimise migrations (Algorithms 2-3).
    fill_between_rounds
        Start pending jobs on idle GPUs at arrivals/completions between rounds.
    placement
        ``"consolidated"`` or ``"hay"`` (the placement of step 2).
    thresholds, promote_knob
        Tiresias' queue limits (GPU-seconds) and starvation promotion.
    """

    def __init__(
        self,
        *,
        round_length: float = DEFAULT_ROUND_LENGTH,
        packing: bool = True,
        min_gain: float = 0.0,
        migration: bool = True,
        fill_between_rounds: bool = True,
        placement: str = "consolidated",
        thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
        promote_knob: float = DEFAULT_PROMOTE_KNOB,
    ) -> None:
        if not (math.isfinite(min_gain) and min_gain >= 0):
            raise DuettoInputError(f"must be >= 0, got {min_gain!r}", field="min_gain")
        self.packing = bool(packing)
        self.min_gain = float(min_gain)
        self.migration = bool(migration)
        super().__init__(
            round_length=round_length,
            ordering=LASOrdering(thresholds, promote_knob),
            fill_between_rounds=fill_between_rounds,
            placement=placement,
        )
        self.name = "tesserae-t" if placement == "consolidated" else f"tesserae-t+{placement}"

    def reset(self) -> None:
        super().reset()
        self.packed_pairs = 0
        self.migration_cost = 0.0
        self._weights: dict[tuple[str, str], float] = {}
        self._weight_rows: dict[str, dict[str, float]] = {}  # placed profile -> pending profile -> weight
        self._job_facts: dict[str, tuple[int, str, int]] = {}
        self._classes: dict[str, tuple[str, int]] | None = None

    def _facts_of(self, facts: InstanceFacts, job_id: str) -> tuple[int, str, int]:
        """``(GPU demand, profile, fastest accumulation steps)`` of a job, cached."""
        value = self._job_facts.get(job_id)
        if value is None:
            job = facts.job(job_id)
            value = (job.num_gpus, job.profile, facts.fastest_steps(job_id))
            self._job_facts[job_id] = value
        return value

    def _class_keys(self, facts: InstanceFacts) -> dict[str, tuple[str, int]]:
        """Interchangeable-job class ``(profile, fastest steps)`` of every job, computed once."""
        if self._classes is None:
            self._classes = {}
            for job in facts.instance.jobs:
                _, profile, steps = self._facts_of(facts, job.id)
                self._classes[job.id] = (profile, steps)
        return self._classes

    def _pair_weight(self, facts: InstanceFacts, a: str, b: str) -> float:
        """Combined normalised throughput of placed ``a`` with pending ``b``; 0 if not an edge."""
        pa, pb = facts.job(a).profile, facts.job(b).profile
        key = (pa, pb)
        value = self._weights.get(key)
        if value is None:
            combined = combined_throughput(facts.ratio(a, b), facts.ratio(b, a))
            value = combined if combined is not None and combined > 1.0 + self.min_gain else 0.0
            self._weights[key] = value
        return value

    def _weight_table(self, facts: InstanceFacts, placed: list[str], pending: list[str]) -> np.ndarray:
        """:meth:`_pair_weight` of every (placed, pending) pair as a matrix. The weights are cached per
        profile pair; the pairs not cached yet are computed in rectangular blocks
        (:meth:`InstanceFacts.profile_ratio_matrix`, vectorised): with thousands of distinct profiles the
        first round needs ~10^5 new pairs."""
        rows = [self._facts_of(facts, a)[1] for a in placed]
        cols = [self._facts_of(facts, b)[1] for b in pending]
        unique_rows = list(dict.fromkeys(rows))
        unique_cols = list(dict.fromkeys(cols))
        cache = self._weight_rows
        fresh = [pa for pa in unique_rows if pa not in cache]
        if fresh:
            self._fill_weights(facts, fresh, unique_cols)
        # Rows seen before: the columns some of them lack, as one block (recomputing a cached pair gives
        # the same value).
        stale: list[str] = []
        missing: set[str] = set()
        wanted = set(unique_cols)
        for pa in unique_rows:
            lacking = wanted - cache[pa].keys()
            if lacking:
                stale.append(pa)
                missing |= lacking
        if stale:
            self._fill_weights(facts, stale, [pb for pb in unique_cols if pb in missing])
        table = [list(map(cache[pa].__getitem__, cols)) for pa in rows]
        return np.array(table, dtype=float).reshape(len(rows), len(cols))

    def _fill_weights(self, facts: InstanceFacts, row_profiles: list[str], col_profiles: list[str]) -> None:
        """Cache the weight of every ``row_profiles`` × ``col_profiles`` pair: the same floats as
        :meth:`_pair_weight` (``1/ξ_ab + 1/ξ_ba`` elementwise is the same IEEE arithmetic)."""
        forward = facts.profile_ratio_matrix(row_profiles, col_profiles)
        backward = facts.profile_ratio_matrix(col_profiles, row_profiles).T
        with np.errstate(invalid="ignore"):
            combined = 1.0 / forward + 1.0 / backward  # NaN where a pair may not share
            weights = np.where(combined > 1.0 + self.min_gain, combined, 0.0)
        cache = self._weight_rows
        for pa, values in zip(row_profiles, weights.tolist(), strict=True):
            row = cache.get(pa)
            if row is None:
                row = cache[pa] = {}
            row.update(zip(col_profiles, values, strict=True))

    def plan(self, view: ClusterView, facts: InstanceFacts) -> dict[str, tuple[tuple[int, ...], int]]:
        queue = self.ordering.queue
        assert queue is not None
        cluster = view.instance.cluster
        scratch = _empty_scratch(view, facts)
        # 2. Place without packing, in Tiresias order, on the empty cluster.
        order = merged_order(queue, self.ordering.running_keys(view))
        placed: dict[str, tuple[int, ...]] = {}
        leftover_running: list[str] = []
        for job_id, is_running in order:
            demand, _, steps = self._facts_of(facts, job_id)
            if demand <= scratch.free_count:
                gpus = scratch.pick_free(demand, self.placement)
                if gpus is not None:
                    scratch.place(job_id, gpus, steps)
                    placed[job_id] = tuple(sorted(gpus))
                    if scratch.free_count == 0:
                        break
                    continue
            if is_running:
                leftover_running.append(job_id)
        steps_of = {job_id: self._facts_of(facts, job_id)[2] for job_id in placed}
        target: dict[str, tuple[tuple[int, ...], int]] = {j: (g, steps_of[j]) for j, g in placed.items()}
        # 3. Pack: per GPU count, placed jobs × the best pending candidates.
        if self.packing and min(cluster.capacity, TESSERAE_PACK_LIMIT) >= 2 and placed:
            self._pack(view, facts, queue, placed, leftover_running, target)
        # 4. Rename GPUs to minimise migrations against what runs now.
        if self.migration and view.running:
            target = self._rename(view, facts, target)
        return target

    def _pack(
        self,
        view: ClusterView,
        facts: InstanceFacts,
        queue: Any,
        placed: Mapping[str, tuple[int, ...]],
        leftover_running: list[str],
        target: dict[str, tuple[tuple[int, ...], int]],
    ) -> None:
        memory_limit = view.instance.cluster.gpu_memory_gib + 1e-9
        by_demand: dict[int, list[str]] = {}
        for job_id in placed:
            by_demand.setdefault(self._facts_of(facts, job_id)[0], []).append(job_id)
        for demand, rows in by_demand.items():
            quota = len(rows)
            # Candidates: remaining jobs of this GPU count, at most ``quota`` per interchangeable class
            # (same profile and memory), in priority order. Exact: a matching uses at most ``quota`` of a
            # class, and members of a class have identical edge weights.
            taken: dict[tuple[str, int], int] = {}
            candidates: list[str] = []
            classes: list[tuple[str, int]] = []
            pool = [j for j in leftover_running if self._facts_of(facts, j)[0] == demand]
            bucket = queue.buckets.get(demand, [])
            class_of = self._class_keys(facts)
            for job_id in [*pool, *(item[2] for item in bucket)]:
                key = class_of[job_id]
                count = taken.get(key, 0)
                if count >= quota or job_id in placed:
                    continue
                taken[key] = count + 1
                candidates.append(job_id)
                classes.append(key)
            if not candidates:
                continue
            # Edge weights by class pair (profile, steps): a few distinct pairs, expanded by indexing.
            row_keys = [(self._facts_of(facts, a)[1], target[a][1]) for a in rows]
            kinds: dict[tuple[str, int], int] = {}
            row_kind = np.array([kinds.setdefault(key, len(kinds)) for key in row_keys])
            col_kind = np.array([kinds.setdefault(key, len(kinds)) for key in classes])
            representative: dict[int, str] = {}
            for job_id, key in zip([*rows, *candidates], [*row_keys, *classes], strict=True):
                representative.setdefault(kinds[key], job_id)
            # Kind-pair table, vectorised: weight > 0 and the representatives' memory fits.
            row_list = sorted(set(row_kind.tolist()))
            col_list = sorted(set(col_kind.tolist()))
            rep_a = [representative[ra] for ra in row_list]
            rep_b = [representative[cb] for cb in col_list]
            mem_a = np.array([facts.memory(a, target[a][1] if a in target else facts.fastest_steps(a)) for a in rep_a])
            mem_b = np.array([facts.memory(b, facts.fastest_steps(b)) for b in rep_b])
            pair_w = self._weight_table(facts, rep_a, rep_b)
            fits = (pair_w > 0) & (mem_a[:, None] + mem_b[None, :] <= memory_limit)
            table = np.zeros((len(kinds), len(kinds)))
            table[np.ix_(row_list, col_list)] = np.where(fits, pair_w, 0.0)
            weights = table[np.ix_(row_kind, col_kind)]
            matched = max_weight_bipartite(weights)
            # Within a class, hand the chosen slots to its highest-priority members (same weights).
            chosen_by_class: dict[tuple[str, int], list[int]] = {}
            for _, c in matched:
                chosen_by_class.setdefault(classes[c], []).append(c)
            best_of_class: dict[tuple[str, int], list[int]] = {}
            for c, key in enumerate(classes):
                best_of_class.setdefault(key, []).append(c)
            remap: dict[int, int] = {}
            for key, chosen in chosen_by_class.items():
                for old_c, new_c in zip(sorted(chosen), best_of_class[key][: len(chosen)], strict=True):
                    remap[old_c] = new_c
            for r, c in matched:
                partner = candidates[remap.get(c, c)]
                host = rows[r]
                target[partner] = (target[host][0], self._facts_of(facts, partner)[2])
                self.packed_pairs += 1

    def _rename(
        self, view: ClusterView, facts: InstanceFacts, target: dict[str, tuple[tuple[int, ...], int]]
    ) -> dict[str, tuple[tuple[int, ...], int]]:
        cluster = view.instance.cluster
        num = cluster.num_gpus
        old = [list(view.occupants_of(g)) for g in range(num)]
        new = jobs_per_gpu({j: gpus for j, (gpus, _) in target.items()}, num)
        demand = {job: self._facts_of(facts, job)[0] for jobs in (*old, *new) for job in jobs}
        plan = minimize_migrations(old, new, gpus_per_node=cluster.gpus_per_node, demand=demand)
        self.migration_cost += plan.cost
        mapping = plan.gpu_map
        return {j: (tuple(sorted(mapping[g] for g in gpus)), steps) for j, (gpus, steps) in target.items()}


register_policy(
    "tesserae-t",
    lambda **options: TesseraePolicy(**options),
    "Tesserae-T: Tiresias 2D-LAS ordering, placement without packing, packing by max-weight bipartite "
    "matching of combined normalised throughput, two-level Hungarian migration minimisation, 6-min rounds "
    "(Tesserae §3-4, Algorithms 2-4)",
)

__all__ = [
    "TESSERAE_PACK_LIMIT",
    "MigrationPlan",
    "TesseraePolicy",
    "combined_throughput",
    "count_migrations",
    "jobs_per_gpu",
    "max_weight_bipartite",
    "migration_cost_matrix",
    "minimize_migrations",
]
