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


def _integer_job_ticks(ax: Any, sizes: Sequence[float], *, log: bool = False, most: int = 12) -> None:
    """Ticks of a job-count axis are whole numbers: at the measured sizes when there are at most ``most``
    of them, else where matplotlib puts them, printed as integers (``1,000``, not ``10^3`` or ``2.5``)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, NullLocator

    values = sorted({round(v) for v in sizes})
    as_integer = FuncFormatter(lambda value, _: f"{value:,.0f}")
    if values and len(values) <= most:
        ax.set_xticks(values, [f"{v:,}" for v in values])
        ax.xaxis.set_minor_locator(NullLocator())  # a log axis's unlabelled minor ticks would read as sizes
        return
    if not log:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_major_formatter(as_integer)
    ax.xaxis.set_minor_formatter(NullFormatter())


def gap_vs_n_figure(frame: pd.DataFrame) -> Any:
    """Median gap (%) against a proven optimum against the number of jobs per method, with the p95 as a
    whisker (instances without a proof are left out: their gap is only bounded); a ``Figure``."""
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
    _integer_job_ticks(ax, data["n"].astype(float).tolist())
    if len(data):
        ax.legend(fontsize=8)
    return fig


def gap_vs_n(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write :func:`gap_vs_n_figure` to ``path``."""
    return _save(gap_vs_n_figure(frame), Path(path))


def scaling_loglog_figure(frame: pd.DataFrame, fits: Mapping[str, tuple[float, float]]) -> Any:
    """Median wall time against job count per method on log-log axes, with the fitted power law
    ``t = c·n^b`` (legend shows ``b``); a ``Figure``."""
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
    _integer_job_ticks(ax, frame["n"].astype(float).tolist(), log=True)
    ax.set_xlabel("jobs (n)")
    ax.set_ylabel("wall seconds (median)")
    ax.set_title("Time to schedule against job count")
    ax.legend(fontsize=7)
    return fig


def scaling_loglog(frame: pd.DataFrame, fits: Mapping[str, tuple[float, float]], path: str | Path) -> Path:
    """Write :func:`scaling_loglog_figure` to ``path``."""
    return _save(scaling_loglog_figure(frame, fits), Path(path))


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


#: A chart shows every GPU while at most this many are never used; beyond, unused GPUs get no row.
GANTT_MAX_EMPTY_ROWS = 8
#: Font size of the job labels on the bars (points).
GANTT_LABEL_POINTS = 5.0
#: Width of the Gantt chart (inches); its height follows the number of rows.
GANTT_WIDTH_INCHES = 11.0


def _text_width_points(text: str, points: float) -> float:
    """Width of ``text`` set in ``points``-point sans-serif, a little generous (0.62 em per character:
    digits and lower-case letters are narrower, so a label judged to fit does fit)."""
    return 0.62 * points * len(text)


def _wrap_entries(head: str, entries: Sequence[str], width: int) -> list[str]:
    """``head`` and the entries in lines of at most about ``width`` characters, never splitting an entry."""
    lines = [head]
    for entry in entries:
        if len(lines[-1]) + 3 + len(entry) > width:
            lines.append(entry)
        else:
            lines[-1] += "   " + entry
    return lines


def gantt_figure(
    instance: Instance,
    report: ValidationReport,
    *,
    title: str | None = None,
    max_labels: int = 2000,
    max_empty_rows: int = GANTT_MAX_EMPTY_ROWS,
) -> Any:
    """Per-GPU Gantt chart from the validator's occupancy intervals, as a matplotlib ``Figure`` (the
    caller saves or closes it; :func:`gantt` writes it to a file).

    * One row per GPU and one bar per job; a GPU holding two jobs at once is drawn as two half-height
      bars, hatched, and the legend says so.
    * A bar is labelled with its job id where the id fits inside it, else with the job's number
      (``1`` = the instance's first job) where that fits; the numbers used are keyed under the chart
      (``1 j0 · 2 j1 ...``), so no label needs hovering. At most ``max_labels`` labels.
    * GPUs that no job ever used get no row once there are more than ``max_empty_rows`` of them (a
      128-GPU cluster serving a small trace is not 96 empty rows); the title says how many are hidden.
    """
    from matplotlib.patches import Patch

    plt = _pyplot()
    num_gpus = instance.cluster.num_gpus
    gpn = instance.cluster.gpus_per_node
    order = {job.id: i for i, job in enumerate(instance.jobs)}
    used = sorted({item.gpu for item in report.occupancy})
    hidden = num_gpus - len(used) if num_gpus - len(used) > max_empty_rows else 0
    rows = used if hidden else list(range(num_gpus))
    row_of = {gpu: row for row, gpu in enumerate(rows)}
    height_inches = max(2.5, 0.28 * len(rows) + 1.6)
    fig, ax = plt.subplots(figsize=(GANTT_WIDTH_INCHES, height_inches))
    cmap = plt.get_cmap("tab20")
    first = min((o.start for o in report.occupancy), default=0.0)
    last = max((o.end for o in report.occupancy), default=1.0)
    span = max(last - first, 1e-9)
    ax.set_xlim(first - 0.01 * span, last + 0.01 * span)
    # points per second of the x axis: the axes take about 85 % of the figure's width
    points_per_second = 0.85 * GANTT_WIDTH_INCHES * 72.0 / (1.02 * span)
    labelled = 0
    keyed: dict[str, int] = {}
    shared_drawn = False
    for item in report.occupancy:
        share = len(item.jobs)
        height = 0.8 / share
        width = item.end - item.start
        for k, job_id in enumerate(item.jobs):
            bottom = row_of[item.gpu] - 0.4 + k * height
            ax.broken_barh(
                [(item.start, width)],
                (bottom, height),
                facecolors=cmap(order.get(job_id, 0) % 20),
                edgecolor="black",
                linewidth=0.3,
                hatch="//" if share > 1 else None,
            )
            shared_drawn = shared_drawn or share > 1
            if labelled >= max_labels:
                continue
            room = width * points_per_second - 2.0  # a point of margin each side
            number = str(order.get(job_id, 0) + 1)
            if _text_width_points(job_id, GANTT_LABEL_POINTS) <= room:
                text = job_id
            elif _text_width_points(number, GANTT_LABEL_POINTS) <= room:
                text = number
                keyed[job_id] = order.get(job_id, 0) + 1
            else:
                continue
            ax.text(
                item.start + width / 2,
                bottom + height / 2,
                text,
                ha="center",
                va="center",
                fontsize=GANTT_LABEL_POINTS,
                clip_on=True,
                gid=f"label:{job_id}",
                # over a hatched (shared) bar the text sits on a light patch to stay legible
                bbox={"facecolor": "white", "alpha": 0.7, "pad": 0.4, "linewidth": 0} if share > 1 else None,
            )
            labelled += 1
    for row in range(1, len(rows)):  # a line between nodes
        if rows[row] // gpn != rows[row - 1] // gpn:
            ax.axhline(row - 0.5, color="grey", lw=0.5)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [f"{g // gpn}:{g % gpn}" for g in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_ylabel("GPU (node:index)")
    heading = title or f"{instance.name}: schedule per GPU"
    if hidden:
        heading += f"\n{hidden} of {num_gpus} GPUs never used (not drawn)"
    ax.set_title(heading, fontsize=9, loc="left")
    handles = [Patch(facecolor="lightgrey", edgecolor="black", linewidth=0.3, label="one job on the GPU")]
    if shared_drawn:
        handles.append(
            Patch(facecolor="white", edgecolor="black", linewidth=0.3, hatch="//", label="GPU shared by two jobs")
        )
    # above the axes, right: it takes no width from the bars (which decide what labels fit)
    ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=7, frameon=False)
    if keyed:
        entries = [f"{number} {job_id}" for job_id, number in sorted(keyed.items(), key=lambda kv: kv[1])]
        lines = _wrap_entries("job numbers:", entries, width=250)
        ax.annotate(
            "\n".join(lines),
            xy=(0.0, 0.0),
            xycoords="axes fraction",
            xytext=(0.0, -38.0),  # points: below the tick labels and the x label
            textcoords="offset points",
            ha="left",
            va="top",
            fontsize=GANTT_LABEL_POINTS,
            gid="job-key",
        )
        fig.set_size_inches(GANTT_WIDTH_INCHES, height_inches + len(lines) * 1.3 * GANTT_LABEL_POINTS / 72.0)
    return fig


def gantt(
    instance: Instance,
    report: ValidationReport,
    path: str | Path,
    *,
    title: str | None = None,
    max_labels: int = 2000,
    max_empty_rows: int = GANTT_MAX_EMPTY_ROWS,
) -> Path:
    """Write :func:`gantt_figure` to ``path`` (format by suffix)."""
    figure = gantt_figure(instance, report, title=title, max_labels=max_labels, max_empty_rows=max_empty_rows)
    return _save(figure, Path(path))


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
