"""Profiling on the runtime (Castor §7): run a job for a short bounded time alone and next to a chosen
partner, record iteration times, fit the iteration-time model and store the measured interference
ratio, so measured profiles feed the interference table that policies and the oracle use.

Procedure (``duetto profile job.json [--partner other.json]``):

1. *Alone*: for each accumulation-step count ``s`` tried (by default the first three the job's memory
   allows), run the job alone on one GPU for ``T_prof`` seconds and take the median time between
   consecutive progress lines (the first interval is warm-up and dropped).
2. *Fit* Eq. 1 on one GPU: an iteration with ``s`` steps takes ``s·t_comp(B/s) = s·α + β·B``, linear in
   ``(α, β)``; non-negative least squares over the runs gives ``compute_alpha``/``compute_beta``. The
   job's memory and communication terms are kept from its known profile (one GPU measures neither).
3. *Together*: run the partner alone once, then both on the same GPU (MPS clients, thread shares as
   the runtime would set them) for ``T_prof``; ``ξ_{j|k} = t_together(j) / t_alone(j)`` and
   ``ξ_{k|j}`` likewise, clamped to ``>= 1``.
4. *Store*: the fitted profile and both ratios go to the state database; the daemon's instance uses
   them (measured ratios form a :class:`~formulation.TableInterference` over the configured default).
"""

from __future__ import annotations

import itertools
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

from cluster_runtime.backends import Backend
from cluster_runtime.reconciler import build_launch_request
from cluster_runtime.spec import JobSpec
from cluster_runtime.store import Store
from formulation.errors import DuettoInputError
from formulation.io import _profile_to_dict
from formulation.speed import Profile, accumulation_options


@dataclass(frozen=True)
class Measurement:
    """Median iteration time of one job in one run."""

    job_id: str
    steps: int
    sub_batch: int
    iteration_time: float
    intervals: int
    partner: str | None = None


@dataclass
class ProfileReport:
    """What a profiling session measured and stored."""

    profile: Profile
    alone: list[Measurement]
    together: list[Measurement] = field(default_factory=list)
    ratios: dict[tuple[str, str], float] = field(default_factory=dict)
    fit_residual: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": _profile_to_dict(self.profile),
            "alone": [m.__dict__ for m in self.alone],
            "together": [m.__dict__ for m in self.together],
            "ratios": [{"victim": v, "other": o, "xi": xi} for (v, o), xi in self.ratios.items()],
            "fit_residual": self.fit_residual,
        }


def iteration_time(
    history: Sequence[tuple[float, float]], window: tuple[float, float] | None = None
) -> tuple[float, int]:
    """Median seconds per iteration from ``(iteration, unix_time)`` lines, inside ``window`` if given.

    The first interval is dropped (start-up and warm-up). Returns ``(median, intervals used)``.

    Raises
    ------
    DuettoInputError
        With fewer than two usable intervals (the run was too short for this job).
    """
    points = [p for p in history if window is None or window[0] <= p[1] <= window[1]]
    rates = []
    for (i0, t0), (i1, t1) in itertools.pairwise(points):
        if i1 > i0 and t1 > t0:
            rates.append((t1 - t0) / (i1 - i0))
    rates = rates[1:]
    if len(rates) < 2:
        raise DuettoInputError(
            f"only {len(rates)} usable iteration interval(s) measured; profile for longer (--seconds)"
        )
    return float(statistics.median(rates)), len(rates)


def fit_compute(batch_size: int, points: Sequence[tuple[int, float]]) -> tuple[float, float, float]:
    """Fit ``t_iter(s) = s·α + β·B`` (Eq. 1 summed over ``s`` micro-steps) by non-negative least squares.

    Returns ``(alpha, beta, relative rms residual)``. With a single step count the split between α
    and β is not identifiable: everything goes to β (time proportional to the sub-batch).
    """
    distinct = {s for s, _ in points}
    if len(distinct) < 2:
        mean = float(np.mean([t / s for s, t in points]))
        return 0.0, mean * next(iter(distinct)) / batch_size, 0.0
    a = np.array([[float(s), float(batch_size)] for s, _ in points])
    b = np.array([t for _, t in points])
    (alpha, beta), _ = nnls(a, b)
    predicted = a @ np.array([alpha, beta])
    residual = float(np.sqrt(np.mean(((predicted - b) / b) ** 2)))
    return float(alpha), float(beta), residual


class Profiler:
    """Runs profiling launches on one GPU of a backend and stores what it measures.

    Parameters
    ----------
    backend
        A started backend (local for ``duetto profile``).
    store
        Where measured profiles and ratios go.
    runs_dir
        Folder for the profiling runs' files.
    gpu
        Flat id of the GPU to profile on (it should be idle).
    capacity
        ``C``; the thread share of a shared run is ``100 // 2`` unless ``shared_thread_percentage``.
    """

    def __init__(
        self,
        backend: Backend,
        store: Store,
        runs_dir: Path,
        gpu: int = 0,
        shared_thread_percentage: int | None = None,
        poll_interval: float = 0.05,
    ) -> None:
        if not 0 <= gpu < backend.inventory.num_gpus:
            raise DuettoInputError(f"unknown GPU {gpu}: flat ids run 0..{backend.inventory.num_gpus - 1}")
        self.backend = backend
        self.store = store
        self.runs_dir = runs_dir
        self.gpu = gpu
        self.node = gpu // backend.inventory.gpus_per_node
        self.shared_thread_percentage = shared_thread_percentage
        self.poll_interval = poll_interval

    def _run(self, jobs: Sequence[tuple[JobSpec, int]], seconds: float) -> list[Measurement]:
        """Run ``jobs`` (spec, steps) together on the GPU for ``seconds``; one measurement each."""
        session = f"profile-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        pct = None
        if len(jobs) > 1:
            pct = self.shared_thread_percentage or 100 // len(jobs)
        launches = []
        for k, (spec, steps) in enumerate(jobs):
            launch_id = f"{spec.id}.{session}.{k}"
            run_dir = str(self.runs_dir / spec.id / launch_id)
            spec_dict = dict(spec.raw)
            request = build_launch_request(
                self.backend.inventory,
                spec.id,
                spec_dict,
                0.0,
                (self.gpu,),
                steps,
                launch_id,
                1,
                0,
                self.node,
                [(0, self.node, run_dir)],
                run_dir,
                0,
                pct,
            )
            request["env"]["DUETTO_PROFILING"] = "1"
            launches.append((spec, steps, launch_id, run_dir))
            self.backend.launch(self.node, request)
        started = time.time()
        deadline = started + seconds
        ids = [launch_id for _, _, launch_id, _ in launches]
        while time.time() < deadline:
            status = self.backend.poll({self.node: ids})
            if all(not s.get("alive") for s in status.values()):
                break
            time.sleep(self.poll_interval)
        stopped = time.time()
        for launch_id in ids:
            self.backend.stop(self.node, launch_id)
        end = time.time() + 10.0
        while time.time() < end:
            status = self.backend.poll({self.node: ids})
            if all(not s.get("alive") for s in status.values()):
                break
            time.sleep(self.poll_interval)
        else:
            for launch_id in ids:
                self.backend.stop(self.node, launch_id, force=True)
        self.backend.forget({self.node: ids})
        histories = {
            launch_id: self.backend.progress_history(self.node, run_dir) for _, _, launch_id, run_dir in launches
        }
        # Measure only while every job of the run was running (all had reported at least once).
        firsts = [h[0][1] for h in histories.values() if h]
        window = (max(firsts) if len(firsts) == len(launches) else started, stopped)
        result = []
        for spec, steps, launch_id, _ in launches:
            seconds_per_iteration, intervals = iteration_time(histories[launch_id], window if len(jobs) > 1 else None)
            partner = None if len(jobs) == 1 else ",".join(s.id for s, _ in jobs if s.id != spec.id)
            result.append(
                Measurement(spec.id, steps, spec.batch_size // steps, seconds_per_iteration, intervals, partner)
            )
        return result

    def profile(
        self,
        spec: JobSpec,
        base: Profile,
        seconds: float = 3.0,
        steps: Sequence[int] | None = None,
        partner: tuple[JobSpec, Profile] | None = None,
        memory_gib: float | None = None,
        store: bool = True,
    ) -> ProfileReport:
        """Profile ``spec`` (known profile ``base``), optionally next to ``partner``; store the results.

        Parameters
        ----------
        seconds
            ``T_prof``: bounded time of each run.
        steps
            Accumulation-step counts to time alone (default: the first three that fit memory).
        memory_gib
            GPU memory, to keep only step counts whose sub-batch fits (default: the profiled GPU's).
        """
        memory = memory_gib if memory_gib is not None else self.backend.inventory.gpu(self.gpu).memory_gib
        options = [
            s for s in accumulation_options(base, spec.batch_size) if base.memory_gib(spec.batch_size // s) <= memory
        ]
        if not options:
            raise DuettoInputError(f"job '{spec.id}': no sub-batch of {spec.batch_size} fits {memory:g} GiB")
        chosen = list(steps) if steps else options[:3]
        for s in chosen:
            if s not in options:
                raise DuettoInputError(f"job '{spec.id}': {s} accumulation steps is not valid (valid: {options})")
        alone = [self._run([(spec, s)], seconds)[0] for s in chosen]
        alpha, beta, residual = fit_compute(spec.batch_size, [(m.steps, m.iteration_time) for m in alone])
        fitted = replace(base, compute_alpha=alpha, compute_beta=beta, compute_table=None)
        report = ProfileReport(fitted, alone, fit_residual=residual)
        if partner is not None:
            other, other_base = partner
            other_steps = next(
                (
                    s
                    for s in accumulation_options(other_base, other.batch_size)
                    if other_base.memory_gib(other.batch_size // s) <= memory
                ),
                None,
            )
            if other_steps is None:
                raise DuettoInputError(f"partner '{other.id}': no sub-batch fits {memory:g} GiB")
            other_alone = self._run([(other, other_steps)], seconds)[0]
            together = self._run([(spec, chosen[0]), (other, other_steps)], seconds)
            report.together = together
            mine = alone[0].iteration_time
            mine_xi = max(1.0, together[0].iteration_time / mine)
            other_xi = max(1.0, together[1].iteration_time / other_alone.iteration_time)
            if base.name == other_base.name:
                # Two jobs of one profile: one ratio, the mean of the two measurements.
                report.ratios[(base.name, base.name)] = (mine_xi + other_xi) / 2
            else:
                report.ratios[(base.name, other_base.name)] = mine_xi
                report.ratios[(other_base.name, base.name)] = other_xi
            report.alone.append(other_alone)
        if store:
            now = time.time()
            with self.store.transaction() as tx:
                tx.put_profile(fitted.name, _profile_to_dict(fitted), now, "measured")
                for (victim, other_name), xi in report.ratios.items():
                    tx.put_ratio(victim, other_name, xi, now)
                tx.event(
                    now,
                    "profiled",
                    spec.id,
                    f"profile '{fitted.name}': alpha={alpha:.4g} beta={beta:.4g}"
                    + "".join(f", xi({v}|{o})={x:.3f}" for (v, o), x in report.ratios.items()),
                )
        return report


def resolve_profile(spec: JobSpec, file_profiles: dict[str, Profile], store: Store) -> Profile:
    """The profile a job names: inline, measured (state database) or from the profiles file."""
    if spec.inline_profile is not None:
        return spec.inline_profile
    from cluster_runtime.reconciler import profile_from_dict

    with store.read() as tx:
        measured = tx.profiles()
    if spec.profile_name in measured:
        return profile_from_dict(measured[spec.profile_name])
    if spec.profile_name in file_profiles:
        return file_profiles[spec.profile_name]
    known = sorted(set(measured) | set(file_profiles))
    raise DuettoInputError(
        f"unknown profile '{spec.profile_name}'; known: {', '.join(known) or 'none'}",
        source=f"job '{spec.id}'",
    )


def profile_from_files(
    config: Any,
    job_file: Path,
    partner_file: Path | None,
    seconds: float,
    steps: Sequence[int] | None,
    gpu: int,
) -> ProfileReport:
    """``duetto profile``: run the profiler on this node's local backend and store the results."""
    from cluster_runtime.backends import LocalBackend
    from cluster_runtime.inventory import resolve_inventory
    from cluster_runtime.reconciler import load_profiles_file
    from cluster_runtime.spec import job_spec_from_dict
    from formulation.io import read_json

    spec = job_spec_from_dict(read_json(job_file), source=str(job_file))
    other = None if partner_file is None else job_spec_from_dict(read_json(partner_file), source=str(partner_file))
    file_profiles: dict[str, Profile] = {}
    if config.profiles_file is not None:
        file_profiles, _ = load_profiles_file(config.profiles_file)
    config.state_dir.mkdir(parents=True, exist_ok=True)
    store = Store(config.db_path)
    inventory = resolve_inventory(config.fake_gpus, config.inventory_file, config.gpu_memory_gib)
    backend = LocalBackend(config, inventory)
    node = gpu // inventory.gpus_per_node if 0 <= gpu < inventory.num_gpus else 0
    was_up = bool(backend.agents[node].mps_status().get("alive"))
    try:
        backend.agents[node].start_mps()
        profiler = Profiler(
            backend, store, config.state_dir / "profile-runs", gpu, config.mps.shared_active_thread_percentage
        )
        base = resolve_profile(spec, file_profiles, store)
        partner = None if other is None else (other, resolve_profile(other, file_profiles, store))
        return profiler.profile(spec, base, seconds, steps, partner)
    finally:
        if not was_up:
            backend.agents[node].quit_mps()  # leave a daemon's MPS running, quit only what we started
        store.close()
