"""Exact maximum-weight matching helpers (general graphs) for Muri's grouping.

Two exact routes to the *same* problem, so that one can check the other:

* :func:`blossom_matching` — Edmonds' blossom algorithm (rustworkx, :math:`O(n^3)`) on the item graph.
  rustworkx takes **integer** weights only, so float weights are quantised first
  (:func:`quantize`: ``round(w / resolution)``).
* :func:`class_matching` — the same problem when items fall into a few *classes* of interchangeable
  items (Muri: jobs with identical stage profiles). Every matching of the items maps to a class-level
  *b-matching* of the same weight — ``x[c, d]`` = number of matched pairs between classes ``c`` and ``d``
  (``x[c, c]`` pairs inside class ``c``), subject to ``Σ_{d≠c} x[c,d] + 2·x[c,c] ≤ n_c`` — and every
  such b-matching expands back to an item matching of the same weight (copies of a class are
  interchangeable), so the two problems have the same optimum.

  The b-matching is solved in one of two exact ways:

  1. **Edmonds' b-matching polytope** (:func:`edmonds_lp_matching`, up to
     :data:`MAX_LP_CLASSES` classes with items): the linear program with the degree constraints *and*
     every odd-set constraint ``x(E[S]) ≤ ⌊n(S)/2⌋`` (``S`` a set of classes with ``n(S)`` odd, loops
     inside ``S`` included) has integral vertices (Edmonds 1965; Schrijver, *Combinatorial
     Optimization*, Thm 31.2), so a small dense simplex solves the integer problem. Correctness does not
     rest on the theorem or on floating point: every answer carries a **certificate** — an integral
     feasible ``x`` and a dual bound ``U`` (valid for any non-negative multipliers, since the odd-set
     inequalities hold for every integral b-matching) with ``w·x > U − 1``; weights are integers, so
     ``w·x`` is optimal. Without a certificate the next route is used.
  2. A small integer program (``m(m+1)/2`` variables) solved by HiGHS' branch-and-bound through
     :func:`scipy.optimize.milp` with a zero gap (integer objective: the proven bound closes to the
     optimum). scipy carries its own HiGHS build; importing it beside OR-Tools was checked to work,
     unlike the ``highspy`` package.

"Exact" therefore means: optimal for the integer weights ``round(w / resolution)``; against the float
weights a returned matching is within ``(n/2)·resolution`` of the float optimum.
:func:`max_weight_matching` picks the route (``method="auto"``: :func:`use_classes`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import rustworkx as rx

#: Default quantisation step of float weights (weights are rounded to multiples of it).
DEFAULT_RESOLUTION = 1e-6

MatchingMethod = Literal["auto", "blossom", "classes"]


def quantize(weights: np.ndarray | Sequence[float] | float, resolution: float = DEFAULT_RESOLUTION) -> np.ndarray:
    """Scale float weights to the integers rustworkx needs: ``round(w / resolution)`` as ``int64``.

    Parameters
    ----------
    weights
        Finite float weights (any shape).
    resolution
        Quantisation step (> 0).

    Raises
    ------
    ValueError
        If ``resolution`` is not positive, a weight is not finite, or a scaled weight would overflow.
    """
    if not resolution > 0:
        raise ValueError(f"resolution must be > 0, got {resolution!r}")
    array = np.asarray(weights, dtype=float)
    if not np.all(np.isfinite(array)):
        raise ValueError("weights must be finite")
    scaled = np.rint(array / resolution)
    # Blossom duals reach about twice the largest weight, and the class route sums weights in float64:
    # stay far from int64 overflow and from float64 rounding.
    if scaled.size and np.max(np.abs(scaled)) > 2**40:
        raise ValueError(f"weights too large for resolution {resolution:g}: choose a coarser resolution")
    return scaled.astype(np.int64)


# --- plain blossom ------------------------------------------------------------------------------------


def blossom_matching(num_nodes: int, edges: Sequence[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """Maximum-weight matching of a general graph with integer weights (rustworkx blossom).

    Parameters
    ----------
    num_nodes
        Nodes are ``0..num_nodes-1``.
    edges
        ``(u, v, weight)`` with integer weights; edges with weight <= 0 can never raise the weight of a
        matching and are ignored.

    Returns
    -------
    list of (u, v)
        The matched pairs with ``u < v``, sorted.
    """
    graph = rx.PyGraph(multigraph=False)
    graph.add_nodes_from(range(num_nodes))
    graph.add_edges_from([(int(u), int(v), int(w)) for u, v, w in edges if w > 0 and u != v])
    if graph.num_edges() == 0:
        return []
    matching = rx.max_weight_matching(graph, max_cardinality=False, weight_fn=int)
    return sorted((min(u, v), max(u, v)) for u, v in matching)


def dense_blossom_matching(
    weights: np.ndarray, allowed: np.ndarray | None = None, *, resolution: float = DEFAULT_RESOLUTION
) -> list[tuple[int, int]]:
    """Plain blossom on a dense symmetric weight matrix (the reference the class route is checked against).

    Parameters
    ----------
    weights
        ``n × n`` symmetric float weights (the diagonal is ignored).
    allowed
        Optional ``n × n`` boolean matrix; ``False`` removes the edge.
    resolution
        Quantisation step for the integer weights.
    """
    matrix = np.asarray(weights, dtype=float)
    n = matrix.shape[0]
    upper = np.triu_indices(n, 1)
    values = matrix[upper]
    keep = np.isfinite(values)
    if allowed is not None:
        keep &= np.asarray(allowed, dtype=bool)[upper]
    rows, cols = upper[0][keep], upper[1][keep]
    integer = quantize(values[keep], resolution)
    positive = integer > 0
    edges = list(zip(rows[positive].tolist(), cols[positive].tolist(), integer[positive].tolist(), strict=True))
    return blossom_matching(n, edges)


# --- class-collapsed exact matching -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClassMatching:
    """An optimal class-level b-matching: ``counts[(c, d)]`` pairs between classes ``c <= d``."""

    counts: dict[tuple[int, int], int]
    weight: int  # total integer (quantised) weight

    def degree(self, num_classes: int) -> np.ndarray:
        """How many items of each class the b-matching uses."""
        degree = np.zeros(num_classes, dtype=np.int64)
        for (c, d), count in self.counts.items():
            degree[c] += count
            degree[d] += count
        return degree


#: The Edmonds LP enumerates all 2^a - 1 class subsets of the ``a`` classes with items; above this it is
#: too large and the integer program is used.
MAX_LP_CLASSES = 12


def _b_matching_variables(
    weights: np.ndarray, sizes: np.ndarray, allowed: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Class pairs ``(c <= d)`` that can carry pairs: positive weight, allowed, room for one pair."""
    m = len(sizes)
    cs, ds = np.triu_indices(m)
    upper = np.where(cs == ds, sizes[cs] // 2, np.minimum(sizes[cs], sizes[ds]))
    keep = (weights[cs, ds] > 0) & (upper > 0)
    if allowed is not None:
        keep &= np.asarray(allowed, dtype=bool)[cs, ds]
    return cs[keep], ds[keep], upper[keep]


def _dense_simplex(
    matrix: np.ndarray, rhs: np.ndarray, objective: np.ndarray, max_iterations: int = 20_000
) -> tuple[np.ndarray, np.ndarray] | None:
    """``max c·x`` s.t. ``A x <= b``, ``x >= 0`` with ``b >= 0`` (the slack basis is feasible).

    A plain tableau simplex: Dantzig's rule, switching to Bland's rule (which cannot cycle) after a run of
    degenerate pivots. Returns ``(x, y)`` — the final basic solution and the dual prices of the rows —
    or ``None`` if it did not finish. Callers verify the answer; this is only a fast search.
    """
    rows, cols = matrix.shape
    tableau = np.zeros((rows + 1, cols + rows + 1))
    tableau[:rows, :cols] = matrix
    tableau[:rows, cols : cols + rows] = np.eye(rows)
    tableau[:rows, -1] = rhs
    tableau[rows, :cols] = -objective
    basis = np.arange(cols, cols + rows)
    eps = 1e-9 * max(1.0, float(np.abs(objective).max(initial=0.0)))
    bland = False
    degenerate = 0
    for _ in range(max_iterations):
        reduced = tableau[rows, :-1]
        if bland:
            entering = np.flatnonzero(reduced < -eps)
            if not len(entering):
                break
            j = int(entering[0])
        else:
            j = int(np.argmin(reduced))
            if reduced[j] >= -eps:
                break
        column = tableau[:rows, j]
        positive = column > 1e-12
        if not positive.any():
            return None  # unbounded: impossible for a b-matching
        ratios = np.full(rows, np.inf)
        ratios[positive] = tableau[:rows, -1][positive] / column[positive]
        best = ratios.min()
        ties = np.flatnonzero(ratios <= best + 1e-12)
        i = int(ties[np.argmin(basis[ties])])
        degenerate = degenerate + 1 if best <= 1e-12 else 0
        if degenerate > 50:
            bland = True
        tableau[i] /= tableau[i, j]
        factor = tableau[:, j].copy()
        factor[i] = 0.0
        tableau -= np.outer(factor, tableau[i])
        basis[i] = j
    else:
        return None
    solution = np.zeros(cols + rows)
    solution[basis] = tableau[:rows, -1]
    return solution[:cols], tableau[rows, cols : cols + rows].copy()


def edmonds_lp_matching(
    class_weights: np.ndarray, class_sizes: Sequence[int] | np.ndarray, allowed: np.ndarray | None = None
) -> ClassMatching | None:
    """Exact class b-matching through Edmonds' b-matching polytope, with an optimality certificate.

    Returns ``None`` (use another route) when there are more than :data:`MAX_LP_CLASSES` classes with
    items or when the simplex answer cannot be certified. See the module docstring.
    """
    weights = np.asarray(class_weights)
    sizes = np.asarray(class_sizes, dtype=np.int64)
    cs, ds, upper = _b_matching_variables(weights, sizes, allowed)
    if not len(cs):
        return ClassMatching({}, 0)
    active = np.flatnonzero(sizes > 0)
    if len(active) > MAX_LP_CLASSES:
        return None
    m = len(sizes)
    variables = len(cs)
    # Degree rows: Σ_{d≠c} x[c,d] + 2·x[c,c] <= n_c.
    degree = np.zeros((m, variables))
    np.add.at(degree, (cs, np.arange(variables)), 1.0)
    np.add.at(degree, (ds, np.arange(variables)), 1.0)
    # Odd-set rows: x(E[S]) <= (n(S) - 1)/2 for every set S of classes with n(S) odd.
    masks = np.arange(1, 1 << len(active))
    members = np.zeros((len(masks), m), dtype=bool)
    members[:, active] = ((masks[:, None] >> np.arange(len(active))) & 1).astype(bool)
    totals = members @ sizes
    odd = totals % 2 == 1
    members, totals = members[odd], totals[odd]
    inside = (members[:, cs] & members[:, ds]).astype(float)
    odd_rhs = ((totals - 1) // 2).astype(float)
    objective = weights[cs, ds].astype(float)
    # Cutting planes: start from the degree rows and add the odd-set rows the current optimum violates
    # (all of them are checked each time, so the final optimum satisfies every row).
    chosen = np.zeros(len(odd_rhs), dtype=bool)
    answer: tuple[np.ndarray, np.ndarray] | None = None
    for _ in range(len(odd_rhs) + 1):
        matrix = np.vstack([degree, inside[chosen]])
        rhs = np.concatenate([sizes.astype(float), odd_rhs[chosen]])
        answer = _dense_simplex(matrix, rhs, objective)
        if answer is None:
            return None
        violated = (inside @ answer[0] > odd_rhs + 1e-7) & ~chosen
        if not violated.any():
            break
        chosen |= violated
    if answer is None:  # pragma: no cover - the loop always runs once
        return None
    x, prices = answer
    rounded = np.rint(x)
    if np.any(np.abs(x - rounded) > 1e-6) or np.any(rounded < 0) or np.any(matrix @ rounded > rhs + 1e-9):
        return None
    value = int(np.rint(objective @ rounded))
    # Certificate: for y >= 0, w·x' <= y·b + max(0, max(w - yA))·Σ upper for every integral b-matching x'
    # (the odd-set rows are valid inequalities for all of them). w·x > bound - 1 and integrality of the
    # weights prove x optimal.
    multipliers = np.maximum(prices, 0.0)
    slack = float(np.max(objective - multipliers @ matrix, initial=0.0))
    bound = float(multipliers @ rhs) + max(0.0, slack) * float(upper.sum())
    # Floating-point slack of the bound's evaluation (far below the integrality gap of 1).
    if value <= bound - 1.0 + 1e-4 + 1e-12 * abs(bound):
        return None
    counts = {(int(c), int(d)): int(k) for c, d, k in zip(cs, ds, rounded.astype(np.int64), strict=True) if k > 0}
    return ClassMatching(counts, value)


def class_matching_milp(
    class_weights: np.ndarray,
    class_sizes: Sequence[int] | np.ndarray,
    allowed: np.ndarray | None = None,
    *,
    time_limit: float = 60.0,
) -> ClassMatching:
    """Exact class b-matching as a small integer program (HiGHS branch-and-bound, zero gap).

    Raises
    ------
    RuntimeError
        If HiGHS does not prove optimality within ``time_limit``.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    weights = np.asarray(class_weights)
    sizes = np.asarray(class_sizes, dtype=np.int64)
    m = len(sizes)
    cs, ds, upper = _b_matching_variables(weights, sizes, allowed)
    if not len(cs):
        return ClassMatching({}, 0)
    variables = len(cs)
    rows = np.concatenate([cs, ds])
    cols = np.concatenate([np.arange(variables), np.arange(variables)])
    matrix = coo_array((np.ones(2 * variables), (rows, cols)), shape=(m, variables)).tocsc()
    objective = -weights[cs, ds].astype(float)
    result = milp(
        objective,
        integrality=np.ones(variables),
        bounds=Bounds(np.zeros(variables), upper.astype(float)),
        constraints=LinearConstraint(matrix, -np.inf, sizes.astype(float)),
        options={"mip_rel_gap": 0.0, "time_limit": time_limit, "presolve": True},
    )
    if result.status != 0 or result.x is None:
        raise RuntimeError(f"class matching not proven optimal: {result.message}")
    x = np.rint(result.x).astype(np.int64)
    counts = {(int(c), int(d)): int(k) for c, d, k in zip(cs, ds, x, strict=True) if k > 0}
    matching = ClassMatching(counts, int(sum(int(weights[c, d]) * k for (c, d), k in counts.items())))
    # The rounded solution must be feasible and reach HiGHS' objective (integer data: exact).
    if np.any(matching.degree(m) > sizes) or abs(matching.weight + result.fun) > 0.5:
        raise RuntimeError("class matching: rounded solution is infeasible or off the solver's optimum")
    return matching


def class_matching(
    class_weights: np.ndarray,
    class_sizes: Sequence[int] | np.ndarray,
    allowed: np.ndarray | None = None,
    *,
    time_limit: float = 60.0,
) -> ClassMatching:
    """Exact maximum-weight b-matching over classes of interchangeable items (integer weights).

    Solves ``max Σ_{c<=d} W[c,d]·x[c,d]`` subject to ``Σ_{d≠c} x[c,d] + 2·x[c,c] <= n_c`` and
    ``x`` integer >= 0 — the item matching problem with copies collapsed (see the module docstring):
    :func:`edmonds_lp_matching` when it can certify its answer, else :func:`class_matching_milp`.

    Parameters
    ----------
    class_weights
        ``m × m`` symmetric **integer** weights (quantise floats with :func:`quantize`).
    class_sizes
        ``n_c``, items per class.
    allowed
        Optional ``m × m`` boolean matrix; ``False`` forbids pairing the two classes.
    time_limit
        Safety limit for the integer program; reaching it raises.

    Raises
    ------
    ValueError
        Weights that are not an ``m × m`` integer matrix.
    RuntimeError
        If the integer program does not prove optimality.
    """
    weights = np.asarray(class_weights)
    sizes = np.asarray(class_sizes, dtype=np.int64)
    m = len(sizes)
    if weights.shape != (m, m):
        raise ValueError(f"class_weights must be {m} × {m}, got {weights.shape}")
    if not np.issubdtype(weights.dtype, np.integer):
        raise ValueError("class_weights must be integers: quantise floats with quantize()")
    certified = edmonds_lp_matching(weights, sizes, allowed)
    if certified is not None:
        return certified
    return class_matching_milp(weights, sizes, allowed, time_limit=time_limit)


def expand_class_matching(labels: Sequence[int], matching: ClassMatching) -> list[tuple[int, int]]:
    """Turn a class b-matching into item pairs.

    Items of a class are used in the order they appear in ``labels``: when a class is not fully matched,
    its *last* items stay unmatched (callers list items in priority order).
    """
    members: dict[int, list[int]] = {}
    for item, label in enumerate(labels):
        members.setdefault(int(label), []).append(item)
    cursor = dict.fromkeys(members, 0)
    pairs: list[tuple[int, int]] = []
    for (c, d), count in sorted(matching.counts.items()):
        for _ in range(count):
            u = members[c][cursor[c]]
            cursor[c] += 1
            v = members[d][cursor[d]]
            cursor[d] += 1
            pairs.append((min(u, v), max(u, v)))
    return sorted(pairs)


def class_labels(keys: Sequence[Hashable]) -> tuple[list[int], list[Hashable]]:
    """Map item keys to dense class ids (in order of first appearance)."""
    index: dict[Hashable, int] = {}
    labels = [index.setdefault(key, len(index)) for key in keys]
    return labels, list(index)


# --- front door ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatchingResult:
    """Matched item pairs, their total quantised weight, and how they were computed."""

    pairs: list[tuple[int, int]]
    weight: int
    method: str


def max_weight_matching(
    labels: Sequence[int] | np.ndarray,
    class_weights: np.ndarray,
    allowed: np.ndarray | None = None,
    *,
    method: MatchingMethod = "auto",
    resolution: float = DEFAULT_RESOLUTION,
) -> MatchingResult:
    """Exact maximum-weight matching of items whose pair weight depends only on their classes.

    Parameters
    ----------
    labels
        Class id (``0..m-1``) of each item; items are numbered by position.
    class_weights
        ``m × m`` symmetric float weights: pairing an item of class ``c`` with one of class ``d`` is worth
        ``class_weights[c, d]`` (also for ``c == d``). NaN forbids the pair.
    allowed
        Optional ``m × m`` boolean matrix; ``False`` forbids the pair.
    method
        ``"blossom"`` (rustworkx on the item graph), ``"classes"`` (exact b-matching on classes) or
        ``"auto"`` (:func:`use_classes`: the class route when it is expected to be faster).
    resolution
        Quantisation step of the weights.

    Returns
    -------
    MatchingResult
        Pairs ``(u, v)`` with ``u < v``; ``weight`` is the total quantised weight — identical for both
        methods, since both solve the same integer problem exactly.
    """
    labels_array = np.asarray(labels, dtype=np.int64)
    n = len(labels_array)
    weights = np.asarray(class_weights, dtype=float)
    m = weights.shape[0]
    mask = np.isfinite(weights)
    if allowed is not None:
        mask &= np.asarray(allowed, dtype=bool)
    integer = np.where(mask, quantize(np.where(mask, weights, 0.0), resolution), 0)
    if n < 2:
        return MatchingResult([], 0, "trivial")
    if method == "auto":
        method = "classes" if use_classes(n, m) else "blossom"
    if method == "classes":
        sizes = np.bincount(labels_array, minlength=m)
        solution = class_matching(integer, sizes, mask)
        return MatchingResult(expand_class_matching(labels_array.tolist(), solution), solution.weight, "classes")
    if method != "blossom":
        raise ValueError(f"unknown matching method {method!r}")
    item_weights = integer[np.ix_(labels_array, labels_array)]
    upper = np.triu_indices(n, 1)
    values = item_weights[upper]
    positive = values > 0
    edges = list(zip(upper[0][positive].tolist(), upper[1][positive].tolist(), values[positive].tolist(), strict=True))
    pairs = blossom_matching(n, edges)
    total = int(sum(int(item_weights[u, v]) for u, v in pairs))
    return MatchingResult(pairs, total, "blossom")


def class_level_matching(
    labels: Sequence[int] | np.ndarray,
    class_weights: np.ndarray,
    allowed: np.ndarray | None = None,
    *,
    method: MatchingMethod = "auto",
    resolution: float = DEFAULT_RESOLUTION,
) -> tuple[ClassMatching, str]:
    """:func:`max_weight_matching`, returned as its class-level b-matching (to cache and re-expand).

    Returns ``(matching, method used)``; :func:`expand_class_matching` turns it into item pairs.
    """
    result = max_weight_matching(labels, class_weights, allowed, method=method, resolution=resolution)
    weights = np.asarray(class_weights, dtype=float)
    mask = np.isfinite(weights) if allowed is None else np.isfinite(weights) & np.asarray(allowed, dtype=bool)
    integer = np.where(mask, quantize(np.where(mask, weights, 0.0), resolution), 0)
    solution = class_counts(labels, result.pairs, integer)
    return solution, result.method


def use_classes(num_items: int, num_classes: int) -> bool:
    """``method="auto"``'s rule (measured here): blossom costs about ``(n/100)^3 · 5`` ms; the Edmonds LP
    about a millisecond up to :data:`MAX_LP_CLASSES` classes; the integer program several ms to tens of
    ms. Blossom for small item counts or when too many classes would send the class route to the
    integer program; classes otherwise."""
    if num_items <= 24 or 2 * num_classes > num_items:
        return False
    return num_classes <= MAX_LP_CLASSES or num_items >= 160


def class_counts(
    labels: Sequence[int] | np.ndarray, pairs: Sequence[tuple[int, int]], weights: np.ndarray
) -> ClassMatching:
    """The class-level b-matching of an item matching (``weights``: the integer class weights)."""
    counts: dict[tuple[int, int], int] = {}
    total = 0
    for u, v in pairs:
        c, d = sorted((int(labels[u]), int(labels[v])))
        counts[(c, d)] = counts.get((c, d), 0) + 1
        total += int(weights[c, d])
    return ClassMatching(counts, total)


def matching_weight(pairs: Sequence[tuple[int, int]], weight_of: np.ndarray) -> float:
    """Sum of ``weight_of[u, v]`` over the pairs (a float check of a matching)."""
    return float(math.fsum(float(weight_of[u, v]) for u, v in pairs))
