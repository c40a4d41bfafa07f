"""SJF-BSBF Table III: which assumption decides Tiresias vs SJF-BSBF on the Pollux workloads (issue 16, item 6).

On ``workloads-1.5`` (240 jobs, 64 GPUs) duetto's replay has Tiresias ahead of SJF-BSBF where SJF-BSBF's
paper has SJF-BSBF 27-33 % ahead. docs/results.md lists suspected reasons; this study tests three with
data, alone and together:

* **pair-specific ratios** instead of the loader's constant ξ = 1.5: Gavel's measured co-location
  throughputs (``gavel_pairwise_colocation.csv``, V100, one GPU each) mapped onto Pollux's six
  applications by model family (:data:`FAMILY`); a pair's ratio is the geometric mean over Gavel's
  batch-size variants of the two job types that fit together (ratios below 1, measurement noise, are
  clipped to 1; a pair none of whose variants fit may not share);
* **a restart cost per preemption**: :data:`RESTART_COST` seconds, the checkpoint-restart delay
  Pollux's own simulator charges at every re-allocation (petuum/adaptdl, branch osdi21-artifact,
  ``simulator/simulator.py``, ``Job.reallocate``: ``self.rescale_time = 30``); Muri's profiled start
  overheads of its eight models are 4-46 s (Rivendile/Muri ``simulator/run_sim.py`` lines 28-35);
* **the load** (SJF-BSBF Fig. 6a: "we scale the baseline workload of 240 jobs ... ranging from 120 jobs
  to 480 jobs"): each workload scaled to ``factor × 240`` jobs over the same period (:func:`scale_workload`).

Run: ``python -m benchmarks.table3_assumptions --out results/table3-assumptions`` (resumable: each
variant is a replay into its own folder). docs/results.md, "SJF-BSBF vs Tiresias on workloads-1.5: the
assumptions tested", has the table it prints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer

from formulation.errors import DuettoInputError
from formulation.paths import shared_data_dir

#: Pollux application → the Gavel job type of the same model family (docs/results.md says why).
FAMILY: dict[str, str] = {
    "bert": "Transformer",  # BERT is a Transformer encoder; Gavel's Transformer: WMT translation
    "cifar10": "ResNet-18",  # the same model and data set (ResNet-18 on CIFAR-10) in both
    "deepspeech2": "LM",  # recurrent (GRU) speech model; Gavel's LM: a recurrent (LSTM) language model
    "imagenet": "ResNet-50",  # the same model and data set (ResNet-50 on ImageNet) in both
    "ncf": "Recommendation",  # collaborative filtering on MovieLens in both (NCF; Gavel: an autoencoder)
    "yolov3": "ResNet-50",  # Darknet-53 backbone: a deep residual CNN on full-size images
}
#: Seconds lost per preemption: Pollux's simulator's checkpoint-restart delay (``rescale_time = 30``).
RESTART_COST = 30.0
#: Job-count factors of the load sweep (× 240 jobs: 120, 240, 360, 480).
LOAD_FACTORS: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
DEFAULT_POLICIES: tuple[str, ...] = ("tiresias", "sjf-bsbf", "sjf-ffs", "sjf")
BASE_JOBS = 240
HOUR = 3600.0


def family_pair_table(pairwise: str | Path | None = None, worker_type: str = "v100") -> pd.DataFrame:
    """Ratios between Pollux's applications from Gavel's measured pairs of the mapped families.

    Parameters
    ----------
    pairwise
        ``gavel_pairwise_colocation.csv`` (default: the shared copy).
    worker_type
        Gavel GPU type (``v100``, ``p100``, ``k80``).

    Returns
    -------
    pandas.DataFrame
        ``victim, other, ratio, variants, fitting`` for every ordered pair of applications (a job next
        to another job of its own application too); ``ratio`` empty where no variant pair fits. The
        ``victim,other,ratio`` columns are a plain measured pair table (``--interference table:FILE``).
    """
    path = Path(pairwise) if pairwise is not None else shared_data_dir() / "gavel" / "gavel_pairwise_colocation.csv"
    if not path.is_file():
        raise DuettoInputError("no such file", source=str(path))
    frame = pd.read_csv(path)
    frame = frame[(frame["worker_type"] == worker_type) & (frame["scale_factor"] == 1)]
    if frame.empty:
        raise DuettoInputError(f"no scale-factor-1 pairs for worker type {worker_type!r}", source=str(path))
    family = {name: name.split(" (")[0] for name in set(frame["job_type_a"]) | set(frame["job_type_b"])}
    # each row measures both directions: a next to b (slowdown_a) and b next to a (slowdown_b)
    directed = pd.concat(
        [
            pd.DataFrame(
                {
                    "victim": frame["job_type_a"].map(family),
                    "other": frame["job_type_b"].map(family),
                    "slowdown": frame["slowdown_a"],
                    "feasible": frame["feasible"],
                }
            ),
            pd.DataFrame(
                {
                    "victim": frame["job_type_b"].map(family),
                    "other": frame["job_type_a"].map(family),
                    "slowdown": frame["slowdown_b"],
                    "feasible": frame["feasible"],
                }
            ),
        ]
    )
    records = []
    for victim, victim_family in FAMILY.items():
        for other, other_family in FAMILY.items():
            rows = directed[(directed["victim"] == victim_family) & (directed["other"] == other_family)]
            fitting = rows[(rows["feasible"] == 1) & (rows["slowdown"] > 0)]
            ratio = float(np.exp(np.log(fitting["slowdown"]).mean())) if len(fitting) else math.nan
            records.append(
                {
                    "victim": victim,
                    "other": other,
                    "ratio": max(1.0, ratio) if math.isfinite(ratio) else math.nan,
                    "variants": len(rows),
                    "fitting": len(fitting),
                }
            )
    return pd.DataFrame(records)


def scale_workload(path: str | Path, factor: float, seed: int = 0) -> pd.DataFrame:
    """A Pollux workload with ``round(factor × jobs)`` jobs over the same period (SJF-BSBF Fig. 6a's load).

    Below 1: a seeded sample of the jobs without replacement. Above 1: every job plus extra jobs, each a
    copy of a job drawn at random arriving at the submission time of another job drawn at random (so the
    job mix and the arrival-time distribution, busy hours included, stay those of the workload). Seeded
    with ``seed`` and the workload's name; rows sorted by submission time, names made unique.

    Parameters
    ----------
    path
        A Pollux workload CSV (``name,time,application,num_replicas,batch_size``).
    factor
        Jobs relative to the file (> 0).
    seed
        Random seed.

    Returns
    -------
    pandas.DataFrame
        The scaled workload, same columns.
    """
    if not factor > 0:
        raise DuettoInputError(f"must be > 0, got {factor}", field="factor")
    frame = pd.read_csv(path)
    count = round(factor * len(frame))
    rng = np.random.default_rng([seed, sum(Path(path).name.encode())])
    if count <= len(frame):
        chosen = frame.iloc[np.sort(rng.choice(len(frame), size=count, replace=False))].copy()
    else:
        extra = frame.iloc[rng.integers(0, len(frame), size=count - len(frame))].copy()
        extra["time"] = frame["time"].to_numpy()[rng.integers(0, len(frame), size=len(extra))]
        extra["name"] = [f"{name}-copy{i}" for i, name in enumerate(extra["name"])]
        chosen = pd.concat([frame, extra])
    return chosen.sort_values("time", kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class Variant:
    """One combination of assumptions."""

    pairs: bool
    restart_cost: float
    factor: float

    @property
    def label(self) -> str:
        parts = ["pair ratios (Gavel)" if self.pairs else "ξ = 1.5"]
        parts.append(f"restart {self.restart_cost:g} s")
        parts.append(f"{round(self.factor * BASE_JOBS)} jobs")
        return ", ".join(parts)

    @property
    def folder(self) -> str:
        return f"{'pairs' if self.pairs else 'const'}-r{self.restart_cost:g}-x{self.factor:g}"


def default_variants(restart_cost: float = RESTART_COST, factors: Sequence[float] = LOAD_FACTORS) -> list[Variant]:
    """Each assumption alone at 240 jobs, both together, then the load sweep without and with both."""
    variants = [
        Variant(False, 0.0, 1.0),
        Variant(True, 0.0, 1.0),
        Variant(False, restart_cost, 1.0),
        Variant(True, restart_cost, 1.0),
    ]
    for factor in factors:
        if factor != 1.0:
            variants += [Variant(False, 0.0, factor), Variant(True, restart_cost, factor)]
    return variants


def run_study(
    out: str | Path,
    *,
    workloads: int = 8,
    policies: Sequence[str] = DEFAULT_POLICIES,
    variants: Sequence[Variant] | None = None,
    workers: int | None = 1,
    seed: int = 0,
) -> pd.DataFrame:
    """Replay ``workloads-1.5`` under every variant; one row per variant × policy.

    Parameters
    ----------
    out
        Output folder (``pairs.csv``, ``workloads-x<factor>/``, one replay folder per variant,
        ``assumptions.csv``). A rerun resumes.
    workloads
        How many of the 8 workloads (``workload-1.csv`` ...).
    policies
        Policies to compare.
    variants
        Default :func:`default_variants`.
    workers
        Parallel simulations.
    seed
        Seed of the load scaling.

    Returns
    -------
    pandas.DataFrame
        ``variant, pairs, restart_cost, jobs, policy, jct_avg_h, large_jct_avg_h, small_jct_avg_h,
        preemptions, validated, rank, beats_tiresias`` (``jct_avg_h`` pools the workloads' jobs;
        ``beats_tiresias``: in how many workloads the policy's average JCT is below Tiresias').
    """
    from benchmarks.replay import ReplayStudy, run_replay

    if not 1 <= workloads <= 8:
        raise DuettoInputError(f"must be 1-8, got {workloads}", field="workloads")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    source = shared_data_dir() / "pollux" / "workloads-1.5"
    files = [source / f"workload-{i}.csv" for i in range(1, workloads + 1)]
    pairs_file = folder / "pairs.csv"
    family_pair_table()[["victim", "other", "ratio"]].to_csv(pairs_file, index=False)
    records = []
    for variant in variants if variants is not None else default_variants():
        paths = files
        if variant.factor != 1.0:
            scaled = folder / f"workloads-x{variant.factor:g}"
            scaled.mkdir(exist_ok=True)
            paths = []
            for file in files:
                target = scaled / file.name
                scale_workload(file, variant.factor, seed).to_csv(target, index=False)
                paths.append(target)
        study = ReplayStudy(
            trace="pollux",
            paths=tuple(str(p) for p in paths),
            policies=tuple(policies),
            interference=(f"table:{pairs_file}" if variant.pairs else "default",),
            restart_cost=variant.restart_cost,
            loader_options={"profiles_dir": str(source.parent / "profiles")},
        )
        outcome = run_replay(study, folder / variant.folder, workers=workers, progress=False, figures=False)
        rows = outcome.rows
        if not rows["validated"].all():
            raise RuntimeError(f"{variant.label}: an invalid schedule (see {folder / variant.folder})")
        per_file = rows.pivot_table(index="file", columns="policy", values="jct_avg")
        for policy, group in rows.groupby("policy"):
            jobs = group["jobs"].to_numpy(dtype=float)
            records.append(
                {
                    "variant": variant.label,
                    "pairs": variant.pairs,
                    "restart_cost": variant.restart_cost,
                    "jobs": round(variant.factor * BASE_JOBS),
                    "policy": policy,
                    "jct_avg_h": float(np.average(group["jct_avg"], weights=jobs)) / HOUR,
                    "large_jct_avg_h": float(np.average(group["large_jct_avg"], weights=group["large_jobs"])) / HOUR,
                    "small_jct_avg_h": float(np.average(group["small_jct_avg"], weights=group["small_jobs"])) / HOUR,
                    "preemptions": float(group["preemptions"].mean()),
                    "validated": bool(group["validated"].all()),
                    "beats_tiresias": int((per_file[policy] < per_file["tiresias"]).sum())
                    if "tiresias" in per_file
                    else 0,
                }
            )
    table = pd.DataFrame(records)
    table["rank"] = table.groupby("variant", sort=False)["jct_avg_h"].rank(method="min").astype(int)
    table.to_csv(folder / "assumptions.csv", index=False)
    return table


def ordering_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per variant: each policy's average JCT (h), the ordering, SJF-BSBF / Tiresias."""
    wide = table.pivot_table(index="variant", columns="policy", values="jct_avg_h", sort=False)
    order = [" < ".join(row.sort_values().index.tolist()) for _, row in wide.iterrows()]  # best first
    wide = wide.round(2)
    wide["ordering (best first)"] = order
    if {"sjf-bsbf", "tiresias"} <= set(table["policy"]):
        ratio = table.pivot_table(index="variant", columns="policy", values="jct_avg_h", sort=False)
        wide["sjf-bsbf / tiresias"] = (ratio["sjf-bsbf"] / ratio["tiresias"]).round(3)
        wins = table[table["policy"] == "sjf-bsbf"].set_index("variant")["beats_tiresias"]
        wide["workloads sjf-bsbf ahead"] = wins
    return wide


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` (with its index) as a Markdown table, numbers as they are."""
    header = [str(frame.index.name or ""), *map(str, frame.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in frame.iterrows():
        lines.append("| " + " | ".join([str(index), *(str(v) for v in row.tolist())]) + " |")
    return "\n".join(lines)


def main(
    out: Annotated[Path, typer.Option(help="output folder (a rerun resumes)")] = Path("results/table3-assumptions"),
    workloads: Annotated[int, typer.Option(help="how many of the 8 workloads-1.5 files")] = 8,
    workers: Annotated[int, typer.Option(help="parallel simulations")] = 1,
    restart_cost: Annotated[float, typer.Option(help="seconds per preemption (Pollux's simulator: 30)")] = RESTART_COST,
    seed: Annotated[int, typer.Option(help="seed of the load scaling")] = 0,
) -> None:
    """Replay SJF-BSBF's Table III workload under each assumption; print each one's effect on the ordering."""
    table = run_study(out, workloads=workloads, workers=workers, variants=default_variants(restart_cost), seed=seed)
    summary = ordering_table(table)
    summary.to_csv(Path(out) / "ordering.csv")
    typer.echo(markdown(summary))


if __name__ == "__main__":
    typer.run(main)
