"""Shockwave / Tesserae traces (uw-mad-dash/shockwave): Gavel's generator format with 12 fields
(adds the batch-size adaptation mode and the job's duration in seconds), with the throughputs in
``tacc_throughputs.json`` (same layout as Gavel's ``simulation_throughputs.json``).

The line's ``duration`` field is the job's isolated duration (default): the iterations are
``duration × throughput`` at the measured throughput of its (job type, scale factor). For the
120-job trace this equals ``total_steps``; in the 900-job trace the two differ because most jobs
adapt their batch size over time (modes ``gns`` / ``accordion``) and ``duration`` accounts for it.
``duration_from="steps"`` uses ``total_steps / throughput`` instead.

Interference: the co-located pair entries in ``tacc_throughputs.json`` are byte-identical copies of
Gavel's V100 pair measurements while its isolated throughputs were re-measured, so ratios computed
inside that file would mix two machines (230 of them come out below 1). The default is therefore
Gavel's measured V100 table (:func:`formulation.traces.gavel.gavel_interference_table`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.interference import InterferenceModel
from formulation.traces.common import PathLike, build_cluster, check_kind, check_limit, check_plausible, earliest
from formulation.traces.gavel import (
    DEFAULT_WORKER_TYPE,
    MissingThroughput,
    build_gavel_instance,
    default_data_file,
    parse_gavel_trace,
    read_isolated_throughputs,
)

SHOCKWAVE_DEFAULT_CLUSTER = (8, 4)  # 32 GPUs: Shockwave's / Tesserae's physical cluster (8 nodes × 4)
TACC_THROUGHPUTS_FILE = "tacc_throughputs.json"


def load_shockwave(
    path: PathLike,
    *,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    gpu_memory_gib: float = 32.0,
    capacity: int = 2,
    interference: InterferenceModel | None = None,
    limit: int | None = None,
    worker_type: str = DEFAULT_WORKER_TYPE,
    throughputs: PathLike | None = None,
    pairwise: PathLike | None = None,
    duration_from: Literal["trace", "steps"] = "trace",
    missing_throughput: MissingThroughput = "error",
    name: str | None = None,
    allow_implausible: bool = False,
) -> Instance:
    """Load a Shockwave trace (12 tab-separated fields per line).

    Parameters
    ----------
    path
        The trace (``traces/120_...trace``, ``traces/900_...trace``).
    nodes, gpus_per_node
        Cluster shape; default 8 nodes × 4 GPUs.
    gpu_memory_gib, capacity
        GPU memory and ``C``.
    interference
        Default: Gavel's measured V100 pairs on ``worker_type``.
    limit
        Keep only the ``limit`` earliest arrivals (ties: file order).
    worker_type
        Which worker's throughputs in the JSON give iteration times.
    throughputs
        Default ``tacc_throughputs.json`` beside the trace or one folder up, else the shared copy.
    pairwise
        Gavel's ``gavel_pairwise_colocation.csv``; default the shared data copy.
    duration_from
        ``"trace"`` (default): isolated duration = the line's duration field; ``"steps"``:
        ``total_steps / throughput``.
    missing_throughput
        As in :func:`formulation.traces.gavel.load_gavel`; default ``"error"`` (every job of the
        shipped traces has a measurement).
    name
        Instance name; default the file's stem.
    allow_implausible
        Keep jobs longer than a year alone (:data:`~formulation.traces.common.MAX_PLAUSIBLE_SECONDS`);
        by default they are refused with their row: they are what a unit mix-up looks like.
    """
    check_limit(limit)
    if duration_from not in ("trace", "steps"):
        raise DuettoInputError(f"must be 'trace' or 'steps', got {duration_from!r}", field="duration_from")
    if missing_throughput not in ("scale", "error"):
        raise DuettoInputError(f"must be 'scale' or 'error', got {missing_throughput!r}", field="missing_throughput")
    file = Path(path)
    check_kind(file, "shockwave")
    records = parse_gavel_trace(file, formats=(12,))
    if limit is not None:
        records = [records[i] for i in earliest([r.arrival for r in records], limit)]
    cluster = build_cluster(nodes, gpus_per_node, SHOCKWAVE_DEFAULT_CLUSTER, gpu_memory_gib, capacity)
    tput_file = (
        Path(throughputs) if throughputs is not None else default_data_file(file, TACC_THROUGHPUTS_FILE, "shockwave")
    )
    table = read_isolated_throughputs(tput_file, worker_type)
    instance = build_gavel_instance(
        records,
        file,
        cluster,
        table,
        missing_throughput=missing_throughput,
        durations=duration_from,
        interference=interference,
        pairwise=pairwise,
        worker_type=worker_type,
        name=name or file.stem,
        metadata={
            "source": "shockwave",
            "file": file.name,
            "throughputs": tput_file.name,
            "duration_from": duration_from,
            "limit": limit,
            "modes": sorted({r.mode or "" for r in records}),
            "units": "arrival and duration s; iteration time = 1 / throughput (steps/s)",
        },
    )
    return check_plausible(instance, file, None, allow=allow_implausible)
