"""Pollux workloads and application profiles (petuum/adaptdl, branch osdi21-artifact).

A workload CSV (``name,time,application,num_replicas,batch_size``; ``time`` = submission, s;
``num_replicas`` = GPUs; ``batch_size`` = global batch) names one of six applications whose measured
profiles live in ``profiles/<application>/``:

* ``placements.csv`` (placement, local_bsz, step_time, sync_time): a placement's digits are the
  replicas on each node (``"1"``: one GPU, ``"4"``: four GPUs of one node, ``"112"``: three nodes);
* ``scalability.csv`` (num_nodes, num_replicas, local_bsz, step_time, sync_time): 6-64 replicas;
* ``validation-<batch size>.csv`` (progress, iteration, metric, grad_sqr, grad_var per epoch).

Where the profiles are (:func:`pollux_profiles_root`): ``profiles_dir`` when given, else
``profiles`` beside the workload's folder, beside the workload, or the shared data copy.

Speed model (Castor Eq. 1-3, which is Pollux's own throughput model) fitted per application with
``scipy.optimize.least_squares`` on log step times:

1. Eq. 1 from the single-GPU rows (placement ``1``): ``step_time ≈ α + β·local_bsz``.
2. With α, β fixed, from every multi-replica row: ``step_time ≈ ((α+β·b)^δ + T_net^δ)^(1/δ)``,
   δ in [1, 10], and Pollux's network model ``T_net = a + c·max(r-2, 0)`` with one (a, c) inside a
   node and one across nodes.

A job on ``r`` GPUs gets the profile ``<application>-r<r>``: compute α, β; Eq. 2's constant
``comm_alpha = T_net(intra-node, r)`` (β_comm·M is not identifiable from these data: 0);
``inter_node_comm_factor = T_net(inter-node, r) / T_net(intra-node, r)`` (at least 1); δ.

Per-GPU batch: ``ceil(batch_size / num_replicas)`` as Pollux does. The largest profiled local batch
(``max_local_bsz``; 8 for yolov3 as in Pollux's simulator) is what fits in GPU memory: memory per
sample = ``gpu_memory_gib / max_local_bsz`` (``memory="max_local_bsz"``, default), so a larger local
batch must use gradient accumulation; such a batch is rounded up to a multiple of the smallest power
of two ``s`` with ``batch / s <= max_local_bsz`` (no rounding is needed for any job in the shipped
workloads). ``memory="none"`` gives 0 GiB instead.

Iterations (not in the workload): as Pollux's simulator runs a job with a fixed batch size. A job
trains for the application's number of epochs (the rows of its validation files: bert 2, cifar10 100,
deepspeech2 80, imagenet 90, ncf 10, yolov3 50 — Pollux's ``max_epochs``); epoch ``e`` needs
``P(e+1) - P(e)`` units of progress, ``P(e)`` the smallest progress over the validation files at the
end of epoch ``e``; each iteration at global batch ``B`` earns the statistical-efficiency gain
``(var + sqr) / (var / scale + sqr)``, ``scale = B / init_batch`` (smallest validated batch), with
the gradient statistics of that epoch interpolated linearly between the validated batch sizes around
``B`` (clamped to the validated range). So ``I = Σ_e (P(e+1) - P(e)) / gain_e(B)``, rounded.

Interference: a constant ξ (default 1.5, the Pollux data has no co-location measurements).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from formulation.errors import DuettoInputError
from formulation.instance import Instance, Job
from formulation.interference import ConstantInterference, InterferenceModel
from formulation.paths import shared_data_dir
from formulation.speed import Profile
from formulation.stages import with_derived_stages
from formulation.traces.common import (
    PathLike,
    build_cluster,
    check_gang_fits,
    check_kind,
    check_limit,
    check_plausible,
    check_unique_ids,
    earliest,
    frame_rows,
    numeric_column,
    read_table,
    row_source,
    text_column,
)

POLLUX_DEFAULT_CLUSTER = (16, 4)  # SJF-BSBF Table III: 64 GPUs, 4 per node (Pollux's simulator too)
POLLUX_APPLICATIONS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
# Pollux's simulator (applications.py) overrides the profiled maximum local batch for yolov3.
POLLUX_MAX_LOCAL_BSZ = {"yolov3": 8}
DEFAULT_CONSTANT_XI = 1.5
WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
_TINY = 1e-9


@dataclass(frozen=True)
class PolluxFit:
    """Fitted Eq. 1-3 parameters of one application and how well they fit.

    Errors are root-mean-square of ``log(predicted / measured)`` step times (≈ relative error) and
    the largest relative error, over the single-GPU rows and over the multi-replica rows.
    """

    application: str
    compute_alpha: float
    compute_beta: float
    intra_alpha: float
    intra_beta: float
    inter_alpha: float
    inter_beta: float
    delta: float
    min_local_bsz: int
    max_local_bsz: int
    single_rms: float
    single_max: float
    single_rows: int
    multi_rms: float
    multi_max: float
    multi_rows: int
    epochs: int
    init_batch_size: int
    validated_batch_sizes: tuple[int, ...]
    progress: tuple[float, ...]  # P(1..E): end-of-epoch progress
    grad_sqr: tuple[tuple[float, ...], ...]  # [batch index][epoch]
    grad_var: tuple[tuple[float, ...], ...]

    def network_time(self, num_replicas: int, inter_node: bool) -> float:
        """Pollux's all-reduce time model at ``num_replicas`` (0 for one replica)."""
        if num_replicas <= 1:
            return 0.0
        extra = max(num_replicas - 2, 0)
        if inter_node:
            return self.inter_alpha + self.inter_beta * extra
        return self.intra_alpha + self.intra_beta * extra

    def step_time(self, local_bsz: float, num_replicas: int, inter_node: bool) -> float:
        """Predicted seconds of one step without accumulation (Eq. 3 with s = 1)."""
        compute = self.compute_alpha + self.compute_beta * local_bsz
        network = self.network_time(num_replicas, inter_node)
        if network == 0.0:
            return compute
        return float((compute**self.delta + network**self.delta) ** (1.0 / self.delta))

    def iterations(self, batch_size: float) -> float:
        """Iterations a job with global batch ``batch_size`` trains for (see the module docstring)."""
        sizes = self.validated_batch_sizes
        b = min(max(float(batch_size), sizes[0]), sizes[-1])
        upper = next(k for k, size in enumerate(sizes) if size >= b)
        lower = upper if sizes[upper] == b else upper - 1
        weight = 0.0 if lower == upper else (b - sizes[lower]) / (sizes[upper] - sizes[lower])
        scale = float(batch_size) / self.init_batch_size
        total, previous = 0.0, 0.0
        for epoch, progress in enumerate(self.progress):
            sqr = (1 - weight) * self.grad_sqr[lower][epoch] + weight * self.grad_sqr[upper][epoch]
            var = (1 - weight) * self.grad_var[lower][epoch] + weight * self.grad_var[upper][epoch]
            denominator = var / scale + sqr
            gain = (var + sqr) / denominator if denominator > 0 else 1.0
            total += (progress - previous) / gain
            previous = progress
        return total


def _placement_shape(placement: str) -> tuple[int, int]:
    digits = [int(c) for c in placement if c.isdigit() and c != "0"]
    return len(digits), sum(digits)


def _read_profile_tables(directory: Path) -> pd.DataFrame:
    placements_file = directory / "placements.csv"
    frame = read_table(placements_file, ("placement", "local_bsz", "step_time", "sync_time"), what="placements")
    shapes = [_placement_shape(p.strip()) for p in frame["placement"]]
    for index, (_, replicas) in enumerate(shapes):
        if replicas < 1:
            raise DuettoInputError(
                f"placement {frame['placement'].iloc[index]!r} has no replica",
                source=row_source(placements_file, index),
                field="placement",
            )
    placements = pd.DataFrame(
        {
            "num_nodes": [s[0] for s in shapes],
            "num_replicas": [s[1] for s in shapes],
            "local_bsz": numeric_column(frame, "local_bsz", placements_file, positive=True),
            "step_time": numeric_column(frame, "step_time", placements_file, positive=True),
            "single": [p.strip() == "1" for p in frame["placement"]],
        }
    )
    scal_file = directory / "scalability.csv"
    if scal_file.is_file():
        scal = read_table(scal_file, ("num_nodes", "num_replicas", "local_bsz", "step_time"), what="scalability")
        extra = pd.DataFrame(
            {
                "num_nodes": numeric_column(scal, "num_nodes", scal_file, integer=True, positive=True),
                "num_replicas": numeric_column(scal, "num_replicas", scal_file, integer=True, positive=True),
                "local_bsz": numeric_column(scal, "local_bsz", scal_file, positive=True),
                "step_time": numeric_column(scal, "step_time", scal_file, positive=True),
                "single": False,
            }
        )
        placements = pd.concat([placements, extra], ignore_index=True)
    return placements


def _read_validation(directory: Path) -> tuple[tuple[int, ...], list[pd.DataFrame]]:
    found: list[tuple[int, Path]] = []
    for file in directory.glob("validation-*.csv"):
        suffix = file.stem.split("-")[-1]
        if suffix.isdigit():
            found.append((int(suffix), file))
    if not found:
        raise DuettoInputError("no validation-<batch size>.csv files", source=str(directory))
    found.sort()
    frames = []
    for _, file in found:
        table = read_table(file, ("progress", "grad_sqr", "grad_var"), what="validation")
        if table.empty:
            raise DuettoInputError("no epochs", source=str(file))
        frames.append(
            pd.DataFrame(
                {
                    "progress": numeric_column(table, "progress", file, positive=True),
                    "grad_sqr": numeric_column(table, "grad_sqr", file, nonnegative=True),
                    "grad_var": numeric_column(table, "grad_var", file, nonnegative=True),
                }
            )
        )
    return tuple(size for size, _ in found), frames


def _log_rms_and_max(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
    if len(measured) == 0:
        return 0.0, 0.0
    log_error = np.log(predicted / measured)
    return float(np.sqrt(np.mean(log_error**2))), float(np.max(np.abs(predicted / measured - 1.0)))


@lru_cache(maxsize=32)
def _fit_cached(directory: str) -> PolluxFit:
    folder = Path(directory)
    if not folder.is_dir():
        raise DuettoInputError("application profile folder not found", source=directory)
    application = folder.name
    rows = _read_profile_tables(folder)
    single = rows[rows["single"]]
    if len(single) < 2:
        raise DuettoInputError("need at least two single-GPU rows (placement 1) to fit Eq. 1", source=directory)
    b1 = single["local_bsz"].to_numpy(float)
    y1 = single["step_time"].to_numpy(float)

    def compute_residual(p: np.ndarray) -> np.ndarray:
        return np.asarray(np.log(p[0] + p[1] * b1) - np.log(y1))

    slope0 = max((y1.max() - y1.min()) / max(b1.max() - b1.min(), 1.0), _TINY)
    first = least_squares(
        compute_residual, x0=[max(y1.min() / 2, _TINY), slope0], bounds=([_TINY, 0.0], [np.inf, np.inf])
    )
    alpha, beta = float(first.x[0]), float(first.x[1])

    multi = rows[rows["num_replicas"] > 1]
    bm = multi["local_bsz"].to_numpy(float)
    rm = multi["num_replicas"].to_numpy(float)
    inter = multi["num_nodes"].to_numpy() > 1
    ym = multi["step_time"].to_numpy(float)
    extra = np.maximum(rm - 2.0, 0.0)
    compute_m = alpha + beta * bm

    def predict(p: np.ndarray) -> np.ndarray:
        a_r, c_r, a_n, c_n, delta = p
        network = np.where(inter, a_n + c_n * extra, a_r + c_r * extra)
        return np.asarray((compute_m**delta + network**delta) ** (1.0 / delta))

    if len(multi) >= 5:
        guess = max(float(np.median(ym - compute_m)), 1e-3)
        second = least_squares(
            lambda p: np.log(predict(p)) - np.log(ym),
            x0=[guess, 0.0, guess, 0.0, 1.5],
            bounds=([_TINY, 0.0, _TINY, 0.0, 1.0], [np.inf, np.inf, np.inf, np.inf, 10.0]),
        )
        a_r, c_r, a_n, c_n, delta = (float(v) for v in second.x)
    else:  # no multi-GPU measurements: communication-free
        a_r = c_r = a_n = c_n = 0.0
        delta = 1.0

    sizes, frames = _read_validation(folder)
    epochs = min(len(frame) for frame in frames)
    progress = tuple(float(min(frame["progress"].iloc[e] for frame in frames)) for e in range(epochs))
    min_local = int(rows["local_bsz"].min())
    max_local = int(POLLUX_MAX_LOCAL_BSZ.get(application, rows.loc[rows["single"], "local_bsz"].max()))
    single_rms, single_max = _log_rms_and_max(alpha + beta * b1, y1)
    if len(multi) >= 5:
        multi_rms, multi_max = _log_rms_and_max(predict(np.array([a_r, c_r, a_n, c_n, delta])), ym)
    else:
        multi_rms = multi_max = 0.0
    return PolluxFit(
        application=application,
        compute_alpha=alpha,
        compute_beta=beta,
        intra_alpha=a_r,
        intra_beta=c_r,
        inter_alpha=a_n,
        inter_beta=c_n,
        delta=delta,
        min_local_bsz=min_local,
        max_local_bsz=max_local,
        single_rms=single_rms,
        single_max=single_max,
        single_rows=len(single),
        multi_rms=multi_rms,
        multi_max=multi_max,
        multi_rows=len(multi),
        epochs=epochs,
        init_batch_size=sizes[0],
        validated_batch_sizes=sizes,
        progress=progress,
        grad_sqr=tuple(tuple(float(v) for v in f["grad_sqr"].iloc[:epochs]) for f in frames),
        grad_var=tuple(tuple(float(v) for v in f["grad_var"].iloc[:epochs]) for f in frames),
    )


def fit_pollux_application(directory: PathLike) -> PolluxFit:
    """Fit Eq. 1-3 and read the convergence data of one application folder
    (``profiles/<application>/``). Cached per folder."""
    return _fit_cached(str(Path(directory).resolve()))


def pollux_fit_report(profiles_dir: PathLike) -> list[dict[str, float | int | str]]:
    """Fit quality of every application under ``profiles_dir`` (one dict per application)."""
    report: list[dict[str, float | int | str]] = []
    for folder in sorted(Path(profiles_dir).iterdir()):
        if folder.is_dir():
            fit = fit_pollux_application(folder)
            report.append(
                {
                    "application": fit.application,
                    "alpha_s": fit.compute_alpha,
                    "beta_s_per_sample": fit.compute_beta,
                    "delta": fit.delta,
                    "single_rows": fit.single_rows,
                    "single_rms_log_error": fit.single_rms,
                    "single_max_rel_error": fit.single_max,
                    "multi_rows": fit.multi_rows,
                    "multi_rms_log_error": fit.multi_rms,
                    "multi_max_rel_error": fit.multi_max,
                    "epochs": fit.epochs,
                    "max_local_bsz": fit.max_local_bsz,
                }
            )
    return report


def per_gpu_batch(batch_size: int, num_replicas: int, max_local_bsz: int) -> int:
    """Pollux's local batch ``ceil(batch_size / num_replicas)``; above ``max_local_bsz`` rounded up to
    a multiple of the smallest power of two ``s`` with ``local / s <= max_local_bsz``."""
    local = -(-batch_size // num_replicas)
    steps = 1
    while -(-local // steps) > max_local_bsz:
        steps *= 2
    return steps * -(-local // steps)


def _job_profile(fit: PolluxFit, num_replicas: int, memory_per_sample: float) -> Profile:
    intra = fit.network_time(num_replicas, inter_node=False)
    inter = fit.network_time(num_replicas, inter_node=True)
    comm = max(intra, _TINY) if num_replicas > 1 else 0.0
    factor = max(1.0, inter / comm) if num_replicas > 1 else 1.0
    return Profile(
        name=f"{fit.application}-r{num_replicas}",
        compute_alpha=fit.compute_alpha,
        compute_beta=fit.compute_beta,
        comm_alpha=comm,
        inter_node_comm_factor=factor,
        overlap_delta=fit.delta,
        memory_per_sample_gib=memory_per_sample,
    )


def pollux_profiles_root(workload: PathLike, profiles_dir: PathLike | None = None) -> Path:
    """The folder of ``<application>/`` profiles a workload uses.

    ``profiles_dir`` when given (it must exist); else the first existing of ``profiles`` beside the
    workload's folder (the artifact's layout: ``workloads*/workload-1.csv`` next to ``profiles/``),
    ``profiles`` beside the workload itself, and the shared data copy (``pollux/profiles`` under
    :func:`~formulation.paths.shared_data_dir`), as the Gavel and Shockwave loaders fall back to the
    shared throughputs. So a workload copied anywhere still loads.

    Raises
    ------
    DuettoInputError
        ``profiles_dir`` is not a folder, or no candidate exists (the message lists where it looked).
    """
    if profiles_dir is not None:
        given = Path(profiles_dir)
        if not given.is_dir():
            raise DuettoInputError("Pollux profiles folder not found", source=str(given), field="profiles")
        return given
    file = Path(workload)
    candidates = (file.parent.parent / "profiles", file.parent / "profiles", shared_data_dir() / "pollux" / "profiles")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise DuettoInputError(
        "no Pollux application profiles found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); pass profiles_dir= / --profiles DIR",
        source=str(file),
        field="profiles",
    )


def load_pollux(
    path: PathLike,
    *,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    gpu_memory_gib: float = 32.0,
    capacity: int = 2,
    interference: InterferenceModel | None = None,
    limit: int | None = None,
    profiles_dir: PathLike | None = None,
    memory: Literal["max_local_bsz", "none"] = "max_local_bsz",
    name: str | None = None,
    allow_implausible: bool = False,
) -> Instance:
    """Load a Pollux workload CSV with fitted application profiles.

    Parameters
    ----------
    path
        ``workloads*/workload-<k>.csv``.
    nodes, gpus_per_node
        Cluster shape; default 16 nodes × 4 GPUs.
    gpu_memory_gib, capacity
        GPU memory and ``C``.
    interference
        Default ``ConstantInterference(1.5)``.
    limit
        Keep only the ``limit`` earliest arrivals (ties: file order).
    profiles_dir
        Folder of ``<application>/`` profiles (``duetto import/replay/simulate --profiles DIR``);
        default: ``profiles`` beside the workload's folder, else beside the workload, else the
        shared data copy (:func:`pollux_profiles_root`).
    memory
        ``"max_local_bsz"``: the largest profiled local batch fills the GPU (accumulation modes
        matter); ``"none"``: 0 GiB.
    name
        Instance name; default ``<folder>/<file stem>``.
    allow_implausible
        Keep jobs longer than a year alone (:data:`~formulation.traces.common.MAX_PLAUSIBLE_SECONDS`);
        by default they are refused with their row: they are what a unit mix-up looks like.
    """
    check_limit(limit)
    if memory not in ("max_local_bsz", "none"):
        raise DuettoInputError(f"must be 'max_local_bsz' or 'none', got {memory!r}", field="memory")
    file = Path(path)
    check_kind(file, "pollux")
    frame = read_table(file, WORKLOAD_COLUMNS)
    if frame.empty:
        raise DuettoInputError("no jobs in the workload", source=str(file))
    if limit is not None:
        frame = frame.iloc[earliest(numeric_column(frame, "time", file, nonnegative=True), limit)]
    profiles_root = pollux_profiles_root(file, profiles_dir)
    cluster = build_cluster(nodes, gpus_per_node, POLLUX_DEFAULT_CLUSTER, gpu_memory_gib, capacity)

    job_ids = text_column(frame, "name", file)
    applications = text_column(frame, "application", file)
    arrival = numeric_column(frame, "time", file, nonnegative=True)
    replicas = numeric_column(frame, "num_replicas", file, integer=True, positive=True)
    batch = numeric_column(frame, "batch_size", file, integer=True, positive=True)
    check_unique_ids(job_ids, file)
    check_gang_fits(job_ids, replicas.tolist(), cluster, file)

    fits: dict[str, PolluxFit] = {}
    profiles: dict[str, Profile] = {}
    jobs: list[Job] = []
    for i, job_id in enumerate(job_ids):
        app = applications[i]
        if app not in fits:
            folder = profiles_root / app
            if not folder.is_dir():
                raise DuettoInputError(
                    f"unknown application '{app}': no profile folder {folder}",
                    source=row_source(file, int(frame.index[i])),
                    field="application",
                )
            fits[app] = fit_pollux_application(folder)
        fit = fits[app]
        r = int(replicas[i])
        per_sample = gpu_memory_gib / fit.max_local_bsz if memory == "max_local_bsz" else 0.0
        profile = _job_profile(fit, r, per_sample)
        profiles.setdefault(profile.name, profile)
        local = per_gpu_batch(int(batch[i]), r, fit.max_local_bsz)
        iterations = max(1.0, float(round(fit.iterations(int(batch[i])))))
        jobs.append(Job(job_id, float(arrival[i]), r, iterations, local, profile.name))

    instance = Instance(
        cluster=cluster,
        jobs=tuple(jobs),
        profiles=profiles,
        interference=interference if interference is not None else ConstantInterference(DEFAULT_CONSTANT_XI),
        name=name or f"{file.parent.name}/{file.stem}",
        metadata={
            "source": "pollux",
            "file": f"{file.parent.name}/{file.name}",
            "memory": memory,
            "limit": limit,
            "profiles": str(profiles_root),
            "fit_rms_log_error": {app: [round(f.single_rms, 4), round(f.multi_rms, 4)] for app, f in fits.items()},
            "units": "time s; fitted Eq. 1-3 seconds; iterations from Pollux's progress / efficiency rule",
        },
    )
    # per-stage times from the fitted Eq. 1-3 profile, so Muri can group these jobs (formulation/stages.py)
    return check_plausible(with_derived_stages(instance), file, frame_rows(frame), allow=allow_implausible)
