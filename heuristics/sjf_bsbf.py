"""SJF-BSBF and SJF-FFS (Castor journal §5 = SJF-BSBF IWQoS'24 §V; baseline SJF-FFS: §VI-A4).

Pure pieces, usable and tested on their own:

:func:`theorem1_share`
    Theorem 1 (Castor §5.1): for a running job A and a new job B put on A's GPUs at insertion time κ,
    the average JCT of the pair is piecewise linear in κ and smallest at an end point: κ = 0 (share now,
    fully overlapped) or κ = t_A·i_A (wait, sequential). So compare the two.
:func:`pair_completion_times`
    Completion times of the pair for any κ (what Theorem 1 minimises; used by the tests' brute force).
:func:`best_sub_batch`
    Algorithm 2: try B's sub-batch sizes ``B, B/2, ..., 1`` (gradient accumulation keeps convergence),
    keep those whose memory fits next to A, and take the configuration with the best Theorem 1 JCT.

:class:`SJFBSBFPolicy` is Algorithm 1 (``sharing="bsbf"``) or SJF-FFS (``sharing="ffs"``): non-preemptive,
pending jobs in increasing ``L_k`` (remaining time alone); a job takes idle GPUs if enough are idle
(consolidated, lines 6-7); otherwise it may share GPUs that hold exactly one job (lines 9-17).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from formulation.errors import DuettoInputError
from heuristics.baselines import PendingQueue, key_sjf
from heuristics.core import Action, ClusterView, Start
from heuristics.placement import InstanceFacts, Scratch, check_placement
from heuristics.registry import register_policy

# --- Theorem 1 ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PairDecision:
    """Theorem 1's verdict for a pair (running A, new B).

    Attributes
    ----------
    share
        ``True``: start B now next to A (κ = 0); ``False``: B should wait for A (κ = t_A·i_A).
    avg_jct
        Average completion time of the pair (from now) under the chosen option.
    overlap_avg, sequential_avg
        Average completion time of the two options.
    """

    share: bool
    avg_jct: float
    overlap_avg: float
    sequential_avg: float


TIE_TOLERANCE = 1e-9
"""Relative margin by which sharing must beat waiting in :func:`theorem1_share`. Options that tie
exactly in real arithmetic differ by rounding only (a few units in the last place), and the rounding
moves with the CPU's BLAS kernels (the Pollux fits: docs/results.md); within this margin, the pair
waits. Real differences are far larger (a second's difference on an hour's JCT is 3·10⁻⁴)."""


def pair_completion_times(
    t_a: float,
    i_a: float,
    xi_a: float,
    t_b: float,
    i_b: float,
    xi_b: float,
    kappa: float,
    *,
    t_b_alone: float | None = None,
) -> tuple[float, float]:
    """Completion times ``(T_A, T_B)`` (from now) when B is inserted at ``kappa`` on A's GPUs.

    A runs alone at ``t_a`` s/iteration until ``kappa`` (at most its remaining time ``t_a·i_a``), then
    both run at ``t·ξ`` until one finishes; the survivor finishes alone. ``kappa >= t_a·i_a`` is the
    sequential schedule, where B runs alone at ``t_b_alone`` (default ``t_b``).

    Parameters
    ----------
    t_a, i_a, xi_a
        A's iteration time alone, remaining iterations and ratio ξ_{A|B}.
    t_b, i_b, xi_b
        B's iteration time alone (in the mode it shares with), iterations and ratio ξ_{B|A}.
    kappa
        Insertion time of B, seconds from now.
    """
    alone_a = t_a * i_a
    if kappa >= alone_a:
        return alone_a, alone_a + (t_b if t_b_alone is None else t_b_alone) * i_b
    kappa = max(0.0, kappa)
    left_a = alone_a - kappa  # A's remaining time alone at κ
    shared_a = xi_a * left_a
    shared_b = xi_b * t_b * i_b
    if shared_a <= shared_b:
        finish_a = kappa + shared_a
        # B did shared_a / ξ_B seconds' worth of its alone time while sharing.
        return finish_a, finish_a + t_b * i_b - shared_a / xi_b
    finish_b = kappa + shared_b
    return finish_b + left_a - shared_b / xi_a, finish_b


def theorem1_share(
    t_a: float,
    i_a: float,
    xi_a: float,
    t_b: float,
    i_b: float,
    xi_b: float,
    *,
    t_b_alone: float | None = None,
) -> PairDecision:
    """Theorem 1 (Castor §5.1, Eq. 14-23): share now or wait, for running A and new B.

    Compares the fully overlapped schedule (κ = 0) with the sequential one (κ = t_A·i_A); by Theorem 1
    no other insertion time gives a smaller average JCT of the pair. Ties mean "wait" (sharing gains
    nothing and costs interference), within :data:`TIE_TOLERANCE`: with ``ξ_A = ξ_B = 1.5`` (the Pollux
    loader's default) every pair in which A would finish first is an exact tie, and a plain ``<`` let
    the last bits of the iteration times decide it.

    Parameters
    ----------
    t_a, i_a, xi_a
        Running job: iteration time alone, *remaining* iterations, ξ_{A|B}.
    t_b, i_b, xi_b
        New job: iteration time alone in the mode it would share with, iterations, ξ_{B|A}.
    t_b_alone
        B's iteration time when it runs alone after A (default ``t_b``): waiting lets B use its
        fastest mode even if sharing would need a smaller sub-batch.
    """
    t_overlap_a, t_overlap_b = pair_completion_times(t_a, i_a, xi_a, t_b, i_b, xi_b, 0.0)
    alone_a = t_a * i_a
    sequential = alone_a + 0.5 * (t_b if t_b_alone is None else t_b_alone) * i_b
    overlap = 0.5 * (t_overlap_a + t_overlap_b)
    share = overlap < sequential - TIE_TOLERANCE * abs(sequential)
    return PairDecision(share, overlap if share else sequential, overlap, sequential)


# --- Algorithm 2 -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModeOption:
    """One sub-batch choice of the new job: ``steps`` accumulation steps of ``sub_batch`` samples."""

    steps: int
    sub_batch: int
    iteration_time: float
    memory_gib: float


@dataclass(frozen=True, slots=True)
class SubBatchChoice:
    """Algorithm 2's output: share flag ``SF``, sub-batch ``b̄`` (and steps), and JCT ``t̄``."""

    share: bool
    sub_batch: int
    steps: int
    avg_jct: float


def best_sub_batch(
    batch_size: int,
    options: Sequence[ModeOption],
    memory_budget: float,
    *,
    t_a: float,
    i_a: float,
    xi_a: float,
    xi_b: float,
    i_b: float,
    t_b_alone: float,
) -> SubBatchChoice | None:
    """Algorithm 2 (Castor §5.2.3): the sub-batch of the new job B that gives the best pair JCT.

    Tries ``b = B, B/2, B/4, ..., 1`` (the sizes the profile supports, ``options``); a size whose memory
    exceeds ``memory_budget`` (GPU memory left next to A) is skipped; each remaining size is scored
    with Theorem 1 and the best is kept (``t_share <= t̄`` as printed, so a tie goes to the smaller
    sub-batch).

    Returns ``None`` when no sub-batch fits next to A.
    """
    by_sub_batch = {option.sub_batch: option for option in options}
    best: SubBatchChoice | None = None
    best_t = math.inf
    b = batch_size
    # NOTE: the printed Algorithm 2 has its ``return`` inside the while loop (it would return after the
    # first size). The evident intent, implemented here, is to try every size and return afterwards.
    while b >= 1:
        option = by_sub_batch.get(b)
        if option is not None and option.memory_gib <= memory_budget + 1e-9:
            decision = theorem1_share(t_a, i_a, xi_a, option.iteration_time, i_b, xi_b, t_b_alone=t_b_alone)
            if decision.avg_jct <= best_t:
                best_t = decision.avg_jct
                best = SubBatchChoice(decision.share, option.sub_batch, option.steps, decision.avg_jct)
        if b == 1 or b % 2:
            break
        b //= 2
    return best


# --- Algorithm 1 / SJF-FFS ----------------------------------------------------------------------------


class SJFBSBFPolicy:
    """SJF-BSBF (Algorithm 1) or SJF-FFS, non-preemptive, up to two jobs per GPU.

    Parameters
    ----------
    sharing
        ``"bsbf"``: Algorithm 1 with Theorem 1 / Algorithm 2 (share only where it pays, candidates by
        pair JCT). ``"ffs"``: first-fit sharing: the GPUs holding one job that the new job fits on
        (memory, allowed pair), in GPU order, no benefit test.
    placement
        Placement of idle GPUs: ``"consolidated"`` or ``"hay"`` (for FFS, ``"hay"`` also orders the
        shared GPUs: Hay's activated GPUs with the most room first, on the highest-score node).
    """

    preemptive = False
    round_length: float | None = None

    def __init__(self, *, sharing: str = "bsbf", placement: str = "consolidated") -> None:
        if sharing not in ("bsbf", "ffs"):
            raise DuettoInputError(f"must be 'bsbf' or 'ffs', got {sharing!r}", field="sharing")
        self.sharing = sharing
        self.placement = check_placement(placement)
        base = "sjf-bsbf" if sharing == "bsbf" else "sjf-ffs"
        self.name = base if placement == "consolidated" else f"{base}+{placement}"
        self.reset()

    def reset(self) -> None:
        self.facts: InstanceFacts | None = None
        self.queue: PendingQueue | None = None
        self._options: dict[str, tuple[ModeOption, ...]] = {}
        self._titer: dict[tuple[str, int, int], float] = {}
        self.declined = 0  # pairs Theorem 1 turned down (for reports and tests)
        self.shared_starts = 0

    # --- helpers -----------------------------------------------------------------------------------
    def _bind(self, view: ClusterView) -> tuple[InstanceFacts, PendingQueue]:
        if self.facts is None or self.facts.instance is not view.instance or self.queue is None:
            self.reset()
            self.facts = InstanceFacts(view.instance)
            self.queue = PendingQueue(self.facts, key_sjf)
        self.queue.sync(view)
        return self.facts, self.queue

    def options(self, job_id: str) -> tuple[ModeOption, ...]:
        cached = self._options.get(job_id)
        if cached is None:
            assert self.facts is not None
            cached = tuple(
                ModeOption(mode.steps, mode.sub_batch, mode.iteration_time, mode.memory_gib)
                for mode in self.facts.modes(job_id)
            )
            self._options[job_id] = cached
        return cached

    def _iteration_time(self, job_id: str, steps: int, gpus: Sequence[int], gpus_per_node: int) -> float:
        nodes = len({g // gpus_per_node for g in gpus})
        key = (job_id, steps, nodes)
        value = self._titer.get(key)
        if value is None:
            assert self.facts is not None
            value = self.facts.instance.iteration_time(job_id, steps, nodes)
            self._titer[key] = value
        return value

    def _fastest_fitting(self, job_id: str, budget: float) -> ModeOption | None:
        for option in self.options(job_id):  # fastest first
            if option.memory_gib <= budget + 1e-9:
                return option
        return None

    # --- the policy ---------------------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Sequence[Action]:
        facts, queue = self._bind(view)
        if not len(queue):
            return []
        capacity = view.instance.cluster.capacity
        occupancy = view.occupancy if view.occupancy is not None else list(view.gpu_occupants().values())
        free = sum(1 for jobs in occupancy if not jobs)
        single = sum(1 for jobs in occupancy if len(jobs) == 1) if capacity >= 2 else 0
        if free + single == 0:
            return []
        scratch = Scratch(view, facts)
        actions: list[Action] = []
        planned: set[str] = set()
        for _, _, job_id in queue.ordered(max_demand=free + single):
            if free + single == 0:
                break
            demand = queue.demand(job_id)
            if demand > free + single:
                continue
            if demand <= free:
                gpus = scratch.pick_free(demand, self.placement)
                assert gpus is not None
                steps = facts.fastest_steps(job_id)
            else:
                placed = (
                    self._share_bsbf(view, scratch, job_id, demand, planned)
                    if self.sharing == "bsbf"
                    else self._share_ffs(scratch, job_id, demand)
                )
                if placed is None:
                    continue
                gpus, steps = placed
                self.shared_starts += 1
            scratch.place(job_id, gpus, steps)
            planned.add(job_id)
            queue.discard(job_id)
            actions.append(Start(job_id, tuple(sorted(gpus)), steps))
            free = scratch.free_count
            single = sum(1 for jobs in scratch.occ if len(jobs) == 1) if capacity >= 2 else 0
        return actions

    def _share_bsbf(
        self, view: ClusterView, scratch: Scratch, job_id: str, demand: int, planned: set[str]
    ) -> tuple[list[int], int] | None:
        """Algorithm 1, lines 9-17, for job B = ``job_id``."""
        facts = self.facts
        assert facts is not None
        gpus_per_node = scratch.gpus_per_node
        options = self.options(job_id)
        i_b = view.remaining_iterations(job_id)
        t_b_alone = options[0].iteration_time
        batch = facts.job(job_id).batch_size
        candidates: list[tuple[float, int, str, list[int], int]] = []
        for order, (other, gpus) in enumerate(scratch.single_occupied().items()):
            xi_a = facts.ratio(other, job_id)
            xi_b = facts.ratio(job_id, other)
            if xi_a is None or xi_b is None:
                continue
            steps_a = scratch.steps[other]
            t_a = self._iteration_time(other, steps_a, scratch.gpus_of[other], gpus_per_node)
            i_a = facts.job(other).iterations if other in planned else view.remaining_iterations(other)
            choice = best_sub_batch(
                batch,
                options,
                scratch.memory_budget(gpus),
                t_a=t_a,
                i_a=i_a,
                xi_a=xi_a,
                xi_b=xi_b,
                i_b=i_b,
                t_b_alone=t_b_alone,
            )
            if choice is None or not choice.share:
                self.declined += 1
                continue
            candidates.append((choice.avg_jct, order, other, gpus, choice.steps))
        if not candidates:
            return None
        candidates.sort()  # line 14: by the pair's JCT
        chosen: list[int] = []
        steps_seen: list[int] = []
        for _, _, _, gpus, steps in candidates:  # lines 15-17
            take = gpus[: demand - len(chosen)]
            chosen.extend(take)
            steps_seen.append(steps)
            if len(chosen) == demand:
                break
        if len(chosen) < demand:
            # Shared GPUs first; idle GPUs only complete the gang ("we do not pick the free GPUs first").
            near = {g // gpus_per_node for g in chosen}
            extra = scratch.pick_free(demand - len(chosen), self.placement, near=near)
            if extra is None:
                return None
            chosen.extend(extra)
        if len(steps_seen) == 1:
            steps = steps_seen[0]
        else:  # several partners: the fastest sub-batch that fits next to every one of them
            option = self._fastest_fitting(job_id, scratch.memory_budget(chosen))
            if option is None:
                return None
            steps = option.steps
        return chosen, steps

    def _share_ffs(self, scratch: Scratch, job_id: str, demand: int) -> tuple[list[int], int] | None:
        """SJF-FFS: GPUs holding one job, first fit (GPU order), then idle GPUs; no benefit test."""
        options = self.options(job_id)
        smallest = min(options, key=lambda o: o.memory_gib)
        if self.placement == "hay":
            chosen = scratch.hay_pick(demand, job_id, smallest.steps, share=True)
            if chosen is None:
                return None
        else:
            chosen = []
            for gpu, jobs in enumerate(scratch.occ):
                if len(jobs) == 1 and scratch.can_join(gpu, job_id, smallest.steps):
                    chosen.append(gpu)
                    if len(chosen) == demand:
                        break
            if len(chosen) < demand:
                near = {g // scratch.gpus_per_node for g in chosen}
                extra = scratch.pick_free(demand - len(chosen), "consolidated", near=near)
                if extra is None:
                    return None
                chosen.extend(extra)
        option = self._fastest_fitting(job_id, scratch.memory_budget(chosen))
        if option is None:
            return None
        return chosen, option.steps


register_policy(
    "sjf-bsbf",
    lambda **options: SJFBSBFPolicy(sharing="bsbf", **options),
    "SJF with Best Sharing Benefit First: share a GPU only where Theorem 1 says it beats waiting, "
    "sub-batch by Algorithm 2 (Castor §5 / SJF-BSBF IWQoS'24 §V, Algorithms 1-2)",
)
register_policy(
    "sjf-ffs",
    lambda **options: SJFBSBFPolicy(sharing="ffs", **options),
    "SJF with First-Fit Sharing: a job that finds too few idle GPUs shares single-job GPUs first-fit, "
    "no benefit test (SJF-BSBF IWQoS'24 §VI-A4)",
)
