"""The Pyomo model of the slotted problem: structure, warm starts, export, and optimality against a
brute-force enumeration written here (independent of the model and of ``discretize.evaluate``).

Solves run through :func:`solvers.api.solve` (a worker subprocess): highspy must not be imported
into the pytest process, which may also hold OR-Tools.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pyomo.environ as pyo
import pytest

from formulation.discretize import SlotSolution, SlottedProblem, choose_slot, discretize, is_canonical
from formulation.errors import DuettoInputError
from formulation.generator import generate_instance
from formulation.instance import Instance
from formulation.pyomo_model import (
    ModelOptions,
    apply_warm_start,
    build_pyomo_model,
    canonical_labels,
    export_model,
    extract_solution,
)
from formulation.validator import validate
from solvers.api import solve
from solvers.backend_protocol import SolverUnavailableError
from solvers.result import SolveStatus
from solvers.warmstart import warm_start

# --- tiny instances ----------------------------------------------------------------------------------

# (jobs, nodes, gpus per node, seed, target slots): small enough for a brute-force enumeration.
TINY = [
    (3, 1, 2, 0, 8),
    (3, 1, 3, 9, 8),
    (3, 1, 2, 7, 8),  # accumulation-step modes that trade speed for memory
    (3, 2, 2, 5, 8),  # two-GPU jobs with one_node / multi_node modes
    (3, 2, 2, 10, 8),
    (4, 1, 2, 3, 6),
]
# In every one of them the optimum beats the greedy warm start (checked below), so the solver has
# to find it rather than confirm its start.


def tiny_instance(n: int, nodes: int, gpn: int, seed: int) -> Instance:
    return generate_instance(n, nodes, gpn, seed, duration_range=(60, 600), gpu_demand_weights={1: 0.6, 2: 0.4})


def tiny_problem(
    n: int, nodes: int, gpn: int, seed: int, target: int, objective: Literal["jct", "makespan"] = "jct"
) -> SlottedProblem:
    instance = tiny_instance(n, nodes, gpn, seed)
    problem = discretize(instance, slot=choose_slot(instance, target), objective=objective)
    return problem.with_upper_bound(warm_start(problem))


# --- an independent slot simulator and brute force ----------------------------------------------------


def simulate(problem: SlottedProblem, choice: list[tuple[int, tuple[int, ...], int]]) -> list[int] | None:
    """Exclusive end slots of a choice ``(start, gpus, mode)`` per job under the integer slotted rule,
    or ``None`` if a slot breaks capacity, memory or a forbidden pair."""
    n = problem.num_jobs
    units = problem.units_per_slot
    jobs = problem.jobs
    limit = problem.gpu_memory_gib * (1 + 1e-9) + 1e-9
    ends: list[int | None] = [None] * n
    done = [0] * n
    t = min(c[0] for c in choice)
    last = max(c[0] for c in choice) + sum(job.max_slots for job in jobs) + 1
    while any(e is None for e in ends):
        if t > last:
            return None
        running = [i for i in range(n) if ends[i] is None and choice[i][0] <= t]
        on_gpu: dict[int, list[int]] = {}
        for i in running:
            for g in choice[i][1]:
                on_gpu.setdefault(g, []).append(i)
        for members in on_gpu.values():
            if len(members) > problem.capacity:
                return None
            if len(members) > 1:
                if sum(jobs[i].modes[choice[i][2]].memory_gib for i in members) > limit:
                    return None
                for a, b in itertools.combinations(members, 2):
                    if problem.speed[a][b] is None or problem.speed[b][a] is None:
                        return None
        for i in running:
            partners = {k for g in choice[i][1] for k in on_gpu[g] if k != i}
            done[i] += min([units] + [problem.speed[i][k] or 0 for k in partners])
        for i in running:
            if done[i] >= jobs[i].modes[choice[i][2]].work:
                ends[i] = t + 1
        t += 1
    return [int(e) for e in ends]  # type: ignore[arg-type]


def job_options(problem: SlottedProblem, i: int, fix_first: bool) -> list[tuple[int, tuple[int, ...], int]]:
    job = problem.jobs[i]
    gpn = problem.gpus_per_node
    result = []
    gpu_sets = list(itertools.combinations(range(problem.num_gpus), job.num_gpus))
    if fix_first:  # one node of identical GPUs: the first job's GPU set is a matter of labels
        gpu_sets = [tuple(range(job.num_gpus))]
    for m, mode in enumerate(job.modes):
        for gpus in gpu_sets:
            nodes = len({g // gpn for g in gpus})
            if mode.placement == "one_node" and nodes != 1:
                continue
            if mode.placement == "multi_node" and nodes < 2:
                continue
            for start in range(job.release, job.latest_end - mode.min_slots + 1):
                result.append((start, gpus, m))
    return result


def brute_force(problem: SlottedProblem, objective: str = "jct") -> int:
    """Best objective (slot units) over every start, GPU set and mode in the windows."""
    fix_first = problem.num_nodes == 1
    options = [job_options(problem, i, fix_first and i == 0) for i in range(problem.num_jobs)]
    best = math.inf
    for choice in itertools.product(*options):
        ends = simulate(problem, list(choice))
        if ends is None:
            continue
        value = sum(ends) if objective == "jct" else max(ends)
        best = min(best, value)
    assert math.isfinite(best)
    return int(best)


# --- structure ---------------------------------------------------------------------------------------


def _violations(model: pyo.ConcreteModel, tol: float = 1e-6) -> list[str]:
    """Constraints and bounds the current variable values break."""
    bad = []
    for con in model.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(con.body)
        if con.has_lb() and body < pyo.value(con.lower) - tol * max(1.0, abs(pyo.value(con.lower))):
            bad.append(f"{con.name}: {body} < {pyo.value(con.lower)}")
        if con.has_ub() and body > pyo.value(con.upper) + tol * max(1.0, abs(pyo.value(con.upper))):
            bad.append(f"{con.name}: {body} > {pyo.value(con.upper)}")
    for var in model.component_data_objects(pyo.Var):
        value = var.value
        if value is None:
            bad.append(f"{var.name} has no value")
        elif (var.lb is not None and value < var.lb - tol) or (var.ub is not None and value > var.ub + tol):
            bad.append(f"{var.name} = {value} outside [{var.lb}, {var.ub}]")
    return bad


def test_structure_of_a_tiny_model() -> None:
    problem = tiny_problem(3, 1, 3, 1, 8)
    model = build_pyomo_model(problem, "jct")
    index = model._duetto_index
    stats = index.stats
    assert stats["constraints"] > 0 and stats["binaries"] > 0
    # one z per job and GPU (no job takes all 3 GPUs), one gang row per job
    assert len(model.z) == problem.num_jobs * problem.num_gpus
    assert len(model.gang) == problem.num_jobs
    # order encoding exactly covers each window
    for i, job in enumerate(problem.jobs):
        assert index.start_vars[i] == range(job.release, job.latest_end - job.min_slots)
        assert index.fin_vars[i] == range(job.release + job.min_slots - 1, job.latest_end - 1)
    # every overlapping pair is classified once
    classified = index.share_pairs + index.conflict_pairs + index.disjoint_pairs
    assert sorted(classified) == sorted(problem.overlapping_pairs)
    # symmetry rows only with the option on
    plain = build_pyomo_model(problem, "jct", options=ModelOptions(symmetry_breaking=False))
    assert len(model.symmetry) > 0 and len(plain.symmetry) == 0
    assert isinstance(model.objective, pyo.Objective)
    with pytest.raises(DuettoInputError, match="objective"):
        build_pyomo_model(problem, "sum")


@pytest.mark.parametrize("spec", [*TINY, (8, 1, 4, 7, 30), (10, 2, 4, 8, 40)])
@pytest.mark.parametrize("objective", ["jct", "makespan"])
def test_warm_start_satisfies_every_constraint(spec: tuple[int, ...], objective: Literal["jct", "makespan"]) -> None:
    """The exactness direction 'every real solution is a model solution': the greedy's solution,
    written onto the variables, breaks no row; extracting it gives it back."""
    n, nodes, gpn, seed, target = spec
    problem = tiny_problem(n, nodes, gpn, seed, target, objective)
    solution = problem.upper_bound
    assert solution is not None and is_canonical(problem, solution)
    model = build_pyomo_model(problem, objective)
    assert apply_warm_start(model, solution)
    assert _violations(model) == []
    back = extract_solution(model, problem)
    for job_id, a in canonical_labels(problem, solution).items():
        assert (back[job_id].start, back[job_id].gpus, back[job_id].mode) == (a.start, a.gpus, a.mode)
    model_value = pyo.value(model.objective)
    assert model_value == pytest.approx(problem.upper_bound_value)


def test_warm_start_outside_the_windows_is_refused() -> None:
    problem = tiny_problem(3, 1, 2, 0, 8)
    assert problem.upper_bound is not None
    late: SlotSolution = {
        job_id: a.__class__(a.start + problem.horizon, a.gpus, a.mode) for job_id, a in problem.upper_bound.items()
    }
    model = build_pyomo_model(problem, "jct")
    assert not apply_warm_start(model, late)


def _parse_in_subprocess(path: Path) -> tuple[int, int]:
    """Columns and rows HiGHS reads from a model file (highspy stays out of this process)."""
    code = (
        "import sys, highspy; h = highspy.Highs(); h.setOptionValue('output_flag', False); "
        "assert h.readModel(sys.argv[1]) == highspy.HighsStatus.kOk; print(h.getNumCol(), h.getNumRow())"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    cols, rows = out.stdout.split()
    return int(cols), int(rows)


def test_export_mps_and_lp_files_parse(tmp_path: Path) -> None:
    problem = tiny_problem(4, 1, 3, 4, 12)
    model = build_pyomo_model(problem, "jct")
    stats = model._duetto_index.stats
    for suffix in (".mps", ".lp"):
        path = export_model(model, tmp_path / f"model{suffix}")
        assert path.exists() and path.stat().st_size > 0
        cols, rows = _parse_in_subprocess(path)
        # Pyomo's writers add a row and a column for the objective's constant (``ONE_VAR_CONSTANT``)
        # and leave out variables that appear in no row (fixed ones)
        assert rows in (stats["constraints"], stats["constraints"] + 1)
        assert stats["binaries"] <= cols <= stats["variables"] + 1
    with pytest.raises(DuettoInputError, match=r"\.mps or \.lp"):
        export_model(model, tmp_path / "model.txt")


# --- optimality against brute force (solved in a worker subprocess) ---------------------------------


@pytest.mark.parametrize("spec", TINY)
def test_highs_optimum_equals_brute_force(spec: tuple[int, ...]) -> None:
    n, nodes, gpn, seed, target = spec
    problem = tiny_problem(n, nodes, gpn, seed, target)
    expected_slots = brute_force(problem)
    assert problem.upper_bound_value is not None and expected_slots < problem.upper_bound_value
    instance = problem.instance
    result = solve(instance, "highs", time_limit=60, slot=problem.slot)
    assert result.status is SolveStatus.OPTIMAL, result.summary()
    expected_seconds = problem.objective_seconds(expected_slots)
    assert result.objective == pytest.approx(expected_seconds, abs=1e-6)
    assert result.bound == pytest.approx(expected_seconds, abs=1e-6)
    # the schedule passes the independent validator in slotted mode with the same objective
    assert result.schedule is not None and result.schedule.slot == problem.slot
    report = validate(instance, result.schedule, slotted=True)
    assert report.ok, report.violations
    total_jct = sum(report.completion[job.id] - job.arrival for job in instance.jobs)
    assert total_jct == pytest.approx(result.objective, abs=1e-6)


def test_highs_makespan_optimum_equals_brute_force() -> None:
    problem = tiny_problem(3, 2, 2, 5, 8, "makespan")
    expected_slots = brute_force(problem, "makespan")
    result = solve(problem.instance, "highs", time_limit=60, slot=problem.slot, objective="makespan")
    assert result.status is SolveStatus.OPTIMAL, result.summary()
    assert result.objective == pytest.approx(problem.objective_seconds(expected_slots, "makespan"), abs=1e-6)
    report = validate(problem.instance, result.schedule, slotted=True)  # type: ignore[arg-type]
    assert report.ok, report.violations
    first = min(job.arrival for job in problem.instance.jobs)
    assert max(report.completion.values()) - first == pytest.approx(result.objective, abs=1e-6)


def test_generic_pyomo_solver_and_missing_solver_message() -> None:
    problem = tiny_problem(3, 1, 2, 0, 8)
    result = solve(problem.instance, "pyomo:appsi_highs", time_limit=60, slot=problem.slot)
    assert result.status is SolveStatus.OPTIMAL, result.summary()
    assert result.objective == pytest.approx(problem.objective_seconds(brute_force(problem)), abs=1e-6)
    with pytest.raises(SolverUnavailableError, match="cbc"):
        solve(problem.instance, "pyomo:cbc", time_limit=10, slot=problem.slot)


# --- cross-check against CP-SAT (long: run with -m slow) ---------------------------------------------


@pytest.mark.slow
def test_highs_and_cpsat_reach_the_same_proven_optimum() -> None:
    """32 random instances of 4-6 jobs on 4-8 GPUs at the default slot length: wherever both solvers
    prove optimality (at least 30 of them, measured: 34 of 36 in docs/pyomo-model.md) the optimum is
    the same, and every schedule passes the validator in slotted mode."""
    from benchmarks.oracle_scaling import cross_check

    specs = [(n, nodes, gpn, seed) for n in (4, 5) for nodes, gpn in ((1, 4), (1, 8), (2, 4)) for seed in range(4)]
    specs += [(6, nodes, gpn, seed) for nodes, gpn in ((1, 8), (2, 4)) for seed in range(4)]
    table = cross_check(specs, time_limit=60, echo=False)
    assert bool(table["highs_valid"].all()) and bool(table["cpsat_valid"].all())
    both = table[table["both_proven"]]
    assert len(both) >= 30, table.to_string()
    assert bool(both["agree"].all()), both.to_string()
