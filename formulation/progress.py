"""Progress rules: how fast a running job advances. An instance carries one (``Instance.progress``).

Two rules, both documented in docs/model.md ("Progress rules"):

:data:`SPEC_PROGRESS` (``kind = "spec"``, every instance's default)
    SPEC.md's rule: rate ``1 / (t_iter · ξ_eff)``, ``ξ_eff`` the largest pairwise interference ratio over
    the jobs sharing any of the job's GPUs, continuous, changing whenever a partner starts or finishes.

:class:`MuriProgress` (``kind = "muri"``, Muri's simulation traces by default, any Muri trace with ``semantics="muri"``)
    What Muri's own simulator (Rivendile/Muri, ``simulator/``) computes, so that a replay of its traces
    means what its published numbers mean:

    * **Period.** A job alone does one iteration per ``t_iter · f_1`` seconds (``f_1 = 1.015``). The
      ``n ≥ 2`` jobs on one GPU form a *group*; each member does one iteration per group period
      ``T_M(group) · f_n / f_1`` (``f_2, f_3, f_4 = 1.33, 1.5, 1.37``), where ``T_M`` is Muri's
      simulator's interleaved period of the members' three stage times (:func:`muri_group_period`).
      A gang sharing different GPUs with different jobs runs at its slowest GPU (the largest period).
      The interference model is not used for speed (it still says which pairs may share).
    * **Overhead at events.** The schedule's *events* are the arrival of any job, the start or end of
      any segment and the completion of any job. Over an interval between two consecutive events that
      does not end with its own completion, a running job advances ``max(0, span − o) / period``: it
      loses ``o`` seconds, the sum of the per-model start overheads of the jobs in its group
      (:attr:`MuriProgress.overheads`; the largest such sum over its GPUs). The job completes at
      ``t_0 + (I_j − p_0) · period`` when that is not later than the next event (``t_0``, ``p_0``: the
      interval's start and the progress there): the interval in which a job completes pays no
      overhead. This is how Muri's simulator predicts completions; it also makes every event cost every
      running job ``o`` seconds (the simulator re-places every job at every event).

The simulator (:mod:`heuristics.loop`) and the validator (:mod:`formulation.validator`) implement the
rules independently; they share only this module's look-ups (like :mod:`formulation.speed`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from formulation.errors import DuettoInputError
from formulation.interference import interleaved_period
from formulation.speed import Profile

#: Muri's simulator's iteration-time factors by group size: alone, groups of 2, 3, 4 (``jobs.py``,
#: ``itertime_overhead_list``). A group's period is ``T_M · f_n / f_1``: the simulator stores ``f_n / f_1``
#: because the per-job ``f_1`` is already in each job's own iteration time, but the group period is
#: computed from the raw stage times, so ``f_1`` is not applied to it again.
MURI_STRETCH: tuple[float, ...] = (1.015, 1.33, 1.5, 1.37)
#: Muri's simulator's start overhead (seconds) for a model it has no profile for.
MURI_DEFAULT_OVERHEAD = 10.0


@dataclass(frozen=True, slots=True)
class SpecProgress:
    """SPEC.md's progress rule (the default): rate ``1 / (t_iter · ξ_eff)``."""

    kind: Literal["spec"] = "spec"


SPEC_PROGRESS = SpecProgress()


@dataclass(frozen=True)
class MuriProgress:
    """Muri's simulator's progress rule (module docstring).

    Parameters
    ----------
    stretch
        ``(f_1, f_2, ..., f_k)``: ``f_1`` multiplies a lone job's iteration time; a group of ``n ≥ 2``
        has period ``T_M · f_n / f_1`` (groups larger than ``k`` take ``f_k``). Default
        :data:`MURI_STRETCH`.
    overheads
        Start overhead in seconds per profile name (Muri's profiled per-model, per-GPU-count table; the
        Muri loader fills it). Profiles not listed take ``default_overhead``.
    default_overhead
        Seconds for profiles not in ``overheads`` (Muri's simulator: 10 s for an unknown model).
    """

    stretch: tuple[float, ...] = MURI_STRETCH
    overheads: Mapping[str, float] = field(default_factory=dict)
    default_overhead: float = MURI_DEFAULT_OVERHEAD
    kind: Literal["muri"] = "muri"
    _periods: dict[tuple[str, ...], float] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stretch", tuple(float(f) for f in self.stretch))
        object.__setattr__(self, "overheads", MappingProxyType({str(k): float(v) for k, v in self.overheads.items()}))
        if not self.stretch or any(not math.isfinite(f) or f <= 0 for f in self.stretch):
            raise DuettoInputError(
                f"must be a non-empty list of numbers > 0, got {self.stretch!r}", field="progress.stretch"
            )
        for name, seconds in self.overheads.items():
            if not math.isfinite(seconds) or seconds < 0:
                raise DuettoInputError(
                    f"overhead of profile '{name}' must be finite and >= 0, got {seconds!r}", field="progress.overheads"
                )
        if not math.isfinite(self.default_overhead) or self.default_overhead < 0:
            raise DuettoInputError(
                f"must be finite and >= 0, got {self.default_overhead!r}", field="progress.default_overhead"
            )

    def __hash__(self) -> int:
        return hash((self.stretch, tuple(sorted(self.overheads.items())), self.default_overhead))

    def overhead(self, profile: str) -> float:
        """Start overhead (seconds) of one job of profile ``profile``."""
        return self.overheads.get(profile, self.default_overhead)

    def solo_period(self, iteration_time: float) -> float:
        """Seconds per iteration of a job alone whose Eq. 3 iteration time is ``iteration_time``."""
        return iteration_time * self.stretch[0]

    def group_period(self, profiles: Sequence[Profile]) -> float:
        """Seconds per iteration of every member of a group of ``len(profiles) >= 2`` jobs on one GPU.

        Raises
        ------
        DuettoInputError
            A member's profile has no ``stage_times``.
        """
        key = tuple(sorted(p.name for p in profiles))
        cached = self._periods.get(key)
        if cached is not None:
            return cached
        stages = []
        for profile in sorted(profiles, key=lambda p: p.name):
            if profile.stage_times is None:
                raise DuettoInputError(
                    f"profile '{profile.name}' has no stage_times: Muri's progress rule needs them for a group",
                    field="stage_times",
                )
            stages.append(profile.stage_times)
        size = len(stages)
        factor = self.stretch[min(size, len(self.stretch)) - 1] / self.stretch[0]
        value = muri_group_period(stages) * factor
        self._periods[key] = value
        return value


ProgressRule = SpecProgress | MuriProgress


def muri_group_period(stage_times: Sequence[Sequence[float]]) -> float:
    """The interleaved period Muri's simulator charges a group (before its stretch factor).

    For three stages ``(data, GPU, network)`` per job and at most four jobs, the simulator pipelines the
    group over a cycle of four positions (job ``p`` of an ordering sits at position ``p``; positions
    beyond the group are empty) and finds the period by a recurrence over finish times ``F[0..8]``
    (``F[0] = 0``): for step ``i = 0 .. 7``, ``F[i+1]`` is the largest of ``F[i] + network`` of the job at
    position ``(i+1) mod 4``, ``F[i] + GPU`` of the job at ``(i+2) mod 4`` and (``i ≥ 1``)
    ``F[i−1] + data`` of the job at ``(i+3) mod 4`` (each only if that position holds a job; ``F[i+1] ≥
    0``). The period is ``F[i+1] − F[i−3]`` at the first ``i ≥ 4`` where it equals the previous cycle's
    ``F[i] − F[i−4]`` within a relative 10⁻³, else ``F[8] − F[4]``. The group takes the best ordering;
    a pair may instead run ``max(d_a, g_b + c_b) + max(d_b, g_a + c_a)`` when that is shorter.

    Other stage counts (not in the simulator's configuration for the public traces) fall back to Muri's
    Eq. 3 as :func:`formulation.interference.interleaved_period` computes it.

    Parameters
    ----------
    stage_times
        Per job, seconds per iteration in each stage.
    """
    if not stage_times:
        raise ValueError("a group needs at least one job")
    jobs = [tuple(float(t) for t in times) for times in stage_times]
    if len(jobs) > 4 or any(len(times) != 3 for times in jobs):
        return interleaved_period(jobs)[0]
    best = math.inf
    count = len(jobs)
    for order in itertools.permutations(jobs):
        finish = [0.0] * 9
        period = 0.0
        for i in range(8):
            value = finish[i + 1]
            if (i + 1) % 4 < count:
                value = max(value, finish[i] + order[(i + 1) % 4][2])
            if (i + 2) % 4 < count:
                value = max(value, finish[i] + order[(i + 2) % 4][1])
            if i > 0 and (i + 3) % 4 < count:
                value = max(value, finish[i - 1] + order[(i + 3) % 4][0])
            finish[i + 1] = value
            if i >= 4 and math.isclose(finish[i + 1] - finish[i - 3], finish[i] - finish[i - 4], rel_tol=1e-3):
                period = finish[i + 1] - finish[i - 3]
                break
        if not period > 0:
            period = finish[8] - finish[4]
        best = min(best, period)
    if count == 2:
        (d0, g0, c0), (d1, g1, c1) = jobs
        best = min(best, max(d0, g1 + c1) + max(d1, g0 + c0))
    return best
