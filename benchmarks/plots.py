"""Figures of the studies (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from formulation.errors import DuettoInputError
from formulation.instance import Instance
from formulation.validator import ValidationReport


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_figure_path(path: str | Path, field: str = "output") -> Path:
    """``path`` if matplotlib can write its format (by suffix); else :class:`DuettoInputError` naming them."""
    from matplotlib.backend_bases import FigureCanvasBase

    target = Path(path)
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if target.suffix.lstrip(".").lower() not in formats:
        raise DuettoInputError(
            f"cannot write a figure as '{target.name}': the name must end in one of "
            + ", ".join(f".{f}" for f in formats),
            field=field,
        )
    return target


def _save(fig: Any, path: Path) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=130)
    except OSError as error:  # a path that cannot be written: the user's, one line
        raise DuettoInputError(f"cannot write the figure: {error.strerror or error}", source=str(path)) from None
    finally:
        _pyplot().close(fig)
    return path


def gap_boxplot(frame: pd.DataFrame, path: str | Path) -> Path:
    """Gap (%) per method: a box over instances; gaps to a bound only are drawn as hollow points."""
    plt = _pyplot()
    data = frame[frame["gap"].notna()]
    methods = [m for m in dict.fromkeys(frame["method"]) if m in set(data["method"])]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(methods) + 2), 4.2))
    if methods:
        series = [100 * data.loc[data["method"] == m, "gap"].astype(float).to_numpy() for m in methods]
        ax.boxplot(series, showfliers=False)
        ax.set_xticks(range(1, len(methods) + 1), methods, rotation=30, ha="right")
        rng = np.random.default_rng(0)
        for position, method in enumerate(methods, start=1):
            rows = data[data["method"] == method]
            for kind, style in (("optimum", {"color": "C0"}), ("bound", {"facecolors": "none", "edgecolors": "C3"})):
                values = 100 * rows.loc[rows["gap_kind"] == kind, "gap"].astype(float).to_numpy()
                if len(values):
                    jitter = position + rng.uniform(-0.18, 0.18, len(values))
                    ax.scatter(jitter, values, s=12, alpha=0.7, label=f"vs {kind}", **style)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=8)
    ax.set_ylabel("gap to optimum / bound (%)")
    ax.set_title("Optimality gap per method (total JCT, slotted)")
    ax.axhline(0, color="grey", lw=0.6)
    return _save(fig, Path(path))


def gap_vs_n(frame: pd.DataFrame, path: str | Path) -> Path:
    """Median gap (%) against a proven optimum against the number of jobs per method, with the p95 as a
    whisker (instances without a proof are left out: their gap is only bounded)."""
    plt = _pyplot()
    data = frame[frame["gap"].notna() & (frame["gap_kind"] == "optimum")]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for i, (method, rows) in enumerate(data.groupby("method", sort=False)):
        grouped = rows.groupby("n")["gap"]
        stats = pd.DataFrame({"median": grouped.median(), "p95": grouped.quantile(0.95)}).sort_index()
        n = stats.index.to_numpy(dtype=float) * (1 + 0.01 * i)  # a small offset so markers do not hide
        ax.errorbar(
            n,
            100 * stats["median"],
            yerr=[np.zeros(len(stats)), 100 * (stats["p95"] - stats["median"])],
            marker="o",
            capsize=3,
            label=str(method),
        )
    ax.set_xlabel("jobs (n)")
    ax.set_ylabel("gap to proven optimum (%): median, whisker to p95")
    ax.set_title("Gap against instance size (proven instances)")
    ax.axhline(0, color="grey", lw=0.6)
    if len(data):
        ax.legend(fontsize=8)
    return _save(fig, Path(path))


def scaling_loglog(frame: pd.DataFrame, fits: Mapping[str, tuple[float, float]], path: str | Path) -> Path:
    """Median wall time against job count per method on log-log axes, with the fitted power law
    ``t = c·n^b`` (legend shows ``b``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5))
    palette = plt.get_cmap("tab20")
    markers = "osD^v<>px*h"
    for i, (method, rows) in enumerate(frame.groupby("method", sort=False)):
        stats = rows.groupby("n")["seconds"].median().sort_index()
        color = palette(i % 20)
        fit = fits.get(str(method))
        label = f"{method} (b={fit[1]:.2f})" if fit and math.isfinite(fit[1]) else str(method)
        ax.plot(stats.index, stats.to_numpy(), markers[i % len(markers)], color=color, label=label)
        if fit and math.isfinite(fit[1]):
            xs = np.geomspace(float(stats.index.min()), float(stats.index.max()), 20)
            ax.plot(xs, math.exp(fit[0]) * xs ** fit[1], "-", color=color, lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("jobs (n)")
    ax.set_ylabel("wall seconds (median)")
    ax.set_title("Time to schedule against job count")
    ax.legend(fontsize=7)
    return _save(fig, Path(path))


def jct_cdf(jcts: Mapping[str, Sequence[float]], path: str | Path, *, unit: float = 3600.0) -> Path:
    """Empirical CDF of JCT per policy (hours by default)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for name, values in jcts.items():
        data = np.sort(np.asarray(values, dtype=float)) / unit
        if len(data):
            ax.step(data, np.arange(1, len(data) + 1) / len(data), where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (hours)" if unit == 3600.0 else f"JCT (×{unit:g} s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT distribution")
    ax.legend(fontsize=8)
    return _save(fig, Path(path))


def gantt(
    instance: Instance, report: ValidationReport, path: str | Path, *, title: str | None = None, max_labels: int = 400
) -> Path:
    """Per-GPU Gantt chart from the validator's occupancy intervals: one row per GPU, one bar per job;
    a GPU holding two jobs at once is drawn as two half-height bars (hatched: shared)."""
    plt = _pyplot()
    num_gpus = instance.cluster.num_gpus
    order = {job.id: i for i, job in enumerate(instance.jobs)}
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(11, max(2.5, 0.28 * num_gpus + 1.2)))
    labelled = 0
    first = min((o.start for o in report.occupancy), default=0.0)
    last = max((o.end for o in report.occupancy), default=1.0)
    min_label = 0.03 * max(last - first, 1e-9)  # bars narrower than this get no text (it would overlap)
    for item in report.occupancy:
        share = len(item.jobs)
        height = 0.8 / share
        for k, job_id in enumerate(item.jobs):
            bottom = item.gpu - 0.4 + k * height
            ax.broken_barh(
                [(item.start, item.end - item.start)],
                (bottom, height),
                facecolors=cmap(order.get(job_id, 0) % 20),
                edgecolor="black",
                linewidth=0.3,
                hatch="//" if share > 1 else None,
            )
            if labelled < max_labels and (item.end - item.start) >= min_label:
                ax.text(
                    item.start + (item.end - item.start) / 2,
                    bottom + height / 2,
                    job_id,
                    ha="center",
                    va="center",
                    fontsize=5,
                    clip_on=True,
                )
                labelled += 1
    gpn = instance.cluster.gpus_per_node
    for node in range(1, instance.cluster.nodes):
        ax.axhline(node * gpn - 0.5, color="grey", lw=0.5)
    ax.set_ylim(-0.6, num_gpus - 0.4)
    ax.set_yticks(range(num_gpus), [f"{g // gpn}:{g % gpn}" for g in range(num_gpus)], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_ylabel("GPU (node:index)")
    ax.set_title(title or f"{instance.name}: schedule per GPU")
    return _save(fig, Path(path))


def line_sweep(
    frame: pd.DataFrame, x: str, y: str, hue: str, path: str | Path, *, xlabel: str, ylabel: str, title: str
) -> Path:
    """A line per ``hue`` value of ``y`` against ``x``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for name, rows in frame.groupby(hue, sort=False):
        rows = rows.sort_values(x)
        ax.plot(rows[x], rows[y], marker="o", label=str(name))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, Path(path))


def grouped_bars(
    frame: pd.DataFrame, category: str, series: str, value: str, path: str | Path, *, ylabel: str, title: str
) -> Path:
    """Grouped bar chart: one group per ``category``, one bar per ``series``."""
    plt = _pyplot()
    categories = list(dict.fromkeys(frame[category]))
    names = list(dict.fromkeys(frame[series]))
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(categories) + 2), 4.2))
    for i, name in enumerate(names):
        rows = frame[frame[series] == name].set_index(category)
        values = [float(rows[value].get(c, math.nan)) for c in categories]
        ax.bar(np.arange(len(categories)) + i * width, values, width, label=str(name))
    ax.set_xticks(np.arange(len(categories)) + width * (len(names) - 1) / 2, categories)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, Path(path))
