"""Tiresias' example trace (SymbioticLab/Tiresias, ``60_job.csv``).

Columns: ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``, all times in
seconds. The trace has no batch size and no per-iteration measurement: the iteration time is
``duration / iterations`` and the batch size is recorded as 1 (one indivisible batch, so the job has
a single mode). Memory is unknown (0 GiB). Interference defaults to a constant ξ (the trace has
nothing to derive it from); :data:`DEFAULT_CONSTANT_XI` is close to the median measured Gavel
slowdown on V100.
"""

from __future__ import annotations

from pathlib import Path

from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference, InterferenceModel
from formulation.speed import Profile
from formulation.stages import with_derived_stages
from formulation.traces.common import (
    PathLike,
    ProfileNamer,
    check_gang_fits,
    check_kind,
    check_limit,
    check_plausible,
    check_unique_ids,
    frame_rows,
    measured_profile,
    numeric_column,
    read_job_table,
    spec_cluster,
    text_column,
)

TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")
TIRESIAS_DEFAULT_CLUSTER = (32, 4)  # n32g4.csv
TIRESIAS_CLUSTER_FILE = "n32g4.csv"
DEFAULT_CONSTANT_XI = 1.5


def load_tiresias(
    path: PathLike,
    *,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    gpu_memory_gib: float = 32.0,
    capacity: int = 1,
    interference: InterferenceModel | None = None,
    limit: int | None = None,
    cluster_spec: PathLike | None = None,
    name: str | None = None,
    allow_implausible: bool = False,
) -> Instance:
    """Load a Tiresias trace CSV.

    Parameters
    ----------
    path
        The trace (``60_job.csv``).
    nodes, gpus_per_node
        Cluster shape; each defaults to ``cluster_spec``.
    gpu_memory_gib, capacity
        GPU memory and ``C``; default 1, the authors' setting (Tiresias' simulator never shares a GPU,
        :data:`~formulation.trace_settings.KIND_SETTINGS`; duetto's generic default is 2).
    interference
        Default ``ConstantInterference(1.5)`` (matters from ``capacity=2`` on).
    limit
        Keep only the ``limit`` earliest arrivals (ties: file order).
    cluster_spec
        Cluster CSV; default ``n32g4.csv`` beside the trace if it exists, else 32 nodes × 4 GPUs.
    name
        Instance name; default the file's stem.
    allow_implausible
        Keep jobs longer than a year alone (:data:`~formulation.traces.common.MAX_PLAUSIBLE_SECONDS`);
        by default they are refused with their row: they are what a unit mix-up looks like.

    Returns
    -------
    Instance
        Job ids from ``job_id``; isolated duration = the ``duration`` column (seconds).
    """
    check_limit(limit)
    file = Path(path)
    check_kind(file, "tiresias")
    frame = read_job_table(file, TIRESIAS_COLUMNS, limit)
    cluster = spec_cluster(
        file,
        nodes,
        gpus_per_node,
        cluster_spec,
        TIRESIAS_CLUSTER_FILE,
        TIRESIAS_DEFAULT_CLUSTER,
        gpu_memory_gib,
        capacity,
    )

    job_ids = text_column(frame, "job_id", file)
    models = text_column(frame, "model_name", file)
    gpus = numeric_column(frame, "num_gpu", file, integer=True, positive=True)
    submit = numeric_column(frame, "submit_time", file, nonnegative=True)
    iterations = numeric_column(frame, "iterations", file, positive=True)
    duration = numeric_column(frame, "duration", file, positive=True)
    check_unique_ids(job_ids, file)
    check_gang_fits(job_ids, gpus.tolist(), cluster, file)

    namer = ProfileNamer()
    profiles: dict[str, Profile] = {}
    jobs: list[Job] = []
    for i, job_id in enumerate(job_ids):
        g = int(gpus[i])
        seconds = float(duration[i]) / float(iterations[i])
        profile_name, new = namer.name((models[i], g, seconds), f"{models[i]}-g{g}")
        if new:
            profiles[profile_name] = measured_profile(profile_name, 1, seconds)
        jobs.append(Job(job_id, float(submit[i]), g, float(iterations[i]), 1, profile_name))

    instance = Instance(
        cluster=cluster,
        jobs=tuple(jobs),
        profiles=profiles,
        interference=interference if interference is not None else ConstantInterference(DEFAULT_CONSTANT_XI),
        name=name or file.stem,
        metadata={
            "source": "tiresias",
            "file": file.name,
            "limit": limit,
            "units": "seconds; iteration time = duration / iterations; batch size unknown (1)",
        },
    )
    # per-stage times from the measured iteration time, so Muri can group these jobs (formulation/stages.py)
    return check_plausible(with_derived_stages(instance), file, frame_rows(frame), allow=allow_implausible)
