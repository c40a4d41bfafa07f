"""The studies from Python: ``duetto.gap_study``, ``duetto.scale_study`` and ``duetto.replay`` return
DataFrames.

They run the same code as ``duetto gap`` / ``duetto scale`` / ``duetto replay`` (:mod:`benchmarks`):
every schedule is validated; tasks run one after the other in this process (in parallel with
``workers=N``, or on Ray with ``ray_address``); with ``out``, a rerun resumes from the rows already
stored there, and the CSV tables and figures the commands write are written there. Without ``out``
the study runs in a temporary folder and only the DataFrame is kept.

Example::

    import duetto

    rows = duetto.gap_study(sizes=(4, 6), cluster="1x4", seeds=2, policies=["sjf-bsbf", "fifo"])
    print(rows.groupby("method")["gap"].median())
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from formulation.errors import DuettoInputError

__all__ = ["StudyFailedError", "gap_study", "replay", "scale_study"]


class StudyFailedError(RuntimeError):
    """Some tasks of a study raised; the rows of the tasks that finished are kept in ``out`` (a rerun
    with the same ``out`` runs only the failed ones)."""

    def __init__(self, failed: dict[str, str], out: Path | None) -> None:
        self.failed = dict(failed)
        first_key, first_message = next(iter(self.failed.items()))
        where = f"; the finished rows are kept in {out}" if out is not None else ""
        super().__init__(f"{len(self.failed)} task(s) failed, first {first_key}: {first_message}{where}")


@contextmanager
def _folder(out: str | Path | None) -> Iterator[tuple[Path, bool]]:
    """``(folder, kept)``: the user's folder, or a temporary one removed afterwards."""
    if out is not None:
        yield Path(out), True
        return
    with tempfile.TemporaryDirectory(prefix="duetto-study-") as folder:
        yield Path(folder), False


def _names(values: str | Sequence[str] | None, field: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    chosen = (values,) if isinstance(values, str) else tuple(values)
    if any(not isinstance(v, str) or not v for v in chosen):
        raise DuettoInputError(f"expected names, got {values!r}", field=field)
    return chosen


def _policies(values: str | Sequence[str] | None) -> tuple[str, ...]:
    """The chosen policies (every registered one for ``None``), each checked to exist."""
    from heuristics.registry import make_policy, policy_names

    chosen = _names(values, "policies")
    chosen = tuple(policy_names()) if chosen is None else chosen
    for name in chosen:
        make_policy(name)  # unknown → DuettoInputError listing the known names
    return chosen


def _solvers(values: str | Sequence[str]) -> tuple[str, ...]:
    """The chosen oracle backends, each checked to exist and to be installed."""
    from solvers.backends import check_available, resolve

    chosen = _names(values, "solvers") or ()
    for name in chosen:
        check_available(resolve(name))
    return chosen


def _sizes(values: int | Sequence[int], field: str) -> tuple[int, ...]:
    chosen = (values,) if isinstance(values, int) else tuple(values)
    if not chosen or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in chosen):
        raise DuettoInputError(f"expected job counts >= 1, got {values!r}", field=field)
    return chosen


def _seeds(seeds: int | Sequence[int]) -> tuple[int, ...]:
    """``3`` → seeds 0, 1, 2; a sequence is taken as the seeds themselves."""
    if isinstance(seeds, int):
        if isinstance(seeds, bool) or seeds < 1:
            raise DuettoInputError(f"must be >= 1, got {seeds}", field="seeds")
        return tuple(range(seeds))
    chosen = tuple(seeds)
    if not chosen or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in chosen):
        raise DuettoInputError(f"expected seeds >= 0, got {seeds!r}", field="seeds")
    return chosen


def _cluster(value: str | tuple[int, int]) -> tuple[int, int]:
    if isinstance(value, str):
        try:
            nodes, gpus = (int(part) for part in value.lower().split("x"))
        except ValueError:
            raise DuettoInputError(f"expected 'NODESxGPUS' (e.g. '2x4'), got {value!r}", field="cluster") from None
    else:
        nodes, gpus = value
    if nodes < 1 or gpus < 1:
        raise DuettoInputError(f"expected positive sizes, got {value!r}", field="cluster")
    return int(nodes), int(gpus)


def _clusters(value: str | tuple[int, int] | Sequence[str | tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """One shape (``"1x4"``, ``(1, 4)``) or a list of them."""
    single = isinstance(value, str) or (
        isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value)
    )
    items: list[Any] = [value] if single else list(value)
    if not items:
        raise DuettoInputError("give at least one cluster shape", field="cluster")
    return tuple(_cluster(item) for item in items)


def _positive(value: float, field: str) -> float:
    if not value > 0:
        raise DuettoInputError(f"must be > 0, got {value!r}", field=field)
    return float(value)


def _raise_failures(failed: dict[str, str], out: Path, kept: bool) -> None:
    if failed:
        raise StudyFailedError(failed, out if kept else None)


def gap_study(
    sizes: int | Sequence[int] = (4, 6),
    *,
    cluster: str | tuple[int, int] | Sequence[str | tuple[int, int]] = "1x4",
    seeds: int | Sequence[int] = 3,
    policies: str | Sequence[str] | None = None,
    solvers: str | Sequence[str] = ("cpsat",),
    time_limit: float = 60.0,
    arrivals: str | Sequence[str] = ("zero", "poisson"),
    xi_range: tuple[float, float] = (1.0, 2.0),
    load: float = 1.0,
    target_slots: int = 120,
    num_workers: int | None = None,
    out: str | Path | None = None,
    workers: int | None = 1,
    ray_address: str | None = None,
    progress: bool = False,
    figures: bool = True,
) -> pd.DataFrame:
    """Optimality gap of policies against the exact oracle on the seeded random family (``duetto gap``).

    Every combination of ``sizes`` × clusters × ``arrivals`` × ``seeds`` is one instance; the oracle
    solves it with each solver and each policy runs in the slotted simulator with the same slot Δ.

    Parameters
    ----------
    sizes
        Job counts.
    cluster
        ``"NODESxGPUS"`` or ``(nodes, gpus_per_node)``, or a list of them.
    seeds
        A count (seeds ``0..N-1``) or the seeds themselves.
    policies
        Registered policy names (``None``: every registered policy).
    solvers
        Oracle backends (``"cpsat"``, ``"highs"``, ``"pyomo:NAME"``).
    time_limit
        Seconds per exact solve.
    arrivals
        ``"zero"`` and/or ``"poisson"``.
    xi_range
        Range of the generator's interference ratios ξ.
    load
        Offered load of Poisson arrivals.
    target_slots
        Slot rule: Δ gives about this many slots per schedule.
    num_workers
        Solver threads per solve (default: the backend's).
    out
        Folder for ``rows.jsonl`` (resumable), ``gap.csv`` (and ``.parquet`` with the ``parquet``
        extra), ``summary.csv`` and, with ``figures``, the box plot and gap-against-n figures. ``None``:
        a temporary folder, removed afterwards.
    workers
        Tasks at once. ``1`` (default): one after the other in this process (exact solves still run in
        their own worker process), which is safe from a plain script or a notebook. ``N`` or ``None``
        (the CPU count over a solve's threads): a pool of processes; Python starts them by re-importing
        the calling script, so call the study under ``if __name__ == "__main__":`` in a script.
    ray_address
        Run the tasks on Ray instead: an address or ``"local"`` (needs the ``ray`` extra).
    progress
        Show a progress bar on stderr.
    figures
        Write the figures (only with ``out``).

    Returns
    -------
    pandas.DataFrame
        One row per instance × method (``method`` is ``oracle:<solver>`` or the policy): the instance's
        parameters (``n``, ``nodes``, ``gpus_per_node``, ``arrivals``, ``seed``, ``slot``, ...),
        ``status``, ``validated``, ``objective`` (the validator's total JCT), ``proven_optimal``,
        ``bound``, the metrics (``jct_avg``, ``makespan``, ...), and the gaps: ``gap`` against a proven
        optimum (``gap_kind == "optimum"``) or the best bound (``"bound"``), ``gap_to_best``.

    Raises
    ------
    DuettoInputError
        A bad argument (unknown policy or solver, a malformed cluster, ...), before any task runs.
    StudyFailedError
        Some task raised (the others' rows are kept in ``out``).
    """
    from benchmarks.gap import GapStudy, run_gap_study

    chosen_solvers = _solvers(solvers)
    study = GapStudy(
        sizes=_sizes(sizes, "sizes"),
        clusters=_clusters(cluster),
        arrivals=_names(arrivals, "arrivals") or (),
        xi_ranges=((float(xi_range[0]), float(xi_range[1])),),
        seeds=_seeds(seeds),
        policies=_policies(policies),
        solvers=chosen_solvers,
        time_limit=_positive(time_limit, "time_limit"),
        load=load,
        target_slots=target_slots,
        solver_options={} if num_workers is None else {"num_workers": num_workers},
    )
    with _folder(out) as (folder, kept):
        outcome = run_gap_study(
            study, folder, workers=workers, ray_address=ray_address, progress=progress, figures=figures and kept
        )
        _raise_failures(outcome.run.failed, folder, kept)
        return outcome.rows


def scale_study(
    *,
    solvers: str | Sequence[str] = ("cpsat",),
    solver_sizes: int | Sequence[int] = (4, 6, 8),
    policies: str | Sequence[str] | None = None,
    policy_sizes: int | Sequence[int] = (10, 30, 100),
    seeds: int | Sequence[int] = 3,
    time_limit: float = 60.0,
    max_seconds: float = 300.0,
    gpus_per_node: int = 4,
    jobs_per_gpu: float = 2.0,
    arrivals: str = "poisson",
    load: float = 1.0,
    num_workers: int | None = None,
    out: str | Path | None = None,
    workers: int | None = 1,
    ray_address: str | None = None,
    progress: bool = False,
    figures: bool = True,
) -> pd.DataFrame:
    """Time to schedule against job count, for exact solvers and policies (``duetto scale``).

    The cluster grows with the job count (``jobs_per_gpu`` jobs per GPU, ``gpus_per_node`` GPUs per
    node). Sizes are climbed in increasing order; a method stops once its median time at a size exceeds
    ``max_seconds``.

    Parameters
    ----------
    solvers, solver_sizes
        Oracle backends and the job counts they are run at (``solvers=()``: policies only).
    policies, policy_sizes
        Registered policies (``None``: every registered policy) and their job counts.
    seeds
        A count (seeds ``0..N-1``) or the seeds themselves; one run per method × size × seed.
    time_limit
        Seconds per exact solve.
    max_seconds
        A method stops climbing sizes after a size whose median time exceeds this.
    gpus_per_node, jobs_per_gpu, arrivals, load
        The instance family (:func:`benchmarks.families.scaled_instance`).
    num_workers
        Solver threads per solve.
    out, workers, ray_address, progress, figures
        As in :func:`gap_study` (``out`` gets ``scale.csv``, ``summary.csv``, ``fits.csv`` and the
        log-log figure).

    Returns
    -------
    pandas.DataFrame
        One row per method × n × seed: ``method``, ``n``, ``seed``, ``gpus``, ``seconds`` (wall time of
        the solve or simulation), ``status``, ``proven_optimal``, ``solver_gap``, ``objective`` and
        ``validated`` (the validator's). Fit growth exponents with
        :func:`benchmarks.scale.fit_growth`.

    Raises
    ------
    DuettoInputError
        A bad argument, before any task runs.
    StudyFailedError
        Some task raised.
    """
    from benchmarks.scale import ScaleStudy, run_scale_study

    if arrivals not in ("zero", "poisson"):
        raise DuettoInputError(f"must be 'zero' or 'poisson', got {arrivals!r}", field="arrivals")
    chosen_solvers = _solvers(solvers)
    study = ScaleStudy(
        solvers=chosen_solvers,
        solver_sizes=_sizes(solver_sizes, "solver_sizes") if chosen_solvers else (),
        policies=_policies(policies),
        policy_sizes=_sizes(policy_sizes, "policy_sizes"),
        seeds=_seeds(seeds),
        time_limit=_positive(time_limit, "time_limit"),
        max_seconds=_positive(max_seconds, "max_seconds"),
        gpus_per_node=gpus_per_node,
        jobs_per_gpu=jobs_per_gpu,
        arrivals=arrivals,
        load=load,
        solver_options={} if num_workers is None else {"num_workers": num_workers},
    )
    with _folder(out) as (folder, kept):
        outcome = run_scale_study(
            study, folder, workers=workers, ray_address=ray_address, progress=progress, figures=figures and kept
        )
        _raise_failures({k: m for run in outcome.runs for k, m in run.failed.items()}, folder, kept)
        return outcome.rows


def replay(
    trace: str,
    paths: str | Path | Sequence[str | Path],
    *,
    policies: str | Sequence[str] | None = None,
    interference: str | Sequence[str] = ("default",),
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    limit: int | None = None,
    capacity: int | None = None,
    profiles: str | Path | None = None,
    settings: str = "authors",
    loader_options: dict[str, Any] | None = None,
    slot: float | None = None,
    restart_cost: float = 0.0,
    large_threshold: int = 4,
    out: str | Path | None = None,
    workers: int | None = 1,
    ray_address: str | None = None,
    progress: bool = False,
    figures: bool = True,
    bound_time_limit: float | None = None,
) -> pd.DataFrame:
    """Replay a public trace under policies (``duetto replay``).

    Parameters
    ----------
    trace
        Trace format: ``pollux``, ``muri``, ``gavel``, ``tiresias``, ``shockwave``.
    paths
        Trace file, or several of one format (e.g. the 8 Pollux workloads).
    policies
        Registered policies (``None``: every registered policy).
    interference
        Variants, each a separate run: ``default`` (the loader's model), ``constant:X``,
        ``gavel[:WORKER]``, ``predicted[:WORKER]`` (needs the ``predictor`` extra), ``table:FILE`` (a
        measured pair table, :mod:`formulation.pair_tables`).
    nodes, gpus_per_node, limit, capacity
        Loader options (``None``: the trace's); ``limit`` keeps the first N jobs; ``capacity`` is C.
    profiles
        Pollux traces: the folder of ``<application>/`` profiles (default: beside the workload, else
        the shared copy).
    settings
        ``"authors"`` (default): the trace's authors' settings (Muri: C = 4, runtime from iterations,
        Muri's own semantics for Muri-S/L; Tiresias: C = 1); ``"duetto"``: duetto's generic defaults
        (:mod:`formulation.trace_settings`, docs/formats.md "The authors' settings").
    loader_options
        Further keywords for the trace's loader (``{"worker_type": "p100"}``, ``{"duration_from":
        "duration"}``, ...; :func:`formulation.traces.load_trace`).
    slot
        Slotted semantics with this Δ (``None``: continuous time, as the papers' simulators).
    restart_cost
        Seconds lost per preemption.
    large_threshold
        Jobs with more GPUs than this count as large.
    out, workers, ray_address, progress, figures
        As in :func:`gap_study` (``out`` gets ``replay.csv``, the paper-shaped ``table-<variant>.csv``,
        JCT CDFs and every schedule under ``schedules/``).
    bound_time_limit
        Seconds for a proven lower bound on each file's total JCT (:func:`trace_lower_bound`); the
        rows then get ``bound_jct_avg`` and ``certified_gap_pct`` (``None``: no bound).

    Returns
    -------
    pandas.DataFrame
        One row per file × variant × policy: ``trace``, ``file``, ``interference``, ``policy``,
        ``jobs``, ``gpus``, ``validated``, every metric of :func:`formulation.metrics.compute_metrics`
        (``jct_avg``, ``jct_p99``, ``makespan``, ``queueing_avg``, ``large_*``/``small_*``, ...),
        ``preemptions``, ``wall_seconds`` and ``job_jct`` (every job's JCT, seconds).
        :func:`benchmarks.replay.paper_table` gives the papers' table shape.

    Raises
    ------
    DuettoInputError
        A bad argument or trace file, before any task runs.
    StudyFailedError
        Some task raised.
    """
    from benchmarks.replay import ReplayStudy, run_replay
    from duetto.commands.trace_options import trace_loader_options

    files = [paths] if isinstance(paths, str | Path) else list(paths)
    if not files:
        raise DuettoInputError("give at least one trace file", field="paths")
    for path in files:
        if not Path(path).is_file():
            raise DuettoInputError("no such file", source=str(path))
    if limit is not None and limit < 1:
        raise DuettoInputError(f"must be >= 1, got {limit}", field="limit")
    if slot is not None:
        _positive(slot, "slot")
    if large_threshold < 0:
        raise DuettoInputError(f"must be >= 0, got {large_threshold}", field="large_threshold")
    study = ReplayStudy(
        trace=trace,
        paths=tuple(str(p) for p in files),
        policies=_policies(policies),
        interference=_names(interference, "interference") or ("default",),
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        limit=limit,
        capacity=capacity,
        slot=slot,
        restart_cost=restart_cost,
        large_threshold=large_threshold,
        bound_time_limit=bound_time_limit,
        loader_options=dict(loader_options or {})
        | trace_loader_options(trace, profiles=None if profiles is None else Path(profiles), settings=settings),
    )
    if bound_time_limit is not None:
        _positive(bound_time_limit, "bound_time_limit")
    with _folder(out) as (folder, kept):
        outcome = run_replay(
            study, folder, workers=workers, ray_address=ray_address, progress=progress, figures=figures and kept
        )
        _raise_failures(outcome.run.failed, folder, kept)
        rows = outcome.rows
        if not outcome.bounds.empty:
            rows = rows.merge(outcome.bounds[["path", "interference", "bound_jct_avg"]], on=["path", "interference"])
            rows["certified_gap_pct"] = (rows["jct_avg"] - rows["bound_jct_avg"]) / rows["bound_jct_avg"] * 100
        return rows
