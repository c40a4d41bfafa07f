"""The standard random instance family: seeded, reproducible synthetic jobs.

Every study that needs "random instances" calls :func:`generate_instance`; the same arguments and
seed give the same instance, bit for bit (``io.instance_to_dict`` equal). The construction is
documented in ``docs/formats.md`` ("Random instances"); in short, per job:

1. GPU demand ``G`` from ``gpu_demand_weights`` (demands larger than the cluster are dropped and the
   remaining weights renormalised), per-GPU batch ``B`` uniform in {32, 64, 128, 256}, isolated
   duration ``L`` log-uniform in ``duration_range`` and rounded to whole seconds (>= 1 s).
2. A profile ``p-<job id>``: Eq. 1 computation ``t_comp(b) = α + β·b``; for ``G > 1`` Eq. 2
   communication ``α_c + β_c·M`` (gradients of ``M`` MB), ×1.5 when the gang spans nodes, overlap
   ``δ`` of Eq. 3 in [1, 2]. Memory is affine in the sub-batch; a fraction ``memory_pressure`` of the
   jobs need more than half the GPU at full batch (two such jobs cannot share at full batch, so
   accumulation modes matter), the others at most 40 %.
3. Integer iterations ``I`` and one common scale factor on all the profile's times so that
   ``I · t_iter(1)`` equals ``L`` (Eq. 3 is homogeneous of degree 1 in its times, so scaling them
   scales ``t_iter`` exactly).

Arrivals are all zero, or a Poisson process whose rate makes the offered load (GPU-seconds demanded
per second) equal ``load`` times the cluster's GPUs. Interference: ξ of every ordered pair of jobs
uniform in ``xi_range``, rounded to 2 decimals, drawn from a seeded hash
(:class:`~formulation.interference.HashedPairInterference`: a table's meaning in O(1) memory).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from formulation.cluster import Cluster
from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import HashedPairInterference
from formulation.speed import Profile, iteration_time
from formulation.stages import with_derived_stages

DEFAULT_GPU_DEMAND_WEIGHTS: Mapping[int, float] = {1: 0.5, 2: 0.3, 4: 0.15, 8: 0.05}
BATCH_SIZES: tuple[int, ...] = (32, 64, 128, 256)
INTER_NODE_COMM_FACTOR = 1.5

# Ranges of the unscaled profile parameters (seconds, MB). Only their ratios matter: the final scale
# factor pins the iteration time to the sampled duration. They make computation dominate for small
# gangs and communication matter (10-60 % of compute) for large ones, as in the Castor profiles.
_COMPUTE_ALPHA = (0.005, 0.05)  # s per micro-step
_COMPUTE_BETA = (0.0005, 0.004)  # s per sample
_COMM_ALPHA = (0.002, 0.02)  # s
_COMM_BETA = 1e-4  # s per MB
_MESSAGE_MB = (20.0, 500.0)  # gradient size, MB
_DELTA = (1.0, 2.0)
# Full-batch memory as a fraction of the GPU: "pressure" jobs > 1/2 (two cannot share at full
# batch), others <= 0.4. The base (weights, optimizer state) is a fraction of the full-batch memory.
_MEM_PRESSURE = (0.55, 0.9)
_MEM_SMALL = (0.05, 0.4)
_MEM_BASE_SHARE = (0.1, 0.4)


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise DuettoInputError(f"must be an integer >= {minimum}, got {value!r}", field=name)
    return int(value)


def _check_range(value: Any, name: str, minimum: float, strict: bool) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise DuettoInputError(f"must be a pair (low, high) of numbers, got {value!r}", field=name) from None
    bad_low = low <= minimum if strict else low < minimum
    if not (math.isfinite(low) and math.isfinite(high)) or bad_low or high < low:
        bound = ">" if strict else ">="
        raise DuettoInputError(
            f"needs finite {bound} {minimum:g} bounds with low <= high, got ({low!r}, {high!r})", field=name
        )
    return low, high


def _demand_mix(weights: Mapping[int, float], num_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(weights, Mapping) or not weights:
        raise DuettoInputError(
            f"must be a non-empty mapping GPUs -> weight, got {weights!r}", field="gpu_demand_weights"
        )
    demands, probs = [], []
    for demand, weight in sorted(weights.items()):
        if isinstance(demand, bool) or not isinstance(demand, int | np.integer) or demand < 1:
            raise DuettoInputError(f"GPU demand must be an integer >= 1, got {demand!r}", field="gpu_demand_weights")
        if not isinstance(weight, int | float | np.floating) or not math.isfinite(weight) or weight < 0:
            raise DuettoInputError(
                f"weight of demand {demand} must be finite and >= 0, got {weight!r}", field="gpu_demand_weights"
            )
        if demand <= num_gpus and weight > 0:  # demands the cluster cannot hold are dropped
            demands.append(int(demand))
            probs.append(float(weight))
    if not demands:
        raise DuettoInputError(
            f"no demand with positive weight fits the cluster's {num_gpus} GPUs", field="gpu_demand_weights"
        )
    p = np.asarray(probs)
    return np.asarray(demands, dtype=np.int64), p / p.sum()


def generate_instance(
    num_jobs: int,
    nodes: int,
    gpus_per_node: int,
    seed: int,
    *,
    arrivals: Literal["zero", "poisson"] = "zero",
    load: float = 1.0,
    xi_range: tuple[float, float] = (1.0, 2.0),
    duration_range: tuple[float, float] = (60.0, 3600.0),
    gpu_demand_weights: Mapping[int, float] = DEFAULT_GPU_DEMAND_WEIGHTS,
    gpu_memory_gib: float = 32.0,
    memory_pressure: float = 0.3,
    capacity: int = 2,
    name: str | None = None,
) -> Instance:
    """Generate an instance of the standard random family.

    Parameters
    ----------
    num_jobs
        Number of jobs (ids ``j0, j1, ...``).
    nodes, gpus_per_node
        Cluster shape.
    seed
        Seed of ``numpy.random.default_rng``; the same seed gives the same instance.
    arrivals
        ``"zero"``: every job arrives at 0. ``"poisson"``: the first job arrives at 0, the gaps are
        exponential with mean ``mean(G_j·L_j) / (load · num_gpus)``, so the offered load
        ``Σ G_j·L_j / (num_gpus · arrival window)`` is about ``load`` (1.0 = the cluster's GPU
        capacity without sharing). Arrivals are rounded to whole seconds.
    load
        Offered load relative to the cluster's GPU capacity (Poisson arrivals only), > 0.
    xi_range
        ξ of every ordered pair of jobs is uniform in this range (>= 1), rounded to 2 decimals.
    duration_range
        Isolated durations ``L_j`` (seconds) are log-uniform in this range, rounded to whole
        seconds (at least 1 s).
    gpu_demand_weights
        Relative frequency of each GPU demand; demands larger than the cluster are dropped.
    gpu_memory_gib
        Memory of each GPU.
    memory_pressure
        Fraction (in [0, 1]) of jobs whose full-batch memory exceeds half a GPU, so two of them
        cannot share a GPU at full batch; the others need at most 40 % of a GPU at full batch.
    capacity
        ``C``, jobs per GPU at once.
    name
        Instance name; default ``random-n<jobs>-<nodes>x<gpus>-s<seed>``.

    Returns
    -------
    Instance
        With one profile ``p-<job id>`` per job, a :class:`HashedPairInterference` over all ordered
        pairs, and the generator's parameters in ``metadata``.

    Raises
    ------
    DuettoInputError
        An argument is out of range (the error names it).
    """
    num_jobs = _check_int(num_jobs, "num_jobs", 1)
    nodes = _check_int(nodes, "nodes", 1)
    gpus_per_node = _check_int(gpus_per_node, "gpus_per_node", 1)
    seed = _check_int(seed, "seed", 0)
    capacity = _check_int(capacity, "capacity", 1)
    if arrivals not in ("zero", "poisson"):
        raise DuettoInputError(f"must be 'zero' or 'poisson', got {arrivals!r}", field="arrivals")
    if isinstance(load, bool) or not isinstance(load, int | float) or not math.isfinite(load) or load <= 0:
        raise DuettoInputError(f"must be a finite number > 0, got {load!r}", field="load")
    xi_low, xi_high = _check_range(xi_range, "xi_range", 1.0, strict=False)
    dur_low, dur_high = _check_range(duration_range, "duration_range", 0.0, strict=True)
    if not isinstance(gpu_memory_gib, int | float) or not math.isfinite(gpu_memory_gib) or gpu_memory_gib <= 0:
        raise DuettoInputError(f"must be a finite number > 0, got {gpu_memory_gib!r}", field="gpu_memory_gib")
    if not isinstance(memory_pressure, int | float) or not 0.0 <= memory_pressure <= 1.0:
        raise DuettoInputError(f"must be a fraction in [0, 1], got {memory_pressure!r}", field="memory_pressure")
    cluster = Cluster(nodes, gpus_per_node, float(gpu_memory_gib), capacity)
    demands, demand_p = _demand_mix(gpu_demand_weights, cluster.num_gpus)

    rng = np.random.default_rng(seed)
    n = num_jobs
    # Draw every quantity as a whole vector, in a fixed order, so the stream is stable.
    gpus = rng.choice(demands, size=n, p=demand_p)
    batch = rng.choice(np.asarray(BATCH_SIZES), size=n)
    durations = np.maximum(1.0, np.round(np.exp(rng.uniform(math.log(dur_low), math.log(dur_high), size=n))))
    c_alpha = rng.uniform(*_COMPUTE_ALPHA, size=n)
    c_beta = rng.uniform(*_COMPUTE_BETA, size=n)
    m_alpha = rng.uniform(*_COMM_ALPHA, size=n)
    message = rng.uniform(*_MESSAGE_MB, size=n)
    delta = rng.uniform(*_DELTA, size=n)
    pressured = rng.random(size=n) < memory_pressure
    mem_fraction = np.where(pressured, rng.uniform(*_MEM_PRESSURE, size=n), rng.uniform(*_MEM_SMALL, size=n))
    base_share = rng.uniform(*_MEM_BASE_SHARE, size=n)
    gaps = rng.exponential(1.0, size=n)
    interference_seed = int(rng.integers(0, 2**62))

    jobs: list[Job] = []
    profiles: dict[str, Profile] = {}
    for i in range(n):
        job_id = f"j{i}"
        g, b = int(gpus[i]), int(batch[i])
        multi = g > 1
        full_memory = float(mem_fraction[i]) * cluster.gpu_memory_gib
        base = float(base_share[i]) * full_memory
        draft = Profile(
            name=f"p-{job_id}",
            compute_alpha=float(c_alpha[i]),
            compute_beta=float(c_beta[i]),
            comm_alpha=float(m_alpha[i]) if multi else 0.0,
            comm_beta=_COMM_BETA if multi else 0.0,
            message_size=float(message[i]) if multi else 0.0,
            inter_node_comm_factor=INTER_NODE_COMM_FACTOR,
            overlap_delta=float(delta[i]),
            memory_base_gib=base,
            memory_per_sample_gib=(full_memory - base) / b,
        )
        min_nodes = -(-g // gpus_per_node)
        t_draft = iteration_time(draft, b, 1, g, min_nodes)
        iterations = max(1, round(float(durations[i]) / t_draft))
        scale = float(durations[i]) / (iterations * t_draft)
        profile = Profile(
            name=draft.name,
            compute_alpha=draft.compute_alpha * scale,
            compute_beta=draft.compute_beta * scale,
            comm_alpha=draft.comm_alpha * scale,
            comm_beta=draft.comm_beta * scale,
            message_size=draft.message_size,
            inter_node_comm_factor=draft.inter_node_comm_factor,
            overlap_delta=draft.overlap_delta,
            memory_base_gib=draft.memory_base_gib,
            memory_per_sample_gib=draft.memory_per_sample_gib,
        )
        profiles[profile.name] = profile
        jobs.append(Job(job_id, 0.0, g, float(iterations), b, profile.name))

    if arrivals == "poisson":
        # Offered load = Σ G·L / (num_gpus · window); the window is about n · mean gap.
        mean_gap = float(np.mean(gpus * durations)) / (load * cluster.num_gpus)
        times = np.round(np.concatenate(([0.0], np.cumsum(gaps[1:] * mean_gap))))
        jobs = [
            Job(job.id, float(t), job.num_gpus, job.iterations, job.batch_size, job.profile)
            for job, t in zip(jobs, times, strict=True)
        ]

    metadata: dict[str, Any] = {
        "generator": "formulation.generator.generate_instance",
        "seed": seed,
        "num_jobs": num_jobs,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "arrivals": arrivals,
        "load": float(load),
        "xi_range": [xi_low, xi_high],
        "duration_range": [dur_low, dur_high],
        "gpu_demand_weights": {str(k): float(v) for k, v in sorted(gpu_demand_weights.items())},
        "gpu_memory_gib": float(gpu_memory_gib),
        "memory_pressure": float(memory_pressure),
        "capacity": capacity,
    }
    instance = Instance(
        cluster=cluster,
        jobs=tuple(jobs),
        profiles=profiles,
        interference=HashedPairInterference(interference_seed, xi_low, xi_high, decimals=2),
        name=name or f"random-n{num_jobs}-{nodes}x{gpus_per_node}-s{seed}",
        metadata=metadata,
    )
    # per-stage times from each job's Eq. 1-3 profile, so Muri runs in `duetto gap` (formulation/stages.py)
    return with_derived_stages(instance)
