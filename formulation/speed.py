"""The iteration-time and memory model of a training job (Castor Eq. 1-3).

This module is the one place where iteration time is computed; the validator, the simulator, the
oracle and the runtime all call :func:`iteration_time`.

A :class:`Profile` describes one kind of job (a model at a batch size). Computation time per
sub-batch ``b`` is either affine, ``t_comp(b) = α_comp + β_comp·b`` (Eq. 1), or a measured table of
``b → seconds``. Communication of a multi-GPU job is ``t_comm = α_comm + β_comm·M`` (Eq. 2), scaled by
``inter_node_comm_factor`` when the gang spans more than one node, and zero for one GPU. With ``s``
gradient-accumulation steps the sub-batch is ``b = B/s`` and one iteration (one optimizer step over
the user's full batch ``B``) takes (Eq. 3)::

    t_iter(s) = (s-1)·t_comp(B/s) + (t_comp(B/s)^δ + t_comm^δ)^(1/δ)

``δ = 1`` means computation and all-reduce do not overlap (their times add); large ``δ`` means they
overlap fully (the maximum). Memory per GPU is affine in the sub-batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from formulation.errors import DuettoInputError


@dataclass(frozen=True, slots=True)
class Profile:
    """Speed and memory model of one kind of job.

    Parameters
    ----------
    name
        Unique name within an instance (jobs refer to it).
    compute_alpha, compute_beta
        Eq. 1: seconds per micro-step at sub-batch ``b`` are ``compute_alpha + compute_beta·b``.
        Ignored when ``compute_table`` is given.
    compute_table
        Measured computation seconds per sub-batch, as ``((b, seconds), ...)``. When present only
        these sub-batch sizes are allowed.
    comm_alpha, comm_beta, message_size
        Eq. 2 for gangs of more than one GPU: ``comm_alpha + comm_beta·message_size`` seconds.
    inter_node_comm_factor
        Multiplies ``t_comm`` when the gang spans more than one node (>= 1).
    overlap_delta
        ``δ`` of Eq. 3 (>= 1).
    memory_base_gib, memory_per_sample_gib
        Per-GPU memory at sub-batch ``b``: ``memory_base_gib + memory_per_sample_gib·b``.
    stage_times
        Optional per-iteration seconds spent in each resource stage (Muri: data/CPU, GPU, network),
        used by the interleaving model.
    """

    name: str
    compute_alpha: float = 0.0
    compute_beta: float = 0.0
    compute_table: tuple[tuple[int, float], ...] | None = None
    comm_alpha: float = 0.0
    comm_beta: float = 0.0
    message_size: float = 0.0
    inter_node_comm_factor: float = 1.0
    overlap_delta: float = 1.0
    memory_base_gib: float = 0.0
    memory_per_sample_gib: float = 0.0
    stage_times: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        where = f"profile '{self.name}'"
        if not self.name:
            raise DuettoInputError("profile name must not be empty", field="profiles.name")
        for field_name in (
            "compute_alpha",
            "compute_beta",
            "comm_alpha",
            "comm_beta",
            "message_size",
            "memory_base_gib",
            "memory_per_sample_gib",
        ):
            value = getattr(self, field_name)
            if not math.isfinite(value) or value < 0:
                raise DuettoInputError(f"must be finite and >= 0, got {value!r}", source=where, field=field_name)
        if not self.inter_node_comm_factor >= 1.0:
            raise DuettoInputError(
                f"must be >= 1, got {self.inter_node_comm_factor!r}", source=where, field="inter_node_comm_factor"
            )
        if not self.overlap_delta >= 1.0:
            raise DuettoInputError(f"must be >= 1, got {self.overlap_delta!r}", source=where, field="overlap_delta")
        if self.compute_table is not None:
            if not self.compute_table:
                raise DuettoInputError("must not be empty", source=where, field="compute_table")
            for sub_batch, seconds in self.compute_table:
                if sub_batch < 1 or not seconds > 0 or not math.isfinite(seconds):
                    raise DuettoInputError(
                        f"entry ({sub_batch}, {seconds}) needs sub-batch >= 1 and seconds > 0",
                        source=where,
                        field="compute_table",
                    )
        elif not self.compute_alpha + self.compute_beta > 0:
            raise DuettoInputError(
                "computation time is zero: give compute_alpha/compute_beta > 0 or a compute_table",
                source=where,
                field="compute_alpha",
            )
        if self.stage_times is not None and (
            not self.stage_times or any(not math.isfinite(t) or t < 0 for t in self.stage_times)
        ):
            raise DuettoInputError("must be a non-empty list of times >= 0", source=where, field="stage_times")

    def compute_time(self, sub_batch: int) -> float:
        """Eq. 1: seconds of one forward/backward pass over ``sub_batch`` samples."""
        if self.compute_table is not None:
            for size, seconds in self.compute_table:
                if size == sub_batch:
                    return seconds
            raise DuettoInputError(
                f"no measured computation time for sub-batch {sub_batch}", source=f"profile '{self.name}'"
            )
        return self.compute_alpha + self.compute_beta * sub_batch

    def comm_time(self, num_gpus: int, num_nodes: int = 1) -> float:
        """Eq. 2: all-reduce seconds per iteration (zero for a single GPU)."""
        if num_gpus <= 1:
            return 0.0
        base = self.comm_alpha + self.comm_beta * self.message_size
        return base * self.inter_node_comm_factor if num_nodes > 1 else base

    def memory_gib(self, sub_batch: int) -> float:
        """Per-GPU memory at ``sub_batch`` samples."""
        return self.memory_base_gib + self.memory_per_sample_gib * sub_batch

    def supports_sub_batch(self, sub_batch: int) -> bool:
        if self.compute_table is None:
            return sub_batch >= 1
        return any(size == sub_batch for size, _ in self.compute_table)


def iteration_time(profile: Profile, batch_size: int, steps: int, num_gpus: int, num_nodes: int = 1) -> float:
    """Eq. 3: seconds per iteration over the full batch with ``steps`` accumulation steps.

    Parameters
    ----------
    profile
        The job's profile.
    batch_size
        The user's per-GPU batch size ``B``.
    steps
        Accumulation steps ``s``; the sub-batch is ``B // s`` (``s`` must divide ``B``).
    num_gpus, num_nodes
        The gang's size and how many nodes it spans (communication grows across nodes).
    """
    if steps < 1 or batch_size % steps:
        raise DuettoInputError(f"accumulation steps {steps} do not divide batch size {batch_size}")
    sub_batch = batch_size // steps
    t_comp = profile.compute_time(sub_batch)
    t_comm = profile.comm_time(num_gpus, num_nodes)
    if t_comm == 0.0:
        last = t_comp
    else:
        delta = profile.overlap_delta
        last = (t_comp**delta + t_comm**delta) ** (1.0 / delta)
    return (steps - 1) * t_comp + last


def accumulation_options(profile: Profile, batch_size: int, max_steps: int | None = None) -> tuple[int, ...]:
    """Accumulation steps Algorithm 2 may try: powers of two ``s`` with ``B/s`` an integer sub-batch.

    Only sub-batches the profile can time are kept (a measured table restricts them).
    """
    options = []
    steps = 1
    while steps <= batch_size and (max_steps is None or steps <= max_steps):
        if batch_size % steps == 0 and profile.supports_sub_batch(batch_size // steps):
            options.append(steps)
        steps *= 2
    return tuple(options)
