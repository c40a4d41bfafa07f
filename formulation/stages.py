"""Per-stage times derived from the Eq. 1-3 profile, so that Muri's interleaving runs on every instance.

Muri (SIGCOMM'22) interleaves jobs whose iterations use different resources in turn: data loading /
CPU, GPU, network. Its traces measure these stages (``resource_time_0..2``); the other public traces
(Pollux, Gavel, Shockwave, Tiresias) and the random family give an Eq. 1-3 profile instead. From it,
for the job's fastest mode alone (``s`` accumulation steps, sub-batch ``b = B/s``, fewest nodes):

* **GPU stage** = ``s · t_comp(b)`` (Eq. 1; a measured iteration time where the profile is a table);
* **network stage** = ``t_comm`` (Eq. 2; 0 for one GPU, and for measured profiles, whose
  measurement already includes it);
* **data-loading stage** = :data:`DATA_LOADING_FRACTION` × the GPU stage — nothing in these traces
  measures it, so it is a documented modelling choice (docs/model.md, "Per-stage times").

Stage times only feed Muri's grouping decisions (and :class:`~formulation.interference.StageInterference`
where an instance uses it); the speed model, durations and the loaders' interference models are
unchanged. Stage times are per profile: a profile shared by jobs of different batch sizes or gang
sizes takes the first such job's (none of the public traces has one).
"""

from __future__ import annotations

import dataclasses
import math

from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job

DATA_LOADING_FRACTION = 1.0
"""Data-loading stage as a fraction of the GPU stage. Muri's own measurements (``trace1.csv``, the
eight models on one GPU) put ``resource_time_0 / resource_time_1`` between 0.001 (GPT-2, BERT) and
56 (DQN); their geometric mean is 1.07, so 1: an iteration spends as long feeding the GPU as on it."""


def derived_stage_times(
    instance: Instance, job: Job, data_fraction: float = DATA_LOADING_FRACTION
) -> tuple[float, float, float]:
    """``(data loading, GPU, network)`` seconds per iteration of ``job`` in its fastest mode alone.

    Parameters
    ----------
    instance
        The instance (its profiles and cluster: the gang sits on the fewest nodes it fits in).
    job
        The job.
    data_fraction
        Data-loading stage as a fraction of the GPU stage (>= 0).
    """
    if not math.isfinite(data_fraction) or data_fraction < 0:
        raise DuettoInputError(f"must be a finite number >= 0, got {data_fraction!r}", field="data_fraction")
    profile = instance.profiles[job.profile]
    mode = instance.modes(job.id)[0]  # fastest first
    gpu = mode.steps * profile.compute_time(mode.sub_batch)
    network = profile.comm_time(job.num_gpus, instance.min_nodes(job))
    return (data_fraction * gpu, gpu, network)


def with_derived_stages(instance: Instance, data_fraction: float = DATA_LOADING_FRACTION) -> Instance:
    """``instance`` with per-stage times on every used profile that has none (module docstring);
    profiles that have them (Muri's measurements) are kept as they are.

    Raises
    ------
    DuettoInputError
        A bad ``data_fraction``.
    """
    first_user: dict[str, Job] = {}
    for job in instance.jobs:
        first_user.setdefault(job.profile, job)
    profiles = dict(instance.profiles)
    changed = False
    for name, job in first_user.items():
        if profiles[name].stage_times is None:
            stages = derived_stage_times(instance, job, data_fraction)
            profiles[name] = dataclasses.replace(profiles[name], stage_times=stages)
            changed = True
    if not changed:
        return instance
    return Instance(
        cluster=instance.cluster,
        jobs=instance.jobs,
        profiles=profiles,
        interference=instance.interference,
        name=instance.name,
        metadata={**instance.metadata, "stage_times": f"derived: data loading = {data_fraction:g} × GPU stage"},
        progress=instance.progress,
    )
