"""Interference models: the ratio ξ_{j|k} >= 1 by which job j's iteration time grows next to job k.

Models are keyed by *profile names*, so a table can be per kind of job (measured pairs, e.g. Gavel)
or per job (give each job its own profile). ``None`` means the pair cannot share a GPU at all
(Gavel marks pairs that do not fit together with ``[0, 0]``).

Also here: Muri's interleaving of resource stages (Muri Eq. 3-4), since the ratio derived from
per-stage times and Muri's interleaving efficiency γ are the same computation.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol

import numpy as np

from formulation.errors import DuettoInputError
from formulation.speed import Profile


class InterferenceModel(Protocol):
    """Gives ξ of a victim profile next to another profile."""

    @property
    def kind(self) -> str:
        """Short name of the model family (``constant``, ``table``, ``stages``, ...)."""
        ...

    def ratio(self, victim: Profile, other: Profile) -> float | None:
        """ξ_{victim|other} >= 1, or ``None`` if the two may not share a GPU."""
        ...


@dataclass(frozen=True, slots=True)
class ConstantInterference:
    """Every pair slows both jobs by the same ratio ``xi``."""

    xi: float = 1.0
    kind: Literal["constant"] = "constant"

    def __post_init__(self) -> None:
        if not math.isfinite(self.xi) or self.xi < 1.0:
            raise DuettoInputError(f"interference ratio must be >= 1, got {self.xi!r}", field="interference.xi")

    def ratio(self, victim: Profile, other: Profile) -> float | None:
        return self.xi


@dataclass(frozen=True, slots=True)
class TableInterference:
    """ξ per ordered pair of profile names, e.g. from measured co-located throughputs.

    Parameters
    ----------
    pairs
        ``(victim, other) → ξ`` (or ``None``: the pair does not fit together).
    default
        ξ for pairs missing from the table; ``None`` forbids sharing for them.
    """

    pairs: Mapping[tuple[str, str], float | None]
    default: float | None = None
    kind: Literal["table"] = "table"

    def __post_init__(self) -> None:
        for (victim, other), xi in self.pairs.items():
            if xi is not None and (not math.isfinite(xi) or xi < 1.0):
                raise DuettoInputError(
                    f"interference ratio of '{victim}' next to '{other}' must be >= 1, got {xi!r}",
                    field="interference.pairs",
                )
        if self.default is not None and (not math.isfinite(self.default) or self.default < 1.0):
            raise DuettoInputError(f"must be >= 1, got {self.default!r}", field="interference.default")
        object.__setattr__(self, "pairs", MappingProxyType(dict(self.pairs)))

    def ratio(self, victim: Profile, other: Profile) -> float | None:
        return self.pairs.get((victim.name, other.name), self.default)

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.pairs.items(), key=lambda kv: kv[0])), self.default))


@dataclass(frozen=True, slots=True)
class HashedPairInterference:
    """ξ of every ordered pair of distinct profiles drawn uniformly in ``[low, high]`` from a seeded hash.

    The random family's interference: as if an ``n × n`` table had been drawn, but with O(1) memory and
    O(1) look-up, so instances of 10,000 jobs stay small. ``ξ = round(low + u·(high − low), decimals)``
    with ``u`` the first 8 bytes of ``blake2b(seed | victim | other)`` over 2^64. The two directions of
    a pair are independent draws; a profile next to itself gets ``low``.
    """

    seed: int
    low: float = 1.0
    high: float = 2.0
    decimals: int = 2
    kind: Literal["hashed_pairs"] = "hashed_pairs"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or not 1.0 <= self.low <= self.high:
            raise DuettoInputError(
                f"needs 1 <= low <= high, got [{self.low!r}, {self.high!r}]", field="interference.low"
            )
        if not 0 <= self.decimals <= 12:
            raise DuettoInputError(f"must be in 0..12, got {self.decimals!r}", field="interference.decimals")

    def ratio(self, victim: Profile, other: Profile) -> float | None:
        if victim.name == other.name:
            return self.low
        digest = hashlib.blake2b(f"{self.seed}|{victim.name}|{other.name}".encode(), digest_size=8).digest()
        fraction = int.from_bytes(digest, "big") / 2.0**64
        return round(self.low + fraction * (self.high - self.low), self.decimals)

    def ratios(self, pairs: Sequence[tuple[Profile, Profile]]) -> list[float | None]:
        """:meth:`ratio` of many ``(victim, other)`` pairs at once, bit-identical (the batch hook of
        :meth:`heuristics.placement.InstanceFacts.profile_ratios`)."""
        if not pairs:
            return []
        prefix = f"{self.seed}|".encode()
        messages = [prefix + f"{v.name}|{o.name}".encode() for v, o in pairs]
        values = self._draw(messages)
        same = [i for i, (v, o) in enumerate(pairs) if v.name == o.name]
        if same:
            values[same] = self.low
        return values.tolist()

    def ratio_matrix(self, victims: Sequence[Profile], others: Sequence[Profile]) -> np.ndarray:
        """``[i, k]`` = :meth:`ratio` ``(victims[i], others[k])`` for every pair, bit-identical, as one
        float array (never NaN: every pair may share). The per-pair hash is the cost, so the work is one
        ``blake2b`` call per pair and the rest vectorised: ~0.4 µs a pair instead of ~2.5 µs."""
        shape = (len(victims), len(others))
        if not victims or not others:
            return np.zeros(shape)
        tails = [f"|{o.name}".encode() for o in others]
        messages = [head + tail for head in [f"{self.seed}|{v.name}".encode() for v in victims] for tail in tails]
        values = self._draw(messages).reshape(shape)
        other_index = {o.name: k for k, o in enumerate(others)}
        for i, v in enumerate(victims):
            k = other_index.get(v.name)
            if k is not None:
                values[i, k] = self.low
        return values

    def _draw(self, messages: list[bytes]) -> np.ndarray:
        """``round(low + u·(high − low), decimals)`` per message, as :meth:`ratio` computes it."""
        blake2b = hashlib.blake2b
        digests = b"".join([blake2b(m, digest_size=8).digest() for m in messages])
        # uint64 -> float64 is correctly rounded (as int / float in Python); / 2^64 is exact.
        fraction = np.frombuffer(digests, dtype=">u8").astype(np.float64) / 2.0**64
        return round_decimals(self.low + fraction * (self.high - self.low), self.decimals)


@dataclass(frozen=True, slots=True)
class StageInterference:
    """ξ derived from per-stage times (Muri): the pair interleaves its stages in the best ordering,
    each job completes one iteration per interleaved period ``T`` (Muri Eq. 3), so
    ``ξ_{j|k} = T / Σ_r t_j^r``. Profiles without ``stage_times`` fall back to ``fallback``.
    """

    fallback: float | None = None
    kind: Literal["stages"] = "stages"
    _cache: dict[tuple[str, str], float | None] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def ratio(self, victim: Profile, other: Profile) -> float | None:
        key = (victim.name, other.name)
        cached = self._cache.get(key, -1.0)
        if cached != -1.0:
            return cached
        if victim.stage_times is None or other.stage_times is None:
            value = self.fallback
        else:
            own = sum(victim.stage_times)
            period, _ = interleaved_period([victim.stage_times, other.stage_times])
            value = max(1.0, period / own) if own > 0 else 1.0
        self._cache[key] = value
        return value


def round_decimals(values: np.ndarray, decimals: int) -> np.ndarray:
    """Python's ``round(x, decimals)`` of every element, bit-identical (``numpy.round`` is not: it scales,
    rounds and divides in floating point).

    Python rounds the exact binary value half-to-even to ``decimals`` places and returns the nearest
    double to that decimal, i.e. ``k / 10**decimals`` correctly rounded, which one IEEE division gives.
    ``k`` comes from the scaled value rounded to nearest, which is exact unless the scaled value lies
    within its rounding error of a half-integer: those elements (and huge or non-finite ones) go to
    Python's ``round`` one by one.
    """
    values = np.asarray(values, dtype=np.float64)
    scale = 10.0**decimals
    scaled = values * scale
    k = np.rint(scaled)
    out = k / scale
    # |scaled - exact| <= 1 ulp of scaled; a margin of 2^-40 relative (plus an absolute 2^-40) covers it.
    margin = np.abs(scaled) * 2.0**-40 + 2.0**-40
    doubtful = ~(np.abs(np.abs(scaled - k) - 0.5) > margin) | ~(np.abs(scaled) < 2.0**50)
    if doubtful.any():
        for index in np.flatnonzero(doubtful).tolist():
            out[index] = round(float(values[index]), decimals)
    return out


def interleaved_period(stage_times: Sequence[Sequence[float]]) -> tuple[float, tuple[int, ...]]:
    """Muri Eq. 3: the shortest per-iteration time ``T`` of a group interleaving its stages.

    Job ``i`` with offset ``o_i`` uses resource ``(j + o_i) mod k`` in slot ``j``; offsets are distinct
    (two jobs never use one resource at once) and the first job's offset is fixed to 0 (a rotation of
    all offsets gives the same ``T``). Every ordering is enumerated, as Muri does.

    Returns
    -------
    (T, offsets)
        The best period and the offsets that reach it.
    """
    if not stage_times:
        raise ValueError("a group needs at least one job")
    k = max(len(times) for times in stage_times)
    padded = [tuple(times) + (0.0,) * (k - len(times)) for times in stage_times]
    if len(padded) > k:
        raise ValueError(f"at most {k} jobs can interleave over {k} resource stages")
    best_period = math.inf
    best_offsets: tuple[int, ...] = ()
    for rest in itertools.permutations(range(1, k), len(padded) - 1):
        offsets = (0, *rest)
        period = sum(
            max(times[(slot + offset) % k] for times, offset in zip(padded, offsets, strict=True)) for slot in range(k)
        )
        if period < best_period - 1e-15:
            best_period, best_offsets = period, offsets
    return best_period, best_offsets


def interleaving_efficiency(stage_times: Sequence[Sequence[float]]) -> float:
    """Muri Eq. 4: γ, the average over resources of the fraction of the period they are busy."""
    period, _ = interleaved_period(stage_times)
    if period <= 0:
        return 1.0
    k = max(len(times) for times in stage_times)
    idle = 0.0
    for resource in range(k):
        busy = sum(times[resource] for times in stage_times if resource < len(times))
        idle += (period - busy) / period
    return 1.0 - idle / k


def describe(model: InterferenceModel) -> str:
    if isinstance(model, ConstantInterference):
        return f"constant ξ = {model.xi:g}"
    if isinstance(model, TableInterference):
        return f"table of {len(model.pairs)} pairs (default {model.default})"
    if isinstance(model, StageInterference):
        return f"from per-stage times (Muri), fallback {model.fallback}"
    if isinstance(model, HashedPairInterference):
        return f"random pairs ξ ∈ [{model.low:g}, {model.high:g}] (seed {model.seed})"
    return model.kind
