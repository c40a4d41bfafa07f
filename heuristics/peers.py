"""The peers' baselines that Muri compares against and releases results for: SRTF and Themis.

- **SRTF** (``srtf``): Shortest Remaining Time First — preemptive, priority = the job's remaining time
  alone ``r_j`` (remaining iterations × fastest alone iteration time), *not* multiplied by its GPUs
  (that is SRSF). Muri §5 ("SRTF"; its simulator's ``shortest`` scheme, ``run_sim.py``
  ``shortest_first_sim_jobs``): at every arrival and completion all jobs are ranked and taken greedily
  while they fit (a job that does not fit is skipped), running jobs not taken are preempted.
- **Themis** (``themis``): finish-time fairness (Mahajan et al., NSDI'20, §3): a job's
  ``ρ = T_sh / T_id``, its finish time in the shared cluster over its finish time in a cluster of its
  own 1/N share (N = jobs contending now). Themis gives resources to the jobs with the *largest* ρ
  (the worst off), for a lease; here (docs/policies.md, "Themis"):

  * ``T_id = iso_j + r_j / s_j``: ``s_j = min(1, num_gpus / (N · G_j))`` is the speed a job gets
    from an equal 1/N split of the GPUs (a gang with fewer GPUs than it asks for time-shares them);
    ``iso_j`` accumulates, decision by decision, the time the progress it actually made would have
    taken at the share of that interval (as Muri's Themis does with ``cumulative_isolated_time``);
  * ``T_sh = (now − a_j) + r_j``: the finish time if the job holds its GPUs from now on (the best
    finish it can still get: for a pending job the estimate under its current allocation, zero, is
    infinite for everyone and ranks nothing);
  * leases: every ``lease`` seconds (default 360 s, the interval of Muri's Themis simulation) all
    jobs are re-ranked by ρ and taken greedily while they fit, preempting running jobs not taken;
    between lease boundaries an arrival or completion only fills idle GPUs with the pending jobs of
    largest ρ (a lease is not broken early).

Both run every job alone on its GPUs in its fastest accumulation mode (no sharing), placement
consolidated (or Hay with ``+hay``), as the other exclusive baselines (:mod:`heuristics.baselines`).
Themis' auction (partial allocations, hidden valuations) is not modelled: with one GPU type and
jobs that report their progress honestly, its outcome is the fairness ranking.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from formulation.errors import DuettoInputError
from heuristics.baselines import Key, PendingQueue, plan_by_priority, preempt_and_start
from heuristics.core import Action, ClusterView, Start
from heuristics.placement import InstanceFacts, Scratch, check_placement
from heuristics.registry import register_policy

#: Muri's Themis simulation (``run_sim.py``, ``themis_sim_jobs``: ``job_interval = 360``), also the
#: six-minute round of Muri and Tesserae.
DEFAULT_LEASE = 360.0


class SRTFPolicy:
    """Shortest Remaining Time First (module docstring): preemptive, exclusive GPUs.

    Parameters
    ----------
    placement
        ``"consolidated"`` or ``"hay"``.
    """

    preemptive = True
    round_length: float | None = None

    def __init__(self, *, placement: str = "consolidated") -> None:
        self.placement = check_placement(placement)
        self.name = "srtf" if placement == "consolidated" else f"srtf+{placement}"
        self.reset()

    def reset(self) -> None:
        self.facts: InstanceFacts | None = None
        self.queue: PendingQueue | None = None

    @staticmethod
    def _remaining(facts: InstanceFacts, view: ClusterView, job_id: str) -> float:
        return view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id)

    @classmethod
    def _pending_key(cls, facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:
        # a pending job's remaining time does not change while it waits: its key stays valid
        return (cls._remaining(facts, view, job_id), 1, facts.job(job_id).arrival)  # 1: loses ties to running

    def decide(self, view: ClusterView) -> Sequence[Action]:
        if self.facts is None or self.facts.instance is not view.instance or self.queue is None:
            self.facts = InstanceFacts(view.instance)
            self.queue = PendingQueue(self.facts, self._pending_key)
        facts, queue = self.facts, self.queue
        queue.sync(view)
        if not len(queue):
            return []
        running = [
            ((self._remaining(facts, view, job_id), 0, facts.job(job_id).arrival), 0, job_id) for job_id in view.running
        ]
        preempt, start = plan_by_priority(queue, running, view.instance.cluster.num_gpus)
        if not start:
            return []
        return preempt_and_start(view, facts, queue, preempt, start, self.placement)


def _unused_key(facts: InstanceFacts, view: ClusterView, job_id: str) -> Key:  # pragma: no cover
    raise AssertionError("Themis adds pending jobs with explicit keys")


class ThemisPolicy:
    """Themis finish-time fairness with leases (module docstring), exclusive GPUs.

    Parameters
    ----------
    lease
        Seconds between full re-rankings (preemptions happen only then).
    placement
        ``"consolidated"`` or ``"hay"``.
    """

    preemptive = True
    round_length: float | None = None

    def __init__(self, *, lease: float = DEFAULT_LEASE, placement: str = "consolidated") -> None:
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not lease > 0 or not math.isfinite(lease):
            raise DuettoInputError(f"must be a number > 0, got {lease!r}", field="lease")
        self.lease = float(lease)
        self.placement = check_placement(placement)
        self.name = "themis" if placement == "consolidated" else f"themis+{placement}"
        self.reset()

    def reset(self) -> None:
        self.facts: InstanceFacts | None = None
        self.isolated: dict[str, float] = {}  # iso_j: fair-share time of the progress made so far
        self.last_progress: dict[str, float] = {}
        self.last_share: dict[str, float] = {}
        self.next_lease = 0.0
        self.rho: dict[str, float] = {}

    # --- finish-time fairness -----------------------------------------------------------------------
    def _update(self, view: ClusterView, facts: InstanceFacts, active: list[str]) -> None:
        """Account the progress since the last decision at the share of that interval, then compute ρ."""
        num_gpus = view.instance.cluster.num_gpus
        share_now = num_gpus / max(len(active), 1)
        for job_id in active:
            progress = view.progress.get(job_id, 0.0)
            done = progress - self.last_progress.get(job_id, 0.0)
            if done > 0 and job_id in self.last_share:
                self.isolated[job_id] = (
                    self.isolated.get(job_id, 0.0) + done * facts.alone_iteration_time(job_id) / self.last_share[job_id]
                )
            self.last_progress[job_id] = progress
            share = min(1.0, share_now / facts.job(job_id).num_gpus)
            self.last_share[job_id] = share
            remaining = view.remaining_iterations(job_id) * facts.alone_iteration_time(job_id)
            t_id = self.isolated.get(job_id, 0.0) + remaining / share
            t_sh = view.time - facts.job(job_id).arrival + remaining
            self.rho[job_id] = t_sh / t_id if t_id > 0 else math.inf

    def _key(self, facts: InstanceFacts, job_id: str, running: bool) -> Key:
        # largest ρ first; ties: running keeps its GPUs, then arrival order
        return (-self.rho[job_id], 0 if running else 1, facts.job(job_id).arrival)

    def decide(self, view: ClusterView) -> Sequence[Action]:
        if self.facts is None or self.facts.instance is not view.instance:
            self.reset()
            self.facts = InstanceFacts(view.instance)
        facts = self.facts
        active = [*view.running, *view.pending]
        self._update(view, facts, active)
        for job_id in [j for j in self.rho if j not in active]:  # completed: forget
            for table in (self.rho, self.isolated, self.last_progress, self.last_share):
                table.pop(job_id, None)
        if not view.pending:
            return []
        queue = PendingQueue(facts, _unused_key)
        for job_id in view.pending:
            queue.add(job_id, self._key(facts, job_id, running=False))
        if view.time >= self.next_lease - 1e-9:
            self.next_lease = view.time + self.lease
            running = [(self._key(facts, job_id, running=True), 0, job_id) for job_id in view.running]
            preempt, start = plan_by_priority(queue, running, view.instance.cluster.num_gpus)
            if not start:
                return []
            return preempt_and_start(view, facts, queue, preempt, start, self.placement)
        return self._fill_idle(view, facts, queue)

    def _fill_idle(self, view: ClusterView, facts: InstanceFacts, queue: PendingQueue) -> list[Action]:
        """Between leases: idle GPUs go to the pending jobs of largest ρ that fit (no preemption)."""
        scratch = Scratch(view, facts)
        actions: list[Action] = []
        head = queue.best_fitting(scratch.free_count)
        while head is not None:
            job_id = head[2]
            gpus = scratch.pick_free(queue.demand(job_id), self.placement)
            if gpus is None:  # pragma: no cover - best_fitting only returns jobs that fit
                break
            steps = facts.fastest_steps(job_id)
            scratch.place(job_id, gpus, steps)
            queue.discard(job_id)
            actions.append(Start(job_id, tuple(gpus), steps))
            head = queue.best_fitting(scratch.free_count) if scratch.free_count else None
        return actions

    def next_decision_time(self, view: ClusterView) -> float | None:
        """The next lease boundary while jobs wait (a re-ranking may preempt then)."""
        return self.next_lease if view.pending else None


register_policy(
    "srtf",
    lambda placement="consolidated": SRTFPolicy(placement=placement),
    "Shortest Remaining Time First (remaining time alone, not × GPUs), exclusive, preemptive at every event "
    "(Muri §5 baseline; its simulator's 'shortest')",
)
register_policy(
    "themis",
    lambda lease=DEFAULT_LEASE, placement="consolidated": ThemisPolicy(lease=lease, placement=placement),
    "Themis finish-time fairness: largest rho = T_shared/T_fair-share first, re-ranked every 360-s lease, "
    "exclusive, preemptive at lease boundaries (Themis NSDI'20 §3; Muri §5 baseline)",
)
