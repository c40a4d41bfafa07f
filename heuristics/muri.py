"""Muri: multi-resource interleaving (Zhao et al., SIGCOMM'22) — Muri-S and Muri-L.

The pure algorithms (no simulator needed):

* :func:`group_period`, :func:`group_efficiency`, :func:`group_slowdowns` — Muri Eq. 1-4 for a group of
  jobs sharing GPUs: the interleaved period ``T`` of the best ordering (every ordering enumerated, via
  :func:`formulation.interference.interleaved_period`), the interleaving efficiency ``γ`` and each
  member's slowdown ``T / Σ_r t_j^r``.
* :func:`multi_round_grouping` / :func:`bucket_grouping` — Algorithm 1: ``⌈log2 k⌉`` rounds of exact
  maximum-weight matching (edge weight = ``γ`` of the merged group), each matched pair merged into one
  node for the next round; :func:`bucket_grouping` only groups jobs of the same GPU count (Muri §4.2,
  "buckets") and merges only as many pairs as are needed to fit a GPU budget (as Muri's simulator does).
  Jobs with identical stage profiles are interchangeable, so each round is solved exactly on classes
  (:mod:`heuristics.matching`).

The policies (:class:`MuriPolicy`, registered as ``muri-s`` and ``muri-l``) run in rounds: at every
round boundary the jobs are ranked (SRSF ``p = remaining time × GPUs`` for Muri-S; 2D-LAS on attained
GPU-time for Muri-L), dequeued in that order until they fill ``capacity × #GPUs`` GPU slots, grouped, and
the groups are placed (largest GPU count first, consolidated). Between rounds, arrivals and completions
only start pending jobs on idle GPUs (no preemption). Choices where the paper is vague are listed in
``docs/policies-muri-tesserae.md``.

Group slowdown and SPEC.md: SPEC fixes a job's factor as the largest pairwise ratio ``ξ`` over the jobs
sharing its GPUs (with :class:`~formulation.interference.StageInterference`, ``ξ_{j|k}`` is the *pair's*
interleaved period over ``j``'s stage sum). For groups of two this is exactly Muri's period; for groups of
three or four Muri's group period (:func:`group_slowdowns`) is longer than any pair's, so the simulator
and validator are optimistic for such groups — a known modelling simplification, quantified by
:func:`group_model_gap` and reported by ``benchmarks/grouping_speed.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np

from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.interference import interleaved_period, interleaving_efficiency
from formulation.progress import MuriProgress, muri_group_period
from heuristics.baselines import Key, PendingQueue
from heuristics.core import Action, ClusterView, Preempt, Start
from heuristics.matching import (
    DEFAULT_RESOLUTION,
    ClassMatching,
    MatchingMethod,
    class_level_matching,
    expand_class_matching,
)
from heuristics.placement import InstanceFacts, Scratch, check_placement
from heuristics.registry import register_policy
from heuristics.tiresias import DEFAULT_PROMOTE_KNOB, DEFAULT_THRESHOLDS, LasQueues

#: Muri's and Tesserae's scheduling interval (six minutes, both papers).
DEFAULT_ROUND_LENGTH = 360.0
#: Largest Muri group: the paper packs at most k jobs for k resource types, "typically four".
DEFAULT_MAX_GROUP_SIZE = 4

StageTimes = tuple[float, ...]


# --- Muri Eq. 1-4 for groups ----------------------------------------------------------------------------


def _padded(stage_times: Sequence[Sequence[float]]) -> list[tuple[float, ...]]:
    """Profiles padded with empty stages to ``max(#stages, #jobs)`` slots.

    A group of more jobs than resource stages interleaves over a cycle of one slot per job, with idle
    (zero-time) slots — how Muri's simulator runs four-job groups on the three-stage Philly traces.
    """
    slots = max(max(len(times) for times in stage_times), len(stage_times))
    return [tuple(float(t) for t in times) + (0.0,) * (slots - len(times)) for times in stage_times]


def group_period(stage_times: Sequence[Sequence[float]]) -> float:
    """Muri Eq. 3: per-iteration time ``T`` of a group interleaving its stages in the best ordering.

    Every ordering is enumerated (:func:`formulation.interference.interleaved_period`); a group with more
    jobs than stages cycles over one slot per job (empty stages padded).
    """
    if not stage_times:
        raise ValueError("a group needs at least one job")
    return interleaved_period(_padded(stage_times))[0]


def group_offsets(stage_times: Sequence[Sequence[float]]) -> tuple[int, ...]:
    """The ordering (stage offset of each job) that reaches :func:`group_period`."""
    return interleaved_period(_padded(stage_times))[1]


def group_efficiency(stage_times: Sequence[Sequence[float]]) -> float:
    """Muri Eq. 4: ``γ``, the average over the *real* resources of the busy fraction of the period.

    For up to ``k`` jobs on ``k`` stages this is :func:`formulation.interference.interleaving_efficiency`;
    padded idle slots of larger groups are not resources and are not averaged in.
    """
    if not stage_times:
        raise ValueError("a group needs at least one job")
    resources = max(len(times) for times in stage_times)
    if len(stage_times) <= resources:
        return interleaving_efficiency(stage_times)
    period = group_period(stage_times)
    if period <= 0:
        return 1.0
    busy = sum(math.fsum(times) for times in stage_times)
    # Eq. 4: 1 - (1/k) Σ_r (T - busy_r)/T = Σ_r busy_r / (k·T) over the k real resources.
    return busy / (resources * period)


def muri_sim_efficiency(stage_times: Sequence[Sequence[float]]) -> float:
    """``γ`` as Eq. 4 but with the period Muri's simulator charges a group
    (:func:`formulation.progress.muri_group_period`, before its stretch): the busy time of the real
    resources over ``k · T_M``. Under Muri's progress rule a group progresses at that period, so the
    grouping scores it by that period too (Muri's simulator's edge weights use the same period)."""
    if len(stage_times) < 2:
        return group_efficiency(stage_times)
    period = muri_group_period(stage_times)
    if period <= 0:
        return 1.0
    resources = max(len(times) for times in stage_times)
    return sum(math.fsum(times) for times in stage_times) / (resources * period)


def group_slowdowns(stage_times: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """Each member's slowdown in the group: ``T / Σ_r t_j^r`` (>= 1; 1 for a member with no work)."""
    period = group_period(stage_times)
    result = []
    for times in stage_times:
        own = math.fsum(times)
        result.append(max(1.0, period / own) if own > 0 else 1.0)
    return tuple(result)


def group_model_gap(stage_times: Sequence[Sequence[float]]) -> float:
    """How much slower Muri's group period makes a group than SPEC's pairwise rule.

    Returns the largest, over members, of ``(T_group / own) / max_k (T_{pair j,k} / own)`` — 1.0 for
    pairs (identical models), > 1 when the SPEC simulator is optimistic about the group.
    """
    group = group_slowdowns(stage_times)
    worst = 1.0
    for j, times in enumerate(stage_times):
        own = math.fsum(times)
        if own <= 0:
            continue
        pairwise = max(
            (max(1.0, interleaved_period([times, other])[0] / own) for k, other in enumerate(stage_times) if k != j),
            default=1.0,
        )
        worst = max(worst, group[j] / pairwise)
    return worst


# --- Algorithm 1: multi-round grouping ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupingItem:
    """A job to group.

    Parameters
    ----------
    num_gpus
        Gang size (Muri groups only jobs of equal size: the bucket).
    stage_times
        Per-iteration seconds per resource stage (Muri's profile).
    memory_gib
        Per-GPU memory of the job (a group must fit ``memory_limit``).
    key
        Anything else that makes jobs different (e.g. the profile name); jobs with equal
        ``(stage_times, memory_gib, key)`` are interchangeable.
    """

    num_gpus: int
    stage_times: StageTimes
    memory_gib: float = 0.0
    key: Hashable = None


class GroupingCache:
    """Memory shared by grouping calls (keep one per policy run).

    * canonical class ids of interchangeable jobs (``(stage_times, memory, key)``), stable across calls;
    * ``γ`` per multiset of stage profiles (a group's interleaving depends on nothing else);
    * the exact class-level matching per bucket configuration (sorted node classes and their counts):
      successive rounds of a policy often group the same multiset of job classes again.
    """

    def __init__(
        self,
        max_matchings: int = 200_000,
        period_model: Literal["eq3", "muri"] = "eq3",
        stretch: Sequence[float] | None = None,
    ) -> None:
        if period_model not in ("eq3", "muri"):
            raise DuettoInputError(f"must be 'eq3' or 'muri', got {period_model!r}", field="period_model")
        #: whose group period ``γ`` uses: Muri Eq. 3 (default) or Muri's simulator's (:func:`muri_sim_efficiency`)
        self.period_model = period_model
        #: with ``period_model="muri"``: the group-size stretch ``(f_1, ..., f_k)`` of the progress rule
        #: (:class:`formulation.progress.MuriProgress`); a group of ``n`` is scored at the period it is
        #: charged, ``T_M · f_n / f_1``, as Muri's simulator's edge weights are (``calc_used_ratio``)
        self.stretch: tuple[float, ...] | None = tuple(float(f) for f in stretch) if stretch else None
        self.class_ids: dict[tuple[Any, ...], int] = {}
        self.profiles: list[StageTimes] = []
        self.memory: list[float] = []
        self._gamma: dict[tuple[StageTimes, ...], float] = {}
        self._gap: dict[tuple[StageTimes, ...], float] = {}
        self._merge: dict[tuple[Any, ...], float | None] = {}
        self.matchings: dict[tuple[Any, ...], ClassMatching] = {}
        self.max_matchings = max_matchings
        self.hits = 0
        self.misses = 0
        self.keys: list[Hashable] = []
        self._forbidden: Callable[[Hashable, Hashable], bool] | None = None
        self._forbidden_token: object = None

    def forbid(self, token: object, forbidden: Callable[[Hashable, Hashable], bool] | None) -> None:
        """Pairs of item keys that may not share a GPU (``forbidden(a, b)``); a merge holding such a
        pair is not an edge. ``token`` names the instance: a new one clears what was memoised."""
        if token is not self._forbidden_token:
            self._merge.clear()
            self.matchings.clear()
            self._forbidden_token = token
        self._forbidden = forbidden

    def class_id(self, item: GroupingItem) -> int:
        key = (item.stage_times, item.memory_gib, item.key)
        value = self.class_ids.get(key)
        if value is None:
            value = len(self.class_ids)
            self.class_ids[key] = value
            self.profiles.append(item.stage_times)
            self.memory.append(item.memory_gib)
            self.keys.append(item.key)
        return value

    def gamma(self, profiles: Iterable[StageTimes]) -> float:
        key = tuple(sorted(profiles))
        value = self._gamma.get(key)
        if value is None:
            value = muri_sim_efficiency(key) if self.period_model == "muri" else group_efficiency(key)
            if self.period_model == "muri" and self.stretch is not None and len(key) >= 2:
                # the period the group is charged is stretched by f_n / f_1: its efficiency shrinks by that
                value *= self.stretch[0] / self.stretch[min(len(key), len(self.stretch)) - 1]
            self._gamma[key] = value
        return value

    def merge_gamma(
        self, first: tuple[int, ...], second: tuple[int, ...], max_group_size: int, memory_limit: float | None
    ) -> float | None:
        """``γ`` of merging two nodes (tuples of class ids), or ``None`` if the merge is not allowed
        (too many jobs, their memory exceeds ``memory_limit``, or two of them may not share: :meth:`forbid`)."""
        key = (first, second, max_group_size, memory_limit)
        try:
            return self._merge[key]
        except KeyError:
            pass
        members = first + second
        value: float | None
        forbidden = self._forbidden
        if (
            len(members) > max_group_size
            or (memory_limit is not None and sum(self.memory[c] for c in members) > memory_limit + 1e-9)
            or (
                forbidden is not None
                and any(forbidden(self.keys[a], self.keys[b]) for a, b in itertools.combinations(members, 2))
            )
        ):
            value = None
        else:
            value = self.gamma(self.profiles[c] for c in members)
        self._merge[key] = value
        return value

    def model_gap(self, profiles: Iterable[StageTimes]) -> float:
        key = tuple(sorted(profiles))
        value = self._gap.get(key)
        if value is None:
            value = group_model_gap(key)
            self._gap[key] = value
        return value

    def remember(self, key: tuple[Any, ...], matching: ClassMatching) -> None:
        if len(self.matchings) >= self.max_matchings:
            self.matchings.clear()
        self.matchings[key] = matching

    def __len__(self) -> int:
        return len(self._gamma)


def grouping_rounds(max_group_size: int) -> int:
    """Algorithm 1's number of rounds, ``⌈log2 k⌉`` (group sizes double each round)."""
    if max_group_size < 1:
        raise ValueError(f"max_group_size must be >= 1, got {max_group_size}")
    return math.ceil(math.log2(max_group_size)) if max_group_size > 1 else 0


@dataclass(frozen=True, slots=True)
class GroupingStats:
    """What one call of :func:`bucket_grouping` did (for benchmarks and tests)."""

    rounds: int
    matchings: int
    matched_weight: tuple[int, ...]  # total quantised γ of each round's matching (summed over buckets)
    methods: tuple[str, ...]


def bucket_grouping(
    items: Sequence[GroupingItem],
    *,
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
    gpu_budget: int | None = None,
    memory_limit: float | None = None,
    method: MatchingMethod = "auto",
    resolution: float = DEFAULT_RESOLUTION,
    cache: GroupingCache | None = None,
    stats: list[GroupingStats] | None = None,
    rounds: int | None = None,
    merge_order: Literal["waste", "position"] = "waste",
) -> list[tuple[int, ...]]:
    """Muri's grouping (Algorithm 1 per GPU-count bucket).

    Parameters
    ----------
    items
        The dequeued jobs, in priority order (when a class is not fully matched, its last items stay
        single).
    max_group_size
        At most this many jobs per group (Muri's ``k``; the simulator's capacity ``C`` caps it).
    gpu_budget
        ``None``: merge every matched pair in every round (Algorithm 1 as printed). Otherwise stop merging
        as soon as the groups need at most ``gpu_budget`` GPUs in total (each group needs its bucket's GPU
        count): Muri's simulator merges the matched pairs in order of ``(1 - γ)·#GPUs`` (least wasted
        GPU-time first) only while the plan does not fit the cluster.
    memory_limit
        Per-GPU memory; a merge whose members' memory sum exceeds it is not an edge.
    method, resolution
        Exact matching route and weight quantisation (:func:`heuristics.matching.max_weight_matching`).
    cache
        Shared :class:`GroupingCache` (reuse it across calls).
    stats
        If given, a :class:`GroupingStats` is appended.
    rounds
        Matching rounds at most (default ``⌈log2 k⌉``, Algorithm 1; Muri's simulator runs up to ``k``
        rounds, stopping as soon as the budget is met).
    merge_order
        With a ``gpu_budget``, which matched pairs merge first. ``"waste"``: least ``(1 - γ)·#GPUs``
        first (the key Muri's simulator sorts by but then discards). ``"position"``: what Muri's simulator
        actually does (``matching.py`` ``blossom_one_round``): buckets in order of their first item, inside
        a bucket pairs by the later position of their two nodes; a matched pair (merged or not) then sits
        at that later position in the next round's node list.

    Returns
    -------
    list of tuple of int
        Groups of item indices (every item in exactly one group; singletons included), each sorted,
        in order of their first member.
    """
    if max_group_size < 1:
        raise ValueError(f"max_group_size must be >= 1, got {max_group_size}")
    cache = cache if cache is not None else GroupingCache()
    item_class = [cache.class_id(item) for item in items]

    buckets: dict[int, list[tuple[int, ...]]] = {}
    for index, item in enumerate(items):
        buckets.setdefault(item.num_gpus, []).append((index,))

    def required() -> int:
        return sum(gpus * len(nodes) for gpus, nodes in buckets.items())

    if merge_order not in ("waste", "position"):
        raise DuettoInputError(f"must be 'waste' or 'position', got {merge_order!r}", field="merge_order")
    rounds = grouping_rounds(max_group_size) if rounds is None else rounds
    bucket_rank = {gpus: rank for rank, gpus in enumerate(buckets)}
    weights_per_round: list[int] = []
    methods: list[str] = []
    matchings = 0
    for _ in range(rounds):
        if gpu_budget is not None and required() <= gpu_budget:
            break
        # (sort key: waste, or (bucket rank, later position); GPUs; position; the two nodes)
        candidates: list[tuple[Any, int, int, tuple[int, ...], tuple[int, ...]]] = []
        round_weight = 0
        for gpus, nodes in buckets.items():
            if len(nodes) < 2:
                continue
            # Node classes in a canonical order, so that equal configurations hit the cache.
            node_keys = [
                (item_class[node[0]],) if len(node) == 1 else tuple(sorted(item_class[i] for i in node))
                for node in nodes
            ]
            keys = sorted(set(node_keys))
            key_index = {key: position for position, key in enumerate(keys)}
            labels = [key_index[key] for key in node_keys]
            counts = np.bincount(labels, minlength=len(keys))
            m = len(keys)
            weights = np.full((m, m), np.nan)
            for a in range(m):
                for b in range(a, m):
                    gamma = cache.merge_gamma(keys[a], keys[b], max_group_size, memory_limit)
                    if gamma is not None:
                        weights[a, b] = weights[b, a] = gamma
            if not np.any(np.isfinite(weights)):
                continue
            memo = (tuple(keys), tuple(counts.tolist()), max_group_size, memory_limit, resolution, method)
            solution = cache.matchings.get(memo)
            if solution is None:
                cache.misses += 1
                solution, used = class_level_matching(labels, weights, method=method, resolution=resolution)
                cache.remember(memo, solution)
                methods.append(used)
                matchings += 1
            else:
                cache.hits += 1
                methods.append("cached")
            round_weight += solution.weight
            for u, v in expand_class_matching(labels, solution):
                gamma = float(weights[labels[u], labels[v]])
                if merge_order == "position":
                    low, high = min(u, v), max(u, v)
                    candidates.append(((bucket_rank[gpus], high), gpus, low, nodes[low], nodes[high]))
                else:
                    # least wasted GPU-time first; ties by bucket and position.
                    candidates.append(((1.0 - gamma) * gpus, gpus, u, nodes[u], nodes[v]))
        weights_per_round.append(round_weight)
        if not candidates:
            break
        candidates.sort(key=lambda c: (c[0], -c[1], c[2]))
        need = None if gpu_budget is None else required() - gpu_budget
        merged: dict[int, set[tuple[int, ...]]] = {}
        replacement: dict[tuple[int, ...], tuple[int, ...]] = {}
        at_high: dict[int, dict[tuple[int, ...], tuple[tuple[int, ...], ...]]] = {}
        for _, gpus, _, first, second in candidates:
            merge = need is None or need > 0
            if merge_order == "position":
                # the pair takes its later node's place, merged or (budget met) as two nodes
                low_high = (first, second)
                at_high.setdefault(gpus, {})[second] = (tuple(sorted(first + second)),) if merge else low_high
                merged.setdefault(gpus, set()).add(first)
            elif merge:
                replacement[first] = tuple(sorted(first + second))
                merged.setdefault(gpus, set()).add(second)
            elif need is not None:
                break
            if merge and need is not None:
                need -= gpus
        for gpus, nodes in buckets.items():
            dropped = merged.get(gpus, set())
            if merge_order == "position":
                moved = at_high.get(gpus, {})
                buckets[gpus] = [part for node in nodes if node not in dropped for part in moved.get(node, (node,))]
            else:
                buckets[gpus] = [replacement.get(node, node) for node in nodes if node not in dropped]
    if stats is not None:
        stats.append(GroupingStats(rounds, matchings, tuple(weights_per_round), tuple(methods)))
    groups = [node for nodes in buckets.values() for node in nodes]
    return sorted(groups)


def multi_round_grouping(
    stage_times: Sequence[Sequence[float]],
    *,
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
    target_groups: int | None = None,
    method: MatchingMethod = "auto",
    resolution: float = DEFAULT_RESOLUTION,
) -> list[tuple[int, ...]]:
    """Algorithm 1 on one bucket: group jobs by ``⌈log2 k⌉`` rounds of maximum-weight matching.

    Parameters
    ----------
    stage_times
        Per-stage times of each job.
    max_group_size
        ``k``: at most this many jobs per group.
    target_groups
        ``None``: merge every matched pair (Algorithm 1 as printed); else stop once at most this many
        groups remain (see :func:`bucket_grouping`).
    method, resolution
        See :func:`heuristics.matching.max_weight_matching`.
    """
    items = [GroupingItem(1, tuple(float(t) for t in times)) for times in stage_times]
    return bucket_grouping(
        items, max_group_size=max_group_size, gpu_budget=target_groups, method=method, resolution=resolution
    )


# --- priorities -----------------------------------------------------------------------------------------


def _pair_forbidden(instance: Instance, first: Hashable, second: Hashable) -> bool:
    """Whether two profiles (by name) may not share a GPU: a ratio undefined either way."""
    a, b = instance.profiles[str(first)], instance.profiles[str(second)]
    return instance.interference.ratio(a, b) is None or instance.interference.ratio(b, a) is None


def srsf_priority(remaining_seconds: float, num_gpus: int) -> float:
    """Muri §4.2 / Tiresias SRSF: ``p = r × g`` (remaining time alone × GPUs; lower runs first)."""
    return remaining_seconds * num_gpus


def las_priority(attained_gpu_seconds: float) -> float:
    """Muri §4.2 2D-LAS: ``p = a × g`` — the attained GPU-time (``attained_service`` already counts GPUs)."""
    return attained_gpu_seconds


# --- shared machinery of the round-based sharing policies (Muri and Tesserae) ---------------------------


def missing_stage_profiles(instance: Instance) -> list[str]:
    """Names of the profiles used by jobs that have no per-stage times."""
    used = {job.profile for job in instance.jobs}
    return sorted(name for name in used if instance.profiles[name].stage_times is None)


class Ordering:
    """The priority order a round-based policy serves jobs in.

    ``sync(view)`` brings the pending queue up to date; ``running_keys(view)`` ranks the running jobs on
    the same scale as the pending queue's keys (smaller first).
    """

    queue: PendingQueue | None

    def bind(self, facts: InstanceFacts) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def sync(self, view: ClusterView) -> PendingQueue:  # pragma: no cover - interface
        raise NotImplementedError

    def running_keys(self, view: ClusterView) -> list[tuple[Key, int, str]]:  # pragma: no cover - interface
        raise NotImplementedError

    def started(self, view: ClusterView, job_ids: Iterable[str]) -> None:
        """Jobs just started by the policy (bookkeeping hook)."""

    def next_change(self, view: ClusterView) -> float:
        """Earliest time the order may change without an arrival or completion."""
        return math.inf


def _resync(queue: PendingQueue, view: ClusterView, enqueue: Any) -> None:
    """Make ``queue`` hold exactly the pending jobs (set operations; new ones via ``enqueue(job_id)``).

    A full comparison every time: the policy never relies on mirroring its own actions.
    """
    current = view.pending_set if view.pending_set is not None else set(view.pending)
    members = queue.members
    if members.keys() == current:
        return
    for job_id in members.keys() - current:
        queue.discard(job_id)
    instance = view.instance
    for job_id in sorted(set(current).difference(members), key=lambda j: (instance.job(j).arrival, j)):
        enqueue(job_id)


class _PriorityOrdering(Ordering):
    """An order by one number per job, then running before pending, then arrival: key ``(priority, 1,
    arrival)`` in the pending queue and ``(priority, 0, arrival)`` for a running job. Subclasses give
    :meth:`_priority`."""

    def __init__(self) -> None:
        self.queue = None
        self.facts: InstanceFacts | None = None

    @staticmethod
    def _priority(facts: InstanceFacts, view: ClusterView, job_id: str) -> float:  # pragma: no cover
        raise NotImplementedError

    @classmethod
    def _key(cls, facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:
        return (cls._priority(facts, view, job_id), 1, facts.job(job_id).arrival)  # 1: pending loses ties

    def bind(self, facts: InstanceFacts) -> None:
        self.facts = facts
        self.queue = PendingQueue(facts, self._key)

    def sync(self, view: ClusterView) -> PendingQueue:
        queue, facts = self.queue, self.facts
        assert queue is not None and facts is not None
        _resync(queue, view, lambda job_id: queue.add(job_id, self._key(facts, view, job_id)))
        return queue

    def running_keys(self, view: ClusterView) -> list[tuple[Key, int, str]]:
        facts = self.facts
        assert facts is not None
        return [
            ((self._priority(facts, view, job_id), 0, facts.job(job_id).arrival), 0, job_id) for job_id in view.running
        ]


class SRSFOrdering(_PriorityOrdering):
    """Shortest Remaining Service First: ``p = remaining time alone × GPUs`` (Muri-S)."""

    @staticmethod
    def _priority(facts: InstanceFacts, view: ClusterView, job_id: str) -> float:
        remaining = view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id)
        return srsf_priority(remaining, facts.job(job_id).num_gpus)


class LASOrdering(LasQueues, Ordering):
    """Tiresias' discretised 2D-LAS on attained GPU-time: the bookkeeping of :mod:`heuristics.tiresias`
    (:class:`~heuristics.tiresias.LasQueues`: same queues, demotions, starvation promotion and defaults),
    as an ordering of round-based policies.

    A job enters queue 0 and is demoted to queue ``k+1`` once its attained GPU-seconds since its last
    promotion reach ``thresholds[k]``; queues are served in order and, inside one, running jobs before
    pending ones and pending jobs first come first served (a job joins the back of its queue when it
    arrives, is demoted, promoted or preempted). A pending job whose pending time since its last
    promotion reaches ``promote_knob`` × its executed time since then returns to queue 0.
    """

    def __init__(
        self, thresholds: Sequence[float] = DEFAULT_THRESHOLDS, promote_knob: float = DEFAULT_PROMOTE_KNOB
    ) -> None:
        self.queue = None
        self.facts = None
        super().__init__(thresholds, promote_knob)

    def bind(self, facts: InstanceFacts) -> None:
        self.facts = facts
        self.queue = PendingQueue(facts, lambda f, v, j: (self.level.get(j, 0), 1, self.stamp.get(j, 0)))
        self.reset_queues()

    def sync(self, view: ClusterView) -> PendingQueue:
        queue = self.queue
        assert queue is not None
        _resync(queue, view, lambda job_id: self._enqueue(view, job_id))
        self._demote_running(view)
        self._promote_starved(view, queue)
        return queue

    def started(self, view: ClusterView, job_ids: Iterable[str]) -> None:
        for job_id in job_ids:
            self._count_pending_time(view, job_id)

    def next_change(self, view: ClusterView) -> float:
        return self._next_queue_change(view)


class AttainedOrdering(_PriorityOrdering):
    """Least total attained GPU-seconds first, no queues (Muri's simulator's Muri-L order, issue 19).

    Key ``(attained GPU-seconds, running first, arrival)``. A pending job's attained service does not
    change while it waits, so the pending queue's keys stay valid; running jobs are ranked afresh at
    every plan.
    """

    def __init__(self, larger_first: bool = False) -> None:
        super().__init__()
        #: break ties in attained service by GPU count, larger first (Muri's simulator: its job list is
        #: re-sorted by GPU count, largest first, at every event, and the next event's sort by attained
        #: GPU time is stable, so jobs with equal attained service keep that order)
        self.larger_first = larger_first

    @staticmethod
    def _priority(facts: InstanceFacts, view: ClusterView, job_id: str) -> float:
        return view.attained_service.get(job_id, 0.0)

    def _tie(self, facts: InstanceFacts, job_id: str) -> int:
        return -facts.job(job_id).num_gpus if self.larger_first else 0

    def _key(self, facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:  # type: ignore[override]
        return (self._priority(facts, view, job_id), self._tie(facts, job_id), 1, facts.job(job_id).arrival)

    def running_keys(self, view: ClusterView) -> list[tuple[Key, int, str]]:
        facts = self.facts
        assert facts is not None
        return [
            ((self._priority(facts, view, job_id), self._tie(facts, job_id), 0, facts.job(job_id).arrival), 0, job_id)
            for job_id in view.running
        ]


PRIORITIES: tuple[str, ...] = ("srsf", "las", "attained")


def make_ordering(
    priority: str, thresholds: Sequence[float] = DEFAULT_THRESHOLDS, promote_knob: float = DEFAULT_PROMOTE_KNOB
) -> Ordering:
    """``"srsf"``, ``"las"`` (Tiresias' discretised 2D-LAS) or ``"attained"`` (least total attained
    GPU-seconds first, Muri's simulator's Muri-L)."""
    if priority == "srsf":
        return SRSFOrdering()
    if priority == "las":
        return LASOrdering(thresholds, promote_knob)
    if priority == "attained":
        return AttainedOrdering()
    raise DuettoInputError(f"unknown priority '{priority}'; known: {', '.join(PRIORITIES)}", field="priority")


def merged_order(queue: PendingQueue, running: list[tuple[Key, int, str]]) -> Iterable[tuple[str, bool]]:
    """Running and pending jobs in one priority order, lazily: ``(job_id, is_running)``.

    Pending jobs come from the queue's per-demand buckets without copying them (the queue is not
    changed), so a caller that stops early pays only for what it looked at.
    """
    running = sorted(running)
    buckets = [bucket for bucket in queue.buckets.values() if bucket]
    positions = [0] * len(buckets)
    index = 0
    while True:
        best_bucket = -1
        best: tuple[Key, int, str] | None = None
        for b, bucket in enumerate(buckets):
            position = positions[b]
            if position < len(bucket) and (best is None or bucket[position] < best):
                best, best_bucket = bucket[position], b
        current = running[index] if index < len(running) else None
        if current is None and best is None:
            return
        if current is not None and (best is None or current[:2] <= best[:2]):
            index += 1
            yield current[2], True
        else:
            assert best is not None
            positions[best_bucket] += 1
            yield best[2], False


class RoundBasedPolicy:
    """Common round mechanics of Muri and Tesserae.

    At round boundaries (multiples of ``round_length``; of whole slots in slotted mode) the subclass
    replans everything (:meth:`plan`) — skipped when nothing happened since the last plan and the
    ordering cannot have changed. Between rounds, an arrival or completion starts pending jobs in
    priority order on idle GPUs, alone (``fill_between_rounds``), without preempting anyone.
    """

    preemptive = True
    name = "round-based"

    def __init__(
        self,
        *,
        round_length: float,
        ordering: Ordering,
        fill_between_rounds: bool,
        placement: str,
        replan_on_events: bool = False,
    ) -> None:
        if not (math.isfinite(round_length) and round_length > 0):
            raise DuettoInputError(f"must be > 0, got {round_length!r}", field="round_length")
        self.round_length: float | None = float(round_length)
        self.ordering = ordering
        self.fill_between_rounds = bool(fill_between_rounds)
        # Muri's simulator replans at every arrival and completion, not only at round ticks.
        self.replan_on_events = bool(replan_on_events)
        self.placement = check_placement(placement)
        self.reset()

    # --- per-run state ---------------------------------------------------------------------------
    def reset(self) -> None:
        self.facts: InstanceFacts | None = None
        self._seen_pending: object = None
        self._seen_running = -1
        self._dirty = True
        self._next_change = math.inf
        self._acted = False
        self._need_next_change = False
        self.plans = 0
        self.skipped_rounds = 0
        self.fills = 0

    def _bind(self, view: ClusterView) -> InstanceFacts:
        if self.facts is None or self.facts.instance is not view.instance:
            self.reset()
            self.facts = InstanceFacts(view.instance)
            self.ordering.bind(self.facts)
            self.check_instance(view.instance)
        return self.facts

    def check_instance(self, instance: Instance) -> None:
        """Raise :class:`DuettoInputError` if the policy cannot serve ``instance`` (default: it can)."""

    # --- the loop's hooks --------------------------------------------------------------------------
    def _is_round_tick(self, view: ClusterView) -> bool:
        assert self.round_length is not None
        length = self.round_length
        if view.slot is not None:
            length = max(1, math.ceil(self.round_length / view.slot - 1e-9)) * view.slot
        k = round(view.time / length)
        return k >= 1 and abs(view.time - k * length) <= 1e-9 * max(1.0, abs(view.time))

    def decide(self, view: ClusterView) -> Sequence[Action]:
        facts = self._bind(view)
        events = view.pending is not self._seen_pending or len(view.running) != self._seen_running
        if events:
            self._dirty = True
        actions: list[Action] = []
        if self._is_round_tick(view) or (events and self.replan_on_events):
            if self._dirty or view.time >= self._next_change * (1 - 1e-12):
                self.ordering.sync(view)
                actions = self._apply_target(view, self.plan(view, facts))
                self.plans += 1
                self._dirty = False
                self._next_change = math.inf  # set in next_decision_time, on the view after the actions
                self._need_next_change = True
            else:
                self.skipped_rounds += 1
        elif events and self.fill_between_rounds:
            queue = self.ordering.sync(view)
            actions = self._fill(view, facts, queue)
        self._acted = bool(actions)
        return actions

    def next_decision_time(self, view: ClusterView) -> float | None:
        """Called by the loop after the actions are applied: remember what the cluster looks like (to
        notice arrivals and completions cheaply) and when the ordering may change by itself."""
        if self._acted:
            self.ordering.sync(view)  # preempted jobs join the queue now (their pending time starts now)
        if self._need_next_change:
            self._next_change = self.ordering.next_change(view)
            self._need_next_change = False
        self._seen_pending = view.pending
        self._seen_running = len(view.running)
        return None

    # --- subclass API ------------------------------------------------------------------------------
    def plan(self, view: ClusterView, facts: InstanceFacts) -> dict[str, tuple[tuple[int, ...], int]]:
        """The full plan of a round: ``job_id -> (gpus, steps)`` for every job that should run."""
        raise NotImplementedError  # pragma: no cover

    # --- helpers -------------------------------------------------------------------------------------
    def _fill(self, view: ClusterView, facts: InstanceFacts, queue: PendingQueue) -> list[Action]:
        """Start pending jobs in priority order on idle GPUs, alone, without preempting."""
        scratch = Scratch(view, facts)
        if scratch.free_count == 0 or not len(queue):
            return []
        actions: list[Action] = []
        started: set[str] = set()
        scanned = 0
        for job_id, _ in merged_order(queue, []):
            scanned += 1
            if scanned > 256 or scratch.free_count == 0:  # bounded scan: the next round catches up
                break
            demand = queue.demand(job_id)
            if demand > scratch.free_count:
                continue
            gpus = scratch.pick_free(demand, self.placement)
            if gpus is None:  # pragma: no cover - pick_free only fails when too few GPUs are idle
                continue
            steps = facts.fastest_steps(job_id)
            scratch.place(job_id, gpus, steps)
            actions.append(Start(job_id, tuple(sorted(gpus)), steps))
            started.add(job_id)
        if started:
            self.fills += 1
            self.ordering.started(view, started)
        return actions

    def _apply_target(self, view: ClusterView, target: Mapping[str, tuple[tuple[int, ...], int]]) -> list[Action]:
        """Actions that turn the running set into ``target`` (jobs already right are left alone)."""
        actions: list[Action] = []
        for job_id in view.running:
            running = view.running[job_id]
            wanted = target.get(job_id)
            if wanted is None or tuple(sorted(wanted[0])) != tuple(sorted(running.gpus)) or wanted[1] != running.steps:
                actions.append(Preempt(job_id))
        started = []
        for job_id, (gpus, steps) in target.items():
            current = view.running.get(job_id)
            if current is not None and tuple(sorted(current.gpus)) == tuple(sorted(gpus)) and current.steps == steps:
                continue
            actions.append(Start(job_id, tuple(sorted(gpus)), steps))
            if current is None:
                started.append(job_id)
        if started:
            self.ordering.started(view, started)
        return actions


def _empty_scratch(view: ClusterView, facts: InstanceFacts) -> Scratch:
    """A planning copy of the cluster with every running job taken off."""
    scratch = Scratch(view, facts)
    for job_id in list(scratch.steps):
        scratch.remove(job_id)
    return scratch


def first_fit(free_by_node: list[list[int]], count: int, gpus_per_node: int) -> list[int] | None:
    """Muri's simulator's placement (``switch.py``, MS-YARN): the lowest-numbered node with ``count`` idle
    GPUs; a gang larger than a node takes ``count // gpus_per_node`` wholly idle nodes plus the first other
    node with the remainder. Takes the GPUs out of ``free_by_node`` (lowest ids first); ``None`` (and
    nothing taken) if they do not fit."""
    if count <= gpus_per_node:
        for free in free_by_node:
            if len(free) >= count:
                taken = free[:count]
                del free[:count]
                return taken
        return None
    full = [node for node, free in enumerate(free_by_node) if len(free) == gpus_per_node][: count // gpus_per_node]
    if len(full) < count // gpus_per_node:
        return None
    rest = count % gpus_per_node
    last = None
    if rest:
        last = next((n for n, free in enumerate(free_by_node) if n not in full and len(free) >= rest), None)
        if last is None:
            return None
    taken = [gpu for node in full for gpu in free_by_node[node]]
    for node in full:
        free_by_node[node].clear()
    if last is not None:
        taken += free_by_node[last][:rest]
        del free_by_node[last][:rest]
    return taken


# --- Muri-S / Muri-L --------------------------------------------------------------------------------------


#: ``MuriPolicy(semantics=...)``: duetto's round semantics, the policy side of Muri's own simulator, or
#: whichever the instance's progress rule says (``auto``).
SEMANTICS: tuple[str, ...] = ("auto", "duetto", "muri")


class MuriPolicy(RoundBasedPolicy):
    """Muri-S (SRSF) or Muri-L (2D-LAS): multi-round Blossom grouping of up to ``C`` jobs per GPU set.

    Parameters
    ----------
    priority
        ``"srsf"`` (Muri-S, durations known) or ``"las"`` (Muri-L, Tiresias' discretised 2D-LAS).
    round_length
        Seconds between scheduling rounds (Muri: six minutes).
    max_group_size
        Largest group (``k``); the cluster's capacity ``C`` caps it.
    matching
        ``"auto"``, ``"classes"`` or ``"blossom"`` (see :mod:`heuristics.matching`).
    fill_between_rounds
        Start pending jobs on idle GPUs at arrivals/completions between rounds.
    placement
        ``"consolidated"`` (Muri: descending GPU count, fewest nodes) or ``"hay"``.
    las_thresholds, promote_knob
        Muri-L's queue limits (GPU-seconds) and starvation promotion (as :mod:`heuristics.tiresias`).
    resolution
        Quantisation step of ``γ`` for the integer matching weights.
    semantics
        ``"duetto"``: as above. ``"muri"``: the policy side of Muri's own simulator — replan at every
        arrival and completion (besides the round ticks), Muri-L ranks by total attained GPU-seconds
        (:class:`AttainedOrdering`) instead of 2D-LAS queues, and, on an instance under Muri's progress rule,
        groups are scored by Muri's simulator's group period (``GroupingCache(period_model="muri")``; under
        SPEC's rule by Eq. 3, the period that rule charges). ``"auto"`` (default): ``"muri"`` on an
        instance that uses Muri's progress rule (``Instance.progress``; Muri's simulation traces by default, any Muri
        trace loaded with ``semantics="muri"``: group period stretch and start overheads at events), else
        ``"duetto"``. Under that rule ``"muri"`` also models the rest of Muri's simulator's round: its job
        selection, merge order and rounds, MS-YARN placement, stretched edge weights and Muri-L's ties.
        ``docs/policies-muri-tesserae.md``.
    """

    def __init__(
        self,
        *,
        priority: Literal["srsf", "las"] = "srsf",
        round_length: float = DEFAULT_ROUND_LENGTH,
        max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
        matching: MatchingMethod = "auto",
        fill_between_rounds: bool = True,
        placement: str = "consolidated",
        las_thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
        promote_knob: float = DEFAULT_PROMOTE_KNOB,
        resolution: float = DEFAULT_RESOLUTION,
        semantics: Literal["auto", "duetto", "muri"] = "auto",
    ) -> None:
        if semantics not in SEMANTICS:
            raise DuettoInputError(f"unknown semantics '{semantics}'; known: {', '.join(SEMANTICS)}", field="semantics")
        if not isinstance(max_group_size, int) or max_group_size < 1:
            raise DuettoInputError(f"must be an integer >= 1, got {max_group_size!r}", field="max_group_size")
        if matching not in ("auto", "classes", "blossom"):
            raise DuettoInputError(f"unknown matching '{matching}'; known: auto, classes, blossom", field="matching")
        self.priority = priority
        self.max_group_size = max_group_size
        self.matching: MatchingMethod = matching
        self.resolution = resolution
        self.cache = GroupingCache()  # period model set from the instance in _bind
        self.semantics = semantics
        self._las = (tuple(las_thresholds), promote_knob)
        muri = semantics == "muri"
        #: the semantics in force ("auto" is resolved against each instance when the policy binds to it)
        self.effective_semantics = "muri" if muri else "duetto"
        super().__init__(
            round_length=round_length,
            ordering=make_ordering(
                "attained" if muri and priority == "las" else priority, las_thresholds, promote_knob
            ),
            fill_between_rounds=fill_between_rounds,
            placement=placement,
            replan_on_events=muri,
        )
        base = "muri-s" if priority == "srsf" else "muri-l"
        self.name = base if placement == "consolidated" else f"{base}+{placement}"

    def reset(self) -> None:
        super().reset()
        self.group_sizes: dict[int, int] = {}  # group size -> how many groups were planned
        self.model_gap_max = 1.0  # largest (group period / own) ÷ (largest pairwise ratio) planned
        self.model_gap_sum = 0.0
        self.model_gap_count = 0
        self._stages: dict[str, StageTimes] = {}
        self.sim_side = False  # Muri's simulator's selection, merging and placement (set in _bind)
        self._last_selected: frozenset[str] = frozenset()
        self._last_target: dict[str, tuple[tuple[int, ...], int]] | None = None
        self.reused_plans = 0

    def _bind(self, view: ClusterView) -> InstanceFacts:
        if self.facts is None or self.facts.instance is not view.instance:
            muri_rule = isinstance(view.instance.progress, MuriProgress)
            if self.semantics == "auto":
                # Muri's progress rule comes with Muri's simulator's policy side (docs/policies-muri-tesserae.md).
                wanted = "muri" if muri_rule else "duetto"
                if wanted != self.effective_semantics:
                    self.effective_semantics = wanted
                    las = self.priority == "las"
                    self.ordering = make_ordering("attained" if las and wanted == "muri" else self.priority, *self._las)
                    self.replan_on_events = wanted == "muri"
                    self.facts = None
            # Groups are scored by the period the instance's progress rule charges them: T_M under Muri's
            # rule, Eq. 3 under SPEC's (also with semantics="muri", the authors' policy side on a SPEC instance).
            period_model: Literal["eq3", "muri"] = "muri" if muri_rule and self.effective_semantics == "muri" else "eq3"
            # Under Muri's rule with its policy side, the rest of Muri's simulator's round too: its job selection,
            # merge order and rounds, placement, stretched edge weights and Muri-L's tie order
            # (docs/policies-muri-tesserae.md, rows 5-9).
            sim_side = period_model == "muri"
            progress = view.instance.progress
            stretch = progress.stretch if isinstance(progress, MuriProgress) and sim_side else None
            if period_model != self.cache.period_model or stretch != self.cache.stretch:
                self.cache = GroupingCache(period_model=period_model, stretch=stretch)
                self.facts = None
            if isinstance(self.ordering, AttainedOrdering) and self.ordering.larger_first != sim_side:
                self.ordering = AttainedOrdering(larger_first=sim_side)
                self.facts = None
            facts = super()._bind(view)  # (resets the per-run state when it binds afresh)
            self.sim_side = sim_side
            return facts
        return super()._bind(view)

    def check_instance(self, instance: Instance) -> None:
        """Muri needs every job's per-stage times (``Profile.stage_times``)."""
        missing = missing_stage_profiles(instance)
        if missing:
            users = [job.id for job in instance.jobs if job.profile in set(missing)]
            shown = ", ".join(f"'{name}'" for name in missing[:5]) + (
                f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            )
            raise DuettoInputError(
                f"Muri needs per-stage times (Profile.stage_times: seconds per iteration in each resource "
                f"stage) for every job; {len(users)} of {len(instance.jobs)} jobs use profiles without them: "
                f"{shown}. Load a trace with per-stage profiles (e.g. the Muri traces) or add stage_times.",
                source=f"instance '{instance.name}'",
                field="profiles.stage_times",
            )

    def _stage_times(self, facts: InstanceFacts, job_id: str) -> StageTimes:
        value = self._stages.get(job_id)
        if value is None:
            stages = facts.instance.profiles[facts.job(job_id).profile].stage_times
            assert stages is not None  # check_instance guarantees it
            value = tuple(float(t) for t in stages)
            self._stages[job_id] = value
        return value

    def plan(self, view: ClusterView, facts: InstanceFacts) -> dict[str, tuple[tuple[int, ...], int]]:
        queue = self.ordering.queue
        assert queue is not None
        cluster = view.instance.cluster
        cap = max(1, min(cluster.capacity, self.max_group_size))
        num_gpus = cluster.num_gpus
        # 1. Dequeue in priority order until the jobs fill cap × #GPUs GPU slots (skip what does not fit).
        if self.sim_side:
            selected = self._sim_select(view, facts, cap)
        else:
            budget = cap * num_gpus
            selected = []
            for job_id, _ in merged_order(queue, self.ordering.running_keys(view)):
                demand = facts.job(job_id).num_gpus
                if demand <= budget:
                    selected.append(job_id)
                    budget -= demand
                    if budget == 0:
                        break
        if not selected:
            return {}
        # Same jobs selected and still running where they were put: the plan would not change.
        chosen = frozenset(selected)
        last = self._last_target
        if (
            not self.sim_side  # Muri's simulator's grouping depends on the order, not only the set
            and chosen == self._last_selected
            and last is not None
            and len(view.running) == len(last)
            and all(
                job_id in view.running and tuple(sorted(view.running[job_id].gpus)) == gpus[0]
                for job_id, gpus in last.items()
            )
        ):
            self.reused_plans += 1
            return dict(last)
        # 2. Group: Algorithm 1 per GPU-count bucket, merging only while the plan exceeds the cluster.
        steps = {job_id: facts.fastest_steps(job_id) for job_id in selected}
        items = [
            GroupingItem(
                facts.job(job_id).num_gpus,
                self._stage_times(facts, job_id),
                facts.memory(job_id, steps[job_id]),
                facts.job(job_id).profile,
            )
            for job_id in selected
        ]
        instance = facts.instance
        # Muri's own simulator knows no forbidden pairs; measured tables (Gavel) have them
        self.cache.forbid(instance, partial(_pair_forbidden, instance))
        groups = bucket_grouping(
            items,
            max_group_size=cap,
            gpu_budget=num_gpus,
            memory_limit=cluster.gpu_memory_gib,
            method=self.matching,
            resolution=self.resolution,
            cache=self.cache,
            rounds=cap if self.sim_side else None,
            merge_order="position" if self.sim_side else "waste",
        )
        if self.sim_side:
            placed_fresh = self._sim_place(view, facts, selected, items, groups, steps)
            self._record(selected, items, groups, placed_fresh, chosen)
            return placed_fresh
        # 3. Place: largest GPU count first, then by the best member's priority; keep current GPUs when
        #    the group already runs together there, or a member's GPUs when they are free.
        order = sorted(groups, key=lambda g: (-items[g[0]].num_gpus, g[0]))
        scratch = _empty_scratch(view, facts)
        target: dict[str, tuple[tuple[int, ...], int]] = {}
        current = {job_id: tuple(sorted(view.running[job_id].gpus)) for job_id in view.running}
        placed: set[int] = set()
        for index, group in enumerate(order):  # pass 1: groups already running together
            members = [selected[i] for i in group]
            sets = {current.get(job_id) for job_id in members}
            if len(sets) == 1 and None not in sets:
                gpus = sets.pop()
                assert gpus is not None
                if all(not scratch.occ[g] for g in gpus):
                    self._place_group(scratch, target, members, gpus, steps)
                    placed.add(index)
        for index, group in enumerate(order):  # pass 2: the others
            if index in placed:
                continue
            members = [selected[i] for i in group]
            demand = items[group[0]].num_gpus
            gpus_choice: tuple[int, ...] | None = None
            for job_id in members:
                mine = current.get(job_id)
                if mine is not None and all(not scratch.occ[g] for g in mine):
                    gpus_choice = mine
                    break
            if gpus_choice is None:
                picked = scratch.pick_free(demand, self.placement)
                if picked is None:
                    continue  # does not fit this round (fragmentation): its jobs wait
                gpus_choice = tuple(sorted(picked))
            self._place_group(scratch, target, members, gpus_choice, steps)
        self._record(selected, items, groups, target, chosen)
        return target

    def _record(
        self,
        selected: list[str],
        items: list[GroupingItem],
        groups: list[tuple[int, ...]],
        target: dict[str, tuple[tuple[int, ...], int]],
        chosen: frozenset[str],
    ) -> None:
        self._last_selected = chosen
        self._last_target = dict(target)
        for group in groups:
            size = len(group)
            if all(selected[i] in target for i in group):
                self.group_sizes[size] = self.group_sizes.get(size, 0) + 1
                if size > 2:
                    gap = self.cache.model_gap(items[i].stage_times for i in group)
                    self.model_gap_max = max(self.model_gap_max, gap)
                    self.model_gap_sum += gap
                    self.model_gap_count += 1

    def _sim_select(self, view: ClusterView, facts: InstanceFacts, cap: int) -> list[str]:
        """Muri's simulator's job selection (``run_sim.py``, ``multi_resource_blossom_same_sim_jobs``).

        In priority order, a job not yet taken reserves one copy of its GPU count on an otherwise empty
        cluster (:func:`first_fit`); if that fits, the next ``cap`` jobs of its GPU-count bucket (in
        priority order, itself first) are taken. Returns the taken jobs in priority order.
        """
        queue = self.ordering.queue
        assert queue is not None
        order = [job_id for job_id, _ in merged_order(queue, self.ordering.running_keys(view))]
        cluster = view.instance.cluster
        gpn = cluster.gpus_per_node
        free = [list(range(node * gpn, (node + 1) * gpn)) for node in range(cluster.nodes)]
        buckets: dict[int, list[str]] = {}
        for job_id in order:
            buckets.setdefault(facts.job(job_id).num_gpus, []).append(job_id)
        taken_upto = dict.fromkeys(buckets, 0)
        taken: set[str] = set()
        for job_id in order:
            if job_id in taken:
                continue
            demand = facts.job(job_id).num_gpus
            if first_fit(free, demand, gpn) is None:
                continue
            start = taken_upto[demand]
            taken.update(buckets[demand][start : start + cap])
            taken_upto[demand] = start + cap
        return [job_id for job_id in order if job_id in taken]

    def _sim_place(
        self,
        view: ClusterView,
        facts: InstanceFacts,
        selected: list[str],
        items: list[GroupingItem],
        groups: list[tuple[int, ...]],
        steps: Mapping[str, int],
    ) -> dict[str, tuple[tuple[int, ...], int]]:
        """Muri's simulator's placement: every group afresh on an empty cluster, largest GPU count first,
        then by its best member's priority, by :func:`first_fit`; a group that does not fit waits."""
        scratch = _empty_scratch(view, facts)
        gpn = view.instance.cluster.gpus_per_node
        target: dict[str, tuple[tuple[int, ...], int]] = {}
        for group in sorted(groups, key=lambda g: (-items[g[0]].num_gpus, g[0])):
            picked = first_fit(scratch.free_by_node, items[group[0]].num_gpus, gpn)
            if picked is None:
                continue
            # first_fit took them out of the free lists; place() expects them there
            for gpu in picked:
                scratch.free_by_node[gpu // gpn].append(gpu)
            for node_free in scratch.free_by_node:
                node_free.sort()
            gpus = tuple(sorted(picked))
            self._place_group(scratch, target, [selected[i] for i in group], gpus, steps)
        return target

    @staticmethod
    def _place_group(
        scratch: Scratch,
        target: dict[str, tuple[tuple[int, ...], int]],
        members: list[str],
        gpus: tuple[int, ...],
        steps: Mapping[str, int],
    ) -> None:
        for job_id in members:
            scratch.place(job_id, list(gpus), steps[job_id])
            target[job_id] = (gpus, steps[job_id])


def _muri_factory(priority: Literal["srsf", "las"]) -> Any:
    def factory(**options: Any) -> MuriPolicy:
        return MuriPolicy(priority=priority, **options)

    return factory


register_policy(
    "muri-s",
    _muri_factory("srsf"),
    "Muri-S: SRSF priority, multi-round Blossom grouping of up to min(C, 4) same-size jobs by interleaving "
    "efficiency, 6-min rounds (Muri SIGCOMM'22 §4, Algorithm 1)",
)
register_policy(
    "muri-l",
    _muri_factory("las"),
    "Muri-L: discretised 2D-LAS priority, multi-round Blossom grouping of up to min(C, 4) same-size jobs, "
    "6-min rounds (Muri SIGCOMM'22 §4, Algorithm 1)",
)

__all__ = [
    "DEFAULT_MAX_GROUP_SIZE",
    "DEFAULT_ROUND_LENGTH",
    "PRIORITIES",
    "SEMANTICS",
    "AttainedOrdering",
    "GroupingCache",
    "GroupingItem",
    "GroupingStats",
    "LASOrdering",
    "MuriPolicy",
    "Ordering",
    "RoundBasedPolicy",
    "SRSFOrdering",
    "bucket_grouping",
    "first_fit",
    "group_efficiency",
    "group_model_gap",
    "group_offsets",
    "group_period",
    "group_slowdowns",
    "grouping_rounds",
    "las_priority",
    "make_ordering",
    "merged_order",
    "missing_stage_profiles",
    "multi_round_grouping",
    "muri_sim_efficiency",
    "srsf_priority",
]
