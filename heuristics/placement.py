"""Placement: which GPUs a job gets, for any policy.

Two strategies, selected by a policy's ``placement`` option:

``"consolidated"`` (default)
    SJF-BSBF Algorithm 1, lines 6-7 ("select the top-G GPUs in G_free to make them as consolidated on
    the nodes as possible"): if one node has enough free GPUs, the fullest such node (best fit, which
    keeps large holes for large gangs); otherwise whole nodes with the most free GPUs first, so the gang
    spans as few nodes as possible (fewer nodes = less inter-node communication in Eq. 2-3).

``"hay"``
    Hay (Huang et al., "Hay: two-level GPU-sharing scheduling for Ray"), §III-A and §III-B: every node
    has a busyness score (Eq. 1) ``Score = (W_f·G_frag + W_e·G_entire) / G_total`` and the job goes to
    the node with the highest score (the most idle one), which balances load across nodes. Inside a
    node every GPU is in one of Hay's states: *deactivated* (idle, kept for whole-GPU requests),
    *activated* (holds jobs and has room left: a free capacity slot and memory) or *unavailable* (full).
    A request that may share takes activated GPUs first, the one with the most remaining resource
    first, and activates deactivated GPUs only when the activated ones do not suffice; an exclusive
    request takes deactivated GPUs only.

    Choices where the paper is vague (also in docs/policies.md): the paper places fractional tasks on
    one node; a gang here first looks for the highest-score node that can host all of it and otherwise
    takes nodes in decreasing score order. ``G_frag`` is the sum over activated GPUs of their remaining
    fraction (free memory / GPU memory, 0 once ``C`` jobs are on it); ``G_entire`` the number of idle
    GPUs; ``W_f = 0.5``, ``W_e = 1`` (Hay gives no values; idle GPUs count more than fragments).

:class:`Scratch` is a mutable copy of the occupancy that a policy plans on within one decision (the
view does not change until the loop applies the actions). :class:`InstanceFacts` caches per-job facts
(memory per mode, ratios by profile pair, modes) that policies look up in their hot loops.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job, JobMode
from heuristics.core import ClusterView

PlacementName = Literal["consolidated", "hay"]
PLACEMENTS: tuple[str, ...] = ("consolidated", "hay")

#: Hay Eq. 1 weights (the paper gives none): idle GPUs count twice a fragment's remaining fraction.
HAY_WEIGHT_FRAGMENT = 0.5
HAY_WEIGHT_ENTIRE = 1.0
_MEMORY_SLACK = 1e-9


def check_placement(placement: str) -> str:
    """Return ``placement`` if known, else raise :class:`DuettoInputError` naming the known ones."""
    if placement not in PLACEMENTS:
        raise DuettoInputError(f"unknown placement '{placement}'; known: {', '.join(PLACEMENTS)}", field="placement")
    return placement


class InstanceFacts:
    """Cached per-job look-ups for policies (the instance is immutable)."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.cluster = instance.cluster
        self._memory: dict[tuple[str, int], float] = {}
        self._ratio: dict[tuple[str, str], float | None] = {}
        self._profile_of = {job.id: job.profile for job in instance.jobs}
        self._duration: dict[str, float] = {}

    def job(self, job_id: str) -> Job:
        return self.instance.job_index[job_id]

    def modes(self, job_id: str) -> tuple[JobMode, ...]:
        """Accumulation choices that fit alone, fastest first (``Instance.modes``)."""
        return self.instance.modes(job_id)

    def fastest_steps(self, job_id: str) -> int:
        return self.instance.modes(job_id)[0].steps

    def alone_iteration_time(self, job_id: str) -> float:
        """Iteration time alone in the fastest mode, on the fewest nodes."""
        return self.instance.modes(job_id)[0].iteration_time

    def isolated_duration(self, job_id: str) -> float:
        """``L_j`` (SPEC.md): iterations × fastest alone iteration time."""
        value = self._duration.get(job_id)
        if value is None:
            value = self.instance.isolated_duration(job_id)
            self._duration[job_id] = value
        return value

    def memory(self, job_id: str, steps: int) -> float:
        key = (job_id, steps)
        value = self._memory.get(key)
        if value is None:
            job = self.instance.job_index[job_id]
            value = self.instance.profiles[job.profile].memory_gib(job.batch_size // steps)
            self._memory[key] = value
        return value

    def ratio(self, victim: str, other: str) -> float | None:
        """ξ_{victim|other} (cached by profile pair); ``None``: the pair may not share."""
        key = (self._profile_of[victim], self._profile_of[other])
        try:
            return self._ratio[key]
        except KeyError:
            profiles = self.instance.profiles
            value = self.instance.interference.ratio(profiles[key[0]], profiles[key[1]])
            self._ratio[key] = value
            return value

    def profile_ratios(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        """ξ_{victim|other} for many ``(victim profile, other profile)`` pairs at once (same values and
        cache as :meth:`ratio`); the pairs not cached yet go to the interference model's batch look-up
        ``ratios(pairs of Profile)`` when it has one, else one ``ratio`` call each."""
        cache = self._ratio
        missing = [key for key in pairs if key not in cache]  # a pair listed twice is computed twice: harmless
        if missing:
            profiles = self.instance.profiles
            model = self.instance.interference
            batch = getattr(model, "ratios", None)
            objects = [(profiles[v], profiles[o]) for v, o in missing]
            values = batch(objects) if batch is not None else [model.ratio(v, o) for v, o in objects]
            cache.update(zip(missing, values, strict=True))
        return [cache[key] for key in pairs]

    def profile_ratio_matrix(self, victims: Sequence[str], others: Sequence[str]) -> np.ndarray:
        """ξ_{victim|other} for every ``victims[i]`` × ``others[k]`` profile pair as a float matrix (NaN:
        may not share), the same values as :meth:`ratio`. Uses the interference model's
        ``ratio_matrix(victim profiles, other profiles)`` when it has one (one call for the whole block,
        not cached here: the caller keeps what it derives), else :meth:`profile_ratios`."""
        model = self.instance.interference
        batch = getattr(model, "ratio_matrix", None)
        if batch is not None:
            profiles = self.instance.profiles
            return np.asarray(batch([profiles[v] for v in victims], [profiles[o] for o in others]), dtype=float)
        values = self.profile_ratios([(v, o) for v in victims for o in others])
        flat = [math.nan if value is None else value for value in values]
        return np.array(flat, dtype=float).reshape(len(victims), len(others))

    def can_pair(self, a: str, b: str) -> bool:
        return self.ratio(a, b) is not None and self.ratio(b, a) is not None


class Scratch:
    """A planning copy of the cluster occupancy for one decision.

    Parameters
    ----------
    view
        The decision's view.
    facts
        The policy's cached look-ups.
    """

    def __init__(self, view: ClusterView, facts: InstanceFacts) -> None:
        cluster = view.instance.cluster
        self.facts = facts
        self.capacity = cluster.capacity
        self.gpus_per_node = cluster.gpus_per_node
        self.num_nodes = cluster.nodes
        self.gpu_memory = cluster.gpu_memory_gib
        num_gpus = cluster.num_gpus
        gpn = self.gpus_per_node
        occupancy = view.occupancy if view.occupancy is not None else [view.gpu_occupants()[g] for g in range(num_gpus)]
        self.occ: list[list[str]] = [list(jobs) for jobs in occupancy]
        fast = getattr(view.running, "placements", None)
        placements: dict[str, tuple[tuple[int, ...], int]] = (
            fast() if fast is not None else {job_id: (job.gpus, job.steps) for job_id, job in view.running.items()}
        )
        self.steps: dict[str, int] = {job_id: steps for job_id, (_, steps) in placements.items()}
        self.gpus_of: dict[str, list[int]] = {job_id: list(gpus) for job_id, (gpus, _) in placements.items()}
        self.mem: list[float] = [0.0] * num_gpus
        memory = facts.memory
        for job_id, (gpus, steps) in placements.items():
            own = memory(job_id, steps)
            for gpu in gpus:
                self.mem[gpu] += own
        self.free_by_node: list[list[int]] = [[] for _ in range(cluster.nodes)]
        free_by_node = self.free_by_node
        for gpu, jobs in enumerate(occupancy):
            if not jobs:
                free_by_node[gpu // gpn].append(gpu)
        self.free_count = sum(len(free) for free in free_by_node)

    # --- queries ----------------------------------------------------------------------------------
    def free_gpus(self) -> list[int]:
        return [g for free in self.free_by_node for g in free]

    def single_occupied(self) -> dict[str, list[int]]:
        """Running job → the GPUs on which it is the only job (SJF-BSBF's ``G_OJ``, grouped by job)."""
        result: dict[str, list[int]] = {}
        for gpu, jobs in enumerate(self.occ):
            if len(jobs) == 1:
                result.setdefault(jobs[0], []).append(gpu)
        return result

    def can_join(self, gpu: int, job_id: str, steps: int) -> bool:
        """Whether ``job_id`` with ``steps`` may be added on ``gpu`` (capacity, memory, pairs)."""
        jobs = self.occ[gpu]
        if len(jobs) >= self.capacity:
            return False
        if self.mem[gpu] + self.facts.memory(job_id, steps) > self.gpu_memory + _MEMORY_SLACK:
            return False
        return all(self.facts.can_pair(job_id, other) for other in jobs)

    def memory_budget(self, gpus: Iterable[int]) -> float:
        """Memory left on the fullest of ``gpus``."""
        return self.gpu_memory - max((self.mem[g] for g in gpus), default=0.0)

    # --- updates ----------------------------------------------------------------------------------
    def place(self, job_id: str, gpus: Sequence[int], steps: int) -> None:
        own = self.facts.memory(job_id, steps)
        for gpu in gpus:
            if not self.occ[gpu]:
                self.free_by_node[gpu // self.gpus_per_node].remove(gpu)
                self.free_count -= 1
            self.occ[gpu].append(job_id)
            self.mem[gpu] += own
        self.steps[job_id] = steps
        self.gpus_of[job_id] = list(gpus)

    def remove(self, job_id: str) -> None:
        steps = self.steps.pop(job_id)
        own = self.facts.memory(job_id, steps)
        for gpu in self.gpus_of.pop(job_id, []):
            self.occ[gpu].remove(job_id)
            self.mem[gpu] = self.mem[gpu] - own if self.occ[gpu] else 0.0
            if not self.occ[gpu]:
                node = gpu // self.gpus_per_node
                self.free_by_node[node].append(gpu)
                self.free_by_node[node].sort()
                self.free_count += 1

    # --- placement strategies ---------------------------------------------------------------------
    def pick_free(self, count: int, placement: str = "consolidated", near: Iterable[int] = ()) -> list[int] | None:
        """``count`` idle GPUs by the chosen strategy, or ``None`` if fewer are idle.

        ``near``: nodes to prefer (consolidated placement takes their idle GPUs first).
        """
        if count <= 0:
            return []
        if self.free_count < count:
            return None
        if placement == "hay":
            return self._hay_pick(count, None, 1, share=False)
        return self._consolidated(count, set(near))

    def _consolidated(self, count: int, near: set[int]) -> list[int]:
        free_by_node = self.free_by_node
        if near:
            taken: list[int] = []
            for node in sorted(near, key=lambda n: (-len(free_by_node[n]), n)):
                taken.extend(free_by_node[node][: count - len(taken)])
                if len(taken) == count:
                    return taken
            rest = self._consolidated_excluding(count - len(taken), near)
            return taken + rest
        return self._consolidated_excluding(count, set())

    def _consolidated_excluding(self, count: int, exclude: set[int]) -> list[int]:
        free_by_node = self.free_by_node
        best_node = -1
        best_free = 1 << 30
        for node, free in enumerate(free_by_node):
            size = len(free)
            if count <= size < best_free and node not in exclude:
                best_node, best_free = node, size
        if best_node >= 0:
            return free_by_node[best_node][:count]
        taken: list[int] = []
        order = sorted(
            (node for node in range(self.num_nodes) if node not in exclude and free_by_node[node]),
            key=lambda n: (-len(free_by_node[n]), n),
        )
        for node in order:
            taken.extend(free_by_node[node][: count - len(taken)])
            if len(taken) == count:
                break
        return taken

    def hay_score(self, node: int) -> float:
        """Hay Eq. 1: ``(W_f·G_frag + W_e·G_entire) / G_total`` of ``node`` (higher = more idle)."""
        base = node * self.gpus_per_node
        fragment = 0.0
        entire = 0
        for gpu in range(base, base + self.gpus_per_node):
            jobs = self.occ[gpu]
            if not jobs:
                entire += 1
            elif len(jobs) < self.capacity:
                fragment += max(0.0, self.gpu_memory - self.mem[gpu]) / self.gpu_memory
        return (HAY_WEIGHT_FRAGMENT * fragment + HAY_WEIGHT_ENTIRE * entire) / self.gpus_per_node

    def gpu_state(self, gpu: int) -> str:
        """Hay's GPU state machine: ``"deactivated"`` (idle), ``"activated"`` (room left), ``"unavailable"``."""
        jobs = self.occ[gpu]
        if not jobs:
            return "deactivated"
        if len(jobs) < self.capacity and self.mem[gpu] < self.gpu_memory - _MEMORY_SLACK:
            return "activated"
        return "unavailable"

    def hay_pick(self, count: int, job_id: str, steps: int, *, share: bool) -> list[int] | None:
        """Hay placement of a gang of ``count`` GPUs for ``job_id`` with ``steps``.

        With ``share`` the job may join activated GPUs (those it fits on); otherwise only idle ones.
        Returns ``None`` if the cluster cannot host it now.
        """
        return self._hay_pick(count, job_id, steps, share=share)

    def _hay_pick(self, count: int, job_id: str | None, steps: int, *, share: bool) -> list[int] | None:
        gpn = self.gpus_per_node
        per_node: list[list[int]] = []
        for node in range(self.num_nodes):
            base = node * gpn
            activated: list[tuple[float, int]] = []
            if share and job_id is not None:
                for gpu in range(base, base + gpn):
                    if self.occ[gpu] and self.can_join(gpu, job_id, steps):
                        activated.append((-(self.gpu_memory - self.mem[gpu]), gpu))
                activated.sort()
            # Activated GPUs with the most remaining resource first, then idle (deactivated) ones.
            per_node.append([gpu for _, gpu in activated] + list(self.free_by_node[node]))
        if sum(len(g) for g in per_node) < count:
            return None
        scores = [self.hay_score(node) for node in range(self.num_nodes)]
        whole = [node for node in range(self.num_nodes) if len(per_node[node]) >= count]
        if whole:
            node = max(whole, key=lambda n: (scores[n], -n))
            return per_node[node][:count]
        taken: list[int] = []
        for node in sorted(range(self.num_nodes), key=lambda n: (-scores[n], n)):
            taken.extend(per_node[node][: count - len(taken)])
            if len(taken) == count:
                return taken
        return None


def nodes_of(gpus: Iterable[int], gpus_per_node: int) -> set[int]:
    return {g // gpus_per_node for g in gpus}
