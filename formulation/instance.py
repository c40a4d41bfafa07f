"""Jobs and instances: immutable problem data, validated on construction."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from formulation.cluster import Cluster
from formulation.errors import DuettoInputError, InfeasibleInstanceError
from formulation.interference import ConstantInterference, InterferenceModel
from formulation.progress import SPEC_PROGRESS, MuriProgress, ProgressRule
from formulation.speed import Profile, accumulation_options, iteration_time


@dataclass(frozen=True, slots=True)
class Job:
    """One training job (SPEC.md "Jobs").

    Parameters
    ----------
    id
        Unique job id.
    arrival
        Submission time ``a_j`` in seconds.
    num_gpus
        Gang size ``G_j``: all GPUs start and stop together.
    iterations
        Iterations ``I_j`` to run (optimizer steps over the full batch).
    batch_size
        The user's per-GPU batch size ``B_j``.
    profile
        Name of the job's :class:`~formulation.speed.Profile` in the instance.
    """

    id: str
    arrival: float
    num_gpus: int
    iterations: float
    batch_size: int
    profile: str

    def __post_init__(self) -> None:
        where = f"job '{self.id}'"
        if not self.id:
            raise DuettoInputError("job id must not be empty", field="jobs.id")
        if not math.isfinite(self.arrival) or self.arrival < 0:
            raise DuettoInputError(f"must be finite and >= 0, got {self.arrival!r}", source=where, field="arrival")
        if not isinstance(self.num_gpus, int) or self.num_gpus < 1:
            raise DuettoInputError(f"must be an integer >= 1, got {self.num_gpus!r}", source=where, field="num_gpus")
        if not math.isfinite(self.iterations) or self.iterations <= 0:
            raise DuettoInputError(f"must be > 0, got {self.iterations!r}", source=where, field="iterations")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise DuettoInputError(
                f"must be an integer >= 1, got {self.batch_size!r}", source=where, field="batch_size"
            )


@dataclass(frozen=True, slots=True)
class JobMode:
    """One way to run a job: accumulation steps and what follows from them (Algorithm 2's knob)."""

    steps: int
    sub_batch: int
    memory_gib: float
    iteration_time: float  # alone, on the fewest nodes the gang fits in


@dataclass(frozen=True, eq=False)
class Instance:
    """A scheduling instance: cluster, jobs, profiles and an interference model.

    Immutable. Construction checks every job against its profile and the cluster, so that an
    instance that exists can be scheduled. ``progress`` is the progress rule every schedule of the
    instance is simulated and validated under (:mod:`formulation.progress`: SPEC.md's by default, Muri's
    simulator's for Muri's simulation traces).
    """

    cluster: Cluster
    jobs: tuple[Job, ...]
    profiles: Mapping[str, Profile]
    interference: InterferenceModel = field(default_factory=ConstantInterference)
    name: str = "instance"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    progress: ProgressRule = SPEC_PROGRESS

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(self, "profiles", MappingProxyType(dict(self.profiles)))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        for name, profile in self.profiles.items():
            if name != profile.name:
                raise DuettoInputError(f"key '{name}' names profile '{profile.name}'", field="profiles")
        seen: set[str] = set()
        for job in self.jobs:
            if job.id in seen:
                raise DuettoInputError(f"duplicate job id '{job.id}'", field="jobs.id")
            seen.add(job.id)
            where = f"job '{job.id}'"
            if job.profile not in self.profiles:
                raise DuettoInputError(f"unknown profile '{job.profile}'", source=where, field="profile")
            if job.num_gpus > self.cluster.num_gpus:
                raise InfeasibleInstanceError(
                    f"demands {job.num_gpus} GPUs but the cluster has {self.cluster.num_gpus}",
                    source=where,
                    field="num_gpus",
                )
            if isinstance(self.progress, MuriProgress):
                stages = self.profiles[job.profile].stage_times
                if stages is None or not sum(stages) > 0:
                    # a group's period comes from its members' stage times: they must exist and not all be 0
                    raise DuettoInputError(
                        f"profile '{job.profile}' has no stage_times (or only zeros), which Muri's progress rule "
                        "needs (formulation.stages.with_derived_stages adds them)",
                        source=where,
                        field="progress",
                    )
            if not self.modes(job.id):
                raise InfeasibleInstanceError(
                    f"no sub-batch of batch size {job.batch_size} fits in {self.cluster.gpu_memory_gib} GiB "
                    f"of GPU memory (profile '{job.profile}')",
                    source=where,
                    field="batch_size",
                )

    # --- look-ups -------------------------------------------------------------------------------
    @cached_property
    def job_index(self) -> Mapping[str, Job]:
        return MappingProxyType({job.id: job for job in self.jobs})

    def job(self, job_id: str) -> Job:
        try:
            return self.job_index[job_id]
        except KeyError:
            raise DuettoInputError(f"unknown job '{job_id}'") from None

    def profile_of(self, job: Job | str) -> Profile:
        job_obj = self.job(job) if isinstance(job, str) else job
        return self.profiles[job_obj.profile]

    def min_nodes(self, job: Job) -> int:
        """Fewest nodes a gang of ``job.num_gpus`` can sit on."""
        return -(-job.num_gpus // self.cluster.gpus_per_node)

    # --- the speed model, per job -----------------------------------------------------------------
    def iteration_time(self, job: Job | str, steps: int = 1, num_nodes: int | None = None) -> float:
        """Eq. 3 for ``job`` alone with ``steps`` accumulation steps on ``num_nodes`` nodes
        (default: the fewest it fits on)."""
        job_obj = self.job(job) if isinstance(job, str) else job
        nodes = self.min_nodes(job_obj) if num_nodes is None else num_nodes
        return iteration_time(self.profiles[job_obj.profile], job_obj.batch_size, steps, job_obj.num_gpus, nodes)

    def isolated_duration(self, job: Job | str) -> float:
        """``L_j = I_j · t_iter`` alone, in the fastest mode that fits memory, on the fewest nodes."""
        job_obj = self.job(job) if isinstance(job, str) else job
        return job_obj.iterations * min(mode.iteration_time for mode in self.modes(job_obj.id))

    def modes(self, job_id: str) -> tuple[JobMode, ...]:
        """Accumulation-step choices of a job that fit alone in GPU memory, fastest first."""
        cache: dict[str, tuple[JobMode, ...]] = self.__dict__.setdefault("_modes_cache", {})
        if job_id in cache:
            return cache[job_id]
        job = self.job_index[job_id]
        profile = self.profiles[job.profile]
        result = []
        for steps in accumulation_options(profile, job.batch_size):
            sub_batch = job.batch_size // steps
            memory = profile.memory_gib(sub_batch)
            if memory <= self.cluster.gpu_memory_gib + 1e-9:
                result.append(JobMode(steps, sub_batch, memory, self.iteration_time(job, steps)))
        modes = tuple(sorted(result, key=lambda m: (m.iteration_time, m.steps)))
        cache[job_id] = modes
        return modes

    def ratio(self, victim: Job | str, other: Job | str) -> float | None:
        """ξ_{victim|other}, or ``None`` if the two jobs may not share a GPU."""
        victim_job = self.job(victim) if isinstance(victim, str) else victim
        other_job = self.job(other) if isinstance(other, str) else other
        return self.interference.ratio(self.profiles[victim_job.profile], self.profiles[other_job.profile])

    # --- derived instances ---------------------------------------------------------------------
    def replace(
        self,
        *,
        cluster: Cluster | None = None,
        jobs: Iterable[Job] | None = None,
        interference: InterferenceModel | None = None,
        name: str | None = None,
        progress: ProgressRule | None = None,
    ) -> Instance:
        """A new instance with some parts replaced (profiles not used by any job are dropped)."""
        new_jobs = tuple(self.jobs if jobs is None else jobs)
        used = {job.profile for job in new_jobs}
        return Instance(
            cluster=cluster or self.cluster,
            jobs=new_jobs,
            profiles={name: p for name, p in self.profiles.items() if name in used},
            interference=interference or self.interference,
            name=name or self.name,
            metadata=self.metadata,
            progress=progress if progress is not None else self.progress,
        )

    def head(self, count: int) -> Instance:
        """The first ``count`` jobs by arrival (ties by id order in the file)."""
        ordered = sorted(self.jobs, key=lambda j: j.arrival)
        return self.replace(jobs=ordered[:count], name=f"{self.name}[:{count}]")
