"""Instance families of the studies built on the standard generator.

:func:`scaled_instance` is the scaling study's family: the standard random family
(:func:`formulation.generator.generate_instance`) on a cluster that grows with the job count, so that
contention stays comparable from 4 to 10,000 jobs.
"""

from __future__ import annotations

import math
from typing import Literal

from formulation.errors import DuettoInputError
from formulation.instance import Instance


def scaled_nodes(num_jobs: int, gpus_per_node: int, jobs_per_gpu: float) -> int:
    """Nodes of the scaled cluster: ``ceil(num_jobs / (jobs_per_gpu · gpus_per_node))``, at least 1."""
    if not jobs_per_gpu > 0:
        raise DuettoInputError(f"must be > 0, got {jobs_per_gpu!r}", field="jobs_per_gpu")
    return max(1, math.ceil(num_jobs / (jobs_per_gpu * gpus_per_node)))


def scaled_instance(
    num_jobs: int,
    seed: int,
    *,
    gpus_per_node: int = 4,
    jobs_per_gpu: float = 2.0,
    arrivals: Literal["zero", "poisson"] = "poisson",
    load: float = 1.0,
    xi_range: tuple[float, float] = (1.0, 2.0),
    memory_pressure: float = 0.3,
) -> Instance:
    """``num_jobs`` jobs of the standard family on :func:`scaled_nodes` nodes of ``gpus_per_node`` GPUs."""
    from formulation.generator import generate_instance

    nodes = scaled_nodes(num_jobs, gpus_per_node, jobs_per_gpu)
    return generate_instance(
        num_jobs,
        nodes,
        gpus_per_node,
        seed,
        arrivals=arrivals,
        load=load,
        xi_range=xi_range,
        memory_pressure=memory_pressure,
    )
