"""Tesserae-T's packing weights as computed before issue 19: pair by pair through ``_pair_weight``.

Used by tests (identical schedules) and ``benchmarks.grouping_speed --reference`` (the speed-up of the
batched kind-pair table, measured in the same session).
"""

from __future__ import annotations

import numpy as np

from heuristics.placement import InstanceFacts
from heuristics.tesserae import TesseraePolicy


class PerPairWeights:
    """Mixin for a :class:`TesseraePolicy` (sub)class: the kind-pair weight table one pair at a time."""

    def _weight_table(self, facts: InstanceFacts, placed: list[str], pending: list[str]) -> np.ndarray:
        policy: TesseraePolicy = self  # type: ignore[assignment]
        rows = [[policy._pair_weight(facts, a, b) for b in pending] for a in placed]
        return np.array(rows, dtype=float).reshape(len(placed), len(pending))


class PerPairTesserae(PerPairWeights, TesseraePolicy):
    """Tesserae-T with the pre-issue-19 packing weights."""
