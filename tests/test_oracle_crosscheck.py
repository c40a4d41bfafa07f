"""Cross-checks of the exact oracle: CP-SAT against the Pyomo model (HiGHS), both against a brute-force
enumerator on tiny instances, every schedule against the independent validator.

All solves run in worker processes (``solvers.solve`` / ``solve_many``): OR-Tools is never imported into
the test process (highspy is, for the pair-coupled LP, as in ``solve``'s own parent process).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from formulation.cluster import Cluster
from formulation.discretize import choose_slot, discretize
from formulation.generator import generate_instance
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference, TableInterference
from formulation.relaxation import pair_coupled_bound
from formulation.speed import Profile
from formulation.validator import validate
from solvers import Result, SolveStatus, solve_many
from solvers.warmstart import warm_start

# --- instance families ------------------------------------------------------------------------------

_KINDS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("pays", {"xi_range": (1.0, 1.3)}),  # sharing nearly free: the optimum shares
    ("hurts", {"xi_range": (1.7, 2.0)}),  # sharing costs about as much as it gives: waiting wins
    ("memory", {"memory_pressure": 0.9, "xi_range": (1.0, 1.6)}),  # many pairs fit only in slower modes
    ("mixed", {}),  # the standard family: ξ in [1, 2], 30 % memory pressure
)
_SHAPES = ((1, 4), (2, 2), (2, 4), (1, 6))  # (nodes, GPUs per node): 4-8 GPUs
SLOT_TARGET = 7  # slots over the estimated makespan: small models, so both solvers prove optimality fast


def crosscheck_family(count: int = 30, max_jobs: int = 8) -> list[tuple[str, Instance]]:
    """``count`` small random instances (4-8 jobs, 4-8 GPUs, gangs, Poisson arrivals in a third)."""
    family = []
    for idx in range(count):
        name, kwargs = _KINDS[idx % len(_KINDS)]
        # HiGHS needs long to prove that sharing does not pay on 7-8 jobs: keep those smaller here
        jobs = 4 + idx % (3 if name == "hurts" else 5)
        nodes, per_node = _SHAPES[idx % len(_SHAPES)]
        arrivals: Literal["zero", "poisson"] = "poisson" if idx % 3 == 0 else "zero"
        instance = generate_instance(min(jobs, max_jobs), nodes, per_node, 1000 + idx, arrivals=arrivals, **kwargs)
        family.append((f"{name}-{idx}", instance))
    return family


def shares(result: Result) -> bool:
    """Whether two jobs of the result's schedule hold a common GPU at the same time."""
    assert result.schedule is not None
    plans = result.schedule.plans
    for a, b in itertools.combinations(plans, 2):
        if a.claimed_completion is None or b.claimed_completion is None:
            continue
        overlap = a.start < b.claimed_completion and b.start < a.claimed_completion
        if overlap and set(a.segments[0].gpus) & set(b.segments[0].gpus):
            return True
    return False


def check_against_validator(instance: Instance, result: Result) -> None:
    """The schedule passes the validator in slotted mode and its recomputed objective is the result's."""
    assert result.schedule is not None
    assert result.schedule.slot is not None
    report = validate(instance, result.schedule)
    assert report.ok, [str(v) for v in report.violations[:3]]
    if result.objective_kind == "jct":
        recomputed = report.total_jct(instance)
    else:
        recomputed = max(report.completion.values()) - min(job.arrival for job in instance.jobs)
    assert round(recomputed, 6) == round(result.objective, 6)
    assert result.bound <= result.objective + 1e-6


# --- HiGHS vs CP-SAT on 30 instances ------------------------------------------------------------------


@pytest.fixture(scope="module")
def crosscheck_results() -> dict[str, Any]:
    family = crosscheck_family()
    instances = [instance for _, instance in family]
    slots = [choose_slot(instance, SLOT_TARGET) for instance in instances]
    cpsat = solve_many(instances, "cpsat", time_limit=30, slot=slots)  # type: ignore[arg-type]
    highs = solve_many(instances, "highs", time_limit=45, slot=slots)  # type: ignore[arg-type]
    # branch-and-price with its tree and leaf checks alone: no CP-SAT beside it, no coupled LP
    bnp = solve_many(
        instances,
        "bnp",
        time_limit=60,
        slot=slots,  # type: ignore[arg-type]
        coupled_bound=False,
        options={"primal": False},
    )
    return {"family": family, "cpsat": cpsat, "highs": highs, "bnp": bnp}


def test_family_covers_the_required_cases(crosscheck_results: dict[str, Any]) -> None:
    family = crosscheck_results["family"]
    assert len(family) >= 30
    sizes = {len(instance.jobs) for _, instance in family}
    gpus = {instance.cluster.num_gpus for _, instance in family}
    assert sizes == set(range(4, 9)) and gpus <= set(range(4, 9))
    assert any(job.num_gpus > 1 for _, instance in family for job in instance.jobs)
    # memory forbids some pairs at full batch in the "memory" instances
    memory_bound = 0
    for name, instance in family:
        if name.startswith("memory"):
            full = [instance.modes(job.id)[0].memory_gib for job in instance.jobs]
            memory_bound += any(a + b > instance.cluster.gpu_memory_gib for a, b in itertools.combinations(full, 2))
    assert memory_bound >= 5
    # the optimum shares a GPU in some instances and never in others
    shared = [shares(result) for result in crosscheck_results["cpsat"]]
    assert any(shared) and not all(shared)


def test_highs_and_cpsat_reach_the_same_proven_optimum(crosscheck_results: dict[str, Any]) -> None:
    for (name, _), a, b in zip(
        crosscheck_results["family"], crosscheck_results["cpsat"], crosscheck_results["highs"], strict=True
    ):
        assert a.status is SolveStatus.OPTIMAL, (name, a.status, a.message)
        assert b.status is SolveStatus.OPTIMAL, (name, b.status, b.message)
        assert round(a.objective, 6) == round(b.objective, 6), name
        assert a.gap == 0.0 and b.gap == 0.0


def test_branch_and_price_proves_the_same_optimum_by_its_tree(crosscheck_results: dict[str, Any]) -> None:
    trees = 0
    family, cpsat, bnp = crosscheck_results["family"], crosscheck_results["cpsat"], crosscheck_results["bnp"]
    for (name, _), a, b in zip(family, cpsat, bnp, strict=True):
        assert b.status is SolveStatus.OPTIMAL, (name, b.status, b.message, b.stats["lane_bound"])
        assert round(a.objective, 6) == round(b.objective, 6), name
        assert b.solver == "bnp" and b.gap == 0.0
        tree = b.stats["lane_bound"]
        assert tree["method"] == "branch-and-price", name
        if tree.get("nodes"):
            # its bound never passes the optimum, and the proof came from the tree, not a solver
            assert tree["bound_slots"] <= b.stats["objective_slots"] + 1e-6, name
            trees += 1
            assert tree["nodes"] > 1 or tree["leaf_checks"] > 0 or tree["root_slots"] > tree["incumbent_slots"] - 1
    assert trees >= 15  # the rest were proven by the order-statistics bound before the tree started
    checked = sum(result.stats["lane_bound"].get("leaf_checks") or 0 for result in crosscheck_results["bnp"])
    assert checked >= 5


def test_every_schedule_passes_the_validator(crosscheck_results: dict[str, Any]) -> None:
    for (_, instance), a, b, c in zip(
        crosscheck_results["family"],
        crosscheck_results["cpsat"],
        crosscheck_results["highs"],
        crosscheck_results["bnp"],
        strict=True,
    ):
        check_against_validator(instance, a)
        check_against_validator(instance, b)
        check_against_validator(instance, c)


def test_optimum_never_worse_than_warm_start(crosscheck_results: dict[str, Any]) -> None:
    for result in crosscheck_results["cpsat"]:
        assert result.objective <= result.stats["warm_start_objective"] + 1e-6


def test_coupled_lp_bound_never_exceeds_the_proven_optimum(crosscheck_results: dict[str, Any]) -> None:
    # the pair-coupled LP (formulation.relaxation) on every instance — gangs, Poisson arrivals,
    # memory-restricted pairs, pairs too large to run side by side, free and costly sharing — solved
    # here to its optimum (next to a solve it races the solver's proof and may be cancelled); its
    # bound is valid on all, and so is every bound the solves took from it
    for (name, instance), result in zip(crosscheck_results["family"], crosscheck_results["cpsat"], strict=True):
        assert result.status is SolveStatus.OPTIMAL, name
        optimum = result.stats["objective_slots"]
        base = discretize(instance, slot=result.stats["problem"]["slot_seconds"])
        problem = base.with_upper_bound(warm_start(base))
        for outcome in (pair_coupled_bound(problem), pair_coupled_bound(problem, window_slots=1)):
            assert outcome.status == "optimal", (name, outcome.status)
            assert outcome.value <= optimum + 1e-6, name
        summary = result.stats["coupled_bound"]
        if summary.get("bound_slots") is not None:
            assert summary["bound_slots"] <= optimum + 1e-6, name


@pytest.mark.slow
def test_larger_crosscheck_slow() -> None:
    """Eight jobs everywhere, including where sharing hurts (HiGHS takes tens of seconds there)."""
    family = [
        (name, generate_instance(8, *_SHAPES[i % 4], 2000 + i, **kwargs)) for i, (name, kwargs) in enumerate(_KINDS * 3)
    ]
    instances = [instance for _, instance in family]
    slots = [choose_slot(instance, 10) for instance in instances]
    cpsat = solve_many(instances, "cpsat", time_limit=120, slot=slots)  # type: ignore[arg-type]
    highs = solve_many(instances, "highs", time_limit=300, slot=slots)  # type: ignore[arg-type]
    for (name, instance), a, b in zip(family, cpsat, highs, strict=True):
        check_against_validator(instance, a)
        check_against_validator(instance, b)
        if a.proven_optimal and b.proven_optimal:
            assert round(a.objective, 6) == round(b.objective, 6), name
        # each one's schedule respects the other's proven bound
        assert a.objective >= b.bound - 1e-6 and b.objective >= a.bound - 1e-6, name


# --- Theorem 1: waiting can beat sharing ------------------------------------------------------------


def two_jobs_one_gpu(xi: float, iterations: tuple[int, int] = (10, 10)) -> Instance:
    """Two one-GPU jobs on one GPU, each 1 s per iteration: sequential or shared (Castor Fig. 1)."""
    profile = Profile("p", compute_alpha=1.0, memory_base_gib=1.0)
    jobs = [Job("a", 0.0, 1, iterations[0], 1, "p"), Job("b", 0.0, 1, iterations[1], 1, "p")]
    return Instance(Cluster(1, 1, 16.0), tuple(jobs), {"p": profile}, ConstantInterference(xi), name=f"theorem1-xi{xi}")


THEOREM1 = {
    # ξ = 1.9: together both finish at 19 s (total 38 s); one after the other 10 s + 20 s = 30 s
    "waiting": (two_jobs_one_gpu(1.9), 30.0, False),
    # ξ = 1.2: together both finish at 12 s (total 24 s) < 30 s sequential
    "sharing": (two_jobs_one_gpu(1.2), 24.0, True),
    # a: 20 s, b: 4 s, ξ = 1.9: b first (4 + 24 = 28 s) beats a first (20 + 24 s) and sharing
    "short-first": (two_jobs_one_gpu(1.9, (20, 4)), 28.0, False),
}


@pytest.fixture(scope="module")
def theorem1_results() -> dict[str, list[Result]]:
    instances = [instance for instance, _, _ in THEOREM1.values()]
    return {solver: solve_many(instances, solver, time_limit=30, slot=1.0) for solver in ("cpsat", "highs")}


@pytest.mark.parametrize("solver", ["cpsat", "highs"])
@pytest.mark.parametrize("case", list(THEOREM1))
def test_theorem1_waiting_or_sharing(theorem1_results: dict[str, list[Result]], solver: str, case: str) -> None:
    instance, optimum, shared = THEOREM1[case]
    result = theorem1_results[solver][list(THEOREM1).index(case)]
    assert result.status is SolveStatus.OPTIMAL
    assert round(result.objective, 6) == optimum
    assert shares(result) is shared
    check_against_validator(instance, result)
    if case == "short-first":
        assert result.schedule is not None
        starts = {plan.job_id: plan.start for plan in result.schedule.plans}
        assert starts["b"] == 0.0 and starts["a"] == 4.0


# --- brute force on tiny instances ------------------------------------------------------------------


@dataclass(frozen=True)
class _Choice:
    start: int
    gpus: tuple[int, ...]
    steps: int


def _simulate(instance: Instance, slot: float, plan: dict[str, _Choice]) -> dict[str, float] | None:
    """Independent slotted simulation (SPEC.md): completion times, or None if a rule is broken."""
    cluster = instance.cluster
    jobs = list(instance.jobs)
    progress = {job.id: 0.0 for job in jobs}
    done: dict[str, float] = {}
    t = 0
    limit = 10_000
    while len(done) < len(jobs):
        running = [job for job in jobs if job.id not in done and plan[job.id].start <= t]
        for gpu in range(cluster.num_gpus):
            on = [job for job in running if gpu in plan[job.id].gpus]
            if len(on) > cluster.capacity:
                return None
            memory = sum(instance.profile_of(job).memory_gib(job.batch_size // plan[job.id].steps) for job in on)
            if memory > cluster.gpu_memory_gib + 1e-9:
                return None
            for a, b in itertools.combinations(on, 2):
                if instance.ratio(a, b) is None or instance.ratio(b, a) is None:
                    return None
        for job in running:
            choice = plan[job.id]
            nodes = cluster.nodes_spanned(choice.gpus)
            xi = 1.0
            for other in running:
                if other is not job and set(plan[other.id].gpus) & set(choice.gpus):
                    xi = max(xi, instance.ratio(job, other) or 1.0)
            progress[job.id] += slot / (instance.iteration_time(job, choice.steps, nodes) * xi)
        for job in running:
            if progress[job.id] >= job.iterations * (1 - 1e-9):
                done[job.id] = (t + 1) * slot
        t += 1
        if t > limit:
            raise AssertionError("simulation did not finish")
    return done


def brute_force(instance: Instance, slot: float, objective: str = "jct") -> float:
    """Optimum over every start slot, GPU set and accumulation mode (GPU 0 given to the first job to
    break the GPU symmetry), by depth-first search with the bound ``start + alone duration``."""
    cluster = instance.cluster
    jobs = list(instance.jobs)
    alone = {job.id: math.ceil(instance.isolated_duration(job) / slot - 1e-9) for job in jobs}  # fewest slots
    release = {job.id: math.ceil(job.arrival / slot - 1e-9) for job in jobs}
    # the serial schedule (arrival order, alone, fastest mode) bounds the optimum; a job of a schedule at
    # least as good cannot start later than that bound minus the others' earliest completions
    serial: dict[str, _Choice] = {}
    clock = 0
    for job in sorted(jobs, key=lambda j: j.arrival):
        steps = min(instance.modes(job.id), key=lambda m: m.iteration_time).steps
        serial[job.id] = _Choice(max(clock, release[job.id]), tuple(range(job.num_gpus)), steps)
        clock = serial[job.id].start + alone[job.id]
    serial_done = _simulate(instance, slot, serial)
    assert serial_done is not None
    latest_start = {}
    for job in jobs:
        if objective == "jct":
            bound = sum(round(c / slot) for c in serial_done.values())
            others = sum(release[k.id] + alone[k.id] for k in jobs if k is not job)
            latest_start[job.id] = bound - others - alone[job.id]
        else:
            latest_start[job.id] = max(round(c / slot) for c in serial_done.values()) - alone[job.id]
    options: dict[str, list[_Choice]] = {}
    for index, job in enumerate(jobs):
        sets = list(itertools.combinations(range(cluster.num_gpus), job.num_gpus))
        if index == 0:
            sets = [s for s in sets if 0 in s]
        options[job.id] = [
            _Choice(start, gpus, mode.steps)
            for start in range(release[job.id], latest_start[job.id] + 1)
            for gpus in sets
            for mode in instance.modes(job.id)
        ]
    arrivals = {job.id: job.arrival for job in jobs}
    best = math.inf
    plan: dict[str, _Choice] = {}

    def value(completions: dict[str, float]) -> float:
        if objective == "jct":
            return sum(completions[j] - arrivals[j] for j in completions)
        return max(completions.values()) - min(arrivals.values())

    def partial_bound() -> float:
        ends = {j: (c.start + alone[j]) * slot for j, c in plan.items()}
        if objective == "jct":
            return sum(ends[j] - arrivals[j] for j in ends)
        return max(ends.values()) - min(arrivals.values()) if ends else 0.0

    def search(depth: int) -> None:
        nonlocal best
        if depth == len(jobs):
            completions = _simulate(instance, slot, plan)
            if completions is not None:
                best = min(best, value(completions))
            return
        job = jobs[depth]
        for choice in options[job.id]:
            plan[job.id] = choice
            if partial_bound() < best - 1e-9:
                search(depth + 1)
            del plan[job.id]

    search(0)
    return best


def tiny_instances() -> list[tuple[str, Instance]]:
    """Hand-built instances of 2-4 jobs on 2 GPUs with 1-3 slot jobs (brute force stays fast)."""

    def profile(name: str, t: float, memory_per_sample: float = 0.0) -> Profile:
        return Profile(name, compute_alpha=t, memory_base_gib=2.0, memory_per_sample_gib=memory_per_sample)

    out = []
    # 1. three one-GPU jobs and a gang, sharing pays for some pairs only (table)
    profiles = {"p1": profile("p1", 1.0), "p2": profile("p2", 1.0), "p3": profile("p3", 1.0)}
    table = TableInterference(
        {
            ("p1", "p2"): 1.1,
            ("p2", "p1"): 1.2,
            ("p1", "p3"): 1.9,
            ("p3", "p1"): 1.8,
            ("p2", "p3"): None,
            ("p3", "p2"): None,
        },
        default=1.5,
    )
    jobs = [
        Job("a", 0, 1, 3, 1, "p1"),
        Job("b", 0, 1, 2, 1, "p2"),
        Job("c", 0, 2, 2, 1, "p3"),
        Job("d", 1, 1, 1, 1, "p2"),
    ]
    out.append(("table-4", Instance(Cluster(1, 2, 16.0), tuple(jobs), profiles, table)))
    # 2. waiting beats sharing (ξ = 2) with arrivals
    profiles = {"p": profile("p", 1.0)}
    jobs = [Job("a", 0, 1, 3, 1, "p"), Job("b", 0, 1, 2, 1, "p"), Job("c", 1, 1, 2, 1, "p"), Job("d", 2, 2, 1, 1, "p")]
    out.append(("xi2-4", Instance(Cluster(1, 2, 16.0), tuple(jobs), profiles, ConstantInterference(2.0))))
    # 3. memory: full batch (9 GiB) cannot share on 16 GiB, half batch (2 steps, slower) can
    mem = {"m": Profile("m", compute_alpha=0.5, compute_beta=0.25, memory_base_gib=1.0, memory_per_sample_gib=2.0)}
    jobs = [Job("a", 0, 1, 2, 4, "m"), Job("b", 0, 1, 2, 4, "m"), Job("c", 0, 1, 1, 4, "m")]
    out.append(("memory-3", Instance(Cluster(1, 2, 16.0), tuple(jobs), mem, ConstantInterference(1.1))))
    # 4. two nodes of one GPU: a gang across nodes pays the inter-node factor
    gang = {
        "g": Profile("g", compute_alpha=0.6, comm_alpha=0.4, inter_node_comm_factor=2.0, memory_base_gib=2.0),
        "p": profile("p", 1.0),
    }
    jobs = [Job("g", 0, 2, 2, 1, "g"), Job("a", 0, 1, 2, 1, "p"), Job("b", 0, 1, 3, 1, "p")]
    out.append(("gang-3", Instance(Cluster(2, 1, 16.0), tuple(jobs), gang, ConstantInterference(1.3))))
    # 5. one of the standard random family (3 jobs, 1-4 slots of 60 s, every accumulation mode)
    out.append(("random-3", generate_instance(3, 1, 2, 304, duration_range=(60, 240), arrivals="zero")))
    return out


TINY_SLOTS = {"random-3": 60.0}


@pytest.mark.parametrize("objective", ["jct", "makespan"])
def test_brute_force_agrees_on_tiny_instances(objective: str) -> None:
    tiny = tiny_instances()
    instances = [instance for _, instance in tiny]
    slots: list[float | None] = [TINY_SLOTS.get(name, 1.0) for name, _ in tiny]
    results = {
        solver: solve_many(instances, solver, time_limit=30, slot=slots, objective=objective)
        for solver in ("cpsat", "highs")
    }
    for index, (name, instance) in enumerate(tiny):
        expected = brute_force(instance, TINY_SLOTS.get(name, 1.0), objective)
        for solver in ("cpsat", "highs"):
            result = results[solver][index]
            assert result.status is SolveStatus.OPTIMAL, (name, solver, result.message)
            assert round(result.objective, 6) == round(expected, 6), (name, solver, objective)
            check_against_validator(instance, result)
