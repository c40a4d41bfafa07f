"""The problem: cluster, jobs, speed and interference model, instances, schedules, the validator,
metrics and the time-slotted integer program (SPEC.md)."""

from formulation.cluster import Cluster
from formulation.errors import DuettoInputError, InfeasibleInstanceError
from formulation.instance import Instance, Job, JobMode
from formulation.interference import (
    ConstantInterference,
    HashedPairInterference,
    InterferenceModel,
    StageInterference,
    TableInterference,
)
from formulation.schedule import JobPlan, Schedule, Segment
from formulation.speed import Profile, accumulation_options, iteration_time

__all__ = [
    "Cluster",
    "ConstantInterference",
    "DuettoInputError",
    "HashedPairInterference",
    "InfeasibleInstanceError",
    "Instance",
    "InterferenceModel",
    "Job",
    "JobMode",
    "JobPlan",
    "Profile",
    "Schedule",
    "Segment",
    "StageInterference",
    "TableInterference",
    "accumulation_options",
    "iteration_time",
]
