"""Muri's Philly-derived traces (Rivendile/Muri, ``simulator/trace-data``).

Columns: ``job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,
iteration_time,resource_time_0,resource_time_1,resource_time_2,priority``. ``submit_time`` and
``duration`` are milliseconds; ``iteration_time`` and ``resource_time_*`` are milliseconds per
iteration (data/CPU stage, GPU stage, network stage). Everything is converted to seconds here.

One profile per distinct (model, batch size, GPUs, iteration time, stage times): the measured
iteration time at the job's batch size, memory unknown (0 GiB), and the per-stage times as
``Profile.stage_times``, so the default interference is :class:`StageInterference` (Muri Eq. 3).

Progress rule: the authors ran these traces in two experiments, and each gets the rule its published
numbers were produced under (:func:`muri_experiment`, :func:`muri_default_semantics`):

* the **simulation** traces (``simulator/trace-data``: ``trace1-4``, ``*_pr``, ``job_type_*``, and any
  other file) get Muri's simulator's rule (``semantics="muri"``,
  :class:`~formulation.progress.MuriProgress`: stretched group periods, per-model start overheads at
  events, :data:`MURI_START_OVERHEADS`), under which a replay lands within 10 % of Muri's simulator;
* the **testbed** experiment (``cluster_exp``, a real 64-GPU cluster; ``testbed_400_jobs.csv``) keeps
  SPEC.md's rule (``semantics="duetto"``), under which the authors' settings reproduce their released
  real-cluster averages within 15 %.

``experiment=`` overrides the file-name rule, ``semantics=`` overrides both (docs/formats.md, Muri section).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import InterferenceModel, StageInterference
from formulation.progress import MURI_DEFAULT_OVERHEAD, SPEC_PROGRESS, MuriProgress, ProgressRule
from formulation.speed import Profile
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

MURI_COLUMNS = (
    "job_id",
    "num_gpu",
    "submit_time",
    "iterations",
    "model_name",
    "batch_size",
    "duration",
    "iteration_time",
    "resource_time_0",
    "resource_time_1",
    "resource_time_2",
)
MURI_DEFAULT_CLUSTER = (8, 8)  # cluster_n8g8.csv: the Muri simulation cluster
MURI_CLUSTER_FILE = "cluster_n8g8.csv"
_MS = 1000.0

#: Muri's simulator's profiled start overhead (seconds) of each model by the job's GPU count
#: (``simulator/run_sim.py``, ``overhead_dict``); a model or GPU count not listed costs
#: :data:`~formulation.progress.MURI_DEFAULT_OVERHEAD` (10 s, the simulator's default for a model).
MURI_START_OVERHEADS: dict[int, dict[str, float]] = {
    1: {"vgg16": 7, "vgg19": 7, "resnet18": 4, "shufflenet_v2_x1_0": 4, "bert": 10, "gpt2": 10, "a2c": 38, "dqn": 5},
    2: {"vgg16": 7, "vgg19": 7, "resnet18": 5, "shufflenet_v2_x1_0": 4, "bert": 10, "gpt2": 10, "a2c": 39, "dqn": 5},
    4: {"vgg16": 8, "vgg19": 8, "resnet18": 5, "shufflenet_v2_x1_0": 5, "bert": 10, "gpt2": 10, "a2c": 39, "dqn": 6},
    8: {"vgg16": 9, "vgg19": 9, "resnet18": 7, "shufflenet_v2_x1_0": 5, "bert": 10, "gpt2": 10, "a2c": 46, "dqn": 6},
    16: {"vgg16": 9, "vgg19": 10, "resnet18": 7, "shufflenet_v2_x1_0": 7, "bert": 10, "gpt2": 10, "a2c": 46, "dqn": 8},
    32: {"vgg16": 10, "vgg19": 10, "resnet18": 7, "shufflenet_v2_x1_0": 8, "bert": 10, "gpt2": 10, "a2c": 46, "dqn": 8},
}
#: ``load_muri(semantics=...)``: Muri's simulator's progress rule or SPEC.md's.
MURI_SEMANTICS: tuple[str, ...] = ("muri", "duetto")
#: ``load_muri(experiment=...)``: which of the authors' experiments a file belongs to (``auto``: by name).
MURI_EXPERIMENTS: tuple[str, ...] = ("auto", "simulation", "testbed")
#: The progress rule each experiment's published numbers were produced under.
EXPERIMENT_SEMANTICS: dict[str, str] = {"simulation": "muri", "testbed": "duetto"}
#: File-name markers of the authors' testbed (real-cluster) traces: the shared copy
#: ``testbed_400_jobs.csv`` and the authors' own ``cluster_exp/trace-data/cluster_trace.csv``.
TESTBED_MARKERS: tuple[str, ...] = ("testbed", "cluster_trace")


def muri_experiment(path: PathLike, experiment: str = "auto") -> Literal["simulation", "testbed"]:
    """Which of the Muri authors' experiments the trace ``path`` belongs to.

    ``experiment="auto"`` (the documented default rule): ``"testbed"`` when the file's name contains one of
    :data:`TESTBED_MARKERS` or the file lies in a folder named ``cluster_exp`` (the authors' real-cluster
    experiment), else ``"simulation"`` (the authors' ``simulator/trace-data`` and any other trace).
    ``"simulation"`` / ``"testbed"`` are returned as given.

    Raises
    ------
    DuettoInputError
        An unknown ``experiment``.
    """
    if experiment not in MURI_EXPERIMENTS:
        raise DuettoInputError(f"must be one of {', '.join(MURI_EXPERIMENTS)}, got {experiment!r}", field="experiment")
    if experiment != "auto":
        return experiment  # type: ignore[return-value]
    file = Path(path)
    name = file.name.lower()
    in_cluster_exp = "cluster_exp" in (part.lower() for part in file.parent.parts)
    if in_cluster_exp or any(marker in name for marker in TESTBED_MARKERS):
        return "testbed"
    return "simulation"


def muri_default_semantics(path: PathLike, experiment: str = "auto") -> Literal["muri", "duetto"]:
    """The progress rule a Muri trace gets when ``semantics`` is not given: Muri's simulator's
    (``"muri"``) for a simulation trace, SPEC.md's (``"duetto"``) for the testbed (:func:`muri_experiment`)."""
    return EXPERIMENT_SEMANTICS[muri_experiment(path, experiment)]  # type: ignore[return-value]


def muri_start_overhead(model: str, num_gpus: int) -> float:
    """Muri's simulator's start overhead of ``model`` on ``num_gpus`` GPUs (:data:`MURI_START_OVERHEADS`)."""
    return float(MURI_START_OVERHEADS.get(num_gpus, {}).get(model, MURI_DEFAULT_OVERHEAD))


def load_muri(
    path: PathLike,
    *,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    gpu_memory_gib: float = 32.0,
    capacity: int = 4,
    interference: InterferenceModel | None = None,
    limit: int | None = None,
    cluster_spec: PathLike | None = None,
    duration_from: Literal["duration", "iterations"] = "iterations",
    name: str | None = None,
    allow_implausible: bool = False,
    semantics: Literal["muri", "duetto"] | None = None,
    experiment: Literal["auto", "simulation", "testbed"] = "auto",
) -> Instance:
    """Load a Muri trace CSV.

    Parameters
    ----------
    path
        The trace (``trace1.csv`` ... , ``*_pr.csv``, ``job_type_*.csv``, ``testbed_400_jobs.csv``).
    nodes, gpus_per_node
        Cluster shape; each defaults to ``cluster_spec``.
    gpu_memory_gib, capacity
        GPU memory and ``C``; default 4, Muri's ``packing_num`` (the authors' setting,
        :data:`~formulation.trace_settings.KIND_SETTINGS`; duetto's generic default is 2).
    interference
        Default :class:`StageInterference` (ξ from the per-stage times).
    limit
        Keep only the ``limit`` earliest arrivals (ties: file order) of the file.
    cluster_spec
        Muri/Tiresias cluster CSV; default ``cluster_n8g8.csv`` beside the trace if it exists,
        else 8 nodes × 8 GPUs.
    duration_from
        ``"iterations"`` (default, the authors' runtime model): the trace's ``iterations`` column at
        the measured iteration time, as Muri's testbed scripts and simulator run jobs.
        ``"duration"``: the isolated duration is the trace's ``duration`` column (iterations =
        duration / iteration_time, fractional). The two differ by up to 2× on some rows.
    name
        Instance name; default the file's stem.
    allow_implausible
        Keep jobs longer than a year alone (:data:`~formulation.traces.common.MAX_PLAUSIBLE_SECONDS`);
        by default they are refused with their row: they are what a unit mix-up looks like.
    semantics
        The progress rule. ``"muri"``: Muri's simulator's (:class:`~formulation.progress.MuriProgress`
        with :data:`MURI_START_OVERHEADS` per profile), under which the simulation traces replay within
        10 % of Muri's simulator. ``"duetto"``: SPEC.md's, under which the testbed replays within 15 % of
        the authors' real-cluster results. ``None`` (default): the rule of the trace's ``experiment``
        (:func:`muri_default_semantics`). Both rules: docs/model.md ("Progress rules").
    experiment
        ``"auto"`` (default: by file name, :func:`muri_experiment`), ``"simulation"`` or ``"testbed"``:
        which of the authors' experiments the trace is; decides the default ``semantics``.

    Returns
    -------
    Instance
        Job ids are the trace's ``job_id``; arrivals and durations in seconds.
    """
    check_limit(limit)
    chosen_experiment = muri_experiment(path, experiment)
    if semantics is None:
        semantics = muri_default_semantics(path, chosen_experiment)
    if semantics not in MURI_SEMANTICS:
        raise DuettoInputError(f"must be 'muri' or 'duetto', got {semantics!r}", field="semantics")
    if duration_from not in ("duration", "iterations"):
        raise DuettoInputError(f"must be 'duration' or 'iterations', got {duration_from!r}", field="duration_from")
    file = Path(path)
    check_kind(file, "muri")
    frame = read_job_table(file, MURI_COLUMNS, limit)
    cluster = spec_cluster(
        file, nodes, gpus_per_node, cluster_spec, MURI_CLUSTER_FILE, MURI_DEFAULT_CLUSTER, gpu_memory_gib, capacity
    )

    job_ids = text_column(frame, "job_id", file)
    models = text_column(frame, "model_name", file)
    gpus = numeric_column(frame, "num_gpu", file, integer=True, positive=True)
    submit = numeric_column(frame, "submit_time", file, nonnegative=True) / _MS
    iterations = numeric_column(frame, "iterations", file, positive=True)
    batch = numeric_column(frame, "batch_size", file, integer=True, positive=True)
    duration = numeric_column(frame, "duration", file, positive=True) / _MS
    iter_time = numeric_column(frame, "iteration_time", file, positive=True) / _MS
    stages = np.stack(
        [numeric_column(frame, f"resource_time_{k}", file, nonnegative=True) / _MS for k in range(3)], axis=1
    )
    check_unique_ids(job_ids, file)
    check_gang_fits(job_ids, gpus.tolist(), cluster, file)

    namer = ProfileNamer()
    profiles: dict[str, Profile] = {}
    overheads: dict[str, float] = {}
    jobs: list[Job] = []
    for i, job_id in enumerate(job_ids):
        g, b, t = int(gpus[i]), int(batch[i]), float(iter_time[i])
        stage = (float(stages[i, 0]), float(stages[i, 1]), float(stages[i, 2]))
        profile_name, new = namer.name((models[i], b, g, t, stage), f"{models[i]}-b{b}-g{g}")
        if new:
            profiles[profile_name] = measured_profile(profile_name, b, t, stage)
            overheads[profile_name] = muri_start_overhead(models[i], g)
        count = float(duration[i]) / t if duration_from == "duration" else float(iterations[i])
        jobs.append(Job(job_id, float(submit[i]), g, count, b, profile_name))

    progress: ProgressRule = MuriProgress(overheads=overheads) if semantics == "muri" else SPEC_PROGRESS
    instance = Instance(
        cluster=cluster,
        jobs=tuple(jobs),
        profiles=profiles,
        interference=interference if interference is not None else StageInterference(),
        name=name or file.stem,
        metadata={
            "source": "muri",
            "file": file.name,
            "duration_from": duration_from,
            "limit": limit,
            "units": "submit_time and duration ms -> s; iteration_time, resource_time_* ms -> s",
            "semantics": semantics,
            "experiment": chosen_experiment,
        },
        progress=progress,
    )
    return check_plausible(instance, file, frame_rows(frame), allow=allow_implausible)
